//! Inodes and directories: inode numbers, the group a new inode goes to, and the directory
//! blocks holding entries.
//!
//! # Model
//! Inode `i` (from 1) is in group `(i − 1) / inodes_per_group`, in inode-table block
//! `inode_table(group) + ((i − 1) mod inodes_per_group) / (4096 / inode_size)` (16 inodes a
//! block at 256 bytes); that block is dirtied whenever the inode changes. Inodes 1–10 are
//! reserved (2 is the root directory, 7 the resize inode, 8 the journal); 11, the first
//! ordinary one, is lost+found. A new inode takes the lowest free number of its group
//! (`find_inode_bit`).
//!
//! Which group (`fs/ext4/ialloc.c`, `ext4_new_inode`):
//! - **a directory at the top level** (parent the root; `find_group_orlov`): over the flex
//!   groups from one picked by the name's hash, the flex group with the fewest directories among
//!   those with at least the average free inodes and free blocks; its first group with a free
//!   inode. Top-level directories are thus spread over the disk.
//! - **a deeper directory** (Orlov): the first flex group from the parent's with fewer than
//!   `ndirs / nflex + inodes_per_group × flex / 16` directories, at least `avg free inodes −
//!   inodes_per_group × flex / 4` free inodes (at least 1) and at least `avg free blocks −
//!   blocks_per_group × flex / 4` free blocks: a subdirectory stays near its parent until that
//!   flex group fills up.
//! - **a file** (`find_group_other`): the first group of the parent's flex group with a free
//!   inode; if none, the deeper-directory search.
//! - when a search finds nothing (`fallback`): the first group from the parent's with at least
//!   the average free inodes, then with any.
//!
//! Where a new inode's blocks go (`ext4_inode_to_goal_block`): with flex groups of at least 4,
//! the first block of its flex group's first group for a directory, of the second group for a
//! regular file (directories and data apart).
//!
//! Directories: an entry takes `8 + name_len` bytes rounded up to 4 (`EXT4_DIR_REC_LEN`); a
//! directory block holds 4096 − 12 bytes of entries (the 12-byte checksum tail of
//! `metadata_csum`), the first also `.` and `..` (12 bytes each). A new entry goes into the first
//! block with room (`ext4_add_entry` on a linear directory) or a new block appended to the
//! directory (allocated at once, like any metadata block: `ext4_append`); adding or removing an
//! entry dirties the block holding it. Removed entries' space is reused.
//!
//! # Simplifications
//! No htree (`dir_index`): entries go to the first block with room, where ext4 hashes a
//! directory of more than one block into leaves; directories never shrink. The top-level hash is
//! FNV-1a of the name (Linux: half-MD4 with the filesystem's random seed). No `i_last_alloc_group`
//! (Linux remembers where a parent's last child went); no `OLDALLOC`; without flex groups, files
//! go to the parent's group or the next with a free inode (Linux's quadratic hash probe is not
//! modelled). Inode-table blocks are not lazily initialized (`uninit_bg`).
//!
//! # Source
//! Linux `fs/ext4/ialloc.c` (`find_group_orlov`, `find_group_other`, `get_orlov_stats`,
//! `find_inode_bit`), `fs/ext4/inode.c` (`ext4_inode_to_goal_block`), `fs/ext4/namei.c`
//! (`ext4_add_entry`, `add_dirent_to_buf`), `fs/ext4/ext4.h` (`EXT4_GOOD_OLD_FIRST_INO` 11,
//! `EXT4_FLEX_SIZE_DIR_ALLOC_SCHEME` 4, `EXT4_DIR_REC_LEN`).

use super::alloc::{Allocator, InodePa};
use super::extents::ExtentMap;
use super::layout::{Layout, BLOCK_SIZE};
use super::Ino;
use std::collections::BTreeMap;

/// The root directory's inode.
pub const ROOT: Ino = Ino(2);
/// The resize inode (its double-indirect block maps the reserved GDT blocks).
pub const RESIZE_INO: Ino = Ino(7);
/// The first ordinary inode (lost+found).
pub const FIRST_INO: u32 = 11;
/// Bytes of entries a directory block holds (less the checksum tail).
pub const DIR_BLOCK_BYTES: u64 = BLOCK_SIZE - 12;
/// `.` and `..`.
pub const DOT_BYTES: u64 = 24;

/// An entry's bytes for a name of `name_len` bytes (`EXT4_DIR_REC_LEN`).
pub fn rec_len(name_len: usize) -> u64 {
    (8 + name_len as u64 + 3) & !3
}

/// What an inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    /// A reserved inode with blocks of its own (the resize inode).
    Reserved,
}

/// A directory's blocks: free bytes of each (by logical block), and where each entry is.
#[derive(Clone, Debug, Default)]
pub struct Dir {
    /// Free bytes of each block (change them only through `Dir`'s methods: `chunk_max`
    /// follows them).
    pub free: Vec<u64>,
    /// The most free bytes of any block in each run of [`DIR_CHUNK`] blocks: the first block
    /// with room is found without reading every block's count (a directory of a million
    /// entries has about 4,000 blocks).
    chunk_max: Vec<u64>,
    /// child → (logical block, bytes).
    pub entries: BTreeMap<Ino, (u64, u64)>,
}

/// Blocks per `Dir::chunk_max` entry.
const DIR_CHUNK: usize = 64;

/// An existing inode.
#[derive(Clone, Debug)]
pub struct Inode {
    pub kind: Kind,
    pub parent: Ino,
    pub group: u64,
    /// i_size, bytes.
    pub size: u64,
    pub extents: ExtentMap,
    pub pas: Vec<InodePa>,
    pub dir: Option<Dir>,
}

/// The inode tables' state: existing inodes and each group's counts.
#[derive(Clone, Debug)]
pub struct Inodes {
    pub table: BTreeMap<Ino, Inode>,
    pub free: Vec<u64>,
    pub dirs: Vec<u64>,
    /// Per group, an inode number below which every inode of the group is in use: the search
    /// for the first free one starts there (a full group is not rescanned at every create).
    used_below: Vec<u32>,
}

/// FNV-1a of a name: the top-level directory spread's seed.
pub fn name_hash(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ b as u32).wrapping_mul(0x0100_0193))
}

impl Inodes {
    /// A fresh filesystem's inodes: 1–10 reserved in group 0.
    pub fn new(lay: &Layout) -> Inodes {
        let mut free = vec![lay.inodes_per_group; lay.groups as usize];
        free[0] -= FIRST_INO as u64 - 1;
        let used_below = (0..lay.groups).map(|g| Self::group_first(lay, g)).collect();
        Inodes { table: BTreeMap::new(), free, dirs: vec![0; lay.groups as usize], used_below }
    }

    pub fn group_of(lay: &Layout, ino: Ino) -> u64 {
        (ino.0 as u64 - 1) / lay.inodes_per_group
    }

    /// The inode-table block holding `ino`.
    pub fn table_block(lay: &Layout, ino: Ino) -> u64 {
        let g = Self::group_of(lay, ino);
        let index = (ino.0 as u64 - 1) % lay.inodes_per_group;
        lay.inode_table(g) + index / (BLOCK_SIZE / lay.opts.inode_size)
    }

    /// Where a new inode's blocks go (`ext4_inode_to_goal_block`).
    pub fn goal_block(lay: &Layout, ino: Ino, kind: Kind) -> u64 {
        let mut g = Self::group_of(lay, ino);
        let flex = lay.opts.flex_bg_size;
        if flex >= 4 {
            g &= !(flex - 1);
            if kind == Kind::File {
                g += 1;
            }
        }
        let b = lay.group_first(g);
        if b >= lay.blocks {
            0
        } else {
            b
        }
    }

    /// The lowest free inode number of group `g`.
    pub fn first_free(&self, lay: &Layout, g: u64) -> Option<Ino> {
        if self.free[g as usize] == 0 {
            return None;
        }
        let lo = self.used_below[g as usize].max(Self::group_first(lay, g));
        let hi = ((g + 1) * lay.inodes_per_group) as u32;
        let mut want = lo;
        for (&ino, _) in self.table.range(Ino(lo)..=Ino(hi)) {
            if ino.0 != want {
                break;
            }
            want += 1;
        }
        (want <= hi).then_some(Ino(want))
    }

    /// The first inode a new file or directory of group `g` may take.
    fn group_first(lay: &Layout, g: u64) -> u32 {
        (g * lay.inodes_per_group + 1).max(if g == 0 { FIRST_INO as u64 } else { 0 }) as u32
    }

    /// Inode `ino` of group `g` was taken as its group's first free one.
    pub fn taken(&mut self, g: u64, ino: Ino) {
        self.used_below[g as usize] = ino.0 + 1;
    }

    /// Inode `ino` of group `g` is free again.
    pub fn released(&mut self, g: u64, ino: Ino) {
        let u = &mut self.used_below[g as usize];
        *u = (*u).min(ino.0);
    }

    /// Whether every inode below each group's search start is in use.
    pub fn check_search_starts(&self, lay: &Layout) -> Result<(), String> {
        for (g, &u) in self.used_below.iter().enumerate() {
            let lo = Self::group_first(lay, g as u64);
            if u > lo && self.table.range(Ino(lo)..Ino(u)).count() as u32 != u - lo {
                return Err(format!("group {g}: an inode below {u} is free, but the search starts there"));
            }
        }
        Ok(())
    }

    /// Free inodes, blocks and directories of flex group `f` (`get_orlov_stats`).
    fn flex_stats(&self, lay: &Layout, alloc: &Allocator, f: u64) -> (u64, u64, u64) {
        let flex = lay.opts.flex_bg_size;
        let (mut fi, mut fb, mut d) = (0, 0, 0);
        for g in f * flex..((f + 1) * flex).min(lay.groups) {
            fi += self.free[g as usize];
            fb += alloc.group_free(g);
            d += self.dirs[g as usize];
        }
        (fi, fb, d)
    }

    /// The first group of flex group `f` with a free inode.
    fn in_flex(&self, lay: &Layout, f: u64) -> Option<u64> {
        let flex = lay.opts.flex_bg_size;
        (f * flex..((f + 1) * flex).min(lay.groups)).find(|&g| self.free[g as usize] > 0)
    }

    /// The group for a new directory under `parent` (`find_group_orlov`).
    pub fn orlov(&self, lay: &Layout, alloc: &Allocator, parent_group: u64, top: Option<u32>) -> Option<u64> {
        let flex = lay.opts.flex_bg_size;
        let nflex = lay.groups.div_ceil(flex);
        let freei: u64 = self.free.iter().sum();
        let freeb = alloc.free_blocks();
        let (avefreei, avefreeb) = (freei / nflex, freeb / nflex);
        let ndirs: u64 = self.dirs.iter().sum();
        let ipg = lay.inodes_per_group;
        if let Some(hash) = top {
            let start = hash as u64 % nflex;
            let mut best: Option<(u64, u64)> = None;
            for i in 0..nflex {
                let f = (start + i) % nflex;
                let (fi, fb, d) = self.flex_stats(lay, alloc, f);
                if fi == 0 || d >= best.map_or(ipg, |b| b.1) || fi < avefreei || fb < avefreeb {
                    continue;
                }
                best = Some((f, d));
            }
            if let Some(g) = best.and_then(|(f, _)| self.in_flex(lay, f)) {
                return Some(g);
            }
        } else {
            let max_dirs = ndirs / nflex + ipg * flex / 16;
            let min_inodes = (avefreei as i64 - (ipg * flex / 4) as i64).max(1);
            let min_blocks = avefreeb as i64 - (lay.opts.blocks_per_group * flex / 4) as i64;
            let pf = parent_group / flex;
            for i in 0..nflex {
                let f = (pf + i) % nflex;
                let (fi, fb, d) = self.flex_stats(lay, alloc, f);
                if d >= max_dirs || (fi as i64) < min_inodes || (fb as i64) < min_blocks {
                    continue;
                }
                if let Some(g) = self.in_flex(lay, f) {
                    return Some(g);
                }
            }
        }
        self.fallback(lay, parent_group)
    }

    /// Orlov's fallback: from the parent's group, a group with the average free inodes, then any.
    fn fallback(&self, lay: &Layout, parent_group: u64) -> Option<u64> {
        let avefreei = self.free.iter().sum::<u64>() / lay.groups;
        for floor in [avefreei.max(1), 1] {
            for i in 0..lay.groups {
                let g = (parent_group + i) % lay.groups;
                if self.free[g as usize] >= floor {
                    return Some(g);
                }
            }
        }
        None
    }

    /// The group for a new file under `parent` (`find_group_other`).
    pub fn other(&self, lay: &Layout, alloc: &Allocator, parent_group: u64) -> Option<u64> {
        let flex = lay.opts.flex_bg_size;
        if flex > 1 {
            return self.in_flex(lay, parent_group / flex).or_else(|| self.orlov(lay, alloc, parent_group, None));
        }
        (0..lay.groups).map(|i| (parent_group + i) % lay.groups).find(|&g| self.free[g as usize] > 0)
    }
}

impl Dir {
    /// A directory's first block: `.`, `..` and nothing else.
    pub fn new() -> Dir {
        let first = DIR_BLOCK_BYTES - DOT_BYTES;
        Dir { free: vec![first], chunk_max: vec![first], entries: BTreeMap::new() }
    }

    /// The first block with room for `bytes`; `None` when a block must be appended.
    pub fn block_with_room(&self, bytes: u64) -> Option<u64> {
        let chunk = self.chunk_max.iter().position(|&m| m >= bytes)?;
        let start = chunk * DIR_CHUNK;
        let end = (start + DIR_CHUNK).min(self.free.len());
        let i = self.free[start..end].iter().position(|&f| f >= bytes).expect("the chunk's most free block");
        Some((start + i) as u64)
    }

    /// The directory grows to `blocks` blocks, the new ones empty.
    pub fn grow_to(&mut self, blocks: u64) {
        while (self.free.len() as u64) < blocks {
            self.free.push(DIR_BLOCK_BYTES);
            self.update_chunk(self.free.len() - 1);
        }
    }

    fn update_chunk(&mut self, block: usize) {
        let c = block / DIR_CHUNK;
        let start = c * DIR_CHUNK;
        let m = self.free[start..(start + DIR_CHUNK).min(self.free.len())].iter().copied().max().unwrap_or(0);
        if c == self.chunk_max.len() {
            self.chunk_max.push(m);
        } else {
            self.chunk_max[c] = m;
        }
    }

    /// Whether `chunk_max` agrees with the blocks' counts.
    pub fn check(&self) -> Result<(), String> {
        let want: Vec<u64> = self.free.chunks(DIR_CHUNK).map(|c| c.iter().copied().max().unwrap_or(0)).collect();
        if want != self.chunk_max {
            return Err(format!("directory chunk maxima {:?}, blocks say {want:?}", self.chunk_max));
        }
        Ok(())
    }

    /// Places `child`'s entry of `bytes` in block `block` (appended when it is one past the end).
    pub fn add(&mut self, child: Ino, block: u64, bytes: u64) {
        if block as usize == self.free.len() {
            self.grow_to(block + 1);
        }
        let f = &mut self.free[block as usize];
        assert!(*f >= bytes, "directory block {block} has {f} bytes free, not {bytes}");
        *f -= bytes;
        self.update_chunk(block as usize);
        let old = self.entries.insert(child, (block, bytes));
        assert!(old.is_none(), "{child:?} already has an entry");
    }

    /// Removes `child`'s entry; returns the block that held it.
    pub fn remove(&mut self, child: Ino) -> Option<u64> {
        let (block, bytes) = self.entries.remove(&child)?;
        self.free[block as usize] += bytes;
        self.update_chunk(block as usize);
        Some(block)
    }
}
