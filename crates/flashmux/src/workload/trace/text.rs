//! The line parsers of the text formats, one per format, and what they share: the outcome of a
//! line, the checks every request passes, and the stream table.
//!
//! A parser sees one line at a time (without its line end; never blank, never a `#` comment) and
//! says what it is: a request, a valid line that carries no request (a header, another blktrace
//! event, an fio file action), text that is not part of the trace proper (blkparse's summary), or
//! a bad line with the field at fault. Parsers keep only O(1) state between lines.

use std::collections::BTreeMap;
use std::io::Write as _;

use super::lex::{eq_ci, seconds_ns, trimmed, uint, Csv, Scan, Span, Words};
use super::{BlkEvent, Format, TenantBy, TraceOp};

/// Requests larger than this are taken for corrupt lines: no block device takes a single
/// request of more than 1 GiB.
pub(super) const MAX_LEN: u64 = 1 << 30;

/// At most this many distinct streams; a trace with more is splitting on a field that does not
/// name tenants, and the stream table would otherwise grow without bound.
pub(super) const MAX_STREAMS: usize = 1 << 16;

const SECTOR: u64 = 512;

/// One request as read, its time absolute in the format's own origin (normalised by the reader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Raw {
    pub time_ns: u64,
    pub op: TraceOp,
    pub offset: u64,
    pub len: u64,
    pub stream: u32,
}

/// What a line is.
pub(super) enum Line {
    Request(Raw),
    /// A valid line of the format that is not a request.
    Skip,
    /// Text that is not part of the trace proper and says nothing about the format.
    Other,
}

/// Whether a bad line is malformed, or well formed with an impossible value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BadKind {
    /// Not a line of this format at all: auto-detection rejects the format.
    Syntax,
    /// A line of this format with a value no request can have (size 0, beyond 2^64): still
    /// evidence for the format.
    Value,
}

/// The text of a bad field.
#[derive(Debug, Clone)]
pub(super) enum Found {
    Span(Span),
    Text(String),
}

/// A bad line: which field, what it should have been, what it was.
#[derive(Debug, Clone)]
pub(super) struct Bad {
    pub field: &'static str,
    pub expected: &'static str,
    pub found: Found,
    pub kind: BadKind,
}

impl Bad {
    pub fn syntax(field: &'static str, expected: &'static str, found: Span) -> Bad {
        Bad {
            field,
            expected,
            found: Found::Span(found),
            kind: BadKind::Syntax,
        }
    }

    pub fn value(field: &'static str, expected: &'static str, found: Span) -> Bad {
        Bad {
            field,
            expected,
            found: Found::Span(found),
            kind: BadKind::Value,
        }
    }
}

/// Dense stream ids, in order of first appearance, for the values of the `--tenant-by` field.
/// Lookups go through ordered maps (no hashing), and the last key is cached because consecutive
/// requests usually come from the same stream.
#[derive(Debug, Default)]
pub(super) struct Streams {
    nums: BTreeMap<u64, u32>,
    strs: BTreeMap<Box<[u8]>, u32>,
    names: Vec<String>,
    last_num: Option<(u64, u32)>,
    last_str: Option<u32>,
}

impl Streams {
    /// The id of a numeric key, naming a new stream with `name()`; `None` past [`MAX_STREAMS`].
    pub fn by_num(&mut self, key: u64, name: impl FnOnce() -> String) -> Option<u32> {
        if let Some((k, id)) = self.last_num {
            if k == key {
                return Some(id);
            }
        }
        let id = match self.nums.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.push(name())?;
                self.nums.insert(key, id);
                id
            }
        };
        self.last_num = Some((key, id));
        Some(id)
    }

    /// The id of a key that is its own name; `None` past [`MAX_STREAMS`].
    pub fn by_str(&mut self, key: &[u8]) -> Option<u32> {
        if let Some(id) = self.last_str {
            if self.names[id as usize].as_bytes() == key {
                return Some(id);
            }
        }
        let id = match self.strs.get(key) {
            Some(&id) => id,
            None => {
                let id = self.push(String::from_utf8_lossy(key).into_owned())?;
                self.strs.insert(key.into(), id);
                id
            }
        };
        self.last_str = Some(id);
        Some(id)
    }

    fn push(&mut self, name: String) -> Option<u32> {
        if self.names.len() >= MAX_STREAMS {
            return None;
        }
        self.names.push(name);
        Some((self.names.len() - 1) as u32)
    }

    pub fn name(&self, id: u32) -> Option<&str> {
        self.names.get(id as usize).map(String::as_str)
    }
}

/// What every parser needs besides its line: which field splits streams, and the stream table.
pub(super) struct Cx {
    pub tenant: TenantBy,
    pub streams: Streams,
}

impl Cx {
    pub fn new(tenant: TenantBy) -> Self {
        Cx {
            tenant,
            streams: Streams::default(),
        }
    }

    fn num(&mut self, key: u64, at: Span, name: impl FnOnce() -> String) -> Result<u32, Bad> {
        self.streams.by_num(key, name).ok_or_else(|| too_many(at))
    }

    fn text(&mut self, key: &[u8], at: Span) -> Result<u32, Bad> {
        self.streams.by_str(key).ok_or_else(|| too_many(at))
    }
}

fn too_many(at: Span) -> Bad {
    Bad::value(
        "stream",
        "at most 65536 distinct streams (choose another --tenant-by)",
        at,
    )
}

/// The unit a format gives sizes and offsets in, for the wording of value errors.
#[derive(Clone, Copy)]
enum Unit {
    Bytes,
    Sectors,
}

/// Checks a request's extent (in bytes) against what a real request can be.
#[inline]
fn extent(offset: u64, len: u64, off: Span, size: Span, unit: Unit) -> Result<(), Bad> {
    if len == 0 {
        return Err(Bad::value("size", "a size above 0", size));
    }
    if len > MAX_LEN {
        return Err(Bad::value(
            "size",
            match unit {
                Unit::Bytes => "at most 1 GiB (1073741824 bytes)",
                Unit::Sectors => "at most 1 GiB (2097152 sectors)",
            },
            size,
        ));
    }
    if offset.checked_add(len).is_none() {
        return Err(Bad::value("offset", "offset + size below 2^64 bytes", off));
    }
    Ok(())
}

/// Sectors of 512 bytes in bytes.
#[inline]
fn sectors(n: u64, field: &'static str, at: Span) -> Result<u64, Bad> {
    n.checked_mul(SECTOR)
        .ok_or_else(|| Bad::value(field, "a sector number below 2^55", at))
}

/// The next field, which must exist.
#[inline(always)]
fn need(
    fields: &mut impl Iterator<Item = Span>,
    line: &[u8],
    field: &'static str,
    expected: &'static str,
) -> Result<Span, Bad> {
    fields
        .next()
        .ok_or_else(|| Bad::syntax(field, expected, Span::end_of(line)))
}

/// The next field as an integer.
#[inline(always)]
fn need_uint(
    fields: &mut impl Iterator<Item = Span>,
    line: &[u8],
    field: &'static str,
    expected: &'static str,
) -> Result<(u64, Span), Bad> {
    let at = need(fields, line, field, expected)?;
    let v = uint(at.of(line)).ok_or_else(|| Bad::syntax(field, expected, at))?;
    Ok((v, at))
}

/// No field may follow the last one.
#[inline]
fn no_more(fields: &mut impl Iterator<Item = Span>, expected: &'static str) -> Result<(), Bad> {
    match fields.next() {
        Some(extra) => Err(Bad::syntax("line", expected, extra)),
        None => Ok(()),
    }
}

/// A time in some unit, converted to nanoseconds.
#[inline]
fn scaled(v: u64, ns_per_unit: u64, at: Span) -> Result<u64, Bad> {
    v.checked_mul(ns_per_unit)
        .ok_or_else(|| Bad::value("timestamp", "a time below 2^64 ns (about 584 years)", at))
}

/// The parser of one text format.
pub(super) enum TextParser {
    Blkparse(Blkparse),
    FioIolog(FioIolog),
    Msr(Msr),
    Spc,
    Mqsim,
    Alibaba,
    Tencent,
    Systor,
}

impl TextParser {
    /// The parser of a text format; `None` for blktrace, which is binary.
    pub fn new(format: Format, event: BlkEvent) -> Option<TextParser> {
        Some(match format {
            Format::Blktrace => return None,
            Format::Blkparse => TextParser::Blkparse(Blkparse {
                event: event.letter().as_bytes(),
                in_summary: false,
            }),
            Format::FioIolog => TextParser::FioIolog(FioIolog {
                version: None,
                wait_ns: 0,
            }),
            Format::Msr => TextParser::Msr(Msr { key: Vec::new() }),
            Format::Spc => TextParser::Spc,
            Format::Mqsim => TextParser::Mqsim,
            Format::Alibaba => TextParser::Alibaba,
            Format::Tencent => TextParser::Tencent,
            Format::Systor => TextParser::Systor,
        })
    }

    /// What one line (non-blank, not a comment, without its line end) is.
    pub fn parse(&mut self, line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
        match self {
            TextParser::Blkparse(p) => p.parse(line, cx),
            TextParser::FioIolog(p) => p.parse(line, cx),
            TextParser::Msr(p) => p.parse(line, cx),
            TextParser::Spc => spc(line, cx),
            TextParser::Mqsim => mqsim(line, cx),
            TextParser::Alibaba => alibaba(line, cx),
            TextParser::Tencent => tencent(line, cx),
            TextParser::Systor => systor(line, cx),
        }
    }
}

/// A header line (`Timestamp,...`, `device_id,...`): the first field is this word.
fn is_header(line: &[u8], first: Span, word: &[u8]) -> bool {
    eq_ci(first.of(line), word) && line.contains(&b',')
}

// ---------------------------------------------------------------------------------------------
// blkparse

/// blkparse's default output: `dev cpu seq sec.nsec pid action RWBS [sector + nsect] [comm]`.
pub(super) struct Blkparse {
    /// The action letter read as requests (`D`, `C` or `Q`).
    event: &'static [u8],
    /// Inside the per-CPU and total statistics blkparse prints at the end.
    in_summary: bool,
}

/// `major,minor`.
fn device(b: &[u8]) -> Option<(u64, u64)> {
    let comma = b.iter().position(|&c| c == b',')?;
    Some((uint(&b[..comma])?, uint(&b[comma + 1..])?))
}

/// Where blkparse's statistics start: `CPU0 (name):` or `Total (name):`.
fn starts_summary(line: &[u8]) -> bool {
    let t = trimmed(line, 0, line.len()).of(line);
    if let Some(rest) = t.strip_prefix(b"Total (") {
        return rest.ends_with(b":");
    }
    if let Some(rest) = t.strip_prefix(b"CPU") {
        let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        return digits > 0 && rest[digits..].starts_with(b" (") && rest.ends_with(b":");
    }
    false
}

/// The fields of a blkparse line a request is made from.
struct BlkparseLine<'a> {
    dev: (u64, u64, Span),
    time_ns: u64,
    pid: (u64, Span),
    rwbs: (&'a [u8], Span),
    /// `sector + nsect`, if the line has an extent.
    extent: Option<((u64, Span), (u64, Span))>,
}

impl Blkparse {
    fn parse(&mut self, line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
        match self.fast(line) {
            Some(Some(fields)) => {
                self.in_summary = false;
                self.request(fields, cx)
            }
            Some(None) => {
                self.in_summary = false;
                Ok(Line::Skip)
            }
            None => self.general(line, cx),
        }
    }

    /// The common shape of a line in one pass: `Some(None)` for another event, `None` for
    /// anything unusual, which [`Self::general`] then reads (or says what is wrong with).
    #[inline(always)]
    fn fast<'a>(&self, line: &'a [u8]) -> Option<Option<BlkparseLine<'a>>> {
        let mut s = Scan::new(line);
        let dev = s.uint_pair(b',')?;
        s.uint()?;
        s.uint()?;
        let time_ns = s.seconds()?;
        let pid = s.uint()?;
        let act = s.word()?.of(line);
        // Compared by hand: a slice comparison calls `memcmp` for one or two bytes.
        if act.len() != self.event.len() || act.iter().zip(self.event).any(|(a, b)| a != b) {
            return act.iter().all(u8::is_ascii_alphabetic).then_some(None);
        }
        let rwbs_at = s.word()?;
        let rwbs = rwbs_at.of(line);
        if !rwbs.iter().all(u8::is_ascii_uppercase) {
            return None;
        }
        let sector = s.uint()?;
        if !matches!(s.word()?.of(line), [b'+']) {
            return None;
        }
        let nsect = s.uint()?;
        Some(Some(BlkparseLine {
            dev,
            time_ns,
            pid,
            rwbs: (rwbs, rwbs_at),
            extent: Some((sector, nsect)),
        }))
    }

    /// Any line, field by field, with the field at fault when it is bad.
    fn general(&mut self, line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
        let mut w = Words::new(line);
        let dev_at = need(&mut w, line, "device", "'major,minor'")?;
        let Some((major, minor)) = device(dev_at.of(line)) else {
            if starts_summary(line) {
                self.in_summary = true;
            }
            if self.in_summary {
                return Ok(Line::Other);
            }
            return Err(Bad::syntax("device", "'major,minor'", dev_at));
        };
        self.in_summary = false;
        need_uint(&mut w, line, "cpu", "a CPU number")?;
        need_uint(&mut w, line, "sequence", "a sequence number")?;
        let time_at = need(&mut w, line, "time", "seconds.nanoseconds")?;
        let time_ns = seconds_ns(time_at.of(line))
            .ok_or_else(|| Bad::syntax("time", "seconds.nanoseconds", time_at))?;
        let pid = need_uint(&mut w, line, "pid", "a process id")?;
        let act_at = need(&mut w, line, "action", "an action letter such as Q, D or C")?;
        let act = act_at.of(line);
        if !act.iter().all(u8::is_ascii_alphabetic) {
            return Err(Bad::syntax(
                "action",
                "an action letter such as Q, D or C",
                act_at,
            ));
        }
        if act != self.event {
            return Ok(Line::Skip);
        }
        let rwbs_at = need(&mut w, line, "rwbs", "an RWBS string such as R, WS or FWFS")?;
        let rwbs = rwbs_at.of(line);
        if !rwbs.iter().all(u8::is_ascii_uppercase) {
            return Err(Bad::syntax(
                "rwbs",
                "an RWBS string such as R, WS or FWFS",
                rwbs_at,
            ));
        }
        // `sector + nsect` follows for requests with data; events without data, passthrough
        // requests (`bytes (cdb)`) and the bare `[comm]` form have no extent.
        let extent = match (w.next(), w.next(), w.next()) {
            (Some(s_at), Some(plus), n) if plus.of(line) == b"+" => match uint(s_at.of(line)) {
                Some(sector) => {
                    let n_at = n.ok_or_else(|| {
                        Bad::syntax("size", "a sector count after '+'", Span::end_of(line))
                    })?;
                    let nsect = uint(n_at.of(line))
                        .ok_or_else(|| Bad::syntax("size", "a sector count after '+'", n_at))?;
                    Some(((sector, s_at), (nsect, n_at)))
                }
                None => None,
            },
            _ => None,
        };
        let fields = BlkparseLine {
            dev: (major, minor, dev_at),
            time_ns,
            pid,
            rwbs: (rwbs, rwbs_at),
            extent,
        };
        self.request(fields, cx)
    }

    /// The request a line of the chosen event makes, if any.
    #[inline(always)]
    fn request(&self, f: BlkparseLine<'_>, cx: &mut Cx) -> Result<Line, Bad> {
        let (rwbs, rwbs_at) = f.rwbs;
        // The kernel's RWBS: an optional F (pre-flush), the direction (D discard, W write, R
        // read, N none, Z zone operation), then modifiers (F FUA, A ahead, S sync, M meta).
        let (flush, dir) = match rwbs {
            [b'F', d @ (b'D' | b'W' | b'R' | b'N' | b'Z'), ..] => (true, *d),
            [b'F'] => (true, b'N'),
            [d, ..] => (false, *d),
            [] => (false, b'N'),
        };
        let (op, offset, len, off_at, len_at) = match f.extent {
            Some(((sector, s_at), (nsect, n_at))) => {
                let after_dir = rwbs.get(usize::from(flush) + 1).copied();
                let op = match (dir, after_dir) {
                    _ if nsect == 0 => None,
                    (b'D', _) => Some(TraceOp::Trim),
                    (b'W', _) | (b'Z', Some(b'A')) => Some(TraceOp::Write),
                    (b'R', _) => Some(TraceOp::Read),
                    _ => None,
                };
                match op {
                    Some(op) => (
                        op,
                        sectors(sector, "sector", s_at)?,
                        sectors(nsect, "size", n_at)?,
                        s_at,
                        n_at,
                    ),
                    None if flush => (TraceOp::Flush, 0, 0, s_at, n_at),
                    None => return Ok(Line::Skip),
                }
            }
            None if flush => (TraceOp::Flush, 0, 0, rwbs_at, rwbs_at),
            None => return Ok(Line::Skip),
        };
        if op != TraceOp::Flush {
            extent(offset, len, off_at, len_at, Unit::Sectors)?;
        }
        let (major, minor, dev_at) = f.dev;
        let (pid, pid_at) = f.pid;
        let stream = match cx.tenant {
            TenantBy::Device => cx.num((major << 32) | minor, dev_at, || {
                format!("dev{major},{minor}")
            })?,
            TenantBy::Pid => cx.num(pid, pid_at, || format!("pid{pid}"))?,
            _ => 0,
        };
        Ok(Line::Request(Raw {
            time_ns: f.time_ns,
            op,
            offset,
            len,
            stream,
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// fio iolog

/// fio's `write_iolog`/`read_iolog` text, versions 2 and 3.
pub(super) struct FioIolog {
    /// 2 or 3 once the header is read.
    version: Option<u8>,
    /// Version 2 has no timestamps: its `wait` lines add up to the time of what follows.
    wait_ns: u64,
}

const FIO_ACTIONS: &str = "read, write, trim, sync, datasync, wait, add, open or close";

impl FioIolog {
    fn parse(&mut self, line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
        let Some(version) = self.version else {
            let t = trimmed(line, 0, line.len());
            let version = match t.of(line) {
                b"fio version 2 iolog" => 2,
                b"fio version 3 iolog" => 3,
                _ => {
                    // Read on as version 2, the format without timestamps.
                    self.version = Some(2);
                    return Err(Bad::syntax(
                        "header",
                        "'fio version 2 iolog' or 'fio version 3 iolog' as the first line",
                        t,
                    ));
                }
            };
            self.version = Some(version);
            return Ok(Line::Skip);
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
            b"wait" => {
                if version == 3 {
                    return Err(Bad::syntax(
                        "action",
                        "no 'wait' in version 3 (its timestamps replace it)",
                        act_at,
                    ));
                }
                let at = offset.ok_or_else(|| {
                    Bad::syntax("offset", "the microseconds to wait", Span::end_of(line))
                })?;
                let us = uint(at.of(line))
                    .ok_or_else(|| Bad::syntax("offset", "the microseconds to wait", at))?;
                let wait = scaled(us, 1_000, at)?;
                self.wait_ns = self.wait_ns.checked_add(wait).ok_or_else(|| {
                    Bad::value("offset", "waits adding up to less than 2^64 ns", at)
                })?;
                return Ok(Line::Skip);
            }
            b"read" => TraceOp::Read,
            b"write" => TraceOp::Write,
            b"trim" => TraceOp::Trim,
            b"sync" | b"datasync" => TraceOp::Flush,
            _ => return Err(Bad::syntax("action", FIO_ACTIONS, act_at)),
        };
        let off_at = offset
            .ok_or_else(|| Bad::syntax("offset", "an offset in bytes", Span::end_of(line)))?;
        let len_at =
            length.ok_or_else(|| Bad::syntax("length", "a length in bytes", Span::end_of(line)))?;
        let off = uint(off_at.of(line))
            .ok_or_else(|| Bad::syntax("offset", "an offset in bytes", off_at))?;
        let len = uint(len_at.of(line))
            .ok_or_else(|| Bad::syntax("length", "a length in bytes", len_at))?;
        let (offset, len) = if op == TraceOp::Flush {
            (0, 0)
        } else {
            extent(off, len, off_at, len_at, Unit::Bytes)?;
            (off, len)
        };
        let stream = match cx.tenant {
            TenantBy::Device => cx.text(file_at.of(line), file_at)?,
            _ => 0,
        };
        Ok(Line::Request(Raw {
            time_ns: time.unwrap_or(self.wait_ns),
            op,
            offset,
            len,
            stream,
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// MSR Cambridge

/// `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
pub(super) struct Msr {
    /// Scratch for the `host_disk` stream key.
    key: Vec<u8>,
}

impl Msr {
    fn parse(&mut self, line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
        const TS: &str = "Windows FILETIME ticks (an integer)";
        let mut f = Csv::new(line);
        let ts_at = need(&mut f, line, "timestamp", TS)?;
        let Some(ticks) = uint(ts_at.of(line)) else {
            if is_header(line, ts_at, b"Timestamp") {
                return Ok(Line::Skip);
            }
            return Err(Bad::syntax("timestamp", TS, ts_at));
        };
        let host_at = need(&mut f, line, "hostname", "a host name")?;
        if host_at.start == host_at.end {
            return Err(Bad::syntax("hostname", "a host name", host_at));
        }
        let (disk, disk_at) = need_uint(&mut f, line, "disknumber", "a disk number")?;
        let type_at = need(&mut f, line, "type", "Read or Write")?;
        let op = match type_at.of(line) {
            b"Read" => TraceOp::Read,
            b"Write" => TraceOp::Write,
            t if eq_ci(t, b"Read") => TraceOp::Read,
            t if eq_ci(t, b"Write") => TraceOp::Write,
            _ => return Err(Bad::syntax("type", "Read or Write", type_at)),
        };
        let (offset, off_at) = need_uint(&mut f, line, "offset", "an offset in bytes")?;
        let (len, len_at) = need_uint(&mut f, line, "size", "a size in bytes")?;
        need_uint(
            &mut f,
            line,
            "responsetime",
            "a response time in FILETIME ticks",
        )?;
        no_more(&mut f, "7 fields")?;
        let time_ns = scaled(ticks, 100, ts_at)?;
        extent(offset, len, off_at, len_at, Unit::Bytes)?;
        let stream = match cx.tenant {
            TenantBy::Host => cx.text(host_at.of(line), host_at)?,
            TenantBy::Disk => {
                self.key.clear();
                self.key.extend_from_slice(host_at.of(line));
                self.key.push(b'_');
                // Writing to a Vec cannot fail.
                let _ = write!(self.key, "{disk}");
                cx.text(&self.key, disk_at)?
            }
            _ => 0,
        };
        Ok(Line::Request(Raw {
            time_ns,
            op,
            offset,
            len,
            stream,
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// SPC (UMass)

/// `ASU,LBA,Size,Opcode,Timestamp[,optional...]`, LBAs in 512-byte blocks, sizes in bytes, the
/// timestamp in seconds.
fn spc(line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
    let mut f = Csv::new(line);
    let (asu, asu_at) = need_uint(&mut f, line, "asu", "an ASU number")?;
    let (lba, lba_at) = need_uint(&mut f, line, "lba", "a block number")?;
    let (len, len_at) = need_uint(&mut f, line, "size", "a size in bytes")?;
    let op_at = need(&mut f, line, "opcode", "r or w")?;
    let op = match op_at.of(line) {
        b"r" | b"R" => TraceOp::Read,
        b"w" | b"W" => TraceOp::Write,
        _ => return Err(Bad::syntax("opcode", "r or w", op_at)),
    };
    let ts_at = need(&mut f, line, "timestamp", "seconds (s.d)")?;
    let time_ns = seconds_ns(ts_at.of(line))
        .ok_or_else(|| Bad::syntax("timestamp", "seconds (s.d)", ts_at))?;
    let offset = sectors(lba, "lba", lba_at)?;
    extent(offset, len, lba_at, len_at, Unit::Bytes)?;
    let stream = match cx.tenant {
        TenantBy::Asu => cx.num(asu, asu_at, || format!("asu{asu}"))?,
        _ => 0,
    };
    Ok(Line::Request(Raw {
        time_ns,
        op,
        offset,
        len,
        stream,
    }))
}

// ---------------------------------------------------------------------------------------------
// MQSim / DiskSim ASCII

/// `time_ns device start_sector size_sectors type` (type 0 write, 1 read), blank-separated.
fn mqsim(line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
    let mut w = Words::new(line);
    let (time_ns, _) = need_uint(&mut w, line, "time", "an arrival time in ns")?;
    let (dev, dev_at) = need_uint(&mut w, line, "device", "a device number")?;
    let (lba, lba_at) = need_uint(&mut w, line, "sector", "a start sector")?;
    let (n, n_at) = need_uint(&mut w, line, "size", "a size in sectors")?;
    let type_at = need(&mut w, line, "type", "0 (write) or 1 (read)")?;
    let op = match type_at.of(line) {
        b"0" => TraceOp::Write,
        b"1" => TraceOp::Read,
        _ => return Err(Bad::syntax("type", "0 (write) or 1 (read)", type_at)),
    };
    no_more(&mut w, "5 fields")?;
    let offset = sectors(lba, "sector", lba_at)?;
    let len = sectors(n, "size", n_at)?;
    extent(offset, len, lba_at, n_at, Unit::Sectors)?;
    let stream = match cx.tenant {
        TenantBy::Device => cx.num(dev, dev_at, || format!("dev{dev}"))?,
        _ => 0,
    };
    Ok(Line::Request(Raw {
        time_ns,
        op,
        offset,
        len,
        stream,
    }))
}

// ---------------------------------------------------------------------------------------------
// Alibaba block traces 2020

/// `device_id,opcode,offset,length,timestamp`: bytes, and microseconds.
fn alibaba(line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
    let mut f = Csv::new(line);
    let dev_at = need(&mut f, line, "device_id", "a device id")?;
    let Some(dev) = uint(dev_at.of(line)) else {
        if is_header(line, dev_at, b"device_id") {
            return Ok(Line::Skip);
        }
        return Err(Bad::syntax("device_id", "a device id", dev_at));
    };
    let op_at = need(&mut f, line, "opcode", "R or W")?;
    let op = match op_at.of(line) {
        b"R" => TraceOp::Read,
        b"W" => TraceOp::Write,
        _ => return Err(Bad::syntax("opcode", "R or W", op_at)),
    };
    let (offset, off_at) = need_uint(&mut f, line, "offset", "an offset in bytes")?;
    let (len, len_at) = need_uint(&mut f, line, "length", "a length in bytes")?;
    let (us, ts_at) = need_uint(&mut f, line, "timestamp", "microseconds")?;
    no_more(&mut f, "5 fields")?;
    let time_ns = scaled(us, 1_000, ts_at)?;
    extent(offset, len, off_at, len_at, Unit::Bytes)?;
    let stream = match cx.tenant {
        TenantBy::Device => cx.num(dev, dev_at, || format!("dev{dev}"))?,
        _ => 0,
    };
    Ok(Line::Request(Raw {
        time_ns,
        op,
        offset,
        len,
        stream,
    }))
}

// ---------------------------------------------------------------------------------------------
// Tencent CBS

/// `Timestamp,Offset,Size,IOType,VolumeID`: seconds, sectors, type 0 read / 1 write.
fn tencent(line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
    const TS: &str = "Unix seconds";
    let mut f = Csv::new(line);
    let ts_at = need(&mut f, line, "timestamp", TS)?;
    let Some(time_ns) = seconds_ns(ts_at.of(line)) else {
        if is_header(line, ts_at, b"Timestamp") {
            return Ok(Line::Skip);
        }
        return Err(Bad::syntax("timestamp", TS, ts_at));
    };
    let (lba, off_at) = need_uint(&mut f, line, "offset", "an offset in sectors")?;
    let (n, len_at) = need_uint(&mut f, line, "size", "a size in sectors")?;
    let type_at = need(&mut f, line, "iotype", "0 (read) or 1 (write)")?;
    let op = match type_at.of(line) {
        b"0" => TraceOp::Read,
        b"1" => TraceOp::Write,
        _ => return Err(Bad::syntax("iotype", "0 (read) or 1 (write)", type_at)),
    };
    let (vol, vol_at) = need_uint(&mut f, line, "volumeid", "a volume id")?;
    no_more(&mut f, "5 fields")?;
    let offset = sectors(lba, "offset", off_at)?;
    let len = sectors(n, "size", len_at)?;
    extent(offset, len, off_at, len_at, Unit::Sectors)?;
    let stream = match cx.tenant {
        TenantBy::Volume => cx.num(vol, vol_at, || format!("vol{vol}"))?,
        _ => 0,
    };
    Ok(Line::Request(Raw {
        time_ns,
        op,
        offset,
        len,
        stream,
    }))
}

// ---------------------------------------------------------------------------------------------
// SYSTOR '17

/// `Timestamp,Response,IOType,LUN,Offset,Size`: seconds with nine decimals, bytes. A blank
/// IOType marks a request whose response was not captured; it is skipped.
fn systor(line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
    const TS: &str = "Unix seconds with decimals";
    let mut f = Csv::new(line);
    let ts_at = need(&mut f, line, "timestamp", TS)?;
    let Some(time_ns) = seconds_ns(ts_at.of(line)) else {
        if is_header(line, ts_at, b"Timestamp") {
            return Ok(Line::Skip);
        }
        return Err(Bad::syntax("timestamp", TS, ts_at));
    };
    let resp_at = need(&mut f, line, "response", "a response time in seconds")?;
    if seconds_ns(resp_at.of(line)).is_none() {
        return Err(Bad::syntax(
            "response",
            "a response time in seconds",
            resp_at,
        ));
    }
    let type_at = need(&mut f, line, "iotype", "R, W or blank")?;
    let op = match type_at.of(line) {
        b"R" => Some(TraceOp::Read),
        b"W" => Some(TraceOp::Write),
        b"" => None,
        _ => return Err(Bad::syntax("iotype", "R, W or blank", type_at)),
    };
    let (lun, lun_at) = need_uint(&mut f, line, "lun", "a LUN number")?;
    let (offset, off_at) = need_uint(&mut f, line, "offset", "an offset in bytes")?;
    let (len, len_at) = need_uint(&mut f, line, "size", "a size in bytes")?;
    no_more(&mut f, "6 fields")?;
    let Some(op) = op else {
        return Ok(Line::Skip);
    };
    extent(offset, len, off_at, len_at, Unit::Bytes)?;
    let stream = match cx.tenant {
        TenantBy::Device => cx.num(lun, lun_at, || format!("lun{lun}"))?,
        _ => 0,
    };
    Ok(Line::Request(Raw {
        time_ns,
        op,
        offset,
        len,
        stream,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a parse came to, in a comparable form.
    fn outcome(r: Result<Line, Bad>) -> String {
        match r {
            Ok(Line::Request(raw)) => format!("{raw:?}"),
            Ok(Line::Skip) => "skip".into(),
            Ok(Line::Other) => "other".into(),
            Err(bad) => format!("{} {:?} {:?} {:?}", bad.field, bad.expected, bad.kind, match bad.found {
                Found::Span(s) => format!("{s:?}"),
                Found::Text(t) => t,
            }),
        }
    }

    /// The one-pass reader of common blkparse lines says what the field-by-field reader says,
    /// on real lines and on lines with one byte changed, dropped or doubled anywhere.
    #[test]
    fn blkparse_fast_path_agrees_with_the_general_parser() {
        let lines = [
            "259,0    1        1     0.000000000  8160  D   R 0 + 8 [fio]",
            "  7,0    1        2     0.000021844  8160  D  WS 126480 + 256 [fio]",
            "8,16 0 3 12.5 1 D FWFS 8 + 8 [kworker/0:1H]",
            "8,16 0 3 12.500000001 1 D FN 0 + 0 [jbd2]",
            "8,16 0 3 1.000000000 1 D N 0 + 0",
            "8,16 0 3 1.000000000 1 D DS 2048 + 2097152 [fstrim]",
            "8,16 0 3 1.000000000 1 D DS 2048 + 2097153 [fstrim]",
            "8,16 0 3 1.000000000 1 D ZAS 64 + 8 [zone]",
            "8,16 0 3 1.000000000 1 C R 64 + 8 [0]",
            "8,16 0 3 1.000000000 1 D R 36028797018963968 + 8 [x]",
            "8,16 0 3 1.000000000 1 D R 0 + 8",
            "8,16 0 3 1.0000000001 1 D R 0 + 8",
            "8,16 0 3 99999999999999999999.1 1 D R 0 + 8",
        ];
        let mut x: u64 = 0x0123_4567_89ab_cdef;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let bytes = b" \t,.+0189DRWFNZSabc[-";
        let mut fast_taken = 0;
        for tenant in [TenantBy::None, TenantBy::Device, TenantBy::Pid] {
            for base in lines {
                for round in 0..400 {
                    let mut line = base.as_bytes().to_vec();
                    if round > 0 {
                        let at = (rand() % line.len() as u64) as usize;
                        let b = bytes[(rand() % bytes.len() as u64) as usize];
                        match rand() % 3 {
                            0 => line[at] = b,
                            1 => {
                                line.remove(at);
                            }
                            _ => line.insert(at, line[at]),
                        }
                    }
                    let p = Blkparse {
                        event: b"D",
                        in_summary: false,
                    };
                    let mut general = Blkparse {
                        event: b"D",
                        in_summary: false,
                    };
                    let expected = outcome(general.general(&line, &mut Cx::new(tenant)));
                    let got = match p.fast(&line) {
                        Some(Some(fields)) => outcome(p.request(fields, &mut Cx::new(tenant))),
                        Some(None) => "skip".into(),
                        None => continue,
                    };
                    fast_taken += 1;
                    assert_eq!(got, expected, "{:?}", String::from_utf8_lossy(&line));
                }
            }
        }
        // The fast path must take most lines, or it is not one.
        assert!(fast_taken > 3 * 13 * 400 / 3, "fast path took {fast_taken} lines");
    }
}
