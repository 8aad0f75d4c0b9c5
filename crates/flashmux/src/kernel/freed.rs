//! ext4's freed data under `-o discard`: the extents each transaction frees, merged as mballoc
//! merges them, trimmed once the transaction has committed.
//!
//! # Model
//! Blocks freed in a transaction are not reusable (nor trimmed) before it commits: mballoc
//! keeps them as `ext4_free_data` entries in a tree per block group and on one list. A new
//! entry is merged with the entry just before it and the one just after it in its group's tree
//! when they touch it and were freed by the same transaction; the merged entry goes to the
//! list's tail (`list_add_tail`). Once the transaction has committed, every entry of it is
//! trimmed, in list order (`ext4_process_freed_data`: one discard per entry). An extent that
//! crosses a group boundary is freed group by group (`ext4_free_blocks`), so entries never
//! cross one.
//!
//! # Worked example
//! 32,768 blocks per group; transaction 5 frees blocks 100–107, then 116–123, then 108–115:
//! the third touches both, so the three become one entry, 100–123, at the tail. Transaction 6
//! frees 124–131: a different transaction, a separate entry. When 5 commits: one trim of 24
//! blocks at 100.
//!
//! # Source
//! Linux `fs/ext4/mballoc.c` (`ext4_mb_free_metadata`, `ext4_try_merge_freed_extent`:
//! "extents can be merged if they are contiguous, AND the extents were freed by the same
//! transaction, AND the blocks are associated with the same group"; `ext4_process_freed_data`),
//! `ext4_free_blocks` (per group).

use super::fs::PhysExtent;
use super::journal::Tid;
use std::collections::BTreeMap;

/// Freed extents waiting for their transaction to commit (see the header).
#[derive(Debug)]
pub(super) struct FreedData {
    blocks_per_group: u64,
    /// (transaction, first block) → (blocks, list position).
    entries: BTreeMap<(Tid, u64), (u64, u64)>,
    next_pos: u64,
}

impl FreedData {
    pub fn new(blocks_per_group: u64) -> FreedData {
        assert!(blocks_per_group > 0, "a group has blocks");
        FreedData { blocks_per_group, entries: BTreeMap::new(), next_pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Transaction `tid` frees extent `e`.
    pub fn free(&mut self, tid: Tid, e: PhysExtent) {
        let (mut start, end) = (e.start, e.start + e.len);
        while start < end {
            let group_end = (start / self.blocks_per_group + 1) * self.blocks_per_group;
            let piece_end = end.min(group_end);
            self.free_in_group(tid, start, piece_end - start);
            start = piece_end;
        }
    }

    fn free_in_group(&mut self, tid: Tid, mut start: u64, mut len: u64) {
        let group = start / self.blocks_per_group;
        let before = self.entries.range((tid, 0)..(tid, start)).next_back().map(|(&(_, s), &(l, _))| (s, l));
        if let Some((s, l)) = before {
            if s + l == start && s / self.blocks_per_group == group {
                self.entries.remove(&(tid, s));
                (start, len) = (s, len + l);
            }
        }
        let after = start + len;
        if after % self.blocks_per_group != 0 {
            if let Some((l, _)) = self.entries.remove(&(tid, after)) {
                len += l;
            }
        }
        self.entries.insert((tid, start), (len, self.next_pos));
        self.next_pos += 1;
    }

    /// The entries of the transactions up to `committed`, in list order, taken out.
    pub fn take_committed(&mut self, committed: Tid, out: &mut Vec<PhysExtent>) {
        if self.entries.first_key_value().is_none_or(|(&(tid, _), _)| tid > committed) {
            return; // nothing committed yet (the common case: checked at every call)
        }
        let later = self.entries.split_off(&(Tid(committed.0 + 1), 0));
        let mut done: Vec<(u64, PhysExtent)> = std::mem::replace(&mut self.entries, later)
            .into_iter()
            .map(|((_, start), (len, pos))| (pos, PhysExtent { start, len }))
            .collect();
        done.sort_unstable_by_key(|&(pos, _)| pos);
        out.extend(done.into_iter().map(|(_, e)| e));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ext(start: u64, len: u64) -> PhysExtent {
        PhysExtent { start, len }
    }

    #[test]
    fn the_worked_example() {
        let mut f = FreedData::new(32_768);
        f.free(Tid(5), ext(100, 8));
        f.free(Tid(5), ext(116, 8));
        f.free(Tid(5), ext(108, 8));
        f.free(Tid(6), ext(124, 8));
        let mut out = Vec::new();
        f.take_committed(Tid(5), &mut out);
        assert_eq!(out, vec![ext(100, 24)]);
        assert!(!f.is_empty());
        f.take_committed(Tid(6), &mut out);
        assert_eq!(out, vec![ext(100, 24), ext(124, 8)]);
        assert!(f.is_empty());
    }

    #[test]
    fn entries_do_not_cross_a_group_and_keep_the_list_order() {
        let mut f = FreedData::new(64);
        f.free(Tid(1), ext(60, 8)); // 60..64 in group 0, 64..68 in group 1
        f.free(Tid(1), ext(10, 2));
        f.free(Tid(1), ext(56, 4)); // joins 60..64 (group 0), which moves to the tail
        let mut out = Vec::new();
        f.take_committed(Tid(1), &mut out);
        assert_eq!(out, vec![ext(64, 4), ext(10, 2), ext(56, 8)]);
    }

    proptest! {
        /// Against a reference: every freed block is trimmed once, after its transaction; no
        /// two trims of one transaction touch within a group (they would have merged); none
        /// crosses a group.
        #[test]
        fn every_freed_block_is_trimmed_once_in_maximal_pieces(
            frees in proptest::collection::vec((0u64..3, 0u64..40, 1u64..6), 1..60),
        ) {
            let bpg = 16;
            let mut f = FreedData::new(bpg);
            let mut used = std::collections::BTreeSet::new();
            let mut by_tid: BTreeMap<u64, std::collections::BTreeSet<u64>> = BTreeMap::new();
            for (tid, start, len) in frees {
                let blocks: Vec<u64> = (start..start + len).collect();
                if blocks.iter().any(|b| used.contains(b)) {
                    continue; // a block is freed once
                }
                used.extend(blocks.iter().copied());
                by_tid.entry(tid).or_default().extend(blocks);
                f.free(Tid(tid), ext(start, len));
            }
            for (tid, want) in by_tid {
                let mut out = Vec::new();
                f.take_committed(Tid(tid), &mut out);
                let mut got = std::collections::BTreeSet::new();
                for e in &out {
                    prop_assert_eq!(e.start / bpg, (e.start + e.len - 1) / bpg, "{:?} crosses a group", e);
                    for b in e.start..e.start + e.len {
                        prop_assert!(got.insert(b), "block {} trimmed twice", b);
                    }
                }
                prop_assert_eq!(&got, &want);
                let mut sorted = out.clone();
                sorted.sort_unstable_by_key(|e| e.start);
                for w in sorted.windows(2) {
                    let touch = w[0].start + w[0].len == w[1].start && w[1].start % bpg != 0;
                    prop_assert!(!touch, "{:?} and {:?} were not merged", w[0], w[1]);
                }
            }
            prop_assert!(f.is_empty());
        }
    }
}
