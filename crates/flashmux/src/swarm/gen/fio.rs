//! A fio job section's draws: every option family the job file parser maps, in one fixed order
//! (direction and mix, block sizes, clones, where and how much, depth, time, rate, think time,
//! syncs, the random distribution, randomness, ordering and reporting, options that are noted or
//! unknown), each family a step over the job drawn so far ([`Job`]).
//!
//! Jobs are drawn to end: a job that nothing else bounds (no size small enough, no count, no
//! runtime) gets a `number_ios` when the scenario has no stop condition. Per job at most
//! `MAX_IOS` / numjobs / sections I/Os are aimed at (3,000 / 4 / 2 = 375 for four clones in two
//! sections), and block sizes stay within an eighth of the region, so every job fits its region.

use super::{Plan, Stop, G};
use crate::swarm::toml as t;

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

/// One job section as drawn so far: its options, in order, and what later draws need to know.
struct Job {
    o: Vec<String>,
    /// The region's length in bytes (at least 512).
    region: u64,
    /// The smallest and largest block sizes the job may issue, in bytes.
    min_bs: u64,
    max_bs: u64,
    /// I/Os a clone may aim at (at least 10).
    per_job_ios: u64,
    /// The job's own length in bytes (for `ba` and `zoned_abs`).
    job_len: u64,
    /// Something other than the scenario's stop ends the job in a few I/Os or a runtime.
    bounded: bool,
}

/// The options of one job section.
pub(super) fn fio_job(g: &mut G, region: u64, plan: &Plan, first: bool, sections: u64) -> Vec<String> {
    let region = region.max(512);
    let mut j = Job { o: Vec::new(), region, min_bs: 0, max_bs: 0, per_job_ios: 0, job_len: 0, bounded: false };
    let rw = direction(g, &mut j);
    let random = rw.starts_with("rand");
    block_sizes(g, &mut j);
    let numjobs = if g.chance(0.15) { g.weighted(&[(2u64, 4), (3, 2), (4, 2), (8, 1), (32, 1)]) } else { 1 };
    if numjobs > 1 {
        j.o.push(format!("numjobs={numjobs}"));
    }
    j.per_job_ios = (MAX_IOS / numjobs / sections).max(10);
    let room = offsets(g, &mut j, numjobs);
    amount(g, &mut j, room);
    if random && g.chance(0.1) {
        // A block alignment that leaves room for blocks in the job's size.
        let ba = g.pick(&[512u64, 1024, 4096]);
        if ba <= j.job_len / 4 {
            j.o.push(format!("ba={}", t::fio_size(ba)));
        }
    }
    if g.chance(0.1) {
        j.o.push(format!("loops={}", g.int(0, 3)));
    }
    depth(g, &mut j);
    time(g, &mut j, plan);
    rate(g, &mut j);
    thinktime(g, &mut j);
    syncs(g, &mut j, rw);
    if random && g.chance(0.3) {
        distribution(g, &mut j);
    }
    randomness(g, &mut j);
    ordering_and_extras(g, &mut j, first);
    if plan.stop == Stop::Neither && !j.bounded {
        j.o.push(format!("number_ios={}", g.log(1, j.per_job_ios)));
    }
    debug_assert!(j.min_bs >= 512 && j.min_bs <= j.max_bs, "block sizes {}..{}", j.min_bs, j.max_bs);
    j.o
}

/// `rw` (or `readwrite`), sometimes with a sequential run length or hole, `rw_sequencer`, and a
/// mixed job's `rwmixread` or `rwmixwrite`. Returns the direction drawn.
fn direction(g: &mut G, j: &mut Job) -> &'static str {
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
                j.o.push(format!("rw_sequencer={}", g.pick(&["sequential", "identical"])));
            }
        } else {
            rw_text = format!("{rw}:{}", t::fio_size(g.int(1, 16) * 512));
        }
    }
    j.o.push(format!("{}={rw_text}", if g.chance(0.1) { "readwrite" } else { "rw" }));
    if matches!(rw, "rw" | "randrw") && g.chance(0.6) {
        if g.chance(0.7) {
            j.o.push(format!("rwmixread={}", g.int(0, 100)));
        } else {
            j.o.push(format!("rwmixwrite={}", g.int(0, 100)));
        }
    }
    rw
}

/// Block sizes no larger than an eighth of the region: `bs` (one, or per direction), `bsrange`,
/// `bssplit` or the default 4 KiB; sometimes `bs_is_seq_rand`. Sets the least and largest.
fn block_sizes(g: &mut G, j: &mut Job) {
    let region = j.region;
    let o = &mut j.o;
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
                    items.push(if g.chance(0.3) {
                        format!("{}/", t::fio_size(b))
                    } else {
                        format!("{}/{left}", t::fio_size(b))
                    });
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
    (j.min_bs, j.max_bs) = (min_bs, max_bs);
}

/// Where: `offset`, the clones' `offset_increment`, `offset_align`. Returns the room the last
/// clone has from its start to the region's end (at least the largest block).
fn offsets(g: &mut G, j: &mut Job, numjobs: u64) -> u64 {
    let (region, max_bs, o) = (j.region, j.max_bs, &mut j.o);
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
    room.max(max_bs)
}

/// How much: a `size` in bytes or percent, `number_ios`, `io_size` or a `filesize` range, or
/// none; sets the job's length and whether that bounds it.
fn amount(g: &mut G, j: &mut Job, room: u64) {
    let Job { region, min_bs, max_bs, per_job_ios, .. } = *j;
    let o = &mut j.o;
    let mut job_len = room;
    let mut bounded = false;
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
    (j.job_len, j.bounded) = (job_len, bounded);
}

/// `iodepth` (up to 2048 now and then), `iodepth_batch`, `iodepth_batch_complete_min`.
fn depth(g: &mut G, j: &mut Job) {
    let o = &mut j.o;
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
}

/// Time: `time_based` with a `runtime`, a `runtime` or `timeout` alone (both bound the job),
/// `ramp_time`, `startdelay` (fixed or a range).
fn time(g: &mut G, j: &mut Job, plan: &Plan) {
    let o = &mut j.o;
    let time_based = g.chance(0.3);
    let max_runtime = if plan.flash { 200_000_000 } else { 20_000_000 };
    let mut runtime = 0;
    if time_based {
        g.tag("fio", "time_based");
        runtime = g.log(100_000, max_runtime);
        o.push("time_based".into());
        o.push(format!("runtime={}", t::fio_time(runtime)));
        j.bounded = true;
    } else if g.chance(0.1) {
        runtime = g.log(100_000, max_runtime);
        o.push(format!("{}={}", if g.chance(0.2) { "timeout" } else { "runtime" }, t::fio_time(runtime)));
        j.bounded = true;
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
}

/// `rate` (one or per direction) or `rate_iops` (with a count when nothing bounds the job: a
/// rate alone does not end it), sometimes `rate_process=poisson`.
fn rate(g: &mut G, j: &mut Job) {
    let o = &mut j.o;
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
            if !j.bounded {
                // A rate alone does not end a job: give it a count.
                o.push(format!("number_ios={}", g.log(1, j.per_job_ios)));
                j.bounded = true;
            }
        }
        _ => {}
    }
    if o.iter().any(|x| x.starts_with("rate")) && g.chance(0.3) {
        o.push("rate_process=poisson".into());
    }
}

/// `thinktime` and its spin, blocks, blocks type and I/O time.
fn thinktime(g: &mut G, j: &mut Job) {
    if !g.chance(0.1) {
        return;
    }
    let o = &mut j.o;
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

/// `fsync`, `fdatasync`, `end_fsync`, `fsync_on_close`: mostly for jobs that write.
fn syncs(g: &mut G, j: &mut Job, rw: &str) {
    let writes = rw.contains("write") || rw == "rw";
    if !(writes || g.chance(0.05)) {
        return;
    }
    let o = &mut j.o;
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
    if g.chance(0.05) {
        o.push("fsync_on_close=1".into());
        g.tag("fio", "fsync_on_close");
    }
}

/// `random_distribution`: random, zipf, pareto, normal, zoned or zoned_abs.
fn distribution(g: &mut G, j: &mut Job) {
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
        4 => zoned(g),
        _ => zoned_abs(g, j.job_len, j.max_bs),
    };
    g.tag("distribution", d.split(':').next().unwrap_or("random"));
    j.o.push(format!("random_distribution={d}"));
}

/// `zoned:`: one to four zones, access and size percentages each summing to 100.
fn zoned(g: &mut G) -> String {
    let zones = g.int(1, 4);
    let (mut acc, mut sz) = (100u64, 100u64);
    let mut parts = Vec::new();
    for z in 0..zones {
        let (a, s) =
            if z + 1 == zones { (acc, sz) } else { (g.int(0, acc), g.int(1, sz.saturating_sub(zones - z - 1).max(1))) };
        acc -= a;
        sz = sz.saturating_sub(s);
        parts.push(format!("{a}/{s}"));
    }
    format!("zoned:{}", parts.join(":"))
}

/// `zoned_abs:`: one to three zones within the job's size, short of its last block (fio refuses
/// zones past the last block that fits).
fn zoned_abs(g: &mut G, job_len: u64, max_bs: u64) -> String {
    let zones = g.int(1, 3);
    let mut acc = 100u64;
    let each = (job_len.saturating_sub(max_bs) / zones / 512 * 512).max(512);
    let mut parts = Vec::new();
    for z in 0..zones {
        let a = if z + 1 == zones { acc } else { g.int(0, acc) };
        acc -= a;
        parts.push(format!("{a}/{}", t::fio_size(each)));
    }
    format!("zoned_abs:{}", parts.join(":"))
}

/// `percentage_random` (one or per direction), `norandommap`, `randrepeat=0`, `randseed`.
fn randomness(g: &mut G, j: &mut Job) {
    let o = &mut j.o;
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
}

/// A later section's `stonewall`/`new_group`/`wait_for_previous`, `group_reporting`, options the
/// parser notes without modelling, options it refuses (`rate_min`, ...) and an unknown one.
fn ordering_and_extras(g: &mut G, j: &mut Job, first: bool) {
    let o = &mut j.o;
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
}
