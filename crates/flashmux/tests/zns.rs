//! Zoned drives end to end (`[device.zns]`, preset `tlc-nvme-zns`): ordinary fio jobs on zones,
//! what the drive refuses and how fio's jobs take it (`continue_on_error`), per-tenant zone
//! statistics, and no garbage collection.

mod common;

use common::run_checked;
use flashmux::metrics::RunResults;

const GIB: u64 = 1 << 30;

/// `tlc-nvme-zns` with 8 blocks per plane: 2 zones of 2 GiB, 1 GiB writable each.
fn drive(tenants: &str) -> String {
    format!("seed = 1\n[device]\npreset = \"tlc-nvme-zns\"\n[device.geometry]\nblocks_per_plane = 8\n[stop]\ntime = \"20s\"\n{tenants}")
}

fn tenant(name: &str, region: &str, fio: &str) -> String {
    format!("[[tenant]]\nname = \"{name}\"\nregion = {region}\nfio = \"\"\"\n[{name}]\ndirect=1\n{fio}\n\"\"\"\n")
}

fn full_errors(r: &RunResults, t: usize) -> u64 {
    r.tenants[t].zones.as_ref().unwrap().errors.get("Zone Is Full (B9h)").copied().unwrap_or(0)
}

/// A sequential writer over the whole namespace fills zone 0's capacity (1 GiB), then writes
/// at its end, which the full zone refuses: fio's job stops there with EIO, as fio does on a
/// zoned drive without zonemode=zbd. The drive ran no GC and programmed each unit once.
#[test]
fn a_sequential_writer_stops_at_the_first_full_zone() {
    let r = run_checked(&drive(&tenant("seq", "\"whole\"", "rw=write\nbs=1m\niodepth=4")), 20_000);
    let job = &r.jobs[0];
    assert_eq!((job.error, job.io.write.bytes), (5, GIB));
    // The job's 4 writes in flight at the first error all fail.
    assert!((1..=4).contains(&job.errors), "{} errors", job.errors);
    // The drive counts commands: the host splits each 1 MiB write into eight of 128 KiB (the
    // preset's largest request), and each fails.
    assert_eq!(full_errors(&r, 0), 8 * job.errors);
    let z = r.device.zns.as_ref().unwrap();
    assert_eq!((z.states["ZSF:Full"], z.states["ZSE:Empty"]), (1, 1));
    assert_eq!(r.device.ftl.gc_runs + r.device.ftl.gc_units_programmed, 0);
    assert_eq!(r.device.waf, Some(1.0));
}

/// With `continue_on_error=write` the job goes on: every write between a zone's capacity and
/// its end fails (1,024 of 1 MiB per zone), the next zone is written from its start, and the
/// job ends with both zones full.
#[test]
fn continue_on_error_writes_every_zone_to_its_capacity() {
    let r = run_checked(&drive(&tenant("seq", "\"whole\"", "rw=write\nbs=1m\niodepth=4\ncontinue_on_error=write")), 20_000);
    let job = &r.jobs[0];
    assert_eq!((job.error, job.errors, job.io.write.bytes), (5, 2048, 2 * GIB));
    assert_eq!(full_errors(&r, 0), 8 * 2048, "eight commands of 128 KiB per failed write");
    assert_eq!(r.device.zns.as_ref().unwrap().states["ZSF:Full"], 2);
    // What the run ended with still in the write buffer is not programmed yet; what is, once.
    assert!(r.device.ftl.host_units_programmed <= 2 * GIB / 4096);
    assert_eq!((r.device.waf, r.device.ftl.gc_runs), (Some(1.0), 0));
}

/// Two tenants on a zone each: the random writer's writes miss the write pointer (Zone Invalid
/// Write, counted for it alone) and it stops; the sequential writer fills its zone untouched.
#[test]
fn zone_errors_are_counted_per_tenant() {
    let t = tenant("seq", "{ offset = \"0\", size = \"1GiB\" }", "rw=write\nbs=128k\niodepth=2")
        + &tenant("rand", "{ offset = \"2GiB\", size = \"1GiB\" }", "rw=randwrite\nbs=4k\niodepth=1\nrandrepeat=1");
    let r = run_checked(&drive(&t), 20_000);
    let (seq, rand) = (r.tenants[0].zones.as_ref().unwrap(), r.tenants[1].zones.as_ref().unwrap());
    assert_eq!((r.jobs[0].error, r.jobs[0].io.write.bytes), (0, GIB));
    assert!(seq.errors.is_empty());
    assert_eq!(r.jobs[1].error, 5);
    assert_eq!(rand.failed(), rand.errors["Zone Invalid Write (BCh)"]);
    assert!(rand.failed() >= 1);
    // What rand wrote before its first miss (a random offset may be the write pointer).
    assert_eq!(r.jobs[1].io.write.bytes % 4096, 0);
}
