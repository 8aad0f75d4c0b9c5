//! `flashmux profile gc-contribution`: paper E's profiling of how much of GC's work a tenant's
//! write randomness causes, on a given drive, and the fit of hWA-BC's `G = a·ln(R) + b` to it.
//!
//! For each small block size (4, 8 and 16 KiB by default) two tenants share the drive, each on
//! its own half, filled and aged to 80% as paper E's drive: one writes randomly in the small
//! blocks, the other randomly in large ones (64 KiB), both at QD 16 with no host scheduler. A
//! random write is a run of its own (it continues the previous one with probability of about
//! one in the region's units), so a tenant's `SeqLen` is its block size in 4 KiB units and
//! `R_i = (1/SeqLen_i) / Σ_j (1/SeqLen_j)`. Its contribution is the ownership ledger's share of
//! the valid units GC moved that were the tenant's. The points `(R, share)` of all pairs are
//! fitted by least squares (`budget_cost::fit_log`); only the ratio `b / a` matters to hWA-BC,
//! which normalises `G` over tenants.

use super::{run_points, Point};
use crate::config::{ConfigError, Scenario};
use crate::host::sched::budget_cost::{fit_log, UNIT_BYTES};
use crate::metrics::StopReason;
use crate::sim::SimError;
use std::path::Path;

/// What to profile.
#[derive(Clone, Debug)]
pub struct ProfileParams {
    pub preset: String,
    /// Logical capacity, e.g. "16GiB".
    pub capacity: String,
    /// Simulated time of each pair's run, e.g. "30s".
    pub time: String,
    /// The small random-write block sizes, KiB, one run each.
    pub sizes_kib: Vec<u64>,
    /// The large block size the small ones run against, KiB.
    pub against_kib: u64,
    pub seed: u64,
}

impl Default for ProfileParams {
    /// Paper E's profiling: 4, 8 and 16 KiB against 64 KiB (its reported ratio is 4 : 64 KiB).
    fn default() -> Self {
        ProfileParams {
            preset: "cosmos".into(),
            capacity: "16GiB".into(),
            time: "30s".into(),
            sizes_kib: vec![4, 8, 16],
            against_kib: 64,
            seed: 1,
        }
    }
}

/// One pair's run.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfilePair {
    /// Block sizes (KiB) of the small-block and the large-block tenant.
    pub kib: (u64, u64),
    /// Their randomness `R`.
    pub randomness: (f64, f64),
    /// Units GC moved from each one's data.
    pub moved: (u64, u64),
    /// Each one's share of the units GC moved from the two.
    pub share: (f64, f64),
}

/// The profile and its fit.
#[derive(Clone, Debug, PartialEq)]
pub struct GcProfile {
    pub pairs: Vec<ProfilePair>,
    pub a: f64,
    pub b: f64,
}

impl GcProfile {
    /// The share the fit gives a tenant of randomness `r` next to one of `1 − r`.
    pub fn predicted_share(&self, r: f64) -> f64 {
        let g = |r: f64| crate::host::sched::budget_cost::contribution(r, self.a, self.b);
        let (mine, other) = (g(r), g(1.0 - r));
        if mine + other > 0.0 {
            mine / (mine + other)
        } else {
            f64::NAN
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Sim(#[from] SimError),
    #[error("profile: {0}")]
    Invalid(String),
    #[error("profile: interrupted")]
    Interrupted,
}

/// The scenario of one pair.
pub fn pair_scenario(p: &ProfileParams, small_kib: u64) -> String {
    let job = |name: &str, kib: u64| format!("[{name}]\\nrw=randwrite\\nbs={kib}k\\niodepth=16\\ntime_based\\n");
    format!(
        r#"name = "gc-contribution-{small_kib}k"
seed = {seed}
[device]
preset = "{preset}"
capacity = "{capacity}"
[precondition]
state = "aged"
fill = 0.8
[stop]
time = "{time}"
[[tenant]]
name = "small"
region = {{ offset = "0%", size = "50%" }}
fio = "{small}"
[[tenant]]
name = "large"
region = {{ offset = "50%", size = "50%" }}
fio = "{large}"
"#,
        seed = p.seed,
        preset = p.preset,
        capacity = p.capacity,
        time = p.time,
        small = job("small", small_kib),
        large = job("large", p.against_kib),
    )
}

/// Runs the profile; `on_pair` is told of each pair as it finishes; `interrupted` is polled.
pub fn profile_gc_contribution(
    p: &ProfileParams,
    interrupted: &dyn Fn() -> bool,
    on_pair: &mut dyn FnMut(&ProfilePair),
) -> Result<GcProfile, ProfileError> {
    if p.sizes_kib.is_empty() {
        return Err(ProfileError::Invalid("no block sizes to profile".into()));
    }
    if let Some(&s) = p.sizes_kib.iter().find(|&&s| s == 0 || s * 1024 % UNIT_BYTES != 0 || s >= p.against_kib) {
        return Err(ProfileError::Invalid(format!(
            "block size {s} KiB: expected a multiple of 4 KiB below the large block size ({} KiB)",
            p.against_kib
        )));
    }
    let mut pairs = Vec::new();
    for &kib in &p.sizes_kib {
        let text = pair_scenario(p, kib);
        let scenario = Scenario::from_generated_toml(&text, &format!("gc-contribution ({kib} KiB)"), Path::new("."))?;
        let point = Point { index: pairs.len(), params: Vec::new(), scenario };
        let Some(r) = run_points(std::slice::from_ref(&point), interrupted, &mut |_, _, _| {})?.pop() else {
            return Err(ProfileError::Interrupted);
        };
        if r.stop_reason == StopReason::Interrupted {
            return Err(ProfileError::Interrupted);
        }
        let moved = (r.tenants[0].gc_units_moved, r.tenants[1].gc_units_moved);
        let total = moved.0 + moved.1;
        if total == 0 {
            return Err(ProfileError::Invalid(format!(
                "GC moved no tenant data in the {kib} KiB run: run longer (--time) or on a smaller drive (--capacity)"
            )));
        }
        let inv = (UNIT_BYTES as f64 / (kib * 1024) as f64, UNIT_BYTES as f64 / (p.against_kib * 1024) as f64);
        let pair = ProfilePair {
            kib: (kib, p.against_kib),
            randomness: (inv.0 / (inv.0 + inv.1), inv.1 / (inv.0 + inv.1)),
            moved,
            share: (moved.0 as f64 / total as f64, moved.1 as f64 / total as f64),
        };
        on_pair(&pair);
        pairs.push(pair);
    }
    let points: Vec<(f64, f64)> =
        pairs.iter().flat_map(|q| [(q.randomness.0, q.share.0), (q.randomness.1, q.share.1)]).collect();
    let (a, b) = fit_log(&points).map_err(ProfileError::Invalid)?;
    Ok(GcProfile { pairs, a, b })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_more_random_writer_causes_more_gc_and_the_fit_says_so() {
        // On the TLC drive (small over-provisioning) the 4 KiB writer's data is a clearly larger
        // share of what GC moves (docs/MODEL.md §3, "hwabc": on most presets it barely differs).
        let p = ProfileParams { preset: "tlc-nvme".into(), capacity: "16GiB".into(), time: "5s".into(), sizes_kib: vec![4, 16], ..Default::default() };
        let mut seen = 0;
        let prof = profile_gc_contribution(&p, &|| false, &mut |_| seen += 1).unwrap();
        assert_eq!(seen, 2);
        for q in &prof.pairs {
            assert!(q.share.0 > q.share.1, "the small-block writer moves more: {q:?}");
            assert!((q.randomness.0 + q.randomness.1 - 1.0).abs() < 1e-12);
        }
        assert!(prof.a > 0.0, "share grows with randomness: a = {}", prof.a);
        // The fit reproduces the measured shares roughly.
        for q in &prof.pairs {
            assert!((prof.predicted_share(q.randomness.0) - q.share.0).abs() < 0.15, "{q:?} vs {}", prof.predicted_share(q.randomness.0));
        }
        // Deterministic.
        assert_eq!(prof, profile_gc_contribution(&p, &|| false, &mut |_| {}).unwrap());
    }

    #[test]
    fn bad_sizes_and_no_gc_are_errors() {
        let bad = ProfileParams { sizes_kib: vec![6], ..Default::default() };
        let e = profile_gc_contribution(&bad, &|| false, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("block size 6 KiB"), "{e}");
        let bad = ProfileParams { sizes_kib: vec![64], ..Default::default() };
        assert!(profile_gc_contribution(&bad, &|| false, &mut |_| {}).is_err());
        let e = profile_gc_contribution(&ProfileParams { preset: "nope".into(), ..Default::default() }, &|| false, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown preset 'nope'"), "{e}");
        let null = ProfileParams { preset: "null".into(), ..Default::default() };
        assert!(profile_gc_contribution(&null, &|| false, &mut |_| {}).is_err(), "no flash, no GC");
        let stopped = profile_gc_contribution(&ProfileParams::default(), &|| true, &mut |_| {}).unwrap_err();
        assert!(matches!(stopped, ProfileError::Interrupted), "{stopped}");
    }
}
