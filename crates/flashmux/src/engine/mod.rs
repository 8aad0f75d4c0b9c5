//! The discrete-event engine: an event queue ordered by (time, insertion sequence) and
//! deterministic per-component random streams.
//!
//! Events at equal times run in the order they were scheduled, so a run is a pure function of its
//! inputs. Nothing here reads a clock: the caller decides what "now" is (virtual time for `run`).

mod queue;
mod rng;

/// Asks the processor to start loading `r`'s cache line: a hint with no effect on results, used
/// where the model reads large tables at random (the L2P table of a 64 GiB drive is 64 MiB), so
/// that several loads overlap instead of each stalling in turn.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and changes no memory; SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(r as *const T as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

pub use queue::EventQueue;
pub use rng::{derive_seed, rng_for, SimRng};
