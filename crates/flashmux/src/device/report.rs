//! What the device reports about itself: the drive-wide result of a run, each tenant's share
//! of the device's work, and the per-tenant counters the timeline samples.
//!
//! The results code asks the [`Device`]; nothing outside `device/` reaches through the back end
//! to the FTL or the map cache for reporting.
//!
//! - **Write amplification**: (host + GC + padding + translation-page units programmed) / host
//!   units programmed; `None` before any host unit reached flash. 1,000 host units, 250 moved by
//!   GC, 10 padding and 40 translation units give WAF = 1,300 / 1,000 = 1.3.
//! - **GC erases per tenant**: the erased units attributed to the tenant through the ownership
//!   ledger, in blocks (units / units per block), so a tenant owning half of each victim is
//!   charged half an erase per victim.

use super::precondition::PreconditionReport;
use super::{Backend, Device, Ssd, SsdStats, TenantDeviceStats};
use crate::ftl::{FtlStats, MapStats, MappingConfig, PeriodRecord};
use serde::Serialize;
use super::PlacementMode;
use crate::units::{Placement, SimTime, TenantId};

/// The device's report in `results.json` (`flashmux.device`).
#[derive(Clone, Debug, Serialize)]
pub struct DeviceResult {
    /// `ssd` or `null`.
    pub kind: String,
    /// Preset name, or `custom`.
    pub preset: String,
    pub capacity_bytes: u64,
    pub physical_bytes: u64,
    pub unit_bytes: u64,
    pub mapping: String,
    pub ftl: FtlStats,
    pub ssd: SsdStats,
    /// (host + GC programs) / host programs during the measured run; None if nothing was written.
    pub waf: Option<f64>,
    /// GC work on data no single tenant owns (e.g. preconditioned shared space).
    pub unowned_gc_units_moved: u64,
    pub precondition: PreconditionReport,
    /// Time-averaged utilisation of the channels, 0–1.
    pub channel_utilisation: f64,
    /// Writes of units still dirty in the write buffer (all tenants).
    pub write_buffer_hits: u64,
    /// The map cache, with DFTL.
    pub cmt: Option<CmtReport>,
    /// Flush commands the device completed (fio's `fsync`/`fdatasync`/`end_fsync`). Reported
    /// only when not zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub flushes: u64,
    /// The drive's data placement (FDP, Streams), when it offers one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementReport>,
    /// A zoned namespace's zones and their commands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zns: Option<super::ZnsReport>,
}

/// What a drive with data placement reports: FDP's statistics log page (host and media bytes
/// written, media bytes erased), its events, and per placement (FDP reclaim unit handle or
/// stream) the host's writes and the GC they caused and suffered.
///
/// Worked example: a handle's host wrote 1,000 units and GC moved 250 of its units: its WAF is
/// 1,250 / 1,000 = 1.25; `gc_moves[c][m]` counts the units of placement *m*'s data GC copied in
/// planes placement *c*'s writes pushed to their GC threshold, so a noisy handle's row says how
/// much of the others' data its writes made GC move.
#[derive(Clone, Debug, Serialize)]
pub struct PlacementReport {
    /// `fdp` or `streams`.
    pub kind: String,
    /// FDP's Host Bytes with Metadata Written: the bytes of the host's write commands.
    pub host_bytes_written: u64,
    /// FDP's Media Bytes with Metadata Written: every unit programmed (host, GC, padding,
    /// translation pages).
    pub media_bytes_written: u64,
    /// FDP's Media Bytes Erased.
    pub media_bytes_erased: u64,
    /// Media ÷ host bytes written (FDP's write amplification); `None` before any host write.
    pub waf: Option<f64>,
    pub events: crate::device::PlacementEvents,
    /// FDP's Media Reallocated event (80h), in units: initially isolated handles' data GC moved.
    pub media_reallocated_units: u64,
    pub placements: Vec<PlacementStat>,
    /// `gc_moves[c][m]`: units of placement m's data GC moved in planes placement c's writes
    /// pushed to GC.
    pub gc_moves: Vec<Vec<u64>>,
}

/// One placement's writes and GC.
#[derive(Clone, Debug, Serialize)]
pub struct PlacementStat {
    /// The FDP handle, or the stream resource (0: data without a stream).
    pub placement: u16,
    /// FDP: a persistently isolated handle.
    pub persistent: bool,
    /// Bytes the host wrote through it.
    pub host_bytes: u64,
    /// Units of its host data programmed.
    pub host_units_programmed: u64,
    /// Units of its data GC moved (suffered).
    pub gc_units_moved: u64,
    /// Units, of anyone's data, GC moved in planes its writes pushed to GC (caused).
    pub gc_units_caused: u64,
    /// Blocks (reclaim units in a plane) it filled.
    pub blocks_filled: u64,
    /// Open blocks closed before they were full by the host's reclaim unit updates.
    pub blocks_closed_early: u64,
    /// (host units + units GC moved) ÷ host units; `None` before any host unit.
    pub waf: Option<f64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The DFTL map cache as configured, and the balanced policy's periods.
#[derive(Clone, Debug, Serialize)]
pub struct CmtReport {
    pub policy: String,
    /// Capacity in translation pages.
    pub pages: u32,
    pub page_bytes: u32,
    /// Translation pages of the whole table, and entries per page.
    pub map_pages: u32,
    pub entries_per_page: u32,
    /// `balanced`: every closed period (distinct pages per tenant, rECS, ΔrECS, allocations).
    pub periods: Vec<PeriodRecord>,
}

/// One tenant's share of the device's work.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TenantDeviceReport {
    /// Units of the tenant's data that GC moved.
    pub gc_units_moved: u64,
    /// Units, of anyone's data, that GC moved in planes the tenant's writes pushed to GC.
    pub gc_units_caused: u64,
    /// Blocks' worth of the tenant's units that GC erased.
    pub gc_erases: f64,
    /// The tenant's translation counters.
    pub map: MapStats,
    /// The tenant's counters of the device's data path.
    pub device: TenantDeviceStats,
    /// Its zone commands, on a zoned drive.
    pub zones: Option<super::TenantZoneStats>,
}

/// One tenant's running counters, for the timeline (zeros for a device without an FTL).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantDeviceCounters {
    pub gc_units_moved: u64,
    pub map_lookups: u64,
    pub map_misses: u64,
    /// Translation pages the tenant holds in the map cache now.
    pub cmt_pages: u32,
    /// On a zoned drive: Zone Resets that emptied a zone, and commands that failed.
    pub zone_resets: u64,
    pub zone_errors: u64,
}

impl Device {
    /// The drive-wide result at `now`. `preset` names the device preset the scenario used;
    /// `precondition` is what [`Device::precondition`] did.
    pub fn report(&self, now: SimTime, preset: &str, precondition: &PreconditionReport) -> DeviceResult {
        match self.backend() {
            Backend::Ssd(s) => s.report(now, preset, precondition, self.flushes_completed()),
            Backend::Null(n) => DeviceResult {
                kind: "null".into(),
                preset: preset.to_string(),
                capacity_bytes: n.capacity_bytes,
                physical_bytes: 0,
                unit_bytes: 512,
                mapping: "none".into(),
                ftl: Default::default(),
                ssd: Default::default(),
                waf: None,
                unowned_gc_units_moved: 0,
                precondition: precondition.clone(),
                channel_utilisation: 0.0,
                write_buffer_hits: 0,
                cmt: None,
                flushes: self.flushes_completed(),
                placement: None,
                zns: None,
            },
        }
    }

    /// `tenant`'s share of the device's work (zeros for a device without an FTL).
    pub fn tenant_report(&self, tenant: TenantId) -> TenantDeviceReport {
        match self.backend() {
            Backend::Ssd(s) => s.tenant_report(tenant),
            Backend::Null(_) => TenantDeviceReport::default(),
        }
    }

    /// Bytes the FTL's state takes in the simulator's memory: (the L2P table, everything else);
    /// zeros for a device without an FTL.
    pub fn ftl_memory_bytes(&self) -> (u64, u64) {
        match self.backend() {
            Backend::Ssd(s) => s.ftl().memory_bytes(),
            Backend::Null(_) => (0, 0),
        }
    }

    /// Logical pages (mapping units) the FTL exports; 0 for a device without an FTL.
    pub fn logical_units(&self) -> u64 {
        match self.backend() {
            Backend::Ssd(s) => s.ftl().logical_units(),
            Backend::Null(_) => 0,
        }
    }

    /// `tenant`'s running counters now, for the timeline.
    pub fn tenant_counters(&self, tenant: TenantId) -> TenantDeviceCounters {
        match self.backend() {
            Backend::Ssd(s) => {
                let c = s.map_cache().stats(tenant);
                let z = s.tenant_zone_stats(tenant).unwrap_or_default();
                TenantDeviceCounters {
                    zone_resets: z.resets,
                    zone_errors: z.failed(),
                    gc_units_moved: s.ftl().tenant_gc(tenant).units_moved,
                    map_lookups: c.lookups,
                    map_misses: c.misses,
                    cmt_pages: s.map_cache().held(tenant),
                }
            }
            Backend::Null(_) => TenantDeviceCounters::default(),
        }
    }
}

impl Ssd {
    fn report(&self, now: SimTime, preset: &str, precondition: &PreconditionReport, flushes: u64) -> DeviceResult {
        let c = self.config();
        let ftl = self.ftl().stats().clone();
        let waf = (ftl.host_units_programmed > 0).then(|| ftl.units_programmed() as f64 / ftl.host_units_programmed as f64);
        DeviceResult {
            kind: "ssd".into(),
            preset: preset.to_string(),
            capacity_bytes: self.capacity_bytes(),
            physical_bytes: c.geometry.physical_bytes(),
            unit_bytes: c.geometry.unit_bytes as u64,
            mapping: self.mapping_name(),
            ftl,
            ssd: self.stats(),
            waf,
            unowned_gc_units_moved: self.ftl().unowned_gc().units_moved,
            precondition: precondition.clone(),
            channel_utilisation: self.channel_utilisation(now),
            write_buffer_hits: (0..self.tenant_count()).map(|t| self.tenant_stats(TenantId(t as u16)).write_buffer_hits).sum(),
            cmt: match &c.mapping {
                MappingConfig::Full => None,
                MappingConfig::Dftl { cmt, .. } => Some(CmtReport {
                    policy: cmt.policy.name().into(),
                    pages: cmt.pages,
                    page_bytes: c.geometry.page_bytes,
                    map_pages: self.ftl().map_pages(),
                    entries_per_page: self.ftl().map_entries_per_page(),
                    periods: self.map_cache().periods().to_vec(),
                }),
            },
            flushes,
            placement: self.placement_report(),
            zns: self.zns_report(),
        }
    }

    fn placement_report(&self) -> Option<PlacementReport> {
        let mode = self.placement_mode();
        let kind = match mode {
            PlacementMode::None => return None,
            PlacementMode::Fdp { .. } => "fdp",
            PlacementMode::Streams { .. } => "streams",
        };
        let f = self.ftl();
        let s = f.stats();
        let g = &self.config().geometry;
        let unit = g.unit_bytes as u64;
        let n = f.placements().count();
        let media = s.units_programmed() * unit;
        let placements: Vec<PlacementStat> = (0..n as u16)
            .map(Placement)
            .map(|p| {
                let pg = f.placement_gc(p);
                PlacementStat {
                    placement: p.0,
                    persistent: f.placements().is_persistent(p),
                    host_bytes: self.placement_host_bytes(p),
                    host_units_programmed: pg.host_units,
                    gc_units_moved: pg.units_moved,
                    gc_units_caused: pg.caused_units_moved,
                    blocks_filled: pg.blocks_filled,
                    blocks_closed_early: pg.blocks_closed_early,
                    waf: (pg.host_units > 0).then(|| (pg.host_units + pg.units_moved) as f64 / pg.host_units as f64),
                }
            })
            .collect();
        let host: u64 = placements.iter().map(|p| p.host_bytes).sum();
        let reallocated = match mode {
            PlacementMode::Fdp { .. } => placements.iter().filter(|p| !p.persistent).map(|p| p.gc_units_moved).sum(),
            _ => 0,
        };
        Some(PlacementReport {
            kind: kind.into(),
            host_bytes_written: host,
            media_bytes_written: media,
            media_bytes_erased: s.erases * g.units_per_block() as u64 * unit,
            waf: (host > 0).then(|| media as f64 / host as f64),
            events: self.placement_events(),
            media_reallocated_units: reallocated,
            placements,
            gc_moves: (0..n as u16)
                .map(|c| (0..n as u16).map(|m| f.gc_moves(Placement(c), Placement(m))).collect())
                .collect(),
        })
    }

    fn tenant_report(&self, tenant: TenantId) -> TenantDeviceReport {
        let g = self.ftl().tenant_gc(tenant);
        TenantDeviceReport {
            gc_units_moved: g.units_moved,
            gc_units_caused: g.caused_units_moved,
            gc_erases: g.erased_units as f64 / self.ftl().units_per_block() as f64,
            map: self.map_stats(tenant),
            device: self.tenant_stats(tenant),
            zones: self.tenant_zone_stats(tenant),
        }
    }
}
