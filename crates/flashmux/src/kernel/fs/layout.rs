//! The filesystem's geometry as mke2fs lays it out: block groups, superblock backups, group
//! descriptors, the flex groups' bitmaps and inode tables, and the journal's fixed region.
//!
//! # Model
//! Blocks are 4 KiB (`block_size`, the only size accepted) and the first data block is 0 (as for
//! every block size above 1 KiB). The device's blocks are cut into groups of `blocks_per_group`
//! (32768, mke2fs's default for 4 KiB blocks: one bitmap block covers 8 × 4096 blocks); the last
//! group may be shorter, and is dropped, as `ext2fs_initialize` drops it, when it holds fewer
//! than its overhead (2 + the inode-table blocks, plus the superblock copy when it carries one)
//! + 50 blocks.
//!
//! - **Inodes**: `ceil(device_bytes / inode_ratio)` inodes (ratio 16384 bytes, mke2fs.conf's
//!   `inode_ratio` for the default filesystem type), spread evenly over the groups, rounded up
//!   to fill whole inode-table blocks (`inode_size` 256 bytes: 16 per block) and down to a
//!   multiple of 8: with full 32768-block groups, 8192 inodes and 512 inode-table blocks a group.
//! - **Superblock copies** (`sparse_super`): groups 0, 1 and the powers of 3, 5 and 7 carry a
//!   superblock (block 0 of the group; in group 0 the superblock proper sits at byte 1024 of
//!   block 0), the group descriptor table (64-byte descriptors with the `64bit` feature: 64 a
//!   block) and the reserved GDT blocks that let the filesystem grow 1024-fold
//!   (`calc_reserved_gdt_blocks`: enough descriptor blocks for min(1024 × blocks, 2^32) blocks,
//!   less those in use, at most 1024; none, as mke2fs turns `resize_inode` off, when they and
//!   the descriptors would take more than 3/4 of a group). A 1 GiB filesystem: 8 groups, 1 descriptor block,
//!   ceil(2^28 / 32768 / 64) − 1 = 127 reserved ones; 64 GiB: 512 groups, 8 descriptor blocks,
//!   1024 reserved (2^32 caps the growth: 131072 groups → 2048 blocks, less 8, capped).
//! - **flex_bg** (`flex_bg_size` 16): the block bitmaps, then the inode bitmaps, then the inode
//!   tables of the groups of a flex group are packed from the first free block of the flex
//!   group's first group, each kind starting `table_offset` blocks after the previous kind's
//!   start (`ext2fs_allocate_group_table`): 16, or, for the last flex group, its group count
//!   (the index of its last group within the flex group + 1; 16 when that index is 0). A
//!   1 GiB filesystem (8 groups, one flex group): block bitmaps 129–136, inode bitmaps 137–144,
//!   inode tables 145–4240; 64 GiB: block bitmaps 1033–1048, inode bitmaps 1049–1064, inode
//!   tables 1065–9256, and at the start of groups 16, 32, …: 16 + 16 + 8192 blocks.
//! - **Journal** (inode 8): `ext2fs_default_journal_size` by the block count — < 32768 blocks:
//!   1024; < 256 Ki: 4096; < 512 Ki: 8192; < 4 Mi: 16384; < 8 Mi: 32768; < 16 Mi: 65536;
//!   < 32 Mi: 131072; else 262144 blocks (1 GiB = 262144 blocks → 8192, 32 MiB; 64 GiB →
//!   131072, 512 MiB); none below 2048 blocks. Placed as `get_midpoint_journal_block` places
//!   it: the group holding the middle block; beyond the first flex group, rounded down to its
//!   flex group's first group; then of that group and its neighbours (without flex rounding:
//!   the one before and after; with it: the one after) the one with the most free blocks (first
//!   on ties); the journal takes the first free run of its size from that group's first block.
//!   1 GiB: middle group 4, neighbours 3 and 5 carry superblock copies → group 4, blocks
//!   131072–139263. 64 GiB: group 256, its flex metadata leaves fewer free blocks than group
//!   257 → blocks 8421376–8552447.
//!
//! # Simplifications
//! Only 4 KiB blocks and `first_data_block` 0. The layout is computed, not searched: flex
//! metadata is packed contiguously, and a layout whose flex metadata would overlap another
//! group's superblock copy is refused (mke2fs would skip around it; it never happens with the
//! defaults, as flex groups start at multiples of 16 and no power of 3, 5 or 7 is one). No
//! `meta_bg` (mke2fs turns it on with `resize_inode` off), `sparse_super2`, `resize_inode` cut-off above 2^32 blocks, stride, bad blocks,
//! orphan file or fast-commit area; the reserved-blocks percentage (5 % for root) does not
//! restrict the allocator. The inode count is recomputed from the blocks kept when the last
//! group is dropped.
//!
//! # Source
//! e2fsprogs `lib/ext2fs/initialize.c` (`ext2fs_initialize`, `calc_reserved_gdt_blocks`),
//! `lib/ext2fs/alloc_tables.c` (`ext2fs_allocate_group_table`, `flexbg_offset`),
//! `lib/ext2fs/closefs.c` (`ext2fs_bg_has_super`), `lib/ext2fs/mkjournal.c`
//! (`ext2fs_default_journal_size`, `get_midpoint_journal_block`), `misc/mke2fs.conf.in`.

use super::{FsError, MetaKind, PhysExtent};
use serde::Serialize;
use std::collections::BTreeMap;

/// The block size, bytes.
pub const BLOCK_SIZE: u64 = 4096;
/// Group descriptors per block (64-byte descriptors, the `64bit` feature).
pub const DESC_PER_BLOCK: u64 = BLOCK_SIZE / 64;

/// mkfs and mount options, named as mke2fs and ext4's sysfs name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FsOptions {
    /// Bytes per block (`-b`, 4096; only 4096 is modelled).
    pub block_size: u64,
    /// Blocks per group (`-g`, 32768).
    pub blocks_per_group: u64,
    /// Bytes of space per inode (`-i`, mke2fs.conf `inode_ratio`, 16384).
    pub inode_ratio: u64,
    /// Bytes per inode (`-I`, mke2fs.conf `inode_size`, 256).
    pub inode_size: u64,
    /// Groups per flex group (`-G`, mke2fs.conf `flex_bg_size`, 16; 1 = no flex_bg).
    pub flex_bg_size: u64,
    /// Journal blocks; 0 = mke2fs's default by filesystem size (`-J size=`).
    pub journal_blocks: u64,
    /// Files of at most this many blocks use the locality group (`mb_stream_req`, 16).
    pub mb_stream_req: u64,
    /// A locality group's preallocation, blocks (`mb_group_prealloc`, 512).
    pub mb_group_prealloc: u64,
}

impl Default for FsOptions {
    fn default() -> Self {
        FsOptions {
            block_size: BLOCK_SIZE,
            blocks_per_group: 32768,
            inode_ratio: 16384,
            inode_size: 256,
            flex_bg_size: 16,
            journal_blocks: 0,
            mb_stream_req: 16,
            mb_group_prealloc: 512,
        }
    }
}

impl FsOptions {
    /// Checks the options; the error names the key.
    pub fn validate(&self) -> Result<(), FsError> {
        let bad = |key: &'static str, value: u64, expected: &'static str| Err(FsError::Config { key, value, expected });
        if self.block_size != BLOCK_SIZE {
            return bad("block_size", self.block_size, "4096 (the only block size modelled)");
        }
        let b = self.blocks_per_group;
        if !(256..=8 * BLOCK_SIZE).contains(&b) || b % 8 != 0 {
            return bad("blocks_per_group", b, "a multiple of 8 from 256 to 32768 (one bitmap block)");
        }
        if !self.inode_ratio.is_power_of_two() || !(1024..=1 << 26).contains(&self.inode_ratio) {
            return bad("inode_ratio", self.inode_ratio, "a power of two from 1024 to 67108864 bytes");
        }
        if !self.inode_size.is_power_of_two() || !(128..=BLOCK_SIZE).contains(&self.inode_size) {
            return bad("inode_size", self.inode_size, "a power of two from 128 to 4096 bytes");
        }
        if !self.flex_bg_size.is_power_of_two() || self.flex_bg_size > 1 << 16 {
            return bad("flex_bg_size", self.flex_bg_size, "a power of two from 1 to 65536 groups");
        }
        if self.journal_blocks != 0 && !(1024..=1 << 24).contains(&self.journal_blocks) {
            return bad("journal_blocks", self.journal_blocks, "0 (by size) or 1024 to 16777216 blocks");
        }
        if !(1..=1 << 20).contains(&self.mb_stream_req) {
            return bad("mb_stream_req", self.mb_stream_req, "1 to 1048576 blocks");
        }
        if !(1..=b).contains(&self.mb_group_prealloc) {
            return bad("mb_group_prealloc", self.mb_group_prealloc, "1 block to one group's blocks");
        }
        Ok(())
    }
}

/// mke2fs's default journal size, blocks (`ext2fs_default_journal_size`); 0 = no journal.
pub fn default_journal_blocks(blocks: u64) -> u64 {
    match blocks {
        b if b < 2048 => 0,
        b if b < 32768 => 1024,
        b if b < 256 * 1024 => 4096,
        b if b < 512 * 1024 => 8192,
        b if b < 4096 * 1024 => 16384,
        b if b < 8192 * 1024 => 32768,
        b if b < 16384 * 1024 => 65536,
        b if b < 32768 * 1024 => 131072,
        _ => 262144,
    }
}

/// Whether group `g` carries a superblock copy (`sparse_super`: 0, 1, powers of 3, 5, 7).
pub fn has_super(g: u64) -> bool {
    if g <= 1 {
        return true;
    }
    [3u64, 5, 7].iter().any(|&base| {
        let mut p = base;
        while p < g {
            p *= base;
        }
        p == g
    })
}

/// The filesystem's fixed geometry.
#[derive(Clone, Debug, Serialize)]
pub struct Layout {
    pub opts: FsOptions,
    /// Blocks of the filesystem (the device's, less a dropped last group).
    pub blocks: u64,
    pub groups: u64,
    pub inodes_per_group: u64,
    pub inode_table_blocks: u64,
    pub desc_blocks: u64,
    pub reserved_gdt_blocks: u64,
    /// Where each kind of a flex group's tables starts after the previous kind, per flex group.
    table_offsets: Vec<u64>,
    /// Where each flex group's metadata starts.
    flex_starts: Vec<u64>,
    pub journal: PhysExtent,
    /// Every fixed metadata region (superblock copies, descriptors, bitmaps, inode tables,
    /// journal) by start: (length, kind). Regions of one kind that touch are one entry.
    #[serde(skip)]
    regions: BTreeMap<u64, (u64, MetaKind)>,
}

impl Layout {
    /// Lays out a filesystem on `device_bytes`.
    pub fn mkfs(device_bytes: u64, opts: FsOptions) -> Result<Layout, FsError> {
        opts.validate()?;
        let bpg = opts.blocks_per_group;
        let mut blocks = device_bytes / BLOCK_SIZE;
        if blocks < bpg.max(2048) || blocks > 1 << 40 {
            return Err(FsError::Config {
                key: "device_bytes",
                value: device_bytes,
                expected: "at least one full group and 2048 blocks, at most 2^40 blocks",
            });
        }
        loop {
            let mut l = Layout::geometry(blocks, opts)?;
            let rem = blocks % bpg;
            let mut overhead = 2 + l.inode_table_blocks;
            if has_super(l.groups - 1) {
                overhead += 1 + l.desc_blocks + l.reserved_gdt_blocks;
            }
            if rem != 0 && rem < overhead + 50 {
                blocks -= rem;
                continue;
            }
            l.place_tables()?;
            l.place_journal()?;
            return Ok(l);
        }
    }

    /// Groups, inodes and descriptor counts for `blocks` (before placement).
    fn geometry(blocks: u64, opts: FsOptions) -> Result<Layout, FsError> {
        let bpg = opts.blocks_per_group;
        let groups = blocks.div_ceil(bpg);
        let inodes = (blocks * BLOCK_SIZE).div_ceil(opts.inode_ratio);
        let per_block = BLOCK_SIZE / opts.inode_size;
        let ipg = inodes.div_ceil(groups).clamp(per_block, 8 * BLOCK_SIZE);
        let itb = (ipg * opts.inode_size).div_ceil(BLOCK_SIZE);
        let ipg = ((itb * BLOCK_SIZE / opts.inode_size) & !7).min(8 * BLOCK_SIZE);
        let desc_blocks = groups.div_ceil(DESC_PER_BLOCK);
        let max_blocks = if blocks < u32::MAX as u64 / 1024 { blocks * 1024 } else { u32::MAX as u64 };
        let rsv_groups = max_blocks.div_ceil(bpg);
        let mut reserved_gdt_blocks =
            rsv_groups.div_ceil(DESC_PER_BLOCK).saturating_sub(desc_blocks).min(BLOCK_SIZE / 4);
        if reserved_gdt_blocks + desc_blocks > bpg * 3 / 4 {
            // mke2fs then turns resize_inode off (and meta_bg on, not modelled).
            reserved_gdt_blocks = 0;
        }
        if 3 + itb + reserved_gdt_blocks + desc_blocks > bpg {
            return Err(FsError::Config {
                key: "inode_ratio",
                value: opts.inode_ratio,
                expected: "few enough inodes that a group's tables fit in the group",
            });
        }
        Ok(Layout {
            opts,
            blocks,
            groups,
            inodes_per_group: ipg,
            inode_table_blocks: itb,
            desc_blocks,
            reserved_gdt_blocks,
            table_offsets: Vec::new(),
            flex_starts: Vec::new(),
            journal: PhysExtent { start: 0, len: 0 },
            regions: BTreeMap::new(),
        })
    }

    /// The superblock copies and each flex group's packed tables.
    fn place_tables(&mut self) -> Result<(), FsError> {
        let flex = self.opts.flex_bg_size;
        for g in 0..self.groups {
            if has_super(g) {
                let first = self.group_first(g);
                self.add_region(first, 1, MetaKind::Superblock);
                self.add_region(first + 1, self.desc_blocks, MetaKind::GroupDesc);
                self.add_region(first + 1 + self.desc_blocks, self.reserved_gdt_blocks, MetaKind::ReservedGdt);
            }
        }
        for f in 0..self.groups.div_ceil(flex) {
            let first_group = f * flex;
            let last_group = (first_group + flex - 1).min(self.groups - 1);
            let n = last_group - first_group + 1;
            let t = if last_group + 1 == self.groups && last_group % flex != 0 { last_group % flex + 1 } else { flex };
            let mut start = self.group_first(first_group);
            if has_super(first_group) {
                start += 1 + self.desc_blocks + self.reserved_gdt_blocks;
            }
            let end = start + 2 * t + n * self.inode_table_blocks;
            let clash = self.regions.range(start..end).next().map(|(&s, _)| s);
            if end > self.blocks || clash.is_some() {
                return Err(FsError::Config {
                    key: "flex_bg_size",
                    value: flex,
                    expected: "flex groups whose packed tables fit before any superblock copy",
                });
            }
            self.add_region(start, n, MetaKind::BlockBitmap);
            self.add_region(start + t, n, MetaKind::InodeBitmap);
            self.add_region(start + 2 * t, n * self.inode_table_blocks, MetaKind::InodeTable);
            self.table_offsets.push(t);
            self.flex_starts.push(start);
        }
        Ok(())
    }

    /// The journal's region (`get_midpoint_journal_block`, then the first free run from there).
    fn place_journal(&mut self) -> Result<(), FsError> {
        let len = match self.opts.journal_blocks {
            0 => default_journal_blocks(self.blocks),
            n => n,
        };
        if len == 0 {
            return Ok(());
        }
        let flex = self.opts.flex_bg_size;
        let mut group = (self.blocks / 2) / self.opts.blocks_per_group;
        let start_g;
        if flex > 1 && group > flex {
            group &= !(flex - 1);
            while group < self.groups && self.group_free_after_mkfs(group) == 0 {
                group += 1;
            }
            if group == self.groups {
                group = 0;
            }
            start_g = group;
        } else {
            start_g = group.saturating_sub(1);
        }
        let end_g = if group + 1 < self.groups { group + 1 } else { group };
        let mut best = start_g;
        for g in start_g + 1..=end_g {
            if self.group_free_after_mkfs(g) > self.group_free_after_mkfs(best) {
                best = g;
            }
        }
        let goal = self.group_first(best);
        let start = self.first_free_run(goal, len).or_else(|| self.first_free_run(0, len));
        let Some(start) = start else {
            return Err(FsError::Config {
                key: "journal_blocks",
                value: len,
                expected: "a journal that fits in one free run of the filesystem",
            });
        };
        self.journal = PhysExtent { start, len };
        self.add_region(start, len, MetaKind::Journal);
        Ok(())
    }

    /// The start of the first run of `len` blocks free of regions at or after `from`.
    fn first_free_run(&self, from: u64, len: u64) -> Option<u64> {
        let mut at = from;
        if let Some((&s, &(l, _))) = self.regions.range(..=at).next_back() {
            at = at.max(s + l);
        }
        for (&s, &(l, _)) in self.regions.range(at..) {
            if s - at >= len {
                break;
            }
            at = s + l;
        }
        (at + len <= self.blocks).then_some(at)
    }

    /// Blocks of group `g` outside the fixed regions.
    pub fn group_free_after_mkfs(&self, g: u64) -> u64 {
        let (lo, hi) = (self.group_first(g), self.group_end(g));
        hi - lo - self.overlap(lo, hi)
    }

    /// Blocks of `[lo, hi)` inside fixed regions.
    pub fn overlap(&self, lo: u64, hi: u64) -> u64 {
        let mut n = 0;
        if let Some((&s, &(l, _))) = self.regions.range(..lo).next_back() {
            n += (s + l).min(hi).saturating_sub(lo);
        }
        for (&s, &(l, _)) in self.regions.range(lo..hi) {
            n += (s + l).min(hi) - s;
        }
        n
    }

    fn add_region(&mut self, start: u64, len: u64, kind: MetaKind) {
        if len == 0 {
            return;
        }
        if let Some((&s, &mut (ref mut l, k))) = self.regions.range_mut(..start).next_back() {
            if k == kind && s + *l == start {
                *l += len;
                return;
            }
        }
        self.regions.insert(start, (len, kind));
    }

    /// The fixed regions, by start.
    pub fn regions(&self) -> impl Iterator<Item = (PhysExtent, MetaKind)> + '_ {
        self.regions.iter().map(|(&start, &(len, kind))| (PhysExtent { start, len }, kind))
    }

    /// The kind of fixed region holding `block`, if any.
    pub fn region_of(&self, block: u64) -> Option<MetaKind> {
        let (&s, &(l, kind)) = self.regions.range(..=block).next_back()?;
        (block < s + l).then_some(kind)
    }

    pub fn group_first(&self, g: u64) -> u64 {
        g * self.opts.blocks_per_group
    }
    /// One past the last block of group `g`.
    pub fn group_end(&self, g: u64) -> u64 {
        ((g + 1) * self.opts.blocks_per_group).min(self.blocks)
    }
    pub fn group_of(&self, block: u64) -> u64 {
        block / self.opts.blocks_per_group
    }
    pub fn flex_of(&self, g: u64) -> u64 {
        g / self.opts.flex_bg_size
    }

    /// Group `g`'s block bitmap.
    pub fn block_bitmap(&self, g: u64) -> u64 {
        self.flex_starts[self.flex_of(g) as usize] + g % self.opts.flex_bg_size
    }
    /// Group `g`'s inode bitmap.
    pub fn inode_bitmap(&self, g: u64) -> u64 {
        let f = self.flex_of(g) as usize;
        self.flex_starts[f] + self.table_offsets[f] + g % self.opts.flex_bg_size
    }
    /// The first block of group `g`'s inode table.
    pub fn inode_table(&self, g: u64) -> u64 {
        let f = self.flex_of(g) as usize;
        self.flex_starts[f] + 2 * self.table_offsets[f] + (g % self.opts.flex_bg_size) * self.inode_table_blocks
    }
    /// The primary group descriptor block holding group `g`'s descriptor.
    pub fn group_desc_block(&self, g: u64) -> u64 {
        1 + g / DESC_PER_BLOCK
    }
    /// Inodes of the filesystem.
    pub fn inodes(&self) -> u64 {
        self.groups * self.inodes_per_group
    }
    /// Blocks outside the fixed regions after mkfs (before the root directory and lost+found).
    pub fn data_blocks(&self) -> u64 {
        self.blocks - self.overlap(0, self.blocks)
    }
}
