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
    let filebench_weight = if plan.ext4 && !stopless { 15 } else { 0 };
    let kind = g.weighted(&[
        ("fio", 55),
        ("job_file", 10),
        ("personality", if stopless { 0 } else { 10 }),
        ("trace", 25),
        ("filebench", filebench_weight),
    ]);
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
        "filebench" => filebench(g, keys, i),
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

/// A Filebench workload on the tenant's ext4: a bundled one made small, or a drawn workload file
/// of one or two filesets and processes whose threads loop over a few flowops.
fn filebench(g: &mut G, keys: &mut Vec<(String, String)>, i: usize) {
    if g.chance(0.4) {
        let name = g.pick(&["fileserver", "varmail", "webproxy", "webserver"]);
        g.tag("filebench", name);
        keys.push(("filebench".into(), t::string(name)));
        let set = format!("{{ nfiles = {}, nthreads = {} }}", g.log(1, 300), g.log(1, 8));
        keys.push(("filebench_set".into(), set));
        return;
    }
    g.tag("filebench", "drawn");
    let mut wml = String::new();
    let filesets = g.int(1, 2);
    for f in 0..filesets {
        wml.push_str(&format!(
            "define fileset name=fs{f},path=/tmp,size={}k,entries={},dirwidth={},prealloc={},filesizegamma={}\n",
            g.log(1, 256),
            g.log(1, 200),
            g.log(1, 50),
            g.int(0, 100),
            g.pick(&["0", "1500"]),
        ));
    }
    for p in 0..g.int(1, 2) {
        wml.push_str(&format!("define process name=p{p},instances={} {{\n", g.int(1, 2)));
        wml.push_str(&format!("  thread name=t{p},memsize=1m,instances={} {{\n", g.log(1, 6)));
        for k in 0..g.int(1, 8) {
            let fs = format!("fs{}", g.int(0, filesets - 1));
            let fd = g.int(1, 2);
            let io = format!("{}k", g.log(1, 1024));
            let op = match g.int(0, 13) {
                0 => format!("createfile name=o{k},filesetname={fs},fd={fd}"),
                1 => format!("openfile name=o{k},filesetname={fs},fd={fd}"),
                2 => format!("closefile name=o{k},fd={fd}"),
                3 => format!("deletefile name=o{k},filesetname={fs}"),
                4 => format!("statfile name=o{k},filesetname={fs}"),
                5 => format!("readwholefile name=o{k},fd={fd},iosize={io}"),
                6 => format!("writewholefile name=o{k},fd={fd},srcfd={fd},iosize={io}"),
                7 => format!("appendfile name=o{k},fd={fd},iosize={io}"),
                8 => format!("appendfilerand name=o{k},fd={fd},iosize={io}{}", if g.chance(0.3) { ",dsync" } else { "" }),
                9 => format!("read name=o{k},filesetname={fs},fd={fd},iosize={io}{}", if g.chance(0.5) { ",random" } else { "" }),
                10 => format!("write name=o{k},filesetname={fs},fd={fd},iosize={io},random"),
                11 => format!("fsync name=o{k},fd={fd}"),
                12 => format!("fsyncset name=o{k},filesetname={fs}"),
                _ => format!("opslimit name=o{k}"),
            };
            wml.push_str(&format!("    flowop {op}\n"));
        }
        wml.push_str("  }\n}\n");
    }
    wml.push_str("run 60\n");
    let file = format!("t{i}.f");
    g.files.push((file.clone(), wml.into_bytes()));
    keys.push(("filebench".into(), t::string(&file)));
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
        let mut lines = fio_job(g, region, plan, k == 0, sections);
        if plan.ext4 {
            job_files(g, &mut lines, region / sections);
        }
        if plan.ext4 && g.chance(0.1) {
            file_engine(g, &mut lines);
        }
        for line in lines {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// One of fio's file and directory operation engines for a job on the tenant's ext4: the
/// options they refuse (syncs, a second loop of a deleting engine, files never made for a
/// stat) are dropped, and files of a few KiB stand for the job's size unless it has several
/// files (`job_files` sized those to fit).
fn file_engine(g: &mut G, lines: &mut Vec<String>) {
    let engine = g.pick(&["filecreate", "filestat", "filedelete", "dircreate", "dirstat", "dirdelete"]);
    g.tag("fio", format!("ioengine={engine}"));
    let once = matches!(engine, "filedelete" | "dircreate" | "dirdelete");
    lines.retain(|l| {
        let name = l.split('=').next().unwrap_or("");
        !(matches!(name, "fsync" | "fdatasync" | "end_fsync" | "fsync_on_close" | "ioengine" | "size")
            || (once && name == "loops")
            || (name == "create_on_open" && matches!(engine, "filestat" | "filedelete")))
    });
    if !lines.iter().any(|l| l.starts_with("filesize=")) {
        lines.push(format!("filesize={}k", 4 * g.int(1, 64)));
    }
    lines.push(format!("ioengine={engine}"));
}

/// Sometimes, a job on the tenant's ext4 (buffered or direct) gets several files of its own (`nrfiles`,
/// each of a whole number of MiB, at most half of `room` in all: block sizes stay under 1 MiB),
/// a file service, and files made as used, sparse or deleted at its end.
fn job_files(g: &mut G, lines: &mut Vec<String>, room: u64) {
    let clash = ["offset", "filename", "filesize"];
    if !g.chance(0.4) || lines.iter().any(|l| clash.iter().any(|c| l.starts_with(c))) {
        return;
    }
    let n = g.int(2, 12);
    let mib = (room / 2 / n) >> 20;
    if mib == 0 {
        return;
    }
    g.tag("fio", "nrfiles");
    lines.push(format!("nrfiles={n}"));
    lines.push(format!("filesize={}m", g.int(1, mib.min(16))));
    if g.chance(0.6) {
        let s = g.pick(&["roundrobin", "roundrobin:3", "sequential", "random", "random:8", "zipf:1.2", "pareto:0.3", "gauss:20"]);
        lines.push(format!("file_service_type={s}"));
    }
    for (opt, p) in [("create_on_open=1", 0.3), ("fallocate=none", 0.2), ("unlink=1", 0.3), ("end_fsync=1", 0.2)] {
        if g.chance(p) {
            lines.push(opt.to_string());
        }
    }
}
