//! Device tests with a minimal event loop of their own.

use super::*;
use crate::engine::EventQueue;
use crate::flash::{Geometry, Timing};
use crate::ftl::{Loc, MappingConfig};
use crate::units::{Lpn, Nanos, QueueId, ReqId, SimTime, TenantId};
use std::collections::BTreeMap;

/// tR 50 µs, tPROG 500 µs, tBERS 3 ms, 400 MB/s channels (the SSD's component tests use it too).
pub(crate) fn timing() -> Timing {
    Timing {
        read: Nanos::from_us(50),
        program: Nanos::from_us(500),
        erase: Nanos::from_ms(3),
        channel_bytes_per_sec: 400_000_000,
        command: Nanos(0),
    }
}

/// 2 channels × 2 chips × 1 die, `planes` planes per die, 4 KiB units (the SSD's component
/// tests use it too).
pub(crate) fn geometry(units_per_page: u32, planes: u32) -> Geometry {
    Geometry {
        channels: 2,
        chips_per_channel: 2,
        dies_per_chip: 1,
        planes_per_die: planes,
        blocks_per_plane: 32,
        pages_per_block: 16,
        page_bytes: 4096 * units_per_page,
        unit_bytes: 4096,
    }
}

/// An SSD on [`geometry`] and [`timing`] (the SSD's component tests use it too).
pub(crate) fn ssd_config(units_per_page: u32, planes: u32, buffer_units: u32) -> SsdConfig {
    SsdConfig::new(geometry(units_per_page, planes), timing(), 2, 0.25, buffer_units, 4_000_000_000)
}

fn nvme() -> NvmeConfig {
    NvmeConfig {
        queues: 2,
        queue_depth: 64,
        controller_cores: 1,
        command_overhead: Nanos(1000),
        arbitration: Arbitration::RoundRobin,
    }
}

struct Harness {
    dev: Device,
    q: EventQueue<DeviceEvent>,
    out: Outbox,
    now: SimTime,
    done: BTreeMap<u32, SimTime>,
    next_req: u32,
}

impl Harness {
    fn new_ssd(cfg: SsdConfig) -> Harness {
        let ssd = Ssd::new(cfg, 2).unwrap();
        Harness::with(Device::new(nvme(), Backend::Ssd(Box::new(ssd))))
    }
    fn with(dev: Device) -> Harness {
        Harness { dev, q: EventQueue::new(), out: Outbox::default(), now: SimTime::ZERO, done: BTreeMap::new(), next_req: 0 }
    }
    fn drain_out(&mut self) {
        for (t, e) in self.out.events.drain(..) {
            assert!(t >= self.now, "event scheduled in the past");
            self.q.push(t, e);
        }
        for r in self.out.completed.drain(..) {
            self.done.insert(r.0, self.now);
        }
    }
    fn submit(&mut self, op: IoOp, offset: u64, len: u64, tenant: u16) -> u32 {
        let req = self.next_req;
        self.next_req += 1;
        let cmd = Command { req: ReqId(req), tenant: TenantId(tenant), op, offset, len, queue: QueueId((req % 2) as u16), dspec: 0 };
        self.dev.submit(self.now, cmd, &mut self.out);
        self.drain_out();
        req
    }
    /// Runs events up to and including time `until`.
    fn run_until(&mut self, until: SimTime) {
        while self.q.peek_time().is_some_and(|t| t <= until) {
            let (t, e) = self.q.pop().unwrap();
            self.now = t;
            self.dev.handle(t, e, &mut self.out);
            self.drain_out();
        }
        self.now = self.now.max(until);
    }
    fn run_all(&mut self) {
        while let Some(t) = self.q.peek_time() {
            self.run_until(t);
        }
    }
    fn ssd(&self) -> &Ssd {
        match self.dev.backend() {
            Backend::Ssd(s) => s,
            Backend::Null(_) => unreachable!(),
        }
    }
}

#[test]
fn null_device_completes_after_overhead_plus_latency() {
    let mut h = Harness::with(Device::new(
        nvme(),
        Backend::Null(NullConfig { capacity_bytes: 1 << 30, latency: Nanos::from_us(5) }),
    ));
    let a = h.submit(IoOp::Read, 0, 4096, 0);
    let b = h.submit(IoOp::Write, 8192, 4096, 0);
    h.run_all();
    // One controller core: the second command is fetched after the first.
    assert_eq!(h.done[&a], SimTime(1000 + 5000));
    assert_eq!(h.done[&b], SimTime(2000 + 5000));
    assert_eq!(h.dev.in_flight(), 0);
    h.dev.check_invariants();
}

#[test]
fn arbitration_is_round_robin_over_queues() {
    let mut h = Harness::with(Device::new(
        nvme(),
        Backend::Null(NullConfig { capacity_bytes: 1 << 30, latency: Nanos::ZERO }),
    ));
    // Queue 0 gets three commands, queue 1 one (the harness alternates by request number,
    // so submit through the device directly).
    let submit = |h: &mut Harness, req: u32, q: u16| {
        let cmd = Command { req: ReqId(req), tenant: TenantId(0), op: IoOp::Read, offset: 0, len: 4096, queue: QueueId(q), dspec: 0 };
        h.dev.submit(h.now, cmd, &mut h.out);
        h.drain_out();
    };
    for (req, q) in [(0, 0), (1, 0), (2, 0), (3, 1)] {
        submit(&mut h, req, q);
    }
    h.run_all();
    // One core, 1 us per command: 0 is fetched at once; then queue 1 gets its turn before
    // queue 0's remaining commands.
    let order: Vec<u32> = {
        let mut v: Vec<(SimTime, u32)> = h.done.iter().map(|(&r, &t)| (t, r)).collect();
        v.sort();
        v.into_iter().map(|(_, r)| r).collect()
    };
    assert_eq!(order, vec![0, 1, 3, 2]);
}

#[test]
fn read_timing_unmapped_buffered_and_flash() {
    let mut h = Harness::new_ssd(ssd_config(1, 1, 64));
    let r0 = h.submit(IoOp::Read, 0, 4096, 0);
    h.run_all();
    let unmapped = h.done[&r0].0;
    assert!(unmapped < 5_000, "unmapped read touches no flash: {unmapped} ns");
    // Write 4 pages (one full stripe: 4 planes), then read them back after the programs.
    let w = h.submit(IoOp::Write, 0, 4 * 4096, 0);
    h.run_all();
    let t_w = h.done[&w];
    assert!(t_w.0 < 20_000, "write completes in the buffer: {t_w:?}");
    assert_eq!(h.ssd().buffered_dirty_units(), 0, "a full stripe is flushed");
    let start = h.now.0;
    let r = h.submit(IoOp::Read, 4096, 4096, 0);
    h.run_all();
    let lat = h.done[&r].0 - start;
    // command fetch 1 us + tR 50 us + 4 KiB at 400 MB/s (10.24 us) + link.
    assert!((61_000..64_000).contains(&lat), "flash read latency {lat} ns");
    h.dev.check_invariants();
}

#[test]
fn reads_on_different_dies_overlap_and_on_one_die_serialise() {
    let mut h = Harness::new_ssd(ssd_config(1, 1, 64));
    h.submit(IoOp::Write, 0, 8 * 4096, 0);
    h.run_all();
    let ftl = h.ssd().ftl();
    let die_of = |l: u32| match ftl.lookup(Lpn(l)) {
        Loc::Flash(p) => ftl.plane_of_ppa(p),
        other => panic!("{other:?}"),
    };
    // LPNs 0 and 1 are on different dies; 0 and 4 on the same one.
    assert_ne!(die_of(0), die_of(1));
    assert_eq!(die_of(0), die_of(4));
    let t0 = h.now.0;
    let a = h.submit(IoOp::Read, 0, 4096, 0);
    let b = h.submit(IoOp::Read, 4096, 4096, 0);
    h.run_all();
    let parallel = h.done[&a].max(h.done[&b]).0 - t0;
    let t1 = h.now.0;
    let c = h.submit(IoOp::Read, 0, 4096, 0);
    let d = h.submit(IoOp::Read, 4 * 4096, 4096, 0);
    h.run_all();
    let serial = h.done[&c].max(h.done[&d]).0 - t1;
    assert!(parallel < 70_000, "{parallel}");
    assert!(serial > 110_000, "same-die reads must serialise: {serial}");
}

#[test]
fn full_buffer_stalls_writes_until_programs_finish() {
    // 8 slots, 4 planes: 2 stripes of writes fill it.
    let mut h = Harness::new_ssd(ssd_config(1, 1, 8));
    let reqs: Vec<u32> = (0..16).map(|i| h.submit(IoOp::Write, i * 4096, 4096, 0)).collect();
    h.run_all();
    let first = h.done[&reqs[0]];
    let last = h.done[&reqs[15]];
    assert!(first.0 < 10_000);
    // Programs of 500 us must finish before the last writes find room.
    assert!(last.0 > 500_000, "last write at {last:?}");
    assert!(h.ssd().stats().writes_stalled > 0);
    h.dev.check_invariants();
}

#[test]
fn the_buffers_dram_writes_each_admission_once_and_one_at_a_time() {
    // Two 8 KiB writes, one after the other through the one controller core (1 us each); the
    // link takes 8 KiB in 2.048 us, the second's after the first's. Without DRAM time each
    // completes when its data is in.
    let writes = |dram: crate::device::DramTiming| {
        let mut h = Harness::new_ssd(SsdConfig { dram, ..ssd_config(1, 1, 64) });
        let (a, b) = (h.submit(IoOp::Write, 0, 8192, 0), h.submit(IoOp::Write, 1 << 20, 8192, 0));
        h.run_all();
        h.dev.check_invariants();
        (h.done[&a], h.done[&b])
    };
    let (a, b) = writes(crate::device::DramTiming::FREE);
    assert_eq!((a, b), (SimTime(1_000 + 2_048), SimTime(1_000 + 2 * 2_048)));
    // DRAM of 10 us per access plus 1 GB/s: 18.192 us per 8 KiB write, one write at a time.
    let dram = crate::device::DramTiming { access: Nanos(10_000), bytes_per_sec: Some(1_000_000_000) };
    assert_eq!(writes(dram), (a + Nanos(18_192), a + Nanos(2 * 18_192)));
    // The per-access time alone.
    let access = crate::device::DramTiming { access: Nanos(10_000), bytes_per_sec: None };
    assert_eq!(writes(access), (a + Nanos(10_000), a + Nanos(20_000)));
}

#[test]
fn a_buffer_of_one_page_per_plane_never_deadlocks() {
    // 4 dies × 1 plane × 4 units per page: 16 slots, a page per plane. Scattered 4 KiB writes
    // fill it with partial pages; some plane always has a whole page to program.
    let mut h = Harness::new_ssd(ssd_config(4, 1, 16));
    for batch in 0..3u64 {
        let reqs: Vec<u32> =
            (0..100u64).map(|i| h.submit(IoOp::Write, ((batch * 100 + i) * 7919 % 4096) * 4096, 4096, 0)).collect();
        h.run_all();
        assert!(reqs.iter().all(|r| h.done.contains_key(r)), "every write of batch {batch} completed");
    }
    assert!(h.ssd().stats().writes_stalled > 0, "the buffer was full");
    h.dev.check_invariants();
}

#[test]
fn random_overwrites_with_gc_keep_data_and_invariants() {
    // (units per page, planes per die, over-provisioning, blocks per plane)
    // Open-channel mode interleaves GC with host I/O instead of running it in idle time only.
    for (upp, planes, op, blocks, open_channel) in
        [(1, 1, 0.25, 32, false), (2, 2, 0.25, 32, false), (1, 1, 0.06, 128, false), (1, 1, 0.25, 32, true), (2, 2, 0.25, 32, true)]
    {
        let mut cfg = ssd_config(upp, planes, 64);
        cfg.open_channel = open_channel;
        cfg.overprovisioning = op;
        cfg.geometry.blocks_per_plane = blocks;
        let mut h = Harness::new_ssd(cfg);
        let cap = h.dev.capacity_bytes();
        let units = cap / 4096;
        let mut x: u64 = 99;
        let mut latest: BTreeMap<u64, u16> = BTreeMap::new();
        for i in 0..units * 11 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = if i < units { i } else { x % units };
            let tenant = (i % 2) as u16;
            h.submit(IoOp::Write, u * 4096, 4096, tenant);
            latest.insert(u, tenant);
            // Keep a bounded number in flight, like a host queue.
            while h.dev.in_flight() >= 32 {
                let t = h.q.peek_time().unwrap();
                h.run_until(t);
            }
            if i % 5000 == 0 {
                h.dev.check_invariants();
            }
        }
        h.run_all();
        h.dev.check_invariants();
        let ftl = h.ssd().ftl();
        assert!(ftl.stats().gc_runs > 0);
        for (&u, &t) in &latest {
            match ftl.lookup(Lpn(u as u32)) {
                Loc::Flash(p) => assert_eq!(ftl.owner_of(p), t),
                Loc::Buffer(_) => {}
                Loc::Unmapped => panic!("unit {u} lost"),
            }
        }
        assert_eq!(h.done.len() as u64, units * 11, "every write completed: the whole space written, then overwritten 10 times");
        let st = h.ssd().stats();
        assert!(st.gc_busy_ns > 0);
        if planes == 1 {
            assert_eq!(st.gc_busy_ns, st.gc_serial_ns, "one plane: GC jobs run one after another");
        } else {
            // Both planes of a die fill at about the same pace, so their GC jobs overlap often.
            assert!(
                (st.gc_busy_ns as f64) < 0.95 * st.gc_serial_ns as f64,
                "multi-plane GC: busy {} vs serial {}",
                st.gc_busy_ns,
                st.gc_serial_ns
            );
        }
    }
}

#[test]
fn watermark_flushing_keeps_hot_data_in_the_buffer() {
    let hot_rewrites = |flush: FlushPolicy| {
        let mut cfg = ssd_config(1, 1, 256);
        cfg.flush = flush;
        let mut h = Harness::new_ssd(cfg);
        // 32 hot units rewritten over and over, with idle time between rounds.
        for round in 0..50 {
            for u in 0..32u64 {
                h.submit(IoOp::Write, ((u * 7 + round) % 32) * 4096, 4096, 0);
            }
            h.run_all();
        }
        h.dev.check_invariants();
        let ssd = h.ssd();
        (ssd.tenant_stats(TenantId(0)).write_buffer_hits, ssd.stats().flash_programs, ssd.buffered_dirty_units())
    };
    let (page_hits, page_programs, _) = hot_rewrites(FlushPolicy::Page);
    let (wm_hits, wm_programs, wm_dirty) = hot_rewrites(FlushPolicy::Watermark { high: 0.5, low: 0.25 });
    // Page flushing programs each unit as soon as its die is free: few rewrites find it dirty.
    assert!(page_programs > 1000, "{page_programs}");
    // Below the high watermark nothing is flushed: every rewrite after the first round hits.
    assert_eq!(wm_hits, 49 * 32);
    assert_eq!(wm_programs, 0);
    assert_eq!(wm_dirty, 32);
    assert!(page_hits < wm_hits / 4, "page {page_hits} vs watermark {wm_hits}");
}

#[test]
fn watermark_flushing_drains_to_the_low_mark() {
    let mut cfg = ssd_config(1, 1, 256);
    cfg.flush = FlushPolicy::Watermark { high: 0.5, low: 0.25 };
    let mut h = Harness::new_ssd(cfg);
    for u in 0..127u64 {
        h.submit(IoOp::Write, u * 4096, 4096, 0);
    }
    h.run_all();
    assert_eq!(h.ssd().buffered_dirty_units(), 127, "just below the high watermark: no flush");
    h.submit(IoOp::Write, 127 * 4096, 4096, 0);
    h.run_all();
    let dirty = h.ssd().buffered_dirty_units();
    // Draining stops at the low mark (64 dirty), give or take the programs already started.
    assert!((56..=64).contains(&dirty), "{dirty} dirty after draining");
    h.dev.check_invariants();
}

#[test]
fn trim_discards_buffered_and_flash_data() {
    // Two units per flash page: a lone unit stays dirty in the buffer until its page fills.
    let mut h = Harness::new_ssd(ssd_config(2, 1, 64));
    h.submit(IoOp::Write, 0, 4 * 4096, 0);
    h.run_all();
    h.submit(IoOp::Write, 4 * 4096, 4096, 0); // stays dirty: half a flash page
    h.run_all();
    assert_eq!(h.ssd().buffered_dirty_units(), 1);
    // Trim 2048..5*4096: unit 0 is partial (kept), units 1..=4 go.
    h.submit(IoOp::Trim, 2048, 5 * 4096 - 2048, 0);
    h.run_all();
    let ftl = h.ssd().ftl();
    assert!(matches!(ftl.lookup(Lpn(0)), Loc::Flash(_)));
    for u in 1..=4 {
        assert_eq!(ftl.lookup(Lpn(u)), Loc::Unmapped);
    }
    assert_eq!(h.ssd().buffered_dirty_units(), 0);
    h.dev.check_invariants();
}

#[test]
fn partial_unit_write_reads_the_old_data_first() {
    let mut h = Harness::new_ssd(ssd_config(1, 1, 64));
    h.submit(IoOp::Write, 0, 4 * 4096, 0);
    h.run_all();
    let t0 = h.now.0;
    let w = h.submit(IoOp::Write, 512, 1024, 1);
    h.run_all();
    let lat = h.done[&w].0 - t0;
    assert!(lat > 50_000, "read-modify-write waits for tR: {lat}");
    assert_eq!(h.ssd().tenant_stats(TenantId(1)).rmw_reads, 1);
    // A sub-unit write to a unit that is not on flash needs no read.
    let t1 = h.now.0;
    let w2 = h.submit(IoOp::Write, 100 * 4096, 512, 1);
    h.run_all();
    assert!(h.done[&w2].0 - t1 < 5_000);
}

fn volatile(mut c: SsdConfig) -> SsdConfig {
    c.volatile_write_cache = true;
    c
}

/// Writes one unit (a partly filled page with 4 units per page) and runs until it is acknowledged.
fn one_buffered_unit(h: &mut Harness) {
    h.submit(IoOp::Write, 0, 4096, 0);
    h.run_all();
    assert_eq!(h.ssd().buffered_dirty_units(), 1, "a partly filled page waits in the buffer");
}

#[test]
fn flush_with_a_protected_buffer_costs_the_command_only() {
    let mut h = Harness::new_ssd(ssd_config(4, 1, 64));
    one_buffered_unit(&mut h);
    let t0 = h.now;
    let f = h.submit(IoOp::Flush, 0, 0, 0);
    h.run_all();
    assert_eq!(h.done[&f], t0 + Nanos(1000), "controller overhead only");
    assert_eq!(h.ssd().buffered_dirty_units(), 1, "the protected buffer keeps its data");
    assert_eq!(h.ssd().stats().flash_programs, 0);
    assert_eq!(h.dev.flushes_completed(), 1);
    h.dev.check_invariants();
}

#[test]
fn flush_of_an_empty_volatile_buffer_costs_the_command_only() {
    let mut h = Harness::new_ssd(volatile(ssd_config(4, 1, 64)));
    let f = h.submit(IoOp::Flush, 0, 0, 0);
    h.run_all();
    assert_eq!(h.done[&f], SimTime(1000));
    assert_eq!(h.ssd().stats().flash_programs, 0);
}

#[test]
fn flush_of_a_volatile_buffer_programs_and_pads_a_partial_page() {
    let mut h = Harness::new_ssd(volatile(ssd_config(4, 1, 64)));
    one_buffered_unit(&mut h);
    let t0 = h.now;
    let f = h.submit(IoOp::Flush, 0, 0, 0);
    h.run_all();
    let lat = h.done[&f].since(t0);
    // Fetch 1 us, the page over the channel (16 KiB at 400 MB/s, 41 us), then tPROG 500 us.
    assert!(lat >= Nanos::from_us(500) + Nanos(1000), "a flush waits for the program: {lat:?}");
    assert!(lat < Nanos::from_us(560), "{lat:?}");
    let s = h.ssd();
    assert_eq!(s.buffered_dirty_units(), 0);
    assert!(matches!(s.ftl().lookup(Lpn(0)), Loc::Flash(_)), "the data is on flash");
    assert_eq!(s.ftl().stats().padding_units_programmed, 3, "the rest of the page is padding");
    assert_eq!((s.stats().flash_programs, s.stats().flush_padded_pages), (1, 1));
    assert_eq!(s.stats().flush_wait_ns, lat.0 - 1000);
    h.dev.check_invariants();
}

#[test]
fn flush_covers_data_before_it_and_not_after_it() {
    let mut h = Harness::new_ssd(volatile(ssd_config(4, 1, 64)));
    one_buffered_unit(&mut h);
    let f = h.submit(IoOp::Flush, 0, 0, 0);
    // Arrives while the flush waits, in another plane (the next flash page of logical space).
    let w = h.submit(IoOp::Write, 4 * 4096, 4096, 0);
    h.run_all();
    assert!(h.done[&w] < h.done[&f], "a write does not wait for an earlier flush");
    let s = h.ssd();
    assert!(matches!(s.ftl().lookup(Lpn(0)), Loc::Flash(_)));
    assert!(matches!(s.ftl().lookup(Lpn(4)), Loc::Buffer(_)), "later data is not forced out");
    assert_eq!(s.stats().flush_padded_pages, 1);
    h.dev.check_invariants();
}

#[test]
fn flush_waits_for_programs_already_under_way() {
    // One unit per page: the write's four pages are programmed at once, one per die.
    let mut h = Harness::new_ssd(volatile(ssd_config(1, 1, 64)));
    h.submit(IoOp::Write, 0, 4 * 4096, 0);
    h.run_until(SimTime(20_000));
    assert_eq!(h.ssd().buffered_dirty_units(), 0, "all handed to programs");
    let f = h.submit(IoOp::Flush, 0, 0, 0);
    h.run_all();
    assert!(h.done[&f] > SimTime(500_000), "{:?}", h.done[&f]);
    assert_eq!(h.ssd().stats().flash_programs, 4);
    assert_eq!(h.ssd().stats().flush_padded_pages, 0);
}

#[test]
fn flush_drains_a_watermark_buffer_below_its_high_mark() {
    let mut c = volatile(ssd_config(1, 1, 64));
    c.flush = FlushPolicy::Watermark { high: 0.9, low: 0.7 };
    let mut h = Harness::new_ssd(c);
    h.submit(IoOp::Write, 0, 8 * 4096, 0);
    h.run_all();
    assert_eq!(h.ssd().buffered_dirty_units(), 8, "below the high mark nothing is programmed");
    let f = h.submit(IoOp::Flush, 0, 0, 0);
    h.run_all();
    assert!(h.done.contains_key(&f));
    assert_eq!(h.ssd().buffered_dirty_units(), 0);
    h.dev.check_invariants();
}

#[test]
fn null_device_completes_a_flush_after_its_latency() {
    let mut h = Harness::with(Device::new(
        nvme(),
        Backend::Null(NullConfig { capacity_bytes: 1 << 30, latency: Nanos::from_us(5) }),
    ));
    let f = h.submit(IoOp::Flush, 0, 0, 0);
    h.run_all();
    assert_eq!(h.done[&f], SimTime(1000 + 5000));
    assert_eq!(h.dev.flushes_completed(), 1);
}

/// 40,000 writes of 4 KiB striding over the logical space, from tenants 0 and 1 in turn, 50 µs
/// apart (waiting for queue room), until GC runs: `each` looks at the drive after every one;
/// then everything completes.
fn overwrite_by_two_tenants(h: &mut Harness, mut each: impl FnMut(&Harness)) {
    let logical = h.ssd().config().logical_units() * 4096;
    let mut off = 0u64;
    for i in 0..40_000u64 {
        off = (off + 7 * 4096 + i % 3 * 4096) % logical;
        while !h.dev.queue_has_room(QueueId((h.next_req % 2) as u16)) {
            let t = h.q.peek_time().expect("a full queue has commands in flight");
            h.run_until(t);
        }
        h.submit(IoOp::Write, off, 4096, (i % 2) as u16);
        h.run_until(h.now + Nanos::from_us(50));
        each(h);
    }
    h.run_all();
}

#[test]
fn an_fdp_drive_shows_the_host_its_erases() {
    let fdp = PlacementMode::Fdp { persistent: vec![false; 2] };
    let mut h = Harness::new_ssd(SsdConfig { placement: fdp, ..ssd_config(1, 1, 16) });
    assert!(!h.dev.is_open_channel(), "its FTL is its own");
    let ftl = h.dev.ftl_view().expect("FDP's log pages");
    assert_eq!(ftl.gc_signal(), GcSignal::BlocksErased(0));
    assert!(!ftl.is_update(4096, 4096));
    h.submit(IoOp::Write, 4096, 4096, 1);
    h.run_all();
    assert!(h.dev.ftl_view().unwrap().is_update(0, 8192), "the host's record of what it wrote");
    // Overwrite the logical space: the erase count the host reads is the drive's, and rises.
    let (mut last, mut rises) = (0u64, 0u32);
    overwrite_by_two_tenants(&mut h, |h| {
        let GcSignal::BlocksErased(n) = h.dev.ftl_view().unwrap().gc_signal() else { panic!("an FDP drive reports erases") };
        assert!(n >= last, "the count only grows");
        rises += u32::from(n > last);
        last = n;
    });
    assert!(rises > 10, "GC erased blocks while the drive was overwritten ({rises} rises)");
    assert_eq!(h.dev.ftl_view().unwrap().gc_signal(), GcSignal::BlocksErased(h.ssd().ftl().stats().erases));
    h.dev.check_invariants();
}

#[test]
fn an_open_channel_drive_answers_the_host_scheduler() {
    let mut h = Harness::new_ssd(ssd_config(1, 1, 16));
    assert!(h.dev.ftl_view().is_none(), "a drive with its own FTL keeps it to itself");
    let mut h2 = Harness::new_ssd(SsdConfig { open_channel: true, ..ssd_config(1, 1, 16) });
    std::mem::swap(&mut h, &mut h2);
    let ftl = h.dev.ftl_view().expect("pblk's view");
    assert_eq!(ftl.unit_bytes(), 4096);
    assert!(!ftl.is_update(0, 8192) && ftl.gc_signal() == GcSignal::Running(false));
    h.submit(IoOp::Write, 4096, 4096, 1);
    h.run_all();
    let ftl = h.dev.ftl_view().expect("pblk's view");
    assert!(ftl.is_update(4096, 4096), "the unit written is mapped");
    assert!(ftl.is_update(0, 8192), "a write covering a mapped unit is an update");
    assert!(!ftl.is_update(0, 4096) && !ftl.is_update(8192, 4096) && !ftl.is_update(4096, 0));
    // Overwrite the logical space until GC runs; GC moves tenant 1's data, and it is seen running.
    let mut seen = false;
    overwrite_by_two_tenants(&mut h, |h| seen |= h.dev.ftl_view().is_some_and(|f| f.gc_signal() == GcSignal::Running(true)));
    let ftl = h.dev.ftl_view().expect("pblk's view");
    assert!(seen, "GC ran while the drive was overwritten");
    assert_eq!(ftl.gc_signal(), GcSignal::Running(false), "and is done once idle");
    assert!(ftl.gc_units_moved(TenantId(0)) + ftl.gc_units_moved(TenantId(1)) > 0);
    assert_eq!(ftl.gc_units_moved(TenantId(1)), h.ssd().ftl().tenant_gc(TenantId(1)).units_moved);
    h.dev.check_invariants();
}

/// Mean latency of tenant 1's reads while tenant 0 overwrites the drive randomly (GC running).
fn read_latency_under_gc(open_channel: bool) -> (f64, u64) {
    let mut h = Harness::new_ssd(SsdConfig { open_channel, ..ssd_config(1, 1, 16) });
    let logical = h.ssd().config().logical_units();
    for u in 0..logical {
        h.submit(IoOp::Write, u * 4096, 4096, 0);
        while h.dev.in_flight() >= 16 {
            let t = h.q.peek_time().unwrap();
            h.run_until(t);
        }
    }
    h.run_all();
    let (mut x, mut reads) = (7u64, Vec::new());
    for i in 0..20_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (op, tenant) = if i % 4 == 0 { (IoOp::Read, 1) } else { (IoOp::Write, 0) };
        while !h.dev.queue_has_room(QueueId((h.next_req % 2) as u16)) || h.dev.in_flight() >= 16 {
            let t = h.q.peek_time().unwrap();
            h.run_until(t);
        }
        let r = h.submit(op, x % logical * 4096, 4096, tenant);
        if op == IoOp::Read {
            reads.push((r, h.now));
        }
        h.run_until(h.now + Nanos::from_us(20));
    }
    h.run_all();
    h.dev.check_invariants();
    let total: u64 = reads.iter().map(|(r, at)| h.done[r].since(*at).0).sum();
    (total as f64 / reads.len() as f64, h.ssd().ftl().stats().gc_runs)
}

#[test]
fn open_channel_gc_is_host_io_that_reads_queue_behind() {
    // In a drive, GC runs in a die's idle time: a read waits at most for the GC step under way.
    // Under pblk, GC is host I/O queued at the LUNs with the users': reads take turns with it.
    let (drive, drive_gc) = read_latency_under_gc(false);
    let (open, open_gc) = read_latency_under_gc(true);
    assert!(drive_gc > 0 && open_gc > 0, "GC ran in both: {drive_gc}, {open_gc}");
    assert!(open > 1.3 * drive, "reads wait for GC turns in open-channel mode: {open:.0} ns vs {drive:.0} ns");
}

#[test]
fn the_device_reports_itself_and_each_tenant() {
    use super::precondition::PreconditionReport;
    let mut h = Harness::new_ssd(ssd_config(4, 1, 64));
    // A whole flash page of one plane (4 units) from tenant 1, programmed at once.
    h.submit(IoOp::Write, 0, 4 * 4096, 1);
    h.run_all();
    let r = h.dev.report(h.now, "tiny", &PreconditionReport::default());
    assert_eq!((r.kind.as_str(), r.preset.as_str(), r.mapping.as_str()), ("ssd", "tiny", "full"));
    assert_eq!((r.ftl.host_units_programmed, r.ssd.flash_programs, r.waf), (4, 1, Some(1.0)));
    assert_eq!(r.capacity_bytes, h.ssd().capacity_bytes());
    assert_eq!((r.write_buffer_hits, r.flushes, r.cmt.is_none()), (0, 0, true));
    let t1 = h.dev.tenant_report(TenantId(1));
    assert_eq!((t1.device.write_units, t1.map.lookups, t1.gc_units_moved), (4, 1, 0));
    assert_eq!(h.dev.tenant_report(TenantId(0)).device, TenantDeviceStats::default());
    assert_eq!(h.dev.tenant_counters(TenantId(1)).map_lookups, 1);
    assert_eq!(h.dev.ftl_memory_bytes(), h.ssd().ftl().memory_bytes());
    assert_eq!(h.dev.logical_units(), 6544);

    let null = Device::new(nvme(), Backend::Null(NullConfig { capacity_bytes: 1 << 20, latency: Nanos(1) }));
    let r = null.report(SimTime(5), "null", &PreconditionReport::default());
    assert_eq!((r.kind.as_str(), r.capacity_bytes, r.unit_bytes, r.waf), ("null", 1 << 20, 512, None));
    assert_eq!(null.tenant_report(TenantId(0)), TenantDeviceReport::default());
    assert_eq!((null.ftl_memory_bytes(), null.logical_units()), ((0, 0), 0));
}

#[test]
fn the_device_preconditions_itself_by_tenant_region_and_starts_counting_afresh() {
    use super::precondition::{PreconditionSpec, PreconditionState};
    let mut h = Harness::new_ssd(ssd_config(4, 1, 64));
    let cap = h.dev.capacity_bytes();
    let half = cap / 2;
    let spec = PreconditionSpec { state: PreconditionState::SequentialFill, fill: 0.5 };
    let r = h.dev.precondition(&spec, &[(0, half), (half, half)], Vec::new(), 7, &|| false);
    // 6,544 logical units: each tenant's 3,272-unit region is half filled.
    assert_eq!(cap / 4096, 6544);
    assert_eq!((r.state, r.units_filled, r.interrupted), (Some(PreconditionState::SequentialFill), 3272, false));
    let ftl = h.ssd().ftl();
    let owner = |lpn: u32| match ftl.lookup(Lpn(lpn)) {
        Loc::Flash(ppa) => Some(ftl.owner_of(ppa)),
        _ => None,
    };
    assert_eq!((owner(0), owner(1635), owner(1636)), (Some(0), Some(0), None));
    assert_eq!((owner(3272), owner(3272 + 1636)), (Some(1), None));
    assert_eq!(ftl.stats().host_units_programmed, 0, "the measured run counts afresh");
    h.dev.check_invariants();

    let mut null = Device::new(nvme(), Backend::Null(NullConfig { capacity_bytes: 1 << 20, latency: Nanos(1) }));
    assert_eq!(null.precondition(&spec, &[(0, 1 << 20)], Vec::new(), 7, &|| false), Default::default());
}

#[test]
fn a_drive_built_in_code_meets_the_rules_a_scenario_file_must() {
    assert!(Ssd::new(ssd_config(1, 1, 8), 1).is_ok());
    let rejected = |change: &dyn Fn(&mut SsdConfig), key: &str| {
        let mut c = ssd_config(1, 1, 8);
        change(&mut c);
        match Ssd::new(c, 1) {
            Err(SsdError::Config(m)) => assert!(m.starts_with(key), "{key}: {m}"),
            Err(e) => panic!("{key}: {e}"),
            Ok(_) => panic!("{key}: built"),
        }
    };
    rejected(&|c| c.buffer_units = 3, "device.buffer.size: 12288 bytes is too small");
    rejected(&|c| c.overprovisioning = 0.0, "device.ftl.overprovisioning");
    rejected(&|c| c.gc_threshold_blocks = 1, "device.ftl.gc_threshold_blocks");
    rejected(&|c| c.program_queue_depth = 0, "device.buffer.program_queue_depth");
    rejected(&|c| c.flush = FlushPolicy::Watermark { high: 1.5, low: 0.5 }, "device.buffer: watermarks");
    rejected(&|c| c.geometry.channels = 0, "device.geometry");
    rejected(
        &|c| {
            c.open_channel = true;
            c.mapping = MappingConfig::Dftl {
                entry_bytes: 4,
                cmt: crate::ftl::CmtConfig {
                    pages: 4,
                    policy: crate::ftl::CmtPolicyKind::Shared,
                    shares: None,
                    period: Nanos::from_secs(1),
                    step: 1,
                    floor: 1,
                },
            }
        },
        "device.ftl.mapping",
    );
    let null = DeviceKind::Null(NullConfig { capacity_bytes: 512, latency: Nanos(1) });
    assert!(matches!(Device::build(nvme(), &null, 1), Err(SsdError::Config(m)) if m.starts_with("device.capacity")));
}

/// The drive's random streams (GC's victim draws) follow the seed the scenario runs with, also
/// when it is set after loading, as `flashmux run --seed` does.
#[test]
fn the_drive_draws_from_the_seed_the_scenario_runs_with() {
    let text = "seed = 1\n[device]\npreset = \"tlc-nvme\"\n[device.ftl]\ngc_victim = \"rga\"\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=read\"\n";
    let mut s = crate::config::Scenario::from_toml(text, "t.toml", std::path::Path::new(".")).unwrap();
    s.seed = 7;
    let sim = crate::sim::Simulator::new(s).unwrap();
    let Backend::Ssd(ssd) = sim.device().backend() else { panic!("a flash drive") };
    assert_eq!(ssd.config().seed, 7);
}

/// MQSim's mapping: 8 KiB pages mapped as 8 KiB units (one unit a page), one plane per die.
fn page_mapped_8k() -> SsdConfig {
    let geometry = Geometry { page_bytes: 8192, unit_bytes: 8192, ..geometry(1, 1) };
    SsdConfig { geometry, ..ssd_config(1, 1, 64) }
}

#[test]
fn a_half_unit_write_reads_the_other_half_first_and_the_writer_is_charged() {
    let mut h = Harness::new_ssd(page_mapped_8k());
    // Unit 0 (die 0) written whole by tenant 0 and programmed.
    h.submit(IoOp::Write, 0, 8192, 0);
    h.run_all();
    // Tenant 1 writes its first 4 KiB; the other half is valid on flash. Fetched 1 µs after
    // submission at e, the old unit is read: tR + 8 KiB over the 400 MB/s channel = 50 +
    // 20.48 µs; the write is acknowledged then (its 4 KiB crossed the link in 1.024 µs). The
    // merged page is programmed once the die is free: its 8 KiB cross the channel during the
    // read's tR (0..20.48 µs), then tPROG: tR + transfer + tPROG = 570.48 µs after e.
    let e = h.now + Nanos(1_000);
    let w = h.submit(IoOp::Write, 0, 4096, 1);
    h.run_all();
    assert_eq!(h.done[&w], e + Nanos(70_480));
    assert_eq!(h.now, e + Nanos(570_480), "the program ends tR + transfer + tPROG after e");
    // A half-unit write to a unit never written (unit 4, die 0 too) reads nothing: acknowledged
    // after the link, programmed after the page's transfer and tPROG.
    let e = h.now + Nanos(1_000);
    let w = h.submit(IoOp::Write, 4 * 8192, 4096, 1);
    h.run_all();
    assert_eq!(h.done[&w], e + Nanos(1_024));
    assert_eq!(h.now, e + Nanos(20_480 + 500_000));
    // The read is charged to the writer, and it is the drive's only flash read.
    let tenant = |t: u16| h.dev.tenant_report(TenantId(t)).device.rmw_reads;
    assert_eq!((tenant(0), tenant(1)), (0, 1));
    let report = h.dev.report(h.now, "test", &crate::device::precondition::PreconditionReport::default());
    assert_eq!((report.ssd.flash_page_reads, report.ssd.flash_programs), (1, 3));
    h.dev.check_invariants();
}
