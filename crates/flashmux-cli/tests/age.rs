//! `flashmux age --save` and `[precondition] state_file`: the default scenario run on a saved
//! drive gives the same files as aging it in place; what cannot be aged or loaded exits 2.

mod common;
use common::{flashmux, stderr, tmpdir, write};

#[test]
fn the_default_scenario_on_its_saved_drive_gives_the_same_results() {
    let d = tmpdir("age");
    let base = String::from_utf8(flashmux().arg("default-scenario").output().unwrap().stdout).unwrap();
    let scenario = write(&d, "base.toml", &base.replace("time = \"10s\"", "time = \"2s\""));
    let o = flashmux().args(["age"]).arg(&scenario).args(["--save"]).arg(d.join("drive.fmstate")).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("precondition: workload, fill 100%, steady-state WAF"), "{out}");
    assert!(out.contains("use it: [precondition] state_file = "), "{out}");
    let loaded = write(
        &d,
        "loaded.toml",
        &base.replace("time = \"10s\"", "time = \"2s\"").replace("[precondition]\n", "[precondition]\nstate_file = \"drive.fmstate\"\n"),
    );
    for (s, out) in [(&scenario, "a"), (&loaded, "b")] {
        let o = flashmux().arg("run").arg(s).args(["--no-progress", "-o"]).arg(d.join(out)).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    for f in ["results.json", "timeline.csv", "summary.txt"] {
        assert_eq!(std::fs::read(d.join("a").join(f)).unwrap(), std::fs::read(d.join("b").join(f)).unwrap(), "{f}");
    }
    // Another seed is another drive: refused, exit 2, with what differs.
    let o = flashmux().arg("run").arg(&loaded).args(["--seed", "2", "--no-progress", "-o"]).arg(d.join("c")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("flashmux: error: precondition.state_file: ") && e.contains("seed 1 (this scenario: 2)"), "{e}");
    assert_eq!(e.matches("seed 1 (this scenario: 2)").count(), 1, "said once: {e}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn what_cannot_be_aged_exits_2() {
    let d = tmpdir("age-bad");
    let null = write(&d, "null.toml", "[device]\npreset = \"null\"\n[[tenant]]\nname = \"t\"\nfio = \"[w]\\nrw=write\\nnumber_ios=1\\n\"\n");
    let o = flashmux().arg("age").arg(&null).args(["--save"]).arg(d.join("x")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is a null device: it has no flash to age"), "{}", stderr(&o));
    let loads = write(&d, "loads.toml", "[precondition]\nstate = \"aged\"\nstate_file = \"d.fmstate\"\n[[tenant]]\nname = \"t\"\nfio = \"[w]\\nrw=write\\n\"\n");
    let o = flashmux().arg("age").arg(&loads).args(["--save"]).arg(d.join("x")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("(precondition.state_file): there is nothing to age"), "{}", stderr(&o));
    let o = flashmux().args(["age", "--save"]).arg(d.join("x")).args(["--fill", "2"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--fill: 2 is out of range"), "{}", stderr(&o));
    // A directory that does not exist: nothing half-written is left.
    let o = flashmux().args(["age", "--save"]).arg(d.join("no/such/dir/x.fmstate")).output().unwrap();
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("x.fmstate: cannot write it"), "{}", stderr(&o));
    std::fs::remove_dir_all(&d).unwrap();
}
