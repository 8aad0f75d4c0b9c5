//! Tests of the trace readers, writers and summary: every format on a small fixture built here
//! (exact fields and units), bad lines, truncation, gzip, auto-detection, properties over random
//! input, and the real captured trace in `tests/data/traces/`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

const GIB: u64 = 1 << 30;

fn opts(format: Option<Format>, tenant_by: TenantBy) -> ReadOptions {
    ReadOptions {
        format,
        tenant_by,
        ..ReadOptions::default()
    }
}

/// A request (also for the summary's tests in `info.rs`).
pub(super) fn rec(time_ns: u64, op: TraceOp, offset: u64, len: u64, stream: u32) -> TraceRecord {
    TraceRecord {
        time_ns,
        op,
        offset,
        len,
        stream,
        place: 0,
    }
}

/// Reads a whole in-memory trace.
fn read(name: &str, data: impl Into<Vec<u8>>, o: &ReadOptions) -> (TraceReader, Vec<TraceRecord>) {
    let mut r =
        TraceReader::from_bytes(name, data.into(), o).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut out = Vec::new();
    while let Some(x) = r.next_record().unwrap_or_else(|e| panic!("{name}: {e}")) {
        out.push(x);
    }
    (r, out)
}

fn names(r: &TraceReader, n: u32) -> Vec<String> {
    (0..n).map(|s| r.stream_name(s)).collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Fixtures, one per format.

const BLKPARSE: &str = "\
  8,0    1        1     0.000000000   100  Q   R 2048 + 8 [fio]
  8,0    1        2     0.000001000   100  D   R 2048 + 8 [fio]
  8,16   0        3     0.000002500   200  D  WS 4096 + 16 [kworker/0:1]
  8,0    1        4     0.000003000   100  D  DS 8192 + 2048 [fstrim]
  8,0    1        5     0.000004000   100  D FWFS [jbd2/sda1-8]
  8,0    1        6     0.000005000   100  D   N [fio]
  8,0    0        7     0.000006000     0  C   R 2048 + 8 [0]
  8,0    1        8     1.000000001   100  D  RA 10 + 1 (      12) [fio]
  8,0    1        9     1.000000002   100  m   N cfq100 insert_request
CPU0 (sda):
 Reads Queued:           0,        0KiB\t Writes Queued:           0,        0KiB
 Read depth:            16        \t Write depth:            16
Total (sda):
 Reads Queued:           1,        4KiB\t Writes Queued:           0,        0KiB

Throughput (R/W): 4KiB/s / 0KiB/s
Events (sda): 9 entries
Skips: 0 forward (0 -   0.0%)
";

const FIO_V2: &str = "\
fio version 2 iolog
/dev/sda add
/dev/sda open
/dev/sda read 0 4096
/dev/sda wait 1500 0
/dev/sdb add
/dev/sdb open
/dev/sdb write 8192 512
/dev/sda trim 1048576 65536
/dev/sda sync 0 0
/dev/sda wait 500
/dev/sda datasync 0 0
/dev/sda close
/dev/sdb close
";

const FIO_V3: &str = "\
fio version 3 iolog
0 /dev/nvme0n1 add
0 /dev/nvme0n1 open
10 /dev/nvme0n1 write 4096 4096
25 /dev/nvme0n1 read 0 8192
1000025 /dev/nvme0n1 trim 0 4096
1000030 /dev/nvme0n1 close
";

const MSR: &str = "\
128166385295514663,hm,0,Write,9056014336,2048,2833
128166385295614663,hm,1,Read,0,4096,100
128166385295524663,prn,0,Read,512,512,50
";

const SPC: &str = "\
0,303567,3584,w,0.000000
1,1000,4096,R,0.551706,Alpha/NT
0, 20939840 , 8192, W, 1.250720,0x123,5.99,test
";

const MQSIM: &str = "\
938513000 4 264719034 16 0
938514000 1 0 8 1
";

const ALIBABA: &str = "\
0,R,126703644672,4096,1577808000000626
7,W,4096,512,1577808000001626
";

const TENCENT: &str = "\
1538323200,1024,8,0,1283
1538323201,2048,16,1,1284
";

const SYSTOR: &str = "\
Timestamp,Response,IOType,LUN,Offset,Size
1456135200.013118000,0.000806000,R,0,899056122368,131072
1456135200.013200000,0.001,,4,0,4096
1456135200.113118000,0.001,W,4,8192,4096
";

// blktrace records, built field by field.
const TC_READ: u32 = 1;
const TC_WRITE: u32 = 1 << 1;
const TC_FLUSH: u32 = 1 << 2;
const TC_SYNC: u32 = 1 << 3;
const TC_QUEUE: u32 = 1 << 4;
const TC_ISSUE: u32 = 1 << 6;
const TC_COMPLETE: u32 = 1 << 7;
const TC_FS: u32 = 1 << 8;
const TC_PC: u32 = 1 << 9;
const TC_NOTIFY: u32 = 1 << 10;
const TC_DISCARD: u32 = 1 << 13;
const TA_CGROUP: u32 = 1 << 8;

fn act(code: u32, tc: u32) -> u32 {
    code | (tc << 16)
}

struct Blk {
    time: u64,
    sector: u64,
    bytes: u32,
    action: u32,
    pid: u32,
    device: u32,
    pdu: Vec<u8>,
}

fn blk(time: u64, sector: u64, bytes: u32, action: u32) -> Blk {
    Blk {
        time,
        sector,
        bytes,
        action,
        pid: 10,
        device: 8 << 20,
        pdu: Vec::new(),
    }
}

fn encode(records: &[Blk], big_endian: bool, version: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for (seq, r) in records.iter().enumerate() {
        let mut put = |v: u64, n: usize| {
            let b = v.to_le_bytes();
            if big_endian {
                out.extend(b[..n].iter().rev());
            } else {
                out.extend_from_slice(&b[..n]);
            }
        };
        put(u64::from(0x6561_7400 | version), 4);
        put(seq as u64, 4);
        put(r.time, 8);
        put(r.sector, 8);
        put(u64::from(r.bytes), 4);
        put(u64::from(r.action), 4);
        put(u64::from(r.pid), 4);
        put(u64::from(r.device), 4);
        put(0, 4);
        put(0, 2);
        put(r.pdu.len() as u64, 2);
        out.extend_from_slice(&r.pdu);
    }
    out
}

/// Two per-CPU files of a device `sda`.
fn blktrace_cpus() -> (Vec<u8>, Vec<u8>) {
    let d = |tc| act(7, TC_ISSUE | TC_FS | tc);
    let mut process = blk(0, 0, 0, act(0, TC_NOTIFY));
    process.pdu = b"fio\0".to_vec();
    let mut cgroup = blk(450, 64, 4096, d(TC_READ) | TA_CGROUP);
    cgroup.pdu = vec![1, 2, 3, 4, 5, 6, 7, 8];
    let mut write = blk(400, 16, 8192, d(TC_WRITE | TC_SYNC));
    write.pid = 20;
    write.device = (8 << 20) | 16;
    let cpu0 = encode(
        &[
            process,
            blk(100, 8, 4096, act(1, TC_QUEUE | TC_READ)),
            blk(150, 8, 4096, d(TC_READ)),
            write,
            blk(500, 8, 4096, act(8, TC_COMPLETE | TC_READ)),
        ],
        false,
        7,
    );
    let cpu1 = encode(
        &[
            blk(200, 1000, 1 << 20, d(TC_DISCARD | TC_WRITE)),
            blk(300, 0, 0, d(TC_FLUSH | TC_READ)),
            blk(350, 0, 36, d(TC_PC | TC_READ)),
            blk(360, 0, 0, d(TC_WRITE)),
            blk(400, 32, 4096, d(TC_READ)),
            cgroup,
        ],
        false,
        7,
    );
    (cpu0, cpu1)
}

/// A directory of its own under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("flashmux-trace-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn file(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, data).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read_paths(paths: &[PathBuf], o: &ReadOptions) -> (TraceReader, Vec<TraceRecord>) {
    let mut r = TraceReader::open(paths, o).unwrap();
    let recs: Vec<TraceRecord> = r.by_ref().map(Result::unwrap).collect();
    (r, recs)
}

// ---------------------------------------------------------------------------------------------
// Names and fields.

#[test]
fn format_and_field_names_round_trip() {
    for &f in Format::ALL {
        assert_eq!(Format::from_name(f.name()), Some(f));
        assert_eq!(f.fields()[0], TenantBy::None);
    }
    let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(
        names,
        [
            "blktrace",
            "blkparse",
            "fio-iolog",
            "msr",
            "spc",
            "mqsim",
            "alibaba",
            "tencent",
            "systor"
        ]
    );
    for t in TenantBy::ALL {
        assert_eq!(TenantBy::from_name(t.name()), Some(t));
    }
    assert_eq!(Format::from_name("xperf"), None);
    assert_eq!(BlkEvent::from_name("C"), Some(BlkEvent::Complete));
    assert_eq!(BlkEvent::default().letter(), "D");
}

#[test]
fn readers_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<TraceReader>();
    send::<TraceInfo>();
    send::<TraceError>();
}

#[test]
fn a_field_the_format_lacks_is_refused_with_the_fields_it_has() {
    let err = TraceReader::from_bytes("t.csv", MSR.into(), &opts(None, TenantBy::Asu)).unwrap_err();
    assert!(matches!(err, TraceError::NoSuchField { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "a msr trace has no asu field to split streams by; it has: none, host, disk"
    );
}

// ---------------------------------------------------------------------------------------------
// Each format: exact fields and units.

#[test]
fn blktrace_per_cpu_files_are_merged_by_time() {
    let (cpu0, cpu1) = blktrace_cpus();
    let dir = TempDir::new("merge");
    dir.file("sda.blktrace.0", &cpu0);
    let one = dir.file("sda.blktrace.1", &cpu1);
    dir.file("sdb.blktrace.0", b"not a sibling");
    // Named by one file, the other is found.
    let (r, recs) = read_paths(&[one], &opts(None, TenantBy::Device));
    assert_eq!(r.format(), Format::Blktrace);
    let dev0 = 0;
    let dev16 = 1;
    assert_eq!(
        recs,
        [
            rec(0, TraceOp::Read, 8 * 512, 4096, dev0),
            rec(50, TraceOp::Trim, 1000 * 512, 1 << 20, dev0),
            rec(150, TraceOp::Flush, 0, 0, dev0),
            // A tie in time: the lower CPU's file first.
            rec(250, TraceOp::Write, 16 * 512, 8192, dev16),
            rec(250, TraceOp::Read, 32 * 512, 4096, dev0),
            rec(300, TraceOp::Read, 64 * 512, 4096, dev0),
        ]
    );
    assert_eq!(names(&r, 2), ["dev8,0", "dev8,16"]);
    assert_eq!(r.lines_read(), 11);
    assert_eq!(r.records_read(), 6);
    assert_eq!(r.bad_lines().count, 0);

    let (r, recs) = read_paths(&[dir.0.join("sda.blktrace.0")], &opts(None, TenantBy::Pid));
    assert_eq!(recs.len(), 6);
    assert_eq!(names(&r, 2), ["pid10", "pid20"]);
}

#[test]
fn blktrace_reads_the_chosen_event_in_either_byte_order() {
    let records = [
        blk(1_000, 8, 4096, act(1, TC_QUEUE | TC_WRITE)),
        blk(2_000, 8, 4096, act(7, TC_ISSUE | TC_WRITE)),
        blk(9_000, 8, 4096, act(8, TC_COMPLETE | TC_WRITE)),
    ];
    for big in [false, true] {
        let data = encode(&records, big, 7);
        for (event, expect_time) in [
            (BlkEvent::Queue, 0),
            (BlkEvent::Issue, 0),
            (BlkEvent::Complete, 0),
        ] {
            let o = ReadOptions {
                blktrace_event: event,
                ..ReadOptions::default()
            };
            let (r, recs) = read("x.blktrace.0", data.clone(), &o);
            assert_eq!(r.format(), Format::Blktrace);
            assert_eq!(
                recs,
                [rec(expect_time, TraceOp::Write, 4096, 4096, 0)],
                "{event:?}"
            );
        }
    }
}

#[test]
fn blktrace_of_another_version_is_refused() {
    let data = encode(&[blk(0, 0, 4096, act(7, TC_ISSUE | TC_READ))], false, 8);
    let err = TraceReader::from_bytes("new.blktrace.0", data, &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, TraceError::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("version 8"), "{err}");
}

#[test]
fn blktrace_cut_short_is_an_error_at_the_record_offset() {
    let d = act(7, TC_ISSUE | TC_READ);
    let mut data = encode(&[blk(0, 0, 4096, d), blk(10, 8, 4096, d)], false, 7);
    let head = data[..20].to_vec();
    data.extend_from_slice(&head);
    let mut r = TraceReader::from_bytes("cut.blktrace.0", data, &ReadOptions::default()).unwrap();
    assert!(r.next_record().unwrap().is_some());
    assert!(r.next_record().unwrap().is_some());
    match r.next_record() {
        Err(TraceError::Truncated { file, offset }) => {
            assert_eq!((file.as_str(), offset), ("cut.blktrace.0", 96));
        }
        other => panic!("{other:?}"),
    }
    assert!(r.next_record().unwrap().is_none());

    // A payload cut short: the record's own offset.
    let mut with_pdu = blk(0, 0, 4096, d);
    with_pdu.pdu = vec![0; 16];
    let mut data = encode(&[blk(0, 0, 4096, d), with_pdu], false, 7);
    data.truncate(data.len() - 3);
    let mut r = TraceReader::from_bytes("pdu.blktrace.0", data, &ReadOptions::default()).unwrap();
    assert!(r.next_record().unwrap().is_some());
    let err = r.next_record().unwrap_err();
    assert!(
        matches!(err, TraceError::Truncated { offset: 48, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "pdu.blktrace.0: the record at byte 48 is cut short by the end of the file"
    );
}

#[test]
fn blktrace_garbage_mid_file_is_a_bad_record_and_ends_the_file() {
    let d = act(7, TC_ISSUE | TC_READ);
    let mut data = encode(&[blk(0, 0, 4096, d)], false, 7);
    data.extend_from_slice(&[0xaa; 48]);
    data.extend(encode(&[blk(5, 8, 4096, d)], false, 7));
    let (r, recs) = read("bad.blktrace.0", data.clone(), &ReadOptions::default());
    assert_eq!(recs.len(), 1);
    assert_eq!(r.bad_lines().count, 1);
    assert_eq!(r.bad_lines().first[0].line, 48);
    assert!(
        r.bad_lines().first[0].reason.contains("0xaaaaaaaa"),
        "{:?}",
        r.bad_lines()
    );

    let strict = ReadOptions {
        strict: true,
        ..ReadOptions::default()
    };
    let mut r = TraceReader::from_bytes("bad.blktrace.0", data, &strict).unwrap();
    r.next_record().unwrap();
    let err = r.next_record().unwrap_err();
    assert!(
        matches!(
            err,
            TraceError::Bad {
                line: 48,
                field: "magic",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn blkparse_reads_the_chosen_event_and_ignores_the_summary() {
    let (r, recs) = read("sda.txt", BLKPARSE, &opts(None, TenantBy::Device));
    assert_eq!(r.format(), Format::Blkparse);
    assert_eq!(
        recs,
        [
            rec(0, TraceOp::Read, 2048 * 512, 4096, 0),
            rec(1_500, TraceOp::Write, 4096 * 512, 8192, 1),
            rec(2_000, TraceOp::Trim, 8192 * 512, 1 << 20, 0),
            rec(3_000, TraceOp::Flush, 0, 0, 0),
            rec(999_999_001, TraceOp::Read, 5120, 512, 0),
        ]
    );
    assert_eq!(names(&r, 2), ["dev8,0", "dev8,16"]);
    assert_eq!(r.bad_lines().count, 0, "{:?}", r.bad_lines());
    assert_eq!(r.lines_read(), 18);

    let (r, recs) = read(
        "sda.txt",
        BLKPARSE,
        &opts(Some(Format::Blkparse), TenantBy::Pid),
    );
    assert_eq!(
        recs.iter().map(|r| r.stream).collect::<Vec<_>>(),
        [0, 1, 0, 0, 0]
    );
    assert_eq!(names(&r, 2), ["pid100", "pid200"]);

    for (event, offset) in [
        (BlkEvent::Complete, 2048 * 512),
        (BlkEvent::Queue, 2048 * 512),
    ] {
        let o = ReadOptions {
            blktrace_event: event,
            ..ReadOptions::default()
        };
        let (_, recs) = read("sda.txt", BLKPARSE, &o);
        assert_eq!(recs, [rec(0, TraceOp::Read, offset, 4096, 0)], "{event:?}");
    }
}

#[test]
fn fio_iolog_v2_waits_advance_time_in_microseconds() {
    let (r, recs) = read("v2.log", FIO_V2, &opts(None, TenantBy::Device));
    assert_eq!(r.format(), Format::FioIolog);
    assert_eq!(
        recs,
        [
            rec(0, TraceOp::Read, 0, 4096, 0),
            rec(1_500_000, TraceOp::Write, 8192, 512, 1),
            rec(1_500_000, TraceOp::Trim, 1 << 20, 65536, 0),
            rec(1_500_000, TraceOp::Flush, 0, 0, 0),
            rec(2_000_000, TraceOp::Flush, 0, 0, 0),
        ]
    );
    assert_eq!(names(&r, 2), ["/dev/sda", "/dev/sdb"]);
}

#[test]
fn fio_iolog_v3_timestamps_are_microseconds() {
    let (_, recs) = read("v3.log", FIO_V3, &opts(None, TenantBy::None));
    assert_eq!(
        recs,
        [
            rec(0, TraceOp::Write, 4096, 4096, 0),
            rec(15_000, TraceOp::Read, 0, 8192, 0),
            rec(1_000_015_000, TraceOp::Trim, 0, 4096, 0),
        ]
    );
    // `wait` has no place in version 3.
    let text = format!("{FIO_V3}1000040 /dev/nvme0n1 wait 10 0\n");
    let (r, recs) = read("v3.log", text, &ReadOptions::default());
    assert_eq!(recs.len(), 3);
    assert_eq!(r.bad_lines().first[0].line, 8);
    assert!(
        r.bad_lines().first[0].reason.contains("'wait'"),
        "{:?}",
        r.bad_lines()
    );
}

#[test]
fn msr_filetime_ticks_are_100_ns_and_streams_are_host_disk() {
    let (r, recs) = read("hm_0.csv", MSR, &opts(None, TenantBy::Disk));
    assert_eq!(r.format(), Format::Msr);
    assert_eq!(
        recs,
        [
            rec(0, TraceOp::Write, 9_056_014_336, 2048, 0),
            rec(10_000_000, TraceOp::Read, 0, 4096, 1),
            rec(1_000_000, TraceOp::Read, 512, 512, 2),
        ]
    );
    assert_eq!(names(&r, 3), ["hm_0", "hm_1", "prn_0"]);
    assert_eq!(r.out_of_order(), 1);

    let (r, recs) = read("hm_0.csv", MSR, &opts(None, TenantBy::Host));
    assert_eq!(recs.iter().map(|r| r.stream).collect::<Vec<_>>(), [0, 0, 1]);
    assert_eq!(names(&r, 2), ["hm", "prn"]);

    // A header line, if a copy has one, is not a bad line.
    let with_header = format!("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n{MSR}");
    let (r, recs) = read("hm_0.csv", with_header, &ReadOptions::default());
    assert_eq!((recs.len(), r.bad_lines().count), (3, 0));
}

#[test]
fn spc_lbas_are_512_byte_blocks_and_times_decimal_seconds() {
    let (r, recs) = read("Financial1.spc", SPC, &opts(None, TenantBy::Asu));
    assert_eq!(r.format(), Format::Spc);
    assert_eq!(
        recs,
        [
            rec(0, TraceOp::Write, 303_567 * 512, 3584, 0),
            rec(551_706_000, TraceOp::Read, 1000 * 512, 4096, 1),
            rec(1_250_720_000, TraceOp::Write, 20_939_840 * 512, 8192, 0),
        ]
    );
    assert_eq!(names(&r, 2), ["asu0", "asu1"]);
}

#[test]
fn mqsim_times_are_ns_and_sizes_sectors() {
    let (r, recs) = read("trace.txt", MQSIM, &opts(None, TenantBy::Device));
    assert_eq!(r.format(), Format::Mqsim);
    assert_eq!(
        recs,
        [
            rec(0, TraceOp::Write, 264_719_034 * 512, 16 * 512, 0),
            rec(1_000, TraceOp::Read, 0, 8 * 512, 1),
        ]
    );
    assert_eq!(names(&r, 2), ["dev4", "dev1"]);
}

#[test]
fn alibaba_times_are_microseconds_and_sizes_bytes() {
    let (r, recs) = read("io_traces.csv", ALIBABA, &opts(None, TenantBy::Device));
    assert_eq!(r.format(), Format::Alibaba);
    assert_eq!(
        recs,
        [
            rec(0, TraceOp::Read, 126_703_644_672, 4096, 0),
            rec(1_000_000, TraceOp::Write, 4096, 512, 1),
        ]
    );
    assert_eq!(names(&r, 2), ["dev0", "dev7"]);
}

#[test]
fn tencent_times_are_seconds_and_sizes_sectors() {
    let (r, recs) = read("2018-10-01-01", TENCENT, &opts(None, TenantBy::Volume));
    assert_eq!(r.format(), Format::Tencent);
    assert_eq!(
        recs,
        [
            rec(0, TraceOp::Read, 1024 * 512, 8 * 512, 0),
            rec(1_000_000_000, TraceOp::Write, 2048 * 512, 16 * 512, 1),
        ]
    );
    assert_eq!(names(&r, 2), ["vol1283", "vol1284"]);
}

#[test]
fn systor_times_are_decimal_seconds_and_blank_types_skipped() {
    let (r, recs) = read("2016022219-LUN4.csv", SYSTOR, &opts(None, TenantBy::Device));
    assert_eq!(r.format(), Format::Systor);
    assert_eq!(
        recs,
        [
            rec(0, TraceOp::Read, 899_056_122_368, 131_072, 0),
            rec(100_000_000, TraceOp::Write, 8192, 4096, 1),
        ]
    );
    assert_eq!(names(&r, 2), ["lun0", "lun4"]);
    assert_eq!(r.bad_lines().count, 0);
    assert_eq!(r.stream_name(0), "lun0");
}

#[test]
fn without_a_tenant_field_there_is_one_stream_named_trace() {
    let (r, recs) = read("t", TENCENT, &ReadOptions::default());
    assert!(recs.iter().all(|r| r.stream == 0));
    assert_eq!(r.stream_name(0), "trace");
}

// ---------------------------------------------------------------------------------------------
// Placement by a field (`place_by`).

/// The placement indices and the values they name, reading `data` with `place_by` (and
/// `tenant_by`), and the records' streams.
fn placed(
    format: Format,
    data: impl Into<Vec<u8>>,
    tenant_by: TenantBy,
    place_by: TenantBy,
) -> (Vec<u32>, Vec<String>, Vec<u32>) {
    let o = ReadOptions { format: Some(format), tenant_by, place_by, ..ReadOptions::default() };
    let (r, recs) = read(format.name(), data, &o);
    assert_eq!(r.bad_lines().count, 0, "{format}: {:?}", r.bad_lines());
    let places: Vec<u32> = recs.iter().map(|x| x.place).collect();
    let n = if place_by == TenantBy::None { 0 } else { places.iter().max().map_or(0, |&m| m + 1) };
    let names = (0..n).map(|p| r.place_name(p).expect("a value's name").to_string()).collect();
    assert_eq!(r.place_name(n), None);
    (places, names, recs.iter().map(|x| x.stream).collect())
}

/// Every format numbers the values of each field it has 0, 1, 2, … as they first appear.
#[test]
fn place_by_numbers_each_format_s_values_in_first_appearance_order() {
    use TenantBy::*;
    let blkparse = "\
  8,0    1        1     0.000000000   100  D   W 0 + 8 [a]
  8,16   1        2     0.000001000   200  D   W 8 + 8 [b]
  8,0    1        3     0.000002000   300  D   R 16 + 8 [c]
  8,32   1        4     0.000003000   200  D   W 24 + 8 [d]
";
    let fio = "fio version 3 iolog\n0 /dev/b add\n0 /dev/a add\n10 /dev/b write 0 4096\n\
               20 /dev/a write 4096 4096\n30 /dev/b read 0 4096\n";
    let msr = "\
128166385295514663,hm,1,Write,0,4096,1
128166385295524663,prn,0,Write,4096,4096,1
128166385295534663,hm,0,Read,8192,4096,1
128166385295544663,hm,1,Write,0,4096,1
";
    // (format, trace, field, the placement of each request, the values they name)
    type Case<'a> = (Format, &'a str, TenantBy, &'a [u32], &'a [&'a str]);
    let cases: [Case; 11] = [
        (Format::Blkparse, blkparse, Device, &[0, 1, 0, 2], &["dev8,0", "dev8,16", "dev8,32"]),
        (Format::Blkparse, blkparse, Pid, &[0, 1, 2, 1], &["pid100", "pid200", "pid300"]),
        (Format::FioIolog, fio, Device, &[0, 1, 0], &["/dev/b", "/dev/a"]),
        (Format::Msr, msr, Host, &[0, 1, 0, 0], &["hm", "prn"]),
        (Format::Msr, msr, Disk, &[0, 1, 2, 0], &["hm_1", "prn_0", "hm_0"]),
        (Format::Spc, "3,0,4096,w,0.0\n1,8,4096,w,0.1\n3,16,4096,r,0.2\n", Asu, &[0, 1, 0], &["asu3", "asu1"]),
        (Format::Mqsim, "1000 4 0 8 0\n2000 2 8 8 0\n3000 4 16 8 1\n", Device, &[0, 1, 0], &["dev4", "dev2"]),
        (Format::Alibaba, "7,W,0,4096,1000\n3,W,4096,4096,2000\n7,R,0,4096,3000\n", Device, &[0, 1, 0], &["dev7", "dev3"]),
        (
            Format::Tencent,
            "1538323200,0,8,1,55\n1538323201,8,8,1,12\n1538323202,16,8,0,55\n1538323203,24,8,1,9\n",
            Volume,
            &[0, 1, 0, 2],
            &["vol55", "vol12", "vol9"],
        ),
        (
            Format::Systor,
            "1456135200.0,0.001,W,4,0,4096\n1456135200.1,0.001,W,2,4096,4096\n1456135200.2,0.001,R,4,0,4096\n",
            Device,
            &[0, 1, 0],
            &["lun4", "lun2"],
        ),
        (Format::Blkparse, blkparse, None, &[0, 0, 0, 0], &[]),
    ];
    for (format, data, field, want, want_names) in cases {
        let (places, names, streams) = placed(format, data, TenantBy::None, field);
        assert_eq!(places, want, "{format} by {}", field.name());
        assert_eq!(names, want_names, "{format} by {}", field.name());
        assert!(streams.iter().all(|&s| s == 0), "{format}: placement does not split streams");
        // By the same field, placements and streams are the same numbering.
        let (places, _, streams) = placed(format, data, field, field);
        assert_eq!(places, streams, "{format} by {}", field.name());
    }
    // blktrace's binary records: device 8,0 pid 10, device 8,16 pid 20, device 8,0 pid 30.
    let w = act(7, TC_ISSUE | TC_FS | TC_WRITE);
    let mut recs = vec![blk(100, 0, 4096, w), blk(200, 8, 4096, w), blk(300, 16, 4096, w)];
    recs[1].device = (8 << 20) | 16;
    recs[1].pid = 20;
    recs[2].pid = 30;
    let data = encode(&recs, false, 7);
    let (places, names, _) = placed(Format::Blktrace, data.clone(), None, Device);
    assert_eq!((places, names), (vec![0, 1, 0], vec!["dev8,0".to_string(), "dev8,16".into()]));
    let (places, names, streams) = placed(Format::Blktrace, data, Device, Pid);
    assert_eq!((places, names), (vec![0, 1, 2], vec!["pid10".to_string(), "pid20".into(), "pid30".into()]));
    assert_eq!(streams, [0, 1, 0], "split by device, placed by pid");
}

/// `place_by` is independent of `tenant_by`: MSR split by host and placed by disk.
#[test]
fn place_by_is_independent_of_tenant_by() {
    let msr = "\
128166385295514663,hm,1,Write,0,4096,1
128166385295524663,prn,0,Write,4096,4096,1
128166385295534663,hm,0,Write,8192,4096,1
128166385295544663,prn,0,Write,0,4096,1
128166385295554663,hm,1,Write,0,4096,1
";
    let (places, names, streams) = placed(Format::Msr, msr, TenantBy::Host, TenantBy::Disk);
    assert_eq!(streams, [0, 1, 0, 1, 0]);
    assert_eq!(places, [0, 1, 2, 1, 0]);
    assert_eq!(names, ["hm_1", "prn_0", "hm_0"]);
    // And the other way round: split by disk, placed by host.
    let (places, names, streams) = placed(Format::Msr, msr, TenantBy::Disk, TenantBy::Host);
    assert_eq!(streams, [0, 1, 2, 1, 0]);
    assert_eq!(places, [0, 1, 0, 1, 0]);
    assert_eq!(names, ["hm", "prn"]);
}

/// Every format takes every field it lists for placement as it does for streams, on the
/// fixtures above (blktrace's too).
#[test]
fn every_format_places_by_every_field_it_has() {
    let (cpu0, _) = blktrace_cpus();
    let fixtures: [(Format, Vec<u8>); 10] = [
        (Format::Blktrace, cpu0),
        (Format::Blkparse, BLKPARSE.into()),
        (Format::FioIolog, FIO_V2.into()),
        (Format::FioIolog, FIO_V3.into()),
        (Format::Msr, MSR.into()),
        (Format::Spc, SPC.into()),
        (Format::Mqsim, MQSIM.into()),
        (Format::Alibaba, ALIBABA.into()),
        (Format::Tencent, TENCENT.into()),
        (Format::Systor, SYSTOR.into()),
    ];
    for (format, data) in fixtures {
        for &field in format.fields() {
            let o = ReadOptions { format: Some(format), tenant_by: field, place_by: field, ..ReadOptions::default() };
            let (r, recs) = read(format.name(), data.clone(), &o);
            assert!(!recs.is_empty());
            for x in &recs {
                assert_eq!(x.place, x.stream, "{format} by {}", field.name());
                if field != TenantBy::None {
                    assert_eq!(r.place_name(x.place), Some(r.stream_name(x.stream).as_str()));
                }
            }
        }
    }
}

#[test]
fn a_place_by_field_the_format_lacks_is_refused_with_the_fields_it_has() {
    let o = ReadOptions { place_by: TenantBy::Asu, ..opts(None, TenantBy::Host) };
    let err = TraceReader::from_bytes("t.csv", MSR.into(), &o).unwrap_err();
    assert!(matches!(err, TraceError::NoPlaceField { .. }), "{err}");
    assert_eq!(err.to_string(), "a msr trace has no asu field to place writes by; it has: none, host, disk");
}

/// At most 65,535 values are placements (each fits a 16-bit stream identifier k + 1): the
/// request of one more is a bad line, naming the key to change.
#[test]
fn more_placement_values_than_fit_a_stream_identifier_are_bad_lines() {
    let mut text = String::new();
    for dev in 0..=65_535u32 {
        text += &format!("{dev} {dev} 0 8 0\n");
    }
    let o = ReadOptions { format: Some(Format::Mqsim), place_by: TenantBy::Device, ..ReadOptions::default() };
    let (r, recs) = read("many", text, &o);
    assert_eq!(recs.len(), 65_535);
    assert_eq!(recs.last().map(|x| x.place), Some(65_534));
    assert_eq!(r.bad_lines().count, 1);
    let why = &r.bad_lines().first[0];
    assert_eq!(why.line, 65_536);
    assert!(why.reason.contains("'placement': expected at most 65535 distinct placements (choose another place_by)"), "{}", why.reason);
}

// ---------------------------------------------------------------------------------------------
// Bad lines, times, empty traces.

#[test]
fn bad_lines_are_counted_and_the_first_five_kept_with_their_line() {
    let text = "\
# MSR trace with problems
128166385295514663,hm,0,Write,9056014336,2048,2833

128166385295514664,hm,0,Rd,0,4096,1
128166385295514665,hm,0,Read,0,0,1
128166385295514666,hm,0,Read,0,4096
128166385295514667,hm,x,Read,0,4096,1
128166385295514668,hm,0,Read,18446744073709551615,4096,1
128166385295514669,hm,0,Read,0,2147483648,1
128166385295514670,hm,0,Read,0,4096,1
128166385295514671,hm,0,Read,0,4096,1,9
";
    let o = opts(Some(Format::Msr), TenantBy::None);
    let (r, recs) = read("bad.csv", text, &o);
    assert_eq!(recs.len(), 2);
    let bad = r.bad_lines();
    assert_eq!(bad.count, 7);
    let lines: Vec<u64> = bad.first.iter().map(|b| b.line).collect();
    assert_eq!(lines, [4, 5, 6, 7, 8]);
    assert_eq!(
        bad.first[0].reason,
        "field 'type': expected Read or Write, found 'Rd'"
    );
    assert_eq!(
        bad.first[1].reason,
        "field 'size': expected a size above 0, found '0'"
    );
    assert_eq!(
        bad.first[2].reason,
        "field 'responsetime': expected a response time in FILETIME ticks, found ''"
    );
    assert_eq!(
        bad.first[3].reason,
        "field 'disknumber': expected a disk number, found 'x'"
    );
    assert_eq!(
        bad.first[4].reason,
        "field 'offset': expected offset + size below 2^64 bytes, found '18446744073709551615'"
    );
    assert_eq!(r.lines_read(), 11);

    let strict = ReadOptions { strict: true, ..o };
    let mut r = TraceReader::from_bytes("bad.csv", text.into(), &strict).unwrap();
    r.next_record().unwrap();
    let err = r.next_record().unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad.csv:4: field 'type': expected Read or Write, found 'Rd'"
    );
    assert!(r.next_record().unwrap().is_none(), "nothing after an error");
}

#[test]
fn sizes_over_a_gib_and_extents_past_2_64_are_bad() {
    let text = format!(
        "0 0 0 {} 1\n0 0 0 {} 1\n0 0 36028797018963967 2 1\n",
        GIB / 512,
        GIB / 512 + 1
    );
    let (r, recs) = read("m", text, &opts(Some(Format::Mqsim), TenantBy::None));
    assert_eq!(recs, [rec(0, TraceOp::Read, 0, GIB, 0)]);
    assert_eq!(r.bad_lines().count, 2);
    assert!(
        r.bad_lines().first[0].reason.contains("at most 1 GiB"),
        "{:?}",
        r.bad_lines()
    );
    assert!(
        r.bad_lines().first[1].reason.contains("2^64"),
        "{:?}",
        r.bad_lines()
    );
}

#[test]
fn a_trim_may_cover_up_to_a_tib_as_mkfs_discards_do() {
    // mkfs.ext4's discards through NBD, as `serve --record` writes them: 2 GiB each.
    let two = 2 * GIB;
    let text = format!(
        "fio version 3 iolog\n0 d add\n0 d open\n0 d trim 0 {two}\n1 d trim {two} {two}\n2 d write 0 {two}\n3 d trim 0 {}\n",
        (1u64 << 40) + 4096
    );
    let (r, recs) = read("i", text, &opts(Some(Format::FioIolog), TenantBy::None));
    assert_eq!(recs, [rec(0, TraceOp::Trim, 0, two, 0), rec(1_000, TraceOp::Trim, two, two, 0)]);
    assert_eq!(r.bad_lines().count, 2, "a 2 GiB write and a trim over 1 TiB: {:?}", r.bad_lines());
    assert!(r.bad_lines().first[0].reason.contains("at most 1 GiB"), "{:?}", r.bad_lines());
    assert!(r.bad_lines().first[1].reason.contains("at most 1 TiB"), "{:?}", r.bad_lines());
    // blkparse: a discard (D in RWBS) of 4,194,304 sectors (2 GiB) is read.
    let line = "259,0    1        1     0.000000000  1234  D   D 0 + 4194304 [mkfs.ext4]\n";
    let (r, recs) = read("b", line, &opts(Some(Format::Blkparse), TenantBy::None));
    assert_eq!(recs, [rec(0, TraceOp::Trim, 0, two, 0)], "{:?}", r.bad_lines());
}

#[test]
fn an_overlong_line_is_one_bad_line() {
    let mut text = String::from("0 0 0 8 1\n");
    text.push_str(&"9".repeat(200_000));
    text.push_str("\n1000 0 8 8 0\n");
    let (r, recs) = read("m", text, &opts(Some(Format::Mqsim), TenantBy::None));
    assert_eq!(recs.len(), 2);
    assert_eq!(r.bad_lines().count, 1);
    assert_eq!(r.bad_lines().first[0].line, 2);
    assert!(
        r.bad_lines().first[0].reason.contains("65536"),
        "{:?}",
        r.bad_lines()
    );
}

#[test]
fn times_start_at_zero_and_earlier_times_saturate_and_count() {
    let text = "100 0 0 8 1\n50 0 0 8 1\n200 0 0 8 1\n20 0 0 8 1\n30 0 0 8 1\n";
    let (r, recs) = read("m", text, &ReadOptions::default());
    let times: Vec<u64> = recs.iter().map(|r| r.time_ns).collect();
    assert_eq!(times, [0, 0, 100, 0, 0]);
    // 50 < 100, 20 < 200, and 30 is after 20 but before the first request.
    assert_eq!(r.out_of_order(), 3);
}

#[test]
fn a_trace_without_requests_is_empty() {
    for text in [
        "",
        "# nothing\n\n   \n",
        "fio version 3 iolog\n0 /dev/sda add\n",
    ] {
        let err = TraceReader::from_bytes("e", text.into(), &ReadOptions::default()).unwrap_err();
        assert!(matches!(err, TraceError::Empty { .. }), "{text:?}: {err}");
    }
    let all_bad = "0,hm,0,Read,0,0,1\n";
    let err = TraceReader::from_bytes(
        "e",
        all_bad.into(),
        &opts(Some(Format::Msr), TenantBy::None),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "e: no valid request in the trace");
}

#[test]
fn several_paths_are_only_for_blktrace() {
    let dir = TempDir::new("paths");
    let a = dir.file("a.csv", MSR.as_bytes());
    let b = dir.file("b.csv", MSR.as_bytes());
    let err = TraceReader::open(&[a, b], &ReadOptions::default()).unwrap_err();
    assert!(
        matches!(err, TraceError::MultiplePaths { count: 2, .. }),
        "{err}"
    );
    let err = TraceReader::open(&[dir.0.join("missing")], &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, TraceError::Io { .. }), "{err}");
}

/// Runs `f` on another thread: a reader that never ends fails the test instead of hanging it.
fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the reader did not stop")
}

#[cfg(unix)]
#[test]
fn endless_input_without_a_usable_line_stops_at_the_bound() {
    // /dev/zero has no line end at all; /dev/urandom has lines, none of them valid. Read as a
    // text format, both used to be read for ever (in constant memory).
    for (path, format) in [("/dev/zero", Format::Mqsim), ("/dev/zero", Format::Msr), ("/dev/urandom", Format::Mqsim)] {
        let e = within_seconds(move || {
            TraceReader::open(&[PathBuf::from(path)], &opts(Some(format), TenantBy::None))
                .map(|_| ())
                .unwrap_err()
                .to_string()
        });
        assert!(
            e.starts_with(&format!("{path}: no usable {} line in the 64 MiB read from line 1 on", format.name())),
            "{path} as {format}: {e}"
        );
    }
}

#[test]
fn bad_lines_between_requests_do_not_add_up_to_the_bound() {
    // 100 MiB of bad lines in all, but never more than 1 MiB of them in a row.
    let junk = "x".repeat(1023) + "\n";
    let block = junk.repeat(1024);
    let mut text = String::new();
    for i in 0..100 {
        text += &format!("{} 0 8 8 0\n", i * 1000);
        text += &block;
    }
    let (r, recs) = read("junk.mqsim", text, &opts(Some(Format::Mqsim), TenantBy::None));
    assert_eq!(recs.len(), 100);
    assert_eq!(r.bad_lines().count, 100 * 1024);
}

// ---------------------------------------------------------------------------------------------
// Compressed input.

#[test]
fn gzip_input_is_decompressed_while_reading() {
    let (r, recs) = read("hm_0.csv.gz", gzip(MSR.as_bytes()), &ReadOptions::default());
    assert_eq!(r.format(), Format::Msr);
    assert_eq!(recs.len(), 3);

    // Concatenated members, as `cat a.gz b.gz` makes, are one stream.
    let mut two = gzip(&MSR.as_bytes()[..60]);
    two.extend(gzip(&MSR.as_bytes()[60..]));
    let (_, recs2) = read("two.gz", two, &ReadOptions::default());
    assert_eq!(recs2, recs);

    let (cpu0, cpu1) = blktrace_cpus();
    let dir = TempDir::new("gz");
    dir.file("sda.blktrace.0.gz", &gzip(&cpu0));
    dir.file("sda.blktrace.1.gz", &gzip(&cpu1));
    let (_, recs) = read_paths(&[dir.0.join("sda.blktrace.0.gz")], &ReadOptions::default());
    assert_eq!(recs.len(), 6);

    // A corrupt stream is an I/O error naming the file.
    let mut broken = gzip(MSR.repeat(200).as_bytes());
    let n = broken.len();
    broken[n / 2..].fill(0);
    let r = TraceReader::from_bytes("broken.gz", broken, &ReadOptions::default());
    let failed = match r {
        Err(e) => matches!(e, TraceError::Io { .. }),
        Ok(r) => r
            .into_iter()
            .any(|x| matches!(x, Err(TraceError::Io { .. }))),
    };
    assert!(failed);
}

// ---------------------------------------------------------------------------------------------
// Auto-detection.

#[test]
fn every_format_is_detected_from_its_content() {
    let (cpu0, _) = blktrace_cpus();
    let cases: Vec<(Vec<u8>, Format)> = vec![
        (cpu0.clone(), Format::Blktrace),
        (
            encode(&[blk(0, 0, 512, act(7, TC_ISSUE))], true, 7),
            Format::Blktrace,
        ),
        (BLKPARSE.into(), Format::Blkparse),
        (FIO_V2.into(), Format::FioIolog),
        (FIO_V3.into(), Format::FioIolog),
        (MSR.into(), Format::Msr),
        (SPC.into(), Format::Spc),
        (MQSIM.into(), Format::Mqsim),
        (ALIBABA.into(), Format::Alibaba),
        (TENCENT.into(), Format::Tencent),
        (SYSTOR.into(), Format::Systor),
        (
            SYSTOR.lines().skip(1).collect::<Vec<_>>().join("\n").into(),
            Format::Systor,
        ),
        (
            format!("device_id,opcode,offset,length,timestamp\n{ALIBABA}").into(),
            Format::Alibaba,
        ),
        (
            format!("Timestamp,Offset,Size,IOType,VolumeID\n{TENCENT}").into(),
            Format::Tencent,
        ),
        // Windows line ends and a comment first.
        (
            format!("# converted\r\n{}", MSR.replace('\n', "\r\n")).into(),
            Format::Msr,
        ),
        // Detection is by content, gzip or not.
        (gzip(SPC.as_bytes()), Format::Spc),
    ];
    for (data, expected) in cases {
        let r = TraceReader::from_bytes("x", data, &ReadOptions::default())
            .unwrap_or_else(|e| panic!("{expected}: {e}"));
        assert_eq!(r.format(), expected);
    }
}

#[test]
fn a_value_error_in_the_sample_does_not_hide_the_format() {
    let text = format!("{}128166385295514664,hm,0,Read,0,0,1\n", MSR);
    let (r, recs) = read("hm.csv", text, &ReadOptions::default());
    assert_eq!(
        (r.format(), recs.len(), r.bad_lines().count),
        (Format::Msr, 3, 1)
    );
}

#[test]
fn an_undetectable_file_says_what_was_tried() {
    let err = TraceReader::from_bytes(
        "notes.txt",
        "hello world\nthis is not a trace\n".into(),
        &ReadOptions::default(),
    )
    .unwrap_err();
    let TraceError::UnknownFormat {
        ref file,
        ref tried,
    } = err
    else {
        panic!("{err}");
    };
    assert_eq!(file, "notes.txt");
    for &f in Format::ALL {
        assert!(tried.contains(&format!("{}: ", f.name())), "{f}: {tried}");
    }
    assert!(tried.contains("msr: line 1: field 'timestamp'"), "{tried}");
    assert!(err.to_string().ends_with("name it with --format"), "{err}");

    // Random binary is not mistaken for anything.
    let noise: Vec<u8> = (0u32..4096)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let err = TraceReader::from_bytes("noise", noise, &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, TraceError::UnknownFormat { .. }), "{err}");
}

#[test]
fn a_named_format_is_not_second_guessed() {
    // MQSim text read as MSR: every line is bad, so the trace has no request.
    let err = TraceReader::from_bytes("m", MQSIM.into(), &opts(Some(Format::Msr), TenantBy::None))
        .unwrap_err();
    assert!(matches!(err, TraceError::Empty { .. }), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Properties.

/// What every record a reader returns satisfies.
fn check_record(r: &TraceRecord) {
    if r.op == TraceOp::Flush {
        assert_eq!((r.offset, r.len), (0, 0));
    } else {
        assert!(r.len > 0 && r.len <= GIB, "{r:?}");
        assert!(r.offset.checked_add(r.len).is_some(), "{r:?}");
    }
}

fn read_anything(data: Vec<u8>, o: &ReadOptions) {
    if let Ok(r) = TraceReader::from_bytes("fuzz", data, o) {
        let mut info = TraceInfo::new();
        for x in r {
            match x {
                Ok(rec) => {
                    check_record(&rec);
                    info.add(&rec);
                }
                Err(_) => break,
            }
        }
        let _ = info.to_string();
    }
}

/// Text made of the characters traces are made of, so that lines often almost parse.
fn tracey() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        Just(BLKPARSE.lines().nth(1).unwrap_or_default().to_string()),
        Just(MSR.lines().next().unwrap_or_default().to_string()),
        Just("fio version 2 iolog".to_string()),
        Just("fio version 3 iolog".to_string()),
        "[0-9]{1,21}",
        "[0-9,. RWDQCNFrw+#\\[\\]a-z()-]{0,60}",
        "[0-9]{1,20}(,[0-9RW.]{0,20}){4,7}",
        "[0-9]{1,20}( [0-9]{1,20}){4}",
    ];
    proptest::collection::vec(line, 0..30).prop_map(|lines| lines.join("\n").into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600), strict in any::<bool>()) {
        for format in std::iter::once(None).chain(Format::ALL.iter().copied().map(Some)) {
            read_anything(data.clone(), &ReadOptions { format, strict, ..ReadOptions::default() });
        }
    }

    #[test]
    fn trace_like_text_never_panics(data in tracey(), strict in any::<bool>(), gz in any::<bool>()) {
        let data = if gz { gzip(&data) } else { data };
        for format in std::iter::once(None).chain(Format::ALL.iter().copied().map(Some)) {
            let fields = format.map_or(&[TenantBy::None][..], Format::fields);
            for &tenant_by in fields {
                let place_by = fields[fields.len() - 1];
                read_anything(data.clone(), &ReadOptions { format, tenant_by, place_by, strict, ..ReadOptions::default() });
            }
        }
    }

    #[test]
    fn blktrace_records_with_any_fields_never_panic(
        fields in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>(), 0usize..40), 1..20),
        cut in 0usize..2000,
        big in any::<bool>(),
    ) {
        let records: Vec<Blk> = fields
            .into_iter()
            .map(|(time, sector, bytes, action, pdu)| Blk { pdu: vec![7; pdu], ..blk(time, sector, bytes, action) })
            .collect();
        let mut data = encode(&records, big, 7);
        data.truncate(data.len().saturating_sub(cut % 60));
        for tenant_by in [TenantBy::None, TenantBy::Device, TenantBy::Pid] {
            read_anything(data.clone(), &ReadOptions { tenant_by, ..ReadOptions::default() });
        }
    }

    /// Requests written in each writable format read back as the same requests, within the
    /// format's resolution (µs times for fio, 512-byte sectors for MQSim and blkparse) and what
    /// it can say (MQSim has no trims or flushes).
    #[test]
    fn written_traces_read_back(
        raw in proptest::collection::vec((0u64..5_000_000_000, 0u8..4, 0u64..(1 << 40), 1u64..=(1 << 21), 0u32..3), 1..40),
    ) {
        let mut time = 0;
        let records: Vec<TraceRecord> = raw
            .iter()
            .enumerate()
            .map(|(i, &(dt, op, sector, sectors, stream))| {
                if i > 0 {
                    time += dt;
                }
                let op = TraceOp::ALL[usize::from(op)];
                if op == TraceOp::Flush {
                    rec(time, op, 0, 0, stream)
                } else {
                    rec(time, op, sector * 512, sectors * 512, stream)
                }
            })
            .collect();
        for &format in Format::WRITABLE {
            let name = |s: u32| match format {
                Format::Blkparse => format!("dev8,{}", s * 16),
                _ => format!("/dev/disk{s}"),
            };
            let mut out = Vec::new();
            let written = write_trace(records.iter().copied(), format, &mut out, &name).unwrap();
            let kept: Vec<TraceRecord> = records
                .iter()
                .copied()
                .filter(|r| format != Format::Mqsim || matches!(r.op, TraceOp::Read | TraceOp::Write))
                .collect();
            prop_assert_eq!(written, kept.len() as u64);
            let got = TraceReader::from_bytes("w", out.clone(), &opts(None, TenantBy::Device));
            let Some(first) = kept.first() else {
                let empty = matches!(got, Err(TraceError::Empty { .. }));
                prop_assert!(empty);
                continue;
            };
            let mut reader = got.unwrap();
            prop_assert_eq!(reader.format(), format);
            let back: Vec<TraceRecord> = reader.by_ref().map(Result::unwrap).collect();
            // Streams are renumbered by first appearance, like a reader numbers them.
            let mut order: Vec<u32> = Vec::new();
            let expected: Vec<TraceRecord> = kept
                .iter()
                .map(|r| {
                    let stream = match order.iter().position(|&s| s == r.stream) {
                        Some(i) => i as u32,
                        None => {
                            order.push(r.stream);
                            order.len() as u32 - 1
                        }
                    };
                    let time_ns = match format {
                        Format::FioIolog => (r.time_ns / 1000 - first.time_ns / 1000) * 1000,
                        _ => r.time_ns - first.time_ns,
                    };
                    TraceRecord { time_ns, stream, ..*r }
                })
                .collect();
            prop_assert_eq!(&back, &expected, "{}:\n{}", format, String::from_utf8_lossy(&out));
            for (id, &s) in order.iter().enumerate() {
                let want = match format {
                    Format::Mqsim => format!("dev{s}"),
                    _ => name(s),
                };
                prop_assert_eq!(reader.stream_name(id as u32), want);
            }
            prop_assert_eq!(reader.bad_lines().count, 0);
        }
    }
}

#[test]
fn writers_refuse_formats_they_cannot_write() {
    let r = [rec(0, TraceOp::Read, 0, 512, 0)];
    let err = write_trace(r.into_iter(), Format::Msr, &mut Vec::new(), &|_| {
        String::new()
    })
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    assert!(
        err.to_string().contains("fio-iolog, mqsim, blkparse"),
        "{err}"
    );
}

#[test]
fn writers_produce_the_formats_own_layout() {
    let records = [
        rec(1_500, TraceOp::Read, 4096, 4096, 0),
        rec(2_000_000_007, TraceOp::Write, 1000, 100, 1),
        rec(3_000_000_000, TraceOp::Flush, 0, 0, 0),
    ];
    let name = |s: u32| ["dev8,0", "my disk"][s as usize].to_string();
    let text = |f| {
        let mut out = Vec::new();
        write_trace(records.iter().copied(), f, &mut out, &name).unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(
        text(Format::FioIolog),
        "fio version 3 iolog\n\
         1 dev8,0 add\n1 dev8,0 open\n1 dev8,0 read 4096 4096\n\
         2000000 my_disk add\n2000000 my_disk open\n2000000 my_disk write 1000 100\n\
         3000000 dev8,0 sync 0 0\n\
         3000000 dev8,0 close\n3000000 my_disk close\n"
    );
    // The write touches bytes 1000..1100: sectors 1 and 2.
    assert_eq!(text(Format::Mqsim), "1500 0 8 8 1\n2000000007 1 1 2 0\n");
    assert_eq!(
        text(Format::Blkparse),
        "  8,0    0        0     0.000001500     0  D   R 8 + 8 [dev8,0]\n  \
         0,1    0        1     2.000000007     1  D   W 1 + 2 [my_disk]\n  \
         8,0    0        2     3.000000000     0  D  FN [dev8,0]\n"
    );
}

// ---------------------------------------------------------------------------------------------
// The real trace: 0.3 s of fio randrw on a loop device, as blktrace's per-CPU binary files and
// as blkparse's text of the same records (see tests/data/traces/README.md).

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/traces")
        .join(name)
}

#[test]
fn captured_blktrace_has_the_known_requests() {
    let (r, recs) = read_paths(
        &[data("fio-randrw.blktrace.0.gz")],
        &opts(None, TenantBy::Device),
    );
    assert_eq!(r.format(), Format::Blktrace);
    assert_eq!(recs.len(), 13_116);
    assert_eq!(recs.iter().filter(|r| r.op == TraceOp::Read).count(), 9_165);
    assert_eq!(
        recs.iter().filter(|r| r.op == TraceOp::Write).count(),
        3_951
    );
    assert!(recs.iter().all(|r| r.len == 4096 && r.offset % 4096 == 0));
    assert!(
        recs.iter().all(|r| r.offset + r.len <= GIB),
        "a 1 GiB loop device"
    );
    assert!(recs.iter().all(|r| r.stream == 0));
    assert_eq!(r.stream_name(0), "dev7,0");
    assert_eq!((r.bad_lines().count, r.out_of_order()), (0, 0));
    assert_eq!(r.lines_read(), 1_189 + 77_507);
    assert!(recs.last().unwrap().time_ns < 300_000_000);

    let mut info = TraceInfo::new();
    recs.iter().for_each(|x| info.add(x));
    assert_eq!(
        (info.reads, info.writes, info.read_bytes),
        (9_165, 3_951, 9_165 * 4096)
    );
    assert_eq!(
        info.size_buckets(),
        [info::SizeBucket {
            from: 4096,
            to: 8192,
            requests: 13_116
        }]
    );
}

#[test]
fn captured_blkparse_text_matches_the_binary() {
    for event in [BlkEvent::Issue, BlkEvent::Complete, BlkEvent::Queue] {
        let o = ReadOptions {
            blktrace_event: event,
            ..ReadOptions::default()
        };
        let (_, bin) = read_paths(
            &[
                data("fio-randrw.blktrace.0.gz"),
                data("fio-randrw.blktrace.1.gz"),
            ],
            &o,
        );
        let (r, text) = read_paths(&[data("fio-randrw.blkparse.txt.gz")], &o);
        assert_eq!(r.format(), Format::Blkparse);
        assert_eq!(r.bad_lines().count, 0, "{:?}", r.bad_lines());
        assert_eq!(text.len(), 13_116, "{event:?}");
        assert_eq!(bin.len(), text.len(), "{event:?}");
        let offsets = |v: &[TraceRecord]| {
            v.iter()
                .map(|r| (r.op, r.offset, r.len))
                .collect::<Vec<_>>()
        };
        assert_eq!(offsets(&bin), offsets(&text), "{event:?}");
        if event == BlkEvent::Issue {
            // D events all come from one CPU, so even the times agree to the nanosecond.
            assert_eq!(bin, text);
        }
    }
}
