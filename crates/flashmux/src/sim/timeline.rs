//! Per-tenant activity per interval of simulated time.

use crate::config::Scenario;
use crate::device::IoOp;
use crate::metrics::{shares, LatStat, Share, TimelineRow};
use crate::units::{Nanos, SimTime, TenantId};

#[derive(Default)]
struct Acc {
    ios: [u64; 3],
    bytes: [u64; 3],
    lat: LatStat,
}

struct Row {
    start: SimTime,
    len: Nanos,
    tenant: usize,
    ios: [u64; 3],
    bytes: [u64; 3],
    lat_mean_ns: f64,
    lat_p99_ns: u64,
    delta: Counters,
    cmt_pages: u32,
    slice_scale: f64,
    /// GC cost charged to the tenant during the interval (`None`: the scheduler charges none).
    gc_charged_ns: Option<f64>,
}

/// A tenant's cumulative device-side counters at a moment; the timeline reports their changes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub gc_moved: u64,
    pub map_lookups: u64,
    pub map_misses: u64,
}

/// What the device says about a tenant at an interval's end.
#[derive(Clone, Copy, Debug, Default)]
pub struct Snapshot {
    pub totals: Counters,
    pub cmt_pages: u32,
    /// The host scheduler's slice multiplier for the tenant (`mcfq`'s MoTS scale; 1 otherwise).
    pub slice_scale: f64,
    /// GC cost charged to the tenant so far by a scheduler that charges it (hWA-BC).
    pub gc_charged_ns: Option<f64>,
}

pub struct Timeline {
    interval: Nanos,
    start: SimTime,
    acc: Vec<Acc>,
    last: Vec<Counters>,
    last_charged: Vec<f64>,
    rows: Vec<Row>,
}

impl Timeline {
    pub fn new(tenants: usize, interval: Nanos) -> Self {
        Timeline {
            interval,
            start: SimTime::ZERO,
            acc: (0..tenants).map(|_| Acc::default()).collect(),
            last: vec![Counters::default(); tenants],
            last_charged: vec![0.0; tenants],
            rows: Vec::new(),
        }
    }

    pub fn interval(&self) -> Nanos {
        self.interval
    }

    pub fn record(&mut self, tenant: TenantId, op: IoOp, bytes: u64, lat_ns: u64) {
        let a = &mut self.acc[tenant.index()];
        let d = op.index();
        a.ios[d] += 1;
        a.bytes[d] += bytes;
        a.lat.record(lat_ns);
    }

    /// Ends the interval at `now`; `snap[t]` is tenant t's device counters now.
    pub fn close_interval(&mut self, now: SimTime, snap: &[Snapshot]) {
        let len = now.since(self.start);
        for (t, a) in self.acc.iter_mut().enumerate() {
            let a = std::mem::take(a);
            let (now_c, last) = (snap[t].totals, self.last[t]);
            self.rows.push(Row {
                start: self.start,
                len,
                tenant: t,
                ios: a.ios,
                bytes: a.bytes,
                lat_mean_ns: a.lat.mean(),
                lat_p99_ns: a.lat.percentile(99.0),
                delta: Counters {
                    gc_moved: now_c.gc_moved - last.gc_moved,
                    map_lookups: now_c.map_lookups - last.map_lookups,
                    map_misses: now_c.map_misses - last.map_misses,
                },
                cmt_pages: snap[t].cmt_pages,
                slice_scale: snap[t].slice_scale,
                gc_charged_ns: snap[t].gc_charged_ns.map(|c| c - self.last_charged[t]),
            });
            self.last[t] = now_c;
            self.last_charged[t] = snap[t].gc_charged_ns.unwrap_or(0.0);
        }
        self.start = now;
    }

    /// Closes the last, possibly shorter interval if any time has passed in it.
    pub fn close_partial(&mut self, now: SimTime, snap: &[Snapshot]) {
        if now > self.start {
            self.close_interval(now, snap);
        }
    }

    /// The rows; `periods[t]` is tenant t's measured period (`None`: no demand), which decides
    /// the intervals in which its share is measured.
    pub fn into_rows(self, scenario: &Scenario, periods: &[Option<(SimTime, SimTime)>]) -> Vec<TimelineRow> {
        let weights: Vec<u32> = scenario.tenants.iter().map(|t| t.weight).collect();
        let mut out = Vec::with_capacity(self.rows.len());
        // Each interval closes with one row per tenant.
        for interval in self.rows.chunks(weights.len().max(1)) {
            let shares = interval_shares(interval, periods, &weights);
            let moved: f64 = interval.iter().map(|r| r.delta.gc_moved as f64).sum();
            let charged: f64 = interval.iter().filter_map(|r| r.gc_charged_ns).sum();
            out.extend(interval.iter().zip(shares).map(|(r, s)| {
                let mut row = row(scenario, r, s);
                row.gc_share = if moved > 0.0 { r.delta.gc_moved as f64 / moved } else { f64::NAN };
                row.gc_share_est = match r.gc_charged_ns {
                    Some(c) if charged > 0.0 => c / charged,
                    _ => f64::NAN,
                };
                row
            }));
        }
        out
    }
}

/// Each tenant's share of the bandwidth of one interval among the tenants whose measured periods
/// overlap it.
fn interval_shares(interval: &[Row], periods: &[Option<(SimTime, SimTime)>], weights: &[u32]) -> Vec<Option<Share>> {
    let bw: Vec<Option<f64>> = interval
        .iter()
        .map(|r| {
            let end = r.start + r.len;
            let bw = r.bytes.iter().sum::<u64>() as f64 / r.len.as_secs_f64();
            periods[r.tenant].filter(|&(b, e)| b < end && e > r.start).map(|_| bw)
        })
        .collect();
    shares(&bw, weights)
}

fn row(scenario: &Scenario, r: &Row, share: Option<Share>) -> TimelineRow {
    let secs = r.len.as_secs_f64();
    let per_s = |x: u64| if secs > 0.0 { x as f64 / secs } else { 0.0 };
    TimelineRow {
        time_s: r.start.as_secs_f64(),
        interval_s: secs,
        tenant: scenario.tenants[r.tenant].name.clone(),
        read_iops: per_s(r.ios[0]),
        write_iops: per_s(r.ios[1]),
        read_mbps: per_s(r.bytes[0]) / 1e6,
        write_mbps: per_s(r.bytes[1]) / 1e6,
        lat_mean_us: r.lat_mean_ns / 1e3,
        lat_p99_us: r.lat_p99_ns as f64 / 1e3,
        gc_units_moved: r.delta.gc_moved,
        map_lookups: r.delta.map_lookups,
        map_misses: r.delta.map_misses,
        cmt_pages: r.cmt_pages,
        slice_scale: r.slice_scale,
        share: share.map_or(f64::NAN, |s| s.achieved),
        share_ideal: share.map_or(f64::NAN, |s| s.ideal),
        share_error: share.map_or(f64::NAN, |s| s.error),
        gc_share: f64::NAN,
        gc_share_est: f64::NAN,
    }
}
