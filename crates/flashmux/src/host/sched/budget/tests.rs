use super::*;
use crate::units::{ReqId, TenantId};

fn req(id: u32, t: u16, op: IoOp, bytes: u64) -> SchedReq {
    SchedReq { id: ReqId(id), tenant: TenantId(t), op, offset: 0, bytes, update: false, dspec: 0 }
}

fn params(period_ms: u64) -> BudgetParams {
    // A window no test reaches: the initial prices hold (10 µs per 4 KiB unit, reads and writes).
    BudgetParams { period: Nanos::from_ms(period_ms), cost: CostParams { window_requests: 1_000_000, ..CostParams::default() } }
}

/// A closed loop: each tenant keeps `depth` requests of its op and size outstanding; the device
/// serves `slots` at a time, each taking `service` per 4 KiB unit of its op.
struct Bench {
    s: Budget,
    now: SimTime,
    inflight: Vec<(SimTime, SchedReq)>,
    slots: usize,
    next: u32,
    done_units: Vec<u64>,
}

impl Bench {
    fn new(s: Budget, slots: usize) -> Bench {
        let n = s.tenants.len();
        Bench { s, now: SimTime::ZERO, inflight: Vec::new(), slots, next: 0, done_units: vec![0; n] }
    }
    fn submit(&mut self, t: u16, op: IoOp, bytes: u64) {
        self.next += 1;
        self.s.enqueue(self.now, req(self.next, t, op, bytes));
    }
    /// Runs until `end`; `jobs[t] = (op, bytes, service per unit)`, resubmitting on completion.
    fn run(&mut self, end: SimTime, jobs: &[(IoOp, u64, Nanos)]) {
        while self.now < end {
            while self.inflight.len() < self.slots {
                let Some(r) = self.s.dispatch(self.now) else { break };
                let (_, _, per_unit) = jobs[r.tenant.index()];
                let done = self.now + Nanos(per_unit.0 * units_4k(r.bytes));
                self.inflight.push((done, r));
            }
            self.s.check_invariants();
            let next_done = self.inflight.iter().map(|x| x.0).min();
            let wake = self.s.next_wakeup().filter(|&w| w > self.now);
            let Some(t) = [next_done, wake].into_iter().flatten().min() else { break };
            self.now = t;
            while let Some(i) = self.inflight.iter().position(|x| x.0 == self.now) {
                let (_, r) = self.inflight.swap_remove(i);
                self.done_units[r.tenant.index()] += units_4k(r.bytes);
                self.s.complete(self.now, &r, Nanos::ZERO);
                let (op, bytes, _) = jobs[r.tenant.index()];
                self.submit(r.tenant.0, op, bytes);
            }
        }
    }
}

#[test]
fn equal_weights_buy_equal_priced_service_whatever_the_device_charges() {
    // Tenant 0's writes take the device 4× as long as tenant 1's reads, but both pay the same
    // price per unit: budgets give each the same number of units, so the reader is held back
    // as much as the writer, and neither gets more than half.
    let mut b = Bench::new(Budget::new(params(10), None, &[500, 500]), 4);
    for _ in 0..8 {
        b.submit(0, IoOp::Write, 16384);
        b.submit(1, IoOp::Read, 16384);
    }
    let jobs = [(IoOp::Write, 16384, Nanos::from_us(40)), (IoOp::Read, 16384, Nanos::from_us(10))];
    b.run(SimTime::ZERO + Nanos::from_secs(2), &jobs);
    let (w, r) = (b.done_units[0] as f64, b.done_units[1] as f64);
    assert!((w / r - 1.0).abs() < 0.05, "units {w} vs {r}");
    assert!(b.s.refills() > 100, "rounds ran: {}", b.s.refills());
}

#[test]
fn weights_divide_the_budget() {
    let mut b = Bench::new(Budget::new(params(10), None, &[300, 100]), 2);
    for _ in 0..8 {
        b.submit(0, IoOp::Read, 4096);
        b.submit(1, IoOp::Read, 4096);
    }
    let jobs = [(IoOp::Read, 4096, Nanos::from_us(20)), (IoOp::Read, 4096, Nanos::from_us(20))];
    b.run(SimTime::ZERO + Nanos::from_secs(1), &jobs);
    let ratio = b.done_units[0] as f64 / b.done_units[1] as f64;
    assert!((ratio - 3.0).abs() < 0.15, "ratio {ratio}");
}

#[test]
fn a_tenant_alone_is_not_held_to_its_quota() {
    // Work-conserving: with nobody else active, an exhausted tenant starts a new round at once
    // instead of waiting out the period.
    let mut b = Bench::new(Budget::new(params(100), None, &[1, 999]), 1);
    b.submit(0, IoOp::Read, 4096);
    let jobs = [(IoOp::Read, 4096, Nanos::from_us(10)), (IoOp::Read, 4096, Nanos::from_us(10))];
    b.run(SimTime::ZERO + Nanos::from_ms(100), &jobs);
    // 100 ms at 10 µs per request, one at a time.
    assert!(b.done_units[0] >= 9_900, "{}", b.done_units[0]);
}

#[test]
fn a_request_dearer_than_a_refill_is_still_served() {
    // Tenant 0's quota is 1/1000 of 1 ms = 1 µs; its 1 MiB write costs 256 units × 10 µs.
    // Tenant 1 keeps the device busy; tenant 0 is served anyway, overdraws by that request, and
    // pays it back a quota per round (about 1 ms each) before its second write: ~2.6 s.
    let mut b = Bench::new(Budget::new(params(1), None, &[1, 999]), 1);
    b.submit(0, IoOp::Write, 1 << 20);
    b.submit(0, IoOp::Write, 1 << 20);
    for _ in 0..4 {
        b.submit(1, IoOp::Read, 4096);
    }
    let jobs = [(IoOp::Write, 1 << 20, Nanos::from_us(1)), (IoOp::Read, 4096, Nanos::from_us(10))];
    b.run(SimTime::ZERO + Nanos::from_secs(4), &jobs);
    assert!(b.done_units[0] >= 2 * 256, "tenant 0 got {} units", b.done_units[0]);
    assert!(b.done_units[1] > 10 * b.done_units[0], "the heavy tenant keeps most: {:?}", b.done_units);
}

#[test]
fn a_held_back_tenant_waits_for_the_refill() {
    // Tenant 1 has requests in flight (active) and budget: tenant 0, out of budget, waits for
    // the period's end rather than starting a new round.
    let mut s = Budget::new(params(10), None, &[500, 500]);
    // Quota 5 ms each; 4 KiB costs 10 µs: tenant 0 may dispatch 500 requests.
    for i in 0..600 {
        s.enqueue(SimTime::ZERO, req(i, 0, IoOp::Read, 4096));
    }
    s.enqueue(SimTime::ZERO, req(1000, 1, IoOp::Read, 4096));
    let mut sent = 0;
    while let Some(r) = s.dispatch(SimTime::ZERO) {
        sent += (r.tenant.0 == 0) as u32;
    }
    assert_eq!(sent, 500);
    assert_eq!(s.next_wakeup(), Some(SimTime::ZERO + Nanos::from_ms(10)));
    s.check_invariants();
    assert_eq!(s.dispatch(SimTime::ZERO + Nanos::from_ms(9)), None);
    assert!(s.dispatch(SimTime::ZERO + Nanos::from_ms(10)).is_some(), "refilled");
    s.check_invariants();
}

#[test]
fn requeue_refunds_and_goes_first() {
    let mut s = Budget::new(params(10), None, &[500, 500]);
    s.enqueue(SimTime::ZERO, req(1, 0, IoOp::Read, 4096));
    s.enqueue(SimTime::ZERO, req(2, 1, IoOp::Read, 4096));
    let a = s.dispatch(SimTime::ZERO).unwrap();
    let before = s.tenants[0].budget;
    s.requeue(a);
    assert_eq!(s.tenants[0].budget, before + 10_000.0);
    assert_eq!(s.dispatch(SimTime::ZERO).map(|r| r.id), Some(ReqId(1)));
    s.check_invariants();
}

fn hwabc(oracle: bool) -> Budget {
    let hw = HwabcParams { oracle, ..HwabcParams::new(1.0, 3.23) };
    Budget::new(params(10), Some(hw), &[500, 500])
}

fn write_at(id: u32, t: u16, offset: u64, bytes: u64) -> SchedReq {
    SchedReq { id: ReqId(id), tenant: TenantId(t), op: IoOp::Write, offset, bytes, update: true, dspec: 0 }
}

/// Dispatches 16 KiB update writes: tenant 0 scattered, tenant 1 one sequential run.
fn random_and_sequential_updates(s: &mut Budget) {
    for i in 0..20u32 {
        s.enqueue(SimTime::ZERO, write_at(2 * i, 0, (i as u64 * 7919 % 101) * (1 << 20), 16384));
        s.enqueue(SimTime::ZERO, write_at(2 * i + 1, 1, i as u64 * 16384, 16384));
    }
    while s.dispatch(SimTime::ZERO).is_some() {}
}

struct Ledger {
    gc: bool,
    moved: Vec<u64>,
}

impl FtlView for Ledger {
    fn is_update(&self, _: u64, _: u64) -> bool {
        true
    }
    fn gc_signal(&self) -> GcSignal {
        GcSignal::Running(self.gc)
    }
    fn gc_units_moved(&self, t: TenantId) -> u64 {
        self.moved[t.index()]
    }
    fn unit_bytes(&self) -> u64 {
        4096
    }
}

#[test]
fn hwabc_charges_gc_by_update_randomness_and_collects_it_from_refills() {
    let mut s = hwabc(false);
    assert_eq!(s.name(), "hwabc");
    random_and_sequential_updates(&mut s);
    s.charge_gc(1_000_000.0);
    // SeqLen: tenant 0 runs of 4 units, tenant 1 one run of 80: R = 20/21 and 1/21;
    // G = max(0, ln R + 3.23) = 3.181 and 0.185 (b = 3.23·a keeps the sequential one above 0).
    let g0 = (20.0f64 / 21.0).ln() + 3.23;
    let g1 = (1.0f64 / 21.0).ln() + 3.23;
    let want0 = 1e6 * g0 / (g0 + g1);
    assert!((s.tenants[0].debt - want0).abs() < 1e-3, "{} vs {want0}", s.tenants[0].debt);
    assert!((s.tenants[0].debt + s.tenants[1].debt - 1e6).abs() < 1e-3);
    assert_eq!(s.tenant_stats(0).and_then(|t| t.gc_charged_ns), Some(s.tenants[0].debt));
    // Each spent 20 × 4 units × 10 µs = 800 µs of its 5 ms quota. A refill tops each up to its
    // quota and takes the debt out of that: tenant 0 pays 5 ms of its 0.94 ms, tenant 1 all
    // of its 0.06 ms; no budget goes below zero for it.
    s.refill();
    assert_eq!(s.tenants[0].debt, 0.0);
    assert!((s.tenants[0].budget - (5e6 - want0)).abs() < 1e-3, "{}", s.tenants[0].budget);
    assert!((s.tenants[1].budget - (5e6 - (1e6 - want0))).abs() < 1e-3);
    s.check_invariants();
    // A debt of many quotas is paid over as many rounds, the budget staying at zero meanwhile.
    s.tenants[0].debt = 12e6;
    s.refill();
    s.refill();
    assert_eq!(s.tenants[0].budget, 0.0);
    assert!((s.tenants[0].debt - 2e6).abs() < 1e-3, "{}", s.tenants[0].debt);
    s.check_invariants();
}

#[test]
fn hwabc_without_known_contributions_charges_by_throughput() {
    // Reads only: nobody updates, so no G; GC is charged in proportion to what each was charged
    // for its own requests in the window.
    let mut s = hwabc(false);
    for i in 0..30 {
        s.enqueue(SimTime::ZERO, req(i, 0, IoOp::Read, 4096));
        s.enqueue(SimTime::ZERO, req(100 + i, 1, IoOp::Read, if i < 10 { 4096 } else { 0 }));
    }
    while s.dispatch(SimTime::ZERO).is_some() {}
    s.charge_gc(400.0);
    // 30 units against 10.
    assert!((s.tenants[0].debt - 300.0).abs() < 1e-9 && (s.tenants[1].debt - 100.0).abs() < 1e-9);
    // The next window starts its tally afresh.
    assert_eq!(s.tenants[0].window_cost, 0.0);
}

#[test]
fn hwabc_oracle_charges_by_the_ledger() {
    let mut s = hwabc(true);
    assert_eq!(s.name(), "hwabc-oracle");
    random_and_sequential_updates(&mut s);
    s.observe(SimTime::ZERO, &Ledger { gc: true, moved: vec![30, 10] });
    s.charge_gc(100.0);
    assert!((s.tenants[0].debt - 75.0).abs() < 1e-9, "{}", s.tenants[0].debt);
    // This window GC moved only tenant 1's data: it pays it all.
    s.observe(SimTime::ZERO, &Ledger { gc: true, moved: vec![30, 50] });
    s.charge_gc(100.0);
    assert!((s.tenants[1].debt - 125.0).abs() < 1e-9, "{}", s.tenants[1].debt);
    // Nothing moved in this window: the shares so far (30 : 50).
    s.charge_gc(80.0);
    assert!((s.tenants[0].debt - 105.0).abs() < 1e-9, "{}", s.tenants[0].debt);
    s.check_invariants();
}

#[test]
fn hwabc_debt_never_starves_a_tenant_alone() {
    // One tenant, deep in GC debt: rounds whose refills all go to the debt follow at once, so
    // it is served without waiting out periods.
    let mut s = hwabc(false);
    s.tenants[0].debt = 1e9;
    s.tenants[0].budget = 0.0;
    s.enqueue(SimTime::ZERO, req(1, 0, IoOp::Read, 4096));
    assert!(s.dispatch(SimTime::ZERO).is_some(), "served after paying its debt in rounds");
    assert_eq!(s.tenants[0].debt, 0.0);
    assert!(s.refills() >= 200, "{} rounds", s.refills());
    s.check_invariants();
}

/// An FDP drive's statistics log page, as far as the budgets read it: blocks erased so far.
struct Erases(u64);

impl FtlView for Erases {
    fn is_update(&self, _: u64, _: u64) -> bool {
        false
    }
    fn gc_signal(&self) -> GcSignal {
        GcSignal::BlocksErased(self.0)
    }
    fn gc_units_moved(&self, _: TenantId) -> u64 {
        0
    }
    fn unit_bytes(&self) -> u64 {
        4096
    }
}

#[test]
fn an_fdp_drives_erase_count_marks_the_windows_gc_ran_in() {
    // Windows of 2 completions. The host reads the erase count before each completion (as the
    // block layer calls `observe`); a window is a GC window when the count rose within it.
    let p = BudgetParams { period: Nanos::from_ms(100), cost: CostParams { window_requests: 2, ..CostParams::default() } };
    let mut s = Budget::new(p, None, &[1]);
    // The counts read before completions 0 (starts the clock), 1-2 (window 1), 3-4 (window 2),
    // 5-6 (window 3): blocks erased before the run do not count; the rise at completion 4
    // marks window 2 only; the rise at 5 marks window 3.
    let reads = [7, 7, 7, 7, 9, 10, 10];
    let mut gc_seen = Vec::new();
    for (i, &n) in reads.iter().enumerate() {
        s.enqueue(SimTime(i as u64 * 1000), req(i as u32, 0, IoOp::Write, 4096));
        let r = s.dispatch(SimTime(i as u64 * 1000)).expect("one request, budget to spare");
        s.observe(SimTime(i as u64 * 1000 + 500), &Erases(n));
        gc_seen.push(s.gc_running);
        s.complete(SimTime(i as u64 * 1000 + 500), &r, Nanos(500));
    }
    assert_eq!(gc_seen, [false, false, false, false, true, true, false]);
    assert_eq!((s.windows, s.gc_windows), (3, 2), "windows 2 and 3 had GC, window 1 none");
    s.check_invariants();
}
