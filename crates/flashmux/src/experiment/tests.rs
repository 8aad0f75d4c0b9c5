use super::*;
use crate::metrics::StopReason;
use std::cell::Cell;

/// A small, fast SSD with one writer: a point runs in milliseconds.
const BASE: &str = r#"
name = "tiny"
seed = 1
[device]
preset = "paper-c"
[device.geometry]
channels = 2
chips_per_channel = 1
blocks_per_plane = 64
[device.ftl]
overprovisioning = 0.15
[device.buffer]
size = "256KiB"
[stop]
time = "2s"
[[tenant]]
name = "w"
fio = """
[w]
rw=randwrite
bs=4k
iodepth=4
number_ios=300
"""
[[tenant]]
name = "r"
fio = """
[r]
rw=randread
bs=4k
number_ios=100
"""
"#;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flashmux-experiment-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An experiment with the base scenario inline (as the `[scenario]` table).
fn inline(sweeps: &str) -> String {
    let base: toml::Value = toml::from_str(BASE).unwrap();
    let mut doc = toml::map::Map::new();
    doc.insert("name".into(), "exp".into());
    doc.insert("scenario".into(), base);
    toml::to_string(&toml::Value::Table(doc)).unwrap() + sweeps
}

fn exp(sweeps: &str) -> Result<Experiment, ExperimentError> {
    Experiment::from_toml(&inline(sweeps), "exp.toml", Path::new("."))
}

fn err(sweeps: &str) -> String {
    exp(sweeps).and_then(|e| e.points().map(|_| ())).map_or_else(|e| e.to_string(), |_| String::new())
}

const TWO_AXES: &str = r#"
[[sweep]]
key = "device.ftl.overprovisioning"
values = [0.15, 0.25]
label = "op"
[[sweep]]
key = "seed"
values = [1, 2, 3]
"#;

#[test]
fn parses_axes_with_default_labels() {
    let e = exp(TWO_AXES).unwrap();
    assert_eq!(e.name, "exp");
    assert_eq!(e.base_label, "exp.toml[scenario]");
    assert_eq!(e.axes.len(), 2);
    assert_eq!(
        e.axes[0],
        Axis {
            key: "device.ftl.overprovisioning".into(),
            label: "op".into(),
            values: vec![0.15.into(), 0.25.into()],
            names: None
        }
    );
    assert_eq!(e.axes[1].label, "seed");
    assert_eq!(e.len(), 6);
    let e = Experiment::from_toml("scenario = \"b.toml\"\n", "dir/my-sweep.toml", Path::new("/nonexistent"));
    // The name defaults to the file's stem, but the scenario file must exist.
    assert!(e.unwrap_err().to_string().contains("cannot read /nonexistent/b.toml"));
}

#[test]
fn from_value_is_from_toml_without_the_text() {
    let text = inline(TWO_AXES);
    let doc: toml::Value = toml::from_str(&text).unwrap();
    let a = Experiment::from_value(doc, "exp.toml", Path::new(".")).unwrap();
    assert_eq!(a, exp(TWO_AXES).unwrap());
    let doc: toml::Value = toml::from_str("scenario = 1\nsweep = 2\n").unwrap();
    let e = Experiment::from_value(doc, "built-in", Path::new(".")).unwrap_err();
    assert!(matches!(&e, ExperimentError::Toml { line: None, .. }), "{e:?}");
    assert!(e.to_string().starts_with("built-in: "), "{e}");
}

#[test]
fn points_are_the_cartesian_product_first_axis_outermost() {
    let e = exp(TWO_AXES).unwrap();
    let points = e.points().unwrap();
    let got: Vec<(f64, i64)> = points
        .iter()
        .map(|p| (p.params[0].1.as_float().unwrap_or(-1.0), p.params[1].1.as_integer().unwrap_or(-1)))
        .collect();
    assert_eq!(got, vec![(0.15, 1), (0.15, 2), (0.15, 3), (0.25, 1), (0.25, 2), (0.25, 3)]);
    for (i, p) in points.iter().enumerate() {
        assert_eq!(p.index, i);
        assert_eq!(p.params[0].0, "op");
        assert_eq!(p.scenario.seed, got[i].1 as u64);
        let crate::config::DeviceKind::Ssd(c) = &p.scenario.device.kind else { panic!("an SSD") };
        assert_eq!(c.overprovisioning, got[i].0);
    }
    assert_eq!(points[4].describe(), "op = 0.25, seed = 2");
}

#[test]
fn no_sweep_is_one_point_with_the_base_scenario() {
    let e = exp("").unwrap();
    let points = e.points().unwrap();
    assert_eq!(points.len(), 1);
    assert!(points[0].params.is_empty());
    let direct = Scenario::from_toml(BASE, "exp.toml[scenario]", Path::new(".")).unwrap();
    assert_eq!(points[0].scenario, direct);
    assert_eq!(points[0].describe(), "the base scenario");
}

#[test]
fn sweeps_array_elements_and_created_keys() {
    let e = exp(r#"
[[sweep]]
key = "tenant.1.fio"
values = ["[r]\nrw=randread\nbs=8k\nnumber_ios=10\n", "[r]\nrw=read\nbs=64k\nnumber_ios=10\n"]
names = ["random", "sequential"]
label = "reader"
[[sweep]]
key = "output.timeline_interval"
values = ["5ms"]
"#)
    .unwrap();
    let points = e.points().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[1].scenario.tenants[1].jobs()[0].max_block_size(), 65536);
    assert_eq!(points[0].scenario.output.timeline_interval, crate::units::Nanos(5_000_000));
    // The names stand for the values in the results.
    assert_eq!(points[1].describe(), "reader = \"sequential\", timeline_interval = \"5ms\"");
    // The first tenant is untouched.
    assert_eq!(points[0].scenario.tenants[0], points[1].scenario.tenants[0]);
}

#[test]
fn loads_scenario_files_relative_to_the_experiment() {
    let dir = tmpdir("files");
    std::fs::create_dir_all(dir.join("base")).unwrap();
    std::fs::write(dir.join("base/w.fio"), "[w]\nrw=randwrite\nbs=4k\nnumber_ios=50\n").unwrap();
    let base = BASE.split("[[tenant]]").next().unwrap_or_default().to_string()
        + "[[tenant]]\nname = \"w\"\njob_file = \"w.fio\"\n";
    std::fs::write(dir.join("base/s.toml"), base).unwrap();
    std::fs::write(
        dir.join("sweep.toml"),
        "scenario = \"base/s.toml\"\n[[sweep]]\nkey = \"device.buffer.size\"\nvalues = [\"256KiB\", \"512KiB\"]\n",
    )
    .unwrap();
    let e = Experiment::load(&dir.join("sweep.toml")).unwrap();
    assert_eq!(e.name, "sweep");
    assert_eq!(e.base_dir, dir.join("base"));
    assert_eq!(e.base_label, dir.join("base/s.toml").display().to_string());
    let points = e.points().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[1].params, vec![("size".to_string(), toml::Value::from("512KiB"))]);
    // Bad TOML in the scenario file names that file and the line.
    std::fs::write(dir.join("base/s.toml"), "name = \"x\"\n[device\n").unwrap();
    let e = Experiment::load(&dir.join("sweep.toml")).unwrap_err();
    assert!(matches!(&e, ExperimentError::Toml { file, line: Some(2), .. } if file.ends_with("s.toml")), "{e:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tiny_sweep_runs_and_writes_csv() {
    let e = exp(TWO_AXES.replace("values = [1, 2, 3]", "values = [1, 2]").as_str()).unwrap();
    let points = e.points().unwrap();
    let mut seen = Vec::new();
    let results = run_points(&points, &|| false, &mut |i, n, r| seen.push((i, n, r.tenants.len()))).unwrap();
    assert_eq!(seen, vec![(0, 4, 2), (1, 4, 2), (2, 4, 2), (3, 4, 2)]);
    assert_eq!(results.len(), 4);
    for r in &results {
        assert_eq!(r.tenants[0].io.write.ios, 300, "{:?}", r.stop_reason);
        assert_eq!(r.tenants[1].io.read.ios, 100);
    }

    let dir = tmpdir("csv");
    let path = dir.join("sweep.csv");
    write_csv(&points, &results, &path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "op,seed,tenant,read_iops,write_iops,read_mbps,write_mbps,lat_mean_us,lat_p99_us,gc_units_moved,map_lookups,map_hits,map_misses,map_miss_ratio,waf,exits_per_sec,ctx_switches_per_sec,lock_wait_us,poll_cpu,stop_reason"
    );
    assert_eq!(lines.len(), 1 + 4 * 2);
    let params: Vec<String> = lines[1..].iter().map(|l| l.split(',').take(3).collect::<Vec<_>>().join(",")).collect();
    assert_eq!(
        params,
        ["0.15,1,w", "0.15,1,r", "0.15,2,w", "0.15,2,r", "0.25,1,w", "0.25,1,r", "0.25,2,w", "0.25,2,r"]
    );
    for l in &lines[1..] {
        assert_eq!(l.split(',').count(), 20, "{l}");
        assert!(l.ends_with(",all-jobs-done"), "{l}");
    }

    // Same points, same bytes.
    let again = run_points(&points, &|| false, &mut |_, _, _| {}).unwrap();
    let path2 = dir.join("again.csv");
    write_csv(&points, &again, &path2).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(&path2).unwrap());

    let table = format_table(&points, &results);
    let tl: Vec<&str> = table.lines().collect();
    assert_eq!(tl.len(), 9);
    assert!(tl[0].starts_with("op    seed  tenant  "), "{table}");
    assert!(tl[1].starts_with("0.15  1     w       "), "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn interruption_stops_after_the_current_point() {
    let e = exp(TWO_AXES).unwrap();
    let points = e.points().unwrap();
    let results = run_points(&points, &|| true, &mut |_, _, _| {}).unwrap();
    assert!(results.is_empty(), "interrupted before the first point");
    // Interrupted between points: the finished point is kept, no further one starts.
    let stop = Cell::new(false);
    let mut calls = 0;
    let results = run_points(&points, &|| stop.get(), &mut |i, _, _| {
        calls += 1;
        if i == 0 {
            stop.set(true);
        }
    })
    .unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(calls, 1);
    assert_ne!(results[0].stop_reason, StopReason::Interrupted);
    // Interrupted while a point runs (the flag is first polled before the point starts, then
    // during it): that point is cut short, reported, and is the last one.
    let polls = Cell::new(0);
    let mut reported = Vec::new();
    let results = run_points(
        &points,
        &|| {
            polls.set(polls.get() + 1);
            polls.get() > 1
        },
        &mut |i, n, r| reported.push((i, n, r.stop_reason)),
    )
    .unwrap();
    assert_eq!(reported, vec![(0, 6, StopReason::Interrupted)]);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].stop_reason, StopReason::Interrupted);
}

#[test]
fn metrics_of_a_known_run() {
    let r = crate::report::test_fixture::run();
    let m = tenant_metrics(&r, &r.tenants[0]);
    assert_eq!(m.iter().map(|(k, _)| *k).collect::<Vec<_>>(), METRIC_COLUMNS);
    let get =
        |m: &[(&str, String)], k: &str| m.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()).unwrap_or_default();
    // vm0: 3000 reads of 4096 bytes over 4 s.
    assert_eq!(get(&m, "read_iops"), "750.000");
    assert_eq!(get(&m, "write_iops"), "0.000");
    assert_eq!(get(&m, "read_mbps"), "3.072000");
    assert_eq!(get(&m, "gc_units_moved"), "60");
    assert_eq!(
        (get(&m, "map_lookups"), get(&m, "map_hits"), get(&m, "map_misses")),
        ("100".into(), "90".into(), "10".into())
    );
    assert_eq!(get(&m, "map_miss_ratio"), "0.100000");
    assert_eq!(get(&m, "waf"), "2.000000");
    assert_eq!(get(&m, "stop_reason"), "all-jobs-done");
    assert!(get(&m, "lat_mean_us").parse::<f64>().is_ok_and(|v| v > 0.0));
    // Nothing happened: undefined values are empty, rates zero.
    let r = crate::report::test_fixture::empty_run();
    let m = tenant_metrics(&r, &r.tenants[1]);
    for k in ["lat_mean_us", "lat_p99_us", "map_miss_ratio", "waf"] {
        assert_eq!(get(&m, k), "", "{k}");
    }
    assert_eq!(get(&m, "write_iops"), "0.000");
}

#[test]
fn table_and_csv_with_partial_results() {
    let e = exp(TWO_AXES).unwrap();
    let points = e.points().unwrap();
    let mut r = crate::report::test_fixture::empty_run();
    r.tenants[0].name = "a,b".into();
    let results = vec![r];
    let dir = tmpdir("partial");
    write_csv(&points, &results, &dir.join("p.csv")).unwrap();
    let text = std::fs::read_to_string(dir.join("p.csv")).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(text.lines().nth(1).is_some_and(|l| l.starts_with("0.15,1,\"a,b\",0.000,")), "{text}");
    let table = format_table(&points, &results);
    assert!(table.lines().nth(1).is_some_and(|l| l.contains("  -  ")), "{table}");
    // Writing into a missing directory is an I/O error, not a panic.
    assert!(write_csv(&points, &results, &dir.join("no/such/dir.csv")).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_experiments_are_clear_errors() {
    // Bad TOML: file and line.
    let e = Experiment::from_toml("name = \"x\"\n[[sweep]\n", "e.toml", Path::new(".")).unwrap_err();
    assert!(matches!(e, ExperimentError::Toml { line: Some(2), .. }), "{e:?}");
    assert!(e.to_string().starts_with("e.toml: ") && e.to_string().contains("line 2"), "{e}");
    // Unknown keys.
    let e = Experiment::from_toml("scenario = \"x\"\nsweeps = 1\n", "e.toml", Path::new(".")).unwrap_err();
    assert!(e.to_string().contains("unknown field `sweeps`"), "{e}");
    let e = err("[[sweep]]\nkey = \"seed\"\nvalue = [1]\n");
    assert!(e.contains("unknown field `value`"), "{e}");
    // No scenario / wrong kind.
    let e = Experiment::from_toml("[[sweep]]\nkey = \"seed\"\nvalues = [1]\n", "e.toml", Path::new(".")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "e.toml: no scenario: give scenario = \"<file>\" (relative to this file) or a [scenario] table"
    );
    let e = Experiment::from_toml("scenario = 3\n", "e.toml", Path::new(".")).unwrap_err();
    assert!(
        e.to_string().contains("scenario: expected a file name (string) or a [scenario] table, found integer"),
        "{e}"
    );
    // Empty values.
    let e = err("[[sweep]]\nkey = \"seed\"\nvalues = []\n");
    assert_eq!(e, "exp.toml: sweep #1 (seed): values is empty: give at least one value");
    // Duplicate and reserved labels, the same key twice.
    let e = err("[[sweep]]\nkey = \"seed\"\nvalues = [1]\n[[sweep]]\nkey = \"x.seed\"\nvalues = [2]\n");
    assert!(e.contains("sweep #2 (x.seed): label 'seed' is already used by the sweep of 'seed'"), "{e}");
    let e = err("[[sweep]]\nkey = \"seed\"\nvalues = [1]\nlabel = \"waf\"\n");
    assert!(e.contains("label 'waf' is also a result column's name"), "{e}");
    let e = err("[[sweep]]\nkey = \"tenant.0.name\"\nvalues = [\"a\"]\nlabel = \"tenant\"\n");
    assert!(e.contains("label 'tenant' is also a result column's name"), "{e}");
    let e = err("[[sweep]]\nkey = \"seed\"\nvalues = [1]\nlabel = \"a\"\n[[sweep]]\nkey = \"seed\"\nvalues = [2]\nlabel = \"b\"\n");
    assert!(e.contains("'seed' is already swept (label 'a')"), "{e}");
    // Bad key paths: syntax at load, structure when the points are made.
    let e = err("[[sweep]]\nkey = \"device..ftl\"\nvalues = [1]\n");
    assert!(e.starts_with("exp.toml: sweep '#1': key 'device..ftl': empty component"), "{e}");
    let e = err("[[sweep]]\nkey = \"tenant.2.fio\"\nvalues = [\"x\"]\nlabel = \"job\"\n");
    assert_eq!(
        e,
        "exp.toml[scenario]: sweep 'job': key 'tenant.2.fio': index 2 is past the end of 'tenant' (2 elements)"
    );
    let e = err("[[sweep]]\nkey = \"seed.x\"\nvalues = [1]\n");
    assert!(e.contains("'seed' is an integer, not a table or an array"), "{e}");
    // A point whose scenario does not resolve: which point, and why.
    let e = exp("[[sweep]]\nkey = \"device.ftl.overprovisioning\"\nvalues = [0.2, -1.0]\nlabel = \"op\"\n[[sweep]]\nkey = \"seed\"\nvalues = [5]\n")
        .unwrap()
        .points()
        .unwrap_err();
    assert!(matches!(e, ExperimentError::Point { number: 2, count: 2, .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.starts_with("exp.toml[scenario]: point 2 of 2 (op = -1.0, seed = 5): "), "{msg}");
    assert!(msg.contains("device.ftl.overprovisioning: -1 is out of range"), "{msg}");
    // A key the scenario does not know.
    let e = err("[[sweep]]\nkey = \"device.ftl.speed\"\nvalues = [1]\n");
    assert!(e.contains("point 1 of 1 (speed = 1)") && e.contains("unknown field `speed`"), "{e}");
    // Names of values: one each, unique.
    let e = err("[[sweep]]\nkey = \"seed\"\nvalues = [1, 2]\nnames = [\"a\"]\n");
    assert!(e.contains("sweep #1 (seed): 1 names for 2 values"), "{e}");
    let e = err("[[sweep]]\nkey = \"seed\"\nvalues = [1, 2]\nnames = [\"a\", \"a\"]\n");
    assert!(e.contains("the name 'a' is given to two values"), "{e}");
    // Names that cannot name a directory.
    let e = Experiment::from_toml("name = \"a/b\"\n", "e.toml", Path::new(".")).unwrap_err();
    assert!(e.to_string().contains("name: 'a/b' cannot name the output directory"), "{e}");
}
