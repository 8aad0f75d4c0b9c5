//! The data placement experiments (`experiments/fdp-multi-tenant/`, `experiments/fdp-noisy-handle/`):
//! what mixing tenants' writes in the same blocks costs and what a reclaim unit handle or stream
//! per tenant gives back, and how far a noisy handle's GC reaches the others under each handle
//! type. Their findings are the published ones (Micron's, CacheLib's, WARP's), checked on the
//! runs; docs/EXPERIMENTS.md §9 puts the published figures beside flashmux's.

use super::bundled::{embedded, missing, param, Bundled, Check};
use super::{Experiment, ExperimentError, Point};
use crate::metrics::RunResults;
use crate::report::plot::{write_bar_chart, write_line_chart, BarChart, BarSeries, LineChart, PlotError, Series};
use std::path::{Path, PathBuf};

const MT_DIR: &str = "experiments/fdp-multi-tenant";
const MT_EXPERIMENT: &str = include_str!("../../../../experiments/fdp-multi-tenant/experiment.toml");
const MT_QUICK: &str = include_str!("../../../../experiments/fdp-multi-tenant/quick.toml");
const MT_BASE: &str = include_str!("../../../../experiments/fdp-multi-tenant/base.toml");
const NH_EXPERIMENT: &str = include_str!("../../../../experiments/fdp-noisy-handle/experiment.toml");
const NH_QUICK: &str = include_str!("../../../../experiments/fdp-noisy-handle/quick.toml");
const NH_BASE: &str = include_str!("../../../../experiments/fdp-noisy-handle/base.toml");

/// The numbers of sequential writers the multi-tenant experiment runs (each with the random one).
pub const WRITER_COUNTS: [usize; 4] = [1, 2, 4, 8];
/// The placements it sweeps.
const PLACEMENTS: [&str; 3] = ["none", "fdp", "streams"];

pub const MULTI_TENANT: Bundled = Bundled {
    name: "fdp-multi-tenant",
    summary: "data placement: 1-8 sequential writers and a random one on a drive, without placement, with an FDP handle or a stream per tenant",
    parts: multi_tenant_parts,
    evaluate: multi_tenant_checks,
    figures: multi_tenant_figures,
};

pub const NOISY_HANDLE: Bundled = Bundled {
    name: "fdp-noisy-handle",
    summary: "data placement: a noisy FDP handle's GC beside quiet and sequential ones, initially vs persistently isolated handles",
    parts: noisy_parts,
    evaluate: noisy_checks,
    figures: noisy_figures,
};

/// One part per writer count: the base with its first `n` sequential writers and the random
/// writer (its last tenant).
fn multi_tenant_parts(quick: bool) -> Result<Vec<Experiment>, ExperimentError> {
    let (text, file) = if quick { (MT_QUICK, "quick.toml") } else { (MT_EXPERIMENT, "experiment.toml") };
    let base_file = format!("{MT_DIR}/base.toml");
    let base: toml::Value =
        MT_BASE.parse().map_err(|e: toml::de::Error| ExperimentError::Toml { file: base_file.clone(), line: None, message: e.to_string() })?;
    WRITER_COUNTS
        .iter()
        .map(|&n| {
            let mut b = base.clone();
            let tenants = b.get_mut("tenant").and_then(|t| t.as_array_mut()).expect("the base has tenants");
            let random = tenants.pop().expect("the random writer is the last tenant");
            tenants.truncate(n);
            tenants.push(random);
            let text = text.replace(&format!("name = \"{}", MULTI_TENANT.name), &format!("name = \"{}-{n}", MULTI_TENANT.name));
            embedded(&text, &format!("{MT_DIR}/{file}"), &toml::to_string(&b).expect("a TOML value"), &base_file)
        })
        .collect()
}

fn noisy_parts(quick: bool) -> Result<Vec<Experiment>, ExperimentError> {
    super::bundled::variant("fdp-noisy-handle", quick, NH_EXPERIMENT, NH_QUICK, NH_BASE)
}

/// A tenant's write amplification from the ownership ledger: (its units written + its units GC
/// moved) / its units written; NaN if it wrote none.
fn tenant_waf(r: &RunResults, t: usize) -> f64 {
    let t = &r.tenants[t];
    let written = t.device.write_units as f64;
    (written + t.gc_units_moved as f64) / written
}

/// The sequential writers' write amplification together (every tenant but the last).
fn sequential_waf(r: &RunResults) -> f64 {
    let seq = &r.tenants[..r.tenants.len() - 1];
    let written: u64 = seq.iter().map(|t| t.device.write_units).sum();
    let moved: u64 = seq.iter().map(|t| t.gc_units_moved).sum();
    (written + moved) as f64 / written as f64
}

/// The tenants' write bandwidth together, MB/s over the run.
fn write_mbps(r: &RunResults) -> f64 {
    r.tenants.iter().map(|t| t.io.write.bytes).sum::<u64>() as f64 / (r.sim_time_ns as f64 / 1e9) / 1e6
}

/// The worst 99th percentile of the sequential writers' write latency, µs.
fn sequential_p99_us(r: &RunResults) -> f64 {
    r.tenants[..r.tenants.len() - 1].iter().map(|t| t.io.write.clat.percentile(99.0) as f64 / 1e3).fold(0.0, f64::max)
}

struct MtRun<'a> {
    writers: usize,
    placement: String,
    r: &'a RunResults,
}

fn mt_runs<'a>(points: &[Point], results: &'a [RunResults]) -> Vec<MtRun<'a>> {
    points
        .iter()
        .zip(results)
        .filter(|(_, r)| r.tenants.len() >= 2)
        .filter_map(|(p, r)| Some(MtRun { writers: r.tenants.len() - 1, placement: param(p, "placement")?, r }))
        .collect()
}

fn mt_find<'a, 'b>(runs: &'a [MtRun<'b>], writers: usize, placement: &str) -> Option<&'a MtRun<'b>> {
    runs.iter().find(|m| m.writers == writers && m.placement == placement)
}

/// Published: Micron (2023), four sequential writers of 4–256 KiB on one 7450 PRO, WAF ≈ 1.6
/// mixed against 1.02 each on a drive of its own; CacheLib's kvcache trace on a 1.88 TB FDP SSD,
/// 1.22 → 1.03 (cache at half the drive) and 3.22 → 1.03 (the whole drive) with a handle per
/// cache engine.
fn multi_tenant_checks(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let runs = mt_runs(points, results);
    let mut checks = Vec::new();
    let per_count = |f: &dyn Fn(&MtRun, &MtRun, &MtRun) -> (bool, String)| {
        let mut ok = true;
        let mut text = Vec::new();
        for n in WRITER_COUNTS {
            match (mt_find(&runs, n, "none"), mt_find(&runs, n, "fdp"), mt_find(&runs, n, "streams")) {
                (Some(a), Some(b), Some(c)) => {
                    let (pass, t) = f(a, b, c);
                    ok &= pass;
                    text.push(format!("{n}: {t}"));
                }
                _ => {
                    ok = false;
                    text.push(format!("{n}: runs missing"));
                }
            }
        }
        (ok, text.join("; "))
    };
    if runs.is_empty() {
        return vec![missing("fdp-multi-tenant: the runs")];
    }
    // 1. Mixing raises the sequential writers' WAF (Micron: 1.6 for four of 4, 16, 64 and 256
    // KiB, the base's first four).
    let mixed: Vec<(usize, f64)> =
        WRITER_COUNTS.iter().filter_map(|&n| mt_find(&runs, n, "none").map(|m| (n, sequential_waf(m.r)))).collect();
    let grows = mixed.windows(2).filter(|w| w[0].0 >= 2).all(|w| w[1].1 > w[0].1);
    let four = mixed.iter().find(|(n, _)| *n == 4).map(|m| m.1);
    checks.push(Check {
        claim: "mixed without placement, the sequential writers' WAF grows with their number from 2 to 8, and four of them (4, 16, 64 and 256 KiB, Micron's set) reach at least 1.3 (Micron, 7450 PRO: ≈ 1.6) (writers: WAF)".into(),
        measured: mixed.iter().map(|(n, w)| format!("{n}: {w:.3}")).collect::<Vec<_>>().join("; "),
        pass: mixed.len() == WRITER_COUNTS.len() && grows && four.is_some_and(|w| w >= 1.3),
    });
    // 2. A handle or stream per tenant returns several sequential writers to a writer's own
    // (Micron: 1.02).
    let (pass, measured) = per_count(&|_, b, c| {
        let (f, s) = (sequential_waf(b.r), sequential_waf(c.r));
        (b.writers < 2 || (f <= 1.02 && s <= 1.02), format!("FDP {f:.3}, streams {s:.3}"))
    });
    checks.push(Check {
        claim: "with a reclaim unit handle or a stream per tenant, two or more sequential writers' WAF is at most 1.02, a writer's own (Micron: 1.02; CacheLib: 1.03) (writers: WAF; one writer: the next finding)".into(),
        measured,
        pass,
    });
    // 2b. One sequential writer beside the random one: GC still takes its blocks early.
    let one = (mt_find(&runs, 1, "none"), mt_find(&runs, 1, "fdp"), mt_find(&runs, 1, "streams"));
    checks.push(match one {
        (Some(a), Some(b), Some(c)) => {
            let w = [sequential_waf(a.r), sequential_waf(b.r), sequential_waf(c.r)];
            Check {
                claim: "one sequential writer beside the random one: GC takes blocks it is still overwriting, placement or not (greedy victims are the plane's least valid blocks, and a sequential writer's oldest blocks are, before they are wholly stale: WARP's 'Save Sequential'): its WAF above 1.05 (none / FDP / streams)".into(),
                measured: format!("{:.3} / {:.3} / {:.3}", w[0], w[1], w[2]),
                pass: w.iter().all(|&x| x > 1.05),
            }
        }
        _ => missing("one sequential writer: the runs"),
    });
    // 3. The drive as a whole writes less.
    let (pass, measured) = per_count(&|a, b, c| {
        let w = |m: &MtRun| m.r.device.waf.unwrap_or(f64::NAN);
        (w(b) < w(a) && w(c) < w(a), format!("{:.2} -> FDP {:.2}, streams {:.2}", w(a), w(b), w(c)))
    });
    checks.push(Check {
        claim: "the drive's WAF (every tenant, the random writer too) is lower with placement per tenant than without, at every number of writers (CacheLib: 1.22 -> 1.03, 3.22 -> 1.03)".into(),
        measured,
        pass,
    });
    // 4. What GC no longer takes, the tenants get.
    let (pass, measured) = per_count(&|a, b, c| {
        let (x, y, z) = (write_mbps(a.r), write_mbps(b.r), write_mbps(c.r));
        (y >= x && z >= x, format!("{x:.0} -> FDP {y:.0}, streams {z:.0} MB/s"))
    });
    checks.push(Check {
        claim: "the tenants' write bandwidth together is at least as high with placement per tenant as without, at every number of writers".into(),
        measured,
        pass,
    });
    checks
}

fn multi_tenant_figures(points: &[Point], results: &[RunResults], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let runs = mt_runs(points, results);
    let mut paths = Vec::new();
    let line = |title: &str, y: &str, f: &dyn Fn(&RunResults) -> f64| LineChart {
        title: title.into(),
        x_label: "sequential writers (and one random writer)".into(),
        y_label: y.into(),
        series: PLACEMENTS
            .iter()
            .map(|p| Series {
                label: (*p).to_string(),
                points: WRITER_COUNTS.iter().filter_map(|&n| mt_find(&runs, n, p).map(|m| (n as f64, f(m.r)))).collect(),
            })
            .collect(),
        y_range: None,
        log_x: true,
    };
    paths.extend(write_line_chart(&line("The sequential writers' write amplification", "WAF", &sequential_waf), dir, "sequential-waf")?);
    paths.extend(write_line_chart(&line("The drive's write amplification", "WAF", &|r| r.device.waf.unwrap_or(f64::NAN)), dir, "drive-waf")?);
    paths.extend(write_line_chart(&line("Write bandwidth, all tenants", "MB/s", &write_mbps), dir, "bandwidth")?);
    paths.extend(write_line_chart(&line("The sequential writers' worst p99 write latency", "µs", &sequential_p99_us), dir, "sequential-p99")?);
    Ok(paths)
}

/// The noisy-handle runs: (handle type, results).
fn nh_runs<'a>(points: &[Point], results: &'a [RunResults]) -> Vec<(String, &'a RunResults)> {
    points
        .iter()
        .zip(results)
        .filter(|(_, r)| r.tenants.len() == 4 && r.device.placement.is_some())
        .filter_map(|(p, r)| Some((param(p, "handles")?, r)))
        .collect()
}

/// Of the units GC moved in planes the noisy handle (0) pushed to GC, the share that was the
/// other handles' data.
fn landed_on_others(r: &RunResults) -> f64 {
    let p = r.device.placement.as_ref().expect("filtered");
    let row = &p.gc_moves[0];
    row[1..].iter().sum::<u64>() as f64 / row.iter().sum::<u64>().max(1) as f64
}

/// Published: WARP (FAST '26) on two commercial FDP drives with initially isolated handles:
/// invalidations concentrated in one handle raise the other handles' WAF ("noisy RUH"); FDP's
/// specification: a persistently isolated handle's data is only ever moved into reclaim units
/// holding that handle's data.
fn noisy_checks(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let runs = nh_runs(points, results);
    let find = |h: &str| runs.iter().find(|(t, _)| t == h).map(|(_, r)| *r);
    let (Some(ii), Some(pi)) = (find("initially-isolated"), find("persistently-isolated")) else {
        return vec![missing("fdp-noisy-handle: the initially and persistently isolated runs")];
    };
    let (pii, ppi) = (ii.device.placement.as_ref().expect("placed"), pi.device.placement.as_ref().expect("placed"));
    let quiet = |p: &crate::device::PlacementReport| p.placements[1].gc_units_moved;
    vec![
        Check {
            claim: "the noisy handle's writes make GC move the other handles' data (WARP: a noisy RUH raises the others' WAF): of the units GC moved in planes the noisy handle pushed to GC, some are the others' (initially / persistently isolated)".into(),
            measured: format!("{:.2}% / {:.2}% ({} / {} units)", landed_on_others(ii) * 100.0, landed_on_others(pi) * 100.0, pii.gc_moves[0][1..].iter().sum::<u64>(), ppi.gc_moves[0][1..].iter().sum::<u64>()),
            pass: landed_on_others(ii) > 0.0,
        },
        Check {
            claim: "with ample over-provisioning (this drive's 14.5%), persistently isolated handles give a lower drive WAF than initially isolated ones (WARP's emulated drive, 256 MiB reclaim units, 14% OP: 1.06 against 1.09; at 3% OP the reverse, 3.81 against 2.92) (initially -> persistently isolated)".into(),
            measured: format!(
                "{:.3} -> {:.3}; the quiet handle's own {:.2} -> {:.2} ({} -> {} of its units moved)",
                ii.device.waf.unwrap_or(f64::NAN),
                pi.device.waf.unwrap_or(f64::NAN),
                tenant_waf(ii, 1),
                tenant_waf(pi, 1),
                quiet(pii),
                quiet(ppi)
            ),
            pass: pi.device.waf < ii.device.waf,
        },
        Check {
            claim: "GC moves the sequential handles' data too, blocks they are still overwriting taken before they are wholly stale (WARP's 'Save Sequential': firmware GC reclaims long sequential streams too early): their WAF above 1 under both handle types (initially / persistently isolated)".into(),
            measured: format!(
                "seq1 {:.3} / {:.3}, seq2 {:.3} / {:.3}",
                tenant_waf(ii, 2),
                tenant_waf(pi, 2),
                tenant_waf(ii, 3),
                tenant_waf(pi, 3)
            ),
            pass: [ii, pi].iter().all(|r| tenant_waf(r, 2) > 1.0 && tenant_waf(r, 3) > 1.0),
        },
        Check {
            claim: "FDP's Media Reallocated (initially isolated data moved by the controller) is counted under initially isolated handles and never under persistently isolated ones".into(),
            measured: format!("{} / {} units", pii.media_reallocated_units, ppi.media_reallocated_units),
            pass: pii.media_reallocated_units > 0 && ppi.media_reallocated_units == 0,
        },
    ]
}

fn noisy_figures(points: &[Point], results: &[RunResults], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let runs = nh_runs(points, results);
    let names = ["noisy", "quiet", "seq1", "seq2"];
    let chart = |title: &str, y: &str, f: &dyn Fn(&RunResults, usize) -> f64| BarChart {
        title: title.into(),
        x_label: "handle (tenant)".into(),
        y_label: y.into(),
        categories: names.iter().map(|s| s.to_string()).collect(),
        series: runs.iter().map(|(h, r)| BarSeries { label: h.clone(), values: (0..4).map(|t| f(r, t)).collect() }).collect(),
    };
    let mut paths = write_bar_chart(&chart("Write amplification per handle", "WAF", &tenant_waf), dir, "waf-per-handle")?;
    let caused_by_noisy = |r: &RunResults, t: usize| r.device.placement.as_ref().map_or(f64::NAN, |p| p.gc_moves[0][t] as f64);
    paths.extend(write_bar_chart(
        &chart("Units of each handle's data GC moved in planes the noisy handle pushed to GC", "units", &caused_by_noisy),
        dir,
        "moved-by-noisy",
    )?);
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceKind;
    use crate::device::PlacementMode;

    #[test]
    fn the_bundled_experiments_resolve() {
        for quick in [false, true] {
            let parts = multi_tenant_parts(quick).unwrap();
            assert_eq!(parts.len(), WRITER_COUNTS.len());
            for (part, n) in parts.iter().zip(WRITER_COUNTS) {
                let points = part.points().unwrap();
                assert_eq!(points.len(), 3);
                for (p, want) in points.iter().zip(PLACEMENTS) {
                    assert_eq!(p.scenario.tenants.len(), n + 1);
                    assert_eq!(p.scenario.tenants.last().unwrap().name, "rand");
                    let DeviceKind::Ssd(c) = &p.scenario.device.kind else { panic!("a flash drive") };
                    let got = match c.placement {
                        PlacementMode::None => "none",
                        PlacementMode::Fdp { .. } => "fdp",
                        PlacementMode::Streams { .. } => "streams",
                    };
                    assert_eq!(got, want);
                    assert_eq!(p.scenario.tenants.iter().all(|t| t.placement.is_some()), want != "none");
                }
            }
            let points = noisy_parts(quick).unwrap().remove(0).points().unwrap();
            assert_eq!(points.len(), 2);
        }
    }
}
