//! MoTS, paper D's Manager of Time Slice: the part of `mcfq` that watches whether bandwidth
//! follows the weights and rescales the tenants' CFQ slices when it does not.
//!
//! # Model
//! One manager per device. Every `interval` (1 s) it samples each tenant's bandwidth on the
//! device (bytes of the requests that completed in that interval, reads and writes, as `iostat`
//! reports). The tenant with the least weight is the TVM; its slice is never changed. For every
//! other tenant (an RVM), at each sample `s`:
//! - `IP = weight(RVM) / weight(TVM)`, the ideal proportion;
//! - `BWR`, `BWT` = the mean bandwidth of the RVM and of the TVM over the last `window` samples
//!   (the paper's BW, 10 s), or over all samples while fewer exist;
//! - `F = IP / (BWR / BWT)`: weights 10 : 1 but bandwidths 5 : 1 give F = 2;
//! - `F_s = mean(F over the previous window) × F` (the current F alone at the first sample);
//! - the RVM's slice multiplier is `mean(F_s over the window)`, bounded to
//!   `[min_scale, max_scale]`.
//!
//! This is the paper's Fig. 5 read literally (`reading = "printed"`, the default): the
//! multiplier applies to CFQ's own slice (it does not compound from sample to sample), and F is
//! measured under the current multipliers. In steady state `F_s = F²`, so if CFQ alone gives an
//! RVM `1/k` of its ideal proportion and bandwidth follows the slice, MoTS settles where
//! `F = k^(1/3)`: a 25% shortfall (k = 1.25) becomes 7.4%. The paper's prose ("multiplies [it]
//! to the VM's time slice") also reads as the slice as it then is: `reading = "compounding"`
//! makes each sample's `mean(F_s)` multiply the current multiplier, so the loop integrates and
//! settles where F = 1, through whatever overshoot its lag gives (the paper's Table 1 is above
//! its weights). Example: weights 10 : 1, bandwidths 5 : 1 at the first two samples: printed,
//! the multiplier is 4, then 4 again; compounding, 4, then 16 (bounded by `max_scale`). A sample
//! in which the RVM or the TVM moved no data says nothing about the proportion: it adds no F
//! (the bandwidth means still include it).
//!
//! Parameters: `interval` (1 s), `window` (10 samples), `min_scale` (1/8), `max_scale` (8),
//! `reading` (printed or compounding).
//! Source: J. K. Park, "An MCFQ I/O scheduler considering virtual machine bandwidth
//! distribution", JKSCI 2015 (paper D in `SEEDS.md`).

use crate::units::{Nanos, SimTime};
use serde::Serialize;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MotsParams {
    /// How often bandwidth is sampled and slices rescaled.
    pub interval: Nanos,
    /// The bandwidth window BW, in samples.
    pub window: u32,
    pub min_scale: f64,
    pub max_scale: f64,
    /// Each sample's multiplier multiplies the current one instead of CFQ's slice (see the header).
    pub compounding: bool,
}

impl MotsParams {
    /// Checks the parameters; the error names the key (`host.mcfq.*`).
    pub fn validate(&self) -> Result<(), String> {
        if self.interval < Nanos::from_ms(1) {
            return Err("host.mcfq.interval: must be at least 1ms".into());
        }
        if self.window == 0 {
            return Err("host.mcfq.window: must be at least one sampling interval".into());
        }
        let (min, max) = (self.min_scale, self.max_scale);
        if !(min > 0.0 && min <= 1.0 && (1.0..=1000.0).contains(&max)) {
            return Err(format!(
                "host.mcfq: min_scale = {min}, max_scale = {max}: expected 0 < min_scale <= 1 <= max_scale <= 1000"
            ));
        }
        Ok(())
    }
}

impl Default for MotsParams {
    fn default() -> Self {
        MotsParams { interval: Nanos::from_secs(1), window: 10, min_scale: 0.125, max_scale: 8.0, compounding: false }
    }
}

struct Tenant {
    weight: u32,
    /// Bytes completed in the current interval.
    bytes: u64,
    /// Bandwidth (bytes/s) of the last `window` intervals.
    bw: VecDeque<f64>,
    f: VecDeque<f64>,
    f_s: VecDeque<f64>,
    scale: f64,
}

pub struct Mots {
    p: MotsParams,
    tenants: Vec<Tenant>,
    tvm: usize,
    /// End of the current sampling interval.
    next_sample: SimTime,
}

fn push_window(q: &mut VecDeque<f64>, v: f64, window: u32) {
    if q.len() == window as usize {
        q.pop_front();
    }
    q.push_back(v);
}

fn mean(q: &VecDeque<f64>) -> Option<f64> {
    (!q.is_empty()).then(|| q.iter().sum::<f64>() / q.len() as f64)
}

impl Mots {
    pub fn new(p: MotsParams, weights: &[u32]) -> Mots {
        // The first tenant of least weight is the TVM.
        let tvm = (0..weights.len()).min_by_key(|&t| (weights[t], t)).unwrap_or(0);
        let tenants = weights
            .iter()
            .map(|&weight| Tenant {
                weight,
                bytes: 0,
                bw: VecDeque::new(),
                f: VecDeque::new(),
                f_s: VecDeque::new(),
                scale: 1.0,
            })
            .collect();
        Mots { p, tenants, tvm, next_sample: SimTime::ZERO + p.interval }
    }

    pub fn tvm(&self) -> usize {
        self.tvm
    }

    /// The slice multiplier of tenant `t`.
    pub fn scale(&self, t: usize) -> f64 {
        self.tenants[t].scale
    }

    /// A request of tenant `t` completed `bytes` at `now`.
    pub fn record(&mut self, now: SimTime, t: usize, bytes: u64) {
        self.advance(now);
        self.tenants[t].bytes += bytes;
    }

    /// Takes every sample whose interval ended by `now`.
    pub fn advance(&mut self, now: SimTime) {
        while now >= self.next_sample {
            self.sample();
            self.next_sample += self.p.interval;
        }
    }

    fn sample(&mut self) {
        let secs = self.p.interval.as_secs_f64();
        let window = self.p.window;
        for t in &mut self.tenants {
            push_window(&mut t.bw, t.bytes as f64 / secs, window);
            t.bytes = 0;
        }
        let tvm = &self.tenants[self.tvm];
        let (w_t, bwt) = (tvm.weight, mean(&tvm.bw).unwrap_or(0.0));
        let moved = |t: &Tenant| t.bw.back().is_some_and(|&b| b > 0.0);
        let tvm_moved = moved(tvm);
        for (i, t) in self.tenants.iter_mut().enumerate() {
            if i == self.tvm || !tvm_moved || !moved(t) {
                continue;
            }
            let bwr = mean(&t.bw).expect("a sample was just taken");
            let ip = t.weight as f64 / w_t as f64;
            let f = ip / (bwr / bwt);
            let f_s = mean(&t.f).unwrap_or(f) * f;
            push_window(&mut t.f, f, window);
            push_window(&mut t.f_s, f_s, window);
            let m = mean(&t.f_s).unwrap_or(1.0);
            let scale = if self.p.compounding { t.scale * m } else { m };
            t.scale = scale.clamp(self.p.min_scale, self.p.max_scale);
        }
    }

    pub fn check_invariants(&self) {
        for t in &self.tenants {
            assert!(t.scale >= self.p.min_scale && t.scale <= self.p.max_scale, "MoTS scale out of bounds");
            assert!(t.bw.len() <= self.p.window as usize && t.f_s.len() <= self.p.window as usize);
        }
        assert_eq!(self.tenants[self.tvm].scale, 1.0, "the TVM's slice is never changed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> SimTime {
        SimTime::ZERO + Nanos::from_secs(s)
    }

    #[test]
    fn compounding_multiplies_the_current_multiplier() {
        // The header's example: 5 : 1 against weights 10 : 1 at two samples. Printed: 4, 4;
        // compounding: 4, then 4 × mean(F_s) = 16, or max_scale (8) by default.
        for (compounding, max_scale, second) in [(false, 8.0, 4.0), (true, 8.0, 8.0), (true, 100.0, 16.0)] {
            let p = MotsParams { compounding, max_scale, ..Default::default() };
            let mut m = Mots::new(p, &[10, 1]);
            for s in 0..2 {
                m.record(secs(s), 0, 5_000_000);
                m.record(secs(s), 1, 1_000_000);
                m.advance(secs(s + 1));
                let want = if s == 0 { 4.0 } else { second };
                assert_eq!(m.scale(0), want, "compounding {compounding}, max_scale {max_scale}, sample {s}");
            }
        }
    }

    #[test]
    fn the_papers_example_doubles_the_slice_then_smooths() {
        // Weights 10 : 1 (RVM, TVM), bandwidths 5 : 1 → F = 2; the first F_s is F² = 4.
        let mut m = Mots::new(MotsParams::default(), &[10, 1]);
        assert_eq!(m.tvm(), 1);
        m.record(secs(0), 0, 5_000_000);
        m.record(secs(0), 1, 1_000_000);
        m.advance(secs(1));
        assert_eq!(m.scale(0), 4.0);
        assert_eq!(m.scale(1), 1.0);
        // Second second at exactly 10 : 1: window means 7.5 : 1 → F = 4/3; F_s = mean(2) × 4/3;
        // the multiplier is the mean of both F_s.
        m.record(secs(1), 0, 10_000_000);
        m.record(secs(1), 1, 1_000_000);
        m.advance(secs(2));
        let f = 10.0 / 7.5;
        let expect = (4.0 + 2.0 * f) / 2.0;
        assert!((m.scale(0) - expect).abs() < 1e-12, "{} vs {expect}", m.scale(0));
    }

    #[test]
    fn window_forgets_and_bounds_hold() {
        let p = MotsParams { window: 2, ..Default::default() };
        let mut m = Mots::new(p, &[4, 1, 4]);
        for s in 0..10 {
            // Tenant 0 gets nothing against the TVM: no evidence, no change.
            m.record(secs(s), 1, 1_000_000);
            // Tenant 2 gets 100× its share: the multiplier falls to the floor.
            m.record(secs(s), 2, 400_000_000);
        }
        m.advance(secs(10));
        assert_eq!(m.scale(0), 1.0);
        assert_eq!(m.scale(2), 0.125);
        m.check_invariants();
    }

    #[test]
    fn at_the_ideal_proportion_nothing_changes() {
        let mut m = Mots::new(MotsParams::default(), &[10, 7, 4, 1]);
        for s in 0..30 {
            for (t, w) in [10u64, 7, 4, 1].into_iter().enumerate() {
                m.record(secs(s), t, w * 1_000_000);
            }
        }
        m.advance(secs(30));
        for t in 0..4 {
            assert!((m.scale(t) - 1.0).abs() < 1e-12);
        }
    }
}
