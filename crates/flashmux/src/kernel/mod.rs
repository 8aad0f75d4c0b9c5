//! The kernel layer: the guest's (or, on bare metal, the host's) operating system above the block
//! layer — what turns an application's `read`, `write` and `fsync` into the block requests the
//! rest of flashmux serves.
//!
//! Its first part is the page cache (`pagecache.rs`): 4 KiB pages of files (a file may be a whole
//! block device) in the kernel's memory, their LRU lists, dirty state and accounting; read-ahead
//! per open stream (`readahead.rs`); the flusher that writes dirty pages back (`writeback.rs`).
//! The cache is a mechanism driven by calls with virtual time: it never performs I/O itself. Each
//! call returns the device I/O it needs (page extents, each with an [`IoId`]), and the caller
//! issues it and reports its completion (`read_done`, `write_done`). The caller also owns the
//! flusher's timer: it asks [`PageCache::flusher_wakeup_at`] and calls [`PageCache::flush`] then.
//!
//! Memory: per-page state is one slab entry per page cached (at most `capacity`) plus its index
//! entries; the per-file state exists only while a file has pages in the cache; per-stream
//! read-ahead state exists from `open_stream` to `close_stream` (bounded by what the caller
//! opens); the I/O in flight is at most one extent per page.

mod dirtyset;
mod freed;
pub mod ext4;
pub mod fs;
mod inflight;
mod invariants;
pub mod io;
pub mod journal;
pub mod kernels;
pub mod pagecache;
mod pageindex;
pub mod readahead;
mod tags;
pub mod truncate;
pub mod writeback;

#[cfg(test)]
mod tests;

pub use pagecache::{CacheStats, PageCache, PageState, ReadOutcome, WriteOutcome, WritebackCounts};
pub use writeback::{Invalidated, SyncResult, WriteReason, MAX_WRITEBACK_PAGES};

use crate::units::Nanos;
use serde::Serialize;

/// The page size, bytes.
pub const PAGE_SIZE: u64 = 4096;

/// A file of the page cache: a filesystem's inode or a whole block device.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize)]
pub struct FileId(pub u32);

/// An open stream of reads on a file (a `struct file`): it carries the read-ahead state.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize)]
pub struct StreamId(pub u32);

/// One device I/O the cache asked for; its completion is reported with this id.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize)]
pub struct IoId(pub u64);

/// Contiguous pages of one file: `pages` pages from page index `first`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize)]
pub struct Extent {
    pub file: FileId,
    pub first: u64,
    pub pages: u64,
}

impl Extent {
    /// The byte offset of the extent in its file.
    pub fn offset(&self) -> u64 {
        self.first * PAGE_SIZE
    }
    /// The extent's length in bytes.
    pub fn bytes(&self) -> u64 {
        self.pages * PAGE_SIZE
    }
    /// The page index one past the extent.
    pub fn end(&self) -> u64 {
        self.first + self.pages
    }
}

/// A device read the cache needs: the pages are locked until [`PageCache::read_done`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
pub struct ReadIo {
    pub id: IoId,
    pub extent: Extent,
}

/// A device write of dirty pages: they are under writeback until [`PageCache::write_done`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
pub struct WriteIo {
    pub id: IoId,
    pub extent: Extent,
    pub reason: WriteReason,
}

/// The page cache's settings, as Linux's sysctls name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PageCacheConfig {
    /// Pages the cache may hold (from the kernel's memory).
    pub capacity_pages: u64,
    /// The largest read-ahead window, KiB (`/sys/block/<dev>/queue/read_ahead_kb`, 128).
    pub read_ahead_kb: u64,
    /// Percent of the capacity at which writers are throttled (`vm.dirty_ratio`, 20).
    pub dirty_ratio: u64,
    /// Bytes at which writers are throttled; 0 = use `dirty_ratio` (`vm.dirty_bytes`, 0).
    pub dirty_bytes: u64,
    /// Percent of the capacity at which background writeback starts
    /// (`vm.dirty_background_ratio`, 10).
    pub dirty_background_ratio: u64,
    /// Bytes at which background writeback starts; 0 = use the ratio
    /// (`vm.dirty_background_bytes`, 0).
    pub dirty_background_bytes: u64,
    /// The flusher's period, centiseconds; 0 = no periodic writeback
    /// (`vm.dirty_writeback_centisecs`, 500).
    pub dirty_writeback_centisecs: u64,
    /// Age at which dirty data is written by the periodic flush, centiseconds
    /// (`vm.dirty_expire_centisecs`, 3000).
    pub dirty_expire_centisecs: u64,
    /// The largest device I/O the cache asks for, bytes (the block layer's `max_sectors_kb`):
    /// contiguous pages beyond it become several extents.
    pub max_extent_bytes: u64,
}

impl Default for PageCacheConfig {
    fn default() -> Self {
        PageCacheConfig {
            capacity_pages: 262_144, // 1 GiB
            read_ahead_kb: 128,
            dirty_ratio: 20,
            dirty_bytes: 0,
            dirty_background_ratio: 10,
            dirty_background_bytes: 0,
            dirty_writeback_centisecs: 500,
            dirty_expire_centisecs: 3000,
            max_extent_bytes: 128 << 10,
        }
    }
}

impl PageCacheConfig {
    /// Checks the settings; the error names the key.
    pub fn validate(&self) -> Result<(), CacheError> {
        let bad =
            |key: &'static str, value: u64, expected: &'static str| Err(CacheError::Config { key, value, expected });
        if self.capacity_pages < 16 || self.capacity_pages > u32::MAX as u64 - 1 {
            return bad("capacity_pages", self.capacity_pages, "16 to 4294967294 pages");
        }
        if self.read_ahead_kb % 4 != 0 || self.read_ahead_kb > 1 << 20 {
            return bad("read_ahead_kb", self.read_ahead_kb, "a multiple of 4 KiB, at most 1 GiB");
        }
        if self.dirty_ratio > 100 {
            return bad("dirty_ratio", self.dirty_ratio, "a percentage, 0 to 100");
        }
        if self.dirty_background_ratio > 100 {
            return bad("dirty_background_ratio", self.dirty_background_ratio, "a percentage, 0 to 100");
        }
        if self.dirty_bytes != 0 && self.dirty_bytes < 2 * PAGE_SIZE {
            return bad("dirty_bytes", self.dirty_bytes, "0 (use dirty_ratio) or at least two pages (8192)");
        }
        if self.dirty_expire_centisecs > 1 << 40 {
            return bad("dirty_expire_centisecs", self.dirty_expire_centisecs, "at most 2^40 centiseconds");
        }
        if self.dirty_writeback_centisecs > 1 << 40 {
            return bad("dirty_writeback_centisecs", self.dirty_writeback_centisecs, "at most 2^40 centiseconds");
        }
        if self.max_extent_bytes < PAGE_SIZE || self.max_extent_bytes % PAGE_SIZE != 0 {
            return bad("max_extent_bytes", self.max_extent_bytes, "a whole number of 4 KiB pages, at least one");
        }
        Ok(())
    }
}

/// A kernel above the block layer (`[kernel]`): what a scenario with one runs its buffered
/// (`direct=0`) jobs through. Each VM has its own; on bare metal the tenants share the host's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct KernelConfig {
    /// `[kernel.pagecache]`; `max_extent_bytes` is the block layer's `max_sectors_kb`.
    pub pagecache: PageCacheConfig,
    /// The time to copy one 4 KiB page between the page cache and the application
    /// (`page_copy`, 500 ns: about 8 GB/s, one core's `copy_to_user` of cached data).
    pub page_copy: Nanos,
    /// A kernel per tenant (`per_tenant`): each tenant a VM or machine of its own. Always so in
    /// a VM mode; on bare metal the default is one kernel that every tenant shares (the host's),
    /// and `per_tenant = true` gives each its own without modelling a VM's I/O path.
    pub per_tenant: bool,
    /// The filesystem on each tenant's region (`filesystem`, none): with ext4 each buffered job
    /// reads and writes a file of its own on it.
    pub filesystem: kernels::Filesystem,
    /// ext4's `discard` mount option (`discard`, off as ext4's default): the blocks a
    /// transaction freed are trimmed once it has committed.
    pub discard: bool,
    /// The CPU time of the metadata system calls (`[kernel.calls]`): what a create, open, close,
    /// stat or unlink costs the application beyond any I/O it waits for.
    pub calls: CallCosts,
    /// The tags for the kernel's own device requests (`nr_requests`; by default the tag set of
    /// its block device with the scheduler `none`: `host.queue_depth` on bare metal,
    /// `virt.queue_size` in a VM, none under an open-channel drive's host FTL, whose driver is
    /// bio-based): at most this many at a time, the rest wait (`tags.rs`). `None`: no limit.
    pub nr_requests: Option<u32>,
}

/// A metadata system call on a file that returns once made, by what it costs
/// (`[kernel.calls]`; a delete, which waits for the I/O on the file's pages, costs `unlink`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaCall {
    Create,
    Open,
    Close,
    /// `stat` of a file or a directory.
    Stat,
    Mkdir,
    /// `rmdir` of an empty directory.
    Rmdir,
}

/// The time each metadata system call takes on the application's thread: the system call and
/// the filesystem's in-memory work (lookup, inode and bitmap updates into the running journal
/// transaction; no I/O). Measured on ext4 of this project's reference machine (Linux 6.18, a
/// 2 GiB loop device; 2,000 calls of each timed with `clock_gettime`, the median of five runs,
/// `scripts/time-ext4-calls.sh`): docs/MODEL.md §3c.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CallCosts {
    /// `open(O_CREAT)` of a new file: a directory entry, an inode, its bitmap.
    pub create: Nanos,
    /// `open` of an existing file.
    pub open: Nanos,
    pub close: Nanos,
    /// `stat` of a file.
    pub stat: Nanos,
    /// `unlink` of a file (its blocks freed into the journal; a file of one 4 KiB block).
    pub unlink: Nanos,
    /// `mkdir`: a directory entry, an inode and the directory's first block.
    pub mkdir: Nanos,
    /// `rmdir` of an empty directory.
    pub rmdir: Nanos,
}

impl Default for CallCosts {
    fn default() -> Self {
        CallCosts {
            create: Nanos(21_700),
            open: Nanos(1_500),
            close: Nanos(500),
            stat: Nanos(800),
            unlink: Nanos(12_200),
            mkdir: Nanos(27_900),
            rmdir: Nanos(15_100),
        }
    }
}

impl CallCosts {
    /// The keys of `[kernel.calls]`, each with its cost.
    pub fn named(&self) -> [(&'static str, Nanos); 7] {
        [
            ("create", self.create),
            ("open", self.open),
            ("close", self.close),
            ("stat", self.stat),
            ("unlink", self.unlink),
            ("mkdir", self.mkdir),
            ("rmdir", self.rmdir),
        ]
    }

    /// The cost of `call`.
    pub fn of(&self, call: MetaCall) -> Nanos {
        match call {
            MetaCall::Create => self.create,
            MetaCall::Open => self.open,
            MetaCall::Close => self.close,
            MetaCall::Stat => self.stat,
            MetaCall::Mkdir => self.mkdir,
            MetaCall::Rmdir => self.rmdir,
        }
    }
}

impl KernelConfig {
    pub const DEFAULT_PAGE_COPY: Nanos = Nanos(500);

    pub fn validate(&self) -> Result<(), String> {
        if self.page_copy == Nanos::ZERO {
            // A cache hit would take no time at all: a job of hits would never let time pass.
            return Err("kernel.page_copy: must be longer than zero".into());
        }
        for (key, cost) in self.calls.named() {
            if cost == Nanos::ZERO {
                // A workload of such calls alone would never let time pass.
                return Err(format!("kernel.calls.{key}: must be longer than zero"));
            }
        }
        if self.nr_requests == Some(0) {
            return Err("kernel.nr_requests: 0: expected at least 1 request".into());
        }
        self.pagecache.validate().map_err(|e| e.to_string())
    }
}

/// A call the page cache refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    #[error("kernel.pagecache.{key}: {value}: expected {expected}")]
    Config { key: &'static str, value: u64, expected: &'static str },
    #[error("{op} of {len} bytes at offset {offset}: expected a length of at least one byte, ending below 2^63")]
    BadRange { op: &'static str, offset: u64, len: u64 },
    #[error("{op} of {pages} pages: more than the cache's capacity of {capacity} pages")]
    TooLarge { op: &'static str, pages: u64, capacity: u64 },
    #[error("stream {0:?} is not open")]
    UnknownStream(StreamId),
    #[error("stream {stream:?} was opened on file {opened:?}, not {used:?}")]
    StreamFile { stream: StreamId, opened: FileId, used: FileId },
    #[error("{op}: {id:?} is not a {expected} in flight")]
    UnknownIo { op: &'static str, id: IoId, expected: &'static str },
    #[error("time went back: {now} ns is before {clock} ns, the time of the previous call")]
    TimeWentBack { now: u64, clock: u64 },
}
