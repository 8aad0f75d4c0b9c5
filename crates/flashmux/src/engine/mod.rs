//! The discrete-event engine: an event queue ordered by (time, insertion sequence) and
//! deterministic per-component random streams.
//!
//! Events at equal times run in the order they were scheduled, so a run is a pure function of its
//! inputs. Nothing here reads a clock: the caller decides what "now" is (virtual time for `run`).

mod queue;
mod rng;

pub use queue::EventQueue;
pub use rng::{derive_seed, rng_for, SimRng};
