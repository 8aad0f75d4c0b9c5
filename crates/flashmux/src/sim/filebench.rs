//! Filebench tenants in the simulator: each thread of a tenant's [`Runner`] is one of its jobs
//! (`JobRt` with a Filebench source, iodepth 1), and each call the thread makes is a request of
//! that job into its tenant's kernel, on the tenant's ext4 (`kernel/kernels.rs`).
//!
//! # Model
//! - Before the run the runner's tree is made and the files that exist before it are written
//!   (allocated on the filesystem, nothing sent to the device: the drive's preconditioning
//!   stands for their data). The page cache starts empty (Filebench drops it unless `cached`).
//! - A create, open, close or stat takes effect on the filesystem when the thread issues it (a
//!   create's metadata joins the journal, an open starts the file's read-ahead state, a close
//!   ends it and releases ext4's preallocations); the call then returns as any system call
//!   does, after the submission and completion overheads. Reads, writes and fsyncs go through
//!   the page cache; a delete drops the file's pages, frees its blocks, and returns once the
//!   I/O in flight on its pages has completed.
//! - The job's statistics are those of its reads, writes (bytes moved) and fsyncs (syncs), as
//!   for a fio job; the runner keeps Filebench's own figures per flowop (`results.json`:
//!   `flashmux.filebench`).

use super::job::IoReq;
use super::Simulator;
use crate::config::Workload;
use crate::device::IoOp;
use crate::engine::rng_for;
use crate::kernel::fs::Ino;
use crate::kernel::kernels::{FileCall, FileOp};
use crate::kernel::MetaCall;
use crate::kernel::FileId;
use crate::units::{JobId, SimTime, TenantId};
use crate::workload::filebench::run::{Call, CallKind, EntryId, Runner, RunnerStats, Step};
use serde::Serialize;

/// A Filebench tenant's runner and the kernel's names for its files.
pub(super) struct FbTenant {
    runner: Runner,
    /// Each directory of the runner's tree on the filesystem.
    dirs: Vec<Ino>,
    /// Each entry's file while it exists.
    files: Vec<Option<FileId>>,
    /// Per thread: the call it has out, and when a sleep it is in ends.
    out: Vec<Option<Call>>,
    sleeping: Vec<Option<SimTime>>,
    /// Calls returned that are not in the jobs' I/O statistics (creates, opens, closes, stats,
    /// deletes).
    metadata_calls: u64,
    /// Per thread: stopped by a failed call. Calls that failed (ENOSPC).
    stopped: Vec<bool>,
    enospc: u64,
}

/// What a Filebench thread does next.
pub(super) enum FbNext {
    Issue(IoReq),
    /// Sleeps (its job's wake-up is set).
    Wait,
    /// Stopped: a call failed.
    Stopped,
}

/// A Filebench tenant's figures, for `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FilebenchResult {
    pub tenant: usize,
    pub source: String,
    /// Its calls that moved no data and are not syncs (creates, opens, closes, stats,
    /// deletes): completed requests that the jobs' I/O statistics do not count.
    pub metadata_calls: u64,
    /// Calls that failed because the filesystem was full (ENOSPC); each stopped its thread.
    pub enospc: u64,
    #[serde(flatten)]
    pub stats: RunnerStats,
}

impl Simulator {
    /// Makes each Filebench tenant's runner and its files before the run.
    pub(super) fn filebench_setup(&mut self) -> Result<(), String> {
        for (t, tenant) in self.scenario.tenants.iter().enumerate() {
            let Workload::Filebench { spec, .. } = &tenant.workload else {
                self.filebench.push(None);
                continue;
            };
            let rng = rng_for(self.scenario.seed, &format!("filebench/{}", tenant.name));
            let runner = Runner::new(&spec.workload, rng).map_err(|e| format!("tenant {}: {e}", tenant.name))?;
            let tid = TenantId(t as u16);
            let kernels = self.kernels.as_mut().expect("a Filebench tenant has a kernel");
            let setup = runner.setup().clone();
            let mut dirs = Vec::with_capacity(setup.dirs.len());
            for (_, parent, name) in &setup.dirs {
                dirs.push(kernels.setup_dir(tid, parent.map(|p| dirs[p.0 as usize]), name)?);
            }
            let mut files = vec![None; setup.files.len()];
            for (e, dir, name, size) in &setup.files {
                if let Some(size) = size {
                    files[e.0 as usize] = Some(kernels.setup_file(tid, dirs[dir.0 as usize], name, *size)?);
                }
            }
            let jobs = &self.work.tenant_jobs[t];
            assert_eq!(jobs.len(), runner.threads(), "a job per Filebench thread");
            for (i, &j) in jobs.iter().enumerate() {
                self.work.jobs[j].set_filebench_thread(i as u32);
            }
            let n = runner.threads();
            self.filebench.push(Some(FbTenant {
                runner,
                dirs,
                files,
                out: vec![None; n],
                sleeping: vec![None; n],
                metadata_calls: 0,
                stopped: vec![false; n],
                enospc: 0,
            }));
        }
        Ok(())
    }

    /// Filebench thread `thread` (job `j`) may make its next call at `now`: the request to
    /// issue, or what it does instead.
    pub(super) fn filebench_next(&mut self, j: JobId, tenant: TenantId, thread: u32) -> FbNext {
        match self.filebench_step(j, tenant, thread) {
            Some(io) => FbNext::Issue(io),
            None if self.filebench[tenant.index()].as_ref().expect("checked").stopped[thread as usize] => {
                FbNext::Stopped
            }
            None => FbNext::Wait,
        }
    }

    fn filebench_step(&mut self, j: JobId, tenant: TenantId, thread: u32) -> Option<IoReq> {
        let now = self.now;
        let fb = self.filebench[tenant.index()].as_mut().expect("a Filebench tenant");
        let th = thread as usize;
        if let Some(until) = fb.sleeping[th] {
            if now < until {
                self.wait_job(j, until);
                return None;
            }
            fb.sleeping[th] = None;
            fb.runner.returned(thread, now.0, None, 0);
        }
        let call = match fb.runner.next(thread, now.0) {
            Step::Sleep(ns) => {
                let until = now + crate::units::Nanos(ns);
                fb.sleeping[th] = Some(until);
                self.wait_job(j, until);
                return None;
            }
            Step::Call(c) => c,
        };
        fb.out[th] = Some(call);
        let entry = call.entry.0 as usize;
        let (op, fop) = match call.kind {
            CallKind::Read => (IoOp::Read, FileOp::Read),
            CallKind::Write => (IoOp::Write, FileOp::Write),
            CallKind::Fsync => (IoOp::Flush, FileOp::Fsync),
            CallKind::Delete => (IoOp::Flush, FileOp::Delete),
            CallKind::Create => (IoOp::Flush, FileOp::Meta(MetaCall::Create)),
            CallKind::Open => (IoOp::Flush, FileOp::Meta(MetaCall::Open)),
            CallKind::Close => (IoOp::Flush, FileOp::Meta(MetaCall::Close)),
            CallKind::Stat => (IoOp::Flush, FileOp::Meta(MetaCall::Stat)),
        };
        let file = match call.kind {
            CallKind::Create => self.filebench_create(tenant, call.entry),
            CallKind::Delete => fb.files[entry].take(),
            _ => fb.files[entry],
        };
        let kernels = self.kernels.as_mut().expect("kernels");
        let end = call.offset + call.len;
        let fits = match (call.kind, file) {
            (CallKind::Write, Some(f)) => kernels.reserve(tenant, f, end).unwrap_or_else(|e| panic!("kernel: {e}")),
            (_, f) => f.is_some(),
        };
        let fb = self.filebench[tenant.index()].as_mut().expect("a Filebench tenant");
        let Some(file) = file.filter(|_| fits) else {
            // ENOSPC (a file every other call finds exists): the thread stops.
            assert!(matches!(call.kind, CallKind::Create | CallKind::Write), "{call:?} on a missing file");
            fb.out[th] = None;
            fb.runner.failed(thread, call);
            fb.stopped[th] = true;
            fb.enospc += 1;
            return None;
        };
        let kernels = self.kernels.as_mut().expect("kernels");
        let mut out = std::mem::take(&mut self.kout);
        match call.kind {
            CallKind::Open => kernels.open(tenant, file),
            CallKind::Close => kernels.close(now, tenant, file, &mut out).unwrap_or_else(|e| panic!("kernel: {e}")),
            _ => {}
        }
        let k = kernels.kernel_of(tenant);
        self.apply_kernel_out(k, out, false);
        Some(IoReq { op, offset: call.offset, len: call.len, tag: 0, call: Some(FileCall { op: fop, file: Some(file) }), dspec: 0 })
    }

    /// Creates entry `e`'s file on tenant `t`'s filesystem now; `None` if it has no room.
    fn filebench_create(&mut self, t: TenantId, e: EntryId) -> Option<FileId> {
        let fb = self.filebench[t.index()].as_mut().expect("a Filebench tenant");
        let (_, dir, name, _) = &fb.runner.setup().files[e.0 as usize];
        let dir = fb.dirs[dir.0 as usize];
        let name = name.clone();
        let file = self.kernel_call(t, |k, now, out| k.create(now, t, dir, &name, out));
        self.filebench[t.index()].as_mut().expect("checked").files[e.0 as usize] = file;
        file
    }

    fn wait_job(&mut self, j: JobId, until: SimTime) {
        let job = &mut self.work.jobs[j.index()];
        if job.wake_at.is_none() {
            job.wake_at = Some(until);
            self.events.push(until, super::Event::JobWake(j));
        }
    }

    /// Filebench thread `thread` of tenant `t` saw its call return at `now`, `bytes` moved.
    pub(super) fn filebench_returned(&mut self, t: TenantId, thread: u32, bytes: u64) {
        let fb = self.filebench[t.index()].as_mut().expect("a Filebench tenant");
        let call = fb.out[thread as usize].take().expect("a call out");
        if !matches!(call.kind, CallKind::Read | CallKind::Write | CallKind::Fsync) {
            fb.metadata_calls += 1;
        }
        fb.runner.returned(thread, self.now.0, Some(call), bytes);
    }

    pub(super) fn filebench_results(&self) -> Vec<FilebenchResult> {
        self.filebench
            .iter()
            .enumerate()
            .filter_map(|(t, fb)| {
                let fb = fb.as_ref()?;
                let Workload::Filebench { spec, .. } = &self.scenario.tenants[t].workload else { return None };
                Some(FilebenchResult {
                    tenant: t,
                    source: spec.source.clone(),
                    metadata_calls: fb.metadata_calls,
                    enospc: fb.enospc,
                    stats: fb.runner.stats(),
                })
            })
            .collect()
    }

    pub(super) fn filebench_check_invariants(&self) {
        for fb in self.filebench.iter().flatten() {
            fb.runner.check_invariants();
        }
    }
}
