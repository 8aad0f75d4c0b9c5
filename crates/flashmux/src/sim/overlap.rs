//! The tenants' common measured interval, over which their bandwidth shares are compared: from
//! the moment the last tenant with demand begins its measured period (its first job past
//! `ramp_time`) to the moment the first one ends (its last job done, or the run's end), and the
//! bytes each tenant completed within it.
//!
//! Each tenant's cumulative measured bytes are snapshot at every moment a tenant's period begins
//! or ends. A snapshot is taken at the first completion that would change it, so it is exact
//! without an event of its own (a period may begin in the future, after a job's ramp). Marks
//! that fall due together share one snapshot, and an end later than another tenant's end takes
//! none (only the first end bounds the common interval), so memory stays linear in the tenants
//! when they begin together and end apart.

use crate::units::SimTime;

/// A moment whose cumulative bytes are wanted: those completed before `at` (a beginning: I/O
/// completing at `at` is inside the period), or up to and including `at` (an end).
#[derive(Clone, Debug)]
struct Mark {
    at: SimTime,
    inclusive: bool,
    /// Its snapshot (an index into [`Overlap::snaps`]), once taken.
    bytes: Option<usize>,
    /// Its snapshot can bound the common interval (false: an end after another tenant's).
    wanted: bool,
}

impl Mark {
    fn new(at: SimTime, inclusive: bool) -> Mark {
        Mark { at, inclusive, bytes: None, wanted: true }
    }

    /// A completion at `t` would change the snapshot: take it now.
    fn due(&self, t: SimTime) -> bool {
        self.wanted && self.bytes.is_none() && (t > self.at || (t == self.at && !self.inclusive))
    }
}

/// What the tracker found when the run ended.
pub struct Window {
    /// Each tenant's measured period `(begin, end)`; `None` for a tenant without demand.
    pub periods: Vec<Option<(SimTime, SimTime)>>,
    /// The common interval, when the periods overlap for longer than zero.
    pub common: Option<(SimTime, SimTime)>,
    /// Bytes each tenant with demand completed within the common interval (`None` without it).
    pub bytes: Vec<Option<u64>>,
}

pub struct Overlap {
    /// Measured bytes completed so far, per tenant.
    bytes: Vec<u64>,
    /// The tenant has issued I/O: it has demand.
    issued: Vec<bool>,
    begins: Vec<Option<Mark>>,
    ends: Vec<Option<Mark>>,
    /// Cumulative bytes per tenant at the moments marks fell due.
    snaps: Vec<Vec<u64>>,
    /// No mark is due before this time.
    next_due: SimTime,
}

impl Overlap {
    pub fn new(tenants: usize) -> Overlap {
        Overlap {
            bytes: vec![0; tenants],
            issued: vec![false; tenants],
            begins: vec![None; tenants],
            ends: vec![None; tenants],
            snaps: Vec::new(),
            next_due: SimTime(u64::MAX),
        }
    }

    /// A job of `tenant` began; its measured period starts at `measure_from`. The tenant's period
    /// begins with its earliest job's.
    pub fn job_began(&mut self, tenant: usize, measure_from: SimTime) {
        if self.begins[tenant].as_ref().is_none_or(|m| measure_from < m.at) {
            self.begins[tenant] = Some(Mark::new(measure_from, false));
            self.next_due = self.next_due.min(measure_from);
        }
    }

    pub fn issued(&mut self, tenant: usize) {
        self.issued[tenant] = true;
    }

    /// The tenant's last job is done.
    pub fn tenant_done(&mut self, tenant: usize, now: SimTime) {
        // Another tenant with demand ended earlier, inside its period: this end can never be the
        // first one.
        let earlier = (0..self.ends.len()).any(|t| {
            let (Some(b), Some(e)) = (&self.begins[t], &self.ends[t]) else { return false };
            self.issued[t] && e.at < now && b.at <= e.at
        });
        let mut mark = Mark::new(now, true);
        mark.wanted = !earlier;
        self.ends[tenant] = Some(mark);
        self.next_due = self.next_due.min(now);
    }

    /// A measured completion of `len` bytes.
    pub fn record(&mut self, tenant: usize, now: SimTime, len: u64) {
        if now >= self.next_due {
            self.snapshot_due(now);
        }
        self.bytes[tenant] += len;
    }

    fn snapshot_due(&mut self, now: SimTime) {
        let mut next = SimTime(u64::MAX);
        let mut taken: Option<usize> = None;
        for m in self.begins.iter_mut().chain(self.ends.iter_mut()).flatten() {
            if m.due(now) {
                let i = *taken.get_or_insert_with(|| {
                    self.snaps.push(self.bytes.clone());
                    self.snaps.len() - 1
                });
                m.bytes = Some(i);
            } else if m.bytes.is_none() && m.wanted {
                next = next.min(m.at);
            }
        }
        self.next_due = next;
    }

    /// The run ended at `now`.
    pub fn finish(&self, now: SimTime) -> Window {
        let periods: Vec<Option<(SimTime, SimTime)>> = (0..self.bytes.len()).map(|t| self.period(t, now)).collect();
        let counted = || periods.iter().enumerate().filter_map(|(t, p)| p.map(|p| (t, p)));
        // The last beginning and the first end, with their tenants.
        let last_begin = counted().max_by_key(|&(_, p)| p.0);
        let first_end = counted().min_by_key(|&(_, p)| p.1);
        let Some(((b, (start, _)), (e, (_, end)))) = last_begin.zip(first_end).filter(|(b, e)| b.1 .0 < e.1 .1)
        else {
            return Window { bytes: vec![None; periods.len()], periods, common: None };
        };
        let from = self.snapshot(self.begins[b].as_ref());
        let to = self.snapshot(self.ends[e].as_ref());
        let bytes = periods.iter().enumerate().map(|(t, p)| p.map(|_| to[t].saturating_sub(from[t]))).collect();
        Window { periods, common: Some((start, end)), bytes }
    }

    /// Every tenant's measured period as it stands at `now` (see [`Overlap::period`]).
    pub fn periods(&self, now: SimTime) -> Vec<Option<(SimTime, SimTime)>> {
        (0..self.bytes.len()).map(|t| self.period(t, now)).collect()
    }

    /// The tenant's measured period, if it began by `now` and the tenant issued I/O.
    fn period(&self, tenant: usize, now: SimTime) -> Option<(SimTime, SimTime)> {
        let begin = self.begins[tenant].as_ref().map(|m| m.at).filter(|&b| b <= now && self.issued[tenant])?;
        Some((begin, self.ends[tenant].as_ref().map_or(now, |m| m.at)))
    }

    /// Cumulative bytes at a mark. A mark not yet taken has seen no completion since; no mark
    /// (a tenant still running) is the run's end.
    fn snapshot<'a>(&'a self, m: Option<&'a Mark>) -> &'a [u64] {
        m.and_then(|m| m.bytes).map_or(&self.bytes, |i| &self.snaps[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn t(ns: u64) -> SimTime {
        SimTime(ns)
    }

    #[test]
    fn bytes_between_the_last_beginning_and_the_first_end() {
        let mut o = Overlap::new(3);
        o.job_began(0, t(0));
        o.issued(0);
        o.record(0, t(5), 100);
        // Tenant 1 ramps until 10: its period begins there.
        o.job_began(1, t(10));
        o.issued(1);
        o.record(0, t(10), 1); // at the beginning: inside
        o.record(1, t(12), 7);
        o.record(0, t(20), 3);
        o.tenant_done(1, t(20));
        o.record(0, t(20), 5); // at the end: inside
        o.record(0, t(21), 1000);
        o.job_began(2, t(0)); // began, never issued: no demand
        let w = o.finish(t(30));
        assert_eq!(w.common, Some((t(10), t(20))));
        assert_eq!(w.periods, [Some((t(0), t(30))), Some((t(10), t(20))), None]);
        assert_eq!(w.bytes, [Some(9), Some(7), None]);
    }

    #[test]
    fn an_earlier_job_moves_the_beginning_and_running_tenants_end_with_the_run() {
        let mut o = Overlap::new(2);
        o.job_began(0, t(0));
        o.job_began(1, t(50));
        o.job_began(1, t(8)); // a second job of tenant 1 without ramp
        o.issued(0);
        o.issued(1);
        o.record(0, t(4), 10);
        o.record(0, t(9), 20);
        o.record(1, t(9), 30);
        let w = o.finish(t(9));
        assert_eq!(w.common, Some((t(8), t(9))));
        assert_eq!(w.bytes, [Some(20), Some(30)]);
    }

    #[test]
    fn tenants_beginning_together_and_ending_apart_share_snapshots() {
        let n = 200;
        let mut o = Overlap::new(n);
        for tn in 0..n {
            o.job_began(tn, t(0));
            o.issued(tn);
        }
        for (i, tn) in (0..n).enumerate() {
            o.record(tn, t(1 + i as u64), 10);
            o.tenant_done(tn, t(1 + i as u64));
        }
        o.record(0, t(1000), 1);
        // One snapshot for all the beginnings, one for the first end: not one per tenant.
        assert!(o.snaps.len() <= 2, "{} snapshots", o.snaps.len());
        let w = o.finish(t(1000));
        assert_eq!(w.common, Some((t(0), t(1))));
        assert_eq!(w.bytes[0], Some(10));
        assert!(w.bytes[1..].iter().all(|b| *b == Some(0)));
    }

    #[test]
    fn periods_that_do_not_overlap_have_no_common_interval() {
        let mut o = Overlap::new(2);
        o.job_began(0, t(0));
        o.issued(0);
        o.record(0, t(3), 10);
        o.tenant_done(0, t(3));
        o.job_began(1, t(3));
        o.issued(1);
        o.record(1, t(7), 10);
        let w = o.finish(t(7));
        assert_eq!(w.common, None);
        assert_eq!(w.bytes, [None, None]);
        assert_eq!(w.periods, [Some((t(0), t(3))), Some((t(3), t(7)))]);
    }
}
