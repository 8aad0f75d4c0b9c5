//! fio's strided zones (`zonemode=strided`) end to end: fio's own example job reads only its
//! zones of the drive. fio's zoned block device mode (`zonemode=zbd`): fio's example job files
//! for zoned drives run on one (at the generator; the simulated drive is not zoned yet).

use std::sync::{Arc, Mutex};

use flashmux::device::IoOp;
use flashmux::sim::{DispatchSink, Simulator};
use flashmux::units::{SimTime, TenantId};

/// fio's `examples/disk-zone-profile.fio`, as fio ships it.
const DISK_ZONE_PROFILE: &str = include_str!("data/fio/disk-zone-profile.fio");

/// Every command sent to the device: (op, offset, len).
type Sent = Arc<Mutex<Vec<(IoOp, u64, u64)>>>;

struct Record(Sent);

impl DispatchSink for Record {
    fn dispatched(&mut self, _: SimTime, _: TenantId, op: IoOp, offset: u64, len: u64) {
        self.0.lock().unwrap().push((op, offset, len));
    }
}

/// fio's zone profile example runs as it is (on a 16 GiB drive, 300 ms of it): 64 KiB reads in
/// 256 MiB zones every 2.25 GiB (256 MiB read, 2 GiB skipped), the first zone read in order and
/// whole before the next starts.
#[test]
fn fio_s_disk_zone_profile_example_reads_only_its_zones() {
    let dir = std::env::temp_dir().join(format!("flashmux-zone-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("disk-zone-profile.fio"), DISK_ZONE_PROFILE).unwrap();
    let text = "[device]\npreset = \"tlc-nvme\"\ncapacity = \"16GiB\"\n[stop]\ntime = \"300ms\"\n\
                [[tenant]]\nname = \"zones\"\nregion = \"whole\"\njob_file = \"disk-zone-profile.fio\"\n";
    let s = flashmux::config::Scenario::from_toml(text, "s.toml", &dir).unwrap();
    let sent = Sent::default();
    let mut sim = Simulator::new(s).unwrap();
    sim.record_dispatches(Box::new(Record(sent.clone())));
    sim.check_invariants_every(100_000);
    sim.run();
    let r = sim.finish();
    std::fs::remove_dir_all(&dir).unwrap();
    let sent = sent.lock().unwrap().clone();

    const MIB: u64 = 1 << 20;
    let (zone, stride) = (256 * MIB, 256 * MIB + 2048 * MIB);
    assert!(sent.iter().all(|&(op, _, len)| op == IoOp::Read && len == 64 * 1024), "only 64 KiB reads");
    for &(_, offset, len) in &sent {
        assert!(offset % stride + len <= zone, "read at {offset} is outside the zones");
    }
    let zones: std::collections::BTreeSet<u64> = sent.iter().map(|&(_, o, _)| o / stride).collect();
    assert!(zones.len() >= 2, "it moves on to the next zone: {zones:?}");
    // The first zone, all 4096 reads of it, in order before any other (iodepth 2 may reorder
    // neighbours, not zones).
    let first: Vec<u64> = sent.iter().take(4096).map(|&(_, o, _)| o).collect();
    let mut sorted = first.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..4096).map(|i| i * 64 * 1024).collect::<Vec<_>>());
    let bytes = r.jobs.iter().map(|j| j.io.read.bytes).sum::<u64>();
    assert!(bytes >= sent.len() as u64 * 64 * 1024 - 2 * 64 * 1024, "{bytes}");
}

/// fio's job files for zoned drives (`zonemode=zbd`), as fio ships them in `examples/`.
const ZONED_EXAMPLES: [(&str, &str); 7] = [
    ("zbd-rand-write.fio", include_str!("data/fio/zbd-rand-write.fio")),
    ("zbd-rand-write-zone-reset-gc.fio", include_str!("data/fio/zbd-rand-write-zone-reset-gc.fio")),
    ("zbd-rand-write-trim-gc.fio", include_str!("data/fio/zbd-rand-write-trim-gc.fio")),
    ("zbd-seq-read.fio", include_str!("data/fio/zbd-seq-read.fio")),
    ("uring-cmd-zoned.fio", include_str!("data/fio/uring-cmd-zoned.fio")),
    ("uring-cmd-zoned-append.fio", include_str!("data/fio/uring-cmd-zoned-append.fio")),
    ("xnvme-zoned.fio", include_str!("data/fio/xnvme-zoned.fio")),
];

mod zbd {
    use flashmux::workload::fio::{self, Dir, IoUnit, JobGen, ZbdDevice, ZoneOp, ZonedDisk};

    const MIB: u64 = 1 << 20;

    /// 1024 zones of 256 MiB (fio's examples assume 256 MiB zones, up to zone 652), 192 MiB
    /// writable in each, at most 128 open.
    pub const DISK: ZonedDisk =
        ZonedDisk { zone_bytes: 256 * MIB, capacity_bytes: 192 * MIB, zones: 1024, max_open: Some(128), max_active: Some(128) };

    /// The drive's zones as the generated commands change them, checking each against ZNS's
    /// rules: writes at the write pointer within the capacity, appends to a zone's start, reads
    /// below the write pointer.
    pub struct Shadow {
        pub wp: Vec<u64>,
        pub units: [u64; 6],
    }

    impl Shadow {
        pub fn new() -> Shadow {
            Shadow { wp: (0..u64::from(DISK.zones)).map(|z| z * DISK.zone_bytes).collect(), units: [0; 6] }
        }

        pub fn apply(&mut self, io: &IoUnit, file: &str) {
            let z = (io.offset / DISK.zone_bytes) as usize;
            let start = z as u64 * DISK.zone_bytes;
            let cap_end = start + DISK.capacity_bytes;
            let kind = match (io.zone, io.dir) {
                (Some(ZoneOp::Reset), Dir::Trim) => 3,
                (Some(ZoneOp::Reset), _) => 4,
                (Some(ZoneOp::Finish), _) => 5,
                (Some(ZoneOp::Append), _) => 1,
                (None, d) => d.index(),
            };
            self.units[kind] += 1;
            match kind {
                0 => assert!(io.offset + io.len <= self.wp[z], "{file}: a read past the write pointer: {io:?}"),
                1 => {
                    let at = if io.zone.is_some() { start } else { self.wp[z] };
                    assert_eq!(io.offset, at, "{file}: a write not at the write pointer {}: {io:?}", self.wp[z]);
                    assert!(self.wp[z] + io.len <= cap_end, "{file}: a write past the capacity: {io:?}");
                    self.wp[z] += io.len;
                }
                3 | 4 => {
                    assert_eq!((io.offset, io.len), (start, DISK.zone_bytes), "{file}: {io:?}");
                    self.wp[z] = start;
                }
                5 => self.wp[z] = start + DISK.zone_bytes,
                _ => panic!("{file}: a plain trim on a zoned drive: {io:?}"),
            }
        }

        pub fn open(&self) -> usize {
            (0..self.wp.len())
                .filter(|&z| {
                    let start = z as u64 * DISK.zone_bytes;
                    self.wp[z] > start && self.wp[z] < start + DISK.capacity_bytes
                })
                .count()
        }
    }

    /// Runs a job file's jobs on `dev`, phase by phase (stonewall), the clones of a phase in
    /// turn, at most `per_job` units each; every unit goes through `shadow`.
    pub fn run(file: &str, text: &str, dev: &ZbdDevice, shadow: &mut Shadow, per_job: usize) -> Vec<usize> {
        let env = |name: &str| match name {
            "FIO_RW" => Some("randwrite".to_string()),
            "FIO_BS" => Some("8k".to_string()),
            "FIO_IODEPTH" => Some("4".to_string()),
            _ => None,
        };
        let parsed = fio::parse_job_text(text, file, &env).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut counts = Vec::new();
        for phase in fio::phases(&parsed.jobs) {
            let mut gens: Vec<JobGen> = Vec::new();
            for &j in &phase {
                let job = &parsed.jobs[j];
                for clone in 0..job.numjobs {
                    let seed = 1 + gens.len() as u64;
                    gens.push(JobGen::new_zoned(job, clone, 0, DISK.bytes(), 512, seed, dev).unwrap_or_else(|e| panic!("{file}: {e}")));
                }
            }
            let mut n = vec![0; gens.len()];
            loop {
                let mut any = false;
                for (g, n) in gens.iter_mut().zip(n.iter_mut()) {
                    if *n >= per_job {
                        continue;
                    }
                    if let Some(io) = g.next() {
                        shadow.apply(&io, file);
                        *n += 1;
                        any = true;
                    }
                }
                let limit = dev.max_write_zones().unwrap_or(0) as usize;
                assert!(limit == 0 || shadow.open() <= limit, "{file}: {} zones open", shadow.open());
                if !any {
                    break;
                }
            }
            counts.extend(n);
        }
        counts
    }
}

/// fio's zoned example job files parse and run on a zoned drive: every write lands at its
/// zone's write pointer, no read passes one, no more zones are open than the drive allows.
#[test]
fn fio_s_zoned_examples_run_on_a_zoned_drive() {
    for (file, text) in ZONED_EXAMPLES {
        let dev = flashmux::workload::fio::ZbdDevice::new(zbd::DISK).unwrap();
        let mut shadow = zbd::Shadow::new();
        let counts = zbd::run(file, text, &dev, &mut shadow, 3000);
        let [reads, writes, _, trims, resets, finishes] = shadow.units;
        match file {
            // An empty drive has nothing to read: fio's reader does nothing.
            "zbd-seq-read.fio" => assert_eq!(shadow.units, [0; 6], "{file}"),
            _ => assert!(writes > 0, "{file}: {:?} {counts:?}", shadow.units),
        }
        if file == "zbd-rand-write-trim-gc.fio" {
            assert!(trims > 0, "{file}: the trim job resets zones");
        }
        if file == "zbd-rand-write-zone-reset-gc.fio" {
            // 8 zones of 192 MiB written, 32 MiB a write: past 70% of them every 8th write resets.
            assert!(resets > 0, "{file}: {:?}", shadow.units);
            assert!(shadow.wp.iter().enumerate().all(|(z, &wp)| (524..532).contains(&z) || wp == z as u64 * zbd::DISK.zone_bytes));
        }
        let _ = (reads, finishes);
    }
    // zbd-seq-read after a writer: it reads what is written from zone 524 on, and only that.
    let dev = flashmux::workload::fio::ZbdDevice::new(zbd::DISK).unwrap();
    let mut shadow = zbd::Shadow::new();
    zbd::run("w.fio", "[w]\nzonemode=zbd\ndirect=1\nrw=write\nbs=1m\noffset=524z\nsize=3z\nio_size=500m\n", &dev, &mut shadow, usize::MAX);
    let before = shadow.units;
    zbd::run("zbd-seq-read.fio", ZONED_EXAMPLES[3].1, &dev, &mut shadow, usize::MAX);
    assert_eq!(shadow.units[0] - before[0], 500 * 4, "256 KiB reads of the 500 MiB written");
}
