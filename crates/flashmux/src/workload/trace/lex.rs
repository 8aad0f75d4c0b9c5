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

    #[inline(always)]
    fn next(&mut self) -> Option<Span> {
        if self.done {
            return None;
        }
        let start = self.pos;
        let end = match find(&self.line[start..], b',') {
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

    #[inline(always)]
    fn next(&mut self) -> Option<Span> {
        let line = self.line;
        let start = skip_blanks(line, self.pos);
        if start == line.len() {
            self.pos = start;
            return None;
        }
        let end = word_end(line, start);
        self.pos = end;
        Some(Span { start, end })
    }
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The eight bytes at `at`, the first in the lowest byte.
#[inline(always)]
fn word(line: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&line[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The first non-blank position at or after `pos`. Runs of spaces (blkparse pads its columns)
/// are skipped eight bytes at a time: a byte-by-byte loop mispredicts at every column.
#[inline(always)]
fn skip_blanks(line: &[u8], mut pos: usize) -> usize {
    while pos + 8 <= line.len() {
        let not_space = word(line, pos) ^ (LO * u64::from(b' '));
        if not_space != 0 {
            pos += (not_space.trailing_zeros() / 8) as usize;
            break;
        }
        pos += 8;
    }
    while pos < line.len() && is_blank(line[pos]) {
        pos += 1;
    }
    pos
}

/// The first blank position after `pos` (or the line's end), eight bytes at a time: blanks are
/// below `!` (0x21), so the first byte below it is found with the word trick and then checked.
#[inline(always)]
fn word_end(line: &[u8], mut pos: usize) -> usize {
    while pos + 8 <= line.len() {
        let w = word(line, pos);
        let low = w.wrapping_sub(LO * 0x21) & !w & HI;
        if low != 0 {
            pos += (low.trailing_zeros() / 8) as usize;
            break;
        }
        pos += 8;
    }
    while pos < line.len() && !is_blank(line[pos]) {
        pos += 1;
    }
    pos
}

/// A one-pass reader of blank-separated fields for the common shape of a line: each number is
/// converted while it is scanned, where [`Words`] then [`uint`] would pass over its digits twice.
/// Every method returns `None` on anything unusual (a field too long, a missing blank, a
/// non-digit), so a caller can hand the line to its general parser, which says what is wrong.
pub(super) struct Scan<'a> {
    line: &'a [u8],
    pos: usize,
}

impl<'a> Scan<'a> {
    pub fn new(line: &'a [u8]) -> Self {
        Scan { line, pos: 0 }
    }

    /// One to 19 digits (19 cannot overflow) at the current position: their value and count.
    #[inline(always)]
    fn digits(&mut self) -> Option<(u64, usize)> {
        let line = self.line;
        let start = self.pos;
        let mut pos = start;
        let mut v: u64 = 0;
        while pos < line.len() {
            let d = line[pos].wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            if pos - start == 19 {
                // A twentieth digit: possibly beyond u64; the general parser decides.
                return None;
            }
            v = v * 10 + u64::from(d);
            pos += 1;
        }
        if pos == start {
            return None;
        }
        self.pos = pos;
        Some((v, pos - start))
    }

    /// Whether the current position ends a field: a blank or the line's end.
    #[inline(always)]
    fn at_end_of_field(&self) -> bool {
        self.line.get(self.pos).is_none_or(|&b| is_blank(b))
    }

    /// The next field as an integer, after any blanks.
    #[inline(always)]
    pub fn uint(&mut self) -> Option<(u64, Span)> {
        self.pos = skip_blanks(self.line, self.pos);
        let start = self.pos;
        let (v, _) = self.digits()?;
        self.at_end_of_field().then_some((
            v,
            Span {
                start,
                end: self.pos,
            },
        ))
    }

    /// The next field as `a<sep>b`, two integers, after any blanks.
    #[inline(always)]
    pub fn uint_pair(&mut self, sep: u8) -> Option<(u64, u64, Span)> {
        self.pos = skip_blanks(self.line, self.pos);
        let start = self.pos;
        let (a, _) = self.digits()?;
        if self.line.get(self.pos) != Some(&sep) {
            return None;
        }
        self.pos += 1;
        let (b, _) = self.digits()?;
        self.at_end_of_field().then_some((
            a,
            b,
            Span {
                start,
                end: self.pos,
            },
        ))
    }

    /// The next field as seconds with one to nine decimals, in nanoseconds, after any blanks:
    /// what [`seconds_ns`] gives for the same text.
    #[inline(always)]
    pub fn seconds(&mut self) -> Option<u64> {
        const SCALE: [u64; 10] = [0, 100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000, 100, 10, 1];
        self.pos = skip_blanks(self.line, self.pos);
        let (secs, _) = self.digits()?;
        if self.line.get(self.pos) != Some(&b'.') {
            return None;
        }
        self.pos += 1;
        let (frac, n) = self.digits()?;
        if n > 9 || !self.at_end_of_field() {
            return None;
        }
        secs.checked_mul(1_000_000_000)?.checked_add(frac * SCALE[n])
    }

    /// The next field, after any blanks; `None` at the line's end.
    #[inline(always)]
    pub fn word(&mut self) -> Option<Span> {
        let start = skip_blanks(self.line, self.pos);
        if start == self.line.len() {
            return None;
        }
        self.pos = word_end(self.line, start);
        Some(Span {
            start,
            end: self.pos,
        })
    }
}

/// The position of the first `needle` in `hay`. Lines are searched eight bytes at a time: a
/// byte-by-byte search alone would take a third of the time budget of a line.
#[inline]
pub(super) fn find(hay: &[u8], needle: u8) -> Option<usize> {
    let pattern = LO * u64::from(needle);
    let mut chunks = hay.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word) ^ pattern;
        // The lowest byte flagged here is the first zero byte of `w` (higher flags may be false).
        let zero = w.wrapping_sub(LO) & !w & HI;
        if zero != 0 {
            return Some(at + (zero.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == needle)
        .map(|p| at + p)
}

/// A non-negative decimal integer: digits only, no sign, no blanks; `None` if it overflows.
#[inline(always)]
pub(super) fn uint(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b.len() == 20 {
        let mut v: u64 = 0;
        for &c in b {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v.checked_mul(10)?.checked_add(u64::from(d))?;
        }
        return Some(v);
    }
    // At most 19 digits cannot overflow. Timestamps and offsets are long, so eight digits are
    // converted at a time.
    let mut v: u64 = 0;
    let mut chunks = b.chunks_exact(8);
    for chunk in &mut chunks {
        v = v * 100_000_000 + eight_digits(chunk)?;
    }
    for &c in chunks.remainder() {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + u64::from(d);
    }
    Some(v)
}

/// Eight ASCII digits as a number, or `None` if any byte is not a digit.
#[inline(always)]
fn eight_digits(chunk: &[u8]) -> Option<u64> {
    let mut word = [0u8; 8];
    word.copy_from_slice(chunk);
    let w = u64::from_le_bytes(word);
    // Every byte in 0x30..=0x39: high nibble 3, and adding 6 does not carry out of the nibble.
    let high = 0xf0f0_f0f0_f0f0_f0f0;
    let threes = 0x3030_3030_3030_3030;
    if w & high != threes || w.wrapping_add(0x0606_0606_0606_0606) & high != threes {
        return None;
    }
    // The first digit is the lowest byte. Pair digits into 2-digit, then 4-, then 8-digit values.
    let d = w - threes;
    let d = (d * 10 + (d >> 8)) & 0x00ff_00ff_00ff_00ff;
    let d = (d * 100 + (d >> 16)) & 0x0000_ffff_0000_ffff;
    Some((d * 10_000 + (d >> 32)) & 0xffff_ffff)
}

/// A non-negative decimal number of seconds, `s` or `s.f`, in nanoseconds. Decimals past the
/// ninth are dropped (the formats read here have at most nine, and a finer time has no meaning).
#[inline]
pub(super) fn seconds_ns(b: &[u8]) -> Option<u64> {
    const SCALE: [u64; 10] = [
        1_000_000_000,
        100_000_000,
        10_000_000,
        1_000_000,
        100_000,
        10_000,
        1_000,
        100,
        10,
        1,
    ];
    let (whole, frac) = match find(b, b'.') {
        Some(i) => (&b[..i], &b[i + 1..]),
        None => (b, &b[..0]),
    };
    let secs = uint(whole)?;
    let (kept, dropped) = frac.split_at(frac.len().min(9));
    if !dropped.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let ns = if kept.is_empty() {
        0
    } else {
        uint(kept)? * SCALE[kept.len()]
    };
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
    // Control characters escaped: a NUL or an escape sequence in a bad line must be seen.
    if text.chars().count() <= MAX {
        crate::units::shown(&text).into_owned()
    } else {
        let mut s: String = text.chars().take(MAX).collect();
        s = crate::units::shown(&s).into_owned();
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
        assert_eq!(
            fields(
                "          a\t\t\t\t\t\t\t\t\tbcdefghijklmnop\x01q\r \t r",
                false
            ),
            ["a", "bcdefghijklmnop\x01q", "r"]
        );
    }

    #[test]
    fn words_match_a_plain_split_on_any_text() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let alphabet = b"  \t\rab,\x01\x1f!~\xff\n";
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 40) as usize;
            let line: Vec<u8> = (0..len)
                .map(|i| alphabet[((x >> (i % 60)) as usize + i * 7) % alphabet.len()])
                .collect();
            let expected: Vec<&[u8]> = line
                .split(|&b| is_blank(b))
                .filter(|w| !w.is_empty())
                .collect();
            let got: Vec<&[u8]> = Words::new(&line).map(|s| s.of(&line)).collect();
            assert_eq!(got, expected, "{:?}", String::from_utf8_lossy(&line));
        }
    }

    #[test]
    fn find_finds_the_first_occurrence_at_every_position() {
        for len in 0..40 {
            for at in 0..=len {
                let mut hay = vec![b'a'; len];
                if at < len {
                    hay[at] = b'\n';
                    // A later occurrence, and bytes that trip the word trick's false positives.
                    if at + 1 < len {
                        hay[at + 1] = b'\n' + 1;
                    }
                    if at + 3 < len {
                        hay[at + 3] = b'\n';
                    }
                }
                let expected = hay.iter().position(|&b| b == b'\n');
                assert_eq!(find(&hay, b'\n'), expected, "{len} {at}");
            }
        }
        assert_eq!(find(&[0x8a, 0x0a], b'\n'), Some(1));
        assert_eq!(find(&[0xff; 9], 0xff), Some(0));
        assert_eq!(find(&[0; 9], 0), Some(0));
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
    fn integers_of_every_length_match_a_plain_conversion() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let text = (x >> (x % 64)).to_string();
            assert_eq!(uint(text.as_bytes()), text.parse().ok(), "{text}");
            // One byte off the digits, at every position.
            let mut bad = text.clone().into_bytes();
            let at = (x % bad.len() as u64) as usize;
            for c in [b'/', b':', b' ', 0xb0, b'a'] {
                bad[at] = c;
                assert_eq!(uint(&bad), None, "{:?}", String::from_utf8_lossy(&bad));
            }
        }
        assert_eq!(uint(b"00000000000000000000"), Some(0));
        assert_eq!(uint(b"0000000000000000001"), Some(1));
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
    fn the_one_pass_scanner_reads_common_fields_and_gives_up_on_anything_else() {
        let line = b"  259,0 \t 17 0.000021844 8160 D   R 126480 + 8 [fio]";
        let mut s = Scan::new(line);
        let (a, b, at) = s.uint_pair(b',').unwrap();
        assert_eq!((a, b, at.of(line)), (259, 0, &b"259,0"[..]));
        assert_eq!(s.uint().map(|(v, _)| v), Some(17));
        assert_eq!(s.seconds(), Some(21_844));
        assert_eq!(s.uint().map(|(v, _)| v), Some(8160));
        assert_eq!(s.word().map(|w| w.of(line)), Some(&b"D"[..]));
        assert_eq!(s.word().map(|w| w.of(line)), Some(&b"R"[..]));
        assert_eq!(s.uint().map(|(v, _)| v), Some(126_480));
        assert_eq!(s.word().map(|w| w.of(line)), Some(&b"+"[..]));
        assert_eq!(s.uint().map(|(v, _)| v), Some(8));
        assert_eq!(s.word().map(|w| w.of(line)), Some(&b"[fio]"[..]));
        assert_eq!(s.word(), None);
        // Seconds agree with `seconds_ns` wherever the scanner reads them.
        for text in ["0.5", "1456135200.013118000", "3.123456789", "18446744073.709551615"] {
            assert_eq!(Scan::new(text.as_bytes()).seconds(), seconds_ns(text.as_bytes()), "{text}");
        }
        for bad in ["", "2", "2.", ".5", "1.2.3", "0.1234567890", "1x.5", "18446744074.0", "99999999999999999999.0"] {
            assert_eq!(Scan::new(bad.as_bytes()).seconds(), None, "{bad}");
        }
        for bad in ["", "12a", "-1", "12,", "99999999999999999999"] {
            assert_eq!(Scan::new(bad.as_bytes()).uint(), None, "{bad}");
        }
        for bad in ["7", "7,", ",0", "7,0,1", "7.0"] {
            assert_eq!(Scan::new(bad.as_bytes()).uint_pair(b','), None, "{bad}");
        }
        assert_eq!(Scan::new(b"1234567890123456789").uint().map(|(v, _)| v), Some(1_234_567_890_123_456_789));
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        assert_eq!(shown(b"abc"), "abc");
        assert_eq!(shown(&[b'x'; 100]).chars().count(), 61);
        assert_eq!(shown(&[0xff, b'a']), "\u{fffd}a");
    }
}
