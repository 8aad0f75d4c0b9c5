//! `flashmux swarm`: draws whole configurations from consecutive seeds and runs each with its
//! invariants checked every few events (see `flashmux::swarm`). A failure is saved with its
//! files and the commands that reproduce it.

use anyhow::Context;
use flashmux::swarm::{self, Case, Limits, Outcome};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct SwarmArgs {
    /// How many configurations (seeds S, S+1, ...).
    #[arg(long, default_value_t = 100)]
    count: u64,
    /// The first seed [default: drawn from the clock, and printed].
    #[arg(long)]
    seed: Option<u64>,
    /// Go on after a failure (every failure is saved).
    #[arg(long)]
    keep_going: bool,
    /// Where failures are saved (DIR/seed-S/) and cases are run (DIR/work/).
    #[arg(short, long, default_value = "flashmux-swarm")]
    output_dir: PathBuf,
    /// Print the configurations instead of running them (their files go to DIR/seed-S/).
    #[arg(long)]
    print: bool,
    /// Stop a run after this many events (it is still checked).
    #[arg(long, default_value_t = Limits::default().max_events)]
    max_events: u64,
    /// A run that takes longer than this many seconds of wall-clock time is a failure (a hang).
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// A line per configuration: how it ended, its events, requests, garbage collections, time
    /// (and why a refused one was refused).
    #[arg(short, long)]
    verbose: bool,
    /// No progress bar (a line every 100 runs instead).
    #[arg(long)]
    no_progress: bool,
}

/// The last panic's message with its location and backtrace, taken by the panic hook.
static LAST_PANIC: Mutex<Option<(String, String)>> = Mutex::new(None);

pub fn run(args: SwarmArgs) -> anyhow::Result<ExitCode> {
    if args.count == 0 {
        return Err(crate::BadArg("--count: must be at least 1".into()).into());
    }
    let first = args.seed.unwrap_or_else(|| {
        // Any seed will do; the clock gives a new one each time.
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64 % 1_000_000_000)
    });
    let last = first.checked_add(args.count - 1).ok_or_else(|| crate::BadArg(format!("--seed {first} --count {}: seeds past 2^64", args.count)))?;
    if args.print {
        return print(first, last, &args.output_dir);
    }
    let limits = Limits { max_events: args.max_events.max(1), ..Limits::default() };
    let work = args.output_dir.join("work");
    std::fs::create_dir_all(&args.output_dir).with_context(|| format!("creating {}", args.output_dir.display()))?;
    install_panic_hook();
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let f = interrupted.clone();
        ctrlc::set_handler(move || f.store(true, Ordering::SeqCst)).context("installing the Ctrl-C handler")?;
    }
    let current: Arc<Mutex<Option<(Case, Instant)>>> = Arc::new(Mutex::new(None));
    watchdog(current.clone(), Duration::from_secs(args.timeout.max(1)), args.output_dir.clone());

    eprintln!("flashmux swarm: seeds {first}..={last} ({} configurations), failures saved in {}", args.count, args.output_dir.display());
    let bar = (!args.no_progress && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::new(args.count);
        b.set_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg} (ETA {eta})").expect("valid template"));
        b
    });
    let start = Instant::now();
    let mut last_line = Instant::now();
    let mut s = Summary::default();
    for seed in first..=last {
        if interrupted.load(Ordering::SeqCst) {
            break;
        }
        let case = swarm::generate(seed);
        let _ = std::fs::remove_dir_all(&work);
        *current.lock().unwrap_or_else(|e| e.into_inner()) = Some((case.clone(), Instant::now()));
        let t0 = Instant::now();
        let outcome = swarm::run_case(&case, &work, &limits);
        let took = t0.elapsed();
        *current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if !tally(&args, &bar, &mut s, &case, outcome, took)? {
            break;
        }
        let msg = format!("{} passed, {} rejected, {} failed", s.passed, s.rejected, s.failed.len());
        match &bar {
            Some(b) => {
                b.set_position(s.runs);
                b.set_message(msg);
            }
            None if s.runs % 100 == 0 || last_line.elapsed() > Duration::from_secs(60) => {
                eprintln!("flashmux swarm: {}/{} runs, {msg}, {:.0} s", s.runs, args.count, start.elapsed().as_secs_f64());
                last_line = Instant::now();
            }
            None => {}
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let _ = std::fs::remove_dir_all(&work);
    s.print(first, start.elapsed());
    Ok(if !s.failed.is_empty() {
        ExitCode::from(1)
    } else if interrupted.load(Ordering::SeqCst) {
        ExitCode::from(crate::EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Panics are failures to report, not crashes: keep their message, location and backtrace in
/// [`LAST_PANIC`], and print nothing here.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map_or(String::new(), |l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()));
        let msg = swarm::panic_message(info.payload());
        let bt = std::backtrace::Backtrace::force_capture().to_string();
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some((format!("{msg}{at}"), bt));
    }));
}

/// A line above the progress bar, or on standard error without one.
fn say(bar: &Option<ProgressBar>, line: String) {
    match bar {
        Some(b) => b.println(line),
        None => eprintln!("{line}"),
    }
}

/// Counts a case's outcome in `s`, saving a failure and saying what `--verbose` asks for;
/// returns whether to go on.
fn tally(args: &SwarmArgs, bar: &Option<ProgressBar>, s: &mut Summary, case: &Case, outcome: Outcome, took: Duration) -> anyhow::Result<bool> {
    let seed = case.seed;
    s.runs += 1;
    s.slowest.push((took, seed));
    s.slowest.sort_by(|a, b| b.cmp(a));
    s.slowest.truncate(5);
    match outcome {
        Outcome::Passed(p) => {
            if args.verbose {
                let line = format!(
                    "passed seed {seed}: {:?}{}, {} events, {} requests, {} GC runs, {:.0} ms",
                    p.stop,
                    if p.capped { " (event bound)" } else { "" },
                    p.events,
                    p.requests,
                    p.gc_runs,
                    took.as_secs_f64() * 1000.0
                );
                say(bar, line);
            }
            s.passed += 1;
            s.capped += p.capped as u64;
            s.events += p.events;
            s.requests += p.requests;
            s.with_gc += (p.gc_runs > 0) as u64;
        }
        Outcome::Rejected { reason, message } => {
            if args.verbose {
                say(bar, format!("rejected seed {seed}: {message}"));
            }
            s.rejected += 1;
            *s.reasons.entry(reason).or_default() += 1;
        }
        Outcome::Failed(f) => {
            let (message, backtrace) = match LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take() {
                // A panic: the hook saw where.
                Some((m, bt)) if f.stage != "check" => (m, Some(bt)),
                _ => (f.message.clone(), None),
            };
            let report = save_failure(case, &args.output_dir, f.stage, &message, backtrace.as_deref())?;
            say(bar, format!("FAIL seed {seed} ({}): {message}\n{report}", f.stage));
            s.failed.push(seed);
            return Ok(args.keep_going);
        }
    }
    Ok(true)
}

#[derive(Default)]
struct Summary {
    runs: u64,
    passed: u64,
    capped: u64,
    rejected: u64,
    reasons: BTreeMap<String, u64>,
    failed: Vec<u64>,
    events: u64,
    requests: u64,
    /// Passed runs in which garbage collection ran.
    with_gc: u64,
    slowest: Vec<(Duration, u64)>,
}

impl Summary {
    fn print(&self, first: u64, took: Duration) {
        let pct = |n: u64| if self.runs == 0 { 0.0 } else { n as f64 * 100.0 / self.runs as f64 };
        println!(
            "swarm: {} runs (seeds {first}..={}) in {:.1} s, {:.0} ms per run",
            self.runs,
            first + self.runs.saturating_sub(1),
            took.as_secs_f64(),
            took.as_secs_f64() * 1000.0 / self.runs.max(1) as f64
        );
        println!(
            "  passed:   {} ({:.1}%), {} events, {} requests; {} with garbage collection, {} stopped at the event bound",
            self.passed,
            pct(self.passed),
            self.events,
            self.requests,
            self.with_gc,
            self.capped
        );
        println!("  rejected: {} ({:.1}%)", self.rejected, pct(self.rejected));
        let mut reasons: Vec<(&String, &u64)> = self.reasons.iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (r, n) in reasons.iter().take(10) {
            println!("    {n:>6}  {r}");
        }
        if self.failed.is_empty() {
            println!("  failed:   0");
        } else {
            let seeds: Vec<String> = self.failed.iter().map(|s| s.to_string()).collect();
            println!("  failed:   {} (seeds {})", self.failed.len(), seeds.join(", "));
        }
        let slow: Vec<String> = self.slowest.iter().map(|(d, s)| format!("{s} ({:.2} s)", d.as_secs_f64())).collect();
        println!("  slowest:  {}", slow.join(", "));
    }
}

/// Saves a failing case into `out/seed-S/` with `failure.txt`; returns what to print.
fn save_failure(case: &Case, out: &Path, stage: &str, message: &str, backtrace: Option<&str>) -> anyhow::Result<String> {
    let dir = out.join(format!("seed-{}", case.seed));
    let _ = std::fs::remove_dir_all(&dir);
    let path = case.write_to(&dir).with_context(|| format!("saving the failing case in {}", dir.display()))?;
    let commands = format!(
        "  saved: {}\n  rerun: flashmux swarm --seed {} --count 1\n  or:    {} -o {}",
        path.display(),
        case.seed,
        case.run_command(&path),
        dir.join("out").display()
    );
    let mut text = format!("seed {}\nstage: {stage}\n{message}\n\n{commands}\n", case.seed);
    if let Some(bt) = backtrace {
        text.push_str("\nbacktrace:\n");
        text.push_str(bt);
    }
    std::fs::write(dir.join("failure.txt"), text).with_context(|| format!("writing {}", dir.join("failure.txt").display()))?;
    Ok(commands)
}

/// A thread that ends the process when one case runs longer than `limit` (a hang inside an
/// event is beyond any event bound): the case is saved first.
fn watchdog(current: Arc<Mutex<Option<(Case, Instant)>>>, limit: Duration, out: PathBuf) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let guard = current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((case, since)) = guard.as_ref() {
            if since.elapsed() > limit {
                let msg = format!("did not finish within {} s", limit.as_secs());
                let saved = save_failure(case, &out, "timeout", &msg, None).unwrap_or_else(|e| format!("  (not saved: {e:#})"));
                eprintln!("\nFAIL seed {} (timeout): {msg}\n{saved}", case.seed);
                std::process::exit(1);
            }
        }
    });
}

/// `--print`: the configurations as scenario files; files they refer to are written beside a
/// copy in `out/seed-S/`.
fn print(first: u64, last: u64, out: &Path) -> anyhow::Result<ExitCode> {
    for seed in first..=last {
        let case = swarm::generate(seed);
        println!("# flashmux swarm --seed {seed}: invariants checked every {} events", case.check_every);
        println!("# drawn: {}", case.tags.join(" "));
        if !case.files.is_empty() {
            let dir = out.join(format!("seed-{seed}"));
            let path = case.write_to(&dir).with_context(|| format!("writing {}", dir.display()))?;
            let names: Vec<&str> = case.files.iter().map(|(n, _)| n.as_str()).collect();
            println!("# its files ({}) are beside {}", names.join(", "), path.display());
        }
        print!("{}", case.scenario);
        if seed != last {
            println!();
        }
    }
    Ok(ExitCode::SUCCESS)
}
