//! Garbage collection as each die's background queue, stepped between user operations.
//!
//! # Model
//! The FTL decides *what* to clean (victim choice, which units move, `ftl/core.rs`) and hands
//! each cleaning over as a [`GcJob`]: `read_pages` page reads, `program_pages` page programs
//! (on-die copy-back: no channel traffic; with `gc_copyback = false` each page also crosses the
//! channel, out after its read and in before its program, see below) and one erase, all on the
//! victim's plane. This file
//! decides *when* those steps occupy the die:
//! - a job is a sequence of steps, reads and programs interleaved in proportion (read while the
//!   reads are not ahead), then the erase;
//! - jobs of different planes of one die run together as a *gang*: each step advances every
//!   running job by one of its own steps, as one multi-plane operation, and takes as long as the
//!   longest of them; jobs of the same plane run one after another (the later one is queued);
//! - steps are committed lazily: a step that would have started before some other use of the
//!   die (a user read, a program) is committed first, so GC fills the die's idle time and a user
//!   read waits for at most the step under way ([`GcMode::Background`]); a *GC check* event at
//!   the earliest possible end of a job commits what is due and frees the erased blocks;
//! - in open-channel mode ([`GcMode::HostIo`]) GC is host I/O queued with the users' I/O: every
//!   user operation on a die with GC under way first lets one GC step go, and buffered writes do
//!   not wait for their plane's GC.
//!
//! # Worked example
//! tR = 50 µs, tPROG = 500 µs, tBERS = 3 ms. Plane 0 of die 0 has a job of 2 reads and
//! 2 programs, plane 1 one of 1 read and 1 program, both queued at t = 0 on an idle die. The
//! gang's steps are (R,R) 50 µs, (P,P) 500 µs, (R,E) 3 ms — plane 1's job is done at 3.55 ms —,
//! (P) 500 µs, (E) 3 ms: the die is busy until 7.05 ms, where one plane after the other would
//! take 4.1 + 3.55 = 7.65 ms (`gc_busy_ns` = 7.05 ms, `gc_serial_ns` = 7.65 ms). A user read arriving
//! at t = 100 µs starts at 550 µs, when the program step under way ends.
//!
//! # Without copy-back
//! MQSim's `Use_Copyback_for_GC = false`: a moved page is read (tR), crosses the channel to the
//! controller, crosses back and is programmed (tPROG). A read step then keeps the die busy until
//! its page has left over the channel, a program step starts with its page's transfer in; a
//! gang step moves one page per member that reads or programs. The transfers are reserved on
//! the die's channel like host transfers: before any transfer on a channel, the GC steps of
//! that channel's dies that would have started earlier are committed, the earliest first, so
//! a host read whose data is ready while GC's page crosses waits for it, and the reverse
//! (`FlashArray::commit_gc_step`, `catch_up_channel`). With 16 KiB pages on a 400 MB/s channel
//! (xfer = 40.96 µs), a job of 3 page reads and 3 programs alone takes
//! 3 × (50 + 2 × 40.96 + 500) µs + 3 ms = 4.896 ms instead of 4.65 ms (`device/ssd/tests.rs`).
//!
//! # Parameters
//! `timing.read`, `timing.program`, `timing.erase` (ns per step); `timing.channel_rate` and
//! `timing.command` (a page's transfer, without copy-back); `gc_copyback` (bool, default true);
//! `open_channel` chooses the [`GcMode`] once, when the drive is built.
//!
//! Source: multi-plane GC and read priority over GC follow MQSim's GC/WL unit (Tavakkol et al.,
//! FAST '18); GC without copy-back is MQSim, src/ssd/GC_and_WL_Unit_Page_Level.cpp
//! (`Check_gc_required`: a read transaction, then a write of the same page, unless
//! `use_copyback`) as transferred by src/ssd/NVM_PHY_ONFI_NVDDR2.cpp; open-channel GC as host I/O
//! follows Linux's pblk (`drivers/lightnvm/pblk-gc.c`).

use super::{Ssd, SsdConfig};
use crate::device::{CmdState, DeviceEvent, Outbox};
use crate::flash::Timing;
use crate::ftl::GcJob;
use crate::units::{DieId, Nanos, PlaneId, SimTime};
use std::collections::VecDeque;

/// Where garbage collection runs, decided once when the drive is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcMode {
    /// The drive's own controller runs GC in the dies' idle time; a user read waits at most for
    /// the step under way, and buffered writes to a plane wait until its GC job is done.
    Background,
    /// Open-channel (pblk): GC is host I/O at the LUN, taking turns with the users' operations
    /// one step each, and not holding back the plane's buffered writes.
    HostIo,
}

impl GcMode {
    pub fn of(cfg: &SsdConfig) -> GcMode {
        if cfg.open_channel {
            GcMode::HostIo
        } else {
            GcMode::Background
        }
    }
    /// Whether a user operation on a die lets one GC step go first.
    pub fn takes_turns(self) -> bool {
        self == GcMode::HostIo
    }
    /// Whether buffered writes to a plane wait until the plane's GC jobs are done.
    pub fn holds_writes(self) -> bool {
        self == GcMode::Background
    }
}

pub(super) struct GcRun {
    pub(super) job: GcJob,
    reads_done: u32,
    progs_done: u32,
    erased: bool,
    /// Set once every step is committed: when the erase ends.
    end: Option<SimTime>,
}

impl GcRun {
    fn new(job: GcJob) -> GcRun {
        GcRun { job, reads_done: 0, progs_done: 0, erased: false, end: None }
    }
    fn next_step(&self, t: &Timing) -> Option<(Nanos, Step)> {
        let (r, p) = (self.job.read_pages, self.job.program_pages);
        // Interleave reads and programs in proportion: read while reads are not ahead.
        if self.reads_done < r
            && (self.reads_done as u64 * p as u64 <= self.progs_done as u64 * r as u64 || self.progs_done >= p)
        {
            Some((t.read, Step::Read))
        } else if self.progs_done < p {
            Some((t.program, Step::Program))
        } else if !self.erased {
            Some((t.erase, Step::Erase))
        } else {
            None
        }
    }
    /// What the rest of the job takes alone, each page read and program also moving a page
    /// over the channel for `xfer` (zero with copy-back).
    fn remaining(&self, t: &Timing, xfer: Nanos) -> Nanos {
        let reads = (self.job.read_pages - self.reads_done) as u64;
        let progs = (self.job.program_pages - self.progs_done) as u64;
        (t.read + xfer) * reads + (t.program + xfer) * progs + if self.erased { Nanos::ZERO } else { t.erase }
    }
}

#[derive(Clone, Copy)]
enum Step {
    Read,
    Program,
    Erase,
}

/// One die's GC background queue.
#[derive(Default)]
pub(super) struct GcQueue {
    /// GC jobs running together (multi-plane): at most one per plane, none finished.
    gang: Vec<GcRun>,
    /// GC jobs waiting for the running job of their plane.
    queued: VecDeque<GcRun>,
    /// GC jobs whose steps are all committed, until their erase ends.
    finished: Vec<GcRun>,
    check_scheduled: bool,
}

impl GcQueue {
    /// Queues `job`: it joins the gang unless its plane already has a job running.
    pub(super) fn push(&mut self, job: GcJob) {
        let run = GcRun::new(job);
        if self.gang.iter().any(|r| r.job.plane == job.plane) {
            self.queued.push_back(run);
        } else {
            self.gang.push(run);
        }
    }

    /// Whether a GC step is waiting to run on this die.
    pub(super) fn has_step(&self) -> bool {
        !self.gang.is_empty()
    }

    /// Runs the gang's next (multi-plane) step from `busy_until`, which it advances to the end
    /// `time` gives it: `time(start, array time, page reads, page programs)`, the array time
    /// being the longest member's step. Returns the step's duration, or `None` if the die has
    /// no GC step.
    pub(super) fn commit_step(
        &mut self,
        busy_until: &mut SimTime,
        timing: &Timing,
        time: impl FnOnce(SimTime, Nanos, u32, u32) -> SimTime,
    ) -> Option<Nanos> {
        let (mut array, mut reads, mut programs) = (None, 0, 0);
        for (dur, step) in self.gang.iter().filter_map(|r| r.next_step(timing)) {
            array = array.max(Some(dur));
            reads += matches!(step, Step::Read) as u32;
            programs += matches!(step, Step::Program) as u32;
        }
        let start = *busy_until;
        *busy_until = time(start, array?, reads, programs);
        let mut i = 0;
        while i < self.gang.len() {
            let run = &mut self.gang[i];
            match run.next_step(timing).map(|(_, step)| step) {
                Some(Step::Read) => run.reads_done += 1,
                Some(Step::Program) => run.progs_done += 1,
                Some(Step::Erase) => run.erased = true,
                None => {}
            }
            if run.next_step(timing).is_some() {
                i += 1;
                continue;
            }
            let mut done = self.gang.swap_remove(i);
            done.end = Some(*busy_until);
            let plane = done.job.plane;
            self.finished.push(done);
            if let Some(q) = self.queued.iter().position(|r| r.job.plane == plane) {
                let next = self.queued.remove(q).expect("position found");
                // Keep gang order stable: the promoted job takes the finished one's place.
                self.gang.push(next);
                let last = self.gang.len() - 1;
                self.gang.swap(i, last);
                i += 1;
            }
        }
        Some(busy_until.since(start))
    }

    /// When a GC check should look at this die, if none is scheduled and a job is under way:
    /// the earliest any job can end, with the die free from `start` (a check that comes early
    /// just looks again later; queued jobs end after the running job of their plane).
    pub(super) fn next_check(&mut self, start: SimTime, timing: &Timing, xfer: Nanos) -> Option<SimTime> {
        if self.check_scheduled {
            return None;
        }
        let running = self.gang.iter().map(|r| start + r.remaining(timing, xfer));
        let at = self.finished.iter().filter_map(|r| r.end).chain(running).min()?;
        self.check_scheduled = true;
        Some(at)
    }

    /// The scheduled check has come.
    pub(super) fn check_arrived(&mut self) {
        self.check_scheduled = false;
    }

    /// Hands over the jobs whose erase has ended by `now`, in the order they finished.
    pub(super) fn take_ended(&mut self, now: SimTime, mut ended: impl FnMut(GcJob)) {
        let mut i = 0;
        while i < self.finished.len() {
            match self.finished[i].end {
                // `remove`, not `swap_remove`: erases finish in the order their jobs did.
                Some(end) if end <= now => ended(self.finished.remove(i).job),
                _ => i += 1,
            }
        }
    }

    /// Every job of the queue (running, queued, finished), for invariant checks.
    pub(super) fn jobs(&self) -> impl Iterator<Item = &GcJob> {
        self.gang.iter().chain(&self.queued).chain(&self.finished).map(|r| &r.job)
    }

    pub(super) fn check_invariants(&self) {
        for (i, r) in self.gang.iter().enumerate() {
            assert!(r.end.is_none(), "finished GC job still in the gang");
            assert!(self.gang[..i].iter().all(|o| o.job.plane != r.job.plane), "two gang jobs for one plane");
        }
        for r in &self.queued {
            assert!(self.gang.iter().any(|g| g.job.plane == r.job.plane), "queued GC job with nothing running");
        }
        assert!(self.finished.iter().all(|r| r.end.is_some()));
    }
}

/// The coordinator's account of GC: jobs queued or running per plane and in all, and counters.
pub(super) struct GcBook {
    pub(super) mode: GcMode,
    /// GC jobs queued or running per plane, and in all.
    pub(super) plane_jobs: Vec<u16>,
    pub(super) jobs: u32,
    pub(super) page_reads: u64,
    pub(super) page_programs: u64,
    pub(super) jobs_done: u64,
    pub(super) serial_ns: u64,
}

impl GcBook {
    pub(super) fn new(mode: GcMode, planes: usize) -> GcBook {
        GcBook {
            mode,
            plane_jobs: vec![0; planes],
            jobs: 0,
            page_reads: 0,
            page_programs: 0,
            jobs_done: 0,
            serial_ns: 0,
        }
    }
    /// Whether `plane` has GC jobs queued or running.
    pub(super) fn plane_busy(&self, plane: PlaneId) -> bool {
        self.plane_jobs[plane.index()] > 0
    }
}

/// What one job would take alone, for `gc_serial_ns`, with `xfer` per page moved over the
/// channel (zero with copy-back).
pub(super) fn job_time(job: &GcJob, t: &Timing, xfer: Nanos) -> Nanos {
    GcRun::new(*job).remaining(t, xfer)
}

impl Ssd {
    /// Queues GC jobs the FTL has started on their dies, and the map updates their moves need
    /// (whose programs may start more GC: repeated until there is none).
    pub(super) fn schedule_new_gc(&mut self, now: SimTime, out: &mut Outbox) {
        loop {
            self.schedule_gc_jobs(now, out);
            if !self.apply_gc_map_updates(now) {
                break;
            }
        }
    }

    fn schedule_gc_jobs(&mut self, now: SimTime, out: &mut Outbox) {
        while let Some(job) = self.ftl.take_gc_job() {
            let die = self.geo.die_of_plane(job.plane);
            self.gc.serial_ns += job_time(&job, self.array.timing(), self.array.gc_page_transfer()).0;
            self.gc.plane_jobs[job.plane.index()] += 1;
            self.gc.jobs += 1;
            self.gc.page_reads += job.read_pages as u64;
            self.gc.page_programs += job.program_pages as u64;
            self.array.enqueue_gc(die, job);
            self.schedule_gc_check(now, die, out);
        }
    }

    pub(super) fn schedule_gc_check(&mut self, now: SimTime, die: DieId, out: &mut Outbox) {
        if let Some(at) = self.array.next_gc_check(now, die) {
            out.events.push((at, DeviceEvent::GcCheck(die)));
        }
    }

    /// The estimated end of a GC job on `die` has come: finish what is done, re-check the rest.
    pub fn gc_check(&mut self, now: SimTime, die: DieId, cmds: &mut [CmdState], out: &mut Outbox) {
        let (gc, ftl) = (&mut self.gc, &mut self.ftl);
        self.array.gc_check_arrived(now, die, |job| {
            gc.plane_jobs[job.plane.index()] -= 1;
            gc.jobs -= 1;
            gc.jobs_done += 1;
            ftl.finish_erase(job.victim);
        });
        // Finishing an erase may let GC continue elsewhere in the plane, and map programs that
        // were waiting for a free block go now.
        self.retry_map_programs(now);
        self.schedule_new_gc(now, out);
        self.schedule_gc_check(now, die, out);
        self.flusher.mark_die(die);
        self.admit_waiting(now, cmds, out);
        self.flush(now, out);
    }
}
