//! The block layer alone, in front of a device reduced to its queues' room: exact dispatch order,
//! tags, queue mapping, flush priority, requeue on a full queue, wake-ups and the scheduler's
//! view of device time.

use super::*;
use crate::host::sched::CfqParams;
use crate::units::Nanos;
use std::collections::VecDeque;

fn us(x: u64) -> SimTime {
    SimTime::ZERO + Nanos::from_us(x)
}

fn req(id: u32, tenant: u16, op: IoOp, cpu: Option<u16>) -> BlockReq {
    BlockReq { id: ReqId(id), tenant: TenantId(tenant), op, offset: id as u64 * 4096, len: 4096, cpu }
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

fn done(b: &mut BlockLayer, now: SimTime, dev: &mut Queues, c: &Command) {
    dev.held[c.queue.index()] -= 1;
    b.complete(now, c.req, None);
    b.check_invariants();
}

fn ids(cs: &[Command]) -> Vec<u32> {
    cs.iter().map(|c| c.req.0).collect()
}

#[test]
fn the_header_example_a_full_queue_stops_dispatch_until_a_completion() {
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1, 1], 2, 2);
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
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1], 3, 4);
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
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1, 1], 8, 1);
    let mut dev = Queues::new(1, 8);
    b.arrive(us(0), req(0, 0, IoOp::Write, None), None);
    b.arrive(us(0), req(1, 1, IoOp::Flush, None), None);
    b.arrive(us(0), req(2, 0, IoOp::Read, None), None);
    b.arrive(us(0), req(3, 0, IoOp::Flush, None), None);
    assert_eq!(ids(&round(&mut b, us(0), &mut dev)), [1, 3, 0, 2]);
}

#[test]
fn a_flush_waits_for_a_tag_like_any_request() {
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1], 1, 1);
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
}

#[test]
fn the_scheduler_is_told_device_time_from_dispatch_to_completion() {
    let rec = Recorder::default();
    let told = rec.told.clone();
    let mut b = BlockLayer::with_scheduler(Box::new(rec), 1, 1);
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
    let mut b = BlockLayer::new(&kind, &[500, 500], 4, 1);
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
impl HostFtl for Mapped {
    fn is_update(&self, offset: u64, _: u64) -> bool {
        offset == 0
    }
    fn gc_running(&self) -> bool {
        false
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
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1], 4, 1);
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
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1], 4, 1);
    b.arrive(us(0), req(0, 0, IoOp::Read, None), None);
    b.arrive(us(0), req(0, 0, IoOp::Read, None), None);
}

#[test]
#[should_panic(expected = "not dispatched")]
fn completing_a_request_the_device_never_had_is_caught() {
    let mut b = BlockLayer::new(&SchedulerKind::None, &[1], 4, 1);
    b.arrive(us(0), req(0, 0, IoOp::Read, None), None);
    b.complete(us(1), ReqId(0), None);
}
