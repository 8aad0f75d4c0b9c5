//! The tenants' jobs and the order they run in: every job clone of every tenant, which tenant
//! owns which, and each job file's phases.
//!
//! fio runs the sections of one job file in phases: a section with `stonewall` waits until every
//! section before it has finished, and `new_group`/`stonewall` start a new reporting group
//! (`workload::fio::phases`, `groups`). The job file of each tenant is a *domain*; domains run
//! side by side, each through its own phases. A phase's clones (`numjobs`) all start when it
//! begins, each after its own `startdelay`; the domain's next phase begins when the last of
//! them is done.

use super::job::{JobRt, JobState};
use super::SimError;
use crate::config::Scenario;
use crate::units::{JobId, SimTime, TenantId};
use crate::workload::fio::{ZbdDevice, ZonedDisk};

pub(super) struct Workloads {
    /// Every job clone, in tenant order, then section order, then clone order.
    pub jobs: Vec<JobRt>,
    /// Each tenant's clones (indices into `jobs`).
    pub tenant_jobs: Vec<Vec<usize>>,
    /// Per domain (indexed by domain id): its phases' clones, and the phase it is in.
    phases: Vec<(Vec<Vec<usize>>, usize)>,
}

/// What a job's end led to.
pub(super) struct JobEnded {
    /// Its tenant has no job left.
    pub tenant_done: bool,
    /// Clones of the phase it let begin, each with when it starts.
    pub starting: Vec<(JobId, SimTime)>,
    /// No job of any tenant is left.
    pub all_done: bool,
}

impl Workloads {
    /// Every tenant's job clones, with their phases and reporting groups; `sector` is the
    /// device's (offsets and sizes are aligned to it). On a zoned drive (`zoned`), each tenant's
    /// fio jobs share one host view of its zones, as the jobs of one fio process do
    /// (`zonemode=zbd`); tenants are separate processes, each with its own.
    pub fn build(scenario: &Scenario, sector: u64, zoned: Option<ZonedDisk>) -> Result<Workloads, SimError> {
        let mut w =
            Workloads { jobs: Vec::new(), tenant_jobs: vec![Vec::new(); scenario.tenants.len()], phases: Vec::new() };
        let mut domains: Vec<Vec<usize>> = Vec::new();
        for (t, tenant) in scenario.tenants.iter().enumerate() {
            let zbd = zoned.map(ZbdDevice::new).transpose().map_err(SimError::Config)?;
            for job in tenant.jobs() {
                let first = w.jobs.len();
                for clone in 0..job.numjobs {
                    let rt = JobRt::new(TenantId(t as u16), job, clone, tenant, sector, scenario.seed, zbd.as_ref())?;
                    w.tenant_jobs[t].push(w.jobs.len());
                    w.jobs.push(rt);
                }
                if domains.len() <= tenant.domain {
                    domains.resize(tenant.domain + 1, Vec::new());
                }
                // One entry per job section: its clones share its phase.
                domains[tenant.domain].push(first);
            }
        }
        for members in domains {
            w.add_domain(&members);
        }
        Ok(w)
    }

    /// A domain whose sections' first clones are `members`: its phases and reporting groups.
    fn add_domain(&mut self, members: &[usize]) {
        let clones = |jobs: &[JobRt], s: usize| members[s]..members[s] + jobs[members[s]].spec.numjobs as usize;
        let specs: Vec<_> = members.iter().map(|&j| self.jobs[j].spec.clone()).collect();
        let phases: Vec<Vec<usize>> = crate::workload::fio::phases(&specs)
            .into_iter()
            .map(|sections| sections.into_iter().flat_map(|s| clones(&self.jobs, s)).collect())
            .collect();
        for (g, group) in crate::workload::fio::groups(&specs).iter().enumerate() {
            for &s in group {
                for j in clones(&self.jobs, s) {
                    self.jobs[j].groupid = g as u32;
                }
            }
        }
        self.phases.push((phases, 0));
    }

    /// Domains, each to be started at the beginning.
    pub fn domains(&self) -> usize {
        self.phases.len()
    }

    /// `domain`'s current phase begins at `now`: its clones are starting, each at the time
    /// returned (after its `startdelay`). Nothing if the domain has run all its phases.
    pub fn start_phase(&mut self, domain: usize, now: SimTime) -> Vec<(JobId, SimTime)> {
        let (phases, current) = &self.phases[domain];
        let Some(phase) = phases.get(*current) else { return Vec::new() };
        let mut starting = Vec::with_capacity(phase.len());
        for &j in phase {
            let job = &mut self.jobs[j];
            debug_assert_eq!(job.state, JobState::Pending, "a clone starts once");
            job.state = JobState::Starting;
            starting.push((JobId(j as u32), now + job.start_delay));
        }
        starting
    }

    /// Job `j` (which may finish) is done at `now`, in `scenario`: what follows.
    pub fn finish(&mut self, j: JobId, now: SimTime, scenario: &Scenario) -> JobEnded {
        let job = &mut self.jobs[j.index()];
        assert!(job.can_finish(), "job {} finished while it may not", j.0);
        job.finish(now);
        let t = job.tenant.index();
        let done = |k: &usize| self.jobs[*k].state == JobState::Done;
        let tenant_done = self.tenant_jobs[t].iter().all(done);
        let d = scenario.tenants[t].domain;
        let (phases, current) = &self.phases[d];
        let starting = if phases[*current].iter().all(done) {
            self.phases[d].1 += 1;
            self.start_phase(d, now)
        } else {
            Vec::new()
        };
        let all_done = self.jobs.iter().all(|k| k.state == JobState::Done);
        JobEnded { tenant_done, starting, all_done }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Nanos;
    use std::path::Path;

    /// Tenant a: sections x (numjobs=2) and y, then z after a stonewall; tenant b: one job.
    fn two_domains() -> (Scenario, Workloads) {
        let text = r#"
[device]
preset = "null"
[[tenant]]
name = "a"
fio = """
[x]
rw=read
numjobs=2
startdelay=5ms
[y]
rw=write
[z]
stonewall
rw=randread
"""
[[tenant]]
name = "b"
fio = "[w]\nrw=randwrite\n"
"#;
        let s = Scenario::from_toml(text, "<test>", Path::new(".")).unwrap();
        let w = Workloads::build(&s, 512, None).unwrap();
        (s, w)
    }

    fn at_ms(ms: u64) -> SimTime {
        SimTime::ZERO + Nanos::from_ms(ms)
    }

    #[test]
    fn clones_phases_and_groups_follow_the_job_files() {
        let (_, w) = two_domains();
        assert_eq!(w.jobs.len(), 5, "x twice, y, z, w");
        assert_eq!(w.tenant_jobs, [vec![0, 1, 2, 3], vec![4]]);
        assert_eq!(w.domains(), 2);
        assert_eq!(w.jobs.iter().map(|j| j.groupid).collect::<Vec<_>>(), [0, 0, 0, 1, 0], "stonewall opens group 1");
    }

    #[test]
    fn a_phase_starts_its_clones_after_their_startdelay() {
        let (_, mut w) = two_domains();
        let started = w.start_phase(0, at_ms(2));
        assert_eq!(started, [(JobId(0), at_ms(7)), (JobId(1), at_ms(7)), (JobId(2), at_ms(2))]);
        assert!(w.jobs[..3].iter().all(|j| j.state == JobState::Starting));
        assert_eq!(w.jobs[3].state, JobState::Pending, "z waits behind the stonewall");
    }

    #[test]
    fn the_next_phase_begins_when_the_last_clone_of_this_one_ends() {
        let (s, mut w) = two_domains();
        w.start_phase(0, SimTime::ZERO);
        w.start_phase(1, SimTime::ZERO);
        for j in [0, 1] {
            w.jobs[j].state = JobState::Draining;
            let e = w.finish(JobId(j as u32), at_ms(10), &s);
            assert!(e.starting.is_empty() && !e.tenant_done && !e.all_done);
        }
        w.jobs[2].state = JobState::Draining;
        let e = w.finish(JobId(2), at_ms(20), &s);
        assert_eq!(e.starting, [(JobId(3), at_ms(20))], "z begins when y, the phase's last, ends");
        assert!(!e.tenant_done);
        w.jobs[3].state = JobState::Draining;
        let e = w.finish(JobId(3), at_ms(30), &s);
        assert!(e.tenant_done && e.starting.is_empty() && !e.all_done, "tenant b still runs");
        w.jobs[4].state = JobState::Draining;
        assert!(w.finish(JobId(4), at_ms(40), &s).all_done);
    }
}
