//! Writes and invalidation: where each unit the FTL writes goes, and what a write makes stale.
//!
//! Every write — host data ([`Ftl::program_host`]), padding ([`Ftl::pad_host_page`]), GC's
//! copies, translation pages — takes its unit from `Ftl::alloc_units`, which takes it from the
//! open block `Ftl::open_block` names for the plane and the write's `Stream`: **the placement
//! seam**. A stream with no open block opens the plane's oldest free block; a host or map-flush
//! stream must leave GC's reserve (`Stream::reserve`) and may start GC in the plane when it
//! does. A block is closed as its last unit is placed, and enters GC's valid-count buckets then.
//!
//! Example: with 8 units a block, a plane whose open host block has 6 units written takes two
//! more host units before [`Ftl::can_program_host`] needs a free block beyond GC's reserve of 1.
//!
//! A write first makes the logical page's old copy stale (`Ftl::invalidate_flash_copy`): its
//! P2L entry is cleared and its block's valid count (and bucket, for a full block) drops, so GC
//! started by the write's own allocation never copies stale data.

use super::{BlockState, Ftl, Loc, Stream, BUF_FLAG, GC_RESERVE_BLOCKS, MIXED, NO_LPN, NO_OWNER, UNMAPPED};
use crate::units::{BufferSlot, Lpn, Placement, PlaneId, Ppa};

impl Ftl {
    /// The placement seam: the open block of `plane` that a write of `stream` goes to (`None`:
    /// the next write opens a free block). Every unit the FTL writes — host data
    /// ([`Ftl::program_host`]), padding, GC copies, translation pages — gets its block here, and
    /// the plane itself comes from static striping ([`Ftl::plane_of`]). Each plane has an open
    /// host block per placement (an NVMe FDP reclaim unit handle's reclaim unit in this plane,
    /// or a stream's block), one GC block for what GC moves of the placements that are not
    /// persistent, one per persistent placement, and DFTL's two translation blocks. ZNS would
    /// plug in here as a zone's block with its write pointer as `written` (no device GC stream).
    pub(super) fn open_block(&mut self, plane: PlaneId, stream: Stream) -> &mut Option<u32> {
        let p = &mut self.planes[plane.index()];
        match stream {
            Stream::Host(h) => &mut p.host_open[h.index()],
            Stream::Gc => &mut p.gc_active,
            Stream::PlacementGc(h) => &mut p.placement_gc[h.index()],
            Stream::Map => &mut p.map_active,
            Stream::MapGc => &mut p.map_gc_active,
        }
    }

    /// New data for `lpn` now lives in write-buffer slot `slot`; any copy on flash is stale.
    pub fn set_buffered(&mut self, lpn: Lpn, slot: BufferSlot) {
        let slot = slot.0;
        debug_assert!(slot & BUF_FLAG == 0);
        self.invalidate_flash_copy(lpn);
        self.l2p[lpn.index()] = slot | BUF_FLAG;
    }

    /// TRIM: the logical page holds no data any more. Returns where it was.
    pub fn unmap(&mut self, lpn: Lpn) -> Loc {
        let was = self.lookup(lpn);
        if was != Loc::Unmapped {
            self.stats.trimmed_units += 1;
        }
        self.invalidate_flash_copy(lpn);
        self.l2p[lpn.index()] = UNMAPPED;
        was
    }

    /// A zone reset's unmapping of `lpn`: as [`Ftl::unmap`], not counted as a trim.
    pub fn discard(&mut self, lpn: Lpn) -> Loc {
        let was = self.lookup(lpn);
        self.invalidate_flash_copy(lpn);
        self.l2p[lpn.index()] = UNMAPPED;
        was
    }

    fn invalidate_flash_copy(&mut self, lpn: Lpn) {
        if let Loc::Flash(ppa) = self.lookup(lpn) {
            debug_assert_eq!(self.p2l[ppa.index()], lpn.0);
            self.invalidate_unit(ppa);
        }
    }

    fn invalidate_unit(&mut self, ppa: Ppa) {
        self.p2l[ppa.index()] = NO_LPN;
        let b = self.block_of(ppa);
        let blk = &mut self.blocks[b as usize];
        if blk.state == BlockState::Full {
            self.buckets.decrement(b, blk.valid);
        }
        blk.valid -= 1;
    }

    /// The page index (in its block) the next host page of `plane` for `placement` goes to:
    /// the open block's write pointer, or 0 when the next write opens a block.
    pub fn next_host_page(&self, plane: PlaneId, placement: Placement) -> u32 {
        let open = self.planes[plane.index()].host_open[placement.index()];
        open.map_or(0, |b| self.blocks[b as usize].written) >> self.upp_shift
    }

    /// Whether `plane` can take `units` more host units of `placement` now without eating into
    /// GC's reserve.
    pub fn can_program_host(&self, plane: PlaneId, placement: Placement, units: u32) -> bool {
        let p = &self.planes[plane.index()];
        let room = self.room(p.host_open[placement.index()]);
        // A zoned drive has no GC to keep a reserve for.
        let reserve = if self.params.zoned.is_some() { 0 } else { GC_RESERVE_BLOCKS };
        room >= units || p.free.len() > reserve
    }

    /// Zone Reset's flash work on a zoned drive: zone `zone` (its placement), whose data the
    /// caller has unmapped, gives up its open blocks and every block it wrote is erased — free
    /// again at once; the caller times the erases on the dies, whose later programs wait for
    /// them. Appends the erased blocks to `erased`.
    pub fn erase_zone(&mut self, zone: Placement, erased: &mut Vec<u32>) {
        assert!(self.params.zoned.is_some(), "Zone Reset on a drive without zones");
        for p in &mut self.planes {
            p.host_open[zone.index()] = None;
        }
        let planes = self.planes.len();
        self.zone_plane_units[zone.index() * planes..(zone.index() + 1) * planes].fill(0);
        let mut blocks = std::mem::take(&mut self.zone_blocks[zone.index()]);
        for &b in &blocks {
            let blk = &mut self.blocks[b as usize];
            assert_eq!(blk.valid, 0, "zone {} reset with valid data in block {b}", zone.0);
            if blk.state == BlockState::Full {
                self.buckets.remove(b, 0);
            }
            blk.state = BlockState::Free;
            blk.written = 0;
            blk.erase_count += 1;
            self.stats.erases += 1;
            self.planes[(b / self.blocks_per_plane) as usize].free.push_back(b);
        }
        erased.extend_from_slice(&blocks);
        blocks.clear();
        self.zone_blocks[zone.index()] = blocks;
    }

    /// Programs host data for `lpn` (written by `owner`) into `plane`'s open block of
    /// `placement` and maps it. May start garbage collection, whose jobs the caller collects
    /// with [`Ftl::take_gc_job`]; that GC is charged as caused by `owner` and `placement`.
    ///
    /// `owner` [`NO_OWNER`] on a zoned drive is a Finish's padding at `lpn`'s place in the
    /// zone: programmed there, counted as padding, never mapped (the zone reads as unwritten
    /// past where the host stopped).
    pub fn program_host(&mut self, plane: PlaneId, lpn: Lpn, owner: u16, placement: Placement) -> Ppa {
        debug_assert_eq!(self.plane_of(lpn), plane);
        if owner == NO_OWNER && self.params.zoned.is_some() {
            debug_assert!(!matches!(self.lookup(lpn), Loc::Flash(_)), "padding over data at {lpn:?}");
            self.l2p[lpn.index()] = UNMAPPED;
            let stream = Stream::Host(placement);
            let ppa = self.alloc(plane, stream);
            self.owner[ppa.index()] = NO_OWNER;
            self.close_if_full(plane, stream, ppa);
            self.stats.padding_units_programmed += 1;
            return ppa;
        }
        // Invalidate first, so that GC started by this allocation does not copy the stale data.
        self.invalidate_flash_copy(lpn);
        self.l2p[lpn.index()] = UNMAPPED;
        self.planes[plane.index()].cause = (placement.0, owner);
        let stream = Stream::Host(placement);
        let ppa = self.alloc(plane, stream);
        self.place(ppa, lpn, owner);
        if let Some(u) = self.unit_placement.get_mut(ppa.index()) {
            *u = placement.0 as u8;
        }
        self.close_if_full(plane, stream, ppa);
        self.stats.host_units_programmed += 1;
        self.placement_gc[placement.index()].host_units += 1;
        ppa
    }

    /// Fills the rest of `placement`'s open host block's current flash page with padding, so
    /// the next program starts on a page boundary (after unit-by-unit preconditioning, or a
    /// page a flush needs before it is full).
    pub fn pad_host_page(&mut self, plane: PlaneId, placement: Placement) {
        let stream = Stream::Host(placement);
        while let Some(b) = self.planes[plane.index()].host_open[placement.index()] {
            if self.blocks[b as usize].written % self.units_per_page == 0 {
                break;
            }
            let ppa = self.alloc(plane, stream);
            self.owner[ppa.index()] = NO_OWNER;
            self.close_if_full(plane, stream, ppa);
            self.stats.padding_units_programmed += 1;
        }
    }

    /// Closes `placement`'s open host block of `plane` before it is full, as an FDP Reclaim
    /// Unit Handle Update switches the handle to a fresh reclaim unit: the block's current page
    /// is padded, its unwritten pages stay unwritten until it is erased, and it enters GC's
    /// victim pool with what it holds. The next write of the placement opens a free block.
    /// Returns whether a block was closed before it was full (a block with nothing written
    /// stays open: switching from it wastes nothing).
    pub fn close_host_block(&mut self, plane: PlaneId, placement: Placement) -> bool {
        self.pad_host_page(plane, placement);
        let slot = &mut self.planes[plane.index()].host_open[placement.index()];
        let Some(b) = *slot else { return false };
        let blk = &mut self.blocks[b as usize];
        if blk.written == 0 {
            return false;
        }
        *slot = None;
        blk.state = BlockState::Full;
        let valid = blk.valid;
        self.buckets.insert(b, valid);
        self.placement_gc[placement.index()].blocks_closed_early += 1;
        true
    }

    pub(super) fn place(&mut self, ppa: Ppa, lpn: Lpn, owner: u16) {
        self.l2p[lpn.index()] = ppa.0;
        self.place_raw(ppa, lpn.0, owner);
    }

    pub(super) fn place_raw(&mut self, ppa: Ppa, p2l: u32, owner: u16) {
        self.p2l[ppa.index()] = p2l;
        self.owner[ppa.index()] = owner;
        let b = self.block_of(ppa) as usize;
        self.blocks[b].valid += 1;
    }

    /// Next free unit of `plane`'s open block for `stream`, opening a block when needed.
    pub(super) fn alloc(&mut self, plane: PlaneId, stream: Stream) -> Ppa {
        self.alloc_units(plane, stream, 1)
    }

    /// `n` consecutive units of `plane`'s open block for `stream` (the caller keeps `n` dividing
    /// the block's remaining room, as whole translation pages do).
    pub(super) fn alloc_units(&mut self, plane: PlaneId, stream: Stream, n: u32) -> Ppa {
        let upb = self.units_per_block;
        let current = *self.open_block(plane, stream);
        // A block that fills is closed below, so an open block always has room.
        let block = match current {
            Some(b) => b,
            None => {
                let zoned = self.params.zoned.is_some();
                let p = &mut self.planes[plane.index()];
                assert!(
                    p.free.len() > if zoned { 0 } else { stream.reserve() },
                    "plane {}: no free block for {} writes (caller must check can_program_host/can_program_map)",
                    plane.0,
                    match stream {
                        Stream::Host(_) => "host",
                        Stream::Gc | Stream::PlacementGc(_) => "GC",
                        Stream::Map | Stream::MapGc => "translation-page",
                    }
                );
                let b = p.free.pop_front().expect("checked above");
                *self.open_block(plane, stream) = Some(b);
                let blk = &mut self.blocks[b as usize];
                blk.state = BlockState::Active;
                blk.map = matches!(stream, Stream::Map | Stream::MapGc);
                blk.placement = match stream {
                    Stream::Host(h) | Stream::PlacementGc(h) => h.0,
                    Stream::Gc => MIXED,
                    Stream::Map | Stream::MapGc => 0,
                };
                if zoned {
                    let Stream::Host(zone) = stream else { unreachable!("a zoned drive writes only host data") };
                    self.zone_blocks[zone.index()].push(b);
                } else if matches!(stream, Stream::Host(_) | Stream::Map) {
                    self.collect_garbage(plane);
                }
                b
            }
        };
        let blk = &mut self.blocks[block as usize];
        debug_assert!(upb - blk.written >= n, "{n} units do not fit in block {block}");
        let ppa = Ppa(block * upb + blk.written);
        blk.written += n;
        if let (Stream::Host(zone), false) = (stream, self.zone_plane_units.is_empty()) {
            self.zone_plane_units[zone.index() * self.planes.len() + plane.index()] += n;
        }
        self.write_seq += n as u64;
        blk.last_write_seq = self.write_seq;
        ppa
    }

    /// Closes `stream`'s open block once its last unit is written (after the unit is placed, so
    /// the block enters the victim pool with its true valid count).
    pub(super) fn close_if_full(&mut self, plane: PlaneId, stream: Stream, ppa: Ppa) {
        let block = self.block_of(ppa);
        let blk = &mut self.blocks[block as usize];
        if blk.written < self.units_per_block {
            return;
        }
        blk.state = BlockState::Full;
        let valid = blk.valid;
        self.buckets.insert(block, valid);
        *self.open_block(plane, stream) = None;
        if let Stream::Host(h) = stream {
            self.placement_gc[h.index()].blocks_filled += 1;
        }
    }

    /// Units left in `block` (0 when there is no open block).
    pub(super) fn room(&self, block: Option<u32>) -> u32 {
        block.map_or(0, |b| self.units_per_block - self.blocks[b as usize].written)
    }
}
