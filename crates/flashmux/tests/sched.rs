//! The `cfq` and `mcfq` schedulers in the whole model: bandwidth follows the weights where the
//! device's cost per byte is the same for everyone, the schedulers compose with the virtualized
//! path and DFTL, scale to 64 tenants, keep every invariant, and are deterministic.

mod common;

use common::run_checked;
use flashmux::metrics::RunResults;

/// Tenants of these weights, each on its own partition, running the same fio job.
fn weighted(sched: &str, weights: &[u32], job: &str, extra: &str, time: &str) -> String {
    let mut t = format!(
        "[device]\npreset = \"840pro\"\ncapacity = \"8GiB\"\n[host]\nscheduler = \"{sched}\"\n{extra}\n[stop]\ntime = \"{time}\"\n"
    );
    for (i, w) in weights.iter().enumerate() {
        t.push_str(&format!("[[tenant]]\nname = \"t{i}\"\nweight = {w}\nfio = \"[j]\\n{job}\\n\"\n"));
    }
    t
}

fn bandwidths(r: &RunResults) -> Vec<f64> {
    r.tenants.iter().map(|t| t.io.bytes() as f64).collect()
}

fn max_share_error(r: &RunResults, weights: &[u32]) -> f64 {
    let bw = bandwidths(r);
    let (bsum, wsum): (f64, u32) = (bw.iter().sum(), weights.iter().sum());
    bw.iter().zip(weights).map(|(b, &w)| ((b / bsum) - w as f64 / wsum as f64).abs() / (w as f64 / wsum as f64)).fold(0.0, f64::max)
}

const READS: &str = "rw=randread\\nbs=4k\\niodepth=16";

#[test]
fn cfq_divides_bandwidth_by_weight_and_none_does_not() {
    let w = [3, 1];
    let cfq = run_checked(&weighted("cfq", &w, READS, "", "3s"), 5_000);
    assert!(max_share_error(&cfq, &w) < 0.05, "cfq: {:?}", bandwidths(&cfq));
    let none = run_checked(&weighted("none", &w, READS, "", "3s"), 5_000);
    assert!(max_share_error(&none, &w) > 0.3, "none shares equally: {:?}", bandwidths(&none));
    assert!(cfq.tenants[0].io.read.ios > 0 && cfq.tenants[1].io.read.ios > 0);
}

#[test]
fn sixty_four_tenants_are_all_served_in_weight_order() {
    let w: Vec<u32> = (0..64).map(|i| 100 + 14 * i).collect();
    let r = run_checked(&weighted("cfq", &w, READS, "", "8s"), 20_000);
    let bw = bandwidths(&r);
    assert!(bw.iter().all(|&b| b > 0.0));
    // Heavier tenants get more: each quarter of the weights more than the one below. (Per-tenant
    // shares are coarse here: 8 s is a few rounds of 64 slices.)
    let q: Vec<f64> = bw.chunks(16).map(|c| c.iter().sum()).collect();
    assert!(q.windows(2).all(|p| p[1] > 1.1 * p[0]), "quarters {q:?}");
}

/// Large reads, so the device (not the guests' CPU path) is the bottleneck and requests queue in
/// the host scheduler: a CFQ group whose queue is empty when its slice ends leaves the service
/// tree and loses its place, as in Linux, so weights only hold under contention.
#[test]
fn schedulers_compose_with_the_vm_path_and_dftl() {
    let w = [4, 1];
    const READS: &str = "rw=randread\\nbs=64k\\niodepth=16";
    let vm = "[host.cpu]\ncores = 4\n[virt]\nmode = \"per-vcpu-threads\"\nvcpus = 2\n";
    let dftl = "[device.ftl]\nmapping = \"dftl\"\n[device.ftl.cmt]\nsize = \"64KiB\"\n";
    for extra in [vm, dftl] {
        for sched in ["cfq", "mcfq"] {
            let r = run_checked(&weighted(sched, &w, READS, extra, "2s"), 5_000);
            let bw = bandwidths(&r);
            assert!(bw[0] > 2.0 * bw[1], "{sched} with {extra}: {bw:?}");
        }
    }
}

#[test]
fn mcfq_is_deterministic_and_reports_its_scales() {
    let w = [10, 7, 4, 1];
    let job = "rw=randrw\\nrwmixread=50\\nbs=16k\\niodepth=8";
    let text = weighted("mcfq", &w, job, "[precondition]\nstate = \"aged\"\n", "6s");
    let a = run_checked(&text, 50_000);
    let b = run_checked(&text, 50_000);
    let json = |r: &RunResults| flashmux::report::fio_json(r, false).to_string();
    assert_eq!(json(&a), json(&b));
    // Each tenant's scheduler record: turns, device time, the MoTS scale. The TVM (least weight)
    // keeps scale 1; the others have been rescaled after 6 samples; the timeline's last row
    // shows the same scale.
    let s: Vec<_> = a.tenants.iter().map(|t| t.sched.expect("mcfq keeps per-tenant stats")).collect();
    assert!(s.iter().all(|s| s.turns > 0 && s.service_ns > 0 && s.dispatched > 0), "{s:?}");
    assert_eq!(s[3].scale, 1.0);
    assert!(s[..3].iter().all(|s| s.scale != 1.0 && (0.125..=8.0).contains(&s.scale)), "{s:?}");
    for (i, t) in a.tenants.iter().enumerate() {
        let last = a.timeline.iter().rev().find(|r| r.tenant == t.name).expect("a timeline row");
        assert_eq!(last.slice_scale, s[i].scale, "{}", t.name);
    }
    let none = run_checked(&weighted("none", &w, job, "", "1s"), 50_000);
    assert!(none.tenants.iter().all(|t| t.sched.is_none()));
    assert!(none.timeline.iter().all(|r| r.slice_scale == 1.0));
}

/// `fair` on an open-channel drive: every invariant holds (budgets overdrawn by at most one
/// request, the ready list consistent), both tenants are served, and the run is deterministic.
#[test]
fn fair_runs_on_an_open_channel_drive() {
    let text = r#"
[device]
preset = "cosmos"
capacity = "16GiB"
[precondition]
state = "aged"
fill = 0.8
[host]
scheduler = "fair"
[host.fair]
window = 500
windows = 5
[stop]
time = "1s"
[[tenant]]
name = "w"
region = { offset = "0%", size = "50%" }
fio = "[w]\nrw=randwrite\nbs=16k\niodepth=16\n"
[[tenant]]
name = "r"
region = { offset = "50%", size = "50%" }
fio = "[r]\nrw=read\nbs=16k\niodepth=16\n"
"#;
    let a = run_checked(text, 2_000);
    let b = run_checked(text, 2_000);
    let json = |r: &RunResults| flashmux::report::fio_json(r, false).to_string();
    assert_eq!(json(&a), json(&b));
    assert!(a.tenants.iter().all(|t| t.io.bytes() > 0), "{:?}", bandwidths(&a));
    let s = a.tenants[0].sched.expect("fair keeps per-tenant stats");
    assert!(s.turns > 0 && s.dispatched > 0 && s.service_ns > 0, "{s:?}");
}

/// hWA-BC on a full aged drive: GC runs in every cost window, so it never learns GC-free prices
/// and cannot tell GC's cost apart. It says so instead of silently behaving as `fair`.
#[test]
fn hwabc_says_when_it_could_not_separate_gc_cost() {
    let run = |state: &str, fill: &str| {
        let text = format!(
            "[device]\npreset = \"cosmos\"\ncapacity = \"8GiB\"\n[device.ftl]\noverprovisioning = 0.2\n[precondition]\nstate = \"{state}\"\nfill = {fill}\n\
             [host]\nscheduler = \"hwabc\"\n[stop]\ntime = \"1500ms\"\n\
             [[tenant]]\nname = \"rand\"\nfio = \"[r]\\nrw=randwrite\\nbs=4k\\niodepth=16\\n\"\n\
             [[tenant]]\nname = \"seq\"\nfio = \"[s]\\nrw=write\\nbs=64k\\niodepth=4\\n\"\n"
        );
        common::run_checked(&text, 20_000)
    };
    let full = run("aged", "1.0");
    let w = full.warnings.join("\n");
    assert!(
        w.contains("hwabc: GC ran in") && w.contains("GC-free") && w.contains("[precondition] fill below 1"),
        "{w} / gc runs {} / {:?}",
        full.device.ftl.gc_runs,
        full.tenants.iter().map(|t| t.sched).collect::<Vec<_>>()
    );
    assert!(full.tenants.iter().all(|t| t.sched.and_then(|s| s.gc_charged_ns) == Some(0.0)));
    assert!(full.device.ftl.gc_runs > 0);
    // A drive with room before GC starts: the prices are learned, and nothing to say.
    let roomy = run("sequential-fill", "0.5");
    assert!(!roomy.warnings.iter().any(|w| w.contains("GC-free")), "{:?}", roomy.warnings);
}

/// A sequential writer behind a host queue of one tag: its requests wait in the scheduler while
/// one is at the device, and the elevator merges them (up to `max_sectors_kb`); under `none`,
/// or with `nomerges = 2`, nothing merges. Merged requests complete with their lead, so the
/// application sees every request, and the drive writes fewer, larger commands faster.
#[test]
fn the_elevator_merges_a_sequential_writer_s_waiting_requests() {
    let run = |sched: &str, extra: &str| {
        let host = format!("queue_depth = 1\n{extra}");
        run_checked(&weighted(sched, &[1], "rw=write\\nbs=4k\\niodepth=32\\nsize=16m", &host, "10s"), 100)
    };
    let merged = run("mq-deadline", "");
    let m = merged.tenants[0].merges.expect("mq-deadline has an elevator");
    let ios = merged.tenants[0].io.write.ios;
    assert_eq!(ios, 4096, "every 4 KiB write of 16 MiB completes, merged or not");
    assert_eq!((m.merges_front, m.read_merges), (0, 0));
    // The first write goes alone; the other 31 wait and merge into one request. When the first
    // completes that one leaves; when it completes, its 31 writes are issued again and join the
    // one write that came back meanwhile. Commands alternate 1 and 31 writes: 30 merges in
    // every 32 writes.
    assert_eq!(m.write_merges, 4096 / 32 * 30, "{m:?}");
    for (sched, extra) in [("none", ""), ("mq-deadline", "nomerges = 2"), ("cfq", "max_sectors_kb = 4")] {
        let r = run(sched, extra);
        assert_eq!(r.tenants[0].merges.map_or(0, |m| m.merges()), 0, "{sched} {extra}");
        assert_eq!(r.tenants[0].io.write.ios, ios);
        assert!(r.tenants[0].runtime_ns > merged.tenants[0].runtime_ns * 3 / 2, "{sched} {extra}: merging saves commands");
    }
    let cfq = run("cfq", "");
    assert!(cfq.tenants[0].merges.unwrap().write_merges * 32 >= ios * 29, "cfq merges within the tenant's queue too");
}
