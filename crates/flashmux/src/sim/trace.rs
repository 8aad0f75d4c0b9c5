//! A trace tenant's requests: read from its trace as the run goes (constant memory), chosen by
//! stream and time window, fitted into the tenant's region, each with the time it is due.
//!
//! Open-loop replay issues a request when its (scaled) trace time has come, with at most
//! `max_outstanding` in flight; a request that could not go when due — the device, or the bound,
//! held it back — is late by the difference, and the lateness is reported (`ReplayStats`), so a
//! trace too fast for the modelled device shows as such. Closed-loop replay ignores the times.
//!
//! With `place_by`, each write carries the directive of its value of that field: the values are
//! numbered 0, 1, 2, … in order of first appearance in the replayed stream (the `select`ed one,
//! else the whole trace), and value k is FDP placement identifier k or stream k + 1. Reads,
//! trims and flushes carry none.

use crate::config::{LbaFit, PlaceTarget, TenantSpec, TraceSpec, TraceTiming};
use crate::device::IoOp;
use crate::units::Nanos;
use crate::workload::trace::{BadLine, TraceReader, TraceRecord};
pub use crate::metrics::{ReplayPlacement, ReplayStats, LATE};

/// The latest simulated time a replayed request may be due (2^62 ns, about 146 years): later
/// times, from a trace slowed down a great deal, end the replay with an error instead of
/// saturating the clock.
pub const HORIZON: Nanos = Nanos(1 << 62);

/// One request, placed in the tenant's region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceIo {
    pub op: IoOp,
    pub offset: u64,
    pub len: u64,
    /// Since the job's start; zero in closed loop.
    pub due: Nanos,
    /// A write's placement directive from its `place_by` value (0: none, or FDP placement
    /// identifier 0).
    pub dspec: u16,
}

/// `place_by`'s values in the replayed stream.
struct Placing {
    target: PlaceTarget,
    /// Per placement index of the reader (first appearance in the whole trace): its index in the
    /// replayed stream, `u32::MAX` until seen there. At most 65,535 entries.
    local: Vec<u32>,
    /// Distinct values seen in the replayed stream.
    values: u32,
}

impl Placing {
    /// The index in the replayed stream of the reader's placement `place`.
    fn local(&mut self, place: u32) -> u32 {
        let i = place as usize;
        if self.local.len() <= i {
            self.local.resize(i + 1, u32::MAX);
        }
        if self.local[i] == u32::MAX {
            self.local[i] = self.values;
            self.values += 1;
        }
        self.local[i]
    }
}

pub struct TraceSource {
    reader: TraceReader,
    spec: TraceSpec,
    /// Per stream id: whether it is the selected stream (looked up once per stream).
    selected: Vec<Option<bool>>,
    /// With `place_by`.
    place: Option<Placing>,
    region: (u64, u64),
    sector: u64,
    /// `lba_fit = "scale"`: the end of the furthest request replayed.
    extent: u64,
    done: bool,
    /// Records of the selected stream seen before `start` (the latest of their times), and the
    /// time of the one that ended the window: what explains a replay of nothing.
    before_start: Option<u64>,
    past_window: Option<u64>,
    pub stats: ReplayStats,
}

impl TraceSource {
    /// Opens `t`'s trace. With `lba_fit = "scale"` the trace is read once first for its extent.
    pub fn new(t: &TenantSpec, spec: &TraceSpec, sector: u64) -> Result<TraceSource, String> {
        let open = || {
            let reader = TraceReader::open(&spec.paths, &spec.read_options()).map_err(|e| format!("tenant '{}': {e}", t.name))?;
            Ok::<_, String>(TraceSource {
                reader,
                spec: spec.clone(),
                selected: Vec::new(),
                place: spec.place.map(|target| Placing { target, local: Vec::new(), values: 0 }),
                region: t.region,
                sector: sector.max(1),
                extent: 0,
                done: false,
                before_start: None,
                past_window: None,
                stats: ReplayStats::new(spec.format.name()),
            })
        };
        let mut src = open()?;
        src.stats.placement = spec.place.map(|target| ReplayPlacement {
            field: spec.place_by.name().into(),
            fdp_handles: match target {
                PlaceTarget::Fdp { handles } => Some(handles),
                PlaceTarget::Streams => None,
            },
            ..Default::default()
        });
        if spec.lba_fit == LbaFit::Scale {
            let mut pass = open()?;
            let mut extent = 0u64;
            while let Some(r) = pass.next_record().map_err(|e| format!("tenant '{}': {e}", t.name))? {
                extent = extent.max(r.offset.saturating_add(r.len));
            }
            src.extent = extent.max(1);
        }
        Ok(src)
    }

    /// The next record of the selected stream within the window and the request limit.
    fn next_record(&mut self) -> Result<Option<TraceRecord>, String> {
        if self.done {
            return Ok(None);
        }
        let window_end = self.spec.duration.map(|d| self.spec.start.0.saturating_add(d.0));
        loop {
            if self.spec.max_requests.is_some_and(|m| self.stats.requests >= m) {
                self.done = true;
                return Ok(None);
            }
            let mut r = match self.reader.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => {
                    self.done = true;
                    return Ok(None);
                }
                Err(e) => {
                    self.done = true;
                    return Err(e.to_string());
                }
            };
            if !self.is_selected(r.stream) {
                self.stats.skipped += 1;
                continue;
            }
            // Numbered in the replayed stream as it is read, whether in the window or not, so a
            // value's placement does not depend on the window.
            if let Some(p) = &mut self.place {
                r.place = p.local(r.place);
            }
            if r.time_ns < self.spec.start.0 {
                self.before_start = Some(self.before_start.map_or(r.time_ns, |t| t.max(r.time_ns)));
                self.stats.skipped += 1;
                continue;
            }
            if window_end.is_some_and(|end| r.time_ns >= end) {
                // Times run forward (an out-of-order request is rare): the window is over.
                self.past_window = Some(r.time_ns);
                self.stats.skipped += 1;
                self.done = true;
                return Ok(None);
            }
            self.stats.requests += 1;
            return Ok(Some(r));
        }
    }

    fn is_selected(&mut self, stream: u32) -> bool {
        let Some(want) = &self.spec.select else { return true };
        let i = stream as usize;
        if self.selected.len() <= i {
            self.selected.resize(i + 1, None);
        }
        *self.selected[i].get_or_insert_with(|| self.reader.stream_name(stream) == *want)
    }

    /// The next request to replay; `None` at the end of the trace (or of its window), or after
    /// a read error (kept in `stats.error`).
    pub fn next_io(&mut self) -> Option<TraceIo> {
        loop {
            let r = match self.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => return None,
                Err(e) => {
                    self.stats.error = Some(e);
                    return None;
                }
            };
            let op = IoOp::from(r.op);
            let due = match self.spec.timing {
                TraceTiming::OpenLoop { time_scale, .. } => {
                    let scaled = ((r.time_ns - self.spec.start.0) as f64 * time_scale).round();
                    if scaled > HORIZON.0 as f64 {
                        self.stats.error = Some(format!(
                            "a request at {:.6} s into the trace, scaled by time_scale {time_scale}, is due after {} of \
                             simulated time, beyond the simulator's horizon of {}: a smaller time_scale replays it",
                            (r.time_ns - self.spec.start.0) as f64 / 1e9,
                            Nanos(scaled as u64),
                            HORIZON
                        ));
                        return None;
                    }
                    Nanos(scaled as u64)
                }
                TraceTiming::ClosedLoop { .. } => Nanos::ZERO,
            };
            if op == IoOp::Flush {
                return Some(TraceIo { op, offset: 0, len: 0, due, dspec: 0 });
            }
            let dspec = match &self.place {
                Some(p) if op == IoOp::Write => p.target.dspec(r.place),
                _ => 0,
            };
            match self.fit(r.offset, r.len) {
                Some((offset, len)) => return Some(TraceIo { op, offset, len, due, dspec }),
                None => {
                    self.stats.requests -= 1;
                    self.stats.out_of_range += 1;
                }
            }
        }
    }

    /// Places `len` bytes at trace offset `off` in the region, aligned to sectors; `None` when
    /// `reject` finds it outside.
    fn fit(&mut self, off: u64, len: u64) -> Option<(u64, u64)> {
        let s = self.sector;
        let (start, size) = self.region;
        let first = off / s * s;
        let mut l = off.saturating_add(len).div_ceil(s).saturating_mul(s) - first;
        if l > size {
            if self.spec.lba_fit == LbaFit::Reject {
                return None;
            }
            self.stats.clipped += 1;
            l = size;
        }
        let o = match self.spec.lba_fit {
            LbaFit::Wrap => first % size,
            LbaFit::Scale => ((first as u128 * size as u128 / self.extent as u128) as u64) / s * s,
            LbaFit::Reject if first + l > size => return None,
            LbaFit::Reject => first,
        };
        // A request that would run past the region's end ends at it instead.
        Some((start + o.min(size - l), l))
    }

    pub fn timing(&self) -> TraceTiming {
        self.spec.timing
    }

    /// `io` is issued: a write whose placement identifier names no FDP handle is counted.
    pub fn issued(&mut self, io: &TraceIo) {
        if let (Some(p), Some(Placing { target: PlaceTarget::Fdp { handles }, .. })) =
            (&mut self.stats.placement, &self.place)
        {
            if io.op == IoOp::Write && io.dspec >= *handles {
                p.invalid_placement_writes += 1;
            }
        }
    }

    /// The reader's counts, once the replay is over.
    pub fn finish(&mut self) -> ReplayStats {
        let bad = self.reader.bad_lines();
        self.stats.bad_lines = bad.count;
        self.stats.first_bad_lines = bad.first.iter().map(|b: &BadLine| (b.line, b.reason.clone())).collect();
        self.stats.out_of_order = self.reader.out_of_order();
        if let (Some(p), Some(placing)) = (&mut self.stats.placement, &self.place) {
            p.values = placing.values;
        }
        self.stats.finish_mean();
        if self.stats.requests == 0 && self.stats.out_of_range == 0 && self.stats.error.is_none() {
            self.stats.nothing_replayed = Some(self.why_nothing());
        }
        self.stats.clone()
    }

    /// Why a replay that read its trace without error replayed no request.
    fn why_nothing(&self) -> String {
        let s = |ns: u64| format!("{} s", ns as f64 / 1e9);
        let start = self.spec.start.0;
        match (self.before_start, self.past_window) {
            (Some(last), None) => format!("the trace ends at {}; start {} is past it", s(last), s(start)),
            (before, Some(next)) => format!(
                "no request in the window from {} to {} ({}the one after it at {})",
                s(start),
                s(start.saturating_add(self.spec.duration.map_or(0, |d| d.0))),
                before.map_or(String::new(), |b| format!("the one before it is at {}, ", s(b))),
                s(next)
            ),
            (None, None) => match &self.spec.select {
                Some(sel) => format!("the trace has no request of stream '{sel}'"),
                None => "the trace has no request".into(),
            },
        }
    }
}
