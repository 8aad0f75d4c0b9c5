//! fio's default human-readable output (`--output-format=normal`), mirroring fio's `stat.c`:
//! `show_thread_status_normal` (one block per job), `show_ddir_status` (per direction),
//! `display_lat`, `show_clat_percentiles`, `show_latencies`, and `show_group_stats` (the
//! `Run status group` summary), with numbers scaled by fio's `num2str`.
//!
//! As in fio, a job that did no I/O prints nothing. The job header carries the Unix epoch where
//! fio prints the wall-clock time, so the output is reproducible. The lines fio prints while it
//! starts (job descriptions, `Starting N processes`) and the `Disk stats` block at the end (there
//! is no block device) are not part of it.

use super::fio_stats::{
    batch_dist, bw_agg_percent, bw_samples, dir_runtime_ns, group_stats, iodepth_dist, iops_samples,
    lat_dist, latency_depth, ms, per_sec_int, Dir, GroupDir, BATCH_KEYS, DEPTH_KEYS, DIRS, EPOCH_CTIME,
    LAT_KEYS_MS, LAT_KEYS_NS_US,
};
use crate::metrics::{JobResult, LatStat, RunResults, FIO_PERCENTILES};
use std::fmt::{self, Write};

/// fio's default number of significant figures (`significant_figures=4`).
const SIG_FIGS: usize = 4;

/// The run as fio's `normal` text output.
pub fn fio_normal(r: &RunResults) -> String {
    let mut out = String::new();
    write_normal(&mut out, r).expect("formatting into a String never fails");
    out
}

fn write_normal(out: &mut String, r: &RunResults) -> fmt::Result {
    let groups = group_stats(r);
    for job in &r.jobs {
        if job.io.bytes() == 0 && job.io.ios() == 0 {
            continue;
        }
        let group = groups.get(&job.groupid).copied().unwrap_or_default();
        job_status(out, job, &group)?;
    }
    for (&gid, group) in &groups {
        group_status(out, gid, group)?;
    }
    Ok(())
}

/// `show_thread_status_normal`.
fn job_status(out: &mut String, job: &JobResult, group: &[GroupDir; 3]) -> fmt::Result {
    writeln!(out, "{}: (groupid={}, jobs={}): err={:2}: pid=0: {}", job.name, job.groupid, job.members, 0, EPOCH_CTIME)?;
    for d in DIRS {
        if d.of(&job.io).bytes > 0 {
            ddir_status(out, job, d, &group[d.index()])?;
        }
    }
    let lat = lat_dist(&job.io);
    lat_lines(out, "nsec", &LAT_KEYS_NS_US, &lat.ns)?;
    lat_lines(out, "usec", &LAT_KEYS_NS_US, &lat.us)?;
    lat_lines(out, "msec", &LAT_KEYS_MS, &lat.ms)?;
    sync_status(out, &job.io.sync)?;
    writeln!(out, "  cpu          : usr=0.00%, sys=0.00%, ctx=0, majf=0, minf=0")?;
    writeln!(out, "  IO depths    : {}", dist(&DEPTH_KEYS, &iodepth_dist(job)))?;
    let batches = dist(&BATCH_KEYS, &batch_dist(job));
    writeln!(out, "     submit    : {batches}")?;
    writeln!(out, "     complete  : {batches}")?;
    writeln!(
        out,
        "     issued rwts: total={},{},{},{} short=0,0,0,0 dropped=0,0,0,0",
        job.io.read.ios,
        job.io.write.ios,
        job.io.trim.ios,
        job.io.sync.count()
    )?;
    writeln!(
        out,
        "     latency   : target=0.00ns, window=0.00ns, percentile=100.00%, depth={}",
        latency_depth(job)
    )
}

/// `show_ddir_status` for the syncs: their latency and its percentiles, when there were any.
fn sync_status(out: &mut String, sync: &LatStat) -> fmt::Result {
    if sync.count() == 0 {
        return Ok(());
    }
    writeln!(out, "  fsync/fdatasync/sync_file_range:")?;
    display_lat(out, "sync", sync)?;
    clat_percentiles(out, "sync", sync)
}

/// `show_ddir_status` for read, write or trim.
fn ddir_status(out: &mut String, job: &JobResult, d: Dir, group: &GroupDir) -> fmt::Result {
    let run = dir_runtime_ns(job, d);
    if run == 0 {
        return Ok(());
    }
    let s = d.of(&job.io);
    let bw = per_sec_int(s.bytes, run);
    writeln!(
        out,
        "  {}: IOPS={}, BW={} ({})({}/{}msec)",
        d.name(),
        num2str(per_sec_int(s.ios, run), SIG_FIGS, false, Unit::None),
        num2str(bw, SIG_FIGS, true, Unit::BytePerSec),
        num2str(bw, SIG_FIGS, false, Unit::BytePerSec),
        num2str(s.bytes, SIG_FIGS, true, Unit::Byte),
        ms(run)
    )?;
    display_lat(out, "slat", &s.slat)?;
    display_lat(out, "clat", &s.clat)?;
    display_lat(out, " lat", &s.lat)?;
    clat_percentiles(out, "clat", &s.clat)?;

    let bw = bw_samples(job, d);
    if bw.samples > 0 {
        let per = bw_agg_percent(group, &bw);
        // fio switches to MiB/s once the mean passes 1024 × 1024 KiB/s (min and max divide as
        // integers).
        let (unit, min, max, mean, dev) = if bw.mean > 1024.0 * 1024.0 {
            ("MiB", bw.min / 1024, bw.max / 1024, bw.mean / 1024.0, bw.dev / 1024.0)
        } else {
            ("KiB", bw.min, bw.max, bw.mean, bw.dev)
        };
        writeln!(
            out,
            "   bw ({unit:>5}/s): min={min:5}, max={max:5}, per={per:3.2}%, avg={mean:5.2}, stdev={dev:5.2}, samples={}",
            bw.samples
        )?;
    }
    let iops = iops_samples(job, d);
    if iops.samples > 0 {
        writeln!(
            out,
            "   iops        : min={:5}, max={:5}, avg={:5.2}, stdev={:5.2}, samples={}",
            iops.min, iops.max, iops.mean, iops.dev, iops.samples
        )?;
    }
    Ok(())
}

/// `display_lat`: one latency series, in msec when its minimum is above 2 ms, its maximum above
/// 100 ms and its deviation above 1 ms (`nsec_to_msec`), else in usec on the same rule one unit
/// down (`nsec_to_usec`), else in nsec.
fn display_lat(out: &mut String, name: &str, l: &LatStat) -> fmt::Result {
    if l.count() == 0 {
        return Ok(());
    }
    let (min, max, mean, dev) = (l.min(), l.max(), l.mean(), l.stddev());
    let (unit, div) = if min > 2_000_000 && max > 99_999_999 && dev > 1_000_000.0 {
        ("msec", 1_000_000)
    } else if min > 2_000 && max > 99_999 && dev > 1_000.0 {
        ("usec", 1_000)
    } else {
        ("nsec", 1)
    };
    writeln!(
        out,
        "    {name} ({unit}): min={}, max={}, avg={:5.2}, stdev={:5.2}",
        num2str(min / div, 6, false, Unit::None),
        num2str(max / div, 6, false, Unit::None),
        mean / div as f64,
        dev / div as f64
    )
}

/// `show_clat_percentiles`: fio's percentile block, its unit chosen from the smallest and largest
/// percentile value (values scale by rounding up), its columns as wide as the largest value
/// needs (at least 5), as many per line as fit in 80 columns.
fn clat_percentiles(out: &mut String, pre: &str, l: &LatStat) -> fmt::Result {
    if l.count() == 0 {
        return Ok(());
    }
    let vals: Vec<(f64, u64)> = FIO_PERCENTILES.iter().map(|&p| (p, l.percentile(p))).collect();
    let minv = vals.iter().map(|v| v.1).min().unwrap_or(0);
    let maxv = vals.iter().map(|v| v.1).max().unwrap_or(0);
    let (scale_down, divisor, unit) = if minv > 2_000_000 && maxv > 99_999_999 {
        (2, 1_000_000, "msec")
    } else if minv > 2_000 && maxv > 99_999 {
        (1, 1_000, "usec")
    } else {
        (0, 1, "nsec")
    };
    write!(out, "    {pre} percentiles ({unit}):\n     |")?;
    let width = (maxv / divisor).to_string().len().max(5);
    // fio: (80 - 7) / (precision + 10 + time_width), with 2 decimals of precision.
    let per_line = 73 / (12 + width);
    for (j, &(p, v)) in vals.iter().enumerate() {
        if j != 0 && j % per_line == 0 {
            out.push_str("     |");
        }
        let v = (0..scale_down).fold(v, |v, _| v.div_ceil(1000));
        let last = j + 1 == vals.len();
        write!(out, " {p:5.2}th=[{v:>width$}]{}", if last { '\n' } else { ',' })?;
        if !last && j % per_line == per_line - 1 {
            out.push('\n');
        }
    }
    Ok(())
}

/// `show_lat`: the nonzero buckets of one unit, five per line.
fn lat_lines(out: &mut String, unit: &str, keys: &[&str], pct: &[f64]) -> fmt::Result {
    let shown: Vec<String> =
        keys.iter().zip(pct).filter(|(_, &v)| v > 0.0).map(|(k, v)| format!("{k}={v:3.2}%")).collect();
    for line in shown.chunks(5) {
        writeln!(out, "  lat ({unit})   : {}", line.join(", "))?;
    }
    Ok(())
}

/// A distribution line's `key=pct%` list (`%3.1f%%`).
fn dist(keys: &[&str], pct: &[f64]) -> String {
    keys.iter().zip(pct).map(|(k, v)| format!("{k}={v:3.1}%")).collect::<Vec<_>>().join(", ")
}

/// `show_group_stats`: aggregate bandwidth (the group's bytes over its longest runtime), the
/// slowest and fastest job, total I/O and the runtime range, each in binary and decimal units.
fn group_status(out: &mut String, gid: u32, group: &[GroupDir; 3]) -> fmt::Result {
    writeln!(out, "\nRun status group {gid} (all jobs):")?;
    for d in DIRS {
        let g = &group[d.index()];
        if g.max_run_ns == 0 {
            continue;
        }
        let label = match d {
            Dir::Read => "   READ",
            Dir::Write => "  WRITE",
            Dir::Trim => "   TRIM",
        };
        let bw = |v: u64, pow2: bool| num2str(v, SIG_FIGS, pow2, Unit::BytePerSec);
        writeln!(
            out,
            "{label}: bw={} ({}), {}-{} ({}-{}), io={} ({}), run={}-{}msec",
            bw(g.agg(), true),
            bw(g.agg(), false),
            bw(g.min_bw, true),
            bw(g.max_bw, true),
            bw(g.min_bw, false),
            bw(g.max_bw, false),
            num2str(g.iobytes, SIG_FIGS, true, Unit::Byte),
            num2str(g.iobytes, SIG_FIGS, false, Unit::Byte),
            ms(g.min_run_ns),
            ms(g.max_run_ns)
        )?;
    }
    Ok(())
}

/// The unit `num2str` appends (fio's `N2S_NONE`, `N2S_BYTE`, `N2S_BYTEPERSEC`).
#[derive(Clone, Copy, Debug)]
enum Unit {
    None,
    Byte,
    BytePerSec,
}

impl Unit {
    fn suffix(self) -> &'static str {
        match self {
            Unit::None => "",
            Unit::Byte => "B",
            Unit::BytePerSec => "B/s",
        }
    }
}

/// fio's `num2str` (lib/num2str.c): divides by 1000 (SI: k, M, G…) or 1024 (IEC: Ki, Mi, Gi…)
/// until at most `maxlen` digits remain, then fills the remaining width with decimals of the last
/// remainder ("97.2MiB/s", "24.9k"); when there is no room for a decimal it rounds the integer
/// instead ("102MB/s").
fn num2str(num: u64, maxlen: usize, pow2: bool, unit: Unit) -> String {
    const SI: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    const IEC: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let prefixes = if pow2 { &IEC } else { &SI };
    let thousand: u64 = if pow2 { 1024 } else { 1000 };
    let digits = |n: u64| n.to_string().len();

    let mut num = num;
    let mut post = 0;
    let mut modulo = None;
    while post + 1 < prefixes.len() && digits(num) > maxlen {
        modulo = Some(num % thousand);
        num /= thousand;
        post += 1;
    }
    let Some(modulo) = modulo else {
        return format!("{num}{}{}", prefixes[post], unit.suffix());
    };
    let len = digits(num);
    if len + 1 >= maxlen {
        // No room for a decimal: round half up.
        if modulo >= thousand / 2 {
            num += 1;
        }
        return format!("{num}{}{}", prefixes[post], unit.suffix());
    }
    let frac = format!("{:.*}", maxlen - len - 1, modulo as f64 / thousand as f64);
    // The fraction may round up to "1.0…": carry it into the integer part.
    if frac.starts_with('1') {
        num += 1;
    }
    format!("{num}.{}{}{}", frac.get(2..).unwrap_or(""), prefixes[post], unit.suffix())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_fixture::{empty_run, run};

    #[test]
    fn num2str_matches_fio() {
        // From a real fio 3.33 run: read 509947904 bytes in 5001 ms = 101969186 B/s and 24894 IOPS,
        // printed as "IOPS=24.9k, BW=97.2MiB/s (102MB/s)(486MiB/5001msec)" and "io=486MiB (510MB)".
        assert_eq!(num2str(101_969_186, 4, true, Unit::BytePerSec), "97.2MiB/s");
        assert_eq!(num2str(101_969_186, 4, false, Unit::BytePerSec), "102MB/s");
        assert_eq!(num2str(24_894, 4, false, Unit::None), "24.9k");
        assert_eq!(num2str(509_947_904, 4, true, Unit::Byte), "486MiB");
        assert_eq!(num2str(509_947_904, 4, false, Unit::Byte), "510MB");
        // Its writes: 43636610 B/s, 10653 IOPS.
        assert_eq!(num2str(43_636_610, 4, true, Unit::BytePerSec), "41.6MiB/s");
        assert_eq!(num2str(43_636_610, 4, false, Unit::BytePerSec), "43.6MB/s");
        assert_eq!(num2str(10_653, 4, false, Unit::None), "10.7k");
        // display_lat's 6-digit min/max: 4812432 ns → "4812.4k", 10972906 ns → "10973k".
        assert_eq!(num2str(4_812_432, 6, false, Unit::None), "4812.4k");
        assert_eq!(num2str(10_972_906, 6, false, Unit::None), "10973k");
        // Short numbers print unchanged; two decimals where there is room; the fraction's
        // rounding carries into the integer part.
        assert_eq!(num2str(0, 4, true, Unit::Byte), "0B");
        assert_eq!(num2str(9999, 4, false, Unit::None), "9999");
        assert_eq!(num2str(9_720, 4, true, Unit::BytePerSec), "9720B/s");
        assert_eq!(num2str(12_345, 4, true, Unit::Byte), "12.1KiB");
        assert_eq!(num2str(10_752, 4, true, Unit::Byte), "10.5KiB");
        assert_eq!(num2str(10_239, 4, true, Unit::Byte), "10.00KiB");
        assert_eq!(num2str(1_500_000, 4, false, Unit::None), "1500k");
        assert_eq!(num2str(u64::MAX, 4, false, Unit::Byte), "18.4EB");
    }

    #[test]
    fn job_block_layout() {
        let text = fio_normal(&run());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "a: (groupid=0, jobs=1): err= 0: pid=0: Thu Jan  1 00:00:00 1970");
        // 1000 reads of 4 KiB in 2 s.
        assert_eq!(lines[1], "  read: IOPS=500, BW=2000KiB/s (2048kB/s)(4000KiB/2000msec)");
        assert!(lines[2].starts_with("    slat (nsec): min=1000, max=1600, avg="), "{}", lines[2]);
        assert!(lines[3].starts_with("    clat (nsec): min=20"), "{}", lines[3]);
        assert!(lines[4].starts_with("     lat (nsec): min="), "{}", lines[4]);
        // Percentile values of 20–80 µs stay in nsec (fio scales only past 99,999).
        let clat = &run().jobs[0].io.read.clat;
        let at = |p: f64| clat.percentile(p);
        assert_eq!(lines[5], "    clat percentiles (nsec):");
        assert_eq!(
            lines[6],
            format!(
                "     |  1.00th=[{:5}],  5.00th=[{:5}], 10.00th=[{:5}], 20.00th=[{:5}],",
                at(1.0),
                at(5.0),
                at(10.0),
                at(20.0)
            )
        );
        assert_eq!(lines[10], format!("     | 99.99th=[{:5}]", at(99.99)));
        assert!(
            lines[11].starts_with(
                "   bw (  KiB/s): min= 2000, max= 4000, per=88.87%, avg=2666.67, stdev=1154.70, samples=3"
            ),
            "{}",
            lines[11]
        );
        assert_eq!(lines[12], "   iops        : min=  500, max= 1000, avg=666.67, stdev=288.68, samples=3");
        assert!(lines[13].starts_with("  lat (usec)   : 50="), "{}", lines[13]);
        assert_eq!(lines[14], "  cpu          : usr=0.00%, sys=0.00%, ctx=0, majf=0, minf=0");
        assert_eq!(
            lines[15],
            "  IO depths    : 1=0.1%, 2=0.0%, 4=0.0%, 8=0.0%, 16=99.9%, 32=0.0%, >=64=0.0%"
        );
        assert_eq!(
            lines[16],
            "     submit    : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%"
        );
        assert_eq!(
            lines[17],
            "     complete  : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%"
        );
        assert_eq!(lines[18], "     issued rwts: total=1000,0,0,0 short=0,0,0,0 dropped=0,0,0,0");
        assert_eq!(lines[19], "     latency   : target=0.00ns, window=0.00ns, percentile=100.00%, depth=16");
        assert_eq!(lines[20], "a: (groupid=0, jobs=1): err= 0: pid=0: Thu Jan  1 00:00:00 1970");
    }

    #[test]
    fn syncs_print_after_the_latency_distribution() {
        let mut r = run();
        for ns in [400_000, 600_000, 1_000_000] {
            r.jobs[0].io.sync.record(ns);
        }
        let text = fio_normal(&r);
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().position(|l| l.starts_with("  fsync/fdatasync/sync_file_range:")).expect("a sync block");
        assert!(lines[at - 1].starts_with("  lat (usec)   :"), "{}", lines[at - 1]);
        assert_eq!(lines[at + 1], "    sync (usec): min=400, max=1000, avg=666.67, stdev=305.51");
        assert_eq!(lines[at + 2], "    sync percentiles (usec):");
        assert!(text.contains("\n     issued rwts: total=1000,0,0,3 short="), "{text}");
        // Without syncs there is no block.
        assert!(!fio_normal(&run()).contains("fsync/"));
    }

    #[test]
    fn millisecond_latencies_and_write_direction() {
        let text = fio_normal(&run());
        let b = &text[text.find("b: (groupid=1").unwrap_or(0)..];
        assert!(b.contains("\n  write: IOPS=100, BW=400KiB/s (410kB/s)(400KiB/1000msec)\n"), "{b}");
        assert!(b.contains("\n    clat (usec): min=3"), "{b}");
        let clat = &run().jobs[2].io.write.clat;
        let first = format!(
            "\n    clat percentiles (usec):\n     |  1.00th=[{:5}],",
            clat.percentile(1.0).div_ceil(1000)
        );
        assert!(b.contains(&first), "{b}");
        assert!(b.contains("\n  lat (msec)   : 4="), "{b}");
        assert!(!b.contains("  read:"));
    }

    #[test]
    fn group_summaries() {
        let text = fio_normal(&run());
        // Group 0: 12,288,000 bytes over at most 4 s; each job 2,048,000 B/s.
        assert!(text.contains(
            "\nRun status group 0 (all jobs):\n   READ: bw=3000KiB/s (3072kB/s), 2000KiB/s-2000KiB/s (2048kB/s-2048kB/s), io=11.7MiB (12.3MB), run=2000-4000msec\n"
        ), "{text}");
        assert!(text.contains(
            "\nRun status group 1 (all jobs):\n  WRITE: bw=400KiB/s (410kB/s), 400KiB/s-400KiB/s (410kB/s-410kB/s), io=400KiB (410kB), run=1000-1000msec\n"
        ), "{text}");
        assert!(text.ends_with("run=1000-1000msec\n"));
    }

    #[test]
    fn percentile_block_widens_columns() {
        // 3 µs and 5 s: usec (the smallest value is above 2 µs), 7 digits wide, 3 per line.
        let mut l = LatStat::default();
        l.record(3_000);
        l.record(5_000_000_000);
        let mut out = String::new();
        assert!(clat_percentiles(&mut out, "clat", &l).is_ok());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "    clat percentiles (usec):");
        let lo = l.percentile(1.0).div_ceil(1000);
        assert_eq!(lines[1], format!("     |  1.00th=[{lo:7}],  5.00th=[{lo:7}], 10.00th=[{lo:7}],"));
        let hi = l.percentile(99.99).div_ceil(1000);
        assert_eq!(lines[6], format!("     | 99.95th=[{hi:7}], 99.99th=[{hi:7}]"));
        assert_eq!(lines.len(), 7);
        assert!(out.ends_with("]\n"));
    }

    #[test]
    fn idle_jobs_print_nothing() {
        let text = fio_normal(&empty_run());
        assert!(!text.contains("pid=0"));
        assert!(text.contains("Run status group 0 (all jobs):\n"));
        assert!(!text.contains("READ"));
        let mut none = empty_run();
        none.jobs.clear();
        assert_eq!(fio_normal(&none), "");
    }
}
