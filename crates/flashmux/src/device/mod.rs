//! The storage device: an NVMe front end (submission queues, arbitration — round robin or
//! weighted round robin, `arbiter.rs` — and controller cores) in front of a back end — the SSD model, or a `null` device that completes every command
//! after a fixed latency, like Linux's `null_blk`.
//!
//! A `Flush` (NVMe Flush, or ATA FLUSH CACHE) carries no data: it completes once every write the
//! device acknowledged before it is on flash — at once on a drive whose write buffer survives a
//! power loss, after the buffer has been programmed on one whose buffer is volatile.
//!
//! The device never schedules events itself: every call appends `(time, DeviceEvent)` pairs and
//! finished requests to an [`Outbox`] that the simulator drains into its event queue.

mod arbiter;
mod buffer;
pub mod drive_state;
pub mod precondition;
mod report;
mod ssd;
pub mod zns;

pub use arbiter::{Arbitration, Priority, DEFAULT_WRR_WEIGHTS};
pub use report::{CmtReport, DeviceResult, PlacementReport, PlacementStat, TenantDeviceCounters, TenantDeviceReport};
pub use ssd::{
    DramTiming, EccRates, FlushPolicy, GcMode, PlacementEvents, PlacementMode, Ssd, SsdConfig, SsdError, SsdStats, TenantDeviceStats,
    TenantZoneStats, ZnsLayout, ZnsReport, ZNS_LBA_BYTES,
    MAX_OVERPROVISIONING,
};

use crate::units::{DieId, Nanos, Placement, QueueId, ReqId, SimTime, TenantId};
use serde::Serialize;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoOp {
    Read,
    Write,
    Trim,
    /// Make the writes acknowledged so far durable (fio's `fsync`/`fdatasync`). No data range.
    Flush,
    /// Zoned namespaces only: Zone Append of the command's data to the zone that starts at its
    /// offset; the drive writes it at the zone's write pointer (NVMe ZNS §3.4.1).
    #[serde(rename = "zone-append")]
    ZoneAppend,
    /// Zoned namespaces only: Zone Management Send, Reset, of the zone that starts at the
    /// command's offset (its length is the zone's size; Linux's `REQ_OP_ZONE_RESET`).
    #[serde(rename = "zone-reset")]
    ZoneReset,
    /// Zone Management Send, Finish (`REQ_OP_ZONE_FINISH`).
    #[serde(rename = "zone-finish")]
    ZoneFinish,
    /// Zone Management Send, Open (`REQ_OP_ZONE_OPEN`).
    #[serde(rename = "zone-open")]
    ZoneOpen,
    /// Zone Management Send, Close (`REQ_OP_ZONE_CLOSE`).
    #[serde(rename = "zone-close")]
    ZoneClose,
}

impl IoOp {
    /// Position in fio's (read, write, trim, sync) order — fio's `DDIR_*` numbers; per-direction
    /// arrays of three cover the data directions only.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The data direction in fio's (read, write, trim) order: a Zone Append is a write; a
    /// flush and zone management move no data (`None`).
    pub fn data_dir(self) -> Option<usize> {
        match self {
            IoOp::Read => Some(0),
            IoOp::Write | IoOp::ZoneAppend => Some(1),
            IoOp::Trim => Some(2),
            _ => None,
        }
    }

    /// A Zone Management Send action: moves no data.
    pub fn is_zone_management(self) -> bool {
        matches!(self, IoOp::ZoneReset | IoOp::ZoneFinish | IoOp::ZoneOpen | IoOp::ZoneClose)
    }

    /// The zone action of a Zone Management Send.
    pub fn zone_action(self) -> Option<zns::ZoneAction> {
        Some(match self {
            IoOp::ZoneReset => zns::ZoneAction::Reset,
            IoOp::ZoneFinish => zns::ZoneAction::Finish,
            IoOp::ZoneOpen => zns::ZoneAction::Open,
            IoOp::ZoneClose => zns::ZoneAction::Close,
            _ => return None,
        })
    }
}

/// A command as the host submits it: a byte range of the device's logical space (empty, at
/// offset 0, for a flush).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Command {
    pub req: ReqId,
    pub tenant: TenantId,
    pub op: IoOp,
    pub offset: u64,
    pub len: u64,
    pub queue: QueueId,
    /// A write's data placement directive (DSPEC): an FDP placement identifier or a stream
    /// identifier, as the drive offers; 0 for none (FDP's placement handle 0).
    pub dspec: u16,
}

/// A command inside the device, with the back end's progress on it.
#[derive(Clone, Copy, Debug)]
pub struct CmdState {
    pub cmd: Command,
    /// Units of a write already in the buffer.
    pub progress: u32,
    /// A write's placement, decided once, when the drive takes the command (`Ssd::execute`).
    pub placement: Placement,
    /// The latest time any part of the command finishes.
    pub done_at: SimTime,
    /// A zoned drive's status for a command that failed (it completes with it).
    pub status: Option<zns::ZnsStatus>,
    /// A Zone Append's ALBA, in bytes: where the drive wrote its data.
    pub alba: Option<u64>,
    /// A zoned drive's Finish writing the rest of its zone as padding: the drive's own data,
    /// no tenant's, not from the host.
    pub padding: bool,
}

impl CmdState {
    /// A command as it arrives, at `now`.
    pub fn new(cmd: Command, now: SimTime) -> CmdState {
        CmdState { cmd, progress: 0, placement: Placement(0), done_at: now, status: None, alba: None, padding: false }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceEvent {
    /// The controller finished fetching and decoding command slot n.
    Fetched(u32),
    /// Command slot n is complete; its completion entry is posted.
    Complete(u32),
    /// Read command slot n's translation pages have arrived from flash (DFTL): its flash reads
    /// are issued now.
    Mapped(u32),
    /// The oldest program on the die finished.
    ProgramDone(DieId),
    /// Garbage collection on the die may have finished a job.
    GcCheck(DieId),
}

/// What a device call produced: events to schedule and requests completed.
#[derive(Default)]
pub struct Outbox {
    pub events: Vec<(SimTime, DeviceEvent)>,
    pub completed: Vec<ReqId>,
    /// Of the completed requests, those that failed, with their status (zoned drives).
    pub failed: Vec<(ReqId, zns::ZnsStatus)>,
    /// Of the completed requests, the Zone Appends, with where their data went (bytes).
    pub appended: Vec<(ReqId, u64)>,
}

/// NVMe front-end parameters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NvmeConfig {
    /// I/O submission/completion queue pairs.
    pub queues: u16,
    /// Commands a queue may have outstanding.
    pub queue_depth: u32,
    /// Commands the controller processes in parallel.
    pub controller_cores: u32,
    /// Controller time to fetch and decode one command.
    pub command_overhead: Nanos,
    /// Which queue a free core fetches from next. Round robin hashes as absent.
    #[serde(skip_serializing_if = "Arbitration::is_round_robin")]
    pub arbitration: Arbitration,
}

/// The `null` back end: every command completes `latency` after the controller fetched it; no
/// data, no media.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NullConfig {
    pub capacity_bytes: u64,
    pub latency: Nanos,
}

impl NullConfig {
    /// At least one 4 KiB block.
    pub fn validate(&self) -> Result<(), String> {
        if self.capacity_bytes < 4096 {
            return Err("device.capacity: must be at least 4 KiB".into());
        }
        Ok(())
    }
}

pub enum Backend {
    Ssd(Box<Ssd>),
    Null(NullConfig),
}

pub struct Device {
    nvme: NvmeConfig,
    /// Commands waiting to be fetched, per queue.
    pending: Vec<VecDeque<u32>>,
    /// Queues with commands waiting, in the order arbitration will serve them.
    arbiter: arbiter::Arbiter,
    outstanding: Vec<u32>,
    free_cores: u32,
    cmds: Vec<CmdState>,
    free_cmds: Vec<u32>,
    backend: Backend,
    commands_completed: u64,
    flushes_completed: u64,
}

/// What the host scheduler can learn of the drive's FTL. An open-channel drive's FTL runs on the
/// host (Linux pblk), which knows it all; an FDP drive (`[device.fdp]`) keeps its FTL but reports
/// its media's work in the FDP statistics log page; any other drive shows the host nothing, and
/// offers no view ([`Device::ftl_view`]).
pub trait FtlView {
    /// Whether a write of `len` bytes at `offset` overwrites mapped data (any unit of it). pblk
    /// knows from its map; on a drive with its own FTL it is the host's record of what it has
    /// written and not trimmed (a thin volume's or an image file's allocation map), which equals
    /// the drive's mapping, every write having come through the host.
    fn is_update(&self, offset: u64, len: u64) -> bool;
    /// What the host sees of garbage collection.
    fn gc_signal(&self) -> GcSignal;
    /// Ground truth beyond what either drive reports: mapping units GC has moved from `tenant`'s
    /// data so far (the ownership ledger; for `hwabc-oracle`).
    fn gc_units_moved(&self, tenant: TenantId) -> u64;
    /// The FTL's mapping unit in bytes.
    fn unit_bytes(&self) -> u64;
}

/// What the host sees of a drive's garbage collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcSignal {
    /// pblk's own state: whether a victim has been chosen and not yet erased.
    Running(bool),
    /// The FDP statistics log page's *Media Bytes Erased*, in erase blocks so far: a drive
    /// erases only to reclaim, so the count advancing between two reads says GC ran in between.
    BlocksErased(u64),
}

/// A device as a preset or a scenario describes it: which back end, with its configuration.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceKind {
    Ssd(SsdConfig),
    Null(NullConfig),
}

impl DeviceKind {
    /// The data placement it offers (none without flash).
    pub fn placement(&self) -> &PlacementMode {
        const NONE: &PlacementMode = &PlacementMode::None;
        match self {
            DeviceKind::Ssd(c) => &c.placement,
            DeviceKind::Null(_) => NONE,
        }
    }
}

impl Device {
    /// The device `kind` describes behind an NVMe front end of `nvme`, for `tenants` tenants.
    pub fn build(nvme: NvmeConfig, kind: &DeviceKind, tenants: usize) -> Result<Device, SsdError> {
        nvme.arbitration.validate(nvme.queues).map_err(SsdError::Config)?;
        let backend = match kind {
            DeviceKind::Ssd(c) => Backend::Ssd(Box::new(Ssd::new(c.clone(), tenants)?)),
            DeviceKind::Null(n) => {
                n.validate().map_err(SsdError::Config)?;
                Backend::Null(n.clone())
            }
        };
        Ok(Device::new(nvme, backend))
    }

    /// Whether it has flash behind an FTL (and so garbage collection).
    pub fn has_flash(&self) -> bool {
        matches!(self.backend, Backend::Ssd(_))
    }

    pub fn new(nvme: NvmeConfig, backend: Backend) -> Device {
        let q = nvme.queues as usize;
        Device {
            pending: vec![VecDeque::new(); q],
            arbiter: arbiter::Arbiter::new(nvme.arbitration.clone(), q),
            outstanding: vec![0; q],
            free_cores: nvme.controller_cores,
            cmds: Vec::new(),
            free_cmds: Vec::new(),
            nvme,
            backend,
            commands_completed: 0,
            flushes_completed: 0,
        }
    }

    pub fn backend(&self) -> &Backend {
        &self.backend
    }
    pub fn backend_mut(&mut self) -> &mut Backend {
        &mut self.backend
    }
    pub fn nvme(&self) -> &NvmeConfig {
        &self.nvme
    }
    /// What the host can learn of the FTL: all of it on an open-channel drive, FDP's log pages
    /// on an FDP drive; `None` for any other drive.
    pub fn ftl_view(&self) -> Option<&dyn FtlView> {
        match &self.backend {
            Backend::Ssd(s) if s.gc_mode() == GcMode::HostIo || s.config().placement.fdp_handles().is_some() => {
                Some(s.as_ref())
            }
            _ => None,
        }
    }

    /// The zoned namespace's layout, on a zoned drive.
    pub fn zns(&self) -> Option<ZnsLayout> {
        match &self.backend {
            Backend::Ssd(s) => s.config().zns,
            Backend::Null(_) => None,
        }
    }

    /// Whether the FTL runs on the host (an open-channel drive under pblk, which is bio-based).
    pub fn is_open_channel(&self) -> bool {
        matches!(&self.backend, Backend::Ssd(s) if s.gc_mode() == GcMode::HostIo)
    }
    pub fn capacity_bytes(&self) -> u64 {
        match &self.backend {
            Backend::Ssd(s) => s.capacity_bytes(),
            Backend::Null(n) => n.capacity_bytes,
        }
    }
    /// Smallest addressable unit (offsets and lengths are multiples of it).
    pub fn sector_bytes(&self) -> u64 {
        512
    }

    /// A request for `offset` is on its way: start loading the mapping entries it will need.
    /// `early` at issue (the L2P entry), not `early` when it reaches the host (what that entry
    /// points to). A hint with no effect on results.
    pub fn prefetch_hint(&self, offset: u64, early: bool) {
        if let Backend::Ssd(s) = &self.backend {
            let lpn = crate::units::Lpn((offset / s.config().geometry.unit_bytes as u64) as u32);
            if early {
                s.ftl().prefetch_entry(lpn);
            } else {
                s.ftl().prefetch_location(lpn);
            }
        }
    }

    pub fn queue_has_room(&self, q: QueueId) -> bool {
        self.outstanding[q.index()] < self.nvme.queue_depth
    }

    pub fn submit(&mut self, now: SimTime, cmd: Command, out: &mut Outbox) {
        assert!(self.queue_has_room(cmd.queue), "submission to a full queue {:?}", cmd.queue);
        let in_range = match cmd.op {
            IoOp::Flush => cmd.offset == 0 && cmd.len == 0,
            _ => cmd.len > 0 && cmd.offset + cmd.len <= self.capacity_bytes(),
        };
        assert!(in_range, "command beyond the device: {cmd:?}");
        let state = CmdState::new(cmd, now);
        let slot = match self.free_cmds.pop() {
            Some(s) => {
                self.cmds[s as usize] = state;
                s
            }
            None => {
                self.cmds.push(state);
                (self.cmds.len() - 1) as u32
            }
        };
        self.outstanding[cmd.queue.index()] += 1;
        let q = &mut self.pending[cmd.queue.index()];
        if q.is_empty() {
            self.arbiter.ready(cmd.queue);
        }
        q.push_back(slot);
        self.fetch(now, out);
    }

    /// Each free controller core takes the oldest command of the queue arbitration picks.
    fn fetch(&mut self, now: SimTime, out: &mut Outbox) {
        while self.free_cores > 0 {
            let pending = &self.pending;
            let Some(q) = self.arbiter.next(|q| pending[q as usize].len() > 1) else { return };
            let slot = self.pending[q as usize].pop_front().expect("ready queues have commands");
            self.free_cores -= 1;
            out.events.push((now + self.nvme.command_overhead, DeviceEvent::Fetched(slot)));
        }
    }

    pub fn handle(&mut self, now: SimTime, ev: DeviceEvent, out: &mut Outbox) {
        match ev {
            DeviceEvent::Fetched(slot) => {
                self.free_cores += 1;
                match &mut self.backend {
                    Backend::Ssd(ssd) => ssd.execute(now, slot, &mut self.cmds, out),
                    Backend::Null(n) => out.events.push((now + n.latency, DeviceEvent::Complete(slot))),
                }
                self.fetch(now, out);
            }
            DeviceEvent::Complete(slot) => {
                let st = &self.cmds[slot as usize];
                let cmd = st.cmd;
                if let Some(s) = st.status {
                    out.failed.push((cmd.req, s));
                }
                if let Some(a) = st.alba {
                    out.appended.push((cmd.req, a));
                }
                self.outstanding[cmd.queue.index()] -= 1;
                self.free_cmds.push(slot);
                self.commands_completed += 1;
                self.flushes_completed += u64::from(cmd.op == IoOp::Flush);
                out.completed.push(cmd.req);
            }
            DeviceEvent::Mapped(slot) => {
                if let Backend::Ssd(ssd) = &mut self.backend {
                    ssd.read_mapped(now, slot, &self.cmds, out);
                }
            }
            DeviceEvent::ProgramDone(die) => {
                if let Backend::Ssd(ssd) = &mut self.backend {
                    ssd.program_done(now, die, &mut self.cmds, out);
                }
            }
            DeviceEvent::GcCheck(die) => {
                if let Backend::Ssd(ssd) = &mut self.backend {
                    ssd.gc_check(now, die, &mut self.cmds, out);
                }
            }
        }
    }

    /// Commands submitted and not yet completed.
    pub fn in_flight(&self) -> u64 {
        self.outstanding.iter().map(|&o| o as u64).sum()
    }

    pub fn commands_completed(&self) -> u64 {
        self.commands_completed
    }

    /// Flush commands completed (any back end).
    pub fn flushes_completed(&self) -> u64 {
        self.flushes_completed
    }

    pub fn check_invariants(&self) {
        let queued: usize = self.pending.iter().map(|p| p.len()).sum();
        assert!(queued as u64 <= self.in_flight());
        let busy = self.pending.iter().filter(|p| !p.is_empty()).count();
        assert_eq!(busy, self.arbiter.ready_count(), "arbitration's ready list out of sync");
        assert_eq!(self.cmds.len() - self.free_cmds.len(), self.in_flight() as usize, "command slots leaked");
        assert!(self.free_cores <= self.nvme.controller_cores);
        if let Backend::Ssd(s) = &self.backend {
            s.check_invariants();
        }
    }
}

#[cfg(test)]
mod tests;
