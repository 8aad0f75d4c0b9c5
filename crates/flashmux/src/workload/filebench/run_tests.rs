//! The runner's flowop semantics, call by call.

use super::run::*;
use super::{parse_wml, personality};
use crate::engine::rng_for;

fn runner(text: &str) -> Runner {
    let w = parse_wml(text, "w.f").unwrap_or_else(|e| panic!("{e}")).workload;
    Runner::new(&w, rng_for(1, "filebench")).unwrap_or_else(|e| panic!("{e}"))
}

/// Thread `t`'s next `n` calls, each returning 1 ns after it was made (a read or write moving
/// its length).
fn calls(r: &mut Runner, t: u32, n: usize, now: &mut u64) -> Vec<Call> {
    let mut out = Vec::new();
    while out.len() < n {
        match r.next(t, *now) {
            Step::Call(c) => {
                *now += 1;
                r.returned(t, *now, Some(c), c.len);
                out.push(c);
            }
            Step::Sleep(ns) => {
                *now += ns;
                r.returned(t, *now, None, 0);
            }
        }
        r.check_invariants();
    }
    out
}

fn kinds(c: &[Call]) -> Vec<CallKind> {
    c.iter().map(|c| c.kind).collect()
}

const ONE_FILE: &str = "define fileset name=fs,path=/t,size=1m,entries=4,dirwidth=10,prealloc=100,filesizegamma=0
define process name=p { thread name=t { ";

#[test]
fn varmail_makes_its_calls_in_order() {
    let mut r = runner(personality("varmail").unwrap());
    let mut now = 0;
    let c = calls(&mut r, 0, 12, &mut now);
    use CallKind::*;
    // delete; create, append, fsync, close; open, reads of the whole file, append, fsync, close...
    assert_eq!(kinds(&c[..5]), [Delete, Create, Write, Fsync, Close]);
    assert_eq!(c[2].entry, c[1].entry, "the append goes to the file created");
    assert_eq!(c[2].offset, 0, "a new file's append is at 0");
    assert!(c[2].len <= 16 * 1024);
    assert_eq!(c[5].kind, Open);
    assert_ne!(c[5].entry, c[1].entry, "the closed file may be picked again, but the draw differs here");
}

#[test]
fn whole_file_writes_follow_filebench_loop() {
    // A 1.5 MiB entry written with iosize 1m: Filebench's loop writes 1 MiB twice (2 MiB).
    let text = format!(
        "define fileset name=fs,path=/t,size=1536k,entries=2,dirwidth=10,prealloc=0,filesizegamma=0
define process name=p {{ thread name=t {{
flowop createfile name=c,filesetname=fs,fd=1
flowop writewholefile name=w,srcfd=1,fd=1,iosize=1m
flowop closefile name=x,fd=1 }} }}
run 1"
    );
    let mut r = runner(&text);
    let mut now = 0;
    let c = calls(&mut r, 0, 4, &mut now);
    use CallKind::*;
    assert_eq!(kinds(&c), [Create, Write, Write, Close]);
    assert_eq!((c[1].offset, c[1].len), (0, 1 << 20));
    assert_eq!((c[2].offset, c[2].len), (1 << 20, 1 << 20));
    assert_eq!(r.file_size(c[0].entry), Some(2 << 20));
    let s = r.stats();
    let w = s.flowops.iter().find(|f| f.name == "w").unwrap();
    assert_eq!((w.ops, w.bytes, w.latency_ns), (1, 2 << 20, 2), "one op, two calls of 1 ns");
}

#[test]
fn whole_file_reads_read_to_the_end_in_iosize_pieces() {
    let text = format!(
        "{ONE_FILE}flowop openfile name=o,filesetname=fs,fd=1
flowop readwholefile name=r,fd=1,iosize=384k
flowop closefile name=c,fd=1 }} }}\nrun 1"
    );
    let mut r = runner(&text);
    let mut now = 0;
    let c = calls(&mut r, 0, 5, &mut now);
    // 1 MiB in 384 KiB reads: 384 + 384 + 256 KiB.
    let reads: Vec<(u64, u64)> = c[1..4].iter().map(|c| (c.offset / 1024, c.len / 1024)).collect();
    assert_eq!(reads, [(0, 384), (384, 384), (768, 256)]);
    assert_eq!(c[4].kind, CallKind::Close);
}

#[test]
fn appends_go_at_the_end_and_dsync_adds_an_fsync() {
    let text = format!(
        "{ONE_FILE}flowop openfile name=o,filesetname=fs,fd=1
flowop appendfile name=a,fd=1,iosize=4k,dsync
flowop closefile name=c,fd=1 }} }}\nrun 1"
    );
    let mut r = runner(&text);
    let mut now = 0;
    let c = calls(&mut r, 0, 4, &mut now);
    use CallKind::*;
    assert_eq!(kinds(&c), [Open, Write, Fsync, Close]);
    assert_eq!((c[1].offset, c[1].len), (1 << 20, 4096));
    assert_eq!(r.file_size(c[1].entry), Some((1 << 20) + 4096));
    let s = r.stats();
    let a = s.flowops.iter().find(|f| f.name == "a").unwrap();
    assert_eq!((a.ops, a.latency_ns), (1, 2), "the write and its fsync are one op");
}

#[test]
fn a_read_without_an_open_file_opens_one_first() {
    let text = format!("{ONE_FILE}flowop read name=r,filesetname=fs,fd=1,iosize=4k,random }} }}\nrun 1");
    let mut r = runner(&text);
    let mut now = 0;
    let c = calls(&mut r, 0, 3, &mut now);
    use CallKind::*;
    assert_eq!(kinds(&c), [Open, Read, Read]);
    assert!(c[1..].iter().all(|x| x.offset % 4096 == 0 && x.offset + 4096 <= 1 << 20 && x.entry == c[0].entry));
    let s = r.stats();
    assert_eq!(s.flowops[0].ops, 2, "the open counts in the first read's op");
}

#[test]
fn picks_skip_when_nothing_fits_and_files_in_use_are_not_picked() {
    // Two files, both existing: a create finds nothing (skipped); two threads open both; a
    // third open finds none free.
    let text = "define fileset name=fs,path=/t,size=4k,entries=2,dirwidth=10,prealloc=100,filesizegamma=0
define process name=p { thread name=t,instances=3 {
flowop createfile name=c,filesetname=fs,fd=1
flowop openfile name=o,filesetname=fs,fd=1
flowop delay name=d,value=100 } }
run 1";
    let mut r = runner(text);
    let (a, b) = (r.next(0, 0), r.next(1, 0));
    let (Step::Call(a), Step::Call(b)) = (a, b) else { panic!("two opens") };
    assert_eq!((a.kind, b.kind), (CallKind::Open, CallKind::Open));
    assert_ne!(a.entry, b.entry);
    r.returned(0, 1, Some(a), 0);
    r.returned(1, 1, Some(b), 0);
    // Thread 2: create skipped (all exist), open skipped (both in use), then the delay.
    assert_eq!(r.next(2, 1), Step::Sleep(100_000_000_000));
    let s = r.stats();
    assert_eq!(s.flowops.iter().map(|f| (f.ops, f.skipped)).collect::<Vec<_>>(), [(0, 3), (2, 1), (0, 0)]);
    r.check_invariants();
}

#[test]
fn filesets_are_populated_as_drawn() {
    let r = runner(personality("fileserver").unwrap());
    let s = r.setup();
    assert_eq!(s.files.len(), 10_000);
    let existing = s.files.iter().filter(|f| f.3.is_some()).count();
    assert!((7_800..8_200).contains(&existing), "prealloc=80: {existing}");
    let mean = s.files.iter().filter_map(|f| f.3).sum::<u64>() as f64 / existing as f64;
    assert!((mean / 131_072.0 - 1.0).abs() < 0.05, "mean size {mean}");
    // 10,000 files in directories of 20: 500 leaves, under 25 directories, under 2, under the
    // fileset's (no directory holds more than 20).
    assert_eq!(s.dirs.len(), 1 + 2 + 25 + 500);
    assert!(s.files.iter().all(|f| f.1 .0 >= 28), "files are in leaves");
}

#[test]
fn flowops_a_run_cannot_model_are_refused_with_their_line() {
    let w = parse_wml(
        "define fileset name=fs,path=/t,size=4k,entries=2,dirwidth=1\ndefine process name=p { thread name=t {\nflowop hog name=h,value=10 } }\nrun 1",
        "w.f",
    )
    .unwrap()
    .workload;
    let e = Runner::new(&w, rng_for(1, "x")).err().unwrap().to_string();
    assert_eq!(e, "line 3: flowop h (hog): CPU work (hog) is not modelled");
}

#[test]
fn one_file_per_directory_makes_a_binary_tree_of_directories() {
    // dirwidth=1: five leaves of one file each, under ceil(5/2) = 3, under 2, under the
    // fileset's directory (the levels above the leaves hold two each).
    let r = runner(
        "define fileset name=fs,path=/t,size=4k,entries=5,dirwidth=1,prealloc=100\n\
         define process name=p { thread name=t { flowop statfile name=s,filesetname=fs } }\nrun 1",
    );
    let s = r.setup();
    assert_eq!(s.dirs.len(), 1 + 2 + 3 + 5);
    let leaves: std::collections::BTreeSet<u32> = s.files.iter().map(|f| f.1 .0).collect();
    assert_eq!(leaves.len(), 5, "a file per leaf");
}

#[test]
fn workloads_too_large_to_hold_are_refused_before_anything_is_made() {
    let w = parse_wml(
        "define fileset name=fs,path=/t,size=4k,entries=20000000,dirwidth=20\n\
         define process name=p { thread name=t,instances=5000 { flowop statfile name=s,filesetname=fs } }\nrun 1",
        "w.f",
    )
    .unwrap()
    .workload;
    let e = Runner::new(&w, rng_for(1, "x")).err().unwrap().to_string();
    assert_eq!(e, "line 1: fileset fs: 20000000 files: at most 16777216 (a run holds each in memory)");
    let mut w2 = w.clone();
    w2.filesets[0].entries = 10;
    let e = Runner::new(&w2, rng_for(1, "x")).err().unwrap().to_string();
    assert_eq!(e, "line 2: thread t: 5000 instances: at most 4096 (a run holds each in memory)");
}
