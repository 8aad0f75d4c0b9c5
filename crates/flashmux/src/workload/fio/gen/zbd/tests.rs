//! `zonemode=zbd` at the generator: the (command, offset, length) sequence a job file gives on
//! a zoned drive, against what fio's zbd.c does step by step (worked in each test's comment),
//! and against a shadow of the drive's zones: every write at its zone's write pointer, every
//! read below it.

use std::collections::BTreeSet;

use super::super::super::{parse_job_text, FioJob};
use super::*;
use crate::workload::fio::{FioError, JobGen};

const K: u64 = 1024;

fn disk(zone_kib: u64, cap_kib: u64, zones: u32, max_open: Option<u32>) -> ZonedDisk {
    ZonedDisk { zone_bytes: zone_kib * K, capacity_bytes: cap_kib * K, zones, max_open, max_active: max_open }
}

fn jobs(text: &str) -> Vec<FioJob> {
    parse_job_text(text, "t.fio", &|_| None).expect("parses").jobs
}

fn job(body: &str) -> FioJob {
    jobs(&format!("[t]\nzonemode=zbd\ndirect=1\n{body}\n")).remove(0)
}

fn zoned(j: &FioJob, clone: u32, dev: &ZbdDevice) -> Result<JobGen, FioError> {
    let bytes = dev.disk().bytes();
    JobGen::new_zoned(j, clone, 0, bytes, 512, 7, dev)
}

fn gen(body: &str, dev: &ZbdDevice) -> JobGen {
    zoned(&job(body), 0, dev).expect("job fits")
}

fn new_err(body: &str, d: ZonedDisk) -> String {
    match zoned(&job(body), 0, &ZbdDevice::new(d).unwrap()) {
        Ok(_) => panic!("{body} should be refused"),
        Err(e) => e.to_string(),
    }
}

/// One unit as a short tag: `W`rite, `R`ead, `T`rim (a trim as a zone reset), `X` a reset
/// fio makes, `F` a finish, `A` a zone append; offset and length in KiB.
fn tag(io: &IoUnit) -> (char, u64, u64) {
    let c = match (io.zone, io.dir) {
        (Some(ZoneOp::Reset), Dir::Trim) => 'T',
        (Some(ZoneOp::Reset), _) => 'X',
        (Some(ZoneOp::Finish), _) => 'F',
        (Some(ZoneOp::Append), _) => 'A',
        (None, Dir::Write) => 'W',
        (None, Dir::Read) => 'R',
        (None, Dir::Trim) => 't',
    };
    (c, io.offset / K, io.len / K)
}

fn all(g: &mut JobGen) -> Vec<IoUnit> {
    let ios: Vec<IoUnit> = std::iter::from_fn(|| g.next()).take(1_000_000).collect();
    assert!(ios.len() < 1_000_000, "runaway generator");
    ios
}

fn tags(ios: &[IoUnit]) -> Vec<(char, u64, u64)> {
    ios.iter().map(tag).collect()
}

/// The drive's zones as the units change them, checking each against ZNS's rules: writes at
/// the write pointer and within the capacity, appends to a zone's start, reads below the write
/// pointer (unless `beyond`), resets and finishes of a zone's start.
struct Shadow {
    d: ZonedDisk,
    wp: Vec<u64>,
}

impl Shadow {
    fn new(d: ZonedDisk) -> Shadow {
        Shadow { d, wp: (0..u64::from(d.zones)).map(|i| i * d.zone_bytes).collect() }
    }

    fn apply(&mut self, io: &IoUnit, beyond: bool) {
        let zs = self.d.zone_bytes;
        let z = (io.offset / zs) as usize;
        let start = z as u64 * zs;
        let cap_end = start + self.d.capacity_bytes;
        match (io.zone, io.dir) {
            (Some(ZoneOp::Reset), _) => {
                assert_eq!((io.offset, io.len), (start, zs), "{io:?}");
                self.wp[z] = start;
            }
            (Some(ZoneOp::Finish), _) => {
                assert_eq!((io.offset, io.len), (start, zs), "{io:?}");
                self.wp[z] = start + zs;
            }
            (Some(ZoneOp::Append), _) => {
                assert_eq!(io.offset, start, "{io:?}");
                assert!(self.wp[z] + io.len <= cap_end, "append past the capacity: {io:?}");
                self.wp[z] += io.len;
            }
            (None, Dir::Write) => {
                assert_eq!(io.offset, self.wp[z], "a write not at the write pointer: {io:?}");
                assert!(io.offset + io.len <= cap_end, "a write past the capacity: {io:?}");
                self.wp[z] += io.len;
            }
            (None, Dir::Read) => {
                if !beyond {
                    assert!(io.offset + io.len <= self.wp[z], "a read past the write pointer {}: {io:?}", self.wp[z]);
                }
            }
            (None, Dir::Trim) => panic!("a trim on a zoned drive is a zone reset: {io:?}"),
        }
        assert!(io.len > 0, "{io:?}");
    }

    fn run(d: ZonedDisk, ios: &[IoUnit], beyond: bool) -> Shadow {
        let mut s = Shadow::new(d);
        for io in ios {
            s.apply(io, beyond);
        }
        s
    }

    /// Zones written but not full: what counts against max_open_zones.
    fn open(&self) -> BTreeSet<usize> {
        (0..self.wp.len())
            .filter(|&z| {
                let start = z as u64 * self.d.zone_bytes;
                self.wp[z] > start && self.wp[z] < start + self.d.capacity_bytes
            })
            .collect()
    }
}

/// A sequential write: fio's offsets are the write pointers already, so zbd_adjust_block
/// keeps them (4 zones of 64 KiB, bs=16k: 16 writes in order, each zone filled in turn).
#[test]
fn sequential_writes_are_at_the_write_pointer() {
    let d = disk(64, 64, 4, None);
    let dev = ZbdDevice::new(d).unwrap();
    let ios = all(&mut gen("rw=write\nbs=16k", &dev));
    assert_eq!(tags(&ios), (0..16).map(|i| ('W', i * 16, 16)).collect::<Vec<_>>());
    assert!((0..4).all(|z| dev.write_pointer(z) == (z as u64 + 1) * 64 * K));
}

/// A random write goes to the write pointer of its offset's zone (zbd_convert_to_write_zone
/// takes the zone when it may be written; zbd_adjust_block sets `offset = zb->wp`). With the
/// random map every block is drawn once, so 128 writes fill the 8 zones exactly, each zone
/// in order.
#[test]
fn random_writes_land_exactly_at_the_write_pointer() {
    let d = disk(64, 64, 8, None);
    let dev = ZbdDevice::new(d).unwrap();
    let ios = all(&mut gen("rw=randwrite\nbs=4k", &dev));
    assert_eq!(ios.len(), 128);
    let s = Shadow::run(d, &ios, false);
    assert!(ios.iter().all(|io| io.zone.is_none() && io.dir == Dir::Write));
    assert!((0..8).all(|z| s.wp[z] == (z as u64 + 1) * 64 * K && dev.write_pointer(z as u32) == s.wp[z]));
    // Not zone by zone: the zones are written in the random order of the offsets.
    let firsts: Vec<u64> = ios.iter().take(16).map(|io| io.offset / (64 * K)).collect();
    assert!(firsts.windows(2).any(|w| w[0] != w[1]), "{firsts:?}");
}

/// max_open_zones=2: fio writes at most 2 zones at once (__zbd_write_zone_get refuses a third;
/// zbd_convert_to_write_zone sends the write to one of the 2, `pick_random_zone_idx`). The
/// drive never sees a third zone opened before one of the two is full.
#[test]
fn max_open_zones_bounds_the_zones_written_at_once() {
    let d = disk(64, 64, 16, None);
    let dev = ZbdDevice::new(d).unwrap();
    let ios = all(&mut gen("rw=randwrite\nbs=4k\nmax_open_zones=2", &dev));
    let mut s = Shadow::new(d);
    let mut most = 0;
    for io in &ios {
        s.apply(io, false);
        most = most.max(s.open().len());
        assert!(dev.write_zones().len() <= 2);
    }
    assert_eq!(most, 2);
    // The random map ends the pass once all 256 blocks were drawn. A write whose zone is full
    // takes it as a write target again while fewer than 2 are (zbd_write_zone_get does not
    // refuse full zones without verify), and the full zone is reset first: fio's random writes
    // recycle zones.
    let writes = ios.iter().filter(|io| io.zone.is_none()).count();
    let resets = ios.iter().filter(|io| io.zone == Some(ZoneOp::Reset)).count();
    assert_eq!((writes, writes + resets), (256, ios.len()));
    assert!(resets > 0);
    assert_eq!(dev.max_write_zones(), Some(2));
    // The drive's limit is the default; more than it needs ignore_zone_limits.
    let dev = ZbdDevice::new(disk(64, 64, 16, Some(3))).unwrap();
    let mut g = gen("rw=randwrite\nbs=4k", &dev);
    assert_eq!(dev.max_write_zones(), Some(3));
    let ios = all(&mut g);
    let mut s = Shadow::new(d);
    for io in &ios {
        s.apply(io, false);
        assert!(s.open().len() <= 3);
    }
    let e = new_err("rw=randwrite\nmax_open_zones=4", disk(64, 64, 16, Some(3)));
    assert!(e.contains("max_open_zones=4 is larger than the drive's limit of 3 open zones (ignore_zone_limits=1 allows it)"), "{e}");
    let dev = ZbdDevice::new(disk(64, 64, 16, Some(3))).unwrap();
    gen("rw=randwrite\nmax_open_zones=4\nignore_zone_limits=1", &dev);
    assert_eq!(dev.max_write_zones(), Some(4));
}

/// job_max_open_zones=1 with two jobs under max_open_zones=2: each job writes one zone at a
/// time, together two (td->num_write_zones per job, the write_zones array shared).
#[test]
fn job_max_open_zones_bounds_each_job() {
    let d = disk(64, 64, 16, None);
    let dev = ZbdDevice::new(d).unwrap();
    let j = job("rw=randwrite\nbs=4k\nmax_open_zones=2\njob_max_open_zones=1\nnumjobs=2\nsize=8z\noffset_increment=8z");
    let mut a = zoned(&j, 0, &dev).unwrap();
    let mut b = zoned(&j, 1, &dev).unwrap();
    let (mut s, mut n) = (Shadow::new(d), 0);
    loop {
        let (x, y) = (a.next(), b.next());
        if x.is_none() && y.is_none() {
            break;
        }
        for io in x.iter().chain(y.iter()) {
            s.apply(io, false);
            n += usize::from(io.zone.is_none());
        }
        let open = s.open();
        assert!(open.iter().filter(|&&z| z < 8).count() <= 1 && open.iter().filter(|&&z| z >= 8).count() <= 1, "{open:?}");
    }
    assert_eq!(n, 256);
    // It needs a limit for the whole drive (zbd_setup_files).
    let e = new_err("rw=randwrite\njob_max_open_zones=1", d);
    assert!(e.contains("job_max_open_zones cannot be used without a limit on open zones for the drive"), "{e}");
    // Every job on the drive has the same max_open_zones ("Different 'max_open_zones' values").
    let dev = ZbdDevice::new(d).unwrap();
    gen("rw=randwrite\nmax_open_zones=2", &dev);
    let e = zoned(&job("rw=randwrite\nmax_open_zones=3"), 0, &dev).err().unwrap().to_string();
    assert!(e.contains("max_open_zones=3 differs from the 2 of an earlier job on the drive"), "{e}");
}

/// zone_reset_threshold=0.5, zone_reset_frequency=0.5 on 4 zones of 64k, bs=16k, time based
/// (io_size 256k, so the threshold is 128k written). fio (zbd_adjust_block): the count to the
/// next reset starts at 1/0.5 = 2 (zbd_file_reset). Writes 1-8 fill zones 0 and 1: the written
/// bytes reach 128k only after the 8th. Write 9 (128k): 128k >= 128k, count 2 -> 1, no reset.
/// Write 10 (144k): count 1 -> 0, so zone 2 is marked and reset (16k of data: X 128k), the
/// count starts again at 2, and the write goes to the new write pointer, 128k. Write 11 goes
/// on at 144k (count 2 -> 1); write 12 resets zone 2 again (32k) and writes at 128k; and so on:
/// zone 2 is the garbage collected one.
#[test]
fn zone_reset_threshold_and_frequency() {
    let d = disk(64, 64, 4, None);
    let dev = ZbdDevice::new(d).unwrap();
    let mut g = gen("rw=write\nbs=16k\nzone_reset_threshold=0.5\nzone_reset_frequency=0.5\ntime_based\nruntime=1", &dev);
    let ios: Vec<IoUnit> = (0..16).map(|_| g.next().unwrap()).collect();
    let mut want: Vec<(char, u64, u64)> = (0..9).map(|i| ('W', i * 16, 16)).collect();
    want.extend([('X', 128, 64), ('W', 128, 16), ('W', 144, 16), ('X', 128, 64), ('W', 128, 16), ('W', 144, 16)]);
    want.push(('X', 128, 64));
    assert_eq!(tags(&ios), want);
    Shadow::run(d, &ios, false);
    assert_eq!(g.zone_resets(), 3);
    // Without the threshold (0) the written bytes are not counted and stay 0, which is at
    // least 0 x io_size: fio then resets every 1/frequency-th write's zone (here every write).
    let dev = ZbdDevice::new(d).unwrap();
    let mut g = gen("rw=write\nbs=16k\nzone_reset_frequency=1\ntime_based\nruntime=1", &dev);
    let ios: Vec<IoUnit> = (0..5).map(|_| g.next().unwrap()).collect();
    assert_eq!(tags(&ios), [('W', 0, 16), ('X', 0, 64), ('W', 0, 16), ('X', 0, 64), ('W', 0, 16)]);
    // Jobs with a threshold share one write range (zbd_verify_and_set_vdb).
    let dev = ZbdDevice::new(d).unwrap();
    gen("rw=write\nsize=2z\nzone_reset_threshold=0.5\nzone_reset_frequency=0.1", &dev);
    let e = zoned(&job("rw=write\noffset=2z\nsize=2z\nzone_reset_threshold=0.5"), 0, &dev).err().unwrap().to_string();
    assert!(e.contains("zone_reset_threshold: jobs with different write ranges on the drive are not supported"), "{e}");
}

/// read_beyond_wp=0 (the default): a writer fills zones 0 and 1 and writes 32k of zone 2; a
/// sequential reader of the drive then reads 0..128k, then 128k and 144k; at 160k its block
/// would pass zone 2's write pointer, and zbd_find_zone finds no later zone with data: the
/// pass ends (io_u_eof). With read_beyond_wp=1 it reads the whole drive.
#[test]
fn read_beyond_wp_off_reads_only_written_data() {
    let d = disk(64, 64, 4, None);
    let dev = ZbdDevice::new(d).unwrap();
    let written = all(&mut gen("rw=write\nbs=16k\nsize=3z\nio_size=160k", &dev));
    assert_eq!(written.len(), 10);
    let ios = all(&mut gen("rw=read\nbs=16k", &dev));
    assert_eq!(tags(&ios), (0..10).map(|i| ('R', i * 16, 16)).collect::<Vec<_>>());
    let ios = all(&mut gen("rw=read\nbs=16k\nread_beyond_wp=1", &dev));
    assert_eq!(ios.len(), 16);
    // Random reads land in written data only, anywhere in it: the offset keeps its place in
    // the zone modulo the written range, whole blocks, cut at the write pointer.
    let s = Shadow::run(d, &written, false);
    let mut g = gen("rw=randread\nbs=4k\nnorandommap\ntime_based\nruntime=1", &dev);
    let ios: Vec<IoUnit> = (0..2000).map(|_| g.next().unwrap()).collect();
    let mut s2 = Shadow { d, wp: s.wp.clone() };
    for io in &ios {
        s2.apply(io, false);
    }
    let zones: BTreeSet<u64> = ios.iter().map(|io| io.offset / (64 * K)).collect();
    assert_eq!(zones, [0, 1, 2].into());
    // An empty drive has nothing to read: a read job does nothing, as fio's does.
    let empty = ZbdDevice::new(d).unwrap();
    assert!(all(&mut gen("rw=read\nbs=16k", &empty)).is_empty());
    assert!(all(&mut gen("rw=randread\nbs=16k", &empty)).is_empty());
}

/// randrw: zbd_adjust_ddir makes the first I/O a write whatever the draw (no data to read
/// yet), then reads stay below the write pointers.
#[test]
fn mixed_jobs_write_before_they_read() {
    let d = disk(64, 64, 8, None);
    let dev = ZbdDevice::new(d).unwrap();
    let mut g = gen("rw=randrw\nbs=4k\nrwmixread=90\nnorandommap\ntime_based\nruntime=1", &dev);
    let ios: Vec<IoUnit> = (0..500).map(|_| g.next().unwrap()).collect();
    assert_eq!(ios[0].dir, Dir::Write);
    assert!(ios.iter().filter(|io| io.dir == Dir::Read).count() > 300);
    Shadow::run(d, &ios, false);
}

/// zoneskip=1z on 8 zones of 64k, bs=16k (setup_zbd_zone_mode): zone 0 is written (64k, a
/// zone's worth), then the file offset moves zonesize + zoneskip = 128k on: zones 2, 4, 6.
/// The next move (512k) is the end of the file, so it wraps to the start offset: zone 0 again,
/// which is full, so fio resets it first (zbd_zone_full), and so on until size (512k) is written.
#[test]
fn zoneskip_in_zones_skips_whole_zones() {
    let d = disk(64, 64, 8, None);
    let dev = ZbdDevice::new(d).unwrap();
    let ios = all(&mut gen("rw=write\nbs=16k\nzoneskip=1z", &dev));
    let zone = |z: u64| (0..4).map(move |i| ('W', z * 64 + i * 16, 16));
    let mut want: Vec<_> = [0, 2, 4, 6].into_iter().flat_map(zone).collect();
    for z in [0, 2, 4, 6] {
        want.push(('X', z * 64, 64));
        want.extend(zone(z));
    }
    assert_eq!(tags(&ios), want);
    // zoneskip must be whole zones.
    let e = new_err("rw=write\nzoneskip=32k", d);
    assert!(e.contains("zoneskip 32768 is not a multiple of the drive's zone size 65536"), "{e}");
}

/// Zone capacity 48k of 64k, bs=16k: three writes fill a zone's capacity; then
/// setup_zbd_zone_mode jumps from the capacity to the zone's end. 12 writes in all.
/// With bs=32k the second write of a zone does not fit the 16k left: zbd_convert_to_write_zone
/// finishes the zone (zbd_finish_zone) and takes the next; after the last zone's finish a
/// sequential job has no zone left (io_u_eof).
#[test]
fn zone_capacity_stops_writes_and_moves_on() {
    let d = disk(64, 48, 4, None);
    let dev = ZbdDevice::new(d).unwrap();
    let ios = all(&mut gen("rw=write\nbs=16k", &dev));
    let want: Vec<_> = (0..4).flat_map(|z| (0..3).map(move |i| ('W', z * 64 + i * 16, 16))).collect();
    assert_eq!(tags(&ios), want);
    let dev = ZbdDevice::new(d).unwrap();
    let ios = all(&mut gen("rw=write\nbs=32k", &dev));
    assert_eq!(
        tags(&ios),
        [('W', 0, 32), ('F', 0, 64), ('W', 64, 32), ('F', 64, 64), ('W', 128, 32), ('F', 128, 64), ('W', 192, 32), ('F', 192, 64)]
    );
    Shadow::run(d, &ios, false);
    // Random writes never pass the capacity either.
    let dev = ZbdDevice::new(d).unwrap();
    let mut g = gen("rw=randwrite\nbs=16k\nnorandommap\ntime_based\nruntime=1", &dev);
    let ios: Vec<IoUnit> = (0..300).map(|_| g.next().unwrap()).collect();
    Shadow::run(d, &ios, false);
    let e = new_err("rw=write\nbs=64k", disk(64, 48, 4, None));
    assert!(e.contains("zone capacity 49152 is smaller than the least write block size 65536"), "{e}");
}

/// A time-based sequential write over the whole drive (4 zones of 64k, bs=32k): at the end
/// get_next_seq_offset wraps to the start; zone 0 is full, so zbd_adjust_block resets it
/// (zbd_zone_full) before writing at its start; each zone in turn. A second loop does the same.
#[test]
fn sequential_write_over_the_drive_resets_zones_when_it_wraps() {
    let d = disk(64, 64, 4, None);
    let dev = ZbdDevice::new(d).unwrap();
    let mut g = gen("rw=write\nbs=32k\ntime_based\nruntime=1", &dev);
    let ios: Vec<IoUnit> = (0..20).map(|_| g.next().unwrap()).collect();
    let mut want: Vec<_> = (0..8).map(|i| ('W', i * 32, 32)).collect();
    for z in 0..4 {
        want.extend([('X', z * 64, 64), ('W', z * 64, 32), ('W', z * 64 + 32, 32)]);
    }
    assert_eq!(tags(&ios), want);
    Shadow::run(d, &ios, false);
    let dev = ZbdDevice::new(d).unwrap();
    let ios = all(&mut gen("rw=write\nbs=32k\nloops=2", &dev));
    assert_eq!(tags(&ios[..8]), want[..8]);
    assert_eq!(tags(&ios[8..]), want[8..]);
    // A region of zones 1 and 2 (offset and size in zones) wraps within them.
    let dev = ZbdDevice::new(d).unwrap();
    let mut g = gen("rw=write\nbs=32k\noffset=1z\nsize=2z\ntime_based\nruntime=1", &dev);
    let ios: Vec<IoUnit> = (0..7).map(|_| g.next().unwrap()).collect();
    assert_eq!(tags(&ios), [('W', 64, 32), ('W', 96, 32), ('W', 128, 32), ('W', 160, 32), ('X', 64, 64), ('W', 64, 32), ('W', 96, 32)]);
}

/// Trims are zone resets (zbd_do_io_u_trim), counted as trims; a random trim of an empty zone
/// goes to the nearest zone with data (zbd_find_zone).
#[test]
fn trims_are_zone_resets() {
    let d = disk(64, 64, 8, None);
    let dev = ZbdDevice::new(d).unwrap();
    all(&mut gen("rw=write\nbs=16k\noffset=5z\nsize=1z", &dev));
    assert_eq!(dev.write_pointer(5), 6 * 64 * K);
    let mut g = gen("rw=randtrim\nbs=64k\nnumber_ios=1", &dev);
    let ios = all(&mut g);
    assert_eq!(tags(&ios), [('T', 5 * 64, 64)]);
    assert_eq!((dev.write_pointer(5), g.zone_resets()), (5 * 64 * K, 1));
    let e = new_err("rw=trim\nbs=16k", d);
    assert!(e.contains("trim block size 16384 is not the zone size 65536"), "{e}");
}

/// write_mode=zone_append: each write goes out as a Zone Append to its zone's start
/// (engines/nvme.c), fio still moving its own write pointer.
#[test]
fn zone_append_writes_to_the_zone_start() {
    let d = disk(64, 64, 2, None);
    let dev = ZbdDevice::new(d).unwrap();
    let ios = all(&mut gen("rw=write\nbs=32k\nioengine=io_uring_cmd\nwrite_mode=zone_append", &dev));
    assert_eq!(tags(&ios), [('A', 0, 32), ('A', 0, 32), ('A', 64, 32), ('A', 64, 32)]);
    Shadow::run(d, &ios, false);
}

/// The region follows zbd_zone_align_file_sizes: a writer starts at the next zone boundary
/// and ends at the last; a reader only ends at one; less than a zone is refused.
#[test]
fn regions_are_aligned_to_zones() {
    let d = disk(64, 64, 8, None);
    let dev = ZbdDevice::new(d).unwrap();
    let g = gen("rw=write\noffset=16k\nsize=200k", &dev);
    assert_eq!(g.region(), (64 * K, 128 * K));
    let g = gen("rw=read\noffset=16k\nsize=200k", &dev);
    assert_eq!(g.region(), (16 * K, 176 * K));
    let e = new_err("rw=write\noffset=16k\nsize=100k", d);
    assert!(e.contains("io_size must be at least one zone"), "{e}");
}

/// What fio refuses when it meets the drive, and a conventional drive.
#[test]
fn bad_zoned_jobs_are_clear_errors() {
    let d = disk(64, 64, 8, None);
    let cases = [
        ("rw=write\nzonesize=32k", "job 't': zonesize 32768 does not match the drive's zone size 65536"),
        ("rw=write\nbs=128k", "write block size 131072 exceeds the zone size 65536"),
        ("rw=write\ndirect=0", "writing to a zoned drive needs direct I/O (direct=1), as fio requires"),
    ];
    for (body, want) in cases {
        let e = new_err(body, d);
        assert!(e.starts_with("t.fio:1: job 't': ") && e.contains(want), "{body}: {e}");
    }
    // io_uring_cmd goes through the character device, without the block layer's direct rule.
    gen("rw=write\ndirect=0\nioengine=io_uring_cmd", &ZbdDevice::new(d).unwrap());
    // The space must be whole zones of the drive.
    let dev = ZbdDevice::new(d).unwrap();
    let e = JobGen::new_zoned(&job("rw=write"), 0, 16 * K, 64 * K, 512, 1, &dev).err().unwrap().to_string();
    assert!(e.contains("is not whole zones"), "{e}");
    // A conventional drive: refused where zonemode=zbd is, with the reason.
    let e = JobGen::new(&job("rw=write"), 0, 0, 1 << 20, 512, 1).err().unwrap().to_string();
    assert_eq!(
        e,
        "t.fio:2: option 'zonemode' is not supported by flashmux: zonemode=zbd needs a zoned block device (NVMe ZNS); the drive is conventional"
    );
    assert!(ZbdDevice::new(disk(64, 80, 8, None)).is_err());
    assert!(ZbdDevice::new(disk(64, 64, 0, None)).is_err());
}

/// The same job file on the same drive generates the same stream (no clocks, no hash order).
#[test]
fn deterministic() {
    let run = || {
        let dev = ZbdDevice::new(disk(64, 48, 32, Some(4))).unwrap();
        let j = job("rw=randrw\nbs=4k\nbsrange=4k-16k\nnumjobs=3\nnumber_ios=3000\nzone_reset_frequency=0.01\nzone_reset_threshold=0.3");
        let mut gens: Vec<JobGen> = (0..3).map(|c| zoned(&j, c, &dev).unwrap()).collect();
        let mut out = Vec::new();
        for _ in 0..3000 {
            for g in &mut gens {
                out.extend(g.next());
            }
        }
        out
    };
    let a = run();
    assert_eq!(a, run());
    let mut s = Shadow::new(disk(64, 48, 32, Some(4)));
    for io in &a {
        s.apply(io, false);
        assert!(s.open().len() <= 4);
    }
}
