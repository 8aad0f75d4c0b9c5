//! The simulator: one event loop that routes events and requests between the layers, each of
//! which owns its state — the tenants' jobs (`workloads.rs`, `job.rs`), the VM path
//! ([`Machine`]), the host block layer ([`BlockLayer`]) and the device ([`Device`]). The run's
//! results are collected from them at the end (`results.rs`).
//!
//! ```text
//! job issues ──(submit overhead)──► host block layer ──► NVMe queue ──► device
//!   ▲            (or the VM path)    (scheduler, tags)                    │
//!   └──(completion overhead)◄── host completion ◄─────── completion ◄─────┘
//! ```
//! Flushes (fio's syncs) skip the host scheduler, as Linux's blk-flush machinery does.
//! Events are typed and ordered by (time, insertion); nothing reads a clock, so a run is a pure
//! function of its scenario and seed.

mod aging;
mod filebench;
pub mod external;
mod host_ftl;
mod job;
mod overlap;
mod results;
mod timeline;
pub mod trace;
mod workloads;

use crate::config::Scenario;
use crate::device::precondition::{PreconditionReport, PreconditionState};
use crate::device::{Command, Device, DeviceEvent, IoOp, Outbox};
use crate::engine::EventQueue;
use crate::host::{BlockLayer, BlockReq};
use crate::kernel::kernels::{BufferedJob, EngineJob, FileCall, FileOp, KernelDev, Kernels, KernelsOut};
use crate::metrics::StopReason;
use crate::units::{JobId, Nanos, ReqId, SimTime, TenantId};
use crate::virt::{Io, Machine, MachineEvent, VirtOutbox};
use job::{IoReq, JobState};
use workloads::Workloads;
pub use external::{Export, ExternalDone, ExternalIo};
pub use filebench::FilebenchResult;
use overlap::Overlap;
use timeline::Timeline;
pub use timeline::{NoTimeline, TimelineSink, KEEP_ROWS};

/// Told of every command the host block layer sends to the device, after merging — what
/// blktrace's issue (`D`) events show of a real kernel (`flashmux run --record`).
pub trait DispatchSink: Send {
    fn dispatched(&mut self, at: SimTime, tenant: TenantId, op: IoOp, offset: u64, len: u64);
}

/// Everything that can happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    /// A job's phase has begun and its start delay has passed.
    JobStart(JobId),
    /// A job held back by its rate limit or think time may issue again.
    JobWake(JobId),
    /// A job's runtime is over: it stops issuing.
    JobDeadline(JobId),
    /// A request reaches the host block layer (after the submission path).
    HostArrive(ReqId),
    /// A buffered job's request reaches its kernel (after the system call's entry).
    KernelArrive(ReqId),
    /// A kernel's flusher may want to run.
    KernelWake(u16),
    /// The host machine (CPU model, virtualization path) has something to do.
    Machine(MachineEvent),
    /// The scheduler asked to be consulted again.
    HostWake,
    Device(DeviceEvent),
    /// The application sees a completion (after the completion path).
    AppComplete(ReqId),
    /// A timeline interval ends.
    Tick,
    /// The scenario's time limit.
    Stop,
}

#[derive(Clone, Copy, Debug)]
struct Request {
    job: JobId,
    tenant: TenantId,
    op: IoOp,
    /// The command's range at the host: the guest may have merged adjacent requests into it.
    offset: u64,
    len: u64,
    /// What the application asked for.
    app_len: u64,
    /// The host hardware thread it was submitted from (with the CPU model).
    host_cpu: Option<u16>,
    issued: SimTime,
    /// When it reached the host block layer (the end of fio's slat).
    queued: SimTime,
    /// An export's request: its client's tag.
    tag: u64,
    /// A kernel's own device request (read, writeback, flush): its id there. `None` for a job's.
    kernel: Option<KernelDev>,
    /// A Filebench thread's system call on a file.
    call: Option<FileCall>,
    /// A kernel's request merged into this one in its plug (`apply_kernel_out`): the next of
    /// the chain, which completes with it.
    plug_next: Option<ReqId>,
    /// A piece of a request split at its file's extents or the largest request (`send_runs`): the request, which completes
    /// when its last piece has.
    parent: Option<ReqId>,
    /// A request split into pieces: how many are still in flight (0 otherwise).
    pieces: u32,
    /// A write's data placement directive: the job's, else its tenant's default (0: none).
    dspec: u16,
    /// The status it failed with (a zoned drive's write-pointer checks); `None`: it succeeded.
    failed: Option<crate::device::zns::ZnsStatus>,
}

/// How a batch of [`Simulator::run_for`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    Running,
    Finished(StopReason),
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Fio(#[from] crate::workload::fio::FioError),
    #[error("device: {0}")]
    Device(String),
    #[error("{0}")]
    Trace(String),
    /// The scenario breaks a rule of [`Scenario::validate`] (one built or changed in code: the
    /// loader refuses such a file).
    #[error("scenario: {0}")]
    Config(String),
    /// `[precondition] state_file` cannot be used (missing, damaged, another drive's).
    #[error("precondition.state_file: {0}")]
    DriveState(crate::device::drive_state::DriveStateError),
}

impl From<crate::device::drive_state::DriveStateError> for SimError {
    fn from(e: crate::device::drive_state::DriveStateError) -> SimError {
        SimError::DriveState(e)
    }
}

pub struct Simulator {
    scenario: Scenario,
    now: SimTime,
    events: EventQueue<Event>,
    processed: u64,
    /// The tenants' jobs and their phases.
    work: Workloads,
    reqs: Vec<Request>,
    free_reqs: Vec<u32>,
    /// Jobs' requests issued and completed.
    issued: u64,
    completed: u64,
    /// The kernels' own device requests issued and completed.
    kernel_issued: u64,
    kernel_completed: u64,
    /// The kernels above the block layer, with `[kernel]`.
    kernels: Option<Kernels>,
    kout: KernelsOut,
    /// The host block layer: scheduler, tags, flush queue, queue mapping.
    block: BlockLayer,
    /// Scratch: the requests merged into a completed command.
    merged: Vec<ReqId>,
    /// The host FTL on a zoned drive (`[host.zoned_ftl]`): the block layer's commands become
    /// its device commands.
    hftl: Option<host_ftl::HostFtlStage>,
    /// Reused by `send_runs` for where a request's pieces are.
    runs_scratch: Vec<(u64, u64)>,
    /// Pieces of split requests in flight (`send_runs`).
    pieces_live: u64,
    /// Where the commands the block layer sends go, when they are recorded.
    dispatches: Option<Box<dyn DispatchSink>>,
    /// The host CPU and virtualization path, when modelled (`[host.cpu]` or a VM mode).
    machine: Option<Machine>,
    vout: VirtOutbox,
    device: Device,
    out: Outbox,
    timeline: Timeline,
    /// The tenants' common measured interval, for their bandwidth shares.
    overlap: Overlap,
    precondition: PreconditionReport,
    finished: Option<StopReason>,
    check_every: Option<u64>,
    /// Exports' requests completed and not yet taken by [`Simulator::take_external_done`].
    external_done: Vec<external::ExternalDone>,
    /// Per tenant, its Filebench runner if it has one.
    filebench: Vec<Option<filebench::FbTenant>>,
    /// Per tenant, its writes' default placement directive (0: none).
    tenant_dspecs: Vec<u16>,
}

impl Simulator {
    /// Builds the model, preconditions the drive and schedules the first events.
    pub fn new(scenario: Scenario) -> Result<Simulator, SimError> {
        Simulator::new_polling(scenario, &|| false)
    }

    /// [`Simulator::new`], asking `stop` every few thousand preconditioning writes: once it
    /// says so, preconditioning ends there and the simulator is built already finished
    /// ([`StopReason::Interrupted`]), so its results say what was done.
    pub fn new_polling(scenario: Scenario, stop: &dyn Fn() -> bool) -> Result<Simulator, SimError> {
        scenario.validate().map_err(SimError::Config)?;
        let device = build_device(&scenario)?;
        let hftl = match (scenario.host.zoned_ftl, &scenario.device.kind) {
            (Some(p), crate::device::DeviceKind::Ssd(c)) => {
                let z = c.zns.ok_or_else(|| SimError::Config("host.zoned_ftl: needs a zoned drive".into()))?;
                let cfg = crate::host::zoned_ftl::HostZonedConfig::of(&z, c.geometry.unit_bytes as u64, p);
                let ftl = crate::host::zoned_ftl::HostZonedFtl::new(cfg).map_err(SimError::Config)?;
                // GC's commands are the host's own: the id just past the tenants', so the
                // drive's per-tenant tables grow by one entry for them.
                let gc_tenant = TenantId(
                    u16::try_from(scenario.tenants.len())
                        .map_err(|_| SimError::Config("too many tenants for a host FTL".into()))?,
                );
                Some(host_ftl::HostFtlStage::new(ftl, p.spare_zones, gc_tenant))
            }
            (Some(_), _) => return Err(SimError::Config("host.zoned_ftl: needs a zoned drive".into())),
            (None, _) => None,
        };
        // Behind a host FTL the tenants see a conventional space: fio's zoned mode is not theirs.
        // What the host learns of a zoned drive at start (Identify, Report Zones: every zone
        // empty).
        let zoned = device.zns().filter(|_| hftl.is_none()).map(|z| crate::workload::fio::ZonedDisk {
            zone_bytes: z.zone_bytes,
            capacity_bytes: z.capacity_bytes,
            zones: z.zones,
            max_open: z.max_open,
            max_active: z.max_active,
        });
        let work = Workloads::build(&scenario, device.sector_bytes(), zoned)?;
        let mut sim = Simulator {
            now: SimTime::ZERO,
            events: EventQueue::new(),
            processed: 0,
            work,
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            issued: 0,
            completed: 0,
            kernel_issued: 0,
            kernel_completed: 0,
            kernels: None,
            kout: KernelsOut::default(),
            block: BlockLayer::new(
                &scenario.host.scheduler,
                &scenario.tenants.iter().map(|t| t.weight).collect::<Vec<_>>(),
                scenario.host.queue_depth,
                device.nvme().queues,
                scenario.host.merge,
                device.is_open_channel(),
            ),
            merged: Vec::new(),
            hftl,
            runs_scratch: Vec::new(),
            pieces_live: 0,
            dispatches: None,
            machine: None,
            vout: VirtOutbox::default(),
            device,
            out: Outbox::default(),
            timeline: Timeline::new(
                scenario.tenants.iter().map(|t| t.name.clone()).collect(),
                scenario.tenants.iter().map(|t| t.weight).collect(),
                scenario.output.timeline_interval,
            ),
            overlap: Overlap::new(scenario.tenants.len()),
            precondition: PreconditionReport::default(),
            finished: None,
            check_every: None,
            external_done: Vec::new(),
            filebench: Vec::new(),
            tenant_dspecs: tenant_dspecs(&scenario),
            scenario,
        };
        if let Some(cpu) = &sim.scenario.host.cpu {
            let jobs: Vec<TenantId> = sim.work.jobs.iter().map(|j| j.tenant).collect();
            let batches: Vec<u32> = sim.work.jobs.iter().map(|j| j.spec.iodepth_batch).collect();
            let h = &sim.scenario.host;
            // On bare metal the plug is the host kernel's: its nomerges applies.
            let mut virt = sim.scenario.virt.clone();
            if !virt.mode.is_vm() {
                virt.nomerges = h.merge.nomerges;
            }
            sim.machine = Some(Machine::new(
                cpu.clone(),
                virt,
                &jobs,
                &batches,
                sim.scenario.tenants.len(),
                h.submit_overhead,
                h.completion_overhead,
            ));
        }
        if let Some(k) = sim.scenario.kernel {
            // Each fio job's files on its tenant's filesystem: each one's path (fio's
            // `directory`, then `filename` or `jobname.instance.filenum`) and range.
            let paths = |j: &job::JobRt| -> Option<Vec<(String, (u64, u64))>> {
                let workload = &sim.scenario.tenants[j.tenant.index()].workload;
                if !matches!(workload, crate::config::Workload::Fio(_)) {
                    return None;
                }
                let ranges = j.fio_files()?;
                let named = j.spec.all_options().filter(|(k, _)| k == "filename").last().map(|(_, v)| v.clone());
                // fio's `directory`: one, or several separated by ':' that the files take in turn.
                let dirs: Vec<String> = j
                    .spec
                    .all_options()
                    .filter(|(k, _)| k == "directory")
                    .last()
                    .map_or_else(Vec::new, |(_, v)| v.split(':').map(|d| format!("{d}/")).collect());
                let dir = |i: usize| dirs.get(i % dirs.len().max(1)).map_or("", String::as_str);
                Some(match named {
                    Some(name) if ranges.len() == 1 => vec![(format!("{}{name}", dir(0)), ranges[0])],
                    _ => ranges
                        .into_iter()
                        .enumerate()
                        .map(|(i, r)| (format!("{}{}.{}.{i}", dir(i), j.spec.name, j.clone), r))
                        .collect(),
                })
            };
            let reads = |j: &job::JobRt| j.spec.rw.does(crate::workload::fio::Dir::Read);
            let jobs: Vec<Option<BufferedJob>> = sim
                .work
                .jobs
                .iter()
                .map(|j| {
                    if j.engine().is_some() {
                        return None;
                    }
                    let files = paths(j)?;
                    // fio lays out a reading job's files (they need data) even with create_on_open.
                    let create_on_open = j.spec.create_on_open && !reads(j);
                    let allocate = j.spec.fallocate || reads(j);
                    let direct = j.spec.direct;
                    Some(BufferedJob { tenant: j.tenant, direct, files, create_on_open, unlink: j.spec.unlink, allocate })
                })
                .collect();
            // fio's file operation engines: their calls go to the filesystem whatever `direct` says.
            let engines: Vec<Option<EngineJob>> = sim
                .work
                .jobs
                .iter()
                .map(|j| {
                    let engine = j.engine()?;
                    let allocate = j.spec.fallocate || reads(j);
                    Some(EngineJob { tenant: j.tenant, engine, files: paths(j)?, allocate })
                })
                .collect();
            let regions: Vec<(u64, u64)> = sim.scenario.tenants.iter().map(|t| t.region).collect();
            let files_of: Vec<bool> = sim
                .scenario
                .tenants
                .iter()
                .map(|t| matches!(t.workload, crate::config::Workload::Filebench { .. }))
                .collect();
            let kernels = Kernels::new(k, &regions, &jobs, &files_of, &engines).map_err(SimError::Config)?;
            // fio's unlink deletes files only on a filesystem.
            for ((job, b), e) in sim.work.jobs.iter_mut().zip(&jobs).zip(&engines) {
                let buffered = b.as_ref().is_some_and(|b| b.unlink && k.filesystem == crate::kernel::kernels::Filesystem::Ext4);
                if buffered || (e.is_some() && job.spec.unlink) {
                    job.set_unlink();
                }
            }
            sim.kernels = Some(kernels);
            sim.filebench_setup().map_err(SimError::Config)?;
        }
        sim.precondition = match &sim.scenario.drive_state {
            Some(path) => sim.device.load_state(path, &sim.scenario.drive_key())?,
            None => sim.run_precondition(stop),
        };
        sim.start();
        if sim.precondition.interrupted {
            sim.finished = Some(StopReason::Interrupted);
        }
        Ok(sim)
    }

    /// Streams the timeline's rows to `sink` as intervals close, instead of keeping them for
    /// [`RunResults::timeline`] (which is then empty). Call before running.
    pub fn stream_timeline(&mut self, sink: Box<dyn TimelineSink>) {
        self.timeline.stream_to(sink);
    }

    /// Tells `sink` of every command the host block layer sends to the device from now on
    /// (preconditioning is over when the simulator exists).
    pub fn record_dispatches(&mut self, sink: Box<dyn DispatchSink>) {
        self.dispatches = Some(sink);
    }

    /// Run every component's invariant check each `every` events (and at the end).
    pub fn check_invariants_every(&mut self, every: u64) {
        self.check_every = Some(every.max(1));
    }

    /// Writes the drive as preconditioning left it to `path` (`flashmux age --save`), for
    /// scenarios with the same [`Scenario::drive_key`] to load (`[precondition] state_file`).
    /// Call before running: the drive changes as soon as the run writes. Returns the bytes
    /// written.
    pub fn save_drive_state(&self, path: &std::path::Path) -> Result<u64, SimError> {
        let err = |message: String| crate::device::drive_state::DriveStateError { path: path.display().to_string(), message };
        if self.processed > 0 {
            return Err(err("the run has started: the drive is no longer as preconditioning left it".into()).into());
        }
        if self.precondition.interrupted {
            return Err(err("preconditioning was interrupted: nothing saved".into()).into());
        }
        let s = &self.scenario;
        let summary = format!(
            "{}, {} bytes, {}, fill {}, seed {}, {} tenants",
            s.device.preset,
            s.device.capacity_bytes(),
            s.precondition.state.name(),
            s.precondition.fill,
            s.seed,
            s.tenants.len()
        );
        Ok(self.device.save_state(path, &s.drive_key(), &self.precondition, &summary)?)
    }

    fn run_precondition(&mut self, stop: &dyn Fn() -> bool) -> PreconditionReport {
        let regions: Vec<(u64, u64)> = self.scenario.tenants.iter().map(|t| t.region).collect();
        let writers = if self.scenario.precondition.state == PreconditionState::Workload {
            aging::tenant_writers(&self.scenario, self.device.sector_bytes())
        } else {
            Vec::new()
        };
        self.device.precondition(&self.scenario.precondition, &regions, writers, self.scenario.seed, stop)
    }

    fn start(&mut self) {
        if let Some(m) = &mut self.machine {
            m.start(SimTime::ZERO, &mut self.vout);
            self.drain_machine();
        }
        for d in 0..self.work.domains() {
            self.start_phase(d);
        }
        if let Some(t) = self.scenario.stop.time {
            self.events.push(SimTime::ZERO + t, Event::Stop);
        }
        self.events.push(SimTime::ZERO + self.timeline.interval(), Event::Tick);
        if self.work.jobs.is_empty() {
            self.finished = Some(StopReason::AllJobsDone);
        }
    }

    /// `domain`'s current phase begins now.
    fn start_phase(&mut self, domain: usize) {
        let starting = self.work.start_phase(domain, self.now);
        self.schedule_starts(starting);
    }

    /// Each job starts at its time.
    fn schedule_starts(&mut self, starting: Vec<(JobId, SimTime)>) {
        for (j, at) in starting {
            self.events.push(at, Event::JobStart(j));
        }
    }

    pub fn now(&self) -> SimTime {
        self.now
    }
    pub fn events_processed(&self) -> u64 {
        self.processed
    }
    pub fn requests_completed(&self) -> u64 {
        self.completed
    }
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }
    pub fn device(&self) -> &Device {
        &self.device
    }
    pub fn precondition_report(&self) -> &PreconditionReport {
        &self.precondition
    }

    /// Processes up to `max_events` events.
    pub fn run_for(&mut self, max_events: u64) -> Progress {
        self.run_events(max_events, || false)
    }

    /// Processes up to `max_events` events, asking `stop` before each: once it says so, the run
    /// is interrupted ([`Simulator::interrupt`]) there. However slow the events (invariant checks
    /// after each), a stop takes effect after the event in progress.
    pub fn run_polling(&mut self, max_events: u64, stop: &dyn Fn() -> bool) -> Progress {
        self.run_events(max_events, stop)
    }

    fn run_events(&mut self, max_events: u64, stop: impl Fn() -> bool) -> Progress {
        for _ in 0..max_events {
            if self.finished.is_none() && stop() {
                self.interrupt();
            }
            if let Some(r) = self.finished {
                return Progress::Finished(r);
            }
            let Some((t, ev)) = self.events.pop() else {
                // Nothing left to happen: every job is done or waiting for nothing.
                self.finished = Some(StopReason::AllJobsDone);
                break;
            };
            debug_assert!(t >= self.now, "time went backwards");
            self.now = t;
            self.processed += 1;
            self.dispatch(ev);
            if let Some(every) = self.check_every {
                if self.processed % every == 0 {
                    self.check_invariants();
                }
            }
        }
        match self.finished {
            Some(r) => Progress::Finished(r),
            None => Progress::Running,
        }
    }

    /// Runs to the end.
    pub fn run(&mut self) -> StopReason {
        loop {
            if let Progress::Finished(r) = self.run_for(1 << 20) {
                return r;
            }
        }
    }

    /// Stops the run now (e.g. the user pressed Ctrl-C); results cover what happened so far.
    pub fn interrupt(&mut self) {
        if self.finished.is_none() {
            self.finished = Some(StopReason::Interrupted);
        }
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::JobStart(j) => self.job_start(j),
            Event::JobWake(j) => {
                self.work.jobs[j.index()].wake_at = None;
                self.try_issue(j);
            }
            Event::JobDeadline(j) => {
                let job = &mut self.work.jobs[j.index()];
                if job.state == JobState::Running {
                    job.state = JobState::Draining;
                    self.maybe_finish_job(j);
                }
            }
            Event::HostArrive(r) => self.host_arrive(r),
            Event::KernelArrive(r) => self.kernel_arrive(r),
            Event::KernelWake(k) => {
                let (now, mut out) = (self.now, std::mem::take(&mut self.kout));
                self.kernels_mut().woke(now, k as usize, &mut out).unwrap_or_else(|e| panic!("kernel: {e}"));
                self.apply_kernel_out(k as usize, out, true);
            }
            Event::Machine(me) => {
                if let Some(m) = &mut self.machine {
                    m.handle(self.now, me, &mut self.vout);
                }
            }
            Event::HostWake => {
                self.block.woke(self.now);
                self.host_dispatch();
            }
            Event::Device(de) => {
                self.device.handle(self.now, de, &mut self.out);
                self.drain_outbox();
            }
            Event::AppComplete(r) => self.app_complete(r),
            Event::Tick => self.tick(),
            Event::Stop => self.finished = Some(StopReason::TimeLimit),
        }
        // Whatever the event gave the machine (a job's requests, a device completion, its own
        // step) is handed on.
        self.drain_machine();
    }

    fn job_start(&mut self, j: JobId) {
        let job = &mut self.work.jobs[j.index()];
        job.begin(self.now);
        self.overlap.job_began(job.tenant.index(), job.measure_from());
        if let Some(deadline) = job.deadline {
            self.events.push(deadline, Event::JobDeadline(j));
        }
        self.try_issue(j);
    }

    /// Issues as many I/Os as the job's depth, rate and think time allow.
    fn try_issue(&mut self, j: JobId) {
        loop {
            let now = self.now;
            let job = &mut self.work.jobs[j.index()];
            let tenant = job.tenant;
            match job.next_io(now) {
                job::Next::Io(io) => self.issue(j, tenant, io),
                job::Next::WaitUntil(t) => {
                    let job = &mut self.work.jobs[j.index()];
                    if job.wake_at.is_none() {
                        job.wake_at = Some(t);
                        self.events.push(t, Event::JobWake(j));
                    }
                    return;
                }
                job::Next::Blocked => return,
                job::Next::Exhausted => {
                    self.maybe_finish_job(j);
                    return;
                }
                job::Next::Open { first } => {
                    let call = self.kernel_call(tenant, |k, now, out| k.engine_open(now, tenant, j, first, out));
                    let Some(call) = call else {
                        // ENOSPC: the job ends, as fio's ends on the error.
                        self.work.jobs[j.index()].open_failed();
                        self.maybe_finish_job(j);
                        return;
                    };
                    self.issue(j, tenant, IoReq { op: IoOp::Flush, offset: first, len: 0, tag: 0, call: Some(call), dspec: 0 });
                }
                job::Next::Pull(thread) => match self.filebench_next(j, tenant, thread) {
                    filebench::FbNext::Issue(io) => {
                        self.work.jobs[j.index()].pulled();
                        self.issue(j, tenant, io);
                    }
                    filebench::FbNext::Wait => return,
                    filebench::FbNext::Stopped => {
                        self.work.jobs[j.index()].source_ended();
                        self.maybe_finish_job(j);
                        return;
                    }
                },
            }
        }
    }

    /// A job's I/O leaves the application: through the machine when modelled, else after the
    /// submission overhead.
    fn issue(&mut self, j: JobId, tenant: TenantId, io: IoReq) {
        let now = self.now;
        let id = self.alloc_req(Request {
            job: j,
            tenant,
            op: io.op,
            offset: io.offset,
            len: io.len,
            app_len: io.len,
            host_cpu: None,
            issued: now,
            queued: now,
            tag: io.tag,
            kernel: None,
            call: io.call,
            plug_next: None,
            parent: None,
            pieces: 0,
            dspec: self.dspec_of(tenant, io.op, io.dspec),
            failed: None,
        });
        self.issued += 1;
        self.overlap.issued(tenant.index());
        if let Some(k) = &mut self.kernels {
            let files = k.is_direct_on_files(j);
            if files && matches!(io.op, IoOp::Read | IoOp::Write) && io.call.is_none() {
                return self.direct_on_files(id);
            }
            if (k.is_buffered(j) && io.op != IoOp::Trim) || io.call.is_some() || (files && io.op == IoOp::Flush) {
                if io.call.is_none() && io.op != IoOp::Flush {
                    k.prefetch(tenant, j, io.offset);
                }
                self.events.push(now + self.scenario.host.submit_overhead, Event::KernelArrive(id));
                return;
            }
            k.direct_io(now, tenant, io.op, io.offset, io.len).unwrap_or_else(|e| panic!("kernel: {e}"));
        }
        let mut runs = std::mem::take(&mut self.runs_scratch);
        runs.push((io.offset, io.len));
        self.send_runs(id, &mut runs);
        self.runs_scratch = runs;
    }

    /// The largest request the block layer takes (its `max_sectors_kb`): the guest's in a VM,
    /// else the host's.
    fn max_request(&self) -> u64 {
        if self.scenario.virt.mode.is_vm() {
            self.scenario.virt.max_merge_bytes
        } else {
            self.scenario.host.merge.max_bytes
        }
    }

    /// Sends application request `id` down as `runs` (device offset, length; taken): whole when
    /// it is one run no larger than the block layer's largest request, else as pieces — a piece
    /// per run, each cut at the largest request as `bio_split` cuts a bio (a trim or flush is
    /// never cut) — each a request of its own below, the request complete when the last piece
    /// is; with no run (a read of a hole) it completes with no I/O.
    fn send_runs(&mut self, id: ReqId, runs: &mut Vec<(u64, u64)>) {
        let r = self.reqs[id.index()];
        let max = if matches!(r.op, IoOp::Read | IoOp::Write) { self.max_request() } else { u64::MAX };
        debug_assert!(max >= 4096, "validated: at least 4 KiB");
        let n: u64 = runs.iter().map(|&(_, len)| len.div_ceil(max).max(1)).sum();
        match (runs.len(), n) {
            (0, _) => {
                let h = &self.scenario.host;
                self.events.push(self.now + h.submit_overhead + h.completion_overhead, Event::AppComplete(id));
            }
            (1, 1) => {
                self.reqs[id.index()].offset = runs[0].0;
                self.send_down(id);
            }
            _ => {
                self.reqs[id.index()].pieces = n as u32;
                self.reqs[id.index()].queued = SimTime::MAX;
                for &(start, len) in runs.iter() {
                    let mut at = 0;
                    loop {
                        let piece = (len - at).min(max);
                        let p = self.alloc_req(Request { offset: start + at, len: piece, app_len: piece, parent: Some(id), ..r });
                        self.pieces_live += 1;
                        self.send_down(p);
                        at += piece;
                        if at >= len {
                            break;
                        }
                    }
                }
            }
        }
        runs.clear();
    }

    /// A direct job's read or write `id` of its file on a filesystem: sent to where the file's
    /// blocks are, a piece per physical run when there are several (as the block layer sees a
    /// bio per extent; `send_runs`).
    fn direct_on_files(&mut self, id: ReqId) {
        let r = self.reqs[id.index()];
        let mut runs = std::mem::take(&mut self.runs_scratch);
        self.kernel_call(r.tenant, |k, now, out| k.direct_map(now, r.tenant, r.job, (r.op, r.offset, r.len), &mut runs, out));
        self.send_runs(id, &mut runs);
        self.runs_scratch = runs;
    }

    /// Request `id` leaves for the block layer: through the machine when modelled, else after
    /// the submission overhead.
    fn send_down(&mut self, id: ReqId) {
        let now = self.now;
        let r = self.reqs[id.index()];
        if r.op != IoOp::Flush {
            self.device.prefetch_hint(r.offset, true);
        }
        match &mut self.machine {
            Some(m) => {
                let io = Io { req: id, job: r.job, op: r.op, offset: r.offset, len: r.len };
                m.submit(now, io, &mut self.vout)
            }
            None => {
                let arrive = now + self.scenario.host.submit_overhead;
                self.events.push(arrive, Event::HostArrive(id));
            }
        }
    }

    fn alloc_req(&mut self, r: Request) -> ReqId {
        match self.free_reqs.pop() {
            Some(i) => {
                self.reqs[i as usize] = r;
                ReqId(i)
            }
            None => {
                self.reqs.push(r);
                ReqId(self.reqs.len() as u32 - 1)
            }
        }
    }

    fn kernels_mut(&mut self) -> &mut Kernels {
        self.kernels.as_mut().expect("a kernel event needs kernels")
    }

    /// A buffered job's request `r` reaches its kernel.
    fn kernel_arrive(&mut self, r: ReqId) {
        let now = self.now;
        let req = &mut self.reqs[r.index()];
        req.queued = now;
        let (t, j, io, call) = (req.tenant, req.job, (req.op, req.offset, req.len), req.call);
        let mut out = std::mem::take(&mut self.kout);
        let kernels = self.kernels_mut();
        let done = match call {
            Some(c) => kernels.call(now, t, r, c, (io.1, io.2), &mut out),
            None => kernels.submit(now, t, j, r, io, &mut out),
        };
        done.unwrap_or_else(|e| panic!("kernel: {e}"));
        let k = kernels.kernel_of(t);
        self.apply_kernel_out(k, out, false);
    }

    /// Makes call `f` of tenant `t`'s kernel at the current time and applies what it produced
    /// (device requests, completions, its flusher's wake-up); the call's result. A kernel error
    /// is a bug of the model, not of the input: it stops the run.
    fn kernel_call<R>(
        &mut self,
        t: TenantId,
        f: impl FnOnce(&mut Kernels, SimTime, &mut KernelsOut) -> Result<R, String>,
    ) -> R {
        let (now, mut out) = (self.now, std::mem::take(&mut self.kout));
        let kernels = self.kernels_mut();
        let r = f(kernels, now, &mut out).unwrap_or_else(|e| panic!("kernel: {e}"));
        let k = kernels.kernel_of(t);
        self.apply_kernel_out(k, out, false);
        r
    }

    /// Sends the device requests kernel `k` asked for, completes the jobs' requests it finished
    /// (after the copy to or from their buffers), and schedules its flusher.
    ///
    /// The requests of one call are submitted under a plug, as the flusher, fsync and the
    /// journal submit theirs (`blk_start_plug` ... `blk_finish_plug`): a read or write that
    /// starts where the plug's last request of its tenant and direction ends joins it, up to
    /// `max_sectors_kb` (`blk_attempt_plug_merge` tries the last request only), unless
    /// `nomerges = 2`; the joined ones complete with it. Each request (with those joined to it)
    /// goes when it has one of the kernel's tags (`kernel/tags.rs`); `background`: the kernel's
    /// own wake-up (its flusher, its journal's timer) made them.
    fn apply_kernel_out(&mut self, k: usize, mut out: KernelsOut, background: bool) {
        let now = self.now;
        let merge = self.scenario.host.merge;
        let mut plug: Option<(ReqId, ReqId)> = None; // (lead, last member)
        let mut merged = 0;
        for d in out.device.drain(..) {
            let t = d.tenant;
            let job = JobId(self.work.tenant_jobs[t.index()][0] as u32);
            let (offset, len) = (d.offset, d.len);
            if let Some((lead, last)) = plug {
                let l = &self.reqs[lead.index()];
                let joins = merge.nomerges < 2
                    && matches!(d.op, IoOp::Read | IoOp::Write)
                    && l.tenant == t
                    && l.dspec == self.dspec_of(t, d.op, 0)
                    && l.op == d.op
                    && l.offset + l.len == offset
                    && l.len + len <= merge.max_bytes;
                if joins {
                    let id = self.kernel_request(job, &d);
                    self.reqs[lead.index()].len += len;
                    self.reqs[last.index()].plug_next = Some(id);
                    plug = Some((lead, id));
                    merged += 1;
                    continue;
                }
                self.send_tagged(k, lead, background);
            }
            let id = self.kernel_request(job, &d);
            plug = Some((id, id));
        }
        if let Some((lead, _)) = plug {
            self.send_tagged(k, lead, background);
        }
        let kernels = self.kernels.as_mut().expect("kernel output needs kernels");
        kernels.note_plug_merges(k, merged);
        for r in out.done.drain(..) {
            let req = &self.reqs[r.index()];
            let at = now + kernels.call_time(req.op, req.offset, req.app_len, req.call) + self.scenario.host.completion_overhead;
            self.events.push(at, Event::AppComplete(r));
        }
        if let Some(at) = kernels.arm(now, k) {
            self.events.push(at, Event::KernelWake(k as u16));
        }
        self.kout = out;
    }

    /// Kernel `k`'s request `lead` leaves when it has a tag, else waits for one.
    fn send_tagged(&mut self, k: usize, lead: ReqId, background: bool) {
        if self.kernels_mut().take_tag(k, lead, background) {
            self.send_down(lead);
        }
    }

    /// A kernel's device request `d`, from its tenant's first job's thread.
    fn kernel_request(&mut self, job: JobId, d: &crate::kernel::kernels::DeviceIo) -> ReqId {
        self.kernel_issued += 1;
        self.alloc_req(Request {
            job,
            tenant: d.tenant,
            op: d.op,
            offset: d.offset,
            len: d.len,
            app_len: d.len,
            host_cpu: None,
            issued: self.now,
            queued: self.now,
            tag: 0,
            kernel: Some(d.id),
            call: None,
            plug_next: None,
            parent: None,
            pieces: 0,
            dspec: self.dspec_of(d.tenant, d.op, 0),
            failed: None,
        })
    }

    /// The placement directive a request of `tenant` carries: the job's own (`job`, fio's
    /// `dataplacement`), else the tenant's default placement; only writes carry one.
    fn dspec_of(&self, tenant: TenantId, op: IoOp, job: u16) -> u16 {
        match op {
            IoOp::Write if job != 0 => job,
            IoOp::Write => self.tenant_dspecs.get(tenant.index()).copied().unwrap_or(0),
            _ => 0,
        }
    }

    /// A kernel's device request `r` completed, with those its plug merged into it.
    fn kernel_done(&mut self, r: ReqId) {
        let (now, mut out) = (self.now, std::mem::take(&mut self.kout));
        let mut next = Some(r);
        let tenant = self.reqs[r.index()].tenant;
        while let Some(x) = next {
            let req = self.reqs[x.index()];
            let id = req.kernel.expect("a kernel's request");
            self.free_reqs.push(x.0);
            self.kernel_completed += 1;
            let kernels = self.kernels.as_mut().expect("a kernel event needs kernels");
            kernels.device_done(now, req.tenant, id, req.op, &mut out).unwrap_or_else(|e| panic!("kernel: {e}"));
            next = req.plug_next;
        }
        let k = self.kernels_mut().kernel_of(tenant);
        if let Some(w) = self.kernels_mut().put_tag(k) {
            self.send_down(w);
        }
        self.apply_kernel_out(k, out, false);
    }

    /// Request `r` reaches the host block layer.
    fn host_arrive(&mut self, r: ReqId) {
        let req = &mut self.reqs[r.index()];
        req.queued = self.now;
        if req.op != IoOp::Flush {
            self.device.prefetch_hint(req.offset, false);
        }
        let b = BlockReq { id: r, tenant: req.tenant, op: req.op, offset: req.offset, len: req.len, cpu: req.host_cpu, dspec: req.dspec };
        self.block.arrive(self.now, b, ftl_view(&self.device, &self.scenario));
        self.host_dispatch();
    }

    /// Hands on what the machine produced — events, requests for the host block layer,
    /// completions the application sees — until it has nothing more.
    fn drain_machine(&mut self) {
        if self.machine.is_none() {
            return;
        }
        loop {
            for (t, e) in self.vout.events.drain(..) {
                self.events.push(t, Event::Machine(e));
            }
            let to_host = std::mem::take(&mut self.vout.to_host);
            for h in &to_host {
                let req = &mut self.reqs[h.req.index()];
                req.offset = h.offset;
                req.len = h.len;
                req.host_cpu = Some(h.cpu.0);
                self.host_arrive(h.req);
            }
            self.vout.to_host = to_host;
            self.vout.to_host.clear();
            let to_app = std::mem::take(&mut self.vout.to_app);
            for &r in &to_app {
                self.app_complete(r);
            }
            self.vout.to_app = to_app;
            self.vout.to_app.clear();
            let Some(m) = &mut self.machine else { return };
            if !m.has_pending() && self.vout.is_empty() {
                return;
            }
            m.settle(self.now, &mut self.vout);
        }
    }

    /// The block layer sends what it may: flushes first, then what the scheduler gives out.
    fn host_dispatch(&mut self) {
        while let Some(cmd) = self.block.next_flush(self.now, |q| self.device.queue_has_room(q)) {
            self.send(cmd);
        }
        self.block.observe(self.now, ftl_view(&self.device, &self.scenario));
        loop {
            let (device, hftl) = (&self.device, &self.hftl);
            let room = |q| device.queue_has_room(q) && hftl.as_ref().is_none_or(|h| h.has_room());
            let Some(cmd) = self.block.next_request(self.now, room) else { break };
            self.send(cmd);
        }
        if let Some(t) = self.block.arm_wakeup(self.now) {
            self.events.push(t, Event::HostWake);
        }
    }

    /// Submits a command the block layer dispatched (its completion may come at once, and the
    /// block layer then dispatches again before this returns).
    fn send(&mut self, cmd: Command) {
        if let Some(s) = &mut self.dispatches {
            s.dispatched(self.now, cmd.tenant, cmd.op, cmd.offset, cmd.len);
        }
        match &mut self.hftl {
            Some(h) => {
                let mut done = Vec::new();
                h.submit(cmd, &mut done);
                self.out.completed.extend(done);
                h.pump(self.now, &mut self.device, &mut self.out);
            }
            None => self.device.submit(self.now, cmd, &mut self.out),
        }
        self.drain_outbox();
    }

    fn drain_outbox(&mut self) {
        for (t, e) in self.out.events.drain(..) {
            self.events.push(t, Event::Device(e));
        }
        if self.out.completed.is_empty() {
            return;
        }
        let mut done = std::mem::take(&mut self.out.completed);
        if let Some(h) = &mut self.hftl {
            // The host FTL's commands: their requests complete when the last one has.
            let failed: Vec<(ReqId, crate::device::zns::ZnsStatus)> = self.out.failed.drain(..).collect();
            let status = |r: ReqId| failed.iter().find(|f| f.0 == r).map(|f| f.1);
            let mut parents = Vec::new();
            for &r in done.iter().filter(|r| r.0 & host_ftl::CHILD != 0) {
                h.complete(r, status(r), &mut parents);
            }
            done.retain(|r| r.0 & host_ftl::CHILD == 0);
            done.extend(parents);
            h.take_failed(&mut self.out.failed);
            self.out.failed.extend(failed.iter().filter(|f| f.0 .0 & host_ftl::CHILD == 0));
            h.pump(self.now, &mut self.device, &mut self.out);
            // What the commands just sent scheduled (their fetches) is due from now.
            for (t, e) in self.out.events.drain(..) {
                self.events.push(t, Event::Device(e));
            }
        }
        for (r, status) in self.out.failed.drain(..) {
            self.reqs[r.index()].failed = Some(status);
        }
        // A Zone Append's ALBA goes to no one yet: no host layer here reads it back.
        self.out.appended.clear();
        let mut merged = std::mem::take(&mut self.merged);
        for &r in &done {
            // The command's lead, then the requests the elevator merged into it, which fail
            // with it.
            self.block.complete(self.now, r, ftl_view(&self.device, &self.scenario), &mut merged);
            let failed = self.reqs[r.index()].failed;
            for &x in &merged {
                self.reqs[x.index()].failed = failed;
            }
            for x in std::iter::once(r).chain(merged.drain(..)) {
                match &mut self.machine {
                    Some(m) => m.host_complete(self.now, x, &mut self.vout),
                    None => self.events.push(self.now + self.scenario.host.completion_overhead, Event::AppComplete(x)),
                }
            }
        }
        self.merged = merged;
        self.out.completed = done;
        self.out.completed.clear();
        self.host_dispatch();
    }

    fn app_complete(&mut self, r: ReqId) {
        let mut req = self.reqs[r.index()];
        if req.kernel.is_some() {
            return self.kernel_done(r);
        }
        let mut r = r;
        if let Some(p) = req.parent {
            // A piece: its request completes with the last one.
            self.free_reqs.push(r.0);
            self.pieces_live -= 1;
            let parent = &mut self.reqs[p.index()];
            parent.queued = parent.queued.min(req.queued);
            parent.failed = parent.failed.or(req.failed);
            parent.pieces -= 1;
            if parent.pieces > 0 {
                return;
            }
            (r, req) = (p, *parent);
        }
        self.free_reqs.push(r.0);
        self.completed += 1;
        let slat = req.queued.since(req.issued).0;
        let clat = self.now.since(req.queued).0;
        if req.op != IoOp::Flush {
            self.timeline.record(req.tenant, req.op, req.app_len, slat + clat);
        }
        let j = req.job;
        if self.work.jobs[j.index()].is_external() {
            self.external_done.push(external::ExternalDone { tag: req.tag, at: self.now });
        }
        let job = &mut self.work.jobs[j.index()];
        let measured = match req.call {
            // A call that moves no data and is not a sync: the thread's, not the job's I/O.
            Some(c) if matches!(c.op, FileOp::Meta(_) | FileOp::Done | FileOp::Delete) => {
                // The call's own time, as a program timing it sees it (fio's file operation
                // engines): not the completion overhead after it.
                job.call_returned(self.now, clat.saturating_sub(self.scenario.host.completion_overhead.0));
                false
            }
            _ => match req.failed {
                // A failed I/O is not in fio's statistics; fio's job stops at it unless
                // `continue_on_error` says to go on.
                Some(status) => job.io_failed(req.op, req.offset, status),
                None => job.complete(self.now, req.op, req.app_len, slat, clat),
            },
        };
        if measured {
            self.overlap.record(req.tenant.index(), self.now, req.app_len);
        }
        if let Some(thread) = req.call.and(self.work.jobs[j.index()].filebench_thread()) {
            let bytes = if matches!(req.op, IoOp::Read | IoOp::Write) { req.app_len } else { 0 };
            self.filebench_returned(req.tenant, thread, bytes);
        }
        if let Some(limit) = self.scenario.stop.requests {
            if self.completed >= limit {
                self.finished = Some(StopReason::RequestLimit);
                return;
            }
        }
        self.try_issue(j);
        self.maybe_finish_job(j);
    }

    fn maybe_finish_job(&mut self, j: JobId) {
        let job = &mut self.work.jobs[j.index()];
        if let Some(io) = job.end_sync(self.now) {
            let tenant = job.tenant;
            self.issue(j, tenant, io);
            return;
        }
        if let Some(first) = job.end_unlink(self.now) {
            let tenant = job.tenant;
            let call = if job.engine().is_some() {
                self.kernel_call(tenant, |k, now, out| k.engine_unlink(now, tenant, j, first, out))
            } else {
                self.kernels_mut().job_unlink(tenant, j, first).unwrap_or_else(|e| panic!("kernel: {e}"))
            };
            self.issue(j, tenant, IoReq { op: IoOp::Flush, offset: 0, len: 0, tag: 0, call: Some(call), dspec: 0 });
            return;
        }
        if !job.can_finish() {
            return;
        }
        let t = job.tenant.index();
        let ended = self.work.finish(j, self.now, &self.scenario);
        if ended.tenant_done {
            self.overlap.tenant_done(t, self.now);
        }
        self.schedule_starts(ended.starting);
        if ended.all_done {
            self.finished = Some(StopReason::AllJobsDone);
        }
    }

    /// An interval ends. If nothing at all is due before the interval after next, the whole
    /// intervals until the one holding the next event are idle: they close as one stretch, and
    /// the next tick is at the end of that interval. (With nothing due at all, as while an export
    /// waits for its clients, ticks go on one interval at a time.)
    fn tick(&mut self) {
        let snap = self.snapshots();
        let periods = self.overlap.periods(self.now);
        self.timeline.close_interval(self.now, &snap, &periods);
        let i = self.timeline.interval().0;
        let mut next = self.now + Nanos(i);
        if let Some(due) = self.events.peek_time() {
            let idle = due.since(self.now).0 / i;
            if idle >= 2 {
                let until = self.now + Nanos(idle * i);
                self.timeline.skip_idle(until, &snap, &periods);
                next = until + Nanos(i);
            }
        }
        self.events.push(next, Event::Tick);
    }

    pub fn check_invariants(&self) {
        let live = self.reqs.len() - self.free_reqs.len();
        let kernel_live = self.kernel_issued - self.kernel_completed;
        assert_eq!(live as u64, self.issued - self.completed + kernel_live + self.pieces_live, "requests not conserved");
        match &self.hftl {
            Some(h) => {
                assert!(self.device.in_flight() <= h.in_flight() as u64, "the drive has commands the host FTL did not send");
                h.check_invariants();
            }
            None => assert_eq!(
                self.device.in_flight(),
                self.block.inflight() as u64,
                "device and host disagree on requests in flight"
            ),
        }
        // With nothing left to happen but the timeline's ticks (and the time limit), every
        // request must have completed and every job ended (an export's job waits for its
        // clients; the request limit stops jobs where they are): otherwise something waits for
        // an event that will never come, and a run without a time limit would tick on forever.
        let stop_pending = self.scenario.stop.time.is_some() && self.finished != Some(StopReason::TimeLimit);
        if self.events.len() <= 1 + stop_pending as usize {
            assert_eq!(
                self.issued, self.completed,
                "nothing left to happen at {} but {} requests in flight: they will never complete",
                self.now,
                self.issued - self.completed
            );
            let cut_off = self.finished == Some(StopReason::RequestLimit);
            if let Some(j) = self.work.jobs.iter().find(|j| j.state != JobState::Done && !j.is_external() && !cut_off) {
                panic!(
                    "nothing left to happen at {} but job '{}' (clone {}) of tenant {} is {:?}: it waits for nothing",
                    self.now,
                    j.spec.name,
                    j.clone,
                    j.tenant.index(),
                    j.state
                );
            }
        }
        self.block.check_invariants();
        self.device.check_invariants();
        if let Some(m) = &self.machine {
            m.check_invariants();
        }
        if let Some(k) = &self.kernels {
            k.check_invariants();
        }
        self.filebench_check_invariants();
        for j in &self.work.jobs {
            j.check_invariants();
        }
    }

}

fn build_device(s: &Scenario) -> Result<Device, SimError> {
    // The drive draws from the scenario's seed as run (a `--seed` given after loading too).
    let mut kind = s.device.kind.clone();
    if let crate::device::DeviceKind::Ssd(c) = &mut kind {
        c.seed = s.seed;
    }
    let mut device =
        Device::build(s.device.nvme.clone(), &kind, s.tenants.len()).map_err(|e| SimError::Device(e.to_string()))?;
    if let crate::device::Backend::Ssd(ssd) = device.backend_mut() {
        ssd.set_tenant_dspecs(tenant_dspecs(s));
    }
    Ok(device)
}

/// What the host scheduler sees of the drive's FTL, for a scheduler that looks (the budget
/// schedulers); the others are spared the lookups.
#[inline]
fn ftl_view<'a>(device: &'a Device, s: &Scenario) -> Option<&'a dyn crate::device::FtlView> {
    if s.host.scheduler.needs_host_ftl() {
        device.ftl_view()
    } else {
        None
    }
}

/// Each tenant's default placement directive, by tenant index (0: none).
fn tenant_dspecs(s: &Scenario) -> Vec<u16> {
    s.tenants.iter().map(|t| t.placement.unwrap_or(0)).collect()
}

/// Duration helper for callers that want the scenario's stop time as a fraction (progress bars).
pub fn progress_fraction(sim: &Simulator) -> Option<f64> {
    let s = sim.scenario();
    let by_time = s.stop.time.map(|t| sim.now().0 as f64 / t.0.max(1) as f64);
    let by_reqs = s.stop.requests.map(|r| sim.requests_completed() as f64 / r.max(1) as f64);
    match (by_time, by_reqs) {
        (Some(a), Some(b)) => Some(a.max(b).min(1.0)),
        (Some(a), None) | (None, Some(a)) => Some(a.min(1.0)),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A writer at depth 4 on a null device whose commands take 1 ms, run for a few events.
    fn running() -> Simulator {
        let text = "[device]\npreset = \"null\"\n[device.null]\nlatency = \"1ms\"\n[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[w]\nrw=randwrite\niodepth=4\nnumber_ios=100\n\"\"\"\n";
        let mut sim = Simulator::new(Scenario::from_toml(text, "<test>", Path::new(".")).unwrap()).unwrap();
        assert_eq!(sim.run_for(20), Progress::Running);
        sim
    }

    /// Everything that was to happen is lost but the timeline's next tick.
    fn lose_events(sim: &mut Simulator) {
        let tick = std::iter::from_fn(|| sim.events.pop()).find(|(_, e)| *e == Event::Tick).expect("a tick is pending");
        sim.events.push(tick.0, tick.1);
    }

    /// Two tenants that always have commands waiting, each on its own queue of a null device
    /// with one controller core: completions per tenant.
    fn arbitrated(interface: &str, priorities: [&str; 2]) -> [u64; 2] {
        let tenant = |name: &str, p: &str| {
            format!("[[tenant]]\nname = \"{name}\"\n{p}fio = \"\"\"\n[w]\nrw=randread\niodepth=32\n\"\"\"\n")
        };
        let text = format!(
            "[device]\npreset = \"null\"\n[device.null]\nlatency = \"1us\"\n[device.interface]\nqueues = 2\ncontroller_cores = 1\ncommand_overhead = \"10us\"\n{interface}[stop]\nrequests = 7000\n{}{}",
            tenant("a", priorities[0]),
            tenant("b", priorities[1])
        );
        let mut sim = Simulator::new(Scenario::from_toml(&text, "<test>", Path::new(".")).unwrap()).unwrap();
        sim.run();
        let r = sim.finish();
        [r.tenants[0].io.read.ios, r.tenants[1].io.read.ios]
    }

    #[test]
    fn weighted_round_robin_shares_the_controller_by_class() {
        // Round robin: one command each in turn (a's queue is in the list before b's first
        // command arrives, so a is two ahead at most).
        let [a, b] = arbitrated("", ["", ""]);
        assert!(a.abs_diff(b) <= 2, "{a} {b}");
        // High (4) against low (1): four commands to one while both wait.
        let [a, b] = arbitrated("arbitration = \"wrr\"\n", ["priority = \"high\"\n", "priority = \"low\"\n"]);
        assert!(a.abs_diff(4 * b) <= 4, "{a} {b}");
        // Urgent first: the other tenant's commands wait as long as urgent ones are queued.
        let [a, b] = arbitrated("arbitration = \"wrr\"\n", ["priority = \"urgent\"\n", "priority = \"high\"\n"]);
        assert!(b <= 32 && a >= 7000 - 32, "{a} {b}");
        // The same weights given per queue.
        let [a, b] = arbitrated("arbitration = \"wrr\"\nwrr_weights = [3, 2, 1]\nqueue_classes = [\"medium\", \"low\"]\n", ["", ""]);
        assert!(a.abs_diff(2 * b) <= 2, "{a} {b}");
    }

    #[test]
    fn a_running_simulation_keeps_its_invariants() {
        let mut sim = running();
        sim.check_invariants();
        assert_eq!(sim.run(), StopReason::AllJobsDone);
        sim.check_invariants();
    }

    #[test]
    fn a_request_limit_stops_jobs_where_they_are() {
        // The last completion reaches the limit: its job issues nothing more, and waits for
        // nothing because the run is over.
        let text = "[device]\npreset = \"null\"\n[stop]\nrequests = 10\n[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[w]\nrw=randwrite\n\"\"\"\n";
        let mut sim = Simulator::new(Scenario::from_toml(text, "<test>", Path::new(".")).unwrap()).unwrap();
        sim.check_invariants_every(1);
        assert_eq!(sim.run(), StopReason::RequestLimit);
        let r = sim.finish();
        assert_eq!((r.requests_completed, r.requests_in_flight), (10, 0));
    }

    #[test]
    #[should_panic(expected = "nothing left to happen")]
    fn requests_in_flight_with_nothing_left_to_complete_them_break_an_invariant() {
        let mut sim = running();
        assert!(sim.issued > sim.completed);
        lose_events(&mut sim);
        sim.check_invariants();
    }

    #[test]
    #[should_panic(expected = "nothing left to happen")]
    fn a_job_waiting_for_nothing_breaks_an_invariant() {
        let text = "[device]\npreset = \"null\"\n[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[w]\nrw=randwrite\nrate_iops=10\nnumber_ios=5\n\"\"\"\n";
        let mut sim = Simulator::new(Scenario::from_toml(text, "<test>", Path::new(".")).unwrap()).unwrap();
        // The first write completes; the job then waits for its rate limit's wake-up.
        while sim.completed == 0 {
            assert_eq!(sim.run_for(1), Progress::Running);
        }
        assert_eq!(sim.issued, sim.completed);
        lose_events(&mut sim);
        sim.check_invariants();
    }
}
