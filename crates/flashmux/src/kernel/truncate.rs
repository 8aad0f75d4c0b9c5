//! Truncation: a file's pages from a page on dropped from the cache, as a file is truncated or
//! deleted (`unlink` of its last name) — Linux's `truncate_inode_pages_range`.
//!
//! # Model
//! `truncate(now, file, from)` takes each cached page of `file` at or past page `from`:
//! - **clean**: dropped (off its LRU list, out of the index);
//! - **dirty**: dropped without being written, its dirty accounting cancelled
//!   (`folio_cancel_dirty`): it leaves the file's dirty set and the age index;
//! - **locked** (being read) or **writeback**: kept until its I/O completes, then dropped
//!   instead of becoming clean (Linux's truncate waits on the lock and on `folio_wait_writeback`,
//!   then drops it). The I/O is reported in `busy`: the caller's truncate completes when all of
//!   it has;
//! - **writeback+dirty**: its new data is dropped at once (dirty accounting cancelled, counted as
//!   dirty) and the page is a writeback page marked as above: it is dropped when its write
//!   completes, never dirty again.
//!
//! A file left with no dirty page leaves the flusher's round robin. The file's read-ahead end
//! (`set_file_end`) becomes `from` if it was larger (a file without one gets `from`). A page
//! marked for dropping that is written again before its write completes is the file's again
//! (the write extended the file past `from`): it becomes writeback+dirty as any other, and
//! dirty when its write completes. A reader of a marked page waits for its I/O as for any
//! page in flight.
//!
//! Writers held at the dirty threshold are released if the dirty pages cancelled bring dirty +
//! writeback pages to it (`write_done`'s rule).
//!
//! # Worked example
//! File A: pages 0-3 clean, 4-5 dirty, 6-7 under one write (7 written again: writeback+dirty),
//! 8 being read. `truncate(A, 2)` drops 2-3 (`clean` 2) and 4-5 (`dirty` 2 + page 7's new data
//! = 3) and reports the write and the read as `busy`; 0-1 stay. When the read completes page 8
//! is dropped, when the write does 6-7: the cache holds 0-1; 7 truncated pages in all.
//!
//! # Simplifications
//! Only whole pages: a partial last page (`from` inside a page, Linux's `truncate_inode_partial_folio`)
//! is the caller's to round. Truncation does not take the inode lock: a read or write the caller
//! lets through meanwhile sees the pages above.
//!
//! # Source
//! Linux `mm/truncate.c` (`truncate_inode_pages_range`, `truncate_cleanup_folio`),
//! `mm/page-writeback.c` (`folio_cancel_dirty`, `folio_wait_writeback`).

use super::pagecache::{PageCache, PageState};
use super::{CacheError, FileId, IoId};
use crate::units::SimTime;
use serde::Serialize;

/// What `truncate` did, in pages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Truncated {
    /// Clean pages dropped.
    pub clean: u64,
    /// Dirty pages dropped unwritten (and pages written again under writeback whose new data
    /// was dropped).
    pub dirty: u64,
    /// The I/O in flight on pages at or past `from`, sorted and distinct: the truncation is
    /// complete when all of it has completed (at once if empty).
    pub busy: Vec<IoId>,
}

impl PageCache {
    /// Truncates `file` at page `from`: its cached pages at or past it are dropped, at once or
    /// when their I/O in flight completes (see the header).
    pub fn truncate(&mut self, now: SimTime, file: FileId, from: u64) -> Result<Truncated, CacheError> {
        self.tick(now)?;
        let end = self.ends.entry(file).or_insert(u64::MAX);
        *end = (*end).min(from);
        let (mut res, mut dropped) = (Truncated::default(), 0);
        for (p, s) in self.pages_in(file, from, u64::MAX) {
            let sl = self.slots[s as usize];
            match sl.state {
                PageState::Clean => {
                    self.unlink(s);
                    self.drop_page(s);
                    (res.clean, dropped) = (res.clean + 1, dropped + 1);
                }
                PageState::Dirty => {
                    let listed = self.files.get_mut(&file).expect("file with pages").dirty.remove(p);
                    assert!(listed, "dirty page listed");
                    self.unlink(s);
                    self.n_dirty -= 1;
                    self.dequeue_if_clean(file);
                    self.drop_page(s);
                    (res.dirty, dropped) = (res.dirty + 1, dropped + 1);
                }
                PageState::WritebackDirty => {
                    self.files.get_mut(&file).expect("file with pages").wb_dirty -= 1;
                    self.unlink(s);
                    self.n_dirty -= 1;
                    self.dequeue_if_clean(file);
                    let sl = &mut self.slots[s as usize];
                    (sl.state, sl.doomed) = (PageState::Writeback, true);
                    res.dirty += 1;
                    res.busy.push(sl.io);
                }
                PageState::Locked | PageState::Writeback => {
                    self.slots[s as usize].doomed = true;
                    res.busy.push(sl.io);
                }
            }
        }
        res.busy.sort_unstable();
        res.busy.dedup();
        self.stats.truncated_pages += dropped;
        self.stats.truncated_dirty += res.dirty;
        self.release_writers(now);
        Ok(res)
    }

    /// Drops a page truncated while its I/O was in flight, that I/O having completed (the
    /// caller has taken it out of the writeback count).
    pub(super) fn drop_doomed(&mut self, s: u32) {
        debug_assert!(self.slots[s as usize].doomed);
        self.drop_page(s);
        self.stats.truncated_pages += 1;
    }

    /// Whether a cached page was truncated while its I/O was in flight (tests).
    pub fn is_truncated_in_flight(&self, file: FileId, page: u64) -> bool {
        self.slot_of(file, page).is_some_and(|s| self.slots[s as usize].doomed)
    }
}
