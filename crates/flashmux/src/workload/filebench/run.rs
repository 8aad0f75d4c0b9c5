//! Running a Filebench workload: each thread's loop of flowops turned into the system calls it
//! makes — creates, opens, closes, deletes, stats, reads, writes and fsyncs of the files of its
//! filesets — one at a time, as Filebench's threads make them. A mechanism with no I/O of its
//! own: the caller carries each call out on a filesystem and reports when it returned.
//!
//! # Model
//! - **Filesets** (`define fileset`): `entries` files named `00000001`.. under the fileset's
//!   directory `path/name`, in a tree of directories of `dirwidth` entries (the leaves hold the
//!   files in order; Filebench draws the tree's depth from a gamma distribution, here every leaf
//!   is at the depth `dirwidth` needs). Each entry's size is drawn once (Filebench's `fse_size`):
//!   gamma-distributed with shape `filesizegamma / 1000` around the mean `size` (exactly the mean
//!   with `filesizegamma=0`). Each entry exists before the run with probability `prealloc`%
//!   (Filebench's `fileset_populate` draws the same way), written whole.
//! - **Picking a file** (`fileset_pick`): from the entries that exist (open, delete, stat) or do
//!   not (create) and are not in use by a thread: the first at or after a uniformly drawn index,
//!   wrapping (Filebench searches its tree for the nearest entry to a random one). A file opened
//!   or created stays in use until it is closed. No candidate: the flowop does nothing (Filebench
//!   returns `FILEBENCH_NORSC` and moves on), counted in `skipped`.
//! - **Flowops** (`flowop_library.c`, Filebench 1.4.9):
//!   - `createfile`, `openfile`: a file on the flowop's descriptor (`fd`, default 0), its
//!     position at 0; `closefile` releases it; `deletefile`, `statfile` pick a file of their own;
//!   - `readwholefile`: reads of `iosize` (the whole file when absent) from 0 to the end;
//!   - `writewholefile`: writes of `iosize` up to the size of the entry on `srcfd` (or its own),
//!     with Filebench's loop as it is: `for (seek = 0; seek < wss; seek += wsize) { write(wsize);
//!     wsize = MIN(wss - seek, iosize); }` — so a 1.5 MiB file written with `iosize=1m` gets two
//!     writes of 1 MiB;
//!   - `appendfile`: one write of `iosize` at the end; `appendfilerand`: of a size drawn
//!     uniformly from 0 to `iosize` (nothing for 0);
//!   - `read`, `write`: `iosize` at the descriptor's position (advancing; a read at the end goes
//!     back to 0), or with `random` at a multiple of `iosize` drawn within `workingset` (or the
//!     file); a file smaller than `iosize` skips the flowop;
//!   - `fsync` the descriptor's file, `fsyncset` every file the thread has open from the fileset;
//!     `dsync` on a write flowop: an fsync after each write (O_DSYNC);
//!   - `delay value=N`: N seconds; the limits (`opslimit`, `iopslimit`, `bwlimit`, `eventlimit`)
//!     do nothing (Filebench returns at once from them without `eventgen`);
//!   - a read, write or append on a descriptor with no file opens one from the flowop's fileset
//!     first (`flowoplib_filesetup`), as a separate open.
//! - Each flowop repeats `iters` times before the next; a thread's loop runs until its job stops.
//!
//! # Worked example
//! `varmail.f`'s loop from a thread's start: `deletefile` picks an existing file (a delete call);
//! `createfile` picks a missing one (a create, on fd 1); `appendfilerand iosize=16k` draws, say,
//! 5,000 bytes: one write of 5,000 bytes at offset 0; `fsync`: one fsync of that file;
//! `closefile`: a close. The flowop's latency is from its first call's start to its last call's
//! return, as `flowop_beginop`/`flowop_endop` time it.
//!
//! # Source
//! Filebench 1.4.9 `flowop_library.c` (`flowoplib_*`), `fileset.c` (`fileset_pick`,
//! `fileset_populate`), `threadflow.c`.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rand_distr::{Distribution, Gamma};
use serde::Serialize;

use super::model::{Flowop, FlowopKind, Support, Workload};
use crate::engine::SimRng;

/// A file of the workload's filesets, by its index over all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct EntryId(pub u32);

/// A directory of the workload's filesets (see [`Setup`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct DirId(pub u32);

/// What a call asks of the filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    Create,
    Open,
    Close,
    Delete,
    Stat,
    Read,
    Write,
    Fsync,
}

/// One system call of a thread: `offset` and `len` in bytes of the file (reads and writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub kind: CallKind,
    pub entry: EntryId,
    pub offset: u64,
    pub len: u64,
}

/// What a thread does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A call; the thread waits for it to return ([`Runner::returned`]).
    Call(Call),
    /// Nothing for this many nanoseconds (`delay`); then ask again.
    Sleep(u64),
}

/// The tree and files to make before the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Setup {
    /// Directories in creation order: (id, parent (`None`: the filesystem's root), name).
    pub dirs: Vec<(DirId, Option<DirId>, String)>,
    /// Every entry: its directory, its name, and its size if it exists before the run.
    pub files: Vec<(EntryId, DirId, String, Option<u64>)>,
}

/// A flowop's figures, as Filebench reports them per flowop.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FlowopStats {
    pub name: String,
    pub kind: &'static str,
    /// Completed executions.
    pub ops: u64,
    /// Bytes read or written.
    pub bytes: u64,
    /// Sum of their latencies, ns.
    pub latency_ns: u64,
    /// Executions that did nothing: no file to pick, or a file too small.
    pub skipped: u64,
    /// Executions whose call failed (ENOSPC): its thread stopped, as Filebench stops a thread
    /// whose flowop fails.
    pub failed: u64,
}

/// A fileset's files at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FilesetStats {
    pub name: String,
    pub entries: u64,
    pub existing: u64,
    pub bytes: u64,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunnerStats {
    pub flowops: Vec<FlowopStats>,
    pub filesets: Vec<FilesetStats>,
}

struct Entry {
    fileset: u16,
    /// The size drawn for it (what `writewholefile` writes).
    size: u64,
    /// Its current size, if it exists.
    current: Option<u64>,
    busy: bool,
}

struct FilesetRt {
    name: String,
    first: u32,
    count: u32,
    /// Entries not in use, existing and not.
    free_exist: BTreeSet<u32>,
    free_missing: BTreeSet<u32>,
}

/// A file open on a thread's descriptor, with the descriptor's position.
#[derive(Clone, Copy, Debug)]
struct Fd {
    entry: EntryId,
    pos: u64,
}

/// A flowop's attributes as the runner uses them.
#[derive(Clone, Copy, Debug)]
struct OpRt {
    kind: FlowopKind,
    fileset: Option<u16>,
    fd: u32,
    srcfd: Option<u32>,
    iosize: Option<u64>,
    iters: u64,
    workingset: Option<u64>,
    value: u64,
    random: bool,
    dsync: bool,
}

/// The calls left of the flowop in progress.
#[derive(Clone, Debug)]
enum Work {
    /// `readwholefile`: reads of `chunk` from `pos` to `end`.
    ReadWhole { entry: EntryId, pos: u64, end: u64, chunk: u64 },
    /// `writewholefile`'s loop, with Filebench's `seek` and `wsize`.
    WriteWhole { entry: EntryId, seek: u64, wsize: u64, wss: u64, chunk: u64 },
    /// `fsyncset`: the files left to fsync.
    Fsyncs(Vec<EntryId>),
}

struct ThreadRt {
    /// Its definition: (process, thread) indices.
    def: (usize, usize),
    pc: usize,
    iter: u64,
    fds: BTreeMap<u32, Fd>,
    work: Option<Work>,
    /// An fsync due after a `dsync` write.
    sync_due: Option<EntryId>,
    /// The descriptor an open or create out will put its file on.
    open_fd: Option<u32>,
    /// The open out is the flowop's own (`createfile`, `openfile`), not one it needed first.
    open_is_flowop: bool,
    /// When the flowop in progress made its first call.
    started: Option<u64>,
    /// A call (or sleep) is out.
    waiting: bool,
}

/// A Filebench workload running (see the header).
pub struct Runner {
    /// Per thread definition, per flowop.
    ops: Vec<Vec<Vec<OpRt>>>,
    entries: Vec<Entry>,
    filesets: Vec<FilesetRt>,
    threads: Vec<ThreadRt>,
    /// Per thread definition, per flowop.
    stats: Vec<Vec<Vec<FlowopStats>>>,
    rng: SimRng,
    setup: Setup,
}

/// Why a workload cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("line {line}: flowop {name} ({kind}): {reason}")]
    Flowop { line: usize, name: String, kind: &'static str, reason: String },
    #[error("line {line}: {what} {name}: {count} {unit}: at most {max} (a run holds each in memory)")]
    Limit { line: usize, what: &'static str, name: String, count: u64, unit: &'static str, max: u64 },
}

/// Most files of all of a workload's filesets, and most threads of all its processes.
pub const MAX_ENTRIES: u64 = 1 << 24;
pub const MAX_THREADS: u64 = 4096;

fn check_limits(w: &Workload) -> Result<(), RunError> {
    let mut entries = 0u64;
    for f in &w.filesets {
        entries = entries.saturating_add(f.entries);
        if entries > MAX_ENTRIES {
            let (line, name, count) = (f.line, f.name.clone(), f.entries);
            return Err(RunError::Limit { line, what: "fileset", name, count, unit: "files", max: MAX_ENTRIES });
        }
    }
    let mut threads = 0u64;
    for p in &w.processes {
        for t in &p.threads {
            threads = threads.saturating_add(p.instances.saturating_mul(t.instances));
            if threads > MAX_THREADS {
                let count = p.instances.saturating_mul(t.instances);
                let (line, name) = (t.line, t.name.clone());
                return Err(RunError::Limit { line, what: "thread", name, count, unit: "instances", max: MAX_THREADS });
            }
        }
    }
    Ok(())
}

fn check_flowop(op: &Flowop) -> Result<(), RunError> {
    let refuse = |reason: &str| {
        Err(RunError::Flowop { line: op.line, name: op.name.clone(), kind: op.kind.name(), reason: reason.into() })
    };
    if let Support::Unmodelled(why) = op.kind.support() {
        return refuse(why);
    }
    match op.kind {
        FlowopKind::FinishOnCount | FlowopKind::FinishOnBytes => {
            refuse("ending a run on a count is not modelled: give the run a time (run N)")
        }
        _ if op.attrs.directio => refuse("directio on a filesystem is not modelled"),
        _ if op.attrs.indexed.is_some() => refuse("indexed file picks are not modelled"),
        _ if op.attrs.opennext => refuse("opennext is not modelled"),
        _ => Ok(()),
    }
}

impl Runner {
    /// Whether `workload` can run: every flowop modelled, its files and threads within bounds.
    /// What [`Runner::new`] checks first, without drawing anything.
    pub fn check(workload: &Workload) -> Result<(), RunError> {
        check_limits(workload)?;
        workload.flowops().try_for_each(check_flowop)
    }

    /// The workload ready to run, its filesets drawn with `rng`.
    pub fn new(workload: &Workload, mut rng: SimRng) -> Result<Runner, RunError> {
        Runner::check(workload)?;
        let fileset_index = |name: &Option<String>| {
            name.as_ref().map(|n| workload.filesets.iter().position(|f| &f.name == n).expect("validated") as u16)
        };
        let mut ops = Vec::new();
        let mut stats = Vec::new();
        let mut threads = Vec::new();
        for (pi, p) in workload.processes.iter().enumerate() {
            let (mut p_ops, mut p_stats) = (Vec::new(), Vec::new());
            for (ti, t) in p.threads.iter().enumerate() {
                let mut t_ops = Vec::new();
                for op in &t.flowops {
                    let a = &op.attrs;
                    t_ops.push(OpRt {
                        kind: op.kind,
                        fileset: fileset_index(&a.fileset),
                        fd: a.fd.unwrap_or(0),
                        srcfd: a.srcfd,
                        iosize: a.iosize,
                        iters: a.iters,
                        workingset: a.workingset,
                        value: a.value.unwrap_or(0),
                        random: a.random,
                        dsync: a.dsync,
                    });
                }
                p_stats.push(
                    t.flowops
                        .iter()
                        .map(|op| FlowopStats { name: op.name.clone(), kind: op.kind.name(), ..Default::default() })
                        .collect(),
                );
                p_ops.push(t_ops);
                for _ in 0..p.instances * t.instances {
                    threads.push(ThreadRt {
                        def: (pi, ti),
                        pc: 0,
                        iter: 0,
                        fds: BTreeMap::new(),
                        work: None,
                        sync_due: None,
                        open_fd: None,
                        open_is_flowop: false,
                        started: None,
                        waiting: false,
                    });
                }
            }
            ops.push(p_ops);
            stats.push(p_stats);
        }
        let (entries, filesets, setup) = populate(workload, &mut rng);
        Ok(Runner { ops, entries, filesets, threads, stats, rng, setup })
    }

    /// The directories and files to make before the run.
    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    fn op(&self, t: u32) -> OpRt {
        let th = &self.threads[t as usize];
        self.ops[th.def.0][th.def.1][th.pc]
    }

    fn stats_mut(&mut self, t: u32) -> &mut FlowopStats {
        let th = &self.threads[t as usize];
        &mut self.stats[th.def.0][th.def.1][th.pc]
    }

    /// Thread `t`'s next step at `now` (ns); it has nothing out.
    pub fn next(&mut self, t: u32, now: u64) -> Step {
        assert!(!self.threads[t as usize].waiting, "thread {t} asks for a step with a call out");
        // Bounded: a loop of flowops that all do nothing (every pick failing) goes round once.
        let limit = 2 * self.ops[self.threads[t as usize].def.0][self.threads[t as usize].def.1].len() + 2;
        for _ in 0..limit {
            let step = match self.continue_work(t) {
                Some(s) => Some(s),
                None => self.start_flowop(t, now),
            };
            if let Some(step) = step {
                let th = &mut self.threads[t as usize];
                th.started.get_or_insert(now);
                th.waiting = true;
                return step;
            }
        }
        // Nothing this loop can do now (every file it could pick is in use or missing): the
        // thread looks again a millisecond later.
        self.threads[t as usize].waiting = true;
        Step::Sleep(1_000_000)
    }

    /// Thread `t`'s call `call` failed (the filesystem is full): the flowop counts as failed and
    /// the thread stops (Filebench's `FILEBENCH_ERROR`); a file it was creating stays missing.
    pub fn failed(&mut self, t: u32, call: Call) {
        let th = &mut self.threads[t as usize];
        assert!(th.waiting, "thread {t} had nothing out");
        th.waiting = false;
        th.work = None;
        th.sync_due = None;
        th.started = None;
        if call.kind == CallKind::Create {
            th.open_fd = None;
            self.entries[call.entry.0 as usize].current = None;
            self.release(call.entry);
        }
        self.stats_mut(t).failed += 1;
    }

    /// Thread `t`'s call (`None`: its sleep) returned at `now` (ns), having moved `bytes`.
    pub fn returned(&mut self, t: u32, now: u64, call: Option<Call>, bytes: u64) {
        let th = &mut self.threads[t as usize];
        assert!(th.waiting, "thread {t} had nothing out");
        th.waiting = false;
        let mut flowop_continues = th.work.is_some() || th.sync_due.is_some();
        if let Some(c) = call {
            if matches!(c.kind, CallKind::Create | CallKind::Open) {
                let fd = th.open_fd.take().expect("an open's descriptor");
                th.fds.insert(fd, Fd { entry: c.entry, pos: 0 });
                flowop_continues |= !std::mem::take(&mut th.open_is_flowop);
            }
        } else if th.started.is_none() {
            // A thread that found nothing to do slept: no flowop to end.
            return;
        }
        self.stats_mut(t).bytes += bytes;
        if !flowop_continues {
            self.end_flowop(t, now);
        }
    }

    /// The flowop in progress is over at `now` (skipped if it made no call): its figures, and
    /// the next one.
    fn end_flowop(&mut self, t: u32, now: u64) {
        let op = self.op(t);
        let started = self.threads[t as usize].started.take();
        let s = self.stats_mut(t);
        match started {
            Some(start) => {
                s.ops += 1;
                s.latency_ns += now - start;
            }
            None => s.skipped += 1,
        }
        self.advance(t, op.iters);
    }

    fn advance(&mut self, t: u32, iters: u64) {
        let th = &mut self.threads[t as usize];
        let len = self.ops[th.def.0][th.def.1].len();
        th.iter += 1;
        if th.iter >= iters {
            th.iter = 0;
            th.pc = (th.pc + 1) % len;
        }
    }

    /// The next call of the flowop in progress, if it has one left.
    fn continue_work(&mut self, t: u32) -> Option<Step> {
        let th = &mut self.threads[t as usize];
        if let Some(entry) = th.sync_due.take() {
            return Some(Step::Call(Call { kind: CallKind::Fsync, entry, offset: 0, len: 0 }));
        }
        let (call, rest) = match th.work.take()? {
            Work::ReadWhole { entry, pos, end, chunk } => {
                let len = chunk.min(end - pos);
                let rest = (pos + len < end).then_some(Work::ReadWhole { entry, pos: pos + len, end, chunk });
                (Call { kind: CallKind::Read, entry, offset: pos, len }, rest)
            }
            Work::WriteWhole { entry, seek, wsize, wss, chunk } => {
                let next = (wss - seek).min(chunk);
                let rest = (seek + next < wss).then_some(Work::WriteWhole {
                    entry,
                    seek: seek + next,
                    wsize: next,
                    wss,
                    chunk,
                });
                let fd = self.op(t).fd;
                let call = self.write_at_fd(t, fd, wsize);
                (call, rest)
            }
            Work::Fsyncs(mut left) => {
                let entry = left.pop()?;
                let rest = (!left.is_empty()).then_some(Work::Fsyncs(left));
                (Call { kind: CallKind::Fsync, entry, offset: 0, len: 0 }, rest)
            }
        };
        self.threads[t as usize].work = rest;
        if call.kind == CallKind::Write && self.op(t).dsync {
            self.threads[t as usize].sync_due = Some(call.entry);
        }
        Some(Step::Call(call))
    }

    /// A write of `len` at descriptor `fd`'s position: the position and the file's size move.
    fn write_at_fd(&mut self, t: u32, fd: u32, len: u64) -> Call {
        let f = self.threads[t as usize].fds.get_mut(&fd).expect("an open descriptor");
        let call = Call { kind: CallKind::Write, entry: f.entry, offset: f.pos, len };
        f.pos += len;
        let e = &mut self.entries[call.entry.0 as usize];
        let size = e.current.expect("a file open exists");
        e.current = Some(size.max(call.offset + len));
        call
    }
}

impl Runner {
    /// Starts thread `t`'s current flowop at `now`: its first step, or `None` when it ended at
    /// once (nothing to pick, nothing to do, or a flowop that does nothing here).
    fn start_flowop(&mut self, t: u32, now: u64) -> Option<Step> {
        let op = self.op(t);
        let fd_entry = self.threads[t as usize].fds.get(&op.fd).map(|f| f.entry);
        let call = |kind, entry| Some(Step::Call(Call { kind, entry, offset: 0, len: 0 }));
        match op.kind {
            FlowopKind::CreateFile | FlowopKind::OpenFile => {
                let exists = op.kind == FlowopKind::OpenFile;
                if fd_entry.is_some() {
                    return self.skip(t);
                }
                let Some(e) = self.pick(op.fileset.expect("validated"), exists, true) else { return self.skip(t) };
                if !exists {
                    self.entries[e.0 as usize].current = Some(0);
                }
                let th = &mut self.threads[t as usize];
                (th.open_fd, th.open_is_flowop) = (Some(op.fd), true);
                call(if exists { CallKind::Open } else { CallKind::Create }, e)
            }
            FlowopKind::CloseFile => {
                let Some(e) = fd_entry else { return self.skip(t) };
                self.threads[t as usize].fds.remove(&op.fd);
                self.release(e);
                call(CallKind::Close, e)
            }
            FlowopKind::DeleteFile | FlowopKind::StatFile => {
                let Some(e) = self.pick(op.fileset?, true, false) else { return self.skip(t) };
                if op.kind == FlowopKind::StatFile {
                    return call(CallKind::Stat, e);
                }
                let fs = &mut self.filesets[self.entries[e.0 as usize].fileset as usize];
                let local = e.0 - fs.first;
                fs.free_exist.remove(&local);
                fs.free_missing.insert(local);
                self.entries[e.0 as usize].current = None;
                call(CallKind::Delete, e)
            }
            FlowopKind::Fsync => match fd_entry {
                Some(e) => call(CallKind::Fsync, e),
                None => self.skip(t),
            },
            FlowopKind::FsyncSet => {
                let set = op.fileset.expect("validated");
                let th = &self.threads[t as usize];
                let mut files: Vec<EntryId> = th
                    .fds
                    .values()
                    .filter(|f| self.entries[f.entry.0 as usize].fileset == set)
                    .map(|f| f.entry)
                    .collect();
                if files.is_empty() {
                    self.done_now(t, now);
                    return None;
                }
                files.reverse();
                self.threads[t as usize].work = Some(Work::Fsyncs(files));
                self.continue_work(t)
            }
            FlowopKind::Delay => Some(Step::Sleep(op.value.saturating_mul(1_000_000_000))),
            FlowopKind::OpsLimit | FlowopKind::IopsLimit | FlowopKind::BwLimit | FlowopKind::EventLimit => {
                self.advance(t, op.iters);
                None
            }
            FlowopKind::ReadWholeFile
            | FlowopKind::WriteWholeFile
            | FlowopKind::AppendFile
            | FlowopKind::AppendFileRand
            | FlowopKind::Read
            | FlowopKind::Write => {
                let Some(e) = fd_entry else { return self.open_first(t, op) };
                self.data_flowop(t, now, op, e)
            }
            FlowopKind::FinishOnCount
            | FlowopKind::FinishOnBytes
            | FlowopKind::Hog
            | FlowopKind::SemBlock
            | FlowopKind::SemPost
            | FlowopKind::Block
            | FlowopKind::Wakeup => unreachable!("refused when the runner was made"),
        }
    }

    /// A read or write flowop on a descriptor with no file: an open from its fileset first.
    fn open_first(&mut self, t: u32, op: OpRt) -> Option<Step> {
        let Some(e) = op.fileset.and_then(|f| self.pick(f, true, true)) else { return self.skip(t) };
        let th = &mut self.threads[t as usize];
        (th.open_fd, th.open_is_flowop) = (Some(op.fd), false);
        Some(Step::Call(Call { kind: CallKind::Open, entry: e, offset: 0, len: 0 }))
    }

    fn data_flowop(&mut self, t: u32, now: u64, op: OpRt, e: EntryId) -> Option<Step> {
        let size = self.entries[e.0 as usize].current.expect("an open file exists");
        let work = match op.kind {
            FlowopKind::ReadWholeFile => {
                if size == 0 {
                    self.done_now(t, now);
                    return None;
                }
                Work::ReadWhole { entry: e, pos: 0, end: size, chunk: op.iosize.unwrap_or(size) }
            }
            FlowopKind::WriteWholeFile => {
                let src = match op.srcfd {
                    Some(fd) => match self.threads[t as usize].fds.get(&fd) {
                        Some(f) => f.entry,
                        None => return self.skip(t),
                    },
                    None => e,
                };
                let wss = self.entries[src.0 as usize].size;
                if wss == 0 {
                    self.done_now(t, now);
                    return None;
                }
                let chunk = op.iosize.unwrap_or(wss);
                Work::WriteWhole { entry: e, seek: 0, wsize: wss.min(chunk), wss, chunk }
            }
            FlowopKind::AppendFile | FlowopKind::AppendFileRand => {
                let iosize = op.iosize.expect("validated");
                let len = if op.kind == FlowopKind::AppendFile { iosize } else { self.rng.random_range(0..=iosize) };
                if len == 0 {
                    self.done_now(t, now);
                    return None;
                }
                let f = self.threads[t as usize].fds.get_mut(&op.fd).expect("open");
                f.pos = size;
                let call = self.write_at_fd(t, op.fd, len);
                return Some(self.with_dsync(t, op, call));
            }
            _ => return self.read_or_write(t, now, op, e, size),
        };
        self.threads[t as usize].work = Some(work);
        self.continue_work(t)
    }

    fn read_or_write(&mut self, t: u32, now: u64, op: OpRt, e: EntryId, size: u64) -> Option<Step> {
        let iosize = op.iosize.expect("validated");
        let write = op.kind == FlowopKind::Write;
        let f = *self.threads[t as usize].fds.get(&op.fd).expect("open");
        let (offset, len) = if op.random {
            let wss = op.workingset.unwrap_or(size);
            if wss < iosize {
                return self.skip(t);
            }
            (self.rng.random_range(0..=(wss - iosize) / iosize) * iosize, iosize)
        } else if write {
            (f.pos, iosize)
        } else {
            if size == 0 {
                self.done_now(t, now);
                return None;
            }
            let pos = if f.pos >= size { 0 } else { f.pos };
            (pos, iosize.min(size - pos))
        };
        self.threads[t as usize].fds.get_mut(&op.fd).expect("open").pos = offset;
        if write {
            let call = self.write_at_fd(t, op.fd, len);
            return Some(self.with_dsync(t, op, call));
        }
        self.threads[t as usize].fds.get_mut(&op.fd).expect("open").pos = offset + len;
        Some(Step::Call(Call { kind: CallKind::Read, entry: e, offset, len }))
    }

    fn with_dsync(&mut self, t: u32, op: OpRt, call: Call) -> Step {
        if op.dsync {
            self.threads[t as usize].sync_due = Some(call.entry);
        }
        Step::Call(call)
    }

    /// The flowop could not run: counted as skipped; the thread moves on.
    fn skip(&mut self, t: u32) -> Option<Step> {
        self.threads[t as usize].started = None;
        self.end_flowop(t, 0);
        None
    }

    /// The flowop ran without a call (nothing to read or write): one op of no time.
    fn done_now(&mut self, t: u32, now: u64) {
        self.threads[t as usize].started = Some(now);
        self.end_flowop(t, now);
    }

    /// A file of fileset `f` that exists (or not), not in use; `busy`: it is in use from now.
    fn pick(&mut self, f: u16, exists: bool, busy: bool) -> Option<EntryId> {
        let fs = &mut self.filesets[f as usize];
        let set = if exists { &mut fs.free_exist } else { &mut fs.free_missing };
        let from = self.rng.random_range(0..fs.count);
        let local = set.range(from..).next().or_else(|| set.iter().next()).copied()?;
        let e = EntryId(fs.first + local);
        if busy {
            set.remove(&local);
            self.entries[e.0 as usize].busy = true;
        }
        Some(e)
    }

    /// A file closed: free to pick again.
    fn release(&mut self, e: EntryId) {
        let entry = &mut self.entries[e.0 as usize];
        entry.busy = false;
        let fs = &mut self.filesets[entry.fileset as usize];
        let local = e.0 - fs.first;
        if entry.current.is_some() {
            fs.free_exist.insert(local);
        } else {
            fs.free_missing.insert(local);
        }
    }

    /// What the run did: per flowop, and the filesets as they are.
    pub fn stats(&self) -> RunnerStats {
        let flowops = self.stats.iter().flatten().flatten().cloned().collect();
        let filesets = self
            .filesets
            .iter()
            .map(|f| {
                let files = &self.entries[f.first as usize..(f.first + f.count) as usize];
                FilesetStats {
                    name: f.name.clone(),
                    entries: f.count as u64,
                    existing: files.iter().filter(|e| e.current.is_some()).count() as u64,
                    bytes: files.iter().filter_map(|e| e.current).sum(),
                }
            })
            .collect();
        RunnerStats { flowops, filesets }
    }

    /// The current size of entry `e`, if it exists.
    pub fn file_size(&self, e: EntryId) -> Option<u64> {
        self.entries[e.0 as usize].current
    }

    pub fn check_invariants(&self) {
        for (i, f) in self.filesets.iter().enumerate() {
            for local in 0..f.count {
                let e = &self.entries[(f.first + local) as usize];
                assert_eq!(e.fileset as usize, i, "entry {} in the wrong fileset", f.first + local);
                let free = f.free_exist.contains(&local) as u8 + f.free_missing.contains(&local) as u8;
                assert_eq!(free, !e.busy as u8, "entry {}: busy {} but free {}", f.first + local, e.busy, free);
                assert!(!f.free_exist.contains(&local) || e.current.is_some(), "a missing file is free to open");
                assert!(!f.free_missing.contains(&local) || e.current.is_none(), "an existing file is free to create");
            }
        }
        for (i, th) in self.threads.iter().enumerate() {
            for fd in th.fds.values() {
                assert!(self.entries[fd.entry.0 as usize].busy, "thread {i} has a file open that is not in use");
            }
        }
    }
}

/// Zero-padded names as Filebench's (`%08d`), from 1.
fn name(i: u64) -> String {
    format!("{:08}", i + 1)
}

/// The filesets' entries, sizes and tree (see the header).
fn populate(workload: &Workload, rng: &mut SimRng) -> (Vec<Entry>, Vec<FilesetRt>, Setup) {
    let mut entries = Vec::new();
    let mut filesets = Vec::new();
    let mut setup = Setup::default();
    for (fi, f) in workload.filesets.iter().enumerate() {
        let first = entries.len() as u32;
        let top = DirId(setup.dirs.len() as u32);
        setup.dirs.push((top, None, f.name.clone()));
        let leaves = tree(&mut setup, top, f.entries.div_ceil(f.dirwidth), f.dirwidth);
        let gamma = (f.size_gamma > 0 && f.mean_size > 0).then(|| {
            let shape = f.size_gamma as f64 / 1000.0;
            Gamma::new(shape, f.mean_size as f64 / shape).expect("a positive shape and scale")
        });
        let (mut free_exist, mut free_missing) = (BTreeSet::new(), BTreeSet::new());
        for i in 0..f.entries {
            let size = match &gamma {
                Some(g) => g.sample(rng).round() as u64,
                None => f.mean_size,
            };
            let exists = rng.random_range(0..100) < f.prealloc_percent;
            let dir = leaves[(i / f.dirwidth) as usize];
            let id = EntryId(first + i as u32);
            setup.files.push((id, dir, name(i % f.dirwidth), exists.then_some(size)));
            entries.push(Entry { fileset: fi as u16, size, current: exists.then_some(size), busy: false });
            if exists {
                free_exist.insert(i as u32);
            } else {
                free_missing.insert(i as u32);
            }
        }
        filesets.push(FilesetRt { name: f.name.clone(), first, count: f.entries as u32, free_exist, free_missing });
    }
    (entries, filesets, setup)
}

/// `leaves` directories under `top` in a tree of `width` entries per directory: the leaves.
fn tree(setup: &mut Setup, top: DirId, leaves: u64, width: u64) -> Vec<DirId> {
    let dirs = |parent: DirId, i: u64, setup: &mut Setup| {
        let id = DirId(setup.dirs.len() as u32);
        setup.dirs.push((id, Some(parent), name(i)));
        id
    };
    if leaves <= width {
        return (0..leaves).map(|i| dirs(top, i, setup)).collect();
    }
    // Levels above the leaves, from the top: each node holds `width` of the level below (at
    // least 2, so that `dirwidth=1` — one file per directory — makes a tree, not a chain).
    let width = width.max(2);
    let parents = tree(setup, top, leaves.div_ceil(width), width);
    (0..leaves).map(|i| dirs(parents[(i / width) as usize], i % width, setup)).collect()
}
