//! Measurement: latency statistics (exact mean/stddev/min/max, hdrhistogram percentiles), per
//! direction I/O counters, fairness of proportional sharing, and the result records every report
//! is written from.

mod fairness;
mod gc_contribution;
mod results;

pub use fairness::*;
pub use gc_contribution::*;
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

/// Statistics of one latency series in nanoseconds: exact [`Moments`] and a histogram with
/// three significant digits for percentiles.
#[derive(Clone, Debug)]
pub struct LatStat {
    hist: Histogram<u64>,
    moments: Moments,
}

impl Default for LatStat {
    fn default() -> Self {
        LatStat {
            hist: Histogram::new(3).expect("3 significant digits is a valid histogram precision"),
            moments: Moments::default(),
        }
    }
}

/// fio's default completion-latency percentiles.
pub const FIO_PERCENTILES: [f64; 17] =
    [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99];

impl LatStat {
    pub fn record(&mut self, ns: u64) {
        // `record` grows the auto-resizing histogram; only values beyond its reach saturate.
        if self.hist.record(ns).is_err() {
            self.hist.saturating_record(ns);
        }
        self.moments.record(ns);
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
    /// The value at percentile `p` (0–100); 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count() == 0 {
            return 0;
        }
        self.hist.value_at_quantile(p / 100.0)
    }
    /// Non-empty histogram buckets as (value, count), ascending — fio's `json+` bins.
    pub fn bins(&self) -> Vec<(u64, u64)> {
        self.hist.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect()
    }

    /// Adds another series (for tenant aggregates).
    pub fn merge(&mut self, o: &LatStat) {
        if o.count() == 0 {
            return;
        }
        self.hist.add(&o.hist).expect("auto-resizing histograms of equal precision always merge");
        self.moments.merge(&o.moments);
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

/// Counters and latencies of one direction (read, write or trim).
#[derive(Clone, Debug, Default)]
pub struct DirStats {
    pub ios: u64,
    pub bytes: u64,
    /// Submission latency: from issue until the request is queued in the host block layer.
    pub slat: LatStat,
    /// Completion latency: from queued until the application sees the completion.
    pub clat: LatStat,
    /// Total latency: slat + clat.
    pub lat: LatStat,
}

impl DirStats {
    pub fn record(&mut self, bytes: u64, slat_ns: u64, clat_ns: u64) {
        self.ios += 1;
        self.bytes += bytes;
        self.slat.record(slat_ns);
        self.clat.record(clat_ns);
        self.lat.record(slat_ns + clat_ns);
    }
    pub fn merge(&mut self, o: &DirStats) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.slat.merge(&o.slat);
        self.clat.merge(&o.clat);
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
        let p50 = s.percentile(50.0);
        assert!((499_000..=501_000).contains(&p50), "{p50}");
        let p99 = s.percentile(99.0);
        assert!((989_000..=991_000).contains(&p99), "{p99}");
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let mut a = LatStat::default();
        let mut b = LatStat::default();
        let mut all = LatStat::default();
        for v in 0..500u64 {
            let x = v * v % 977 + 3;
            if v % 3 == 0 { a.record(x) } else { b.record(x) }
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
    fn empty_is_all_zero() {
        let s = LatStat::default();
        assert_eq!((s.count(), s.min(), s.max(), s.percentile(99.0)), (0, 0, 0, 0));
        assert_eq!(s.stddev(), 0.0);
    }
}
