//! The FTL against analytic results: under uniform random overwrites, greedy GC's write
//! amplification must not exceed the LRW/FIFO cleaner's closed form, u = exp(−α(1 − u)),
//! WAF = 1 / (1 − u) (α = physical / logical), and must stay close to it (greedy beats FIFO by
//! little under uniform traffic). See docs/EXPERIMENTS.md.

use flashmux::device::precondition::{owner_segments, precondition, PreconditionSpec, PreconditionState};
use flashmux::engine::rng_for;
use flashmux::flash::Geometry;
use flashmux::ftl::{Ftl, FtlParams, VictimPolicy};

fn lrw_waf(alpha: f64) -> f64 {
    let mut u = 0.5;
    for _ in 0..500 {
        u = (-alpha * (1.0 - u)).exp();
    }
    1.0 / (1.0 - u)
}

#[test]
fn greedy_waf_is_bounded_by_the_lrw_model() {
    let geo = Geometry {
        channels: 4,
        chips_per_channel: 1,
        dies_per_chip: 1,
        planes_per_die: 1,
        blocks_per_plane: 512,
        pages_per_block: 64,
        page_bytes: 4096,
        unit_bytes: 4096,
    };
    for op in [0.07, 0.15, 0.3] {
        let stripe = geo.planes() as u64;
        let logical = (geo.total_units() as f64 / (1.0 + op)) as u64 / stripe * stripe;
        let params = FtlParams { logical_units: logical, victim_policy: VictimPolicy::Greedy, gc_threshold_blocks: 2, map_entries_per_page: None };
        let mut ftl = Ftl::new(&geo, params).unwrap();
        let segs = owner_segments(logical as u32, &[(0, logical as u32, 0)]);
        let r = precondition(
            &mut ftl,
            &PreconditionSpec { state: PreconditionState::Aged, fill: 1.0 },
            &segs,
            &mut [],
            &mut rng_for(3, "validation"),
            &|| false,
        );
        assert!(r.reached_steady_state, "op {op}: {r:?}");
        let alpha = geo.total_units() as f64 / logical as f64;
        // Blocks GC can never use for data: the threshold's reserve and two open blocks per plane.
        let alpha_eff = alpha * (geo.blocks_per_plane - 4) as f64 / geo.blocks_per_plane as f64;
        let (waf, bound) = (r.steady_waf, lrw_waf(alpha_eff));
        assert!(waf <= bound * 1.02, "op {op}: greedy WAF {waf:.3} above the LRW bound {bound:.3}");
        assert!(waf >= 0.8 * lrw_waf(alpha), "op {op}: greedy WAF {waf:.3} implausibly low vs LRW {:.3}", lrw_waf(alpha));
        ftl.check_invariants();
    }
}
