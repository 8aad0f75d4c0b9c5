//! How well a scheduler that charges GC by contribution (hWA-BC) judged who caused it: each
//! tenant's share of the GC cost it was charged, next to the ground truth the ownership ledger
//! keeps, its share of the valid units GC moved.

/// One tenant's judged and true contribution to GC.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GcContribution {
    /// GC cost charged to the tenant / GC cost charged to all tenants.
    pub estimated: f64,
    /// Units GC moved from the tenant's data / units GC moved from all tenants' data; `None`
    /// when GC moved nothing of anyone's.
    pub actual: Option<f64>,
    /// `estimated − actual` (a fraction: 0.05 is 5 points over).
    pub error: Option<f64>,
}

/// Per tenant, from the GC cost each was charged (`None`: the scheduler charges no GC) and the
/// units GC moved from its data. `None` when the scheduler charges no GC or charged none yet.
pub fn gc_contributions(charged: &[Option<f64>], moved: &[u64]) -> Option<Vec<GcContribution>> {
    assert_eq!(charged.len(), moved.len(), "one entry per tenant");
    if charged.iter().any(Option::is_none) {
        return None;
    }
    let total: f64 = charged.iter().flatten().sum();
    if !(total > 0.0 && total.is_finite()) {
        return None;
    }
    let moved_total: u64 = moved.iter().sum();
    Some(
        charged
            .iter()
            .zip(moved)
            .map(|(c, &m)| {
                let estimated = c.unwrap_or(0.0) / total;
                let actual = (moved_total > 0).then(|| m as f64 / moved_total as f64);
                GcContribution { estimated, actual, error: actual.map(|a| estimated - a) }
            })
            .collect(),
    )
}

/// The mean of `|error|` over the tenants with one.
pub fn mean_abs_error(c: &[GcContribution]) -> Option<f64> {
    let errs: Vec<f64> = c.iter().filter_map(|c| c.error).map(f64::abs).collect();
    (!errs.is_empty()).then(|| errs.iter().sum::<f64>() / errs.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_errors() {
        let c = gc_contributions(&[Some(300.0), Some(100.0), Some(0.0)], &[10, 30, 0]).unwrap();
        assert_eq!(c[0], GcContribution { estimated: 0.75, actual: Some(0.25), error: Some(0.5) });
        assert_eq!(c[1], GcContribution { estimated: 0.25, actual: Some(0.75), error: Some(-0.5) });
        assert_eq!(c[2], GcContribution { estimated: 0.0, actual: Some(0.0), error: Some(0.0) });
        assert_eq!(mean_abs_error(&c), Some(1.0 / 3.0));
    }

    #[test]
    fn absent_when_nothing_was_judged() {
        assert_eq!(gc_contributions(&[None, None], &[5, 5]), None, "no GC-charging scheduler");
        assert_eq!(gc_contributions(&[Some(0.0), Some(0.0)], &[5, 5]), None, "nothing charged yet");
        let c = gc_contributions(&[Some(1.0), Some(3.0)], &[0, 0]).unwrap();
        assert_eq!(c[1].estimated, 0.75);
        assert_eq!((c[1].actual, c[1].error), (None, None), "GC moved nothing of anyone's");
        assert_eq!(mean_abs_error(&c), None);
    }
}
