//! `flashmux sweep`: runs an experiment file — a base scenario and the parameters to sweep — one
//! simulation per point, and writes one CSV of per-tenant results (see `flashmux::experiment`).

use anyhow::Context;
use flashmux::config::DEFAULT_OUTPUT_DIR;
use flashmux::experiment::{self, Experiment, Point};
use flashmux::metrics::{RunResults, StopReason};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct SweepArgs {
    /// Experiment file (TOML): a base scenario and the parameters to sweep.
    experiment: PathBuf,
    /// Output directory [default: flashmux-out/<experiment name>].
    #[arg(short, long)]
    output_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// Validates every point, runs them in order, writes `sweep.csv` and prints the table. On
/// Ctrl-C the running point is cut short and the results so far are written (exit code 130).
pub fn run(args: SweepArgs) -> anyhow::Result<ExitCode> {
    let exp = Experiment::load(&args.experiment)?;
    let out_dir = args.output_dir.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_OUTPUT_DIR).join(&exp.name));
    let outcome = execute(&exp, &args.experiment.display().to_string(), &out_dir, args.no_progress)?;
    Ok(outcome.exit_code())
}

/// What a sweep ran.
pub struct Outcome {
    pub points: Vec<Point>,
    pub results: Vec<RunResults>,
    /// The last point was cut short by Ctrl-C, or points never ran.
    pub interrupted: bool,
}

impl Outcome {
    pub fn exit_code(&self) -> ExitCode {
        if self.interrupted {
            ExitCode::from(crate::EXIT_INTERRUPTED)
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// Runs every point of `exp` (named `source` in messages) with a progress bar, writes
/// `out_dir/sweep.csv` and prints the table.
/// Set by Ctrl-C. The handler is installed once per process: a reproduction runs several sweeps.
fn interrupt_flag() -> anyhow::Result<Arc<AtomicBool>> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    if let Some(f) = FLAG.get() {
        return Ok(f.clone());
    }
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    ctrlc::set_handler(move || set.store(true, Ordering::SeqCst)).context("installing the Ctrl-C handler")?;
    Ok(FLAG.get_or_init(|| flag).clone())
}

pub fn execute(exp: &Experiment, source: &str, out_dir: &Path, no_progress: bool) -> anyhow::Result<Outcome> {
    let points = exp.points()?;
    let n = points.len();

    // Points share most of their scenario: say each warning and note once.
    let mut warnings: Vec<&str> = Vec::new();
    let mut notes: Vec<&str> = Vec::new();
    for p in &points {
        for w in &p.scenario.warnings {
            if !warnings.contains(&w.as_str()) {
                warnings.push(w);
            }
        }
        for note in &p.scenario.notes {
            if !notes.contains(&note.as_str()) {
                notes.push(note);
            }
        }
    }
    for w in &warnings {
        eprintln!("flashmux: warning: {w}");
    }
    if !notes.is_empty() {
        eprintln!("flashmux: note: accepted but not modelled: {}", notes.join(", "));
    }

    crate::check_memory(&points.iter().map(|p| p.scenario.clone()).collect::<Vec<_>>())?;
    let interrupted = interrupt_flag()?;
    let bar = (!no_progress && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::new(n as u64);
        b.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} points | {msg}")
                .expect("valid template"),
        );
        b.set_message(points[0].describe());
        b.enable_steady_tick(std::time::Duration::from_millis(120));
        b
    });

    let mut done = 0;
    let outcome = experiment::run_points(&points, &|| interrupted.load(Ordering::SeqCst), &mut |i, _, _| {
        done = i + 1;
        if let Some(b) = &bar {
            b.inc(1);
            if let Some(next) = points.get(i + 1) {
                b.set_message(next.describe());
            }
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let results = outcome.with_context(|| {
        let p = &points[done.min(n - 1)];
        format!("{source}: point {} of {n} ({})", p.index + 1, p.describe())
    })?;

    std::fs::create_dir_all(out_dir).with_context(|| format!("creating output directory {}", out_dir.display()))?;
    let csv = out_dir.join("sweep.csv");
    experiment::write_csv(&points, &results, &csv).with_context(|| format!("writing {}", csv.display()))?;
    print!("{}", experiment::format_table(&points, &results));
    println!("\nresults: {}", csv.display());

    let cut_short = results.last().is_some_and(|r| r.stop_reason == StopReason::Interrupted);
    let interrupted = cut_short || results.len() < n;
    if interrupted {
        let complete = results.len() - usize::from(cut_short);
        eprintln!(
            "flashmux: interrupted: {complete} of {n} points ran to their end{}",
            if cut_short {
                format!("; point {} was cut short (stop_reason = interrupted)", results.len())
            } else {
                String::new()
            }
        );
    }
    Ok(Outcome { points, results, interrupted })
}
