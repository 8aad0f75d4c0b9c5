//! `flashmux`: run multi-tenant SSD scenarios and fio job files on the simulator.

mod age;
mod bench;
mod import;
mod output;
mod personalities;
mod profile;
mod reproduce;
mod serve;
mod sweep;
mod swarm;
mod trace;
mod validate;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use flashmux::config::{ConfigError, Scenario, DEFAULT_SCENARIO, PRESET_NAMES};
use flashmux::device::precondition::PreconditionState;
use flashmux::metrics::{RunResults, StopReason};
use flashmux::serve::record::Recorder;
use flashmux::sim::{progress_fraction, DispatchSink, Progress, SimError, Simulator, TimelineSink};
use flashmux::workload::trace::Format;
use flashmux::units::parse_duration;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "flashmux", version, about = "Deterministic simulator of several tenants sharing one SSD")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario file, a fio job file, or (with neither) the built-in default scenario.
    Run(RunArgs),
    /// List the built-in device presets.
    Presets,
    /// List the built-in workload personalities (`personality = "..."` in a scenario), or print
    /// one's fio job.
    Personalities(personalities::PersonalitiesArgs),
    /// Print the built-in default scenario (a starting point for your own).
    DefaultScenario,
    /// Precondition a scenario's drive once and save it (`--save FILE`), for runs to load with
    /// `[precondition] state_file = "FILE"` instead of aging it each time.
    Age(age::AgeArgs),
    /// Measure the simulator's speed: 4 KiB random writes at QD 32 on an aged drive.
    Bench(bench::BenchArgs),
    /// Run an experiment file: one simulation per point of a parameter sweep, results in one CSV.
    Sweep(sweep::SweepArgs),
    /// Run a bundled paper experiment, check the paper's findings and draw its figures.
    Reproduce(reproduce::ReproduceArgs),
    /// Profile a drive for a scheduler's model parameters (hWA-BC's GC contribution fit).
    Profile(profile::ProfileArgs),
    /// Check the device presets against the published figures of the drives they resemble, and
    /// greedy GC against its closed form: a table of errors in % with PASS/FAIL.
    Validate(validate::ValidateArgs),
    /// Replay a block trace (blktrace, blkparse, fio iolog, MSR, SPC, MQSim, Alibaba, Tencent,
    /// SYSTOR) on a drive: one tenant per stream; the same outputs as `run`.
    Replay(trace::ReplayArgs),
    /// Inspect a block trace or convert it to another tool's format.
    Trace(trace::TraceArgs),
    /// Serve the model in real time over NBD: real programs (fio, qemu-img, a filesystem via
    /// nbdfuse) do real I/O against the modelled drive, with its timing. One export per tenant
    /// without a workload; stop with Ctrl-C or SIGTERM for the results.
    Serve(serve::ServeArgs),
    /// Import another simulator's configuration as flashmux scenarios (MQSim's XML files).
    Import(import::ImportArgs),
    /// Draw whole configurations from seeds and run each with invariant checks (a swarm test);
    /// failures are saved with the commands that reproduce them.
    Swarm(swarm::SwarmArgs),
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OutputFormat {
    /// fio's human-readable output followed by the per-tenant table.
    Normal,
    /// fio's JSON output on stdout.
    Json,
    /// fio's JSON output with latency histogram bins.
    #[value(name = "json+")]
    JsonPlus,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Scenario file (TOML). Without it and without --fio, the built-in default scenario runs.
    scenario: Option<PathBuf>,
    /// Run an existing fio job file as is: one tenant per job section.
    #[arg(long, conflicts_with = "scenario")]
    fio: Option<PathBuf>,
    /// Device preset for --fio runs.
    #[arg(long, default_value = "tlc-nvme", requires = "fio")]
    device: String,
    /// Output directory (overrides the scenario's).
    #[arg(short, long)]
    output_dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "normal")]
    output_format: OutputFormat,
    /// Master seed (overrides the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Stop at this simulated time, e.g. 30s (overrides the scenario's).
    #[arg(long)]
    time: Option<String>,
    /// Stop after this many completed requests (overrides the scenario's).
    #[arg(long)]
    requests: Option<u64>,
    /// Drive state before the run: clean, sequential-fill, aged or workload (overrides the scenario's).
    #[arg(long)]
    precondition: Option<String>,
    /// Fraction of each tenant's region holding data after preconditioning, in (0, 1].
    #[arg(long)]
    fill: Option<f64>,
    /// Check every component's invariants periodically during the run (and at its end).
    #[arg(long)]
    check_invariants: bool,
    /// Events between invariant checks with --check-invariants (at least 1).
    #[arg(long, default_value_t = 100_000, requires = "check_invariants", value_parser = clap::value_parser!(u64).range(1..))]
    check_every: u64,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Also run each tenant alone (same scenario, seed and drive state; only its jobs issue
    /// I/O) and report its slowdown, mean latency shared / alone, and the run's fairness, min / max
    /// slowdown.
    #[arg(long)]
    alone_baseline: bool,
    /// Write every command the host block layer sends to the device (after merging: what
    /// blktrace's issue events show of a real kernel) to this file, one stream per tenant.
    #[arg(long)]
    record: Option<PathBuf>,
    /// The format `--record` writes: fio-iolog, mqsim or blkparse.
    #[arg(long, default_value = "fio-iolog", requires = "record")]
    record_format: String,
}

/// Exit codes: 0 success, 1 failure while running or writing results, 2 bad input, 3 a
/// reproduced paper's finding did not hold, 130 interrupted.
const EXIT_BAD_INPUT: u8 = 2;
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    // Output piped into `head` and the like ends quietly, as for any Unix tool, instead of
    // panicking on the closed pipe.
    #[cfg(unix)]
    // SAFETY: called before any other thread exists; SIG_DFL is a valid handler for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Presets => {
            print_presets();
            Ok(ExitCode::SUCCESS)
        }
        Command::Personalities(args) => personalities::run(args),
        Command::DefaultScenario => {
            print!("{DEFAULT_SCENARIO}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(args) => bench::run(args),
        Command::Age(args) => age::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Reproduce(args) => reproduce::run(args),
        Command::Profile(args) => profile::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Replay(args) => trace::run_replay(args),
        Command::Trace(args) => trace::run_trace(args),
        Command::Serve(args) => serve::run(args),
        Command::Swarm(args) => swarm::run(args),
        Command::Import(args) => import::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("flashmux: error: {e:#}");
            let bad_input = e.chain().any(|c| {
                c.is::<ConfigError>()
                    || c.is::<SimError>()
                    || c.is::<BadArg>()
                    || c.is::<flashmux::experiment::ExperimentError>()
                    || c.is::<flashmux::import::ImportError>()
                    || matches!(
                        c.downcast_ref::<flashmux::serve::server::ServeError>(),
                        Some(flashmux::serve::server::ServeError::Sim(_) | flashmux::serve::server::ServeError::BadInput(_))
                    )
            });
            ExitCode::from(if bad_input { EXIT_BAD_INPUT } else { 1 })
        }
    }
}

/// `--precondition`'s state, if given, and a check of `--fill` against the state the drive will
/// have (`--precondition`'s, else `base`, the scenario's).
pub(crate) fn check_drive_state(
    precondition: Option<&str>,
    fill: Option<f64>,
    base: PreconditionState,
) -> Result<Option<PreconditionState>, BadArg> {
    let state = precondition
        .map(|p| {
            PreconditionState::from_name(p).ok_or_else(|| {
                BadArg(format!("--precondition: unknown state '{p}': expected one of {}", PreconditionState::NAMES.join(", ")))
            })
        })
        .transpose()?;
    if let Some(f) = fill {
        if !(f > 0.0 && f <= 1.0) {
            return Err(BadArg(format!("--fill: {f} is out of range: expected a fraction in (0, 1]")));
        }
        if state.unwrap_or(base) == PreconditionState::Clean {
            return Err(BadArg(format!(
                "--fill {f}: a clean drive holds no data, so there is nothing to fill{}: give --precondition sequential-fill, aged or workload, or drop --fill",
                if state.is_none() { " (the scenario's precondition.state is \"clean\")" } else { "" }
            )));
        }
    }
    Ok(state)
}

/// `--precondition` and `--fill`, over the scenario's own drive state.
pub(crate) fn set_drive_state(s: &mut Scenario, precondition: Option<&str>, fill: Option<f64>) -> Result<(), BadArg> {
    if let Some(state) = check_drive_state(precondition, fill, s.precondition.state)? {
        s.precondition.state = state;
    }
    if let Some(f) = fill {
        s.precondition.fill = f;
    }
    Ok(())
}

/// Refuses, before anything is built, a run the machine does not have the memory for
/// ([`flashmux::config::limits::check_memory`]).
pub(crate) fn check_memory(scenarios: &[Scenario]) -> Result<(), BadArg> {
    flashmux::config::limits::check_memory(scenarios, 1).map_err(BadArg)
}

/// A command-line value that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadArg(pub(crate) String);

fn print_presets() {
    let width = PRESET_NAMES.iter().map(|n| n.len()).max().unwrap_or(0);
    for name in PRESET_NAMES {
        let p = flashmux::config::preset(name).expect("listed presets exist");
        println!("{:<width$} {}", p.name, p.summary);
    }
}

fn load_scenario(args: &RunArgs) -> anyhow::Result<Scenario> {
    let mut s = match (&args.scenario, &args.fio) {
        (Some(path), _) => Scenario::load(path)?,
        (None, Some(job)) => Scenario::from_fio_file(job, &args.device)?,
        (None, None) => Scenario::default_scenario(),
    };
    if let Some(dir) = &args.output_dir {
        s.output.dir = dir.clone();
    }
    if let Some(seed) = args.seed {
        s.seed = seed;
    }
    if let Some(t) = &args.time {
        let d = parse_duration(t).map_err(|e| BadArg(format!("--time: {e}")))?;
        if d.0 == 0 {
            return Err(BadArg("--time: must be longer than zero".into()).into());
        }
        s.stop.time = Some(d);
    }
    set_drive_state(&mut s, args.precondition.as_deref(), args.fill)?;
    if let Some(r) = args.requests {
        if r == 0 {
            return Err(BadArg("--requests: must be at least 1".into()).into());
        }
        s.stop.requests = Some(r);
    }
    Ok(s)
}

fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let scenario = load_scenario(&args)?;
    let record = serve::record_target(args.record.as_deref(), &args.record_format)?;
    let check_every = args.check_invariants.then_some(args.check_every);
    execute_with(scenario, args.output_format, args.no_progress, check_every, args.alone_baseline, record)
}

/// Runs a scenario as `run` does: warnings, progress, Ctrl-C, results written.
pub(crate) fn execute(scenario: Scenario, format: OutputFormat, no_progress: bool) -> anyhow::Result<ExitCode> {
    execute_with(scenario, format, no_progress, None, false, None)
}

fn execute_with(
    scenario: Scenario,
    format: OutputFormat,
    no_progress: bool,
    check_every: Option<u64>,
    alone_baseline: bool,
    record: Option<(PathBuf, Format)>,
) -> anyhow::Result<ExitCode> {
    for w in &scenario.warnings {
        eprintln!("flashmux: warning: {w}");
    }
    let scenario_warnings = scenario.warnings.len();
    // What is accepted but not modelled is said with the results (bad input found while the
    // model is built is then one clear error).
    let notes = scenario.notes.clone();
    // Where the results go, and whether the machine can hold the run, are checked before
    // anything is simulated.
    check_memory(std::slice::from_ref(&scenario))?;
    // The handler goes in before anything is written: a Ctrl-C while the output directory is
    // probed stops the run as any other does, and leaves no probe file behind.
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        // A second Ctrl-C while results are being written falls through to the default handler's effect.
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).context("installing the Ctrl-C handler")?;
    }
    let out = output::OutputDir::prepare(&scenario.output.dir)?;
    let driver = Driver { interrupted: &interrupted, on_terminal: !no_progress && std::io::stderr().is_terminal(), check_every };
    let baseline = alone_baseline.then(|| scenario.clone());
    let timeline = out.timeline();
    let names: Vec<String> = scenario.tenants.iter().map(|t| t.name.clone()).collect();
    let recorder = match record {
        Some((path, f)) => Some(Recorder::start(&path, f, names).with_context(|| format!("--record: {}", path.display()))?),
        None => None,
    };
    let (recorder, sink) = match recorder {
        Some((r, s)) => (Some(r), Some(Box::new(s) as Box<dyn DispatchSink>)),
        None => (None, None),
    };
    let mut results = driver.simulate(scenario, "", Some(timeline.sink()), sink)?;
    if let Some(r) = recorder {
        // The simulator, and with it the sink, is gone: the writer ends the file.
        let path = r.path().display().to_string();
        let n = r.finish().context("--record")?;
        eprintln!("flashmux: recorded {n} commands to {path}");
    }
    let mut stopped = results.stop_reason == StopReason::Interrupted;
    if let (Some(s), false) = (baseline, stopped) {
        stopped = !driver.add_alone_baseline(&s, &mut results)?;
    }
    output::write_all(&results, &out, format, Some(timeline))?;
    if !notes.is_empty() {
        eprintln!("flashmux: note: accepted but not modelled: {}", notes.join(", "));
    }
    // Warnings from the run itself (a replay's skipped lines, times out of order, ...): the
    // scenario's own were printed before it started.
    for w in results.warnings.iter().skip(scenario_warnings) {
        eprintln!("flashmux: warning: {w}");
    }
    // A Ctrl-C that came as the run was ending still means the user stopped it.
    if stopped || interrupted.load(Ordering::SeqCst) {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    // Only trace tenants, and not one request replayed (e.g. --start past the trace's end): the
    // run measured nothing. One tenant of several replaying nothing is a warning only: a stream
    // idle in the chosen window is ordinary.
    let replays: Vec<_> = results.tenants.iter().filter_map(|t| Some((&t.name, t.replay.as_ref()?))).collect();
    let only_replays = !replays.is_empty() && replays.len() == results.tenants.len();
    if only_replays && replays.iter().all(|(_, r)| r.requests == 0) {
        if let Some((t, why)) = replays.iter().find_map(|(t, r)| Some((t, r.nothing_replayed.as_ref()?))) {
            eprintln!("flashmux: error: tenant '{t}': nothing was replayed: {why} (results are written)");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    }
    // A trace that could not be read to its end (a strict bad line, a truncated record): the
    // results so far are written, and the input was bad.
    if let Some((t, e)) = results.tenants.iter().find_map(|t| t.replay.as_ref()?.error.as_ref().map(|e| (&t.name, e))) {
        eprintln!("flashmux: error: tenant '{t}': {e} (results up to there are written)");
        return Ok(ExitCode::from(EXIT_BAD_INPUT));
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs simulations the way `run` shows them: a progress bar on a terminal, Ctrl-C stopping the
/// current one with partial results.
struct Driver<'a> {
    interrupted: &'a AtomicBool,
    on_terminal: bool,
    /// Check invariants every so many events.
    check_every: Option<u64>,
}

impl Driver<'_> {
    /// One simulation to its end (or the user's Ctrl-C); `label` prefixes the progress message.
    /// The timeline's rows go to `timeline`, or nowhere.
    fn simulate(
        &self,
        scenario: Scenario,
        label: &str,
        timeline: Option<Box<dyn TimelineSink>>,
        record: Option<Box<dyn DispatchSink>>,
    ) -> anyhow::Result<RunResults> {
        // Aging a large drive takes seconds before the first event: say so.
        let aging = (self.on_terminal && scenario.precondition.state != PreconditionState::Clean).then(|| {
            let s = ProgressBar::new_spinner();
            s.set_message(format!(
                "{label}preconditioning the drive ({}, fill {:.0}%)",
                scenario.precondition.state.name(),
                scenario.precondition.fill * 100.0
            ));
            s.enable_steady_tick(std::time::Duration::from_millis(120));
            s
        });
        let stop = || self.interrupted.load(Ordering::SeqCst);
        let mut sim = Simulator::new_polling(scenario, &stop)?;
        if let Some(s) = aging {
            s.finish_and_clear();
        }
        sim.stream_timeline(timeline.unwrap_or_else(|| Box::new(flashmux::sim::NoTimeline)));
        if let Some(r) = record {
            sim.record_dispatches(r);
        }
        if let Some(every) = self.check_every {
            sim.check_invariants_every(every);
        }
        let bar = self.on_terminal.then(|| {
            let b = ProgressBar::new(1000);
            b.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {msg} (ETA {eta})")
                    .expect("valid template"),
            );
            b
        });
        loop {
            // The simulator asks `stop` before every event: a Ctrl-C takes effect after the event
            // in progress, however slow the events are.
            let progress = sim.run_polling(200_000, &stop);
            if let Some(b) = &bar {
                if let Some(f) = progress_fraction(&sim) {
                    b.set_position((f * 1000.0) as u64);
                }
                b.set_message(format!("{label}sim {} | {} requests", sim.now(), sim.requests_completed()));
            }
            if let Progress::Finished(_) = progress {
                break;
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        Ok(sim.finish())
    }

    /// Runs each tenant of `scenario` alone, one after the other, and adds the slowdowns to
    /// `shared`. Returns false if the user stopped a run: the shared results then say so in a
    /// warning and have no baseline.
    fn add_alone_baseline(&self, scenario: &Scenario, shared: &mut RunResults) -> anyhow::Result<bool> {
        let n = scenario.tenants.len();
        let mut alone = Vec::with_capacity(n);
        for (i, s) in (0..n).map_while(|i| scenario.alone(i)).enumerate() {
            let name = s.tenants[i].name.clone();
            eprintln!("flashmux: alone baseline: running tenant '{name}' alone ({} of {n})", i + 1);
            let r = self.simulate(s, &format!("alone {}/{n} ({name}) | ", i + 1), None, None)?;
            if r.stop_reason == StopReason::Interrupted {
                shared.warnings.push("the alone baseline was interrupted: no slowdowns were measured".into());
                return Ok(false);
            }
            alone.push(r);
        }
        shared.add_alone_baseline(&alone);
        Ok(true)
    }
}
