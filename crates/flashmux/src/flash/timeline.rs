use crate::units::{Nanos, SimTime};

/// The busy intervals of a shared resource (a channel bus, a host link direction), with
/// earliest-gap reservation.
///
/// Transfers are reserved when their data is ready, which may be in the future (a read's data
/// leaves the die only after tR). A single "busy until" time would then block the resource for
/// everyone until that future transfer, although the bus is idle meanwhile; keeping the intervals
/// lets a later-scheduled but earlier-ready transfer use the gap, as a real bus arbiter would.
/// Intervals that ended in the past are dropped, so the list holds only reservations still ahead
/// (bounded by the transfers in flight).
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// Disjoint, sorted, non-adjacent busy intervals `[start, end)`.
    busy: Vec<(SimTime, SimTime)>,
    busy_total: Nanos,
}

impl Timeline {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserves `dur` at the earliest time ≥ `ready` when the resource is free for the whole
    /// duration; `now` (≤ `ready`) lets past intervals be forgotten. Returns (start, end).
    pub fn reserve(&mut self, now: SimTime, ready: SimTime, dur: Nanos) -> (SimTime, SimTime) {
        debug_assert!(now <= ready, "reservation in the past");
        // Intervals are sorted and disjoint, so their ends are sorted too: binary searches.
        let past = self.busy.partition_point(|iv| iv.1 <= now);
        if past > 0 {
            self.busy.drain(..past);
        }
        self.busy_total += dur;
        if dur == Nanos::ZERO {
            return (ready, ready);
        }
        let mut start = ready;
        let first = self.busy.partition_point(|iv| iv.1 <= start);
        let mut idx = self.busy.len();
        for (i, &(s, e)) in self.busy.iter().enumerate().skip(first) {
            if start + dur <= s {
                idx = i;
                break;
            }
            start = start.max(e);
        }
        let end = start + dur;
        self.insert(idx, start, end);
        (start, end)
    }

    fn insert(&mut self, idx: usize, start: SimTime, end: SimTime) {
        let joins_prev = idx > 0 && self.busy[idx - 1].1 == start;
        let joins_next = idx < self.busy.len() && self.busy[idx].0 == end;
        match (joins_prev, joins_next) {
            (true, true) => {
                self.busy[idx - 1].1 = self.busy[idx].1;
                self.busy.remove(idx);
            }
            (true, false) => self.busy[idx - 1].1 = end,
            (false, true) => self.busy[idx].0 = start,
            (false, false) => self.busy.insert(idx, (start, end)),
        }
    }

    /// The earliest instant ≥ `t` at which the resource is not busy (`t` itself when idle).
    pub fn next_idle(&self, t: SimTime) -> SimTime {
        let i = self.busy.partition_point(|iv| iv.1 <= t);
        match self.busy.get(i) {
            Some(&(s, e)) if s <= t => e,
            _ => t,
        }
    }

    /// Total time reserved so far (for utilisation statistics).
    pub fn busy_total(&self) -> Nanos {
        self.busy_total
    }

    /// Checks that intervals are sorted, disjoint and non-empty.
    pub fn check_invariants(&self) {
        for w in self.busy.windows(2) {
            assert!(w[0].1 < w[1].0, "timeline intervals overlap or touch: {:?}", w);
        }
        for iv in &self.busy {
            assert!(iv.0 < iv.1, "empty timeline interval {:?}", iv);
        }
    }
}

/// A resource that serves one access at a time, each costing `access` plus its bytes at
/// `bytes_per_sec` (the controller's ECC engines, the write buffer's DRAM): a [`Timeline`]
/// reserved at the earliest gap from when the data is ready. With neither cost it is no limit
/// and keeps no intervals.
#[derive(Clone, Debug, Default)]
pub struct Engine {
    access: Nanos,
    bytes_per_sec: Option<u64>,
    line: Timeline,
}

impl Engine {
    pub fn new(access: Nanos, bytes_per_sec: Option<u64>) -> Engine {
        Engine { access, bytes_per_sec, line: Timeline::new() }
    }

    /// `bytes` pass the engine from `ready` on (`now` ≤ `ready` lets past intervals go); returns
    /// when they are through: `ready` itself if the engine costs nothing.
    pub fn pass(&mut self, now: SimTime, ready: SimTime, bytes: u64) -> SimTime {
        let time = self.access + self.bytes_per_sec.map_or(Nanos::ZERO, |rate| Nanos::for_transfer(bytes, rate));
        if time == Nanos::ZERO {
            return ready;
        }
        self.line.reserve(now, ready, time).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn later_reservation_fills_an_earlier_gap() {
        let mut t = Timeline::new();
        assert_eq!(t.reserve(SimTime(0), SimTime(100), Nanos(10)), (SimTime(100), SimTime(110)));
        // Ready at 5: fits before 100.
        assert_eq!(t.reserve(SimTime(0), SimTime(5), Nanos(10)), (SimTime(5), SimTime(15)));
        // Ready at 95 with 10 units: overlaps [100,110) -> goes after.
        assert_eq!(t.reserve(SimTime(0), SimTime(95), Nanos(10)), (SimTime(110), SimTime(120)));
        // Exactly fills [15, 100).
        assert_eq!(t.reserve(SimTime(0), SimTime(15), Nanos(85)), (SimTime(15), SimTime(100)));
        t.check_invariants();
        assert_eq!(t.busy, vec![(SimTime(5), SimTime(120))]);
    }

    #[test]
    fn next_idle_is_the_end_of_the_interval_under_way() {
        let mut t = Timeline::new();
        t.reserve(SimTime(0), SimTime(10), Nanos(10));
        t.reserve(SimTime(0), SimTime(20), Nanos(5));
        // [10, 25) after merging: busy at 10 and 24, idle at 9 and 25.
        assert_eq!(t.next_idle(SimTime(9)), SimTime(9));
        assert_eq!(t.next_idle(SimTime(10)), SimTime(25));
        assert_eq!(t.next_idle(SimTime(24)), SimTime(25));
        assert_eq!(t.next_idle(SimTime(25)), SimTime(25));
    }

    #[test]
    fn past_intervals_are_dropped() {
        let mut t = Timeline::new();
        t.reserve(SimTime(0), SimTime(0), Nanos(10));
        t.reserve(SimTime(0), SimTime(20), Nanos(10));
        t.reserve(SimTime(25), SimTime(25), Nanos(1));
        assert_eq!(t.busy.len(), 1);
        assert_eq!(t.busy_total(), Nanos(21));
    }

    #[test]
    fn an_engine_serves_one_access_at_a_time_for_its_fixed_cost_plus_bytes_at_its_rate() {
        // 23.412 us per access plus 1 GB/s: 8 KiB take 31.604 us.
        let mut e = Engine::new(Nanos(23_412), Some(1_000_000_000));
        assert_eq!(e.pass(SimTime(0), SimTime(0), 8192), SimTime(31_604));
        // A second access ready at 10 us waits for the first.
        assert_eq!(e.pass(SimTime(0), SimTime(10_000), 8192), SimTime(63_208));
        // One ready later than both starts when it is ready.
        assert_eq!(e.pass(SimTime(0), SimTime(100_000), 0), SimTime(123_412));
        // Without a cost the data passes at once and nothing is kept.
        let mut free = Engine::default();
        assert_eq!(free.pass(SimTime(0), SimTime(5), 1 << 20), SimTime(5));
        assert_eq!(free.line.busy_total(), Nanos::ZERO);
        // A rate alone (the ECC engines): bytes / rate.
        let mut ecc = Engine::new(Nanos::ZERO, Some(1_000_000_000));
        assert_eq!(ecc.pass(SimTime(0), SimTime(0), 4096), SimTime(4_096));
    }

    proptest! {
        /// Against a brute-force reference: a bitmap of busy nanoseconds.
        #[test]
        fn matches_bitmap_reference(reqs in proptest::collection::vec((0u64..200, 1u64..20), 1..60)) {
            let mut t = Timeline::new();
            let mut busy = vec![false; 2000];
            for (ready, dur) in reqs {
                let (s, e) = t.reserve(SimTime(0), SimTime(ready), Nanos(dur));
                prop_assert_eq!(e.0 - s.0, dur);
                // Earliest start >= ready where [start, start+dur) is free.
                let mut expect = ready;
                while busy[expect as usize..(expect + dur) as usize].iter().any(|&b| b) {
                    expect += 1;
                }
                prop_assert_eq!(s.0, expect);
                for b in &mut busy[s.0 as usize..e.0 as usize] {
                    *b = true;
                }
                t.check_invariants();
            }
        }
    }
}
