//! The flusher: write-buffer admission, when dirty data leaves the buffer, and flush commands.
//!
//! # Model
//! - **Admission.** A write takes a buffer slot per mapping unit (a unit still dirty in the
//!   buffer is rewritten in place: a write hit, one program saved); a partial unit whose old data
//!   is on flash reads it first (read-modify-write). The write completes when its data has
//!   crossed the host link — and, when the buffer's DRAM has a cost (`dram`), has been written
//!   to DRAM: one access per admission (the units admitted together), one access at a time.
//!   With the buffer full, writes wait in arrival order and are admitted unit by unit as
//!   programs free slots.
//! - **Draining.** Dies with dirty data wait in a round-robin ready queue. A die takes a program
//!   when it has fewer than `program_queue_depth` programs queued and one of its planes is ready:
//!   a flash page of dirty units (or any, for a waiting flush), room in its open block, and —
//!   under [`GcMode::Background`] — no GC job of its own (GC goes before buffered writes there).
//!   One program takes a page from every ready plane of the die (multi-plane); under
//!   `multiplane = "same-page"` only from those whose next page has the page index (in its
//!   block) of the first ready plane's, as MQSim requires of a multi-plane command. The
//!   [`FlushPolicy`] says whether draining is wanted: always (`page`), or from a `high` buffer
//!   fill down to a `low` one (`watermark`).
//! - **Flush commands.** On a power-loss-protected buffer, or an empty one, a flush completes at
//!   once. On a volatile buffer it waits until every unit the buffer held when it arrived has
//!   been programmed; the flusher takes partly filled pages for it meanwhile, padded to a whole
//!   page (`flush_padded_pages`, and the FTL's `padding_units_programmed`).
//!
//! # Worked example
//! 4 units per page, a volatile buffer. One 4 KiB write (one unit) is buffered; a flush arrives
//! at t. The unit's plane is not ready by the page rule (1 < 4 units) but the flush needs it: one
//! program takes the unit and pads 3 units, crosses the channel as a whole 16 KiB page and ends
//! tPROG later; the flush completes when that program does (`flush_wait_ns` = its wait).
//!
//! DRAM at 23.421 µs per access plus 466.37 MB/s (MQSim's shipped DRAM as `import mqsim` fits
//! it): a 64 KiB write whose data is in at t completes at t + 163.944 µs; sixteen at once
//! complete 163.944 µs apart, so the buffer takes at most 6,100 such writes a second whatever
//! the flash does.
//!
//! # Parameters
//! `buffer_units` (slots of one mapping unit), `program_queue_depth` (programs per die),
//! `flush` ([`FlushPolicy`]: `page`, or `watermark` with `high` and `low` fractions of the
//! buffer), `volatile_write_cache` (bool), `multiplane` ([`Multiplane`]: `any`, `same-page`),
//! `dram` (per-access time and bytes/s; none by default).
//!
//! With `same-page`: two planes of a die, plane 0's open block at page 1 and plane 1's at page
//! 0, each with a page of dirty data: plane 0's page is programmed alone, plane 1's in the
//! die's next program, 2 × tPROG in all instead of 1 × (`device/ssd/tests.rs`).
//!
//! Source: the per-die program queue and page-sized flushes follow MQSim's data cache manager
//! (Tavakkol et al., FAST '18); the same-page rule is MQSim, src/ssd/TSU_Base.cpp
//! (`issue_command_to_chip`), which TSU_OutOfOrder.cpp calls for each chip; the flush
//! semantics are NVMe's Flush command (NVMe base specification) with a volatile write cache;
//! the DRAM as one channel serving one access at a time is MQSim's data cache manager
//! (src/ssd/Data_Cache_Manager_Flash_Advanced.cpp, `service_dram_access_request`).

use super::{FlushPolicy, Ssd, SsdConfig};
use crate::device::buffer::WriteBuffer;
use crate::device::{CmdState, DeviceEvent, Outbox};
use crate::flash::{Engine, Multiplane};
use crate::ftl::Loc;
use crate::units::{BufferSlot, DieId, Lpn, Placement, PlaneId, SimTime};
use std::collections::VecDeque;

/// A flush waiting for the data the buffer held when it arrived to be programmed.
struct FlushCmd {
    slot: u32,
    /// Data born (inserted) before this must be on flash.
    before: u64,
    /// Buffer slots still holding such data.
    remaining: u32,
    arrived: SimTime,
}

/// Counters of the flusher, for the drive's statistics.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FlusherStats {
    pub(super) writes_stalled: u64,
    pub(super) flush_padded_pages: u64,
    /// Partly filled pages of one placement programmed because the buffer was full with no
    /// placement of the plane holding a whole page.
    pub(super) placement_padded_pages: u64,
    pub(super) flush_wait_ns: u64,
}

pub(super) struct Flusher {
    pub(super) buf: WriteBuffer,
    policy: FlushPolicy,
    volatile: bool,
    depth: u32,
    planes_per_die: u32,
    /// Writes waiting for buffer space, oldest first (command slots).
    pub(super) waiting: VecDeque<u32>,
    /// Dies that may be able to start a program, and whether each is in that queue.
    ready: VecDeque<DieId>,
    in_ready: Vec<bool>,
    /// Buffer slots of each die's programs in flight, oldest first.
    inflight: Vec<VecDeque<BufferSlot>>,
    /// Whether the flusher is draining the buffer (always, under `FlushPolicy::Page`).
    draining: bool,
    /// Flushes waiting for buffered data, in arrival order.
    flush_cmds: VecDeque<FlushCmd>,
    /// The buffer's DRAM: each write's admitted data in one access (`SsdConfig::dram`).
    dram: Engine,
    pub(super) stats: FlusherStats,
}

impl Flusher {
    pub(super) fn new(cfg: &SsdConfig) -> Flusher {
        let (geo, dies) = (&cfg.geometry, cfg.geometry.dies() as usize);
        Flusher {
            buf: WriteBuffer::new(cfg.buffer_units, geo.planes(), cfg.ftl_params().placements.count() as u32),
            policy: cfg.flush,
            volatile: cfg.volatile_write_cache,
            depth: cfg.program_queue_depth,
            planes_per_die: geo.planes_per_die,
            waiting: VecDeque::new(),
            ready: VecDeque::new(),
            in_ready: vec![false; dies],
            inflight: vec![VecDeque::new(); dies],
            draining: false,
            flush_cmds: VecDeque::new(),
            dram: Engine::new(cfg.dram.access, cfg.dram.bytes_per_sec),
            stats: FlusherStats::default(),
        }
    }

    /// Puts `die` in the ready queue (once).
    pub(super) fn mark_die(&mut self, die: DieId) {
        let r = &mut self.in_ready[die.index()];
        if !*r {
            *r = true;
            self.ready.push_back(die);
        }
    }

    /// Puts every die with dirty data in the ready queue.
    fn mark_dirty_dies(&mut self) {
        for plane in (0..self.buf_planes()).map(PlaneId) {
            if self.buf.dirty_in_plane(plane) > 0 {
                self.mark_die(DieId(plane.0 / self.planes_per_die));
            }
        }
    }

    fn buf_planes(&self) -> u32 {
        self.in_ready.len() as u32 * self.planes_per_die
    }

    /// Whether the flush policy wants dirty data programmed now (updates the watermark state).
    fn wants_flush(&mut self) -> bool {
        let FlushPolicy::Watermark { high, low } = self.policy else { return true };
        let fill = self.buf.dirty() as f64 / self.buf.capacity() as f64;
        // Dies with dirty data stay in the ready queue while the buffer fills (they were marked
        // when the data arrived), so draining starts on all of them at once.
        if !self.draining && fill >= high {
            self.draining = true;
        } else if self.draining && fill <= low {
            self.draining = false;
        }
        self.draining
    }

    /// Whether a waiting flush needs `plane`'s oldest dirty unit on flash.
    fn flush_needs(&self, plane: PlaneId) -> bool {
        let Some(f) = self.flush_cmds.back() else { return false };
        self.buf.oldest_dirty_born(plane).is_some_and(|b| b < f.before)
    }

    /// A Flush command: done now if the buffer is protected or empty; otherwise it waits until
    /// every unit the buffer holds now has been programmed, and the flusher takes partly filled
    /// pages meanwhile.
    pub(super) fn begin_flush_cmd(&mut self, now: SimTime, slot: u32, out: &mut Outbox) {
        let held = self.buf.occupied();
        if !self.volatile || held == 0 {
            out.events.push((now, DeviceEvent::Complete(slot)));
            return;
        }
        self.flush_cmds.push_back(FlushCmd { slot, before: self.buf.next_born(), remaining: held, arrived: now });
        self.mark_dirty_dies();
    }

    /// A buffer slot that held data born `born` is free: flushes waiting for it may complete.
    /// A later flush waits for a superset of an earlier one's data, so they complete in order.
    pub(super) fn data_left(&mut self, now: SimTime, born: u64, out: &mut Outbox) {
        if self.flush_cmds.is_empty() {
            return;
        }
        for f in self.flush_cmds.iter_mut().filter(|f| born < f.before) {
            f.remaining -= 1;
        }
        while self.flush_cmds.front().is_some_and(|f| f.remaining == 0) {
            let f = self.flush_cmds.pop_front().expect("front checked");
            debug_assert_eq!(self.buf.occupied_born_before(f.before), 0, "flush completes with its data buffered");
            self.stats.flush_wait_ns += now.since(f.arrived).0;
            out.events.push((now, DeviceEvent::Complete(f.slot)));
            if self.flush_cmds.is_empty() {
                // The flusher dropped dies the policy did not want while flushes forced it.
                self.mark_dirty_dies();
            }
        }
    }

    /// The dirty unit in `slot` is dropped unprogrammed (trimmed, or superseded by a write
    /// through another placement): its slot is free, and flushes waiting for it may complete.
    pub(super) fn drop_dirty(&mut self, now: SimTime, slot: BufferSlot, out: &mut Outbox) {
        let born = self.buf.born(slot);
        self.buf.discard(slot);
        self.data_left(now, born, out);
    }

    /// Frees the buffer slots of `units` units of `die`'s oldest program, which has ended.
    fn release_program(&mut self, now: SimTime, die: DieId, units: u32, out: &mut Outbox) {
        for _ in 0..units {
            let slot = self.inflight[die.index()].pop_front().expect("slot of a finished program");
            let born = self.buf.born(slot);
            self.buf.release(slot);
            self.data_left(now, born, out);
        }
    }

    /// A write waits for buffer space behind the others.
    pub(super) fn stall(&mut self, slot: u32) {
        self.stats.writes_stalled += 1;
        self.waiting.push_back(slot);
    }

    pub(super) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    pub(super) fn check_invariants(&self, program_units: u32) {
        self.buf.check_invariants();
        let inflight: usize = self.inflight.iter().map(|s| s.len()).sum();
        assert_eq!(inflight as u32, program_units, "in-flight program slots out of sync");
        assert_eq!(
            self.buf.free_slots() + self.buf.dirty() + inflight as u32,
            self.buf.capacity(),
            "write-buffer slots leaked"
        );
        for (i, f) in self.flush_cmds.iter().enumerate() {
            assert_eq!(f.remaining, self.buf.occupied_born_before(f.before), "flush's remaining data miscounted");
            assert!(i == 0 || self.flush_cmds[i - 1].before <= f.before, "flushes out of order");
        }
        let flagged = self.in_ready.iter().filter(|&&r| r).count();
        assert_eq!(flagged, self.ready.len(), "ready flags out of sync with the ready queue");
    }
}

impl Ssd {
    /// Moves as much of a write as fits into the buffer. Returns whether the whole write is in;
    /// then its completion is scheduled.
    pub(super) fn admit(&mut self, now: SimTime, slot: u32, cmds: &mut [CmdState], out: &mut Outbox) -> bool {
        let st = &mut cmds[slot as usize];
        let cmd = st.cmd;
        let (first, last) = self.unit_range(&cmd);
        let unit = self.geo.unit_bytes as u64;
        let t = cmd.tenant.index();
        // A Finish's padding is the drive's own: no owner, not the tenant's writes, and it
        // does not cross the host link.
        let padding = st.padding;
        let owner = if padding { crate::ftl::NO_OWNER } else { cmd.tenant.0 };
        let placement = st.placement;
        let mut lpn = first + st.progress;
        let mut admitted_bytes = 0u64;
        while lpn <= last {
            let l = Lpn(lpn);
            let mut loc = self.ftl.lookup(l);
            if let Loc::Buffer(s) = loc {
                if self.flusher.buf.placement(s) == placement {
                    self.flusher.buf.rewrite(s, owner);
                    self.tenant(t).write_buffer_hits += 1;
                } else {
                    // Dirty through another placement: the new data takes a slot of its own
                    // placement (the old one is superseded, never programmed).
                    self.flusher.drop_dirty(now, s, out);
                    loc = Loc::Unmapped;
                }
            }
            match loc {
                Loc::Buffer(_) => {}
                // Padding only where the zone's blocks have room: a page padded earlier (a
                // flush) took some, and the rest of the zone's LBAs then read as unwritten.
                _ if padding && self.ftl.zone_room(placement, self.ftl.plane_of(l)) <= self.flusher.buf.dirty_in(self.ftl.plane_of(l), placement) => {}
                loc => {
                    let plane = self.ftl.plane_of(l);
                    let Some(s) = self.flusher.buf.insert(l, owner, plane, placement) else { break };
                    let unit_start = lpn as u64 * unit;
                    let partial = cmd.offset > unit_start || cmd.offset + cmd.len < unit_start + unit;
                    if let (true, false, Loc::Flash(ppa)) = (partial, padding, loc) {
                        // Read-modify-write: the rest of the unit comes from flash.
                        let page = self.ftl.page_of(ppa);
                        let end = self.array.reserve_read(now, now, page, unit);
                        st.done_at = st.done_at.max(end);
                        self.tenant(t).rmw_reads += 1;
                    }
                    self.ftl.set_buffered(l, s);
                    self.flusher.mark_die(self.geo.die_of_plane(plane));
                }
            }
            self.tenant(t).write_units += u64::from(!padding);
            let unit_end = (lpn as u64 + 1) * unit;
            admitted_bytes += unit_end.min(cmd.offset + cmd.len) - (lpn as u64 * unit).max(cmd.offset);
            lpn += 1;
        }
        let st = &mut cmds[slot as usize];
        st.progress = lpn - first;
        if admitted_bytes > 0 {
            // The data crosses the link, then is written to the buffer's DRAM (padding is
            // made in the controller).
            let end = if padding { now } else { self.array.link_in(now, admitted_bytes) };
            let end = self.flusher.dram.pass(now, end, admitted_bytes);
            st.done_at = st.done_at.max(end);
        }
        if lpn > last {
            out.events.push((st.done_at.max(now), DeviceEvent::Complete(slot)));
            true
        } else {
            false
        }
    }

    pub(super) fn admit_waiting(&mut self, now: SimTime, cmds: &mut [CmdState], out: &mut Outbox) {
        while let Some(&slot) = self.flusher.waiting.front() {
            if !self.admit(now, slot, cmds, out) {
                break;
            }
            self.flusher.waiting.pop_front();
        }
    }

    /// The placement whose dirty units `plane` programs next, if it is ready: a placement with
    /// a flash page of dirty units when the flush policy wants them (`policy`) — or, however
    /// little, the placement with the plane's oldest unit when a waiting flush needs it or when
    /// writes wait for a full buffer with no placement of the plane holding a page —, room for
    /// a page in that placement's open block, and no GC job of the plane's own pending when GC
    /// holds writes back. With one placement: a page of dirty units, or any for a flush.
    fn plane_pick(&self, plane: PlaneId, policy: bool) -> Option<(Placement, bool)> {
        let upp = self.geo.units_per_page();
        let dirty = self.flusher.buf.dirty_in_plane(plane);
        if dirty == 0 || (self.gc.mode.holds_writes() && self.gc.plane_busy(plane)) {
            return None;
        }
        let full = if policy { self.flusher.buf.pick_placement(plane, upp, false) } else { None };
        let (h, flush) = match full {
            Some(h) => (h, false),
            None => {
                let flush = self.flusher.flush_needs(plane);
                if !(flush || policy && dirty >= upp && self.flusher.has_waiting()) {
                    return None;
                }
                (self.flusher.buf.pick_placement(plane, upp, true)?, flush)
            }
        };
        self.ftl.can_program_host(plane, h, upp).then_some((h, flush))
    }

    fn die_can_program(&self, die: DieId, policy: bool) -> bool {
        self.array.programs_queued(die) < self.flusher.depth
            && self.geo.planes_of_die(die).any(|p| self.plane_pick(p, policy).is_some())
    }

    /// Starts programs on every die that can take one, round-robin, while the flush policy or a
    /// waiting flush wants.
    pub(super) fn flush(&mut self, now: SimTime, out: &mut Outbox) {
        loop {
            let policy = self.flusher.wants_flush();
            if !policy && self.flusher.flush_cmds.is_empty() {
                break;
            }
            let Some(die) = self.flusher.ready.pop_front() else { break };
            self.flusher.in_ready[die.index()] = false;
            if !self.die_can_program(die, policy) {
                continue;
            }
            self.program(now, die, policy, out);
            if self.die_can_program(die, policy) {
                self.flusher.mark_die(die);
            }
        }
    }

    /// One (multi-plane) program of a flash page per ready plane of `die`; under
    /// [`Multiplane::SamePage`] only of the planes whose next page has the first ready plane's
    /// page index (the others wait for the die's next program).
    fn program(&mut self, now: SimTime, die: DieId, policy: bool, out: &mut Outbox) {
        let (mut units, mut pages) = (0u32, 0u64);
        let mut page_index = None;
        for plane in self.geo.planes_of_die(die) {
            let Some((placement, flush)) = self.plane_pick(plane, policy) else { continue };
            if self.cfg.multiplane == Multiplane::SamePage {
                let index = self.ftl.next_host_page(plane, placement);
                if *page_index.get_or_insert(index) != index {
                    continue;
                }
            }
            units += self.take_page(die, plane, placement, flush);
            pages += 1;
        }
        let end = self.array.reserve_program(now, die, pages, units);
        out.events.push((end, DeviceEvent::ProgramDone(die)));
        self.schedule_new_gc(now, out);
    }

    /// Takes up to a flash page of the oldest dirty units of `plane` and `placement` into a
    /// program of `die`; a page taken before it is full (for a flush, or for a full buffer) is
    /// padded. Returns the units taken.
    ///
    /// Which open block (and so which physical page) the units go to is the FTL's placement
    /// decision ([`crate::ftl::Ftl::program_host`]).
    fn take_page(&mut self, die: DieId, plane: PlaneId, placement: Placement, flush: bool) -> u32 {
        let upp = self.geo.units_per_page();
        let mut taken = 0;
        while taken < upp {
            let Some(u) = self.flusher.buf.take_dirty(plane, placement) else { break };
            self.ftl.program_host(plane, u.lpn, u.owner, placement);
            self.flusher.inflight[die.index()].push_back(u.slot);
            taken += 1;
        }
        if taken < upp {
            self.ftl.pad_host_page(plane, placement);
            if flush {
                self.flusher.stats.flush_padded_pages += 1;
            } else {
                self.flusher.stats.placement_padded_pages += 1;
            }
        }
        taken
    }

    /// A program finished: its buffer slots are free; waiting writes may now fit.
    pub fn program_done(&mut self, now: SimTime, die: DieId, cmds: &mut [CmdState], out: &mut Outbox) {
        let (_, units) = self.array.finish_program(now, die);
        self.flusher.release_program(now, die, units, out);
        self.flusher.mark_die(die);
        self.admit_waiting(now, cmds, out);
        self.flush(now, out);
    }
}
