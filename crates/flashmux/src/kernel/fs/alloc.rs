//! The block allocator: ext4's multi-block allocator (mballoc), simplified where it does not
//! change which blocks a file's data gets.
//!
//! # Model
//! Free space is two free-extent maps: the **on-disk bitmap** (`disk`: blocks no file or table
//! uses; each group's block bitmap and descriptor free count are dirtied when it changes) and
//! the **buddy** view (`buddy`: blocks free for a new allocation — the on-disk free blocks less
//! those held by preallocations). A data request for logical blocks `L..L+n` of a file:
//!
//! 1. **Inode preallocation hit** (`ext4_mb_use_inode_pa`): a preallocation of the file whose
//!    logical range holds `L` gives `pstart + (L − lstart)` onward, as many blocks as it still
//!    covers (at most `n`).
//! 2. **Small file** (`ext4_mb_group_or_file`): when max(L + n, i_size in blocks) ≤
//!    `mb_stream_req` (16 blocks), the request is the locality group's (one per `cpu` the caller
//!    names): it takes its `n` blocks from the front of one of the group's preallocations with
//!    at least `n` left (the one whose next block is nearest the goal; `ext4_mb_use_group_pa`),
//!    or else allocates `mb_group_prealloc` (512) blocks, uses the first `n` and keeps the rest
//!    as a new preallocation of the locality group (at most 8 kept; the oldest is released).
//!    Small files written one after another are thus packed together.
//! 3. **Normalized request** (`ext4_mb_normalize_request`): the file's predicted size,
//!    max(L + n, i_size) in bytes, is rounded up to 16, 32, 64, 128, 256, 512 KiB or 1 MiB (a
//!    window from logical block 0); up to 4 MiB: the 2 MiB-aligned window holding `L`; up to
//!    8 MiB: the 4 MiB-aligned one; beyond: the 8 MiB-aligned one (2048 blocks; with 4 KiB
//!    blocks mballoc's last case, the request's own size, is never reached). A window starting
//!    before the group-sized logical span holding `L` is moved to its start (size kept; only
//!    with groups under 8 MiB), at most a group long, then cut so as not to cover mapped blocks
//!    or the file's other preallocations. The whole window is allocated: the request's part is used, the
//!    rest becomes the file's preallocation for its next writebacks.
//!
//! Where a new run is searched (`ext4_mb_regular_allocator`, simplified): when the window
//! continues the extent to its left (or ends where the one to its right starts), first exactly
//! at the physical block that would merge (`ext4_mb_find_by_goal`): taken if the whole window is
//! free there. Then groups in order from the goal's group — or, for a stream request (a file
//! above `mb_stream_req`), from the group of the last stream allocation (`s_mb_last_group`) —
//! the first free run at least the window's size, searched from each group's first block.
//! When no group has one, the largest free run (the first of the largest in that order) is
//! taken, and the request gets what it holds: the window shrinks to start at `L`, and the
//! caller asks again for the rest. Runs never cross a group's end.
//!
//! Metadata blocks (directory blocks, extent-tree blocks) take one block, without
//! preallocation, from the first free block of the goal's group onward (mballoc does not
//! normalize requests without `EXT4_MB_HINT_DATA`).
//!
//! Freeing returns blocks to both maps. Releasing a file's preallocations
//! (`ext4_discard_preallocations`, at close, truncate and delete) returns their unused blocks —
//! those still free on disk in their range — to the buddy view; they never reached the disk,
//! so they are not discarded.
//!
//! # Worked example
//! A fresh 1 GiB filesystem (data from block 4247 in group 0, group 1's data from 32897). A
//! file in group 0 with i_size 8 KiB asks for logical 0..2: 2 ≤ 16, the locality group has no
//! preallocation, so 512 blocks are found from the goal (regular files: the flex group's second
//! group, 32768): 32897..33409; the file gets 32897–32898, the locality group keeps 32899..33409
//! (510 blocks). A second small file then gets 32899–32900 from it (a group preallocation hit).
//!
//! # Simplifications
//! No buddy orders (Linux's power-of-two chunks are naturally aligned; here a run starts where
//! the free space does), no allocation criteria passes (cr 0–3) or per-group scan limits, no
//! stripe alignment, no `mb_max_to_scan`/`mb_min_to_scan`; the exact goal is used only when
//! the whole window fits there. A locality group's preallocations are one list (Linux keeps
//! lists by free-size order, each trimmed at 8). A file whose writeback reaches i_size after it
//! was closed still uses the locality group (Linux then skips it). Reserved blocks for root
//! (5 %) are not withheld.
//!
//! # Source
//! Linux `fs/ext4/mballoc.c` (`ext4_mb_new_blocks`, `ext4_mb_group_or_file`,
//! `ext4_mb_normalize_request`, `ext4_mb_use_preallocated`, `ext4_mb_find_by_goal`,
//! `ext4_mb_regular_allocator`, `ext4_mb_discard_lg_preallocations`,
//! `ext4_discard_preallocations`), `Documentation/admin-guide/ext4.rst` (`mb_stream_req` 16,
//! `mb_group_prealloc` 512).

use super::layout::Layout;
use super::{Change, FsError, MetaKind, PhysExtent};
use std::collections::BTreeMap;

/// Preallocations a locality group keeps.
pub const LG_PAS: usize = 8;

/// Free runs of blocks: start → length, touching runs merged.
#[derive(Clone, Debug, Default)]
pub struct FreeMap {
    runs: BTreeMap<u64, u64>,
    total: u64,
}

impl FreeMap {
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The run holding `block`.
    pub fn run_at(&self, block: u64) -> Option<(u64, u64)> {
        let (&s, &l) = self.runs.range(..=block).next_back()?;
        (block < s + l).then_some((s, l))
    }

    /// Whether all of `[start, start + len)` is free.
    pub fn contains(&self, start: u64, len: u64) -> bool {
        self.run_at(start).is_some_and(|(s, l)| start + len <= s + l)
    }

    /// The free runs of `[lo, hi)`, clipped to it.
    pub fn runs_in(&self, lo: u64, hi: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if let Some((s, l)) = self.run_at(lo) {
            if s < lo {
                out.push((lo, (s + l).min(hi) - lo));
            }
        }
        for (&s, &l) in self.runs.range(lo..hi) {
            out.push((s, (s + l).min(hi) - s));
        }
        out
    }

    /// Frees `[start, start + len)`, which must be in use.
    pub fn insert(&mut self, start: u64, len: u64) {
        assert!(len > 0);
        let (mut s, mut l) = (start, len);
        if let Some((&ps, &pl)) = self.runs.range(..=start).next_back() {
            assert!(ps + pl <= start, "block {start} freed twice");
            if ps + pl == start {
                self.runs.remove(&ps);
                (s, l) = (ps, pl + len);
            }
        }
        if let Some((&ns, &nl)) = self.runs.range(start..).next() {
            assert!(ns >= start + len, "block {ns} freed twice");
            if ns == start + len {
                self.runs.remove(&ns);
                l += nl;
            }
        }
        self.runs.insert(s, l);
        self.total += len;
    }

    /// Takes `[start, start + len)`, which must be free.
    pub fn remove(&mut self, start: u64, len: u64) {
        let (s, l) = self.run_at(start).expect("taking a block that is not free");
        assert!(start + len <= s + l, "taking blocks {start}+{len} beyond the free run {s}+{l}");
        self.runs.remove(&s);
        if s < start {
            self.runs.insert(s, start - s);
        }
        if start + len < s + l {
            self.runs.insert(start + len, s + l - start - len);
        }
        self.total -= len;
    }
}

/// A file's preallocation: logical `lstart..lstart+len` ↔ physical `pstart..pstart+len`;
/// `free` of its blocks are still unused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InodePa {
    pub lstart: u64,
    pub pstart: u64,
    pub len: u64,
    pub free: u64,
}

/// A locality group's preallocation: `free` unused blocks from `next`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupPa {
    pub next: u64,
    pub free: u64,
}

/// A data request as the file's state shapes it.
#[derive(Clone, Copy, Debug)]
pub struct DataRequest {
    pub logical: u64,
    pub len: u64,
    /// i_size, blocks (rounded up).
    pub isize: u64,
    pub cpu: u32,
    /// `ext4_ext_find_goal`'s block for `logical`.
    pub goal: u64,
    /// The mapped extent ending at or before `logical`: (logical end, physical end).
    pub left: Option<(u64, u64)>,
    /// The mapped extent after `logical`: (logical start, physical start).
    pub right: Option<(u64, u64)>,
}

/// Counters of the allocator's decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AllocCounts {
    pub inode_pa_hits: u64,
    pub group_pa_hits: u64,
    pub inode_pas: u64,
    pub group_pas: u64,
    pub goal_hits: u64,
    pub partial: u64,
    pub pa_blocks_released: u64,
}

/// mballoc's state: the two free maps, per-group counts, locality groups, the stream goal.
#[derive(Clone, Debug)]
pub struct Allocator {
    pub disk: FreeMap,
    pub buddy: FreeMap,
    disk_free: Vec<u64>,
    buddy_free: Vec<u64>,
    last_group: u64,
    lgs: BTreeMap<u32, Vec<GroupPa>>,
    pub counts: AllocCounts,
}

impl Allocator {
    /// Free space after mkfs: everything outside the layout's fixed regions.
    pub fn new(lay: &Layout) -> Allocator {
        let mut disk = FreeMap::default();
        let mut at = 0;
        for (r, _) in lay.regions() {
            if r.start > at {
                disk.insert(at, r.start - at);
            }
            at = r.end();
        }
        if at < lay.blocks {
            disk.insert(at, lay.blocks - at);
        }
        let free: Vec<u64> = (0..lay.groups).map(|g| lay.group_free_after_mkfs(g)).collect();
        Allocator {
            buddy: disk.clone(),
            disk,
            buddy_free: free.clone(),
            disk_free: free,
            last_group: 0,
            lgs: BTreeMap::new(),
            counts: AllocCounts::default(),
        }
    }

    /// Free blocks on disk (the descriptors' sum).
    pub fn free_blocks(&self) -> u64 {
        self.disk.total()
    }
    /// Free blocks of group `g` on disk (`bg_free_blocks_count`).
    pub fn group_free(&self, g: u64) -> u64 {
        self.disk_free[g as usize]
    }

    /// Calls `f(group, blocks)` for each group's part of `[start, start + len)`.
    fn per_group(lay: &Layout, start: u64, len: u64, mut f: impl FnMut(u64, u64)) {
        let mut at = start;
        while at < start + len {
            let g = lay.group_of(at);
            let stop = lay.group_end(g).min(start + len);
            f(g, stop - at);
            at = stop;
        }
    }

    /// Marks `[start, start + len)` used on disk; `reserved` when the buddy view already holds
    /// it (a preallocation's blocks).
    pub fn mark_used(&mut self, lay: &Layout, start: u64, len: u64, reserved: bool, ch: &mut Change) {
        self.disk.remove(start, len);
        if !reserved {
            self.buddy.remove(start, len);
        }
        let (disk, buddy) = (&mut self.disk_free, &mut self.buddy_free);
        Self::per_group(lay, start, len, |g, n| {
            disk[g as usize] -= n;
            if !reserved {
                buddy[g as usize] -= n;
            }
            ch.dirty(lay.block_bitmap(g), MetaKind::BlockBitmap);
            ch.dirty(lay.group_desc_block(g), MetaKind::GroupDesc);
        });
        ch.allocated.push(PhysExtent { start, len });
    }

    /// Frees `[start, start + len)` on disk and for allocation.
    pub fn free(&mut self, lay: &Layout, start: u64, len: u64, ch: &mut Change) {
        self.disk.insert(start, len);
        self.buddy.insert(start, len);
        let (disk, buddy) = (&mut self.disk_free, &mut self.buddy_free);
        Self::per_group(lay, start, len, |g, n| {
            disk[g as usize] += n;
            buddy[g as usize] += n;
            ch.dirty(lay.block_bitmap(g), MetaKind::BlockBitmap);
            ch.dirty(lay.group_desc_block(g), MetaKind::GroupDesc);
        });
        ch.freed.push(PhysExtent { start, len });
    }

    /// Holds `[start, start + len)` for a preallocation (buddy view only).
    fn reserve(&mut self, lay: &Layout, start: u64, len: u64) {
        self.buddy.remove(start, len);
        let buddy = &mut self.buddy_free;
        Self::per_group(lay, start, len, |g, n| buddy[g as usize] -= n);
    }

    /// Returns a preallocation's unused `[start, start + len)` to the buddy view.
    fn unreserve(&mut self, lay: &Layout, start: u64, len: u64) {
        self.buddy.insert(start, len);
        let buddy = &mut self.buddy_free;
        Self::per_group(lay, start, len, |g, n| buddy[g as usize] += n);
        self.counts.pa_blocks_released += len;
    }

    /// A free run for `len` blocks: (start, blocks available, at most `len`).
    fn find(&self, lay: &Layout, goal: u64, len: u64, try_goal: bool, first_group: u64) -> Option<(u64, u64)> {
        if try_goal && goal < lay.blocks {
            if let Some((s, l)) = self.buddy.run_at(goal) {
                let avail = (s + l).min(lay.group_end(lay.group_of(goal))) - goal;
                if avail >= len {
                    return Some((goal, len));
                }
            }
        }
        let mut largest: Option<(u64, u64)> = None;
        for i in 0..lay.groups {
            let g = (first_group + i) % lay.groups;
            let free = self.buddy_free[g as usize];
            if free == 0 || free <= largest.map_or(0, |(_, l)| l) && free < len {
                continue;
            }
            for (s, l) in self.buddy.runs_in(lay.group_first(g), lay.group_end(g)) {
                if l >= len {
                    return Some((s, len));
                }
                if l > largest.map_or(0, |(_, b)| b) {
                    largest = Some((s, l));
                }
            }
        }
        largest
    }

    /// One metadata block (directory or extent tree) near `goal`.
    pub fn alloc_meta(&mut self, lay: &Layout, goal: u64, ch: &mut Change) -> Result<u64, FsError> {
        let g = lay.group_of(goal.min(lay.blocks - 1));
        let (start, _) = self.find(lay, goal, 1, false, g).ok_or(FsError::NoSpace)?;
        self.mark_used(lay, start, 1, false, ch);
        Ok(start)
    }

    /// Allocates the first blocks of a data request: (physical start, blocks), at least one.
    pub fn alloc_data(
        &mut self,
        lay: &Layout,
        req: &DataRequest,
        pas: &mut Vec<InodePa>,
        ch: &mut Change,
    ) -> Result<(u64, u64), FsError> {
        assert!(req.len > 0);
        if let Some(i) = pas.iter().position(|p| p.lstart <= req.logical && req.logical < p.lstart + p.len) {
            let pa = &mut pas[i];
            let phys = pa.pstart + (req.logical - pa.lstart);
            let n = req.len.min(pa.lstart + pa.len - req.logical);
            pa.free -= n;
            if pa.free == 0 {
                pas.remove(i);
            }
            self.mark_used(lay, phys, n, true, ch);
            self.counts.inode_pa_hits += 1;
            return Ok((phys, n));
        }
        if (req.logical + req.len).max(req.isize) <= lay.opts.mb_stream_req {
            return self.alloc_group(lay, req, ch);
        }
        self.alloc_stream(lay, req, pas, ch)
    }

    /// A small file's request from its locality group.
    fn alloc_group(&mut self, lay: &Layout, req: &DataRequest, ch: &mut Change) -> Result<(u64, u64), FsError> {
        let lg = self.lgs.entry(req.cpu).or_default();
        let best =
            lg.iter().enumerate().filter(|(_, p)| p.free >= req.len).min_by_key(|(_, p)| p.next.abs_diff(req.goal));
        if let Some((i, _)) = best {
            let pa = &mut lg[i];
            let phys = pa.next;
            pa.next += req.len;
            pa.free -= req.len;
            if pa.free == 0 {
                lg.remove(i);
            }
            self.mark_used(lay, phys, req.len, true, ch);
            self.counts.group_pa_hits += 1;
            return Ok((phys, req.len));
        }
        let want = lay.opts.mb_group_prealloc.max(req.len);
        let (start, got) = self.find(lay, req.goal, want, false, lay.group_of(req.goal)).ok_or(FsError::NoSpace)?;
        let take = req.len.min(got);
        self.mark_used(lay, start, take, false, ch);
        if got > take {
            self.reserve(lay, start + take, got - take);
            let lg = self.lgs.entry(req.cpu).or_default();
            lg.push(GroupPa { next: start + take, free: got - take });
            self.counts.group_pas += 1;
            if lg.len() > LG_PAS {
                let old = lg.remove(0);
                self.unreserve(lay, old.next, old.free);
                ch.released += old.free;
            }
        }
        if got < want {
            self.counts.partial += 1;
        }
        Ok((start, take))
    }

    /// The normalized window of logical blocks for a stream request (`ext4_mb_normalize_request`).
    fn window(&self, lay: &Layout, req: &DataRequest, pas: &[InodePa]) -> (u64, u64) {
        let size = (req.logical + req.len).max(req.isize) * lay.opts.block_size;
        let (mut start, len) = match size {
            s if s <= 16 << 10 => (0, 4),
            s if s <= 32 << 10 => (0, 8),
            s if s <= 64 << 10 => (0, 16),
            s if s <= 128 << 10 => (0, 32),
            s if s <= 256 << 10 => (0, 64),
            s if s <= 512 << 10 => (0, 128),
            s if s <= 1 << 20 => (0, 256),
            s if s <= 4 << 20 => (req.logical / 512 * 512, 512),
            s if s <= 8 << 20 => (req.logical / 1024 * 1024, 1024),
            _ => (req.logical / 2048 * 2048, 2048),
        };
        let bpg = lay.opts.blocks_per_group;
        start = start.max(req.logical / bpg * bpg);
        let mut end = (start + len).min(start + bpg);
        if let Some((lend, _)) = req.left {
            start = start.max(lend);
        }
        if let Some((rstart, _)) = req.right {
            end = end.min(rstart);
        }
        for p in pas {
            if p.lstart + p.len <= req.logical {
                start = start.max(p.lstart + p.len);
            } else if p.lstart > req.logical {
                end = end.min(p.lstart);
            }
        }
        let end = end.max(req.logical + 1);
        (start.min(req.logical), end)
    }

    /// A larger file's request: a normalized window, its rest kept as the file's preallocation.
    fn alloc_stream(
        &mut self,
        lay: &Layout,
        req: &DataRequest,
        pas: &mut Vec<InodePa>,
        ch: &mut Change,
    ) -> Result<(u64, u64), FsError> {
        let (ws, we) = self.window(lay, req, pas);
        let wlen = we - ws;
        let (mut goal, mut try_goal) = (req.goal, false);
        if let Some((lend, pend)) = req.left.filter(|&(lend, _)| lend == ws) {
            debug_assert_eq!(lend, ws);
            (goal, try_goal) = (pend, true);
        } else if let Some((_, rp)) = req.right.filter(|&(rs, rp)| rs == we && rp >= wlen) {
            (goal, try_goal) = (rp - wlen, true);
        }
        let goal = goal.min(lay.blocks - 1);
        let (start, got) = self.find(lay, goal, wlen, try_goal, self.last_group).ok_or(FsError::NoSpace)?;
        if try_goal && start == goal {
            self.counts.goal_hits += 1;
        }
        self.last_group = lay.group_of(start);
        let (lstart, plen) = if got == wlen {
            (ws, wlen)
        } else {
            self.counts.partial += 1;
            (req.logical, got.min(we - req.logical))
        };
        self.reserve(lay, start, plen);
        let phys = start + (req.logical - lstart);
        let n = req.len.min(lstart + plen - req.logical);
        self.mark_used(lay, phys, n, true, ch);
        if plen > n {
            pas.push(InodePa { lstart, pstart: start, len: plen, free: plen - n });
            self.counts.inode_pas += 1;
        }
        Ok((phys, n))
    }

    /// Releases a file's preallocations (`ext4_discard_preallocations`); returns the blocks.
    pub fn discard_inode_pas(&mut self, lay: &Layout, pas: &mut Vec<InodePa>) -> u64 {
        let mut total = 0;
        for pa in pas.drain(..) {
            let mut unused = 0;
            for (s, l) in self.disk.runs_in(pa.pstart, pa.pstart + pa.len) {
                self.unreserve(lay, s, l);
                unused += l;
            }
            assert_eq!(unused, pa.free, "a preallocation's unused blocks differ from its count");
            total += unused;
        }
        total
    }

    /// Releases every locality group's preallocations; returns the blocks.
    pub fn discard_group_pas(&mut self, lay: &Layout) -> u64 {
        let pas: Vec<GroupPa> = std::mem::take(&mut self.lgs).into_values().flatten().collect();
        for p in &pas {
            self.unreserve(lay, p.next, p.free);
        }
        pas.iter().map(|p| p.free).sum()
    }

    /// The unused blocks of every locality group's preallocations.
    pub fn group_pa_blocks(&self) -> impl Iterator<Item = PhysExtent> + '_ {
        self.lgs.values().flatten().map(|p| PhysExtent { start: p.next, len: p.free })
    }

    /// Checks the maps against the per-group counts and the preallocations (`inode_pas`: every
    /// file's).
    pub fn check<'a>(&self, lay: &Layout, inode_pas: impl Iterator<Item = &'a InodePa>) -> Result<(), String> {
        for g in 0..lay.groups {
            let (lo, hi) = (lay.group_first(g), lay.group_end(g));
            let d: u64 = self.disk.runs_in(lo, hi).iter().map(|r| r.1).sum();
            let b: u64 = self.buddy.runs_in(lo, hi).iter().map(|r| r.1).sum();
            if d != self.disk_free[g as usize] || b != self.buddy_free[g as usize] {
                return Err(format!(
                    "group {g}: counts {} / {} against maps {d} / {b}",
                    self.disk_free[g as usize], self.buddy_free[g as usize]
                ));
            }
        }
        for (s, l) in self.buddy.runs_in(0, lay.blocks) {
            if !self.disk.contains(s, l) {
                return Err(format!("blocks {s}+{l} free for allocation but used on disk"));
            }
        }
        let mut held = 0;
        for pa in inode_pas {
            for (s, l) in self.disk.runs_in(pa.pstart, pa.pstart + pa.len) {
                if !self.buddy.runs_in(s, s + l).is_empty() {
                    return Err(format!("preallocated blocks {s}+{l} also free for allocation"));
                }
                held += l;
            }
        }
        for p in self.group_pa_blocks() {
            if !self.disk.contains(p.start, p.len) || !self.buddy.runs_in(p.start, p.end()).is_empty() {
                return Err(format!("locality group blocks {}+{} not held", p.start, p.len));
            }
            held += p.len;
        }
        if self.disk.total() != self.buddy.total() + held {
            return Err(format!(
                "{} free on disk ≠ {} free + {held} preallocated",
                self.disk.total(),
                self.buddy.total()
            ));
        }
        Ok(())
    }
}
