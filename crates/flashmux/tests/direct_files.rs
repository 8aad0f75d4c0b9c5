//! Direct (`O_DIRECT`) fio jobs on a tenant's ext4: their reads and writes go to their files'
//! blocks, split where a request spans two extents, allocate the holes they write, change the
//! inode, and leave the page cache alone (docs/MODEL.md §3c).

mod common;

use common::{one_job_tenant as tenant, run_checked, run_recorded, EXT4};
use flashmux::device::IoOp;
use flashmux::kernel::kernels::KernelResult;
use flashmux::metrics::RunResults;

fn kernel(r: &RunResults) -> &KernelResult {
    &r.kernel.as_ref().expect("a kernel")[0]
}

fn data_writes(sent: &[(IoOp, u64, u64)]) -> Vec<(u64, u64)> {
    sent.iter().filter(|s| s.0 == IoOp::Write).map(|s| (s.1, s.2)).collect()
}

#[test]
fn direct_writes_go_where_the_buffered_ones_are_written_back() {
    // The same sequential job of 64 writes of 16 KiB, direct and buffered (synced at its end):
    // both write the file ext4 laid out, at the same device bytes, not the raw region's start
    // (the superblock and group descriptors), and the direct one caches nothing.
    let job = "rw=write\nbs=16k\nsize=1m\nend_fsync=1";
    let (direct, dsent) = run_recorded(&format!("{EXT4}{}", tenant(&format!("{job}\ndirect=1"))));
    let (buffered, bsent) = run_recorded(&format!("{EXT4}{}", tenant(job)));
    let fs = &kernel(&direct).filesystems[0];
    assert_eq!((fs.requests.data_writes, fs.requests.data_reads), (64, 0));
    assert_eq!(kernel(&direct).cached_pages, 0, "the cache is bypassed");
    let d = data_writes(&dsent);
    // The 64 data writes, then the end_fsync's commit (the log write and the commit block).
    let data: Vec<(u64, u64)> = d.iter().copied().filter(|w| w.1 == 16384).collect();
    assert_eq!(data.len(), 64, "{d:?}");
    assert!(data.windows(2).all(|w| w[1].0 == w[0].0 + 16384), "one contiguous file: {data:?}");
    assert!(data[0].0 > 0, "the file's blocks, not the region's first block");
    // The buffered job's writeback: the file's 256 pages, from the same first byte.
    let b = data_writes(&bsent);
    let first_data = b.iter().find(|w| w.1 >= 16384).expect("the file's data written back");
    assert_eq!(first_data.0, data[0].0, "buffered {b:?}");
    assert_eq!(b.iter().filter(|w| w.1 >= 16384).map(|w| w.1).sum::<u64>(), 1 << 20);
    assert_eq!(kernel(&buffered).filesystems[0].journal.commits_fsync, 1);
    // Direct writes change the inode (its mtime): the end_fsync commits it.
    let j = &fs.journal;
    assert_eq!((j.fsyncs, j.commits_fsync, j.metadata_blocks), (1, 1, 1));
}

#[test]
fn a_direct_request_over_two_extents_is_split_and_completes_once() {
    // A 300 MiB file laid out in three extents (ext4's largest is 32,768 blocks, 128 MiB; the
    // next starts after a group's backup superblock), written in 400 requests of 768 KiB: the
    // ones holding the 128 MiB and 256 MiB boundaries are two device requests each. The job
    // sees its 400, each completing once, every event's invariants checked. (max_sectors_kb
    // 1024, so that no request is cut at the block layer's largest: the next test.)
    let (r, sent) = run_recorded(&format!("{EXT4}[host]\nmax_sectors_kb = 1024\n{}", tenant("rw=write\nbs=768k\nsize=300m\ndirect=1")));
    let fs = &kernel(&r).filesystems[0];
    assert_eq!(fs.fs.extents_per_file_max, 3);
    assert_eq!(fs.requests.data_writes, 402);
    let w = data_writes(&sent);
    assert_eq!(w.len(), 402, "what the device was sent");
    assert_eq!(w.iter().map(|w| w.1).sum::<u64>(), 300 << 20);
    assert_eq!(w.iter().filter(|w| w.1 < 768 << 10).count(), 4, "two requests in two pieces each");
    assert_eq!(r.tenants[0].io.write.ios, 400);
    assert_eq!(r.tenants[0].io.write.bytes, 300 << 20);
    assert_eq!((r.requests_issued, r.requests_completed, r.requests_in_flight), (400, 400, 0));
}

#[test]
fn a_direct_write_into_a_sparse_file_allocates_at_once() {
    // fallocate=none: the file has its size and no blocks. 16 random direct writes of 4 KiB
    // allocate its blocks as they are submitted (no delayed allocation), one at a time from the
    // group's preallocation, in the writes' random order: 15 extents (two happen to touch),
    // more than the inode's four, so a leaf block too — 17 blocks. The end_fsync commits what
    // that dirtied: the block bitmap, the group descriptor, the inode's table block and the leaf.
    let r = run_checked(&format!("{EXT4}{}", tenant("rw=randwrite\nbs=4k\nsize=64k\nfallocate=none\ndirect=1\nend_fsync=1")), 1);
    let fs = &kernel(&r).filesystems[0];
    assert_eq!((fs.fs.blocks_allocated, fs.fs.extents_per_file_max), (17, 15));
    assert_eq!(fs.requests.data_writes, 16);
    let j = &fs.journal;
    assert_eq!((j.fsyncs, j.commits_fsync, j.metadata_blocks), (1, 1, 4));
    assert_eq!(kernel(&r).dirty_pages, 0);
}

#[test]
fn several_direct_files_are_files_of_the_filesystem() {
    // nrfiles with direct=1: four files of 64 KiB, round robin, each where ext4 put it.
    let (r, sent) = run_recorded(&format!("{EXT4}{}", tenant("rw=write\nbs=64k\nnrfiles=4\nfilesize=64k\ndirect=1")));
    let fs = &kernel(&r).filesystems[0];
    assert_eq!((fs.fs.files, fs.requests.data_writes), (4, 4));
    let mut starts: Vec<u64> = data_writes(&sent).iter().map(|w| w.0).collect();
    starts.sort_unstable();
    starts.dedup();
    assert_eq!(starts.len(), 4, "four files, four places: {sent:?}");
}

#[test]
fn a_direct_job_in_a_vm_reaches_its_file_through_the_guest() {
    // The same split through a VM's I/O path: its pieces go through the guest's plug, virtqueue
    // and I/O thread, and the job's 400 requests complete once each.
    let r = run_checked(
        &format!("{EXT4}[virt]\nmode = \"dataplane\"\n{}", tenant("rw=write\nbs=768k\nsize=300m\ndirect=1\niodepth=4")),
        1,
    );
    assert_eq!(kernel(&r).filesystems[0].requests.data_writes, 402);
    assert_eq!((r.tenants[0].io.write.ios, r.requests_in_flight), (400, 0));
}

#[test]
fn a_request_larger_than_the_largest_the_block_layer_takes_is_cut() {
    // max_sectors_kb 128 (the default): a direct 1 MiB write is eight requests of 128 KiB below,
    // a 200 KiB one two (128 + 72), as bio_split cuts them; the job sees one request each. On a
    // raw region, and on a file, where the cut follows the extent's.
    let null = "[device]\npreset = \"null\"\n[device.null]\nlatency = \"100us\"\n";
    for (job, pieces) in [("bs=1m\nsize=4m", vec![131072; 32]), ("bs=200k\nsize=400k", vec![131072, 73728, 131072, 73728])] {
        let (r, sent) = run_recorded(&format!("{null}{}", tenant(&format!("rw=write\n{job}\ndirect=1"))));
        assert_eq!(sent.iter().map(|s| s.2).collect::<Vec<_>>(), pieces, "{job}");
        assert_eq!(r.tenants[0].io.write.ios, if pieces.len() == 32 { 4 } else { 2 });
        assert_eq!(r.requests_in_flight, 0);
    }
    let (r, sent) = run_recorded(&format!("{EXT4}{}", tenant("rw=write\nbs=768k\nsize=300m\ndirect=1")));
    let w = data_writes(&sent);
    // Each 768 KiB request in six of 128 KiB; the two over an extent boundary are cut there too,
    // but the boundaries (128 and 256 MiB into the file) fall where a 128 KiB cut does: six each.
    assert!(w.iter().all(|w| w.1 == 128 << 10), "{w:?}");
    assert_eq!(w.len(), 2400);
    assert_eq!((r.tenants[0].io.write.ios, r.requests_in_flight), (400, 0));
}
