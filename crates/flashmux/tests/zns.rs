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

/// fio's zoned examples with `zonemode=zbd`, end to end on a zoned drive of 256 MiB zones (the
/// examples' `zonesize`): 16 planes of 16 MiB blocks, 16 zones, 32 open and active (more than it has). The drive's
/// zone state machine is the oracle: fio's port must put every write at a write pointer and
/// keep within the limits, so the drive fails nothing; zones are reset as fio resets them,
/// each reset counted for the tenant and by the drive, and the drive never collects garbage.
/// (`zbd-rand-write-*-gc.fio` and `zbd-seq-read.fio` address zones 524 and on, past this
/// drive: the next test runs them on one that reaches that far.)
#[test]
fn fio_s_zbd_examples_run_on_a_zoned_drive_without_a_failed_command() {
    let dev = "seed = 1\n[device]\npreset = \"tlc-nvme-zns\"\n\
               [device.geometry]\nchannels = 2\nchips_per_channel = 2\ndies_per_chip = 2\nplanes_per_die = 2\npages_per_block = 1024\nblocks_per_plane = 16\n\
               [device.zns]\nzone_size = \"256MiB\"\nmax_open = 32\nmax_active = 32\n[stop]\ntime = \"12s\"\n";
    for (name, text, min_resets) in [
        ("zbd-rand-write.fio", include_str!("data/fio/zbd-rand-write.fio"), 1),
        ("uring-cmd-zoned.fio", include_str!("data/fio/uring-cmd-zoned.fio"), 0),
    ] {
        let scenario = format!("{dev}[[tenant]]\nname = \"t\"\nfio = '''\n{text}\n'''\n");
        let r = run_checked(&scenario, 50_000);
        let z = r.device.zns.as_ref().unwrap();
        assert!(z.errors.is_empty(), "{name}: {:?}", z.errors);
        assert!(r.jobs.iter().all(|j| j.errors == 0 && j.error == 0), "{name}");
        let t = r.tenants[0].zones.as_ref().unwrap();
        assert_eq!(t.resets, z.resets, "{name}: every reset is the tenant's");
        assert!(z.resets >= min_resets, "{name}: {} resets", z.resets);
        assert!(r.jobs.iter().map(|j| j.io.write.bytes).sum::<u64>() > 0, "{name}: wrote nothing");
        assert_eq!((r.device.ftl.gc_runs, r.device.ftl.gc_units_programmed), (0, 0), "{name}");
        assert!(z.peak_open <= z.zones);
    }
}

/// A host FTL on the zoned drive (`[host.zoned_ftl]`): 4 KiB random writes, trims and reads on
/// the conventional space it exports. Its GC is host I/O — reads of the victim zone, writes to
/// the GC zone, a Zone Reset — and the drive refuses none of it: every write lands at a write
/// pointer. The write amplification is the host's; the drive's stays 1.
#[test]
fn a_host_ftl_runs_random_writes_on_zones_with_gc_as_host_io() {
    let scenario = "seed = 1\n[device]\npreset = \"tlc-nvme-zns\"\n\
        [device.geometry]\nchannels = 2\nchips_per_channel = 2\ndies_per_chip = 2\nplanes_per_die = 2\npages_per_block = 64\nblocks_per_plane = 64\n\
        [device.zns]\nzone_size = \"16MiB\"\n[host.zoned_ftl]\nspare_zones = 6\n[stop]\ntime = \"6s\"\n\
        [[tenant]]\nname = \"rand\"\nfio = \"\"\"\n[r]\nrw=randrw\nrwmixread=20\nbs=4k\ndirect=1\niodepth=16\ntime_based\nruntime=6s\n\"\"\"\n\
        [[tenant]]\nname = \"trim\"\nfio = \"\"\"\n[t]\nrw=randtrim\nbs=64k\ndirect=1\niodepth=1\nrate_iops=50\ntime_based\nruntime=6s\n\"\"\"\n";
    let r = run_checked(scenario, 20_000);
    let z = r.device.zns.as_ref().unwrap();
    let h = r.host_ftl.as_ref().unwrap();
    assert!(z.errors.is_empty(), "{:?}", z.errors);
    // GC's resets are the host's own, not a tenant's.
    assert!(
        r.tenants
            .iter()
            .all(|t| t.zones.as_ref().is_some_and(|z| z.resets == 0)),
        "{:?}",
        r.tenants.iter().map(|t| &t.zones).collect::<Vec<_>>()
    );
    assert!(r.jobs.iter().all(|j| j.errors == 0));
    assert_eq!(h.logical_bytes, (64 - 6) * (16 << 20), "the zones beyond the spare ones");
    assert!(h.gc_runs > 10 && h.gc_units_moved > 0, "{h:?}");
    assert_eq!(z.resets, h.gc_runs - u64::from(h.gc_runs > z.resets), "a reset per GC job (the last may be under way)");
    let waf = (h.host_units + h.gc_units_moved) as f64 / h.host_units as f64;
    assert!(h.waf == Some(waf) && waf > 1.0, "{h:?}");
    assert_eq!((r.device.waf, r.device.ftl.gc_runs), (Some(1.0), 0), "the drive copies nothing");
    assert!(r.jobs[0].io.read.ios > 0 && r.jobs[1].io.trim.ios > 0);
}

/// fio's examples that address zones 524 and on (`zbd-rand-write-trim-gc.fio`,
/// `zbd-rand-write-zone-reset-gc.fio`, `zbd-seq-read.fio`), end to end on a drive of 660
/// zones of 256 MiB: each zone's capacity is 32 MiB (2 blocks in each of 16 planes, as a
/// ZN540's zone has less capacity than size), so the flash is 20.6 GiB. fio's port keeps
/// within the capacity and the open limits; the drive fails nothing. The trim job's trims and
/// the reset threshold's resets are the drive's resets; the sequential reader reads only what
/// a writer beside it has written (`read_beyond_wp=0`).
#[test]
fn fio_s_zbd_examples_past_zone_524_run_on_a_drive_that_reaches_them() {
    let dev = "seed = 1\n[device]\npreset = \"tlc-nvme-zns\"\n\
               [device.geometry]\nchannels = 2\nchips_per_channel = 2\ndies_per_chip = 2\nplanes_per_die = 2\npages_per_block = 64\nblocks_per_plane = 1320\n\
               [device.zns]\nzone_size = \"256MiB\"\nzone_capacity = \"32MiB\"\nmax_open = 32\nmax_active = 32\n[stop]\ntime = \"6s\"\n";
    let writer = "[w]\nzonemode=zbd\nzonesize=256M\ndirect=1\nrw=write\nbs=1m\noffset=524z\nsize=3z\n";
    for (name, text) in [
        ("zbd-rand-write-trim-gc.fio", include_str!("data/fio/zbd-rand-write-trim-gc.fio").to_string()),
        ("zbd-rand-write-zone-reset-gc.fio", include_str!("data/fio/zbd-rand-write-zone-reset-gc.fio").to_string()),
        ("zbd-seq-read.fio", format!("{writer}{}", include_str!("data/fio/zbd-seq-read.fio"))),
    ] {
        let scenario = format!("{dev}[[tenant]]\nname = \"t\"\nfio = '''\n{text}\n'''\n");
        let r = run_checked(&scenario, 50_000);
        let z = r.device.zns.as_ref().unwrap();
        assert_eq!(z.zones, 660, "{name}");
        assert!(z.errors.is_empty(), "{name}: {:?}", z.errors);
        assert!(r.jobs.iter().all(|j| j.errors == 0 && j.error == 0), "{name}");
        let written: u64 = r.jobs.iter().map(|j| j.io.write.bytes).sum();
        assert!(written > 0, "{name}: wrote nothing");
        assert_eq!(r.tenants[0].zones.as_ref().unwrap().resets, z.resets, "{name}");
        match name {
            "zbd-rand-write-trim-gc.fio" => {
                let trims: u64 = r.jobs.iter().map(|j| j.io.trim.ios).sum();
                assert!(trims > 0 && z.resets > 0, "{name}: {trims} trims, {} resets", z.resets);
            }
            "zbd-rand-write-zone-reset-gc.fio" => assert!(z.resets > 0, "{name}: no reset"),
            _ => {
                let read: u64 = r.jobs.iter().map(|j| j.io.read.bytes).sum();
                assert!(read > 0 && read <= written, "{name}: read {read} of {written} written");
            }
        }
        assert_eq!((r.device.ftl.gc_runs, r.device.ftl.gc_units_programmed), (0, 0), "{name}");
    }
}
