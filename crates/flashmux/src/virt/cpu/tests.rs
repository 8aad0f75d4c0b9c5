//! The CPU scheduler and its mutexes alone: each test drives a `Cpu` by hand and checks the
//! exact times of the events it schedules (default costs: quantum 3 ms, context switch 1.5 us,
//! wake-up 4 us, spin 1 us, SMT slowdown 1.6).

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
fn a_thread_on_a_busy_hardware_thread_waits_exactly_until_the_quantum_runs_out() {
    let mut h = Harness::new(1, 1);
    let (a, b) = (h.process(None), h.process(None));
    h.run(0, a);
    // a's slice started at 0 (its switch-in): its burst ends exactly at the 3 ms quantum.
    h.cpu.begin_burst(SimTime(1_500), a, Nanos(3_000_000 - 1_500), Act::Nop, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(3_000_000), h.step(a))]);
    h.cpu.make_runnable(SimTime(4 * US), b, &mut h.ev);
    assert!(h.take().is_empty(), "no free hardware thread: b waits in the run queue");
    assert_eq!(h.cpu.thread(b).state, TState::Runnable);
    // 1 ns before, a's quantum has not run out: it would go on with its next op.
    let op = Op::Burst(Nanos(US), Act::Nop);
    assert!(!h.cpu.preempt(SimTime(2_999_999), a, op, &mut h.ev));
    // At the burst's end it has: it yields, and b switches in 1.5 us later.
    assert!(h.cpu.preempt(SimTime(3_000_000), a, op, &mut h.ev));
    assert_eq!(h.take(), [(SimTime(3_001_500), h.step(b))]);
    assert_eq!(h.cpu.thread(a).state, TState::Runnable);
    assert_eq!(h.cpu.thread(a).ops.front(), Some(&op), "the op waits for a's return");
    assert_eq!((h.cpu.thread(a).involuntary, h.cpu.thread(a).oncpu_ns), (1, 3_000_000));
    h.cpu.check_invariants();
}

#[test]
fn a_quantum_expired_alone_is_no_reason_to_yield() {
    let mut h = Harness::new(1, 1);
    let a = h.process(None);
    h.run(0, a);
    assert!(!h.cpu.preempt(SimTime(10_000_000), a, Op::Burst(Nanos(US), Act::Nop), &mut h.ev));
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
fn a_freed_hardware_thread_takes_the_longest_waiting_thread() {
    let mut h = Harness::new(1, 1);
    let (a, b, c) = (h.process(None), h.process(None), h.process(Some(0)));
    h.run(0, a);
    h.cpu.make_runnable(SimTime(10), b, &mut h.ev);
    h.cpu.make_runnable(SimTime(20), c, &mut h.ev);
    h.cpu.block(SimTime(US), a, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(2_500), h.step(b))], "b waited longer than c");
    h.cpu.block(SimTime(3 * US), b, &mut h.ev);
    assert_eq!(h.take(), [(SimTime(4_500), h.step(c))]);
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
