//! The CPU scheduler and its mutexes alone: each test drives a `Cpu` by hand and checks the
//! exact times of the events it schedules (default costs: CFS's latency 24 ms, minimum
//! granularity 3 ms and wake-up granularity 4 ms, context switch 1.5 us, wake-up 4 us, spin 1 us,
//! SMT slowdown 1.6).

use super::*;
use crate::virt::ids::{ProcId, VcpuId};
use crate::virt::thread::PELT_HALF_LIFE;

const US: u64 = 1_000;

struct Harness {
    cpu: Cpu,
    ev: Events,
}

impl Harness {
    fn new(cores: u32, threads_per_core: u32) -> Harness {
        Harness { cpu: Cpu::new(CpuConfig { cores, threads_per_core, ..CpuConfig::default() }), ev: Vec::new() }
    }
    fn process(&mut self, pin: Option<u16>) -> ThreadId {
        let p = ProcId(self.cpu.threads().len() as u32);
        self.cpu.add_thread(Role::Process(p), pin.map(HwThreadId), false)
    }
    /// The events scheduled since the last call.
    fn take(&mut self) -> Vec<(SimTime, MachineEvent)> {
        std::mem::take(&mut self.ev)
    }
    fn step(&self, t: ThreadId) -> MachineEvent {
        MachineEvent::Step { t, gen: self.cpu.thread(t).gen }
    }
    /// Thread `t` runnable at `now` and through its switch-in.
    fn run(&mut self, now: u64, t: ThreadId) {
        self.cpu.make_runnable(SimTime(now), t, &mut self.ev);
        assert_eq!(self.take(), [(SimTime(now + 1_500), self.step(t))], "switched in after context_switch");
    }
}

#[test]
fn a_woken_thread_runs_after_the_wakeup_and_a_context_switch() {
    let mut h = Harness::new(1, 1);
    let a = h.process(None);
    h.cpu.wake(SimTime(0), a, Nanos(200), &mut h.ev);
    assert_eq!(h.take(), [(SimTime(4 * US), MachineEvent::Wake(a))]);
    assert_eq!(h.cpu.thread(a).state, TState::Waking);
    h.cpu.wake(SimTime(US), a, Nanos(200), &mut h.ev);
    assert!(h.take().is_empty(), "a waking thread is not woken twice");
    h.run(4 * US, a);
    assert_eq!(h.cpu.on_hw(a), Some(HwThreadId(0)));
    h.cpu.check_invariants();
}

#[test]
fn a_thread_runs_its_slice_the_latency_shared_among_the_runnable_threads_at_least_min_granularity() {
    // 24 ms of latency, 3 ms of minimum granularity: 2 runnable threads get 12 ms slices, 3 get
    // 8 ms, 8 get 3 ms, and 10 (more than 24 / 3) 3 ms each too, a period of 30 ms.
    for (n, slice) in [(2, 12_000_000), (3, 8_000_000), (8, 3_000_000), (10, 3_000_000)] {
        let mut h = Harness::new(1, 1);
        let a = h.process(None);
        h.run(0, a);
        let waiting: Vec<ThreadId> = (1..n).map(|_| h.process(None)).collect();
        for &w in &waiting {
            h.cpu.make_runnable(SimTime(0), w, &mut h.ev);
        }
        assert!(h.take().is_empty(), "all at virtual runtime 0: no wake-up preemption");
        let op = Op::Burst(Nanos(US), Act::Nop);
        assert!(!h.cpu.preempt(SimTime(slice), a, op, &mut h.ev), "{n} runnable: a slice of {slice} ns");
        assert!(h.take().is_empty());
        assert!(h.cpu.preempt(SimTime(slice + 1), a, op, &mut h.ev), "{n} runnable: past a slice of {slice} ns");
        assert_eq!(h.take(), [(SimTime(slice + 1 + 1_500), h.step(waiting[0]))], "{n} runnable: the first come of equals");
        assert_eq!(h.cpu.thread(a).state, TState::Runnable);
        assert_eq!(h.cpu.thread(a).ops.front(), Some(&op), "the op waits for a's return");
        assert_eq!(h.cpu.thread(a).vruntime, slice as i64 + 1, "its virtual runtime is its time on the CPU");
        assert_eq!((h.cpu.thread(a).involuntary, h.cpu.thread(a).oncpu_ns), (1, slice + 1));
        h.cpu.check_invariants();
    }
}

#[test]
fn a_freed_hardware_thread_runs_the_least_virtual_runtime_the_first_come_among_equals() {
    let mut h = Harness::new(1, 1);
    let (a, b, c, d) = (h.process(None), h.process(None), h.process(None), h.process(None));
    h.run(0, a);
    h.cpu.thread_mut(b).vruntime = 2_000_000;
    h.cpu.thread_mut(c).vruntime = 1_000_000;
    h.cpu.thread_mut(d).vruntime = 1_000_000;
    for (t, at) in [(b, 10), (c, 20), (d, 30)] {
        h.cpu.make_runnable(SimTime(at), t, &mut h.ev);
    }
    assert!(h.take().is_empty(), "a (at 30 ns of virtual runtime) is behind them all: it goes on");
    h.cpu.block(SimTime(US), a, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(2_500), h.step(c))], "c and d are 1 ms behind b, and c came first");
    h.cpu.block(SimTime(3 * US), c, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(4_500), h.step(d))], "d is 1 ms behind b");
    h.cpu.block(SimTime(5 * US), d, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(6_500), h.step(b))]);
    h.cpu.check_invariants();
}

#[test]
fn a_woken_thread_is_placed_at_most_half_a_latency_behind_the_queue_and_keeps_its_distance_when_it_moves() {
    let mut h = Harness::new(2, 1);
    let (a, e, long, short) = (h.process(Some(0)), h.process(Some(1)), h.process(Some(0)), h.process(Some(0)));
    // a runs on 0 with 30 ms of virtual runtime, e on 1 with 50 ms: each hardware thread's
    // min_vruntime.
    h.cpu.thread_mut(a).vruntime = 30_000_000;
    h.cpu.thread_mut(e).vruntime = 50_000_000;
    h.run(0, a);
    h.run(0, e);
    // At 1 us 0's min_vruntime is a's 30.001 ms. A thread that slept long (at 0) wakes 12 ms
    // (latency / 2) behind it; one that slept briefly (at 25 ms) keeps its own.
    h.cpu.thread_mut(short).vruntime = 25_000_000;
    h.cpu.make_runnable(SimTime(US), long, &mut h.ev);
    h.cpu.make_runnable(SimTime(US), short, &mut h.ev);
    assert_eq!(h.cpu.thread(long).vruntime, 18_001_000);
    assert_eq!(h.cpu.thread(short).vruntime, 25_000_000);
    // Threads that last ran on 0 and wake on 1 (pinned there) keep their distance to the
    // min_vruntime: 10 ms ahead of 0's is 10 ms ahead of 1's 50.001 ms; 20 ms behind is 12 ms
    // behind, the most a sleeper gets.
    let (ahead, behind) = (h.process(Some(1)), h.process(Some(1)));
    for (t, v) in [(ahead, 40_001_000), (behind, 10_001_000)] {
        h.cpu.thread_mut(t).vruntime = v;
        h.cpu.thread_mut(t).last_hw = HwThreadId(0);
        h.cpu.make_runnable(SimTime(US), t, &mut h.ev);
    }
    assert_eq!(h.cpu.thread(ahead).vruntime, 60_001_000);
    assert_eq!(h.cpu.thread(behind).vruntime, 38_001_000);
    h.cpu.check_invariants();
}

/// One hardware thread running `a` with 20 ms of virtual runtime from 0, and threads woken at
/// 10 us with the given virtual runtimes (raised to 8.010 ms, a's less 12 ms, if below).
fn woken_beside_a_running_thread(vruntimes: &[i64]) -> (Harness, ThreadId, Vec<ThreadId>) {
    let mut h = Harness::new(1, 1);
    let a = h.process(None);
    h.cpu.thread_mut(a).vruntime = 20_000_000;
    h.run(0, a);
    let woken: Vec<ThreadId> = vruntimes.iter().map(|_| h.process(None)).collect();
    for (&t, &v) in woken.iter().zip(vruntimes) {
        h.cpu.thread_mut(t).vruntime = v;
        h.cpu.make_runnable(SimTime(10 * US), t, &mut h.ev);
        assert_eq!(h.cpu.thread(t).vruntime, v.max(8_010_000));
    }
    assert!(h.take().is_empty(), "a preemption waits for a's next op");
    (h, a, woken)
}

#[test]
fn a_woken_thread_more_than_the_wakeup_granularity_behind_preempts_at_the_next_op() {
    // At 10 us a has 20.010 ms of virtual runtime: b, at 16.010 ms less 1 ns, is more than the
    // 4 ms granularity behind.
    let (mut h, a, woken) = woken_beside_a_running_thread(&[16_009_999]);
    let op = Op::Burst(Nanos(US), Act::Nop);
    assert!(h.cpu.preempt(SimTime(11 * US), a, op, &mut h.ev), "a yields at its next op, 11 us into its 12 ms slice");
    assert_eq!(h.take(), [(SimTime(12_500), h.step(woken[0]))]);
    assert_eq!(h.cpu.thread(a).involuntary, 1);
    assert_eq!(h.cpu.thread(a).vruntime, 20_011_000);
    h.cpu.check_invariants();
}

#[test]
fn a_woken_thread_within_the_wakeup_granularity_waits() {
    // b, at 16.010 ms, is exactly the 4 ms granularity behind a: no preemption. a goes on
    // until it is more than a slice (12 ms with two runnable) ahead of b, having run at least
    // the 3 ms minimum granularity: at 8.010 ms, when a is at 28.010 ms, it is not yet.
    let (mut h, a, woken) = woken_beside_a_running_thread(&[16_010_000]);
    let op = Op::Burst(Nanos(US), Act::Nop);
    assert!(!h.cpu.preempt(SimTime(11 * US), a, op, &mut h.ev));
    assert!(!h.cpu.preempt(SimTime(8_010_000), a, op, &mut h.ev));
    assert!(h.take().is_empty());
    assert!(h.cpu.preempt(SimTime(8_010_001), a, op, &mut h.ev));
    assert_eq!(h.take(), [(SimTime(8_011_501), h.step(woken[0]))]);
}

#[test]
fn the_woken_thread_that_preempts_runs_next_unless_another_is_more_than_the_granularity_ahead() {
    // x preempts a (8 ms behind it); y, woken after it, is further behind still (it slept: 12 ms
    // behind a's 20.010 ms). x is the next buddy: it runs if no more than 4 ms behind y.
    let op = Op::Burst(Nanos(US), Act::Nop);
    for (x_v, runs) in [(12_010_000, 0), (12_010_001, 1)] {
        let (mut h, a, woken) = woken_beside_a_running_thread(&[x_v, 0]);
        assert_eq!(h.cpu.thread(woken[1]).vruntime, 8_010_000);
        assert!(h.cpu.preempt(SimTime(11 * US), a, op, &mut h.ev));
        assert_eq!(h.take(), [(SimTime(12_500), h.step(woken[runs]))], "x at {x_v}");
        h.cpu.check_invariants();
    }
}

#[test]
fn with_nr_latency_runnable_the_preempted_thread_runs_again_after_the_one_that_preempted() {
    // a runs with 20 ms; threads at 19 ms wait (too little behind a to preempt); a sleeper
    // placed at 8.010 ms preempts. With 8 runnable threads (24 ms / 3 ms) a is the last buddy:
    // when the sleeper blocks, a runs again though the others are 1 ms behind it; with 7 the
    // first of the others runs.
    let op = Op::Burst(Nanos(US), Act::Nop);
    for (waiting, back) in [(6, true), (5, false)] {
        let mut v = vec![19_000_000; waiting];
        v.push(0);
        let (mut h, a, woken) = woken_beside_a_running_thread(&v);
        let sleeper = woken[waiting];
        assert!(h.cpu.preempt(SimTime(11 * US), a, op, &mut h.ev));
        assert_eq!(h.take(), [(SimTime(12_500), h.step(sleeper))]);
        h.cpu.block(SimTime(20 * US), sleeper, &mut h.ev);
        let next = if back { a } else { woken[0] };
        assert_eq!(h.take(), [(SimTime(21_500), h.step(next))], "{} runnable", waiting + 2);
        h.cpu.check_invariants();
    }
}

#[test]
fn a_slice_run_out_alone_is_no_reason_to_yield() {
    let mut h = Harness::new(1, 1);
    let a = h.process(None);
    h.run(0, a);
    assert!(!h.cpu.preempt(SimTime(30_000_000), a, Op::Burst(Nanos(US), Act::Nop), &mut h.ev));
}

#[test]
fn a_pinned_thread_waits_for_its_own_hardware_thread() {
    let mut h = Harness::new(2, 1);
    let (a, b) = (h.process(Some(0)), h.process(Some(0)));
    h.run(0, a);
    h.cpu.make_runnable(SimTime(0), b, &mut h.ev);
    assert!(h.take().is_empty(), "hardware thread 1 is free, but b may not use it");
    h.cpu.block(SimTime(7 * US), a, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(8_500), h.step(b))]);
    assert_eq!(h.cpu.on_hw(b), Some(HwThreadId(0)));
    assert_eq!(h.cpu.thread(a).voluntary, 1);
}

#[test]
fn an_unpinned_thread_returns_to_its_last_hardware_thread() {
    let mut h = Harness::new(3, 1);
    let (a, b) = (h.process(None), h.process(None));
    h.run(0, a);
    h.run(0, b);
    assert_eq!(h.cpu.on_hw(b), Some(HwThreadId(1)));
    h.cpu.block(SimTime(US), b, &mut h.ev);
    h.cpu.block(SimTime(US), a, &mut h.ev);
    h.run(2 * US, b);
    assert_eq!(h.cpu.on_hw(b), Some(HwThreadId(1)), "back where it ran, not on the first free one");
}

#[test]
fn a_runnable_average_halves_with_each_half_life_of_sleep() {
    let mut th = Thread::new(Role::Process(ProcId(0)), None, false);
    let half = PELT_HALF_LIFE.0;
    th.set_state(SimTime(0), TState::OnCpu(HwThreadId(0)));
    assert_eq!(th.runnable_avg(SimTime(half)), 0.5, "running one half-life from nothing");
    th.set_state(SimTime(half), TState::Blocked);
    assert_eq!(th.runnable_avg(SimTime(2 * half)), 0.25, "then asleep one half-life");
    th.set_state(SimTime(2 * half), TState::Runnable);
    assert_eq!(th.runnable_avg(SimTime(3 * half)), 0.625, "waiting to run counts as running");
}

#[test]
fn a_thread_that_must_wait_queues_at_the_least_loaded_hardware_thread() {
    let mut h = Harness::new(2, 1);
    let (p, p2, a, b) = (h.process(Some(0)), h.process(Some(0)), h.process(None), h.process(None));
    h.run(0, p);
    h.cpu.make_runnable(SimTime(0), p2, &mut h.ev);
    h.run(0, a);
    assert_eq!(h.cpu.on_hw(a), Some(HwThreadId(1)));
    // At 1 ms hardware thread 0 has two runnable threads behind it, 1 one: b, which last ran
    // on 0 (it never ran), waits for 1.
    h.cpu.make_runnable(SimTime(1_000_000), b, &mut h.ev);
    assert!(h.take().is_empty());
    assert_eq!(h.cpu.thread(b).last_hw, HwThreadId(1));
    h.cpu.block(SimTime(2_000_000), a, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(2_001_500), h.step(b))], "b runs on 1 as soon as a leaves it");
    h.cpu.check_invariants();
}

#[test]
fn an_idle_hardware_thread_pulls_a_thread_waiting_elsewhere() {
    let mut h = Harness::new(2, 1);
    let (a, b, r, p) = (h.process(None), h.process(None), h.process(None), h.process(Some(0)));
    h.run(0, a);
    h.run(0, b);
    // All loads are nil at 0: r waits where it would go back to, hardware thread 0, and p, pinned
    // there, behind it.
    h.cpu.make_runnable(SimTime(0), r, &mut h.ev);
    h.cpu.make_runnable(SimTime(0), p, &mut h.ev);
    assert_eq!(h.cpu.thread(r).last_hw, HwThreadId(0));
    h.cpu.block(SimTime(US), b, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(2_500), h.step(r))], "1's queue is empty: it pulls r from 0's");
    assert_eq!(h.cpu.on_hw(r), Some(HwThreadId(1)));
    // r was at 0's min_vruntime (0); it comes at 1's, b's 1 us.
    assert_eq!(h.cpu.thread(r).vruntime, 1_000);
    h.cpu.block(SimTime(3 * US), r, &mut h.ev);
    assert!(h.take().is_empty(), "p is pinned to 0: 1 stays idle");
    assert_eq!(h.cpu.thread(p).state, TState::Runnable);
    h.cpu.check_invariants();
}

#[test]
fn a_burst_beside_a_busy_sibling_hyperthread_is_slower() {
    let mut h = Harness::new(2, 2);
    let (a, b) = (h.process(Some(0)), h.process(Some(1)));
    h.run(0, a);
    h.cpu.begin_burst(SimTime(1_500), a, Nanos(10 * US), Act::Nop, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(11_500), h.step(a))], "its sibling is idle: full speed");
    h.run(0, b);
    h.cpu.begin_burst(SimTime(1_500), b, Nanos(10 * US), Act::Nop, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(1_500 + 16 * US), h.step(b))], "1.6 times longer");
}

#[test]
fn a_burst_delayed_by_another_vcpus_exit_ends_exactly_that_much_later() {
    let mut h = Harness::new(1, 1);
    let a = h.cpu.add_thread(Role::Vcpu(VcpuId(0)), None, false);
    let idle = h.process(None);
    h.run(0, a);
    let stale = h.step(a);
    assert!(!h.cpu.delay_burst(a, Nanos(700), &mut h.ev), "switching in is not a burst");
    h.cpu.begin_burst(SimTime(1_500), a, Nanos(2 * US), Act::Nop, &mut h.ev);
    h.take();
    assert!(h.cpu.delay_burst(a, Nanos(700), &mut h.ev));
    assert_eq!(h.take(), [(SimTime(4_200), h.step(a))]);
    assert_ne!(stale, h.step(a), "the earlier step is stale");
    assert!(!h.cpu.delay_burst(idle, Nanos(700), &mut h.ev));
}

#[test]
fn a_spinning_waiter_gets_the_mutex_at_the_release() {
    let mut h = Harness::new(2, 1);
    let (a, b) = (h.process(None), h.process(None));
    let l = h.cpu.add_lock();
    h.run(0, a);
    h.run(0, b);
    assert!(h.cpu.acquire(SimTime(1_500), a, l, &mut h.ev));
    assert!(h.take().is_empty());
    assert!(!h.cpu.acquire(SimTime(2_000), b, l, &mut h.ev));
    assert_eq!(h.take(), [(SimTime(3_000), h.step(b))], "b spins for 1 us");
    assert_eq!(h.cpu.release(SimTime(2_700), a, l, &mut h.ev), None);
    assert_eq!(h.take(), [(SimTime(2_700), h.step(b))], "granted at once");
    assert_eq!(h.cpu.thread(b).cur, Cur::Granted);
    assert_eq!(h.cpu.lock(l).stat.wait_ns, 700);
    h.cpu.check_invariants();
}

#[test]
fn a_waiter_that_slept_delays_the_next_holder_by_the_wakeup_and_switch() {
    let mut h = Harness::new(2, 1);
    let (a, b) = (h.process(None), h.process(None));
    let l = h.cpu.add_lock();
    h.run(0, a);
    h.run(0, b);
    h.cpu.acquire(SimTime(1_500), a, l, &mut h.ev);
    h.cpu.acquire(SimTime(1_500), b, l, &mut h.ev);
    h.take();
    h.cpu.sleep_on_lock(SimTime(2_500), b, &mut h.ev);
    assert!(h.take().is_empty());
    assert_eq!(h.cpu.thread(b).state, TState::LockSleep);
    // The holder releases at 10 us: b owns the mutex from then on, but runs only at 15.5 us.
    assert_eq!(h.cpu.release(SimTime(10 * US), a, l, &mut h.ev), Some(b));
    assert_eq!(h.take(), [(SimTime(14 * US), MachineEvent::Wake(b))]);
    h.run(14 * US, b);
    let s = &h.cpu.lock(l).stat;
    assert_eq!((s.acquisitions, s.contended, s.sleeps, s.wait_ns), (2, 1, 1, 8_500));
    assert_eq!(h.cpu.thread(b).voluntary, 1);
    h.cpu.check_invariants();
}

#[test]
fn a_polling_thread_notices_work_after_poll_detect_and_never_sleeps_on_a_mutex() {
    let mut h = Harness::new(2, 1);
    let p = h.cpu.add_thread(Role::Process(ProcId(0)), Some(HwThreadId(1)), true);
    let a = h.process(None);
    let l = h.cpu.add_lock();
    h.cpu.reserve(HwThreadId(1));
    assert_eq!(h.cpu.shared_hws(), [HwThreadId(0)]);
    h.run(0, p);
    h.cpu.thread_mut(p).cur = Cur::PollIdle;
    h.cpu.wake(SimTime(5 * US), p, Nanos(200), &mut h.ev);
    assert_eq!(h.take(), [(SimTime(5_200), h.step(p))]);
    h.run(0, a);
    assert_eq!(h.cpu.on_hw(a), Some(HwThreadId(0)), "not on the poller's own hardware thread");
    h.cpu.acquire(SimTime(6 * US), a, l, &mut h.ev);
    assert!(!h.cpu.acquire(SimTime(6 * US), p, l, &mut h.ev));
    assert!(h.take().is_empty(), "no spin deadline: it spins until granted");
}
