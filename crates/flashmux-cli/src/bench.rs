//! `flashmux bench`: the simulator's speed on its reference workload — 4 KiB random writes at
//! QD 32 on an aged drive in GC steady state — in simulated requests per wall-clock second, with
//! memory use. A benchmark, not a test: the numbers go to docs/PERFORMANCE.md.

use anyhow::Context;
use flashmux::config::Scenario;
use flashmux::sim::{Progress, Simulator};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Device preset.
    #[arg(long, default_value = "tlc-nvme")]
    preset: String,
    /// Logical capacity of the drive.
    #[arg(long, default_value = "64GiB")]
    capacity: String,
    /// Requests to simulate after preconditioning.
    #[arg(long, default_value_t = 2_000_000)]
    requests: u64,
    /// Queue depth of each tenant.
    #[arg(long, default_value_t = 32)]
    iodepth: u32,
    /// Tenants, each running the same random writes over the whole drive, with weights 1000,
    /// 700, 400, 100 in turn (they matter to `cfq` and `mcfq`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    tenants: u32,
    /// Over-provisioning (physical = logical × (1 + op)); default: the preset's.
    #[arg(long)]
    overprovisioning: Option<f64>,
    /// With DFTL: the map cache's size as a share of the translation table, e.g. 1% (default:
    /// the whole table in DRAM, `full` mapping).
    #[arg(long)]
    dftl_cmt: Option<String>,
    /// Host I/O scheduler.
    #[arg(long, default_value = "none")]
    scheduler: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Replay this block trace instead (closed loop at --iodepth; format told from the content).
    #[arg(long, conflicts_with = "tenants")]
    trace: Option<std::path::PathBuf>,
    /// With --trace: only read the trace, and report the reader's speed.
    #[arg(long, requires = "trace")]
    parse_only: bool,
    /// Buffered I/O: the jobs write through a kernel's page cache (`[kernel]`, 1 GiB) instead
    /// of directly (`direct=1`).
    #[arg(long, conflicts_with = "trace")]
    buffered: bool,
    /// Data placement: `none`, `fdp` (8 reclaim unit handles, or one per tenant beyond 8, a
    /// handle per tenant) or `streams` (the same with streams).
    #[arg(long, default_value = "none", value_parser = ["none", "fdp", "streams"])]
    placement: String,
}

/// `[device.fdp]` or `[device.streams]` for `--placement`, a handle or stream per tenant.
fn placement_toml(a: &BenchArgs) -> String {
    let n = a.tenants.max(8);
    match a.placement.as_str() {
        "fdp" => format!("[device.fdp]\nhandles = {n}\nper_tenant = true\n"),
        "streams" => format!("[device.streams]\nstreams = {n}\nper_tenant = true\n"),
        _ => String::new(),
    }
}

fn scenario_toml(a: &BenchArgs) -> String {
    let mut ftl = String::new();
    if let Some(op) = a.overprovisioning {
        ftl.push_str(&format!("overprovisioning = {op}\n"));
    }
    if a.dftl_cmt.is_some() {
        ftl.push_str("mapping = \"dftl\"\n");
    }
    let mut op = if ftl.is_empty() { String::new() } else { format!("[device.ftl]\n{ftl}") };
    op.push_str(&placement_toml(a));
    if let Some(size) = &a.dftl_cmt {
        op.push_str(&format!("[device.ftl.cmt]\nsize = \"{size}\"\n"));
    }
    format!(
        r#"name = "bench"
seed = {seed}
[device]
preset = "{preset}"
capacity = "{capacity}"
{op}[precondition]
state = "aged"
[host]
scheduler = "{scheduler}"
{kernel}[stop]
requests = {requests}
{tenants}"#,
        seed = a.seed,
        preset = a.preset,
        capacity = a.capacity,
        op = op,
        scheduler = a.scheduler,
        kernel = if a.buffered { "[kernel]\n" } else { "" },
        requests = a.requests,
        tenants = tenants_toml(a),
    )
}

/// Weights the bench's tenants take in turn: paper D's 10 : 7 : 4 : 1.
const WEIGHTS: [u32; 4] = [1000, 700, 400, 100];

fn tenants_toml(a: &BenchArgs) -> String {
    if let Some(t) = &a.trace {
        let path = crate::trace::quoted(&t.display().to_string());
        return format!("[[tenant]]\nname = \"trace\"\ntrace = {{ path = {path}, closed_loop = {} }}\n", a.iodepth);
    }
    (0..a.tenants)
        .map(|i| {
            // One tenant keeps the historical name (and default weight) of the reference run.
            let (name, weight) = match a.tenants {
                1 => ("randwrite".to_string(), String::new()),
                _ => (format!("t{i}"), format!("weight = {}\n", WEIGHTS[i as usize % WEIGHTS.len()])),
            };
            format!(
                "[[tenant]]\nname = \"{name}\"\n{weight}fio = \"\"\"\n[randwrite]\nrw=randwrite\nbs=4k\niodepth={}\nnorandommap\ntime_based\nruntime=100000s\ndirect={}\n\"\"\"\n",
                a.iodepth,
                u8::from(!a.buffered)
            )
        })
        .collect()
}

/// (VmRSS, VmHWM) of this process in bytes, where /proc is available.
fn memory() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// The trace reader alone: requests and lines per second, and memory.
fn parse_only(path: &Path) -> anyhow::Result<ExitCode> {
    use flashmux::workload::trace::TraceReader;
    let t0 = Instant::now();
    let mut r = TraceReader::open(&[path.to_path_buf()], &Default::default()).map_err(|e| crate::BadArg(e.to_string()))?;
    let mut n = 0u64;
    while r.next_record().map_err(|e| crate::BadArg(e.to_string()))?.is_some() {
        n += 1;
    }
    let s = t0.elapsed().as_secs_f64();
    println!(
        "read {n} requests ({} lines, {} bad) of a {} trace in {s:.2} s: {:.0} requests/s, {:.0} lines/s",
        r.lines_read(),
        r.bad_lines().count,
        r.format().name(),
        n as f64 / s,
        r.lines_read() as f64 / s
    );
    if let Some((rss, hwm)) = memory() {
        println!("memory: RSS {:.1} MiB; peak {:.1} MiB", mib(rss), mib(hwm));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    if let (Some(t), true) = (&args.trace, args.parse_only) {
        return parse_only(t);
    }
    let scenario = Scenario::from_toml(&scenario_toml(&args), "<bench>", Path::new("."))?;
    let t0 = Instant::now();
    let mut sim = Simulator::new(scenario).context("building the bench scenario")?;
    let precondition_s = t0.elapsed().as_secs_f64();
    let (l2p, other) = sim.device().ftl_memory_bytes();
    let logical_units = sim.device().logical_units();
    let pre = sim.precondition_report().clone();
    println!(
        "drive: {} {} logical, {} units; preconditioned in {:.2} s ({} overwrites, steady WAF {:.2}, steady state {})",
        args.preset, args.capacity, logical_units, precondition_s, pre.overwrite_units, pre.steady_waf, pre.reached_steady_state
    );
    let t1 = Instant::now();
    let mut rss_quarter = None;
    let mut quarter = 1;
    let mut last = (t1, 0u64);
    loop {
        let p = sim.run_for(100_000);
        let done = sim.requests_completed();
        if done >= args.requests * quarter / 4 || matches!(p, Progress::Finished(_)) {
            let now = Instant::now();
            let rate = (done - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
            println!("  quarter {quarter}: {rate:.0} requests/s");
            if quarter == 1 {
                rss_quarter = memory().map(|m| m.0);
            }
            last = (now, done);
            quarter += 1;
        }
        if let Progress::Finished(_) = p {
            break;
        }
    }
    let run_s = t1.elapsed().as_secs_f64();
    let events = sim.events_processed();
    let rss_end = memory();
    let r = sim.finish();
    let done = r.requests_completed;
    println!(
        "simulated {done} requests ({events} events, {:.3} s of simulated time) in {run_s:.2} s: {:.0} requests/s, {:.0} events/s",
        r.sim_time_ns as f64 / 1e9,
        done as f64 / run_s,
        events as f64 / run_s
    );
    println!(
        "write amplification {:.2}, GC runs {}, simulated throughput {:.0} IOPS",
        r.device.waf.unwrap_or(0.0),
        r.device.ftl.gc_runs,
        done as f64 / (r.sim_time_ns as f64 / 1e9)
    );
    println!(
        "mapping table: {:.2} bytes per logical page ({:.1} MiB); other FTL state {:.1} MiB",
        l2p as f64 / logical_units.max(1) as f64,
        mib(l2p),
        mib(other)
    );
    if let Some((rss, hwm)) = rss_end {
        match rss_quarter {
            Some(q) => println!(
                "memory: RSS {:.1} MiB after 25% of the requests, {:.1} MiB at the end; peak {:.1} MiB",
                mib(q),
                mib(rss),
                mib(hwm)
            ),
            None => println!("memory: RSS {:.1} MiB; peak {:.1} MiB", mib(rss), mib(hwm)),
        }
    }
    Ok(ExitCode::SUCCESS)
}
