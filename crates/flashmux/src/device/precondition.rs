//! Preconditioning: putting a drive into a used state before the measured run, functionally (no
//! timing), so that even a large drive is aged in seconds.
//!
//! - `clean`: a fresh drive, every block erased.
//! - `sequential-fill`: the first `fill` fraction of every owner segment written once, in order.
//! - `aged`: a sequential fill, then uniform random overwrites of the filled data until garbage
//!   collection reaches a steady state.
//! - `workload`: a sequential fill, then each tenant overwrites its own region with its own
//!   workload's address and size pattern (SNIA SSS PTS 2.0's *workload-dependent
//!   preconditioning*, §3.3; what MQSim derives from each flow), until GC reaches a steady state.
//!   The tenants take turns, each writing in proportion to its *share*: the write bytes it keeps
//!   in flight (iodepth × write fraction × mean write size), which is how a saturated drive that
//!   gives every tenant the same latency divides its write bandwidth (Little's law). The smallest
//!   share writes [`TURN_UNITS`] units a turn. A tenant whose workload never writes (a reader)
//!   keeps its region as the fill left it — data that is only read was written once. Only data
//!   the fill wrote is overwritten: a write's units that the fill left empty are skipped, so the
//!   drive holds `fill` of each region afterwards, whatever the workloads address.
//!
//! **Steady state** (both aging states): after at least one full overwrite of the filled data
//! since GC started, the mean write amplification of the last window of rounds is within 2% of
//! the window before. A round writes 5% of the filled data, or 200 blocks' worth on small drives
//! so each round's WAF is measured over enough GC runs to be steady. A window is three rounds for
//! `aged`, and a full overwrite (20 rounds, or 3 on small drives) for `workload`: a sequential
//! writer's WAF cycles with its passes over its region, so only windows that span a pass agree.
//! Capped at 8 full overwrites.
//!
//! **Why it matters** (worked example): a sequential writer and a random writer share a drive.
//! Aged uniformly, the sequential writer's data ends up scattered through blocks that also hold
//! the random writer's, and GC moves it as often as anyone's: on the default scenario the ledger
//! charged the two 49.8% / 50.2% of the moved data. Aged by workload, the sequential writer's
//! overwrites invalidate its old data in the order it was written, so its blocks empty whole and
//! GC moves almost only the random writer's data — as on a real drive that has run these
//! workloads for a while.
//!
//! Data written during preconditioning belongs to the tenant whose region holds it (the VM's disk
//! contents), or to no one where regions are shared, so GC of it later is attributed correctly;
//! in `workload` aging, an overwrite belongs to the tenant who wrote it.
//!
//! Source: SNIA Solid State Storage Performance Test Specification (PTS) 2.0.2, §3.3 and §3.4
//! (workload-independent vs workload-dependent preconditioning, steady state as a bounded
//! excursion over a measurement window); MQSim's preconditioning from each flow's workload
//! (Tavakkol et al., FAST '18, §4).

use crate::engine::SimRng;
use crate::ftl::{Ftl, Loc, NO_OWNER};
use crate::units::{Lpn, Placement};
use rand::Rng;
use serde::Serialize;

crate::named! {
    /// How the drive is aged before the run.
    pub enum PreconditionState: "state" {
        /// A fresh drive, every block erased.
        Clean = "clean",
        /// The first `fill` fraction of every owner segment written once, in order.
        SequentialFill = "sequential-fill",
        /// A sequential fill, then random overwrites until GC reaches a steady state.
        Aged = "aged",
        /// A sequential fill, then each tenant's own workload's writes until GC reaches a steady
        /// state.
        Workload = "workload",
    }
}

impl PreconditionState {
    /// Whether the drive is aged until GC reaches a steady state.
    pub fn ages(self) -> bool {
        matches!(self, PreconditionState::Aged | PreconditionState::Workload)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PreconditionSpec {
    pub state: PreconditionState,
    /// Fraction (0, 1] of each segment's logical space that holds data afterwards.
    pub fill: f64,
}

impl PreconditionSpec {
    /// `fill` is a fraction in (0, 1].
    pub fn validate(&self) -> Result<(), String> {
        if self.fill > 0.0 && self.fill <= 1.0 {
            return Ok(());
        }
        Err(format!("precondition.fill: {} is out of range: expected a fraction in (0, 1], e.g. 0.8", self.fill))
    }
}

/// A contiguous range of logical units and who owns the data written there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub start: u32,
    pub len: u32,
    pub owner: u16,
}

/// Where one tenant's writes go during `workload` aging: the units `(start, count)` of its next
/// write, `None` if its workload never writes. Counts are at least 1 and stay within the drive.
pub type UnitWrites<'a> = Box<dyn FnMut() -> Option<(u32, u32)> + 'a>;

/// One tenant's writer for `workload` aging.
pub struct TenantWrites<'a> {
    pub owner: u16,
    /// Its share of the writes, relative to the others' (at least 1).
    pub share: u64,
    pub next: UnitWrites<'a>,
}

/// What preconditioning did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PreconditionReport {
    pub state: Option<PreconditionState>,
    pub fill: f64,
    pub units_filled: u64,
    pub overwrite_units: u64,
    pub gc_runs: u64,
    /// Write amplification at the end of aging: the mean over the last window of rounds (see
    /// the module's header).
    pub steady_waf: f64,
    pub reached_steady_state: bool,
    /// `workload` aging: the tenants whose workloads wrote (the others' regions were only filled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writers: Option<u32>,
    /// The user stopped the run while the drive was being preconditioned.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

const ROUND_FRACTION: f64 = 0.05;
const MIN_ROUND_BLOCKS: u64 = 200;
const STABLE_ROUNDS: usize = 3;
const STABLE_TOLERANCE: f64 = 0.02;
const MAX_OVERWRITES: u64 = 8;
/// Overwrites generated (and their table entries warmed) at a time.
const BATCH: u64 = 64;
/// `workload` aging: units the writing tenant with the smallest share writes per turn (a turn's
/// last write may overshoot); the others write in proportion to their shares.
pub const TURN_UNITS: u64 = 64;
/// The most units a turn may have, however uneven the shares.
const MAX_TURN_UNITS: u64 = 1 << 20;
/// `workload` aging: requests in a row a writer may issue without finding filled data to
/// overwrite before it is left out (its workload only addresses what the fill left empty).
const MAX_BARREN: u32 = 1 << 16;
/// Units written by the sequential fill between two looks at the stop flag.
const FILL_POLL: u32 = 1 << 16;

/// Puts the drive into `spec`'s state. `writers` are the tenants' writers for `workload` aging
/// (ignored otherwise). `stop` is asked every few thousand writes (a millisecond or so): once it
/// says so, preconditioning ends where it is, with `interrupted` set.
pub fn precondition(
    ftl: &mut Ftl,
    spec: &PreconditionSpec,
    segments: &[Segment],
    writers: &mut [TenantWrites],
    rng: &mut SimRng,
    stop: &dyn Fn() -> bool,
) -> PreconditionReport {
    precondition_placed(ftl, spec, segments, writers, &[], rng, stop)
}

/// [`precondition`] on a drive with data placement: tenant *i*'s data goes through
/// `placements[i]` (placement 0 for the others and for data no tenant owns).
pub fn precondition_placed(
    ftl: &mut Ftl,
    spec: &PreconditionSpec,
    segments: &[Segment],
    writers: &mut [TenantWrites],
    placements: &[Placement],
    rng: &mut SimRng,
    stop: &dyn Fn() -> bool,
) -> PreconditionReport {
    let placed = Placed(placements);
    let mut report = PreconditionReport { state: Some(spec.state), fill: spec.fill, ..Default::default() };
    if spec.state == PreconditionState::Clean {
        return report;
    }
    // The filled prefix of each segment.
    let filled: Vec<Segment> = segments
        .iter()
        .map(|s| Segment { len: ((s.len as f64) * spec.fill).round() as u32, ..*s })
        .filter(|s| s.len > 0)
        .collect();
    if !fill(ftl, &filled, &mut report, placed, stop) {
        return report;
    }
    let total: u64 = filled.iter().map(|s| s.len as u64).sum();
    if spec.state.ages() && total > 0 {
        let round = ((total as f64 * ROUND_FRACTION) as u64).max(MIN_ROUND_BLOCKS * ftl.units_per_block() as u64);
        // A sequential writer's WAF cycles with its passes over its region (a pass of the default
        // scenario's writer is one full overwrite: 20 rounds from 1.5 to 10.6 and back), so
        // workload aging compares windows of a full overwrite, uniform aging of three rounds.
        let window = match spec.state {
            PreconditionState::Workload => (total.div_ceil(round) as usize).max(STABLE_ROUNDS),
            _ => STABLE_ROUNDS,
        };
        let mut aging = Aging { round, total, window, wafs: Vec::new(), since_gc: 0 };
        if spec.state == PreconditionState::Aged {
            let mut uniform = Uniform::new(&filled);
            aging.run(ftl, &mut report, stop, |ftl, n| uniform.write(ftl, n, rng, placed));
        } else {
            // A first write from each tenant says whether its workload writes at all.
            let mut turns = Turns::new(writers);
            report.writers = Some(turns.seats.len() as u32);
            if !turns.seats.is_empty() {
                aging.run(ftl, &mut report, stop, |ftl, n| turns.write(ftl, n, placed));
            }
        }
    }
    report.gc_runs = ftl.stats().gc_runs;
    report
}

/// Each tenant's placement, by owner.
#[derive(Clone, Copy)]
struct Placed<'a>(&'a [Placement]);

impl Placed<'_> {
    fn of(self, owner: u16) -> Placement {
        self.0.get(owner as usize).copied().unwrap_or_default()
    }
}

/// Writes the filled prefixes in order; false if told to stop first.
fn fill(ftl: &mut Ftl, filled: &[Segment], report: &mut PreconditionReport, placed: Placed, stop: &dyn Fn() -> bool) -> bool {
    for s in filled {
        for lpn in s.start..s.start + s.len {
            if (lpn - s.start) % FILL_POLL == 0 && stop() {
                report.interrupted = true;
                report.units_filled += u64::from(lpn - s.start);
                report.gc_runs = ftl.stats().gc_runs;
                return false;
            }
            ftl.write_untimed(Lpn(lpn), s.owner, placed.of(s.owner));
        }
        report.units_filled += u64::from(s.len);
    }
    true
}

/// Rounds of overwrites until GC's write amplification is steady.
struct Aging {
    /// Units per round.
    round: u64,
    /// Units filled.
    total: u64,
    /// Rounds per window: steady when two windows' mean WAFs agree.
    window: usize,
    /// Each round's WAF.
    wafs: Vec<f64>,
    /// Units overwritten since GC first ran.
    since_gc: u64,
}

impl Aging {
    /// Runs rounds of `write(ftl, at_most)` — which writes about `at_most` units and says how
    /// many, 0 when there is nothing left to write — until steady, the cap, nothing left, or a
    /// stop.
    fn run(
        &mut self,
        ftl: &mut Ftl,
        report: &mut PreconditionReport,
        stop: &dyn Fn() -> bool,
        mut write: impl FnMut(&mut Ftl, u64) -> u64,
    ) {
        while report.overwrite_units < MAX_OVERWRITES * self.total {
            let before = ftl.stats().clone();
            let mut written = 0u64;
            while written < self.round {
                if stop() {
                    report.interrupted = true;
                    return;
                }
                let n = write(ftl, (self.round - written).min(BATCH));
                if n == 0 {
                    report.overwrite_units += written;
                    return;
                }
                written += n;
            }
            report.overwrite_units += written;
            let after = ftl.stats();
            let host = after.host_units_programmed - before.host_units_programmed;
            let gc = after.gc_units_programmed - before.gc_units_programmed;
            if after.gc_runs > 0 {
                self.since_gc += written;
            }
            self.wafs.push((host + gc) as f64 / host.max(1) as f64);
            report.steady_waf = self.last_window_mean();
            if self.steady() {
                report.reached_steady_state = true;
                return;
            }
        }
    }

    /// The mean WAF of the last window's rounds (of all rounds, before a window is complete).
    fn last_window_mean(&self) -> f64 {
        let w = &self.wafs[self.wafs.len().saturating_sub(self.window)..];
        w.iter().sum::<f64>() / w.len() as f64
    }

    fn steady(&self) -> bool {
        let n = self.wafs.len();
        let w = self.window;
        if self.since_gc < self.total || n < 2 * w {
            return false;
        }
        let last = self.last_window_mean();
        let before = self.wafs[n - 2 * w..n - w].iter().sum::<f64>() / w as f64;
        (last - before).abs() / before < STABLE_TOLERANCE
    }
}

/// `aged`: uniform random unit overwrites of the filled data.
struct Uniform<'a> {
    filled: &'a [Segment],
    /// Prefix sums of the segments' lengths, for uniform picks over all of them.
    cum: Vec<u64>,
    total: u64,
    batch: Vec<(u32, u16)>,
    lpns: Vec<u32>,
}

impl<'a> Uniform<'a> {
    fn new(filled: &'a [Segment]) -> Uniform<'a> {
        let cum: Vec<u64> = filled
            .iter()
            .scan(0u64, |acc, s| {
                *acc += s.len as u64;
                Some(*acc)
            })
            .collect();
        let total = cum.last().copied().unwrap_or(0);
        Uniform { filled, cum, total, batch: Vec::with_capacity(BATCH as usize), lpns: Vec::with_capacity(BATCH as usize) }
    }

    fn write(&mut self, ftl: &mut Ftl, n: u64, rng: &mut SimRng, placed: Placed) -> u64 {
        self.batch.clear();
        for _ in 0..n {
            let r = rng.random_range(0..self.total);
            let i = self.cum.partition_point(|&c| c <= r);
            let s = &self.filled[i];
            let offset = r - if i == 0 { 0 } else { self.cum[i - 1] };
            self.batch.push((s.start + offset as u32, s.owner));
        }
        self.lpns.clear();
        self.lpns.extend(self.batch.iter().map(|b| b.0));
        ftl.warm_for_writes(&self.lpns);
        for &(lpn, owner) in &self.batch {
            ftl.write_untimed(Lpn(lpn), owner, placed.of(owner));
        }
        n
    }
}

/// `workload`: the writing tenants take turns, of units in proportion to their shares.
struct Turns<'w, 'a> {
    seats: Vec<Seat<'w, 'a>>,
    /// Whose turn it is, and how many units of it are left.
    turn: usize,
    left: u64,
    lpns: Vec<u32>,
}

/// A writing tenant in the rotation.
struct Seat<'w, 'a> {
    writer: &'w mut TenantWrites<'a>,
    /// A write drawn to learn whether the tenant writes, not yet written.
    first: Option<(u32, u32)>,
    /// Units per turn.
    quota: u64,
    /// Requests in a row that found no data to overwrite.
    barren: u32,
}

impl<'w, 'a> Turns<'w, 'a> {
    fn new(all: &'w mut [TenantWrites<'a>]) -> Turns<'w, 'a> {
        let mut seats: Vec<Seat> = Vec::new();
        for writer in all.iter_mut() {
            if let Some(f) = (writer.next)() {
                seats.push(Seat { writer, first: Some(f), quota: 0, barren: 0 });
            }
        }
        let least = seats.iter().map(|s| s.writer.share.max(1)).min().unwrap_or(1);
        for s in &mut seats {
            let quota = TURN_UNITS as u128 * s.writer.share.max(1) as u128 / least as u128;
            s.quota = quota.min(MAX_TURN_UNITS as u128) as u64;
        }
        let left = seats.first().map_or(TURN_UNITS, |s| s.quota);
        Turns { seats, turn: 0, left, lpns: Vec::with_capacity(2 * BATCH as usize) }
    }

    /// Seat `t` leaves the rotation; the next one's turn begins.
    fn retire(&mut self, t: usize) {
        self.seats.remove(t);
        self.turn = if self.seats.is_empty() { 0 } else { t % self.seats.len() };
        self.left = self.seats.get(self.turn).map_or(TURN_UNITS, |s| s.quota);
    }

    /// Writes whole requests of the current turns until about `n` units are written; 0 once no
    /// tenant has anything left to write.
    fn write(&mut self, ftl: &mut Ftl, n: u64, placed: Placed) -> u64 {
        let mut written = 0u64;
        while written < n && !self.seats.is_empty() {
            let t = self.turn;
            let seat = &mut self.seats[t];
            let Some((start, count)) = seat.first.take().or_else(|| (seat.writer.next)()) else {
                // A writer whose stream ends (it should not: the streams start over) leaves the
                // rotation.
                self.retire(t);
                continue;
            };
            assert!(count > 0 && start.checked_add(count).is_some(), "an aging write of units {start}+{count}");
            // Only data the fill wrote is overwritten, so the drive stays as full as `fill` says
            // (a workload that also addresses the unfilled part would otherwise fill it).
            self.lpns.clear();
            self.lpns.extend((start..start + count).filter(|&l| ftl.lookup(Lpn(l)) != Loc::Unmapped));
            ftl.warm_for_writes(&self.lpns);
            for &l in &self.lpns {
                ftl.write_untimed(Lpn(l), seat.writer.owner, placed.of(seat.writer.owner));
            }
            let done = self.lpns.len() as u64;
            seat.barren = if done == 0 { seat.barren + 1 } else { 0 };
            if seat.barren >= MAX_BARREN {
                // Its writes all go where no data is: it cannot age anything.
                self.retire(t);
                continue;
            }
            written += done;
            self.left = self.left.saturating_sub(done);
            if self.left == 0 {
                self.turn = (self.turn + 1) % self.seats.len();
                self.left = self.seats[self.turn].quota;
            }
        }
        written
    }
}

/// Segments covering `0..logical_units`, each owned by the single tenant whose region covers it,
/// or by no one. `regions` are (start, len, tenant) in units.
pub fn owner_segments(logical_units: u32, regions: &[(u32, u32, u16)]) -> Vec<Segment> {
    let mut cuts: Vec<u32> = vec![0, logical_units];
    for &(s, l, _) in regions {
        cuts.push(s.min(logical_units));
        cuts.push((s + l).min(logical_units));
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out: Vec<Segment> = Vec::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let owners: Vec<u16> = regions.iter().filter(|r| r.0 <= a && a < r.0 + r.1).map(|r| r.2).collect();
        let owner = if owners.len() == 1 { owners[0] } else { NO_OWNER };
        match out.last_mut() {
            Some(last) if last.owner == owner && last.start + last.len == a => last.len += b - a,
            _ => out.push(Segment { start: a, len: b - a, owner }),
        }
    }
    out
}

/// One tenant's writes for `workload` aging, as its workload issues them: the `(offset, length)`
/// in bytes from the start of the device of its next write, `None` if it never writes.
pub type ByteWrites<'a> = Box<dyn FnMut() -> Option<(u64, u64)> + 'a>;

/// A tenant's writer for `workload` aging, with its share (bytes of writes it keeps in flight).
pub struct TenantWriter<'a> {
    pub share: u64,
    pub writes: ByteWrites<'a>,
}

/// Preconditioning the device (the drive's own part of a run's set-up).
impl super::Device {
    /// Puts the drive into `spec`'s state before the measured run: each tenant's region
    /// (`regions`, (offset, length) in bytes, by tenant index) is written as that tenant's data,
    /// with the random stream derived from `seed` and the label `"precondition"`; `workload`
    /// aging writes what `writes` (by tenant index, as long as `regions`) give. Afterwards
    /// every open host page is padded to a page boundary and the FTL's and map cache's counters
    /// are zeroed, so the measured run counts only its own work. A device without an FTL
    /// (`null`) reports nothing done.
    pub fn precondition(
        &mut self,
        spec: &PreconditionSpec,
        regions: &[(u64, u64)],
        writes: Vec<TenantWriter>,
        seed: u64,
        stop: &dyn Fn() -> bool,
    ) -> PreconditionReport {
        assert!(writes.is_empty() || writes.len() == regions.len(), "one writer per tenant");
        let super::Backend::Ssd(ssd) = self.backend_mut() else {
            return PreconditionReport::default();
        };
        let unit = ssd.config().geometry.unit_bytes as u64;
        let logical = ssd.ftl().logical_units() as u32;
        let regions: Vec<(u32, u32, u16)> = regions
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let start = r.0.div_ceil(unit);
                let end = (r.0 + r.1) / unit;
                (start as u32, end.saturating_sub(start) as u32, i as u16)
            })
            .collect();
        let segments = owner_segments(logical, &regions);
        let mut writers: Vec<TenantWrites> = writes
            .into_iter()
            .enumerate()
            .map(|(i, TenantWriter { share, writes: mut w })| TenantWrites {
                owner: i as u16,
                share,
                next: Box::new(move || {
                    // A write's units: those it touches, within the drive (a partial unit is
                    // written whole: aging has no timing, so no read-modify-write to charge).
                    loop {
                        let (offset, len) = w()?;
                        let start = (offset / unit).min(logical as u64) as u32;
                        let end = (offset + len.max(1)).div_ceil(unit).min(logical as u64) as u32;
                        if end > start {
                            return Some((start, end - start));
                        }
                    }
                }),
            })
            .collect();
        let mut rng = crate::engine::rng_for(seed, "precondition");
        let placements = ssd.tenant_placements();
        let report = precondition_placed(ssd.ftl_mut(), spec, &segments, &mut writers, &placements, &mut rng, stop);
        let planes = ssd.config().geometry.planes();
        let count = ssd.ftl().placements().count() as u16;
        for p in (0..planes).map(crate::units::PlaneId) {
            for h in (0..count).map(Placement) {
                ssd.ftl_mut().pad_host_page(p, h);
            }
        }
        ssd.ftl_mut().reset_stats();
        ssd.reset_map_stats();
        ssd.reset_placement_stats();
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rng_for;
    use crate::flash::Geometry;
    use crate::ftl::{FtlParams, Loc, VictimPolicy};
    use crate::units::TenantId;

    fn ftl() -> Ftl {
        ftl_with_op(0.1)
    }

    /// The test drive with `op` spare space over the logical (0.1: 10% over-provisioning).
    fn ftl_with_op(op: f64) -> Ftl {
        let g = Geometry {
            channels: 2,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: 1,
            blocks_per_plane: 64,
            pages_per_block: 16,
            page_bytes: 4096,
            unit_bytes: 4096,
        };
        let logical = (g.total_units() as f64 / (1.0 + op)) as u64 / 4 * 4;
        Ftl::new(&g, FtlParams { logical_units: logical, victim_policy: VictimPolicy::Greedy, gc_threshold_blocks: 2, map_entries_per_page: None, placements: Default::default(), zoned: None })
            .unwrap()
    }

    #[test]
    fn a_stop_ends_preconditioning_where_it_is() {
        let mut f = ftl();
        let n = f.logical_units() as u32;
        let segs = owner_segments(n, &[(0, n, 0)]);
        let spec = PreconditionSpec { state: PreconditionState::Aged, fill: 1.0 };
        let asked = std::cell::Cell::new(0);
        // Stop at the fifth look: during the aging, after the fill.
        let r = precondition(&mut f, &spec, &segs, &mut [], &mut rng_for(1, "p"), &|| {
            asked.set(asked.get() + 1);
            asked.get() >= 5
        });
        assert!(r.interrupted && !r.reached_steady_state, "{r:?}");
        assert_eq!(r.units_filled, n as u64);
        assert_eq!(asked.get(), 5, "asked once per batch until told to stop");
        f.check_invariants();
    }

    /// The test drive at `op` spare, halves owned by tenants 0 and 1: (FTL, logical units, segments).
    fn halves(op: f64) -> (Ftl, u32, Vec<Segment>) {
        let f = ftl_with_op(op);
        let n = f.logical_units() as u32;
        let segs = owner_segments(n, &[(0, n / 2, 0), (n / 2, n - n / 2, 1)]);
        (f, n, segs)
    }

    /// Writers for a two-tenant drive: tenant 0 writes its half sequentially in 8-unit
    /// requests, over and over; tenant 1 writes its half uniformly at random, one unit at a time.
    fn seq_and_rand(n: u32, seed: u64) -> Vec<TenantWrites<'static>> {
        let half = n / 2;
        let mut pos = 0u32;
        let mut rng = rng_for(seed, "rand-tenant");
        vec![
            TenantWrites {
                owner: 0,
                share: 1,
                next: Box::new(move || {
                    let w = (pos, 8.min(half - pos));
                    pos = (pos + 8) % half;
                    Some(w)
                }),
            },
            TenantWrites { owner: 1, share: 1, next: Box::new(move || Some((half + rng.random_range(0..n - half), 1))) },
        ]
    }

    /// Of `owner`'s logical units `lpns`, the share whose successor in the same plane sits right
    /// after it in the same flash block: 1 for data laid out in the order it is addressed.
    fn in_order(f: &Ftl, lpns: std::ops::Range<u32>) -> f64 {
        let planes = 4;
        let upb = f.units_per_block();
        let (mut pairs, mut ordered) = (0u32, 0u32);
        for l in lpns.start..lpns.end - planes {
            let (Loc::Flash(a), Loc::Flash(b)) = (f.lookup(Lpn(l)), f.lookup(Lpn(l + planes))) else { continue };
            pairs += 1;
            if a.0 / upb == b.0 / upb && b.0 == a.0 + 1 {
                ordered += 1;
            }
        }
        ordered as f64 / pairs as f64
    }

    #[test]
    fn workload_aging_reaches_steady_state_with_each_tenant_causing_its_own_gc() {
        // 25% spare, as enterprise drives have (at 10% GC must take blocks before the sequential
        // writer's next pass has emptied them, and moves its data more: a third of the moves).
        let (mut f, n, segs) = halves(0.25);
        let spec = PreconditionSpec { state: PreconditionState::Workload, fill: 1.0 };
        let r = precondition(&mut f, &spec, &segs, &mut seq_and_rand(n, 3), &mut rng_for(1, "p"), &|| false);
        assert!(r.reached_steady_state && r.gc_runs > 0, "{r:?}");
        assert_eq!(r.writers, Some(2));
        assert!(r.overwrite_units >= r.units_filled, "at least one full overwrite since GC began: {r:?}");
        f.check_invariants();
        // Steady: another window of the same writes amplifies as the last window did. In it,
        // the sequential writer's old data is invalidated in the order it was written: GC moves
        // little of it, and its data stays in order in its blocks; the random writer's does not.
        f.reset_stats();
        let mut writers = seq_and_rand(n, 4);
        let mut turns = Turns::new(&mut writers);
        let mut written = 0;
        while written < r.units_filled {
            written += turns.write(&mut f, BATCH, Placed(&[]));
        }
        let s = f.stats();
        let waf = (s.host_units_programmed + s.gc_units_programmed) as f64 / s.host_units_programmed as f64;
        let (seq, rand) = (f.tenant_gc(TenantId(0)).units_moved, f.tenant_gc(TenantId(1)).units_moved);
        assert!((waf - r.steady_waf).abs() / r.steady_waf < 0.05, "next window's WAF {waf:.3} vs {:.3}", r.steady_waf);
        assert!(seq * 2 < rand, "GC moved {seq} units of the sequential writer's, {rand} of the random one's");
        let (seq_order, rand_order) = (in_order(&f, 0..n / 2), in_order(&f, n / 2..n));
        assert!(seq_order > 0.8 && rand_order < 0.2, "in order: sequential {seq_order:.2}, random {rand_order:.2}");
        f.check_invariants();

        // Same writers and seed, same drive.
        let mut g = ftl();
        let r2 = precondition(&mut g, &spec, &segs, &mut seq_and_rand(n, 3), &mut rng_for(1, "p"), &|| false);
        assert_eq!(r, r2);
    }

    #[test]
    fn workload_aging_divides_the_writes_by_share() {
        // Two random writers, shares 3:1: over the aging, three units of the first for each of
        // the second's (to within a turn).
        let (mut f, n, segs) = halves(0.25);
        let counts = [std::rc::Rc::new(std::cell::Cell::new(0u64)), std::rc::Rc::new(std::cell::Cell::new(0u64))];
        let mut writers: Vec<TenantWrites> = (0..2u16)
            .map(|i| {
                let (c, mut rng) = (counts[i as usize].clone(), rng_for(u64::from(i), "w"));
                let base = if i == 0 { 0 } else { n / 2 };
                TenantWrites {
                    owner: i,
                    share: if i == 0 { 3000 } else { 1000 },
                    next: Box::new(move || {
                        c.set(c.get() + 1);
                        Some((base + rng.random_range(0..n / 2), 1))
                    }),
                }
            })
            .collect();
        let spec = PreconditionSpec { state: PreconditionState::Workload, fill: 1.0 };
        let r = precondition(&mut f, &spec, &segs, &mut writers, &mut rng_for(1, "p"), &|| false);
        let (a, b) = (counts[0].get() as f64, counts[1].get() as f64);
        assert!((a / b - 3.0).abs() < 0.05, "{a} vs {b}: {r:?}");
        assert!(r.reached_steady_state);
    }

    #[test]
    fn workload_aging_keeps_the_drive_as_full_as_the_fill_left_it() {
        // A random writer over its whole half at fill 50%: it overwrites only what the fill
        // wrote, so half of each region still holds data afterwards.
        let (mut f, n, segs) = halves(0.25);
        let spec = PreconditionSpec { state: PreconditionState::Workload, fill: 0.5 };
        let r = precondition(&mut f, &spec, &segs, &mut seq_and_rand(n, 3), &mut rng_for(1, "p"), &|| false);
        let mapped = |range: std::ops::Range<u32>| range.filter(|&l| f.lookup(Lpn(l)) != Loc::Unmapped).count() as u32;
        assert_eq!((mapped(0..n / 2), mapped(n / 2..n)), (n / 4, (n - n / 2 + 1) / 2), "{r:?}");
        assert!(r.overwrite_units > 0 && r.gc_runs > 0);
        // A writer that only addresses what the fill left empty is left out, and aging ends.
        let mut g = ftl_with_op(0.25);
        let mut empty = vec![TenantWrites { owner: 0, share: 1, next: Box::new(move || Some((n / 2 - 1, 1))) }];
        let segs = owner_segments(n, &[(0, n / 2, 0)]);
        let r = precondition(&mut g, &spec, &segs, &mut empty, &mut rng_for(1, "p"), &|| false);
        assert_eq!((r.writers, r.overwrite_units, r.reached_steady_state), (Some(1), 0, false));
    }

    #[test]
    fn uniform_aging_charges_a_sequential_writer_as_much_gc_as_a_random_one() {
        // The contrast the workload state exists for (same drive and regions as above).
        let (mut f, n, segs) = halves(0.1);
        let spec = PreconditionSpec { state: PreconditionState::Aged, fill: 1.0 };
        precondition(&mut f, &spec, &segs, &mut [], &mut rng_for(1, "p"), &|| false);
        let (seq, rand) = (f.tenant_gc(TenantId(0)).units_moved as f64, f.tenant_gc(TenantId(1)).units_moved as f64);
        assert!((seq / rand - 1.0).abs() < 0.2, "GC moved {seq} vs {rand}");
        assert!(in_order(&f, 0..n / 2) < 0.2);
    }

    #[test]
    fn workload_aging_leaves_readers_regions_as_filled() {
        let (mut f, n, segs) = halves(0.1);
        let spec = PreconditionSpec { state: PreconditionState::Workload, fill: 1.0 };
        let mut writers = seq_and_rand(n, 3);
        writers[1].next = Box::new(|| None);
        let r = precondition(&mut f, &spec, &segs, &mut writers, &mut rng_for(1, "p"), &|| false);
        assert_eq!(r.writers, Some(1));
        assert_eq!(f.tenant_gc(TenantId(1)).units_moved, 0, "the reader's data was never invalidated");
        // 15 of every 16 pairs: a block boundary breaks the 16th.
        assert!(in_order(&f, n / 2..n) > 0.93, "the reader's region is as the sequential fill left it");
        // No writer at all: filled only.
        let mut g = ftl();
        let mut none: Vec<TenantWrites> = vec![TenantWrites { owner: 0, share: 1, next: Box::new(|| None) }];
        let r = precondition(&mut g, &spec, &segs, &mut none, &mut rng_for(1, "p"), &|| false);
        assert_eq!((r.writers, r.overwrite_units, r.units_filled, r.reached_steady_state), (Some(0), 0, n as u64, false));
    }

    #[test]
    fn segments_by_owner() {
        let s = owner_segments(100, &[(0, 40, 0), (40, 30, 1), (60, 20, 2)]);
        assert_eq!(
            s,
            vec![
                Segment { start: 0, len: 40, owner: 0 },
                Segment { start: 40, len: 20, owner: 1 },
                Segment { start: 60, len: 10, owner: NO_OWNER },
                Segment { start: 70, len: 10, owner: 2 },
                Segment { start: 80, len: 20, owner: NO_OWNER },
            ]
        );
    }

    #[test]
    fn fill_writes_the_prefix_of_each_segment() {
        let mut f = ftl();
        let n = f.logical_units() as u32;
        let segs = owner_segments(n, &[(0, n / 2, 0), (n / 2, n - n / 2, 1)]);
        let spec = PreconditionSpec { state: PreconditionState::SequentialFill, fill: 0.5 };
        let r = precondition(&mut f, &spec, &segs, &mut [], &mut rng_for(1, "p"), &|| false);
        assert_eq!(r.units_filled as u32, n / 2);
        assert!(matches!(f.lookup(Lpn(0)), Loc::Flash(_)));
        assert_eq!(f.lookup(Lpn(n / 4 + 1)), Loc::Unmapped);
        assert!(matches!(f.lookup(Lpn(n / 2)), Loc::Flash(_)));
        if let Loc::Flash(p) = f.lookup(Lpn(n / 2)) {
            assert_eq!(f.owner_of(p), 1);
        }
        f.check_invariants();
    }

    #[test]
    fn aging_reaches_gc_steady_state_and_attributes_data() {
        let mut f = ftl();
        let n = f.logical_units() as u32;
        let segs = owner_segments(n, &[(0, n / 2, 0), (n / 2, n - n / 2, 1)]);
        let spec = PreconditionSpec { state: PreconditionState::Aged, fill: 1.0 };
        let r = precondition(&mut f, &spec, &segs, &mut [], &mut rng_for(1, "p"), &|| false);
        assert!(r.gc_runs > 0);
        assert!(r.reached_steady_state, "{r:?}");
        assert!(r.steady_waf > 1.5, "uniform random overwrites at 10% OP: WAF {}", r.steady_waf);
        assert!(f.tenant_gc(TenantId(0)).units_moved > 0 && f.tenant_gc(TenantId(1)).units_moved > 0);
        f.check_invariants();
        // Same seed, same drive state.
        let mut g = ftl();
        let r2 = precondition(&mut g, &spec, &segs, &mut [], &mut rng_for(1, "p"), &|| false);
        assert_eq!(r, r2);
    }
}
