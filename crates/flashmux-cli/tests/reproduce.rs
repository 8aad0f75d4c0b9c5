//! `flashmux reproduce` as users run it: a bundled paper experiment, its checks and figures.

mod common;

use common::flashmux;

#[test]
fn paper_c_quick_variant_passes_and_draws_its_figures() {
    let dir = std::env::temp_dir().join(format!("flashmux-cli-reproduce-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = flashmux()
        .args(["reproduce", "paper-c-cmt", "--quick", "--no-progress", "-o"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "exit {:?}\n{stdout}\n{}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    let checks = std::fs::read_to_string(dir.join("checks.txt")).unwrap();
    assert_eq!(checks.matches("PASS ").count(), 3, "{checks}");
    assert!(!checks.contains("FAIL"), "{checks}");
    assert!(stdout.contains("PASS Fig. 2") && stdout.contains("measured:"), "{stdout}");
    for fig in ["fig2-vm0-miss-ratio", "fig3-vm1-miss-ratio"] {
        let svg = std::fs::read_to_string(dir.join(format!("{fig}.svg"))).unwrap();
        assert!(svg.contains("shared") && svg.contains("partitioned") && svg.contains("balanced"));
        let png = std::fs::read(dir.join(format!("{fig}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    }
    let csv = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6 * 3 * 2, "one row per size, policy and VM");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_experiments_are_bad_input() {
    let out = flashmux().args(["reproduce", "paper-z"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown experiment 'paper-z'") && err.contains("paper-c-cmt"), "{err}");
    let out = flashmux().args(["reproduce", "--list"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("paper-c-cmt"));
}
