//! The page cache: file pages in the kernel's memory, their LRU lists, their dirty state and the
//! accounting — Linux's page cache as `mm/filemap.c`, `mm/swap.c` and `mm/vmscan.c` keep it.
//!
//! # Model
//! Pages are 4 KiB, keyed by (file, page index). The cache holds at most `capacity_pages`. A page
//! is in one state:
//! - **locked**: being read (I/O in flight, not uptodate); a reader of it waits for that I/O,
//!   it never starts another;
//! - **clean**: uptodate, on an LRU list, evictable;
//! - **dirty**: written by the application, with the time it became dirty; not evictable;
//! - **writeback**: being written; neither dirty nor evictable until its write completes;
//! - **writeback+dirty**: written again while its write is in flight (Linux's PG_dirty with
//!   PG_writeback): dirty again, with a new dirtied-at time, when the write completes.
//!
//! Reads (`read`): each requested page is a hit (uptodate), a wait (locked) or a miss. A missing
//! page starts a synchronous read-ahead at it, a page with the read-ahead marker an asynchronous
//! one (`readahead.rs`, in `filemap_get_pages`' order); the request's own missing pages are always
//! read. Pages read are locked and grouped into contiguous extents of at most `max_extent_bytes`;
//! the read is complete when the extents it waits on (`wait_on`) have completed.
//!
//! Writes (`write`, in `writeback.rs`): pages become dirty. A partial page that is not cached must be read first
//! (`Wait`: the cache starts that read and the caller retries) unless the caller says the write
//! is beyond the end of the file; a locked page is waited for. Before anything, the writer is
//! throttled (`Throttled`, the caller retries after write completions) while dirty + writeback
//! pages exceed the dirty threshold (`balance_dirty_pages`, simplified: no pause ramp, the writer
//! waits until the count is at most the threshold). Thresholds, flusher and `fsync`:
//! `writeback.rs`.
//!
//! Eviction (LRU with Linux's two lists, simplified): a page enters the inactive list when it
//! becomes clean; an access sets its referenced bit, and an access to a referenced page on the
//! inactive list moves it to the active list (`folio_mark_accessed`). Reclaim takes the inactive
//! list's tail; before it, while the active list is longer than the inactive one, the active
//! tail moves to the inactive head with its bit cleared (`inactive_is_low` with ratio 1, the
//! ratio of memory below 1 GiB). Only clean, unlocked pages are on the lists: a page leaves its
//! list while locked, dirty or under writeback and rejoins at the head when clean (Linux leaves
//! it in place and reclaim skips it; second chances at reclaim are not modelled). A read or write
//! that needs more pages than the free and evictable ones gets `NoMemory`, changes nothing and,
//! if pages are dirty, asks the flusher to write that many (writeback for memory pressure); the
//! caller retries after completions. Read-ahead
//! only takes pages that leave the request its own (it stops at the first it cannot get, as
//! Linux's read-ahead allocates without retrying).
//!
//! # Worked example
//! Capacity 16 pages, no stream: `read(f, 0, 8192)` misses pages 0 and 1 and returns one read
//! extent (f, 0, 2 pages) to wait on. A second `read(f, 4096, 4096)` before it completes waits on
//! the same I/O and issues nothing. Page 1 has been accessed twice: when `read_done` makes it
//! clean it joins the active list, page 0 the inactive one. A third read of page 1 hits.
//!
//! # Complexity and memory
//! A slab of at most `capacity_pages` entries with intrusive LRU links, grown as pages are first
//! cached (a large cache that a run touches little costs what it holds); a hash table
//! (`pageindex.rs`, never iterated where order could matter) from (file, page) to slab entry;
//! per file, the ordered map of its dirty pages to their slots; a third intrusive list through
//! the slab, of the dirty pages in the order they became dirty (the flusher's expiry order: a
//! page dirtied is dirtied now, so it goes at the head; a page written again under writeback
//! joins it then and keeps its place when its write completes); the I/O in flight by id
//! (`inflight.rs`), each with its first page's slot and its pages chained through the slab, so
//! that completions look nothing up. Every page operation is O(log n) (the dirty map's) or O(1),
//! but for the oldest dirty page (`flusher_wakeup_at`), a walk from the age list's tail past the
//! pages written again under writeback that are older than it (at most those under writeback).
//! The cache is memory-bound on a large cache: where it knows which slot or index entry it will
//! touch next (the next eviction victim, writeback's next pages, the write issued after the one
//! completing, a held write about to be retried), it asks the processor to load it early
//! (`engine::prefetch`), a hint that changes no result.
//!
//! # Source
//! Linux `mm/filemap.c` (`filemap_read`, `filemap_get_pages`, `folio_mark_accessed` in
//! `mm/swap.c`), `mm/vmscan.c` (`inactive_is_low`, `shrink_active_list`), `mm/page-writeback.c`
//! (`balance_dirty_pages`), `include/linux/page-flags.h` (PG_locked, PG_dirty, PG_writeback,
//! PG_readahead).

use super::dirtyset::DirtyPages;
use super::inflight::InFlightSet;
use super::pageindex::PageIndex;
use super::readahead::{self, RaDecision, RaState};
use super::writeback::{Flusher, WriteReason};
use super::{CacheError, Extent, FileId, IoId, PageCacheConfig, ReadIo, StreamId, PAGE_SIZE};
use crate::engine::prefetch;
use crate::units::SimTime;
use serde::Serialize;
use std::collections::BTreeMap;

pub(super) const NIL: u32 = u32::MAX;

/// A page's state, as tests and the reference model see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PageState {
    Locked,
    Clean,
    Dirty,
    Writeback,
    WritebackDirty,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum List {
    None,
    Inactive,
    Active,
    /// The dirty pages (Dirty and WritebackDirty) in the order they became dirty.
    Aged,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    pub file: FileId,
    pub index: u64,
    pub state: PageState,
    /// The read (locked) or write (writeback) in flight.
    pub io: IoId,
    pub dirtied_at: SimTime,
    pub prev: u32,
    pub next: u32,
    pub list: List,
    /// Rejoins the active list when clean.
    pub active: bool,
    pub referenced: bool,
    /// Carries the read-ahead marker (PG_readahead).
    pub marker: bool,
    /// Read ahead and not yet asked for.
    pub ra_unused: bool,
    /// Truncated while its I/O was in flight (locked or under writeback): dropped when that
    /// I/O completes (`truncate.rs`).
    pub doomed: bool,
    /// While in flight: the slot of the next page of the same I/O (NIL after its last page).
    pub chain: u32,
}

impl Slot {
    /// On an LRU list: clean, not locked or pinned by a read.
    pub(super) fn is_evictable(&self) -> bool {
        matches!(self.list, List::Inactive | List::Active)
    }

    /// Page `index` of `file` in `state`, on no list, with no I/O, flags and links.
    fn fresh(file: FileId, index: u64, state: PageState) -> Slot {
        Slot {
            file,
            index,
            state,
            io: IoId(0),
            dirtied_at: SimTime::ZERO,
            prev: NIL,
            next: NIL,
            list: List::None,
            active: false,
            referenced: false,
            marker: false,
            ra_unused: false,
            doomed: false,
            chain: NIL,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Lru {
    pub head: u32,
    pub tail: u32,
    pub len: u64,
}

/// A file with pages in the cache.
#[derive(Clone, Debug, Default)]
pub(super) struct FileState {
    pub pages: u64,
    /// Pages in state Dirty (writable now), ascending (their slots are the page index's).
    pub dirty: DirtyPages,
    /// Pages in state WritebackDirty.
    pub wb_dirty: u64,
    /// Its place in the flusher's round robin while it has dirty pages.
    pub dirty_seq: Option<u64>,
    /// One past the highest page index cached since the state was made: no page is at or past it.
    pub last: u64,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct InFlight {
    pub extent: Extent,
    /// None for a read.
    pub write: Option<WriteReason>,
    /// The slot of the extent's first page; the others follow it in page order by `Slot::chain`.
    pub first: u32,
}

struct Stream {
    file: FileId,
    ra: RaState,
}

/// Pages written back, by why they were written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WritebackCounts {
    /// Periodic writeback of pages dirty longer than `dirty_expire_centisecs` (kupdate).
    pub expiry: u64,
    /// Background writeback above the background threshold.
    pub background: u64,
    /// `fsync`, `fdatasync` and range syncs.
    pub fsync: u64,
    /// Writeback asked for by a read or write short of memory.
    pub memory_pressure: u64,
}

/// What the cache did, in pages unless named otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Requested pages found uptodate.
    pub hits: u64,
    /// Requested pages not in the cache.
    pub misses: u64,
    /// Requested pages found locked (their read in flight): the reader waited for it.
    pub waits: u64,
    /// Pages read ahead (read without being asked for).
    pub readahead_pages: u64,
    /// Pages read ahead and asked for later.
    pub readahead_hits: u64,
    pub written_back: WritebackCounts,
    /// Clean pages evicted.
    pub evictions: u64,
    /// Reads and writes refused for want of memory (`NoMemory`).
    pub no_memory: u64,
    /// Times writers started waiting at the dirty threshold.
    pub throttle_events: u64,
    /// Writes refused at the dirty threshold (each retry counts).
    pub throttled_writes: u64,
    /// Time writers were held at the dirty threshold, nanoseconds.
    pub throttled_ns: u64,
    /// The most dirty pages at once.
    pub peak_dirty: u64,
    /// Pages dropped by truncation (at once, or when their I/O in flight completed).
    pub truncated_pages: u64,
    /// Dirty pages whose data truncation dropped unwritten (including the new data of pages
    /// written again under writeback).
    pub truncated_dirty: u64,
}

/// What a read needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The read proceeds: `issue` are the device reads to start now (the request's misses and
    /// read-ahead); it is complete when every I/O in `wait_on` has completed (at once if empty).
    Read { hits: u64, issue: Vec<ReadIo>, wait_on: Vec<IoId> },
    /// Not enough free or evictable pages: nothing changed; retry after completions.
    NoMemory { short: u64 },
}

/// What a write needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written: `dirtied` pages became dirty (the others were dirty already).
    Done { dirtied: u64 },
    /// Dirty + writeback pages exceed the dirty threshold: nothing written; retry after write
    /// completions.
    Throttled,
    /// Pages must be read first (`issue`, started now) or are being read: retry once every I/O
    /// in `wait_on` has completed.
    Wait { issue: Vec<ReadIo>, wait_on: Vec<IoId> },
    /// Not enough free or evictable pages: nothing changed; retry after completions.
    NoMemory { short: u64 },
}

/// The page cache of one kernel.
pub struct PageCache {
    pub(super) cfg: PageCacheConfig,
    /// Grown as pages are first needed, up to `capacity_pages`.
    pub(super) slots: Vec<Slot>,
    /// Slots of `slots` free again.
    pub(super) free: Vec<u32>,
    /// Each cached page's slot, by (file, page). Point lookups only; ranges go through
    /// [`PageCache::pages_in`], which sorts what it finds.
    pub(super) index: PageIndex,
    pub(super) inactive: Lru,
    pub(super) active: Lru,
    pub(super) files: BTreeMap<FileId, FileState>,
    /// Dirty and WritebackDirty pages in the order they became dirty: head the newest, tail the
    /// oldest (a page dirtied is dirtied now, after every other).
    pub(super) aged: Lru,
    /// Files with dirty pages, in the order they became dirty (b_dirty / b_io / b_more_io).
    pub(super) dirty_order: BTreeMap<u64, FileId>,
    pub(super) next_seq: u64,
    pub(super) inflight: InFlightSet,
    next_io: u64,
    streams: BTreeMap<StreamId, Stream>,
    next_stream: u32,
    /// Per file given one, the page index its end: read-ahead stops there (at `i_size`).
    pub(super) ends: BTreeMap<FileId, u64>,
    /// Pages in state Dirty or WritebackDirty.
    pub(super) n_dirty: u64,
    /// Pages in state Writeback or WritebackDirty.
    pub(super) n_writeback: u64,
    pub(super) clock: SimTime,
    pub(super) flusher: Flusher,
    /// Since when writers have been held at the dirty threshold.
    pub(super) throttled_since: Option<SimTime>,
    pub(super) stats: CacheStats,
}

impl PageCache {
    pub fn new(cfg: PageCacheConfig) -> Result<PageCache, CacheError> {
        cfg.validate()?;
        let lru = Lru { head: NIL, tail: NIL, len: 0 };
        Ok(PageCache {
            flusher: Flusher::new(&cfg),
            cfg,
            slots: Vec::new(),
            free: Vec::new(),
            index: PageIndex::default(),
            inactive: lru,
            active: lru,
            files: BTreeMap::new(),
            aged: lru,
            dirty_order: BTreeMap::new(),
            next_seq: 0,
            inflight: InFlightSet::default(),
            next_io: 0,
            streams: BTreeMap::new(),
            next_stream: 0,
            ends: BTreeMap::new(),
            n_dirty: 0,
            n_writeback: 0,
            clock: SimTime::ZERO,
            throttled_since: None,
            stats: CacheStats::default(),
        })
    }

    pub fn config(&self) -> &PageCacheConfig {
        &self.cfg
    }
    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }
    /// Pages in the cache.
    pub fn cached_pages(&self) -> u64 {
        self.index.len() as u64
    }
    /// Dirty pages (including those written again while under writeback).
    pub fn dirty_pages(&self) -> u64 {
        self.n_dirty
    }
    /// Pages under writeback.
    pub fn writeback_pages(&self) -> u64 {
        self.n_writeback
    }
    /// The state of a page, None if it is not in the cache.
    pub fn page_state(&self, file: FileId, page: u64) -> Option<PageState> {
        self.index.get(file, page).map(|s| self.slots[s as usize].state)
    }
    /// Whether a cached page is on the active list (tests).
    pub fn is_active(&self, file: FileId, page: u64) -> bool {
        self.index.get(file, page).is_some_and(|s| self.slots[s as usize].list == List::Active)
    }
    /// Whether a cached page carries the read-ahead marker.
    pub fn has_marker(&self, file: FileId, page: u64) -> bool {
        self.index.get(file, page).is_some_and(|s| self.slots[s as usize].marker)
    }

    /// `file` ends before page `end`: read-ahead never reads at or past it, as Linux's stops at
    /// the file's size (`page_cache_ra_unbounded`). A file without an end has none.
    pub fn set_file_end(&mut self, file: FileId, end: u64) {
        self.ends.insert(file, end);
    }

    /// `file` is gone (deleted, its pages truncated): its end is forgotten, so that a run
    /// creating and deleting files keeps nothing of those gone.
    pub fn forget_file(&mut self, file: FileId) {
        self.ends.remove(&file);
    }

    /// Opens a stream of reads on `file` (its read-ahead state lives until `close_stream`).
    pub fn open_stream(&mut self, file: FileId) -> StreamId {
        let id = StreamId(self.next_stream);
        self.next_stream = self.next_stream.wrapping_add(1);
        self.streams.insert(id, Stream { file, ra: RaState::default() });
        id
    }

    pub fn close_stream(&mut self, id: StreamId) -> Result<(), CacheError> {
        self.streams.remove(&id).map(|_| ()).ok_or(CacheError::UnknownStream(id))
    }

    /// Advances the clock to `now`.
    pub(super) fn tick(&mut self, now: SimTime) -> Result<(), CacheError> {
        if now < self.clock {
            return Err(CacheError::TimeWentBack { now: now.ns(), clock: self.clock.ns() });
        }
        self.clock = now;
        Ok(())
    }

    /// The pages `[first, last]` of a byte range, checked.
    pub(super) fn page_range(&self, op: &'static str, offset: u64, len: u64) -> Result<(u64, u64), CacheError> {
        let end = offset.checked_add(len).filter(|&e| len > 0 && e < 1 << 63);
        let Some(end) = end else { return Err(CacheError::BadRange { op, offset, len }) };
        let (first, last) = (offset / PAGE_SIZE, (end - 1) / PAGE_SIZE);
        if last - first + 1 > self.cfg.capacity_pages {
            return Err(CacheError::TooLarge { op, pages: last - first + 1, capacity: self.cfg.capacity_pages });
        }
        Ok((first, last))
    }

    /// Asks the processor to load what a read or write of the page at byte `offset` of `file`
    /// looks up first, its index entry, and the file's dirty bits a write sets (a hint for a
    /// call about to come: no effect on results).
    pub fn prefetch(&self, file: FileId, offset: u64) {
        self.index.prefetch(file, offset / PAGE_SIZE);
        if let Some(f) = self.files.get(&file) {
            f.dirty.prefetch(offset / PAGE_SIZE);
        }
    }

    pub(super) fn slot_of(&self, file: FileId, page: u64) -> Option<u32> {
        self.index.get(file, page)
    }

    /// Reads `len` bytes at `offset` of `file`, on `stream` (its read-ahead) or without
    /// read-ahead (None).
    pub fn read(
        &mut self,
        now: SimTime,
        file: FileId,
        offset: u64,
        len: u64,
        stream: Option<StreamId>,
    ) -> Result<ReadOutcome, CacheError> {
        self.tick(now)?;
        let (first, last) = self.page_range("read", offset, len)?;
        if let Some(id) = stream {
            let s = self.streams.get(&id).ok_or(CacheError::UnknownStream(id))?;
            if s.file != file {
                return Err(CacheError::StreamFile { stream: id, opened: s.file, used: file });
            }
        }
        let (mut missing, mut on_lru) = (0, 0);
        for p in first..=last {
            match self.slot_of(file, p) {
                None => missing += 1,
                Some(s) if self.slots[s as usize].is_evictable() => on_lru += 1,
                Some(_) => {}
            }
        }
        let avail = self.free_pages() + self.inactive.len + self.active.len - on_lru;
        if missing > avail {
            return Ok(self.no_memory(missing - avail));
        }
        let (hits, pinned) = self.pin_request(file, first, last);
        self.stats.misses += missing;
        let mut fresh = Vec::new();
        let mut need = missing;
        for p in first..=last {
            self.read_page(file, p, last, stream, &mut need, &mut fresh);
        }
        debug_assert_eq!(need, 0);
        let issue = self.start_reads(file, fresh);
        let mut wait_on = Vec::new();
        for p in first..=last {
            let s = self.slot_of(file, p).expect("every requested page is cached");
            self.touch(s);
            let sl = &mut self.slots[s as usize];
            if std::mem::take(&mut sl.ra_unused) {
                self.stats.readahead_hits += 1;
            }
            if sl.state == PageState::Locked {
                wait_on.push(sl.io);
            }
        }
        for s in pinned {
            self.relink(s);
        }
        wait_on.sort();
        wait_on.dedup();
        if let Some(id) = stream {
            let st = self.streams.get_mut(&id).expect("checked above");
            st.ra.prev_page = Some(last);
        }
        Ok(ReadOutcome::Read { hits, issue, wait_on })
    }

    /// Counts the request's cached pages (hits and waits) and takes its clean pages off the LRU
    /// lists while the read allocates, so that its read-ahead cannot evict them.
    fn pin_request(&mut self, file: FileId, first: u64, last: u64) -> (u64, Vec<u32>) {
        let (mut hits, mut pinned) = (0, Vec::new());
        for p in first..=last {
            if let Some(s) = self.slot_of(file, p) {
                match self.slots[s as usize].state {
                    PageState::Locked => self.stats.waits += 1,
                    _ => hits += 1,
                }
                if self.slots[s as usize].is_evictable() {
                    self.unlink(s);
                    pinned.push(s);
                }
            }
        }
        self.stats.hits += hits;
        (hits, pinned)
    }

    /// One requested page of a read: the synchronous read-ahead if it is missing, the
    /// asynchronous one if it carries the marker.
    fn read_page(
        &mut self,
        file: FileId,
        p: u64,
        last: u64,
        stream: Option<StreamId>,
        need: &mut u64,
        fresh: &mut Vec<u64>,
    ) {
        let req = last - p + 1;
        if self.slot_of(file, p).is_none() {
            let d = self.decide(file, p, req, false, stream);
            self.apply(file, p, last, d, need, fresh);
            if self.slot_of(file, p).is_none() {
                let only = RaDecision::Window { start: p, size: 1, async_size: 0 };
                self.apply(file, p, last, only, need, fresh);
            }
        }
        let s = self.slot_of(file, p).expect("allocated above") as usize;
        if std::mem::take(&mut self.slots[s].marker) {
            let d = self.decide(file, p, req, true, stream);
            self.apply(file, p, last, d, need, fresh);
        }
    }

    fn decide(&mut self, file: FileId, p: u64, req: u64, marker: bool, stream: Option<StreamId>) -> RaDecision {
        let max = self.cfg.read_ahead_kb / 4;
        let Some(id) = stream else { return if marker { RaDecision::Nothing } else { RaDecision::Plain } };
        let mut ra = self.streams[&id].ra;
        let next_miss = |from: u64, max: u64| (from..from + max).find(|&q| !self.index.contains(file, q));
        let d = readahead::ondemand(&mut ra, max, p, req, marker, next_miss);
        self.streams.get_mut(&id).expect("open stream").ra = ra;
        d
    }

    /// Allocates the pages a decision reads: the request's pages (`[p, last]`) always, others
    /// while they leave `need` pages for the request's.
    fn apply(&mut self, file: FileId, p: u64, last: u64, d: RaDecision, need: &mut u64, fresh: &mut Vec<u64>) {
        let (start, end, mark) = match d {
            RaDecision::Nothing => return,
            RaDecision::Plain => (p, last + 1, None),
            RaDecision::Window { start, size, async_size } => {
                (start, start + size, (async_size > 0).then(|| start + size - async_size))
            }
        };
        let eof = self.ends.get(&file).copied().unwrap_or(u64::MAX);
        for q in start..end {
            if self.slot_of(file, q).is_some() {
                continue;
            }
            let requested = (p..=last).contains(&q);
            if !requested && q >= eof {
                break;
            }
            if !requested && self.free_pages() + self.inactive.len + self.active.len <= *need {
                break;
            }
            let s = self.alloc(file, q, PageState::Locked).expect("room checked");
            if requested {
                *need -= 1;
            } else {
                self.slots[s as usize].ra_unused = true;
                self.stats.readahead_pages += 1;
            }
            self.slots[s as usize].marker = Some(q) == mark;
            fresh.push(q);
        }
    }

    /// Gives the locked pages `pages` of `file` read I/Os: contiguous runs of at most
    /// `max_extent_bytes`, each page waiting on its run's I/O.
    pub(super) fn start_reads(&mut self, file: FileId, mut pages: Vec<u64>) -> Vec<ReadIo> {
        pages.sort_unstable();
        let max = self.cfg.max_extent_bytes / PAGE_SIZE;
        let mut out: Vec<ReadIo> = Vec::new();
        for p in pages {
            match out.last_mut() {
                Some(r) if r.extent.end() == p && r.extent.pages < max => r.extent.pages += 1,
                _ => {
                    let id = self.new_io();
                    out.push(ReadIo { id, extent: Extent { file, first: p, pages: 1 } })
                }
            }
        }
        for r in &out {
            let mut prev = NIL;
            for p in (r.extent.first..r.extent.end()).rev() {
                let s = self.index.get(file, p).expect("a page being read is cached");
                let sl = &mut self.slots[s as usize];
                (sl.io, sl.chain, prev) = (r.id, prev, s);
            }
            self.inflight.insert(r.id, InFlight { extent: r.extent, write: None, first: prev });
        }
        out
    }

    pub(super) fn new_io(&mut self) -> IoId {
        self.next_io += 1;
        IoId(self.next_io)
    }

    pub(super) fn no_memory<T: From<NoMem>>(&mut self, short: u64) -> T {
        self.stats.no_memory += 1;
        // Writeback frees memory only if there are dirty pages to write; otherwise the caller
        // waits for reads and writes in flight.
        if self.oldest_dirty().is_some() {
            self.flusher.pressure = self.flusher.pressure.max(short);
        }
        T::from(NoMem(short))
    }

    /// A read completed: its pages become clean and join the inactive list.
    pub fn read_done(&mut self, now: SimTime, id: IoId) -> Result<(), CacheError> {
        self.tick(now)?;
        let unknown = CacheError::UnknownIo { op: "read_done", id, expected: "read" };
        let io = *self.inflight.get(id).filter(|f| f.write.is_none()).ok_or(unknown)?;
        self.inflight.remove(id);
        let mut s = io.first;
        while s != NIL {
            let sl = &mut self.slots[s as usize];
            debug_assert_eq!((sl.state, sl.io), (PageState::Locked, id));
            let next = std::mem::replace(&mut sl.chain, NIL);
            if sl.doomed {
                self.drop_doomed(s);
            } else {
                sl.state = PageState::Clean;
                self.relink(s);
            }
            s = next;
        }
        Ok(())
    }

    /// A Dirty page (in slot `s`) enters the file's dirty set.
    pub(super) fn add_dirty(&mut self, file: FileId, page: u64, s: u32) {
        let fresh = self.file_mut(file).dirty.insert(page);
        debug_assert!(fresh, "page ({file:?}, {page}) in slot {s} was already dirty");
        self.enqueue_dirty(file);
    }

    /// The time the oldest Dirty page became dirty: the first from the age list's tail that is
    /// not also under writeback.
    pub(super) fn oldest_dirty(&self) -> Option<SimTime> {
        let mut s = self.aged.tail;
        while s != NIL {
            let sl = &self.slots[s as usize];
            if sl.state == PageState::Dirty {
                return Some(sl.dirtied_at);
            }
            s = sl.prev;
        }
        None
    }

    /// Puts a page that became dirty now at the head of the age list.
    pub(super) fn link_aged(&mut self, s: u32) {
        debug_assert!(matches!(self.slots[s as usize].state, PageState::Dirty | PageState::WritebackDirty));
        self.push_head(s, List::Aged);
    }

    /// Puts `file` in the flusher's round robin if it is not there.
    pub(super) fn enqueue_dirty(&mut self, file: FileId) {
        let seq = self.next_seq;
        let f = self.file_mut(file);
        if f.dirty_seq.is_none() {
            f.dirty_seq = Some(seq);
            self.dirty_order.insert(seq, file);
            self.next_seq += 1;
        }
    }

    /// Takes `file` out of the round robin if it has no dirty pages left.
    pub(super) fn dequeue_if_clean(&mut self, file: FileId) {
        let f = self.files.get_mut(&file).expect("file with pages");
        if f.dirty.is_empty() && f.wb_dirty == 0 {
            if let Some(seq) = f.dirty_seq.take() {
                self.dirty_order.remove(&seq);
            }
        }
    }

    pub(super) fn file_mut(&mut self, file: FileId) -> &mut FileState {
        self.files.entry(file).or_default()
    }

    /// An access (`folio_mark_accessed`): sets the referenced bit, or promotes a referenced page.
    pub(super) fn touch(&mut self, s: u32) {
        let sl = &mut self.slots[s as usize];
        if !sl.referenced {
            sl.referenced = true;
        } else if !sl.active {
            sl.active = true;
            sl.referenced = false;
            if sl.list == List::Inactive {
                self.unlink(s);
                self.relink(s);
            }
        }
    }

    /// The cached pages of `file` in `[first, end)` as (page, slot), ascending: the range cut at
    /// the file's highest page, looked up one by one if no longer than the file's cached pages,
    /// else found by a scan of the index.
    pub(super) fn pages_in(&self, file: FileId, first: u64, end: u64) -> Vec<(u64, u32)> {
        let Some(f) = self.files.get(&file) else { return Vec::new() };
        let end = end.min(f.last);
        let mut out: Vec<(u64, u32)> = if end.saturating_sub(first) <= f.pages.max(64) {
            (first..end).filter_map(|p| self.index.get(file, p).map(|s| (p, s))).collect()
        } else {
            let within = |&(fl, p, _): &(FileId, u64, u32)| fl == file && (first..end).contains(&p);
            self.index.iter().filter(within).map(|(_, p, s)| (p, s)).collect()
        };
        out.sort_unstable();
        out
    }

    /// Pages not holding a file's page: free slots and slots not yet grown.
    pub(super) fn free_pages(&self) -> u64 {
        self.free.len() as u64 + self.cfg.capacity_pages - self.slots.len() as u64
    }

    /// Takes a free slot for a new page (growing the slab up to the capacity), evicting a clean
    /// page if needed.
    pub(super) fn alloc(&mut self, file: FileId, page: u64, state: PageState) -> Option<u32> {
        if self.free.is_empty() && (self.slots.len() as u64) < self.cfg.capacity_pages {
            self.free.push(self.slots.len() as u32);
            self.slots.push(Slot::fresh(file, page, state));
        }
        if self.free.is_empty() {
            self.evict_one()?;
        }
        let s = self.free.pop()?;
        let sl = &mut self.slots[s as usize];
        *sl = Slot::fresh(file, page, state);
        self.index.insert(file, page, s);
        let f = self.file_mut(file);
        f.pages += 1;
        f.last = f.last.max(page + 1);
        if state == PageState::Clean {
            self.relink(s);
        }
        Some(s)
    }

    /// Reclaims one clean page: balances the lists, then takes the inactive tail.
    fn evict_one(&mut self) -> Option<()> {
        while self.active.len > self.inactive.len {
            let t = self.active.tail;
            self.unlink(t);
            let sl = &mut self.slots[t as usize];
            sl.active = false;
            sl.referenced = false;
            self.relink(t);
        }
        let t = self.inactive.tail;
        if t == NIL {
            return None;
        }
        self.unlink(t);
        self.drop_page(t);
        self.stats.evictions += 1;
        // The next victim is the new tail (just written); its unlink will write the page before
        // it, which a large cache holds far from here: start loading it now.
        // Its index entry is as far: load that too.
        let next = self.inactive.tail;
        if next != NIL {
            let sl = &self.slots[next as usize];
            self.index.prefetch(sl.file, sl.index);
            if sl.prev != NIL {
                prefetch(&self.slots[sl.prev as usize]);
            }
        }
        Some(())
    }

    /// Removes a page that is on no list from the cache.
    pub(super) fn drop_page(&mut self, s: u32) {
        let sl = self.slots[s as usize];
        debug_assert_eq!(sl.list, List::None);
        self.index.remove(sl.file, sl.index);
        let f = self.files.get_mut(&sl.file).expect("file with pages");
        f.pages -= 1;
        if f.pages == 0 {
            debug_assert!(f.dirty.is_empty() && f.dirty_seq.is_none());
            self.files.remove(&sl.file);
        }
        self.free.push(s);
    }

    fn lru(&mut self, l: List) -> &mut Lru {
        match l {
            List::Active => &mut self.active,
            List::Inactive => &mut self.inactive,
            List::Aged => &mut self.aged,
            List::None => unreachable!("no list"),
        }
    }

    /// Takes a page off its list.
    pub(super) fn unlink(&mut self, s: u32) {
        let Slot { prev, next, list, .. } = self.slots[s as usize];
        if list == List::None {
            return;
        }
        if prev != NIL {
            self.slots[prev as usize].next = next;
        } else {
            self.lru(list).head = next;
        }
        if next != NIL {
            self.slots[next as usize].prev = prev;
        } else {
            self.lru(list).tail = prev;
        }
        self.lru(list).len -= 1;
        let sl = &mut self.slots[s as usize];
        (sl.prev, sl.next, sl.list) = (NIL, NIL, List::None);
    }

    /// Puts a clean page at the head of its list.
    pub(super) fn relink(&mut self, s: u32) {
        debug_assert_eq!(self.slots[s as usize].state, PageState::Clean);
        let list = if self.slots[s as usize].active { List::Active } else { List::Inactive };
        self.push_head(s, list);
    }

    fn push_head(&mut self, s: u32, list: List) {
        debug_assert_eq!(self.slots[s as usize].list, List::None);
        let head = self.lru(list).head;
        if head != NIL {
            self.slots[head as usize].prev = s;
        } else {
            self.lru(list).tail = s;
        }
        let l = self.lru(list);
        l.head = s;
        l.len += 1;
        let sl = &mut self.slots[s as usize];
        (sl.prev, sl.next, sl.list) = (NIL, head, list);
    }
}

/// `NoMemory` of either outcome.
pub(super) struct NoMem(u64);

impl From<NoMem> for ReadOutcome {
    fn from(n: NoMem) -> Self {
        ReadOutcome::NoMemory { short: n.0 }
    }
}
impl From<NoMem> for WriteOutcome {
    fn from(n: NoMem) -> Self {
        WriteOutcome::NoMemory { short: n.0 }
    }
}
