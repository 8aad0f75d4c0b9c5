//! The column formats: the published block traces that give one request per line in fixed
//! columns, comma-separated (MSR Cambridge, SPC, Alibaba, Tencent CBS, SYSTOR '17) or blank-
//! separated (MQSim / DiskSim ASCII).
//!
//! Each parser reads its columns in order, converts times to nanoseconds and sectors to bytes
//! with integer arithmetic, checks the extent, and names its stream from the format's tenant
//! field and its placement from its placement field, if asked. A header line (`Timestamp,...`, `device_id,...`) is skipped. E.g. the MSR
//! line `128166385295514663,hm,0,Write,9056014336,2048,2833` is a 2 KiB write at byte
//! 9,056,014,336, at 12,816,638,529,551,466,300 ns (FILETIME ticks of 100 ns), of stream `hm`
//! (by host) or `hm_0` (by disk).
//!
//! Layouts and units per format: docs/TRACES.md, "Formats".

use std::io::Write as _;

use super::super::lex::{eq_ci, seconds_ns, uint, Csv, Words};
use super::super::{TenantBy, TraceOp};
use super::{extent, is_header, need, need_uint, no_more, scaled, sectors, Bad, Cx, Line, Raw, Unit};

// ---------------------------------------------------------------------------------------------
// MSR Cambridge

/// `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
pub(in crate::workload::trace) struct Msr {
    /// Scratch for the `host_disk` stream key.
    key: Vec<u8>,
}

impl Msr {
    pub(super) fn new() -> Msr {
        Msr { key: Vec::new() }
    }

    pub(super) fn parse(&mut self, line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
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
        need_uint(&mut f, line, "responsetime", "a response time in FILETIME ticks")?;
        no_more(&mut f, "7 fields")?;
        let time_ns = scaled(ticks, 100, ts_at)?;
        extent(offset, len, off_at, len_at, Unit::Bytes)?;
        let key = &mut self.key;
        let (stream, place) = cx.ids(|cx, side, by| match by {
            TenantBy::Host => cx.text(side, host_at.of(line), host_at),
            TenantBy::Disk => {
                key.clear();
                key.extend_from_slice(host_at.of(line));
                key.push(b'_');
                // Writing to a Vec cannot fail.
                let _ = write!(key, "{disk}");
                cx.text(side, key, disk_at)
            }
            _ => Ok(0),
        })?;
        Ok(Line::Request(Raw { time_ns, op, offset, len, stream, place }))
    }
}

// ---------------------------------------------------------------------------------------------
// SPC (UMass)

/// `ASU,LBA,Size,Opcode,Timestamp[,optional...]`, LBAs in 512-byte blocks, sizes in bytes, the
/// timestamp in seconds.
pub(super) fn spc(line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
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
    let time_ns = seconds_ns(ts_at.of(line)).ok_or_else(|| Bad::syntax("timestamp", "seconds (s.d)", ts_at))?;
    let offset = sectors(lba, "lba", lba_at)?;
    extent(offset, len, lba_at, len_at, Unit::Bytes)?;
    let (stream, place) = cx.ids(|cx, side, by| match by {
        TenantBy::Asu => cx.num(side, asu, asu_at, || format!("asu{asu}")),
        _ => Ok(0),
    })?;
    Ok(Line::Request(Raw { time_ns, op, offset, len, stream, place }))
}

// ---------------------------------------------------------------------------------------------
// MQSim / DiskSim ASCII

/// `time_ns device start_sector size_sectors type` (type 0 write, 1 read), blank-separated.
pub(super) fn mqsim(line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
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
    let (stream, place) = cx.ids(|cx, side, by| match by {
        TenantBy::Device => cx.num(side, dev, dev_at, || format!("dev{dev}")),
        _ => Ok(0),
    })?;
    Ok(Line::Request(Raw { time_ns, op, offset, len, stream, place }))
}

// ---------------------------------------------------------------------------------------------
// Alibaba block traces 2020

/// `device_id,opcode,offset,length,timestamp`: bytes, and microseconds.
pub(super) fn alibaba(line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
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
    let (stream, place) = cx.ids(|cx, side, by| match by {
        TenantBy::Device => cx.num(side, dev, dev_at, || format!("dev{dev}")),
        _ => Ok(0),
    })?;
    Ok(Line::Request(Raw { time_ns, op, offset, len, stream, place }))
}

// ---------------------------------------------------------------------------------------------
// Tencent CBS

/// `Timestamp,Offset,Size,IOType,VolumeID`: seconds, sectors, type 0 read / 1 write.
pub(super) fn tencent(line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
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
    let (stream, place) = cx.ids(|cx, side, by| match by {
        TenantBy::Volume => cx.num(side, vol, vol_at, || format!("vol{vol}")),
        _ => Ok(0),
    })?;
    Ok(Line::Request(Raw { time_ns, op, offset, len, stream, place }))
}

// ---------------------------------------------------------------------------------------------
// SYSTOR '17

/// `Timestamp,Response,IOType,LUN,Offset,Size`: seconds with nine decimals, bytes. A blank
/// IOType marks a request whose response was not captured; it is skipped.
pub(super) fn systor(line: &[u8], cx: &mut Cx) -> Result<Line, Bad> {
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
        return Err(Bad::syntax("response", "a response time in seconds", resp_at));
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
    let (stream, place) = cx.ids(|cx, side, by| match by {
        TenantBy::Device => cx.num(side, lun, lun_at, || format!("lun{lun}")),
        _ => Ok(0),
    })?;
    Ok(Line::Request(Raw { time_ns, op, offset, len, stream, place }))
}
