//! The device's DRAM write buffer.
//!
//! A write completes once its data is in the buffer (the drive has power-loss protection, as
//! datacenter drives do). Each slot holds one mapping unit. Dirty slots wait in a FIFO per plane
//! (allocation is static by logical address, so each unit already knows its plane) until the
//! flusher programs them; a slot is reused only when its program has finished. Rewriting a unit
//! that is still dirty updates it in place: a *write hit*, one flash program saved.
//!
//! Every insertion gets the next number of one sequence (`born`), so a flush can tell the data
//! that arrived before it from what came later: a plane's FIFO is in `born` order.
//!
//! On a drive with data placement (FDP handles, streams) each plane keeps a FIFO per placement,
//! as a flash page holds one placement's data: the flusher takes a page from one of them
//! ([`WriteBuffer::pick_placement`]). A rewrite of a dirty unit through another placement takes
//! a new slot (the caller discards the old one), so each FIFO stays in `born` order.

use crate::units::{BufferSlot, Lpn, Placement, PlaneId};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Free,
    Dirty,
    Programming,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    lpn: u32,
    owner: u16,
    placement: u16,
    plane: PlaneId,
    state: SlotState,
    /// Bumped on every allocation, so stale FIFO entries (of a trimmed slot) are recognised.
    epoch: u32,
    /// Position of the insertion that filled the slot in the buffer's sequence of insertions.
    born: u64,
}

pub struct WriteBuffer {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Placements per plane.
    placements: u32,
    /// A FIFO of (slot, epoch) per plane and placement: index plane × placements + placement.
    fifo: Vec<VecDeque<(u32, u32)>>,
    /// Dirty units per plane and placement (same index).
    dirty_per_fifo: Vec<u32>,
    dirty_per_plane: Vec<u32>,
    dirty: u32,
    programming: u32,
    /// Insertions so far: the `born` number of the next one.
    inserted: u64,
}

/// A dirty unit taken for programming.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirtyUnit {
    pub slot: BufferSlot,
    pub lpn: Lpn,
    pub owner: u16,
}

impl WriteBuffer {
    /// A buffer of `slots` units for `planes` planes of `placements` placements each.
    pub fn new(slots: u32, planes: u32, placements: u32) -> Self {
        let fifos = (planes * placements) as usize;
        WriteBuffer {
            slots: vec![
                Slot { lpn: 0, owner: 0, placement: 0, plane: PlaneId(0), state: SlotState::Free, epoch: 0, born: 0 };
                slots as usize
            ],
            // Pop from the end: lowest slot numbers first, for readable traces.
            free: (0..slots).rev().collect(),
            placements,
            fifo: vec![VecDeque::new(); fifos],
            dirty_per_fifo: vec![0; fifos],
            dirty_per_plane: vec![0; planes as usize],
            dirty: 0,
            programming: 0,
            inserted: 0,
        }
    }

    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }
    pub fn free_slots(&self) -> u32 {
        self.free.len() as u32
    }
    pub fn dirty_in_plane(&self, plane: PlaneId) -> u32 {
        self.dirty_per_plane[plane.index()]
    }
    pub fn dirty(&self) -> u32 {
        self.dirty
    }
    /// Slots holding data: dirty or being programmed.
    pub fn occupied(&self) -> u32 {
        self.dirty + self.programming
    }
    /// The `born` number the next insertion will get: data inserted so far is born before it.
    pub fn next_born(&self) -> u64 {
        self.inserted
    }
    pub fn born(&self, slot: BufferSlot) -> u64 {
        self.slots[slot.index()].born
    }

    fn fifo_index(&self, plane: PlaneId, placement: Placement) -> usize {
        plane.index() * self.placements as usize + placement.index()
    }

    /// The placement of a dirty unit in `slot`.
    pub fn placement(&self, slot: BufferSlot) -> Placement {
        Placement(self.slots[slot.index()].placement)
    }

    /// When the oldest dirty unit of `plane` and `placement` was inserted.
    fn oldest_in(&self, fifo: usize) -> Option<u64> {
        self.fifo[fifo].iter().find_map(|&(slot, epoch)| {
            let s = &self.slots[slot as usize];
            (s.epoch == epoch && s.state == SlotState::Dirty).then_some(s.born)
        })
    }

    /// When the oldest dirty unit of `plane` was inserted.
    pub fn oldest_dirty_born(&self, plane: PlaneId) -> Option<u64> {
        let first = self.fifo_index(plane, Placement(0));
        (first..first + self.placements as usize).filter_map(|f| self.oldest_in(f)).min()
    }

    /// The placement the next program of `plane` takes a page from: of the placements with at
    /// least `page` dirty units, the one whose oldest unit is oldest; with `partial`, of those
    /// with any (a flush, or a full buffer, cannot wait for a page to fill). `None`: no such
    /// placement. With one placement, placement 0 whenever it qualifies.
    pub fn pick_placement(&self, plane: PlaneId, page: u32, partial: bool) -> Option<Placement> {
        let first = self.fifo_index(plane, Placement(0));
        let need = if partial { 1 } else { page };
        if self.placements == 1 {
            return (self.dirty_per_fifo[first] >= need).then_some(Placement(0));
        }
        (0..self.placements)
            .filter(|&h| self.dirty_per_fifo[first + h as usize] >= need)
            .min_by_key(|&h| self.oldest_in(first + h as usize))
            .map(|h| Placement(h as u16))
    }

    /// Dirty units of `plane` and `placement`.
    pub fn dirty_in(&self, plane: PlaneId, placement: Placement) -> u32 {
        self.dirty_per_fifo[self.fifo_index(plane, placement)]
    }

    /// Slots holding data inserted before `born` (for invariant checks).
    pub fn occupied_born_before(&self, born: u64) -> u32 {
        self.slots.iter().filter(|s| s.state != SlotState::Free && s.born < born).count() as u32
    }

    /// Takes a free slot for new data of `lpn`; None if the buffer is full.
    #[inline]
    pub fn insert(&mut self, lpn: Lpn, owner: u16, plane: PlaneId, placement: Placement) -> Option<BufferSlot> {
        let slot = self.free.pop()?;
        let fifo = self.fifo_index(plane, placement);
        let s = &mut self.slots[slot as usize];
        s.lpn = lpn.0;
        s.owner = owner;
        s.placement = placement.0;
        s.plane = plane;
        s.state = SlotState::Dirty;
        s.epoch = s.epoch.wrapping_add(1);
        s.born = self.inserted;
        self.inserted += 1;
        self.fifo[fifo].push_back((slot, s.epoch));
        self.dirty_per_fifo[fifo] += 1;
        self.dirty_per_plane[plane.index()] += 1;
        self.dirty += 1;
        Some(BufferSlot(slot))
    }

    /// A rewrite of data still dirty in `slot`: only the owner changes.
    pub fn rewrite(&mut self, slot: BufferSlot, owner: u16) {
        let s = &mut self.slots[slot.index()];
        debug_assert_eq!(s.state, SlotState::Dirty);
        s.owner = owner;
    }

    /// The unit in a dirty slot was trimmed: the slot is free again without being programmed.
    pub fn discard(&mut self, slot: BufferSlot) {
        let s = &mut self.slots[slot.index()];
        assert_eq!(s.state, SlotState::Dirty, "discarding slot {} that is not dirty", slot.0);
        s.state = SlotState::Free;
        let fifo = s.plane.index() * self.placements as usize + s.placement as usize;
        self.dirty_per_fifo[fifo] -= 1;
        self.dirty_per_plane[s.plane.index()] -= 1;
        self.dirty -= 1;
        self.free.push(slot.0);
    }

    /// The oldest dirty unit of `plane` and `placement`, now being programmed.
    #[inline]
    pub fn take_dirty(&mut self, plane: PlaneId, placement: Placement) -> Option<DirtyUnit> {
        let fifo = self.fifo_index(plane, placement);
        while let Some((slot, epoch)) = self.fifo[fifo].pop_front() {
            let s = &mut self.slots[slot as usize];
            if s.epoch != epoch || s.state != SlotState::Dirty {
                continue; // discarded (and perhaps reused) since it was queued
            }
            s.state = SlotState::Programming;
            self.dirty_per_fifo[fifo] -= 1;
            self.dirty_per_plane[plane.index()] -= 1;
            self.dirty -= 1;
            self.programming += 1;
            return Some(DirtyUnit { slot: BufferSlot(slot), lpn: Lpn(s.lpn), owner: s.owner });
        }
        None
    }

    /// The program holding `slot` finished: the slot is free.
    pub fn release(&mut self, slot: BufferSlot) {
        let s = &mut self.slots[slot.index()];
        assert_eq!(s.state, SlotState::Programming, "releasing slot {} that is not being programmed", slot.0);
        s.state = SlotState::Free;
        self.programming -= 1;
        self.free.push(slot.0);
    }

    /// Dirty slot's logical page (for invariant checks by the owner of the L2P table).
    pub fn dirty_lpns(&self) -> impl Iterator<Item = (BufferSlot, Lpn)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == SlotState::Dirty)
            .map(|(i, s)| (BufferSlot(i as u32), Lpn(s.lpn)))
    }

    pub fn check_invariants(&self) {
        let count = |st| self.slots.iter().filter(|s| s.state == st).count() as u32;
        assert_eq!(count(SlotState::Free), self.free.len() as u32, "free list out of sync");
        assert_eq!(count(SlotState::Dirty), self.dirty, "dirty count out of sync");
        assert_eq!(count(SlotState::Programming), self.programming, "programming count out of sync");
        for (p, &n) in self.dirty_per_plane.iter().enumerate() {
            let live = self.slots.iter().filter(|s| s.state == SlotState::Dirty && s.plane.index() == p).count();
            assert_eq!(live as u32, n, "plane {p} dirty count out of sync");
        }
        let h = self.placements as usize;
        for (f, &n) in self.dirty_per_fifo.iter().enumerate() {
            let (p, placement) = (f / h, (f % h) as u16);
            let live = self
                .slots
                .iter()
                .filter(|s| s.state == SlotState::Dirty && s.plane.index() == p && s.placement == placement)
                .count();
            assert_eq!(live as u32, n, "plane {p} placement {placement}: dirty count out of sync");
            let queued: Vec<u64> = self.fifo[f]
                .iter()
                .filter_map(|&(slot, ep)| {
                    let s = &self.slots[slot as usize];
                    (s.epoch == ep && s.state == SlotState::Dirty).then_some(s.born)
                })
                .collect();
            assert_eq!(queued.len() as u32, n, "plane {p} placement {placement}: dirty slot missing from its FIFO");
            assert!(queued.windows(2).all(|w| w[0] < w[1]), "plane {p} placement {placement}: FIFO out of born order");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P0: Placement = Placement(0);

    /// Each placement of a plane has its own FIFO; a page is taken from the placement whose
    /// oldest unit is oldest among those with a page of dirty units (any, when partial pages may
    /// go), and the plane's oldest unit is the oldest of all its placements'.
    #[test]
    fn placements_have_their_own_fifos() {
        let mut b = WriteBuffer::new(8, 1, 3);
        let plane = PlaneId(0);
        let h = |i| Placement(i);
        b.insert(Lpn(1), 0, plane, h(2)).unwrap(); // born 0
        b.insert(Lpn(2), 0, plane, h(1)).unwrap(); // born 1
        b.insert(Lpn(3), 0, plane, h(1)).unwrap(); // born 2
        b.insert(Lpn(4), 0, plane, h(2)).unwrap(); // born 3
        b.insert(Lpn(5), 0, plane, h(1)).unwrap(); // born 4
        b.check_invariants();
        assert_eq!((b.dirty_in(plane, h(0)), b.dirty_in(plane, h(1)), b.dirty_in(plane, h(2))), (0, 3, 2));
        assert_eq!(b.oldest_dirty_born(plane), Some(0));
        // Pages of 3: only placement 1 has one; of 2: both, and placement 2's oldest is older.
        assert_eq!(b.pick_placement(plane, 3, false), Some(h(1)));
        assert_eq!(b.pick_placement(plane, 2, false), Some(h(2)));
        assert_eq!(b.pick_placement(plane, 4, false), None);
        assert_eq!(b.pick_placement(plane, 4, true), Some(h(2)));
        let lpns: Vec<u32> = std::iter::from_fn(|| b.take_dirty(plane, h(1))).map(|u| u.lpn.0).collect();
        assert_eq!(lpns, vec![2, 3, 5], "a placement's units in the order they came");
        assert_eq!(b.take_dirty(plane, h(2)).map(|u| u.lpn.0), Some(1));
        assert_eq!(b.oldest_dirty_born(plane), Some(3));
        b.check_invariants();
    }

    #[test]
    fn lifecycle_and_fifo_order() {
        let mut b = WriteBuffer::new(3, 2, 1);
        let a = b.insert(Lpn(10), 0, PlaneId(1), P0).unwrap();
        let c = b.insert(Lpn(11), 1, PlaneId(1), P0).unwrap();
        let d = b.insert(Lpn(12), 1, PlaneId(0), P0).unwrap();
        assert!(b.insert(Lpn(13), 0, PlaneId(0), P0).is_none(), "full");
        assert_eq!(b.dirty_in_plane(PlaneId(1)), 2);
        b.rewrite(a, 7);
        b.discard(c);
        b.check_invariants();
        // Slot c is reused for plane 0; its stale plane-1 FIFO entry must be skipped.
        let e = b.insert(Lpn(14), 0, PlaneId(0), P0).unwrap();
        assert_eq!(e, c);
        assert_eq!(b.take_dirty(PlaneId(1), P0), Some(DirtyUnit { slot: a, lpn: Lpn(10), owner: 7 }));
        assert_eq!(b.take_dirty(PlaneId(1), P0), None);
        assert_eq!(b.take_dirty(PlaneId(0), P0).unwrap().lpn, Lpn(12));
        assert_eq!(b.take_dirty(PlaneId(0), P0).unwrap().lpn, Lpn(14));
        b.check_invariants();
        assert_eq!(b.free_slots(), 0);
        b.release(a);
        b.release(d);
        b.release(e);
        assert_eq!(b.free_slots(), 3);
        b.check_invariants();
    }

    #[test]
    #[should_panic(expected = "not being programmed")]
    fn double_release_is_a_bug() {
        let mut b = WriteBuffer::new(1, 1, 1);
        let s = b.insert(Lpn(1), 0, PlaneId(0), P0).unwrap();
        b.take_dirty(PlaneId(0), P0);
        b.release(s);
        b.release(s);
    }
}
