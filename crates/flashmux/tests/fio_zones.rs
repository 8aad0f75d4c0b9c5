//! fio's strided zones (`zonemode=strided`) end to end: fio's own example job reads only its
//! zones of the drive.

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
