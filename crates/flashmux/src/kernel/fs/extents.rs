//! A file's extent map: its logical blocks → physical blocks as ext4's extent tree holds them.
//!
//! # Model
//! An extent maps `len` logical blocks from `logical` to physical blocks from `physical`; an
//! initialized extent holds at most 32768 blocks (`EXT_INIT_MAX_LEN`). Inserting a mapping that
//! continues an extent logically and physically grows that extent (`ext4_ext_try_to_merge`, both
//! neighbours) up to that limit; a longer run becomes several extents of 32768 blocks and a
//! remainder.
//!
//! Where the extents live: the inode's `i_block` holds 4 (`ext4_ext_space_root`: 60 bytes = a
//! 12-byte header + 4 × 12); beyond 4, leaf blocks of 340 ((4096 − 12) / 12) hold them and the
//! inode holds up to 4 index entries; beyond 4 leaves, index blocks of 340 entries form further
//! levels. The tree's blocks are `ceil(n / 340)` leaves, then `ceil(leaves / 340)` index blocks
//! while a level has more than 4 entries. Extent `i` (in logical order) is in leaf `i / 340`.
//!
//! The goal for allocating logical block `b` (`ext4_ext_find_goal`): the extent at or before
//! `b` projected to `b` (its physical start + (b − its logical start)); when none precedes `b`,
//! the first extent projected back (its physical start − (its logical start − b)); no extent: the
//! inode's goal (the caller's).
//!
//! # Simplifications
//! Leaves are full in logical order (extent `i` in leaf `i / 340`), where Linux's leaves are
//! half to fully full after splits; a change dirties the leaf holding the changed position (and
//! the inode when the tree is inline or its shape changes), not the neighbours a split or merge
//! would touch. Unwritten (preallocated, `fallocate`) extents are not modelled.
//!
//! # Source
//! Linux `fs/ext4/ext4_extents.h` (`EXT_INIT_MAX_LEN`, `struct ext4_extent_header`),
//! `fs/ext4/extents.c` (`ext4_ext_find_goal`, `ext4_ext_try_to_merge`, `ext4_ext_space_root`,
//! `ext4_ext_space_block`).

use super::{Mapping, PhysExtent};
use std::collections::BTreeMap;

/// The most blocks an initialized extent maps (`EXT_INIT_MAX_LEN`).
pub const MAX_EXTENT_LEN: u64 = 32768;
/// Extents (or index entries) the inode holds inline.
pub const INLINE_EXTENTS: u64 = 4;
/// Extents (or index entries) in one tree block.
pub const PER_TREE_BLOCK: u64 = 340;

/// A file's logical → physical map.
#[derive(Clone, Debug, Default)]
pub struct ExtentMap {
    /// logical start → (physical start, length).
    map: BTreeMap<u64, (u64, u64)>,
    /// The tree's blocks: leaves in order, then index blocks.
    pub tree: Vec<u64>,
}

/// Tree blocks needed for `n` extents.
pub fn tree_blocks(n: u64) -> u64 {
    let mut total = 0;
    let mut level = n;
    while level > INLINE_EXTENTS {
        level = level.div_ceil(PER_TREE_BLOCK);
        total += level;
    }
    total
}

impl ExtentMap {
    /// Number of extents.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The extents in logical order.
    pub fn iter(&self) -> impl Iterator<Item = Mapping> + '_ {
        self.map.iter().map(|(&logical, &(physical, len))| Mapping { logical, physical: Some(physical), len })
    }

    /// Mapped blocks.
    pub fn mapped_blocks(&self) -> u64 {
        self.map.values().map(|&(_, l)| l).sum()
    }

    /// The extent holding `logical`, if any.
    pub fn extent_at(&self, logical: u64) -> Option<Mapping> {
        let (&l, &(p, n)) = self.map.range(..=logical).next_back()?;
        (logical < l + n).then_some(Mapping { logical: l, physical: Some(p), len: n })
    }

    /// The last extent starting at or before `logical`.
    pub fn left_of(&self, logical: u64) -> Option<Mapping> {
        self.map.range(..=logical).next_back().map(|(&l, &(p, n))| Mapping { logical: l, physical: Some(p), len: n })
    }

    /// The first extent starting after `logical`.
    pub fn right_of(&self, logical: u64) -> Option<Mapping> {
        self.map.range(logical + 1..).next().map(|(&l, &(p, n))| Mapping { logical: l, physical: Some(p), len: n })
    }

    /// The allocation goal for `logical` (`ext4_ext_find_goal`); `None` when the file has no extent.
    pub fn goal(&self, logical: u64) -> Option<u64> {
        if let Some(m) = self.left_of(logical) {
            return Some(m.physical? + (logical - m.logical));
        }
        let (&l, &(p, _)) = self.map.iter().next()?;
        Some(p.saturating_sub(l - logical))
    }

    /// `len` blocks from `logical` as mapped runs and holes (`physical: None`), in order.
    pub fn map_range(&self, logical: u64, len: u64) -> Vec<Mapping> {
        let mut out = Vec::new();
        self.map_range_into(logical, len, &mut out);
        out
    }

    /// [`ExtentMap::map_range`] into `out` (cleared first).
    pub fn map_range_into(&self, logical: u64, len: u64, out: &mut Vec<Mapping>) {
        out.clear();
        let end = logical + len;
        let mut at = logical;
        let before = self.map.range(..=logical).next_back();
        // The common case: one extent holds the whole range.
        if let Some((&l, &(p, n))) = before {
            if l + n >= end {
                out.push(Mapping { logical, physical: Some(p + (logical - l)), len });
                return;
            }
        }
        let first = before.map(|(&l, _)| l).unwrap_or(logical);
        for (&l, &(p, n)) in self.map.range(first..end) {
            if l + n <= at {
                continue;
            }
            if l > at {
                out.push(Mapping { logical: at, physical: None, len: l - at });
                at = l;
            }
            let stop = (l + n).min(end);
            out.push(Mapping { logical: at, physical: Some(p + (at - l)), len: stop - at });
            at = stop;
        }
        if at < end {
            out.push(Mapping { logical: at, physical: None, len: end - at });
        }
    }

    /// The rank (position in logical order) of the extent starting at `logical`.
    pub fn rank(&self, logical: u64) -> u64 {
        self.map.range(..logical).count() as u64
    }

    /// Maps `len` unmapped blocks from `logical` to `physical`, merging with neighbours; returns
    /// the logical starts of the extents changed or added.
    pub fn insert(&mut self, logical: u64, physical: u64, len: u64) -> Vec<u64> {
        assert!(len > 0, "empty mapping");
        debug_assert!(self.map_range(logical, len).iter().all(|m| m.physical.is_none()), "mapping over mapped blocks");
        let (mut l, mut p, mut n) = (logical, physical, len);
        if let Some((&ll, &(lp, ln))) = self.map.range(..logical).next_back() {
            if ll + ln == logical && lp + ln == physical && ln < MAX_EXTENT_LEN {
                self.map.remove(&ll);
                (l, p, n) = (ll, lp, ln + len);
            }
        }
        if let Some(&(rp, rn)) = self.map.get(&(logical + len)) {
            let last = if n % MAX_EXTENT_LEN == 0 { MAX_EXTENT_LEN } else { n % MAX_EXTENT_LEN };
            if rp == physical + len && last + rn <= MAX_EXTENT_LEN {
                self.map.remove(&(logical + len));
                n += rn;
            }
        }
        let mut changed = Vec::new();
        while n > 0 {
            let take = n.min(MAX_EXTENT_LEN);
            self.map.insert(l, (p, take));
            changed.push(l);
            (l, p, n) = (l + take, p + take, n - take);
        }
        changed
    }

    /// Unmaps every block at or after `logical`; returns the physical runs unmapped, in logical
    /// order.
    pub fn truncate(&mut self, logical: u64) -> Vec<PhysExtent> {
        let mut out = Vec::new();
        if let Some((&l, &mut (p, ref mut n))) = self.map.range_mut(..logical).next_back() {
            if l + *n > logical {
                let keep = logical - l;
                out.push(PhysExtent { start: p + keep, len: *n - keep });
                *n = keep;
            }
        }
        let tail = self.map.split_off(&logical);
        out.extend(tail.values().map(|&(p, n)| PhysExtent { start: p, len: n }));
        out
    }

    /// Checks the map's own rules.
    pub fn check(&self) -> Result<(), String> {
        let mut prev: Option<(u64, u64, u64)> = None;
        for (&l, &(p, n)) in &self.map {
            if n == 0 || n > MAX_EXTENT_LEN {
                return Err(format!("extent at {l} has length {n}"));
            }
            if let Some((pl, pp, pn)) = prev {
                if pl + pn > l {
                    return Err(format!("extents at {pl} and {l} overlap"));
                }
                if pl + pn == l && pp + pn == p && pn + n <= MAX_EXTENT_LEN {
                    return Err(format!("extents at {pl} and {l} are contiguous but not merged"));
                }
            }
            prev = Some((l, p, n));
        }
        if self.tree.len() as u64 != tree_blocks(self.len()) {
            return Err(format!("{} tree blocks for {} extents", self.tree.len(), self.len()));
        }
        Ok(())
    }
}
