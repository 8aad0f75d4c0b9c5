//! Garbage collection, decided functionally: when a plane is cleaned, which block, and how its
//! valid units move. The device times the result: each cleaned victim becomes a [`GcJob`] (pages
//! to read, pages to program, one erase) on its die (`device/ssd/gc.rs`), and the victim is free
//! again only when [`Ftl::finish_erase`] says its erase has run.
//!
//! # Model
//! A plane is cleaned when a host or map-flush write opens a block and leaves the plane with
//! `gc_threshold_blocks` or fewer free (plus being-erased) blocks; while it is at or below, one
//! victim after another is cleaned (and again when an erase ends, as GC waits for a free block
//! rather than copy more than its open block holds). The victim policy (`core/victim.rs`) picks
//! a full block with something to reclaim. Its valid units are copied in order into the plane's
//! GC block (`Stream::Gc`; translation units into `Stream::MapGc`), each one's L2P (or
//! directory) entry updated; every unit moved and every unit erased is charged to the tenant
//! the ownership ledger names. A data unit moved under DFTL dirties its translation page:
//! reported once per page per victim (`gc_map_updates`).
//! When one plane is cleaned, the die's other planes within one block of their threshold are
//! cleaned too, so the die can run their jobs as multi-plane operations.
//!
//! # Example
//! 4 units a page, a victim with 3 valid units in two of its pages: 2 pages are read and 3 units
//! copied. If the GC block's current page already held 2 units, the first 2 copies complete it
//! (`program_pages` = 1) and the third waits in a partly filled page for the next victim.
//!
//! # Parameters
//! `gc_threshold_blocks` (blocks, at least 2) and `victim_policy`, from [`super::FtlParams`].

use super::{BlockState, Ftl, GcJob, Stream, TenantGc, MAP_BIT, MAP_OWNER, MIXED, NO_CAUSE, NO_LPN, NO_OWNER};
use crate::engine::prefetch;
use crate::units::{Lpn, MapPage, Placement, PlaneId, Ppa};

impl Ftl {
    /// Cleans victims in `plane` while its free-or-erasing blocks are at or below the threshold.
    /// When it cleans anything, the die's other planes that are within one block of their own
    /// threshold are cleaned too, so that their jobs can run together as multi-plane operations
    /// (planes of a die are written in step, so they would need GC moments later anyway).
    pub(super) fn collect_garbage(&mut self, plane: PlaneId) {
        if self.collect_garbage_below(plane, self.params.gc_threshold_blocks) {
            let first = plane.0 / self.planes_per_die * self.planes_per_die;
            for sibling in (first..first + self.planes_per_die).map(PlaneId).filter(|&p| p != plane) {
                self.collect_garbage_below(sibling, self.params.gc_threshold_blocks + 1);
            }
        }
    }

    /// Cleans victims in `plane` while its free-or-erasing blocks are at or below `threshold`.
    /// Returns whether it cleaned any.
    fn collect_garbage_below(&mut self, plane: PlaneId, threshold: u32) -> bool {
        // Each run frees at least one unit net, so this ends; the bound only guards against a bug.
        for run in 0..=self.blocks_per_plane {
            let p = &self.planes[plane.index()];
            if p.free.len() + p.erasing as usize > threshold as usize {
                return run > 0;
            }
            let Some(victim) = self.pick_victim(plane) else { return run > 0 };
            let stream = self.gc_stream(victim);
            let open = *self.open_block(plane, stream);
            let gc_room = self.room(open);
            if self.blocks[victim as usize].valid > gc_room && self.planes[plane.index()].free.is_empty() {
                // Wait for an erase to finish before copying more.
                return run > 0;
            }
            self.relocate(plane, victim);
        }
        panic!("GC in plane {} did not converge", plane.0);
    }

    /// Where GC copies the valid units of `block`: translation units to the plane's
    /// translation GC block, a persistent placement's data to its own GC block, and everything
    /// else to the plane's shared GC block. A block holds data of one persistent placement or
    /// of non-persistent ones only, so all of a victim's units go to one block.
    fn gc_stream(&self, block: u32) -> Stream {
        let blk = &self.blocks[block as usize];
        match blk.placement {
            _ if blk.map => Stream::MapGc,
            MIXED => Stream::Gc,
            h if self.params.placements.is_persistent(Placement(h)) => Stream::PlacementGc(Placement(h)),
            _ => Stream::Gc,
        }
    }

    /// Copies the victim's valid units to the plane's GC block and queues the victim for erasing.
    fn relocate(&mut self, plane: PlaneId, victim: u32) {
        debug_assert_eq!(victim / self.blocks_per_plane, plane.0, "victim {victim} is not in plane {}", plane.0);
        debug_assert_eq!(self.blocks[victim as usize].state, BlockState::Full, "victim {victim} is not full");
        // Out of the victim pool before its valid count starts dropping.
        self.buckets.remove(victim, self.blocks[victim as usize].valid);
        self.blocks[victim as usize].state = BlockState::Erasing;
        self.planes[plane.index()].erasing += 1;
        let scratch = std::mem::take(&mut self.gc_scratch);
        let (valid, read_pages) = self.list_valid(victim, scratch);
        let map_block = self.blocks[victim as usize].map;
        if !map_block {
            // The valid units' L2P entries are scattered over the table: prefetched, they arrive
            // in parallel instead of one stall per unit.
            for &(_, lpn, _) in &valid {
                prefetch(&self.l2p[lpn as usize]);
            }
        }
        let stream = self.gc_stream(victim);
        self.relocations += 1;
        let upp = self.units_per_page;
        let (cause, cause_owner) = self.planes[plane.index()].cause;
        let n = self.params.placements.count();
        let mut program_pages = 0u32;
        for &(old, lpn, owner) in &valid {
            let new = self.alloc(plane, stream);
            if let Some(log) = &mut self.move_log {
                log.push((Ppa(old), new));
            }
            // A GC page is programmed when its last unit is filled; a partly filled page waits
            // for the next run.
            program_pages += ((new.0 + 1) & (upp - 1) == 0) as u32;
            self.p2l[old as usize] = NO_LPN;
            self.blocks[victim as usize].valid -= 1;
            if map_block {
                self.move_map_unit(new, lpn, owner);
            } else {
                self.move_data_unit(new, Lpn(lpn), owner);
                let moved = self.unit_placement.get(old as usize).map_or(0, |&h| h as usize);
                if let Some(u) = self.unit_placement.get_mut(new.index()) {
                    *u = moved as u8;
                }
                self.placement_gc[moved].units_moved += 1;
                if cause != NO_CAUSE {
                    self.gc_moves[cause as usize * n + moved] += 1;
                }
            }
            self.close_if_full(plane, stream, new);
            self.attribute(owner).units_moved += 1;
        }
        let moved = valid.len() as u32;
        self.attribute(cause_owner).caused_units_moved += moved as u64;
        if cause != NO_CAUSE {
            self.placement_gc[cause as usize].caused_units_moved += moved as u64;
        }
        self.gc_scratch = valid;
        debug_assert_eq!(self.blocks[victim as usize].valid, 0);
        self.stats.gc_runs += 1;
        self.stats.gc_units_programmed += moved as u64;
        self.pending_gc.push_back(GcJob { plane, victim, read_pages, program_pages, moved_units: moved });
    }

    /// Charges the victim's written units to their owners as erased, and lists its valid ones
    /// in `valid` (emptied first) as (physical unit, P2L value, owner). Returns the list and the
    /// pages that hold valid data (the pages GC must read).
    #[inline]
    fn list_valid(&mut self, victim: u32, mut valid: Vec<(u32, u32, u16)>) -> (Vec<(u32, u32, u16)>, u32) {
        let upp = self.units_per_page;
        let base = victim * self.units_per_block;
        let written = self.blocks[victim as usize].written;
        let mut read_pages = 0u32;
        valid.clear();
        for page in 0..written.div_ceil(upp) {
            let mut page_had_valid = false;
            for u in page * upp..((page + 1) * upp).min(written) {
                let old = base + u;
                let owner = self.owner[old as usize];
                self.attribute(owner).erased_units += 1;
                let lpn = self.p2l[old as usize];
                if lpn != NO_LPN {
                    page_had_valid = true;
                    valid.push((old, lpn, owner));
                }
            }
            read_pages += page_had_valid as u32;
        }
        (valid, read_pages)
    }

    /// Places a translation-page unit GC moved (P2L value `lpn`) at `new`: whole translation
    /// pages move in order into a page-aligned map block, and the directory follows each page's
    /// first unit.
    #[inline]
    fn move_map_unit(&mut self, new: Ppa, lpn: u32, owner: u16) {
        debug_assert!(lpn & MAP_BIT != 0 && lpn != NO_LPN, "data in a translation block");
        let upp = self.units_per_page;
        let unit = lpn & !MAP_BIT;
        self.place_raw(new, lpn, owner);
        if unit % upp == 0 {
            self.gtd[(unit / upp) as usize] = new.0;
        }
        self.stats.gc_map_units_moved += 1;
    }

    /// Places data `lpn` GC moved at `new`, and notes its translation page's update (DFTL).
    #[inline]
    fn move_data_unit(&mut self, new: Ppa, lpn: Lpn, owner: u16) {
        self.place(new, lpn, owner);
        self.note_map_update(lpn.0, owner);
    }

    /// DFTL: data `lpn` moved, so its translation page changed; reported once per translation
    /// page per victim (DFTL's batched update). Nothing without DFTL.
    #[inline]
    fn note_map_update(&mut self, lpn: u32, owner: u16) {
        if let Some(mp) = lpn.checked_div(self.map_entries) {
            if self.map_update_stamp[mp as usize] != self.relocations {
                self.map_update_stamp[mp as usize] = self.relocations;
                self.gc_map_updates.push((MapPage(mp), owner));
            }
        }
    }

    fn attribute(&mut self, owner: u16) -> &mut TenantGc {
        if owner == NO_OWNER {
            return &mut self.unowned_gc;
        }
        if owner == MAP_OWNER {
            return &mut self.map_gc;
        }
        let i = owner as usize;
        if i >= self.tenant_gc.len() {
            self.tenant_gc.resize(i + 1, TenantGc::default());
        }
        &mut self.tenant_gc[i]
    }

    /// The next GC job the device has not yet scheduled.
    pub fn take_gc_job(&mut self) -> Option<GcJob> {
        self.pending_gc.pop_front()
    }

    /// The device finished erasing a GC victim: the block is free again.
    pub fn finish_erase(&mut self, victim: u32) {
        let plane = PlaneId(victim / self.blocks_per_plane);
        let blk = &mut self.blocks[victim as usize];
        assert_eq!(blk.state, BlockState::Erasing, "block {victim} finished an erase it never started");
        blk.state = BlockState::Free;
        blk.written = 0;
        blk.erase_count += 1;
        self.stats.erases += 1;
        let p = &mut self.planes[plane.index()];
        p.erasing -= 1;
        p.free.push_back(victim);
        // GC may have stopped for want of a free block; it can go on now.
        self.collect_garbage(plane);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{BlockState, Ftl, FtlParams, GcJob, Loc, VictimPolicy};
    use crate::flash::Geometry;
    use crate::units::{Lpn, Placement, PlaneId, Ppa};

    /// The header's example: 4 units a page, a victim with 3 valid units in two of its pages,
    /// and a GC block whose current page already holds 2 units: 2 pages read, 3 units moved,
    /// 1 page filled (programmed), the third unit waiting in a partly filled page.
    #[test]
    fn relocation_counts_the_pages_it_reads_and_fills() {
        let geo = Geometry {
            channels: 1,
            chips_per_channel: 1,
            dies_per_chip: 1,
            planes_per_die: 1,
            blocks_per_plane: 16,
            pages_per_block: 4,
            page_bytes: 4 * 4096,
            unit_bytes: 4096,
        };
        let params = FtlParams {
            logical_units: 64,
            victim_policy: VictimPolicy::Greedy,
            gc_threshold_blocks: 2,
            map_entries_per_page: None,
            placements: Default::default(),
            zoned: None,
        };
        let mut ftl = Ftl::new(&geo, params).unwrap();
        let plane = PlaneId(0);
        // Block 0 takes logical pages 0..16; all but 1, 2 (page 0) and 5 (page 1) are rewritten.
        for l in 0..16 {
            ftl.program_host(plane, Lpn(l), 0, Placement(0));
        }
        for l in (0..16).filter(|l| ![1, 2, 5].contains(l)) {
            ftl.program_host(plane, Lpn(l), 0, Placement(0));
        }
        assert_eq!(ftl.blocks[0].state, BlockState::Full);
        assert_eq!(ftl.blocks[0].valid, 3);
        // GC's open block, with its first page half written.
        let gc_block = ftl.planes[0].free.pop_front().unwrap();
        ftl.blocks[gc_block as usize].state = BlockState::Active;
        ftl.blocks[gc_block as usize].written = 2;
        ftl.planes[0].gc_active = Some(gc_block);
        ftl.check_invariants();

        ftl.relocate(plane, 0);
        let job = ftl.take_gc_job().unwrap();
        assert_eq!(job, GcJob { plane, victim: 0, read_pages: 2, program_pages: 1, moved_units: 3 });
        let first = gc_block * 16;
        for (k, l) in [1, 2, 5].into_iter().enumerate() {
            assert_eq!(ftl.lookup(Lpn(l)), Loc::Flash(Ppa(first + 2 + k as u32)), "logical page {l}");
        }
        assert_eq!(ftl.blocks[gc_block as usize].written, 5);
        assert_eq!(ftl.tenant_gc(crate::units::TenantId(0)).units_moved, 3);
        assert_eq!(ftl.tenant_gc(crate::units::TenantId(0)).erased_units, 16);
        ftl.check_invariants();
    }
}
