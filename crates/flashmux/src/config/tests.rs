use super::*;
use crate::device::precondition::PreconditionState;
use crate::device::{DramTiming, EccRates};
use std::path::Path;
use crate::host::SchedulerKind;

const MINIMAL: &str = r#"
[device]
preset = "paper-c"

[[tenant]]
name = "a"
fio = """
[a]
rw=randwrite
bs=4k
"""
"#;

fn load(text: &str) -> Result<Scenario, ConfigError> {
    Scenario::from_toml(text, "test.toml", Path::new("."))
}

fn err(text: &str) -> String {
    load(text).expect_err("should be rejected").to_string()
}

#[test]
fn default_scenario_is_valid() {
    let s = Scenario::default_scenario();
    assert_eq!(s.tenants.len(), 2);
    assert_eq!(s.device.preset, "paper-c");
    assert_eq!(s.precondition.state, PreconditionState::Workload);
    // Disjoint halves.
    let (a, b) = (s.tenants[0].region, s.tenants[1].region);
    assert_eq!(a.0, 0);
    assert!(a.0 + a.1 <= b.0);
}

#[test]
fn minimal_scenario_gets_defaults() {
    let s = load(MINIMAL).unwrap();
    assert_eq!(s.seed, DEFAULT_SEED);
    assert_eq!(s.name, "test");
    assert_eq!(s.host.queue_depth, 1024);
    assert_eq!(s.output.timeline_interval, Nanos::from_secs(1));
    assert_eq!(s.tenants[0].region, (0, s.device.capacity_bytes()));
    assert_eq!(s.tenants[0].jobs()[0].name, "a");
}

#[test]
fn overrides_apply_on_top_of_the_preset() {
    let s = load(&format!(
        "{MINIMAL}\n[device.timing]\nread = \"40us\"\n[device.ftl]\noverprovisioning = 0.2\ngc_victim = \"cost-benefit\"\n"
    ))
    .unwrap();
    let DeviceKind::Ssd(c) = &s.device.kind else { panic!() };
    assert_eq!(c.timing.read, Nanos::from_us(40));
    assert_eq!(c.timing.program, Nanos::from_us(550), "untouched values stay the preset's");
    assert_eq!(c.overprovisioning, 0.2);
    assert_eq!(c.victim_policy, crate::ftl::VictimPolicy::CostBenefit);
    let s = load(&format!("{MINIMAL}\n[device.buffer]\nflush = \"watermark\"\nlow_watermark = 0.5\n")).unwrap();
    let DeviceKind::Ssd(c) = &s.device.kind else { panic!() };
    assert_eq!(c.flush, crate::device::FlushPolicy::Watermark { high: 0.9, low: 0.5 });
}

#[test]
fn capacity_scales_the_drive() {
    let s = load(&MINIMAL.replace("preset = \"paper-c\"", "preset = \"tlc-nvme\"\ncapacity = \"64GiB\"")).unwrap();
    let cap = s.device.capacity_bytes();
    assert!((64 << 30..(64 << 30) + (2 << 30)).contains(&cap), "{cap}");
}

#[test]
fn hash_is_stable_and_sensitive() {
    let a = load(MINIMAL).unwrap();
    let b = load(MINIMAL).unwrap();
    assert_eq!(a.config_hash(), b.config_hash());
    assert_eq!(a.config_hash().len(), 64);
    let c = load(&format!("seed = 7\n{MINIMAL}")).unwrap();
    assert_ne!(a.config_hash(), c.config_hash());
    let d = load(&MINIMAL.replace("bs=4k", "bs=8k")).unwrap();
    assert_ne!(a.config_hash(), d.config_hash());
}

#[test]
fn regions_auto_whole_explicit_and_percent() {
    let text = r#"
[device]
preset = "paper-c"
[[tenant]]
name = "a"
fio = "[a]\nrw=read\n"
[[tenant]]
name = "b"
region = { offset = "50%", size = "25%" }
fio = "[b]\nrw=read\n"
[[tenant]]
name = "c"
region = "whole"
fio = "[c]\nrw=read\n"
"#;
    let s = load(text).unwrap();
    let cap = s.device.capacity_bytes();
    assert_eq!(s.tenants[0].region.0, 0);
    assert!(s.tenants[0].region.1 <= cap / 3);
    assert_eq!(s.tenants[1].region.0, cap / 2 / 4096 * 4096);
    assert_eq!(s.tenants[2].region, (0, cap));
}

#[test]
fn a_personality_is_its_fio_job() {
    let s = load("[device]\npreset = \"paper-c\"\n[[tenant]]\nname = \"mail\"\npersonality = \"varmail\"\n").unwrap();
    let expected = crate::workload::personality::VARMAIL.parse().unwrap().jobs;
    assert_eq!(s.tenants[0].jobs(), expected);
    assert_eq!(s.tenants[0].jobs()[0].file, "<personality varmail>");
    // varmail's fsync=1 is modelled (a flush after each write), so it is not among the notes.
    assert!(!s.notes.contains(&"fsync".to_string()), "{:?}", s.notes);
}

// ---- Bad input: one clear error each ----

#[test]
fn malformed_toml_names_the_line() {
    let e = err("[device\npreset = 1");
    assert!(e.starts_with("test.toml: "), "{e}");
    assert!(e.contains("line 1"), "{e}");
}

#[test]
fn unknown_keys_are_errors() {
    let e = err(&format!("{MINIMAL}\n[host]\nqueue_dept = 4\n"));
    assert!(e.contains("unknown field `queue_dept`"), "{e}");
    let e = err(&format!("colour = \"blue\"\n{MINIMAL}"));
    assert!(e.contains("unknown field `colour`"), "{e}");
    let e = err(&MINIMAL.replace("[device]", "[device.geometry]\nchanels = 4\n[device]"));
    assert!(e.contains("chanels"), "{e}");
}

#[test]
fn bad_values_name_the_key() {
    for (text, needle) in [
        (MINIMAL.replace("paper-c", "paper-z"), "device.preset: unknown preset 'paper-z'"),
        (format!("{MINIMAL}\n[device.timing]\nread = \"65\"\n"), "device.timing.read: invalid duration '65'"),
        (format!("{MINIMAL}\n[device.geometry]\nchannels = 0\n"), "device.geometry.channels: must be at least 1"),
        (format!("{MINIMAL}\n[device.geometry]\npage_size = \"6000\"\n"), "page_size must be a power of two"),
        (format!("{MINIMAL}\n[device.ftl]\noverprovisioning = 0.001\n"), "over-provisioning too low"),
        (format!("{MINIMAL}\n[device.ftl]\noverprovisioning = -1\n"), "device.ftl.overprovisioning"),
        (format!("{MINIMAL}\n[device.geometry]\nblocks_per_plane = 1\n"), "device"),
        (format!("{MINIMAL}\n[host]\nscheduler = \"bfq\"\n"), "host.scheduler: unknown scheduler 'bfq'"),
        (format!("{MINIMAL}\n[virt]\nmode = \"xen\"\n"), "virt.mode: unknown mode 'xen'"),
        (format!("{MINIMAL}\n[virt]\nnomerges = 3\n"), "virt.nomerges: 3 is not a setting"),
        (format!("{MINIMAL}\n[host]\nscheduler = \"mcfq\"\n[host.mcfq]\nreading = \"literal\"\n"), "host.mcfq.reading: unknown reading 'literal'"),
        (format!("{MINIMAL}\n[virt]\nmax_merge = \"0\"\n"), "virt.max_merge: 0 bytes: expected a whole number of KiB, at least 4KiB"),
        (format!("{MINIMAL}\n[virt]\nmax_merge = \"4100\"\n"), "virt.max_merge: 4100 bytes"),
        (format!("{MINIMAL}\n[precondition]\nfill = 1.5\n"), "precondition.fill"),
        (format!("{MINIMAL}\n[precondition]\nstate = \"old\"\n"), "precondition.state: unknown state 'old'"),
        (format!("{MINIMAL}\n[stop]\ntime = \"0s\"\n"), "stop.time"),
        (format!("{MINIMAL}\n[device.buffer]\nsize = \"4k\"\n"), "device.buffer.size"),
        (format!("{MINIMAL}\n[device.ftl]\ngc_threshold_blocks = 1\n"), "gc_threshold_blocks"),
        (format!("{MINIMAL}\n[device.buffer]\nflush = \"lazy\"\n"), "device.buffer.flush: unknown policy 'lazy'"),
        (format!("{MINIMAL}\n[device.buffer]\nflush = \"watermark\"\nhigh_watermark = 0.5\nlow_watermark = 0.6\n"), "expected 0 < low < high <= 1"),
        (format!("{MINIMAL}\n[device.buffer]\nhigh_watermark = 0.5\n"), "apply only with flush"),
        ("[device]\npreset = \"paper-c\"\n".to_string(), "no tenants"),
        (MINIMAL.replace("preset = \"paper-c\"", "preset = \"paper-c\"\ncapacity = \"64k\""), "smaller than one block per plane"),
    ] {
        let e = err(&text);
        assert!(e.contains(needle), "expected '{needle}' in: {e}");
    }
}

#[test]
fn tenant_errors() {
    let two = |r1: &str, r2: &str| {
        format!(
            "[device]\npreset = \"paper-c\"\n[[tenant]]\nname = \"a\"\nregion = {r1}\nfio = \"[a]\\nrw=read\\n\"\n[[tenant]]\nname = \"b\"\nregion = {r2}\nfio = \"[b]\\nrw=read\\n\"\n"
        )
    };
    let e = err(&two("{ offset = \"0\", size = \"60%\" }", "{ offset = \"50%\", size = \"10%\" }"));
    assert!(e.contains("overlapping regions"), "{e}");
    let e = err(&two("{ offset = \"0\", size = \"200%\" }", "\"auto\""));
    assert!(e.contains("out of range"), "{e}");
    let e = err(&two("{ offset = \"0\", size = \"99GiB\" }", "\"auto\""));
    assert!(e.contains("exceeds the device's capacity"), "{e}");
    let e = err(&two("\"left\"", "\"auto\""));
    assert!(e.contains("unknown region 'left'"), "{e}");
    let e = err(&MINIMAL.replace("name = \"a\"", "name = \"a\"\njob_file = \"x.fio\""));
    assert!(e.contains("tenant[0] (a): give only one of fio, job_file and personality"), "{e}");
    let e = err(&MINIMAL.replace("name = \"a\"", "name = \"a\"\npersonality = \"varmail\""));
    assert!(e.contains("give only one of fio, job_file and personality"), "{e}");
    let e = err("[device]\npreset = \"paper-c\"\n[[tenant]]\nname = \"a\"\n");
    assert!(e.contains("tenant[0] (a): no workload: give fio = \"...\", job_file = \"...\", personality = \"...\" or trace = \"...\""), "{e}");
    let e = err(&format!("{MINIMAL}\n[[tenant]]\nname = \"a\"\nfio = \"[b]\\nrw=read\\n\"\n"));
    assert!(e.contains("used by another tenant"), "{e}");
}

#[test]
fn unknown_personality_lists_the_valid_names() {
    let e = err("[device]\npreset = \"paper-c\"\n[[tenant]]\nname = \"a\"\npersonality = \"oltp\"\n");
    assert!(
        e.contains("tenant[0] (a).personality: unknown personality 'oltp': expected one of fileserver, varmail, webproxy, msn, exchange, financial"),
        "{e}"
    );
}

use crate::error_chain as chain;

#[test]
fn missing_job_file_is_a_clear_error() {
    let with_job_file = |f: &str| MINIMAL.replace("fio = \"\"\"\n[a]\nrw=randwrite\nbs=4k\n\"\"\"", &format!("job_file = \"{f}\""));
    let e = chain(&load(&with_job_file("does-not-exist.fio")).unwrap_err());
    assert_eq!(
        e,
        "test.toml:7: tenant[0] (a).job_file: cannot read job file 'does-not-exist.fio' (./does-not-exist.fio): No such file or directory (os error 2)"
    );
    // Not a regular file: refused before it is opened (a pipe would block, /dev/zero fill memory).
    let e = chain(&load(&with_job_file("/dev/zero")).unwrap_err());
    assert_eq!(e, "test.toml:7: tenant[0] (a).job_file: cannot read job file '/dev/zero': it is a character device, not a regular file");
    // An include in the scenario's own fio text names the scenario, the tenant and the line.
    let e = chain(&load(&MINIMAL.replace("bs=4k", "bs=4k\ninclude /nonexistent/more.fio")).unwrap_err());
    assert_eq!(
        e,
        "test.toml[tenant a].fio:4: include /nonexistent/more.fio: cannot read '/nonexistent/more.fio': No such file or directory (os error 2)"
    );
}

#[test]
fn scenario_files_must_be_regular_files() {
    let e = chain(&Scenario::load(Path::new("/dev/zero")).unwrap_err());
    assert_eq!(e, "cannot read /dev/zero: it is a character device, not a regular file");
    let e = chain(&Scenario::load(Path::new("/nonexistent/s.toml")).unwrap_err());
    assert_eq!(e, "cannot read /nonexistent/s.toml: No such file or directory (os error 2)");
}

#[test]
fn bad_fio_value_names_file_line_and_option() {
    let e = err(&MINIMAL.replace("bs=4k", "bs=4q"));
    assert!(e.contains("test.toml[tenant a].fio:3: option 'bs'"), "{e}");
}

#[test]
fn null_device_rejects_flash_settings() {
    let text = MINIMAL.replace("paper-c", "null");
    let s = load(&text).unwrap();
    assert!(matches!(s.device.kind, DeviceKind::Null(_)));
    let e = err(&format!("{text}\n[device.timing]\nread = \"5us\"\n"));
    assert!(e.contains("has no flash"), "{e}");
    let s = load(&format!("{text}\n[precondition]\nstate = \"aged\"\n")).unwrap();
    assert!(s.warnings.iter().any(|w| w.contains("no effect on the null device")), "{:?}", s.warnings);
}

#[test]
fn weights_default_to_linux_and_reject_zero_negative_fractional_and_huge() {
    let s = load(MINIMAL).unwrap();
    assert_eq!(s.tenants[0].weight, DEFAULT_WEIGHT);
    let with = |w: &str| MINIMAL.replace("name = \"a\"", &format!("name = \"a\"\nweight = {w}"));
    let s = load(&with("10")).unwrap();
    assert_eq!(s.tenants[0].weight, 10);
    assert_ne!(s.config_hash(), load(MINIMAL).unwrap().config_hash(), "the weight is part of the config");
    assert_eq!(load(&with("500")).unwrap().config_hash(), load(MINIMAL).unwrap().config_hash());
    for bad in ["0", "-3", "1.5", "1001", "\"ten\""] {
        let e = err(&with(bad));
        assert!(e.contains("tenant[0] (a).weight") && e.contains("from 1 to 1000"), "{bad}: {e}");
    }
}

#[test]
fn scheduler_parameters_resolve_and_bad_ones_are_named() {
    use crate::host::{CfqParams, MotsParams, SchedulerKind};
    let with = |host: &str| format!("{MINIMAL}\n[host]\n{host}\n");
    let s = load(&with("scheduler = \"cfq\"\n[host.cfq]\nslice_idle = \"0ms\"\nquantum = 4")).unwrap();
    let p = CfqParams { slice_idle: Nanos::ZERO, quantum: 4, ..Default::default() };
    assert_eq!(s.host.scheduler, SchedulerKind::Cfq(p));
    let s = load(&with("scheduler = \"mcfq\"\n[host.mcfq]\nwindow = \"5s\"")).unwrap();
    let m = MotsParams { window: 5, ..Default::default() };
    assert_eq!(s.host.scheduler, SchedulerKind::Mcfq(CfqParams::default(), m));
    let s = load(&with("scheduler = \"mcfq\"\n[host.mcfq]\nreading = \"compounding\"")).unwrap();
    let m = MotsParams { compounding: true, ..Default::default() };
    assert_eq!(s.host.scheduler, SchedulerKind::Mcfq(CfqParams::default(), m));
    for (host, needle) in [
        ("scheduler = \"none\"\n[host.cfq]\nquantum = 4", "host.cfq: applies only with scheduler"),
        ("scheduler = \"cfq\"\n[host.mcfq]\nwindow = \"5s\"", "host.mcfq: applies only with scheduler = \"mcfq\""),
        ("scheduler = \"cfq\"\n[host.cfq]\nquantum = 0", "host.cfq.quantum"),
        ("scheduler = \"cfq\"\n[host.cfq]\nslice_sync = \"0ms\"", "host.cfq.slice_sync: must be longer than zero"),
        ("scheduler = \"cfq\"\n[host.cfq]\nslice_idle = \"soon\"", "host.cfq.slice_idle"),
        ("scheduler = \"mcfq\"\n[host.mcfq]\nwindow = \"2500ms\"", "not a whole number of sampling intervals"),
        ("scheduler = \"mcfq\"\n[host.mcfq]\nmin_scale = 0.0", "expected 0 < min_scale"),
        ("scheduler = \"mcfq\"\n[host.mcfq]\nmax_scale = 0.5", "expected 0 < min_scale"),
        ("scheduler = \"mcfq\"\n[host.mcfq]\nbw = 3", "unknown field"),
    ] {
        let e = err(&with(host));
        assert!(e.contains(needle), "expected '{needle}' in: {e}");
    }
}

#[test]
fn mq_deadline_and_the_elevator_s_settings_resolve_and_bad_ones_are_named() {
    use crate::host::{DeadlineParams, MergeConfig, SchedulerKind};
    let with = |host: &str| format!("{MINIMAL}\n[host]\n{host}\n");
    let s = load(&with("scheduler = \"mq-deadline\"\n[host.mq-deadline]\nfifo_batch = 4\nread_expire = \"100ms\"")).unwrap();
    let p = DeadlineParams { fifo_batch: 4, read_expire: Nanos::from_ms(100), ..Default::default() };
    assert_eq!(s.host.scheduler, SchedulerKind::MqDeadline(p));
    assert_eq!(load(&with("scheduler = \"deadline\"")).unwrap().host.scheduler.name(), "mq-deadline");
    let s = load(&with("nomerges = 1\nmax_sectors_kb = 512")).unwrap();
    assert_eq!(s.host.merge, MergeConfig { nomerges: 1, max_bytes: 512 << 10 });
    // Linux's defaults leave the configuration hash as it was before the settings existed.
    let default = load(&with("nomerges = 0\nmax_sectors_kb = 128")).unwrap();
    assert_eq!(default.config_hash(), load(MINIMAL).unwrap().config_hash());
    assert_ne!(s.config_hash(), load(MINIMAL).unwrap().config_hash());
    for (host, needle) in [
        ("nomerges = 3", "host.nomerges: 3 is not a setting"),
        ("max_sectors_kb = 2", "host.max_sectors_kb"),
        ("nomerges = -1", "nomerges"),
        ("scheduler = \"cfq\"\n[host.mq-deadline]\nfifo_batch = 4", "host.mq-deadline: applies only with scheduler = \"mq-deadline\""),
        ("scheduler = \"mq-deadline\"\n[host.mq-deadline]\nfifo_batch = 0", "host.mq-deadline.fifo_batch: must be at least 1"),
        ("scheduler = \"mq-deadline\"\n[host.mq-deadline]\nbatch = 3", "unknown field"),
    ] {
        let e = err(&with(host));
        assert!(e.contains(needle), "expected '{needle}' in: {e}");
    }
}

#[test]
fn volatile_write_cache_is_a_buffer_setting_with_preset_defaults() {
    let cache = |text: &str| match load(text).unwrap().device.kind {
        DeviceKind::Ssd(c) => c.volatile_write_cache,
        DeviceKind::Null(_) => panic!("an SSD"),
    };
    assert!(!cache(MINIMAL), "paper-c keeps its protected buffer");
    assert!(cache(&MINIMAL.replace("paper-c", "x25e")), "the X25-E has no power-loss protection");
    let set = |v: &str| format!("{MINIMAL}\n[device.buffer]\nvolatile_write_cache = {v}\n");
    assert!(cache(&set("true")));
    // Protected hashes as before the setting existed; volatile is a different configuration.
    let plain = load(MINIMAL).unwrap().config_hash();
    assert_eq!(load(&set("false")).unwrap().config_hash(), plain);
    assert_ne!(load(&set("true")).unwrap().config_hash(), plain);
    let e = err(&set("\"yes\""));
    assert!(e.contains("volatile_write_cache"), "{e}");
    let e = err(&format!("{}\n[device.buffer]\nvolatile_write_cache = true\n", MINIMAL.replace("paper-c", "null")));
    assert!(e.contains("device.buffer: preset 'null' has no flash"), "{e}");
}

#[test]
fn open_channel_is_a_device_mode_with_a_host_mapping() {
    let oc = |text: &str| match load(text).unwrap().device.kind {
        DeviceKind::Ssd(c) => c.open_channel,
        DeviceKind::Null(_) => panic!("an SSD"),
    };
    assert!(!oc(MINIMAL), "drives run their own FTL by default");
    assert!(oc(&MINIMAL.replace("paper-c", "cosmos")), "the Cosmos+ preset runs pblk");
    let mode = |preset: &str, m: &str| MINIMAL.replace("preset = \"paper-c\"", &format!("preset = \"{preset}\"\nmode = \"{m}\""));
    assert!(oc(&mode("paper-c", "open-channel")));
    assert!(!oc(&mode("cosmos", "ssd")));
    // Changing the mode changes the configuration; the default hashes as before the mode existed.
    let plain = load(MINIMAL).unwrap().config_hash();
    assert_eq!(load(&mode("paper-c", "ssd")).unwrap().config_hash(), plain);
    assert_ne!(load(&mode("paper-c", "open-channel")).unwrap().config_hash(), plain);
    let e = err(&mode("paper-c", "host"));
    assert!(e.contains("device.mode: unknown mode 'host': expected one of ssd, open-channel"), "{e}");
    let e = err(&mode("null", "open-channel"));
    assert!(e.contains("device.mode") && e.contains("no flash"), "{e}");
    let dftl = format!("{}\n[device.ftl]\nmapping = \"dftl\"\n", mode("paper-c", "open-channel"));
    let e = err(&dftl);
    assert!(e.contains("device.ftl.mapping") && e.contains("host memory"), "{e}");
}

#[test]
fn fair_needs_a_drive_that_shows_gc_and_sane_parameters() {
    let fair = |preset: &str, extra: &str| {
        MINIMAL.replace("preset = \"paper-c\"", &format!("preset = \"{preset}\""))
            + &format!("\n[host]\nscheduler = \"fair\"\n{extra}\n")
    };
    let e = err(&fair("paper-c", ""));
    assert!(e.contains("host.scheduler: 'fair' needs a drive that shows the host its garbage collection"), "{e}");
    // An FDP drive shows its erases (its statistics log page); streams show nothing.
    assert!(load(&fair("tlc-nvme-fdp\"\ncapacity = \"32GiB", "")).is_ok());
    let e = err(&fair("tlc-nvme\"\ncapacity = \"32GiB\"\n[device.streams]\nstreams = 4\n#\"", ""));
    assert!(e.contains("'fair' needs a drive that shows the host its garbage collection") && e.contains("[device.fdp]"), "{e}");
    let s = load(&fair("cosmos", "[host.fair]\nperiod = \"50ms\"\nwindow = 1000\nwindows = 10")).unwrap();
    match s.host.scheduler {
        SchedulerKind::Fair(p) => {
            assert_eq!(p.period, Nanos::from_ms(50));
            assert_eq!((p.cost.window_requests, p.cost.windows), (1000, 10));
        }
        k => panic!("{k:?}"),
    }
    for (extra, needle) in [
        ("[host.fair]\nperiod = \"0ms\"", "host.fair.period"),
        ("[host.fair]\nperiod = \"-5ms\"", "host.fair.period"),
        ("[host.fair]\nwindow = 0", "host.fair.window"),
        ("[host.fair]\nwindows = 0", "host.fair.windows"),
        ("[host.fair]\nalpha = 0.5", "unknown field"),
    ] {
        let e = err(&fair("cosmos", extra));
        assert!(e.contains(needle), "expected '{needle}' in: {e}");
    }
    let e = err(&format!("{MINIMAL}\n[host]\nscheduler = \"cfq\"\n[host.fair]\nperiod = \"10ms\"\n"));
    assert!(e.contains("host.fair: applies only with scheduler = \"fair\""), "{e}");
}

#[test]
fn hwabc_takes_the_drives_fit_and_checks_its_parameters() {
    let hw = |sched: &str, preset: &str, extra: &str| {
        MINIMAL.replace("preset = \"paper-c\"", &format!("preset = \"{preset}\""))
            + &format!("\n[host]\nscheduler = \"{sched}\"\n{extra}\n")
    };
    for sched in ["hwabc", "hwabc-oracle"] {
        let e = err(&hw(sched, "840pro", ""));
        assert!(e.contains(&format!("host.scheduler: '{sched}' needs a drive that shows the host its garbage collection")), "{e}");
    }
    match load(&hw("hwabc", "cosmos", "")).unwrap().host.scheduler {
        SchedulerKind::Hwabc(_, h) => {
            assert_eq!((h.a, h.b), crate::config::presets::gc_contribution_fit("cosmos"));
            assert_eq!(h.alpha, 0.5);
            assert!(!h.oracle);
        }
        k => panic!("{k:?}"),
    }
    let text = hw("hwabc-oracle", "cosmos", "[host.hwabc]\nperiod = \"20ms\"\nwindow = 100\nalpha = 0.25\na = 2.0\nb = 5.0");
    match load(&text).unwrap().host.scheduler {
        SchedulerKind::Hwabc(p, h) => {
            assert_eq!((p.period, p.cost.window_requests), (Nanos::from_ms(20), 100));
            assert_eq!((h.a, h.b, h.alpha, h.oracle), (2.0, 5.0, 0.25, true));
        }
        k => panic!("{k:?}"),
    }
    for (extra, needle) in [
        ("[host.hwabc]\nalpha = 0.0", "host.hwabc.alpha: 0 is out of range: expected a smoothing factor in (0, 1)"),
        ("[host.hwabc]\nalpha = 1.0", "host.hwabc.alpha: 1 is out of range"),
        ("[host.hwabc]\nalpha = -0.5", "host.hwabc.alpha"),
        ("[host.hwabc]\na = -1.0\nb = -1.0", "host.hwabc.a, b: G = a·ln(R) + b is never positive"),
        ("[host.hwabc]\nperiod = \"10us\"", "host.hwabc.period: 10us is too short"),
        ("[host.hwabc]\nwindows = 0", "host.hwabc.windows"),
        ("[host.hwabc]\nbeta = 1", "unknown field"),
    ] {
        let e = err(&hw("hwabc", "cosmos", extra));
        assert!(e.contains(needle), "expected '{needle}' in: {e}");
    }
    let e = err(&hw("fair", "cosmos", "[host.hwabc]\nalpha = 0.5"));
    assert!(e.contains("host.hwabc: applies only with scheduler = \"hwabc\" or \"hwabc-oracle\""), "{e}");
}

#[test]
fn overprovisioning_out_of_range_states_the_range() {
    for op in ["99", "0", "-0.5", "10.01"] {
        let e = err(&format!("{MINIMAL}\n[device.ftl]\noverprovisioning = {op}\n"));
        assert!(
            e.contains(&format!("device.ftl.overprovisioning: {} is out of range: expected a fraction of the logical capacity above 0 and at most 10", op.parse::<f64>().unwrap())),
            "{op}: {e}"
        );
    }
    assert!(load(&format!("{MINIMAL}\n[device.ftl]\noverprovisioning = 10\n")).is_ok());
}

/// The over-provisioning the message suggests, as a number.
fn suggested_op(e: &str) -> f64 {
    let at = e.find("device.ftl.overprovisioning = ").unwrap_or_else(|| panic!("no suggestion in: {e}"));
    let rest = &e[at + "device.ftl.overprovisioning = ".len()..];
    rest[..rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap()].parse().unwrap()
}

#[test]
fn over_provisioning_too_low_offers_only_the_fixes_that_apply() {
    let tenant = "[[tenant]]\nname = \"a\"\nfio = \"[a]\\nrw=randwrite\\nnumber_ios=10\\n\"\n";
    // With device.capacity the size comes from the capacity: blocks_per_plane cannot be set,
    // and the presets' GC threshold is already the minimum of 2.
    for (preset, capacity) in [("tlc-nvme", "8GiB"), ("cosmos", "4GiB")] {
        let text = format!("[device]\npreset = \"{preset}\"\ncapacity = \"{capacity}\"\n{tenant}");
        let e = err(&text);
        assert!(e.contains("over-provisioning too low"), "{e}");
        assert!(!e.contains("blocks_per_plane") && !e.contains("gc_threshold_blocks"), "{preset}: {e}");
        assert!(e.contains("a larger device.capacity"), "{preset}: {e}");
        // The suggested over-provisioning is enough, and no less would do.
        let op = suggested_op(&e);
        let with = |op: f64| text.replace("[[tenant]]", &format!("[device.ftl]\noverprovisioning = {op}\n[[tenant]]"));
        assert!(load(&with(op)).is_ok(), "{preset}: {op} suggested but too low");
        assert!(load(&with(((op * 100.0).round() - 1.0) / 100.0)).is_err(), "{preset}: {op} is not the least");
    }
    // Without a capacity, blocks_per_plane is a fix; a GC threshold above 2 can be lowered.
    let text = format!("{}[device.ftl]\noverprovisioning = 0.01\ngc_threshold_blocks = 6\n{}", "[device]\npreset = \"paper-c\"\n[device.geometry]\nblocks_per_plane = 64\n", tenant);
    let e = err(&text);
    assert!(e.contains("device.geometry.blocks_per_plane") && e.contains("lower device.ftl.gc_threshold_blocks (6; the least is 2)"), "{e}");
    assert!(!e.contains("device.capacity"), "{e}");
    let op = suggested_op(&e);
    assert!(load(&text.replace("overprovisioning = 0.01", &format!("overprovisioning = {op}"))).is_ok(), "{e}");
}

#[test]
fn control_characters_in_scenario_values_are_shown_escaped() {
    let e = err(&MINIMAL.replace("preset = \"paper-c\"", "preset = \"paper\\u0000c\""));
    assert!(e.contains("device.preset: unknown preset 'paper\\0c'"), "{e}");
    let e = err(&format!("{MINIMAL}\n[stop]\ntime = \"1\\u001bs\"\n"));
    assert!(e.contains("stop.time: invalid duration '1\\u{1b}s'"), "{e}");
}

#[test]
fn fill_on_a_clean_drive_is_an_error() {
    for pre in ["[precondition]\nfill = 0.5\n", "[precondition]\nstate = \"clean\"\nfill = 0.5\n"] {
        let e = err(&format!("{MINIMAL}\n{pre}"));
        assert!(e.contains("precondition.fill: 0.5 means nothing on a clean drive"), "{pre}: {e}");
    }
    let s = load(&format!("{MINIMAL}\n[precondition]\nstate = \"workload\"\nfill = 0.7\n")).unwrap();
    assert_eq!((s.precondition.state, s.precondition.fill), (PreconditionState::Workload, 0.7));
    let s = load(&format!("{MINIMAL}\n[precondition]\nstate = \"sequential-fill\"\nfill = 0.5\n")).unwrap();
    assert_eq!(s.precondition.fill, 0.5);
}

#[test]
fn errors_name_the_line_and_the_key() {
    let with = |device: &str| MINIMAL.replace("preset = \"paper-c\"", &format!("preset = \"paper-c\"\n{device}"));
    // A value of the wrong type: its key path and line (the parser's own message after them).
    assert_eq!(
        err(&with("[device.geometry]\nchannels = \"x\"")),
        "test.toml:5: device.geometry.channels: invalid type: string \"x\", expected u32"
    );
    // An unknown key.
    let e = err(&with("capacty = \"1GiB\""));
    assert!(e.starts_with("test.toml:4: device.capacty: unknown field `capacty`, expected one of"), "{e}");
    // A value the loader rejects: the line of its key.
    assert_eq!(
        err(&with("capacity = \"1 gigabyte\"")),
        "test.toml:4: device.capacity: invalid size '1 gigabyte': expected a size such as 4096, 4k, 64KiB, 8GiB (binary) or 256GB (decimal)"
    );
    // A key in an inline table of a tenant.
    let e = err(&MINIMAL.replace("name = \"a\"", "name = \"a\"\nregion = { offset = \"0\", size = \"9PiB\" }"));
    assert!(e.starts_with("test.toml:7: tenant[0] (a).region"), "{e}");
    // A key the file does not give has no line to point at.
    let e = err(&with("mode = \"open-channel\"").replace("[[tenant]]", "[host]\nscheduler = \"none\"\n[[tenant]]").replace("none", "hwabc").replace("mode = \"open-channel\"\n", ""));
    assert!(e.starts_with("test.toml:6: host.scheduler: 'hwabc' needs a drive that shows the host its garbage collection"), "{e}");
    // A syntax error keeps the parser's message, which has the line, column and text.
    let e = err(&with("capacity = "));
    assert!(e.starts_with("test.toml: TOML parse error at line 4, column 12\n"), "{e}");
}

#[test]
fn generated_text_names_keys_but_no_lines() {
    let text = MINIMAL.replace("preset = \"paper-c\"", "preset = \"paper-c\"\ncapacity = \"x\"");
    let e = Scenario::from_generated_toml(&text, "point 3", Path::new(".")).unwrap_err().to_string();
    assert!(e.starts_with("point 3: device.capacity: invalid size 'x'"), "{e}");
}

#[test]
fn a_scenario_changed_in_code_meets_the_rules_a_file_must() {
    use crate::sim::{SimError, Simulator};
    let good = load(MINIMAL).unwrap();
    assert_eq!(good.validate(), Ok(()));
    let rejected = |change: &dyn Fn(&mut Scenario), key: &str| {
        let mut s = good.clone();
        change(&mut s);
        let e = s.validate().expect_err(key);
        assert!(e.starts_with(key), "{key}: {e}");
        match Simulator::new(s) {
            Err(SimError::Config(m)) => assert_eq!(m, e),
            Err(other) => panic!("{key}: {other}"),
            Ok(_) => panic!("{key}: built"),
        }
    };
    rejected(&|s| s.tenants[0].weight = 0, "tenant[0] (a).weight");
    rejected(&|s| s.tenants[0].region.1 += 1 << 40, "tenant[0] (a).region");
    rejected(&|s| s.host.queue_depth = 0, "host.queue_depth");
    rejected(&|s| s.host.scheduler = crate::host::SchedulerKind::from_name("fair").unwrap(), "host.scheduler");
    rejected(&|s| s.virt.mode = crate::virt::VirtMode::Dataplane, "virt.mode");
    rejected(&|s| s.precondition.fill = 1.5, "precondition.fill");
    rejected(&|s| s.output.timeline_interval = Nanos::ZERO, "output.timeline_interval");
    rejected(&|s| s.stop.requests = Some(0), "stop.requests");
    rejected(
        &|s| {
            let DeviceKind::Ssd(c) = &mut s.device.kind else { unreachable!() };
            c.buffer_units = 1;
        },
        "device.buffer.size",
    );
    rejected(
        &|s| {
            let DeviceKind::Ssd(c) = &mut s.device.kind else { unreachable!() };
            c.flush = crate::device::FlushPolicy::Watermark { high: 0.5, low: 0.6 };
        },
        "device.buffer: watermarks",
    );
    rejected(
        &|s| {
            s.host.cpu = Some(crate::virt::CpuConfig { smt_slowdown: 9.0, ..Default::default() });
        },
        "host.cpu.smt_slowdown",
    );
}

#[test]
fn priority_classes_need_weighted_arbitration_and_a_queue_each() {
    use crate::device::{Arbitration, Priority};
    let two = |interface: &str, pa: &str, extra: &str| {
        format!(
            "[device]\npreset = \"tlc-nvme\"\n[device.interface]\nqueues = 4\n{interface}{extra}\n[[tenant]]\nname = \"a\"\n{pa}fio = \"[j]\\nrw=read\"\n[[tenant]]\nname = \"b\"\nfio = \"[j]\\nrw=read\"\n"
        )
    };
    let s = load(&two("arbitration = \"wrr\"\n", "priority = \"urgent\"\n", "")).unwrap();
    assert_eq!(
        s.device.nvme.arbitration,
        Arbitration::Wrr { weights: [4, 2, 1], classes: vec![Priority::Urgent, Priority::Medium, Priority::Medium, Priority::Medium] }
    );
    assert!(err(&two("", "priority = \"high\"\n", "")).contains("tenant[0] (a).priority: a priority class needs device.interface.arbitration = \"wrr\""));
    assert!(err(&two("wrr_weights = [1, 1, 1]\n", "", "")).contains("device.interface.wrr_weights: applies only with arbitration = \"wrr\""));
    assert!(err(&two("arbitration = \"wrr\"\nwrr_weights = [1, 1]\n", "", "")).contains("wrr_weights: 2 weights: expected 3"));
    assert!(err(&two("arbitration = \"wrr\"\nwrr_weights = [1, 1, 300]\n", "", "")).contains("300 is out of range"));
    assert!(err(&two("arbitration = \"wrr\"\nqueue_classes = [\"high\"]\n", "", "")).contains("1 classes for 4 queues"));
    assert!(err(&two("arbitration = \"wrr\"\nqueue_classes = [\"hgh\"]\n", "", "")).contains("unknown class 'hgh': expected one of urgent, high, medium, low"));
    assert!(err(&two("arbitration = \"wrr\"\n", "priority = \"high\"\n", "[host.cpu]\ncores = 2\n")).contains("with the CPU model"));
    let e = err(&two("arbitration = \"wrr\"\n", "priority = \"high\"\n", "").replace("queues = 4", "queues = 1"));
    assert!(e.contains("2 tenants share 1 queues"), "{e}");
    // Round robin hashes as before the setting existed.
    assert_eq!(load(&two("arbitration = \"round-robin\"\n", "", "")).unwrap().config_hash(), load(&two("", "", "")).unwrap().config_hash());
}

#[test]
fn die_interleaving_is_a_flash_drive_setting_and_a_boolean() {
    let with = |preset: &str, v: &str| {
        format!("[device]\npreset = \"{preset}\"\n[device.timing]\ninterleave_dies = {v}\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=read\"\n")
    };
    let DeviceKind::Ssd(c) = load(&with("tlc-nvme", "false")).unwrap().device.kind else { panic!("a flash drive") };
    assert!(!c.interleave_dies);
    assert_eq!(err(&with("null", "false")), "test.toml:3: device.timing: preset 'null' has no flash; remove this section");
    assert_eq!(err(&with("tlc-nvme", "\"no\"")), "test.toml:4: device.timing.interleave_dies: invalid type: string \"no\", expected a boolean");
}

#[test]
fn mqsim_victim_policies_take_a_sample_size_for_rga_only() {
    let with = |ftl: &str| {
        format!("seed = 9\n[device]\npreset = \"tlc-nvme\"\n[device.ftl]\n{ftl}\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=read\"\n")
    };
    let ssd = |text: &str| {
        let DeviceKind::Ssd(c) = load(text).unwrap().device.kind else { panic!("a flash drive") };
        c
    };
    let c = ssd(&with("gc_victim = \"rga\"\ngc_rga_candidates = 5"));
    assert_eq!((c.victim_policy, c.gc_rga_candidates), (crate::ftl::VictimPolicy::Rga, Some(5)));
    for name in ["random", "fifo"] {
        assert_eq!(ssd(&with(&format!("gc_victim = \"{name}\""))).victim_policy.name(), name);
    }
    assert_eq!(
        err(&with("gc_victim = \"rga\"\ngc_rga_candidates = 0")),
        format!("test.toml:6: device.ftl.gc_rga_candidates: 0 blocks: expected 1 to the blocks of a plane ({})", c.geometry.blocks_per_plane)
    );
    assert_eq!(
        err(&with("gc_rga_candidates = 4")),
        "test.toml:5: device.ftl.gc_rga_candidates: only for gc_victim = \"rga\" (randomized greedy), not \"greedy\""
    );
    assert!(err(&with("gc_victim = \"rga-p\"")).contains("unknown policy 'rga-p': expected one of greedy, cost-benefit, rga, random, fifo"));
    // The default hashes as before the setting existed.
    assert_eq!(load(&with("gc_victim = \"greedy\"")).unwrap().config_hash(), load(&with("")).unwrap().config_hash());
}

#[test]
fn gc_copy_back_can_be_turned_off_for_flash_drives_only() {
    let with = |preset: &str, ftl: &str| {
        format!("[device]\npreset = \"{preset}\"\n[device.ftl]\n{ftl}\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=read\"\n")
    };
    let DeviceKind::Ssd(c) = load(&with("tlc-nvme", "gc_copyback = false")).unwrap().device.kind else { panic!("a flash drive") };
    assert!(!c.gc_copyback);
    assert_eq!(err(&with("null", "gc_copyback = false")), "test.toml:3: device.ftl: preset 'null' has no flash; remove this section");
    assert_eq!(err(&with("tlc-nvme", "gc_copyback = 0")), "test.toml:4: device.ftl.gc_copyback: invalid type: integer `0`, expected a boolean");
    // The default hashes as before the setting existed.
    assert_eq!(load(&with("840pro", "gc_copyback = true")).unwrap().config_hash(), load(&with("840pro", "")).unwrap().config_hash());
}

#[test]
fn the_controller_ecc_engines_have_rates_on_flash_drives_only() {
    let with = |preset: &str, timing: &str| {
        format!("[device]\npreset = \"{preset}\"\n[device.timing]\n{timing}\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=read\"\n")
    };
    let DeviceKind::Ssd(c) = load(&with("840pro", "encode_rate = \"3.5GB/s\"\ndecode_rate = \"7GB/s\"")).unwrap().device.kind else {
        panic!("a flash drive")
    };
    assert_eq!(c.ecc, EccRates { encode_bytes_per_sec: Some(3_500_000_000), decode_bytes_per_sec: Some(7_000_000_000) });
    let DeviceKind::Ssd(c) = load(&with("840pro", "decode_rate = \"1GB/s\"")).unwrap().device.kind else { panic!() };
    assert_eq!(c.ecc, EccRates { encode_bytes_per_sec: None, decode_bytes_per_sec: Some(1_000_000_000) });
    assert_eq!(err(&with("null", "encode_rate = \"1GB/s\"")), "test.toml:3: device.timing: preset 'null' has no flash; remove this section");
    assert!(err(&with("840pro", "encode_rate = \"0MB/s\"")).starts_with("test.toml:4: device.timing.encode_rate: "), "{}", err(&with("840pro", "encode_rate = \"0MB/s\"")));
    assert!(err(&with("840pro", "decode_rate = 5")).starts_with("test.toml:4: device.timing.decode_rate: "));
    // A rate is part of the configuration's hash; unlimited engines are absent from it, so
    // drives without them hash as before the setting existed.
    assert_ne!(load(&with("840pro", "decode_rate = \"1GB/s\"")).unwrap().config_hash(), load(&with("840pro", "")).unwrap().config_hash());
    let DeviceKind::Ssd(c) = load(&with("840pro", "")).unwrap().device.kind else { panic!() };
    assert!(serde_json::to_value(&c).unwrap().get("ecc").is_none());
}

#[test]
fn the_buffers_dram_time_is_set_on_flash_drives_only() {
    let with = |preset: &str, buffer: &str| {
        format!("[device]\npreset = \"{preset}\"\n[device.buffer]\n{buffer}\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=write\"\n")
    };
    let DeviceKind::Ssd(c) = load(&with("840pro", "dram_access = \"23.42us\"\ndram_rate = \"466MB/s\"")).unwrap().device.kind else {
        panic!("a flash drive")
    };
    assert_eq!(c.dram, DramTiming { access: Nanos(23_420), bytes_per_sec: Some(466_000_000) });
    assert_eq!(err(&with("null", "dram_rate = \"1GB/s\"")), "test.toml:3: device.buffer: preset 'null' has no flash; remove this section");
    assert!(err(&with("840pro", "dram_access = 5")).starts_with("test.toml:4: device.buffer.dram_access: "));
    assert!(err(&with("840pro", "dram_rate = \"fast\"")).starts_with("test.toml:4: device.buffer.dram_rate: "));
    let DeviceKind::Ssd(c) = load(&with("840pro", "")).unwrap().device.kind else { panic!() };
    assert!(serde_json::to_value(&c).unwrap().get("dram").is_none(), "no DRAM time hashes as before the setting existed");
}

#[test]
fn the_write_buffer_holds_at_least_a_flash_page_per_plane() {
    // 840pro: 64 planes of 8 KiB pages; 512 KiB is a page per plane.
    let with = |size: &str| {
        format!("[device]\npreset = \"840pro\"\n[device.buffer]\nsize = \"{size}\"\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=write\"\n")
    };
    let DeviceKind::Ssd(c) = load(&with("512KiB")).unwrap().device.kind else { panic!("a flash drive") };
    assert_eq!(c.buffer_units, 128);
    assert_eq!(
        err(&with("508KiB")),
        "test.toml:4: device.buffer.size: 520192 bytes is too small: the write buffer must hold at least a flash page per plane (524288 bytes) so the flusher can always fill a page"
    );
}

#[test]
fn data_out_first_is_a_flash_timing_option() {
    let with = |preset: &str, v: &str| {
        format!("[device]\npreset = \"{preset}\"\n[device.timing]\ndata_out_first = {v}\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=read\"\n")
    };
    let DeviceKind::Ssd(c) = load(&with("840pro", "true")).unwrap().device.kind else { panic!("a flash drive") };
    assert!(c.data_out_first);
    assert_eq!(err(&with("null", "true")), "test.toml:3: device.timing: preset 'null' has no flash; remove this section");
    assert_eq!(err(&with("840pro", "1")), "test.toml:4: device.timing.data_out_first: invalid type: integer `1`, expected a boolean");
    // false, the default, hashes as before the setting existed; true does not.
    let plain = "[device]\npreset = \"840pro\"\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=read\"\n";
    assert_eq!(load(&with("840pro", "false")).unwrap().config_hash(), load(plain).unwrap().config_hash());
    assert_ne!(load(&with("840pro", "true")).unwrap().config_hash(), load(plain).unwrap().config_hash());
}

#[test]
fn the_multi_plane_rule_is_any_page_or_the_same_page_index() {
    let with = |preset: &str, v: &str| {
        format!("[device]\npreset = \"{preset}\"\n[device.timing]\nmultiplane = {v}\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=read\"\n")
    };
    let DeviceKind::Ssd(c) = load(&with("tlc-nvme", "\"same-page\"")).unwrap().device.kind else { panic!("a flash drive") };
    assert_eq!(c.multiplane, crate::flash::Multiplane::SamePage);
    assert_eq!(err(&with("null", "\"any\"")), "test.toml:3: device.timing: preset 'null' has no flash; remove this section");
    assert!(err(&with("tlc-nvme", "\"same-block\"")).starts_with(
        "test.toml:4: device.timing.multiplane: unknown multi-plane rule 'same-block': expected one of any, same-page"
    ));
    // The default hashes as before the setting existed.
    assert_eq!(load(&with("tlc-nvme", "\"any\"")).unwrap().config_hash(), load(&with("tlc-nvme", "\"any\"").replace("multiplane = \"any\"\n", "")).unwrap().config_hash());
}

#[test]
fn the_kernels_tags_default_to_its_block_devices() {
    let tags = |extra: &str, kernel: &str| {
        let text = MINIMAL.replace("preset = \"paper-c\"", &format!("preset = \"paper-c\"\n{extra}"));
        load(&format!("{text}\n[kernel]\n{kernel}")).unwrap().kernel.unwrap().nr_requests
    };
    // The host's tag set; a VM's virtio disk's; none under pblk (bio-based); or as set.
    assert_eq!(tags("", ""), Some(1024));
    assert_eq!(tags("[host]\nqueue_depth = 64", ""), Some(64));
    assert_eq!(tags("[virt]\nmode = \"dataplane\"\nqueue_size = 96", ""), Some(96));
    assert_eq!(tags("mode = \"open-channel\"", ""), None);
    assert_eq!(tags("mode = \"open-channel\"", "nr_requests = 8"), Some(8));
    assert!(err(&format!("{MINIMAL}\n[kernel]\nnr_requests = 0")).contains("kernel.nr_requests: 0: expected at least 1"));
}

#[test]
fn the_metadata_calls_cost_what_is_set_and_never_nothing() {
    let calls = |keys: &str| load(&format!("{MINIMAL}\n[kernel]\n[kernel.calls]\n{keys}")).unwrap().kernel.unwrap().calls;
    let c = calls("create = \"50us\"\nunlink = \"1ms\"");
    assert_eq!((c.create, c.unlink, c.stat), (Nanos(50_000), Nanos(1_000_000), crate::kernel::CallCosts::default().stat));
    assert!(err(&format!("{MINIMAL}\n[kernel.calls]\nunlink = \"0s\"")).contains("kernel.calls.unlink: must be longer than zero"));
    let e = err(&format!("{MINIMAL}\n[kernel.calls]\nfsync = \"1us\""));
    assert!(e.contains("fsync") && e.contains("unknown field"), "{e}");
}

#[test]
fn filename_and_directory_are_noted_only_where_they_are_not_modelled() {
    let scenario = |fs: &str, direct: u8| {
        let text = format!(
            "[device]\npreset = \"tlc-nvme\"\ncapacity = \"16GiB\"\n[kernel]\n{fs}\n[[tenant]]\nname = \"a\"\nfio = \"\"\"\n[a]\nrw=write\nbs=4k\nsize=1m\ndirectory=/mnt/d\nfilename=f\ndirect={direct}\n\"\"\"\n"
        );
        load(&text).unwrap().notes
    };
    // On ext4 a buffered job's file is made there, named and placed by them.
    let on_ext4 = scenario("filesystem = \"ext4\"", 0);
    assert!(!on_ext4.iter().any(|n| n == "filename" || n == "directory"), "{on_ext4:?}");
    // Without a filesystem, or for a direct job (the raw region under it), they mean nothing.
    for notes in [scenario("", 0), scenario("filesystem = \"ext4\"", 1)] {
        assert!(notes.iter().any(|n| n == "filename") && notes.iter().any(|n| n == "directory"), "{notes:?}");
    }
}

/// A scenario on `preset` with `device` keys after `[device]` and `extra` sections after it.
fn zns(preset: &str, device: &str, extra: &str) -> String {
    MINIMAL.replace("preset = \"paper-c\"", &format!("preset = \"{preset}\"\n{device}\n{extra}"))
}

fn zns_layout(s: &Scenario) -> crate::device::ZnsLayout {
    match &s.device.kind {
        DeviceKind::Ssd(c) => c.zns.expect("a zoned drive"),
        _ => panic!("a flash drive"),
    }
}

#[test]
fn zoned_preset_and_section_resolve() {
    let z = zns_layout(&load(&zns("tlc-nvme-zns", "", "")).unwrap());
    assert_eq!((z.zones, z.zone_bytes, z.capacity_bytes, z.max_open, z.max_active), (64, 2 << 30, 1 << 30, Some(14), Some(14)));
    // The ZN540's 1.6 ms per reset, unless the section says otherwise; none on a drive
    // without a zoned preset.
    assert_eq!(z.reset_overhead, Nanos::from_us(1600));
    let z = zns_layout(&load(&zns("tlc-nvme-zns", "", "[device.zns]\nreset_overhead = \"250us\"")).unwrap());
    assert_eq!(z.reset_overhead, Nanos::from_us(250));
    let z = zns_layout(&load(&zns("tlc-nvme", "", "[device.zns]\nzone_size = \"256MiB\"")).unwrap());
    assert_eq!(z.reset_overhead, Nanos(0));
    let e = err(&zns("tlc-nvme-zns", "", "[device.zns]\nreset_overhead = 3"));
    assert!(e.contains("reset_overhead"), "{e}");
    // Finish pads the zone on the preset (as the ZN540), not on a drive of one's own unless
    // asked.
    assert!(zns_layout(&load(&zns("tlc-nvme-zns", "", "")).unwrap()).finish_pads);
    assert!(!zns_layout(&load(&zns("tlc-nvme-zns", "", "[device.zns]\nfinish_pads = false")).unwrap()).finish_pads);
    assert!(!zns_layout(&load(&zns("tlc-nvme", "", "[device.zns]\nzone_size = \"256MiB\"")).unwrap()).finish_pads);
    assert!(zns_layout(&load(&zns("tlc-nvme", "", "[device.zns]\nzone_size = \"256MiB\"\nfinish_pads = true")).unwrap()).finish_pads);
    let e = err(&zns("tlc-nvme-zns", "", "[device.zns]\nfinish_pads = \"yes\""));
    assert!(e.contains("finish_pads"), "{e}");
    // The preset's zones follow its flash.
    let z = zns_layout(&load(&zns("tlc-nvme-zns", "", "[device.geometry]\nblocks_per_plane = 128")).unwrap());
    assert_eq!(z.zones, 32);
    // A section on a conventional preset: zones as many as the flash holds (512 blocks per
    // plane, one per zone), capacity = size, no limits.
    let z = zns_layout(&load(&zns("tlc-nvme", "", "[device.zns]\nzone_size = \"256MiB\"")).unwrap());
    assert_eq!((z.zones, z.capacity_bytes, z.max_open, z.max_active), (512, 256 << 20, None, None));
    let s = load(&zns("tlc-nvme", "", "[device.zns]\nzone_size = \"512MiB\"\nzone_capacity = \"256MiB\"\nzones = 100\nmax_open = 8\nmax_active = 12\nzone_append_limit = \"256KiB\"")).unwrap();
    let z = zns_layout(&s);
    assert_eq!((z.zones, z.max_open, z.max_active, z.append_limit_bytes), (100, Some(8), Some(12), Some(256 << 10)));
    assert_eq!(s.device.capacity_bytes(), 100 * (512 << 20), "the namespace is zones x zone size");
    // Zones over 8 of the 256 planes: a layout unit of 8 MiB; 32 groups of 512 blocks would
    // hold 8,192 zones of 16 MiB, more open-block tables than the model keeps (2^20 zone-planes).
    let e = err(&zns("tlc-nvme", "", "[device.zns]\nzone_size = \"16MiB\"\nzone_planes = 8"));
    assert!(e.contains("device.zns.zones: 8192 zones over 256 planes"), "{e}");
    let z = zns_layout(&load(&zns("tlc-nvme", "", "[device.zns]\nzone_size = \"16MiB\"\nzone_planes = 8\nzones = 4096")).unwrap());
    assert_eq!((z.zones, z.capacity_bytes, z.zone_planes), (4096, 16 << 20, Some(8)));
}

#[test]
fn zoned_drive_errors_name_the_key() {
    let cases: [(&str, &str, &str, &[&str]); 17] = [
        ("tlc-nvme", "", "[host.zoned_ftl]", &["host.zoned_ftl", "use a zoned drive"]),
        ("tlc-nvme-zns", "", "[host.zoned_ftl]\nspare_zones = 3", &["host.zoned_ftl", "3 spare zones of 64", "at least gc_threshold_zones + 3 = 5"]),
        ("tlc-nvme-zns", "", "[kernel]\nfilesystem = \"ext4\"", &["kernel:", "zoned filesystem"]),
        ("tlc-nvme", "", "[device.zns]\nzone_size = \"16MiB\"\nzone_planes = 3", &["device.zns.zone_planes: 3", "divisor of the drive's 256 planes"]),
        ("tlc-nvme", "", "[device.zns]\nzone_size = \"12MiB\"\nzone_planes = 8", &["device.zns.zone_size", "8 planes x 1048576 bytes"]),
        ("tlc-nvme", "", "[device.zns]\nzone_capacity = \"256MiB\"", &["device.zns.zone_size: required", "268435456"]),
        ("tlc-nvme", "", "[device.zns]\nzone_size = \"100MiB\"", &["device.zns.zone_size", "not a multiple of the flash layout unit", "256 planes"]),
        ("tlc-nvme", "", "[device.zns]\nzone_size = \"512MiB\"\nzone_capacity = \"300MiB\"", &["device.zns.zone_capacity", "not a multiple"]),
        ("tlc-nvme-zns", "", "[device.zns]\nzone_capacity = \"4GiB\"", &["device.zns.zone_capacity", "above zone_size", "expected zone_capacity <= zone_size"]),
        ("tlc-nvme-zns", "", "[device.zns]\nmax_open = 20", &["device.zns.max_open", "max_active = 14", "expected max_open <= max_active"]),
        ("tlc-nvme-zns", "", "[device.zns]\nzones = 65", &["device.zns.zones", "1 to 64"]),
        ("tlc-nvme-zns", "", "[device.zns]\nzone_append_limit = \"1000B\"", &["device.zns.zone_append_limit", "multiple of 512"]),
        ("tlc-nvme-zns", "capacity = \"32GiB\"", "", &["device.capacity", "device.zns.zones"]),
        ("tlc-nvme-zns", "", "[device.ftl]\ngc_victim = \"greedy\"", &["device.ftl.gc_victim", "no garbage collection"]),
        ("tlc-nvme-zns", "", "[device.fdp]\nhandles = 2", &["device.zns", "no [device.fdp]"]),
        ("tlc-nvme-zns", "", "[precondition]\nstate = \"aged\"", &["precondition.state", "every zone empty"]),
        ("null", "", "[device.zns]\nzone_size = \"1GiB\"", &["device.zns", "has no flash"]),
    ];
    for (preset, device, extra, want) in cases {
        let e = err(&zns(preset, device, extra));
        for w in want {
            assert!(e.contains(w), "{preset} / {device} / {extra}: {e}\n  missing: {w}");
        }
    }
}

#[test]
fn an_nbd_export_on_a_zoned_drive_is_refused() {
    let e = err("[device]\npreset = \"tlc-nvme-zns\"\n[[tenant]]\nname = \"nbd0\"\n");
    assert!(e.contains("tenant 'nbd0': an NBD export (flashmux serve) on a zoned drive"), "{e}");
}

/// A host FTL on the zoned drive: the tenants' space is what it exports, its spare zones 7% of
/// the zones by default (at least the GC threshold + 3); refused elsewhere (above).
#[test]
fn a_host_ftl_exports_its_logical_space() {
    let s = load(&zns("tlc-nvme-zns", "", "[host.zoned_ftl]")).unwrap();
    let p = s.host.zoned_ftl.unwrap();
    assert_eq!((p.spare_zones, p.gc_threshold_zones), (5, 2));
    assert_eq!(s.tenants[0].region, (0, 59 << 30), "59 zones of 1 GiB capacity");
    // Behind a host FTL the drive takes a kernel (and NBD exports): the host FTL never breaks
    // the zones' rules.
    assert!(load(&zns("tlc-nvme-zns", "", "[host.zoned_ftl]\n[kernel]\nfilesystem = \"ext4\"")).is_ok());
}

/// A log per tenant writes a host and a GC zone per tenant at once: 8 tenants need 16 open
/// zones, above `tlc-nvme-zns`'s 14; 7 fit, with the spare zones for their open zones.
#[test]
fn host_ftl_logs_per_tenant_fit_the_drives_open_zones() {
    let tenants = |n: usize| -> String {
        (0..n).map(|i| format!("[[tenant]]\nname = \"t{i}\"\nfio = \"[a]\\nrw=randwrite\\nbs=4k\\n\"\n")).collect()
    };
    let text = |n| format!("[device]\npreset = \"tlc-nvme-zns\"\n[host.zoned_ftl]\nper_tenant = true\n{}", tenants(n));
    let e = err(&text(8));
    assert!(e.contains("host.zoned_ftl: host zoned FTL: 8 log(s) write 16 zones at once"), "{e}");
    assert!(e.contains("limit of 14 open zones"), "{e}");
    let s = load(&text(7)).unwrap();
    let p = s.host.zoned_ftl.unwrap();
    assert_eq!((p.tenant_logs, p.spare_zones), (7, 2 + 3 + 13));
}
