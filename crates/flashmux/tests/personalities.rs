//! The built-in workload personalities: their request streams against the papers' figures, the
//! Filebench ones against the flowop model they were derived from, and each in a short run.

mod common;

use common::run_checked;
use flashmux::workload::fio::{BsSplit, Dir};
use flashmux::workload::personality::{self, Personality, FILESERVER, VARMAIL, WEBPROXY};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Gamma};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Each personality's stream, 200,000 requests through the generator, against paper D's Table 3
/// (paper E's Table 2 for webproxy) within 10%. For msn, reads are 1.5% of the requests: about
/// 3,000 of them, so the ratio's statistical error is under 2% (1/√3000, less as fio's rwmix
/// makes reads catch up with their share) and 10% is meaningful. What makes its ratio sensitive
/// is fio's whole-percentage rwmixread (1% reads is 99 writes per read, 2% is 49), which the
/// personality's two jobs get around. Run with --nocapture for the table.
#[test]
fn measured_mix_matches_the_papers() {
    println!("{:<11} {:>8} {:>7} {:>9} {:>7}", "personality", "W/R", "target", "mean KiB", "target");
    for p in personality::ALL {
        let m = p.measure(200_000, 1).unwrap();
        assert_eq!(m.reads + m.writes, 200_000, "{}", p.name);
        let t = &p.target;
        println!(
            "{:<11} {:>8.3} {:>7} {:>9.2} {:>7}",
            p.name,
            m.write_read(),
            t.write_read,
            m.mean_kib(),
            t.mean_kib.map_or("-".into(), |v| v.to_string())
        );
        let off = |measured: f64, target: f64| (measured / target - 1.0).abs();
        assert!(off(m.write_read(), t.write_read) < 0.10, "{}: W/R {} vs {}", p.name, m.write_read(), t.write_read);
        if let Some(mean) = t.mean_kib {
            assert!(off(m.mean_kib(), mean) < 0.10, "{}: mean {} KiB vs {mean}", p.name, m.mean_kib());
        }
    }
}

// ---- The Filebench personalities against their flowops (docs/MODEL.md) ----

const PAGE: f64 = 4096.0;
/// Reads reach the device in 128 KiB readahead windows, writes in requests of up to 512 KiB.
const READ_WINDOW: u64 = 32;
const WRITE_MAX: u64 = 128;
/// fileserver: the share of whole-file reads the guest's page cache serves.
const CACHED_READS: f64 = 0.35;
/// varmail: the ext4 journal commit each fsync forces, in pages, carried by the append's write.
const JOURNAL_COMMIT: u64 = 5;
const R: usize = 0;
const W: usize = 1;

/// The requests of Filebench loops: sizes in pages per direction, and how many start a file.
#[derive(Default)]
struct Stream {
    sizes: [Vec<u64>; 2],
    files: [u64; 2],
}

impl Stream {
    /// One file's data (or an append's), as requests of at most `limit` pages.
    fn file(&mut self, dir: usize, mut pages: u64, limit: u64) {
        self.files[dir] += 1;
        while pages > 0 {
            self.sizes[dir].push(pages.min(limit));
            pages -= pages.min(limit);
        }
    }
}

/// Filebench's random choices: file sizes gamma(1.5) with the file set's mean, and
/// `appendfilerand`'s uniform 0..=16 KiB.
struct Flowops {
    rng: Xoshiro256PlusPlus,
    sizes: Gamma<f64>,
}

impl Flowops {
    fn new(mean_file: f64) -> Flowops {
        Flowops { rng: Xoshiro256PlusPlus::seed_from_u64(7), sizes: Gamma::new(1.5, mean_file / 1.5).unwrap() }
    }

    fn file_pages(&mut self) -> u64 {
        (self.sizes.sample(&mut self.rng) / PAGE).ceil().max(1.0) as u64
    }

    /// The pages an append dirties; to an existing file, its partial last page too.
    fn append_pages(&mut self, existing: bool) -> u64 {
        let len = self.rng.random_range(0.0..=16384.0);
        let tail = if existing { self.rng.random_range(0.0..PAGE) } else { 0.0 };
        ((tail + len) / PAGE).ceil().max(1.0) as u64
    }

    fn read_file(&mut self, s: &mut Stream) {
        let pages = self.file_pages();
        s.file(R, pages, READ_WINDOW);
    }
}

/// createfile + writewholefile, appendfilerand, readwholefile (some from the page cache).
fn fileserver_loop(f: &mut Flowops, s: &mut Stream) {
    let new = f.file_pages();
    s.file(W, new, WRITE_MAX);
    let append = f.append_pages(true);
    s.file(W, append, WRITE_MAX);
    if f.rng.random::<f64>() >= CACHED_READS {
        f.read_file(s);
    }
}

/// createfile + appendfilerand + fsync, readwholefile + appendfilerand + fsync, readwholefile.
fn varmail_loop(f: &mut Flowops, s: &mut Stream) {
    for existing in [false, true] {
        let append = f.append_pages(existing) + JOURNAL_COMMIT;
        s.file(W, append, WRITE_MAX);
        f.read_file(s);
    }
}

/// createfile + appendfilerand, five readwholefile.
fn webproxy_loop(f: &mut Flowops, s: &mut Stream) {
    let append = f.append_pages(false);
    s.file(W, append, WRITE_MAX);
    for _ in 0..5 {
        f.read_file(s);
    }
}

/// Largest gap between the cumulative shares of request sizes in the model and in the split.
fn ks_distance(model: &[u64], split: &[BsSplit]) -> f64 {
    let max = model.iter().max().copied().unwrap_or(0);
    let (mut gap, mut below): (f64, usize) = (0.0, 0);
    let mut sorted = model.to_vec();
    sorted.sort_unstable();
    for pages in 1..=max {
        below += sorted[below..].iter().take_while(|&&v| v == pages).count();
        let modelled = below as f64 / model.len() as f64;
        let split_share: u32 = split.iter().filter(|e| e.bs <= pages * 4096).map(|e| e.percent).sum();
        gap = gap.max((modelled - f64::from(split_share) / 100.0).abs());
    }
    gap
}

fn check_against_flowops(p: &Personality, mean_file: f64, one_loop: fn(&mut Flowops, &mut Stream)) {
    let (mut f, mut s) = (Flowops::new(mean_file), Stream::default());
    for _ in 0..100_000 {
        one_loop(&mut f, &mut s);
    }
    let job = &p.parse().unwrap().jobs[0];
    let modelled = s.sizes[W].len() as f64 / s.sizes[R].len() as f64;
    let written = f64::from(100 - job.rwmixread) / f64::from(job.rwmixread);
    assert!((written / modelled - 1.0).abs() < 0.03, "{}: rwmixread {} for W/R {modelled}", p.name, job.rwmixread);
    for (d, dir) in [(R, Dir::Read), (W, Dir::Write)] {
        let sizes = &s.sizes[d];
        let mean = sizes.iter().sum::<u64>() as f64 * PAGE / sizes.len() as f64;
        let split = &job.bssplit[dir];
        let split_mean = split.iter().map(|e| e.bs as f64 * f64::from(e.percent) / 100.0).sum::<f64>();
        assert!((split_mean / mean - 1.0).abs() < 0.03, "{} {dir:?}: mean {split_mean} vs {mean}", p.name);
        let ks = ks_distance(sizes, split);
        assert!(ks < 0.06, "{} {dir:?}: cumulative shares differ by {ks}", p.name);
        let random = 100.0 * s.files[d] as f64 / sizes.len() as f64;
        let given = f64::from(job.percentage_random[dir]);
        assert!((random - given).abs() < 1.0, "{} {dir:?}: {random}% of requests start a file, percentage_random={given}", p.name);
    }
}

#[test]
fn fileserver_follows_its_flowops() {
    check_against_flowops(&FILESERVER, 128.0 * 1024.0, fileserver_loop);
}

#[test]
fn varmail_follows_its_flowops() {
    check_against_flowops(&VARMAIL, 16.0 * 1024.0, varmail_loop);
}

#[test]
fn webproxy_follows_its_flowops() {
    check_against_flowops(&WEBPROXY, 16.0 * 1024.0, webproxy_loop);
}

// ---- Each in a run ----

/// 100 ms of each personality alone on a clean paper-C drive, invariants checked: it runs and both
/// directions complete in about the personality's mix. A few hundred to a few thousand requests
/// complete (the drive's 16 dies program 4 KiB in 0.55 ms), so the ratio is only roughly the
/// generator's: within 30%.
#[test]
fn each_runs_on_the_paper_c_drive() {
    for p in personality::ALL {
        let text = format!(
            "[device]\npreset = \"paper-c\"\n[stop]\ntime = \"100ms\"\n[[tenant]]\nname = \"{0}\"\npersonality = \"{0}\"\n",
            p.name
        );
        let r = run_checked(&text, 20_000);
        let io = &r.tenants[0].io;
        assert!(io.read.ios > 0 && io.write.ios > 0, "{}: {} reads, {} writes", p.name, io.read.ios, io.write.ios);
        let ratio = io.write.ios as f64 / io.read.ios as f64;
        println!("{:<11} {:>7} requests, W/R {ratio:.3}", p.name, io.read.ios + io.write.ios);
        assert!((ratio / p.target.write_read - 1.0).abs() < 0.3, "{}: W/R {ratio}", p.name);
    }
}
