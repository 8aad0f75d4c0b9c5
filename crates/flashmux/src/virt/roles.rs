//! What each kind of thread does: a bare-metal process, a vCPU (running its guest processes and
//! the guest kernel), an I/O thread (or polling, or emulation thread). Each role has its own
//! state here, and *plans* its thread's next ops from it when the thread runs out of ops.
//!
//! # Model
//! - A **process** reaps completions first (one `io_getevents` system call, then the block
//!   layer's completion work per merged request), else makes one submission call of up to its
//!   job's `iodepth_batch_submit` requests: the call's `syscall` once, then `app + submit` per
//!   request; the last one unplugs.
//! - A **vCPU** in turn: takes a pending EXT_INT exit; runs the interrupt handler of a raised
//!   virtqueue; reaps completions for its guest processes (a system call; the guest kernel
//!   already did the block-layer work); makes a guest process's submission call; dispatches a
//!   request waiting in its guest queue once the virtqueue has room; else halts (one HLT exit,
//!   then it sleeps). Dispatching takes the queue's mutex, adds (`vq_add`), releases, and kicks
//!   after the batch's last request (virtio drivers notify once per batch). IDE emulation instead
//!   writes `ide_submit_exits` registers, each an exit.
//! - An **I/O thread** submits what it popped (`submit + request_cost / 2` each, after one
//!   user/kernel crossing in userspace emulation; with `aio = "threads"` each is handed to a
//!   pool worker instead); else completes what the host finished (`complete + request_cost / 2`
//!   each), pushes them per virtqueue under its mutex (`vq_push` each) and raises its interrupt;
//!   else pops the available requests of its queues under their mutexes (`vq_pop` each). In
//!   `multiqueue` with a `batch_window`, work found when no window is open opens one and is
//!   popped when it closes.
//!
//! # Example (bare metal, `iodepth_batch_submit` = 4, default costs, `submit` = 1 us)
//! A call of 4 requests is 4 bursts: 0.5 + 0.4 + 1 = 1.9 us, then 1.4 us three times: 6.1 us
//! of CPU, the plug unplugging at its end. Reaping 4 completions (none merged) is
//! 0.5 us + 4 × `complete`.
//!
//! Parameters: `CpuConfig::{syscall, app}`, `VirtConfig::{vq_add, vq_pop, vq_push,
//! request_cost, userspace_switch, aio, batch_window, queue_size, ide_submit_exits}` and the
//! host's `submit_overhead`/`completion_overhead` (ns).
//! Source: paper A (Baseline, MQ, MT: section 3), QEMU's virtio-blk and `aio=threads|native`,
//! Linux's virtio_blk driver.

use super::ids::{IoThreadId, ProcId, ThreadId, VcpuId, VmId, VqId};
use super::machine::{Machine, MachineEvent, VirtOutbox};
use super::report::ExitStat;
use super::thread::{Act, Op, Role};
use super::{Aio, Emulation, ExitReason, VirtMode};
use crate::units::{JobId, Nanos, ReqId, SimTime, TenantId};
use crate::host::elevator::{Elevator, MergeConfig};
use crate::host::SchedReq;
use std::collections::VecDeque;

/// A bare-metal process (fio job).
pub(super) struct ProcRt {
    pub thread: ThreadId,
    pub submits: VecDeque<ReqId>,
    pub plug: Vec<ReqId>,
    pub completions: VecDeque<ReqId>,
}

impl ProcRt {
    pub fn new(thread: ThreadId) -> ProcRt {
        ProcRt { thread, submits: VecDeque::new(), plug: Vec::new(), completions: VecDeque::new() }
    }
}

/// A vCPU with the guest processes and guest kernel it runs.
pub(super) struct VcpuRt {
    pub vm: VmId,
    pub thread: ThreadId,
    pub vq: VqId,
    pub submits: VecDeque<ReqId>,
    pub plug: Vec<ReqId>,
    /// The guest block layer's per-vCPU queue: requests waiting for a virtqueue slot.
    pub gqueue: VecDeque<ReqId>,
    /// The guest's elevator over `gqueue` (`host/elevator.rs`: the guest kernel's, with
    /// `virt.nomerges` and `virt.max_merge`).
    pub elevator: Elevator,
    pub reaps: VecDeque<ReqId>,
    /// Virtqueues whose interrupt it is to handle.
    pub irqs: VecDeque<VqId>,
    /// An external interrupt arrived while it ran guest code: an EXT_INT exit is due.
    pub ext_int: bool,
    /// It halted (HLT exit) and has had nothing to do since.
    pub hlt_done: bool,
}

impl VcpuRt {
    pub fn new(vm: VmId, thread: ThreadId, vq: VqId, merge: MergeConfig) -> VcpuRt {
        VcpuRt {
            vm,
            thread,
            vq,
            submits: VecDeque::new(),
            plug: Vec::new(),
            gqueue: VecDeque::new(),
            elevator: Elevator::new(merge),
            reaps: VecDeque::new(),
            irqs: VecDeque::new(),
            ext_int: false,
            hlt_done: false,
        }
    }
}

pub(super) struct IoThreadRt {
    pub vm: VmId,
    pub thread: ThreadId,
    pub vqs: Vec<VqId>,
    pub popped: VecDeque<ReqId>,
    pub done: VecDeque<ReqId>,
    pub window_end: Option<SimTime>,
    /// Inside its virtqueue handler (from deciding to pop until popped): guest notifications
    /// are off, as QEMU turns them off while it handles a queue.
    pub popping: bool,
}

impl IoThreadRt {
    pub fn new(vm: VmId, thread: ThreadId, vqs: Vec<VqId>) -> IoThreadRt {
        IoThreadRt { vm, thread, vqs, popped: VecDeque::new(), done: VecDeque::new(), window_end: None, popping: false }
    }
}

/// A VM's counters.
pub(super) struct VmRt {
    pub tenant: TenantId,
    pub vcpus: Vec<VcpuId>,
    pub exits: [ExitStat; 4],
    pub kicks: u64,
    pub interrupts: u64,
    pub ipis: u64,
    pub merges: u64,
}

impl VmRt {
    pub fn new(tenant: TenantId, vcpus: Vec<VcpuId>) -> VmRt {
        VmRt { tenant, vcpus, exits: Default::default(), kicks: 0, interrupts: 0, ipis: 0, merges: 0 }
    }
}

impl Machine {
    pub(super) fn plan(&mut self, now: SimTime, t: ThreadId, out: &mut VirtOutbox) {
        match self.cpu.thread(t).role {
            Role::Process(p) => self.plan_process(t, p),
            Role::Vcpu(v) => self.plan_vcpu(t, v),
            Role::IoThread(i) => self.plan_iothread(now, t, i, out),
        }
    }

    fn plan_process(&mut self, t: ThreadId, p: ProcId) {
        let pr = &mut self.procs[p];
        if !pr.completions.is_empty() {
            let done: Vec<ReqId> = pr.completions.drain(..).collect();
            self.push(t, Op::Burst(self.cpu.cfg().syscall, Act::Nop));
            for r in done {
                // The block layer's completion work is per (merged) request.
                let ns = if self.reqs[r].member { Nanos::ZERO } else { self.complete };
                self.push(t, Op::Burst(ns, Act::AppDone(r)));
            }
        } else if !pr.submits.is_empty() {
            let k = (self.batch[JobId(p.0)] as usize).min(pr.submits.len());
            let reqs: Vec<ReqId> = pr.submits.drain(..k).collect();
            self.push_submit_call(t, &reqs);
        }
    }

    /// One submission system call for `reqs` (all of one job): the call's cost once, then each
    /// request's user-space and block-layer cost, the last one unplugging.
    fn push_submit_call(&mut self, t: ThreadId, reqs: &[ReqId]) {
        debug_assert!(!reqs.is_empty());
        let c = self.cpu.cfg();
        let (each, syscall) = (c.app.0 + self.submit.0, c.syscall.0);
        for (i, &r) in reqs.iter().enumerate() {
            let ns = Nanos(each + if i == 0 { syscall } else { 0 });
            let act = if i + 1 == reqs.len() { Act::Unplug(r) } else { Act::Plug(r) };
            self.push(t, Op::Burst(ns, act));
        }
    }

    fn plan_vcpu(&mut self, t: ThreadId, v: VcpuId) {
        let vc = &mut self.vcpus[v];
        if vc.ext_int {
            vc.ext_int = false;
            self.push(t, Op::Exit(ExitReason::ExtInt, false));
        } else if let Some(q) = vc.irqs.pop_front() {
            self.push(t, Op::Burst(Nanos::ZERO, Act::IrqStart(q)));
        } else if !vc.reaps.is_empty() {
            let done: Vec<ReqId> = vc.reaps.drain(..).collect();
            self.push(t, Op::Burst(self.cpu.cfg().syscall, Act::Nop));
            for r in done {
                self.push(t, Op::Burst(Nanos::ZERO, Act::AppDone(r)));
            }
        } else if let Some(&first) = vc.submits.front() {
            // Processes sharing the vCPU each make their own calls.
            let job = self.reqs[first].job;
            let max = self.batch[job] as usize;
            let vc = &mut self.vcpus[v];
            let k = vc.submits.iter().take(max).take_while(|&&r| self.reqs[r].job == job).count();
            let reqs: Vec<ReqId> = vc.submits.drain(..k).collect();
            self.push_submit_call(t, &reqs);
        } else if let Some(r) = self.take_dispatchable(v) {
            let ops = self.dispatch_ops(r, self.vcpus[v].vq, true);
            self.push_front(t, &ops);
        } else if !self.vcpus[v].hlt_done {
            self.vcpus[v].hlt_done = true;
            self.push(t, Op::Exit(ExitReason::Hlt, false));
            return;
        } else {
            return;
        }
        self.vcpus[v].hlt_done = false;
    }

    /// The head of vCPU `v`'s guest queue, if its virtqueue has a free slot (which it takes).
    fn take_dispatchable(&mut self, v: VcpuId) -> Option<ReqId> {
        let (q, size) = (self.vcpus[v].vq, self.queue_size());
        if self.vcpus[v].gqueue.is_empty() || !self.vqs[q].take_slot(size) {
            return None;
        }
        let r = self.vcpus[v].gqueue.pop_front()?;
        self.vcpus[v].elevator.remove(r);
        Some(r)
    }

    /// Requests a virtqueue holds: IDE's one command, or `queue_size`.
    pub(super) fn queue_size(&self) -> u32 {
        if self.virt.mode == VirtMode::IdeEmulation {
            1
        } else {
            self.virt.queue_size
        }
    }

    /// The ops that put `r` in virtqueue `q`, ending with a notification when `kick` (virtio
    /// drivers notify once per batch, after its last request).
    fn dispatch_ops(&mut self, r: ReqId, q: VqId, kick: bool) -> Vec<Op> {
        self.reqs.set_vq(r, q);
        if self.virt.mode == VirtMode::IdeEmulation {
            let user = self.virt.emulation == Emulation::Userspace;
            let mut ops = vec![Op::Exit(ExitReason::IoInst, user); self.virt.ide_submit_exits as usize];
            ops.push(Op::Burst(Nanos::ZERO, Act::VqAdded(r)));
            ops.push(Op::Burst(Nanos::ZERO, Act::KickDone(q)));
            return ops;
        }
        let lock = self.vqs[q].lock;
        let mut ops = vec![Op::Acquire(lock), Op::Burst(self.virt.vq_add, Act::VqAdded(r)), Op::Release(lock)];
        if kick {
            ops.push(Op::Burst(Nanos::ZERO, Act::Kick(q)));
        }
        ops
    }

    /// The end of a submission call: the plug's requests go on — to the host block layer on
    /// bare metal, through the guest's block layer to the virtqueue in a VM.
    pub(super) fn unplug(&mut self, t: ThreadId, out: &mut VirtOutbox) {
        match self.cpu.thread(t).role {
            Role::Process(p) => {
                let cpu = self.cpu.current_hw(t);
                for r in std::mem::take(&mut self.procs[p].plug) {
                    out.to_host.push(self.reqs.to_host(r, cpu));
                }
            }
            Role::Vcpu(v) => {
                let plugged = std::mem::take(&mut self.vcpus[v].plug);
                let q = self.vcpus[v].vq;
                let go: Vec<ReqId> = plugged.into_iter().filter(|&r| !self.guest_block_layer(t, v, r)).collect();
                let mut ops = Vec::new();
                for (i, &r) in go.iter().enumerate() {
                    ops.extend(self.dispatch_ops(r, q, i + 1 == go.len()));
                }
                self.push_front(t, &ops);
            }
            Role::IoThread(_) => unreachable!("I/O threads do not plug"),
        }
    }

    /// The guest's block layer: `r` may go to the virtqueue (taking a slot; returns false) when
    /// the queue has room and nothing waits before it; otherwise it waits (returns true),
    /// merged by the guest's elevator into a waiting request it touches (the last merged
    /// into, else one ending where it starts, else one starting where it ends; Linux's
    /// `elv_merge`, as the host's block layer does).
    fn guest_block_layer(&mut self, t: ThreadId, v: VcpuId, r: ReqId) -> bool {
        let q = self.vcpus[v].vq;
        let size = self.queue_size();
        if self.vcpus[v].gqueue.is_empty() && self.vqs[q].take_slot(size) {
            return false;
        }
        let info = self.reqs[r];
        let op = info.op.expect("a submitted request has an operation");
        let sr = SchedReq { id: r, tenant: TenantId(0), op, offset: info.offset, bytes: info.len, update: false, dspec: 0 };
        if let Some(m) = self.vcpus[v].elevator.arrive(&sr) {
            self.reqs.join(m.lead, r, m.offset, m.len);
            self.count_merge(t);
            return true;
        }
        self.vcpus[v].gqueue.push_back(r);
        true
    }

    fn plan_iothread(&mut self, now: SimTime, t: ThreadId, i: IoThreadId, out: &mut VirtOutbox) {
        if !self.iots[i].popped.is_empty() {
            self.plan_submissions(t, i);
        } else if !self.iots[i].done.is_empty() {
            self.plan_completions(t, i);
        } else {
            self.plan_pop(now, t, i, out);
        }
    }

    /// A user/kernel crossing of the I/O thread (userspace emulation only).
    fn user_switch(&self) -> Nanos {
        if self.virt.emulation == Emulation::Userspace {
            self.virt.userspace_switch
        } else {
            Nanos::ZERO
        }
    }

    /// The I/O thread submits what it popped to the host (or hands it to pool workers).
    fn plan_submissions(&mut self, t: ThreadId, i: IoThreadId) {
        let sw = self.user_switch();
        let reqs: Vec<ReqId> = self.iots[i].popped.drain(..).collect();
        self.push(t, Op::Burst(sw, Act::Nop));
        let ns = Nanos(self.submit.0 + self.virt.request_cost.0 / 2);
        let pool = self.virt.aio == Aio::Threads && self.virt.emulation == Emulation::Userspace;
        for r in reqs {
            if pool {
                // Waking a worker (a futex system call); the worker makes the submission.
                let handoff = Nanos(self.virt.request_cost.0 / 2 + self.cpu.cfg().syscall.0);
                self.push(t, Op::Burst(handoff, Act::Handoff(r)));
            } else {
                self.push(t, Op::Burst(ns, Act::HostSubmit(r)));
            }
        }
    }

    /// The I/O thread reaps the host's completions, pushes them to their virtqueues' used rings
    /// and raises their interrupts.
    fn plan_completions(&mut self, t: ThreadId, i: IoThreadId) {
        let sw = self.user_switch();
        let reqs: Vec<ReqId> = self.iots[i].done.drain(..).collect();
        let mut per_vq: Vec<(VqId, u32)> = Vec::new();
        for &r in &reqs {
            let q = self.reqs[r].vq.expect("a completed request went through a virtqueue");
            match per_vq.iter_mut().find(|(x, _)| *x == q) {
                Some(e) => e.1 += 1,
                None => per_vq.push((q, 1)),
            }
        }
        self.push(t, Op::Burst(sw, Act::Nop));
        let ns = Nanos(self.complete.0 + self.virt.request_cost.0 - self.virt.request_cost.0 / 2);
        for r in reqs {
            self.push(t, Op::Burst(ns, Act::Reaped(r)));
        }
        for (q, n) in per_vq {
            let lock = self.vqs[q].lock;
            self.push(t, Op::Acquire(lock));
            self.push(t, Op::Burst(Nanos(self.virt.vq_push.0 * n as u64), Act::Pushed(q)));
            self.push(t, Op::Release(lock));
            self.push(t, Op::Burst(sw, Act::RaiseIrq(q)));
        }
    }

    /// The I/O thread pops the available requests of its virtqueues — after the batch window
    /// in `multiqueue`.
    fn plan_pop(&mut self, now: SimTime, t: ThreadId, i: IoThreadId, out: &mut VirtOutbox) {
        let ready: Vec<(VqId, usize)> =
            self.iots[i].vqs.iter().map(|&q| (q, self.vqs[q].available())).filter(|&(_, n)| n > 0).collect();
        if ready.is_empty() {
            return;
        }
        if self.virt.mode == VirtMode::Multiqueue && self.virt.batch_window.0 > 0 {
            let io = &mut self.iots[i];
            match io.window_end {
                None => {
                    let end = now + self.virt.batch_window;
                    io.window_end = Some(end);
                    out.events.push((end, MachineEvent::Window(i)));
                    return;
                }
                Some(e) if e > now => return,
                Some(_) => io.window_end = None,
            }
        }
        self.iots[i].popping = true;
        for (q, n) in ready {
            let lock = self.vqs[q].lock;
            self.push(t, Op::Acquire(lock));
            self.push(t, Op::Burst(Nanos(self.virt.vq_pop.0 * n as u64), Act::Popped(q)));
            self.push(t, Op::Release(lock));
        }
    }
}
