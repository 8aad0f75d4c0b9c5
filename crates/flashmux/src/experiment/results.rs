//! Running a sweep's points and writing their results: CSV and an aligned text table.

use super::{value_text, Point};
use crate::metrics::{RunResults, StopReason, TenantResult};
use crate::sim::{Progress, SimError, Simulator};
use crate::report::stop_reason_name;
use std::path::Path;

/// Events simulated per call into the simulator (it asks `interrupted` before each event).
const BATCH_EVENTS: u64 = 200_000;

/// Runs every point in order, each to its end, and returns their results in point order.
/// `on_point(i, n, results)` is called after point `i` (0-based) of `n` has finished.
///
/// `interrupted` is polled during the runs (before every event, and while a drive is aged): once
/// it returns true, the running point is
/// interrupted (its results, marked [`StopReason::Interrupted`], are partial), `on_point` is
/// called for it, and no further point starts. The results so far are returned.
pub fn run_points(
    points: &[Point],
    interrupted: &dyn Fn() -> bool,
    on_point: &mut dyn FnMut(usize, usize, &RunResults),
) -> Result<Vec<RunResults>, SimError> {
    let n = points.len();
    let mut out = Vec::with_capacity(n);
    for (i, p) in points.iter().enumerate() {
        if interrupted() {
            break;
        }
        let mut sim = Simulator::new_polling(p.scenario.clone(), interrupted)?;
        while let Progress::Running = sim.run_polling(BATCH_EVENTS, interrupted) {}
        let r = sim.finish();
        on_point(i, n, &r);
        let stop = r.stop_reason == StopReason::Interrupted;
        out.push(r);
        if stop {
            break;
        }
    }
    Ok(out)
}

/// The metric columns of [`tenant_metrics`], in order (experiment labels may not reuse them).
pub const METRIC_COLUMNS: &[&str] = &[
    "read_iops",
    "write_iops",
    "read_mbps",
    "write_mbps",
    "lat_mean_us",
    "lat_p99_us",
    "gc_units_moved",
    "map_lookups",
    "map_hits",
    "map_misses",
    "map_miss_ratio",
    "waf",
    "exits_per_sec",
    "ctx_switches_per_sec",
    "lock_wait_us",
    "poll_cpu",
    "stop_reason",
];

/// One tenant's metrics in one run, as (column, value) pairs: the tenant's own, then the
/// device's and the run's (the same on every tenant's row). Throughput is over the tenant's
/// runtime (decimal MB/s); latency is total latency over all directions. A value that is
/// undefined (no completions, no lookups, nothing written) is empty. Floats have fixed decimals,
/// so the same run always gives the same text.
///
/// To add a column, add it here and to [`METRIC_COLUMNS`].
pub fn tenant_metrics(r: &RunResults, t: &TenantResult) -> Vec<(&'static str, String)> {
    let secs = t.runtime_ns as f64 / 1e9;
    let rate = |count: u64| if t.runtime_ns == 0 { 0.0 } else { count as f64 / secs };
    let lat = t.io.all_lat();
    let us = |ns: f64| if lat.count() == 0 { String::new() } else { fixed(ns / 1000.0, 3) };
    let m = &t.map;
    // The tenant's VM, when the virtualization path is modelled.
    let vm = r.virt.as_ref().and_then(|v| v.vms.iter().find(|vm| vm.tenant.index() == t.index));
    let elapsed = r.sim_time_ns.max(1) as f64;
    vec![
        ("read_iops", fixed(rate(t.io.read.ios), 3)),
        ("write_iops", fixed(rate(t.io.write.ios), 3)),
        ("read_mbps", fixed(rate(t.io.read.bytes) / 1e6, 6)),
        ("write_mbps", fixed(rate(t.io.write.bytes) / 1e6, 6)),
        ("lat_mean_us", us(lat.mean())),
        ("lat_p99_us", us(lat.percentile(99.0) as f64)),
        ("gc_units_moved", t.gc_units_moved.to_string()),
        ("map_lookups", m.lookups.to_string()),
        ("map_hits", m.hits.to_string()),
        ("map_misses", m.misses.to_string()),
        ("map_miss_ratio", if m.lookups == 0 { String::new() } else { fixed(m.misses as f64 / m.lookups as f64, 6) }),
        ("waf", r.device.waf.map_or_else(String::new, |w| fixed(w, 6))),
        ("exits_per_sec", vm.map_or_else(String::new, |v| fixed(v.exits_total as f64 * 1e9 / elapsed, 3))),
        ("ctx_switches_per_sec", r.virt.as_ref().map_or_else(String::new, |v| fixed(v.context_switches_per_sec, 3))),
        ("lock_wait_us", vm.map_or_else(String::new, |v| fixed(v.locks.wait_mean_ns() / 1000.0, 3))),
        ("poll_cpu", vm.map_or_else(String::new, |v| fixed(v.poll_cpu_ns as f64 / elapsed, 6))),
        ("stop_reason", stop_reason_name(r.stop_reason).to_string()),
    ]
}

/// `x` with `decimals` fixed decimals; empty when not finite.
fn fixed(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        // `+ 0.0` turns -0.0 into 0.0.
        format!("{:.*}", decimals, x + 0.0)
    } else {
        String::new()
    }
}

/// Header and rows: one row per (point, tenant), for the points that have results.
fn rows(points: &[Point], results: &[RunResults]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header: Vec<String> =
        points.first().map_or_else(Vec::new, |p| p.params.iter().map(|(l, _)| l.clone()).collect());
    header.push("tenant".into());
    header.extend(METRIC_COLUMNS.iter().map(|c| c.to_string()));
    let mut rows = Vec::new();
    for (p, r) in points.iter().zip(results) {
        for t in &r.tenants {
            let mut row: Vec<String> = p.params.iter().map(|(_, v)| value_text(v)).collect();
            row.push(t.name.clone());
            row.extend(tenant_metrics(r, t).into_iter().map(|(_, v)| v));
            rows.push(row);
        }
    }
    (header, rows)
}

/// Writes the results as CSV with a header row: the point's parameter columns (values as they
/// are for strings, TOML notation otherwise), `tenant`, then [`METRIC_COLUMNS`]. `results` may
/// be shorter than `points` (an interrupted sweep): only points with results have rows.
pub fn write_csv(points: &[Point], results: &[RunResults], path: &Path) -> Result<(), std::io::Error> {
    let (header, rows) = rows(points, results);
    crate::fsutil::write_atomic(path, |out| {
        let mut w = csv::Writer::from_writer(out);
        w.write_record(&header)?;
        for row in &rows {
            w.write_record(row)?;
        }
        w.flush()
    })
}

/// The same rows as [`write_csv`], as an aligned text table (undefined values as `-`, line
/// breaks in values as `\n`).
pub fn format_table(points: &[Point], results: &[RunResults]) -> String {
    let (header, rows) = rows(points, results);
    let params = header.len() - 1 - METRIC_COLUMNS.len();
    let cell = |s: &str| if s.is_empty() { "-".to_string() } else { s.replace('\n', "\\n") };
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| cell(c)).collect()).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).chain([header[i].chars().count()]).max().unwrap_or(0))
        .collect();
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = widths[i];
                // Parameters, the tenant and the stop reason are text; metrics are numbers.
                if i <= params || i + 1 == cells.len() {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(&header);
    for r in &rows {
        out.push_str(&line(r));
    }
    out
}
