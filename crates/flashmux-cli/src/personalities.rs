//! `flashmux personalities`: the built-in workloads a scenario's tenant can name with
//! `personality = "..."` — listed, one's fio job printed, or all measured against the papers.

use crate::BadArg;
use flashmux::workload::personality::{self, Personality};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct PersonalitiesArgs {
    /// Print this personality's fio job (what runs; copy it to change it).
    name: Option<String>,
    /// Generate requests of each and compare their mix with what the papers report.
    #[arg(long, conflicts_with = "name")]
    measure: bool,
    /// Requests per personality with --measure.
    #[arg(long, default_value_t = 200_000, requires = "measure")]
    requests: u64,
}

pub fn run(args: PersonalitiesArgs) -> anyhow::Result<ExitCode> {
    match &args.name {
        Some(name) => {
            let job = personality::job_text(name).ok_or_else(|| {
                BadArg(format!("unknown personality '{name}': expected one of {}", personality::names()))
            })?;
            print!("{job}");
        }
        None if args.measure => print_measured(args.requests)?,
        None => {
            for p in personality::ALL {
                println!("{:<11} {}", p.name, p.summary);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Target and measured write/read ratio and mean request size, one line per personality.
fn print_measured(requests: u64) -> anyhow::Result<()> {
    if requests == 0 {
        return Err(BadArg("--requests: must be at least 1".into()).into());
    }
    println!("{requests} requests each (seed 1); W/R = write requests per read request");
    println!(
        "{:<11} {:>10} {:>10} {:>10} {:>10}  source",
        "personality", "W/R", "target", "mean KiB", "target"
    );
    for p in personality::ALL {
        println!("{}", measured_row(p, requests)?);
    }
    Ok(())
}

fn measured_row(p: &Personality, requests: u64) -> anyhow::Result<String> {
    let m = p.measure(requests, 1)?;
    let t = &p.target;
    let mean_target = t.mean_kib.map_or("-".to_string(), |v| v.to_string());
    Ok(format!(
        "{:<11} {:>10} {:>10} {:>10.2} {:>10}  {}",
        p.name,
        three_digits(m.write_read()),
        t.write_read,
        m.mean_kib(),
        mean_target,
        t.source
    ))
}

/// Three significant digits for ratios from 0.1 to 100.
fn three_digits(v: f64) -> String {
    let decimals = if v >= 10.0 { 1 } else if v >= 1.0 { 2 } else { 3 };
    format!("{v:.decimals$}")
}
