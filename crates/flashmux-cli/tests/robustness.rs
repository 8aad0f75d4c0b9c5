//! What a careless or hostile user does to `flashmux run` loses no results, exhausts no memory
//! and is answered at once: an unusable output directory before the run, a Ctrl-C within an
//! event however slow the events, a run paced to years of simulated time in the memory of its
//! work.

mod common;

use common::{flashmux, stderr, tmpdir, write, SMALL};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn results(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap()
}

const WRITER: &str = "[[tenant]]\nname = \"t\"\nfio = \"[t]\\nrw=randwrite\\nbs=4k\\niodepth=8\\ntime_based\\nruntime=100000s\\n\"\n";

#[test]
fn an_unusable_output_directory_is_refused_before_the_run() {
    let dir = tmpdir("bad-out");
    let scenario = write(&dir, "s.toml", &format!("{SMALL}\n[precondition]\nstate = \"aged\"\n{WRITER}"));
    let file = write(&dir, "a-file", "");
    let o = flashmux().arg("run").arg(&scenario).arg("-o").arg(file.join("x")).args(["--output-format", "json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains(&format!("output directory {}", file.join("x").display())) && e.contains("-o DIR"), "{e}");
    assert!(o.stdout.is_empty(), "nothing was simulated");
    // A directory that can be created is, but only once there are results: a scenario refused
    // after the check leaves nothing behind.
    let fresh = dir.join("new/deeper");
    let bad = write(&dir, "bad.toml", &format!("{SMALL}\n[[tenant]]\nname = \"t\"\nfio = \"[t]\\nrw=write\\nsize=1t\\n\"\n"));
    let o = flashmux().arg("run").arg(&bad).arg("-o").arg(&fresh).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!dir.join("new").exists());
}

/// Whether a run has begun streaming its timeline into `out` (its partial file is there): the
/// run is under way. Any file would not do: the output directory's probe comes before the run.
fn streaming(out: &std::path::Path) -> bool {
    std::fs::read_dir(out).is_ok_and(|d| d.flatten().any(|e| e.file_name().to_string_lossy().ends_with(".partial")))
}

#[test]
fn results_that_cannot_be_written_at_the_end_are_kept_elsewhere() {
    let dir = tmpdir("gone-out");
    // Long enough (about a second of wall-clock time) for the test to act while it runs, with
    // the timeline's first rows written at once.
    let scenario = write(
        &dir,
        "s.toml",
        &format!("{SMALL}\n[stop]\ntime = \"60s\"\n[output]\ntimeline_interval = \"10ms\"\n{WRITER}"),
    );
    let out = dir.join("out");
    let child = flashmux().arg("run").arg(&scenario).arg("-o").arg(&out).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    // Once the run has begun (the timeline streams into the directory), the directory is
    // replaced by a file.
    let start = Instant::now();
    while !streaming(&out) {
        assert!(start.elapsed() < Duration::from_secs(60), "the run never started writing");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::write(&out, "in the way").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    let at = e.find("the results were written to ").map(|i| &e[i + 28..]).unwrap_or_default();
    let kept = std::path::PathBuf::from(at.split(" instead").next().unwrap_or_default());
    assert!(kept.join("results.json").exists() && kept.join("summary.txt").exists(), "{e}");
    assert_eq!(results(&kept)["flashmux"]["stop_reason"], "time-limit");
    std::fs::remove_dir_all(kept).unwrap();
}

#[test]
fn a_run_the_machine_cannot_hold_is_refused_with_its_estimate() {
    let dir = tmpdir("too-big");
    let s = write(&dir, "s.toml", &format!("[device]\npreset = \"tlc-nvme\"\ncapacity = \"1TiB\"\n{WRITER}"));
    let o = flashmux().arg("run").arg(&s).arg("-o").arg(dir.join("out")).env("FLASHMUX_MEMORY_AVAILABLE", "2GiB").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("needs about 2.") && e.contains("mapping tables and ownership ledger") && e.contains("2.00 GiB is available"), "{e}");
    assert!(e.contains("[device] capacity"), "says what to change: {e}");
    assert!(!dir.join("out").exists());
}

#[test]
fn check_every_zero_is_an_error() {
    let o = flashmux().args(["run", "--check-invariants", "--check-every", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--check-every"), "{}", stderr(&o));
}

/// Sends SIGINT to `child` once `ready` holds, then returns its exit and the seconds it took
/// to exit after the signal.
fn interrupt(mut child: std::process::Child, ready: impl Fn() -> bool) -> (std::process::Output, f64) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(120), "the run never got there");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it was interrupted");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Instant::now();
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    (o, sent.elapsed().as_secs_f64())
}

#[test]
fn ctrl_c_stops_a_run_whose_events_are_slow() {
    // Invariant checks after every event make each one slow (a whole-drive check): the stop
    // must not wait for a batch of them.
    let dir = tmpdir("slow-events");
    let scenario = write(
        &dir,
        "s.toml",
        &format!(
            "[device]\npreset = \"paper-c\"\ncapacity = \"1GiB\"\n[precondition]\nstate = \"aged\"\n\
             [output]\ntimeline_interval = \"100us\"\n{WRITER}"
        ),
    );
    let out = dir.join("out");
    let child = flashmux()
        .arg("run")
        .arg(&scenario)
        .arg("-o")
        .arg(&out)
        .args(["--check-invariants", "--check-every", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The timeline's first rows are written once 100 µs of simulated time has passed.
    let (o, secs) = interrupt(child, || streaming(&out));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    // Events here take milliseconds each; 200,000 of them took minutes before a stop was
    // noticed. The bound is generous for a loaded machine: a stop takes one event.
    assert!(secs < 20.0, "{secs} s from SIGINT to exit");
    let v = results(&out);
    assert_eq!(v["flashmux"]["stop_reason"], "interrupted");
    assert!(v["jobs"][0]["write"]["total_ios"].as_u64().unwrap() > 0);
}

#[test]
fn ctrl_c_stops_preconditioning() {
    let dir = tmpdir("stop-aging");
    let scenario = write(
        &dir,
        "s.toml",
        &format!("[device]\npreset = \"tlc-nvme\"\ncapacity = \"256GiB\"\n[precondition]\nstate = \"aged\"\n{WRITER}"),
    );
    let out = dir.join("out");
    let child = flashmux().arg("run").arg(&scenario).arg("-o").arg(&out).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    // Aging 256 GiB takes tens of seconds; a second in, it is under way.
    let began = Instant::now();
    let (o, secs) = interrupt(child, || began.elapsed() > Duration::from_secs(1));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(secs < 20.0, "{secs} s from SIGINT to exit");
    let v = results(&out);
    assert_eq!(v["flashmux"]["stop_reason"], "interrupted");
    let p = &v["flashmux"]["device"]["precondition"];
    assert_eq!(p["interrupted"], true, "{p}");
    assert!(v["flashmux"]["warnings"].to_string().contains("interrupted"));
}

/// Runs `flashmux args...` to its end; returns its exit code and peak resident memory in MiB.
#[allow(clippy::zombie_processes)] // reaped by wait4, which also gives its peak memory
fn peak_rss_mib(args: &[&std::ffi::OsStr]) -> (i32, f64) {
    let child = flashmux().args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, writing into the two locals.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t);
    (libc::WEXITSTATUS(status), usage.ru_maxrss as f64 / 1024.0)
}

#[test]
fn a_run_paced_over_years_uses_the_memory_of_its_work() {
    // One 4 KiB write per 4,096 s of simulated time (rate is bytes/s), no stop: 1,024 writes
    // take 133 years. Kept per second of simulated time (timeline rows, bandwidth windows) that
    // was about 2 GiB and minutes; 8 writes of it must cost the same memory as 1,024.
    let dir = tmpdir("paced");
    let mut peaks = Vec::new();
    for size in ["32k", "4m"] {
        let s = write(
            &dir,
            &format!("{size}.toml"),
            &format!("[device]\npreset = \"paper-c\"\ncapacity = \"1GiB\"\n[[tenant]]\nname = \"a\"\nfio = \"[a]\\nrw=write\\nbs=4k\\nrate=1\\nsize={size}\\n\"\n"),
        );
        let out = dir.join(size);
        let (code, mib) = peak_rss_mib(&["run".as_ref(), s.as_os_str(), "-o".as_ref(), out.as_os_str()]);
        assert_eq!(code, 0);
        peaks.push(mib);
        let v = results(&out);
        assert_eq!(v["jobs"][0]["write"]["io_bytes"], if size == "32k" { 32 << 10 } else { 4 << 20 });
        let rows = std::fs::read_to_string(out.join("timeline.csv")).unwrap().lines().count();
        assert!(rows <= 2 * 1024 + 2, "{rows} timeline rows");
    }
    assert!(peaks[1] <= peaks[0] + 4.0, "peak RSS {} MiB for 8 writes, {} MiB for 1,024", peaks[0], peaks[1]);
}

/// Every latency record of `v` (an object with `max` and `percentile`) keeps its percentiles
/// at or below its maximum, as fio does; returns how many records were checked.
fn check_percentiles(v: &serde_json::Value, path: &str) -> usize {
    match v {
        serde_json::Value::Object(o) => {
            let mut n = 0;
            if let (Some(max), Some(p)) = (o.get("max").and_then(|m| m.as_u64()), o.get("percentile")) {
                for (k, pv) in p.as_object().unwrap() {
                    let pv = pv.as_u64().unwrap();
                    assert!(pv <= max, "{path}: p{k} = {pv} above max {max}");
                }
                if let Some(min) = o.get("min").and_then(|m| m.as_u64()) {
                    assert!(p.as_object().unwrap().values().all(|x| x.as_u64().unwrap() >= min), "{path}: below min");
                }
                n += 1;
            }
            n + o.iter().map(|(k, x)| check_percentiles(x, &format!("{path}.{k}"))).sum::<usize>()
        }
        serde_json::Value::Array(a) => a.iter().enumerate().map(|(i, x)| check_percentiles(x, &format!("{path}[{i}]"))).sum(),
        _ => 0,
    }
}

#[test]
fn no_percentile_is_above_its_maximum() {
    let dir = tmpdir("pmax");
    let tenants: String = ["randwrite", "randread", "randrw", "write"]
        .iter()
        .map(|rw| format!("[[tenant]]\nname = \"{rw}\"\nfio = \"[{rw}]\\nrw={rw}\\nbs=4k\\niodepth=4\\nfsync=16\\n\"\n"))
        .collect();
    let s = write(&dir, "s.toml", &format!("{SMALL}\n[precondition]\nstate = \"aged\"\n[stop]\ntime = \"300ms\"\n{tenants}"));
    let o = flashmux().arg("run").arg(&s).arg("-o").arg(dir.join("out")).args(["--output-format", "json+"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(check_percentiles(&v, "") >= 8);
}
