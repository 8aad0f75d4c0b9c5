//! The page cache's invariant check: every structure of [`PageCache`] against the others (the
//! slab, the index, the lists, the counts, the dirty sets, the I/O in flight), for tests and the
//! simulator's checked runs. Formats its messages only on failure.

use super::pagecache::{List, PageCache, PageState, NIL};
use super::FileId;
use std::collections::{BTreeMap, BTreeSet};

impl PageCache {
    /// Checks every structure against the others: the slab, the index, the lists, the counts,
    /// the dirty sets and the I/O in flight.
    pub fn check_invariants(&self) -> Result<(), String> {
        let (cap, grown) = (self.cfg.capacity_pages as usize, self.slots.len());
        if self.index.len() + self.free.len() != grown || grown > cap {
            return Err(format!(
                "{} cached + {} free != {grown} slots, or more than the capacity {cap}",
                self.index.len(),
                self.free.len()
            ));
        }
        self.index.check()?;
        let mut used = vec![false; grown];
        for (f, p, s) in self.index.iter() {
            let sl = &self.slots[s as usize];
            if (sl.file, sl.index) != (f, p) || std::mem::replace(&mut used[s as usize], true) {
                return Err(format!("index entry ({f:?}, {p}) -> slot {s} holds ({:?}, {})", sl.file, sl.index));
            }
        }
        if self.free.iter().any(|&s| used[s as usize]) {
            return Err("a free slot is in the index".into());
        }
        self.check_lists()?;
        let (mut dirty, mut wb) = (0, 0);
        let mut files: BTreeMap<FileId, (u64, u64)> = BTreeMap::new();
        let mut ios = BTreeSet::new();
        for (f, p, s) in self.index.iter() {
            let sl = &self.slots[s as usize];
            let e = files.entry(f).or_default();
            e.0 += 1;
            let want = match sl.state {
                PageState::Clean => sl.list != List::Aged && sl.list != List::None,
                PageState::Dirty | PageState::WritebackDirty => sl.list == List::Aged,
                PageState::Locked | PageState::Writeback => sl.list == List::None,
            };
            if !want {
                return Err(format!("page ({f:?}, {p}) in state {:?} is on list {:?}", sl.state, sl.list));
            }
            match sl.state {
                PageState::Dirty => dirty += 1,
                PageState::Writeback => wb += 1,
                PageState::WritebackDirty => (dirty, wb, e.1) = (dirty + 1, wb + 1, e.1 + 1),
                PageState::Locked | PageState::Clean => {}
            }
            if sl.doomed && !matches!(sl.state, PageState::Locked | PageState::Writeback) {
                return Err(format!("page ({f:?}, {p}) truncated in flight is in state {:?}", sl.state));
            }
            if self.files.get(&f).is_some_and(|x| p >= x.last) {
                return Err(format!("page ({f:?}, {p}) at or past its file's highest page"));
            }
            let dirty_listed = self.files.get(&f).is_some_and(|x| x.dirty.contains(p));
            if (sl.state == PageState::Dirty) != dirty_listed {
                return Err(format!("page ({f:?}, {p}) in state {:?}: dirty set {dirty_listed}", sl.state));
            }
            if matches!(sl.state, PageState::Locked | PageState::Writeback | PageState::WritebackDirty) {
                let unknown = || format!("page ({f:?}, {p}) waits on unknown {:?}", sl.io);
                let io = self.inflight.get(sl.io).ok_or_else(unknown)?;
                ios.insert(sl.io);
                let covers = io.extent.file == f && (io.extent.first..io.extent.end()).contains(&p);
                if !covers || io.write.is_some() == (sl.state == PageState::Locked) {
                    return Err(format!("page ({f:?}, {p}) in state {:?} not covered by its I/O {:?}", sl.state, io));
                }
            }
        }
        if ios.len() != self.inflight.len() {
            return Err(format!("{} I/Os in flight, {} with pages", self.inflight.len(), ios.len()));
        }
        if (dirty, wb) != (self.n_dirty, self.n_writeback) {
            return Err(format!(
                "counted {dirty} dirty / {wb} writeback, kept {} / {}",
                self.n_dirty, self.n_writeback
            ));
        }
        if self.aged.len != self.n_dirty {
            return Err(format!("{} pages on the age list, {} dirty", self.aged.len, self.n_dirty));
        }
        self.check_files(&files)?;
        if self.n_dirty > self.stats.peak_dirty {
            return Err(format!("{} dirty pages above the peak {}", self.n_dirty, self.stats.peak_dirty));
        }
        Ok(())
    }

    /// Each file's counts and place in the round robin against the pages counted per file
    /// (pages, writeback+dirty pages); each I/O in flight against its pages.
    fn check_files(&self, files: &BTreeMap<FileId, (u64, u64)>) -> Result<(), String> {
        for (f, st) in &self.files {
            let &(pages, wbd) = files.get(f).ok_or_else(|| format!("{f:?} has state but no pages"))?;
            let queued = st.dirty_seq.is_some_and(|q| self.dirty_order.get(&q) == Some(f));
            for p in st.dirty.iter() {
                if !self.index.get(*f, p).is_some_and(|s| self.slots[s as usize].state == PageState::Dirty) {
                    return Err(format!("{f:?}: page {p} is in the dirty set but not a Dirty page"));
                }
            }
            if st.pages != pages || st.wb_dirty != wbd || queued != (!st.dirty.is_empty() || wbd > 0) {
                return Err(format!(
                    "{f:?}: {} pages / {} wb-dirty kept, {pages} / {wbd} counted; queued {queued}",
                    st.pages, st.wb_dirty
                ));
            }
        }
        if files.len() != self.files.len() || self.dirty_order.len() > self.files.len() {
            return Err("files with pages and file states differ".into());
        }
        for (id, io) in self.inflight.iter() {
            let mut chained = io.first;
            for p in io.extent.first..io.extent.end() {
                let s = self.slot_of(io.extent.file, p);
                if s.is_none_or(|s| self.slots[s as usize].io != id || s != chained) {
                    return Err(format!("{id:?}: page {p} of {:?} is not its page, or not chained", io.extent));
                }
                chained = self.slots[chained as usize].chain;
            }
            if chained != NIL {
                return Err(format!("{id:?}: its chain goes past {:?}", io.extent));
            }
        }
        Ok(())
    }

    /// Each list's links and count; the LRU lists' pages' active flags; the age list newest first.
    fn check_lists(&self) -> Result<(), String> {
        for (l, lru) in [(List::Inactive, &self.inactive), (List::Active, &self.active), (List::Aged, &self.aged)] {
            let (mut n, mut prev, mut s) = (0, NIL, lru.head);
            while s != NIL {
                let sl = &self.slots[s as usize];
                let flag = l == List::Aged || sl.active == (l == List::Active);
                let aged = l != List::Aged || prev == NIL || self.slots[prev as usize].dirtied_at >= sl.dirtied_at;
                if sl.list != l || sl.prev != prev || !flag || !aged || n > lru.len {
                    return Err(format!("list {l:?} broken at slot {s}"));
                }
                (n, prev, s) = (n + 1, s, sl.next);
            }
            if n != lru.len || lru.tail != prev {
                return Err(format!("list {l:?}: {n} linked, {} counted", lru.len));
            }
        }
        Ok(())
    }
}
