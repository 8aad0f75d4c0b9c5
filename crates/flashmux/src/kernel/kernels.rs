//! The kernels of a run: what the simulator drives when a scenario has a `[kernel]` — each VM's
//! own kernel, or on bare metal the host's one kernel that every tenant shares (or, with
//! `kernel.per_tenant`, a kernel per tenant without a VM's I/O path).
//!
//! # Model
//! A kernel is a [`KernelIo`] (page cache, flusher, fsync) plus what the simulator needs to drive
//! it: which tenants it serves, the flusher wake-up it has scheduled, and what it sent the device.
//! - A **buffered job** (fio's `direct=0`, its default) gives each read, write and sync to its
//!   tenant's kernel: the application sees the kernel's completion after the copy between the
//!   cache and its buffer (`page_copy` per 4 KiB page touched; none for a sync). Its reads use one
//!   read-ahead stream per job (each fio job opens the file: its own `struct file`).
//! - A **direct job** (`direct=1`, traces, exports) bypasses the cache; its writes and trims drop
//!   the clean cached pages they overwrite (`invalidate_inode_pages2_range` after a direct write,
//!   `truncate_inode_pages_range` before a discard). Simplified: dirty pages in the range are not
//!   written first (Linux's `filemap_write_and_wait_range` before a direct I/O).
//! - Each tenant is one file of its kernel ([`FileId`] = the tenant's index): its region of the
//!   drive, a block device (or partition) it opens. Pages are counted from the region's start (a
//!   region not aligned to 4 KiB is a misaligned partition: its pages straddle the drive's 4 KiB
//!   units), read-ahead stops at its end, and a device request for its last, partial page stops
//!   there too. Tenants whose regions overlap do not share cached pages (as
//!   if each opened its own device): the cache's pages, and the writeback of them, are each
//!   tenant's own, which is what a scheduler weighing tenants needs.
//! - The kernel's device requests (misses, read-ahead, writeback, flushes) are the tenant's own:
//!   they go down the same path as its direct requests, from its first job's thread.
//! - The flusher runs when its kernel asks ([`KernelIo::wake_at`]); the simulator keeps one
//!   wake-up scheduled per kernel ([`Kernels::arm`]) and a stale one does nothing.
//!
//! # Worked example
//! `page_copy` 500 ns. A buffered 16 KiB read that hits completes in the kernel at once and reaches
//! the application 4 × 500 ns = 2 µs later (plus the host's completion overhead); a 4 KiB write
//! dirties one page and reaches it 500 ns later; an fsync reaches it when its flush completes.
//!
//! # Simplifications
//! The system call's CPU time is the copy alone: with a CPU model (`[host.cpu]`, VMs), the cache's
//! hits take no thread's time. fio's `filename`/`nrfiles` are not files here (a tenant is one file).

use super::io::{AppOp, DevId, DevIo, KernelIo, KernelOut};
use super::{CacheError, CacheStats, FileId, KernelConfig, StreamId, PAGE_SIZE};
use crate::device::IoOp;
use crate::units::{JobId, Nanos, ReqId, SimTime, TenantId};
use serde::Serialize;

/// What one kernel did, for `results.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelResult {
    /// The tenants it served.
    pub tenants: Vec<usize>,
    pub capacity_pages: u64,
    pub page_cache: CacheStats,
    /// Pages cached, dirty and under writeback when the run ended.
    pub cached_pages: u64,
    pub dirty_pages: u64,
    pub writeback_pages: u64,
    /// The device requests the kernel sent: the cache's reads (misses and read-ahead), its
    /// writeback, and the flushes of syncs.
    pub device: KernelDeviceIo,
}

/// Device requests and bytes, by operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelDeviceIo {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
}

impl KernelDeviceIo {
    fn count(&mut self, d: &DevIo) {
        match d.op {
            IoOp::Read => (self.reads, self.read_bytes) = (self.reads + 1, self.read_bytes + d.len),
            IoOp::Write => (self.writes, self.write_bytes) = (self.writes + 1, self.write_bytes + d.len),
            IoOp::Flush => self.flushes += 1,
            IoOp::Trim => unreachable!("the page cache sends no trims"),
        }
    }
}

struct Kernel {
    io: KernelIo,
    tenants: Vec<usize>,
    /// The flusher wake-up scheduled, if any.
    armed: Option<SimTime>,
    sent: KernelDeviceIo,
}

/// Every kernel of the run (see the header).
pub struct Kernels {
    cfg: KernelConfig,
    kernels: Vec<Kernel>,
    /// Each tenant's kernel.
    of_tenant: Vec<usize>,
    /// Each tenant's region (offset, length): its file.
    regions: Vec<(u64, u64)>,
    /// Each job's read-ahead stream: `Some` for buffered jobs.
    streams: Vec<Option<StreamId>>,
}

impl Kernels {
    /// `per_tenant`: each tenant has its own kernel (a VM, or `kernel.per_tenant`), else one
    /// shared kernel. `jobs`: each
    /// job's tenant and whether it is buffered.
    /// `regions`: each tenant's (offset, length) on the device, its file.
    pub fn new(
        cfg: KernelConfig,
        regions: &[(u64, u64)],
        per_tenant: bool,
        jobs: &[(TenantId, bool)],
    ) -> Result<Kernels, CacheError> {
        let tenants = regions.len();
        let count = if per_tenant { tenants } else { 1 };
        let of_tenant: Vec<usize> = (0..tenants).map(|t| if per_tenant { t } else { 0 }).collect();
        let mut kernels = Vec::with_capacity(count);
        for k in 0..count {
            kernels.push(Kernel {
                io: KernelIo::new(cfg.pagecache)?,
                tenants: (0..tenants).filter(|&t| of_tenant[t] == k).collect(),
                armed: None,
                sent: KernelDeviceIo::default(),
            });
        }
        for (t, &(_, len)) in regions.iter().enumerate() {
            let k = &mut kernels[of_tenant[t]];
            k.io.cache_mut().set_file_end(file_of(TenantId(t as u16)), len.div_ceil(PAGE_SIZE));
        }
        let streams = jobs
            .iter()
            .map(|&(t, buffered)| {
                buffered.then(|| kernels[of_tenant[t.index()]].io.cache_mut().open_stream(file_of(t)))
            })
            .collect();
        Ok(Kernels { cfg, kernels, of_tenant, regions: regions.to_vec(), streams })
    }

    /// Whether job `j`'s I/O goes through its kernel's page cache.
    pub fn is_buffered(&self, j: JobId) -> bool {
        self.streams[j.index()].is_some()
    }

    /// Tenant `t`'s kernel.
    pub fn kernel_of(&self, t: TenantId) -> usize {
        self.of_tenant[t.index()]
    }

    /// Buffered job `j` of tenant `t` asks `op` (its request `r`) of its kernel at `now`.
    pub fn submit(
        &mut self,
        now: SimTime,
        t: TenantId,
        j: JobId,
        r: ReqId,
        (op, offset, len): (IoOp, u64, u64),
        out: &mut KernelOut,
    ) -> Result<(), CacheError> {
        let file = file_of(t);
        let app = match op {
            IoOp::Read => {
                AppOp::Read { file, offset: self.file_offset(t, offset), len, stream: self.streams[j.index()] }
            }
            IoOp::Write => AppOp::Write { file, offset: self.file_offset(t, offset), len },
            IoOp::Flush => AppOp::Fsync { file },
            IoOp::Trim => unreachable!("a buffered job's trims go to the device directly"),
        };
        let k = self.of_tenant[t.index()];
        self.counted(k, out, |io, out| io.submit(now, r, app, out))
    }

    /// A direct write or trim of tenant `t` over `[offset, offset + len)`: the clean cached pages
    /// it overwrites are dropped.
    pub fn direct_io(&mut self, now: SimTime, t: TenantId, op: IoOp, offset: u64, len: u64) -> Result<(), CacheError> {
        if !matches!(op, IoOp::Write | IoOp::Trim) || len == 0 {
            return Ok(());
        }
        let offset = self.file_offset(t, offset);
        let (first, end) = (offset / PAGE_SIZE, (offset + len).div_ceil(PAGE_SIZE));
        let k = self.of_tenant[t.index()];
        self.kernels[k].io.cache_mut().invalidate(now, file_of(t), first, end)?;
        Ok(())
    }

    /// Device request `id` of tenant `t`'s kernel completed at `now`.
    pub fn device_done(
        &mut self,
        now: SimTime,
        t: TenantId,
        id: DevId,
        op: IoOp,
        out: &mut KernelOut,
    ) -> Result<(), CacheError> {
        let k = self.of_tenant[t.index()];
        self.counted(k, out, |io, out| io.device_done(now, id, op, out))
    }

    /// Kernel `k`'s scheduled wake-up at `now`: its flusher runs if it still wants to.
    pub fn woke(&mut self, now: SimTime, k: usize, out: &mut KernelOut) -> Result<(), CacheError> {
        let kernel = &mut self.kernels[k];
        if kernel.armed.is_some_and(|a| a <= now) {
            kernel.armed = None;
        }
        if kernel.io.wake_at().is_some_and(|w| w <= now) {
            self.counted(k, out, |io, out| io.wake(now, out))?;
        }
        Ok(())
    }

    /// When kernel `k`'s flusher wants to run, if no wake-up at or before then is scheduled:
    /// the caller schedules one then (never before `now`).
    pub fn arm(&mut self, now: SimTime, k: usize) -> Option<SimTime> {
        let kernel = &mut self.kernels[k];
        let want = kernel.io.wake_at()?.max(now);
        if kernel.armed.is_some_and(|a| a <= want) {
            return None;
        }
        kernel.armed = Some(want);
        Some(want)
    }

    /// Tenant `t`'s device offset `offset` in its file.
    fn file_offset(&self, t: TenantId, offset: u64) -> u64 {
        let (start, len) = self.regions[t.index()];
        assert!(offset >= start && offset - start <= len, "offset {offset} is outside tenant {}'s region", t.index());
        offset - start
    }

    /// Where kernel request `d` is on the device: (offset, length), within its tenant's region.
    pub fn device_range(&self, d: &DevIo) -> (u64, u64) {
        let (start, len) = self.regions[tenant_of(d.file).index()];
        if d.op == IoOp::Flush {
            return (0, 0);
        }
        debug_assert!(d.offset < len, "a page the tenant's file does not have");
        (start + d.offset, d.len.min(len - d.offset))
    }

    /// The time the application's buffer takes to fill or empty after the kernel completed its
    /// request: `page_copy` per page touched.
    pub fn copy_time(&self, op: IoOp, offset: u64, len: u64) -> Nanos {
        if !matches!(op, IoOp::Read | IoOp::Write) || len == 0 {
            return Nanos::ZERO;
        }
        let pages = (offset + len).div_ceil(PAGE_SIZE) - offset / PAGE_SIZE;
        Nanos(self.cfg.page_copy.0 * pages)
    }

    pub fn len(&self) -> usize {
        self.kernels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }

    /// Application requests in the kernels.
    pub fn pending(&self) -> usize {
        self.kernels.iter().map(|k| k.io.pending()).sum()
    }

    pub fn results(&self) -> Vec<KernelResult> {
        self.kernels
            .iter()
            .map(|k| {
                let c = k.io.cache();
                KernelResult {
                    tenants: k.tenants.clone(),
                    capacity_pages: c.config().capacity_pages,
                    page_cache: *c.stats(),
                    cached_pages: c.cached_pages(),
                    dirty_pages: c.dirty_pages(),
                    writeback_pages: c.writeback_pages(),
                    device: k.sent,
                }
            })
            .collect()
    }

    pub fn check_invariants(&self) {
        for k in &self.kernels {
            k.io.check_invariants();
        }
    }

    /// Runs `f` on kernel `k` and counts the device requests it added to `out`.
    fn counted(
        &mut self,
        k: usize,
        out: &mut KernelOut,
        f: impl FnOnce(&mut KernelIo, &mut KernelOut) -> Result<(), CacheError>,
    ) -> Result<(), CacheError> {
        let before = out.device.len();
        let kernel = &mut self.kernels[k];
        f(&mut kernel.io, out)?;
        for d in &out.device[before..] {
            kernel.sent.count(d);
        }
        Ok(())
    }
}

/// Tenant `t`'s file in its kernel.
pub fn file_of(t: TenantId) -> FileId {
    FileId(t.index() as u32)
}

/// The tenant a kernel's file belongs to.
pub fn tenant_of(f: FileId) -> TenantId {
    TenantId(f.0 as u16)
}
