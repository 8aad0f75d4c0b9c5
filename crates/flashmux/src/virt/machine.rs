//! The host machine: hardware threads, the threads that share them, and what those threads do
//! for each I/O — fio processes on bare metal; vCPUs, I/O threads and polling threads in VMs.
//! This file builds the machine and runs its threads; the pieces are each in their own file:
//! the CPU scheduler and mutexes (`cpu.rs`, `lock.rs`), a thread's ops and states (`thread.rs`),
//! what each role plans (`roles.rs`), the plug and merging (`plug.rs`), virtqueues
//! (`virtqueue.rs`), kicks, exits and interrupts (`irq.rs`) and the results (`report.rs`).
//!
//! # Model
//! Every thread runs a queue of *ops*: a CPU burst (ending in an action), a mutex acquire or
//! release, or a VM exit. When its queue is empty the thread's role *plans* the next ops from its
//! state (requests to submit, completions to reap, interrupts pending); with nothing to do it
//! sleeps (a voluntary context switch) — or, as a polling thread, keeps spinning on its hardware
//! thread. A sleeping thread that gets work is woken: runnable after `wakeup`, then running after
//! `context_switch` once a hardware thread it may use is free. Each hardware thread is scheduled
//! as Linux's CFS does: a woken thread far enough behind the running one in virtual runtime
//! preempts it, and a running thread yields to a waiting one when its slice has run out, each at
//! the running thread's next op.
//!
//! Mutexes are FIFO: a waiter spins for `spin`, then sleeps; a release hands the mutex to the
//! oldest waiter, which — if it slept — holds it through its wake-up (the convoy that makes
//! paper A's Baseline fall as processes are added).
//!
//! # One 4 KiB read through `per-vcpu-threads` (default costs, no contention)
//! ```text
//! vCPU 0   app+syscall+block layer 3.2us → lock, add 0.3us → kick exit IO_INST 2.5us
//! I/O thr  wake 4us + switch 1.5us → lock, pop 0.3us → io_submit 1.5us → host blk-mq → device
//! I/O thr  (completion) wake 4us + switch 1.5us → reap 1.5us → lock, push 0.3us → irqfd
//! vCPU 0   EXT_INT exit 2us (if running) → handler 1.5us → EOI (MSR_WRITE) 1.5us → reap 0.7us
//! ```
//! Paper A's costs and their calibration are in docs/MODEL.md ("Virtualized I/O path").

use super::cpu::Cpu;
use super::ids::{HwThreadId, IdVec, Idx, IoThreadId, ProcId, ThreadId, VcpuId, VmId, VqId};
use super::plug::{self, Reqs};
use super::roles::{IoThreadRt, ProcRt, VcpuRt, VmRt};
use super::thread::{Act, Cur, Op, Role, TState};
use super::virtqueue::Virtqueue;
use super::{CpuConfig, ExitReason, Notify, VirtConfig, VirtMode};
use crate::device::IoOp;
use crate::host::MergeConfig;
use crate::units::{JobId, Nanos, ReqId, SimTime, TenantId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachineEvent {
    /// Thread `t`'s current activity (switch-in, burst, spin, poll detection) ends, unless the
    /// thread has moved on since (`gen` differs).
    Step { t: ThreadId, gen: u32 },
    /// Thread `t`'s wake-up latency has passed: it becomes runnable.
    Wake(ThreadId),
    /// I/O thread `i`'s batch window closes.
    Window(IoThreadId),
    /// A thread-pool worker woke and submits the request (`aio = "threads"`), from the
    /// hardware thread the I/O thread handed it over on.
    Worker { req: ReqId, cpu: HwThreadId },
}

/// A request leaving the machine for the host block layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToHost {
    pub req: ReqId,
    /// The command's range: several requests' when the guest merged them.
    pub offset: u64,
    pub len: u64,
    /// The hardware thread it was submitted from (picks the blk-mq software queue).
    pub cpu: HwThreadId,
}

/// A request a job issues.
#[derive(Clone, Copy, Debug)]
pub struct Io {
    pub req: ReqId,
    /// The job in the simulator (its process, or its guest process's vCPU).
    pub job: JobId,
    pub op: IoOp,
    pub offset: u64,
    pub len: u64,
}

/// What a machine call produced.
#[derive(Default)]
pub struct VirtOutbox {
    pub events: Vec<(SimTime, MachineEvent)>,
    pub to_host: Vec<ToHost>,
    /// Requests whose completion the application sees now.
    pub to_app: Vec<ReqId>,
}

impl VirtOutbox {
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.to_host.is_empty() && self.to_app.is_empty()
    }
}

pub struct Machine {
    pub(super) cpu: Cpu,
    pub(super) virt: VirtConfig,
    /// The kernel's per-request block-layer costs (host and guest alike).
    pub(super) submit: Nanos,
    pub(super) complete: Nanos,
    pub(super) procs: IdVec<ProcId, ProcRt>,
    /// Per job: its guest vCPU, or none on bare metal (where job i is process i).
    pub(super) job_vcpu: IdVec<JobId, Option<VcpuId>>,
    pub(super) vms: IdVec<VmId, VmRt>,
    pub(super) vcpus: IdVec<VcpuId, VcpuRt>,
    pub(super) vqs: IdVec<VqId, Virtqueue>,
    pub(super) iots: IdVec<IoThreadId, IoThreadRt>,
    pub(super) reqs: Reqs,
    /// Threads out of ops that decide at the next `settle`.
    pending: Vec<ThreadId>,
    /// Per job: requests per submission call (fio's `iodepth_batch_submit`).
    pub(super) batch: IdVec<JobId, u32>,
    /// Requests the host block layer merged (bare metal).
    pub(super) host_merges: u64,
}

impl Machine {
    /// Builds the host: one process per bare-metal job; per VM (one per tenant when the mode is
    /// a VM mode) its vCPUs, virtqueues and I/O threads. `jobs[i]` is job i's tenant and
    /// `batches[i]` its requests per submission call; `submit` and `complete` are the kernel's
    /// per-request block-layer costs (host and guest alike).
    pub fn new(
        cpu: CpuConfig,
        virt: VirtConfig,
        jobs: &[TenantId],
        batches: &[u32],
        tenants: usize,
        submit: Nanos,
        complete: Nanos,
    ) -> Machine {
        assert_eq!(jobs.len(), batches.len(), "one batch size per job");
        assert!(jobs.iter().all(|t| t.index() < tenants), "every job belongs to a tenant");
        let mut m = Machine {
            cpu: Cpu::new(cpu),
            procs: IdVec::new(),
            job_vcpu: jobs.iter().map(|_| None).collect(),
            vms: IdVec::new(),
            vcpus: IdVec::new(),
            vqs: IdVec::new(),
            iots: IdVec::new(),
            reqs: Reqs::new(if virt.nomerges >= 2 { 0 } else { virt.max_merge_bytes }),
            pending: Vec::new(),
            batch: batches.iter().map(|&b| b.max(1)).collect(),
            host_merges: 0,
            submit,
            complete,
            virt,
        };
        if m.virt.mode.is_vm() {
            let pollers = if m.virt.notify == Notify::Poll { tenants as u32 * m.virt.iothreads() } else { 0 };
            // Polling threads own the highest hardware threads; everything else shares the rest.
            let h = m.cpu.hw_threads();
            assert!((pollers as usize) < h, "{pollers} polling threads leave no hardware thread to share");
            for k in 0..pollers as usize {
                m.cpu.reserve(HwThreadId::from_index(h - 1 - k));
            }
            for t in 0..tenants {
                m.build_vm(TenantId(t as u16));
            }
            let mut per_vm = vec![0usize; tenants];
            for (j, t) in jobs.iter().enumerate() {
                let vm = &m.vms[VmId(t.0 as u32)];
                m.job_vcpu[JobId::from_index(j)] = Some(vm.vcpus[per_vm[t.index()] % vm.vcpus.len()]);
                per_vm[t.index()] += 1;
            }
        } else {
            for j in 0..jobs.len() {
                let t = m.cpu.add_thread(Role::Process(ProcId::from_index(j)), None, false);
                m.procs.push(ProcRt::new(t));
            }
        }
        m
    }

    /// A VM's vCPUs, virtqueues (each with its mutex) and I/O threads.
    fn build_vm(&mut self, tenant: TenantId) {
        let v = &self.virt;
        let (nvcpu, nq, nio) = (v.vcpus, v.queues(), v.iothreads());
        assert!(nvcpu > 0 && nq > 0 && nio > 0, "a VM has vCPUs, virtqueues and I/O threads");
        let vm = self.vms.next_id();
        let shared = self.cpu.shared_hws();
        let first_vcpu = self.vcpus.len() as u32;
        let first_vq = self.vqs.len() as u32;
        let first_io = self.iots.len() as u32;
        let mut vcpu_ids = Vec::new();
        for i in 0..nvcpu {
            let g = VcpuId(first_vcpu + i);
            let pin = self.virt.pin_vcpus.then(|| shared[g.index() % shared.len()]);
            let t = self.cpu.add_thread(Role::Vcpu(g), pin, false);
            vcpu_ids.push(g);
            let merge = MergeConfig { nomerges: self.virt.nomerges, max_bytes: self.virt.max_merge_bytes };
            self.vcpus.push(VcpuRt::new(vm, t, VqId(first_vq + i % nq), merge));
        }
        for q in 0..nq {
            let lock = self.cpu.add_lock();
            let vcpus: Vec<VcpuId> = (0..nvcpu).filter(|i| i % nq == q).map(|i| VcpuId(first_vcpu + i)).collect();
            let io = IoThreadId(first_io + q % nio);
            self.vqs.push(Virtqueue::new(vm, lock, io, VcpuId(first_vcpu + q % nvcpu), vcpus));
        }
        let poll = self.virt.notify == Notify::Poll;
        for i in 0..nio {
            let g = IoThreadId(first_io + i);
            let pin = if poll {
                Some(HwThreadId::from_index(self.cpu.hw_threads() - 1 - g.index()))
            } else if self.virt.mode == VirtMode::PerVcpuThreads && self.virt.pin_iothreads {
                Some(shared[g.index() % shared.len()])
            } else {
                None
            };
            let t = self.cpu.add_thread(Role::IoThread(g), pin, poll);
            let vqs = (0..nq).filter(|q| q % nio == i).map(|q| VqId(first_vq + q)).collect();
            self.iots.push(IoThreadRt::new(vm, t, vqs));
        }
        self.vms.push(VmRt::new(tenant, vcpu_ids));
    }

    /// Polling threads start spinning at time zero.
    pub fn start(&mut self, now: SimTime, out: &mut VirtOutbox) {
        for t in self.cpu.threads().ids() {
            if self.cpu.thread(t).poller {
                self.cpu.make_runnable(now, t, &mut out.events);
            }
        }
    }

    // ---- the simulator's entry points -------------------------------------------------------

    /// A job issued a request.
    pub fn submit(&mut self, now: SimTime, io: Io, out: &mut VirtOutbox) {
        let Io { req, job, op, offset, len } = io;
        self.reqs.insert(req, job, op, offset, len);
        let t = match self.job_vcpu[job] {
            None => {
                let p = &mut self.procs[ProcId(job.0)];
                p.submits.push_back(req);
                p.thread
            }
            Some(v) => {
                self.vcpus[v].submits.push_back(req);
                self.vcpus[v].thread
            }
        };
        self.notify(now, t, out);
    }

    /// The host block layer completed a request the machine handed it.
    pub fn host_complete(&mut self, now: SimTime, req: ReqId, out: &mut VirtOutbox) {
        let info = self.reqs[req];
        assert!(!info.member, "the host completes the lead of a merged request");
        let t = if self.job_vcpu[info.job].is_none() {
            let p = &mut self.procs[ProcId(info.job.0)];
            p.completions.extend(self.reqs.chain(req));
            p.thread
        } else {
            let io = self.vqs[info.vq.expect("a VM's request went through a virtqueue")].iothread;
            self.iots[io].done.push_back(req);
            self.iots[io].thread
        };
        self.notify(now, t, out);
    }

    pub fn handle(&mut self, now: SimTime, ev: MachineEvent, out: &mut VirtOutbox) {
        match ev {
            MachineEvent::Step { t, gen } => {
                let th = self.cpu.thread_mut(t);
                if th.gen != gen {
                    return;
                }
                match th.cur {
                    Cur::Burst(act) => {
                        th.cur = Cur::Idle;
                        self.apply(now, t, act, out);
                        self.run_next(now, t, out);
                    }
                    Cur::Spin => {
                        // Spun long enough: sleep until the mutex is handed over. A vCPU whose
                        // guest has nothing else to run halts (a HLT exit).
                        if let Role::Vcpu(v) = th.role {
                            self.count_exit(v, ExitReason::Hlt);
                        }
                        self.cpu.sleep_on_lock(now, t, &mut out.events);
                    }
                    Cur::SwitchIn | Cur::Granted | Cur::PollDetect => self.run_next(now, t, out),
                    Cur::Idle | Cur::PollIdle | Cur::Settle => {}
                }
            }
            MachineEvent::Wake(t) => {
                if self.cpu.thread(t).state == TState::Waking {
                    self.cpu.make_runnable(now, t, &mut out.events);
                }
            }
            MachineEvent::Window(i) => {
                let t = self.iots[i].thread;
                self.notify(now, t, out);
            }
            MachineEvent::Worker { req, cpu } => out.to_host.push(self.reqs.to_host(req, cpu)),
        }
    }

    /// Threads that ran out of work decide now, after the simulator handed them anything the
    /// last call produced (a reaped completion lets the job issue its next request).
    pub fn settle(&mut self, now: SimTime, out: &mut VirtOutbox) {
        while let Some(t) = self.pending.pop() {
            let th = self.cpu.thread_mut(t);
            if th.cur == Cur::Settle {
                th.cur = Cur::Idle;
                self.run_next(now, t, out);
            }
        }
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    // ---- running threads --------------------------------------------------------------------

    /// Work arrived for thread `t`.
    pub(super) fn notify(&mut self, now: SimTime, t: ThreadId, out: &mut VirtOutbox) {
        let th = self.cpu.thread(t);
        if let (TState::Blocked, Role::IoThread(i)) = (th.state, th.role) {
            // Inside a batch window the I/O thread only wakes for completions or the window's
            // end.
            let io = &self.iots[i];
            if io.window_end.is_some_and(|e| e > now) && io.done.is_empty() {
                return;
            }
        }
        self.cpu.wake(now, t, self.virt.poll_detect, &mut out.events);
    }

    /// Thread `t` runs its ops until one takes time (or it leaves its hardware thread).
    fn run_next(&mut self, now: SimTime, t: ThreadId, out: &mut VirtOutbox) {
        while self.cpu.on_hw(t).is_some() {
            if self.cpu.thread(t).ops.is_empty() {
                if !out.to_app.is_empty() {
                    // The application has completions to see first: what it issues next is
                    // this thread's next work.
                    self.cpu.thread_mut(t).cur = Cur::Settle;
                    self.pending.push(t);
                    return;
                }
                self.plan(now, t, out);
            }
            let th = self.cpu.thread_mut(t);
            let Some(op) = th.ops.pop_front() else {
                if th.poller {
                    th.cur = Cur::PollIdle;
                } else {
                    self.cpu.block(now, t, &mut out.events);
                }
                return;
            };
            if self.cpu.preempt(now, t, op, &mut out.events) {
                return;
            }
            match op {
                Op::Burst(ns, act) if ns.0 == 0 => self.apply(now, t, act, out),
                Op::Burst(ns, act) => return self.cpu.begin_burst(now, t, ns, act, &mut out.events),
                Op::Acquire(l) => {
                    if !self.cpu.acquire(now, t, l, &mut out.events) {
                        return;
                    }
                }
                Op::Release(l) => self.release(now, t, l, out),
                Op::Exit(reason, userspace) => {
                    let ns = self.exit(t, reason, userspace, out);
                    return self.cpu.begin_burst(now, t, ns, Act::Nop, &mut out.events);
                }
            }
        }
    }

    /// What the end of a burst does.
    fn apply(&mut self, now: SimTime, t: ThreadId, act: Act, out: &mut VirtOutbox) {
        match act {
            Act::Nop => {}
            Act::HostSubmit(r) => {
                let cpu = self.cpu.current_hw(t);
                out.to_host.push(self.reqs.to_host(r, cpu));
            }
            Act::AppDone(r) => out.to_app.push(r),
            Act::Handoff(r) => {
                let cpu = self.cpu.current_hw(t);
                let c = self.cpu.cfg();
                let at = now + Nanos(c.wakeup.0 + c.context_switch.0 + self.submit.0);
                out.events.push((at, MachineEvent::Worker { req: r, cpu }));
            }
            Act::Plug(r) => self.plug(t, r),
            Act::Unplug(r) => {
                self.plug(t, r);
                self.unplug(t, out);
            }
            Act::VqAdded(r) => {
                let q = self.reqs[r].vq.expect("a request added to a virtqueue was dispatched to it");
                self.vqs[q].add(r);
            }
            Act::Kick(q) => self.kick(now, t, q, out),
            Act::KickDone(q) => {
                let it = self.iots[self.vqs[q].iothread].thread;
                self.notify(now, it, out);
            }
            Act::IrqStart(q) => self.irq_start(t, q),
            Act::IrqEnd(q) => self.irq_end(t, q),
            Act::Completed(r) => self.guest_complete(now, t, r, out),
            Act::Popped(q) => {
                let io = self.vqs[q].iothread;
                self.iots[io].popped.extend(self.vqs[q].pop_all());
                self.iots[io].popping = false;
            }
            Act::Reaped(r) => {
                let q = self.reqs[r].vq.expect("a reaped request went through a virtqueue");
                self.vqs[q].stage_push(r);
            }
            Act::Pushed(q) => self.vqs[q].push_used(),
            Act::RaiseIrq(q) => self.raise_irq(now, q, out),
        }
    }

    /// A request joins the calling thread's plug, merged into the last one when adjacent.
    fn plug(&mut self, t: ThreadId, r: ReqId) {
        let p = match self.cpu.thread(t).role {
            Role::Process(p) => &mut self.procs[p].plug,
            Role::Vcpu(v) => &mut self.vcpus[v].plug,
            Role::IoThread(_) => unreachable!("I/O threads do not plug"),
        };
        if plug::plug(p, &mut self.reqs, r) {
            self.count_merge(t);
        }
    }

    /// A merge in thread `t`'s block layer: its VM's, or the host's for a process.
    pub(super) fn count_merge(&mut self, t: ThreadId) {
        match self.cpu.thread(t).role {
            Role::Vcpu(v) => self.vms[self.vcpus[v].vm].merges += 1,
            _ => self.host_merges += 1,
        }
    }

    /// Ops to run next, before what thread `t` had planned.
    pub(super) fn push_front(&mut self, t: ThreadId, ops: &[Op]) {
        self.cpu.thread_mut(t).push_front(ops);
    }

    pub(super) fn push(&mut self, t: ThreadId, op: Op) {
        self.cpu.thread_mut(t).ops.push_back(op);
    }

    pub fn check_invariants(&self) {
        self.cpu.check_invariants();
        let qs = self.queue_size();
        for (i, vq) in self.vqs.iter_enumerated() {
            vq.check_invariants(i.index(), qs);
        }
    }
}
