//! fio's iolog text, as `write_iolog` writes and `read_iolog` replays it, versions 2 and 3.
//!
//! The first line names the version. Version 2 (`fio version 2 iolog`) has no timestamps: a
//! request is at the sum of the `wait` lines before it (`/dev/sda wait 100` adds 100 us).
//! Version 3 (`fio version 3 iolog`) starts every line with microseconds since the start and has
//! no `wait`. File actions (`add`, `open`, `close`) carry no request; `sync` and `datasync` are
//! flushes. Field for streams and placements: `device` (the file name).
//!
//! Source: fio's HOWTO ("Trace file format") and `iolog.c` (docs/TRACES.md, "fio iolog").

use super::super::lex::{trimmed, uint, Span, Words};
use super::super::{TenantBy, TraceOp};
use super::{extent_of, need, need_uint, no_more, scaled, Bad, Cx, Line, Raw, Unit};

/// fio's `write_iolog`/`read_iolog` text, versions 2 and 3.
pub(in crate::workload::trace) struct FioIolog {
    /// 2 or 3 once the header is read.
    version: Option<u8>,
    /// Version 2 has no timestamps: its `wait` lines add up to the time of what follows.
    wait_ns: u64,
}

const FIO_ACTIONS: &str = "read, write, trim, sync, datasync, wait, add, open or close";

impl FioIolog {
    pub(super) fn new() -> FioIolog {
        FioIolog { version: None, wait_ns: 0 }
    }

    pub(super) fn parse(&mut self, line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
        let Some(version) = self.version else {
            return self.header(line);
        };
        let mut w = Words::new(line);
        let time = if version == 3 {
            let (us, at) = need_uint(&mut w, line, "timestamp", "microseconds since the start")?;
            Some(scaled(us, 1_000, at)?)
        } else {
            None
        };
        let file_at = need(&mut w, line, "filename", "a file name")?;
        let act_at = need(&mut w, line, "action", FIO_ACTIONS)?;
        let offset = w.next();
        let length = w.next();
        no_more(&mut w, "no field after the length")?;
        let op = match act_at.of(line) {
            b"add" | b"open" | b"close" => {
                if let Some(extra) = offset {
                    return Err(Bad::syntax("line", "nothing after a file action", extra));
                }
                return Ok(Line::Skip);
            }
            b"wait" => return self.wait(line, version, act_at, offset),
            b"read" => TraceOp::Read,
            b"write" => TraceOp::Write,
            b"trim" => TraceOp::Trim,
            b"sync" | b"datasync" => TraceOp::Flush,
            _ => return Err(Bad::syntax("action", FIO_ACTIONS, act_at)),
        };
        let (offset, len) = io_extent(line, op, offset, length)?;
        let (stream, place) = cx.ids(|cx, side, by| match by {
            TenantBy::Device => cx.text(side, file_at.of(line), file_at),
            _ => Ok(0),
        })?;
        Ok(Line::Request(Raw { time_ns: time.unwrap_or(self.wait_ns), op, offset, len, stream, place }))
    }

    /// The first line: which version. Another first line is bad, and the rest is read as
    /// version 2, the format without timestamps.
    fn header(&mut self, line: &[u8]) -> Result<Line, Bad> {
        let t = trimmed(line, 0, line.len());
        let version = match t.of(line) {
            b"fio version 2 iolog" => 2,
            b"fio version 3 iolog" => 3,
            _ => {
                self.version = Some(2);
                return Err(Bad::syntax(
                    "header",
                    "'fio version 2 iolog' or 'fio version 3 iolog' as the first line",
                    t,
                ));
            }
        };
        self.version = Some(version);
        Ok(Line::Skip)
    }

    /// A version 2 `wait`: its offset field is microseconds added to the time of what follows.
    fn wait(&mut self, line: &[u8], version: u8, act_at: Span, offset: Option<Span>) -> Result<Line, Bad> {
        if version == 3 {
            return Err(Bad::syntax("action", "no 'wait' in version 3 (its timestamps replace it)", act_at));
        }
        let at = offset.ok_or_else(|| Bad::syntax("offset", "the microseconds to wait", Span::end_of(line)))?;
        let us = uint(at.of(line)).ok_or_else(|| Bad::syntax("offset", "the microseconds to wait", at))?;
        let wait = scaled(us, 1_000, at)?;
        self.wait_ns = self
            .wait_ns
            .checked_add(wait)
            .ok_or_else(|| Bad::value("offset", "waits adding up to less than 2^64 ns", at))?;
        Ok(Line::Skip)
    }
}

/// An I/O's offset and length in bytes (both required; a flush's are read, then 0 and 0).
fn io_extent(line: &[u8], op: TraceOp, offset: Option<Span>, length: Option<Span>) -> Result<(u64, u64), Bad> {
    let off_at = offset.ok_or_else(|| Bad::syntax("offset", "an offset in bytes", Span::end_of(line)))?;
    let len_at = length.ok_or_else(|| Bad::syntax("length", "a length in bytes", Span::end_of(line)))?;
    let off = uint(off_at.of(line)).ok_or_else(|| Bad::syntax("offset", "an offset in bytes", off_at))?;
    let len = uint(len_at.of(line)).ok_or_else(|| Bad::syntax("length", "a length in bytes", len_at))?;
    if op == TraceOp::Flush {
        return Ok((0, 0));
    }
    extent_of(op, off, len, off_at, len_at, Unit::Bytes)?;
    Ok((off, len))
}
