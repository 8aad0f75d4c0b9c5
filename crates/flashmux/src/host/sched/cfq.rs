//! `cfq`: Linux's Completely Fair Queuing with group (cgroup) scheduling, one group per tenant —
//! and, with a [`Mots`] attached, paper D's `mcfq`.
//!
//! # Model
//! Each tenant is a CFQ group with one queue (a KVM guest is one QEMU process in its own cgroup).
//! Groups with queued requests wait on a service tree ordered by *virtual disk time*; the group
//! with the least vdisktime gets the device for one time slice, then is charged for the time it
//! used, scaled by its weight: `vdisktime += used × 500 / weight` (`cfqg_scale_charge`, 500 being
//! `CFQ_WEIGHT_DEFAULT`). A heavier group's clock runs slower, so over time busy groups get device
//! time in proportion to their weights; with slices themselves proportional to weight this is a
//! weighted round robin.
//!
//! A group's slice is its share of the target latency, `target_latency × w / Σ w(busy)`
//! (`cfq_group_slice`), kept between `low_slice = 2 × slice_idle` and `slice_sync` as
//! `cfq_scaled_cfqq_slice` does with `low_latency` on. The slice starts at the first completion
//! after the group is selected (`cfq_set_prio_slice`), so it is not charged for requests other
//! groups left in the device; until then the charge is the time since selection.
//!
//! During its slice the group dispatches up to `quantum` requests in flight while other groups
//! wait, or up to the host's queue depth when it is alone (`cfq_may_dispatch`). When its queue
//! runs empty the group keeps the device: while its requests are in flight, and then for
//! `slice_idle` after the last one completes (`cfq_arm_slice_timer`, `group_idle`), because a
//! synchronous tenant usually sends its next request right away; a request arriving in that
//! window continues the slice. A group that leaves the tree (its queue empty when its slice ends)
//! and comes back is placed just behind the last busy group (`cfq_group_notify_queue_add`):
//! idleness earns no credit.
//!
//! With `slice_idle = 0` CFQ runs in IOPS mode, as Linux does on a non-rotational device with
//! command queueing: no idling, and a group is charged per request dispatched instead of per time.
//!
//! Within a group reads go before writes (the guest waits on reads; its writes are mostly page
//! cache write-back), unless the oldest write has waited `fifo_expire_write` (`fifo_expire_async`).
//!
//! # Worked example
//! Weights 10, 7, 4, 1, all busy: group slices 300 ms × w / 22 = 136, 95, 55, 14 ms, kept within
//! [16, 100] ms → 100, 95, 55, 16 ms; charges 100×500/10 = 5000, 95×500/7 = 6818,
//! 55×500/4 = 6818, 16×500/1 = 8000 (ms-units of vdisktime). Over a long run the device time
//! divides 10 : 7 : 4 : 1.
//!
//! # Where flashmux's CFQ differs from Linux's
//! One queue per group (no per-thread queues, no async queue, no RT/idle classes or priorities);
//! no preemption; no sector sort (an SSD does not seek) — the block layer's elevator still
//! merges adjacent requests waiting in a group's queue (`host/elevator.rs`), as CFQ's sort tree
//! and the elevator hash let Linux do; `quantum` is a fixed cap rather than Linux's quantum/2-then-quantum
//! ramp. The constants are Linux's defaults (`block/cfq-iosched.c`, 3.x–4.x kernels).
//!
//! # mcfq
//! With a [`Mots`], every tenant's *effective* weight is its weight times the MoTS scale: the
//! scale lengthens (or shortens) the tenant's slice and divides its vdisktime charge alike, so the
//! longer slice is a longer turn in the same round rather than a turn taken less often.
//! See [`super::mots`].

use super::mots::Mots;
use super::{SchedReq, SchedTenantStats, Scheduler};
use crate::device::IoOp;
use crate::units::{Nanos, SimTime};
use serde::Serialize;
use std::collections::{BTreeSet, VecDeque};

/// `CFQ_WEIGHT_DEFAULT`: the weight whose vdisktime runs at wall-clock speed.
const WEIGHT_DEFAULT: f64 = 500.0;
/// How far behind the last busy group a returning group is placed: `CFQ_IDLE_DELAY` (200 ms),
/// which Linux adds as is to a vdisktime kept in units 2^`CFQ_SERVICE_SHIFT` (4096) times finer,
/// so it amounts to 200 ms / 4096 ≈ 49 µs of device time.
const IDLE_DELAY_NS: f64 = 200e6 / 4096.0;
/// IOPS mode charges each dispatched request as this much device time.
const IOPS_CHARGE: Nanos = Nanos::from_ms(1);
/// The shortest slice when `slice_idle = 0` leaves no `low_slice` floor.
const MIN_SLICE: Nanos = Nanos::from_ms(1);

/// CFQ's tunables (`/sys/block/<dev>/queue/iosched/`), Linux's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CfqParams {
    /// `slice_sync`: the longest slice (HZ/10).
    pub slice_sync: Nanos,
    /// `slice_idle` / `group_idle`: how long an emptied group keeps the device; 0 = IOPS mode.
    pub slice_idle: Nanos,
    /// `target_latency`: one round of all busy groups (with `low_latency` on).
    pub target_latency: Nanos,
    /// `quantum`: requests the active group may have in flight while others wait.
    pub quantum: u32,
    /// `fifo_expire_async`: a write waiting this long goes before reads.
    pub fifo_expire_write: Nanos,
}

impl Default for CfqParams {
    fn default() -> Self {
        CfqParams {
            slice_sync: Nanos::from_ms(100),
            slice_idle: Nanos::from_ms(8),
            target_latency: Nanos::from_ms(300),
            quantum: 8,
            fifo_expire_write: Nanos::from_ms(250),
        }
    }
}

impl CfqParams {
    /// Checks the tunables; the error names the key (`host.cfq.*`).
    pub fn validate(&self) -> Result<(), String> {
        if self.quantum == 0 {
            return Err("host.cfq.quantum: must be at least 1 (got 0)".into());
        }
        for (key, v) in [("slice_sync", self.slice_sync), ("target_latency", self.target_latency)] {
            if v == Nanos::ZERO {
                return Err(format!("host.cfq.{key}: must be longer than zero"));
            }
        }
        Ok(())
    }

    /// `2 × slice_idle`, Linux's `base_low_slice`.
    fn low_slice(&self) -> Nanos {
        Nanos(2 * self.slice_idle.0).min(self.slice_sync).max(MIN_SLICE)
    }
    fn iops_mode(&self) -> bool {
        self.slice_idle == Nanos::ZERO
    }
}

struct Group {
    weight: u32,
    reads: VecDeque<(SchedReq, SimTime)>,
    writes: VecDeque<(SchedReq, SimTime)>,
    /// A request the device could not take: it goes first.
    requeued: Option<SchedReq>,
    inflight: u32,
    /// Waiting on the service tree (the active group is not on it).
    on_tree: bool,
    /// Never negative, so its bit pattern orders like the number (the service tree's key).
    vdisktime: f64,
    stats: SchedTenantStats,
}

impl Group {
    fn queued(&self) -> usize {
        self.reads.len() + self.writes.len() + self.requeued.is_some() as usize
    }
}

/// The group holding the device.
struct Active {
    g: usize,
    selected: SimTime,
    /// Set at the first completion after selection.
    slice_start: Option<SimTime>,
    allocated: Nanos,
    /// Idling after the group's queue ran empty, until then.
    idle_until: Option<SimTime>,
    dispatched: u64,
}

/// A place on the service tree: vdisktime (as ordered bits), then the group's index.
type TreeKey = (u64, usize);

pub struct Cfq {
    p: CfqParams,
    groups: Vec<Group>,
    /// The waiting groups by vdisktime (`st->rb`): O(log groups) to select, join and leave.
    tree: BTreeSet<TreeKey>,
    /// The weights of the groups on the tree (with the active group's, `st->total_weight`).
    tree_weight: u64,
    /// Requests queued in all groups.
    queued: usize,
    active: Option<Active>,
    /// `st->min_vdisktime`: never decreases.
    min_vdisktime: f64,
    /// The host's queue depth: the active group's limit when no other group waits.
    depth: u32,
    mots: Option<Mots>,
}

impl Cfq {
    pub fn new(p: CfqParams, weights: &[u32], depth: u32, mots: Option<Mots>) -> Cfq {
        let groups = weights
            .iter()
            .map(|&weight| Group {
                weight,
                reads: VecDeque::new(),
                writes: VecDeque::new(),
                requeued: None,
                inflight: 0,
                on_tree: false,
                vdisktime: 0.0,
                stats: SchedTenantStats { scale: 1.0, ..Default::default() },
            })
            .collect();
        Cfq {
            p,
            groups,
            tree: BTreeSet::new(),
            tree_weight: 0,
            queued: 0,
            active: None,
            min_vdisktime: 0.0,
            depth: depth.max(1),
            mots,
        }
    }

    /// The weight CFQ schedules a group by: its own, times the MoTS scale under `mcfq`.
    fn effective_weight(&self, g: usize) -> f64 {
        self.groups[g].weight as f64 * self.mots_scale(g)
    }

    /// `st->total_weight`: the weights of the busy groups, waiting or active (Linux's service
    /// tree holds both).
    fn busy_weight(&self) -> u64 {
        self.tree_weight + self.active.as_ref().map_or(0, |a| self.groups[a.g].weight as u64)
    }

    fn key(&self, g: usize) -> TreeKey {
        (self.groups[g].vdisktime.to_bits(), g)
    }

    /// Puts group `g`, at its vdisktime, on the service tree.
    fn insert(&mut self, g: usize) {
        debug_assert!(!self.groups[g].on_tree);
        self.tree.insert(self.key(g));
        self.tree_weight += self.groups[g].weight as u64;
        self.groups[g].on_tree = true;
    }

    /// The slice of group `g` now (`cfq_group_slice` within `[low_slice, slice_sync]`, times the
    /// MoTS scale under `mcfq`).
    fn slice_for(&self, g: usize) -> Nanos {
        let share = self.groups[g].weight as f64 / self.busy_weight().max(1) as f64;
        let base = Nanos((self.p.target_latency.0 as f64 * share) as u64)
            .max(self.p.low_slice())
            .min(self.p.slice_sync);
        // MoTS's scale is bounded, so the slice stays within its bounds times the scale's.
        Nanos((base.0 as f64 * self.mots_scale(g)) as u64).max(MIN_SLICE)
    }

    fn mots_scale(&self, g: usize) -> f64 {
        self.mots.as_ref().map_or(1.0, |m| m.scale(g))
    }

    /// Moves time forward: MoTS samples, and the end of the active group's slice or idle window.
    fn advance(&mut self, now: SimTime) {
        if let Some(m) = &mut self.mots {
            m.advance(now);
        }
        let Some(a) = &self.active else { return };
        let slice_over = a.slice_start.is_some_and(|s| now >= s + a.allocated);
        let idle_over = a.idle_until.is_some_and(|t| now >= t);
        if slice_over || idle_over {
            self.expire(now);
        }
    }

    /// Ends the active group's turn and charges it.
    fn expire(&mut self, now: SimTime) {
        let Some(a) = self.active.take() else { return };
        let used = match a.slice_start {
            Some(s) => now.since(s).min(a.allocated),
            None => now.since(a.selected).max(Nanos(1)),
        };
        let charge = if self.p.iops_mode() { (IOPS_CHARGE * a.dispatched).0 as f64 } else { used.0 as f64 };
        let ew = self.effective_weight(a.g);
        let g = &mut self.groups[a.g];
        g.vdisktime += charge * WEIGHT_DEFAULT / ew;
        g.stats.service_ns += used.0;
        g.stats.turns += 1;
        if g.queued() > 0 {
            self.insert(a.g);
        }
    }

    /// The waiting group with the least vdisktime becomes active.
    fn select(&mut self, now: SimTime) -> bool {
        let Some((_, g)) = self.tree.pop_first() else { return false };
        self.tree_weight -= self.groups[g].weight as u64;
        self.min_vdisktime = self.min_vdisktime.max(self.groups[g].vdisktime);
        self.groups[g].on_tree = false;
        // The slice is sized while the group still counts as busy.
        self.active = Some(Active { g, selected: now, slice_start: None, allocated: Nanos::ZERO, idle_until: None, dispatched: 0 });
        let allocated = self.slice_for(g);
        if let Some(a) = &mut self.active {
            a.allocated = allocated;
        }
        true
    }

    fn others_waiting(&self) -> bool {
        !self.tree.is_empty()
    }

    fn pop(&mut self, g: usize, now: SimTime) -> SchedReq {
        self.queued -= 1;
        let grp = &mut self.groups[g];
        if let Some(r) = grp.requeued.take() {
            return r;
        }
        let write_expired = grp.writes.front().is_some_and(|&(_, t)| now.since(t) >= self.p.fifo_expire_write);
        let from_writes = grp.reads.is_empty() || write_expired;
        let q = if from_writes { &mut grp.writes } else { &mut grp.reads };
        q.pop_front().expect("the group has queued requests").0
    }

    /// `cfq_group_notify_queue_add`: a group with new work joins the tree behind the last one.
    fn join_tree(&mut self, g: usize) {
        let waiting = self.tree.last().map(|&(_, k)| self.groups[k].vdisktime);
        let active = self.active.as_ref().map(|a| self.groups[a.g].vdisktime);
        let last = match (waiting, active) {
            (Some(w), Some(a)) => Some(w.max(a)),
            (w, a) => w.or(a),
        };
        self.groups[g].vdisktime = match last {
            Some(v) => v + IDLE_DELAY_NS,
            None => self.min_vdisktime,
        };
        self.insert(g);
    }
}

impl Scheduler for Cfq {
    fn name(&self) -> &'static str {
        if self.mots.is_some() {
            "mcfq"
        } else {
            "cfq"
        }
    }

    fn enqueue(&mut self, now: SimTime, r: SchedReq) {
        self.advance(now);
        let g = r.tenant.index();
        self.queued += 1;
        let grp = &mut self.groups[g];
        match r.op {
            IoOp::Read => grp.reads.push_back((r, now)),
            _ => grp.writes.push_back((r, now)),
        }
        match &mut self.active {
            Some(a) if a.g == g => a.idle_until = None,
            _ if !self.groups[g].on_tree => self.join_tree(g),
            _ => {}
        }
    }

    fn dispatch(&mut self, now: SimTime) -> Option<SchedReq> {
        self.advance(now);
        loop {
            if self.active.is_none() && !self.select(now) {
                return None;
            }
            let a = self.active.as_ref().expect("selected");
            let g = a.g;
            let grp = &self.groups[g];
            if grp.queued() > 0 {
                let limit = if self.others_waiting() { self.p.quantum } else { self.depth };
                if grp.inflight >= limit {
                    return None;
                }
                let r = self.pop(g, now);
                let grp = &mut self.groups[g];
                grp.inflight += 1;
                grp.stats.dispatched += 1;
                let a = self.active.as_mut().expect("active");
                a.idle_until = None;
                a.dispatched += 1;
                return Some(r);
            }
            if !self.p.iops_mode() && (grp.inflight > 0 || a.idle_until.is_some()) {
                // Keep the device: for the requests in flight, then the idle window their last
                // completion opened.
                return None;
            }
            self.expire(now);
        }
    }

    fn grow(&mut self, r: &SchedReq) {
        let grp = &mut self.groups[r.tenant.index()];
        let q = if r.op == IoOp::Read { &mut grp.reads } else { &mut grp.writes };
        super::none::grow_in(q.iter_mut().rev().map(|(w, _)| w), r);
    }

    fn requeue(&mut self, r: SchedReq) {
        let g = r.tenant.index();
        let grp = &mut self.groups[g];
        grp.inflight -= 1;
        grp.stats.dispatched -= 1;
        debug_assert!(grp.requeued.is_none(), "one request is requeued at a time");
        grp.requeued = Some(r);
        self.queued += 1;
        if let Some(a) = self.active.as_mut().filter(|a| a.g == g) {
            a.dispatched -= 1;
        } else if !grp.on_tree {
            self.join_tree(g);
        }
    }

    fn complete(&mut self, now: SimTime, r: &SchedReq, _service: Nanos) {
        let g = r.tenant.index();
        self.groups[g].inflight -= 1;
        if let Some(m) = &mut self.mots {
            m.record(now, g, r.bytes);
        }
        let idle = self.p.slice_idle;
        let emptied = self.groups[g].queued() == 0 && self.groups[g].inflight == 0;
        if let Some(a) = self.active.as_mut().filter(|a| a.g == g) {
            if a.slice_start.is_none() {
                a.slice_start = Some(now);
            }
            if emptied && idle > Nanos::ZERO {
                a.idle_until = Some(now + idle);
            }
        }
        self.advance(now);
    }

    fn next_wakeup(&self) -> Option<SimTime> {
        let a = self.active.as_ref()?;
        let end = a.slice_start.map(|s| s + a.allocated);
        match (end, a.idle_until) {
            (Some(e), Some(i)) => Some(e.min(i)),
            (e, i) => e.or(i),
        }
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn tenant_stats(&self, t: usize) -> Option<SchedTenantStats> {
        let mut s = self.groups[t].stats;
        s.scale = self.mots_scale(t);
        Some(s)
    }

    fn check_invariants(&self) {
        for (i, g) in self.groups.iter().enumerate() {
            let active = self.active.as_ref().is_some_and(|a| a.g == i);
            assert!(!(active && g.on_tree), "the active group is on the service tree");
            if g.queued() > 0 {
                assert!(active || g.on_tree, "group {i} has requests but is not scheduled");
            }
            assert!(g.vdisktime.is_finite() && g.vdisktime >= 0.0);
            assert_eq!(g.on_tree, self.tree.contains(&self.key(i)), "group {i}'s place on the tree");
        }
        assert_eq!(self.tree.len(), self.groups.iter().filter(|g| g.on_tree).count());
        let weight: u64 = self.groups.iter().filter(|g| g.on_tree).map(|g| g.weight as u64).sum();
        assert_eq!(self.tree_weight, weight, "the tree's weight");
        assert_eq!(self.queued, self.groups.iter().map(Group::queued).sum::<usize>(), "the queued count");
        if let Some(m) = &self.mots {
            m.check_invariants();
        }
    }
}

#[cfg(test)]
mod tests;
