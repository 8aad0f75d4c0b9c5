//! The filesystem's journal: ext4's jbd2 in `data=ordered` mode — which metadata blocks a
//! transaction logs, when it commits, the device writes and flushes a commit consists of, and
//! the checkpointing that frees the log for reuse.
//!
//! # Model
//! The journal is a fixed circular region of `blocks` 4 KiB blocks from device block `start`.
//! Its first block is the journal's superblock (where the log's tail is recorded); the log is the
//! other `blocks - 1` blocks (jbd2's `j_first` to `j_last`), addressed here by position 0 to
//! `blocks - 2`. Like the page cache, the journal is a mechanism driven by calls with virtual
//! time and does no I/O itself: each call returns the I/O it needs ([`JournalIo`], each with an
//! id) and is told when each completes ([`Journal::io_done`]).
//!
//! **Transactions.** One running transaction collects the **metadata blocks** the filesystem
//! dirties ([`Journal::dirty_metadata`], a device block number; a block dirtied twice is logged
//! once) and the **ordered inodes** whose newly allocated data must reach the disk before the
//! commit ([`Journal::add_ordered`]). Each call is one jbd2 handle and is admitted
//! (`add_transaction_credits`) only if
//! - the log has room for a whole transaction: `space_left = free - 32 ≥ max_txn`
//!   (`jbd2_log_space_left`; the committing transaction's blocks are already taken from `free`
//!   here); otherwise the call returns [`Admit::Wait`] and the journal checkpoints (below);
//! - a new block keeps the transaction's credits within `max_txn = blocks / 4`
//!   (`j_max_transaction_buffers`), credits being its blocks plus the descriptor reserve
//!   `1 + ⌈max_txn / 253⌉` (`jbd2_descriptor_blocks_per_trans`: the commit block and one
//!   descriptor per 253 blocks); otherwise the transaction is asked to commit (reason *size*)
//!   and the call waits until the commit has started.
//!
//! A waiting caller retries after a call whose output has `retry` set. The transaction is
//! created by its first admitted call; its tid counts from 1.
//!
//! **Commit triggers.** The commit timer: `commit_interval` after the transaction began
//! (`t_expires = jiffies + j_commit_interval`, set in `jbd2_get_transaction`); the caller asks
//! [`Journal::wake_at`] and calls [`Journal::wake`]. An fsync ([`Journal::fsync`], with the tid
//! of the inode's last change, ext4's `i_sync_tid`): `jbd2_complete_transaction` — a running
//! transaction is asked to commit and waited for, a committing one waited for, a committed one
//! needs nothing; ext4 then sends its own flush if the commit will not send one for it
//! (`jbd2_trans_will_send_data_barrier`: the transaction is committed, or its commit has already
//! sent its pre-flush, `T_COMMIT_JFLUSH`). The journal short of space (reason *space*): a
//! checkpoint that must write home a block a running transaction holds commits that transaction
//! first (jbd2's `cs_forced_to_close`). Here a handle is admitted only with room for a whole
//! transaction, and the room shrinks only when a transaction starts to commit, so the log is
//! never short while a transaction runs and this count stays at zero; the rule is kept as
//! jbd2's. A transaction too large (reason *size*, above). One transaction commits at a time;
//! a commit asked for meanwhile starts when the current one is done.
//!
//! **A commit** (`jbd2_journal_commit_transaction`, `barrier=1`, `async_commit` off):
//! 1. the ordered data (`journal_submit_data_buffers`): one [`JournalIoKind::OrderedData`]
//!    asking the caller to write those inodes' dirty data, reported done like any I/O; and at
//!    the same time the journal blocks at the log's head: per batch of up to 253 metadata blocks
//!    one descriptor block (16-byte tags, 64-bit and csum v3, `journal_block_tag3_t`; 4096 − 12
//!    header − 16 UUID − 4 tail = 4064 bytes, less 16 of slack, / 16 = 253) and then the blocks'
//!    copies, written contiguously as one [`JournalIoKind::JournalWrite`] (two when the log
//!    wraps at its end);
//! 2. when all of these are done (`journal_finish_inode_data_buffers` and the wait for the log
//!    buffers), the commit block, written with `REQ_PREFLUSH | REQ_FUA`: a device
//!    [`JournalIoKind::Flush`], then the [`JournalIoKind::CommitWrite`] marked FUA. A device
//!    without FUA gets flush, write, flush (the block layer's POSTFLUSH, `blk-flush.c`). With
//!    `barrier = false`: the commit block alone, no flush, no FUA.
//! 3. if the log's tail can move by at least `max_txn` blocks (computed before the pre-flush,
//!    `jbd2_journal_get_log_tail`), the journal superblock is rewritten (FUA,
//!    `jbd2_update_log_tail`) before the commit is done;
//! 4. the commit is done: its fsyncs complete (those that found it past its pre-flush first
//!    send their own flush), and its blocks join the checkpoint list.
//!
//! **Checkpointing** (`checkpoint.c`). A committed block must be written to its home location
//! before its log space is reused. Each committed transaction keeps the blocks it still needs
//! written home; a block logged again by a later transaction leaves the older one's list when the
//! later one commits; a transaction whose list empties leaves the log. Home writes come from two
//! places: [`Journal::writeback`] (the flusher writing dirty metadata, blocks committed before a
//! time the caller gives; blocks held by a running or committing transaction are skipped, as
//! jbd2 keeps them from writeback), and the checkpoint. When a call finds `space_left < max_txn`
//! (`__jbd2_log_wait_for_space`) the journal, one step at a time:
//! - moves the tail if transactions have left the log since the superblock was written
//!   (`jbd2_cleanup_journal_tail`): a flush of the device, then the superblock (FUA); `free`
//!   grows when that write completes;
//! - else writes home the oldest transaction's remaining blocks, at most 64 at a time
//!   (`JBD2_NR_BATCH`), waiting for each batch (`jbd2_log_do_checkpoint`); a block a newer
//!   transaction holds forces that transaction's commit;
//! - else waits for the committing transaction.
//!
//! # Worked example
//! A journal of 1024 blocks at device block 1000 (`max_txn` 256, log positions 0 to 1022,
//! head at 0). At 1 s the filesystem adds inode 7's data and dirties blocks 50, 51, 52:
//! transaction 1 begins, its timer due at 6 s. An fsync of tid 1 at 2 s commits it:
//! `OrderedData {inode 7}` and `JournalWrite {1001, 4}` (the descriptor at 1001, the copies at
//! 1002 to 1004: 16 KiB); when both are done, `Flush`; then `CommitWrite {1005, FUA}`; when that
//! completes the fsync is done and blocks 50 to 52 await their home writes. The head is at 5.
//! A second fsync of tid 1 finds it committed: one `Flush`, done when it completes.
//!
//! Against a real ext4 (an fsync after a 4 KiB append, on a loop device, which has no FUA:
//! about 3 writes and 2 flushes per fsync): the data write is the page cache's (ext4 writes the
//! file's data before asking the journal, so the ordered-data request then finds it written);
//! the journal write (descriptor, inode table block, block bitmap, group descriptor: one
//! contiguous write, two if it wraps); the commit block between its pre-flush and its
//! post-flush: 3 writes and 2 flushes. With FUA: 3 writes and 1 flush.
//!
//! # Parameters
//! - `start`, `blocks`: the journal's place (device block, 4 KiB) and length (blocks, at least
//!   1024, `JBD2_MIN_JOURNAL_BLOCKS`); mke2fs sizes it with the filesystem
//!   (`ext2fs_default_journal_size`).
//! - `commit_interval` (ns; 5 s, ext4's `commit=` mount option, `JBD2_DEFAULT_MAX_COMMIT_AGE`).
//! - `barrier` (true; ext4's `barrier`/`nobarrier`, `JBD2_BARRIER`).
//! - `fua` (true): whether the device honours FUA; false, the block layer emulates it with a
//!   flush after the write.
//! - Fixed: 253 tags per descriptor, 64 blocks per checkpoint batch, the 32-block slack of
//!   `jbd2_log_space_left`.
//!
//! # Simplifications
//! A handle is one call and reserves exactly one credit per new block (ext4 reserves a
//! worst-case estimate per operation, so its transactions reach the size limit sooner). No
//! revoke records, escaping, fast commits, `async_commit`, `data=journal` or external journal
//! device. Ordered data is asked for per inode, not per range. The commit's ordered data and
//! log writes are asked for together and waited for together. A home write that completes takes
//! its block off the checkpoint list at once (jbd2 finds written buffers when it next scans the
//! list). The checkpoint waits for a whole batch before the next. When a checkpoint's tail
//! update is in flight the commit that would also move the tail skips it (a later update moves
//! it further). A commit's blocks are taken from the log when it starts (jbd2 takes them as it
//! writes, counting the rest as the committing transaction's credits). The superblock write
//! before the first commit after mounting a clean journal (`JBD2_FLUSHED`) is left out: one
//! write per mount. The journal does not know inodes' tids: the caller keeps each inode's last
//! tid (ext4's `i_sync_tid`, from [`Admit::Joined`]) and passes it to [`Journal::fsync`].
//!
//! # Memory
//! The running and committing transactions (at most `max_txn` blocks each, plus their ordered
//! inodes), the checkpoint list (every block on it has a copy in the log, so at most `blocks`
//! entries, as many transactions), the I/O in flight (bounded by those).
//!
//! # Source
//! Linux `fs/jbd2/transaction.c` (`jbd2_get_transaction`, `add_transaction_credits`,
//! `jbd2_descriptor_blocks_per_trans`), `fs/jbd2/commit.c` (`jbd2_journal_commit_transaction`,
//! `journal_submit_commit_record`), `fs/jbd2/checkpoint.c` (`__jbd2_log_wait_for_space`,
//! `jbd2_log_do_checkpoint`, `jbd2_cleanup_journal_tail`), `fs/jbd2/journal.c`
//! (`jbd2_journal_get_log_tail`, `__jbd2_update_log_tail`, `jbd2_trans_will_send_data_barrier`,
//! `jbd2_complete_transaction`), `include/linux/jbd2.h` (`jbd2_log_space_left`),
//! `fs/ext4/fsync.c` (`ext4_sync_file`, `ext4_fsync_journal`), `block/blk-flush.c`.

use super::FileId;
use crate::units::{Nanos, ReqId, SimTime};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Tags in one descriptor block (16-byte tags, csum v3; see the header).
pub const TAGS_PER_DESCRIPTOR: u64 = 253;
/// Home writes per checkpoint batch (`JBD2_NR_BATCH`).
pub const CHECKPOINT_BATCH: usize = 64;
/// Log blocks `jbd2_log_space_left` holds back ("allow for rounding errors").
pub const LOG_SPACE_SLACK: u64 = 32;
/// The smallest journal, blocks (`JBD2_MIN_JOURNAL_BLOCKS`).
pub const MIN_JOURNAL_BLOCKS: u64 = 1024;

/// A transaction id (jbd2's `tid_t`); the first transaction is 1, and 0 means "no change yet".
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize)]
pub struct Tid(pub u64);

/// One I/O the journal asked for; its completion is reported with this id.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize)]
pub struct JournalIoId(pub u64);

/// Why a transaction committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CommitReason {
    Timer,
    Fsync,
    Space,
    Size,
}

/// What an I/O is. Blocks are device block numbers (4 KiB).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum JournalIoKind {
    /// The caller writes these inodes' dirty data (data=ordered) and reports it done.
    OrderedData { tid: Tid, inodes: Vec<FileId> },
    /// `count` journal blocks from `block`: descriptors and metadata copies.
    JournalWrite { tid: Tid, block: u64, count: u64 },
    /// A device cache flush.
    Flush,
    /// The commit block.
    CommitWrite { tid: Tid, block: u64, fua: bool },
    /// A metadata block written to its home location.
    HomeWrite { block: u64 },
    /// The journal's superblock (its first block), recording the log's new tail.
    SuperblockWrite { block: u64, fua: bool },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JournalIo {
    pub id: JournalIoId,
    pub kind: JournalIoKind,
}

/// What a call produced: I/O to issue now (in order), fsyncs now complete, and whether callers
/// told to wait ([`Admit::Wait`]) may try again.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct JournalOut {
    pub io: Vec<JournalIo>,
    pub fsyncs_done: Vec<ReqId>,
    pub retry: bool,
}

/// The answer to a handle ([`Journal::dirty_metadata`], [`Journal::add_ordered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// The change joined transaction `Tid`.
    Joined(Tid),
    /// The journal is short of space or the transaction is full: try again after an output
    /// with `retry`.
    Wait,
}

/// The journal's settings (see the header's parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct JournalConfig {
    pub start: u64,
    pub blocks: u64,
    pub commit_interval: Nanos,
    pub barrier: bool,
    pub fua: bool,
}

impl JournalConfig {
    /// A journal of `blocks` blocks at device block `start`, with ext4's defaults.
    pub fn new(start: u64, blocks: u64) -> JournalConfig {
        JournalConfig { start, blocks, commit_interval: Nanos::from_secs(5), barrier: true, fua: true }
    }

    /// Checks the settings; the error names the key.
    pub fn validate(&self) -> Result<(), JournalError> {
        let bad =
            |key: &'static str, value: u64, expected: &'static str| Err(JournalError::Config { key, value, expected });
        if self.blocks < MIN_JOURNAL_BLOCKS || self.blocks > u32::MAX as u64 {
            return bad("blocks", self.blocks, "1024 to 4294967295 blocks of 4 KiB");
        }
        if self.start.checked_add(self.blocks).is_none_or(|end| end > 1 << 48) {
            return bad("start", self.start, "a journal ending at or below block 2^48");
        }
        let interval = self.commit_interval.ns();
        if interval == 0 || interval > Nanos::from_secs(1 << 31).ns() {
            return bad("commit_interval", interval, "more than 0 ns, at most 2^31 seconds");
        }
        Ok(())
    }
}

/// A call the journal refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error("kernel.journal.{key}: {value}: expected {expected}")]
    Config { key: &'static str, value: u64, expected: &'static str },
    #[error("metadata block {block} is inside the journal (blocks {start} to {last})")]
    BlockInJournal { block: u64, start: u64, last: u64 },
    #[error("{0:?} is not a journal I/O in flight")]
    UnknownIo(JournalIoId),
    #[error("fsync of transaction {tid}: no such transaction has begun (the next is {next})")]
    UnknownTid { tid: u64, next: u64 },
    #[error("time went back: {now} ns is before {clock} ns, the time of the previous call")]
    TimeWentBack { now: u64, clock: u64 },
}

/// The journal's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct JournalStats {
    pub commits_timer: u64,
    pub commits_fsync: u64,
    pub commits_space: u64,
    pub commits_size: u64,
    /// Log blocks written: descriptors, metadata copies, commit blocks.
    pub descriptor_blocks: u64,
    pub metadata_blocks: u64,
    pub commit_blocks: u64,
    /// Journal writes issued (a commit's log blocks are one, or two when they wrap).
    pub journal_writes: u64,
    /// Journal blocks (descriptors, copies and the commit block) per commit.
    pub mean_blocks_per_commit: f64,
    pub flushes: u64,
    pub fua_writes: u64,
    /// Times a handle found the log short of space and checkpointing began
    /// (`__jbd2_log_wait_for_space`).
    pub checkpoints: u64,
    pub checkpoint_batches: u64,
    pub checkpoint_home_writes: u64,
    pub writeback_home_writes: u64,
    pub superblock_writes: u64,
    pub fsyncs: u64,
    /// fsyncs whose transaction had already committed.
    pub fsyncs_nothing_to_commit: u64,
    pub waits_for_space: u64,
    pub waits_for_size: u64,
    /// Time from a commit's start to its end, summed, ns.
    pub commit_ns_total: u64,
}

impl JournalStats {
    pub fn commits(&self) -> u64 {
        self.commits_timer + self.commits_fsync + self.commits_space + self.commits_size
    }
}

/// Where the log stands (positions are 0 to `blocks - 2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LogState {
    pub head: u64,
    pub tail: u64,
    pub tail_tid: Tid,
    pub free: u64,
    pub max_transaction_blocks: u64,
}

/// A running transaction (also the body of a committing one).
#[derive(Debug)]
struct Txn {
    tid: Tid,
    started: SimTime,
    /// Metadata blocks in the order first dirtied, and as a set.
    blocks: Vec<u64>,
    set: BTreeSet<u64>,
    inodes: BTreeSet<FileId>,
    requested: Option<CommitReason>,
    /// fsyncs told when it is durable.
    waiters: Vec<ReqId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Ordered data and log blocks in flight.
    Writing,
    PreFlush,
    CommitBlock,
    PostFlush,
    /// The superblock update after the commit block.
    Tail,
}

#[derive(Debug)]
struct Committing {
    txn: Txn,
    log_start: u64,
    log_len: u64,
    commit_pos: u64,
    phase: Phase,
    /// I/O of the current phase in flight.
    left: u32,
    /// fsyncs that came after the pre-flush: each sends a flush when the commit is done.
    flush_after: Vec<ReqId>,
    tail_target: Option<(Tid, u64)>,
    started: SimTime,
}

/// A committed transaction on the checkpoint list.
#[derive(Debug)]
struct CpTxn {
    tid: Tid,
    log_start: u64,
    log_len: u64,
    committed: SimTime,
    /// Blocks still to be written home.
    left: BTreeSet<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TailStep {
    PreFlush,
    Superblock,
    PostFlush,
}

#[derive(Clone, Copy, Debug)]
struct TailUpdate {
    tid: Tid,
    pos: u64,
    step: TailStep,
    for_commit: bool,
}

#[derive(Clone, Copy, Debug)]
enum Pending {
    Commit,
    Tail,
    Home { block: u64, tid: Tid, checkpoint: bool },
    FsyncFlush(ReqId),
}

/// The journal (see the header).
#[derive(Debug)]
pub struct Journal {
    cfg: JournalConfig,
    /// Log blocks (`blocks - 1`), the largest transaction's credits, the descriptor reserve.
    log_len: u64,
    max_txn: u64,
    reserve: u64,
    head: u64,
    tail: u64,
    tail_tid: Tid,
    free: u64,
    next_tid: u64,
    /// The last committed transaction (0: none).
    commit_seq: Tid,
    running: Option<Txn>,
    committing: Option<Committing>,
    checkpoint: VecDeque<CpTxn>,
    /// Each block on a checkpoint list, with its transaction.
    owner: BTreeMap<u64, Tid>,
    /// Blocks with a home write in flight.
    home_inflight: BTreeMap<u64, JournalIoId>,
    /// Checkpoint home writes in flight.
    cp_left: u32,
    tail_update: Option<TailUpdate>,
    /// A handle waits for log space.
    space_wanted: bool,
    pending: BTreeMap<JournalIoId, Pending>,
    next_io: u64,
    clock: SimTime,
    journal_blocks_total: u64,
    stats: JournalStats,
}

impl Journal {
    pub fn new(cfg: JournalConfig) -> Result<Journal, JournalError> {
        cfg.validate()?;
        let max_txn = cfg.blocks / 4;
        Ok(Journal {
            cfg,
            log_len: cfg.blocks - 1,
            max_txn,
            reserve: 1 + max_txn.div_ceil(TAGS_PER_DESCRIPTOR),
            head: 0,
            tail: 0,
            tail_tid: Tid(1),
            free: cfg.blocks - 1,
            next_tid: 1,
            commit_seq: Tid(0),
            running: None,
            committing: None,
            checkpoint: VecDeque::new(),
            owner: BTreeMap::new(),
            home_inflight: BTreeMap::new(),
            cp_left: 0,
            tail_update: None,
            space_wanted: false,
            pending: BTreeMap::new(),
            next_io: 0,
            clock: SimTime::ZERO,
            journal_blocks_total: 0,
            stats: JournalStats::default(),
        })
    }

    pub fn config(&self) -> &JournalConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &JournalStats {
        &self.stats
    }

    pub fn log_state(&self) -> LogState {
        LogState {
            head: self.head,
            tail: self.tail,
            tail_tid: self.tail_tid,
            free: self.free,
            max_transaction_blocks: self.max_txn,
        }
    }

    /// Free log blocks less the slack (`jbd2_log_space_left`).
    pub fn space_left(&self) -> u64 {
        self.free.saturating_sub(LOG_SPACE_SLACK)
    }

    pub fn running_tid(&self) -> Option<Tid> {
        self.running.as_ref().map(|r| r.tid)
    }

    /// The last committed transaction (`Tid(0)`: none yet).
    pub fn commit_sequence(&self) -> Tid {
        self.commit_seq
    }

    /// I/O the journal waits for.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The device block of log position `pos`.
    pub fn log_block(&self, pos: u64) -> u64 {
        self.cfg.start + 1 + pos
    }

    /// The filesystem dirtied metadata block `block` (a handle).
    pub fn dirty_metadata(&mut self, now: SimTime, block: u64, out: &mut JournalOut) -> Result<Admit, JournalError> {
        self.tick(now)?;
        let (start, end) = (self.cfg.start, self.cfg.start + self.cfg.blocks);
        if (start..end).contains(&block) {
            return Err(JournalError::BlockInJournal { block, start, last: end - 1 });
        }
        let new_block = !self.running.as_ref().is_some_and(|r| r.set.contains(&block));
        let admit = self.admit(now, new_block, out);
        // Joining leaves the running transaction as it was (a commit starts only when admission
        // waits), so a block it held already needs nothing more.
        if let (Admit::Joined(_), true) = (admit, new_block) {
            let r = self.running.as_mut().expect("admitted to the running transaction");
            let fresh = r.set.insert(block);
            debug_assert!(fresh, "block {block} was new to the running transaction");
            r.blocks.push(block);
        }
        Ok(admit)
    }

    /// The filesystem allocated data for `inode` that must reach the disk before the commit
    /// (a handle; `jbd2_journal_inode_ranged_write`).
    pub fn add_ordered(&mut self, now: SimTime, inode: FileId, out: &mut JournalOut) -> Result<Admit, JournalError> {
        self.tick(now)?;
        let admit = self.admit(now, false, out);
        if let Admit::Joined(_) = admit {
            self.running.as_mut().expect("admitted to the running transaction").inodes.insert(inode);
        }
        Ok(admit)
    }

    /// An fsync `req` of an inode whose last change is in transaction `tid` (`ext4_sync_file`
    /// after the file's data is written): `req` is in `fsyncs_done` of this or a later output
    /// once that change is durable.
    pub fn fsync(&mut self, now: SimTime, req: ReqId, tid: Tid, out: &mut JournalOut) -> Result<(), JournalError> {
        self.tick(now)?;
        if tid.0 >= self.next_tid {
            return Err(JournalError::UnknownTid { tid: tid.0, next: self.next_tid });
        }
        self.stats.fsyncs += 1;
        if let Some(r) = self.running.as_mut().filter(|r| r.tid == tid) {
            r.requested.get_or_insert(CommitReason::Fsync);
            r.waiters.push(req);
            self.pump(now, out);
            return Ok(());
        }
        let barrier = self.cfg.barrier;
        if let Some(c) = self.committing.as_mut().filter(|c| c.txn.tid == tid) {
            match c.phase {
                Phase::Writing => c.txn.waiters.push(req),
                _ if barrier => c.flush_after.push(req),
                _ => c.txn.waiters.push(req),
            }
            return Ok(());
        }
        debug_assert!(tid <= self.commit_seq, "tid {} is neither running, committing nor committed", tid.0);
        self.stats.fsyncs_nothing_to_commit += 1;
        if barrier {
            self.issue(Pending::FsyncFlush(req), JournalIoKind::Flush, out);
        } else {
            out.fsyncs_done.push(req);
        }
        Ok(())
    }

    /// When the commit timer of the running transaction is due, if it is.
    pub fn wake_at(&self) -> Option<SimTime> {
        self.running.as_ref().filter(|r| r.requested.is_none()).map(|r| r.started + self.cfg.commit_interval)
    }

    /// The commit timer at `now`: a running transaction due commits (or will, after the one
    /// committing).
    pub fn wake(&mut self, now: SimTime, out: &mut JournalOut) -> Result<(), JournalError> {
        self.tick(now)?;
        if self.wake_at().is_some_and(|t| t <= now) {
            self.running.as_mut().expect("due").requested = Some(CommitReason::Timer);
            self.pump(now, out);
        }
        Ok(())
    }

    /// The flusher writes home up to `max` committed metadata blocks of transactions committed
    /// at or before `committed_by`, oldest first; returns how many it asked for.
    pub fn writeback(
        &mut self,
        now: SimTime,
        committed_by: SimTime,
        max: usize,
        out: &mut JournalOut,
    ) -> Result<usize, JournalError> {
        self.tick(now)?;
        let mut picked = Vec::new();
        'txns: for cp in self.checkpoint.iter().take_while(|cp| cp.committed <= committed_by) {
            for &b in &cp.left {
                if picked.len() == max {
                    break 'txns;
                }
                if !self.home_inflight.contains_key(&b) && !self.in_transaction(b) {
                    picked.push((b, cp.tid));
                }
            }
        }
        for &(block, tid) in &picked {
            self.issue_home(block, tid, false, out);
        }
        self.stats.writeback_home_writes += picked.len() as u64;
        Ok(picked.len())
    }

    /// I/O `id` completed at `now`.
    pub fn io_done(&mut self, now: SimTime, id: JournalIoId, out: &mut JournalOut) -> Result<(), JournalError> {
        self.tick(now)?;
        let p = self.pending.remove(&id).ok_or(JournalError::UnknownIo(id))?;
        match p {
            Pending::Commit => self.commit_step_done(now, out),
            Pending::Tail => self.tail_step_done(now, out),
            Pending::FsyncFlush(req) => out.fsyncs_done.push(req),
            Pending::Home { block, tid, checkpoint } => {
                self.home_inflight.remove(&block);
                if checkpoint {
                    self.cp_left -= 1;
                }
                if self.owner.get(&block) == Some(&tid) {
                    self.owner.remove(&block);
                    self.leave_checkpoint(block, tid);
                }
            }
        }
        self.pump(now, out);
        Ok(())
    }

    fn tick(&mut self, now: SimTime) -> Result<(), JournalError> {
        if now < self.clock {
            return Err(JournalError::TimeWentBack { now: now.0, clock: self.clock.0 });
        }
        self.clock = now;
        Ok(())
    }

    /// A handle starts (`start_this_handle`): room in the log for a whole transaction, and for
    /// one more credit when `new_block`.
    fn admit(&mut self, now: SimTime, new_block: bool, out: &mut JournalOut) -> Admit {
        if self.space_left() < self.max_txn {
            self.stats.checkpoints += !self.space_wanted as u64;
            self.space_wanted = true;
            self.stats.waits_for_space += 1;
            self.pump(now, out);
            return Admit::Wait;
        }
        if self.running.is_none() {
            self.running = Some(Txn {
                tid: Tid(self.next_tid),
                started: now,
                blocks: Vec::new(),
                set: BTreeSet::new(),
                inodes: BTreeSet::new(),
                requested: None,
                waiters: Vec::new(),
            });
            self.next_tid += 1;
        }
        let (max_txn, reserve) = (self.max_txn, self.reserve);
        let r = self.running.as_mut().expect("created above");
        if new_block && reserve + r.blocks.len() as u64 + 1 > max_txn {
            r.requested.get_or_insert(CommitReason::Size);
            self.stats.waits_for_size += 1;
            self.pump(now, out);
            return Admit::Wait;
        }
        Admit::Joined(r.tid)
    }

    /// Starts what can start: the next commit, the next step towards log space.
    fn pump(&mut self, now: SimTime, out: &mut JournalOut) {
        loop {
            if self.committing.is_none() && self.running.as_ref().is_some_and(|r| r.requested.is_some()) {
                self.start_commit(now, out);
                continue;
            }
            if self.space_wanted {
                if self.space_left() >= self.max_txn {
                    self.space_wanted = false;
                    out.retry = true;
                } else if self.tail_update.is_none() && self.cp_left == 0 && self.make_space(out) {
                    continue;
                }
            }
            break;
        }
    }

    fn issue(&mut self, p: Pending, kind: JournalIoKind, out: &mut JournalOut) -> JournalIoId {
        let id = JournalIoId(self.next_io);
        self.next_io += 1;
        match kind {
            JournalIoKind::Flush => self.stats.flushes += 1,
            JournalIoKind::CommitWrite { fua: true, .. } | JournalIoKind::SuperblockWrite { fua: true, .. } => {
                self.stats.fua_writes += 1
            }
            _ => {}
        }
        self.pending.insert(id, p);
        out.io.push(JournalIo { id, kind });
        id
    }

    fn issue_home(&mut self, block: u64, tid: Tid, checkpoint: bool, out: &mut JournalOut) {
        let id = self.issue(Pending::Home { block, tid, checkpoint }, JournalIoKind::HomeWrite { block }, out);
        self.home_inflight.insert(block, id);
    }

    /// Whether a running or committing transaction holds `block`.
    fn in_transaction(&self, block: u64) -> bool {
        self.running.as_ref().is_some_and(|r| r.set.contains(&block))
            || self.committing.as_ref().is_some_and(|c| c.txn.set.contains(&block))
    }

    /// Panics if the journal's state is inconsistent.
    pub fn check_invariants(&self) {
        let l = self.log_len;
        assert!(self.free <= l && self.head < l && self.tail < l, "positions out of the log");
        assert_eq!((self.tail + l - self.free) % l, self.head, "tail + used blocks = head");
        assert!(self.free > 0, "a full log");
        // The transactions still in the log lie between tail and head, in tid order, apart.
        let used = l - self.free;
        let live = self.checkpoint.iter().map(|cp| (cp.tid, cp.log_start, cp.log_len));
        let committing = self.committing.as_ref().map(|c| (c.txn.tid, c.log_start, c.log_len));
        let (mut at, mut last) = (0, Tid(0));
        for (tid, start, len) in live.chain(committing) {
            let off = self.distance(self.tail, start);
            assert!(off >= at && off + len <= used, "tid {} at {start}+{len} outside the used log", tid.0);
            assert!(tid > last && tid >= self.tail_tid, "tid {} out of order", tid.0);
            (at, last) = (off + len, tid);
        }
        // Checkpoint lists and their owners agree; each list is non-empty.
        let mut listed = 0;
        for cp in &self.checkpoint {
            assert!(!cp.left.is_empty() && cp.tid <= self.commit_seq, "tid {}: an empty or uncommitted list", cp.tid.0);
            for b in &cp.left {
                assert_eq!(self.owner.get(b), Some(&cp.tid), "block {b}'s owner");
            }
            listed += cp.left.len();
        }
        assert_eq!(listed, self.owner.len(), "blocks listed = owners");
        assert!(self.owner.len() as u64 <= l && self.checkpoint.len() as u64 <= l, "bounded by the log");
        // Transactions in tid order, within their credits.
        let ctid = self.committing.as_ref().map(|c| c.txn.tid);
        assert!(ctid.is_none_or(|t| t > self.commit_seq), "committing after committed");
        if let Some(r) = &self.running {
            assert!(r.tid > ctid.unwrap_or(self.commit_seq) && r.tid.0 < self.next_tid, "running tid");
            assert_eq!(r.blocks.len(), r.set.len(), "running blocks");
            assert!(self.reserve + r.blocks.len() as u64 <= self.max_txn, "running over its credits");
        }
        // I/O in flight agrees with the states that wait for it.
        let (mut commit, mut tail, mut home, mut cp) = (0u32, 0, 0, 0u32);
        for p in self.pending.values() {
            match p {
                Pending::Commit => commit += 1,
                Pending::Tail => tail += 1,
                Pending::Home { checkpoint, .. } => (home, cp) = (home + 1, cp + *checkpoint as u32),
                Pending::FsyncFlush(_) => {}
            }
        }
        assert_eq!(commit, self.committing.as_ref().map_or(0, |c| c.left), "commit I/O in flight");
        assert_eq!(tail, self.tail_update.is_some() as u32, "tail I/O in flight");
        assert_eq!((home, cp), (self.home_inflight.len(), self.cp_left), "home writes in flight");
        if let Some(c) = &self.committing {
            assert!(c.phase != Phase::Tail || self.tail_update.is_some_and(|t| t.for_commit), "commit tail");
        }
    }
}

#[path = "journal_commit.rs"]
mod commit;
#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
