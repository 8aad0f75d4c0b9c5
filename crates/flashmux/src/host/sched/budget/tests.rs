use super::*;
use crate::units::{ReqId, TenantId};

fn req(id: u32, t: u16, op: IoOp, bytes: u64) -> SchedReq {
    SchedReq { id: ReqId(id), tenant: TenantId(t), op, offset: 0, bytes, update: false }
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
    let mut b = Bench::new(Budget::new(params(10), &[500, 500]), 4);
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
    let mut b = Bench::new(Budget::new(params(10), &[300, 100]), 2);
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
    let mut b = Bench::new(Budget::new(params(100), &[1, 999]), 1);
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
    let mut b = Bench::new(Budget::new(params(1), &[1, 999]), 1);
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
    let mut s = Budget::new(params(10), &[500, 500]);
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
    let mut s = Budget::new(params(10), &[500, 500]);
    s.enqueue(SimTime::ZERO, req(1, 0, IoOp::Read, 4096));
    s.enqueue(SimTime::ZERO, req(2, 1, IoOp::Read, 4096));
    let a = s.dispatch(SimTime::ZERO).unwrap();
    let before = s.tenants[0].budget;
    s.requeue(a);
    assert_eq!(s.tenants[0].budget, before + 10_000.0);
    assert_eq!(s.dispatch(SimTime::ZERO).map(|r| r.id), Some(ReqId(1)));
    s.check_invariants();
}
