//! Paper E's experiment (`experiments/paper-e-hwabc/`): containers on an open-channel SSD
//! (Cosmos+ under pblk) under NoSched, Fair, hWA-BC and hWA-BC with the ledger's true GC
//! contributions: sequential vs random writer (Fig. 6), random writer vs sequential reader
//! (Figs. 7-8), and fileserver + webproxy + fio (Fig. 9 / Table 2); findings checked, figures
//! drawn.

use super::bundled::{embedded, missing, param_text, Bundled, Check};
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

pub const BUNDLED: Bundled = Bundled {
    name: "paper-e-hwabc",
    summary: "paper E: NoSched / Fair / hWA-BC budgets on an open-channel SSD: seq vs rand writes, rand write vs seq read, fileserver + webproxy + fio (Figs. 6-9, Table 2)",
    parts,
    evaluate,
    figures,
};

const SCHEDULERS: [&str; 4] = ["none", "fair", "hwabc", "hwabc-oracle"];
const FIG6: &str = "seq-vs-rand-write";
const FIG7: &str = "rand-write-vs-seq-read";
const FIG9: &str = "fileserver-webproxy-fio";

/// Table 2: bandwidth (MB/s) and judged GC contribution (%) under hWA-BC.
const PAPER_TABLE2: [(&str, f64, f64); 3] = [("fileserver", 160.1, 50.7), ("webproxy", 177.9, 30.0), ("fio", 27.9, 19.3)];

fn parts(quick: bool) -> Result<Vec<Experiment>, ExperimentError> {
    let files = if quick { [(QUICK, "quick.toml"), (QUICK_REAL, "quick-realworld.toml")] } else { [(MAIN, "experiment.toml"), (REAL, "realworld.toml")] };
    files.iter().map(|(text, file)| embedded(text, &format!("{DIR}/{file}"), BASE, &format!("{DIR}/base.toml"))).collect()
}

fn param(p: &Point, label: &str) -> Option<String> {
    p.params.iter().find(|(l, _)| l == label).map(|(_, v)| param_text(v))
}

/// The run of a tenant set (the "pair" or "mix" parameter) under a scheduler.
fn find<'a>(points: &'a [Point], results: &'a [RunResults], set: &str, sched: &str) -> Option<&'a RunResults> {
    points.iter().zip(results).find_map(|(p, r)| {
        let s = param(p, "pair").or_else(|| param(p, "mix"))?;
        (s == set && param(p, "scheduler").as_deref() == Some(sched)).then_some(r)
    })
}

/// A tenant's bandwidth (MB/s) over its runtime.
fn bw(r: &RunResults, name: &str) -> f64 {
    r.tenants.iter().find(|t| t.name == name).map_or(f64::NAN, |t| t.bw_bytes_per_sec() / 1e6)
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

fn total(r: &RunResults) -> f64 {
    r.tenants.iter().map(|t| bw(r, &t.name)).sum()
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
    let mut out = Vec::new();
    let claim = "Fig. 9 / Table 2, hWA-BC: webproxy > fileserver > fio in bandwidth (paper: 177.9 > 160.1 > 27.9 MB/s)";
    let Some(r) = find(points, results, FIG9, "hwabc") else {
        return vec![missing(claim), missing("Table 2: judged GC contributions")];
    };
    let (f, w, o) = (bw(r, "fileserver"), bw(r, "webproxy"), bw(r, "fio"));
    out.push(Check { claim: claim.into(), measured: format!("webproxy {w:.1}, fileserver {f:.1}, fio {o:.1} MB/s"), pass: w > f && f > o });
    let claim = "Table 2, hWA-BC: judged GC contribution fileserver > webproxy > fio (paper: 50.7 / 30.0 / 19.3%)";
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
            Check { claim: claim.into(), measured, pass: c[0].0 > c[1].0 && c[1].0 > c[2].0 }
        }
        None => missing(claim),
    });
    out
}

fn figures(points: &[Point], results: &[RunResults], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut paths = Vec::new();
    for (set, fig) in [(FIG6, "fig6"), (FIG7, "fig7"), (FIG9, "fig9")] {
        for s in SCHEDULERS {
            let Some(r) = find(points, results, set, s) else { continue };
            let series = r
                .tenants
                .iter()
                .map(|t| Series {
                    label: t.name.clone(),
                    points: r.timeline.iter().filter(|row| row.tenant == t.name).map(|row| (row.time_s, row.read_mbps + row.write_mbps)).collect(),
                })
                .collect();
            let gc = gc_start(r).map_or_else(|| "no GC".into(), |t| format!("GC from {t:.0} s"));
            let chart = LineChart {
                title: format!("{set} under {s}: throughput over time ({gc})"),
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
    if let Some(r) = find(points, results, FIG9, "hwabc") {
        let names: Vec<&str> = PAPER_TABLE2.iter().map(|(n, ..)| *n).collect();
        let c: Vec<Option<(f64, Option<f64>)>> = names.iter().map(|n| contribution(r, n)).collect();
        if c.iter().all(Option::is_some) {
            let c: Vec<(f64, Option<f64>)> = c.into_iter().flatten().collect();
            let chart = BarChart {
                title: "Table 2: GC contribution judged by hWA-BC, the paper's, and the true share".into(),
                x_label: "container".into(),
                y_label: "share of GC (%)".into(),
                categories: names.iter().map(|n| (*n).to_string()).collect(),
                series: vec![
                    BarSeries { label: "paper (judged)".into(), values: PAPER_TABLE2.iter().map(|p| p.2).collect() },
                    BarSeries { label: "flashmux hWA-BC (judged)".into(), values: c.iter().map(|x| x.0 * 100.0).collect() },
                    BarSeries { label: "true (units GC moved)".into(), values: c.iter().map(|x| x.1.map_or(f64::NAN, |a| a * 100.0)).collect() },
                ],
            };
            paths.extend(write_bar_chart(&chart, dir, "table2-gc-contribution")?);
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_experiments_resolve() {
        for quick in [false, true] {
            let parts = parts(quick).unwrap();
            let sizes: Vec<usize> = parts.iter().map(|p| p.points().unwrap().len()).collect();
            assert_eq!(sizes, [8, 4]);
            for p in parts.iter().flat_map(|p| p.points().unwrap()) {
                assert_eq!(p.scenario.device.preset, "cosmos");
                assert!(p.scenario.host.scheduler.name() == "none" || p.scenario.host.scheduler.needs_host_ftl());
            }
        }
    }
}
