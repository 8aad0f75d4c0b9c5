//! The host CPU and virtualization path end to end: every mode and option combination keeps its
//! invariants and conserves requests; results are deterministic; the mechanisms do what they
//! claim (polling removes kicks, exitless completion removes interrupt exits, merging merges,
//! a queue per vCPU removes mutex waits); bad settings are rejected.

mod common;

use common::{run_checked, scenario};
use flashmux::config::Scenario;
use flashmux::metrics::RunResults;
use flashmux::virt::{ExitReason, VmResult};
use std::path::Path;

fn text(virt: &str, device: &str, rw: &str, bs: &str, procs: u32, tenants: u32) -> String {
    let mut t = format!(
        "[device]\npreset = \"{device}\"\n[host.cpu]\ncores = 4\nthreads_per_core = 2\n{virt}\n[stop]\ntime = \"4ms\"\n"
    );
    for i in 0..tenants {
        t.push_str(&format!(
            "[[tenant]]\nname = \"vm{i}\"\nfio = \"\"\"\n[p]\nioengine=libaio\ndirect=1\niodepth=16\nrw={rw}\nbs={bs}\nsize=64m\nnumjobs={procs}\n\"\"\"\n"
        ));
    }
    t
}

fn vm(r: &RunResults) -> &VmResult {
    &r.virt.as_ref().expect("the machine is modelled").vms[0]
}

fn iops(r: &RunResults) -> f64 {
    r.tenants.iter().map(|t| (t.io.read.ios + t.io.write.ios) as f64).sum::<f64>() / (r.sim_time_ns as f64 / 1e9)
}

fn exits(r: &RunResults, reason: ExitReason) -> u64 {
    vm(r).exits[reason.index()].count
}

#[test]
fn every_mode_and_option_keeps_its_invariants() {
    let modes = ["ide-emulation", "dataplane", "multiqueue", "per-vcpu-threads"];
    for mode in modes {
        for notify in ["exit", "poll"] {
            for emulation in ["userspace", "in-hypervisor"] {
                for completion in ["inject", "exitless"] {
                    let virt = format!(
                        "[virt]\nmode = \"{mode}\"\nvcpus = 4\nnotify = \"{notify}\"\nemulation = \"{emulation}\"\ncompletion = \"{completion}\"\n"
                    );
                    let r = run_checked(&text(&virt, "null", "randrw", "4k", 6, 1), 97);
                    let what = format!("{mode}/{notify}/{emulation}/{completion}");
                    assert!(r.requests_completed > 20, "{what}: {} completed", r.requests_completed);
                    assert_eq!(r.requests_issued, r.requests_completed + r.requests_in_flight, "{what}");
                }
            }
        }
    }
}

#[test]
fn modes_compose_with_an_ssd_several_vms_and_dftl() {
    for mode in ["dataplane", "multiqueue", "per-vcpu-threads", "bare-metal"] {
        let virt = if mode == "bare-metal" { String::new() } else { format!("[virt]\nmode = \"{mode}\"\nvcpus = 2\n") };
        let mut t = text(&virt, "paper-c", "randrw", "4k", 3, 3);
        t = t.replace("[stop]", "[device.ftl]\nmapping = \"dftl\"\n[device.ftl.cmt]\npolicy = \"partitioned\"\npages = 64\n[stop]");
        t = t.replace("time = \"4ms\"", "time = \"20ms\"");
        let r = run_checked(&t, 211);
        assert_eq!(r.tenants.len(), 3);
        for ten in &r.tenants {
            assert!(ten.io.read.ios + ten.io.write.ios > 0, "{mode}: tenant {} did no I/O", ten.name);
        }
        let v = r.virt.as_ref().unwrap();
        assert_eq!(v.vms.len(), if mode == "bare-metal" { 0 } else { 3 }, "{mode}: one VM per tenant");
    }
}

#[test]
fn runs_are_deterministic() {
    let t = text("[virt]\nmode = \"dataplane\"\nvcpus = 4\n", "null", "randread", "4k", 8, 1);
    let a = flashmux::report::fio_json(&run_checked(&t, 1_000_000), true).to_string();
    let b = flashmux::report::fio_json(&run_checked(&t, 1_000_000), true).to_string();
    assert_eq!(a, b);
}

#[test]
fn polling_removes_kicks_and_reports_its_cpu() {
    let exit = run_checked(&text("[virt]\nmode = \"dataplane\"\nvcpus = 2\n", "null", "randread", "4k", 2, 1), 101);
    let poll = run_checked(&text("[virt]\nmode = \"dataplane\"\nvcpus = 2\nnotify = \"poll\"\n", "null", "randread", "4k", 2, 1), 101);
    assert!(exits(&exit, ExitReason::IoInst) > 0);
    assert_eq!(exits(&poll, ExitReason::IoInst), 0, "a polled queue takes no kicks");
    assert_eq!(vm(&exit).poll_cpu_ns, 0);
    // The polling thread spins the whole run on its own hardware thread.
    let p = vm(&poll).poll_cpu_ns as f64 / poll.sim_time_ns as f64;
    assert!(p > 0.99, "polling thread on a CPU {p:.3} of the time");
}

#[test]
fn exitless_completion_removes_interrupt_exits() {
    let base = "[virt]\nmode = \"per-vcpu-threads\"\nvcpus = 4\n";
    let inject = run_checked(&text(base, "null", "randread", "4k", 4, 1), 101);
    let eli = run_checked(&text(&format!("{base}completion = \"exitless\"\n"), "null", "randread", "4k", 4, 1), 101);
    assert!(exits(&inject, ExitReason::MsrWrite) > 0, "EOIs are exits with injection");
    assert_eq!(exits(&eli, ExitReason::ExtInt), 0);
    // With a queue per vCPU no completion needs an IPI: no MSR write is left.
    assert_eq!(exits(&eli, ExitReason::MsrWrite), 0);
    assert!(iops(&eli) >= iops(&inject));
}

#[test]
fn the_guest_merges_adjacent_waiting_requests() {
    // IDE holds one command: sequential requests wait in the guest queue and merge.
    let seq = run_checked(&text("[virt]\nmode = \"ide-emulation\"\nvcpus = 1\n", "null", "read", "4k", 1, 1), 53);
    let rand = run_checked(&text("[virt]\nmode = \"ide-emulation\"\nvcpus = 1\n", "null", "randread", "4k", 1, 1), 53);
    assert!(vm(&seq).merges > 0);
    assert_eq!(vm(&rand).merges, 0, "random requests are not adjacent");
    assert!(iops(&seq) > 2.0 * iops(&rand), "merging lets sequential IDE reads go faster");
    let off = run_checked(&text("[virt]\nmode = \"ide-emulation\"\nvcpus = 1\nmax_merge = \"4k\"\n", "null", "read", "4k", 1, 1), 53);
    assert_eq!(vm(&off).merges, 0, "max_merge bounds merged size");
}

#[test]
fn a_queue_per_vcpu_removes_the_mutex_contention() {
    let dp = run_checked(&text("[virt]\nmode = \"dataplane\"\nvcpus = 8\n", "null", "randread", "4k", 8, 1), 1009);
    let mt = run_checked(&text("[virt]\nmode = \"per-vcpu-threads\"\nvcpus = 8\n", "null", "randread", "4k", 8, 1), 1009);
    assert!(vm(&dp).locks.contended > 0 && vm(&dp).locks.sleeps > 0);
    assert!(vm(&mt).locks.wait_mean_ns() < vm(&dp).locks.wait_mean_ns() / 10.0);
    assert!(iops(&mt) > 2.0 * iops(&dp));
}

#[test]
fn bare_metal_null_calibration_reaches_paper_a_host_iops() {
    // Paper A: null_blk reaches 1.2M IOPS on the host with 8 processes (4 KiB random read).
    let mut t = text("", "null", "randread", "4k", 8, 1).replace("iodepth=16", "iodepth=32");
    t = t.replace("time = \"4ms\"", "time = \"20ms\"");
    let r = run_checked(&t, 1_000_003);
    let k = iops(&r) / 1000.0;
    assert!((1000.0..=1300.0).contains(&k), "bare metal with 8 processes: {k:.0}K IOPS");
    // One process cannot: it has one hardware thread.
    let one = run_checked(&t.replace("numjobs=8", "numjobs=1"), 1_000_003);
    assert!(iops(&one) < iops(&r) / 4.0);
}

fn load_err(t: &str) -> String {
    match Scenario::from_toml(t, "bad.toml", Path::new(".")) {
        Ok(_) => panic!("accepted:\n{t}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_virtualization_settings_are_rejected_with_their_key() {
    let base = text("[virt]\nmode = \"MODE\"\n", "null", "randread", "4k", 1, 1);
    let e = load_err(&base.replace("MODE", "virtio"));
    assert!(e.contains("virt.mode") && e.contains("per-vcpu-threads"), "{e}");
    let e = load_err(&base.replace("mode = \"MODE\"", "mode = \"dataplane\"\nvcpus = 0"));
    assert!(e.contains("virt.vcpus") && e.contains("at least 1"), "{e}");
    let e = load_err(&base.replace("mode = \"MODE\"", "mode = \"dataplane\"\nnotify = \"irq\""));
    assert!(e.contains("virt.notify") && e.contains("exit, poll"), "{e}");
    let e = load_err(&base.replace("mode = \"MODE\"", "mode = \"bare-metal\"\nvcpus = 4"));
    assert!(e.contains("virt.vcpus") && e.contains("VM mode"), "{e}");
    let e = load_err(&base.replace("mode = \"MODE\"", "mode = \"dataplane\"\nbatch_window = \"10us\""));
    assert!(e.contains("virt.batch_window") && e.contains("multiqueue"), "{e}");
    // 8 polling threads (one per vCPU) would take all 8 hardware threads.
    let e = load_err(&base.replace("mode = \"MODE\"", "mode = \"per-vcpu-threads\"\nvcpus = 8\nnotify = \"poll\""));
    assert!(e.contains("poll") && e.contains("8 polling thread") && e.contains("8"), "{e}");
    let e = load_err(&base.replace("mode = \"MODE\"", "mode = \"dataplane\"").replace("threads_per_core = 2", "threads_per_core = 0"));
    assert!(e.contains("host.cpu.threads_per_core"), "{e}");
    let e = load_err(&base.replace("mode = \"MODE\"", "mode = \"dataplane\"\n[virt.exits.io_inst]\ndirect = \"fast\""));
    assert!(e.contains("virt.exits.io_inst.direct"), "{e}");
    let e = load_err(&base.replace("mode = \"MODE\"", "mode = \"dataplane\"\naio = \"uring\""));
    assert!(e.contains("virt.aio") && e.contains("native, threads"), "{e}");
    let e = load_err(&base.replace("mode = \"MODE\"", "mode = \"bare-metal\"\naio = \"threads\""));
    assert!(e.contains("virt.aio") && e.contains("VM mode"), "{e}");
    let e = load_err(&base.replace("mode = \"MODE\"", "mode = \"dataplane\"\nemulation = \"in-hypervisor\"\naio = \"threads\""));
    assert!(e.contains("virt.aio") && e.contains("in-hypervisor"), "{e}");
}

#[test]
fn cfs_tunables_default_to_linuxs_for_the_hardware_threads_and_are_checked() {
    let cpu = |extra: &str| {
        let t = text("", "null", "randread", "4k", 1, 1).replace("threads_per_core = 2\n", &format!("threads_per_core = 2\n{extra}"));
        let s = Scenario::from_toml(&t, "k.toml", Path::new(".")).unwrap();
        let c = s.host.cpu.expect("[host.cpu] given");
        (c.latency.0, c.min_granularity.0, c.wakeup_granularity.0)
    };
    // 6 ms, 0.75 ms and 1 ms times 1 + log2(CPUs), the CPUs counted up to 8.
    assert_eq!(cpu(""), (24_000_000, 3_000_000, 4_000_000), "4 cores x 2");
    assert_eq!(cpu("").0, flashmux::virt::CpuConfig::default().latency.0);
    let one = text("", "null", "randread", "4k", 1, 1).replace("cores = 4\nthreads_per_core = 2", "cores = 1\nthreads_per_core = 1");
    let c = Scenario::from_toml(&one, "k.toml", Path::new(".")).unwrap().host.cpu.unwrap();
    assert_eq!((c.latency.0, c.min_granularity.0, c.wakeup_granularity.0), (6_000_000, 750_000, 1_000_000), "1 CPU");
    let many = one.replace("cores = 1\nthreads_per_core = 1", "cores = 16\nthreads_per_core = 2");
    let c = Scenario::from_toml(&many, "k.toml", Path::new(".")).unwrap().host.cpu.unwrap();
    assert_eq!(c.latency.0, 24_000_000, "32 CPUs count as 8");
    // Given, they are taken as given; out of Linux's bounds, refused.
    assert_eq!(cpu("latency = \"12ms\"\nmin_granularity = \"1ms\"\nwakeup_granularity = \"0ms\"\n"), (12_000_000, 1_000_000, 0));
    let base = text("", "null", "randread", "4k", 1, 1);
    let bad = |extra: &str| load_err(&base.replace("threads_per_core = 2\n", &format!("threads_per_core = 2\n{extra}")));
    let e = bad("latency = \"50us\"\n");
    assert!(e.contains("host.cpu.latency: 50.000us is out of range: expected 100us to 1s"), "{e}");
    let e = bad("min_granularity = \"0ms\"\n");
    assert!(e.contains("host.cpu.min_granularity: 0ns is out of range"), "{e}");
    let e = bad("wakeup_granularity = \"2s\"\n");
    assert!(e.contains("host.cpu.wakeup_granularity: 2.000s is out of range: expected 0 to 1s"), "{e}");
    // The fixed quantum of old is gone: its successors are named.
    let e = bad("quantum = \"3ms\"\n");
    assert!(e.contains("host.cpu.quantum") && e.contains("min_granularity"), "{e}");
}

/// One fio process reading 4 KiB blocks at depth 8, submitting and reaping its whole depth at
/// once (`batched`) or one request per call.
fn batched_text(virt: &str, rw: &str, batched: bool) -> String {
    let batch = if batched { "iodepth_batch_submit=8\niodepth_batch_complete_min=8\n" } else { "" };
    text(virt, "null", rw, "4k", 1, 1).replace("iodepth=16\n", &format!("iodepth=8\n{batch}"))
}

#[test]
fn a_batched_submission_merges_adjacent_requests_in_its_plug() {
    // Bare metal: the host block layer merges each call's 8 sequential requests into one.
    let seq = run_checked(&batched_text("", "read", true), 61);
    let v = seq.virt.as_ref().unwrap();
    let ios = seq.tenants[0].io.read.ios;
    assert!(ios > 800, "{ios}");
    assert!(v.host_merges >= ios * 7 / 8 - 8 && v.host_merges <= ios * 7 / 8 + 8, "{} merges for {ios} reads", v.host_merges);
    assert_eq!(seq.tenants[0].io.read.bytes, ios * 4096, "the application still sees its 4 KiB reads");
    for (rw, batched) in [("randread", true), ("read", false)] {
        let r = run_checked(&batched_text("", rw, batched), 61);
        assert_eq!(r.virt.as_ref().unwrap().host_merges, 0, "{rw}, batched {batched}: nothing to merge");
    }
    // In a VM the guest's plug merges, and the driver notifies once per call.
    let virt = "[virt]\nmode = \"dataplane\"\nvcpus = 1\n";
    let g = run_checked(&batched_text(virt, "read", true), 61);
    let ios = g.tenants[0].io.read.ios;
    assert!(vm(&g).merges >= ios * 7 / 8 - 8, "{} guest merges for {ios} reads", vm(&g).merges);
    let rand = run_checked(&batched_text(virt, "randread", true), 61);
    let one = run_checked(&batched_text(virt, "randread", false), 61);
    let kicks_per_io = |r: &RunResults| vm(r).kicks as f64 / r.tenants[0].io.read.ios as f64;
    assert!(kicks_per_io(&rand) <= 0.2, "one kick per batch of 8: {:.2} per request", kicks_per_io(&rand));
    assert!(kicks_per_io(&one) > 2.0 * kicks_per_io(&rand), "{:.2} vs {:.2}", kicks_per_io(&one), kicks_per_io(&rand));
}

#[test]
fn a_job_waits_for_its_batch_of_completions_before_refilling() {
    // Without the CPU model too: with iodepth_batch_complete_min = iodepth the job drains its
    // queue before refilling it, so its issue-time depth climbs 1..8 every round instead of
    // staying at 8 (fio's iodepth distribution).
    let t = |batched: bool| batched_text("", "randread", batched).replace("[host.cpu]\ncores = 4\nthreads_per_core = 2\n", "");
    let (b, u) = (run_checked(&t(true), 61), run_checked(&t(false), 61));
    assert!(b.virt.is_none());
    let level = |r: &RunResults, bucket: u32| r.jobs[0].iodepth_levels.iter().find(|l| l.0 == bucket).map_or(0.0, |l| l.1);
    assert!(level(&u, 8) > 0.9, "refilled one at a time the job issues at depth 8: {:?}", u.jobs[0].iodepth_levels);
    // Of each round's eight issues one is at depth 1, two at 2-3, four at 4-7, one at 8.
    for (bucket, share) in [(1, 0.125), (2, 0.25), (4, 0.5), (8, 0.125)] {
        assert!((level(&b, bucket) - share).abs() < 0.01, "{:?}", b.jobs[0].iodepth_levels);
    }
}

#[test]
fn qemu_thread_pool_adds_a_worker_wake_up_per_request() {
    let native = "[virt]\nmode = \"dataplane\"\nvcpus = 1\n";
    let threads = "[virt]\nmode = \"dataplane\"\nvcpus = 1\naio = \"threads\"\n";
    let t = |v: &str| text(v, "null", "randread", "4k", 1, 1).replace("iodepth=16", "iodepth=1");
    let (n, p) = (run_checked(&t(native), 29), run_checked(&t(threads), 29));
    let lat = |r: &RunResults| r.tenants[0].io.all_lat().mean() / 1000.0;
    // The worker's wake-up (4 us) and context switch (1.5 us) are on every request's path.
    let extra = lat(&p) - lat(&n);
    assert!((4.5..8.0).contains(&extra), "thread pool adds {extra:.2} us per request");
}

#[test]
fn polling_with_too_few_spare_threads_warns() {
    // 4 vCPUs + 4 polling threads on 4 hardware threads: legal but crowded.
    let t = text("[virt]\nmode = \"per-vcpu-threads\"\nvcpus = 4\nnotify = \"poll\"\n", "null", "randread", "4k", 1, 1)
        .replace("cores = 4", "cores = 3");
    let s = scenario(&t);
    assert!(s.warnings.iter().any(|w| w.contains("share")), "{:?}", s.warnings);
}

#[test]
fn a_batch_merged_in_the_plug_merges_again_in_the_guest_queue_without_losing_a_request() {
    // Found by the swarm (seed 499): one vCPU, IDE emulation (one command in flight), 1 KiB
    // sequential writes submitted two per call. Each call's pair merges in the plug; behind the
    // command in flight the pairs merge again in the guest queue. Merging a pair into the queue's
    // last request must keep the whole pair in the chain, or its second request never completes
    // and the job never ends.
    for (rw, size) in [("write", "7k"), ("write", "64k"), ("read", "64k")] {
        let t = format!(
            "[device]\npreset = \"null\"\n[host.cpu]\ncores = 1\n[virt]\nmode = \"ide-emulation\"\nvcpus = 2\n[stop]\ntime = \"1s\"\n\
             [[tenant]]\nname = \"vm\"\nfio = \"\"\"\n[p]\nrw={rw}\nbs=1k\nsize={size}\niodepth=6\niodepth_batch=2\n\"\"\"\n"
        );
        let r = run_checked(&t, 7);
        let ios = r.tenants[0].io.read.ios + r.tenants[0].io.write.ios;
        assert_eq!(r.stop_reason, flashmux::metrics::StopReason::AllJobsDone, "{rw} {size}: {ios} I/Os done");
        assert_eq!(ios * 1024, flashmux::units::parse_size(size).unwrap(), "{rw} {size}");
        assert!(vm(&r).merges > 0, "{rw} {size}: the guest merged");
    }
}
