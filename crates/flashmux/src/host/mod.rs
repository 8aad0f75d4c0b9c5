//! The host kernel's block layer: tenants' requests wait in it for a tag ([`BlockLayer`]) and
//! its I/O scheduler ([`sched`]) decides what is dispatched to the device and when.

pub mod block;
pub mod elevator;
pub mod sched;
pub mod zoned_ftl;

pub use block::{BlockLayer, BlockReq};
pub use elevator::{MergeConfig, MergeStats};
use crate::units::Nanos;
use serde::Serialize;

pub use sched::{BudgetParams, CfqParams, DeadlineParams, HwabcParams, FtlView, GcSignal, MotsParams, SchedTenantStats, Scheduler, SchedulerKind, SchedReq};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostConfig {
    /// Requests the host keeps outstanding at the device, over all its queues (like blk-mq's tag
    /// set): beyond it, requests wait in the scheduler.
    pub queue_depth: u32,
    pub scheduler: SchedulerKind,
    /// The elevator's merging of waiting requests (`nomerges`, `max_sectors_kb`); left out of
    /// the configuration (and its hash) at Linux's defaults.
    #[serde(skip_serializing_if = "MergeConfig::is_default")]
    pub merge: MergeConfig,
    /// Kernel time from the application's submission until the request is queued (fio's slat):
    /// system call, block layer, driver.
    pub submit_overhead: Nanos,
    /// Time from the device's completion entry to the application seeing it: interrupt,
    /// completion path, wake-up.
    pub completion_overhead: Nanos,
    /// The host CPU model (`[host.cpu]`): with it, the overheads above are CPU time of the
    /// submitting and completing threads, which contend for hardware threads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<crate::virt::CpuConfig>,
    /// A host FTL on a zoned drive (`[host.zoned_ftl]`, `host/zoned_ftl.rs`): the tenants see
    /// a conventional block space, written log-structured into the zones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zoned_ftl: Option<ZonedFtlParams>,
}

/// `[host.zoned_ftl]`: the host FTL's spare zones and GC threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ZonedFtlParams {
    pub spare_zones: u32,
    pub gc_threshold_zones: u32,
    /// A log per tenant (`per_tenant = true`: the tenants' count), else 0: one shared log.
    pub tenant_logs: u32,
}

impl HostConfig {
    /// Checks the host's rules; the error names the key (`host.*`).
    pub fn validate(&self) -> Result<(), String> {
        if self.queue_depth == 0 {
            return Err("host.queue_depth: must be at least 1 (got 0)".into());
        }
        self.scheduler.validate()?;
        self.merge.validate()?;
        self.cpu.as_ref().map_or(Ok(()), |c| c.validate())
    }
}
