//! Measurement: latency statistics (exact mean/stddev/min/max, hdrhistogram percentiles), per
//! direction I/O counters, fairness of proportional sharing, and the result records every report
//! is written from.

mod fairness;
mod gc_contribution;
mod replay;
mod results;

pub use fairness::*;
pub use gc_contribution::*;
pub use replay::*;
pub use results::*;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Exact running statistics of a series: count, min, max, mean and variance (Welford's online
/// algorithm, as fio's `add_stat_sample` computes them; series merge exactly with Chan et al.'s
/// parallel formula).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moments {
    n: u64,
    min: u64,
    max: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    pub fn record(&mut self, v: u64) {
        if self.n == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.n += 1;
        let x = v as f64;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
    }

    pub fn merge(&mut self, o: &Moments) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        let n = self.n + o.n;
        let delta = o.mean - self.mean;
        self.mean += delta * o.n as f64 / n as f64;
        self.m2 += o.m2 + delta * delta * self.n as f64 * o.n as f64 / n as f64;
        self.n = n;
    }

    /// fio's `sum_stat` with `pure_sum` (how `group_reporting` adds bandwidth and IOPS sample
    /// series: "for group_reporting, we should just add those up, not make them the mean of
    /// everything"): min, max, mean, the sum of squares and the sample counts each add up.
    pub fn add_pure(&mut self, o: &Moments) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        self.min += o.min;
        self.max += o.max;
        self.n += o.n;
        self.mean += o.mean;
        self.m2 += o.m2;
    }

    pub fn count(&self) -> u64 {
        self.n
    }
    pub fn min(&self) -> u64 {
        self.min
    }
    pub fn max(&self) -> u64 {
        self.max
    }
    pub fn mean(&self) -> f64 {
        self.mean
    }
    /// Sample standard deviation (n − 1), as fio reports it; 0 for fewer than two samples.
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }
}

/// A job's bandwidth and IOPS sample series per direction (read, write, trim), as fio keeps
/// them: one sample per whole window of its measured period (`bw_avg_time`, `iops_avg_time`),
/// windows in which the direction completed nothing skipped ("No entries for interval"). Each
/// window is folded into running [`Moments`] when it closes, so the series costs the same
/// whatever the run's length.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Samples {
    /// KiB/s per window (`__add_samples` with `is_kb`: `delta * 1000 / spent / 1024`).
    pub bw_kib: [Moments; 3],
    /// Completions per second per window.
    pub iops: [Moments; 3],
}

impl Samples {
    /// A window of `window_ns` closed in which the job completed `s`.
    pub fn add_window(&mut self, s: &JobSample, window_ns: u64) {
        for d in 0..3 {
            if s.bytes[d] > 0 {
                self.bw_kib[d].record(per_sec_int(s.bytes[d], window_ns) / 1024);
            }
            if s.ios[d] > 0 {
                self.iops[d].record(per_sec_int(s.ios[d], window_ns));
            }
        }
    }

    /// The series of consecutive windows (tests).
    #[cfg(test)]
    pub fn of_windows(windows: &[JobSample], window_ns: u64) -> Samples {
        let mut s = Samples::default();
        windows.iter().for_each(|w| s.add_window(w, window_ns));
        s
    }

    /// Adds another job's series as fio's `group_reporting` does ([`Moments::add_pure`]).
    pub fn absorb(&mut self, o: &Samples) {
        for d in 0..3 {
            self.bw_kib[d].add_pure(&o.bw_kib[d]);
            self.iops[d].add_pure(&o.iops[d]);
        }
    }
}

/// `count` per second over `ns`, truncated to an integer as fio does for bytes/s and for the
/// IOPS of its text output; 0 for an empty interval.
pub fn per_sec_int(count: u64, ns: u64) -> u64 {
    if ns == 0 {
        return 0;
    }
    let r = u128::from(count) * 1_000_000_000 / u128::from(ns);
    u64::try_from(r).unwrap_or(u64::MAX)
}

/// Statistics of one latency series in nanoseconds: exact [`Moments`] and a histogram for
/// percentiles.
///
/// The histogram keeps two significant digits: 128 buckets per power of two, so a reported
/// percentile is at most 1/128 (0.78%) above the true value — fio's own resolution (its
/// `FIO_IO_U_PLAT_BITS` 6 gives "approximately 1/2^(6+1) of the value", `stat.h`). It is
/// allocated at the first sample, and grows with the largest value (about 9 KiB up to 1 ms,
/// 18 KiB up to 100 ms), so a series that never records costs a few words: a job's trim and
/// sync series, a read-only job's writes. A percentile is never reported outside the series'
/// exact `[min, max]` (a bucket's upper edge can pass the largest sample; fio never reports a
/// percentile above `max`).
#[derive(Clone, Debug, Default)]
pub struct LatStat {
    hist: Option<Box<Histogram<u64>>>,
    moments: Moments,
    /// Only the moments are kept (a series no report takes percentiles of): `percentile` is 0.
    moments_only: bool,
}

/// Significant digits of [`LatStat`]'s histogram.
const HIST_SIGFIG: u8 = 2;

/// fio's default completion-latency percentiles.
pub const FIO_PERCENTILES: [f64; 17] =
    [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99];

impl LatStat {
    /// A series whose percentiles no report needs (fio's `slat`: `slat_percentiles` is off by
    /// default): exact moments, no histogram.
    pub fn moments_only() -> LatStat {
        LatStat { moments_only: true, ..LatStat::default() }
    }

    pub fn record(&mut self, ns: u64) {
        self.moments.record(ns);
        if self.moments_only {
            return;
        }
        let hist = self.hist.get_or_insert_with(|| {
            Box::new(Histogram::new(HIST_SIGFIG).expect("2 significant digits is a valid histogram precision"))
        });
        // `record` grows the auto-resizing histogram; only values beyond its reach saturate.
        if hist.record(ns).is_err() {
            hist.saturating_record(ns);
        }
    }

    pub fn count(&self) -> u64 {
        self.moments.count()
    }
    pub fn min(&self) -> u64 {
        self.moments.min()
    }
    pub fn max(&self) -> u64 {
        self.moments.max()
    }
    pub fn mean(&self) -> f64 {
        self.moments.mean()
    }
    /// Sample standard deviation (n − 1), as fio reports it; 0 for fewer than two samples.
    pub fn stddev(&self) -> f64 {
        self.moments.stddev()
    }
    /// The value at percentile `p` (0–100), within `[min, max]`; 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        match &self.hist {
            Some(h) if self.count() > 0 => h.value_at_quantile(p / 100.0).clamp(self.min(), self.max()),
            _ => 0,
        }
    }
    /// Non-empty histogram buckets as (value, count), ascending — fio's `json+` bins. A bucket's
    /// value is its upper edge, except that none passes the series' maximum.
    pub fn bins(&self) -> Vec<(u64, u64)> {
        let Some(h) = &self.hist else {
            return Vec::new();
        };
        let max = self.max();
        h.iter_recorded().map(|v| (v.value_iterated_to().min(max), v.count_at_value())).collect()
    }

    /// Adds another series (for tenant aggregates). A moments-only series makes the sum
    /// moments-only.
    pub fn merge(&mut self, o: &LatStat) {
        if o.count() == 0 {
            return;
        }
        self.moments.merge(&o.moments);
        self.moments_only |= o.moments_only;
        if self.moments_only {
            self.hist = None;
            return;
        }
        let oh = o.hist.as_deref().expect("a series with samples that keeps percentiles has a histogram");
        match &mut self.hist {
            Some(h) => h.add(oh).expect("auto-resizing histograms of equal precision always merge"),
            None => self.hist = Some(Box::new(oh.clone())),
        }
    }

    /// Heap bytes held (the histogram's counts), for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.hist.as_ref().map_or(0, |h| h.distinct_values() * std::mem::size_of::<u64>())
    }

    pub fn summary(&self) -> LatSummary {
        LatSummary {
            n: self.count(),
            min_ns: self.min(),
            max_ns: self.max(),
            mean_ns: self.mean(),
            stddev_ns: self.stddev(),
            percentiles_ns: FIO_PERCENTILES.iter().map(|&p| (p, self.percentile(p))).collect(),
        }
    }
}

/// A latency series reduced to numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatSummary {
    pub n: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    pub stddev_ns: f64,
    /// (percentile, value) for [`FIO_PERCENTILES`].
    pub percentiles_ns: Vec<(f64, u64)>,
}

/// Completions per latency bucket as fio files them (`io_u_mark_latency`: `io_u_lat_n`,
/// `io_u_lat_u`, 10 buckets each, `io_u_lat_m`, 12), counted exactly at each completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatBuckets {
    /// Below 1 µs, by the lower bounds [`LAT_LOWER`] in ns.
    pub ns: [u64; 10],
    /// 1 µs to below 1 ms, by [`LAT_LOWER`] in µs.
    pub us: [u64; 10],
    /// From 1 ms, by [`LAT_LOWER`] in ms, then 1000–1999 ms and ≥ 2000 ms.
    pub ms: [u64; 12],
}

/// Lower bounds of fio's latency buckets within one unit (`io_u_mark_lat_nsec`/`_usec`/`_msec`).
pub const LAT_LOWER: [u64; 10] = [0, 2, 4, 10, 20, 50, 100, 250, 500, 750];

impl LatBuckets {
    pub fn record(&mut self, ns: u64) {
        let idx = |v: u64| LAT_LOWER.iter().rposition(|&lo| v >= lo).unwrap_or(0);
        if ns < 1_000 {
            self.ns[idx(ns)] += 1;
        } else if ns < 1_000_000 {
            self.us[idx(ns / 1_000)] += 1;
        } else {
            let i = match ns / 1_000_000 {
                2000.. => 11,
                1000..=1999 => 10,
                ms => idx(ms),
            };
            self.ms[i] += 1;
        }
    }

    pub fn merge(&mut self, o: &LatBuckets) {
        let pairs =
            self.ns.iter_mut().zip(&o.ns).chain(self.us.iter_mut().zip(&o.us)).chain(self.ms.iter_mut().zip(&o.ms));
        pairs.for_each(|(a, b)| *a += b);
    }
}

/// Counters and latencies of one direction (read, write or trim).
#[derive(Clone, Debug)]
pub struct DirStats {
    pub ios: u64,
    pub bytes: u64,
    /// Submission latency: from issue until the request is queued in the host block layer
    /// (moments only: no report takes its percentiles).
    pub slat: LatStat,
    /// Completion latency: from queued until the application sees the completion.
    pub clat: LatStat,
    /// Total latency: slat + clat.
    pub lat: LatStat,
    /// Completion latencies in fio's latency buckets.
    pub clat_buckets: LatBuckets,
}

impl Default for DirStats {
    fn default() -> Self {
        DirStats {
            ios: 0,
            bytes: 0,
            slat: LatStat::moments_only(),
            clat: LatStat::default(),
            lat: LatStat::default(),
            clat_buckets: LatBuckets::default(),
        }
    }
}

impl DirStats {
    pub fn record(&mut self, bytes: u64, slat_ns: u64, clat_ns: u64) {
        self.ios += 1;
        self.bytes += bytes;
        self.slat.record(slat_ns);
        self.clat.record(clat_ns);
        self.clat_buckets.record(clat_ns);
        self.lat.record(slat_ns + clat_ns);
    }
    /// An I/O of `bytes` that took no measured time (a file operation engine's, fio's
    /// `FIO_FAKEIO`): counted, without latency samples.
    pub fn count(&mut self, bytes: u64) {
        self.ios += 1;
        self.bytes += bytes;
    }
    /// A completion latency with no I/O of its own (a file operation engine's call, fio's
    /// `add_clat_sample` in its `open_file`): no submission or total latency.
    pub fn record_clat(&mut self, clat_ns: u64) {
        self.clat.record(clat_ns);
        self.clat_buckets.record(clat_ns);
    }
    pub fn merge(&mut self, o: &DirStats) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.slat.merge(&o.slat);
        self.clat.merge(&o.clat);
        self.clat_buckets.merge(&o.clat_buckets);
        self.lat.merge(&o.lat);
    }
}

/// Read, write and trim statistics of a job or tenant, and its syncs.
#[derive(Clone, Debug, Default)]
pub struct IoStats {
    pub read: DirStats,
    pub write: DirStats,
    pub trim: DirStats,
    /// Completion latency of each sync (`fsync`/`fdatasync`), fio's `sync_stat`. Syncs carry no
    /// data and are not in the counts and latencies of the three directions.
    pub sync: LatStat,
}

impl IoStats {
    pub fn dir_mut(&mut self, d: crate::workload::fio::Dir) -> &mut DirStats {
        match d {
            crate::workload::fio::Dir::Read => &mut self.read,
            crate::workload::fio::Dir::Write => &mut self.write,
            crate::workload::fio::Dir::Trim => &mut self.trim,
        }
    }
    pub fn merge(&mut self, o: &IoStats) {
        self.read.merge(&o.read);
        self.write.merge(&o.write);
        self.trim.merge(&o.trim);
        self.sync.merge(&o.sync);
    }
    pub fn ios(&self) -> u64 {
        self.read.ios + self.write.ios + self.trim.ios
    }
    pub fn bytes(&self) -> u64 {
        self.read.bytes + self.write.bytes + self.trim.bytes
    }
    /// Total latency over all directions.
    pub fn all_lat(&self) -> LatStat {
        let mut l = self.read.lat.clone();
        l.merge(&self.write.lat);
        l.merge(&self.trim.lat);
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_moments_and_percentiles() {
        let mut s = LatStat::default();
        for v in 1..=1000u64 {
            s.record(v * 1000);
        }
        assert_eq!(s.count(), 1000);
        assert_eq!(s.min(), 1000);
        assert_eq!(s.max(), 1_000_000);
        assert!((s.mean() - 500_500.0).abs() < 1e-6);
        // Sample stddev of 1000..=1_000_000 step 1000: 1000 × sqrt(1000·1001/12).
        let expect = 1000.0 * (1000.0f64 * 1001.0 / 12.0).sqrt();
        assert!((s.stddev() - expect).abs() < 1e-6, "{} vs {}", s.stddev(), expect);
        // Within fio's resolution (1/128) above the exact value.
        let p50 = s.percentile(50.0);
        assert!((500_000..=500_000 + 500_000 / 128).contains(&p50), "{p50}");
        let p99 = s.percentile(99.0);
        assert!((990_000..=990_000 + 990_000 / 128).contains(&p99), "{p99}");
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let mut a = LatStat::default();
        let mut b = LatStat::default();
        let mut all = LatStat::default();
        for v in 0..500u64 {
            let x = v * v % 977 + 3;
            if v % 3 == 0 {
                a.record(x)
            } else {
                b.record(x)
            }
            all.record(x);
        }
        a.merge(&b);
        assert_eq!(a.count(), all.count());
        assert_eq!((a.min(), a.max()), (all.min(), all.max()));
        assert!((a.mean() - all.mean()).abs() < 1e-9);
        assert!((a.stddev() - all.stddev()).abs() < 1e-9);
        assert_eq!(a.percentile(90.0), all.percentile(90.0));
    }

    #[test]
    fn percentiles_stay_within_min_and_max() {
        // 46,724 µs lies inside a bucket whose upper edge is above it: the bucket's edge must
        // not be reported as a percentile (fio never reports one above `max`).
        let mut s = LatStat::default();
        for v in [46_724_000u64, 46_700_000, 46_650_000, 1_000_000] {
            s.record(v);
        }
        for p in FIO_PERCENTILES {
            let v = s.percentile(p);
            assert!((s.min()..=s.max()).contains(&v), "p{p} = {v} outside [{}, {}]", s.min(), s.max());
        }
        assert_eq!(s.percentile(99.0), 46_724_000);
        assert!(s.bins().iter().all(|&(v, _)| v <= s.max()));
        // One value: every percentile is it.
        let mut one = LatStat::default();
        one.record(123_456_789);
        assert!(FIO_PERCENTILES.iter().all(|&p| one.percentile(p) == 123_456_789));
    }

    #[test]
    fn percentiles_have_fios_resolution() {
        // Within 1/128 of the true value (fio: "approximately 1/2^(FIO_IO_U_PLAT_BITS+1)").
        let mut s = LatStat::default();
        for v in 1..=100_000u64 {
            s.record(v * 37);
        }
        for p in [1.0, 10.0, 50.0, 90.0, 99.0, 99.9] {
            let exact = (p / 100.0 * 100_000.0f64).ceil() * 37.0;
            let got = s.percentile(p) as f64;
            assert!((got - exact).abs() <= exact / 128.0 + 37.0, "p{p}: {got} vs {exact}");
        }
    }

    #[test]
    fn a_series_without_samples_holds_no_histogram() {
        let mut s = LatStat::default();
        assert_eq!(s.heap_bytes(), 0);
        let mut other = LatStat::default();
        s.merge(&other);
        assert_eq!(s.heap_bytes(), 0);
        other.record(5_000_000); // 5 ms
        s.merge(&other);
        assert_eq!((s.count(), s.percentile(50.0)), (1, 5_000_000));
        // Two digits up to 5 ms: 16 powers of two of 128 buckets at most, 8 bytes each.
        assert!(s.heap_bytes() <= 24 * 128 * 8, "{}", s.heap_bytes());
    }

    #[test]
    fn group_reporting_adds_sample_series_as_fio() {
        // Job a: 2000, 4000 KiB/s; job b: 1000 KiB/s. fio's pure sum: min 3000, max 5000,
        // mean 3000 + 1000, samples 3, S 2e6 + 0.
        let w = |kib: u64| JobSample { bytes: [kib * 1024 / 2, 0, 0], ios: [1, 0, 0] };
        let mut a = Samples::of_windows(&[w(2000), w(4000)], 500_000_000);
        let b = Samples::of_windows(&[w(1000)], 500_000_000);
        a.absorb(&b);
        let bw = &a.bw_kib[0];
        assert_eq!((bw.min(), bw.max(), bw.count()), (3000, 5000, 3));
        assert_eq!(bw.mean(), 4000.0);
        assert!((bw.stddev() - (2e6f64 / 2.0).sqrt()).abs() < 1e-9);
        // A job without samples in a direction adds nothing there.
        let before = a;
        a.absorb(&Samples::default());
        assert_eq!(a, before);
    }

    #[test]
    fn fio_latency_buckets_are_exact() {
        let mut b = LatBuckets::default();
        // 1.999 ms is in "2" ms, 999.9 µs in "1000" µs, 2 s in ">=2000" ms.
        for ns in [999, 1_000, 999_999, 1_000_000, 1_999_999, 1_000_000_000, 2_000_000_000] {
            b.record(ns);
        }
        assert_eq!((b.ns[9], b.us[0], b.us[9], b.ms[0], b.ms[10], b.ms[11]), (1, 1, 1, 2, 1, 1));
    }

    #[test]
    fn submission_latency_keeps_moments_only() {
        let mut d = DirStats::default();
        d.record(4096, 1_500, 80_000);
        d.record(4096, 2_500, 90_000);
        assert_eq!((d.slat.count(), d.slat.min(), d.slat.max(), d.slat.mean()), (2, 1_500, 2_500, 2_000.0));
        assert_eq!(d.slat.heap_bytes(), 0);
        assert_eq!(d.clat.percentile(99.0), 90_000);
        let mut sum = DirStats::default();
        sum.merge(&d);
        sum.merge(&d);
        assert_eq!((sum.slat.count(), sum.slat.heap_bytes(), sum.clat.count()), (4, 0, 4));
    }

    #[test]
    fn empty_is_all_zero() {
        let s = LatStat::default();
        assert_eq!((s.count(), s.min(), s.max(), s.percentile(99.0)), (0, 0, 0, 0));
        assert_eq!(s.stddev(), 0.0);
    }
}
