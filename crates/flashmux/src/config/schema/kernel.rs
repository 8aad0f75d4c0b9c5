//! The `[kernel]` section: a kernel above the block layer, with its page cache
//! (`[kernel.pagecache]`, keys named as Linux's sysctls and sysfs files name them).

use super::*;
use crate::kernel::{CallCosts, KernelConfig, PageCacheConfig, PAGE_SIZE};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct KernelSection {
    pub(super) page_copy: Option<Duration>,
    pub(super) per_tenant: Option<bool>,
    pub(super) filesystem: Option<crate::kernel::kernels::Filesystem>,
    pub(super) discard: Option<bool>,
    pub(super) nr_requests: Option<u32>,
    #[serde(default)]
    pub(super) pagecache: PageCacheSection,
    #[serde(default)]
    pub(super) calls: CallsSection,
}

/// `[kernel.calls]`: the metadata system calls' CPU time.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct CallsSection {
    pub(super) create: Option<Duration>,
    pub(super) open: Option<Duration>,
    pub(super) close: Option<Duration>,
    pub(super) stat: Option<Duration>,
    pub(super) unlink: Option<Duration>,
    pub(super) mkdir: Option<Duration>,
    pub(super) rmdir: Option<Duration>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct PageCacheSection {
    pub(super) capacity: Option<Size>,
    pub(super) read_ahead_kb: Option<u64>,
    pub(super) dirty_ratio: Option<u64>,
    pub(super) dirty_background_ratio: Option<u64>,
    pub(super) dirty_bytes: Option<Size>,
    pub(super) dirty_background_bytes: Option<Size>,
    pub(super) dirty_writeback_centisecs: Option<u64>,
    pub(super) dirty_expire_centisecs: Option<u64>,
}

/// The kernel's settings; its largest device request is the block layer's `max_sectors_kb`,
/// and its block device has `tags` tags (the default `nr_requests`; `None`: a bio-based driver,
/// no tags).
pub(super) fn resolve_kernel(
    ctx: &Ctx,
    k: &KernelSection,
    max_sectors: u64,
    vm: bool,
    tags: Option<u32>,
) -> Result<KernelConfig, ConfigError> {
    if vm && k.per_tenant == Some(false) {
        return Err(ctx.err("kernel.per_tenant: false: each VM has its own kernel (virt.mode is a VM mode)"));
    }
    let p = &k.pagecache;
    let d = PageCacheConfig::default();
    let capacity = p.capacity.as_ref().map_or(d.capacity_pages * PAGE_SIZE, |c| c.bytes);
    if capacity % PAGE_SIZE != 0 || capacity < 16 * PAGE_SIZE {
        let given = p.capacity.as_ref().map_or(String::new(), |c| c.text.clone());
        return Err(ctx.err(format!(
            "kernel.pagecache.capacity: \"{given}\": expected a whole number of 4 KiB pages, at least 64KiB"
        )));
    }
    let cfg = KernelConfig {
        pagecache: PageCacheConfig {
            capacity_pages: capacity / PAGE_SIZE,
            read_ahead_kb: p.read_ahead_kb.unwrap_or(d.read_ahead_kb),
            dirty_ratio: p.dirty_ratio.unwrap_or(d.dirty_ratio),
            dirty_bytes: p.dirty_bytes.as_ref().map_or(d.dirty_bytes, |s| s.bytes),
            dirty_background_ratio: p.dirty_background_ratio.unwrap_or(d.dirty_background_ratio),
            dirty_background_bytes: p.dirty_background_bytes.as_ref().map_or(d.dirty_background_bytes, |s| s.bytes),
            dirty_writeback_centisecs: p.dirty_writeback_centisecs.unwrap_or(d.dirty_writeback_centisecs),
            dirty_expire_centisecs: p.dirty_expire_centisecs.unwrap_or(d.dirty_expire_centisecs),
            // Whole pages: the cache asks for page extents.
            max_extent_bytes: (max_sectors / PAGE_SIZE).max(1) * PAGE_SIZE,
        },
        page_copy: or(&k.page_copy, KernelConfig::DEFAULT_PAGE_COPY),
        per_tenant: vm || k.per_tenant.unwrap_or(false),
        filesystem: k.filesystem.unwrap_or_default(),
        discard: k.discard.unwrap_or(false),
        nr_requests: k.nr_requests.or(tags),
        calls: {
            let (c, d) = (&k.calls, CallCosts::default());
            CallCosts {
                create: or(&c.create, d.create),
                open: or(&c.open, d.open),
                close: or(&c.close, d.close),
                stat: or(&c.stat, d.stat),
                unlink: or(&c.unlink, d.unlink),
                mkdir: or(&c.mkdir, d.mkdir),
                rmdir: or(&c.rmdir, d.rmdir),
            }
        },
    };
    if cfg.discard && cfg.filesystem == crate::kernel::kernels::Filesystem::None {
        return Err(ctx.err("kernel.discard: true: a mount option of a filesystem: set filesystem = \"ext4\""));
    }
    cfg.validate().map_err(|e| ctx.err(e))?;
    Ok(cfg)
}
