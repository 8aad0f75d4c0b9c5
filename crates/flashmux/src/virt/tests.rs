//! The machine end to end with a minimal event loop of its own and a host that completes every
//! request a fixed time after it arrives: exact times of a request's way through each path.
//! Costs are the defaults (docs/MODEL.md) on 2 cores without hyper-threads, so no SMT slowdown.

use super::*;
use crate::device::IoOp;
use crate::engine::EventQueue;
use crate::units::{JobId, Nanos, ReqId, SimTime, TenantId};
use std::collections::BTreeMap;

const US: u64 = 1_000;
/// The host block layer's per-request submission and completion costs.
const SUBMIT: u64 = 1_000;
const COMPLETE: u64 = 800;
/// From the host block layer's arrival to its completion.
const DEVICE: u64 = 50 * US;

#[derive(Debug)]
enum Ev {
    Machine(MachineEvent),
    HostDone(ReqId),
}

struct Harness {
    m: Machine,
    q: EventQueue<Ev>,
    out: VirtOutbox,
    now: SimTime,
    to_host: Vec<(SimTime, ToHost)>,
    app: BTreeMap<u32, SimTime>,
}

fn cpu() -> CpuConfig {
    CpuConfig { cores: 2, threads_per_core: 1, ..CpuConfig::default() }
}

impl Harness {
    /// `jobs` jobs of tenant 0, each submitting `batch` requests per call.
    fn new(virt: VirtConfig, jobs: usize, batch: u32) -> Harness {
        let m = Machine::new(cpu(), virt, &vec![TenantId(0); jobs], &vec![batch; jobs], 1, Nanos(SUBMIT), Nanos(COMPLETE));
        let mut h = Harness {
            m,
            q: EventQueue::new(),
            out: VirtOutbox::default(),
            now: SimTime::ZERO,
            to_host: Vec::new(),
            app: BTreeMap::new(),
        };
        h.m.start(SimTime::ZERO, &mut h.out);
        h.drain();
        h
    }
    fn vm(mode: VirtMode) -> VirtConfig {
        VirtConfig { mode, vcpus: 1, ..VirtConfig::default() }
    }
    /// What the simulator does with a machine call's output, until there is none.
    fn drain(&mut self) {
        loop {
            for (t, e) in self.out.events.drain(..) {
                assert!(t >= self.now, "event scheduled in the past");
                self.q.push(t, Ev::Machine(e));
            }
            for h in self.out.to_host.drain(..) {
                self.to_host.push((self.now, h));
                self.q.push(self.now + Nanos(DEVICE), Ev::HostDone(h.req));
            }
            for r in self.out.to_app.drain(..) {
                self.app.insert(r.0, self.now);
            }
            if !self.m.has_pending() && self.out.is_empty() {
                return;
            }
            self.m.settle(self.now, &mut self.out);
        }
    }
    fn submit(&mut self, job: u32, req: u32, op: IoOp, offset: u64, len: u64) {
        let io = Io { req: ReqId(req), job: JobId(job), op, offset, len };
        self.m.submit(self.now, io, &mut self.out);
        self.drain();
    }
    fn run_all(&mut self) {
        while let Some((t, e)) = self.q.pop() {
            self.now = t;
            match e {
                Ev::Machine(me) => self.m.handle(t, me, &mut self.out),
                Ev::HostDone(r) => self.m.host_complete(t, r, &mut self.out),
            }
            self.drain();
            self.m.check_invariants();
        }
    }
    fn vm_result(&self) -> VmResult {
        self.m.result(self.now).vms.remove(0)
    }
}

#[test]
fn a_bare_metal_read_costs_two_wakeups_and_its_calls() {
    let mut h = Harness::new(VirtConfig::default(), 1, 1);
    h.submit(0, 0, IoOp::Read, 0, 4096);
    h.run_all();
    // Wake-up 4 + switch 1.5, then syscall 0.5 + app 0.4 + submit 1 us.
    let submitted = 4_000 + 1_500 + 500 + 400 + SUBMIT;
    assert_eq!(h.to_host.len(), 1);
    assert_eq!(h.to_host[0].0, SimTime(submitted));
    assert_eq!((h.to_host[0].1.offset, h.to_host[0].1.len), (0, 4096));
    // The completion: wake-up and switch again, then io_getevents 0.5 us + completion work.
    assert_eq!(h.app[&0], SimTime(submitted + DEVICE + 4_000 + 1_500 + 500 + COMPLETE));
    let r = h.m.result(h.now);
    let p = r.processes.expect("bare metal runs processes");
    assert_eq!((p.threads, p.voluntary_switches, p.involuntary_switches), (1, 2, 0));
    assert_eq!(p.cpu_ns, 2 * 1_500 + 500 + 400 + SUBMIT + 500 + COMPLETE);
}

#[test]
fn one_submission_call_merges_adjacent_requests_in_the_host_plug() {
    let virt = VirtConfig { max_merge_bytes: 8192, ..VirtConfig::default() };
    let mut h = Harness::new(virt, 1, 4);
    for i in 0..4 {
        h.submit(0, i, IoOp::Write, i as u64 * 4096, 4096);
    }
    h.run_all();
    let cmds: Vec<(u64, u64)> = h.to_host.iter().map(|(_, c)| (c.offset, c.len)).collect();
    assert_eq!(cmds, [(0, 8192), (8192, 8192)], "merged up to the 8 KiB limit");
    // All four in one call: its syscall once, then app + submit per request.
    let submitted = SimTime(5_500 + 500 + 4 * (400 + SUBMIT));
    assert!(h.to_host.iter().all(|&(t, _)| t == submitted));
    assert_eq!(h.m.result(h.now).host_merges, 2);
    assert_eq!(h.app.len(), 4, "the application sees every request complete");
    // One reap of all four; the block layer's completion work is per merged command: a member
    // completes with its lead, at no cost of its own.
    let reaped = submitted.0 + DEVICE + 5_500 + 500;
    let seen: Vec<SimTime> = h.app.values().copied().collect();
    assert_eq!(seen, [reaped + COMPLETE, reaped + COMPLETE, reaped + 2 * COMPLETE, reaped + 2 * COMPLETE].map(SimTime));
}

/// When the I/O thread of a one-vCPU VM submits one read, and when the application sees it.
fn vm_read(virt: VirtConfig) -> (SimTime, SimTime, VmResult) {
    let mut h = Harness::new(virt, 1, 1);
    h.submit(0, 0, IoOp::Read, 0, 4096);
    h.run_all();
    assert_eq!(h.to_host.len(), 1);
    (h.to_host[0].0, h.app[&0], h.vm_result())
}

#[test]
fn a_vm_read_through_per_vcpu_threads_takes_exactly_its_path() {
    let (submitted, seen, vm) = vm_read(Harness::vm(VirtMode::PerVcpuThreads));
    // vCPU: wake 4 + switch 1.5; the guest's call 0.5 + 0.4 + 1; lock, add 0.3; kick exit 2.5.
    let kicked = 5_500 + 1_900 + 300 + 2_500;
    // I/O thread: wake 4 + switch 1.5; lock, pop 0.3; user crossing 1.5; submit 1 + 0.25.
    assert_eq!(submitted, SimTime(kicked + 5_500 + 300 + 1_500 + SUBMIT + 250));
    // Back: I/O thread wake 4 + switch 1.5, crossing 1.5, reap 0.8 + 0.25, push 0.3, crossing
    // 1.5 (irqfd); the halted vCPU: wake 4 + switch 1.5, handler 0.8, EOI exit 1.5, reap 0.5.
    let raised = submitted.0 + DEVICE + 5_500 + 1_500 + COMPLETE + 250 + 300 + 1_500;
    assert_eq!(seen, SimTime(raised + 5_500 + COMPLETE + 1_500 + 500));
    assert_eq!((vm.kicks, vm.interrupts, vm.ipis), (1, 1, 0));
    let count = |r: ExitReason| vm.exits[r.index()].count;
    assert_eq!((count(ExitReason::IoInst), count(ExitReason::MsrWrite), count(ExitReason::ExtInt)), (1, 1, 0));
}

#[test]
fn a_kick_costs_exactly_its_exit() {
    let (with, _, _) = vm_read(Harness::vm(VirtMode::PerVcpuThreads));
    let mut free = Harness::vm(VirtMode::PerVcpuThreads);
    free.exits[ExitReason::IoInst.index()] = ExitCost { direct: Nanos(0), indirect: Nanos(0), sync: Nanos(0) };
    let (without, _, _) = vm_read(free);
    assert_eq!(with.since(without), Nanos(1_500 + 1_000));
}

#[test]
fn polling_replaces_the_kick_exit_and_the_wakeup_with_poll_detection() {
    let mut virt = Harness::vm(VirtMode::PerVcpuThreads);
    virt.notify = Notify::Poll;
    let (submitted, _, vm) = vm_read(virt);
    // The poller is on its own hardware thread from time zero, switched in at 1.5 us.
    assert_eq!(submitted, SimTime(5_500 + 1_900 + 300 + 200 + 300 + 1_500 + SUBMIT + 250));
    assert_eq!(vm.kicks, 0);
    assert_eq!(vm.exits[ExitReason::IoInst.index()].count, 0);
}

#[test]
fn exitless_completion_saves_exactly_the_eoi_of_a_halted_vcpu() {
    let (_, inject, _) = vm_read(Harness::vm(VirtMode::PerVcpuThreads));
    let mut virt = Harness::vm(VirtMode::PerVcpuThreads);
    virt.completion = Completion::Exitless;
    let (_, exitless, vm) = vm_read(virt);
    assert_eq!(inject.since(exitless), Nanos(1_000 + 500));
    assert_eq!(vm.exits[ExitReason::MsrWrite.index()].count, 0);
}

#[test]
fn a_batch_window_delays_the_pop_by_the_window_and_a_second_wakeup() {
    let mut virt = Harness::vm(VirtMode::Multiqueue);
    virt.batch_window = Nanos(0);
    let (no_window, _, _) = vm_read(virt.clone());
    virt.batch_window = Nanos(40 * US);
    let (window, _, _) = vm_read(virt);
    // The kicked I/O thread opens the window and sleeps; its end wakes it again (4 + 1.5 us).
    assert_eq!(window.since(no_window), Nanos(40 * US + 5_500));
}

#[test]
fn ide_emulation_pays_its_register_exits_in_the_qemu_process() {
    let (submitted, _, vm) = vm_read(Harness::vm(VirtMode::IdeEmulation));
    // 8 register writes, each IO_INST 2.5 us + user/kernel crossing 1.5 us; no kick.
    let issued = 5_500 + 1_900 + 8 * (2_500 + 1_500);
    assert_eq!(submitted, SimTime(issued + 5_500 + 300 + 1_500 + SUBMIT + 250));
    assert_eq!(vm.exits[ExitReason::IoInst.index()].count, 8 + 2, "and 2 status reads at completion");
    assert_eq!(vm.kicks, 0);
}

#[test]
fn a_full_virtqueue_holds_requests_in_the_guest_queue_merged() {
    let virt = VirtConfig { queue_size: 1, ..Harness::vm(VirtMode::PerVcpuThreads) };
    let mut h = Harness::new(virt, 1, 1);
    for i in 0..3 {
        h.submit(0, i, IoOp::Read, i as u64 * 4096, 4096);
    }
    h.run_all();
    let cmds: Vec<(u32, u64)> = h.to_host.iter().map(|(_, c)| (c.req.0, c.len)).collect();
    // Three calls of one request: the first takes the queue's one slot, the second waits in the
    // guest queue and the third merges into it; they go when the first completes.
    assert_eq!(cmds, [(0, 4096), (1, 2 * 4096)]);
    assert!(h.to_host[1].0 > h.to_host[0].0 + Nanos(DEVICE));
    assert_eq!(h.vm_result().merges, 1);
    assert_eq!(h.app.len(), 3);
}

#[test]
fn the_guest_elevator_merges_into_any_waiting_request_at_either_end() {
    let virt = VirtConfig { queue_size: 1, ..Harness::vm(VirtMode::PerVcpuThreads) };
    let mut h = Harness::new(virt, 1, 1);
    // The first read takes the one slot. Then, waiting: a read at 64K; one at 16K (not
    // adjacent); one at 60K, which ends where the 64K one starts (a front merge into a request
    // that is not the last); one at 68K, which continues the merged request (the last merge,
    // at its back).
    for (i, kib) in [(0u32, 0u64), (1, 64), (2, 16), (3, 60), (4, 68)] {
        h.submit(0, i, IoOp::Read, kib << 10, 4096);
    }
    h.run_all();
    let cmds: Vec<(u32, u64, u64)> = h.to_host.iter().map(|(_, c)| (c.req.0, c.offset >> 10, c.len >> 10)).collect();
    assert_eq!(cmds, [(0, 0, 4), (1, 60, 12), (2, 16, 4)]);
    assert_eq!(h.vm_result().merges, 2);
    assert_eq!(h.app.len(), 5, "every read completes");
}

#[test]
fn nomerges_2_stops_the_guest_merging_even_in_the_plug() {
    let virt = VirtConfig { queue_size: 1, nomerges: 2, ..Harness::vm(VirtMode::PerVcpuThreads) };
    let mut h = Harness::new(virt, 1, 4);
    for i in 0..4 {
        h.submit(0, i, IoOp::Read, i as u64 * 4096, 4096);
    }
    h.run_all();
    assert_eq!(h.to_host.len(), 4);
    assert!(h.to_host.iter().all(|(_, c)| c.len == 4096));
    assert_eq!(h.vm_result().merges, 0);
}
