//! The host block layer (Linux's blk-mq): where requests wait for a tag and leave for the device.
//!
//! # Model
//!
//! A request reaches the block layer after its submission path (the system call, or the
//! hypervisor's I/O thread). There it
//!
//! - is given its **hardware queue**: blk-mq maps each CPU's software queue onto the device's
//!   submission queues, `queue = cpu mod queues` (`blk_mq_map_queues`); without a CPU model the
//!   submitting CPU is unknown and each tenant has its own, `queue = tenant mod queues`;
//! - waits in the **I/O scheduler** (`host/sched`), which decides what leaves and when — except
//!   flushes, which bypass it as blk-flush sends them (`blk_insert_flush`) and go, in arrival
//!   order, before anything the scheduler holds; under a scheduler other than `none`, a read or
//!   write that arrives next to one of its tenant's waiting requests is merged into it instead
//!   (the **elevator**, `host/elevator.rs`) and completes with it;
//! - leaves when a **tag** is free — the tag set bounds the requests outstanding at the device
//!   over all its queues (`queue_depth`, like `nr_requests` × hardware queues in Linux) — and
//!   its NVMe queue has room; a request the scheduler gave out whose queue is full goes back
//!   (`blk_mq_requeue_request`) and nothing more is sent until something completes.
//!
//! On completion the tag is freed and the scheduler told the request's device time (dispatch to
//! completion), which is what CFQ charges a slice and a budget scheduler learns its prices from.
//! A scheduler that waits for time (CFQ's idle window, a budget's refill) asks for a wake-up;
//! the block layer keeps the earliest one pending so the simulator schedules one event for it.
//!
//! On an open-channel drive the FTL runs on the host (pblk): the block layer asks it, when a
//! write arrives, whether the write overwrites mapped data, and lets the scheduler observe it
//! (whether GC is running) before every dispatch round and completion. pblk is a bio-based
//! driver — bios reach it without passing through the request layer — so there is no elevator
//! and nothing waiting is merged.
//!
//! # Worked example
//!
//! `queue_depth = 2`, a device with 2 queues of depth 1, no CPU model, tenants 0 and 1, FIFO
//! scheduler. Tenant 0 submits reads A then B, tenant 1 read C, all at t = 0:
//!
//! - A gets tag 1 and queue 0 (tenant 0 mod 2); B is next, but queue 0 is full: B goes back to
//!   the scheduler and dispatching stops, though a tag and queue 1 are free (FIFO order holds).
//! - A completes at 80 µs: its tag and queue slot are freed; B leaves (queue 0), then C (queue
//!   1, tag 2). The scheduler is told A took 80 µs.
//!
//! # Parameters
//!
//! - `queue_depth` (requests): the tag set, over all queues (`[host] queue_depth`).
//! - `queues`: the device's NVMe submission queues (`[device.nvme] queues`); each queue's depth
//!   is the device's to enforce (the `room` it reports).
//!
//! # Source
//!
//! Linux `block/blk-mq.c` (`blk_mq_get_tag`, `blk_mq_dispatch_rq_list`, requeue on a busy
//! queue), `block/blk-mq-cpumap.c` (`blk_mq_map_queues`), `block/blk-flush.c`; pblk's use of the
//! L2P table for the open-channel case (docs/MODEL.md §1b).

use super::elevator::{Elevator, MergeConfig, MergeStats};
use super::sched::{FtlView, SchedReq, SchedTenantStats, Scheduler, SchedulerKind};
use crate::device::{Command, IoOp};
use crate::units::{QueueId, ReqId, SimTime, TenantId};
use std::collections::VecDeque;

/// A request as it reaches the block layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockReq {
    pub id: ReqId,
    pub tenant: TenantId,
    pub op: IoOp,
    /// Byte offset in the device's logical space.
    pub offset: u64,
    pub len: u64,
    /// The host hardware thread it was submitted from, when the CPU model knows it.
    pub cpu: Option<u16>,
    /// A write's data placement directive (0: none).
    pub dspec: u16,
}

/// Where a request the block layer holds stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Not held (never arrived, or completed).
    Free,
    /// Waiting in the scheduler or the flush queue.
    Waiting,
    /// Merged into the waiting or dispatched request `lead`: completes with it.
    Merged(ReqId),
    /// Sent to the device at this time.
    Dispatched(SimTime),
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    req: SchedReq,
    queue: QueueId,
    stage: Stage,
    /// The requests merged into this one, as a chain: the next member and (in the lead) the
    /// last.
    next: Option<ReqId>,
    tail: Option<ReqId>,
}

/// The host block layer: the scheduler, the tag set, the flush queue and the queue mapping.
pub struct BlockLayer {
    sched: Box<dyn Scheduler>,
    /// Tags: requests outstanding at the device, over all its queues.
    depth: u32,
    /// The device's submission queues.
    queues: u16,
    /// Tags in use.
    inflight: u32,
    /// Flushes waiting for a tag or room in their queue, in arrival order.
    flushes: VecDeque<ReqId>,
    /// The scheduler's wake-up the simulator has scheduled, if any.
    wake_at: Option<SimTime>,
    /// What the layer knows of each request it holds, by request id (ids are reused, so this
    /// stays as long as the most requests ever in flight at once).
    slots: Vec<Slot>,
    /// Merging of waiting requests; `None` when the scheduler has no elevator (`none`).
    elevator: Option<Elevator>,
    /// The elevator's settings (kept for `merge_config` when there is no elevator).
    merge: MergeConfig,
}

impl BlockLayer {
    /// A block layer with `kind`'s scheduler for tenants of `weights`, `depth` tags, in front of a
    /// device with `queues` submission queues.
    /// `merge` sets the elevator, used when the scheduler is one and the driver takes requests
    /// (not `bio_based`, as pblk is).
    pub fn new(
        kind: &SchedulerKind,
        weights: &[u32],
        depth: u32,
        queues: u16,
        merge: MergeConfig,
        bio_based: bool,
    ) -> BlockLayer {
        BlockLayer::with_scheduler(kind.build(weights, depth), depth, queues, merge, bio_based)
    }

    /// A block layer around a scheduler built elsewhere.
    pub fn with_scheduler(
        sched: Box<dyn Scheduler>,
        depth: u32,
        queues: u16,
        merge: MergeConfig,
        bio_based: bool,
    ) -> BlockLayer {
        assert!(depth > 0, "a block layer needs at least one tag");
        assert!(queues > 0, "a device has at least one queue");
        let elevator = (sched.merges() && !bio_based && merge.nomerges < 2).then(|| Elevator::new(merge));
        BlockLayer {
            sched,
            depth,
            queues,
            inflight: 0,
            flushes: VecDeque::new(),
            wake_at: None,
            slots: Vec::new(),
            elevator,
            merge,
        }
    }

    /// The hardware queue a request goes to (see the header).
    #[inline]
    fn queue_of(&self, r: &BlockReq) -> QueueId {
        let q = match r.cpu {
            Some(cpu) => cpu as usize % self.queues as usize,
            None => r.tenant.index() % self.queues as usize,
        };
        QueueId(q as u16)
    }

    /// Request `r` arrives at `now`. `ftl` is the host-side FTL of an open-channel drive.
    #[inline]
    pub fn arrive(&mut self, now: SimTime, r: BlockReq, ftl: Option<&dyn FtlView>) {
        let i = r.id.index();
        if self.slots.len() <= i {
            let req = SchedReq { update: false, ..sched_req(&r) };
            let free = Slot { req, queue: QueueId(0), stage: Stage::Free, next: None, tail: None };
            self.slots.resize(i + 1, free);
        }
        assert_eq!(self.slots[i].stage, Stage::Free, "request {} arrived twice", r.id.0);
        let update = r.op == IoOp::Write && ftl.is_some_and(|f| f.is_update(r.offset, r.len));
        let req = SchedReq { update, ..sched_req(&r) };
        self.slots[i] = Slot { req, queue: self.queue_of(&r), stage: Stage::Waiting, next: None, tail: None };
        if r.op == IoOp::Flush {
            self.flushes.push_back(r.id);
            return;
        }
        if let Some(m) = self.elevator.as_mut().and_then(|e| e.arrive(&req)) {
            self.slots[i].stage = Stage::Merged(m.lead);
            let lead = &mut self.slots[m.lead.index()];
            debug_assert_eq!(lead.stage, Stage::Waiting, "merged into a request that is not waiting");
            lead.req.offset = m.offset;
            lead.req.bytes = m.len;
            lead.req.update |= update;
            let tail = lead.tail.replace(r.id);
            let grown = lead.req;
            match tail {
                None => self.slots[m.lead.index()].next = Some(r.id),
                Some(t) => self.slots[t.index()].next = Some(r.id),
            }
            self.sched.grow(&grown);
            return;
        }
        self.sched.enqueue(now, req);
    }

    /// The scheduler sees the host-side FTL's state (before a dispatch round).
    #[inline]
    pub fn observe(&mut self, now: SimTime, ftl: Option<&dyn FtlView>) {
        if let Some(f) = ftl {
            self.sched.observe(now, f);
        }
    }

    /// The next waiting flush, if a tag is free and `room` says its queue has room: it is then
    /// dispatched at `now`, and the command to submit is returned.
    #[inline]
    pub fn next_flush(&mut self, now: SimTime, room: impl Fn(QueueId) -> bool) -> Option<Command> {
        if self.inflight >= self.depth {
            return None;
        }
        let &r = self.flushes.front()?;
        if !room(self.slots[r.index()].queue) {
            return None;
        }
        self.flushes.pop_front();
        Some(self.dispatch(now, r))
    }

    /// What the scheduler gives out next, if a tag is free and its queue has room (else it goes
    /// back to the scheduler): dispatched at `now`, as the command to submit.
    #[inline]
    pub fn next_request(&mut self, now: SimTime, room: impl Fn(QueueId) -> bool) -> Option<Command> {
        if self.inflight >= self.depth {
            return None;
        }
        let sr = self.sched.dispatch(now)?;
        debug_assert_eq!(sr, self.slots[sr.id.index()].req, "the scheduler gave out a stale request");
        // Given out, it leaves the elevator even if it comes back (Linux requeues it on the
        // dispatch list, where nothing merges).
        if let Some(e) = self.elevator.as_mut() {
            e.remove(sr.id);
        }
        if !room(self.slots[sr.id.index()].queue) {
            self.sched.requeue(sr);
            return None;
        }
        Some(self.dispatch(now, sr.id))
    }

    #[inline]
    fn dispatch(&mut self, now: SimTime, r: ReqId) -> Command {
        let slot = &mut self.slots[r.index()];
        assert_eq!(slot.stage, Stage::Waiting, "request {} dispatched but not waiting", r.0);
        slot.stage = Stage::Dispatched(now);
        self.inflight += 1;
        debug_assert!(self.inflight <= self.depth);
        let s = slot.req;
        Command { req: r, tenant: s.tenant, op: s.op, offset: s.offset, len: s.bytes, queue: slot.queue, dspec: s.dspec }
    }

    /// Request `r` completed at the device at `now`: its tag is freed and the scheduler told
    /// (flushes were never the scheduler's). The requests merged into it complete with it: they
    /// are appended to `members`, in the order they merged.
    #[inline]
    pub fn complete(&mut self, now: SimTime, r: ReqId, ftl: Option<&dyn FtlView>, members: &mut Vec<ReqId>) {
        let slot = &mut self.slots[r.index()];
        let Stage::Dispatched(at) = slot.stage else {
            panic!("request {} completed but was not dispatched", r.0);
        };
        slot.stage = Stage::Free;
        slot.tail = None;
        let mut next = slot.next.take();
        let req = slot.req;
        while let Some(m) = next {
            let s = &mut self.slots[m.index()];
            debug_assert_eq!(s.stage, Stage::Merged(r), "request {} is not a member of {}", m.0, r.0);
            s.stage = Stage::Free;
            next = s.next.take();
            members.push(m);
        }
        self.inflight -= 1;
        if req.op != IoOp::Flush {
            self.observe(now, ftl);
            self.sched.complete(now, &req, now.since(at));
        }
    }

    /// The scheduler's wake-up to schedule, if it wants one after `now` sooner than the one
    /// already scheduled.
    #[inline]
    pub fn arm_wakeup(&mut self, now: SimTime) -> Option<SimTime> {
        let t = self.sched.next_wakeup()?;
        if t > now && self.wake_at.is_none_or(|w| t < w) {
            self.wake_at = Some(t);
            return Some(t);
        }
        None
    }

    /// A scheduled wake-up happened at `now`.
    #[inline]
    pub fn woke(&mut self, now: SimTime) {
        if self.wake_at == Some(now) {
            self.wake_at = None;
        }
    }

    /// Requests at the device.
    #[inline]
    pub fn inflight(&self) -> u32 {
        self.inflight
    }

    /// What the elevator merged for tenant `t`.
    pub fn merge_stats(&self, t: usize) -> MergeStats {
        self.elevator.as_ref().map_or_else(MergeStats::default, |e| e.stats(t))
    }

    /// The elevator's settings, and whether the scheduler has an elevator that uses them.
    pub fn merge_config(&self) -> (MergeConfig, bool) {
        (self.merge, self.elevator.is_some())
    }

    /// The scheduler's statistics for tenant `t`.
    pub fn tenant_stats(&self, t: usize) -> Option<SchedTenantStats> {
        self.sched.tenant_stats(t)
    }

    /// What the scheduler could not do as asked.
    pub fn warnings(&self) -> Vec<String> {
        self.sched.warnings()
    }

    pub fn check_invariants(&self) {
        assert!(self.inflight <= self.depth, "{} requests in flight with {} tags", self.inflight, self.depth);
        let dispatched = self.slots.iter().filter(|s| matches!(s.stage, Stage::Dispatched(_))).count();
        assert_eq!(dispatched, self.inflight as usize, "tags in use and dispatched requests disagree");
        let waiting = self.slots.iter().filter(|s| s.stage == Stage::Waiting).count();
        assert_eq!(
            waiting,
            self.flushes.len() + self.sched.queued(),
            "requests waiting and what the scheduler and flush queue hold disagree"
        );
        for (i, s) in self.slots.iter().enumerate() {
            if let Stage::Merged(lead) = s.stage {
                let l = &self.slots[lead.index()];
                let held = matches!(l.stage, Stage::Waiting | Stage::Dispatched(_));
                assert!(held, "request {i} merged into {} which is not held", lead.0);
                let (a, b) = (l.req.offset, l.req.offset + l.req.bytes);
                let inside = s.req.offset >= a && s.req.offset + s.req.bytes <= b;
                assert!(inside, "request {i} lies outside the request {} it merged into", lead.0);
            }
        }
        if let Some(e) = &self.elevator {
            e.check_invariants();
            assert!(e.indexed() <= waiting, "the elevator indexes requests that are not waiting");
        }
        for r in &self.flushes {
            let s = &self.slots[r.index()];
            assert!(s.stage == Stage::Waiting && s.req.op == IoOp::Flush, "flush queue holds request {}", r.0);
        }
        self.sched.check_invariants();
    }
}

fn sched_req(r: &BlockReq) -> SchedReq {
    SchedReq { id: r.id, tenant: r.tenant, op: r.op, offset: r.offset, bytes: r.len, update: false, dspec: r.dspec }
}

#[cfg(test)]
mod tests;
