//! The `flashmux` command as users run it: exit codes, messages, files written.

mod common;

use common::{flashmux, stderr, tmpdir, write, SMALL};
use std::path::Path;
use std::process::{Command, Output};





fn run_scenario(dir: &Path, text: &str, extra: &[&str]) -> Output {
    let scenario = write(dir, "scenario.toml", text);
    flashmux()
        .arg("run")
        .arg(&scenario)
        .arg("-o")
        .arg(dir.join("out"))
        .args(extra)
        .output()
        .unwrap()
}

/// Runs a scenario that must be rejected; returns its message.
fn rejected(name: &str, text: &str) -> String {
    let dir = tmpdir(name);
    let o = run_scenario(&dir, text, &[]);
    assert_eq!(o.status.code(), Some(2), "{name}: expected exit code 2, stderr: {}", stderr(&o));
    let e = stderr(&o);
    assert!(e.starts_with("flashmux: error: "), "{name}: {e}");
    assert!(!e.contains("panicked"), "{name}: {e}");
    assert!(!dir.join("out").exists(), "{name}: no results for a rejected scenario");
    e
}

const TENANT: &str = "[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[t]\nrw=randwrite\nbs=4k\nnumber_ios=2000\n\"\"\"\n";

#[test]
fn scenario_run_writes_fio_json_timeline_and_table() {
    let dir = tmpdir("files");
    let o = run_scenario(&dir, &format!("{SMALL}\n[precondition]\nstate = \"aged\"\n{TENANT}"), &["--check-invariants"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert!(stdout.contains("t: (groupid=0, jobs=1)"), "fio normal output: {stdout}");
    assert!(stdout.contains("write amplification"), "table: {stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/results.json")).unwrap()).unwrap();
    assert!(json["fio version"].as_str().unwrap().starts_with("flashmux-"));
    let job = &json["jobs"][0];
    assert_eq!(job["jobname"], "t");
    assert_eq!(job["write"]["total_ios"], 2000);
    assert!(job["write"]["clat_ns"]["percentile"]["99.000000"].as_u64().unwrap() > 0);
    assert!(json["flashmux"]["device"]["ftl"]["gc_runs"].as_u64().unwrap() > 0);
    assert_eq!(json["flashmux"]["seed"], 1);
    let csv = std::fs::read_to_string(dir.join("out/timeline.csv")).unwrap();
    assert!(csv.starts_with("time_s,interval_s,tenant,"));
    assert!(csv.lines().count() >= 2);
    assert!(std::fs::read_to_string(dir.join("out/summary.txt")).unwrap().contains("tenant"));
}

#[test]
fn json_output_on_stdout_matches_the_file_and_is_reproducible() {
    let dir = tmpdir("json");
    let text = format!("{SMALL}\n{TENANT}");
    let a = run_scenario(&dir, &text, &["--output-format", "json"]);
    assert!(a.status.success(), "{}", stderr(&a));
    let file = std::fs::read(dir.join("out/results.json")).unwrap();
    assert_eq!(a.stdout, file);
    let b = run_scenario(&dir, &text, &["--output-format", "json"]);
    assert_eq!(a.stdout, b.stdout, "same scenario and seed, same bytes");
    let c = run_scenario(&dir, &text, &["--output-format", "json+"]);
    let plus: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    assert!(plus["jobs"][0]["write"]["clat_ns"]["bins"].is_object());
}

#[test]
fn fio_job_file_runs_as_is_with_groups_in_order() {
    let dir = tmpdir("fio");
    let job = write(
        &dir,
        "two.fio",
        "; two groups, as fio runs them\n[global]\nbs=4k\nioengine=libaio\n\n[fill]\nrw=write\nsize=4m\n\n[readback]\nstonewall\nrw=randread\nsize=4m\n",
    );
    let o = flashmux()
        .args(["run", "--fio"])
        .arg(&job)
        .args(["--device", "paper-c", "--precondition", "sequential-fill", "--fill", "0.5"])
        .args(["--output-format", "json", "-o"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("accepted but not modelled: ioengine"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jobs"][0]["jobname"], "fill");
    assert_eq!(v["jobs"][0]["groupid"], 0);
    assert_eq!(v["jobs"][0]["write"]["io_bytes"], 4 << 20);
    assert_eq!(v["jobs"][1]["groupid"], 1);
    assert_eq!(v["jobs"][1]["read"]["io_bytes"], 4 << 20);
    assert_eq!(v["global options"]["bs"], "4k");
    assert_eq!(v["flashmux"]["device"]["precondition"]["state"], "sequential-fill");
    assert_eq!(v["flashmux"]["device"]["precondition"]["fill"], 0.5);
    // The reads ran after the writes: they found data on flash, not unmapped space.
    assert_eq!(v["flashmux"]["tenants"][1]["device"]["read_units_unmapped"], 0);
}

#[test]
fn unknown_fio_option_is_a_warning_with_file_and_line() {
    let dir = tmpdir("warn");
    let o = run_scenario(&dir, &format!("{SMALL}\n{}", TENANT.replace("bs=4k", "bs=4k\nfrobnicate=3")), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("warning: ") && e.contains("[tenant t].fio:4: unknown option 'frobnicate'"), "{e}");
}

#[test]
fn bad_input_is_one_clear_error_with_exit_code_2() {
    let e = rejected("toml", "[device\npreset = 1\n");
    assert!(e.contains("line 1"), "{e}");
    let e = rejected("unknown-key", &format!("{SMALL}\nspeed = \"fast\"\n{TENANT}"));
    assert!(e.contains("unknown field `speed`"), "{e}");
    let e = rejected("fio-value", &format!("{SMALL}\n{}", TENANT.replace("bs=4k", "bs=4kk")));
    assert!(e.contains("fio:3: option 'bs': invalid value '4kk'"), "{e}");
    let e = rejected("job-file", &format!("{SMALL}\n[[tenant]]\nname = \"t\"\njob_file = \"nowhere.fio\"\n"));
    assert!(e.contains("nowhere.fio"), "{e}");
    let e = rejected("personality", &format!("{SMALL}\n[[tenant]]\nname = \"t\"\npersonality = \"mail\"\n"));
    assert!(e.contains("personality: unknown personality 'mail': expected one of fileserver, varmail"), "{e}");
    let e = rejected("zero-channels", &format!("{}\n{TENANT}", SMALL.replace("channels = 4", "channels = 0")));
    assert!(e.contains("device.geometry.channels: must be at least 1"), "{e}");
    let e = rejected("page-size", &format!("{}\n{TENANT}", SMALL.replace("chips_per_channel = 1", "chips_per_channel = 1\npage_size = \"3000\"")));
    assert!(e.contains("page_size must be a power of two"), "{e}");
    let e = rejected("low-op", &format!("{}\n{TENANT}", SMALL.replace("overprovisioning = 0.15", "overprovisioning = 0.01")));
    assert!(e.contains("over-provisioning too low"), "{e}");
    let e = rejected("tiny", &format!("{}\n{TENANT}", SMALL.replace("blocks_per_plane = 64\n", "").replace("[device]\npreset = \"paper-c\"", "[device]\npreset = \"paper-c\"\ncapacity = \"1k\"")));
    assert!(e.contains("smaller than one block per plane"), "{e}");
    let e = rejected("too-big", &format!("{SMALL}\n{}", TENANT.replace("number_ios=2000", "size=1g")));
    assert!(e.contains("job 't'") && e.contains("size"), "{e}");
    // The map cache's settings (DFTL).
    let dftl = |cmt: &str| {
        SMALL.replace("overprovisioning = 0.15", &format!("overprovisioning = 0.15\nmapping = \"dftl\"\n[device.ftl.cmt]\n{cmt}"))
    };
    let two = format!("{TENANT}{}", TENANT.replace("name = \"t\"", "name = \"u\""));
    for (name, cmt, key) in [
        ("cmt-size", "pages = 1", "device.ftl.cmt.pages"),
        ("cmt-shares", "pages = 4\npolicy = \"partitioned\"\nshares = [50, 40]", "device.ftl.cmt.shares"),
        ("cmt-policy", "pages = 4\npolicy = \"fifo\"", "device.ftl.cmt.policy"),
        ("cmt-period", "pages = 4\npolicy = \"balanced\"\nperiod = \"0s\"", "device.ftl.cmt.period"),
    ] {
        let e = rejected(name, &format!("{}\n{two}", dftl(cmt)));
        assert!(e.contains(key), "{name}: {e}");
    }
    // The virtualization path and the host CPU.
    for (name, virt, key) in [
        ("virt-mode", "[virt]\nmode = \"virtio\"", "virt.mode: unknown mode 'virtio'"),
        ("virt-vcpus", "[virt]\nmode = \"dataplane\"\nvcpus = 0", "virt.vcpus: a VM needs at least 1 vCPU"),
        (
            "virt-poll",
            "[host.cpu]\ncores = 2\nthreads_per_core = 1\n[virt]\nmode = \"per-vcpu-threads\"\nvcpus = 2\nnotify = \"poll\"",
            "none would be left for the vCPUs",
        ),
        ("cpu-cores", "[host.cpu]\ncores = 0", "host.cpu.cores: must be at least 1"),
    ] {
        let e = rejected(name, &format!("{SMALL}\n{virt}\n{TENANT}"));
        assert!(e.contains(key), "{name}: {e}");
    }
}

#[test]
fn missing_scenario_file_and_bad_flags() {
    let o = flashmux().args(["run", "/nonexistent/scenario.toml"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot read /nonexistent/scenario.toml"), "{}", stderr(&o));
    let o = flashmux().args(["run", "--time", "ten", "--no-progress"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--time: invalid duration 'ten'"), "{}", stderr(&o));
    let o = flashmux().args(["run", "--time", "18446744074s", "--no-progress"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--time: duration '18446744074s' is too large: the largest is 18446744073.709551615s (2^64 - 1 ns, about 584 years)"),
        "{}",
        stderr(&o)
    );
    let o = flashmux().args(["run", "--precondition", "old", "--no-progress"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--precondition: unknown state 'old'"), "{}", stderr(&o));
    let o = flashmux().args(["run", "--fill", "2", "--no-progress"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--fill: 2 is out of range"), "{}", stderr(&o));
}

#[test]
fn presets_and_default_scenario_are_listed() {
    let o = flashmux().arg("presets").output().unwrap();
    let s = String::from_utf8(o.stdout).unwrap();
    for p in ["paper-c", "x25e", "tlc-nvme", "null"] {
        assert!(s.contains(p), "{s}");
    }
    let o = flashmux().arg("default-scenario").output().unwrap();
    assert!(String::from_utf8(o.stdout).unwrap().contains("[[tenant]]"));
}

#[test]
fn personalities_are_listed_printed_and_measured() {
    const NAMES: [&str; 6] = ["fileserver", "varmail", "webproxy", "msn", "exchange", "financial"];
    let o = flashmux().arg("personalities").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let list = String::from_utf8(o.stdout).unwrap();
    for (line, name) in list.lines().zip(NAMES) {
        assert!(line.starts_with(name) && line.len() > name.len() + 20, "{list}");
    }
    assert_eq!(list.lines().count(), NAMES.len(), "{list}");
    // One's job, printed, runs as a fio job file.
    let o = flashmux().args(["personalities", "varmail"]).output().unwrap();
    let job = String::from_utf8(o.stdout).unwrap();
    assert_eq!(job, flashmux::workload::personality::VARMAIL.job);
    let dir = tmpdir("personality");
    let fio = write(&dir, "varmail.fio", &job);
    let o = flashmux()
        .args(["run", "--device", "paper-c", "--time", "5ms", "--no-progress", "-o"])
        .arg(dir.join("out"))
        .arg("--fio")
        .arg(&fio)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8(o.stdout).unwrap().contains("varmail: (groupid=0, jobs=1)"));
    let o = flashmux().args(["personalities", "oltp"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&format!("unknown personality 'oltp': expected one of {}", NAMES.join(", "))), "{}", stderr(&o));
    let o = flashmux().args(["personalities", "--measure", "--requests", "20000"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(table.contains("personality") && table.contains("paper D, Table 3"), "{table}");
    assert!(NAMES.iter().all(|n| table.lines().any(|l| l.starts_with(n))), "{table}");
}

#[test]
fn interrupt_writes_partial_results() {
    let dir = tmpdir("sigint");
    let scenario = write(
        &dir,
        "long.toml",
        &format!("{SMALL}\n[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[t]\nrw=randwrite\nbs=4k\niodepth=8\ntime_based\nruntime=100000s\n\"\"\"\n"),
    );
    let child = flashmux()
        .arg("run")
        .arg(&scenario)
        .arg("-o")
        .arg(dir.join("out"))
        .args(["--output-format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/results.json")).unwrap()).unwrap();
    assert_eq!(v["flashmux"]["stop_reason"], "interrupted");
    assert!(v["jobs"][0]["write"]["total_ios"].as_u64().unwrap() > 0);
}

/// A random writer and a reader sharing a small aged drive for 150 ms.
fn writer_and_reader() -> String {
    let tenant = |name: &str, rw: &str, depth: u32| {
        format!("[[tenant]]\nname = \"{name}\"\nfio = \"\"\"\n[{name}]\nrw={rw}\nbs=4k\niodepth={depth}\n\"\"\"\n")
    };
    format!(
        "{SMALL}\n[precondition]\nstate = \"aged\"\n[stop]\ntime = \"150ms\"\n{}{}",
        tenant("writer", "randwrite", 16),
        tenant("reader", "randread", 2)
    )
}

#[test]
fn alone_baseline_reports_slowdowns_and_fairness() {
    let dir = tmpdir("alone");
    let text = writer_and_reader();
    let a = run_scenario(&dir, &text, &["--alone-baseline", "--output-format", "json"]);
    assert!(a.status.success(), "{}", stderr(&a));
    let e = stderr(&a);
    assert!(e.contains("running tenant 'writer' alone (1 of 2)") && e.contains("tenant 'reader' alone (2 of 2)"), "{e}");
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    let f = &v["flashmux"]["fairness"];
    let t = &f["tenants"];
    assert_eq!((t[0]["name"].as_str(), t[1]["name"].as_str()), (Some("writer"), Some("reader")));
    // The reader waits behind the writer's programs and GC: slower than alone.
    let slowdown = |i: usize| t[i]["slowdown"].as_f64().unwrap();
    assert!(slowdown(1) > 1.0, "{f}");
    assert_eq!(t[1]["lat_shared_mean_ns"], v["flashmux"]["tenants"][1]["lat_ns"]["mean"]);
    let ratio = t[1]["lat_shared_mean_ns"].as_f64().unwrap() / t[1]["lat_alone_mean_ns"].as_f64().unwrap();
    assert!((ratio - slowdown(1)).abs() < 1e-9);
    let fairness = f["fairness"].as_f64().unwrap();
    assert!((fairness - slowdown(0).min(slowdown(1)) / slowdown(0).max(slowdown(1))).abs() < 1e-12, "{f}");
    assert_eq!(f["tenants_counted"], 2);
    assert!(f["jain_index"].as_f64().unwrap() > 0.0);
    // Same seed, same bytes, baseline included.
    let b = run_scenario(&dir, &text, &["--alone-baseline", "--output-format", "json"]);
    assert_eq!(a.stdout, b.stdout);
    // Without the flag the baseline's keys are absent; the shared run is the same.
    let c = run_scenario(&dir, &text, &["--output-format", "json"]);
    assert!(!stderr(&c).contains("alone"), "{}", stderr(&c));
    let mut without: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    assert!(without["flashmux"]["fairness"].get("tenants").is_none());
    assert!(without["flashmux"]["fairness"].get("fairness").is_none());
    let mut with = v.clone();
    for o in [&mut with, &mut without] {
        if let Some(f) = o["flashmux"]["fairness"].as_object_mut() {
            f.remove("tenants");
            f.remove("fairness");
        }
    }
    assert_eq!(with, without);
    // The table: per-tenant slowdowns and the fairness line.
    let d = run_scenario(&dir, &text, &["--alone-baseline"]);
    assert!(d.status.success(), "{}", stderr(&d));
    let table = std::fs::read_to_string(dir.join("out/summary.txt")).unwrap();
    assert!(table.lines().next().unwrap().ends_with("share err  alone us  slowdown"), "{table}");
    assert!(table.contains("\nslowdown fairness:   "), "{table}");
    assert!(table.contains("\nfairness:            share error mean "), "{table}");
}

#[test]
fn interrupt_during_the_alone_baseline_keeps_the_shared_results() {
    use std::io::BufRead;
    let dir = tmpdir("alone-sigint");
    let tenant = |name: &str| format!("[[tenant]]\nname = \"{name}\"\nfio = \"\"\"\n[{name}]\nrw=randread\nbs=4k\niodepth=8\ntime_based\nruntime=100000s\n\"\"\"\n");
    let scenario = write(&dir, "long.toml", &format!("[device]\npreset = \"null\"\n[stop]\ntime = \"1s\"\n{}{}", tenant("a"), tenant("b")));
    let mut child = flashmux()
        .arg("run")
        .arg(&scenario)
        .arg("-o")
        .arg(dir.join("out"))
        .args(["--alone-baseline", "--output-format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("alone (1 of 2)") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the alone runs never started");
    }
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/results.json")).unwrap()).unwrap();
    // The shared run had finished: its results are whole, without a baseline.
    assert_eq!(v["flashmux"]["stop_reason"], "time-limit");
    assert!(v["jobs"][1]["read"]["total_ios"].as_u64().unwrap() > 0);
    assert!(v["flashmux"]["fairness"].get("tenants").is_none());
    let warnings = v["flashmux"]["warnings"].to_string();
    assert!(warnings.contains("the alone baseline was interrupted"), "{warnings}");
}

#[test]
fn bench_runs_many_weighted_tenants() {
    let o = flashmux()
        .args(["bench", "--preset", "tlc-nvme", "--capacity", "16GiB", "--requests", "20000"])
        .args(["--tenants", "8", "--iodepth", "4", "--scheduler", "mcfq"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("simulated 20000 requests"), "{out}");
    let o = flashmux().args(["bench", "--tenants", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--tenants"), "{}", stderr(&o));
}

#[test]
fn hwabc_and_its_profile_reject_bad_input_with_exit_code_2() {
    for (args, needle) in [
        (&["profile", "gc-contribution", "--sizes", "6"][..], "block size 6 KiB: expected a multiple of 4 KiB"),
        (&["profile", "gc-contribution", "--device", "nope"][..], "unknown preset 'nope'"),
    ] {
        let o = flashmux().args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    let hw = |extra: &str| format!("[device]\npreset = \"cosmos\"\n[host]\nscheduler = \"hwabc\"\n{extra}\n{TENANT}");
    let e = rejected("hwabc-alpha", &hw("[host.hwabc]\nalpha = 1.5"));
    assert!(e.contains("host.hwabc.alpha: 1.5 is out of range"), "{e}");
    let e = rejected("hwabc-drive", &hw("").replace("cosmos", "840pro"));
    assert!(e.contains("'hwabc' needs a drive that shows the host its garbage collection"), "{e}");
}

fn trace_data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../flashmux/tests/data/traces").join(name).display().to_string()
}

#[test]
fn replay_info_and_convert_a_real_trace() {
    let dir = tmpdir("replay");
    let blk = trace_data("fio-randrw.blktrace.0.gz");
    // info: the format is told from the content; the real capture's counts.
    let o = flashmux().args(["trace", "info", &blk]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("format:        blktrace") && out.contains("13116 (9165 reads"), "{out}");
    // convert to MQSim and replay that, split by device, open loop at twice the speed.
    let mq = dir.join("t.mqsim");
    let o = flashmux().args(["trace", "convert", &blk, "--to", "mqsim", "-o"]).arg(&mq).output().unwrap();
    assert!(o.status.success() && stderr(&o).contains("13116 requests written as mqsim"), "{}", stderr(&o));
    let o = flashmux()
        .args(["replay"])
        .arg(&mq)
        .args(["--tenant-by", "device", "--time-scale", "0.5", "--capacity", "16GiB", "--no-progress", "--output-format", "json", "-o"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let job = &v["jobs"][0];
    assert_eq!((job["read"]["total_ios"].as_u64(), job["write"]["total_ios"].as_u64()), (Some(9165), Some(3951)));
    assert_eq!(v["flashmux"]["tenants"][0]["replay"]["requests"], 13116);
    assert!(dir.join("out/results.json").exists());
}

#[test]
fn bad_traces_and_trace_flags_exit_with_code_2() {
    let dir = tmpdir("replay-bad");
    let bad = write(&dir, "bad.mqsim", "0 0 8 8 0\n1000 0 oops 8 1\n");
    let good = write(&dir, "good.mqsim", "0 0 8 8 0\n1000 0 16 8 1\n");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["trace".into(), "info".into(), "/no/such/file".into()], "cannot read trace '/no/such/file'"),
        (vec!["trace".into(), "info".into(), bad.display().to_string(), "--format".into(), "csv".into()], "--format: unknown format 'csv'"),
        (vec!["trace".into(), "info".into(), bad.display().to_string(), "--strict".into()], "cannot tell the trace format"),
        (vec!["trace".into(), "info".into(), bad.display().to_string(), "--format".into(), "mqsim".into(), "--strict".into()], ":2: field 'sector'"),
        (vec!["trace".into(), "convert".into(), bad.display().to_string(), "--to".into(), "msr".into()], "--to: cannot write 'msr'"),
        (vec!["replay".into(), good.display().to_string(), "--tenant-by".into(), "asu".into()], "has no asu field"),
        (vec!["replay".into(), good.display().to_string(), "--lba-fit".into(), "fold".into()], "--lba-fit: unknown 'fold'"),
        (vec!["replay".into(), good.display().to_string(), "--time-scale=-1".into()], "--time-scale: -1 is not a positive number"),
    ];
    for (args, says) in cases {
        let o = flashmux().args(&args).arg("-o").arg(dir.join("out")).output().unwrap();
        let e = stderr(&o);
        // `trace info` has no -o: clap rejects it with its own code 2; drop it there.
        let (o, e) = if e.contains("unexpected argument '-o'") {
            let o = flashmux().args(&args).output().unwrap();
            let e = stderr(&o);
            (o, e)
        } else {
            (o, e)
        };
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(says) && !e.contains("panicked"), "{args:?}: {e}");
    }
    // Non-strict: the bad line is skipped and reported; strict replay writes what ran, exits 2.
    let o = flashmux().args(["trace", "info", "--format", "mqsim"]).arg(&bad).output().unwrap();
    assert!(o.status.success() && stderr(&o).contains("1 bad line(s) skipped") && stderr(&o).contains("line 2:"), "{}", stderr(&o));
    let o = flashmux().arg("replay").arg(&bad).args(["--strict", "--format", "mqsim", "--no-progress", "-o"]).arg(dir.join("strict")).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("results up to there are written") && dir.join("strict/results.json").exists(), "{}", stderr(&o));
}

/// Peak RSS in MiB, from bench's `memory:` line.
fn bench_peak_mib(o: &Output) -> f64 {
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().find(|l| l.starts_with("memory:")).unwrap_or_else(|| panic!("{out}"));
    let peak = line.split("peak ").nth(1).unwrap_or_else(|| panic!("{line}"));
    peak.trim_end_matches(" MiB").trim().parse().unwrap_or_else(|_| panic!("{line}"))
}

/// A trace twenty times as long replays in the same memory: the reader streams it, and replay
/// holds one request read ahead.
#[test]
fn a_long_trace_replays_in_constant_memory() {
    use std::io::Write as _;
    let dir = tmpdir("trace-rss");
    let mut peaks = Vec::new();
    for n in [50_000u64, 1_000_000] {
        let path = dir.join(format!("long-{n}.mqsim"));
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for i in 0..n {
            writeln!(f, "{} 0 {} 8 {}", i * 10_000, (i * 7919) % 2_000_000 * 8, u8::from(i % 3 == 0)).unwrap();
        }
        f.into_inner().unwrap().sync_all().unwrap();
        let o = flashmux()
            .args(["bench", "--capacity", "16GiB", "--iodepth", "8", "--trace"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains(&format!("simulated {n} requests")), "{out}");
        peaks.push(bench_peak_mib(&o));
        std::fs::remove_file(&path).unwrap();
    }
    // The drive's own state is about 50 MiB; a reader or replay that kept requests would add
    // 24 bytes or more for each of the extra 950,000.
    assert!(peaks[1] <= peaks[0] + 4.0, "peak RSS {} MiB for 50K requests, {} MiB for 1M", peaks[0], peaks[1]);
}

/// Runs `flashmux` with `args`, expecting bad input: exit code 2 and `says` in the message.
fn refused(args: &[&std::ffi::OsStr], says: &str) -> String {
    let o = flashmux().args(args).output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
    assert!(e.contains(says) && !e.contains("panicked"), "{args:?}: expected '{says}' in: {e}");
    e
}

/// Names in `dir`, sorted.
fn dir_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn trace_convert_never_writes_over_its_input_nor_leaves_half_a_file() {
    use std::ffi::OsStr;
    let dir = tmpdir("convert-self");
    let t = dir.join("t.txt");
    let o = flashmux().args(["trace", "convert", &trace_data("fio-randrw.blktrace.0.gz"), "--to", "blkparse", "-o"]).arg(&t).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let original = std::fs::read(&t).unwrap();
    std::os::unix::fs::symlink(&t, dir.join("link.txt")).unwrap();
    std::fs::hard_link(&t, dir.join("hard.txt")).unwrap();
    // The same file by any name: as given, through a symbolic link, a hard link, another spelling.
    for out in [t.clone(), dir.join("link.txt"), dir.join("hard.txt"), dir.join(".").join("t.txt")] {
        let args = [OsStr::new("trace"), OsStr::new("convert"), t.as_os_str(), OsStr::new("--to"), OsStr::new("blkparse"), OsStr::new("-o"), out.as_os_str()];
        let e = refused(&args, "is the trace being read");
        assert!(e.contains(&out.display().to_string()), "{e}");
        assert_eq!(std::fs::read(&t).unwrap(), original, "{}: the input is intact", out.display());
    }
    // blktrace's per-CPU siblings are inputs too.
    for cpu in ["0", "1"] {
        let name = format!("fio-randrw.blktrace.{cpu}.gz");
        std::fs::copy(trace_data(&name), dir.join(&name)).unwrap();
    }
    let cpu0 = dir.join("fio-randrw.blktrace.0.gz");
    let cpu1 = dir.join("fio-randrw.blktrace.1.gz");
    let sibling = std::fs::read(&cpu1).unwrap();
    let args = [OsStr::new("trace"), OsStr::new("convert"), cpu0.as_os_str(), OsStr::new("--to"), OsStr::new("mqsim"), OsStr::new("-o"), cpu1.as_os_str()];
    refused(&args, "is the trace being read");
    assert_eq!(std::fs::read(&cpu1).unwrap(), sibling);
    // A read error half way (a bad line with --strict): the old output stays whole, nothing is
    // left behind.
    let bad = write(&dir, "bad.mqsim", "0 0 8 8 0\n1000 0 16 8 1\n2000 0 oops 8 1\n");
    let out = write(&dir, "out.log", "an older conversion\n");
    let before = dir_names(&dir);
    let args = [OsStr::new("trace"), OsStr::new("convert"), bad.as_os_str(), OsStr::new("--format"), OsStr::new("mqsim"), OsStr::new("--strict"), OsStr::new("--to"), OsStr::new("fio-iolog"), OsStr::new("-o"), out.as_os_str()];
    let e = refused(&args, ":3: field 'sector'");
    assert!(e.contains("nothing was written"), "{e}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "an older conversion\n");
    assert_eq!(dir_names(&dir), before, "no temporary file is left");
    // A whole conversion replaces it.
    let good = write(&dir, "good.mqsim", "0 0 8 8 0\n1000 0 16 8 1\n");
    let o = flashmux().args(["trace", "convert"]).arg(&good).args(["--to", "fio-iolog", "-o"]).arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&out).unwrap().starts_with("fio version 3 iolog\n"));
    assert!(dir_names(&dir).iter().all(|n| !n.ends_with(".tmp")), "{:?}", dir_names(&dir));
}

/// Runs `cmd` to its end, or kills it after 20 s and fails: a command that blocks on its input
/// must fail the test, not hang it.
fn output_within(mut cmd: Command) -> Output {
    let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("still running after 20 s: {cmd:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn unreadable_inputs_are_named_with_where_they_were_asked_for() {
    let dir = tmpdir("unreadable");
    // A missing job file: the scenario, the tenant, the key and the path; the OS's reason once.
    let o = run_scenario(&dir, &format!("{SMALL}\n[[tenant]]\nname = \"t\"\njob_file = \"nowhere.fio\"\n"), &[]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("scenario.toml:15: tenant[0] (t).job_file: cannot read job file 'nowhere.fio'"), "{e}");
    assert_eq!(e.matches("No such file or directory").count(), 1, "{e}");
    // A missing include: the including file and line.
    let job = write(&dir, "inc.fio", "[j]\nrw=write\ninclude nowhere.fio\n");
    let o = flashmux().args(["run", "--no-progress", "--fio"]).arg(&job).output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("inc.fio:3: include nowhere.fio: cannot read '"), "{e}");
    assert_eq!(e.matches("No such file or directory").count(), 1, "{e}");
    // A named pipe as the scenario, and /dev/zero as an include: refused at once.
    let fifo = dir.join("pipe.toml");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let mut cmd = flashmux();
    cmd.arg("run").arg(&fifo).arg("--no-progress");
    let o = output_within(cmd);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("pipe.toml: it is a named pipe (FIFO), not a regular file"), "{}", stderr(&o));
    let job = write(&dir, "zero.fio", "[j]\nrw=write\ninclude /dev/zero\n");
    let mut cmd = flashmux();
    cmd.args(["run", "--no-progress", "--fio"]).arg(&job);
    let o = output_within(cmd);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("zero.fio:3: include /dev/zero: cannot read '/dev/zero': it is a character device, not a regular file"), "{}", stderr(&o));
}

#[test]
fn traces_that_never_end_or_cannot_be_read_twice_are_refused() {
    let dir = tmpdir("trace-special");
    // A replayed trace is read when the scenario is loaded and again when it runs: a named pipe
    // would block the second open for ever (with no writer left, even SIGTERM waits).
    let fifo = dir.join("pipe.mqsim");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let mut cmd = flashmux();
    cmd.arg("replay").arg(&fifo).args(["--no-progress", "-o"]).arg(dir.join("out"));
    let o = output_within(cmd);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("pipe.mqsim: it is a named pipe (FIFO), not a regular file: a replayed trace is read more than once"), "{}", stderr(&o));
    // Read once (trace info), a device without an end stops at the bound on unusable input.
    let mut cmd = flashmux();
    cmd.args(["trace", "info", "/dev/zero", "--format", "mqsim"]);
    let o = output_within(cmd);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("/dev/zero: no usable mqsim line in the 64 MiB read from line 1 on"), "{}", stderr(&o));
}

#[test]
fn replay_flags_are_checked_as_flags() {
    let dir = tmpdir("replay-flags");
    let good = write(&dir, "good.mqsim", "0 0 8 8 0\n1000 0 16 8 1\n");
    for (flag, value, says) in [
        ("--time-scale", "NaN", "--time-scale: NaN is not a positive number"),
        ("--time-scale", "inf", "--time-scale: inf is not a positive number"),
        ("--time-scale", "0", "--time-scale: 0 is not a positive number"),
        ("--max-requests", "18446744073709551615", "--max-requests: 18446744073709551615 is out of range: expected 1 to 9223372036854775807"),
        ("--max-requests", "0", "--max-requests: 0 is out of range"),
        ("--closed-loop", "0", "--closed-loop: 0 is out of range: expected 1 to 65536"),
        ("--max-outstanding", "70000", "--max-outstanding: 70000 is out of range: expected 1 to 65536"),
        ("--start", "x\"y", "--start: invalid duration 'x\"y'"),
        ("--duration", "0s", "--duration: must be longer than zero"),
        ("--capacity", "abc", "--capacity: invalid size 'abc'"),
        ("--fill", "NaN", "--fill: NaN is out of range"),
        ("--device", "bogus", "--device: unknown preset 'bogus': expected one of paper-c"),
        ("--scheduler", "bogus", "--scheduler: unknown scheduler 'bogus': expected one of none, mq-deadline, cfq"),
        ("--precondition", "bogus", "--precondition: unknown state 'bogus'"),
        ("--lba-fit", "fold", "--lba-fit: unknown 'fold': expected one of wrap, scale, reject"),
        ("--place-by", "bogus", "--place-by: unknown field 'bogus': expected one of device, host"),
        ("--place-by", "device", "--place-by: the drive ('tlc-nvme') offers no data placement: use a preset with FDP (tlc-nvme-fdp)"),
    ] {
        let o = flashmux().arg("replay").arg(&good).args([flag, value, "--no-progress", "-o"]).arg(dir.join("out")).output().unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {e}");
        assert!(e.starts_with(&format!("flashmux: error: {says}")), "{flag} {value}: expected '{says}' in: {e}");
        assert!(!e.contains("TOML") && !e.contains("tenant[0]"), "{flag} {value}: {e}");
    }
    // --place-by: a field the format has, on an FDP drive; each device's writes on its handle.
    let fdp = ["--device", "tlc-nvme-fdp", "--capacity", "32GiB", "--no-progress", "--output-format", "json", "-o"];
    let o = flashmux().arg("replay").arg(&good).args(["--place-by", "disk"]).args(fdp).arg(dir.join("out")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("flashmux: error: --place-by: a mqsim trace has no disk field to place writes by; it has: none, device"), "{}", stderr(&o));
    let two = write(&dir, "two.mqsim", "0 0 8 8 0\n1000 1 16 16 0\n2000 1 64 8 1\n");
    let o = flashmux().arg("replay").arg(&two).args(["--place-by", "device"]).args(fdp).arg(dir.join("out")).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let bytes: Vec<u64> = v["flashmux"]["device"]["placement"]["placements"].as_array().unwrap().iter().map(|p| p["host_bytes"].as_u64().unwrap()).collect();
    assert_eq!(bytes[..3], [4096, 8192, 0], "device 0's write on handle 0, device 1's on handle 1 (its read places nothing)");
    // A seed beyond TOML's integers is still a seed.
    let o = flashmux()
        .arg("replay")
        .arg(&good)
        .args(["--seed", "18446744073709551615", "--no-progress", "--output-format", "json", "-o"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["flashmux"]["seed"], 18446744073709551615u64);
}

#[test]
fn fill_without_data_to_fill_is_refused() {
    let dir = tmpdir("clean-fill");
    let says = "--fill 0.5: a clean drive holds no data";
    let o = flashmux().args(["run", "--precondition", "clean", "--fill", "0.5", "--no-progress", "-o"]).arg(dir.join("a")).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(says), "{}", stderr(&o));
    // The scenario's own state is clean: --fill alone is refused as well.
    let o = run_scenario(&dir, &format!("{SMALL}\n{TENANT}"), &["--fill", "0.5"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(says), "{}", stderr(&o));
    // replay starts from a clean drive unless told otherwise.
    let t = write(&dir, "t.mqsim", "0 0 8 8 0\n");
    let o = flashmux().arg("replay").arg(&t).args(["--fill", "0.5", "--no-progress", "-o"]).arg(dir.join("b")).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(says), "{}", stderr(&o));
    // With data to fill, it is a fill.
    let o = run_scenario(&dir, &format!("{SMALL}\n{TENANT}"), &["--precondition", "sequential-fill", "--fill", "0.5"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_replay_of_nothing_is_an_error_and_trace_warnings_reach_every_output() {
    let dir = tmpdir("replay-nothing");
    let t = write(&dir, "t.mqsim", "0 0 8 8 0\n1000000 0 16 8 1\n1500000000 0 24 8 1\n");
    let o = flashmux().arg("replay").arg(&t).args(["--start", "1000s", "--no-progress", "--output-format", "json", "-o"]).arg(dir.join("out")).output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("flashmux: error: tenant 'trace': nothing was replayed: the trace ends at 1.5 s; start 1000 s is past it"), "{e}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("out/results.json")).unwrap()).unwrap();
    assert!(v["flashmux"]["warnings"].to_string().contains("nothing was replayed"), "{v}");
    // Out-of-order times: a warning on stderr, in results.json and in the table.
    let t = write(&dir, "back.mqsim", "3000 0 8 8 0\n2000 0 16 8 1\n1000 0 24 8 1\n");
    let o = flashmux().arg("replay").arg(&t).args(["--no-progress", "-o"]).arg(dir.join("back")).output().unwrap();
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    let says = "tenant 'trace': 2 request(s) of the trace are out of time order";
    assert!(e.contains(&format!("flashmux: warning: {says}")), "{e}");
    assert!(std::fs::read_to_string(dir.join("back/results.json")).unwrap().contains(says));
    assert!(std::fs::read_to_string(dir.join("back/summary.txt")).unwrap().contains(says));
}

#[test]
fn validate_prints_each_figure_with_its_error_and_verdict() {
    let dir = tmpdir("validate");
    let csv = dir.join("v.csv");
    let o = flashmux().args(["validate", "--quick", "--preset", "840pro", "--csv"]).arg(&csv).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("840pro ")).collect();
    assert_eq!(rows.len(), 5, "{out}");
    assert!(rows.iter().all(|r| (r.contains("PASS") || r.contains("FAIL")) && r.contains('%')), "{out}");
    // The 840 Pro's fresh-drive random writes are its one predicted figure; the others set a
    // parameter, which the CSV names.
    assert_eq!(rows.iter().filter(|r| r.contains(" predicted ")).count(), 1, "{out}");
    assert!(rows.iter().filter(|r| r.contains(" calibrated ")).count() == 4, "{out}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("preset,figure,published,flashmux,error_pct,pass,calibrates,source\n") && text.lines().count() == 6, "{text}");
    assert!(text.contains(",device.timing.program,") && text.contains(",device.interface.command_overhead,"), "{text}");
    // --strict: exit 1 exactly when a row fails.
    let o = flashmux().args(["validate", "--quick", "--preset", "x25e", "--strict"]).output().unwrap();
    let failed = String::from_utf8_lossy(&o.stdout).lines().any(|l| l.starts_with("x25e ") && l.contains("FAIL"));
    assert_eq!(o.status.code(), Some(if failed { 1 } else { 0 }), "{}", String::from_utf8_lossy(&o.stdout));
    let o = flashmux().args(["validate", "--preset", "paper-c"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no published figures") && stderr(&o).contains("x25e"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `run --record`: the commands the block layer sent, after the elevator merged a sequential
/// writer's waiting requests, in a format the trace reader takes back; a format that cannot be
/// written and a path that cannot be created are bad input, before anything runs.
#[test]
fn run_records_the_commands_the_block_layer_sends() {
    let dir = tmpdir("run-record");
    let text = "[device]\npreset = \"x25e\"\ncapacity = \"8GiB\"\n[host]\nscheduler = \"mq-deadline\"\nqueue_depth = 4\n\
                [[tenant]]\nname = \"seq\"\nfio = \"[s]\\nrw=write\\nbs=4k\\niodepth=32\\nsize=1m\\n\"\n";
    let rec = dir.join("rec.blkparse");
    let o = run_scenario(&dir, text, &["--record", rec.to_str().unwrap(), "--record-format", "blkparse"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<String> = std::fs::read_to_string(&rec).unwrap().lines().map(String::from).collect();
    assert!(stderr(&o).contains(&format!("flashmux: recorded {} commands to", lines.len())), "{}", stderr(&o));
    // 256 writes of 4 KiB: the first four take the four tags, the rest wait and merge, so far
    // fewer commands than writes reach the device, and they cover the megabyte exactly.
    assert!(lines.len() < 64, "{} commands", lines.len());
    let sectors: u64 = lines.iter().map(|l| l.split_whitespace().nth(9).unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(sectors, 2048, "{lines:?}");
    assert!(lines.iter().all(|l| l.contains(" D   W ") && l.ends_with("[seq]")), "{lines:?}");
    let info = flashmux().args(["trace", "info"]).arg(&rec).output().unwrap();
    assert!(String::from_utf8_lossy(&info.stdout).contains(&format!("requests   {} (0 reads", lines.len())));
    for (args, says) in [
        (vec!["--record", "x.msr", "--record-format", "msr"], "--record-format: cannot write 'msr'"),
        (vec!["--record", "/nonexistent/dir/x.iolog"], "--record: /nonexistent/dir/x.iolog"),
    ] {
        let o = run_scenario(&dir, text, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with(&format!("flashmux: error: {says}")), "{}", stderr(&o));
    }
}

/// `trace compare`: a real kernel's capture against itself differs in nothing; against the
/// random-read capture its mix and sizes differ as the traces say; JSON carries the same rows;
/// a missing trace is bad input.
#[test]
fn trace_compare_puts_two_traces_side_by_side() {
    let kernel = Path::new(env!("CARGO_MANIFEST_DIR")).join("../flashmux/tests/data/kernel/ext4");
    let (stream, rr) = (kernel.join("stream.blktrace.0.gz"), kernel.join("randread-small.blktrace.0.gz"));
    let o = flashmux().args(["trace", "compare"]).arg(&stream).arg(&stream).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    for l in text.lines().skip(1) {
        assert!(l.ends_with("+0.0%") || l.ends_with("+0.0 pt") || l.ends_with(" -"), "{l}");
    }
    let o = flashmux().args(["trace", "compare", "--json"]).arg(&stream).arg(&rr).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = |m: &str| v["rows"].as_array().unwrap().iter().find(|r| r["metric"] == m).unwrap().clone();
    assert_eq!((row("writes")["a"].as_f64(), row("writes")["b"].as_f64()), (Some(120.0), Some(3.0)));
    assert_eq!(row("reads")["b"].as_f64(), Some(5537.0));
    assert_eq!(row("reads, % of reads and writes")["kind"], "share");
    let o = flashmux().args(["trace", "compare"]).arg(&stream).arg(kernel.join("missing.gz")).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("missing.gz"), "{}", stderr(&o));
}

/// fio's `examples/xnvme-fdp.fio`, as fio ships it.
const XNVME_FDP: &str = include_str!("../../flashmux/tests/data/fio/xnvme-fdp.fio");

/// fio's xNVMe FDP example runs as it is on the FDP preset, its `[override]` job's options from
/// the environment as its README says: each job's 2 MiB go round robin through placement IDs 4
/// and 5, a MiB through each.
#[test]
fn fio_s_xnvme_fdp_example_runs_as_it_is() {
    let dir = tmpdir("xnvme-fdp");
    let job = write(&dir, "xnvme-fdp.fio", XNVME_FDP);
    let o = flashmux()
        .args(["run", "--fio"])
        .arg(&job)
        .args(["--device", "tlc-nvme-fdp", "--output-format", "json", "-o"])
        .arg(dir.join("out"))
        .env("FIO_RW", "randwrite")
        .env("FIO_IODEPTH", "4")
        .env("FIO_BS", "16k")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jobs"][0]["jobname"], "default");
    assert_eq!(v["jobs"][1]["jobname"], "override");
    for j in 0..2 {
        assert_eq!(v["jobs"][j]["write"]["io_bytes"], 2 << 20);
    }
    let p = &v["flashmux"]["device"]["placement"];
    assert_eq!(p["kind"], "fdp");
    let bytes: Vec<u64> = p["placements"].as_array().unwrap().iter().map(|s| s["host_bytes"].as_u64().unwrap()).collect();
    assert_eq!(bytes, vec![0, 0, 0, 0, 2 << 20, 2 << 20, 0, 0]);
}
