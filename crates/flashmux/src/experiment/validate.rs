//! Validation: each device preset against the published figures of the drive it resembles, and
//! the FTL against an analytic result — `flashmux validate`.
//!
//! # Model
//! A *probe* is one of the five figures datasheets give: the mean latency of 4 KiB random reads
//! at queue depth 1, 4 KiB random read and write IOPS, and 128 KiB sequential read and write
//! bandwidth. Each probe is one fio job on the whole drive, `time_based`:
//! - reads run on a drive filled once (`sequential-fill`, 100%), so every read touches flash;
//! - sequential writes and a datasheet's *burst* random writes run on a clean drive (fresh, as
//!   vendors measure them); *steady-state* random writes run on a full drive aged to GC steady
//!   state (`aged`, SNIA PTS's workload-independent preconditioning).
//!
//! A row passes when flashmux's figure is within [`TOLERANCE`] of the published one. The
//! analytic row compares greedy GC's steady-state write amplification under uniform random
//! overwrites with the LRW cleaner's closed form (u = exp(−α(1 − u)), WAF = 1 / (1 − u), α =
//! physical / logical space): greedy must not be worse, and within 20% of it.
//!
//! # Worked example
//! `x25e`, 4 KiB random reads at QD 32: the Intel X25-E product manual gives 35,000 IOPS; if
//! flashmux measures 61,000, the error is (61,000 − 35,000) / 35,000 = +74%: FAIL.
//!
//! # Parameters
//! [`TOLERANCE`] (15%, the goal for the presets); a probe's simulated time ([`Run::Full`]:
//! 3 s, 0.5 s for the latency probe; [`Run::Quick`]: a tenth); drives larger than 16 GiB of
//! logical space are scaled to 16 GiB ([`SCALED_CAPACITY`]: fewer blocks per plane, the same
//! dies, timing and over-provisioning), so aging one takes seconds, unless that would leave
//! fewer than [`MIN_SCALED_BLOCKS`] blocks per plane (`tlc-nvme` runs at its own 128 GiB);
//! `x25e` runs at its own 32 GB.
//!
//! A row whose figure was used to set one of the preset's parameters names it
//! ([`Published::calibrates`]): it checks the calibration; the other rows are predictions.
//!
//! Sources: each figure's own, in [`published`].

use crate::config::Scenario;
use crate::device::precondition::{owner_segments, precondition, PreconditionSpec, PreconditionState};
use crate::engine::rng_for;
use crate::flash::Geometry;
use crate::ftl::{Ftl, FtlParams, VictimPolicy};
use crate::metrics::RunResults;
use crate::sim::{SimError, Simulator};
use std::path::Path;

/// A row passes within this relative error of the published figure.
pub const TOLERANCE: f64 = 0.15;
/// Drives are scaled down to this much logical space (bytes) if they are larger and keep at
/// least [`MIN_SCALED_BLOCKS`] blocks per plane.
pub const SCALED_CAPACITY: &str = "16GiB";
/// Scaling must leave a plane this many blocks: GC's reserve and open blocks (about four per
/// plane) would otherwise take a visible part of the spare area (`tlc-nvme` at 16 GiB has 74
/// blocks per plane, and its steady-state WAF rises from 4.5 to about 6.4).
pub const MIN_SCALED_BLOCKS: u64 = 256;

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Probe {
    /// Mean latency of 4 KiB random reads at QD 1, µs.
    ReadLatencyQd1,
    /// 4 KiB random reads at this queue depth, IOPS.
    RandomReadIops { qd: u32 },
    /// 4 KiB random writes at this queue depth, IOPS: on a drive aged to GC steady state, or on a
    /// clean one (a datasheet's burst figure).
    RandomWriteIops { qd: u32, steady: bool },
    /// 128 KiB sequential reads at this queue depth, MB/s (10^6 bytes).
    SeqReadMbps { qd: u32 },
    /// 128 KiB sequential writes at this queue depth, MB/s.
    SeqWriteMbps { qd: u32 },
}

impl Probe {
    /// What it measures, for the table.
    pub fn describe(self) -> String {
        match self {
            Probe::ReadLatencyQd1 => "4 KiB random read, QD1, mean latency (us)".into(),
            Probe::RandomReadIops { qd } => format!("4 KiB random read, QD{qd} (IOPS)"),
            Probe::RandomWriteIops { qd, steady: true } => format!("4 KiB random write, QD{qd}, steady state (IOPS)"),
            Probe::RandomWriteIops { qd, steady: false } => format!("4 KiB random write, QD{qd}, fresh drive (IOPS)"),
            Probe::SeqReadMbps { qd } => format!("128 KiB sequential read, QD{qd} (MB/s)"),
            Probe::SeqWriteMbps { qd } => format!("128 KiB sequential write, QD{qd} (MB/s)"),
        }
    }

    /// The fio job (escaped for a TOML basic string) and the drive state it runs on.
    fn job(self) -> (String, &'static str) {
        let (rw, bs, qd) = match self {
            Probe::ReadLatencyQd1 => ("randread", "4k", 1),
            Probe::RandomReadIops { qd } => ("randread", "4k", qd),
            Probe::RandomWriteIops { qd, .. } => ("randwrite", "4k", qd),
            Probe::SeqReadMbps { qd } => ("read", "128k", qd),
            Probe::SeqWriteMbps { qd } => ("write", "128k", qd),
        };
        let state = match self {
            Probe::ReadLatencyQd1 | Probe::RandomReadIops { .. } | Probe::SeqReadMbps { .. } => "sequential-fill",
            Probe::RandomWriteIops { steady: true, .. } => "aged",
            Probe::RandomWriteIops { steady: false, .. } | Probe::SeqWriteMbps { .. } => "clean",
        };
        (format!("[t]\\nrw={rw}\\nbs={bs}\\niodepth={qd}\\ntime_based\\nruntime=1000s\\n"), state)
    }

    /// The probe's figure from a run's one tenant.
    fn value(self, r: &RunResults) -> f64 {
        let t = &r.tenants[0];
        let secs = t.runtime_ns.max(1) as f64 / 1e9;
        match self {
            Probe::ReadLatencyQd1 => t.lat_mean_ns().unwrap_or(f64::NAN) / 1e3,
            Probe::RandomReadIops { .. } | Probe::RandomWriteIops { .. } => t.io.ios() as f64 / secs,
            Probe::SeqReadMbps { .. } | Probe::SeqWriteMbps { .. } => t.bw_bytes_per_sec() / 1e6,
        }
    }
}

/// A published figure of the drive a preset resembles.
#[derive(Clone, Debug)]
pub struct Published {
    pub preset: &'static str,
    pub probe: Probe,
    pub value: f64,
    /// Where the figure comes from.
    pub source: &'static str,
    /// The preset's parameter this figure was used to set (its key), if any: such a row checks
    /// the calibration, not a prediction.
    pub calibrates: Option<&'static str>,
}

const X25E: &str = "Intel X25-E Extreme SATA SSD product manual (32 GB)";
const PRO840: &str = "Samsung SSD 840 PRO data sheet (256 GB)";
const PM9A3: &str = "Samsung PM9A3 U.2 7.68 TB data sheet, as reported at its launch (heise online, May 2020)";

/// Every preset's published figures. `paper-c` (a simulated drive), `cosmos` (a research
/// board) and `null` have none.
pub fn published() -> Vec<Published> {
    let p = |preset, probe, value, source, calibrates| Published { preset, probe, value, source, calibrates };
    const CHANNEL: Option<&str> = Some("device.timing.channel_rate");
    const PROGRAM: Option<&str> = Some("device.timing.program");
    const LINK: Option<&str> = Some("device.interface.link_rate");
    const COMMAND: Option<&str> = Some("device.interface.command_overhead");
    vec![
        p("x25e", Probe::ReadLatencyQd1, 75.0, X25E, CHANNEL),
        p("x25e", Probe::RandomReadIops { qd: 32 }, 35_000.0, X25E, None),
        p("x25e", Probe::RandomWriteIops { qd: 32, steady: true }, 3_300.0, X25E, None),
        p("x25e", Probe::SeqReadMbps { qd: 32 }, 250.0, X25E, LINK),
        p("x25e", Probe::SeqWriteMbps { qd: 32 }, 170.0, X25E, PROGRAM),
        // 9,900 IOPS at QD 1: a mean of 101 us.
        p("840pro", Probe::ReadLatencyQd1, 1e6 / 9_900.0, PRO840, COMMAND),
        p("840pro", Probe::RandomReadIops { qd: 32 }, 100_000.0, PRO840, COMMAND),
        p("840pro", Probe::RandomWriteIops { qd: 32, steady: false }, 90_000.0, PRO840, None),
        p("840pro", Probe::SeqReadMbps { qd: 32 }, 540.0, PRO840, LINK),
        p("840pro", Probe::SeqWriteMbps { qd: 32 }, 520.0, PRO840, PROGRAM),
        p("tlc-nvme", Probe::RandomReadIops { qd: 256 }, 900_000.0, PM9A3, COMMAND),
        p("tlc-nvme", Probe::RandomWriteIops { qd: 256, steady: true }, 200_000.0, PM9A3, None),
        p("tlc-nvme", Probe::SeqReadMbps { qd: 64 }, 6_500.0, PM9A3, None),
        p("tlc-nvme", Probe::SeqWriteMbps { qd: 64 }, 3_500.0, PM9A3, Some("device.timing.encode_rate")),
    ]
}

/// How long each probe runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    Full,
    /// A tenth of the simulated time (what the test suite runs).
    Quick,
}

/// One row of the table: the published figure, flashmux's, the error and the verdict.
#[derive(Clone, Debug)]
pub struct Row {
    pub published: Published,
    pub measured: f64,
    /// (measured − published) / published.
    pub error: f64,
    pub pass: bool,
}

/// The scenario text of `p`'s probe (its drive scaled to [`SCALED_CAPACITY`] if larger).
pub fn scenario_text(p: &Published, run: Run) -> String {
    let (job, state) = p.probe.job();
    let ms = match (p.probe, run) {
        (Probe::ReadLatencyQd1, Run::Full) => 500,
        (Probe::ReadLatencyQd1, Run::Quick) => 50,
        (_, Run::Full) => 3_000,
        (_, Run::Quick) => 300,
    };
    let capacity = if scales(p.preset) { format!("capacity = \"{SCALED_CAPACITY}\"\n") } else { String::new() };
    let precondition =
        if state == "clean" { String::new() } else { format!("[precondition]\nstate = \"{state}\"\nfill = 1.0\n") };
    format!(
        "name = \"validate-{}\"\nseed = 1\n[device]\npreset = \"{}\"\n{capacity}{precondition}[stop]\ntime = \"{ms}ms\"\n\
         [[tenant]]\nname = \"t\"\nregion = \"whole\"\nfio = \"{job}\"\n",
        p.preset, p.preset
    )
}

/// Whether `preset`'s drive is scaled to [`SCALED_CAPACITY`]: it is larger, keeps at least
/// [`MIN_SCALED_BLOCKS`] blocks per plane when scaled, and is not `x25e` (32 GB: small enough to
/// run as it is).
pub fn scales(preset: &str) -> bool {
    if preset == "x25e" {
        return false;
    }
    // The drive as the loader sizes it, at its own capacity and at the scaled one.
    let drive = |capacity: &str| {
        let text = format!("[device]\npreset = \"{preset}\"\n{capacity}[[tenant]]\nname = \"t\"\nfio = \"[j]\\nrw=read\"\n");
        Scenario::from_generated_toml(&text, "validate", Path::new(".")).ok().map(|s| s.device)
    };
    let (Some(own), Some(scaled)) = (drive(""), drive(&format!("capacity = \"{SCALED_CAPACITY}\"\n"))) else {
        return false;
    };
    let crate::device::DeviceKind::Ssd(c) = &scaled.kind else { return false };
    own.capacity_bytes() > scaled.capacity_bytes() && c.geometry.blocks_per_plane as u64 >= MIN_SCALED_BLOCKS
}

/// Runs `p`'s probe.
pub fn measure(p: &Published, run: Run) -> Result<Row, SimError> {
    let text = scenario_text(p, run);
    let scenario =
        Scenario::from_generated_toml(&text, &format!("validate {} {:?}", p.preset, p.probe), Path::new("."))
            .map_err(|e| SimError::Config(e.to_string()))?;
    let mut sim = Simulator::new(scenario)?;
    sim.run();
    let measured = p.probe.value(&sim.finish());
    let error = (measured - p.value) / p.value;
    Ok(Row { published: p.clone(), measured, error, pass: error.abs() <= TOLERANCE })
}

/// The analytic row: greedy GC's steady-state WAF under uniform random overwrites at `op`
/// over-provisioning, against the LRW closed form.
#[derive(Clone, Debug)]
pub struct AnalyticRow {
    pub op: f64,
    pub greedy_waf: f64,
    pub lrw_waf: f64,
    /// Steady state reached, greedy ≤ LRW (with the blocks GC cannot use taken out of α; 2%
    /// slack for the measurement) and ≥ 80% of LRW at the nominal α.
    pub pass: bool,
}

/// LRW (FIFO) cleaning's WAF under uniform random writes at `alpha` = physical / logical.
pub fn lrw_waf(alpha: f64) -> f64 {
    let mut u = 0.5;
    for _ in 0..500 {
        u = (-alpha * (1.0 - u)).exp();
    }
    1.0 / (1.0 - u)
}

/// Greedy GC on a 4-plane drive of 512 blocks of 64 pages per plane, aged at `op`.
pub fn analytic(op: f64) -> AnalyticRow {
    let geo = Geometry {
        channels: 4,
        chips_per_channel: 1,
        dies_per_chip: 1,
        planes_per_die: 1,
        blocks_per_plane: 512,
        pages_per_block: 64,
        page_bytes: 4096,
        unit_bytes: 4096,
    };
    let stripe = geo.planes() as u64;
    let logical = (geo.total_units() as f64 / (1.0 + op)) as u64 / stripe * stripe;
    let params = FtlParams {
        logical_units: logical,
        victim_policy: VictimPolicy::Greedy,
        gc_threshold_blocks: 2,
        map_entries_per_page: None,
        placements: Default::default(),
        zoned: None,
    };
    let mut ftl = Ftl::new(&geo, params).expect("a valid test drive");
    let segs = owner_segments(logical as u32, &[(0, logical as u32, 0)]);
    let spec = PreconditionSpec { state: PreconditionState::Aged, fill: 1.0 };
    let r = precondition(&mut ftl, &spec, &segs, &mut [], &mut rng_for(3, "validation"), &|| false);
    let alpha = geo.total_units() as f64 / logical as f64;
    // Blocks GC can never use for data: the threshold's reserve and two open blocks per plane.
    let alpha_eff = alpha * (geo.blocks_per_plane - 4) as f64 / geo.blocks_per_plane as f64;
    let bound = lrw_waf(alpha_eff);
    ftl.check_invariants();
    let pass = r.reached_steady_state && r.steady_waf <= bound * 1.02 && r.steady_waf >= 0.8 * lrw_waf(alpha);
    AnalyticRow { op, greedy_waf: r.steady_waf, lrw_waf: bound, pass }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_names_a_preset_and_a_source_and_builds_a_valid_scenario() {
        for p in published() {
            assert!(crate::config::PRESET_NAMES.contains(&p.preset), "{}", p.preset);
            assert!(p.value > 0.0 && !p.source.is_empty());
            for run in [Run::Full, Run::Quick] {
                let text = scenario_text(&p, run);
                let s = Scenario::from_generated_toml(&text, "validate", Path::new("."));
                assert!(s.is_ok(), "{text}: {:?}", s.err());
            }
        }
    }

    #[test]
    fn a_probe_measures_what_it_says() {
        // The x25e's QD1 latency on a short run: one tenant, reads only, every read from flash.
        let p = &published()[0];
        assert_eq!(p.probe, Probe::ReadLatencyQd1);
        let r = measure(p, Run::Quick).unwrap();
        assert!(r.measured > 25.0 && r.measured < 500.0, "{r:?}");
        assert!((r.error - (r.measured - 75.0) / 75.0).abs() < 1e-12);
        assert_eq!(r.pass, r.error.abs() <= TOLERANCE);
    }

    #[test]
    fn only_drives_that_keep_enough_blocks_per_plane_are_scaled() {
        // 840pro: 256 GB on 64 planes of 1 MiB blocks; at 16 GiB, 275 blocks per plane.
        assert!(scales("840pro"));
        // tlc-nvme: 256 planes; at 16 GiB, 74 blocks per plane.
        assert!(!scales("tlc-nvme"));
        // x25e runs at its own 32 GB; the null device has no flash.
        assert!(!scales("x25e") && !scales("null") && !scales("nope"));
    }

    #[test]
    fn greedy_gc_is_within_the_lrw_bound() {
        let r = analytic(0.15);
        assert!(r.pass, "{r:?}");
        // u = exp(-1.15 (1 - u)) at u = 0.7510: WAF 4.016.
        assert!((lrw_waf(1.15) - 4.016).abs() < 0.001, "LRW at 15% OP: {}", lrw_waf(1.15));
    }
}
