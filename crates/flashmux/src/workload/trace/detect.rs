//! Telling a trace's format from its content.
//!
//! 1. blktrace is binary: its first four bytes are the magic `0x656174vv` in either byte order
//!    (`(magic & 0xffffff00) == 0x65617400`, the test blkparse makes).
//! 2. Otherwise the first [`SAMPLE`] lines that are neither blank nor `#` comments are the sample.
//!    A first line that is a format's header decides at once: fio's `fio version 2 iolog` /
//!    `fio version 3 iolog`, SYSTOR's `Timestamp,Response,IOType,LUN,Offset,Size`, MSR's
//!    `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, Tencent's
//!    `Timestamp,Offset,Size,IOType,VolumeID`, Alibaba's `device_id,opcode,offset,length,timestamp`.
//! 3. Otherwise every text format's parser reads the sample; a format is accepted when at most a
//!    quarter of the lines are malformed for it (a well-formed line with an impossible value,
//!    such as size 0, still counts as its format) and at least one line is one of its records.
//!    The accepted format with the fewest malformed lines wins, the first in [`Format::ALL`]
//!    order among equals. The formats' field types keep real traces apart (MQSim is the
//!    only blank-separated numeric one, blkparse has `major,minor` first, the CSV formats differ
//!    in where their operation field is and how it is spelled), so the order only decides
//!    contrived files, and it decides them the same way every time.

use super::blktrace::{magic_order, VERSION};
use super::lex::{eq_ci, is_blank, shown, trimmed};
use super::text::{BadKind, Cx, Found, Line, TextParser};
use super::{BlkEvent, Format, TenantBy};

/// Lines looked at.
pub(super) const SAMPLE: usize = 20;
/// A format is still recognised when at most this fraction (1/4) of the sample is malformed for
/// it: a stray bad line near the start is then reported as a bad line, not as an unknown format.
const TOLERATED: (usize, usize) = (1, 4);

/// Why detection failed.
pub(super) enum Failure {
    /// Nothing but blanks and comments.
    Empty,
    /// No format accepts the sample: what each said.
    Unknown(String),
    /// A blktrace of a layout this reader does not know.
    Unsupported(String),
}

/// The format of a trace starting with `head` (`whole`: `head` is all of it).
pub(super) fn detect(head: &[u8], whole: bool) -> Result<Format, Failure> {
    if let Some((_, version)) = magic_order(head) {
        if version == VERSION {
            return Ok(Format::Blktrace);
        }
        return Err(Failure::Unsupported(format!(
            "blktrace version {version} records; only version {VERSION} (struct blk_io_trace) is read"
        )));
    }
    let sample = sample(head, whole);
    let Some(&(_, first)) = sample.first() else {
        let blank = head
            .split(|&b| b == b'\n')
            .all(|l| l.iter().all(|&b| is_blank(b)) || l.first() == Some(&b'#'));
        return Err(if blank && whole {
            Failure::Empty
        } else {
            Failure::Unknown("no complete line in the first 64 KiB".into())
        });
    };
    if let Some(format) = by_header(first) {
        return Ok(format);
    }
    let mut tried = vec!["blktrace: no magic 0x65617407 at the start".to_string()];
    // (malformed lines, format) of every format that reads most of the sample.
    let mut best: Option<(usize, Format)> = None;
    for &format in Format::ALL {
        let Some(mut parser) = TextParser::new(format, BlkEvent::Issue) else {
            continue;
        };
        let mut cx = Cx::new(TenantBy::None, TenantBy::None);
        let mut evidence = 0;
        let mut malformed = 0;
        let mut first_rejected = None;
        for &(line_no, line) in &sample {
            match parser.parse(line, &mut cx) {
                Ok(Line::Request(_) | Line::Skip) => evidence += 1,
                Ok(Line::Other) => {}
                Err(bad) if bad.kind == BadKind::Value => evidence += 1,
                Err(bad) => {
                    malformed += 1;
                    let found = match &bad.found {
                        Found::Span(s) => shown(s.of(line)),
                        Found::Text(t) => t.clone(),
                    };
                    first_rejected.get_or_insert(format!(
                        "line {line_no}: field '{}': expected {}, found '{found}'",
                        bad.field, bad.expected
                    ));
                }
            }
        }
        if evidence > 0 && malformed * TOLERATED.1 <= sample.len() * TOLERATED.0 {
            if best.is_none_or(|(m, _)| malformed < m) {
                best = Some((malformed, format));
            }
            continue;
        }
        match first_rejected {
            None => tried.push(format!("{}: no line of it", format.name())),
            Some(why) => tried.push(format!("{}: {why}", format.name())),
        }
    }
    best.map(|(_, f)| f).ok_or_else(|| Failure::Unknown(tried.join("; ")))
}

/// The first [`SAMPLE`] lines that are neither blank nor comments, numbered from 1, without line
/// ends; a last line cut off by the end of the head is left out.
fn sample(head: &[u8], whole: bool) -> Vec<(u64, &[u8])> {
    let mut lines: Vec<&[u8]> = head.split(|&b| b == b'\n').collect();
    if !whole || head.ends_with(b"\n") {
        // Without the whole trace the last piece may be cut; with it, a final `\n` leaves an
        // empty piece.
        lines.pop();
    }
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.strip_suffix(b"\r").unwrap_or(l)))
        .filter(|(_, l)| match l.iter().find(|&&b| !is_blank(b)) {
            None | Some(b'#') => false,
            Some(_) => true,
        })
        .take(SAMPLE)
        .collect()
}

/// The format a header line announces.
fn by_header(line: &[u8]) -> Option<Format> {
    let t = trimmed(line, 0, line.len()).of(line);
    const HEADERS: [(&[u8], Format); 6] = [
        (b"fio version 2 iolog", Format::FioIolog),
        (b"fio version 3 iolog", Format::FioIolog),
        (b"Timestamp,Response,IOType,LUN,Offset,Size", Format::Systor),
        (
            b"Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime",
            Format::Msr,
        ),
        (b"Timestamp,Offset,Size,IOType,VolumeID", Format::Tencent),
        (b"device_id,opcode,offset,length,timestamp", Format::Alibaba),
    ];
    HEADERS.iter().find(|(h, _)| eq_ci(t, h)).map(|&(_, f)| f)
}
