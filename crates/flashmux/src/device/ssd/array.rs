//! The flash array: dies, channels and the host link — the only owner of flash time.
//!
//! # Model
//! Each die is busy until its `busy_until`; each channel and each direction of the host link is a
//! [`Timeline`] of busy intervals reserved at the earliest gap that fits. With
//! `interleave_dies = false` (MQSim's transaction scheduler, which sends one command per *chip*
//! and never interleaves a chip's dies) the dies of a chip share one `busy_until`: an operation
//! on any of them waits for the chip. Their GC queues, programs and counters stay per die. Every use of flash time
//! goes through one of these calls:
//! - [`FlashArray::reserve_read`]: the die, once free, spends the command time and tR; the page
//!   register then holds the data until it has crossed the die's channel (the die stays busy);
//! - [`FlashArray::reserve_program`]: the data crosses the channel first, then the die spends
//!   tPROG once free; a host program is counted in the die's program queue until it finishes
//!   (the flusher keeps at most `program_queue_depth` there, so reads wait behind few programs);
//! - [`FlashArray::reserve_map_program`]: a translation page's program, timed like a host
//!   program but not queued (the controller holds it in SRAM);
//! - GC: each die's background queue of GC jobs ([`GcQueue`], stepped as in `gc.rs`). Before any
//!   of the above uses a die, the GC steps that would have started earlier are committed, and
//!   under [`GcMode::HostIo`] one more step goes first. Erases happen only as GC steps. Without
//!   copy-back (`gc_copyback = false`) GC's pages cross the channel too, and before any
//!   transfer the GC steps of all the channel's dies that would have started earlier are
//!   committed, the earliest first.
//! - the host link: [`FlashArray::link_in`] (write data, host to controller) and
//!   [`FlashArray::link_out`] (read data, controller to host);
//! - the controller's ECC engines, when the drive gives them a rate (`ecc`, [`EccRates`]): the
//!   data of every page the controller programs (host, translation and, without copy-back, GC
//!   pages) passes the *encoder* before it crosses the channel, and the data of every page it
//!   reads passes the *decoder* after; each engine is one [`Timeline`] shared by all channels,
//!   so it caps the drive's program (or read) bandwidth whatever the dies could do. A read's
//!   die is free once its data has left over the channel, before the decode;
//! - with `data_out_first` (MQSim's PHY, which sends every waiting data-out before it lets its
//!   scheduler issue a command), a read starts, and a program's data starts loading, only at an
//!   instant the channel is idle ([`FlashArray::issue_time`]): a read of a die whose channel
//!   is carrying another die's page out waits for that transfer's end.
//!
//! # Worked example
//! 16 KiB pages, a 400 MB/s channel, command time 0, tR = 50 µs. A die busy until t = 100 µs
//! gets a read of a whole page at t = 0: it starts at 100 µs, the page is in the register at
//! 150 µs and crosses the idle channel in 16384 B / 400 MB/s = 40.96 µs → 40,960 ns; the read ends
//! at 190.96 µs and the die is busy until then. 4 KiB of it then cross a 4 GB/s link in 1,024 ns.
//! With a 1 GB/s decoder the 4 KiB read of it (crossing the channel in 10.24 µs, out at
//! 160.24 µs) is decoded in 4.096 µs first, to 164.336 µs; a read on another channel whose data is
//! out at 162 µs waits for the decoder until then and is through at 168.432 µs.
//!
//! # Parameters
//! `geometry` (dies, channels, page bytes), `timing.read` / `program` / `erase` / `command` (ns),
//! `timing.channel_bytes_per_sec` and `host_link_bytes_per_sec` (bytes/s); `ecc` (the encoder's
//! and decoder's bytes/s, each unlimited unless given); `interleave_dies`, `gc_copyback`,
//! `data_out_first` ([`ArrayOptions`]).
//!
//! Source: the die/channel timing is MQSim's (Tavakkol et al., FAST '18) and SSDSim's, with
//! ONFI's split of a read into array time and data-out transfer. The ECC engines as a
//! controller-wide throughput limit: a controller's BCH/LDPC codecs sit between the flash
//! channels and its DRAM, and every page's codeword passes them (docs/MODEL.md §6, `tlc-nvme`).
//! The data-out order is MQSim's src/ssd/NVM_PHY_ONFI_NVDDR2.cpp (the channel-idle path) with
//! src/ssd/TSU_Base.cpp (commands issued on the channel-idle signal).

use super::config::EccRates;
use super::gc::{GcMode, GcQueue};
use crate::flash::{Engine, Geometry, Timeline, Timing};
use crate::ftl::GcJob;
use crate::units::{DieId, Nanos, PlaneId, SimTime};
use std::collections::VecDeque;

#[derive(Default)]
struct Die {
    gc: GcQueue,
    /// (end, units) of each host program in flight; a die finishes them in order.
    programs: VecDeque<(SimTime, u32)>,
    /// Without copy-back: when the pages GC last read from this die were decoded, so a program
    /// step encodes no earlier than that.
    gc_decoded: SimTime,
}

/// How the array schedules, beyond geometry and timing (each `SsdConfig` option of the same name).
#[derive(Clone, Copy, Debug)]
pub(super) struct ArrayOptions {
    /// The dies of a chip run independently; `false`: one command per chip (MQSim).
    pub(super) interleave_dies: bool,
    /// GC moves pages on the die; `false`: over the channel (MQSim's default).
    pub(super) gc_copyback: bool,
    /// The controller's ECC engines.
    pub(super) ecc: EccRates,
    /// A command is issued to a die only when its channel is idle: data waiting to leave over
    /// the channel goes first (MQSim's PHY).
    pub(super) data_out_first: bool,
}

impl Default for ArrayOptions {
    fn default() -> Self {
        ArrayOptions { interleave_dies: true, gc_copyback: true, ecc: EccRates::UNLIMITED, data_out_first: false }
    }
}

impl ArrayOptions {
    pub(super) fn of(cfg: &super::SsdConfig) -> ArrayOptions {
        ArrayOptions {
            interleave_dies: cfg.interleave_dies,
            gc_copyback: cfg.gc_copyback,
            ecc: cfg.ecc,
            data_out_first: cfg.data_out_first,
        }
    }
}

/// Counters of flash time, for the drive's statistics.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ArrayStats {
    pub(super) flash_page_reads: u64,
    pub(super) flash_programs: u64,
    /// Time dies spent on GC steps (summed over dies).
    pub(super) gc_busy_ns: u64,
}

pub(super) struct FlashArray {
    geo: Geometry,
    timing: Timing,
    gc_mode: GcMode,
    link_bytes_per_sec: u64,
    dies: Vec<Die>,
    /// When each die (or, without die interleaving, each chip) is free again.
    busy: Vec<SimTime>,
    /// Dies sharing one entry of `busy`: 1, or the dies per chip.
    dies_per_busy: u32,
    channels: Vec<Timeline>,
    link_in: Timeline,
    link_out: Timeline,
    stats: ArrayStats,
    /// GC moves pages on the die (copy-back); `false`: over the channel, as MQSim without
    /// `Use_Copyback_for_GC` (see [`FlashArray::commit_gc_step`]).
    gc_copyback: bool,
    /// Commands wait for their channel to be idle ([`ArrayOptions::data_out_first`]).
    data_out_first: bool,
    encoder: Engine,
    decoder: Engine,
    /// Reused by [`FlashArray::catch_up_channel`] (no allocation per call).
    scratch_dies: Vec<DieId>,
}

impl FlashArray {
    pub(super) fn new(
        geo: &Geometry,
        timing: &Timing,
        gc_mode: GcMode,
        link_bytes_per_sec: u64,
        opts: ArrayOptions,
    ) -> FlashArray {
        let dies_per_busy = if opts.interleave_dies { 1 } else { geo.dies_per_chip };
        FlashArray {
            dies: (0..geo.dies()).map(|_| Die::default()).collect(),
            busy: vec![SimTime::ZERO; (geo.dies() / dies_per_busy) as usize],
            dies_per_busy,
            channels: vec![Timeline::new(); geo.channels as usize],
            link_in: Timeline::new(),
            link_out: Timeline::new(),
            geo: geo.clone(),
            timing: timing.clone(),
            gc_mode,
            link_bytes_per_sec,
            stats: ArrayStats::default(),
            gc_copyback: opts.gc_copyback,
            data_out_first: opts.data_out_first,
            encoder: Engine::new(Nanos::ZERO, opts.ecc.encode_bytes_per_sec),
            decoder: Engine::new(Nanos::ZERO, opts.ecc.decode_bytes_per_sec),
            scratch_dies: Vec::new(),
        }
    }

    pub(super) fn timing(&self) -> &Timing {
        &self.timing
    }
    pub(super) fn stats(&self) -> ArrayStats {
        self.stats
    }

    /// The die that holds global flash page `page`.
    pub(super) fn die_of_page(&self, page: u32) -> DieId {
        let block = page / self.geo.pages_per_block;
        let plane = block / self.geo.blocks_per_plane;
        self.geo.die_of_plane(PlaneId(plane))
    }

    /// Where `die`'s `busy_until` is: its own, or its chip's.
    #[inline]
    fn busy_slot(&self, die: DieId) -> usize {
        (die.0 / self.dies_per_busy) as usize
    }

    /// When a command for a die of channel `ch` that could go at `t` is issued: at `t`, or with
    /// `data_out_first` once the channel is idle (MQSim's PHY sends every waiting data-out
    /// before it signals the scheduler that the channel is idle).
    fn issue_time(&self, ch: usize, t: SimTime) -> SimTime {
        match self.data_out_first {
            true => self.channels[ch].next_idle(t),
            false => t,
        }
    }

    /// Time to move `bytes` over a channel, with the command that starts the transfer.
    fn channel_time(&self, bytes: u64) -> Nanos {
        Nanos::for_transfer(bytes, self.timing.channel_bytes_per_sec) + self.timing.command
    }

    /// Reads `bytes` of global flash page `page` into the controller, the die free from `ready`
    /// on; returns when the data is there (decoded).
    pub(super) fn reserve_read(&mut self, now: SimTime, ready: SimTime, page: u32, bytes: u64) -> SimTime {
        assert!(bytes <= self.geo.page_bytes as u64, "a read of {bytes} bytes from one page");
        let die = self.die_of_page(page);
        self.catch_up_gc(die, now);
        self.gc_turn(die);
        let slot = self.busy_slot(die);
        let ch = self.geo.channel_of_die(die).index();
        let start = self.issue_time(ch, ready.max(self.busy[slot]));
        let array_done = start + self.timing.command + self.timing.read;
        let xfer = self.channel_time(bytes);
        // GC transfers of the channel's other dies that start before this one's data is ready
        // take the channel first.
        self.catch_up_channel(die, array_done, Some(slot));
        let (_, end) = self.channels[ch].reserve(now, array_done, xfer);
        // The page register holds the data until it has left over the channel.
        self.busy[slot] = end;
        self.stats.flash_page_reads += 1;
        debug_assert!(end >= start + self.timing.read + xfer);
        self.decoder.pass(now, end, bytes)
    }

    /// One (multi-plane) host program of `pages` flash pages holding `units` buffered units on
    /// `die`: the data crosses the channel from `now` (a padded page crosses whole), then tPROG.
    /// The program joins the die's queue until [`FlashArray::finish_program`]; returns its end.
    pub(super) fn reserve_program(&mut self, now: SimTime, die: DieId, pages: u64, units: u32) -> SimTime {
        assert!(pages >= 1 && pages <= self.geo.planes_per_die as u64, "a program of {pages} pages");
        let bytes = pages * self.geo.page_bytes as u64;
        let ch = self.geo.channel_of_die(die).index();
        let encoded = self.encoder.pass(now, now, bytes);
        self.catch_up_channel(die, encoded, Some(self.busy_slot(die)));
        let encoded = self.issue_time(ch, encoded);
        let xfer = self.channel_time(bytes);
        let (_, loaded) = self.channels[ch].reserve(now, encoded, xfer);
        // GC steps of other planes that start while the data is loading go first.
        self.catch_up_gc(die, loaded);
        self.gc_turn(die);
        let slot = self.busy_slot(die);
        let start = loaded.max(self.busy[slot]);
        let end = start + self.timing.program;
        self.busy[slot] = end;
        self.dies[die.index()].programs.push_back((end, units));
        self.stats.flash_programs += 1;
        end
    }

    /// Programs a translation page on `die` once its contents are ready in the controller at
    /// `ready`: channel transfer, then tPROG. Not a host program: not queued, not counted.
    pub(super) fn reserve_map_program(&mut self, now: SimTime, ready: SimTime, die: DieId) {
        let ready = self.encoder.pass(now, ready, self.geo.page_bytes as u64);
        let xfer = self.channel_time(self.geo.page_bytes as u64);
        let ch = self.geo.channel_of_die(die).index();
        self.catch_up_channel(die, ready, Some(self.busy_slot(die)));
        let ready = self.issue_time(ch, ready);
        let (_, loaded) = self.channels[ch].reserve(now, ready, xfer);
        self.catch_up_gc(die, loaded);
        let slot = self.busy_slot(die);
        self.busy[slot] = loaded.max(self.busy[slot]) + self.timing.program;
    }

    /// A zone reset's erases on `die`: `rounds` multi-plane erases (one block per plane each),
    /// after whatever the die is doing. Returns when they end.
    pub(super) fn reserve_erase(&mut self, now: SimTime, die: DieId, rounds: u32) -> SimTime {
        self.catch_up_gc(die, now);
        let slot = self.busy_slot(die);
        let start = now.max(self.busy[slot]);
        let end = start + (self.timing.command + self.timing.erase) * rounds as u64;
        self.busy[slot] = end;
        end
    }

    /// The oldest host program of `die` has ended: its (end, units).
    pub(super) fn finish_program(&mut self, now: SimTime, die: DieId) -> (SimTime, u32) {
        let (end, units) = self.dies[die.index()].programs.pop_front().expect("program completion without a program");
        debug_assert!(end <= now);
        (end, units)
    }

    /// Host programs queued or running on `die`.
    pub(super) fn programs_queued(&self, die: DieId) -> u32 {
        self.dies[die.index()].programs.len() as u32
    }

    /// Time for `bytes` on one direction of the host link.
    fn link_time(&self, bytes: u64) -> Nanos {
        Nanos::for_transfer(bytes, self.link_bytes_per_sec)
    }

    /// Write data crossing the link into the controller from `now`; returns when it is in.
    pub(super) fn link_in(&mut self, now: SimTime, bytes: u64) -> SimTime {
        let t = self.link_time(bytes);
        self.link_in.reserve(now, now, t).1
    }

    /// Read data leaving for the host once it is in the controller at `ready`; returns when it
    /// has arrived.
    pub(super) fn link_out(&mut self, now: SimTime, ready: SimTime, bytes: u64) -> SimTime {
        let t = self.link_time(bytes);
        self.link_out.reserve(now, ready, t).1
    }

    /// Puts a GC job the FTL started in its die's background queue.
    pub(super) fn enqueue_gc(&mut self, die: DieId, job: GcJob) {
        debug_assert_eq!(self.geo.die_of_plane(job.plane), die);
        self.dies[die.index()].gc.push(job);
    }

    /// Commits the GC steps of `die` that start before `t`: the die was free then, so GC ran.
    /// When GC moves pages over the channel, those of every die on `die`'s channel, in the
    /// order they start, as their transfers share it.
    pub(super) fn catch_up_gc(&mut self, die: DieId, t: SimTime) {
        if !self.gc_copyback {
            return self.catch_up_channel(die, t, None);
        }
        while self.busy[self.busy_slot(die)] < t {
            if !self.commit_gc_step(die) {
                break;
            }
        }
    }

    /// GC over the channel: commits the GC steps that start before `t` on the dies of `die`'s
    /// channel (but those of busy slot `except`), the earliest first, so that a transfer
    /// reserved after this finds the channel as GC left it. Nothing with copy-back.
    fn catch_up_channel(&mut self, die: DieId, t: SimTime, except: Option<usize>) {
        if self.gc_copyback {
            return;
        }
        let per_channel = self.geo.chips_per_channel * self.geo.dies_per_chip;
        let first = self.geo.channel_of_die(die).0 * per_channel;
        // The channel's dies with GC steps, found once: committing a step changes only its own
        // die's queue (and its busy time, read afresh each round).
        let mut gc_dies = std::mem::take(&mut self.scratch_dies);
        gc_dies.clear();
        gc_dies.extend(
            (first..first + per_channel)
                .map(DieId)
                .filter(|&d| Some(self.busy_slot(d)) != except && self.dies[d.index()].gc.has_step()),
        );
        while let Some((_, d)) =
            gc_dies.iter().map(|&d| (self.busy[self.busy_slot(d)], d)).filter(|&(busy, _)| busy < t).min()
        {
            self.commit_gc_step(d);
            if !self.dies[d.index()].gc.has_step() {
                gc_dies.retain(|&x| x != d);
            }
        }
        self.scratch_dies = gc_dies;
    }

    /// Channel time of one page GC moves: a page's transfer with its command, or zero with
    /// copy-back.
    pub(super) fn gc_page_transfer(&self) -> Nanos {
        match self.gc_copyback {
            true => Nanos::ZERO,
            false => self.channel_time(self.geo.page_bytes as u64),
        }
    }

    /// Open-channel mode: GC is host I/O (pblk's GC reads valid data into the host and writes it
    /// back through the RWB), queued at the LUN with the users' I/O rather than run in the
    /// die's idle time. A user operation on a die with GC under way therefore waits for one GC
    /// step first: the two streams take turns, as two FIFO submitters do.
    fn gc_turn(&mut self, die: DieId) {
        if self.gc_mode.takes_turns() {
            self.commit_gc_step(die);
        }
    }

    /// Runs the next step of `die`'s GC gang from `busy_until`; false if the die has no GC step.
    /// With copy-back the step takes its array time (tR, tPROG or tBERS, the longest of the
    /// gang's). Over the channel, the pages the gang programs first pass the encoder and cross
    /// the channel into the die (one page's transfer each, one after another), then the array
    /// time runs, then the pages it read cross out and pass the decoder; the die is busy until
    /// the last has left over the channel, and a program step's encoding waits for the decoding
    /// of the die's last GC reads. The channel and the engines are reserved at their earliest
    /// gaps, shared with host transfers.
    fn commit_gc_step(&mut self, die: DieId) -> bool {
        let slot = self.busy_slot(die);
        let page = self.gc_page_transfer();
        let page_bytes = self.geo.page_bytes as u64;
        let copyback = self.gc_copyback;
        let channel = &mut self.channels[self.geo.channel_of_die(die).index()];
        let (encoder, decoder) = (&mut self.encoder, &mut self.decoder);
        let d = &mut self.dies[die.index()];
        let decoded = &mut d.gc_decoded;
        let time = |start: SimTime, array: Nanos, reads: u32, programs: u32| {
            if copyback {
                return start + array;
            }
            // Nothing before `start` is forgotten: the channel's dies were caught up to it.
            let mut cross = |ready: SimTime, pages: u32| match pages {
                0 => ready,
                n => channel.reserve(SimTime::ZERO, ready, page * n as u64).1,
            };
            // A page is re-encoded once it has been read and decoded.
            let encoded = match programs {
                0 => start,
                n => encoder.pass(SimTime::ZERO, start.max(*decoded), page_bytes * n as u64),
            };
            let loaded = cross(encoded, programs);
            let out = cross(loaded + array, reads);
            if reads > 0 {
                *decoded = decoder.pass(SimTime::ZERO, out, page_bytes * reads as u64);
            }
            out
        };
        match d.gc.commit_step(&mut self.busy[slot], &self.timing, time) {
            Some(dur) => {
                self.stats.gc_busy_ns += dur.0;
                true
            }
            None => false,
        }
    }

    /// When `die`'s next GC check is due, if it needs one that is not scheduled yet.
    pub(super) fn next_gc_check(&mut self, now: SimTime, die: DieId) -> Option<SimTime> {
        let start = now.max(self.busy[self.busy_slot(die)]);
        let xfer = self.gc_page_transfer();
        self.dies[die.index()].gc.next_check(start, &self.timing, xfer)
    }

    /// `die`'s GC check has come: commits the steps that start by `now` and hands over the jobs
    /// whose erase has ended, in order.
    pub(super) fn gc_check_arrived(&mut self, now: SimTime, die: DieId, ended: impl FnMut(GcJob)) {
        self.dies[die.index()].gc.check_arrived();
        // Steps starting exactly now run too: nothing else claimed the die first.
        self.catch_up_gc(die, now + Nanos(1));
        self.dies[die.index()].gc.take_ended(now, ended);
    }

    /// Mean fraction of time the channels were busy until `now`.
    pub(super) fn channel_utilisation(&self, now: SimTime) -> f64 {
        if now == SimTime::ZERO {
            return 0.0;
        }
        let busy: u64 = self.channels.iter().map(|c| c.busy_total().0).sum();
        (busy as f64 / (now.0 as f64 * self.channels.len() as f64)).min(1.0)
    }

    /// Checks the dies and channels; returns the GC jobs each plane has queued or running and
    /// the host-program units in flight.
    pub(super) fn check_invariants(&self, program_queue_depth: u32) -> (Vec<u16>, u32) {
        let mut jobs = vec![0u16; self.geo.planes() as usize];
        let mut units = 0;
        for d in &self.dies {
            for j in d.gc.jobs() {
                jobs[j.plane.index()] += 1;
            }
            d.gc.check_invariants();
            assert!(d.programs.len() as u32 <= program_queue_depth);
            assert!(d.programs.iter().zip(d.programs.iter().skip(1)).all(|(a, b)| a.0 <= b.0));
            units += d.programs.iter().map(|p| p.1).sum::<u32>();
        }
        for c in &self.channels {
            c.check_invariants();
        }
        (jobs, units)
    }
}
