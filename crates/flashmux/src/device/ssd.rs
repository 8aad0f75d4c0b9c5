//! The SSD back end: controller data path, DRAM write buffer, FTL, dies and channels.
//!
//! Timing model (all in `docs/MODEL.md`):
//! - **Reads** of a flash page occupy the die for tR and then the die's channel for the transfer
//!   (channels are reserved at the earliest free gap, see [`Timeline`]); the data then crosses the
//!   host link. Units in the write buffer are served from DRAM; unmapped units return zeros
//!   without touching flash.
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

use super::buffer::WriteBuffer;
use super::{CmdState, Command, DeviceEvent, IoOp, Outbox};
use crate::flash::{Geometry, Timeline, Timing};
use crate::ftl::{cmt, CmtPolicy, Eviction, Ftl, FtlParams, FullMap, GcJob, Loc, MapStats, MappingConfig, VictimPolicy};
use crate::host::HostFtl;
use crate::units::{Lpn, Nanos, SimTime, TenantId};
use serde::Serialize;
use std::collections::VecDeque;

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
    /// submission path on host cores, and the host scheduler may ask the FTL ([`HostFtl`]).
    /// Hashes as absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub open_channel: bool,
}

impl SsdConfig {
    /// Logical mapping units exported: physical / (1 + op), rounded down to whole stripes of
    /// one flash page per plane so every plane holds the same share.
    pub fn logical_units(&self) -> u64 {
        let g = &self.geometry;
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
        }
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
    /// Time flushes waited for buffered data to be programmed, summed over flushes. Reported
    /// only when not zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub flush_wait_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A flush waiting for the data the buffer held when it arrived to be programmed.
struct FlushCmd {
    slot: u32,
    /// Data born (inserted) before this must be on flash.
    before: u64,
    /// Buffer slots still holding such data.
    remaining: u32,
    arrived: SimTime,
}

struct GcRun {
    job: GcJob,
    reads_done: u32,
    progs_done: u32,
    erased: bool,
    /// Set once every step is committed: when the erase ends.
    end: Option<SimTime>,
}

impl GcRun {
    fn next_step(&self, t: &Timing) -> Option<(Nanos, Step)> {
        let (r, p) = (self.job.read_pages, self.job.program_pages);
        // Interleave reads and programs in proportion: read while reads are not ahead.
        if self.reads_done < r && (self.reads_done as u64 * p as u64 <= self.progs_done as u64 * r as u64 || self.progs_done >= p) {
            Some((t.read, Step::Read))
        } else if self.progs_done < p {
            Some((t.program, Step::Program))
        } else if !self.erased {
            Some((t.erase, Step::Erase))
        } else {
            None
        }
    }
    fn remaining(&self, t: &Timing) -> Nanos {
        let reads = (self.job.read_pages - self.reads_done) as u64;
        let progs = (self.job.program_pages - self.progs_done) as u64;
        t.read * reads + t.program * progs + if self.erased { Nanos::ZERO } else { t.erase }
    }
}

#[derive(Clone, Copy)]
enum Step {
    Read,
    Program,
    Erase,
}

#[derive(Default)]
struct Die {
    busy_until: SimTime,
    /// GC jobs running together (multi-plane): at most one per plane, none finished.
    gc_gang: Vec<GcRun>,
    /// GC jobs waiting for the running job of their plane.
    gc_queued: VecDeque<GcRun>,
    /// GC jobs whose steps are all committed, until their erase ends.
    gc_finished: Vec<GcRun>,
    gc_check_scheduled: bool,
    /// Buffer slots of the programs in flight, oldest first.
    inflight_slots: VecDeque<u32>,
    /// (end, units) of each program in flight; a die finishes them in order.
    inflight_progs: VecDeque<(SimTime, u32)>,
    in_ready_queue: bool,
}

/// Per-tenant translation counters the map cache does not keep itself.
#[derive(Clone, Debug, Default)]
struct TenantMap {
    commands_delayed: u64,
    wait_ns: u64,
    /// Bit per translation page the tenant looked up, and how many are set.
    touched: Vec<u64>,
    pages_touched: u64,
    /// Translation pages GC read and rewrote because it moved this tenant's data.
    gc_map_updates: u64,
}

pub struct Ssd {
    geo: Geometry,
    timing: Timing,
    cfg: SsdConfig,
    ftl: Ftl,
    map: Box<dyn CmtPolicy>,
    /// Translation pages are on flash (DFTL): misses cost flash reads, evictions programs.
    dftl: bool,
    /// L2P entries per translation page (for `full`, what DFTL would use with 4-byte entries, so
    /// lookups are counted alike).
    map_entries: u32,
    /// When each translation page's load from flash completes (DFTL).
    map_ready: Vec<SimTime>,
    map_tenants: Vec<TenantMap>,
    /// Map programs waiting for room in their plane, per plane.
    map_pending: Vec<VecDeque<u32>>,
    evicted: Vec<Eviction>,
    gc_updates: Vec<(u32, u16)>,
    buf: WriteBuffer,
    dies: Vec<Die>,
    channels: Vec<Timeline>,
    link_in: Timeline,
    link_out: Timeline,
    /// Writes waiting for buffer space, oldest first (command slots).
    waiting: VecDeque<u32>,
    /// Dies that may be able to start a program.
    ready: VecDeque<u32>,
    tenants: Vec<TenantDeviceStats>,
    stats: SsdStats,
    pages_scratch: Vec<(u32, u32)>,
    /// GC jobs queued or running per plane, and in all.
    plane_gc_jobs: Vec<u16>,
    gc_jobs: u32,
    /// Whether the flusher is draining the buffer (always, under `FlushPolicy::Page`).
    draining: bool,
    /// Flushes waiting for buffered data, in arrival order.
    flush_cmds: VecDeque<FlushCmd>,
}

/// An SSD configuration that cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SsdError {
    #[error(transparent)]
    Ftl(#[from] crate::ftl::FtlError),
    #[error("map cache: {0}")]
    Cmt(#[from] crate::ftl::cmt::CmtError),
}

impl Ssd {
    /// Builds the drive for `tenants` tenants (the map cache keeps per-tenant state).
    pub fn new(cfg: SsdConfig, tenants: usize) -> Result<Ssd, SsdError> {
        let geo = cfg.geometry.clone();
        let ftl = Ftl::new(&geo, cfg.ftl_params())?;
        let (map, dftl, map_entries): (Box<dyn CmtPolicy>, bool, u32) = match &cfg.mapping {
            MappingConfig::Full => (Box::new(FullMap::new(tenants)), false, geo.page_bytes / 4),
            MappingConfig::Dftl { cmt: c, .. } => {
                (cmt::build(c, tenants, ftl.map_pages())?, true, ftl.map_entries_per_page())
            }
        };
        let map_pages = ftl.map_pages() as usize;
        let dies = (0..geo.dies()).map(|_| Die::default()).collect();
        let planes = geo.planes() as usize;
        Ok(Ssd {
            timing: cfg.timing.clone(),
            buf: WriteBuffer::new(cfg.buffer_units, geo.planes()),
            channels: vec![Timeline::new(); geo.channels as usize],
            link_in: Timeline::new(),
            link_out: Timeline::new(),
            dies,
            ftl,
            map,
            dftl,
            map_entries: map_entries.max(1),
            map_ready: vec![SimTime::ZERO; map_pages],
            map_tenants: {
                let pages = cfg.logical_units().div_ceil(map_entries.max(1) as u64) as usize;
                (0..tenants).map(|_| TenantMap { touched: vec![0; pages.div_ceil(64)], ..TenantMap::default() }).collect()
            },
            map_pending: vec![VecDeque::new(); planes],
            evicted: Vec::new(),
            gc_updates: Vec::new(),
            geo,
            cfg,
            waiting: VecDeque::new(),
            ready: VecDeque::new(),
            tenants: Vec::new(),
            stats: SsdStats::default(),
            pages_scratch: Vec::new(),
            plane_gc_jobs: vec![0; planes],
            gc_jobs: 0,
            draining: false,
            flush_cmds: VecDeque::new(),
        })
    }

    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }
    pub fn ftl_mut(&mut self) -> &mut Ftl {
        &mut self.ftl
    }
    pub fn map_cache(&self) -> &dyn CmtPolicy {
        self.map.as_ref()
    }
    /// The name of the mapping mode and, for DFTL, the map-cache policy (`full`, `dftl/shared`, ...).
    pub fn mapping_name(&self) -> String {
        if self.dftl {
            format!("dftl/{}", self.map.name())
        } else {
            "full".into()
        }
    }
    /// `tenant`'s translation counters.
    pub fn map_stats(&self, tenant: TenantId) -> MapStats {
        let c = self.map.stats(tenant);
        let empty = TenantMap::default();
        let w = self.map_tenants.get(tenant.index()).unwrap_or(&empty);
        MapStats {
            lookups: c.lookups,
            hits: c.hits,
            misses: c.misses,
            miss_ratio: if c.lookups > 0 { c.misses as f64 / c.lookups as f64 } else { 0.0 },
            map_loads: if self.dftl { c.misses } else { 0 },
            map_flushes: c.dirty_evictions,
            commands_delayed: w.commands_delayed,
            map_wait_ns: w.wait_ns,
            pages_touched: w.pages_touched,
            gc_map_updates: w.gc_map_updates,
            cmt_pages: self.map.held(tenant),
            cmt_allocation: self.map.allocation(tenant),
        }
    }
    /// Zeroes the map cache's counters (after preconditioning).
    pub fn reset_map_stats(&mut self) {
        self.map.reset_stats();
        for w in &mut self.map_tenants {
            let words = w.touched.len();
            *w = TenantMap { touched: vec![0; words], ..TenantMap::default() };
        }
    }
    pub fn stats(&self) -> &SsdStats {
        &self.stats
    }
    pub fn config(&self) -> &SsdConfig {
        &self.cfg
    }
    pub fn tenant_stats(&self, tenant: usize) -> TenantDeviceStats {
        self.tenants.get(tenant).cloned().unwrap_or_default()
    }
    pub fn capacity_bytes(&self) -> u64 {
        self.ftl.logical_units() * self.geo.unit_bytes as u64
    }
    /// Mean fraction of time the channels were busy until `now`.
    pub fn channel_utilisation(&self, now: SimTime) -> f64 {
        if now == SimTime::ZERO {
            return 0.0;
        }
        let busy: u64 = self.channels.iter().map(|c| c.busy_total().0).sum();
        (busy as f64 / (now.0 as f64 * self.channels.len() as f64)).min(1.0)
    }

    pub fn buffered_dirty_units(&self) -> u32 {
        self.buf.dirty()
    }

    fn tenant(&mut self, t: usize) -> &mut TenantDeviceStats {
        if t >= self.tenants.len() {
            self.tenants.resize(t + 1, TenantDeviceStats::default());
        }
        &mut self.tenants[t]
    }

    /// Runs a command the controller has just fetched.
    pub fn execute(&mut self, now: SimTime, slot: u32, cmds: &mut [CmdState], out: &mut Outbox) {
        let cmd = cmds[slot as usize].cmd;
        match cmd.op {
            IoOp::Read => {
                let (first, last) = self.unit_range(&cmd);
                let mapped = self.translate(now, cmd.tenant, first, last, false, out);
                let done = self.read(now, mapped, &cmd);
                out.events.push((done, DeviceEvent::Complete(slot)));
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
            IoOp::Flush => self.begin_flush_cmd(now, slot, out),
            IoOp::Write => {
                let (first, last) = self.unit_range(&cmd);
                let mapped = self.translate(now, cmd.tenant, first, last, true, out);
                let st = &mut cmds[slot as usize];
                st.done_at = st.done_at.max(mapped);
                if !self.waiting.is_empty() || !self.admit(now, slot, cmds, out) {
                    self.stats.writes_stalled += 1;
                    self.waiting.push_back(slot);
                }
            }
        }
        self.flush(now, out);
    }

    fn unit_range(&self, cmd: &Command) -> (u32, u32) {
        let unit = self.geo.unit_bytes as u64;
        ((cmd.offset / unit) as u32, ((cmd.offset + cmd.len - 1) / unit) as u32)
    }

    /// Looks up the L2P entries of units `first..=last` for `tenant` (`dirty`: the command
    /// changes them) and returns when all of them are in the controller. Each translation page
    /// the command spans is one map-cache lookup; a miss reads the page from flash (queued on its
    /// die like any read), and dirty pages the cache evicts are programmed back.
    fn translate(&mut self, now: SimTime, tenant: TenantId, first: u32, last: u32, dirty: bool, out: &mut Outbox) -> SimTime {
        let mut ready = now;
        for mp in first / self.map_entries..=last / self.map_entries {
            let hit = self.map.access(now, tenant, mp, dirty, &mut self.evicted);
            if let Some(w) = self.map_tenants.get_mut(tenant.index()) {
                let (word, bit) = (mp as usize / 64, 1u64 << (mp % 64));
                if w.touched[word] & bit == 0 {
                    w.touched[word] |= bit;
                    w.pages_touched += 1;
                }
            }
            if !self.dftl {
                continue;
            }
            if hit {
                // Still arriving for an earlier command?
                ready = ready.max(self.map_ready[mp as usize]);
            } else {
                let page = self.ftl.map_location(mp);
                let end = self.read_page(now, now, page, self.geo.page_bytes as u64);
                self.stats.map_reads += 1;
                self.map_ready[mp as usize] = end;
                ready = ready.max(end);
            }
            self.flush_evicted(now);
        }
        if ready > now {
            let w = &mut self.map_tenants[tenant.index()];
            w.commands_delayed += 1;
            w.wait_ns += ready.0 - now.0;
        }
        if self.dftl {
            // Map programs may have opened blocks and started GC.
            self.schedule_new_gc(now, out);
        }
        ready
    }

    /// Programs the dirty translation pages the map cache has evicted.
    fn flush_evicted(&mut self, now: SimTime) {
        for i in 0..self.evicted.len() {
            let e = self.evicted[i];
            if e.dirty {
                self.program_map_page(now, now, e.page);
                self.stats.map_programs += 1;
            }
        }
        self.evicted.clear();
    }

    /// Writes translation page `mp` to flash once `ready` (its contents are in the controller):
    /// channel transfer, then tPROG on its die. Without a free block in its plane it waits
    /// (in the controller's SRAM) for GC to free one. The caller schedules any GC it starts.
    fn program_map_page(&mut self, now: SimTime, ready: SimTime, mp: u32) {
        let plane = self.ftl.map_plane(mp);
        if !self.ftl.can_program_map(plane) {
            self.stats.map_programs_deferred += 1;
            self.map_pending[plane as usize].push_back(mp);
            return;
        }
        self.ftl.program_map(plane, mp);
        let die = self.geo.die_of_plane(plane);
        let ch = self.geo.channel_of_die(die) as usize;
        let xfer = Nanos::for_transfer(self.geo.page_bytes as u64, self.timing.channel_bytes_per_sec) + self.timing.command;
        let (_, loaded) = self.channels[ch].reserve(now, ready, xfer);
        self.catch_up_gc(die, loaded);
        let d = &mut self.dies[die as usize];
        d.busy_until = loaded.max(d.busy_until) + self.timing.program;
    }

    /// Map programs that were waiting for room: those whose plane has room now.
    fn retry_map_programs(&mut self, now: SimTime) {
        for plane in 0..self.map_pending.len() {
            while let Some(&mp) = self.map_pending[plane].front() {
                if !self.ftl.can_program_map(plane as u32) {
                    break;
                }
                self.map_pending[plane].pop_front();
                self.program_map_page(now, now, mp);
            }
        }
    }

    /// GC moved data: its entries changed. Cached translation pages just become dirty; the
    /// others are read, updated and written back (one read and one program per page per victim).
    fn apply_gc_map_updates(&mut self, now: SimTime) -> bool {
        self.ftl.take_gc_map_updates(&mut self.gc_updates);
        if self.gc_updates.is_empty() {
            return false;
        }
        let updates = std::mem::take(&mut self.gc_updates);
        for &(mp, owner) in &updates {
            if self.map.update_if_cached(mp) {
                self.stats.gc_map_updates_cached += 1;
                continue;
            }
            let page = self.ftl.map_location(mp);
            let end = self.read_page(now, now, page, self.geo.page_bytes as u64);
            self.program_map_page(now, end, mp);
            self.stats.gc_map_updates += 1;
            if let Some(w) = self.map_tenants.get_mut(owner as usize) {
                w.gc_map_updates += 1;
            }
        }
        self.gc_updates = updates;
        self.gc_updates.clear();
        true
    }

    fn read(&mut self, now: SimTime, mapped: SimTime, cmd: &Command) -> SimTime {
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
        let mut done = mapped;
        if dram_units > 0 {
            done = done.max(self.link_out.reserve(now, mapped, self.link_time(dram_units * unit_bytes)).1);
        }
        for &(page, units) in &pages {
            let bytes = units as u64 * unit_bytes;
            let at_controller = self.read_page(now, mapped, page, bytes);
            let (_, end) = self.link_out.reserve(now, at_controller, self.link_time(bytes));
            done = done.max(end);
        }
        // Unmapped units (zeros) still cross the link.
        let zero_units = (last - first + 1) as u64 - dram_units - pages.iter().map(|p| p.1 as u64).sum::<u64>();
        if zero_units > 0 {
            done = done.max(self.link_out.reserve(now, mapped, self.link_time(zero_units * unit_bytes)).1);
        }
        self.pages_scratch = pages;
        done
    }

    fn link_time(&self, bytes: u64) -> Nanos {
        Nanos::for_transfer(bytes, self.cfg.host_link_bytes_per_sec)
    }

    /// Reads `bytes` of global flash page `page` into the controller; returns when the data is there.
    fn read_page(&mut self, now: SimTime, ready: SimTime, page: u32, bytes: u64) -> SimTime {
        let block = page / self.geo.pages_per_block;
        let plane = block / self.geo.blocks_per_plane;
        let die = self.geo.die_of_plane(plane);
        self.catch_up_gc(die, now);
        self.gc_turn(die);
        let start = ready.max(self.dies[die as usize].busy_until);
        let array_done = start + self.timing.command + self.timing.read;
        let xfer = Nanos::for_transfer(bytes, self.timing.channel_bytes_per_sec) + self.timing.command;
        let ch = self.geo.channel_of_die(die) as usize;
        let (_, end) = self.channels[ch].reserve(now, array_done, xfer);
        // The page register holds the data until it has left over the channel.
        self.dies[die as usize].busy_until = end;
        self.stats.flash_page_reads += 1;
        end
    }

    /// Moves as much of a write as fits into the buffer. Returns whether the whole write is in;
    /// then its completion is scheduled.
    fn admit(&mut self, now: SimTime, slot: u32, cmds: &mut [CmdState], out: &mut Outbox) -> bool {
        let st = &mut cmds[slot as usize];
        let cmd = st.cmd;
        let (first, last) = self.unit_range(&cmd);
        let unit = self.geo.unit_bytes as u64;
        let t = cmd.tenant.index();
        let owner = cmd.tenant.0;
        let mut lpn = first + st.progress;
        let mut admitted_bytes = 0u64;
        while lpn <= last {
            let l = Lpn(lpn);
            match self.ftl.lookup(l) {
                Loc::Buffer(s) => {
                    self.buf.rewrite(s, owner);
                    self.tenant(t).write_buffer_hits += 1;
                }
                loc => {
                    let plane = self.ftl.plane_of(l);
                    let Some(s) = self.buf.insert(l, owner, plane) else { break };
                    let unit_start = lpn as u64 * unit;
                    let partial = cmd.offset > unit_start || cmd.offset + cmd.len < unit_start + unit;
                    if let (true, Loc::Flash(ppa)) = (partial, loc) {
                        // Read-modify-write: the rest of the unit comes from flash.
                        let page = self.ftl.page_of(ppa);
                        let end = self.read_page(now, now, page, unit);
                        st.done_at = st.done_at.max(end);
                        self.tenant(t).rmw_reads += 1;
                    }
                    self.ftl.set_buffered(l, s);
                    self.mark_die(self.geo.die_of_plane(plane));
                }
            }
            self.tenant(t).write_units += 1;
            let unit_end = (lpn as u64 + 1) * unit;
            admitted_bytes += unit_end.min(cmd.offset + cmd.len) - (lpn as u64 * unit).max(cmd.offset);
            lpn += 1;
        }
        let st = &mut cmds[slot as usize];
        st.progress = lpn - first;
        if admitted_bytes > 0 {
            let (_, end) = self.link_in.reserve(now, now, self.link_time(admitted_bytes));
            st.done_at = st.done_at.max(end);
        }
        if lpn > last {
            out.events.push((st.done_at.max(now), DeviceEvent::Complete(slot)));
            true
        } else {
            false
        }
    }

    fn trim(&mut self, now: SimTime, cmd: &Command, out: &mut Outbox) {
        let unit = self.geo.unit_bytes as u64;
        // Only whole units are deallocated; partial ones keep their data, as drives do.
        let first = cmd.offset.div_ceil(unit);
        let end = (cmd.offset + cmd.len) / unit;
        for lpn in first..end {
            let l = Lpn(lpn as u32);
            if let Loc::Buffer(s) = self.ftl.unmap(l) {
                let born = self.buf.born(s);
                self.buf.discard(s);
                self.flush_data_left(now, born, out);
            }
        }
        self.tenant(cmd.tenant.index()).trim_units += end.saturating_sub(first);
    }

    fn mark_die(&mut self, die: u32) {
        let d = &mut self.dies[die as usize];
        if !d.in_ready_queue {
            d.in_ready_queue = true;
            self.ready.push_back(die);
        }
    }

    /// A plane takes host programs when it has a flash page of dirty units and the flush policy
    /// wants them (`policy`) — or a waiting flush needs its dirty data, however little —, room
    /// for a page, and no GC job of its own pending (GC goes before buffered writes in that plane).
    fn plane_ready(&self, plane: u32, policy: bool) -> bool {
        let upp = self.geo.units_per_page();
        let dirty = self.buf.dirty_in_plane(plane);
        (self.cfg.open_channel || self.plane_gc_jobs[plane as usize] == 0)
            && dirty > 0
            && ((policy && dirty >= upp) || self.flush_needs(plane))
            && self.ftl.can_program_host(plane, upp)
    }

    /// Whether a waiting flush needs `plane`'s oldest dirty unit on flash.
    fn flush_needs(&self, plane: u32) -> bool {
        let Some(f) = self.flush_cmds.back() else { return false };
        self.buf.oldest_dirty_born(plane).is_some_and(|b| b < f.before)
    }

    fn die_can_program(&self, die: u32, policy: bool) -> bool {
        let d = &self.dies[die as usize];
        let ppd = self.geo.planes_per_die;
        (d.inflight_progs.len() as u32) < self.cfg.program_queue_depth
            && (die * ppd..(die + 1) * ppd).any(|p| self.plane_ready(p, policy))
    }

    /// Whether the flush policy wants dirty data programmed now (updates the watermark state).
    fn wants_flush(&mut self) -> bool {
        let FlushPolicy::Watermark { high, low } = self.cfg.flush else { return true };
        let fill = self.buf.dirty() as f64 / self.buf.capacity() as f64;
        // Dies with dirty data stay in the ready queue while the buffer fills (they were marked
        // when the data arrived), so draining starts on all of them at once.
        if !self.draining && fill >= high {
            self.draining = true;
        } else if self.draining && fill <= low {
            self.draining = false;
        }
        self.draining
    }

    /// Starts programs on every die that can take one, round-robin, while the flush policy or a
    /// waiting flush wants.
    fn flush(&mut self, now: SimTime, out: &mut Outbox) {
        loop {
            let policy = self.wants_flush();
            if !policy && self.flush_cmds.is_empty() {
                break;
            }
            let Some(die) = self.ready.pop_front() else { break };
            self.dies[die as usize].in_ready_queue = false;
            if !self.die_can_program(die, policy) {
                continue;
            }
            self.program(now, die, policy, out);
            if self.die_can_program(die, policy) {
                self.mark_die(die);
            }
        }
    }

    /// One (multi-plane) program of a flash page per ready plane of `die`.
    fn program(&mut self, now: SimTime, die: u32, policy: bool, out: &mut Outbox) {
        let ppd = self.geo.planes_per_die;
        let (mut units, mut pages) = (0u32, 0u64);
        for plane in die * ppd..(die + 1) * ppd {
            if self.plane_ready(plane, policy) {
                units += self.take_page(die, plane);
                pages += 1;
            }
        }
        // A padded page crosses the channel whole.
        let bytes = pages * self.geo.page_bytes as u64;
        let ch = self.geo.channel_of_die(die) as usize;
        let xfer = Nanos::for_transfer(bytes, self.timing.channel_bytes_per_sec) + self.timing.command;
        let (_, loaded) = self.channels[ch].reserve(now, now, xfer);
        // GC steps of other planes that start while the data is loading go first.
        self.catch_up_gc(die, loaded);
        self.gc_turn(die);
        let d = &mut self.dies[die as usize];
        let start = loaded.max(d.busy_until);
        let end = start + self.timing.program;
        d.busy_until = end;
        d.inflight_progs.push_back((end, units));
        self.stats.flash_programs += 1;
        out.events.push((end, DeviceEvent::ProgramDone(die)));
        self.schedule_new_gc(now, out);
    }

    /// Takes up to a flash page of `plane`'s oldest dirty units into a program of `die`; a page
    /// a flush needs before it is full is padded. Returns the units taken.
    fn take_page(&mut self, die: u32, plane: u32) -> u32 {
        let upp = self.geo.units_per_page();
        let mut taken = 0;
        while taken < upp {
            let Some(u) = self.buf.take_dirty(plane) else { break };
            self.ftl.program_host(plane, u.lpn, u.owner);
            self.dies[die as usize].inflight_slots.push_back(u.slot);
            taken += 1;
        }
        if taken < upp {
            self.ftl.pad_host_page(plane);
            self.stats.flush_padded_pages += 1;
        }
        taken
    }

    /// A Flush command: done now if the buffer is protected or empty; otherwise it waits until
    /// every unit the buffer holds now has been programmed, and the flusher takes partly filled
    /// pages meanwhile.
    fn begin_flush_cmd(&mut self, now: SimTime, slot: u32, out: &mut Outbox) {
        let held = self.buf.occupied();
        if !self.cfg.volatile_write_cache || held == 0 {
            out.events.push((now, DeviceEvent::Complete(slot)));
            return;
        }
        self.flush_cmds.push_back(FlushCmd { slot, before: self.buf.next_born(), remaining: held, arrived: now });
        self.mark_dirty_dies();
    }

    /// Puts every die with dirty data in the flusher's queue.
    fn mark_dirty_dies(&mut self) {
        for plane in 0..self.geo.planes() {
            if self.buf.dirty_in_plane(plane) > 0 {
                self.mark_die(self.geo.die_of_plane(plane));
            }
        }
    }

    /// A buffer slot that held data born `born` is free: flushes waiting for it may complete.
    /// A later flush waits for a superset of an earlier one's data, so they complete in order.
    fn flush_data_left(&mut self, now: SimTime, born: u64, out: &mut Outbox) {
        if self.flush_cmds.is_empty() {
            return;
        }
        for f in self.flush_cmds.iter_mut().filter(|f| born < f.before) {
            f.remaining -= 1;
        }
        while self.flush_cmds.front().is_some_and(|f| f.remaining == 0) {
            let f = self.flush_cmds.pop_front().expect("front checked");
            debug_assert_eq!(self.buf.occupied_born_before(f.before), 0, "flush completes with its data buffered");
            self.stats.flush_wait_ns += now.since(f.arrived).0;
            out.events.push((now, DeviceEvent::Complete(f.slot)));
            if self.flush_cmds.is_empty() {
                // The flusher dropped dies the policy did not want while flushes forced it.
                self.mark_dirty_dies();
            }
        }
    }

    /// A program finished: its buffer slots are free; waiting writes may now fit.
    pub fn program_done(&mut self, now: SimTime, die: u32, cmds: &mut [CmdState], out: &mut Outbox) {
        let (end, units) = self.dies[die as usize].inflight_progs.pop_front().expect("program completion without a program");
        debug_assert!(end <= now);
        for _ in 0..units {
            let slot = self.dies[die as usize].inflight_slots.pop_front().expect("slot of a finished program");
            let born = self.buf.born(slot);
            self.buf.release(slot);
            self.flush_data_left(now, born, out);
        }
        self.mark_die(die);
        self.admit_waiting(now, cmds, out);
        self.flush(now, out);
    }

    fn admit_waiting(&mut self, now: SimTime, cmds: &mut [CmdState], out: &mut Outbox) {
        while let Some(&slot) = self.waiting.front() {
            if !self.admit(now, slot, cmds, out) {
                break;
            }
            self.waiting.pop_front();
        }
    }

    /// Queues GC jobs the FTL has started on their dies, and the map updates their moves need
    /// (whose programs may start more GC: repeated until there is none).
    fn schedule_new_gc(&mut self, now: SimTime, out: &mut Outbox) {
        loop {
            self.schedule_gc_jobs(now, out);
            if !self.apply_gc_map_updates(now) {
                break;
            }
        }
    }

    fn schedule_gc_jobs(&mut self, now: SimTime, out: &mut Outbox) {
        while let Some(job) = self.ftl.take_gc_job() {
            let die = self.geo.die_of_plane(job.plane);
            let run = GcRun { job, reads_done: 0, progs_done: 0, erased: false, end: None };
            self.stats.gc_serial_ns += run.remaining(&self.timing).0;
            self.plane_gc_jobs[job.plane as usize] += 1;
            self.gc_jobs += 1;
            self.stats.gc_page_reads += job.read_pages as u64;
            self.stats.gc_page_programs += job.program_pages as u64;
            let d = &mut self.dies[die as usize];
            if d.gc_gang.iter().any(|r| r.job.plane == job.plane) {
                d.gc_queued.push_back(run);
            } else {
                d.gc_gang.push(run);
            }
            self.schedule_gc_check(now, die, out);
        }
    }

    fn schedule_gc_check(&mut self, now: SimTime, die: u32, out: &mut Outbox) {
        let d = &mut self.dies[die as usize];
        if d.gc_check_scheduled {
            return;
        }
        // The earliest any job can end; a check that comes early just looks again later.
        // (Queued jobs end after the running job of their plane.)
        let start = now.max(d.busy_until);
        let running = d.gc_gang.iter().map(|r| start + r.remaining(&self.timing));
        let Some(at) = d.gc_finished.iter().filter_map(|r| r.end).chain(running).min() else { return };
        d.gc_check_scheduled = true;
        out.events.push((at, DeviceEvent::GcCheck(die)));
    }

    /// Commits the GC steps of `die` that start before `t`: the die was free then, so GC ran.
    ///
    /// GC jobs of different planes of the die step together, as multi-plane operations: each
    /// step advances the running job of every plane by one of its own steps and takes as long as
    /// the longest of them. Jobs of one plane run one after another.
    fn catch_up_gc(&mut self, die: u32, t: SimTime) {
        while self.dies[die as usize].busy_until < t {
            if !self.commit_gc_step(die) {
                break;
            }
        }
    }

    /// Open-channel mode: GC is host I/O (pblk's GC reads valid data into the host and writes it
    /// back through the RWB), queued at the LUN with the users' I/O rather than run in the
    /// die's idle time. A user operation on a die with GC under way therefore waits for one GC
    /// step first: the two streams take turns, as two FIFO submitters do.
    fn gc_turn(&mut self, die: u32) {
        if self.cfg.open_channel {
            self.commit_gc_step(die);
        }
    }

    /// Runs the next step of `die`'s GC gang from `busy_until`; false if the die has no GC step.
    fn commit_gc_step(&mut self, die: u32) -> bool {
        let timing = &self.timing;
        let d = &mut self.dies[die as usize];
        let Some(dur) = d.gc_gang.iter().filter_map(|r| r.next_step(timing)).map(|(dur, _)| dur).max() else {
            return false;
        };
        d.busy_until += dur;
        self.stats.gc_busy_ns += dur.0;
        let mut i = 0;
        while i < d.gc_gang.len() {
            let run = &mut d.gc_gang[i];
            match run.next_step(timing).map(|(_, step)| step) {
                Some(Step::Read) => run.reads_done += 1,
                Some(Step::Program) => run.progs_done += 1,
                Some(Step::Erase) => run.erased = true,
                None => {}
            }
            if run.next_step(timing).is_some() {
                i += 1;
                continue;
            }
            let mut done = d.gc_gang.swap_remove(i);
            done.end = Some(d.busy_until);
            let plane = done.job.plane;
            d.gc_finished.push(done);
            if let Some(q) = d.gc_queued.iter().position(|r| r.job.plane == plane) {
                let next = d.gc_queued.remove(q).expect("position found");
                // Keep gang order stable: the promoted job takes the finished one's place.
                d.gc_gang.push(next);
                let last = d.gc_gang.len() - 1;
                d.gc_gang.swap(i, last);
                i += 1;
            }
        }
        true
    }

    /// The estimated end of a GC job on `die` has come: finish what is done, re-check the rest.
    pub fn gc_check(&mut self, now: SimTime, die: u32, cmds: &mut [CmdState], out: &mut Outbox) {
        self.dies[die as usize].gc_check_scheduled = false;
        // Steps starting exactly now run too: nothing else claimed the die first.
        self.catch_up_gc(die, now + Nanos(1));
        let d = &mut self.dies[die as usize];
        let mut i = 0;
        while i < d.gc_finished.len() {
            match d.gc_finished[i].end {
                Some(end) if end <= now => {
                    // `remove`, not `swap_remove`: erases finish in the order their jobs did.
                    let run = d.gc_finished.remove(i);
                    self.plane_gc_jobs[run.job.plane as usize] -= 1;
                    self.gc_jobs -= 1;
                    self.stats.gc_jobs_done += 1;
                    self.ftl.finish_erase(run.job.victim);
                }
                _ => i += 1,
            }
        }
        // Finishing an erase may let GC continue elsewhere in the plane, and map programs that
        // were waiting for a free block go now.
        self.retry_map_programs(now);
        self.schedule_new_gc(now, out);
        self.schedule_gc_check(now, die, out);
        self.mark_die(die);
        self.admit_waiting(now, cmds, out);
        self.flush(now, out);
    }

    pub fn check_invariants(&self) {
        self.ftl.check_invariants();
        self.buf.check_invariants();
        self.map.check_invariants();
        for (lpn_slot, lpn) in self.buf.dirty_lpns() {
            assert_eq!(self.ftl.lookup(lpn), Loc::Buffer(lpn_slot), "dirty slot {lpn_slot} not mapped from its LPN");
        }
        let inflight: usize = self.dies.iter().map(|d| d.inflight_slots.len()).sum();
        let progs: u32 = self.dies.iter().flat_map(|d| d.inflight_progs.iter().map(|p| p.1)).sum();
        assert_eq!(inflight as u32, progs, "in-flight program slots out of sync");
        assert_eq!(
            self.buf.free_slots() + self.buf.dirty() + inflight as u32,
            self.buf.capacity(),
            "write-buffer slots leaked"
        );
        let mut jobs = vec![0u16; self.plane_gc_jobs.len()];
        for d in &self.dies {
            for r in d.gc_gang.iter().chain(&d.gc_queued).chain(&d.gc_finished) {
                jobs[r.job.plane as usize] += 1;
            }
            for (i, r) in d.gc_gang.iter().enumerate() {
                assert!(r.end.is_none(), "finished GC job still in the gang");
                assert!(d.gc_gang[..i].iter().all(|o| o.job.plane != r.job.plane), "two gang jobs for one plane");
            }
            for r in &d.gc_queued {
                assert!(d.gc_gang.iter().any(|g| g.job.plane == r.job.plane), "queued GC job with nothing running");
            }
            assert!(d.gc_finished.iter().all(|r| r.end.is_some()));
            assert!(d.inflight_progs.len() as u32 <= self.cfg.program_queue_depth);
            assert!(d.inflight_progs.iter().zip(d.inflight_progs.iter().skip(1)).all(|(a, b)| a.0 <= b.0));
        }
        assert_eq!(jobs, self.plane_gc_jobs, "per-plane GC job counts out of sync");
        assert_eq!(self.gc_jobs, jobs.iter().map(|&n| n as u32).sum::<u32>(), "GC job count out of sync");
        for (i, f) in self.flush_cmds.iter().enumerate() {
            assert_eq!(f.remaining, self.buf.occupied_born_before(f.before), "flush's remaining data miscounted");
            assert!(i == 0 || self.flush_cmds[i - 1].before <= f.before, "flushes out of order");
        }
        for c in &self.channels {
            c.check_invariants();
        }
    }
}

/// What pblk knows, for an open-channel drive's host scheduler.
impl HostFtl for Ssd {
    fn is_update(&self, offset: u64, len: u64) -> bool {
        if len == 0 {
            return false;
        }
        let unit = self.geo.unit_bytes as u64;
        let (first, last) = (offset / unit, (offset + len - 1) / unit);
        (first..=last).any(|l| !matches!(self.ftl.lookup(Lpn(l as u32)), Loc::Unmapped))
    }

    fn gc_running(&self) -> bool {
        self.gc_jobs > 0
    }

    fn gc_units_moved(&self, tenant: usize) -> u64 {
        self.ftl.tenant_gc(TenantId(tenant as u16)).units_moved
    }

    fn unit_bytes(&self) -> u64 {
        self.geo.unit_bytes as u64
    }
}
