//! `fair`: a budget scheduler with BCQ's regression-priced requests (paper E's *Fair* baseline).
//!
//! # Model
//! Each tenant has a budget of device time. Every `period` each tenant receives its quota,
//! `period × w / Σw`; a tenant whose budget is spent (≤ 0) is not dispatched until the next
//! refill. A request's price is deducted when it is dispatched, which on an open-channel drive is
//! where paper E throttles: a write's insertion into pblk's ring write buffer, a read's lookup.
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

use super::budget_cost::{units_4k, CostParams, CostRegression, Costs};
use super::{HostFtl, SchedReq, SchedTenantStats, Scheduler};
use crate::device::IoOp;
use crate::units::{Nanos, SimTime};
use serde::Serialize;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BudgetParams {
    /// How often budgets are refilled.
    pub period: Nanos,
    pub cost: CostParams,
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
    /// The largest price charged so far: the deepest a budget may go below zero.
    max_price: f64,
    refills: u64,
}

impl Budget {
    pub fn new(p: BudgetParams, weights: &[u32]) -> Budget {
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
                    stats: SchedTenantStats { scale: 1.0, ..Default::default() },
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
            max_price: 0.0,
            refills: 0,
        }
    }

    /// The prices requests are charged now.
    pub fn prices(&self) -> Costs {
        self.reg.current()
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

    fn refill(&mut self) {
        self.refills += 1;
        for t in 0..self.tenants.len() {
            let tn = &mut self.tenants[t];
            tn.budget = (tn.budget + tn.quota).min(tn.quota);
            self.make_ready(t);
        }
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
        if self.ready.is_empty() && self.queued > 0 && self.tenants.iter().all(|t| !t.active() || t.budget <= 0.0) {
            self.next_refill = now + self.p.period;
            self.refill();
        }
    }
}

impl Scheduler for Budget {
    fn name(&self) -> &'static str {
        "fair"
    }

    fn observe(&mut self, _now: SimTime, ftl: &dyn HostFtl) {
        self.gc_running = ftl.gc_running();
        if self.gc_running {
            self.reg.note_gc();
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
        tn.inflight += 1;
        tn.stats.dispatched += 1;
        tn.stats.service_ns += price as u64;
        tn.in_ready = false;
        if !tn.queue.is_empty() && tn.budget > 0.0 {
            tn.in_ready = true;
            self.ready.push_back(t);
        }
        Some(r)
    }

    fn requeue(&mut self, r: SchedReq) {
        let t = r.tenant.index();
        let price = self.price(&r);
        let tn = &mut self.tenants[t];
        tn.budget += price;
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
        self.reg.record(now, nr, nw, self.gc_running);
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

    fn check_invariants(&self) {
        let mut queued = 0;
        for (i, t) in self.tenants.iter().enumerate() {
            queued += t.queue.len();
            assert!(t.budget.is_finite() && t.budget <= t.quota + 1e-6, "tenant {i}'s budget {} above its quota", t.budget);
            assert!(t.budget >= -self.max_price - 1e-6, "tenant {i} overdrew by more than one request: {}", t.budget);
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
