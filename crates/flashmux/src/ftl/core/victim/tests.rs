//! The victim policies against simple reference implementations, their seeding, and the
//! ordering of their write amplification.

use super::super::{BlockState, Ftl, FtlParams, VictimPolicy};
use crate::engine::{rng_for, SimRng};
use crate::flash::Geometry;
use crate::units::{Lpn, Placement, PlaneId};
use proptest::prelude::*;
use rand::Rng;

/// One plane of `blocks` blocks of `pages` single-unit pages.
fn one_plane(blocks: u32, pages: u32) -> Geometry {
    Geometry {
        channels: 1,
        chips_per_channel: 1,
        dies_per_chip: 1,
        planes_per_die: 1,
        blocks_per_plane: blocks,
        pages_per_block: pages,
        page_bytes: 4096,
        unit_bytes: 4096,
    }
}

fn ftl(geo: &Geometry, logical_blocks: u32, policy: VictimPolicy, seed: u64, d: Option<u32>) -> Ftl {
    let logical = (logical_blocks * geo.pages_per_block) as u64;
    let params =
        FtlParams { logical_units: logical, victim_policy: policy, gc_threshold_blocks: 2, map_entries_per_page: None, placements: Default::default(), zoned: None };
    let mut f = Ftl::new(geo, params).unwrap();
    f.set_victim_draws(seed, d);
    f
}

/// Writes `lpn` as preconditioning does (GC's erases end at once), returning the victims.
fn write(f: &mut Ftl, lpn: u32, victims: &mut Vec<u32>) {
    f.program_host(PlaneId(0), Lpn(lpn), 0, Placement(0));
    while let Some(job) = f.take_gc_job() {
        victims.push(job.victim);
        f.finish_erase(job.victim);
    }
}

/// (block, valid units) of the plane's full blocks, in ascending order.
fn full_blocks(f: &Ftl) -> Vec<(u32, u32)> {
    (0..f.blocks_per_plane)
        .filter(|&b| f.blocks[b as usize].state == BlockState::Full)
        .map(|b| (b, f.blocks[b as usize].valid))
        .collect()
}

/// RGA as specified: d distinct full blocks dealt uniformly from the plane's full blocks in
/// order, the fewest valid units (lowest block on ties); dealt again while none reclaims
/// anything, greedy after `RGA_MAX_DRAWS` deals.
fn reference_rga(full: &[(u32, u32)], upb: u32, d: usize, rng: &mut SimRng) -> Option<u32> {
    if full.iter().all(|&(_, v)| v == upb) {
        return None;
    }
    let d = d.min(full.len());
    for _ in 0..super::RGA_MAX_DRAWS {
        let mut deck = full.to_vec();
        let mut hand = Vec::new();
        for i in 0..d {
            let j = rng.random_range(i..deck.len());
            deck.swap(i, j);
            hand.push(deck[i]);
        }
        let (b, v) = hand.into_iter().min_by_key(|&(b, v)| (v, b)).unwrap();
        if v < upb {
            return Some(b);
        }
    }
    full.iter().filter(|&&(_, v)| v < upb).min_by_key(|&&(_, v)| v).map(|&(b, _)| b)
}

/// Random: uniform over the full blocks with an invalid unit, in block order.
fn reference_random(full: &[(u32, u32)], upb: u32, rng: &mut SimRng) -> Option<u32> {
    let c: Vec<u32> = full.iter().filter(|&&(_, v)| v < upb).map(|&(b, _)| b).collect();
    (!c.is_empty()).then(|| c[rng.random_range(0..c.len())])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// After any run of writes, each policy's next victim is the reference's, drawn from the
    /// same stream (rga with d from 1 to above the plane's block count; FIFO against the
    /// order in which the test saw blocks fill).
    #[test]
    fn policies_match_their_reference(
        policy in 0u8..3,
        d in 1u32..20,
        seed in any::<u64>(),
        writes in proptest::collection::vec(0u32..40, 1..600),
    ) {
        let geo = one_plane(16, 4);
        let policy = [VictimPolicy::Rga, VictimPolicy::Random, VictimPolicy::Fifo][policy as usize];
        let mut f = ftl(&geo, 10, policy, seed, (policy == VictimPolicy::Rga).then_some(d));
        let upb = f.units_per_block;
        // (block, write at which the test first saw it full), and the erases it had then.
        let mut filled: Vec<(u32, usize)> = Vec::new();
        let mut erases = vec![0u32; 16];
        let mut victims = Vec::new();
        for (i, &l) in writes.iter().enumerate() {
            write(&mut f, l, &mut victims);
            let full = full_blocks(&f);
            // A block erased since it was seen full was filled again.
            filled.retain(|&(b, _)| {
                full.iter().any(|&(fb, _)| fb == b) && f.blocks[b as usize].erase_count == erases[b as usize]
            });
            for &(b, _) in &full {
                if !filled.iter().any(|&(fb, _)| fb == b) {
                    filled.push((b, i));
                    erases[b as usize] = f.blocks[b as usize].erase_count;
                }
            }
            let mut rng = f.victim_rng.clone();
            let got = f.pick_victim(PlaneId(0));
            match policy {
                VictimPolicy::Rga => prop_assert_eq!(got, reference_rga(&full, upb, d as usize, &mut rng)),
                VictimPolicy::Random => prop_assert_eq!(got, reference_random(&full, upb, &mut rng)),
                _ => {
                    let reclaiming = |b: u32| full.iter().any(|&(fb, v)| fb == b && v < upb);
                    let first = filled.iter().filter(|&&(b, _)| reclaiming(b)).map(|&(_, at)| at).min();
                    match (got, first) {
                        (None, None) => {}
                        (Some(v), Some(at)) => prop_assert!(
                            filled.iter().any(|&(b, a)| b == v && a == at),
                            "victim {} was not among the first filled ({:?})", v, filled
                        ),
                        other => prop_assert!(false, "victim and reference disagree: {:?}", other),
                    }
                }
            }
            f.check_invariants();
        }
    }
}

/// The same seed gives the same victims; another seed other victims (rga and random).
#[test]
fn the_same_seed_draws_the_same_victims() {
    let geo = one_plane(32, 8);
    for policy in [VictimPolicy::Rga, VictimPolicy::Random] {
        let run = |seed: u64| {
            let mut f = ftl(&geo, 20, policy, seed, None);
            let mut w = rng_for(3, "writes");
            let mut victims = Vec::new();
            for _ in 0..4000 {
                write(&mut f, w.random_range(0..160), &mut victims);
            }
            assert!(victims.len() > 100, "{policy}: only {} GC runs", victims.len());
            victims
        };
        assert_eq!(run(7), run(7), "{policy}");
        assert_ne!(run(7), run(8), "{policy}");
    }
}

/// Uniform random overwrites of a plane 78% full: greedy copies least, random most, and RGA
/// (d = ⌊log2 128⌋ = 7) in between; so does FIFO, which lets blocks age before it cleans them.
#[test]
fn rga_amplifies_writes_between_greedy_and_random() {
    let geo = one_plane(128, 32);
    let waf = |policy: VictimPolicy| {
        let mut f = ftl(&geo, 100, policy, 11, None);
        let mut w = rng_for(5, "uniform");
        let mut victims = Vec::new();
        let logical = f.logical_units() as u32;
        for l in 0..logical {
            write(&mut f, l, &mut victims);
        }
        f.reset_stats();
        for _ in 0..8 * logical {
            write(&mut f, w.random_range(0..logical), &mut victims);
        }
        let s = f.stats();
        (s.host_units_programmed + s.gc_units_programmed) as f64 / s.host_units_programmed as f64
    };
    let (greedy, rga, random, fifo) =
        (waf(VictimPolicy::Greedy), waf(VictimPolicy::Rga), waf(VictimPolicy::Random), waf(VictimPolicy::Fifo));
    assert!(greedy < rga && rga < random, "greedy {greedy:.3}, rga {rga:.3}, random {random:.3}");
    assert!(greedy < fifo && fifo < random, "greedy {greedy:.3}, fifo {fifo:.3}, random {random:.3}");
    eprintln!("WAF: greedy {greedy:.3}, rga {rga:.3}, fifo {fifo:.3}, random {random:.3}");
}
