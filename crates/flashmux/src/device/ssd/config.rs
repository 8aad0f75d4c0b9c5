//! The SSD's configuration and its rules: what a drive needs to be built, checked in one place
//! ([`SsdConfig::validate`]) that the scenario loader and [`super::Ssd::new`] both call, so a
//! configuration made in code meets the same rules as one read from a file. Messages name the
//! scenario file's keys (`device.buffer.size: ...`).
//!
//! The FTL checks its own parameters (enough spare blocks for GC to make progress) when it is
//! built ([`crate::ftl::Ftl::check_params`]).

use crate::flash::{Geometry, Multiplane, Timing};
use crate::ftl::{FtlParams, MappingConfig, VictimPolicy};
use super::placement::PlacementMode;
use crate::units::Nanos;
use serde::Serialize;

/// The largest `device.ftl.overprovisioning`: eleven times as much flash as logical space.
pub const MAX_OVERPROVISIONING: f64 = 10.0;

/// Configuration of the SSD back end.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SsdConfig {
    pub geometry: Geometry,
    pub timing: Timing,
    /// Spare capacity as a fraction of the logical capacity: physical = logical × (1 + op).
    pub overprovisioning: f64,
    pub victim_policy: VictimPolicy,
    pub gc_threshold_blocks: u32,
    /// DRAM write-buffer capacity in mapping units.
    pub buffer_units: u32,
    /// Programs that may be queued on one die at once.
    pub program_queue_depth: u32,
    /// When the write buffer is drained to flash.
    pub flush: FlushPolicy,
    /// Host link (PCIe/SATA) bandwidth per direction, bytes per second.
    pub host_link_bytes_per_sec: u64,
    /// How the controller holds the L2P table.
    pub mapping: MappingConfig,
    /// The write buffer is lost on a power failure (no power-loss protection), so a flush must
    /// program it. `false`: protected, a flush costs the command overhead only (and hashes as
    /// absent, as before the setting existed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub volatile_write_cache: bool,
    /// An open-channel drive whose FTL runs on the host, like Linux pblk (docs/MODEL.md §1b):
    /// the write buffer is pblk's ring write buffer in host memory, the "controller" is pblk's
    /// submission path on host cores, and the host scheduler may ask the FTL ([`crate::device::FtlView`]).
    /// Hashes as absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub open_channel: bool,
    /// The controller runs the dies of a chip independently (the default). `false`: one
    /// command per chip at a time, as MQSim's transaction scheduler does (`device/ssd/array.rs`).
    /// Hashes as absent when true.
    #[serde(skip_serializing_if = "is_true")]
    pub interleave_dies: bool,
    /// GC moves pages with on-die copy-back (the default). `false`: each moved page is read
    /// out over the channel and written back over it, as MQSim with `Use_Copyback_for_GC =
    /// false` (`device/ssd/array.rs`). Hashes as absent when true.
    #[serde(skip_serializing_if = "is_true")]
    pub gc_copyback: bool,
    /// A command is issued to a die only when the die's channel is idle, so data waiting to
    /// leave over the channel goes before new commands, as MQSim's PHY orders them
    /// (`device/ssd/array.rs`). Hashes as absent when false (the default: earliest free gap).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub data_out_first: bool,
    /// Which pages one multi-plane host program may take: any (the default), or only those at
    /// the same page index, as MQSim (`device/ssd/flusher.rs`). Hashes as absent when `Any`.
    #[serde(skip_serializing_if = "is_any")]
    pub multiplane: Multiplane,
    /// RGA victims: blocks drawn per choice (`None`: MQSim's ⌊log2(blocks per plane)⌋; only
    /// with the `rga` victim policy). Hashes as absent when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc_rga_candidates: Option<u32>,
    /// Throughput of the controller's ECC engines (`device.timing.encode_rate` and
    /// `decode_rate`); unlimited by default, and then hashes as absent.
    #[serde(skip_serializing_if = "EccRates::unlimited")]
    pub ecc: EccRates,
    /// The write buffer's DRAM time (`device.buffer.dram_access`, `dram_rate`); none by default,
    /// and then hashes as absent.
    #[serde(skip_serializing_if = "DramTiming::is_free")]
    pub dram: DramTiming,
    /// Data placement the drive offers (`[device.fdp]`, `[device.streams]`); none by default,
    /// and then hashes as absent.
    #[serde(skip_serializing_if = "PlacementMode::is_none")]
    pub placement: PlacementMode,
    /// FDP: the host updates a handle's reclaim unit (I/O Management Send, Reclaim Unit Handle
    /// Update) after every this many bytes written through it (`[device.fdp] ru_update_every`);
    /// `None`: never, and then hashes as absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ru_update_every: Option<u64>,
    /// A zoned namespace (`[device.zns]`) instead of a conventional one; hashes as absent when
    /// `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zns: Option<ZnsLayout>,
    /// The scenario's seed, from which the drive derives its own random streams (GC's victim
    /// draws under `rga` and `random`): the simulator sets it when it builds the drive
    /// (`sim/mod.rs`, so a seed given on the command line reaches it). Not hashed here: the
    /// scenario's seed is.
    #[serde(skip)]
    pub seed: u64,
}

/// A zoned namespace's layout (`[device.zns]`), in bytes; the zone state machine counts in
/// LBAs of [`ZNS_LBA_BYTES`] ([`ZnsLayout::state_machine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ZnsLayout {
    pub zones: u32,
    /// Bytes of LBA space per zone (ZSZE).
    pub zone_bytes: u64,
    /// Writable bytes at the start of each zone (ZCAP), at most `zone_bytes`.
    pub capacity_bytes: u64,
    /// Most zones open at once; `None` for no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_open: Option<u32>,
    /// Most zones active (open or closed) at once; `None` for no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_active: Option<u32>,
    /// Most bytes one Zone Append writes (ZASL); `None` for no limit but the zone's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub append_limit_bytes: Option<u64>,
    /// Planes each zone stripes over (dividing the drive's); `None`: every plane. Zone *z*
    /// uses plane group `z mod (planes / zone_planes)`, groups taken in the drive's
    /// channel-first striping order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone_planes: Option<u32>,
    /// The controller's time per Zone Reset before its erases start (its zone's mapping and
    /// state made persistent): a reset of an empty zone takes this, a written zone's this and
    /// its erases.
    pub reset_overhead: Nanos,
    /// A Finish of a partly written zone writes the rest of its capacity with padding, as the
    /// ZN540 does (its time grows with what is left); `false`: Finish changes the state only.
    pub finish_pads: bool,
}

/// The zoned namespace's logical block: 512 bytes, the device's sector.
pub const ZNS_LBA_BYTES: u64 = 512;

impl ZnsLayout {
    /// The zone state machine's parameters, in LBAs.
    pub fn state_machine(&self) -> crate::device::zns::ZnsConfig {
        use crate::device::zns::{ZnsConfig, ZoneGeometry};
        ZnsConfig {
            geometry: ZoneGeometry {
                zones: self.zones,
                zone_size: self.zone_bytes / ZNS_LBA_BYTES,
                zone_capacity: self.capacity_bytes / ZNS_LBA_BYTES,
            },
            max_open: self.max_open,
            max_active: self.max_active,
            zone_append_limit: self.append_limit_bytes.map(|b| b / ZNS_LBA_BYTES),
        }
    }

    /// Planes a zone stripes over on `g`.
    pub fn planes(zone_planes: Option<u32>, g: &Geometry) -> u32 {
        zone_planes.unwrap_or(g.planes())
    }

    /// The flash layout unit: a block in each of a zone's planes. A zone's size and capacity
    /// are whole layout units, so a full zone is `capacity / layout` blocks in each.
    pub fn layout_unit(zone_planes: Option<u32>, g: &Geometry) -> u64 {
        Self::planes(zone_planes, g) as u64 * g.pages_per_block as u64 * g.page_bytes as u64
    }

    /// Most zones of `capacity_bytes` the flash of `g` holds at once: as many per plane group
    /// as its blocks hold, in every group.
    pub fn max_zones(zone_planes: Option<u32>, g: &Geometry, capacity_bytes: u64) -> u64 {
        let groups = (g.planes() / Self::planes(zone_planes, g).max(1)) as u64;
        groups * (g.blocks_per_plane as u64 / (capacity_bytes / Self::layout_unit(zone_planes, g)).max(1))
    }

    /// The rules of a zoned drive on `g`; errors name `device.zns.<key>`.
    pub fn validate(&self, g: &Geometry) -> Result<(), String> {
        if let Some(n) = self.zone_planes {
            if n == 0 || n > g.planes() || g.planes() % n != 0 {
                return Err(format!(
                    "device.zns.zone_planes: {n}: expected a divisor of the drive's {} planes (a zone stripes over that many, zones taking the plane groups in turn)",
                    g.planes()
                ));
            }
        }
        let layout = Self::layout_unit(self.zone_planes, g);
        let unit = format!(
            "the flash layout unit, a block in each of a zone's planes: {} planes x {} bytes = {layout} bytes",
            Self::planes(self.zone_planes, g),
            g.pages_per_block as u64 * g.page_bytes as u64
        );
        if self.zone_bytes == 0 || self.zone_bytes % layout != 0 {
            return Err(format!("device.zns.zone_size: {} bytes is not a multiple of {unit}", self.zone_bytes));
        }
        if self.capacity_bytes == 0 || self.capacity_bytes % layout != 0 {
            return Err(format!("device.zns.zone_capacity: {} bytes is not a multiple of {unit}", self.capacity_bytes));
        }
        if self.capacity_bytes > self.zone_bytes {
            return Err(format!(
                "device.zns.zone_capacity: {} bytes is above zone_size = {} bytes: expected zone_capacity <= zone_size",
                self.capacity_bytes, self.zone_bytes
            ));
        }
        let fit = Self::max_zones(self.zone_planes, g, self.capacity_bytes);
        if self.zones == 0 || self.zones as u64 > fit {
            return Err(format!(
                "device.zns.zones: {} zones of {} bytes of capacity: the flash holds 1 to {fit} ({} blocks per plane, {} per zone in each of its planes)",
                self.zones,
                self.capacity_bytes,
                g.blocks_per_plane,
                self.capacity_bytes / layout
            ));
        }
        let zone_planes = self.zones as u64 * g.planes() as u64;
        if zone_planes > crate::ftl::ZonedFtl::MAX_ZONE_PLANES {
            return Err(format!(
                "device.zns.zones: {} zones over {} planes: the model keeps an open block per zone and plane, at most {} (use larger zones)",
                self.zones,
                g.planes(),
                crate::ftl::ZonedFtl::MAX_ZONE_PLANES
            ));
        }
        if let Some(a) = self.append_limit_bytes {
            if a == 0 || a % ZNS_LBA_BYTES != 0 {
                return Err(format!(
                    "device.zns.zone_append_limit: {a} bytes: expected a multiple of {ZNS_LBA_BYTES} bytes (an LBA) above zero"
                ));
            }
        }
        self.state_machine().validate()
    }
}

/// The controller's ECC engines as a throughput limit (`device/ssd/array.rs`): the data of every
/// page the controller programs passes the encoder on its way to the channel, and the data of
/// every page it reads from flash passes the decoder after the channel; each engine is one
/// resource shared by all channels. `None`: no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct EccRates {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encode_bytes_per_sec: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_bytes_per_sec: Option<u64>,
}

impl EccRates {
    pub const UNLIMITED: EccRates = EccRates { encode_bytes_per_sec: None, decode_bytes_per_sec: None };
    pub fn unlimited(&self) -> bool {
        *self == Self::UNLIMITED
    }
}

/// The write buffer's DRAM as one channel serving one access at a time (`device/ssd/flusher.rs`):
/// the data a write brings into the buffer is written to DRAM in one access of `access` plus
/// its bytes at `bytes_per_sec`, and the write completes when that access ends. Zero and
/// `None`: no DRAM time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DramTiming {
    #[serde(skip_serializing_if = "is_zero")]
    pub access: Nanos,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_sec: Option<u64>,
}

impl DramTiming {
    pub const FREE: DramTiming = DramTiming { access: Nanos::ZERO, bytes_per_sec: None };
    pub fn is_free(&self) -> bool {
        *self == Self::FREE
    }
}

fn is_zero(n: &Nanos) -> bool {
    *n == Nanos::ZERO
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_any(m: &Multiplane) -> bool {
    *m == Multiplane::Any
}

impl SsdConfig {
    /// A drive of `geometry` and `timing` with the given GC threshold, spare area, write buffer
    /// and host link, and every other setting at its default: greedy victims, the whole L2P
    /// table in DRAM, a power-loss-protected buffer flushed page by page with two programs
    /// queued per die, dies interleaved, GC by on-die copy-back, multi-plane programs of any
    /// pages, unlimited ECC engines, no DRAM time, commands issued at the channel's earliest
    /// gap, the default seed. Presets and tests change what differs with struct update syntax.
    pub fn new(
        geometry: Geometry,
        timing: Timing,
        gc_threshold_blocks: u32,
        overprovisioning: f64,
        buffer_units: u32,
        host_link_bytes_per_sec: u64,
    ) -> SsdConfig {
        SsdConfig {
            geometry,
            timing,
            overprovisioning,
            victim_policy: VictimPolicy::Greedy,
            gc_threshold_blocks,
            buffer_units,
            program_queue_depth: 2,
            flush: FlushPolicy::Page,
            host_link_bytes_per_sec,
            mapping: MappingConfig::Full,
            volatile_write_cache: false,
            open_channel: false,
            interleave_dies: true,
            gc_copyback: true,
            multiplane: Multiplane::Any,
            gc_rga_candidates: None,
            ecc: EccRates::UNLIMITED,
            dram: DramTiming::FREE,
            data_out_first: false,
            placement: PlacementMode::None,
            ru_update_every: None,
            zns: None,
            seed: crate::config::DEFAULT_SEED,
        }
    }

    /// Logical mapping units exported: physical / (1 + op), rounded down to whole stripes of
    /// one flash page per plane so every plane holds the same share.
    pub fn logical_units(&self) -> u64 {
        let g = &self.geometry;
        if let Some(z) = &self.zns {
            // A zoned namespace exports its zones' LBA space (zone size, not capacity).
            return z.zones as u64 * z.zone_bytes / g.unit_bytes as u64;
        }
        let stripe = g.units_per_page() as u64 * g.planes() as u64;
        let raw = (g.total_units() as f64 / (1.0 + self.overprovisioning)).floor() as u64;
        raw / stripe * stripe
    }

    /// The FTL's parameters for this drive.
    pub fn ftl_params(&self) -> FtlParams {
        FtlParams {
            logical_units: self.logical_units(),
            victim_policy: self.victim_policy,
            gc_threshold_blocks: self.gc_threshold_blocks,
            map_entries_per_page: self.mapping.entries_per_page(self.geometry.page_bytes),
            placements: match &self.zns {
                Some(z) => crate::ftl::Placements::shared(z.zones as usize),
                None => self.placement.placements(),
            },
            zoned: self.zns.map(|z| crate::ftl::ZonedFtl {
                zone_units: z.zone_bytes / self.geometry.unit_bytes as u64,
                capacity_units: z.capacity_bytes / self.geometry.unit_bytes as u64,
                zone_planes: ZnsLayout::planes(z.zone_planes, &self.geometry),
            }),
        }
    }

    /// Checks the drive's rules; the error names the key and what was expected.
    pub fn validate(&self) -> Result<(), String> {
        self.geometry.validate().map_err(|e| format!("device.geometry: {e}"))?;
        Self::check_overprovisioning(self.overprovisioning)?;
        if self.open_channel && self.mapping != MappingConfig::Full {
            return Err("device.ftl.mapping: an open-channel drive's FTL runs on the host (pblk), which keeps the whole L2P table in host memory: use mapping = \"full\"".into());
        }
        if let MappingConfig::Dftl { entry_bytes, .. } = self.mapping {
            Self::check_entry_size(entry_bytes, self.geometry.page_bytes)?;
        }
        Self::check_gc_threshold(self.gc_threshold_blocks)?;
        self.check_rga_candidates()?;
        if self.program_queue_depth == 0 {
            return Err("device.buffer.program_queue_depth: must be at least 1 (got 0)".into());
        }
        self.flush.validate()?;
        self.placement.validate()?;
        if let Some(z) = &self.zns {
            z.validate(&self.geometry)?;
            if self.open_channel {
                return Err("device.zns: an open-channel drive's FTL runs on the host; a zoned namespace is the drive's: use mode = \"ssd\"".into());
            }
            if !self.placement.is_none() {
                return Err("device.zns: a zoned namespace places data by zone: it takes no [device.fdp] or [device.streams]".into());
            }
            if self.mapping != MappingConfig::Full {
                return Err("device.ftl.mapping: a zoned drive maps zones to erase blocks, a small table its DRAM holds: use mapping = \"full\"".into());
            }
        }
        if self.open_channel && !self.placement.is_none() {
            return Err("device.mode: an open-channel drive's FTL runs on the host (pblk), which places the data itself: FDP and Streams are a drive's, use mode = \"ssd\"".into());
        }
        // With a page per plane, a full buffer always has a plane with a whole page of dirty
        // units (pigeonhole: less than a page in every plane is at most planes × (units per
        // page − 1) units), so the flusher can always go on.
        let g = &self.geometry;
        let stripe_units = g.planes() * g.units_per_page();
        if self.buffer_units < stripe_units {
            return Err(format!(
                "device.buffer.size: {} bytes is too small: the write buffer must hold at least a flash page per plane ({} bytes) so the flusher can always fill a page",
                self.buffer_units as u64 * g.unit_bytes as u64,
                stripe_units as u64 * g.page_bytes as u64 / g.units_per_page() as u64
            ));
        }
        if self.logical_units() == 0 {
            return Err("device: the drive's capacity is smaller than one flash page per plane after over-provisioning".into());
        }
        Ok(())
    }

    /// `device.ftl.overprovisioning`: above 0 and at most [`MAX_OVERPROVISIONING`].
    pub fn check_overprovisioning(op: f64) -> Result<(), String> {
        if op > 0.0 && op <= MAX_OVERPROVISIONING {
            return Ok(());
        }
        Err(format!(
            "device.ftl.overprovisioning: {op} is out of range: expected a fraction of the logical capacity above 0 and at most {MAX_OVERPROVISIONING} (0.07 is 7% more flash than logical space, 10 is 11 times as much)"
        ))
    }

    /// `device.ftl.gc_threshold_blocks`: GC needs a free block for host writes and one for itself.
    pub fn check_gc_threshold(t: u32) -> Result<(), String> {
        if t >= 2 {
            return Ok(());
        }
        Err(format!(
            "device.ftl.gc_threshold_blocks: {t} is too low: at least 2 free blocks per plane are needed (one for host writes, one for GC)"
        ))
    }

    /// `device.ftl.gc_rga_candidates`: 1 to the blocks of a plane, and only for RGA victims.
    pub fn check_rga_candidates(&self) -> Result<(), String> {
        let Some(d) = self.gc_rga_candidates else { return Ok(()) };
        if self.victim_policy != VictimPolicy::Rga {
            return Err(format!(
                "device.ftl.gc_rga_candidates: only for gc_victim = \"rga\" (randomized greedy), not \"{}\"",
                self.victim_policy
            ));
        }
        let blocks = self.geometry.blocks_per_plane;
        if d == 0 || d > blocks {
            return Err(format!(
                "device.ftl.gc_rga_candidates: {d} blocks: expected 1 to the blocks of a plane ({blocks})"
            ));
        }
        Ok(())
    }

    /// `device.ftl.entry_size`: a translation page holds at least one L2P entry.
    pub fn check_entry_size(entry_bytes: u32, page_bytes: u32) -> Result<(), String> {
        if entry_bytes != 0 && entry_bytes <= page_bytes {
            return Ok(());
        }
        Err(format!("device.ftl.entry_size: {entry_bytes} bytes: expected 1 to the page size ({page_bytes} bytes)"))
    }
}

/// When dirty data leaves the write buffer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "policy")]
pub enum FlushPolicy {
    /// As soon as a plane has a flash page of dirty units (and its die can take a program).
    Page,
    /// Only once the buffer is `high` full (fraction of its slots dirty), then down to `low`:
    /// data stays longer in DRAM, so rewrites of hot data hit the buffer instead of flash.
    Watermark { high: f64, low: f64 },
}

impl FlushPolicy {
    /// Watermarks are fractions of the buffer with 0 < low < high <= 1.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            FlushPolicy::Page => Ok(()),
            FlushPolicy::Watermark { high, low } if 0.0 < low && low < high && high <= 1.0 => Ok(()),
            FlushPolicy::Watermark { high, low } => Err(format!(
                "device.buffer: watermarks low = {low}, high = {high}: expected 0 < low < high <= 1 (fractions of the buffer)"
            )),
        }
    }
}
