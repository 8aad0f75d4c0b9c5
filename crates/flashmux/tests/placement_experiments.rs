//! The data placement experiments' quick variants (`fdp-multi-tenant`, `fdp-noisy-handle`,
//! `placement-vs-budgets`): the published findings they check hold on flashmux's results, and
//! the checks fail when the results say otherwise.

use flashmux::experiment::bundled::{self, bundled};
use flashmux::experiment::run_points;
use flashmux::metrics::RunResults;

fn run(name: &str) -> (Vec<flashmux::experiment::Point>, Vec<RunResults>) {
    let b = bundled(name).unwrap();
    let points = bundled::points(&(b.parts)(true).unwrap()).unwrap();
    let results = run_points(&points, &|| false, &mut |_, _, _| {}).unwrap();
    (points, results)
}

fn all_pass(name: &str, checks: &[bundled::Check], count: usize) {
    assert_eq!(checks.len(), count, "{name}");
    for c in checks {
        assert!(c.pass, "{name}: {}\n  measured: {}", c.claim, c.measured);
    }
}

#[test]
fn multi_tenant_findings_hold_and_the_checks_can_fail() {
    let b = bundled("fdp-multi-tenant").unwrap();
    let (points, results) = run("fdp-multi-tenant");
    all_pass(b.name, &(b.evaluate)(&points, &results), 5);
    // The same runs with "none" and "fdp" swapped: placement now looks like it raises WAF and
    // costs bandwidth, so the findings on mixing, separation and the drive's WAF must fail.
    let mut swapped = results.clone();
    let label = |i: usize| points[i].params.iter().find(|(l, _)| l == "placement").unwrap().1.as_str().unwrap().to_string();
    for i in 0..points.len() {
        if label(i) == "none" {
            let j = i + 1;
            assert_eq!(label(j), "fdp");
            swapped.swap(i, j);
        }
    }
    let checks = (b.evaluate)(&points, &swapped);
    assert!(!checks[0].pass && !checks[1].pass && !checks[3].pass, "{checks:#?}");
}

#[test]
fn noisy_handle_findings_hold_and_the_checks_can_fail() {
    let b = bundled("fdp-noisy-handle").unwrap();
    let (points, results) = run("fdp-noisy-handle");
    all_pass(b.name, &(b.evaluate)(&points, &results), 4);
    // The two runs swapped: persistent isolation now shows Media Reallocated and the higher WAF.
    let swapped = vec![results[1].clone(), results[0].clone()];
    let checks = (b.evaluate)(&points, &swapped);
    assert!(!checks[1].pass && !checks[3].pass, "{checks:#?}");
}

/// The results with the runs whose `axis` is `a` and those where it is `b` (all else equal)
/// swapped.
fn swapped_on(points: &[flashmux::experiment::Point], results: &[RunResults], axis: &str, a: &str, b: &str) -> Vec<RunResults> {
    let label = |i: usize, l: &str| points[i].params.iter().find(|(k, _)| k == l).unwrap().1.as_str().unwrap().to_string();
    let others = |i: usize| -> Vec<String> {
        points[i].params.iter().filter(|(k, _)| k != axis).map(|(_, v)| v.to_string()).collect()
    };
    let mut swapped = results.to_vec();
    for i in (0..points.len()).filter(|&i| label(i, axis) == a) {
        let j = (0..points.len()).find(|&j| label(j, axis) == b && others(j) == others(i)).unwrap();
        swapped.swap(i, j);
    }
    swapped
}

#[test]
fn placement_vs_budgets_findings_hold_and_the_checks_can_fail() {
    let b = bundled("placement-vs-budgets").unwrap();
    let (points, results) = run("placement-vs-budgets");
    all_pass(b.name, &(b.evaluate)(&points, &results), 6);
    // One handle and a handle per tenant swapped: placement now raises WAF and lets GC move the
    // reader's data.
    let checks = (b.evaluate)(&points, &swapped_on(&points, &results, "placement", "shared", "per-tenant"));
    assert!(!checks[0].pass && !checks[1].pass, "{checks:#?}");
    // Fair and hWA-BC swapped: the judged shares are gone, the sequential writer gets less.
    let swapped = swapped_on(&points, &results, "scheduler", "fair", "hwabc");
    let checks = (b.evaluate)(&points, &swapped);
    assert!(!checks[2].pass && !checks[3].pass && !checks[4].pass, "{checks:#?}");
}
