//! Block-number generators for random I/O: fio's random map (as an O(1)-memory permutation),
//! its skewed distributions (zipf, pareto, normal) and its zoned tables.
//!
//! All of them return a block number `b` in `[0, n)`; the caller turns it into `b * blockalign`.

use rand::RngCore;
use rand_distr::{Distribution, Zipf};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::job::{AbsZone, RandomDistribution, Zone};

pub(crate) type JobRng = Xoshiro256PlusPlus;

/// Uniform in `[0, n)` by multiply-shift (bias below 2^-64 per value, no rejection loop, so the
/// number of random words consumed per I/O is fixed).
#[inline]
pub(crate) fn below(rng: &mut JobRng, n: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// Uniform in `[0, 1)` with 53 random bits.
#[inline]
pub(crate) fn unit(rng: &mut JobRng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// fio's `rand_between(state, 1, 100)`: a percentage roll compared with `<=` against a
/// configured percentage.
#[inline]
pub(crate) fn percent_roll(rng: &mut JobRng) -> u32 {
    below(rng, 100) as u32 + 1
}

/// fio's `__hash_u64` (`hash.h`), applied to skewed ranks so that the hot blocks are spread over
/// the region instead of being packed at its start.
#[inline]
fn hash_u64(v: u64) -> u64 {
    v.wrapping_mul(0x61C8_8646_80B5_83EB)
}

const ROUNDS: usize = 4;
const MULTIPLIERS: [u64; ROUNDS] = [
    0x9E37_79B9_7F4A_7C15,
    0xBF58_476D_1CE4_E5B9,
    0x94D0_49BB_1331_11EB,
    0xD6E8_FEB8_6659_FD93,
];

/// fio's random map: by default fio remembers which blocks a pass has touched and never picks one
/// twice, so a pass covers every block exactly once (HOWTO, "norandommap"). fio keeps a bitmap;
/// this is a keyed permutation of `[0, n)` instead, which visits every block once per pass in
/// O(1) memory: a bijection on `[0, 2^k)` (`2^k` the next power of two at or above `n`) built from
/// steps that are each invertible modulo `2^k` (xor with a key, multiplication by an odd constant,
/// xor with the value shifted right), restricted to `[0, n)` by cycle-walking: values `>= n` are
/// fed through the bijection again until one lands in range. Because `2^k < 2n` that takes fewer
/// than two rounds on average. A new key gives a new order for the next pass.
#[derive(Debug, Clone)]
pub(crate) struct RandomMap {
    n: u64,
    mask: u64,
    shift: u32,
    keys: [u64; ROUNDS],
    next: u64,
}

impl RandomMap {
    pub(crate) fn new(n: u64) -> RandomMap {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        RandomMap {
            n,
            mask: if bits == 0 {
                0
            } else {
                u64::MAX >> (64 - bits)
            },
            shift: bits.div_ceil(2),
            keys: [0; ROUNDS],
            next: 0,
        }
    }

    /// Starts a new pass with a fresh order.
    pub(crate) fn rekey(&mut self, rng: &mut JobRng) {
        for key in &mut self.keys {
            *key = rng.next_u64() & self.mask;
        }
        self.next = 0;
    }

    /// The next block of the pass, `None` once every block has been returned.
    #[inline]
    pub(crate) fn next(&mut self) -> Option<u64> {
        if self.next >= self.n {
            return None;
        }
        let mut x = self.next;
        self.next += 1;
        loop {
            x = self.permute(x);
            if x < self.n {
                return Some(x);
            }
        }
    }

    #[inline]
    fn permute(&self, mut x: u64) -> u64 {
        for (key, mul) in self.keys.iter().zip(MULTIPLIERS) {
            x ^= key;
            x = x.wrapping_mul(mul) & self.mask;
            x ^= x >> self.shift;
        }
        x
    }
}

#[derive(Debug, Clone)]
enum Skew {
    Zipf(Zipf<f64>),
    Pareto { power: f64 },
    Normal { stddev: u64 },
}

/// fio's zipf, pareto and normal ("gauss") generators (`lib/zipf.c`, `lib/gauss.c`). Each draws
/// a rank in `[0, n)` in which low ranks (zipf, pareto) or middle ranks (normal) are hot, then
/// returns `(hash_u64(rank) + offset) % n`: fio hashes the rank so that the hot blocks are spread
/// over the region rather than packed together, and the offset rotates the result (random by
/// default for zipf and pareto, 0 for normal; fixed by the optional `center`).
///
/// zipf ranks come from `rand_distr::Zipf` (rejection-inversion, O(1) per draw), an exact
/// sampler; fio uses the Gray et al. approximation over a zeta sum capped at 10M terms, so the
/// two agree on the distribution up to fio's approximation error. pareto and normal follow fio's
/// formulas exactly.
#[derive(Debug, Clone)]
pub(crate) struct SkewSampler {
    skew: Skew,
    n: u64,
    offset: u64,
}

impl SkewSampler {
    /// `None` unless `dist` is zipf, pareto or normal. `random_offset` is used when no center is
    /// given for zipf or pareto.
    pub(crate) fn new(dist: &RandomDistribution, n: u64, random_offset: u64) -> Option<Self> {
        let nf = n as f64;
        let (skew, offset) = match *dist {
            RandomDistribution::Zipf { theta, center } => (
                // `theta >= 0` is checked by the parser and `n >= 1` by the caller.
                Skew::Zipf(Zipf::new(nf, theta).expect("valid zipf parameters")),
                center.map_or(random_offset, |c| (nf * c) as u64),
            ),
            RandomDistribution::Pareto { h, center } => (
                Skew::Pareto {
                    power: h.ln() / (1.0 - h).ln(),
                },
                center.map_or(random_offset, |c| (nf * c) as u64),
            ),
            RandomDistribution::Normal { deviation, center } => {
                // fio: stddev = ceil(n * dev / 100), at most n / 2; center c shifts by
                // n * (c - 0.5).
                let stddev = ((nf * deviation / 100.0).ceil() as u64).min(n / 2);
                let shift = center.map_or(0, |c| (nf * (c - 0.5)) as i64);
                (Skew::Normal { stddev }, shift.rem_euclid(n as i64) as u64)
            }
            _ => return None,
        };
        Some(SkewSampler { skew, n, offset })
    }

    #[inline]
    pub(crate) fn sample(&self, rng: &mut JobRng) -> u64 {
        let n = self.n;
        let rank = match self.skew {
            Skew::Zipf(ref zipf) => (zipf.sample(rng) as u64).clamp(1, n) - 1,
            Skew::Pareto { power } => ((n - 1) as f64 * unit(rng).powf(power)) as u64,
            Skew::Normal { stddev } => {
                // fio's gauss_next: the mean of 12 uniform draws over [0, n], rounded up, plus a
                // uniform deviation in [-stddev/2, stddev/2) that is halved until it stays below n.
                const ITERS: u64 = 12;
                let mut sum: u64 = (0..ITERS).map(|_| below(rng, n + 1)).sum();
                sum = sum.div_ceil(ITERS);
                if stddev > 0 {
                    let mut dev = (stddev as f64 * unit(rng)) as i64 - (stddev / 2) as i64;
                    while dev != 0 && sum.wrapping_add(dev as u64) >= n {
                        dev /= 2;
                    }
                    sum = sum.wrapping_add(dev as u64);
                }
                sum
            }
        };
        hash_u64(rank).wrapping_add(self.offset) % n
    }
}

/// fio's zone index (`__td_zone_gen_index`): for each roll 1..=100, the block range of the zone
/// that roll selects, as (first block, number of blocks).
#[derive(Debug, Clone)]
pub(crate) struct ZoneTable {
    by_roll: Box<[(u64, u64); 100]>,
}

impl ZoneTable {
    /// `zoned`: zone sizes are percentages of the `blocks` blocks of the region
    /// (fio's `__get_next_rand_offset_zoned`).
    pub(crate) fn percent(zones: &[Zone], blocks: u64) -> ZoneTable {
        let at = |percent: u32| (u128::from(blocks) * u128::from(percent) / 100) as u64;
        let mut ranges = Vec::with_capacity(zones.len());
        let mut start = 0;
        for zone in zones {
            let end = start + zone.size_percent;
            // fio computes the start and the length separately, each rounded down.
            let len = (u128::from(blocks) * u128::from(end - start) / 100) as u64;
            ranges.push((zone.access_percent, at(start), len));
            start = end;
        }
        ZoneTable::from_ranges(&ranges)
    }

    /// `zoned_abs`: zone sizes in bytes, blocks of `align` bytes. `Err` with the end of the last
    /// zone, in bytes, if the zones do not fit in `blocks` blocks.
    pub(crate) fn absolute(zones: &[AbsZone], align: u64, blocks: u64) -> Result<ZoneTable, u64> {
        let mut ranges = Vec::with_capacity(zones.len());
        let mut start: u64 = 0;
        for zone in zones {
            let end = start.saturating_add(zone.size);
            ranges.push((
                zone.access_percent,
                start / align,
                end / align - start / align,
            ));
            start = end;
        }
        if start / align > blocks {
            return Err(start);
        }
        Ok(ZoneTable::from_ranges(&ranges))
    }

    fn from_ranges(ranges: &[(u32, u64, u64)]) -> ZoneTable {
        let mut by_roll = Box::new([(0, 0); 100]);
        let mut roll = 0;
        for &(access, first, len) in ranges {
            for slot in by_roll.iter_mut().skip(roll).take(access as usize) {
                *slot = (first, len);
            }
            roll += access as usize;
        }
        ZoneTable { by_roll }
    }

    #[inline]
    pub(crate) fn sample(&self, rng: &mut JobRng) -> u64 {
        let (first, len) = self.by_roll[below(rng, 100) as usize];
        first + below(rng, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng() -> JobRng {
        JobRng::seed_from_u64(99)
    }

    #[test]
    fn random_map_is_a_permutation_for_every_small_size() {
        let mut rng = rng();
        for n in 1..=300u64 {
            let mut map = RandomMap::new(n);
            for _pass in 0..2 {
                map.rekey(&mut rng);
                let mut seen = vec![false; n as usize];
                while let Some(b) = map.next() {
                    assert!(!seen[b as usize], "n={n}: block {b} twice");
                    seen[b as usize] = true;
                }
                assert!(seen.iter().all(|&s| s), "n={n}: not every block visited");
            }
        }
    }

    #[test]
    fn random_map_order_looks_uniform() {
        // The first quarter of a pass should hit the 16 equal slices of the region evenly.
        let n = 1 << 20 | 12345;
        let mut map = RandomMap::new(n);
        map.rekey(&mut rng());
        let mut bins = [0u64; 16];
        for _ in 0..n / 4 {
            bins[(map.next().unwrap() * 16 / n) as usize] += 1;
        }
        let expect = (n / 4) as f64 / 16.0;
        for b in bins {
            assert!((b as f64 - expect).abs() < expect * 0.02, "{bins:?}");
        }
        // Consecutive picks are not near each other.
        let mut map = RandomMap::new(n);
        map.rekey(&mut rng());
        let (a, b) = (map.next().unwrap(), map.next().unwrap());
        assert!(a.abs_diff(b) > 16);
    }

    #[test]
    fn rekeying_changes_the_order() {
        let mut rng = rng();
        let mut map = RandomMap::new(1000);
        map.rekey(&mut rng);
        let first: Vec<u64> = std::iter::from_fn(|| map.next()).collect();
        map.rekey(&mut rng);
        let second: Vec<u64> = std::iter::from_fn(|| map.next()).collect();
        assert_ne!(first, second);
    }

    #[test]
    fn zone_tables() {
        let zones = [
            Zone {
                access_percent: 60,
                size_percent: 10,
            },
            Zone {
                access_percent: 40,
                size_percent: 90,
            },
        ];
        let t = ZoneTable::percent(&zones, 1000);
        assert_eq!(t.by_roll[0], (0, 100));
        assert_eq!(t.by_roll[59], (0, 100));
        assert_eq!(t.by_roll[60], (100, 900));
        let abs = [AbsZone {
            access_percent: 100,
            size: 8192,
        }];
        assert_eq!(
            ZoneTable::absolute(&abs, 4096, 2).unwrap().by_roll[99],
            (0, 2)
        );
        assert_eq!(ZoneTable::absolute(&abs, 4096, 1).err(), Some(8192));
    }
}
