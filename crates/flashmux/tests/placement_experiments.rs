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

#[test]
fn placement_vs_budgets_findings_hold_and_the_checks_can_fail() {
    let b = bundled("placement-vs-budgets").unwrap();
    let (points, results) = run("placement-vs-budgets");
    all_pass(b.name, &(b.evaluate)(&points, &results), 6);
    let label = |i: usize, l: &str| points[i].params.iter().find(|(k, _)| k == l).unwrap().1.as_str().unwrap().to_string();
    // One handle and a handle per tenant swapped: placement now raises WAF and lets GC move the
    // reader's data.
    let mut swapped = results.clone();
    for i in (0..points.len()).filter(|&i| label(i, "placement") == "shared") {
        let j = (0..points.len())
            .find(|&j| label(j, "placement") == "per-tenant" && label(j, "pair") == label(i, "pair") && label(j, "scheduler") == label(i, "scheduler"))
            .unwrap();
        swapped.swap(i, j);
    }
    let checks = (b.evaluate)(&points, &swapped);
    assert!(!checks[0].pass && !checks[1].pass, "{checks:#?}");
    // Fair and hWA-BC swapped: the judged shares are gone, the sequential writer gets less.
    let mut swapped = results.clone();
    for i in (0..points.len()).filter(|&i| label(i, "scheduler") == "fair") {
        let j = (0..points.len())
            .find(|&j| label(j, "scheduler") == "hwabc" && label(j, "pair") == label(i, "pair") && label(j, "placement") == label(i, "placement"))
            .unwrap();
        swapped.swap(i, j);
    }
    let checks = (b.evaluate)(&points, &swapped);
    assert!(!checks[2].pass && !checks[3].pass && !checks[4].pass, "{checks:#?}");
}
