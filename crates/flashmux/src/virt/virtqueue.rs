//! A virtqueue: the ring a guest's vCPUs put requests in and its I/O thread serves, behind a
//! mutex.
//!
//! # Model
//! The queue holds at most `queue_size` requests between the guest's dispatch and its handling
//! of the completion (`inflight`; IDE emulation holds one). A request goes through three rings:
//! *available* (added by a vCPU, under the mutex, `vq_add` each), taken all at once by the I/O
//! thread (`vq_pop` each, under the mutex); *pending push* (completions the I/O thread reaped),
//! moved all at once to *used* (`vq_push` each, under the mutex). Then the I/O thread raises the
//! queue's interrupt on its vCPU — once: until the guest's handler has emptied the used ring and
//! returned, further completions ride on the raised interrupt (virtio's interrupt suppression).
//! A completion frees a slot; the vCPUs sharing the queue take turns (round robin) at
//! dispatching what waits in their guest queues.
//!
//! # Example (`queue_size` = 2, default costs)
//! vCPU 0 dispatches r1, r2 (2 slots taken), r3 waits in its guest queue. The I/O thread pops
//! both (0.6 us under the mutex), submits them; they complete; it pushes both (0.6 us) and raises
//! one interrupt. The guest completes r1: a slot frees and vCPU 0 may dispatch r3.
//!
//! Parameters (`[virt]`): `queue_size` (requests), `vq_add`, `vq_pop`, `vq_push` (ns per request,
//! paid by the caller under the queue's mutex).
//! Source: the virtio 1.x split virtqueue (available/used rings, `VRING_AVAIL_F_NO_INTERRUPT`);
//! paper A (one queue per vCPU in MQ and MT).

use super::ids::{IoThreadId, LockId, VcpuId, VmId};
use crate::units::ReqId;
use std::collections::VecDeque;

pub(super) struct Virtqueue {
    pub vm: VmId,
    pub lock: LockId,
    pub iothread: IoThreadId,
    /// The vCPU its interrupt goes to.
    pub irq_vcpu: VcpuId,
    /// vCPUs whose requests go to this queue.
    pub vcpus: Vec<VcpuId>,
    rr: usize,
    inflight: u32,
    avail: VecDeque<ReqId>,
    pending_push: VecDeque<ReqId>,
    used: VecDeque<ReqId>,
    irq_raised: bool,
}

impl Virtqueue {
    pub fn new(vm: VmId, lock: LockId, iothread: IoThreadId, irq_vcpu: VcpuId, vcpus: Vec<VcpuId>) -> Virtqueue {
        assert!(!vcpus.is_empty(), "a virtqueue serves at least one vCPU");
        Virtqueue {
            vm,
            lock,
            iothread,
            irq_vcpu,
            vcpus,
            rr: 0,
            inflight: 0,
            avail: VecDeque::new(),
            pending_push: VecDeque::new(),
            used: VecDeque::new(),
            irq_raised: false,
        }
    }

    /// Takes a slot for a request if fewer than `size` are in flight.
    pub fn take_slot(&mut self, size: u32) -> bool {
        if self.inflight >= size {
            return false;
        }
        self.inflight += 1;
        true
    }

    /// The guest handled a used entry: its slot is free.
    pub fn free_slot(&mut self) {
        assert!(self.inflight > 0, "a virtqueue slot freed twice");
        self.inflight -= 1;
    }

    pub fn add(&mut self, r: ReqId) {
        self.avail.push_back(r);
    }

    /// Requests waiting in the available ring.
    pub fn available(&self) -> usize {
        self.avail.len()
    }

    /// The I/O thread takes every available request.
    pub fn pop_all(&mut self) -> impl Iterator<Item = ReqId> + '_ {
        self.avail.drain(..)
    }

    /// A completion the I/O thread reaped, to push to the used ring.
    pub fn stage_push(&mut self, r: ReqId) {
        self.pending_push.push_back(r);
    }

    /// The staged completions enter the used ring.
    pub fn push_used(&mut self) {
        self.used.extend(self.pending_push.drain(..));
    }

    pub fn has_used(&self) -> bool {
        !self.used.is_empty()
    }

    /// The guest's handler takes every used entry.
    pub fn take_used(&mut self) -> Vec<ReqId> {
        self.used.drain(..).collect()
    }

    /// Raises the interrupt if there are used entries and it is not raised already.
    pub fn raise(&mut self) -> bool {
        if self.used.is_empty() || self.irq_raised {
            return false;
        }
        self.irq_raised = true;
        true
    }

    /// The guest's handler returned with the used ring empty.
    pub fn irq_done(&mut self) {
        debug_assert!(self.used.is_empty());
        self.irq_raised = false;
    }

    /// The next vCPU, in turn from the last one picked, for which `waits` holds.
    pub fn next_waiting(&mut self, waits: impl Fn(VcpuId) -> bool) -> Option<VcpuId> {
        let n = self.vcpus.len();
        for k in 0..n {
            let u = self.vcpus[(self.rr + k) % n];
            if waits(u) {
                self.rr = (self.rr + k + 1) % n;
                return Some(u);
            }
        }
        None
    }

    pub fn check_invariants(&self, name: usize, size: u32) {
        assert!(self.inflight <= size, "virtqueue {name} holds {} requests, more than its {size}", self.inflight);
        let held = self.avail.len() + self.used.len() + self.pending_push.len();
        assert!(held <= self.inflight as usize, "virtqueue {name} lost count");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vq(vcpus: &[u32]) -> Virtqueue {
        Virtqueue::new(VmId(0), LockId(0), IoThreadId(0), VcpuId(vcpus[0]), vcpus.iter().map(|&v| VcpuId(v)).collect())
    }

    #[test]
    fn a_full_queue_takes_no_slot_until_one_is_freed() {
        let mut q = vq(&[0]);
        assert!(q.take_slot(2) && q.take_slot(2));
        assert!(!q.take_slot(2) && !q.take_slot(2));
        q.free_slot();
        assert!(q.take_slot(2) && !q.take_slot(2));
        q.check_invariants(0, 2);
    }

    #[test]
    fn requests_go_available_then_pending_then_used() {
        let mut q = vq(&[0]);
        for r in 0..3 {
            assert!(q.take_slot(8));
            q.add(ReqId(r));
        }
        assert_eq!(q.available(), 3);
        let popped: Vec<ReqId> = q.pop_all().collect();
        assert_eq!(popped, [ReqId(0), ReqId(1), ReqId(2)]);
        q.stage_push(ReqId(1));
        q.stage_push(ReqId(0));
        assert!(!q.has_used() && !q.raise(), "nothing used yet: no interrupt");
        q.push_used();
        assert!(q.raise());
        q.stage_push(ReqId(2));
        q.push_used();
        assert!(!q.raise(), "one interrupt covers what arrives while it is raised");
        assert_eq!(q.take_used(), [ReqId(1), ReqId(0), ReqId(2)]);
        q.irq_done();
        q.check_invariants(0, 8);
    }

    #[test]
    fn vcpus_sharing_a_queue_take_turns() {
        let mut q = vq(&[4, 5, 6]);
        let all = |_| true;
        assert_eq!(q.next_waiting(all), Some(VcpuId(4)));
        assert_eq!(q.next_waiting(all), Some(VcpuId(5)));
        assert_eq!(q.next_waiting(|v| v != VcpuId(6)), Some(VcpuId(4)), "6 has nothing waiting");
        assert_eq!(q.next_waiting(|_| false), None);
        assert_eq!(q.next_waiting(all), Some(VcpuId(5)));
    }

    #[test]
    #[should_panic(expected = "lost count")]
    fn more_requests_in_the_rings_than_in_flight_is_caught() {
        let mut q = vq(&[0]);
        q.add(ReqId(0));
        q.check_invariants(0, 8);
    }
}
