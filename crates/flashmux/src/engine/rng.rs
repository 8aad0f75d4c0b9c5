use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use sha2::{Digest, Sha256};

/// The random generator used by every model component: fast, and its output is fixed by its
/// algorithm (unlike `StdRng`, which may change between `rand` releases).
pub type SimRng = Xoshiro256PlusPlus;

/// A seed for the component named `label`, derived from the run's master seed. Adding or removing
/// a component never changes another component's stream, because each depends only on its label.
pub fn derive_seed(master: u64, label: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(master.to_le_bytes());
    h.update(label.as_bytes());
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().expect("sha256 yields 32 bytes"))
}

pub fn rng_for(master: u64, label: &str) -> SimRng {
    SimRng::seed_from_u64(derive_seed(master, label))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_stable_and_independent() {
        let a1: u64 = rng_for(7, "tenant/a").random();
        let a2: u64 = rng_for(7, "tenant/a").random();
        let b: u64 = rng_for(7, "tenant/b").random();
        let a_other_seed: u64 = rng_for(8, "tenant/a").random();
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
        assert_ne!(a1, a_other_seed);
    }

    #[test]
    fn derived_seed_is_pinned() {
        // Golden values: changing the derivation changes every run's results, which must be deliberate.
        assert_eq!(derive_seed(0, ""), 0x7a0b81a1f57055af);
        assert_eq!(derive_seed(42, "tenant/rand"), 0x6f18cd9b681501d5);
    }
}
