//! Nothing a scenario says makes memory grow with simulated time, and the bounds on what a
//! scenario may ask for are checked before the run, with the bound named.

mod common;

use common::{run_checked, scenario};
use flashmux::config::limits::{memory_estimate, MAX_RUN_JOBS, MAX_TENANTS, MAX_TIMELINE_INTERVALS};
use flashmux::config::Scenario;
use flashmux::metrics::{RunResults, TimelineRow};
use flashmux::report::fio_json;
use flashmux::sim::{Simulator, TimelineSink};
use std::path::Path;
use std::sync::{Arc, Mutex};

const DRIVE: &str = "[device]\npreset = \"paper-c\"\ncapacity = \"1GiB\"\n";

/// A writer held to one 4 KiB write per 4,096 s of simulated time (fio's `rate` is bytes/s).
fn paced(size: &str) -> String {
    format!("{DRIVE}[[tenant]]\nname = \"a\"\nfio = \"[a]\\nrw=write\\nbs=4k\\nrate=1\\nsize={size}\\n\"\n")
}

#[test]
fn a_paced_job_costs_rows_per_write_not_per_second() {
    // 256 writes, one per 4,096 s: 1,048,576 s of simulated time, 1 s intervals. A row per
    // interval would be a million rows; idle stretches are one row each.
    let r = run_checked(&paced("1m"), 1_000);
    assert_eq!(r.requests_completed, 256);
    assert!(r.sim_time_ns >= 255 * 4096 * 1_000_000_000, "{} ns", r.sim_time_ns);
    assert!(r.timeline.len() <= 2 * 256 + 1, "{} rows", r.timeline.len());
    // The rows still tile the run: each starts where the previous ended, and the writes add up.
    let mut at = 0.0;
    for row in &r.timeline {
        assert!((row.time_s - at).abs() < 1e-6, "row at {} s, expected {at} s", row.time_s);
        at = row.time_s + row.interval_s;
    }
    assert!((at - r.sim_time_ns as f64 / 1e9).abs() < 1e-6);
    let writes: f64 = r.timeline.iter().map(|row| row.write_iops * row.interval_s).sum();
    assert!((writes - 256.0).abs() < 1e-6, "{writes}");
    // fio's bandwidth samples skip idle windows: a sample for each whole 500 ms window with a
    // write (the last write's window is cut short by the job's end), not 2 million.
    let v = fio_json(&r, false);
    assert_eq!(v["jobs"][0]["write"]["bw_samples"], 255);
}

#[test]
fn idle_stretches_change_nothing_else() {
    // The same writes with a 1 s and a 4,096 s interval: the same results apart from the rows.
    let text = paced("64k");
    let a = run_checked(&text, 1_000);
    let b = run_checked(&text.replace("[[tenant]]", "[output]\ntimeline_interval = \"4096s\"\n[[tenant]]"), 1_000);
    assert_eq!(a.requests_completed, b.requests_completed);
    assert_eq!(a.sim_time_ns, b.sim_time_ns);
    let (ja, jb) = (fio_json(&a, false), fio_json(&b, false));
    assert_eq!(ja["jobs"], jb["jobs"]);
}

struct Collect(Arc<Mutex<Vec<TimelineRow>>>);

impl TimelineSink for Collect {
    fn row(&mut self, row: &TimelineRow) {
        self.0.lock().unwrap().push(row.clone());
    }
}

fn two_tenants() -> String {
    format!(
        "{DRIVE}[precondition]\nstate = \"aged\"\n[stop]\ntime = \"3500ms\"\n[output]\ntimeline_interval = \"250ms\"\n\
         [[tenant]]\nname = \"w\"\nweight = 300\nfio = \"[w]\\nrw=randwrite\\nbs=4k\\niodepth=8\\nrate_iops=2000\\n\"\n\
         [[tenant]]\nname = \"r\"\nfio = \"[r]\\nrw=randread\\nbs=16k\\niodepth=2\\nstartdelay=1s\\nruntime=1s\\n\"\n"
    )
}

fn run(s: Scenario, sink: Option<Box<dyn TimelineSink>>) -> RunResults {
    let mut sim = Simulator::new(s).unwrap();
    if let Some(sink) = sink {
        sim.stream_timeline(sink);
    }
    sim.run();
    sim.finish()
}

#[test]
fn a_streamed_timeline_is_the_kept_one() {
    let kept = run(scenario(&two_tenants()), None);
    let rows = Arc::new(Mutex::new(Vec::new()));
    let streamed = run(scenario(&two_tenants()), Some(Box::new(Collect(rows.clone()))));
    assert!(streamed.timeline.is_empty(), "streamed rows are not kept");
    let rows = rows.lock().unwrap().clone();
    assert_eq!(rows.len(), kept.timeline.len());
    assert!(rows.len() >= 2 * 14, "{} rows", rows.len());
    // Bit for bit (NaN shares compare by their text).
    assert_eq!(format!("{rows:?}"), format!("{:?}", kept.timeline));
    // Shares are measured only where the reader's period overlaps the interval: from 1 s to a
    // little after 2 s, as its last reads drain.
    let reader: Vec<&TimelineRow> = rows.iter().filter(|r| r.tenant == "r").collect();
    let measured: Vec<f64> = reader.iter().filter(|r| !r.share.is_nan()).map(|r| r.time_s).collect();
    assert_eq!(measured, [1.0, 1.25, 1.5, 1.75, 2.0], "{reader:#?}");
}

fn load_err(text: &str) -> String {
    Scenario::from_toml(text, "s.toml", Path::new(".")).err().map(|e| e.to_string()).unwrap_or_default()
}

#[test]
fn bounds_are_checked_before_the_run_and_named() {
    let job = |numjobs: u32| format!("fio = \"[j]\\nrw=read\\nnumjobs={numjobs}\\ntime_based\\nruntime=1s\\n\"\n");
    // One job file: fio's own limit, with the file and line.
    let e = load_err(&format!("{DRIVE}[[tenant]]\nname = \"a\"\n{}", job(1_000_000)));
    assert!(e.contains("1000000 jobs") && e.contains("at most 4096") && e.contains(":1:"), "{e}");
    // A run: numjobs over every tenant.
    let tenants = (0..17).map(|i| format!("[[tenant]]\nname = \"t{i}\"\n{}", job(4000))).collect::<String>();
    let e = load_err(&format!("{DRIVE}{tenants}"));
    assert!(e.contains("68000 jobs") && e.contains(&format!("at most {MAX_RUN_JOBS}")), "{e}");
    // Tenants.
    let tenants = (0..=MAX_TENANTS).map(|i| format!("[[tenant]]\nname = \"t{i}\"\n{}", job(1))).collect::<String>();
    let e = load_err(&format!("[device]\npreset = \"null\"\n{tenants}"));
    assert!(e.contains(&format!("{} tenants: at most {MAX_TENANTS}", MAX_TENANTS + 1)), "{e}");
    // Timeline intervals: 1 s in 1 ns intervals.
    let e = load_err(&format!(
        "{DRIVE}[stop]\ntime = \"1s\"\n[output]\ntimeline_interval = \"1ns\"\n[[tenant]]\nname = \"a\"\n{}",
        job(1)
    ));
    assert!(
        e.contains("1000000000 intervals") && e.contains(&MAX_TIMELINE_INTERVALS.to_string()) && e.contains("at least 100ns"),
        "{e}"
    );
}

#[test]
fn a_run_that_will_take_years_says_so_before_it_starts() {
    let s = scenario(&paced("1g"));
    let w = s.warnings.join("\n");
    assert!(w.contains("tenant 'a', job 'a': rate = 1 B/s for 1073741824 bytes") && w.contains("34 years"), "{w}");
    // With a stop time, or at a sensible pace, nothing to say.
    let stopped = scenario(&paced("1g").replace("[[tenant]]", "[stop]\ntime = \"10s\"\n[[tenant]]"));
    assert!(stopped.warnings.is_empty(), "{:?}", stopped.warnings);
    let quick = scenario(&paced("1g").replace("rate=1\\n", "rate=100m\\n"));
    assert!(quick.warnings.is_empty(), "{:?}", quick.warnings);
}

#[test]
fn memory_estimate_counts_tables_tenants_and_jobs() {
    let one = memory_estimate(&scenario(&paced("1m")));
    let many_tenants = (0..64)
        .map(|i| format!("[[tenant]]\nname = \"t{i}\"\nfio = \"[j]\\nrw=read\\nnumjobs=4\\nsize=1m\\n\"\n"))
        .collect::<String>();
    let many = memory_estimate(&scenario(&format!("{DRIVE}{many_tenants}")));
    let part = |e: &flashmux::config::limits::MemoryEstimate, name: &str| {
        e.parts.iter().find(|p| p.0.starts_with(name)).map(|p| p.1).unwrap_or_default()
    };
    // 1 GiB of logical space: 4 bytes per 4 KiB unit at least.
    assert!(part(&one, "mapping") >= (1 << 30) / 4096 * 4);
    assert_eq!(part(&many, "mapping"), part(&one, "mapping"));
    assert_eq!(part(&many, "tenants"), 64 * part(&one, "tenants"));
    assert_eq!(part(&many, "jobs"), 256 * part(&one, "jobs"));
    assert_eq!(many.total(), many.parts.iter().map(|p| p.1).sum::<u64>());
    // Page caches: none without a kernel; one shared on bare metal, whatever the tenants; per
    // page of capacity and of dirty threshold (1 GiB: 262,144 + 52,428 pages of 96 bytes).
    assert_eq!(part(&many, "page caches"), 0);
    let with_kernel = |text: &str| memory_estimate(&scenario(&text.replacen("[[tenant]]", "[kernel]\n[[tenant]]", 1)));
    let shared = part(&with_kernel(&format!("{DRIVE}{many_tenants}")), "page caches");
    assert_eq!(shared, (262_144 + 52_428) * 96);
    assert_eq!(part(&with_kernel(&paced("1m")), "page caches"), shared);
    // A Filebench tenant's files: ~800 bytes each (varmail set to 5,000 files).
    let fb = "[kernel]\nfilesystem = \"ext4\"\n[[tenant]]\nname = \"m\"\nfilebench = \"varmail\"\n\
              filebench_set = { nfiles = 5000 }\n";
    assert_eq!(part(&memory_estimate(&scenario(&format!("{DRIVE}{fb}"))), "Filebench files"), 5000 * 800);
    assert_eq!(part(&many, "Filebench files"), 0);
}

#[test]
fn a_trace_slowed_past_the_horizon_ends_with_an_error_not_a_saturated_clock() {
    let dir = std::env::temp_dir().join(format!("flashmux-horizon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // MQSim's format: time (ns), device, LBA, sectors, 1 = read. 10 s apart.
    std::fs::write(dir.join("t.mqsim"), "0 0 0 8 1\n10000000000 0 8 8 1\n").unwrap();
    let text = |scale: &str| format!("{DRIVE}[[tenant]]\nname = \"t\"\ntrace = {{ path = \"t.mqsim\", time_scale = {scale} }}\n");
    let load = |scale: &str| Scenario::from_toml(&text(scale), "s.toml", &dir);
    let e = load("1e300").err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("time_scale: 1e300 is out of range: expected 1e-9 to 1e9"), "{e}");
    // A billion-fold: the second request would be due in 317 years.
    let mut sim = Simulator::new(load("1e9").unwrap()).unwrap();
    sim.run();
    let r = sim.finish();
    let replay = r.tenants[0].replay.as_ref().unwrap();
    assert_eq!(r.requests_completed, 1);
    let err = replay.error.as_deref().unwrap_or_default();
    assert!(err.contains("beyond the simulator's horizon") && err.contains("10.000000 s into the trace"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
