//! NVMe command arbitration: which submission queue a free controller core fetches from next.
//!
//! # Model
//! Two of the NVMe specification's arbitration mechanisms (NVMe 1.4, §4.13):
//! - **Round robin** (the default, and every controller's): the queues that hold commands take
//!   turns, one command each; a queue with more goes to the back of the line.
//! - **Weighted round robin with urgent priority class**: every queue belongs to a class —
//!   `urgent`, `high`, `medium` or `low`. Urgent queues are served first, strictly (round robin
//!   among them). Otherwise the three weighted classes take turns, each fetching up to its weight
//!   in commands (the Arbitration feature's HPW+1, MPW+1, LPW+1) before the next class's turn; a
//!   class with no command waiting passes its turn at once. Within a class, its queues take turns
//!   one command each (round robin).
//!
//! A core takes one command at a time, so the arbitration burst (how many commands one queue
//! may give up in a row) is 1.
//!
//! # Worked example
//! Weights high 4, medium 2, low 1 (MQSim's weights for its priority classes), one queue per
//! class, each with ten commands, one core: the fetch order is H H H H M M L H H H H M M L ...
//! An urgent command arriving meanwhile is fetched next, before the rest of the round.
//!
//! # Parameters
//! - `device.interface.arbitration`: `"round-robin"` or `"wrr"`.
//! - `device.interface.wrr_weights`: the high, medium and low weights in commands per turn
//!   (default `[4, 2, 1]`, each 1 to 256 as the 8-bit 0-based fields allow).
//! - a class per queue: `device.interface.queue_classes`, or from each tenant's `priority`.
//!
//! Source: NVM Express Base Specification 1.4, §4.13 "Command Arbitration", Figures 4.11/4.12
//! (the Arbitration feature, Set Features FID 01h); MQSim's `IO_Flow_Priority_Class` weights
//! (Host_Interface_NVMe_Priorities.h: high 4, medium 2, low 1, urgent strict).

use crate::units::QueueId;
use serde::Serialize;
use std::collections::VecDeque;

crate::named! {
    /// A submission queue's priority class under weighted round robin.
    #[derive(PartialOrd, Ord)]
    pub enum Priority: "class" {
        /// Served before every other class.
        Urgent = "urgent",
        High = "high",
        Medium = "medium",
        Low = "low",
    }
}

/// How the controller picks the queue to fetch from.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "policy")]
pub enum Arbitration {
    #[default]
    RoundRobin,
    /// Weighted round robin with urgent priority class; `classes[q]` is queue `q`'s class.
    Wrr { weights: [u32; 3], classes: Vec<Priority> },
}

/// The default WRR weights (high, medium, low): MQSim's.
pub const DEFAULT_WRR_WEIGHTS: [u32; 3] = [4, 2, 1];

impl Arbitration {
    pub fn is_round_robin(&self) -> bool {
        matches!(self, Arbitration::RoundRobin)
    }

    /// Weights 1 to 256; a class for each of `queues` queues.
    pub fn validate(&self, queues: u16) -> Result<(), String> {
        let Arbitration::Wrr { weights, classes } = self else { return Ok(()) };
        if let Some(w) = weights.iter().find(|w| !(1..=256).contains(*w)) {
            return Err(format!("device.interface.wrr_weights: {w} is out of range: expected 1 to 256 commands per turn"));
        }
        if classes.len() != queues as usize {
            return Err(format!(
                "device.interface.queue_classes: {} classes for {queues} queues: expected one per queue",
                classes.len()
            ));
        }
        Ok(())
    }
}

/// The queues that hold commands, in the order they will be served.
pub(super) struct Arbiter {
    /// WRR's weights (high, medium, low); `None`: round robin.
    weights: Option<[u32; 3]>,
    /// WRR: each queue's class as an index into `ready` (empty for round robin).
    classes: Vec<u8>,
    /// Queues with commands waiting, per class (round robin: all in `ready[0]`), each queue at
    /// most once.
    ready: [VecDeque<u16>; 4],
    /// WRR: the weighted class whose turn it is (1 high, 2 medium, 3 low) and the commands it
    /// may still fetch in this turn.
    turn: usize,
    credit: u32,
}

impl Arbiter {
    pub(super) fn new(policy: Arbitration, queues: usize) -> Arbiter {
        let ready = std::array::from_fn(|_| VecDeque::with_capacity(queues));
        let (weights, classes) = match policy {
            Arbitration::RoundRobin => (None, Vec::new()),
            Arbitration::Wrr { weights, classes } => (Some(weights), classes.iter().map(|&c| c as u8).collect()),
        };
        Arbiter { credit: weights.map_or(0, |w| w[0]), weights, classes, ready, turn: 1 }
    }

    #[inline]
    fn class(&self, q: u16) -> usize {
        self.classes.get(q as usize).map_or(0, |&c| c as usize)
    }

    /// Queue `q`, which had no command waiting, now has one.
    #[inline]
    pub(super) fn ready(&mut self, q: QueueId) {
        let c = self.class(q.0);
        debug_assert!(!self.ready[c].contains(&q.0), "queue {q:?} is ready twice");
        self.ready[c].push_back(q.0);
    }

    /// The queue to fetch one command from; `more(q)` says whether it will still hold commands
    /// after this one (then it waits for its next turn).
    #[inline]
    pub(super) fn next(&mut self, more: impl Fn(u16) -> bool) -> Option<u16> {
        let c = match self.weights {
            Some(weights) if self.ready[0].is_empty() => self.weighted_turn(&weights)?,
            // Round robin, or WRR's urgent class.
            _ => 0,
        };
        let q = self.ready[c].pop_front()?;
        if more(q) {
            self.ready[c].push_back(q);
        }
        Some(q)
    }

    /// WRR among high, medium and low: the class whose turn it is, if it has a command and
    /// credit left, else the next class that has a command (with a fresh turn).
    fn weighted_turn(&mut self, weights: &[u32; 3]) -> Option<usize> {
        if (1..4).all(|c| self.ready[c].is_empty()) {
            return None;
        }
        while self.credit == 0 || self.ready[self.turn].is_empty() {
            self.turn = if self.turn == 3 { 1 } else { self.turn + 1 };
            self.credit = weights[self.turn - 1];
        }
        self.credit -= 1;
        Some(self.turn)
    }

    /// Queues with commands waiting.
    pub(super) fn ready_count(&self) -> usize {
        self.ready.iter().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fetches `n` commands from `pending` (commands per queue), one at a time.
    fn order(a: &mut Arbiter, pending: &mut [u32], n: usize) -> Vec<u16> {
        (0..n)
            .map_while(|_| {
                let q = a.next(|q| pending[q as usize] > 1)?;
                pending[q as usize] -= 1;
                Some(q)
            })
            .collect()
    }

    fn wrr(classes: &[Priority]) -> Arbiter {
        Arbiter::new(Arbitration::Wrr { weights: DEFAULT_WRR_WEIGHTS, classes: classes.to_vec() }, classes.len())
    }

    #[test]
    fn round_robin_takes_one_command_from_each_queue_in_turn() {
        let mut a = Arbiter::new(Arbitration::RoundRobin, 3);
        let mut pending = [2, 1, 3];
        for q in 0..3 {
            a.ready(QueueId(q));
        }
        assert_eq!(order(&mut a, &mut pending, 10), [0, 1, 2, 0, 2, 2]);
        assert_eq!(a.ready_count(), 0);
    }

    #[test]
    fn weighted_classes_fetch_their_weight_per_turn() {
        use Priority::*;
        let mut a = wrr(&[High, Medium, Low]);
        let mut pending = [10, 10, 10];
        for q in 0..3 {
            a.ready(QueueId(q));
        }
        // The header's worked example: H H H H M M L, twice, then on.
        assert_eq!(order(&mut a, &mut pending, 14), [0, 0, 0, 0, 1, 1, 2, 0, 0, 0, 0, 1, 1, 2]);
    }

    #[test]
    fn urgent_goes_first_and_empty_classes_pass_their_turn() {
        use Priority::*;
        let mut a = wrr(&[High, Low, Urgent, High]);
        let mut pending = [3, 3, 2, 3];
        a.ready(QueueId(0));
        a.ready(QueueId(1));
        // High's turn: queue 0 twice, then urgent queue 2 arrives and is served at once, both
        // its commands; high's turn goes on (2 of 4 left), round robin with queue 3 once ready.
        assert_eq!(order(&mut a, &mut pending, 2), [0, 0]);
        a.ready(QueueId(2));
        a.ready(QueueId(3));
        assert_eq!(order(&mut a, &mut pending, 4), [2, 2, 0, 3]);
        // High's 4 are spent; medium has nothing, so low fetches its 1; then high again.
        assert_eq!(order(&mut a, &mut pending, 10), [1, 3, 3, 1, 1]);
    }

    #[test]
    fn weights_and_classes_are_checked() {
        let bad = Arbitration::Wrr { weights: [4, 0, 1], classes: vec![Priority::High] };
        assert!(bad.validate(1).unwrap_err().starts_with("device.interface.wrr_weights: 0 is out of range"));
        let short = Arbitration::Wrr { weights: DEFAULT_WRR_WEIGHTS, classes: vec![Priority::High] };
        assert!(short.validate(2).unwrap_err().contains("1 classes for 2 queues"));
        assert_eq!(Arbitration::RoundRobin.validate(9), Ok(()));
    }
}
