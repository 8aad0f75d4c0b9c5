//! The FTL against analytic results: under uniform random overwrites, greedy GC's write
//! amplification must not exceed the LRW/FIFO cleaner's closed form, u = exp(−α(1 − u)),
//! WAF = 1 / (1 − u) (α = physical / logical), and must stay close to it (greedy beats FIFO by
//! little under uniform traffic). The check is `flashmux validate`'s analytic row
//! (`experiment::validate::analytic`); see docs/EXPERIMENTS.md.

use flashmux::experiment::validate::{analytic, lrw_waf};

#[test]
fn greedy_waf_is_bounded_by_the_lrw_model() {
    for op in [0.07, 0.15, 0.3] {
        let r = analytic(op);
        assert!(r.pass, "op {op}: {r:?}");
        assert!(r.greedy_waf <= r.lrw_waf * 1.02, "op {op}: greedy above the LRW bound: {r:?}");
        assert!(r.greedy_waf >= 0.8 * lrw_waf(1.0 + op), "op {op}: greedy implausibly low: {r:?}");
    }
}
