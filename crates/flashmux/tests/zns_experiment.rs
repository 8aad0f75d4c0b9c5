//! The bundled zoned-against-conventional experiment, quick variant: its findings hold, and its
//! checks fail when the results say otherwise.

use flashmux::experiment::bundled::{self, bundled};
use flashmux::experiment::run_points;
use flashmux::experiment::Point;

/// The position of the point whose parameter `label` is `value`.
fn at(points: &[Point], label: &str, value: &str) -> usize {
    points
        .iter()
        .position(|p| {
            p.params
                .iter()
                .any(|(l, v)| l == label && v.as_str() == Some(value))
        })
        .unwrap_or_else(|| panic!("no point with {label} = {value}"))
}

#[test]
fn findings_hold_and_the_checks_can_fail() {
    let b = bundled("zns-vs-conventional").unwrap();
    let points = bundled::points(&(b.parts)(true).unwrap()).unwrap();
    let results = run_points(&points, &|| false, &mut |_, _, _| {}).unwrap();
    let checks = (b.evaluate)(&points, &results);
    assert_eq!(checks.len(), 5, "{checks:#?}");
    for c in &checks {
        assert!(c.pass, "{}\n  measured: {}", c.claim, c.measured);
    }
    // The zoned drive's writers and the 7% block drive's swapped: the block drive would have
    // no GC and the most throughput.
    let mut swapped = results.clone();
    swapped.swap(
        at(&points, "drive", "zns"),
        at(&points, "drive", "block-7%"),
    );
    let c = (b.evaluate)(&points, &swapped);
    assert!(!c[0].pass && !c[1].pass && c[2].pass, "{c:#?}");
    // One log and a log per tenant swapped: separating the tenants would cost WAF.
    let mut swapped = results.clone();
    swapped.swap(
        at(&points, "drive", "zns-shared"),
        at(&points, "drive", "zns-per-tenant"),
    );
    let c = (b.evaluate)(&points, &swapped);
    assert!(!c[3].pass && c[2].pass, "{c:#?}");
    // A conventional drive in the host FTL's place: the drive's own GC, no host FTL.
    let mut swapped = results.clone();
    swapped.swap(
        at(&points, "drive", "zns-shared"),
        at(&points, "drive", "conventional"),
    );
    assert!(!(b.evaluate)(&points, &swapped)[2].pass);
    // The full zone's reset in the empty one's place: resets no longer grow with the fill.
    let mut swapped = results.clone();
    swapped.swap(at(&points, "fill", "1-lba"), at(&points, "fill", "100%"));
    let c = (b.evaluate)(&points, &swapped);
    assert!(!c[4].pass, "{c:#?}");
    // A run missing: its checks say so and fail.
    let c = (b.evaluate)(&points[..points.len() - 1], &results[..results.len() - 1]);
    assert!(!c[4].pass && c[4].measured == "runs missing", "{c:#?}");
}
