//! The bounds a scenario stays within, checked once it is resolved and before anything is
//! allocated for the run, and what a run will cost: memory, and simulated time when no stop is
//! set.
//!
//! | bound | value | why |
//! |---|---|---|
//! | tenants | [`MAX_TENANTS`] = 4,096 | every per-tenant table (ledger, map cache, scheduler, timeline) is sized by it; the largest tested |
//! | jobs in one job file, `numjobs` counted | [`crate::workload::fio::MAX_JOBS`] = 4,096 | fio's own `REAL_MAX_JOBS` |
//! | jobs in a run, `numjobs` counted | [`MAX_RUN_JOBS`] = 65,536 | about 100 KiB each while running (latency histograms): 6 GiB at the bound |
//! | files of fio jobs (`nrfiles` × `numjobs`) | [`MAX_RUN_FIO_FILES`] = 16,777,216 | ~1.5 KiB each (generator and the filesystem's file): 24 GiB at the bound; the estimate warns first |
//! | timeline intervals (stop time ÷ `timeline_interval`) | [`MAX_TIMELINE_INTERVALS`] = 10,000,000 | a row per tenant per interval: about 1 GB of CSV for one tenant |
//!
//! [`memory_estimate`] adds up the model's large tables from the geometry, the kernels' page
//! caches at their capacity, and a per-tenant and per-job cost measured on this implementation (docs/PERFORMANCE.md, "Memory"); the command
//! line compares it with the memory the machine has before the run.

use super::{ConfigError, DeviceKind, Scenario};
use crate::units::Nanos;
use crate::workload::fio::{Dir, FioJob, PerDir, SizeSpec};

/// Tenants in one scenario.
pub const MAX_TENANTS: usize = 4096;
/// Job clones (`numjobs` counted) in one run, over all tenants.
pub const MAX_RUN_JOBS: u64 = 65_536;
/// Timeline intervals in a run with a stop time (`[stop] time` ÷ `[output] timeline_interval`).
pub const MAX_TIMELINE_INTERVALS: u64 = 10_000_000;
/// A run without a stop time that a job will keep going for longer than this, in simulated
/// time, is worth a warning before it starts.
pub const LONG_RUN: Nanos = Nanos(24 * 3600 * 1_000_000_000);

/// Memory a run is estimated to need, by part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryEstimate {
    pub parts: Vec<(&'static str, u64)>,
}

impl MemoryEstimate {
    pub fn total(&self) -> u64 {
        self.parts.iter().map(|p| p.1).sum()
    }
}

/// Refuses, before anything is built, runs the machine does not have the memory for: the
/// largest of `scenarios`' estimates ([`memory_estimate`]) against the memory available now
/// ([`available_memory`]). The error says what to change. Several scenarios are checked as runs
/// one after the other (a sweep's points in one process); `parallel` of them at once multiply it.
pub fn check_memory(scenarios: &[Scenario], parallel: usize) -> Result<(), String> {
    let Some(have) = available_memory() else { return Ok(()) };
    let Some(e) = scenarios.iter().map(memory_estimate).max_by_key(|e| e.total()) else {
        return Ok(());
    };
    let parallel = parallel.max(1).min(scenarios.len().max(1)) as u64;
    let need = e.total().saturating_mul(parallel);
    if need <= have {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let parts: Vec<String> = e.parts.iter().map(|(what, b)| format!("{what} {:.2} GiB", gib(*b))).collect();
    let runs = if parallel > 1 { format!("{parallel} runs at once need") } else { "the run needs".into() };
    Err(format!(
        "{runs} about {:.2} GiB of memory ({}{}), and {:.2} GiB is available: a smaller drive \
         ([device] capacity), fewer tenants or jobs (numjobs){}, or a machine with more memory",
        gib(need),
        parts.join(", "),
        if parallel > 1 { " each" } else { "" },
        gib(have),
        if parallel > 1 { ", fewer workers" } else { "" },
    ))
}

/// Bytes of memory a new run can have: `FLASHMUX_MEMORY_AVAILABLE` if set (bytes, or a size such
/// as `8GiB`), else `MemAvailable` in /proc/meminfo, or the cgroup v2 limit less its usage if
/// that is lower; `None` where none can be read.
pub fn available_memory() -> Option<u64> {
    if let Ok(v) = std::env::var("FLASHMUX_MEMORY_AVAILABLE") {
        return crate::units::parse_size(&v).ok();
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let avail = meminfo.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let mut have = avail.trim().trim_end_matches("kB").trim().parse::<u64>().ok()? * 1024;
    let read = |f: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/{f}")).ok()?.trim().parse::<u64>().ok();
    if let (Some(max), Some(used)) = (read("memory.max"), read("memory.current")) {
        have = have.min(max.saturating_sub(used));
    }
    Some(have)
}

/// Fixed cost of the process and the model's small structures.
const BASE_BYTES: u64 = 48 << 20;
/// Per tenant: its timeline accumulator, aggregate statistics, scheduler, map-cache and ledger
/// entries (measured: 190 KiB with one job's histograms, docs/PERFORMANCE.md).
const TENANT_BYTES: u64 = 96 << 10;
/// Per job clone while it runs: its generator, depth counters and latency histograms (four
/// series of up to ~20 KiB each) and the same moved into its results (measured ~120 KiB).
const JOB_BYTES: u64 = 128 << 10;

/// What the run will need in memory, from the drive's geometry and the tenants and jobs.
pub fn memory_estimate(s: &Scenario) -> MemoryEstimate {
    let mut parts = vec![("process and small structures", BASE_BYTES)];
    if let DeviceKind::Ssd(c) = &s.device.kind {
        let g = &c.geometry;
        // L2P (4 B per logical unit); P2L and the ownership ledger (4 + 2 B per physical unit);
        // the block table (~24 B per block); the write buffer's slots (~32 B each).
        let tables = c.logical_units() * 4 + g.total_units() * 6 + g.blocks() * 24 + u64::from(c.buffer_units) * 32;
        parts.push(("mapping tables and ownership ledger", tables));
    }
    if let Some(k) = &s.kernel {
        // Per kernel (each VM's, or one shared): a full cache's slots and index (~96 B a page),
        // and the dirty pages' ordered sets up to the dirty threshold (~96 B a page): a 1 GiB
        // cache of random pages measured 33 MiB (`bench --buffered`).
        let kernels = if k.per_tenant { s.tenants.len() as u64 } else { 1 };
        let c = &k.pagecache;
        let dirty = if c.dirty_bytes != 0 { c.dirty_bytes / 4096 } else { c.capacity_pages * c.dirty_ratio / 100 };
        parts.push(("page caches", kernels * (c.capacity_pages + dirty.min(c.capacity_pages)) * 96));
    }
    // A Filebench fileset's files: the runner's entry, its name, the kernel's inode, extents and
    // directory entry (~800 B: 1,000,000 webproxy files measured 768 MB over 10).
    let files: u64 = s
        .tenants
        .iter()
        .filter_map(|t| match &t.workload {
            crate::config::Workload::Filebench { spec, .. } => Some(spec.workload.filesets.iter().map(|f| f.entries).sum::<u64>()),
            _ => None,
        })
        .sum();
    if files > 0 {
        parts.push(("Filebench files", files * 800));
    }
    // A fio job's several files: each one's generator (704 B), and the kernel's inode, extents,
    // directory entry and read-ahead state.
    let fio_files = fio_files(s);
    if fio_files > 0 {
        parts.push(("fio files (nrfiles)", fio_files * FIO_FILE_BYTES));
    }
    parts.push(("tenants", s.tenants.len() as u64 * TENANT_BYTES));
    parts.push(("jobs (latency histograms)", jobs(s) * JOB_BYTES));
    MemoryEstimate { parts }
}

/// Per file of a fio job with several (`nrfiles`): its generator and the kernel's file.
const FIO_FILE_BYTES: u64 = 1536;
/// Files of fio jobs with several (`nrfiles`, `numjobs` counted) in one run.
pub const MAX_RUN_FIO_FILES: u64 = 1 << 24;

/// Files of fio jobs with several, `numjobs` counted.
fn fio_files(s: &Scenario) -> u64 {
    s.tenants.iter().flat_map(|t| t.jobs()).filter(|j| j.nrfiles > 1).map(|j| u64::from(j.numjobs) * u64::from(j.nrfiles)).sum()
}

/// Job clones the run will have.
fn jobs(s: &Scenario) -> u64 {
    s.tenants.iter().flat_map(|t| t.jobs()).map(|j| u64::from(j.numjobs)).sum()
}

/// The run-wide bounds (the fio parser enforces the per-file one), and warnings about a run that
/// will go on for a very long simulated time with nothing to stop it.
pub fn check(s: &Scenario, file: &str) -> Result<Vec<String>, ConfigError> {
    let err = |message: String| ConfigError::Invalid { file: file.to_string(), line: None, message };
    if s.tenants.len() > MAX_TENANTS {
        return Err(err(format!("{} tenants: at most {MAX_TENANTS}", s.tenants.len())));
    }
    let n = jobs(s);
    if n > MAX_RUN_JOBS {
        return Err(err(format!(
            "{n} jobs in all (numjobs counted, over {} tenants): at most {MAX_RUN_JOBS} in one run; \
             fewer clones (numjobs) or tenants, or several runs",
            s.tenants.len()
        )));
    }
    let files = fio_files(s);
    if files > MAX_RUN_FIO_FILES {
        return Err(err(format!(
            "{files} files of fio jobs in all (nrfiles times numjobs): at most {MAX_RUN_FIO_FILES} in one run"
        )));
    }
    let interval = s.output.timeline_interval;
    if let Some(t) = s.stop.time {
        let intervals = t.0.div_ceil(interval.0.max(1));
        if intervals > MAX_TIMELINE_INTERVALS {
            return Err(err(format!(
                "output.timeline_interval: {interval} with stop.time {t} makes {intervals} intervals: at most \
                 {MAX_TIMELINE_INTERVALS}; a timeline_interval of at least {} would do",
                Nanos(t.0.div_ceil(MAX_TIMELINE_INTERVALS))
            )));
        }
    }
    let mut warnings = Vec::new();
    if s.stop.time.is_none() {
        for t in &s.tenants {
            for j in t.jobs() {
                if let Some((d, why)) = paced_duration(j) {
                    if d > LONG_RUN {
                        warnings.push(format!(
                            "tenant '{}', job '{}': {why}, so it runs for about {} of simulated time and no stop \
                             time is set ([stop] time or --time ends the run sooner)",
                            t.name,
                            j.name,
                            human_duration(d)
                        ));
                    }
                }
            }
        }
    }
    Ok(warnings)
}

/// How long a volume-limited job held back by `rate`, `rate_iops` or `thinktime` keeps going,
/// at the least (device time not counted), and what holds it back.
fn paced_duration(j: &FioJob) -> Option<(Nanos, String)> {
    if j.runtime.is_some() {
        return None;
    }
    let total = j.io_size.or(match &j.size {
        Some(SizeSpec::Bytes(b)) => Some(*b),
        _ => None,
    })?;
    let total = total.saturating_mul(u64::from(j.loops.max(1)));
    let bs = j.bs.read.min(j.bs.write).min(j.bs.trim).max(1);
    let ios = j.number_ios.unwrap_or(total / bs).max(1);
    let mut best: Option<(f64, String)> = None;
    let mut consider = |secs: f64, why: String| {
        if secs.is_finite() && best.as_ref().is_none_or(|b| secs > b.0) {
            best = Some((secs, why));
        }
    };
    // With every direction it does limited, the job goes no faster than their sum.
    let dirs: Vec<Dir> = [Dir::Read, Dir::Write, Dir::Trim].into_iter().filter(|&d| j.rw.does(d)).collect();
    let limit = |per: &PerDir<Option<u64>>| -> Option<u64> {
        dirs.iter().map(|&d| per[d]).sum::<Option<u64>>().filter(|&r| r > 0 && !dirs.is_empty())
    };
    if let Some(r) = limit(&j.rate) {
        consider(total as f64 / r as f64, format!("rate = {r} B/s for {total} bytes"));
    }
    if let Some(r) = limit(&j.rate_iops) {
        consider(ios as f64 / r as f64, format!("rate_iops = {r} for {ios} I/Os"));
    }
    if j.thinktime > 0 {
        let per = j.thinktime_blocks.max(1);
        consider(ios.div_ceil(per) as f64 * j.thinktime as f64 / 1e9, format!("thinktime = {} for {ios} I/Os", Nanos(j.thinktime)));
    }
    best.map(|(secs, why)| (Nanos((secs * 1e9).min(u64::MAX as f64) as u64), why))
}

/// A long simulated duration in the largest unit that fits: "34 years", "5.2 days", "3 h".
fn human_duration(d: Nanos) -> String {
    let s = d.0 as f64 / 1e9;
    const DAY: f64 = 86_400.0;
    if s >= 365.0 * DAY {
        format!("{:.0} years", s / (365.25 * DAY))
    } else if s >= DAY {
        format!("{:.1} days", s / DAY)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}
