//! Data placement end to end (`[device.fdp]`, `[device.streams]`, `[[tenant]] placement`): what
//! mixing tenants' writes in the same blocks costs and what placement per tenant gives back,
//! the FDP log figures adding up, isolation under GC, and clear errors for what a drive cannot
//! place.

mod common;

use common::{load_err, run_checked};
use flashmux::metrics::RunResults;

/// Micron's FDP illustration, scaled to a 2 GiB `paper-c` drive: four sequential writers of
/// 4, 16, 64 and 256 KiB on their own quarters, each one's data overwritten at its own pace.
/// `device` is added to `[device]` (a placement section, or nothing).
fn four_writers(device: &str, time: &str) -> String {
    let mut s = format!(
        "seed = 1\n[device]\npreset = \"paper-c\"\ncapacity = \"2GiB\"\n{device}\n\
         [precondition]\nstate = \"sequential-fill\"\nfill = 1.0\n[stop]\ntime = \"{time}\"\n"
    );
    for bs in ["4k", "16k", "64k", "256k"] {
        s += &format!(
            "[[tenant]]\nname = \"s{bs}\"\nfio = \"\"\"\n[w]\nrw=write\nbs={bs}\niodepth=16\ndirect=1\ntime_based=1\nruntime=1h\n\"\"\"\n"
        );
    }
    s
}

fn waf(r: &RunResults) -> f64 {
    r.device.waf.unwrap()
}

/// Mixed in the same blocks, the slow writers' data stays valid in blocks the fast writer's
/// overwrites have mostly emptied, and GC moves it: WAF 1.49 here (Micron measured about 1.6
/// on a 7450 PRO). With a reclaim unit handle or a stream per tenant, each block holds one
/// writer's data, overwritten in the order it was written: no GC copies at all (Micron: 1.02).
#[test]
fn placement_per_tenant_separates_sequential_writers() {
    let none = run_checked(&four_writers("", "40s"), 50_000);
    let fdp = run_checked(&four_writers("[device.fdp]\nhandles = 4\nper_tenant = true", "40s"), 50_000);
    let streams = run_checked(&four_writers("[device.streams]\nstreams = 4\nper_tenant = true", "40s"), 50_000);
    assert!(waf(&none) > 1.3, "mixed writers: WAF {}", waf(&none));
    assert!(none.device.placement.is_none());
    for (name, r) in [("fdp", &fdp), ("streams", &streams)] {
        assert_eq!(r.device.ftl.gc_units_programmed, 0, "{name}: GC moved nothing");
        assert!(r.device.ftl.gc_runs > 1000, "{name}: GC ran (whole blocks of stale data)");
        let p = r.device.placement.as_ref().unwrap();
        assert_eq!(p.kind, name);
        // Each tenant's writes went through its own placement (FDP: handle i; streams: the
        // resource its stream i + 1 opened in order): the bytes it completed, and at most its
        // 16 writes in flight at the end more (the drive counts a write when it takes it).
        let first = usize::from(name == "streams");
        for (i, t) in r.tenants.iter().enumerate() {
            let (host, done) = (p.placements[first + i].host_bytes, t.io.write.bytes);
            assert!(host >= done && host - done <= 16 << (12 + 2 * i), "{name}: tenant {i}: {host} vs {done}");
            assert_eq!(t.gc_units_moved, 0);
        }
        assert_eq!(p.placements.iter().filter(|s| s.host_bytes == 0).count(), first, "{name}: no other placement written");
        // FDP's statistics: host bytes are the commands' bytes; media bytes every unit programmed.
        let host: u64 = p.placements.iter().map(|s| s.host_bytes).sum();
        assert_eq!(p.host_bytes_written, host);
        let f = &r.device.ftl;
        assert_eq!(p.media_bytes_written, (f.host_units_programmed + f.padding_units_programmed) * 4096);
        assert_eq!(p.media_bytes_erased, f.erases * 64 * 4096, "paper-c's blocks: 64 pages of 4 KiB");
        assert!(p.placements.iter().all(|s| s.waf.is_none_or(|w| w == 1.0)));
    }
    // Separated, the writers no longer share GC's cost: faster for all of them.
    let bw = |r: &RunResults| r.tenants.iter().map(|t| t.io.write.bytes).sum::<u64>();
    assert!(bw(&fdp) as f64 > 1.2 * bw(&none) as f64, "{} vs {}", bw(&fdp), bw(&none));
}

/// A noisy handle (random overwrites at depth 16) beside a quiet one (random overwrites at
/// 500 IOPS) on a full `paper-c` drive, `handle_type` as given.
fn noisy_and_quiet(handle_type: &str) -> String {
    format!(
        "seed = 1\n[device]\npreset = \"paper-c\"\ncapacity = \"2GiB\"\n[device.fdp]\nhandles = 2\nper_tenant = true\n\
         handle_type = \"{handle_type}\"\n[precondition]\nstate = \"sequential-fill\"\n[stop]\ntime = \"40s\"\n\
         [[tenant]]\nname = \"noisy\"\nfio = \"\"\"\n[w]\nrw=randwrite\nbs=4k\niodepth=16\ndirect=1\ntime_based=1\nruntime=1h\n\"\"\"\n\
         [[tenant]]\nname = \"quiet\"\nfio = \"\"\"\n[w]\nrw=randwrite\nbs=4k\niodepth=1\nrate_iops=500\ndirect=1\ntime_based=1\nruntime=1h\n\"\"\"\n"
    )
}

/// Initially isolated handles share GC's blocks: FDP's Media Reallocated counts every unit of
/// theirs GC moved. Persistently isolated handles keep what GC moved apart (the invariants check
/// each unit against its block, every 20,000 events): nothing is reallocated. Either way the
/// noisy handle's writes start most of the GC that moves the quiet one's data (`gc_moves`), and
/// the ledgers of handles and tenants agree.
#[test]
fn persistently_isolated_handles_keep_gc_copies_apart() {
    let ii = run_checked(&noisy_and_quiet("initially-isolated"), 20_000);
    let pi = run_checked(&noisy_and_quiet("persistently-isolated"), 20_000);
    let (pii, ppi) = (ii.device.placement.as_ref().unwrap(), pi.device.placement.as_ref().unwrap());
    assert!(ppi.placements.iter().all(|p| p.persistent) && pii.placements.iter().all(|p| !p.persistent));
    let moved = |p: &flashmux::device::PlacementReport, h: usize| p.placements[h].gc_units_moved;
    assert_eq!(pii.media_reallocated_units, moved(pii, 0) + moved(pii, 1));
    assert_eq!(ppi.media_reallocated_units, 0);
    assert!(moved(ppi, 1) > 0 && moved(pii, 1) > 0, "the quiet handle's data was moved under both");
    for p in [pii, ppi] {
        assert!(p.gc_moves[0][1] > p.gc_moves[1][1], "the noisy handle causes most of the quiet one's moves: {:?}", p.gc_moves);
        let caused: u64 = p.placements.iter().map(|s| s.gc_units_caused).sum();
        assert_eq!(caused, p.gc_moves.iter().flatten().sum::<u64>());
    }
    // The tenants' ledger says the same as the handles' (a handle per tenant; the few units
    // outside both regions, written by the fill as no tenant's, went through handle 0).
    for r in [&ii, &pi] {
        let p = r.device.placement.as_ref().unwrap();
        for (i, t) in r.tenants.iter().enumerate() {
            let unowned = if i == 0 { r.device.unowned_gc_units_moved } else { 0 };
            assert_eq!(t.gc_units_moved + unowned, p.placements[i].gc_units_moved, "tenant {i}");
            assert_eq!(t.gc_units_caused, p.placements[i].gc_units_caused, "tenant {i}");
        }
    }
}

/// The host's Reclaim Unit Handle Updates (`ru_update_every`): each handle's reclaim unit — a
/// block in each of `paper-c`'s 16 planes, 4 MiB — is switched after every 1 MiB written
/// through it, a quarter full, so updates are logged as *Reclaim Unit Not Fully Written*,
/// and the drive erases about four times the blocks for the same writes. GC reclaims the
/// early-closed blocks (the invariants check them, every 20,000 events), copying sequential
/// data it never copies without updates.
#[test]
fn reclaim_unit_updates_close_units_early() {
    let fdp = "[device.fdp]\nhandles = 4\nper_tenant = true";
    let plain = run_checked(&four_writers(fdp, "20s"), 20_000);
    let updated = run_checked(&four_writers(&format!("{fdp}\nru_update_every = \"1MiB\""), "20s"), 20_000);
    let (a, b) = (plain.device.placement.as_ref().unwrap(), updated.device.placement.as_ref().unwrap());
    assert_eq!((a.events.ruh_updates, a.events.ru_not_fully_written), (0, 0));
    assert!(a.placements.iter().all(|p| p.blocks_closed_early == 0));
    // One update per MiB written through each handle (its count runs on from the aging, which
    // writes nothing through commands: at most one more per handle).
    let due: u64 = b.placements.iter().map(|p| p.host_bytes >> 20).sum();
    assert!(b.events.ruh_updates.abs_diff(due) <= 4, "{} updates for {due} MiB", b.events.ruh_updates);
    // Nearly every update switches a unit about a quarter full; one that comes before any of
    // the last MiB has left the write buffer finds nothing written, and logs nothing.
    let (early, updates) = (b.events.ru_not_fully_written, b.events.ruh_updates);
    assert!(early <= updates && early as f64 >= 0.97 * updates as f64, "{early} of {updates}");
    for p in &b.placements[..4] {
        let updates = p.host_bytes >> 20;
        // A block in each of the 16 planes at most; most planes' blocks are partly written
        // (those just filled, or not yet reached by the buffer, are not).
        let closed = p.blocks_closed_early;
        assert!(closed <= 16 * (updates + 1) && closed as f64 >= 0.8 * 16.0 * updates as f64, "handle {}: {closed} blocks for {updates} updates", p.placement);
    }
    // A block now holds a quarter of what it held: four times the erases per byte written.
    let erased_per_byte = |p: &flashmux::device::PlacementReport| p.media_bytes_erased as f64 / p.host_bytes_written as f64;
    assert!(erased_per_byte(b) > 3.0 * erased_per_byte(a), "{} vs {}", erased_per_byte(b), erased_per_byte(a));
    // And it costs copies: without updates the sequential writers' data dies whole and GC
    // copies nothing; with them, the three unwritten quarters of each closed block are spare
    // space lost until GC erases the block, and GC, short of free blocks, takes blocks whose
    // data is not yet all stale.
    assert_eq!(plain.device.ftl.gc_units_programmed, 0);
    assert!(updated.device.ftl.gc_units_programmed > 0 && waf(&updated) > waf(&plain), "WAF {} vs {}", waf(&updated), waf(&plain));
}

/// What a drive cannot place is refused, naming the key and what was expected.
#[test]
fn placement_errors_are_clear() {
    let one = "[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[w]\nrw=write\nsize=1m\n\"\"\"\n";
    let two = format!("{one}[[tenant]]\nname = \"u\"\nfio = \"\"\"\n[w]\nrw=write\nsize=1m\n\"\"\"\n");
    let drive = |extra: &str, tenants: &str| format!("[device]\npreset = \"paper-c\"\ncapacity = \"2GiB\"\n{extra}\n{tenants}");
    let cases: Vec<(String, &str)> = vec![
        (drive("[device.fdp]\n[device.streams]", one), "device.fdp and device.streams: a drive with FDP enabled cannot enable Streams"),
        (drive("[device.fdp]\nhandles = 0", one), "device.fdp.handles: 0 reclaim unit handles: expected 1 to 256"),
        (drive("[device.fdp]\nhandles = 300", one), "expected 1 to 256"),
        (drive("[device.fdp]\nhandles = 4\npersistent = [4]", one), "device.fdp.persistent: handle 4: the drive has handles 0 to 3"),
        (drive("[device.fdp]\nhandle_type = \"persistently-isolated\"\npersistent = [1]", one), "handle_type and persistent both set"),
        (drive("[device.fdp]\nhandle_type = \"isolated\"", one), "handle_type"),
        (drive("[device.streams]\nstreams = 0", one), "device.streams.streams: 0 open streams: expected 1 to 255"),
        (drive("", &one.replace("name = \"t\"", "name = \"t\"\nplacement = 1")), "tenant[0] (t).placement: the drive offers no data placement: add [device.fdp] or [device.streams]"),
        (drive("[device.fdp]\nhandles = 2", &one.replace("name = \"t\"", "name = \"t\"\nplacement = 2")), "tenant[0] (t).placement: placement identifier 2: the drive's FDP has placement handles 0 to 1"),
        (drive("[device.streams]\nstreams = 2", &one.replace("name = \"t\"", "name = \"t\"\nplacement = 0")), "stream 0: expected a stream identifier from 1 to 65535"),
        (drive("[device.fdp]\nhandles = 1\nper_tenant = true", &two), "tenant[1] (u) (per_tenant): placement identifier 1: the drive's FDP has placement handles 0 to 0"),
        (drive("[device.streams]\nstreams = 1\nper_tenant = true", &two), "tenant[1] (u) (per_tenant): 2 tenants need a stream each, the drive keeps 1 open"),
        (drive("[device.fdp]\nper_tenant = true", &one.replace("name = \"t\"", "name = \"t\"\nplacement = 0")), "the drive's per_tenant already gives each tenant its placement: give one"),
        (format!("[device]\npreset = \"null\"\n[device.fdp]\n{one}"), "device.fdp: preset 'null' has no flash; remove this section"),
        (format!("[device]\npreset = \"cosmos\"\n[device.fdp]\n{one}"), "an open-channel drive's FTL runs on the host (pblk)"),
        (drive("[device.fdp]\nru_update_every = \"0\"", one), "device.fdp.ru_update_every: '0': expected a size above zero"),
        (drive("[device.streams]\nru_update_every = \"1MiB\"", one), "ru_update_every"),
    ];
    for (text, want) in cases {
        let e = load_err(&text);
        assert!(e.contains(want), "expected '{want}' in: {e}");
    }
}

/// fio's `examples/uring-cmd-fdp.fio`, as fio ships it.
const URING_CMD_FDP: &str = include_str!("data/fio/uring-cmd-fdp.fio");

/// fio's FDP example runs as it is on the FDP preset (scaled to 32 GiB, 300 ms of its 1000 s):
/// each job's writes go round robin through its placement IDs — write-heavy's four handles
/// take a quarter of its writes each, write-mid's two half of its, write-light's one all —
/// and handle 7, which no job names, takes none.
#[test]
fn fio_s_fdp_example_runs_as_it_is() {
    let dir = std::env::temp_dir().join(format!("flashmux-fdp-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("uring-cmd-fdp.fio"), URING_CMD_FDP).unwrap();
    let text = "[device]\npreset = \"tlc-nvme-fdp\"\ncapacity = \"32GiB\"\n[stop]\ntime = \"300ms\"\n\
                [[tenant]]\nname = \"fdp\"\nregion = \"whole\"\njob_file = \"uring-cmd-fdp.fio\"\n";
    let s = flashmux::config::Scenario::from_toml(text, "s.toml", &dir).unwrap();
    assert!(s.notes.iter().any(|n| n == "ioengine"), "{:?}", s.notes);
    let mut sim = flashmux::sim::Simulator::new(s).unwrap();
    sim.check_invariants_every(100_000);
    sim.run();
    let r = sim.finish();
    let p = r.device.placement.as_ref().unwrap();
    let bytes: Vec<u64> = p.placements.iter().map(|s| s.host_bytes).collect();
    let job = |name: &str| r.jobs.iter().find(|j| j.name == name).unwrap().io.write.bytes;
    let near = |got: u64, want: u64| got.abs_diff(want) <= 64 * 4096;
    for h in 0..4 {
        assert!(near(bytes[h] * 4, job("write-heavy")), "handle {h}: {bytes:?}");
    }
    assert!(near(bytes[4] * 2, job("write-mid")) && near(bytes[5] * 2, job("write-mid")), "{bytes:?}");
    assert!(near(bytes[6], job("write-light")), "{bytes:?}");
    assert_eq!(bytes[7], 0);
    assert!(job("write-light") > 0 && job("write-heavy") > 5 * job("write-light"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A job that names a placement ID the drive does not have is refused as fio refuses it; FDP
/// options on a drive without FDP, streams without stream IDs, and placement through a VM's
/// virtio disk likewise.
#[test]
fn fio_placement_options_are_checked_against_the_drive() {
    let job = |opts: &str| format!("[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[w]\nrw=write\nsize=1m\n{opts}\n\"\"\"\n");
    let fdp = "[device]\npreset = \"tlc-nvme-fdp\"\ncapacity = \"32GiB\"\n";
    let e = load_err(&format!("{fdp}{}", job("fdp=1\nplids=8")));
    assert!(e.contains("plids: PID index 8 must be smaller than 8"), "{e}");
    let e = load_err(&format!("[device]\npreset = \"tlc-nvme\"\ncapacity = \"16GiB\"\n{}", job("fdp=1")));
    assert!(e.contains("the drive has no FDP"), "{e}");
    let e = load_err(&format!("{fdp}{}", job("dataplacement=streams\nplids=1")));
    assert!(e.contains("the drive has no Streams directive"), "{e}");
    let streams = "[device]\npreset = \"tlc-nvme\"\ncapacity = \"16GiB\"\n[device.streams]\nstreams = 4\n";
    let e = load_err(&format!("{streams}{}", job("dataplacement=streams")));
    assert!(e.contains("stream IDs must be provided for dataplacement=streams"), "{e}");
    let e = load_err(&format!("{fdp}[device.fdp]\nper_tenant = true\n{}", job("fdp=1")));
    assert!(e.contains("job 'w' places its own writes (dataplacement): give the tenant a placement or its jobs one, not both"), "{e}");
    let e = load_err(&format!("{fdp}[virt]\nmode = \"per-vcpu-threads\"\n{}", job("fdp=1")));
    assert!(e.contains("virtio-blk, which carries no placement directive"), "{e}");
}

/// Streams named by a job open as they are written; with more streams than the drive keeps
/// open, the least recently written is released (round robin over 3 streams on a drive that
/// keeps 2 releases one on nearly every write).
#[test]
fn streams_beyond_the_drive_s_are_released() {
    let text = "[device]\npreset = \"paper-c\"\ncapacity = \"2GiB\"\n[device.streams]\nstreams = 2\n[stop]\ntime = \"1s\"\n\
                [[tenant]]\nname = \"t\"\nfio = \"\"\"\n[w]\nrw=write\nbs=4k\nsize=4m\ndataplacement=streams\nplids=7,9,11\n\"\"\"\n";
    let r = run_checked(text, 1_000);
    let p = r.device.placement.as_ref().unwrap();
    assert_eq!(p.events.streams_opened, 1024, "each 4 KiB write of the 4 MiB opens its stream");
    assert_eq!(p.events.streams_released, 1022);
    assert_eq!(p.placements[0].host_bytes, 0, "every write named a stream");
    assert_eq!(p.placements[1].host_bytes + p.placements[2].host_bytes, 4 << 20);
}
