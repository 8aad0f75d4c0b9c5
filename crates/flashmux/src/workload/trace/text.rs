//! The line parsers of the text formats, one per format, and what they share: the outcome of a
//! line, the checks every request passes, and the stream table.
//!
//! A parser sees one line at a time (without its line end; never blank, never a `#` comment) and
//! says what it is: a request, a valid line that carries no request (a header, another blktrace
//! event, an fio file action), text that is not part of the trace proper (blkparse's summary), or
//! a bad line with the field at fault. Parsers keep only O(1) state between lines.
//!
//! This file holds what the parsers share and the dispatch over them ([`TextParser`]); the
//! parsers live by format family: blkparse's text (text/blkparse.rs), fio's iolog
//! (text/fio_iolog.rs), and the column formats of published traces: MSR, SPC, MQSim, Alibaba,
//! Tencent, SYSTOR (text/columns.rs). blktrace's binary records are read in blktrace.rs.

mod blkparse;
mod columns;
mod fio_iolog;

use std::collections::BTreeMap;

use super::lex::{eq_ci, uint, Span};
use super::{BlkEvent, Format, TenantBy, TraceOp};
use blkparse::Blkparse;
use columns::{alibaba, mqsim, spc, systor, tencent, Msr};
use fio_iolog::FioIolog;

/// Reads and writes larger than this are taken for corrupt lines: no block device takes a
/// single read or write of more than 1 GiB.
pub(super) const MAX_LEN: u64 = 1 << 30;
/// A trim (discard) covers whole regions: `mkfs` sends discards of 2 GiB (NBD's limit is 4 GiB,
/// an NVMe DSM range 2^32 blocks); larger than this is taken for a corrupt line.
pub(super) const MAX_TRIM_LEN: u64 = 1 << 40;

/// The largest request of `op` a trace may hold ([`MAX_LEN`], [`MAX_TRIM_LEN`] for trims).
pub(super) fn max_len(op: TraceOp) -> u64 {
    match op {
        TraceOp::Trim => MAX_TRIM_LEN,
        _ => MAX_LEN,
    }
}

/// At most this many distinct streams; a trace with more is splitting on a field that does not
/// name tenants, and the stream table would otherwise grow without bound.
pub(super) const MAX_STREAMS: usize = 1 << 16;
/// At most this many distinct placements (`place_by` values): placement k is FDP placement
/// identifier k or stream identifier k + 1, and both are 16-bit, stream identifiers 1 to 65535.
pub(super) const MAX_PLACES: usize = (1 << 16) - 1;

const SECTOR: u64 = 512;

/// One request as read, its time absolute in the format's own origin (normalised by the reader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Raw {
    pub time_ns: u64,
    pub op: TraceOp,
    pub offset: u64,
    pub len: u64,
    pub stream: u32,
    pub place: u32,
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

/// Dense stream ids, in order of first appearance, for the values of the `--tenant-by` field
/// (and placement indices for those of `place_by`). Lookups go through ordered maps (no
/// hashing), and the last key is cached because consecutive requests usually come from the same
/// stream.
#[derive(Debug)]
pub(super) struct Streams {
    nums: BTreeMap<u64, u32>,
    strs: BTreeMap<Box<[u8]>, u32>,
    names: Vec<String>,
    last_num: Option<(u64, u32)>,
    last_str: Option<u32>,
    /// At most this many ids.
    limit: usize,
}

impl Streams {
    /// An empty table of at most `limit` ids.
    pub fn new(limit: usize) -> Streams {
        Streams {
            nums: BTreeMap::new(),
            strs: BTreeMap::new(),
            names: Vec::new(),
            last_num: None,
            last_str: None,
            limit,
        }
    }

    /// The id of a numeric key, naming a new stream with `name()`; `None` past the limit.
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

    /// The id of a key that is its own name; `None` past the limit.
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
        if self.names.len() >= self.limit {
            return None;
        }
        self.names.push(name);
        Some((self.names.len() - 1) as u32)
    }

    pub fn name(&self, id: u32) -> Option<&str> {
        self.names.get(id as usize).map(String::as_str)
    }
}

/// Which table a field's value is looked up in: the streams of `--tenant-by`, or the placements
/// of `place_by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Stream,
    Place,
}

impl Side {
    /// The field and the expectation of a bad line whose value would be one too many.
    pub fn too_many(self) -> (&'static str, &'static str) {
        match self {
            Side::Stream => ("stream", "at most 65536 distinct streams (choose another --tenant-by)"),
            Side::Place => ("placement", "at most 65535 distinct placements (choose another place_by)"),
        }
    }
}

/// What every parser needs besides its line: which fields split streams and place writes, and
/// their tables.
pub(super) struct Cx {
    pub tenant: TenantBy,
    pub streams: Streams,
    /// The field whose values are placements (`place_by`).
    pub place: TenantBy,
    pub places: Streams,
}

impl Cx {
    pub fn new(tenant: TenantBy, place: TenantBy) -> Self {
        Cx {
            tenant,
            streams: Streams::new(MAX_STREAMS),
            place,
            places: Streams::new(MAX_PLACES),
        }
    }

    /// A request's stream id and placement index: `id(cx, side, field)` looks the line's value
    /// of `field` up in `side`'s table (with [`Cx::num`] or [`Cx::text`]), or is 0 for a field
    /// the format does not split by (`none` among them).
    #[inline(always)]
    pub fn ids(
        &mut self,
        mut id: impl FnMut(&mut Cx, Side, TenantBy) -> Result<u32, Bad>,
    ) -> Result<(u32, u32), Bad> {
        let (tenant, place) = (self.tenant, self.place);
        let stream = id(self, Side::Stream, tenant)?;
        let place = id(self, Side::Place, place)?;
        Ok((stream, place))
    }

    /// `side`'s table.
    pub fn table(&mut self, side: Side) -> &mut Streams {
        match side {
            Side::Stream => &mut self.streams,
            Side::Place => &mut self.places,
        }
    }

    fn num(&mut self, side: Side, key: u64, at: Span, name: impl FnOnce() -> String) -> Result<u32, Bad> {
        self.table(side).by_num(key, name).ok_or_else(|| too_many(side, at))
    }

    fn text(&mut self, side: Side, key: &[u8], at: Span) -> Result<u32, Bad> {
        self.table(side).by_str(key).ok_or_else(|| too_many(side, at))
    }
}

fn too_many(side: Side, at: Span) -> Bad {
    let (field, expected) = side.too_many();
    Bad::value(field, expected, at)
}

/// The unit a format gives sizes and offsets in, for the wording of value errors.
#[derive(Clone, Copy)]
enum Unit {
    Bytes,
    Sectors,
}

/// Checks a read's or write's extent (in bytes) against what a real request can be.
#[inline]
fn extent(offset: u64, len: u64, off: Span, size: Span, unit: Unit) -> Result<(), Bad> {
    extent_of(TraceOp::Read, offset, len, off, size, unit)
}

/// Checks the extent (in bytes) of a request of `op` against what a real one can be.
#[inline]
fn extent_of(op: TraceOp, offset: u64, len: u64, off: Span, size: Span, unit: Unit) -> Result<(), Bad> {
    if len == 0 {
        return Err(Bad::value("size", "a size above 0", size));
    }
    if len > max_len(op) {
        return Err(Bad::value(
            "size",
            match (op, unit) {
                (TraceOp::Trim, Unit::Bytes) => "at most 1 TiB (1099511627776 bytes) for a trim",
                (TraceOp::Trim, Unit::Sectors) => "at most 1 TiB (2147483648 sectors) for a trim",
                (_, Unit::Bytes) => "at most 1 GiB (1073741824 bytes)",
                (_, Unit::Sectors) => "at most 1 GiB (2097152 sectors)",
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
            Format::Blkparse => TextParser::Blkparse(Blkparse::new(event.letter().as_bytes())),
            Format::FioIolog => TextParser::FioIolog(FioIolog::new()),
            Format::Msr => TextParser::Msr(Msr::new()),
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
