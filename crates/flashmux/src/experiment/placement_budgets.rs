//! Placement against budgets (`experiments/placement-vs-budgets/`): paper E's two pairs of
//! tenants on a drive that runs its own FTL and offers FDP, instead of the open-channel one,
//! under NoSched, Fair, hWA-BC and hWA-BC with the ledger's true contributions (`hwabc-oracle`,
//! "oracle" in the figures), with every write through one reclaim unit handle or each
//! tenant's through its own. The budget schedulers see GC through FDP's statistics log page
//! (`GcSignal::BlocksErased`). Which of placement, budgets or both serves the tenants best is
//! reported as measured (docs/EXPERIMENTS.md §12); what is checked is what the sources claim:
//! placement's lower write amplification and isolation (Micron, CacheLib), and paper E's
//! findings for hWA-BC, now on this drive.

use super::bundled::{bw, missing, param, total, variant, Bundled, Check};
use super::{Experiment, ExperimentError, Point};
use crate::metrics::RunResults;
use crate::report::plot::{write_bar_chart, BarChart, BarSeries, PlotError};
use std::path::{Path, PathBuf};

const EXPERIMENT: &str = include_str!("../../../../experiments/placement-vs-budgets/experiment.toml");
const QUICK: &str = include_str!("../../../../experiments/placement-vs-budgets/quick.toml");
const BASE: &str = include_str!("../../../../experiments/placement-vs-budgets/base.toml");

pub const BUNDLED: Bundled = Bundled {
    name: "placement-vs-budgets",
    summary: "data placement against budget schedulers: paper E's pairs on an FDP drive under NoSched / Fair / hWA-BC (and its oracle), one handle or a handle per tenant",
    parts,
    evaluate,
    figures,
};

/// The pairs, as paper E's Figs. 6 and 7.
const FIG6: &str = "seq-vs-rand-write";
const FIG7: &str = "rand-write-vs-seq-read";
const PAIRS: [&str; 2] = [FIG6, FIG7];
pub const SCHEDULERS: [&str; 4] = ["none", "fair", "hwabc", "hwabc-oracle"];
pub const PLACEMENTS: [&str; 2] = ["shared", "per-tenant"];

fn parts(quick: bool) -> Result<Vec<Experiment>, ExperimentError> {
    variant("placement-vs-budgets", quick, EXPERIMENT, QUICK, BASE)
}

/// The run of `pair` under `sched` with `placement`.
fn find<'a>(points: &[Point], results: &'a [RunResults], pair: &str, sched: &str, placement: &str) -> Option<&'a RunResults> {
    points.iter().zip(results).find_map(|(p, r)| {
        let hit = param(p, "pair").as_deref() == Some(pair)
            && param(p, "scheduler").as_deref() == Some(sched)
            && param(p, "placement").as_deref() == Some(placement);
        hit.then_some(r)
    })
}

fn waf(r: &RunResults) -> f64 {
    r.device.waf.unwrap_or(f64::NAN)
}

/// Units GC moved from a tenant's data.
fn moved(r: &RunResults, name: &str) -> u64 {
    r.tenants.iter().find(|t| t.name == name).map_or(0, |t| t.gc_units_moved)
}

/// hWA-BC's judged share of GC for a tenant, if it charged any.
fn judged(r: &RunResults, name: &str) -> Option<f64> {
    let i = r.tenants.iter().position(|t| t.name == name)?;
    r.gc_contributions().map(|c| c[i].estimated)
}

/// Whether hWA-BC said it never learned GC-free prices (`Budget::warnings`).
fn never_learned(r: &RunResults) -> bool {
    r.warnings.iter().any(|w| w.contains("GC-free windows"))
}

/// A check over both placements: `f` gives (pass, measured) for one placement's runs.
fn both(claim: &str, f: &dyn Fn(&str) -> Option<(bool, String)>) -> Check {
    let mut pass = true;
    let mut text = Vec::new();
    for pl in PLACEMENTS {
        match f(pl) {
            Some((ok, t)) => {
                pass &= ok;
                text.push(format!("{pl}: {t}"));
            }
            None => return missing(claim),
        }
    }
    Check { claim: claim.into(), measured: text.join("; "), pass }
}

fn evaluate(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let get = |pair: &str, s: &str, pl: &str| find(points, results, pair, s, pl);
    let mut out = Vec::new();
    // Placement alone (NoSched), seq vs rand writer: the published direction.
    let claim = "a handle per tenant lowers the drive's WAF for a sequential and a random writer under NoSched, and their bandwidth together is at least as high (Micron: four writers 1.6 -> 1.02; CacheLib: 1.22 -> 1.03) (shared -> per-tenant)";
    out.push(match (get(FIG6, "none", "shared"), get(FIG6, "none", "per-tenant")) {
        (Some(a), Some(b)) => Check {
            claim: claim.into(),
            measured: format!("WAF {:.3} -> {:.3}; {:.1} -> {:.1} MB/s", waf(a), waf(b), total(a), total(b)),
            pass: waf(b) < waf(a) && total(b) >= total(a),
        },
        _ => missing(claim),
    });
    // Isolation: the reader never writes, so with its own handle no block holds its data and
    // the writer's, and GC, which takes the least valid blocks, never moves it.
    let claim = "with a handle per tenant GC never moves the sequential reader's data, under every scheduler (its blocks hold only its data, never overwritten); with one handle it may (units moved, shared -> per-tenant)";
    let mut text = Vec::new();
    let mut pass = true;
    for s in SCHEDULERS {
        match (get(FIG7, s, "shared"), get(FIG7, s, "per-tenant")) {
            (Some(a), Some(b)) => {
                pass &= moved(b, "reader") == 0;
                text.push(format!("{s} {} -> {}", moved(a, "reader"), moved(b, "reader")));
            }
            _ => pass = false,
        }
    }
    out.push(if text.len() == SCHEDULERS.len() { Check { claim: claim.into(), measured: text.join("; "), pass } } else { missing(claim) });
    // hWA-BC on this drive: it learns GC-free prices from the erase counts and charges GC by
    // contribution as on pblk.
    out.push(both(
        "hWA-BC, seeing GC only through FDP's statistics log page (media bytes erased), learns GC-free prices and charges the random writer at least 90% of GC, as paper E's 90% on pblk (judged share of the random writer)",
        &|pl| {
            let r = get(FIG6, "hwabc", pl)?;
            let j = judged(r, "rand");
            let text = match j {
                Some(j) => format!("{:.1}%{}", j * 100.0, if never_learned(r) { ", no GC-free prices" } else { "" }),
                None => "no GC charged".into(),
            };
            Some((j.is_some_and(|j| j >= 0.9) && !never_learned(r), text))
        },
    ));
    out.push(both(
        "paper E's Fig. 6 on this drive: hWA-BC gives the sequential writer more than Fair does (seq MB/s, Fair -> hWA-BC)",
        &|pl| {
            let (f, h) = (get(FIG6, "fair", pl)?, get(FIG6, "hwabc", pl)?);
            Some((bw(h, "seq") > bw(f, "seq"), format!("{:.1} -> {:.1}", bw(f, "seq"), bw(h, "seq"))))
        },
    ));
    out.push(both("paper E's Figs. 7-8 on this drive: under hWA-BC the sequential reader gets more than the random writer (reader / writer MB/s)", &|pl| {
        let h = get(FIG7, "hwabc", pl)?;
        Some((bw(h, "reader") > bw(h, "writer"), format!("{:.1} / {:.1}", bw(h, "reader"), bw(h, "writer"))))
    }));
    out.push(both(
        "paper E's Fig. 8 on this drive: hWA-BC's total bandwidth is at least NoSched's, in both pairs (MB/s, NoSched -> hWA-BC, Fig. 6 pair; Fig. 7 pair)",
        &|pl| {
            let mut ok = true;
            let mut t = Vec::new();
            for pair in PAIRS {
                let (n, h) = (get(pair, "none", pl)?, get(pair, "hwabc", pl)?);
                ok &= total(h) >= total(n);
                t.push(format!("{:.1} -> {:.1}", total(n), total(h)));
            }
            Some((ok, t.join(", ")))
        },
    ));
    out
}

/// The six configurations, in the figures' order.
fn configs() -> Vec<(&'static str, &'static str, String)> {
    SCHEDULERS
        .iter()
        .flat_map(|&s| {
            let short = s.strip_prefix("hwabc-").unwrap_or(s);
            PLACEMENTS.iter().map(move |&pl| (s, pl, if pl == "shared" { short.to_string() } else { format!("{short}+FDP") }))
        })
        .collect()
}

fn figures(points: &[Point], results: &[RunResults], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let configs = configs();
    let categories: Vec<String> = configs.iter().map(|c| c.2.clone()).collect();
    let mut paths = Vec::new();
    for (pair, tenants) in [(FIG6, ["seq", "rand"]), (FIG7, ["writer", "reader"])] {
        let chart = BarChart {
            title: format!("{pair}: bandwidth per tenant"),
            x_label: "scheduler (+FDP: a handle per tenant)".into(),
            y_label: "MB/s".into(),
            categories: categories.clone(),
            series: tenants
                .iter()
                .map(|t| BarSeries {
                    label: (*t).to_string(),
                    values: configs.iter().map(|(s, pl, _)| find(points, results, pair, s, pl).map_or(f64::NAN, |r| bw(r, t))).collect(),
                })
                .collect(),
        };
        paths.extend(write_bar_chart(&chart, dir, &format!("{pair}-bandwidth"))?);
    }
    let by_pair = |title: &str, y: &str, f: &dyn Fn(&RunResults) -> f64| BarChart {
        title: title.into(),
        x_label: "scheduler (+FDP: a handle per tenant)".into(),
        y_label: y.into(),
        categories: categories.clone(),
        series: PAIRS
            .iter()
            .map(|pair| BarSeries {
                label: (*pair).to_string(),
                values: configs.iter().map(|(s, pl, _)| find(points, results, pair, s, pl).map_or(f64::NAN, f)).collect(),
            })
            .collect(),
    };
    paths.extend(write_bar_chart(&by_pair("Bandwidth, both tenants", "MB/s", &total), dir, "total-bandwidth")?);
    paths.extend(write_bar_chart(&by_pair("The drive's write amplification", "WAF", &waf), dir, "waf")?);
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceKind;

    #[test]
    fn the_bundled_experiment_resolves() {
        for quick in [false, true] {
            let points = parts(quick).unwrap().remove(0).points().unwrap();
            assert_eq!(points.len(), PAIRS.len() * SCHEDULERS.len() * PLACEMENTS.len());
            for p in &points {
                let DeviceKind::Ssd(c) = &p.scenario.device.kind else { panic!("a flash drive") };
                assert!(!c.open_channel, "the drive runs its own FTL");
                assert_eq!(c.placement.fdp_handles(), Some(2));
                let per_tenant = param(p, "placement").as_deref() == Some("per-tenant");
                let want: Vec<Option<u16>> = if per_tenant { vec![Some(0), Some(1)] } else { vec![None, None] };
                assert_eq!(p.scenario.tenants.iter().map(|t| t.placement).collect::<Vec<_>>(), want);
                assert_eq!(p.scenario.host.scheduler.name(), param(p, "scheduler").unwrap());
            }
        }
    }
}
