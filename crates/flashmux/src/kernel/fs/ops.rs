//! The filesystem's calls: mkfs, inodes and directories created and removed, data blocks
//! allocated at writeback, mapped for reads, freed by truncate and delete — each returning the
//! [`Change`] it made. The rules are in the headers of `mod.rs`, `alloc.rs`, `extents.rs`,
//! `inode.rs` and `layout.rs`.

use super::alloc::{Allocator, DataRequest};
use super::extents::{tree_blocks, PER_TREE_BLOCK};
use super::inode::{self, Dir, Inode, Inodes, Kind, FIRST_INO, RESIZE_INO, ROOT};
use super::layout::{FsOptions, Layout, BLOCK_SIZE};
use super::{Change, DirtyCounts, FsError, FsStats, Ino, Mapping, MetaKind, PhysExtent};

/// The largest logical block + 1 (`EXT_MAX_BLOCKS`, 2^32).
const MAX_LOGICAL: u64 = 1 << 32;
/// Locality groups a caller may name (one per CPU; Linux's `NR_CPUS` is at most 8192).
pub const MAX_CPUS: u32 = 8192;

/// An ext4-like filesystem's space management.
#[derive(Clone, Debug)]
pub struct Fs {
    lay: Layout,
    alloc: Allocator,
    inodes: Inodes,
    blocks_allocated: u64,
    blocks_freed: u64,
    dirtied: DirtyCounts,
}

impl Fs {
    /// Makes a filesystem on `device_bytes` (mke2fs): the layout, the root directory (one
    /// block), lost+found (inode 11, four blocks, an entry of the root), the resize inode's
    /// block — in mke2fs's order, each from the first free block of group 0.
    pub fn mkfs(device_bytes: u64, opts: FsOptions) -> Result<Fs, FsError> {
        let lay = Layout::mkfs(device_bytes, opts)?;
        let alloc = Allocator::new(&lay);
        let inodes = Inodes::new(&lay);
        let mut fs = Fs { lay, alloc, inodes, blocks_allocated: 0, blocks_freed: 0, dirtied: DirtyCounts::default() };
        let mut ch = Change::default();
        fs.new_inode(ROOT, Kind::Dir, ROOT, 0, &mut ch)?;
        let lpf = Ino(FIRST_INO);
        fs.new_inode(lpf, Kind::Dir, ROOT, 0, &mut ch)?;
        fs.add_entry(ROOT, lpf, "lost+found".len(), &mut ch)?;
        for _ in 1..4 {
            fs.append_block(lpf, &mut ch)?;
        }
        if fs.lay.reserved_gdt_blocks > 0 {
            fs.new_inode(RESIZE_INO, Kind::Reserved, ROOT, 0, &mut ch)?;
            fs.append_block(RESIZE_INO, &mut ch)?;
        }
        Ok(fs)
    }

    pub fn layout(&self) -> &Layout {
        &self.lay
    }
    /// The journal's fixed region.
    pub fn journal(&self) -> PhysExtent {
        self.lay.journal
    }
    pub fn root(&self) -> Ino {
        ROOT
    }
    /// Free blocks on disk.
    pub fn free_blocks(&self) -> u64 {
        self.alloc.free_blocks()
    }
    /// Whether `block` is free on disk.
    pub fn is_free(&self, block: u64) -> bool {
        self.alloc.disk.contains(block, 1)
    }
    /// i_size of `ino`, bytes.
    pub fn size(&self, ino: Ino) -> Result<u64, FsError> {
        Ok(self.get(ino)?.size)
    }
    /// The extents of `ino`, in logical order.
    pub fn extents(&self, ino: Ino) -> Result<Vec<Mapping>, FsError> {
        Ok(self.get(ino)?.extents.iter().collect())
    }
    /// The group of `ino`.
    /// The inode-table block holding `ino` (dirtied whenever the inode changes).
    pub fn inode_block(&self, ino: Ino) -> u64 {
        Inodes::table_block(&self.lay, ino)
    }

    pub fn group_of(&self, ino: Ino) -> u64 {
        Inodes::group_of(&self.lay, ino)
    }

    fn get(&self, ino: Ino) -> Result<&Inode, FsError> {
        self.inodes.table.get(&ino).ok_or(FsError::NoInode(ino))
    }
    fn get_mut(&mut self, ino: Ino) -> Result<&mut Inode, FsError> {
        self.inodes.table.get_mut(&ino).ok_or(FsError::NoInode(ino))
    }
    fn expect(&self, ino: Ino, kind: Kind) -> Result<&Inode, FsError> {
        let i = self.get(ino)?;
        if i.kind != kind {
            let expected = if kind == Kind::Dir { "directory" } else { "regular file" };
            return Err(FsError::WrongType { ino, expected });
        }
        Ok(i)
    }

    /// Adds a finished call's change to the statistics.
    fn account(&mut self, ch: Change) -> Change {
        let ch = ch.finish();
        self.blocks_allocated += ch.allocated.iter().map(|e| e.len).sum::<u64>();
        self.blocks_freed += ch.freed.iter().map(|e| e.len).sum::<u64>();
        for m in &ch.dirtied {
            self.dirtied.add(m.kind);
        }
        ch
    }

    /// Takes inode `ino` in group `g`; a directory gets its first block.
    fn new_inode(&mut self, ino: Ino, kind: Kind, parent: Ino, g: u64, ch: &mut Change) -> Result<(), FsError> {
        if ino.0 >= FIRST_INO {
            self.inodes.free[g as usize] -= 1;
            ch.dirty(self.lay.inode_bitmap(g), MetaKind::InodeBitmap);
        }
        if kind == Kind::Dir {
            self.inodes.dirs[g as usize] += 1;
        }
        ch.dirty(self.lay.group_desc_block(g), MetaKind::GroupDesc);
        ch.dirty(Inodes::table_block(&self.lay, ino), MetaKind::InodeTable);
        let dir = (kind == Kind::Dir).then(Dir::new);
        let node = Inode { kind, parent, group: g, size: 0, extents: Default::default(), pas: Vec::new(), dir };
        self.inodes.table.insert(ino, node);
        if kind == Kind::Dir {
            self.append_block(ino, ch)?;
        }
        Ok(())
    }

    /// Appends one block to a directory (or reserved inode), allocated at once.
    fn append_block(&mut self, ino: Ino, ch: &mut Change) -> Result<u64, FsError> {
        let node = self.get(ino)?;
        let logical = node.extents.mapped_blocks();
        let goal = node.extents.goal(logical).unwrap_or_else(|| Inodes::goal_block(&self.lay, ino, node.kind));
        let block = self.meta_block(goal, ch)?;
        let node = self.get_mut(ino)?;
        let changed = node.extents.insert(logical, block, 1);
        if let Some(d) = node.dir.as_mut() {
            d.grow_to(logical + 1);
            ch.dirty(block, MetaKind::Directory);
        }
        node.size = (logical + 1) * BLOCK_SIZE;
        self.fix_tree(ino, &changed, ch)?;
        Ok(block)
    }

    /// Releases every preallocation (`ext4_mb_discard_preallocations`, as mballoc does before
    /// failing with ENOSPC).
    fn reclaim(&mut self, ch: &mut Change) {
        for node in self.inodes.table.values_mut() {
            ch.released += self.alloc.discard_inode_pas(&self.lay, &mut node.pas);
        }
        ch.released += self.alloc.discard_group_pas(&self.lay);
    }

    /// One metadata block near `goal`, preallocations released first when nothing else is free.
    fn meta_block(&mut self, goal: u64, ch: &mut Change) -> Result<u64, FsError> {
        match self.alloc.alloc_meta(&self.lay, goal, ch) {
            Err(FsError::NoSpace) => {
                self.reclaim(ch);
                self.alloc.alloc_meta(&self.lay, goal, ch)
            }
            r => r,
        }
    }

    /// Grows or shrinks `ino`'s extent tree to its extent count and dirties the leaves holding
    /// the extents starting at `changed`, and the inode.
    fn fix_tree(&mut self, ino: Ino, changed: &[u64], ch: &mut Change) -> Result<(), FsError> {
        ch.dirty(Inodes::table_block(&self.lay, ino), MetaKind::InodeTable);
        let node = self.get(ino)?;
        let need = tree_blocks(node.extents.len()) as usize;
        let have = node.extents.tree.len();
        let leaves = |n: u64| if n > 4 { n.div_ceil(PER_TREE_BLOCK) as usize } else { 0 };
        let goal = changed.last().and_then(|&l| node.extents.goal(l)).unwrap_or(0);
        if need > have {
            for _ in have..need {
                let b = self.meta_block(goal, ch)?;
                self.get_mut(ino)?.extents.tree.push(b);
            }
        } else {
            for _ in need..have {
                let b = self.get_mut(ino)?.extents.tree.pop().expect("a tree block");
                self.alloc.free(&self.lay, b, 1, ch);
            }
        }
        let node = self.get(ino)?;
        let n_leaves = leaves(node.extents.len());
        if need != have {
            for &b in &node.extents.tree {
                ch.dirty(b, MetaKind::ExtentTree);
            }
        } else if n_leaves > 0 {
            for &l in changed {
                let leaf = ((node.extents.rank(l) / PER_TREE_BLOCK) as usize).min(n_leaves - 1);
                ch.dirty(node.extents.tree[leaf], MetaKind::ExtentTree);
            }
        }
        Ok(())
    }

    /// Adds `child`'s entry to directory `dir`, appending a block when none has room.
    fn add_entry(&mut self, dir: Ino, child: Ino, name_len: usize, ch: &mut Change) -> Result<(), FsError> {
        let bytes = inode::rec_len(name_len);
        let d = self.expect(dir, Kind::Dir)?.dir.as_ref().expect("a directory's entries");
        let block = match d.block_with_room(bytes) {
            Some(b) => b,
            None => {
                self.append_block(dir, ch)?;
                self.get(dir)?.extents.mapped_blocks() - 1
            }
        };
        let node = self.get_mut(dir)?;
        node.dir.as_mut().expect("a directory's entries").add(child, block, bytes);
        let phys = node.extents.extent_at(block).and_then(|m| m.physical.map(|p| p + block - m.logical));
        ch.dirty(phys.expect("a directory block is mapped"), MetaKind::Directory);
        ch.dirty(Inodes::table_block(&self.lay, dir), MetaKind::InodeTable);
        Ok(())
    }

    /// Creates a regular file named `name` in `parent`.
    pub fn create(&mut self, parent: Ino, name: &str) -> Result<(Ino, Change), FsError> {
        self.create_inode(parent, name, Kind::File)
    }

    /// Creates a directory named `name` in `parent`.
    pub fn mkdir(&mut self, parent: Ino, name: &str) -> Result<(Ino, Change), FsError> {
        self.create_inode(parent, name, Kind::Dir)
    }

    fn create_inode(&mut self, parent: Ino, name: &str, kind: Kind) -> Result<(Ino, Change), FsError> {
        if name.is_empty() || name.len() > 255 {
            return Err(FsError::BadName { len: name.len() });
        }
        let pg = self.expect(parent, Kind::Dir)?.group;
        let g = match kind {
            Kind::Dir => {
                let top = (parent == ROOT).then(|| inode::name_hash(name));
                self.inodes.orlov(&self.lay, &self.alloc, pg, top)
            }
            _ => self.inodes.other(&self.lay, &self.alloc, pg),
        };
        let g = g.ok_or(FsError::NoInodes)?;
        let ino = self.inodes.first_free(&self.lay, g).ok_or(FsError::NoInodes)?;
        if kind == Kind::Dir && self.alloc.free_blocks() == 0 {
            return Err(FsError::NoSpace);
        }
        let mut ch = Change::default();
        self.new_inode(ino, kind, parent, g, &mut ch)?;
        // Only once it is in the table: a create that fails before leaves the search start.
        self.inodes.taken(g, ino);
        if let Err(e) = self.add_entry(parent, ino, name.len(), &mut ch) {
            // Out of space for the parent's new block: undo the inode.
            let mut undo = Change::default();
            self.unmap_from(ino, 0, &mut undo)?;
            self.free_inode(ino, &mut undo)?;
            return Err(e);
        }
        Ok((ino, self.account(ch)))
    }

    /// Sets i_size of file `ino` as writes extend (or a caller shrinks) it; no block changes.
    pub fn set_size(&mut self, ino: Ino, bytes: u64) -> Result<(), FsError> {
        self.expect(ino, Kind::File)?;
        if bytes.div_ceil(BLOCK_SIZE) > MAX_LOGICAL {
            return Err(FsError::BadRange { op: "set_size", logical: 0, len: bytes.div_ceil(BLOCK_SIZE) });
        }
        self.get_mut(ino)?.size = bytes;
        Ok(())
    }

    fn check_range(op: &'static str, logical: u64, len: u64) -> Result<(), FsError> {
        if len == 0 || logical.checked_add(len).is_none_or(|e| e > MAX_LOGICAL) {
            return Err(FsError::BadRange { op, logical, len });
        }
        Ok(())
    }

    /// Gives logical blocks `logical..logical+len` of file `ino` physical blocks (writeback of
    /// delayed-allocation pages, on `cpu`'s locality group); mapped blocks keep theirs.
    pub fn allocate(&mut self, ino: Ino, logical: u64, len: u64, cpu: u32) -> Result<Change, FsError> {
        Self::check_range("allocate", logical, len)?;
        if cpu >= MAX_CPUS {
            return Err(FsError::BadCpu(cpu));
        }
        let node = self.expect(ino, Kind::File)?;
        let holes: Vec<Mapping> =
            node.extents.map_range(logical, len).into_iter().filter(|m| m.physical.is_none()).collect();
        let inode_goal = Inodes::goal_block(&self.lay, ino, Kind::File);
        let hole_blocks: u64 = holes.iter().map(|h| h.len).sum();
        let need =
            hole_blocks + tree_blocks(node.extents.len() + hole_blocks).saturating_sub(node.extents.tree.len() as u64);
        if need > self.alloc.free_blocks() {
            return Err(FsError::NoSpace);
        }
        let mut ch = Change::default();
        for hole in holes {
            let mut at = hole.logical;
            while at < hole.logical + hole.len {
                let node = self.get_mut(ino)?;
                let req = DataRequest {
                    logical: at,
                    len: hole.logical + hole.len - at,
                    isize: node.size.div_ceil(BLOCK_SIZE),
                    cpu,
                    goal: node.extents.goal(at).unwrap_or(inode_goal),
                    left: node.extents.left_of(at).map(|m| (m.logical + m.len, m.physical.unwrap() + m.len)),
                    right: node.extents.right_of(at).map(|m| (m.logical, m.physical.unwrap())),
                };
                let (phys, n) = self.data_blocks(ino, &req, &mut ch)?;
                let node = self.get_mut(ino)?;
                let changed = node.extents.insert(at, phys, n);
                self.fix_tree(ino, &changed, &mut ch)?;
                at += n;
            }
        }
        ch.dirty(Inodes::table_block(&self.lay, ino), MetaKind::InodeTable);
        ch.mapped = self.get(ino)?.extents.map_range(logical, len);
        Ok(self.account(ch))
    }

    /// The first blocks of a data request, preallocations released first when nothing else is
    /// free.
    fn data_blocks(&mut self, ino: Ino, req: &DataRequest, ch: &mut Change) -> Result<(u64, u64), FsError> {
        for attempt in 0..2 {
            let mut pas = std::mem::take(&mut self.get_mut(ino)?.pas);
            let got = self.alloc.alloc_data(&self.lay, req, &mut pas, ch);
            self.get_mut(ino)?.pas = pas;
            match got {
                Err(FsError::NoSpace) if attempt == 0 => self.reclaim(ch),
                r => return r,
            }
        }
        Err(FsError::NoSpace)
    }

    /// Logical blocks `logical..logical+len` of `ino` as mapped runs and holes.
    pub fn map(&self, ino: Ino, logical: u64, len: u64) -> Result<Vec<Mapping>, FsError> {
        let mut out = Vec::new();
        self.map_into(ino, logical, len, &mut out)?;
        Ok(out)
    }

    /// [`Fs::map`] into `out` (cleared first).
    pub fn map_into(&self, ino: Ino, logical: u64, len: u64, out: &mut Vec<Mapping>) -> Result<(), FsError> {
        Self::check_range("map", logical, len)?;
        self.get(ino)?.extents.map_range_into(logical, len, out);
        Ok(())
    }

    /// The last close of a file written: its preallocations are released.
    pub fn release(&mut self, ino: Ino) -> Result<Change, FsError> {
        self.expect(ino, Kind::File)?;
        let mut ch = Change::default();
        self.discard_pas(ino, &mut ch)?;
        Ok(self.account(ch))
    }

    fn discard_pas(&mut self, ino: Ino, ch: &mut Change) -> Result<(), FsError> {
        let node = self.get_mut(ino)?;
        let mut pas = std::mem::take(&mut node.pas);
        ch.released += self.alloc.discard_inode_pas(&self.lay, &mut pas);
        Ok(())
    }

    /// Cuts file `ino` to `bytes`: the blocks past its new end are freed.
    pub fn truncate(&mut self, ino: Ino, bytes: u64) -> Result<Change, FsError> {
        let old = self.expect(ino, Kind::File)?.size;
        let keep = bytes.div_ceil(BLOCK_SIZE);
        if keep > MAX_LOGICAL {
            return Err(FsError::BadRange { op: "truncate", logical: keep, len: 0 });
        }
        let mut ch = Change::default();
        self.discard_pas(ino, &mut ch)?;
        self.unmap_from(ino, keep, &mut ch)?;
        self.get_mut(ino)?.size = bytes;
        if bytes < old {
            ch.dirty(0, MetaKind::Superblock);
        }
        ch.dirty(Inodes::table_block(&self.lay, ino), MetaKind::InodeTable);
        Ok(self.account(ch))
    }

    /// Frees `ino`'s blocks from logical block `keep` on.
    fn unmap_from(&mut self, ino: Ino, keep: u64, ch: &mut Change) -> Result<(), FsError> {
        let node = self.get_mut(ino)?;
        let runs = node.extents.truncate(keep);
        let last = node.extents.left_of(keep.saturating_sub(1)).map(|m| m.logical);
        for r in runs {
            self.alloc.free(&self.lay, r.start, r.len, ch);
        }
        self.fix_tree(ino, &last.into_iter().collect::<Vec<_>>(), ch)
    }

    /// Releases `ino` after its blocks are gone: the parent's entry, the inode.
    fn free_inode(&mut self, ino: Ino, ch: &mut Change) -> Result<(), FsError> {
        let node = self.inodes.table.remove(&ino).ok_or(FsError::NoInode(ino))?;
        let g = node.group;
        self.inodes.released(g, ino);
        self.inodes.free[g as usize] += 1;
        if node.kind == Kind::Dir {
            self.inodes.dirs[g as usize] -= 1;
        }
        ch.dirty(self.lay.inode_bitmap(g), MetaKind::InodeBitmap);
        ch.dirty(self.lay.group_desc_block(g), MetaKind::GroupDesc);
        ch.dirty(Inodes::table_block(&self.lay, ino), MetaKind::InodeTable);
        let parent = self.get_mut(node.parent)?;
        if let Some(block) = parent.dir.as_mut().and_then(|d| d.remove(ino)) {
            let m = parent.extents.extent_at(block).expect("a directory block is mapped");
            ch.dirty(m.physical.unwrap() + block - m.logical, MetaKind::Directory);
            ch.dirty(Inodes::table_block(&self.lay, node.parent), MetaKind::InodeTable);
        }
        Ok(())
    }

    /// Deletes file `ino` (its last link): its blocks, its entry, its inode.
    pub fn unlink(&mut self, ino: Ino) -> Result<Change, FsError> {
        self.expect(ino, Kind::File)?;
        let mut ch = Change::default();
        self.discard_pas(ino, &mut ch)?;
        self.unmap_from(ino, 0, &mut ch)?;
        self.free_inode(ino, &mut ch)?;
        ch.dirty(0, MetaKind::Superblock);
        Ok(self.account(ch))
    }

    /// Removes empty directory `ino`.
    pub fn rmdir(&mut self, ino: Ino) -> Result<Change, FsError> {
        let node = self.expect(ino, Kind::Dir)?;
        if ino == ROOT {
            return Err(FsError::Reserved(ino));
        }
        if !node.dir.as_ref().is_some_and(|d| d.entries.is_empty()) {
            return Err(FsError::NotEmpty(ino));
        }
        let mut ch = Change::default();
        self.unmap_from(ino, 0, &mut ch)?;
        self.free_inode(ino, &mut ch)?;
        ch.dirty(0, MetaKind::Superblock);
        Ok(self.account(ch))
    }

    /// The statistics so far.
    pub fn stats(&self) -> FsStats {
        let files: Vec<&Inode> = self.inodes.table.values().filter(|i| i.kind == Kind::File).collect();
        let extents: u64 = files.iter().map(|i| i.extents.len()).sum();
        FsStats {
            files: files.len() as u64,
            directories: self.inodes.dirs.iter().sum(),
            free_blocks: self.alloc.free_blocks(),
            free_inodes: self.inodes.free.iter().sum(),
            blocks_allocated: self.blocks_allocated,
            blocks_freed: self.blocks_freed,
            extents_per_file_mean: if files.is_empty() { 0.0 } else { extents as f64 / files.len() as f64 },
            extents_per_file_max: files.iter().map(|i| i.extents.len()).max().unwrap_or(0),
            alloc: self.alloc.counts,
            dirtied: self.dirtied,
        }
    }

    /// Checks every rule the state must keep: free space against the tables and the files, no
    /// block owned twice or inside a fixed region, counts against the maps, directory entries.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.alloc.check(&self.lay, self.inodes.table.values().flat_map(|i| i.pas.iter()))?;
        self.inodes.check_search_starts(&self.lay)?;
        let mut owned: Vec<(PhysExtent, Ino)> = Vec::new();
        for (&ino, node) in &self.inodes.table {
            node.extents.check().map_err(|e| format!("{ino:?}: {e}"))?;
            owned.extend(node.extents.iter().map(|m| (PhysExtent { start: m.physical.unwrap(), len: m.len }, ino)));
            owned.extend(node.extents.tree.iter().map(|&b| (PhysExtent { start: b, len: 1 }, ino)));
            if let Some(d) = &node.dir {
                d.check().map_err(|e| format!("{ino:?}: {e}"))?;
                if d.free.len() as u64 != node.extents.mapped_blocks() {
                    return Err(format!(
                        "{ino:?}: {} entry blocks, {} mapped",
                        d.free.len(),
                        node.extents.mapped_blocks()
                    ));
                }
                for child in d.entries.keys() {
                    if self.inodes.table.get(child).is_none_or(|c| c.parent != ino) {
                        return Err(format!("{ino:?} has an entry for {child:?}, not its child"));
                    }
                }
            }
            if node.kind != Kind::Reserved && ino != ROOT {
                let parent = self.inodes.table.get(&node.parent);
                if !parent.and_then(|p| p.dir.as_ref()).is_some_and(|d| d.entries.contains_key(&ino)) {
                    return Err(format!("{ino:?} has no entry in its parent {:?}", node.parent));
                }
            }
        }
        owned.sort();
        let mut used = 0;
        for w in owned.windows(2) {
            if w[0].0.end() > w[1].0.start {
                return Err(format!("{:?} of {:?} overlaps {:?} of {:?}", w[0].0, w[0].1, w[1].0, w[1].1));
            }
        }
        for (e, ino) in &owned {
            if self.lay.overlap(e.start, e.end()) > 0 || !self.alloc.disk.runs_in(e.start, e.end()).is_empty() {
                return Err(format!("{e:?} of {ino:?} is in a fixed region or free"));
            }
            used += e.len;
        }
        let fixed = self.lay.blocks - self.lay.data_blocks();
        if fixed + used + self.alloc.free_blocks() != self.lay.blocks {
            return Err(format!(
                "{fixed} fixed + {used} used + {} free ≠ {}",
                self.alloc.free_blocks(),
                self.lay.blocks
            ));
        }
        for g in 0..self.lay.groups {
            let lo = Ino((g * self.lay.inodes_per_group + 1) as u32);
            let hi = Ino(((g + 1) * self.lay.inodes_per_group) as u32);
            let in_use = self.inodes.table.range(lo..=hi).filter(|(i, _)| i.0 >= FIRST_INO).count() as u64;
            let reserved = if g == 0 { FIRST_INO as u64 - 1 } else { 0 };
            if self.inodes.free[g as usize] + in_use + reserved != self.lay.inodes_per_group {
                return Err(format!("group {g}: {} free inodes, {in_use} in use", self.inodes.free[g as usize]));
            }
        }
        Ok(())
    }
}
