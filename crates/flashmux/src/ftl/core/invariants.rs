//! The FTL's structural invariants, checked from scratch: L2P and P2L agree both ways; each
//! translation page has one page-aligned copy in a translation block that the directory points
//! at; each block's valid count is its valid units, with none past its write pointer; every full
//! block is in exactly its valid-count bucket; each plane's free list, erasing count and open
//! blocks match the block states. Cost: linear in the drive's size (`--check-invariants` and
//! the tests run it; nothing on a hot path does).

use super::{BlockState, Ftl, BUF_FLAG, MAP_BIT, MIXED, NO_LPN, UNMAPPED};
use crate::units::{Placement, Ppa};

impl Ftl {
    /// Checks every structural invariant; panics with a description on the first violation.
    /// Cost: linear in the drive's size.
    pub fn check_invariants(&self) {
        let mapped_to_flash = self.check_l2p() + self.check_directory();
        let total_valid: u64 = (0..self.blocks.len()).map(|b| self.check_block(b)).sum();
        assert_eq!(total_valid, mapped_to_flash, "valid units != logical pages mapped to flash");
        self.check_buckets();
        if self.params.zoned.is_some() {
            let listed: usize = self.zone_blocks.iter().map(Vec::len).sum();
            let used = self.blocks.iter().filter(|b| b.state != BlockState::Free).count();
            assert_eq!(listed, used, "zones list {listed} blocks, {used} are in use");
        }
        for p in 0..self.planes.len() {
            self.check_plane(p);
        }
    }

    /// Every logical page mapped to flash is the page its unit's P2L entry names. Returns how
    /// many are.
    fn check_l2p(&self) -> u64 {
        let mut mapped_to_flash = 0u64;
        for (lpn, &v) in self.l2p.iter().enumerate() {
            if v != UNMAPPED && v & BUF_FLAG == 0 {
                mapped_to_flash += 1;
                assert_eq!(self.p2l[v as usize], lpn as u32, "L2P[{lpn}]={v} but P2L disagrees");
            }
        }
        mapped_to_flash
    }

    /// Every translation page has a page-aligned copy in a translation block, whose units P2L
    /// names. Returns the units they hold.
    fn check_directory(&self) -> u64 {
        let mut units = 0u64;
        for (mp, &first) in self.gtd.iter().enumerate() {
            assert_ne!(first, UNMAPPED, "translation page {mp} has no copy on flash");
            assert_eq!(first % self.units_per_page, 0, "translation page {mp} not page-aligned");
            for k in 0..self.units_per_page {
                let want = MAP_BIT | (mp as u32 * self.units_per_page + k);
                assert_eq!(self.p2l[(first + k) as usize], want, "GTD[{mp}] unit {k}: P2L disagrees");
                assert!(self.blocks[self.block_of(Ppa(first)) as usize].map, "translation page {mp} in a data block");
            }
            units += self.units_per_page as u64;
        }
        units
    }

    /// Block `b`'s valid count, write pointer and state agree with its units, and each valid
    /// unit is the current copy of what it holds. Returns its valid units.
    fn check_block(&self, b: usize) -> u64 {
        let upb = self.units_per_block;
        let blk = &self.blocks[b];
        let units = &self.p2l[b * upb as usize..(b + 1) * upb as usize];
        let valid = units.iter().filter(|&&l| l != NO_LPN).count() as u32;
        assert_eq!(valid, blk.valid, "block {b}: valid count {} but {} units valid", blk.valid, valid);
        assert!(blk.written <= upb);
        assert!(units[blk.written as usize..].iter().all(|&l| l == NO_LPN), "block {b}: data beyond the write pointer");
        for (u, &lpn) in units.iter().enumerate() {
            if lpn == NO_LPN {
                continue;
            }
            let ppa = (b * upb as usize + u) as u32;
            if lpn & MAP_BIT != 0 {
                let unit = lpn & !MAP_BIT;
                let mp = (unit / self.units_per_page) as usize;
                assert!(blk.map, "block {b}: translation unit in a data block");
                assert_eq!(self.gtd[mp] + unit % self.units_per_page, ppa, "stale translation unit");
            } else {
                assert!(!blk.map, "block {b}: data in a translation block");
                assert_eq!(self.l2p[lpn as usize], ppa, "stale P2L entry");
            }
        }
        if let (Some(z), false) = (self.params.zoned, blk.state == BlockState::Free) {
            // A zoned drive's block holds its zone's data only, and is listed as the zone's.
            for &lpn in units.iter().filter(|&&l| l != NO_LPN) {
                assert_eq!(lpn as u64 / z.zone_units, blk.placement as u64, "block {b} of zone {} holds another zone's data", blk.placement);
            }
            let listed = self.zone_blocks[blk.placement as usize].iter().filter(|&&x| x as usize == b).count();
            assert_eq!(listed, 1, "block {b} of zone {} listed {listed} times among its blocks", blk.placement);
        }
        if !self.unit_placement.is_empty() && !blk.map {
            // Isolation: a block holds one placement's data, or (the shared GC block) data of
            // placements that are not persistent; a persistent placement's never mixes.
            for (u, &lpn) in units.iter().enumerate().take(blk.written as usize) {
                if lpn == NO_LPN {
                    continue;
                }
                let h = self.unit_placement[b * upb as usize + u];
                match blk.placement {
                    MIXED => assert!(!self.params.placements.is_persistent(Placement(h as u16)), "block {b}: persistent placement {h}'s data in the shared GC block"),
                    p => assert_eq!(h as u16, p, "block {b} of placement {p} holds placement {h}'s data"),
                }
            }
        }
        match blk.state {
            BlockState::Free => assert!(blk.written == 0 && blk.valid == 0, "free block {b} not empty"),
            BlockState::Erasing => assert_eq!(blk.valid, 0, "block {b} erasing with valid data"),
            // Full, or a host block closed early (an FDP reclaim unit handle update) on a page
            // boundary.
            BlockState::Full => assert!(
                blk.written == upb || (!blk.map && blk.placement != MIXED && blk.written % self.units_per_page == 0),
                "full block {b} not full ({} of {upb} units written)",
                blk.written
            ),
            BlockState::Active => assert!(blk.written < upb),
        }
        blk.valid as u64
    }

    /// Every full block is in its own plane's bucket for its valid count, and nothing else is.
    fn check_buckets(&self) {
        let mut bucketed = 0usize;
        for plane in 0..self.planes.len() as u32 {
            for v in 0..=self.units_per_block {
                for b in self.buckets.members(plane, v) {
                    let blk = &self.blocks[b as usize];
                    assert_eq!(b / self.blocks_per_plane, plane, "block {b} in another plane's bucket");
                    assert!(blk.state == BlockState::Full && blk.valid == v, "block {b} in wrong bucket {v}");
                    bucketed += 1;
                }
            }
        }
        let full = self.blocks.iter().filter(|b| b.state == BlockState::Full).count();
        assert_eq!(bucketed, full, "full blocks missing from the victim buckets");
    }

    /// Plane `p`'s free list, erasing count and open blocks match its blocks' states.
    fn check_plane(&self, p: usize) {
        let plane = &self.planes[p];
        let range = p as u32 * self.blocks_per_plane..(p as u32 + 1) * self.blocks_per_plane;
        for &b in &plane.free {
            assert!(range.contains(&b), "plane {p} free list holds foreign block {b}");
            assert_eq!(self.blocks[b as usize].state, BlockState::Free);
        }
        let count = |s| range.clone().filter(|&b| self.blocks[b as usize].state == s).count();
        assert_eq!(count(BlockState::Free), plane.free.len(), "plane {p}: free list out of sync");
        assert_eq!(count(BlockState::Erasing), plane.erasing as usize, "plane {p}: erasing count");
        let actives = plane
            .host_open
            .iter()
            .chain(plane.placement_gc.iter())
            .flatten()
            .chain(plane.gc_active.iter())
            .chain(plane.map_active.iter())
            .chain(plane.map_gc_active.iter());
        assert_eq!(count(BlockState::Active), actives.clone().count(), "plane {p}: active blocks");
        for &b in actives {
            assert!(range.contains(&b) && self.blocks[b as usize].state == BlockState::Active);
        }
        for (h, open) in plane.host_open.iter().enumerate() {
            if let Some(b) = open {
                assert_eq!(self.blocks[*b as usize].placement as usize, h, "plane {p}: placement {h}'s open block holds another's");
            }
        }
        for (h, open) in plane.placement_gc.iter().enumerate() {
            if let Some(b) = open {
                assert!(self.params.placements.persistent[h], "plane {p}: a GC block for placement {h}, which is not persistent");
                assert_eq!(self.blocks[*b as usize].placement as usize, h, "plane {p}: placement {h}'s GC block holds another's");
            }
        }
    }
}
