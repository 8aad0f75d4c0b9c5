//! blktrace's binary format: one file per CPU of `struct blk_io_trace` records, merged by time.
//!
//! Layout (`include/uapi/linux/blktrace_api.h`, version 7): a 48-byte header — `u32 magic`
//! (`0x65617400 | version`), `u32 sequence`, `u64 time` (ns), `u64 sector` (512-byte units),
//! `u32 bytes`, `u32 action`, `u32 pid`, `u32 device` (`major << 20 | minor`), `u32 cpu`,
//! `u16 error`, `u16 pdu_len` — followed by `pdu_len` bytes of payload (a process name, a remap,
//! a cgroup id, a SCSI command), which is skipped. The byte order is the tracing machine's; it is
//! told by which order makes the magic come out right, as blkparse does.
//!
//! `action` holds the event code in its low bits (1 queue, 7 issue, 8 complete, …; bit 8 flags
//! a cgroup id in the payload) and the categories in its high 16 bits (`BLK_TC_*`). A record is
//! a request when its code is the chosen event, it is not a notification (`BLK_TC_NOTIFY`, whose
//! codes reuse the low numbers) nor a SCSI passthrough (`BLK_TC_PC`, whose sector is not an
//! address). Its direction: `BLK_TC_DISCARD` trim, else `BLK_TC_WRITE` write, else read — the
//! order the kernel's `fill_rwbs` tests them in. A record without bytes is a flush when
//! `BLK_TC_FLUSH` is set and is skipped otherwise.
//!
//! Per-CPU files are each in time order; they are merged by time, ties going to the file given
//! (or found) first. Each file keeps one decoded record in hand, so memory does not grow with
//! the trace.

use std::io::{self, BufRead};

use super::text::{max_len, Bad, BadKind, Cx, Found, Raw};
use super::{BlkEvent, Diag, TenantBy, TraceError, TraceOp};

pub(super) const MAGIC: u32 = 0x6561_7400;
pub(super) const VERSION: u32 = 0x07;
const HEADER: usize = 48;

const TC_WRITE: u32 = 1 << 1;
const TC_FLUSH: u32 = 1 << 2;
const TC_PC: u32 = 1 << 9;
const TC_NOTIFY: u32 = 1 << 10;
const TC_DISCARD: u32 = 1 << 13;

/// The blktrace byte order of a record that starts with `head`, if it is a blktrace record.
pub(super) fn magic_order(head: &[u8]) -> Option<(Order, u32)> {
    let bytes: [u8; 4] = head.get(..4)?.try_into().ok()?;
    let le = u32::from_le_bytes(bytes);
    let be = u32::from_be_bytes(bytes);
    if le & 0xffff_ff00 == MAGIC {
        Some((Order::Little, le & 0xff))
    } else if be & 0xffff_ff00 == MAGIC {
        Some((Order::Big, be & 0xff))
    } else {
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    Little,
    Big,
}

impl Order {
    fn u16(self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        match self {
            Order::Little => u16::from_le_bytes(a),
            Order::Big => u16::from_be_bytes(a),
        }
    }

    fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self {
            Order::Little => u32::from_le_bytes(a),
            Order::Big => u32::from_be_bytes(a),
        }
    }

    fn u64(self, b: &[u8]) -> u64 {
        let a = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        match self {
            Order::Little => u64::from_le_bytes(a),
            Order::Big => u64::from_be_bytes(a),
        }
    }
}

/// A request decoded from one file, waiting for its turn in the merge.
struct Pending {
    time_ns: u64,
    op: TraceOp,
    offset: u64,
    len: u64,
    device: u32,
    pid: u32,
    /// Byte offset of the record in its file.
    at: u64,
}

/// One per-CPU file.
struct CpuFile {
    name: String,
    input: Box<dyn BufRead + Send>,
    /// Byte offset of the next record.
    pos: u64,
    order: Option<Order>,
    head: Option<Pending>,
    finished: bool,
    records: u64,
}

/// The merged reader.
pub(super) struct Blktrace {
    files: Vec<CpuFile>,
    action: u32,
}

impl Blktrace {
    pub fn new(inputs: Vec<(String, Box<dyn BufRead + Send>)>, event: BlkEvent) -> Self {
        Blktrace {
            files: inputs
                .into_iter()
                .map(|(name, input)| CpuFile {
                    name,
                    input,
                    pos: 0,
                    order: None,
                    head: None,
                    finished: false,
                    records: 0,
                })
                .collect(),
            action: event.action(),
        }
    }

    /// Records read from all files, requests or not.
    pub fn records(&self) -> u64 {
        self.files.iter().map(|f| f.records).sum()
    }

    /// The next request in time order.
    pub fn next(&mut self, cx: &mut Cx, diag: &mut Diag) -> Result<Option<Raw>, TraceError> {
        let several = self.files.len() > 1;
        loop {
            for f in &mut self.files {
                if f.head.is_none() && !f.finished {
                    f.head = f.read(self.action, diag, several)?;
                }
            }
            let mut best: Option<usize> = None;
            for (i, f) in self.files.iter().enumerate() {
                if let Some(h) = &f.head {
                    let earlier = match best.and_then(|b| self.files[b].head.as_ref()) {
                        Some(b) => h.time_ns < b.time_ns,
                        None => true,
                    };
                    if earlier {
                        best = Some(i);
                    }
                }
            }
            let Some(i) = best else {
                return Ok(None);
            };
            let Some(p) = self.files[i].head.take() else {
                return Ok(None);
            };
            // Stream ids and placements follow the merged order, so they are assigned here
            // rather than per file.
            let ids = cx.ids(|cx, side, by| {
                let id = match by {
                    TenantBy::Device => cx.table(side).by_num(u64::from(p.device), || {
                        format!("dev{},{}", p.device >> 20, p.device & 0xf_ffff)
                    }),
                    TenantBy::Pid => cx.table(side).by_num(u64::from(p.pid), || format!("pid{}", p.pid)),
                    _ => Some(0),
                };
                id.ok_or_else(|| {
                    let (field, expected) = side.too_many();
                    Bad {
                        field,
                        expected,
                        found: Found::Text(format!("device {:#x}, pid {}", p.device, p.pid)),
                        kind: BadKind::Value,
                    }
                })
            });
            match ids {
                Ok((stream, place)) => {
                    return Ok(Some(Raw {
                        time_ns: p.time_ns,
                        op: p.op,
                        offset: p.offset,
                        len: p.len,
                        stream,
                        place,
                    }))
                }
                Err(bad) => {
                    let f = &self.files[i];
                    diag.report(&f.name, p.at, &bad, b"", f.prefix(several))?;
                }
            }
        }
    }
}

/// One record's header, decoded in its file's byte order (its payload already skipped).
struct Record {
    /// Byte offset of the record in its file.
    at: u64,
    time_ns: u64,
    sector: u64,
    bytes: u32,
    act: u32,
    pid: u32,
    device: u32,
}

impl Record {
    /// The request's operation if the record is one: the chosen event, neither a notification
    /// nor a SCSI passthrough; a record without bytes only as a flush.
    fn op(&self, action: u32) -> Option<TraceOp> {
        let tc = self.act >> 16;
        if self.act & 0xff != action || tc & (TC_NOTIFY | TC_PC) != 0 {
            return None;
        }
        Some(if self.bytes == 0 {
            if tc & TC_FLUSH == 0 {
                return None;
            }
            TraceOp::Flush
        } else if tc & TC_DISCARD != 0 {
            TraceOp::Trim
        } else if tc & TC_WRITE != 0 {
            TraceOp::Write
        } else {
            TraceOp::Read
        })
    }

    /// The request's offset and length in bytes (0 and 0 for a flush), or why no request can
    /// have them.
    fn extent(&self, op: TraceOp) -> Result<(u64, u64), Bad> {
        if op == TraceOp::Flush {
            return Ok((0, 0));
        }
        let (sector, len) = (self.sector, u64::from(self.bytes));
        let bad = |field, expected, value: u64| Bad {
            field,
            expected,
            found: Found::Text(value.to_string()),
            kind: BadKind::Value,
        };
        match sector.checked_mul(512) {
            None => Err(bad("sector", "a sector number below 2^55", sector)),
            Some(_) if len > max_len(op) => Err(bad("bytes", "at most 1 GiB (1073741824 bytes)", len)),
            Some(off) if off.checked_add(len).is_none() => {
                Err(bad("sector", "offset + size below 2^64 bytes", sector))
            }
            Some(off) => Ok((off, len)),
        }
    }
}

impl CpuFile {
    /// The next request of this file, skipping other records; `None` at its end.
    fn read(
        &mut self,
        action: u32,
        diag: &mut Diag,
        several: bool,
    ) -> Result<Option<Pending>, TraceError> {
        loop {
            let Some(rec) = self.record(diag, several)? else {
                return Ok(None);
            };
            let Some(op) = rec.op(action) else {
                continue;
            };
            let (offset, len) = match rec.extent(op) {
                Ok(extent) => extent,
                Err(b) => {
                    diag.report(&self.name, rec.at, &b, b"", self.prefix(several))?;
                    continue;
                }
            };
            debug_assert!(op == TraceOp::Flush || len > 0, "a request with data has bytes");
            return Ok(Some(Pending {
                time_ns: rec.time_ns,
                op,
                offset,
                len,
                device: rec.device,
                pid: rec.pid,
                at: rec.at,
            }));
        }
    }

    /// The next record's header, its byte order told (first record) or checked (the rest), its
    /// payload skipped; `None` at the file's end or where it stops being blktrace.
    fn record(&mut self, diag: &mut Diag, several: bool) -> Result<Option<Record>, TraceError> {
        let mut hdr = [0u8; HEADER];
        let start = self.pos;
        let got = read_full(&mut self.input, &mut hdr).map_err(|e| self.io(e))?;
        if got == 0 {
            self.finished = true;
            return Ok(None);
        }
        if got < HEADER {
            return Err(TraceError::Truncated {
                file: self.name.clone(),
                offset: start,
            });
        }
        self.records += 1;
        let (order, version) = match (self.order, magic_order(&hdr)) {
            (None, Some((order, version))) => (order, version),
            (Some(order), _) => {
                let magic = order.u32(&hdr[0..4]);
                if magic & 0xffff_ff00 != MAGIC {
                    return self.give_up(diag, start, several, magic);
                }
                (order, magic & 0xff)
            }
            (None, None) => {
                let magic = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
                return self.give_up(diag, start, several, magic);
            }
        };
        if version != VERSION {
            let magic = order.u32(&hdr[0..4]);
            return self.give_up(diag, start, several, magic);
        }
        self.order = Some(order);
        let pdu_len = order.u16(&hdr[46..48]);
        if !skip(&mut self.input, u64::from(pdu_len)).map_err(|e| self.io(e))? {
            return Err(TraceError::Truncated {
                file: self.name.clone(),
                offset: start,
            });
        }
        self.pos = start + HEADER as u64 + u64::from(pdu_len);
        Ok(Some(Record {
            at: start,
            time_ns: order.u64(&hdr[8..16]),
            sector: order.u64(&hdr[16..24]),
            bytes: order.u32(&hdr[24..28]),
            act: order.u32(&hdr[28..32]),
            pid: order.u32(&hdr[32..36]),
            device: order.u32(&hdr[36..40]),
        }))
    }

    /// A record without the blktrace magic (or of another version): nothing after it can be
    /// trusted to start where a record starts, so the rest of the file is left unread.
    fn give_up(
        &mut self,
        diag: &mut Diag,
        start: u64,
        several: bool,
        magic: u32,
    ) -> Result<Option<Record>, TraceError> {
        self.finished = true;
        let bad = Bad {
            field: "magic",
            expected: "0x65617407 (blktrace version 7; the rest of the file is skipped)",
            found: Found::Text(format!("{magic:#010x}")),
            kind: BadKind::Syntax,
        };
        diag.report(&self.name, start, &bad, b"", self.prefix(several))?;
        Ok(None)
    }

    /// With several files, a bad record's reason names its file (its "line" is a byte offset).
    fn prefix(&self, several: bool) -> &str {
        if several {
            &self.name
        } else {
            ""
        }
    }

    fn io(&self, source: io::Error) -> TraceError {
        TraceError::Io {
            path: self.name.clone(),
            source,
        }
    }
}

/// Fills `buf` unless the input ends first; returns how many bytes were read.
fn read_full(input: &mut dyn BufRead, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let avail = match input.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            break;
        }
        let n = avail.len().min(buf.len() - got);
        buf[got..got + n].copy_from_slice(&avail[..n]);
        input.consume(n);
        got += n;
    }
    Ok(got)
}

/// Skips `n` bytes; `false` if the input ends first.
fn skip(input: &mut dyn BufRead, mut n: u64) -> io::Result<bool> {
    while n > 0 {
        let avail = match input.fill_buf() {
            Ok(a) => a.len(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail == 0 {
            return Ok(false);
        }
        let k = avail.min(usize::try_from(n).unwrap_or(usize::MAX));
        input.consume(k);
        n -= k as u64;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(act: u32, bytes: u32, sector: u64) -> Record {
        Record { at: 0, time_ns: 0, sector, bytes, act, pid: 1, device: 0 }
    }

    const ISSUE: u32 = 7;

    /// A record's operation, in the order the kernel's `fill_rwbs` tests the categories.
    #[test]
    fn operation_from_event_and_categories() {
        let op = |tc: u32, bytes: u32| record((tc << 16) | ISSUE, bytes, 8).op(ISSUE);
        assert_eq!(op(0, 4096), Some(TraceOp::Read));
        assert_eq!(op(TC_WRITE, 4096), Some(TraceOp::Write));
        assert_eq!(op(TC_DISCARD | TC_WRITE, 4096), Some(TraceOp::Trim));
        assert_eq!(op(TC_FLUSH | TC_WRITE, 0), Some(TraceOp::Flush));
        // No bytes and no flush: nothing to replay.
        assert_eq!(op(TC_WRITE, 0), None);
        // Notifications and SCSI passthrough are not requests; nor are other events.
        assert_eq!(op(TC_NOTIFY, 4096), None);
        assert_eq!(op(TC_PC | TC_WRITE, 4096), None);
        assert_eq!(record((TC_WRITE << 16) | 8, 4096, 8).op(ISSUE), None);
    }

    /// Extents in bytes, a flush's 0 and 0, and the values no request can have.
    #[test]
    fn extent_in_bytes_and_bounds() {
        let bad = |bytes: u32, sector: u64| record(0, bytes, sector).extent(TraceOp::Write).err();
        assert_eq!(record(0, 4096, 8).extent(TraceOp::Read).ok(), Some((4096, 4096)));
        assert_eq!(record(0, 0, 99).extent(TraceOp::Flush).ok(), Some((0, 0)));
        assert_eq!(bad(4096, 1 << 55).map(|b| b.field), Some("sector"));
        assert_eq!(bad((super::super::text::MAX_LEN + 512) as u32, 0).map(|b| b.field), Some("bytes"));
        assert_eq!(bad(4096, u64::MAX / 512).map(|b| b.field), Some("sector"));
    }
}
