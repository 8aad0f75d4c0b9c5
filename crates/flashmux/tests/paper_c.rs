//! Paper C's bundled experiment, quick variant: the findings hold on flashmux's results, and the
//! checks fail when the results say otherwise.

use flashmux::experiment::bundled::{self, bundled};
use flashmux::experiment::run_points;

#[test]
fn findings_hold_and_the_checks_can_fail() {
    let b = bundled("paper-c-cmt").unwrap();
    let points = bundled::points(&(b.parts)(true).unwrap()).unwrap();
    let results = run_points(&points, &|| false, &mut |_, _, _| {}).unwrap();
    let checks = (b.evaluate)(&points, &results);
    assert_eq!(checks.len(), 3);
    for c in &checks {
        assert!(c.pass, "{}\n  measured: {}", c.claim, c.measured);
    }
    // Same runs, shared and partitioned swapped: VM0 now looks best off when shared, and VM1's
    // order turns around, so the first two findings must fail.
    let mut swapped = results.clone();
    for (i, p) in points.iter().enumerate() {
        let policy = p.params.iter().find(|(l, _)| l == "policy").unwrap().1.as_str().unwrap();
        if policy == "shared" {
            let j = points
                .iter()
                .position(|q| {
                    q.params[0] == p.params[0]
                        && q.params.iter().any(|(l, v)| l == "policy" && v.as_str() == Some("partitioned"))
                })
                .unwrap();
            let (ta, tb) = (swapped[i].tenants.clone(), swapped[j].tenants.clone());
            swapped[i].tenants = tb;
            swapped[j].tenants = ta;
        }
    }
    let checks = (b.evaluate)(&points, &swapped);
    assert!(!checks[0].pass && !checks[1].pass, "{checks:#?}");
}
