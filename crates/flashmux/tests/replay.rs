//! Trace tenants (`trace = ...` in a `[[tenant]]`): a real captured trace replays with its exact
//! request count, mix and sizes; open-loop timing follows the trace's times (scaled), closed
//! loop ignores them; a trace too fast for the device is reported; addresses are fitted into the
//! tenant's region; streams are selected; bad input is a scenario error naming the key.

mod common;

use common::TempFile;
use flashmux::config::Scenario;
use flashmux::metrics::RunResults;
use flashmux::report::fio_json;
use flashmux::sim::Simulator;
use std::path::Path;

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/traces").join(name).display().to_string()
}

fn scenario(tenants: &str) -> Result<Scenario, flashmux::config::ConfigError> {
    let text = format!("name = \"replay\"\nseed = 1\n[device]\npreset = \"tlc-nvme\"\ncapacity = \"16GiB\"\n{tenants}");
    Scenario::from_toml(&text, "replay.toml", Path::new("."))
}

fn run(tenants: &str) -> RunResults {
    let mut sim = Simulator::new(scenario(tenants).unwrap()).unwrap();
    sim.run();
    sim.finish()
}

fn tenant(name: &str, trace: &str) -> String {
    format!("[[tenant]]\nname = \"{name}\"\ntrace = {trace}\n")
}

/// An MQSim trace: `n` requests every `gap_ns`, alternating write and read of 8 sectors.
fn mqsim(n: u64, gap_ns: u64) -> String {
    (0..n).map(|i| format!("{} 0 {} 8 {}\n", i * gap_ns, (i * 7919 % 4096) * 8, i % 2)).collect()
}

#[test]
fn the_captured_blktrace_replays_exactly() {
    for file in ["fio-randrw.blktrace.0.gz", "fio-randrw.blkparse.txt.gz"] {
        let r = run(&tenant("fio", &format!("{{ path = \"{}\" }}", data(file))));
        let io = &r.tenants[0].io;
        assert_eq!((io.read.ios, io.write.ios), (9165, 3951), "{file}");
        assert_eq!((io.read.bytes, io.write.bytes), (9165 * 4096, 3951 * 4096), "{file}: every request 4 KiB");
        let rp = r.tenants[0].replay.as_ref().unwrap();
        assert_eq!((rp.requests, rp.bad_lines, rp.out_of_range, rp.clipped), (13116, 0, 0, 0), "{file}");
        assert!(rp.error.is_none());
        // The trace spans 0.3 s: open-loop replay takes as long.
        assert!((0.29e9..0.31e9).contains(&(r.sim_time_ns as f64)), "{file}: {} ns", r.sim_time_ns);
    }
}

#[test]
fn open_loop_follows_the_scaled_times_and_closed_loop_ignores_them() {
    let t = TempFile::new("t.mqsim", &mqsim(200, 1_000_000));
    let at = |trace: String| run(&tenant("t", &trace));
    let own = at(format!("{{ path = \"{}\" }}", t.path()));
    let fast = at(format!("{{ path = \"{}\", time_scale = 0.5 }}", t.path()));
    let closed = at(format!("{{ path = \"{}\", closed_loop = 4 }}", t.path()));
    // The last request is due at 199 ms (99.5 ms at half scale) and takes well under 1 ms.
    assert!((199e6..200e6).contains(&(own.sim_time_ns as f64)), "{}", own.sim_time_ns);
    assert!((99.5e6..100.5e6).contains(&(fast.sim_time_ns as f64)), "{}", fast.sim_time_ns);
    assert!(closed.sim_time_ns < 20_000_000, "closed loop runs back to back: {}", closed.sim_time_ns);
    for r in [&own, &fast, &closed] {
        assert_eq!(r.tenants[0].io.ios(), 200);
        assert_eq!(r.tenants[0].replay.as_ref().unwrap().late, 0, "the device keeps up");
    }
    // Deterministic: byte-identical results.
    let again = at(format!("{{ path = \"{}\", time_scale = 0.5 }}", t.path()));
    assert_eq!(fio_json(&fast, false).to_string(), fio_json(&again, false).to_string());
}

#[test]
fn a_trace_too_fast_for_the_device_is_reported() {
    // 5,000 writes all at time 0, at most 4 outstanding: replay falls far behind.
    let t = TempFile::new("burst.mqsim", &mqsim(5000, 0));
    let r = run(&tenant("t", &format!("{{ path = \"{}\", max_outstanding = 4 }}", t.path())));
    let rp = r.tenants[0].replay.as_ref().unwrap();
    assert_eq!(rp.requests, 5000);
    assert!(rp.late > 4000 && rp.behind_max_ns > 5_000_000, "{rp:?}");
    assert!(r.warnings.iter().any(|w| w.contains("too fast for the device")), "{:?}", r.warnings);
}

#[test]
fn addresses_are_fitted_into_the_region() {
    // Offsets up to 64 GiB into two tenants of 8 GiB each.
    let text: String = (0..100u64).map(|i| format!("{} 0 {} 16 0\n", i * 1000, i * (64 << 30) / 100 / 512)).collect();
    let t = TempFile::new("far.mqsim", &text);
    for (fit, replayed, refused) in [("wrap", 100, 0), ("scale", 100, 0), ("reject", 13, 87)] {
        let r = run(&format!(
            "{}region = {{ offset = \"8GiB\", size = \"8GiB\" }}\n",
            tenant("t", &format!("{{ path = \"{}\", lba_fit = \"{fit}\" }}", t.path()))
        ));
        let rp = r.tenants[0].replay.as_ref().unwrap();
        assert_eq!((r.tenants[0].io.write.ios, rp.out_of_range), (replayed, refused), "{fit}");
        // Every write landed in the tenant's region: the device holds data only there.
        assert!(r.device.ftl.host_units_programmed <= replayed * 2 + 2, "{fit}");
    }
}

#[test]
fn one_trace_splits_into_tenants_by_a_field() {
    let text = "128166385295514663,hm,0,Write,4096,4096,100\n\
                128166385295524663,hm,1,Read,8192,4096,100\n\
                128166385295534663,hm,1,Write,0,8192,100\n\
                128166385295544663,prn,0,Read,0,512,100\n";
    let t = TempFile::new("msr.csv", text);
    let pick = |name: &str, select: &str| tenant(name, &format!("{{ path = \"{}\", tenant_by = \"disk\", select = \"{select}\" }}", t.path()));
    let r = run(&format!("{}{}{}", pick("a", "hm_0"), pick("b", "hm_1"), pick("c", "prn_0")));
    let counts: Vec<(u64, u64)> = r.tenants.iter().map(|t| (t.io.read.ios, t.io.write.ios)).collect();
    assert_eq!(counts, [(0, 1), (1, 1), (1, 0)]);
    // Each tenant's first request is at its own trace time, relative to the trace's start.
    assert_eq!(r.tenants[1].replay.as_ref().unwrap().skipped, 2);
}

#[test]
fn bad_lines_are_counted_and_strict_fails_at_the_first() {
    let text = format!("{}this is not a request\n{}", mqsim(3, 1000), "5000 0 12 0 0\n");
    let t = TempFile::new("bad.mqsim", &text);
    let r = run(&tenant("t", &format!("{{ path = \"{}\", format = \"mqsim\" }}", t.path())));
    let rp = r.tenants[0].replay.as_ref().unwrap();
    assert_eq!((rp.requests, rp.bad_lines), (3, 2), "{rp:?}");
    assert_eq!(rp.first_bad_lines.iter().map(|b| b.0).collect::<Vec<_>>(), [4, 5]);
    assert!(r.warnings.iter().any(|w| w.contains("2 bad trace line(s)") && w.contains("line 4")), "{:?}", r.warnings);
    // Strict: the replay stops at line 4; what ran is in the results, with the error.
    let r = run(&tenant("t", &format!("{{ path = \"{}\", format = \"mqsim\", strict = true }}", t.path())));
    let rp = r.tenants[0].replay.as_ref().unwrap();
    assert_eq!(rp.requests, 3);
    assert!(rp.error.as_deref().is_some_and(|e| e.contains(":4:")), "{rp:?}");
}

#[test]
fn bad_trace_settings_are_scenario_errors() {
    let t = TempFile::new("ok.mqsim", &mqsim(10, 1000));
    let p = t.path();
    for (trace, says) in [
        (format!("{{ path = \"{p}\", format = \"csv\" }}"), "format: unknown format 'csv'"),
        (format!("{{ path = \"{p}\", tenant_by = \"asu\" }}"), "has no asu field"),
        (format!("{{ path = \"{p}\", tenant_by = \"nope\" }}"), "tenant_by: unknown field 'nope'"),
        (format!("{{ path = \"{p}\", select = \"dev0\" }}"), "select: a stream is selected by a field"),
        (format!("{{ path = \"{p}\", time_scale = 0.0 }}"), "time_scale: 0 is not a positive number"),
        (format!("{{ path = \"{p}\", closed_loop = 4, time_scale = 2.0 }}"), "closed_loop ignores the trace's times"),
        (format!("{{ path = \"{p}\", closed_loop = 0 }}"), "closed_loop: 0 is out of range"),
        (format!("{{ path = \"{p}\", lba_fit = \"fold\" }}"), "lba_fit: unknown 'fold'"),
        (format!("{{ path = \"{p}\", duration = \"0s\" }}"), "duration: must be more than 0"),
        (format!("{{ path = \"{p}\", bogus = 1 }}"), "unknown field"),
        ("\"/no/such/trace.csv\"".to_string(), "cannot read trace '/no/such/trace.csv'"),
    ] {
        let e = scenario(&tenant("t", &trace)).unwrap_err().to_string();
        assert!(e.contains(says), "{trace}: {e}");
    }
    let both = scenario(&format!("{}fio = \"[j]\\nrw=read\\n\"\n", tenant("t", &format!("\"{p}\"")))).unwrap_err().to_string();
    assert!(both.contains("only one of fio, job_file, personality and trace"), "{both}");
    let empty = TempFile::new("empty.mqsim", "# nothing\n");
    let e = scenario(&tenant("t", &format!("{{ path = \"{}\", format = \"mqsim\" }}", empty.path()))).unwrap_err().to_string();
    assert!(e.contains("no valid request"), "{e}");
}

#[test]
fn a_stray_bad_line_near_the_start_does_not_hide_the_format() {
    use flashmux::workload::trace::{Format, TraceReader};
    let mut text = mqsim(19, 1000);
    text.insert_str(0, "garbage line\n");
    let mut r = TraceReader::from_bytes("t", text.into_bytes(), &Default::default()).unwrap();
    assert_eq!(r.format(), Format::Mqsim);
    let mut n = 0;
    while r.next_record().unwrap().is_some() {
        n += 1;
    }
    assert_eq!((n, r.bad_lines().count, r.bad_lines().first[0].line), (19, 1, 1));
    // Half the sample bad: no format is told.
    let half = format!("{}oops\n", mqsim(1, 0));
    assert!(TraceReader::from_bytes("t", half.into_bytes(), &Default::default()).is_err());
}

#[test]
fn trace_and_fio_tenants_share_a_drive_under_a_scheduler() {
    let t = TempFile::new("mix.mqsim", &mqsim(2000, 20_000));
    let text = format!(
        "{}[[tenant]]\nname = \"fio\"\nfio = \"[w]\\nrw=randwrite\\nbs=4k\\niodepth=8\\nnumber_ios=2000\\n\"\n[host]\nscheduler = \"cfq\"\n",
        tenant("trace", &format!("{{ path = \"{}\", closed_loop = 8 }}", t.path()))
    );
    let r = run(&text);
    assert_eq!(r.tenants.iter().map(|t| t.io.ios()).collect::<Vec<_>>(), [2000, 2000]);
    assert!(r.tenants[0].replay.is_some() && r.tenants[1].replay.is_none());
    assert!(r.tenants.iter().all(|t| t.sched.is_some()), "both scheduled by cfq");
}

#[test]
fn times_out_of_order_are_a_warning_with_their_count() {
    // An MSR trace (FILETIME ticks of 100 ns) of 1000 requests whose times run backwards: 999
    // are earlier than the one before them.
    let text: String = (0..1000u64).map(|i| format!("{},hm,0,Write,{},4096,100\n", 128166385295514663 - i * 10_000, i * 4096)).collect();
    let t = TempFile::new("backwards.csv", &text);
    let r = run(&tenant("t", &format!("{{ path = \"{}\" }}", t.path())));
    assert_eq!(r.tenants[0].replay.as_ref().unwrap().out_of_order, 999);
    let w: Vec<&String> = r.warnings.iter().filter(|w| w.contains("out of time order")).collect();
    assert_eq!(w.len(), 1, "{:?}", r.warnings);
    assert!(w[0].starts_with("tenant 't': 999 request(s) of the trace are out of time order"), "{}", w[0]);
    // In order: no warning.
    let t = TempFile::new("forwards.mqsim", &mqsim(50, 1000));
    let r = run(&tenant("t", &format!("{{ path = \"{}\" }}", t.path())));
    assert!(r.warnings.iter().all(|w| !w.contains("out of time order")), "{:?}", r.warnings);
}

#[test]
fn a_tenant_that_replays_nothing_is_told_why() {
    let t = TempFile::new("short.mqsim", &mqsim(100, 1_000_000)); // ends at 99 ms
    let fio = "[[tenant]]\nname = \"f\"\nfio = \"[f]\\nrw=randwrite\\nnumber_ios=100\\n\"\n";
    let why = |trace: &str| {
        let r = run(&format!("{fio}{}", tenant("t", trace)));
        assert_eq!(r.tenants[1].replay.as_ref().unwrap().requests, 0);
        assert_eq!(r.tenants[0].io.ios(), 100, "the other tenant runs");
        let w: Vec<String> = r.warnings.iter().filter(|w| w.contains("nothing was replayed")).cloned().collect();
        assert_eq!(w.len(), 1, "{:?}", r.warnings);
        w[0].clone()
    };
    let w = why(&format!("{{ path = \"{}\", start = \"1000s\" }}", t.path()));
    assert_eq!(w, "tenant 't': nothing was replayed: the trace ends at 0.099 s; start 1000 s is past it");
    let w = why(&format!("{{ path = \"{}\", start = \"50500us\", duration = \"100us\" }}", t.path()));
    assert_eq!(w, "tenant 't': nothing was replayed: no request in the window from 0.0505 s to 0.0506 s (the one before it is at 0.05 s, the one after it at 0.051 s)");
    let w = why(&format!("{{ path = \"{}\", tenant_by = \"device\", select = \"dev9\" }}", t.path()));
    assert_eq!(w, "tenant 't': nothing was replayed: the trace has no request of stream 'dev9'");
}
