//! Per-tenant activity per interval of simulated time.

use crate::config::Scenario;
use crate::device::IoOp;
use crate::metrics::{LatStat, TimelineRow};
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
    gc_moved: u64,
}

pub struct Timeline {
    interval: Nanos,
    start: SimTime,
    acc: Vec<Acc>,
    last_gc: Vec<u64>,
    rows: Vec<Row>,
}

impl Timeline {
    pub fn new(tenants: usize, interval: Nanos) -> Self {
        Timeline {
            interval,
            start: SimTime::ZERO,
            acc: (0..tenants).map(|_| Acc::default()).collect(),
            last_gc: vec![0; tenants],
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

    /// Ends the interval at `now`; `gc_total[t]` is tenant t's GC-moved units so far.
    pub fn close_interval(&mut self, now: SimTime, gc_total: &[u64]) {
        let len = now.since(self.start);
        for (t, a) in self.acc.iter_mut().enumerate() {
            let a = std::mem::take(a);
            self.rows.push(Row {
                start: self.start,
                len,
                tenant: t,
                ios: a.ios,
                bytes: a.bytes,
                lat_mean_ns: a.lat.mean(),
                lat_p99_ns: a.lat.percentile(99.0),
                gc_moved: gc_total[t] - self.last_gc[t],
            });
            self.last_gc[t] = gc_total[t];
        }
        self.start = now;
    }

    /// Closes the last, possibly shorter interval if any time has passed in it.
    pub fn close_partial(&mut self, now: SimTime, gc_total: &[u64]) {
        if now > self.start {
            self.close_interval(now, gc_total);
        }
    }

    pub fn into_rows(self, scenario: &Scenario) -> Vec<TimelineRow> {
        self.rows
            .into_iter()
            .map(|r| {
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
                    gc_units_moved: r.gc_moved,
                }
            })
            .collect()
    }
}
