//! fio's file and directory operation engines (`ioengine=filecreate`, `filestat`, `filedelete`,
//! `dircreate`, `dirstat`, `dirdelete`) on a tenant's ext4: each file's open is the engine's
//! call, timed (`[kernel.calls]`) and made on the filesystem; the file's I/Os do nothing; fio's
//! example job files for them run as they are.

mod common;

use common::{load_err, run_checked, scenario};
use flashmux::config::Scenario;
use flashmux::kernel::kernels::KernelResult;
use flashmux::metrics::{JobResult, RunResults};
use flashmux::sim::Simulator;

/// A null device answering in 100 us; ext4 on a 1 GiB region.
const EXT4: &str = "[device]\npreset = \"null\"\n[device.null]\nlatency = \"100us\"\n\
                    [kernel]\nfilesystem = \"ext4\"\n[kernel.pagecache]\ncapacity = \"16MiB\"\n";
/// The model's submission and completion overheads around each call (`[host]` defaults).
const OVERHEADS_NS: u64 = 3_000;

fn tenant(fio: &str) -> String {
    format!(
        "[[tenant]]\nname = \"t\"\nregion = {{ offset = \"0\", size = \"1GiB\" }}\nfio = \"\"\"\n[j]\n{fio}\n\"\"\"\n"
    )
}

fn run(fio: &str) -> RunResults {
    run_checked(&format!("{EXT4}{}", tenant(fio)), 1)
}

fn kernel(r: &RunResults) -> &KernelResult {
    &r.kernel.as_ref().expect("a kernel")[0]
}

fn job(r: &RunResults) -> &JobResult {
    &r.jobs[0]
}

/// The root and lost+found.
const DIRS_AFTER_MKFS: u64 = 2;

#[test]
fn filecreate_makes_each_file_with_a_timed_create_and_does_no_io() {
    let r = run("ioengine=filecreate\nnrfiles=10\nfilesize=8k\ncreate_on_open=1\nopenfiles=1\nfallocate=none");
    let j = job(&r);
    // Per file: the create (21.7 us, the job's completion latency), then its two I/Os of 4 KiB,
    // done as issued: counted, without latencies (fio's FIO_FAKEIO).
    assert_eq!((j.io.read.ios, j.io.read.bytes), (20, 10 * 8192));
    assert_eq!((j.io.read.clat.count(), j.io.read.clat.min(), j.io.read.clat.max()), (10, 21_700, 21_700));
    assert_eq!((j.io.read.lat.count(), j.io.read.slat.count()), (0, 0), "no I/O latencies");
    assert_eq!(j.runtime_ns, 10 * (21_700 + OVERHEADS_NS), "the files one after another");
    let fs = &kernel(&r).filesystems[0];
    assert_eq!((fs.fs.files, fs.fs.blocks_allocated), (10, 0), "ten empty files");
    // Each create dirtied its inode and bitmap into the journal; nothing reached the device
    // (no commit before the run ended) and no data was written.
    assert_eq!(fs.fs.dirtied.inode_bitmap, 10);
    assert_eq!((kernel(&r).device.writes, kernel(&r).device.reads), (0, 0));
}

#[test]
fn a_second_pass_of_filecreate_opens_the_files_it_made() {
    let r = run("ioengine=filecreate\nnrfiles=5\nloops=2");
    let c = &job(&r).io.read.clat;
    // Five creates, then five opens of existing files (1.5 us).
    assert_eq!((c.count(), c.min(), c.max()), (10, 1_500, 21_700));
    assert_eq!(c.mean(), (5.0 * 21_700.0 + 5.0 * 1_500.0) / 10.0);
    assert_eq!(kernel(&r).filesystems[0].fs.files, 5);
    assert_eq!(job(&r).io.read.ios, 10, "a file of bs (4 KiB) each pass: fio's get_file_size");
}

#[test]
fn filestat_and_dirstat_stat_what_fio_made_before_the_run() {
    let r = run("ioengine=filestat\nnrfiles=4\nfilesize=16k");
    let j = job(&r);
    assert_eq!((j.io.read.ios, j.io.read.clat.count(), j.io.read.clat.mean()), (16, 4, 800.0));
    let fs = &kernel(&r).filesystems[0].fs;
    assert_eq!((fs.files, fs.blocks_allocated), (4, 16), "laid out with their blocks (the job reads)");
    assert_eq!(kernel(&r).device.reads, 0, "a stat reads nothing: the inode is cached");
    let r = run("ioengine=dirstat\nnrfiles=3\nfilesize=4k\ndirectory=a/b");
    let j = job(&r);
    assert_eq!((j.io.read.clat.count(), j.io.read.clat.mean()), (3, 800.0));
    // a, a/b and the three directories the job stats.
    assert_eq!(kernel(&r).filesystems[0].fs.directories, DIRS_AFTER_MKFS + 5);
}

#[test]
fn filedelete_unlinks_the_laid_out_files_and_frees_their_blocks() {
    let r = run("ioengine=filedelete\nnrfiles=4\nfilesize=16k\nunlink=0");
    let j = job(&r);
    assert_eq!((j.io.read.clat.count(), j.io.read.clat.mean()), (4, 12_200.0));
    let fs = &kernel(&r).filesystems[0].fs;
    assert_eq!((fs.files, fs.blocks_allocated, fs.blocks_freed), (0, 16, 16));
    // unlink=1 changes nothing: fio's unlink at the end finds the files gone.
    let again = run("ioengine=filedelete\nnrfiles=4\nfilesize=16k\nunlink=1");
    assert_eq!(kernel(&again).filesystems[0].fs.blocks_freed, 16);
    assert_eq!(job(&again).io.read.clat.count(), 4);
}

#[test]
fn dircreate_makes_directories_and_unlink_removes_them_at_the_end() {
    let r = run("ioengine=dircreate\nnrfiles=3\nrw=write");
    let j = job(&r);
    assert_eq!((j.io.write.clat.count(), j.io.write.clat.mean(), j.io.read.ios), (3, 27_900.0, 0));
    let fs = &kernel(&r).filesystems[0].fs;
    assert_eq!((fs.directories, fs.blocks_allocated), (DIRS_AFTER_MKFS + 3, 3), "a block each");
    // With unlink, each is removed (rmdir, 15.1 us) after the job's runtime, which ends after
    // the last directory's mkdir.
    let r = run("ioengine=dircreate\nnrfiles=3\nunlink=1");
    let fs = &kernel(&r).filesystems[0].fs;
    assert_eq!((fs.directories, fs.blocks_freed), (DIRS_AFTER_MKFS, 3));
    assert_eq!(job(&r).runtime_ns, 3 * (27_900 + OVERHEADS_NS));
}

#[test]
fn dirdelete_removes_directories_made_before_the_run() {
    let r = run("ioengine=dirdelete\nnrfiles=5\nfilesize=4k");
    assert_eq!((job(&r).io.read.clat.count(), job(&r).io.read.clat.mean()), (5, 15_100.0));
    assert_eq!(kernel(&r).filesystems[0].fs.directories, DIRS_AFTER_MKFS);
}

#[test]
fn a_deleting_engine_ends_after_its_first_pass_when_time_based() {
    // fio's second pass fails (the files are gone) and ends the job; here the job ends there,
    // long before its runtime.
    let r = run("ioengine=filedelete\nnrfiles=2\nfilesize=4k\ntime_based\nruntime=1");
    assert_eq!(job(&r).io.read.clat.count(), 2);
    assert_eq!(job(&r).runtime_ns, 2 * (12_200 + OVERHEADS_NS));
    // A stat engine goes on for its runtime, a pass after another.
    let r = run("ioengine=filestat\nnrfiles=2\nfilesize=4k\ntime_based\nruntime=1ms");
    // A stat every 3.8 us (0.8 us and the overheads) from 0 while before 1 ms: 264, the last
    // returning after the runtime, as fio's last I/O does.
    assert_eq!(job(&r).io.read.clat.count(), 1_000_000u64.div_ceil(800 + OVERHEADS_NS));
}

#[test]
fn a_create_on_a_full_filesystem_ends_the_job() {
    // One block group (128 MiB): 8,192 inodes, the first 11 ext4's own (the root's, 2, and
    // lost+found's, 11, among them). The creates past the
    // last free inode fail (ENOSPC) and the job ends there, as fio's ends on the error.
    let text = format!(
        "{EXT4}[[tenant]]\nname = \"t\"\nregion = {{ offset = \"0\", size = \"128MiB\" }}\nfio = \"\"\"\n[j]\n\
         ioengine=filecreate\nnrfiles=9000\n\"\"\"\n"
    );
    let r = run_checked(&text, 1_000);
    let fs = &kernel(&r).filesystems[0].fs;
    assert_eq!(fs.free_inodes, 0);
    assert_eq!(job(&r).io.read.clat.count(), fs.files);
    assert_eq!(fs.files, 8_192 - 11, "every inode but the first 11");
}

#[test]
fn a_rate_limit_paces_the_files_i_os_not_their_opens() {
    // Two files of 16 KiB (four I/Os each), 1,000 I/Os a second: one stat per file, the I/Os
    // a millisecond apart (fio's linear rate), the first at once.
    let r = run("ioengine=filestat\nnrfiles=2\nfilesize=16k\nrate_iops=1000");
    let j = job(&r);
    assert_eq!((j.io.read.clat.count(), j.io.read.ios), (2, 8));
    assert_eq!(j.runtime_ns, 7_000_000, "the last I/O at 7 ms");
}

#[test]
fn the_calls_cost_what_kernel_calls_says() {
    let text = format!(
        "{EXT4}[kernel.calls]\nmkdir = \"40us\"\nrmdir = \"7us\"\n{}",
        tenant("ioengine=dircreate\nnrfiles=2\nunlink=1")
    );
    let r = run_checked(&text, 1);
    assert_eq!(job(&r).io.read.clat.mean(), 40_000.0);
    let s = scenario(&text);
    let calls = s.kernel.unwrap().calls;
    assert_eq!((calls.mkdir.0, calls.rmdir.0), (40_000, 7_000));
}

#[test]
fn an_engine_needs_a_filesystem_and_its_own_files() {
    let no_fs = "[device]\npreset = \"null\"\n";
    let e = load_err(&format!("{no_fs}{}", tenant("ioengine=filecreate")));
    assert!(e.contains("ioengine=filecreate") && e.contains("filesystem = \"ext4\""), "{e}");
    let e = load_err(&format!("{no_fs}[kernel]\n{}", tenant("ioengine=dirstat\nfilesize=4k")));
    assert!(e.contains("ioengine=dirstat"), "{e}");
    // Two jobs on one file, one of them an engine's.
    let two = format!(
        "{EXT4}[[tenant]]\nname = \"t\"\nregion = {{ offset = \"0\", size = \"1GiB\" }}\nfio = \"\"\"\n\
         [a]\nrw=write\nsize=8k\nfilename=f\n[b]\nioengine=filestat\nfilesize=4k\nfilename=f\n\"\"\"\n"
    );
    let Err(e) = Simulator::new(scenario(&two)) else { panic!("two jobs on one file") };
    assert!(e.to_string().contains("'f' is the file of more than one job"), "{e}");
    let e = load_err(&format!("{EXT4}[kernel.calls]\nmkdir = \"0s\"\n{}", tenant("ioengine=dircreate")));
    assert!(e.contains("kernel.calls.mkdir: must be longer than zero"), "{e}");
}

/// fio's examples for the engines (fio's `examples/*-ioengine.fio`, their options as fio ships
/// them; `filecreate-ioengine.fio`'s 31,250 files per job are 312 here, to keep the test quick).
const EXAMPLES: [(&str, &str, usize, u64); 6] = [
    (
        "filecreate-ioengine",
        "[global]\ncreate_on_open=1\nnrfiles=312\nioengine=filecreate\nfallocate=none\nfilesize=4k\nopenfiles=1\n\n\
         [t0]\n[t1]\n[t2]\n[t3]\n[t4]\n[t5]\n[t6]\n[t7]\n[t8]\n[t9]\n[t10]\n[t11]\n[t12]\n[t13]\n[t14]\n[t15]\n",
        16,
        312,
    ),
    (
        "filestat-ioengine",
        "[global]\nioengine=filestat\nnumjobs=1\nfilesize=4k\nnrfiles=200\nthread\n\n[t0]\n[t1]\n[t2]\n[t3]\n[t4]\n[t5]\n",
        6,
        200,
    ),
    (
        "filedelete-ioengine",
        "[global]\nioengine=filedelete\nfilesize=4k\nnrfiles=200\nunlink=0\n\n[t0]\n[t1]\n[t2]\n[t3]\n[t4]\n[t5]\n",
        6,
        200,
    ),
    (
        "dircreate-ioengine",
        "[global]\ncreate_on_open=1\nnrfiles=30\nioengine=dircreate\nfallocate=none\nfilesize=4k\nopenfiles=1\n\n\
         [t0]\n[t1]\n[t2]\n[t3]\n[t4]\n[t5]\n",
        6,
        30,
    ),
    (
        "dirstat-ioengine",
        "[global]\nioengine=dirstat\nnumjobs=10\nfilesize=4k\nnrfiles=5\nthread\n\n[t0]\n[t1]\n[t2]\n[t3]\n[t4]\n[t5]\n",
        60,
        5,
    ),
    (
        "dirdelete-ioengine",
        "[global]\nioengine=dirdelete\nfilesize=4k\nnrfiles=200\nunlink=0\n\n[t0]\n[t1]\n[t2]\n[t3]\n[t4]\n[t5]\n",
        6,
        200,
    ),
];

#[test]
fn fio_s_example_files_for_the_engines_run_as_they_are() {
    let dir = std::env::temp_dir().join(format!("flashmux-engines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text, jobs, files) in EXAMPLES {
        let path = dir.join(format!("{name}.fio"));
        std::fs::write(&path, text).unwrap();
        let s = Scenario::from_fio_file(&path, "null").unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(s.tenants.len(), 1, "{name}: the jobs share one filesystem");
        assert!(s.kernel.is_some(), "{name}: with ext4");
        let mut sim = Simulator::new(s).unwrap_or_else(|e| panic!("{name}: {e}"));
        sim.check_invariants_every(97);
        sim.run();
        let r = sim.finish();
        assert_eq!(r.jobs.len(), jobs, "{name}");
        for j in &r.jobs {
            assert_eq!(j.io.read.clat.count(), files, "{name}: job {} times a call per file", j.name);
            assert_eq!(j.io.read.ios, files, "{name}: a 4 KiB file, a 4 KiB I/O");
        }
        let fs = &kernel(&r).filesystems[0].fs;
        let made = (jobs as u64) * files;
        let expected = match name {
            "filecreate-ioengine" | "filestat-ioengine" => (made, DIRS_AFTER_MKFS),
            "dircreate-ioengine" | "dirstat-ioengine" => (0, DIRS_AFTER_MKFS + made),
            _ => (0, DIRS_AFTER_MKFS),
        };
        assert_eq!((fs.files, fs.directories), expected, "{name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
