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

use crate::units::{BufferSlot, Lpn, PlaneId};
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
    fifo: Vec<VecDeque<(u32, u32)>>,
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
    pub fn new(slots: u32, planes: u32) -> Self {
        WriteBuffer {
            slots: vec![
                Slot { lpn: 0, owner: 0, plane: PlaneId(0), state: SlotState::Free, epoch: 0, born: 0 };
                slots as usize
            ],
            // Pop from the end: lowest slot numbers first, for readable traces.
            free: (0..slots).rev().collect(),
            fifo: vec![VecDeque::new(); planes as usize],
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

    /// When the oldest dirty unit of `plane` was inserted.
    pub fn oldest_dirty_born(&self, plane: PlaneId) -> Option<u64> {
        self.fifo[plane.index()].iter().find_map(|&(slot, epoch)| {
            let s = &self.slots[slot as usize];
            (s.epoch == epoch && s.state == SlotState::Dirty).then_some(s.born)
        })
    }

    /// Slots holding data inserted before `born` (for invariant checks).
    pub fn occupied_born_before(&self, born: u64) -> u32 {
        self.slots.iter().filter(|s| s.state != SlotState::Free && s.born < born).count() as u32
    }

    /// Takes a free slot for new data of `lpn`; None if the buffer is full.
    #[inline]
    pub fn insert(&mut self, lpn: Lpn, owner: u16, plane: PlaneId) -> Option<BufferSlot> {
        let slot = self.free.pop()?;
        let s = &mut self.slots[slot as usize];
        s.lpn = lpn.0;
        s.owner = owner;
        s.plane = plane;
        s.state = SlotState::Dirty;
        s.epoch = s.epoch.wrapping_add(1);
        s.born = self.inserted;
        self.inserted += 1;
        self.fifo[plane.index()].push_back((slot, s.epoch));
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
        self.dirty_per_plane[s.plane.index()] -= 1;
        self.dirty -= 1;
        self.free.push(slot.0);
    }

    /// The oldest dirty unit of `plane`, now being programmed.
    #[inline]
    pub fn take_dirty(&mut self, plane: PlaneId) -> Option<DirtyUnit> {
        while let Some((slot, epoch)) = self.fifo[plane.index()].pop_front() {
            let s = &mut self.slots[slot as usize];
            if s.epoch != epoch || s.state != SlotState::Dirty {
                continue; // discarded (and perhaps reused) since it was queued
            }
            s.state = SlotState::Programming;
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
            let queued = self.fifo[p]
                .iter()
                .filter(|&&(slot, ep)| {
                    let s = &self.slots[slot as usize];
                    s.epoch == ep && s.state == SlotState::Dirty
                })
                .count();
            assert_eq!(queued as u32, n, "plane {p}: dirty slot missing from its FIFO");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_and_fifo_order() {
        let mut b = WriteBuffer::new(3, 2);
        let a = b.insert(Lpn(10), 0, PlaneId(1)).unwrap();
        let c = b.insert(Lpn(11), 1, PlaneId(1)).unwrap();
        let d = b.insert(Lpn(12), 1, PlaneId(0)).unwrap();
        assert!(b.insert(Lpn(13), 0, PlaneId(0)).is_none(), "full");
        assert_eq!(b.dirty_in_plane(PlaneId(1)), 2);
        b.rewrite(a, 7);
        b.discard(c);
        b.check_invariants();
        // Slot c is reused for plane 0; its stale plane-1 FIFO entry must be skipped.
        let e = b.insert(Lpn(14), 0, PlaneId(0)).unwrap();
        assert_eq!(e, c);
        assert_eq!(b.take_dirty(PlaneId(1)), Some(DirtyUnit { slot: a, lpn: Lpn(10), owner: 7 }));
        assert_eq!(b.take_dirty(PlaneId(1)), None);
        assert_eq!(b.take_dirty(PlaneId(0)).unwrap().lpn, Lpn(12));
        assert_eq!(b.take_dirty(PlaneId(0)).unwrap().lpn, Lpn(14));
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
        let mut b = WriteBuffer::new(1, 1);
        let s = b.insert(Lpn(1), 0, PlaneId(0)).unwrap();
        b.take_dirty(PlaneId(0));
        b.release(s);
        b.release(s);
    }
}
