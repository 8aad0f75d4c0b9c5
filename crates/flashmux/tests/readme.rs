//! The README's scenario example must stay a valid scenario.

use flashmux::config::Scenario;
use flashmux::sim::Simulator;
use std::path::Path;

#[test]
fn readme_scenario_example_loads_and_runs() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let start = readme.find("```toml\n").expect("README has a TOML example") + "```toml\n".len();
    let text = &readme[start..start + readme[start..].find("```").unwrap()];
    let dir = std::env::temp_dir().join(format!("flashmux-readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("backup.fio"), "[backup]\nrw=write\nbs=1m\niodepth=4\nsize=256m\n").unwrap();
    let mut s = Scenario::from_toml(text, "README.md", &dir).unwrap();
    assert_eq!(s.tenants.len(), 2);
    assert!(s.device.capacity_bytes() >= 32 << 30);
    // Run a little of it, to be sure it is not only parseable.
    s.precondition.fill = 0.01;
    s.stop.time = Some(flashmux::units::Nanos::from_ms(20));
    let mut sim = Simulator::new(s).unwrap();
    sim.run();
    assert!(sim.finish().requests_completed > 0);
}
