//! Where served data lives: a sparse in-memory store or a backing file.
//!
//! A [`Store`] is shared by every connection thread: all methods take `&self` and may run
//! concurrently. Operations on disjoint byte ranges never disturb each other; operations on the
//! same bytes may interleave (as on a real disk, which NBD permits), but every byte read is a byte
//! some write or zeroing put there, never a torn mix from a lost update.
//!
//! A store trusts no caller: a range outside the store is an `InvalidInput` error, never a panic.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

/// Bytes served to NBD clients.
pub trait Store: Send + Sync {
    /// The size in bytes; valid ranges lie within `0..size`.
    fn size(&self) -> u64;
    /// Fills `buf` from `offset`. Bytes never written, trimmed or zeroed read as zero.
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `data` at `offset`.
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes `len` bytes from `offset` read as zero. With `punch` (a trim, or a write-zeroes
    /// without `NO_HOLE`) the store may deallocate them; without it, it keeps them provisioned
    /// where that means anything.
    fn zero(&self, offset: u64, len: u64, punch: bool) -> io::Result<()>;
    /// Makes every completed write durable (for a backing file: `fdatasync`).
    fn flush(&self) -> io::Result<()>;
}

/// `Ok` if `offset..offset + len` lies within a store of `size` bytes.
fn check_range(size: u64, offset: u64, len: u64) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("range of {len} bytes at offset {offset} lies outside the store's {size} bytes"),
        )),
    }
}

/// Whether every byte is zero; branch-free within each 4 KiB so it vectorises.
fn is_zero(bytes: &[u8]) -> bool {
    bytes.chunks(4096).all(|c| c.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

// ---------------------------------------------------------------------------------------------
// Memory

/// Bytes of one [`MemStore`] allocation unit.
pub const MEM_CHUNK: usize = 64 * 1024;
/// Independent locks in a [`MemStore`]; consecutive chunks fall in different shards.
const MEM_SHARDS: usize = 64;

type Chunks = HashMap<u64, Box<[u8]>>;

/// A sparse store in memory: [`MEM_CHUNK`]-byte chunks, allocated on the first write of nonzero
/// data and freed when zeroed or trimmed whole (or found all zero after a partial zeroing).
///
/// Chunks live in 64 hash maps (shards), each behind its own reader-writer lock, chosen by the
/// chunk's index; a chunk is only ever read or changed under its shard's lock, so a partial
/// write's read-modify-write of its chunk cannot lose a concurrent write to other bytes of that
/// chunk. Nothing is kept per byte of the export: a 64 GiB store holding 4 KiB uses one chunk.
///
/// The store is volatile: `flush` has nothing to do, and `punch` makes no difference (memory is
/// never provisioned ahead of a write, so zeroing always frees what it can).
pub struct MemStore {
    size: u64,
    shards: Box<[RwLock<Chunks>]>,
    chunks: AtomicU64,
}

impl std::fmt::Debug for MemStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemStore").field("size", &self.size).field("allocated", &self.allocated()).finish()
    }
}

/// One chunk's share of a byte range: the chunk, the offset within it, the offset within the
/// caller's buffer, and the length.
#[derive(Clone, Copy)]
struct Piece {
    chunk: u64,
    at: usize,
    buf: usize,
    len: usize,
}

impl Piece {
    fn whole(&self) -> bool {
        self.len == MEM_CHUNK
    }
}

/// The pieces of `offset..offset + len`, chunk by chunk (the range has been checked).
fn pieces(offset: u64, len: u64) -> impl Iterator<Item = Piece> {
    let chunk = MEM_CHUNK as u64;
    let end = offset + len;
    let mut pos = offset;
    std::iter::from_fn(move || {
        if pos >= end {
            return None;
        }
        let at = pos % chunk;
        let n = (chunk - at).min(end - pos);
        let p = Piece { chunk: pos / chunk, at: at as usize, buf: (pos - offset) as usize, len: n as usize };
        pos += n;
        Some(p)
    })
}

impl MemStore {
    /// An empty (all-zero) store of `size` bytes; allocates nothing per byte.
    pub fn new(size: u64) -> Self {
        MemStore {
            size,
            shards: (0..MEM_SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
            chunks: AtomicU64::new(0),
        }
    }

    /// Bytes of memory held for data (whole chunks).
    pub fn allocated(&self) -> u64 {
        self.chunks.load(Ordering::Relaxed) * MEM_CHUNK as u64
    }

    fn shard(&self, chunk: u64) -> &RwLock<Chunks> {
        &self.shards[(chunk % MEM_SHARDS as u64) as usize]
    }

    fn free(&self, map: &mut Chunks, chunk: u64) {
        if map.remove(&chunk).is_some() {
            self.chunks.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

// A lock is poisoned only by a panic while holding it; the code under these locks copies bytes
// and cannot leave a chunk half-updated in a way that matters more than a torn concurrent write,
// so a poisoned lock is simply taken.
impl Store for MemStore {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size, offset, buf.len() as u64)?;
        for p in pieces(offset, buf.len() as u64) {
            let out = &mut buf[p.buf..p.buf + p.len];
            let map = self.shard(p.chunk).read().unwrap_or_else(PoisonError::into_inner);
            match map.get(&p.chunk) {
                Some(c) => out.copy_from_slice(&c[p.at..p.at + p.len]),
                None => out.fill(0),
            }
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(self.size, offset, data.len() as u64)?;
        for p in pieces(offset, data.len() as u64) {
            let src = &data[p.buf..p.buf + p.len];
            let mut map = self.shard(p.chunk).write().unwrap_or_else(PoisonError::into_inner);
            match map.get_mut(&p.chunk) {
                Some(c) => c[p.at..p.at + p.len].copy_from_slice(src),
                // Zeros over a chunk never written: nothing to keep.
                None if is_zero(src) => {}
                None => {
                    let mut c = vec![0u8; MEM_CHUNK].into_boxed_slice();
                    c[p.at..p.at + p.len].copy_from_slice(src);
                    map.insert(p.chunk, c);
                    self.chunks.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }

    fn zero(&self, offset: u64, len: u64, _punch: bool) -> io::Result<()> {
        check_range(self.size, offset, len)?;
        for p in pieces(offset, len) {
            let mut map = self.shard(p.chunk).write().unwrap_or_else(PoisonError::into_inner);
            if p.whole() {
                self.free(&mut map, p.chunk);
                continue;
            }
            let Some(c) = map.get_mut(&p.chunk) else { continue };
            c[p.at..p.at + p.len].fill(0);
            if is_zero(c) {
                self.free(&mut map, p.chunk);
            }
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// File

#[cfg(unix)]
pub use file::FileStore;

#[cfg(unix)]
mod file {
    use super::{check_range, Store};
    use std::fs::{File, OpenOptions};
    use std::io;
    use std::os::unix::fs::FileExt;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Zeros written where the file system cannot zero a range itself.
    static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

    /// A store in a regular file, byte `i` of the export at byte `i` of the file.
    ///
    /// Reads and writes are positioned (`pread`/`pwrite`), so threads share the file without a
    /// lock. Zeroing punches a hole (with `punch`) or zeroes the range in place (without), using
    /// `fallocate` where the file system supports it and writing zeros where it does not. Bytes
    /// past the end of a file someone else shortened read as zero.
    ///
    /// The store holds an exclusive `flock` on the file while it is open: two stores on one file
    /// (two servers) would overwrite each other's data while each model believed its own history.
    #[derive(Debug)]
    pub struct FileStore {
        file: File,
        size: u64,
        /// `FALLOC_FL_PUNCH_HOLE` failed as unsupported once: do not ask again.
        no_punch: AtomicBool,
        /// `FALLOC_FL_ZERO_RANGE` failed as unsupported once: do not ask again.
        no_zero_range: AtomicBool,
    }

    impl FileStore {
        /// Opens the file at `path` as a store of `size` bytes, creating it if missing and
        /// extending it (sparsely, with `set_len`) if shorter. A file longer than `size` is
        /// refused with `InvalidInput` rather than served in part or cut short: either would
        /// quietly hide or destroy data. Anything but a regular file is refused the same way. A
        /// file another store (in this process or another) holds is refused with `WouldBlock`,
        /// naming the holder where the system says who it is; nothing in it is changed.
        ///
        /// The messages of these refusals say what is wrong and what is allowed, without the
        /// path, which the caller names.
        pub fn open(path: &Path, size: u64) -> io::Result<FileStore> {
            let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
            let meta = file.metadata()?;
            if !meta.is_file() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "it is not a regular file: expected a regular file (created if missing)",
                ));
            }
            lock_exclusive(&file, &meta)?;
            if meta.len() > size {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "it holds {} bytes, more than the drive's {size}: expected at most the drive's capacity (a longer file is neither served in part nor cut short)",
                        meta.len()
                    ),
                ));
            }
            if meta.len() < size {
                file.set_len(size)?;
            }
            Ok(FileStore { file, size, no_punch: AtomicBool::new(false), no_zero_range: AtomicBool::new(false) })
        }

        /// The same store, always writing zeros instead of asking the file system.
        #[cfg(test)]
        pub(super) fn without_fallocate(self) -> Self {
            self.no_punch.store(true, Ordering::Relaxed);
            self.no_zero_range.store(true, Ordering::Relaxed);
            self
        }

        /// Whether punching holes has not (yet) proved unsupported.
        #[cfg(test)]
        pub(super) fn may_punch(&self) -> bool {
            cfg!(target_os = "linux") && !self.no_punch.load(Ordering::Relaxed)
        }

        /// Zeroes a range by writing zeros.
        fn write_zeros(&self, mut offset: u64, len: u64) -> io::Result<()> {
            let end = offset + len;
            while offset < end {
                let n = (end - offset).min(ZEROS.len() as u64) as usize;
                self.file.write_all_at(&ZEROS[..n], offset)?;
                offset += n as u64;
            }
            Ok(())
        }

        /// Tries `fallocate` with `mode` unless it already proved unsupported; `Ok(false)` if the
        /// file system cannot do it (the caller then writes zeros).
        #[cfg(target_os = "linux")]
        fn try_fallocate(&self, mode: libc::c_int, unsupported: &AtomicBool, offset: u64, len: u64) -> io::Result<bool> {
            use std::os::fd::AsRawFd;
            if unsupported.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
                return Ok(false);
            };
            loop {
                // SAFETY: fallocate takes a descriptor that `self.file` keeps open for the whole
                // call and plain integers; it reads and writes none of this process's memory.
                let r = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, off, n) };
                if r == 0 {
                    return Ok(true);
                }
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EOPNOTSUPP | libc::ENOSYS) => {
                        unsupported.store(true, Ordering::Relaxed);
                        return Ok(false);
                    }
                    // The range was checked: EINVAL here means the file system refuses the mode.
                    Some(libc::EINVAL) => return Ok(false),
                    _ => return Err(err),
                }
            }
        }
    }

    /// Takes an exclusive `flock` on `file`, held until the file is closed, without waiting: a
    /// file locked elsewhere is refused at once with `WouldBlock`.
    fn lock_exclusive(file: &File, meta: &std::fs::Metadata) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        loop {
            // SAFETY: flock takes a descriptor that `file` keeps open for the whole call and
            // plain integers.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EWOULDBLOCK) => {
                    let holder = lock_holder(meta).map_or(String::new(), |(pid, name)| format!(" (PID {pid}, {name})"));
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!(
                            "in use by another process{holder}, which holds a lock on it: one backing file serves one server at a time (two would overwrite each other's data)"
                        ),
                    ));
                }
                _ => return Err(err),
            }
        }
    }

    /// The process holding a `flock` on the file `meta` describes, and its name, from
    /// `/proc/locks` (Linux); `None` where the system does not say.
    fn lock_holder(meta: &std::fs::Metadata) -> Option<(u32, String)> {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::MetadataExt;
            let locks = std::fs::read_to_string("/proc/locks").ok()?;
            // `1: FLOCK  ADVISORY  WRITE 1234 fe:00:5701639 0 EOF`: the device's major and
            // minor numbers in hex, then the inode. Lines with `->` are waiters.
            let dev = meta.dev();
            let file = format!("{:02x}:{:02x}:{}", libc::major(dev), libc::minor(dev), meta.ino());
            let pid: u32 = locks.lines().find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 6 && f[1] == "FLOCK" && f[5] == file).then(|| f[4].parse().ok()).flatten()
            })?;
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).map_or_else(|_| "?".to_string(), |n| n.trim().to_string());
            Some((pid, name))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = meta;
            None
        }
    }

    impl Store for FileStore {
        fn size(&self) -> u64 {
            self.size
        }

        fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            check_range(self.size, offset, buf.len() as u64)?;
            let mut done = 0;
            while done < buf.len() {
                match self.file.read_at(&mut buf[done..], offset + done as u64) {
                    // The file ends early: the rest was never written.
                    Ok(0) => {
                        buf[done..].fill(0);
                        break;
                    }
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }

        fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            check_range(self.size, offset, data.len() as u64)?;
            self.file.write_all_at(data, offset)
        }

        fn zero(&self, offset: u64, len: u64, punch: bool) -> io::Result<()> {
            check_range(self.size, offset, len)?;
            if len == 0 {
                return Ok(());
            }
            #[cfg(target_os = "linux")]
            {
                let (mode, unsupported) = if punch {
                    (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, &self.no_punch)
                } else {
                    (libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE, &self.no_zero_range)
                };
                if self.try_fallocate(mode, unsupported, offset, len)? {
                    return Ok(());
                }
            }
            #[cfg(not(target_os = "linux"))]
            let _ = (punch, &self.no_punch, &self.no_zero_range);
            self.write_zeros(offset, len)
        }

        fn flush(&self) -> io::Result<()> {
            self.file.sync_data()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::PathBuf;
    use std::sync::atomic::AtomicUsize;

    /// A fresh path under the temporary directory, removed when dropped.
    struct TempPath(PathBuf);

    impl TempPath {
        fn new(name: &str) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("flashmux-store-{}-{name}-{n}", std::process::id()));
            let _ = std::fs::remove_file(&p);
            TempPath(p)
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    const SIZE: u64 = 1 << 20;

    #[derive(Clone, Debug)]
    enum Op {
        Write { offset: u64, len: usize, seed: u8 },
        Zero { offset: u64, len: u64, punch: bool },
        Read { offset: u64, len: usize },
    }

    /// Offsets and lengths that are mostly in range, unaligned, often crossing chunk boundaries,
    /// sometimes whole chunks, sometimes past the end.
    fn op() -> impl Strategy<Value = Op> {
        let offset = prop_oneof![
            0..SIZE,
            (0..SIZE / MEM_CHUNK as u64).prop_map(|c| c * MEM_CHUNK as u64),
            (1..SIZE / MEM_CHUNK as u64, 0..64u64).prop_map(|(c, d)| c * MEM_CHUNK as u64 - d),
            SIZE - 16..SIZE + 16,
        ];
        let len = prop_oneof![0..200usize, 0..3 * MEM_CHUNK, Just(MEM_CHUNK), Just(2 * MEM_CHUNK)];
        prop_oneof![
            (offset.clone(), len.clone(), any::<u8>()).prop_map(|(offset, len, seed)| Op::Write { offset, len, seed }),
            (offset.clone(), len.clone(), any::<bool>())
                .prop_map(|(offset, len, punch)| Op::Zero { offset, len: len as u64, punch }),
            (offset, len).prop_map(|(offset, len)| Op::Read { offset, len }),
        ]
    }

    /// Data that is not all zero (unless `seed` makes it so for a few bytes).
    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1).collect()
    }

    /// Applies `ops` to `store` and to a plain vector; every read and a final full read agree.
    fn check_against_reference(store: &dyn Store, ops: &[Op]) -> Result<(), TestCaseError> {
        let mut reference = vec![0u8; SIZE as usize];
        for op in ops {
            match *op {
                Op::Write { offset, len, seed } => {
                    let data = pattern(len, seed);
                    let r = store.write(offset, &data);
                    if offset + len as u64 > SIZE {
                        prop_assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);
                    } else {
                        r.unwrap();
                        reference[offset as usize..offset as usize + len].copy_from_slice(&data);
                    }
                }
                Op::Zero { offset, len, punch } => {
                    let r = store.zero(offset, len, punch);
                    if offset + len > SIZE {
                        prop_assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);
                    } else {
                        r.unwrap();
                        reference[offset as usize..(offset + len) as usize].fill(0);
                    }
                }
                Op::Read { offset, len } => {
                    let mut buf = vec![0xee; len];
                    let r = store.read(offset, &mut buf);
                    if offset + len as u64 > SIZE {
                        prop_assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);
                    } else {
                        r.unwrap();
                        prop_assert!(buf == reference[offset as usize..offset as usize + len], "read at {}", offset);
                    }
                }
            }
        }
        let mut all = vec![0xee; SIZE as usize];
        store.read(0, &mut all).unwrap();
        prop_assert!(all == reference);
        Ok(())
    }

    proptest! {
        #[test]
        fn mem_store_reads_what_a_plain_vector_would(ops in proptest::collection::vec(op(), 1..40)) {
            let store = MemStore::new(SIZE);
            check_against_reference(&store, &ops)?;
            prop_assert!(store.allocated() <= SIZE);
        }
    }

    #[cfg(unix)]
    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn file_store_reads_what_a_plain_vector_would(
            ops in proptest::collection::vec(op(), 1..40),
            fallocate in any::<bool>(),
        ) {
            let path = TempPath::new("prop");
            let store = FileStore::open(&path.0, SIZE).unwrap();
            let store = if fallocate { store } else { store.without_fallocate() };
            check_against_reference(&store, &ops)?;
        }
    }

    #[test]
    fn out_of_range_is_invalid_input_never_a_panic() {
        let mem = MemStore::new(SIZE);
        #[cfg(unix)]
        let path = TempPath::new("range");
        #[cfg(unix)]
        let file = FileStore::open(&path.0, SIZE).unwrap();
        let stores: Vec<&dyn Store> = vec![
            &mem,
            #[cfg(unix)]
            &file,
        ];
        for s in stores {
            let bad = |r: io::Result<()>| assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);
            bad(s.read(SIZE, &mut [0]));
            bad(s.read(u64::MAX, &mut [0; 2]));
            bad(s.write(SIZE - 1, &[1, 2]));
            bad(s.write(u64::MAX, &[1]));
            bad(s.zero(SIZE, 1, true));
            bad(s.zero(1, u64::MAX, false));
            bad(s.zero(u64::MAX, u64::MAX, true));
            // Empty ranges at the very end are fine.
            s.read(SIZE, &mut []).unwrap();
            s.write(SIZE, &[]).unwrap();
            s.zero(SIZE, 0, true).unwrap();
            s.flush().unwrap();
        }
    }

    #[test]
    fn mem_store_stays_sparse_and_frees_zeroed_chunks() {
        let store = MemStore::new(64 << 30);
        assert_eq!(store.allocated(), 0);
        let gib = 1u64 << 30;
        store.write(gib, &[7; 4096]).unwrap();
        assert_eq!(store.allocated(), MEM_CHUNK as u64);
        // Zeros over chunks never written allocate nothing.
        store.write(2 * gib, &[0; 3 * MEM_CHUNK]).unwrap();
        assert_eq!(store.allocated(), MEM_CHUNK as u64);
        // A write across a chunk boundary holds both chunks.
        store.write(3 * gib - 10, &[9; 20]).unwrap();
        assert_eq!(store.allocated(), 3 * MEM_CHUNK as u64);
        // Zeroing part of a chunk keeps it while it still holds data...
        store.zero(gib, 2048, true).unwrap();
        assert_eq!(store.allocated(), 3 * MEM_CHUNK as u64);
        // ...and frees it once all of it is zero, punch or not.
        store.zero(gib + 2048, 2048, false).unwrap();
        assert_eq!(store.allocated(), 2 * MEM_CHUNK as u64);
        // Trimming a range covering whole chunks frees them.
        store.zero(3 * gib - MEM_CHUNK as u64, 2 * MEM_CHUNK as u64, true).unwrap();
        assert_eq!(store.allocated(), 0);
        let mut buf = [1u8; 64];
        store.read(3 * gib - 32, &mut buf).unwrap();
        assert_eq!(buf, [0; 64]);
        store.read(64 * gib - 64, &mut buf).unwrap();
        assert_eq!(buf, [0; 64]);
    }

    /// Eight threads write, zero and rewrite interleaved, unaligned stripes (several per chunk,
    /// some across chunk boundaries) of the same region at once; each stripe ends up exactly as
    /// its own thread last left it.
    fn disjoint_writers_never_disturb_each_other(store: &dyn Store) {
        const THREADS: usize = 8;
        const STRIPE: usize = 1000;
        const ROUNDS: usize = 40;
        let stripes = store.size() as usize / STRIPE;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    for round in 0..ROUNDS {
                        for i in (t..stripes).step_by(THREADS) {
                            let offset = (i * STRIPE) as u64;
                            if (i + round) % 5 == 0 {
                                store.zero(offset, STRIPE as u64, round % 2 == 0).unwrap();
                            } else {
                                store.write(offset, &pattern(STRIPE, (t * ROUNDS + round) as u8)).unwrap();
                            }
                        }
                    }
                });
            }
        });
        let mut buf = vec![0; STRIPE];
        for i in 0..stripes {
            let t = i % THREADS;
            let last = ROUNDS - 1;
            let want = if (i + last) % 5 == 0 { vec![0; STRIPE] } else { pattern(STRIPE, (t * ROUNDS + last) as u8) };
            store.read((i * STRIPE) as u64, &mut buf).unwrap();
            assert!(buf == want, "stripe {i}");
        }
    }

    #[test]
    fn mem_store_concurrent_disjoint_writers() {
        disjoint_writers_never_disturb_each_other(&MemStore::new(4 << 20));
    }

    #[cfg(unix)]
    #[test]
    fn file_store_concurrent_disjoint_writers() {
        let path = TempPath::new("threads");
        disjoint_writers_never_disturb_each_other(&FileStore::open(&path.0, 1 << 20).unwrap());
    }

    #[cfg(unix)]
    #[test]
    fn file_store_data_survives_reopening() {
        let path = TempPath::new("reopen");
        {
            let store = FileStore::open(&path.0, SIZE).unwrap();
            assert_eq!(std::fs::metadata(&path.0).unwrap().len(), SIZE);
            store.write(12345, b"flashmux").unwrap();
            store.write(SIZE - 3, b"end").unwrap();
            store.zero(12345, 5, true).unwrap();
            store.flush().unwrap();
        }
        let store = FileStore::open(&path.0, SIZE).unwrap();
        let mut buf = [0xee; 8];
        store.read(12345, &mut buf).unwrap();
        assert_eq!(&buf, b"\0\0\0\0\0mux");
        let mut end = [0; 3];
        store.read(SIZE - 3, &mut end).unwrap();
        assert_eq!(&end, b"end");
        drop(store);
        // Growing keeps the data and reads zeros beyond it.
        let store = FileStore::open(&path.0, 2 * SIZE).unwrap();
        let mut buf = [0xee; 6];
        store.read(SIZE - 3, &mut buf).unwrap();
        assert_eq!(&buf, b"end\0\0\0");
        drop(store);
        // A file longer than the store is refused, and left as it is.
        let err = FileStore::open(&path.0, SIZE).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(std::fs::metadata(&path.0).unwrap().len(), 2 * SIZE);
    }

    #[cfg(unix)]
    #[test]
    fn file_store_punching_deallocates() {
        use std::os::unix::fs::MetadataExt;
        let path = TempPath::new("punch");
        let store = FileStore::open(&path.0, SIZE).unwrap();
        store.write(0, &pattern(SIZE as usize, 3)).unwrap();
        store.flush().unwrap();
        let blocks = |p: &TempPath| std::fs::metadata(&p.0).unwrap().blocks();
        let full = blocks(&path);
        assert!(full >= SIZE / 512, "{full} blocks");
        store.zero(0, SIZE, true).unwrap();
        store.flush().unwrap();
        if store.may_punch() {
            assert!(blocks(&path) < full, "{} of {full} blocks after punching", blocks(&path));
        }
        let mut buf = vec![1; SIZE as usize];
        store.read(0, &mut buf).unwrap();
        assert!(is_zero(&buf));
        assert_eq!(std::fs::metadata(&path.0).unwrap().len(), SIZE);
    }

    #[cfg(unix)]
    #[test]
    fn file_store_reads_zeros_past_a_shortened_file() {
        let path = TempPath::new("short");
        let store = FileStore::open(&path.0, SIZE).unwrap();
        store.write(0, &[5; 100]).unwrap();
        // Someone else cuts the file short under the store.
        std::fs::OpenOptions::new().write(true).open(&path.0).unwrap().set_len(50).unwrap();
        let mut buf = [0xee; 200];
        store.read(0, &mut buf).unwrap();
        assert_eq!(&buf[..50], &[5; 50]);
        assert_eq!(&buf[50..], &[0; 150]);
        store.read(SIZE - 200, &mut buf).unwrap();
        assert_eq!(buf, [0; 200]);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_store_holds_its_file_alone_until_closed() {
        let path = TempPath::new("lock");
        let first = FileStore::open(&path.0, SIZE).unwrap();
        first.write(0, b"mine").unwrap();
        let err = FileStore::open(&path.0, SIZE).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "{err}");
        #[cfg(target_os = "linux")]
        assert!(err.to_string().contains(&format!("in use by another process (PID {}, ", std::process::id())), "{err}");
        // The refused open changed nothing.
        let mut buf = [0u8; 4];
        first.read(0, &mut buf).unwrap();
        assert_eq!(&buf, b"mine");
        drop(first);
        FileStore::open(&path.0, SIZE).unwrap().read(0, &mut buf).unwrap();
        assert_eq!(&buf, b"mine");
    }

    #[cfg(unix)]
    #[test]
    fn file_store_refuses_what_is_not_a_regular_file() {
        let err = FileStore::open(&std::env::temp_dir(), SIZE).unwrap_err();
        // Opening a directory for writing fails in the OS or in the check; never a panic.
        assert!(matches!(err.kind(), io::ErrorKind::InvalidInput | io::ErrorKind::IsADirectory | io::ErrorKind::PermissionDenied), "{err}");
    }
}
