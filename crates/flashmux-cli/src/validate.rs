//! `flashmux validate`: each device preset against the published figures of the drive it
//! resembles, and greedy GC against the LRW closed form; a table with the error of each row in %
//! and PASS/FAIL against the tolerance (`flashmux::experiment::validate`).

use flashmux::experiment::validate::{analytic, measure, published, Run, TOLERANCE};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ValidateArgs {
    /// Only this preset's rows (x25e, 840pro, tlc-nvme).
    #[arg(long)]
    preset: Option<String>,
    /// A tenth of the simulated time per row (what the test suite runs).
    #[arg(long)]
    quick: bool,
    /// Exit with status 1 if a row fails.
    #[arg(long)]
    strict: bool,
    /// Also write the table as CSV to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
}

pub fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let rows: Vec<_> =
        published().into_iter().filter(|p| args.preset.as_deref().is_none_or(|n| n == p.preset)).collect();
    if rows.is_empty() {
        let names: Vec<&str> =
            published().iter().map(|p| p.preset).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        eprintln!(
            "flashmux: --preset {}: no published figures for it; presets with figures: {}",
            args.preset.unwrap_or_default(),
            names.join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    let run = if args.quick { Run::Quick } else { Run::Full };
    let tol = TOLERANCE * 100.0;
    println!("flashmux validate: presets against their drives' published figures (tolerance {tol:.0}%)");
    if args.quick {
        println!("(--quick: a tenth of the simulated time; the write figures are not yet in steady state)");
    }
    println!(
        "{:<9} {:<46} {:>10} {:>10} {:>8}  {:<4}  {:<10}  source",
        "preset", "figure", "published", "flashmux", "error", "", "row"
    );
    let mut csv = String::from("preset,figure,published,flashmux,error_pct,pass,calibrates,source\n");
    let (mut failed, mut predicted, mut predicted_pass) = (0, 0, 0);
    for p in &rows {
        let r = measure(p, run)?;
        let verdict = if r.pass { "PASS" } else { "FAIL" };
        failed += usize::from(!r.pass);
        if p.calibrates.is_none() {
            predicted += 1;
            predicted_pass += usize::from(r.pass);
        }
        println!(
            "{:<9} {:<46} {:>10.1} {:>10.1} {:>+7.1}%  {verdict}  {:<10}  {}",
            p.preset,
            p.probe.describe(),
            p.value,
            r.measured,
            r.error * 100.0,
            if p.calibrates.is_some() { "calibrated" } else { "predicted" },
            p.source
        );
        csv += &format!(
            "{},{},{:.3},{:.3},{:.2},{},{},\"{}\"\n",
            p.preset,
            p.probe.describe(),
            p.value,
            r.measured,
            r.error * 100.0,
            r.pass,
            p.calibrates.unwrap_or(""),
            p.source
        );
    }
    if args.preset.is_none() {
        println!("\nanalytic: greedy GC's steady-state WAF under uniform random writes vs the LRW closed form");
        for op in [0.07, 0.15, 0.3] {
            let a = analytic(op);
            failed += usize::from(!a.pass);
            let verdict = if a.pass { "PASS" } else { "FAIL" };
            let err = (a.greedy_waf - a.lrw_waf) / a.lrw_waf * 100.0;
            println!(
                "OP {:>4.0}%: greedy {:.3}, LRW {:.3} ({err:+.1}%)  {verdict}",
                op * 100.0,
                a.greedy_waf,
                a.lrw_waf
            );
            csv += &format!(
                "analytic,greedy WAF at OP {:.0}%,{:.4},{:.4},{err:.2},{},,LRW closed form\n",
                op * 100.0,
                a.lrw_waf,
                a.greedy_waf,
                a.pass
            );
        }
    }
    let total = rows.len() + if args.preset.is_none() { 3 } else { 0 };
    println!("\n{} of {total} rows within tolerance ({predicted_pass} of the {predicted} predicted figures; the others set a parameter of their preset)", total - failed);
    if let Some(path) = &args.csv {
        let mut f = std::fs::File::create(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        f.write_all(csv.as_bytes()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    Ok(if args.strict && failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
