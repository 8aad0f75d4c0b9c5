//! The virtualization path's draws: `[virt]` (bare metal, or a VM per tenant in one of four
//! designs: IDE emulation, a dataplane thread, multiqueue, an I/O thread per vCPU) with its
//! notification, emulation, completion and aio options, queue and merge sizes, pinning and costs,
//! and `[host.cpu]` (cores, SMT, CFS's latency and granularities, the CPU costs), which a VM path draws more often.
//!
//! What is drawn valid on purpose: polling threads each take a hardware thread, so `notify =
//! "poll"` is drawn only when the tenants' polling threads leave one free (4 cores of 2 threads
//! and one tenant with 8 per-vCPU I/O threads: 8 < 8 fails, so no polling) unless by mistake.

use super::G;
use crate::swarm::toml::{self as t, Doc};

/// `[virt]` and `[host.cpu]`.
pub(super) fn virt(g: &mut G, doc: &mut Doc, tenants: usize) {
    let mode = g.weighted(&[
        ("bare-metal", 50),
        ("ide-emulation", 12),
        ("dataplane", 13),
        ("multiqueue", 12),
        ("per-vcpu-threads", 13),
    ]);
    g.tag("virt", mode);
    let vm = mode != "bare-metal";
    if vm || g.chance(0.2) {
        doc.set("virt", "mode", t::string(mode));
    }
    let hw_threads = host_cpu(g, doc, vm);
    if !vm {
        return;
    }
    let mut vcpus = 8u64;
    if g.chance(0.6) {
        vcpus = g.weighted(&[(1u64, 3), (2, 3), (4, 2), (8, 1), (16, 1)]);
        doc.set("virt", "vcpus", vcpus.to_string());
    }
    // Polling threads each take a hardware thread: leave at least one for everything else.
    let iothreads = if mode == "per-vcpu-threads" { vcpus } else { 1 };
    let poll_fits = (tenants as u64) * iothreads < hw_threads;
    let emulation = paths(g, doc, poll_fits);
    if emulation == "userspace" && g.chance(0.3) || g.mistake(0.1) {
        let aio = g.pick(&["native", "threads"]);
        g.tag("aio", aio);
        doc.set("virt", "aio", t::string(aio));
    }
    queues(g, doc, mode);
    costs(g, doc, mode);
}

/// `[host.cpu]`, drawn three times in five with a VM and one in five without. Returns the
/// hardware threads (cores × threads per core, 4 × 2 by default).
fn host_cpu(g: &mut G, doc: &mut Doc, vm: bool) -> u64 {
    let cpu = vm && g.chance(0.6) || !vm && g.chance(0.2);
    let (mut cores, mut tpc) = (4u64, 2u64);
    if !cpu {
        return cores * tpc;
    }
    g.tag("host_cpu", true);
    if g.chance(0.7) {
        cores = g.weighted(&[(1u64, 2), (2, 3), (4, 3), (8, 2), (16, 1)]);
        doc.set("host.cpu", "cores", cores.to_string());
    }
    if g.chance(0.5) {
        tpc = g.int(1, 2);
        doc.set("host.cpu", "threads_per_core", tpc.to_string());
    }
    // CFS's tunables, within Linux's bounds (100 us to 1 s; the wake-up granularity from 0).
    for (key, least, most) in [("min_granularity", 100_000, 20_000_000), ("latency", 100_000, 50_000_000), ("wakeup_granularity", 1_000, 20_000_000)] {
        if g.chance(0.2) {
            doc.set("host.cpu", key, t::string(&t::duration(g.log(least, most))));
        }
    }
    for key in ["context_switch", "wakeup", "spin", "syscall", "app"] {
        if g.chance(0.15) {
            doc.set("host.cpu", key, t::string(&t::duration(g.cost(10_000))));
        }
    }
    if g.chance(0.2) {
        doc.set("host.cpu", "smt_slowdown", t::float(g.int(100, 400) as f64 / 100.0));
    }
    cores * tpc
}

/// How requests reach the device and come back: `notify`, `emulation`, `completion`. Returns
/// the emulation.
fn paths(g: &mut G, doc: &mut Doc, poll_fits: bool) -> &'static str {
    let notify = if g.chance(0.35) && (poll_fits || g.mistake(0.3)) { "poll" } else { "exit" };
    g.tag("notify", notify);
    if notify == "poll" || g.chance(0.3) {
        doc.set("virt", "notify", t::string(notify));
    }
    let emulation = if g.chance(0.35) { "in-hypervisor" } else { "userspace" };
    g.tag("emulation", emulation);
    if emulation != "userspace" || g.chance(0.3) {
        doc.set("virt", "emulation", t::string(emulation));
    }
    let completion = if g.chance(0.4) { "exitless" } else { "inject" };
    g.tag("completion", completion);
    if completion != "inject" || g.chance(0.3) {
        doc.set("virt", "completion", t::string(completion));
    }
    emulation
}

/// The virtqueue's size, the guest's merge limit, multiqueue's batch window, pinning.
fn queues(g: &mut G, doc: &mut Doc, mode: &str) {
    if g.chance(0.3) {
        doc.set("virt", "queue_size", g.log(1, 512).to_string());
    }
    if g.chance(0.3) {
        // The guest's max_sectors_kb: 4 KiB (a page, no merging beyond it) to 512 KiB.
        let m = if g.chance(0.3) { 4096 } else { g.log(4, 512) * 1024 };
        doc.set("virt", "max_merge", t::string(&t::size(m)));
    }
    if g.chance(0.15) {
        doc.set("virt", "nomerges", g.weighted(&[(0u64, 1), (1, 1), (2, 1)]).to_string());
    }
    if mode == "multiqueue" && g.chance(0.4) {
        doc.set("virt", "batch_window", t::string(&t::duration(g.cost(200_000))));
    }
    for key in ["pin_vcpus", "pin_iothreads"] {
        if g.chance(0.25) {
            doc.set("virt", key, g.chance(0.5).to_string());
        }
    }
}

/// The virtqueue path's costs, IDE emulation's exits per request, and VM exits' costs by reason.
fn costs(g: &mut G, doc: &mut Doc, mode: &str) {
    for key in ["vq_add", "vq_pop", "request_cost", "vq_push", "userspace_switch", "poll_detect"] {
        if g.chance(0.1) {
            doc.set("virt", key, t::string(&t::duration(g.cost(5_000))));
        }
    }
    if mode == "ide-emulation" || g.chance(0.05) {
        for key in ["ide_submit_exits", "ide_complete_exits"] {
            if g.chance(0.3) {
                doc.set("virt", key, g.int(0, 12).to_string());
            }
        }
    }
    if g.chance(0.15) {
        for reason in ["io_inst", "ext_int", "msr_write", "hlt"] {
            for cost in ["direct", "indirect", "sync"] {
                if g.chance(0.3) {
                    doc.set(&format!("virt.exits.{reason}"), cost, t::string(&t::duration(g.cost(5_000))));
                }
            }
        }
    }
}
