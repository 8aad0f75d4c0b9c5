//! A seeded swarm test, as the simulators that trust themselves most test themselves
//! (FoundationDB's simulation, TigerBeetle's VOPR): from one seed, draw a whole configuration —
//! device, FTL, mapping, host scheduler, virtualization path, tenants with fio jobs, personalities
//! and block traces, preconditioning, stop conditions — write it as a scenario file, load it as a
//! user's would be loaded, and run it with every invariant checked every few events.
//!
//! A case either is refused by the loader with a clean error (*rejected*: counted, and the
//! reasons summarised), or runs and must (*passed*): never panic, conserve requests (issued =
//! completed + in flight), stop for the reason its scenario gives, account for every measured
//! I/O and every unit garbage collection moved, keep each direction's statistics consistent,
//! render every report, give byte-identical results when run again (one case in ten) and run
//! each tenant alone for the slowdowns (one in twelve of up to four tenants). Anything else is a
//! *failure*, reproducible from its seed alone.
//!
//! `flashmux swarm` drives it from the command line; `tests/swarm.rs` runs a few hundred seeds.

mod gen;
mod toml;
mod traces;

pub use gen::generate;

use crate::config::{ConfigError, DeviceKind, Scenario};
use crate::metrics::{RunResults, StopReason};
use crate::report;
use crate::sim::{Progress, SimError, Simulator};
use crate::workload::fio::FioError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// One drawn configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The seed it was drawn from: [`generate`] of it gives this case again.
    pub seed: u64,
    /// The scenario file's text.
    pub scenario: String,
    /// Files the scenario refers to (fio job files, traces), by path relative to it.
    pub files: Vec<(String, Vec<u8>)>,
    /// Invariants are checked every this many events (1 to 1000).
    pub check_every: u64,
    /// Run it twice and compare the results byte for byte.
    pub rerun: bool,
    /// Also run each tenant alone and add the slowdowns (`--alone-baseline`).
    pub alone: bool,
    /// What was drawn, as `key=value` labels (`scheduler=cfq`, `trace=msr`, ...).
    pub tags: Vec<String>,
}

impl Case {
    /// The scenario's file name.
    pub fn file_name(&self) -> String {
        format!("swarm-{}.toml", self.seed)
    }

    /// Writes the scenario and its files into `dir` (created if needed); returns the scenario's
    /// path.
    pub fn write_to(&self, dir: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        for (name, bytes) in &self.files {
            std::fs::write(dir.join(name), bytes)?;
        }
        let path = dir.join(self.file_name());
        std::fs::write(&path, &self.scenario)?;
        Ok(path)
    }

    /// The `flashmux run` command that runs the scenario at `path` as the swarm does (without its
    /// event bound).
    pub fn run_command(&self, path: &Path) -> String {
        format!("flashmux run {} --check-invariants --check-every {} --no-progress", path.display(), self.check_every)
    }
}

/// Bounds on one case's run.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Events after which a run is stopped (and still checked).
    pub max_events: u64,
    /// A run stops once its invariant checks have visited about this many mapping units (a
    /// check walks the whole FTL): small drives and sparse checks run longer.
    pub check_budget: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_events: 3_000_000, check_budget: 300_000_000 }
    }
}

/// How a case ended.
#[derive(Debug)]
pub enum Outcome {
    Passed(Passed),
    /// The scenario was refused with a clean error.
    Rejected {
        /// The message with numbers and names taken out, to group refusals by.
        reason: String,
        message: String,
    },
    Failed(Failure),
}

/// A case that ran and held every check.
#[derive(Clone, Debug)]
pub struct Passed {
    pub events: u64,
    pub requests: u64,
    pub sim_time_ns: u64,
    pub stop: StopReason,
    /// Stopped by [`Limits`] before its own end.
    pub capped: bool,
    /// Garbage collections during the run.
    pub gc_runs: u64,
}

/// A panic or a broken check.
#[derive(Clone, Debug)]
pub struct Failure {
    /// Where: `write`, `load`, `build`, `run`, `check`, `report` or `determinism`.
    pub stage: &'static str,
    pub message: String,
}

fn failed(stage: &'static str, message: String) -> Outcome {
    Outcome::Failed(Failure { stage, message })
}

/// The message of a panic's payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

/// Writes `case` into `dir`, loads it, runs it and checks the results.
pub fn run_case(case: &Case, dir: &Path, limits: &Limits) -> Outcome {
    let path = match case.write_to(dir) {
        Ok(p) => p,
        Err(e) => return failed("write", format!("writing the case into {}: {e}", dir.display())),
    };
    let scenario = match catch_unwind(|| Scenario::load(&path)) {
        Err(p) => return failed("load", panic_message(&*p)),
        Ok(Err(e)) => return Outcome::Rejected { reason: config_reason(&e), message: e.to_string() },
        Ok(Ok(s)) => s,
    };
    let mut first = match simulate(&scenario, case.check_every, limits) {
        Ok(r) => r,
        Err(o) => return o,
    };
    if let Err(m) = check_results(&scenario, &first.results, first.capped) {
        return failed("check", m);
    }
    if case.alone && !first.capped {
        if let Err(o) = alone_baseline(&scenario, case, limits, &mut first.results) {
            return o;
        }
    }
    let rendered = match render_caught(&first.results) {
        Ok(s) => s,
        Err(o) => return o,
    };
    if case.rerun {
        if let Err(o) = rerun(&scenario, case, limits, &first.results, &rendered) {
            return o;
        }
    }
    let r = &first.results;
    Outcome::Passed(Passed {
        events: r.events,
        requests: r.requests_completed,
        sim_time_ns: r.sim_time_ns,
        stop: r.stop_reason,
        capped: first.capped,
        gc_runs: r.device.ftl.gc_runs,
    })
}

/// Each tenant alone on the identically preconditioned drive, as `--alone-baseline`: every run
/// checked, the slowdowns added to `results`.
fn alone_baseline(scenario: &Scenario, case: &Case, limits: &Limits, results: &mut RunResults) -> Result<(), Outcome> {
    let mut alone = Vec::new();
    for i in 0..scenario.tenants.len() {
        let Some(s) = scenario.alone(i) else { return Err(failed("check", format!("no alone scenario for tenant {i}"))) };
        match simulate(&s, case.check_every, limits) {
            Ok(r) => {
                if let Err(m) = check_results(&s, &r.results, r.capped) {
                    return Err(failed("check", format!("tenant {i} alone: {m}")));
                }
                alone.push(r.results);
            }
            Err(Outcome::Failed(f)) => return Err(failed(f.stage, format!("tenant {i} alone: {}", f.message))),
            Err(_) => return Err(failed("check", format!("tenant {i} alone was refused where the shared run ran"))),
        }
    }
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| results.add_alone_baseline(&alone))) {
        return Err(failed("report", panic_message(&*p)));
    }
    Ok(())
}

/// The run again: the same events and the same bytes in every report as `first` gave
/// (`rendered`).
fn rerun(scenario: &Scenario, case: &Case, limits: &Limits, first: &RunResults, rendered: &str) -> Result<(), Outcome> {
    let mut second = match simulate(scenario, case.check_every, limits) {
        Ok(r) => r,
        Err(Outcome::Failed(f)) => return Err(failed("determinism", format!("the second run failed where the first passed: {}: {}", f.stage, f.message))),
        Err(_) => return Err(failed("determinism", "the second run was refused where the first ran".into())),
    };
    // The alone runs are not repeated: their baseline is the first's.
    second.results.fairness.baseline = first.fairness.baseline.clone();
    let again = render_caught(&second.results)?;
    if again != rendered || second.results.events != first.events {
        let at = rendered.bytes().zip(again.bytes()).position(|(a, b)| a != b).unwrap_or(rendered.len().min(again.len()));
        let lo = at.saturating_sub(80);
        return Err(failed(
            "determinism",
            format!(
                "the same scenario and seed gave different results ({} and {} events); first difference at byte {at}:\n  {}\n  {}",
                first.events,
                second.results.events,
                &rendered[lo..(at + 80).min(rendered.len())].escape_debug(),
                &again[lo..(at + 80).min(again.len())].escape_debug()
            ),
        ));
    }
    Ok(())
}

/// [`render`], with an error or a panic as a failed report.
fn render_caught(r: &RunResults) -> Result<String, Outcome> {
    match catch_unwind(AssertUnwindSafe(|| render(r))) {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(failed("report", e)),
        Err(p) => Err(failed("report", panic_message(&*p))),
    }
}

struct Run {
    results: RunResults,
    capped: bool,
}

/// Builds and runs the simulator within `limits`, catching panics.
fn simulate(scenario: &Scenario, every: u64, limits: &Limits) -> Result<Run, Outcome> {
    let mut sim = match catch_unwind(|| Simulator::new(scenario.clone())) {
        Err(p) => return Err(failed("build", panic_message(&*p))),
        Ok(Err(e)) => return Err(Outcome::Rejected { reason: sim_reason(&e), message: e.to_string() }),
        Ok(Ok(sim)) => sim,
    };
    sim.check_invariants_every(every);
    // A check walks the FTL: bound the run so the checks stay within the budget.
    let units = match &scenario.device.kind {
        DeviceKind::Ssd(c) => c.geometry.total_units(),
        DeviceKind::Null(_) => 0,
    };
    let cap = (limits.check_budget.saturating_mul(every) / (units + 1_000)).clamp(20_000.min(limits.max_events), limits.max_events);
    let ran = catch_unwind(AssertUnwindSafe(move || {
        let mut capped = false;
        loop {
            let left = cap.saturating_sub(sim.events_processed());
            if left == 0 {
                sim.interrupt();
                capped = true;
                break;
            }
            if let Progress::Finished(_) = sim.run_for(left.min(100_000)) {
                break;
            }
        }
        // The same batches as without the cap: a capped run would have gone on identically.
        Run { results: sim.finish(), capped }
    }));
    ran.map_err(|p| failed("run", panic_message(&*p)))
}

/// Every report a run writes, as `flashmux run` renders them; the JSON first.
fn render(r: &RunResults) -> Result<String, String> {
    let json = serde_json::to_string(&report::fio_json(r, true)).map_err(|e| format!("serializing results: {e}"))?;
    let mut csv = Vec::new();
    report::write_timeline_csv(r, &mut csv).map_err(|e| format!("writing the timeline: {e}"))?;
    let normal = report::fio_normal(r);
    let table = report::tenant_table(r);
    Ok(format!("{json}\n{}\n{normal}\n{table}", String::from_utf8_lossy(&csv)))
}

/// What must hold at the end of every run.
pub fn check_results(s: &Scenario, r: &RunResults, capped: bool) -> Result<(), String> {
    check_stop(s, r, capped)?;
    check_accounting(s, r)?;
    check_directions(r)?;
    check_gc(r)
}

/// Requests are conserved, and the run stopped for a reason its scenario gives, where it gives.
fn check_stop(s: &Scenario, r: &RunResults, capped: bool) -> Result<(), String> {
    let (issued, done, inflight) = (r.requests_issued, r.requests_completed, r.requests_in_flight);
    if done > issued || issued != done + inflight {
        return Err(format!("requests not conserved: {issued} issued, {done} completed, {inflight} in flight"));
    }
    match r.stop_reason {
        StopReason::AllJobsDone if inflight != 0 => {
            return Err(format!("every job is done but {inflight} requests are still in flight"));
        }
        StopReason::RequestLimit => {
            let limit = s.stop.requests.ok_or("stopped at a request limit the scenario does not set")?;
            if done < limit {
                return Err(format!("stopped at the request limit {limit} after {done} completions"));
            }
        }
        StopReason::TimeLimit => {
            let t = s.stop.time.ok_or("stopped at a time limit the scenario does not set")?;
            if r.sim_time_ns != t.0 {
                return Err(format!("stopped at the time limit {} ns at {} ns", t.0, r.sim_time_ns));
            }
        }
        StopReason::Interrupted if !capped => return Err("interrupted, but nothing interrupted it".into()),
        StopReason::ServerStopped => return Err("a server stop in a simulation".into()),
        _ => {}
    }
    if let Some(t) = s.stop.time {
        if r.sim_time_ns > t.0 {
            return Err(format!("simulated {} ns past the time limit of {} ns", r.sim_time_ns - t.0, t.0));
        }
    }
    Ok(())
}

/// Every measured I/O and sync is a completed request, a trace tenant's are its replayed
/// requests, and the jobs account for what the tenants do.
fn check_accounting(s: &Scenario, r: &RunResults) -> Result<(), String> {
    let done = r.requests_completed;
    // Completions in a ramp and the syncs of end_fsync and fsync_on_close are not measured;
    // without them the counts must be equal.
    // A Filebench thread's creates, opens, closes, stats and deletes are requests of its job
    // that move no data: counted apart.
    // So are a fio job's deletes of its files at its end (unlink).
    // On a zoned drive, failed I/Os are requests outside the statistics, and so are fio's zone
    // resets and finishes.
    let metadata: u64 = r.filebench.iter().map(|f| f.metadata_calls).sum::<u64>()
        + r.kernel.iter().flatten().map(|k| k.unlinks).sum::<u64>()
        + r.jobs.iter().map(|j| j.errors + j.zone_commands).sum::<u64>();
    let measured: u64 = r.tenants.iter().map(|t| t.io.ios() + t.io.sync.count()).sum::<u64>() + metadata;
    let jobs = || s.tenants.iter().flat_map(|t| t.jobs().iter());
    let unmeasured = jobs().any(|j| j.ramp_time > 0 || j.end_fsync || j.fsync_on_close);
    if measured > done || (!unmeasured && measured != done) {
        return Err(format!("{measured} I/Os and syncs are in the tenants' statistics, {done} requests completed"));
    }
    for t in &r.tenants {
        if let Some(rp) = &t.replay {
            let got = t.io.ios() + t.io.sync.count();
            if got > rp.requests || (r.stop_reason == StopReason::AllJobsDone && got != rp.requests) {
                return Err(format!(
                    "tenant '{}' replayed {} trace requests and completed {got} ({:?})",
                    t.name, rp.requests, r.stop_reason
                ));
            }
        }
    }
    let job_ios: u64 = r.jobs.iter().map(|j| j.io.ios() + j.io.sync.count()).sum::<u64>() + metadata;
    if job_ios != measured {
        return Err(format!("jobs account for {job_ios} I/Os and syncs, tenants for {measured}"));
    }
    Ok(())
}

/// Each direction's statistics agree with themselves: a latency per I/O, at least a sector per
/// I/O, min <= mean <= max, a finite spread.
fn check_directions(r: &RunResults) -> Result<(), String> {
    for j in &r.jobs {
        for (dir, d) in [("read", &j.io.read), ("write", &j.io.write), ("trim", &j.io.trim)] {
            let what = format!("job '{}' (clone {}) of tenant '{}', {dir}", j.name, j.clone, j.tenant);
            // A Filebench thread's reads and writes are a file's bytes, any number of them (a
            // 330-byte file is read in one call of 330); a block job's are whole sectors.
            let files = j.options.iter().any(|(k, _)| k == "filebench");
            if !files && d.bytes < 512 * d.ios {
                return Err(format!("{what}: {} bytes in {} I/Os", d.bytes, d.ios));
            }
            for (name, l) in [("slat", &d.slat), ("clat", &d.clat), ("lat", &d.lat)] {
                if l.count() != d.ios {
                    return Err(format!("{what}: {} {name} samples for {} I/Os", l.count(), d.ios));
                }
                let (min, mean, max) = (l.min() as f64, l.mean(), l.max() as f64);
                let slack = 1e-9 * max.max(1.0);
                if l.count() > 0 && !(min <= mean + slack && mean <= max + slack && l.stddev().is_finite() && l.stddev() >= 0.0) {
                    return Err(format!("{what}: {name} min {min}, mean {mean}, max {max}, stddev {}", l.stddev()));
                }
            }
        }
    }
    Ok(())
}

/// Every unit GC moved is charged: to the tenant that wrote it, to no one (preconditioned
/// data), or to the translation pages.
fn check_gc(r: &RunResults) -> Result<(), String> {
    let d = &r.device;
    let charged: u64 = r.tenants.iter().map(|t| t.gc_units_moved).sum::<u64>() + d.unowned_gc_units_moved + d.ftl.gc_map_units_moved;
    if charged != d.ftl.gc_units_programmed {
        return Err(format!("GC moved {} units but {charged} are charged to tenants, to no one and to the map", d.ftl.gc_units_programmed));
    }
    Ok(())
}

/// Takes the numbers out of a message and keeps its first part, so refusals group by cause.
fn normalize(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut in_digits = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
        if out.chars().count() >= max {
            break;
        }
    }
    out
}

/// A refusal's cause: the key it names (`device.ftl`, `tenant.region`) or the fio option.
fn config_reason(e: &ConfigError) -> String {
    match e {
        ConfigError::Invalid { message, .. } => {
            let key = message.split(": ").next().unwrap_or(message);
            // `tenant[3] (t3).region` → `tenant.region`
            let key = match (key.strip_prefix("tenant["), key.find(").")) {
                (Some(_), Some(i)) => format!("tenant.{}", &key[i + 2..]),
                (Some(_), None) => "tenant".into(),
                _ => key.to_string(),
            };
            normalize(&key, 60)
        }
        ConfigError::Fio(f) => fio_reason(f),
        ConfigError::Io { .. } => "cannot read a file".into(),
    }
}

fn fio_reason(e: &FioError) -> String {
    match e {
        FioError::InvalidValue { option, .. } => format!("fio: invalid {option}"),
        FioError::Unsupported { option, .. } => format!("fio: unsupported {option}"),
        FioError::Job { message, .. } => format!("fio job: {}", normalize(message, 50)),
        FioError::Syntax { message, .. } => format!("fio syntax: {}", normalize(message, 40)),
        other => format!("fio: {}", normalize(&other.to_string(), 40)),
    }
}

fn sim_reason(e: &SimError) -> String {
    match e {
        SimError::Fio(f) => fio_reason(f),
        SimError::Device(m) => format!("device: {}", normalize(m, 50)),
        SimError::Trace(m) => format!("trace: {}", normalize(m, 50)),
        SimError::Config(m) => format!("scenario: {}", normalize(m, 50)),
        SimError::DriveState(d) => format!("drive state: {}", normalize(&d.message, 50)),
    }
}
