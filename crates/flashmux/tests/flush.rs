//! fio's `fsync`, `fdatasync` and `end_fsync` end to end: how many syncs a job issues and when,
//! that a sync is serialised with the job's other I/O, and what a flush costs on a drive whose
//! write buffer is volatile or protected, on bare metal, in a VM and on the null device.

mod common;

use common::{run_checked, scenario};
use flashmux::device::Backend;
use flashmux::metrics::RunResults;
use flashmux::report::fio_json;
use flashmux::sim::{Progress, Simulator};

/// Paper C's timing (tPROG 550 us) on 64 MiB of flash, 4 KiB pages: every write is a full page.
fn paper_c(volatile: bool) -> String {
    format!(
        "[device]\npreset = \"paper-c\"\n[device.geometry]\nchannels = 4\nchips_per_channel = 1\nblocks_per_plane = 64\n\
         [device.ftl]\noverprovisioning = 0.15\n[device.buffer]\nsize = \"256KiB\"\nvolatile_write_cache = {volatile}\n"
    )
}

/// The TLC drive on two channels of two dies of four planes (16 planes), 1 GiB: 16 KiB pages of
/// four units, so 4 KiB random writes leave partly filled pages in the buffer.
const TLC_VOLATILE: &str = "[device]\npreset = \"tlc-nvme\"\ncapacity = \"1GiB\"\n\
    [device.geometry]\nchannels = 2\nchips_per_channel = 1\ndies_per_chip = 2\nplanes_per_die = 4\npages_per_block = 128\n\
    [device.ftl]\noverprovisioning = 0.3\n\
    [device.buffer]\nsize = \"4MiB\"\nvolatile_write_cache = true\n";

fn tenant(name: &str, fio: &str) -> String {
    format!("[[tenant]]\nname = \"{name}\"\nfio = \"\"\"\n[{name}]\n{fio}\n\"\"\"\n")
}

/// Runs one job, checking invariants every `every` events.
fn run_every(device: &str, fio: &str, every: u64) -> RunResults {
    run_checked(&format!("{device}{}", tenant("j", fio)), every)
}

/// On the small paper C drive invariants are checked after every event.
fn run(device: &str, fio: &str) -> RunResults {
    run_every(device, fio, 1)
}

fn run_tlc(fio: &str) -> RunResults {
    run_every(TLC_VOLATILE, fio, 500)
}

const FSYNC_4: &str = "rw=randwrite\nbs=4k\niodepth=8\nsize=1m\nfsync=4";

#[test]
fn fsync_every_fourth_write_at_iodepth_8() {
    // Invariants every event: a sync is the job's only I/O in flight, and each waiting flush
    // counts exactly the buffered data that arrived before it.
    let r = run(&paper_c(true), FSYNC_4);
    let io = &r.jobs[0].io;
    assert_eq!(io.write.ios, 256);
    // After writes 4, 8, ..., 252: fio leaves a volume-limited job's loop once its last write
    // (the 256th) is issued, so no sync follows that one.
    assert_eq!(io.sync.count(), 63);
    assert_eq!(r.device.flushes, 63);
    assert_eq!(r.requests_completed, 256 + 63);
}

#[test]
fn fsync_and_fdatasync_periods_combine() {
    // Syncs after every write k < 100 with k % 4 == 0 or k % 6 == 0: 24 + 16 - 8.
    let r = run(&paper_c(false), "rw=write\nbs=4k\niodepth=2\nsize=400k\nfsync=4\nfdatasync=6");
    assert_eq!(r.jobs[0].io.write.ios, 100);
    assert_eq!(r.jobs[0].io.sync.count(), 32);
}

#[test]
fn a_sync_costs_a_program_with_a_volatile_cache_and_the_command_only_without() {
    let slow = run(&paper_c(true), FSYNC_4);
    let fast = run(&paper_c(false), FSYNC_4);
    let (slow, fast) = (&slow.jobs[0].io.sync, &fast.jobs[0].io.sync);
    // The fourth write's program (tPROG 550 us) has just started when its sync arrives.
    assert!(slow.min() > 400_000, "volatile: {} ns", slow.min());
    // Protected: command overhead 0.5 us + completion 1.5 us, every time.
    assert_eq!((fast.min(), fast.max()), (2_000, 2_000));
}

/// Every time a flush completes, the job's data must be on flash: with its only I/O in flight
/// the sync, nothing it wrote may still be waiting in the buffer.
#[test]
fn each_sync_completes_with_the_job_data_on_flash() {
    let text = format!("{TLC_VOLATILE}{}", tenant("j", "rw=randwrite\nbs=4k\niodepth=8\nsize=2m\nfsync=6"));
    let mut sim = Simulator::new(scenario(&text)).unwrap();
    let mut seen = 0;
    while sim.run_for(1) == Progress::Running {
        if sim.device().flushes_completed() > seen {
            seen += 1;
            let Backend::Ssd(ssd) = sim.device().backend() else { unreachable!() };
            assert_eq!(ssd.buffered_dirty_units(), 0, "flush {seen} completed with data in the buffer");
        }
    }
    let r = sim.finish();
    assert_eq!(seen, 511 / 6);
    assert!(r.device.ssd.flush_padded_pages > 0, "4 KiB writes leave partly filled pages to pad");
    assert!(r.device.ftl.padding_units_programmed >= r.device.ssd.flush_padded_pages);
}

#[test]
fn end_fsync_syncs_once_when_the_writes_end() {
    let fio = "rw=randwrite\nbs=4k\niodepth=4\nsize=256k";
    let without = run_tlc(fio);
    let with = run_tlc(&format!("{fio}\nend_fsync=1"));
    let dirty = |r: &RunResults| r.device.ftl.host_units_programmed < r.jobs[0].io.write.ios;
    assert!(dirty(&without), "without a sync, partly filled pages stay in the buffer");
    assert_eq!(without.device.flushes, 0);
    assert_eq!(with.device.flushes, 1);
    assert!(!dirty(&with), "end_fsync programs everything");
    // fio does not account the end-of-job sync (its TD_FSYNCING state).
    assert_eq!(with.jobs[0].io.sync.count(), 0);
    // The job ends when the sync does, a program later.
    assert!(with.jobs[0].runtime_ns > without.jobs[0].runtime_ns + 700_000);
    // A job that does not write does not sync.
    let reader = run_tlc("rw=randread\nbs=4k\nsize=64k\nend_fsync=1\nfsync=1");
    assert_eq!(reader.device.flushes, 0);
}

#[test]
fn end_fsync_follows_a_time_based_job_and_no_sync_starts_after_its_runtime() {
    let r = run(&paper_c(true), "rw=randwrite\nbs=4k\niodepth=4\ntime_based\nruntime=20ms\nfsync=8\nend_fsync=1");
    let syncs = r.jobs[0].io.sync.count();
    assert!(syncs > 0);
    // The periodic syncs, plus at most one at the end (none if the last I/O was itself a sync).
    assert!(r.device.flushes == syncs || r.device.flushes == syncs + 1, "{} vs {syncs}", r.device.flushes);
}

#[test]
fn syncs_travel_through_a_vm_like_other_requests() {
    let vm = "[host.cpu]\ncores = 4\nthreads_per_core = 2\n[virt]\nmode = \"dataplane\"\nvcpus = 2\n";
    let bare = run(&paper_c(false), FSYNC_4);
    let r = run(&format!("{}{vm}", paper_c(false)), FSYNC_4);
    assert_eq!(r.jobs[0].io.sync.count(), 63);
    assert_eq!(r.device.flushes, 63);
    assert!(r.virt.is_some());
    // The virtqueue, I/O thread and interrupt path cost a sync what they cost a write.
    assert!(r.jobs[0].io.sync.mean() > bare.jobs[0].io.sync.mean() + 5_000.0);
}

#[test]
fn null_device_completes_syncs_after_its_command_time() {
    let r = run("[device]\npreset = \"null\"\n", "rw=write\nbs=4k\niodepth=4\nnumber_ios=40\nfsync=4");
    let sync = &r.jobs[0].io.sync;
    assert_eq!(sync.count(), 9);
    // Command fetch 1 us + completion 1.5 us.
    assert_eq!((sync.min(), sync.max()), (2_500, 2_500));
}

#[test]
fn runs_with_syncs_are_deterministic() {
    let text = format!(
        "{TLC_VOLATILE}{}{}",
        tenant("a", "rw=randwrite\nbs=4k\niodepth=8\nsize=1m\nfsync=3"),
        tenant("b", "rw=randrw\nbs=4k\niodepth=4\nsize=1m\nfdatasync=5\nend_fsync=1")
    );
    let a = serde_json::to_string(&fio_json(&run_checked(&text, 1_000), true)).unwrap();
    let b = serde_json::to_string(&fio_json(&run_checked(&text, 1_000), true)).unwrap();
    assert_eq!(a, b);
    assert!(a.contains("\"flushes\""));
}
