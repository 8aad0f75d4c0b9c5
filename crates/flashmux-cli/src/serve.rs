//! `flashmux serve`: the model in real time behind an NBD server.

use crate::{output, BadArg, OutputFormat};
use anyhow::Context;
use clap::ValueEnum;
use flashmux::config::Scenario;
use flashmux::serve::server::{serve_streaming, IoThreads, Listen, Options, MIN_REPLY_MEMORY};
use flashmux::units::{parse_duration, parse_size};
use flashmux::workload::trace::Format;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The scenario served without a scenario file: one export, `ssd`, the whole of a clean 16 GiB
/// TLC drive.
const DEFAULT_SERVE_SCENARIO: &str = r#"name = "serve"
[device]
preset = "tlc-nvme"
capacity = "16GiB"
[[tenant]]
name = "ssd"
region = "whole"
"#;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Scenario file. Tenants without a workload are the exports (export name = tenant name);
    /// tenants with one run it in real time beside them. Without it: one export, `ssd`, a
    /// clean 16 GiB `tlc-nvme` drive.
    scenario: Option<PathBuf>,
    /// Listen on this Unix socket.
    #[arg(long, conflicts_with = "listen")]
    socket: Option<PathBuf>,
    /// Listen on this TCP address, which must be on loopback: NBD has no authentication here
    /// [default: 127.0.0.1:10809].
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// How connections are served.
    #[arg(long, value_enum, default_value = "per-connection")]
    io_threads: ThreadsArg,
    /// `on`: each reply leaves when the model completes the request; `off`: at once, without
    /// the model (data only: the server's own ceiling).
    #[arg(long, value_enum, default_value = "on")]
    timing: Timing,
    /// Write every request the model serves to this file, as a trace `flashmux replay` reads
    /// (one stream per export; needs `--timing on`).
    #[arg(long)]
    record: Option<PathBuf>,
    /// The format `--record` writes: fio-iolog (fio's `read_iolog` replays it), mqsim or blkparse.
    #[arg(long, default_value = "fio-iolog", requires = "record")]
    record_format: String,
    /// Keep the data in this file (created if missing, one byte per byte of the drive, sparse).
    /// Without it, data lives in memory and is gone when the server stops.
    #[arg(long)]
    backing: Option<PathBuf>,
    /// Print each export's IOPS, bandwidth, latency and GC this often (`0` or `off` for never).
    #[arg(long, default_value = "1s")]
    stats_interval: String,
    /// Connections served at once; more are refused. As many again may be in their handshake
    /// (when those are all taken, a new connection closes the oldest unfinished handshake).
    #[arg(long, default_value_t = 64)]
    max_connections: usize,
    /// Reply bytes all connections together may owe their clients (each at most 64 MiB); at the
    /// bound, connections stop reading requests until their clients read replies.
    #[arg(long, default_value = "1GiB")]
    reply_memory: String,
    /// A client that reads none of its replies for this long is dropped.
    #[arg(long, default_value = "10s")]
    idle_timeout: String,
    /// A connection's handshake must be over this long after it was accepted.
    #[arg(long, default_value = "10s")]
    handshake_timeout: String,
    /// Output directory (overrides the scenario's).
    #[arg(short, long)]
    output_dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "normal")]
    output_format: OutputFormat,
    /// Master seed (overrides the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Drive state before serving: clean, sequential-fill, aged or workload (overrides the scenario's).
    #[arg(long)]
    precondition: Option<String>,
    /// Fraction of each tenant's region holding data after preconditioning, in (0, 1].
    #[arg(long)]
    fill: Option<f64>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ThreadsArg {
    /// A thread per connection, handing requests to one model thread.
    PerConnection,
    /// One thread for every connection's I/O and the model (QEMU's one I/O thread under its
    /// global lock: paper A's baseline).
    Single,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Timing {
    On,
    Off,
}

pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let s = scenario(&a)?;
    let opts = options(&a)?;
    for w in &s.warnings {
        eprintln!("flashmux: warning: {w}");
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let flag = stop.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).context("installing the SIGINT/SIGTERM handler")?;
    }
    // Where the results go, and whether the machine can hold the model, are checked before
    // serving.
    crate::check_memory(std::slice::from_ref(&s))?;
    let out = output::OutputDir::prepare(&s.output.dir)?;
    // The timeline streams into the output directory: a server may run for days.
    let timeline = out.timeline();
    let results = serve_streaming(s, opts, stop, Box::new(|m| eprintln!("flashmux serve: {m}")), Some(timeline.sink()))?;
    let interrupted = results.stop_reason == flashmux::metrics::StopReason::Interrupted;
    if let Some(sv) = &results.serve {
        print_summary(sv);
    }
    output::write_all(&results, &out, a.output_format, Some(timeline))?;
    // Stopped while the drive was being preconditioned: nothing was served.
    Ok(if interrupted { ExitCode::from(crate::EXIT_INTERRUPTED) } else { ExitCode::SUCCESS })
}

/// The scenario served: `--scenario`'s file or the built-in one, with the command line's
/// output directory, seed and drive state.
fn scenario(a: &ServeArgs) -> anyhow::Result<Scenario> {
    let mut s = match &a.scenario {
        Some(p) => Scenario::load_for_serve(p)?,
        None => Scenario::serve_from_toml(DEFAULT_SERVE_SCENARIO, "<built-in serve scenario>", Path::new("."))?,
    };
    if let Some(dir) = &a.output_dir {
        s.output.dir = dir.clone();
    }
    if let Some(seed) = a.seed {
        s.seed = seed;
    }
    crate::set_drive_state(&mut s, a.precondition.as_deref(), a.fill)?;
    Ok(s)
}

/// The server's options from the command line, each flag checked in turn.
fn options(a: &ServeArgs) -> anyhow::Result<Options> {
    let listen = match (&a.socket, a.listen) {
        (Some(p), _) => Listen::Unix(p.clone()),
        (None, Some(addr)) if !addr.ip().is_loopback() => {
            return Err(BadArg(format!(
                "--listen: {addr} is not a loopback address: flashmux serves without authentication, so only on 127.0.0.1 or ::1"
            ))
            .into())
        }
        (None, Some(addr)) => Listen::Tcp(addr),
        (None, None) => Listen::Tcp(SocketAddr::from(([127, 0, 0, 1], 10809))),
    };
    let stats_interval = match parse_duration(&a.stats_interval) {
        _ if matches!(a.stats_interval.as_str(), "0" | "off") => None,
        Ok(d) if d.0 == 0 => None,
        Ok(d) => Some(Duration::from_nanos(d.0)),
        Err(e) => return Err(BadArg(format!("--stats-interval: {e}")).into()),
    };
    if a.max_connections == 0 {
        return Err(BadArg("--max-connections: must be at least 1".into()).into());
    }
    let reply_memory = parse_size(&a.reply_memory).map_err(|e| BadArg(format!("--reply-memory: {e}")))?;
    if reply_memory < MIN_REPLY_MEMORY {
        return Err(BadArg(format!(
            "--reply-memory: {} is less than {} MiB: expected room for two of the longest replies (32 MiB of data each)",
            a.reply_memory,
            MIN_REPLY_MEMORY >> 20
        ))
        .into());
    }
    Ok(Options {
        listen,
        io_threads: match a.io_threads {
            ThreadsArg::PerConnection => IoThreads::PerConnection,
            ThreadsArg::Single => IoThreads::Single,
        },
        timing: a.timing == Timing::On,
        backing: a.backing.clone(),
        stats_interval,
        max_connections: a.max_connections,
        reply_memory,
        idle_timeout: positive_duration("--idle-timeout", &a.idle_timeout)?,
        handshake_timeout: positive_duration("--handshake-timeout", &a.handshake_timeout)?,
        record: record(a)?,
    })
}

/// `--record` and `--record-format`, checked (the file is created now, before any aging).
fn record(a: &ServeArgs) -> anyhow::Result<Option<(PathBuf, Format)>> {
    if a.record.is_some() && a.timing == Timing::Off {
        return Err(BadArg("--record: the requests recorded are those the model serves; with --timing off there is no model".into()).into());
    }
    record_target(a.record.as_deref(), &a.record_format)
}

/// A `--record FILE` and its `--record-format`, checked, the file created (so that a path that
/// cannot be written fails before anything runs).
pub(crate) fn record_target(path: Option<&std::path::Path>, format: &str) -> anyhow::Result<Option<(PathBuf, Format)>> {
    let Some(path) = path else { return Ok(None) };
    let writable = || Format::WRITABLE.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ");
    let f = Format::from_name(format)
        .filter(|f| Format::WRITABLE.contains(f))
        .ok_or_else(|| BadArg(format!("--record-format: cannot write '{format}': expected one of {}", writable())))?;
    std::fs::File::create(path).map_err(|e| BadArg(format!("--record: {}: {e}", path.display())))?;
    Ok(Some((path.to_path_buf(), f)))
}

/// The run's two summary lines on stderr: requests and timing error; reply memory, pauses,
/// drops, refusals and handshakes.
fn print_summary(sv: &flashmux::metrics::ServeResult) {
    let timing = match &sv.timing_error_ns {
        Some(q) => format!(
            "; reply time − model time: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            q.p50 as f64 / 1e3,
            q.p99 as f64 / 1e3,
            q.max as f64 / 1e3
        ),
        None => String::new(),
    };
    eprintln!(
        "flashmux serve: served {} requests ({} errors) on {} connections in {:.1} s{timing}",
        sv.requests, sv.errors, sv.connections, sv.wall_s
    );
    eprintln!(
        "flashmux serve: reply memory peak {:.1} MiB of {} MiB; reading paused {} times; {} connections dropped (idle), {} refused; {} handshakes timed out, {} closed for newer ones",
        sv.reply_bytes_peak as f64 / f64::from(1 << 20),
        sv.reply_bytes_limit >> 20,
        sv.read_pauses,
        sv.connections_dropped,
        sv.connections_refused,
        sv.handshakes_timed_out,
        sv.handshakes_evicted
    );
}

/// A duration flag that must be longer than zero.
fn positive_duration(flag: &str, value: &str) -> Result<Duration, BadArg> {
    match parse_duration(value) {
        Ok(d) if d.0 > 0 => Ok(Duration::from_nanos(d.0)),
        Ok(_) => Err(BadArg(format!("{flag}: {value} is no time at all: expected a duration longer than zero, such as 10s"))),
        Err(e) => Err(BadArg(format!("{flag}: {e}"))),
    }
}
