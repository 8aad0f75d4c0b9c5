//! The page cache's index: which slot holds page `p` of file `f` — Linux's per-mapping xarray,
//! here one hash table for every file.
//!
//! # Model
//! An open-addressing table of `2^k` entries (page, file, slot), 16 bytes each, with linear
//! probing: a key's home entry is the top `k` bits of a multiplicative hash of (file, page); a
//! key is found by scanning from its home to the first empty entry. Removal shifts the entries
//! after it back (backward-shift deletion), so there are no tombstones and a lookup's scan stays
//! as short as the table's load allows. The table doubles when it would become more than half
//! full and never shrinks (it holds at most the cache's capacity).
//!
//! What it offers beyond a hash map is [`PageIndex::prefetch`]: the page cache knows the next
//! page it will evict one eviction ahead, and with a table of a few million entries each
//! removal would otherwise wait on a load from memory.
//!
//! Iteration (`iter`) is in table order, which depends on the hash: callers sort what they find
//! where order matters.
//!
//! # Worked example
//! 16 entries (k = 4). Keys A, B, C with homes 5, 5, 6 are inserted in that order: A at 5, B
//! at 6 (5 taken), C at 7 (6 taken). Removing A empties 5; B (home 5) moves back to 5, C (home
//! 6) to 6: a lookup of C scans 6 and finds it at once.
//!
//! # Source
//! Knuth, TAOCP vol. 3, §6.4 (linear probing, Algorithm R for deletion); the hash is
//! Fibonacci hashing (multiplication by 2^64 / φ, top bits).

use super::pagecache::NIL;
use super::FileId;
use crate::engine::prefetch;

#[derive(Clone, Copy, Debug)]
struct Entry {
    page: u64,
    file: FileId,
    /// NIL: the entry is empty.
    slot: u32,
}

const EMPTY: Entry = Entry { page: 0, file: FileId(0), slot: NIL };

/// The smallest table, entries.
const MIN_BITS: u32 = 4;

/// A map from (file, page) to a slot (see the header).
#[derive(Clone, Debug)]
pub(super) struct PageIndex {
    table: Vec<Entry>,
    len: usize,
    /// 64 - k for a table of 2^k entries.
    shift: u32,
}

impl Default for PageIndex {
    fn default() -> Self {
        PageIndex { table: vec![EMPTY; 1 << MIN_BITS], len: 0, shift: 64 - MIN_BITS }
    }
}

impl PageIndex {
    pub fn len(&self) -> usize {
        self.len
    }

    fn home(&self, file: FileId, page: u64) -> usize {
        let key = page ^ (file.0 as u64).rotate_right(20);
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    /// The entry holding the key, or the empty entry that ends its scan.
    fn find(&self, file: FileId, page: u64) -> (usize, bool) {
        let mut i = self.home(file, page);
        loop {
            let e = &self.table[i];
            if e.slot == NIL {
                return (i, false);
            }
            if e.page == page && e.file == file {
                return (i, true);
            }
            i = (i + 1) & self.mask();
        }
    }

    pub fn get(&self, file: FileId, page: u64) -> Option<u32> {
        let (i, found) = self.find(file, page);
        found.then(|| self.table[i].slot)
    }

    pub fn contains(&self, file: FileId, page: u64) -> bool {
        self.find(file, page).1
    }

    /// Maps the key to `slot` (not NIL); the slot it mapped to before, if any.
    pub fn insert(&mut self, file: FileId, page: u64, slot: u32) -> Option<u32> {
        debug_assert_ne!(slot, NIL);
        if (self.len + 1) * 2 > self.table.len() {
            self.grow();
        }
        let (i, found) = self.find(file, page);
        let old = found.then(|| self.table[i].slot);
        self.table[i] = Entry { page, file, slot };
        self.len += !found as usize;
        old
    }

    /// Removes the key; the slot it mapped to, if any.
    pub fn remove(&mut self, file: FileId, page: u64) -> Option<u32> {
        let (mut hole, found) = self.find(file, page);
        if !found {
            return None;
        }
        let slot = self.table[hole].slot;
        let mask = self.mask();
        let mut j = (hole + 1) & mask;
        loop {
            let e = self.table[j];
            if e.slot == NIL {
                break;
            }
            // `e` may move back to the hole unless its home lies after the hole, up to `j`
            // (cyclically): then the hole is not on its scan.
            let home = self.home(e.file, e.page);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.table[hole] = e;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.table[hole] = EMPTY;
        self.len -= 1;
        Some(slot)
    }

    /// Asks the processor to load the key's home entry and the entries after it in the next
    /// cache line, where its scan (or a removal's shifting) may go on (a hint: no effect on
    /// results).
    pub fn prefetch(&self, file: FileId, page: u64) {
        let home = self.home(file, page);
        prefetch(&self.table[home]);
        prefetch(&self.table[(home + 4) & self.mask()]);
    }

    /// Every (file, page, slot), in table order.
    pub fn iter(&self) -> impl Iterator<Item = (FileId, u64, u32)> + '_ {
        self.table.iter().filter(|e| e.slot != NIL).map(|e| (e.file, e.page, e.slot))
    }

    fn grow(&mut self) {
        let bigger = vec![EMPTY; self.table.len() * 2];
        let old = std::mem::replace(&mut self.table, bigger);
        self.shift -= 1;
        for e in old.into_iter().filter(|e| e.slot != NIL) {
            let (i, _) = self.find(e.file, e.page);
            self.table[i] = e;
        }
    }

    /// Every key is found from its home with no empty entry on the way, and `len` counts them.
    pub fn check(&self) -> Result<(), String> {
        let mut n = 0;
        for (i, e) in self.table.iter().enumerate().filter(|(_, e)| e.slot != NIL) {
            n += 1;
            if self.find(e.file, e.page) != (i, true) {
                return Err(format!("index entry ({:?}, {}) at {i} is not found from its home", e.file, e.page));
            }
        }
        if n != self.len || self.len * 2 > self.table.len() {
            return Err(format!("index: {n} entries, {} counted, table of {}", self.len, self.table.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn removal_moves_the_entries_after_it_back() {
        // Find three keys of a 16-entry table with homes h, h, h + 1 (the worked example).
        let mut ix = PageIndex::default();
        let f = FileId(1);
        let home = |p: u64| ix.home(f, p);
        let a = 0;
        let b = (1..).find(|&p| home(p) == home(a)).unwrap();
        let c = (1..).find(|&p| home(p) == (home(a) + 1) & 15).unwrap();
        let h = home(a);
        for (p, s) in [(a, 10), (b, 11), (c, 12)] {
            assert_eq!(ix.insert(f, p, s), None);
        }
        let at = |ix: &PageIndex, i: usize| ix.table[i & 15].slot;
        assert_eq!((at(&ix, h), at(&ix, h + 1), at(&ix, h + 2)), (10, 11, 12));
        assert_eq!(ix.remove(f, a), Some(10));
        assert_eq!((at(&ix, h), at(&ix, h + 1), at(&ix, h + 2)), (11, 12, NIL));
        assert_eq!((ix.get(f, b), ix.get(f, c), ix.get(f, a), ix.len()), (Some(11), Some(12), None, 2));
        ix.check().unwrap();
    }

    proptest! {
        /// Any mix of inserts and removals over a few files agrees with a BTreeMap, through
        /// growth and wrap-around.
        #[test]
        fn the_index_agrees_with_a_map(ops in prop::collection::vec((0u32..3, 0u64..200, any::<bool>()), 1..600)) {
            let (mut ix, mut m) = (PageIndex::default(), BTreeMap::new());
            for (i, &(f, p, ins)) in ops.iter().enumerate() {
                let f = FileId(f);
                if ins {
                    prop_assert_eq!(ix.insert(f, p, i as u32), m.insert((f, p), i as u32));
                } else {
                    prop_assert_eq!(ix.remove(f, p), m.remove(&(f, p)));
                }
                prop_assert_eq!(ix.len(), m.len());
            }
            ix.check().unwrap();
            let mut all: Vec<_> = ix.iter().map(|(f, p, s)| ((f, p), s)).collect();
            all.sort_unstable();
            prop_assert_eq!(all, m.into_iter().collect::<Vec<_>>());
        }
    }
}
