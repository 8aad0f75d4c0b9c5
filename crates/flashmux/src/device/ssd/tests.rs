//! Tests of the SSD's components with exact times: the flash array, the flusher, GC stepping and
//! the map path, each driven directly (no event loop: the test delivers the device's events).

use super::array::{ArrayOptions, FlashArray};
use super::gc::{GcMode, GcQueue};
use super::*;
use crate::device::tests::{geometry, ssd_config, timing};
use crate::device::{Command, DeviceEvent, IoOp, Outbox};
use crate::ftl::{CmtConfig, CmtPolicyKind, GcJob, MappingConfig};
use crate::flash::{Geometry, Multiplane};
use crate::units::{DieId, Nanos, PlaneId, QueueId, ReqId, SimTime, TenantId};

const US: u64 = 1_000;

/// The device tests' SSD with a 64-unit write buffer.
fn config(units_per_page: u32, planes: u32) -> SsdConfig {
    ssd_config(units_per_page, planes, 64)
}

fn array(mode: GcMode) -> FlashArray {
    FlashArray::new(&geometry(4, 1), &timing(), mode, 4_000_000_000, ArrayOptions::default())
}

/// A global flash page on die `die` (one plane per die: block `die × 32` is on that die).
fn page_on_die(die: u32) -> u32 {
    die * 32 * 16
}

/// The time a transfer of `bytes` takes on the 400 MB/s channel.
fn channel(bytes: u64) -> Nanos {
    Nanos::for_transfer(bytes, 400_000_000)
}

#[test]
fn a_read_on_a_busy_die_starts_when_it_is_free_and_transfers_for_page_bytes_over_channel_rate() {
    let mut a = array(GcMode::Background);
    // The first read makes die 0 busy until t = 50 µs + 16 KiB / 400 MB/s = 90.96 µs.
    let t = a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(0), 16384);
    assert_eq!(channel(16384), Nanos(40_960));
    assert_eq!(t, SimTime(50 * US + 40_960));
    // The second starts at t: tR, then exactly page_bytes / channel rate on the (free) channel.
    let end = a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(0), 16384);
    assert_eq!(end, t + Nanos::from_us(50) + Nanos(40_960));
    // Die 2 is on the other channel: held up by neither.
    assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(2), 4096), SimTime(50 * US + 10_240));
    // Die 1 shares channel 0: its data waits for the first transfer and fits in the gap the
    // channel has until the second's (free from 90.96 µs to 140.96 µs).
    assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(1), 4096), t + Nanos(10_240));
    assert_eq!(a.stats().flash_page_reads, 4);
}

#[test]
fn without_die_interleaving_the_dies_of_a_chip_wait_for_each_other() {
    // 2 channels × 1 chip × 2 dies: dies 0 and 1 are chip 0 on channel 0, dies 2 and 3 chip 1.
    let geo = Geometry { chips_per_channel: 1, dies_per_chip: 2, ..geometry(4, 1) };
    let page = 16384;
    let first = SimTime(50 * US + 40_960);
    // Interleaved: die 1's tR overlaps die 0's; only its transfer waits for the channel.
    let mut a = FlashArray::new(&geo, &timing(), GcMode::Background, 4_000_000_000, ArrayOptions::default());
    assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(0), page), first);
    assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(1), page), first + Nanos(40_960));
    // One command per chip (MQSim): die 1 starts when the chip is free, at 90.96 µs.
    let mut a = FlashArray::new(&geo, &timing(), GcMode::Background, 4_000_000_000, ArrayOptions { interleave_dies: false, ..ArrayOptions::default() });
    assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(0), page), first);
    assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(1), page), first + Nanos(50 * US + 40_960));
    // The other chip is held up by neither.
    assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(2), page), first);
    // A program on die 1 waits for the chip too: its data loads in channel 0's first gap
    // (0 to 40.96 µs, before the first read's transfer), as a die's next program loads while
    // the die is busy; tPROG starts once the chip is free, at 181.92 µs.
    let end = a.reserve_program(SimTime::ZERO, DieId(1), 1, 4);
    assert_eq!(end, first + Nanos(50 * US + 40_960) + Nanos::from_us(500));
}

#[test]
fn with_data_out_first_a_command_waits_for_its_channel_to_be_idle() {
    // Dies 0 and 1 share channel 0. Die 0's 16 KiB read: tR to 50 µs, data out 50..90.96 µs.
    let opts = ArrayOptions { data_out_first: true, ..ArrayOptions::default() };
    let first = SimTime(50 * US + 40_960);
    for (dof, t, end) in [
        // A read of die 1 at 60 µs, while die 0's data is leaving: by default it starts at once
        // (its data leaves at 110 µs, the channel idle again); with data out first it is issued
        // at 90.96 µs, when the channel is idle, and its data leaves from 140.96 µs.
        (false, 60, SimTime(110 * US + 40_960)),
        (true, 60, first + Nanos(50 * US + 40_960)),
        // At 10 µs the channel is idle (die 0 is in tR): issued at once either way, its data
        // waiting for die 0's.
        (false, 10, first + Nanos(40_960)),
        (true, 10, first + Nanos(40_960)),
    ] {
        let o = if dof { opts } else { ArrayOptions::default() };
        let mut a = FlashArray::new(&geometry(4, 1), &timing(), GcMode::Background, 4_000_000_000, o);
        assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(0), 16384), first);
        let t = SimTime(t * US);
        assert_eq!(a.reserve_read(t, t, page_on_die(1), 16384), end, "data out first: {dof}, at {t:?}");
    }
    // A program of die 1 at 60 µs loads its data once the channel is idle: 90.96 µs, then
    // 40.96 µs over the channel and tPROG.
    let mut a = FlashArray::new(&geometry(4, 1), &timing(), GcMode::Background, 4_000_000_000, opts);
    a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(0), 16384);
    let t = SimTime(60 * US);
    assert_eq!(a.reserve_program(t, DieId(1), 1, 4), first + Nanos(40_960 + 500 * US));
}

#[test]
fn a_program_loads_over_the_channel_then_waits_for_its_die() {
    let mut a = array(GcMode::Background);
    let first = a.reserve_program(SimTime::ZERO, DieId(0), 1, 4);
    assert_eq!(first, SimTime(40_960 + 500 * US), "16 KiB over the channel, then tPROG");
    // The second loads while the first programs and starts when the die is free.
    let second = a.reserve_program(SimTime::ZERO, DieId(0), 1, 4);
    assert_eq!(second, first + Nanos::from_us(500));
    assert_eq!(a.programs_queued(DieId(0)), 2);
    assert_eq!(a.finish_program(first, DieId(0)), (first, 4));
    assert_eq!(a.programs_queued(DieId(0)), 1);
    // A read arriving meanwhile waits behind both programs.
    let read = a.reserve_read(SimTime(10 * US), SimTime(10 * US), page_on_die(0), 4096);
    assert_eq!(read, second + Nanos::from_us(50) + Nanos(10_240));
}

#[test]
fn the_host_link_is_reserved_per_direction() {
    let mut a = array(GcMode::Background);
    assert_eq!(a.link_in(SimTime::ZERO, 4096), SimTime(1_024), "4 KiB at 4 GB/s");
    assert_eq!(a.link_in(SimTime::ZERO, 4096), SimTime(2_048), "behind the first");
    assert_eq!(a.link_out(SimTime::ZERO, SimTime::ZERO, 4096), SimTime(1_024), "the other direction is free");
}

/// 1 GB/s ECC engines: a 4 KiB codeword passes in 4.096 µs, a 16 KiB page in 16.384 µs.
const ECC_1GBS: EccRates = EccRates { encode_bytes_per_sec: Some(1_000_000_000), decode_bytes_per_sec: Some(1_000_000_000) };

#[test]
fn the_ecc_engines_are_shared_by_all_channels_and_hold_no_die() {
    // array.rs's worked example. Die 0 (channel 0): tR to 50 µs, out over the channel to
    // 60.24 µs, decoded to 64.336 µs.
    let mut a = FlashArray::new(&geometry(4, 1), &timing(), GcMode::Background, 4_000_000_000, ArrayOptions { ecc: ECC_1GBS, ..ArrayOptions::default() });
    assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(0), 4096), SimTime(64_336));
    // Die 2 is on channel 1, whose data is out at 60.24 µs too: it waits for the decoder.
    assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(2), 4096), SimTime(68_432));
    // Die 2 was free once its data had left (60.24 µs), not once it was decoded.
    assert_eq!(a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(2), 4096), SimTime(60_240 + 60_240 + 4_096));
    // A 16 KiB program is encoded before it crosses the channel: 16.384 + 40.96 µs, then
    // tPROG; one on the other channel waits for the encoder first.
    let mut b = FlashArray::new(&geometry(4, 1), &timing(), GcMode::Background, 4_000_000_000, ArrayOptions { ecc: ECC_1GBS, ..ArrayOptions::default() });
    assert_eq!(b.reserve_program(SimTime::ZERO, DieId(0), 1, 4), SimTime(16_384 + 40_960 + 500 * US));
    assert_eq!(b.reserve_program(SimTime::ZERO, DieId(2), 1, 4), SimTime(2 * 16_384 + 40_960 + 500 * US));
    // Only one engine limited: the other direction is not held up.
    let enc = EccRates { decode_bytes_per_sec: None, ..ECC_1GBS };
    let mut c = FlashArray::new(&geometry(4, 1), &timing(), GcMode::Background, 4_000_000_000, ArrayOptions { ecc: enc, ..ArrayOptions::default() });
    assert_eq!(c.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(0), 4096), SimTime(60_240));
}

#[test]
fn gc_over_the_channel_passes_the_ecc_engines_and_encodes_what_it_has_decoded() {
    // Without copy-back, a job of 1 page read and 1 programmed: the page out over the channel
    // at 50..90.96 µs and decoded to 107.344 µs; the program step starts when the die is free
    // (90.96 µs) but encodes from 107.344 to 123.728 µs, crosses in to 164.688 µs, programs to
    // 664.688 µs, erases to 3,664.688 µs. With copy-back the engines are not used: 3,550 µs.
    let mut a = FlashArray::new(&geometry(4, 1), &timing(), GcMode::Background, 4_000_000_000, ArrayOptions { gc_copyback: false, ecc: ECC_1GBS, ..ArrayOptions::default() });
    a.enqueue_gc(DieId(0), job(0, 1, 1));
    // The check is planned without the engines (at 3,631.92 µs): the job is still erasing.
    let planned = a.next_gc_check(SimTime::ZERO, DieId(0)).unwrap();
    assert_eq!(planned, SimTime(50 * US + 2 * 40_960 + 500 * US + 3_000 * US));
    let mut ended = Vec::new();
    a.gc_check_arrived(planned, DieId(0), |j| ended.push(j));
    assert!(ended.is_empty());
    let end = SimTime(3_664_688);
    assert_eq!(a.next_gc_check(planned, DieId(0)), Some(end));
    a.gc_check_arrived(end, DieId(0), |j| ended.push(j));
    assert_eq!(ended, vec![job(0, 1, 1)]);
    // A host read on channel 1 whose data is out at 100 µs waits for GC's decode (to 107.344 µs).
    let mut b = FlashArray::new(&geometry(4, 1), &timing(), GcMode::Background, 4_000_000_000, ArrayOptions { gc_copyback: false, ecc: ECC_1GBS, ..ArrayOptions::default() });
    b.enqueue_gc(DieId(0), job(0, 1, 1));
    b.gc_check_arrived(SimTime(95 * US), DieId(0), |_| {});
    let t = SimTime(100 * US - 60_240);
    assert_eq!(b.reserve_read(t, t, page_on_die(2), 4096), SimTime(107_344 + 4_096));
    let mut c = FlashArray::new(&geometry(4, 1), &timing(), GcMode::Background, 4_000_000_000, ArrayOptions { ecc: ECC_1GBS, ..ArrayOptions::default() });
    c.enqueue_gc(DieId(0), job(0, 1, 1));
    let end = SimTime(50 * US + 500 * US + 3_000 * US);
    assert_eq!(c.next_gc_check(SimTime::ZERO, DieId(0)), Some(end));
    c.gc_check_arrived(end, DieId(0), |j| ended.push(j));
    assert_eq!(ended.len(), 2);
}

fn job(plane: u32, reads: u32, programs: u32) -> GcJob {
    GcJob {
        plane: PlaneId(plane),
        victim: plane * 32,
        read_pages: reads,
        program_pages: programs,
        moved_units: programs * 4,
    }
}

#[test]
fn a_gc_step_yields_to_a_user_read() {
    let mut a = array(GcMode::Background);
    a.enqueue_gc(DieId(0), job(0, 2, 2));
    // At t = 0 the die is idle and no GC step has started: the read goes first.
    let read = a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(0), 4096);
    assert_eq!(read, SimTime(50 * US + 10_240));
    assert_eq!(a.stats().gc_busy_ns, 0);
    // A read at 100 µs: the GC read (60.24..110.24 µs) has started, so it runs; the read waits
    // for that step only, and the next step (a program) waits for the read.
    let t = SimTime(100 * US);
    let read = a.reserve_read(t, t, page_on_die(0), 4096);
    assert_eq!(read, SimTime(60_240 + 50 * US) + Nanos::from_us(50) + Nanos(10_240));
    assert_eq!(a.stats().gc_busy_ns, 50 * US);
}

/// An array whose GC moves pages over the channel (MQSim's `Use_Copyback_for_GC = false`).
fn array_without_copyback() -> FlashArray {
    FlashArray::new(&geometry(4, 1), &timing(), GcMode::Background, 4_000_000_000, ArrayOptions { gc_copyback: false, ..ArrayOptions::default() })
}

#[test]
fn gc_without_copy_back_moves_each_page_over_the_channel_twice() {
    // A job of k = 3 pages read and 3 programmed on an idle drive, 16 KiB pages on a 400 MB/s
    // channel (xfer = 40.96 µs, command time 0). Its steps alternate: a read is tR then the
    // page out over the channel (50 + 40.96 µs), a program the page in then tPROG (40.96 +
    // 500 µs); then the erase. Alone: 3 × (tR + 2 × xfer + tPROG) + tBERS
    // = 3 × 631.92 µs + 3 ms = 4,895.76 µs (with copy-back: 3 × 550 µs + 3 ms = 4,650 µs).
    let end = SimTime(3 * (50 * US + 2 * 40_960 + 500 * US) + 3_000 * US);
    assert_eq!(end, SimTime(4_895_760));
    let mut a = array_without_copyback();
    a.enqueue_gc(DieId(0), job(0, 3, 3));
    // The GC check is planned for the job's end, transfers included.
    assert_eq!(a.next_gc_check(SimTime::ZERO, DieId(0)), Some(end));
    let mut ended = Vec::new();
    a.gc_check_arrived(SimTime(end.0 - 1), DieId(0), |j| ended.push(j));
    assert!(ended.is_empty(), "the erase is still running 1 ns before the end");
    a.gc_check_arrived(end, DieId(0), |j| ended.push(j));
    assert_eq!(ended, vec![job(0, 3, 3)]);
    assert_eq!(a.stats().gc_busy_ns, end.0);
}

#[test]
fn a_host_read_waits_for_a_gc_transfer_on_its_channel() {
    // Dies 0 and 1 share channel 0. Die 0's GC job (1 page read, 1 programmed) starts at 0:
    // tR to 50 µs, the page out over the channel 50..90.96 µs, back in 90.96..131.92 µs, then
    // tPROG and the erase.
    let mut a = array_without_copyback();
    a.enqueue_gc(DieId(0), job(0, 1, 1));
    // A 4 KiB read of die 1 at 60 µs has its data at 110 µs, while GC's page is crossing
    // back in: it waits for that transfer (to 131.92 µs), then takes 10.24 µs.
    let t = SimTime(60 * US);
    assert_eq!(a.reserve_read(t, t, page_on_die(1), 4096), SimTime(131_920 + 10_240));
    // With copy-back the channel is free: 110 + 10.24 µs.
    let mut b = array(GcMode::Background);
    b.enqueue_gc(DieId(0), job(0, 1, 1));
    assert_eq!(b.reserve_read(t, t, page_on_die(1), 4096), SimTime(110 * US + 10_240));
    // A read of die 1 at 30 µs has its data at 80 µs, during GC's transfer out (50..90.96 µs):
    // it waits for it (to 90.96 µs), and GC's transfer back in waits for the read's in turn.
    let mut a = array_without_copyback();
    a.enqueue_gc(DieId(0), job(0, 1, 1));
    let t = SimTime(30 * US);
    assert_eq!(a.reserve_read(t, t, page_on_die(1), 4096), SimTime(90_960 + 10_240));
    // The check planned then does not know of the wait: it finds the job still erasing and
    // the erase ending 10.24 µs later than planned.
    let planned = a.next_gc_check(t, DieId(0)).unwrap();
    assert_eq!(planned, SimTime(90_960 + 40_960 + 500 * US + 3_000 * US));
    let mut ended = Vec::new();
    a.gc_check_arrived(planned, DieId(0), |j| ended.push(j));
    assert!(ended.is_empty());
    let end = SimTime(90_960 + 10_240 + 40_960 + 500 * US + 3_000 * US);
    assert_eq!(a.next_gc_check(planned, DieId(0)), Some(end));
    a.gc_check_arrived(end, DieId(0), |j| ended.push(j));
    assert_eq!(ended, vec![job(0, 1, 1)]);
}

#[test]
fn open_channel_gc_takes_a_turn_before_each_user_operation() {
    let mut a = array(GcMode::HostIo);
    a.enqueue_gc(DieId(0), job(0, 2, 2));
    // The same read at t = 0 now waits for one GC step (a page read, 50 µs).
    let read = a.reserve_read(SimTime::ZERO, SimTime::ZERO, page_on_die(0), 4096);
    assert_eq!(read, SimTime(50 * US + 50 * US + 10_240));
    assert_eq!(a.stats().gc_busy_ns, 50 * US);
}

#[test]
fn gc_jobs_of_two_planes_step_together_as_multi_plane_operations() {
    // The worked example of gc.rs.
    let (mut q, t) = (GcQueue::default(), timing());
    q.push(job(0, 2, 2));
    q.push(job(1, 1, 1));
    assert_eq!(q.next_check(SimTime::ZERO, &t, Nanos::ZERO), Some(SimTime(3_550 * US)), "plane 1's job ends first");
    let mut busy = SimTime::ZERO;
    let mut steps = Vec::new();
    while let Some(d) = q.commit_step(&mut busy, &t, |start, array, _, _| start + array) {
        steps.push(d.0 / US);
    }
    assert_eq!(steps, [50, 500, 3_000, 500, 3_000]);
    assert_eq!(busy, SimTime(7_050 * US));
    let mut ended = Vec::new();
    q.take_ended(SimTime(3_550 * US), |j| ended.push(j.plane.0));
    assert_eq!(ended, [1], "only plane 1's erase has ended at 3.55 ms");
    q.take_ended(busy, |j| ended.push(j.plane.0));
    assert_eq!(ended, [1, 0]);
    assert_eq!(super::gc::job_time(&job(0, 2, 2), &t, Nanos::ZERO) + super::gc::job_time(&job(1, 1, 1), &t, Nanos::ZERO), Nanos(7_650 * US));
}

#[test]
fn a_read_that_misses_the_map_takes_its_die_only_once_its_translation_page_is_in() {
    // 4 one-plane dies (dies 0, 1 on channel 0; 2, 3 on channel 1), 4 KiB pages, 1,024 entries
    // per translation page, a cache of 2 pages. Every unit written (untimed); page 0 cached by
    // an earlier read.
    let cmt = CmtConfig { pages: 2, policy: CmtPolicyKind::Shared, shares: None, period: Nanos::from_ms(100), step: 1, floor: 0 };
    let mut r = Rig::new(SsdConfig { mapping: MappingConfig::Dftl { entry_bytes: 4, cmt }, overprovisioning: 0.5, ..config(1, 1) });
    let n = r.ssd.ftl().logical_units() as u32;
    assert!(n > 1024, "two translation pages");
    for l in 0..n {
        r.ssd.ftl_mut().write_untimed(Lpn(l), 0, Placement(0));
    }
    let c = r.exec(SimTime::ZERO, IoOp::Read, 0, 4096);
    assert!(r.completed(c).is_some());
    let geo = r.ssd.config().geometry.clone();
    let die_of = |ssd: &Ssd, l: u32| match ssd.ftl().lookup(Lpn(l)) {
        crate::ftl::Loc::Flash(p) => geo.die_of_plane(ssd.ftl().plane_of_ppa(p)),
        other => panic!("{other:?}"),
    };
    // A reads a unit of translation page 1 (a miss, its page on die M); B a unit of page 0 (a
    // hit) on the same data die D, on the other channel from M.
    let m = geo.die_of_plane(r.ssd.ftl().map_plane(crate::units::MapPage(1)));
    let a = (1024..n).find(|&l| geo.channel_of_die(die_of(&r.ssd, l)) != geo.channel_of_die(m)).unwrap();
    let d = die_of(&r.ssd, a);
    let b = (1..1024).find(|&l| die_of(&r.ssd, l) == d).unwrap();
    // At T: A's translation page is read on M (50 µs) and crosses M's channel (10.24 µs): A has
    // its address at T + 60.24 µs. B reads D at once: T + 50 µs, its channel to T + 60.24 µs,
    // the link (1.024 µs): complete at T + 61.264 µs. Then A reads D from T + 60.24 µs (when
    // B's data has left D's page register): T + 110.24, its channel to T + 120.48, the link:
    // T + 121.504 µs. Reserved at T instead, A's read would have held D from T + 60.24 µs and
    // B, behind it, would have completed at T + 181.744 µs.
    let t = SimTime(1_000 * US);
    let ra = r.exec(t, IoOp::Read, a as u64 * 4096, 4096);
    let rb = r.exec(t, IoOp::Read, b as u64 * 4096, 4096);
    assert_eq!(r.completed(rb), Some(t + Nanos(61_264)));
    assert_eq!(r.completed(ra), Some(t + Nanos(121_504)));
    let m = r.ssd.map_stats(TenantId(0));
    assert_eq!((m.lookups, m.misses, m.map_wait_ns), (3, 2, 2 * 60_240));
    r.ssd.check_invariants();
}

/// An SSD driven by hand: commands executed at given times, the device's events collected.
struct Rig {
    ssd: Ssd,
    cmds: Vec<CmdState>,
    out: Outbox,
}

impl Rig {
    fn new(cfg: SsdConfig) -> Rig {
        Rig { ssd: Ssd::new(cfg, 2).unwrap(), cmds: Vec::new(), out: Outbox::default() }
    }
    fn exec(&mut self, now: SimTime, op: IoOp, offset: u64, len: u64) -> u32 {
        self.reads_mapped(Some(now));
        let slot = self.cmds.len() as u32;
        let cmd = Command { req: ReqId(slot), tenant: TenantId(0), op, offset, len, queue: QueueId(0), dspec: 0 };
        self.cmds.push(CmdState::new(cmd, now));
        self.ssd.execute(now, slot, &mut self.cmds, &mut self.out);
        slot
    }
    /// Runs the `Mapped` events (reads whose translation pages have arrived) due by `until`
    /// (all of them with `None`), in time order: a map miss's read is issued then.
    fn reads_mapped(&mut self, until: Option<SimTime>) {
        loop {
            let next = self
                .out
                .events
                .iter()
                .enumerate()
                .filter(|(_, e)| matches!(e.1, DeviceEvent::Mapped(_)) && until.is_none_or(|u| e.0 <= u))
                .min_by_key(|(i, e)| (e.0, *i))
                .map(|(i, _)| i);
            let Some(i) = next else { return };
            let (t, e) = self.out.events.remove(i);
            let DeviceEvent::Mapped(slot) = e else { unreachable!() };
            self.ssd.read_mapped(t, slot, &self.cmds, &mut self.out);
        }
    }
    fn completed(&mut self, slot: u32) -> Option<SimTime> {
        self.reads_mapped(None);
        self.out.events.iter().find(|e| e.1 == DeviceEvent::Complete(slot)).map(|e| e.0)
    }
    fn programs_done(&self, die: u32) -> Vec<SimTime> {
        self.out.events.iter().filter(|e| e.1 == DeviceEvent::ProgramDone(DieId(die))).map(|e| e.0).collect()
    }
    /// Logical units of plane 0 (on die 0), in order.
    fn units_of_plane0(&self, n: usize) -> Vec<u64> {
        (0u32..)
            .filter(|&l| self.ssd.ftl().plane_of(crate::units::Lpn(l)) == PlaneId(0))
            .take(n)
            .map(u64::from)
            .collect()
    }
}

#[test]
fn a_program_beyond_the_die_queue_depth_waits_for_the_first_to_finish() {
    // One unit per page: every buffered unit is a whole page, programmed at once (depth 2).
    let mut r = Rig::new(config(1, 1));
    for l in r.units_of_plane0(3) {
        r.exec(SimTime::ZERO, IoOp::Write, l * 4096, 4096);
    }
    let first = SimTime(10_240 + 500 * US);
    assert_eq!(r.programs_done(0), [first, first + Nanos::from_us(500)], "the third waits");
    assert_eq!(r.ssd.buffered_dirty_units(), 1);
    r.ssd.program_done(first, DieId(0), &mut r.cmds, &mut r.out);
    // It loads at `first` and programs once the second has finished.
    assert_eq!(r.programs_done(0)[2], first + Nanos::from_us(1_000));
    assert_eq!(r.ssd.buffered_dirty_units(), 0);
    r.ssd.check_invariants();
}

#[test]
fn the_flusher_pads_a_partial_page_for_a_flush_on_a_volatile_buffer() {
    let mut r = Rig::new(SsdConfig { volatile_write_cache: true, ..config(4, 1) });
    let w = r.exec(SimTime::ZERO, IoOp::Write, 0, 4096);
    assert_eq!(r.completed(w), Some(SimTime(1_024)), "in the buffer once over the link");
    assert!(r.programs_done(0).is_empty() && r.programs_done(1).is_empty(), "a quarter page waits");
    let t = SimTime(10 * US);
    let f = r.exec(t, IoOp::Flush, 0, 0);
    assert_eq!(r.completed(f), None, "the flush waits for the program");
    // The padded page crosses the channel whole (40.96 µs), then tPROG.
    let (die, _) = (0..4).map(|d| (d, r.programs_done(d))).find(|(_, p)| !p.is_empty()).expect("a program");
    let end = t + Nanos(40_960) + Nanos::from_us(500);
    assert_eq!(r.programs_done(die), [end]);
    r.ssd.program_done(end, DieId(die), &mut r.cmds, &mut r.out);
    assert_eq!(r.completed(f), Some(end));
    let s = r.ssd.stats();
    assert_eq!((s.flush_padded_pages, s.flush_wait_ns), (1, end.since(t).0));
    assert_eq!(r.ssd.ftl().stats().padding_units_programmed, 3);
    r.ssd.check_invariants();
}

#[test]
fn a_map_miss_reads_the_translation_page_before_the_command_goes_on() {
    let cmt = CmtConfig {
        pages: 4,
        policy: CmtPolicyKind::Shared,
        shares: None,
        period: Nanos::from_ms(100),
        step: 1,
        floor: 0,
    };
    let mut r = Rig::new(SsdConfig {
        mapping: MappingConfig::Dftl { entry_bytes: 4, cmt },
        overprovisioning: 0.5,
        ..config(4, 1)
    });
    // A read of an unmapped unit: the miss reads a whole 16 KiB translation page (50 µs +
    // 40.96 µs on an idle die), then the zeros cross the link (1.024 µs).
    let a = r.exec(SimTime::ZERO, IoOp::Read, 0, 4096);
    assert_eq!(r.completed(a), Some(SimTime(50 * US + 40_960 + 1_024)));
    // The same page again, later: a hit, only the link.
    let t = SimTime(1_000 * US);
    let b = r.exec(t, IoOp::Read, 4096, 4096);
    assert_eq!(r.completed(b), Some(t + Nanos(1_024)));
    let s = r.ssd.stats();
    assert_eq!((s.map_reads, s.flash_page_reads), (1, 1));
    let m = r.ssd.map_stats(TenantId(0));
    assert_eq!((m.lookups, m.misses, m.commands_delayed, m.map_wait_ns), (2, 1, 1, 50 * US + 40_960));
    r.ssd.check_invariants();
}

/// One die of two planes (units of even numbers on plane 0, odd on plane 1), 4 KiB pages of
/// one unit, multi-plane programs under `rule`.
fn two_planes(rule: Multiplane) -> Rig {
    let geometry = Geometry { channels: 1, chips_per_channel: 1, ..geometry(1, 2) };
    Rig::new(SsdConfig { geometry, multiplane: rule, ..config(1, 2) })
}

#[test]
fn same_page_multi_plane_programs_need_equal_page_indices() {
    // Both planes' first page (index 0): one program under either rule, the two pages crossing
    // the channel one after the other (2 × 10.24 µs), then one tPROG: 520.48 µs.
    for rule in [Multiplane::Any, Multiplane::SamePage] {
        let mut r = two_planes(rule);
        r.exec(SimTime::ZERO, IoOp::Write, 0, 8192);
        assert_eq!(r.programs_done(0), [SimTime(2 * 10_240 + 500 * US)], "{rule}");
        r.ssd.check_invariants();
    }
    // Plane 0 a page ahead: unit 0 alone first (10.24 + 500 µs). At 1 ms units 2 (plane 0,
    // page index 1) and 3 (plane 1, page index 0) arrive together. Any page: one program as
    // above. Same page only: plane 0's page alone (10.24 + 500 µs), then plane 1's, loaded
    // meanwhile (10.24..20.48 µs), once the die is free: 2 × tPROG.
    let t = SimTime(1_000 * US);
    for (rule, ends) in [
        (Multiplane::Any, vec![t + Nanos(2 * 10_240) + Nanos::from_us(500)]),
        (Multiplane::SamePage, vec![t + Nanos(10_240) + Nanos::from_us(500), t + Nanos(10_240) + Nanos::from_us(1_000)]),
    ] {
        let mut r = two_planes(rule);
        r.exec(SimTime::ZERO, IoOp::Write, 0, 4096);
        let first = SimTime(10_240 + 500 * US);
        assert_eq!(r.programs_done(0), [first]);
        r.ssd.program_done(first, DieId(0), &mut r.cmds, &mut r.out);
        r.exec(t, IoOp::Write, 2 * 4096, 8192);
        assert_eq!(r.programs_done(0)[1..], ends, "{rule}");
        r.ssd.check_invariants();
    }
}
