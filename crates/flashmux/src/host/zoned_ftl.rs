//! A host FTL for a zoned drive, in the spirit of Linux's dm-zoned and pblk: the host exports a
//! conventional (randomly writable) block space and writes it log-structured into the drive's
//! zones; its garbage collection is host I/O — reads of a victim zone's valid data, writes of it
//! into a GC zone, and a Zone Reset.
//!
//! # Model
//! The translation is flashmux's page-mapping FTL (`ftl/core.rs`) with a **zone as its erase
//! block**: one "plane", a "block" per zone, a "page" per mapping unit. So everything that FTL
//! guarantees — each logical unit's latest copy, greedy victims (fewest valid units), a GC
//! stream apart from host writes, GC started when a host write opens a zone and the free zones
//! are at the threshold — holds here, and the reference-map property test the device FTL passes
//! applies unchanged (`tests` below, with the zone state machine checking every write the host
//! FTL issues). What is new is the mapping to device commands:
//! - a **write** takes its units from the open host zone at its write pointer (the FTL's
//!   allocator writes each block in order); the device writes are the runs of consecutive
//!   units, in allocation order, each at its zone's write pointer;
//! - a **read** is the runs of its units' current zone addresses (unwritten units need no
//!   device read);
//! - a **trim** only unmaps;
//! - **GC** ([`HostZonedFtl::take_gc`]): the FTL moves a victim zone's valid units into the GC
//!   zone at once (its state); the host then reads them from the victim, writes them to the GC
//!   zone, and resets the victim ([`GcWork`]); only when the reset completes
//!   ([`HostZonedFtl::reset_done`]) is the zone free for writing again, as the drive would
//!   refuse a write to a zone not yet reset. A host write that finds no free zone waits
//!   ([`HostZonedFtl::can_write`]) — the host FTL's back-pressure.
//!
//! # Worked example
//! 8 zones of 4 units, threshold 2, 2 spare zones: 24 logical units. Writing units 0–3 fills
//! zone 0 (device writes [zone 0, 0..4)); rewriting 0 and 1 puts them in zone 1 and leaves
//! zone 0 with 2 valid units. When a write opens a zone with 2 zones free, GC picks zone 0
//! (fewest valid), moves its 2 valid units to the GC zone: reads of zone 0 at units 2 and 3,
//! a write of 2 units at the GC zone's write pointer, then a reset of zone 0.
//!
//! # Parameters
//! The drive's zones (count, size, capacity) and mapping unit; `spare_zones` (zones beyond the
//! logical space, the host FTL's over-provisioning, at least threshold + 3) and
//! `gc_threshold_zones` (free zones at which GC starts, at least 2).
//!
//! Sources: Linux dm-zoned (Documentation/admin-guide/device-mapper/dm-zoned.rst: a
//! conventional block device on zones, reclaim copies valid blocks and resets zones) and pblk
//! (lines written sequentially, GC of lines with the least valid data); flashmux's FTL for the
//! mapping and victim choice.

use crate::flash::Geometry;
use crate::ftl::{Ftl, FtlParams, Loc, VictimPolicy};
use crate::units::{Lpn, Placement, PlaneId, Ppa};
use serde::Serialize;

/// What the host FTL did, in `results.json` (`host_ftl`, beside `device`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HostFtlReport {
    /// The conventional space it exports.
    pub logical_bytes: u64,
    pub spare_zones: u32,
    /// Units the tenants wrote, and units GC moved (read from a victim, written to a GC zone).
    pub host_units: u64,
    pub gc_units_moved: u64,
    /// GC jobs, each ending with a Zone Reset of its victim.
    pub gc_runs: u64,
    /// (host + GC units) / host units: the host FTL's write amplification; the drive adds none.
    pub waf: Option<f64>,
    /// Writes that waited for a zone reset, and device commands issued.
    pub writes_waited: u64,
    pub device_commands: u64,
}

/// The largest device command the host FTL issues: 128 KiB, the chunk GC copies in (as Linux's
/// dm-kcopyd splits a copy into sub-jobs), so user writes queued behind GC's are not held up by
/// a whole zone's worth at once.
pub const MAX_COMMAND_BYTES: u64 = 128 << 10;

/// The host FTL's shape: the drive's zones and its own spare space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostZonedConfig {
    pub zones: u32,
    /// LBA space per zone, and the writable part of it, in bytes.
    pub zone_bytes: u64,
    pub capacity_bytes: u64,
    /// The mapping unit (4 KiB).
    pub unit_bytes: u64,
    /// Zones kept beyond the logical space.
    pub spare_zones: u32,
    /// Free zones at which GC starts.
    pub gc_threshold_zones: u32,
    /// A log per tenant (`per_tenant`): tenant *t* writes its own open zone and GC moves its
    /// data into a GC zone of its own, so no zone holds two tenants' data; `0`: one shared log.
    pub tenant_logs: u32,
    /// The drive's open zone limit (the lesser of its open and active limits): the host FTL
    /// writes a host and a GC zone per log at once.
    pub max_open: Option<u32>,
}

impl HostZonedConfig {
    /// The host FTL of `params` on the zoned drive `zns` with mapping unit `unit_bytes`.
    pub fn of(zns: &crate::device::ZnsLayout, unit_bytes: u64, params: crate::host::ZonedFtlParams) -> HostZonedConfig {
        HostZonedConfig {
            zones: zns.zones,
            zone_bytes: zns.zone_bytes,
            capacity_bytes: zns.capacity_bytes,
            unit_bytes,
            spare_zones: params.spare_zones,
            gc_threshold_zones: params.gc_threshold_zones,
            tenant_logs: params.tenant_logs,
            max_open: match (zns.max_open, zns.max_active) {
                (Some(o), Some(a)) => Some(o.min(a)),
                (o, a) => o.or(a),
            },
        }
    }

    /// Open zones beyond the logical data, GC's threshold and reserve: a host and a GC zone
    /// per log (`Ftl::check_params`'s count for persistent placements).
    pub fn open_zones(tenant_logs: u32) -> u32 {
        2 * tenant_logs.saturating_sub(1) + u32::from(tenant_logs > 0)
    }

    /// The default spare zones: 7% of the zones (a datacenter drive's over-provisioning), at
    /// least `gc_threshold_zones + 3` and each further log's open zones.
    pub fn default_spare(zones: u32, gc_threshold_zones: u32, tenant_logs: u32) -> u32 {
        let least = gc_threshold_zones as u64 + 3 + Self::open_zones(tenant_logs) as u64;
        (zones as u64 * 7).div_ceil(100).max(least) as u32
    }
}

/// One GC job's device I/O: read the moved units from the victim, write them into the GC zone
/// (byte runs of the zoned namespace, in order), then reset the victim zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcWork {
    pub victim: u32,
    pub reads: Vec<(u64, u64)>,
    pub writes: Vec<(u64, u64)>,
    /// The victim zone's first byte and size (the Zone Reset).
    pub reset: (u64, u64),
}

pub struct HostZonedFtl {
    cfg: HostZonedConfig,
    ftl: Ftl,
    units_per_zone: u64,
    moves: Vec<(Ppa, Ppa)>,
}

impl HostZonedConfig {
    /// Checks the shape (whole units, GC's spare zones, the drive's open zone limit, the
    /// translation's own rules through `Ftl::check_params`) without building the map tables,
    /// and returns the bytes of the conventional space it exports: what the loader needs.
    pub fn validate(&self) -> Result<u64, String> {
        let (geo, params) = self.translation()?;
        Ok(params.logical_units * geo.unit_bytes as u64)
    }

    /// The translation FTL's geometry and parameters: a zone is a block of one-unit pages on a
    /// one-plane "drive". Checked.
    fn translation(&self) -> Result<(Geometry, FtlParams), String> {
        let cfg = self;
        let u = cfg.unit_bytes;
        if u == 0
            || u > u32::MAX as u64
            || cfg.capacity_bytes % u != 0
            || cfg.zone_bytes % u != 0
            || cfg.capacity_bytes > cfg.zone_bytes
        {
            return Err(format!(
                "host zoned FTL: zones of {} bytes with {} writable are not whole {u}-byte units",
                cfg.zone_bytes, cfg.capacity_bytes
            ));
        }
        if cfg.gc_threshold_zones < 2 {
            return Err(format!(
                "host zoned FTL: gc_threshold_zones = {}: at least 2",
                cfg.gc_threshold_zones
            ));
        }
        let need = cfg.gc_threshold_zones + 3 + HostZonedConfig::open_zones(cfg.tenant_logs);
        if cfg.spare_zones < need || cfg.zones <= cfg.spare_zones {
            return Err(format!(
                "host zoned FTL: {} spare zones of {}: expected at least gc_threshold_zones + 3{} = {need}, and fewer than the zones",
                cfg.spare_zones,
                cfg.zones,
                if cfg.tenant_logs > 1 { " + a host and a GC zone per further tenant log" } else { "" }
            ));
        }
        let writing = 2 * cfg.tenant_logs.max(1);
        if let Some(limit) = cfg.max_open.filter(|&l| writing > l) {
            return Err(format!(
                "host zoned FTL: {} log(s) write {writing} zones at once (a host and a GC zone each), above the drive's limit of {limit} open zones",
                cfg.tenant_logs.max(1)
            ));
        }
        if cfg.tenant_logs as usize > crate::ftl::Placements::MAX {
            return Err(format!(
                "host zoned FTL: {} tenant logs: at most {}",
                cfg.tenant_logs,
                crate::ftl::Placements::MAX
            ));
        }
        let units_per_zone = cfg.capacity_bytes / u;
        let units = u32::try_from(units_per_zone)
            .map_err(|_| "host zoned FTL: a zone of 2^32 units or more".to_string())?;
        let geo = Geometry {
            channels: 1,
            chips_per_channel: 1,
            dies_per_chip: 1,
            planes_per_die: 1,
            blocks_per_plane: cfg.zones,
            pages_per_block: units,
            page_bytes: u as u32,
            unit_bytes: u as u32,
        };
        let params = FtlParams {
            logical_units: (cfg.zones - cfg.spare_zones) as u64 * units_per_zone,
            victim_policy: VictimPolicy::Greedy,
            gc_threshold_blocks: cfg.gc_threshold_zones,
            map_entries_per_page: None,
            // A log per tenant: persistent placements, so GC keeps each tenant's data apart too.
            placements: match cfg.tenant_logs {
                0 | 1 => Default::default(),
                n => crate::ftl::Placements {
                    persistent: vec![true; n as usize],
                },
            },
            zoned: None,
        };
        Ftl::check_params(&geo, &params).map_err(|e| format!("host zoned FTL: {e}"))?;
        Ok((geo, params))
    }
}

impl HostZonedFtl {
    pub fn new(cfg: HostZonedConfig) -> Result<HostZonedFtl, String> {
        let (geo, params) = cfg.translation()?;
        let units_per_zone = cfg.capacity_bytes / cfg.unit_bytes;
        let mut ftl = Ftl::new(&geo, params).map_err(|e| format!("host zoned FTL: {e}"))?;
        ftl.log_moves();
        Ok(HostZonedFtl {
            cfg,
            ftl,
            units_per_zone,
            moves: Vec::new(),
        })
    }

    /// Bytes of the conventional space it exports.
    pub fn logical_bytes(&self) -> u64 {
        self.ftl.logical_units() * self.cfg.unit_bytes
    }

    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }

    /// The namespace byte of physical unit `ppa`: its zone's start plus its place in the zone.
    fn byte_of(&self, ppa: Ppa) -> u64 {
        let (zone, unit) = (ppa.0 as u64 / self.units_per_zone, ppa.0 as u64 % self.units_per_zone);
        zone * self.cfg.zone_bytes + unit * self.cfg.unit_bytes
    }

    /// Appends unit `ppa` to `runs`, extending the last run when it is the next unit of the
    /// same zone (a command never crosses a zone: a write there is a Zone Boundary Error) and
    /// the run is below [`MAX_COMMAND_BYTES`].
    fn push_run(&self, runs: &mut Vec<(u64, u64)>, ppa: Ppa) {
        let (at, u, z) = (self.byte_of(ppa), self.cfg.unit_bytes, self.cfg.zone_bytes);
        match runs.last_mut() {
            Some((start, len)) if *start + *len == at && *start / z == at / z && *len + u <= MAX_COMMAND_BYTES => *len += u,
            _ => runs.push((at, u)),
        }
    }

    fn units(&self, offset: u64, len: u64) -> std::ops::Range<u64> {
        let u = self.cfg.unit_bytes;
        offset / u..(offset + len).div_ceil(u)
    }

    /// The log tenant `owner` writes.
    fn log_of(&self, owner: u16) -> Placement {
        match self.cfg.tenant_logs {
            0 | 1 => Placement(0),
            n => Placement(owner % n as u16),
        }
    }

    /// Whether a unit of `owner` can be written now; if not, its writes wait for a zone reset.
    pub fn can_write(&self, owner: u16) -> bool {
        self.ftl.can_program_host(PlaneId(0), self.log_of(owner), 1)
    }

    /// Places as much of a write of `[offset, offset + len)` by `owner` as the free zones take
    /// (whole units: a partial unit is rewritten whole), unit by unit — a unit that opens a
    /// zone may start GC, whose copies take free zones too. Appends its device writes to `out`
    /// (byte runs, in order) and returns the bytes placed from `offset` on (to the end of
    /// `len`, or short: the rest waits for a zone reset, [`HostZonedFtl::reset_done`]).
    pub fn write(&mut self, offset: u64, len: u64, owner: u16, out: &mut Vec<(u64, u64)>) -> u64 {
        let units = self.units(offset, len);
        let first = units.start;
        let log = self.log_of(owner);
        for l in units {
            if !self.can_write(owner) {
                return (l - first) * self.cfg.unit_bytes - (offset - first * self.cfg.unit_bytes);
            }
            let ppa = self.ftl.program_host(PlaneId(0), Lpn(l as u32), owner, log);
            self.push_run(out, ppa);
        }
        len
    }

    /// The device reads a read of `[offset, offset + len)` needs: its units' current places, in
    /// runs (unwritten units need none).
    pub fn read(&self, offset: u64, len: u64, out: &mut Vec<(u64, u64)>) {
        for l in self.units(offset, len) {
            if let Loc::Flash(ppa) = self.ftl.lookup(Lpn(l as u32)) {
                self.push_run(out, ppa);
            }
        }
    }

    /// A trim: the whole units in the range hold nothing any more.
    pub fn trim(&mut self, offset: u64, len: u64) {
        let u = self.cfg.unit_bytes;
        for l in offset.div_ceil(u)..(offset + len) / u {
            self.ftl.unmap(Lpn(l as u32));
        }
    }

    /// The next GC job the writes started, as device I/O.
    pub fn take_gc(&mut self) -> Option<GcWork> {
        let job = self.ftl.take_gc_job()?;
        let mut moves = std::mem::take(&mut self.moves);
        moves.clear();
        self.ftl.take_moves(job.moved_units as usize, &mut moves);
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for &(old, _) in &moves {
            self.push_run(&mut reads, old);
        }
        for &(_, new) in &moves {
            self.push_run(&mut writes, new);
        }
        self.moves = moves;
        Some(GcWork {
            victim: job.victim,
            reads,
            writes,
            reset: (job.victim as u64 * self.cfg.zone_bytes, self.cfg.zone_bytes),
        })
    }

    /// The victim zone's reset completed: it is free for writing (which may let GC go on).
    pub fn reset_done(&mut self, victim: u32) {
        self.ftl.finish_erase(victim);
    }

    pub fn check_invariants(&self) {
        self.ftl.check_invariants();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::zns::{ZnsConfig, ZoneAction, ZoneGeometry, Zones};
    use proptest::prelude::*;
    use std::collections::HashMap;

    const UNIT: u64 = 4096;

    fn cfg(zones: u32, units: u64, size: u64, tenant_logs: u32) -> HostZonedConfig {
        HostZonedConfig {
            zones,
            zone_bytes: size * units * UNIT,
            capacity_bytes: units * UNIT,
            unit_bytes: UNIT,
            spare_zones: 5 + HostZonedConfig::open_zones(tenant_logs),
            gc_threshold_zones: 2,
            tenant_logs,
            max_open: Some(2 * tenant_logs.max(2)),
        }
    }

    /// The drive: its zone state machine checks every device command the host FTL issues.
    struct Drive(Zones);

    impl Drive {
        fn new(c: &HostZonedConfig) -> Drive {
            let lba = 512;
            Drive(
                Zones::new(ZnsConfig {
                    geometry: ZoneGeometry { zones: c.zones, zone_size: c.zone_bytes / lba, zone_capacity: c.capacity_bytes / lba },
                    max_open: c.max_open,
                    max_active: c.max_open,
                    zone_append_limit: None,
                })
                .unwrap(),
            )
        }
        fn write(&mut self, runs: &[(u64, u64)]) {
            for &(at, len) in runs {
                self.0.write(at / 512, len / 512).unwrap_or_else(|e| panic!("write of {len} at {at}: {e}"));
            }
        }
        fn read(&self, runs: &[(u64, u64)]) {
            for &(at, len) in runs {
                self.0.read_check(at / 512, len / 512, false).unwrap_or_else(|e| panic!("read of {len} at {at}: {e}"));
                assert!(at / 512 + len / 512 <= self.0.write_pointer(((at / 512) / self.0.config().geometry.zone_size) as u32).unwrap_or(u64::MAX), "read past the write pointer at {at}");
            }
        }
        /// Runs GC's device I/O to the end, as the host would: reads, writes, reset.
        fn gc(&mut self, h: &mut HostZonedFtl) -> usize {
            let mut jobs = 0;
            while let Some(w) = h.take_gc() {
                self.read(&w.reads);
                self.write(&w.writes);
                self.0.manage(w.reset.0 / 512, ZoneAction::Reset, false).unwrap();
                h.reset_done(w.victim);
                jobs += 1;
            }
            jobs
        }
    }

    /// The header's worked example.
    #[test]
    fn gc_reads_the_victims_valid_units_writes_them_to_the_gc_zone_and_resets_it() {
        let c = HostZonedConfig { zones: 8, zone_bytes: 4 * UNIT, capacity_bytes: 4 * UNIT, unit_bytes: UNIT, spare_zones: 5, gc_threshold_zones: 2, tenant_logs: 0, max_open: Some(4) };
        let mut h = HostZonedFtl::new(c).unwrap();
        assert_eq!(h.logical_bytes(), 12 * UNIT);
        let mut out = Vec::new();
        assert_eq!(h.write(0, 4 * UNIT, 0, &mut out), 4 * UNIT);
        assert_eq!(out, [(0, 4 * UNIT)], "zone 0, from its start");
        out.clear();
        h.write(0, 2 * UNIT, 0, &mut out);
        assert_eq!(out, [(4 * UNIT, 2 * UNIT)], "zone 1");
        assert!(h.take_gc().is_none());
        // Rewrites spread over the space fill zone after zone until a write opens one with 2
        // free: GC then cleans the zone with the fewest valid units, its I/O checked by the
        // drive's zone state machine.
        let mut d = Drive::new(&c);
        d.write(&[(0, 4 * UNIT), (4 * UNIT, 2 * UNIT)]);
        let mut gcs = 0;
        for round in 0..20u64 {
            out.clear();
            let l = (round * 3) % 12;
            assert!(h.can_write(0));
            assert_eq!(h.write(l * UNIT, UNIT, 0, &mut out), UNIT);
            d.write(&out);
            gcs += d.gc(&mut h);
            h.check_invariants();
        }
        assert!(gcs > 0, "GC ran");
        assert_eq!(h.ftl().stats().gc_runs as usize, gcs);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// The host FTL against a reference map: any mix of writes, trims and reads over its
        /// logical space, with GC's I/O done as the host does it, leaves every logical unit
        /// where its latest write put it (the owner as the reference says), every device write
        /// at its zone's write pointer and every read below one — the zone state machine fails
        /// the test otherwise — and the FTL's invariants intact.
        #[test]
        fn matches_the_reference_map_on_a_zoned_drive(
            ops in prop::collection::vec((0u8..10, 0u64..40, 1u64..6, 0u16..3), 1..300),
            units in prop_oneof![Just(4u64), Just(8), Just(16)],
            size in 1u64..3,
            tenant_logs in prop_oneof![Just(0u32), Just(3)],
        ) {
            // Zones whose capacity is their size (1) or half of it (2); one log, or one per
            // tenant (3), when no zone may hold two tenants' data.
            let c = cfg(12 + 2 * HostZonedConfig::open_zones(tenant_logs), units, size, tenant_logs);
            let mut h = HostZonedFtl::new(c).unwrap();
            let mut d = Drive::new(&c);
            let logical = h.logical_bytes() / UNIT;
            let mut reference: HashMap<u64, u16> = HashMap::new();
            let mut out = Vec::new();
            for (kind, at, n, owner) in ops {
                let first = at % logical;
                let n = n.min(logical - first);
                out.clear();
                match kind {
                    0..=6 => {
                        // Placed as the free zones allow; the rest after GC's resets.
                        let mut done = 0;
                        while done < n * UNIT {
                            out.clear();
                            let placed = h.write(first * UNIT + done, n * UNIT - done, owner, &mut out);
                            d.write(&out);
                            let jobs = d.gc(&mut h);
                            prop_assert!(placed > 0 || jobs > 0, "a write waits only for GC that is under way");
                            done += placed;
                        }
                        for l in first..first + n { reference.insert(l, owner); }
                    }
                    7 => {
                        h.trim(first * UNIT, n * UNIT);
                        for l in first..first + n { reference.remove(&l); }
                    }
                    _ => {
                        h.read(first * UNIT, n * UNIT, &mut out);
                        d.read(&out);
                        let mapped: u64 = out.iter().map(|r| r.1 / UNIT).sum();
                        prop_assert_eq!(mapped, (first..first + n).filter(|l| reference.contains_key(l)).count() as u64);
                    }
                }
                h.check_invariants();
            }
            for l in 0..logical {
                match (h.ftl().lookup(Lpn(l as u32)), reference.get(&l)) {
                    (Loc::Flash(ppa), Some(&o)) => prop_assert_eq!(h.ftl().owner_of(ppa), o),
                    (Loc::Unmapped, None) => {}
                    (loc, want) => prop_assert!(false, "unit {}: {:?}, reference {:?}", l, loc, want),
                }
            }
            if tenant_logs > 1 {
                // Each zone holds one tenant's data (the FTL checks its placements' isolation;
                // here, through the owners).
                let mut zone_owner: HashMap<u64, u16> = HashMap::new();
                for (&l, &o) in &reference {
                    let Loc::Flash(ppa) = h.ftl().lookup(Lpn(l as u32)) else { continue };
                    let z = ppa.0 as u64 / units;
                    prop_assert_eq!(*zone_owner.entry(z).or_insert(o), o, "zone {} holds two tenants' data", z);
                }
            }
        }
    }
}
