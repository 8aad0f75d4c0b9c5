//! Paper D's experiment (`experiments/paper-d-mcfq/`): four VMs with weights 10 : 7 : 4 : 1 on
//! one 840 Pro-like drive under CFQ and MCFQ (Figs. 6–9), the motivation of Figs. 1–2, and the
//! bandwidth-window table (Table 1); findings checked, figures drawn.

use super::bundled::{embedded, missing, param, Bundled, Check};
use super::{Experiment, ExperimentError, Point};
use crate::metrics::RunResults;
use crate::report::plot::{write_bar_chart, write_line_chart, BarChart, BarSeries, LineChart, PlotError, Series};
use std::path::{Path, PathBuf};

const DIR: &str = "experiments/paper-d-mcfq";
const BASE: &str = include_str!("../../../../experiments/paper-d-mcfq/base.toml");
const MAIN: &str = include_str!("../../../../experiments/paper-d-mcfq/experiment.toml");
const MOTIVATION: &str = include_str!("../../../../experiments/paper-d-mcfq/motivation.toml");
const WINDOW: &str = include_str!("../../../../experiments/paper-d-mcfq/window.toml");
const QUICK: &str = include_str!("../../../../experiments/paper-d-mcfq/quick.toml");
const QUICK_MOTIVATION: &str = include_str!("../../../../experiments/paper-d-mcfq/quick-motivation.toml");
const QUICK_WINDOW: &str = include_str!("../../../../experiments/paper-d-mcfq/quick-window.toml");
const GUEST: &str = include_str!("../../../../experiments/paper-d-mcfq/guest.toml");
const QUICK_GUEST: &str = include_str!("../../../../experiments/paper-d-mcfq/quick-guest.toml");

pub const BUNDLED: Bundled = Bundled {
    name: "paper-d-mcfq",
    summary: "paper D: CFQ vs MCFQ bandwidth shares of 4 weighted VMs, aged and clean drive (Figs. 1-2, 6-9, Table 1)",
    parts,
    evaluate,
    figures,
};

/// Paper D's Table 1: achieved ratios (TVM = 1) for weights 10 : 7 : 4 : 1, per window.
const PAPER_TABLE1: [(&str, [f64; 4]); 3] =
    [("5s", [8.3, 7.3, 4.4, 1.0]), ("10s", [10.3, 7.6, 4.4, 1.0]), ("20s", [10.8, 8.2, 4.7, 1.0])];

fn parts(quick: bool) -> Result<Vec<Experiment>, ExperimentError> {
    let files = if quick {
        [
            (QUICK, "quick.toml"),
            (QUICK_MOTIVATION, "quick-motivation.toml"),
            (QUICK_WINDOW, "quick-window.toml"),
            (QUICK_GUEST, "quick-guest.toml"),
        ]
    } else {
        [(MAIN, "experiment.toml"), (MOTIVATION, "motivation.toml"), (WINDOW, "window.toml"), (GUEST, "guest.toml")]
    };
    files.iter().map(|(text, file)| embedded(text, &format!("{DIR}/{file}"), BASE, &format!("{DIR}/base.toml"))).collect()
}

/// Each tenant's bandwidth (bytes/s over its measured runtime).
fn bandwidths(r: &RunResults) -> Vec<f64> {
    r.tenants.iter().map(|t| t.bw_bytes_per_sec()).collect()
}

/// Per tenant, achieved share of the bandwidth and ideal (weight) share, over the tenants'
/// common measured interval (`metrics::fairness`); NaN for a tenant without a share.
fn shares(r: &RunResults) -> Vec<(f64, f64)> {
    r.tenants.iter().map(|t| t.share.map_or((f64::NAN, f64::NAN), |s| (s.achieved, s.ideal))).collect()
}

/// Mean over tenants of `|achieved − ideal| / ideal`; `None` when the run defines no shares
/// (a tenant moved nothing, or the tenants never ran together).
fn mean_error(r: &RunResults) -> Option<f64> {
    r.fairness.share_error_mean.filter(|e| e.is_finite())
}

/// Bandwidth shares relative to the least-weighted tenant's (the paper's Table 1 notation).
fn ratios(r: &RunResults) -> Vec<f64> {
    let s = shares(r);
    let tvm = (0..r.tenants.len()).min_by_key(|&t| (r.tenants[t].weight, t)).unwrap_or(0);
    s.iter().map(|(a, _)| a / s[tvm].0).collect()
}

/// A share error for the report; "no share" when undefined.
fn err_text(e: Option<f64>) -> String {
    e.map_or_else(|| "no share".into(), pct)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The main part's runs (the guest part's carry a `kernel` parameter).
fn main_runs<'a>(points: &'a [Point], results: &'a [RunResults]) -> impl Iterator<Item = (&'a Point, &'a RunResults)> {
    points.iter().zip(results).filter(|(p, _)| param(p, "workload").is_some() && param(p, "kernel").is_none())
}

/// The guest part's run for (workload, scheduler): Filebench on ext4 in each VM, aged drive.
fn find_guest<'a>(points: &'a [Point], results: &'a [RunResults], w: &str, sched: &str) -> Option<&'a RunResults> {
    points.iter().zip(results).find_map(|(p, r)| {
        let hit = param(p, "kernel").is_some()
            && param(p, "workload").as_deref() == Some(w)
            && param(p, "scheduler").as_deref() == Some(sched);
        hit.then_some(r)
    })
}

/// The main part's run for (workload, drive, scheduler).
fn find<'a>(points: &'a [Point], results: &'a [RunResults], w: &str, drive: &str, sched: &str) -> Option<(&'a Point, &'a RunResults)> {
    main_runs(points, results).find(|(p, _)| {
        param(p, "workload").as_deref() == Some(w) && param(p, "drive").as_deref() == Some(drive) && param(p, "scheduler").as_deref() == Some(sched)
    })
}

fn workloads(points: &[Point]) -> Vec<String> {
    let mut w: Vec<String> = points.iter().filter_map(|p| param(p, "workload")).collect();
    w.dedup();
    w.sort();
    w.dedup();
    w
}

/// VM1's bandwidth (MB/s) per VM2 block size (KiB), in sweep order, for one drive state.
fn motivation(points: &[Point], results: &[RunResults], drive: &str) -> Vec<(f64, f64)> {
    points
        .iter()
        .zip(results)
        .filter(|(p, _)| param(p, "drive").as_deref() == Some(drive))
        .filter_map(|(p, r)| {
            let bs = param(p, "vm2_bs")?;
            let kib = crate::units::parse_size(&bs).ok()? as f64 / 1024.0;
            Some((kib, bandwidths(r)[0] / 1e6))
        })
        .collect()
}

fn list(v: &[(f64, f64)]) -> String {
    v.iter().map(|(k, b)| format!("{k:.0}K: {b:.1}")).collect::<Vec<_>>().join(", ")
}

fn evaluate(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let mut checks = motivation_checks(points, results);
    checks.extend(main_checks(points, results));
    checks.push(window_check(points, results));
    checks.push(guest_check(points, results));
    checks
}

/// Figs. 6-7 again with each VM's kernel: Filebench's own fileserver and varmail on ext4 in a
/// 1 GiB page cache per VM (docs/EXPERIMENTS.md §7, "With the guest kernel").
fn guest_check(points: &[Point], results: &[RunResults]) -> Check {
    let claim = "with the guest kernel (Filebench on ext4, 1 GiB page cache per VM), aged drive: MCFQ's mean share \
                 error below CFQ's and ≤ 10% on fileserver and varmail (paper: 8%, 2%)";
    let mut measured = Vec::new();
    let mut pass = true;
    for w in ["fileserver", "varmail"] {
        let (Some(c), Some(m)) = (find_guest(points, results, w, "cfq"), find_guest(points, results, w, "mcfq")) else {
            return missing(claim);
        };
        let (ec, em) = (mean_error(c), mean_error(m));
        pass &= matches!((ec, em), (Some(ec), Some(em)) if em < ec && em <= 0.10);
        measured.push(format!("{w} CFQ {} → MCFQ {}", err_text(ec), err_text(em)));
    }
    Check { claim: claim.into(), measured: measured.join("; "), pass }
}

fn motivation_checks(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let mut out = Vec::new();
    let clean = motivation(points, results, "clean");
    let claim = "clean drive: VM1's sequential-write bandwidth stays within 10% across VM2's block sizes (Fig. 1)";
    if clean.len() < 2 {
        out.push(missing(claim));
    } else {
        let (lo, hi) = clean.iter().fold((f64::MAX, 0.0f64), |(l, h), &(_, b)| (l.min(b), h.max(b)));
        let spread = (hi - lo) / hi;
        out.push(Check { claim: claim.into(), measured: format!("VM1 MB/s {}; spread {}", list(&clean), pct(spread)), pass: spread <= 0.10 });
    }
    let aged = motivation(points, results, "aged");
    let claim = "aged drive: VM1's bandwidth falls as VM2's block size grows (Fig. 2): largest block ≤ 90% of smallest, and falling overall";
    if aged.len() < 2 {
        out.push(missing(claim));
    } else {
        let (first, last) = (aged[0].1, aged[aged.len() - 1].1);
        let falls = aged.windows(2).filter(|w| w[1].1 < w[0].1).count();
        let pass = last <= 0.9 * first && 2 * falls >= aged.len() - 1;
        let measured = format!("VM1 MB/s {}; last/first {:.2}; {falls} of {} steps fall", list(&aged), last / first, aged.len() - 1);
        out.push(Check { claim: claim.into(), measured, pass });
    }
    out
}

fn main_checks(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let ws = workloads(points);
    let mut improved = Vec::new();
    let mut ok = !ws.is_empty();
    for w in &ws {
        let (Some(c), Some(m)) = (find(points, results, w, "aged", "cfq"), find(points, results, w, "aged", "mcfq")) else {
            ok = false;
            continue;
        };
        let (ec, em) = (mean_error(c.1), mean_error(m.1));
        match (ec, em) {
            (Some(ec), Some(em)) if ec > 0.05 && em >= ec => ok = false,
            (Some(_), Some(_)) => {}
            _ => ok = false,
        }
        improved.push(format!("{w} CFQ {} → MCFQ {}", err_text(ec), err_text(em)));
    }
    let claim1 = "aged drive: MCFQ's mean share error is below CFQ's for every workload where CFQ's exceeds 5% (Figs. 6-9)";
    let mut out = vec![Check { claim: claim1.into(), measured: improved.join("; "), pass: ok }];
    let claim2 = "aged drive: MCFQ's mean share error ≤ 10% on fileserver and varmail (paper: 8%, 2%)";
    let errs: Vec<Option<f64>> =
        ["fileserver", "varmail"].iter().map(|w| find(points, results, w, "aged", "mcfq").and_then(|(_, r)| mean_error(r))).collect();
    match errs.iter().copied().collect::<Option<Vec<f64>>>() {
        Some(e) => out.push(Check {
            claim: claim2.into(),
            measured: format!("fileserver {}, varmail {}", pct(e[0]), pct(e[1])),
            pass: e.iter().all(|&x| x <= 0.10),
        }),
        None => out.push(missing(claim2)),
    }
    out
}

/// Table 1: the paper chose BW = 10 s as the window that follows the weights best.
fn window_check(points: &[Point], results: &[RunResults]) -> Check {
    let claim = "bandwidth window: BW = 10 s gives the lowest mean share error of the windows run (Table 1)";
    let runs: Vec<(String, f64, Vec<f64>)> = points
        .iter()
        .zip(results)
        .filter_map(|(p, r)| param(p, "window").map(|w| (w, mean_error(r).unwrap_or(f64::NAN), ratios(r))))
        .collect();
    let Some(ten) = runs.iter().find(|(w, ..)| w == "10s") else { return missing(claim) };
    if runs.iter().any(|(_, e, _)| !e.is_finite()) {
        return Check { claim: claim.into(), measured: "a window's run defines no bandwidth shares".into(), pass: false };
    }
    let measured = runs
        .iter()
        .map(|(w, e, r)| {
            let paper = PAPER_TABLE1.iter().find(|(pw, _)| pw == w).map(|(_, v)| format!(" (paper {:?})", v)).unwrap_or_default();
            let ratio: Vec<String> = r.iter().map(|x| format!("{x:.1}")).collect();
            format!("BW {w}: {} error {}{paper}", ratio.join(":"), pct(*e))
        })
        .collect::<Vec<_>>()
        .join("; ");
    Check { claim: claim.into(), measured, pass: runs.iter().all(|(_, e, _)| ten.1 <= *e) }
}

fn figures(points: &[Point], results: &[RunResults], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut paths = Vec::new();
    let series: Vec<Series> = ["clean", "aged"]
        .iter()
        .map(|d| Series { label: format!("{d} drive"), points: motivation(points, results, d) })
        .filter(|s| !s.points.is_empty())
        .collect();
    if !series.is_empty() {
        let chart = LineChart {
            title: "Figs. 1-2: VM1's sequential writes next to VM2's random writes".into(),
            x_label: "VM2 random-write block size (KiB)".into(),
            y_label: "VM1 bandwidth (MB/s)".into(),
            series,
            y_range: None,
            log_x: true,
        };
        paths.extend(write_line_chart(&chart, dir, "fig1-2-motivation")?);
    }
    for w in workloads(points) {
        for drive in ["aged", "clean"] {
            paths.extend(share_figure(points, results, &w, drive, dir)?);
        }
    }
    Ok(paths)
}

/// Figs. 6-9: each VM's share of the bandwidth under CFQ and MCFQ, as bars next to its weight's
/// share.
fn share_figure(points: &[Point], results: &[RunResults], w: &str, drive: &str, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut series = Vec::new();
    let mut categories = Vec::new();
    for sched in ["cfq", "mcfq"] {
        let Some((_, r)) = find(points, results, w, drive, sched) else { continue };
        if series.is_empty() {
            let wsum: u32 = r.tenants.iter().map(|t| t.weight).sum();
            categories = r.tenants.iter().map(|t| format!("{} (weight {})", t.name, t.weight)).collect();
            let ideal = r.tenants.iter().map(|t| t.weight as f64 / wsum.max(1) as f64 * 100.0).collect();
            series.push(BarSeries { label: "ideal (weights)".into(), values: ideal });
        }
        let values = shares(r).iter().map(|&(a, _)| a * 100.0).collect();
        series.push(BarSeries { label: format!("{} (error {})", sched.to_uppercase(), err_text(mean_error(r))), values });
    }
    if series.is_empty() {
        return Ok(Vec::new());
    }
    let chart = BarChart {
        title: format!("{w}, {drive} drive: bandwidth share per VM"),
        x_label: "VM".into(),
        y_label: "share of the bandwidth (%)".into(),
        categories,
        series,
    };
    write_bar_chart(&chart, dir, &format!("shares-{w}-{drive}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_experiments_resolve() {
        for (quick, sizes) in [(false, [20, 16, 3, 4]), (true, [4, 4, 2, 4])] {
            let parts = parts(quick).unwrap();
            let got: Vec<usize> = parts.iter().map(|p| p.points().unwrap().len()).collect();
            assert_eq!(got, sizes);
            for p in parts[0].points().unwrap() {
                let w: Vec<u32> = p.scenario.tenants.iter().map(|t| t.weight).collect();
                assert_eq!(w, [10, 7, 4, 1]);
            }
        }
    }
}
