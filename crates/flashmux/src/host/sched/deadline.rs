//! `mq-deadline`: Linux's deadline scheduler for blk-mq — the default for a device with one
//! hardware queue (a SATA SSD, a single-queue virtio disk), where `none` is the default for
//! NVMe.
//!
//! # Model
//! Reads and writes wait apart, each kept twice: sorted by offset, and in arrival order with a
//! deadline (`now + read_expire` or `+ write_expire`). Requests leave in **batches** of one
//! direction, in increasing offset from where the last request of that direction ended
//! (`latest_pos`), up to `fifo_batch` requests. Between batches the direction is chosen: reads,
//! unless writes are waiting and reads have been chosen over them `writes_starved` times in a
//! row. A new batch starts at the next request in offset order from `latest_pos` — or, if the
//! oldest request of the direction has passed its deadline, or nothing lies beyond
//! `latest_pos`, at the oldest request. A request given out but refused by the device (its queue
//! full) goes on a dispatch list that is served first. The policy is work-conserving (it never
//! waits for time) and knows nothing of tenants: a tenant that submits more gets more, as under
//! `none`, but the block layer's elevator merges adjacent waiting requests
//! (`host/elevator.rs`), which `none` does not.
//!
//! # Worked example
//! `fifo_batch = 2`, `writes_starved = 2`, nothing dispatched yet (`latest_pos` 0, last
//! direction write, as Linux starts). Waiting at t = 0: reads at 40K, 8K, 24K and writes at 16K,
//! 0, each 4 KiB.
//! - The last direction is write and a write lies at or beyond 0 (the one at 0): the batch goes
//!   on with it. Then the write at 16K (batch full: 2).
//! - New batch: reads wait and the writes are gone: reads, from read `latest_pos` 0: 8K, 24K.
//! - New batch: the read at 40K.
//!
//! Order: W0, W16K, R8K, R24K, R40K. Had the read at 40K arrived 600 ms before the others
//! (past `read_expire`), the read batch would have started with it.
//!
//! # Where flashmux's mq-deadline differs from Linux's
//! No I/O priority classes (one class, `prio_aging_expire` unused); no `async_depth` limit on
//! the tags asynchronous writes may take; `front_merges` is always on; no zoned-write locking.
//!
//! # Parameters
//! - `read_expire` (500 ms), `write_expire` (5 s): deadlines.
//! - `fifo_batch` (16 requests): the longest batch.
//! - `writes_starved` (2): read batches chosen over waiting writes before writes go.
//!
//! # Source
//! Linux `block/mq-deadline.c` (`__dd_dispatch_request`, `deadline_from_pos`,
//! `deadline_check_fifo`), `Documentation/block/deadline-iosched.rst`; the default scheduler
//! choice in `block/elevator.c` (`elevator_get_default`).

use super::{SchedReq, Scheduler};
use crate::device::IoOp;
use crate::units::{Nanos, SimTime};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// mq-deadline's tunables (`/sys/block/<dev>/queue/iosched/`), Linux's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DeadlineParams {
    pub read_expire: Nanos,
    pub write_expire: Nanos,
    /// Requests per batch.
    pub fifo_batch: u32,
    /// Read batches chosen while writes wait before a write batch must go.
    pub writes_starved: u32,
}

impl Default for DeadlineParams {
    fn default() -> Self {
        DeadlineParams {
            read_expire: Nanos::from_ms(500),
            write_expire: Nanos::from_secs(5),
            fifo_batch: 16,
            writes_starved: 2,
        }
    }
}

impl DeadlineParams {
    /// Checks the tunables; the error names the key (`host.mq-deadline.*`).
    pub fn validate(&self) -> Result<(), String> {
        if self.fifo_batch == 0 {
            return Err(
                "host.mq-deadline.fifo_batch: must be at least 1 (1 serves requests first come, first served)".into()
            );
        }
        Ok(())
    }
}

const READ: usize = 0;
const WRITE: usize = 1;

fn dir_of(op: IoOp) -> usize {
    if op == IoOp::Read {
        READ
    } else {
        WRITE
    }
}

/// Where a waiting request is: its direction, sort key and arrival number.
#[derive(Clone, Copy)]
struct Pos {
    dir: usize,
    offset: u64,
    seq: u64,
}

pub struct Deadline {
    p: DeadlineParams,
    /// Per direction: waiting requests by (offset, id).
    sort: [BTreeMap<(u64, u32), SchedReq>; 2],
    /// Per direction: (arrival number, id, deadline), oldest first; entries of requests that
    /// left are skipped when met.
    fifo: [VecDeque<(u64, u32, SimTime)>; 2],
    /// Per request id: where it waits (`None` when it does not).
    pos: Vec<Option<Pos>>,
    /// Requests given out and refused by the device, served first.
    dispatch: VecDeque<SchedReq>,
    /// Per direction: where the last request dispatched in it ended.
    latest_pos: [u64; 2],
    last_dir: usize,
    batching: u32,
    starved: u32,
    seq: u64,
}

impl Deadline {
    pub fn new(p: DeadlineParams) -> Deadline {
        Deadline {
            p,
            sort: [BTreeMap::new(), BTreeMap::new()],
            fifo: [VecDeque::new(), VecDeque::new()],
            pos: Vec::new(),
            dispatch: VecDeque::new(),
            latest_pos: [0; 2],
            last_dir: WRITE,
            batching: 0,
            starved: 0,
            seq: 0,
        }
    }

    /// The oldest request waiting in direction `d` and its deadline (stale entries dropped).
    fn oldest(&mut self, d: usize) -> Option<(u32, SimTime)> {
        while let Some(&(seq, id, deadline)) = self.fifo[d].front() {
            if self.pos.get(id as usize).copied().flatten().is_some_and(|p| p.seq == seq && p.dir == d) {
                return Some((id, deadline));
            }
            self.fifo[d].pop_front();
        }
        None
    }

    /// The first request of direction `d` at or beyond where its last one ended.
    fn next_in_order(&self, d: usize) -> Option<u32> {
        self.sort[d].range((self.latest_pos[d], 0)..).next().map(|(&(_, id), _)| id)
    }

    fn take(&mut self, id: u32) -> SchedReq {
        let p = self.pos[id as usize].take().expect("the request waits");
        self.sort[p.dir].remove(&(p.offset, id)).expect("a waiting request is in its sort tree")
    }
}

impl Scheduler for Deadline {
    fn name(&self) -> &'static str {
        "mq-deadline"
    }

    fn enqueue(&mut self, now: SimTime, r: SchedReq) {
        let d = dir_of(r.op);
        let i = r.id.index();
        if self.pos.len() <= i {
            self.pos.resize(i + 1, None);
        }
        debug_assert!(self.pos[i].is_none(), "request {} queued twice", r.id.0);
        self.seq += 1;
        self.pos[i] = Some(Pos { dir: d, offset: r.offset, seq: self.seq });
        self.sort[d].insert((r.offset, r.id.0), r);
        let expire = if d == READ { self.p.read_expire } else { self.p.write_expire };
        self.fifo[d].push_back((self.seq, r.id.0, now + expire));
    }

    fn dispatch(&mut self, now: SimTime) -> Option<SchedReq> {
        if let Some(r) = self.dispatch.pop_front() {
            return Some(r);
        }
        // Go on with the batch while it has a next request and room.
        let cont = self.next_in_order(self.last_dir).filter(|_| self.batching < self.p.fifo_batch);
        let (d, id) = match cont {
            Some(id) => (self.last_dir, id),
            None => {
                // Reads first, unless writes have been passed over `writes_starved` times
                // (Linux's `starved++ >= writes_starved`).
                let (d, (oldest, deadline)) = match (self.oldest(READ), self.oldest(WRITE)) {
                    (None, None) => return None,
                    (Some(r), None) => (READ, r),
                    (Some(r), Some(w)) => {
                        self.starved += 1;
                        if self.starved > self.p.writes_starved {
                            self.starved = 0;
                            (WRITE, w)
                        } else {
                            (READ, r)
                        }
                    }
                    (None, Some(w)) => {
                        self.starved = 0;
                        (WRITE, w)
                    }
                };
                let id = match self.next_in_order(d) {
                    Some(next) if deadline > now => next,
                    _ => oldest,
                };
                self.batching = 0;
                (d, id)
            }
        };
        self.batching += 1;
        self.last_dir = d;
        let r = self.take(id);
        self.latest_pos[d] = r.offset + r.bytes;
        Some(r)
    }

    fn requeue(&mut self, r: SchedReq) {
        self.dispatch.push_front(r);
    }

    fn complete(&mut self, _now: SimTime, _r: &SchedReq, _service: Nanos) {}

    fn queued(&self) -> usize {
        self.sort[READ].len() + self.sort[WRITE].len() + self.dispatch.len()
    }

    fn grow(&mut self, r: &SchedReq) {
        let p = self.pos[r.id.index()].as_mut().expect("the request to grow waits in the scheduler");
        debug_assert_eq!(p.dir, dir_of(r.op), "a merge keeps the direction");
        let old = self.sort[p.dir].remove(&(p.offset, r.id.0)).expect("a waiting request is in its sort tree");
        debug_assert_eq!(old.tenant, r.tenant);
        p.offset = r.offset;
        self.sort[p.dir].insert((r.offset, r.id.0), *r);
    }

    fn check_invariants(&self) {
        let waiting = self.pos.iter().filter(|p| p.is_some()).count();
        assert_eq!(
            waiting,
            self.sort[READ].len() + self.sort[WRITE].len(),
            "mq-deadline's sort trees and positions disagree"
        );
        for d in [READ, WRITE] {
            for (&(offset, id), r) in &self.sort[d] {
                let p = self.pos[id as usize].expect("a sorted request has a position");
                assert!(
                    p.dir == d && p.offset == offset && r.offset == offset && dir_of(r.op) == d,
                    "request {id} sorted at a stale place"
                );
                assert!(self.fifo[d].iter().any(|&(s, i, _)| i == id && s == p.seq), "request {id} has no deadline");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{ReqId, TenantId};

    const K: u64 = 1024;

    fn r(id: u32, op: IoOp, offset: u64) -> SchedReq {
        SchedReq { id: ReqId(id), tenant: TenantId(0), op, offset, bytes: 4 * K, update: false, dspec: 0 }
    }

    fn ms(x: u64) -> SimTime {
        SimTime::ZERO + Nanos::from_ms(x)
    }

    fn drain(s: &mut Deadline, now: SimTime) -> Vec<u32> {
        let out = std::iter::from_fn(|| s.dispatch(now).map(|x| x.id.0)).collect();
        s.check_invariants();
        out
    }

    fn small() -> Deadline {
        Deadline::new(DeadlineParams { fifo_batch: 2, ..DeadlineParams::default() })
    }

    #[test]
    fn the_worked_example() {
        let mut s = small();
        for (id, op, at) in
            [(0, IoOp::Read, 40), (1, IoOp::Read, 8), (2, IoOp::Read, 24), (3, IoOp::Write, 16), (4, IoOp::Write, 0)]
        {
            s.enqueue(ms(0), r(id, op, at * K));
        }
        assert_eq!(drain(&mut s, ms(0)), [4, 3, 1, 2, 0]);
        assert_eq!(s.queued(), 0);
    }

    #[test]
    fn an_expired_read_starts_the_next_batch() {
        let mut s = small();
        s.enqueue(ms(0), r(0, IoOp::Read, 40 * K));
        for (id, at) in [(1, 8), (2, 24)] {
            s.enqueue(ms(600), r(id, IoOp::Read, at * K));
        }
        assert_eq!(
            drain(&mut s, ms(600)),
            [0, 1, 2],
            "read 0 passed its 500 ms deadline; then 8K, in order from the start"
        );
    }

    #[test]
    fn reads_go_first_but_writes_are_not_starved_for_ever() {
        let mut s = Deadline::new(DeadlineParams { fifo_batch: 1, ..DeadlineParams::default() });
        s.enqueue(ms(0), r(1, IoOp::Read, 100 * K));
        assert_eq!(drain(&mut s, ms(0)), [1]);
        s.enqueue(ms(1), r(0, IoOp::Write, 0));
        for i in 2..=6 {
            s.enqueue(ms(1), r(i, IoOp::Read, i as u64 * 100 * K));
        }
        // With fifo_batch 1 every dispatch chooses a direction: reads twice while the write
        // waits (writes_starved = 2), then the write, then reads again.
        assert_eq!(drain(&mut s, ms(1)), [2, 3, 0, 4, 5, 6]);
    }

    #[test]
    fn a_batch_sweeps_up_in_offset_then_wraps_to_the_oldest() {
        let mut s = Deadline::new(DeadlineParams::default());
        for (id, at) in [(0, 50), (1, 10), (2, 30)] {
            s.enqueue(ms(0), r(id, IoOp::Read, at * K));
        }
        assert_eq!(drain(&mut s, ms(0)), [1, 2, 0], "upward from offset 0");
        s.enqueue(ms(1), r(3, IoOp::Read, 5 * K));
        s.enqueue(ms(2), r(4, IoOp::Read, 60 * K));
        assert_eq!(drain(&mut s, ms(2)), [4, 3], "on from 54K to 60K, then nothing beyond: the oldest");
    }

    #[test]
    fn a_requeued_request_goes_first_and_a_grown_one_moves_in_the_sort_order() {
        let mut s = small();
        s.enqueue(ms(0), r(0, IoOp::Read, 8 * K));
        s.enqueue(ms(0), r(1, IoOp::Read, 16 * K));
        let a = s.dispatch(ms(0)).unwrap();
        s.requeue(a);
        assert_eq!(s.queued(), 2);
        // Request 1 grows at its front to 4K-20K: it now sorts before 8K.
        s.grow(&SchedReq { offset: 4 * K, bytes: 16 * K, ..r(1, IoOp::Read, 16 * K) });
        s.check_invariants();
        let order: Vec<(u32, u64)> = std::iter::from_fn(|| s.dispatch(ms(0)).map(|x| (x.id.0, x.offset))).collect();
        assert_eq!(order, [(0, 8 * K), (1, 4 * K)], "the requeued request first; then what is left");
    }

    #[test]
    fn ids_reused_after_dispatch_get_their_own_deadline() {
        let mut s = small();
        s.enqueue(ms(0), r(0, IoOp::Read, 8 * K));
        assert_eq!(drain(&mut s, ms(0)), [0]);
        // Id 0 comes back at 1 s: its old deadline (500 ms) must not make it look expired.
        s.enqueue(ms(1000), r(0, IoOp::Read, 100 * K));
        s.enqueue(ms(1000), r(1, IoOp::Read, 50 * K));
        assert_eq!(drain(&mut s, ms(1000)), [1, 0], "in offset order from 12K: 50K, then 100K");
    }

    #[test]
    fn tunables_are_checked() {
        let bad = DeadlineParams { fifo_batch: 0, ..DeadlineParams::default() };
        assert!(bad.validate().unwrap_err().contains("host.mq-deadline.fifo_batch"));
    }
}
