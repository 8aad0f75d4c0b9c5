//! The kernel's I/O path: applications' buffered reads, writes and fsyncs in, the device
//! requests they and the kernel's own work need out — what the simulator drives (the page cache
//! alone only answers single calls).
//!
//! # Model
//! [`KernelIo`] owns a [`PageCache`] and the state of every application request in it. For each
//! request it is given (`submit`) it calls the cache and:
//! - a **read** that hits completes at once; one that misses waits for the device reads the
//!   cache asked for (its misses and read-ahead), which go out as device requests;
//! - a **write** completes at once when its pages become dirty; a writer the cache throttles
//!   (`dirty_ratio`), or that finds no free page, is held and retried, in arrival order, after
//!   each device completion that leaves the cache under its dirty threshold; a write that needs a page read first waits for that read and is
//!   retried;
//! - an **fsync** writes the file's dirty pages and waits for them and for the file's writes
//!   already in flight (again, if pages were dirtied under writeback), then sends the device a
//!   flush (`blkdev_issue_flush`, what ext4 sends without a journal) and completes when it does;
//! - a **truncate** (`truncate`, `unlink`: the file's pages from a page on) drops the pages
//!   (`truncate.rs`) and completes once the reads and writes in flight on them have completed
//!   (at once if none); held requests are tried again, as the pages freed or the dirty pages
//!   cancelled may let them go on.
//!
//! The **flusher** is the kernel's own: [`KernelIo::wake_at`] says when it wants to run (the
//! cache's periodic, background and memory-pressure writeback) and [`KernelIo::wake`] runs it;
//! its writes are device requests that no application request waits for. Each device request
//! is reported done with [`KernelIo::device_done`]; what became complete is handed back.
//!
//! # Worked example
//! Capacity 64 pages. An application writes 4 KiB at 0 (done at once: one dirty page), reads
//! 8 KiB at 64 KiB without a stream (one device read of 8 KiB, no read-ahead; the read completes
//! when it does), then fsyncs: the cache writes page 0 (a device write of 4 KiB); when it
//! completes a device flush goes out; when that completes the fsync is done.
//!
//! # Source
//! Linux `mm/filemap.c` (`filemap_read`, `generic_perform_write`), `mm/page-writeback.c`
//! (`balance_dirty_pages`), `fs/sync.c` (`vfs_fsync_range`), `block/blk-flush.c`
//! (`blkdev_issue_flush`).

use super::{CacheError, FileId, IoId, PageCache, PageCacheConfig, ReadOutcome, StreamId, WriteOutcome};
use crate::device::IoOp;
use crate::units::{ReqId, SimTime};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// What an application asks of the kernel. `Truncate` drops the file's pages from page `from`
/// on (a truncate; `from` = 0, an unlink).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppOp {
    Read { file: FileId, offset: u64, len: u64, stream: Option<StreamId> },
    Write { file: FileId, offset: u64, len: u64 },
    Fsync { file: FileId },
    Truncate { file: FileId, from: u64 },
}

/// A device request the kernel sends: its id for [`KernelIo::device_done`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DevId {
    /// A read or write the page cache asked for.
    Cache(IoId),
    /// A flush an fsync sends.
    Flush(u64),
}

/// One device request: `offset` and `len` in bytes of `file` (0 for a flush).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevIo {
    pub id: DevId,
    pub op: IoOp,
    pub file: FileId,
    pub offset: u64,
    pub len: u64,
}

/// What a call produced: device requests to send now, application requests now complete.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct KernelOut {
    pub device: Vec<DevIo>,
    pub done: Vec<ReqId>,
}

/// Where an application request stands.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// Waiting for `left` device requests, then `then`.
    On { left: u32, then: Then },
    /// Throttled or short of memory: retried after a completion.
    Held,
}

#[derive(Clone, Copy, Debug)]
enum Then {
    Done,
    Retry,
    /// The fsync's writes are done: sync again (pages dirtied under writeback) or flush.
    SyncAgain,
}

/// The kernel's I/O path over one page cache (see the header).
pub struct KernelIo {
    cache: PageCache,
    /// Application requests in the kernel, with what they asked (point lookups only).
    apps: FxHashMap<ReqId, (AppOp, Wait)>,
    /// Per device request, the application requests waiting for it (point lookups only).
    waiters: FxHashMap<DevId, Vec<ReqId>>,
    /// Held writes, in arrival order: retried while the cache is under its dirty threshold.
    held_writes: VecDeque<ReqId>,
    /// Other held requests (reads short of memory), in arrival order.
    held_reads: VecDeque<ReqId>,
    next_flush: u64,
}

impl KernelIo {
    pub fn new(cfg: PageCacheConfig) -> Result<KernelIo, CacheError> {
        Ok(KernelIo {
            cache: PageCache::new(cfg)?,
            apps: FxHashMap::default(),
            waiters: FxHashMap::default(),
            held_writes: VecDeque::new(),
            held_reads: VecDeque::new(),
            next_flush: 0,
        })
    }

    pub fn cache(&self) -> &PageCache {
        &self.cache
    }

    pub fn cache_mut(&mut self) -> &mut PageCache {
        &mut self.cache
    }

    /// Application request `r` asks `op` at `now`.
    pub fn submit(&mut self, now: SimTime, r: ReqId, op: AppOp, out: &mut KernelOut) -> Result<(), CacheError> {
        assert!(!self.apps.contains_key(&r), "request {} is already in the kernel", r.0);
        self.apps.insert(r, (op, Wait::Held));
        self.attempt(now, r, out)
    }

    /// Application request `r` truncates `file` at page `from` (see [`AppOp::Truncate`]).
    pub fn truncate(
        &mut self,
        now: SimTime,
        r: ReqId,
        file: FileId,
        from: u64,
        out: &mut KernelOut,
    ) -> Result<(), CacheError> {
        self.submit(now, r, AppOp::Truncate { file, from }, out)
    }

    /// When the flusher wants to run, if it does.
    pub fn wake_at(&self) -> Option<SimTime> {
        self.cache.flusher_wakeup_at()
    }

    /// The flusher runs at `now`: its writes go out.
    pub fn wake(&mut self, now: SimTime, out: &mut KernelOut) -> Result<(), CacheError> {
        for w in self.cache.flush(now)? {
            out.device.push(write_io(w.id, w.extent));
        }
        Ok(())
    }

    /// Device request `id` completed at `now`: what waited for it moves on, and every held
    /// request is tried again.
    pub fn device_done(&mut self, now: SimTime, id: DevId, op: IoOp, out: &mut KernelOut) -> Result<(), CacheError> {
        match (id, op) {
            (DevId::Cache(io), IoOp::Read) => self.cache.read_done(now, io)?,
            (DevId::Cache(io), IoOp::Write) => self.cache.write_done(now, io)?,
            (DevId::Flush(_), IoOp::Flush) => {}
            _ => panic!("device request {id:?} completed as a {op:?}"),
        }
        for r in self.waiters.remove(&id).unwrap_or_default() {
            let Some((_, Wait::On { left, then })) = self.apps.get_mut(&r).map(|a| *a) else {
                panic!("request {} waited for {id:?} but waits for nothing", r.0)
            };
            if left > 1 {
                self.apps.get_mut(&r).expect("checked").1 = Wait::On { left: left - 1, then };
                continue;
            }
            match then {
                Then::Done => self.finish(r, out),
                Then::Retry => self.attempt(now, r, out)?,
                Then::SyncAgain => self.sync_step(now, r, out)?,
            }
        }
        self.retry_held(now, out)
    }

    /// Every held request is tried again: reads, then writes in arrival order while the cache
    /// is under its dirty threshold.
    fn retry_held(&mut self, now: SimTime, out: &mut KernelOut) -> Result<(), CacheError> {
        for r in std::mem::take(&mut self.held_reads) {
            self.attempt(now, r, out)?;
        }
        // Held writes are tried in arrival order until the cache is over its dirty threshold
        // (every later try could only be throttled again); those not tried keep their place
        // ahead of any held again meanwhile.
        let mut writes = std::mem::take(&mut self.held_writes);
        while let Some(r) = writes.pop_front() {
            if self.cache.over_dirty_threshold() {
                writes.push_front(r);
                break;
            }
            if let Some(&next) = writes.front() {
                self.prefetch(next);
            }
            self.attempt(now, r, out)?;
        }
        writes.append(&mut self.held_writes);
        self.held_writes = writes;
        Ok(())
    }

    /// Application requests in the kernel.
    pub fn pending(&self) -> usize {
        self.apps.len()
    }

    fn finish(&mut self, r: ReqId, out: &mut KernelOut) {
        self.apps.remove(&r).expect("a request completes once");
        out.done.push(r);
    }

    /// Asks the processor to load what `r`'s next attempt looks up first (a hint).
    fn prefetch(&self, r: ReqId) {
        if let Some((AppOp::Read { file, offset, .. } | AppOp::Write { file, offset, .. }, _)) = self.apps.get(&r) {
            self.cache.prefetch(*file, *offset);
        }
    }

    fn hold(&mut self, r: ReqId) {
        self.apps.get_mut(&r).expect("in the kernel").1 = Wait::Held;
        match self.apps[&r].0 {
            AppOp::Write { .. } => self.held_writes.push_back(r),
            _ => self.held_reads.push_back(r),
        }
    }

    /// `r` waits for the device requests `on`, then `then`.
    fn wait(&mut self, r: ReqId, on: &[DevId], then: Then, out: &mut KernelOut) {
        if on.is_empty() {
            return match then {
                Then::Done => self.finish(r, out),
                _ => unreachable!("a retry or sync step waits for something"),
            };
        }
        self.apps.get_mut(&r).expect("in the kernel").1 = Wait::On { left: on.len() as u32, then };
        for &d in on {
            self.waiters.entry(d).or_default().push(r);
        }
    }

    /// Tries `r`'s operation (again).
    fn attempt(&mut self, now: SimTime, r: ReqId, out: &mut KernelOut) -> Result<(), CacheError> {
        let op = self.apps[&r].0;
        match op {
            AppOp::Read { file, offset, len, stream } => match self.cache.read(now, file, offset, len, stream)? {
                ReadOutcome::Read { issue, wait_on, .. } => {
                    out.device.extend(issue.iter().map(|i| read_io(i.id, i.extent)));
                    let on: Vec<DevId> = wait_on.into_iter().map(DevId::Cache).collect();
                    self.wait(r, &on, Then::Done, out);
                }
                ReadOutcome::NoMemory { .. } => self.short_of_memory(now, r, out)?,
            },
            AppOp::Write { file, offset, len } => match self.cache.write(now, file, offset, len, false)? {
                WriteOutcome::Done { .. } => self.finish(r, out),
                WriteOutcome::Throttled => self.hold(r),
                WriteOutcome::Wait { issue, wait_on } => {
                    out.device.extend(issue.iter().map(|i| read_io(i.id, i.extent)));
                    let on: Vec<DevId> = wait_on.into_iter().map(DevId::Cache).collect();
                    self.wait(r, &on, Then::Retry, out);
                }
                WriteOutcome::NoMemory { .. } => self.short_of_memory(now, r, out)?,
            },
            AppOp::Fsync { .. } => self.sync_step(now, r, out)?,
            AppOp::Truncate { file, from } => {
                let t = self.cache.truncate(now, file, from)?;
                let on: Vec<DevId> = t.busy.into_iter().map(DevId::Cache).collect();
                self.wait(r, &on, Then::Done, out);
                self.retry_held(now, out)?;
            }
        }
        Ok(())
    }

    /// No free or evictable page: `r` is held, and the flusher runs now if the cache asked for
    /// writeback (it has dirty pages to free).
    fn short_of_memory(&mut self, now: SimTime, r: ReqId, out: &mut KernelOut) -> Result<(), CacheError> {
        self.hold(r);
        if self.cache.flusher_wakeup_at().is_some_and(|t| t <= now) {
            self.wake(now, out)?;
        }
        Ok(())
    }

    /// One step of an fsync: write what is dirty and wait for the file's writes; when none are
    /// left, the device flush.
    fn sync_step(&mut self, now: SimTime, r: ReqId, out: &mut KernelOut) -> Result<(), CacheError> {
        let AppOp::Fsync { file } = self.apps[&r].0 else { unreachable!("only an fsync syncs") };
        let s = self.cache.fsync(now, file)?;
        out.device.extend(s.issue.iter().map(|w| write_io(w.id, w.extent)));
        if s.wait_on.is_empty() {
            debug_assert_eq!(s.held_back, 0, "pages held back wait for a write in flight");
            let id = DevId::Flush(self.next_flush);
            self.next_flush += 1;
            out.device.push(DevIo { id, op: IoOp::Flush, file, offset: 0, len: 0 });
            self.wait(r, &[id], Then::Done, out);
        } else {
            let on: Vec<DevId> = s.wait_on.into_iter().map(DevId::Cache).collect();
            self.wait(r, &on, Then::SyncAgain, out);
        }
        Ok(())
    }

    pub fn check_invariants(&self) {
        self.cache.check_invariants().unwrap_or_else(|e| panic!("page cache: {e}"));
        for (d, rs) in &self.waiters {
            for r in rs {
                assert!(
                    matches!(self.apps.get(r), Some((_, Wait::On { .. }))),
                    "request {} waits for {d:?} but is not waiting",
                    r.0
                );
            }
        }
        for r in self.held_writes.iter().chain(&self.held_reads) {
            assert!(matches!(self.apps.get(r), Some((_, Wait::Held))), "request {} is held but not marked so", r.0);
        }
        let waiting = self.apps.values().filter(|(_, w)| matches!(w, Wait::On { .. })).count();
        let held = self.held_writes.len() + self.held_reads.len();
        assert_eq!(waiting + held, self.apps.len(), "a request in the kernel neither waits nor is held");
    }
}

fn read_io(id: IoId, e: super::Extent) -> DevIo {
    DevIo { id: DevId::Cache(id), op: IoOp::Read, file: e.file, offset: e.offset(), len: e.bytes() }
}

fn write_io(id: IoId, e: super::Extent) -> DevIo {
    DevIo { id: DevId::Cache(id), op: IoOp::Write, file: e.file, offset: e.offset(), len: e.bytes() }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: FileId = FileId(0);
    const K: u64 = 1024;

    fn kernel(capacity: u64) -> KernelIo {
        KernelIo::new(PageCacheConfig { capacity_pages: capacity, ..PageCacheConfig::default() }).unwrap()
    }

    fn t(ms: u64) -> SimTime {
        SimTime(ms * 1_000_000)
    }

    /// Completes every device request of `out` at `now`, in order, until none is left; returns
    /// them and the application requests done.
    fn settle(k: &mut KernelIo, now: SimTime, mut out: KernelOut) -> (Vec<DevIo>, Vec<u32>) {
        let (mut dev, mut done) = (Vec::new(), Vec::new());
        loop {
            done.extend(out.done.drain(..).map(|r| r.0));
            let Some(d) = (!out.device.is_empty()).then(|| out.device.remove(0)) else { break };
            dev.push(d);
            k.device_done(now, d.id, d.op, &mut out).unwrap();
            k.check_invariants();
        }
        (dev, done)
    }

    #[test]
    fn the_worked_example() {
        let mut k = kernel(64);
        let mut out = KernelOut::default();
        k.submit(t(0), ReqId(0), AppOp::Write { file: F, offset: 0, len: 4 * K }, &mut out).unwrap();
        assert_eq!(out, KernelOut { device: vec![], done: vec![ReqId(0)] }, "a buffered write is done at once");
        let mut out = KernelOut::default();
        k.submit(t(1), ReqId(1), AppOp::Read { file: F, offset: 64 * K, len: 8 * K, stream: None }, &mut out).unwrap();
        assert_eq!(out.done, [], "a miss waits for the device");
        assert_eq!(
            out.device.iter().map(|d| (d.op, d.offset, d.len)).collect::<Vec<_>>(),
            [(IoOp::Read, 64 * K, 8 * K)]
        );
        let (_, done) = settle(&mut k, t(2), out);
        assert_eq!(done, [1]);
        let mut out = KernelOut::default();
        k.submit(t(3), ReqId(2), AppOp::Fsync { file: F }, &mut out).unwrap();
        let (dev, done) = settle(&mut k, t(4), out);
        let ops: Vec<(IoOp, u64, u64)> = dev.iter().map(|d| (d.op, d.offset, d.len)).collect();
        assert_eq!(ops, [(IoOp::Write, 0, 4 * K), (IoOp::Flush, 0, 0)], "the dirty page, then the flush");
        assert_eq!(done, [2]);
        assert_eq!(k.pending(), 0);
        // A second read of the same pages hits: nothing goes to the device.
        let mut out = KernelOut::default();
        k.submit(t(5), ReqId(3), AppOp::Read { file: F, offset: 64 * K, len: 8 * K, stream: None }, &mut out).unwrap();
        assert_eq!(out, KernelOut { device: vec![], done: vec![ReqId(3)] });
    }

    #[test]
    fn a_throttled_writer_goes_on_when_writeback_completes() {
        // 64 pages, dirty_ratio 20: writers wait while more than 12 pages are dirty or under
        // writeback. The 13th write takes the count to 13; the 14th is held.
        let mut k = kernel(64);
        let mut out = KernelOut::default();
        for i in 0..14u32 {
            k.submit(t(0), ReqId(i), AppOp::Write { file: F, offset: i as u64 * 4 * K, len: 4 * K }, &mut out).unwrap();
        }
        assert_eq!(out.done.len(), 13);
        assert!(!out.done.contains(&ReqId(13)));
        assert!(out.device.is_empty(), "writes go to the cache, not the device");
        // Over the background threshold (6 pages), the flusher wants to run now.
        assert_eq!(k.wake_at(), Some(t(0)));
        let mut out = KernelOut::default();
        k.wake(t(0), &mut out).unwrap();
        assert!(!out.device.is_empty() && out.device.iter().all(|d| d.op == IoOp::Write));
        let (_, done) = settle(&mut k, t(1), out);
        assert_eq!(done, [13], "released by the writeback's completion");
        k.check_invariants();
    }

    #[test]
    fn an_fsync_with_nothing_dirty_is_one_flush() {
        let mut k = kernel(64);
        let mut out = KernelOut::default();
        k.submit(t(0), ReqId(7), AppOp::Fsync { file: F }, &mut out).unwrap();
        assert_eq!(out.device.len(), 1);
        assert_eq!((out.device[0].op, out.device[0].id), (IoOp::Flush, DevId::Flush(0)));
        let (_, done) = settle(&mut k, t(1), out);
        assert_eq!(done, [7]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Any mix of reads, writes and fsyncs over a small cache, with device requests
        /// completing in any order and the flusher run whenever it asks: every application
        /// request completes exactly once, and the invariants hold throughout.
        #[test]
        fn every_request_completes_once(
            ops in proptest::collection::vec((0u8..4, 0u64..48, 1u64..6, proptest::bool::ANY), 1..60),
            picks in proptest::collection::vec(0usize..1000, 0..200),
        ) {
            let mut k = kernel(32);
            let sequential = k.cache_mut().open_stream(F);
            let (mut inflight, mut done): (Vec<DevIo>, Vec<u32>) = (Vec::new(), Vec::new());
            let mut picks = picks.into_iter();
            let mut now = 0u64;
            let step = |out: KernelOut, inflight: &mut Vec<DevIo>, done: &mut Vec<u32>| {
                inflight.extend(out.device);
                done.extend(out.done.iter().map(|r| r.0));
            };
            for (i, &(kind, page, pages, stream)) in ops.iter().enumerate() {
                now += 1;
                let (offset, len) = (page * 4 * K, pages * 4 * K);
                let op = match kind {
                    0 => AppOp::Read { file: F, offset, len, stream: stream.then_some(sequential) },
                    1 => AppOp::Write { file: F, offset, len },
                    2 => AppOp::Fsync { file: F },
                    _ => AppOp::Truncate { file: F, from: page },
                };
                let mut out = KernelOut::default();
                k.submit(SimTime(now), ReqId(i as u32), op, &mut out).unwrap();
                step(out, &mut inflight, &mut done);
                // Some device requests complete, in an order the test draws.
                for _ in 0..2 {
                    if let (Some(p), false) = (picks.next(), inflight.is_empty()) {
                        let d = inflight.remove(p % inflight.len());
                        let mut out = KernelOut::default();
                        k.device_done(SimTime(now), d.id, d.op, &mut out).unwrap();
                        step(out, &mut inflight, &mut done);
                    }
                }
                k.check_invariants();
            }
            // Then everything completes, the flusher running when it asks.
            for _ in 0..100_000 {
                now += 1;
                if let Some(w) = k.wake_at().filter(|&w| w <= SimTime(now)) {
                    let mut out = KernelOut::default();
                    k.wake(w.max(SimTime(now)), &mut out).unwrap();
                    step(out, &mut inflight, &mut done);
                }
                let Some(d) = (!inflight.is_empty()).then(|| inflight.remove(0)) else {
                    if k.pending() == 0 { break }
                    now += 1_000_000_000;
                    continue;
                };
                let mut out = KernelOut::default();
                k.device_done(SimTime(now), d.id, d.op, &mut out).unwrap();
                step(out, &mut inflight, &mut done);
                k.check_invariants();
            }
            proptest::prop_assert_eq!(k.pending(), 0);
            done.sort_unstable();
            proptest::prop_assert_eq!(done, (0..ops.len() as u32).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_truncate_completes_when_the_io_on_its_pages_has() {
        // Page 0 dirty; pages 16-17 being read (one device read). An unlink (truncate at 0)
        // drops page 0 unwritten at once and waits for the read; when the read completes the
        // reader and then the unlink are done, and the cache is empty. A second unlink, with
        // nothing in flight, is done at once.
        let mut k = kernel(64);
        let mut out = KernelOut::default();
        k.submit(t(0), ReqId(0), AppOp::Write { file: F, offset: 0, len: 4 * K }, &mut out).unwrap();
        k.submit(t(0), ReqId(1), AppOp::Read { file: F, offset: 64 * K, len: 8 * K, stream: None }, &mut out).unwrap();
        assert_eq!(out.done, [ReqId(0)]);
        let mut out2 = KernelOut::default();
        k.truncate(t(1), ReqId(2), F, 0, &mut out2).unwrap();
        assert_eq!(out2, KernelOut::default(), "nothing to send, the unlink waits");
        assert_eq!((k.cache().dirty_pages(), k.cache().cached_pages()), (0, 2));
        k.check_invariants();
        let (dev, done) = settle(&mut k, t(2), KernelOut { device: out.device, done: vec![] });
        assert_eq!((dev.len(), done), (1, vec![1, 2]));
        assert_eq!(k.cache().cached_pages(), 0);
        let mut out = KernelOut::default();
        k.truncate(t(3), ReqId(3), F, 0, &mut out).unwrap();
        assert_eq!(out, KernelOut { device: vec![], done: vec![ReqId(3)] });
        assert_eq!(k.pending(), 0);
    }

    #[test]
    fn a_truncate_releases_a_writer_held_at_the_dirty_threshold() {
        // 64 pages, threshold 12: 13 dirty pages hold the 14th write. Truncating the file at
        // page 4 cancels 9 dirty pages (4-12): 4 left, the held write goes on at once.
        let mut k = kernel(64);
        let mut out = KernelOut::default();
        for i in 0..14u32 {
            k.submit(t(0), ReqId(i), AppOp::Write { file: F, offset: i as u64 * 4 * K, len: 4 * K }, &mut out).unwrap();
        }
        assert_eq!(out.done.len(), 13);
        let mut out = KernelOut::default();
        k.truncate(t(1), ReqId(20), F, 4, &mut out).unwrap();
        assert_eq!(out.done, [ReqId(20), ReqId(13)], "the truncate, then the writer it released");
        assert_eq!(k.cache().dirty_pages(), 5);
        assert_eq!(k.cache().stats().throttled_ns, 1_000_000);
        k.check_invariants();
    }

    #[test]
    fn a_partial_page_write_reads_the_page_first() {
        let mut k = kernel(64);
        let mut out = KernelOut::default();
        k.submit(t(0), ReqId(0), AppOp::Write { file: F, offset: 512, len: 512 }, &mut out).unwrap();
        assert_eq!(out.done, []);
        assert_eq!(out.device.iter().map(|d| (d.op, d.offset, d.len)).collect::<Vec<_>>(), [(IoOp::Read, 0, 4 * K)]);
        let (_, done) = settle(&mut k, t(1), out);
        assert_eq!(done, [0], "the write is done once its page is read");
        assert_eq!(k.cache().dirty_pages(), 1);
    }
}
