//! Requests from outside the model: what the clients of `flashmux serve`'s exports send.
//!
//! An export is a tenant without a workload. Its one job issues, in arrival order, the requests
//! submitted with [`Simulator::submit_external`], and each completion is handed back, with the
//! request's tag and its simulated completion time, through [`Simulator::take_external_done`].
//! Between them, a request takes the same path as a fio job's: the machine, the host scheduler,
//! the NVMe queues, the FTL and the flash.
//!
//! Whoever drives the model decides what simulated time means: `serve` keeps it equal to the
//! wall-clock time since it started, by calling [`Simulator::advance_to`] with the time now
//! before every submission and whenever the next event is due. The model itself still reads
//! no clock: given the same submissions at the same simulated times, it gives the same
//! completion times.

use super::job::IoReq;
use super::{JobId, Progress, Simulator};
use crate::device::IoOp;
use crate::units::{SimTime, TenantId};

/// One export: a tenant without a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    /// The tenant.
    pub tenant: TenantId,
    /// The tenant's name: the export's name.
    pub name: String,
    /// Where the tenant's region starts on the device, in bytes.
    pub offset: u64,
    /// The size of the tenant's region, in bytes.
    pub size: u64,
}

/// A request to an export. `offset` is within the export (the tenant's region).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExternalIo {
    pub tenant: TenantId,
    pub op: IoOp,
    pub offset: u64,
    pub len: u64,
    /// The submitter's own name for the request, given back when it completes.
    pub tag: u64,
}

/// A completed export request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExternalDone {
    pub tag: u64,
    /// When the application (the NBD client) sees it complete, in simulated time.
    pub at: SimTime,
}

/// Why a request cannot be submitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExternalError {
    #[error("tenant {0} is not an export")]
    NotAnExport(usize),
    #[error("{offset}+{len} bytes is beyond the export's {size} bytes")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    #[error("offset and length must be multiples of the {0}-byte sector")]
    Misaligned(u64),
    #[error("the run has finished")]
    Finished,
}

impl Simulator {
    /// The scenario's exports, in tenant order.
    pub fn exports(&self) -> Vec<Export> {
        self.scenario
            .tenants
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is_export())
            .map(|(i, t)| Export { tenant: TenantId(i as u16), name: t.name.clone(), offset: t.region.0, size: t.region.1 })
            .collect()
    }

    /// When the next event is due; `None` once the run has finished.
    pub fn next_event_time(&self) -> Option<SimTime> {
        if self.finished.is_some() {
            return None;
        }
        self.events.peek_time()
    }

    /// Processes every event due at or before `t`, then moves the clock to `t` (if it is later).
    pub fn advance_to(&mut self, t: SimTime) -> Progress {
        while let Some(due) = self.next_event_time() {
            if due > t {
                break;
            }
            if let Progress::Finished(r) = self.run_for(1) {
                return Progress::Finished(r);
            }
        }
        if let Some(r) = self.finished {
            return Progress::Finished(r);
        }
        if t > self.now {
            self.now = t;
        }
        Progress::Running
    }

    /// An export's client sends `io` now (at [`Simulator::now`]): it enters the export's job and
    /// is issued at once.
    pub fn submit_external(&mut self, io: ExternalIo) -> Result<(), ExternalError> {
        if self.finished.is_some() {
            return Err(ExternalError::Finished);
        }
        let tenant = self.scenario.tenants.get(io.tenant.index()).filter(|t| t.is_export()).ok_or(ExternalError::NotAnExport(io.tenant.index()))?;
        let (base, size) = tenant.region;
        if io.op != IoOp::Flush {
            let sector = self.device.sector_bytes();
            if io.offset % sector != 0 || io.len % sector != 0 || io.len == 0 {
                return Err(ExternalError::Misaligned(sector));
            }
            if io.offset.checked_add(io.len).is_none_or(|end| end > size) {
                return Err(ExternalError::OutOfRange { offset: io.offset, len: io.len, size });
            }
        }
        let j = self.work.tenant_jobs[io.tenant.index()][0];
        let (offset, len) = if io.op == IoOp::Flush { (0, 0) } else { (base + io.offset, io.len) };
        self.work.jobs[j].push_external(IoReq { op: io.op, offset, len, tag: io.tag, call: None, dspec: 0 });
        self.try_issue(JobId(j as u32));
        self.drain_machine();
        Ok(())
    }

    /// Ends a served run: `serve` calls this once every request it took has been answered.
    pub fn stop_serving(&mut self) {
        if self.finished.is_none() {
            self.finished = Some(crate::metrics::StopReason::ServerStopped);
        }
    }

    /// Moves the export requests completed so far into `out`, in completion order.
    pub fn take_external_done(&mut self, out: &mut Vec<ExternalDone>) {
        out.append(&mut self.external_done);
    }

    /// Flash units garbage collection has moved for `tenant`'s data so far (0 without an SSD).
    pub fn gc_units_moved(&self, tenant: TenantId) -> u64 {
        self.device.tenant_counters(tenant).gc_units_moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Scenario;
    use crate::units::Nanos;
    use std::path::Path;

    const SCENARIO: &str = r#"
        seed = 7
        [device]
        preset = "tlc-nvme"
        capacity = "16GiB"
        [[tenant]]
        name = "vm1"
        region = { offset = "0", size = "8GiB" }
        [[tenant]]
        name = "vm2"
        region = { offset = "8GiB", size = "8GiB" }
    "#;

    fn sim() -> Simulator {
        Simulator::new(Scenario::serve_from_toml(SCENARIO, "<test>", Path::new(".")).unwrap()).unwrap()
    }

    fn io(tenant: usize, op: IoOp, offset: u64, len: u64, tag: u64) -> ExternalIo {
        ExternalIo { tenant: TenantId(tenant as u16), op, offset, len, tag }
    }

    /// Drives the model as `serve` does, with submissions at fixed simulated times; returns each
    /// tag's completion time.
    fn replay(subs: &[(u64, ExternalIo)]) -> Vec<(u64, u64)> {
        let mut s = sim();
        let mut done = Vec::new();
        for &(at, r) in subs {
            assert_eq!(s.advance_to(SimTime::ZERO + Nanos(at)), Progress::Running);
            s.submit_external(r).unwrap();
            s.take_external_done(&mut done);
        }
        let end = SimTime::ZERO + Nanos(subs.last().unwrap().0 + 1_000_000_000);
        s.advance_to(end);
        s.take_external_done(&mut done);
        s.check_invariants();
        done.iter().map(|d| (d.tag, d.at.0)).collect()
    }

    #[test]
    fn an_export_is_a_tenant_without_a_workload() {
        let s = sim();
        assert_eq!(
            s.exports(),
            [
                Export { tenant: TenantId(0), name: "vm1".into(), offset: 0, size: 8 << 30 },
                Export { tenant: TenantId(1), name: "vm2".into(), offset: 8 << 30, size: 8 << 30 }
            ]
        );
        let err = Scenario::from_toml(SCENARIO, "<test>", Path::new(".")).unwrap_err().to_string();
        assert!(err.contains("tenant[0] (vm1): no workload"), "{err}");
        let fio_only = r#"
            [[tenant]]
            name = "a"
            fio = "[j]\nrw=read\nsize=1M"
        "#;
        let err = Scenario::serve_from_toml(fio_only, "<test>", Path::new(".")).unwrap_err().to_string();
        assert!(err.contains("no tenant to export"), "{err}");
    }

    #[test]
    fn every_request_completes_once_after_it_was_sent_and_the_model_is_deterministic() {
        let mut subs = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for tag in 0..400u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let op = match x % 5 {
                0 | 1 => IoOp::Write,
                2 | 3 => IoOp::Read,
                _ if tag % 50 == 0 => IoOp::Flush,
                _ => IoOp::Trim,
            };
            let offset = (x >> 8) % (1 << 21) * 4096;
            subs.push((tag * 7_000, io((tag % 2) as usize, op, offset, 4096 << (x % 3), tag)));
        }
        let a = replay(&subs);
        assert_eq!(a.len(), subs.len());
        let mut tags: Vec<u64> = a.iter().map(|d| d.0).collect();
        tags.sort_unstable();
        assert_eq!(tags, (0..400).collect::<Vec<_>>());
        for &(tag, at) in &a {
            let sent = subs[tag as usize].0;
            // At least the submission and completion overheads, and a flash access for data.
            assert!(at > sent, "tag {tag} completed at {at}, sent at {sent}");
        }
        assert_eq!(a, replay(&subs), "same submissions, same completion times");
    }

    #[test]
    fn a_read_of_data_on_flash_costs_a_flash_read() {
        // Written, then pushed out of the drive's write buffer by 4 MiB more, then read.
        let mut s = sim();
        s.advance_to(SimTime::ZERO);
        s.submit_external(io(0, IoOp::Write, 1 << 30, 4096, 0)).unwrap();
        for i in 0..64 {
            s.submit_external(io(0, IoOp::Write, i << 16, 1 << 16, i + 1)).unwrap();
        }
        s.advance_to(SimTime::ZERO + Nanos(100_000_000));
        let mut done = Vec::new();
        s.take_external_done(&mut done);
        assert_eq!(done.len(), 65);
        s.submit_external(io(0, IoOp::Read, 1 << 30, 4096, 100)).unwrap();
        let sent = s.now();
        s.advance_to(sent + Nanos(50_000_000));
        s.take_external_done(&mut done);
        assert_eq!(done[65].tag, 100);
        let read = done[65].at.since(sent).0;
        assert!(read > 20_000, "a 4 KiB flash read took {read} ns");
    }

    #[test]
    fn bad_requests_are_refused_without_touching_the_model() {
        let mut s = sim();
        s.advance_to(SimTime::ZERO);
        assert_eq!(s.submit_external(io(2, IoOp::Read, 0, 4096, 1)), Err(ExternalError::NotAnExport(2)));
        assert!(matches!(s.submit_external(io(0, IoOp::Read, (8 << 30) - 4096, 8192, 1)), Err(ExternalError::OutOfRange { .. })));
        assert!(matches!(s.submit_external(io(0, IoOp::Write, u64::MAX - 511, 512, 1)), Err(ExternalError::OutOfRange { .. })));
        assert_eq!(s.submit_external(io(0, IoOp::Write, 100, 4096, 1)), Err(ExternalError::Misaligned(512)));
        assert_eq!(s.submit_external(io(0, IoOp::Write, 0, 0, 1)), Err(ExternalError::Misaligned(512)));
        s.advance_to(SimTime::ZERO + Nanos(10_000_000));
        let mut done = Vec::new();
        s.take_external_done(&mut done);
        assert!(done.is_empty());
        s.check_invariants();
    }
}
