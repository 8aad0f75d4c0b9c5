//! What the host machine reports: CPU use and context switches per kind of thread, VM exits by
//! reason with their costs, virtqueue mutex waits, kicks, interrupts and guest merges.
//!
//! CPU time is a thread's time on a hardware thread (spinning and polling included), up to the
//! report's time; a fraction of 1.0 is one hardware thread busy all the time. Example: two vCPU
//! threads that ran 3 ms and 1 ms of a 10 ms run report `cpu_ns` 4 ms, `cpu_fraction` 0.4.

use super::ids::VmId;
use super::machine::Machine;
use super::thread::{Role, Thread};
use super::{Completion, Emulation, ExitReason, Notify, VirtMode};
use crate::units::{SimTime, TenantId};
use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ExitStat {
    pub reason: String,
    pub count: u64,
    pub per_sec: f64,
    /// Total direct cost (exit, handling, re-entry) of these exits.
    pub direct_ns: u64,
    /// Total indirect cost (cache and TLB pollution after re-entry).
    pub indirect_ns: u64,
    /// Total time other vCPUs of the VM were held up by them.
    pub sync_ns: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LockStat {
    pub acquisitions: u64,
    /// Acquisitions that found the mutex held.
    pub contended: u64,
    /// Waiters that stopped spinning and slept.
    pub sleeps: u64,
    pub wait_ns: u64,
    pub wait_max_ns: u64,
}

impl LockStat {
    pub fn absorb(&mut self, o: &LockStat) {
        self.acquisitions += o.acquisitions;
        self.contended += o.contended;
        self.sleeps += o.sleeps;
        self.wait_ns += o.wait_ns;
        self.wait_max_ns = self.wait_max_ns.max(o.wait_max_ns);
    }

    /// Mean wait per acquisition, uncontended ones included.
    pub fn wait_mean_ns(&self) -> f64 {
        self.wait_ns as f64 / self.acquisitions.max(1) as f64
    }

    /// Mean wait of the acquisitions that had to wait.
    pub fn contended_wait_mean_ns(&self) -> f64 {
        self.wait_ns as f64 / self.contended.max(1) as f64
    }
}

/// One kind of thread (all a VM's vCPUs, all its I/O threads, all host processes).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ThreadStat {
    pub role: String,
    pub threads: u32,
    /// Time on a hardware thread, including spinning and polling.
    pub cpu_ns: u64,
    /// `cpu_ns` over the run's length: 1.0 is one hardware thread busy all the time.
    pub cpu_fraction: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VmResult {
    pub tenant: TenantId,
    pub exits_total: u64,
    pub exits: Vec<ExitStat>,
    /// Guest notifications that were exits (the others were suppressed or polled).
    pub kicks: u64,
    pub interrupts: u64,
    /// Inter-processor interrupts the guest sent to wake a process on another vCPU.
    pub ipis: u64,
    /// Requests the guest block layer merged into another.
    pub merges: u64,
    pub locks: LockStat,
    pub context_switches: u64,
    pub context_switches_per_sec: f64,
    /// CPU time of the polling threads (zero without polling).
    pub poll_cpu_ns: u64,
    pub threads: Vec<ThreadStat>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VirtResult {
    pub mode: VirtMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notify: Option<Notify>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulation: Option<Emulation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion: Option<Completion>,
    pub hw_threads: u32,
    /// Busy hardware-thread time over all hardware threads' time.
    pub cpu_utilisation: f64,
    pub context_switches: u64,
    pub context_switches_per_sec: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<ThreadStat>,
    /// Requests the host block layer merged into another at unplug (bare metal; a VM's
    /// guest merges are in `vms`).
    pub host_merges: u64,
    pub vms: Vec<VmResult>,
}

impl Machine {
    pub fn result(&self, now: SimTime) -> VirtResult {
        let elapsed = now.0.max(1) as f64;
        let threads = self.cpu.threads();
        let processes = self.thread_stat(now, "process", &|th| matches!(th.role, Role::Process(_)));
        let total_switches: u64 = threads.iter().map(|t| t.voluntary + t.involuntary).sum();
        let busy = self.cpu.busy_ns(now);
        let vms = self.vms.ids().map(|vm| self.vm_result(now, vm)).collect();
        let hw = self.cpu.hw_threads();
        VirtResult {
            mode: self.virt.mode,
            notify: self.virt.mode.is_vm().then_some(self.virt.notify),
            emulation: self.virt.mode.is_vm().then_some(self.virt.emulation),
            completion: self.virt.mode.is_vm().then_some(self.virt.completion),
            hw_threads: hw as u32,
            cpu_utilisation: busy as f64 / (elapsed * hw as f64),
            context_switches: total_switches,
            context_switches_per_sec: total_switches as f64 * 1e9 / elapsed,
            processes: (processes.threads > 0).then_some(processes),
            host_merges: self.host_merges,
            vms,
        }
    }

    /// The threads `filter` picks, summed up as one kind.
    fn thread_stat(&self, now: SimTime, role: &str, filter: &dyn Fn(&Thread) -> bool) -> ThreadStat {
        let mut s = ThreadStat { role: role.to_string(), ..Default::default() };
        for th in self.cpu.threads().iter().filter(|th| filter(th)) {
            s.threads += 1;
            s.cpu_ns += th.oncpu_ns(now);
            s.voluntary_switches += th.voluntary;
            s.involuntary_switches += th.involuntary;
        }
        s.cpu_fraction = s.cpu_ns as f64 / now.0.max(1) as f64;
        s
    }

    fn vm_result(&self, now: SimTime, id: VmId) -> VmResult {
        let elapsed = now.0.max(1) as f64;
        let vm = &self.vms[id];
        let vcpu = self.thread_stat(now, "vcpu", &|th| matches!(th.role, Role::Vcpu(v) if self.vcpus[v].vm == id));
        let poll = self.virt.notify == Notify::Poll;
        let io = self.thread_stat(
            now,
            if poll { "poll" } else { "iothread" },
            &|th| matches!(th.role, Role::IoThread(k) if self.iots[k].vm == id),
        );
        let mut locks = LockStat::default();
        for vq in self.vqs.iter().filter(|q| q.vm == id) {
            locks.absorb(&self.cpu.lock(vq.lock).stat);
        }
        let mut exits: Vec<ExitStat> = vm.exits.to_vec();
        for (e, r) in exits.iter_mut().zip(ExitReason::ALL) {
            e.reason = r.name().to_string();
            e.per_sec = e.count as f64 * 1e9 / elapsed;
        }
        let switches =
            vcpu.voluntary_switches + vcpu.involuntary_switches + io.voluntary_switches + io.involuntary_switches;
        VmResult {
            tenant: vm.tenant,
            exits_total: exits.iter().map(|e| e.count).sum(),
            exits,
            kicks: vm.kicks,
            interrupts: vm.interrupts,
            ipis: vm.ipis,
            merges: vm.merges,
            locks,
            context_switches: switches,
            context_switches_per_sec: switches as f64 * 1e9 / elapsed,
            poll_cpu_ns: if poll { io.cpu_ns } else { 0 },
            threads: vec![vcpu, io],
        }
    }
}
