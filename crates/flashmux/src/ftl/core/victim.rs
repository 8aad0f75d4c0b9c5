//! GC's victim policies: which full block of a plane garbage collection cleans next.
//!
//! # Model
//! Candidates are the plane's full blocks (not free, not open for writing, not being erased);
//! a candidate with every unit valid reclaims nothing, so no policy returns one:
//! - **greedy**: the fewest valid units, from the valid-count buckets (`ftl/buckets.rs`, O(1));
//! - **cost-benefit**: the largest `(1 − u) / 2u × age` (Rosenblum & Ousterhout's LFS
//!   cleaner; `u` the valid fraction, `age` in units written since the block's last program),
//!   a scan of the plane;
//! - **rga** (randomized greedy): `d` distinct full blocks drawn uniformly, the one with the
//!   fewest valid units among them (ties: the lowest block number, as MQSim's ordered set). A
//!   draw whose blocks are all fully valid is drawn again (MQSim skips GC then and draws anew at
//!   the plane's next write; flashmux's GC is not retried per write, so it draws at once: the
//!   victim is distributed the same). After [`RGA_MAX_DRAWS`] such draws greedy's victim is
//!   taken, so GC never stalls on bad luck;
//! - **random**: uniform among the full blocks with something to reclaim. MQSim's RANDOM draws
//!   among all blocks that are not written to, RANDOM_P among the full ones; both skip GC on a
//!   block with nothing invalid and draw again at the next write, which makes the victim
//!   uniform among full blocks with an invalid unit under either: flashmux's `random`. RANDOM_PP
//!   (at least `rho` × pages invalid) is not offered;
//! - **fifo**: the block filled longest ago (smallest write sequence at its last program) among
//!   those with something to reclaim. MQSim queues blocks when they are *opened* and pops the
//!   head even when it reclaims nothing (the block then leaves the queue for good); flashmux
//!   orders by filling, which differs only while a GC block and a host block fill at once, and
//!   skips fully valid blocks.
//!
//! The random draws come from the FTL's own stream, seeded from the scenario's seed with the
//! label `"ftl/gc-victim"` ([`Ftl::set_victim_draws`]): same seed, same victims.
//!
//! # Worked example
//! A plane of 64 blocks of 64 units, RGA with MQSim's `d` = ⌊log2 64⌋ = 6. Of its 60 full
//! blocks, the 6 drawn hold 40, 12, 64, 33, 12 and 50 valid units: the victim is the lower
//! numbered of the two with 12 (52 units reclaimed for 12 copied). Greedy would take the
//! plane's emptiest block, say one with 3 valid units; random any of the 60 with an invalid
//! unit — on average one with about as many valid units as the plane's mean.
//!
//! # Parameters
//! `victim_policy` (`device.ftl.gc_victim`); `d` (`device.ftl.gc_rga_candidates`, blocks, at
//! least 1; default MQSim's ⌊log2(blocks per plane)⌋); the seed (the scenario's `seed`).
//!
//! Source: MQSim, src/ssd/GC_and_WL_Unit_Page_Level.cpp (`Check_gc_required`; `rga_set_size`
//! in the constructor), src/ssd/Flash_Block_Manager_Base.cpp (`Get_a_free_block`, FIFO's
//! `Block_usage_history`); the policies as analysed by Van Houdt (SIGMETRICS 2013) and
//! Desnoyers (SYSTOR 2012).

use super::{BlockState, Ftl, VictimPolicy};
use crate::engine::{rng_for, SimRng};
use crate::units::PlaneId;
use rand::Rng;

/// The label of GC's victim draws, for [`crate::engine::derive_seed`].
const RNG_LABEL: &str = "ftl/gc-victim";
/// RGA's draws of only fully valid blocks before it takes greedy's victim instead.
pub const RGA_MAX_DRAWS: u32 = 64;

/// The victim draws' stream for the scenario seed `seed`.
pub(super) fn rng(seed: u64) -> SimRng {
    rng_for(seed, RNG_LABEL)
}

/// MQSim's RGA sample size: ⌊log2(blocks per plane)⌋, at least 1.
pub fn default_rga_candidates(blocks_per_plane: u32) -> u32 {
    blocks_per_plane.max(2).ilog2()
}

impl Ftl {
    /// Seeds the random victim policies' draws from the scenario's `seed`, and sets RGA's
    /// sample size (`None`: MQSim's default, [`default_rga_candidates`]). Call before the first
    /// write (preconditioning's too) for victims to depend on the seed alone.
    pub fn set_victim_draws(&mut self, seed: u64, rga_candidates: Option<u32>) {
        self.victim_rng = rng(seed);
        if let Some(d) = rga_candidates {
            assert!(d >= 1, "RGA draws at least one block");
            self.rga_candidates = d;
        }
    }

    /// The block GC cleans next in `plane` under the victim policy; `None` if no full block
    /// has an invalid unit.
    pub(super) fn pick_victim(&mut self, plane: PlaneId) -> Option<u32> {
        match self.params.victim_policy {
            VictimPolicy::Greedy => self.buckets.min_below(plane.0, self.units_per_block),
            VictimPolicy::CostBenefit => self.pick_cost_benefit(plane),
            VictimPolicy::Rga => {
                let mut full = self.scan_full(plane, false);
                let pick = self.draw_rga(plane, &mut full);
                self.victim_scratch = full;
                pick
            }
            VictimPolicy::Random => {
                let candidates = self.scan_full(plane, true);
                let pick =
                    (!candidates.is_empty()).then(|| candidates[self.victim_rng.random_range(0..candidates.len())]);
                self.victim_scratch = candidates;
                pick
            }
            VictimPolicy::Fifo => self
                .full_blocks(plane)
                .filter(|&b| self.reclaims(b))
                .min_by_key(|&b| self.blocks[b as usize].last_write_seq),
        }
    }

    /// The full blocks of `plane` in ascending order.
    fn full_blocks(&self, plane: PlaneId) -> impl Iterator<Item = u32> + '_ {
        let first = plane.0 * self.blocks_per_plane;
        (first..first + self.blocks_per_plane).filter(|&b| self.blocks[b as usize].state == BlockState::Full)
    }

    /// Whether cleaning block `b` frees anything (it has an invalid unit).
    fn reclaims(&self, b: u32) -> bool {
        self.blocks[b as usize].valid < self.units_per_block
    }

    /// The full blocks of `plane` (only those that reclaim something if `reclaiming`), in
    /// ascending order, in the reused scratch vector (the caller puts it back).
    fn scan_full(&mut self, plane: PlaneId, reclaiming: bool) -> Vec<u32> {
        let mut out = std::mem::take(&mut self.victim_scratch);
        out.clear();
        out.extend(self.full_blocks(plane).filter(|&b| !reclaiming || self.reclaims(b)));
        out
    }

    /// RGA over `full` (the plane's full blocks, reordered by the draws).
    fn draw_rga(&mut self, plane: PlaneId, full: &mut [u32]) -> Option<u32> {
        if !full.iter().any(|&b| self.reclaims(b)) {
            return None;
        }
        let d = (self.rga_candidates as usize).min(full.len());
        for _ in 0..RGA_MAX_DRAWS {
            // A partial Fisher-Yates shuffle: full[..d] becomes d distinct blocks drawn uniformly.
            for i in 0..d {
                let j = self.victim_rng.random_range(i..full.len());
                full.swap(i, j);
            }
            let best = full[..d].iter().copied().min_by_key(|&b| (self.blocks[b as usize].valid, b));
            if let Some(b) = best.filter(|&b| self.reclaims(b)) {
                return Some(b);
            }
            // Each draw starts from the plane's blocks in order.
            full.sort_unstable();
        }
        self.buckets.min_below(plane.0, self.units_per_block)
    }

    /// Cost-benefit: the largest `(1 − u) / 2u × age`. Age changes for every block at every
    /// write: no index keeps it sorted, so this scans the plane (once per GC run).
    fn pick_cost_benefit(&self, plane: PlaneId) -> Option<u32> {
        let upb = self.units_per_block;
        let now = self.write_seq;
        let score = |b: u32| {
            let blk = &self.blocks[b as usize];
            let u = blk.valid as f64 / upb as f64;
            if u == 0.0 {
                return f64::INFINITY;
            }
            let age = (now - blk.last_write_seq) as f64 + 1.0;
            (1.0 - u) / (2.0 * u) * age
        };
        // Highest score; ties go to the lowest block number (max_by keeps the last max).
        self.full_blocks(plane)
            .filter(|&b| self.reclaims(b))
            .fold(None, |best: Option<(u32, f64)>, b| {
                let s = score(b);
                match best {
                    Some((_, bs)) if bs >= s => best,
                    _ => Some((b, s)),
                }
            })
            .map(|(b, _)| b)
    }
}

#[cfg(test)]
mod tests;
