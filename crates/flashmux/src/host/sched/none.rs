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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::IoOp;
    use crate::units::{ReqId, TenantId};

    fn r(id: u32, t: u16) -> SchedReq {
        SchedReq { id: ReqId(id), tenant: TenantId(t), op: IoOp::Read, offset: 0, bytes: 4096, update: false }
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
