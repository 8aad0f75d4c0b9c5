//! Paper A (vCPU-dedicated queues and I/O threads), bundled as `paper-a-multiqueue`: Baseline
//! (`dataplane`), MQ (`multiqueue`) and MT (`per-vcpu-threads`) on a null device, 1–16 fio
//! processes, four workloads, 8 and 16 vCPUs; its findings as checks; Figs. 3–6.

use super::bundled::{missing, param_text as text, Bundled, Check};
use super::{Experiment, ExperimentError, Point};
use crate::metrics::RunResults;
use crate::report::plot::{write_line_chart, LineChart, PlotError, Series};
use crate::virt::{ExitReason, VmResult};
use std::path::{Path, PathBuf};

const EXPERIMENT: &str = include_str!("../../../../experiments/paper-a-multiqueue/experiment.toml");
const QUICK: &str = include_str!("../../../../experiments/paper-a-multiqueue/quick.toml");
const BASE: &str = include_str!("../../../../experiments/paper-a-multiqueue/base.toml");

pub const BUNDLED: Bundled = Bundled {
    name: "paper-a-multiqueue",
    summary: "paper A: Baseline / MQ / MT virtio-blk on a null device, 1-16 processes, 8 and 16 vCPUs (Figs. 3-6)",
    parts,
    evaluate,
    figures,
};

const DESIGNS: [&str; 3] = ["Baseline", "MQ", "MT"];
const WORKLOADS: [(&str, &str); 4] = [
    ("randread-4k", "4 KiB random read"),
    ("randwrite-4k", "4 KiB random write"),
    ("read-32k", "32 KiB sequential read"),
    ("write-32k", "32 KiB sequential write"),
];

fn parts(quick: bool) -> Result<Vec<Experiment>, ExperimentError> {
    super::bundled::variant("paper-a-multiqueue", quick, EXPERIMENT, QUICK, BASE)
}

/// One run's numbers for the checks and the figures.
struct Run<'a> {
    design: String,
    vcpus: u32,
    workload: String,
    procs: u32,
    r: &'a RunResults,
}

impl Run<'_> {
    fn iops(&self) -> f64 {
        let t = &self.r.tenants[0];
        let secs = t.runtime_ns.max(1) as f64 / 1e9;
        (t.io.read.ios + t.io.write.ios) as f64 / secs
    }
    fn gbps(&self) -> f64 {
        let t = &self.r.tenants[0];
        let secs = t.runtime_ns.max(1) as f64 / 1e9;
        (t.io.read.bytes + t.io.write.bytes) as f64 / secs / 1e9
    }
    fn lat_us(&self) -> f64 {
        self.r.tenants[0].io.all_lat().mean() / 1000.0
    }
    fn secs(&self) -> f64 {
        self.r.sim_time_ns.max(1) as f64 / 1e9
    }
    fn switches_per_sec(&self) -> f64 {
        self.r.virt.as_ref().map_or(0.0, |v| v.context_switches_per_sec)
    }
    fn vm(&self) -> Option<&VmResult> {
        self.r.virt.as_ref().and_then(|v| v.vms.first())
    }
    fn exits_per_sec(&self) -> f64 {
        self.vm().map_or(0.0, |v| v.exits_total as f64 / self.secs())
    }
    fn exit_rate(&self, reason: ExitReason) -> f64 {
        self.vm().map_or(0.0, |v| v.exits[reason.index()].count as f64 / self.secs())
    }
    fn lock_wait_us(&self) -> f64 {
        self.vm().map_or(0.0, |v| v.locks.wait_mean_ns() / 1000.0)
    }
}


fn runs<'a>(points: &[Point], results: &'a [RunResults]) -> Vec<Run<'a>> {
    points
        .iter()
        .zip(results)
        .filter(|(_, r)| !r.tenants.is_empty())
        .filter_map(|(p, r)| {
            let param = |label: &str| p.params.iter().find(|(l, _)| l == label).map(|(_, v)| text(v));
            let workload = param("workload")?;
            let (w, n) = workload.split_once('/')?;
            Some(Run {
                design: param("design")?,
                vcpus: p.scenario.virt.vcpus,
                workload: w.to_string(),
                procs: n.parse().ok()?,
                r,
            })
        })
        .collect()
}

fn find<'a, 'b>(runs: &'a [Run<'b>], design: &str, vcpus: u32, workload: &str, procs: u32) -> Option<&'a Run<'b>> {
    runs.iter().find(|r| r.design == design && r.vcpus == vcpus && r.workload == workload && r.procs == procs)
}

/// A design's runs of one workload, by number of processes.
fn curve<'a, 'b>(runs: &'a [Run<'b>], design: &str, vcpus: u32, workload: &str) -> Vec<&'a Run<'b>> {
    let mut c: Vec<&Run> = runs.iter().filter(|r| r.design == design && r.vcpus == vcpus && r.workload == workload).collect();
    c.sort_by_key(|r| r.procs);
    c
}

fn k(x: f64) -> String {
    format!("{:.0}K", x / 1000.0)
}


/// The paper's findings, checked on the measured runs.
fn evaluate(points: &[Point], results: &[RunResults]) -> Vec<Check> {
    let runs = runs(points, results);
    let rr = "randread-4k";
    let mut checks = Vec::new();

    let claim = "Baseline's random-read IOPS falls as processes grow past its peak (8 vCPUs)";
    let base = curve(&runs, "Baseline", 8, rr);
    checks.push(match (base.iter().max_by(|a, b| a.iops().total_cmp(&b.iops())), base.last()) {
        (Some(peak), Some(last)) => Check {
            claim: claim.into(),
            measured: format!(
                "peak {} IOPS at {} processes, {} at {} ({:+.0}%)",
                k(peak.iops()),
                peak.procs,
                k(last.iops()),
                last.procs,
                (last.iops() / peak.iops() - 1.0) * 100.0
            ),
            pass: peak.procs < last.procs && last.iops() < 0.97 * peak.iops(),
        },
        _ => missing(claim),
    });

    let at8 = |d: &str| find(&runs, d, 8, rr, 8);
    let claim = "MT >= 2x Baseline's random-read IOPS at 8 processes (paper: 2.55x)";
    checks.push(match (at8("MT"), at8("Baseline")) {
        (Some(mt), Some(b)) => Check {
            claim: claim.into(),
            measured: format!("MT {} / Baseline {} = {:.2}x", k(mt.iops()), k(b.iops()), mt.iops() / b.iops()),
            pass: mt.iops() >= 2.0 * b.iops(),
        },
        _ => missing(claim),
    });
    let claim = "MT > MQ at 8 processes, random read (paper: +32%)";
    checks.push(match (at8("MT"), at8("MQ")) {
        (Some(mt), Some(mq)) => Check {
            claim: claim.into(),
            measured: format!("MT {} vs MQ {} ({:+.0}%)", k(mt.iops()), k(mq.iops()), (mt.iops() / mq.iops() - 1.0) * 100.0),
            pass: mt.iops() > mq.iops(),
        },
        _ => missing(claim),
    });
    let claim = "MT's context switches per second <= 20% of Baseline's at 8 processes (paper: ~10%)";
    checks.push(match (at8("MT"), at8("Baseline")) {
        (Some(mt), Some(b)) => Check {
            claim: claim.into(),
            measured: format!(
                "MT {}/s vs Baseline {}/s ({:.0}%)",
                k(mt.switches_per_sec()),
                k(b.switches_per_sec()),
                mt.switches_per_sec() / b.switches_per_sec() * 100.0
            ),
            pass: mt.switches_per_sec() <= 0.2 * b.switches_per_sec(),
        },
        _ => missing(claim),
    });
    let claim = "MT exits less than Baseline (paper: -45%), and MQ exits least (paper: 65% fewer than MT), at 8 processes";
    checks.push(match (at8("MT"), at8("Baseline"), at8("MQ")) {
        (Some(mt), Some(b), Some(mq)) => {
            let by_reason = |r: &Run| {
                ExitReason::ALL.iter().map(|&x| format!("{} {}", x.name(), k(r.exit_rate(x)))).collect::<Vec<_>>().join(", ")
            };
            Check {
                claim: claim.into(),
                measured: format!(
                    "exits/s: Baseline {} ({}); MT {} ({:+.0}%; {}); MQ {} ({:+.0}% vs MT)",
                    k(b.exits_per_sec()),
                    by_reason(b),
                    k(mt.exits_per_sec()),
                    (mt.exits_per_sec() / b.exits_per_sec() - 1.0) * 100.0,
                    by_reason(mt),
                    k(mq.exits_per_sec()),
                    (mq.exits_per_sec() / mt.exits_per_sec() - 1.0) * 100.0
                ),
                pass: mt.exits_per_sec() < b.exits_per_sec() && mq.exits_per_sec() < mt.exits_per_sec(),
            }
        }
        _ => missing(claim),
    });
    let claim = "the virtqueue mutex's wait per acquisition falls with a queue per vCPU (paper: 50 us -> 10 us)";
    checks.push(match (at8("MT"), at8("Baseline")) {
        (Some(mt), Some(b)) => Check {
            claim: claim.into(),
            measured: format!("Baseline {:.1} us, MT {:.2} us", b.lock_wait_us(), mt.lock_wait_us()),
            pass: mt.lock_wait_us() < b.lock_wait_us(),
        },
        _ => missing(claim),
    });

    let claim = "16 vCPUs: past 8 processes MT holds within 5% of its 8-process IOPS or gains, while Baseline drops";
    let (mt16, b16) = (curve(&runs, "MT", 16, rr), curve(&runs, "Baseline", 16, rr));
    let at = |c: &[&Run], n: u32| c.iter().find(|r| r.procs == n).map(|r| r.iops());
    checks.push(match (at(&mt16, 8), at(&b16, 8), b16.last()) {
        (Some(m8), Some(b8), Some(blast)) if blast.procs > 8 => {
            let past: Vec<f64> = mt16.iter().filter(|r| r.procs > 8).map(|r| r.iops()).collect();
            let worst = past.iter().copied().fold(f64::INFINITY, f64::min);
            Check {
                claim: claim.into(),
                measured: format!(
                    "MT {} at 8, lowest past 8 {} ({:+.1}%); Baseline {} at 8, {} at {} ({:+.1}%)",
                    k(m8),
                    k(worst),
                    (worst / m8 - 1.0) * 100.0,
                    k(b8),
                    k(blast.iops()),
                    blast.procs,
                    (blast.iops() / b8 - 1.0) * 100.0
                ),
                pass: worst >= 0.95 * m8 && blast.iops() < b8,
            }
        }
        _ => missing(claim),
    });

    // The other workloads, when the sweep has them (the full experiment).
    let paper = [("randwrite-4k", "+128%"), ("read-32k", "+210%"), ("write-32k", "+73%")];
    for (w, reported) in paper {
        let (Some(mt), Some(b)) = (find(&runs, "MT", 8, w, 8), find(&runs, "Baseline", 8, w, 8)) else { continue };
        checks.push(Check {
            claim: format!("MT > Baseline for {w} at 8 processes (paper: {reported} at best)"),
            measured: format!("MT {} / Baseline {} ({:+.0}%)", k(mt.iops()), k(b.iops()), (mt.iops() / b.iops() - 1.0) * 100.0),
            pass: mt.iops() > b.iops(),
        });
    }
    checks
}

fn series<'b>(runs: &[Run<'b>], vcpus: u32, workload: &str, y: impl Fn(&Run<'b>) -> f64) -> Vec<Series> {
    DESIGNS
        .iter()
        .map(|d| Series {
            label: (*d).to_string(),
            points: curve(runs, d, vcpus, workload).into_iter().map(|r| (r.procs as f64, y(r))).collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

fn chart(title: String, y_label: &str, series: Vec<Series>) -> LineChart {
    LineChart { title, x_label: "fio processes".into(), y_label: y_label.into(), series, y_range: None, log_x: false }
}

/// Fig. 3 (random-read latency, context switches), Fig. 4 (exits), Fig. 5 (the four workloads),
/// Fig. 6 (16 vCPUs).
fn figures(points: &[Point], results: &[RunResults], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let runs = runs(points, results);
    let mut paths = Vec::new();
    let mut draw = |c: LineChart, stem: &str| -> Result<(), PlotError> {
        if !c.series.is_empty() {
            paths.extend(write_line_chart(&c, dir, stem)?);
        }
        Ok(())
    };
    let rr = "randread-4k";
    draw(chart("Fig. 3(b): random-read latency".into(), "mean latency (us)", series(&runs, 8, rr, |r| r.lat_us())), "fig3b-latency")?;
    draw(
        chart("Fig. 3(c): context switches, random read".into(), "context switches per second (K)", series(&runs, 8, rr, |r| r.switches_per_sec() / 1000.0)),
        "fig3c-context-switches",
    )?;
    draw(chart("Fig. 4: VM exits, random read".into(), "exits per second (K)", series(&runs, 8, rr, |r| r.exits_per_sec() / 1000.0)), "fig4-exits")?;
    for (i, (w, title)) in WORKLOADS.iter().enumerate() {
        let seq = w.ends_with("32k");
        let label = if seq { "bandwidth (GB/s)" } else { "IOPS (K)" };
        let y = |r: &Run<'_>| if seq { r.gbps() } else { r.iops() / 1000.0 };
        let panel = ['a', 'b', 'c', 'd'][i];
        draw(chart(format!("Fig. 5({panel}): {title}, 8 vCPUs"), label, series(&runs, 8, w, y)), &format!("fig5{panel}-{w}"))?;
    }
    draw(
        chart("Fig. 6: random read, 16 vCPUs on 8 hardware threads".into(), "IOPS (K)", series(&runs, 16, rr, |r| r.iops() / 1000.0)),
        "fig6-16-vcpus",
    )?;
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virt::VirtMode;

    #[test]
    fn the_bundled_experiments_resolve() {
        for quick in [false, true] {
            let e = parts(quick).unwrap().remove(0);
            let points = e.points().unwrap();
            assert_eq!(points.len(), if quick { 3 * 2 * 6 } else { 3 * 2 * 4 * 16 });
            for p in &points {
                assert!(matches!(p.scenario.virt.mode, VirtMode::Dataplane | VirtMode::Multiqueue | VirtMode::PerVcpuThreads));
                assert_eq!(p.scenario.host.cpu.as_ref().map(|c| c.hw_threads()), Some(8));
            }
        }
    }
}
