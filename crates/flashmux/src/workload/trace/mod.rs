//! Block traces: streaming readers for the real-world trace formats, writers for three of them,
//! and a one-pass summary.
//!
//! A [`TraceReader`] turns a trace into [`TraceRecord`]s (time, operation, byte offset, byte
//! length, stream, placement) in constant memory: text is parsed line by line from the reader's own buffer,
//! binary blktrace record by record, and gzip-compressed input is decompressed as it is read. The
//! format is told from the content (see `detect.rs`) unless it is named. Times are normalised so
//! that the first request is at 0 ns; units are converted with integer arithmetic only.
//!
//! Each layout was checked against the format's own description:
//! - blktrace: `include/uapi/linux/blktrace_api.h` (struct `blk_io_trace`, `BLK_TC_*`,
//!   `__BLK_TA_*`) and blkparse's `fill_rwbs`;
//! - blkparse: blktrace's `blkparse_fmt.c` (`process_default`: the header
//!   `"%3d,%-3d %2d %8d %5d.%09lu %5u %2s %3s "` and the per-action tails);
//! - fio iolog: fio's HOWTO ("Trace file format" v2 and v3) and `iolog.c` (v3 timestamps are
//!   written with `utime_since_now`, i.e. microseconds; the HOWTO does not name the unit);
//! - MSR Cambridge: the SNIA IOTTA README of the MSR Cambridge traces;
//! - SPC: the SPC Trace File Format Specification, revision 1.0.1 (the UMass traces);
//! - MQSim: MQSim's README and `ASCII_Trace_Definition.h` (times in the workload's
//!   `Time_Unit`, nanoseconds by default; sectors of 512 bytes; 0 write, 1 read);
//! - Alibaba: the README of `alibaba/block-traces` (io_traces.csv);
//! - Tencent CBS: the SNIA IOTTA README of the Tencent cloud block storage traces;
//! - SYSTOR '17: the SNIA IOTTA README of the SYSTOR '17 traces.
//!
//! The Microsoft production-server traces exported from xperf are not read: no specification of
//! `xperf -a dumper`'s disk-event columns was found to check a reader against, and the columns
//! differ between xperf versions.
//!
//! `docs/TRACES.md` describes every format for users.

mod blktrace;
pub mod compare;
mod detect;
pub mod info;
mod input;
mod lex;
mod text;
pub mod writer;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;

pub use info::TraceInfo;
pub use writer::write_trace;

use blktrace::Blktrace;
use input::{Input, TextSource};
use lex::shown;
use text::{Bad, Cx, Found, TextParser};

/// A trace format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// blktrace's binary per-CPU files (`<dev>.blktrace.<cpu>`).
    Blktrace,
    /// blkparse's default text output.
    Blkparse,
    /// fio's `write_iolog` text, version 2 or 3.
    FioIolog,
    /// MSR Cambridge (SNIA): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
    Msr,
    /// SPC / UMass: `ASU,LBA,Size,Opcode,Timestamp[,...]`.
    Spc,
    /// MQSim / DiskSim ASCII: `time device sector sectors type`.
    Mqsim,
    /// Alibaba block traces 2020: `device_id,opcode,offset,length,timestamp`.
    Alibaba,
    /// Tencent CBS: `Timestamp,Offset,Size,IOType,VolumeID`.
    Tencent,
    /// SYSTOR '17: `Timestamp,Response,IOType,LUN,Offset,Size`.
    Systor,
}

impl Format {
    /// Every format, in the order auto-detection tries them.
    pub const ALL: &'static [Format] = &[
        Format::Blktrace,
        Format::Blkparse,
        Format::FioIolog,
        Format::Msr,
        Format::Spc,
        Format::Mqsim,
        Format::Alibaba,
        Format::Tencent,
        Format::Systor,
    ];

    /// The formats [`write_trace`] writes.
    pub const WRITABLE: &'static [Format] = &[Format::FioIolog, Format::Mqsim, Format::Blkparse];

    /// The format's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Blktrace => "blktrace",
            Format::Blkparse => "blkparse",
            Format::FioIolog => "fio-iolog",
            Format::Msr => "msr",
            Format::Spc => "spc",
            Format::Mqsim => "mqsim",
            Format::Alibaba => "alibaba",
            Format::Tencent => "tencent",
            Format::Systor => "systor",
        }
    }

    /// The format of a name from [`Format::name`].
    pub fn from_name(s: &str) -> Option<Format> {
        Format::ALL.iter().copied().find(|f| f.name() == s)
    }

    /// The fields a trace of this format can be split into streams (or its writes placed) by.
    pub fn fields(self) -> &'static [TenantBy] {
        use TenantBy::*;
        match self {
            Format::Blktrace | Format::Blkparse => &[None, Device, Pid],
            Format::FioIolog => &[None, Device],
            Format::Msr => &[None, Host, Disk],
            Format::Spc => &[None, Asu],
            Format::Mqsim | Format::Alibaba | Format::Systor => &[None, Device],
            Format::Tencent => &[None, Volume],
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TraceOp {
    Read,
    Write,
    Trim,
    /// A cache flush; its offset and length are 0.
    Flush,
}

impl TraceOp {
    pub const ALL: [TraceOp; 4] = [TraceOp::Read, TraceOp::Write, TraceOp::Trim, TraceOp::Flush];

    pub fn name(self) -> &'static str {
        match self {
            TraceOp::Read => "read",
            TraceOp::Write => "write",
            TraceOp::Trim => "trim",
            TraceOp::Flush => "flush",
        }
    }
}

impl From<TraceOp> for crate::device::IoOp {
    fn from(op: TraceOp) -> Self {
        match op {
            TraceOp::Read => Self::Read,
            TraceOp::Write => Self::Write,
            TraceOp::Trim => Self::Trim,
            TraceOp::Flush => Self::Flush,
        }
    }
}

impl TraceOp {
    /// The trace operation of a device command: a Zone Append is a write (at the zone's
    /// start); a Zone Management Send has none, the trace formats having no zone commands.
    pub fn of(op: crate::device::IoOp) -> Option<TraceOp> {
        use crate::device::IoOp;
        Some(match op {
            IoOp::Read => TraceOp::Read,
            IoOp::Write | IoOp::ZoneAppend => TraceOp::Write,
            IoOp::Trim => TraceOp::Trim,
            IoOp::Flush => TraceOp::Flush,
            IoOp::ZoneReset | IoOp::ZoneFinish | IoOp::ZoneOpen | IoOp::ZoneClose => return None,
        })
    }
}

/// Which field of a trace splits it into streams (tenants), or places its writes
/// ([`ReadOptions::place_by`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum TenantBy {
    /// One stream, named `trace`.
    #[default]
    None,
    /// The device: blktrace/blkparse `major,minor` (`dev8,0`), MQSim's and Alibaba's device
    /// number (`dev4`), SYSTOR's LUN (`lun3`), fio's file name (as written).
    Device,
    /// MSR's host name (`hm`).
    Host,
    /// MSR's host and disk number (`hm_0`).
    Disk,
    /// Tencent's volume id (`vol1283`).
    Volume,
    /// SPC's application specific unit (`asu3`).
    Asu,
    /// blktrace/blkparse's process id (`pid8160`).
    Pid,
}

impl TenantBy {
    pub const ALL: [TenantBy; 7] = [
        TenantBy::None,
        TenantBy::Device,
        TenantBy::Host,
        TenantBy::Disk,
        TenantBy::Volume,
        TenantBy::Asu,
        TenantBy::Pid,
    ];

    /// The field's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            TenantBy::None => "none",
            TenantBy::Device => "device",
            TenantBy::Host => "host",
            TenantBy::Disk => "disk",
            TenantBy::Volume => "volume",
            TenantBy::Asu => "asu",
            TenantBy::Pid => "pid",
        }
    }

    pub fn from_name(s: &str) -> Option<TenantBy> {
        TenantBy::ALL.iter().copied().find(|t| t.name() == s)
    }
}

/// Which blktrace event of a request's life is read as the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BlkEvent {
    /// `D`: issued to the device driver — what the device sees.
    #[default]
    Issue,
    /// `C`: completed.
    Complete,
    /// `Q`: queued in the block layer — what the file system or application asked for.
    Queue,
}

impl BlkEvent {
    /// blkparse's action letter.
    pub fn letter(self) -> &'static str {
        match self {
            BlkEvent::Issue => "D",
            BlkEvent::Complete => "C",
            BlkEvent::Queue => "Q",
        }
    }

    /// blktrace's action code (`__BLK_TA_*`).
    fn action(self) -> u32 {
        match self {
            BlkEvent::Queue => 1,
            BlkEvent::Issue => 7,
            BlkEvent::Complete => 8,
        }
    }

    /// The event of a letter (`D`, `C`, `Q`) or name (`issue`, `complete`, `queue`).
    pub fn from_name(s: &str) -> Option<BlkEvent> {
        match s {
            "D" | "issue" => Some(BlkEvent::Issue),
            "C" | "complete" => Some(BlkEvent::Complete),
            "Q" | "queue" => Some(BlkEvent::Queue),
            _ => None,
        }
    }
}

/// One request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRecord {
    /// Since the first request of the trace.
    pub time_ns: u64,
    pub op: TraceOp,
    /// In bytes.
    pub offset: u64,
    /// In bytes; 0 only for flushes.
    pub len: u64,
    /// Dense stream id, in order of first appearance; 0 with [`TenantBy::None`].
    pub stream: u32,
    /// Dense placement index: the value of the [`ReadOptions::place_by`] field, numbered 0, 1,
    /// 2, … in order of first appearance; 0 with [`TenantBy::None`].
    pub place: u32,
}

/// How to read a trace.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// `None`: tell the format from the content.
    pub format: Option<Format>,
    pub tenant_by: TenantBy,
    /// The field whose values are the requests' placements ([`TraceRecord::place`]): any of
    /// [`Format::fields`], independent of `tenant_by`. At most 65,535 distinct values; requests
    /// of further ones are bad lines.
    pub place_by: TenantBy,
    /// Stop at the first bad line instead of skipping it.
    pub strict: bool,
    /// blktrace and blkparse: which event is the request.
    pub blktrace_event: BlkEvent,
}

/// One skipped line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based line number; for blktrace, the byte offset of the record.
    pub line: u64,
    /// What field was wrong, what was expected and what was found.
    pub reason: String,
}

/// Lines skipped as bad: how many, and the first few.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BadLines {
    pub count: u64,
    /// The first [`BadLines::KEPT`].
    pub first: Vec<BadLine>,
}

impl BadLines {
    /// How many bad lines are kept with their reason.
    pub const KEPT: usize = 5;
}

/// A trace that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot read trace '{path}': {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A bad line in strict mode.
    #[error("{file}:{line}: field '{field}': expected {expected}, found '{found}'")]
    Bad {
        file: String,
        /// 1-based line number; for blktrace, the byte offset of the record.
        line: u64,
        field: &'static str,
        expected: &'static str,
        found: String,
    },
    /// A binary record cut short by the end of its file.
    #[error("{file}: the record at byte {offset} is cut short by the end of the file")]
    Truncated { file: String, offset: u64 },
    #[error("{file}: cannot tell the trace format; tried {tried}; name it with --format")]
    UnknownFormat { file: String, tried: String },
    #[error("{file}: no valid request in the trace")]
    Empty { file: String },
    /// A `--tenant-by` field the format does not have.
    #[error("a {format} trace has no {field} field to split streams by; it has: {available}")]
    NoSuchField {
        format: &'static str,
        field: &'static str,
        available: String,
    },
    /// A `place_by` field the format does not have.
    #[error("a {format} trace has no {field} field to place writes by; it has: {available}")]
    NoPlaceField {
        format: &'static str,
        field: &'static str,
        available: String,
    },
    /// Several files for a format that is one file.
    #[error("{count} trace files given, but only blktrace is read from several files (one per CPU); a {format} trace is one file")]
    MultiplePaths { format: &'static str, count: usize },
    /// A trace this reader knows it cannot read.
    #[error("{file}: {what}")]
    Unsupported { file: String, what: String },
    /// A long stretch of input without a line the format's parser could use: not a trace of
    /// this format (a device such as `/dev/zero`, binary data), so reading stops.
    #[error("{file}: no usable {format} line in the {mib} MiB read from line {from_line} on (only bad lines, or no line end at all): not a {format} trace, or a corrupt one; reading stopped there")]
    Unusable { file: String, format: &'static str, mib: u64, from_line: u64 },
}

/// Bad-line bookkeeping: counted and kept (the first few), or an error in strict mode.
struct Diag {
    strict: bool,
    bad: BadLines,
}

impl Diag {
    /// Reports a bad line of `file`; `text` is the line (for [`Found::Span`]), `prefix` a context
    /// put before the reason.
    fn report(
        &mut self,
        file: &str,
        line: u64,
        bad: &Bad,
        text: &[u8],
        prefix: &str,
    ) -> Result<(), TraceError> {
        let found = || match &bad.found {
            Found::Span(s) => shown(s.of(text)),
            Found::Text(t) => t.clone(),
        };
        if self.strict {
            return Err(TraceError::Bad {
                file: file.to_string(),
                line,
                field: bad.field,
                expected: bad.expected,
                found: found(),
            });
        }
        self.bad.count += 1;
        if self.bad.first.len() < BadLines::KEPT {
            let reason = format!(
                "field '{}': expected {}, found '{}'",
                bad.field,
                bad.expected,
                found()
            );
            self.bad.first.push(BadLine {
                line,
                reason: if prefix.is_empty() {
                    reason
                } else {
                    format!("{prefix}: {reason}")
                },
            });
        }
        Ok(())
    }
}

enum Source {
    Text(TextSource),
    Blktrace(Blktrace),
}

/// A trace being read, one request at a time, in constant memory.
pub struct TraceReader {
    format: Format,
    name: String,
    /// The files read (none for a trace in memory).
    paths: Vec<PathBuf>,
    source: Source,
    cx: Cx,
    diag: Diag,
    /// The first request, read when opening to tell an empty trace at once.
    peeked: Option<TraceRecord>,
    /// Raw time of the first request and of the previous one.
    first_raw: Option<u64>,
    prev_raw: u64,
    records: u64,
    out_of_order: u64,
    /// After an error, nothing more is read.
    failed: bool,
}

impl TraceReader {
    /// Opens a trace. Several paths are only for blktrace's per-CPU files; given one such file
    /// (`<dev>.blktrace.<cpu>`, optionally `.gz`), its siblings are found and read with it.
    pub fn open(paths: &[PathBuf], opts: &ReadOptions) -> Result<TraceReader, TraceError> {
        let Some(first) = paths.first() else {
            return Err(TraceError::Unsupported {
                file: String::new(),
                what: "no trace file given".into(),
            });
        };
        let name = first.display().to_string();
        let (head, whole, input) = input::head(input::open(first)?, &name)?;
        let format = resolve(&name, &head, whole, opts)?;
        let mut inputs = vec![(name, input)];
        let mut files = vec![first.clone()];
        if format == Format::Blktrace {
            let more: Vec<PathBuf> = if paths.len() == 1 {
                let all = input::blktrace_siblings(first);
                if all.len() > 1 {
                    // Reopened in CPU order, so the order does not depend on which one was named.
                    inputs.clear();
                    files.clear();
                    all
                } else {
                    Vec::new()
                }
            } else {
                paths[1..].to_vec()
            };
            for p in more {
                let input = input::open(&p)?;
                inputs.push((p.display().to_string(), input));
                files.push(p);
            }
        } else if paths.len() > 1 {
            return Err(TraceError::MultiplePaths {
                format: format.name(),
                count: paths.len(),
            });
        }
        let mut reader = Self::assemble(format, inputs, opts)?;
        reader.paths = files;
        Ok(reader)
    }

    /// Reads a trace held in memory; `name` stands for its file in messages.
    pub fn from_bytes(
        name: &str,
        data: Vec<u8>,
        opts: &ReadOptions,
    ) -> Result<TraceReader, TraceError> {
        let (head, whole, input) = input::head(input::from_bytes(data), name)?;
        let format = resolve(name, &head, whole, opts)?;
        Self::assemble(format, vec![(name.to_string(), input)], opts)
    }

    fn assemble(
        format: Format,
        mut inputs: Vec<(String, Input)>,
        opts: &ReadOptions,
    ) -> Result<TraceReader, TraceError> {
        let name = inputs.first().map(|(n, _)| n.clone()).unwrap_or_default();
        let source = match TextParser::new(format, opts.blktrace_event) {
            Some(parser) => {
                let Some((n, input)) = inputs.pop() else {
                    return Err(TraceError::Empty { file: name });
                };
                Source::Text(TextSource::new(n, format, input, parser))
            }
            None => Source::Blktrace(Blktrace::new(inputs, opts.blktrace_event)),
        };
        let mut reader = TraceReader {
            format,
            name,
            paths: Vec::new(),
            source,
            cx: Cx::new(opts.tenant_by, opts.place_by),
            diag: Diag {
                strict: opts.strict,
                bad: BadLines::default(),
            },
            peeked: None,
            first_raw: None,
            prev_raw: 0,
            records: 0,
            out_of_order: 0,
            failed: false,
        };
        reader.peeked = reader.pull()?;
        if reader.peeked.is_none() {
            return Err(TraceError::Empty {
                file: reader.name.clone(),
            });
        }
        Ok(reader)
    }

    /// The files being read: the one named, or blktrace's per-CPU files (its siblings found).
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// The trace's format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The next request; `None` at the end of the trace.
    pub fn next_record(&mut self) -> Result<Option<TraceRecord>, TraceError> {
        if let Some(r) = self.peeked.take() {
            return Ok(Some(r));
        }
        if self.failed {
            return Ok(None);
        }
        let r = self.pull();
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn pull(&mut self) -> Result<Option<TraceRecord>, TraceError> {
        let raw = match &mut self.source {
            Source::Text(t) => t.next(&mut self.cx, &mut self.diag)?,
            Source::Blktrace(b) => b.next(&mut self.cx, &mut self.diag)?,
        };
        let Some(raw) = raw else {
            return Ok(None);
        };
        let first = *self.first_raw.get_or_insert(raw.time_ns);
        if raw.time_ns < self.prev_raw || raw.time_ns < first {
            self.out_of_order += 1;
        }
        self.prev_raw = raw.time_ns;
        self.records += 1;
        Ok(Some(TraceRecord {
            time_ns: raw.time_ns.saturating_sub(first),
            op: raw.op,
            offset: raw.offset,
            len: raw.len,
            stream: raw.stream,
            place: raw.place,
        }))
    }

    /// A stream's name: the value of the `--tenant-by` field (`dev8,0`, `hm_0`, `asu3`,
    /// `vol1283`, `pid8160`, …), or `trace` with [`TenantBy::None`].
    pub fn stream_name(&self, stream: u32) -> String {
        if self.cx.tenant == TenantBy::None {
            return "trace".into();
        }
        match self.cx.streams.name(stream) {
            Some(n) => n.to_string(),
            None => format!("stream{stream}"),
        }
    }

    /// A placement's value of the `place_by` field (`hm_0`, `dev8,0`, …); `None` for an index
    /// not (yet) seen, and for every index with [`TenantBy::None`].
    pub fn place_name(&self, place: u32) -> Option<&str> {
        self.cx.places.name(place)
    }

    /// Lines skipped as bad so far.
    pub fn bad_lines(&self) -> &BadLines {
        &self.diag.bad
    }

    /// Requests returned so far (and the one read ahead when opening).
    pub fn records_read(&self) -> u64 {
        self.records
    }

    /// Lines read so far, all kinds; for blktrace, binary records.
    pub fn lines_read(&self) -> u64 {
        match &self.source {
            Source::Text(t) => t.lines,
            Source::Blktrace(b) => b.records(),
        }
    }

    /// Requests whose time is earlier than the previous request's (or than the first's).
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }
}

impl Iterator for TraceReader {
    type Item = Result<TraceRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

impl fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceReader")
            .field("format", &self.format)
            .field("name", &self.name)
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}

/// The format to read `head` as: the named one, or the detected one; and a check that the
/// `--tenant-by` and `place_by` fields exist in it.
fn resolve(name: &str, head: &[u8], whole: bool, opts: &ReadOptions) -> Result<Format, TraceError> {
    let format = match opts.format {
        Some(f) => f,
        None => detect::detect(head, whole).map_err(|failure| match failure {
            detect::Failure::Empty => TraceError::Empty {
                file: name.to_string(),
            },
            detect::Failure::Unknown(tried) => TraceError::UnknownFormat {
                file: name.to_string(),
                tried,
            },
            detect::Failure::Unsupported(what) => TraceError::Unsupported {
                file: name.to_string(),
                what,
            },
        })?,
    };
    let available = || {
        format
            .fields()
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !format.fields().contains(&opts.tenant_by) {
        return Err(TraceError::NoSuchField {
            format: format.name(),
            field: opts.tenant_by.name(),
            available: available(),
        });
    }
    if !format.fields().contains(&opts.place_by) {
        return Err(TraceError::NoPlaceField {
            format: format.name(),
            field: opts.place_by.name(),
            available: available(),
        });
    }
    Ok(format)
}
