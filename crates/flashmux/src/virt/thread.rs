//! A software thread of the host: its role, the queue of ops it runs, and its scheduling state.
//!
//! # Model
//! Every thread runs a queue of *ops*: a CPU burst (a length of hardware-thread time ending in
//! an action), a mutex acquire or release, or a VM exit. When the queue is empty the thread's
//! role plans the next ops from its state (`roles.rs`). Its state says where it is: blocked
//! (asleep with nothing to do), asleep on a mutex, waking (the `wakeup` latency), runnable (in a
//! run queue) or on a hardware thread; `cur` says what its current activity on the hardware
//! thread is, and `gen` numbers that activity, so that a `Step` event of one it has left (a
//! burst delayed by another vCPU's exit, a preemption) is recognised as stale and ignored.
//!
//! Example: a process submitting one 4 KiB read with default costs plans one op,
//! `Burst(syscall 0.5us + app 0.4us + submit, Unplug(r))`; at its end the request leaves the plug
//! for the host block layer, the queue is empty, the role has nothing more to plan and the
//! thread sleeps (a voluntary switch).
//!
//! Parameters: none of its own (the costs are `CpuConfig`'s and `VirtConfig`'s).

use super::ids::{HwThreadId, IoThreadId, LockId, ProcId, VcpuId, VqId};
use super::ExitReason;
use crate::units::{Nanos, ReqId, SimTime};
use std::collections::VecDeque;

/// PELT's half-life: 32 periods of 1,024 us (Linux's `y^32 = 1/2`).
pub(super) const PELT_HALF_LIFE: Nanos = Nanos(32 * 1_024_000);

/// What a burst does when it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Act {
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
    Kick(VqId),
    /// The host learns of new requests (eventfd).
    KickDone(VqId),
    /// The guest's interrupt handler for the virtqueue starts.
    IrqStart(VqId),
    /// The guest completed a used entry (a request, with those merged into it).
    Completed(ReqId),
    /// The handler looks at the used ring again before it returns.
    IrqEnd(VqId),
    /// The I/O thread took the available requests off the virtqueue.
    Popped(VqId),
    /// The I/O thread reaped the host's completion of the request.
    Reaped(ReqId),
    /// The I/O thread put its reaped completions in the used ring.
    Pushed(VqId),
    /// The I/O thread signals the guest (irqfd).
    RaiseIrq(VqId),
}

/// One step of a thread's work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Burst(Nanos, Act),
    Acquire(LockId),
    Release(LockId),
    /// A VM exit; `userspace`: emulated in the QEMU process.
    Exit(ExitReason, bool),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TState {
    Blocked,
    /// Sleeping on a mutex: only its release wakes it.
    LockSleep,
    Waking,
    Runnable,
    OnCpu(HwThreadId),
}

/// What a thread on a hardware thread is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cur {
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
pub(super) enum Role {
    Process(ProcId),
    Vcpu(VcpuId),
    IoThread(IoThreadId),
}

pub(super) struct Thread {
    pub role: Role,
    pub pin: Option<HwThreadId>,
    /// A polling thread: it owns its hardware thread and spins there when idle.
    pub poller: bool,
    pub state: TState,
    /// The mutex it waits for, while spinning or sleeping on one.
    pub waiting: Option<LockId>,
    pub cur: Cur,
    pub gen: u32,
    pub ops: VecDeque<Op>,
    pub burst_end: SimTime,
    pub on_since: SimTime,
    /// When it last started running: its slice so far is the time since (CFS's
    /// `prev_sum_exec_runtime`).
    pub slice_start: SimTime,
    /// CFS's virtual runtime: ns of hardware-thread time it has run (every thread has nice 0's
    /// weight), moved relative to a run queue's `min_vruntime` when it changes queues, and
    /// raised on a wake-up to no less than the queue's `min_vruntime - latency/2` (`cpu.rs`).
    pub vruntime: i64,
    /// Its running time up to here is in `vruntime` (CFS's `exec_start`).
    pub vr_since: SimTime,
    /// The hardware thread it last ran on or waits for (Linux's task CPU).
    pub last_hw: HwThreadId,
    /// Its runnable average as of `avg_at` (below).
    avg: f64,
    avg_at: SimTime,
    pub oncpu_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
}

impl Thread {
    pub fn new(role: Role, pin: Option<HwThreadId>, poller: bool) -> Thread {
        Thread {
            role,
            pin,
            poller,
            state: TState::Blocked,
            waiting: None,
            cur: Cur::Idle,
            gen: 0,
            ops: VecDeque::new(),
            burst_end: SimTime::ZERO,
            on_since: SimTime::ZERO,
            slice_start: SimTime::ZERO,
            vruntime: 0,
            vr_since: SimTime::ZERO,
            last_hw: pin.unwrap_or_default(),
            avg: 0.0,
            avg_at: SimTime::ZERO,
            oncpu_ns: 0,
            voluntary: 0,
            involuntary: 0,
        }
    }

    /// Ops to run next, before what the thread had planned.
    pub fn push_front(&mut self, ops: &[Op]) {
        for &op in ops.iter().rev() {
            self.ops.push_front(op);
        }
    }

    /// Linux's runnable average (PELT): the share of recent time it was running or waiting to
    /// run, each moment weighted by how recent it is (a moment's weight halves every
    /// [`PELT_HALF_LIFE`]).
    pub fn runnable_avg(&self, now: SimTime) -> f64 {
        let decay = 0.5f64.powf(now.since(self.avg_at).0 as f64 / PELT_HALF_LIFE.0 as f64);
        let runnable = matches!(self.state, TState::Runnable | TState::OnCpu(_));
        self.avg * decay + if runnable { 1.0 - decay } else { 0.0 }
    }

    /// It enters state `s` at `now`.
    pub fn set_state(&mut self, now: SimTime, s: TState) {
        self.avg = self.runnable_avg(now);
        self.avg_at = now;
        self.state = s;
    }

    /// Time on a hardware thread up to `now`, the current stretch included.
    pub fn oncpu_ns(&self, now: SimTime) -> u64 {
        self.oncpu_ns + if let TState::OnCpu(_) = self.state { now.since(self.on_since).0 } else { 0 }
    }
}
