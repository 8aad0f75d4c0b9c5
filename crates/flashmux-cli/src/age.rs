//! `flashmux age`: precondition a scenario's drive once and save it, for runs and sweep points
//! to load with `[precondition] state_file` instead of aging it each time
//! (`flashmux::device::drive_state`).

use crate::BadArg;
use flashmux::config::Scenario;
use flashmux::sim::Simulator;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Args)]
pub struct AgeArgs {
    /// Scenario file (TOML). Without it, the built-in default scenario's drive.
    scenario: Option<PathBuf>,
    /// Write the preconditioned drive to this file.
    #[arg(long)]
    save: PathBuf,
    /// Master seed (overrides the scenario's): it draws the aging writes.
    #[arg(long)]
    seed: Option<u64>,
    /// Drive state: sequential-fill, aged or workload (overrides the scenario's).
    #[arg(long)]
    precondition: Option<String>,
    /// Fraction of each tenant's region holding data after preconditioning, in (0, 1].
    #[arg(long)]
    fill: Option<f64>,
}

pub fn run(args: AgeArgs) -> anyhow::Result<ExitCode> {
    let mut s = match &args.scenario {
        Some(p) => Scenario::load(p)?,
        None => Scenario::default_scenario(),
    };
    if let Some(seed) = args.seed {
        s.seed = seed;
    }
    crate::set_drive_state(&mut s, args.precondition.as_deref(), args.fill)?;
    if let Some(p) = &s.drive_state {
        return Err(BadArg(format!(
            "the scenario loads its drive from {} (precondition.state_file): there is nothing to age; remove state_file to age the drive",
            p.display()
        ))
        .into());
    }
    if matches!(s.device.kind, flashmux::device::DeviceKind::Null(_)) {
        return Err(BadArg(format!("device '{}' is a null device: it has no flash to age", s.device.preset)).into());
    }
    crate::check_memory(std::slice::from_ref(&s))?;
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))?;
    }
    eprintln!(
        "flashmux: aging the drive: {}, {}, fill {:.0}%, seed {}",
        s.device.preset,
        s.precondition.state.name(),
        s.precondition.fill * 100.0,
        s.seed
    );
    let started = Instant::now();
    let sim = Simulator::new_polling(s, &|| interrupted.load(Ordering::SeqCst))?;
    let aging = started.elapsed();
    if sim.precondition_report().interrupted {
        eprintln!("flashmux: interrupted while aging: nothing saved");
        return Ok(ExitCode::from(crate::EXIT_INTERRUPTED));
    }
    let started = Instant::now();
    let bytes = sim.save_drive_state(&args.save)?;
    println!("precondition: {}", flashmux::report::precondition_summary(sim.precondition_report()));
    println!(
        "saved {} ({:.1} MB) in {:.2} s; aging took {:.2} s",
        args.save.display(),
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        aging.as_secs_f64()
    );
    println!("use it: [precondition] state_file = \"{}\"", args.save.display());
    Ok(ExitCode::SUCCESS)
}
