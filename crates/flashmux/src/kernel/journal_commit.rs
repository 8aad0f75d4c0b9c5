//! The journal's commits, checkpoints and log tail: the steps of [`Journal`] that issue and
//! follow device I/O (the model is in `journal.rs`'s header).

use super::*;

impl Journal {
    /// The running transaction becomes the committing one: its ordered data and log blocks go
    /// out (phase 1).
    pub(super) fn start_commit(&mut self, now: SimTime, out: &mut JournalOut) {
        let txn = self.running.take().expect("a transaction to commit");
        let reason = txn.requested.expect("asked to commit");
        let n = txn.blocks.len() as u64;
        let d = n.div_ceil(TAGS_PER_DESCRIPTOR);
        let total = d + n + 1;
        assert!(total <= self.free, "tid {}: {total} log blocks with {} free: log space overrun", txn.tid.0, self.free);
        let log_start = self.head;
        let mut left = 0;
        if !txn.inodes.is_empty() {
            let inodes = txn.inodes.iter().copied().collect();
            self.issue(Pending::Commit, JournalIoKind::OrderedData { tid: txn.tid, inodes }, out);
            left += 1;
        }
        let first = (d + n).min(self.log_len - log_start);
        for (pos, count) in [(log_start, first), (0, d + n - first)] {
            if count > 0 {
                let kind = JournalIoKind::JournalWrite { tid: txn.tid, block: self.log_block(pos), count };
                self.issue(Pending::Commit, kind, out);
                self.stats.journal_writes += 1;
                left += 1;
            }
        }
        self.head = (log_start + total) % self.log_len;
        self.free -= total;
        let s = &mut self.stats;
        match reason {
            CommitReason::Timer => s.commits_timer += 1,
            CommitReason::Fsync => s.commits_fsync += 1,
            CommitReason::Space => s.commits_space += 1,
            CommitReason::Size => s.commits_size += 1,
        }
        s.descriptor_blocks += d;
        s.metadata_blocks += n;
        s.commit_blocks += 1;
        self.journal_blocks_total += total;
        s.mean_blocks_per_commit = self.journal_blocks_total as f64 / s.commits() as f64;
        let commit_pos = (log_start + d + n) % self.log_len;
        let c = Committing {
            txn,
            log_start,
            log_len: total,
            commit_pos,
            phase: Phase::Writing,
            left,
            flush_after: Vec::new(),
            tail_target: None,
            started: now,
        };
        self.committing = Some(c);
        out.retry = true;
        if left == 0 {
            self.commit_writes_done(out);
        }
    }

    /// Phase 1 is done: where the tail may move, then the commit block (after its pre-flush).
    fn commit_writes_done(&mut self, out: &mut JournalOut) {
        let (tid, pos) = self.log_tail();
        let movable = tid > self.tail_tid && self.distance(self.tail, pos) >= self.max_txn;
        let barrier = self.cfg.barrier;
        let c = self.committing.as_mut().expect("committing");
        c.tail_target = movable.then_some((tid, pos));
        if barrier {
            c.phase = Phase::PreFlush;
            c.left = 1;
            self.issue(Pending::Commit, JournalIoKind::Flush, out);
        } else {
            self.issue_commit_block(out);
        }
    }

    fn issue_commit_block(&mut self, out: &mut JournalOut) {
        let fua = self.cfg.barrier && self.cfg.fua;
        let c = self.committing.as_mut().expect("committing");
        c.phase = Phase::CommitBlock;
        c.left = 1;
        let kind = JournalIoKind::CommitWrite { tid: c.txn.tid, block: self.cfg.start + 1 + c.commit_pos, fua };
        self.issue(Pending::Commit, kind, out);
    }

    pub(super) fn commit_step_done(&mut self, now: SimTime, out: &mut JournalOut) {
        let c = self.committing.as_mut().expect("a commit step completes while committing");
        c.left -= 1;
        if c.left > 0 {
            return;
        }
        let post_flush = self.cfg.barrier && !self.cfg.fua;
        match c.phase {
            Phase::Writing => self.commit_writes_done(out),
            Phase::PreFlush => self.issue_commit_block(out),
            Phase::CommitBlock if post_flush => {
                c.phase = Phase::PostFlush;
                c.left = 1;
                self.issue(Pending::Commit, JournalIoKind::Flush, out);
            }
            Phase::CommitBlock | Phase::PostFlush => self.commit_tail(now, out),
            Phase::Tail => unreachable!("the tail update is not a commit step"),
        }
    }

    /// The commit block is durable: the superblock update if one was planned (and none is in
    /// flight), then the end of the commit.
    fn commit_tail(&mut self, now: SimTime, out: &mut JournalOut) {
        let c = self.committing.as_mut().expect("committing");
        c.phase = Phase::Tail;
        let target = c.tail_target;
        match target {
            Some((tid, pos)) if self.tail_update.is_none() && tid > self.tail_tid => {
                self.start_tail_update(tid, pos, true, out)
            }
            _ => self.finish_commit(now, out),
        }
    }

    /// The commit is done (`j_commit_sequence`): waiters complete, blocks join the checkpoint
    /// list.
    fn finish_commit(&mut self, now: SimTime, out: &mut JournalOut) {
        let c = self.committing.take().expect("committing");
        let tid = c.txn.tid;
        self.commit_seq = tid;
        self.stats.commit_ns_total = self.stats.commit_ns_total.saturating_add(now.since(c.started).ns());
        let mut cp = CpTxn { tid, log_start: c.log_start, log_len: c.log_len, committed: now, left: BTreeSet::new() };
        for &b in &c.txn.blocks {
            if let Some(old) = self.owner.insert(b, tid) {
                self.leave_checkpoint(b, old);
            }
            cp.left.insert(b);
        }
        if !cp.left.is_empty() {
            self.checkpoint.push_back(cp);
        }
        out.fsyncs_done.extend(c.txn.waiters.iter().copied());
        for req in c.flush_after {
            self.issue(Pending::FsyncFlush(req), JournalIoKind::Flush, out);
        }
        out.retry = true;
    }

    /// `block` no longer needs writing home for transaction `tid`; a transaction with nothing
    /// left leaves the checkpoint list.
    pub(super) fn leave_checkpoint(&mut self, block: u64, tid: Tid) {
        let i = self.checkpoint.binary_search_by_key(&tid, |cp| cp.tid).expect("the owner is on the list");
        let cp = &mut self.checkpoint[i];
        assert!(cp.left.remove(&block), "block {block} on tid {}'s list", tid.0);
        if cp.left.is_empty() {
            self.checkpoint.remove(i);
        }
    }

    /// The oldest transaction still in the log and where it starts (`jbd2_journal_get_log_tail`).
    fn log_tail(&self) -> (Tid, u64) {
        if let Some(cp) = self.checkpoint.front() {
            (cp.tid, cp.log_start)
        } else if let Some(c) = &self.committing {
            (c.txn.tid, c.log_start)
        } else if let Some(r) = &self.running {
            (r.tid, self.head)
        } else {
            (Tid(self.next_tid), self.head)
        }
    }

    /// Log blocks from position `from` forward to `to`.
    pub(super) fn distance(&self, from: u64, to: u64) -> u64 {
        (to + self.log_len - from) % self.log_len
    }

    /// One step towards log space (`__jbd2_log_wait_for_space`); false if there is nothing to
    /// do but wait.
    pub(super) fn make_space(&mut self, out: &mut JournalOut) -> bool {
        let (tid, pos) = self.log_tail();
        if tid > self.tail_tid {
            self.start_tail_update(tid, pos, false, out);
            return true;
        }
        let Some(cp) = self.checkpoint.front() else {
            debug_assert!(self.committing.is_some(), "short of log space with nothing to checkpoint");
            return false;
        };
        let tid = cp.tid;
        let (mut batch, mut held) = (Vec::new(), false);
        for &b in &cp.left {
            if self.in_transaction(b) {
                held |= self.running.as_ref().is_some_and(|r| r.set.contains(&b));
            } else if !self.home_inflight.contains_key(&b) {
                batch.push(b);
                if batch.len() == CHECKPOINT_BATCH {
                    break;
                }
            }
        }
        if !batch.is_empty() {
            self.cp_left = batch.len() as u32;
            self.stats.checkpoint_batches += 1;
            self.stats.checkpoint_home_writes += batch.len() as u64;
            for b in batch {
                self.issue_home(b, tid, true, out);
            }
            return true;
        }
        match self.running.as_mut() {
            Some(r) if held && r.requested.is_none() => {
                r.requested = Some(CommitReason::Space);
                true
            }
            _ => false,
        }
    }

    fn start_tail_update(&mut self, tid: Tid, pos: u64, for_commit: bool, out: &mut JournalOut) {
        debug_assert!(self.tail_update.is_none());
        let step = if !for_commit && self.cfg.barrier { TailStep::PreFlush } else { TailStep::Superblock };
        self.tail_update = Some(TailUpdate { tid, pos, step, for_commit });
        match step {
            TailStep::PreFlush => {
                self.issue(Pending::Tail, JournalIoKind::Flush, out);
            }
            _ => self.issue_superblock(out),
        }
    }

    fn issue_superblock(&mut self, out: &mut JournalOut) {
        let fua = self.cfg.barrier && self.cfg.fua;
        self.tail_update.as_mut().expect("a tail update").step = TailStep::Superblock;
        self.stats.superblock_writes += 1;
        self.issue(Pending::Tail, JournalIoKind::SuperblockWrite { block: self.cfg.start, fua }, out);
    }

    pub(super) fn tail_step_done(&mut self, now: SimTime, out: &mut JournalOut) {
        let t = self.tail_update.expect("a tail step completes during a tail update");
        match t.step {
            TailStep::PreFlush => return self.issue_superblock(out),
            TailStep::Superblock if self.cfg.barrier && !self.cfg.fua => {
                self.tail_update.as_mut().expect("checked").step = TailStep::PostFlush;
                self.issue(Pending::Tail, JournalIoKind::Flush, out);
                return;
            }
            TailStep::Superblock | TailStep::PostFlush => {}
        }
        // `__jbd2_update_log_tail`: the space up to the new tail is free.
        self.free += self.distance(self.tail, t.pos);
        self.tail = t.pos;
        self.tail_tid = t.tid;
        self.tail_update = None;
        out.retry = true;
        if t.for_commit {
            self.finish_commit(now, out);
        }
    }
}
