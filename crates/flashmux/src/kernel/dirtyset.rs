//! A file's Dirty pages: the set the flusher and fsync take pages from, in ascending order —
//! Linux's dirty tag on the page cache's xarray (`PAGECACHE_TAG_DIRTY`, searched by
//! `filemap_get_folios_tag`).
//!
//! # Model
//! Two levels of bits: bit `p % 64` of word `p / 64` says page `p` is dirty, and bit `w % 64` of
//! summary word `w / 64` says word `w` has a dirty page. Adding or removing a page sets or clears
//! its bit (and its word's summary bit); the next dirty page at or after `p` is found in the
//! page's word, else through the summary to the next word with one. The pages' slots are the
//! page index's, not kept here.
//!
//! Memory: a bit per page up to the highest page ever dirtied in the file (8 bytes per 64
//! pages, 2 MiB for a 64 GiB file), and a bit per 64 of those.
//!
//! # Worked example
//! Pages 3, 64 and 200 dirty: words[0] = 1 << 3, words[1] = 1 << 0, words[3] = 1 << 8; the
//! summary's word 0 has bits 0, 1 and 3. The next from 4: word 0 has nothing at or past bit 4;
//! the summary's next word with a page after word 0 is word 1: page 64.

/// The Dirty pages of one file (see the header).
#[derive(Clone, Debug, Default)]
pub(super) struct DirtyPages {
    words: Vec<u64>,
    summary: Vec<u64>,
    len: u64,
}

impl DirtyPages {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[cfg(test)]
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn contains(&self, page: u64) -> bool {
        let w = (page / 64) as usize;
        self.words.get(w).is_some_and(|&x| x & (1 << (page % 64)) != 0)
    }

    /// Asks the processor to load the word of `page` that [`DirtyPages::insert`] will change (a
    /// hint: nothing changes).
    pub fn prefetch(&self, page: u64) {
        if let Some(w) = self.words.get((page / 64) as usize) {
            crate::engine::prefetch(w);
        }
    }

    /// Adds `page`; `false` if it was there.
    pub fn insert(&mut self, page: u64) -> bool {
        let w = usize::try_from(page / 64).expect("a page index that fits in memory");
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
            self.summary.resize(w / 64 + 1, 0);
        }
        let bit = 1 << (page % 64);
        if self.words[w] & bit != 0 {
            return false;
        }
        self.words[w] |= bit;
        self.summary[w / 64] |= 1 << (w % 64);
        self.len += 1;
        true
    }

    /// Removes `page`; `false` if it was not there.
    pub fn remove(&mut self, page: u64) -> bool {
        let w = (page / 64) as usize;
        let bit = 1 << (page % 64);
        match self.words.get_mut(w) {
            Some(x) if *x & bit != 0 => {
                *x &= !bit;
                if *x == 0 {
                    self.summary[w / 64] &= !(1 << (w % 64));
                }
                self.len -= 1;
                true
            }
            _ => false,
        }
    }

    /// The first dirty page at or after `page`.
    pub fn next_from(&self, page: u64) -> Option<u64> {
        let w = usize::try_from(page / 64).ok()?;
        let here = self.words.get(w)? & (!0u64 << (page % 64));
        if here != 0 {
            return Some(w as u64 * 64 + u64::from(here.trailing_zeros()));
        }
        // The next word with a dirty page, through the summary.
        let next = w + 1;
        let mut s = next / 64;
        let mut bits = self.summary.get(s)? & (!0u64).checked_shl((next % 64) as u32).unwrap_or(0);
        loop {
            if bits != 0 {
                let word = s * 64 + bits.trailing_zeros() as usize;
                return Some(word as u64 * 64 + u64::from(self.words[word].trailing_zeros()));
            }
            s += 1;
            bits = *self.summary.get(s)?;
        }
    }

    /// Takes the first `limit` dirty pages in `[first, end)` out of the set, into `out`
    /// (ascending).
    pub fn take(&mut self, first: u64, end: u64, limit: usize, out: &mut Vec<u64>) {
        let mut at = first;
        while out.len() < limit {
            let Some(p) = self.next_from(at).filter(|&p| p < end) else { break };
            self.remove(p);
            out.push(p);
            at = p + 1;
        }
    }

    /// The pages, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            let p = self.next_from(at)?;
            at = p + 1;
            Some(p)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn the_worked_example() {
        let mut d = DirtyPages::default();
        for p in [3, 64, 200] {
            assert!(d.insert(p));
        }
        assert!(!d.insert(64));
        assert_eq!((d.words[0], d.words[1], d.words[3], d.summary[0]), (1 << 3, 1, 1 << 8, 0b1011));
        assert_eq!((d.next_from(4), d.next_from(65), d.next_from(201)), (Some(64), Some(200), None));
        let mut out = Vec::new();
        d.take(0, 150, 5, &mut out);
        assert_eq!((out, d.len(), d.iter().collect::<Vec<_>>()), (vec![3, 64], 1, vec![200]));
        assert!(d.remove(200) && !d.remove(200) && d.is_empty() && d.summary[0] == 0);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64),
        Remove(u64),
        Take { first: u64, len: u64, limit: usize },
        Next(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Pages bunched near word and summary boundaries, and far apart.
        let page = prop_oneof![0u64..300, 4000u64..4200, 0u64..1_000_000];
        prop_oneof![
            3 => page.clone().prop_map(Op::Insert),
            2 => page.clone().prop_map(Op::Remove),
            1 => (page.clone(), 0u64..5000, 0usize..40).prop_map(|(first, len, limit)| Op::Take { first, len, limit }),
            1 => page.prop_map(Op::Next),
        ]
    }

    proptest! {
        /// Against an ordered set: every operation's answer and the contents after it.
        #[test]
        fn agrees_with_an_ordered_set(ops in proptest::collection::vec(op(), 1..300)) {
            let (mut d, mut r) = (DirtyPages::default(), BTreeSet::new());
            for o in ops {
                match o {
                    Op::Insert(p) => prop_assert_eq!(d.insert(p), r.insert(p)),
                    Op::Remove(p) => prop_assert_eq!(d.remove(p), r.remove(&p)),
                    Op::Next(p) => prop_assert_eq!(d.next_from(p), r.range(p..).next().copied()),
                    Op::Take { first, len, limit } => {
                        let want: Vec<u64> = r.range(first..first + len).take(limit).copied().collect();
                        want.iter().for_each(|p| _ = r.remove(p));
                        let mut got = Vec::new();
                        d.take(first, first + len, limit, &mut got);
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(d.len(), r.len() as u64);
            }
            prop_assert_eq!(d.iter().collect::<Vec<_>>(), r.into_iter().collect::<Vec<_>>());
        }
    }
}
