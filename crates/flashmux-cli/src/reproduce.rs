//! `flashmux reproduce <experiment>`: runs a bundled paper experiment, checks the paper's
//! findings on the results (PASS/FAIL), and draws the paper's figures.

use crate::sweep;
use flashmux::config::DEFAULT_OUTPUT_DIR;
use flashmux::experiment::bundled::{bundled, BUNDLED};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code when the run completed but a finding of the paper did not hold.
pub const EXIT_CHECK_FAILED: u8 = 3;

#[derive(clap::Args)]
pub struct ReproduceArgs {
    /// The bundled experiment (`flashmux reproduce --list` names them).
    #[arg(required_unless_present = "list")]
    experiment: Option<String>,
    /// List the bundled experiments.
    #[arg(long)]
    list: bool,
    /// The short variant the test suite runs (fewer points, less simulated time).
    #[arg(long)]
    quick: bool,
    /// Output directory [default: flashmux-out/<experiment name>].
    #[arg(short, long)]
    output_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

pub fn run(args: ReproduceArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        let width = BUNDLED.iter().map(|b| b.name.len()).max().unwrap_or(0);
        for b in BUNDLED {
            println!("{:<width$} {}", b.name, b.summary);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let name = args.experiment.as_deref().unwrap_or_default();
    let b = bundled(name).ok_or_else(|| {
        crate::BadArg(format!(
            "unknown experiment '{name}': expected one of {}",
            BUNDLED.iter().map(|b| b.name).collect::<Vec<_>>().join(", ")
        ))
    })?;
    let parts = (b.parts)(args.quick)?;
    let out_dir = args.output_dir.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_OUTPUT_DIR).join(b.name));
    let (mut points, mut results) = (Vec::new(), Vec::new());
    for part in &parts {
        // Several parts: each sweep's table in its own directory.
        let dir = if parts.len() == 1 { out_dir.clone() } else { out_dir.join(&part.name) };
        if parts.len() > 1 {
            println!("\n== {}", part.name);
        }
        let outcome = sweep::execute(part, b.name, &dir, args.no_progress)?;
        if outcome.interrupted {
            eprintln!("flashmux: the findings are not checked on an interrupted run");
            return Ok(outcome.exit_code());
        }
        points.extend(outcome.points);
        results.extend(outcome.results);
    }
    let c = b.conclude(&points, &results, &out_dir)?;
    println!("\n{}", c.text);
    for f in &c.figures {
        println!("figure: {}", f.display());
    }
    println!("checks: {}", c.checks_file.display());
    let failed = c.checks.iter().filter(|c| !c.pass).count();
    if failed > 0 {
        eprintln!("flashmux: {failed} of {} findings did not hold", c.checks.len());
        return Ok(ExitCode::from(EXIT_CHECK_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}
