//! The terminal summary: one aligned row per tenant, then the device's and the run's key
//! figures. Plain ASCII, no colour, so it reads the same in a terminal, a log file or a CI page.

use super::fio_stats::{per_sec, NS_PER_SEC};
use super::{precondition_state_name, ratio, stop_reason_name};
use crate::device::precondition::{PreconditionReport, PreconditionState};
use crate::metrics::{Fairness, RunResults, Slowdown, TenantResult};

const HEADERS: [&str; 14] = [
    "tenant", "IOPS", "MB/s", "mean us", "p50 us", "p99 us", "p99.9 us", "GC pages", "GC share", "erases", "weight",
    "share", "ideal", "share err",
];

/// Extra columns with an alone baseline: the tenant's mean latency alone and its slowdown.
const BASELINE_HEADERS: [&str; 2] = ["alone us", "slowdown"];

/// Extra columns under a scheduler that charges GC by contribution (hWA-BC): the tenant's share
/// of the GC cost charged, and that minus its true share (of the units GC moved from tenants'
/// data, which the "GC share" column counts against all units moved).
const GC_JUDGED_HEADERS: [&str; 2] = ["GC judged", "judged err"];

/// Extra columns with DFTL: map-cache lookups, miss ratio, translation pages read and written
/// back, mean wait of the commands that waited for a translation page, cache pages held.
const MAP_HEADERS: [&str; 6] = ["map lookups", "map miss", "map loads", "map flushes", "map wait us", "CMT pages"];

/// The per-tenant table and the device summary. Throughput is decimal MB/s over each tenant's
/// runtime; latencies are total latency (submission + completion) over all directions; shares
/// are of the bandwidth in the tenants' common measured interval.
pub fn tenant_table(r: &RunResults) -> String {
    // GC shares are of all units GC moved, including data no single tenant owns.
    let gc_total = r.tenants.iter().map(|t| t.gc_units_moved).sum::<u64>() + r.device.unowned_gc_units_moved;
    let dftl = r.device.cmt.is_some();
    let baseline = r.fairness.baseline.as_ref();
    let contrib = r.gc_contributions();
    let mut headers = HEADERS.to_vec();
    if contrib.is_some() {
        headers.extend(GC_JUDGED_HEADERS);
    }
    if baseline.is_some() {
        headers.extend(BASELINE_HEADERS);
    }
    if dftl {
        headers.extend(MAP_HEADERS);
    }
    let rows: Vec<Vec<String>> = r
        .tenants
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut row = tenant_row(t, gc_total);
            if let Some(c) = contrib.as_ref().and_then(|c| c.get(i)) {
                row.push(percent(Some(c.estimated)));
                row.push(c.error.filter(|e| e.is_finite()).map_or_else(|| "-".into(), |e| format!("{:+.1}", e * 100.0)));
            }
            if let Some(b) = baseline {
                row.extend(slowdown_cells(b.tenants.get(i)));
            }
            if dftl {
                row.extend(map_cells(t));
            }
            row
        })
        .collect();
    let mut out = render(&headers, &rows);
    out.push('\n');

    let d = &r.device;
    let mut lines: Vec<(&str, String)> = vec![
        ("device", format!("{} ({}), mapping {}", d.kind, d.preset, d.mapping)),
        (
            "write amplification",
            d.waf.filter(|w| w.is_finite()).map_or_else(|| "-".into(), |w| format!("{w:.2}")),
        ),
        ("GC runs", d.ftl.gc_runs.to_string()),
        ("erases", d.ftl.erases.to_string()),
        (
            "pages programmed",
            if d.cmt.is_some() {
                format!(
                    "host {}, GC {}, translation pages {}",
                    d.ftl.host_units_programmed, d.ftl.gc_units_programmed, d.ftl.map_units_programmed
                )
            } else {
                format!("host {}, GC {}", d.ftl.host_units_programmed, d.ftl.gc_units_programmed)
            },
        ),
        ("write-buffer hits", r.device.write_buffer_hits.to_string()),
        ("precondition", precondition(&d.precondition)),
        ("stop reason", stop_reason_name(r.stop_reason).into()),
        ("simulated time", format!("{:.6} s", r.sim_time_ns as f64 / NS_PER_SEC as f64)),
        (
            "requests",
            format!(
                "issued {}, completed {}, in flight {}",
                r.requests_issued, r.requests_completed, r.requests_in_flight
            ),
        ),
        ("fairness", fairness(&r.fairness)),
    ];
    if d.flushes > 0 {
        let pos = lines.iter().position(|(k, _)| *k == "write-buffer hits").map_or(lines.len(), |p| p + 1);
        let wait = d.ssd.flush_wait_ns as f64 / d.flushes as f64 / 1e3;
        let value = format!("{}, {} padded pages, {wait:.1} us mean wait for programs", d.flushes, d.ssd.flush_padded_pages);
        lines.insert(pos, ("flushes", value));
    }
    if let Some(z) = &d.zns {
        // A zoned drive: its zones at the end, the resets that emptied them, the commands it
        // failed (by status, in results.json).
        let pos = lines.iter().position(|(k, _)| *k == "write-buffer hits").map_or(lines.len(), |p| p + 1);
        let states: Vec<String> = z.states.iter().map(|(s, n)| format!("{n} {}", s.split(':').nth(1).unwrap_or(s).to_lowercase())).collect();
        let failed: u64 = z.errors.values().sum();
        let value = format!("{} ({}), {} resets, {failed} failed commands", z.zones, states.join(", "), z.resets);
        lines.insert(pos, ("zones", value));
    }
    if let Some(h) = &r.host_ftl {
        // The host FTL on the zones: its write amplification (the drive adds none) and GC.
        let pos = lines
            .iter()
            .position(|(k, _)| *k == "zones")
            .map_or(lines.len(), |p| p + 1);
        let waf = h.waf.map_or_else(|| "-".into(), |w| format!("{w:.3}"));
        let value = format!(
            "WAF {waf}, {} GC runs moved {} units, {} spare zones, {} writes waited for a reset",
            h.gc_runs, h.gc_units_moved, h.spare_zones, h.writes_waited
        );
        lines.insert(pos, ("host FTL", value));
    }
    if let Some(c) = &contrib {
        let e = crate::metrics::mean_abs_error(c).map_or_else(|| "-".into(), |e| format!("{:.1} points", e * 100.0));
        lines.push(("GC judged", format!("mean |judged - true share| {e} (hWA-BC's charges against the ledger)")));
    }
    if let Some(b) = baseline {
        let f = b.fairness.filter(|f| f.is_finite()).map_or_else(|| "-".into(), |f| format!("{f:.3}"));
        lines.push(("slowdown fairness", format!("{f} (min / max slowdown against each tenant alone)")));
    }
    if let Some(c) = &d.cmt {
        lines.insert(
            1,
            (
                "map cache",
                format!(
                    "{} pages of {} ({:.2}% of the table), {} map reads, {} map programs, {} GC map updates",
                    c.pages,
                    c.map_pages,
                    c.pages as f64 * 100.0 / c.map_pages.max(1) as f64,
                    d.ssd.map_reads,
                    d.ssd.map_programs,
                    d.ssd.gc_map_updates
                ),
            ),
        );
    }
    let width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    for (label, value) in &lines {
        out.push_str(&format!("{:<width$} {value}\n", format!("{label}:")));
    }
    for w in &r.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

/// Latency in µs: two decimals below 10 µs, one above.
fn us(ns: f64) -> String {
    if ns < 10_000.0 {
        format!("{:.2}", ns / 1000.0)
    } else {
        format!("{:.1}", ns / 1000.0)
    }
}

/// A fraction as a percentage with one decimal; `-` when undefined.
fn percent(x: Option<f64>) -> String {
    x.filter(|x| x.is_finite()).map_or_else(|| "-".into(), |x| format!("{:.1}%", x * 100.0))
}

fn tenant_row(t: &TenantResult, gc_total: u64) -> Vec<String> {
    let lat = t.io.all_lat();
    let us = |ns: f64| if lat.count() == 0 { "-".to_owned() } else { us(ns) };
    let share = t.share;
    vec![
        t.name.clone(),
        format!("{:.1}", per_sec(t.io.ios(), t.runtime_ns)),
        format!("{:.2}", per_sec(t.io.bytes(), t.runtime_ns) / 1e6),
        us(lat.mean()),
        us(lat.percentile(50.0) as f64),
        us(lat.percentile(99.0) as f64),
        us(lat.percentile(99.9) as f64),
        t.gc_units_moved.to_string(),
        ratio(t.gc_units_moved as f64, gc_total as f64)
            .map_or_else(|| "-".into(), |s| format!("{:.1}%", s * 100.0)),
        if t.gc_erases.is_finite() { format!("{:.1}", t.gc_erases) } else { "-".into() },
        t.weight.to_string(),
        percent(share.map(|s| s.achieved)),
        percent(share.map(|s| s.ideal)),
        percent(share.map(|s| s.error)),
    ]
}

fn slowdown_cells(s: Option<&Slowdown>) -> Vec<String> {
    vec![
        s.and_then(|s| s.lat_alone_ns).filter(|ns| ns.is_finite()).map_or_else(|| "-".into(), us),
        s.and_then(|s| s.slowdown).filter(|x| x.is_finite()).map_or_else(|| "-".into(), |x| format!("{x:.2}")),
    ]
}

/// The share errors' mean and maximum and Jain's index, over the common measured interval.
fn fairness(f: &Fairness) -> String {
    let Some((start, end)) = f.interval_ns else {
        return format!("- ({} tenants with demand, no common interval)", f.tenants_counted);
    };
    let jain = f.jain_index.filter(|j| j.is_finite()).map_or_else(|| "-".into(), |j| format!("{j:.3}"));
    format!(
        "share error mean {}, max {}, Jain's index {jain} ({} tenants, {:.6} s to {:.6} s)",
        percent(f.share_error_mean),
        percent(f.share_error_max),
        f.tenants_counted,
        start as f64 / NS_PER_SEC as f64,
        end as f64 / NS_PER_SEC as f64
    )
}

fn map_cells(t: &TenantResult) -> Vec<String> {
    let m = &t.map;
    vec![
        m.lookups.to_string(),
        ratio(m.misses as f64, m.lookups as f64).map_or_else(|| "-".into(), |s| format!("{:.1}%", s * 100.0)),
        m.map_loads.to_string(),
        m.map_flushes.to_string(),
        ratio(m.map_wait_ns as f64, m.commands_delayed as f64).map_or_else(|| "-".into(), |w| format!("{:.1}", w / 1e3)),
        match m.cmt_allocation {
            Some(a) => format!("{}/{a}", m.cmt_pages),
            None => m.cmt_pages.to_string(),
        },
    ]
}

/// What preconditioning did, in one line (summary.txt's `precondition` row).
pub fn precondition(p: &PreconditionReport) -> String {
    let fill = format!("fill {:.0}%", p.fill * 100.0);
    let done = precondition_done(p, fill);
    if p.interrupted {
        format!("{done}; interrupted while preconditioning")
    } else {
        done
    }
}

fn precondition_done(p: &PreconditionReport, fill: String) -> String {
    match p.state {
        None => "none".into(),
        Some(PreconditionState::Clean) => precondition_state_name(PreconditionState::Clean).into(),
        Some(PreconditionState::SequentialFill) => {
            format!("{}, {fill}", precondition_state_name(PreconditionState::SequentialFill))
        }
        Some(state @ (PreconditionState::Aged | PreconditionState::Workload)) => {
            if p.writers == Some(0) {
                return format!("{}, {fill}, no tenant writes: filled only", precondition_state_name(state));
            }
            let waf = if p.steady_waf.is_finite() { format!("{:.2}", p.steady_waf) } else { "-".into() };
            let reached = if p.reached_steady_state { "reached" } else { "not reached" };
            format!("{}, {fill}, steady-state WAF {waf} ({reached}, {} GC runs)", precondition_state_name(state), p.gc_runs)
        }
    }
}

/// Aligned columns two spaces apart, a dashed rule under the header; the first column
/// left-aligned, the numeric ones right-aligned.
fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = headers
        .iter()
        .enumerate()
        .map(|(i, h)| {
            rows.iter().filter_map(|r| r.get(i)).map(String::len).chain([h.len()]).max().unwrap_or(0)
        })
        .collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let parts: Vec<String> = cells
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, &w))| if i == 0 { format!("{c:<w$}") } else { format!("{c:>w$}") })
            .collect();
        format!("{}\n", parts.join("  ").trim_end())
    };
    let mut out = line(&mut headers.iter().copied());
    out.push_str(&line(
        &mut widths.iter().map(|&w| "-".repeat(w)).collect::<Vec<_>>().iter().map(String::as_str),
    ));
    for r in rows {
        out.push_str(&line(&mut r.iter().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_fixture::{empty_run, run};

    #[test]
    fn tenant_rows_and_device_lines() {
        let r = run();
        let text = tenant_table(&r);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "tenant   IOPS  MB/s  mean us  p50 us  p99 us  p99.9 us  GC pages  GC share  erases  weight  share  ideal  share err"
        );
        assert_eq!(
            lines[1],
            "------  -----  ----  -------  ------  ------  --------  --------  --------  ------  ------  -----  -----  ---------"
        );
        // vm0: 3000 requests, 12,288,000 bytes in 4 s; 60 of 100 GC-moved units, 60/64 erases;
        // weight 500 of 750, 3 of 4 MB/s in the common interval.
        assert!(lines[2].starts_with("vm0     750.0  3.07"), "{}", lines[2]);
        assert!(lines[2].ends_with("        60     60.0%     0.9     500  75.0%  66.7%      12.5%"), "{}", lines[2]);
        // vm1: 100 writes, 409,600 bytes in 1 s; latencies 3–12 ms.
        assert!(lines[3].starts_with("vm1     100.0  0.41"), "{}", lines[3]);
        assert!(lines[3].ends_with("        30     30.0%     0.5     250  25.0%  33.3%      25.0%"), "{}", lines[3]);
        let lat = r.tenants[1].io.all_lat();
        assert!(lines[3].contains(&format!("{:.1}", lat.percentile(99.0) as f64 / 1000.0)));
        // All rows equally wide (right-aligned numbers).
        assert_eq!(lines[2].len(), lines[0].len());
        assert_eq!(lines[4], "");
        assert_eq!(lines[5], "device:              ssd (test), mapping full");
        assert_eq!(lines[6], "write amplification: 2.00");
        assert_eq!(lines[7], "GC runs:             4");
        assert_eq!(lines[8], "erases:              5");
        assert_eq!(lines[9], "pages programmed:    host 100, GC 100");
        assert_eq!(lines[10], "write-buffer hits:   6");
        assert_eq!(
            lines[11],
            "precondition:        aged, fill 90%, steady-state WAF 2.25 (reached, 77 GC runs)"
        );
        assert_eq!(lines[12], "stop reason:         all-jobs-done");
        assert_eq!(lines[13], "simulated time:      4.000000 s");
        assert_eq!(lines[14], "requests:            issued 3102, completed 3100, in flight 2");
        assert_eq!(
            lines[15],
            "fairness:            share error mean 18.8%, max 25.0%, Jain's index 0.962 (2 tenants, 0.000000 s to 1.000000 s)"
        );
        assert_eq!(lines[16], "warning: GC never ran during the measured period");
        assert_eq!(lines.len(), 17);
        assert!(text.is_ascii());
    }

    #[test]
    fn flushes_get_a_line_when_there_were_any() {
        let mut r = run();
        r.device.flushes = 4;
        r.device.ssd.flush_padded_pages = 3;
        r.device.ssd.flush_wait_ns = 2_000_000;
        let text = tenant_table(&r);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[10], "write-buffer hits:   6");
        assert_eq!(lines[11], "flushes:             4, 3 padded pages, 500.0 us mean wait for programs");
        assert_eq!(lines.len(), 18);
    }

    #[test]
    fn empty_run_shows_dashes() {
        let text = tenant_table(&empty_run());
        let vm0 = text.lines().nth(2).unwrap_or_default();
        assert_eq!(
            vm0,
            "vm0      0.0  0.00        -       -       -         -         0         -     0.0     500      -      -          -"
        );
        assert!(text.contains("\nwrite amplification: -\n"));
        assert!(text.contains("\nfairness:            - (0 tenants with demand, no common interval)\n"));
        assert!(text.contains("\nprecondition:        none\n"));
        assert!(!text.contains("warning"));
    }

    #[test]
    fn alone_baseline_columns_and_line() {
        let mut r = run();
        let alone = [run(), run()];
        r.add_alone_baseline(&alone);
        let text = tenant_table(&r);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with("  share err  alone us  slowdown"), "{}", lines[0]);
        // Alone runs identical to the shared one: no slowdown.
        let alone_us = us(r.tenants[0].lat_mean_ns().unwrap_or(f64::NAN));
        assert!(lines[2].ends_with(&format!("{alone_us:>8}      1.00")), "{}", lines[2]);
        assert!(text.contains("\nslowdown fairness:   1.000 (min / max slowdown against each tenant alone)\n"));
        assert!(text.is_ascii());
    }

    #[test]
    fn precondition_summaries() {
        let mut p = PreconditionReport { fill: 0.5, ..Default::default() };
        p.state = Some(PreconditionState::Clean);
        assert_eq!(precondition(&p), "clean");
        p.state = Some(PreconditionState::SequentialFill);
        assert_eq!(precondition(&p), "sequential-fill, fill 50%");
        p.state = Some(PreconditionState::Aged);
        p.steady_waf = f64::NAN;
        assert_eq!(precondition(&p), "aged, fill 50%, steady-state WAF - (not reached, 0 GC runs)");
        p.interrupted = true;
        assert_eq!(
            precondition(&p),
            "aged, fill 50%, steady-state WAF - (not reached, 0 GC runs); interrupted while preconditioning"
        );
        let mut p = PreconditionReport { fill: 1.0, ..Default::default() };
        p.state = Some(PreconditionState::Workload);
        (p.steady_waf, p.reached_steady_state, p.gc_runs, p.writers) = (2.5, true, 9, Some(2));
        assert_eq!(precondition(&p), "workload, fill 100%, steady-state WAF 2.50 (reached, 9 GC runs)");
        p.writers = Some(0);
        assert_eq!(precondition(&p), "workload, fill 100%, no tenant writes: filled only");
    }

    /// A zoned drive's line: the zones by state at the end, resets, failed commands.
    #[test]
    fn a_zoned_drive_reports_its_zones() {
        let mut r = run();
        r.device.zns = Some(crate::device::ZnsReport {
            zones: 64,
            zone_bytes: 2 << 30,
            capacity_bytes: 1 << 30,
            max_open: Some(14),
            max_active: Some(14),
            states: [("ZSE:Empty".to_string(), 60), ("ZSF:Full".to_string(), 3), ("ZSIO:Implicitly Opened".to_string(), 1)].into(),
            peak_open: 2,
            peak_active: 2,
            resets: 7,
            blocks_erased: 28,
            reset_ns: 1,
            implicit_closes: 0,
            padded_bytes: 0,
            errors: [("Zone Invalid Write (BCh)".to_string(), 4), ("Zone Is Full (B9h)".to_string(), 1)].into(),
        });
        let text = tenant_table(&r);
        assert!(text.contains("\nzones:               64 (60 empty, 3 full, 1 implicitly opened), 7 resets, 5 failed commands\n"), "{text}");
        assert!(!text.contains("host FTL"), "{text}");
        // With a host FTL on the zones, its line follows the drive's.
        r.host_ftl = Some(crate::host::zoned_ftl::HostFtlReport {
            logical_bytes: 57 << 26,
            spare_zones: 7,
            host_units: 1000,
            gc_units_moved: 895,
            gc_runs: 6,
            waf: Some(1.895),
            writes_waited: 3,
            device_commands: 40,
        });
        let text = tenant_table(&r);
        assert!(
            text.contains("5 failed commands\nhost FTL:            WAF 1.895, 6 GC runs moved 895 units, 7 spare zones, 3 writes waited for a reset\n"),
            "{text}"
        );
    }
}
