//! The host zoned FTL (`host/zoned_ftl.rs`) in the simulator: between the block layer and the
//! drive, each request the block layer dispatches becomes the device commands the host FTL
//! decides (its *children*), and the request completes when they all have; the host FTL's GC is
//! device commands of its own.
//!
//! Ordering: every write and reset goes to the drive through one submission queue, in the order
//! the host FTL placed them, so each zone's writes reach it at its write pointer (the drive
//! fetches a queue in order); reads use their request's queue. A GC job's writes wait for its
//! reads, and for every earlier job's writes to have gone (the FTL placed the earlier job's
//! units first in the GC zone). Commands wait in a FIFO for queue
//! room. A write the free zones cannot take waits (after any earlier waiting write) until a GC
//! reset frees a zone. A child's failure fails its request.

use crate::device::zns::ZnsStatus;
use crate::device::{Command, Device, IoOp, Outbox};
use crate::host::zoned_ftl::{GcWork, HostFtlReport, HostZonedFtl};
use crate::units::{QueueId, ReqId, SimTime, TenantId};
use std::collections::{BTreeMap, VecDeque};

/// Children's request ids have this bit set (the simulator's own ids never do).
pub(super) const CHILD: u32 = 1 << 31;
/// The queue writes and resets go through.
const WRITE_QUEUE: QueueId = QueueId(0);

#[derive(Clone, Copy, Debug)]
enum Owner {
    Request(ReqId),
    Gc(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Reads,
    Writes,
    Reset,
}

struct GcRun {
    work: GcWork,
    phase: Phase,
    outstanding: u32,
}

pub(super) struct HostFtlStage {
    ftl: HostZonedFtl,
    children: Vec<Option<Owner>>,
    free: Vec<u32>,
    backlog: VecDeque<Command>,
    /// Requests with children out: how many, and the first failure.
    requests: BTreeMap<u32, (u32, Option<ZnsStatus>)>,
    /// Writes waiting for a zone: the request's command and the bytes placed so far.
    waiting: VecDeque<(Command, u64)>,
    gc: Vec<Option<GcRun>>,
    /// GC jobs whose writes have not gone yet, in the order they started.
    gc_order: VecDeque<u32>,
    runs: Vec<(u64, u64)>,
    report: HostFtlReport,
    /// Requests done with a failed child, and the first failure.
    failed: Vec<(ReqId, ZnsStatus)>,
    /// The tenant id GC's commands carry: the host's own, past the tenants'.
    gc_tenant: TenantId,
}

impl HostFtlStage {
    pub(super) fn new(ftl: HostZonedFtl, spare_zones: u32, gc_tenant: TenantId) -> HostFtlStage {
        let report = HostFtlReport { logical_bytes: ftl.logical_bytes(), spare_zones, ..HostFtlReport::default() };
        HostFtlStage {
            ftl,
            children: Vec::new(),
            free: Vec::new(),
            backlog: VecDeque::new(),
            requests: BTreeMap::new(),
            waiting: VecDeque::new(),
            gc: Vec::new(),
            gc_order: VecDeque::new(),
            runs: Vec::new(),
            report,
            failed: Vec::new(),
            gc_tenant,
        }
    }

    /// Whether the block layer may dispatch: nothing waits for queue room.
    pub(super) fn has_room(&self) -> bool {
        self.backlog.is_empty()
    }

    /// Commands of children not yet completed (for the simulator's conservation check).
    pub(super) fn in_flight(&self) -> usize {
        self.children.len() - self.free.len()
    }

    pub(super) fn report(&self) -> HostFtlReport {
        let s = self.ftl.ftl().stats();
        let mut r = self.report.clone();
        r.host_units = s.host_units_programmed;
        r.gc_units_moved = s.gc_units_programmed;
        r.gc_runs = s.gc_runs;
        r.waf = (s.host_units_programmed > 0)
            .then(|| (s.host_units_programmed + s.gc_units_programmed) as f64 / s.host_units_programmed as f64);
        r
    }

    fn child(&mut self, owner: Owner, op: IoOp, (offset, len): (u64, u64), tenant: TenantId, queue: QueueId) {
        let i = match self.free.pop() {
            Some(i) => {
                self.children[i as usize] = Some(owner);
                i
            }
            None => {
                self.children.push(Some(owner));
                (self.children.len() - 1) as u32
            }
        };
        assert!(i < CHILD, "too many host FTL commands in flight");
        self.report.device_commands += 1;
        self.backlog.push_back(Command { req: ReqId(CHILD | i), tenant, op, offset, len, queue, dspec: 0 });
    }

    /// Children for `runs` of request `r`; returns how many.
    fn request_children(&mut self, cmd: &Command, op: IoOp, queue: QueueId) -> u32 {
        let runs = std::mem::take(&mut self.runs);
        for &run in &runs {
            self.child(Owner::Request(cmd.req), op, run, cmd.tenant, queue);
        }
        let n = runs.len() as u32;
        self.runs = runs;
        self.runs.clear();
        n
    }

    /// Takes request `cmd` from the block layer; requests complete at once (a trim, a read of
    /// nothing written) go to `done`.
    pub(super) fn submit(&mut self, cmd: Command, done: &mut Vec<ReqId>) {
        match cmd.op {
            IoOp::Read => {
                self.runs.clear();
                self.ftl.read(cmd.offset, cmd.len, &mut self.runs);
                match self.request_children(&cmd, IoOp::Read, cmd.queue) {
                    0 => done.push(cmd.req),
                    n => {
                        self.requests.insert(cmd.req.0, (n, None));
                    }
                }
            }
            IoOp::Trim => {
                self.ftl.trim(cmd.offset, cmd.len);
                done.push(cmd.req);
            }
            IoOp::Flush => {
                self.child(Owner::Request(cmd.req), IoOp::Flush, (0, 0), cmd.tenant, WRITE_QUEUE);
                self.requests.insert(cmd.req.0, (1, None));
            }
            IoOp::Write => {
                // One count for the write's placing, released when it is all placed.
                self.requests.insert(cmd.req.0, (1, None));
                self.waiting.push_back((cmd, 0));
                self.place_waiting(done);
            }
            op => unreachable!("{op:?}: the host FTL exports a conventional space"),
        }
    }

    /// Places waiting writes, oldest first, as far as the free zones go; then starts the GC
    /// their placing began.
    fn place_waiting(&mut self, done: &mut Vec<ReqId>) {
        while let Some(&(cmd, placed)) = self.waiting.front() {
            self.runs.clear();
            let more = self.ftl.write(cmd.offset + placed, cmd.len - placed, cmd.tenant.0, &mut self.runs);
            let n = self.request_children(&cmd, IoOp::Write, WRITE_QUEUE);
            self.requests.get_mut(&cmd.req.0).expect("a placing write").0 += n;
            if placed + more < cmd.len {
                if placed == 0 && more == 0 {
                    self.report.writes_waited += 1;
                }
                self.waiting[0].1 = placed + more;
                break;
            }
            self.waiting.pop_front();
            self.release(cmd.req.0, None, done);
        }
        while let Some(work) = self.ftl.take_gc() {
            self.start_gc(work);
        }
    }

    fn start_gc(&mut self, work: GcWork) {
        let slot = match self.gc.iter().position(Option::is_none) {
            Some(s) => s,
            None => {
                self.gc.push(None);
                self.gc.len() - 1
            }
        };
        self.gc[slot] = Some(GcRun { work, phase: Phase::Reads, outstanding: 0 });
        self.gc_order.push_back(slot as u32);
        self.gc_phase(slot as u32, Phase::Reads);
    }

    /// Issues the writes of the oldest GC jobs whose reads are done, in the order the jobs
    /// started, up to the first still reading.
    fn gc_writes_in_order(&mut self) {
        while let Some(&g) = self.gc_order.front() {
            let run = self.gc[g as usize].as_ref().expect("a GC job under way");
            if run.phase != Phase::Reads || run.outstanding > 0 {
                return;
            }
            self.gc_order.pop_front();
            self.gc_phase(g, Phase::Writes);
        }
    }

    /// Issues GC job `g`'s commands from `phase` on (skipping phases with nothing to do).
    fn gc_phase(&mut self, g: u32, mut phase: Phase) {
        loop {
            let run = self.gc[g as usize].as_ref().expect("a GC job under way");
            let cmds: Vec<(IoOp, (u64, u64))> = match phase {
                Phase::Reads => run.work.reads.iter().map(|&r| (IoOp::Read, r)).collect(),
                Phase::Writes => run.work.writes.iter().map(|&r| (IoOp::Write, r)).collect(),
                Phase::Reset => vec![(IoOp::ZoneReset, run.work.reset)],
            };
            let queue = WRITE_QUEUE;
            for &(op, r) in &cmds {
                self.child(Owner::Gc(g), op, r, self.gc_tenant, queue);
            }
            let run = self.gc[g as usize].as_mut().expect("a GC job under way");
            run.phase = phase;
            run.outstanding = cmds.len() as u32;
            if !cmds.is_empty() {
                return;
            }
            phase = match phase {
                // No reads: the writes wait their turn (`gc_writes_in_order`).
                Phase::Reads => return self.gc_writes_in_order(),
                Phase::Writes | Phase::Reset => Phase::Reset,
            };
        }
    }

    fn release(&mut self, r: u32, failed: Option<ZnsStatus>, done: &mut Vec<ReqId>) {
        let e = self.requests.get_mut(&r).expect("a request with children");
        e.0 -= 1;
        e.1 = e.1.or(failed);
        if e.0 == 0 {
            let (_, f) = self.requests.remove(&r).expect("just seen");
            done.push(ReqId(r));
            if let Some(f) = f {
                self.failed.push((ReqId(r), f));
            }
        }
    }

    /// Child `child` completed (`failed` with a status): its request may be done (to `done`,
    /// failures to [`HostFtlStage::take_failed`]), or its GC job go on.
    pub(super) fn complete(&mut self, child: ReqId, failed: Option<ZnsStatus>, done: &mut Vec<ReqId>) {
        let i = (child.0 & !CHILD) as usize;
        let owner = self.children[i].take().expect("a child in flight");
        self.free.push(i as u32);
        match owner {
            Owner::Request(r) => self.release(r.0, failed, done),
            Owner::Gc(g) => {
                if let Some(f) = failed {
                    panic!("the host FTL's GC command failed: {f} (its zone accounting is wrong)");
                }
                let run = self.gc[g as usize].as_mut().expect("a GC job under way");
                run.outstanding -= 1;
                if run.outstanding > 0 {
                    return;
                }
                match run.phase {
                    Phase::Reads => self.gc_writes_in_order(),
                    Phase::Writes => self.gc_phase(g, Phase::Reset),
                    Phase::Reset => {
                        let victim = run.work.victim;
                        self.gc[g as usize] = None;
                        self.ftl.reset_done(victim);
                        self.place_waiting(done);
                    }
                }
            }
        }
    }

    /// Requests done since the last call that failed, with their first failure.
    pub(super) fn take_failed(&mut self, out: &mut Vec<(ReqId, ZnsStatus)>) {
        out.append(&mut self.failed);
    }

    /// Sends what the device's queues take, in order.
    pub(super) fn pump(&mut self, now: SimTime, device: &mut Device, out: &mut Outbox) {
        while let Some(c) = self.backlog.front() {
            if !device.queue_has_room(c.queue) {
                return;
            }
            let c = self.backlog.pop_front().expect("just seen");
            device.submit(now, c, out);
        }
    }

    pub(super) fn check_invariants(&self) {
        self.ftl.check_invariants();
    }
}
