//! Filebench workloads on ext4 end to end (`filebench = ...`): each thread's calls through its
//! kernel's page cache and filesystem, down to the device requests they make.

mod common;

use common::{load_err, run_checked, scenario};
use flashmux::config::Workload;
use flashmux::device::IoOp;
use flashmux::metrics::RunResults;
use flashmux::report::fio_json;
use flashmux::sim::{DispatchSink, FilebenchResult, Simulator};
use flashmux::units::{SimTime, TenantId};
use std::sync::{Arc, Mutex};

type Sent = Arc<Mutex<Vec<(IoOp, u64, u64)>>>;

struct Record(Sent);

impl DispatchSink for Record {
    fn dispatched(&mut self, _: SimTime, _: TenantId, op: IoOp, offset: u64, len: u64) {
        self.0.lock().unwrap().push((op, offset, len));
    }
}

/// A null device answering in 100 us, ext4 and a 16 MiB page cache, a 1 GiB tenant running
/// `wml`, for `time`.
fn with_workload(time: &str) -> String {
    with_options(time, "")
}

/// As [`with_workload`], with more `[kernel]` keys.
fn with_options(time: &str, kernel: &str) -> String {
    format!(
        "[device]\npreset = \"null\"\n[device.null]\nlatency = \"100us\"\n\
         [kernel]\nfilesystem = \"ext4\"\n{kernel}[kernel.pagecache]\ncapacity = \"16MiB\"\n\
         [stop]\ntime = \"{time}\"\n\
         [[tenant]]\nname = \"fb\"\nregion = {{ offset = \"0\", size = \"1GiB\" }}\nfilebench = \"w.f\"\n"
    )
}

/// Runs `wml` (written to a scratch file) checking invariants after every event.
fn run_wml(wml: &str, time: &str) -> (RunResults, Vec<(IoOp, u64, u64)>) {
    run_wml_with(wml, time, "")
}

fn run_wml_with(wml: &str, time: &str, kernel: &str) -> (RunResults, Vec<(IoOp, u64, u64)>) {
    let dir =
        std::env::temp_dir().join(format!("flashmux-fb-{}-{:x}", std::process::id(), wml.len() * 31 + time.len()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("w.f"), wml).unwrap();
    let s = flashmux::config::Scenario::from_toml(&with_options(time, kernel), "s.toml", &dir).unwrap();
    let sent = Sent::default();
    let mut sim = Simulator::new(s).unwrap();
    sim.record_dispatches(Box::new(Record(sent.clone())));
    sim.check_invariants_every(1);
    sim.run();
    let r = sim.finish();
    std::fs::remove_dir_all(&dir).ok();
    let sent = sent.lock().unwrap().clone();
    (r, sent)
}

fn flowops(r: &RunResults) -> &FilebenchResult {
    &r.filebench[0]
}

/// Each flowop's completed executions, in order.
fn ops(r: &RunResults) -> Vec<u64> {
    flowops(r).stats.flowops.iter().map(|f| f.ops).collect()
}

const ONE_FILE: &str = "define fileset name=fs,path=/t,size=4k,entries=1,dirwidth=1,prealloc=0,filesizegamma=0\n";

/// One thread's loop on [`ONE_FILE`]: create the file, append `append` bytes, fsync it (if
/// `fsync`), close and delete it.
fn create_append_delete(append: &str, fsync: bool) -> String {
    let sync = if fsync { "flowop fsync name=s,fd=1\n" } else { "" };
    format!(
        "{ONE_FILE}define process name=p {{ thread name=t {{
flowop createfile name=c,filesetname=fs,fd=1
flowop appendfile name=a,fd=1,iosize={append}
{sync}flowop closefile name=x,fd=1
flowop deletefile name=d,filesetname=fs }} }}
run 10"
    )
}

#[test]
fn a_create_append_fsync_loop_commits_the_create_with_the_data() {
    // Each loop creates the file, appends 4 KiB, fsyncs, closes and deletes it. Each fsync
    // writes the page, then commits the transaction holding the create's (and the previous
    // delete's) metadata: the journal's blocks, a flush, the commit block, a flush.
    let wml = create_append_delete("4k", true);
    let (r, sent) = run_wml(&wml, "20ms");
    let o = ops(&r);
    assert!(o[0] >= 10, "{o:?}");
    assert!(o.iter().all(|&n| n == o[0] || n + 1 == o[0]), "the loop's flowops run in turn: {o:?}");
    let commits = o[2] as usize;
    assert!(sent.len() >= commits * 5, "{}", sent.len());
    for (i, c) in sent.chunks(5).take(commits).enumerate() {
        let shape: Vec<IoOp> = c.iter().map(|s| s.0).collect();
        assert_eq!(shape, [IoOp::Write, IoOp::Write, IoOp::Flush, IoOp::Write, IoOp::Flush], "fsync {i}: {c:?}");
        assert_eq!(c[0].2, 4096, "the appended page");
        // A descriptor and at least the inode bitmap, inode table, directory and block bitmap.
        assert!(c[1].2 >= 5 * 4096, "fsync {i}: {} bytes logged", c[1].2);
        assert_eq!(c[3].1, c[1].1 + c[1].2, "the commit block follows the logged blocks");
    }
    let k = &r.kernel.as_ref().unwrap()[0];
    let j = &k.filesystems[0].journal;
    // Every fsync has the create's metadata to commit (the last may be out when the run stops).
    assert!((o[2]..=o[2] + 1).contains(&j.commits_fsync), "{} commits, {o:?}", j.commits_fsync);
    // A create takes its CPU time (`[kernel.calls]`) after it has made the file: one may be
    // under way at the stop.
    let made = k.filesystems[0].fs.files;
    assert!((o[0] - o[4]..=o[0] - o[4] + 1).contains(&made), "{made} files, {o:?}: created and not deleted");
    // The filesystem's requests are everything sent: per fsync the data page, and the
    // journal's two writes and two flushes (the last commit may be under way at the stop).
    let q = &k.filesystems[0].requests;
    let c = j.commits_fsync;
    let count = |op: IoOp| sent.iter().filter(|s| s.0 == op).count() as u64;
    assert_eq!(
        (q.data_writes + q.journal_writes, q.flushes, q.data_reads, q.trims),
        (count(IoOp::Write), count(IoOp::Flush), 0, 0)
    );
    assert!((c..=c + 1).contains(&q.data_writes), "{} data writes, {c} commits", q.data_writes);
    assert!((2 * c - 1..=2 * c).contains(&q.journal_writes) && (2 * c - 2..=2 * c).contains(&q.flushes), "{q:?}");
    // The jobs' statistics: the appends as writes, the fsyncs as syncs.
    let io = &r.jobs[0].io;
    assert_eq!((io.write.ios, io.write.bytes, io.sync.count()), (o[1], o[1] * 4096, o[2]));
    // Every completed request is an I/O, a sync or one of the calls that move no data (create,
    // close, delete: three per loop).
    let f = flowops(&r);
    assert_eq!(r.requests_completed, io.write.ios + io.sync.count() + f.metadata_calls);
    assert_eq!(f.metadata_calls, o[0] + o[3] + o[4]);
}

#[test]
fn with_discard_a_deleted_files_blocks_are_trimmed_once_its_delete_commits() {
    // Each loop: create, 64 KiB appended, fsync, close, delete. An fsync commits the previous
    // loop's delete with this loop's create: after that commit, the deleted file's 16 blocks
    // (one extent) are trimmed; without `discard` nothing is.
    let wml = create_append_delete("64k", true);
    let (r, sent) = run_wml_with(&wml, "10ms", "discard = true\n");
    let trims: Vec<u64> = sent.iter().filter(|s| s.0 == IoOp::Trim).map(|s| s.2).collect();
    let o = ops(&r);
    assert!(trims.len() as u64 + 2 >= o[2] && trims.len() as u64 <= o[2] && o[2] > 10, "{} trims, {o:?}", trims.len());
    assert!(trims.iter().all(|&len| len == 65536), "{trims:?}");
    let k = &r.kernel.as_ref().unwrap()[0];
    let d = k.filesystems[0].discard.expect("mounted with discard");
    assert_eq!(
        (d.trims, d.trim_blocks, k.device.trims),
        (trims.len() as u64, 16 * trims.len() as u64, trims.len() as u64)
    );
    let (plain, sent) = run_wml(&wml, "10ms");
    assert!(
        sent.iter().all(|s| s.0 != IoOp::Trim) && plain.kernel.as_ref().unwrap()[0].filesystems[0].discard.is_none()
    );
}

#[test]
fn deleting_a_file_drops_its_dirty_pages_unwritten() {
    // 64 KiB appended, the file closed and deleted, with no fsync: before the flusher's first
    // expiry (30 s) and the journal's first commit (5 s), nothing reaches the device.
    let wml = create_append_delete("64k", false);
    let (r, sent) = run_wml(&wml, "10ms");
    assert!(sent.is_empty(), "{sent:?}");
    let o = ops(&r);
    let k = &r.kernel.as_ref().unwrap()[0];
    // 16 dirty pages dropped per delete issued (the last may not have returned yet).
    let deletes = k.page_cache.truncated_dirty / 16;
    assert_eq!(k.page_cache.truncated_dirty % 16, 0);
    assert!((o[3]..=o[3] + 1).contains(&deletes) && o[3] > 100, "{deletes} deletes, {o:?}");
    assert_eq!(k.dirty_pages, 16 * (o[1] - deletes), "the appends not deleted yet are dirty");
}

#[test]
fn a_file_made_before_the_run_is_read_from_the_device_once() {
    // One 64 KiB file, there before the run, read whole in 16 KiB calls again and again: the
    // first read misses and reads the file (read-ahead stops at its end); the rest hit.
    let wml = "define fileset name=fs,path=/t,size=64k,entries=1,dirwidth=1,prealloc=100,filesizegamma=0
define process name=p { thread name=t {
flowop openfile name=o,filesetname=fs,fd=1
flowop readwholefile name=r,fd=1,iosize=16k
flowop closefile name=x,fd=1 } }
run 10";
    let (r, sent) = run_wml(wml, "5ms");
    let reads: u64 = sent.iter().filter(|s| s.0 == IoOp::Read).map(|s| s.2).sum();
    assert_eq!(reads, 65536, "{sent:?}");
    let o = ops(&r);
    assert!(o[1] > 10, "{o:?}");
    // Each whole read is four calls of 16 KiB; the last may have been cut short by the stop.
    let f = &flowops(&r).stats.flowops[1];
    let read = &r.jobs[0].io.read;
    assert_eq!(read.bytes, f.bytes);
    assert!((f.ops * 65536..(f.ops + 1) * 65536).contains(&f.bytes), "{} bytes in {} reads", f.bytes, f.ops);
    assert_eq!(read.ios, f.bytes / 16384);
    assert_eq!(flowops(&r).stats.filesets[0].existing, 1);
}

#[test]
fn the_standard_personalities_run_on_ext4_and_are_deterministic() {
    for name in ["varmail", "fileserver", "webproxy"] {
        let text = format!(
            "[device]\npreset = \"null\"\n[device.null]\nlatency = \"50us\"\n\
             [kernel]\nfilesystem = \"ext4\"\n[kernel.pagecache]\ncapacity = \"64MiB\"\n\
             [stop]\ntime = \"30ms\"\n\
             [[tenant]]\nname = \"{name}\"\nregion = {{ offset = \"0\", size = \"1GiB\" }}\npersonality = \"{name}\"\n\
             filebench_set = {{ nfiles = 200, nthreads = 4 }}\n"
        );
        let s = scenario(&text);
        let Workload::Filebench { spec, jobs } = &s.tenants[0].workload else {
            panic!("{name} on ext4 is Filebench's")
        };
        assert_eq!(spec.source, format!("<personality {name}>"));
        assert_eq!(jobs[0].numjobs, 4, "nthreads set to 4");
        let r = run_checked(&text, 7);
        let f = flowops(&r);
        assert_eq!(f.stats.filesets[0].entries, 200, "nfiles set to 200");
        // Every flowop ran but the limits, which do nothing here.
        assert!(f.stats.flowops.iter().all(|o| o.ops > 0 || o.kind == "opslimit"), "{name}: {:?}", f.stats.flowops);
        let again = run_checked(&text, 1_000_000);
        let json = |r: &RunResults| serde_json::to_string(&fio_json(r, false)).unwrap();
        assert_eq!(json(&r), json(&again), "{name}: checking invariants changes nothing, and runs repeat");
    }
}

#[test]
fn without_a_filesystem_a_personality_is_its_block_level_imitation() {
    let s = scenario("[device]\npreset = \"null\"\n[[tenant]]\nname = \"m\"\npersonality = \"varmail\"\n");
    assert!(matches!(s.tenants[0].workload, Workload::Fio(_)));
}

#[test]
fn bad_filebench_tenants_are_clear_errors() {
    let dev = "[device]\npreset = \"null\"\n";
    let ext4 = "[kernel]\nfilesystem = \"ext4\"\n";
    let e = load_err(&format!("{dev}[[tenant]]\nname = \"a\"\nfilebench = \"varmail\"\n"));
    assert!(e.contains("tenant[0] (a).filebench") && e.contains("filesystem = \"ext4\""), "{e}");
    let e = load_err(&format!("{dev}{ext4}[[tenant]]\nname = \"a\"\nfilebench = \"oltp\"\n"));
    assert!(e.contains("unknown workload 'oltp'") && e.contains("fileserver, varmail, webproxy"), "{e}");
    let e = load_err(&format!("{dev}{ext4}[[tenant]]\nname = \"a\"\nfilebench = \"varmail\"\nfio = \"[x]\"\n"));
    assert!(e.contains("give only one of"), "{e}");
    let e = load_err(&format!(
        "{dev}{ext4}[[tenant]]\nname = \"a\"\nfilebench = \"varmail\"\nfilebench_set = {{ nfile = 5 }}\n"
    ));
    assert!(e.contains("filebench_set.nfile: the workload has no variable $nfile"), "{e}");
    let e = load_err(&format!(
        "{dev}{ext4}[[tenant]]\nname = \"a\"\nfilebench = \"varmail\"\nfilebench_set = {{ nfiles = -5 }}\n"
    ));
    assert!(e.contains("filebench_set.nfiles: expected a non-negative integer"), "{e}");
    let e = load_err(&format!("{dev}{ext4}[[tenant]]\nname = \"a\"\nfilebench = \"missing.f\"\n"));
    assert!(e.contains("cannot read") && e.contains("missing.f"), "{e}");
    let e = load_err(&format!(
        "{dev}[[tenant]]\nname = \"a\"\npersonality = \"varmail\"\nfilebench_set = {{ nfiles = 5 }}\n"
    ));
    assert!(e.contains("filebench_set: needs a Filebench workload"), "{e}");
}

#[test]
fn a_workload_file_with_a_bad_or_unmodelled_line_names_it() {
    let dir = std::env::temp_dir().join(format!("flashmux-fb-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let load = |wml: &str| {
        std::fs::write(dir.join("w.f"), wml).unwrap();
        let text = with_workload("1s");
        match flashmux::config::Scenario::from_toml(&text, "s.toml", &dir) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("loaded"),
        }
    };
    let e = load("define fileset name=fs,path=/t,size=4k,entries=2,dirwidth=1\ndefine process name=p {\n thread name=t {\n flowop hog name=h,value=3\n } }\nrun 1\n");
    assert!(e.contains("w.f") && e.contains("line 4: flowop h (hog): CPU work (hog) is not modelled"), "{e}");
    let e = load("define fileset name=fs,path=/t,size=4k,entries=2,dirwidth=1\ndefine process name=p {\n thread name=t {\n flowop frobnicate name=h\n } }\n");
    assert!(e.contains("w.f:4"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_full_filesystem_fails_the_write_and_stops_its_thread() {
    // One file appended 1 MiB at a time, never deleted, on a 128 MiB region: once the free
    // blocks less those kept for metadata (2%: 655 blocks) cannot cover the next append, it fails
    // with ENOSPC, its thread stops, and the run ends with every job done and a warning.
    let wml = "define fileset name=fs,path=/t,size=4k,entries=1,dirwidth=1,prealloc=100
define process name=p { thread name=t {
flowop openfile name=o,filesetname=fs,fd=1
flowop appendfile name=a,fd=1,iosize=1m
flowop fsync name=s,fd=1
flowop closefile name=c,fd=1 } }
run 10";
    let dir = std::env::temp_dir().join(format!("flashmux-fb-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("w.f"), wml).unwrap();
    let text = with_workload("5s").replace("size = \"1GiB\"", "size = \"128MiB\"");
    let s = flashmux::config::Scenario::from_toml(&text, "s.toml", &dir).unwrap();
    let mut sim = Simulator::new(s).unwrap();
    sim.check_invariants_every(1);
    sim.run();
    let r = sim.finish();
    std::fs::remove_dir_all(&dir).ok();
    let f = flowops(&r);
    assert_eq!(f.enospc, 1);
    let a = &f.stats.flowops[1];
    assert_eq!(a.failed, 1);
    assert!(a.ops > 90 && a.ops < 128, "{} MiB appended in a 128 MiB filesystem", a.ops);
    assert_eq!(r.stop_reason, flashmux::metrics::StopReason::AllJobsDone);
    assert!(r.warnings.iter().any(|w| w.contains("filled up (ENOSPC)")), "{:?}", r.warnings);
    let fs = &r.kernel.as_ref().unwrap()[0].filesystems[0].fs;
    assert!(fs.free_blocks < 1024 + 655, "free {}", fs.free_blocks);
}

#[test]
fn a_metadata_call_returns_after_its_cpu_time() {
    // One thread stats one file (made before the run) again and again: no I/O, so each stat's
    // latency is `[kernel.calls]`'s `stat` and the host's per-request overheads, which do not
    // change between the two runs: exactly 20 us more per stat at 30 us than at 10 us.
    let wml = "define fileset name=fs,path=/t,size=4k,entries=1,dirwidth=1,prealloc=100,filesizegamma=0
define process name=p { thread name=t { flowop statfile name=s,filesetname=fs } }
run 10";
    let mean = |stat: &str| {
        let (r, sent) = run_wml_with(wml, "10ms", &format!("[kernel.calls]\nstat = \"{stat}\"\n"));
        assert!(sent.is_empty(), "{sent:?}");
        let s = &flowops(&r).stats.flowops[0];
        assert!(s.ops > 100 && s.skipped == 0, "{s:?}");
        s.latency_ns / s.ops
    };
    let (fast, slow) = (mean("10us"), mean("30us"));
    assert_eq!(slow - fast, 20_000, "{fast} ns, then {slow} ns per stat");
    assert!(fast >= 10_000, "{fast} ns");
}
