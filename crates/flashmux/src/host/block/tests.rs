//! The block layer alone, in front of a device reduced to its queues' room: exact dispatch order,
//! tags, queue mapping, flush priority, requeue on a full queue, wake-ups and the scheduler's
//! view of device time.

use super::*;
use crate::host::elevator::{MergeConfig, MergeStats};
use crate::host::sched::{CfqParams, GcSignal};
use crate::units::Nanos;
use std::collections::VecDeque;

fn us(x: u64) -> SimTime {
    SimTime::ZERO + Nanos::from_us(x)
}

fn req(id: u32, tenant: u16, op: IoOp, cpu: Option<u16>) -> BlockReq {
    BlockReq { id: ReqId(id), tenant: TenantId(tenant), op, offset: id as u64 * 4096, len: 4096, cpu, dspec: 0 }
}

/// A device with `queues` submission queues of `per_queue` slots each, counting what is in each.
struct Queues {
    per_queue: u32,
    held: Vec<u32>,
}

impl Queues {
    fn new(queues: usize, per_queue: u32) -> Queues {
        Queues { per_queue, held: vec![0; queues] }
    }
    fn room(&self) -> impl Fn(QueueId) -> bool + '_ {
        |q| self.held[q.index()] < self.per_queue
    }
}

/// Dispatches flushes, then what the scheduler gives, as the simulator does; returns the
/// commands in the order they left.
fn round(b: &mut BlockLayer, now: SimTime, dev: &mut Queues) -> Vec<Command> {
    let mut out = Vec::new();
    while let Some(c) = b.next_flush(now, dev.room()) {
        dev.held[c.queue.index()] += 1;
        out.push(c);
    }
    while let Some(c) = b.next_request(now, dev.room()) {
        dev.held[c.queue.index()] += 1;
        out.push(c);
    }
    b.check_invariants();
    out
}

/// Completes `c`; returns the requests merged into it.
fn done(b: &mut BlockLayer, now: SimTime, dev: &mut Queues, c: &Command) -> Vec<u32> {
    dev.held[c.queue.index()] -= 1;
    let mut members = Vec::new();
    b.complete(now, c.req, None, &mut members);
    b.check_invariants();
    members.iter().map(|r| r.0).collect()
}

fn ids(cs: &[Command]) -> Vec<u32> {
    cs.iter().map(|c| c.req.0).collect()
}

#[test]
fn the_header_example_a_full_queue_stops_dispatch_until_a_completion() {
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1, 1], 2, 2, MergeConfig::DEFAULT, false);
    let mut dev = Queues::new(2, 1);
    b.arrive(us(0), req(0, 0, IoOp::Read, None), None);
    b.arrive(us(0), req(1, 0, IoOp::Read, None), None);
    b.arrive(us(0), req(2, 1, IoOp::Read, None), None);
    let first = round(&mut b, us(0), &mut dev);
    assert_eq!(ids(&first), [0], "B's queue 0 is full: it goes back and C waits behind it (FIFO)");
    assert_eq!(first[0].queue, QueueId(0));
    assert_eq!(b.inflight(), 1);
    done(&mut b, us(80), &mut dev, &first[0]);
    let next = round(&mut b, us(80), &mut dev);
    assert_eq!(ids(&next), [1, 2]);
    assert_eq!(next.iter().map(|c| c.queue.0).collect::<Vec<_>>(), [0, 1], "tenant mod queues");
    assert_eq!(b.inflight(), 2);
}

#[test]
fn the_tag_set_bounds_requests_over_all_queues() {
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1], 3, 4, MergeConfig::DEFAULT, false);
    let mut dev = Queues::new(4, 64);
    for i in 0..10 {
        b.arrive(us(0), req(i, 0, IoOp::Write, Some(i as u16)), None);
    }
    let sent = round(&mut b, us(0), &mut dev);
    assert_eq!(ids(&sent), [0, 1, 2], "three tags");
    assert_eq!(sent.iter().map(|c| c.queue.0).collect::<Vec<_>>(), [0, 1, 2], "cpu mod queues");
    done(&mut b, us(5), &mut dev, &sent[1]);
    let more = round(&mut b, us(5), &mut dev);
    assert_eq!(ids(&more), [3]);
    assert_eq!(more[0].queue, QueueId(3));
    b.arrive(us(6), req(10, 0, IoOp::Write, Some(5)), None);
    done(&mut b, us(7), &mut dev, &sent[0]);
    assert_eq!(round(&mut b, us(7), &mut dev)[0].req, ReqId(4), "FIFO: request 4 before the newcomer");
}

#[test]
fn flushes_bypass_the_scheduler_and_go_first_in_arrival_order() {
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1, 1], 8, 1, MergeConfig::DEFAULT, false);
    let mut dev = Queues::new(1, 8);
    b.arrive(us(0), req(0, 0, IoOp::Write, None), None);
    b.arrive(us(0), req(1, 1, IoOp::Flush, None), None);
    b.arrive(us(0), req(2, 0, IoOp::Read, None), None);
    b.arrive(us(0), req(3, 0, IoOp::Flush, None), None);
    assert_eq!(ids(&round(&mut b, us(0), &mut dev)), [1, 3, 0, 2]);
}

#[test]
fn a_flush_waits_for_a_tag_like_any_request() {
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1], 1, 1, MergeConfig::DEFAULT, false);
    let mut dev = Queues::new(1, 8);
    b.arrive(us(0), req(0, 0, IoOp::Write, None), None);
    let w = round(&mut b, us(0), &mut dev);
    b.arrive(us(1), req(1, 0, IoOp::Flush, None), None);
    b.arrive(us(1), req(2, 0, IoOp::Write, None), None);
    assert!(round(&mut b, us(1), &mut dev).is_empty(), "the only tag is taken");
    done(&mut b, us(9), &mut dev, &w[0]);
    assert_eq!(ids(&round(&mut b, us(9), &mut dev)), [1], "the flush takes the freed tag");
}

/// A FIFO that records what it is told of completions.
#[derive(Default)]
struct Recorder {
    q: VecDeque<SchedReq>,
    told: std::sync::Arc<std::sync::Mutex<Vec<(u32, SimTime, Nanos)>>>,
}

impl Scheduler for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn enqueue(&mut self, _: SimTime, r: SchedReq) {
        self.q.push_back(r);
    }
    fn dispatch(&mut self, _: SimTime) -> Option<SchedReq> {
        self.q.pop_front()
    }
    fn requeue(&mut self, r: SchedReq) {
        self.q.push_front(r);
    }
    fn complete(&mut self, now: SimTime, r: &SchedReq, service: Nanos) {
        self.told.lock().unwrap().push((r.id.0, now, service));
    }
    fn queued(&self) -> usize {
        self.q.len()
    }
    fn grow(&mut self, r: &SchedReq) {
        let w = self.q.iter_mut().find(|w| w.id == r.id).unwrap();
        *w = *r;
    }
}

#[test]
fn the_scheduler_is_told_device_time_from_dispatch_to_completion() {
    let rec = Recorder::default();
    let told = rec.told.clone();
    let mut b = BlockLayer::with_scheduler(Box::new(rec), 1, 1, MergeConfig::DEFAULT, false);
    let mut dev = Queues::new(1, 1);
    b.arrive(us(0), req(0, 0, IoOp::Read, None), None);
    let a = round(&mut b, us(5), &mut dev);
    b.arrive(us(6), req(1, 0, IoOp::Write, None), None);
    b.arrive(us(7), req(2, 0, IoOp::Flush, None), None);
    assert!(round(&mut b, us(7), &mut dev).is_empty(), "the only tag is taken");
    done(&mut b, us(85), &mut dev, &a[0]);
    let f = round(&mut b, us(90), &mut dev);
    assert_eq!(ids(&f), [2], "the flush, before the waiting write");
    done(&mut b, us(95), &mut dev, &f[0]);
    let w = round(&mut b, us(95), &mut dev);
    done(&mut b, us(300), &mut dev, &w[0]);
    assert_eq!(
        *told.lock().unwrap(),
        [(0, us(85), Nanos::from_us(80)), (1, us(300), Nanos::from_us(205))],
        "device time counts from dispatch, not arrival; flushes are not the scheduler's"
    );
}

#[test]
fn a_wake_up_is_armed_once_and_only_when_sooner() {
    // CFQ idles on a tenant whose queue ran dry (slice_idle, 8 ms by default) instead of
    // serving the other one: it asks to be woken when the idle window ends.
    let kind = SchedulerKind::Cfq(CfqParams::default());
    let mut b = BlockLayer::new(&kind, &[500, 500], 4, 1, MergeConfig::DEFAULT, false);
    let mut dev = Queues::new(1, 4);
    b.arrive(us(0), req(0, 0, IoOp::Read, None), None);
    let c = round(&mut b, us(0), &mut dev);
    done(&mut b, us(100), &mut dev, &c[0]);
    b.arrive(us(100), req(1, 1, IoOp::Read, None), None);
    assert!(round(&mut b, us(100), &mut dev).is_empty(), "idling for tenant 0");
    let t = b.arm_wakeup(us(100)).expect("the idle window ends");
    assert_eq!(t, us(100) + Nanos::from_ms(8));
    assert_eq!(b.arm_wakeup(us(100)), None, "already armed");
    b.woke(t);
    assert_eq!(ids(&round(&mut b, t, &mut dev)), [1], "the window expired: tenant 1's turn");
}

struct Mapped;
impl FtlView for Mapped {
    fn is_update(&self, offset: u64, _: u64) -> bool {
        offset == 0
    }
    fn gc_signal(&self) -> GcSignal {
        GcSignal::Running(false)
    }
    fn gc_units_moved(&self, _: TenantId) -> u64 {
        0
    }
    fn unit_bytes(&self) -> u64 {
        4096
    }
}

#[test]
fn a_host_ftl_marks_writes_over_mapped_data_as_updates() {
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1], 4, 1, MergeConfig::DEFAULT, false);
    let mut dev = Queues::new(1, 4);
    b.arrive(us(0), req(0, 0, IoOp::Write, None), Some(&Mapped));
    b.arrive(us(0), req(1, 0, IoOp::Write, None), Some(&Mapped));
    b.arrive(us(0), req(2, 0, IoOp::Read, None), Some(&Mapped));
    let updates: Vec<bool> = b.slots.iter().map(|s| s.req.update).collect();
    assert_eq!(updates, [true, false, false], "request 0 writes offset 0, which is mapped; reads never update");
    assert_eq!(round(&mut b, us(0), &mut dev).len(), 3);
}

#[test]
#[should_panic(expected = "arrived twice")]
fn a_request_id_in_use_cannot_arrive_again() {
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1], 4, 1, MergeConfig::DEFAULT, false);
    b.arrive(us(0), req(0, 0, IoOp::Read, None), None);
    b.arrive(us(0), req(0, 0, IoOp::Read, None), None);
}

#[test]
#[should_panic(expected = "not dispatched")]
fn completing_a_request_the_device_never_had_is_caught() {
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1], 4, 1, MergeConfig::DEFAULT, false);
    b.arrive(us(0), req(0, 0, IoOp::Read, None), None);
    b.complete(us(1), ReqId(0), None, &mut Vec::new());
}

fn at(id: u32, op: IoOp, kib: u64, len_kib: u64) -> BlockReq {
    BlockReq { id: ReqId(id), tenant: TenantId(0), op, offset: kib << 10, len: len_kib << 10, cpu: None, dspec: 0 }
}

/// One tag: everything that arrives while a request is at the device waits.
fn merging(sched: Box<dyn Scheduler>, merge: MergeConfig) -> (BlockLayer, Queues) {
    (BlockLayer::with_scheduler(sched, 1, 1, merge, false), Queues::new(1, 1))
}

#[test]
fn requests_waiting_behind_a_busy_device_merge_and_complete_with_their_lead() {
    let (mut b, mut dev) = merging(Box::new(Recorder::default()), MergeConfig::DEFAULT);
    b.arrive(us(0), at(0, IoOp::Read, 200, 4), None);
    let a = round(&mut b, us(0), &mut dev);
    // A reads 200-204K at the device. B waits; C joins B's back; D is a write; E leaves a gap; F
    // fills it by joining B's back (Linux would then also join B and E; flashmux does not).
    b.arrive(us(1), at(1, IoOp::Read, 4, 4), None);
    b.arrive(us(2), at(2, IoOp::Read, 8, 4), None);
    b.arrive(us(3), at(3, IoOp::Write, 12, 4), None);
    b.arrive(us(4), at(4, IoOp::Read, 16, 4), None);
    b.arrive(us(5), at(5, IoOp::Read, 12, 4), None);
    // G touches A, which is at the device: nothing merges into a dispatched request.
    b.arrive(us(6), at(6, IoOp::Read, 204, 4), None);
    b.check_invariants();
    assert!(round(&mut b, us(6), &mut dev).is_empty());
    assert_eq!(done(&mut b, us(80), &mut dev, &a[0]), Vec::<u32>::new());
    let c = round(&mut b, us(80), &mut dev);
    assert_eq!((c[0].req, c[0].offset, c[0].len), (ReqId(1), 4 << 10, 12 << 10), "B grew to cover C and F");
    assert_eq!(done(&mut b, us(160), &mut dev, &c[0]), [2, 5], "C and F complete with B, in merge order");
    let rest: Vec<u32> = (0..3)
        .flat_map(|i| {
            let c = round(&mut b, us(200 + i), &mut dev);
            done(&mut b, us(250 + i), &mut dev, &c[0]);
            ids(&c)
        })
        .collect();
    assert_eq!(rest, [3, 4, 6]);
    let m = b.merge_stats(0);
    assert_eq!((m.merges_back, m.merges_front, m.read_merges, m.write_merges), (2, 0, 2, 0));
    assert_eq!(b.merge_config(), (MergeConfig::DEFAULT, true));
}

#[test]
fn a_front_merge_moves_the_waiting_request_s_start() {
    let (mut b, mut dev) = merging(Box::new(Recorder::default()), MergeConfig::DEFAULT);
    b.arrive(us(0), at(0, IoOp::Write, 100, 4), None);
    let a = round(&mut b, us(0), &mut dev);
    b.arrive(us(1), at(1, IoOp::Write, 64, 32), None);
    b.arrive(us(2), at(2, IoOp::Write, 32, 32), None);
    done(&mut b, us(50), &mut dev, &a[0]);
    let c = round(&mut b, us(50), &mut dev);
    assert_eq!((c[0].req, c[0].offset, c[0].len), (ReqId(1), 32 << 10, 64 << 10));
    assert_eq!(done(&mut b, us(90), &mut dev, &c[0]), [2]);
    assert_eq!(b.merge_stats(0).merges_front, 1);
}

#[test]
fn a_requeued_request_is_no_longer_merged_into() {
    // Two tags but the device's queue holds one: B is given out, finds the queue full and goes
    // back — off the elevator, as Linux puts it on the dispatch list.
    let mut b = BlockLayer::with_scheduler(Box::new(Recorder::default()), 2, 1, MergeConfig::DEFAULT, false);
    let mut dev = Queues::new(1, 1);
    b.arrive(us(0), at(0, IoOp::Read, 0, 4), None);
    b.arrive(us(0), at(1, IoOp::Read, 64, 4), None);
    let a = round(&mut b, us(0), &mut dev);
    assert_eq!(ids(&a), [0]);
    b.arrive(us(1), at(2, IoOp::Read, 68, 4), None);
    done(&mut b, us(50), &mut dev, &a[0]);
    let c = round(&mut b, us(50), &mut dev);
    assert_eq!((ids(&c), c[0].len), (vec![1], 4 << 10), "C did not join the requeued B");
    assert_eq!(b.merge_stats(0).merges(), 0);
}

#[test]
fn no_elevator_merges_under_none_with_nomerges_2_or_for_a_bio_based_driver() {
    let cfq = SchedulerKind::Cfq(CfqParams::default());
    for (kind, nomerges, bio_based) in [(SchedulerKind::None, 0, false), (cfq, 2, false), (cfq, 0, true)] {
        let merge = MergeConfig { nomerges, ..MergeConfig::DEFAULT };
        let mut b = BlockLayer::new(&kind, &[1], 1, 1, merge, bio_based);
        let mut dev = Queues::new(1, 1);
        b.arrive(us(0), at(0, IoOp::Read, 0, 4), None);
        let a = round(&mut b, us(0), &mut dev);
        b.arrive(us(1), at(1, IoOp::Read, 4, 4), None);
        b.arrive(us(2), at(2, IoOp::Read, 8, 4), None);
        assert_eq!(done(&mut b, us(50), &mut dev, &a[0]), Vec::<u32>::new());
        let c = round(&mut b, us(50), &mut dev);
        assert_eq!((ids(&c), c[0].len), (vec![1], 4 << 10), "{}", kind.name());
        assert_eq!(b.merge_config().1, false);
        assert_eq!(b.merge_stats(0), MergeStats::default());
    }
}

#[test]
fn cfq_merges_within_a_tenant_s_queue() {
    let mut b = BlockLayer::new(&SchedulerKind::Cfq(CfqParams::default()), &[1, 1], 1, 1, MergeConfig::DEFAULT, false);
    let mut dev = Queues::new(1, 1);
    b.arrive(us(0), at(0, IoOp::Write, 0, 4), None);
    let a = round(&mut b, us(0), &mut dev);
    for i in 1..=40u32 {
        b.arrive(us(i as u64), at(i, IoOp::Write, 4 * i as u64, 4), None);
    }
    // Another tenant's adjacent write does not join.
    b.arrive(us(50), BlockReq { tenant: TenantId(1), ..at(41, IoOp::Write, 164, 4) }, None);
    done(&mut b, us(100), &mut dev, &a[0]);
    let c = round(&mut b, us(100), &mut dev);
    assert_eq!((c[0].req, c[0].len), (ReqId(1), 128 << 10), "32 writes of 4 KiB make the 128 KiB limit");
    assert_eq!(done(&mut b, us(200), &mut dev, &c[0]), (2..=32).collect::<Vec<u32>>());
    let m = b.merge_stats(0);
    assert_eq!(m.write_merges, 31 + 7, "B takes 31, the 33rd write starts a request that takes the last 7");
    assert_eq!(b.merge_stats(1).merges(), 0);
}
