//! A job's several files (`nrfiles`): their sizes and places, and which file each I/O goes to
//! (`file_service_type`), ported from fio's `filesetup.c` (`setup_files`, `get_rand_file_size`)
//! and `io_u.c` (`__get_next_file`, `get_next_file_rr`, `get_next_file_rand`).
//!
//! # Model
//! - **Sizes.** `filesize` (a size or a range) sizes each file — a range draws each file's size
//!   and rounds it down to the least block size, as `get_rand_file_size` does; without it each
//!   file is `size / nrfiles` bytes, and the whole blocks left over go one each to the first
//!   files (fio's `nr_fs_extra`). A block that would pass a file's end is not issued.
//! - **Places.** The files lie one after another from the start of the job's space, each from a
//!   4 KiB boundary: file `i`'s I/O has device offsets in `[start_i, start_i + size_i)`, and the
//!   job's region is from the first file's start to the last one's end. On a filesystem the kernel maps
//!   that range to the job's `i`-th file (`jobname.instance.i`), so the offsets are file
//!   coordinates, not where the filesystem put the blocks.
//! - **Each file its own stream.** Every file has its own generator ([`JobGen`]) — its own
//!   sequential position and random map, as each `fio_file` has — over its own range, with the
//!   job's `rw`, block sizes and distributions. A file is done when its range (or random map)
//!   is used up; with `norandommap` a random file never is.
//! - **The job's limits are the job's**: a pass ends when every file is done, or when the
//!   pass has done the sum of the files' sizes; `io_size` (with `filesize`, `size` is its
//!   default), `number_ios`, `loops` and `time_based` count over all files; a new pass starts
//!   every file again.
//! - **Picking the file** (`__get_next_file`): `roundrobin:N` takes the files in turn, `N` I/Os
//!   each; `sequential` stays with a file until it is done; `random:N` draws a file uniformly for
//!   every `N` I/Os; `zipf`, `pareto` and `normal` draw from the distribution over the files. A
//!   file that is done (its generator ended) is not picked again in the pass; the pass ends
//!   when every file is done. With a skewed service a used-up file starts over instead
//!   (`fio_file_reset` in `set_io_u_file`), so the job's volume ends the pass.
//! - **Syncs.** fio picks an I/O's file before deciding the I/O is a sync, so `fsync=N` syncs
//!   the file the next I/O would have gone to; `end_fsync` syncs every file in turn.
//!
//! # Worked example
//! `rw=write bs=4k size=24k nrfiles=3` in a space at 0: files of 8 KiB at 0, 8 KiB and 16 KiB;
//! round robin issues 0, 8K, 16K, 4K, 12K, 20K — each file's blocks in order, the files in turn.
//!
//! # Simplifications
//! - `rwmixread`'s direction runs are kept per file (fio keeps one per job).
//! - `offset` and `offset_increment` are refused with several files (fio applies them inside
//!   each file).
//! - `openfiles` does not limit how many are open: every file is open from the start.

use rand::SeedableRng;

use super::setup::{splitmix64, stream_seed};
use super::{IoUnit, JobGen};
use crate::workload::fio::dist::{self, JobRng, SkewSampler};
use crate::workload::fio::job::{FileService, FioJob, SizeSpec, ZoneMode};
use crate::workload::fio::FioError;

/// The random stream that draws files (`random`, skewed) and `filesize` ranges.
const SEED_FILES: u64 = 4;
/// Draws of a skewed distribution before it falls back to taking the files in turn (it may
/// rarely or never draw the last files left).
const MAX_SKEWED_DRAWS: u64 = 64;
/// Each file's range starts at a multiple of this many bytes.
const FILE_ALIGN: u64 = 4096;

/// Several files of one instance of a job, and which one is being served.
#[derive(Debug, Clone)]
pub(super) struct FileSet {
    /// Each file's generator, over its own range of the space; a file is done when its
    /// generator is (`JobGen::done`).
    gens: Vec<JobGen>,
    done_count: usize,
    service: Service,
    /// The file being served and the I/Os left to it before the next pick.
    current: Option<usize>,
    left: u64,
    /// Where round robin looks next (fio's `next_file`).
    next_rr: usize,
    rng: JobRng,
}

#[derive(Debug, Clone)]
enum Service {
    RoundRobin(u64),
    Sequential,
    Random(u64),
    Skewed(SkewSampler),
}

impl FileSet {
    /// The files of instance `clone_index` of `job` (with `nrfiles > 1`) in the space
    /// `[space_offset, space_offset + space_len)`: the set, the bytes from the first file's
    /// start to the last one's end, and the job's `io_size` (or `size` with `filesize`).
    pub(super) fn new(
        job: &FioJob,
        clone_index: u32,
        space_offset: u64,
        space_len: u64,
        min_align: u64,
        seed: u64,
    ) -> Result<(FileSet, u64, Option<u64>), FioError> {
        if job.offset != SizeSpec::Bytes(0) || job.offset_increment != SizeSpec::Bytes(0) {
            return Err(job.error("offset and offset_increment are not modelled with several files (nrfiles > 1)"));
        }
        let mut rng = JobRng::seed_from_u64(stream_seed(seed, clone_index, SEED_FILES));
        let sizes = file_sizes(job, space_len, &mut rng)?;
        // Each file's range starts on a page (the files are consecutive, not packed).
        let mut starts = Vec::with_capacity(sizes.len());
        let mut end = 0u64;
        for &size in &sizes {
            let start = end.next_multiple_of(FILE_ALIGN.max(min_align));
            starts.push(start);
            end = start.saturating_add(size);
        }
        if end > space_len {
            return Err(
                job.error(format!("its {} files take {end} bytes, more than its {space_len}-byte space", sizes.len()))
            );
        }
        let span = end;
        let nr = sizes.len() as u64;
        // With `filesize`, `size` is only the default for `io_size` (HOWTO, "filesize").
        let volume = match (job.io_size, job.filesize, &job.size) {
            (Some(v), _, _) => Some(v),
            (None, Some(_), Some(SizeSpec::Bytes(b))) => Some(*b),
            _ => None,
        };
        let mut gens = Vec::with_capacity(sizes.len());
        let mut file = one_file(job);
        let files_seed = stream_seed(seed, clone_index, SEED_FILES);
        for (i, (&size, &start)) in sizes.iter().zip(&starts).enumerate() {
            file.filesize = Some((size, size));
            let file_seed = splitmix64(files_seed ^ splitmix64(i as u64 + 1));
            let mut gen = JobGen::new(&file, clone_index, space_offset + start, size, min_align, file_seed)
                .map_err(|e| job.error(format!("file {i} of {nr} ({size} bytes): {e}")))?;
            gen.in_set = true;
            gens.push(gen);
        }
        let service = match &job.file_service {
            FileService::RoundRobin(n) => Service::RoundRobin(*n),
            FileService::Sequential => Service::Sequential,
            FileService::Random(n) => Service::Random(*n),
            FileService::Skewed(d) => Service::Skewed(
                SkewSampler::new(d, nr, 0)
                    .ok_or_else(|| job.error("file_service_type: the distribution cannot draw files"))?,
            ),
        };
        let set = FileSet { gens, done_count: 0, service, current: None, left: 0, next_rr: 0, rng };
        Ok((set, span, volume))
    }

    /// The sum of the files' sizes.
    pub(super) fn total_size(&self) -> u64 {
        self.gens.iter().map(|g| g.space_len).sum()
    }

    /// The job starts a pass: every file from its start again (fio's `clear_io_state`).
    pub(super) fn restart(&mut self) {
        self.gens.iter_mut().for_each(JobGen::restart_in_set);
        self.done_count = 0;
    }

    pub(super) fn len(&self) -> usize {
        self.gens.len()
    }

    /// File `i`'s range of the device: (first byte, length).
    pub(super) fn range(&self, i: usize) -> (u64, u64) {
        (self.gens[i].space_offset, self.gens[i].space_len)
    }

    /// The file the last I/O came from.
    pub(super) fn served(&self) -> usize {
        self.current.unwrap_or(0)
    }

    /// The file whose range holds `offset` (the files are in offset order).
    pub(super) fn file_of(&self, offset: u64) -> usize {
        self.gens.partition_point(|g| g.space_offset <= offset).saturating_sub(1)
    }

    /// The ramp ended: every file's generator clears its completed-I/O counts.
    pub(super) fn end_ramp(&mut self) {
        self.gens.iter_mut().for_each(JobGen::end_ramp);
    }

    /// The next I/O of the file fio would serve next; `None` once every file is done.
    pub(super) fn next(&mut self) -> Option<IoUnit> {
        loop {
            let f = self.pick()?;
            if let Some(io) = self.gens[f].next() {
                return Some(io);
            }
            // fio's `set_io_u_file`: with a skewed file service a used-up file starts over
            // (`fio_file_reset`); otherwise it is done.
            if matches!(self.service, Service::Skewed(_)) {
                self.gens[f].restart_in_set();
                if let Some(io) = self.gens[f].next() {
                    return Some(io);
                }
            }
            debug_assert!(self.gens[f].done, "a file whose generator ended");
            self.done_count += 1;
        }
    }

    /// fio's `__get_next_file`.
    fn pick(&mut self) -> Option<usize> {
        if self.done_count == self.gens.len() {
            return None;
        }
        if let Some(f) = self.current.filter(|&f| !self.gens[f].done) {
            if matches!(self.service, Service::Sequential) {
                return Some(f);
            }
            if self.left > 0 {
                self.left -= 1;
                return Some(f);
            }
        }
        let (f, per_pick) = match self.service {
            Service::RoundRobin(n) => (self.round_robin(), n),
            Service::Sequential => (self.round_robin(), 1),
            Service::Random(n) => (self.random(), n),
            Service::Skewed(_) => (self.skewed(), 1),
        };
        self.current = Some(f);
        self.left = per_pick - 1;
        Some(f)
    }

    /// fio's `get_next_file_rr`: the next file not done, from where the last pick left off.
    fn round_robin(&mut self) -> usize {
        let n = self.gens.len();
        loop {
            let f = self.next_rr;
            self.next_rr = (f + 1) % n;
            if !self.gens[f].done {
                return f;
            }
        }
    }

    /// fio's `get_next_file_rand` for `random`: uniform draws until one is not done.
    fn random(&mut self) -> usize {
        let n = self.gens.len() as u64;
        loop {
            let f = dist::below(&mut self.rng, n) as usize;
            if !self.gens[f].done {
                return f;
            }
        }
    }

    fn skewed(&mut self) -> usize {
        let Service::Skewed(s) = &self.service else { unreachable!("a skewed file service") };
        for _ in 0..MAX_SKEWED_DRAWS * self.gens.len() as u64 {
            let f = s.sample(&mut self.rng) as usize;
            if !self.gens[f].done {
                return f;
            }
        }
        self.round_robin()
    }
}

/// fio's `setup_files`: each file's size (see the header).
fn file_sizes(job: &FioJob, space_len: u64, rng: &mut JobRng) -> Result<Vec<u64>, FioError> {
    let nr = u64::from(job.nrfiles);
    let bs = job.min_block_size();
    let sizes: Vec<u64> = match job.filesize {
        Some((low, high)) if high == low => vec![low; nr as usize],
        // fio's `get_rand_file_size`.
        Some((low, high)) => (0..nr)
            .map(|_| {
                let size = low + (((high - low) as f64) * dist::unit(rng)) as u64;
                size - size % bs
            })
            .collect(),
        None => {
            let total = match job.size {
                Some(SizeSpec::Bytes(b)) => b,
                Some(SizeSpec::Percent(p)) => (u128::from(space_len) * u128::from(p) / 100) as u64,
                None => space_len,
            };
            let each = total / nr;
            let extra = (total - each * nr) / bs;
            (0..nr).map(|i| each + if i < extra { bs } else { 0 }).collect()
        }
    };
    match sizes.iter().position(|&s| s == 0) {
        Some(i) => Err(job.error(format!("file {i} of {nr} would be empty: give a larger size or filesize"))),
        None => Ok(sizes),
    }
}

/// The job as each of its files sees it (the caller sets the file's size): a file used once
/// per pass of the job; the job's limits are the job's, not the file's; no start delay (the
/// job's is drawn once).
fn one_file(job: &FioJob) -> FioJob {
    FioJob {
        nrfiles: 1,
        // fio turns strided zones off for a job with several files.
        zone_mode: ZoneMode::None,
        size: None,
        io_size: None,
        number_ios: None,
        loops: 1,
        startdelay: (0, 0),
        data_placement: None,
        job_options: Vec::new(),
        inherited_options: Vec::new(),
        ..job.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::parse_job_text;
    use super::*;
    use std::collections::BTreeMap;

    const K: u64 = 1024;

    fn gen(body: &str, space: u64) -> Result<JobGen, FioError> {
        let job = parse_job_text(&format!("[t]\n{body}\n"), "t.fio", &|_| None).expect("job parses").jobs.remove(0);
        JobGen::new(&job, 0, 0, space, 512, 7)
    }

    fn offsets(body: &str, space: u64) -> Vec<u64> {
        let mut g = gen(body, space).expect("job fits");
        let ios: Vec<u64> = std::iter::from_fn(|| g.next()).take(1_000_000).map(|io| io.offset).collect();
        assert!(ios.len() < 1_000_000, "runaway generator");
        ios
    }

    #[test]
    fn round_robin_takes_the_files_in_turn() {
        // The header's worked example: three 8 KiB files at 0, 8K, 16K.
        let got = offsets("rw=write\nbs=4k\nsize=24k\nnrfiles=3", 1 << 20);
        assert_eq!(got, [0, 8 * K, 16 * K, 4 * K, 12 * K, 20 * K]);
        let g = gen("rw=write\nbs=4k\nsize=24k\nnrfiles=3", 1 << 20).unwrap();
        assert_eq!((g.file_count(), g.file_range(1), g.region()), (3, (8 * K, 8 * K), (0, 24 * K)));
        assert_eq!((g.file_of(0), g.file_of(8 * K - 1), g.file_of(8 * K), g.file_of(23 * K)), (0, 0, 1, 2));
    }

    #[test]
    fn round_robin_with_a_count_and_sequential() {
        // 16 KiB files: roundrobin:2 gives two blocks of each file in turn.
        let rr2 = offsets("rw=read\nbs=4k\nsize=48k\nnrfiles=3\nfile_service_type=roundrobin:2", 1 << 20);
        let k = |v: &[u64]| v.iter().map(|x| x * K).collect::<Vec<_>>();
        assert_eq!(rr2, k(&[0, 4, 16, 20, 32, 36, 8, 12, 24, 28, 40, 44]));
        // sequential: each file to its end (a count after it is accepted and ignored).
        let seq = offsets("rw=read\nbs=4k\nsize=48k\nnrfiles=3\nfile_service_type=sequential:5", 1 << 20);
        assert_eq!(seq, (0..12).map(|i| i * 4 * K).collect::<Vec<_>>());
    }

    #[test]
    fn sizes_split_as_fio_splits_them() {
        // size=40k over 3 files: 13653 bytes each, (40960 - 40959) / 4096 = 0 extra blocks;
        // each file takes 3 whole 4 KiB blocks (the 4th would pass its end), from 4 KiB
        // boundaries 0, 16K, 32K.
        let g = gen("rw=write\nbs=4k\nsize=40k\nnrfiles=3", 1 << 20).unwrap();
        assert_eq!((0..3).map(|i| g.file_range(i)).collect::<Vec<_>>(), [(0, 13653), (16 * K, 13653), (32 * K, 13653)]);
        assert_eq!(offsets("rw=write\nbs=4k\nsize=40k\nnrfiles=3\nfile_service_type=sequential", 1 << 20).len(), 9);
        // Whole blocks left over go one each to the first files: 513,536 bytes over 1,000
        // files is 513 bytes each (513,000) and (513,536 - 513,000) / 512 = 1 extra block.
        let g = gen("rw=write\nbs=512\nsize=513536\nnrfiles=1000", 1 << 30).unwrap();
        assert_eq!((g.file_range(0).1, g.file_range(1).1), (513 + 512, 513));
    }

    #[test]
    fn a_filesize_range_draws_each_file_in_whole_blocks() {
        let g = gen("rw=read\nbs=4k\nfilesize=8k-64k\nnrfiles=50", 1 << 30).unwrap();
        let sizes: Vec<u64> = (0..50).map(|i| g.file_range(i).1).collect();
        assert!(sizes.iter().all(|&s| (8 * K..=64 * K).contains(&s) && s % (4 * K) == 0), "{sizes:?}");
        assert!(sizes.iter().collect::<std::collections::BTreeSet<_>>().len() > 5, "sizes are drawn: {sizes:?}");
        // Every block of every file read once.
        let got = offsets("rw=read\nbs=4k\nfilesize=8k-64k\nnrfiles=50", 1 << 30);
        let want: u64 = sizes.iter().map(|s| s / (4 * K)).sum();
        assert_eq!(got.len() as u64, want);
    }

    #[test]
    fn random_service_covers_every_block_of_every_file_once_and_spreads_over_files() {
        let body = "rw=randwrite\nbs=4k\nnrfiles=8\nfilesize=64k\nfile_service_type=random";
        let g = gen(body, 1 << 30).unwrap();
        let got = offsets(body, 1 << 30);
        let mut seen: Vec<u64> = got.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!((got.len(), seen.len()), (128, 128), "each of 8 x 16 blocks once");
        // The first 32 I/Os touch most files (round robin would touch all 8; one file for all
        // 32 is what `sequential` does).
        let files: BTreeMap<usize, usize> = got[..32].iter().fold(BTreeMap::new(), |mut m, &o| {
            *m.entry(g.file_of(o)).or_default() += 1;
            m
        });
        assert!(files.len() >= 6, "{files:?}");
        // random:4 switches file only every 4 I/Os.
        let g4 = gen("rw=randwrite\nbs=4k\nnrfiles=8\nfilesize=64k\nfile_service_type=random:4", 1 << 30).unwrap();
        let got4 = offsets("rw=randwrite\nbs=4k\nnrfiles=8\nfilesize=64k\nfile_service_type=random:4", 1 << 30);
        for run in got4.chunks(4) {
            assert!(run.iter().all(|&o| g4.file_of(o) == g4.file_of(run[0])), "{run:?}");
        }
    }

    #[test]
    fn zipf_service_favours_the_first_files() {
        let body =
            "rw=randread\nbs=4k\nnrfiles=16\nfilesize=1m\nfile_service_type=zipf:1.2\nnorandommap\nnumber_ios=4000";
        let g = gen(body, 1 << 30).unwrap();
        let got = offsets(body, 1 << 30);
        let mut per_file = [0u32; 16];
        got.iter().for_each(|&o| per_file[g.file_of(o)] += 1);
        let top = *per_file.iter().max().unwrap();
        assert!(top > 4 * (got.len() as u32 / 16), "one file gets far more than an even share: {per_file:?}");
    }

    #[test]
    fn io_size_is_shared_over_the_files() {
        // 4 files of 64 KiB, io_size 128 KiB: each file 32 KiB (8 blocks).
        let got = offsets("rw=write\nbs=4k\nnrfiles=4\nfilesize=64k\nio_size=128k", 1 << 30);
        assert_eq!(got.len(), 32);
        // filesize with size: size is the default io_size.
        let got = offsets("rw=write\nbs=4k\nnrfiles=4\nfilesize=64k\nsize=64k", 1 << 30);
        assert_eq!(got.len(), 16);
    }

    #[test]
    fn time_based_files_never_end() {
        let mut g = gen("rw=randwrite\nbs=4k\nnrfiles=3\nfilesize=16k\ntime_based\nruntime=1", 1 << 30).unwrap();
        assert_eq!((0..1000).filter_map(|_| g.next()).count(), 1000);
    }

    #[test]
    fn bad_file_sets_are_refused() {
        let err = |body: &str, space: u64| gen(body, space).unwrap_err().to_string();
        assert!(err("rw=write\nnrfiles=4\nfilesize=1m", 2 << 20).contains("more than its 2097152-byte space"));
        assert!(err("rw=write\nnrfiles=4\nfilesize=1m\noffset=4k", 64 << 20).contains("offset"));
        assert!(err("rw=write\nnrfiles=4\nsize=2", 64 << 20).contains("would be empty"));
    }

    #[test]
    fn deterministic_per_seed() {
        let body = "rw=randrw\nbs=4k\nnrfiles=5\nfilesize=32k-128k\nfile_service_type=random:3";
        assert_eq!(offsets(body, 1 << 30), offsets(body, 1 << 30));
    }
}
