//! `flashmux serve`: the model in real time behind an NBD server.

use crate::{output, BadArg, OutputFormat};
use anyhow::Context;
use clap::ValueEnum;
use flashmux::config::Scenario;
use flashmux::serve::server::{serve, IoThreads, Listen, Options};
use flashmux::units::parse_duration;
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
    /// Drive state before serving: clean, sequential-fill or aged (overrides the scenario's).
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
    let handshake_timeout = positive_duration("--handshake-timeout", &a.handshake_timeout)?;
    for w in &s.warnings {
        eprintln!("flashmux: warning: {w}");
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let flag = stop.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).context("installing the SIGINT/SIGTERM handler")?;
    }
    let out_dir = s.output.dir.clone();
    let opts = Options {
        listen,
        io_threads: match a.io_threads {
            ThreadsArg::PerConnection => IoThreads::PerConnection,
            ThreadsArg::Single => IoThreads::Single,
        },
        timing: a.timing == Timing::On,
        backing: a.backing.clone(),
        stats_interval,
        max_connections: a.max_connections,
        handshake_timeout,
    };
    let results = serve(s, opts, stop, Box::new(|m| eprintln!("flashmux serve: {m}")))?;
    if let Some(sv) = &results.serve {
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
    }
    output::write_all(&results, &out_dir, a.output_format)?;
    Ok(ExitCode::SUCCESS)
}

/// A duration flag that must be longer than zero.
fn positive_duration(flag: &str, value: &str) -> Result<Duration, BadArg> {
    match parse_duration(value) {
        Ok(d) if d.0 > 0 => Ok(Duration::from_nanos(d.0)),
        Ok(_) => Err(BadArg(format!("{flag}: {value} is no time at all: expected a duration longer than zero, such as 10s"))),
        Err(e) => Err(BadArg(format!("{flag}: {e}"))),
    }
}

