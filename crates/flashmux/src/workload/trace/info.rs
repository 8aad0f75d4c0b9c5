//! A one-pass summary of a trace, for `flashmux trace info` and `trace compare`: request mix,
//! bytes, sizes, sequentiality, the address range and footprint, time span and request rate,
//! and streams.
//!
//! A read or write is *sequential* when it starts where the previous read (or write) of its
//! stream ended; a *run* is a request that is not sequential with the sequential ones after it,
//! so requests / runs is the mean run length (1 for a random stream, the whole trace for one
//! sequential stream). Trims and flushes neither continue nor break runs.
//!
//! Everything is counted record by record in constant memory, except three things that grow
//! with what the trace covers rather than with its length: the footprint (a sparse bitmap of
//! 4 KiB pages, one 4 KiB chunk of bits per 128 MiB of address space touched), the requests per
//! second (one counter per second of trace time, up to [`MAX_SECONDS`]), and the requests per
//! stream. All three are ordered maps or vectors, never hash maps, so the summary and its
//! serialisation are the same on every run.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Serialize, Serializer};

use super::{TraceOp, TraceRecord};
use crate::units::fmt_bytes;

/// The footprint's page size.
pub const PAGE: u64 = 4096;

/// Pages per bitmap chunk: 2^15 pages (128 MiB of addresses) in 512 words (4 KiB).
const CHUNK_PAGES: u64 = 1 << 15;
const CHUNK_WORDS: usize = (CHUNK_PAGES / 64) as usize;

/// The per-second series stops here (about 48.5 days of trace time, 16 MiB of counters);
/// later seconds are left out and [`TraceInfo::rate_truncated`] is set.
pub const MAX_SECONDS: usize = 1 << 22;

/// A set of pages: a sparse bitmap, one chunk of bits per 128 MiB of address space touched.
#[derive(Debug, Clone, Default)]
struct PageSet {
    chunks: BTreeMap<u64, Box<[u64]>>,
    count: u64,
}

impl PageSet {
    /// Adds pages `first..=last`.
    fn insert(&mut self, first: u64, last: u64) {
        let mut page = first;
        loop {
            let chunk = page / CHUNK_PAGES;
            let base = chunk * CHUNK_PAGES;
            let end = last.min(base + (CHUNK_PAGES - 1));
            let words = self
                .chunks
                .entry(chunk)
                .or_insert_with(|| vec![0u64; CHUNK_WORDS].into_boxed_slice());
            let (lo, hi) = ((page - base) as usize, (end - base) as usize);
            for w in lo / 64..=hi / 64 {
                let from = if w == lo / 64 { lo % 64 } else { 0 };
                let to = if w == hi / 64 { hi % 64 } else { 63 };
                let mask = (u64::MAX >> (63 - (to - from))) << from;
                self.count += u64::from((mask & !words[w]).count_ones());
                words[w] |= mask;
            }
            if end == last {
                return;
            }
            page = end + 1;
        }
    }
}

/// Requests of sizes in `[from, to)` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SizeBucket {
    pub from: u64,
    pub to: u64,
    pub requests: u64,
}

impl SizeBucket {
    /// The histogram's bucket `i`: `[2^i, 2^(i+1))` bytes (the last one open-ended).
    pub fn of(i: usize, requests: u64) -> SizeBucket {
        SizeBucket { from: 1u64 << i, to: 1u64.checked_shl(i as u32 + 1).unwrap_or(u64::MAX), requests }
    }
}

/// A trace's summary, built with [`TraceInfo::add`] for every request.
#[derive(Debug, Clone, Serialize)]
pub struct TraceInfo {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
    pub flushes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub trim_bytes: u64,
    /// Requests by size, in power-of-two buckets (`[2^i, 2^(i+1))` bytes); flushes have none.
    #[serde(serialize_with = "non_empty_buckets")]
    pub size_histogram: Vec<u64>,
    /// Distinct 4 KiB pages read, written or trimmed.
    pub footprint_pages: u64,
    /// Distinct 4 KiB pages written.
    pub write_footprint_pages: u64,
    /// Lowest offset and highest end (offset + length) of any request with data.
    pub min_offset: Option<u64>,
    pub max_end: Option<u64>,
    /// Time of the last request (times start at 0).
    pub duration_ns: u64,
    /// Requests in each second of trace time.
    pub requests_per_second: Vec<u32>,
    /// Some requests came after [`MAX_SECONDS`] and are not in the series.
    pub rate_truncated: bool,
    /// Reads and writes that start where their stream's previous one of the same direction
    /// ended.
    pub sequential_reads: u64,
    pub sequential_writes: u64,
    /// Requests per stream id.
    pub stream_requests: BTreeMap<u32, u64>,
    /// Stream names, once given with [`TraceInfo::name_streams`].
    pub stream_names: BTreeMap<u32, String>,
    #[serde(skip)]
    pages: PageSet,
    #[serde(skip)]
    written: PageSet,
    /// Where each (stream, direction)'s last read or write ended.
    #[serde(skip)]
    last_end: BTreeMap<(u32, bool), u64>,
}

fn non_empty_buckets<S: Serializer>(hist: &[u64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(buckets(hist))
}

fn buckets(hist: &[u64]) -> impl Iterator<Item = SizeBucket> + '_ {
    hist.iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(i, &n)| SizeBucket::of(i, n))
}

impl Default for TraceInfo {
    fn default() -> Self {
        TraceInfo {
            requests: 0,
            reads: 0,
            writes: 0,
            trims: 0,
            flushes: 0,
            read_bytes: 0,
            write_bytes: 0,
            trim_bytes: 0,
            size_histogram: vec![0; 64],
            footprint_pages: 0,
            write_footprint_pages: 0,
            min_offset: None,
            max_end: None,
            duration_ns: 0,
            requests_per_second: Vec::new(),
            rate_truncated: false,
            sequential_reads: 0,
            sequential_writes: 0,
            stream_requests: BTreeMap::new(),
            stream_names: BTreeMap::new(),
            pages: PageSet::default(),
            written: PageSet::default(),
            last_end: BTreeMap::new(),
        }
    }
}

impl TraceInfo {
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one request.
    pub fn add(&mut self, r: &TraceRecord) {
        self.requests += 1;
        match r.op {
            TraceOp::Read => {
                self.reads += 1;
                self.read_bytes = self.read_bytes.saturating_add(r.len);
            }
            TraceOp::Write => {
                self.writes += 1;
                self.write_bytes = self.write_bytes.saturating_add(r.len);
            }
            TraceOp::Trim => {
                self.trims += 1;
                self.trim_bytes = self.trim_bytes.saturating_add(r.len);
            }
            TraceOp::Flush => self.flushes += 1,
        }
        if r.len > 0 {
            self.size_histogram[63 - r.len.leading_zeros() as usize] += 1;
            let end = r.offset.saturating_add(r.len);
            self.min_offset = Some(self.min_offset.map_or(r.offset, |m| m.min(r.offset)));
            self.max_end = Some(self.max_end.map_or(end, |m| m.max(end)));
            let (first, last) = (r.offset / PAGE, (end - 1) / PAGE);
            self.pages.insert(first, last);
            self.footprint_pages = self.pages.count;
            if r.op == TraceOp::Write {
                self.written.insert(first, last);
                self.write_footprint_pages = self.written.count;
            }
        }
        if matches!(r.op, TraceOp::Read | TraceOp::Write) {
            let write = r.op == TraceOp::Write;
            let end = r.offset.saturating_add(r.len);
            if self.last_end.insert((r.stream, write), end) == Some(r.offset) {
                if write {
                    self.sequential_writes += 1;
                } else {
                    self.sequential_reads += 1;
                }
            }
        }
        self.duration_ns = self.duration_ns.max(r.time_ns);
        match usize::try_from(r.time_ns / 1_000_000_000) {
            Ok(second) if second < MAX_SECONDS => {
                if self.requests_per_second.len() <= second {
                    self.requests_per_second.resize(second + 1, 0);
                }
                let n = &mut self.requests_per_second[second];
                *n = n.saturating_add(1);
            }
            _ => self.rate_truncated = true,
        }
        *self.stream_requests.entry(r.stream).or_insert(0) += 1;
    }

    /// Names the streams seen (for the report).
    pub fn name_streams(&mut self, name: impl Fn(u32) -> String) {
        self.stream_names = self.stream_requests.keys().map(|&s| (s, name(s))).collect();
    }

    /// Requests per second over the whole trace; `None` for a trace without duration.
    pub fn mean_rate(&self) -> Option<f64> {
        (self.duration_ns > 0).then(|| self.requests as f64 * 1e9 / self.duration_ns as f64)
    }

    /// The busiest second: (second, requests).
    pub fn peak_second(&self) -> Option<(usize, u32)> {
        self.requests_per_second
            .iter()
            .copied()
            .enumerate()
            .fold(None, |best, (s, n)| match best {
                Some((_, b)) if b >= n => best,
                _ => Some((s, n)),
            })
    }

    /// Mean requests per sequential run of reads (or writes); `None` without any.
    pub fn mean_run(&self, write: bool) -> Option<f64> {
        let (n, seq) = if write { (self.writes, self.sequential_writes) } else { (self.reads, self.sequential_reads) };
        (n > 0).then(|| n as f64 / (n - seq) as f64)
    }

    /// The size histogram's non-empty buckets.
    pub fn size_buckets(&self) -> Vec<SizeBucket> {
        buckets(&self.size_histogram).collect()
    }
}

impl fmt::Display for TraceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |n: u64| {
            if self.requests == 0 {
                0.0
            } else {
                n as f64 * 100.0 / self.requests as f64
            }
        };
        writeln!(
            f,
            "requests   {} ({} reads {:.1}%, {} writes {:.1}%, {} trims, {} flushes)",
            self.requests,
            self.reads,
            pct(self.reads),
            self.writes,
            pct(self.writes),
            self.trims,
            self.flushes
        )?;
        writeln!(
            f,
            "bytes      {} read, {} written, {} trimmed",
            fmt_bytes(self.read_bytes),
            fmt_bytes(self.write_bytes),
            fmt_bytes(self.trim_bytes)
        )?;
        write!(f, "duration   {:.6} s", self.duration_ns as f64 / 1e9)?;
        if let Some(rate) = self.mean_rate() {
            write!(f, ", {rate:.0} requests/s on average")?;
        }
        if let Some((s, n)) = self.peak_second() {
            write!(f, ", {n} in the busiest second ({s})")?;
        }
        if self.rate_truncated {
            write!(f, " (per-second counts stop after {MAX_SECONDS} s)")?;
        }
        writeln!(f)?;
        if let (Some(lo), Some(hi)) = (self.min_offset, self.max_end) {
            writeln!(
                f,
                "offsets    {lo} .. {hi} ({} .. {})",
                fmt_bytes(lo),
                fmt_bytes(hi)
            )?;
        }
        writeln!(
            f,
            "footprint  {} pages of 4 KiB ({}), {} of them written ({})",
            self.footprint_pages,
            fmt_bytes(self.footprint_pages.saturating_mul(PAGE)),
            self.write_footprint_pages,
            fmt_bytes(self.write_footprint_pages.saturating_mul(PAGE))
        )?;
        for (what, write) in [("reads", false), ("writes", true)] {
            if let Some(run) = self.mean_run(write) {
                let (n, seq) = if write { (self.writes, self.sequential_writes) } else { (self.reads, self.sequential_reads) };
                writeln!(f, "sequential {what}: {seq} of {n} continue the previous one; {run:.1} requests per run")?;
            }
        }
        let sized = self.requests - self.flushes;
        if sized > 0 {
            writeln!(f, "sizes")?;
            for b in buckets(&self.size_histogram) {
                let range = format!("{} .. {}", fmt_bytes(b.from), fmt_bytes(b.to));
                writeln!(
                    f,
                    "  {range:<24} {:>12} {:>6.1}%",
                    b.requests,
                    b.requests as f64 * 100.0 / sized as f64
                )?;
            }
        }
        writeln!(f, "streams    {}", self.stream_requests.len())?;
        for (id, n) in &self.stream_requests {
            let name = self
                .stream_names
                .get(id)
                .cloned()
                .unwrap_or_else(|| format!("stream{id}"));
            writeln!(f, "  {name:<24} {n:>12} {:>6.1}%", pct(*n))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rec;
    use super::*;

    #[test]
    fn counts_mix_bytes_sizes_and_streams() {
        let mut info = TraceInfo::new();
        info.add(&rec(0, TraceOp::Read, 0, 4096, 0));
        info.add(&rec(500_000_000, TraceOp::Write, 8192, 8192, 1));
        info.add(&rec(1_500_000_000, TraceOp::Trim, 1 << 20, 512, 0));
        info.add(&rec(2_000_000_000, TraceOp::Flush, 0, 0, 1));
        assert_eq!((info.requests, info.reads, info.writes), (4, 1, 1));
        assert_eq!((info.trims, info.flushes), (1, 1));
        assert_eq!(
            (info.read_bytes, info.write_bytes, info.trim_bytes),
            (4096, 8192, 512)
        );
        assert_eq!(
            info.size_buckets(),
            [
                SizeBucket {
                    from: 512,
                    to: 1024,
                    requests: 1
                },
                SizeBucket {
                    from: 4096,
                    to: 8192,
                    requests: 1
                },
                SizeBucket {
                    from: 8192,
                    to: 16384,
                    requests: 1
                },
            ]
        );
        assert_eq!(info.min_offset, Some(0));
        assert_eq!(info.max_end, Some((1 << 20) + 512));
        assert_eq!(info.footprint_pages, 4);
        assert_eq!(info.write_footprint_pages, 2);
        assert_eq!(info.duration_ns, 2_000_000_000);
        assert_eq!(info.requests_per_second, [2, 1, 1]);
        assert_eq!(info.peak_second(), Some((0, 2)));
        assert_eq!(info.stream_requests, BTreeMap::from([(0, 2), (1, 2)]));
        info.name_streams(|s| format!("vol{s}"));
        let text = info.to_string();
        assert!(text.contains("vol1"), "{text}");
        assert!(text.starts_with("requests   4 (1 reads 25.0%"), "{text}");
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["size_histogram"][0]["from"], 512);
        assert_eq!(json["footprint_pages"], 4);
    }

    #[test]
    fn footprint_counts_each_page_once_across_chunks_and_words() {
        let mut info = TraceInfo::new();
        // 3 pages straddling a 64-page word boundary, then the same again.
        info.add(&rec(0, TraceOp::Write, 63 * PAGE, 3 * PAGE, 0));
        info.add(&rec(0, TraceOp::Read, 63 * PAGE, 3 * PAGE, 0));
        assert_eq!(info.footprint_pages, 3);
        // 1 GiB from just before a 128 MiB chunk boundary: 262,144 pages, 2 overlapping.
        let start = CHUNK_PAGES * PAGE - 2 * PAGE;
        info.add(&rec(0, TraceOp::Write, start, 1 << 30, 0));
        assert_eq!(info.footprint_pages, 3 + (1 << 18));
        // A request ending in the middle of a page touches it.
        info.add(&rec(0, TraceOp::Read, 1 << 40, 1, 0));
        assert_eq!(info.footprint_pages, 4 + (1 << 18));
        // The last page of the address space.
        info.add(&rec(0, TraceOp::Read, u64::MAX - 4095, 4095, 0));
        assert_eq!(info.footprint_pages, 5 + (1 << 18));
    }

    #[test]
    fn sequential_runs_are_per_stream_and_direction() {
        let mut info = TraceInfo::new();
        // Stream 0 writes 0, 4K, 8K (one run of 3) with stream 1's write at 4K and a read at
        // 12K between them; stream 0 then writes at 100K (a new run); the read at 12K is
        // followed by one at 16K (a run of 2). A trim and a flush change nothing.
        let k = 1024;
        for (op, off, len, s) in [
            (TraceOp::Write, 0, 4 * k, 0),
            (TraceOp::Write, 4 * k, 4 * k, 1),
            (TraceOp::Write, 4 * k, 4 * k, 0),
            (TraceOp::Read, 12 * k, 4 * k, 0),
            (TraceOp::Trim, 0, 4 * k, 0),
            (TraceOp::Flush, 0, 0, 0),
            (TraceOp::Write, 8 * k, 4 * k, 0),
            (TraceOp::Read, 16 * k, 8 * k, 0),
            (TraceOp::Write, 100 * k, 4 * k, 0),
        ] {
            info.add(&rec(0, op, off, len, s));
        }
        assert_eq!((info.sequential_writes, info.sequential_reads), (2, 1));
        assert_eq!(info.mean_run(true), Some(5.0 / 3.0), "runs: stream 0's 0-12K, stream 1's, stream 0's 100K");
        assert_eq!(info.mean_run(false), Some(2.0));
        assert!(info.to_string().contains("sequential writes: 2 of 5 continue the previous one; 1.7 requests per run"));
        assert_eq!(TraceInfo::new().mean_run(true), None);
    }

    #[test]
    fn the_rate_series_stops_at_its_limit() {
        let mut info = TraceInfo::new();
        info.add(&rec(u64::MAX, TraceOp::Read, 0, 1, 0));
        assert!(info.rate_truncated);
        assert!(info.requests_per_second.is_empty());
        assert_eq!(info.duration_ns, u64::MAX);
    }
}
