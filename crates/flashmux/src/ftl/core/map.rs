//! DFTL's translation pages on flash: the L2P table itself, stored a flash page per translation
//! page, and the global translation directory (`gtd`) that says where each one is now.
//!
//! A translation page holds `map_entries_per_page` L2P entries and fills one flash page; it is
//! striped over planes by page number like data ([`Ftl::map_plane`]). In P2L its units are
//! `MAP_BIT | (page × units per page + unit)`, owned by `MAP_OWNER`, and they live only in
//! translation blocks: map flushes write to the plane's `Stream::Map` block and GC's copies to its
//! `Stream::MapGc` block, so GC never fills the block a flush has just opened. Programming a page
//! ([`Ftl::program_map`]) makes its old copy stale and points the directory at the new one.
//!
//! Example: 16 KiB flash pages and 4-byte entries give 4,096 entries a page, so a drive of
//! 16,777,216 logical pages (64 GiB of 4 KiB units) has 4,096 translation pages, each 4 units.
//!
//! What the controller caches of them, and what a miss costs, is the map cache's business
//! (`ftl/cmt.rs`, `device/ssd/map_path.rs`); this file only keeps them on flash.

use super::{BlockState, Ftl, Stream, TenantGc, GC_RESERVE_BLOCKS, MAP_BIT, MAP_OWNER, NO_CAUSE, NO_LPN, UNMAPPED};
use crate::units::{Lpn, MapPage, PlaneId, Ppa};

impl Ftl {
    /// Translation pages of the L2P table (0 without DFTL).
    pub fn map_pages(&self) -> u32 {
        self.gtd.len() as u32
    }
    /// L2P entries per translation page (0 without DFTL).
    pub fn map_entries_per_page(&self) -> u32 {
        self.map_entries
    }
    /// The translation page holding `lpn`'s entry (DFTL only).
    pub fn map_page_of(&self, lpn: Lpn) -> MapPage {
        debug_assert!(self.map_entries > 0, "no translation pages without DFTL");
        MapPage(lpn.0 / self.map_entries)
    }
    /// The plane that stores translation page `mp` (striped like data, by page).
    pub fn map_plane(&self, mp: MapPage) -> PlaneId {
        self.stripe_to_plane[mp.index() % self.stripe_to_plane.len()]
    }
    /// The global flash page that holds translation page `mp` now.
    pub fn map_location(&self, mp: MapPage) -> u32 {
        let first = self.gtd[mp.index()];
        debug_assert_ne!(first, UNMAPPED, "translation page {} was never written", mp.0);
        self.page_of(Ppa(first))
    }

    /// Whether a map flush can be programmed in `plane` now without eating into GC's reserve.
    pub fn can_program_map(&self, plane: PlaneId) -> bool {
        let p = &self.planes[plane.index()];
        self.room(p.map_active) >= self.units_per_page || p.free.len() > GC_RESERVE_BLOCKS
    }

    /// Programs translation page `mp` (a whole flash page) into `plane`'s open map block and
    /// points the translation directory at it; the old copy becomes invalid. May start GC.
    pub fn program_map(&mut self, plane: PlaneId, mp: MapPage) -> Ppa {
        debug_assert_eq!(self.map_plane(mp), plane);
        self.invalidate_map_copy(mp);
        self.planes[plane.index()].cause = (NO_CAUSE, MAP_OWNER);
        let first = self.place_map_page(plane, mp, Stream::Map);
        self.stats.map_units_programmed += self.units_per_page as u64;
        first
    }

    /// Writes translation page `mp` as one flash page of `stream`'s open block.
    fn place_map_page(&mut self, plane: PlaneId, mp: MapPage, stream: Stream) -> Ppa {
        let upp = self.units_per_page;
        let first = self.alloc_units(plane, stream, upp);
        debug_assert_eq!(first.0 % upp, 0, "translation pages start on a page boundary");
        for k in 0..upp {
            let ppa = first.0 + k;
            self.p2l[ppa as usize] = MAP_BIT | (mp.0 * upp + k);
            self.owner[ppa as usize] = MAP_OWNER;
        }
        let b = self.block_of(first) as usize;
        self.blocks[b].valid += upp;
        self.close_if_full(plane, stream, Ppa(first.0 + upp - 1));
        self.gtd[mp.index()] = first.0;
        first
    }

    fn invalidate_map_copy(&mut self, mp: MapPage) {
        let first = self.gtd[mp.index()];
        if first == UNMAPPED {
            return;
        }
        let upp = self.units_per_page;
        self.p2l[first as usize..(first + upp) as usize].fill(NO_LPN);
        let b = self.block_of(Ppa(first));
        let blk = &mut self.blocks[b as usize];
        if blk.state == BlockState::Full {
            self.buckets.remove(b, blk.valid);
            self.buckets.insert(b, blk.valid - upp);
        }
        blk.valid -= upp;
        self.gtd[mp.index()] = UNMAPPED;
    }

    /// Translation pages whose entries GC changed since the last call, with the owner of the
    /// moved data (one entry per page per victim block).
    pub fn take_gc_map_updates(&mut self, into: &mut Vec<(MapPage, u16)>) {
        into.append(&mut self.gc_map_updates);
    }

    /// GC work spent on translation pages.
    pub fn map_gc(&self) -> &TenantGc {
        &self.map_gc
    }
}
