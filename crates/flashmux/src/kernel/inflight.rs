//! I/O in flight by id: a window over the ids, which their owner hands out in increasing order
//! (the page cache's `IoId` 1, 2, ...; ext4's pieces of them).
//!
//! # Model
//! A ring of entries for the ids from the oldest I/O still in flight (`base`) to the newest:
//! starting one appends it (ids in between that are not in flight are empty entries),
//! completing one empties its entry, and the entries at the front are dropped while empty. A
//! lookup is an index into the ring; ids issued close together are close in memory, as the
//! device completes them close together. Iteration is in id order.
//!
//! Memory: one entry per id between the oldest I/O in flight and the newest — the I/O issued
//! while the oldest is in flight. Every I/O the owner starts completes (the caller's
//! contract), so the window moves on.
//!
//! # Worked example
//! Ids 1, 2, 3 start: ring [1, 2, 3], base 1. 2 completes: [1, -, 3]. 1 completes: the front
//! empties and the empty 2 after it goes too: [3], base 3.

use super::pagecache::InFlight;
use super::IoId;
use crate::engine::prefetch;
use std::collections::VecDeque;

/// Entries by increasing `u64` id (see the header).
#[derive(Debug)]
pub(super) struct IdWindow<T> {
    ring: VecDeque<Option<T>>,
    /// The id of the ring's first entry.
    base: u64,
    len: usize,
}

impl<T> Default for IdWindow<T> {
    fn default() -> Self {
        IdWindow { ring: VecDeque::new(), base: 0, len: 0 }
    }
}

impl<T> IdWindow<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, id: u64) -> Option<&T> {
        let i = id.checked_sub(self.base)?;
        self.ring.get(usize::try_from(i).ok()?)?.as_ref()
    }

    /// Asks the processor to load `id`'s entry, if the window holds it (a hint).
    pub fn prefetch(&self, id: u64) {
        if let Some(e) = id.checked_sub(self.base).and_then(|i| self.ring.get(usize::try_from(i).ok()?)) {
            prefetch(e);
        }
    }

    /// Starts `id`: it must be newer than every id started before.
    pub fn insert(&mut self, id: u64, entry: T) {
        if self.ring.is_empty() {
            self.base = id;
        }
        let i = (id - self.base) as usize;
        assert!(i >= self.ring.len(), "id {id} started after a newer one");
        self.ring.resize_with(i, || None);
        self.ring.push_back(Some(entry));
        self.len += 1;
    }

    /// Completes `id`: its entry, if it was in flight.
    pub fn remove(&mut self, id: u64) -> Option<T> {
        let i = usize::try_from(id.checked_sub(self.base)?).ok()?;
        let entry = self.ring.get_mut(i)?.take()?;
        self.len -= 1;
        while let Some(None) = self.ring.front() {
            self.ring.pop_front();
            self.base += 1;
        }
        Some(entry)
    }

    /// The entries in id order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        let base = self.base;
        self.ring.iter().enumerate().filter_map(move |(i, e)| e.as_ref().map(|x| (base + i as u64, x)))
    }
}

/// The page cache's I/O in flight.
#[derive(Debug, Default)]
pub(super) struct InFlightSet(IdWindow<InFlight>);

impl InFlightSet {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn get(&self, id: IoId) -> Option<&InFlight> {
        self.0.get(id.0)
    }

    /// Asks the processor to load `id`'s entry, if the window holds it (a hint).
    pub fn prefetch(&self, id: IoId) {
        self.0.prefetch(id.0);
    }

    /// Starts `id`: it must be newer than every id started before.
    pub fn insert(&mut self, id: IoId, io: InFlight) {
        self.0.insert(id.0, io);
    }

    /// Completes `id`: its entry, if it was in flight.
    pub fn remove(&mut self, id: IoId) -> Option<InFlight> {
        self.0.remove(id.0)
    }

    /// The I/O in flight in id order.
    pub fn iter(&self) -> impl Iterator<Item = (IoId, &InFlight)> + '_ {
        self.0.iter().map(|(id, io)| (IoId(id), io))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Extent, FileId};

    fn io(first: u64) -> InFlight {
        InFlight { extent: Extent { file: FileId(0), first, pages: 1 }, write: None, first: 0 }
    }

    #[test]
    fn the_window_moves_on_as_the_oldest_completes() {
        // The worked example, then an id after a gap (5: 4 is empty) and lookups outside.
        let mut s = InFlightSet::default();
        for i in 1..=3 {
            s.insert(IoId(i), io(i));
        }
        assert_eq!(s.remove(IoId(2)).map(|x| x.extent.first), Some(2));
        assert_eq!((s.0.ring.len(), s.0.base, s.len()), (3, 1, 2));
        assert_eq!(s.remove(IoId(1)).map(|x| x.extent.first), Some(1));
        assert_eq!((s.0.ring.len(), s.0.base, s.len()), (1, 3, 1));
        s.insert(IoId(5), io(5));
        assert_eq!(s.iter().map(|(id, x)| (id.0, x.extent.first)).collect::<Vec<_>>(), [(3, 3), (5, 5)]);
        assert!(s.get(IoId(4)).is_none() && s.get(IoId(1)).is_none() && s.get(IoId(9)).is_none());
        assert!(s.remove(IoId(4)).is_none() && s.remove(IoId(2)).is_none());
        s.remove(IoId(5));
        s.remove(IoId(3));
        assert_eq!((s.0.ring.len(), s.len()), (0, 0));
        // Empty, the window starts at the next id.
        s.insert(IoId(100), io(100));
        assert_eq!((s.0.base, s.get(IoId(100)).map(|x| x.extent.first)), (100, Some(100)));
    }
}
