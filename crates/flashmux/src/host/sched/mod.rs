//! Host I/O schedulers, behind one small trait, picked by name in the config.

mod budget;
pub mod budget_cost;
mod cfq;
mod deadline;
mod mots;
mod none;

pub use budget::{Budget, BudgetParams, HwabcParams};
pub use cfq::{Cfq, CfqParams};
pub use deadline::{Deadline, DeadlineParams};
pub use mots::{Mots, MotsParams};
pub use none::Fifo;

use crate::device::IoOp;
use crate::units::{Nanos, ReqId, SimTime, TenantId};
use serde::Serialize;

/// What a scheduler knows of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedReq {
    pub id: ReqId,
    pub tenant: TenantId,
    pub op: IoOp,
    /// Byte offset in the device's logical space.
    pub offset: u64,
    pub bytes: u64,
    /// On a drive with an [`FtlView`] (open-channel or FDP): a write that overwrites mapped
    /// data, as the view says when the request reaches the scheduler (false otherwise).
    pub update: bool,
    /// A write's data placement directive (an FDP placement identifier or a stream; 0: none).
    /// Requests merge only with requests of the same one, as Linux merges only bios of the
    /// same write hint.
    pub dspec: u16,
}

pub use crate::device::{FtlView, GcSignal};

/// What a scheduler did for one tenant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SchedTenantStats {
    /// Time slices (turns) the tenant had, counted when each ends.
    pub turns: u64,
    /// Device time charged to it.
    pub service_ns: u64,
    /// Requests dispatched.
    pub dispatched: u64,
    /// The slice multiplier `mcfq`'s MoTS applies (1 otherwise).
    pub scale: f64,
    /// hWA-BC: GC cost charged to the tenant by its judged contribution, ns (`None` under
    /// policies that do not charge GC separately).
    pub gc_charged_ns: Option<f64>,
}

/// A host I/O scheduler: it holds requests between their submission and their dispatch to the
/// device, and may hold them back (budgets, time slices). `Send`: under `flashmux serve` the whole model moves to the thread that owns it.
pub trait Scheduler: Send {
    fn name(&self) -> &'static str;
    /// A request arrives from a tenant.
    fn enqueue(&mut self, now: SimTime, r: SchedReq);
    /// The next request to send to the device now, if the policy has one to send.
    fn dispatch(&mut self, now: SimTime) -> Option<SchedReq>;
    /// A request `dispatch` returned could not be sent (its device queue is full): it goes first
    /// next time.
    fn requeue(&mut self, r: SchedReq);
    /// The device completed a request after `service` time in the device.
    fn complete(&mut self, now: SimTime, r: &SchedReq, service: Nanos);
    /// When a policy holding requests back wants `dispatch` asked again, if nothing else happens.
    fn next_wakeup(&self) -> Option<SimTime> {
        None
    }
    /// Requests waiting in the scheduler.
    fn queued(&self) -> usize;
    /// Whether the policy is an elevator that lets the block layer merge waiting requests
    /// (`host/elevator.rs`): every policy but `none`.
    fn merges(&self) -> bool {
        true
    }
    /// The block layer merged another request into the waiting request `r.id`: it now covers
    /// `r.offset .. r.offset + r.bytes` (and `r.update` says whether any part overwrites mapped
    /// data). It keeps its place in the queue.
    fn grow(&mut self, r: &SchedReq);
    /// What the policy did for tenant `t`; `None` for policies without per-tenant state.
    fn tenant_stats(&self, _t: usize) -> Option<SchedTenantStats> {
        None
    }
    fn check_invariants(&self) {}
    /// What the scheduler could not do as configured, for the run's warnings (said at the end:
    /// e.g. hWA-BC never learning GC-free prices).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
    /// On a drive with an [`FtlView`] (open-channel or FDP), called before each round of
    /// `dispatch` calls and before every `complete`: what the host sees of the FTL now.
    fn observe(&mut self, _now: SimTime, _ftl: &dyn FtlView) {}
}

/// The scheduler policies a config can name, with their parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulerKind {
    /// First in, first out, no reordering (Linux's `none`).
    None,
    /// Linux's `mq-deadline`: batches in offset order, deadlines, reads first.
    MqDeadline(DeadlineParams),
    /// Linux CFQ with one group per tenant.
    Cfq(CfqParams),
    /// CFQ with paper D's Manager of Time Slice.
    Mcfq(CfqParams, MotsParams),
    /// Budgets priced by BCQ's regression (paper E's Fair); open-channel and FDP drives only.
    Fair(BudgetParams),
    /// Fair's budgets at no-GC prices, with GC cost charged by contribution (paper E's hWA-BC;
    /// `hwabc-oracle` with the ledger's true contributions); open-channel and FDP drives only.
    Hwabc(BudgetParams, HwabcParams),
}

impl SchedulerKind {
    pub const NAMES: [&'static str; 7] = ["none", "mq-deadline", "cfq", "mcfq", "fair", "hwabc", "hwabc-oracle"];

    /// The policy a name selects, with default parameters.
    pub fn from_name(name: &str) -> Option<SchedulerKind> {
        match name {
            "none" | "noop" | "fifo" => Some(SchedulerKind::None),
            "mq-deadline" | "deadline" => Some(SchedulerKind::MqDeadline(DeadlineParams::default())),
            "cfq" => Some(SchedulerKind::Cfq(CfqParams::default())),
            "mcfq" => Some(SchedulerKind::Mcfq(CfqParams::default(), MotsParams::default())),
            "fair" => Some(SchedulerKind::Fair(BudgetParams::default())),
            "hwabc" | "hwabc-oracle" => {
                let (a, b) = HwabcParams::PAPER;
                let hw = HwabcParams { oracle: name == "hwabc-oracle", ..HwabcParams::new(a, b) };
                Some(SchedulerKind::Hwabc(BudgetParams::default(), hw))
            }
            _ => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            SchedulerKind::None => "none",
            SchedulerKind::MqDeadline(_) => "mq-deadline",
            SchedulerKind::Cfq(_) => "cfq",
            SchedulerKind::Mcfq(..) => "mcfq",
            SchedulerKind::Fair(_) => "fair",
            SchedulerKind::Hwabc(_, h) => h.name(),
        }
    }

    /// Checks the policy's parameters; the error names the key (`host.cfq.*`, `host.fair.*`, ...).
    pub fn validate(&self) -> Result<(), String> {
        let budget = |section: &str, p: &BudgetParams| -> Result<(), String> {
            if p.period < Nanos::from_us(100) {
                return Err(format!(
                    "{section}.period: {} is too short: expected at least 100us (a refill per request or more)",
                    p.period
                ));
            }
            p.cost.validate().map_err(|e| format!("{section}: {e}"))
        };
        match self {
            SchedulerKind::None => Ok(()),
            SchedulerKind::MqDeadline(p) => p.validate(),
            SchedulerKind::Cfq(p) => p.validate(),
            SchedulerKind::Mcfq(p, m) => p.validate().and_then(|()| m.validate()),
            SchedulerKind::Fair(p) => budget("host.fair", p),
            SchedulerKind::Hwabc(p, h) => {
                budget("host.hwabc", p).and_then(|()| h.validate().map_err(|e| format!("host.hwabc.{e}")))
            }
        }
    }

    /// Whether the policy must see the FTL: it runs only on a drive with an [`FtlView`].
    pub fn needs_host_ftl(&self) -> bool {
        matches!(self, SchedulerKind::Fair(_) | SchedulerKind::Hwabc(..))
    }

    /// The scheduler for tenants of these weights in front of a host queue of `depth`.
    pub fn build(&self, weights: &[u32], depth: u32) -> Box<dyn Scheduler> {
        match *self {
            SchedulerKind::None => Box::new(Fifo::default()),
            SchedulerKind::MqDeadline(p) => Box::new(Deadline::new(p)),
            SchedulerKind::Cfq(p) => Box::new(Cfq::new(p, weights, depth, None)),
            SchedulerKind::Mcfq(p, m) => Box::new(Cfq::new(p, weights, depth, Some(Mots::new(m, weights)))),
            SchedulerKind::Fair(p) => Box::new(Budget::new(p, None, weights)),
            SchedulerKind::Hwabc(p, h) => Box::new(Budget::new(p, Some(h), weights)),
        }
    }
}
