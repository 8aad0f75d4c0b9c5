//! `flashmux trace info|convert` (what a trace holds; the trace in another tool's format) and
//! `flashmux replay` (a trace, or its streams as tenants, on a modelled drive).

use crate::{execute, BadArg, OutputFormat};
use anyhow::Context;
use flashmux::config::{LbaFit, Scenario, PRESET_NAMES};
use flashmux::device::precondition::PreconditionState;
use flashmux::host::SchedulerKind;
use flashmux::units::{parse_duration, parse_size, Nanos};
use flashmux::fsutil;
use flashmux::workload::trace::{write_trace, BlkEvent, Format, ReadOptions, TenantBy, TraceError, TraceInfo, TraceReader};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How a trace is read: shared by every trace command.
#[derive(clap::Args, Clone)]
pub struct ReadArgs {
    /// Trace file(s); several only for blktrace's per-CPU files (one of them finds the others).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// The trace's format: auto (told from the content) or blktrace, blkparse, fio-iolog, msr,
    /// spc, mqsim, alibaba, tencent, systor.
    #[arg(long, default_value = "auto")]
    format: String,
    /// Split the trace into streams (tenants) by this field: none, device, host, disk, volume,
    /// asu, pid.
    #[arg(long, default_value = "none")]
    tenant_by: String,
    /// Fail at the first bad line instead of skipping it.
    #[arg(long)]
    strict: bool,
    /// blktrace/blkparse: the event read as the request: D (issue), C (complete), Q (queue).
    #[arg(long, default_value = "D")]
    event: String,
}

impl ReadArgs {
    fn options(&self) -> anyhow::Result<ReadOptions> {
        let format = match self.format.as_str() {
            "auto" => None,
            f => Some(Format::from_name(f).ok_or_else(|| {
                BadArg(format!("--format: unknown format '{f}': expected auto or one of {}", format_names(Format::ALL)))
            })?),
        };
        let tenant_by = TenantBy::from_name(&self.tenant_by).ok_or_else(|| {
            BadArg(format!(
                "--tenant-by: unknown field '{}': expected one of {}",
                self.tenant_by,
                TenantBy::ALL.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
            ))
        })?;
        let blktrace_event = BlkEvent::from_name(&self.event)
            .ok_or_else(|| BadArg(format!("--event: unknown event '{}': expected D, C or Q", self.event)))?;
        Ok(ReadOptions { format, tenant_by, place_by: TenantBy::None, strict: self.strict, blktrace_event })
    }

    fn open(&self) -> anyhow::Result<TraceReader> {
        Ok(TraceReader::open(&self.traces, &self.options()?).map_err(|e| BadArg(e.to_string()))?)
    }
}

fn format_names(fs: &[Format]) -> String {
    fs.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

/// Tells the user about skipped lines; with none read at all, the trace is bad input.
fn report_bad_lines(r: &TraceReader) {
    let bad = r.bad_lines();
    if bad.count > 0 {
        eprintln!("flashmux: warning: {} bad line(s) skipped (--strict fails on them); first:", bad.count);
        for b in &bad.first {
            eprintln!("  line {}: {}", b.line, b.reason);
        }
    }
}

#[derive(clap::Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    what: TraceCmd,
}

#[derive(clap::Subcommand)]
enum TraceCmd {
    /// Format detected, requests, read/write mix, size histogram, footprint, duration, IOPS
    /// over time, streams.
    Info(InfoArgs),
    /// Write the trace in another format (fio-iolog, mqsim, blkparse).
    Convert(ConvertArgs),
    /// Two traces side by side (e.g. a real kernel's and the model's for one workload): mix,
    /// bytes, sizes, sequentiality, flushes, footprint, and how B differs from A.
    Compare(CompareArgs),
}

#[derive(clap::Args)]
struct CompareArgs {
    /// Trace A (a blktrace per-CPU file finds its siblings).
    a: PathBuf,
    /// Trace B.
    b: PathBuf,
    /// The traces' format: auto (each told from its content) or one of the formats.
    #[arg(long, default_value = "auto")]
    format: String,
    /// blktrace/blkparse: the event read as the request: D (issue), C (complete), Q (queue).
    #[arg(long, default_value = "D")]
    event: String,
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct InfoArgs {
    #[command(flatten)]
    read: ReadArgs,
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ConvertArgs {
    #[command(flatten)]
    read: ReadArgs,
    /// The format to write: fio-iolog, mqsim or blkparse.
    #[arg(long)]
    to: String,
    /// Output file (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub fn run_trace(args: TraceArgs) -> anyhow::Result<ExitCode> {
    match args.what {
        TraceCmd::Info(a) => info(a),
        TraceCmd::Convert(a) => convert(a),
        TraceCmd::Compare(a) => compare(a),
    }
}

fn compare(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let summary = |path: &PathBuf| -> anyhow::Result<TraceInfo> {
        let read = ReadArgs { traces: vec![path.clone()], format: a.format.clone(), tenant_by: "none".into(), strict: false, event: a.event.clone() };
        let mut r = read.open()?;
        let mut info = TraceInfo::new();
        drain(&mut r, |rec| info.add(rec))?;
        report_bad_lines(&r);
        Ok(info)
    };
    let (ia, ib) = (summary(&a.a)?, summary(&a.b)?);
    let rows = flashmux::workload::trace::compare::compare(&ia, &ib);
    let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
    if a.json {
        let v = serde_json::json!({ "a": na, "b": nb, "rows": rows });
        println!("{}", serde_json::to_string_pretty(&v).context("serializing the comparison")?);
    } else {
        let name = |p: &PathBuf| p.file_name().map_or_else(|| p.display().to_string(), |f| f.to_string_lossy().into_owned());
        print!("{}", flashmux::workload::trace::compare::Table { a: &name(&a.a), b: &name(&a.b), rows: &rows });
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads every record; a read error is bad input.
fn drain(r: &mut TraceReader, mut each: impl FnMut(&flashmux::workload::trace::TraceRecord)) -> anyhow::Result<()> {
    while let Some(rec) = r.next_record().map_err(|e| BadArg(e.to_string()))? {
        each(&rec);
    }
    Ok(())
}

fn info(a: InfoArgs) -> anyhow::Result<ExitCode> {
    let mut r = a.read.open()?;
    let mut info = TraceInfo::new();
    drain(&mut r, |rec| info.add(rec))?;
    info.name_streams(|s| r.stream_name(s));
    report_bad_lines(&r);
    if a.json {
        let mut v = serde_json::to_value(&info).context("serializing the summary")?;
        v["format"] = r.format().name().into();
        v["bad_lines"] = r.bad_lines().count.into();
        v["out_of_order"] = r.out_of_order().into();
        println!("{}", serde_json::to_string_pretty(&v).context("serializing the summary")?);
    } else {
        println!("format:        {}", r.format().name());
        println!("lines read:    {} ({} bad, {} requests out of time order)", r.lines_read(), r.bad_lines().count, r.out_of_order());
        print!("{info}");
        print_iops_over_time(&info.requests_per_second);
    }
    Ok(ExitCode::SUCCESS)
}

/// Mean IOPS in at most 20 equal spans of the trace's seconds.
fn print_iops_over_time(per_second: &[u32]) {
    if per_second.len() < 2 {
        return;
    }
    let span = per_second.len().div_ceil(20);
    println!("IOPS over time ({span} s per row)");
    for (i, chunk) in per_second.chunks(span).enumerate() {
        let mean = chunk.iter().map(|&n| n as u64).sum::<u64>() as f64 / chunk.len() as f64;
        let from = i * span;
        println!("  {:>8} s .. {:>8} s {:>12.0}", from, from + chunk.len(), mean);
    }
}

fn convert(a: ConvertArgs) -> anyhow::Result<ExitCode> {
    let to = Format::from_name(&a.to)
        .filter(|f| Format::WRITABLE.contains(f))
        .ok_or_else(|| BadArg(format!("--to: cannot write '{}': expected one of {}", a.to, format_names(Format::WRITABLE))))?;
    let mut r = a.read.open()?;
    if let Some(out) = &a.output {
        // By identity, not by name: a symbolic or hard link to the input is the input.
        if let Some(input) = r.paths().iter().find(|p| fsutil::same_file(out, p)) {
            return Err(BadArg(format!(
                "-o {}: is the trace being read ({}): writing it would destroy the input; name another file",
                out.display(),
                input.display()
            ))
            .into());
        }
    }
    // Records are pulled through the writer one at a time; a read error stops the iterator and
    // is reported once the writer is done.
    let mut failed = None;
    let names = std::cell::RefCell::new(BTreeMap::<u32, String>::new());
    let mut convert = |out: &mut dyn Write| -> std::io::Result<u64> {
        let records = std::iter::from_fn(|| match r.next_record() {
            Ok(Some(rec)) => {
                names.borrow_mut().entry(rec.stream).or_insert_with(|| r.stream_name(rec.stream));
                Some(rec)
            }
            Ok(None) => None,
            Err(e) => {
                failed = Some(e);
                None
            }
        });
        let name_of = |s: u32| names.borrow().get(&s).cloned().unwrap_or_else(|| format!("stream{s}"));
        let n = write_trace(records, to, out, &name_of)?;
        match &failed {
            // A file is replaced only by a whole conversion: the temporary file is dropped.
            Some(_) => Err(std::io::Error::other("the trace could not be read to its end")),
            None => Ok(n),
        }
    };
    let written = match &a.output {
        Some(p) => fsutil::write_atomic(p, &mut convert).map_err(|e| (e, Some(p))),
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            convert(&mut out).and_then(|n| out.flush().map(|()| n)).map_err(|e| (e, None))
        }
    };
    report_bad_lines(&r);
    if let Some(e) = failed {
        let what = match &a.output {
            Some(p) => format!("nothing was written to {}", p.display()),
            None => "the requests before it were written".into(),
        };
        return Err(BadArg(format!("{e} ({what})")).into());
    }
    let written = match written {
        Ok(n) => n,
        Err((e, Some(p))) => return Err(anyhow::Error::new(e).context(format!("writing {}", p.display()))),
        Err((e, None)) => return Err(anyhow::Error::new(e).context("writing the trace")),
    };
    eprintln!("flashmux: {written} requests written as {}", to.name());
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    read: ReadArgs,
    /// Device preset.
    #[arg(long, default_value = "tlc-nvme")]
    device: String,
    /// Logical capacity of the drive (default: the preset's).
    #[arg(long)]
    capacity: Option<String>,
    /// Multiply the trace's times by this (0.5 replays twice as fast; default 1).
    #[arg(long, conflicts_with = "closed_loop")]
    time_scale: Option<f64>,
    /// Ignore the times: keep this many requests outstanding per tenant.
    #[arg(long)]
    closed_loop: Option<u32>,
    /// Open loop: at most this many requests outstanding per tenant (default 1024).
    #[arg(long, conflicts_with = "closed_loop")]
    max_outstanding: Option<u32>,
    /// Skip the trace before this time (e.g. 10s).
    #[arg(long)]
    start: Option<String>,
    /// Replay this much of the trace from --start (e.g. 60s).
    #[arg(long)]
    duration: Option<String>,
    /// Replay at most this many requests per tenant.
    #[arg(long)]
    max_requests: Option<u64>,
    /// Fit trace addresses into each tenant's region: wrap (modulo), scale or reject.
    #[arg(long, default_value = "wrap")]
    lba_fit: String,
    /// Host scheduler (none, cfq, mcfq; fair, hwabc on an open-channel or FDP drive).
    #[arg(long, default_value = "none")]
    scheduler: String,
    /// Place each write by this field of the trace (device, host, disk, volume, asu, pid): its
    /// k-th value writes through FDP handle k, or stream k + 1; needs a drive with FDP or
    /// Streams (e.g. --device tlc-nvme-fdp).
    #[arg(long)]
    place_by: Option<String>,
    /// Drive state before the run: clean, sequential-fill, aged or workload.
    #[arg(long, default_value = "clean")]
    precondition: String,
    /// Fraction of each tenant's region holding data after preconditioning.
    #[arg(long)]
    fill: Option<f64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output directory.
    #[arg(short, long, default_value = "flashmux-out")]
    output_dir: PathBuf,
    #[arg(long, value_enum, default_value = "normal")]
    output_format: OutputFormat,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// TOML's spelling of a string (JSON's escapes are all TOML's too).
pub(crate) fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// `--flag`'s value `n`, which must be from 1 to `max`.
fn in_range(flag: &str, n: Option<u64>, max: u64) -> Result<Option<u64>, BadArg> {
    match n {
        Some(n) if !(1..=max).contains(&n) => Err(BadArg(format!("{flag}: {n} is out of range: expected 1 to {max}"))),
        _ => Ok(n),
    }
}

/// `--flag`'s duration, if given.
fn duration_flag(flag: &str, v: &Option<String>) -> Result<Option<Nanos>, BadArg> {
    v.as_deref().map(|v| parse_duration(v).map_err(|e| BadArg(format!("{flag}: {e}")))).transpose()
}

/// Checks every replay flag as the flag it is, so that what the replay's scenario is built from
/// is valid: an error names the flag, never a key of a scenario the user did not write.
fn check_replay_flags(a: &ReplayArgs) -> Result<(), BadArg> {
    if flashmux::config::preset(&a.device).is_none() {
        return Err(BadArg(format!("--device: unknown preset '{}': expected one of {}", a.device, PRESET_NAMES.join(", "))));
    }
    if let Some(c) = &a.capacity {
        parse_size(c).map_err(|e| BadArg(format!("--capacity: {e}")))?;
    }
    if let Some(x) = a.time_scale {
        if !(x.is_finite() && x > 0.0) {
            return Err(BadArg(format!("--time-scale: {x} is not a positive number (1 = the trace's own pace, 0.5 = twice as fast)")));
        }
        use flashmux::config::{MAX_TIME_SCALE, MIN_TIME_SCALE};
        if !(MIN_TIME_SCALE..=MAX_TIME_SCALE).contains(&x) {
            return Err(BadArg(format!(
                "--time-scale: {x:?} is out of range: expected {MIN_TIME_SCALE:e} to {MAX_TIME_SCALE:e} (--closed-loop replays as fast as the device allows)"
            )));
        }
    }
    // The limits of the scenario keys they become (`config/trace.rs`).
    in_range("--closed-loop", a.closed_loop.map(u64::from), 65_536)?;
    in_range("--max-outstanding", a.max_outstanding.map(u64::from), 65_536)?;
    in_range("--max-requests", a.max_requests, i64::MAX as u64)?;
    duration_flag("--start", &a.start)?;
    if duration_flag("--duration", &a.duration)? == Some(Nanos::ZERO) {
        return Err(BadArg("--duration: must be longer than zero".into()));
    }
    if LbaFit::from_name(&a.lba_fit).is_none() {
        let names: Vec<&str> = LbaFit::ALL.iter().map(|f| f.name()).collect();
        return Err(BadArg(format!("--lba-fit: unknown '{}': expected one of {}", a.lba_fit, names.join(", "))));
    }
    if SchedulerKind::from_name(&a.scheduler).is_none() {
        return Err(BadArg(format!("--scheduler: unknown scheduler '{}': expected one of {}", a.scheduler, SchedulerKind::NAMES.join(", "))));
    }
    crate::check_drive_state(Some(&a.precondition), a.fill, PreconditionState::Clean).map(|_| ())
}

/// `--place-by`'s field, checked as a flag: a field name the trace's format has, on a drive
/// that places writes.
fn check_place_by(a: &ReplayArgs, opts: &ReadOptions) -> anyhow::Result<Option<TenantBy>> {
    let Some(name) = &a.place_by else { return Ok(None) };
    let field = TenantBy::from_name(name).filter(|&f| f != TenantBy::None).ok_or_else(|| {
        BadArg(format!(
            "--place-by: unknown field '{name}': expected one of {}",
            TenantBy::ALL.iter().filter(|&&t| t != TenantBy::None).map(|t| t.name()).collect::<Vec<_>>().join(", ")
        ))
    })?;
    let preset = flashmux::config::preset(&a.device).expect("checked with the other flags");
    if preset.kind.placement().is_none() {
        let placed: Vec<&str> = PRESET_NAMES
            .iter()
            .copied()
            .filter(|p| flashmux::config::preset(p).is_some_and(|p| !p.kind.placement().is_none()))
            .collect();
        return Err(BadArg(format!(
            "--place-by: the drive ('{}') offers no data placement: use a preset with FDP ({})",
            a.device,
            placed.join(", ")
        ))
        .into());
    }
    let with = ReadOptions { place_by: field, ..opts.clone() };
    TraceReader::open(&a.read.traces, &with).map_err(|e| match e {
        TraceError::NoPlaceField { .. } => BadArg(format!("--place-by: {e}")),
        e => BadArg(e.to_string()),
    })?;
    Ok(Some(field))
}

/// The scenario `flashmux replay` runs: one tenant per stream (the whole trace when not split),
/// each on an equal part of the drive.
pub fn replay_scenario(a: &ReplayArgs, cwd: &Path) -> anyhow::Result<Scenario> {
    let opts = a.read.options()?;
    check_replay_flags(a)?;
    let place_by = check_place_by(a, &opts)?;
    let mut streams: Vec<String> = vec!["trace".into()];
    if opts.tenant_by != TenantBy::None {
        let mut r = a.read.open()?;
        let mut seen = 0u32;
        drain(&mut r, |rec| seen = seen.max(rec.stream + 1))?;
        streams = (0..seen).map(|s| r.stream_name(s)).collect();
        if streams.len() >= 255 {
            return Err(BadArg(format!("the trace has {} {} streams: at most 254 tenants are supported", streams.len(), opts.tenant_by.name())).into());
        }
    }
    let paths: Vec<String> = a.read.traces.iter().map(|p| quoted(&cwd.join(p).display().to_string())).collect();
    let mut t = format!("path = [{}], format = {}, tenant_by = {}, lba_fit = {}, strict = {}, event = {}", paths.join(", "), quoted(&a.read.format), quoted(&a.read.tenant_by), quoted(&a.lba_fit), a.read.strict, quoted(&a.read.event));
    match a.closed_loop {
        Some(n) => t += &format!(", closed_loop = {n}"),
        None => {
            if let Some(x) = a.time_scale {
                t += &format!(", time_scale = {x:?}");
            }
            if let Some(m) = a.max_outstanding {
                t += &format!(", max_outstanding = {m}");
            }
        }
    }
    for (k, v) in [("start", &a.start), ("duration", &a.duration)] {
        if let Some(v) = v {
            t += &format!(", {k} = {}", quoted(v));
        }
    }
    if let Some(n) = a.max_requests {
        t += &format!(", max_requests = {n}");
    }
    if let Some(f) = place_by {
        t += &format!(", place_by = {}", quoted(f.name()));
    }
    let mut text = format!(
        "name = {}\n[device]\npreset = {}\n{}[precondition]\nstate = {}\n{}[host]\nscheduler = {}\n",
        quoted(&format!("replay of {}", a.read.traces[0].display())),
        quoted(&a.device),
        a.capacity.as_ref().map_or(String::new(), |c| format!("capacity = {}\n", quoted(c))),
        quoted(&a.precondition),
        a.fill.map_or(String::new(), |f| format!("fill = {f:?}\n")),
        quoted(&a.scheduler),
    );
    for s in &streams {
        let select = if opts.tenant_by == TenantBy::None { String::new() } else { format!(", select = {}", quoted(s)) };
        // Tenant names have no commas (blktrace's devices do: "dev8,0").
        text += &format!("[[tenant]]\nname = {}\ntrace = {{ {t}{select} }}\n", quoted(&s.replace(',', ":")));
    }
    let mut s = Scenario::from_generated_toml(&text, "replay", cwd)?;
    // Any u64 (TOML's integers stop at 2^63 - 1) and any path.
    s.seed = a.seed;
    s.output.dir = a.output_dir.clone();
    Ok(s)
}

pub fn run_replay(a: ReplayArgs) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let scenario = replay_scenario(&a, &cwd)?;
    execute(scenario, a.output_format, a.no_progress)
}
