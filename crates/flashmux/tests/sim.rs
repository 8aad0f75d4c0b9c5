//! End-to-end tests of the simulator: scenarios in, results out.

mod common;

use common::{run_checked, scenario};
use flashmux::metrics::{RunResults, StopReason};
use flashmux::report::fio_json;
use flashmux::sim::Simulator;

fn run(text: &str) -> RunResults {
    run_checked(text, 5_000)
}

/// A small drive (paper C's timing, 64 MiB of flash) so aging and GC happen in milliseconds.
const SMALL_DRIVE: &str = r#"
[device]
preset = "paper-c"
[device.geometry]
channels = 4
chips_per_channel = 1
blocks_per_plane = 64
pages_per_block = 64
[device.ftl]
overprovisioning = 0.15
[device.buffer]
size = "256KiB"
"#;

fn with_tenants(extra: &str, tenants: &str) -> String {
    format!("{SMALL_DRIVE}\n{extra}\n{tenants}")
}

const TWO_WRITERS: &str = r#"
[[tenant]]
name = "seq"
fio = """
[seq]
rw=write
bs=64k
iodepth=4
time_based
runtime=2s
"""
[[tenant]]
name = "rand"
fio = """
[rand]
rw=randwrite
bs=4k
iodepth=16
time_based
runtime=2s
"""
"#;

#[test]
fn same_seed_same_bytes_different_seed_different_results() {
    let text = with_tenants("[precondition]\nstate = \"aged\"\n", TWO_WRITERS);
    let a = serde_json::to_string(&fio_json(&run(&text), true)).unwrap();
    let b = serde_json::to_string(&fio_json(&run(&text), true)).unwrap();
    assert_eq!(a, b, "same config and seed must give byte-identical results");
    let c = serde_json::to_string(&fio_json(&run(&format!("seed = 99\n{text}")), true)).unwrap();
    assert_ne!(a, c);
}

#[test]
fn aged_drive_gc_is_attributed_to_the_random_writer() {
    let r = run(&with_tenants(
        "[precondition]\nstate = \"aged\"\n",
        &TWO_WRITERS.replace("runtime=2s", "runtime=12s"),
    ));
    assert_eq!(r.stop_reason, StopReason::AllJobsDone);
    assert!(r.device.ftl.gc_runs > 0, "GC must run on an aged drive");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let waf = r.device.waf.unwrap();
    assert!(waf > 1.5, "WAF {waf}");
    let moved: u64 = r.tenants.iter().map(|t| t.gc_units_moved).sum::<u64>() + r.device.unowned_gc_units_moved;
    assert_eq!(moved, r.device.ftl.gc_units_programmed, "every moved unit is attributed");
    // Preconditioning left both tenants' data scattered over every block, so at first GC moves
    // both in equal measure. Once the sequential writer has rewritten its region, its old data
    // dies together and GC moves mostly the random writer's data (not only: victims are younger
    // than one sequential pass, so some sequential data in them is still valid).
    let seq_share = |from: f64, to: f64| -> f64 {
        let sum = |tenant: &str| -> u64 {
            r.timeline
                .iter()
                .filter(|row| row.tenant == tenant && row.time_s >= from && row.time_s < to)
                .map(|row| row.gc_units_moved)
                .sum()
        };
        let (seq, rand) = (sum("seq"), sum("rand"));
        seq as f64 / (seq + rand).max(1) as f64
    };
    let (early, late) = (seq_share(0.0, 1.0), seq_share(9.0, 12.0));
    assert!(early > 0.35, "early GC: sequential writer's share {early}");
    assert!(late < 0.25, "late GC: sequential writer's share {late}");
    assert!(r.tenants[1].gc_units_moved > r.tenants[0].gc_units_moved);
    let timeline_total: u64 = r.timeline.iter().map(|row| row.gc_units_moved).sum();
    assert_eq!(timeline_total + r.device.unowned_gc_units_moved, r.device.ftl.gc_units_programmed);
}

#[test]
fn workload_aged_drive_charges_gc_to_the_writer_whose_pattern_causes_it_from_the_start() {
    // The same drive and writers, aged by their own workloads instead of uniformly: GC is in its
    // steady state from the first second, with the random writer's data most of what it moves
    // (the sequential writer's share under a third, where uniform aging starts it above 35%).
    let r = run(&with_tenants(
        "[precondition]\nstate = \"workload\"\n",
        &TWO_WRITERS.replace("runtime=2s", "runtime=4s"),
    ));
    let p = &r.device.precondition;
    assert!(p.reached_steady_state && p.writers == Some(2), "{p:?}");
    assert!(r.device.ftl.gc_runs > 0 && r.warnings.is_empty(), "{:?}", r.warnings);
    let moved: u64 = r.tenants.iter().map(|t| t.gc_units_moved).sum::<u64>() + r.device.unowned_gc_units_moved;
    assert_eq!(moved, r.device.ftl.gc_units_programmed, "every moved unit is attributed");
    let first_second = |tenant: &str| -> u64 {
        r.timeline.iter().filter(|row| row.tenant == tenant && row.time_s < 1.0).map(|row| row.gc_units_moved).sum()
    };
    let (seq, rand) = (first_second("seq"), first_second("rand"));
    assert!(rand > 0 && 3 * seq < seq + rand, "first second's GC: seq {seq}, rand {rand}");
    let (seq, rand) = (r.tenants[0].gc_units_moved, r.tenants[1].gc_units_moved);
    assert!(3 * seq < seq + rand, "whole run's GC: seq {seq}, rand {rand}");

    // A reader's region is left as the fill wrote it: only the writer ages the drive.
    let reader = TWO_WRITERS.replace("rw=write", "rw=read").replace("runtime=2s", "runtime=1s");
    let r = run(&with_tenants("[precondition]\nstate = \"workload\"\n", &reader));
    assert_eq!(r.device.precondition.writers, Some(1));
    assert_eq!(r.tenants[0].gc_units_moved, 0, "GC moved the reader's data, which nothing overwrites");
}

#[test]
fn requests_are_conserved_when_the_clock_stops_the_run() {
    let r = run(&with_tenants("[precondition]\nstate = \"aged\"\n[stop]\ntime = \"300ms\"\n", TWO_WRITERS));
    assert_eq!(r.stop_reason, StopReason::TimeLimit);
    assert_eq!(r.sim_time_ns, 300_000_000);
    assert!(r.requests_in_flight > 0, "a time stop leaves requests in flight");
    assert_eq!(r.requests_issued, r.requests_completed + r.requests_in_flight);
    let counted: u64 = r.jobs.iter().map(|j| j.io.ios()).sum();
    assert_eq!(counted, r.requests_completed);
}

#[test]
fn request_limit_stops_exactly() {
    let r = run(&with_tenants("[stop]\nrequests = 1234\n", TWO_WRITERS));
    assert_eq!(r.stop_reason, StopReason::RequestLimit);
    assert_eq!(r.requests_completed, 1234);
}

#[test]
fn fio_volume_semantics() {
    let one = |job: &str| {
        let r = run(&with_tenants("", &format!("[[tenant]]\nname = \"t\"\nfio = \"\"\"\n{job}\n\"\"\"\n")));
        assert_eq!(r.stop_reason, StopReason::AllJobsDone);
        r
    };
    let r = one("[w]\nrw=write\nbs=4k\nsize=1m");
    assert_eq!(r.jobs[0].io.write.ios, 256);
    assert_eq!(r.jobs[0].io.write.bytes, 1 << 20);
    let r = one("[w]\nrw=randwrite\nbs=4k\nsize=1m\nloops=3");
    assert_eq!(r.jobs[0].io.write.ios, 768);
    let r = one("[w]\nrw=randread\nbs=8k\nnumber_ios=100");
    assert_eq!(r.jobs[0].io.read.ios, 100);
    let r = one("[w]\nrw=randrw\nrwmixread=70\nbs=4k\nsize=8m\nnumjobs=3");
    assert_eq!(r.jobs.len(), 3);
    for j in &r.jobs {
        assert_eq!(j.io.read.ios + j.io.write.ios, 2048);
        let frac = j.io.read.ios as f64 / 2048.0;
        assert!((0.65..0.75).contains(&frac), "read fraction {frac}");
    }
}

#[test]
fn stonewall_runs_groups_in_order() {
    let r = run(&with_tenants(
        "",
        "[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[a]\nrw=write\nbs=4k\nsize=256k\n[b]\nstonewall\nrw=write\nbs=4k\nsize=256k\n\"\"\"\n",
    ));
    let (a, b) = (&r.jobs[0], &r.jobs[1]);
    assert_eq!((a.groupid, b.groupid), (0, 1));
    // b's measured span starts after a's ends: their runtimes add up to at most the run.
    assert!(a.runtime_ns + b.runtime_ns <= r.sim_time_ns);
    assert!(a.runtime_ns > 0 && b.runtime_ns > 0);
}

#[test]
fn rate_iops_is_honoured() {
    let r = run(&with_tenants(
        "",
        "[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[r]\nrw=randread\nbs=4k\niodepth=8\nrate_iops=2000\ntime_based\nruntime=1s\n\"\"\"\n",
    ));
    let iops = r.jobs[0].io.read.ios as f64 / (r.jobs[0].runtime_ns as f64 / 1e9);
    assert!((1900.0..2100.0).contains(&iops), "{iops}");
}

#[test]
fn ramp_time_is_excluded_from_statistics() {
    let r = run(&with_tenants(
        "",
        "[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[r]\nrw=randread\nbs=4k\nrate_iops=1000\nramp_time=500ms\ntime_based\nruntime=1s\n\"\"\"\n",
    ));
    let j = &r.jobs[0];
    assert!((950..=1050).contains(&j.io.read.ios), "{} I/Os counted", j.io.read.ios);
    assert!(r.sim_time_ns >= 1_500_000_000);
    assert!((1_000_000_000..1_010_000_000).contains(&j.runtime_ns), "{}", j.runtime_ns);
}

#[test]
fn queue_depth_trades_latency_for_throughput() {
    let at = |qd: u32| {
        let r = run(&with_tenants(
            "[precondition]\nstate = \"sequential-fill\"\n",
            &format!("[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[r]\nrw=randread\nbs=4k\niodepth={qd}\nnumber_ios=4000\n\"\"\"\n"),
        ));
        let j = &r.jobs[0];
        (j.io.read.ios as f64 / (j.runtime_ns as f64 / 1e9), j.io.read.clat.mean())
    };
    let (iops1, lat1) = at(1);
    let (iops16, lat16) = at(16);
    assert!(iops16 > 2.5 * iops1, "QD16 {iops16} vs QD1 {iops1}");
    assert!(lat16 > lat1);
    // QD1 random read on paper C's flash: tR 65 us + 4 KiB at 200 MB/s + controller and host.
    assert!((85_000.0..100_000.0).contains(&lat1), "QD1 read latency {lat1} ns");
}

#[test]
fn null_device_latency_is_the_sum_of_overheads() {
    let r = run(
        "[device]\npreset = \"null\"\n[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[r]\nrw=randread\nbs=4k\nnumber_ios=100\n\"\"\"\n",
    );
    let lat = &r.jobs[0].io.read.lat;
    // submit 1.5 us + command fetch 1 us + completion 1.5 us.
    assert_eq!((lat.min(), lat.max()), (4_000, 4_000));
    assert_eq!(r.jobs[0].io.read.slat.min(), 1_500);
}

#[test]
fn job_larger_than_its_region_is_an_input_error() {
    let s = scenario(&with_tenants(
        "",
        "[[tenant]]\nname = \"t\"\nregion = { offset = \"0\", size = \"1m\" }\nfio = \"\"\"\n[r]\nrw=write\nsize=2m\n\"\"\"\n",
    ));
    let e = Simulator::new(s).err().expect("must be rejected").to_string();
    assert!(e.contains("job 'r'"), "{e}");
}

#[test]
fn interrupted_run_still_reports_what_happened() {
    let mut sim = Simulator::new(scenario(&with_tenants("", TWO_WRITERS))).unwrap();
    sim.run_for(20_000);
    sim.interrupt();
    sim.run_for(1);
    let r = sim.finish();
    assert_eq!(r.stop_reason, StopReason::Interrupted);
    assert!(r.requests_completed > 0);
    assert_eq!(r.requests_issued, r.requests_completed + r.requests_in_flight);
    assert!(r.warnings.iter().any(|w| w.contains("interrupted")));
}

#[test]
fn group_reporting_merges_a_groups_jobs_into_one_entry() {
    let job = |gr: &str| {
        format!(
            "[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[global]\nbs=4k\n{gr}\n[a]\nrw=randread\nnumber_ios=300\nnumjobs=3\n[b]\nrw=randwrite\nnumber_ios=200\n[c]\nstonewall\nrw=read\nnumber_ios=100\n\"\"\"\n"
        )
    };
    let separate = run(&with_tenants("", &job("")));
    assert_eq!(separate.jobs.len(), 5);
    let merged = run(&with_tenants("", &job("group_reporting")));
    // Group 0 (a ×3, b) becomes one entry named after its first job; group 1 (c) stays itself.
    assert_eq!(merged.jobs.len(), 2);
    let g0 = &merged.jobs[0];
    assert_eq!((g0.name.as_str(), g0.members, g0.groupid), ("a", 4, 0));
    assert_eq!(g0.io.read.ios, 900);
    assert_eq!(g0.io.write.ios, 200);
    assert_eq!((merged.jobs[1].name.as_str(), merged.jobs[1].members), ("c", 1));
    assert_eq!(merged.tenants[0].jobs, vec![0, 1]);
    assert_eq!(merged.tenants[0].io.ios(), separate.tenants[0].io.ios());
    let depth_total: f64 = g0.iodepth_levels.iter().map(|l| l.1).sum();
    assert!((depth_total - 1.0).abs() < 1e-9, "{depth_total}");
}
