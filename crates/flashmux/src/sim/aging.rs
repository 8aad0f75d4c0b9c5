//! The tenants' writes for workload-dependent preconditioning (`[precondition] state =
//! "workload"`, see `device::precondition`): each tenant's own workload, replayed without timing.
//!
//! - **fio jobs**: a fresh instance of every job clone of the tenant, seeded apart from the
//!   measured run's (label `precondition/job/<tenant>/<job>/<clone>`), so aging does not replay
//!   the very addresses the run will issue. The clones take turns, one write each; reads and
//!   trims are skipped; a clone that reaches its end starts over (its generator rebuilt: the
//!   same stream again, as a job with `loops` would). A clone that never writes (`rw=read`, `rwmixread=100`) is left out.
//! - **traces**: the trace's writes in order, from the start again at its end.
//! - **NBD exports** (`serve`): their clients' pattern is not known ahead, so uniform random
//!   4 KiB writes over the region, as `aged` does.
//!
//! A tenant with no writing job gets no writer: its region keeps the sequential fill.
//!
//! Each writer's *share* is the write bytes it keeps in flight: over its job clones, iodepth ×
//! the bytes written per I/O (the write fraction × the mean write size, from the first
//! [`SHARE_SAMPLE`] I/Os of the clone's stream); a closed-loop trace's depth × its bytes written
//! per request; an open-loop trace or an export counts as one request in flight. On the default
//! scenario: 4 × 128 KiB for the sequential writer, 32 × 4 KiB for the random one, 4:1, the
//! split of the write bandwidth the measured run shows (40.6 vs 10.1 MB/s).

use super::trace::TraceSource;
use crate::config::{Scenario, TenantSpec, TraceTiming, Workload};
use crate::device::precondition::{ByteWrites, TenantWriter};
use crate::device::IoOp;
use crate::engine::{derive_seed, rng_for};
use crate::workload::fio::{Dir, FioJob, JobGen};
use rand::Rng;

/// Writes an export's aging draws.
const EXPORT_WRITE: u64 = 4096;
/// I/Os of a stream looked at to estimate its bytes written per I/O.
const SHARE_SAMPLE: u64 = 1024;

/// One writer per tenant, in tenant order; a tenant whose workload never writes gets one that
/// says so (`None` at once).
pub(super) fn tenant_writers(scenario: &Scenario, sector: u64) -> Vec<TenantWriter<'static>> {
    scenario.tenants.iter().map(|t| writer(t, sector, scenario.seed)).collect()
}

fn writer(t: &TenantSpec, sector: u64, seed: u64) -> TenantWriter<'static> {
    match &t.workload {
        Workload::Fio(jobs) => {
            let mut share = 0u64;
            let mut gens: Vec<(CloneWrites, JobGen)> = Vec::new();
            for job in jobs {
                for clone in 0..job.numjobs {
                    let label = format!("precondition/job/{}/{}/{}", t.name, job.name, clone);
                    let w = CloneWrites {
                        job: job.clone(),
                        clone,
                        region: t.region,
                        sector,
                        seed: derive_seed(seed, &label),
                    };
                    // The run's own construction of this clone succeeded, so this one does too.
                    let Some(g) = w.start() else { continue };
                    if g.writes() {
                        let (ios, bytes) = written_per_io(g.clone().map(|io| (io.dir == Dir::Write, io.len)));
                        share = share.saturating_add(u64::from(job.iodepth) * bytes / ios.max(1));
                        gens.push((w, g));
                    }
                }
            }
            let mut turn = 0usize;
            let writes: ByteWrites = Box::new(move || {
                while !gens.is_empty() {
                    let i = turn % gens.len();
                    match next_fio_write(&mut gens[i]) {
                        Some(w) => {
                            turn = i + 1;
                            return Some(w);
                        }
                        None => {
                            gens.remove(i);
                        }
                    }
                }
                None
            });
            TenantWriter { share, writes }
        }
        Workload::Trace { spec, .. } => {
            let (t, spec) = (t.clone(), spec.clone());
            let depth = match spec.timing {
                TraceTiming::ClosedLoop { iodepth } => u64::from(iodepth),
                TraceTiming::OpenLoop { .. } => 1,
            };
            let mut src = TraceSource::new(&t, &spec, sector).ok();
            let share = TraceSource::new(&t, &spec, sector).ok().map_or(0, |mut s| {
                let (ios, bytes) =
                    written_per_io(std::iter::from_fn(move || s.next_io()).map(|io| (io.op == IoOp::Write, io.len)));
                depth * bytes / ios.max(1)
            });
            let writes: ByteWrites = Box::new(move || {
                let mut restarted = false;
                loop {
                    let s = src.as_mut()?;
                    match s.next_io() {
                        Some(io) if io.op == IoOp::Write => return Some((io.offset, io.len)),
                        Some(_) => {}
                        // A pass without a write (or a trace that fails to read) ends the writer.
                        None if restarted || s.stats.error.is_some() => {
                            src = None;
                        }
                        None => {
                            restarted = true;
                            src = TraceSource::new(&t, &spec, sector).ok();
                        }
                    }
                }
            });
            TenantWriter { share, writes }
        }
        // A Filebench tenant ages its region as an export's clients would: its files are laid
        // out on a filesystem, and where is the filesystem's to choose.
        Workload::Export { .. } | Workload::Filebench { .. } => {
            let (start, len) = t.region;
            let blocks = len / EXPORT_WRITE;
            let mut rng = rng_for(seed, &format!("precondition/export/{}", t.name));
            let writes: ByteWrites = Box::new(move || {
                (blocks > 0).then(|| (start + rng.random_range(0..blocks) * EXPORT_WRITE, EXPORT_WRITE))
            });
            TenantWriter { share: EXPORT_WRITE, writes }
        }
    }
}

/// Of the first [`SHARE_SAMPLE`] I/Os of a stream of (is a write, bytes): how many there were
/// and the bytes they wrote.
/// The most I/Os in a row that are not writes an aging stream reads past before it ends.
const MAX_SKIPPED: u64 = 1 << 20;

fn written_per_io(ios: impl Iterator<Item = (bool, u64)>) -> (u64, u64) {
    ios.take(SHARE_SAMPLE as usize).fold((0, 0), |(n, b), (write, len)| (n + 1, b + if write { len } else { 0 }))
}

/// What rebuilds a job clone's aging stream from its start (rather than a copy of its
/// generator kept for the purpose: a random map is a bit per block of the region).
struct CloneWrites {
    job: FioJob,
    clone: u32,
    region: (u64, u64),
    sector: u64,
    seed: u64,
}

impl CloneWrites {
    /// The stream from its start; `None` if the job does not build.
    fn start(&self) -> Option<JobGen> {
        JobGen::new(&self.job, self.clone, self.region.0, self.region.1, self.sector, self.seed).ok()
    }
}

/// The clone's next write; at the end of its stream it starts over (the same stream again).
/// `None` if a whole stream has no write.
fn next_fio_write((w, gen): &mut (CloneWrites, JobGen)) -> Option<(u64, u64)> {
    let mut restarted = false;
    let mut skipped = 0u64;
    loop {
        match gen.next() {
            Some(io) if io.dir == Dir::Write => return Some((io.offset, io.len)),
            // A clone whose stream goes on without writes (its writes all came before, or it
            // draws them too rarely) ages nothing more.
            Some(_) if skipped >= MAX_SKIPPED => return None,
            Some(_) => skipped += 1,
            None if restarted => return None,
            None => {
                restarted = true;
                *gen = w.start()?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn scenario(tenants: &str) -> Scenario {
        let text = format!("seed = 5\n[device]\npreset = \"tlc-nvme\"\ncapacity = \"16GiB\"\n{tenants}");
        Scenario::from_toml(&text, "aging.toml", Path::new(".")).unwrap()
    }

    fn take(w: &mut TenantWriter, n: usize) -> Vec<(u64, u64)> {
        (0..n).map_while(|_| (w.writes)()).collect()
    }

    #[test]
    fn a_job_whose_loops_draw_no_write_ages_nothing_and_ends() {
        // Mostly reads, 3 I/Os a loop, time based: every loop replays the same random draws
        // (randrepeat), which for this job, tenant and seed (a configuration the swarm drew) are
        // three reads, so the stream goes on for ever without a write. Its aging stream ends
        // instead of reading past them for ever.
        let text = "seed = 6553441960416464375\n[device]\npreset = \"null\"\n[[tenant]]\nname = \"t0\"\n\
                    region = { offset = \"0\", size = \"284KiB\" }\n\
                    fio = \"[j0]\\nrw=rw\\nrwmixread=95\\nbs=8k\\nnumber_ios=3\\ntime_based\\nruntime=689us\\n\"\n";
        let s = Scenario::from_toml(text, "aging.toml", Path::new(".")).unwrap();
        let mut w = tenant_writers(&s, 512);
        assert_eq!(take(&mut w[0], 1), []);
    }

    #[test]
    fn each_tenant_writes_as_its_workload_does_and_readers_not_at_all() {
        let s = scenario(
            "[[tenant]]\nname = \"mix\"\nfio = \"[m]\\nrw=randrw\\nrwmixread=70\\nbs=8k\\nsize=1m\\n\"\n\
             [[tenant]]\nname = \"reader\"\nfio = \"[r]\\nrw=randread\\nbs=4k\\ntime_based\\nruntime=1s\\n\"\n\
             [[tenant]]\nname = \"two\"\nfio = \"[r]\\nrw=read\\nbs=4k\\n[w]\\nrw=write\\nbs=16k\\nsize=64k\\n\"\n",
        );
        let mut w = tenant_writers(&s, 512);
        assert_eq!(w.len(), 3);
        let start = s.tenants[0].region.0;
        // 1 MiB of 8 KiB I/Os, 30% writes: ~38 writes a pass; the stream starts over at its end,
        // so 400 writes are ten passes over the job's 128 blocks.
        let mix = take(&mut w[0], 400);
        assert_eq!(mix.len(), 400);
        assert!(mix.iter().all(|&(o, l)| l == 8192 && o >= start && o + l <= start + (1 << 20)), "{mix:?}");
        let blocks: std::collections::BTreeSet<u64> = mix.iter().map(|w| w.0).collect();
        assert!(blocks.len() <= 128 && blocks.iter().all(|o| (o - start) % 8192 == 0));
        assert_eq!(take(&mut w[1], 1), [], "a reader never writes");
        // Shares: write bytes in flight. 30% of 8 KiB at iodepth 1 (the sample's own mix); none;
        // 16 KiB at iodepth 1 (the reading job does not count).
        assert!((2200..2800).contains(&w[0].share), "{}", w[0].share);
        assert_eq!((w[1].share, w[2].share), (0, 16384));
        // Only the writing job of the two: sequential 16 KiB writes over its 64 KiB, again and again.
        let base = s.tenants[2].region.0;
        let two = take(&mut w[2], 8);
        let expect: Vec<(u64, u64)> = (0..8).map(|i| (base + (i % 4) * 16384, 16384)).collect();
        assert_eq!(two, expect);
        // Seeded apart from the run, and the same on every build.
        let again = take(&mut tenant_writers(&s, 512)[0], 400);
        assert_eq!(mix, again);
    }

    #[test]
    fn a_trace_tenant_ages_with_the_traces_writes_in_order() {
        let dir = std::env::temp_dir().join(format!("flashmux-aging-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.mqsim");
        // MQSim's ASCII format: time, device, sector, sectors, 0 = write / 1 = read.
        std::fs::write(&path, "0 0 0 8 0\n10 0 64 8 1\n20 0 128 16 0\n").unwrap();
        let s = scenario(&format!("[[tenant]]\nname = \"t\"\ntrace = {{ path = \"{}\" }}\n", path.display()));
        let mut w = tenant_writers(&s, 512);
        let base = s.tenants[0].region.0;
        let got = take(&mut w[0], 4);
        // Open loop: one request in flight, 12 KiB written per 3 requests.
        assert_eq!(w[0].share, 4096);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(got, [(base, 4096), (base + 65536, 8192), (base, 4096), (base + 65536, 8192)]);
    }
}
