//! What the host machine reports: CPU use and context switches per kind of thread, VM exits by
//! reason with their costs, virtqueue mutex waits, kicks, interrupts and guest merges.

use super::{Completion, Emulation, Notify, VirtMode};
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
    pub tenant: usize,
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
