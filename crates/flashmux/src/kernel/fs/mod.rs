//! The filesystem's space management: an ext4-like on-disk layout and block allocator — which
//! blocks a file's data and the filesystem's metadata live in, and which metadata blocks each
//! operation dirties. A mechanism with no I/O of its own: the journal, the page cache and the
//! device requests are the caller's.
//!
//! # Model
//! [`Fs::mkfs`] lays a filesystem out as mke2fs does with its defaults (`layout.rs`: 4 KiB
//! blocks, 32768-block groups, 8192 inodes of 256 bytes a group, flex_bg 16, sparse superblock
//! copies, reserved GDT blocks, the journal's region by size and placement) and creates the
//! root directory (inode 2, one block) and lost+found (inode 11, four blocks).
//!
//! The caller then drives it as the kernel would:
//! - [`Fs::create`], [`Fs::mkdir`]: a new inode in the group `inode.rs` chooses (Orlov for
//!   directories, the parent's flex group for files), its entry in the parent's directory;
//! - [`Fs::set_size`]: i_size as buffered writes extend the file (delayed allocation: no block
//!   yet; mballoc sizes its requests by it);
//! - [`Fs::allocate`]: at writeback, logical blocks `L..L+n` of a file get physical blocks
//!   (`alloc.rs`: preallocations, locality groups, normalized requests) and enter its extent map
//!   (`extents.rs`); blocks already mapped keep theirs (an overwrite);
//! - [`Fs::map`]: logical → physical for reads, holes included;
//! - [`Fs::truncate`], [`Fs::unlink`], [`Fs::rmdir`]: blocks back to free space, returned as
//!   sorted, merged extents — what `-o discard` would trim at the commit;
//! - [`Fs::release`]: the last close of a file written: its preallocations are released.
//!
//! Every mutating call returns a [`Change`]: the blocks allocated and freed and the set of
//! metadata blocks it dirtied (block bitmaps, inode bitmaps, inode-table blocks, group
//! descriptors, directory blocks, extent-tree blocks, the superblock), sorted by block — what a
//! journal would log for it.
//!
//! What dirties what (ext4's `ext4_mark_inode_dirty`, `ext4_handle_dirty_metadata` calls):
//! - a block allocated or freed: its group's block bitmap and the descriptor block holding the
//!   group's descriptor (free count); a preallocation taken or released changes neither (its
//!   blocks are marked on disk only when used);
//! - an inode allocated or freed: its group's inode bitmap and descriptor (free inodes, used
//!   directories), its inode-table block;
//! - a file's blocks mapped or unmapped: its inode-table block (i_blocks, i_disksize, the inline
//!   extents) and the extent-tree leaf holding the changed extent;
//! - an entry added or removed: the directory block holding it (and the directory's
//!   inode-table block: mtime);
//! - a truncate or delete: the superblock too (the orphan list's head, `s_last_orphan`).
//!
//! # Simplifications
//! Each file's own: see the headers of `layout.rs`, `alloc.rs`, `extents.rs` and `inode.rs`.
//! Overall: one mounted filesystem, no quotas, extended attributes, hard links, symlinks,
//! inline data, bigalloc, encryption or fast commits; names are not looked up (the caller keeps
//! its namespace; a name only sizes its entry and, for a top-level directory, seeds its group
//! choice); times and the orphan list are not modelled beyond the blocks they dirty.
//!
//! # Memory
//! Free space is two maps of free runs (not per-block bitmaps): a fresh filesystem of any size
//! is a few runs a group. Per group: four counters. Per locality group (a CPU the caller names,
//! below 8192): at most 8 preallocations. Per existing inode: its extents, its
//! preallocations, and for a directory its blocks' free bytes and its entries.
//!
//! # Source
//! Linux `fs/ext4/` (`mballoc.c`, `ialloc.c`, `extents.c`, `namei.c`, `inode.c`), e2fsprogs
//! `misc/mke2fs.c`, `misc/mke2fs.conf.in`, `lib/ext2fs/` (`initialize.c`, `alloc_tables.c`,
//! `mkjournal.c`); the ext4 disk layout (`Documentation/filesystems/ext4/`).

pub mod alloc;
pub mod extents;
pub mod inode;
pub mod layout;
mod ops;

#[cfg(test)]
mod tests;

pub use alloc::AllocCounts;
pub use layout::{FsOptions, Layout, BLOCK_SIZE};
pub use ops::Fs;

use serde::Serialize;
use std::collections::BTreeSet;

/// An inode number (1-based; 2 is the root directory).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize)]
pub struct Ino(pub u32);

/// Contiguous physical blocks: `len` blocks from block `start`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize)]
pub struct PhysExtent {
    pub start: u64,
    pub len: u64,
}

impl PhysExtent {
    /// The block one past the extent.
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// `len` logical blocks of a file from `logical`: at `physical` onward, or a hole (`None`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize)]
pub struct Mapping {
    pub logical: u64,
    pub physical: Option<u64>,
    pub len: u64,
}

/// What a metadata block holds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize)]
pub enum MetaKind {
    Superblock,
    GroupDesc,
    /// Reserved GDT blocks (for online growth): fixed, never dirtied here.
    ReservedGdt,
    BlockBitmap,
    InodeBitmap,
    InodeTable,
    Journal,
    Directory,
    ExtentTree,
}

/// A metadata block an operation dirtied; ordered by block.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize)]
pub struct MetaBlock {
    pub block: u64,
    pub kind: MetaKind,
}

/// What a mutating call did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Change {
    /// For [`Fs::allocate`]: the request's blocks, logical → physical, in logical order
    /// (blocks already mapped included).
    pub mapped: Vec<Mapping>,
    /// Blocks newly in use (data, directory and extent-tree blocks), sorted and merged.
    pub allocated: Vec<PhysExtent>,
    /// Blocks returned to free space, sorted and merged (the discard candidates).
    pub freed: Vec<PhysExtent>,
    /// Metadata blocks dirtied, sorted by block.
    pub dirtied: BTreeSet<MetaBlock>,
    /// Preallocated blocks released unused (never written: nothing to discard).
    pub released: u64,
}

impl Change {
    pub(crate) fn dirty(&mut self, block: u64, kind: MetaKind) {
        self.dirtied.insert(MetaBlock { block, kind });
    }

    /// Sorts and merges `allocated` and `freed`.
    fn finish(mut self) -> Change {
        self.allocated = merge(std::mem::take(&mut self.allocated));
        self.freed = merge(std::mem::take(&mut self.freed));
        self
    }
}

/// Sorted, with touching extents merged.
pub fn merge(mut v: Vec<PhysExtent>) -> Vec<PhysExtent> {
    v.sort();
    let mut out: Vec<PhysExtent> = Vec::with_capacity(v.len());
    for e in v {
        match out.last_mut() {
            Some(last) if last.end() >= e.start => {
                assert!(last.end() == e.start, "extents {last:?} and {e:?} overlap");
                last.len += e.len;
            }
            _ => out.push(e),
        }
    }
    out
}

/// Counts of metadata blocks dirtied, by kind (summed over calls).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DirtyCounts {
    pub superblock: u64,
    pub group_desc: u64,
    pub block_bitmap: u64,
    pub inode_bitmap: u64,
    pub inode_table: u64,
    pub directory: u64,
    pub extent_tree: u64,
}

impl DirtyCounts {
    fn add(&mut self, kind: MetaKind) {
        match kind {
            MetaKind::Superblock => self.superblock += 1,
            MetaKind::GroupDesc => self.group_desc += 1,
            MetaKind::BlockBitmap => self.block_bitmap += 1,
            MetaKind::InodeBitmap => self.inode_bitmap += 1,
            MetaKind::InodeTable => self.inode_table += 1,
            MetaKind::Directory => self.directory += 1,
            MetaKind::ExtentTree => self.extent_tree += 1,
            MetaKind::ReservedGdt | MetaKind::Journal => {}
        }
    }
}

/// The filesystem's statistics.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FsStats {
    pub files: u64,
    pub directories: u64,
    pub free_blocks: u64,
    pub free_inodes: u64,
    /// Blocks allocated and freed by calls since mkfs.
    pub blocks_allocated: u64,
    pub blocks_freed: u64,
    pub extents_per_file_mean: f64,
    pub extents_per_file_max: u64,
    pub alloc: AllocCounts,
    pub dirtied: DirtyCounts,
}

/// A call the filesystem refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    #[error("kernel.fs.{key}: {value}: expected {expected}")]
    Config { key: &'static str, value: u64, expected: &'static str },
    #[error("inode {0:?} does not exist")]
    NoInode(Ino),
    #[error("inode {ino:?} is not a {expected}")]
    WrongType { ino: Ino, expected: &'static str },
    #[error("directory {0:?} is not empty")]
    NotEmpty(Ino),
    #[error("name of {len} bytes: expected 1 to 255 bytes")]
    BadName { len: usize },
    #[error("{op} of {len} blocks at logical block {logical}: expected at least one block, ending at most 2^32")]
    BadRange { op: &'static str, logical: u64, len: u64 },
    #[error("cpu {0}: expected a locality group below 8192")]
    BadCpu(u32),
    #[error("no free blocks")]
    NoSpace,
    #[error("no free inodes")]
    NoInodes,
    #[error("inode {0:?} is reserved")]
    Reserved(Ino),
}
