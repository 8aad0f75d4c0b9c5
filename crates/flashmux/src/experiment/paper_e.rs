//! Paper E's experiment (`experiments/paper-e-hwabc/`): containers on an open-channel SSD
//! (Cosmos+ under pblk) under NoSched, Fair, hWA-BC and hWA-BC with the ledger's true GC
//! contributions: sequential vs random writer (Fig. 6), random writer vs sequential reader
//! (Figs. 7-8), and fileserver + webproxy + fio (Fig. 9 / Table 2), the last also with the
//! containers' kernel in the model (Filebench on ext4 over one shared page cache, the points with
//! a `kernel` parameter); findings checked, figures drawn.

use super::bundled::{bw, embedded, missing, param, total, Bundled, Check};
use super::{Experiment, ExperimentError, Point};
use crate::metrics::RunResults;
use crate::report::plot::{write_bar_chart, write_line_chart, BarChart, BarSeries, LineChart, PlotError, Series};
use std::path::{Path, PathBuf};

const DIR: &str = "experiments/paper-e-hwabc";
const BASE: &str = include_str!("../../../../experiments/paper-e-hwabc/base.toml");
const MAIN: &str = include_str!("../../../../experiments/paper-e-hwabc/experiment.toml");
const REAL: &str = include_str!("../../../../experiments/paper-e-hwabc/realworld.toml");
const QUICK: &str = include_str!("../../../../experiments/paper-e-hwabc/quick.toml");
const QUICK_REAL: &str = include_str!("../../../../experiments/paper-e-hwabc/quick-realworld.toml");
const GUEST: &str = include_str!("../../../../experiments/paper-e-hwabc/guest.toml");
const QUICK_GUEST: &str = include_str!("../../../../experiments/paper-e-hwabc/quick-guest.toml");

pub const BUNDLED: Bundled = Bundled {
    name: "paper-e-hwabc",
    summary: "paper E: NoSched / Fair / hWA-BC budgets on an open-channel SSD: seq vs rand writes, rand write vs seq read, fileserver + webproxy + fio, also on ext4 (Figs. 6-9, Table 2)",
    parts,
    evaluate,
    figures,
};

const SCHEDULERS: [&str; 4] = ["none", "fair", "hwabc", "hwabc-oracle"];
const FIG6: &str = "seq-vs-rand-write";
const FIG7: &str = "rand-write-vs-seq-read";
const FIG9: &str = "fileserver-webproxy-fio";

/// How the kernel part's claims begin (docs/EXPERIMENTS.md §8, "With the kernel").
const KERNEL: &str = "with the kernel (Filebench on ext4, one shared page cache)";

/// Table 2: bandwidth (MB/s) and judged GC contribution (%) under hWA-BC.
const PAPER_TABLE2: [(&str, f64, f64); 3] = [("fileserver", 160.1, 50.7), ("webproxy", 177.9, 30.0), ("fio", 27.9, 19.3)];

fn parts(quick: bool) -> Result<Vec<Experiment>, ExperimentError> {
    let files = if quick {
        [(QUICK, "quick.toml"), (QUICK_REAL, "quick-realworld.toml"), (QUICK_GUEST, "quick-guest.toml")]
    } else {
        [(MAIN, "experiment.toml"), (REAL, "realworld.toml"), (GUEST, "guest.toml")]
    };
    files.iter().map(|(text, file)| embedded(text, &format!("{DIR}/{file}"), BASE, &format!("{DIR}/base.toml"))).collect()
}

/// The run of a tenant set (the "pair" or "mix" parameter) under a scheduler, without the
/// kernel (the points without a `kernel` parameter).
fn find<'a>(points: &'a [Point], results: &'a [RunResults], set: &str, sched: &str) -> Option<&'a RunResults> {
    find_in(points, results, set, sched, false)
}

/// The run of a tenant set under a scheduler, of the kernel part (`guest`: the points with a
/// `kernel` parameter) or of the others.
fn find_in<'a>(points: &'a [Point], results: &'a [RunResults], set: &str, sched: &str, guest: bool) -> Option<&'a RunResults> {
    points.iter().zip(results).find_map(|(p, r)| {
        let s = param(p, "pair").or_else(|| param(p, "mix"))?;
        let hit = s == set && param(p, "scheduler").as_deref() == Some(sched) && param(p, "kernel").is_some() == guest;
        hit.then_some(r)
    })
}

/// When GC first moved data: the start of the first timeline interval with GC moves.
fn gc_start(r: &RunResults) -> Option<f64> {
    r.timeline.iter().find(|row| row.gc_units_moved > 0).map(|row| row.time_s)
}

/// A tenant's mean bandwidth (MB/s) over the timeline intervals wholly before (`before`) or
/// from (`!before`) time `t0`.
fn bw_span(r: &RunResults, name: &str, t0: f64, before: bool) -> f64 {
    let v: Vec<f64> = r
        .timeline
        .iter()
        .filter(|row| row.tenant == name && if before { row.time_s + row.interval_s <= t0 } else { row.time_s >= t0 })
        .map(|row| row.read_mbps + row.write_mbps)
        .collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The judged (GC cost charged) and true (units moved) share of a tenant, if judged.
fn contribution(r: &RunResults, name: &str) -> Option<(f64, Option<f64>)> {
    let i = r.tenants.iter().position(|t| t.name == name)?;
    r.gc_contributions().map(|c| (c[i].estimated, c[i].actual))
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn evaluate(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let mut out = fig6_checks(points, results);
    out.extend(fig7_checks(points, results));
    out.extend(fig9_checks(points, results));
    out.extend(guest_checks(points, results));
    out
}

fn fig6_checks(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let mut out = Vec::new();
    let get = |s: &str| find(points, results, FIG6, s);
    let claim = "Fig. 6, NoSched: the sequential writer gets less than the random one";
    out.push(match get("none") {
        Some(r) => Check {
            claim: claim.into(),
            measured: format!("seq {:.1} MB/s, rand {:.1} MB/s", bw(r, "seq"), bw(r, "rand")),
            pass: bw(r, "seq") < bw(r, "rand"),
        },
        None => missing(claim),
    });
    let claim = "Fig. 6, Fair: both writers within 10% of each other";
    out.push(match get("fair") {
        Some(r) => {
            let (s, q) = (bw(r, "seq"), bw(r, "rand"));
            Check { claim: claim.into(), measured: format!("seq {s:.1} MB/s, rand {q:.1} MB/s"), pass: (s - q).abs() <= 0.1 * s.max(q) }
        }
        None => missing(claim),
    });
    let claim = "Fig. 6, hWA-BC: after GC starts the sequential writer gets more than the random one";
    out.push(match get("hwabc") {
        Some(r) => match gc_start(r) {
            Some(t0) => {
                let (s, q) = (bw_span(r, "seq", t0, false), bw_span(r, "rand", t0, false));
                Check { claim: claim.into(), measured: format!("from {t0:.0} s: seq {s:.1} MB/s, rand {q:.1} MB/s"), pass: s > q }
            }
            None => Check { claim: claim.into(), measured: "GC never ran".into(), pass: false },
        },
        None => missing(claim),
    });
    let claim = "Fig. 6, hWA-BC: GC cost charged about 10% to the sequential writer, 90% to the random one (±10 points)";
    let judged = |s: &str| get(s).and_then(|r| contribution(r, "seq"));
    out.push(match judged("hwabc") {
        Some((est, actual)) => {
            let oracle = judged("hwabc-oracle").map_or_else(|| "-".into(), |(e, _)| pct(e));
            Check {
                claim: claim.into(),
                measured: format!(
                    "sequential writer charged {} (true share of GC moves {}; hwabc-oracle charged it {oracle})",
                    pct(est),
                    actual.map_or_else(|| "-".into(), pct)
                ),
                pass: (est - 0.10).abs() <= 0.10,
            }
        }
        None => missing(claim),
    });
    out
}

fn fig7_checks(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let mut out = Vec::new();
    let get = |s: &str| find(points, results, FIG7, s);
    let order = |s: &str, label: &str, writer_wins: bool| {
        let claim = if writer_wins {
            format!("Figs. 7-8, {label}: the writer gets more than the reader (RWB inserts complete at once)")
        } else {
            format!("Figs. 7-8, {label}: the reader gets more than the writer (reads cost less)")
        };
        match get(s) {
            Some(r) => {
                let (w, rd) = (bw(r, "writer"), bw(r, "reader"));
                Check { claim, measured: format!("writer {w:.1} MB/s, reader {rd:.1} MB/s"), pass: if writer_wins { w > rd } else { rd > w } }
            }
            None => missing(&claim),
        }
    };
    out.push(order("none", "NoSched", true));
    out.push(order("fair", "Fair", false));
    out.push(order("hwabc", "hWA-BC", false));
    let claim = "Figs. 7-8, hWA-BC: the reader keeps ≥ 80% of its pre-GC throughput after GC starts";
    out.push(match get("hwabc") {
        Some(r) => match gc_start(r) {
            Some(t0) => {
                let (pre, post) = (bw_span(r, "reader", t0, true), bw_span(r, "reader", t0, false));
                let fair = get("fair").map_or_else(String::new, |f| {
                    format!("; Fair: {:.1} → {:.1}", bw_span(f, "reader", t0, true), bw_span(f, "reader", t0, false))
                });
                Check {
                    claim: claim.into(),
                    measured: format!("reader before GC ({t0:.0} s) {pre:.1} MB/s, after {post:.1} MB/s ({}){fair}", pct(post / pre)),
                    pass: post >= 0.8 * pre,
                }
            }
            None => Check { claim: claim.into(), measured: "GC never ran".into(), pass: false },
        },
        None => missing(claim),
    });
    let claim = "Fig. 8: total bandwidth of Fair and of hWA-BC ≥ NoSched's";
    out.push(match (get("none"), get("fair"), get("hwabc")) {
        (Some(n), Some(f), Some(h)) => Check {
            claim: claim.into(),
            measured: format!("NoSched {:.1}, Fair {:.1}, hWA-BC {:.1} MB/s", total(n), total(f), total(h)),
            pass: total(f) >= total(n) && total(h) >= total(n),
        },
        _ => missing(claim),
    });
    out
}

fn fig9_checks(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    table2_checks(find(points, results, FIG9, "hwabc"), "")
}

/// Fig. 9 / Table 2 with the kernel: the same two checks on the kernel part's hWA-BC run, then
/// what Fig. 9 says of NoSched and Fair.
fn guest_checks(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let get = |s: &str| find_in(points, results, FIG9, s, true);
    let mut out = table2_checks(get("hwabc"), &format!("{KERNEL}, "));
    let claim = format!("{KERNEL}, Fig. 9, NoSched: fio gets less than fileserver and webproxy (paper: fio lowest, all three interfere)");
    out.push(match get("none") {
        Some(r) => {
            let (f, w, o) = (bw(r, "fileserver"), bw(r, "webproxy"), bw(r, "fio"));
            Check { claim, measured: format!("fileserver {f:.1}, webproxy {w:.1}, fio {o:.1} MB/s"), pass: o < f && o < w }
        }
        None => missing(&claim),
    });
    let claim = format!(
        "{KERNEL}, Fig. 9, Fair: after GC starts webproxy and fio get less than fileserver (paper: webproxy, though it reads more, far below)"
    );
    out.push(match get("fair") {
        Some(r) => match gc_start(r) {
            Some(t0) => {
                let [f, w, o] = ["fileserver", "webproxy", "fio"].map(|n| bw_span(r, n, t0, false));
                let run = format!("{:.1} / {:.1} / {:.1}", bw(r, "fileserver"), bw(r, "webproxy"), bw(r, "fio"));
                Check {
                    claim,
                    measured: format!("from {t0:.0} s: fileserver {f:.1}, webproxy {w:.1}, fio {o:.1} MB/s (run: {run})"),
                    pass: w < f && o < f,
                }
            }
            None => Check { claim, measured: "GC never ran".into(), pass: false },
        },
        None => missing(&claim),
    });
    out
}

/// Fig. 9's bandwidth order and Table 2's judged GC contributions, on the mix's hWA-BC run;
/// `prefix` begins each claim.
fn table2_checks(r: Option<&RunResults>, prefix: &str) -> Vec<Check> {
    let order = format!("{prefix}Fig. 9 / Table 2, hWA-BC: webproxy > fileserver > fio in bandwidth (paper: 177.9 > 160.1 > 27.9 MB/s)");
    let judged = format!("{prefix}Table 2, hWA-BC: judged GC contribution fileserver > webproxy > fio (paper: 50.7 / 30.0 / 19.3%)");
    let Some(r) = r else {
        return vec![missing(&order), missing(&judged)];
    };
    let mut out = Vec::new();
    let (f, w, o) = (bw(r, "fileserver"), bw(r, "webproxy"), bw(r, "fio"));
    out.push(Check { claim: order, measured: format!("webproxy {w:.1}, fileserver {f:.1}, fio {o:.1} MB/s"), pass: w > f && f > o });
    let c: Vec<Option<(f64, Option<f64>)>> = PAPER_TABLE2.iter().map(|(n, ..)| contribution(r, n)).collect();
    out.push(match c.iter().copied().collect::<Option<Vec<_>>>() {
        Some(c) => {
            let measured = PAPER_TABLE2
                .iter()
                .zip(&c)
                .map(|((n, _, paper), (est, actual))| {
                    format!("{n} judged {} (paper {paper:.1}%, true {})", pct(*est), actual.map_or_else(|| "-".into(), pct))
                })
                .collect::<Vec<_>>()
                .join("; ");
            Check { claim: judged, measured, pass: c[0].0 > c[1].0 && c[1].0 > c[2].0 }
        }
        None => missing(&judged),
    });
    out
}

fn figures(points: &[Point], results: &[RunResults], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut paths = Vec::new();
    for (set, fig, guest) in [(FIG6, "fig6", false), (FIG7, "fig7", false), (FIG9, "fig9", false), (FIG9, "fig9-kernel", true)] {
        for s in SCHEDULERS {
            let Some(r) = find_in(points, results, set, s, guest) else { continue };
            let series = r
                .tenants
                .iter()
                .map(|t| Series {
                    label: t.name.clone(),
                    points: r.timeline.iter().filter(|row| row.tenant == t.name).map(|row| (row.time_s, row.read_mbps + row.write_mbps)).collect(),
                })
                .collect();
            let gc = gc_start(r).map_or_else(|| "no GC".into(), |t| format!("GC from {t:.0} s"));
            let kernel = if guest { " with the kernel" } else { "" };
            let chart = LineChart {
                title: format!("{set}{kernel} under {s}: throughput over time ({gc})"),
                x_label: "time (s)".into(),
                y_label: "throughput (MB/s)".into(),
                series,
                y_range: None,
                log_x: false,
            };
            paths.extend(write_line_chart(&chart, dir, &format!("{fig}-{s}"))?);
        }
    }
    // Fig. 8: each workload's mean bandwidth per scheduler.
    let runs: Vec<(&str, &RunResults)> = SCHEDULERS.iter().filter_map(|&s| find(points, results, FIG7, s).map(|r| (s, r))).collect();
    if !runs.is_empty() {
        let series = ["writer", "reader"].iter().map(|n| BarSeries { label: (*n).into(), values: runs.iter().map(|(_, r)| bw(r, n)).collect() }).collect();
        let chart = BarChart {
            title: "Fig. 8: random writer and sequential reader, mean bandwidth".into(),
            x_label: "scheduler".into(),
            y_label: "bandwidth (MB/s)".into(),
            categories: runs.iter().map(|(s, _)| (*s).to_string()).collect(),
            series,
        };
        paths.extend(write_bar_chart(&chart, dir, "fig8-bandwidth")?);
    }
    // Table 2: judged contributions next to the paper's and the ledger's.
    for (guest, file) in [(false, "table2-gc-contribution"), (true, "table2-kernel-gc-contribution")] {
        if let Some(chart) = find_in(points, results, FIG9, "hwabc", guest).and_then(|r| table2_chart(r, guest)) {
            paths.extend(write_bar_chart(&chart, dir, file)?);
        }
    }
    Ok(paths)
}

/// Table 2's chart for the mix's hWA-BC run: the judged contributions next to the paper's and
/// the ledger's; `None` when hWA-BC judged none.
fn table2_chart(r: &RunResults, guest: bool) -> Option<BarChart> {
    let names: Vec<&str> = PAPER_TABLE2.iter().map(|(n, ..)| *n).collect();
    let c: Vec<(f64, Option<f64>)> = names.iter().map(|n| contribution(r, n)).collect::<Option<_>>()?;
    let kernel = if guest { ", with the kernel" } else { "" };
    Some(BarChart {
        title: format!("Table 2{kernel}: GC contribution judged by hWA-BC, the paper's, and the true share"),
        x_label: "container".into(),
        y_label: "share of GC (%)".into(),
        categories: names.iter().map(|n| (*n).to_string()).collect(),
        series: vec![
            BarSeries { label: "paper (judged)".into(), values: PAPER_TABLE2.iter().map(|p| p.2).collect() },
            BarSeries { label: "flashmux hWA-BC (judged)".into(), values: c.iter().map(|x| x.0 * 100.0).collect() },
            BarSeries { label: "true (units GC moved)".into(), values: c.iter().map(|x| x.1.map_or(f64::NAN, |a| a * 100.0)).collect() },
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_experiments_resolve() {
        for quick in [false, true] {
            let parts = parts(quick).unwrap();
            let sizes: Vec<usize> = parts.iter().map(|p| p.points().unwrap().len()).collect();
            assert_eq!(sizes, [8, 4, 4]);
            for (part, p) in parts.iter().enumerate().flat_map(|(i, p)| p.points().unwrap().into_iter().map(move |p| (i, p))) {
                assert_eq!(p.scenario.device.preset, "cosmos");
                assert!(p.scenario.host.scheduler.name() == "none" || p.scenario.host.scheduler.needs_host_ftl());
                // Only the kernel part's points carry the `kernel` parameter that keeps them
                // apart: one kernel the containers share, ext4 mounted with discard.
                let kernel = p.scenario.kernel.as_ref();
                assert_eq!(param(&p, "kernel").is_some(), part == 2, "{}", p.describe());
                assert_eq!(kernel.is_some(), part == 2, "{}", p.describe());
                if let Some(k) = kernel {
                    assert!(!k.per_tenant && k.discard && k.filesystem == crate::kernel::kernels::Filesystem::Ext4);
                    assert_eq!(param(&p, "mix").as_deref(), Some(FIG9));
                }
            }
        }
    }
}
