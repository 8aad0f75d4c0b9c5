//! Fairness of weighted proportional sharing: each tenant's bandwidth share against the share its
//! weight entitles it to, Jain's index of weight-normalized bandwidth, and, against runs of each
//! tenant alone, slowdowns and MQSim's fairness (min / max slowdown). The formulas and a worked
//! example are in docs/MODEL.md, "Fairness metrics".

/// One tenant's bandwidth share among the tenants counted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Share {
    /// Bytes per second (reads, writes and trims) over the interval measured.
    pub bw_bytes: f64,
    /// `bw / Σ bw` over the tenants counted.
    pub achieved: f64,
    /// `weight / Σ weight` over the tenants counted.
    pub ideal: f64,
    /// `|achieved − ideal| / ideal`.
    pub error: f64,
}

/// Each counted tenant's share of bandwidth (`bw[i]` is `Some`) against its weight's share among
/// the counted tenants. `None` for the tenants not counted, and for every tenant when the counted
/// bandwidths sum to zero (no share is defined).
pub fn shares(bw: &[Option<f64>], weights: &[u32]) -> Vec<Option<Share>> {
    let counted = || bw.iter().zip(weights).filter_map(|(b, &w)| b.map(|b| (b, w)));
    let total_bw: f64 = counted().map(|(b, _)| b).sum();
    let total_w: u64 = counted().map(|(_, w)| w as u64).sum();
    if !(total_bw > 0.0 && total_bw.is_finite()) || total_w == 0 {
        return vec![None; bw.len()];
    }
    bw.iter()
        .zip(weights)
        .map(|(b, &w)| {
            b.map(|b| {
                let achieved = b / total_bw;
                let ideal = w as f64 / total_w as f64;
                Share { bw_bytes: b, achieved, ideal, error: (achieved - ideal).abs() / ideal }
            })
        })
        .collect()
}

/// Jain's fairness index `(Σx)² / (n·Σx²)`: 1 when all `x` are equal, `1/n` when one has
/// everything; `None` for an empty or all-zero series.
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| sum * sum / (x.len() as f64 * squares))
}

/// The run's fairness: how the tenants' bandwidth over their common measured interval compares
/// with their weights, and, with an alone baseline, their slowdowns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fairness {
    /// The tenants' common measured interval `(start, end)`, ns of simulated time; `None` when
    /// the counted tenants never ran at the same time.
    pub interval_ns: Option<(u64, u64)>,
    /// Tenants with demand (they issued I/O in a measured period): the ones judged.
    pub tenants_counted: usize,
    /// Mean and maximum of the counted tenants' share errors.
    pub share_error_mean: Option<f64>,
    pub share_error_max: Option<f64>,
    /// Jain's index of weight-normalized bandwidth `bw / weight` over the counted tenants.
    pub jain_index: Option<f64>,
    /// Slowdowns against runs of each tenant alone (`flashmux run --alone-baseline`).
    pub baseline: Option<AloneBaseline>,
}

impl Fairness {
    /// The run-level figures of the tenants' `shares` (as [`shares`] computes them).
    pub fn of_shares(
        shares: &[Option<Share>],
        weights: &[u32],
        interval_ns: Option<(u64, u64)>,
        tenants_counted: usize,
    ) -> Fairness {
        let errors: Vec<f64> = shares.iter().flatten().map(|s| s.error).collect();
        let normalized: Vec<f64> =
            shares.iter().zip(weights).filter_map(|(s, &w)| s.map(|s| s.bw_bytes / w as f64)).collect();
        Fairness {
            interval_ns,
            tenants_counted,
            share_error_mean: (!errors.is_empty()).then(|| errors.iter().sum::<f64>() / errors.len() as f64),
            share_error_max: errors.iter().copied().reduce(f64::max),
            jain_index: jain(&normalized),
            baseline: None,
        }
    }
}

/// One tenant's mean total latency (slat + clat over all its I/O) shared and alone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slowdown {
    pub lat_shared_ns: Option<f64>,
    pub lat_alone_ns: Option<f64>,
    /// `lat_shared / lat_alone`; `None` unless the tenant did I/O in both runs.
    pub slowdown: Option<f64>,
}

/// The tenants' slowdowns against runs of each alone, and MQSim's fairness.
#[derive(Clone, Debug, PartialEq)]
pub struct AloneBaseline {
    /// One per tenant, in the run's order.
    pub tenants: Vec<Slowdown>,
    /// `min slowdown / max slowdown` over the tenants that have one: 1 when all are slowed down
    /// alike.
    pub fairness: Option<f64>,
}

impl AloneBaseline {
    /// From each tenant's mean latency in the shared run and alone (`None`: no I/O).
    pub fn new(shared: &[Option<f64>], alone: &[Option<f64>]) -> AloneBaseline {
        let tenants: Vec<Slowdown> = shared
            .iter()
            .zip(alone)
            .map(|(&s, &a)| Slowdown {
                lat_shared_ns: s,
                lat_alone_ns: a,
                slowdown: s.zip(a).filter(|&(s, a)| s.is_finite() && a.is_finite() && a > 0.0).map(|(s, a)| s / a),
            })
            .collect();
        let slowdowns = || tenants.iter().filter_map(|t| t.slowdown);
        let fairness = slowdowns()
            .reduce(f64::min)
            .zip(slowdowns().reduce(f64::max))
            .filter(|&(_, max)| max > 0.0)
            .map(|(min, max)| min / max);
        AloneBaseline { tenants, fairness }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn bandwidth_in_proportion_to_the_weights_is_perfectly_fair() {
        let w = [10, 7, 4, 1];
        let s = shares(&[Some(10e6), Some(7e6), Some(4e6), Some(1e6)], &w);
        for (share, w) in s.iter().zip(w) {
            let share = share.expect("counted");
            assert!((share.achieved - w as f64 / 22.0).abs() < 1e-12);
            assert!((share.ideal - w as f64 / 22.0).abs() < 1e-12);
            assert!(share.error < 1e-12, "{share:?}");
        }
        let f = Fairness::of_shares(&s, &w, Some((0, 1)), 4);
        assert!(close(f.share_error_max, 0.0));
        assert!(close(f.jain_index, 1.0));
    }

    #[test]
    fn equal_bandwidth_under_unequal_weights() {
        // Weights 10:7:4:1 (Σ 22), each tenant a quarter of the bandwidth:
        // |1/4 − 10/22| / (10/22) = 9/20, |1/4 − 7/22| / (7/22) = 3/14, 3/8, 9/2.
        let w = [10, 7, 4, 1];
        let s = shares(&[Some(5.0); 4], &w);
        let errors: Vec<f64> = s.iter().flatten().map(|s| s.error).collect();
        for (e, want) in errors.iter().zip([9.0 / 20.0, 3.0 / 14.0, 3.0 / 8.0, 9.0 / 2.0]) {
            assert!((e - want).abs() < 1e-12, "{e} vs {want}");
        }
        assert!(s.iter().flatten().all(|s| s.achieved == 0.25 && s.bw_bytes == 5.0));
        let f = Fairness::of_shares(&s, &w, None, 4);
        assert!(close(f.share_error_mean, (9.0 / 20.0 + 3.0 / 14.0 + 3.0 / 8.0 + 9.0 / 2.0) / 4.0));
        assert!(close(f.share_error_max, 4.5));
        // x = 1/10, 1/7, 1/4, 1 (times 5): J = (209/140)² / (4 · Σx²) = 43681/85684.
        assert!(close(f.jain_index, 43681.0 / 85684.0));
    }

    #[test]
    fn tenants_not_counted_are_out_of_both_sums() {
        let w = [100, 500, 300];
        let s = shares(&[Some(3.0), None, Some(1.0)], &w);
        assert_eq!(s[1], None);
        let (a, c) = (s[0].expect("counted"), s[2].expect("counted"));
        assert_eq!((a.achieved, a.ideal), (0.75, 0.25));
        assert_eq!((c.achieved, c.ideal), (0.25, 0.75));
        assert!((a.error - 2.0).abs() < 1e-12 && (c.error - 2.0 / 3.0).abs() < 1e-12);
        let f = Fairness::of_shares(&s, &w, Some((5, 10)), 2);
        // x = 3/100, 1/300: J = (10/300)² / (2 · (81 + 1)/300²) = 100/164.
        assert!(close(f.jain_index, 100.0 / 164.0));
        assert_eq!(f.tenants_counted, 2);
    }

    #[test]
    fn a_single_tenant_is_trivially_fair() {
        let s = shares(&[None, Some(7.0)], &[1, 1000]);
        assert_eq!(s[1], Some(Share { bw_bytes: 7.0, achieved: 1.0, ideal: 1.0, error: 0.0 }));
        let f = Fairness::of_shares(&s, &[1, 1000], Some((0, 9)), 1);
        assert_eq!((f.share_error_mean, f.share_error_max, f.jain_index), (Some(0.0), Some(0.0), Some(1.0)));
    }

    #[test]
    fn nothing_to_share_is_undefined_not_nan() {
        for bw in [vec![Some(0.0), Some(0.0)], vec![None, None], vec![]] {
            let w = vec![500; bw.len()];
            let s = shares(&bw, &w);
            assert!(s.iter().all(Option::is_none));
            let f = Fairness::of_shares(&s, &w, None, bw.len());
            assert_eq!((f.share_error_mean, f.share_error_max, f.jain_index), (None, None, None));
        }
        // A starved tenant has a share: zero.
        let s = shares(&[Some(0.0), Some(2.0)], &[500, 500]);
        assert_eq!(s[0].map(|s| (s.achieved, s.error)), Some((0.0, 1.0)));
        assert_eq!(jain(&[0.0, 2.0]), Some(0.5));
    }

    #[test]
    fn slowdowns_and_their_fairness() {
        let b = AloneBaseline::new(&[Some(300.0), Some(150.0), None, Some(5.0)], &[Some(100.0), Some(100.0), Some(9.0), None]);
        let sd: Vec<Option<f64>> = b.tenants.iter().map(|t| t.slowdown).collect();
        assert_eq!(sd, [Some(3.0), Some(1.5), None, None]);
        assert_eq!(b.tenants[2].lat_alone_ns, Some(9.0));
        assert_eq!(b.fairness, Some(0.5));
        assert_eq!(AloneBaseline::new(&[Some(1.0)], &[Some(0.0)]).fairness, None);
        assert_eq!(AloneBaseline::new(&[Some(2.0)], &[Some(1.0)]).fairness, Some(1.0));
    }
}
