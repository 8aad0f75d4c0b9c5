use super::*;
use JournalIoKind::*;

/// The journal of the header's example: 1024 blocks at device block 1000. Log positions 0 to
/// 1022 are blocks 1001 to 2023; `max_txn` = 256, the descriptor reserve 1 + ⌈256/253⌉ = 3.
const S: u64 = 1000;

fn journal(barrier: bool, fua: bool) -> Journal {
    Journal::new(JournalConfig { barrier, fua, ..JournalConfig::new(S, 1024) }).unwrap()
}

fn ms(ms: u64) -> SimTime {
    SimTime(ms * 1_000_000)
}

fn kinds(out: &JournalOut) -> Vec<JournalIoKind> {
    out.io.iter().map(|i| i.kind.clone()).collect()
}

/// Completes `id` at `now`; checks the invariants; returns the output.
fn done(j: &mut Journal, now: SimTime, id: JournalIoId) -> JournalOut {
    let mut out = JournalOut::default();
    j.io_done(now, id, &mut out).unwrap();
    j.check_invariants();
    out
}

/// Completes every I/O of `out` and of what follows, first issued first; returns all I/O kinds
/// in issue order and the fsyncs done.
fn settle(j: &mut Journal, now: SimTime, out: JournalOut) -> (Vec<JournalIoKind>, Vec<ReqId>) {
    let (mut queue, mut fsyncs): (VecDeque<JournalIo>, Vec<ReqId>) = (out.io.into(), out.fsyncs_done);
    let mut seen = Vec::new();
    while let Some(io) = queue.pop_front() {
        seen.push(io.kind.clone());
        let out = done(j, now, io.id);
        queue.extend(out.io);
        fsyncs.extend(out.fsyncs_done);
    }
    (seen, fsyncs)
}

fn joined(a: Admit) -> Tid {
    match a {
        Admit::Joined(t) => t,
        Admit::Wait => panic!("the handle had to wait"),
    }
}

/// Inode 7's data and blocks 50, 51, 52 (51 twice) at 1 s: transaction 1.
fn three_blocks(j: &mut Journal) {
    let mut out = JournalOut::default();
    assert_eq!(joined(j.add_ordered(ms(1000), FileId(7), &mut out).unwrap()), Tid(1));
    for b in [50, 51, 52, 51] {
        assert_eq!(joined(j.dirty_metadata(ms(1000), b, &mut out).unwrap()), Tid(1));
    }
    assert_eq!(out, JournalOut::default(), "handles alone issue nothing");
    j.check_invariants();
}

#[test]
fn an_fsync_commits_in_jbd2s_order() {
    let mut j = journal(true, true);
    three_blocks(&mut j);
    let mut out = JournalOut::default();
    j.fsync(ms(2000), ReqId(0), Tid(1), &mut out).unwrap();
    j.check_invariants();
    // Phase 1: the ordered data and, at the head (position 0 = block 1001), one descriptor and
    // the 3 copies (51 is logged once): 4 blocks, 16 KiB, in one write.
    let ordered = OrderedData { tid: Tid(1), inodes: vec![FileId(7)] };
    assert_eq!(kinds(&out), [ordered, JournalWrite { tid: Tid(1), block: 1001, count: 4 }]);
    assert!(out.fsyncs_done.is_empty());
    // The ordered data alone is not enough: nothing until the journal write is done too.
    let o = done(&mut j, ms(2001), out.io[0].id);
    assert!(o.io.is_empty() && o.fsyncs_done.is_empty());
    let o = done(&mut j, ms(2002), out.io[1].id);
    assert_eq!(kinds(&o), [Flush], "the commit block's pre-flush");
    let o = done(&mut j, ms(2003), o.io[0].id);
    // The commit block follows the copies: position 4, block 1005, FUA.
    assert_eq!(kinds(&o), [CommitWrite { tid: Tid(1), block: 1005, fua: true }]);
    assert!(o.fsyncs_done.is_empty(), "not durable before the commit block is");
    let o = done(&mut j, ms(2004), o.io[0].id);
    assert_eq!(o.fsyncs_done, [ReqId(0)]);
    assert!(o.io.is_empty(), "no superblock update: the tail cannot move yet");
    assert_eq!(j.commit_sequence(), Tid(1));
    // 1 + 3 + 1 blocks from position 0: head 5, 1023 - 5 = 1018 free.
    let log = j.log_state();
    assert_eq!((log.head, log.tail, log.free), (5, 0, 1018));
    let s = j.stats();
    assert_eq!(
        (s.commits_fsync, s.commits(), s.descriptor_blocks, s.metadata_blocks, s.commit_blocks),
        (1, 1, 1, 3, 1)
    );
    assert_eq!((s.flushes, s.fua_writes, s.journal_writes), (1, 1, 1));
    assert_eq!(s.mean_blocks_per_commit, 5.0);
    assert_eq!(s.commit_ns_total, 4_000_000, "from 2000 ms to 2004 ms");
    // The committed blocks wait for their home writes.
    assert_eq!(j.owner.keys().copied().collect::<Vec<_>>(), [50, 51, 52]);
}

#[test]
fn without_fua_a_commit_is_flush_write_flush() {
    let mut j = journal(true, false);
    three_blocks(&mut j);
    let mut out = JournalOut::default();
    j.fsync(ms(2000), ReqId(0), Tid(1), &mut out).unwrap();
    // The journal write completes before the ordered data: the flush waits for both.
    let o = done(&mut j, ms(2001), out.io[1].id);
    assert!(o.io.is_empty());
    let o = done(&mut j, ms(2002), out.io[0].id);
    assert_eq!(kinds(&o), [Flush]);
    let o = done(&mut j, ms(2003), o.io[0].id);
    assert_eq!(kinds(&o), [CommitWrite { tid: Tid(1), block: 1005, fua: false }]);
    let o = done(&mut j, ms(2004), o.io[0].id);
    assert_eq!(kinds(&o), [Flush], "the block layer's post-flush");
    assert!(o.fsyncs_done.is_empty(), "durable only after the post-flush");
    let o = done(&mut j, ms(2005), o.io[0].id);
    assert_eq!((o.fsyncs_done, o.io), (vec![ReqId(0)], vec![]));
    assert_eq!((j.stats().flushes, j.stats().fua_writes), (2, 0));
}

#[test]
fn without_barriers_a_commit_is_its_writes_alone() {
    let mut j = journal(false, true);
    three_blocks(&mut j);
    let mut out = JournalOut::default();
    j.fsync(ms(2000), ReqId(0), Tid(1), &mut out).unwrap();
    let (seen, fsyncs) = settle(&mut j, ms(2001), out);
    let ordered = OrderedData { tid: Tid(1), inodes: vec![FileId(7)] };
    let commit = CommitWrite { tid: Tid(1), block: 1005, fua: false };
    assert_eq!(seen, [ordered, JournalWrite { tid: Tid(1), block: 1001, count: 4 }, commit]);
    assert_eq!(fsyncs, [ReqId(0)]);
    // An fsync of a committed transaction without barriers: nothing to send, done at once.
    let mut out = JournalOut::default();
    j.fsync(ms(3000), ReqId(1), Tid(1), &mut out).unwrap();
    assert_eq!((out.io, out.fsyncs_done), (vec![], vec![ReqId(1)]));
}

#[test]
fn the_commit_timer_runs_from_the_transactions_start() {
    let mut j = journal(true, true);
    let mut out = JournalOut::default();
    assert_eq!(j.wake_at(), None, "no transaction, no timer");
    joined(j.dirty_metadata(ms(1000), 50, &mut out).unwrap());
    // Due 5 s after the transaction began at 1 s; a later change does not move it.
    assert_eq!(j.wake_at(), Some(ms(6000)));
    joined(j.dirty_metadata(ms(3000), 60, &mut out).unwrap());
    assert_eq!(j.wake_at(), Some(ms(6000)));
    j.wake(ms(5999), &mut out).unwrap();
    assert_eq!(out, JournalOut::default(), "not due at 5.999 s");
    assert_eq!(j.running_tid(), Some(Tid(1)));
    j.wake(ms(6000), &mut out).unwrap();
    // Due at 6 s: a descriptor and the 2 copies at the head.
    assert_eq!(kinds(&out), [JournalWrite { tid: Tid(1), block: 1001, count: 3 }]);
    assert_eq!((j.stats().commits_timer, j.running_tid(), j.wake_at()), (1, None, None));
    // The next transaction begins at 7 s: its timer is due at 12 s.
    joined(j.dirty_metadata(ms(7000), 50, &mut out).unwrap());
    assert_eq!(j.wake_at(), Some(ms(12000)));
}

#[test]
fn a_commit_due_during_another_starts_when_that_one_is_done() {
    let mut j = journal(true, true);
    three_blocks(&mut j);
    let mut first = JournalOut::default();
    j.fsync(ms(2000), ReqId(0), Tid(1), &mut first).unwrap();
    // Transaction 2 begins at 2.5 s while 1 commits; its timer is due at 7.5 s.
    let mut out = JournalOut::default();
    assert_eq!(joined(j.dirty_metadata(ms(2500), 60, &mut out).unwrap()), Tid(2));
    assert_eq!(j.wake_at(), Some(ms(7500)));
    j.wake(ms(7500), &mut out).unwrap();
    assert_eq!(out, JournalOut::default(), "one commit at a time: transaction 2 waits");
    assert_eq!((j.wake_at(), j.running_tid()), (None, Some(Tid(2))));
    // It still takes changes until its commit starts.
    assert_eq!(joined(j.dirty_metadata(ms(7500), 61, &mut out).unwrap()), Tid(2));
    // Transaction 1's I/O completes at 7.6 s; at its end transaction 2's commit starts at the
    // head, position 5 (block 1006): a descriptor and 2 copies.
    let (seen, fsyncs) = settle(&mut j, ms(7600), first);
    assert_eq!(fsyncs, [ReqId(0)]);
    let tail: Vec<_> = seen[4..].to_vec();
    assert_eq!(
        tail,
        [
            JournalWrite { tid: Tid(2), block: 1006, count: 3 },
            Flush,
            CommitWrite { tid: Tid(2), block: 1009, fua: true }
        ]
    );
    assert_eq!((j.stats().commits_fsync, j.stats().commits_timer, j.commit_sequence()), (1, 1, Tid(2)));
}

#[test]
fn an_fsync_of_committed_changes_is_one_flush() {
    // ext4_sync_file: the transaction is committed, so jbd2_trans_will_send_data_barrier is 0
    // and ext4 sends a flush of its own; jbd2_complete_transaction has nothing to wait for.
    let mut j = journal(true, true);
    three_blocks(&mut j);
    let mut out = JournalOut::default();
    j.fsync(ms(2000), ReqId(0), Tid(1), &mut out).unwrap();
    settle(&mut j, ms(2001), out);
    let mut out = JournalOut::default();
    j.fsync(ms(3000), ReqId(1), Tid(1), &mut out).unwrap();
    assert_eq!(kinds(&out), [Flush]);
    assert!(out.fsyncs_done.is_empty(), "done when the flush is");
    let o = done(&mut j, ms(3001), out.io[0].id);
    assert_eq!(o.fsyncs_done, [ReqId(1)]);
    // An inode never changed (tid 0) is the same; a tid not yet begun is refused.
    let mut out = JournalOut::default();
    j.fsync(ms(3002), ReqId(2), Tid(0), &mut out).unwrap();
    assert_eq!(kinds(&out), [Flush]);
    assert_eq!(j.fsync(ms(3003), ReqId(3), Tid(2), &mut out), Err(JournalError::UnknownTid { tid: 2, next: 2 }));
    assert_eq!((j.stats().fsyncs, j.stats().fsyncs_nothing_to_commit, j.stats().commits()), (3, 2, 1));
}

#[test]
fn an_fsync_during_a_commit_flushes_only_past_the_pre_flush() {
    let mut j = journal(true, true);
    three_blocks(&mut j);
    let mut out = JournalOut::default();
    j.fsync(ms(2000), ReqId(0), Tid(1), &mut out).unwrap();
    // During phase 1 the commit's pre-flush is still to come: no flush of its own.
    j.fsync(ms(2001), ReqId(1), Tid(1), &mut out).unwrap();
    assert_eq!(out.io.len(), 2, "nothing more than the commit's writes");
    done(&mut j, ms(2002), out.io[0].id);
    let pre = done(&mut j, ms(2003), out.io[1].id);
    // Past the pre-flush (T_COMMIT_JFLUSH): it waits for the commit, then flushes.
    let mut late = JournalOut::default();
    j.fsync(ms(2004), ReqId(2), Tid(1), &mut late).unwrap();
    assert_eq!(late, JournalOut::default());
    let commit = done(&mut j, ms(2005), pre.io[0].id);
    let o = done(&mut j, ms(2006), commit.io[0].id);
    assert_eq!((kinds(&o), o.fsyncs_done), (vec![Flush], vec![ReqId(0), ReqId(1)]));
    let o = done(&mut j, ms(2007), o.io[0].id);
    assert_eq!(o.fsyncs_done, [ReqId(2)]);
}

#[test]
fn a_transaction_too_large_commits_and_the_handle_joins_the_next() {
    // Credits: the reserve of 3 plus one per block, at most 256: 253 blocks fit.
    let mut j = journal(true, true);
    let mut out = JournalOut::default();
    for b in 0..253 {
        assert_eq!(joined(j.dirty_metadata(ms(0), 10_000 + b, &mut out).unwrap()), Tid(1));
    }
    // A block already in it needs no credit.
    assert_eq!(joined(j.dirty_metadata(ms(0), 10_000, &mut out).unwrap()), Tid(1));
    assert!(out.io.is_empty());
    assert_eq!(j.dirty_metadata(ms(1), 20_000, &mut out).unwrap(), Admit::Wait);
    // The commit starts at once (nothing else commits): 1 descriptor + 253 copies.
    assert_eq!(kinds(&out), [JournalWrite { tid: Tid(1), block: 1001, count: 254 }]);
    assert!(out.retry, "the waiting handle may retry");
    assert_eq!(joined(j.dirty_metadata(ms(1), 20_000, &mut out).unwrap()), Tid(2));
    assert_eq!((j.stats().commits_size, j.stats().waits_for_size), (1, 1));
    j.check_invariants();
}

#[test]
fn writeback_writes_committed_blocks_home_and_a_relogged_block_moves_on() {
    let mut j = journal(true, true);
    three_blocks(&mut j);
    let mut out = JournalOut::default();
    j.fsync(ms(2000), ReqId(0), Tid(1), &mut out).unwrap();
    settle(&mut j, ms(2000), out); // tid 1 committed at 2 s
    let mut out = JournalOut::default();
    assert_eq!(j.writeback(ms(3000), ms(1999), 10, &mut out).unwrap(), 0, "committed after 1.999 s");
    // Block 52 joins transaction 2: writeback skips it (jbd2 keeps it from writeback).
    joined(j.dirty_metadata(ms(3000), 52, &mut out).unwrap());
    assert_eq!(j.writeback(ms(3000), ms(2000), 10, &mut out).unwrap(), 2);
    assert_eq!(kinds(&out), [HomeWrite { block: 50 }, HomeWrite { block: 51 }]);
    // A second writeback does not write what is in flight.
    let mut again = JournalOut::default();
    assert_eq!(j.writeback(ms(3000), ms(2000), 10, &mut again).unwrap(), 0);
    done(&mut j, ms(3001), out.io[0].id);
    done(&mut j, ms(3001), out.io[1].id);
    assert_eq!(j.checkpoint[0].left.iter().copied().collect::<Vec<_>>(), [52]);
    // Transaction 2 commits: 52 leaves tid 1's list, which leaves the checkpoint list.
    let mut out = JournalOut::default();
    j.fsync(ms(4000), ReqId(1), Tid(2), &mut out).unwrap();
    settle(&mut j, ms(4000), out);
    assert_eq!(j.checkpoint.iter().map(|cp| cp.tid).collect::<Vec<_>>(), [Tid(2)]);
    assert_eq!(j.stats().writeback_home_writes, 2);
}

#[test]
fn a_home_write_of_an_older_copy_does_not_clean_a_newer_one() {
    let mut j = journal(true, true);
    three_blocks(&mut j);
    let mut out = JournalOut::default();
    j.fsync(ms(2000), ReqId(0), Tid(1), &mut out).unwrap();
    settle(&mut j, ms(2000), out);
    let mut home = JournalOut::default();
    j.writeback(ms(3000), ms(3000), 1, &mut home).unwrap(); // block 50, tid 1's copy
                                                            // Block 50 is logged again and committed while that write is in flight.
    let mut out = JournalOut::default();
    joined(j.dirty_metadata(ms(3000), 50, &mut out).unwrap());
    j.fsync(ms(3000), ReqId(1), Tid(2), &mut out).unwrap();
    settle(&mut j, ms(3000), out);
    done(&mut j, ms(3001), home.io[0].id);
    assert_eq!(j.owner.get(&50), Some(&Tid(2)), "tid 2's copy still needs writing home");
}

/// Transaction `k` (from 1): 200 new blocks, committed by an fsync, everything completing in
/// order. Returns the I/O it took besides the home writes, and the home writes' count.
fn commit_200(j: &mut Journal, k: u64) -> (Vec<JournalIoKind>, usize) {
    let now = ms(k * 10);
    let mut first = JournalOut::default();
    let mut seen = Vec::new();
    if j.dirty_metadata(now, 100_000 + k * 1000, &mut first).unwrap() == Admit::Wait {
        assert!(first.retry || !first.io.is_empty(), "waiting on something");
        let (s, _) = settle(j, now, first);
        seen = s;
        joined(j.dirty_metadata(now, 100_000 + k * 1000, &mut JournalOut::default()).unwrap());
    }
    for i in 1..200 {
        joined(j.dirty_metadata(now, 100_000 + k * 1000 + i, &mut JournalOut::default()).unwrap());
    }
    let mut out = JournalOut::default();
    j.fsync(now, ReqId(k as u32), Tid(k), &mut out).unwrap();
    // Blocks are never logged over space not yet checkpointed.
    for io in &out.io {
        if let JournalWrite { block, count, .. } = io.kind {
            for p in block - S - 1..block - S - 1 + count {
                for cp in &j.checkpoint {
                    assert!(j.distance(cp.log_start, p) >= cp.log_len, "position {p} is tid {}'s", cp.tid.0);
                }
            }
        }
    }
    let (s, fsyncs) = settle(j, now, out);
    assert_eq!(fsyncs, [ReqId(k as u32)]);
    seen.extend(s);
    let homes = seen.iter().filter(|x| matches!(x, HomeWrite { .. })).count();
    seen.retain(|x| !matches!(x, HomeWrite { .. }));
    (seen, homes)
}

#[test]
fn a_full_log_checkpoints_moves_its_tail_and_wraps() {
    let mut j = journal(true, true);
    // Each transaction takes 1 + 200 + 1 = 202 log blocks. Transactions 1 to 4 fit: space left
    // before each (free - 32): 991, 789, 587, 385, all ≥ 256. Head 808, free 215.
    for k in 1..=4 {
        let (seen, homes) = commit_200(&mut j, k);
        let at = 1001 + (k - 1) * 202;
        let expect = [
            JournalWrite { tid: Tid(k), block: at, count: 201 },
            Flush,
            CommitWrite { tid: Tid(k), block: at + 201, fua: true },
        ];
        assert_eq!((seen, homes), (expect.to_vec(), 0));
    }
    assert_eq!((j.log_state().head, j.log_state().free), (808, 215));
    // Transaction 5's first handle finds 183 < 256: the oldest transaction's 200 blocks go home
    // (4 batches: 64, 64, 64, 8), then a flush and the superblock record the tail at
    // transaction 2 (position 202): 215 + 202 = 417 free. Then the commit at 808.
    let (seen, homes) = commit_200(&mut j, 5);
    let commit5 = [
        JournalWrite { tid: Tid(5), block: 1809, count: 201 },
        Flush,
        CommitWrite { tid: Tid(5), block: 2010, fua: true },
    ];
    let mut expect = vec![Flush, SuperblockWrite { block: 1000, fua: true }];
    expect.extend(commit5);
    assert_eq!((seen, homes), (expect, 200));
    assert_eq!(j.stats().checkpoint_batches, 4);
    let log = j.log_state();
    assert_eq!((log.tail, log.tail_tid, log.head, log.free), (202, Tid(2), 1010, 215));
    // Transaction 6: transaction 2 checkpointed the same way (tail 404, 417 free); its 201
    // log blocks from position 1010 wrap: 13 to the end (blocks 2011 to 2023), 188 from the
    // start (1001 to 1188), the commit block at position 188 (block 1189). Transaction 3
    // (positions 404 to 605) is untouched.
    let (seen, homes) = commit_200(&mut j, 6);
    let expect = vec![
        Flush,
        SuperblockWrite { block: 1000, fua: true },
        JournalWrite { tid: Tid(6), block: 2011, count: 13 },
        JournalWrite { tid: Tid(6), block: 1001, count: 188 },
        Flush,
        CommitWrite { tid: Tid(6), block: 1189, fua: true },
    ];
    assert_eq!((seen, homes), (expect, 200));
    let log = j.log_state();
    assert_eq!((log.tail, log.tail_tid, log.head, log.free), (404, Tid(3), 189, 215));
    let s = j.stats();
    assert_eq!((s.checkpoint_batches, s.checkpoint_home_writes, s.superblock_writes), (8, 400, 2));
    assert_eq!((s.journal_writes, s.flushes, s.waits_for_space, s.checkpoints), (7, 8, 2, 2));
    assert_eq!(j.checkpoint.iter().map(|cp| cp.tid.0).collect::<Vec<_>>(), [3, 4, 5, 6]);
}

#[test]
fn a_commit_moves_the_tail_when_it_frees_a_quarter_of_the_log() {
    // Transactions 1 and 2 (202 blocks each) are written home by writeback; transaction 3's
    // commit finds the oldest transaction in the log is itself, at 404: 404 ≥ 256 blocks
    // to free, so after its commit block the superblock records tail 404.
    let mut j = journal(true, true);
    commit_200(&mut j, 1);
    commit_200(&mut j, 2);
    let mut out = JournalOut::default();
    assert_eq!(j.writeback(ms(25), ms(25), 1000, &mut out).unwrap(), 400);
    settle(&mut j, ms(25), out);
    assert!(j.checkpoint.is_empty());
    let (seen, _) = commit_200(&mut j, 3);
    let expect = vec![
        JournalWrite { tid: Tid(3), block: 1405, count: 201 },
        Flush,
        CommitWrite { tid: Tid(3), block: 1606, fua: true },
        SuperblockWrite { block: 1000, fua: true },
    ];
    assert_eq!(seen, expect);
    let log = j.log_state();
    assert_eq!((log.tail, log.tail_tid, log.free), (404, Tid(3), 1023 - 202));
}

#[test]
fn bad_input_is_an_error() {
    let bad = Journal::new(JournalConfig::new(0, 1023)).unwrap_err();
    assert_eq!(bad.to_string(), "kernel.journal.blocks: 1023: expected 1024 to 4294967295 blocks of 4 KiB");
    let zero = JournalConfig { commit_interval: Nanos::ZERO, ..JournalConfig::new(0, 1024) };
    assert!(matches!(Journal::new(zero), Err(JournalError::Config { key: "commit_interval", .. })));
    let mut j = journal(true, true);
    let mut out = JournalOut::default();
    let inside = j.dirty_metadata(ms(0), 1500, &mut out);
    assert_eq!(inside, Err(JournalError::BlockInJournal { block: 1500, start: 1000, last: 2023 }));
    assert_eq!(j.io_done(ms(0), JournalIoId(9), &mut out), Err(JournalError::UnknownIo(JournalIoId(9))));
    joined(j.dirty_metadata(ms(5), 1, &mut out).unwrap());
    let back = j.dirty_metadata(ms(4), 2, &mut out);
    assert_eq!(back, Err(JournalError::TimeWentBack { now: 4_000_000, clock: 5_000_000 }));
}

/// One step of the property test.
#[derive(Clone, Debug)]
enum Op {
    /// Inode `i` changes `n` metadata blocks from `b` (in a space of 600 blocks past the journal).
    Dirty {
        i: u8,
        b: u16,
        n: u8,
    },
    Ordered {
        i: u8,
    },
    Fsync {
        i: u8,
    },
    /// Time passes; the commit timer runs if due.
    Time {
        ms: u16,
    },
    Writeback {
        max: u8,
    },
    /// The I/O in flight at this index (modulo) completes.
    Complete {
        pick: u16,
    },
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u8..4, 0u16..600, 1u8..120).prop_map(|(i, b, n)| Op::Dirty { i, b, n }),
        1 => (0u8..4).prop_map(|i| Op::Ordered { i }),
        2 => (0u8..4).prop_map(|i| Op::Fsync { i }),
        1 => (0u16..7000).prop_map(|ms| Op::Time { ms }),
        1 => (0u8..20).prop_map(|max| Op::Writeback { max }),
        6 => (0u16..1000).prop_map(|pick| Op::Complete { pick }),
    ]
}

/// The harness of the property test: what the caller (filesystem and block layer) sees.
struct Harness {
    j: Journal,
    now: SimTime,
    inflight: Vec<JournalIo>,
    /// Handles told to wait, in order: (inode, block or none for ordered data).
    waiting: VecDeque<(u8, Option<u64>)>,
    last_tid: [Tid; 4],
    /// fsyncs issued (request → tid) and done (in order).
    fsyncs: BTreeMap<u32, Tid>,
    fsyncs_done: Vec<u32>,
    /// Transactions whose commit block has completed.
    durable: Tid,
}

impl Harness {
    fn absorb(&mut self, out: JournalOut) {
        for r in &out.fsyncs_done {
            let tid = self.fsyncs[&r.0];
            assert!(tid <= self.durable, "fsync {} of tid {} done before its commit block", r.0, tid.0);
        }
        self.fsyncs_done.extend(out.fsyncs_done.iter().map(|r| r.0));
        // Blocks are never logged over space a committed transaction still needs.
        for io in &out.io {
            if let JournalWrite { block, count, .. } = io.kind {
                for p in block - S - 1..block - S - 1 + count {
                    for cp in &self.j.checkpoint {
                        assert!(self.j.distance(cp.log_start, p) >= cp.log_len, "position {p} is tid {}'s", cp.tid.0);
                    }
                }
            }
        }
        self.inflight.extend(out.io);
        if out.retry {
            // A retried handle may retry others itself: take each at most once here.
            for _ in 0..self.waiting.len() {
                let Some((i, b)) = self.waiting.pop_front() else { break };
                self.handle(i, b);
            }
        }
        self.j.check_invariants();
    }

    fn handle(&mut self, i: u8, b: Option<u64>) {
        let mut out = JournalOut::default();
        let admit = match b {
            Some(b) => self.j.dirty_metadata(self.now, b, &mut out),
            None => self.j.add_ordered(self.now, FileId(i as u32), &mut out),
        };
        match admit.unwrap() {
            Admit::Joined(t) => self.last_tid[i as usize] = t,
            Admit::Wait => self.waiting.push_back((i, b)),
        }
        self.absorb(out);
    }

    fn complete(&mut self, pick: usize) {
        let io = self.inflight.remove(pick % self.inflight.len());
        if let CommitWrite { tid, .. } = io.kind {
            // Without FUA the commit is durable after its post-flush: the checks then only see
            // that the commit block preceded the fsync, which holds either way.
            self.durable = self.durable.max(tid);
        }
        let mut out = JournalOut::default();
        self.j.io_done(self.now, io.id, &mut out).unwrap();
        self.absorb(out);
    }

    fn wake(&mut self) {
        if self.j.wake_at().is_some_and(|t| t <= self.now) {
            let mut out = JournalOut::default();
            self.j.wake(self.now, &mut out).unwrap();
            self.absorb(out);
        }
    }

    fn run(&mut self, op: &Op) {
        match *op {
            Op::Dirty { i, b, n } => {
                for k in 0..n as u64 {
                    self.handle(i, Some(3000 + (b as u64 + k) % 600));
                }
            }
            Op::Ordered { i } => self.handle(i, None),
            Op::Fsync { i } => {
                let r = self.fsyncs.len() as u32;
                self.fsyncs.insert(r, self.last_tid[i as usize]);
                let mut out = JournalOut::default();
                self.j.fsync(self.now, ReqId(r), self.last_tid[i as usize], &mut out).unwrap();
                self.absorb(out);
            }
            Op::Time { ms } => {
                self.now += Nanos::from_ms(ms as u64);
                self.wake();
            }
            Op::Writeback { max } => {
                let mut out = JournalOut::default();
                self.j.writeback(self.now, self.now, max as usize, &mut out).unwrap();
                self.absorb(out);
            }
            Op::Complete { pick } if !self.inflight.is_empty() => self.complete(pick as usize),
            Op::Complete { .. } => {}
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// Any mix of handles, fsyncs, timer runs, writeback and completions in any order, with and
    /// without FUA and barriers: every fsync completes exactly once and never before its commit
    /// block; no journal write lands on a committed transaction's log space; the invariants
    /// (log positions, space, checkpoint lists, I/O in flight) hold after every step; at the end
    /// every waiting handle got in and nothing is left in flight.
    #[test]
    fn every_fsync_completes_once_after_its_commit(
        ops in proptest::collection::vec(op(), 1..200),
        barrier in proptest::bool::weighted(0.8),
        fua in proptest::bool::ANY,
    ) {
        let mut h = Harness {
            j: journal(barrier, fua),
            now: SimTime::ZERO,
            inflight: Vec::new(),
            waiting: VecDeque::new(),
            last_tid: [Tid(0); 4],
            fsyncs: BTreeMap::new(),
            fsyncs_done: Vec::new(),
            durable: Tid(0),
        };
        for op in &ops {
            h.run(op);
        }
        // Drain: complete in order, letting time pass (the timer commits what is left).
        for _ in 0..1_000_000 {
            if !h.inflight.is_empty() {
                h.complete(0);
            } else if h.j.running_tid().is_some() || !h.waiting.is_empty() {
                h.now += Nanos::from_secs(5);
                h.wake();
            } else {
                break;
            }
        }
        proptest::prop_assert!(h.inflight.is_empty() && h.waiting.is_empty() && h.j.in_flight() == 0);
        proptest::prop_assert_eq!(h.j.running_tid(), None);
        let mut done = h.fsyncs_done.clone();
        done.sort_unstable();
        proptest::prop_assert_eq!(done, h.fsyncs.keys().copied().collect::<Vec<_>>());
        let s = h.j.stats();
        proptest::prop_assert_eq!(s.commit_blocks, s.commits());
        proptest::prop_assert_eq!(h.j.commit_sequence().0, s.commits());
    }
}
