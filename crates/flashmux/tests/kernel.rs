//! The kernel above the block layer end to end (`[kernel]`): buffered jobs through the page
//! cache, direct jobs beside them, the flusher's timing, fsync, throttling, a kernel per VM.

mod common;

use common::{load_err, run_checked, run_recorded, scenario};
use flashmux::device::IoOp;
use flashmux::kernel::kernels::KernelResult;
use flashmux::metrics::RunResults;
use flashmux::report::fio_json;
use flashmux::sim::Simulator;

/// A null device answering in 100 us, and a kernel with a 4 MiB page cache.
const NULL: &str = "[device]\npreset = \"null\"\n[device.null]\nlatency = \"100us\"\n\
                    [kernel]\n[kernel.pagecache]\ncapacity = \"4MiB\"\n";

fn tenant(name: &str, fio: &str) -> String {
    format!("[[tenant]]\nname = \"{name}\"\nfio = \"\"\"\n[{name}]\n{fio}\n\"\"\"\n")
}

fn kernel(r: &RunResults, k: usize) -> &KernelResult {
    &r.kernel.as_ref().expect("a run with [kernel] reports its kernels")[k]
}

#[test]
fn a_buffered_read_that_hits_costs_the_system_call_and_the_copy_alone() {
    // Ten reads of the same 4 KiB. The first misses: the kernel reads 4 pages (the initial
    // read-ahead window of a 1-page read at the start of a file, 4 × 1 page with
    // read_ahead_kb = 128, i.e. 32 pages: 1 ≤ 32 / 32), one device read of 16 KiB. The other
    // nine hit: 1.5 us of submission, 0.5 us to copy one page, 1.5 us of completion.
    let (r, sent) = run_recorded(&format!("{NULL}{}", tenant("r", "rw=read\nbs=4k\nsize=4k\nloops=10")));
    let k = kernel(&r, 0);
    assert_eq!((k.device.reads, k.device.read_bytes), (1, 16384));
    assert_eq!((k.page_cache.hits, k.page_cache.misses, k.page_cache.readahead_pages), (9, 1, 3));
    let read = &r.jobs[0].io.read;
    assert_eq!(read.ios, 10);
    assert_eq!(read.lat.min(), 3_500, "a hit: submission + copy + completion");
    assert!(read.lat.max() > 100_000, "the miss waits for the device");
    assert_eq!(sent, [(IoOp::Read, 0, 16384)], "nine reads never reach the device");
}

#[test]
fn a_direct_job_bypasses_the_cache() {
    let (r, sent) = run_recorded(&format!("{NULL}{}", tenant("r", "rw=read\nbs=4k\nsize=4k\nloops=10\ndirect=1")));
    let k = kernel(&r, 0);
    assert_eq!((k.device.reads, k.page_cache.hits, k.page_cache.misses), (0, 0, 0));
    assert_eq!(sent, vec![(IoOp::Read, 0, 4096); 10]);
}

#[test]
fn a_direct_write_drops_the_clean_pages_it_overwrites() {
    // One tenant, two jobs on its file: the reader caches 16 KiB (4 pages, read ahead to the end
    // of the tenant's 16 KiB region and no further), thinks for 10 ms, and reads them again; at
    // 5 ms the direct writer overwrites them, so the second pass misses all 4 again.
    let fio = "[r]\nrw=read\nbs=16k\nsize=16k\nloops=2\nthinktime=10ms\n\
               [w]\nrw=write\nbs=16k\nsize=16k\ndirect=1\nstartdelay=5ms\n";
    let region = "region = { offset = \"0\", size = \"16KiB\" }";
    let r = run_checked(&format!("{NULL}[[tenant]]\nname = \"t\"\n{region}\nfio = \"\"\"\n{fio}\"\"\"\n"), 1);
    let k = kernel(&r, 0);
    assert_eq!((k.page_cache.misses, k.page_cache.hits, k.page_cache.readahead_pages), (8, 0, 0));
    assert_eq!(k.device.reads, 2);
    // Without the writer, the second pass hits.
    let r = run_checked(
        &format!(
            "{NULL}[[tenant]]\nname = \"t\"\n{region}\nfio = \"\"\"\n{}\"\"\"\n",
            &fio[..fio.find("[w]").unwrap()]
        ),
        1,
    );
    assert_eq!((kernel(&r, 0).page_cache.misses, kernel(&r, 0).page_cache.hits), (4, 4));
}

#[test]
fn fsync_writes_the_dirty_pages_then_flushes() {
    // 64 writes of 4 KiB, an fsync after every 16th (fio issues none after the last write):
    // each fsync writes its 16 contiguous dirty pages as one 64 KiB device write, then flushes.
    let r = run_checked(&format!("{NULL}{}", tenant("w", "rw=write\nbs=4k\nsize=256k\nfsync=16")), 1);
    let k = kernel(&r, 0);
    assert_eq!((k.device.writes, k.device.write_bytes, k.device.flushes), (3, 3 * 65536, 3));
    assert_eq!(k.page_cache.written_back.fsync, 48);
    assert_eq!(k.dirty_pages, 16, "the last 16 writes stay dirty: nothing syncs them");
    assert_eq!(r.jobs[0].io.sync.count(), 3);
    assert_eq!(r.device.flushes, 3);
}

#[test]
fn the_kernels_requests_wait_for_its_tags() {
    // 16 writes of 4 KiB with 4 KiB holes (`rw=write:4k`), then `end_fsync`: 16 dirty pages, no
    // two adjacent, so the fsync sends 16 device writes, then a flush. The null device answers
    // each in 100 us and takes them all at once; with the default tags (the host's 1,024) they
    // go together; with 4 tags they go 4 at a time, in 4 rounds, and 12 of them wait for a tag.
    let job = tenant("w", "rw=write:4k\nbs=4k\nsize=128k\nend_fsync=1");
    let end = |tags: &str| {
        let r = run_checked(&format!("{}{job}", NULL.replace("[kernel]\n", &format!("[kernel]\n{tags}"))), 1);
        let k = kernel(&r, 0);
        assert_eq!((k.device.writes, k.device.flushes, k.plug_merges), (16, 1, 0), "{k:?}");
        // The run ends when the job's end_fsync does.
        (r.sim_time_ns, k.tag_waits, k.nr_requests)
    };
    let (all, waits, n) = end("");
    assert_eq!((waits, n), (0, Some(1024)));
    assert!((200_000..300_000).contains(&all), "the writes, 16 device writes together, the flush: {all} ns");
    let (four, waits, n) = end("nr_requests = 4\n");
    assert_eq!((waits, n), (12, Some(4)));
    // Each more round: the submission (1.5 us), the device's command time (1 us), 100 us, the
    // completion (1.5 us); less the 1 us the 16 writes at once wait for the device's 8 cores.
    assert_eq!(four - all, 3 * 104_000 - 1_000, "3 more rounds: {four} against {all} ns");
}

#[test]
fn a_read_gets_a_tag_before_the_flushers_run_is_over() {
    // One tag. The writer dirties 200 pages with holes between them (1,024-page cache,
    // background threshold 102): the flusher writes about 100 of them, one device write of
    // 104 us at a time (submission, command, 100 us, completion), some 10 ms. A reader of the
    // same file starts at 2 ms: each of its misses takes the tag after the write in flight —
    // the flusher's writes and the reads take freed tags in turn — so it waits two rounds,
    // not for the rest of the flusher's run.
    let fio = "[w]\nrw=write:4k\nbs=4k\nsize=1600k\n\
               [r]\nrw=randread\nbs=4k\noffset=2m\nsize=1m\nnumber_ios=5\nstartdelay=2ms\n";
    let text = format!("{}[[tenant]]\nname = \"t\"\nfio = \"\"\"\n{fio}\"\"\"\n", NULL.replace("[kernel]\n", "[kernel]\nnr_requests = 1\n"));
    let r = run_checked(&text, 1);
    let k = kernel(&r, 0);
    assert!(k.page_cache.written_back.background >= 90, "{k:?}");
    assert_eq!((k.page_cache.misses, k.device.reads), (5, 5), "{k:?}");
    let read = &r.jobs[1].io.read;
    assert_eq!(read.ios, 5);
    assert!(read.lat.max() < 2 * 104_000 + 10_000, "a read waited {} ns", read.lat.max());
    // The run ends with the reader, the flusher's run far from over.
    assert!(r.sim_time_ns < 3_500_000 && k.writeback_pages > 50, "{} ns, {k:?}", r.sim_time_ns);
}

#[test]
fn fsync_on_close_syncs_the_file_when_the_job_ends() {
    // 64 pages written and left dirty; fio's fsync_on_close syncs the file as the job closes
    // it: its contiguous pages as two writes of 128 KiB (max_sectors_kb), then a flush. With
    // end_fsync too, once.
    let end = |opts: &str| {
        let r = run_checked(&format!("{NULL}{}", tenant("w", &format!("rw=write\nbs=4k\nsize=256k{opts}"))), 1);
        let k = kernel(&r, 0);
        (k.device.writes, k.device.write_bytes, k.device.flushes, k.dirty_pages)
    };
    assert_eq!(end(""), (0, 0, 0, 64));
    assert_eq!(end("\nfsync_on_close=1"), (2, 2 * 131072, 1, 0));
    assert_eq!(end("\nfsync_on_close=1\nend_fsync=1"), end("\nend_fsync=1"));
    // fio syncs at close after its I/O loop: outside the job's runtime, which end_fsync's sync
    // is in. The run goes on until the sync is done either way.
    let times = |opts: &str| {
        let r = run_checked(&format!("{NULL}{}", tenant("w", &format!("rw=write\nbs=4k\nsize=256k{opts}"))), 1);
        (r.jobs[0].runtime_ns, r.sim_time_ns)
    };
    let (plain, _) = times("");
    let (on_close, run) = times("\nfsync_on_close=1");
    assert_eq!(on_close, plain);
    assert!(run > plain + 200_000, "the two writes and the flush come after: {run} ns");
    let (with_end, run_end) = times("\nend_fsync=1");
    assert_eq!((with_end, run_end), (run, run), "end_fsync's sync is in the runtime");
}

/// A buffered writer of one page at the start, and a direct reader beside it that keeps the run
/// going for `secs` seconds.
fn one_dirty_page(secs: u64) -> RunResults {
    let text = format!(
        "{NULL}[stop]\ntime = \"{secs}s\"\n{}{}",
        tenant("w", "rw=write\nbs=4k\nsize=4k"),
        tenant("r", "rw=read\nbs=4k\ndirect=1\nrate_iops=2\ntime_based\nruntime=100s")
    );
    run_checked(&text, 50)
}

#[test]
fn the_flusher_writes_a_page_at_the_first_wakeup_after_it_expires() {
    // The page is dirty from 1.5 us on; it expires 30 s later (dirty_expire_centisecs 3000).
    // The flusher wakes every 5 s (dirty_writeback_centisecs 500): at 30 s the page is 1.5 us
    // short of expiry, so it is written at 35 s.
    let before = one_dirty_page(34);
    assert_eq!(kernel(&before, 0).device.writes, 0);
    assert_eq!(kernel(&before, 0).dirty_pages, 1);
    let after = one_dirty_page(36);
    let k = kernel(&after, 0);
    assert_eq!((k.device.writes, k.page_cache.written_back.expiry, k.dirty_pages), (1, 1, 0));
}

#[test]
fn a_writer_over_the_dirty_threshold_is_throttled_until_writeback_completes() {
    // 4 MiB of cache: 1024 pages, dirty_ratio 20 → 204 pages. The host sends one command at a
    // time and each takes 1 ms: 128 KiB (a writeback extent) per ms, far slower than the
    // writer's 4 us per page. The writer is held at the threshold, and dirty + writeback pages
    // never exceed it by more than its one request.
    let slow = NULL.replace("100us", "1ms") + "[host]\nqueue_depth = 1\n";
    let r = run_checked(&format!("{slow}{}", tenant("w", "rw=write\nbs=4k\nsize=8m")), 97);
    let k = kernel(&r, 0);
    assert!(k.page_cache.throttle_events > 0, "{k:?}");
    assert!(k.page_cache.peak_dirty <= 205, "{}", k.page_cache.peak_dirty);
    assert_eq!(r.jobs[0].io.write.ios, 2048);
    assert!(k.page_cache.written_back.background > 0);
}

#[test]
fn each_vm_has_its_own_kernel() {
    let text = format!(
        "{NULL}[virt]\nmode = \"dataplane\"\n{}{}",
        tenant("a", "rw=randread\nbs=4k\nsize=64k\nloops=4"),
        tenant("b", "rw=randwrite\nbs=4k\nsize=64k\nfsync=4")
    );
    let r = run_checked(&text, 7);
    let ks = r.kernel.as_ref().unwrap();
    assert_eq!(ks.len(), 2);
    assert_eq!((ks[0].tenants.as_slice(), ks[1].tenants.as_slice()), ([0usize].as_slice(), [1usize].as_slice()));
    // a's 16 pages: missed once each (random reads get no read-ahead past what they ask, so
    // each miss is at most its own page and whatever the window around it), hit afterwards.
    assert_eq!(ks[0].page_cache.hits + ks[0].page_cache.misses + ks[0].page_cache.waits, 64);
    assert!(ks[0].page_cache.hits >= 48, "{:?}", ks[0].page_cache);
    assert_eq!(ks[1].device.flushes, 3);
    assert_eq!(ks[0].device.writes + ks[1].device.reads, 0);
}

#[test]
fn tenants_share_the_host_kernel_on_bare_metal_unless_each_has_its_own() {
    // Two tenants reading 64 KiB (16 pages) at the start of their regions. Each stream's
    // read-ahead windows (MODEL.md §3b) start at pages 0, 1, 4 and 12 with 4, 8, 16 and 32
    // pages: 60 pages cached per tenant. Shared: one kernel holding both tenants' 120. Per
    // tenant: a kernel each with 60, as each VM's would be.
    let jobs = format!("{}{}", tenant("a", "rw=read\nbs=4k\nsize=64k"), tenant("b", "rw=read\nbs=4k\nsize=64k"));
    let shared = run_checked(&format!("{NULL}{jobs}"), 5);
    let ks = shared.kernel.as_ref().unwrap();
    assert_eq!((ks.len(), ks[0].tenants.as_slice()), (1, [0usize, 1].as_slice()));
    assert_eq!(ks[0].cached_pages, 120);
    let own = run_checked(&format!("{}{jobs}", NULL.replace("[kernel]\n", "[kernel]\nper_tenant = true\n")), 5);
    let ks = own.kernel.as_ref().unwrap();
    assert_eq!(ks.len(), 2);
    assert_eq!((ks[0].cached_pages, ks[1].cached_pages), (60, 60));
    let e = load_err(&format!(
        "{}[virt]\nmode = \"dataplane\"\n{jobs}",
        NULL.replace("[kernel]\n", "[kernel]\nper_tenant = false\n")
    ));
    assert!(e.contains("kernel.per_tenant") && e.contains("each VM has its own kernel"), "{e}");
}

#[test]
fn an_fsync_of_an_append_on_ext4_is_three_writes_and_two_flushes() {
    // 16 appends of 4 KiB, an fsync after each but the last, on ext4 over a 1 GiB region. Each
    // write changes the inode (its block joins the running transaction); each fsync writes the
    // page, then commits: one journal write of 8 KiB (the descriptor and the inode's block), a
    // flush, the 4 KiB commit block, and a flush (the device has no FUA). The 16th page stays
    // dirty: nothing syncs it.
    let text = format!(
        "{}{}",
        NULL.replace("[kernel]\n", "[kernel]\nfilesystem = \"ext4\"\n"),
        tenant("a", "rw=write\nbs=4k\nsize=64k\nfsync=1").replace(
            "[[tenant]]\nname = \"a\"\n",
            "[[tenant]]\nname = \"a\"\nregion = { offset = \"0\", size = \"1GiB\" }\n"
        )
    );
    let (r, sent) = run_recorded(&text);
    assert_eq!(sent.len(), 15 * 5, "{sent:?}");
    for (i, c) in sent.chunks(5).enumerate() {
        let shape: Vec<(IoOp, u64)> = c.iter().map(|&(op, _, len)| (op, len)).collect();
        let want = [(IoOp::Write, 4096), (IoOp::Write, 8192), (IoOp::Flush, 0), (IoOp::Write, 4096), (IoOp::Flush, 0)];
        assert_eq!(shape, want, "commit {i}");
        // The data is the file's page i; the journal's blocks follow each other in its log.
        assert_eq!(c[0].1, sent[0].1 + i as u64 * 4096, "the file's blocks are contiguous");
        assert_eq!(c[1].1, sent[1].1 + i as u64 * 3 * 4096, "each commit 3 blocks of the log");
        assert_eq!(c[3].1, c[1].1 + 8192, "the commit block after the logged blocks");
    }
    let k = kernel(&r, 0);
    let j = &k.filesystems[0].journal;
    assert_eq!((j.commits_fsync, j.metadata_blocks, j.descriptor_blocks, j.commit_blocks), (15, 15, 15, 15));
    assert_eq!((k.device.writes, k.device.flushes, k.dirty_pages), (45, 30, 1));
}

#[test]
fn jobs_naming_the_same_file_share_it_on_ext4() {
    // A writer lays down 64 KiB of "data" and a reader then reads it: its reads hit. With
    // different files the reader's misses go to the device.
    let jobs = |name: &str| {
        format!(
            "[[tenant]]\nname = \"t\"\nregion = {{ offset = \"0\", size = \"1GiB\" }}\nfio = \"\"\"\n\
             [w]\nrw=write\nbs=64k\nsize=64k\nfilename=data\n\
             [r]\nstonewall\nrw=read\nbs=4k\nsize=64k\nfilename={name}\n\"\"\"\n"
        )
    };
    let ext4 = NULL.replace("[kernel]\n", "[kernel]\nfilesystem = \"ext4\"\n");
    let shared = run_checked(&format!("{ext4}{}", jobs("data")), 3);
    let k = kernel(&shared, 0);
    assert_eq!((k.page_cache.hits, k.device.reads), (16, 0));
    let apart = run_checked(&format!("{ext4}{}", jobs("other")), 3);
    assert!(kernel(&apart, 0).device.reads > 0);
}

#[test]
fn a_run_with_a_kernel_is_deterministic() {
    let text = format!(
        "{NULL}[stop]\ntime = \"200ms\"\n{}{}",
        tenant("a", "rw=randrw\nbs=4k\nsize=8m\ntime_based\nruntime=1s\nfsync=64"),
        tenant("b", "rw=read\nbs=4k\nsize=8m\ntime_based\nruntime=1s")
    );
    let run = || {
        let mut sim = Simulator::new(scenario(&text)).unwrap();
        sim.run();
        serde_json::to_string(&fio_json(&sim.finish(), false)).unwrap()
    };
    assert_eq!(run(), run());
}

#[test]
fn bad_kernel_settings_are_clear_errors() {
    let dev = "[device]\npreset = \"null\"\n";
    let job = tenant("w", "rw=write\nbs=1m");
    let e = load_err(&format!("{dev}[kernel.pagecache]\ncapacity = \"1MiB\"\n{job}"));
    assert!(e.contains("kernel.pagecache.capacity") && e.contains("largest request") && e.contains("direct=1"), "{e}");
    let e = load_err(&format!("{dev}[kernel.pagecache]\ncapacity = \"1000\"\n{job}"));
    assert!(e.contains("k.toml:4") && e.contains("whole number of 4 KiB pages"), "{e}");
    let e = load_err(&format!("{dev}[kernel.pagecache]\ndirty_ratio = 101\n{job}"));
    assert!(e.contains("kernel.pagecache.dirty_ratio") && e.contains("0 to 100"), "{e}");
    let e = load_err(&format!("{dev}[kernel]\nswappiness = 60\n{job}"));
    assert!(e.contains("swappiness"), "{e}");
    let e = load_err(&format!("{dev}[kernel]\ndiscard = true\n{job}"));
    assert!(e.contains("kernel.discard") && e.contains("filesystem = \"ext4\""), "{e}");
    let e = load_err(&format!("{dev}[kernel]\nnr_requests = 0\n{job}"));
    assert!(e.contains("kernel.nr_requests") && e.contains("at least 1"), "{e}");
    let e = load_err(&format!("{dev}[kernel]\nfilesystem = \"xfs\"\n{job}"));
    assert!(e.contains("kernel.filesystem") && e.contains("ext4"), "{e}");
    // A region smaller than one block group.
    let small = tenant("w", "rw=write\nbs=4k\nsize=64k").replace(
        "[[tenant]]\nname = \"w\"\n",
        "[[tenant]]\nname = \"w\"\nregion = { offset = \"0\", size = \"64MiB\" }\n",
    );
    match Simulator::new(scenario(&format!("{dev}[kernel]\nfilesystem = \"ext4\"\n{small}"))) {
        Err(e) => assert!(e.to_string().contains("too small: the filesystem needs at least one block group"), "{e}"),
        Ok(_) => panic!("ext4 made on 64 MiB"),
    }
    // A job over its whole region: its file cannot fit beside ext4's metadata and journal.
    let s = scenario(&format!("{dev}[kernel]\nfilesystem = \"ext4\"\n{}", tenant("w", "rw=write\nbs=4k")));
    match Simulator::new(s) {
        Err(e) => assert!(e.to_string().contains("does not fit in the tenant's filesystem"), "{e}"),
        Ok(_) => panic!("a file as large as its region was laid out"),
    }
}

#[test]
fn buffered_jobs_without_a_kernel_are_noted() {
    let s = scenario(&format!("[device]\npreset = \"null\"\n{}", tenant("w", "rw=write")));
    assert!(s.notes.iter().any(|n| n.starts_with("direct=0")), "{:?}", s.notes);
    let s = scenario(&format!("[device]\npreset = \"null\"\n{}", tenant("w", "rw=write\ndirect=1")));
    assert!(s.notes.is_empty(), "{:?}", s.notes);
    let s = scenario(&format!("[device]\npreset = \"null\"\n[kernel]\n{}", tenant("w", "rw=write")));
    assert!(s.notes.is_empty(), "{:?}", s.notes);
}
