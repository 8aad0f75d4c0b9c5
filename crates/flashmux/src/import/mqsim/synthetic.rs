//! A synthetic MQSim flow as an fio job (`host/IO_Flow_Synthetic.cpp` is what it reproduces):
//! the read share, request sizes in 512-byte sectors, the address pattern and its alignment, the
//! working set, closed-loop queue depth or open-loop Poisson arrivals at a bandwidth, the seed,
//! and when the flow stops.

use super::emit::Toml;
use super::workload::{Flow, FlowCtx};
use crate::import::ImportError;
use std::fmt::Write;

const U32: u64 = u32::MAX as u64;

/// Sizes in a discretised normal request-size distribution whose share is below this percentage
/// are left out of its `bssplit`.
const MIN_SPLIT_PERCENT: f64 = 0.5;

/// The fio job of synthetic flow `i` whose region is `region_bytes` long.
pub(super) fn job(
    t: &mut Toml,
    s: &str,
    i: usize,
    flow: &Flow,
    region_bytes: u64,
    ctx: &FlowCtx,
) -> Result<String, ImportError> {
    let p = &flow.p;
    let mut j = format!("[flow{i}]\n");
    let dist = p.choice("Address_Distribution", None, &["STREAMING", "RANDOM_UNIFORM", "RANDOM_HOTCOLD"])?;
    let read = p.uint("Read_Percentage", None, 100)?;
    let random = dist.v != "STREAMING";
    let rw = match (read.v, random) {
        (100, true) => "randread",
        (100, false) => "read",
        (0, true) => "randwrite",
        (0, false) => "write",
        (_, true) => "randrw",
        (_, false) => "rw",
    };
    let _ = writeln!(j, "rw={rw}");
    if read.v != 0 && read.v != 100 {
        let _ = writeln!(j, "rwmixread={}", read.v);
    }
    sizes(t, s, flow, &mut j)?;
    addresses(t, s, flow, &mut j, region_bytes)?;
    if random {
        // MQSim draws each address independently (with repeats); fio's default random map
        // would visit every block once per pass.
        j.push_str("norandommap=1\n");
    }
    arrivals(t, s, flow, &mut j, ctx)?;
    let seed = p.int("Seed", None)?;
    let _ = writeln!(j, "randseed={}", seed.v as i32 as u32);
    stop(t, s, flow, &mut j)?;
    Ok(j)
}

/// `bs`, or a `bssplit` for MQSim's normal distribution.
/// The largest mean request size (bytes) of the synthetic flows that write; `None` if none
/// writes, or if a trace flow is among them (its sizes are in its file).
pub(super) fn largest_write(flows: &[Flow]) -> Result<Option<u64>, ImportError> {
    let mut largest = None;
    for f in flows {
        if f.trace {
            return Ok(None);
        }
        if f.p.uint("Read_Percentage", None, 100)?.v < 100 {
            let size = f.p.uint("Average_Request_Size", None, U32)?.v * 512;
            largest = largest.max(Some(size));
        }
    }
    Ok(largest)
}

fn sizes(t: &mut Toml, s: &str, flow: &Flow, j: &mut String) -> Result<(), ImportError> {
    let p = &flow.p;
    let kind = p.choice("Request_Size_Distribution", None, &["FIXED", "NORMAL"])?;
    let avg = p.uint("Average_Request_Size", None, U32)?;
    if avg.v == 0 {
        return Err(avg.loc.err("0 sectors: expected a request size of at least 1 sector (512 bytes)"));
    }
    let sd = if kind.v == "NORMAL" { p.uint("Variance_Request_Size", None, U32)?.v } else { 0 };
    if sd == 0 {
        let _ = writeln!(j, "bs={}", avg.v * 512);
        return Ok(());
    }
    let split = normal_split(avg.v as f64, sd as f64);
    let text: Vec<String> = split.iter().map(|(k, pct)| format!("{}/{pct}", k * 512)).collect();
    let _ = writeln!(j, "bssplit={}", text.join(":"));
    let why = format!(
        "NORMAL: MQSim draws ceil(N({}, {sd})) sectors per request (it uses Variance_Request_Size as the standard deviation; at least 1); fio's bssplit gives each size its probability in whole percent, sizes under {MIN_SPLIT_PERCENT}% left out",
        avg.v
    );
    t.approx_note(s, &kind.loc, &why);
    Ok(())
}

/// The sector counts k ≥ 1 of ceil(N(mean, sd)) (all mass at or below 1 on 1) with their
/// percentages, rounded to whole percent by largest remainder, summing to 100.
pub(super) fn normal_split(mean: f64, sd: f64) -> Vec<(u64, u32)> {
    let cdf = |x: f64| 0.5 * (1.0 + erf((x - mean) / (sd * std::f64::consts::SQRT_2)));
    let top = (mean + 6.0 * sd).ceil().max(1.0) as u64;
    let mut probs: Vec<(u64, f64)> =
        (1..=top).map(|k| (k, cdf(k as f64) - if k == 1 { 0.0 } else { cdf(k as f64 - 1.0) })).collect();
    probs.retain(|(_, p)| p * 100.0 >= MIN_SPLIT_PERCENT);
    let total: f64 = probs.iter().map(|(_, p)| p).sum();
    let exact: Vec<f64> = probs.iter().map(|(_, p)| p / total * 100.0).collect();
    let mut pct: Vec<u32> = exact.iter().map(|e| e.floor() as u32).collect();
    let mut order: Vec<usize> = (0..pct.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
    let short = 100 - pct.iter().sum::<u32>();
    for &i in order.iter().take(short as usize) {
        pct[i] += 1;
    }
    probs.iter().zip(pct).filter(|(_, p)| *p > 0).map(|((k, _), p)| (*k, p)).collect()
}

/// The error function (Abramowitz and Stegun 7.1.26; absolute error below 1.5e-7).
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let y = 1.0
        - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736) * t + 0.254_829_592)
            * t
            * (-x * x).exp();
    y.copysign(x)
}

/// The alignment, the hot/cold zones and the working set.
fn addresses(t: &mut Toml, s: &str, flow: &Flow, j: &mut String, region_bytes: u64) -> Result<(), ImportError> {
    let p = &flow.p;
    let aligned = p.boolean("Generated_Aligned_Addresses", None)?;
    let align = if aligned.v { p.uint("Address_Alignment_Unit", None, U32)?.v } else { 1 };
    if align == 0 {
        return Err(p
            .loc("Address_Alignment_Unit")
            .err("0 sectors: expected an alignment of at least 1 sector (MQSim divides by it)"));
    }
    let _ = writeln!(j, "blockalign={}", align * 512);
    let dist = p.choice("Address_Distribution", None, &["STREAMING", "RANDOM_UNIFORM", "RANDOM_HOTCOLD"])?;
    if dist.v == "STREAMING" {
        let why = "STREAMING: MQSim starts the stream at a random address of the working set and wraps at its end; fio's sequential job starts at its beginning";
        t.approx_note(s, &dist.loc, why);
    }
    if dist.v == "RANDOM_HOTCOLD" {
        let hot = p.uint("Percentage_of_Hot_Region", None, 100)?;
        if hot.v == 0 || hot.v == 100 {
            return Err(hot.loc.err(format!(
                "{}%: with RANDOM_HOTCOLD, MQSim sends (100 - H)% of the requests to the first H% of the working set, so {} rather than a hot/cold pattern: give 1 to 99",
                hot.v,
                if hot.v == 0 { "every request goes to one sector" } else { "every request goes to the one sector after the hot region" }
            )));
        }
        // IO_Flow_Synthetic.cpp: with probability H a request goes to the cold part, else to the
        // hot H% at the start of the range.
        let _ = writeln!(j, "random_distribution=zoned:{}/{}:{}/{}", 100 - hot.v, hot.v, hot.v, 100 - hot.v);
    }
    let ws = p.int("Working_Set_Percentage", None)?;
    let pct = if (1..=100).contains(&ws.v) {
        ws.v as u64
    } else {
        t.approx_note(
            s,
            &ws.loc,
            &format!("{}: out of 1 to 100, MQSim uses 100 (Host_System.cpp), and so does the import", ws.v),
        );
        100
    };
    if pct < 100 {
        // IO_Flow_Synthetic.cpp: the last sector is start + trunc((count - 1) × ws).
        let sectors = region_bytes / 512;
        let used = ((sectors - 1) as f64 * pct as f64 / 100.0) as u64 + 1;
        let _ = writeln!(j, "size={}", used * 512);
    }
    Ok(())
}

/// Closed loop at a queue depth, or open loop at a bandwidth.
fn arrivals(t: &mut Toml, s: &str, flow: &Flow, j: &mut String, ctx: &FlowCtx) -> Result<(), ImportError> {
    let p = &flow.p;
    let kind = p.choice("Synthetic_Generator_Type", None, &["BANDWIDTH", "QUEUE_DEPTH"])?;
    if kind.v == "QUEUE_DEPTH" {
        let qd = p.uint("Average_No_of_Reqs_in_Queue", None, U32)?;
        if qd.v == 0 {
            return Err(qd.loc.err("0: expected at least 1 request in flight (MQSim would issue none)"));
        }
        let _ = writeln!(j, "iodepth={}", qd.v);
        return Ok(());
    }
    let bw = p.uint("Bandwidth", None, U32)?;
    let avg = p.uint("Average_Request_Size", None, U32)?.v;
    // Host_System.cpp: the mean gap is 1e9 / ((Bandwidth / 512) / size) ns, in integers.
    let iops = bw.v / 512 / avg;
    if iops == 0 {
        return Err(bw.loc.err(format!(
            "{} bytes/s is less than one {}-byte request per second: MQSim divides by zero here; give at least {}",
            bw.v,
            avg * 512,
            avg * 512
        )));
    }
    let gap = 1_000_000_000 / iops;
    let rate = (1e9 / gap as f64).round() as u64;
    t.note(
        s,
        &format!("BANDWIDTH: MQSim's requests arrive with exponential gaps of mean {gap} ns (Poisson), open loop"),
    );
    // fio limits each direction to its own rate: a mix's total is split by the read share, and
    // two Poisson streams of those rates are one of the total whose requests are reads with
    // that probability, as MQSim draws them.
    let read = p.uint("Read_Percentage", None, 100)?.v;
    let rates = match read {
        0 | 100 => rate.to_string(),
        r => {
            let reads = (rate as f64 * r as f64 / 100.0).round() as u64;
            format!("{},{}", reads.max(1), (rate - reads).max(1))
        }
    };
    let _ = writeln!(j, "rate_iops={rates}\nrate_process=poisson\niodepth={}", ctx.queue_depth.min(65_536));
    Ok(())
}

/// `runtime` for a `Stop_Time`, else `number_ios` for `Total_Requests_To_Generate`.
fn stop(t: &mut Toml, s: &str, flow: &Flow, j: &mut String) -> Result<(), ImportError> {
    let p = &flow.p;
    let stop = p.uint("Stop_Time", None, i64::MAX as u64)?;
    if stop.v > 0 {
        let us = stop.v.div_ceil(1000);
        if us * 1000 != stop.v {
            t.approx_note(s, &stop.loc, &format!("{} ns: fio's runtime counts microseconds: {us} us", stop.v));
        }
        let time = match us {
            u if u % 1_000_000 == 0 => format!("{}s", u / 1_000_000),
            u if u % 1_000 == 0 => format!("{}ms", u / 1_000),
            u => format!("{u}us"),
        };
        let _ = writeln!(j, "time_based\nruntime={time}");
        return Ok(());
    }
    let total = p.uint("Total_Requests_To_Generate", None, U32)?;
    if total.v == 0 {
        return Err(total.loc.err("0 with Stop_Time 0: the flow would never stop or never start (MQSim issues nothing): give a Stop_Time or a request count"));
    }
    // Without time_based, fio also stops after io_size (default: size) bytes; MQSim counts
    // requests only.
    let _ = writeln!(j, "io_size=1p\nnumber_ios={}", total.v);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_normal_size_split_sums_to_100_and_is_centred() {
        let s = normal_split(8.0, 2.0);
        assert_eq!(s.iter().map(|(_, p)| p).sum::<u32>(), 100);
        let mean: f64 = s.iter().map(|(k, p)| *k as f64 * *p as f64 / 100.0).sum();
        // ceil shifts the mean up by about half a sector.
        assert!((mean - 8.5).abs() < 0.2, "{mean} {s:?}");
        assert!(s.iter().all(|(k, _)| (2..=16).contains(k)), "{s:?}");
        // All the mass at or below one sector is on one sector.
        assert_eq!(normal_split(1.0, 0.5).first(), Some(&(1, 50)));
    }

    #[test]
    fn erf_is_close() {
        assert!((erf(1.0) - 0.842_700_79).abs() < 1e-6);
        assert!((erf(-0.5) + 0.520_499_88).abs() < 1e-6);
    }
}
