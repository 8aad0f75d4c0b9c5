//! Reports written from a finished run's [`RunResults`](crate::metrics::RunResults):
//!
//! - [`fio_json()`]: fio's `json` / `json+` output (`--output-format=json`), key for key, so
//!   existing fio tooling reads flashmux results; flashmux's own data rides along in `"flashmux"`
//!   objects fio tools ignore.
//! - [`fio_normal`]: fio's default human-readable output.
//! - [`tenant_table`]: one aligned row per tenant plus the device's summary, for a terminal.
//! - [`write_timeline_csv`]: the per-interval, per-tenant timeline.
//! - [`group_reporting`]: fio's merge of a reporting group's job clones into one entry.
//!
//! Every report is a pure function of the results: the same run gives byte-identical reports.

mod fio_json;
mod fio_stats;
mod group;
mod normal;
pub mod plot;
mod table;
mod timeline;

pub use fio_json::fio_json;

/// `results.json` as `flashmux run` writes it: fio's JSON document ([`fio_json`]; `plus`: with
/// latency histogram bins), pretty-printed, ending in a newline.
pub fn results_json(r: &crate::metrics::RunResults, plus: bool) -> String {
    serde_json::to_string_pretty(&fio_json(r, plus)).expect("a serde_json::Value always serializes") + "\n"
}
pub use group::{group_reporting, GroupKey};
pub use normal::fio_normal;
pub use table::{precondition as precondition_summary, tenant_table};
pub use timeline::{write_timeline_csv, TimelineCsv};

use crate::device::precondition::PreconditionState;
use crate::metrics::StopReason;

/// The stop reason as it appears in every report (the same kebab-case name serde gives it).
pub fn stop_reason_name(s: StopReason) -> &'static str {
    match s {
        StopReason::AllJobsDone => "all-jobs-done",
        StopReason::TimeLimit => "time-limit",
        StopReason::RequestLimit => "request-limit",
        StopReason::Interrupted => "interrupted",
        StopReason::ServerStopped => "server-stopped",
    }
}

/// The preconditioning state as configured (the same kebab-case name serde gives it).
fn precondition_state_name(s: PreconditionState) -> &'static str {
    match s {
        PreconditionState::Clean => "clean",
        PreconditionState::SequentialFill => "sequential-fill",
        PreconditionState::Aged => "aged",
        PreconditionState::Workload => "workload",
    }
}

/// `num / den`, or `None` when the ratio is undefined (den = 0).
fn ratio(num: f64, den: f64) -> Option<f64> {
    if den > 0.0 && num.is_finite() && den.is_finite() {
        Some(num / den)
    } else {
        None
    }
}

/// A small but complete hand-built run shared by the reports' tests.
#[cfg(test)]
pub(crate) mod test_fixture {
    use crate::device::precondition::{PreconditionReport, PreconditionState};
    use crate::device::{SsdStats, TenantDeviceStats};
    use crate::ftl::{FtlStats, MapStats};
    use crate::metrics::{
        shares, DeviceResult, Fairness, IoStats, JobResult, JobSample, RunResults, Samples, StopReason, TenantResult,
        TimelineRow,
    };

    pub(crate) const SEC: u64 = 1_000_000_000;

    pub(crate) fn job(name: &str, clone: u32, groupid: u32) -> JobResult {
        JobResult {
            errors: 0,
            zone_commands: 0,
            error: 0,
            name: name.into(),
            clone,
            members: 1,
            groupid,
            tenant: String::new(),
            tenant_index: 0,
            options: vec![("name".into(), name.into()), ("rw".into(), "randrw".into())],
            iodepth: 1,
            runtime_ns: 0,
            io: IoStats::default(),
            iodepth_levels: Vec::new(),
            sample_interval_ns: 500_000_000,
            samples: Default::default(),
        }
    }

    /// Records `n` requests of 4 KiB with deterministic, spread-out latencies.
    fn fill(io: &mut crate::metrics::DirStats, n: u64, base_ns: u64) {
        for i in 0..n {
            io.record(4096, 1_000 + i % 7 * 100, base_ns + (i * 7919) % (base_ns * 3));
        }
    }

    /// Two tenants: `vm0` runs job `a` twice (group 0; clone 0 reads 4,096,000 bytes in 2 s,
    /// clone 1 8,192,000 bytes in 4 s), `vm1` runs job `b` (group 1; writes 100 × 4 KiB in 1 s).
    /// In their common interval, the first second, vm0 (weight 500) moved 3 MB/s and vm1 (weight
    /// 250) 1 MB/s: shares 3/4 and 1/4 against 2/3 and 1/3.
    pub(crate) fn run() -> RunResults {
        let mut a0 = job("a", 0, 0);
        a0.tenant = "vm0".into();
        a0.options.push(("iodepth".into(), "16".into()));
        a0.iodepth = 16;
        a0.runtime_ns = 2 * SEC;
        fill(&mut a0.io.read, 1000, 20_000);
        a0.iodepth_levels = vec![(1, 0.001), (16, 0.999)];
        a0.samples = Samples::of_windows(
            &[
                JobSample { bytes: [1_024_000, 0, 0], ios: [250, 0, 0] },
                JobSample { bytes: [1_024_000, 0, 0], ios: [250, 0, 0] },
                JobSample { bytes: [2_048_000, 0, 0], ios: [500, 0, 0] },
                JobSample { bytes: [0, 0, 0], ios: [0, 0, 0] },
            ],
            500_000_000,
        );
        let mut a1 = job("a", 1, 0);
        a1.tenant = "vm0".into();
        a1.runtime_ns = 4 * SEC;
        fill(&mut a1.io.read, 2000, 30_000);
        a1.iodepth_levels = vec![(1, 1.0)];
        a1.samples = Samples::of_windows(&[JobSample { bytes: [1_024_000, 0, 0], ios: [250, 0, 0] }; 8], 500_000_000);
        let mut b0 = job("b", 0, 1);
        b0.tenant = "vm1".into();
        b0.tenant_index = 1;
        b0.runtime_ns = SEC;
        fill(&mut b0.io.write, 100, 3_000_000);
        b0.iodepth_levels = vec![(4, 1.0)];
        b0.samples = Samples::of_windows(&[JobSample { bytes: [0, 204_800, 0], ios: [0, 50, 0] }; 2], 500_000_000);

        let tenant = |name: &str, index: usize, jobs: Vec<usize>, src: &[&JobResult], gc: u64, weight: u32| {
            let mut io = IoStats::default();
            src.iter().for_each(|j| io.merge(&j.io));
            TenantResult {
                name: name.into(),
                index,
                jobs,
                region: (index as u64 * (1 << 30), 1 << 30),
                weight,
                share: None,
                runtime_ns: src.iter().map(|j| j.runtime_ns).max().unwrap_or(0),
                io,
                gc_units_moved: gc,
                gc_units_caused: gc,
                gc_erases: gc as f64 / 64.0,
                map: MapStats { lookups: 100, hits: 90, misses: 10, miss_ratio: 0.1, ..Default::default() },
                device: TenantDeviceStats { write_units: 7, write_buffer_hits: 3, ..Default::default() },
                sched: None,
                merges: None,
                replay: None,
                zones: None,
            }
        };
        let mut tenants =
            vec![tenant("vm0", 0, vec![0, 1], &[&a0, &a1], 60, 500), tenant("vm1", 1, vec![2], &[&b0], 30, 250)];
        let weights = [500, 250];
        let shares = shares(&[Some(3e6), Some(1e6)], &weights);
        tenants[0].share = shares[0];
        tenants[1].share = shares[1];
        let fairness = Fairness::of_shares(&shares, &weights, Some((0, SEC)), 2);

        RunResults {
            virt: None,
            kernel: None,
            host_ftl: None,
            filebench: Vec::new(),
            version: "0.1.0".into(),
            seed: 42,
            config_hash: "ab".repeat(32),
            scenario: "two-vms".into(),
            global_options: vec![("ioengine".into(), "libaio".into())],
            sim_time_ns: 4 * SEC + 1,
            stop_reason: StopReason::AllJobsDone,
            events: 12_345,
            requests_issued: 3102,
            requests_completed: 3100,
            requests_in_flight: 2,
            jobs: vec![a0, a1, b0],
            tenants,
            device: DeviceResult {
                kind: "ssd".into(),
                preset: "test".into(),
                capacity_bytes: 2 << 30,
                physical_bytes: 3 << 30,
                unit_bytes: 4096,
                mapping: "full".into(),
                ftl: FtlStats {
                    host_units_programmed: 100,
                    gc_units_programmed: 100,
                    padding_units_programmed: 0,
                    gc_runs: 4,
                    erases: 5,
                    trimmed_units: 0,
                    ..Default::default()
                },
                ssd: SsdStats::default(),
                waf: Some(2.0),
                unowned_gc_units_moved: 10,
                cmt: None,
                placement: None,
                zns: None,
                precondition: PreconditionReport {
                    state: Some(PreconditionState::Aged),
                    fill: 0.9,
                    units_filled: 1000,
                    overwrite_units: 5000,
                    gc_runs: 77,
                    steady_waf: 2.25,
                    reached_steady_state: true,
                    writers: None,
                    interrupted: false,
                },
                channel_utilisation: 0.5,
                write_buffer_hits: 6,
                flushes: 0,
            },
            timeline_interval_ns: SEC,
            timeline: vec![
                TimelineRow {
                    time_s: 0.0,
                    interval_s: 1.0,
                    tenant: "vm0".into(),
                    read_iops: 750.0,
                    write_iops: 0.0,
                    read_mbps: 3.072,
                    write_mbps: 0.0,
                    lat_mean_us: 35.25,
                    lat_p99_us: 1.0 / 3.0,
                    gc_units_moved: 12,
                    map_lookups: 0,
                    map_misses: 0,
                    cmt_pages: 0,
                    slice_scale: 1.0,
                    share: 1.0,
                    share_ideal: 1.0,
                    share_error: 0.0,
                    gc_share: 1.0,
                    gc_share_est: f64::NAN,
                    zone_resets: 0,
                    zone_errors: 0,
                },
                TimelineRow {
                    time_s: 0.0,
                    interval_s: 1.0,
                    tenant: "vm1".into(),
                    read_iops: 0.0,
                    write_iops: 100.0,
                    read_mbps: 0.0,
                    write_mbps: 0.4096,
                    lat_mean_us: f64::NAN,
                    lat_p99_us: 6000.0,
                    gc_units_moved: 0,
                    map_lookups: 0,
                    map_misses: 0,
                    cmt_pages: 0,
                    slice_scale: 0.5,
                    share: f64::NAN,
                    share_ideal: f64::NAN,
                    share_error: f64::NAN,
                    gc_share: 0.0,
                    gc_share_est: f64::NAN,
                    zone_resets: 0,
                    zone_errors: 0,
                },
            ],
            fairness,
            warnings: vec!["GC never ran during the measured period".into()],
            serve: None,
        }
    }

    /// A run in which nothing happened: no simulated time passed and no job did any I/O.
    pub(crate) fn empty_run() -> RunResults {
        let mut r = run();
        r.sim_time_ns = 0;
        r.events = 0;
        r.requests_issued = 0;
        r.requests_completed = 0;
        r.requests_in_flight = 0;
        r.device.waf = None;
        r.device.ftl = FtlStats::default();
        r.device.unowned_gc_units_moved = 0;
        r.device.precondition = PreconditionReport::default();
        r.timeline.clear();
        r.warnings.clear();
        for j in &mut r.jobs {
            *j = job(&j.name, j.clone, j.groupid);
        }
        r.fairness = Fairness::default();
        for t in &mut r.tenants {
            t.share = None;
            t.runtime_ns = 0;
            t.io = IoStats::default();
            t.gc_units_moved = 0;
            t.gc_erases = 0.0;
            t.map = MapStats::default();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_serde() {
        for s in [
            StopReason::AllJobsDone,
            StopReason::TimeLimit,
            StopReason::RequestLimit,
            StopReason::Interrupted,
            StopReason::ServerStopped,
        ] {
            assert_eq!(serde_json::to_value(s).ok(), Some(serde_json::Value::from(stop_reason_name(s))));
        }
        for &s in PreconditionState::ALL {
            assert_eq!(
                serde_json::to_value(s).ok(),
                Some(serde_json::Value::from(precondition_state_name(s)))
            );
        }
    }

    #[test]
    fn ratio_is_none_when_undefined() {
        assert_eq!(ratio(1.0, 4.0), Some(0.25));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
    }
}
