//! The requests the machine carries, and the block layer's merging of adjacent ones — in a
//! submitting thread's plug (one `io_submit` call) and in the guest's per-vCPU queue.
//!
//! # Model
//! A request joins a plug, or a queue of waiting requests, merged into the last one there when
//! it is the same direction (reads with reads, writes with writes; never trims or flushes),
//! starts where the last one ends, and the two together are at most `max_merge_bytes`. The lead
//! request then covers the whole range and carries the merged ones in a chain; they complete
//! with it. A request that already leads a chain (merged in the plug, then again in the guest
//! queue) brings its chain along. With `max_merge_bytes = 0` nothing merges.
//!
//! # Example (`max_merge_bytes` = 128 KiB)
//! A call of four 64 KiB sequential reads at 0, 64K, 128K, 192K: the second merges into the
//! first (128 KiB), the third cannot (256 KiB > 128 KiB) and starts a new lead, the fourth
//! merges into it. The unplug hands on two 128 KiB commands; the application sees four
//! completions. A 4 KiB write after a 4 KiB read at the adjacent offset is not merged.
//!
//! Parameters: `max_merge_bytes` (bytes, `[virt]`; the host block layer uses the same limit).
//! Source: Linux's `blk_start_plug`/`blk_finish_plug` and `bio_attempt_back_merge`
//! (`max_sectors_kb`); paper A's guest block layer.

use super::ids::{HwThreadId, IdVec, VqId};
use super::machine::ToHost;
use crate::device::IoOp;
use crate::units::{JobId, ReqId};

#[derive(Clone, Copy, Default)]
pub(super) struct ReqInfo {
    pub job: JobId,
    /// The virtqueue it went through, once it is dispatched to one.
    pub vq: Option<VqId>,
    pub op: Option<IoOp>,
    pub offset: u64,
    pub len: u64,
    /// Requests merged into this one (a chain through `next`).
    pub next: Option<ReqId>,
    pub tail: Option<ReqId>,
    /// Merged into another request: the block layer completes it with that one.
    pub member: bool,
}

/// Every request the machine has seen, by id (the simulator's request slab reuses ids).
pub(super) struct Reqs {
    v: IdVec<ReqId, ReqInfo>,
    max_merge: u64,
}

impl std::ops::Index<ReqId> for Reqs {
    type Output = ReqInfo;
    fn index(&self, r: ReqId) -> &ReqInfo {
        &self.v[r]
    }
}

impl Reqs {
    pub fn new(max_merge_bytes: u64) -> Reqs {
        Reqs { v: IdVec::new(), max_merge: max_merge_bytes }
    }

    /// A new request (or a new use of a finished request's id).
    pub fn insert(&mut self, r: ReqId, job: JobId, op: IoOp, offset: u64, len: u64) {
        self.v.grow_to(r, ReqInfo::default());
        self.v[r] = ReqInfo { job, vq: None, op: Some(op), offset, len, next: None, tail: None, member: false };
    }

    pub fn set_vq(&mut self, r: ReqId, q: VqId) {
        self.v[r].vq = Some(q);
    }

    /// `r` and the requests merged into it, in order.
    pub fn chain(&self, r: ReqId) -> Vec<ReqId> {
        let mut out = Vec::new();
        let mut x = Some(r);
        while let Some(y) = x {
            out.push(y);
            x = self.v[y].next;
        }
        out
    }

    /// The command `r` is for the host block layer: its (merged) range.
    pub fn to_host(&self, r: ReqId, cpu: HwThreadId) -> ToHost {
        let info = &self.v[r];
        ToHost { req: r, offset: info.offset, len: info.len, cpu }
    }

    /// Merges `r` into `last` (and its chain) when they are adjacent requests of one direction
    /// within the merge limit. Trims and flushes are never merged.
    pub fn try_merge(&mut self, last: ReqId, r: ReqId) -> bool {
        debug_assert_ne!(last, r);
        let (a, b) = (self.v[last], self.v[r]);
        let mergeable = matches!(b.op, Some(IoOp::Read | IoOp::Write));
        if a.op != b.op || !mergeable || a.offset + a.len != b.offset || a.len + b.len > self.max_merge {
            return false;
        }
        self.join(last, r, a.offset, a.len + b.len);
        true
    }

    /// `r` (and its chain) joins `to`'s chain, which then covers `offset .. offset + len`:
    /// a merge the caller (the plug, or the guest's elevator) found allowed, at either end.
    pub fn join(&mut self, to: ReqId, r: ReqId, offset: u64, len: u64) {
        debug_assert_ne!(to, r);
        let (a, b) = (self.v[to], self.v[r]);
        debug_assert!(a.op == b.op && matches!(b.op, Some(IoOp::Read | IoOp::Write)), "a merge joins one direction");
        debug_assert!(len == a.len + b.len && len <= self.max_merge, "a merge covers both, within the limit");
        debug_assert!(offset == a.offset.min(b.offset), "a merge starts where the first of the two does");
        debug_assert!(!a.member && !b.member, "only a chain's lead merges");
        self.v[r].member = true;
        let lead = &mut self.v[to];
        lead.offset = offset;
        lead.len = len;
        let tail = lead.tail.unwrap_or(to);
        // `r` may lead a chain of its own (merged in a plug, then again in the guest queue):
        // the new tail is its chain's.
        lead.tail = Some(b.tail.unwrap_or(r));
        if lead.next.is_none() {
            lead.next = Some(r);
        } else {
            self.v[tail].next = Some(r);
        }
    }
}

/// A request joins `plug`, merged into its last one when adjacent; true if it merged.
pub(super) fn plug(plug: &mut Vec<ReqId>, reqs: &mut Reqs, r: ReqId) -> bool {
    let merged = plug.last().is_some_and(|&l| reqs.try_merge(l, r));
    if !merged {
        plug.push(r);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    fn reqs(max: u64, ios: &[(IoOp, u64, u64)]) -> Reqs {
        let mut t = Reqs::new(max);
        for (i, &(op, offset, len)) in ios.iter().enumerate() {
            t.insert(ReqId(i as u32), JobId(0), op, offset, len);
        }
        t
    }

    #[test]
    fn the_plug_merges_adjacent_requests_up_to_the_limit() {
        let r = IoOp::Read;
        let mut t = reqs(128 * K, &[(r, 0, 64 * K), (r, 64 * K, 64 * K), (r, 128 * K, 64 * K), (r, 192 * K, 64 * K)]);
        let mut p = Vec::new();
        let merged: Vec<bool> = (0..4).map(|i| plug(&mut p, &mut t, ReqId(i))).collect();
        assert_eq!(merged, [false, true, false, true]);
        assert_eq!(p, [ReqId(0), ReqId(2)]);
        let cmd = t.to_host(ReqId(2), HwThreadId(3));
        assert_eq!((cmd.offset, cmd.len, cmd.cpu), (128 * K, 128 * K, HwThreadId(3)));
        assert_eq!(t.chain(ReqId(0)), [ReqId(0), ReqId(1)]);
        assert!(t[ReqId(1)].member && !t[ReqId(0)].member);
    }

    #[test]
    fn only_same_direction_contiguous_reads_and_writes_merge() {
        let (r, w) = (IoOp::Read, IoOp::Write);
        let mut t = reqs(1 << 20, &[(r, 0, 4 * K), (w, 4 * K, 4 * K), (r, 12 * K, 4 * K), (IoOp::Trim, 0, 4 * K)]);
        t.insert(ReqId(4), JobId(0), IoOp::Trim, 4 * K, 4 * K);
        assert!(!t.try_merge(ReqId(0), ReqId(1)), "a write after a read");
        assert!(!t.try_merge(ReqId(0), ReqId(2)), "a gap");
        assert!(!t.try_merge(ReqId(3), ReqId(4)), "trims are never merged");
        assert_eq!(t[ReqId(0)].len, 4 * K);
    }

    #[test]
    fn no_merging_with_a_zero_limit() {
        let mut t = reqs(0, &[(IoOp::Write, 0, 4 * K), (IoOp::Write, 4 * K, 4 * K)]);
        assert!(!t.try_merge(ReqId(0), ReqId(1)));
    }

    #[test]
    fn a_chain_merged_into_another_brings_its_members() {
        let w = IoOp::Write;
        let mut t = reqs(1 << 20, &[(w, 0, 4 * K), (w, 4 * K, 4 * K), (w, 8 * K, 4 * K), (w, 12 * K, 4 * K)]);
        assert!(t.try_merge(ReqId(0), ReqId(1)));
        assert!(t.try_merge(ReqId(2), ReqId(3)));
        assert!(t.try_merge(ReqId(0), ReqId(2)));
        assert_eq!(t.chain(ReqId(0)), [ReqId(0), ReqId(1), ReqId(2), ReqId(3)]);
        assert_eq!(t[ReqId(0)].len, 16 * K);
        assert_eq!(t[ReqId(0)].tail, Some(ReqId(3)));
        // A fifth request joins at the chain's real tail.
        t.insert(ReqId(4), JobId(0), w, 16 * K, 4 * K);
        assert!(t.try_merge(ReqId(0), ReqId(4)));
        assert_eq!(t.chain(ReqId(0)), [ReqId(0), ReqId(1), ReqId(2), ReqId(3), ReqId(4)]);
    }
}
