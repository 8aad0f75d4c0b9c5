//! Preconditioning: putting a drive into a used state before the measured run, functionally (no
//! timing), so that even a large drive is aged in seconds.
//!
//! - `clean`: a fresh drive, every block erased.
//! - `sequential-fill`: the first `fill` fraction of every owner segment written once, in order.
//! - `aged`: a sequential fill, then uniform random overwrites of the filled data until garbage
//!   collection reaches a steady state: after at least one full overwrite of the filled data since
//!   GC started, the mean write amplification of the last three rounds is within 2% of the three
//!   before. A round overwrites 5% of the filled data, or 200 blocks' worth on small drives so
//!   each round's WAF is measured over enough GC runs to be steady. Capped at 8 full overwrites.
//!
//! Data written during preconditioning belongs to the tenant whose region holds it (the VM's disk
//! contents), or to no one where regions are shared, so GC of it later is attributed correctly.

use crate::engine::SimRng;
use crate::ftl::{Ftl, NO_OWNER};
use crate::units::Lpn;
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

/// What preconditioning did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PreconditionReport {
    pub state: Option<PreconditionState>,
    pub fill: f64,
    pub units_filled: u64,
    pub overwrite_units: u64,
    pub gc_runs: u64,
    /// Write amplification of the last aging round.
    pub steady_waf: f64,
    pub reached_steady_state: bool,
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
/// Units written by the sequential fill between two looks at the stop flag.
const FILL_POLL: u32 = 1 << 16;

/// Puts the drive into `spec`'s state. `stop` is asked every few thousand writes (a millisecond
/// or so): once it says so, preconditioning ends where it is, with `interrupted` set.
pub fn precondition(
    ftl: &mut Ftl,
    spec: &PreconditionSpec,
    segments: &[Segment],
    rng: &mut SimRng,
    stop: &dyn Fn() -> bool,
) -> PreconditionReport {
    let mut report = PreconditionReport { state: Some(spec.state), fill: spec.fill, ..Default::default() };
    if spec.state == PreconditionState::Clean {
        return report;
    }
    // The filled prefix of each segment; `cum` holds prefix sums for uniform picks over all of them.
    let filled: Vec<Segment> = segments
        .iter()
        .map(|s| Segment { len: ((s.len as f64) * spec.fill).round() as u32, ..*s })
        .filter(|s| s.len > 0)
        .collect();
    for s in &filled {
        for lpn in s.start..s.start + s.len {
            if (lpn - s.start) % FILL_POLL == 0 && stop() {
                report.interrupted = true;
                report.units_filled += u64::from(lpn - s.start);
                report.gc_runs = ftl.stats().gc_runs;
                return report;
            }
            ftl.write_untimed(Lpn(lpn), s.owner);
        }
        report.units_filled += u64::from(s.len);
    }
    let total: u64 = filled.iter().map(|s| s.len as u64).sum();
    if spec.state == PreconditionState::Aged && total > 0 {
        let cum: Vec<u64> = filled
            .iter()
            .scan(0u64, |acc, s| {
                *acc += s.len as u64;
                Some(*acc)
            })
            .collect();
        let round = ((total as f64 * ROUND_FRACTION) as u64).max(MIN_ROUND_BLOCKS * ftl.units_per_block() as u64);
        let mut wafs: Vec<f64> = Vec::new();
        let mut batch: Vec<(u32, u16)> = Vec::with_capacity(BATCH as usize);
        let mut lpns: Vec<u32> = Vec::with_capacity(BATCH as usize);
        let mut since_gc = 0u64;
        while report.overwrite_units < MAX_OVERWRITES * total {
            let before = ftl.stats().clone();
            let mut left = round;
            while left > 0 {
                if stop() {
                    report.interrupted = true;
                    report.gc_runs = ftl.stats().gc_runs;
                    return report;
                }
                batch.clear();
                for _ in 0..left.min(BATCH) {
                    let r = rng.random_range(0..total);
                    let i = cum.partition_point(|&c| c <= r);
                    let s = &filled[i];
                    let offset = r - if i == 0 { 0 } else { cum[i - 1] };
                    batch.push((s.start + offset as u32, s.owner));
                }
                lpns.clear();
                lpns.extend(batch.iter().map(|b| b.0));
                ftl.warm_for_writes(&lpns);
                for &(lpn, owner) in &batch {
                    ftl.write_untimed(Lpn(lpn), owner);
                }
                left -= batch.len() as u64;
            }
            report.overwrite_units += round;
            let after = ftl.stats();
            let host = after.host_units_programmed - before.host_units_programmed;
            let gc = after.gc_units_programmed - before.gc_units_programmed;
            if after.gc_runs > 0 {
                since_gc += round;
            }
            wafs.push((host + gc) as f64 / host as f64);
            report.steady_waf = *wafs.last().expect("just pushed");
            if since_gc >= total && wafs.len() >= 2 * STABLE_ROUNDS {
                let mean = |w: &[f64]| w.iter().sum::<f64>() / w.len() as f64;
                let n = wafs.len();
                let last = mean(&wafs[n - STABLE_ROUNDS..]);
                let before = mean(&wafs[n - 2 * STABLE_ROUNDS..n - STABLE_ROUNDS]);
                if (last - before).abs() / before < STABLE_TOLERANCE {
                    report.reached_steady_state = true;
                    break;
                }
            }
        }
    }
    report.gc_runs = ftl.stats().gc_runs;
    report
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

/// Preconditioning the device (the drive's own part of a run's set-up).
impl super::Device {
    /// Puts the drive into `spec`'s state before the measured run: each tenant's region
    /// (`regions`, (offset, length) in bytes, by tenant index) is written as that tenant's data,
    /// with the random stream derived from `seed` and the label `"precondition"`. Afterwards
    /// every open host page is padded to a page boundary and the FTL's and map cache's counters
    /// are zeroed, so the measured run counts only its own work. A device without an FTL
    /// (`null`) reports nothing done.
    pub fn precondition(
        &mut self,
        spec: &PreconditionSpec,
        regions: &[(u64, u64)],
        seed: u64,
        stop: &dyn Fn() -> bool,
    ) -> PreconditionReport {
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
        let mut rng = crate::engine::rng_for(seed, "precondition");
        let report = precondition(ssd.ftl_mut(), spec, &segments, &mut rng, stop);
        let planes = ssd.config().geometry.planes();
        for p in (0..planes).map(crate::units::PlaneId) {
            ssd.ftl_mut().pad_host_page(p);
        }
        ssd.ftl_mut().reset_stats();
        ssd.reset_map_stats();
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
        let logical = (g.total_units() as f64 / 1.1) as u64 / 4 * 4;
        Ftl::new(&g, FtlParams { logical_units: logical, victim_policy: VictimPolicy::Greedy, gc_threshold_blocks: 2, map_entries_per_page: None })
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
        let r = precondition(&mut f, &spec, &segs, &mut rng_for(1, "p"), &|| {
            asked.set(asked.get() + 1);
            asked.get() >= 5
        });
        assert!(r.interrupted && !r.reached_steady_state, "{r:?}");
        assert_eq!(r.units_filled, n as u64);
        assert_eq!(asked.get(), 5, "asked once per batch until told to stop");
        f.check_invariants();
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
        let r = precondition(&mut f, &spec, &segs, &mut rng_for(1, "p"), &|| false);
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
        let r = precondition(&mut f, &spec, &segs, &mut rng_for(1, "p"), &|| false);
        assert!(r.gc_runs > 0);
        assert!(r.reached_steady_state, "{r:?}");
        assert!(r.steady_waf > 1.5, "uniform random overwrites at 10% OP: WAF {}", r.steady_waf);
        assert!(f.tenant_gc(TenantId(0)).units_moved > 0 && f.tenant_gc(TenantId(1)).units_moved > 0);
        f.check_invariants();
        // Same seed, same drive state.
        let mut g = ftl();
        let r2 = precondition(&mut g, &spec, &segs, &mut rng_for(1, "p"), &|| false);
        assert_eq!(r, r2);
    }
}
