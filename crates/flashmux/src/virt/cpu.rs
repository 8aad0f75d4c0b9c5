//! The host CPU: hardware threads, the scheduler that time-shares them among software threads,
//! and the mutexes those threads take.
//!
//! # Model
//! A sleeping thread that gets work is woken: runnable `wakeup` later (eventfd, futex, IPI),
//! then running `context_switch` later once a hardware thread it may use is free. Each hardware
//! thread has its own run queue (FIFO), as each CPU has in Linux. A pinned thread waits in its
//! own hardware thread's queue. An unpinned thread goes back to the hardware thread it last ran
//! on if that one is free, else to the lowest-numbered free shared one (shared: not a polling
//! thread's own), else it waits in the queue of the least loaded shared one. A hardware
//! thread's *load* is what Linux's balancer weighs: the runnable averages (PELT: the share of
//! recent time a thread was running or waiting to run, a moment's weight halving every 32.8 ms)
//! of the threads whose CPU it is — running there, waiting there, or asleep after running there
//! last. So threads pinned to a hardware thread and often busy keep unpinned ones away from it,
//! even while they sleep. A freed hardware thread runs the longest-waiting thread of its own
//! queue; with none, it pulls the longest-waiting unpinned thread of the most loaded queue that
//! has one (Linux's balancing as a CPU goes idle). A thread that has run for a `quantum` yields
//! at its next op when another thread waits for its hardware thread (an involuntary switch);
//! one out of work sleeps (a voluntary one). A burst that starts while the other hardware
//! thread of its core is busy takes `smt_slowdown` times longer.
//!
//! Mutexes are FIFO ([`Mutex`]): a waiter spins for `spin` on its hardware thread, then sleeps
//! (a polling thread never sleeps: it spins until granted); the release hands the mutex to the
//! oldest waiter, which continues at once if it is still spinning or wakes (`wakeup`) if it
//! slept — holding the mutex all the while.
//!
//! # Example (default costs: quantum 3 ms, context switch 1.5 us, wake-up 4 us, spin 1 us)
//! One hardware thread, thread A running a 5 ms burst from t = 0, thread B woken at t = 0:
//! B is runnable at 4 us and waits; A's burst ends at 1.5 us + 5 ms, past its quantum, so A
//! yields at its next op and B runs `context_switch` later: at 5.003 ms. A waiter that starts
//! spinning at t = 0 on a mutex released at 0.7 us has it at once, still spinning; released at
//! 10 us, the mutex finds the waiter asleep since 1 us: it owns the mutex from 10 us but runs
//! only at 15.5 us (wake-up 4 us, switch-in 1.5 us).
//!
//! Parameters (`[host.cpu]`): `cores`, `threads_per_core`, `quantum`, `context_switch`, `wakeup`,
//! `spin` (ns), `smt_slowdown` (a factor).
//! Source: Linux CFS (wake-up, per-CPU run queues, the minimum granularity as the quantum),
//! its load tracking (PELT, `kernel/sched/pelt.c`: 1,024 us periods, `y^32 = 1/2`) and
//! balancing (`select_task_rq_fair`, `newidle_balance`), futex mutexes; paper A, section on the
//! Baseline's lock contention.
//! Simplified: the balancer's loads are plain runnable averages (no task weights, no cgroup
//! hierarchy, no scheduling domains), the queue is FIFO instead of ordered by virtual runtime,
//! and a woken thread does not preempt the running one (CFS's wake-up preemption; measured
//! against paper A in docs/EXPERIMENTS.md §5).

use super::ids::{HwThreadId, IdVec, Idx, LockId, ThreadId};
use super::lock::Mutex;
use super::machine::MachineEvent;
use super::thread::{Act, Cur, Op, Role, TState, Thread};
use super::CpuConfig;
use crate::units::{Nanos, SimTime};
use std::collections::VecDeque;

/// Events a CPU call schedules, in the order they must enter the event queue.
pub(super) type Events = Vec<(SimTime, MachineEvent)>;

struct Hw {
    current: Option<ThreadId>,
    /// Threads that are not pinned may run here (false: a polling thread's own).
    shared: bool,
    /// Its run queue: the threads waiting for it, in the order they came.
    queue: VecDeque<ThreadId>,
}

pub(super) struct Cpu {
    cfg: CpuConfig,
    hw: IdVec<HwThreadId, Hw>,
    threads: IdVec<ThreadId, Thread>,
    locks: IdVec<LockId, Mutex>,
}

impl Cpu {
    pub fn new(cfg: CpuConfig) -> Cpu {
        let h = cfg.hw_threads() as usize;
        assert!(h > 0 && cfg.threads_per_core > 0, "a CPU needs hardware threads");
        Cpu {
            hw: (0..h).map(|_| Hw { current: None, shared: true, queue: VecDeque::new() }).collect(),
            threads: IdVec::new(),
            locks: IdVec::new(),
            cfg,
        }
    }

    pub fn cfg(&self) -> &CpuConfig {
        &self.cfg
    }

    pub fn hw_threads(&self) -> usize {
        self.hw.len()
    }

    /// Hardware thread `h` becomes a polling thread's own: unpinned threads no longer run there.
    pub fn reserve(&mut self, h: HwThreadId) {
        self.hw[h].shared = false;
    }

    pub fn shared_hws(&self) -> Vec<HwThreadId> {
        self.hw.iter_enumerated().filter(|(_, hw)| hw.shared).map(|(h, _)| h).collect()
    }

    pub fn add_thread(&mut self, role: Role, pin: Option<HwThreadId>, poller: bool) -> ThreadId {
        if let Some(h) = pin {
            assert!(h.index() < self.hw.len(), "{role:?} pinned to {h:?}, past the last hardware thread");
        }
        self.threads.push(Thread::new(role, pin, poller))
    }

    pub fn add_lock(&mut self) -> LockId {
        self.locks.push(Mutex::default())
    }

    pub fn thread(&self, t: ThreadId) -> &Thread {
        &self.threads[t]
    }

    pub fn thread_mut(&mut self, t: ThreadId) -> &mut Thread {
        &mut self.threads[t]
    }

    pub fn threads(&self) -> &IdVec<ThreadId, Thread> {
        &self.threads
    }

    pub fn lock(&self, l: LockId) -> &Mutex {
        &self.locks[l]
    }

    /// The hardware thread `t` runs on, if it runs.
    pub fn on_hw(&self, t: ThreadId) -> Option<HwThreadId> {
        match self.threads[t].state {
            TState::OnCpu(h) => Some(h),
            _ => None,
        }
    }

    /// The hardware thread of `t`, which must be running (it is acting).
    pub fn current_hw(&self, t: ThreadId) -> HwThreadId {
        match self.threads[t].state {
            TState::OnCpu(h) => h,
            s => panic!("thread {t:?} acts while {s:?}"),
        }
    }

    /// Work arrived for thread `t`: a sleeping thread wakes; an idle polling thread notices it
    /// `poll_detect` later.
    pub fn wake(&mut self, now: SimTime, t: ThreadId, poll_detect: Nanos, ev: &mut Events) {
        let th = &mut self.threads[t];
        match th.state {
            TState::Blocked => {
                th.set_state(now, TState::Waking);
                ev.push((now + self.cfg.wakeup, MachineEvent::Wake(t)));
            }
            TState::OnCpu(_) if th.cur == Cur::PollIdle => {
                th.cur = Cur::PollDetect;
                th.gen += 1;
                ev.push((now + poll_detect, MachineEvent::Step { t, gen: th.gen }));
            }
            _ => {}
        }
    }

    /// Thread `t` is runnable: on a free hardware thread it may use, or in a run queue. A
    /// pinned thread waits for its own hardware thread; an unpinned one takes the one it last ran
    /// on if free, else the lowest-numbered free shared one, else waits in the run queue of the
    /// least loaded shared one (its last one among equals), as Linux's wake-up balancing places
    /// a task.
    pub fn make_runnable(&mut self, now: SimTime, t: ThreadId, ev: &mut Events) {
        let th = &self.threads[t];
        let target = match th.pin {
            Some(h) => self.hw[h].current.is_none().then_some(h),
            None => {
                let last = th.last_hw;
                if self.hw[last].shared && self.hw[last].current.is_none() {
                    Some(last)
                } else {
                    self.hw.iter_enumerated().find(|(_, hw)| hw.shared && hw.current.is_none()).map(|(h, _)| h)
                }
            }
        };
        match target {
            Some(h) => self.start_on(now, t, h, ev),
            None => {
                let h = self.threads[t].pin.unwrap_or_else(|| self.least_loaded(now, t));
                let th = &mut self.threads[t];
                th.set_state(now, TState::Runnable);
                th.last_hw = h;
                self.hw[h].queue.push_back(t);
            }
        }
    }

    /// Each hardware thread's load at `now`, as Linux's balancer weighs a CPU's: the runnable
    /// averages of the threads whose CPU it is (those that run or wait there, and the sleeping
    /// ones that last did).
    fn loads(&self, now: SimTime) -> IdVec<HwThreadId, f64> {
        let mut load: IdVec<HwThreadId, f64> = self.hw.iter().map(|_| 0.0).collect();
        for th in self.threads.iter() {
            load[th.last_hw] += th.runnable_avg(now);
        }
        load
    }

    /// The shared hardware thread with the least load without thread `t`: the one `t` last ran
    /// on among equals, else the lowest-numbered.
    fn least_loaded(&self, now: SimTime, t: ThreadId) -> HwThreadId {
        let mut load = self.loads(now);
        let last = self.threads[t].last_hw;
        load[last] -= self.threads[t].runnable_avg(now);
        let mut best = last;
        for (h, hw) in self.hw.iter_enumerated() {
            if hw.shared && (!self.hw[best].shared || load[h] < load[best]) {
                best = h;
            }
        }
        best
    }

    fn start_on(&mut self, now: SimTime, t: ThreadId, h: HwThreadId, ev: &mut Events) {
        debug_assert!(self.hw[h].current.is_none(), "{h:?} is busy");
        self.hw[h].current = Some(t);
        let th = &mut self.threads[t];
        th.set_state(now, TState::OnCpu(h));
        th.on_since = now;
        th.slice_start = now;
        th.last_hw = h;
        th.cur = Cur::SwitchIn;
        th.gen += 1;
        ev.push((now + self.cfg.context_switch, MachineEvent::Step { t, gen: th.gen }));
    }

    /// Thread `t` leaves its hardware thread (sleeping, or preempted into `Runnable`).
    fn leave_cpu(&mut self, now: SimTime, t: ThreadId, to: TState, ev: &mut Events) {
        let th = &mut self.threads[t];
        let TState::OnCpu(h) = th.state else { panic!("thread {t:?} is not on a CPU") };
        th.oncpu_ns += now.since(th.on_since).0;
        th.set_state(now, to);
        th.cur = Cur::Idle;
        th.gen += 1;
        self.hw[h].current = None;
        if to == TState::Runnable {
            self.hw[h].queue.push_back(t);
        }
        self.fill(now, h, ev);
    }

    /// Thread `t` is out of work and sleeps until it is woken.
    pub fn block(&mut self, now: SimTime, t: ThreadId, ev: &mut Events) {
        self.threads[t].voluntary += 1;
        self.leave_cpu(now, t, TState::Blocked, ev);
    }

    /// Hardware thread `h` is free: it runs the longest-waiting thread of its own run queue;
    /// with none, a shared one pulls the longest-waiting unpinned thread of the most loaded
    /// other run queue (Linux's balancing when a CPU goes idle).
    fn fill(&mut self, now: SimTime, h: HwThreadId, ev: &mut Events) {
        let t = match self.hw[h].queue.pop_front() {
            Some(t) => Some(t),
            None if self.hw[h].shared => self.pull(now),
            None => None,
        };
        if let Some(t) = t {
            self.start_on(now, t, h, ev);
        }
    }

    /// Takes the longest-waiting unpinned thread out of the most loaded run queue that has one
    /// (the lowest-numbered among equals).
    fn pull(&mut self, now: SimTime) -> Option<ThreadId> {
        let unpinned = |hw: &Hw| hw.queue.iter().position(|&t| self.threads[t].pin.is_none());
        // Most frees find nothing to pull: the loads are weighed only when there is something.
        if !self.hw.iter().any(|hw| unpinned(hw).is_some()) {
            return None;
        }
        let load = self.loads(now);
        let mut from: Option<(HwThreadId, usize)> = None;
        for (h, hw) in self.hw.iter_enumerated() {
            if let Some(i) = unpinned(hw) {
                if from.is_none_or(|(f, _)| load[h] > load[f]) {
                    from = Some((h, i));
                }
            }
        }
        let (h, i) = from?;
        self.hw[h].queue.remove(i)
    }

    /// Another hardware thread of `h`'s core runs a thread.
    fn sibling_busy(&self, h: HwThreadId) -> bool {
        let per = self.cfg.threads_per_core as usize;
        let core = h.index() / per;
        self.hw.iter_enumerated().skip(core * per).take(per).any(|(s, hw)| s != h && hw.current.is_some())
    }

    /// If `t` has used up its quantum and another thread waits for its hardware thread, `t`
    /// yields before `op`, which it runs when it is back (true).
    pub fn preempt(&mut self, now: SimTime, t: ThreadId, op: Op, ev: &mut Events) -> bool {
        let TState::OnCpu(h) = self.threads[t].state else { panic!("thread {t:?} runs off its CPU") };
        let expired = now.since(self.threads[t].slice_start) >= self.cfg.quantum;
        let someone_waits = !self.hw[h].queue.is_empty();
        if !(expired && someone_waits) {
            return false;
        }
        let th = &mut self.threads[t];
        th.ops.push_front(op);
        th.involuntary += 1;
        self.leave_cpu(now, t, TState::Runnable, ev);
        true
    }

    /// Thread `t` runs a burst of `ns` (longer if its core's other hardware thread is busy),
    /// then `act`.
    pub fn begin_burst(&mut self, now: SimTime, t: ThreadId, ns: Nanos, act: Act, ev: &mut Events) {
        let ns = match self.threads[t].state {
            TState::OnCpu(h) if self.sibling_busy(h) => Nanos((ns.0 as f64 * self.cfg.smt_slowdown) as u64),
            _ => ns,
        };
        let th = &mut self.threads[t];
        th.cur = Cur::Burst(act);
        th.gen += 1;
        th.burst_end = now + ns;
        ev.push((th.burst_end, MachineEvent::Step { t, gen: th.gen }));
    }

    /// Holds up thread `t`'s current burst by `by` (another vCPU's exit): false if it is not in
    /// a burst.
    pub fn delay_burst(&mut self, t: ThreadId, by: Nanos, ev: &mut Events) -> bool {
        let th = &mut self.threads[t];
        if !matches!(th.cur, Cur::Burst(_)) {
            return false;
        }
        th.gen += 1;
        th.burst_end += by;
        ev.push((th.burst_end, MachineEvent::Step { t, gen: th.gen }));
        true
    }

    /// Thread `t` asks for mutex `l`: true if it has it and goes on; false if it spins, then
    /// sleeps (a polling thread spins until it is granted).
    pub fn acquire(&mut self, now: SimTime, t: ThreadId, l: LockId, ev: &mut Events) -> bool {
        if self.locks[l].acquire(t, now) {
            return true;
        }
        let th = &mut self.threads[t];
        th.waiting = Some(l);
        th.cur = Cur::Spin;
        th.gen += 1;
        if !th.poller {
            ev.push((now + self.cfg.spin, MachineEvent::Step { t, gen: th.gen }));
        }
        false
    }

    /// A spinning waiter spun long enough: it sleeps until the mutex is handed to it.
    pub fn sleep_on_lock(&mut self, now: SimTime, t: ThreadId, ev: &mut Events) {
        let l = self.threads[t].waiting.expect("a spinning thread waits for a mutex");
        self.locks[l].count_sleep();
        self.leave_cpu(now, t, TState::LockSleep, ev);
        self.threads[t].voluntary += 1;
    }

    /// Thread `t` releases mutex `l`, handing it to the oldest waiter: a spinning one goes on
    /// now, a sleeping one is woken — and returned, since waking it may cost `t` an IPI.
    pub fn release(&mut self, now: SimTime, t: ThreadId, l: LockId, ev: &mut Events) -> Option<ThreadId> {
        let w = self.locks[l].release(t, now)?;
        let th = &mut self.threads[w];
        debug_assert_eq!(th.waiting, Some(l));
        th.waiting = None;
        match th.state {
            TState::OnCpu(_) => {
                th.cur = Cur::Granted;
                th.gen += 1;
                ev.push((now, MachineEvent::Step { t: w, gen: th.gen }));
                None
            }
            TState::LockSleep => {
                th.set_state(now, TState::Waking);
                ev.push((now + self.cfg.wakeup, MachineEvent::Wake(w)));
                Some(w)
            }
            s => panic!("mutex waiter {w:?} in state {s:?}"),
        }
    }

    /// Busy hardware-thread time of all threads up to `now`.
    pub fn busy_ns(&self, now: SimTime) -> u64 {
        self.threads.iter().map(|th| th.oncpu_ns(now)).sum()
    }

    pub fn check_invariants(&self) {
        for (h, hw) in self.hw.iter_enumerated() {
            if let Some(t) = hw.current {
                assert_eq!(self.threads[t].state, TState::OnCpu(h), "hardware thread {h:?} out of sync");
            }
        }
        for (t, th) in self.threads.iter_enumerated() {
            if let TState::OnCpu(h) = th.state {
                assert_eq!(self.hw[h].current, Some(t), "thread {t:?} on a hardware thread that runs another");
                if let Some(p) = th.pin {
                    assert_eq!(p, h, "pinned thread {t:?} runs elsewhere");
                }
            }
        }
        for (h, hw) in self.hw.iter_enumerated() {
            for &t in &hw.queue {
                let th = &self.threads[t];
                assert_eq!(th.state, TState::Runnable, "thread {t:?} queued at {h:?} is not runnable");
                assert_eq!(th.last_hw, h, "thread {t:?} queued at {h:?} counts as another's load");
                assert!(th.pin.is_none_or(|p| p == h), "pinned thread {t:?} queued at {h:?}");
            }
        }
        let queued: usize = self.hw.iter().map(|hw| hw.queue.len()).sum();
        let runnable = self.threads.iter().filter(|th| th.state == TState::Runnable).count();
        assert_eq!(queued, runnable, "a runnable thread is in no run queue, or in two");
        for (l, lock) in self.locks.iter_enumerated() {
            lock.check_invariants(l.index());
        }
    }
}

#[cfg(test)]
mod tests;
