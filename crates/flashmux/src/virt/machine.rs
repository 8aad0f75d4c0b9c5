//! The host machine: hardware threads, the threads that share them, and what those threads do
//! for each I/O — fio processes on bare metal; vCPUs, I/O threads and polling threads in VMs.
//!
//! # Model
//! Every thread runs a queue of *ops*: a CPU burst (ending in an action), a mutex acquire or
//! release, or a VM exit. When its queue is empty the thread's role *plans* the next ops from its
//! state (requests to submit, completions to reap, interrupts pending); with nothing to do it
//! sleeps (a voluntary context switch) — or, as a polling thread, keeps spinning on its hardware
//! thread. A sleeping thread that gets work is woken: runnable after `wakeup`, then running after
//! `context_switch` once a hardware thread it may use is free. A thread that has run for a
//! `quantum` yields at its next op when another thread waits for its hardware thread.
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

use super::{Aio, Completion, CpuConfig, Emulation, ExitReason, Notify, VirtConfig, VirtMode};
use super::report::{ExitStat, LockStat, ThreadStat, VirtResult, VmResult};
use crate::device::IoOp;
use crate::units::{Nanos, ReqId, SimTime};
use std::collections::VecDeque;

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachineEvent {
    /// Thread `t`'s current activity (switch-in, burst, spin, poll detection) ends, unless the
    /// thread has moved on since (`gen` differs).
    Step { t: u32, gen: u32 },
    /// Thread `t`'s wake-up latency has passed: it becomes runnable.
    Wake(u32),
    /// I/O thread `i`'s batch window closes.
    Window(u32),
    /// A thread-pool worker woke and submits the request (`aio = "threads"`), from the
    /// hardware thread the I/O thread handed it over on.
    Worker { req: ReqId, cpu: u16 },
}

/// A request leaving the machine for the host block layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToHost {
    pub req: ReqId,
    /// The command's range: several requests' when the guest merged them.
    pub offset: u64,
    pub len: u64,
    /// The hardware thread it was submitted from (picks the blk-mq software queue).
    pub cpu: u16,
}

/// A request a job issues.
#[derive(Clone, Copy, Debug)]
pub struct Io {
    pub req: ReqId,
    /// The job's index in the simulator (its process, or its guest process's vCPU).
    pub job: usize,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Act {
    Nop,
    /// Hand the request to the host block layer.
    HostSubmit(ReqId),
    /// Hand the request to a thread-pool worker, which submits it once awake.
    Handoff(ReqId),
    /// The request is in the submitting thread's block-layer plug (one `io_submit` call).
    Plug(ReqId),
    /// The last request of the call: plug it, then unplug: hand on what the plug holds,
    /// adjacent requests merged (the host block layer on bare metal, the guest's in a VM).
    Unplug(ReqId),
    /// The application reaped the completion.
    AppDone(ReqId),
    /// The request is in the virtqueue's available ring.
    VqAdded(ReqId),
    /// Decide whether to notify the host.
    Kick(u32),
    /// The host learns of new requests (eventfd).
    KickDone(u32),
    IrqStart(u32),
    /// The guest completed a used entry (a request, with those merged into it).
    Completed(ReqId),
    IrqEnd(u32),
    Popped(u32),
    Reaped(ReqId),
    Pushed(u32),
    RaiseIrq(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Burst(Nanos, Act),
    Acquire(u32),
    Release(u32),
    /// A VM exit; `userspace`: emulated in the QEMU process.
    Exit(ExitReason, bool),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TState {
    Blocked,
    /// Sleeping on a mutex: only its release wakes it.
    LockSleep,
    Waking,
    Runnable,
    OnCpu(u16),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cur {
    Idle,
    SwitchIn,
    Burst(Act),
    Spin,
    Granted,
    PollIdle,
    PollDetect,
    /// Out of ops; decided once the simulator has handed it any new work.
    Settle,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Process(u32),
    Vcpu(u32),
    IoThread(u32),
}

struct Thread {
    role: Role,
    pin: Option<u16>,
    poller: bool,
    state: TState,
    /// The mutex it waits for, while spinning or sleeping on one.
    waiting: u32,
    cur: Cur,
    gen: u32,
    ops: VecDeque<Op>,
    burst_end: SimTime,
    on_since: SimTime,
    slice_start: SimTime,
    enq_seq: u64,
    last_hw: u16,
    oncpu_ns: u64,
    voluntary: u64,
    involuntary: u64,
}

struct Hw {
    current: u32,
    /// Threads that are not pinned may run here (false: a polling thread's own).
    shared: bool,
}

#[derive(Default)]
struct Lock {
    owner: u32,
    waiters: VecDeque<(u32, SimTime)>,
    stat: LockStat,
}

#[derive(Default)]
struct ProcRt {
    thread: u32,
    submits: VecDeque<ReqId>,
    plug: Vec<ReqId>,
    completions: VecDeque<ReqId>,
}

#[derive(Default)]
struct VcpuRt {
    vm: u32,
    thread: u32,
    vq: u32,
    submits: VecDeque<ReqId>,
    plug: Vec<ReqId>,
    /// The guest block layer's per-vCPU queue: requests waiting for a virtqueue slot.
    gqueue: VecDeque<ReqId>,
    reaps: VecDeque<ReqId>,
    irqs: VecDeque<u32>,
    ext_int: bool,
    hlt_done: bool,
}

#[derive(Default)]
struct Vq {
    vm: u32,
    lock: u32,
    iothread: u32,
    irq_vcpu: u32,
    /// vCPUs whose requests go to this queue.
    vcpus: Vec<u32>,
    rr: usize,
    inflight: u32,
    avail: VecDeque<ReqId>,
    pending_push: VecDeque<ReqId>,
    used: VecDeque<ReqId>,
    irq_raised: bool,
}

#[derive(Default)]
struct IoThreadRt {
    vm: u32,
    thread: u32,
    vqs: Vec<u32>,
    popped: VecDeque<ReqId>,
    done: VecDeque<ReqId>,
    window_end: Option<SimTime>,
    /// Inside its virtqueue handler (from deciding to pop until popped): guest notifications
    /// are off, as QEMU turns them off while it handles a queue.
    popping: bool,
}

struct VmRt {
    tenant: usize,
    vcpus: Vec<u32>,
    exits: [ExitStat; 4],
    kicks: u64,
    interrupts: u64,
    ipis: u64,
    merges: u64,
}

#[derive(Clone, Copy, Default)]
struct ReqInfo {
    job: u32,
    vq: u32,
    op: Option<IoOp>,
    offset: u64,
    len: u64,
    /// Requests merged into this one (a chain through `next`).
    next: u32,
    tail: u32,
    /// Merged into another request: the block layer completes it with that one.
    member: bool,
}

pub struct Machine {
    cpu: CpuConfig,
    virt: VirtConfig,
    submit: Nanos,
    complete: Nanos,
    hw: Vec<Hw>,
    threads: Vec<Thread>,
    runq: VecDeque<u32>,
    pinned_q: Vec<VecDeque<u32>>,
    seq: u64,
    locks: Vec<Lock>,
    procs: Vec<ProcRt>,
    /// Per job: its guest vCPU (global index), or NONE on bare metal (where job i is
    /// process i).
    job_vcpu: Vec<u32>,
    vms: Vec<VmRt>,
    vcpus: Vec<VcpuRt>,
    vqs: Vec<Vq>,
    iots: Vec<IoThreadRt>,
    reqs: Vec<ReqInfo>,
    pending: Vec<u32>,
    /// Per job: requests per submission call (fio's `iodepth_batch_submit`).
    batch: Vec<u32>,
    /// Requests the host block layer merged (bare metal).
    host_merges: u64,
}

impl Machine {
    /// Builds the host: one process per bare-metal job; per VM (one per tenant when the mode is
    /// a VM mode) its vCPUs, virtqueues and I/O threads. `jobs[i]` is job i's tenant and
    /// `batches[i]` its requests per submission call; `submit` and `complete` are the kernel's
    /// per-request block-layer costs (host and guest alike).
    pub fn new(
        cpu: CpuConfig,
        virt: VirtConfig,
        jobs: &[usize],
        batches: &[u32],
        tenants: usize,
        submit: Nanos,
        complete: Nanos,
    ) -> Machine {
        assert_eq!(jobs.len(), batches.len(), "one batch size per job");
        let h = cpu.hw_threads() as usize;
        let mut m = Machine {
            hw: (0..h).map(|_| Hw { current: NONE, shared: true }).collect(),
            pinned_q: vec![VecDeque::new(); h],
            threads: Vec::new(),
            runq: VecDeque::new(),
            seq: 0,
            locks: Vec::new(),
            procs: Vec::new(),
            job_vcpu: vec![NONE; jobs.len()],
            vms: Vec::new(),
            vcpus: Vec::new(),
            vqs: Vec::new(),
            iots: Vec::new(),
            reqs: Vec::new(),
            pending: Vec::new(),
            batch: batches.iter().map(|&b| b.max(1)).collect(),
            host_merges: 0,
            submit,
            complete,
            cpu,
            virt,
        };
        if m.virt.mode.is_vm() {
            let pollers = if m.virt.notify == Notify::Poll { tenants as u32 * m.virt.iothreads() } else { 0 };
            // Polling threads own the highest hardware threads; everything else shares the rest.
            for k in 0..pollers as usize {
                m.hw[h - 1 - k].shared = false;
            }
            for t in 0..tenants {
                m.build_vm(t);
            }
            let mut per_vm = vec![0u32; tenants];
            for (j, &t) in jobs.iter().enumerate() {
                let vm = &m.vms[t];
                m.job_vcpu[j] = vm.vcpus[(per_vm[t] % vm.vcpus.len() as u32) as usize];
                per_vm[t] += 1;
            }
        } else {
            for j in 0..jobs.len() {
                let t = m.add_thread(Role::Process(j as u32), None, false);
                m.procs.push(ProcRt { thread: t, ..Default::default() });
            }
        }
        m
    }

    fn shared_hws(&self) -> Vec<u16> {
        (0..self.hw.len() as u16).filter(|&h| self.hw[h as usize].shared).collect()
    }

    fn build_vm(&mut self, tenant: usize) {
        let v = &self.virt;
        let (nvcpu, nq, nio) = (v.vcpus, v.queues(), v.iothreads());
        let vm = self.vms.len() as u32;
        let shared = self.shared_hws();
        let first_vcpu = self.vcpus.len() as u32;
        let first_vq = self.vqs.len() as u32;
        let first_io = self.iots.len() as u32;
        let mut vcpu_threads = Vec::new();
        for i in 0..nvcpu {
            let g = first_vcpu + i;
            let pin = self.virt.pin_vcpus.then(|| shared[g as usize % shared.len()]);
            let t = self.add_thread(Role::Vcpu(g), pin, false);
            vcpu_threads.push(g);
            self.vcpus.push(VcpuRt { vm, thread: t, vq: first_vq + i % nq, ..Default::default() });
        }
        for q in 0..nq {
            let lock = self.locks.len() as u32;
            self.locks.push(Lock { owner: NONE, ..Default::default() });
            let vcpus: Vec<u32> = (0..nvcpu).filter(|i| i % nq == q).map(|i| first_vcpu + i).collect();
            self.vqs.push(Vq {
                vm,
                lock,
                iothread: first_io + q % nio,
                irq_vcpu: first_vcpu + q % nvcpu,
                vcpus,
                ..Default::default()
            });
        }
        let poll = self.virt.notify == Notify::Poll;
        let pollers_before = first_io;
        for i in 0..nio {
            let g = first_io + i;
            let pin = if poll {
                Some((self.hw.len() as u32 - 1 - (pollers_before + i)) as u16)
            } else if self.virt.mode == VirtMode::PerVcpuThreads && self.virt.pin_iothreads {
                Some(shared[g as usize % shared.len()])
            } else {
                None
            };
            let t = self.add_thread(Role::IoThread(g), pin, poll);
            let vqs = (0..nq).filter(|q| q % nio == i).map(|q| first_vq + q).collect();
            self.iots.push(IoThreadRt { vm, thread: t, vqs, ..Default::default() });
        }
        self.vms.push(VmRt {
            tenant,
            vcpus: vcpu_threads,
            exits: Default::default(),
            kicks: 0,
            interrupts: 0,
            ipis: 0,
            merges: 0,
        });
    }

    fn add_thread(&mut self, role: Role, pin: Option<u16>, poller: bool) -> u32 {
        self.threads.push(Thread {
            role,
            pin,
            poller,
            state: TState::Blocked,
            waiting: NONE,
            cur: Cur::Idle,
            gen: 0,
            ops: VecDeque::new(),
            burst_end: SimTime::ZERO,
            on_since: SimTime::ZERO,
            slice_start: SimTime::ZERO,
            enq_seq: 0,
            last_hw: pin.unwrap_or(0),
            oncpu_ns: 0,
            voluntary: 0,
            involuntary: 0,
        });
        (self.threads.len() - 1) as u32
    }

    /// Polling threads start spinning at time zero.
    pub fn start(&mut self, now: SimTime, out: &mut VirtOutbox) {
        for t in 0..self.threads.len() as u32 {
            if self.threads[t as usize].poller {
                self.make_runnable(now, t, out);
            }
        }
    }

    // ---- the simulator's entry points -------------------------------------------------------

    /// A job issued a request.
    pub fn submit(&mut self, now: SimTime, io: Io, out: &mut VirtOutbox) {
        let Io { req, job, op, offset, len } = io;
        let i = req.index();
        if self.reqs.len() <= i {
            self.reqs.resize(i + 1, ReqInfo::default());
        }
        self.reqs[i] = ReqInfo { job: job as u32, vq: NONE, op: Some(op), offset, len, next: NONE, tail: NONE, member: false };
        let v = self.job_vcpu[job];
        if v == NONE {
            let p = &mut self.procs[job];
            p.submits.push_back(req);
            let t = p.thread;
            self.notify(now, t, out);
        } else {
            self.vcpus[v as usize].submits.push_back(req);
            let t = self.vcpus[v as usize].thread;
            self.notify(now, t, out);
        }
    }

    /// The host block layer completed a request the machine handed it.
    pub fn host_complete(&mut self, now: SimTime, req: ReqId, out: &mut VirtOutbox) {
        let info = self.reqs[req.index()];
        let v = self.job_vcpu[info.job as usize];
        if v == NONE {
            let mut x = req.0;
            while x != NONE {
                self.procs[info.job as usize].completions.push_back(ReqId(x));
                x = self.reqs[x as usize].next;
            }
            let t = self.procs[info.job as usize].thread;
            self.notify(now, t, out);
        } else {
            let io = self.vqs[info.vq as usize].iothread as usize;
            self.iots[io].done.push_back(req);
            let t = self.iots[io].thread;
            self.notify(now, t, out);
        }
    }

    pub fn handle(&mut self, now: SimTime, ev: MachineEvent, out: &mut VirtOutbox) {
        match ev {
            MachineEvent::Step { t, gen } => {
                let th = &mut self.threads[t as usize];
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
                        let lock = self.threads[t as usize].waiting;
                        self.locks[lock as usize].stat.sleeps += 1;
                        if let Role::Vcpu(v) = self.threads[t as usize].role {
                            self.count_exit(v, ExitReason::Hlt);
                        }
                        self.leave_cpu(now, t, TState::LockSleep, out);
                        self.threads[t as usize].voluntary += 1;
                    }
                    Cur::SwitchIn | Cur::Granted | Cur::PollDetect => self.run_next(now, t, out),
                    Cur::Idle | Cur::PollIdle | Cur::Settle => {}
                }
            }
            MachineEvent::Wake(t) => {
                if self.threads[t as usize].state == TState::Waking {
                    self.make_runnable(now, t, out);
                }
            }
            MachineEvent::Window(i) => {
                let t = self.iots[i as usize].thread;
                self.notify(now, t, out);
            }
            MachineEvent::Worker { req, cpu } => out.to_host.push(self.to_host(req, cpu)),
        }
    }

    /// Threads that ran out of work decide now, after the simulator handed them anything the
    /// last call produced (a reaped completion lets the job issue its next request).
    pub fn settle(&mut self, now: SimTime, out: &mut VirtOutbox) {
        while let Some(t) = self.pending.pop() {
            if self.threads[t as usize].cur == Cur::Settle {
                self.threads[t as usize].cur = Cur::Idle;
                self.run_next(now, t, out);
            }
        }
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    // ---- scheduling -------------------------------------------------------------------------

    /// Work arrived for thread `t`.
    fn notify(&mut self, now: SimTime, t: u32, out: &mut VirtOutbox) {
        let th = &mut self.threads[t as usize];
        match th.state {
            TState::Blocked => {
                if let Role::IoThread(i) = th.role {
                    // Inside a batch window the I/O thread only wakes for completions or the
                    // window's end.
                    let io = &self.iots[i as usize];
                    if io.window_end.is_some_and(|e| e > now) && io.done.is_empty() {
                        return;
                    }
                }
                th.state = TState::Waking;
                out.events.push((now + self.cpu.wakeup, MachineEvent::Wake(t)));
            }
            TState::OnCpu(_) if th.cur == Cur::PollIdle => {
                th.cur = Cur::PollDetect;
                th.gen += 1;
                out.events.push((now + self.virt.poll_detect, MachineEvent::Step { t, gen: th.gen }));
            }
            _ => {}
        }
    }

    fn make_runnable(&mut self, now: SimTime, t: u32, out: &mut VirtOutbox) {
        let th = &self.threads[t as usize];
        let target = match th.pin {
            Some(h) => (self.hw[h as usize].current == NONE).then_some(h),
            None => {
                let last = th.last_hw as usize;
                if self.hw[last].shared && self.hw[last].current == NONE {
                    Some(last as u16)
                } else {
                    self.hw.iter().position(|h| h.shared && h.current == NONE).map(|h| h as u16)
                }
            }
        };
        match target {
            Some(h) => self.start_on(now, t, h, out),
            None => {
                self.seq += 1;
                let th = &mut self.threads[t as usize];
                th.state = TState::Runnable;
                th.enq_seq = self.seq;
                match th.pin {
                    Some(h) => self.pinned_q[h as usize].push_back(t),
                    None => self.runq.push_back(t),
                }
            }
        }
    }

    fn start_on(&mut self, now: SimTime, t: u32, h: u16, out: &mut VirtOutbox) {
        self.hw[h as usize].current = t;
        let th = &mut self.threads[t as usize];
        th.state = TState::OnCpu(h);
        th.on_since = now;
        th.slice_start = now;
        th.last_hw = h;
        th.cur = Cur::SwitchIn;
        th.gen += 1;
        out.events.push((now + self.cpu.context_switch, MachineEvent::Step { t, gen: th.gen }));
    }

    /// Thread `t` leaves its hardware thread (sleeping, or preempted into `Runnable`).
    fn leave_cpu(&mut self, now: SimTime, t: u32, to: TState, out: &mut VirtOutbox) {
        let th = &mut self.threads[t as usize];
        let TState::OnCpu(h) = th.state else { panic!("thread {t} is not on a CPU") };
        th.oncpu_ns += now.since(th.on_since).0;
        th.state = to;
        th.cur = Cur::Idle;
        th.gen += 1;
        self.hw[h as usize].current = NONE;
        if to == TState::Runnable {
            self.seq += 1;
            th.enq_seq = self.seq;
            match th.pin {
                Some(p) => self.pinned_q[p as usize].push_back(t),
                None => self.runq.push_back(t),
            }
        }
        self.fill(now, h, out);
    }

    /// Hardware thread `h` is free: run the longest-waiting thread that may use it.
    fn fill(&mut self, now: SimTime, h: u16, out: &mut VirtOutbox) {
        let pinned = self.pinned_q[h as usize].front().map(|&t| self.threads[t as usize].enq_seq);
        let shared = if self.hw[h as usize].shared {
            self.runq.front().map(|&t| self.threads[t as usize].enq_seq)
        } else {
            None
        };
        let t = match (pinned, shared) {
            (Some(a), Some(b)) if b < a => self.runq.pop_front(),
            (Some(_), _) => self.pinned_q[h as usize].pop_front(),
            (None, Some(_)) => self.runq.pop_front(),
            (None, None) => None,
        };
        if let Some(t) = t {
            self.start_on(now, t, h, out);
        }
    }

    /// Another hardware thread of `h`'s core runs a thread.
    fn sibling_busy(&self, h: u16) -> bool {
        let per = self.cpu.threads_per_core as usize;
        let core = h as usize / per;
        (core * per..core * per + per).any(|s| s != h as usize && self.hw[s].current != NONE)
    }

    fn someone_waits(&self, h: u16) -> bool {
        !self.pinned_q[h as usize].is_empty() || (self.hw[h as usize].shared && !self.runq.is_empty())
    }

    fn run_next(&mut self, now: SimTime, t: u32, out: &mut VirtOutbox) {
        loop {
            let TState::OnCpu(h) = self.threads[t as usize].state else { return };
            if self.threads[t as usize].ops.is_empty() {
                if !out.to_app.is_empty() {
                    // The application has completions to see first: what it issues next is
                    // this thread's next work.
                    self.threads[t as usize].cur = Cur::Settle;
                    self.pending.push(t);
                    return;
                }
                self.plan(now, t, out);
            }
            let th = &mut self.threads[t as usize];
            let Some(op) = th.ops.pop_front() else {
                if th.poller {
                    th.cur = Cur::PollIdle;
                } else {
                    th.voluntary += 1;
                    self.leave_cpu(now, t, TState::Blocked, out);
                }
                return;
            };
            let expired = now.since(th.slice_start) >= self.cpu.quantum;
            if expired && self.someone_waits(h) {
                let th = &mut self.threads[t as usize];
                th.ops.push_front(op);
                th.involuntary += 1;
                self.leave_cpu(now, t, TState::Runnable, out);
                return;
            }
            match op {
                Op::Burst(ns, act) => {
                    if ns.0 == 0 {
                        self.apply(now, t, act, out);
                        continue;
                    }
                    self.begin_burst(now, t, ns, act, out);
                    return;
                }
                Op::Acquire(l) => {
                    let lock = &mut self.locks[l as usize];
                    if lock.owner == NONE {
                        lock.owner = t;
                        lock.stat.acquisitions += 1;
                        continue;
                    }
                    lock.waiters.push_back((t, now));
                    lock.stat.contended += 1;
                    let th = &mut self.threads[t as usize];
                    th.waiting = l;
                    th.cur = Cur::Spin;
                    th.gen += 1;
                    // A polling thread owns its hardware thread: it spins until granted.
                    if !th.poller {
                        out.events.push((now + self.cpu.spin, MachineEvent::Step { t, gen: th.gen }));
                    }
                    return;
                }
                Op::Release(l) => {
                    self.release(now, t, l, out);
                    continue;
                }
                Op::Exit(reason, userspace) => {
                    let ns = self.exit(t, reason, userspace, out);
                    self.begin_burst(now, t, ns, Act::Nop, out);
                    return;
                }
            }
        }
    }

    fn begin_burst(&mut self, now: SimTime, t: u32, ns: Nanos, act: Act, out: &mut VirtOutbox) {
        let ns = match self.threads[t as usize].state {
            TState::OnCpu(h) if self.sibling_busy(h) => Nanos((ns.0 as f64 * self.cpu.smt_slowdown) as u64),
            _ => ns,
        };
        let th = &mut self.threads[t as usize];
        th.cur = Cur::Burst(act);
        th.gen += 1;
        th.burst_end = now + ns;
        out.events.push((th.burst_end, MachineEvent::Step { t, gen: th.gen }));
    }

    fn release(&mut self, now: SimTime, t: u32, l: u32, out: &mut VirtOutbox) {
        let lock = &mut self.locks[l as usize];
        assert_eq!(lock.owner, t, "mutex released by a thread that does not hold it");
        let Some((w, since)) = lock.waiters.pop_front() else {
            lock.owner = NONE;
            return;
        };
        lock.owner = w;
        let wait = now.since(since).0;
        lock.stat.acquisitions += 1;
        lock.stat.wait_ns += wait;
        lock.stat.wait_max_ns = lock.stat.wait_max_ns.max(wait);
        let th = &mut self.threads[w as usize];
        th.waiting = NONE;
        match th.state {
            TState::OnCpu(_) => {
                th.cur = Cur::Granted;
                th.gen += 1;
                out.events.push((now, MachineEvent::Step { t: w, gen: th.gen }));
            }
            TState::LockSleep => {
                th.state = TState::Waking;
                out.events.push((now + self.cpu.wakeup, MachineEvent::Wake(w)));
                // A vCPU wakes a halted one with an IPI: an x2APIC ICR write, an exit.
                if let (Role::Vcpu(_), Role::Vcpu(_)) = (self.threads[t as usize].role, self.threads[w as usize].role) {
                    let Role::Vcpu(v) = self.threads[t as usize].role else { unreachable!() };
                    self.vms[self.vcpus[v as usize].vm as usize].ipis += 1;
                    self.push_front(t, &[Op::Exit(ExitReason::MsrWrite, false)]);
                }
            }
            s => panic!("mutex waiter {w} in state {s:?}"),
        }
    }

    /// Counts an exit on vCPU thread `t`, holds up the VM's other running vCPUs by its sync
    /// cost, and returns the exiting vCPU's own time.
    fn exit(&mut self, t: u32, reason: ExitReason, userspace: bool, out: &mut VirtOutbox) -> Nanos {
        let Role::Vcpu(v) = self.threads[t as usize].role else { panic!("exit on a thread that is not a vCPU") };
        let vm = self.vcpus[v as usize].vm as usize;
        let c = self.virt.exit_cost(reason);
        self.count_exit(v, reason);
        if c.sync.0 > 0 {
            for k in 0..self.vms[vm].vcpus.len() {
                let u = self.vms[vm].vcpus[k];
                let ut = self.vcpus[u as usize].thread;
                let th = &mut self.threads[ut as usize];
                if u != v && matches!(th.cur, Cur::Burst(_)) {
                    th.gen += 1;
                    th.burst_end += c.sync;
                    out.events.push((th.burst_end, MachineEvent::Step { t: ut, gen: th.gen }));
                    self.vms[vm].exits[reason.index()].sync_ns += c.sync.0;
                }
            }
        }
        let user = if userspace { self.virt.userspace_switch } else { Nanos::ZERO };
        Nanos(c.direct.0 + c.indirect.0 + user.0)
    }

    fn count_exit(&mut self, v: u32, reason: ExitReason) {
        let vm = self.vcpus[v as usize].vm as usize;
        let c = self.virt.exit_cost(reason);
        let st = &mut self.vms[vm].exits[reason.index()];
        st.count += 1;
        st.direct_ns += c.direct.0;
        st.indirect_ns += c.indirect.0;
    }

    // ---- what each role does ----------------------------------------------------------------

    fn plan(&mut self, now: SimTime, t: u32, out: &mut VirtOutbox) {
        match self.threads[t as usize].role {
            Role::Process(p) => self.plan_process(t, p),
            Role::Vcpu(v) => self.plan_vcpu(t, v),
            Role::IoThread(i) => self.plan_iothread(now, t, i, out),
        }
    }

    fn push(&mut self, t: u32, op: Op) {
        self.threads[t as usize].ops.push_back(op);
    }

    /// Ops to run next, before what the thread had planned.
    fn push_front(&mut self, t: u32, ops: &[Op]) {
        let q = &mut self.threads[t as usize].ops;
        for &op in ops.iter().rev() {
            q.push_front(op);
        }
    }

    fn plan_process(&mut self, t: u32, job: u32) {
        let p = &mut self.procs[job as usize];
        if !p.completions.is_empty() {
            let done: Vec<ReqId> = p.completions.drain(..).collect();
            self.push(t, Op::Burst(self.cpu.syscall, Act::Nop));
            for r in done {
                // The block layer's completion work is per (merged) request.
                let ns = if self.reqs[r.index()].member { Nanos::ZERO } else { self.complete };
                self.push(t, Op::Burst(ns, Act::AppDone(r)));
            }
        } else if !p.submits.is_empty() {
            let k = (self.batch[job as usize] as usize).min(p.submits.len());
            let reqs: Vec<ReqId> = p.submits.drain(..k).collect();
            self.push_submit_call(t, &reqs);
        }
    }

    /// One submission system call for `reqs` (all of one job): the call's cost once, then each
    /// request's user-space and block-layer cost, the last one unplugging.
    fn push_submit_call(&mut self, t: u32, reqs: &[ReqId]) {
        let each = self.cpu.app.0 + self.submit.0;
        for (i, &r) in reqs.iter().enumerate() {
            let ns = Nanos(each + if i == 0 { self.cpu.syscall.0 } else { 0 });
            let act = if i + 1 == reqs.len() { Act::Unplug(r) } else { Act::Plug(r) };
            self.push(t, Op::Burst(ns, act));
        }
    }

    fn plan_vcpu(&mut self, t: u32, v: u32) {
        let vc = &mut self.vcpus[v as usize];
        if vc.ext_int {
            vc.ext_int = false;
            self.push(t, Op::Exit(ExitReason::ExtInt, false));
        } else if let Some(q) = vc.irqs.pop_front() {
            self.push(t, Op::Burst(Nanos::ZERO, Act::IrqStart(q)));
        } else if !vc.reaps.is_empty() {
            let done: Vec<ReqId> = vc.reaps.drain(..).collect();
            self.push(t, Op::Burst(self.cpu.syscall, Act::Nop));
            for r in done {
                self.push(t, Op::Burst(Nanos::ZERO, Act::AppDone(r)));
            }
        } else if let Some(&first) = vc.submits.front() {
            // Processes sharing the vCPU each make their own calls.
            let job = self.reqs[first.index()].job;
            let max = self.batch[job as usize] as usize;
            let vc = &mut self.vcpus[v as usize];
            let k = vc.submits.iter().take(max).take_while(|r| self.reqs[r.index()].job == job).count();
            let reqs: Vec<ReqId> = vc.submits.drain(..k).collect();
            self.push_submit_call(t, &reqs);
        } else if let Some(r) = self.take_dispatchable(v) {
            let ops = self.dispatch_ops(r, self.vcpus[v as usize].vq, true);
            self.push_front(t, &ops);
        } else if !self.vcpus[v as usize].hlt_done {
            self.vcpus[v as usize].hlt_done = true;
            self.push(t, Op::Exit(ExitReason::Hlt, false));
            return;
        } else {
            return;
        }
        self.vcpus[v as usize].hlt_done = false;
    }

    /// The head of vCPU `v`'s guest queue, if its virtqueue has a free slot (which it takes).
    fn take_dispatchable(&mut self, v: u32) -> Option<ReqId> {
        let q = self.vcpus[v as usize].vq as usize;
        if self.vcpus[v as usize].gqueue.is_empty() || self.vqs[q].inflight >= self.queue_size() {
            return None;
        }
        self.vqs[q].inflight += 1;
        self.vcpus[v as usize].gqueue.pop_front()
    }

    fn queue_size(&self) -> u32 {
        if self.virt.mode == VirtMode::IdeEmulation {
            1
        } else {
            self.virt.queue_size
        }
    }

    /// The ops that put `r` in virtqueue `q`, ending with a notification when `kick` (virtio
    /// drivers notify once per batch, after its last request).
    fn dispatch_ops(&mut self, r: ReqId, q: u32, kick: bool) -> Vec<Op> {
        self.reqs[r.index()].vq = q;
        if self.virt.mode == VirtMode::IdeEmulation {
            let user = self.virt.emulation == Emulation::Userspace;
            let mut ops = vec![Op::Exit(ExitReason::IoInst, user); self.virt.ide_submit_exits as usize];
            ops.push(Op::Burst(Nanos::ZERO, Act::VqAdded(r)));
            ops.push(Op::Burst(Nanos::ZERO, Act::KickDone(q)));
            return ops;
        }
        let lock = self.vqs[q as usize].lock;
        let mut ops = vec![Op::Acquire(lock), Op::Burst(self.virt.vq_add, Act::VqAdded(r)), Op::Release(lock)];
        if kick {
            ops.push(Op::Burst(Nanos::ZERO, Act::Kick(q)));
        }
        ops
    }

    fn plan_iothread(&mut self, now: SimTime, t: u32, i: u32, out: &mut VirtOutbox) {
        let sw = if self.virt.emulation == Emulation::Userspace { self.virt.userspace_switch } else { Nanos::ZERO };
        let io = &mut self.iots[i as usize];
        if !io.popped.is_empty() {
            let reqs: Vec<ReqId> = io.popped.drain(..).collect();
            self.push(t, Op::Burst(sw, Act::Nop));
            let ns = Nanos(self.submit.0 + self.virt.request_cost.0 / 2);
            let pool = self.virt.aio == Aio::Threads && self.virt.emulation == Emulation::Userspace;
            for r in reqs {
                if pool {
                    // Waking a worker (a futex system call); the worker makes the submission.
                    self.push(t, Op::Burst(Nanos(self.virt.request_cost.0 / 2 + self.cpu.syscall.0), Act::Handoff(r)));
                } else {
                    self.push(t, Op::Burst(ns, Act::HostSubmit(r)));
                }
            }
            return;
        }
        if !io.done.is_empty() {
            let reqs: Vec<ReqId> = io.done.drain(..).collect();
            let mut per_vq: Vec<(u32, u32)> = Vec::new();
            for r in &reqs {
                let q = self.reqs[r.index()].vq;
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
                let lock = self.vqs[q as usize].lock;
                self.push(t, Op::Acquire(lock));
                self.push(t, Op::Burst(Nanos(self.virt.vq_push.0 * n as u64), Act::Pushed(q)));
                self.push(t, Op::Release(lock));
                self.push(t, Op::Burst(sw, Act::RaiseIrq(q)));
            }
            return;
        }
        let io = &self.iots[i as usize];
        let ready: Vec<(u32, usize)> = io
            .vqs
            .iter()
            .map(|&q| (q, self.vqs[q as usize].avail.len()))
            .filter(|&(_, n)| n > 0)
            .collect();
        if ready.is_empty() {
            return;
        }
        if self.virt.mode == VirtMode::Multiqueue && self.virt.batch_window.0 > 0 {
            let io = &mut self.iots[i as usize];
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
        self.iots[i as usize].popping = true;
        for (q, n) in ready {
            let lock = self.vqs[q as usize].lock;
            self.push(t, Op::Acquire(lock));
            self.push(t, Op::Burst(Nanos(self.virt.vq_pop.0 * n as u64), Act::Popped(q)));
            self.push(t, Op::Release(lock));
        }
    }

    fn current_hw(&self, t: u32) -> u16 {
        match self.threads[t as usize].state {
            TState::OnCpu(h) => h,
            s => panic!("thread {t} acts while {s:?}"),
        }
    }

    fn apply(&mut self, now: SimTime, t: u32, act: Act, out: &mut VirtOutbox) {
        match act {
            Act::Nop => {}
            Act::HostSubmit(r) => {
                let cpu = self.current_hw(t);
                out.to_host.push(self.to_host(r, cpu));
            }
            Act::AppDone(r) => out.to_app.push(r),
            Act::Handoff(r) => {
                let cpu = self.current_hw(t);
                let at = now + Nanos(self.cpu.wakeup.0 + self.cpu.context_switch.0 + self.submit.0);
                out.events.push((at, MachineEvent::Worker { req: r, cpu }));
            }
            Act::Plug(r) => self.plug(t, r),
            Act::Unplug(r) => {
                self.plug(t, r);
                self.unplug(t, out);
            }
            Act::VqAdded(r) => {
                let q = self.reqs[r.index()].vq;
                self.vqs[q as usize].avail.push_back(r);
            }
            Act::Kick(q) => {
                let io = self.vqs[q as usize].iothread as usize;
                let it = self.iots[io].thread as usize;
                match self.virt.notify {
                    Notify::Poll => self.notify(now, it as u32, out),
                    Notify::Exit => {
                        // Notifications are off (virtio's VRING_USED_F_NO_NOTIFY) while the I/O
                        // thread is in the queue's handler or collecting a batch.
                        let io = &self.iots[io];
                        if !io.popping && io.window_end.is_none() {
                            let vm = self.vqs[q as usize].vm as usize;
                            self.vms[vm].kicks += 1;
                            self.push_front(
                                t,
                                &[Op::Exit(ExitReason::IoInst, false), Op::Burst(Nanos::ZERO, Act::KickDone(q))],
                            );
                        }
                    }
                }
            }
            Act::KickDone(q) => {
                let io = self.vqs[q as usize].iothread as usize;
                let it = self.iots[io].thread;
                self.notify(now, it, out);
            }
            Act::IrqStart(q) => {
                let mut ops = Vec::new();
                if self.virt.mode == VirtMode::IdeEmulation {
                    let user = self.virt.emulation == Emulation::Userspace;
                    ops.extend(std::iter::repeat_n(Op::Exit(ExitReason::IoInst, user), self.virt.ide_complete_exits as usize));
                }
                self.handler_ops(q, &mut ops);
                self.push_front(t, &ops);
            }
            Act::IrqEnd(q) => {
                let mut ops = Vec::new();
                if !self.vqs[q as usize].used.is_empty() {
                    self.handler_ops(q, &mut ops);
                } else {
                    self.vqs[q as usize].irq_raised = false;
                    if self.virt.completion == Completion::Inject {
                        ops.push(Op::Exit(ExitReason::MsrWrite, false));
                    }
                }
                self.push_front(t, &ops);
            }
            Act::Completed(r) => self.guest_complete(now, t, r, out),
            Act::Popped(q) => {
                let io = self.vqs[q as usize].iothread as usize;
                let vq = &mut self.vqs[q as usize];
                self.iots[io].popped.extend(vq.avail.drain(..));
                self.iots[io].popping = false;
            }
            Act::Reaped(r) => {
                let q = self.reqs[r.index()].vq;
                self.vqs[q as usize].pending_push.push_back(r);
            }
            Act::Pushed(q) => {
                let vq = &mut self.vqs[q as usize];
                let moved: Vec<ReqId> = vq.pending_push.drain(..).collect();
                vq.used.extend(moved);
            }
            Act::RaiseIrq(q) => self.raise_irq(now, q, out),
        }
    }

    /// The plug of thread `t` (a process or a vCPU).
    fn plug_of(&mut self, t: u32) -> &mut Vec<ReqId> {
        match self.threads[t as usize].role {
            Role::Process(p) => &mut self.procs[p as usize].plug,
            Role::Vcpu(v) => &mut self.vcpus[v as usize].plug,
            Role::IoThread(_) => unreachable!("I/O threads do not plug"),
        }
    }

    /// A request joins the calling thread's plug, merged into the last one when adjacent.
    fn plug(&mut self, t: u32, r: ReqId) {
        let last = self.plug_of(t).last().copied();
        if !last.is_some_and(|l| self.try_merge(t, l, r)) {
            self.plug_of(t).push(r);
        }
    }

    fn to_host(&self, r: ReqId, cpu: u16) -> ToHost {
        let info = self.reqs[r.index()];
        ToHost { req: r, offset: info.offset, len: info.len, cpu }
    }

    /// The end of a submission call: the plug's requests go on — to the host block layer on
    /// bare metal, through the guest's block layer to the virtqueue in a VM.
    fn unplug(&mut self, t: u32, out: &mut VirtOutbox) {
        match self.threads[t as usize].role {
            Role::Process(p) => {
                let cpu = self.current_hw(t);
                for r in std::mem::take(&mut self.procs[p as usize].plug) {
                    out.to_host.push(self.to_host(r, cpu));
                }
            }
            Role::Vcpu(v) => {
                let plugged = std::mem::take(&mut self.vcpus[v as usize].plug);
                let q = self.vcpus[v as usize].vq;
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

    /// Merges `r` into `last` (and its chain) when they are adjacent requests of one direction
    /// within `max_merge`, counting the merge for thread `t`'s block layer (its VM's, or the
    /// host's for a process). Trims and flushes are never merged.
    fn try_merge(&mut self, t: u32, last: ReqId, r: ReqId) -> bool {
        let (a, b) = (self.reqs[last.index()], self.reqs[r.index()]);
        let mergeable = matches!(b.op, Some(IoOp::Read | IoOp::Write));
        if a.op != b.op || !mergeable || a.offset + a.len != b.offset || a.len + b.len > self.virt.max_merge_bytes {
            return false;
        }
        self.reqs[r.index()].member = true;
        let lead = &mut self.reqs[last.index()];
        lead.len += b.len;
        let tail = if lead.tail == NONE { last } else { ReqId(lead.tail) };
        // `r` may lead a chain of its own (merged in a plug, then again in the guest queue):
        // the new tail is its chain's.
        lead.tail = if b.tail == NONE { r.0 } else { b.tail };
        if lead.next == NONE {
            lead.next = r.0;
        } else {
            self.reqs[tail.index()].next = r.0;
        }
        match self.threads[t as usize].role {
            Role::Vcpu(v) => self.vms[self.vcpus[v as usize].vm as usize].merges += 1,
            _ => self.host_merges += 1,
        }
        true
    }

    /// The guest's block layer: `r` may go to the virtqueue (taking a slot; returns false) when
    /// the queue has room and nothing waits before it; otherwise it waits (returns true),
    /// merged into the last waiting request when adjacent.
    fn guest_block_layer(&mut self, t: u32, v: u32, r: ReqId) -> bool {
        let q = self.vcpus[v as usize].vq;
        if self.vcpus[v as usize].gqueue.is_empty() && self.vqs[q as usize].inflight < self.queue_size() {
            self.vqs[q as usize].inflight += 1;
            return false;
        }
        if let Some(&last) = self.vcpus[v as usize].gqueue.back() {
            if self.try_merge(t, last, r) {
                return true;
            }
        }
        self.vcpus[v as usize].gqueue.push_back(r);
        true
    }

    fn handler_ops(&mut self, q: u32, ops: &mut Vec<Op>) {
        let used: Vec<ReqId> = self.vqs[q as usize].used.drain(..).collect();
        for r in used {
            ops.push(Op::Burst(self.complete, Act::Completed(r)));
        }
        ops.push(Op::Burst(Nanos::ZERO, Act::IrqEnd(q)));
    }

    fn raise_irq(&mut self, now: SimTime, q: u32, out: &mut VirtOutbox) {
        let vq = &mut self.vqs[q as usize];
        if vq.used.is_empty() || vq.irq_raised {
            return;
        }
        vq.irq_raised = true;
        let v = vq.irq_vcpu;
        let vm = vq.vm as usize;
        self.vms[vm].interrupts += 1;
        self.vcpus[v as usize].irqs.push_back(q);
        self.deliver(now, v, self.virt.completion == Completion::Exitless, out);
    }

    /// An interrupt for vCPU `v`: a running vCPU takes an EXT_INT exit unless delivery is
    /// exitless; a halted one is woken.
    fn deliver(&mut self, now: SimTime, v: u32, exitless: bool, out: &mut VirtOutbox) {
        let t = self.vcpus[v as usize].thread;
        self.vcpus[v as usize].hlt_done = false;
        match self.threads[t as usize].state {
            TState::OnCpu(_) => {
                if !exitless {
                    self.vcpus[v as usize].ext_int = true;
                }
            }
            _ => self.notify(now, t, out),
        }
    }

    fn guest_complete(&mut self, now: SimTime, t: u32, r: ReqId, out: &mut VirtOutbox) {
        let Role::Vcpu(v) = self.threads[t as usize].role else { unreachable!() };
        let q = self.reqs[r.index()].vq;
        self.vqs[q as usize].inflight -= 1;
        self.restart_queue(now, q, v, out);
        let mut x = r.0;
        while x != NONE {
            let info = self.reqs[x as usize];
            let u = self.job_vcpu[info.job as usize];
            let first = self.vcpus[u as usize].reaps.is_empty();
            self.vcpus[u as usize].reaps.push_back(ReqId(x));
            if u != v && first {
                // Waking the process on another vCPU: an IPI (an x2APIC ICR write).
                let vm = self.vcpus[v as usize].vm as usize;
                self.vms[vm].ipis += 1;
                self.push_front(t, &[Op::Exit(ExitReason::MsrWrite, false)]);
                self.deliver(now, u, false, out);
            }
            x = info.next;
        }
    }

    /// A virtqueue slot freed: let a vCPU with waiting requests dispatch one.
    fn restart_queue(&mut self, now: SimTime, q: u32, current: u32, out: &mut VirtOutbox) {
        let vq = &mut self.vqs[q as usize];
        let n = vq.vcpus.len();
        for k in 0..n {
            let u = vq.vcpus[(vq.rr + k) % n];
            if !self.vcpus[u as usize].gqueue.is_empty() {
                vq.rr = (vq.rr + k + 1) % n;
                if u != current {
                    let ut = self.vcpus[u as usize].thread;
                    self.vcpus[u as usize].hlt_done = false;
                    self.notify(now, ut, out);
                }
                return;
            }
        }
    }

    // ---- results ----------------------------------------------------------------------------

    pub fn check_invariants(&self) {
        for (h, hw) in self.hw.iter().enumerate() {
            if hw.current != NONE {
                assert_eq!(self.threads[hw.current as usize].state, TState::OnCpu(h as u16), "hardware thread {h} out of sync");
            }
        }
        for (t, th) in self.threads.iter().enumerate() {
            if let TState::OnCpu(h) = th.state {
                assert_eq!(self.hw[h as usize].current, t as u32, "thread {t} on a hardware thread that runs another");
                if let Some(p) = th.pin {
                    assert_eq!(p, h, "pinned thread {t} runs elsewhere");
                }
            }
        }
        let qs = self.queue_size();
        for (i, vq) in self.vqs.iter().enumerate() {
            assert!(vq.inflight <= qs, "virtqueue {i} holds {} requests, more than its {qs}", vq.inflight);
            assert!(vq.avail.len() + vq.used.len() + vq.pending_push.len() <= vq.inflight as usize, "virtqueue {i} lost count");
        }
        for (l, lock) in self.locks.iter().enumerate() {
            assert!(lock.owner != NONE || lock.waiters.is_empty(), "mutex {l} free with waiters");
        }
    }

    pub fn result(&self, now: SimTime) -> VirtResult {
        let elapsed = now.0.max(1) as f64;
        let oncpu = |th: &Thread| {
            th.oncpu_ns + if let TState::OnCpu(_) = th.state { now.since(th.on_since).0 } else { 0 }
        };
        let stat = |role: &str, filter: &dyn Fn(&Thread) -> bool| {
            let mut s = ThreadStat { role: role.to_string(), ..Default::default() };
            for th in self.threads.iter().filter(|th| filter(th)) {
                s.threads += 1;
                s.cpu_ns += oncpu(th);
                s.voluntary_switches += th.voluntary;
                s.involuntary_switches += th.involuntary;
            }
            s.cpu_fraction = s.cpu_ns as f64 / elapsed;
            s
        };
        let processes = stat("process", &|th| matches!(th.role, Role::Process(_)));
        let total_switches: u64 = self.threads.iter().map(|t| t.voluntary + t.involuntary).sum();
        let busy: u64 = self.threads.iter().map(oncpu).sum();
        let vms = self
            .vms
            .iter()
            .enumerate()
            .map(|(i, vm)| {
                let vm_id = i as u32;
                let vcpu = stat("vcpu", &|th| matches!(th.role, Role::Vcpu(v) if self.vcpus[v as usize].vm == vm_id));
                let io = stat(
                    if self.virt.notify == Notify::Poll { "poll" } else { "iothread" },
                    &|th| matches!(th.role, Role::IoThread(k) if self.iots[k as usize].vm == vm_id),
                );
                let mut locks = LockStat::default();
                for vq in self.vqs.iter().filter(|q| q.vm == vm_id) {
                    locks.absorb(&self.locks[vq.lock as usize].stat);
                }
                let mut exits: Vec<ExitStat> = vm.exits.to_vec();
                for (e, r) in exits.iter_mut().zip(ExitReason::ALL) {
                    e.reason = r.name().to_string();
                    e.per_sec = e.count as f64 * 1e9 / elapsed;
                }
                let switches = vcpu.voluntary_switches + vcpu.involuntary_switches + io.voluntary_switches + io.involuntary_switches;
                VmResult {
                    tenant: vm.tenant,
                    exits_total: exits.iter().map(|e| e.count).sum(),
                    exits,
                    kicks: vm.kicks,
                    interrupts: vm.interrupts,
                    ipis: vm.ipis,
                    merges: vm.merges,
                    locks,
                    context_switches: switches,
                    context_switches_per_sec: switches as f64 * 1e9 / elapsed,
                    poll_cpu_ns: if self.virt.notify == Notify::Poll { io.cpu_ns } else { 0 },
                    threads: vec![vcpu, io],
                }
            })
            .collect();
        VirtResult {
            mode: self.virt.mode,
            notify: self.virt.mode.is_vm().then_some(self.virt.notify),
            emulation: self.virt.mode.is_vm().then_some(self.virt.emulation),
            completion: self.virt.mode.is_vm().then_some(self.virt.completion),
            hw_threads: self.hw.len() as u32,
            cpu_utilisation: busy as f64 / (elapsed * self.hw.len() as f64),
            context_switches: total_switches,
            context_switches_per_sec: total_switches as f64 * 1e9 / elapsed,
            processes: (processes.threads > 0).then_some(processes),
            host_merges: self.host_merges,
            vms,
        }
    }
}
