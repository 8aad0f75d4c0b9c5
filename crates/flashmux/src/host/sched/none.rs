//! `none`: requests go to the device in arrival order, whoever sent them — Linux's `none`
//! scheduler for multi-queue devices. The baseline every fairness policy is compared against:
//! a tenant that submits more gets more.

use super::{SchedReq, Scheduler};
use crate::units::{Nanos, SimTime};
use std::collections::VecDeque;

#[derive(Default)]
pub struct Fifo {
    q: VecDeque<SchedReq>,
}

impl Scheduler for Fifo {
    fn name(&self) -> &'static str {
        "none"
    }
    fn enqueue(&mut self, _now: SimTime, r: SchedReq) {
        self.q.push_back(r);
    }
    fn dispatch(&mut self, _now: SimTime) -> Option<SchedReq> {
        self.q.pop_front()
    }
    fn requeue(&mut self, r: SchedReq) {
        self.q.push_front(r);
    }
    fn complete(&mut self, _now: SimTime, _r: &SchedReq, _service: Nanos) {}
    fn queued(&self) -> usize {
        self.q.len()
    }
    /// `none` has no elevator: Linux merges nothing that waits in it.
    fn merges(&self) -> bool {
        false
    }
    fn grow(&mut self, r: &SchedReq) {
        grow_in(self.q.iter_mut().rev(), r);
    }
}

/// Replaces the waiting request `r.id` found in `q` (searched newest first: merges usually join
/// the latest request) by its grown self.
pub(super) fn grow_in<'a>(mut q: impl Iterator<Item = &'a mut SchedReq>, r: &SchedReq) {
    let w = q.find(|w| w.id == r.id).expect("the request to grow waits in the scheduler");
    debug_assert!(w.tenant == r.tenant && w.op == r.op, "a merge keeps the tenant and direction");
    *w = *r;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::IoOp;
    use crate::units::{ReqId, TenantId};

    fn r(id: u32, t: u16) -> SchedReq {
        SchedReq { id: ReqId(id), tenant: TenantId(t), op: IoOp::Read, offset: 0, bytes: 4096, update: false, dspec: 0 }
    }

    #[test]
    fn fifo_order_with_requeue_at_the_front() {
        let mut s = Fifo::default();
        s.enqueue(SimTime(0), r(1, 0));
        s.enqueue(SimTime(0), r(2, 1));
        s.enqueue(SimTime(0), r(3, 0));
        let a = s.dispatch(SimTime(1)).unwrap();
        assert_eq!(a.id, ReqId(1));
        s.requeue(a);
        let order: Vec<u32> = std::iter::from_fn(|| s.dispatch(SimTime(2)).map(|x| x.id.0)).collect();
        assert_eq!(order, vec![1, 2, 3]);
        assert_eq!(s.queued(), 0);
    }
}
