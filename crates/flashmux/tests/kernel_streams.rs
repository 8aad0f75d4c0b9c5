//! The block streams a real Linux kernel sent for file workloads on ext4
//! (`tests/data/kernel/ext4/`, captured by `scripts/capture-ext4.sh`): read back as the README
//! there describes them. These are the reference the guest-kernel model is compared against.

use flashmux::workload::trace::{ReadOptions, TraceOp, TraceReader, TraceRecord};
use std::path::Path;

fn read(name: &str) -> Vec<TraceRecord> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel/ext4").join(format!("{name}.blktrace.0.gz"));
    let r = TraceReader::open(&[path], &ReadOptions::default()).unwrap();
    r.map(|x| x.unwrap()).collect()
}

fn count(recs: &[TraceRecord], op: TraceOp) -> usize {
    recs.iter().filter(|r| r.op == op).count()
}

fn bytes(recs: &[TraceRecord], op: TraceOp) -> u64 {
    recs.iter().filter(|r| r.op == op).map(|r| r.len).sum()
}

#[test]
fn a_streaming_writer_reaches_the_device_as_large_writes() {
    let s = read("stream");
    assert_eq!((count(&s, TraceOp::Write), count(&s, TraceOp::Flush)), (120, 3));
    let large: u64 = s.iter().filter(|r| r.op == TraceOp::Write && r.len >= 512 << 10).map(|r| r.len).sum();
    let all = bytes(&s, TraceOp::Write);
    assert!(all >= 128 << 20 && large * 100 >= all * 95, "{large} of {all} bytes in writes of 512 KiB or more");
}

/// 1,023 fsyncs (fio issues none after a job's last write) and the capture's final `sync`: 1,024
/// journal commits, each with two flushes.
#[test]
fn each_fsync_of_an_append_is_three_writes_and_two_flushes() {
    let s = read("append-fsync");
    assert_eq!(count(&s, TraceOp::Flush), 2 * 1024);
    assert_eq!(count(&s, TraceOp::Write), 3 * 1024 + 6);
    assert_eq!(count(&s, TraceOp::Read), 6, "the first lookups after the caches were dropped");
}

#[test]
fn creating_and_deleting_small_files_writes_metadata_and_discards() {
    let s = read("smallfiles");
    assert_eq!((count(&s, TraceOp::Write), count(&s, TraceOp::Trim), count(&s, TraceOp::Flush)), (83, 407, 5));
    // 2,000 files of 8 KiB are 15.6 MiB of data; the rest is metadata and the journal.
    assert_eq!(bytes(&s, TraceOp::Write), 18_784_256);
}

#[test]
fn random_reads_miss_a_small_cache_and_hit_a_large_one() {
    let small = read("randread-small");
    assert_eq!(count(&small, TraceOp::Read), 5_537, "about 8% of 6,000 reads hit");
    assert!(small.iter().filter(|r| r.op == TraceOp::Read).all(|r| r.len == 4096));
    let large = read("randread-large");
    assert_eq!((count(&large, TraceOp::Read), bytes(&large, TraceOp::Read)), (55, 64 << 20));
}
