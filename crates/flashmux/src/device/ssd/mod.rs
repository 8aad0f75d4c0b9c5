//! The SSD back end: a thin coordinator over a flash array, a flusher, a map path and GC.
//!
//! # Model
//! The coordinator runs each command the controller fetched ([`Ssd::execute`]) and routes the
//! device's own events (`ProgramDone`, `GcCheck`) to the component that owns them:
//! - **flash array** (`array.rs`): dies, channels and the host link, the only owner of flash
//!   time (`reserve_read`, `reserve_program`, GC steps as each die's background queue);
//! - **flusher** (`flusher.rs`): write-buffer admission, when dirty data is programmed, flush
//!   commands and their padding;
//! - **map path** (`map_path.rs`): DFTL translation — map-cache lookups, translation-page reads
//!   and programs, GC's map updates;
//! - **GC stepping** (`gc.rs`): jobs the FTL starts, multi-plane steps, the GC check, and the
//!   [`GcMode`] (background, or host I/O for an open-channel drive) chosen at construction.
//!
//! The FTL (`ftl/core.rs`) is functional: where each logical unit lives and which open block a
//! write goes to ([`crate::ftl::Ftl::program_host`], the placement seam); this directory adds
//! time. Timing in brief (all in `docs/MODEL.md`):
//! - **Reads** of a flash page occupy the die for tR and then the die's channel for the transfer
//!   (channels are reserved at the earliest free gap, see [`crate::flash::Timeline`]); the data
//!   then crosses the host link. Units in the write buffer are served from DRAM; unmapped units
//!   return zeros without touching flash.
//! - **Writes** complete when their data is in the write buffer (after crossing the host link).
//!   The flusher programs dirty units a flash page per plane at a time, several planes of a die in
//!   one multi-plane program: channel transfer, then tPROG on the die. At most
//!   `program_queue_depth` programs are queued per die, so reads wait behind at most that many.
//! - **Garbage collection** is decided by the FTL and run on the victim's die as a background job
//!   of steps (page reads, page programs, one erase; on-die copy-back, no channel traffic); jobs
//!   of different planes of a die step together as multi-plane operations. A user read may start
//!   between any two steps (reads have priority over GC); buffered writes to a plane wait until
//!   its GC job is done (GC has priority over writes there), so GC throttles writes through the
//!   buffer, as on real drives; writes to the die's other planes go between GC steps.
//! - **Flushes** complete at once when the buffer is power-loss protected. A volatile buffer
//!   must first reach flash: every unit it holds when the flush arrives is programmed (a partly
//!   filled page padded) and the flush completes when the last of those programs ends.
//!
//! # Worked example
//! A 4 KiB read of a unit on flash, on an idle drive with tR = 50 µs, a 400 MB/s channel, a
//! 4 GB/s link and command time 0, fetched at t: the map path answers at t (`full` mapping), the
//! array reads the page's unit (t + 50 µs + 4096 B / 400 MB/s = t + 60.24 µs) and the link
//! carries it (+ 1.024 µs): `Complete` at t + 61.264 µs.
//!
//! # Parameters
//! [`SsdConfig`]: geometry, timing, over-provisioning, victim policy and GC threshold (FTL),
//! buffer size, program queue depth, flush policy and volatility (flusher), host link rate
//! (array), mapping (map path), open channel (GC mode).
//!
//! Source: the die/channel/GC structure follows MQSim (Tavakkol et al., FAST '18); DFTL follows
//! Gupta et al. (ASPLOS '09); open-channel mode follows Linux's pblk.

mod array;
mod config;
mod flusher;
mod gc;
mod map_path;
mod placement;
mod zoned;

pub use config::{DramTiming, EccRates, FlushPolicy, SsdConfig, ZnsLayout, MAX_OVERPROVISIONING, ZNS_LBA_BYTES};
pub use placement::{PlacementEvents, PlacementMode};
pub use gc::GcMode;
pub use zoned::{TenantZoneStats, ZnsReport};

use super::{CmdState, Command, DeviceEvent, IoOp, Outbox};
use crate::flash::Geometry;
use crate::ftl::{CmtPolicy, Ftl, Loc, MapStats};
use super::{FtlView, GcSignal};
use crate::units::{Lpn, Placement, SimTime, TenantId};
use array::{ArrayOptions, FlashArray};
use flusher::Flusher;
use gc::GcBook;
use map_path::MapPath;
use placement::Placer;
use serde::Serialize;

/// Per-tenant counters of the device's data path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TenantDeviceStats {
    pub read_units_flash: u64,
    pub read_units_buffer: u64,
    pub read_units_unmapped: u64,
    pub write_units: u64,
    /// Writes that found their unit still dirty in the buffer (coalesced, no extra program).
    pub write_buffer_hits: u64,
    /// Partial-unit writes that had to read the old unit first.
    pub rmw_reads: u64,
    pub trim_units: u64,
}

/// Drive-wide counters of the flash array.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SsdStats {
    pub flash_page_reads: u64,
    pub flash_programs: u64,
    pub gc_page_reads: u64,
    pub gc_page_programs: u64,
    pub gc_jobs_done: u64,
    /// Time dies spent on GC steps (summed over dies).
    pub gc_busy_ns: u64,
    /// What the GC jobs would have taken one after another: less than `gc_busy_ns` when jobs of
    /// several planes ran together as multi-plane operations.
    pub gc_serial_ns: u64,
    /// Writes that had to wait for buffer space.
    pub writes_stalled: u64,
    /// DFTL: translation pages read for map misses.
    pub map_reads: u64,
    /// DFTL: translation pages programmed when dirty ones left the map cache (map flushes).
    pub map_programs: u64,
    /// DFTL: translation pages GC had to read and rewrite because it moved data whose entries
    /// were not in the map cache (one read and one program each).
    pub gc_map_updates: u64,
    /// DFTL: translation pages GC's moves dirtied in the map cache (written back on eviction).
    pub gc_map_updates_cached: u64,
    /// DFTL: map programs that waited for a free block in their plane.
    pub map_programs_deferred: u64,
    /// Partly filled flash pages programmed for a flush, padded to a whole page (the padding
    /// units are the FTL's `padding_units_programmed`). Reported only when not zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub flush_padded_pages: u64,
    /// Partly filled pages of one placement programmed (padded) because the buffer was full and
    /// no placement of their plane held a whole page (FDP, Streams). Reported only when not zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub placement_padded_pages: u64,
    /// Time flushes waited for buffered data to be programmed, summed over flushes. Reported
    /// only when not zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub flush_wait_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

pub struct Ssd {
    geo: Geometry,
    cfg: SsdConfig,
    ftl: Ftl,
    /// Dies, channels and the host link: the only owner of flash time.
    array: FlashArray,
    /// The write buffer, its admission and draining, flush commands.
    flusher: Flusher,
    /// Address translation in time (DFTL's map cache and translation pages).
    map: MapPath,
    /// GC jobs under way and their counters.
    gc: GcBook,
    /// Which placement each write's data goes to (FDP, Streams).
    placer: Placer,
    /// Tenants the drive was built for, and their data-path counters (grown on first use).
    tenant_count: usize,
    tenants: Vec<TenantDeviceStats>,
    /// Each tenant's default placement ([`Ssd::set_tenant_dspecs`]).
    tenant_placements: Vec<Placement>,
    pages_scratch: Vec<(u32, u32)>,
    /// A zoned namespace's zones (`[device.zns]`); `None` on a conventional drive.
    zoned: Option<zoned::ZonedNs>,
}

/// An SSD configuration that cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SsdError {
    #[error(transparent)]
    Ftl(#[from] crate::ftl::FtlError),
    #[error("map cache: {0}")]
    Cmt(#[from] crate::ftl::cmt::CmtError),
    /// A rule of [`SsdConfig::validate`] broken.
    #[error("{0}")]
    Config(String),
}

impl Ssd {
    /// Builds the drive for `tenants` tenants (the map cache keeps per-tenant state).
    pub fn new(cfg: SsdConfig, tenants: usize) -> Result<Ssd, SsdError> {
        cfg.validate().map_err(SsdError::Config)?;
        let geo = cfg.geometry.clone();
        let mut ftl = Ftl::new(&geo, cfg.ftl_params())?;
        ftl.set_victim_draws(cfg.seed, cfg.gc_rga_candidates);
        let planes = geo.planes() as usize;
        let map = MapPath::new(&cfg.mapping, geo.page_bytes, cfg.logical_units(), &ftl, planes, tenants)?;
        let gc_mode = GcMode::of(&cfg);
        let zoned = cfg.zns.map(zoned::ZonedNs::new).transpose().map_err(SsdError::Config)?;
        Ok(Ssd {
            array: FlashArray::new(
                &geo,
                &cfg.timing,
                gc_mode,
                cfg.host_link_bytes_per_sec,
                ArrayOptions::of(&cfg),
            ),
            flusher: Flusher::new(&cfg),
            gc: GcBook::new(gc_mode, planes),
            placer: Placer::new(&cfg.placement),
            ftl,
            map,
            geo,
            cfg,
            tenant_count: tenants,
            tenants: Vec::new(),
            tenant_placements: Vec::new(),
            pages_scratch: Vec::new(),
            zoned,
        })
    }

    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }
    pub fn ftl_mut(&mut self) -> &mut Ftl {
        &mut self.ftl
    }
    pub fn map_cache(&self) -> &dyn CmtPolicy {
        self.map.cache()
    }
    /// Where this drive runs garbage collection (open-channel: as host I/O).
    pub fn gc_mode(&self) -> GcMode {
        self.gc.mode
    }
    /// The name of the mapping mode and, for DFTL, the map-cache policy (`full`, `dftl/shared`, ...).
    pub fn mapping_name(&self) -> String {
        self.map.name()
    }
    /// `tenant`'s translation counters.
    pub fn map_stats(&self, tenant: TenantId) -> MapStats {
        self.map.tenant_stats(tenant)
    }
    /// Zeroes the map cache's counters (after preconditioning).
    pub fn reset_map_stats(&mut self) {
        self.map.reset_stats();
    }
    /// Zeroes the placement's counters (after preconditioning).
    pub fn reset_placement_stats(&mut self) {
        self.placer.reset_stats();
    }
    /// Each tenant's default placement directive (DSPEC; 0: none), by tenant index: what
    /// preconditioning writes each tenant's data through. Their streams are opened now, in
    /// tenant order, as the drive is built (before it is aged or loaded, so both give the same
    /// streams).
    pub fn set_tenant_dspecs(&mut self, dspecs: Vec<u16>) {
        self.tenant_placements = dspecs.iter().map(|&d| self.placer.place(d, 0)).collect();
    }
    /// The placement of each tenant's default directive, by tenant index.
    pub fn tenant_placements(&self) -> Vec<Placement> {
        self.tenant_placements.clone()
    }
    /// The data placement the drive offers.
    pub fn placement_mode(&self) -> &PlacementMode {
        self.placer.mode()
    }
    /// What the placement did: events, and bytes the host wrote through placement `p`.
    pub fn placement_events(&self) -> PlacementEvents {
        self.placer.events
    }
    pub fn placement_host_bytes(&self, p: Placement) -> u64 {
        self.placer.host_bytes(p)
    }
    /// The drive's counters, assembled from its components'.
    pub fn stats(&self) -> SsdStats {
        let (a, f, m, g) = (self.array.stats(), self.flusher.stats, self.map.stats, &self.gc);
        SsdStats {
            flash_page_reads: a.flash_page_reads,
            flash_programs: a.flash_programs,
            gc_page_reads: g.page_reads,
            gc_page_programs: g.page_programs,
            gc_jobs_done: g.jobs_done,
            gc_busy_ns: a.gc_busy_ns,
            gc_serial_ns: g.serial_ns,
            writes_stalled: f.writes_stalled,
            map_reads: m.map_reads,
            map_programs: m.map_programs,
            gc_map_updates: m.gc_map_updates,
            gc_map_updates_cached: m.gc_map_updates_cached,
            map_programs_deferred: m.map_programs_deferred,
            flush_padded_pages: f.flush_padded_pages,
            placement_padded_pages: f.placement_padded_pages,
            flush_wait_ns: f.flush_wait_ns,
        }
    }
    pub fn config(&self) -> &SsdConfig {
        &self.cfg
    }
    /// Tenants the drive was built for.
    pub fn tenant_count(&self) -> usize {
        self.tenant_count
    }
    pub fn tenant_stats(&self, tenant: TenantId) -> TenantDeviceStats {
        self.tenants.get(tenant.index()).cloned().unwrap_or_default()
    }
    pub fn capacity_bytes(&self) -> u64 {
        self.ftl.logical_units() * self.geo.unit_bytes as u64
    }
    /// Mean fraction of time the channels were busy until `now`.
    pub fn channel_utilisation(&self, now: SimTime) -> f64 {
        self.array.channel_utilisation(now)
    }

    pub fn buffered_dirty_units(&self) -> u32 {
        self.flusher.buf.dirty()
    }

    fn tenant(&mut self, t: usize) -> &mut TenantDeviceStats {
        if t >= self.tenants.len() {
            self.tenants.resize(t + 1, TenantDeviceStats::default());
        }
        &mut self.tenants[t]
    }

    /// Runs a command the controller has just fetched.
    pub fn execute(&mut self, now: SimTime, slot: u32, cmds: &mut [CmdState], out: &mut Outbox) {
        let mut zone = None;
        if self.zoned.is_some() {
            match self.zone_command(now, slot, cmds, out) {
                zoned::ZoneOutcome::Proceed(p) => zone = Some(p),
                zoned::ZoneOutcome::Pad(p) => {
                    cmds[slot as usize].placement = p;
                    if self.flusher.has_waiting() || !self.admit(now, slot, cmds, out) {
                        self.flusher.stall(slot);
                    }
                    return self.flush(now, out);
                }
                zoned::ZoneOutcome::Done => return self.flush(now, out),
            }
        }
        let cmd = cmds[slot as usize].cmd;
        match cmd.op {
            IoOp::Read => {
                let (first, last) = self.unit_range(&cmd);
                let mapped = self.translate(now, cmd.tenant, first, last, false, out);
                if mapped > now {
                    // The controller issues the flash reads when the translation pages are in:
                    // reserved now, they would hold their dies from now on.
                    out.events.push((mapped, DeviceEvent::Mapped(slot)));
                } else {
                    let done = self.read(now, &cmd);
                    out.events.push((done, DeviceEvent::Complete(slot)));
                }
            }
            IoOp::Trim => {
                let unit = self.geo.unit_bytes as u64;
                let (first, end) = (cmd.offset.div_ceil(unit), (cmd.offset + cmd.len) / unit);
                let mapped = if end > first {
                    self.translate(now, cmd.tenant, first as u32, end as u32 - 1, true, out)
                } else {
                    now
                };
                self.trim(now, &cmd, out);
                out.events.push((mapped, DeviceEvent::Complete(slot)));
            }
            IoOp::Flush => self.flusher.begin_flush_cmd(now, slot, out),
            IoOp::Write | IoOp::ZoneAppend => {
                let (first, last) = self.unit_range(&cmd);
                let mapped = self.translate(now, cmd.tenant, first, last, true, out);
                let st = &mut cmds[slot as usize];
                st.done_at = st.done_at.max(mapped);
                // On a zoned drive the zone is the placement; a directive has no say.
                let placement = zone.unwrap_or_else(|| self.placer.place(cmd.dspec, cmd.len));
                st.placement = placement;
                if let Some(every) = self.cfg.ru_update_every {
                    if self.placer.due_ru_update(placement, cmd.len, every) {
                        self.update_reclaim_unit(placement);
                    }
                }
                if self.flusher.has_waiting() || !self.admit(now, slot, cmds, out) {
                    self.flusher.stall(slot);
                }
            }
            IoOp::ZoneReset | IoOp::ZoneFinish | IoOp::ZoneOpen | IoOp::ZoneClose => {
                unreachable!("zone management is done by zone_command; the loader refuses it on other drives")
            }
        }
        self.flush(now, out);
    }

    /// The host's Reclaim Unit Handle Update for `placement` (issued after the write that made
    /// it due): the handle's reclaim unit — its open host block in every plane — is closed and
    /// the next write opens a fresh one; if any was written but not full, *Reclaim Unit Not
    /// Fully Written* is logged. Writes still in the write buffer go to the new reclaim unit
    /// (the specification leaves in-flight data to the controller).
    fn update_reclaim_unit(&mut self, placement: Placement) {
        let mut early = false;
        for plane in self.geo.all_planes() {
            early |= self.ftl.close_host_block(plane, placement);
        }
        self.placer.events.ru_not_fully_written += u64::from(early);
    }

    fn unit_range(&self, cmd: &Command) -> (u32, u32) {
        let unit = self.geo.unit_bytes as u64;
        ((cmd.offset / unit) as u32, ((cmd.offset + cmd.len - 1) / unit) as u32)
    }

    /// Read command `slot`'s translation pages are in: it reads now.
    pub fn read_mapped(&mut self, now: SimTime, slot: u32, cmds: &[CmdState], out: &mut Outbox) {
        let cmd = cmds[slot as usize].cmd;
        debug_assert_eq!(cmd.op, IoOp::Read);
        let done = self.read(now, &cmd);
        out.events.push((done, DeviceEvent::Complete(slot)));
    }

    /// A read whose translation is at hand: units in the buffer come from DRAM, unmapped ones are
    /// zeros, the others are read from flash a page at a time; everything then crosses the host
    /// link.
    fn read(&mut self, now: SimTime, cmd: &Command) -> SimTime {
        let (first, last) = self.unit_range(cmd);
        let unit_bytes = self.geo.unit_bytes as u64;
        let t = cmd.tenant.index();
        let mut pages = std::mem::take(&mut self.pages_scratch);
        pages.clear();
        let mut dram_units = 0u64;
        for lpn in first..=last {
            match self.ftl.lookup(Lpn(lpn)) {
                Loc::Unmapped => self.tenant(t).read_units_unmapped += 1,
                Loc::Buffer(_) => {
                    dram_units += 1;
                    self.tenant(t).read_units_buffer += 1;
                }
                Loc::Flash(ppa) => {
                    self.tenant(t).read_units_flash += 1;
                    let page = self.ftl.page_of(ppa);
                    match pages.iter_mut().find(|(p, _)| *p == page) {
                        Some(e) => e.1 += 1,
                        None => pages.push((page, 1)),
                    }
                }
            }
        }
        let mut done = now;
        if dram_units > 0 {
            done = done.max(self.array.link_out(now, now, dram_units * unit_bytes));
        }
        for &(page, units) in &pages {
            let bytes = units as u64 * unit_bytes;
            let at_controller = self.array.reserve_read(now, now, page, bytes);
            done = done.max(self.array.link_out(now, at_controller, bytes));
        }
        // Unmapped units (zeros) still cross the link.
        let zero_units = (last - first + 1) as u64 - dram_units - pages.iter().map(|p| p.1 as u64).sum::<u64>();
        if zero_units > 0 {
            done = done.max(self.array.link_out(now, now, zero_units * unit_bytes));
        }
        self.pages_scratch = pages;
        debug_assert!(done >= now);
        done
    }

    fn trim(&mut self, now: SimTime, cmd: &Command, out: &mut Outbox) {
        let unit = self.geo.unit_bytes as u64;
        // Only whole units are deallocated; partial ones keep their data, as drives do.
        let first = cmd.offset.div_ceil(unit);
        let end = (cmd.offset + cmd.len) / unit;
        for lpn in first..end {
            let l = Lpn(lpn as u32);
            if let Loc::Buffer(s) = self.ftl.unmap(l) {
                self.flusher.drop_dirty(now, s, out);
            }
        }
        self.tenant(cmd.tenant.index()).trim_units += end.saturating_sub(first);
    }

    pub fn check_invariants(&self) {
        self.ftl.check_invariants();
        self.map.check_invariants();
        for (lpn_slot, lpn) in self.flusher.buf.dirty_lpns() {
            assert_eq!(self.ftl.lookup(lpn), Loc::Buffer(lpn_slot), "dirty slot {} not mapped from its LPN", lpn_slot.0);
        }
        let (jobs, program_units) = self.array.check_invariants(self.cfg.program_queue_depth);
        self.flusher.check_invariants(program_units);
        assert_eq!(jobs, self.gc.plane_jobs, "per-plane GC job counts out of sync");
        assert_eq!(self.gc.jobs, jobs.iter().map(|&n| n as u32).sum::<u32>(), "GC job count out of sync");
    }
}

/// What pblk knows of an open-channel drive, or FDP's log pages tell of an FDP drive.
impl FtlView for Ssd {
    fn is_update(&self, offset: u64, len: u64) -> bool {
        if len == 0 {
            return false;
        }
        let unit = self.geo.unit_bytes as u64;
        let (first, last) = (offset / unit, (offset + len - 1) / unit);
        (first..=last).any(|l| !matches!(self.ftl.lookup(Lpn(l as u32)), Loc::Unmapped))
    }

    fn gc_signal(&self) -> GcSignal {
        match self.gc_mode() {
            GcMode::HostIo => GcSignal::Running(self.gc.jobs > 0),
            GcMode::Background => GcSignal::BlocksErased(self.ftl.stats().erases),
        }
    }

    fn gc_units_moved(&self, tenant: TenantId) -> u64 {
        self.ftl.tenant_gc(tenant).units_moved
    }

    fn unit_bytes(&self) -> u64 {
        self.geo.unit_bytes as u64
    }
}

#[cfg(test)]
mod tests;
