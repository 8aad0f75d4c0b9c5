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

use super::{BlockState, Ftl, Loc, Stream, BUF_FLAG, GC_RESERVE_BLOCKS, NO_LPN, NO_OWNER, UNMAPPED};
use crate::units::{BufferSlot, Lpn, PlaneId, Ppa};

impl Ftl {
    /// The placement seam: the open block of `plane` that a write of `stream` goes to (`None`:
    /// the next write opens a free block). Every unit the FTL writes — host data
    /// ([`Ftl::program_host`]), padding, GC copies, translation pages — gets its block here, and
    /// the plane itself comes from static striping ([`Ftl::plane_of`]). Today each plane has one
    /// open block per `Stream`. Data placement plugs in at this function and that enum: NVMe
    /// FDP makes a stream per reclaim unit handle (each handle its own open reclaim unit, GC
    /// copying per handle type), Streams a stream per stream id (each its own open block), and
    /// ZNS a zone's block with its write pointer as `written` (no device GC stream).
    pub(super) fn open_block(&mut self, plane: PlaneId, stream: Stream) -> &mut Option<u32> {
        let p = &mut self.planes[plane.index()];
        match stream {
            Stream::Host => &mut p.user_active,
            Stream::Gc => &mut p.gc_active,
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

    /// The page index (in its block) the next host page of `plane` goes to: the open host
    /// block's write pointer, or 0 when the next write opens a block.
    pub fn next_host_page(&self, plane: PlaneId) -> u32 {
        let written = self.planes[plane.index()].user_active.map_or(0, |b| self.blocks[b as usize].written);
        written >> self.upp_shift
    }

    /// Whether `plane` can take `units` more host units now without eating into GC's reserve.
    pub fn can_program_host(&self, plane: PlaneId, units: u32) -> bool {
        let p = &self.planes[plane.index()];
        let room = p.user_active.map_or(0, |b| self.units_per_block - self.blocks[b as usize].written);
        room >= units || p.free.len() > GC_RESERVE_BLOCKS
    }

    /// Programs host data for `lpn` (written by `owner`) into `plane`'s open host block and maps it.
    /// May start garbage collection, whose jobs the caller collects with [`Ftl::take_gc_job`].
    pub fn program_host(&mut self, plane: PlaneId, lpn: Lpn, owner: u16) -> Ppa {
        debug_assert_eq!(self.plane_of(lpn), plane);
        // Invalidate first, so that GC started by this allocation does not copy the stale data.
        self.invalidate_flash_copy(lpn);
        self.l2p[lpn.index()] = UNMAPPED;
        let ppa = self.alloc(plane, Stream::Host);
        self.place(ppa, lpn, owner);
        self.close_if_full(plane, Stream::Host, ppa);
        self.stats.host_units_programmed += 1;
        ppa
    }

    /// Fills the rest of the open host block's current flash page with padding, so the next
    /// program starts on a page boundary (used after unit-by-unit preconditioning).
    pub fn pad_host_page(&mut self, plane: PlaneId) {
        while let Some(b) = self.planes[plane.index()].user_active {
            if self.blocks[b as usize].written % self.units_per_page == 0 {
                break;
            }
            let ppa = self.alloc(plane, Stream::Host);
            self.owner[ppa.index()] = NO_OWNER;
            self.close_if_full(plane, Stream::Host, ppa);
            self.stats.padding_units_programmed += 1;
        }
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
                let p = &mut self.planes[plane.index()];
                assert!(
                    p.free.len() > stream.reserve(),
                    "plane {}: no free block for {} writes (caller must check can_program_host/can_program_map)",
                    plane.0,
                    match stream {
                        Stream::Host => "host",
                        Stream::Gc => "GC",
                        Stream::Map | Stream::MapGc => "translation-page",
                    }
                );
                let b = p.free.pop_front().expect("checked above");
                *self.open_block(plane, stream) = Some(b);
                let blk = &mut self.blocks[b as usize];
                blk.state = BlockState::Active;
                blk.map = matches!(stream, Stream::Map | Stream::MapGc);
                if matches!(stream, Stream::Host | Stream::Map) {
                    self.collect_garbage(plane);
                }
                b
            }
        };
        let blk = &mut self.blocks[block as usize];
        debug_assert!(upb - blk.written >= n, "{n} units do not fit in block {block}");
        let ppa = Ppa(block * upb + blk.written);
        blk.written += n;
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
    }

    /// Units left in `block` (0 when there is no open block).
    pub(super) fn room(&self, block: Option<u32>) -> u32 {
        block.map_or(0, |b| self.units_per_block - self.blocks[b as usize].written)
    }
}
