//! fio's JSON output (`--output-format=json` and `json+`), mirroring fio's `stat.c`:
//! `__show_run_stats` (top level), `show_thread_status_json` (one object per job),
//! `add_ddir_status_json` (read / write / trim / sync) and `add_ddir_lat_json` (latency objects).
//!
//! The schema is fio 3.33's, key for key and in fio's order (checked against a real fio 3.33
//! output file). Later fio versions add `job_start`, `latency_target_ns` and
//! `latency_window_us`; tools written for them read 3.33 output too.
//!
//! What fio would report for things flashmux does not model is fio's own value for "nothing":
//! CPU usage, context switches, page faults, short and dropped I/Os and the `latency_target`
//! settings are zero. `sync` holds the job's `fsync`/`fdatasync` syncs (fio's `sync_stat`). There is no `disk_util` array: flashmux's device is not a
//! block device in `/sys/block`, and fio omits the key entirely in that case (as for a file on
//! tmpfs: `show_disk_util` returns early on an empty disk list).

use super::fio_stats::{
    batch_dist, bw_agg_percent, bw_samples, dir_runtime_ns, elapsed_s, group_stats, iodepth_dist,
    iops_samples, lat_dist, latency_depth, ms, per_sec, per_sec_int, Dir, GroupDir, BATCH_KEYS, DEPTH_KEYS,
    DIRS, EPOCH_CTIME, LAT_KEYS_MS, LAT_KEYS_NS_US,
};
use super::{ratio, stop_reason_name};
use crate::metrics::{Fairness, IoStats, JobResult, LatStat, RunResults, TenantResult, FIO_PERCENTILES};
use serde_json::{json, Map, Value};

/// The run as fio's JSON output; `plus` selects `json+`, which adds every completion-latency
/// histogram bin (`clat_ns.bins`). Serialize with `serde_json::to_string_pretty` (or compactly):
/// key order is fio's, and the result contains no wall-clock time, so the same run always gives
/// the same bytes.
pub fn fio_json(r: &RunResults, plus: bool) -> Value {
    let groups = group_stats(r);
    let jobs: Vec<Value> = r
        .jobs
        .iter()
        .map(|job| {
            let group = groups.get(&job.groupid).copied().unwrap_or_default();
            job_json(r, job, &group, plus)
        })
        .collect();
    // `timestamp`, `timestamp_ms` and `time` are the moment fio printed its report. A simulated
    // run's report must be byte-for-byte reproducible, so they are the Unix epoch: fio's format,
    // no wall-clock content.
    let mut top = Map::new();
    top.insert("fio version".into(), json!(format!("flashmux-{}", r.version)));
    top.insert("timestamp".into(), json!(0));
    top.insert("timestamp_ms".into(), json!(0));
    top.insert("time".into(), json!(EPOCH_CTIME));
    // fio prints the [global] options once, before the jobs, and only when there are some.
    if !r.global_options.is_empty() {
        let globals: Map<String, Value> = r.global_options.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        top.insert("global options".into(), Value::Object(globals));
    }
    top.insert("jobs".into(), Value::Array(jobs));
    top.insert("flashmux".into(), run_json(r));
    Value::Object(top)
}

/// `show_thread_status_json`: one fio job entry — a job clone, or under `group_reporting` a whole
/// reporting group merged by the simulator (`JobResult::members` clones).
fn job_json(r: &RunResults, job: &JobResult, group: &[GroupDir; 3], plus: bool) -> Value {
    let mut o = Map::new();
    o.insert("jobname".into(), json!(job.name));
    o.insert("groupid".into(), json!(job.groupid));
    o.insert("error".into(), json!(job.error));
    o.insert("eta".into(), json!(0));
    o.insert("elapsed".into(), json!(elapsed_s(r.sim_time_ns)));
    // `json_add_job_opts` leaves the key out when the job has no options to echo.
    if !job.options.is_empty() {
        let opts: Map<String, Value> = job.options.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        o.insert("job options".into(), Value::Object(opts));
    }
    for d in DIRS {
        o.insert(d.name().into(), dir_json(job, d, &group[d.index()], plus));
    }
    // fio: total_ios, then the sync latencies with percentiles (clat_percentiles is on).
    o.insert("sync".into(), json!({ "total_ios": job.io.sync.count(), "lat_ns": lat_json(&job.io.sync, true, plus) }));
    o.insert("job_runtime".into(), json!(ms(job.runtime_ns)));
    o.insert("usr_cpu".into(), json!(0.0));
    o.insert("sys_cpu".into(), json!(0.0));
    o.insert("ctx".into(), json!(0));
    o.insert("majf".into(), json!(0));
    o.insert("minf".into(), json!(0));
    o.insert("iodepth_level".into(), keyed(&DEPTH_KEYS, &iodepth_dist(job)));
    let batches = batch_dist(job);
    o.insert("iodepth_submit".into(), keyed(&BATCH_KEYS, &batches));
    o.insert("iodepth_complete".into(), keyed(&BATCH_KEYS, &batches));
    let lat = lat_dist(&job.io);
    o.insert("latency_ns".into(), keyed(&LAT_KEYS_NS_US, &lat.ns));
    o.insert("latency_us".into(), keyed(&LAT_KEYS_NS_US, &lat.us));
    o.insert("latency_ms".into(), keyed(&LAT_KEYS_MS, &lat.ms));
    o.insert("latency_depth".into(), json!(latency_depth(job)));
    o.insert("latency_target".into(), json!(0));
    o.insert("latency_percentile".into(), json!(100.0));
    o.insert("latency_window".into(), json!(0));
    o.insert(
        "flashmux".into(),
        json!({ "tenant": job.tenant, "tenant_index": job.tenant_index, "clone": job.clone, "members": job.members }),
    );
    Value::Object(o)
}

/// `add_ddir_status_json` for read, write or trim.
fn dir_json(job: &JobResult, d: Dir, group: &GroupDir, plus: bool) -> Value {
    let s = d.of(&job.io);
    let run = dir_runtime_ns(job, d);
    let bw_bytes = per_sec_int(s.bytes, run);
    let bw = bw_samples(job, d);
    let iops = iops_samples(job, d);
    json!({
        "io_bytes": s.bytes,
        "io_kbytes": s.bytes >> 10,
        "bw_bytes": bw_bytes,
        "bw": bw_bytes / 1024,
        "iops": per_sec(s.ios, run),
        "runtime": ms(run),
        "total_ios": s.ios,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": lat_json(&s.slat, false, false),
        "clat_ns": lat_json(&s.clat, true, plus),
        "lat_ns": lat_json(&s.lat, false, false),
        "bw_min": bw.min,
        "bw_max": bw.max,
        "bw_agg": bw_agg_percent(group, &bw),
        "bw_mean": bw.mean,
        "bw_dev": bw.dev,
        "bw_samples": bw.samples,
        "iops_min": iops.min,
        "iops_max": iops.max,
        "iops_mean": iops.mean,
        "iops_stddev": iops.dev,
        "iops_samples": iops.samples,
    })
}

/// `add_ddir_lat_json`: fio adds `percentile` (and with json+, `bins`) only for a series that
/// has percentiles enabled (completion latency, by default) and at least one sample.
fn lat_json(l: &LatStat, percentiles: bool, bins: bool) -> Value {
    let mut o = Map::new();
    o.insert("min".into(), json!(l.min()));
    o.insert("max".into(), json!(l.max()));
    o.insert("mean".into(), json!(l.mean()));
    o.insert("stddev".into(), json!(l.stddev()));
    o.insert("N".into(), json!(l.count()));
    if percentiles && l.count() > 0 {
        // fio formats each percentile with "%f": "1.000000" … "99.990000".
        let p: Map<String, Value> =
            FIO_PERCENTILES.iter().map(|&p| (format!("{p:.6}"), json!(l.percentile(p)))).collect();
        o.insert("percentile".into(), Value::Object(p));
        if bins {
            // json+: latency (ns) → number of I/Os. fio keys each of its buckets by the bucket's
            // midpoint (`plat_idx_to_val`); flashmux's histogram keys by the bucket's upper value.
            let b: Map<String, Value> =
                l.bins().into_iter().map(|(v, n)| (v.to_string(), json!(n))).collect();
            o.insert("bins".into(), Value::Object(b));
        }
    }
    Value::Object(o)
}

/// An object of fio's fixed bucket keys and their values.
fn keyed(keys: &[&str], values: &[f64]) -> Value {
    Value::Object(keys.iter().zip(values).map(|(k, v)| ((*k).to_owned(), json!(v))).collect())
}

/// The top-level `"flashmux"` object: everything about the run fio's schema has no place for.
fn run_json(r: &RunResults) -> Value {
    let gc_total = r.tenants.iter().map(|t| t.gc_units_moved).sum::<u64>() + r.device.unowned_gc_units_moved;
    let contrib = r.gc_contributions();
    let mut tenants: Vec<Value> = r.tenants.iter().map(|t| tenant_json(r, t, gc_total)).collect();
    if let Some(c) = &contrib {
        for (v, c) in tenants.iter_mut().zip(c) {
            v["gc_contribution"] = json!({ "estimated": c.estimated, "actual": c.actual, "error": c.error });
        }
    }
    let mut v = json!({
        "version": r.version,
        "seed": r.seed,
        "config_hash": r.config_hash,
        "scenario": r.scenario,
        "sim_time_ns": r.sim_time_ns,
        "stop_reason": stop_reason_name(r.stop_reason),
        "events": r.events,
        "requests": {
            "issued": r.requests_issued,
            "completed": r.requests_completed,
            "in_flight": r.requests_in_flight,
        },
        "timeline_interval_ns": r.timeline_interval_ns,
        "warnings": r.warnings,
        // All of DeviceResult as serde writes it; a non-finite float (an undefined ratio)
        // becomes null.
        "device": r.device,
        "tenants": tenants,
        "fairness": fairness_json(&r.fairness, &r.tenants),
    });
    if let Some(c) = &contrib {
        v["gc_contribution_error_mean"] = json!(crate::metrics::mean_abs_error(c));
    }
    if let Some(virt) = &r.virt {
        v["virt"] = json!(virt);
    }
    if !r.filebench.is_empty() {
        v["filebench"] = json!(r.filebench);
    }
    if let Some(k) = &r.kernel {
        v["kernel"] = json!(k);
    }
    if let Some(h) = &r.host_ftl {
        v["host_ftl"] = json!(h);
    }
    if let Some(serve) = &r.serve {
        v["serve"] = json!(serve);
    }
    v
}

/// One tenant's summary. Rates are over the tenant's runtime (its longest job's).
fn tenant_json(r: &RunResults, t: &TenantResult, gc_total: u64) -> Value {
    let jobs: Vec<&str> = t.jobs.iter().filter_map(|&i| r.jobs.get(i)).map(|j| j.name.as_str()).collect();
    let lat = t.io.all_lat();
    let mut o = Map::new();
    o.insert("name".into(), json!(t.name));
    o.insert("index".into(), json!(t.index));
    o.insert("region".into(), json!({ "offset": t.region.0, "length": t.region.1 }));
    o.insert("weight".into(), json!(t.weight));
    o.insert("jobs".into(), json!(jobs));
    for d in DIRS {
        o.insert(d.name().into(), tenant_dir_json(&t.io, d, t.runtime_ns));
    }
    o.insert(
        "lat_ns".into(),
        json!({
            "mean": lat.mean(),
            "p50": lat.percentile(50.0),
            "p99": lat.percentile(99.0),
            "p99.9": lat.percentile(99.9),
        }),
    );
    // Null for a tenant not counted; non-finite values become null too.
    let share = t.share;
    o.insert(
        "share".into(),
        json!({
            "bw_bytes": share.map(|s| s.bw_bytes),
            "achieved": share.map(|s| s.achieved),
            "ideal": share.map(|s| s.ideal),
            "error": share.map(|s| s.error),
        }),
    );
    if let Some(s) = t.sched {
        o.insert(
            "scheduler".into(),
            json!({
                "turns": s.turns,
                "service_ns": s.service_ns,
                "dispatched": s.dispatched,
                "slice_scale": s.scale,
            }),
        );
        if let Some(ns) = s.gc_charged_ns {
            o["scheduler"]["gc_charged_ns"] = json!(ns);
        }
    }
    if let Some(m) = t.merges {
        o.insert(
            "elevator".into(),
            json!({
                "merges_back": m.merges_back,
                "merges_front": m.merges_front,
                "read_merges": m.read_merges,
                "write_merges": m.write_merges,
            }),
        );
    }
    o.insert("gc_pages_moved".into(), json!(t.gc_units_moved));
    o.insert("gc_pages_caused".into(), json!(t.gc_units_caused));
    o.insert("gc_share".into(), json!(ratio(t.gc_units_moved as f64, gc_total as f64)));
    o.insert("gc_erases".into(), json!(t.gc_erases));
    o.insert(
        "map".into(),
        json!({
            "lookups": t.map.lookups,
            "hits": t.map.hits,
            "misses": t.map.misses,
            "miss_ratio": ratio(t.map.misses as f64, t.map.lookups as f64),
            "map_loads": t.map.map_loads,
            "map_flushes": t.map.map_flushes,
            "commands_delayed": t.map.commands_delayed,
            "map_wait_ns": t.map.map_wait_ns,
            "map_wait_mean_ns": ratio(t.map.map_wait_ns as f64, t.map.commands_delayed as f64),
            "pages_touched": t.map.pages_touched,
            "gc_map_updates": t.map.gc_map_updates,
            "cmt_pages": t.map.cmt_pages,
            "cmt_allocation": t.map.cmt_allocation,
        }),
    );
    o.insert("device".into(), json!(t.device));
    if let Some(rp) = &t.replay {
        o.insert("replay".into(), json!(rp));
    }
    if let Some(z) = &t.zones {
        o.insert("zones".into(), json!(z));
    }
    Value::Object(o)
}

/// The run's fairness. The alone baseline's keys (`tenants`, `fairness`) are there only when it
/// was measured.
fn fairness_json(f: &Fairness, tenants: &[TenantResult]) -> Value {
    let mut o = Map::new();
    o.insert("interval_ns".into(), f.interval_ns.map_or(Value::Null, |(s, e)| json!({ "start": s, "end": e })));
    o.insert("tenants_counted".into(), json!(f.tenants_counted));
    o.insert("share_error_mean".into(), json!(f.share_error_mean));
    o.insert("share_error_max".into(), json!(f.share_error_max));
    o.insert("jain_index".into(), json!(f.jain_index));
    if let Some(b) = &f.baseline {
        let per_tenant: Vec<Value> = b
            .tenants
            .iter()
            .zip(tenants)
            .map(|(s, t)| {
                json!({
                    "name": t.name,
                    "lat_shared_mean_ns": s.lat_shared_ns,
                    "lat_alone_mean_ns": s.lat_alone_ns,
                    "slowdown": s.slowdown,
                })
            })
            .collect();
        o.insert("tenants".into(), json!(per_tenant));
        o.insert("fairness".into(), json!(b.fairness));
    }
    Value::Object(o)
}

fn tenant_dir_json(io: &IoStats, d: Dir, runtime_ns: u64) -> Value {
    let s = d.of(io);
    json!({
        "iops": per_sec(s.ios, runtime_ns),
        "bw_bytes": per_sec_int(s.bytes, runtime_ns),
        "io_bytes": s.bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_fixture::{empty_run, run};
    use crate::host::SchedTenantStats;

    fn keys(v: &Value) -> Vec<&str> {
        v.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default()
    }

    /// Key lists of fio 3.33's JSON output, in order, copied from a real run's output
    /// (`fio --output-format=json`, rw=randrw, ioengine=io_uring, against a loop device).
    const FIO_TOP_KEYS: [&str; 6] = ["fio version", "timestamp", "timestamp_ms", "time", "jobs", "disk_util"];
    const FIO_JOB_KEYS: [&str; 26] = [
        "jobname",
        "groupid",
        "error",
        "eta",
        "elapsed",
        "job options",
        "read",
        "write",
        "trim",
        "sync",
        "job_runtime",
        "usr_cpu",
        "sys_cpu",
        "ctx",
        "majf",
        "minf",
        "iodepth_level",
        "iodepth_submit",
        "iodepth_complete",
        "latency_ns",
        "latency_us",
        "latency_ms",
        "latency_depth",
        "latency_target",
        "latency_percentile",
        "latency_window",
    ];
    const FIO_DIR_KEYS: [&str; 23] = [
        "io_bytes",
        "io_kbytes",
        "bw_bytes",
        "bw",
        "iops",
        "runtime",
        "total_ios",
        "short_ios",
        "drop_ios",
        "slat_ns",
        "clat_ns",
        "lat_ns",
        "bw_min",
        "bw_max",
        "bw_agg",
        "bw_mean",
        "bw_dev",
        "bw_samples",
        "iops_min",
        "iops_max",
        "iops_mean",
        "iops_stddev",
        "iops_samples",
    ];
    const FIO_LAT_KEYS: [&str; 5] = ["min", "max", "mean", "stddev", "N"];
    const FIO_PERCENTILE_KEYS: [&str; 17] = [
        "1.000000",
        "5.000000",
        "10.000000",
        "20.000000",
        "30.000000",
        "40.000000",
        "50.000000",
        "60.000000",
        "70.000000",
        "80.000000",
        "90.000000",
        "95.000000",
        "99.000000",
        "99.500000",
        "99.900000",
        "99.950000",
        "99.990000",
    ];
    const FIO_SYNC_KEYS: [&str; 2] = ["total_ios", "lat_ns"];
    const FIO_DEPTH_KEYS: [&str; 7] = ["1", "2", "4", "8", "16", "32", ">=64"];
    const FIO_BATCH_KEYS: [&str; 7] = ["0", "4", "8", "16", "32", "64", ">=64"];
    const FIO_LAT_NS_US_KEYS: [&str; 10] = ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"];
    const FIO_LAT_MS_KEYS: [&str; 12] =
        ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000"];

    #[test]
    fn schema_matches_fio_key_for_key() {
        let v = fio_json(&run(), false);
        // No disk_util (no block device), then flashmux's own object.
        // fio puts "global options" between "time" and "jobs" when a job file has [global].
        let mut top = FIO_TOP_KEYS[..4].to_vec();
        top.extend(["global options", "jobs", "flashmux"]);
        assert_eq!(keys(&v), top);
        assert_eq!(v["global options"]["ioengine"], "libaio");
        let job = &v["jobs"][0];
        let mut job_keys = FIO_JOB_KEYS.to_vec();
        job_keys.push("flashmux");
        assert_eq!(keys(job), job_keys);
        for d in ["read", "write", "trim"] {
            assert_eq!(keys(&job[d]), FIO_DIR_KEYS, "{d}");
            assert_eq!(keys(&job[d]["slat_ns"]), FIO_LAT_KEYS);
            assert_eq!(keys(&job[d]["lat_ns"]), FIO_LAT_KEYS);
        }
        let mut clat_keys = FIO_LAT_KEYS.to_vec();
        clat_keys.push("percentile");
        assert_eq!(keys(&job["read"]["clat_ns"]), clat_keys);
        assert_eq!(keys(&job["read"]["clat_ns"]["percentile"]), FIO_PERCENTILE_KEYS);
        // fio leaves `percentile` out of a series without samples.
        assert_eq!(keys(&job["trim"]["clat_ns"]), FIO_LAT_KEYS);
        assert_eq!(keys(&job["sync"]), FIO_SYNC_KEYS);
        assert_eq!(keys(&job["sync"]["lat_ns"]), FIO_LAT_KEYS);
        assert_eq!(keys(&job["iodepth_level"]), FIO_DEPTH_KEYS);
        assert_eq!(keys(&job["iodepth_submit"]), FIO_BATCH_KEYS);
        assert_eq!(keys(&job["iodepth_complete"]), FIO_BATCH_KEYS);
        assert_eq!(keys(&job["latency_ns"]), FIO_LAT_NS_US_KEYS);
        assert_eq!(keys(&job["latency_us"]), FIO_LAT_NS_US_KEYS);
        assert_eq!(keys(&job["latency_ms"]), FIO_LAT_MS_KEYS);
        assert_eq!(keys(&job["job options"]), ["name", "rw", "iodepth"]);
        assert_eq!(job["job options"]["iodepth"], "16");
    }

    #[test]
    fn fixed_fields_are_reproducible_and_fio_shaped() {
        let v = fio_json(&run(), false);
        assert_eq!(v["fio version"], "flashmux-0.1.0");
        assert_eq!((v["timestamp"].as_u64(), v["timestamp_ms"].as_u64()), (Some(0), Some(0)));
        assert_eq!(v["time"], "Thu Jan  1 00:00:00 1970");
        let job = &v["jobs"][0];
        // 4 s + 1 ns of simulated time, rounded up like fio.
        assert_eq!(job["elapsed"], 5);
        assert_eq!(job["latency_depth"], 16);
        assert_eq!(v["jobs"][1]["latency_depth"], 1);
        assert_eq!(job["latency_percentile"], 100.0);
        assert_eq!(job["flashmux"], json!({ "tenant": "vm0", "tenant_index": 0, "clone": 0, "members": 1 }));
        assert_eq!(v["jobs"][1]["flashmux"]["clone"], 1);
        assert_eq!(job["iodepth_level"]["1"], 0.1);
        assert_eq!(job["iodepth_level"]["16"], 99.9);
        assert_eq!(job["iodepth_submit"]["4"], 100.0);
        assert_eq!(job["sync"]["lat_ns"]["N"], 0);
    }

    #[test]
    fn syncs_fill_the_sync_object() {
        let mut r = run();
        for ns in [40_000, 60_000, 600_000] {
            r.jobs[0].io.sync.record(ns);
        }
        for plus in [false, true] {
            let sync = &fio_json(&r, plus)["jobs"][0]["sync"];
            assert_eq!(keys(sync), FIO_SYNC_KEYS);
            assert_eq!(sync["total_ios"], 3);
            let lat = &sync["lat_ns"];
            assert_eq!((&lat["N"], &lat["min"], &lat["max"]), (&json!(3), &json!(40_000), &json!(600_000)));
            // fio prints sync percentiles (clat_percentiles is on by default), and bins with json+.
            let mut want = FIO_LAT_KEYS.to_vec();
            want.push("percentile");
            if plus {
                want.push("bins");
            }
            assert_eq!(keys(lat), want);
            assert_eq!(keys(&lat["percentile"]), FIO_PERCENTILE_KEYS);
        }
    }

    #[test]
    fn bandwidth_and_iops_arithmetic() {
        let v = fio_json(&run(), false);
        let read = &v["jobs"][0]["read"];
        // 1000 × 4 KiB in 2 s.
        assert_eq!(read["io_bytes"], 4_096_000);
        assert_eq!(read["io_kbytes"], 4000);
        assert_eq!(read["bw_bytes"], 2_048_000);
        assert_eq!(read["bw"], 2000);
        assert_eq!(read["iops"], 500.0);
        assert_eq!(read["runtime"], 2000);
        assert_eq!(read["total_ios"], 1000);
        assert_eq!(v["jobs"][0]["job_runtime"], 2000);
        // Samples: 2000, 2000, 4000 KiB/s (the idle window is skipped).
        assert_eq!((read["bw_min"].as_u64(), read["bw_max"].as_u64()), (Some(2000), Some(4000)));
        assert_eq!(read["bw_samples"], 3);
        let mean = read["bw_mean"].as_f64().unwrap_or(f64::NAN);
        assert!((mean - 8000.0 / 3.0).abs() < 1e-9);
        let dev = read["bw_dev"].as_f64().unwrap_or(f64::NAN);
        assert!((dev - (4_000_000.0f64 / 3.0).sqrt()).abs() < 1e-9);
        // Group 0 moved 12,288,000 bytes in at most 4 s: 3000 KiB/s; 2666 / 3000.
        let agg = read["bw_agg"].as_f64().unwrap_or(f64::NAN);
        assert!((agg - 266_600.0 / 3000.0).abs() < 1e-9, "{agg}");
        assert_eq!((read["iops_min"].as_u64(), read["iops_max"].as_u64()), (Some(500), Some(1000)));
        let imean = read["iops_mean"].as_f64().unwrap_or(f64::NAN);
        assert!((imean - 2000.0 / 3.0).abs() < 1e-9);
        // A direction without I/O has no runtime and zero rates, as in fio.
        let write = &v["jobs"][0]["write"];
        assert_eq!((write["runtime"].as_u64(), write["bw_bytes"].as_u64()), (Some(0), Some(0)));
        assert_eq!(write["iops"], 0.0);
        assert_eq!(write["bw_agg"], 0.0);
        // Job b (group 1) is alone in its group: its share is capped at 100%.
        assert_eq!(v["jobs"][2]["write"]["bw_agg"], 100.0);
    }

    #[test]
    fn latency_objects_and_distribution() {
        let r = run();
        let v = fio_json(&r, false);
        let clat = &v["jobs"][0]["read"]["clat_ns"];
        let l = &r.jobs[0].io.read.clat;
        assert_eq!(clat["N"], 1000);
        assert_eq!(clat["min"], l.min());
        assert_eq!(clat["percentile"]["99.000000"], l.percentile(99.0));
        assert!(clat.get("bins").is_none(), "bins are json+ only");
        // Fixture clats are 20–80 µs: all in the "50" and "100" µs buckets.
        let us = &v["jobs"][0]["latency_us"];
        let sum: f64 = FIO_LAT_NS_US_KEYS.iter().filter_map(|k| us[*k].as_f64()).sum();
        assert!((sum - 100.0).abs() < 1e-9);
        assert!(us["50"].as_f64().unwrap_or(0.0) > 0.0 && us["100"].as_f64().unwrap_or(0.0) > 0.0);
        // Job b's writes take 3.0–3.8 ms: all in the 2–4 ms bucket, keyed "4".
        let m = &v["jobs"][2]["latency_ms"];
        assert_eq!(m["4"], 100.0);
        assert_eq!(v["jobs"][2]["latency_us"]["1000"], 0.0);
    }

    #[test]
    fn json_plus_bins_sum_to_n() {
        let v = fio_json(&run(), true);
        for job in v["jobs"].as_array().into_iter().flatten() {
            for d in ["read", "write", "trim"] {
                let clat = &job["clat_ns"];
                let clat = if clat.is_null() { &job[d]["clat_ns"] } else { clat };
                let n = clat["N"].as_u64().unwrap_or(u64::MAX);
                match clat.get("bins").and_then(Value::as_object) {
                    Some(bins) => {
                        let sum: u64 = bins.values().filter_map(Value::as_u64).sum();
                        assert_eq!(sum, n);
                        assert!(bins.keys().all(|k| k.parse::<u64>().is_ok()));
                        assert_eq!(keys(clat).last(), Some(&"bins"));
                    }
                    None => assert_eq!(n, 0, "a series with samples has bins"),
                }
            }
        }
    }

    #[test]
    fn flashmux_objects() {
        let v = fio_json(&run(), false);
        let f = &v["flashmux"];
        assert_eq!(
            keys(f),
            [
                "version",
                "seed",
                "config_hash",
                "scenario",
                "sim_time_ns",
                "stop_reason",
                "events",
                "requests",
                "timeline_interval_ns",
                "warnings",
                "device",
                "tenants",
                "fairness"
            ]
        );
        assert_eq!(f["stop_reason"], "all-jobs-done");
        assert_eq!(f["requests"], json!({ "issued": 3102, "completed": 3100, "in_flight": 2 }));
        assert_eq!(f["device"]["waf"], 2.0);
        assert_eq!(f["device"]["precondition"]["state"], "aged");
        assert_eq!(f["device"]["ftl"]["gc_runs"], 4);
        let t0 = &f["tenants"][0];
        assert_eq!(t0["jobs"], json!(["a", "a"]));
        assert_eq!(t0["region"], json!({ "offset": 0, "length": 1u64 << 30 }));
        // vm0 read 12,288,000 bytes in 4 s.
        assert_eq!(t0["read"]["bw_bytes"], 3_072_000);
        assert_eq!(t0["read"]["iops"], 750.0);
        // GC moved 60 + 30 tenant units and 10 unowned.
        assert_eq!(t0["gc_pages_moved"], 60);
        assert_eq!(t0["gc_share"], 0.6);
        assert_eq!(f["tenants"][1]["gc_share"], 0.3);
        assert_eq!(t0["map"]["miss_ratio"], 0.1);
        assert_eq!(t0["device"]["write_buffer_hits"], 3);
        assert_eq!(keys(&t0["lat_ns"]), ["mean", "p50", "p99", "p99.9"]);
    }

    #[test]
    fn shares_and_fairness() {
        let v = fio_json(&run(), false);
        let f = &v["flashmux"];
        let (t0, t1) = (&f["tenants"][0], &f["tenants"][1]);
        assert_eq!((t0["weight"].as_u64(), t1["weight"].as_u64()), (Some(500), Some(250)));
        assert_eq!(keys(&t0["share"]), ["bw_bytes", "achieved", "ideal", "error"]);
        let num = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
        // 3 and 1 MB/s against weights 2:1: shares 3/4 and 1/4, ideal 2/3 and 1/3.
        assert_eq!(t0["share"]["bw_bytes"], 3e6);
        assert_eq!(t0["share"]["achieved"], 0.75);
        assert!((num(&t0["share"]["ideal"]) - 2.0 / 3.0).abs() < 1e-12);
        assert!((num(&t0["share"]["error"]) - 0.125).abs() < 1e-12);
        assert!((num(&t1["share"]["error"]) - 0.25).abs() < 1e-12);
        let fair = &f["fairness"];
        // Without an alone baseline its keys are absent, not null.
        assert_eq!(keys(fair), ["interval_ns", "tenants_counted", "share_error_mean", "share_error_max", "jain_index"]);
        assert_eq!(fair["interval_ns"], json!({ "start": 0, "end": 1_000_000_000u64 }));
        assert_eq!(fair["tenants_counted"], 2);
        assert!((num(&fair["share_error_mean"]) - 0.1875).abs() < 1e-12);
        assert!((num(&fair["share_error_max"]) - 0.25).abs() < 1e-12);
        // x = 3e6/500, 1e6/250 = 6000, 4000: J = 10000² / (2 · (6000² + 4000²)) = 25/26.
        assert!((num(&fair["jain_index"]) - 25.0 / 26.0).abs() < 1e-12);
    }

    #[test]
    fn scheduler_stats_only_under_a_scheduler_that_keeps_them() {
        let mut r = run();
        r.tenants[1].sched = Some(SchedTenantStats { turns: 3, service_ns: 250_000_000, dispatched: 40, scale: 1.5, gc_charged_ns: None });
        let v = fio_json(&r, false);
        let (t0, t1) = (&v["flashmux"]["tenants"][0], &v["flashmux"]["tenants"][1]);
        assert!(t0.get("scheduler").is_none(), "{t0}");
        assert_eq!(t1["scheduler"], json!({ "turns": 3, "service_ns": 250_000_000u64, "dispatched": 40, "slice_scale": 1.5 }));
    }

    #[test]
    fn alone_baseline_adds_slowdowns() {
        let mut r = run();
        let mut alone = [run(), run()];
        // vm0 alone: every latency half as long; vm1 alone did nothing.
        alone[0].tenants[0].io = IoStats::default();
        for j in &r.jobs[..2] {
            let mut half = IoStats::default();
            for i in 0..j.io.read.lat.count() {
                half.read.record(4096, 0, (j.io.read.lat.mean() / 2.0) as u64 + i % 2);
            }
            alone[0].tenants[0].io.merge(&half);
        }
        alone[1].tenants[1].io = IoStats::default();
        r.add_alone_baseline(&alone);
        let v = fio_json(&r, false);
        let fair = &v["flashmux"]["fairness"];
        assert_eq!(keys(fair).last(), Some(&"fairness"));
        let t = &fair["tenants"];
        assert_eq!(keys(&t[0]), ["name", "lat_shared_mean_ns", "lat_alone_mean_ns", "slowdown"]);
        assert_eq!((t[0]["name"].as_str(), t[1]["name"].as_str()), (Some("vm0"), Some("vm1")));
        let shared = r.tenants[0].lat_mean_ns().unwrap_or(f64::NAN);
        assert_eq!(t[0]["lat_shared_mean_ns"], shared);
        let slowdown = t[0]["slowdown"].as_f64().unwrap_or(f64::NAN);
        assert!(slowdown > 1.9 && slowdown < 2.1, "{slowdown}");
        // vm1 has no alone latency, so no slowdown; with one slowdown, fairness is 1.
        assert!(t[1]["lat_alone_mean_ns"].is_null() && t[1]["slowdown"].is_null());
        assert_eq!(fair["fairness"], 1.0);
    }

    /// Paths of every `null` in `v`.
    fn nulls(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::Null => out.push(path.to_owned()),
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| nulls(x, &format!("{path}/{i}"), out)),
            Value::Object(o) => o.iter().for_each(|(k, x)| nulls(x, &format!("{path}/{k}"), out)),
            _ => {}
        }
    }

    #[test]
    fn empty_runs_have_numbers_everywhere_but_undefined_ratios() {
        // serde_json turns a NaN or infinite float into null, so "no NaN" means: the only nulls
        // are the ratios that are undefined without data.
        let mut no_jobs = empty_run();
        no_jobs.jobs.clear();
        no_jobs.tenants.clear();
        for (r, tenants) in [(empty_run(), 2), (no_jobs, 0)] {
            for plus in [false, true] {
                let v = fio_json(&r, plus);
                let mut found = Vec::new();
                nulls(&v, "", &mut found);
                // `cmt` and `cmt_allocation`: no map cache with full mapping.
                let mut expected = vec![
                    "/flashmux/device/waf".to_owned(),
                    "/flashmux/device/precondition/state".to_owned(),
                    "/flashmux/device/cmt".to_owned(),
                ];
                for k in ["interval_ns", "share_error_mean", "share_error_max", "jain_index"] {
                    expected.push(format!("/flashmux/fairness/{k}"));
                }
                for t in 0..tenants {
                    for k in ["bw_bytes", "achieved", "ideal", "error"] {
                        expected.push(format!("/flashmux/tenants/{t}/share/{k}"));
                    }
                    expected.push(format!("/flashmux/tenants/{t}/gc_share"));
                    expected.push(format!("/flashmux/tenants/{t}/map/miss_ratio"));
                    expected.push(format!("/flashmux/tenants/{t}/map/map_wait_mean_ns"));
                    expected.push(format!("/flashmux/tenants/{t}/map/cmt_allocation"));
                }
                found.sort();
                expected.sort();
                assert_eq!(found, expected);
                if let Some(job) = v["jobs"].get(0) {
                    assert_eq!(job["read"]["iops"], 0.0);
                    assert_eq!(job["elapsed"], 0);
                    assert_eq!(job["latency_us"]["2"], 0.0);
                    assert_eq!(job["iodepth_submit"]["4"], 0.0);
                    assert!(job["read"]["clat_ns"].get("percentile").is_none());
                    assert!(job["read"]["clat_ns"].get("bins").is_none());
                }
            }
        }
    }

    #[test]
    fn non_finite_device_values_become_null() {
        let mut r = run();
        r.device.precondition.steady_waf = f64::NAN;
        r.device.waf = Some(f64::INFINITY);
        let v = fio_json(&r, false);
        assert!(v["flashmux"]["device"]["waf"].is_null());
        assert!(v["flashmux"]["device"]["precondition"]["steady_waf"].is_null());
    }

    #[test]
    fn deterministic() {
        let r = run();
        for plus in [false, true] {
            let a = serde_json::to_string_pretty(&fio_json(&r, plus)).unwrap_or_default();
            let b = serde_json::to_string_pretty(&fio_json(&r, plus)).unwrap_or_default();
            assert!(!a.is_empty());
            assert_eq!(a, b);
        }
    }
}
