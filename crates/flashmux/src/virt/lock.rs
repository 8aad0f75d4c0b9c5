//! A FIFO mutex (a virtqueue's lock), with its contention statistics.
//!
//! # Model
//! An acquire of a free mutex takes it at once. An acquire of a held one queues the thread; a
//! release hands the mutex straight to the oldest waiter (FIFO hand-over, as a ticket lock or a
//! futex-based mutex with hand-off does), and that waiter's wait is from its acquire to the
//! release. Whether the waiter spins or sleeps meanwhile is the CPU scheduler's business
//! (`cpu.rs`): a waiter that slept holds the mutex through its wake-up, which is the convoy that
//! makes paper A's Baseline fall as processes are added.
//!
//! Example: thread 1 holds the mutex from t = 0; thread 2 asks at t = 1 us and thread 3 at
//! t = 2 us. Thread 1 releases at t = 5 us: thread 2 owns it with a 4 us wait; thread 2 releases
//! at 6 us: thread 3 owns it with a 4 us wait. 3 acquisitions, 2 contended, 8 us waited, 4 us max.
//!
//! Parameters: none (the spin time is `CpuConfig::spin`).
//! Source: paper A (Baseline's single virtqueue mutex), Linux's `mutex_lock` hand-off.

use super::ids::ThreadId;
use super::report::LockStat;
use crate::units::SimTime;
use std::collections::VecDeque;

#[derive(Default)]
pub(super) struct Mutex {
    owner: Option<ThreadId>,
    waiters: VecDeque<(ThreadId, SimTime)>,
    pub stat: LockStat,
}

impl Mutex {
    #[cfg(test)]
    pub fn owner(&self) -> Option<ThreadId> {
        self.owner
    }

    /// Thread `t` asks for the mutex at `now`: true if it has it, false if it waits in line.
    pub fn acquire(&mut self, t: ThreadId, now: SimTime) -> bool {
        assert_ne!(self.owner, Some(t), "{t:?} acquires a mutex it holds");
        if self.owner.is_none() {
            self.owner = Some(t);
            self.stat.acquisitions += 1;
            return true;
        }
        self.waiters.push_back((t, now));
        self.stat.contended += 1;
        false
    }

    /// Thread `t` releases the mutex at `now`; returns the waiter it is handed to.
    pub fn release(&mut self, t: ThreadId, now: SimTime) -> Option<ThreadId> {
        assert_eq!(self.owner, Some(t), "mutex released by a thread that does not hold it");
        let Some((w, since)) = self.waiters.pop_front() else {
            self.owner = None;
            return None;
        };
        self.owner = Some(w);
        let wait = now.since(since).0;
        self.stat.acquisitions += 1;
        self.stat.wait_ns += wait;
        self.stat.wait_max_ns = self.stat.wait_max_ns.max(wait);
        Some(w)
    }

    /// A waiter stopped spinning and slept.
    pub fn count_sleep(&mut self) {
        self.stat.sleeps += 1;
    }

    pub fn check_invariants(&self, name: usize) {
        assert!(self.owner.is_some() || self.waiters.is_empty(), "mutex {name} free with waiters");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    #[test]
    fn a_free_mutex_is_taken_at_once() {
        let mut m = Mutex::default();
        assert!(m.acquire(ThreadId(1), SimTime(0)));
        assert_eq!(m.owner(), Some(ThreadId(1)));
        assert_eq!(m.release(ThreadId(1), SimTime(US)), None);
        assert_eq!(m.owner(), None);
        assert_eq!((m.stat.acquisitions, m.stat.contended, m.stat.wait_ns), (1, 0, 0));
        m.check_invariants(0);
    }

    #[test]
    fn waiters_get_the_mutex_in_arrival_order_and_wait_exactly_until_the_release() {
        let mut m = Mutex::default();
        assert!(m.acquire(ThreadId(1), SimTime(0)));
        assert!(!m.acquire(ThreadId(2), SimTime(US)));
        assert!(!m.acquire(ThreadId(3), SimTime(2 * US)));
        m.check_invariants(0);
        assert_eq!(m.release(ThreadId(1), SimTime(5 * US)), Some(ThreadId(2)));
        assert_eq!(m.owner(), Some(ThreadId(2)));
        assert_eq!(m.release(ThreadId(2), SimTime(6 * US)), Some(ThreadId(3)));
        assert_eq!(m.release(ThreadId(3), SimTime(7 * US)), None);
        let s = &m.stat;
        assert_eq!((s.acquisitions, s.contended), (3, 2));
        assert_eq!(s.wait_ns, 4 * US + 4 * US);
        assert_eq!(s.wait_max_ns, 4 * US);
        assert_eq!(s.contended_wait_mean_ns(), 4_000.0);
    }

    #[test]
    #[should_panic(expected = "does not hold it")]
    fn a_release_by_another_thread_is_a_bug() {
        let mut m = Mutex::default();
        m.acquire(ThreadId(1), SimTime(0));
        m.release(ThreadId(2), SimTime(1));
    }
}
