//! A tenant's draws: one `[[tenant]]` table (name, region, weight, workload) and, for a fio
//! workload, its job file's text: one to four job sections (drawn in gen/fio.rs), sometimes a
//! `[global]` section and an `include`.
//!
//! Regions are drawn so that tenants never overlap: the i-th of n tenants gets the i-th auto
//! slice (capacity / n, aligned down to 1 MiB when slices are at least 64 MiB, else to 4 KiB),
//! the whole drive, or a range inside its own slice. E.g. on a 1 GiB drive with 4 tenants, tenant
//! 2's range starts at 512 MiB and is at most 256 MiB long.

use super::fio::fio_job;
use super::{Plan, Stop, G};
use crate::swarm::toml::{self as t, Doc};
use crate::swarm::traces;

/// One `[[tenant]]`: a region, a weight, and a workload (fio inline or in a job file, a
/// personality, or a trace).
pub(super) fn tenant(g: &mut G, doc: &mut Doc, i: usize, plan: &Plan) {
    let mut keys: Vec<(String, String)> = Vec::new();
    let name = match g.weighted(&[(0u8, 8), (1, 1), (2, 1)]) {
        0 => format!("t{i}"),
        1 => format!("vm-{i}"),
        _ => format!("ténant {i}"),
    };
    if g.chance(0.9) {
        keys.push(("name".into(), t::string(&name)));
    }
    let name = if keys.is_empty() { format!("tenant{i}") } else { name };
    let region = region(g, &mut keys, i, plan);
    if g.chance(0.3) {
        let w =
            if g.mistake(0.03) { g.pick(&["0", "1001", "2.5", "-3"]).to_string() } else { g.log(1, 1000).to_string() };
        keys.push(("weight".into(), w));
    }
    workload(g, &mut keys, &name, region, i, plan);
    doc.tenant(keys);
}

/// The region: auto (the i-th of n slices), the whole device, or an explicit slice of the i-th
/// n-th, by percent or in bytes. Returns its length in bytes.
fn region(g: &mut G, keys: &mut Vec<(String, String)>, i: usize, plan: &Plan) -> u64 {
    let n = plan.tenants as u64;
    match g.weighted(&[(0u8, 50), (1, 10), (2, 15), (3, 25)]) {
        0 | 1 => {
            g.tag("region", "auto");
            if g.chance(0.3) {
                keys.push(("region".into(), t::string("auto")));
            }
            if n == 1 {
                plan.cap
            } else {
                let align = if plan.cap / n >= 64 << 20 { 1 << 20 } else { 4096 };
                plan.cap / n / align * align
            }
        }
        2 => {
            g.tag("region", "whole");
            keys.push(("region".into(), t::string("whole")));
            plan.cap
        }
        _ => range(g, keys, i, plan),
    }
}

/// An explicit region: a part of the i-th n-th of the drive, by percent or in bytes. It stays
/// clear of auto slices (the i-th n-th rounded down) and of the other ranges.
fn range(g: &mut G, keys: &mut Vec<(String, String)>, i: usize, plan: &Plan) -> u64 {
    let n = plan.tenants as u64;
    g.tag("region", "range");
    let frac = g.int(10, 90) as f64 / 100.0;
    // Within the i-th auto slice, as the loader places them: clear of the other slices
    // and of the other ranges.
    let align = if plan.cap / n >= 64 << 20 { 1 << 20 } else { 4096 };
    let slot = plan.cap / n / align * align;
    let next_auto = (i as u64 + 1) * slot;
    if g.chance(0.5) {
        let start = format!("{:.6}%", ((i as u64 * slot) as f64 * 100.0 / plan.cap as f64 * 1e6).ceil() / 1e6);
        let pct = |s: &str| -> f64 { s.trim_end_matches('%').parse().expect("a percentage") };
        let bytes = |p: f64| (plan.cap as f64 * p / 100.0) as u64 / 4096 * 4096;
        let offset = bytes(pct(&start));
        let want = ((slot as f64 * frac) as u64).min(next_auto.saturating_sub(offset));
        let size = format!("{:.6}%", (want as f64 * 100.0 / plan.cap as f64 * 1e6).floor() / 1e6);
        keys.push(("region".into(), format!("{{ offset = {}, size = {} }}", t::string(&start), t::string(&size))));
        bytes(pct(&size))
    } else {
        let offset = i as u64 * slot;
        let len = ((slot as f64 * frac) as u64).min(next_auto.saturating_sub(offset)) / 4096 * 4096;
        keys.push((
            "region".into(),
            format!("{{ offset = {}, size = {} }}", t::string(&t::size(offset)), t::string(&t::size(len))),
        ));
        len
    }
}

/// The workload: fio inline or in a job file, a personality (not without a stop condition: a
/// personality runs until stopped), or a trace.
fn workload(g: &mut G, keys: &mut Vec<(String, String)>, name: &str, region: u64, i: usize, plan: &Plan) {
    let stopless = plan.stop == Stop::Neither;
    let kind =
        g.weighted(&[("fio", 55), ("job_file", 10), ("personality", if stopless { 0 } else { 10 }), ("trace", 25)]);
    g.tag("workload", kind);
    match kind {
        "fio" | "job_file" => {
            let text = fio_text(g, name, region, plan, i);
            if kind == "fio" {
                keys.push(("fio".into(), t::multiline(&text)));
            } else {
                let file = format!("t{i}.fio");
                g.files.push((file.clone(), text.into_bytes()));
                keys.push(("job_file".into(), t::string(&file)));
            }
        }
        "personality" => {
            let p = g.pick(&["fileserver", "varmail", "webproxy", "msn", "exchange", "financial"]);
            g.tag("personality", p);
            keys.push(("personality".into(), t::string(p)));
        }
        _ => {
            let v = traces::trace_tenant(g, i, region, plan.large);
            keys.push(("trace".into(), v));
        }
    }
}

/// A tenant's fio job file: one to four job sections, sometimes a `[global]` section and an
/// `include`.
fn fio_text(g: &mut G, tenant: &str, region: u64, plan: &Plan, i: usize) -> String {
    let mut out = String::new();
    if g.chance(0.3) {
        out.push_str(&format!("; jobs of {tenant}\n"));
    }
    let sections = g.weighted(&[(1u64, 6), (2, 3), (3, 1), (4, 1)]);
    let global = g.chance(0.2);
    let mut global_opts = Vec::new();
    if global {
        global_opts.push(g.pick(&["ioengine=libaio", "direct=1", "thread", "ioengine=io_uring"]).to_string());
        if g.chance(0.5) {
            global_opts.push(format!("iodepth={}", g.log(1, 64)));
        }
        if g.chance(0.3) {
            global_opts.push("group_reporting".into());
        }
        out.push_str("[global]\n");
        for o in &global_opts {
            out.push_str(o);
            out.push('\n');
        }
        if g.chance(0.15) {
            let inc = format!("t{i}-inc.fio");
            g.files.push((inc.clone(), b"; included options\ndirect=1\n".to_vec()));
            out.push_str(&format!("include {inc}\n"));
            g.tag("fio", "include");
        }
    }
    for k in 0..sections {
        out.push_str(&format!("[j{k}]\n"));
        for line in fio_job(g, region, plan, k == 0, sections) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
