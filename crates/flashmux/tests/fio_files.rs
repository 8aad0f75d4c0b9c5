//! fio jobs with several files (`nrfiles`, `filesize`, `file_service_type`) on a tenant's ext4:
//! each file a file of the filesystem with its own read-ahead, syncs to the file fio syncs, and
//! the settings a filesystem is needed for refused clearly without one.

mod common;

use common::{load_err, one_job_tenant as tenant, run_checked, run_recorded, scenario, EXT4};
use flashmux::device::IoOp;
use flashmux::kernel::kernels::KernelResult;
use flashmux::metrics::RunResults;
use flashmux::sim::Simulator;

fn kernel(r: &RunResults) -> &KernelResult {
    &r.kernel.as_ref().expect("a kernel")[0]
}

#[test]
fn each_file_is_a_file_of_the_filesystem() {
    let r = run_checked(&format!("{EXT4}{}", tenant("rw=write\nbs=4k\nnrfiles=6\nfilesize=32k")), 1);
    let fs = &kernel(&r).filesystems[0].fs;
    // Six files beside the root and lost+found; each 8 blocks, laid out before the run.
    assert_eq!((fs.files, fs.blocks_allocated), (6, 48));
    assert_eq!(r.tenants[0].io.write.ios, 48);
}

#[test]
fn end_fsync_syncs_every_file_and_each_is_written_where_ext4_put_it() {
    // Round robin over 4 files of 16 KiB: 16 writes of 4 KiB dirty every page, nothing is
    // written back before the end (no expiry in 2 ms), then end_fsync syncs file 0, 1, 2, 3:
    // each sync writes that file's 4 pages as one 16 KiB request (its blocks are contiguous),
    // then commits the journal (a write of the log, a flush, the commit block, a flush).
    let (r, sent) = run_recorded(&format!("{EXT4}{}", tenant("rw=write\nbs=4k\nnrfiles=4\nfilesize=16k\nend_fsync=1")));
    let data: Vec<(u64, u64)> =
        sent.iter().filter(|s| s.0 == IoOp::Write && s.2 == 16384).map(|s| (s.1, s.2)).collect();
    assert_eq!(data.len(), 4, "{sent:?}");
    let mut starts: Vec<u64> = data.iter().map(|d| d.0).collect();
    starts.dedup();
    assert_eq!(starts.len(), 4, "four files, four places: {data:?}");
    // The files were laid out before the run: the writes overwrite, so only the first sync has
    // metadata (the inodes' times) to commit; the others flush alone.
    let j = &kernel(&r).filesystems[0].journal;
    assert_eq!((j.fsyncs, j.commits_fsync, j.fsyncs_nothing_to_commit), (4, 1, 3));
    assert_eq!(kernel(&r).device.flushes, 2 * j.commits_fsync + j.fsyncs_nothing_to_commit);
    assert_eq!(kernel(&r).dirty_pages, 0, "every file synced");
}

#[test]
fn fsync_goes_to_the_file_of_the_next_io_as_in_fio() {
    // Two files of 8 KiB, round robin, fsync=1. fio decides a sync after picking the next I/O's
    // file: write f0 page 0, sync f1 (clean: a commit with nothing, no data), write f1 page 0,
    // sync f0 (writes f0 page 0), write f0 page 1, sync f1 (writes f1 page 0), write f1 page 1;
    // the last write is followed by no sync (nothing comes next). So 2 data writes of 4 KiB.
    let (r, sent) = run_recorded(&format!("{EXT4}{}", tenant("rw=write\nbs=4k\nnrfiles=2\nfilesize=8k\nfsync=1")));
    let j = &kernel(&r).filesystems[0].journal;
    assert_eq!(j.fsyncs, 3, "{sent:?}");
    assert_eq!(kernel(&r).page_cache.written_back.fsync, 2, "{sent:?}");
    assert_eq!(kernel(&r).filesystems[0].requests.data_writes, 2, "{sent:?}");
    assert_eq!(kernel(&r).dirty_pages, 2, "f0 page 1 and f1 page 1 never synced");
}

#[test]
fn each_file_reads_ahead_on_its_own() {
    // Round robin over 4 files of 256 KiB, 4 KiB reads: each file is its own stream (fio opens
    // each), so read-ahead sees four sequential readers, not one reader jumping about.
    let r = run_checked(&format!("{EXT4}{}", tenant("rw=read\nbs=4k\nnrfiles=4\nfilesize=256k")), 1);
    let pc = &kernel(&r).page_cache;
    assert_eq!(pc.hits + pc.misses + pc.waits, 256);
    assert!(pc.misses <= 8, "at most a miss or two per file: {pc:?}");
    assert_eq!(kernel(&r).device.read_bytes, 1 << 20, "every page read once");
}

#[test]
fn the_file_service_changes_the_stream_not_the_volume() {
    let run = |svc: &str| {
        let r = run_checked(
            &format!(
                "{EXT4}{}",
                tenant(&format!("rw=randwrite\nbs=4k\nnrfiles=8\nfilesize=64k\nfile_service_type={svc}"))
            ),
            7,
        );
        (r.tenants[0].io.write.ios, kernel(&r).filesystems[0].fs.blocks_allocated)
    };
    for svc in ["roundrobin", "sequential", "random:4", "zipf:1.2", "pareto", "gauss:10"] {
        let (ios, blocks) = run(svc);
        assert_eq!(blocks, 128, "{svc}");
        assert_eq!(ios, 128, "{svc}: one pass over the 8 files' 128 blocks");
    }
}

#[test]
fn several_files_need_a_filesystem() {
    let dev = "[device]\npreset = \"null\"\n";
    let e = load_err(&format!("{dev}{}", tenant("rw=write\nnrfiles=4\nfilesize=1m")));
    assert!(e.contains("nrfiles=4") && e.contains("filesystem = \"ext4\"") && e.contains("job 'j'"), "{e}");
    let e = load_err(&format!("{EXT4}{}", tenant("rw=write\nnrfiles=4\nfilesize=1m\nfilename=x")));
    assert!(e.contains("filename"), "{e}");
    // fio trims a file by punching holes: not modelled on the filesystem.
    let e = load_err(&format!("{EXT4}{}", tenant("rw=randtrim\nbs=4k\nsize=1m")));
    assert!(e.contains("punching holes") && e.contains("direct=1") && e.contains("rw=randtrim"), "{e}");
    // The job file's own errors: file, line, option, what was expected.
    let fio_err = |fio: &str| match flashmux::config::Scenario::from_toml(
        &format!("{EXT4}{}", tenant(fio)),
        "k.toml",
        std::path::Path::new("."),
    ) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted: {fio}"),
    };
    let e = fio_err("rw=write\nnrfiles=4\nfile_service_type=sideways");
    assert!(
        e.contains("k.toml[tenant t].fio:4") && e.contains("file_service_type") && e.contains("roundrobin[:N]"),
        "{e}"
    );
    let e = fio_err("rw=write\nnrfiles=0");
    assert!(e.contains("nrfiles") && e.contains("from 1"), "{e}");
    let e = fio_err("rw=write\nnrfiles=2\nfile_service_type=zipf:1");
    assert!(e.contains("theta"), "{e}");
}

#[test]
fn a_job_with_several_files_is_deterministic() {
    let text = format!(
        "{EXT4}[stop]\ntime = \"50ms\"\n{}",
        tenant("rw=randrw\nbs=4k\nnrfiles=16\nfilesize=64k-1m\nfile_service_type=random:2\ntime_based\nruntime=1\nfsync=32")
    );
    let run = || serde_json::to_string(&flashmux::report::fio_json(&run_checked(&text, 5), false)).unwrap();
    assert_eq!(run(), run());
}

#[test]
fn create_on_open_makes_each_file_when_first_written_and_journals_it() {
    // 100 files of 8 KiB made as the job reaches them (fio's create_on_open), written and synced:
    // each create journals its inode and directory entry, and delayed allocation gives each file
    // its 2 blocks at writeback. Laid out before the run instead, the files' blocks exist at
    // the start and nothing about them is journaled but their inodes' times. Each file's data
    // is one 8 KiB write either way.
    let job = "rw=write\nbs=8k\nnrfiles=100\nfilesize=8k\nend_fsync=1";
    let made = run_checked(&format!("{EXT4}{}", tenant(&format!("{job}\ncreate_on_open=1"))), 1);
    let laid = run_checked(&format!("{EXT4}{}", tenant(job)), 1);
    let (m, l) = (&kernel(&made).filesystems[0], &kernel(&laid).filesystems[0]);
    assert_eq!((m.fs.files, m.fs.blocks_allocated), (100, 200));
    assert_eq!((l.fs.files, l.fs.blocks_allocated), (100, 200));
    // end_fsync syncs the 100 files in turn. Made: each file's sync commits its creation and
    // allocation (its inode, the bitmaps, the group descriptor, the directory). Laid out: the
    // first sync commits the inodes' new times, the other 99 have nothing to commit.
    assert_eq!((m.journal.commits_fsync, m.journal.fsyncs_nothing_to_commit), (100, 0));
    assert_eq!((l.journal.commits_fsync, l.journal.fsyncs_nothing_to_commit), (1, 99));
    assert!(m.journal.metadata_blocks >= 3 * 100, "{:?}", m.journal);
    assert_eq!((m.requests.data_writes, l.requests.data_writes), (100, 100));
    assert_eq!(made.tenants[0].io.write.ios, 100);
}

#[test]
fn unlink_deletes_the_files_at_the_end_and_discard_trims_them() {
    // 10 files of 8 KiB written, synced, then deleted (fio's unlink); a second job keeps the run
    // going past the journal's next commit (5 s), after which -o discard trims the 20 freed
    // blocks.
    let ext4 = EXT4.replace("filesystem = \"ext4\"\n", "filesystem = \"ext4\"\ndiscard = true\n");
    let text = format!(
        "{ext4}[[tenant]]\nname = \"t\"\nregion = {{ offset = \"0\", size = \"1GiB\" }}\nfio = \"\"\"\n\
         [w]\nrw=write\nbs=8k\nnrfiles=10\nfilesize=8k\nend_fsync=1\nunlink=1\n\
         [idle]\nstonewall\nrw=read\nbs=4k\nsize=4k\nthinktime=6s\n\"\"\"\n"
    );
    let r = run_checked(&text, 1);
    let fs = &kernel(&r).filesystems[0];
    // Only the idle job's file is left.
    assert_eq!((fs.fs.files, fs.fs.blocks_freed), (1, 20), "{:?}", fs.fs);
    assert_eq!(kernel(&r).device.trim_bytes, 20 * 4096);
    assert_eq!(fs.requests.trims, kernel(&r).device.trims);
    assert_eq!(kernel(&r).unlinks, 10, "one delete per file, apart from the job's I/O");
}

#[test]
fn files_shared_by_jobs_that_do_not_all_unlink_them_are_refused() {
    let text = format!(
        "{EXT4}[[tenant]]\nname = \"t\"\nregion = {{ offset = \"0\", size = \"1GiB\" }}\nfio = \"\"\"\n\
         [a]\nrw=write\nsize=64k\nfilename=data\nunlink=1\n[b]\nrw=read\nsize=64k\nfilename=data\n\"\"\"\n"
    );
    match Simulator::new(scenario(&text)) {
        Err(e) => assert!(e.to_string().contains("give all or none of them unlink=1"), "{e}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn fallocate_none_lays_files_out_sparse_and_writes_allocate_them() {
    // fallocate=none: the 4 files of 64 KiB have their size and no blocks; their writes
    // allocate at writeback, so each file's sync commits an allocation. With fio's default
    // (native) the blocks are there from the start.
    let job = "rw=write\nbs=4k\nnrfiles=4\nfilesize=64k\nend_fsync=1";
    let sparse = run_checked(&format!("{EXT4}{}", tenant(&format!("{job}\nfallocate=none"))), 1);
    let native = run_checked(&format!("{EXT4}{}", tenant(job)), 1);
    let (s, n) = (&kernel(&sparse).filesystems[0], &kernel(&native).filesystems[0]);
    assert_eq!((s.fs.blocks_allocated, n.fs.blocks_allocated), (64, 64));
    assert_eq!((s.journal.commits_fsync, n.journal.commits_fsync), (4, 1));
    // A reading job's files are filled by fio before it reads: allocated whatever fallocate says.
    let reader =
        run_checked(&format!("{EXT4}{}", tenant("rw=read\nbs=4k\nnrfiles=4\nfilesize=64k\nfallocate=none")), 1);
    assert_eq!(kernel(&reader).device.read_bytes, 4 * 65536);
    let e = match flashmux::config::Scenario::from_toml(
        &format!("{EXT4}{}", tenant("fallocate=sometimes")),
        "k.toml",
        std::path::Path::new("."),
    ) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    assert!(e.contains("fallocate") && e.contains("none, native"), "{e}");
}

#[test]
fn directory_puts_the_files_in_directories() {
    // fio's directory: one, or several separated by ':' that the files take in turn. Three
    // directories (one of them two deep, "a/b" making "a" too) beside the root and lost+found.
    let r = run_checked(&format!("{EXT4}{}", tenant("rw=write\nbs=4k\nnrfiles=6\nfilesize=8k\ndirectory=x:a/b")), 1);
    let fs = &kernel(&r).filesystems[0].fs;
    assert_eq!((fs.files, fs.directories), (6, 5));
    let one = run_checked(&format!("{EXT4}{}", tenant("rw=write\nbs=4k\nnrfiles=6\nfilesize=8k")), 1);
    assert_eq!(kernel(&one).filesystems[0].fs.directories, 2);
}

#[test]
fn a_commit_larger_than_the_largest_request_is_split() {
    // The end_fsync test's job: its first sync commits a descriptor and the inodes' table block,
    // one log write of 8 KiB. With max_sectors_kb = 4 the block layer takes 4 KiB at most: the
    // log write goes as two requests of 4 KiB (as bio_split splits it), the commit waits for
    // both, and nothing larger reaches the device (the page cache's writeback is capped too).
    let job = tenant("rw=write\nbs=4k\nnrfiles=4\nfilesize=16k\nend_fsync=1");
    let (big, _) = run_recorded(&format!("{EXT4}{job}"));
    let (small, sent) = run_recorded(&format!("{EXT4}[host]\nmax_sectors_kb = 4\n{job}"));
    let (b, s) = (&kernel(&big).filesystems[0], &kernel(&small).filesystems[0]);
    assert!(sent.iter().all(|x| x.2 <= 4096), "{sent:?}");
    assert_eq!(b.journal.journal_writes, s.journal.journal_writes, "the same log writes");
    assert_eq!(s.requests.journal_writes, b.requests.journal_writes + 1, "one of them in two pieces");
    assert_eq!((s.journal.commits_fsync, s.journal.fsyncs_nothing_to_commit), (1, 3));
    assert_eq!(s.requests.data_writes, 16, "each file's 16 KiB in four requests");
}
