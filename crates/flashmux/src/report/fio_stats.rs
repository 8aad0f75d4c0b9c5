//! The numbers fio derives from its raw counters before printing them, computed from a
//! [`RunResults`] exactly as fio's `stat.c` computes them, so the JSON and the text output agree
//! with each other and with fio.
//!
//! fio keeps its job times in whole milliseconds and divides by them (`bw = 1000 * io_bytes /
//! runtime_ms`). flashmux knows every time to the nanosecond, so rates here divide by the exact
//! runtime instead; the integer truncations fio applies to the *results* (bytes/s, KiB/s, IOPS in
//! the text output) are kept.

use crate::metrics::{DirStats, IoStats, JobResult, Moments, RunResults};
use std::collections::BTreeMap;

pub(super) const NS_PER_SEC: u64 = 1_000_000_000;
pub(super) const NS_PER_MS: u64 = 1_000_000;

/// What fio prints where a wall-clock time would go (`ctime` of the Unix epoch). A simulated run
/// has no meaningful wall-clock time, and printing the real one would make two runs of the same
/// scenario differ; the epoch keeps the field's format for parsers and the output reproducible.
pub(super) const EPOCH_CTIME: &str = "Thu Jan  1 00:00:00 1970";

/// An I/O direction, in fio's order (`DDIR_READ`, `DDIR_WRITE`, `DDIR_TRIM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dir {
    Read,
    Write,
    Trim,
}

pub(super) const DIRS: [Dir; 3] = [Dir::Read, Dir::Write, Dir::Trim];

impl Dir {
    /// fio's `io_ddir_name`.
    pub(super) fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
            Dir::Trim => "trim",
        }
    }

    /// Index into [`crate::metrics::JobSample`]'s per-direction arrays.
    pub(super) fn index(self) -> usize {
        match self {
            Dir::Read => 0,
            Dir::Write => 1,
            Dir::Trim => 2,
        }
    }

    pub(super) fn of(self, io: &IoStats) -> &DirStats {
        match self {
            Dir::Read => &io.read,
            Dir::Write => &io.write,
            Dir::Trim => &io.trim,
        }
    }
}

/// `count` per second over `ns`; 0 for an empty interval.
pub(super) fn per_sec(count: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        count as f64 * NS_PER_SEC as f64 / ns as f64
    }
}

pub(super) use crate::metrics::per_sec_int;

/// Whole milliseconds, truncated like fio's `mtime_since`.
pub(super) fn ms(ns: u64) -> u64 {
    ns / NS_PER_MS
}

/// The run's elapsed time in whole seconds, rounded up as fio's `get_jobs_eta` does
/// (`(mtime_since_genesis() + 999) / 1000`).
pub(super) fn elapsed_s(ns: u64) -> u64 {
    ns.div_ceil(NS_PER_SEC)
}

/// A direction's runtime. fio charges a job's runtime only to the directions that moved data
/// (`update_runtime` runs for a direction only when its `io_bytes` is non-zero), so an idle
/// direction reports runtime 0 and, from that, zero rates.
pub(super) fn dir_runtime_ns(job: &JobResult, d: Dir) -> u64 {
    if d.of(&job.io).bytes > 0 {
        job.runtime_ns
    } else {
        0
    }
}

/// One of fio's `struct io_stat` sample series (bandwidth or IOPS samples) as `calc_lat` reduces
/// it: min, max, mean and sample standard deviation (n − 1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct SampleStat {
    pub(super) min: u64,
    pub(super) max: u64,
    pub(super) mean: f64,
    pub(super) dev: f64,
    pub(super) samples: u64,
}

impl SampleStat {
    fn of(m: &Moments) -> SampleStat {
        SampleStat { min: m.min(), max: m.max(), mean: m.mean(), dev: m.stddev(), samples: m.count() }
    }
}

/// fio's `bw_stat` for one direction: one sample per window in KiB/s, windows in which the
/// direction completed nothing skipped ([`crate::metrics::Samples`]).
pub(super) fn bw_samples(job: &JobResult, d: Dir) -> SampleStat {
    SampleStat::of(&job.samples.bw_kib[d.index()])
}

/// fio's `iops_stat` for one direction: completions per second of each window, windows without
/// completions skipped.
pub(super) fn iops_samples(job: &JobResult, d: Dir) -> SampleStat {
    SampleStat::of(&job.samples.iops[d.index()])
}

/// One direction of fio's `struct group_run_stats`, as `__show_run_stats` fills it from the
/// group's jobs (a job counts in a direction only if it has a runtime there).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct GroupDir {
    pub(super) iobytes: u64,
    pub(super) min_run_ns: u64,
    pub(super) max_run_ns: u64,
    /// Slowest and fastest job, bytes/s.
    pub(super) min_bw: u64,
    pub(super) max_bw: u64,
}

impl GroupDir {
    /// The group's aggregate bandwidth, bytes/s: all its bytes over its longest runtime.
    pub(super) fn agg(&self) -> u64 {
        per_sec_int(self.iobytes, self.max_run_ns)
    }
}

/// fio's run-status groups (`groupid`), each with its read, write and trim totals.
pub(super) fn group_stats(r: &RunResults) -> BTreeMap<u32, [GroupDir; 3]> {
    let mut groups: BTreeMap<u32, [GroupDir; 3]> = BTreeMap::new();
    for job in &r.jobs {
        let g = groups.entry(job.groupid).or_default();
        for d in DIRS {
            let run = dir_runtime_ns(job, d);
            if run == 0 {
                continue;
            }
            let gd = &mut g[d.index()];
            let bw = per_sec_int(d.of(&job.io).bytes, run);
            if gd.max_run_ns == 0 {
                *gd = GroupDir { iobytes: 0, min_run_ns: run, max_run_ns: run, min_bw: bw, max_bw: bw };
            } else {
                gd.min_run_ns = gd.min_run_ns.min(run);
                gd.max_run_ns = gd.max_run_ns.max(run);
                gd.min_bw = gd.min_bw.min(bw);
                gd.max_bw = gd.max_bw.max(bw);
            }
            gd.iobytes = gd.iobytes.saturating_add(d.of(&job.io).bytes);
        }
    }
    groups
}

/// A job's share of its group's bandwidth in percent (`bw_agg` / `per=`), fio's
/// `convert_agg_kbytes_percent`: the mean of its bandwidth samples, truncated to whole KiB/s (fio
/// passes it as an `int`), over the group's aggregate in KiB/s, capped at 100. 0 without samples.
pub(super) fn bw_agg_percent(group: &GroupDir, bw: &SampleStat) -> f64 {
    if bw.samples == 0 {
        return 0.0;
    }
    let agg = group.agg();
    if agg <= 1024 {
        return 100.0;
    }
    (bw.mean.trunc() * 100.0 / (agg as f64 / 1024.0)).min(100.0)
}

/// Upper bounds of fio's latency distribution buckets (`io_u_lat_n`, `_u`: 10 each; `_m`: 12),
/// exactly as fio names them in its JSON keys and `lat (usec)   : 250=...` lines. A bucket holds
/// the latencies from the previous bound up to (excluding) its own.
pub(super) const LAT_KEYS_NS_US: [&str; 10] = ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"];
pub(super) const LAT_KEYS_MS: [&str; 12] =
    ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000"];

/// Percentage of I/Os per latency bucket, per unit: fio's `latency_ns`, `latency_us`,
/// `latency_ms` objects.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct LatDist {
    pub(super) ns: [f64; 10],
    pub(super) us: [f64; 10],
    pub(super) ms: [f64; 12],
}

/// fio files every I/O into these buckets by its **completion** latency (`account_io_completion`
/// calls `io_u_mark_latency` with the clat) and divides by the job's I/O count
/// (`stat_calc_lat`); nonzero shares below 0.01% print as 0.01.
pub(super) fn lat_dist(io: &IoStats) -> LatDist {
    let mut counts = LatDist::default();
    let mut total = 0u64;
    for d in DIRS {
        let s = d.of(io);
        total += s.clat.count();
        let b = &s.clat_buckets;
        let add = |to: &mut [f64], from: &[u64]| to.iter_mut().zip(from).for_each(|(t, &f)| *t += f as f64);
        add(&mut counts.ns, &b.ns);
        add(&mut counts.us, &b.us);
        add(&mut counts.ms, &b.ms);
    }
    let pct = |c: &mut f64| {
        let raw = *c;
        *c = if total == 0 { 0.0 } else { raw * 100.0 / total as f64 };
        if raw > 0.0 && *c < 0.01 {
            *c = 0.01;
        }
    };
    counts.ns.iter_mut().chain(counts.us.iter_mut()).chain(counts.ms.iter_mut()).for_each(pct);
    counts
}

/// Keys of fio's `iodepth_level` object and `IO depths` line.
pub(super) const DEPTH_KEYS: [&str; 7] = ["1", "2", "4", "8", "16", "32", ">=64"];
/// Keys of fio's `iodepth_submit` / `iodepth_complete` objects.
pub(super) const BATCH_KEYS: [&str; 7] = ["0", "4", "8", "16", "32", "64", ">=64"];

/// fio's `io_u_mark_depth` buckets: 1, 2–3, 4–7, 8–15, 16–31, 32–63, ≥64.
fn depth_bucket(depth: u32) -> usize {
    match depth {
        0..=1 => 0,
        2..=3 => 1,
        4..=7 => 2,
        8..=15 => 3,
        16..=31 => 4,
        32..=63 => 5,
        _ => 6,
    }
}

/// fio's I/O depth distribution in percent (`stat_calc_dist`: nonzero shares below 0.1% print as
/// 0.1), from the job's `(depth, fraction)` pairs. Each depth is filed into fio's bucket for that
/// depth, so pairs keyed by fio's own bucket labels (1, 2, 4, …, 64) map onto themselves.
pub(super) fn iodepth_dist(job: &JobResult) -> [f64; 7] {
    let mut dist = [0.0; 7];
    for &(depth, frac) in &job.iodepth_levels {
        if frac.is_finite() && frac > 0.0 {
            dist[depth_bucket(depth)] += frac * 100.0;
        }
    }
    for v in &mut dist {
        if *v > 0.0 && *v < 0.1 {
            *v = 0.1;
        }
    }
    dist
}

/// fio's submit and complete batch distributions (`io_u_mark_submit` / `io_u_mark_complete`):
/// flashmux issues and reaps every request on its own (`iodepth_batch*` are accepted but not
/// modelled), which fio counts in its 1–4 bucket, keyed "4". All zero for a job without I/O, as
/// in fio.
pub(super) fn batch_dist(job: &JobResult) -> [f64; 7] {
    let mut dist = [0.0; 7];
    if job.io.ios() > 0 {
        dist[1] = 100.0;
    }
    dist
}

/// fio's `latency_depth`: the job's queue depth (`td->latency_qd` starts at `iodepth` and only
/// changes under `latency_target`, which flashmux does not model), read from the job's echoed
/// options; fio's default of 1 when the job does not set it.
pub(super) fn latency_depth(job: &JobResult) -> u64 {
    job.iodepth as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{JobSample, Samples};
    use crate::report::test_fixture::{job, run};

    #[test]
    fn rates_guard_zero_time() {
        assert_eq!(per_sec(10, 0), 0.0);
        assert_eq!(per_sec_int(10, 0), 0);
        assert_eq!(per_sec_int(u64::MAX, 1), u64::MAX);
        assert_eq!(per_sec_int(3, 2 * NS_PER_SEC), 1);
        assert_eq!(elapsed_s(0), 0);
        assert_eq!(elapsed_s(1), 1);
        assert_eq!(elapsed_s(5 * NS_PER_SEC), 5);
        assert_eq!(elapsed_s(5 * NS_PER_SEC + 1), 6);
    }

    #[test]
    fn sample_stats_skip_idle_windows_and_truncate_like_fio() {
        let mut j = job("j", 0, 0);
        j.sample_interval_ns = 500 * NS_PER_MS;
        j.samples = Samples::of_windows(
            &[
                JobSample { bytes: [1_024_000, 0, 0], ios: [250, 0, 0] },
                JobSample { bytes: [1_024_000, 0, 0], ios: [250, 0, 0] },
                JobSample { bytes: [2_048_000, 0, 0], ios: [500, 0, 0] },
                JobSample { bytes: [0, 0, 0], ios: [0, 0, 0] },
                // 1000 bytes in 0.5 s = 2000 B/s = 1.95 KiB/s, truncated to 1.
                JobSample { bytes: [0, 1000, 0], ios: [0, 1, 0] },
            ],
            500_000_000,
        );
        let bw = bw_samples(&j, Dir::Read);
        assert_eq!((bw.min, bw.max, bw.samples), (2000, 4000, 3));
        assert!((bw.mean - 8000.0 / 3.0).abs() < 1e-9);
        // Sample stddev of {2000, 2000, 4000}.
        assert!((bw.dev - (4_000_000.0f64 / 3.0).sqrt()).abs() < 1e-9, "{}", bw.dev);
        let iops = iops_samples(&j, Dir::Read);
        assert_eq!((iops.min, iops.max, iops.samples), (500, 1000, 3));
        assert!((iops.dev - (250_000.0f64 / 3.0).sqrt()).abs() < 1e-9);
        let w = bw_samples(&j, Dir::Write);
        assert_eq!((w.min, w.max, w.samples, w.dev), (1, 1, 1, 0.0));
        assert_eq!(bw_samples(&j, Dir::Trim), SampleStat::default());
    }

    #[test]
    fn agg_percent_as_fio() {
        let g = GroupDir { iobytes: 4096 * 1000, min_run_ns: 1, max_run_ns: NS_PER_SEC, min_bw: 0, max_bw: 0 };
        // agg = 4000 KiB/s; mean 1000.9 truncates to 1000 → 25%.
        let s = SampleStat { min: 0, max: 0, mean: 1000.9, dev: 0.0, samples: 2 };
        assert!((bw_agg_percent(&g, &s) - 25.0).abs() < 1e-12);
        let big = SampleStat { mean: 9000.0, ..s };
        assert_eq!(bw_agg_percent(&g, &big), 100.0);
        assert_eq!(bw_agg_percent(&g, &SampleStat::default()), 0.0);
        assert_eq!(bw_agg_percent(&GroupDir::default(), &s), 100.0);
    }

    #[test]
    fn groups_collect_runtimes_and_bandwidths() {
        let r = run();
        let g = group_stats(&r);
        assert_eq!(g.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
        let read = g[&0][Dir::Read.index()];
        // Fixture: job a0 reads 4 MB in 2 s, a1 8 MB in 4 s (group 0).
        assert_eq!(read.iobytes, 3 * 4_096_000);
        assert_eq!((read.min_run_ns, read.max_run_ns), (2 * NS_PER_SEC, 4 * NS_PER_SEC));
        assert_eq!((read.min_bw, read.max_bw), (2_048_000, 2_048_000));
        assert_eq!(read.agg(), 3 * 4_096_000 / 4);
        assert_eq!(g[&0][Dir::Trim.index()], GroupDir::default());
    }

    #[test]
    fn latency_buckets_follow_fio_bounds() {
        let mut io = IoStats::default();
        // clat values: 1 ns → "2" ns; 407 ns → "500" ns; 5 µs → "10" µs; 999 µs → "1000" µs;
        // 1.5 ms → "2" ms; 1999 ms → "2000" ms; 3 s → ">=2000" ms; and 93 more at 100 µs.
        for v in [1, 407, 5_000, 999_000, 1_500_000, 1_999_000_000, 3_000_000_000] {
            io.read.record(4096, 0, v);
        }
        for _ in 0..93 {
            io.write.record(4096, 0, 100_000);
        }
        let d = lat_dist(&io);
        let nonzero =
            |a: &[f64]| a.iter().enumerate().filter(|(_, &v)| v > 0.0).map(|(i, &v)| (i, v)).collect::<Vec<_>>();
        assert_eq!(nonzero(&d.ns), vec![(0, 1.0), (7, 1.0)]);
        assert_eq!(nonzero(&d.us), vec![(2, 1.0), (6, 93.0), (9, 1.0)]);
        assert_eq!(nonzero(&d.ms), vec![(0, 1.0), (10, 1.0), (11, 1.0)]);
        assert_eq!(lat_dist(&IoStats::default()), LatDist::default());
    }

    #[test]
    fn small_latency_shares_show_as_a_hundredth() {
        let mut io = IoStats::default();
        io.read.record(1, 0, 500);
        for _ in 0..20_000 {
            io.read.record(1, 0, 50_000);
        }
        let d = lat_dist(&io);
        assert_eq!(d.ns[8], 0.01);
    }

    #[test]
    fn iodepth_buckets_and_floor() {
        let mut j = job("j", 0, 0);
        j.iodepth_levels = vec![(1, 0.0005), (3, 0.1), (16, 0.5), (20, 0.3995), (100, 0.0), (64, f64::NAN)];
        let d = iodepth_dist(&j);
        assert_eq!(d[0], 0.1);
        assert!((d[1] - 10.0).abs() < 1e-9);
        assert!((d[4] - 89.95).abs() < 1e-9);
        assert_eq!((d[2], d[3], d[5], d[6]), (0.0, 0.0, 0.0, 0.0));
    }

    #[test]
    fn latency_depth_is_the_jobs_iodepth() {
        let mut j = job("j", 0, 0);
        assert_eq!(latency_depth(&j), 1);
        j.iodepth = 32;
        assert_eq!(latency_depth(&j), 32);
    }
}
