//! Helpers shared by the end-to-end tests (each test file is its own crate).
#![allow(dead_code)]

use flashmux::config::{ConfigError, Scenario};
use flashmux::metrics::RunResults;
use flashmux::sim::Simulator;
use std::path::Path;

pub fn scenario(text: &str) -> Scenario {
    Scenario::from_toml(text, "test.toml", Path::new(".")).unwrap()
}

/// Runs a scenario to its end, checking every component's invariants every `every` events.
pub fn run_checked(text: &str, every: u64) -> RunResults {
    let mut sim = Simulator::new(scenario(text)).unwrap();
    sim.check_invariants_every(every);
    sim.run();
    sim.finish()
}

/// The loader's error for `text` (as `k.toml`), which must be a configuration error.
pub fn load_err(text: &str) -> String {
    match Scenario::from_toml(text, "k.toml", Path::new(".")) {
        Err(e @ ConfigError::Invalid { .. }) => e.to_string(),
        other => panic!("expected a configuration error, got {:?}", other.map(|s| s.name)),
    }
}
