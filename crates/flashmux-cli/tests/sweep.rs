//! `flashmux sweep` as users run it: the CSV and table of a sweep, bad experiment files, Ctrl-C.

mod common;

use common::{flashmux, stderr, tmpdir, write, SMALL};
use std::process::Command;





/// The small drive and one short random writer.
fn base() -> String {
    format!(
        r#"{SMALL}[[tenant]]
name = "t"
fio = """
[t]
rw=randwrite
bs=4k
number_ios=500
"""
"#
    )
}

const EXPERIMENT: &str = r#"
name = "op-and-buffer"
scenario = "base.toml"
[[sweep]]
key = "device.ftl.overprovisioning"
values = [0.15, 0.3]
label = "op"
[[sweep]]
key = "device.buffer.size"
values = ["256KiB", "512KiB"]
label = "buffer"
"#;

#[test]
fn sweep_writes_csv_and_prints_the_table() {
    let dir = tmpdir("ok");
    write(&dir, "base.toml", &base());
    let exp = write(&dir, "exp.toml", EXPERIMENT);
    let o = flashmux().arg("sweep").arg(&exp).arg("-o").arg(dir.join("out")).arg("--no-progress").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.join("out/sweep.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("op,buffer,tenant,read_iops,write_iops,"), "{csv}");
    assert_eq!(lines.len(), 5, "{csv}");
    let params: Vec<String> = lines[1..].iter().map(|l| l.split(',').take(3).collect::<Vec<_>>().join(",")).collect();
    assert_eq!(params, ["0.15,256KiB,t", "0.15,512KiB,t", "0.3,256KiB,t", "0.3,512KiB,t"]);
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert!(stdout.starts_with("op    buffer  tenant"), "{stdout}");
    assert!(stdout.contains("results: "), "{stdout}");

    // The same sweep again: the same bytes.
    let o = flashmux().arg("sweep").arg(&exp).arg("-o").arg(dir.join("again")).arg("--no-progress").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(csv, std::fs::read_to_string(dir.join("again/sweep.csv")).unwrap());

    // Without -o: flashmux-out/<experiment name>, relative to the working directory.
    let o = flashmux().current_dir(&dir).args(["sweep", "exp.toml", "--no-progress"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("flashmux-out/op-and-buffer/sweep.csv").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs a sweep that must be rejected; returns its message.
fn rejected(name: &str, experiment: &str) -> String {
    let dir = tmpdir(name);
    write(&dir, "base.toml", &base());
    let exp = write(&dir, "exp.toml", experiment);
    let o = flashmux().arg("sweep").arg(&exp).arg("-o").arg(dir.join("out")).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{name}: expected exit code 2, stderr: {}", stderr(&o));
    let e = stderr(&o);
    assert!(e.starts_with("flashmux: error: "), "{name}: {e}");
    assert!(!e.contains("panicked"), "{name}: {e}");
    assert!(!dir.join("out").exists(), "{name}: nothing runs for a rejected experiment");
    let _ = std::fs::remove_dir_all(&dir);
    e
}

#[test]
fn bad_experiment_files_exit_with_code_2() {
    let e = rejected("toml", "scenario = \"base.toml\"\n[[sweep]\n");
    assert!(e.contains("exp.toml: TOML parse error at line 2"), "{e}");
    let e = rejected("empty", "scenario = \"base.toml\"\n[[sweep]]\nkey = \"seed\"\nvalues = []\n");
    assert!(e.contains("exp.toml: sweep #1 (seed): values is empty"), "{e}");
    let e = rejected("index", "scenario = \"base.toml\"\n[[sweep]]\nkey = \"tenant.3.fio\"\nvalues = [\"x\"]\n");
    assert!(e.contains("base.toml: sweep 'fio': key 'tenant.3.fio': index 3 is past the end of 'tenant' (1 element)"), "{e}");
    let e = rejected(
        "point",
        "scenario = \"base.toml\"\n[[sweep]]\nkey = \"device.ftl.overprovisioning\"\nvalues = [0.2, 0.001]\nlabel = \"op\"\n",
    );
    assert!(e.contains("base.toml: point 2 of 2 (op = 0.001): ") && e.contains("over-provisioning too low"), "{e}");
    let e = rejected("missing-scenario", "scenario = \"nowhere.toml\"\n");
    assert!(e.contains("cannot read ") && e.contains("nowhere.toml"), "{e}");
    let o = flashmux().args(["sweep", "/nonexistent/exp.toml"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot read /nonexistent/exp.toml"), "{}", stderr(&o));
}

#[test]
fn interrupt_writes_the_points_so_far() {
    let dir = tmpdir("sigint");
    let long = base().replace("number_ios=500", "iodepth=8\ntime_based\nruntime=100000s");
    write(&dir, "base.toml", &long);
    let exp = write(&dir, "exp.toml", EXPERIMENT);
    let child = flashmux()
        .arg("sweep")
        .arg(&exp)
        .arg("-o")
        .arg(dir.join("out"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted: 0 of 4 points ran to their end; point 1 was cut short"), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.join("out/sweep.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(lines[1].starts_with("0.15,256KiB,t,") && lines[1].ends_with(",interrupted"), "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}
