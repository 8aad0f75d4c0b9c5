//! Zoned against conventional drives (`experiments/zns-vs-conventional/`), in three parts:
//! - **writers** (Bjørling et al., "ZNS: Avoiding the Block Interface Tax for Flash-based SSDs",
//!   USENIX ATC '21, Fig. 1 and §4): four writers on block drives of 7% and 28%
//!   over-provisioning aged into GC steady state, and on the same flash as a zoned drive, each
//!   writing its own zones (fio's `zonemode=zbd`). The paper's drive WAF (1.0 on ZNS) and the
//!   order of its throughputs (ZNS > 28% > 7%) are checked; its figures stand beside ours.
//! - **drives** (docs/EXPERIMENTS.md §13): a sequential and a random writer on a conventional
//!   drive, the same with FDP's handles, and a zoned drive under the host FTL with one shared
//!   log or a log per tenant — WAF, bandwidth and tails side by side. What the sources say is
//!   checked: a host FTL moves the write amplification to the host (dm-zoned's reclaim), and
//!   placing each tenant's data apart lowers it (as FDP's handles do, Micron).
//! - **reset latency** against how full the zone was, on the `tlc-nvme-zns` preset, beside the
//!   WD ZN540's (Doekemeijer et al., "Performance Characterization of NVMe Flash Devices with
//!   Zoned Namespaces (ZNS)", IEEE CLUSTER '23; from their published raw data).

use super::bundled::{embedded, missing, param, total, Bundled, Check};
use super::{Axis, Experiment, ExperimentError, Point};
use crate::metrics::RunResults;
use crate::report::plot::{
    write_bar_chart, write_line_chart, BarChart, BarSeries, LineChart, PlotError, Series,
};
use std::path::{Path, PathBuf};

const DIR: &str = "experiments/zns-vs-conventional";
const TWO_WRITERS: &str =
    include_str!("../../../../experiments/zns-vs-conventional/two-writers.toml");
const DRIVES: &str = include_str!("../../../../experiments/zns-vs-conventional/drives.toml");
const ZONED_DRIVES: &str =
    include_str!("../../../../experiments/zns-vs-conventional/zoned-drives.toml");
const FOUR_WRITERS: &str =
    include_str!("../../../../experiments/zns-vs-conventional/four-writers.toml");
const BLOCK_WRITERS: &str =
    include_str!("../../../../experiments/zns-vs-conventional/block-writers.toml");
const ZONE_WRITERS: &str =
    include_str!("../../../../experiments/zns-vs-conventional/zone-writers.toml");
const RESET_LATENCY: &str =
    include_str!("../../../../experiments/zns-vs-conventional/reset-latency.toml");

pub const BUNDLED: Bundled = Bundled {
    name: "zns-vs-conventional",
    summary: "zoned against conventional drives: writers on 7%/28% OP block drives and a ZNS drive (Bjorling et al. ATC '21), two tenants under device GC, FDP and a host FTL, Zone Reset latency against the ZN540's",
    parts,
    evaluate,
    figures,
};

/// The writers part's drives, as Bjørling et al.'s Fig. 1, and the throughput it published
/// for each (MiB/s).
pub const WRITER_DRIVES: [&str; 3] = ["block-7%", "block-28%", "zns"];
pub const PUBLISHED_MIB_S: [f64; 3] = [370.0, 590.0, 1010.0];
/// The drives part's drives.
pub const DRIVE_KINDS: [&str; 4] = ["conventional", "fdp", "zns-shared", "zns-per-tenant"];
/// The zone fills of the reset part (as the sweep names them) and the fraction of the zone's
/// capacity each is (1 LBA of the ZN540's 275,712).
pub const FILLS: [(&str, f64); 6] = [
    ("1-lba", 1.0 / 275_712.0),
    ("6.25%", 0.0625),
    ("12.5%", 0.125),
    ("25%", 0.25),
    ("50%", 0.5),
    ("100%", 1.0),
];
/// The ZN540's mean Zone Reset latency at those fills, ms (1,806 resets each; Doekemeijer et
/// al.'s raw data, `partial_reset`).
pub const ZN540_RESET_MS: [f64; 6] = [1.70, 5.16, 6.05, 7.88, 11.32, 15.81];
/// How far a full zone's reset may be from the ZN540's and still count as agreeing.
const RESET_TOLERANCE: f64 = 0.25;

fn parts(quick: bool) -> Result<Vec<Experiment>, ExperimentError> {
    let file = |f: &str| format!("{DIR}/{f}");
    let mut out = vec![
        embedded(
            DRIVES,
            &file("drives.toml"),
            TWO_WRITERS,
            &file("two-writers.toml"),
        )?,
        embedded(
            ZONED_DRIVES,
            &file("zoned-drives.toml"),
            TWO_WRITERS,
            &file("two-writers.toml"),
        )?,
        embedded(
            BLOCK_WRITERS,
            &file("block-writers.toml"),
            FOUR_WRITERS,
            &file("four-writers.toml"),
        )?,
        Experiment::from_toml(ZONE_WRITERS, &file("zone-writers.toml"), Path::new("."))?,
    ];
    if quick {
        // The test suite's variant: 20 s of simulated time instead of 60 (the writers' drives
        // are aged already, the two writers' fill a third of the drive).
        for e in &mut out {
            e.axes.push(Axis {
                key: "stop.time".into(),
                label: "time".into(),
                values: vec!["20s".into()],
                names: None,
            });
        }
    }
    // The resets run until their jobs are done, a fraction of a second.
    out.push(Experiment::from_toml(
        RESET_LATENCY,
        &file("reset-latency.toml"),
        Path::new("."),
    )?);
    Ok(out)
}

/// The run whose sweep parameter `label` is `value`.
fn find<'a>(
    points: &[Point],
    results: &'a [RunResults],
    label: &str,
    value: &str,
) -> Option<&'a RunResults> {
    points
        .iter()
        .zip(results)
        .find_map(|(p, r)| (param(p, label).as_deref() == Some(value)).then_some(r))
}

fn drive_waf(r: &RunResults) -> f64 {
    r.device.waf.unwrap_or(f64::NAN)
}

/// The write amplification the tenants' writes cost in all: the host FTL's times the drive's,
/// or the drive's alone.
fn system_waf(r: &RunResults) -> f64 {
    r.host_ftl
        .as_ref()
        .map_or(1.0, |h| h.waf.unwrap_or(f64::NAN))
        * drive_waf(r)
}

/// MiB/s, from MB/s.
fn mib(mb: f64) -> f64 {
    mb * 1e6 / (1 << 20) as f64
}

/// The worst of the tenants' 99.9th percentile write latencies, ms.
fn worst_p999_ms(r: &RunResults) -> f64 {
    r.tenants
        .iter()
        .map(|t| t.io.write.clat.percentile(99.9) as f64 / 1e6)
        .fold(f64::NAN, f64::max)
}

/// The drive's mean Zone Reset latency (fetch to completion), ms.
fn reset_ms(r: &RunResults) -> Option<f64> {
    let z = r.device.zns.as_ref()?;
    (z.resets > 0).then(|| z.reset_ns as f64 / z.resets as f64 / 1e6)
}

/// The error of `ours` against `theirs`, in %.
fn err(ours: f64, theirs: f64) -> f64 {
    (ours - theirs) / theirs * 100.0
}

fn evaluate(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let get = |label: &str, v: &str| find(points, results, label, v);
    let mut out = Vec::new();

    let writers: Option<Vec<&RunResults>> = WRITER_DRIVES.iter().map(|d| get("drive", d)).collect();
    let claim = "Bjorling et al. (ATC '21): a zoned drive does no GC, so its WAF is 1.0 where a block drive's is above it under the same writers (published: 1.0x on ZNS; XFS 2.0x, f2fs 2.4x on the 28% OP block drive) (WAF block-7% / block-28% / zns)";
    out.push(match &writers {
        Some(w) => Check {
            claim: claim.into(),
            measured: format!(
                "{:.2} / {:.2} / {:.2}",
                drive_waf(w[0]),
                drive_waf(w[1]),
                drive_waf(w[2])
            ),
            pass: drive_waf(w[2]) == 1.0
                && drive_waf(w[0]) > 1.0
                && drive_waf(w[1]) > 1.0
                && w[2].device.ftl.gc_runs == 0,
        },
        None => missing(claim),
    });
    let claim = "Bjorling et al.'s Fig. 1: writers get more from the zoned drive than from the 28% OP block drive, and more from that than from the 7% one (published 370 / 590 / 1010 MiB/s: zns 2.73x and 28% 1.59x the 7% drive's) (MiB/s block-7% / block-28% / zns; ratios)";
    out.push(match &writers {
        Some(w) => {
            let t: Vec<f64> = w.iter().map(|r| mib(total(r))).collect();
            Check {
                claim: claim.into(),
                measured: format!(
                    "{:.0} / {:.0} / {:.0}; zns {:.2}x, 28% {:.2}x",
                    t[0],
                    t[1],
                    t[2],
                    t[2] / t[0],
                    t[1] / t[0]
                ),
                pass: t[2] > t[1] && t[1] > t[0],
            }
        }
        None => missing(claim),
    });

    let claim = "a host FTL on a zoned drive moves the write amplification to the host (dm-zoned: reclaim copies a zone's valid blocks and resets it): the drive's WAF stays 1.0, the host's is above it (host WAF with one log; a log per tenant)";
    out.push(match (get("drive", "zns-shared"), get("drive", "zns-per-tenant")) {
        (Some(a), Some(b)) => {
            let host = |r: &RunResults| r.host_ftl.as_ref().and_then(|h| h.waf).unwrap_or(f64::NAN);
            let zone_errors = |r: &RunResults| r.device.zns.as_ref().map_or(u64::MAX, |z| z.errors.values().sum());
            Check {
                claim: claim.into(),
                measured: format!(
                    "host {:.3}, drive {:.3}; host {:.3}, drive {:.3}; failed zone commands {} and {}",
                    host(a),
                    drive_waf(a),
                    host(b),
                    drive_waf(b),
                    zone_errors(a),
                    zone_errors(b)
                ),
                pass: [a, b].iter().all(|r| drive_waf(r) == 1.0 && host(r) > 1.0 && zone_errors(r) == 0),
            }
        }
        _ => missing(claim),
    });
    let claim = "keeping each tenant's data in zones of its own (a host FTL log per tenant) lowers the write amplification, as a reclaim unit handle per tenant does on FDP drives (Micron: four writers 1.6 -> 1.02) (host WAF one log -> a log per tenant)";
    out.push(
        match (get("drive", "zns-shared"), get("drive", "zns-per-tenant")) {
            (Some(a), Some(b)) => Check {
                claim: claim.into(),
                measured: format!(
                    "{:.3} -> {:.3}; {:.1} -> {:.1} MB/s",
                    system_waf(a),
                    system_waf(b),
                    total(a),
                    total(b)
                ),
                pass: system_waf(b) < system_waf(a),
            },
            _ => missing(claim),
        },
    );

    let resets: Option<Vec<f64>> = FILLS
        .iter()
        .map(|(f, _)| get("fill", f).and_then(reset_ms))
        .collect();
    let claim = format!(
        "Doekemeijer et al. (CLUSTER '23), WD ZN540: a Zone Reset takes longer the more of the zone was written, and a full zone's takes {:.2} ms: flashmux's tlc-nvme-zns within {:.0}% of it (ms at fills 1 LBA .. 100%; error of the full zone's)",
        ZN540_RESET_MS[5],
        RESET_TOLERANCE * 100.0
    );
    out.push(match resets {
        Some(ms) => {
            let full = ms[ms.len() - 1];
            let e = err(full, ZN540_RESET_MS[5]);
            Check {
                claim,
                measured: format!(
                    "{}; {e:+.1}%",
                    ms.iter()
                        .map(|m| format!("{m:.2}"))
                        .collect::<Vec<_>>()
                        .join(" / ")
                ),
                pass: ms.windows(2).all(|w| w[1] >= w[0]) && e.abs() <= RESET_TOLERANCE * 100.0,
            }
        }
        None => missing(&claim),
    });
    out
}

fn figures(
    points: &[Point],
    results: &[RunResults],
    dir: &Path,
) -> Result<Vec<PathBuf>, PlotError> {
    let get = |label: &str, v: &str| find(points, results, label, v);
    let mut paths = Vec::new();
    // Fig. 1: the writers' throughput, flashmux beside the paper's.
    let categories: Vec<String> = WRITER_DRIVES.iter().map(|s| s.to_string()).collect();
    let chart = BarChart {
        title: "Four writers: throughput (Bjorling et al. Fig. 1)".into(),
        x_label: "drive".into(),
        y_label: "MiB/s".into(),
        categories: categories.clone(),
        series: vec![
            BarSeries {
                label: "flashmux".into(),
                values: WRITER_DRIVES
                    .iter()
                    .map(|d| get("drive", d).map_or(f64::NAN, |r| mib(total(r))))
                    .collect(),
            },
            BarSeries {
                label: "published (2 TB drives)".into(),
                values: PUBLISHED_MIB_S.to_vec(),
            },
        ],
    };
    paths.extend(write_bar_chart(&chart, dir, "writers-throughput")?);
    let chart = BarChart {
        title: "Four writers: the drive's write amplification".into(),
        x_label: "drive".into(),
        y_label: "WAF".into(),
        categories,
        series: vec![BarSeries {
            label: "flashmux".into(),
            values: WRITER_DRIVES
                .iter()
                .map(|d| get("drive", d).map_or(f64::NAN, drive_waf))
                .collect(),
        }],
    };
    paths.extend(write_bar_chart(&chart, dir, "writers-waf")?);
    // The two writers on each drive.
    let categories: Vec<String> = DRIVE_KINDS.iter().map(|s| s.to_string()).collect();
    let per = |f: &dyn Fn(&RunResults) -> f64| {
        DRIVE_KINDS
            .iter()
            .map(|d| get("drive", d).map_or(f64::NAN, f))
            .collect::<Vec<f64>>()
    };
    let bw = |name: &'static str| move |r: &RunResults| super::bundled::bw(r, name);
    let chart = BarChart {
        title: "Two writers: bandwidth per tenant".into(),
        x_label: "drive".into(),
        y_label: "MB/s".into(),
        categories: categories.clone(),
        series: vec![
            BarSeries {
                label: "seq".into(),
                values: per(&bw("seq")),
            },
            BarSeries {
                label: "rand".into(),
                values: per(&bw("rand")),
            },
        ],
    };
    paths.extend(write_bar_chart(&chart, dir, "two-writers-bandwidth")?);
    let chart = BarChart {
        title: "Two writers: write amplification (host FTL x drive)".into(),
        x_label: "drive".into(),
        y_label: "WAF".into(),
        categories: categories.clone(),
        series: vec![BarSeries {
            label: "WAF".into(),
            values: per(&system_waf),
        }],
    };
    paths.extend(write_bar_chart(&chart, dir, "two-writers-waf")?);
    let chart = BarChart {
        title: "Two writers: worst p99.9 write latency".into(),
        x_label: "drive".into(),
        y_label: "ms".into(),
        categories,
        series: vec![BarSeries {
            label: "p99.9".into(),
            values: per(&worst_p999_ms),
        }],
    };
    paths.extend(write_bar_chart(&chart, dir, "two-writers-p999")?);
    // Reset latency against fill, beside the ZN540's.
    let ours: Vec<(f64, f64)> = FILLS
        .iter()
        .filter_map(|(f, x)| get("fill", f).and_then(reset_ms).map(|ms| (x * 100.0, ms)))
        .collect();
    let chart = LineChart {
        title: "Zone Reset latency against zone fill".into(),
        x_label: "written, % of the zone's capacity".into(),
        y_label: "ms".into(),
        series: vec![
            Series {
                label: "flashmux tlc-nvme-zns".into(),
                points: ours,
            },
            Series {
                label: "WD ZN540 (Doekemeijer et al.)".into(),
                points: FILLS
                    .iter()
                    .zip(ZN540_RESET_MS)
                    .map(|((_, x), ms)| (x * 100.0, ms))
                    .collect(),
            },
        ],
        y_range: Some((0.0, 20.0)),
        log_x: false,
    };
    paths.extend(write_line_chart(&chart, dir, "reset-latency")?);
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceKind;

    #[test]
    fn the_bundled_experiment_resolves() {
        for quick in [false, true] {
            let parts = parts(quick).unwrap();
            let points = super::super::bundled::points(&parts).unwrap();
            for d in WRITER_DRIVES.iter().chain(&DRIVE_KINDS) {
                let p: Vec<&Point> = points
                    .iter()
                    .filter(|p| param(p, "drive").as_deref() == Some(*d))
                    .collect();
                assert_eq!(p.len(), 1, "{d}");
                let DeviceKind::Ssd(c) = &p[0].scenario.device.kind else {
                    panic!("a flash drive")
                };
                let zoned = d.starts_with("zns");
                assert_eq!(c.zns.is_some(), zoned, "{d}");
                assert_eq!(
                    p[0].scenario.host.zoned_ftl.is_some(),
                    zoned && *d != "zns",
                    "{d}"
                );
                // The same flash within each part.
                assert_eq!(c.geometry.planes(), 16);
                assert_eq!(c.geometry.total_units() * 4096, 4 << 30, "{d}");
                let want = if quick { 20 } else { 60 };
                assert_eq!(
                    p[0].scenario.stop.time.map(|t| t.0 / 1_000_000_000),
                    Some(want),
                    "{d}"
                );
            }
            let fills: Vec<String> = points.iter().filter_map(|p| param(p, "fill")).collect();
            assert_eq!(
                fills,
                FILLS.iter().map(|f| f.0.to_string()).collect::<Vec<_>>()
            );
        }
    }
}
