//! Writing requests back out, for `flashmux trace convert`: fio iolog version 3 (replayable with
//! fio's `read_iolog`), MQSim's ASCII trace, and blkparse's text (D events).
//!
//! Each format has its resolution, and what it cannot say is lost on the way:
//! - fio iolog: microsecond timestamps (times are truncated to whole µs); byte offsets and
//!   lengths; every operation (flushes become `sync`). The file name is the stream's name, with
//!   blanks replaced by `_` (fio reads names as single words); each file is `add`ed and `open`ed
//!   before its first request and `close`d at the end, as fio requires.
//! - MQSim: nanosecond times, 512-byte sectors (a request is widened to the sectors it touches);
//!   reads and writes only, so trims and flushes are left out (the count returned says how many
//!   requests were written). The device number is the stream id.
//! - blkparse: nanosecond times, 512-byte sectors; flushes are `FN` events without an extent. The
//!   device is taken from a stream named `dev<major>,<minor>`, the pid from one named
//!   `pid<n>`; otherwise the device is `0,<stream>` and the pid the stream id. The process name
//!   in brackets is the stream's name.

use std::io::{self, Write};

use super::{Format, TraceOp, TraceRecord};

/// Writes `records` as a `to` trace; returns the number of requests written. Fails with
/// [`io::ErrorKind::Unsupported`] for a format not in [`Format::WRITABLE`].
pub fn write_trace(
    records: impl Iterator<Item = TraceRecord>,
    to: Format,
    out: &mut dyn Write,
    stream_name: &dyn Fn(u32) -> String,
) -> io::Result<u64> {
    match to {
        Format::FioIolog => fio_iolog(records, out, stream_name),
        Format::Mqsim => mqsim(records, out),
        Format::Blkparse => blkparse(records, out, stream_name),
        _ => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "cannot write {} traces; writable formats: {}",
                to.name(),
                Format::WRITABLE
                    .iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// A name fio reads as one word.
fn word(name: &str, stream: u32) -> String {
    let w: String = name
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    if w.is_empty() {
        format!("stream{stream}")
    } else {
        w
    }
}

fn fio_iolog(
    records: impl Iterator<Item = TraceRecord>,
    out: &mut dyn Write,
    stream_name: &dyn Fn(u32) -> String,
) -> io::Result<u64> {
    writeln!(out, "fio version 3 iolog")?;
    // Names of the files opened so far, by stream id, in order of first appearance.
    let mut names: Vec<Option<String>> = Vec::new();
    let mut opened: Vec<u32> = Vec::new();
    let mut written = 0;
    let mut last_us = 0;
    for r in records {
        let us = r.time_ns / 1_000;
        last_us = last_us.max(us);
        let i = r.stream as usize;
        if names.len() <= i {
            names.resize(i + 1, None);
        }
        if names[i].is_none() {
            let n = word(&stream_name(r.stream), r.stream);
            writeln!(out, "{us} {n} add")?;
            writeln!(out, "{us} {n} open")?;
            opened.push(r.stream);
            names[i] = Some(n);
        }
        let name = names[i].as_deref().unwrap_or_default();
        let action = match r.op {
            TraceOp::Read => "read",
            TraceOp::Write => "write",
            TraceOp::Trim => "trim",
            TraceOp::Flush => "sync",
        };
        writeln!(out, "{us} {name} {action} {} {}", r.offset, r.len)?;
        written += 1;
    }
    for s in opened {
        if let Some(n) = &names[s as usize] {
            writeln!(out, "{last_us} {n} close")?;
        }
    }
    Ok(written)
}

fn mqsim(records: impl Iterator<Item = TraceRecord>, out: &mut dyn Write) -> io::Result<u64> {
    let mut written = 0;
    for r in records {
        let kind = match r.op {
            TraceOp::Write => 0,
            TraceOp::Read => 1,
            TraceOp::Trim | TraceOp::Flush => continue,
        };
        let (first, end) = sector_span(r.offset, r.len);
        writeln!(
            out,
            "{} {} {first} {} {kind}",
            r.time_ns,
            r.stream,
            end - first
        )?;
        written += 1;
    }
    Ok(written)
}

/// The 512-byte sectors `first..end` a byte range touches.
fn sector_span(offset: u64, len: u64) -> (u64, u64) {
    let first = offset / 512;
    let end = offset.saturating_add(len).div_ceil(512);
    (first, end)
}

/// `dev<major>,<minor>` → (major, minor).
fn device_of(name: &str) -> Option<(u64, u64)> {
    let (major, minor) = name.strip_prefix("dev")?.split_once(',')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

fn blkparse(
    records: impl Iterator<Item = TraceRecord>,
    out: &mut dyn Write,
    stream_name: &dyn Fn(u32) -> String,
) -> io::Result<u64> {
    // Per stream: (major, minor, pid, process name).
    let mut streams: Vec<Option<(u64, u64, u64, String)>> = Vec::new();
    let mut written: u64 = 0;
    for r in records {
        let i = r.stream as usize;
        if streams.len() <= i {
            streams.resize(i + 1, None);
        }
        if streams[i].is_none() {
            let name = stream_name(r.stream);
            let (major, minor) = device_of(&name).unwrap_or((0, u64::from(r.stream)));
            let pid = name
                .strip_prefix("pid")
                .and_then(|p| p.parse().ok())
                .unwrap_or(u64::from(r.stream));
            let comm: String = word(&name, r.stream)
                .chars()
                .map(|c| if c == ']' { '_' } else { c })
                .collect();
            streams[i] = Some((major, minor, pid, comm));
        }
        let Some((major, minor, pid, comm)) = &streams[i] else {
            continue;
        };
        let (secs, nanos) = (r.time_ns / 1_000_000_000, r.time_ns % 1_000_000_000);
        let header = format!(
            "{major:3},{minor:<3} {:2} {written:8} {secs:5}.{nanos:09} {pid:5} {:>2} ",
            0, "D"
        );
        match r.op {
            TraceOp::Flush => writeln!(out, "{header}{:>3} [{comm}]", "FN")?,
            op => {
                let rwbs = match op {
                    TraceOp::Read => "R",
                    TraceOp::Write => "W",
                    _ => "D",
                };
                let (first, end) = sector_span(r.offset, r.len);
                writeln!(out, "{header}{rwbs:>3} {first} + {} [{comm}]", end - first)?;
            }
        }
        written += 1;
    }
    Ok(written)
}
