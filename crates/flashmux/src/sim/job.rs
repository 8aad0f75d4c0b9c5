//! A job running in simulated time: pacing and statistics over a source of requests. The source
//! ([`Source`]) supplies addresses and sizes — fio's generator, a trace, or an export's clients;
//! this decides *when* (iodepth, `rate`/`rate_iops`, `thinktime`, `runtime`, `ramp_time`,
//! `startdelay`), when it syncs (`fsync`, `fdatasync`, `end_fsync`), and keeps its statistics.
//!
//! Syncs follow fio's `get_rw_ddir`: right after every `fsync`-th (or `fdatasync`-th) write
//! issued, the next I/O is a sync — unless that write was the job's last (a volume-limited fio
//! job leaves its loop when the last byte is issued) or the runtime is over. A sync is
//! serialised with the job's other I/O: it waits until everything in flight has completed, is
//! then the job's only I/O in flight, and nothing is issued until it completes. `end_fsync`
//! syncs once more when a writing job stops, after its I/O has drained; like fio (whose
//! `TD_FSYNCING` state is not accounted), that sync is not in the job's statistics.
//! `fsync_on_close` syncs the same way as the job closes its files at its end (fio's
//! `put_file`, also unaccounted); fio also closes them between `loops`, which runs here as one
//! pass: those syncs are not made (a warning says so). What fio does at close — those syncs,
//! `unlink`'s deletes — comes after its I/O loop, outside the job's runtime; `end_fsync`'s sync
//! is inside it.

use super::trace::{ReplayStats, TraceIo, TraceSource};
use super::SimError;
use crate::config::{Scenario, TenantSpec, TraceTiming, Workload};
use crate::device::IoOp;
use crate::engine::derive_seed;
use crate::metrics::{IoStats, JobResult, JobSample, Samples};
use crate::units::{Nanos, SimTime, TenantId};
use crate::kernel::kernels::FileCall;
use crate::workload::fio::{Dir, FileEngine, FioJob, IoUnit, JobGen, ThinktimeBlocksType, ZbdDevice, ZoneOp};
use std::collections::VecDeque;

/// fio's `bw_avg_time` and `iops_avg_time` default: one bandwidth/IOPS sample per 500 ms.
pub const SAMPLE_INTERVAL: Nanos = Nanos::from_ms(500);
/// fio's iodepth buckets, by lower bound: 1, 2–3, 4–7, 8–15, 16–31, 32–63, ≥64 (`io_u_mark_depth`).
const DEPTH_BUCKETS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Its phase has not begun.
    Pending,
    /// Its phase has begun; waiting for `startdelay`.
    Starting,
    Running,
    /// Runtime over: no new I/O, waiting for what is in flight.
    Draining,
    Done,
}

#[derive(Clone, Copy, Debug)]
pub struct IoReq {
    pub op: IoOp,
    pub offset: u64,
    pub len: u64,
    /// An export's request: the tag it was submitted with (0 for every other job).
    pub tag: u64,
    /// A Filebench thread's system call on a file (`offset` and `len` are the file's).
    pub call: Option<FileCall>,
    /// A write's data placement directive (fio's `dataplacement`, a trace's `place_by`); 0:
    /// none (the tenant's default placement, if any, applies).
    pub dspec: u16,
}

impl IoReq {
    /// A sync: a flush of the device, no data.
    const SYNC: IoReq = IoReq { op: IoOp::Flush, offset: 0, len: 0, tag: 0, call: None, dspec: 0 };
}

/// A zone command of fio's `zonemode=zbd` the job has out, if any: issued alone once its I/O
/// has drained, nothing else issued until it completes (fio quiesces, then resets or finishes
/// the zone with a synchronous call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ZoneCmdState {
    None,
    /// fio's own zone reset or finish: not I/O in the job's statistics.
    Management,
    /// A trim, which fio does as a zone reset: counted as a trim.
    Trim,
}

/// The sync a job has in flight, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyncState {
    None,
    /// An `fsync`/`fdatasync` sync.
    Periodic,
    /// The `end_fsync` sync.
    End,
}

pub enum Next {
    Io(IoReq),
    /// Held back (rate limit, think time) until then.
    WaitUntil(SimTime),
    /// Not running, or at its iodepth.
    Blocked,
    /// The generator has no more I/O.
    Exhausted,
    /// A Filebench thread (its index in its tenant's runner) may make its next call.
    Pull(u32),
    /// A job of one of fio's file operation engines opens its file whose range starts at
    /// device byte `first`: the engine's call on it, timed, in flight until it returns
    /// ([`JobRt::call_returned`]).
    Open { first: u64 },
}

/// Where a job's requests come from.
enum Source {
    /// fio's generator, from the job's options; `held` is an I/O generated but held back by the
    /// rate limit.
    Fio { gen: Box<JobGen>, held: Option<IoUnit> },
    /// A trace tenant's replay; `held` is a request read but not yet due.
    Trace { src: Box<TraceSource>, held: Option<TraceIo> },
    /// An export's clients (under `serve`): the requests they sent, not yet issued.
    Export(VecDeque<IoReq>),
    /// A Filebench thread of its tenant's runner (`sim/filebench.rs`), one call at a time.
    Filebench { thread: u32 },
}

pub struct JobRt {
    pub tenant: TenantId,
    pub spec: FioJob,
    pub clone: u32,
    pub groupid: u32,
    pub state: JobState,
    pub start_delay: Nanos,
    pub deadline: Option<SimTime>,
    /// A wake-up event is scheduled for then.
    pub wake_at: Option<SimTime>,
    source: Source,
    start: SimTime,
    measure_from: SimTime,
    end: Option<SimTime>,
    /// When the job began what fio does as it closes its files after its I/O loop
    /// (`fsync_on_close`'s syncs, `unlink`'s deletes): its runtime ends there, as fio's does.
    closing_from: Option<SimTime>,
    inflight: u32,
    /// The queue filled up: waiting for `iodepth_batch_complete_min` completions before
    /// issuing again (fio's `wait_for_completions`).
    reaping: bool,
    exhausted: bool,
    /// I/Os that failed, and the first of them.
    errors: u64,
    /// Zone Management commands completed (not I/O fio reports).
    zone_commands: u64,
    first_error: Option<(IoOp, u64, crate::device::zns::ZnsStatus)>,
    ramp_ended: bool,
    next_allowed: [SimTime; 3],
    think_count: u64,
    think_until: SimTime,
    /// Writes issued since the ramp ended (fio's `io_issues[DDIR_WRITE]`), which time the syncs.
    writes_issued: u64,
    /// A write completed a period of `fsync`/`fdatasync`: a sync goes before the next I/O.
    sync_due: bool,
    sync: SyncState,
    zone_cmd: ZoneCmdState,
    /// The last I/O issued was a sync (fio's `should_fsync` then skips `end_fsync`).
    last_was_sync: bool,
    end_sync_done: bool,
    /// With several files (`nrfiles`), `end_fsync` syncs each in turn: the next one's index.
    end_sync_file: usize,
    /// fio's `unlink` on a filesystem (set by the simulator): the job's files are deleted in
    /// turn once it has stopped and synced; the next one's index.
    unlink: bool,
    unlink_file: usize,
    /// A job of one of fio's file and directory operation engines (`ioengine=filecreate`, ...).
    engine: Option<EngineRt>,
    stats: IoStats,
    samples: Samples,
    /// What the current sample window has completed so far.
    cur_sample: JobSample,
    cur_window: u64,
    depth_counts: [u64; 7],
}

/// A job of one of fio's file and directory operation engines (fio's `engines/fileoperations.c`):
/// an I/O of a file that is not open first opens it — the engine's system call, the job's only
/// request in flight, whose time is the job's completion latency (fio's `add_clat_sample` in
/// the engine's `open_file`, in `stat_ddir`); then the file's I/Os complete as they are issued,
/// doing nothing (`FIO_FAKEIO`): counted in the job's I/Os and bytes, without a latency. A file
/// closes once its size in bytes has been done since it opened (fio's `fio_file_done`: a
/// time-based job's file that wraps is closed and opened again, one call per pass over it), and
/// at the end of each pass (`loops`).
struct EngineRt {
    engine: FileEngine,
    /// Per file: whether it was ever opened, and while open, the pass it opened in and the
    /// bytes left before it closes.
    files: Vec<EngineFileRt>,
    /// An open is out.
    call_out: bool,
    stat_dir: Dir,
}

#[derive(Clone, Copy)]
struct EngineFileRt {
    ever_opened: bool,
    open: Option<(u64, u64)>,
}

/// The command an I/O of fio's generator is.
fn op_of(io: &IoUnit) -> IoOp {
    match (io.zone, io.dir) {
        (Some(ZoneOp::Reset), _) => IoOp::ZoneReset,
        (Some(ZoneOp::Finish), _) => IoOp::ZoneFinish,
        (Some(ZoneOp::Append), _) => IoOp::ZoneAppend,
        (None, Dir::Read) => IoOp::Read,
        (None, Dir::Write) => IoOp::Write,
        (None, Dir::Trim) => IoOp::Trim,
    }
}

impl JobRt {
    pub fn new(
        tenant: TenantId,
        spec: &FioJob,
        clone: u32,
        t: &TenantSpec,
        sector: u64,
        seed: u64,
        zbd: Option<&ZbdDevice>,
    ) -> Result<JobRt, SimError> {
        let source = match &t.workload {
            Workload::Fio(_) => {
                // The label names the job, not its position, so adding a tenant or job elsewhere
                // does not change this job's stream.
                let label = format!("job/{}/{}/{}", t.name, spec.name, clone);
                let seed = derive_seed(seed, &label);
                let gen = match zbd {
                    Some(dev) => JobGen::new_zoned(spec, clone, t.region.0, t.region.1, sector, seed, dev)?,
                    None => JobGen::new(spec, clone, t.region.0, t.region.1, sector, seed)?,
                };
                Source::Fio { gen: Box::new(gen), held: None }
            }
            Workload::Trace { spec: ts, .. } => {
                Source::Trace { src: Box::new(TraceSource::new(t, ts, sector).map_err(SimError::Trace)?), held: None }
            }
            Workload::Export { .. } => Source::Export(VecDeque::new()),
            // Numbered by the simulator once every job exists (`set_filebench_thread`).
            Workload::Filebench { .. } => Source::Filebench { thread: u32::MAX },
        };
        let engine = match (&source, spec.engine) {
            (Source::Fio { gen, .. }, Some(engine)) => Some(EngineRt {
                engine,
                files: vec![EngineFileRt { ever_opened: false, open: None }; gen.file_count()],
                call_out: false,
                stat_dir: spec.engine_stat_dir(),
            }),
            _ => None,
        };
        let start_delay = match &source {
            Source::Fio { gen, .. } => gen.start_delay(),
            Source::Trace { .. } | Source::Export(_) | Source::Filebench { .. } => 0,
        };
        Ok(JobRt {
            tenant,
            spec: spec.clone(),
            clone,
            groupid: 0,
            state: JobState::Pending,
            start_delay: Nanos(start_delay),
            deadline: None,
            wake_at: None,
            source,
            start: SimTime::ZERO,
            measure_from: SimTime::ZERO,
            end: None,
            closing_from: None,
            inflight: 0,
            reaping: false,
            exhausted: false,
            errors: 0,
            zone_commands: 0,
            first_error: None,
            ramp_ended: false,
            next_allowed: [SimTime::ZERO; 3],
            think_count: 0,
            think_until: SimTime::ZERO,
            writes_issued: 0,
            sync_due: false,
            sync: SyncState::None,
            zone_cmd: ZoneCmdState::None,
            last_was_sync: false,
            end_sync_done: false,
            end_sync_file: 0,
            unlink: false,
            unlink_file: 0,
            engine,
            stats: IoStats::default(),
            samples: Samples::default(),
            cur_sample: JobSample::default(),
            cur_window: 0,
            depth_counts: [0; 7],
        })
    }

    pub fn begin(&mut self, now: SimTime) {
        self.state = JobState::Running;
        self.start = now;
        // fio's runtime clock starts after the ramp: the job runs ramp_time + runtime.
        self.measure_from = now + Nanos(self.spec.ramp_time);
        self.deadline = self.spec.runtime.map(|r| self.measure_from + Nanos(r));
        self.next_allowed = [now; 3];
    }

    /// When its measured period begins (after `ramp_time`); set by [`JobRt::begin`].
    pub fn measure_from(&self) -> SimTime {
        self.measure_from
    }

    pub fn next_io(&mut self, now: SimTime) -> Next {
        if self.state != JobState::Running || self.inflight >= self.spec.iodepth {
            self.reaping = self.state == JobState::Running;
            return Next::Blocked;
        }
        if self.reaping {
            if self.spec.iodepth - self.inflight < self.spec.iodepth_batch_complete_min {
                return Next::Blocked;
            }
            self.reaping = false;
        }
        if self.sync != SyncState::None || self.zone_cmd != ZoneCmdState::None {
            return Next::Blocked;
        }
        if now < self.think_until {
            return Next::WaitUntil(self.think_until);
        }
        if !self.ramp_ended && now >= self.measure_from {
            // fio clears its issue-side counts when the ramp ends (number_ios counts from then).
            self.ramp_ended = true;
            if let Source::Fio { gen, .. } = &mut self.source {
                gen.end_ramp();
            }
            self.writes_issued = 0;
        }
        if self.sync_due {
            return self.periodic_sync();
        }
        match &mut self.source {
            Source::Fio { .. } => self.next_fio_io(now),
            Source::Trace { .. } => self.next_trace_io(now),
            Source::Export(queue) => {
                let Some(io) = queue.pop_front() else { return Next::Blocked };
                self.count_issue();
                Next::Io(io)
            }
            Source::Filebench { thread } => Next::Pull(*thread),
        }
    }

    /// A Filebench thread's job: its thread's index in its tenant's runner.
    pub fn filebench_thread(&self) -> Option<u32> {
        match self.source {
            Source::Filebench { thread } => Some(thread),
            _ => None,
        }
    }

    pub fn set_filebench_thread(&mut self, t: u32) {
        let Source::Filebench { thread } = &mut self.source else { panic!("job '{}' is not Filebench's", self.spec.name) };
        *thread = t;
    }

    /// Its source has nothing more (a Filebench thread stopped by a failed call).
    pub fn source_ended(&mut self) {
        self.exhausted = true;
    }

    /// A pulled call leaves: one more in flight.
    pub fn pulled(&mut self) {
        self.count_issue();
    }

    /// A call that moves no data and is not a sync (a create, open, close, stat or delete)
    /// returned at `now`, `clat_ns` after it reached the kernel: not in the job's I/O
    /// statistics, unless it is a file operation engine's open, whose time is the job's
    /// completion latency.
    pub fn call_returned(&mut self, now: SimTime, clat_ns: u64) {
        self.inflight -= 1;
        if let Some(e) = self.engine.as_mut().filter(|e| e.call_out) {
            e.call_out = false;
            if now >= self.measure_from {
                self.stats.dir_mut(e.stat_dir).record_clat(clat_ns);
            }
        }
    }

    /// Its engine's open failed (the filesystem is full): nothing is in flight for it, and the
    /// job ends, as fio's ends on the error.
    /// An I/O failed with `status` (a zoned drive's write-pointer checks): counted, and the
    /// job stops issuing unless fio's `continue_on_error` covers the direction (a trace replay
    /// goes on). Returns false: nothing is measured.
    pub fn io_failed(&mut self, op: IoOp, offset: u64, status: crate::device::zns::ZnsStatus) -> bool {
        self.inflight -= 1;
        self.errors += 1;
        self.first_error.get_or_insert((op, offset, status));
        let goes_on = match &self.source {
            Source::Fio { .. } => self.spec.continue_on_error.covers(op),
            _ => true,
        };
        if !goes_on {
            self.exhausted = true;
        }
        false
    }

    pub fn open_failed(&mut self) {
        let e = self.engine.as_mut().expect("a file operation engine's job");
        assert!(e.call_out, "an open out");
        e.call_out = false;
        self.inflight -= 1;
        self.exhausted = true;
    }

    /// It is a job of one of fio's file and directory operation engines.
    pub fn engine(&self) -> Option<FileEngine> {
        self.engine.as_ref().map(|e| e.engine)
    }

    /// fio's generator's next I/O, within the job's rate limits; for a file operation engine's
    /// job, the open of the next I/O's file first if it is not open, and I/Os that complete as
    /// they are issued.
    fn next_fio_io(&mut self, now: SimTime) -> Next {
        loop {
            let next = self.next_fio_unit(now);
            match next {
                Next::Io(io) if self.engine.is_some() => {
                    // A fake I/O: issued (counted in flight) and complete at once.
                    self.inflight -= 1;
                    self.count_fake(now, io);
                    if now < self.think_until {
                        return Next::WaitUntil(self.think_until);
                    }
                }
                next => return next,
            }
        }
    }

    fn next_fio_unit(&mut self, now: SimTime) -> Next {
        if self.engine.as_ref().is_some_and(|e| e.call_out) {
            return Next::Blocked;
        }
        if self.exhausted {
            return Next::Exhausted; // a failed open ended it
        }
        let Source::Fio { gen, held } = &mut self.source else { unreachable!("a fio job") };
        let io = match held.take().or_else(|| gen.next()) {
            Some(io) => io,
            None => {
                self.exhausted = true;
                return Next::Exhausted;
            }
        };
        if let Some(e) = &mut self.engine {
            let pass = gen.passes_done();
            let file = gen.file_of(io.offset);
            let f = &mut e.files[file];
            if f.open.is_some_and(|(p, _)| p != pass) {
                f.open = None; // closed at the end of its pass
            }
            match f.open {
                Some(_) => {}
                None if f.ever_opened && e.engine.once_per_file() => {
                    // fio's second open of the file fails (it is gone, or exists): the job ends.
                    self.exhausted = true;
                    return Next::Exhausted;
                }
                None => {
                    f.ever_opened = true;
                    let (first, size) = gen.file_range(file);
                    f.open = Some((pass, size));
                    e.call_out = true;
                    *held = Some(io);
                    self.count_issue();
                    return Next::Open { first };
                }
            }
        }
        if io.zone.is_some_and(|z| z != ZoneOp::Append) {
            // fio's zone reset or finish (or a trim done as a reset): once the job's I/O has
            // completed, alone.
            if self.inflight > 0 {
                *held = Some(io);
                return Next::Blocked;
            }
            if io.is_zone_management() {
                self.inflight += 1;
                self.zone_cmd = ZoneCmdState::Management;
                return Next::Io(IoReq { op: op_of(&io), offset: io.offset, len: io.len, tag: 0, call: None, dspec: 0 });
            }
        }
        let d = io.dir.index();
        let file = gen.file_of(io.offset);
        if now < self.next_allowed[d] {
            *held = Some(io);
            return Next::WaitUntil(self.next_allowed[d]);
        }
        // fio's linear rate process: each I/O earns its slot; a job that fell behind catches up.
        let gap = if let Some(iops) = self.spec.rate_iops[io.dir] {
            Some(Nanos(1_000_000_000u64.div_ceil(iops.max(1))))
        } else {
            self.spec.rate[io.dir].map(|bps| Nanos::for_transfer(io.len, bps.max(1)))
        };
        if let Some(g) = gap {
            self.next_allowed[d] += g;
        }
        self.count_issue();
        if let Some(e) = &mut self.engine {
            // Issued: the file closes if this I/O used up its size.
            let f = &mut e.files[file];
            if let Some((_, left)) = &mut f.open {
                *left = left.saturating_sub(io.len);
                if *left == 0 {
                    f.open = None;
                }
            }
        }
        if self.spec.thinktime > 0 && self.spec.thinktime_blocks_type == ThinktimeBlocksType::Issue {
            self.count_toward_think(now);
        }
        self.last_was_sync = false;
        if io.dir == Dir::Write {
            self.count_write();
        }
        if io.zone == Some(ZoneOp::Reset) {
            self.zone_cmd = ZoneCmdState::Trim;
        }
        Next::Io(IoReq { op: op_of(&io), offset: io.offset, len: io.len, tag: 0, call: None, dspec: io.dspec })
    }

    /// A file operation engine's I/O, done as issued: in the job's I/Os and bytes (and its
    /// bandwidth samples), without a latency.
    fn count_fake(&mut self, now: SimTime, io: IoReq) {
        if self.spec.thinktime > 0 && self.spec.thinktime_blocks_type == ThinktimeBlocksType::Complete {
            self.count_toward_think(now);
        }
        if now < self.measure_from {
            return;
        }
        let d = io.op.index();
        self.stats.dir_mut(Dir::ALL[d]).count(io.len);
        let window = now.since(self.measure_from).0 / SAMPLE_INTERVAL.0;
        self.advance_samples(window);
        self.cur_sample.bytes[d] += io.len;
        self.cur_sample.ios[d] += 1;
    }

    /// The trace's next request once it is due (open loop), or at once (closed loop).
    fn next_trace_io(&mut self, now: SimTime) -> Next {
        let Source::Trace { src, held } = &mut self.source else { unreachable!("a trace job") };
        let Some(io) = held.take().or_else(|| src.next_io()) else {
            self.exhausted = true;
            return Next::Exhausted;
        };
        if let TraceTiming::OpenLoop { .. } = src.timing() {
            let due = self.start + io.due;
            if now < due {
                *held = Some(io);
                return Next::WaitUntil(due);
            }
            src.stats.record_issue(now.since(due));
        }
        src.issued(&io);
        self.count_issue();
        Next::Io(IoReq { op: io.op, offset: io.offset, len: io.len, tag: 0, call: None, dspec: io.dspec })
    }

    /// One more I/O in flight, counted in fio's iodepth distribution.
    fn count_issue(&mut self) {
        self.inflight += 1;
        let bucket = DEPTH_BUCKETS.iter().rposition(|&b| self.inflight >= b).unwrap_or(0);
        self.depth_counts[bucket] += 1;
    }

    /// A fio job's files' ranges of the device, (first byte, length) each, in order: one, its
    /// range, unless it has several (`nrfiles`).
    pub fn fio_files(&self) -> Option<Vec<(u64, u64)>> {
        match &self.source {
            Source::Fio { gen, .. } => Some((0..gen.file_count()).map(|i| gen.file_range(i)).collect()),
            _ => None,
        }
    }

    /// Whether this is an export's job, fed by [`JobRt::push_external`].
    pub fn is_external(&self) -> bool {
        matches!(self.source, Source::Export(_))
    }

    /// An export's client sent `io`: it is issued as soon as the job may issue.
    pub fn push_external(&mut self, io: IoReq) {
        let Source::Export(queue) = &mut self.source else { panic!("job '{}' is not an export's", self.spec.name) };
        queue.push_back(io);
    }

    /// A trace job's replay statistics (once, at the end of the run).
    pub fn take_replay(&mut self) -> Option<ReplayStats> {
        match &mut self.source {
            Source::Trace { src, .. } => Some(src.finish()),
            Source::Fio { .. } | Source::Export(_) | Source::Filebench { .. } => None,
        }
    }

    /// fio's `get_rw_ddir`: a sync is due after every `fsync`-th or `fdatasync`-th write.
    fn count_write(&mut self) {
        self.writes_issued += 1;
        let every = |n: u64| n > 0 && self.writes_issued % n == 0;
        self.sync_due = every(self.spec.fsync) || every(self.spec.fdatasync);
    }

    /// The due sync, once the job's I/O has drained; none if the job has nothing left to issue.
    fn periodic_sync(&mut self) -> Next {
        if self.inflight > 0 {
            return Next::Blocked;
        }
        // Only fio's generator can run out here (syncs are fio options).
        if let Source::Fio { gen, held } = &mut self.source {
            if held.is_none() {
                *held = gen.next();
            }
            if held.is_none() {
                self.exhausted = true;
                return Next::Exhausted;
            }
        }
        self.sync_due = false;
        let mut sync = self.start_sync(SyncState::Periodic);
        // fio picks the file of an I/O before it decides the I/O is a sync: with several files
        // it syncs the file of the I/O that would have come next.
        if let Source::Fio { gen, held: Some(next) } = &self.source {
            if gen.file_count() > 1 {
                sync.offset = gen.file_range(gen.file_of(next.offset)).0;
            }
        }
        Next::Io(sync)
    }

    fn start_sync(&mut self, kind: SyncState) -> IoReq {
        self.inflight += 1;
        self.sync = kind;
        self.last_was_sync = true;
        IoReq::SYNC
    }

    /// fio's `end_fsync`: once a writing job has stopped issuing and drained, one last sync.
    /// With several files, one sync per file (fio's `for_each_file` ... `fio_file_fsync`), each
    /// a sync of the file at its offset. `fsync_on_close` is the same syncs, as fio closes the
    /// files (`put_file`): neither when the last I/O was a sync, and with both options once.
    pub fn end_sync(&mut self, now: SimTime) -> Option<IoReq> {
        if !self.end_sync_pending() {
            return None;
        }
        if !self.spec.end_fsync {
            // fsync_on_close's, at close: after fio's I/O loop and its runtime.
            self.closing_from.get_or_insert(now);
        }
        let mut sync = self.start_sync(SyncState::End);
        if let Source::Fio { gen, .. } = &self.source {
            if gen.file_count() > 1 {
                sync.offset = gen.file_range(self.end_sync_file).0;
            }
        }
        Some(sync)
    }

    fn end_sync_pending(&self) -> bool {
        (self.spec.end_fsync || self.spec.fsync_on_close)
            && self.spec.rw.does(Dir::Write)
            && !self.end_sync_done
            && (!self.last_was_sync || self.end_sync_file > 0)
            && self.stopping()
            && self.inflight == 0
    }

    fn count_toward_think(&mut self, now: SimTime) {
        self.think_count += 1;
        if self.think_count >= self.spec.thinktime_blocks.max(1) {
            self.think_count = 0;
            self.think_until = now + Nanos(self.spec.thinktime);
        }
    }

    /// An I/O completed; returns whether it is measured (not in the ramp).
    pub fn complete(&mut self, now: SimTime, op: IoOp, len: u64, slat_ns: u64, clat_ns: u64) -> bool {
        self.inflight -= 1;
        if op == IoOp::Flush {
            self.sync_complete(now, clat_ns);
            return false; // a sync moves no bytes
        }
        let zone_cmd = std::mem::replace(&mut self.zone_cmd, ZoneCmdState::None);
        if op.is_zone_management() && zone_cmd != ZoneCmdState::Trim {
            self.zone_commands += 1;
            return false; // fio's zone resets and finishes are not I/O it reports
        }
        if self.spec.thinktime > 0 && self.spec.thinktime_blocks_type == ThinktimeBlocksType::Complete {
            self.count_toward_think(now);
        }
        if now < self.measure_from {
            return false; // ramp time: not measured
        }
        // A trim fio did as a zone reset counts as the trim it is.
        let d = match zone_cmd {
            ZoneCmdState::Trim => Dir::Trim.index(),
            _ => op.data_dir().expect("syncs and zone management are not recorded here"),
        };
        let stats = self.stats.dir_mut(Dir::ALL[d]);
        stats.record(len, slat_ns, clat_ns);
        let window = now.since(self.measure_from).0 / SAMPLE_INTERVAL.0;
        self.advance_samples(window);
        self.cur_sample.bytes[d] += len;
        self.cur_sample.ios[d] += 1;
        true
    }

    /// fio records a sync's completion latency (`add_sync_clat_sample`), in its running state only.
    fn sync_complete(&mut self, now: SimTime, clat_ns: u64) {
        let kind = std::mem::replace(&mut self.sync, SyncState::None);
        if kind == SyncState::End {
            self.end_sync_file += 1;
            let files = match &self.source {
                Source::Fio { gen, .. } => gen.file_count(),
                _ => 1,
            };
            self.end_sync_done = self.end_sync_file >= files;
        } else if now >= self.measure_from {
            self.stats.sync.record(clat_ns);
        }
    }

    /// Closes sample windows before `window`: the current one, and those after it, in which
    /// nothing completed (fio skips them), in one step.
    fn advance_samples(&mut self, window: u64) {
        if self.cur_window < window {
            self.samples.add_window(&std::mem::take(&mut self.cur_sample), SAMPLE_INTERVAL.0);
            self.cur_window = window;
        }
    }

    fn stopping(&self) -> bool {
        self.state == JobState::Draining || (self.state == JobState::Running && self.exhausted)
    }

    pub fn can_finish(&self) -> bool {
        self.stopping() && self.inflight == 0 && !self.end_sync_pending() && !self.unlink_pending()
    }

    /// Its files are files of a filesystem and fio's `unlink` deletes them at its end.
    pub fn set_unlink(&mut self) {
        self.unlink = true;
    }

    fn unlink_pending(&self) -> bool {
        self.unlink
            && self.stopping()
            && self.inflight == 0
            && !self.end_sync_pending()
            && matches!(&self.source, Source::Fio { gen, .. } if self.unlink_file < gen.file_count())
    }

    /// fio's `close_and_free_files` with `unlink`: once the job has stopped, drained and synced,
    /// its next file to delete (its first byte, which names it to the kernel), in flight until
    /// the delete returns ([`JobRt::call_returned`]).
    pub fn end_unlink(&mut self, now: SimTime) -> Option<u64> {
        if !self.unlink_pending() {
            return None;
        }
        self.closing_from.get_or_insert(now);
        let Source::Fio { gen, .. } = &self.source else { unreachable!("a fio job") };
        let first = gen.file_range(self.unlink_file).0;
        self.unlink_file += 1;
        self.inflight += 1;
        Some(first)
    }

    pub fn finish(&mut self, now: SimTime) {
        self.state = JobState::Done;
        self.end = Some(now);
    }

    /// The run ends: fix the job's end time and close its whole sample windows.
    pub fn stop(&mut self, now: SimTime) {
        if matches!(self.state, JobState::Pending | JobState::Starting) {
            return;
        }
        let end = *self.end.get_or_insert(now);
        if end > self.measure_from {
            self.advance_samples(end.since(self.measure_from).0 / SAMPLE_INTERVAL.0);
        }
    }

    /// The job's results; its statistics move into them (the run is over).
    pub fn take_result(&mut self, scenario: &Scenario) -> JobResult {
        let runtime_ns = match self.closing_from.or(self.end) {
            Some(end) => end.since(self.measure_from).0,
            None => 0,
        };
        let total: u64 = self.depth_counts.iter().sum();
        let iodepth_levels = DEPTH_BUCKETS
            .iter()
            .zip(self.depth_counts)
            .map(|(&b, c)| (b, if total == 0 { 0.0 } else { c as f64 / total as f64 }))
            .collect();
        JobResult {
            errors: self.errors,
            zone_commands: self.zone_commands,
            error: self.first_error.map_or(0, |(_, _, s)| s.linux_errno()),
            name: self.spec.name.clone(),
            clone: self.clone,
            members: 1,
            groupid: self.groupid,
            tenant: scenario.tenants[self.tenant.index()].name.clone(),
            tenant_index: self.tenant.index(),
            options: self.spec.job_options.clone(),
            iodepth: self.spec.iodepth,
            runtime_ns,
            io: std::mem::take(&mut self.stats),
            iodepth_levels,
            sample_interval_ns: SAMPLE_INTERVAL.0,
            samples: self.samples,
        }
    }

    pub fn check_invariants(&self) {
        assert!(self.inflight <= self.spec.iodepth, "job exceeds its iodepth");
        if self.sync != SyncState::None {
            assert_eq!(self.inflight, 1, "a sync is not the job's only I/O in flight");
        }
        if self.zone_cmd != ZoneCmdState::None {
            assert_eq!(self.inflight, 1, "a zone reset or finish is not the job's only I/O in flight");
        }
        if self.state == JobState::Done {
            assert_eq!(self.inflight, 0, "finished job with I/O in flight");
        }
    }
}
