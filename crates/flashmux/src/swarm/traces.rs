//! Trace tenants: a small random block trace written in one of the nine formats flashmux reads
//! (docs/TRACES.md), sometimes gzip-compressed, with the replay options drawn too.

use super::gen::G;
use super::toml as t;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::fmt::Write as _;
use std::io::Write as _;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Read,
    Write,
    Trim,
    Flush,
}

/// One request of the trace as drawn.
#[derive(Clone, Copy, Debug)]
struct Req {
    /// Nanoseconds since the trace's first request.
    time: u64,
    op: Op,
    /// Bytes; multiples of 512 for the formats that count sectors.
    offset: u64,
    len: u64,
    /// Which of the trace's streams (0..streams).
    stream: u32,
}

const FORMATS: [&str; 9] = ["blktrace", "blkparse", "fio-iolog", "msr", "spc", "mqsim", "alibaba", "tencent", "systor"];

/// The fields a format can be split by (beside `none`).
fn fields(format: &str) -> &'static [&'static str] {
    match format {
        "blktrace" | "blkparse" => &["device", "pid"],
        "fio-iolog" | "mqsim" | "alibaba" | "systor" => &["device"],
        "msr" => &["host", "disk"],
        "spc" => &["asu"],
        _ => &["volume"],
    }
}

/// The name the reader gives stream `s` when the trace is split by `field`.
fn stream_name(format: &str, field: &str, s: u32) -> String {
    match (format, field) {
        ("blktrace" | "blkparse", "device") => format!("dev8,{}", 16 * s),
        ("blktrace" | "blkparse", _) => format!("pid{}", 1000 + s),
        ("fio-iolog", _) => format!("/dev/vd{}", (b'a' + s as u8) as char),
        ("msr", "host") => ["hm", "web", "src1", "usr"][s as usize % 4].to_string(),
        ("msr", _) => format!("{}_{}", ["hm", "web", "src1", "usr"][s as usize % 4], s),
        ("spc", _) => format!("asu{s}"),
        ("systor", _) => format!("lun{s}"),
        ("tencent", _) => format!("vol{}", 1000 + s),
        _ => format!("dev{s}"),
    }
}

/// Draws a trace for tenant `i` whose region is about `region` bytes, adds its file(s) to the
/// case and returns the tenant's `trace = ...` value.
pub(super) fn trace_tenant(g: &mut G, i: usize, region: u64, large: bool) -> String {
    let format = g.pick(&FORMATS);
    g.tag("trace", format);
    let n = g.log(20, if large { 20_000 } else { 2_000 });
    let streams = g.weighted(&[(1u32, 2), (2, 2), (4, 1)]);
    let mut reqs = requests(g, format, n, streams, region);
    if g.chance(0.05) && reqs.len() > 2 {
        // A request out of time order.
        let k = g.int(1, reqs.len() as u64 - 1) as usize;
        reqs.swap(k - 1, k);
        g.tag("trace_quirk", "out-of-order");
    }
    let bad_line = g.chance(0.05) && format != "blktrace";
    if bad_line {
        g.tag("trace_quirk", "bad-line");
    }
    let names = files(g, i, format, &reqs, bad_line);
    options(g, format, &names, streams, &reqs)
}

/// `n` requests over `streams` streams: operations the format can say, offsets mostly inside
/// the region (sometimes far beyond it, for wrap, scale and reject), times in order.
fn requests(g: &mut G, format: &str, n: u64, streams: u32, region: u64) -> Vec<Req> {
    let extent = match g.weighted(&[(0u8, 5), (1, 3), (2, 1)]) {
        0 => region,
        1 => region.saturating_mul(g.int(2, 16)),
        _ => 64 << 30,
    }
    .max(1 << 16)
        / 512
        * 512;
    let sectors = !matches!(format, "fio-iolog" | "msr" | "alibaba" | "systor");
    let blk = matches!(format, "blktrace" | "blkparse");
    let ops: &[(Op, u32)] = if blk || format == "fio-iolog" {
        &[(Op::Read, 10), (Op::Write, 10), (Op::Trim, 2), (Op::Flush, 1)]
    } else {
        &[(Op::Read, 1), (Op::Write, 1)]
    };
    // Tencent's times are whole seconds: keep its traces within a few.
    let gap_mean = if format == "tencent" { 0 } else { g.log(500, 2_000_000) };
    let mut time = 0u64;
    let mut reqs = Vec::with_capacity(n as usize);
    for k in 0..n {
        let op = g.weighted(ops);
        let len = match op {
            Op::Flush => 0,
            _ if !sectors && g.chance(0.05) => g.int(1, 70_000), // not whole sectors: widened
            _ => 512 * g.weighted(&[(1u64, 2), (8, 10), (16, 3), (32, 2), (64, 2), (256, 1), (2048, 1)]),
        };
        let offset = if op == Op::Flush { 0 } else { g.int(0, extent.saturating_sub(len.max(512)) / 512) * 512 };
        if format == "tencent" {
            time = k * 2 / n * 1_000_000_000; // 0 s, then 1 s
        } else if gap_mean > 0 {
            time += g.int(0, 2 * gap_mean);
        }
        reqs.push(Req { time, op, offset, len, stream: g.int(0, streams as u64 - 1) as u32 });
    }
    reqs
}

/// Writes the trace's file(s) into the case, gzip-compressed one time in four; returns their
/// names.
fn files(g: &mut G, i: usize, format: &str, reqs: &[Req], bad_line: bool) -> Vec<String> {
    let files = write(g, format, reqs, bad_line);
    let gz = g.chance(0.25);
    let mut names = Vec::new();
    for (suffix, bytes) in files {
        let mut name = format!("t{i}.{suffix}");
        let bytes = if gz {
            name.push_str(".gz");
            let mut e = GzEncoder::new(Vec::new(), Compression::fast());
            e.write_all(&bytes).expect("writing to memory");
            e.finish().expect("writing to memory")
        } else {
            bytes
        };
        g.files.push((name.clone(), bytes));
        names.push(name);
    }
    if gz {
        g.tag("trace_quirk", "gzip");
    }
    debug_assert!(!names.is_empty(), "a trace has a file");
    names
}

/// The tenant's `trace = ...` value: the path (or blktrace's list of files), and the replay
/// options drawn; a bare path sometimes when no option is.
fn options(g: &mut G, format: &str, names: &[String], streams: u32, reqs: &[Req]) -> String {
    let mut opts: Vec<(String, String)> = Vec::new();
    let path = if names.len() > 1 && g.chance(0.5) {
        format!("[{}]", names.iter().map(|n| t::string(n)).collect::<Vec<_>>().join(", "))
    } else {
        t::string(&names[0])
    };
    if g.chance(0.5) {
        opts.push(("format".into(), t::string(format)));
    } else if g.chance(0.1) {
        opts.push(("format".into(), t::string("auto")));
    }
    if g.chance(0.4) {
        let field = g.pick(fields(format));
        opts.push(("tenant_by".into(), t::string(field)));
        if g.chance(0.6) {
            let s = g.int(0, streams as u64) as u32; // one past the last: a stream with no requests
            opts.push(("select".into(), t::string(&stream_name(format, field, s))));
        }
    }
    replay_options(g, format, reqs, &mut opts);
    if opts.is_empty() && names.len() == 1 && g.chance(0.5) {
        return path;
    }
    let mut v = format!("{{ path = {path}");
    for (k, x) in opts {
        let _ = write!(v, ", {k} = {x}");
    }
    v.push_str(" }");
    v
}

/// How the trace is replayed: open or closed loop, the window, the request bound, the address
/// fit, strictness, blktrace's event.
fn replay_options(g: &mut G, format: &str, reqs: &[Req], opts: &mut Vec<(String, String)>) {
    match g.weighted(&[(0u8, 5), (1, 2), (2, 3), (3, 1)]) {
        1 => opts.push(("time_scale".into(), t::float(g.log(1, 400) as f64 / 100.0))),
        2 => {
            g.tag("trace_timing", "closed-loop");
            opts.push(("closed_loop".into(), g.log(1, 64).to_string()))
        }
        3 => opts.push(("max_outstanding".into(), g.log(1, 2048).to_string())),
        _ => {}
    }
    let span = reqs.last().map_or(0, |r| r.time);
    if g.chance(0.1) && span > 0 {
        opts.push(("start".into(), t::string(&t::duration(g.int(0, span / 2)))));
    }
    if g.chance(0.1) {
        opts.push(("duration".into(), t::string(&t::duration(g.int(1, span.max(1))))));
    }
    if g.chance(0.15) {
        opts.push(("max_requests".into(), g.int(1, reqs.len() as u64).to_string()));
    }
    if g.chance(0.4) {
        let fit = g.pick(&["wrap", "scale", "reject"]);
        g.tag("lba_fit", fit);
        opts.push(("lba_fit".into(), t::string(fit)));
    }
    if g.chance(0.1) {
        opts.push(("strict".into(), "true".into()));
    }
    if matches!(format, "blktrace" | "blkparse") && g.chance(0.3) {
        opts.push(("event".into(), t::string(g.pick(&["D", "C", "Q"]))));
    }
}

/// The trace's file(s), by suffix: one file, or blktrace's per-CPU files.
fn write(g: &mut G, format: &str, reqs: &[Req], bad_line: bool) -> Vec<(String, Vec<u8>)> {
    if format == "blktrace" {
        return blktrace(g, reqs);
    }
    let mut s = String::new();
    let bad_at = if bad_line { g.int(0, reqs.len() as u64) as usize } else { usize::MAX };
    let header = g.chance(0.5);
    match format {
        "fio-iolog" => fio_iolog(g, &mut s, reqs, bad_at),
        "blkparse" => blkparse(g, &mut s, reqs, bad_at),
        "msr" => msr(g, &mut s, reqs, bad_at, header),
        "spc" => spc(&mut s, reqs, bad_at),
        "mqsim" => mqsim(&mut s, reqs, bad_at),
        "alibaba" => alibaba(&mut s, reqs, bad_at),
        "tencent" => tencent(&mut s, reqs, bad_at, header),
        _ => systor(g, &mut s, reqs, bad_at, header),
    }
    if g.chance(0.2) && format != "fio-iolog" {
        // Comments and blank lines are never bad.
        s = format!("# a generated {format} trace\n\n{s}");
    }
    vec![(format_suffix(format).to_string(), s.into_bytes())]
}

fn sectors(b: u64) -> u64 {
    b / 512
}

/// `ns` as seconds with nine decimals, after `base` seconds.
fn secs(ns: u64, base: u64) -> String {
    format!("{}.{:09}", base + ns / 1_000_000_000, ns % 1_000_000_000)
}

/// fio's iolog, version 3 (timestamps) or 2 (`wait` lines), one file per stream.
fn fio_iolog(g: &mut G, s: &mut String, reqs: &[Req], bad_at: usize) {
    let v3 = g.chance(0.6);
    s.push_str(if v3 { "fio version 3 iolog\n" } else { "fio version 2 iolog\n" });
    let files: Vec<String> = (0..4).map(|k| stream_name("fio-iolog", "device", k)).collect();
    for f in &files {
        if v3 {
            let _ = writeln!(s, "0 {f} add\n0 {f} open");
        } else {
            let _ = writeln!(s, "{f} add\n{f} open");
        }
    }
    let mut prev = 0;
    for (k, r) in reqs.iter().enumerate() {
        if k == bad_at {
            s.push_str("this is not an iolog line\n");
        }
        let f = &files[r.stream as usize];
        let act = match r.op {
            Op::Read => "read",
            Op::Write => "write",
            Op::Trim => "trim",
            Op::Flush => {
                if k % 2 == 0 {
                    "sync"
                } else {
                    "datasync"
                }
            }
        };
        if v3 {
            let _ = writeln!(s, "{} {f} {act} {} {}", r.time / 1_000, r.offset, r.len);
        } else {
            if r.time > prev {
                let _ = writeln!(s, "{f} wait {} 0", (r.time - prev) / 1_000);
                prev = r.time / 1_000 * 1_000;
            }
            let _ = writeln!(s, "{f} {act} {} {}", r.offset, r.len);
        }
    }
    for f in &files {
        if v3 {
            let _ = writeln!(s, "{} {f} close", reqs.last().map_or(0, |r| r.time / 1_000));
        } else {
            let _ = writeln!(s, "{f} close");
        }
    }
}

/// blkparse's text: Q, D and C events in time order, as blkparse prints them, sometimes with
/// its closing statistics.
fn blkparse(g: &mut G, s: &mut String, reqs: &[Req], bad_at: usize) {
    let mut lines: Vec<(u64, String)> = Vec::new();
    for (k, r) in reqs.iter().enumerate() {
        let rwbs = match r.op {
            Op::Read => "R",
            Op::Write => {
                if k % 3 == 0 {
                    "WS"
                } else {
                    "W"
                }
            }
            Op::Trim => "D",
            Op::Flush => "FN",
        };
        let dev = 16 * r.stream;
        let pid = 1000 + r.stream;
        for (ev, dt) in [("Q", 0u64), ("D", 2_000), ("C", 50_000)] {
            let at = r.time + dt;
            let tail = if r.op == Op::Flush {
                if ev == "C" {
                    "[0]".to_string()
                } else {
                    "[fio]".to_string()
                }
            } else if ev == "C" {
                format!("{} + {} [0]", sectors(r.offset), sectors(r.len))
            } else {
                format!("{} + {} [fio]", sectors(r.offset), sectors(r.len))
            };
            let line = format!(
                "{:>3},{:<3} {:>2} {:>8} {:>5}.{:09} {:>5} {:>2} {:>3} {tail}",
                8,
                dev,
                r.stream % 2,
                k,
                at / 1_000_000_000,
                at % 1_000_000_000,
                pid,
                ev,
                rwbs
            );
            lines.push((at, line));
        }
        if k == bad_at {
            lines.push((r.time, "  8,0    0 garbage".into()));
        }
    }
    lines.sort_by_key(|l| l.0);
    for (_, l) in lines {
        s.push_str(&l);
        s.push('\n');
    }
    if g.chance(0.3) {
        s.push_str("CPU0 (fio):\n Reads Queued:           1,        4KiB\t Writes Queued:           0,        0KiB\n");
    }
}

/// MSR Cambridge: FILETIME ticks, host and disk, bytes, a drawn response time.
fn msr(g: &mut G, s: &mut String, reqs: &[Req], bad_at: usize, header: bool) {
    if header {
        s.push_str("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n");
    }
    let base = 128_166_385_295_514_663u64;
    for (k, r) in reqs.iter().enumerate() {
        if k == bad_at {
            s.push_str("128166385295514663,hm,0,Rd,0,4096,10\n");
        }
        let host = ["hm", "web", "src1", "usr"][r.stream as usize % 4];
        let ty = if r.op == Op::Read { "Read" } else { "Write" };
        let _ = writeln!(s, "{},{host},{},{ty},{},{},{}", base + r.time / 100, r.stream, r.offset, r.len, g.int(100, 50_000));
    }
}

/// SPC: ASU, LBA in sectors, bytes, an opcode in either case, seconds.
fn spc(s: &mut String, reqs: &[Req], bad_at: usize) {
    for (k, r) in reqs.iter().enumerate() {
        if k == bad_at {
            s.push_str("0,12,4096,x,0.5\n");
        }
        let op = match (r.op == Op::Read, k % 2) {
            (true, 0) => "r",
            (true, _) => "R",
            (false, 0) => "w",
            (false, _) => "W",
        };
        let _ = writeln!(s, "{},{},{},{op},{}", r.stream, sectors(r.offset), r.len, secs(r.time, 0));
    }
}

/// MQSim: ns, device, sectors, type 1 read / 0 write.
fn mqsim(s: &mut String, reqs: &[Req], bad_at: usize) {
    for (k, r) in reqs.iter().enumerate() {
        if k == bad_at {
            s.push_str("12 0 8 8 2\n");
        }
        let ty = if r.op == Op::Read { 1 } else { 0 };
        let _ = writeln!(s, "{} {} {} {} {ty}", 1_000 + r.time, r.stream, sectors(r.offset), sectors(r.len));
    }
}

/// Alibaba: device, R or W, bytes, microseconds.
fn alibaba(s: &mut String, reqs: &[Req], bad_at: usize) {
    for (k, r) in reqs.iter().enumerate() {
        if k == bad_at {
            s.push_str("0,X,0,4096,1577808000000626\n");
        }
        let op = if r.op == Op::Read { "R" } else { "W" };
        let _ = writeln!(s, "{},{op},{},{},{}", r.stream, r.offset, r.len, 1_577_808_000_000_000 + r.time / 1_000);
    }
}

/// Tencent CBS: whole seconds, sectors, type 0 read / 1 write, volume.
fn tencent(s: &mut String, reqs: &[Req], bad_at: usize, header: bool) {
    if header {
        s.push_str("Timestamp,Offset,Size,IOType,VolumeID\n");
    }
    for (k, r) in reqs.iter().enumerate() {
        if k == bad_at {
            s.push_str("1538323200,0,8,7,1000\n");
        }
        let ty = if r.op == Op::Read { 0 } else { 1 };
        let _ = writeln!(
            s,
            "{},{},{},{ty},{}",
            1_538_323_200 + r.time / 1_000_000_000,
            sectors(r.offset),
            sectors(r.len),
            1000 + r.stream
        );
    }
}

/// SYSTOR '17: seconds with nine decimals, a response, R or W, LUN, bytes; sometimes a request
/// whose response was not captured (skipped, not bad).
fn systor(g: &mut G, s: &mut String, reqs: &[Req], bad_at: usize, header: bool) {
    if header {
        s.push_str("Timestamp,Response,IOType,LUN,Offset,Size\n");
    }
    for (k, r) in reqs.iter().enumerate() {
        if k == bad_at {
            s.push_str("1456135200.000000000,0.1,Q,0,0,4096\n");
        }
        let ty = if r.op == Op::Read { "R" } else { "W" };
        let _ = writeln!(s, "{},0.000806000,{ty},{},{},{}", secs(r.time, 1_456_135_200), r.stream, r.offset, r.len);
    }
    if g.chance(0.3) {
        // A request whose response was not captured: skipped, not bad.
        s.push_str("1456135201.000000000,0.000806000,,0,0,4096\n");
    }
}

fn format_suffix(format: &str) -> &'static str {
    match format {
        "blkparse" => "blkparse.txt",
        "fio-iolog" => "iolog",
        "msr" => "msr.csv",
        "spc" => "spc",
        "mqsim" => "mqsim",
        "alibaba" => "alibaba.csv",
        "tencent" => "tencent.csv",
        _ => "systor.csv",
    }
}

/// blktrace's binary per-CPU files: a queue, an issue and a completion record per request
/// (so every event can be chosen), each file in time order, in either byte order.
fn blktrace(g: &mut G, reqs: &[Req]) -> Vec<(String, Vec<u8>)> {
    const MAGIC: u32 = 0x6561_7407;
    const TC_READ: u32 = 1;
    const TC_WRITE: u32 = 1 << 1;
    const TC_FLUSH: u32 = 1 << 2;
    const TC_SYNC: u32 = 1 << 3;
    const TC_DISCARD: u32 = 1 << 13;
    const TC_NOTIFY: u32 = 1 << 10;
    let cpus = g.int(1, 3) as usize;
    let big = g.chance(0.15);
    let mut recs: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); cpus];
    let rec = |time: u64, sector: u64, bytes: u32, action: u32, pid: u32, dev: u32, cpu: u32, pdu: &[u8]| -> Vec<u8> {
        let mut b = Vec::with_capacity(48 + pdu.len());
        let u32b = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        let u64b = |v: u64| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        b.extend(u32b(MAGIC));
        b.extend(u32b(0));
        b.extend(u64b(time));
        b.extend(u64b(sector));
        b.extend(u32b(bytes));
        b.extend(u32b(action));
        b.extend(u32b(pid));
        b.extend(u32b(dev));
        b.extend(u32b(cpu));
        b.extend(if big { 0u16.to_be_bytes() } else { 0u16.to_le_bytes() });
        let len = pdu.len() as u16;
        b.extend(if big { len.to_be_bytes() } else { len.to_le_bytes() });
        b.extend_from_slice(pdu);
        b
    };
    for (k, r) in reqs.iter().enumerate() {
        // The first request on the first CPU, so the file named in the scenario is never empty.
        let cpu = if k == 0 { 0 } else { g.int(0, cpus as u64 - 1) as usize };
        let tc = match r.op {
            Op::Read => TC_READ,
            Op::Write => TC_WRITE | TC_SYNC,
            Op::Trim => TC_DISCARD | TC_WRITE,
            Op::Flush => TC_FLUSH | TC_WRITE,
        };
        let dev = (8 << 20) | (16 * r.stream);
        let pid = 1000 + r.stream;
        for (event, dt) in [(1u32, 0u64), (7, 2_000), (8, 50_000)] {
            let pdu: &[u8] = if event == 1 && g.chance(0.2) { b"fio\0" } else { b"" };
            let at = r.time + dt;
            recs[cpu].push((at, rec(at, r.offset / 512, r.len as u32, (tc << 16) | event, pid, dev, cpu as u32, pdu)));
        }
        if g.chance(0.02) {
            // A notification, which is not a request.
            recs[cpu].push((r.time, rec(r.time, 0, 0, (TC_NOTIFY << 16) | 1, pid, dev, cpu as u32, b"fio\0")));
        }
    }
    recs.into_iter()
        .enumerate()
        .map(|(cpu, mut v)| {
            v.sort_by_key(|x| x.0);
            (format!("blktrace.{cpu}"), v.into_iter().flat_map(|x| x.1).collect())
        })
        .collect()
}
