//! The host CPU: hardware threads, the scheduler that time-shares them among software threads,
//! and the mutexes those threads take.
//!
//! # Model
//! A sleeping thread that gets work is woken: runnable `wakeup` later (eventfd, futex, IPI),
//! then running `context_switch` later once a hardware thread it may use is free. Each hardware
//! thread has its own run queue, as each CPU has in Linux. A pinned thread waits in its own
//! hardware thread's queue. An unpinned thread goes back to the hardware thread it last ran on
//! if that one is free, else to the lowest-numbered free shared one (shared: not a polling
//! thread's own), else it waits in the queue of the least loaded shared one. A hardware
//! thread's *load* is what Linux's balancer weighs: the runnable averages (PELT: the share of
//! recent time a thread was running or waiting to run, a moment's weight halving every 32.8 ms)
//! of the threads whose CPU it is — running there, waiting there, or asleep after running there
//! last. So threads pinned to a hardware thread and often busy keep unpinned ones away from it,
//! even while they sleep. A freed hardware thread whose queue is empty pulls the longest-waiting
//! unpinned thread of the most loaded queue that has one (Linux's balancing as a CPU goes idle).
//!
//! Each queue is scheduled as Linux's CFS does (3.x–4.x), every thread with nice 0's weight. A
//! thread's *virtual runtime* is the time it has run. The queue keeps `min_vruntime`, the least
//! virtual runtime of its running and waiting threads, never decreasing, and runs the waiting
//! thread of least virtual runtime (the first come among equals). A woken thread joins a queue
//! at no less than its `min_vruntime - latency/2` (a sleeper's credit, halved); a thread that
//! changes queues (woken on another, or pulled) keeps its distance to the `min_vruntime`. A
//! woken thread more than `wakeup_granularity` behind the running one preempts it (wake-up
//! preemption) and runs next (the *next buddy*), unless a waiting thread is more than
//! `wakeup_granularity` ahead of it; with `latency / min_granularity` runnable threads or more,
//! the preempted one likewise runs after it (the *last buddy*). A running thread also yields
//! when it has run its *slice* — `latency` shared among the queue's runnable threads, or
//! `min_granularity` each when more than `latency / min_granularity` run — or has run
//! `min_granularity` and is more than a slice ahead of the least waiting thread; not if it
//! still has the least virtual runtime. Preemption takes effect at the running thread's next op
//! (an involuntary switch); a thread out of work sleeps (a voluntary one). A burst that starts
//! while the other hardware thread of its core is busy takes `smt_slowdown` times longer.
//!
//! Mutexes are FIFO ([`Mutex`]): a waiter spins for `spin` on its hardware thread, then sleeps
//! (a polling thread never sleeps: it spins until granted); the release hands the mutex to the
//! oldest waiter, which continues at once if it is still spinning or wakes (`wakeup`) if it
//! slept — holding the mutex all the while.
//!
//! # Example (defaults on 8 hardware threads: latency 24 ms, minimum granularity 3 ms, wake-up
//! granularity 4 ms; context switch 1.5 us, wake-up 4 us, spin 1 us)
//! One hardware thread, thread A running from t = 0 with 20 ms of virtual runtime, thread B,
//! which had run less and slept, woken at t = 0: B is runnable at 4 us, when the queue's
//! `min_vruntime` is A's 20.004 ms, and is placed 12 ms behind, at 8.004 ms: more than 4 ms
//! behind A, so A yields at its next op (its burst ends at 10 us, say) and B runs from 11.5 us.
//! Had B been at 16.004 ms (4 ms behind, not more), A would go on until it had run at least
//! 3 ms and were more than a slice (24 ms / 2 threads) ahead of B: at its first op after
//! 8.004 ms. A waiter that starts spinning at t = 0 on a mutex released at 0.7 us has it at
//! once, still spinning; released at 10 us, the mutex finds the waiter asleep since 1 us: it owns
//! the mutex from 10 us but runs only at 15.5 us (wake-up 4 us, switch-in 1.5 us).
//!
//! Parameters (`[host.cpu]`): `cores`, `threads_per_core`, `latency`, `min_granularity`,
//! `wakeup_granularity` (Linux's defaults for the number of hardware threads: 6 ms, 0.75 ms and
//! 1 ms times 1 + log2 of up to 8), `context_switch`, `wakeup`, `spin` (ns), `smt_slowdown` (a
//! factor).
//! Source: Linux CFS, `kernel/sched/fair.c` of 3.x–4.x (`update_curr`, `update_min_vruntime`,
//! `place_entity` with GENTLE_FAIR_SLEEPERS, `migrate_task_rq_fair`, `check_preempt_wakeup`,
//! `wakeup_preempt_entity`, `check_preempt_tick`, `sched_slice`, `pick_next_entity` with its
//! buddies; tunables scaled by `SCHED_TUNABLESCALING_LOG`, bounded as `kernel/sysctl.c` does),
//! its load tracking (PELT, `kernel/sched/pelt.c`: 1,024 us periods, `y^32 = 1/2`) and
//! balancing (`select_task_rq_fair`, `newidle_balance`), futex mutexes; paper A, section on the
//! Baseline's lock contention.
//! Simplified: every thread has nice 0's weight, in one group (no cgroups, no autogroup); the
//! tick's check runs at every op rather than every 1–4 ms, and a preemption waits for the
//! running thread's next op; threads exist from the start with virtual runtime 0 (no fork
//! placement); no skip buddy (nothing yields); the balancer's loads are plain runnable averages
//! (no task weights, no scheduling domains). Measured against paper A in docs/EXPERIMENTS.md §5.

use super::ids::{HwThreadId, IdVec, Idx, LockId, ThreadId};
use super::lock::Mutex;
use super::machine::MachineEvent;
use super::thread::{Act, Cur, Op, Role, TState, Thread};
use super::CpuConfig;
use crate::units::{Nanos, SimTime};

/// Events a CPU call schedules, in the order they must enter the event queue.
pub(super) type Events = Vec<(SimTime, MachineEvent)>;

struct Hw {
    current: Option<ThreadId>,
    /// Threads that are not pinned may run here (false: a polling thread's own).
    shared: bool,
    /// Its run queue: the threads waiting for it, in the order they came (the next to run is the
    /// one of least virtual runtime, the earliest come among equals).
    queue: Vec<ThreadId>,
    /// CFS's `min_vruntime`: the least virtual runtime of its running and waiting threads, never
    /// decreasing.
    min_vruntime: i64,
    /// A woken thread preempts the current one at its next op (CFS's `need_resched`).
    resched: bool,
    /// CFS's buddies: the woken thread that preempted (`next`) and, with `latency /
    /// min_granularity` threads or more, the thread it preempted (`last`); each is run next
    /// unless its virtual runtime is more than `wakeup_granularity` past the least.
    next: Option<ThreadId>,
    last: Option<ThreadId>,
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
            hw: (0..h)
                .map(|_| Hw { current: None, shared: true, queue: Vec::new(), min_vruntime: 0, resched: false, next: None, last: None })
                .collect(),
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
            Some(h) => {
                self.place(now, t, h);
                self.start_on(now, t, h, ev);
            }
            None => {
                let h = self.threads[t].pin.unwrap_or_else(|| self.least_loaded(now, t));
                self.place(now, t, h);
                let th = &mut self.threads[t];
                th.set_state(now, TState::Runnable);
                th.last_hw = h;
                self.hw[h].queue.push(t);
                self.check_preempt_wakeup(t, h);
            }
        }
    }

    /// CFS's `update_curr`: the running thread's time up to `now` joins its virtual runtime,
    /// and `min_vruntime` follows.
    fn update_curr(&mut self, now: SimTime, h: HwThreadId) {
        if let Some(c) = self.hw[h].current {
            let th = &mut self.threads[c];
            th.vruntime += now.since(th.vr_since).0 as i64;
            th.vr_since = now;
        }
        self.update_min_vruntime(h);
    }

    /// CFS's `update_min_vruntime`: up to the least virtual runtime of the running thread and the
    /// waiting ones, never down.
    fn update_min_vruntime(&mut self, h: HwThreadId) {
        let curr = self.hw[h].current.map(|c| self.threads[c].vruntime);
        let left = self.leftmost(h).map(|t| self.threads[t].vruntime);
        let least = match (curr, left) {
            (Some(c), Some(l)) => c.min(l),
            (Some(v), None) | (None, Some(v)) => v,
            (None, None) => return,
        };
        let hw = &mut self.hw[h];
        hw.min_vruntime = hw.min_vruntime.max(least);
    }

    /// The waiting thread of least virtual runtime (the earliest come among equals): CFS's
    /// leftmost entity.
    fn leftmost(&self, h: HwThreadId) -> Option<ThreadId> {
        let mut best: Option<ThreadId> = None;
        for &t in &self.hw[h].queue {
            if best.is_none_or(|b| self.threads[t].vruntime < self.threads[b].vruntime) {
                best = Some(t);
            }
        }
        best
    }

    /// Thread `t`, woken, joins hardware thread `h`'s run queue (CFS's `enqueue_entity` with
    /// `place_entity`): its virtual runtime moves from the queue it slept on to `h`'s, keeping
    /// its distance to `min_vruntime` (`migrate_task_rq_fair`), and is raised to at least
    /// `min_vruntime - latency/2` (a sleeper's credit, halved: GENTLE_FAIR_SLEEPERS).
    fn place(&mut self, now: SimTime, t: ThreadId, h: HwThreadId) {
        let from = self.threads[t].last_hw;
        self.update_curr(now, h);
        let mut v = self.threads[t].vruntime;
        if from != h {
            self.update_curr(now, from);
            v = v - self.hw[from].min_vruntime + self.hw[h].min_vruntime;
        }
        let floor = self.hw[h].min_vruntime - (self.cfg.latency.0 / 2) as i64;
        self.threads[t].vruntime = v.max(floor);
    }

    /// CFS's `check_preempt_wakeup`: woken thread `t`, queued at busy hardware thread `h`,
    /// preempts the running thread (at its next op) if its virtual runtime is more than
    /// `wakeup_granularity` behind the running one's; it is then the `next` buddy and, with
    /// `latency / min_granularity` runnable threads or more, the preempted one the `last`.
    fn check_preempt_wakeup(&mut self, t: ThreadId, h: HwThreadId) {
        let Some(c) = self.hw[h].current else { return };
        if self.hw[h].resched {
            return;
        }
        if self.preempts(c, t) {
            let scale = self.nr_running(h) >= self.nr_latency();
            let hw = &mut self.hw[h];
            hw.resched = true;
            hw.next = Some(t);
            if scale {
                hw.last = Some(c);
            }
        }
    }

    /// CFS's `wakeup_preempt_entity(curr, se) == 1`: `se`'s virtual runtime is more than
    /// `wakeup_granularity` behind `curr`'s.
    fn preempts(&self, curr: ThreadId, se: ThreadId) -> bool {
        self.threads[curr].vruntime - self.threads[se].vruntime > self.cfg.wakeup_granularity.0 as i64
    }

    /// Threads running or waiting on `h` (CFS's `nr_running`).
    fn nr_running(&self, h: HwThreadId) -> u64 {
        self.hw[h].queue.len() as u64 + u64::from(self.hw[h].current.is_some())
    }

    /// CFS's `sched_nr_latency`: up to this many runnable threads share one `latency`.
    fn nr_latency(&self) -> u64 {
        self.cfg.latency.0.div_ceil(self.cfg.min_granularity.0)
    }

    /// CFS's `sched_slice` with equal weights: the period (`latency`, or `min_granularity` per
    /// thread when more than `nr_latency` run) shared among the runnable threads of `h`.
    fn slice(&self, h: HwThreadId) -> Nanos {
        let n = self.nr_running(h).max(1);
        let period = if n > self.nr_latency() { n * self.cfg.min_granularity.0 } else { self.cfg.latency.0 };
        Nanos(period / n)
    }

    /// CFS's `pick_next_entity`: of the waiting threads and `curr` (the running one, still in the
    /// race), the one of least virtual runtime — unless the `last` buddy, or better the `next`,
    /// is within `wakeup_granularity` of it.
    fn pick(&self, h: HwThreadId, curr: Option<ThreadId>) -> Option<ThreadId> {
        let v = |t: ThreadId| self.threads[t].vruntime;
        let mut left = self.leftmost(h);
        if let Some(c) = curr {
            if left.is_none_or(|l| v(c) < v(l)) {
                left = Some(c);
            }
        }
        let left = left?;
        let mut se = left;
        for buddy in [self.hw[h].last, self.hw[h].next].into_iter().flatten() {
            if !self.preempts(buddy, left) {
                se = buddy;
            }
        }
        Some(se)
    }

    /// CFS's `clear_buddies`: `t` is no buddy of `h` any more.
    fn clear_buddies(&mut self, h: HwThreadId, t: ThreadId) {
        let hw = &mut self.hw[h];
        if hw.next == Some(t) {
            hw.next = None;
        }
        if hw.last == Some(t) {
            hw.last = None;
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
        th.vr_since = now;
        th.last_hw = h;
        th.cur = Cur::SwitchIn;
        th.gen += 1;
        ev.push((now + self.cfg.context_switch, MachineEvent::Step { t, gen: th.gen }));
        self.update_min_vruntime(h);
    }

    /// Thread `t` leaves its hardware thread (sleeping, or preempted into `Runnable`).
    fn leave_cpu(&mut self, now: SimTime, t: ThreadId, to: TState, ev: &mut Events) {
        let TState::OnCpu(h) = self.threads[t].state else { panic!("thread {t:?} is not on a CPU") };
        self.update_curr(now, h);
        let th = &mut self.threads[t];
        th.oncpu_ns += now.since(th.on_since).0;
        th.set_state(now, to);
        th.cur = Cur::Idle;
        th.gen += 1;
        let hw = &mut self.hw[h];
        hw.current = None;
        hw.resched = false;
        if to == TState::Runnable {
            hw.queue.push(t);
        } else {
            // Asleep, it keeps its virtual runtime and is no buddy (CFS's `dequeue_entity`).
            self.clear_buddies(h, t);
        }
        self.update_min_vruntime(h);
        self.fill(now, h, ev);
    }

    /// Thread `t` is out of work and sleeps until it is woken.
    pub fn block(&mut self, now: SimTime, t: ThreadId, ev: &mut Events) {
        self.threads[t].voluntary += 1;
        self.leave_cpu(now, t, TState::Blocked, ev);
    }

    /// Hardware thread `h` is free: it runs the thread of its own run queue that CFS picks (the
    /// least virtual runtime, or a buddy); with none, a shared one pulls the longest-waiting
    /// unpinned thread of the most loaded other run queue (Linux's balancing when a CPU goes
    /// idle).
    fn fill(&mut self, now: SimTime, h: HwThreadId, ev: &mut Events) {
        let t = match self.pick(h, None) {
            Some(t) => {
                self.clear_buddies(h, t);
                let i = self.hw[h].queue.iter().position(|&q| q == t).expect("the pick waits here");
                self.hw[h].queue.remove(i);
                Some(t)
            }
            None if self.hw[h].shared => self.pull(now, h),
            None => None,
        };
        if let Some(t) = t {
            self.start_on(now, t, h, ev);
        }
    }

    /// Takes the longest-waiting unpinned thread out of the most loaded run queue that has one
    /// (the lowest-numbered among equals) for idle hardware thread `to`, its virtual runtime
    /// moved from that queue's `min_vruntime` to `to`'s.
    fn pull(&mut self, now: SimTime, to: HwThreadId) -> Option<ThreadId> {
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
        self.update_curr(now, h);
        let t = self.hw[h].queue.remove(i);
        self.clear_buddies(h, t);
        let v = self.threads[t].vruntime - self.hw[h].min_vruntime;
        self.update_min_vruntime(h);
        self.update_curr(now, to);
        self.threads[t].vruntime = v + self.hw[to].min_vruntime;
        Some(t)
    }

    /// Another hardware thread of `h`'s core runs a thread.
    fn sibling_busy(&self, h: HwThreadId) -> bool {
        let per = self.cfg.threads_per_core as usize;
        let core = h.index() / per;
        self.hw.iter_enumerated().skip(core * per).take(per).any(|(s, hw)| s != h && hw.current.is_some())
    }

    /// Between two ops of running thread `t`, CFS decides whether it goes on: a woken thread
    /// preempts it (`check_preempt_wakeup` flagged it), or it has run its slice, or has run at
    /// least `min_granularity` and is more than a slice ahead of the least waiting thread
    /// (`check_preempt_tick`, checked at every op rather than at the timer tick). Then the thread CFS picks runs — `t`
    /// itself if it still has the least virtual runtime — and `t`, if it is not the pick,
    /// yields before `op`, which it runs when it is back (true).
    pub fn preempt(&mut self, now: SimTime, t: ThreadId, op: Op, ev: &mut Events) -> bool {
        let TState::OnCpu(h) = self.threads[t].state else { panic!("thread {t:?} runs off its CPU") };
        if self.hw[h].queue.is_empty() {
            self.hw[h].resched = false;
            return false;
        }
        self.update_curr(now, h);
        let mut resched = std::mem::take(&mut self.hw[h].resched);
        if !resched {
            let ideal = self.slice(h).0;
            let ran = now.since(self.threads[t].slice_start).0;
            if ran > ideal {
                resched = true;
                // It ran its slice: no buddy's favour keeps it on.
                self.clear_buddies(h, t);
            } else if ran >= self.cfg.min_granularity.0 {
                let left = self.leftmost(h).expect("someone waits");
                resched = self.threads[t].vruntime - self.threads[left].vruntime > ideal as i64;
            }
        }
        if !resched {
            return false;
        }
        if self.pick(h, Some(t)) == Some(t) {
            self.clear_buddies(h, t);
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
            assert!(hw.current.is_some() || !hw.resched, "idle hardware thread {h:?} flagged to preempt");
            for b in [hw.next, hw.last].into_iter().flatten() {
                assert!(hw.current == Some(b) || hw.queue.contains(&b), "buddy {b:?} of {h:?} neither runs nor waits there");
            }
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
