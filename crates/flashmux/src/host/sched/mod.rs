//! Host I/O schedulers, behind one small trait, picked by name in the config.

mod none;

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
    pub bytes: u64,
}

/// A host I/O scheduler: it holds requests between their submission and their dispatch to the
/// device, and may hold them back (budgets, time slices).
pub trait Scheduler {
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
    fn check_invariants(&self) {}
}

/// The scheduler policies a config can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulerKind {
    /// First in, first out, no reordering (Linux's `none`).
    None,
}

impl SchedulerKind {
    pub const NAMES: [&'static str; 1] = ["none"];

    pub fn from_name(name: &str) -> Option<SchedulerKind> {
        match name {
            "none" | "noop" | "fifo" => Some(SchedulerKind::None),
            _ => None,
        }
    }

    pub fn build(self) -> Box<dyn Scheduler> {
        match self {
            SchedulerKind::None => Box::new(Fifo::default()),
        }
    }
}
