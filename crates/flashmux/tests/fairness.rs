//! Fairness end to end: bandwidth shares over the tenants' common measured interval, and the
//! scenarios of the alone baseline.

mod common;

use common::{run_checked, scenario};
use flashmux::device::Backend;
use flashmux::ftl::Ftl;
use flashmux::metrics::RunResults;
use flashmux::sim::Simulator;
use flashmux::units::Lpn;

const MS: u64 = 1_000_000;

/// Rate-limited tenants on a null device (weights 3:1): `short` does 2000 × 4 KiB/s for 100 ms;
/// `long` 2500/s for 100 ms, then 500/s until the run's end at 400 ms; `late` would start after
/// the run's end.
const UNEQUAL_RUNTIMES: &str = r#"
[device]
preset = "null"
[stop]
time = "400ms"
[output]
timeline_interval = "50ms"
[[tenant]]
name = "short"
weight = 300
fio = """
[short]
rw=randread
bs=4k
rate_iops=2000
time_based
runtime=100ms
"""
[[tenant]]
name = "long"
weight = 100
fio = """
[long-burst]
rw=randwrite
bs=4k
rate_iops=2000
time_based
runtime=100ms
[long-slow]
rw=randwrite
bs=4k
rate_iops=500
time_based
runtime=1s
"""
[[tenant]]
name = "late"
fio = """
[late]
rw=read
bs=4k
startdelay=10s
"""
"#;

fn close(x: Option<f64>, want: f64, tol: f64) -> bool {
    x.is_some_and(|x| (x - want).abs() <= tol)
}

#[test]
fn shares_are_measured_over_the_common_interval() {
    let r = run_checked(UNEQUAL_RUNTIMES, 1000);
    let f = &r.fairness;
    // From the start until "short" has drained: 2000 against 2500 I/Os per second, a share of
    // 4/9 -- not 1/3 (the whole run's bytes: 200 against 400 I/Os) nor 2/3 (each tenant's bytes
    // over its own runtime: 2000/s against 1000/s).
    let (start, end) = f.interval_ns.expect("the tenants overlap");
    assert_eq!(start, 0);
    assert!((100 * MS..101 * MS).contains(&end), "{end}");
    assert_eq!(f.tenants_counted, 2, "'late' never started: no demand");
    let (short, long) = (r.tenants[0].share.expect("counted"), r.tenants[1].share.expect("counted"));
    assert_eq!(r.tenants[2].share, None);
    assert!(close(Some(short.achieved), 4.0 / 9.0, 0.01), "{short:?}");
    assert!(close(Some(short.bw_bytes), 2000.0 * 4096.0, 2e5), "{short:?}");
    assert_eq!((short.ideal, long.ideal), (0.75, 0.25));
    // |4/9 − 3/4| / (3/4) = 11/27 and |5/9 − 1/4| / (1/4) = 11/9.
    assert!(close(Some(short.error), 11.0 / 27.0, 0.02) && close(Some(long.error), 11.0 / 9.0, 0.05), "{short:?} {long:?}");
    assert!(close(f.share_error_max, long.error, 0.0));
    // x = 2000/300, 2500/100: J = (95/3)² / (2 · 6025/9) = 9025/12050.
    assert!(close(f.jain_index, 9025.0 / 12050.0, 0.01), "{f:?}");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn timeline_shares_count_the_tenants_running_in_each_interval() {
    let r = run_checked(UNEQUAL_RUNTIMES, 1000);
    let rows = |tenant: &'static str| r.timeline.iter().filter(move |row| row.tenant == tenant);
    // Both run in the first two intervals.
    for row in rows("short").take(2) {
        assert!((row.share - 4.0 / 9.0).abs() < 0.02 && row.share_ideal == 0.75, "{row:?}");
        assert!((row.share_error - 11.0 / 27.0).abs() < 0.03, "{row:?}");
    }
    // From 150 ms "long" runs alone: all of the bandwidth, as its weight entitles it to.
    let late: Vec<_> = rows("long").filter(|row| row.time_s >= 0.15).collect();
    assert_eq!(late.len(), 5);
    assert!(late.iter().all(|row| row.share == 1.0 && row.share_ideal == 1.0 && row.share_error == 0.0));
    assert!(rows("short").filter(|row| row.time_s >= 0.15).all(|row| row.share.is_nan()));
    assert!(rows("late").all(|row| row.share.is_nan() && row.share_error.is_nan()));
}

#[test]
fn the_interval_begins_after_the_last_ramp() {
    // "short" measures from 30 ms to 130 ms ("runtime" counts after the ramp).
    let text = UNEQUAL_RUNTIMES.replace("[short]\n", "[short]\nramp_time=30ms\n");
    let r = run_checked(&text, 1000);
    let (start, end) = r.fairness.interval_ns.expect("the tenants overlap");
    assert_eq!(start, 30 * MS);
    assert!((130 * MS..131 * MS).contains(&end), "{end}");
    // "long" moved 70 ms × 2500/s + 30 ms × 500/s: a share of 2000 / 3900 for "short".
    assert!(close(r.tenants[0].share.map(|s| s.achieved), 2000.0 / 3900.0, 0.01), "{:?}", r.tenants[0].share);
}

#[test]
fn tenants_that_never_run_together_have_no_shares() {
    // "short" is done long before "long" starts.
    let text = UNEQUAL_RUNTIMES.replace("]\nrw=randwrite", "]\nstartdelay=200ms\nrw=randwrite");
    let r = run_checked(&text, 1000);
    assert_eq!((r.fairness.interval_ns, r.fairness.tenants_counted), (None, 2));
    assert!(r.tenants.iter().all(|t| t.share.is_none()));
    assert_eq!(r.fairness.jain_index, None);
}

/// A random writer and a reader on a small aged drive.
const WRITER_AND_READER: &str = r#"
seed = 3
[device]
preset = "paper-c"
[device.geometry]
channels = 4
chips_per_channel = 1
blocks_per_plane = 64
[device.ftl]
overprovisioning = 0.15
[device.buffer]
size = "256KiB"
[precondition]
state = "aged"
[stop]
time = "150ms"
[[tenant]]
name = "writer"
fio = """
[writer]
rw=randwrite
bs=4k
iodepth=16
"""
[[tenant]]
name = "reader"
weight = 800
fio = """
[reader]
rw=randread
bs=4k
iodepth=2
"""
"#;

fn ftl(sim: &Simulator) -> &Ftl {
    match sim.device().backend() {
        Backend::Ssd(s) => s.ftl(),
        Backend::Null(_) => panic!("an SSD scenario"),
    }
}

#[test]
fn alone_scenarios_keep_the_drive_state_and_run_one_tenant() {
    let shared = scenario(WRITER_AND_READER);
    assert!(shared.alone(2).is_none());
    let reference = Simulator::new(shared.clone()).unwrap();
    for i in 0..2 {
        let alone = shared.alone(i).unwrap();
        assert_eq!(alone.seed, shared.seed);
        assert_eq!(alone.tenants.iter().map(|t| (t.region, t.weight)).collect::<Vec<_>>(),
            shared.tenants.iter().map(|t| (t.region, t.weight)).collect::<Vec<_>>());
        let mut sim = Simulator::new(alone).unwrap();
        // Preconditioned identically: the same report, every logical page in the same place,
        // written by the same tenant.
        assert_eq!(sim.precondition_report(), reference.precondition_report());
        let (a, b) = (ftl(&sim), ftl(&reference));
        assert!(a.stats().gc_runs == 0 && b.stats().gc_runs == 0);
        for l in 0..a.logical_units() as u32 {
            let (la, lb) = (a.lookup(Lpn(l)), b.lookup(Lpn(l)));
            assert_eq!(la, lb, "logical unit {l}");
            if let flashmux::ftl::Loc::Flash(p) = la {
                assert_eq!(a.owner_of(p), b.owner_of(p));
            }
        }
        sim.check_invariants_every(2000);
        sim.run();
        let r: RunResults = sim.finish();
        // Only the tenant's own jobs did I/O.
        assert!(r.tenants[i].io.ios() > 0);
        assert_eq!(r.tenants[1 - i].io.ios(), 0);
        assert_eq!(r.requests_completed + r.requests_in_flight, r.requests_issued);
        assert!(r.requests_completed >= r.tenants[i].io.ios());
        assert_eq!(r.fairness.tenants_counted, 1);
        assert_eq!(r.tenants[i].share.map(|s| (s.achieved, s.error)), Some((1.0, 0.0)));
    }
}

#[test]
fn the_reader_is_slowed_down_by_the_writer() {
    let text = WRITER_AND_READER;
    let mut shared = run_checked(text, 5000);
    let s = scenario(text);
    let alone: Vec<RunResults> = (0..2)
        .map(|i| {
            let mut sim = Simulator::new(s.alone(i).unwrap()).unwrap();
            sim.run();
            sim.finish()
        })
        .collect();
    shared.add_alone_baseline(&alone);
    let b = shared.fairness.baseline.as_ref().expect("added");
    let reader = b.tenants[1].slowdown.expect("the reader did I/O in both runs");
    let writer = b.tenants[0].slowdown.expect("the writer did I/O in both runs");
    assert!(reader > 1.5, "GC and programs on the reader's dies: {reader}");
    let fairness = b.fairness.expect("two slowdowns");
    assert!((fairness - reader.min(writer) / reader.max(writer)).abs() < 1e-12);
    assert!(fairness > 0.0 && fairness < 1.0);
}
