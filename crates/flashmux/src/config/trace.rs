//! A tenant whose workload is a block trace: `trace = "file"` or `trace = { path = ..., ... }` in
//! a `[[tenant]]` section. The trace is opened when the scenario is loaded, so a missing file, an
//! unknown format or a field the format does not have is a scenario error before anything runs;
//! it is read again, streaming, when the simulation runs (`sim/trace.rs`). Because it is read more
//! than once, it must be a regular file: a named pipe or a device is refused.

use super::ConfigError;
use crate::device::PlacementMode;
use crate::units::Nanos;
use crate::workload::trace::{BlkEvent, Format, ReadOptions, TenantBy, TraceError, TraceReader};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The range of `time_scale`: a trace slowed a billion-fold turns one second into 31 years of
/// simulated time; sped up a billion-fold, its requests are all due at once (`closed_loop` is
/// the way to replay as fast as the device allows).
pub const MIN_TIME_SCALE: f64 = 1e-9;
pub const MAX_TIME_SCALE: f64 = 1e9;

/// Requests an open-loop replay keeps outstanding at most (the host queue's default depth):
/// beyond it, replay falls behind the trace, and says so.
pub const DEFAULT_MAX_OUTSTANDING: u32 = 1024;

/// How trace addresses are fitted into the tenant's region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LbaFit {
    /// Offsets modulo the region (the default: keeps locality and sequential runs).
    Wrap,
    /// Offsets scaled by region / the trace's extent (needs a pass over the trace first).
    Scale,
    /// Requests beyond the region are skipped and counted.
    Reject,
}

impl LbaFit {
    pub const ALL: [LbaFit; 3] = [LbaFit::Wrap, LbaFit::Scale, LbaFit::Reject];
    pub fn name(self) -> &'static str {
        match self {
            LbaFit::Wrap => "wrap",
            LbaFit::Scale => "scale",
            LbaFit::Reject => "reject",
        }
    }
    pub fn from_name(s: &str) -> Option<LbaFit> {
        LbaFit::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// When requests are issued.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TraceTiming {
    /// At the trace's times multiplied by `time_scale` (0.5: twice as fast), with at most
    /// `max_outstanding` in flight.
    OpenLoop { time_scale: f64, max_outstanding: u32 },
    /// `iodepth` outstanding at all times, the timestamps ignored.
    ClosedLoop { iodepth: u32 },
}

/// Where the values of a trace's `place_by` field go on the drive, resolved against its data
/// placement when the scenario is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaceTarget {
    /// The k-th value (from 0) is FDP placement identifier k, the drive's handle k below
    /// `handles`; past them, the drive places through handle 0 and logs an Invalid Placement
    /// Identifier event.
    Fdp { handles: u16 },
    /// The k-th value is stream identifier k + 1.
    Streams,
}

impl PlaceTarget {
    /// Where values go on a drive with `mode`; `None` when it offers no data placement.
    pub fn of(mode: &PlacementMode) -> Option<PlaceTarget> {
        match mode {
            PlacementMode::None => None,
            PlacementMode::Fdp { persistent } => Some(PlaceTarget::Fdp { handles: persistent.len() as u16 }),
            PlacementMode::Streams { .. } => Some(PlaceTarget::Streams),
        }
    }

    /// The directive (DSPEC) a write of the k-th value carries.
    pub fn dspec(self, k: u32) -> u16 {
        // The reader numbers at most 65,535 values (0 to 65,534), so both fit in 16 bits.
        match self {
            PlaceTarget::Fdp { .. } => k as u16,
            PlaceTarget::Streams => (k + 1) as u16,
        }
    }
}

/// A resolved trace workload.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSpec {
    pub paths: Vec<PathBuf>,
    /// As named or as detected when the scenario was loaded.
    pub format: Format,
    pub tenant_by: TenantBy,
    /// The field whose values place the replayed writes (`none`: the tenant's placement).
    pub place_by: TenantBy,
    /// Where `place_by`'s values go: set when the tenant is resolved against the drive, `None`
    /// until then and without `place_by`.
    pub place: Option<PlaceTarget>,
    /// Only this stream (a name as `flashmux trace info` lists them); all when `None`.
    pub select: Option<String>,
    pub timing: TraceTiming,
    /// Requests before this trace time are skipped; replay time 0 is this trace time.
    pub start: Nanos,
    /// Requests at or after `start + duration` are not replayed.
    pub duration: Option<Nanos>,
    pub max_requests: Option<u64>,
    pub lba_fit: LbaFit,
    pub strict: bool,
    pub event: BlkEvent,
}

impl TraceSpec {
    /// How the reader is opened.
    pub fn read_options(&self) -> ReadOptions {
        ReadOptions {
            format: Some(self.format),
            tenant_by: self.tenant_by,
            place_by: self.place_by,
            strict: self.strict,
            blktrace_event: self.event,
        }
    }

    /// The iodepth the replaying job runs with.
    pub fn depth(&self) -> u32 {
        match self.timing {
            TraceTiming::OpenLoop { max_outstanding, .. } => max_outstanding,
            TraceTiming::ClosedLoop { iodepth } => iodepth,
        }
    }

    /// The options shown as the job's `"job options"` in fio's JSON.
    pub fn job_options(&self) -> Vec<(String, String)> {
        let mut o = vec![
            ("trace".to_string(), self.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":")),
            ("trace_format".to_string(), self.format.name().to_string()),
        ];
        if let Some(s) = &self.select {
            o.push(("trace_stream".into(), format!("{}={s}", self.tenant_by.name())));
        }
        if self.place_by != TenantBy::None {
            o.push(("trace_place_by".into(), self.place_by.name().into()));
        }
        match self.timing {
            TraceTiming::OpenLoop { time_scale, max_outstanding } => {
                o.push(("replay_time_scale".into(), format!("{time_scale}")));
                o.push(("iodepth".into(), max_outstanding.to_string()));
            }
            TraceTiming::ClosedLoop { iodepth } => o.push(("iodepth".into(), iodepth.to_string())),
        }
        o.push(("lba_fit".into(), self.lba_fit.name().into()));
        if self.start > Nanos::ZERO {
            o.push(("trace_start_ns".into(), self.start.0.to_string()));
        }
        if let Some(d) = self.duration {
            o.push(("trace_duration_ns".into(), d.0.to_string()));
        }
        if let Some(n) = self.max_requests {
            o.push(("number_ios".into(), n.to_string()));
        }
        if matches!(self.format, Format::Blktrace | Format::Blkparse) {
            o.push(("trace_event".into(), self.event.letter().into()));
        }
        if self.strict {
            o.push(("trace_strict".into(), "1".into()));
        }
        o
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TraceSection {
    path: Option<Paths>,
    format: Option<String>,
    tenant_by: Option<String>,
    place_by: Option<String>,
    select: Option<String>,
    time_scale: Option<f64>,
    closed_loop: Option<i64>,
    max_outstanding: Option<i64>,
    start: Option<String>,
    duration: Option<String>,
    max_requests: Option<i64>,
    lba_fit: Option<String>,
    strict: Option<bool>,
    event: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Paths {
    One(String),
    Many(Vec<String>),
}

fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> String {
    all.iter().map(|&x| format!("\"{}\"", name(x))).collect::<Vec<_>>().join(", ")
}

/// Resolves `key` (`tenant[i] (name).trace`, a file name or a table): checks every value and
/// opens the trace.
pub(super) fn resolve_trace(
    v: &toml::Value,
    key: &str,
    base: &Path,
    err: &dyn Fn(String) -> ConfigError,
    duration: &dyn Fn(&str, &str) -> Result<Nanos, ConfigError>,
) -> Result<TraceSpec, ConfigError> {
    let s: TraceSection = match v {
        toml::Value::String(p) => TraceSection { path: Some(Paths::One(p.clone())), ..Default::default() },
        toml::Value::Table(_) => v.clone().try_into().map_err(|e: toml::de::Error| err(format!("{key}: {}", e.message())))?,
        other => return Err(err(format!("{key}: expected a trace file name or a table {{ path = \"...\", ... }}, found {}", other.type_str()))),
    };
    let paths = match &s.path {
        Some(Paths::One(p)) => vec![p.clone()],
        Some(Paths::Many(ps)) if !ps.is_empty() => ps.clone(),
        _ => return Err(err(format!("{key}.path: expected a trace file name or a list of them (blktrace's per-CPU files)"))),
    };
    let format = match s.format.as_deref() {
        None | Some("auto") => None,
        Some(f) => Some(Format::from_name(f).ok_or_else(|| {
            err(format!("{key}.format: unknown format '{f}': expected \"auto\" or one of {}", names(Format::ALL, Format::name)))
        })?),
    };
    let tenant_by = match s.tenant_by.as_deref() {
        None => TenantBy::None,
        Some(t) => TenantBy::from_name(t)
            .ok_or_else(|| err(format!("{key}.tenant_by: unknown field '{t}': expected one of {}", names(&TenantBy::ALL, TenantBy::name))))?,
    };
    let place_by = match s.place_by.as_deref() {
        None => TenantBy::None,
        Some(t) => TenantBy::from_name(t)
            .ok_or_else(|| err(format!("{key}.place_by: unknown field '{t}': expected one of {}", names(&TenantBy::ALL, TenantBy::name))))?,
    };
    if s.select.is_some() && tenant_by == TenantBy::None {
        return Err(err(format!("{key}.select: a stream is selected by a field: set tenant_by as well")));
    }
    let positive = |k: &str, v: Option<i64>, max: i64| -> Result<Option<i64>, ConfigError> {
        match v {
            Some(n) if !(1..=max).contains(&n) => Err(err(format!("{key}.{k}: {n} is out of range: expected 1 to {max}"))),
            _ => Ok(v),
        }
    };
    let closed = positive("closed_loop", s.closed_loop, 65_536)?;
    let max_outstanding = positive("max_outstanding", s.max_outstanding, 65_536)?;
    let max_requests = positive("max_requests", s.max_requests, i64::MAX)?;
    let timing = match (closed, s.time_scale, max_outstanding) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(err(format!("{key}: closed_loop ignores the trace's times: time_scale and max_outstanding are for open-loop replay")))
        }
        (Some(n), None, None) => TraceTiming::ClosedLoop { iodepth: n as u32 },
        (None, scale, max) => {
            let time_scale = scale.unwrap_or(1.0);
            if !(time_scale.is_finite() && time_scale > 0.0) {
                return Err(err(format!("{key}.time_scale: {time_scale} is not a positive number (1 = the trace's own pace, 0.5 = twice as fast)")));
            }
            if !(MIN_TIME_SCALE..=MAX_TIME_SCALE).contains(&time_scale) {
                return Err(err(format!(
                    "{key}.time_scale: {time_scale:?} is out of range: expected {MIN_TIME_SCALE:e} to {MAX_TIME_SCALE:e} \
                     (closed_loop replays as fast as the device allows)"
                )));
            }
            TraceTiming::OpenLoop { time_scale, max_outstanding: max.map_or(DEFAULT_MAX_OUTSTANDING, |m| m as u32) }
        }
    };
    let start = s.start.as_deref().map(|v| duration(&format!("{key}.start"), v)).transpose()?.unwrap_or(Nanos::ZERO);
    let span = s.duration.as_deref().map(|v| duration(&format!("{key}.duration"), v)).transpose()?;
    if span == Some(Nanos::ZERO) {
        return Err(err(format!("{key}.duration: must be more than 0")));
    }
    let lba_fit = match s.lba_fit.as_deref() {
        None => LbaFit::Wrap,
        Some(f) => LbaFit::from_name(f)
            .ok_or_else(|| err(format!("{key}.lba_fit: unknown '{f}': expected one of {}", names(&LbaFit::ALL, LbaFit::name))))?,
    };
    let event = match s.event.as_deref() {
        None => BlkEvent::Issue,
        Some(e) => BlkEvent::from_name(e)
            .ok_or_else(|| err(format!("{key}.event: unknown blktrace event '{e}': expected \"D\" (issue), \"C\" (complete) or \"Q\" (queue)")))?,
    };
    let paths: Vec<PathBuf> = paths.iter().map(|p| base.join(p)).collect();
    for p in &paths {
        // Checked without opening: opening a named pipe blocks until something writes to it. A
        // missing file is left to the reader's own message.
        if let Err(e @ crate::fsutil::ReadError::NotRegular(_)) = crate::fsutil::require_regular(p) {
            return Err(err(format!(
                "{key}: {}: {e}: a replayed trace is read more than once (checked when the scenario is loaded, replayed when it runs, and once more for lba_fit = \"scale\"), so it must be a regular file (`flashmux trace info` and `trace convert` read a pipe)",
                p.display()
            )));
        }
    }
    let opts = ReadOptions { format, tenant_by, place_by, strict: s.strict.unwrap_or(false), blktrace_event: event };
    let reader = TraceReader::open(&paths, &opts).map_err(|e| match e {
        e @ TraceError::NoPlaceField { .. } => err(format!("{key}.place_by: {e}")),
        e => err(format!("{key}: {e}")),
    })?;
    Ok(TraceSpec {
        paths,
        format: reader.format(),
        tenant_by,
        place_by,
        place: None,
        select: s.select.clone(),
        timing,
        start,
        duration: span,
        max_requests: max_requests.map(|n| n as u64),
        lba_fit,
        strict: opts.strict,
        event,
    })
}
