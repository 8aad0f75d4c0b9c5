//! The generator: one seed → one whole scenario, drawn across every key the scenario file
//! accepts (docs/TESTING.md, "Swarm").
//!
//! Most draws are made valid on purpose (over-provisioning is computed from the drawn geometry
//! down to the least the FTL accepts, caches hold at least a page per tenant, polling threads
//! leave a hardware thread free), and a few are left to chance or made invalid on purpose so the
//! loader's checks are exercised too: those scenarios must be refused with a clean error.

use super::toml::{self as t, Doc};
use super::traces;
use super::Case;
use crate::config::{preset, DeviceKind};
use crate::engine::{rng_for, SimRng};
use rand::Rng;

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
}

/// Draws the case for `seed`.
pub fn generate(seed: u64) -> Case {
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
    let sched = g.weighted(&[("none", 30), ("cfq", 14), ("mcfq", 14), ("fair", 14), ("hwabc", 14), ("hwabc-oracle", 14)]);
    let budget = matches!(sched, "fair" | "hwabc" | "hwabc-oracle");
    let flash = budget || g.chance(0.85);
    let stop = g.weighted(&[(Stop::Time, 30), (Stop::Requests, 30), (Stop::Both, 25), (Stop::Neither, 15)]);
    g.tag("stop", format!("{stop:?}").to_lowercase());
    let cap = if flash { flash_device(&mut g, &mut doc, tenants, budget, large, check_every < 30) } else { null_device(&mut g, &mut doc, tenants) };
    let plan = Plan { tenants, flash, cap, stop, large };
    interface(&mut g, &mut doc, flash);
    precondition(&mut g, &mut doc, flash);
    host(&mut g, &mut doc, sched);
    virt(&mut g, &mut doc, tenants);
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

/// A null device: capacity and latency.
fn null_device(g: &mut G, doc: &mut Doc, tenants: usize) -> u64 {
    g.tag("preset", "null");
    doc.set("device", "preset", t::string("null"));
    let mut cap = 64u64 << 30;
    if g.chance(0.7) {
        cap = g.log(64 * tenants as u64, 1 << 24) * 1024;
        doc.set("device", "capacity", t::string(&t::size(cap)));
    }
    if g.chance(0.5) {
        let ns = if g.chance(0.2) { 0 } else { g.log(1, 200_000) };
        doc.set("device.null", "latency", t::string(&t::duration(ns)));
    }
    if g.mistake(0.2) {
        // open-channel needs flash: refused.
        doc.set("device", "mode", t::string("open-channel"));
    }
    cap
}

/// A flash device: a preset with its geometry, over-provisioning, FTL, mapping and buffer
/// drawn. Returns the drive's logical capacity in bytes, computed as the loader will.
fn flash_device(g: &mut G, doc: &mut Doc, tenants: usize, budget: bool, large: bool, tiny: bool) -> u64 {
    let name = g.pick(&["paper-c", "x25e", "840pro", "tlc-nvme", "cosmos"]);
    g.tag("preset", name);
    doc.set("device", "preset", t::string(name));
    let DeviceKind::Ssd(p) = preset(name).expect("listed presets exist").kind else { unreachable!("flash preset") };
    let mut geo = p.geometry.clone();
    // Units the drive may have: small for most runs.
    let max_units: u64 = if large {
        1 << 21
    } else if tiny {
        1 << 14
    } else {
        1 << 17
    };
    // Logical bytes the drive should at least have, so every tenant's region holds a few blocks.
    let min_bytes: u64 = (tenants as u64 * (64 << 10)).max(256 << 10);
    // Blocks per plane the FTL may need beyond the logical data (threshold, open blocks, DFTL's).
    const SPARE: u64 = 16;
    let fits = |geo: &crate::flash::Geometry| {
        let row = geo.planes() as u64 * geo.units_per_block() as u64;
        let l_min = min_bytes.div_ceil(row * geo.unit_bytes as u64);
        row * (l_min + SPARE) <= max_units
    };
    let custom = g.chance(0.75) || !fits(&geo);
    if custom {
        g.tag("geometry", "custom");
        let drawn = loop {
            let mut d = geo.clone();
            d.channels = g.weighted(&[(1u32, 3), (2, 3), (4, 2), (8, 1)]);
            d.chips_per_channel = g.weighted(&[(1u32, 3), (2, 2), (4, 1)]);
            d.dies_per_chip = g.weighted(&[(1u32, 3), (2, 1)]);
            d.planes_per_die = g.weighted(&[(1u32, 3), (2, 2), (4, 1)]);
            d.page_bytes = g.weighted(&[(2048u32, 1), (4096, 4), (8192, 2), (16384, 2), (32768, 1)]);
            let units: Vec<(u32, u32)> = [(512u32, 1u32), (1024, 1), (2048, 1), (4096, 6), (8192, 1)]
                .into_iter()
                .filter(|(u, _)| *u <= d.page_bytes)
                .collect();
            d.unit_bytes = g.weighted(&units);
            d.pages_per_block = g.weighted(&[(2u32, 1), (4, 1), (8, 2), (16, 2), (32, 2), (64, 2), (128, 1), (256, 1)]);
            if fits(&d) {
                break d;
            }
        };
        for (key, v, old) in [
            ("channels", drawn.channels, geo.channels),
            ("chips_per_channel", drawn.chips_per_channel, geo.chips_per_channel),
            ("dies_per_chip", drawn.dies_per_chip, geo.dies_per_chip),
            ("planes_per_die", drawn.planes_per_die, geo.planes_per_die),
            ("pages_per_block", drawn.pages_per_block, geo.pages_per_block),
        ] {
            // A value equal to the preset's is sometimes left to it.
            if v != old || g.chance(0.5) {
                doc.set("device.geometry", key, v.to_string());
            }
        }
        for (key, v, old) in [("page_size", drawn.page_bytes, geo.page_bytes), ("unit_size", drawn.unit_bytes, geo.unit_bytes)] {
            if v != old || g.chance(0.5) {
                doc.set("device.geometry", key, t::string(&t::size(v as u64)));
            }
        }
        geo = drawn;
    } else {
        g.tag("geometry", "preset");
    }
    let planes = geo.planes() as u64;
    let upp = geo.units_per_page() as u64;
    let ppb = geo.pages_per_block as u64;
    let upb = upp * ppb;
    let unit = geo.unit_bytes as u64;
    let page = geo.page_bytes as u64;
    // Logical blocks per plane for the least capacity.
    let l_min = min_bytes.div_ceil(planes * upb * unit);

    // Mapping: dftl (not on an open-channel drive), else full; explicit or by default.
    let dftl = !budget && g.chance(0.35);
    let mut entry = 4u64;
    if dftl {
        g.tag("mapping", "dftl");
        doc.set("device.ftl", "mapping", t::string("dftl"));
        let mut explicit = g.chance(0.3);
        if explicit {
            entry = g.weighted(&[(1u64, 1), (2, 1), (8, 3), (16, 2), (page / 4, 1)]).max(1);
        }
        // The cache needs a translation page per tenant, so the table needs as many: entries
        // per page at most the least logical units per tenant.
        let least_units = l_min * planes * upb;
        let need = (page * tenants as u64).div_ceil(least_units).min(page);
        if page / entry > least_units / tenants as u64 && entry < need {
            entry = need;
            explicit = true;
        }
        if explicit {
            doc.set("device.ftl", "entry_size", entry.to_string());
        }
    } else {
        g.tag("mapping", "full");
        if g.chance(0.2) {
            doc.set("device.ftl", "mapping", t::string("full"));
        }
    }
    // Drive mode: a budget scheduler needs open-channel; DFTL needs the drive's own FTL.
    let open = if budget {
        true
    } else if dftl {
        false
    } else {
        g.chance(0.2)
    };
    g.tag("device_mode", if open { "open-channel" } else { "ssd" });
    if open != p.open_channel || g.chance(0.3) {
        doc.set("device", "mode", t::string(if open { "open-channel" } else { "ssd" }));
    }

    // Size: blocks per plane B and a GC threshold T; the FTL needs T + 3 (+ 2 with DFTL) blocks
    // per plane besides the logical data's L (and DFTL's translation pages).
    let max_b = (max_units / (planes * upb)).max(l_min + SPARE);
    let mut b = g.log(l_min + SPARE, max_b.min(1024).max(l_min + SPARE));
    let threshold = if g.chance(0.3) {
        let th = if g.mistake(0.1) { 1 } else { g.int(2, (b / 4).clamp(2, 8)) };
        doc.set("device.ftl", "gc_threshold_blocks", th.to_string());
        th
    } else {
        (b / 100).max(2)
    };
    let needed = threshold.max(2) + 3 + if dftl { 2 } else { 0 };
    let map_blocks = |l: u64| -> u64 {
        if !dftl {
            return 0;
        }
        let entries = (page / entry).max(1);
        let map_pages = (planes * l * upb).div_ceil(entries);
        map_pages.div_ceil(planes).div_ceil(ppb)
    };
    b = b.max(l_min + needed + 1 + map_blocks(l_min));
    // L: as many as fit (over-provisioning at its least) or fewer.
    let slack = g.weighted(&[(0u64, 4), (1, 2), (2, 1), (4, 1), (b / 3, 1)]);
    let l0 = b.saturating_sub(needed + slack).max(1);
    let l = l0.saturating_sub(map_blocks(l0)).max(l_min).max(1);
    let mut op = b as f64 / l as f64 - 1.0 + 1e-6;
    if g.mistake(0.3) {
        // Over-provisioning drawn freely: below the least it is refused.
        op = g.log(10, 2000) as f64 / 1000.0;
    } else if g.chance(0.1) {
        // More than needed.
        op += g.log(10, 2000) as f64 / 1000.0;
    }
    let op = op.clamp(0.001, 10.0);
    let op_text = t::float_up(op);
    let op_read: f64 = op_text.parse().expect("a float");
    if (op_read - p.overprovisioning).abs() > 1e-9 || g.chance(0.3) {
        doc.set("device.ftl", "overprovisioning", op_text);
    }
    // The drive as the loader will make it, for its exact logical capacity.
    let mut c = p.clone();
    c.geometry = geo.clone();
    c.overprovisioning = op_read;
    if g.chance(0.45) {
        g.tag("size_by", "capacity");
        let want = l * planes * upb * unit;
        doc.set("device", "capacity", t::string(&t::size(want)));
        let raw = (want as f64 * (1.0 + op_read)).ceil() as u64;
        c.geometry.blocks_per_plane = raw.div_ceil(upb * unit * planes).max(1) as u32;
        while c.logical_units() * unit < want {
            c.geometry.blocks_per_plane += 1;
        }
    } else {
        g.tag("size_by", "blocks_per_plane");
        doc.set("device.geometry", "blocks_per_plane", b.to_string());
        c.geometry.blocks_per_plane = b as u32;
    }
    let logical_units = c.logical_units();
    if g.chance(0.3) {
        let v = g.pick(&["greedy", "cost-benefit"]);
        g.tag("victim", v);
        doc.set("device.ftl", "gc_victim", t::string(v));
    }
    if dftl {
        cmt(g, doc, tenants, logical_units, page, entry);
    } else if g.mistake(0.05) {
        // A map cache without DFTL: refused.
        doc.set("device.ftl.cmt", "pages", "4".into());
    }
    let set_size = custom || g.chance(0.3);
    buffer(g, doc, planes * upp, unit, set_size);
    if g.chance(0.3) {
        timing(g, doc);
    }
    logical_units * unit
}

/// `[device.ftl.cmt]`: sizes from a page per tenant to the whole table, every policy.
fn cmt(g: &mut G, doc: &mut Doc, tenants: usize, logical_units: u64, page: u64, entry: u64) {
    let entries = (page / entry).max(1);
    let map_pages = logical_units.div_ceil(entries).max(1);
    let policy = g.pick(&["shared", "partitioned", "balanced"]);
    g.tag("cmt", policy);
    if policy != "shared" || g.chance(0.3) {
        doc.set("device.ftl.cmt", "policy", t::string(policy));
    }
    let n = tenants as u64;
    // floor × tenants must fit for balanced; partitions need a page each.
    let floor = if policy == "balanced" && map_pages >= 3 * n && g.chance(0.3) { g.int(1, 3) } else { 1 };
    let least = n * floor;
    let pages = match g.weighted(&[(0u8, 3), (1, 3), (2, 2), (3, 1)]) {
        0 => {
            g.tag("cmt_size", "tiny");
            least + g.int(0, 2)
        }
        1 => g.log(least, map_pages.max(least)),
        2 => {
            g.tag("cmt_size", "whole");
            map_pages.max(least)
        }
        _ => {
            g.tag("cmt_size", "more-than-whole");
            map_pages * 2 + 5
        }
    };
    // The default, 1% of the table, only where it holds a page per tenant (or by mistake).
    let default_fits = (map_pages as f64 / 100.0).round() as u64 >= least;
    let form = if default_fits || g.mistake(0.2) { g.weighted(&[(0u8, 4), (1, 2), (2, 2), (3, 1)]) } else { g.weighted(&[(0u8, 4), (1, 2), (2, 2)]) };
    match form {
        0 => doc.set("device.ftl.cmt", "pages", pages.min(u32::MAX as u64).to_string()),
        1 => doc.set("device.ftl.cmt", "size", t::string(&t::size(pages * page))),
        2 => {
            // A percentage of the table, rounded up so it is at least `pages`.
            let pct = (pages as f64 * 100.0 / map_pages as f64).min(100.0);
            doc.set("device.ftl.cmt", "size", t::string(&format!("{}%", t::float_up(pct.max(0.000001)))))
        }
        _ => {} // the default, 1% of the table
    }
    // Shares of at least 1% each: every partition keeps a page in a cache of 100 or more.
    if policy != "shared" && g.chance(0.4) && (pages.min(map_pages) >= 100 * floor || g.mistake(0.2)) {
        // Whole percentages, each at least 1, summing to 100.
        let mut shares = vec![1u64; tenants];
        for _ in 0..(100 - n) {
            let i = g.int(0, n - 1) as usize;
            shares[i] += 1;
        }
        let list: Vec<String> = shares.iter().map(|s| format!("{s}.0")).collect();
        doc.set("device.ftl.cmt", "shares", format!("[{}]", list.join(", ")));
    }
    if policy == "balanced" || g.chance(0.1) {
        if g.chance(0.6) {
            let period = g.log(100_000, 2_000_000_000);
            doc.set("device.ftl.cmt", "period", t::string(&t::duration(period)));
        }
        if g.chance(0.5) {
            doc.set("device.ftl.cmt", "step", g.int(1, 8).to_string());
        }
        if floor > 1 || g.chance(0.2) {
            doc.set("device.ftl.cmt", "floor", floor.to_string());
        }
    }
}

/// `[device.buffer]`: sized in stripes (a flash page per plane); two are the least accepted.
fn buffer(g: &mut G, doc: &mut Doc, stripe_units: u64, unit: u64, set_size: bool) {
    if set_size {
        let m = if g.mistake(0.05) { 1 } else { g.weighted(&[(2u64, 30), (3, 8), (4, 15), (8, 10), (32, 5)]) };
        doc.set("device.buffer", "size", t::string(&t::size(stripe_units * m * unit)));
    }
    if g.chance(0.3) {
        doc.set("device.buffer", "program_queue_depth", g.int(1, 4).to_string());
    }
    if g.chance(0.3) {
        let f = g.pick(&["page", "watermark"]);
        g.tag("flush", f);
        doc.set("device.buffer", "flush", t::string(f));
        if f == "watermark" && g.chance(0.6) {
            let high = g.int(30, 100) as f64 / 100.0;
            let low = g.int(1, (high * 100.0) as u64 - 1) as f64 / 100.0;
            doc.set("device.buffer", "high_watermark", t::float(high));
            doc.set("device.buffer", "low_watermark", t::float(low));
        }
    }
    if g.chance(0.4) {
        let v = g.chance(0.5);
        g.tag("volatile_write_cache", v);
        doc.set("device.buffer", "volatile_write_cache", v.to_string());
    }
}

/// `[device.timing]`.
fn timing(g: &mut G, doc: &mut Doc) {
    for (key, lo, hi) in [("read", 5_000u64, 200_000u64), ("program", 50_000, 3_000_000), ("erase", 300_000, 10_000_000), ("command", 0, 2_000)] {
        if g.chance(0.5) {
            // Zero times too: everything then happens at one instant.
            let ns = if lo == 0 || g.chance(0.1) { g.cost(hi / 10) } else { g.log(lo, hi) };
            doc.set("device.timing", key, t::string(&t::duration(ns)));
        }
    }
    if g.chance(0.5) {
        let mbs = g.log(20, 2_000);
        doc.set("device.timing", "channel_rate", t::string(&format!("{mbs}MB/s")));
    }
}

/// `[device.interface]`: NVMe queues, depths, controller cores, link.
fn interface(g: &mut G, doc: &mut Doc, flash: bool) {
    if g.chance(0.3) {
        doc.set("device.interface", "queues", g.weighted(&[(1u64, 3), (2, 2), (4, 2), (8, 1), (16, 1)]).to_string());
    }
    if g.chance(0.3) {
        doc.set("device.interface", "queue_depth", g.weighted(&[(1u64, 2), (2, 2), (8, 2), (32, 2), (1024, 1)]).to_string());
    }
    if g.chance(0.3) {
        doc.set("device.interface", "controller_cores", g.int(1, 8).to_string());
    }
    if g.chance(0.3) {
        doc.set("device.interface", "command_overhead", t::string(&t::duration(g.cost(20_000))));
    }
    // The null device moves no data: a link rate is refused there.
    if flash && g.chance(0.2) || g.mistake(0.1) {
        let mbs = g.log(100, 8_000);
        doc.set("device.interface", "link_rate", t::string(&format!("{mbs}MB/s")));
    }
}

/// `[precondition]`: every state, fills from nearly empty to full.
fn precondition(g: &mut G, doc: &mut Doc, flash: bool) {
    // Aged and full drives more often: garbage collection is where most of the model is.
    let state = g.weighted(&[("clean", 25), ("sequential-fill", 30), ("aged", 45)]);
    g.tag("precondition", state);
    if state != "clean" || g.chance(0.3) {
        doc.set("precondition", "state", t::string(state));
    }
    // A fill on a clean drive is refused (there is nothing to fill): drawn rarely, as bad input.
    let fill_allowed = state != "clean" || g.chance(0.02);
    if fill_allowed && (g.chance(0.6) || (!flash && g.chance(0.5))) {
        let fill = match g.weighted(&[(0u8, 3), (1, 4), (2, 3)]) {
            0 => 1.0,
            1 => g.int(500, 1000) as f64 / 1000.0,
            _ => g.int(1, 1000) as f64 / 1000.0,
        };
        doc.set("precondition", "fill", t::float(fill));
    }
}

/// `[host]`, its scheduler and the scheduler's section, and `[host.cpu]` sometimes.
fn host(g: &mut G, doc: &mut Doc, sched: &str) {
    g.tag("scheduler", sched);
    if sched != "none" || g.chance(0.3) {
        doc.set("host", "scheduler", t::string(sched));
    }
    if g.chance(0.3) {
        doc.set("host", "queue_depth", g.weighted(&[(1u64, 2), (2, 1), (4, 1), (8, 1), (32, 2), (128, 1), (1024, 1)]).to_string());
    }
    for key in ["submit_overhead", "completion_overhead"] {
        if g.chance(0.15) {
            doc.set("host", key, t::string(&t::duration(g.cost(20_000))));
        }
    }
    let ms = 1_000_000u64;
    match sched {
        "cfq" | "mcfq" if g.chance(0.5) => {
            if g.chance(0.5) {
                doc.set("host.cfq", "slice_sync", t::string(&t::duration(g.log(100_000, 200 * ms))));
            }
            if g.chance(0.5) {
                doc.set("host.cfq", "slice_idle", t::string(&t::duration(if g.chance(0.3) { 0 } else { g.log(1_000, 20 * ms) })));
            }
            if g.chance(0.4) {
                doc.set("host.cfq", "target_latency", t::string(&t::duration(g.log(ms, 500 * ms))));
            }
            if g.chance(0.4) {
                doc.set("host.cfq", "quantum", g.int(1, 16).to_string());
            }
            if g.chance(0.3) {
                doc.set("host.cfq", "fifo_expire_write", t::string(&t::duration(g.log(ms, 500 * ms))));
            }
        }
        _ => {}
    }
    if sched == "mcfq" && g.chance(0.6) {
        let interval = g.log(1, 100) * ms;
        if g.chance(0.6) {
            doc.set("host.mcfq", "interval", t::string(&t::duration(interval)));
            if g.chance(0.6) {
                let k = g.int(1, 20);
                doc.set("host.mcfq", "window", t::string(&t::duration(interval * k)));
            }
        }
        if g.chance(0.5) {
            doc.set("host.mcfq", "min_scale", t::float(g.int(1, 100) as f64 / 100.0));
        }
        if g.chance(0.5) {
            doc.set("host.mcfq", "max_scale", t::float(g.int(100, 100_000) as f64 / 100.0));
        }
    }
    if matches!(sched, "fair" | "hwabc" | "hwabc-oracle") && g.chance(0.6) {
        let section = if sched == "fair" { "host.fair" } else { "host.hwabc" };
        if g.chance(0.6) {
            doc.set(section, "period", t::string(&t::duration(g.log(100_000, 1_000 * ms))));
        }
        if g.chance(0.5) {
            doc.set(section, "window", g.log(1, 2000).to_string());
        }
        if g.chance(0.5) {
            doc.set(section, "windows", g.int(1, 16).to_string());
        }
        if sched != "fair" {
            if g.chance(0.4) {
                doc.set(section, "alpha", t::float(g.int(1, 99) as f64 / 100.0));
            }
            if g.chance(0.3) {
                doc.set(section, "a", t::float(g.int(0, 400) as f64 / 1000.0 - 0.1));
                doc.set(section, "b", t::float(g.int(1, 1000) as f64 / 1000.0));
            }
        }
    }
}

/// `[virt]` (a VM per tenant, in one of four designs) and `[host.cpu]`.
fn virt(g: &mut G, doc: &mut Doc, tenants: usize) {
    let mode = g.weighted(&[("bare-metal", 50), ("ide-emulation", 12), ("dataplane", 13), ("multiqueue", 12), ("per-vcpu-threads", 13)]);
    g.tag("virt", mode);
    let vm = mode != "bare-metal";
    if vm || g.chance(0.2) {
        doc.set("virt", "mode", t::string(mode));
    }
    let cpu = vm && g.chance(0.6) || !vm && g.chance(0.2);
    let (mut cores, mut tpc) = (4u64, 2u64);
    if cpu {
        g.tag("host_cpu", true);
        if g.chance(0.7) {
            cores = g.weighted(&[(1u64, 2), (2, 3), (4, 3), (8, 2), (16, 1)]);
            doc.set("host.cpu", "cores", cores.to_string());
        }
        if g.chance(0.5) {
            tpc = g.int(1, 2);
            doc.set("host.cpu", "threads_per_core", tpc.to_string());
        }
        if g.chance(0.3) {
            doc.set("host.cpu", "quantum", t::string(&t::duration(g.log(50_000, 20_000_000))));
        }
        for key in ["context_switch", "wakeup", "spin", "syscall", "app"] {
            if g.chance(0.15) {
                doc.set("host.cpu", key, t::string(&t::duration(g.cost(10_000))));
            }
        }
        if g.chance(0.2) {
            doc.set("host.cpu", "smt_slowdown", t::float(g.int(100, 400) as f64 / 100.0));
        }
    }
    if !vm {
        return;
    }
    let mut vcpus = 8u64;
    if g.chance(0.6) {
        vcpus = g.weighted(&[(1u64, 3), (2, 3), (4, 2), (8, 1), (16, 1)]);
        doc.set("virt", "vcpus", vcpus.to_string());
    }
    // Polling threads each take a hardware thread: leave at least one for everything else.
    let iothreads = if mode == "per-vcpu-threads" { vcpus } else { 1 };
    let poll_fits = (tenants as u64) * iothreads < cores * tpc;
    let notify = if g.chance(0.35) && (poll_fits || g.mistake(0.3)) { "poll" } else { "exit" };
    g.tag("notify", notify);
    if notify == "poll" || g.chance(0.3) {
        doc.set("virt", "notify", t::string(notify));
    }
    let emulation = if g.chance(0.35) { "in-hypervisor" } else { "userspace" };
    g.tag("emulation", emulation);
    if emulation != "userspace" || g.chance(0.3) {
        doc.set("virt", "emulation", t::string(emulation));
    }
    let completion = if g.chance(0.4) { "exitless" } else { "inject" };
    g.tag("completion", completion);
    if completion != "inject" || g.chance(0.3) {
        doc.set("virt", "completion", t::string(completion));
    }
    if emulation == "userspace" && g.chance(0.3) || g.mistake(0.1) {
        let aio = g.pick(&["native", "threads"]);
        g.tag("aio", aio);
        doc.set("virt", "aio", t::string(aio));
    }
    if g.chance(0.3) {
        doc.set("virt", "queue_size", g.log(1, 512).to_string());
    }
    if g.chance(0.3) {
        let m = if g.chance(0.3) { 0 } else { g.log(1, 512) * 1024 };
        doc.set("virt", "max_merge", t::string(&t::size(m)));
    }
    if mode == "multiqueue" && g.chance(0.4) {
        doc.set("virt", "batch_window", t::string(&t::duration(g.cost(200_000))));
    }
    for key in ["pin_vcpus", "pin_iothreads"] {
        if g.chance(0.25) {
            doc.set("virt", key, g.chance(0.5).to_string());
        }
    }
    for key in ["vq_add", "vq_pop", "request_cost", "vq_push", "userspace_switch", "poll_detect"] {
        if g.chance(0.1) {
            doc.set("virt", key, t::string(&t::duration(g.cost(5_000))));
        }
    }
    if mode == "ide-emulation" || g.chance(0.05) {
        for key in ["ide_submit_exits", "ide_complete_exits"] {
            if g.chance(0.3) {
                doc.set("virt", key, g.int(0, 12).to_string());
            }
        }
    }
    if g.chance(0.15) {
        for reason in ["io_inst", "ext_int", "msr_write", "hlt"] {
            for cost in ["direct", "indirect", "sync"] {
                if g.chance(0.3) {
                    doc.set(&format!("virt.exits.{reason}"), cost, t::string(&t::duration(g.cost(5_000))));
                }
            }
        }
    }
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

/// One `[[tenant]]`: a region, a weight, and a workload (fio inline or in a job file, a
/// personality, or a trace).
fn tenant(g: &mut G, doc: &mut Doc, i: usize, plan: &Plan) {
    let n = plan.tenants as u64;
    let mut keys: Vec<(String, String)> = Vec::new();
    let name = match g.weighted(&[(0u8, 8), (1, 1), (2, 1)]) {
        0 => format!("t{i}"),
        1 => format!("vm-{i}"),
        _ => format!("ténant {i}"),
    };
    if g.chance(0.9) {
        keys.push(("name".into(), t::string(&name)));
    }
    let name = if keys.is_empty() { format!("tenant{i}") } else { name };
    // The region: auto (the i-th of n slices), the whole device, or an explicit slice of the
    // i-th n-th, by percent or in bytes.
    let region = match g.weighted(&[(0u8, 50), (1, 10), (2, 15), (3, 25)]) {
        0 | 1 => {
            g.tag("region", "auto");
            if g.chance(0.3) {
                keys.push(("region".into(), t::string("auto")));
            }
            if n == 1 {
                plan.cap
            } else {
                let align = if plan.cap / n >= 64 << 20 { 1 << 20 } else { 4096 };
                plan.cap / n / align * align
            }
        }
        2 => {
            g.tag("region", "whole");
            keys.push(("region".into(), t::string("whole")));
            plan.cap
        }
        _ => {
            g.tag("region", "range");
            // A part of the i-th n-th of the drive: it stays clear of auto slices (the i-th n-th
            // rounded down) and of the other ranges.
            let frac = g.int(10, 90) as f64 / 100.0;
            // Within the i-th auto slice, as the loader places them: clear of the other slices
            // and of the other ranges.
            let align = if plan.cap / n >= 64 << 20 { 1 << 20 } else { 4096 };
            let slot = plan.cap / n / align * align;
            let next_auto = (i as u64 + 1) * slot;
            if g.chance(0.5) {
                let start = format!("{:.6}%", ((i as u64 * slot) as f64 * 100.0 / plan.cap as f64 * 1e6).ceil() / 1e6);
                let pct = |s: &str| -> f64 { s.trim_end_matches('%').parse().expect("a percentage") };
                let bytes = |p: f64| (plan.cap as f64 * p / 100.0) as u64 / 4096 * 4096;
                let offset = bytes(pct(&start));
                let want = ((slot as f64 * frac) as u64).min(next_auto.saturating_sub(offset));
                let size = format!("{:.6}%", (want as f64 * 100.0 / plan.cap as f64 * 1e6).floor() / 1e6);
                keys.push(("region".into(), format!("{{ offset = {}, size = {} }}", t::string(&start), t::string(&size))));
                bytes(pct(&size))
            } else {
                let offset = i as u64 * slot;
                let len = ((slot as f64 * frac) as u64).min(next_auto.saturating_sub(offset)) / 4096 * 4096;
                keys.push((
                    "region".into(),
                    format!("{{ offset = {}, size = {} }}", t::string(&t::size(offset)), t::string(&t::size(len))),
                ));
                len
            }
        }
    };
    if g.chance(0.3) {
        let w = if g.mistake(0.03) { g.pick(&["0", "1001", "2.5", "-3"]).to_string() } else { g.log(1, 1000).to_string() };
        keys.push(("weight".into(), w));
    }
    let stopless = plan.stop == Stop::Neither;
    let kind = g.weighted(&[("fio", 55), ("job_file", 10), ("personality", if stopless { 0 } else { 10 }), ("trace", 25)]);
    g.tag("workload", kind);
    match kind {
        "fio" | "job_file" => {
            let text = fio_text(g, &name, region, plan, i);
            if kind == "fio" {
                keys.push(("fio".into(), t::multiline(&text)));
            } else {
                let file = format!("t{i}.fio");
                g.files.push((file.clone(), text.into_bytes()));
                keys.push(("job_file".into(), t::string(&file)));
            }
        }
        "personality" => {
            let p = g.pick(&["fileserver", "varmail", "webproxy", "msn", "exchange", "financial"]);
            g.tag("personality", p);
            keys.push(("personality".into(), t::string(p)));
        }
        _ => {
            let v = traces::trace_tenant(g, i, region, plan.large);
            keys.push(("trace".into(), v));
        }
    }
    doc.tenant(keys);
}

/// A tenant's fio job file: one to four job sections, sometimes a `[global]` section and an
/// `include`.
fn fio_text(g: &mut G, tenant: &str, region: u64, plan: &Plan, i: usize) -> String {
    let mut out = String::new();
    if g.chance(0.3) {
        out.push_str(&format!("; jobs of {tenant}\n"));
    }
    let sections = g.weighted(&[(1u64, 6), (2, 3), (3, 1), (4, 1)]);
    let global = g.chance(0.2);
    let mut global_opts = Vec::new();
    if global {
        global_opts.push(g.pick(&["ioengine=libaio", "direct=1", "thread", "ioengine=io_uring"]).to_string());
        if g.chance(0.5) {
            global_opts.push(format!("iodepth={}", g.log(1, 64)));
        }
        if g.chance(0.3) {
            global_opts.push("group_reporting".into());
        }
        out.push_str("[global]\n");
        for o in &global_opts {
            out.push_str(o);
            out.push('\n');
        }
        if g.chance(0.15) {
            let inc = format!("t{i}-inc.fio");
            g.files.push((inc.clone(), b"; included options\ndirect=1\n".to_vec()));
            out.push_str(&format!("include {inc}\n"));
            g.tag("fio", "include");
        }
    }
    for k in 0..sections {
        out.push_str(&format!("[j{k}]\n"));
        for line in fio_job(g, region, plan, k == 0, sections) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// Block sizes, in bytes, and how often each is drawn.
const BS: [(u64, u32); 11] = [
    (512, 1),
    (1024, 1),
    (2048, 1),
    (4096, 10),
    (8192, 3),
    (16384, 2),
    (32768, 1),
    (65536, 2),
    (131072, 1),
    (262144, 1),
    (1 << 20, 1),
];

/// The most I/Os a job issues when nothing else stops it.
const MAX_IOS: u64 = 3000;

/// The options of one job section.
fn fio_job(g: &mut G, region: u64, plan: &Plan, first: bool, sections: u64) -> Vec<String> {
    let mut o: Vec<String> = Vec::new();
    let region = region.max(512);
    let rw = g.weighted(&[
        ("read", 8),
        ("write", 10),
        ("trim", 3),
        ("randread", 10),
        ("randwrite", 12),
        ("randtrim", 3),
        ("rw", 5),
        ("randrw", 10),
        ("trimwrite", 3),
        ("randtrimwrite", 3),
    ]);
    g.tag("rw", rw);
    let random = rw.starts_with("rand");
    let mut rw_text = rw.to_string();
    if g.chance(0.08) {
        if random {
            rw_text = format!("{rw}:{}", g.int(1, 16));
            if g.chance(0.4) {
                o.push(format!("rw_sequencer={}", g.pick(&["sequential", "identical"])));
            }
        } else {
            rw_text = format!("{rw}:{}", t::fio_size(g.int(1, 16) * 512));
        }
    }
    o.push(format!("{}={rw_text}", if g.chance(0.1) { "readwrite" } else { "rw" }));
    if matches!(rw, "rw" | "randrw") && g.chance(0.6) {
        if g.chance(0.7) {
            o.push(format!("rwmixread={}", g.int(0, 100)));
        } else {
            o.push(format!("rwmixwrite={}", g.int(0, 100)));
        }
    }
    // Block sizes no larger than an eighth of the region.
    let cap_bs = (region / 8).max(512);
    let sizes: Vec<(u64, u32)> = BS.iter().copied().filter(|(b, _)| *b <= cap_bs).collect();
    let draw_bs = |g: &mut G| g.weighted(&sizes);
    let bs = draw_bs(g);
    let mut max_bs = bs;
    let mut min_bs = bs;
    match g.weighted(&[(0u8, 55), (1, 12), (2, 10), (3, 13), (4, 10)]) {
        0 => o.push(format!("bs={}", t::fio_size(bs))),
        1 => {
            let (w, t_) = (draw_bs(g), draw_bs(g));
            max_bs = bs.max(w).max(t_);
            min_bs = bs.min(w).min(t_);
            if g.chance(0.5) {
                o.push(format!("bs={},{}", t::fio_size(bs), t::fio_size(w)));
            } else {
                o.push(format!("bs={},{},{}", t::fio_size(bs), t::fio_size(w), t::fio_size(t_)));
            }
        }
        2 => {
            let hi = draw_bs(g).max(bs);
            max_bs = hi;
            o.push(format!("bsrange={}-{}", t::fio_size(bs), t::fio_size(hi)));
        }
        3 => {
            let parts = g.int(2, 4);
            let mut left = 100u64;
            let mut items = Vec::new();
            for p in 0..parts {
                let b = draw_bs(g);
                max_bs = max_bs.max(b);
                min_bs = min_bs.min(b);
                if p + 1 == parts {
                    items.push(if g.chance(0.3) { format!("{}/", t::fio_size(b)) } else { format!("{}/{left}", t::fio_size(b)) });
                } else {
                    // Every entry gets at least 1%: a written 0 that fio would give a share to is
                    // refused (fio reads 0 as blank).
                    let share = g.int(1, left - (parts - 1 - p));
                    left -= share;
                    items.push(format!("{}/{share}", t::fio_size(b)));
                }
            }
            o.push(format!("bssplit={}", items.join(":")));
        }
        _ => {
            // The default, 4 KiB.
            if region < 4096 * 8 {
                o.push(format!("bs={}", t::fio_size(bs)));
            } else {
                (min_bs, max_bs) = (4096, 4096);
            }
        }
    }
    if g.mistake(0.01) {
        o.push("bs=1000".into()); // not a multiple of the sector: refused
    }
    if g.chance(0.03) {
        o.push("bs_is_seq_rand=1".into());
    }
    let numjobs = if g.chance(0.15) { g.weighted(&[(2u64, 4), (3, 2), (4, 2), (8, 1), (32, 1)]) } else { 1 };
    if numjobs > 1 {
        o.push(format!("numjobs={numjobs}"));
    }
    let per_job_ios = (MAX_IOS / numjobs / sections).max(10);
    // Where and how much: an offset, a size, an io_size or number_ios; a bound when nothing
    // else will stop the job. `room` is what the last clone has from its start to the region's
    // end, `job_len` the job's own size (for zoned_abs).
    let mut bounded = false;
    let mut room = region;
    if region >= 32 * max_bs && g.chance(0.15) {
        let mut start = 0;
        if g.chance(0.7) {
            let pct = g.int(1, 50);
            o.push(format!("offset={pct}%"));
            start += region * pct / 100;
        }
        if numjobs > 1 && g.chance(0.6) {
            if g.chance(0.5) {
                let inc = g.int(1, 40 / numjobs);
                o.push(format!("offset_increment={inc}%"));
                start += region * inc / 100 * (numjobs - 1);
            } else {
                let inc = (region / 2 / numjobs / 4096 * 4096).max(4096);
                o.push(format!("offset_increment={}", t::fio_size(inc)));
                start += inc * (numjobs - 1);
            }
        }
        let mut align = max_bs;
        if g.chance(0.3) {
            let a = g.pick(&[512u64, 4096, 65536]);
            if a <= region / 32 {
                o.push(format!("offset_align={}", t::fio_size(a)));
                align = align.max(a);
            }
        }
        // Starts are rounded up to the alignment.
        room = region.saturating_sub(start + align);
    }
    let room = room.max(max_bs);
    let mut job_len = room;
    match g.weighted(&[(0u8, 30), (1, 25), (2, 20), (3, 8), (4, 4), (5, 13)]) {
        0 => {
            // Bytes: at most per_job_ios blocks, within the room.
            let blocks = g.log(1, per_job_ios);
            let size = (blocks * max_bs).min(room / max_bs * max_bs).max(max_bs);
            o.push(format!("size={}", t::fio_size(size)));
            job_len = size;
            bounded = size / min_bs <= per_job_ios * 4;
        }
        1 => {
            o.push(format!("number_ios={}", g.log(1, per_job_ios)));
            bounded = true;
        }
        2 => {
            // At least two of the largest blocks.
            let least = (2 * max_bs * 100).div_ceil(region).clamp(1, 100);
            let pct = g.int(least, 100);
            o.push(format!("size={pct}%"));
            // fio rounds it down to the least block size (at most the largest).
            job_len = (region * pct / 100).min(room) / max_bs * max_bs;
            bounded = job_len / min_bs <= per_job_ios * 4;
        }
        3 => {
            let size = (g.log(1, per_job_ios) * max_bs).min(room / max_bs * max_bs).max(max_bs);
            o.push(format!("io_size={}", t::fio_size(size)));
            bounded = true;
        }
        4 => {
            let lo = max_bs * g.int(1, 8);
            let hi = lo + max_bs * g.int(0, 8);
            if hi <= room {
                o.push(format!("filesize={}-{}", t::fio_size(lo), t::fio_size(hi)));
                job_len = lo;
                bounded = hi / min_bs <= per_job_ios * 4;
            }
        }
        _ => {}
    }
    if random && g.chance(0.1) {
        // A block alignment that leaves room for blocks in the job's size.
        let ba = g.pick(&[512u64, 1024, 4096]);
        if ba <= job_len / 4 {
            o.push(format!("ba={}", t::fio_size(ba)));
        }
    }
    if g.chance(0.1) {
        o.push(format!("loops={}", g.int(0, 3)));
    }
    let iodepth = if g.chance(0.05) { g.log(64, 2048) } else { g.log(1, 64) };
    if iodepth > 1 || g.chance(0.3) {
        o.push(format!("iodepth={iodepth}"));
    }
    if g.chance(0.15) {
        o.push(format!("iodepth_batch={}", g.int(0, iodepth + 1)));
    }
    if g.chance(0.1) {
        o.push(format!("iodepth_batch_complete_min={}", g.int(0, iodepth)));
    }
    let time_based = g.chance(0.3);
    let max_runtime = if plan.flash { 200_000_000 } else { 20_000_000 };
    let mut runtime = 0;
    if time_based {
        g.tag("fio", "time_based");
        runtime = g.log(100_000, max_runtime);
        o.push("time_based".into());
        o.push(format!("runtime={}", t::fio_time(runtime)));
        bounded = true;
    } else if g.chance(0.1) {
        runtime = g.log(100_000, max_runtime);
        o.push(format!("{}={}", if g.chance(0.2) { "timeout" } else { "runtime" }, t::fio_time(runtime)));
        bounded = true;
    } else if g.chance(0.02) {
        o.push("time_based".into()); // without a runtime: a warning, then size-based
    }
    if g.chance(0.1) {
        let ramp = g.log(1_000, runtime.max(2_000_000) / 2);
        g.tag("fio", "ramp_time");
        o.push(format!("ramp_time={}", t::fio_time(ramp)));
    }
    if g.chance(0.1) {
        let a = g.log(1_000, 5_000_000);
        if g.chance(0.5) {
            o.push(format!("startdelay={}", t::fio_time(a)));
        } else {
            let b = a + g.log(1_000, 5_000_000);
            o.push(format!("startdelay={}-{}", t::fio_time(a), t::fio_time(b)));
        }
    }
    match g.weighted(&[(0u8, 84), (1, 8), (2, 8)]) {
        1 => {
            let r = g.log(1, 2000);
            let v = if g.chance(0.3) { format!("{r}m,{}m", g.log(1, 2000)) } else { format!("{r}m") };
            o.push(format!("rate={v}"));
            g.tag("fio", "rate");
        }
        2 => {
            let r = g.log(50, 200_000);
            o.push(format!("rate_iops={r}"));
            g.tag("fio", "rate_iops");
            if !bounded {
                // A rate alone does not end a job: give it a count.
                o.push(format!("number_ios={}", g.log(1, per_job_ios)));
                bounded = true;
            }
        }
        _ => {}
    }
    if o.iter().any(|x| x.starts_with("rate")) && g.chance(0.3) {
        o.push("rate_process=poisson".into());
    }
    if g.chance(0.1) {
        let think = g.log(1, 2_000);
        o.push(format!("thinktime={think}"));
        g.tag("fio", "thinktime");
        if g.chance(0.3) {
            o.push(format!("thinktime_spin={}", g.int(0, think)));
        }
        if g.chance(0.4) {
            o.push(format!("thinktime_blocks={}", g.int(1, 8)));
        }
        if g.chance(0.3) {
            o.push(format!("thinktime_blocks_type={}", g.pick(&["complete", "issue"])));
        }
        if g.chance(0.1) {
            o.push(format!("thinktime_iotime={}", t::fio_time(g.log(1_000_000, 50_000_000))));
        }
    }
    let writes = rw.contains("write") || rw == "rw";
    if writes || g.chance(0.05) {
        if g.chance(0.12) {
            o.push(format!("fsync={}", g.log(1, 32)));
            g.tag("fio", "fsync");
        }
        if g.chance(0.08) {
            o.push(format!("fdatasync={}", g.log(1, 32)));
            g.tag("fio", "fdatasync");
        }
        if g.chance(0.1) {
            o.push("end_fsync=1".into());
            g.tag("fio", "end_fsync");
        }
    }
    if random && g.chance(0.3) {
        let d = match g.weighted(&[(0u8, 1), (1, 3), (2, 2), (3, 2), (4, 2), (5, 1)]) {
            0 => "random".to_string(),
            1 => {
                let theta = loop {
                    let x = g.int(0, 300) as f64 / 100.0;
                    if x != 1.0 {
                        break x;
                    }
                };
                if g.chance(0.3) {
                    format!("zipf:{theta}:{}", g.int(0, 100) as f64 / 100.0)
                } else {
                    format!("zipf:{theta}")
                }
            }
            2 => format!("pareto:{}", g.int(1, 99) as f64 / 100.0),
            3 => {
                if g.chance(0.3) {
                    format!("normal:{}:{}", g.int(0, 99), g.int(0, 100) as f64 / 100.0)
                } else {
                    format!("normal:{}", g.int(0, 99))
                }
            }
            4 => {
                let zones = g.int(1, 4);
                let (mut acc, mut sz) = (100u64, 100u64);
                let mut parts = Vec::new();
                for z in 0..zones {
                    let (a, s) = if z + 1 == zones { (acc, sz) } else { (g.int(0, acc), g.int(1, sz.saturating_sub(zones - z - 1).max(1))) };
                    acc -= a;
                    sz = sz.saturating_sub(s);
                    parts.push(format!("{a}/{s}"));
                }
                format!("zoned:{}", parts.join(":"))
            }
            _ => {
                let zones = g.int(1, 3);
                let mut acc = 100u64;
                // Zones within the job's size, short of its last block (fio refuses zones past
                // the last block that fits).
                let each = (job_len.saturating_sub(max_bs) / zones / 512 * 512).max(512);
                let mut parts = Vec::new();
                for z in 0..zones {
                    let a = if z + 1 == zones { acc } else { g.int(0, acc) };
                    acc -= a;
                    parts.push(format!("{a}/{}", t::fio_size(each)));
                }
                format!("zoned_abs:{}", parts.join(":"))
            }
        };
        g.tag("distribution", d.split(':').next().unwrap_or("random"));
        o.push(format!("random_distribution={d}"));
    }
    if g.chance(0.08) {
        if g.chance(0.5) {
            o.push(format!("percentage_random={}", g.int(0, 100)));
        } else {
            o.push(format!("percentage_random={},{}", g.int(0, 100), g.int(0, 100)));
        }
    }
    if g.chance(0.1) {
        o.push("norandommap".into());
    }
    if g.chance(0.05) {
        o.push("randrepeat=0".into());
    }
    if g.chance(0.05) {
        o.push(format!("randseed={}", g.int(0, 1 << 40)));
    }
    if !first && g.chance(0.25) {
        o.push(g.pick(&["stonewall", "new_group", "wait_for_previous"]).to_string());
        g.tag("fio", "stonewall");
    }
    if g.chance(0.1) {
        o.push("group_reporting".into());
    }
    if g.chance(0.4) {
        o.push(g.pick(&["ioengine=libaio", "direct=1", "ioengine=psync", "buffered=0", "verify=crc32c"]).to_string());
    }
    if g.chance(0.02) {
        o.push(g.pick(&["rate_min=1m", "latency_target=5ms", "exitall"]).to_string());
    }
    if g.chance(0.01) {
        o.push("no_such_option=1".into());
    }
    if plan.stop == Stop::Neither && !bounded {
        o.push(format!("number_ios={}", g.log(1, per_job_ios)));
    }
    o
}
