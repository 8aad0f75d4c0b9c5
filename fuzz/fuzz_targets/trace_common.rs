//! What every trace fuzz target checks: any bytes, read as a trace, give a reader or an error and
//! then requests or an error, never a panic; every request is one a device could see; the
//! bookkeeping adds up; the summary and the writers take whatever the reader gives.

use flashmux::workload::trace::{
    write_trace, BlkEvent, Format, ReadOptions, TenantBy, TraceInfo, TraceOp, TraceReader,
};

/// Reads `data` as `format` (`None`: detect it). The first byte chooses the stream field, the
/// placement field, strict mode and the blktrace event, so one input explores all of them.
pub fn read(data: &[u8], format: Option<Format>) {
    let Some((&choice, data)) = data.split_first() else {
        return;
    };
    let fields = format.map_or(&[TenantBy::None][..], Format::fields);
    let opts = ReadOptions {
        format,
        tenant_by: fields[usize::from(choice & 0x7) % fields.len()],
        place_by: fields[usize::from(choice >> 5) % fields.len()],
        strict: choice & 0x8 != 0,
        blktrace_event: [BlkEvent::Issue, BlkEvent::Complete, BlkEvent::Queue]
            [usize::from(choice >> 4) % 3],
    };
    let Ok(mut reader) = TraceReader::from_bytes("fuzz", data.to_vec(), &opts) else {
        return;
    };
    if let Some(f) = format {
        assert_eq!(reader.format(), f);
    }
    let mut info = TraceInfo::new();
    let mut records = Vec::new();
    let mut streams = 0;
    let mut places = 0;
    while let Ok(Some(r)) = reader.next_record() {
        if r.op == TraceOp::Flush {
            assert_eq!((r.offset, r.len), (0, 0), "{r:?}");
        } else {
            assert!(r.len > 0 && r.len <= 1 << 30, "{r:?}");
            assert!(r.offset.checked_add(r.len).is_some(), "{r:?}");
        }
        assert!(r.stream <= streams, "stream ids are dense: {r:?}");
        streams = streams.max(r.stream + 1);
        assert!(r.place <= places, "placement indices are dense: {r:?}");
        places = places.max(r.place + 1);
        info.add(&r);
        if records.len() < 64 {
            records.push(r);
        }
    }
    let bad = reader.bad_lines();
    assert!(bad.first.len() <= 5 && bad.first.len() as u64 <= bad.count);
    assert_eq!(info.requests, reader.records_read());
    info.name_streams(|s| reader.stream_name(s));
    let _ = info.to_string();
    for &f in Format::WRITABLE {
        let mut out = Vec::new();
        let name = |s: u32| reader.stream_name(s);
        write_trace(records.iter().copied(), f, &mut out, &name).expect("writing to memory");
    }
}
