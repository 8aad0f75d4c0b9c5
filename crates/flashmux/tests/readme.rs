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

/// Every other TOML example in the README resolves and runs a little.
#[test]
fn readme_other_toml_examples_load_and_run() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let blocks: Vec<&str> = readme.split("```toml\n").skip(2).map(|b| &b[..b.find("```").unwrap()]).collect();
    assert!(!blocks.is_empty(), "the README has more than one TOML example");
    for text in blocks {
        let mut s = Scenario::from_toml(text, "README.md", Path::new(".")).unwrap();
        s.stop.time = Some(flashmux::units::Nanos::from_ms(2));
        let mut sim = Simulator::new(s).unwrap();
        sim.run();
        let r = sim.finish();
        assert!(r.requests_completed > 0 && r.virt.is_some());
    }
}

/// docs/SERVE.md's scenario is a valid `serve` scenario: an export beside a simulated neighbour,
/// and the neighbour runs while the export is driven.
#[test]
fn serve_doc_scenario_loads_and_serves() {
    use flashmux::device::IoOp;
    use flashmux::serve::engine::Engine;
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/SERVE.md")).unwrap();
    let start = doc.find("```toml\n").expect("SERVE.md has a TOML example") + "```toml\n".len();
    let text = &doc[start..start + doc[start..].find("```").unwrap()];
    let mut s = Scenario::serve_from_toml(text, "docs/SERVE.md", Path::new(".")).unwrap();
    assert!(s.tenants[0].is_export() && !s.tenants[1].is_export());
    assert!(Scenario::from_toml(text, "docs/SERVE.md", Path::new(".")).is_err(), "run refuses an export");
    s.precondition.fill = 0.01;
    let mut e: Engine<u32> = Engine::new(s).unwrap();
    assert_eq!(e.exports()[0].name, "vm1");
    let mut out = Vec::new();
    for i in 0..50u32 {
        e.submit(u64::from(i) * 100_000, 0, IoOp::Write, u64::from(i) << 20, 4096, i).unwrap();
    }
    // Under mcfq the neighbour's time slice (tens of ms) can hold vm1's requests back.
    e.advance(2_000_000_000, &mut out);
    assert_eq!(out.len(), 50);
}
