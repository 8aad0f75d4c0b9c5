use super::*;
use crate::host::sched::mots::MotsParams;
use crate::units::{ReqId, TenantId};

fn req(id: u32, t: u16, op: IoOp) -> SchedReq {
    SchedReq { id: ReqId(id), tenant: TenantId(t), op, offset: 0, bytes: 4096, update: false, dspec: 0 }
}

fn ms(x: u64) -> SimTime {
    SimTime::ZERO + Nanos::from_ms(x)
}

/// Closed-loop tenants in front of a device with `slots` parallel slots; each tenant keeps
/// `depth` requests outstanding, issues the next one as soon as one completes, and its requests
/// take `cost[t]` in the device.
struct Bench {
    s: Cfq,
    slots: usize,
    cost: Vec<Nanos>,
    now: SimTime,
    in_device: Vec<(SimTime, SchedReq)>,
    next_id: u32,
    /// Per tenant: requests completed and device time they used.
    done: Vec<u64>,
    busy: Vec<Nanos>,
}

impl Bench {
    fn new(s: Cfq, slots: usize, cost: Vec<Nanos>, depth: u32) -> Bench {
        let n = cost.len();
        let mut b = Bench { s, slots, cost, now: SimTime::ZERO, in_device: Vec::new(), next_id: 0, done: vec![0; n], busy: vec![Nanos::ZERO; n] };
        for t in 0..n {
            for _ in 0..depth {
                b.issue(t);
            }
        }
        b
    }

    fn issue(&mut self, t: usize) {
        self.next_id += 1;
        self.s.enqueue(self.now, req(self.next_id, t as u16, IoOp::Read));
    }

    fn fill(&mut self) {
        while self.in_device.len() < self.slots {
            let Some(r) = self.s.dispatch(self.now) else { break };
            self.in_device.push((self.now + self.cost[r.tenant.index()], r));
        }
    }

    fn run_until(&mut self, end: SimTime) {
        loop {
            self.fill();
            self.s.check_invariants();
            let next_done = self.in_device.iter().map(|&(t, _)| t).min();
            // A wake-up already due waits for the next dispatch (the device is full).
            let wake = self.s.next_wakeup().filter(|&t| t > self.now);
            let next = match (next_done, wake) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b).expect("the bench never runs dry"),
            };
            if next > end {
                return;
            }
            self.now = self.now.max(next);
            while let Some(i) = self.in_device.iter().position(|&(t, _)| t <= self.now) {
                let (_, r) = self.in_device.remove(i);
                let t = r.tenant.index();
                self.done[t] += 1;
                self.busy[t] += self.cost[t];
                self.s.complete(self.now, &r, self.cost[t]);
                self.issue(t);
            }
        }
    }

    fn time_shares(&self) -> Vec<f64> {
        let total: u64 = self.busy.iter().map(|b| b.0).sum();
        self.busy.iter().map(|b| b.0 as f64 / total as f64).collect()
    }
}

fn cfq(weights: &[u32]) -> Cfq {
    Cfq::new(CfqParams::default(), weights, 32, None)
}

fn ideal(weights: &[u32]) -> Vec<f64> {
    let sum: u32 = weights.iter().sum();
    weights.iter().map(|&w| w as f64 / sum as f64).collect()
}

fn max_rel_error(got: &[f64], want: &[f64]) -> f64 {
    got.iter().zip(want).map(|(g, w)| (g - w).abs() / w).fold(0.0, f64::max)
}

#[test]
fn device_time_follows_the_weights() {
    for weights in [vec![2, 1], vec![10, 7, 4, 1], vec![500, 500, 500]] {
        let n = weights.len();
        let mut b = Bench::new(cfq(&weights), 1, vec![Nanos::from_us(100); n], 4);
        b.run_until(ms(20_000));
        let err = max_rel_error(&b.time_shares(), &ideal(&weights));
        assert!(err < 0.03, "{weights:?}: shares {:?}, error {err}", b.time_shares());
    }
}

#[test]
fn slices_are_shares_of_the_target_latency_within_bounds() {
    let weights = [10, 7, 4, 1];
    let mut b = Bench::new(cfq(&weights), 1, vec![Nanos::from_us(100); 4], 4);
    b.run_until(ms(20_000));
    // 300 ms × w / 22 kept within [16, 100] ms.
    for (t, want_ms) in [100.0, 95.45, 54.55, 16.0].into_iter().enumerate() {
        let s = b.s.tenant_stats(t).expect("cfq keeps per-tenant stats");
        let mean_ms = s.service_ns as f64 / s.turns as f64 / 1e6;
        assert!((mean_ms - want_ms).abs() < 0.5, "tenant {t}: mean slice {mean_ms} ms, want {want_ms}");
        assert_eq!(s.scale, 1.0);
    }
}

#[test]
fn sixty_four_tenants_share_by_weight() {
    let weights: Vec<u32> = (0..64).map(|i| 100 + (i * 37 % 64) * 14).collect();
    let mut b = Bench::new(cfq(&weights), 1, vec![Nanos::from_us(50); 64], 2);
    b.run_until(ms(120_000));
    let shares = b.time_shares();
    let want = ideal(&weights);
    let mean_err: f64 = shares.iter().zip(&want).map(|(g, w)| (g - w).abs() / w).sum::<f64>() / 64.0;
    assert!(mean_err < 0.05, "mean share error {mean_err}");
    assert!(b.done.iter().all(|&d| d > 0), "every tenant is served");
}

#[test]
fn an_emptied_group_keeps_the_device_for_slice_idle() {
    let mut s = cfq(&[500, 500]);
    s.enqueue(ms(0), req(1, 0, IoOp::Read));
    s.enqueue(ms(0), req(2, 1, IoOp::Read));
    let a = s.dispatch(ms(0)).unwrap();
    assert_eq!(a.tenant, TenantId(0));
    assert_eq!(s.dispatch(ms(0)), None, "tenant 0 has a request in flight: the device waits for it");
    s.complete(ms(1), &a, Nanos::from_ms(1));
    assert_eq!(s.dispatch(ms(1)), None, "idling for tenant 0's next request");
    assert_eq!(s.next_wakeup(), Some(ms(9)));
    s.enqueue(ms(3), req(3, 0, IoOp::Read));
    assert_eq!(s.dispatch(ms(3)).map(|r| r.id), Some(ReqId(3)), "a request within the idle window continues the slice");
    s.complete(ms(4), &req(3, 0, IoOp::Read), Nanos::from_ms(1));
    assert_eq!(s.dispatch(ms(11)), None, "idling until 12 ms");
    assert_eq!(s.dispatch(ms(12)).map(|r| r.id), Some(ReqId(2)), "the idle window expired: tenant 1's turn");
    assert_eq!(s.tenant_stats(0).expect("cfq keeps per-tenant stats").service_ns, Nanos::from_ms(11).0, "charged from the slice's first completion");
}

#[test]
fn quantum_caps_the_active_group_only_while_others_wait() {
    let mut s = cfq(&[500, 500]);
    for i in 0..20 {
        s.enqueue(ms(0), req(i, 0, IoOp::Read));
    }
    s.enqueue(ms(0), req(100, 1, IoOp::Read));
    let n = std::iter::from_fn(|| s.dispatch(ms(0))).count();
    assert_eq!(n, 8);
    let mut alone = cfq(&[500, 500]);
    for i in 0..20 {
        alone.enqueue(ms(0), req(i, 0, IoOp::Read));
    }
    assert_eq!(std::iter::from_fn(|| alone.dispatch(ms(0))).count(), 20);
}

#[test]
fn reads_go_first_until_a_write_has_waited_fifo_expire() {
    let mut s = cfq(&[500]);
    s.enqueue(ms(0), req(1, 0, IoOp::Write));
    s.enqueue(ms(1), req(2, 0, IoOp::Read));
    s.enqueue(ms(1), req(3, 0, IoOp::Write));
    s.enqueue(ms(300), req(4, 0, IoOp::Read));
    assert_eq!(s.dispatch(ms(1)).unwrap().id, ReqId(2));
    assert_eq!(s.dispatch(ms(300)).unwrap().id, ReqId(1), "write 1 waited 300 ms > 250 ms");
    assert_eq!(s.dispatch(ms(300)).unwrap().id, ReqId(3), "write 3 waited 299 ms");
    assert_eq!(s.dispatch(ms(300)).unwrap().id, ReqId(4));
}

#[test]
fn a_requeued_request_goes_first() {
    let mut s = cfq(&[500]);
    s.enqueue(ms(0), req(1, 0, IoOp::Write));
    s.enqueue(ms(0), req(2, 0, IoOp::Read));
    let r = s.dispatch(ms(0)).unwrap();
    assert_eq!(r.id, ReqId(2));
    s.requeue(r);
    assert_eq!(s.queued(), 2);
    assert_eq!(s.dispatch(ms(0)).unwrap().id, ReqId(2));
    assert_eq!(s.tenant_stats(0).expect("cfq keeps per-tenant stats").dispatched, 1);
}

#[test]
fn a_returning_group_queues_behind_the_busy_ones() {
    let mut s = cfq(&[500, 500, 500]);
    s.enqueue(ms(0), req(1, 0, IoOp::Read));
    s.enqueue(ms(0), req(2, 1, IoOp::Read));
    let a = s.dispatch(ms(0)).unwrap();
    s.complete(ms(1), &a, Nanos::from_ms(1));
    // Tenant 2 arrives while tenant 1 waits: it goes behind tenant 1 even though it never ran.
    s.enqueue(ms(2), req(3, 2, IoOp::Read));
    let next = s.dispatch(ms(20)).unwrap();
    assert_eq!(next.tenant, TenantId(1));
    assert!(s.groups[2].vdisktime > s.groups[1].vdisktime);
}

#[test]
fn iops_mode_does_not_idle_and_charges_per_request() {
    let p = CfqParams { slice_idle: Nanos::ZERO, ..Default::default() };
    // Tenant 0's requests take 4× as long; equal weights give equal request counts.
    let mut b = Bench::new(Cfq::new(p, &[500, 500], 32, None), 1, vec![Nanos::from_us(400), Nanos::from_us(100)], 4);
    b.run_until(ms(20_000));
    let ratio = b.done[0] as f64 / b.done[1] as f64;
    assert!((ratio - 1.0).abs() < 0.05, "IOPS ratio {ratio}");
    let mut s = Cfq::new(p, &[500, 500], 32, None);
    s.enqueue(ms(0), req(1, 0, IoOp::Read));
    s.enqueue(ms(0), req(2, 1, IoOp::Read));
    assert_eq!(s.dispatch(ms(0)).unwrap().tenant, TenantId(0));
    assert_eq!(s.dispatch(ms(0)).unwrap().tenant, TenantId(1), "no idling: the next group is served at once");
}

/// The RVM's requests take twice as long as the TVM's: CFQ divides device *time* 4 : 1, so the
/// bandwidth comes out 2 : 1. MoTS measures that and lengthens the RVM's slice.
#[test]
fn mcfq_moves_bandwidth_toward_the_weights_where_cfq_misses() {
    let weights = [4, 1];
    let cost = vec![Nanos::from_us(200), Nanos::from_us(100)];
    let run = |mots: Option<Mots>| {
        let mut b = Bench::new(Cfq::new(CfqParams::default(), &weights, 32, mots), 1, cost.clone(), 4);
        b.run_until(ms(60_000));
        (b.done[0] as f64 / b.done[1] as f64, b.s.tenant_stats(0).expect("cfq keeps per-tenant stats").scale)
    };
    let (cfq_ratio, cfq_scale) = run(None);
    let (mcfq_ratio, mcfq_scale) = run(Some(Mots::new(MotsParams::default(), &weights)));
    assert!((cfq_ratio - 2.0).abs() < 0.1, "CFQ: {cfq_ratio}");
    assert_eq!(cfq_scale, 1.0);
    assert!(mcfq_scale > 1.3, "MoTS lengthened the RVM's slice: {mcfq_scale}");
    let err = |r: f64| (r - 4.0).abs() / 4.0;
    assert!(err(mcfq_ratio) < err(cfq_ratio) / 2.0, "MCFQ {mcfq_ratio} vs CFQ {cfq_ratio}");
}
