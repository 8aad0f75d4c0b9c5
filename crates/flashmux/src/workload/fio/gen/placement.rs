//! The directive specific value of each write ([`IoUnit::dspec`](super::IoUnit::dspec)), ported
//! from fio's `dp_fill_dspec_data` (`dataplacement.c`).
//!
//! Only writes get one; reads and trims carry 0, and do not move round robin on.
//! - `roundrobin` takes the job's IDs in turn, one write each. fio keeps the position per file
//!   (`pli_loc` of each file's `ruhs_info`), and so does this, per file of a job with
//!   `nrfiles`; it is never reset, not even by a new loop.
//! - `random` draws one of the job's IDs uniformly for each write, from a random stream of its
//!   own (fio's `fdp_state`, one per job), so a job's offsets, sizes and directions are the same
//!   with or without placement. Like the job's other streams, it replays at every loop with
//!   `randrepeat` (fio reseeds `fdp_state` in `td_fill_rand_seeds`).
//! - `scheme` takes the first `dp_scheme` entry whose `[start, end)` holds the write's offset
//!   in its file (the job's space, or the file's range with `nrfiles`) and gives its `pli`; an
//!   offset no entry holds gets 0.
//!
//! Example: `plids=4,5` round robin over `rw=randrw`: the writes carry 4, 5, 4, 5, ... whatever
//! reads come between them.

use rand::SeedableRng;

use super::setup::stream_seed;
use crate::workload::fio::dist::{self, JobRng};
use crate::workload::fio::job::{FioJob, PlidSelect, SchemeEntry};
use crate::workload::fio::{Dir, FioError};

/// The random stream of `plid_select=random`.
const SEED_PLACEMENT: u64 = 5;

/// One instance's placement state.
#[derive(Debug, Clone)]
pub(super) struct Placer {
    /// The IDs a write may carry (fio's `plis`): for FDP the resolved placement IDs, for
    /// streams the stream IDs. Unused by `scheme`.
    plis: Box<[u16]>,
    select: Select,
    /// Round robin's next position, per file (fio's `pli_loc`).
    next: Vec<usize>,
    rng: JobRng,
    /// `rng` as it was at the start, for loops that replay it.
    pass_seed: JobRng,
}

#[derive(Debug, Clone)]
enum Select {
    RoundRobin,
    Random,
    Scheme(Box<[SchemeEntry]>),
}

impl Placer {
    /// The placement of instance `clone_index` of `job`, `None` without one. Round robin and
    /// random need the job's list of IDs: an FDP job that gave no `plids` must have been
    /// through [`FioJob::resolve_placement`] first.
    pub(super) fn new(job: &FioJob, clone_index: u32, seed: u64) -> Result<Option<Placer>, FioError> {
        let Some(placement) = &job.data_placement else {
            return Ok(None);
        };
        let select = match &placement.select {
            PlidSelect::RoundRobin => Select::RoundRobin,
            PlidSelect::Random => Select::Random,
            PlidSelect::Scheme(entries) => Select::Scheme(entries.clone().into_boxed_slice()),
        };
        let plis: Box<[u16]> = match (&placement.ids, &select) {
            (Some(ids), _) if !ids.is_empty() => ids.clone().into_boxed_slice(),
            (_, Select::Scheme(_)) => Box::new([]),
            _ => {
                return Err(job.error(
                    "dataplacement without plids: the drive's placement IDs are not known (FioJob::resolve_placement was not called)",
                ))
            }
        };
        let rng = JobRng::seed_from_u64(stream_seed(seed, clone_index, SEED_PLACEMENT));
        Ok(Some(Placer { plis, select, next: vec![0], pass_seed: rng.clone(), rng }))
    }

    /// The value an I/O in `dir` to file `file` (0 for a job with one) at `offset` bytes into
    /// that file carries.
    #[inline]
    pub(super) fn dspec(&mut self, dir: Dir, file: usize, offset: u64) -> u16 {
        if dir != Dir::Write {
            return 0;
        }
        match &self.select {
            Select::RoundRobin => {
                if file >= self.next.len() {
                    self.next.resize(file + 1, 0);
                }
                let at = &mut self.next[file];
                if *at >= self.plis.len() {
                    *at = 0;
                }
                *at += 1;
                self.plis[*at - 1]
            }
            Select::Random => self.plis[dist::below(&mut self.rng, self.plis.len() as u64) as usize],
            Select::Scheme(entries) => entries.iter().find(|e| e.start <= offset && offset < e.end).map_or(0, |e| e.pli),
        }
    }

    /// A loop that replays the job's random streams starts `random`'s over too.
    pub(super) fn replay(&mut self) {
        self.rng = self.pass_seed.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::fio::parse_job_text;

    fn placer(body: &str) -> Placer {
        let job = parse_job_text(&format!("[t]\n{body}\n"), "t.fio", &|_| None).expect("job parses").jobs.remove(0);
        Placer::new(&job, 0, 9).expect("placement").expect("a placement")
    }

    /// Round robin keeps a position per file, and only writes move it.
    #[test]
    fn round_robin_per_file() {
        let mut p = placer("fdp=1\nplids=1-3");
        let got: Vec<u16> = [(Dir::Write, 0), (Dir::Write, 1), (Dir::Read, 0), (Dir::Write, 0), (Dir::Trim, 1), (Dir::Write, 1)]
            .into_iter()
            .map(|(d, f)| p.dspec(d, f, 0))
            .collect();
        assert_eq!(got, [1, 1, 0, 2, 0, 2]);
    }

    /// A job with neither plids nor a resolved list cannot pick; with a scheme it needs none.
    #[test]
    fn unresolved_fdp_is_refused_unless_the_scheme_decides() {
        let job = parse_job_text("[t]\nfdp=1\n", "t.fio", &|_| None).unwrap().jobs.remove(0);
        let e = Placer::new(&job, 0, 1).unwrap_err().to_string();
        assert!(e.contains("resolve_placement was not called"), "{e}");
        let mut job = job;
        job.data_placement.as_mut().unwrap().select = PlidSelect::Scheme(vec![SchemeEntry { start: 0, end: 8, pli: 2 }]);
        let mut p = Placer::new(&job, 0, 1).unwrap().unwrap();
        assert_eq!((p.dspec(Dir::Write, 0, 7), p.dspec(Dir::Write, 0, 8)), (2, 0));
    }
}
