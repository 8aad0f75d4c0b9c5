//! `flashmux swarm` as users run it: a summary, the exit code, configurations printed that
//! `flashmux run` runs.

mod common;

use common::{flashmux, stderr, tmpdir};

#[test]
fn swarm_runs_its_seeds_and_summarises() {
    let dir = tmpdir("swarm");
    let o = flashmux().args(["swarm", "--seed", "11", "--count", "4", "--no-progress", "-o"]).arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout.clone()).unwrap();
    assert!(out.contains("swarm: 4 runs (seeds 11..=14)"), "{out}");
    for line in ["passed:", "rejected:", "failed:   0", "slowest:"] {
        assert!(out.contains(line), "{line}: {out}");
    }
    assert!(stderr(&o).contains("seeds 11..=14"), "{}", stderr(&o));
    assert!(!dir.join("work").exists(), "the scratch directory is removed");
}

#[test]
fn a_printed_configuration_runs_as_a_scenario() {
    let dir = tmpdir("swarm-print");
    // Seed 7 draws trace files: they are written beside a copy of the scenario. Seed 1 draws none.
    for seed in ["7", "1"] {
        let o = flashmux().args(["swarm", "--seed", seed, "--count", "1", "--print", "-o"]).arg(&dir).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8(o.stdout.clone()).unwrap();
        assert!(text.starts_with(&format!("# flashmux swarm --seed {seed}: invariants checked every ")), "{text}");
        assert!(text.contains("[[tenant]]"), "{text}");
        let path = dir.join(format!("seed-{seed}/swarm-{seed}.toml"));
        let path = if path.exists() {
            assert!(text.contains("# its files ("), "{text}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text.lines().skip(3).map(|l| format!("{l}\n")).collect::<String>());
            path
        } else {
            let p = dir.join(format!("swarm-{seed}.toml"));
            std::fs::write(&p, &text).unwrap();
            p
        };
        let run = flashmux()
            .arg("run")
            .arg(&path)
            .args(["--check-invariants", "--check-every", "50", "--no-progress", "--output-format", "json", "-o"])
            .arg(dir.join("out"))
            .output()
            .unwrap();
        assert!(run.status.success(), "seed {seed}: {}", stderr(&run));
    }
}

#[test]
fn a_bad_count_is_refused() {
    let o = flashmux().args(["swarm", "--count", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--count: must be at least 1"), "{}", stderr(&o));
}
