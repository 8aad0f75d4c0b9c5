//! The page-mapping FTL's state: where each logical page's data is, which tenant wrote each
//! physical unit, and the state of every block. It changes instantly; the device (`device/ssd/`)
//! decides when the flash does the work and for how long.
//!
//! # Model
//! The flash is a flat array of mapping units (`Ppa` = block × units per block + unit). The L2P
//! table (`l2p`, a `u32` per logical page) names a logical page's unit, a write-buffer slot
//! (`BUF_FLAG`) or nothing (`UNMAPPED`); the P2L table (`p2l`) names each unit's logical page, a
//! unit of a translation page (`MAP_BIT`) or nothing (`NO_LPN`); the ownership ledger (`owner`)
//! names the tenant that wrote each unit. A logical page's plane is fixed by channel-first
//! striping by flash page ([`Ftl::plane_of`]); inside the plane each write stream has one open
//! block. The work is split by role:
//! - `core/alloc.rs`: writes and invalidation — host programs, padding, buffered data, TRIM, and
//!   which open block each write goes to ([`Ftl::open_block`], the placement seam);
//! - `core/gc.rs`: GC — when a plane is cleaned, relocation of its victim's valid units, the
//!   erase's end;
//! - `core/victim.rs`: which block GC cleans (greedy over the valid-count buckets of
//!   `ftl/buckets.rs`, cost-benefit, and MQSim's randomized greedy, random and FIFO);
//! - `core/map.rs`: DFTL's translation pages — the directory (`gtd`), their own open blocks;
//! - `core/invariants.rs`: [`Ftl::check_invariants`], that all of the above agree.
//!
//! # Example
//! 4 KiB units in 16 KiB pages (4 units a page): logical page 13 is in stripe 13 >> 2 = 3, so it
//! lives in plane `stripe_to_plane[3 % planes]`. Rewriting it invalidates its old unit (that
//! block's valid count drops by one, and a full block moves down one bucket), takes the next unit
//! of the plane's open host block, and points L2P[13] and P2L[new unit] at each other. When that
//! block is full, the next write opens a free one; if the plane's free (plus being-erased) blocks
//! are then at or below the threshold, GC cleans victims in the plane before the write goes on.
//!
//! # Parameters ([`FtlParams`])
//! `logical_units` (mapping units exported to the host), `victim_policy` (greedy,
//! cost-benefit, rga, random, fifo; the draws' seed and RGA's sample size are set apart, by
//! [`Ftl::set_victim_draws`]), `gc_threshold_blocks` (free + erasing blocks per plane at which GC starts, at
//! least 2), `map_entries_per_page` (DFTL's L2P entries per translation page; `None`: the whole
//! table in DRAM). Sources: page mapping as in Agrawal et al., "Design Tradeoffs for SSD
//! Performance" (USENIX ATC 2008); DFTL as in Gupta et al. (ASPLOS 2009); cost-benefit as in
//! Rosenblum & Ousterhout's LFS cleaner.

mod alloc;
mod gc;
mod invariants;
mod map;
mod state;
pub use state::StateError;
mod victim;

use super::buckets::ValidBuckets;
use crate::engine::{prefetch, SimRng};
use crate::flash::Geometry;
use crate::units::{BufferSlot, Lpn, MapPage, Placement, PlaneId, Ppa, TenantId};
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
        /// Randomized greedy (MQSim's RGA): the fewest valid units among `d` full blocks drawn
        /// at random (`core/victim.rs`).
        Rga = "rga",
        /// Uniform among the full blocks with something to reclaim (MQSim's RANDOM / RANDOM_P).
        Random = "random",
        /// The block filled longest ago that has something to reclaim (MQSim's FIFO).
        Fifo = "fifo",
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
    /// The host write placements (FDP handles, Streams): one by default. On a zoned drive,
    /// one per zone: placement *z* is zone *z*.
    pub placements: Placements,
    /// A zoned namespace's flash ([`ZonedFtl`]): no GC; `None` for a conventional drive.
    pub zoned: Option<ZonedFtl>,
}

/// The FTL of a zoned namespace (NVMe ZNS): zone *z* is placement *z*, whose open block in each
/// plane takes the zone's data there, so a block only ever holds one zone's data; the zone's
/// LBA range stripes over every plane as any logical page does ([`Ftl::plane_of`]), and a zone
/// of capacity `planes × k` blocks fills exactly `k` blocks in every plane. There is no
/// garbage collection: a Zone Reset unmaps the zone and erases its blocks
/// ([`Ftl::erase_zone`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZonedFtl {
    /// Mapping units of LBA space per zone (the zone size).
    pub zone_units: u64,
    /// Writable mapping units per zone (the zone capacity): `zone_planes × k` blocks' worth.
    pub capacity_units: u64,
    /// Planes a zone stripes over, dividing the drive's: zone *z* stripes by flash page over
    /// plane group `z mod (planes / zone_planes)`, the groups taken in order of static
    /// striping (channel first), so a group of `channels` planes has one in every channel.
    pub zone_planes: u32,
}

impl ZonedFtl {
    /// Most zones × planes a zoned FTL keeps open blocks for (8 bytes each, and a write-buffer
    /// queue each): 2^20, 8 MiB of open-block table.
    pub const MAX_ZONE_PLANES: u64 = 1 << 20;
}

/// The placements a drive keeps apart (`ftl/core/alloc.rs`): each has its own open host block
/// in every plane; a *persistent* one (an FDP persistently isolated handle) also has its own GC
/// block, so GC never mixes its data with another placement's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placements {
    /// Per placement: GC keeps its data apart. Empty: one placement (no data placement).
    pub persistent: Vec<bool>,
}

impl Placements {
    /// The most placements a drive keeps apart (a unit's placement is one byte).
    pub const MAX: usize = 256;

    /// `n` placements, none persistent.
    pub fn shared(n: usize) -> Placements {
        Placements { persistent: if n > 1 { vec![false; n] } else { Vec::new() } }
    }
    pub fn count(&self) -> usize {
        self.persistent.len().max(1)
    }
    pub fn is_persistent(&self, p: Placement) -> bool {
        self.persistent.get(p.index()).copied().unwrap_or(false)
    }
    /// Open blocks per plane beyond the one host and one GC block every drive has.
    fn extra_open_blocks(&self) -> u32 {
        (self.count() - 1) as u32 + self.persistent.iter().filter(|&&p| p).count() as u32
    }
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TenantGc {
    /// Valid units GC copied that this tenant had written (the GC it suffered).
    pub units_moved: u64,
    /// Units of erased blocks this tenant had written (divide by units per block for erases).
    pub erased_units: u64,
    /// Valid units GC copied — anyone's — while cleaning a plane this tenant's write pushed to
    /// its GC threshold (the GC it caused: the write that opened a block and so started GC).
    #[serde(default)]
    pub caused_units_moved: u64,
}

/// Host writes and GC of one placement (FDP handle or stream).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PlacementGc {
    /// Units of host data programmed through this placement.
    pub host_units: u64,
    /// Valid units of this placement's data GC copied (suffered).
    pub units_moved: u64,
    /// Valid units GC copied — of any placement — while cleaning a plane this placement's
    /// write pushed to its GC threshold (caused).
    pub caused_units_moved: u64,
    /// Open blocks (reclaim units) this placement filled and closed.
    pub blocks_filled: u64,
    /// Open blocks closed before they were full ([`Ftl::close_host_block`]: an FDP Reclaim
    /// Unit Handle Update).
    #[serde(default)]
    pub blocks_closed_early: u64,
}

/// Drive-wide FTL counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
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

impl FtlStats {
    /// Every unit programmed: host data, GC's copies, padding and translation pages.
    pub fn units_programmed(&self) -> u64 {
        self.host_units_programmed + self.gc_units_programmed + self.padding_units_programmed + self.map_units_programmed
    }
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
    /// The placement whose data the block holds; `MIXED` for the shared GC block, which holds
    /// what GC moved of every non-persistent placement.
    placement: u16,
}

/// `Block::placement` of a block that may hold several placements' data.
const MIXED: u16 = u16::MAX;

#[derive(Clone, Debug, Default)]
struct Plane {
    free: VecDeque<u32>,
    /// The open host block of each placement.
    host_open: Vec<Option<u32>>,
    gc_active: Option<u32>,
    /// The open GC block of each persistent placement (`None` for the others).
    placement_gc: Vec<Option<u32>>,
    /// Open block for translation pages written by map flushes.
    map_active: Option<u32>,
    /// Open block for translation pages GC copies (apart from `map_active`, as GC's data copies
    /// are apart from host writes, so GC never fills the block a map flush just opened).
    map_gc_active: Option<u32>,
    erasing: u32,
    /// The placement and tenant of the write that last opened a block here, whose GC then is
    /// theirs (`NO_CAUSE` / `MAP_OWNER` for a map flush).
    cause: (u16, u16),
}

/// `Plane::cause`'s placement when a translation-page write started GC.
const NO_CAUSE: u16 = u16::MAX;

/// Which open block of a plane a write goes to (see [`Ftl::open_block`], the placement seam).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// Host data of a placement.
    Host(Placement),
    /// What GC moves of the non-persistent placements' data.
    Gc,
    /// What GC moves of a persistent placement's data.
    PlacementGc(Placement),
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
            Stream::Host(_) | Stream::Map => GC_RESERVE_BLOCKS,
            Stream::Gc | Stream::PlacementGc(_) | Stream::MapGc => 0,
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
    /// Per placement: host writes and GC.
    placement_gc: Vec<PlacementGc>,
    /// GC moves by cause and victim: entry `cause × placements + moved` counts units of
    /// placement `moved`'s data GC copied in planes placement `cause` pushed to GC.
    gc_moves: Vec<u64>,
    /// Each physical unit's placement (empty with one placement: all 0; and on a zoned drive,
    /// where a unit's placement is its block's).
    unit_placement: Vec<u8>,
    /// Zoned: the blocks holding each zone's data (opened for it since its last reset).
    zone_blocks: Vec<Vec<u32>>,
    /// Zoned: units allocated to each zone in each plane since its reset, zone-major.
    zone_plane_units: Vec<u32>,
    /// When kept ([`Ftl::log_moves`]): every unit GC moved, (old, new), in the order moved.
    move_log: Option<Vec<(Ppa, Ppa)>>,
    /// Zoned, with zones over fewer planes than the drive's: (flash-page stripes per zone,
    /// planes per zone, plane groups), for [`Ftl::plane_of`].
    zone_stripe: Option<(u32, u32, u32)>,
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
    /// Draws of the random victim policies (rga, random), seeded by [`Ftl::set_victim_draws`].
    victim_rng: SimRng,
    /// RGA: blocks drawn per victim choice (d).
    rga_candidates: u32,
    /// Reused by the scanning victim policies: the plane's candidate blocks.
    victim_scratch: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FtlError {
    #[error(
        "over-provisioning too low for garbage collection to make progress: each plane holds up to \
         {logical_blocks} blocks of logical data{} in {blocks} blocks, but GC needs {needed} spare blocks \
         (threshold {threshold} + 3 for the open blocks and GC's reserve{}{})",
        if *.dftl { " and translation pages" } else { "" },
        if *.dftl { " + 2 open translation blocks" } else { "" },
        if *.placements > 0 { format!(" + {} open blocks of the further placements", .placements) } else { String::new() }
    )]
    OverprovisioningTooLow { logical_blocks: u64, blocks: u32, needed: u32, threshold: u32, dftl: bool, placements: u32 },
    #[error("{0} data placements: the drive keeps at most 256 apart")]
    TooManyPlacements(usize),
    #[error("the logical space is empty")]
    NoLogicalSpace,
    #[error("the drive has 2^31 or more mapping units: use a larger unit size")]
    TooLarge,
    /// A zoned FTL whose zones do not fit its flash, or that is not one.
    #[error("{0}")]
    Zoned(String),
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
        if let Some(z) = params.zoned {
            return Self::check_zoned(geo, params, z);
        }
        if params.placements.count() > Placements::MAX {
            return Err(FtlError::TooManyPlacements(params.placements.count()));
        }
        // Threshold, the open host and GC blocks, GC's reserve; the two open translation
        // blocks (map flushes, GC's copies) with DFTL; each further placement's open blocks.
        let placements = params.placements.extra_open_blocks();
        let needed = params.gc_threshold_blocks + 3 + 2 * (map_pages > 0) as u32 + placements;
        if logical_blocks + needed as u64 > geo.blocks_per_plane as u64 {
            return Err(FtlError::OverprovisioningTooLow {
                logical_blocks,
                blocks: geo.blocks_per_plane,
                needed,
                threshold: params.gc_threshold_blocks,
                dftl: map_pages > 0,
                placements,
            });
        }
        Ok(())
    }

    /// A zoned FTL's rules: a placement per zone, whole blocks in every plane per zone, every
    /// zone's blocks at once in the flash, no translation pages.
    fn check_zoned(geo: &Geometry, params: &FtlParams, z: ZonedFtl) -> Result<(), FtlError> {
        let zones = params.placements.count() as u64;
        let bad = |m: String| Err(FtlError::Zoned(m));
        if z.zone_planes == 0 || geo.planes() % z.zone_planes != 0 {
            return bad(format!("zones over {} planes on a drive of {}: expected a divisor", z.zone_planes, geo.planes()));
        }
        let layout = z.zone_planes as u64 * geo.units_per_block() as u64;
        let groups = (geo.planes() / z.zone_planes) as u64;
        if z.zone_units == 0 || z.capacity_units == 0 || z.capacity_units > z.zone_units {
            return bad(format!("zones of {} units with a capacity of {}: expected 1 <= capacity <= size", z.zone_units, z.capacity_units));
        }
        if z.capacity_units % layout != 0 {
            return bad(format!("a zone's capacity of {} units is not whole blocks in each of its planes ({layout} units)", z.capacity_units));
        }
        if z.zone_units % (z.zone_planes as u64 * geo.units_per_page() as u64) != 0 {
            return bad(format!("a zone of {} units is not whole flash pages in each of its planes", z.zone_units));
        }
        if params.logical_units != zones * z.zone_units {
            return bad(format!("{} logical units for {zones} zones of {} units", params.logical_units, z.zone_units));
        }
        if params.map_entries_per_page.is_some() {
            return bad("a zoned drive maps zones to blocks; it keeps no translation pages (mapping = \"full\")".into());
        }
        if zones * geo.planes() as u64 > ZonedFtl::MAX_ZONE_PLANES {
            return bad(format!("{zones} zones over {} planes: at most {} zone-planes", geo.planes(), ZonedFtl::MAX_ZONE_PLANES));
        }
        let per_plane = zones.div_ceil(groups) * (z.capacity_units / layout);
        if per_plane > geo.blocks_per_plane as u64 {
            return bad(format!("{zones} zones need {per_plane} blocks in every plane; the flash has {}", geo.blocks_per_plane));
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
            Block { state: BlockState::Free, valid: 0, written: 0, erase_count: 0, last_write_seq: 0, map: false, placement: 0 };
            nblocks
        ];
        let n = params.placements.count();
        // A zoned FTL has no GC: no GC attribution by placement, and a block's zone is the
        // block's placement (a zone's data never leaves its blocks).
        let gc_placements = if params.zoned.is_some() { 0 } else { n };
        let planes_v = (0..planes)
            .map(|p| Plane {
                free: (p * geo.blocks_per_plane..(p + 1) * geo.blocks_per_plane).collect(),
                host_open: vec![None; n],
                placement_gc: vec![None; n],
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
            placement_gc: vec![PlacementGc::default(); n],
            gc_moves: vec![0; gc_placements * gc_placements],
            unit_placement: if gc_placements > 1 { vec![0; total_units] } else { Vec::new() },
            zone_blocks: vec![Vec::new(); if params.zoned.is_some() { n } else { 0 }],
            zone_plane_units: vec![0; if params.zoned.is_some() { n * planes as usize } else { 0 }],
            move_log: None,
            zone_stripe: params.zoned.filter(|z| z.zone_planes < planes).map(|z| {
                ((z.zone_units / upp as u64) as u32, z.zone_planes, planes / z.zone_planes)
            }),
            pending_gc: VecDeque::new(),
            gc_scratch: Vec::new(),
            map_entries: params.map_entries_per_page.unwrap_or(0),
            gtd: vec![UNMAPPED; map_pages as usize],
            gc_map_updates: Vec::new(),
            map_update_stamp: vec![0; map_pages as usize],
            relocations: 0,
            map_gc: TenantGc::default(),
            victim_rng: victim::rng(0),
            rga_candidates: victim::default_rga_candidates(geo.blocks_per_plane),
            victim_scratch: Vec::new(),
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
    /// The placements this drive keeps apart.
    pub fn placements(&self) -> &Placements {
        &self.params.placements
    }
    /// Host writes and GC of placement `p`.
    pub fn placement_gc(&self, p: Placement) -> &PlacementGc {
        &self.placement_gc[p.index()]
    }
    /// Units of placement `moved`'s data GC copied in planes placement `cause` pushed to GC.
    pub fn gc_moves(&self, cause: Placement, moved: Placement) -> u64 {
        if self.gc_moves.is_empty() {
            return 0;
        }
        self.gc_moves[cause.index() * self.params.placements.count() + moved.index()]
    }
    /// Keeps a log of GC's moves from now on (for a host FTL, whose GC is I/O it issues):
    /// [`Ftl::take_moves`] drains it.
    pub fn log_moves(&mut self) {
        self.move_log.get_or_insert_with(Vec::new);
    }
    /// The first `n` moves logged, (old unit, new unit) in the order GC made them, into `out`.
    pub fn take_moves(&mut self, n: usize, out: &mut Vec<(Ppa, Ppa)>) {
        if let Some(log) = &mut self.move_log {
            out.extend(log.drain(..n.min(log.len())));
        }
    }
    /// Blocks holding zone `zone`'s data (0 on a conventional drive).
    pub fn zone_block_count(&self, zone: Placement) -> usize {
        self.zone_blocks.get(zone.index()).map_or(0, Vec::len)
    }
    /// Units zone `zone` can still program in `plane`, one of its group's, within its
    /// capacity's blocks there (`capacity / zone planes` units per plane; 0 on a conventional
    /// drive). A page padded before it was full (a flush) takes room the zone's later data
    /// would have had.
    pub fn zone_room(&self, zone: Placement, plane: PlaneId) -> u32 {
        let Some(z) = self.params.zoned else { return 0 };
        let per_plane = (z.capacity_units / z.zone_planes as u64) as u32;
        let used = self.zone_plane_units[zone.index() * self.planes.len() + plane.index()];
        per_plane.saturating_sub(used)
    }
    /// The zoned FTL's layout, on a zoned drive.
    pub fn zoned(&self) -> Option<ZonedFtl> {
        self.params.zoned
    }
    /// The placement whose data physical unit `ppa` holds (0 with one placement).
    pub fn placement_of(&self, ppa: Ppa) -> Placement {
        Placement(self.unit_placement.get(ppa.index()).copied().unwrap_or(0) as u16)
    }
    /// Bytes of the model's own mapping state (L2P, P2L, ownership ledger, block table).
    pub fn memory_bytes(&self) -> (u64, u64) {
        let l2p = (self.l2p.len() * 4) as u64;
        let other = (self.p2l.len() * 4
            + self.gtd.len() * 4
            + self.owner.len() * 2
            + self.unit_placement.len()
            + self.blocks.len() * std::mem::size_of::<Block>()) as u64;
        (l2p, other)
    }

    fn block_of(&self, ppa: Ppa) -> u32 {
        match self.upb_shift {
            Some(s) => ppa.0 >> s,
            None => ppa.0 / self.units_per_block,
        }
    }

    /// The plane that stores `lpn` (static channel-first striping by flash page; on a zoned
    /// drive whose zones stripe over fewer planes, over its zone's plane group).
    pub fn plane_of(&self, lpn: Lpn) -> PlaneId {
        let stripe = lpn.0 >> self.upp_shift;
        match self.zone_stripe {
            None => self.stripe_to_plane[stripe as usize % self.stripe_to_plane.len()],
            Some((zone_stripes, n, groups)) => {
                let (zone, within) = (stripe / zone_stripes, stripe % zone_stripes);
                self.stripe_to_plane[((zone % groups) * n + within % n) as usize]
            }
        }
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

    /// Writes `lpn` with no timing, as preconditioning does: GC runs and its erases complete at once.
    pub fn write_untimed(&mut self, lpn: Lpn, owner: u16, placement: Placement) {
        let plane = self.plane_of(lpn);
        self.program_host(plane, lpn, owner, placement);
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
        self.placement_gc.fill(PlacementGc::default());
        self.gc_moves.fill(0);
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

    /// Free blocks in `plane` (not counting blocks being erased).
    pub fn free_blocks(&self, plane: PlaneId) -> usize {
        self.planes[plane.index()].free.len()
    }

}
