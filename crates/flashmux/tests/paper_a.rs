//! Paper A's bundled experiment, quick variant: the findings flashmux reproduces hold, the one it
//! does not is reported as failing, and the checks fail when the results say otherwise.

use flashmux::experiment::bundled::{self, bundled};
use flashmux::experiment::run_points;

#[test]
fn findings_hold_and_the_checks_can_fail() {
    let b = bundled("paper-a-multiqueue").unwrap();
    let points = bundled::points(&(b.parts)(true).unwrap()).unwrap();
    let results = run_points(&points, &|| false, &mut |_, _, _| {}).unwrap();
    let checks = (b.evaluate)(&points, &results);
    // The quick variant has random reads only: seven findings.
    assert_eq!(checks.len(), 7, "{checks:#?}");
    for i in [0, 1, 2, 4, 5] {
        let c = &checks[i];
        assert!(c.pass, "{}\n  measured: {}", c.claim, c.measured);
    }
    // With CFS's wake-up preemption MT's I/O threads preempt the vCPUs they share hardware
    // threads with, so MT switches far more than the paper's ~10% of Baseline; and with 16 vCPUs
    // its Baseline stays nearly flat (docs/EXPERIMENTS.md, paper A): reported, not hidden.
    assert!(checks[3].claim.starts_with("MT's context switches"), "{}", checks[3].claim);
    assert!(checks[6].claim.starts_with("16 vCPUs"), "{}", checks[6].claim);
    // Same runs with Baseline's and MT's results swapped: MT can no longer beat Baseline.
    let mut swapped = results.clone();
    for (i, p) in points.iter().enumerate() {
        if p.params[0].1.as_str() == Some("Baseline") {
            let j = points
                .iter()
                .position(|q| q.params[0].1.as_str() == Some("MT") && q.params[1..] == p.params[1..])
                .unwrap();
            swapped.swap(i, j);
        }
    }
    let checks = (b.evaluate)(&points, &swapped);
    assert!(!checks[1].pass && !checks[3].pass && !checks[5].pass, "{checks:#?}");
}
