//! Any text, as a scenario file: loading returns a scenario or an error, never panics. Valid
//! scenarios on small drives are also built into a simulator and run for a few events.
#![no_main]

use flashmux::config::{DeviceKind, Scenario};
use flashmux::sim::Simulator;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(s) = Scenario::from_toml(text, "fuzz.toml", Path::new("/nonexistent")) else { return };
    let small = match &s.device.kind {
        DeviceKind::Ssd(c) => c.geometry.physical_bytes() <= 256 << 20,
        DeviceKind::Null(_) => true,
    };
    if small {
        if let Ok(mut sim) = Simulator::new(s) {
            sim.check_invariants_every(500);
            sim.run_for(2_000);
            sim.check_invariants();
        }
    }
});
