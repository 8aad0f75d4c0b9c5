//! Getting bytes: files and in-memory traces, gzip decompressed on the fly, the first block kept
//! aside for auto-detection, blktrace's per-CPU siblings found, and text split into lines.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};

use flate2::bufread::MultiGzDecoder;

use super::lex::{find, is_blank, Span};
use super::text::{Bad, Cx, Line, Raw, TextParser};
use super::{Diag, Format, TraceError};

/// Buffer size for reading (and for the decompressed side of gzip).
const BUF: usize = 1 << 16;

/// Auto-detection looks at this much of the (decompressed) start of a trace.
pub(super) const HEAD: usize = 1 << 16;

/// Longer lines are bad lines, dropped as they are read: a binary or corrupt file without line
/// ends must not make memory grow with the file. Shorter lines always fit in a block.
pub(super) const MAX_LINE: usize = 1 << 16;

pub(super) type Input = Box<dyn BufRead + Send>;

pub(super) fn io_error(path: &str, source: io::Error) -> TraceError {
    TraceError::Io {
        path: path.to_string(),
        source,
    }
}

/// Opens a trace file, decompressing it if it starts with the gzip magic.
pub(super) fn open(path: &Path) -> Result<Input, TraceError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| io_error(&name, e))?;
    gunzip(BufReader::with_capacity(BUF, file)).map_err(|e| io_error(&name, e))
}

/// An in-memory trace, decompressed if it starts with the gzip magic.
pub(super) fn from_bytes(data: Vec<u8>) -> Input {
    let cursor = Cursor::new(data);
    match gunzip(cursor) {
        Ok(input) => input,
        // Peeking into memory cannot fail.
        Err(_) => Box::new(Cursor::new(Vec::new())),
    }
}

/// `r` itself, or its gzip decompression (all members, as `gzip -d` does) when it starts with
/// `1f 8b`.
fn gunzip<R: BufRead + Send + 'static>(mut r: R) -> io::Result<Input> {
    let start = loop {
        match r.fill_buf() {
            Ok(b) => break b.get(..2) == Some(&[0x1f, 0x8b]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    if start {
        Ok(Box::new(BufReader::with_capacity(
            BUF,
            MultiGzDecoder::new(r),
        )))
    } else {
        Ok(Box::new(r))
    }
}

/// Reads up to [`HEAD`] bytes of `input` and gives them back together with an input that still
/// starts with them. The flag says whether the head is the whole trace.
pub(super) fn head(input: Input, name: &str) -> Result<(Vec<u8>, bool, Input), TraceError> {
    let mut head = Vec::with_capacity(HEAD);
    let mut input = input;
    (&mut input)
        .take(HEAD as u64)
        .read_to_end(&mut head)
        .map_err(|e| io_error(name, e))?;
    let whole = head.len() < HEAD;
    let rest: Input = Box::new(Cursor::new(head.clone()).chain(input));
    Ok((head, whole, rest))
}

/// The per-CPU files of the blktrace that `path` belongs to (`<dev>.blktrace.<cpu>`, optionally
/// `.gz`), in CPU order; just `path` when it is not so named or has no siblings.
pub(super) fn blktrace_siblings(path: &Path) -> Vec<PathBuf> {
    let alone = vec![path.to_path_buf()];
    let Some((dev, _, gz)) = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(split_blktrace_name)
    else {
        return alone;
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return alone;
    };
    let mut found: Vec<(u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (d, cpu, z) = split_blktrace_name(&name)?;
            (d == dev && z == gz).then(|| (cpu, dir.join(&name)))
        })
        .collect();
    if found.len() < 2 {
        return alone;
    }
    // The directory's order is the file system's; the CPU number is the file's identity.
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// `<dev>.blktrace.<cpu>[.gz]` → (dev, cpu, gz).
fn split_blktrace_name(name: &str) -> Option<(&str, u64, bool)> {
    let (name, gz) = match name.strip_suffix(".gz") {
        Some(n) => (n, true),
        None => (name, false),
    };
    let (dev, cpu) = name.rsplit_once(".blktrace.")?;
    if dev.is_empty() || cpu.is_empty() || !cpu.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((dev, cpu.parse().ok()?, gz))
}

/// Input read without a line the format's parser could use (only bad lines, or one line without
/// end) before reading stops with an error: a device such as `/dev/zero` or `/dev/urandom`, or a
/// file that is not a trace of the format it is read as, would otherwise be read for ever (in
/// constant memory). Real traces' bad lines come one at a time between good ones; they never
/// come near this.
pub(super) const MAX_UNUSABLE: u64 = 64 << 20;

/// How much text is read at a time. Lines are cut from this block in place, so that the
/// per-line cost is the parse alone, not a call into the input per line.
const BLOCK: usize = 1 << 18;

/// A text trace: lines handed one at a time to the format's parser.
pub(super) struct TextSource {
    pub name: String,
    format: Format,
    input: Input,
    parser: TextParser,
    pub lines: u64,
    /// Bytes read since the last usable line (a request, or a line the format knows to skip),
    /// and the line after it.
    since_usable: u64,
    unusable_from: u64,
    /// `buf[start..end]` is read and not yet handed out.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// Inside a line longer than [`MAX_LINE`]: its first bytes, for the message, while the rest
    /// of it is dropped.
    overlong: Option<Vec<u8>>,
}

impl TextSource {
    pub fn new(name: String, format: Format, input: Input, parser: TextParser) -> Self {
        TextSource {
            name,
            format,
            input,
            parser,
            lines: 0,
            since_usable: 0,
            unusable_from: 1,
            buf: vec![0; BLOCK],
            start: 0,
            end: 0,
            eof: false,
            overlong: None,
        }
    }

    /// The next request; bad lines go to `diag`.
    pub fn next(&mut self, cx: &mut Cx, diag: &mut Diag) -> Result<Option<Raw>, TraceError> {
        loop {
            let rest = &self.buf[self.start..self.end];
            let line_end = match find(rest, b'\n') {
                Some(i) => Some(self.start + i),
                None if self.eof && (self.start < self.end || self.overlong.is_some()) => {
                    // The last line, without a line end.
                    Some(self.end)
                }
                None if self.eof => return Ok(None),
                None => None,
            };
            if let Some(line_end) = line_end {
                let line_start = self.start;
                self.start = (line_end + 1).min(self.end);
                let line = &self.buf[line_start..line_end];
                let found = match self.overlong.take() {
                    Some(head) => overlong(&self.name, &mut self.lines, &head, diag),
                    None if line.len() > MAX_LINE => {
                        overlong(&self.name, &mut self.lines, line, diag)
                    }
                    None => {
                        let before = self.lines;
                        let (found, usable) = handle_line(
                            &mut self.parser,
                            &self.name,
                            &mut self.lines,
                            line,
                            cx,
                            diag,
                        )?;
                        if usable {
                            self.since_usable = 0;
                            self.unusable_from = before + 2;
                        }
                        Ok(found)
                    }
                };
                match found? {
                    Some(raw) => return Ok(Some(raw)),
                    None => continue,
                }
            }
            self.refill()?;
        }
    }

    /// Keeps the unfinished line (dropping it if it is already too long) and reads more after it.
    fn refill(&mut self) -> Result<(), TraceError> {
        let partial = self.end - self.start;
        if self.overlong.is_some() || partial > MAX_LINE {
            if self.overlong.is_none() {
                let head = &self.buf[self.start..self.start + 60];
                self.overlong = Some(head.to_vec());
            }
            self.start = self.end;
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        loop {
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    self.since_usable += n as u64;
                    if self.since_usable > MAX_UNUSABLE {
                        return Err(TraceError::Unusable {
                            file: self.name.clone(),
                            format: self.format.name(),
                            mib: MAX_UNUSABLE >> 20,
                            from_line: self.unusable_from,
                        });
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error(&self.name, e)),
            }
        }
    }
}

/// A line longer than [`MAX_LINE`]: one bad line, shown by its start.
fn overlong(
    name: &str,
    lines: &mut u64,
    head: &[u8],
    diag: &mut Diag,
) -> Result<Option<Raw>, TraceError> {
    *lines += 1;
    let bad = Bad::syntax(
        "line",
        "a line of at most 65536 bytes",
        Span {
            start: 0,
            end: head.len().min(60),
        },
    );
    diag.report(name, *lines, &bad, head, "")?;
    Ok(None)
}

/// One line: counted, then skipped (blank, comment), parsed, or reported as bad; and whether the
/// parser could use it (a request, or a line of the format that is not one).
#[inline]
fn handle_line(
    parser: &mut TextParser,
    name: &str,
    lines: &mut u64,
    line: &[u8],
    cx: &mut Cx,
    diag: &mut Diag,
) -> Result<(Option<Raw>, bool), TraceError> {
    *lines += 1;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match line.iter().find(|&&b| !is_blank(b)) {
        None | Some(b'#') => return Ok((None, false)),
        Some(_) => {}
    }
    match parser.parse(line, cx) {
        Ok(Line::Request(raw)) => Ok((Some(raw), true)),
        Ok(Line::Skip | Line::Other) => Ok((None, true)),
        Err(bad) => {
            diag.report(name, *lines, &bad, line, "")?;
            Ok((None, false))
        }
    }
}
