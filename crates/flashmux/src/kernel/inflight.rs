//! The page cache's I/O in flight, by id: a window over the ids, which the cache hands out in
//! increasing order (`IoId` 1, 2, ...).
//!
//! # Model
//! A ring of entries for the ids from the oldest I/O still in flight (`base`) to the newest:
//! starting one appends it (ids in between that are not in flight are empty entries),
//! completing one empties its entry, and the entries at the front are dropped while empty. A
//! lookup is an index into the ring; ids issued close together are close in memory, as the
//! device completes them close together. Iteration is in id order.
//!
//! Memory: one entry per id between the oldest I/O in flight and the newest — the I/O issued
//! while the oldest is in flight. Every I/O the cache asks for completes (the caller's
//! contract), so the window moves on.
//!
//! # Worked example
//! Ids 1, 2, 3 start: ring [1, 2, 3], base 1. 2 completes: [1, -, 3]. 1 completes: the front
//! empties and the empty 2 after it goes too: [3], base 3.

use super::pagecache::InFlight;
use super::IoId;
use crate::engine::prefetch;
use std::collections::VecDeque;

/// The I/O in flight (see the header).
#[derive(Debug, Default)]
pub(super) struct InFlightSet {
    ring: VecDeque<Option<InFlight>>,
    /// The id of the ring's first entry.
    base: u64,
    len: usize,
}

impl InFlightSet {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, id: IoId) -> Option<&InFlight> {
        let i = id.0.checked_sub(self.base)?;
        self.ring.get(usize::try_from(i).ok()?)?.as_ref()
    }

    /// Asks the processor to load `id`'s entry, if the window holds it (a hint).
    pub fn prefetch(&self, id: IoId) {
        if let Some(e) = id.0.checked_sub(self.base).and_then(|i| self.ring.get(usize::try_from(i).ok()?)) {
            prefetch(e);
        }
    }

    /// Starts `id`: it must be newer than every id started before.
    pub fn insert(&mut self, id: IoId, io: InFlight) {
        if self.ring.is_empty() {
            self.base = id.0;
        }
        let i = (id.0 - self.base) as usize;
        assert!(i >= self.ring.len(), "{id:?} started after a newer I/O");
        self.ring.resize(i, None);
        self.ring.push_back(Some(io));
        self.len += 1;
    }

    /// Completes `id`: its entry, if it was in flight.
    pub fn remove(&mut self, id: IoId) -> Option<InFlight> {
        let i = usize::try_from(id.0.checked_sub(self.base)?).ok()?;
        let io = self.ring.get_mut(i)?.take()?;
        self.len -= 1;
        while let Some(None) = self.ring.front() {
            self.ring.pop_front();
            self.base += 1;
        }
        Some(io)
    }

    /// The I/O in flight in id order.
    pub fn iter(&self) -> impl Iterator<Item = (IoId, &InFlight)> + '_ {
        let base = self.base;
        self.ring.iter().enumerate().filter_map(move |(i, e)| e.as_ref().map(|io| (IoId(base + i as u64), io)))
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
        assert_eq!((s.ring.len(), s.base, s.len()), (3, 1, 2));
        assert_eq!(s.remove(IoId(1)).map(|x| x.extent.first), Some(1));
        assert_eq!((s.ring.len(), s.base, s.len()), (1, 3, 1));
        s.insert(IoId(5), io(5));
        assert_eq!(s.iter().map(|(id, x)| (id.0, x.extent.first)).collect::<Vec<_>>(), [(3, 3), (5, 5)]);
        assert!(s.get(IoId(4)).is_none() && s.get(IoId(1)).is_none() && s.get(IoId(9)).is_none());
        assert!(s.remove(IoId(4)).is_none() && s.remove(IoId(2)).is_none());
        s.remove(IoId(5));
        s.remove(IoId(3));
        assert_eq!((s.ring.len(), s.len()), (0, 0));
        // Empty, the window starts at the next id.
        s.insert(IoId(100), io(100));
        assert_eq!((s.base, s.get(IoId(100)).map(|x| x.extent.first)), (100, Some(100)));
    }
}
