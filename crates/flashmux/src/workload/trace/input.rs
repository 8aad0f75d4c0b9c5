//! Getting bytes: files and in-memory traces, gzip decompressed on the fly, the first block kept
//! aside for auto-detection, blktrace's per-CPU siblings found, and text split into lines.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};

use flate2::bufread::MultiGzDecoder;

use super::text::{Cx, Line, Raw, TextParser};
use super::{Diag, TraceError};

/// Buffer size for reading (and for the decompressed side of gzip).
const BUF: usize = 1 << 16;

/// Auto-detection looks at this much of the (decompressed) start of a trace.
pub(super) const HEAD: usize = 1 << 16;

/// Longer lines are bad lines, and only this much of one is kept: a binary or corrupt file
/// without line ends must not make the line buffer grow with the file.
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

/// A text trace: lines handed one at a time to the format's parser.
pub(super) struct TextSource {
    pub name: String,
    input: Input,
    /// A line that spans the input's buffer boundary, assembled here.
    partial: Vec<u8>,
    /// The line in `partial` went past [`MAX_LINE`].
    overlong: bool,
    parser: TextParser,
    pub lines: u64,
}

impl TextSource {
    pub fn new(name: String, input: Input, parser: TextParser) -> Self {
        TextSource {
            name,
            input,
            partial: Vec::new(),
            overlong: false,
            parser,
            lines: 0,
        }
    }

    /// The next request; bad lines go to `diag`.
    pub fn next(&mut self, cx: &mut Cx, diag: &mut Diag) -> Result<Option<Raw>, TraceError> {
        loop {
            let avail = match self.input.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error(&self.name, e)),
            };
            if avail.is_empty() {
                if self.partial.is_empty() && !self.overlong {
                    return Ok(None);
                }
                // The last line has no line end.
                let line = std::mem::take(&mut self.partial);
                let found = self.handle(&line, cx, diag);
                self.partial = line;
                self.partial.clear();
                self.overlong = false;
                match found? {
                    Some(raw) => return Ok(Some(raw)),
                    None => continue,
                }
            }
            match avail.iter().position(|&b| b == b'\n') {
                Some(i) if self.partial.is_empty() && !self.overlong => {
                    // The common case: the whole line is in the input's buffer; parse it there.
                    let found = handle_line(
                        &mut self.parser,
                        &self.name,
                        &mut self.lines,
                        &avail[..i],
                        false,
                        cx,
                        diag,
                    );
                    self.input.consume(i + 1);
                    if let Some(raw) = found? {
                        return Ok(Some(raw));
                    }
                }
                Some(i) => {
                    self.append(i);
                    self.input.consume(i + 1);
                    let line = std::mem::take(&mut self.partial);
                    let found = self.handle(&line, cx, diag);
                    self.partial = line;
                    self.partial.clear();
                    self.overlong = false;
                    if let Some(raw) = found? {
                        return Ok(Some(raw));
                    }
                }
                None => {
                    let n = avail.len();
                    self.append(n);
                    self.input.consume(n);
                }
            }
        }
    }

    /// Adds the first `n` available bytes to the partial line, up to [`MAX_LINE`].
    fn append(&mut self, n: usize) {
        let Ok(avail) = self.input.fill_buf() else {
            return;
        };
        let room = MAX_LINE.saturating_sub(self.partial.len());
        let take = n.min(room).min(avail.len());
        self.partial.extend_from_slice(&avail[..take]);
        if take < n {
            self.overlong = true;
        }
    }

    fn handle(
        &mut self,
        line: &[u8],
        cx: &mut Cx,
        diag: &mut Diag,
    ) -> Result<Option<Raw>, TraceError> {
        handle_line(
            &mut self.parser,
            &self.name,
            &mut self.lines,
            line,
            self.overlong,
            cx,
            diag,
        )
    }
}

/// One line: counted, then skipped (blank, comment), parsed, or reported as bad.
fn handle_line(
    parser: &mut TextParser,
    name: &str,
    lines: &mut u64,
    line: &[u8],
    overlong: bool,
    cx: &mut Cx,
    diag: &mut Diag,
) -> Result<Option<Raw>, TraceError> {
    *lines += 1;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if overlong {
        let bad = super::text::Bad::syntax(
            "line",
            "a line of at most 65536 bytes",
            super::lex::Span {
                start: 0,
                end: line.len().min(60),
            },
        );
        diag.report(name, *lines, &bad, line, "")?;
        return Ok(None);
    }
    match line.iter().find(|&&b| !super::lex::is_blank(b)) {
        None | Some(b'#') => return Ok(None),
        Some(_) => {}
    }
    match parser.parse(line, cx) {
        Ok(Line::Request(raw)) => Ok(Some(raw)),
        Ok(Line::Skip | Line::Other) => Ok(None),
        Err(bad) => {
            diag.report(name, *lines, &bad, line, "")?;
            Ok(None)
        }
    }
}
