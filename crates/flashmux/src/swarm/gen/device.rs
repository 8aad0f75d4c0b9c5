//! The drive's draws: `[device]` (a null device, or a flash preset with its geometry, mapping,
//! mode, size and over-provisioning), GC's victim policy and copy-back, `[device.ftl.cmt]`,
//! `[device.buffer]`, `[device.timing]` (with the multi-plane rule),
//! `[device.interface]`, and the drive's state before the run (`[precondition]`).
//!
//! A flash drive is drawn in steps that each hand the next what it needs: the geometry (the
//! preset's, or drawn until it fits the case's bounds: at most 2^14 units when invariants are
//! checked more often than every 30 events, 2^17 usually, 2^21 for a large case; at least 64 KiB
//! per tenant and 256 KiB in all), the mapping and translation entry size, the drive mode, the
//! blocks per plane B and logical blocks L (e.g. B = 40 and GC threshold T = 2 without DFTL:
//! L = 40 - (T + 3) - slack = 35 - slack), over-provisioning from B / L,
//! and the size, by capacity or by blocks per plane. The returned logical capacity is what the
//! loader will compute, so the tenants' regions are drawn inside it.

use super::G;
use crate::config::{preset, DeviceKind};
use crate::device::SsdConfig;
use crate::flash::Geometry;
use crate::swarm::toml::{self as t, Doc};

/// A null device: capacity and latency.
pub(super) fn null_device(g: &mut G, doc: &mut Doc, tenants: usize) -> u64 {
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
/// Blocks per plane the FTL may need beyond the logical data (threshold, open blocks, DFTL's).
const SPARE: u64 = 16;

/// What a drawn geometry must fit: at most `max_units` units (small for most runs), at least
/// `min_bytes` logical bytes (so every tenant's region holds a few blocks).
#[derive(Clone, Copy)]
struct Bounds {
    max_units: u64,
    min_bytes: u64,
}

impl Bounds {
    fn fits(&self, geo: &Geometry) -> bool {
        let row = geo.planes() as u64 * geo.units_per_block() as u64;
        let l_min = self.min_bytes.div_ceil(row * geo.unit_bytes as u64);
        row * (l_min + SPARE) <= self.max_units
    }
}

/// The drive's geometry in the numbers the later draws count with.
#[derive(Clone, Copy)]
struct Shape {
    planes: u64,
    /// Units per page, pages per block, units per block.
    upp: u64,
    ppb: u64,
    upb: u64,
    /// Bytes per unit and per page.
    unit: u64,
    page: u64,
    /// Logical blocks per plane for the least capacity.
    l_min: u64,
}

impl Shape {
    fn of(geo: &Geometry, min_bytes: u64) -> Shape {
        let planes = geo.planes() as u64;
        let upp = geo.units_per_page() as u64;
        let ppb = geo.pages_per_block as u64;
        let upb = upp * ppb;
        let unit = geo.unit_bytes as u64;
        let page = geo.page_bytes as u64;
        let l_min = min_bytes.div_ceil(planes * upb * unit);
        Shape { planes, upp, ppb, upb, unit, page, l_min }
    }
}

/// Blocks per plane: `per_plane` (B) in all, `logical` (L) of them for the logical data.
#[derive(Clone, Copy)]
struct Blocks {
    per_plane: u64,
    logical: u64,
}

/// A flash device: a preset with its geometry, over-provisioning, FTL, mapping and buffer
/// drawn. Returns the drive's logical capacity in bytes, computed as the loader will.
pub(super) fn flash_device(g: &mut G, doc: &mut Doc, tenants: usize, budget: bool, large: bool, tiny: bool) -> u64 {
    let name = g.pick(&["paper-c", "x25e", "840pro", "tlc-nvme", "cosmos"]);
    g.tag("preset", name);
    doc.set("device", "preset", t::string(name));
    let DeviceKind::Ssd(p) = preset(name).expect("listed presets exist").kind else { unreachable!("flash preset") };
    let max_units: u64 = if large {
        1 << 21
    } else if tiny {
        1 << 14
    } else {
        1 << 17
    };
    let bounds = Bounds { max_units, min_bytes: (tenants as u64 * (64 << 10)).max(256 << 10) };
    let (geo, custom) = geometry(g, doc, &p.geometry, bounds);
    let s = Shape::of(&geo, bounds.min_bytes);
    // A budget scheduler sees GC on an open-channel drive or, one time in four, through an FDP
    // drive's statistics log page.
    let budget_fdp = budget && g.chance(0.25);
    let (dftl, entry) = mapping(g, doc, &s, tenants, budget && !budget_fdp);
    let open = drive_mode(g, doc, budget && !budget_fdp, dftl || budget_fdp, p.open_channel);
    let placed = placement(g, doc, open, tenants, budget_fdp);
    let blocks = blocks(g, doc, &s, dftl, entry, max_units, placed);
    let op = overprovisioning(g, doc, blocks, p.overprovisioning);
    let logical_units = capacity(g, doc, &p, geo, &s, blocks, op);
    gc(g, doc);
    if dftl {
        cmt(g, doc, tenants, logical_units, s.page, entry);
    } else if g.mistake(0.05) {
        // A map cache without DFTL: refused.
        doc.set("device.ftl.cmt", "pages", "4".into());
    }
    let set_size = custom || g.chance(0.3);
    buffer(g, doc, s.planes * s.upp, s.unit, set_size);
    if g.chance(0.3) {
        timing(g, doc);
    }
    if g.chance(0.15) {
        g.tag("multiplane", "same-page");
        doc.set("device.timing", "multiplane", t::string("same-page"));
    }
    logical_units * s.unit
}

/// GC's options: the victim policy (MQSim's rga, random and fifo too, rga now and then with
/// its sample size), and copy-back off (pages over the channel) in about one case in seven.
fn gc(g: &mut G, doc: &mut Doc) {
    if g.chance(0.4) {
        let v = g.pick(&["greedy", "cost-benefit", "rga", "random", "fifo"]);
        g.tag("victim", v);
        doc.set("device.ftl", "gc_victim", t::string(v));
        if v == "rga" && g.chance(0.5) {
            // At most 16: every drawn plane has more blocks (L + 16 at least).
            doc.set("device.ftl", "gc_rga_candidates", g.int(1, 16).to_string());
        }
    }
    if g.mistake(0.03) {
        // A sample of 0 blocks, or one for a policy that draws none: refused.
        doc.set("device.ftl", "gc_rga_candidates", "0".into());
    }
    if g.chance(0.15) {
        g.tag("copyback", "off");
        doc.set("device.ftl", "gc_copyback", "false".into());
    }
}

/// `[device.geometry]`'s shape: the preset's, or (three times in four, and always when the
/// preset's does not fit `bounds`) drawn until it fits. Returns it and whether it was drawn.
fn geometry(g: &mut G, doc: &mut Doc, preset: &Geometry, bounds: Bounds) -> (Geometry, bool) {
    let custom = g.chance(0.75) || !bounds.fits(preset);
    if !custom {
        g.tag("geometry", "preset");
        return (preset.clone(), false);
    }
    g.tag("geometry", "custom");
    let drawn = loop {
        let mut d = preset.clone();
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
        if bounds.fits(&d) {
            break d;
        }
    };
    for (key, v, old) in [
        ("channels", drawn.channels, preset.channels),
        ("chips_per_channel", drawn.chips_per_channel, preset.chips_per_channel),
        ("dies_per_chip", drawn.dies_per_chip, preset.dies_per_chip),
        ("planes_per_die", drawn.planes_per_die, preset.planes_per_die),
        ("pages_per_block", drawn.pages_per_block, preset.pages_per_block),
    ] {
        // A value equal to the preset's is sometimes left to it.
        if v != old || g.chance(0.5) {
            doc.set("device.geometry", key, v.to_string());
        }
    }
    for (key, v, old) in
        [("page_size", drawn.page_bytes, preset.page_bytes), ("unit_size", drawn.unit_bytes, preset.unit_bytes)]
    {
        if v != old || g.chance(0.5) {
            doc.set("device.geometry", key, t::string(&t::size(v as u64)));
        }
    }
    (drawn, true)
}

/// The mapping: DFTL (not on an open-channel drive, so never with a budget scheduler there), else full;
/// explicit or by default. Returns whether it is DFTL and the translation entry's size in bytes.
fn mapping(g: &mut G, doc: &mut Doc, s: &Shape, tenants: usize, budget: bool) -> (bool, u64) {
    let page = s.page;
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
        let least_units = s.l_min * s.planes * s.upb;
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
    debug_assert!(entry >= 1, "a translation entry has bytes");
    (dftl, entry)
}

/// Data placement on a drive that runs its own FTL: FDP (1 to 8 handles, some persistently
/// isolated now and then) or Streams (1 to 8), or none; a handle or stream per tenant when there
/// are enough of them (and by mistake when there are not); FDP always for a budget scheduler
/// (`fdp`). Returns the open blocks per plane the further placements take.
fn placement(g: &mut G, doc: &mut Doc, open: bool, tenants: usize, fdp: bool) -> u64 {
    if !fdp && (open || g.chance(0.7)) {
        g.tag("placement", "none");
        return 0;
    }
    let fdp = fdp || g.chance(0.6);
    let n = g.int(1, 8);
    let mut extra = n - u64::from(fdp);
    if fdp {
        g.tag("placement", "fdp");
        doc.set("device.fdp", "handles", n.to_string());
        match g.weighted(&[(0u8, 3), (1, 1), (2, 1)]) {
            0 => {}
            1 => {
                doc.set("device.fdp", "handle_type", t::string("persistently-isolated"));
                extra += n;
            }
            _ => {
                let persistent: Vec<String> = (0..n).filter(|_| g.chance(0.5)).map(|h| h.to_string()).collect();
                extra += persistent.len() as u64;
                doc.set("device.fdp", "persistent", format!("[{}]", persistent.join(", ")));
            }
        }
    } else {
        g.tag("placement", "streams");
        doc.set("device.streams", "streams", n.to_string());
    }
    if (tenants as u64 <= n && g.chance(0.7)) || g.mistake(0.03) {
        // More tenants than handles or streams is refused.
        doc.set(if fdp { "device.fdp" } else { "device.streams" }, "per_tenant", "true".into());
    }
    extra
}

/// The drive's mode: `open` (a budget scheduler not drawn onto an FDP drive) needs
/// open-channel; `own_ftl` (DFTL, or FDP for a budget scheduler) the drive's own FTL. Returns
/// whether it is open-channel.
fn drive_mode(g: &mut G, doc: &mut Doc, open: bool, own_ftl: bool, preset_open: bool) -> bool {
    debug_assert!(!(open && own_ftl), "DFTL and FDP are never drawn for an open-channel budget scheduler");
    let open = if open {
        true
    } else if own_ftl {
        false
    } else {
        g.chance(0.2)
    };
    g.tag("device_mode", if open { "open-channel" } else { "ssd" });
    if open != preset_open || g.chance(0.3) {
        doc.set("device", "mode", t::string(if open { "open-channel" } else { "ssd" }));
    }
    open
}

/// Blocks per plane B and a GC threshold T; the FTL needs T + 3 (+ 2 with DFTL, + `placed` for
/// the further placements' open blocks) blocks per plane besides the logical data's L (and
/// DFTL's translation pages). L is as many as fit (over-provisioning at its least) or fewer.
fn blocks(g: &mut G, doc: &mut Doc, s: &Shape, dftl: bool, entry: u64, max_units: u64, placed: u64) -> Blocks {
    let Shape { planes, ppb, upb, page, l_min, .. } = *s;
    let max_b = (max_units / (planes * upb)).max(l_min + SPARE);
    let mut b = g.log(l_min + SPARE, max_b.min(1024).max(l_min + SPARE));
    let threshold = if g.chance(0.3) {
        let th = if g.mistake(0.1) { 1 } else { g.int(2, (b / 4).clamp(2, 8)) };
        doc.set("device.ftl", "gc_threshold_blocks", th.to_string());
        th
    } else {
        (b / 100).max(2)
    };
    let needed = threshold.max(2) + 3 + if dftl { 2 } else { 0 } + placed;
    let map_blocks = |l: u64| -> u64 {
        if !dftl {
            return 0;
        }
        let entries = (page / entry).max(1);
        let map_pages = (planes * l * upb).div_ceil(entries);
        map_pages.div_ceil(planes).div_ceil(ppb)
    };
    b = b.max(l_min + needed + 1 + map_blocks(l_min));
    let slack = g.weighted(&[(0u64, 4), (1, 2), (2, 1), (4, 1), (b / 3, 1)]);
    let l0 = b.saturating_sub(needed + slack).max(1);
    let l = l0.saturating_sub(map_blocks(l0)).max(l_min).max(1);
    Blocks { per_plane: b, logical: l }
}

/// `overprovisioning`: B / L - 1 (the least the FTL accepts, a hair over), sometimes more, or by
/// mistake drawn freely (below the least it is refused). Returns it as the loader reads it back.
fn overprovisioning(g: &mut G, doc: &mut Doc, blocks: Blocks, preset_op: f64) -> f64 {
    let mut op = blocks.per_plane as f64 / blocks.logical as f64 - 1.0 + 1e-6;
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
    if (op_read - preset_op).abs() > 1e-9 || g.chance(0.3) {
        doc.set("device.ftl", "overprovisioning", op_text);
    }
    op_read
}

/// The drive's size, by `capacity` (L blocks' worth) or by `blocks_per_plane` (B). Returns its
/// logical units, computed as the loader will make the drive.
fn capacity(g: &mut G, doc: &mut Doc, p: &SsdConfig, geo: Geometry, s: &Shape, blocks: Blocks, op: f64) -> u64 {
    let Shape { planes, upb, unit, .. } = *s;
    let mut c = p.clone();
    c.geometry = geo;
    c.overprovisioning = op;
    if g.chance(0.45) {
        g.tag("size_by", "capacity");
        let want = blocks.logical * planes * upb * unit;
        doc.set("device", "capacity", t::string(&t::size(want)));
        let raw = (want as f64 * (1.0 + op)).ceil() as u64;
        c.geometry.blocks_per_plane = raw.div_ceil(upb * unit * planes).max(1) as u32;
        while c.logical_units() * unit < want {
            c.geometry.blocks_per_plane += 1;
        }
    } else {
        g.tag("size_by", "blocks_per_plane");
        doc.set("device.geometry", "blocks_per_plane", blocks.per_plane.to_string());
        c.geometry.blocks_per_plane = blocks.per_plane as u32;
    }
    c.logical_units()
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
    let form = if default_fits || g.mistake(0.2) {
        g.weighted(&[(0u8, 4), (1, 2), (2, 2), (3, 1)])
    } else {
        g.weighted(&[(0u8, 4), (1, 2), (2, 2)])
    };
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

/// `[device.buffer]`: sized in stripes (a flash page per plane); one is the least accepted.
fn buffer(g: &mut G, doc: &mut Doc, stripe_units: u64, unit: u64, set_size: bool) {
    if set_size {
        let units = if g.mistake(0.05) {
            stripe_units - 1
        } else {
            stripe_units * g.weighted(&[(1u64, 10), (2, 30), (3, 8), (4, 15), (8, 10), (32, 5)])
        };
        doc.set("device.buffer", "size", t::string(&t::size(units * unit)));
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
    if g.chance(0.1) {
        doc.set("device.buffer", "dram_access", t::string(&t::duration(g.log(100, 50_000))));
    }
    if g.chance(0.1) {
        doc.set("device.buffer", "dram_rate", t::string(&format!("{}MB/s", g.log(100, 20_000))));
    }
}

/// `[device.timing]`.
fn timing(g: &mut G, doc: &mut Doc) {
    for (key, lo, hi) in [
        ("read", 5_000u64, 200_000u64),
        ("program", 50_000, 3_000_000),
        ("erase", 300_000, 10_000_000),
        ("command", 0, 2_000),
    ] {
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
    if g.chance(0.1) {
        doc.set("device.timing", "interleave_dies", "false".into());
    }
    if g.chance(0.1) {
        doc.set("device.timing", "data_out_first", "true".into());
    }
    for key in ["encode_rate", "decode_rate"] {
        if g.chance(0.15) {
            let mbs = g.log(50, 10_000);
            doc.set("device.timing", key, t::string(&format!("{mbs}MB/s")));
        }
    }
}

/// `[device.interface]`: NVMe queues, depths, controller cores, link.
pub(super) fn interface(g: &mut G, doc: &mut Doc, flash: bool) {
    let mut queues = None;
    if g.chance(0.3) {
        let q = g.weighted(&[(1u64, 3), (2, 2), (4, 2), (8, 1), (16, 1)]);
        doc.set("device.interface", "queues", q.to_string());
        queues = Some(q);
    }
    if g.chance(0.3) {
        doc.set(
            "device.interface",
            "queue_depth",
            g.weighted(&[(1u64, 2), (2, 2), (8, 2), (32, 2), (1024, 1)]).to_string(),
        );
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
    arbitration(g, doc, queues);
}

/// NVMe arbitration: weighted round robin now and then, with weights and, when the number of
/// queues is known here, a class per queue (a wrong count now and then: a clean refusal).
fn arbitration(g: &mut G, doc: &mut Doc, queues: Option<u64>) {
    if !g.chance(0.15) {
        return;
    }
    doc.set("device.interface", "arbitration", t::string("wrr"));
    if g.chance(0.5) {
        let w: Vec<String> = (0..3).map(|_| g.int(1, 16).to_string()).collect();
        doc.set("device.interface", "wrr_weights", format!("[{}]", w.join(", ")));
    }
    if let Some(q) = queues.filter(|_| g.chance(0.6)) {
        let n = if g.mistake(0.05) { q + 1 } else { q };
        let classes: Vec<String> = (0..n).map(|_| t::string(g.pick(&["urgent", "high", "medium", "low"]))).collect();
        doc.set("device.interface", "queue_classes", format!("[{}]", classes.join(", ")));
    }
}

/// `[precondition]`: every state, fills from nearly empty to full.
pub(super) fn precondition(g: &mut G, doc: &mut Doc, flash: bool) {
    // Aged and full drives more often: garbage collection is where most of the model is.
    let state = g.weighted(&[("clean", 25), ("sequential-fill", 30), ("aged", 30), ("workload", 15)]);
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
