//! blkparse's default text output, one event per line:
//! `dev cpu seq sec.nsec pid action RWBS [sector + nsect] [comm]`, e.g.
//! `  7,0    1        0     0.000021844  8160  D   R 126480 + 8 [fio]`: device 7,0, CPU 1,
//! 21,844 ns, pid 8160, issued (`D`), a read of 8 sectors at sector 126480.
//!
//! Lines of the chosen action (`D`, `C` or `Q`) are requests; other actions, events without an
//! extent and blkparse's closing statistics (from `CPU0 (name):` or `Total (name):` on) are
//! not bad lines. A common line is read in one pass (`fast`); anything unusual goes field by field
//! (`general`), which names the field at fault. Fields for streams and placements: `device`,
//! `pid`.
//!
//! Source: blktrace's `blkparse_fmt.c` (`process_default`) and the kernel's `fill_rwbs`
//! (docs/TRACES.md, "blkparse").

use super::super::lex::{seconds_ns, trimmed, uint, Scan, Span, Words};
use super::super::{TenantBy, TraceOp};
use super::{extent_of, need, need_uint, sectors, Bad, Cx, Line, Raw, Unit};

/// blkparse's default output: `dev cpu seq sec.nsec pid action RWBS [sector + nsect] [comm]`.
pub(in crate::workload::trace) struct Blkparse {
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
    /// A reader of the events with action `event` (`D`, `C` or `Q`) as requests.
    pub(super) fn new(event: &'static [u8]) -> Blkparse {
        debug_assert!(matches!(event, b"D" | b"C" | b"Q"), "an event blkparse prints");
        Blkparse { event, in_summary: false }
    }

    pub(super) fn parse(&mut self, line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
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
        Some(Some(BlkparseLine { dev, time_ns, pid, rwbs: (rwbs, rwbs_at), extent: Some((sector, nsect)) }))
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
        let time_ns =
            seconds_ns(time_at.of(line)).ok_or_else(|| Bad::syntax("time", "seconds.nanoseconds", time_at))?;
        let pid = need_uint(&mut w, line, "pid", "a process id")?;
        let act_at = need(&mut w, line, "action", "an action letter such as Q, D or C")?;
        let act = act_at.of(line);
        if !act.iter().all(u8::is_ascii_alphabetic) {
            return Err(Bad::syntax("action", "an action letter such as Q, D or C", act_at));
        }
        if act != self.event {
            return Ok(Line::Skip);
        }
        let rwbs_at = need(&mut w, line, "rwbs", "an RWBS string such as R, WS or FWFS")?;
        let rwbs = rwbs_at.of(line);
        if !rwbs.iter().all(u8::is_ascii_uppercase) {
            return Err(Bad::syntax("rwbs", "an RWBS string such as R, WS or FWFS", rwbs_at));
        }
        // `sector + nsect` follows for requests with data; events without data, passthrough
        // requests (`bytes (cdb)`) and the bare `[comm]` form have no extent.
        let extent = match (w.next(), w.next(), w.next()) {
            (Some(s_at), Some(plus), n) if plus.of(line) == b"+" => match uint(s_at.of(line)) {
                Some(sector) => {
                    let n_at = n.ok_or_else(|| Bad::syntax("size", "a sector count after '+'", Span::end_of(line)))?;
                    let nsect =
                        uint(n_at.of(line)).ok_or_else(|| Bad::syntax("size", "a sector count after '+'", n_at))?;
                    Some(((sector, s_at), (nsect, n_at)))
                }
                None => None,
            },
            _ => None,
        };
        let fields = BlkparseLine { dev: (major, minor, dev_at), time_ns, pid, rwbs: (rwbs, rwbs_at), extent };
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
                    Some(op) => (op, sectors(sector, "sector", s_at)?, sectors(nsect, "size", n_at)?, s_at, n_at),
                    None if flush => (TraceOp::Flush, 0, 0, s_at, n_at),
                    None => return Ok(Line::Skip),
                }
            }
            None if flush => (TraceOp::Flush, 0, 0, rwbs_at, rwbs_at),
            None => return Ok(Line::Skip),
        };
        if op != TraceOp::Flush {
            extent_of(op, offset, len, off_at, len_at, Unit::Sectors)?;
        }
        let (major, minor, dev_at) = f.dev;
        let (pid, pid_at) = f.pid;
        let (stream, place) = cx.ids(|cx, side, by| match by {
            TenantBy::Device => cx.num(side, (major << 32) | minor, dev_at, || format!("dev{major},{minor}")),
            TenantBy::Pid => cx.num(side, pid, pid_at, || format!("pid{pid}")),
            _ => Ok(0),
        })?;
        Ok(Line::Request(Raw { time_ns: f.time_ns, op, offset, len, stream, place }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Found;
    use super::*;

    /// What a parse came to, in a comparable form.
    fn outcome(r: Result<Line, Bad>) -> String {
        match r {
            Ok(Line::Request(raw)) => format!("{raw:?}"),
            Ok(Line::Skip) => "skip".into(),
            Ok(Line::Other) => "other".into(),
            Err(bad) => format!(
                "{} {:?} {:?} {:?}",
                bad.field,
                bad.expected,
                bad.kind,
                match bad.found {
                    Found::Span(s) => format!("{s:?}"),
                    Found::Text(t) => t,
                }
            ),
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
                    let p = Blkparse { event: b"D", in_summary: false };
                    let mut general = Blkparse { event: b"D", in_summary: false };
                    let expected = outcome(general.general(&line, &mut Cx::new(tenant, TenantBy::None)));
                    let got = match p.fast(&line) {
                        Some(Some(fields)) => outcome(p.request(fields, &mut Cx::new(tenant, TenantBy::None))),
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
