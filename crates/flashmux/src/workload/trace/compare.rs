//! Two traces' summaries side by side, for `flashmux trace compare`: what a real kernel sent
//! against what the model sent for the same workload (docs/EXPERIMENTS.md), or any two streams.
//!
//! Each row is one figure of [`TraceInfo`] for trace A and trace B and how B differs: in % of
//! A for counts, bytes and sizes; in percentage points for shares. Then the size distribution:
//! each power-of-two bucket's share of the requests that carry data, in both.
//!
//! Example: A has 120 writes of 1 MiB, B 240 of 512 KiB: `writes 120 | 240 | +100.0%`,
//! `mean write size 1.00 MiB | 512.00 KiB | -50.0%`, and the size rows `512 KiB .. 1 MiB:
//! 0.0% | 100.0%`, `1 MiB .. 2 MiB: 100.0% | 0.0%`.

use super::info::{SizeBucket, TraceInfo};
use crate::units::fmt_bytes;
use serde::Serialize;
use std::fmt;

/// How a row's values read and differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A count: differs in %.
    Count,
    /// Bytes: shown as sizes, differs in %.
    Bytes,
    /// A share in %: differs in points.
    Share,
    /// A ratio (requests per run, flushes per write): differs in %.
    Ratio,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub metric: String,
    pub kind: Kind,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// B against A: % of A (`None` when A is 0 or either is missing), or points for a share.
    pub diff: Option<f64>,
}

impl Row {
    fn new(metric: impl Into<String>, kind: Kind, a: Option<f64>, b: Option<f64>) -> Row {
        let diff = match (a, b, kind) {
            (Some(a), Some(b), Kind::Share) => Some(b - a),
            (Some(a), Some(b), _) if a != 0.0 => Some((b - a) / a * 100.0),
            (Some(a), Some(b), _) if a == b => Some(0.0),
            _ => None,
        };
        Row { metric: metric.into(), kind, a, b, diff }
    }
}

/// The rows comparing `a` with `b`.
pub fn compare(a: &TraceInfo, b: &TraceInfo) -> Vec<Row> {
    let count = |m: &str, f: fn(&TraceInfo) -> u64| Row::new(m, Kind::Count, Some(f(a) as f64), Some(f(b) as f64));
    let bytes = |m: &str, f: fn(&TraceInfo) -> u64| Row::new(m, Kind::Bytes, Some(f(a) as f64), Some(f(b) as f64));
    let per = |m: &str, kind: Kind, f: fn(&TraceInfo) -> Option<f64>| Row::new(m, kind, f(a), f(b));
    let mut rows = vec![
        count("requests", |t| t.requests),
        count("reads", |t| t.reads),
        count("writes", |t| t.writes),
        count("trims", |t| t.trims),
        count("flushes", |t| t.flushes),
        per("reads, % of reads and writes", Kind::Share, |t| share(t.reads, t.reads + t.writes)),
        bytes("bytes read", |t| t.read_bytes),
        bytes("bytes written", |t| t.write_bytes),
        bytes("bytes trimmed", |t| t.trim_bytes),
        per("mean read size", Kind::Bytes, |t| mean(t.read_bytes, t.reads)),
        per("mean write size", Kind::Bytes, |t| mean(t.write_bytes, t.writes)),
        per("sequential reads, %", Kind::Share, |t| share(t.sequential_reads, t.reads)),
        per("sequential writes, %", Kind::Share, |t| share(t.sequential_writes, t.writes)),
        per("reads per sequential run", Kind::Ratio, |t| t.mean_run(false)),
        per("writes per sequential run", Kind::Ratio, |t| t.mean_run(true)),
        per("flushes per write", Kind::Ratio, |t| (t.writes > 0).then(|| t.flushes as f64 / t.writes as f64)),
        bytes("footprint", |t| t.footprint_pages.saturating_mul(super::info::PAGE)),
        bytes("footprint written", |t| t.write_footprint_pages.saturating_mul(super::info::PAGE)),
    ];
    rows.extend(size_rows(a, b));
    rows
}

fn share(n: u64, of: u64) -> Option<f64> {
    (of > 0).then(|| n as f64 * 100.0 / of as f64)
}

fn mean(bytes: u64, n: u64) -> Option<f64> {
    (n > 0).then(|| bytes as f64 / n as f64)
}

/// Per size bucket either trace has: its share of the requests with data.
fn size_rows(a: &TraceInfo, b: &TraceInfo) -> Vec<Row> {
    let sized = |t: &TraceInfo| t.requests - t.flushes;
    let (na, nb) = (sized(a), sized(b));
    (0..64)
        .filter(|&i| a.size_histogram[i] > 0 || b.size_histogram[i] > 0)
        .map(|i| {
            let bucket = SizeBucket::of(i, 0);
            let metric = format!("sizes {} .. {}, %", fmt_bytes(bucket.from), fmt_bytes(bucket.to));
            Row::new(metric, Kind::Share, share(a.size_histogram[i], na), share(b.size_histogram[i], nb))
        })
        .collect()
}

/// The rows as a table, headed by the two traces' names.
pub struct Table<'a> {
    pub a: &'a str,
    pub b: &'a str,
    pub rows: &'a [Row],
}

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = |v: Option<f64>, k: Kind| match (v, k) {
            (None, _) => "-".to_string(),
            (Some(x), Kind::Bytes) => fmt_bytes(x.round() as u64),
            (Some(x), Kind::Count) => format!("{x:.0}"),
            (Some(x), Kind::Share) => format!("{x:.1}"),
            (Some(x), Kind::Ratio) => format!("{x:.2}"),
        };
        let w = self.rows.iter().map(|r| r.metric.len()).max().unwrap_or(6).max(6);
        writeln!(f, "{:<w$}  {:>16}  {:>16}  {:>10}", "", self.a, self.b, "B vs A")?;
        for r in self.rows {
            let diff = match (r.diff, r.kind) {
                (None, _) => "-".to_string(),
                (Some(d), Kind::Share) => format!("{d:+.1} pt"),
                (Some(d), _) => format!("{d:+.1}%"),
            };
            writeln!(f, "{:<w$}  {:>16}  {:>16}  {:>10}", r.metric, value(r.a, r.kind), value(r.b, r.kind), diff)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rec;
    use super::super::TraceOp;
    use super::*;

    fn info(recs: &[(TraceOp, u64, u64)]) -> TraceInfo {
        let mut t = TraceInfo::new();
        for &(op, off, len) in recs {
            t.add(&rec(0, op, off, len, 0));
        }
        t
    }

    fn row<'a>(rows: &'a [Row], m: &str) -> &'a Row {
        rows.iter().find(|r| r.metric == m).unwrap_or_else(|| panic!("no row {m}"))
    }

    #[test]
    fn the_header_example() {
        let m = 1 << 20;
        let a = info(&(0..120).map(|i| (TraceOp::Write, i * m, m)).collect::<Vec<_>>());
        let b = info(&(0..240).map(|i| (TraceOp::Write, i * m / 2, m / 2)).collect::<Vec<_>>());
        let rows = compare(&a, &b);
        assert_eq!(row(&rows, "writes").diff, Some(100.0));
        let size = row(&rows, "mean write size");
        assert_eq!((size.a, size.b, size.diff), (Some(m as f64), Some(m as f64 / 2.0), Some(-50.0)));
        assert_eq!(row(&rows, "bytes written").diff, Some(0.0));
        let seq = row(&rows, "sequential writes, %").diff.unwrap();
        assert!((seq - (239.0 / 2.4 - 119.0 / 1.2)).abs() < 1e-9, "119 of 120 against 239 of 240: {seq}");
        let s = row(&rows, "sizes 512.00 KiB .. 1.00 MiB, %");
        assert_eq!((s.a, s.b, s.diff), (Some(0.0), Some(100.0), Some(100.0)));
        assert_eq!(row(&rows, "sizes 1.00 MiB .. 2.00 MiB, %").diff, Some(-100.0));
        assert_eq!(row(&rows, "reads per sequential run").a, None);
        let text = Table { a: "real", b: "model", rows: &rows }.to_string();
        assert!(text.lines().any(|l| l.starts_with("mean write size") && l.ends_with("-50.0%")), "{text}");
        assert!(
            text.lines().any(|l| l.starts_with("sizes 512.00 KiB .. 1.00 MiB, %") && l.ends_with("+100.0 pt")),
            "{text}"
        );
    }

    #[test]
    fn a_trace_against_itself_differs_in_nothing() {
        let t = info(&[(TraceOp::Read, 0, 4096), (TraceOp::Write, 8192, 8192), (TraceOp::Flush, 0, 0)]);
        for r in compare(&t, &t) {
            assert!(r.diff.is_none_or(|d| d == 0.0), "{r:?}");
            assert_eq!(r.a, r.b);
        }
    }
}
