//! A trace's writes placed by one of its fields (`place_by` in a tenant's `trace` table): each
//! value of the field its own FDP handle or stream, numbered as the values first appear (in the
//! `select`ed stream, if one is); more values than handles said so and counted; and what cannot
//! place is refused when the scenario is loaded, naming the key.

mod common;

use common::{load_err, run_checked, TempFile};
use flashmux::config::{Scenario, Workload};
use flashmux::metrics::RunResults;
use std::path::Path;

/// An MSR request: host, disk number, whether a write, offset and size in bytes.
type Request = (&'static str, u32, bool, u64, u64);

/// An MSR trace of `requests`, 10 µs apart.
fn msr(requests: &[Request]) -> String {
    let t0 = 128_166_385_295_514_663u64;
    requests
        .iter()
        .enumerate()
        .map(|(i, (host, disk, write, offset, size))| {
            let op = if *write { "Write" } else { "Read" };
            format!("{},{host},{disk},{op},{offset},{size},100\n", t0 + 100 * i as u64)
        })
        .collect()
}

/// `n` sequential writes of `size` bytes by disk `disk` of host `hm`, from byte `first`.
fn writes(disk: u32, first: u64, size: u64, n: u64) -> Vec<Request> {
    (0..n).map(|i| ("hm", disk, true, first + i * size, size)).collect()
}

/// Round robin over the lists: the disks' writes interleaved.
fn interleave(lists: Vec<Vec<Request>>) -> Vec<Request> {
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest).flat_map(|i| lists.iter().filter_map(move |l| l.get(i).copied())).collect()
}

/// A 2 GiB `paper-c` drive with `placement` (`[device.fdp]` or `[device.streams]` and its
/// keys), one tenant replaying `trace` with `keys` added to its table, closed loop.
fn scenario(placement: &str, trace: &str, keys: &str) -> String {
    format!(
        "seed = 1\n[device]\npreset = \"paper-c\"\ncapacity = \"2GiB\"\n{placement}\n\
         [[tenant]]\nname = \"t\"\ntrace = {{ path = \"{trace}\", closed_loop = 8{keys} }}\n"
    )
}

fn host_bytes(r: &RunResults) -> Vec<u64> {
    r.device.placement.as_ref().unwrap().placements.iter().map(|p| p.host_bytes).collect()
}

/// Two disks' writes to disjoint offsets, replayed as one tenant placed by disk: on FDP each
/// disk's bytes go through its own handle (the disk first seen, by a read, handle 0); on a
/// streams drive each disk is its own stream, opened in the order the disks first write.
#[test]
fn each_disk_s_writes_go_through_its_own_placement() {
    let mut reqs = vec![("hm", 1, false, 0, 4096)];
    reqs.extend(interleave(vec![writes(0, 0, 4096, 300), writes(1, 1 << 30, 8192, 200)]));
    let t = TempFile::new("two-disks.csv", &msr(&reqs));
    let (disk0, disk1) = (300 * 4096u64, 200 * 8192u64);

    let fdp = run_checked(&scenario("[device.fdp]\nhandles = 4", &t.path(), ", place_by = \"disk\""), 1_000);
    assert_eq!(fdp.tenants[0].io.write.bytes, disk0 + disk1, "the whole trace replayed");
    // hm_1 is value 0 (its read came first), hm_0 value 1.
    assert_eq!(host_bytes(&fdp), [disk1, disk0, 0, 0]);
    let p = fdp.device.placement.as_ref().unwrap();
    assert_eq!(p.events.invalid_placement_ids, 0);
    let replay = fdp.tenants[0].replay.as_ref().unwrap().placement.as_ref().unwrap();
    assert_eq!((replay.field.as_str(), replay.values, replay.fdp_handles, replay.invalid_placement_writes), ("disk", 2, Some(4), 0));
    assert!(fdp.warnings.iter().all(|w| !w.contains("place_by")), "{:?}", fdp.warnings);
    assert!(fdp.jobs[0].options.contains(&("trace_place_by".into(), "disk".into())), "{:?}", fdp.jobs[0].options);

    // Without place_by every write goes through handle 0.
    let none = run_checked(&scenario("[device.fdp]\nhandles = 4", &t.path(), ""), 1_000);
    assert_eq!(host_bytes(&none), [disk0 + disk1, 0, 0, 0]);
    assert!(none.tenants[0].replay.as_ref().unwrap().placement.is_none());

    // Streams: hm_1 is stream 1, hm_0 stream 2; hm_0 writes first, so its stream opens first.
    let streams = run_checked(&scenario("[device.streams]\nstreams = 4", &t.path(), ", place_by = \"disk\""), 1_000);
    assert_eq!(host_bytes(&streams), [0, disk0, disk1, 0, 0]);
    let p = streams.device.placement.as_ref().unwrap();
    assert_eq!((p.events.streams_opened, p.events.streams_released), (2, 0));
    let replay = streams.tenants[0].replay.as_ref().unwrap().placement.as_ref().unwrap();
    assert_eq!((replay.values, replay.fdp_handles), (2, None));
}

/// More values than the drive has handles: the writes of the values past them carry their
/// placement identifiers, which the drive places through handle 0 and logs as Invalid Placement
/// Identifier events; the replay counts the same writes and the run's warnings say so.
#[test]
fn values_past_the_handles_are_invalid_placement_identifiers_and_a_warning() {
    let t = TempFile::new(
        "four-disks.csv",
        &msr(&interleave(vec![
            writes(0, 0, 4096, 100),
            writes(1, 1 << 28, 4096, 50),
            writes(2, 1 << 29, 8192, 30),
            writes(3, 3 << 28, 4096, 20),
        ])),
    );
    let r = run_checked(&scenario("[device.fdp]\nhandles = 2", &t.path(), ", place_by = \"disk\""), 1_000);
    let past = 30 + 20;
    assert_eq!(host_bytes(&r), [100 * 4096 + 30 * 8192 + 20 * 4096, 50 * 4096]);
    let p = r.device.placement.as_ref().unwrap();
    assert_eq!(p.events.invalid_placement_ids, past);
    let replay = r.tenants[0].replay.as_ref().unwrap().placement.as_ref().unwrap();
    assert_eq!((replay.values, replay.fdp_handles, replay.invalid_placement_writes), (4, Some(2), past));
    let w: Vec<&String> = r.warnings.iter().filter(|w| w.contains("place_by")).collect();
    assert_eq!(w.len(), 1, "{:?}", r.warnings);
    assert!(
        w[0].starts_with(
            "tenant 't': place_by = \"disk\" found 4 distinct values in the trace, but the drive's FDP has 2 placement handles (device.fdp.handles): 50 write(s)"
        ),
        "{}",
        w[0]
    );
}

/// With `select`, values are numbered within the selected stream: split by host and placed by
/// disk, host `hm`'s disks are 0 and 1 though another host's disk came first in the file.
#[test]
fn with_select_values_are_numbered_within_the_stream() {
    let mut reqs = vec![("prn", 0, true, 0, 4096)];
    reqs.extend(interleave(vec![writes(1, 0, 4096, 40), writes(0, 1 << 30, 4096, 60)]));
    let t = TempFile::new("select.csv", &msr(&reqs));
    let keys = ", tenant_by = \"host\", select = \"hm\", place_by = \"disk\"";
    let r = run_checked(&scenario("[device.fdp]\nhandles = 2", &t.path(), keys), 1_000);
    assert_eq!(host_bytes(&r), [40 * 4096, 60 * 4096]);
    assert_eq!(r.device.placement.as_ref().unwrap().events.invalid_placement_ids, 0);
    assert_eq!(r.tenants[0].replay.as_ref().unwrap().placement.as_ref().unwrap().values, 2);
}

/// What cannot place a trace's writes is refused when the scenario is loaded, naming the key
/// and what was expected.
#[test]
fn place_by_errors_are_clear() {
    let t = TempFile::new("errors.csv", &msr(&writes(0, 0, 4096, 4)));
    let fdp = "[device.fdp]\nhandles = 4";
    let keys = ", place_by = \"disk\"";
    let tenant = |keys: &str| format!("[[tenant]]\nname = \"t\"\ntrace = {{ path = \"{}\"{keys} }}\n", t.path());
    let cases: Vec<(String, &str)> = vec![
        (
            scenario(fdp, &t.path(), ", place_by = \"asu\""),
            "tenant[0] (t).trace.place_by: a msr trace has no asu field to place writes by; it has: none, host, disk",
        ),
        (scenario(fdp, &t.path(), ", place_by = \"lun\""), "tenant[0] (t).trace.place_by: unknown field 'lun': expected one of \"none\", \"device\""),
        (
            scenario("", &t.path(), keys),
            "tenant[0] (t).trace.place_by: the drive offers no data placement: add [device.fdp] or [device.streams]",
        ),
        (
            format!("[device]\npreset = \"null\"\n{}", tenant(keys)),
            "tenant[0] (t).trace.place_by: the drive offers no data placement",
        ),
        (
            format!("[device]\npreset = \"cosmos\"\n{}", tenant(keys)),
            "tenant[0] (t).trace.place_by: the drive offers no data placement",
        ),
        (
            format!("{}[virt]\nmode = \"per-vcpu-threads\"\n", scenario(fdp, &t.path(), keys)),
            "tenant 't': its trace places its writes (trace.place_by), but in a VM they reach the drive through virtio-blk, which carries no placement directive",
        ),
        (
            scenario(&format!("{fdp}\nper_tenant = true"), &t.path(), keys),
            "tenant[0] (t) (per_tenant): its trace places its own writes (place_by): give the tenant a placement or its trace one, not both",
        ),
        (
            scenario(fdp, &t.path(), keys).replace("name = \"t\"", "name = \"t\"\nplacement = 1"),
            "tenant[0] (t).placement: its trace places its own writes (place_by)",
        ),
    ];
    for (text, want) in cases {
        let e = load_err(&text);
        assert!(e.contains(want), "expected '{want}' in: {e}");
    }
    // The key is reported with the job's options and kept in the resolved spec.
    let s = Scenario::from_toml(&scenario(fdp, &t.path(), keys), "k.toml", Path::new(".")).unwrap();
    let Workload::Trace { spec, job } = &s.tenants[0].workload else { panic!("a trace tenant") };
    assert_eq!(spec.place, Some(flashmux::config::PlaceTarget::Fdp { handles: 4 }));
    assert!(job.job_options.contains(&("trace_place_by".into(), "disk".into())));
}
