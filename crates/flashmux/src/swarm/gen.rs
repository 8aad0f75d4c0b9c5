//! The generator: one seed → one whole scenario, drawn across every key the scenario file
//! accepts (docs/TESTING.md, "Swarm").
//!
//! Most draws are made valid on purpose (over-provisioning is computed from the drawn geometry
//! down to the least the FTL accepts, caches hold at least a page per tenant, polling threads
//! leave a hardware thread free), and a few are left to chance or made invalid on purpose so the
//! loader's checks are exercised too: those scenarios must be refused with a clean error.
//!
//! This file holds the drawing helpers (`G`), what later draws need to know about earlier ones
//! (`Plan`), the order of the draws (`generate`) and `[stop]`/`[output]`. What each part of the
//! scenario draws lives beside it: the drive (gen/device.rs), the host and its scheduler
//! (gen/host.rs), the VM path and the host's CPUs (gen/virt.rs), the tenants (gen/tenant.rs) and
//! their fio jobs (gen/fio.rs); traces in swarm/traces.rs. The draws' order is the scenario's
//! identity: a seed gives the same file byte for byte, so a step moved between files keeps its
//! place in the sequence.

mod device;
mod fio;
mod host;
mod tenant;
mod virt;
mod zoned;

use super::toml::{self as t, Doc};
use super::Case;
use crate::engine::{rng_for, SimRng};
use device::{flash_device, interface, null_device, precondition};
use host::host;
use rand::Rng;
use tenant::tenant;
use virt::virt;

/// Drawing helpers over the case's random stream.
pub(super) struct G {
    rng: SimRng,
    /// What was drawn, as `key=value` labels (for the coverage test and the summary).
    pub tags: Vec<String>,
    /// Files the scenario refers to (job files, traces), by name relative to it.
    pub files: Vec<(String, Vec<u8>)>,
    /// This case may also draw what the loader must refuse (a few cases in ten do).
    pub mistakes: bool,
}

impl G {
    pub fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p.clamp(0.0, 1.0))
    }
    /// A deliberate mistake, with probability `p` in the cases that make them.
    pub fn mistake(&mut self, p: f64) -> bool {
        self.mistakes && self.chance(p)
    }
    /// Uniform in `lo..=hi`.
    pub fn int(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        self.rng.random_range(lo..=hi)
    }
    /// Log-uniform in `lo..=hi` (`lo >= 1`): small values as likely per decade as large ones.
    pub fn log(&mut self, lo: u64, hi: u64) -> u64 {
        let lo = lo.max(1);
        if hi <= lo {
            return lo;
        }
        let (a, b) = ((lo as f64).ln(), ((hi + 1) as f64).ln());
        (self.rng.random_range(a..b).exp() as u64).clamp(lo, hi)
    }
    /// A cost in nanoseconds up to `hi`, zero one time in four (everything at one instant).
    pub fn cost(&mut self, hi: u64) -> u64 {
        if self.chance(0.25) {
            0
        } else {
            self.int(0, hi)
        }
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.rng.random_range(0..xs.len())]
    }
    /// One of `xs` with the given weights.
    pub fn weighted<T: Copy>(&mut self, xs: &[(T, u32)]) -> T {
        let total: u32 = xs.iter().map(|x| x.1).sum();
        let mut r = self.rng.random_range(0..total);
        for &(x, w) in xs {
            if r < w {
                return x;
            }
            r -= w;
        }
        unreachable!("r < total")
    }
    pub fn tag(&mut self, key: &str, value: impl std::fmt::Display) {
        let t = format!("{key}={value}");
        if !self.tags.contains(&t) {
            self.tags.push(t);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stop {
    Time,
    Requests,
    Both,
    /// No stop condition: every job ends on its own.
    Neither,
}

/// What later draws need to know about earlier ones.
struct Plan {
    tenants: usize,
    /// The drive has flash (not the null device).
    flash: bool,
    /// The device's logical capacity in bytes, as the loader computes it.
    cap: u64,
    stop: Stop,
    /// Allowed to be slower than usual (a few configurations are).
    large: bool,
    /// Tenants' regions are ext4 filesystems (`[kernel] filesystem = "ext4"`).
    ext4: bool,
}

/// Draws the case for `seed`: one seed in ten a zoned drive's (`gen/zoned.rs`).
pub fn generate(seed: u64) -> Case {
    if zoned::is_zoned(seed) {
        return zoned::zoned_case(seed);
    }
    let mut g = G { rng: rng_for(seed, "swarm"), tags: Vec::new(), files: Vec::new(), mistakes: false };
    g.mistakes = g.chance(0.12);
    if g.mistakes {
        g.tag("mistakes", true);
    }
    let mut doc = Doc::default();
    // Invariant checks every k events, k log-uniform: every event down to every thousandth. A
    // check walks the whole FTL, so frequent checks get a small drive.
    let check_every = g.log(1, 1000);
    let large = check_every >= 30 && g.chance(0.03);
    if large {
        g.tag("size", "large");
    }
    let tenants = match g.weighted(&[(0u8, 60), (1, 30), (2, 10)]) {
        0 => g.int(1, 4),
        1 => g.int(5, 16),
        _ => g.int(17, 64),
    } as usize;
    g.tag("tenants", match tenants {
        1 => "1",
        2..=4 => "2-4",
        5..=16 => "5-16",
        _ => "17-64",
    });
    if g.chance(0.5) {
        doc.top("name", t::string(&format!("swarm-{seed}")));
    }
    if g.chance(0.8) {
        doc.top("seed", g.int(0, i64::MAX as u64).to_string());
    }
    let sched = g.weighted(&[("none", 30), ("mq-deadline", 12), ("cfq", 14), ("mcfq", 14), ("fair", 14), ("hwabc", 14), ("hwabc-oracle", 14)]);
    let budget = matches!(sched, "fair" | "hwabc" | "hwabc-oracle");
    let flash = budget || g.chance(0.85);
    let stop = g.weighted(&[(Stop::Time, 30), (Stop::Requests, 30), (Stop::Both, 25), (Stop::Neither, 15)]);
    g.tag("stop", format!("{stop:?}").to_lowercase());
    let cap = if flash { flash_device(&mut g, &mut doc, tenants, budget, large, check_every < 30) } else { null_device(&mut g, &mut doc, tenants) };
    interface(&mut g, &mut doc, flash);
    precondition(&mut g, &mut doc, flash);
    host(&mut g, &mut doc, sched);
    virt(&mut g, &mut doc, tenants);
    let ext4 = kernel(&mut g, &mut doc, check_every);
    let plan = Plan { tenants, flash, cap, stop, large, ext4 };
    stop_and_output(&mut g, &mut doc, &plan);
    for i in 0..tenants {
        tenant(&mut g, &mut doc, i, &plan);
    }
    let rerun = g.chance(0.1);
    let alone = tenants <= 4 && g.chance(0.08);
    if alone {
        g.tag("alone_baseline", true);
    }
    Case { seed, scenario: doc.render(), files: g.files, check_every, rerun, alone, tags: g.tags }
}

/// `[kernel]` one time in four: buffered jobs (fio's default) then go through a page cache, from
/// one that holds little beside the largest request (1 MiB) to the default 1 GiB, with the
/// writeback thresholds and timers, and sometimes few tags, drawn too.
fn kernel(g: &mut G, doc: &mut Doc, check_every: u64) -> bool {
    if !g.chance(0.25) {
        return false;
    }
    g.tag("kernel", true);
    // Always one key, so that the table exists.
    doc.set("kernel", "page_copy", t::string(&t::duration(g.int(1, 5_000))));
    if g.chance(0.3) {
        // A kernel per tenant (already so in a VM mode).
        doc.set("kernel", "per_tenant", "true".into());
    }
    let ext4 = g.chance(0.3);
    if ext4 {
        doc.set("kernel", "filesystem", t::string("ext4"));
        if g.chance(0.5) {
            doc.set("kernel", "discard", "true".into());
        }
        // The metadata calls' CPU time, from far below to far above their measured defaults.
        for (key, _) in crate::kernel::CallCosts::default().named() {
            if g.chance(0.2) {
                doc.set("kernel.calls", key, t::string(&t::duration(g.int(1, 200_000))));
            }
        }
    }
    // A check walks every cached page: frequent checks get a small cache.
    if check_every < 30 || g.chance(0.7) {
        let caps: &[(&str, u32)] = if check_every < 30 {
            &[("2MiB", 1), ("8MiB", 1)]
        } else {
            &[("2MiB", 2), ("8MiB", 2), ("64MiB", 1), ("1GiB", 1)]
        };
        let cap = g.weighted(caps);
        doc.set("kernel.pagecache", "capacity", t::string(cap));
    }
    if g.chance(0.3) {
        doc.set("kernel.pagecache", "read_ahead_kb", g.weighted(&[(0u64, 1), (4, 1), (128, 2), (2048, 1)]).to_string());
    }
    for (key, hi) in [("dirty_ratio", 100), ("dirty_background_ratio", 100)] {
        if g.chance(0.3) {
            doc.set("kernel.pagecache", key, g.int(0, hi).to_string());
        }
    }
    for (key, hi) in [("dirty_writeback_centisecs", 500), ("dirty_expire_centisecs", 3000)] {
        if g.chance(0.3) {
            doc.set("kernel.pagecache", key, g.int(0, hi).to_string());
        }
    }
    if g.chance(0.2) {
        // Few tags: the kernel's requests wait for them (both lines, handed over in turn).
        doc.set("kernel", "nr_requests", g.weighted(&[(1u64, 1), (2, 1), (8, 1), (64, 1)]).to_string());
    }
    ext4
}

/// `[stop]` and `[output]`.
fn stop_and_output(g: &mut G, doc: &mut Doc, plan: &Plan) {
    // Time: a fast null device gets less of it.
    let max_time = match (plan.flash, plan.large) {
        (true, false) => 200_000_000,
        (true, true) => 2_000_000_000,
        (false, false) => 20_000_000,
        (false, true) => 200_000_000,
    };
    let max_requests = if plan.large { 200_000 } else { 20_000 };
    let mut time = None;
    if matches!(plan.stop, Stop::Time | Stop::Both) {
        // Mostly long enough to fill the free blocks and start garbage collection.
        let lo = if g.chance(0.2) { 10_000 } else { max_time / 200 };
        let ns = g.log(lo, max_time);
        time = Some(ns);
        doc.set("stop", "time", t::string(&t::duration(ns)));
    }
    if matches!(plan.stop, Stop::Requests | Stop::Both) {
        let lo = if g.chance(0.2) { 1 } else { 50 };
        doc.set("stop", "requests", g.log(lo, max_requests).to_string());
    }
    if g.chance(0.3) {
        // Timeline intervals: not so short that a long run has millions of rows.
        let lo = time.map_or(10_000_000, |t| (t / 200).max(1_000_000));
        let ns = g.log(lo, lo * 200);
        doc.set("output", "timeline_interval", t::string(&t::duration(ns)));
    }
}
