//! Built-in workload personalities: named request streams standing for the workloads papers D and
//! E ran — Filebench's `fileserver`, `varmail` and `webproxy`, and the `msn`, `exchange` and
//! `financial` block traces — that a scenario's tenant names with `personality = "<name>"`.
//!
//! Each is a fio job in flashmux's dialect, run by the same parser and generator as any other job:
//! `flashmux personalities <name>` prints exactly what runs, to copy and change. A personality is
//! the block-level stream the tenant's device sees — direction mix (`rwmixread`), request sizes
//! per direction (`bssplit`), sequentiality (`percentage_random`), concurrency (`iodepth`) and
//! flushes (`fsync`) — not the file system above it, and it has no runtime of its own: it runs
//! until the scenario stops (or has moved as many bytes as its region holds). How each was derived
//! and how its measured mix compares with the papers' is in docs/MODEL.md ("Workload
//! personalities").

use super::fio::{parse_job_text, Dir, FioError, JobFile, JobGen};
use crate::engine::derive_seed;

/// A named workload: its fio job and what the papers report for it.
#[derive(Debug)]
pub struct Personality {
    pub name: &'static str,
    /// One line for listings.
    pub summary: &'static str,
    /// The fio job file's text.
    pub job: &'static str,
    pub target: Target,
}

/// What a paper reports for a workload.
#[derive(Debug)]
pub struct Target {
    /// Write requests per read request.
    pub write_read: f64,
    /// Mean size of all read and write requests, in KiB.
    pub mean_kib: Option<f64>,
    pub source: &'static str,
}

const PAPER_D: &str = "paper D, Table 3";

/// Filebench's `fileserver` (`fileserver.f`: 10,000 files, gamma(1.5)-distributed sizes with a
/// mean of 128 KiB, 50 threads). Each thread's loop creates a file and writes it whole, appends
/// 0–16 KiB (uniform) to a random file, reads a random file whole, deletes one and stats one.
///
/// As block requests: the new file in one write of its 4 KiB pages (writeback builds requests of
/// up to 512 KiB: one per file but for 0.7% of them); the append as the pages it dirties, the
/// file's partial last page included (4–20 KiB, mean 12 KiB); the read in 128 KiB readahead
/// windows (1.54 per file, so 35% of reads continue the previous one: `percentage_random=65`),
/// with 35% of whole-file reads served by the guest's page cache (a 1 GiB guest holding about a
/// third of the ~1 GiB file set), which gives Filebench's own 2 writes per read (`rwmixread=33`).
/// Metadata and journal writes are left out. 50 threads, each waiting on at most one request:
/// `iodepth=50`. Target (paper D): 2 writes per read, 72 KiB per request.
pub const FILESERVER: Personality = Personality {
    name: "fileserver",
    summary: "Filebench fileserver: whole-file writes, appends, whole-file reads (2 W : 1 R), 50 threads",
    job: include_str!("personality/fileserver.fio"),
    target: Target { write_read: 2.0, mean_kib: Some(72.0), source: PAPER_D },
};

/// Filebench's `varmail` (`varmail.f`: 1,000 files, gamma(1.5)-distributed sizes with a mean of
/// 16 KiB, 16 threads). Each loop deletes a file; creates one, appends 0–16 KiB to it and
/// fsyncs it; reads a random file whole, appends 0–16 KiB to it and fsyncs it; reads another
/// random file whole.
///
/// As block requests: two reads of whole files, one request each (all but about one file in
/// 40,000 is under 128 KiB), and two writes, each carrying the append's pages and the ext4
/// journal commit its fsync forces (descriptor, inode-table block, block bitmap, group
/// descriptor and commit block: 20 KiB), each followed by a flush (`fsync=1`). Issuing the
/// journal commit as a request of its own would make 2 writes per read; paper D's 1 is
/// Filebench's own count, which the personality keeps. All offsets random. 16 threads:
/// `iodepth=16`. Target (paper D): 1 write per read, 24 KiB per request.
pub const VARMAIL: Personality = Personality {
    name: "varmail",
    summary: "Filebench varmail: fsync'd appends and whole-file reads of small files (1 W : 1 R), 16 threads",
    job: include_str!("personality/varmail.fio"),
    target: Target { write_read: 1.0, mean_kib: Some(24.0), source: PAPER_D },
};

/// Filebench's `webproxy` (`webproxy.f`: 10,000 files, gamma(1.5)-distributed sizes with a mean
/// of 16 KiB, 100 threads). Each loop deletes a file, creates one with a single append of 0–16
/// KiB (`meaniosize`), and reads five random files whole.
///
/// As block requests: one write of the new file's pages (4–16 KiB) and five reads of whole files
/// (as varmail's), all at random offsets. 100 threads: `iodepth=100`. Paper D did not run it;
/// paper E ran it with 400,000 files and 50 threads and counted 1 write per 5 reads, the target.
pub const WEBPROXY: Personality = Personality {
    name: "webproxy",
    summary: "Filebench webproxy: one small-file write per five whole-file reads (1 W : 5 R), 100 threads",
    job: include_str!("personality/webproxy.fio"),
    target: Target { write_read: 0.2, mean_kib: None, source: "paper E, Table 2" },
};

/// The MSN storage file server trace (Microsoft production server traces, SNIA IOTTA;
/// Kavalanekar et al., IISWC 2008) as paper D characterises it: 66.7 writes per read, 22.5 KiB
/// per request. The sizes (4–64 KiB, a third of them 4 KiB) and the 60% random offsets are
/// assumed, the sizes' shares chosen to give that mean. fio's `rwmixread` is a whole percentage
/// (1% reads is 99 writes per read, 2% is 49), so two jobs alike but for reading 1% and 2% of the
/// time, 8 requests outstanding each, read 1.5% between them: 65.7 writes per read.
pub const MSN: Personality = Personality {
    name: "msn",
    summary: "MSN storage file server trace: almost all writes (66.7 W : 1 R), 4-64 KiB",
    job: include_str!("personality/msn.fio"),
    target: Target { write_read: 66.7, mean_kib: Some(22.5), source: PAPER_D },
};

/// The Microsoft Exchange server trace (Microsoft production server traces, SNIA IOTTA) as paper
/// D characterises it: 1.5 writes per read (`rwmixread=40`), 12.5 KiB per request. Exchange
/// 2007's database (ESE) reads and writes 8 KiB pages at random; larger reads stand for
/// prereads, smaller and larger writes for transaction-log writes and checkpoint runs, of which
/// 30% continue the previous write. The shares are assumed, chosen to give the mean; 16
/// requests outstanding, assumed.
pub const EXCHANGE: Personality = Personality {
    name: "exchange",
    summary: "Exchange server trace: 8 KiB database pages plus log writes (1.5 W : 1 R), 4-64 KiB",
    job: include_str!("personality/exchange.fio"),
    target: Target { write_read: 1.5, mean_kib: Some(12.5), source: PAPER_D },
};

/// The SPC Financial OLTP trace (UMass Trace Repository: OLTP applications at two large
/// financial institutions) as paper D characterises it: 0.24 writes per read (`rwmixread=81`),
/// 2.38 KiB per request — the read-mostly Financial2, not the write-mostly Financial1.
/// Requests are sector multiples from 512 B to 4 KiB at 512 B-aligned offsets, 90% of them
/// random (so the SSD reads, modifies and writes partial 4 KiB units); the shares of each size
/// are assumed, chosen to give the mean; 16 requests outstanding, assumed.
pub const FINANCIAL: Personality = Personality {
    name: "financial",
    summary: "SPC Financial OLTP trace: small random reads and writes (0.24 W : 1 R), 512 B-4 KiB",
    job: include_str!("personality/financial.fio"),
    target: Target { write_read: 0.24, mean_kib: Some(2.38), source: PAPER_D },
};

/// Every personality, in listing order.
pub const ALL: [&Personality; 6] = [&FILESERVER, &VARMAIL, &WEBPROXY, &MSN, &EXCHANGE, &FINANCIAL];

/// The personality called `name`.
pub fn get(name: &str) -> Option<&'static Personality> {
    ALL.into_iter().find(|p| p.name == name)
}

/// The fio job text of the personality called `name`.
pub fn job_text(name: &str) -> Option<&'static str> {
    get(name).map(|p| p.job)
}

/// The personalities' names, comma-separated, for messages.
pub fn names() -> String {
    ALL.map(|p| p.name).join(", ")
}

impl Personality {
    /// The job file, named `<personality NAME>` in messages.
    pub fn parse(&self) -> Result<JobFile, FioError> {
        parse_job_text(self.job, &format!("<personality {}>", self.name), &|_| None)
    }

    /// Counts the first `requests` requests of the stream on a 30 GiB region (paper D's
    /// partitions), drawn from `seed` by the generator the simulator uses. Several jobs take turns,
    /// as jobs that differ only in their mix issue at the same rate.
    pub fn measure(&self, requests: u64, seed: u64) -> Result<Mix, FioError> {
        const SPACE: u64 = 30 << 30;
        let jobs = self.parse()?.jobs;
        let mut gens = Vec::new();
        for j in &jobs {
            let label = format!("personality/{}/{}", self.name, j.name);
            gens.push(JobGen::new(j, 0, 0, SPACE, 512, derive_seed(seed, &label))?);
        }
        let (mut mix, turns) = (Mix::default(), gens.len());
        for n in 0..requests as usize {
            let Some(io) = gens[n % turns].next() else { break };
            mix.add(io.dir, io.len);
        }
        Ok(mix)
    }
}

/// Read and write requests and bytes of a request stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mix {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl Mix {
    fn add(&mut self, dir: Dir, len: u64) {
        match dir {
            Dir::Read => {
                self.reads += 1;
                self.read_bytes += len;
            }
            Dir::Write => {
                self.writes += 1;
                self.write_bytes += len;
            }
            Dir::Trim => {}
        }
    }

    /// Write requests per read request.
    pub fn write_read(&self) -> f64 {
        self.writes as f64 / self.reads as f64
    }

    /// Mean size of all read and write requests, in KiB.
    pub fn mean_kib(&self) -> f64 {
        (self.read_bytes + self.write_bytes) as f64 / (self.reads + self.writes) as f64 / 1024.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_personality_parses_cleanly_into_runnable_jobs() {
        for p in ALL {
            let jf = p.parse().unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert!(jf.warnings.is_empty(), "{}: {:?}", p.name, jf.warnings);
            assert!(!jf.jobs.is_empty() && jf.jobs.iter().all(|j| j.rw.is_read_write_mix()), "{}", p.name);
            assert!(p.job.starts_with(&format!("; {}: ", p.name)), "{}: the text starts with what it is", p.name);
            let mix = p.measure(1000, 1).unwrap();
            assert_eq!(mix.reads + mix.writes, 1000, "{}", p.name);
        }
    }

    #[test]
    fn lookup_by_name() {
        let listed: Vec<&str> = ALL.map(|p| p.name).to_vec();
        assert_eq!(listed, ["fileserver", "varmail", "webproxy", "msn", "exchange", "financial"]);
        assert_eq!(job_text("varmail"), Some(VARMAIL.job));
        assert!(get("Varmail").is_none() && job_text("oltp").is_none());
        assert_eq!(names(), "fileserver, varmail, webproxy, msn, exchange, financial");
    }

    #[test]
    fn measuring_is_deterministic_and_seeded() {
        let a = FINANCIAL.measure(5000, 1).unwrap();
        assert_eq!(a, FINANCIAL.measure(5000, 1).unwrap());
        assert_ne!(a, FINANCIAL.measure(5000, 2).unwrap());
    }
}
