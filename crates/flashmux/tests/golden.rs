//! Golden output: a fixed scenario and seed must produce exactly the committed results.json.
//! A deliberate model change updates it: `FLASHMUX_BLESS=1 cargo test --test golden`, then
//! review the diff like any other change.

use flashmux::config::Scenario;
use flashmux::report::fio_json;
use flashmux::sim::Simulator;
use std::path::Path;

const SCENARIO: &str = r#"
name = "golden"
seed = 7
[device]
preset = "paper-c"
[device.geometry]
channels = 4
chips_per_channel = 1
blocks_per_plane = 64
[device.ftl]
overprovisioning = 0.15
[device.buffer]
size = "256KiB"
[precondition]
state = "aged"
[stop]
time = "400ms"
[output]
timeline_interval = "100ms"
[[tenant]]
name = "seq"
fio = """
[seq]
rw=write
bs=64k
iodepth=2
"""
[[tenant]]
name = "mix"
fio = """
[mix]
rw=randrw
rwmixread=60
bssplit=4k/70:16k/30
iodepth=8
"""
"#;

#[test]
fn results_match_the_golden_file() {
    let s = Scenario::from_toml(SCENARIO, "golden.toml", Path::new(".")).unwrap();
    let mut sim = Simulator::new(s).unwrap();
    sim.check_invariants_every(1000);
    sim.run();
    let got = serde_json::to_string_pretty(&fio_json(&sim.finish(), false)).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/two_tenants.json");
    if std::env::var_os("FLASHMUX_BLESS").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).expect("golden file missing: run with FLASHMUX_BLESS=1");
    if got != want {
        let line = got.lines().zip(want.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "results differ from {} at line {}:\n  got:  {}\n  want: {}",
            path.display(),
            line + 1,
            got.lines().nth(line).unwrap_or(""),
            want.lines().nth(line).unwrap_or("")
        );
    }
}
