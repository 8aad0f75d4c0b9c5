use super::buckets::ValidBuckets;
use crate::engine::prefetch;
use crate::flash::Geometry;
use crate::units::{BufferSlot, Lpn, MapPage, PlaneId, Ppa, TenantId};
use serde::Serialize;
use std::collections::VecDeque;

/// Marks "no tenant" in the ownership ledger (padding, never-written units).
pub const NO_OWNER: u16 = u16::MAX;
/// Marks translation (map) pages in the ownership ledger: they belong to the FTL, not a tenant.
pub const MAP_OWNER: u16 = u16::MAX - 1;
/// L2P value of a logical page that holds no data.
const UNMAPPED: u32 = u32::MAX;
/// L2P values with this bit set name a write-buffer slot, not a flash address.
const BUF_FLAG: u32 = 1 << 31;
/// P2L value of a physical unit that holds no valid data.
const NO_LPN: u32 = u32::MAX;
/// P2L values with this bit set (and not `NO_LPN`) hold unit `v & !MAP_BIT` of the translation
/// space (map page × units per page + unit), not a logical page.
const MAP_BIT: u32 = 1 << 31;

/// Where a logical page's latest data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    Unmapped,
    /// In the device's DRAM write buffer, slot n.
    Buffer(BufferSlot),
    Flash(Ppa),
}

crate::named! {
    /// How GC picks the block to clean.
    pub enum VictimPolicy: "policy" {
        /// Fewest valid units (least copying now).
        Greedy = "greedy",
        /// Largest (1 − u) / 2u × age (Rosenblum & Ousterhout's LFS cleaner): prefers old, cold
        /// blocks whose remaining data is unlikely to be invalidated soon.
        CostBenefit = "cost-benefit",
    }
}

#[derive(Clone, Debug)]
pub struct FtlParams {
    /// Logical pages (mapping units) exported to the host.
    pub logical_units: u64,
    pub victim_policy: VictimPolicy,
    /// GC starts in a plane when its free (or being-erased) blocks fall to this many (at least 2:
    /// one for the next host block, one kept back for GC's own copies).
    pub gc_threshold_blocks: u32,
    /// DFTL: the L2P table itself is stored on flash in translation pages of this many entries
    /// (one flash page each). `None`: the whole table lives in controller DRAM.
    pub map_entries_per_page: Option<u32>,
}

impl FtlParams {
    /// Translation pages needed for the L2P table (0 without DFTL).
    pub fn map_pages(&self) -> u32 {
        self.map_entries_per_page.map_or(0, |e| self.logical_units.div_ceil(e as u64) as u32)
    }
}

/// One block's worth of garbage collection, for the device to time: read the victim's pages that
/// still hold valid data, program them elsewhere in the same plane, erase the victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcJob {
    pub plane: PlaneId,
    pub victim: u32,
    pub read_pages: u32,
    pub program_pages: u32,
    pub moved_units: u32,
}

/// GC work attributed to one tenant through the ownership ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TenantGc {
    /// Valid units GC copied that this tenant had written.
    pub units_moved: u64,
    /// Units of erased blocks this tenant had written (divide by units per block for erases).
    pub erased_units: u64,
}

/// Drive-wide FTL counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FtlStats {
    pub host_units_programmed: u64,
    pub gc_units_programmed: u64,
    pub padding_units_programmed: u64,
    pub gc_runs: u64,
    pub erases: u64,
    pub trimmed_units: u64,
    /// Units of translation pages programmed: map flushes and GC's map updates (DFTL).
    pub map_units_programmed: u64,
    /// Units of translation pages GC copied out of victim blocks (included in `gc_units_programmed`).
    pub gc_map_units_moved: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockState {
    Free,
    Active,
    Full,
    /// Cleaned by GC; becomes free when the device finishes erasing it.
    Erasing,
}

#[derive(Clone, Copy, Debug)]
struct Block {
    state: BlockState,
    valid: u32,
    /// Units programmed since the last erase (the write pointer).
    written: u32,
    erase_count: u32,
    /// `write_seq` at the block's last program, for cost-benefit's age.
    last_write_seq: u64,
    /// Holds translation pages (DFTL keeps them in their own blocks).
    map: bool,
}

#[derive(Clone, Debug, Default)]
struct Plane {
    free: VecDeque<u32>,
    user_active: Option<u32>,
    gc_active: Option<u32>,
    /// Open block for translation pages written by map flushes.
    map_active: Option<u32>,
    /// Open block for translation pages GC copies (apart from `map_active`, as GC's data copies
    /// are apart from host writes, so GC never fills the block a map flush just opened).
    map_gc_active: Option<u32>,
    erasing: u32,
}

/// Which open block of a plane a write goes to (see [`Ftl::open_block`], the placement seam).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    Host,
    Gc,
    /// Translation pages written by map flushes: like host writes, they leave GC's reserve alone.
    Map,
    /// Translation pages copied by GC: into their own translation block, allowed to use the
    /// reserve.
    MapGc,
}

impl Stream {
    /// Free blocks this stream must leave for others when it opens a block.
    fn reserve(self) -> usize {
        match self {
            Stream::Host | Stream::Map => GC_RESERVE_BLOCKS,
            Stream::Gc | Stream::MapGc => 0,
        }
    }
}

/// Free blocks always kept back for GC's own copies, so a full plane can still be cleaned.
const GC_RESERVE_BLOCKS: usize = 1;

pub struct Ftl {
    units_per_page: u32,
    /// log2(units_per_page): pages and units are powers of two.
    upp_shift: u32,
    units_per_block: u32,
    /// log2(units_per_block) when it is a power of two (shift instead of divide on hot paths).
    upb_shift: Option<u32>,
    planes_per_die: u32,
    blocks_per_plane: u32,
    stripe_to_plane: Vec<PlaneId>,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    owner: Vec<u16>,
    blocks: Vec<Block>,
    planes: Vec<Plane>,
    buckets: ValidBuckets,
    params: FtlParams,
    write_seq: u64,
    stats: FtlStats,
    tenant_gc: Vec<TenantGc>,
    unowned_gc: TenantGc,
    pending_gc: VecDeque<GcJob>,
    /// Reused by `relocate`: (physical unit, logical page, owner) of a victim's valid units.
    gc_scratch: Vec<(u32, u32, u16)>,
    /// DFTL: entries per translation page (0 without DFTL).
    map_entries: u32,
    /// Global translation directory: first physical unit of each translation page.
    gtd: Vec<u32>,
    /// Translation pages whose entries GC changed by moving data, with the data's owner, in the
    /// order GC moved them (one per page per victim); the device turns them into map updates.
    gc_map_updates: Vec<(MapPage, u16)>,
    /// Per translation page, the number of the last relocation that reported it (dedup without
    /// sorting), and the count of relocations.
    map_update_stamp: Vec<u64>,
    relocations: u64,
    /// GC work on translation pages.
    map_gc: TenantGc,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FtlError {
    #[error(
        "over-provisioning too low for garbage collection to make progress: each plane holds up to \
         {logical_blocks} blocks of logical data{} in {blocks} blocks, but GC needs {needed} spare blocks \
         (threshold {threshold} + 3 for the open blocks and GC's reserve{})",
        if *.dftl { " and translation pages" } else { "" },
        if *.dftl { " + 2 open translation blocks" } else { "" }
    )]
    OverprovisioningTooLow { logical_blocks: u64, blocks: u32, needed: u32, threshold: u32, dftl: bool },
    #[error("the logical space is empty")]
    NoLogicalSpace,
    #[error("the drive has 2^31 or more mapping units: use a larger unit size")]
    TooLarge,
}

impl Ftl {
    /// Checks that GC can make progress with these parameters (without building the tables).
    pub fn check_params(geo: &Geometry, params: &FtlParams) -> Result<(), FtlError> {
        if params.logical_units == 0 {
            return Err(FtlError::NoLogicalSpace);
        }
        if params.logical_units >= MAP_BIT as u64 || geo.total_units() >= MAP_BIT as u64 {
            return Err(FtlError::TooLarge);
        }
        // The most logical units any plane can be asked to hold under static striping, plus its
        // share of translation pages (one flash page each, striped the same way).
        let upp = geo.units_per_page() as u64;
        let stripes = params.logical_units.div_ceil(upp);
        let map_pages = params.map_pages() as u64;
        let max_plane_units = (stripes.div_ceil(geo.planes() as u64) + map_pages.div_ceil(geo.planes() as u64)) * upp;
        let logical_blocks = max_plane_units.div_ceil(geo.units_per_block() as u64);
        // Threshold, the open host and GC blocks, GC's reserve; and the two open translation
        // blocks (map flushes, GC's copies) with DFTL.
        let needed = params.gc_threshold_blocks + 3 + 2 * (map_pages > 0) as u32;
        if logical_blocks + needed as u64 > geo.blocks_per_plane as u64 {
            return Err(FtlError::OverprovisioningTooLow {
                logical_blocks,
                blocks: geo.blocks_per_plane,
                needed,
                threshold: params.gc_threshold_blocks,
                dftl: map_pages > 0,
            });
        }
        Ok(())
    }

    pub fn new(geo: &Geometry, params: FtlParams) -> Result<Ftl, FtlError> {
        Self::check_params(geo, &params)?;
        assert!(params.gc_threshold_blocks >= 2, "GC threshold below 2 blocks can deadlock");
        let planes = geo.planes();
        let upp = geo.units_per_page();
        let upb = geo.units_per_block();
        let stripe_to_plane: Vec<PlaneId> = (0..planes as u64).map(|s| geo.plane_for_stripe(s)).collect();
        let total_units = geo.total_units() as usize;
        let nblocks = geo.blocks() as usize;
        let blocks = vec![
            Block { state: BlockState::Free, valid: 0, written: 0, erase_count: 0, last_write_seq: 0, map: false };
            nblocks
        ];
        let planes_v = (0..planes)
            .map(|p| Plane {
                free: (p * geo.blocks_per_plane..(p + 1) * geo.blocks_per_plane).collect(),
                ..Plane::default()
            })
            .collect();
        let map_pages = params.map_pages();
        let mut ftl = Ftl {
            units_per_page: upp,
            upp_shift: upp.trailing_zeros(),
            units_per_block: upb,
            upb_shift: upb.is_power_of_two().then(|| upb.trailing_zeros()),
            planes_per_die: geo.planes_per_die,
            blocks_per_plane: geo.blocks_per_plane,
            stripe_to_plane,
            l2p: vec![UNMAPPED; params.logical_units as usize],
            p2l: vec![NO_LPN; total_units],
            owner: vec![NO_OWNER; total_units],
            blocks,
            planes: planes_v,
            buckets: ValidBuckets::new(planes, geo.blocks_per_plane, upb),
            write_seq: 0,
            stats: FtlStats::default(),
            tenant_gc: Vec::new(),
            unowned_gc: TenantGc::default(),
            pending_gc: VecDeque::new(),
            gc_scratch: Vec::new(),
            map_entries: params.map_entries_per_page.unwrap_or(0),
            gtd: vec![UNMAPPED; map_pages as usize],
            gc_map_updates: Vec::new(),
            map_update_stamp: vec![0; map_pages as usize],
            relocations: 0,
            map_gc: TenantGc::default(),
            params,
        };
        // A formatted drive holds its whole (empty) translation table on flash.
        for mp in (0..map_pages).map(MapPage) {
            let plane = ftl.map_plane(mp);
            ftl.program_map(plane, mp);
        }
        ftl.stats = FtlStats::default();
        Ok(ftl)
    }

    pub fn logical_units(&self) -> u64 {
        self.l2p.len() as u64
    }
    pub fn units_per_page(&self) -> u32 {
        self.units_per_page
    }
    pub fn units_per_block(&self) -> u32 {
        self.units_per_block
    }
    pub fn stats(&self) -> &FtlStats {
        &self.stats
    }
    /// GC work attributed to `tenant`.
    pub fn tenant_gc(&self, tenant: TenantId) -> TenantGc {
        self.tenant_gc.get(tenant.index()).cloned().unwrap_or_default()
    }
    /// GC work on data with no tenant (e.g. written by preconditioning of a shared region).
    pub fn unowned_gc(&self) -> &TenantGc {
        &self.unowned_gc
    }
    /// Bytes of the model's own mapping state (L2P, P2L, ownership ledger, block table).
    pub fn memory_bytes(&self) -> (u64, u64) {
        let l2p = (self.l2p.len() * 4) as u64;
        let other = (self.p2l.len() * 4
            + self.gtd.len() * 4
            + self.owner.len() * 2
            + self.blocks.len() * std::mem::size_of::<Block>()) as u64;
        (l2p, other)
    }

    fn block_of(&self, ppa: Ppa) -> u32 {
        match self.upb_shift {
            Some(s) => ppa.0 >> s,
            None => ppa.0 / self.units_per_block,
        }
    }

    /// The plane that stores `lpn` (static channel-first striping by flash page).
    pub fn plane_of(&self, lpn: Lpn) -> PlaneId {
        let stripe = lpn.0 >> self.upp_shift;
        self.stripe_to_plane[stripe as usize % self.stripe_to_plane.len()]
    }
    /// The global flash page (block × pages per block + page) of a physical unit.
    pub fn page_of(&self, ppa: Ppa) -> u32 {
        ppa.0 >> self.upp_shift
    }
    pub fn plane_of_ppa(&self, ppa: Ppa) -> PlaneId {
        PlaneId(self.block_of(ppa) / self.blocks_per_plane)
    }

    pub fn lookup(&self, lpn: Lpn) -> Loc {
        match self.l2p[lpn.index()] {
            UNMAPPED => Loc::Unmapped,
            v if v & BUF_FLAG != 0 => Loc::Buffer(BufferSlot(v & !BUF_FLAG)),
            v => Loc::Flash(Ppa(v)),
        }
    }

    /// The tenant that wrote physical unit `ppa` (NO_OWNER if none).
    pub fn owner_of(&self, ppa: Ppa) -> u16 {
        self.owner[ppa.index()]
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

    fn place(&mut self, ppa: Ppa, lpn: Lpn, owner: u16) {
        self.l2p[lpn.index()] = ppa.0;
        self.place_raw(ppa, lpn.0, owner);
    }

    fn place_raw(&mut self, ppa: Ppa, p2l: u32, owner: u16) {
        self.p2l[ppa.index()] = p2l;
        self.owner[ppa.index()] = owner;
        let b = self.block_of(ppa) as usize;
        self.blocks[b].valid += 1;
    }

    /// Next free unit of `plane`'s open block for `stream`, opening a block when needed.
    fn alloc(&mut self, plane: PlaneId, stream: Stream) -> Ppa {
        self.alloc_units(plane, stream, 1)
    }

    /// `n` consecutive units of `plane`'s open block for `stream` (the caller keeps `n` dividing
    /// the block's remaining room, as whole translation pages do).
    fn alloc_units(&mut self, plane: PlaneId, stream: Stream, n: u32) -> Ppa {
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
    fn close_if_full(&mut self, plane: PlaneId, stream: Stream, ppa: Ppa) {
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

    /// The placement seam: the open block of `plane` that a write of `stream` goes to (`None`:
    /// the next write opens a free block). Every unit the FTL writes — host data
    /// ([`Ftl::program_host`]), padding, GC copies, translation pages — gets its block here, and
    /// the plane itself comes from static striping ([`Ftl::plane_of`]). Today each plane has one
    /// open block per [`Stream`]. Data placement plugs in at this function and that enum: NVMe
    /// FDP makes a stream per reclaim unit handle (each handle its own open reclaim unit, GC
    /// copying per handle type), Streams a stream per stream id (each its own open block), and
    /// ZNS a zone's block with its write pointer as `written` (no device GC stream).
    fn open_block(&mut self, plane: PlaneId, stream: Stream) -> &mut Option<u32> {
        let p = &mut self.planes[plane.index()];
        match stream {
            Stream::Host => &mut p.user_active,
            Stream::Gc => &mut p.gc_active,
            Stream::Map => &mut p.map_active,
            Stream::MapGc => &mut p.map_gc_active,
        }
    }

    fn room(&self, block: Option<u32>) -> u32 {
        block.map_or(0, |b| self.units_per_block - self.blocks[b as usize].written)
    }

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

    /// Cleans victims in `plane` while its free-or-erasing blocks are at or below the threshold.
    /// When it cleans anything, the die's other planes that are within one block of their own
    /// threshold are cleaned too, so that their jobs can run together as multi-plane operations
    /// (planes of a die are written in step, so they would need GC moments later anyway).
    fn collect_garbage(&mut self, plane: PlaneId) {
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
            let blk = &self.blocks[victim as usize];
            let p = &self.planes[plane.index()];
            let gc_room = self.room(if blk.map { p.map_gc_active } else { p.gc_active });
            if blk.valid > gc_room && p.free.is_empty() {
                // Wait for an erase to finish before copying more.
                return run > 0;
            }
            self.relocate(plane, victim);
        }
        panic!("GC in plane {} did not converge", plane.0);
    }

    fn pick_victim(&mut self, plane: PlaneId) -> Option<u32> {
        let first = plane.0 * self.blocks_per_plane;
        let upb = self.units_per_block;
        match self.params.victim_policy {
            VictimPolicy::Greedy => self.buckets.min_below(plane.0, upb),
            VictimPolicy::CostBenefit => {
                // Cost-benefit depends on age, which changes for every block at every write:
                // no index keeps it sorted, so it scans the plane (once per GC run).
                let candidates = (first..first + self.blocks_per_plane).filter(|&b| {
                    let blk = &self.blocks[b as usize];
                    blk.state == BlockState::Full && blk.valid < upb
                });
                let now = self.write_seq;
                let score = |b: u32| {
                    let blk = &self.blocks[b as usize];
                    let u = blk.valid as f64 / upb as f64;
                    if u == 0.0 {
                        return f64::INFINITY;
                    }
                    let age = (now - blk.last_write_seq) as f64 + 1.0;
                    (1.0 - u) / (2.0 * u) * age
                };
                // Highest score; ties go to the lowest block number (max_by keeps the last max).
                candidates.fold(None, |best: Option<(u32, f64)>, b| {
                    let s = score(b);
                    match best {
                        Some((_, bs)) if bs >= s => best,
                        _ => Some((b, s)),
                    }
                })
                .map(|(b, _)| b)
            }
        }
    }

    /// Copies the victim's valid units to the plane's GC block and queues the victim for erasing.
    fn relocate(&mut self, plane: PlaneId, victim: u32) {
        let upb = self.units_per_block;
        let upp = self.units_per_page;
        let base = victim * upb;
        let written = self.blocks[victim as usize].written;
        let mut program_pages = 0u32;
        let mut read_pages = 0u32;
        // Out of the victim pool before its valid count starts dropping.
        self.buckets.remove(victim, self.blocks[victim as usize].valid);
        self.blocks[victim as usize].state = BlockState::Erasing;
        self.planes[plane.index()].erasing += 1;
        // Attribute the erase and list the valid units; then prefetch their L2P entries, which are
        // scattered over the table, so they arrive in parallel instead of one stall per unit.
        let mut valid = std::mem::take(&mut self.gc_scratch);
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
        let map_block = self.blocks[victim as usize].map;
        if !map_block {
            for &(_, lpn, _) in &valid {
                prefetch(&self.l2p[lpn as usize]);
            }
        }
        let stream = if map_block { Stream::MapGc } else { Stream::Gc };
        self.relocations += 1;
        for &(old, lpn, owner) in &valid {
            let new = self.alloc(plane, stream);
            // A GC page is programmed when its last unit is filled; a partly filled page waits
            // for the next run.
            program_pages += ((new.0 + 1) & (upp - 1) == 0) as u32;
            self.p2l[old as usize] = NO_LPN;
            self.blocks[victim as usize].valid -= 1;
            if map_block {
                // Whole translation pages move in order into a page-aligned map block.
                debug_assert!(lpn & MAP_BIT != 0 && lpn != NO_LPN, "data in a translation block");
                let unit = lpn & !MAP_BIT;
                self.place_raw(new, lpn, owner);
                if unit % upp == 0 {
                    self.gtd[(unit / upp) as usize] = new.0;
                }
                self.stats.gc_map_units_moved += 1;
            } else {
                self.place(new, Lpn(lpn), owner);
                if let Some(mp) = lpn.checked_div(self.map_entries) {
                    // One map update per translation page per victim (DFTL's batched update).
                    if self.map_update_stamp[mp as usize] != self.relocations {
                        self.map_update_stamp[mp as usize] = self.relocations;
                        self.gc_map_updates.push((MapPage(mp), owner));
                    }
                }
            }
            self.close_if_full(plane, stream, new);
            self.attribute(owner).units_moved += 1;
        }
        let moved = valid.len() as u32;
        self.gc_scratch = valid;
        debug_assert_eq!(self.blocks[victim as usize].valid, 0);
        self.stats.gc_runs += 1;
        self.stats.gc_units_programmed += moved as u64;
        self.pending_gc.push_back(GcJob { plane, victim, read_pages, program_pages, moved_units: moved });
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

    /// Writes `lpn` with no timing, as preconditioning does: GC runs and its erases complete at once.
    pub fn write_untimed(&mut self, lpn: Lpn, owner: u16) {
        let plane = self.plane_of(lpn);
        self.program_host(plane, lpn, owner);
        while let Some(job) = self.pending_gc.pop_front() {
            self.finish_erase(job.victim);
        }
        // Untimed writes leave the translation pages as they are (see docs/MODEL.md).
        self.gc_map_updates.clear();
    }

    /// Zeroes the counters and GC attribution (not the state): the measured run counts from here.
    pub fn reset_stats(&mut self) {
        self.stats = FtlStats::default();
        self.tenant_gc.clear();
        self.unowned_gc = TenantGc::default();
        self.map_gc = TenantGc::default();
    }

    /// Prefetches the table entries that writing `lpns` will touch (two steps: the L2P entries,
    /// then what they point to). Only a speed-up: the tables are large and these accesses random.
    pub fn warm_for_writes(&self, lpns: &[u32]) {
        for &l in lpns {
            self.prefetch_entry(Lpn(l));
        }
        for &l in lpns {
            self.prefetch_location(Lpn(l));
        }
    }

    /// Prefetches `lpn`'s L2P entry (first step of a lookup that will come soon).
    pub fn prefetch_entry(&self, lpn: Lpn) {
        if let Some(e) = self.l2p.get(lpn.index()) {
            prefetch(e);
        }
    }

    /// Reads `lpn`'s L2P entry and prefetches the reverse-map entry and block it points to
    /// (second step: best issued a little after [`Ftl::prefetch_entry`]).
    pub fn prefetch_location(&self, lpn: Lpn) {
        if let Some(Loc::Flash(ppa)) = self.l2p.get(lpn.index()).map(|_| self.lookup(lpn)) {
            prefetch(&self.p2l[ppa.index()]);
            prefetch(&self.blocks[self.block_of(ppa) as usize]);
        }
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

    /// Free blocks in `plane` (not counting blocks being erased).
    pub fn free_blocks(&self, plane: PlaneId) -> usize {
        self.planes[plane.index()].free.len()
    }

    /// Checks every structural invariant; panics with a description on the first violation.
    /// Cost: linear in the drive's size.
    pub fn check_invariants(&self) {
        let upb = self.units_per_block;
        let mut mapped_to_flash = 0u64;
        for (lpn, &v) in self.l2p.iter().enumerate() {
            if v != UNMAPPED && v & BUF_FLAG == 0 {
                mapped_to_flash += 1;
                assert_eq!(self.p2l[v as usize], lpn as u32, "L2P[{lpn}]={v} but P2L disagrees");
            }
        }
        for (mp, &first) in self.gtd.iter().enumerate() {
            assert_ne!(first, UNMAPPED, "translation page {mp} has no copy on flash");
            assert_eq!(first % self.units_per_page, 0, "translation page {mp} not page-aligned");
            for k in 0..self.units_per_page {
                let want = MAP_BIT | (mp as u32 * self.units_per_page + k);
                assert_eq!(self.p2l[(first + k) as usize], want, "GTD[{mp}] unit {k}: P2L disagrees");
                assert!(self.blocks[self.block_of(Ppa(first)) as usize].map, "translation page {mp} in a data block");
            }
            mapped_to_flash += self.units_per_page as u64;
        }
        let mut total_valid = 0u64;
        for (b, blk) in self.blocks.iter().enumerate() {
            let units = &self.p2l[b * upb as usize..(b + 1) * upb as usize];
            let valid = units.iter().filter(|&&l| l != NO_LPN).count() as u32;
            assert_eq!(valid, blk.valid, "block {b}: valid count {} but {} units valid", blk.valid, valid);
            assert!(blk.written <= upb);
            assert!(
                units[blk.written as usize..].iter().all(|&l| l == NO_LPN),
                "block {b}: data beyond the write pointer"
            );
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
            match blk.state {
                BlockState::Free => assert!(blk.written == 0 && blk.valid == 0, "free block {b} not empty"),
                BlockState::Erasing => assert_eq!(blk.valid, 0, "block {b} erasing with valid data"),
                BlockState::Full => assert_eq!(blk.written, upb, "full block {b} not full"),
                BlockState::Active => assert!(blk.written < upb),
            }
            total_valid += blk.valid as u64;
        }
        assert_eq!(total_valid, mapped_to_flash, "valid units != logical pages mapped to flash");
        let mut bucketed = 0usize;
        for plane in 0..self.planes.len() as u32 {
            for v in 0..=upb {
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
        for (p, plane) in self.planes.iter().enumerate() {
            let range = p as u32 * self.blocks_per_plane..(p as u32 + 1) * self.blocks_per_plane;
            for &b in &plane.free {
                assert!(range.contains(&b), "plane {p} free list holds foreign block {b}");
                assert_eq!(self.blocks[b as usize].state, BlockState::Free);
            }
            let count = |s| range.clone().filter(|&b| self.blocks[b as usize].state == s).count();
            assert_eq!(count(BlockState::Free), plane.free.len(), "plane {p}: free list out of sync");
            assert_eq!(count(BlockState::Erasing), plane.erasing as usize, "plane {p}: erasing count");
            let actives = plane
                .user_active
                .iter()
                .chain(plane.gc_active.iter())
                .chain(plane.map_active.iter())
                .chain(plane.map_gc_active.iter());
            assert_eq!(count(BlockState::Active), actives.clone().count(), "plane {p}: active blocks");
            for &b in actives {
                assert!(range.contains(&b) && self.blocks[b as usize].state == BlockState::Active);
            }
        }
    }
}
