//! The model in real time: a [`Simulator`] whose simulated time is the wall-clock time since
//! the server started.
//!
//! The engine has one owner (the model thread, or the single I/O thread) and no clock of its
//! own: its caller says what time it is, in nanoseconds since the server's origin. It submits
//! each request at the time it arrived (or at the model's present, if that is later: the model
//! never goes back in time), processes every event due by now, and hands back the requests that
//! completed, each with the time the model completed it — the time its reply is due. Each
//! request carries the caller's own `T` (its connection and cookie), returned with it.

use crate::config::Scenario;
use crate::device::IoOp;
use crate::metrics::{LatStat, Quantiles, RunResults, ServeResult};
use crate::sim::{Export, ExternalDone, ExternalIo, SimError, Simulator};
pub use crate::sim::external::ExternalError;
use crate::units::{Nanos, SimTime};

/// A request whose reply is due.
#[derive(Debug)]
pub struct Due<T> {
    pub info: T,
    /// When the model completed it, in ns since the origin.
    pub due_ns: u64,
    pub export: usize,
    pub op: IoOp,
    pub len: u64,
}

struct Pending<T> {
    info: T,
    export: usize,
    op: IoOp,
    len: u64,
    sent_ns: u64,
}

/// One export's counts over a stats interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Interval {
    pub name: String,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Mean and maximum model latency of the requests completed, in ns.
    pub lat_mean_ns: f64,
    pub lat_max_ns: u64,
    /// Flash units GC moved for this tenant during the interval.
    pub gc_units_moved: u64,
}

#[derive(Default)]
struct Counts {
    reads: u64,
    writes: u64,
    read_bytes: u64,
    write_bytes: u64,
    lat_sum: u64,
    lat_n: u64,
    lat_max: u64,
    gc_at_start: u64,
}

/// The model driven in real time.
pub struct Engine<T> {
    sim: Simulator,
    exports: Vec<Export>,
    /// Requests in the model, by tag (the slot's index).
    pending: Vec<Option<Pending<T>>>,
    free: Vec<usize>,
    in_flight: usize,
    /// Scratch: completions taken from the model in one [`Engine::advance`].
    done: Vec<ExternalDone>,
    counts: Vec<Counts>,
    timing_error: LatStat,
    requests: u64,
    errors: u64,
    /// `serve --record`: every request the model accepts.
    recorder: Option<super::record::RecordSink>,
}

impl<T> Engine<T> {
    /// Builds the model (preconditioning the drive). The scenario's stop limits are dropped: a
    /// server runs until it is stopped.
    pub fn new(scenario: Scenario) -> Result<Self, SimError> {
        Self::new_polling(scenario, &|| false)
    }

    /// [`Engine::new`], asking `stop` while the drive is preconditioned
    /// ([`Simulator::new_polling`]): if it says so, the model is built already finished.
    pub fn new_polling(mut scenario: Scenario, stop: &dyn Fn() -> bool) -> Result<Self, SimError> {
        scenario.stop.time = None;
        scenario.stop.requests = None;
        let sim = Simulator::new_polling(scenario, stop)?;
        let exports = sim.exports();
        let counts = exports.iter().map(|e| Counts { gc_at_start: sim.gc_units_moved(e.tenant), ..Counts::default() }).collect();
        Ok(Engine {
            sim,
            exports,
            pending: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            done: Vec::new(),
            counts,
            timing_error: LatStat::default(),
            requests: 0,
            errors: 0,
            recorder: None,
        })
    }

    /// The exports, in the order [`Engine::submit`] numbers them.
    pub fn exports(&self) -> &[Export] {
        &self.exports
    }

    /// The drive's logical capacity in bytes: what a backing store must hold.
    pub fn capacity_bytes(&self) -> u64 {
        self.sim.device().capacity_bytes()
    }

    /// Requests submitted and not yet handed back.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// When the model next has something to do, in ns since the origin.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.sim.next_event_time().map(|t| t.0)
    }

    /// The model's present, in ns since the origin.
    pub fn now_ns(&self) -> u64 {
        self.sim.now().0
    }

    /// Export `export`'s client sent a request that arrived at `arrived_ns`. Completions that
    /// fall due while the model catches up to then are kept for the next [`Engine::advance`].
    /// A request the model cannot take is handed back with the reason.
    pub fn submit(&mut self, arrived_ns: u64, export: usize, op: IoOp, offset: u64, len: u64, info: T) -> Result<(), (T, ExternalError)> {
        let Some(tenant) = self.exports.get(export).map(|e| e.tenant) else {
            return Err((info, ExternalError::NotAnExport(export)));
        };
        self.catch_up(arrived_ns);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.pending.push(None);
            self.pending.len() - 1
        });
        let io = ExternalIo { tenant, op, offset, len, tag: slot as u64 };
        match self.sim.submit_external(io) {
            Ok(()) => {
                if let Some(r) = &self.recorder {
                    r.record(self.now_ns(), export, op, offset, len);
                }
                self.pending[slot] = Some(Pending { info, export, op, len, sent_ns: self.now_ns() });
                self.in_flight += 1;
                Ok(())
            }
            Err(e) => {
                self.free.push(slot);
                Err((info, e))
            }
        }
    }

    /// Processes every event due by `now_ns` and moves the requests completed by then into
    /// `out`, in completion order.
    pub fn advance(&mut self, now_ns: u64, out: &mut Vec<Due<T>>) {
        self.catch_up(now_ns);
        self.sim.take_external_done(&mut self.done);
        for d in self.done.drain(..) {
            let slot = d.tag as usize;
            let p = self.pending[slot].take().expect("a completion for a request in the model");
            self.free.push(slot);
            self.in_flight -= 1;
            let c = &mut self.counts[p.export];
            match p.op {
                IoOp::Read => {
                    c.reads += 1;
                    c.read_bytes += p.len;
                }
                IoOp::Write => {
                    c.writes += 1;
                    c.write_bytes += p.len;
                }
                IoOp::Trim | IoOp::Flush => {}
                IoOp::ZoneAppend | IoOp::ZoneReset | IoOp::ZoneFinish | IoOp::ZoneOpen | IoOp::ZoneClose => {
                    unreachable!("NBD has no zone commands")
                }
            }
            let lat = d.at.0.saturating_sub(p.sent_ns);
            c.lat_sum += lat;
            c.lat_n += 1;
            c.lat_max = c.lat_max.max(lat);
            out.push(Due { info: p.info, due_ns: d.at.0, export: p.export, op: p.op, len: p.len });
        }
    }

    /// Moves the model to `t_ns`; what completes meanwhile stays in it until [`Engine::advance`].
    fn catch_up(&mut self, t_ns: u64) {
        self.sim.advance_to(SimTime::ZERO + Nanos(t_ns));
    }

    /// A reply left `error_ns` after it was due.
    pub fn record_reply(&mut self, error_ns: Option<u64>, failed: bool) {
        self.requests += 1;
        self.errors += u64::from(failed);
        if let Some(e) = error_ns {
            self.timing_error.record(e);
        }
    }

    /// Each export's counts since the last call.
    pub fn take_interval(&mut self) -> Vec<Interval> {
        let mut v = Vec::with_capacity(self.exports.len());
        for (e, c) in self.exports.iter().zip(&mut self.counts) {
            let gc = self.sim.gc_units_moved(e.tenant);
            let old = std::mem::replace(c, Counts { gc_at_start: gc, ..Counts::default() });
            v.push(Interval {
                name: e.name.clone(),
                reads: old.reads,
                writes: old.writes,
                read_bytes: old.read_bytes,
                write_bytes: old.write_bytes,
                lat_mean_ns: if old.lat_n == 0 { 0.0 } else { old.lat_sum as f64 / old.lat_n as f64 },
                lat_max_ns: old.lat_max,
                gc_units_moved: gc - old.gc_at_start,
            });
        }
        v
    }

    /// Streams the timeline's rows to `sink` as intervals close ([`Simulator::stream_timeline`]),
    /// so a server that runs for days keeps none of them.
    /// Records every request the model accepts from now on (`serve --record`).
    pub fn record_to(&mut self, sink: super::record::RecordSink) {
        self.recorder = Some(sink);
    }

    pub fn stream_timeline(&mut self, sink: Box<dyn crate::sim::TimelineSink>) {
        self.sim.stream_timeline(sink);
    }

    /// Whether the model was stopped while its drive was preconditioned.
    pub fn stopped_before_serving(&self) -> bool {
        self.sim.precondition_report().interrupted
    }

    /// Ends the run at `now_ns` (every request should have been answered) with the server's
    /// side of it attached.
    pub fn finish(mut self, now_ns: u64, mut serve: ServeResult) -> RunResults {
        self.catch_up(now_ns);
        self.sim.stop_serving();
        serve.requests = self.requests;
        serve.errors = self.errors;
        serve.timing_error_ns = if serve.timing { quantiles(&self.timing_error) } else { None };
        let mut r = self.sim.finish();
        if self.in_flight > 0 {
            r.warnings.push(format!("{} requests were still in the model when the server stopped", self.in_flight));
        }
        r.serve = Some(serve);
        r
    }
}

fn quantiles(s: &LatStat) -> Option<Quantiles> {
    (s.count() > 0).then(|| Quantiles { count: s.count(), mean: s.mean(), p50: s.percentile(50.0), p99: s.percentile(99.0), max: s.max() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const SCENARIO: &str = r#"
        [device]
        preset = "tlc-nvme"
        capacity = "16GiB"
        [[tenant]]
        name = "vm1"
        region = { offset = "0", size = "8GiB" }
        [[tenant]]
        name = "noisy"
        region = { offset = "8GiB", size = "8GiB" }
        fio = "[w]\nrw=randwrite\nbs=4k\niodepth=16\n"
    "#;

    fn engine() -> Engine<u32> {
        let mut s = Scenario::serve_from_toml(SCENARIO, "<test>", Path::new(".")).unwrap();
        s.stop.time = Some(Nanos::from_ms(1));
        Engine::new(s).unwrap()
    }

    #[test]
    fn requests_come_back_once_with_their_info_when_due() {
        let mut e = engine();
        assert_eq!(e.exports().len(), 1);
        let mut out = Vec::new();
        for i in 0..100u32 {
            let op = if i % 2 == 0 { IoOp::Write } else { IoOp::Read };
            e.submit(u64::from(i) * 10_000, 0, op, u64::from(i) * 4096, 4096, i).unwrap();
            e.advance(u64::from(i) * 10_000, &mut out);
        }
        // The noisy neighbour runs beside it; the scenario's stop time does not end a server.
        e.advance(1_000_000_000, &mut out);
        assert_eq!(e.in_flight(), 0);
        let mut infos: Vec<u32> = out.iter().map(|d| d.info).collect();
        infos.sort_unstable();
        assert_eq!(infos, (0..100).collect::<Vec<_>>());
        for d in &out {
            assert!(d.due_ns > u64::from(d.info) * 10_000);
        }
        assert!(out.windows(2).all(|w| w[0].due_ns <= w[1].due_ns), "completion order");
        let iv = e.take_interval();
        assert_eq!((iv[0].reads, iv[0].writes, iv[0].write_bytes), (50, 50, 50 * 4096));
        assert!(iv[0].lat_mean_ns > 0.0);
        // The neighbour's random writes run too: its job is not an export.
        let r = e.finish(1_000_000_000, serve_result());
        assert_eq!(r.stop_reason, crate::metrics::StopReason::ServerStopped);
        assert!(r.jobs[1].io.write.ios > 10_000, "{}", r.jobs[1].io.write.ios);
        assert_eq!(r.jobs[0].io.read.ios, 50);
        assert!(r.serve.is_some());
    }

    #[test]
    fn a_late_submission_enters_at_the_models_present() {
        let mut e = engine();
        let mut out = Vec::new();
        e.advance(5_000_000, &mut out);
        e.submit(1_000, 0, IoOp::Read, 0, 4096, 7).unwrap();
        e.advance(10_000_000, &mut out);
        assert_eq!(out.len(), 1);
        assert!(out[0].due_ns > 5_000_000);
        let err = e.submit(10_000_000, 0, IoOp::Read, 8 << 30, 4096, 8).unwrap_err();
        assert_eq!(err.0, 8);
        assert!(matches!(err.1, ExternalError::OutOfRange { .. }));
        assert_eq!(e.in_flight(), 0);
    }

    fn serve_result() -> ServeResult {
        ServeResult {
            listen: "unix:/tmp/x".into(),
            io_threads: "per-connection".into(),
            timing: true,
            wall_s: 1.0,
            connections: 1,
            ..ServeResult::default()
        }
    }
}
