//! ext4 on a tenant's region (`[kernel] filesystem = "ext4"`): where a buffered job's file pages
//! are on the device, and the journal's commits, checkpoints and flushes — between the page
//! cache and the block layer.
//!
//! # Model
//! At the start the tenant's region is made a filesystem ([`Fs::mkfs`], mke2fs's defaults) with
//! its journal ([`Journal`], jbd2 in `data=ordered`, 5 s commits). Each buffered job gets a file
//! of its own (fio makes one per job) whose size is the job's range, laid out before the job
//! starts as fio lays files out by default (`fallocate=native`: blocks allocated, nothing
//! written), so that a job's offset `o` is the file's byte `o − start of its range`.
//! - The page cache's reads and writes of a file ([`Ext4::lower`]) become device requests at the
//!   file's blocks, one per physical run; a page-cache I/O completes when all its pieces have. A
//!   read of a hole reads nothing; a write to one (past the laid-out size) allocates there, and
//!   the metadata that dirties (bitmaps, group descriptors, inode, extent tree) joins the journal.
//! - Every buffered write changes the inode (its mtime and the unwritten extents it converts):
//!   the inode's table block joins the running transaction, and the file remembers the
//!   transaction (`i_sync_tid`).
//! - An fsync's flush (the page cache's, after it wrote and waited for the file's data) becomes
//!   the journal's fsync of that transaction: a commit (journal blocks, a preflush, the commit
//!   block) or, if it is committed already, one flush (`ext4_sync_file`).
//! - The journal's own I/O — commits on its timer, home writes of committed metadata, the log's
//!   superblock — are device requests of the filesystem ([`FsIoId::Journal`]); a log write
//!   larger than the block layer's largest request (`max_sectors_kb`) goes as several.
//! - A direct job's reads and writes ([`Ext4::map_direct`]) go to its file's blocks, a write
//!   allocating the holes it covers at once (no delayed allocation) and changing the inode.
//!
//! # Worked example
//! An append of 4 KiB and an fsync (the captures' `append-fsync`): the write dirties the inode's
//! block in transaction 1; the fsync writes the page (1 device write), then commits: the
//! descriptor and the inode block (1 write of 8 KiB), a flush, the commit block, and — the
//! device having no FUA — a flush: 3 writes and 2 flushes, as the real kernel sent.
//!
//! # Simplifications
//! No ordered-data requests (the data an fsync commits was written first; a timer commit does not
//! wait for data being written back); `mtime` granularity, `atime` and the orphan list are not
//! on the path; the device has no FUA, so the journal's FUA writes are emulated by a flush after
//! them (as the block layer does for such a device). With `-o discard`, freed extents are
//! trimmed once their transaction has committed, merged as mballoc merges them (`freed.rs`).

use super::freed::FreedData;
use super::inflight::IdWindow;
use super::fs::{Fs, FsOptions, FsStats, Ino, PhysExtent};
use super::io::{DevId, DevIo};
use super::journal::{Admit, Journal, JournalConfig, JournalIoId, JournalIoKind, JournalOut, JournalStats, Tid};
use super::{FileId, PAGE_SIZE};
use crate::device::IoOp;
use crate::units::{ReqId, SimTime};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// A device request of the filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FsIoId {
    /// A piece (one physical run) of a page-cache read or write.
    Part(u64),
    /// The journal's.
    Journal(JournalIoId),
    /// A trim of freed blocks (`-o discard`).
    Discard(u64),
}

/// One device request: `offset` and `len` in bytes of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsDevIo {
    pub id: FsIoId,
    pub op: IoOp,
    pub offset: u64,
    pub len: u64,
}

/// What a call produced: device requests to send, page-cache I/O now complete.
#[derive(Debug, Default)]
pub struct FsOut {
    pub device: Vec<FsDevIo>,
    pub done: Vec<(DevId, IoOp)>,
}

/// What the filesystem and its journal did, for `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ext4Result {
    pub tenant: usize,
    pub fs: FsStats,
    pub journal: JournalStats,
    /// Its device requests by what they carry: the share of journal and metadata I/O is
    /// `(journal_writes + flushes) / all`.
    pub requests: FsRequests,
    /// What `-o discard` trimmed, when mounted with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discard: Option<DiscardStats>,
}

struct File {
    ino: Ino,
    /// The device byte offset of the file's byte 0 (the start of its job's range).
    first: u64,
    /// The transaction of the inode's last change.
    tid: Tid,
    /// Its pages written but not yet given blocks (delayed allocation's reservation).
    reserved: u64,
}

/// One tenant's filesystem (see the header).
pub struct Ext4 {
    fs: Fs,
    journal: Journal,
    /// The device byte offset of the filesystem's block 0 (the tenant's region).
    base: u64,
    files: BTreeMap<FileId, File>,
    /// Pieces in flight, each with the page-cache I/O it belongs to, its operation, and whether
    /// it is that I/O's only piece.
    parts: IdWindow<(DevId, IoOp, bool)>,
    /// Per page-cache I/O in flight in several pieces: its pieces left and its operation.
    left: BTreeMap<DevId, (u32, IoOp)>,
    /// Per journal write split at `max_io_pages` (a commit's log blocks): its pieces left.
    journal_left: BTreeMap<JournalIoId, u32>,
    /// The largest device request, in pages (the block layer's `max_sectors_kb`).
    max_io_pages: u64,
    next_part: u64,
    /// Reused by `lower` for a request's mapping.
    map_scratch: Vec<super::fs::Mapping>,
    /// The fsyncs the journal holds, by the token given it, with the page cache's flush.
    fsyncs: BTreeMap<u32, DevId>,
    next_token: u32,
    /// Metadata blocks (with the file they changed) the journal told to wait: tried again when
    /// it says.
    waiting: VecDeque<(u64, Option<FileId>)>,
    jout: JournalOut,
    /// `-o discard`: extents freed, merged per transaction as mballoc merges them, to trim once
    /// their transaction has committed (`freed.rs`).
    discard: Option<FreedData>,
    /// Reused by `trim_committed`.
    trim_scratch: Vec<PhysExtent>,
    next_discard: u64,
    discards: DiscardStats,
    requests: FsRequests,
    /// Blocks reserved for pages written and not yet allocated, over all files
    /// (`s_dirtyclusters_counter`), and those kept for metadata (`s_resv_clusters`: 2% of the
    /// filesystem, at most 4,096): a write that would need more than the rest fails (ENOSPC).
    reserved: u64,
    resv_metadata: u64,
}

/// A file's write or create the filesystem has no room for (ENOSPC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoSpace;

/// The filesystem's device requests by what they carry: the files' data, the journal (its
/// log writes, commit blocks, flushes, home writes of metadata, its superblock), the discards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FsRequests {
    pub data_reads: u64,
    pub data_writes: u64,
    pub journal_writes: u64,
    pub flushes: u64,
    pub trims: u64,
}

impl FsRequests {
    fn count(&mut self, d: &FsDevIo) {
        match (d.id, d.op) {
            (FsIoId::Part(_), op) => self.count_data(op),
            (_, IoOp::Flush) => self.flushes += 1,
            (_, IoOp::Trim) => self.trims += 1,
            _ => self.journal_writes += 1,
        }
    }

    /// A request of a file's data: a read, or else a write.
    fn count_data(&mut self, op: IoOp) {
        match op {
            IoOp::Read => self.data_reads += 1,
            _ => self.data_writes += 1,
        }
    }
}

/// What `-o discard` trimmed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DiscardStats {
    pub trims: u64,
    pub trim_blocks: u64,
}

fn fs_err(e: impl std::fmt::Display) -> String {
    format!("ext4: {e}")
}

impl Ext4 {
    /// A filesystem over the region (`start`, `len` bytes) of the device.
    /// ext4 on the region of `len` bytes at device byte `start`, `-o discard` or not; the block
    /// layer takes requests of at most `max_io_bytes` (its `max_sectors_kb`, whole pages).
    pub fn new(start: u64, len: u64, discard: bool, max_io_bytes: u64) -> Result<Ext4, String> {
        assert!(max_io_bytes >= PAGE_SIZE && max_io_bytes % PAGE_SIZE == 0, "whole pages, at least one");
        let opts = FsOptions::default();
        let group = opts.blocks_per_group * opts.block_size;
        if len < group {
            return Err(format!(
                "ext4: a region of {len} bytes is too small: the filesystem needs at least one block group \
                 of {group} bytes"
            ));
        }
        let blocks_per_group = opts.blocks_per_group;
        let fs = Fs::mkfs(len, opts).map_err(fs_err)?;
        let j = fs.journal();
        // The device has no FUA: the block layer emulates it with a flush after the write.
        let cfg = JournalConfig { fua: false, ..JournalConfig::new(j.start, j.len) };
        let journal = Journal::new(cfg).map_err(fs_err)?;
        Ok(Ext4 {
            fs,
            journal,
            base: start,
            files: BTreeMap::new(),
            parts: IdWindow::default(),
            map_scratch: Vec::new(),
            left: BTreeMap::new(),
            journal_left: BTreeMap::new(),
            max_io_pages: max_io_bytes / PAGE_SIZE,
            next_part: 0,
            fsyncs: BTreeMap::new(),
            next_token: 0,
            waiting: VecDeque::new(),
            jout: JournalOut::default(),
            discard: discard.then(|| FreedData::new(blocks_per_group)),
            trim_scratch: Vec::new(),
            next_discard: 0,
            discards: DiscardStats::default(),
            requests: FsRequests::default(),
            reserved: 0,
            resv_metadata: (len / PAGE_SIZE / 50).min(4096),
        })
    }

    /// A file `file` named `name` in `dir` for a range (`first`, `len` bytes) of the device, laid out:
    /// its blocks allocated (`allocate`: fio's `fallocate`, or a file fio fills for reading), or
    /// only its size set (`fallocate=none`: a sparse file, allocated as it is written).
    pub fn add_file(
        &mut self,
        file: FileId,
        (dir, name): (Ino, &str),
        first: u64,
        len: u64,
        allocate: bool,
    ) -> Result<(), String> {
        let (ino, _) = self.fs.create(dir, name).map_err(fs_err)?;
        self.fs.set_size(ino, len).map_err(fs_err)?;
        let blocks = len.div_ceil(PAGE_SIZE);
        if blocks > 0 && allocate {
            self.fs
                .allocate(ino, 0, blocks, 0)
                .map_err(|e| format!("ext4: a file of {len} bytes does not fit in the tenant's filesystem: {e}"))?;
        }
        self.files.insert(file, File { ino, first, tid: Tid(0), reserved: 0 });
        Ok(())
    }

    /// Whether `blocks` more blocks of data in `files` new files fit beside what is allocated
    /// and reserved, with a block of directory per 16 files and ext4's metadata reserve kept.
    pub fn has_room_for(&self, blocks: u64, files: u64) -> bool {
        let need = self.reserved + self.resv_metadata + blocks + files.div_ceil(16) + 64;
        self.fs.free_blocks() >= need
    }

    /// The root directory.
    pub fn root(&self) -> Ino {
        self.fs.root()
    }

    /// `file`'s byte 0 is at device offset `first` in its job's requests (a file a job made).
    pub fn set_first(&mut self, file: FileId, first: u64) {
        self.files.get_mut(&file).expect("an existing file").first = first;
    }

    /// A directory `name` in `parent` (the root if `None`), made before the run (not journaled).
    pub fn setup_dir(&mut self, parent: Option<Ino>, name: &str) -> Result<Ino, String> {
        let parent = parent.unwrap_or_else(|| self.fs.root());
        Ok(self.fs.mkdir(parent, name).map_err(fs_err)?.0)
    }

    /// A file `name` in `dir` of `size` bytes, written before the run (allocated, not journaled).
    pub fn setup_file(&mut self, file: FileId, dir: Ino, name: &str, size: u64) -> Result<(), String> {
        let (ino, _) = self.fs.create(dir, name).map_err(fs_err)?;
        self.fs.set_size(ino, size).map_err(fs_err)?;
        let blocks = size.div_ceil(PAGE_SIZE);
        if blocks > 0 {
            self.fs.allocate(ino, 0, blocks, 0).map_err(|e| {
                format!("ext4: the files made before the run do not fit in the tenant's filesystem: {e}")
            })?;
        }
        self.files.insert(file, File { ino, first: 0, tid: Tid(0), reserved: 0 });
        Ok(())
    }

    /// Creates file `file` named `name` in `dir` at `now`: its metadata joins the journal. No
    /// free inode, or no block beyond those kept: ENOSPC, nothing changed.
    pub fn create(
        &mut self,
        now: SimTime,
        file: FileId,
        dir: Ino,
        name: &str,
        out: &mut FsOut,
    ) -> Result<Result<(), NoSpace>, String> {
        let Ok((ino, ch)) = self.new_inode(|fs| fs.create(dir, name))? else { return Ok(Err(NoSpace)) };
        self.files.insert(file, File { ino, first: 0, tid: Tid(0), reserved: 0 });
        for m in &ch.dirtied {
            self.dirty(now, m.block, Some(file))?;
        }
        self.drain(now, out).map(Ok)
    }

    /// Makes directory `name` in `parent` at `now` (`mkdir`): its inode, its first block and the
    /// parent's entry join the journal. No free inode or block beyond those kept: ENOSPC,
    /// nothing changed.
    pub fn mkdir(
        &mut self,
        now: SimTime,
        parent: Ino,
        name: &str,
        out: &mut FsOut,
    ) -> Result<Result<Ino, NoSpace>, String> {
        let Ok((ino, ch)) = self.new_inode(|fs| fs.mkdir(parent, name))? else { return Ok(Err(NoSpace)) };
        for m in &ch.dirtied {
            self.dirty(now, m.block, None)?;
        }
        self.drain(now, out)?;
        Ok(Ok(ino))
    }

    /// A new inode (a file's or a directory's) from `make`, unless the free blocks are down to
    /// those reserved and those kept for metadata, or `make` finds no inode or block: ENOSPC,
    /// nothing changed.
    fn new_inode(
        &mut self,
        make: impl FnOnce(&mut Fs) -> Result<(Ino, super::fs::Change), super::fs::FsError>,
    ) -> Result<Result<(Ino, super::fs::Change), NoSpace>, String> {
        if self.fs.free_blocks() <= self.reserved + self.resv_metadata {
            return Ok(Err(NoSpace));
        }
        match make(&mut self.fs) {
            Ok(made) => Ok(Ok(made)),
            Err(super::fs::FsError::NoInodes | super::fs::FsError::NoSpace) => Ok(Err(NoSpace)),
            Err(e) => Err(fs_err(e)),
        }
    }

    /// Removes empty directory `dir` at `now` (`rmdir`): its inode and block are freed into the
    /// journal (trimmed after the commit with `discard`), as a file's are by `unlink`.
    pub fn rmdir(&mut self, now: SimTime, dir: Ino, out: &mut FsOut) -> Result<(), String> {
        let ch = self.fs.rmdir(dir).map_err(fs_err)?;
        for m in &ch.dirtied {
            self.dirty(now, m.block, None)?;
        }
        self.free_into_discard(&ch.freed);
        self.drain(now, out)
    }

    /// Extents freed by a change join the discard list of the transaction its metadata joined
    /// (or, if that waits, the next one), with `-o discard`.
    fn free_into_discard(&mut self, freed: &[PhysExtent]) {
        if let Some(d) = &mut self.discard {
            let tid = match self.journal.running_tid() {
                Some(t) => t,
                None => Tid(self.journal.commit_sequence().0 + 1),
            };
            for &e in freed {
                d.free(tid, e);
            }
        }
    }

    /// A write makes `file` `size` bytes long (if it was shorter): its i_size, and a block
    /// reserved for each page past the old end (`ext4_da_reserve_space`). Returns the file's
    /// size after it, or ENOSPC (nothing changed) if the free blocks, less those reserved and
    /// those kept for metadata, cannot cover the new pages.
    pub fn grow(&mut self, file: FileId, size: u64) -> Result<Result<u64, NoSpace>, String> {
        let ino = self.files[&file].ino;
        let old = self.fs.size(ino).map_err(fs_err)?;
        if old >= size {
            return Ok(Ok(old));
        }
        let new_pages = size.div_ceil(PAGE_SIZE) - old.div_ceil(PAGE_SIZE);
        if self.fs.free_blocks() < self.reserved + self.resv_metadata + new_pages {
            return Ok(Err(NoSpace));
        }
        self.fs.set_size(ino, size).map_err(fs_err)?;
        self.reserved += new_pages;
        self.files.get_mut(&file).expect("checked").reserved += new_pages;
        Ok(Ok(size))
    }

    /// The last close of `file` at `now`: its preallocations are released.
    pub fn release(&mut self, now: SimTime, file: FileId, out: &mut FsOut) -> Result<(), String> {
        let ch = self.fs.release(self.files[&file].ino).map_err(fs_err)?;
        for m in &ch.dirtied {
            self.dirty(now, m.block, Some(file))?;
        }
        self.drain(now, out)
    }

    /// Deletes `file` at `now` (its pages are the page cache's to drop): its blocks are freed,
    /// its metadata joins the journal.
    pub fn unlink(&mut self, now: SimTime, file: FileId, out: &mut FsOut) -> Result<(), String> {
        let ch = self.fs.unlink(self.files[&file].ino).map_err(fs_err)?;
        // Its pages were dropped unwritten: their reservation goes.
        self.reserved -= self.files[&file].reserved;
        for m in &ch.dirtied {
            self.dirty(now, m.block, Some(file))?;
        }
        self.free_into_discard(&ch.freed);
        self.files.remove(&file);
        self.drain(now, out)
    }

    /// The byte of `file` at device offset `offset`.
    pub fn file_offset(&self, file: FileId, offset: u64) -> u64 {
        let first = self.files[&file].first;
        assert!(offset >= first, "device offset {offset} is before its file's start {first}");
        offset - first
    }

    /// A buffered write to `file` at `now` changed its inode.
    pub fn note_write(&mut self, now: SimTime, file: FileId, out: &mut FsOut) -> Result<(), String> {
        let block = self.fs.inode_block(self.files[&file].ino);
        self.dirty(now, block, Some(file))?;
        self.drain(now, out)
    }

    /// Metadata block `block` changed for `file`: it joins the running transaction, which
    /// becomes the file's last (what its fsync commits), or waits until the journal has room.
    /// Metadata block `block` changed at `now` (for `file`, whose fsync must commit it; a
    /// directory's change has none).
    fn dirty(&mut self, now: SimTime, block: u64, file: Option<FileId>) -> Result<(), String> {
        match self.journal.dirty_metadata(now, block, &mut self.jout).map_err(fs_err)? {
            Admit::Joined(tid) => {
                // A file deleted since its change waited has no fsync to remember it for.
                if let Some(f) = file.and_then(|file| self.files.get_mut(&file)) {
                    f.tid = tid;
                }
            }
            Admit::Wait => self.waiting.push_back((block, file)),
        }
        Ok(())
    }

    /// The page cache's device request `d` of one of this filesystem's files.
    pub fn lower(&mut self, now: SimTime, d: &DevIo, out: &mut FsOut) -> Result<(), String> {
        if d.op == IoOp::Flush {
            let token = self.next_token;
            self.next_token = self.next_token.wrapping_add(1);
            self.fsyncs.insert(token, d.id);
            let tid = self.files[&d.file].tid;
            self.journal.fsync(now, ReqId(token), tid, &mut self.jout).map_err(fs_err)?;
            return self.drain(now, out);
        }
        let (first, count) = (d.offset / PAGE_SIZE, d.len.div_ceil(PAGE_SIZE));
        let map = self.map_pages(now, d.file, d.op, first, count)?;
        let pieces = map.iter().filter(|m| m.physical.is_some()).count() as u32;
        for &m in &map {
            let Some(p) = m.physical else { continue };
            let id = self.next_part;
            self.next_part += 1;
            self.parts.insert(id, (d.id, d.op, pieces == 1));
            let (offset, len) = (self.base + p * PAGE_SIZE, m.len * PAGE_SIZE);
            let io = FsDevIo { id: FsIoId::Part(id), op: d.op, offset, len };
            self.requests.count(&io);
            out.device.push(io);
        }
        self.map_scratch = map;
        match pieces {
            0 => out.done.push((d.id, d.op)),
            1 => {}
            n => {
                self.left.insert(d.id, (n, d.op));
            }
        }
        self.drain(now, out)
    }

    /// Pages `[first, first + count)` of `file` on the device, in `map_scratch` (give it back
    /// after use): each run's physical block, `None` for a hole. A write's holes are allocated
    /// first (delayed allocation at writeback; a direct write's at its submission), the metadata
    /// that dirties journaled, and the file's reservation for them, if any, becomes blocks.
    fn map_pages(&mut self, now: SimTime, file: FileId, op: IoOp, first: u64, count: u64) -> Result<Vec<super::fs::Mapping>, String> {
        let ino = self.files[&file].ino;
        let mut map = std::mem::take(&mut self.map_scratch);
        self.fs.map_into(ino, first, count, &mut map).map_err(fs_err)?;
        if op == IoOp::Write && map.iter().any(|m| m.physical.is_none()) {
            let holes: u64 = map.iter().filter(|m| m.physical.is_none()).map(|m| m.len).sum();
            let ch = self.fs.allocate(ino, first, count, 0).map_err(fs_err)?;
            for m in &ch.dirtied {
                self.dirty(now, m.block, Some(file))?;
            }
            map = ch.mapped;
            let f = self.files.get_mut(&file).expect("a file");
            let used = holes.min(f.reserved);
            f.reserved -= used;
            self.reserved -= used;
        }
        Ok(map)
    }

    /// A direct (`O_DIRECT`) read or write of `len` bytes at byte `offset` of `file`, at `now`:
    /// where it goes on the device, as (device offset, length) in `runs`, one per physical run
    /// of the file's blocks (none for a read of a hole, which the kernel answers with zeros).
    /// A write allocates the holes it covers at once (ext4's direct I/O maps its blocks with
    /// `ext4_dio_get_block`, no delayed allocation), journaling what that dirties, and changes
    /// the inode (its mtime: `file_modified`), as a buffered write does.
    pub fn map_direct(
        &mut self,
        now: SimTime,
        file: FileId,
        op: IoOp,
        (offset, len): (u64, u64),
        runs: &mut Vec<(u64, u64)>,
        out: &mut FsOut,
    ) -> Result<(), String> {
        debug_assert!(matches!(op, IoOp::Read | IoOp::Write) && len > 0, "a direct read or write");
        let (first, end) = (offset / PAGE_SIZE, (offset + len).div_ceil(PAGE_SIZE));
        let map = self.map_pages(now, file, op, first, end - first)?;
        let (lo, hi) = (offset, offset + len);
        for m in &map {
            let Some(p) = m.physical else { continue };
            // The run's bytes, cut to the request's (a request need not be page-aligned).
            let (a, b) = ((m.logical * PAGE_SIZE).max(lo), ((m.logical + m.len) * PAGE_SIZE).min(hi));
            let at = self.base + p * PAGE_SIZE + (a - m.logical * PAGE_SIZE);
            runs.push((at, b - a));
            self.requests.count_data(op);
        }
        self.map_scratch = map;
        if op == IoOp::Write {
            let block = self.fs.inode_block(self.files[&file].ino);
            self.dirty(now, block, Some(file))?;
        }
        self.drain(now, out)
    }

    /// Device request `id` completed at `now`.
    pub fn device_done(&mut self, now: SimTime, id: FsIoId, out: &mut FsOut) -> Result<(), String> {
        match id {
            FsIoId::Part(p) => {
                let (dev, op, whole) = self.parts.remove(p).expect("a piece in flight");
                if whole {
                    out.done.push((dev, op));
                    return Ok(());
                }
                let e = self.left.get_mut(&dev).expect("its I/O in flight");
                e.0 -= 1;
                if e.0 == 0 {
                    let (_, op) = self.left.remove(&dev).expect("checked");
                    out.done.push((dev, op));
                }
                Ok(())
            }
            FsIoId::Journal(j) => {
                if let Some(left) = self.journal_left.get_mut(&j) {
                    *left -= 1;
                    if *left > 0 {
                        return Ok(());
                    }
                    self.journal_left.remove(&j);
                }
                self.journal.io_done(now, j, &mut self.jout).map_err(fs_err)?;
                self.drain(now, out)
            }
            FsIoId::Discard(_) => Ok(()),
        }
    }

    /// When the journal's commit timer is due, if it is.
    pub fn wake_at(&self) -> Option<SimTime> {
        self.journal.wake_at()
    }

    /// The commit timer at `now`, and the flusher's writeback of metadata committed by
    /// `committed_by`.
    pub fn wake(&mut self, now: SimTime, committed_by: Option<SimTime>, out: &mut FsOut) -> Result<(), String> {
        if self.journal.wake_at().is_some_and(|t| t <= now) {
            self.journal.wake(now, &mut self.jout).map_err(fs_err)?;
        }
        if let Some(by) = committed_by {
            self.journal.writeback(now, by, 1024, &mut self.jout).map_err(fs_err)?;
        }
        self.drain(now, out)
    }

    /// Trims the freed extents whose transaction has committed (`ext4_process_freed_data`).
    fn trim_committed(&mut self, out: &mut FsOut) {
        let Some(d) = &mut self.discard else { return };
        if d.is_empty() {
            return;
        }
        d.take_committed(self.journal.commit_sequence(), &mut self.trim_scratch);
        for e in self.trim_scratch.drain(..) {
            let id = FsIoId::Discard(self.next_discard);
            self.next_discard += 1;
            self.discards.trims += 1;
            self.discards.trim_blocks += e.len;
            let io = FsDevIo { id, op: IoOp::Trim, offset: self.base + e.start * PAGE_SIZE, len: e.len * PAGE_SIZE };
            self.requests.count(&io);
            out.device.push(io);
        }
    }

    /// Hands on what the journal asked for, until it asks nothing more.
    fn drain(&mut self, now: SimTime, out: &mut FsOut) -> Result<(), String> {
        loop {
            let jout = std::mem::take(&mut self.jout);
            if jout.io.is_empty() && jout.fsyncs_done.is_empty() && !jout.retry {
                self.jout = jout;
                self.trim_committed(out);
                return Ok(());
            }
            for r in jout.fsyncs_done {
                let dev = self.fsyncs.remove(&r.0).expect("an fsync the journal held");
                out.done.push((dev, IoOp::Flush));
            }
            let block = |b: u64| self.base + b * PAGE_SIZE;
            let mut ordered = Vec::new();
            for io in jout.io {
                let (op, offset, len) = match io.kind {
                    // The data an fsync commits was written before it asked (not modelled apart).
                    JournalIoKind::OrderedData { .. } => {
                        ordered.push(io.id);
                        continue;
                    }
                    JournalIoKind::JournalWrite { block: b, count, .. } => {
                        // One request per `max_sectors_kb` when larger than the block layer
                        // takes, as `bio_split` cuts it; the journal hears of it when all are done.
                        let pieces = count.div_ceil(self.max_io_pages);
                        if pieces > 1 {
                            self.journal_left.insert(io.id, pieces as u32);
                        }
                        for i in 0..pieces {
                            let n = self.max_io_pages.min(count - i * self.max_io_pages);
                            let offset = self.base + (b + i * self.max_io_pages) * PAGE_SIZE;
                            let d = FsDevIo { id: FsIoId::Journal(io.id), op: IoOp::Write, offset, len: n * PAGE_SIZE };
                            self.requests.count(&d);
                            out.device.push(d);
                        }
                        continue;
                    }
                    JournalIoKind::Flush => (IoOp::Flush, 0, 0),
                    JournalIoKind::CommitWrite { block: b, .. }
                    | JournalIoKind::HomeWrite { block: b }
                    | JournalIoKind::SuperblockWrite { block: b, .. } => (IoOp::Write, block(b), PAGE_SIZE),
                };
                let io = FsDevIo { id: FsIoId::Journal(io.id), op, offset, len };
                self.requests.count(&io);
                out.device.push(io);
            }
            if jout.retry {
                for (block, file) in std::mem::take(&mut self.waiting) {
                    self.dirty(now, block, file)?;
                }
            }
            for id in ordered {
                self.journal.io_done(now, id, &mut self.jout).map_err(fs_err)?;
            }
        }
    }

    pub fn result(&self, tenant: usize) -> Ext4Result {
        Ext4Result {
            tenant,
            fs: self.fs.stats(),
            journal: self.journal.stats().clone(),
            discard: self.discard.is_some().then_some(self.discards),
            requests: self.requests,
        }
    }

    pub fn check_invariants(&self) {
        self.fs.check_invariants().unwrap_or_else(|e| panic!("ext4: {e}"));
        self.journal.check_invariants();
        let pieces: u32 = self.left.values().map(|l| l.0).sum();
        let shared = self.parts.iter().filter(|(_, p)| !p.2).count();
        assert_eq!(pieces as usize, shared, "pieces in flight and their I/O disagree");
    }
}
