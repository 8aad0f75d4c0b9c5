//! The swarm test's short variant (`flashmux swarm` runs the long one, docs/TESTING.md): a few
//! hundred whole configurations drawn from seeds, each loaded from its scenario file and run
//! with its invariants checked every few events; and the generator itself: deterministic, and
//! drawing every scheduler, mapping, cache policy, drive state, VM mode and workload kind, and
//! zoned drives under fio's zoned mode and under the host FTL.

use flashmux::swarm::{generate, run_case, Limits, Outcome};
use std::collections::BTreeSet;
use std::ops::Range;

/// Runs the cases of `seeds`; panics with every failure (seed, stage, message) and if fewer
/// than 80% of the scenarios were accepted.
fn run_seeds(seeds: Range<u64>) {
    let dir = std::env::temp_dir().join(format!("flashmux-swarm-test-{}-{}", std::process::id(), seeds.start));
    // Shorter runs than `flashmux swarm`'s: the test profile checks arithmetic as it goes.
    let limits = Limits { max_events: 100_000, check_budget: 100_000_000 };
    let (mut passed, mut rejected, mut failures) = (0, 0, Vec::new());
    for seed in seeds.clone() {
        let _ = std::fs::remove_dir_all(&dir);
        match run_case(&generate(seed), &dir, &limits) {
            Outcome::Passed(_) => passed += 1,
            Outcome::Rejected { .. } => rejected += 1,
            Outcome::Failed(f) => failures.push(format!("seed {seed} ({}): {}", f.stage, f.message)),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{} of {} seeds failed (rerun one with `flashmux swarm --seed S --count 1`):\n{}", failures.len(), seeds.count(), failures.join("\n"));
    assert!(passed * 100 >= 80 * (passed + rejected), "only {passed} of {} scenarios accepted", passed + rejected);
}

// Four quarters of 300 seeds, so the test harness runs them in parallel.
#[test]
fn swarm_seeds_0_to_74() {
    run_seeds(0..75);
}
#[test]
fn swarm_seeds_75_to_149() {
    run_seeds(75..150);
}
#[test]
fn swarm_seeds_150_to_224() {
    run_seeds(150..225);
}
#[test]
fn swarm_seeds_225_to_299() {
    run_seeds(225..300);
}

#[test]
fn the_generator_is_deterministic() {
    for seed in [0, 1, 7, 1 << 40, u64::MAX] {
        let (a, b) = (generate(seed), generate(seed));
        assert_eq!(a, b, "seed {seed}");
        assert_ne!(a.scenario, generate(seed.wrapping_add(1)).scenario, "seed {seed} and the next differ");
    }
}

#[test]
fn the_generator_draws_every_mechanism() {
    let drawn: BTreeSet<String> = (0..400).flat_map(|s| generate(s).tags).collect();
    let mut missing = Vec::new();
    let mut want = |key: &str, values: &[&str]| {
        for v in values {
            let t = format!("{key}={v}");
            if !drawn.contains(&t) {
                missing.push(t);
            }
        }
    };
    want("scheduler", &["none", "cfq", "mcfq", "fair", "hwabc", "hwabc-oracle"]);
    want("mapping", &["full", "dftl"]);
    want("cmt", &["shared", "partitioned", "balanced"]);
    want("cmt_size", &["tiny", "whole", "more-than-whole"]);
    want("precondition", &["clean", "sequential-fill", "aged"]);
    want("virt", &["bare-metal", "ide-emulation", "dataplane", "multiqueue", "per-vcpu-threads"]);
    want("notify", &["exit", "poll"]);
    want("emulation", &["userspace", "in-hypervisor"]);
    want("completion", &["inject", "exitless"]);
    want("aio", &["native", "threads"]);
    want("host_cpu", &["true"]);
    want("device_mode", &["ssd", "open-channel"]);
    want("placement", &["none", "fdp", "streams"]);
    want("preset", &["paper-c", "x25e", "840pro", "tlc-nvme", "cosmos", "null"]);
    want("geometry", &["custom", "preset"]);
    want("size_by", &["capacity", "blocks_per_plane"]);
    want("victim", &["greedy", "cost-benefit"]);
    want("flush", &["page", "watermark"]);
    want("volatile_write_cache", &["true", "false"]);
    want("tenants", &["1", "2-4", "5-16", "17-64"]);
    want("region", &["auto", "whole", "range"]);
    want("workload", &["fio", "job_file", "personality", "trace", "filebench"]);
    want("filebench", &["fileserver", "varmail", "webproxy", "webserver", "drawn"]);
    want("personality", &["fileserver", "varmail", "webproxy", "msn", "exchange", "financial"]);
    want("trace", &["blktrace", "blkparse", "fio-iolog", "msr", "spc", "mqsim", "alibaba", "tencent", "systor"]);
    want("trace_quirk", &["gzip", "bad-line", "out-of-order"]);
    want("trace_timing", &["closed-loop"]);
    want("lba_fit", &["wrap", "scale", "reject"]);
    want("rw", &["read", "write", "trim", "randread", "randwrite", "randtrim", "rw", "randrw", "trimwrite", "randtrimwrite"]);
    want("distribution", &["random", "zipf", "pareto", "normal", "zoned", "zoned_abs"]);
    want(
        "fio",
        &["time_based", "ramp_time", "rate", "rate_iops", "thinktime", "fsync", "fdatasync", "end_fsync", "stonewall", "include"],
    );
    want("stop", &["time", "requests", "both", "neither"]);
    want("mistakes", &["true"]);
    want("alone_baseline", &["true"]);
    want("zoned", &["true"]);
    want("zoned_mode", &["zbd", "host-ftl"]);
    want("zone_planes", &["all", "group"]);
    want("zone_limits", &["true"]);
    want("finish_pads", &["true", "false"]);
    want("zbd_rw", &["write", "randwrite", "read", "randread"]);
    assert!(missing.is_empty(), "400 seeds never drew: {}", missing.join(", "));
}
