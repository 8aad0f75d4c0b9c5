//! `fair`: a budget scheduler with BCQ's regression-priced requests (paper E's *Fair* baseline).
//!
//! # Model
//! Each tenant has a budget of device time. Every `period` each tenant receives its quota,
//! `period × w / Σw`; a tenant whose budget is spent (≤ 0) is not dispatched until the next
//! refill. A request's price is deducted when it is dispatched, which on an open-channel drive is
//! where paper E throttles: a write's insertion into pblk's ring write buffer, a read's lookup;
//! on an FDP drive, which keeps its FTL, it is the host's dispatch to the drive's queues.
//! A tenant may overdraw by its last request, never more: budgets stay above minus the largest
//! price charged.
//!
//! Prices are per 4 KiB unit, `Cr` for reads and `Cw` for writes, fitted by BCQ's regression
//! ([`super::budget_cost::CostRegression`]): over windows of `window_requests` completions,
//! `T = Nr·Cr + Nw·Cw`, least squares over the last `windows`. Until the first fit every tenant
//! pays the initial prices. Under `fair` the current prices apply, so GC's cost, which raises
//! them, is charged in proportion to throughput.
//!
//! Refills: at every period's end, and earlier when every *active* tenant (one with requests
//! queued or in flight) has spent its budget — then the device would otherwise idle, and a new
//! round starts (work-conserving, as BCQ's rounds). A tenant's unspent budget does not carry
//! over past one quota. Within a round, tenants with budget are served round-robin, one request
//! at a time, in arrival order per tenant.
//!
//! Parameters (`[host.fair]`): `period` (100 ms, assumed: the paper gives none), and the
//! regression's `window` (2,500 requests) and `windows` (20), both from BCQ via paper E.
//!
//! # hWA-BC (`hwabc`, `hwabc-oracle`)
//! The same budgets, with GC taken out of the prices: once the regression has a no-GC baseline,
//! requests pay the baseline prices, and each window's extra GC cost is split over the tenants
//! by their judged contribution `G_i = max(0, a·ln R_i + b)` (from the run lengths of their
//! update writes, seen here at dispatch) or, for the oracle, by the ledger's units GC moved from
//! each one's data; with neither known, by what each was charged in the window. A tenant's share
//! is a debt paid out of its refills, so budgets keep their one-request overdraft bound; when
//! every active tenant is spent, rounds follow at once until one can run.
//!
//! # Where GC is seen
//! A regression window is a GC window when GC ran during it. pblk knows (a victim chosen and
//! not yet erased, [`GcSignal::Running`]). An FDP drive runs its own GC but reports the media
//! bytes it has erased in the FDP statistics log page ([`GcSignal::BlocksErased`]); it erases
//! only to reclaim, so the host, reading the page whenever it schedules, counts a window as a GC
//! window when the count advanced in it. Worked example: a 16 KiB-page, 256-page block is 4 MiB
//! erased; 2,500 completions of 16 KiB writes (one window, 40 MiB) under steady GC at WAF 1.5
//! erase about 15 blocks, so the count advances in every such window, and a GC job still under
//! way when a window closes marks the next one. Reading the page costs an admin command, not
//! modelled. Any other drive shows the host no GC, and the loader refuses these schedulers there.

use super::budget_cost::{
    gc_charges, gc_shares, normalised, units_4k, CostParams, CostRegression, Costs, SeqTracker, UNIT_BYTES,
};
use super::{FtlView, GcSignal, SchedReq, SchedTenantStats, Scheduler};
use crate::device::IoOp;
use crate::units::{Lpn, Nanos, SimTime, TenantId};
use serde::Serialize;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BudgetParams {
    /// How often budgets are refilled.
    pub period: Nanos,
    pub cost: CostParams,
}

/// hWA-BC's compensation on top of the budgets (paper E).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HwabcParams {
    /// `G = a·ln(R) + b`: the fitted relation between a tenant's write randomness and its share
    /// of the valid pages GC moves (`flashmux profile gc-contribution`).
    pub a: f64,
    pub b: f64,
    /// Smoothing of each tenant's update-write run length, in (0, 1).
    pub alpha: f64,
    /// Charge GC by the true shares of pages GC moved (the ownership ledger), not the estimate.
    pub oracle: bool,
}

impl HwabcParams {
    /// The relation implied by the paper's profiling observation (randomness 16 : 1 → 8× the
    /// valid pages collected: `b ≈ 3.23·a`), for a drive with no profiled fit.
    pub const PAPER: (f64, f64) = (1.0, 3.23);

    pub fn new(a: f64, b: f64) -> HwabcParams {
        HwabcParams { a, b, alpha: SeqTracker::DEFAULT_ALPHA, oracle: false }
    }

    /// The scheduler's name: `hwabc`, or `hwabc-oracle` with the true shares.
    pub fn name(&self) -> &'static str {
        if self.oracle {
            "hwabc-oracle"
        } else {
            "hwabc"
        }
    }

    /// Checks the parameters; the error names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(format!("alpha: {} is out of range: expected a smoothing factor in (0, 1), e.g. 0.5", self.alpha));
        }
        if !self.a.is_finite() || !self.b.is_finite() {
            return Err(format!("a, b: must be finite numbers (got a = {}, b = {})", self.a, self.b));
        }
        if self.a <= 0.0 && self.b <= 0.0 {
            return Err(format!(
                "a, b: G = a·ln(R) + b is never positive with a = {} and b = {} (R ≤ 1): no tenant could be charged for GC",
                self.a, self.b
            ));
        }
        Ok(())
    }
}

impl Default for BudgetParams {
    fn default() -> Self {
        BudgetParams { period: Nanos::from_ms(100), cost: CostParams::default() }
    }
}

struct Tenant {
    queue: VecDeque<SchedReq>,
    /// Requests dispatched and not completed.
    inflight: u32,
    /// Device time left to spend, ns; may be below zero by the last request's price.
    budget: f64,
    quota: f64,
    in_ready: bool,
    /// hWA-BC: GC cost charged and not yet paid from refills, ns.
    debt: f64,
    /// Device time charged at dispatch since the last window closed (the throughput shares).
    window_cost: f64,
    /// hWA-BC oracle: GC units moved from its data when the last window closed.
    moved_mark: u64,
    stats: SchedTenantStats,
}

impl Tenant {
    fn active(&self) -> bool {
        !self.queue.is_empty() || self.inflight > 0
    }
}

pub struct Budget {
    p: BudgetParams,
    tenants: Vec<Tenant>,
    /// Tenants with queued requests and budget left, in round-robin order.
    ready: VecDeque<usize>,
    queued: usize,
    next_refill: SimTime,
    reg: CostRegression,
    gc_running: bool,
    /// An FDP drive's erase count as last read (its statistics log page).
    erased_seen: Option<u64>,
    /// The largest price charged so far: the deepest a budget may go below zero.
    max_price: f64,
    refills: u64,
    hw: Option<HwabcParams>,
    seq: Option<SeqTracker>,
    /// hWA-BC oracle: the ledger's units moved per tenant, as last observed.
    moved_now: Vec<u64>,
    /// Regression windows closed, and those with GC in them.
    windows: u64,
    gc_windows: u64,
}

impl Budget {
    /// `fair`, or hWA-BC with `hw`. Panics on invalid `hw` (configs are validated first).
    pub fn new(p: BudgetParams, hw: Option<HwabcParams>, weights: &[u32]) -> Budget {
        let total: f64 = weights.iter().map(|&w| w as f64).sum::<f64>().max(1.0);
        let tenants = weights
            .iter()
            .map(|&w| {
                let quota = p.period.0 as f64 * w as f64 / total;
                Tenant {
                    queue: VecDeque::new(),
                    inflight: 0,
                    budget: quota,
                    quota,
                    in_ready: false,
                    debt: 0.0,
                    window_cost: 0.0,
                    moved_mark: 0,
                    stats: SchedTenantStats { scale: 1.0, gc_charged_ns: hw.map(|_| 0.0), ..Default::default() },
                }
            })
            .collect();
        Budget {
            p,
            tenants,
            ready: VecDeque::new(),
            queued: 0,
            next_refill: SimTime::ZERO + p.period,
            reg: CostRegression::new(p.cost),
            gc_running: false,
            erased_seen: None,
            max_price: 0.0,
            refills: 0,
            hw,
            seq: hw.map(|h| SeqTracker::new(h.alpha).expect("hWA-BC parameters validated")),
            moved_now: vec![0; weights.len()],
            windows: 0,
            gc_windows: 0,
        }
    }

    /// The prices requests are charged now: under `fair` the current ones (GC included, so GC
    /// is charged in proportion to throughput); under hWA-BC the no-GC baseline once it has been
    /// fitted (GC is charged separately, by contribution), the current ones until then.
    pub fn prices(&self) -> Costs {
        if self.hw.is_some() && self.reg.baseline_fitted() {
            self.reg.baseline()
        } else {
            self.reg.current()
        }
    }

    pub fn refills(&self) -> u64 {
        self.refills
    }

    fn price(&self, r: &SchedReq) -> f64 {
        let units = units_4k(r.bytes);
        match r.op {
            IoOp::Read => self.prices().charge(units, 0),
            _ => self.prices().charge(0, units),
        }
    }

    fn make_ready(&mut self, t: usize) {
        let tn = &mut self.tenants[t];
        if !tn.in_ready && !tn.queue.is_empty() && tn.budget > 0.0 {
            tn.in_ready = true;
            self.ready.push_back(t);
        }
    }

    /// A new round: each tenant's budget grows by its quota (up to one quota); GC debt is paid
    /// out of what there is above zero, so the budget never drops because of it.
    fn refill(&mut self) {
        self.refills += 1;
        for t in 0..self.tenants.len() {
            let tn = &mut self.tenants[t];
            tn.budget = (tn.budget + tn.quota).min(tn.quota);
            if tn.debt > 0.0 && tn.budget > 0.0 {
                let pay = tn.debt.min(tn.budget);
                tn.budget -= pay;
                tn.debt -= pay;
            }
            self.make_ready(t);
        }
    }

    /// No active tenant can run: all are spent.
    fn all_active_spent(&self) -> bool {
        self.tenants.iter().all(|t| !t.active() || t.budget <= 0.0)
    }

    /// Periodic refills up to `now`, and an early one when every active tenant is out of budget.
    fn advance(&mut self, now: SimTime) {
        if now >= self.next_refill {
            let periods = (now.0 - self.next_refill.0) / self.p.period.0.max(1) + 1;
            self.next_refill += Nanos(periods * self.p.period.0);
            self.refill();
        }
        // Nobody ready but requests queued: their tenants are out of budget. A new round starts
        // early if no active tenant has budget left (the scan runs only then).
        if self.ready.is_empty() && self.queued > 0 && self.all_active_spent() {
            self.next_refill = now + self.p.period;
            // Rounds in which every active tenant's refill goes to its GC debt follow at once:
            // the device would idle otherwise. Each pays a quota per round, so this ends.
            loop {
                self.refill();
                if !self.ready.is_empty() || !self.all_active_spent() {
                    break;
                }
            }
        }
    }

    /// A regression window closed: hWA-BC splits its extra GC cost among the tenants.
    fn charge_gc(&mut self, extra_gc_ns: f64) {
        let Some(hw) = self.hw else { return };
        let n = self.tenants.len();
        let seq = self.seq.as_mut().expect("hWA-BC has a tracker");
        seq.end_interval();
        let shares = if hw.oracle {
            // GC's work in this window, or, if its moves all fell outside it (a job's pages are
            // counted when the job starts), all GC so far.
            let moved: Vec<f64> = (0..n).map(|t| (self.moved_now[t] - self.tenants[t].moved_mark) as f64).collect();
            normalised(&moved).or_else(|| normalised(&self.moved_now.iter().map(|&m| m as f64).collect::<Vec<_>>()))
        } else {
            gc_shares(&seq.seq_lens(n), hw.a, hw.b)
        };
        // No contribution known (no updates seen, or GC moved nothing of anyone's): in proportion
        // to throughput, as before compensation.
        let shares = shares.or_else(|| normalised(&self.tenants.iter().map(|t| t.window_cost).collect::<Vec<_>>()));
        if let Some(shares) = shares.filter(|_| extra_gc_ns > 0.0) {
            for (t, c) in gc_charges(extra_gc_ns, &shares).into_iter().enumerate() {
                self.tenants[t].debt += c;
                *self.tenants[t].stats.gc_charged_ns.get_or_insert(0.0) += c;
            }
        }
        for (t, tn) in self.tenants.iter_mut().enumerate() {
            tn.window_cost = 0.0;
            tn.moved_mark = self.moved_now[t];
        }
    }
}

impl Scheduler for Budget {
    fn name(&self) -> &'static str {
        self.hw.map_or("fair", |h| h.name())
    }

    fn observe(&mut self, _now: SimTime, ftl: &dyn FtlView) {
        self.gc_running = match ftl.gc_signal() {
            GcSignal::Running(running) => running,
            // An FDP drive's erase count, read again: GC ran if it advanced since the last read.
            GcSignal::BlocksErased(n) => self.erased_seen.replace(n).is_some_and(|seen| n > seen),
        };
        if self.gc_running {
            self.reg.note_gc();
        }
        if self.hw.is_some_and(|h| h.oracle) {
            for (t, m) in self.moved_now.iter_mut().enumerate() {
                *m = ftl.gc_units_moved(TenantId(t as u16));
            }
        }
    }

    fn enqueue(&mut self, now: SimTime, r: SchedReq) {
        let t = r.tenant.index();
        self.tenants[t].queue.push_back(r);
        self.queued += 1;
        self.make_ready(t);
        self.advance(now);
    }

    fn dispatch(&mut self, now: SimTime) -> Option<SchedReq> {
        self.advance(now);
        let t = self.ready.pop_front()?;
        let price = {
            let r = self.tenants[t].queue.front().expect("a ready tenant has a request");
            self.price(r)
        };
        self.max_price = self.max_price.max(price);
        let tn = &mut self.tenants[t];
        let r = tn.queue.pop_front().expect("checked");
        self.queued -= 1;
        tn.budget -= price;
        tn.window_cost += price;
        tn.inflight += 1;
        tn.stats.dispatched += 1;
        tn.stats.service_ns += price as u64;
        tn.in_ready = false;
        if !tn.queue.is_empty() && tn.budget > 0.0 {
            tn.in_ready = true;
            self.ready.push_back(t);
        }
        if let Some(seq) = self.seq.as_mut().filter(|_| r.op == IoOp::Write) {
            // Runs are judged where the write enters the host FTL, in 4 KiB units.
            seq.record_write(TenantId(t as u16), Lpn((r.offset / UNIT_BYTES) as u32), units_4k(r.bytes), r.update);
        }
        Some(r)
    }

    fn grow(&mut self, r: &SchedReq) {
        super::none::grow_in(self.tenants[r.tenant.index()].queue.iter_mut().rev(), r);
    }

    fn requeue(&mut self, r: SchedReq) {
        let t = r.tenant.index();
        let price = self.price(&r);
        let tn = &mut self.tenants[t];
        tn.budget += price;
        tn.window_cost -= price;
        tn.inflight -= 1;
        tn.stats.dispatched -= 1;
        tn.stats.service_ns = tn.stats.service_ns.saturating_sub(price as u64);
        tn.queue.push_front(r);
        self.queued += 1;
        if tn.in_ready {
            // Its turn comes first: the device could not take the request.
            if let Some(pos) = self.ready.iter().position(|&x| x == t) {
                self.ready.remove(pos);
            }
        }
        tn.in_ready = true;
        self.ready.push_front(t);
    }

    fn complete(&mut self, now: SimTime, r: &SchedReq, _service: Nanos) {
        let t = r.tenant.index();
        self.tenants[t].inflight -= 1;
        let units = units_4k(r.bytes);
        let (nr, nw) = if r.op == IoOp::Read { (units, 0) } else { (0, units) };
        if let Some(w) = self.reg.record(now, nr, nw, self.gc_running) {
            self.windows += 1;
            self.gc_windows += u64::from(w.gc);
            self.charge_gc(w.extra_gc_ns);
        }
        self.advance(now);
    }

    fn next_wakeup(&self) -> Option<SimTime> {
        // Only a tenant held back by its budget needs the refill.
        (self.queued > 0 && self.ready.is_empty()).then_some(self.next_refill)
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn tenant_stats(&self, t: usize) -> Option<SchedTenantStats> {
        let mut s = self.tenants[t].stats;
        s.turns = self.refills;
        Some(s)
    }

    /// hWA-BC separates GC's cost only against no-GC prices, which it learns from `windows`
    /// regression windows without GC. On a drive where GC runs from the start (aged and full)
    /// it never gets them: it then charges prices with GC in them to everyone, as `fair` does,
    /// and says so.
    fn warnings(&self) -> Vec<String> {
        let Some(hw) = self.hw else { return Vec::new() };
        if self.reg.baseline_fitted() || self.gc_windows == 0 {
            return Vec::new();
        }
        let c = self.p.cost;
        vec![format!(
            "{}: GC ran in {} of the {} cost windows ({} completions each), so it never had the {} GC-free \
             windows it needs to learn no-GC prices: GC's cost was not separated or charged by contribution \
             (gc_charged_ns 0), and requests paid prices with GC in them, as under `fair`. A drive that starts \
             with free blocks lets it learn them ([precondition] fill below 1, or state = \"sequential-fill\"), \
             as do fewer or shorter windows ([host.hwabc] windows, window)",
            hw.name(),
            self.gc_windows,
            self.windows,
            c.window_requests,
            c.windows
        )]
    }

    fn check_invariants(&self) {
        let mut queued = 0;
        for (i, t) in self.tenants.iter().enumerate() {
            queued += t.queue.len();
            assert!(t.budget.is_finite() && t.budget <= t.quota + 1e-6, "tenant {i}'s budget {} above its quota", t.budget);
            assert!(t.budget >= -self.max_price - 1e-6, "tenant {i} overdrew by more than one request: {}", t.budget);
            assert!(t.debt.is_finite() && t.debt >= 0.0, "tenant {i}'s GC debt {}", t.debt);
            assert!(self.hw.is_some() || t.debt == 0.0, "GC debt under fair");
            let listed = self.ready.iter().filter(|&&x| x == i).count();
            assert_eq!(listed, t.in_ready as usize, "tenant {i}'s place in the ready list");
            if t.in_ready {
                assert!(!t.queue.is_empty(), "tenant {i} is ready without requests");
            }
            if !t.queue.is_empty() && t.budget > 0.0 {
                assert!(t.in_ready, "tenant {i} has budget and requests but is not ready");
            }
        }
        assert_eq!(queued, self.queued, "the queued count");
        self.reg.check_invariants();
    }
}

#[cfg(test)]
mod tests;
