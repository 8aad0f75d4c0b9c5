//! Writeback: the flusher that writes dirty pages to the device — when (periodic expiry,
//! background threshold, memory pressure, `fsync`) and which pages in which order — and the
//! dirty thresholds that throttle writers. Linux's `wb_workfn` and `balance_dirty_pages`.
//!
//! # Model
//! Thresholds (`domain_dirty_limits`), in pages of the cache's capacity `C`:
//! - dirty threshold: `dirty_bytes / 4096` rounded up if `dirty_bytes` is set, else
//!   `dirty_ratio × C / 100` (rounded down). A write is refused (`Throttled`) while dirty +
//!   writeback pages exceed it; writers are released when write completions bring the count to it.
//! - background threshold: the same with `dirty_background_bytes` / `dirty_background_ratio`;
//!   if it is not below the dirty threshold it becomes half of it.
//!
//! The flusher (`flush(now)`, at the times `flusher_wakeup_at` gives) does, in `wb_do_writeback`'s
//! order:
//! 1. **memory pressure**: a read or write that found no free or evictable page asked for that
//!    many pages; that many dirty pages are written (Linux's reclaim waking the flusher).
//! 2. **periodic (kupdate)**: at each multiple of `dirty_writeback_centisecs` (5 s) — at most once
//!    per period — the pages dirty for `dirty_expire_centisecs` (30 s) or longer, i.e. dirtied at
//!    or before `now - 30 s`, are written.
//! 3. **background**: while dirty pages exceed the background threshold, dirty pages are written.
//!    The threshold is checked before each file's chunk, so the flusher stops at the first chunk
//!    boundary at or under it.
//!
//! Order (`writeback_sb_inodes` over b_io / b_more_io): files in the order they became dirty;
//! each file's eligible pages in ascending page order, at most `MAX_WRITEBACK_PAGES` per file
//! per visit; a file with eligible pages left goes to the back of the order and is visited again
//! after the others. Contiguous pages form one write of at most `max_extent_bytes`. Pages under
//! writeback are skipped (WB_SYNC_NONE); a page written again while under writeback is dirty
//! again when its write completes.
//!
//! `fsync` / `fdatasync` (`file_write_and_wait_range`, WB_SYNC_ALL): every dirty page of the
//! file is written now, without the chunk limit; the caller waits for those writes and for the
//! file's writes already in flight (`wait_on`). Pages dirtied again while under writeback
//! (`held_back`) can only be written when their write completes: the caller waits and calls
//! `fsync` again. The page cache holds no metadata, so `fdatasync` is `fsync`.
//!
//! `O_DIRECT` is the caller's: before a direct write (or read) of a range it calls `sync_range`
//! for it and waits, then `invalidate` drops the range's clean pages, so that no stale page
//! survives the direct write (`generic_file_direct_write`: `filemap_write_and_wait_range`, then
//! `invalidate_inode_pages2_range`). Pages still locked, dirty or under writeback are reported,
//! not dropped.
//!
//! # Worked example
//! Defaults, 1000-page cache: thresholds 200 and 100 pages. A page dirtied at t = 1 s (and
//! nothing else): the flusher wakes at multiples of 5 s; at 30 s it has been dirty 29 s; at 35 s,
//! 34 s ≥ 30 s: written at 35 s (`flusher_wakeup_at` says 35 s: the first multiple of 5 s at or
//! after 1 s + 30 s). A writer that dirties 101 pages is over the background threshold: the
//! flusher is due at once and writes until at most 100 pages are dirty (whole chunks); at 201
//! dirty + writeback pages writes are refused until completions bring the count to 200.
//!
//! # Simplifications
//! Linux arms the periodic timer 5 s after a file first becomes dirty and after each run; here
//! it runs on a fixed grid of multiples of the period from time zero. Linux ages dirty data per
//! inode (`dirtied_when`, and kupdate then writes the whole inode); here each page has its own
//! dirtied-at time and kupdate writes the expired pages. No dirty-throttling pause ramp
//! (`balance_dirty_pages`' position control, the freerun zone, per-device limits), no
//! `writeback_chunk_size` bandwidth estimate (the chunk is `MAX_WRITEBACK_PAGES`), no
//! `range_cyclic` resumption inside a file, no `dirtytime`. Ratios are whole percentages of the
//! cache's capacity (Linux: of dirtyable memory, with finer precision).
//!
//! # Parameters
//! `dirty_ratio` (%, 20), `dirty_background_ratio` (%, 10), `dirty_bytes` and
//! `dirty_background_bytes` (bytes, 0 = use the ratio; setting one overrides its ratio),
//! `dirty_writeback_centisecs` (1/100 s, 500; 0 disables periodic writeback),
//! `dirty_expire_centisecs` (1/100 s, 3000), `MAX_WRITEBACK_PAGES` (1024 pages = 4 MiB),
//! `max_extent_bytes` (the block layer's `max_sectors_kb`, set by the caller).
//!
//! # Source
//! Linux `Documentation/admin-guide/sysctl/vm.rst` (the six sysctls and their defaults),
//! `mm/page-writeback.c` (`domain_dirty_limits`, `balance_dirty_pages`, `wb_over_bg_thresh`;
//! `MAX_WRITEBACK_PAGES` = 1024 in its 2.6 versions), `fs/fs-writeback.c` (`wb_workfn`,
//! `wb_do_writeback`, `wb_check_old_data_flush`, `wb_check_background_flush`, `wb_writeback`,
//! `writeback_sb_inodes`, `requeue_inode`; `MIN_WRITEBACK_PAGES` = 4 MiB), `mm/filemap.c`
//! (`file_write_and_wait_range`, `invalidate_inode_pages2_range` in `mm/truncate.c`).

use super::pagecache::{InFlight, PageCache, PageState, WriteOutcome, NIL};
use super::{CacheError, Extent, FileId, IoId, PageCacheConfig, WriteIo, PAGE_SIZE};
use crate::engine::prefetch;
use crate::units::{Nanos, SimTime};
use serde::Serialize;
use std::collections::BTreeMap;

/// Pages written from one file before the flusher moves to the next (4 MiB).
pub const MAX_WRITEBACK_PAGES: u64 = 1024;

/// How many pages ahead `start_writes` asks the processor to load a page's slot.
const PREFETCH_AHEAD: usize = 8;

/// How many I/Os ahead `write_done` asks the processor to load the slot of a write's first page.
const COMPLETION_AHEAD: u64 = 16;

/// Why pages were written back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum WriteReason {
    Expiry,
    Background,
    Fsync,
    MemoryPressure,
}

/// What a sync needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncResult {
    /// Writes to issue now.
    pub issue: Vec<WriteIo>,
    /// The file's writes to wait for (those in `issue` and those already in flight).
    pub wait_on: Vec<IoId>,
    /// Pages dirtied again while under writeback: sync again once `wait_on` has completed.
    pub held_back: u64,
}

/// What `invalidate` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invalidated {
    /// Clean pages dropped.
    pub dropped: u64,
    /// Dirty pages kept (sync the range first).
    pub dirty: u64,
    /// I/O in flight on pages of the range (kept): reads and writes to wait for.
    pub busy: Vec<IoId>,
}

/// The flusher's settings and state.
#[derive(Clone, Debug)]
pub(super) struct Flusher {
    /// Dirty threshold, pages.
    pub thresh: u64,
    /// Background threshold, pages.
    pub bg_thresh: u64,
    /// The period; zero: no periodic writeback.
    pub interval: Nanos,
    pub expire: Nanos,
    /// Pages reads or writes short of memory asked to be written.
    pub pressure: u64,
    /// The grid time of the last periodic run.
    pub last_periodic: Option<SimTime>,
}

impl Flusher {
    pub fn new(cfg: &PageCacheConfig) -> Flusher {
        let pages = |bytes: u64, ratio: u64| {
            if bytes != 0 {
                bytes.div_ceil(PAGE_SIZE)
            } else {
                ratio * cfg.capacity_pages / 100
            }
        };
        let thresh = pages(cfg.dirty_bytes, cfg.dirty_ratio);
        let mut bg_thresh = pages(cfg.dirty_background_bytes, cfg.dirty_background_ratio);
        if bg_thresh >= thresh {
            bg_thresh = thresh / 2;
        }
        Flusher {
            thresh,
            bg_thresh,
            interval: Nanos::from_ms(cfg.dirty_writeback_centisecs * 10),
            expire: Nanos::from_ms(cfg.dirty_expire_centisecs * 10),
            pressure: 0,
            last_periodic: None,
        }
    }

    /// The periodic run due at `now`, if any: the latest multiple of the period at or before
    /// `now`, if after the last run.
    fn periodic_due(&self, now: SimTime) -> Option<SimTime> {
        let iv = self.interval.ns();
        if iv == 0 || now.ns() < iv {
            return None;
        }
        let g = SimTime(now.ns() / iv * iv);
        (self.last_periodic < Some(g)).then_some(g)
    }
}

/// When a flusher pass stops.
#[derive(Clone, Copy)]
enum Stop {
    Never,
    AfterPages(u64),
    UnderBackground,
}

impl PageCache {
    /// The dirty threshold and the background threshold, pages.
    pub fn thresholds(&self) -> (u64, u64) {
        (self.flusher.thresh, self.flusher.bg_thresh)
    }

    /// The next time the flusher has work: now (the latest time the cache was given) if memory
    /// pressure or the background threshold calls for writeback, else the first periodic wakeup
    /// at which a page will have expired; None if nothing is dirty.
    pub fn flusher_wakeup_at(&self) -> Option<SimTime> {
        let oldest = self.oldest_dirty()?;
        if self.flusher.pressure > 0 || self.n_dirty > self.flusher.bg_thresh {
            return Some(self.clock);
        }
        let iv = self.flusher.interval.ns();
        if iv == 0 {
            return None;
        }
        let after_last = self.flusher.last_periodic.map_or(iv, |g| g.ns().saturating_add(iv));
        let expiry = (oldest + self.flusher.expire).ns().div_ceil(iv).saturating_mul(iv).max(iv);
        Some(SimTime(after_last.max(expiry)).max(self.clock))
    }

    /// Runs the flusher at `now`: the writes to issue.
    pub fn flush(&mut self, now: SimTime) -> Result<Vec<WriteIo>, CacheError> {
        self.tick(now)?;
        let mut out = Vec::new();
        let pressure = std::mem::take(&mut self.flusher.pressure);
        if pressure > 0 {
            self.write_pass(WriteReason::MemoryPressure, None, Stop::AfterPages(pressure), &mut out);
        }
        if let Some(g) = self.flusher.periodic_due(now) {
            self.flusher.last_periodic = Some(g);
            if now.ns() >= self.flusher.expire.ns() {
                let cutoff = SimTime(now.ns() - self.flusher.expire.ns());
                self.write_pass(WriteReason::Expiry, Some(cutoff), Stop::Never, &mut out);
            }
        }
        if self.n_dirty > self.flusher.bg_thresh {
            self.write_pass(WriteReason::Background, None, Stop::UnderBackground, &mut out);
        }
        Ok(out)
    }

    /// One flusher pass over the dirty files in round robin. `cutoff`: only pages dirtied at or
    /// before it.
    fn write_pass(&mut self, reason: WriteReason, cutoff: Option<SimTime>, stop: Stop, out: &mut Vec<WriteIo>) {
        // The expired pages, per file, ascending, with their slots (a snapshot: this pass writes
        // all of them).
        let mut expired: BTreeMap<FileId, Vec<(u64, u32)>> = BTreeMap::new();
        if let Some(c) = cutoff {
            let mut s = self.aged.tail;
            while s != NIL && self.slots[s as usize].dirtied_at <= c {
                let sl = &self.slots[s as usize];
                if sl.state == PageState::Dirty {
                    expired.entry(sl.file).or_default().push((sl.index, s));
                }
                s = sl.prev;
            }
            expired.values_mut().for_each(|v| v.sort_unstable());
        }
        let (mut cursor, mut written) = (0, 0);
        while let Some((&seq, &file)) = self.dirty_order.range(cursor..).next() {
            cursor = seq + 1;
            let mut limit = MAX_WRITEBACK_PAGES;
            match stop {
                Stop::Never => {}
                Stop::AfterPages(n) if written >= n => break,
                Stop::AfterPages(n) => limit = limit.min(n - written),
                Stop::UnderBackground if self.n_dirty <= self.flusher.bg_thresh => break,
                Stop::UnderBackground => {}
            }
            let (pages, more) = match cutoff {
                Some(_) => match expired.get_mut(&file) {
                    Some(v) => {
                        let n = (limit as usize).min(v.len());
                        let taken: Vec<(u64, u32)> = v.drain(..n).collect();
                        let dirty = &mut self.files.get_mut(&file).expect("dirty file").dirty;
                        taken.iter().for_each(|&(p, _)| _ = dirty.remove(p));
                        (taken, !v.is_empty())
                    }
                    None => continue,
                },
                None => {
                    let taken = self.take_dirty(file, 0, u64::MAX, limit as usize);
                    (taken, !self.files[&file].dirty.is_empty())
                }
            };
            written += pages.len() as u64;
            self.start_writes(file, &pages, reason, out);
            if more {
                // b_more_io: to the back of the order.
                let f = self.files.get_mut(&file).expect("dirty file");
                let old = f.dirty_seq.replace(self.next_seq).expect("queued");
                self.dirty_order.remove(&old);
                self.dirty_order.insert(self.next_seq, file);
                self.next_seq += 1;
            }
        }
    }

    /// Takes the first `limit` pages of `file`'s dirty set in `[first, end)` out of it, with
    /// their slots.
    fn take_dirty(&mut self, file: FileId, first: u64, end: u64, limit: usize) -> Vec<(u64, u32)> {
        let Some(f) = self.files.get_mut(&file) else { return Vec::new() };
        let mut pages = Vec::new();
        f.dirty.take(first, end, limit, &mut pages);
        pages.into_iter().map(|p| (p, self.index.get(file, p).expect("a dirty page is cached"))).collect()
    }

    /// Puts the Dirty pages `pages` (ascending, with their slots) of `file`, already out of its
    /// dirty set, under writeback, as writes of contiguous pages of at most `max_extent_bytes`.
    fn start_writes(&mut self, file: FileId, pages: &[(u64, u32)], reason: WriteReason, out: &mut Vec<WriteIo>) {
        let max = self.cfg.max_extent_bytes / PAGE_SIZE;
        let from = out.len();
        let mut firsts = Vec::new();
        let mut last = NIL;
        for (i, &(p, s)) in pages.iter().enumerate() {
            // The slots are scattered over a large cache: load a few pages ahead, and, for pages
            // nearer (loaded by now), their neighbours on the age list, which leaving it writes.
            if let Some(&(_, ahead)) = pages.get(i + PREFETCH_AHEAD) {
                prefetch(&self.slots[ahead as usize]);
            }
            if let Some(&(_, near)) = pages.get(i + PREFETCH_AHEAD / 2) {
                let sl = &self.slots[near as usize];
                for n in [sl.prev, sl.next].into_iter().filter(|&n| n != NIL) {
                    prefetch(&self.slots[n as usize]);
                }
            }
            debug_assert_eq!((self.slots[s as usize].state, self.slots[s as usize].index), (PageState::Dirty, p));
            self.unlink(s);
            let s = s as usize;
            self.slots[s].state = PageState::Writeback;
            self.n_dirty -= 1;
            self.n_writeback += 1;
            let joins = out.len() > from && out.last().is_some_and(|w| w.extent.end() == p && w.extent.pages < max);
            if joins {
                out.last_mut().expect("joined").extent.pages += 1;
                self.slots[last as usize].chain = s as u32;
            } else {
                let id = self.new_io();
                out.push(WriteIo { id, extent: Extent { file, first: p, pages: 1 }, reason });
                firsts.push(s as u32);
            }
            self.slots[s].io = out.last().expect("pushed").id;
            self.slots[s].chain = NIL;
            last = s as u32;
        }
        for (w, &first) in out[from..].iter().zip(&firsts) {
            self.inflight.insert(w.id, InFlight { extent: w.extent, write: Some(reason), first });
        }
        let n = pages.len() as u64;
        let c = &mut self.stats.written_back;
        match reason {
            WriteReason::Expiry => c.expiry += n,
            WriteReason::Background => c.background += n,
            WriteReason::Fsync => c.fsync += n,
            WriteReason::MemoryPressure => c.memory_pressure += n,
        }
        if !pages.is_empty() {
            self.dequeue_if_clean(file);
        }
    }

    /// A write completed: its pages become clean (or dirty again if written meanwhile).
    pub fn write_done(&mut self, now: SimTime, id: IoId) -> Result<(), CacheError> {
        self.tick(now)?;
        let unknown = CacheError::UnknownIo { op: "write_done", id, expected: "write" };
        let io = *self.inflight.get(id).filter(|f| f.write.is_some()).ok_or(unknown)?;
        self.inflight.remove(id);
        // The device completes writes roughly in the order they were issued: start loading the
        // first page of a write issued a little later, which is likely to complete soon.
        if let Some(later) = self.inflight.get(IoId(id.0 + COMPLETION_AHEAD)) {
            prefetch(&self.slots[later.first as usize]);
        }
        self.inflight.prefetch(IoId(id.0 + 2 * COMPLETION_AHEAD));
        let file = io.extent.file;
        let mut s = io.first;
        while s != NIL {
            let sl = self.slots[s as usize];
            debug_assert_eq!(sl.io, id);
            self.slots[s as usize].chain = NIL;
            self.n_writeback -= 1;
            if sl.doomed {
                self.drop_doomed(s);
            } else if sl.state == PageState::WritebackDirty {
                self.slots[s as usize].state = PageState::Dirty;
                self.files.get_mut(&file).expect("dirty file").wb_dirty -= 1;
                // On the age list since it was written again, in its place.
                self.add_dirty(file, sl.index, s);
            } else {
                debug_assert_eq!(sl.state, PageState::Writeback);
                self.slots[s as usize].state = PageState::Clean;
                self.relink(s);
            }
            s = sl.chain;
        }
        self.release_writers(now);
        Ok(())
    }

    /// Ends the writers' wait at the dirty threshold if dirty + writeback pages are at most it.
    pub(super) fn release_writers(&mut self, now: SimTime) {
        if let Some(since) = self.throttled_since {
            if self.n_dirty + self.n_writeback <= self.flusher.thresh {
                self.stats.throttled_ns += now.since(since).ns();
                self.throttled_since = None;
            }
        }
    }

    /// Whether dirty and writeback pages exceed the dirty threshold: a write now is throttled.
    pub fn over_dirty_threshold(&self) -> bool {
        self.n_dirty + self.n_writeback > self.flusher.thresh
    }

    /// Writes `len` bytes at `offset` of `file`. `beyond_eof`: the file has no data in the pages
    /// the write covers only in part, so they need not be read first.
    pub fn write(
        &mut self,
        now: SimTime,
        file: FileId,
        offset: u64,
        len: u64,
        beyond_eof: bool,
    ) -> Result<WriteOutcome, CacheError> {
        self.tick(now)?;
        let (first, last) = self.page_range("write", offset, len)?;
        if self.over_dirty_threshold() {
            self.stats.throttled_writes += 1;
            if self.throttled_since.is_none() {
                self.throttled_since = Some(now);
                self.stats.throttle_events += 1;
            }
            return Ok(WriteOutcome::Throttled);
        }
        let mut partial = Vec::new();
        if offset % PAGE_SIZE != 0 {
            partial.push(first);
        }
        if (offset + len) % PAGE_SIZE != 0 && !partial.contains(&last) {
            partial.push(last);
        }
        let mut wait_on = Vec::new();
        let (mut missing, mut on_lru, mut to_read) = (0, 0, Vec::new());
        for p in first..=last {
            match self.slot_of(file, p) {
                None if !beyond_eof && partial.contains(&p) => to_read.push(p),
                None => missing += 1,
                Some(s) if self.slots[s as usize].state == PageState::Locked => wait_on.push(self.slots[s as usize].io),
                Some(s) if self.slots[s as usize].is_evictable() => on_lru += 1,
                Some(_) => {}
            }
        }
        let avail = self.free_pages() + self.inactive.len + self.active.len;
        if !wait_on.is_empty() || !to_read.is_empty() {
            if to_read.len() as u64 > avail {
                return Ok(self.no_memory(to_read.len() as u64 - avail));
            }
            for &p in &to_read {
                self.alloc(file, p, PageState::Locked).expect("room checked");
            }
            let issue = self.start_reads(file, to_read);
            wait_on.extend(issue.iter().map(|r| r.id));
            wait_on.sort();
            wait_on.dedup();
            return Ok(WriteOutcome::Wait { issue, wait_on });
        }
        if missing > avail - on_lru {
            return Ok(self.no_memory(missing - (avail - on_lru)));
        }
        let mut dirtied = 0;
        for p in first..=last {
            if let Some(s) = self.slot_of(file, p) {
                dirtied += self.dirty_page(s, now) as u64;
            }
        }
        for p in first..=last {
            if self.slot_of(file, p).is_none() {
                let s = self.alloc(file, p, PageState::Clean).expect("room checked");
                dirtied += self.dirty_page(s, now) as u64;
            }
        }
        self.stats.peak_dirty = self.stats.peak_dirty.max(self.n_dirty);
        Ok(WriteOutcome::Done { dirtied })
    }

    /// Marks a page dirty (accessed); whether it became dirty.
    fn dirty_page(&mut self, s: u32, now: SimTime) -> bool {
        self.touch(s);
        let sl = self.slots[s as usize];
        match sl.state {
            PageState::Clean => {
                self.unlink(s);
                self.slots[s as usize].state = PageState::Dirty;
                self.slots[s as usize].dirtied_at = now;
                self.link_aged(s);
                self.add_dirty(sl.file, sl.index, s);
                self.n_dirty += 1;
                true
            }
            PageState::Writeback => {
                // Written again after a truncation: the page is the file's again.
                self.slots[s as usize].doomed = false;
                self.slots[s as usize].state = PageState::WritebackDirty;
                self.slots[s as usize].dirtied_at = now;
                self.link_aged(s);
                self.file_mut(sl.file).wb_dirty += 1;
                self.enqueue_dirty(sl.file);
                self.n_dirty += 1;
                true
            }
            PageState::Dirty | PageState::WritebackDirty => false,
            PageState::Locked => unreachable!("a write waits for locked pages"),
        }
    }

    /// `fsync`: writes every dirty page of `file` now.
    pub fn fsync(&mut self, now: SimTime, file: FileId) -> Result<SyncResult, CacheError> {
        self.sync_range(now, file, 0, u64::MAX)
    }

    /// `fdatasync`: the same as `fsync` (the page cache holds no metadata).
    pub fn fdatasync(&mut self, now: SimTime, file: FileId) -> Result<SyncResult, CacheError> {
        self.sync_range(now, file, 0, u64::MAX)
    }

    /// Writes the dirty pages of `file` in `[first, end)` now (a range `fsync`, or before a
    /// direct I/O).
    pub fn sync_range(&mut self, now: SimTime, file: FileId, first: u64, end: u64) -> Result<SyncResult, CacheError> {
        self.tick(now)?;
        let mut res = SyncResult::default();
        let pages = self.take_dirty(file, first, end, usize::MAX);
        self.start_writes(file, &pages, WriteReason::Fsync, &mut res.issue);
        for (id, io) in self.inflight.iter() {
            let e = io.extent;
            if io.write.is_some() && e.file == file && e.first < end && e.end() > first {
                res.wait_on.push(id);
            }
        }
        if self.files.get(&file).is_some_and(|f| f.wb_dirty > 0) {
            for (_, s) in self.pages_in(file, first, end) {
                res.held_back += (self.slots[s as usize].state == PageState::WritebackDirty) as u64;
            }
        }
        Ok(res)
    }

    /// Drops the clean pages of `file` in `[first, end)` (after a direct write).
    pub fn invalidate(&mut self, now: SimTime, file: FileId, first: u64, end: u64) -> Result<Invalidated, CacheError> {
        self.tick(now)?;
        let mut res = Invalidated::default();
        for (_, s) in self.pages_in(file, first, end) {
            match self.slots[s as usize].state {
                PageState::Clean => {
                    self.unlink(s);
                    self.drop_page(s);
                    res.dropped += 1;
                }
                PageState::Dirty => res.dirty += 1,
                PageState::Locked | PageState::Writeback | PageState::WritebackDirty => {
                    res.busy.push(self.slots[s as usize].io)
                }
            }
        }
        res.busy.sort();
        res.busy.dedup();
        Ok(res)
    }
}
