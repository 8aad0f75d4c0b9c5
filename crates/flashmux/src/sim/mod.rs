//! The simulator: one event loop over every layer.
//!
//! ```text
//! job issues ──(submit overhead)──► host scheduler ──► NVMe queue ──► device
//!   ▲                                                                   │
//!   └──(completion overhead)◄── host completion ◄────── completion ◄────┘
//! ```
//! Flushes (fio's syncs) skip the host scheduler, as Linux's blk-flush machinery does.
//! Events are typed and ordered by (time, insertion); nothing reads a clock, so a run is a pure
//! function of its scenario and seed.

pub mod external;
mod job;
mod overlap;
mod timeline;
pub mod trace;

use crate::config::{DeviceKind, Scenario};
use crate::device::precondition::{PreconditionReport, PreconditionState};
use crate::device::{Backend, Command, Device, DeviceEvent, IoOp, Outbox, Ssd, TenantDeviceReport};
use crate::engine::EventQueue;
use crate::host::{SchedReq, Scheduler};
use crate::metrics::{DeviceResult, Fairness, JobResult, RunResults, StopReason, TenantResult};
use crate::units::{JobId, Nanos, QueueId, ReqId, SimTime, TenantId};
use crate::virt::{Io, Machine, MachineEvent, VirtOutbox};
use job::{IoReq, JobRt, JobState};
use trace::ReplayStats;
pub use external::{Export, ExternalDone, ExternalIo};
use overlap::{Overlap, Window};
use std::collections::VecDeque;
use timeline::Timeline;
pub use timeline::{TimelineSink, KEEP_ROWS};

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
    queued: SimTime,
    dispatched: SimTime,
    /// On an open-channel drive: a write of mapped data when it reached the scheduler.
    update: bool,
    /// An export's request: its client's tag.
    tag: u64,
}

impl Request {
    /// What the host scheduler knows of request `id`.
    fn sched_req(&self, id: ReqId) -> SchedReq {
        SchedReq { id, tenant: self.tenant, op: self.op, offset: self.offset, bytes: self.len, update: self.update }
    }
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
}

pub struct Simulator {
    scenario: Scenario,
    now: SimTime,
    events: EventQueue<Event>,
    processed: u64,
    jobs: Vec<JobRt>,
    tenant_jobs: Vec<Vec<usize>>,
    /// Per domain (indexed by domain id): phases of job indices, and the domain's current phase.
    phases: Vec<(Vec<Vec<usize>>, usize)>,
    reqs: Vec<Request>,
    free_reqs: Vec<u32>,
    issued: u64,
    completed: u64,
    host_inflight: u32,
    host_wake_at: Option<SimTime>,
    /// Flushes waiting for a host tag or room in their NVMe queue. Like Linux's blk-flush, they
    /// bypass the I/O scheduler and go before what it holds.
    host_flushes: VecDeque<ReqId>,
    sched: Box<dyn Scheduler>,
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
        let device = build_device(&scenario)?;
        let mut sim = Simulator {
            now: SimTime::ZERO,
            events: EventQueue::new(),
            processed: 0,
            jobs: Vec::new(),
            tenant_jobs: vec![Vec::new(); scenario.tenants.len()],
            phases: Vec::new(),
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            issued: 0,
            completed: 0,
            host_inflight: 0,
            host_wake_at: None,
            host_flushes: VecDeque::new(),
            sched: scenario.host.scheduler.build(&scenario.tenants.iter().map(|t| t.weight).collect::<Vec<_>>(), scenario.host.queue_depth),
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
            scenario,
        };
        sim.build_jobs()?;
        if let Some(cpu) = &sim.scenario.host.cpu {
            let jobs: Vec<usize> = sim.jobs.iter().map(|j| j.tenant.index()).collect();
            let batches: Vec<u32> = sim.jobs.iter().map(|j| j.spec.iodepth_batch).collect();
            let h = &sim.scenario.host;
            sim.machine = Some(Machine::new(
                cpu.clone(),
                sim.scenario.virt.clone(),
                &jobs,
                &batches,
                sim.scenario.tenants.len(),
                h.submit_overhead,
                h.completion_overhead,
            ));
        }
        sim.precondition = sim.run_precondition(stop);
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

    /// Run every component's invariant check each `every` events (and at the end).
    pub fn check_invariants_every(&mut self, every: u64) {
        self.check_every = Some(every.max(1));
    }

    fn build_jobs(&mut self) -> Result<(), SimError> {
        let seed = self.scenario.seed;
        let sector = self.device.sector_bytes();
        let mut domains: Vec<Vec<usize>> = Vec::new();
        for (t, tenant) in self.scenario.tenants.iter().enumerate() {
            for job in &tenant.jobs {
                let first = self.jobs.len();
                for clone in 0..job.numjobs {
                    let rt = JobRt::new(TenantId(t as u16), job, clone, tenant, sector, seed)?;
                    self.tenant_jobs[t].push(self.jobs.len());
                    self.jobs.push(rt);
                }
                if domains.len() <= tenant.domain {
                    domains.resize(tenant.domain + 1, Vec::new());
                }
                // One entry per job section: its clones share its phase.
                domains[tenant.domain].push(first);
            }
        }
        for members in domains {
            let specs: Vec<_> = members.iter().map(|&j| self.jobs[j].spec.clone()).collect();
            let phases: Vec<Vec<usize>> = crate::workload::fio::phases(&specs)
                .into_iter()
                .map(|sections| {
                    sections
                        .into_iter()
                        .flat_map(|s| {
                            let first = members[s];
                            let n = self.jobs[first].spec.numjobs as usize;
                            first..first + n
                        })
                        .collect()
                })
                .collect();
            for (g, phase) in crate::workload::fio::groups(&specs).iter().enumerate() {
                for &s in phase {
                    let first = members[s];
                    for j in first..first + self.jobs[first].spec.numjobs as usize {
                        self.jobs[j].groupid = g as u32;
                    }
                }
            }
            self.phases.push((phases, 0));
        }
        Ok(())
    }

    fn run_precondition(&mut self, stop: &dyn Fn() -> bool) -> PreconditionReport {
        let regions: Vec<(u64, u64)> = self.scenario.tenants.iter().map(|t| t.region).collect();
        self.device.precondition(&self.scenario.precondition, &regions, self.scenario.seed, stop)
    }

    fn start(&mut self) {
        if let Some(m) = &mut self.machine {
            m.start(SimTime::ZERO, &mut self.vout);
            self.drain_machine();
        }
        for d in 0..self.phases.len() {
            self.start_phase(d);
        }
        if let Some(t) = self.scenario.stop.time {
            self.events.push(SimTime::ZERO + t, Event::Stop);
        }
        self.events.push(SimTime::ZERO + self.timeline.interval(), Event::Tick);
        if self.jobs.is_empty() {
            self.finished = Some(StopReason::AllJobsDone);
        }
    }

    fn start_phase(&mut self, domain: usize) {
        let (phases, current) = &self.phases[domain];
        let Some(phase) = phases.get(*current) else { return };
        for &j in phase.clone().iter() {
            let delay = self.jobs[j].start_delay;
            self.jobs[j].state = JobState::Starting;
            self.events.push(self.now + delay, Event::JobStart(JobId(j as u32)));
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
                self.jobs[j.index()].wake_at = None;
                self.try_issue(j);
            }
            Event::JobDeadline(j) => {
                let job = &mut self.jobs[j.index()];
                if job.state == JobState::Running {
                    job.state = JobState::Draining;
                    self.maybe_finish_job(j);
                }
            }
            Event::HostArrive(r) => self.host_arrive(r),
            Event::Machine(me) => {
                if let Some(m) = &mut self.machine {
                    m.handle(self.now, me, &mut self.vout);
                }
            }
            Event::HostWake => {
                if self.host_wake_at == Some(self.now) {
                    self.host_wake_at = None;
                }
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
        let job = &mut self.jobs[j.index()];
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
            let job = &mut self.jobs[j.index()];
            let tenant = job.tenant;
            match job.next_io(now) {
                job::Next::Io(io) => self.issue(j, tenant, io),
                job::Next::WaitUntil(t) => {
                    let job = &mut self.jobs[j.index()];
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
            dispatched: now,
            update: false,
            tag: io.tag,
        });
        self.issued += 1;
        self.overlap.issued(tenant.index());
        if io.op != IoOp::Flush {
            self.device.prefetch_hint(io.offset, true);
        }
        match &mut self.machine {
            Some(m) => {
                let io = Io { req: id, job: j.index(), op: io.op, offset: io.offset, len: io.len };
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

    /// The NVMe queue a request goes to: with the CPU model, blk-mq's — the software queue of
    /// the hardware thread that submitted it, mapped onto the device's queues; without it, one
    /// queue per tenant.
    fn queue_for(&self, r: ReqId, tenant: TenantId) -> QueueId {
        let queues = self.device.nvme().queues as usize;
        match self.reqs[r.index()].host_cpu {
            Some(cpu) => QueueId((cpu as usize % queues) as u16),
            None => QueueId((tenant.0 as usize % queues) as u16),
        }
    }

    fn host_arrive(&mut self, r: ReqId) {
        let req = &mut self.reqs[r.index()];
        req.queued = self.now;
        if req.op == IoOp::Flush {
            self.host_flushes.push_back(r);
        } else {
            self.device.prefetch_hint(req.offset, false);
            if let Some(ftl) = self.device.host_ftl() {
                req.update = req.op == IoOp::Write && ftl.is_update(req.offset, req.len);
            }
            self.sched.enqueue(self.now, req.sched_req(r));
        }
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
                req.host_cpu = Some(h.cpu);
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

    fn host_dispatch(&mut self) {
        self.dispatch_flushes();
        if let Some(ftl) = self.device.host_ftl() {
            self.sched.observe(self.now, ftl);
        }
        while self.host_inflight < self.scenario.host.queue_depth {
            let Some(sr) = self.sched.dispatch(self.now) else { break };
            let q = self.queue_for(sr.id, sr.tenant);
            if !self.device.queue_has_room(q) {
                self.sched.requeue(sr);
                break;
            }
            self.send(sr.id, q);
        }
        if let Some(t) = self.sched.next_wakeup() {
            if t > self.now && self.host_wake_at.is_none_or(|w| t < w) {
                self.host_wake_at = Some(t);
                self.events.push(t, Event::HostWake);
            }
        }
    }

    /// Waiting flushes go to the device in arrival order, within the host queue depth.
    fn dispatch_flushes(&mut self) {
        while self.host_inflight < self.scenario.host.queue_depth {
            let Some(&r) = self.host_flushes.front() else { break };
            let q = self.queue_for(r, self.reqs[r.index()].tenant);
            if !self.device.queue_has_room(q) {
                break;
            }
            self.host_flushes.pop_front();
            self.send(r, q);
        }
    }

    /// Submits request `r` to NVMe queue `q`.
    fn send(&mut self, r: ReqId, q: QueueId) {
        let req = &mut self.reqs[r.index()];
        req.dispatched = self.now;
        let cmd = Command { req: r, tenant: req.tenant, op: req.op, offset: req.offset, len: req.len, queue: q };
        self.host_inflight += 1;
        self.device.submit(self.now, cmd, &mut self.out);
        self.drain_outbox();
    }

    fn drain_outbox(&mut self) {
        for (t, e) in self.out.events.drain(..) {
            self.events.push(t, Event::Device(e));
        }
        if self.out.completed.is_empty() {
            return;
        }
        let done = std::mem::take(&mut self.out.completed);
        for &r in &done {
            let req = self.reqs[r.index()];
            self.host_inflight -= 1;
            if req.op != IoOp::Flush {
                if let Some(ftl) = self.device.host_ftl() {
                    self.sched.observe(self.now, ftl);
                }
                self.sched.complete(self.now, &req.sched_req(r), self.now.since(req.dispatched));
            }
            match &mut self.machine {
                Some(m) => m.host_complete(self.now, r, &mut self.vout),
                None => self.events.push(self.now + self.scenario.host.completion_overhead, Event::AppComplete(r)),
            }
        }
        self.out.completed = done;
        self.out.completed.clear();
        self.host_dispatch();
    }

    fn app_complete(&mut self, r: ReqId) {
        let req = self.reqs[r.index()];
        self.free_reqs.push(r.0);
        self.completed += 1;
        let slat = req.queued.since(req.issued).0;
        let clat = self.now.since(req.queued).0;
        if req.op != IoOp::Flush {
            self.timeline.record(req.tenant, req.op, req.app_len, slat + clat);
        }
        let j = req.job;
        if self.jobs[j.index()].is_external() {
            self.external_done.push(external::ExternalDone { tag: req.tag, at: self.now });
        }
        if self.jobs[j.index()].complete(self.now, req.op, req.app_len, slat, clat) {
            self.overlap.record(req.tenant.index(), self.now, req.app_len);
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
        let job = &mut self.jobs[j.index()];
        if let Some(io) = job.end_sync() {
            let tenant = job.tenant;
            self.issue(j, tenant, io);
            return;
        }
        if !job.can_finish() {
            return;
        }
        job.finish(self.now);
        let t = job.tenant.index();
        if self.tenant_jobs[t].iter().all(|&k| self.jobs[k].state == JobState::Done) {
            self.overlap.tenant_done(t, self.now);
        }
        let d = self.scenario.tenants[t].domain;
        let (phases, current) = &mut self.phases[d];
        let phase_done = phases[*current].iter().all(|&k| self.jobs[k].state == JobState::Done);
        if phase_done {
            *current += 1;
            self.start_phase(d);
        }
        if self.jobs.iter().all(|k| k.state == JobState::Done) {
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

    /// Every tenant's device-side counters now, for the timeline.
    fn snapshots(&self) -> Vec<timeline::Snapshot> {
        (0..self.scenario.tenants.len())
            .map(|t| {
                let sched = self.sched.tenant_stats(t);
                let slice_scale = sched.map_or(1.0, |s| s.scale);
                let gc_charged_ns = sched.and_then(|s| s.gc_charged_ns);
                match self.device.backend() {
                    Backend::Ssd(s) => {
                        let id = TenantId(t as u16);
                        let m = s.map_cache();
                        let c = m.stats(id);
                        timeline::Snapshot {
                            totals: timeline::Counters {
                                gc_moved: s.ftl().tenant_gc(id).units_moved,
                                map_lookups: c.lookups,
                                map_misses: c.misses,
                            },
                            cmt_pages: m.held(id),
                            slice_scale,
                            gc_charged_ns,
                        }
                    }
                    Backend::Null(_) => timeline::Snapshot { slice_scale, gc_charged_ns, ..Default::default() },
                }
            })
            .collect()
    }

    pub fn check_invariants(&self) {
        let live = self.reqs.len() - self.free_reqs.len();
        assert_eq!(live as u64, self.issued - self.completed, "requests not conserved");
        assert_eq!(
            self.device.in_flight(),
            self.host_inflight as u64,
            "device and host disagree on requests in flight"
        );
        assert!(self.host_inflight <= self.scenario.host.queue_depth);
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
            if let Some(j) = self.jobs.iter().find(|j| j.state != JobState::Done && !j.is_external() && !cut_off) {
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
        self.sched.check_invariants();
        self.device.check_invariants();
        if let Some(m) = &self.machine {
            m.check_invariants();
        }
        for j in &self.jobs {
            j.check_invariants();
        }
    }

    /// Ends the run and collects its results.
    pub fn finish(mut self) -> RunResults {
        let reason = self.finished.unwrap_or(StopReason::Interrupted);
        // The last check, unless the user stopped the run: a whole-drive check takes seconds on
        // a large drive, and they asked to stop.
        if self.check_every.is_some() && reason != StopReason::Interrupted {
            self.check_invariants();
        }
        let now = self.now;
        for j in &mut self.jobs {
            j.stop(now);
        }
        let snap = self.snapshots();
        self.timeline.close_partial(now, &snap, &self.overlap.periods(now));
        let jobs: Vec<JobResult> = self.jobs.iter_mut().map(|j| j.take_result(&self.scenario)).collect();
        let mut replays: Vec<Option<ReplayStats>> = self.jobs.iter_mut().map(|j| j.take_replay()).collect();
        let tenants: Vec<TenantResult> = self
            .scenario
            .tenants
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut io = crate::metrics::IoStats::default();
                let mut runtime = 0;
                for &j in &self.tenant_jobs[i] {
                    io.merge(&jobs[j].io);
                    runtime = runtime.max(jobs[j].runtime_ns);
                }
                let TenantDeviceReport { gc_units_moved, gc_erases, map, device: dev } =
                    self.device.tenant_report(TenantId(i as u16));
                TenantResult {
                    name: t.name.clone(),
                    index: i,
                    jobs: self.tenant_jobs[i].clone(),
                    region: t.region,
                    weight: t.weight,
                    share: None,
                    runtime_ns: runtime,
                    io,
                    gc_units_moved,
                    gc_erases,
                    map,
                    device: dev,
                    sched: self.sched.tenant_stats(i),
                    replay: self.tenant_jobs[i].iter().find_map(|&j| replays[j].take()),
                }
            })
            .collect();
        let (jobs, mut tenants) = self.apply_group_reporting(jobs, tenants);
        let window = self.overlap.finish(now);
        let fairness = measure_fairness(&window, &mut tenants);
        let device = self.device_result(now);
        let mut warnings: Vec<String> = self.scenario.warnings.clone();
        let host_writes = device.ftl.host_units_programmed;
        if let Backend::Ssd(_) = self.device.backend() {
            if self.scenario.precondition.state == PreconditionState::Aged && host_writes > 0 && device.ftl.gc_runs == 0 {
                warnings.push(format!(
                    "garbage collection never ran during the measured run although the drive was aged ({} units written): \
                     the run may be too short to fill the free blocks left after preconditioning",
                    host_writes
                ));
            }
        }
        warnings.extend(self.sched.warnings());
        for t in &tenants {
            if let Some(r) = &t.replay {
                warnings.extend(trace::warnings(&t.name, r));
            }
        }
        if reason == StopReason::Interrupted {
            warnings.push("the run was interrupted: results are partial".to_string());
        }
        let interval = self.timeline.interval();
        let (timeline, dropped) = self.timeline.into_rows();
        if dropped > 0 {
            warnings.push(format!(
                "the timeline kept its first {KEEP_ROWS} rows in memory and dropped {dropped} more: \
                 stream it (as `flashmux run` does into timeline.csv) or lengthen [output] timeline_interval"
            ));
        }
        RunResults {
            version: crate::VERSION.to_string(),
            seed: self.scenario.seed,
            config_hash: self.scenario.config_hash(),
            scenario: self.scenario.name.clone(),
            global_options: self.scenario.global_options.clone(),
            sim_time_ns: now.0,
            stop_reason: reason,
            events: self.processed,
            requests_issued: self.issued,
            requests_completed: self.completed,
            requests_in_flight: self.issued - self.completed,
            jobs,
            tenants,
            device,
            timeline_interval_ns: interval.0,
            virt: self.machine.as_ref().map(|m| m.result(now)),
            timeline,
            fairness,
            warnings,
            serve: None,
        }
    }

    /// fio's `group_reporting`: the jobs of a reporting group in which any job sets it are
    /// reported as one entry (named after the group's first job). Tenant statistics are not
    /// affected; a tenant's `jobs` then point at the merged entries.
    fn apply_group_reporting(
        &self,
        clones: Vec<JobResult>,
        mut tenants: Vec<TenantResult>,
    ) -> (Vec<JobResult>, Vec<TenantResult>) {
        let key = |j: usize| (self.scenario.tenants[self.jobs[j].tenant.index()].domain, self.jobs[j].groupid);
        let merged_groups: Vec<(usize, u32)> = {
            let mut g: Vec<(usize, u32)> =
                (0..clones.len()).filter(|&j| self.jobs[j].spec.group_reporting).map(key).collect();
            g.sort_unstable();
            g.dedup();
            g
        };
        let mut out: Vec<JobResult> = Vec::new();
        // Reported entry of each clone; the first clone of a merged group opens its entry.
        let mut entry_of: Vec<usize> = Vec::with_capacity(clones.len());
        let mut group_entry: Vec<((usize, u32), usize)> = Vec::new();
        for (j, clone) in clones.into_iter().enumerate() {
            let k = key(j);
            if merged_groups.binary_search(&k).is_err() {
                entry_of.push(out.len());
                out.push(clone);
                continue;
            }
            match group_entry.iter().find(|(g, _)| *g == k) {
                Some(&(_, e)) => {
                    out[e].absorb(&clone);
                    entry_of.push(e);
                }
                None => {
                    group_entry.push((k, out.len()));
                    entry_of.push(out.len());
                    out.push(clone);
                }
            }
        }
        for t in &mut tenants {
            let mut entries: Vec<usize> = t.jobs.iter().map(|&j| entry_of[j]).collect();
            entries.dedup();
            t.jobs = entries;
        }
        (out, tenants)
    }

    fn device_result(&self, now: SimTime) -> DeviceResult {
        self.device.report(now, &self.scenario.device.preset, &self.precondition)
    }
}

/// Each tenant's bandwidth share over the common measured interval, and the run's fairness.
fn measure_fairness(window: &Window, tenants: &mut [TenantResult]) -> Fairness {
    let weights: Vec<u32> = tenants.iter().map(|t| t.weight).collect();
    let secs = window.common.map_or(0.0, |(s, e)| e.since(s).as_secs_f64());
    let bw: Vec<Option<f64>> = window.bytes.iter().map(|b| b.map(|b| b as f64 / secs)).collect();
    let shares = crate::metrics::shares(&bw, &weights);
    for (t, s) in tenants.iter_mut().zip(&shares) {
        t.share = *s;
    }
    let counted = window.periods.iter().flatten().count();
    Fairness::of_shares(&shares, &weights, window.common.map(|(s, e)| (s.0, e.0)), counted)
}

fn build_device(s: &Scenario) -> Result<Device, SimError> {
    let backend = match &s.device.kind {
        DeviceKind::Ssd(c) => {
            Backend::Ssd(Box::new(Ssd::new(c.clone(), s.tenants.len()).map_err(|e| SimError::Device(e.to_string()))?))
        }
        DeviceKind::Null(n) => Backend::Null(n.clone()),
    };
    Ok(Device::new(s.device.nvme.clone(), backend))
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
