//! The kernels of a run: what the simulator drives when a scenario has a `[kernel]` — each VM's
//! own kernel, or on bare metal the host's one kernel that every tenant shares (or, with
//! `kernel.per_tenant`, a kernel per tenant without a VM's I/O path).
//!
//! # Model
//! A kernel is a [`KernelIo`] (page cache, flusher, fsync) plus what the simulator needs to drive
//! it: which tenants it serves, the flusher wake-up it has scheduled, and what it sent the device.
//! - A **buffered job** (fio's `direct=0`, its default) gives each read, write and sync to its
//!   tenant's kernel: the application sees the kernel's completion after the copy between the
//!   cache and its buffer (`page_copy` per 4 KiB page touched; none for a sync). Its reads use one
//!   read-ahead stream per job (each fio job opens the file: its own `struct file`).
//! - A **direct job** (`direct=1`, traces, exports) bypasses the cache; its writes and trims drop
//!   the clean cached pages they overwrite (`invalidate_inode_pages2_range` after a direct write,
//!   `truncate_inode_pages_range` before a discard). Simplified: dirty pages in the range are not
//!   written first (Linux's `filemap_write_and_wait_range` before a direct I/O).
//! - On a filesystem a direct fio job's files are files as a buffered job's are (laid out the
//!   same way): [`Kernels::direct_map`] gives where each read or write is on the device, one run
//!   per physical extent it covers, allocating the holes a write covers and changing the inode
//!   (its mtime), as ext4's direct I/O does (`ext4_dio_get_block`: no delayed allocation). Its
//!   syncs go to the filesystem as a buffered job's; its trims reach the device under it. Traces
//!   and exports address the raw region.
//! - Each tenant is one file of its kernel ([`FileId`] = the tenant's index): its region of the
//!   drive, a block device (or partition) it opens. Pages are counted from the region's start (a
//!   region not aligned to 4 KiB is a misaligned partition: its pages straddle the drive's 4 KiB
//!   units), read-ahead stops at its end, and a device request for its last, partial page stops
//!   there too. Tenants whose regions overlap do not share cached pages (as
//!   if each opened its own device): the cache's pages, and the writeback of them, are each
//!   tenant's own, which is what a scheduler weighing tenants needs.
//! - The kernel's device requests (misses, read-ahead, writeback, flushes) are the tenant's own:
//!   they go down the same path as its direct requests, from its first job's thread.
//! - With `filesystem = "ext4"` a tenant's region is a filesystem (`ext4.rs`): each buffered job
//!   reads and writes a file on it (a job with `nrfiles` several: its request's offset says
//!   which, a sync carrying its file's first byte), the page cache's requests are lowered to
//!   the file's blocks there, and fsyncs and the commit timer go through its journal.
//! - A Filebench tenant's files (`sim/filebench.rs`) are made and deleted as its threads ask
//!   ([`Kernels::create`], [`Kernels::call`] with [`FileOp::Delete`]), each a file of its own
//!   with an id from past the jobs' files; its reads, writes and fsyncs are [`FileCall`]s.
//! - The flusher runs when its kernel asks ([`KernelIo::wake_at`]); the simulator keeps one
//!   wake-up scheduled per kernel ([`Kernels::arm`]) and a stale one does nothing.
//!
//! # Worked example
//! `page_copy` 500 ns. A buffered 16 KiB read that hits completes in the kernel at once and reaches
//! the application 4 × 500 ns = 2 µs later (plus the host's completion overhead); a 4 KiB write
//! dirties one page and reaches it 500 ns later; an fsync reaches it when its flush completes.
//!
//! # Simplifications
//! A read's or write's CPU time is the copy alone, a metadata call's its fixed cost
//! (`[kernel.calls]`): with a CPU model (`[host.cpu]`, VMs), neither takes a thread's time.

use super::ext4::{Ext4, Ext4Result, FsIoId, FsOut};
use super::fs::Ino;
use super::io::{AppOp, DevId, DevIo, KernelIo, KernelOut};
use super::tags::Tags;
use super::{CacheStats, FileId, KernelConfig, MetaCall, StreamId, PAGE_SIZE};
use crate::device::IoOp;
use crate::units::{JobId, Nanos, ReqId, SimTime, TenantId};
use crate::workload::fio::FileEngine;
use serde::Serialize;
use std::collections::BTreeMap;

/// What one kernel did, for `results.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelResult {
    /// The tenants it served.
    pub tenants: Vec<usize>,
    pub capacity_pages: u64,
    pub page_cache: CacheStats,
    /// Pages cached, dirty and under writeback when the run ended.
    pub cached_pages: u64,
    pub dirty_pages: u64,
    pub writeback_pages: u64,
    /// The device requests the kernel sent: the cache's reads (misses and read-ahead), its
    /// writeback, the flushes of syncs, and with a filesystem its journal's writes and flushes.
    pub device: KernelDeviceIo,
    /// Its tenants' filesystems (`filesystem = "ext4"`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<Ext4Result>,
    /// Deletes of their files by fio jobs at their end (`unlink`): requests of the jobs that
    /// move no data and are not in their statistics.
    #[serde(skip_serializing_if = "is_zero")]
    pub unlinks: u64,
    /// Its device requests that joined the one before them in its plug (adjacent, same
    /// direction): `device` counts them before, the device saw them as one.
    pub plug_merges: u64,
    /// Its tags (`nr_requests`; none: no limit), and how many of its requests waited for one
    /// (`tags.rs`).
    pub nr_requests: Option<u32>,
    pub tag_waits: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Device requests and bytes, by operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelDeviceIo {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    /// Trims of freed blocks (ext4's `-o discard`).
    pub trims: u64,
    pub trim_bytes: u64,
}

impl KernelDeviceIo {
    fn count(&mut self, op: IoOp, len: u64) {
        match op {
            IoOp::Read => (self.reads, self.read_bytes) = (self.reads + 1, self.read_bytes + len),
            IoOp::Write => (self.writes, self.write_bytes) = (self.writes + 1, self.write_bytes + len),
            IoOp::Flush => self.flushes += 1,
            IoOp::Trim => (self.trims, self.trim_bytes) = (self.trims + 1, self.trim_bytes + len),
            IoOp::ZoneAppend | IoOp::ZoneReset | IoOp::ZoneFinish | IoOp::ZoneOpen | IoOp::ZoneClose => {
                unreachable!("the guest kernel sends no zone commands")
            }
        }
    }
}

/// A system call on a file of a workload's (Filebench's, a fio job's): what it asks of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileOp {
    Read,
    Write,
    Fsync,
    Delete,
    /// Its effect was made when it was issued (create, open, close, stat, mkdir, rmdir): it
    /// returns after the call's CPU time (`[kernel.calls]`).
    Meta(MetaCall),
    /// Nothing left to do (a delete another job makes): it returns at once.
    Done,
}

/// A system call on a file: its operation and the file (`None` for a call on a directory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileCall {
    pub op: FileOp,
    pub file: Option<FileId>,
}

/// A kernel's device request, by whose it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelDev {
    /// The page cache's, on a raw block device.
    Cache(DevId),
    /// The filesystem's: a piece of the page cache's, or the journal's.
    Fs(FsIoId),
}

/// A device request of a kernel: `offset` and `len` in bytes of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceIo {
    pub id: KernelDev,
    pub tenant: TenantId,
    pub op: IoOp,
    pub offset: u64,
    pub len: u64,
}

/// What a call produced: device requests to send now, applications' requests now complete.
#[derive(Debug, Default)]
pub struct KernelsOut {
    pub device: Vec<DeviceIo>,
    pub done: Vec<ReqId>,
}

struct Kernel {
    io: KernelIo,
    tenants: Vec<usize>,
    /// The wake-up scheduled, if any.
    armed: Option<SimTime>,
    sent: KernelDeviceIo,
    unlinks: u64,
    plug_merges: u64,
    tags: Tags,
}

/// Every kernel of the run (see the header).
pub struct Kernels {
    cfg: KernelConfig,
    kernels: Vec<Kernel>,
    /// Each tenant's kernel.
    of_tenant: Vec<usize>,
    /// Each tenant's region (offset, length).
    regions: Vec<(u64, u64)>,
    /// Each tenant's filesystem, with `filesystem = "ext4"`.
    ext4: Vec<Option<Ext4>>,
    /// Each page-cache file's tenant: the tenants' own (their regions) first, then the jobs'
    /// files on their filesystems.
    file_tenant: Vec<TenantId>,
    /// Files that workloads create and delete on their filesystems (Filebench's), by id from
    /// `next_file` on: each one's tenant while it exists.
    made_files: BTreeMap<FileId, TenantId>,
    next_file: u32,
    /// The read-ahead stream of each such file while it is open.
    open_streams: BTreeMap<FileId, StreamId>,
    /// Each file job's files (`None` for a job that addresses its tenant's raw region).
    jobs: Vec<Option<JobFiles>>,
    /// Each job: whether it is a direct (`O_DIRECT`) job of files on a filesystem.
    direct: Vec<bool>,
    /// The jobs' files that are made at their first use or deleted at their jobs' end.
    shared: BTreeMap<FileId, SharedFile>,
    /// Each job of fio's file and directory operation engines: its files (`None` for any
    /// other job).
    engines: Vec<Option<EngineFiles>>,
    kout: KernelOut,
    fsout: FsOut,
    /// Page-cache I/O the filesystem completed, to report to the cache.
    cache_done: Vec<(DevId, IoOp)>,
}

/// A job of files of the run — a buffered job, or a direct one on a filesystem: its tenant, and
/// its files: each one's path (fio's `directory`, `/`-separated, then `filename` or
/// `jobname.instance.filenum`) and range of the device (first byte, length), in the order of
/// their ranges. Jobs of a tenant naming the same file share it, on a filesystem; without one, a
/// (buffered) job has one file, its tenant's region.
#[derive(Clone, Debug)]
pub struct BufferedJob {
    pub tenant: TenantId,
    /// `O_DIRECT` (fio's `direct=1`): its reads and writes bypass the page cache and go to its
    /// files' blocks (a filesystem's files only; a direct job without one is not a file job).
    pub direct: bool,
    pub files: Vec<(String, (u64, u64))>,
    /// fio's `create_on_open` for a job that does not read: its files are made when it first
    /// uses them (journaled, their blocks allocated at writeback), not laid out before the run.
    pub create_on_open: bool,
    /// fio's `unlink`: its files are deleted when it ends.
    pub unlink: bool,
    /// Its files' blocks are allocated when they are laid out (fio's `fallocate` other than
    /// `none`, or a job that reads: fio fills its files).
    pub allocate: bool,
}

/// A job of one of fio's file and directory operation engines (`ioengine=filecreate`, ...): its
/// tenant, its engine and its files (each one's path, as a [`BufferedJob`]'s, and its range of
/// the device), in the order of their ranges.
#[derive(Clone, Debug)]
pub struct EngineJob {
    pub tenant: TenantId,
    pub engine: FileEngine,
    pub files: Vec<(String, (u64, u64))>,
    /// Its files' blocks are allocated when laid out (`filestat`, `filedelete`; as a
    /// [`BufferedJob`]'s).
    pub allocate: bool,
}

/// An engine job's files in the kernel, each with its range's first byte.
#[derive(Clone, Debug)]
struct EngineFiles {
    engine: FileEngine,
    files: Vec<(EngineFile, u64)>,
}

/// What an engine job's file is now.
#[derive(Clone, Debug)]
enum EngineFile {
    /// Not made yet (`filecreate`, `dircreate`): its directory and name.
    ToMake(Ino, String),
    File(FileId),
    Dir(Ino),
    /// Deleted.
    Gone,
}

/// A file of the jobs' on a filesystem: whether it waits to be made at its first use (its name
/// and first byte in its jobs' requests), and how many jobs that delete it at their end have
/// not yet ended.
#[derive(Clone, Debug)]
struct SharedFile {
    create: Option<(Ino, String, u64)>,
    unlinkers: u32,
}

/// A buffered job's files in the kernel: each one's id, read-ahead stream (its own `struct
/// file`) and first byte on the device, in order.
type JobFiles = Vec<(FileId, StreamId, u64)>;

impl Kernels {
    /// `regions`: each tenant's (offset, length) on the device. `jobs`: each job, `Some` if it
    /// is buffered.
    /// `files_of`: per tenant, whether its workload makes files of its own on its filesystem
    /// (a Filebench workload's), so it needs one even without buffered jobs. `engines`: each
    /// job, `Some` if it is one of fio's file operation engines' (on its tenant's filesystem).
    pub fn new(
        cfg: KernelConfig,
        regions: &[(u64, u64)],
        jobs: &[Option<BufferedJob>],
        files_of: &[bool],
        engines: &[Option<EngineJob>],
    ) -> Result<Kernels, String> {
        let tenants = regions.len();
        let count = if cfg.per_tenant { tenants } else { 1 };
        let of_tenant: Vec<usize> = (0..tenants).map(|t| if cfg.per_tenant { t } else { 0 }).collect();
        let mut kernels = Vec::with_capacity(count);
        for k in 0..count {
            kernels.push(Kernel {
                io: KernelIo::new(cfg.pagecache).map_err(|e| e.to_string())?,
                tenants: (0..tenants).filter(|&t| of_tenant[t] == k).collect(),
                armed: None,
                sent: KernelDeviceIo::default(),
                unlinks: 0,
                plug_merges: 0,
                tags: Tags::new(cfg.nr_requests),
            });
        }
        let mut ext4: Vec<Option<Ext4>> = (0..tenants).map(|_| None).collect();
        let mut file_tenant: Vec<TenantId> = (0..tenants).map(|t| TenantId(t as u16)).collect();
        for (t, &(start, len)) in regions.iter().enumerate() {
            kernels[of_tenant[t]].io.cache_mut().set_file_end(FileId(t as u32), len.div_ceil(PAGE_SIZE));
            let buffered = jobs.iter().flatten().any(|j| j.tenant.index() == t && (!j.direct || cfg.filesystem == Filesystem::Ext4))
                || engines.iter().flatten().any(|j| j.tenant.index() == t)
                || files_of[t];
            if cfg.filesystem != Filesystem::Ext4 {
                if let Some(e) = engines.iter().flatten().find(|j| j.tenant.index() == t) {
                    return Err(format!(
                        "tenant {t}: ioengine={} makes and stats files of a filesystem: set [kernel] filesystem = \"ext4\"",
                        e.engine.fio_name()
                    ));
                }
            }
            if cfg.filesystem == Filesystem::Ext4 && buffered {
                ext4[t] = Some(Ext4::new(start, len, cfg.discard, cfg.pagecache.max_extent_bytes).map_err(|e| format!("tenant {t}: {e}"))?);
            }
        }
        // On a filesystem, the files by (tenant, name), each spanning its jobs' ranges; made
        // when first used if every job naming it asks so, deleted at the end if every one does.
        struct Named {
            first: u64,
            end: u64,
            create: bool,
            allocate: bool,
            unlinkers: u32,
            users: u32,
        }
        let mut named: BTreeMap<(TenantId, &str), Named> = BTreeMap::new();
        for j in jobs.iter().flatten().filter(|j| ext4[j.tenant.index()].is_some()) {
            for (name, range) in &j.files {
                let (first, end) = (range.0, range.0 + range.1);
                let e = named.entry((j.tenant, name.as_str())).or_insert(Named {
                    first,
                    end,
                    create: true,
                    allocate: false,
                    unlinkers: 0,
                    users: 0,
                });
                (e.first, e.end) = (e.first.min(first), e.end.max(end));
                e.create &= j.create_on_open;
                e.allocate |= j.allocate;
                e.unlinkers += u32::from(j.unlink);
                e.users += 1;
            }
        }
        let mut ids: BTreeMap<(TenantId, &str), FileId> = BTreeMap::new();
        let mut shared = BTreeMap::new();
        let mut to_create: Vec<(u64, u64)> = vec![(0, 0); tenants];
        // The directories on the files' paths, made before the run.
        let mut dirs: BTreeMap<(TenantId, String), Ino> = BTreeMap::new();
        for (&(t, path), n) in &named {
            let f = FileId(file_tenant.len() as u32);
            file_tenant.push(t);
            let fs = ext4[t.index()].as_mut().expect("a filesystem");
            let (dir, name) = parent_dir(fs, &mut dirs, t, path)?;
            if n.unlinkers > 0 && n.unlinkers < n.users {
                return Err(format!(
                    "tenant {}: file '{path}' is used by {} jobs and {} of them delete it at their end (unlink=1): give all or none of them unlink=1",
                    t.index(),
                    n.users,
                    n.unlinkers
                ));
            }
            let len = n.end - n.first;
            if n.create || !n.allocate {
                // Blocks its writes will allocate: kept free below.
                to_create[t.index()].0 += len.div_ceil(PAGE_SIZE);
                to_create[t.index()].1 += u64::from(n.create);
            }
            if n.create {
                kernels[of_tenant[t.index()]].io.cache_mut().set_file_end(f, 0);
            } else {
                fs.add_file(f, (dir, name), n.first, len, n.allocate).map_err(|e| format!("tenant {}: {e}", t.index()))?;
                kernels[of_tenant[t.index()]].io.cache_mut().set_file_end(f, len.div_ceil(PAGE_SIZE));
            }
            if n.create || n.unlinkers > 0 {
                let create = n.create.then(|| (dir, name.to_string(), n.first));
                shared.insert(f, SharedFile { create, unlinkers: n.unlinkers });
            }
            ids.insert((t, path), f);
        }
        for (t, &(blocks, files)) in to_create.iter().enumerate() {
            if blocks > 0 && !ext4[t].as_ref().expect("a filesystem").has_room_for(blocks, files) {
                return Err(format!(
                    "tenant {t}: its jobs' files made as they are used (create_on_open) or sparse (fallocate=none), {} MiB, do not fit in its filesystem",
                    (blocks * PAGE_SIZE) >> 20
                ));
            }
        }
        let mut files = Vec::with_capacity(jobs.len());
        let mut direct = Vec::with_capacity(jobs.len());
        for j in jobs {
            // A direct job is a job of files only on a filesystem.
            let Some(j) = j.as_ref().filter(|j| !j.direct || ext4[j.tenant.index()].is_some()) else {
                files.push(None);
                direct.push(false);
                continue;
            };
            direct.push(j.direct);
            let t = j.tenant.index();
            let mut own = Vec::with_capacity(j.files.len());
            for (name, range) in &j.files {
                let file = ids.get(&(j.tenant, name.as_str())).copied().unwrap_or(FileId(t as u32));
                own.push((file, kernels[of_tenant[t]].io.cache_mut().open_stream(file), range.0));
            }
            assert!(own.windows(2).all(|w| w[0].2 < w[1].2), "a job's files in the order of their ranges");
            files.push(Some(own));
        }
        let mut engine_files = Vec::with_capacity(engines.len());
        let mut engine_paths: BTreeMap<(TenantId, &str), ()> = BTreeMap::new();
        let mut to_make: Vec<(u64, u64)> = vec![(0, 0); tenants];
        for e in engines {
            let Some(e) = e else {
                engine_files.push(None);
                continue;
            };
            let t = e.tenant;
            let mut files = Vec::with_capacity(e.files.len());
            for (path, (first, len)) in &e.files {
                if named.contains_key(&(t, path.as_str())) || engine_paths.insert((t, path.as_str()), ()).is_some() {
                    return Err(format!(
                        "tenant {}: '{path}' is the file of more than one job, one of them with ioengine={}: give the jobs different names or directories",
                        t.index(),
                        e.engine.fio_name()
                    ));
                }
                let fs = ext4[t.index()].as_mut().expect("a filesystem");
                let (dir, name) = parent_dir(fs, &mut dirs, t, path)?;
                let err = |e: String| format!("tenant {}: {e}", t.index());
                let state = match e.engine {
                    FileEngine::FileCreate | FileEngine::DirCreate => {
                        to_make[t.index()].1 += 1;
                        to_make[t.index()].0 += u64::from(e.engine == FileEngine::DirCreate);
                        EngineFile::ToMake(dir, name.to_string())
                    }
                    FileEngine::FileStat | FileEngine::FileDelete => {
                        let f = FileId(file_tenant.len() as u32);
                        file_tenant.push(t);
                        fs.add_file(f, (dir, name), *first, *len, e.allocate).map_err(err)?;
                        kernels[of_tenant[t.index()]].io.cache_mut().set_file_end(f, len.div_ceil(PAGE_SIZE));
                        EngineFile::File(f)
                    }
                    FileEngine::DirStat | FileEngine::DirDelete => EngineFile::Dir(fs.setup_dir(Some(dir), name).map_err(err)?),
                };
                files.push((state, *first));
            }
            engine_files.push(Some(EngineFiles { engine: e.engine, files }));
        }
        for (t, &(blocks, files)) in to_make.iter().enumerate() {
            if files > 0 && !ext4[t].as_ref().expect("a filesystem").has_room_for(blocks, files) {
                return Err(format!(
                    "tenant {t}: the {files} files or directories its jobs make (ioengine=filecreate, dircreate) do not fit in its filesystem"
                ));
            }
        }
        let next_file = file_tenant.len() as u32;
        Ok(Kernels {
            cfg,
            kernels,
            of_tenant,
            regions: regions.to_vec(),
            ext4,
            file_tenant,
            made_files: BTreeMap::new(),
            next_file,
            open_streams: BTreeMap::new(),
            jobs: files,
            direct,
            shared,
            engines: engine_files,
            kout: KernelOut::default(),
            fsout: FsOut::default(),
            cache_done: Vec::new(),
        })
    }

    /// Whether job `j`'s I/O goes through its kernel's page cache.
    pub fn is_buffered(&self, j: JobId) -> bool {
        self.jobs[j.index()].is_some() && !self.direct[j.index()]
    }

    /// Whether job `j` is a direct job of files on its tenant's filesystem: its reads and writes
    /// go to its files' blocks ([`Kernels::direct_map`]), its syncs to the filesystem as a
    /// buffered job's do.
    pub fn is_direct_on_files(&self, j: JobId) -> bool {
        self.direct[j.index()]
    }

    /// Direct job `j` of tenant `t` reads or writes `len` bytes at device offset `offset` (of its
    /// range) at `now`: where that is on the device, one (device offset, length) per physical
    /// run of its file's blocks, in `runs` (none for a read of a hole: zeros, no I/O). A write
    /// first drops the file's cached pages it overwrites (`invalidate_inode_pages2_range`),
    /// allocates the holes it covers (a file made at its first use or sparse) and changes the
    /// inode; the metadata that dirties is journaled (`out`).
    pub fn direct_map(
        &mut self,
        now: SimTime,
        t: TenantId,
        j: JobId,
        (op, offset, len): (IoOp, u64, u64),
        runs: &mut Vec<(u64, u64)>,
        out: &mut KernelsOut,
    ) -> Result<(), String> {
        let (file, _) = self.job_file(j, offset);
        self.make_if_new(now, t, file)?;
        let at = self.file_offset(t, file, offset);
        let k = self.of_tenant[t.index()];
        if op == IoOp::Write {
            self.grow_job_file(t, file, at + len)?;
            self.drop_cached(now, k, file, at, len)?;
        }
        let (fs, fsout) = self.fs_out(t);
        fs.map_direct(now, file, op, (at, len), runs, fsout)?;
        self.settle(now, k, t, out)
    }

    /// A job's file written up to byte `end`: one the job made grows as it is written (a laid-out
    /// one has its size); no room in the filesystem is an error (checked before the run).
    fn grow_job_file(&mut self, t: TenantId, file: FileId, end: u64) -> Result<(), String> {
        if self.shared.contains_key(&file) && !self.reserve(t, file, end)? {
            return Err(format!("tenant {}: ext4 has no room for a write to a file of a job", t.index()));
        }
        Ok(())
    }

    /// Kernel `k` drops the cached pages of `file` that bytes `[offset, offset + len)` touch.
    fn drop_cached(&mut self, now: SimTime, k: usize, file: FileId, offset: u64, len: u64) -> Result<(), String> {
        let (first, end) = (offset / PAGE_SIZE, (offset + len).div_ceil(PAGE_SIZE));
        self.kernels[k].io.cache_mut().invalidate(now, file, first, end).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// `n` of kernel `k`'s device requests joined another in its plug.
    pub fn note_plug_merges(&mut self, k: usize, n: u64) {
        self.kernels[k].plug_merges += n;
    }

    /// Kernel `k`'s device request `r` (`background`: started by the kernel's own timer) asks
    /// for a tag: true if it goes now, false if it waits for a completion to hand it one.
    pub fn take_tag(&mut self, k: usize, r: ReqId, background: bool) -> bool {
        self.kernels[k].tags.take(r, background)
    }

    /// One of kernel `k`'s device requests completed: the waiting request that takes its tag.
    pub fn put_tag(&mut self, k: usize) -> Option<ReqId> {
        self.kernels[k].tags.put()
    }

    /// Tenant `t`'s kernel.
    pub fn kernel_of(&self, t: TenantId) -> usize {
        self.of_tenant[t.index()]
    }

    /// Buffered job `j` of tenant `t` asks `op` (its request `r`) of its kernel at `now`.
    pub fn submit(
        &mut self,
        now: SimTime,
        t: TenantId,
        j: JobId,
        r: ReqId,
        (op, offset, len): (IoOp, u64, u64),
        out: &mut KernelsOut,
    ) -> Result<(), String> {
        let (file, stream) = self.job_file(j, offset);
        self.make_if_new(now, t, file)?;
        let app = match op {
            IoOp::Read => AppOp::Read { file, offset: self.file_offset(t, file, offset), len, stream: Some(stream) },
            IoOp::Write => {
                let at = self.file_offset(t, file, offset);
                self.grow_job_file(t, file, at + len)?;
                AppOp::Write { file, offset: at, len }
            }
            IoOp::Flush => AppOp::Fsync { file },
            IoOp::Trim => unreachable!("a buffered job's trims go to the device directly"),
            IoOp::ZoneAppend | IoOp::ZoneReset | IoOp::ZoneFinish | IoOp::ZoneOpen | IoOp::ZoneClose => {
                return Err(format!("{op:?}: zone commands need direct=1 (they bypass the page cache)"))
            }
        };
        let k = self.of_tenant[t.index()];
        self.kernels[k].io.submit(now, r, app, &mut self.kout).map_err(|e| e.to_string())?;
        if op == IoOp::Write {
            if let Some(fs) = &mut self.ext4[t.index()] {
                fs.note_write(now, file, &mut self.fsout)?;
            }
        }
        self.settle(now, k, t, out)
    }

    /// A job's file that is made at its first use (`create_on_open`) is made now.
    fn make_if_new(&mut self, now: SimTime, t: TenantId, file: FileId) -> Result<(), String> {
        let Some((dir, name, first)) = self.shared.get_mut(&file).and_then(|s| s.create.take()) else { return Ok(()) };
        let (fs, fsout) = self.fs_out(t);
        if fs.create(now, file, dir, &name, fsout)?.is_err() {
            return Err(format!("tenant {}: ext4 has no room to make the job's file '{name}'", t.index()));
        }
        fs.set_first(file, first);
        Ok(())
    }

    /// Job `j` (of tenant `t`), at its end with fio's `unlink`, deletes its file holding device
    /// offset `offset`: its read-ahead state goes; the call that deletes the file, unless other
    /// jobs that delete it have yet to end (the last one does) or it was never made.
    pub fn job_unlink(&mut self, t: TenantId, j: JobId, offset: u64) -> Result<FileCall, String> {
        let (file, stream) = self.job_file(j, offset);
        let k = self.of_tenant[t.index()];
        self.kernels[k].io.cache_mut().close_stream(stream).map_err(|e| e.to_string())?;
        self.kernels[k].unlinks += 1;
        let s = self.shared.get_mut(&file).expect("a file its jobs delete");
        s.unlinkers -= 1;
        let op = if s.unlinkers == 0 && s.create.is_none() { FileOp::Delete } else { FileOp::Done };
        Ok(FileCall { op, file: Some(file) })
    }

    /// Job `j` (of tenant `t`, of one of fio's file operation engines) opens its file whose
    /// range starts at device byte `first` at `now`: the engine's call on it takes effect (a
    /// create or mkdir joins the journal; an unlink or rmdir frees into it) and is returned to
    /// be timed. `None`: a create or mkdir found the filesystem full (ENOSPC), nothing changed.
    pub fn engine_open(
        &mut self,
        now: SimTime,
        t: TenantId,
        j: JobId,
        first: u64,
        out: &mut KernelsOut,
    ) -> Result<Option<FileCall>, String> {
        let (engine, i) = self.engine_file(j, first);
        let state = self.engines[j.index()].as_ref().expect("checked").files[i].0.clone();
        // On ENOSPC nothing changes: the file stays to be made.
        let (state, call) = match (engine, state) {
            (FileEngine::FileCreate, EngineFile::ToMake(dir, name)) => {
                let Some(f) = self.make_file(now, t, dir, &name)? else { return Ok(None) };
                (EngineFile::File(f), FileCall { op: FileOp::Meta(MetaCall::Create), file: Some(f) })
            }
            // fio's open(O_CREAT) of a file an earlier pass made.
            (FileEngine::FileCreate, EngineFile::File(f)) => {
                (EngineFile::File(f), FileCall { op: FileOp::Meta(MetaCall::Open), file: Some(f) })
            }
            (FileEngine::FileStat, EngineFile::File(f)) => {
                (EngineFile::File(f), FileCall { op: FileOp::Meta(MetaCall::Stat), file: Some(f) })
            }
            // Deleted when the call reaches the kernel, as a Filebench delete.
            (FileEngine::FileDelete, EngineFile::File(f)) => (EngineFile::Gone, FileCall { op: FileOp::Delete, file: Some(f) }),
            (FileEngine::DirCreate, EngineFile::ToMake(parent, name)) => {
                let (fs, fsout) = self.fs_out(t);
                let Ok(dir) = fs.mkdir(now, parent, &name, fsout)? else { return Ok(None) };
                (EngineFile::Dir(dir), FileCall { op: FileOp::Meta(MetaCall::Mkdir), file: None })
            }
            (FileEngine::DirStat, EngineFile::Dir(d)) => (EngineFile::Dir(d), FileCall { op: FileOp::Meta(MetaCall::Stat), file: None }),
            (FileEngine::DirDelete, EngineFile::Dir(d)) => {
                let (fs, fsout) = self.fs_out(t);
                fs.rmdir(now, d, fsout)?;
                (EngineFile::Gone, FileCall { op: FileOp::Meta(MetaCall::Rmdir), file: None })
            }
            (engine, state) => unreachable!("ioengine={} opens a file in state {state:?}", engine.fio_name()),
        };
        self.engines[j.index()].as_mut().expect("checked").files[i].0 = state;
        let k = self.of_tenant[t.index()];
        self.settle(now, k, t, out)?;
        Ok(Some(call))
    }

    /// Job `j` (of tenant `t`, of one of fio's file operation engines), at its end with fio's
    /// `unlink`, deletes its file whose range starts at device byte `first` at `now`
    /// (`close_and_free_files`; the engine's `unlink_file`, `rmdir` for the directory
    /// engines): the call, or one that does nothing if the file is gone or was never made.
    pub fn engine_unlink(
        &mut self,
        now: SimTime,
        t: TenantId,
        j: JobId,
        first: u64,
        out: &mut KernelsOut,
    ) -> Result<FileCall, String> {
        let (_, i) = self.engine_file(j, first);
        let file = &mut self.engines[j.index()].as_mut().expect("checked").files[i].0;
        let call = match std::mem::replace(file, EngineFile::Gone) {
            EngineFile::File(f) => FileCall { op: FileOp::Delete, file: Some(f) },
            EngineFile::Dir(d) => {
                let (fs, fsout) = self.fs_out(t);
                fs.rmdir(now, d, fsout)?;
                FileCall { op: FileOp::Meta(MetaCall::Rmdir), file: None }
            }
            EngineFile::ToMake(..) | EngineFile::Gone => FileCall { op: FileOp::Done, file: None },
        };
        let k = self.of_tenant[t.index()];
        self.settle(now, k, t, out)?;
        Ok(call)
    }

    /// Engine job `j`'s engine and the index of its file whose range starts at `first`.
    fn engine_file(&self, j: JobId, first: u64) -> (FileEngine, usize) {
        let e = self.engines[j.index()].as_ref().expect("a job of a file operation engine");
        let i = e.files.partition_point(|f| f.1 < first);
        assert!(e.files.get(i).is_some_and(|f| f.1 == first), "no file of job {j:?} starts at {first}");
        (e.engine, i)
    }

    /// Job `j`'s file whose range holds device offset `offset` (a sync carries its file's
    /// first byte), and its read-ahead stream.
    fn job_file(&self, j: JobId, offset: u64) -> (FileId, StreamId) {
        let files = self.jobs[j.index()].as_ref().expect("a buffered job");
        let i = if files.len() == 1 { 0 } else { files.partition_point(|f| f.2 <= offset).saturating_sub(1) };
        (files[i].0, files[i].1)
    }

    fn fs(&mut self, t: TenantId) -> &mut Ext4 {
        self.ext4[t.index()].as_mut().expect("the tenant's filesystem")
    }

    /// Tenant `t`'s filesystem and the output its calls fill.
    fn fs_out(&mut self, t: TenantId) -> (&mut Ext4, &mut FsOut) {
        (self.ext4[t.index()].as_mut().expect("the tenant's filesystem"), &mut self.fsout)
    }

    /// A directory `name` in `parent` (its root if `None`) of tenant `t`'s filesystem, made
    /// before the run.
    pub fn setup_dir(&mut self, t: TenantId, parent: Option<Ino>, name: &str) -> Result<Ino, String> {
        self.fs(t).setup_dir(parent, name).map_err(|e| format!("tenant {}: {e}", t.index()))
    }

    fn new_file(&mut self, t: TenantId) -> FileId {
        let f = FileId(self.next_file);
        self.next_file = self.next_file.checked_add(1).expect("fewer than 2^32 files made in a run");
        self.made_files.insert(f, t);
        f
    }

    /// A file `name` of `size` bytes in `dir` of tenant `t`'s filesystem, written before the run.
    pub fn setup_file(&mut self, t: TenantId, dir: Ino, name: &str, size: u64) -> Result<FileId, String> {
        let f = self.new_file(t);
        self.fs(t).setup_file(f, dir, name, size).map_err(|e| format!("tenant {}: {e}", t.index()))?;
        let k = self.of_tenant[t.index()];
        self.kernels[k].io.cache_mut().set_file_end(f, size.div_ceil(PAGE_SIZE));
        Ok(f)
    }

    /// Tenant `t` creates a file `name` in `dir` at `now` (and opens it); `None` if its
    /// filesystem has no room (ENOSPC).
    pub fn create(
        &mut self,
        now: SimTime,
        t: TenantId,
        dir: Ino,
        name: &str,
        out: &mut KernelsOut,
    ) -> Result<Option<FileId>, String> {
        let Some(f) = self.make_file(now, t, dir, name)? else { return Ok(None) };
        self.open(t, f);
        let k = self.of_tenant[t.index()];
        self.settle(now, k, t, out)?;
        Ok(Some(f))
    }

    /// Creates an empty file `name` in `dir` of tenant `t`'s filesystem at `now` (journaled),
    /// not opened and not settled; `None` if its filesystem has no room (ENOSPC).
    fn make_file(&mut self, now: SimTime, t: TenantId, dir: Ino, name: &str) -> Result<Option<FileId>, String> {
        let f = FileId(self.next_file);
        let (fs, fsout) = self.fs_out(t);
        if fs.create(now, f, dir, name, fsout)?.is_err() {
            return Ok(None);
        }
        assert_eq!(self.new_file(t), f);
        let k = self.of_tenant[t.index()];
        self.kernels[k].io.cache_mut().set_file_end(f, 0);
        Ok(Some(f))
    }

    /// Tenant `t`'s application is about to write `file` up to byte `end`: the file grows and
    /// its new pages are reserved (`ext4_da_reserve_space`). `false`: no room (ENOSPC), the
    /// write must fail.
    pub fn reserve(&mut self, t: TenantId, file: FileId, end: u64) -> Result<bool, String> {
        let Ok(size) = self.fs(t).grow(file, end)? else { return Ok(false) };
        let k = self.of_tenant[t.index()];
        self.kernels[k].io.cache_mut().set_file_end(file, size.div_ceil(PAGE_SIZE));
        Ok(true)
    }

    /// Tenant `t` opens `file`: its own read-ahead state (a `struct file`).
    pub fn open(&mut self, t: TenantId, file: FileId) {
        let k = self.of_tenant[t.index()];
        let s = self.kernels[k].io.cache_mut().open_stream(file);
        assert!(self.open_streams.insert(file, s).is_none(), "file {file:?} opened twice");
    }

    /// Tenant `t` closes `file` at `now`: its read-ahead state goes, and ext4 releases its
    /// preallocations.
    pub fn close(&mut self, now: SimTime, t: TenantId, file: FileId, out: &mut KernelsOut) -> Result<(), String> {
        let k = self.of_tenant[t.index()];
        let s = self.open_streams.remove(&file).expect("an open file");
        self.kernels[k].io.cache_mut().close_stream(s).map_err(|e| e.to_string())?;
        let (fs, fsout) = self.fs_out(t);
        fs.release(now, file, fsout)?;
        self.settle(now, k, t, out)
    }

    /// Tenant `t`'s application makes call `call` (its request `r`) at `now`: a read or write
    /// of `len` bytes at `offset` of the file, its fsync, its delete; or a call whose effect was
    /// made when it was issued ([`FileOp::Done`]: a create, open, close or stat), which
    /// returns at once.
    pub fn call(
        &mut self,
        now: SimTime,
        t: TenantId,
        r: ReqId,
        call: FileCall,
        (offset, len): (u64, u64),
        out: &mut KernelsOut,
    ) -> Result<(), String> {
        let k = self.of_tenant[t.index()];
        let file = match (call.op, call.file) {
            (FileOp::Meta(_) | FileOp::Done, _) => {
                out.done.push(r);
                return Ok(());
            }
            (_, Some(file)) => file,
            (op, None) => panic!("{op:?} of no file"),
        };
        let app = match call.op {
            FileOp::Read => AppOp::Read { file, offset, len, stream: self.open_streams.get(&file).copied() },
            // Its pages were reserved when it was issued (`reserve`).
            FileOp::Write => AppOp::Write { file, offset, len },
            FileOp::Fsync => AppOp::Fsync { file },
            // The file's pages go (the call returns when the I/O in flight on them is over),
            // then its blocks.
            FileOp::Delete => {
                assert!(!self.open_streams.contains_key(&file), "file {file:?} deleted while open");
                AppOp::Truncate { file, from: 0 }
            }
            FileOp::Meta(_) | FileOp::Done => {
                out.done.push(r);
                return Ok(());
            }
        };
        self.kernels[k].io.submit(now, r, app, &mut self.kout).map_err(|e| e.to_string())?;
        match call.op {
            FileOp::Write => {
                let (fs, fsout) = self.fs_out(t);
                fs.note_write(now, file, fsout)?
            }
            FileOp::Delete => {
                let (fs, fsout) = self.fs_out(t);
                fs.unlink(now, file, fsout)?;
                self.made_files.remove(&file);
                self.kernels[k].io.cache_mut().forget_file(file);
            }
            _ => {}
        }
        self.settle(now, k, t, out)
    }

    /// Buffered job `j` of tenant `t` will ask of its kernel at device offset `offset` one event
    /// from now: the page's index entry is loaded ahead (a hint; nothing changes).
    pub fn prefetch(&self, t: TenantId, j: JobId, offset: u64) {
        if self.jobs[j.index()].is_none() {
            return;
        }
        let (file, _) = self.job_file(j, offset);
        if self.shared.get(&file).is_some_and(|s| s.create.is_some()) {
            return; // not made yet: no pages
        }
        let k = self.of_tenant[t.index()];
        self.kernels[k].io.cache().prefetch(file, self.file_offset(t, file, offset));
    }

    /// A direct write or trim of tenant `t`'s raw region over `[offset, offset + len)`: the clean
    /// cached pages of its region it overwrites are dropped (a direct job of files drops its
    /// files' in [`Kernels::direct_map`]; its trims reach the device under the filesystem).
    pub fn direct_io(&mut self, now: SimTime, t: TenantId, op: IoOp, offset: u64, len: u64) -> Result<(), String> {
        if !matches!(op, IoOp::Write | IoOp::Trim) || len == 0 {
            return Ok(());
        }
        let file = FileId(t.index() as u32);
        let offset = self.file_offset(t, file, offset);
        self.drop_cached(now, self.of_tenant[t.index()], file, offset, len)
    }

    /// Device request `id` of tenant `t`'s kernel completed at `now`.
    pub fn device_done(
        &mut self,
        now: SimTime,
        t: TenantId,
        id: KernelDev,
        op: IoOp,
        out: &mut KernelsOut,
    ) -> Result<(), String> {
        let k = self.of_tenant[t.index()];
        match id {
            KernelDev::Cache(d) => {
                self.kernels[k].io.device_done(now, d, op, &mut self.kout).map_err(|e| e.to_string())?
            }
            KernelDev::Fs(f) => {
                self.ext4[t.index()].as_mut().expect("a filesystem").device_done(now, f, &mut self.fsout)?
            }
        }
        self.settle(now, k, t, out)
    }

    /// Kernel `k`'s scheduled wake-up at `now`: its flusher runs if it still wants to, and its
    /// filesystems' journals (their commit timers; on the flusher's periodic run, the home
    /// writes of metadata committed `dirty_expire_centisecs` ago).
    pub fn woke(&mut self, now: SimTime, k: usize, out: &mut KernelsOut) -> Result<(), String> {
        let kernel = &mut self.kernels[k];
        if kernel.armed.is_some_and(|a| a <= now) {
            kernel.armed = None;
        }
        let flush = kernel.io.wake_at().is_some_and(|w| w <= now);
        if flush {
            kernel.io.wake(now, &mut self.kout).map_err(|e| e.to_string())?;
        }
        let expire = Nanos::from_ms(self.cfg.pagecache.dirty_expire_centisecs * 10);
        let committed_by = (flush && now.0 >= expire.0).then(|| SimTime(now.0 - expire.0));
        for t in self.kernels[k].tenants.clone() {
            if let Some(fs) = &mut self.ext4[t] {
                if flush || fs.wake_at().is_some_and(|w| w <= now) {
                    fs.wake(now, committed_by, &mut self.fsout)?;
                    self.settle(now, k, TenantId(t as u16), out)?;
                }
            }
        }
        let t = TenantId(self.kernels[k].tenants[0] as u16);
        self.settle(now, k, t, out)
    }

    /// When kernel `k` wants to run (its flusher, its filesystems' commit timers), if no
    /// wake-up at or before then is scheduled: the caller schedules one then (never before
    /// `now`).
    pub fn arm(&mut self, now: SimTime, k: usize) -> Option<SimTime> {
        let kernel = &self.kernels[k];
        let journals = kernel.tenants.iter().filter_map(|&t| self.ext4[t].as_ref()?.wake_at());
        let want = kernel.io.wake_at().into_iter().chain(journals).min()?.max(now);
        let kernel = &mut self.kernels[k];
        if kernel.armed.is_some_and(|a| a <= want) {
            return None;
        }
        kernel.armed = Some(want);
        Some(want)
    }

    /// Hands on what kernel `k` produced (tenant `t` for what its filesystem produced): the page
    /// cache's device requests through its tenant's filesystem or straight to its region,
    /// the filesystem's completions back to the cache, until nothing is left.
    fn settle(&mut self, now: SimTime, k: usize, t: TenantId, out: &mut KernelsOut) -> Result<(), String> {
        self.take_fs(k, t, out);
        loop {
            // The buffers are taken and put back (cleared) so that their memory is reused.
            let mut done = std::mem::take(&mut self.cache_done);
            for (id, op) in done.drain(..) {
                self.kernels[k].io.device_done(now, id, op, &mut self.kout).map_err(|e| e.to_string())?;
            }
            self.cache_done = done;
            let mut kout = std::mem::take(&mut self.kout);
            if kout.device.is_empty() && kout.done.is_empty() && self.cache_done.is_empty() {
                self.kout = kout;
                return Ok(());
            }
            out.done.append(&mut kout.done);
            for d in &kout.device {
                let ft = self.tenant_of(d.file);
                match &mut self.ext4[ft.index()] {
                    Some(fs) if d.file.0 as usize >= self.regions.len() => {
                        fs.lower(now, d, &mut self.fsout)?;
                        self.take_fs(k, ft, out);
                    }
                    _ => {
                        let (offset, len) = self.device_range(d);
                        self.kernels[k].sent.count(d.op, len);
                        out.device.push(DeviceIo { id: KernelDev::Cache(d.id), tenant: ft, op: d.op, offset, len });
                    }
                }
            }
            kout.device.clear();
            debug_assert!(self.kout.device.is_empty() && self.kout.done.is_empty(), "lowering made no cache I/O");
            self.kout = kout;
        }
    }

    /// The tenant of page-cache file `file`.
    fn tenant_of(&self, file: FileId) -> TenantId {
        match self.file_tenant.get(file.0 as usize) {
            Some(&t) => t,
            None => *self.made_files.get(&file).expect("a file of a workload that exists"),
        }
    }

    /// Moves what tenant `t`'s filesystem produced to `out` and the cache's completions.
    fn take_fs(&mut self, k: usize, t: TenantId, out: &mut KernelsOut) {
        self.cache_done.append(&mut self.fsout.done);
        for d in self.fsout.device.drain(..) {
            self.kernels[k].sent.count(d.op, d.len);
            out.device.push(DeviceIo { id: KernelDev::Fs(d.id), tenant: t, op: d.op, offset: d.offset, len: d.len });
        }
    }

    /// Tenant `t`'s device offset `offset` as a byte of `file`: of its region, or of its job's
    /// file on its filesystem.
    fn file_offset(&self, t: TenantId, file: FileId, offset: u64) -> u64 {
        if file.0 as usize >= self.regions.len() {
            return self.ext4[t.index()].as_ref().expect("a filesystem").file_offset(file, offset);
        }
        let (start, len) = self.regions[t.index()];
        assert!(offset >= start && offset - start <= len, "offset {offset} is outside tenant {}'s region", t.index());
        offset - start
    }

    /// Where a request of a tenant's region is on the device: (offset, length), within it.
    fn device_range(&self, d: &DevIo) -> (u64, u64) {
        let (start, len) = self.regions[d.file.0 as usize];
        if d.op == IoOp::Flush {
            return (0, 0);
        }
        debug_assert!(d.offset < len, "a page the tenant's region does not have");
        (start + d.offset, d.len.min(len - d.offset))
    }

    /// The time the application's call takes after the kernel completed its request: the copy
    /// to or from its buffer (`page_copy` per page touched), or a metadata call's CPU time
    /// (`[kernel.calls]`; a delete's unlink once the I/O on its pages is over).
    pub fn call_time(&self, op: IoOp, offset: u64, len: u64, call: Option<FileCall>) -> Nanos {
        match call.map(|c| c.op) {
            Some(FileOp::Meta(m)) => return self.cfg.calls.of(m),
            Some(FileOp::Delete) => return self.cfg.calls.unlink,
            _ => {}
        }
        if !matches!(op, IoOp::Read | IoOp::Write) || len == 0 {
            return Nanos::ZERO;
        }
        let pages = (offset + len).div_ceil(PAGE_SIZE) - offset / PAGE_SIZE;
        Nanos(self.cfg.page_copy.0 * pages)
    }

    pub fn results(&self) -> Vec<KernelResult> {
        self.kernels
            .iter()
            .map(|k| {
                let c = k.io.cache();
                KernelResult {
                    tenants: k.tenants.clone(),
                    capacity_pages: c.config().capacity_pages,
                    page_cache: *c.stats(),
                    cached_pages: c.cached_pages(),
                    dirty_pages: c.dirty_pages(),
                    writeback_pages: c.writeback_pages(),
                    device: k.sent,
                    filesystems: k.tenants.iter().filter_map(|&t| Some(self.ext4[t].as_ref()?.result(t))).collect(),
                    unlinks: k.unlinks,
                    plug_merges: k.plug_merges,
                    nr_requests: self.cfg.nr_requests,
                    tag_waits: k.tags.waited,
                }
            })
            .collect()
    }

    pub fn check_invariants(&self) {
        for k in &self.kernels {
            k.io.check_invariants();
            k.tags.check_invariants();
        }
        for fs in self.ext4.iter().flatten() {
            fs.check_invariants();
        }
    }
}

/// The directory of a job's file `path` (`/`-separated) on tenant `t`'s filesystem `fs`, and the
/// file's name: the directories on the path are made before the run, once each (`dirs`).
fn parent_dir<'p>(
    fs: &mut Ext4,
    dirs: &mut BTreeMap<(TenantId, String), Ino>,
    t: TenantId,
    path: &'p str,
) -> Result<(Ino, &'p str), String> {
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    let Some((name, parents)) = parts.split_last() else {
        return Err(format!("tenant {}: a job's file has no name ('{path}')", t.index()));
    };
    let mut dir = fs.root();
    for k in 0..parents.len() {
        let key = (t, parents[..=k].join("/"));
        dir = match dirs.get(&key) {
            Some(&d) => d,
            None => {
                let d = fs.setup_dir(Some(dir), parents[k]).map_err(|e| format!("tenant {}: {e}", t.index()))?;
                dirs.insert(key, d);
                d
            }
        };
    }
    Ok((dir, name))
}

/// The filesystem on each tenant's region (`[kernel] filesystem`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Filesystem {
    /// None: buffered jobs read and write the region as a block device.
    #[default]
    None,
    /// ext4 (`kernel/ext4.rs`).
    Ext4,
}
