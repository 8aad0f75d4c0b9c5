//! The virtualization I/O path between a tenant's guest and the host block layer, and the host
//! CPU it runs on.
//!
//! `bare-metal` without a CPU model is the identity: requests go straight from the workload to
//! the host block layer after a fixed submission time, and completions straight back. With
//! `[host.cpu]`, or any VM mode, every step of the path is CPU work done by a thread on the
//! host's hardware threads ([`machine`]): fio processes, vCPU threads, I/O threads, polling
//! threads; with VM exits, a FIFO mutex per virtqueue, interrupt injection and the guest's own
//! block layer (per-vCPU queues, merging).
//!
//! The modes, each a documented policy (docs/MODEL.md, "Virtualized I/O path"):
//! - `bare-metal`: no VM: each fio job is a host process;
//! - `ide-emulation`: trap-and-emulate IDE: several register-access exits per request, emulated
//!   in the QEMU process, one command in flight, one emulation thread;
//! - `dataplane`: paper A's Baseline: one virtqueue behind one mutex shared by every vCPU and the
//!   one I/O thread;
//! - `multiqueue`: paper A's MQ: a virtqueue per vCPU, one I/O thread that collects requests for a
//!   batch window and processes them together;
//! - `per-vcpu-threads`: paper A's MT: a virtqueue and a pinned I/O thread per vCPU.
//!
//! Paper B's options combine with every VM mode: notification `exit` | `poll`, emulation
//! `userspace` | `in-hypervisor`, completion `inject` | `exitless`.

mod cpu;
mod ids;
mod irq;
mod lock;
mod machine;
mod plug;
mod report;
mod roles;
mod thread;
mod virtqueue;
#[cfg(test)]
mod tests;

pub use machine::{Io, Machine, MachineEvent, ToHost, VirtOutbox};
pub use report::{ExitStat, LockStat, ThreadStat, VirtResult, VmResult};

use crate::units::Nanos;
use serde::Serialize;

crate::named! {
    /// Where the workload runs, and the VM's I/O path if in a VM.
    pub enum VirtMode: "mode" {
        /// No VM: the workload runs on the host.
        BareMetal = "bare-metal",
        /// Trap-and-emulate IDE controller in the QEMU process.
        IdeEmulation = "ide-emulation",
        /// virtio-blk-data-plane: one virtqueue, one global mutex, one I/O thread (paper A Baseline).
        Dataplane = "dataplane",
        /// virtio-blk multi-queue: a virtqueue per vCPU, one batching I/O thread (paper A MQ).
        Multiqueue = "multiqueue",
        /// A virtqueue and a pinned I/O thread per vCPU, no global mutex (paper A MT).
        PerVcpuThreads = "per-vcpu-threads",
    }
}

impl VirtMode {
    pub fn is_vm(self) -> bool {
        self != VirtMode::BareMetal
    }
}

crate::named! {
    /// How a userspace I/O thread (the QEMU process) issues requests to the host (QEMU's `aio=`).
    pub enum Aio: "value" {
        /// Linux AIO: the I/O thread submits with `io_submit` itself.
        Native = "native",
        /// QEMU's thread pool (its default, and the only way before Linux AIO support): each
        /// request is handed to a worker thread, which must wake before it makes the system call.
        Threads = "threads",
    }
}

crate::named! {
    /// How the guest tells the host that a request is waiting.
    pub enum Notify: "value" {
        /// The kick is a VM exit (IO_INST) that signals the I/O thread's eventfd.
        Exit = "exit",
        /// A polling thread on a dedicated hardware thread watches the queue: no exit, no wake-up.
        Poll = "poll",
    }
}

crate::named! {
    /// Where the device is emulated.
    pub enum Emulation: "value" {
        /// In the QEMU user process: every system call of the I/O thread crosses user/kernel.
        Userspace = "userspace",
        /// In the hypervisor's own context (a kernel thread): no user/kernel crossings.
        InHypervisor = "in-hypervisor",
    }
}

crate::named! {
    /// How a completion reaches the guest.
    pub enum Completion: "value" {
        /// Interrupt injection: an EXT_INT exit if the vCPU is running, and the EOI is an exit.
        Inject = "inject",
        /// ELI-style direct delivery through a shadow IDT and x2APIC EOI: no exit.
        Exitless = "exitless",
    }
}

/// VM exit reasons, as `perf kvm stat` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ExitReason {
    /// Port I/O: the virtio-pci kick, IDE register accesses.
    IoInst,
    /// An external interrupt (host IPI) arrived while the vCPU ran guest code.
    ExtInt,
    /// x2APIC MSR writes: EOI and inter-processor interrupts (ICR).
    MsrWrite,
    /// The guest went idle.
    Hlt,
}

impl ExitReason {
    pub const ALL: [ExitReason; 4] = [ExitReason::IoInst, ExitReason::ExtInt, ExitReason::MsrWrite, ExitReason::Hlt];
    pub const NAMES: [&'static str; 4] = ["IO_INST", "EXT_INT", "MSR_WRITE", "HLT"];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The three costs of an exit (paper B, Table 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ExitCost {
    /// Exit, handling in the hypervisor, and re-entry: CPU time of the exiting vCPU.
    pub direct: Nanos,
    /// Cache and TLB pollution: extra guest time after the re-entry, on the same vCPU.
    pub indirect: Nanos,
    /// Every other running vCPU of the VM is held up this long (work needing the VM-wide lock).
    pub sync: Nanos,
}

/// The host CPU: hardware threads and the scheduler that time-shares them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuConfig {
    pub cores: u32,
    pub threads_per_core: u32,
    /// CFS's targeted latency (`sysctl_sched_latency`): the period in which each of up to
    /// `latency / min_granularity` runnable threads of a hardware thread runs once; a woken
    /// thread's virtual runtime is placed at most half of it behind the queue's minimum.
    pub latency: Nanos,
    /// CFS's minimum slice (`sysctl_sched_min_granularity`): with more runnable threads than
    /// `latency / min_granularity` each runs this long in turn.
    pub min_granularity: Nanos,
    /// CFS's wake-up granularity (`sysctl_sched_wakeup_granularity`): a woken thread preempts the
    /// running one if its virtual runtime is more than this behind the running one's.
    pub wakeup_granularity: Nanos,
    /// Hardware-thread time to switch from one thread to another.
    pub context_switch: Nanos,
    /// From waking a sleeping thread (eventfd, futex, IPI) until it is runnable.
    pub wakeup: Nanos,
    /// How long a mutex waiter spins before it sleeps.
    pub spin: Nanos,
    /// A user↔kernel round trip of a system call (fio's io_submit / io_getevents).
    pub syscall: Nanos,
    /// The application's own work per I/O (fio: generating the offset, accounting the latency).
    pub app: Nanos,
    /// A burst that starts while another hardware thread of the same core is busy takes this
    /// many times longer (two hyper-threads share one core's execution units).
    pub smt_slowdown: f64,
}

impl CpuConfig {
    pub fn hw_threads(&self) -> u32 {
        self.cores * self.threads_per_core
    }

    /// CFS's `latency`, `min_granularity` and `wakeup_granularity` on `cpus` CPUs: 6 ms, 0.75 ms
    /// and 1 ms times 1 + log2(cpus), cpus counted up to 8 (`SCHED_TUNABLESCALING_LOG`, Linux's
    /// default); 24, 3 and 4 ms on paper A's 8 hardware threads.
    pub fn cfs_tunables(cpus: u32) -> (Nanos, Nanos, Nanos) {
        let factor = 1 + u64::from(cpus.clamp(1, 8).ilog2());
        (Nanos(6_000_000 * factor), Nanos(750_000 * factor), Nanos(1_000_000 * factor))
    }

    /// Checks the host CPU's rules; the error names the key (`host.cpu.*`).
    pub fn validate(&self) -> Result<(), String> {
        for (key, v) in [("cores", self.cores), ("threads_per_core", self.threads_per_core)] {
            if v == 0 {
                return Err(format!("host.cpu.{key}: must be at least 1 (got 0)"));
            }
        }
        // Linux's sysctl bounds (kernel/sysctl.c): 100 us to 1 s for the latency and the minimum
        // granularity, 0 to 1 s for the wake-up granularity.
        for (key, v, least, shown) in [
            ("latency", self.latency, Nanos::from_us(100), "100us"),
            ("min_granularity", self.min_granularity, Nanos::from_us(100), "100us"),
            ("wakeup_granularity", self.wakeup_granularity, Nanos::ZERO, "0"),
        ] {
            if v < least || v > Nanos::from_ms(1_000) {
                return Err(format!(
                    "host.cpu.{key}: {v} is out of range: expected {shown} to 1s (the bounds of Linux's sched_{key}_ns)"
                ));
            }
        }
        if !(1.0..=4.0).contains(&self.smt_slowdown) {
            return Err(format!(
                "host.cpu.smt_slowdown: {} is out of range: expected a factor from 1.0 (none) to 4.0",
                self.smt_slowdown
            ));
        }
        Ok(())
    }
}

impl Default for CpuConfig {
    /// Paper A's host: an Intel i7-2600, 4 cores × 2 hyper-threads (costs: docs/MODEL.md).
    fn default() -> Self {
        let (latency, min_granularity, wakeup_granularity) = CpuConfig::cfs_tunables(8);
        CpuConfig {
            cores: 4,
            threads_per_core: 2,
            latency,
            min_granularity,
            wakeup_granularity,
            context_switch: Nanos(1_500),
            wakeup: Nanos(4_000),
            spin: Nanos(1_000),
            syscall: Nanos(500),
            app: Nanos(400),
            smt_slowdown: 1.6,
        }
    }
}

/// The virtualization layer's parameters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VirtConfig {
    pub mode: VirtMode,
    pub vcpus: u32,
    pub notify: Notify,
    pub emulation: Emulation,
    pub completion: Completion,
    /// Requests a virtqueue holds (in flight between guest and host); IDE holds one.
    pub queue_size: u32,
    /// The guest block layer merges adjacent waiting requests up to this size (0: no merging).
    pub max_merge_bytes: u64,
    /// The guest's `nomerges` (0 all merges, 1 the last-merge hit only, 2 none, not even in
    /// the plug); left out of the configuration (and its hash) at Linux's default 0. On bare
    /// metal the plug is the host kernel's, and `host.nomerges` applies.
    #[serde(skip_serializing_if = "is_zero")]
    pub nomerges: u8,
    /// `multiqueue`: how long the I/O thread collects requests before processing them.
    pub batch_window: Nanos,
    /// Pin vCPU i to hardware thread i (mod the hardware threads it may use).
    pub pin_vcpus: bool,
    /// Pin the I/O threads of `per-vcpu-threads` (I/O thread i to hardware thread i).
    pub pin_iothreads: bool,
    /// Mutex hold time per request added to a virtqueue by the guest.
    pub vq_add: Nanos,
    /// Mutex hold time per request the I/O thread takes from a virtqueue.
    pub vq_pop: Nanos,
    /// The I/O thread's own work per request (descriptor walk, request parsing, AIO set-up and
    /// completion), half when it submits, half when it completes; outside the mutex.
    pub request_cost: Nanos,
    /// Mutex hold time per completion the I/O thread returns to a virtqueue.
    pub vq_push: Nanos,
    /// A user↔kernel crossing of an emulation thread in the QEMU process (and of an exit
    /// emulated there): paid with `emulation = "userspace"`.
    pub userspace_switch: Nanos,
    /// How userspace emulation issues requests to the host.
    pub aio: Aio,
    /// A polling thread notices new work this long after it appears.
    pub poll_detect: Nanos,
    /// `ide-emulation`: register-access exits per request (task file + bus-master DMA start).
    pub ide_submit_exits: u32,
    /// `ide-emulation`: register-access exits per completion (status read, DMA status).
    pub ide_complete_exits: u32,
    /// Costs per exit reason, indexed by [`ExitReason::index`].
    pub exits: [ExitCost; 4],
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

impl VirtConfig {
    /// Checks the VM path's rules; the error names the key (`virt.*`).
    pub fn validate(&self) -> Result<(), String> {
        if self.vcpus == 0 {
            return Err("virt.vcpus: a VM needs at least 1 vCPU (got 0)".into());
        }
        if self.queue_size == 0 {
            return Err("virt.queue_size: must be at least 1 (got 0)".into());
        }
        crate::host::elevator::check_nomerges("virt.nomerges", self.nomerges)?;
        if self.max_merge_bytes < 4096 || self.max_merge_bytes % 1024 != 0 {
            return Err(format!(
                "virt.max_merge: {} bytes: expected a whole number of KiB, at least 4KiB (the guest's max_sectors_kb)",
                self.max_merge_bytes
            ));
        }
        if self.aio == Aio::Threads && self.emulation == Emulation::InHypervisor {
            return Err("virt.aio = \"threads\": QEMU's thread pool is userspace emulation's; with emulation = \"in-hypervisor\" the hypervisor submits requests itself (drop virt.aio)".into());
        }
        Ok(())
    }
}

impl Default for VirtConfig {
    fn default() -> Self {
        let us = |x: f64| Nanos((x * 1000.0) as u64);
        VirtConfig {
            mode: VirtMode::BareMetal,
            vcpus: 8,
            notify: Notify::Exit,
            emulation: Emulation::Userspace,
            completion: Completion::Inject,
            queue_size: 128,
            max_merge_bytes: 128 << 10,
            nomerges: 0,
            batch_window: Nanos(40_000),
            pin_vcpus: false,
            pin_iothreads: true,
            vq_add: us(0.3),
            vq_pop: us(0.3),
            request_cost: us(0.5),
            vq_push: us(0.3),
            userspace_switch: us(1.5),
            aio: Aio::Native,
            poll_detect: us(0.2),
            ide_submit_exits: 8,
            ide_complete_exits: 2,
            exits: [
                ExitCost { direct: us(1.5), indirect: us(1.0), sync: Nanos(0) },
                ExitCost { direct: us(1.2), indirect: us(0.8), sync: Nanos(0) },
                ExitCost { direct: us(1.0), indirect: us(0.5), sync: Nanos(0) },
                ExitCost { direct: us(1.0), indirect: us(0.5), sync: Nanos(0) },
            ],
        }
    }
}

impl VirtConfig {
    pub fn exit_cost(&self, r: ExitReason) -> ExitCost {
        self.exits[r.index()]
    }

    /// Virtqueues of one VM.
    pub fn queues(&self) -> u32 {
        match self.mode {
            VirtMode::BareMetal => 0,
            VirtMode::IdeEmulation | VirtMode::Dataplane => 1,
            VirtMode::Multiqueue | VirtMode::PerVcpuThreads => self.vcpus,
        }
    }

    /// I/O (or polling, or emulation) threads of one VM.
    pub fn iothreads(&self) -> u32 {
        match self.mode {
            VirtMode::BareMetal => 0,
            VirtMode::PerVcpuThreads => self.vcpus,
            _ => 1,
        }
    }
}
