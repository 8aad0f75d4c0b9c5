//! The results of a run: everything every report (fio JSON, text, table, timeline CSV) is written
//! from. Plain data; no model state.

use super::{AloneBaseline, Fairness, IoStats, LatSummary, Samples, Share};
pub use crate::device::{CmtReport, DeviceResult};
use crate::device::TenantDeviceStats;
use crate::ftl::MapStats;
use crate::host::{MergeStats, SchedTenantStats};
use serde::Serialize;

/// Why the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// Every job finished its work.
    AllJobsDone,
    /// The scenario's simulated-time limit was reached.
    TimeLimit,
    /// The scenario's completed-request limit was reached.
    RequestLimit,
    /// The user stopped the run (Ctrl-C); results are partial.
    Interrupted,
    /// `serve` was stopped (SIGINT, SIGTERM) after answering every request it had taken: the
    /// results cover the whole time it served.
    ServerStopped,
}

#[derive(Clone, Debug)]
pub struct RunResults {
    /// flashmux's version.
    pub version: String,
    pub seed: u64,
    /// SHA-256 (hex) of the resolved configuration.
    pub config_hash: String,
    pub scenario: String,
    /// Options of the `[global]` sections of the job files, as fio prints them under
    /// `"global options"` (empty when there were none).
    pub global_options: Vec<(String, String)>,
    pub sim_time_ns: u64,
    pub stop_reason: StopReason,
    /// Events the engine processed.
    pub events: u64,
    pub requests_issued: u64,
    pub requests_completed: u64,
    /// Issued but not completed when the run stopped (issued = completed + in flight).
    pub requests_in_flight: u64,
    pub jobs: Vec<JobResult>,
    pub tenants: Vec<TenantResult>,
    pub device: DeviceResult,
    /// The host CPU and virtualization path, when modelled.
    pub virt: Option<crate::virt::VirtResult>,
    /// The kernels above the block layer (`[kernel]`): their page caches and device requests.
    pub kernel: Option<Vec<crate::kernel::kernels::KernelResult>>,
    /// The host FTL on a zoned drive (`[host.zoned_ftl]`): its write amplification and GC.
    pub host_ftl: Option<crate::host::zoned_ftl::HostFtlReport>,
    /// The Filebench tenants' own figures, per flowop and fileset.
    pub filebench: Vec<crate::sim::FilebenchResult>,
    pub timeline_interval_ns: u64,
    pub timeline: Vec<TimelineRow>,
    /// Bandwidth shares against the tenants' weights (and slowdowns, with an alone baseline).
    pub fairness: Fairness,
    /// Things the user should know (e.g. "GC never ran during the measured period").
    pub warnings: Vec<String>,
    /// What `flashmux serve` did, when the run was served.
    pub serve: Option<ServeResult>,
}

/// A served run: the server's side of it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServeResult {
    /// Where it listened: `unix:PATH` or `tcp:ADDR`.
    pub listen: String,
    /// `per-connection` or `single`.
    pub io_threads: String,
    /// Whether replies waited for the model's completion time (`--timing on`).
    pub timing: bool,
    /// Wall-clock seconds served.
    pub wall_s: f64,
    pub connections: u64,
    /// Connections refused because `--max-connections` were being served.
    pub connections_refused: u64,
    /// Connections dropped because their client took none of its replies for the idle timeout.
    pub connections_dropped: u64,
    /// Handshakes closed unfinished: past the handshake timeout, or the oldest of
    /// `--max-connections` unfinished ones when another connection came.
    pub handshakes_timed_out: u64,
    pub handshakes_evicted: u64,
    /// Times a connection stopped reading requests until there was room for their replies.
    pub read_pauses: u64,
    /// Reply bytes owed to clients at most at once (replies to come, queued and being written),
    /// and the bounds: per connection, and for all together (`--reply-memory`).
    pub reply_bytes_peak: u64,
    pub reply_bytes_per_connection: u64,
    pub reply_bytes_limit: u64,
    /// Requests answered, and of those, answered with an error.
    pub requests: u64,
    pub errors: u64,
    /// Actual reply time − the model's completion time, in ns (with timing on).
    pub timing_error_ns: Option<Quantiles>,
}

/// A latency-like series in ns: how many, mean, median, 99th percentile and maximum.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Quantiles {
    pub count: u64,
    pub mean: f64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

/// One fio job clone.
#[derive(Clone, Debug)]
pub struct JobResult {
    pub name: String,
    /// I/Os that failed (a zoned drive's write-pointer checks), and fio's `error` for the
    /// first: the errno Linux returns for its NVMe status.
    pub errors: u64,
    pub error: i32,
    /// Zone Management commands the job issued and the drive completed (fio's zone resets
    /// and finishes on a zoned drive): requests, but not I/O fio reports.
    pub zone_commands: u64,
    /// Clone number within `numjobs` (0-based); the first member's for a merged group.
    pub clone: u32,
    /// Job clones reported in this entry: 1, or more under fio's `group_reporting`.
    pub members: u32,
    /// fio group (stonewall / new_group).
    pub groupid: u32,
    pub tenant: String,
    pub tenant_index: usize,
    /// The job's options as fio echoes them in `"job options"` (its own section's).
    pub options: Vec<(String, String)>,
    /// The job's iodepth (also when set in a `[global]` section).
    pub iodepth: u32,
    /// Measured time: from the job's start (after `ramp_time`) to its end or the run's stop.
    pub runtime_ns: u64,
    pub io: IoStats,
    /// Distribution of the job's in-flight count sampled at each issue: (depth bucket, fraction).
    pub iodepth_levels: Vec<(u32, f64)>,
    /// fio's bandwidth/IOPS sampling window (`bw_avg_time`, `iops_avg_time`: 500 ms).
    pub sample_interval_ns: u64,
    /// Its bandwidth and IOPS samples: one per whole sample window of its measured period.
    pub samples: Samples,
}

impl JobResult {
    /// Adds another job's results to this entry (fio's `group_reporting`): I/O statistics add
    /// up, sample series add up as fio adds them (`sum_stat` with `pure_sum`), the runtime is
    /// the longest, the depth
    /// distribution is weighted by completed I/Os.
    pub fn absorb(&mut self, o: &JobResult) {
        let (w_self, w_o) = (self.io.ios() as f64, o.io.ios() as f64);
        let total = w_self + w_o;
        if total > 0.0 {
            let frac = |levels: &[(u32, f64)], d: u32| levels.iter().find(|e| e.0 == d).map_or(0.0, |e| e.1);
            let mut depths: Vec<u32> = self.iodepth_levels.iter().chain(&o.iodepth_levels).map(|e| e.0).collect();
            depths.sort_unstable();
            depths.dedup();
            self.iodepth_levels = depths
                .into_iter()
                .map(|d| (d, (frac(&self.iodepth_levels, d) * w_self + frac(&o.iodepth_levels, d) * w_o) / total))
                .collect();
        }
        self.io.merge(&o.io);
        self.members += o.members;
        // fio's group keeps the first member's error (`sum_thread_stats`: `if (!dst->error)`).
        self.errors += o.errors;
        self.zone_commands += o.zone_commands;
        if self.error == 0 {
            self.error = o.error;
        }
        self.runtime_ns = self.runtime_ns.max(o.runtime_ns);
        self.iodepth = self.iodepth.max(o.iodepth);
        self.samples.absorb(&o.samples);
    }
}

/// Completions of one job in one sample window, per direction (read, write, trim).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobSample {
    pub bytes: [u64; 3],
    pub ios: [u64; 3],
}

/// One tenant (VM or container): all its jobs, plus what the device did on its behalf.
#[derive(Clone, Debug)]
pub struct TenantResult {
    pub name: String,
    pub index: usize,
    /// Indices into [`RunResults::jobs`].
    pub jobs: Vec<usize>,
    /// Bytes of the device's logical space the tenant may address: (offset, length).
    pub region: (u64, u64),
    /// Proportional-share weight (1..=1000).
    pub weight: u32,
    /// Its bandwidth share over the tenants' common measured interval; `None` when it is not
    /// counted (no demand) or no share is defined.
    pub share: Option<Share>,
    /// Longest runtime among its jobs.
    pub runtime_ns: u64,
    pub io: IoStats,
    /// Valid mapping units GC copied that this tenant had written (the ownership ledger): the
    /// GC it suffered.
    pub gc_units_moved: u64,
    /// Valid mapping units GC copied, of anyone's data, in planes this tenant's writes pushed to
    /// their GC threshold: the GC it caused.
    pub gc_units_caused: u64,
    /// Block erases attributed to the tenant (its share of each erased block's units).
    pub gc_erases: f64,
    pub map: MapStats,
    pub device: TenantDeviceStats,
    /// What the host scheduler did for the tenant (`None` under `none`, which keeps no
    /// per-tenant state).
    pub sched: Option<SchedTenantStats>,
    /// What the host block layer's elevator merged for the tenant (`None` when there is no
    /// elevator: the `none` scheduler, or `nomerges = 2`).
    pub merges: Option<MergeStats>,
    /// A trace tenant's replay: what was read, skipped and how far it fell behind.
    pub replay: Option<super::ReplayStats>,
    /// Its zone commands and their failures, on a zoned drive.
    pub zones: Option<crate::device::TenantZoneStats>,
}

/// One tenant's activity in one timeline interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineRow {
    /// Interval start, seconds of simulated time.
    pub time_s: f64,
    /// Interval length in seconds (the last one may be shorter).
    pub interval_s: f64,
    pub tenant: String,
    pub read_iops: f64,
    pub write_iops: f64,
    pub read_mbps: f64,
    pub write_mbps: f64,
    /// Mean and 99th percentile of total latency of requests completed in the interval, µs.
    pub lat_mean_us: f64,
    pub lat_p99_us: f64,
    /// Units GC moved from this tenant's data during the interval.
    pub gc_units_moved: u64,
    /// Translation-page lookups and misses during the interval.
    pub map_lookups: u64,
    pub map_misses: u64,
    /// Map-cache pages held on the tenant's behalf at the interval's end.
    pub cmt_pages: u32,
    /// The host scheduler's slice multiplier for the tenant at the interval's end (`mcfq`'s
    /// MoTS scale; 1 under other schedulers).
    pub slice_scale: f64,
    /// Bytes completed in the interval as a fraction of those of the tenants whose measured
    /// periods overlap it, the fraction the weights give, and the relative error; NaN when the
    /// tenant's period does not overlap the interval or nothing completed in it.
    pub share: f64,
    pub share_ideal: f64,
    pub share_error: f64,
    /// Of the units GC moved from tenants' data during the interval, the fraction that was this
    /// tenant's (NaN when GC moved none).
    pub gc_share: f64,
    /// Of the GC cost hWA-BC charged during the interval, the fraction charged to this tenant
    /// (NaN under other schedulers, or when none was charged).
    pub gc_share_est: f64,
    /// On a zoned drive: the tenant's Zone Resets that emptied a zone, and its commands the
    /// drive failed (write-pointer errors and the like), in the interval; 0 on other drives.
    pub zone_resets: u64,
    pub zone_errors: u64,
}

impl TenantResult {
    /// Bytes (reads, writes and trims) per second over its runtime (at least 1 ns).
    pub fn bw_bytes_per_sec(&self) -> f64 {
        self.io.bytes() as f64 / (self.runtime_ns.max(1) as f64 / 1e9)
    }

    /// Latency summary over all directions.
    pub fn lat_summary(&self) -> LatSummary {
        self.io.all_lat().summary()
    }

    /// Mean total latency (slat + clat) over all its I/O; `None` without I/O.
    pub fn lat_mean_ns(&self) -> Option<f64> {
        let lat = self.io.all_lat();
        (lat.count() > 0).then(|| lat.mean())
    }
}

impl RunResults {
    /// hWA-BC's judged GC contribution of each tenant next to the true one; `None` unless the
    /// scheduler charges GC by contribution and has charged some.
    pub fn gc_contributions(&self) -> Option<Vec<super::GcContribution>> {
        let charged: Vec<Option<f64>> = self.tenants.iter().map(|t| t.sched.and_then(|s| s.gc_charged_ns)).collect();
        let moved: Vec<u64> = self.tenants.iter().map(|t| t.gc_units_moved).collect();
        super::gc_contributions(&charged, &moved)
    }

    /// Adds slowdowns against runs of each tenant alone: `alone[i]` is the run of
    /// [`Scenario::alone`](crate::config::Scenario::alone)`(i)`; a tenant without its alone run
    /// has no slowdown.
    pub fn add_alone_baseline(&mut self, alone: &[RunResults]) {
        let shared: Vec<Option<f64>> = self.tenants.iter().map(TenantResult::lat_mean_ns).collect();
        let alone: Vec<Option<f64>> = (0..self.tenants.len())
            .map(|i| alone.get(i).and_then(|r| r.tenants.get(i)).and_then(TenantResult::lat_mean_ns))
            .collect();
        self.fairness.baseline = Some(AloneBaseline::new(&shared, &alone));
    }
}
