//! Byte-level field splitting and number parsing for the text formats.
//!
//! Traces run to billions of lines, so nothing here allocates: a line is split into [`Span`]s of
//! the line's own bytes, and numbers are parsed from those bytes directly. Decimal seconds are
//! parsed as integers (whole seconds and up to nine decimals), never through `f64`, so a time
//! such as `0.000021844` becomes exactly 21,844 ns.

/// Where a field sits in its line: `line[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    /// The field's bytes.
    pub fn of(self, line: &[u8]) -> &[u8] {
        line.get(self.start..self.end).unwrap_or_default()
    }

    /// The empty span just past the end of a line: what a missing field points at.
    pub fn end_of(line: &[u8]) -> Span {
        Span {
            start: line.len(),
            end: line.len(),
        }
    }
}

/// Blanks that may surround a field: space, tab, and the `\r` of CRLF line ends.
pub(super) fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t' || b == b'\r'
}

/// `line[start..end]` without leading and trailing blanks.
pub(super) fn trimmed(line: &[u8], mut start: usize, mut end: usize) -> Span {
    while start < end && is_blank(line[start]) {
        start += 1;
    }
    while end > start && is_blank(line[end - 1]) {
        end -= 1;
    }
    Span { start, end }
}

/// The fields of a comma-separated line, each without surrounding blanks.
pub(super) struct Csv<'a> {
    line: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Csv<'a> {
    pub fn new(line: &'a [u8]) -> Self {
        Csv {
            line,
            pos: 0,
            done: false,
        }
    }
}

impl Iterator for Csv<'_> {
    type Item = Span;

    fn next(&mut self) -> Option<Span> {
        if self.done {
            return None;
        }
        let start = self.pos;
        let end = match self.line[start..].iter().position(|&b| b == b',') {
            Some(i) => start + i,
            None => {
                self.done = true;
                self.line.len()
            }
        };
        self.pos = end + 1;
        Some(trimmed(self.line, start, end))
    }
}

/// The fields of a line separated by runs of blanks.
pub(super) struct Words<'a> {
    line: &'a [u8],
    pos: usize,
}

impl<'a> Words<'a> {
    pub fn new(line: &'a [u8]) -> Self {
        Words { line, pos: 0 }
    }
}

impl Iterator for Words<'_> {
    type Item = Span;

    fn next(&mut self) -> Option<Span> {
        let line = self.line;
        let mut pos = self.pos;
        while pos < line.len() && is_blank(line[pos]) {
            pos += 1;
        }
        if pos == line.len() {
            self.pos = pos;
            return None;
        }
        let start = pos;
        while pos < line.len() && !is_blank(line[pos]) {
            pos += 1;
        }
        self.pos = pos;
        Some(Span { start, end: pos })
    }
}

/// A non-negative decimal integer: digits only, no sign, no blanks; `None` if it overflows.
pub(super) fn uint(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// A non-negative decimal number of seconds, `s` or `s.f`, in nanoseconds. Decimals past the
/// ninth are dropped (the formats read here have at most nine, and a finer time has no meaning).
pub(super) fn seconds_ns(b: &[u8]) -> Option<u64> {
    let (whole, frac) = match b.iter().position(|&c| c == b'.') {
        Some(i) => (&b[..i], &b[i + 1..]),
        None => (b, &b[..0]),
    };
    let secs = uint(whole)?;
    let mut ns: u64 = 0;
    let mut scale: u64 = 100_000_000;
    for &c in frac {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        ns += u64::from(d) * scale;
        scale /= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// `a == b`, ignoring ASCII case.
pub(super) fn eq_ci(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// How a bad field's text is shown in a message: lossy UTF-8, at most 60 characters.
pub(super) fn shown(b: &[u8]) -> String {
    const MAX: usize = 60;
    let text = String::from_utf8_lossy(b);
    if text.chars().count() <= MAX {
        text.into_owned()
    } else {
        let mut s: String = text.chars().take(MAX).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &str, csv: bool) -> Vec<&str> {
        let b = line.as_bytes();
        let spans: Vec<Span> = if csv {
            Csv::new(b).collect()
        } else {
            Words::new(b).collect()
        };
        spans
            .into_iter()
            .map(|s| std::str::from_utf8(s.of(b)).unwrap())
            .collect()
    }

    #[test]
    fn csv_fields_are_trimmed_and_empty_fields_kept() {
        assert_eq!(fields("a, b ,,c\r", true), ["a", "b", "", "c"]);
        assert_eq!(fields("", true), [""]);
        assert_eq!(fields("x,", true), ["x", ""]);
    }

    #[test]
    fn words_split_on_runs_of_blanks() {
        assert_eq!(
            fields("  7,0    1  0.5\t[fio] ", false),
            ["7,0", "1", "0.5", "[fio]"]
        );
        assert!(fields("   ", false).is_empty());
    }

    #[test]
    fn integers_are_exact_and_reject_anything_else() {
        assert_eq!(uint(b"0"), Some(0));
        assert_eq!(uint(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(uint(b"18446744073709551616"), None);
        for bad in ["", "-1", "+1", "1.0", " 1", "1e3", "0x10"] {
            assert_eq!(uint(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn decimal_seconds_are_exact_nanoseconds() {
        assert_eq!(seconds_ns(b"0.000021844"), Some(21_844));
        assert_eq!(
            seconds_ns(b"1456135200.013118000"),
            Some(1_456_135_200_013_118_000)
        );
        assert_eq!(seconds_ns(b"2"), Some(2_000_000_000));
        assert_eq!(seconds_ns(b"2."), Some(2_000_000_000));
        assert_eq!(seconds_ns(b"0.5"), Some(500_000_000));
        assert_eq!(seconds_ns(b"0.1234567899"), Some(123_456_789));
        for bad in ["", ".5", "1.2.3", "1,5", "-1.0", "1.x"] {
            assert_eq!(seconds_ns(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(seconds_ns(b"18446744074.0"), None);
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        assert_eq!(shown(b"abc"), "abc");
        assert_eq!(shown(&[b'x'; 100]).chars().count(), 61);
        assert_eq!(shown(&[0xff, b'a']), "\u{fffd}a");
    }
}
