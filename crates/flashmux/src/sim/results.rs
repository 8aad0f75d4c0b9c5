//! The run's results, collected from every component when it ends: each job's and tenant's
//! statistics, the device's report, fairness over the tenants' common measured interval, the
//! warnings, and the counters the timeline samples each interval.

use super::overlap::Window;
use super::{timeline, Simulator, KEEP_ROWS};
use crate::device::TenantDeviceReport;
use crate::metrics::{DeviceResult, Fairness, JobResult, ReplayStats, RunResults, StopReason, TenantResult};
use crate::units::{SimTime, TenantId};

impl Simulator {
    /// Ends the run and collects its results.
    pub fn finish(mut self) -> RunResults {
        let reason = self.finished.unwrap_or(StopReason::Interrupted);
        // The last check, unless the user stopped the run: a whole-drive check takes seconds on
        // a large drive, and they asked to stop.
        if self.check_every.is_some() && reason != StopReason::Interrupted {
            self.check_invariants();
        }
        let now = self.now;
        for j in &mut self.work.jobs {
            j.stop(now);
        }
        let snap = self.snapshots();
        self.timeline.close_partial(now, &snap, &self.overlap.periods(now));
        let jobs: Vec<JobResult> = self.work.jobs.iter_mut().map(|j| j.take_result(&self.scenario)).collect();
        let mut replays: Vec<Option<ReplayStats>> = self.work.jobs.iter_mut().map(|j| j.take_replay()).collect();
        let tenants = self.tenant_results(&jobs, &mut replays);
        let (jobs, mut tenants) = self.apply_group_reporting(jobs, tenants);
        let window = self.overlap.finish(now);
        let fairness = measure_fairness(&window, &mut tenants);
        let device = self.device_result(now);
        let mut warnings = self.run_warnings(reason, &device, &tenants);
        let interval = self.timeline.interval();
        let filebench = self.filebench_results();
        for f in filebench.iter().filter(|f| f.enospc > 0) {
            warnings.push(format!(
                "tenant '{}': its filesystem filled up (ENOSPC): {} Filebench thread(s) stopped, as Filebench stops a \
                 thread whose flowop fails; a larger region or fewer or smaller files keeps them running",
                self.scenario.tenants[f.tenant].name, f.enospc
            ));
        }
        let (timeline, dropped) = self.timeline.into_rows();
        if dropped > 0 {
            warnings.push(format!(
                "the timeline kept its first {KEEP_ROWS} rows in memory and dropped {dropped} more: \
                 stream it (as `flashmux run` does into timeline.csv) or lengthen [output] timeline_interval"
            ));
        }
        RunResults {
            version: crate::VERSION.to_string(),
            seed: self.scenario.seed,
            config_hash: self.scenario.config_hash(),
            scenario: self.scenario.name.clone(),
            global_options: self.scenario.global_options.clone(),
            sim_time_ns: now.0,
            stop_reason: reason,
            events: self.processed,
            requests_issued: self.issued,
            requests_completed: self.completed,
            requests_in_flight: self.issued - self.completed,
            jobs,
            tenants,
            device,
            timeline_interval_ns: interval.0,
            virt: self.machine.as_ref().map(|m| m.result(now)),
            kernel: self.kernels.as_ref().map(|k| k.results()),
            host_ftl: self.hftl.as_ref().map(|h| h.report()),
            filebench,
            timeline,
            fairness,
            warnings,
            serve: None,
        }
    }

    /// Each tenant's results: its jobs' statistics summed, and what the device and the block
    /// layer's scheduler did for it.
    fn tenant_results(&self, jobs: &[JobResult], replays: &mut [Option<ReplayStats>]) -> Vec<TenantResult> {
        self.scenario
            .tenants
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut io = crate::metrics::IoStats::default();
                let mut runtime = 0;
                for &j in &self.work.tenant_jobs[i] {
                    io.merge(&jobs[j].io);
                    runtime = runtime.max(jobs[j].runtime_ns);
                }
                let TenantDeviceReport { gc_units_moved, gc_units_caused, gc_erases, map, device: dev, zones } =
                    self.device.tenant_report(TenantId(i as u16));
                TenantResult {
                    name: t.name.clone(),
                    index: i,
                    jobs: self.work.tenant_jobs[i].clone(),
                    region: t.region,
                    weight: t.weight,
                    share: None,
                    runtime_ns: runtime,
                    io,
                    gc_units_moved,
                    gc_units_caused,
                    gc_erases,
                    map,
                    device: dev,
                    sched: self.block.tenant_stats(i),
                    merges: self.block.merge_config().1.then(|| self.block.merge_stats(i)),
                    replay: self.work.tenant_jobs[i].iter().find_map(|&j| replays[j].take()),
                    zones,
                }
            })
            .collect()
    }

    /// What the user should know of the run as a whole (the scenario's own warnings first).
    fn run_warnings(&self, reason: StopReason, device: &DeviceResult, tenants: &[TenantResult]) -> Vec<String> {
        let mut warnings: Vec<String> = self.scenario.warnings.clone();
        let host_writes = device.ftl.host_units_programmed;
        if self.device.has_flash() {
            if self.scenario.precondition.state.ages() && host_writes > 0 && device.ftl.gc_runs == 0 {
                warnings.push(format!(
                    "garbage collection never ran during the measured run although the drive was aged ({} units written): \
                     the run may be too short to fill the free blocks left after preconditioning",
                    host_writes
                ));
            }
        }
        warnings.extend(self.block.warnings());
        for t in tenants {
            if let Some(r) = &t.replay {
                warnings.extend(crate::metrics::replay_warnings(&t.name, r));
            }
        }
        if reason == StopReason::Interrupted {
            warnings.push("the run was interrupted: results are partial".to_string());
        }
        warnings
    }

    /// fio's `group_reporting` ([`crate::report::group_reporting`]); a tenant's `jobs` then
    /// point at the merged entries. Tenant statistics are not affected.
    fn apply_group_reporting(
        &self,
        clones: Vec<JobResult>,
        mut tenants: Vec<TenantResult>,
    ) -> (Vec<JobResult>, Vec<TenantResult>) {
        let keys: Vec<_> =
            self.work.jobs.iter().map(|j| (self.scenario.tenants[j.tenant.index()].domain, j.groupid)).collect();
        let grouped: Vec<bool> = self.work.jobs.iter().map(|j| j.spec.group_reporting).collect();
        let (out, entry_of) = crate::report::group_reporting(clones, &keys, &grouped);
        for t in &mut tenants {
            let mut entries: Vec<usize> = t.jobs.iter().map(|&j| entry_of[j]).collect();
            entries.dedup();
            t.jobs = entries;
        }
        (out, tenants)
    }

    fn device_result(&self, now: SimTime) -> DeviceResult {
        self.device.report(now, &self.scenario.device.preset, &self.precondition)
    }

    /// Every tenant's device-side counters now, for the timeline.
    pub(super) fn snapshots(&self) -> Vec<timeline::Snapshot> {
        (0..self.scenario.tenants.len())
            .map(|t| {
                let sched = self.block.tenant_stats(t);
                let slice_scale = sched.map_or(1.0, |s| s.scale);
                let gc_charged_ns = sched.and_then(|s| s.gc_charged_ns);
                let c = self.device.tenant_counters(TenantId(t as u16));
                timeline::Snapshot {
                    totals: timeline::Counters {
                        gc_moved: c.gc_units_moved,
                        map_lookups: c.map_lookups,
                        map_misses: c.map_misses,
                        zone_resets: c.zone_resets,
                        zone_errors: c.zone_errors,
                    },
                    cmt_pages: c.cmt_pages,
                    slice_scale,
                    gc_charged_ns,
                }
            })
            .collect()
    }
}

/// Each tenant's bandwidth share over the common measured interval, and the run's fairness.
fn measure_fairness(window: &Window, tenants: &mut [TenantResult]) -> Fairness {
    let weights: Vec<u32> = tenants.iter().map(|t| t.weight).collect();
    let secs = window.common.map_or(0.0, |(s, e)| e.since(s).as_secs_f64());
    let bw: Vec<Option<f64>> = window.bytes.iter().map(|b| b.map(|b| b as f64 / secs)).collect();
    let shares = crate::metrics::shares(&bw, &weights);
    for (t, s) in tenants.iter_mut().zip(&shares) {
        t.share = *s;
    }
    let counted = window.periods.iter().flatten().count();
    Fairness::of_shares(&shares, &weights, window.common.map(|(s, e)| (s.0, e.0)), counted)
}
