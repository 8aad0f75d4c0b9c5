//! The elevator's merging: a request that arrives while others of its tenant wait in the I/O
//! scheduler joins one of them when the two are adjacent — Linux's `elv_merge`.
//!
//! # Model
//! The block layer indexes every read and write waiting in the scheduler by where it ends (the
//! elevator's hash, `elv_rqhash_find`) and where it starts (the scheduler's sort tree, as
//! mq-deadline's `dd_request_merge` and CFQ's `cfq_find_rq_fmerge` search it). An arriving
//! request `b` is tried, in Linux's order:
//!
//! 1. against the **last merge** (`q->last_merge`: the last request merged into, or the first
//!    request inserted since): a back merge if it ends where `b` starts, a front merge if it
//!    starts where `b` ends;
//! 2. unless `nomerges = 1`, against the waiting request that **ends** where `b` starts (a back
//!    merge), else the one that **starts** where `b` ends (a front merge).
//!
//! The first candidate found is the one tried: the merge happens when the two are the same
//! tenant and direction and together at most `max_sectors_kb`; otherwise `b` waits on its own
//! (`ll_back_merge_fn` failing does not send Linux looking for another candidate). A request
//! dispatched to the device — or given out and requeued — leaves the index: nothing merges into
//! it any more. The merged request keeps the waiting one's place in the scheduler, grown to
//! cover both; its members complete with it.
//!
//! Merges join only one tenant's requests, as CFQ and BFQ allow a bio to merge only into its
//! own process's queue (`cfq_allow_bio_merge`); mq-deadline would also join two tenants'
//! requests that happen to touch. Trims and flushes never merge (a discard merges in Linux only
//! with `max_discard_segments > 1`). A request that fills the gap between two waiting ones
//! merges with one; Linux would then merge the two requests as well (`attempt_back_merge`),
//! which flashmux does not.
//!
//! `nomerges`: 0 (Linux's default) all of the above; 1 only the last-merge hit; 2 none. With the
//! `none` scheduler there is no elevator and nothing waiting is merged (Linux's `none` merges a
//! bio only in the plug and, rarely, in a software queue); the plug's merging is the machine's
//! (`virt/plug.rs`).
//!
//! # Worked example
//! `max_sectors_kb = 128`, one tenant, the device busy so that everything waits. Writes of
//! 64 KiB at 0, then 64 KiB at 128K, then 64 KiB at 64K, then 4 KiB at 124K (reads
//! never join writes):
//! - W0 (0–64K) waits; it is the last merge.
//! - W1 (128K–192K) is not adjacent to W0: it waits.
//! - W2 (64K–128K): the last merge W0 ends at 64K: back merge, W0 covers 0–128K (128 KiB,
//!   the limit).
//! - W3 (124K–128K): no request ends at 124K; W1 starts at 128K: front merge, W1 covers
//!   124K–192K.
//!
//! Two commands reach the device instead of four; `merges_back = 1`, `merges_front = 1`.
//!
//! # Parameters
//! - `nomerges` (0, 1, 2; `[host] nomerges`, Linux's `/sys/block/<dev>/queue/nomerges`).
//! - `max_sectors_kb` (KiB; `[host] max_sectors_kb`): the largest merged request.
//!
//! # Source
//! Linux `block/elevator.c` (`elv_merge`, `elv_rqhash_*`, `q->last_merge`), `block/blk-merge.c`
//! (`blk_try_merge`, `ll_back_merge_fn`, `ll_front_merge_fn`), `block/mq-deadline.c`
//! (`dd_request_merge`), `Documentation/ABI/stable/sysfs-block` (`nomerges`, `max_sectors_kb`).

use super::sched::SchedReq;
use crate::device::IoOp;
use crate::units::ReqId;
use serde::Serialize;
use std::collections::BTreeSet;

/// The elevator's settings (`[host]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MergeConfig {
    /// Linux's `nomerges`: 0 all merges, 1 the last-merge hit only, 2 none.
    pub nomerges: u8,
    /// The largest request a merge may make, bytes (`max_sectors_kb` × 1024).
    pub max_bytes: u64,
}

impl MergeConfig {
    /// Linux's defaults: all merges, up to 128 KiB (the virtio and NVMe limit of many devices;
    /// the block layer's own cap, `BLK_DEF_MAX_SECTORS_CAP`, is 1280 KiB).
    pub const DEFAULT: MergeConfig = MergeConfig { nomerges: 0, max_bytes: 128 << 10 };

    pub fn is_default(&self) -> bool {
        *self == MergeConfig::DEFAULT
    }

    /// Checks the settings; the error names the key (`host.*`).
    pub fn validate(&self) -> Result<(), String> {
        check_nomerges("host.nomerges", self.nomerges)?;
        if self.max_bytes < 4096 || self.max_bytes % 1024 != 0 {
            return Err(format!(
                "host.max_sectors_kb: {} bytes: expected a whole number of KiB, at least 4",
                self.max_bytes
            ));
        }
        Ok(())
    }
}

/// Linux's `nomerges` takes 0, 1 or 2; the error names `key` (the host's or the guest's).
pub fn check_nomerges(key: &str, nomerges: u8) -> Result<(), String> {
    if nomerges > 2 {
        return Err(format!(
            "{key}: {nomerges} is not a setting: expected 0 (all merges), 1 (last-merge hit only) or 2 (none)"
        ));
    }
    Ok(())
}

impl Default for MergeConfig {
    fn default() -> Self {
        MergeConfig::DEFAULT
    }
}

/// What the elevator merged for one tenant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MergeStats {
    /// Requests merged at the back of a waiting request (reads and writes).
    pub merges_back: u64,
    /// Requests merged at the front of a waiting request.
    pub merges_front: u64,
    /// Reads merged (either way), as `/proc/diskstats` counts them.
    pub read_merges: u64,
    /// Writes merged (either way).
    pub write_merges: u64,
}

impl MergeStats {
    pub fn merges(&self) -> u64 {
        self.merges_back + self.merges_front
    }
}

/// Which end of the waiting request grew.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeKind {
    Back,
    Front,
}

/// A merge the elevator made: `lead`, the waiting request, now covers `offset..offset + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Merged {
    pub lead: ReqId,
    pub kind: MergeKind,
    pub offset: u64,
    pub len: u64,
}

/// An index key: tenant, class (direction and placement directive: [`class_of`]), the offset
/// (end or start), the request.
type Key = (u16, u32, u64, u32);

#[derive(Clone, Copy, Default)]
struct Range {
    indexed: bool,
    tenant: u16,
    dir: u32,
    offset: u64,
    len: u64,
}

/// The elevator's index of the waiting requests that can be merged into.
pub struct Elevator {
    cfg: MergeConfig,
    by_end: BTreeSet<Key>,
    by_start: BTreeSet<Key>,
    /// What the index holds of each request, by id.
    ranges: Vec<Range>,
    last: Option<ReqId>,
    stats: Vec<MergeStats>,
}

/// What must agree for two requests to merge, besides the tenant and adjacency: the direction
/// (reads with reads, writes with writes) and the data placement directive (as Linux merges
/// only bios of the same write hint, `blk_rq_merge_ok`). `None`: never merged (flush, trim).
fn class_of(op: IoOp, dspec: u16) -> Option<u32> {
    let dir = match op {
        IoOp::Read => 0,
        IoOp::Write => 1,
        _ => return None,
    };
    Some(dir | (dspec as u32) << 1)
}

impl Elevator {
    pub fn new(cfg: MergeConfig) -> Elevator {
        Elevator {
            cfg,
            by_end: BTreeSet::new(),
            by_start: BTreeSet::new(),
            ranges: Vec::new(),
            last: None,
            stats: Vec::new(),
        }
    }

    pub fn config(&self) -> MergeConfig {
        self.cfg
    }

    /// The merge `r` would make, without making it.
    fn candidate(&self, r: &SchedReq) -> Option<Merged> {
        let dir = class_of(r.op, r.dspec)?;
        if self.cfg.nomerges >= 2 {
            return None;
        }
        let t = r.tenant.0;
        let (start, end) = (r.offset, r.offset + r.bytes);
        let try_with = |lead: ReqId, kind: MergeKind| -> Option<Merged> {
            let g = self.ranges[lead.index()];
            if g.len + r.bytes > self.cfg.max_bytes {
                return None;
            }
            let offset = if kind == MergeKind::Back { g.offset } else { start };
            Some(Merged { lead, kind, offset, len: g.len + r.bytes })
        };
        // 1. The last merge, either end.
        if let Some(l) = self.last {
            let g = self.ranges[l.index()];
            debug_assert!(g.indexed, "the last merge is a waiting request");
            if g.tenant == t && g.dir == dir {
                if g.offset + g.len == start {
                    return try_with(l, MergeKind::Back);
                }
                if g.offset == end {
                    return try_with(l, MergeKind::Front);
                }
            }
        }
        if self.cfg.nomerges == 1 {
            return None;
        }
        // 2. The hash (a request ending where r starts), then the sort tree (one starting where
        // r ends).
        let first = |set: &BTreeSet<Key>, at: u64| {
            set.range((t, dir, at, 0)..=(t, dir, at, u32::MAX)).next().map(|k| ReqId(k.3))
        };
        if let Some(l) = first(&self.by_end, start) {
            return try_with(l, MergeKind::Back);
        }
        first(&self.by_start, end).and_then(|l| try_with(l, MergeKind::Front))
    }

    /// Request `r` arrives: merged into a waiting request when the rules allow (the index is
    /// updated and the merge returned), else it waits on its own and, if it is a read or a
    /// write, can be merged into.
    pub fn arrive(&mut self, r: &SchedReq) -> Option<Merged> {
        let Some(m) = self.candidate(r) else {
            self.insert(r);
            return None;
        };
        let i = m.lead.index();
        let g = self.ranges[i];
        self.by_end.remove(&(g.tenant, g.dir, g.offset + g.len, m.lead.0));
        self.by_start.remove(&(g.tenant, g.dir, g.offset, m.lead.0));
        self.ranges[i].offset = m.offset;
        self.ranges[i].len = m.len;
        self.by_end.insert((g.tenant, g.dir, m.offset + m.len, m.lead.0));
        self.by_start.insert((g.tenant, g.dir, m.offset, m.lead.0));
        self.last = Some(m.lead);
        let t = r.tenant.index();
        if self.stats.len() <= t {
            self.stats.resize(t + 1, MergeStats::default());
        }
        let s = &mut self.stats[t];
        match m.kind {
            MergeKind::Back => s.merges_back += 1,
            MergeKind::Front => s.merges_front += 1,
        }
        match r.op {
            IoOp::Read => s.read_merges += 1,
            _ => s.write_merges += 1,
        }
        Some(m)
    }

    fn insert(&mut self, r: &SchedReq) {
        let Some(dir) = class_of(r.op, r.dspec) else { return };
        if self.cfg.nomerges >= 2 {
            return;
        }
        let i = r.id.index();
        if self.ranges.len() <= i {
            self.ranges.resize(i + 1, Range::default());
        }
        debug_assert!(!self.ranges[i].indexed, "request {} indexed twice", r.id.0);
        let t = r.tenant.0;
        self.ranges[i] = Range { indexed: true, tenant: t, dir, offset: r.offset, len: r.bytes };
        self.by_end.insert((t, dir, r.offset + r.bytes, r.id.0));
        self.by_start.insert((t, dir, r.offset, r.id.0));
        if self.last.is_none() {
            self.last = Some(r.id);
        }
    }

    /// Request `r` leaves the scheduler (dispatched): nothing merges into it any more.
    pub fn remove(&mut self, r: ReqId) {
        let Some(g) = self.ranges.get_mut(r.index()).filter(|g| g.indexed) else { return };
        g.indexed = false;
        let g = *g;
        self.by_end.remove(&(g.tenant, g.dir, g.offset + g.len, r.0));
        self.by_start.remove(&(g.tenant, g.dir, g.offset, r.0));
        if self.last == Some(r) {
            self.last = None;
        }
    }

    /// What the elevator merged for tenant `t`.
    pub fn stats(&self, t: usize) -> MergeStats {
        self.stats.get(t).copied().unwrap_or_default()
    }

    /// Requests that can be merged into.
    pub fn indexed(&self) -> usize {
        self.by_end.len()
    }

    pub fn check_invariants(&self) {
        assert_eq!(self.by_end.len(), self.by_start.len(), "the elevator's two indexes disagree");
        let n = self.ranges.iter().filter(|g| g.indexed).count();
        assert_eq!(n, self.by_end.len(), "the elevator indexes {} requests but holds {n}", self.by_end.len());
        for &(t, d, end, id) in &self.by_end {
            let g = self.ranges[id as usize];
            assert!(
                g.indexed && g.tenant == t && g.dir == d && g.offset + g.len == end,
                "request {id} indexed at a stale end"
            );
        }
        if let Some(l) = self.last {
            assert!(self.ranges[l.index()].indexed, "the last merge {} is not waiting", l.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::TenantId;

    const K: u64 = 1024;

    fn req(id: u32, t: u16, op: IoOp, offset: u64, bytes: u64) -> SchedReq {
        SchedReq { id: ReqId(id), tenant: TenantId(t), op, offset, bytes, update: false, dspec: 0 }
    }

    fn elevator(nomerges: u8) -> Elevator {
        Elevator::new(MergeConfig { nomerges, max_bytes: 128 * K })
    }

    /// Writes of different placement directives never merge, adjacent as they are (Linux's
    /// `blk_rq_merge_ok` compares write hints); those of the same one do, and reads ignore it.
    #[test]
    fn writes_of_different_placements_do_not_merge() {
        let mut e = elevator(0);
        let (w, r) = (IoOp::Write, IoOp::Read);
        let placed = |id, op, offset, dspec| SchedReq { dspec, ..req(id, 0, op, offset, 4 * K) };
        assert_eq!(e.arrive(&placed(0, w, 0, 1)), None);
        assert_eq!(e.arrive(&placed(1, w, 4 * K, 2)), None, "another handle's write at the back");
        assert_eq!(e.arrive(&placed(2, w, 8 * K, 1)), None, "the same handle's, but not adjacent to request 0");
        let m = e.arrive(&placed(3, w, 12 * K, 1)).unwrap();
        assert_eq!(m, Merged { lead: ReqId(2), kind: MergeKind::Back, offset: 8 * K, len: 8 * K });
        assert_eq!(e.arrive(&placed(4, r, 64 * K, 0)), None);
        assert!(e.arrive(&placed(5, r, 68 * K, 0)).is_some());
        e.check_invariants();
    }

    #[test]
    fn the_worked_example() {
        let mut e = elevator(0);
        let w = IoOp::Write;
        assert_eq!(e.arrive(&req(0, 0, w, 0, 64 * K)), None);
        assert_eq!(e.arrive(&req(1, 0, w, 128 * K, 64 * K)), None);
        let m = e.arrive(&req(2, 0, w, 64 * K, 64 * K)).unwrap();
        assert_eq!(m, Merged { lead: ReqId(0), kind: MergeKind::Back, offset: 0, len: 128 * K });
        let m = e.arrive(&req(3, 0, w, 124 * K, 4 * K)).unwrap();
        assert_eq!(m, Merged { lead: ReqId(1), kind: MergeKind::Front, offset: 124 * K, len: 68 * K });
        let s = e.stats(0);
        assert_eq!((s.merges_back, s.merges_front, s.write_merges, s.read_merges), (1, 1, 2, 0));
        assert_eq!(e.indexed(), 2);
        e.check_invariants();
    }

    #[test]
    fn a_sequential_stream_merges_up_to_the_limit_then_starts_a_new_request() {
        let mut e = elevator(0);
        let got: Vec<Option<u32>> =
            (0..80).map(|i| e.arrive(&req(i, 0, IoOp::Read, i as u64 * 4 * K, 4 * K)).map(|m| m.lead.0)).collect();
        // 32 × 4 KiB = 128 KiB per request: leads at 0, 32, 64.
        for (i, g) in got.iter().enumerate() {
            let lead = (i / 32) * 32;
            assert_eq!(*g, if i == lead { None } else { Some(lead as u32) }, "request {i}");
        }
        assert_eq!(e.stats(0).merges(), 77);
        assert_eq!(e.stats(0).read_merges, 77);
        e.check_invariants();
    }

    #[test]
    fn directions_tenants_trims_and_flushes_do_not_mix() {
        let mut e = elevator(0);
        assert_eq!(e.arrive(&req(0, 0, IoOp::Read, 0, 4 * K)), None);
        assert_eq!(e.arrive(&req(1, 0, IoOp::Write, 4 * K, 4 * K)), None, "a write after a read");
        assert_eq!(e.arrive(&req(2, 1, IoOp::Read, 4 * K, 4 * K)), None, "another tenant");
        assert_eq!(e.arrive(&req(3, 0, IoOp::Trim, 4 * K, 4 * K)), None, "a trim");
        assert_eq!(e.arrive(&req(4, 0, IoOp::Flush, 0, 0)), None, "a flush");
        assert_eq!(e.indexed(), 3, "trims and flushes are not indexed");
        assert_eq!(e.arrive(&req(5, 0, IoOp::Read, 4 * K, 4 * K)).map(|m| m.lead), Some(ReqId(0)));
        e.check_invariants();
    }

    #[test]
    fn a_dispatched_request_is_no_longer_merged_into() {
        let mut e = elevator(0);
        e.arrive(&req(0, 0, IoOp::Write, 0, 4 * K));
        e.remove(ReqId(0));
        assert_eq!(e.arrive(&req(1, 0, IoOp::Write, 4 * K, 4 * K)), None);
        assert_eq!(e.indexed(), 1);
        e.check_invariants();
    }

    #[test]
    fn the_first_candidate_is_the_only_one_tried() {
        // The last merge is adjacent but full: Linux does not look further.
        let mut e = elevator(0);
        e.arrive(&req(0, 0, IoOp::Write, 0, 128 * K));
        e.arrive(&req(1, 0, IoOp::Write, 132 * K, 4 * K));
        assert_eq!(e.arrive(&req(2, 0, IoOp::Write, 128 * K, 4 * K)), None, "the hash finds request 0, which is full");
        e.check_invariants();
    }

    #[test]
    fn nomerges_one_tries_only_the_last_merge() {
        let mut e = elevator(1);
        e.arrive(&req(0, 0, IoOp::Write, 0, 4 * K)); // the last merge
        e.arrive(&req(1, 0, IoOp::Write, 64 * K, 4 * K));
        assert_eq!(e.arrive(&req(2, 0, IoOp::Write, 68 * K, 4 * K)), None, "request 1 is not the last merge");
        assert_eq!(e.arrive(&req(3, 0, IoOp::Write, 4 * K, 4 * K)).map(|m| m.lead), Some(ReqId(0)));
        // Once the last merge leaves, nothing is the last merge until the next insertion.
        e.remove(ReqId(0));
        assert_eq!(e.arrive(&req(4, 0, IoOp::Write, 72 * K, 4 * K)), None);
        assert_eq!(e.arrive(&req(5, 0, IoOp::Write, 76 * K, 4 * K)).map(|m| m.lead), Some(ReqId(4)));
        e.check_invariants();
    }

    #[test]
    fn nomerges_two_merges_nothing_and_indexes_nothing() {
        let mut e = elevator(2);
        e.arrive(&req(0, 0, IoOp::Write, 0, 4 * K));
        assert_eq!(e.arrive(&req(1, 0, IoOp::Write, 4 * K, 4 * K)), None);
        assert_eq!(e.indexed(), 0);
        e.check_invariants();
    }

    #[test]
    fn settings_are_checked() {
        assert!(MergeConfig { nomerges: 3, max_bytes: 128 * K }.validate().unwrap_err().contains("host.nomerges"));
        assert!(MergeConfig { nomerges: 0, max_bytes: 1000 }.validate().unwrap_err().contains("host.max_sectors_kb"));
        assert!(MergeConfig::DEFAULT.validate().is_ok());
    }
}
