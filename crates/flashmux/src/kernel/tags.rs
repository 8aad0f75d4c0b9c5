//! The request tags a kernel's own device requests need: a kernel submits at most `nr_requests`
//! requests at a time, and a submitter that finds none free sleeps until one is.
//!
//! # Model
//! Linux allocates a request for a bio only with a tag (`blk_mq_get_tag`: a driver tag with
//! the scheduler `none`, a scheduler tag otherwise); a submitter that finds none free sleeps on
//! the tag set's wait queues and is woken when a completion frees one. The flusher writing back
//! thousands of dirty pages therefore has at most `nr_requests` of them at the block layer; the
//! rest stay in the page cache until it gets tags. Here each kernel has `nr_requests` tags for
//! its own requests (the page cache's reads and writeback, the journal's writes, flushes,
//! discards; a request its plug merged others into is one): a request without a tag waits, and
//! each completion hands its tag straight to a waiting one.
//!
//! Who gets a freed tag: the tag set's waiters are woken in order, and a submitter that needs
//! another tag waits again behind those already waiting — so a reader or an fsync that starts
//! waiting while the flusher submits a long run gets the next tag but one, not the run's last.
//! Here the waiting requests are in two lines, the **background** ones (what the kernel's own
//! wake-ups start: the flusher's writeback — periodic, background or for memory pressure — and
//! the journal's timed commit) and the **others** (what a job's call or a completion starts:
//! reads and their read-ahead, fsyncs and what they write): when both have requests waiting,
//! freed tags go to them in turn.
//!
//! # Worked example
//! `nr_requests = 2`. The flusher sends writes W1..W4 at t = 0: W1 and W2 take the tags, W3 and
//! W4 wait (background). A read R arrives at t = 1 and waits (other). W1 completes: its tag
//! goes to R (the others' turn); W2 completes: to W3; R completes: to W4. 3 requests waited.
//!
//! # Simplifications
//! The jobs' own direct requests do not take these tags (their `iodepth` bounds them, and the
//! host's tag set `host.queue_depth` bounds what reaches the device); Linux's writeback
//! throttling (`blk-wbt`), which shrinks the depth background writes may use, is not modelled.
//!
//! # Parameters
//! `nr_requests` (`[kernel] nr_requests`, requests): by default the tag set the kernel's block
//! device has with the scheduler `none` — on bare metal the host's (`host.queue_depth`), in a
//! VM its virtio disk's (`virt.queue_size`, blk-mq's depth for virtio-blk); none on an
//! open-channel drive, whose host FTL (pblk) is a bio-based driver: bios reach it without
//! requests or tags.
//!
//! # Source
//! Linux `block/blk-mq-tag.c` (`blk_mq_get_tag`, its `sbitmap` wait queues woken in turn),
//! `block/blk-mq.c` (`blk_mq_get_new_requests`), `Documentation/block/queue-sysfs.rst`
//! (`nr_requests`).

use crate::units::ReqId;
use std::collections::VecDeque;

/// A kernel's tags (see the header).
#[derive(Debug)]
pub(super) struct Tags {
    limit: u32,
    used: u32,
    background: VecDeque<ReqId>,
    others: VecDeque<ReqId>,
    /// When both lines wait, whether the next freed tag is the background line's.
    background_next: bool,
    /// Requests that waited for a tag.
    pub waited: u64,
}

impl Tags {
    /// `limit` tags (`None`: as many as asked for).
    pub fn new(limit: Option<u32>) -> Tags {
        let limit = limit.unwrap_or(u32::MAX);
        assert!(limit > 0, "a tag set needs a tag");
        Tags { limit, used: 0, background: VecDeque::new(), others: VecDeque::new(), background_next: false, waited: 0 }
    }

    /// Request `r` asks for a tag: true if it has one and goes now, false if it waits.
    pub fn take(&mut self, r: ReqId, background: bool) -> bool {
        if self.used < self.limit {
            debug_assert!(self.background.is_empty() && self.others.is_empty(), "a free tag with waiters");
            self.used += 1;
            return true;
        }
        self.waited += 1;
        if background {
            self.background.push_back(r);
        } else {
            self.others.push_back(r);
        }
        false
    }

    /// A request completed: its tag goes to the waiting request returned, or back to the set.
    pub fn put(&mut self) -> Option<ReqId> {
        debug_assert!(self.used > 0, "a tag put back that was not taken");
        let from_background = match (self.background.is_empty(), self.others.is_empty()) {
            (true, true) => {
                self.used -= 1;
                return None;
            }
            (false, true) => true,
            (true, false) => false,
            (false, false) => self.background_next,
        };
        self.background_next = !from_background;
        if from_background {
            self.background.pop_front()
        } else {
            self.others.pop_front()
        }
    }

    pub fn check_invariants(&self) {
        assert!(self.used <= self.limit, "{} tags used of {}", self.used, self.limit);
        let waiting = !self.background.is_empty() || !self.others.is_empty();
        assert!(
            !waiting || self.used == self.limit,
            "requests wait for a tag while {} of {} are used",
            self.used,
            self.limit
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_worked_example() {
        let mut t = Tags::new(Some(2));
        let (w1, w2, w3, w4, r) = (ReqId(1), ReqId(2), ReqId(3), ReqId(4), ReqId(5));
        assert!(t.take(w1, true));
        assert!(t.take(w2, true));
        assert!(!t.take(w3, true));
        assert!(!t.take(w4, true));
        assert!(!t.take(r, false));
        t.check_invariants();
        assert_eq!(t.put(), Some(r)); // W1 done: the others' turn
        assert_eq!(t.put(), Some(w3)); // W2 done
        assert_eq!(t.put(), Some(w4)); // R done
        assert_eq!(t.put(), None); // W3 done: a tag back in the set
        assert_eq!(t.put(), None); // W4 done
        assert_eq!(t.waited, 3);
        t.check_invariants();
        assert!(t.take(ReqId(6), false) && t.take(ReqId(7), true) && !t.take(ReqId(8), true));
    }

    #[test]
    fn one_line_alone_is_served_in_order() {
        let mut t = Tags::new(Some(1));
        assert!(t.take(ReqId(0), false));
        for i in 1..5 {
            assert!(!t.take(ReqId(i), false));
        }
        for i in 1..5 {
            assert_eq!(t.put(), Some(ReqId(i)));
        }
        assert_eq!(t.put(), None);
    }

    proptest! {
        /// Against a reference: never more than `limit` requests hold tags, every request gets
        /// one exactly once, each line in its own order, and a request waits only when all are
        /// taken.
        #[test]
        fn tags_are_never_overcommitted_and_every_request_gets_one(
            limit in 1u32..5,
            steps in proptest::collection::vec((any::<bool>(), any::<bool>()), 1..200),
        ) {
            let mut t = Tags::new(Some(limit));
            let (mut holding, mut next) = (Vec::<(u32, bool)>::new(), 0u32);
            let mut waiting: Vec<(u32, bool)> = Vec::new();
            let mut granted = Vec::new();
            for (submit, background) in steps {
                if submit || holding.is_empty() {
                    let r = next;
                    next += 1;
                    if t.take(ReqId(r), background) {
                        prop_assert!(waiting.is_empty());
                        holding.push((r, background));
                        granted.push(r);
                    } else {
                        prop_assert_eq!(holding.len() as u32, limit);
                        waiting.push((r, background));
                    }
                } else {
                    holding.remove(0);
                    if let Some(ReqId(r)) = t.put() {
                        let i = waiting.iter().position(|&(w, _)| w == r).expect("a waiting request");
                        let line = waiting[i].1;
                        // The first of its line.
                        prop_assert!(waiting[..i].iter().all(|&(_, b)| b != line));
                        holding.push(waiting.remove(i));
                        granted.push(r);
                    }
                }
                t.check_invariants();
                prop_assert!(holding.len() as u32 <= limit);
            }
            let mut g = granted.clone();
            g.sort_unstable();
            g.dedup();
            prop_assert_eq!(g.len(), granted.len());
        }
    }
}
