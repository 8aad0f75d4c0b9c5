//! The arithmetic of two budget schedulers: `fair` (BCQ's per-request cost regression) and
//! `hwa-bc` (host-level workload-aware budget compensation on an open-channel SSD). Pure logic:
//! no scheduler state, no simulator; the schedulers call into it.
//!
//! # Model
//!
//! **Units.** Requests are counted in 4 KiB units, partial units rounded up ([`units_4k`]): a
//! 16 KiB write is 4 write units, a 6 KiB read 2 read units.
//!
//! **Cost regression (BCQ).** Completions are grouped into *windows* of `window_requests`
//! requests (2,500). Window `k` gives one equation
//!
//! ```text
//! T_k = Nr_k · Cr + Nw_k · Cw
//! ```
//!
//! where `Nr_k`, `Nw_k` are the read and write units completed in the window and `T_k` the time
//! it took: from the completion that closed the previous window (for the first window, from the
//! first completion ever, which only starts the clock and is counted in no window) to the
//! completion that closes it. The last `n` equations (20) are kept; with `A` the `n × 2` matrix
//! of rows `[Nr_k Nw_k]` the prices are the least-squares solution
//!
//! ```text
//! C = (Cr, Cw) = (AᵀA)⁻¹ AᵀT,   i.e. with S_xy = Σ_k x_k·y_k:
//! det = S_rr·S_ww − S_rw²
//! Cr  = (S_ww·S_rT − S_rw·S_wT) / det
//! Cw  = (S_rr·S_wT − S_rw·S_rT) / det
//! ```
//!
//! in nanoseconds of device time per unit. The fit is redone once per window (`O(n)`), never per
//! request. Until `n` windows exist the prices are the configured initial ones, the same for
//! every tenant. Prices are always finite and strictly positive; where the data cannot give such
//! a price the previous one is kept:
//! - *No reads (or no writes) in any kept window* (`S_rr = 0`): the other column alone explains
//!   `T`: `Cw = ΣT / ΣNw` (resp. `Cr = ΣT / ΣNr`); the absent one keeps its previous value.
//! - *Ill-conditioned* (the two columns proportional or nearly so, `det ≤ 10⁻⁹ · S_rr·S_ww`,
//!   i.e. the columns' angle has `1 − cos²θ ≤ 10⁻⁹`): only the price of the common mix is
//!   determined, not the split, so the previous ratio `Cr : Cw` is kept and both are scaled by
//!   `s = ΣT / (Cr·ΣNr + Cw·ΣNw)`.
//! - *A non-positive coefficient* (noise in a nearly collinear system): that price keeps its
//!   previous value `c`, and the other is re-estimated with it fixed, e.g.
//!   `Cw = Σ(T − Nr·c) / ΣNw`. If that is not positive either, both keep their previous values.
//!
//! **Two regressions.** Each window carries whether GC ran at any time during it (reported with
//! each completion or by [`CostRegression::note_gc`]). The *baseline* regression keeps only
//! windows without GC and gives the no-GC prices `Cr, Cw`; the *current* regression keeps all
//! windows and gives `Cr', Cw'`, which include the cost of GC when GC runs. For every window
//! with GC, once both regressions have been fitted at least once, the window's *extra GC cost*
//! is, with the prices after the refit this window triggered,
//!
//! ```text
//! GC_k = max(0, (Cr' − Cr)·Nr_k + (Cw' − Cw)·Nw_k)
//! ```
//!
//! Before then it is 0: the initial prices are placeholders, and a difference against them would
//! charge tenants for a guess.
//!
//! **Randomness of update writes (hWA-BC).** The host FTL knows from its L2P table which writes
//! overwrite mapped data (*updates*). For a tenant's updates only, a write of `u` units at `lpn`
//! continues the tenant's current run if `lpn` is where its previous update ended, else it
//! starts a new run. At the end of each observation interval, for every tenant with an update in
//! it (a run still open counts with its length so far; the next interval starts fresh):
//!
//! ```text
//! SeqLen_window = (update units in the interval) / (runs in the interval)
//! SeqLen_i ← α·SeqLen_window + (1 − α)·SeqLen_i     (the first time: SeqLen_i = SeqLen_window)
//! ```
//!
//! Tenants without an update in the interval keep their value. `α = 0.5` by default: the paper
//! does not give it, so this is an assumption.
//!
//! **Contribution and distribution.** Over the tenants with a `SeqLen`:
//!
//! ```text
//! R_i = (1/SeqLen_i) / Σ_j (1/SeqLen_j)          randomness, Σ R = 1
//! G_i = max(0, a·ln(R_i) + b)                    contribution to GC
//! cost_i = C_user,i + (Σ_j GC_j) · G_i / Σ_j G_j
//! ```
//!
//! Tenants without a `SeqLen` have `G = 0`. The clamp matters because `ln R → −∞` as `R → 0`: a
//! tenant writing almost sequentially next to random writers would get a negative contribution
//! (a GC *credit*) with `a > 0`; it gets none instead. `C_user,i` is the tenant's own I/O at the
//! baseline prices. When `Σ G = 0` there are no shares and the caller charges GC in proportion
//! to throughput, as the paper does before compensation. `a` and `b` come from profiling runs:
//! [`fit_log`] regresses the measured share of valid pages GC collected for each tenant on
//! `ln R`. The paper observes that of two tenants whose randomness is 16 : 1 the more random one
//! contributes about 8× the valid pages collected (shares 8/9 and 1/9), which needs `b ≈ 3.23·a`.
//!
//! Everything here is deterministic: fixed-order floating-point sums over `Vec`s and
//! `VecDeque`s, no randomness, no clock.

use crate::units::{Lpn, Nanos, SimTime, TenantId};
use serde::Serialize;
use std::collections::VecDeque;

/// Bytes in one cost unit.
pub const UNIT_BYTES: u64 = 4096;

/// Below this, `det / (S_rr·S_ww)` (that is `1 − cos²θ` between the read and write columns) is
/// treated as singular: the columns are (nearly) proportional and their split is not determined.
pub const MIN_REL_DET: f64 = 1e-9;

/// The number of 4 KiB units a request of `bytes` counts as (partial units rounded up).
pub fn units_4k(bytes: u64) -> u64 {
    bytes.div_ceil(UNIT_BYTES)
}

/// Prices of one 4 KiB unit, in nanoseconds of device time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Costs {
    /// Price of one read unit (`Cr`).
    pub read_ns: f64,
    /// Price of one write unit (`Cw`).
    pub write_ns: f64,
}

impl Costs {
    /// The price of `read_units` reads and `write_units` writes: `Nr·Cr + Nw·Cw`.
    pub fn charge(&self, read_units: u64, write_units: u64) -> f64 {
        self.charge_f(read_units as f64, write_units as f64)
    }

    /// `Nr·Cr + Nw·Cw` for unit counts already in floating point.
    fn charge_f(&self, nr: f64, nw: f64) -> f64 {
        nr * self.read_ns + nw * self.write_ns
    }

    fn is_valid(&self) -> bool {
        positive(self.read_ns) && positive(self.write_ns)
    }
}

/// Parameters of [`CostRegression`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CostParams {
    /// Completed requests per window (BCQ: 2,500).
    pub window_requests: u32,
    /// Windows `n` kept in each regression (BCQ: 20).
    pub windows: u32,
    /// Prices used until a regression has `n` windows; finite and positive.
    pub initial: Costs,
}

impl Default for CostParams {
    /// BCQ's window and history; the initial prices are placeholders (equal read and write
    /// prices of 10 µs per unit) that hold only until the first fit.
    fn default() -> Self {
        CostParams { window_requests: 2_500, windows: 20, initial: Costs { read_ns: 10_000.0, write_ns: 10_000.0 } }
    }
}

impl CostParams {
    /// Checks the parameters; the error names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        if self.window_requests == 0 {
            return Err(
                "cost regression: window_requests must be at least 1 (a window of zero requests never closes)".into()
            );
        }
        if self.windows == 0 {
            return Err("cost regression: windows (n) must be at least 1 (no equation to fit)".into());
        }
        if !self.initial.is_valid() {
            return Err(format!(
                "cost regression: initial costs must be finite and positive, got read {} ns, write {} ns",
                self.initial.read_ns, self.initial.write_ns
            ));
        }
        Ok(())
    }
}

/// What one closed window measured, returned by [`CostRegression::record`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WindowSummary {
    /// Read units completed in the window (`Nr`).
    pub read_units: u64,
    /// Write units completed in the window (`Nw`).
    pub write_units: u64,
    /// Time the window took (`T`).
    pub duration: Nanos,
    /// Whether GC ran at any time during the window.
    pub gc: bool,
    /// `max(0, (Cr'−Cr)·Nr + (Cw'−Cw)·Nw)` in ns for a GC window once both regressions have
    /// been fitted; 0 otherwise.
    pub extra_gc_ns: f64,
    /// The current prices `Cr', Cw'` after this window.
    pub current: Costs,
    /// The no-GC baseline prices `Cr, Cw` after this window.
    pub baseline: Costs,
}

/// One least-squares fit over the last `n` windows it was given.
#[derive(Clone, Debug)]
struct Fit {
    /// `(Nr, Nw, T)` of the kept windows, oldest first.
    rows: VecDeque<(f64, f64, f64)>,
    n: usize,
    costs: Costs,
    /// Whether a refit has happened (the history was full at least once).
    fitted: bool,
}

impl Fit {
    fn new(n: u32, initial: Costs) -> Fit {
        Fit { rows: VecDeque::with_capacity(n as usize), n: n as usize, costs: initial, fitted: false }
    }

    /// Adds a window and refits once `n` windows are kept.
    fn push(&mut self, nr: f64, nw: f64, t: f64) {
        if self.rows.len() == self.n {
            self.rows.pop_front();
        }
        self.rows.push_back((nr, nw, t));
        if self.rows.len() == self.n {
            self.costs = solve(&self.rows, self.costs);
            self.fitted = true;
        }
    }
}

/// Whether `x` is finite and strictly positive.
fn positive(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

/// `x` if finite and positive, else `prev`.
fn or_prev(x: f64, prev: f64) -> f64 {
    if positive(x) {
        x
    } else {
        prev
    }
}

/// The least-squares prices over `rows`, with the fallbacks of the module documentation;
/// `prev` (finite and positive) supplies what the data cannot determine.
fn solve(rows: &VecDeque<(f64, f64, f64)>, prev: Costs) -> Costs {
    let (mut s_r, mut s_w, mut s_t) = (0.0, 0.0, 0.0);
    let (mut s_rr, mut s_ww, mut s_rw, mut s_rt, mut s_wt) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(r, w, t) in rows {
        s_r += r;
        s_w += w;
        s_t += t;
        s_rr += r * r;
        s_ww += w * w;
        s_rw += r * w;
        s_rt += r * t;
        s_wt += w * t;
    }
    // One price fixed at its previous value, the other from the rest of T by column ratio.
    let write_given_read = |cr: f64| Costs { read_ns: cr, write_ns: or_prev((s_t - cr * s_r) / s_w, prev.write_ns) };
    let read_given_write = |cw: f64| Costs { read_ns: or_prev((s_t - cw * s_w) / s_r, prev.read_ns), write_ns: cw };
    match (s_rr > 0.0, s_ww > 0.0) {
        (false, false) => return prev,
        (false, true) => return write_given_read(prev.read_ns),
        (true, false) => return read_given_write(prev.write_ns),
        (true, true) => {}
    }
    let det = s_rr * s_ww - s_rw * s_rw;
    if det <= MIN_REL_DET * s_rr * s_ww {
        // Collinear: keep the split, fit the level.
        let s = s_t / prev.charge_f(s_r, s_w);
        let scaled = Costs { read_ns: prev.read_ns * s, write_ns: prev.write_ns * s };
        return if scaled.is_valid() { scaled } else { prev };
    }
    let cr = (s_ww * s_rt - s_rw * s_wt) / det;
    let cw = (s_rr * s_wt - s_rw * s_rt) / det;
    match (positive(cr), positive(cw)) {
        (true, true) => Costs { read_ns: cr, write_ns: cw },
        (false, true) => write_given_read(prev.read_ns),
        (true, false) => read_given_write(prev.write_ns),
        (false, false) => prev,
    }
}

/// BCQ's per-unit cost regression, kept twice: over windows without GC (baseline) and over all
/// windows (current). See the module documentation for the model.
#[derive(Clone, Debug)]
pub struct CostRegression {
    params: CostParams,
    baseline: Fit,
    current: Fit,
    /// Start of the open window; `None` before the first completion.
    start: Option<SimTime>,
    requests: u32,
    read_units: u64,
    write_units: u64,
    gc: bool,
    windows_seen: u64,
}

impl CostRegression {
    /// A regression with no windows yet. Panics if `params` do not validate (check
    /// [`CostParams::validate`] first for a message).
    pub fn new(params: CostParams) -> CostRegression {
        if let Err(e) = params.validate() {
            panic!("{e}");
        }
        CostRegression {
            params,
            baseline: Fit::new(params.windows, params.initial),
            current: Fit::new(params.windows, params.initial),
            start: None,
            requests: 0,
            read_units: 0,
            write_units: 0,
            gc: false,
            windows_seen: 0,
        }
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &CostParams {
        &self.params
    }

    /// Marks the open window as one during which GC ran (for GC observed between completions).
    pub fn note_gc(&mut self) {
        self.gc = true;
    }

    /// A request of `read_units` read and `write_units` write units completed at `now`, with GC
    /// running (`gc_running`) or not. The first call ever only starts the clock. Returns the
    /// window's summary when this completion closes a window (then both fits are updated).
    pub fn record(
        &mut self,
        now: SimTime,
        read_units: u64,
        write_units: u64,
        gc_running: bool,
    ) -> Option<WindowSummary> {
        let Some(start) = self.start else {
            self.start = Some(now);
            self.gc |= gc_running;
            return None;
        };
        self.gc |= gc_running;
        self.read_units += read_units;
        self.write_units += write_units;
        self.requests += 1;
        if self.requests < self.params.window_requests {
            return None;
        }
        let (nr, nw, gc) = (self.read_units, self.write_units, self.gc);
        let duration = now.since(start);
        let (fr, fw, ft) = (nr as f64, nw as f64, duration.ns() as f64);
        self.current.push(fr, fw, ft);
        if !gc {
            self.baseline.push(fr, fw, ft);
        }
        let (cur, base) = (self.current.costs, self.baseline.costs);
        let extra_gc_ns = if gc && self.current.fitted && self.baseline.fitted {
            let extra = (cur.read_ns - base.read_ns) * fr + (cur.write_ns - base.write_ns) * fw;
            extra.max(0.0)
        } else {
            0.0
        };
        self.start = Some(now);
        self.requests = 0;
        self.read_units = 0;
        self.write_units = 0;
        self.gc = false;
        self.windows_seen += 1;
        Some(WindowSummary { read_units: nr, write_units: nw, duration, gc, extra_gc_ns, current: cur, baseline: base })
    }

    /// The current prices `Cr', Cw'` (all windows, GC included).
    pub fn current(&self) -> Costs {
        self.current.costs
    }

    /// The no-GC baseline prices `Cr, Cw` (windows without GC only).
    pub fn baseline(&self) -> Costs {
        self.baseline.costs
    }

    /// Whether the current prices have been fitted (n windows seen).
    pub fn current_fitted(&self) -> bool {
        self.current.fitted
    }

    /// Whether the baseline prices have been fitted (n windows without GC seen).
    pub fn baseline_fitted(&self) -> bool {
        self.baseline.fitted
    }

    /// Windows closed so far.
    pub fn windows_seen(&self) -> u64 {
        self.windows_seen
    }

    /// Panics if a price is not finite and positive or a history is longer than `n`.
    pub fn check_invariants(&self) {
        for f in [&self.baseline, &self.current] {
            assert!(f.costs.is_valid(), "cost regression: invalid prices {:?}", f.costs);
            assert!(f.rows.len() <= f.n, "cost regression: more than n windows kept");
        }
        assert!(self.requests < self.params.window_requests, "cost regression: a full window was not closed");
    }
}

/// One tenant's update-write runs.
#[derive(Clone, Debug, Default)]
struct TenantRuns {
    /// Where the tenant's previous update in this interval ended (the next LPN of its run).
    next: Option<u64>,
    /// Update units in this interval.
    units: u64,
    /// Runs started in this interval.
    runs: u64,
    /// The moving average `SeqLen_i`.
    seq_len: Option<f64>,
}

/// Per tenant, the moving average of the mean run length (in units) of its update writes.
#[derive(Clone, Debug)]
pub struct SeqTracker {
    alpha: f64,
    tenants: Vec<TenantRuns>,
}

impl SeqTracker {
    /// The assumed smoothing factor (the paper does not give one).
    pub const DEFAULT_ALPHA: f64 = 0.5;

    /// A tracker with smoothing factor `alpha`, which must be in `(0, 1)`.
    pub fn new(alpha: f64) -> Result<SeqTracker, String> {
        if alpha.is_nan() || alpha <= 0.0 || alpha >= 1.0 {
            return Err(format!("sequentiality tracker: alpha must be in (0, 1), got {alpha}"));
        }
        Ok(SeqTracker { alpha, tenants: Vec::new() })
    }

    /// The smoothing factor.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// A write of `units` mapping units starting at `lpn` by `tenant`; `update` tells whether it
    /// overwrites mapped data. Writes that are not updates, and empty writes, are ignored (they
    /// neither extend nor break a run).
    pub fn record_write(&mut self, tenant: TenantId, lpn: Lpn, units: u64, update: bool) {
        if !update || units == 0 {
            return;
        }
        let i = tenant.index();
        if self.tenants.len() <= i {
            self.tenants.resize_with(i + 1, TenantRuns::default);
        }
        let t = &mut self.tenants[i];
        let start = lpn.0 as u64;
        if t.next != Some(start) {
            t.runs += 1;
        }
        t.units += units;
        t.next = Some(start + units);
    }

    /// Ends the observation interval: updates `SeqLen` of every tenant with an update in it and
    /// starts the next interval with no open run.
    pub fn end_interval(&mut self) {
        let alpha = self.alpha;
        for t in &mut self.tenants {
            if t.runs > 0 {
                let window = t.units as f64 / t.runs as f64;
                t.seq_len = Some(match t.seq_len {
                    Some(prev) => alpha * window + (1.0 - alpha) * prev,
                    None => window,
                });
            }
            t.next = None;
            t.units = 0;
            t.runs = 0;
        }
    }

    /// `SeqLen` of `tenant`, if it has had an update in a finished interval.
    pub fn seq_len(&self, tenant: TenantId) -> Option<f64> {
        self.tenants.get(tenant.index()).and_then(|t| t.seq_len)
    }

    /// `SeqLen` of tenants `0..tenants`, in order (the input of [`gc_shares`]).
    pub fn seq_lens(&self, tenants: usize) -> Vec<Option<f64>> {
        (0..tenants).map(|i| self.tenants.get(i).and_then(|t| t.seq_len)).collect()
    }
}

/// `R_i = (1/SeqLen_i) / Σ_j (1/SeqLen_j)` over the tenants with a `SeqLen`; `None` for the
/// others, and for a `SeqLen` that is not finite and positive (treated as absent).
pub fn randomness(seq: &[Option<f64>]) -> Vec<Option<f64>> {
    let inv: Vec<Option<f64>> = seq.iter().map(|s| s.filter(|&s| positive(s)).map(|s| 1.0 / s)).collect();
    let total: f64 = inv.iter().flatten().sum();
    inv.into_iter().map(|x| x.map(|x| x / total)).collect()
}

/// `G = max(0, a·ln(R) + b)`: the contribution to GC of a tenant of randomness `R` (0 for an `R`
/// that is not finite and positive).
pub fn contribution(r: f64, a: f64, b: f64) -> f64 {
    if !positive(r) {
        return 0.0;
    }
    let g = a * r.ln() + b;
    if g.is_finite() {
        g.max(0.0)
    } else {
        0.0
    }
}

/// Each tenant's share `G_i / Σ_j G_j` of the GC cost, from the tenants' `SeqLen` (absent: G = 0);
/// `None` when `Σ G = 0` (then GC is charged in proportion to throughput).
pub fn gc_shares(seq: &[Option<f64>], a: f64, b: f64) -> Option<Vec<f64>> {
    let g: Vec<f64> = randomness(seq).into_iter().map(|r| r.map_or(0.0, |r| contribution(r, a, b))).collect();
    normalised(&g)
}

/// `x_i / Σ x`, or `None` when the sum is not finite and positive.
pub fn normalised(x: &[f64]) -> Option<Vec<f64>> {
    let total: f64 = x.iter().sum();
    positive(total).then(|| x.iter().map(|v| v / total).collect())
}

/// Each tenant's charge `extra_gc_ns · share_i` of a window's extra GC cost.
pub fn gc_charges(extra_gc_ns: f64, shares: &[f64]) -> Vec<f64> {
    shares.iter().map(|s| extra_gc_ns * s).collect()
}

/// The paper's `cost_i = C_user,i + GC_i`: the tenant's own units at the `baseline` prices
/// plus its GC charge.
pub fn tenant_cost(baseline: Costs, read_units: u64, write_units: u64, gc_charge_ns: f64) -> f64 {
    baseline.charge(read_units, write_units) + gc_charge_ns
}

/// Fits `G = a·ln(R) + b` by ordinary least squares of `G` on `ln R` over profiled `(R, G share)`
/// points; returns `(a, b)`. Errors on a non-finite point, an `R` that is not positive, or fewer
/// than two distinct `R` values.
pub fn fit_log(points: &[(f64, f64)]) -> Result<(f64, f64), String> {
    for &(r, g) in points {
        if !positive(r) {
            return Err(format!("fit_log: randomness R must be finite and positive, got {r}"));
        }
        if !g.is_finite() {
            return Err(format!("fit_log: contribution G must be finite, got {g}"));
        }
    }
    let few = || Err(format!("fit_log: needs at least two distinct values of R, got {} points", points.len()));
    if points.len() < 2 {
        return few();
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0.ln()).sum::<f64>() / n;
    let mean_g = points.iter().map(|p| p.1).sum::<f64>() / n;
    let (mut sxx, mut sxg) = (0.0, 0.0);
    for &(r, g) in points {
        let dx = r.ln() - mean_x;
        sxx += dx * dx;
        sxg += dx * (g - mean_g);
    }
    if !positive(sxx) {
        return few();
    }
    let a = sxg / sxx;
    Ok((a, mean_g - a * mean_x))
}

#[cfg(test)]
mod tests;
