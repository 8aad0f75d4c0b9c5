//! Per-tenant activity per interval of simulated time, emitted as each interval closes.
//!
//! Nothing here grows with simulated time: each interval's rows are built when it closes and go
//! to a [`TimelineSink`] (`flashmux run` streams them into `timeline.csv`), or are kept in memory
//! up to [`KEEP_ROWS`] for callers that read them back from [`RunResults`](crate::metrics::RunResults)
//! (the bundled experiments). A stretch of two or more whole intervals in which nothing at all
//! happens in the model (no event: every job waiting for a rate limit, a think time or a trace
//! timestamp far ahead) is one row per tenant spanning the stretch, with zero activity, instead
//! of a row per interval: a job limited to one request an hour costs two rows an hour, not 3,600.

use crate::device::IoOp;
use crate::metrics::{shares, LatStat, Share, TimelineRow};
use crate::units::{Nanos, SimTime, TenantId};

/// Rows kept in memory by [`TimelineOut::Keep`] (about 200 bytes each); later rows are counted
/// as dropped and the run's warnings say so.
pub const KEEP_ROWS: usize = 1 << 20;

/// Where the timeline's rows go as intervals close.
pub trait TimelineSink: Send {
    /// One tenant's row of a closed interval; the rows of an interval come in tenant order.
    fn row(&mut self, row: &TimelineRow);
}

/// A timeline nobody reads (an alone-baseline run's, a sweep point's): streamed nowhere, so no
/// rows are kept either.
pub struct NoTimeline;

impl TimelineSink for NoTimeline {
    fn row(&mut self, _: &TimelineRow) {}
}

/// What becomes of the rows.
pub enum TimelineOut {
    /// Kept for [`RunResults::timeline`](crate::metrics::RunResults::timeline), up to [`KEEP_ROWS`].
    Keep { rows: Vec<TimelineRow>, dropped: u64 },
    /// Handed to a sink as they close; none kept.
    Stream(Box<dyn TimelineSink>),
}

#[derive(Default)]
struct Acc {
    ios: [u64; 3],
    bytes: [u64; 3],
    lat: LatStat,
}

/// A tenant's cumulative device-side counters at a moment; the timeline reports their changes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub gc_moved: u64,
    pub map_lookups: u64,
    pub map_misses: u64,
    /// A zoned drive's Zone Resets that emptied a zone, and failed commands.
    pub zone_resets: u64,
    pub zone_errors: u64,
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
    names: Vec<String>,
    weights: Vec<u32>,
    acc: Vec<Acc>,
    last: Vec<Counters>,
    last_charged: Vec<f64>,
    out: TimelineOut,
}

impl Timeline {
    pub fn new(names: Vec<String>, weights: Vec<u32>, interval: Nanos) -> Self {
        assert_eq!(names.len(), weights.len(), "a weight per tenant");
        assert!(interval.0 > 0, "a timeline interval is longer than zero");
        let n = names.len();
        Timeline {
            interval,
            start: SimTime::ZERO,
            names,
            weights,
            acc: (0..n).map(|_| Acc::default()).collect(),
            last: vec![Counters::default(); n],
            last_charged: vec![0.0; n],
            out: TimelineOut::Keep { rows: Vec::new(), dropped: 0 },
        }
    }

    pub fn interval(&self) -> Nanos {
        self.interval
    }

    /// Sends the rows of every interval closed from now on to `sink` instead of keeping them.
    pub fn stream_to(&mut self, sink: Box<dyn TimelineSink>) {
        self.out = TimelineOut::Stream(sink);
    }

    pub fn record(&mut self, tenant: TenantId, op: IoOp, bytes: u64, lat_ns: u64) {
        let a = &mut self.acc[tenant.index()];
        let Some(d) = op.data_dir() else { return };
        a.ios[d] += 1;
        a.bytes[d] += bytes;
        a.lat.record(lat_ns);
    }

    /// Ends the interval at `now`: one row per tenant. `snap[t]` is tenant t's device counters
    /// now; `periods[t]` its measured period so far (`None`: none has begun, or it has no
    /// demand yet), which decides whether its share is measured in the interval.
    pub fn close_interval(&mut self, now: SimTime, snap: &[Snapshot], periods: &[Option<(SimTime, SimTime)>]) {
        assert!(now >= self.start, "an interval ends after it starts");
        let (start, len) = (self.start, now.since(self.start));
        let bytes: Vec<u64> = self.acc.iter().map(|a| a.bytes.iter().sum()).collect();
        let rows: Vec<TimelineRow> = (0..self.acc.len())
            .map(|t| {
                let a = std::mem::take(&mut self.acc[t]);
                let (now_c, last) = (snap[t].totals, self.last[t]);
                let delta = Counters {
                    gc_moved: now_c.gc_moved - last.gc_moved,
                    map_lookups: now_c.map_lookups - last.map_lookups,
                    map_misses: now_c.map_misses - last.map_misses,
                    zone_resets: now_c.zone_resets - last.zone_resets,
                    zone_errors: now_c.zone_errors - last.zone_errors,
                };
                let charged = snap[t].gc_charged_ns.map(|c| c - self.last_charged[t]);
                self.last[t] = now_c;
                self.last_charged[t] = snap[t].gc_charged_ns.unwrap_or(0.0);
                self.row(t, start, len, &a, delta, &snap[t], charged)
            })
            .collect();
        self.emit(rows, &bytes, start, now, periods);
    }

    /// Nothing happens in the model before `until` (a later interval boundary): the whole
    /// intervals from now to `until` become one idle row per tenant, and the next interval
    /// starts at `until`. Called right after an interval closed.
    pub fn skip_idle(&mut self, until: SimTime, snap: &[Snapshot], periods: &[Option<(SimTime, SimTime)>]) {
        debug_assert!(self.acc.iter().all(|a| a.ios == [0; 3]), "an idle stretch with completions in it");
        let (start, len) = (self.start, until.since(self.start));
        let rows: Vec<TimelineRow> = (0..self.acc.len())
            .map(|t| {
                let charged = snap[t].gc_charged_ns.map(|_| 0.0);
                self.row(t, start, len, &Acc::default(), Counters::default(), &snap[t], charged)
            })
            .collect();
        self.emit(rows, &vec![0; self.acc.len()], start, until, periods);
    }

    /// Closes the last, possibly shorter interval if any time has passed in it.
    pub fn close_partial(&mut self, now: SimTime, snap: &[Snapshot], periods: &[Option<(SimTime, SimTime)>]) {
        if now > self.start {
            self.close_interval(now, snap, periods);
        }
    }

    /// The rows kept in memory, and how many were dropped past [`KEEP_ROWS`] (none kept and
    /// none dropped when they were streamed).
    pub fn into_rows(self) -> (Vec<TimelineRow>, u64) {
        match self.out {
            TimelineOut::Keep { rows, dropped } => (rows, dropped),
            TimelineOut::Stream(_) => (Vec::new(), 0),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        t: usize,
        start: SimTime,
        len: Nanos,
        a: &Acc,
        delta: Counters,
        snap: &Snapshot,
        charged: Option<f64>,
    ) -> TimelineRow {
        let secs = len.as_secs_f64();
        let per_s = |x: u64| if secs > 0.0 { x as f64 / secs } else { 0.0 };
        TimelineRow {
            time_s: start.as_secs_f64(),
            interval_s: secs,
            tenant: self.names[t].clone(),
            read_iops: per_s(a.ios[0]),
            write_iops: per_s(a.ios[1]),
            read_mbps: per_s(a.bytes[0]) / 1e6,
            write_mbps: per_s(a.bytes[1]) / 1e6,
            lat_mean_us: a.lat.mean() / 1e3,
            lat_p99_us: a.lat.percentile(99.0) as f64 / 1e3,
            gc_units_moved: delta.gc_moved,
            map_lookups: delta.map_lookups,
            map_misses: delta.map_misses,
            cmt_pages: snap.cmt_pages,
            slice_scale: snap.slice_scale,
            share: f64::NAN,
            share_ideal: f64::NAN,
            share_error: f64::NAN,
            // The shares of GC's work below; `gc_share_est` carries the cost charged until then.
            gc_share: delta.gc_moved as f64,
            gc_share_est: charged.unwrap_or(f64::NAN),
            zone_resets: delta.zone_resets,
            zone_errors: delta.zone_errors,
        }
    }

    /// Fills in the interval's shares and sends its rows on.
    /// `bytes[t]`: what tenant t completed in the interval (reads, writes and trims).
    fn emit(
        &mut self,
        mut rows: Vec<TimelineRow>,
        bytes: &[u64],
        start: SimTime,
        end: SimTime,
        periods: &[Option<(SimTime, SimTime)>],
    ) {
        let secs = end.since(start).as_secs_f64();
        let bw: Vec<Option<f64>> = (0..rows.len())
            .map(|t| periods[t].filter(|&(b, e)| b < end && e > start).map(|_| bytes[t] as f64 / secs))
            .collect();
        let shares = shares(&bw, &self.weights);
        let moved: f64 = rows.iter().map(|r| r.gc_share).sum();
        let charged: f64 = rows.iter().map(|r| r.gc_share_est).filter(|c| !c.is_nan()).sum();
        for (r, s) in rows.iter_mut().zip(shares) {
            let s: Option<Share> = s;
            r.share = s.map_or(f64::NAN, |s| s.achieved);
            r.share_ideal = s.map_or(f64::NAN, |s| s.ideal);
            r.share_error = s.map_or(f64::NAN, |s| s.error);
            r.gc_share = if moved > 0.0 { r.gc_share / moved } else { f64::NAN };
            r.gc_share_est = if charged > 0.0 && !r.gc_share_est.is_nan() { r.gc_share_est / charged } else { f64::NAN };
        }
        self.start = end;
        match &mut self.out {
            TimelineOut::Keep { rows: kept, dropped } => {
                for r in rows {
                    if kept.len() < KEEP_ROWS {
                        kept.push(r);
                    } else {
                        *dropped += 1;
                    }
                }
            }
            TimelineOut::Stream(sink) => rows.iter().for_each(|r| sink.row(r)),
        }
    }
}
