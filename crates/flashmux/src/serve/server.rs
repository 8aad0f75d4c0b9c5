//! The NBD server: sockets and threads around the [`Engine`].
//!
//! ```text
//!  client ─► connection thread ──(queue)──► model thread ──► reply at the model's time
//!             handshake, framing,            submit at arrival,
//!             data to/from the store         advance to now, answer what is due
//! ```
//! With `--io-threads per-connection`, each connection has its own thread: it negotiates the
//! export, reads requests, checks them, stores written data, and hands each request to the
//! model thread through a queue. The model thread is the model's only owner: it submits each
//! request at the time it arrived, processes the model's events as the wall clock reaches
//! them, and writes each reply when the model completes the request (reads take their data
//! from the store then). Between events it sleeps, and spins for the last stretch, so replies
//! leave within microseconds of their time; the difference is measured and reported.
//!
//! Data goes to the store when a write arrives, before the request enters the model, so a
//! write is in the store before it is acknowledged; a FUA write or a flush makes the store
//! durable before it enters the model. A read takes its data when it is answered.
//!
//! With `--timing off`, connection threads answer at once from the store, without the model:
//! the server's own ceiling.
//!
//! Replies are bounded, and a client that reads them late is made to wait, never dropped: each
//! request read reserves the bytes of its reply (its header, and a read's data) until the
//! client's socket has taken them, so replies still to come from the model count as well as
//! replies waiting for the socket. A connection that would owe more than
//! [`REPLY_BYTES_PER_CONNECTION`], or all connections together more than `--reply-memory`, reads
//! no further request until its clients read; the socket buffers then push back on the clients
//! (the TCP window, or the Unix socket's buffer). Only a client that takes none of its replies
//! for the idle timeout is dropped, and every drop is logged and counted.
//!
//! A handshake has a deadline for the whole of it, and connections in their handshake do not
//! count against `--max-connections`: they have a pool of their own of the same size, and when
//! it is full a new connection closes the one that has been negotiating longest. Connections
//! that never negotiate cannot lock out a client that does.

mod single;

use super::engine::{Due, Engine};
use super::nbd::{self, Command, Limits, Request};
use super::store::{FileStore, MemStore, Store};
use crate::config::Scenario;
use crate::device::IoOp;
use crate::metrics::{RunResults, ServeResult};
use crate::sim::SimError;
use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// Where the server listens.
#[derive(Clone, Debug)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
            Listen::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// How the server's threads are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoThreads {
    /// A thread per connection, handing requests to one model thread.
    PerConnection,
    /// One thread for every connection's I/O and the model: QEMU's one I/O thread under its
    /// global lock (paper A's baseline).
    Single,
}

impl IoThreads {
    pub fn name(self) -> &'static str {
        match self {
            IoThreads::PerConnection => "per-connection",
            IoThreads::Single => "single",
        }
    }
}

/// What `flashmux serve` was asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    pub listen: Listen,
    pub io_threads: IoThreads,
    /// Reply at the model's completion time (else at once, data only).
    pub timing: bool,
    /// Keep the data in this file (else in memory).
    pub backing: Option<PathBuf>,
    /// Print each export's IOPS, bandwidth, latency and GC this often.
    pub stats_interval: Option<Duration>,
    /// Connections served at once (past their handshake); more are refused. As many again may
    /// be in their handshake.
    pub max_connections: usize,
    /// Reply bytes all connections together may owe their clients (at least
    /// [`MIN_REPLY_MEMORY`]); reading pauses at the bound.
    pub reply_memory: u64,
    /// A client whose socket takes none of its replies for this long is dropped.
    pub idle_timeout: Duration,
    /// A handshake must be over this long after the connection was accepted.
    pub handshake_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Sim(#[from] SimError),
    /// A value given on the command line (`--backing`, `--socket`, `--listen`) cannot be used;
    /// the message names the flag and the value, and says what is allowed.
    #[error("{0}")]
    BadInput(String),
    /// The server could not do its own work (start a thread, create a socket pair).
    #[error("{what}: {error}")]
    Io { what: String, error: io::Error },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> ServeError {
    let what = what.into();
    move |error| ServeError::Io { what, error }
}

/// Block sizes advertised to clients: the model's 512-byte sector, 4 KiB preferred, and at most
/// 32 MiB of data in one request (what the reference server and most clients use).
pub const LIMITS: Limits = Limits { min_block: 512, preferred_block: 4096, max_payload: 32 << 20 };

/// The longest reply: its header and the most data one request may ask for.
pub const MAX_REPLY_BYTES: u64 = nbd::SIMPLE_REPLY_LEN as u64 + LIMITS.max_payload as u64;
/// Reply bytes one connection may owe its client: two of the longest replies, so that a client
/// reading 32 MiB blocks has one on its way while the model completes the next.
pub const REPLY_BYTES_PER_CONNECTION: u64 = 2 * MAX_REPLY_BYTES;
/// The least `--reply-memory`: room for two of the longest replies.
pub const MIN_REPLY_MEMORY: u64 = 64 << 20;
/// `--reply-memory` when not given.
pub const DEFAULT_REPLY_MEMORY: u64 = 1 << 30;
/// `--idle-timeout` when not given.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// `--handshake-timeout` when not given: a real client's handshake takes milliseconds (QEMU's
/// NBD server allows 10 s too).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The writer thread of a connection hands its replies to the socket in pieces of at most this,
/// so the room they held is given back as they leave.
const WRITE_CHUNK: usize = 1 << 20;
/// What the socket does not take of a reply at least this long is queued as the reply's own
/// buffer (the sender takes the connection's spare one instead); less is copied.
const HAND_OVER: usize = 64 << 10;
/// Threads waiting for room look at the connection's state at least this often.
const ROOM_POLL: Duration = Duration::from_millis(100);

/// `d` in seconds, for messages: `10 s`, `0.5 s`.
fn in_secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// The transmission flags every export advertises: flush, FUA, trim and write-zeroes are
/// served, and several connections to one export see one another's completed writes (they
/// share the store), so multi-conn is safe.
fn transmission_flags() -> u16 {
    nbd::FLAG_HAS_FLAGS | nbd::FLAG_SEND_FLUSH | nbd::FLAG_SEND_FUA | nbd::FLAG_SEND_TRIM | nbd::FLAG_SEND_WRITE_ZEROES | nbd::FLAG_CAN_MULTI_CONN
}

/// A connected socket of either family.
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }
    fn shutdown(&self, how: Shutdown) {
        // Shutting down a socket the peer already closed fails harmlessly.
        let _ = match self {
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tcp(s) => s.shutdown(how),
        };
    }
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(t),
            Stream::Tcp(s) => s.set_write_timeout(t),
        }
    }
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_nonblocking(on),
            Stream::Tcp(s) => s.set_nonblocking(on),
        }
    }
    fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A stream whose reads and writes fail once `deadline` has passed: the whole handshake is
/// bounded, not each read (a client sending one byte at a time would otherwise never time out).
struct Deadlined<'a> {
    stream: &'a mut Stream,
    deadline: Instant,
}

impl Deadlined<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        Ok(left)
    }
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_write_timeout(Some(left))?;
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl Listener {
    /// Listens at `at`; returns where it really listens (a TCP port 0 becomes the port given).
    fn bind(at: &Listen) -> Result<(Listener, Listen), ServeError> {
        match at {
            Listen::Unix(path) => {
                let bad = |why: String| ServeError::BadInput(format!("--socket {}: {why}", path.display()));
                // A socket left by a server that is gone (nothing accepts on it) is replaced;
                // a live one, or anything that is not a socket, is left alone.
                if let Ok(meta) = std::fs::symlink_metadata(path) {
                    use std::os::unix::fs::FileTypeExt;
                    let t = meta.file_type();
                    if !t.is_socket() {
                        return Err(bad(format!(
                            "the path exists and is not a socket ({}): not removing it; expected a new path, or a socket left by a server that is gone",
                            file_kind(&t)
                        )));
                    }
                    if UnixStream::connect(path).is_ok() {
                        return Err(bad("a server is already listening on it: expected a path no server is using".into()));
                    }
                    std::fs::remove_file(path).map_err(|e| bad(format!("cannot remove the stale socket there: {e}")))?;
                }
                let l = UnixListener::bind(path).map_err(|e| bad(path_error(path, &e, "cannot listen there")))?;
                Ok((Listener::Unix(l), at.clone()))
            }
            Listen::Tcp(addr) => {
                let bad = |e: io::Error| ServeError::BadInput(format!("--listen {addr}: cannot listen there: {e}"));
                let l = TcpListener::bind(addr).map_err(bad)?;
                let actual = l.local_addr().map_err(bad)?;
                Ok((Listener::Tcp(l), Listen::Tcp(actual)))
            }
        }
    }

    fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| {
                // Replies are small and latency matters: no Nagle delay.
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
        }
    }
}

/// What a file that is in the way is, for messages.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Why a path given on the command line could not be opened or created, in words: a missing
/// directory is named, other errors are said as the system says them after `doing`.
fn path_error(path: &std::path::Path, e: &io::Error, doing: &str) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR) => match path.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
            Some(d) => format!("the directory {} does not exist: expected a path in an existing directory", d.display()),
            None => format!("{doing}: {e}"),
        },
        Some(libc::EROFS) => "it is on a read-only file system: expected a path this server may write".into(),
        Some(libc::EISDIR) => "it is a directory: expected a regular file (created if missing)".into(),
        Some(libc::EACCES | libc::EPERM) => format!("{doing} ({e}): expected a path this server may read and write"),
        _ => format!("{doing}: {e}"),
    }
}

/// `--backing`'s file could not be used: the store's own refusals (not a regular file, longer
/// than the drive, locked by another server) and the system's, in one message.
fn backing_error(path: &std::path::Path, e: &io::Error) -> ServeError {
    let why = match e.kind() {
        // The store's own messages say what is wrong and what is allowed.
        io::ErrorKind::InvalidInput | io::ErrorKind::WouldBlock if e.raw_os_error().is_none() => e.to_string(),
        _ => path_error(path, e, "cannot open it for reading and writing"),
    };
    ServeError::BadInput(format!("--backing {}: {why}", path.display()))
}

impl Listen {
    /// Wakes a listener blocked in `accept` by connecting to it.
    fn poke(&self) {
        let _ = match self {
            Listen::Unix(p) => UnixStream::connect(p).map(drop),
            Listen::Tcp(a) => TcpStream::connect(a).map(drop),
        };
    }
}

/// Reply bytes the server owes its clients: replies still in the model or at the connection's
/// thread, waiting for a socket, or being written. Each request reserves its reply's bytes
/// before it is read further; they are given back as the socket takes them.
struct ReplyBudget {
    /// Bound for one connection, and for all together.
    per_connection: usize,
    total: usize,
    used: Mutex<usize>,
    /// Threads waiting in [`ReplyBudget::wait`] for room, which `freed` wakes.
    waiters: AtomicUsize,
    freed: Condvar,
    /// The most owed at once.
    peak: AtomicUsize,
}

/// Whether a reply's bytes could be reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Room {
    Taken,
    /// The connection owes its bound.
    ConnectionFull,
    /// All connections together owe the server's bound.
    TotalFull,
}

impl ReplyBudget {
    fn new(total: u64) -> ReplyBudget {
        let total = usize::try_from(total.max(MIN_REPLY_MEMORY)).unwrap_or(usize::MAX);
        ReplyBudget {
            per_connection: (REPLY_BYTES_PER_CONNECTION as usize).min(total),
            total,
            used: Mutex::new(0),
            waiters: AtomicUsize::new(0),
            freed: Condvar::new(),
            peak: AtomicUsize::new(0),
        }
    }

    fn used(&self) -> MutexGuard<'_, usize> {
        self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves `n` bytes for a connection that owes `owed`, if neither bound is passed.
    fn take(&self, owed: &mut usize, n: usize) -> Room {
        if *owed + n > self.per_connection {
            return Room::ConnectionFull;
        }
        let mut used = self.used();
        if *used + n > self.total {
            return Room::TotalFull;
        }
        *used += n;
        self.peak.fetch_max(*used, Ordering::Relaxed);
        *owed += n;
        Room::Taken
    }

    /// Gives back `n` of the bytes a connection that owes `owed` reserved.
    fn give_back(&self, owed: &mut usize, n: usize) {
        let n = n.min(*owed);
        if n == 0 {
            return;
        }
        *owed -= n;
        let mut used = self.used();
        *used -= n;
        let wake = self.waiters.load(Ordering::SeqCst) > 0;
        drop(used);
        if wake {
            self.freed.notify_all();
        }
    }

    /// Waits (at most `limit`) while all connections together leave no room for `n` bytes.
    fn wait(&self, n: usize, limit: Duration) {
        let used = self.used();
        if *used + n > self.total {
            self.waiters.fetch_add(1, Ordering::SeqCst);
            drop(self.freed.wait_timeout(used, limit).unwrap_or_else(PoisonError::into_inner));
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn owed(&self) -> usize {
        *self.used()
    }
}

/// A connection's sending side: its socket, the reply bytes it has not taken yet, and what the
/// connection owes. Both layouts send through it; neither the model thread (per-connection) nor
/// the polling thread (single) ever waits for a client's socket.
struct Out {
    /// `connection N (export)`, for messages.
    who: String,
    stream: Stream,
    /// Reply bytes the socket has not taken, oldest first.
    queue: VecDeque<Vec<u8>>,
    /// Bytes of the queue's first buffer already sent.
    front_sent: usize,
    /// A reply buffer the socket has taken, kept for the next long reply (at most one, the
    /// largest): streaming large reads allocates nothing.
    spare: Vec<u8>,
    /// Reply bytes reserved and not yet taken by the socket: replies to come, queued, and being
    /// written.
    owed: usize,
    /// The writer thread is writing a buffer it took from the queue (per-connection layout):
    /// nothing else may be sent meanwhile.
    writing: bool,
    /// When the socket last took reply bytes (or replies began to wait).
    progress: Instant,
    /// No more requests are read: the writer thread ends once nothing is owed.
    closing: bool,
    /// A reply could not be written, or the client stopped reading: nothing more is sent.
    dead: bool,
    /// The connection's reading thread waits for room, its writer thread for replies
    /// (per-connection layout): [`Conn::with`] wakes them.
    reader_waits: bool,
    writer_waits: bool,
}

impl Out {
    fn new(who: String, stream: Stream) -> Out {
        Out {
            who,
            stream,
            queue: VecDeque::new(),
            front_sent: 0,
            spare: Vec::new(),
            owed: 0,
            writing: false,
            progress: Instant::now(),
            closing: false,
            dead: false,
            reader_waits: false,
            writer_waits: false,
        }
    }

    fn give_back(&mut self, shared: &Shared, n: usize) {
        shared.budget.give_back(&mut self.owed, n);
    }

    /// A reply built whole in `reply` (see [`build_reply`]), for which `reserved` bytes were
    /// reserved: written as far as the socket takes it without waiting; the rest is queued. A
    /// long rest is queued as `reply` itself, which becomes the connection's spare buffer (or
    /// an empty one): no reply is copied.
    fn send(&mut self, shared: &Shared, reply: &mut Vec<u8>, reserved: usize) {
        let len = reply.len();
        debug_assert!(len <= reserved, "a reply of {len} bytes had {reserved} reserved");
        // What the reservation held beyond this reply: a read answered with an error.
        self.give_back(shared, reserved.saturating_sub(len));
        if self.dead {
            self.give_back(shared, len);
            return;
        }
        let mut sent = 0;
        if self.queue.is_empty() && !self.writing {
            self.progress = Instant::now();
            match send_nowait(&self.stream, reply) {
                Ok(n) => {
                    sent = n;
                    self.give_back(shared, n);
                }
                Err(_) => {
                    self.give_back(shared, len);
                    self.kill(shared);
                    return;
                }
            }
        }
        if sent == len {
            return;
        }
        if len - sent < HAND_OVER {
            self.queue.push_back(reply[sent..].to_vec());
        } else {
            // Only a reply that found the queue empty was sent from: it is the queue's front.
            if sent > 0 {
                self.front_sent = sent;
            }
            let spare = std::mem::take(&mut self.spare);
            self.queue.push_back(std::mem::replace(reply, spare));
        }
    }

    /// Keeps `buf`, whose reply the socket has taken, as the spare buffer if it is the largest.
    fn keep_spare(&mut self, buf: Vec<u8>) {
        if buf.capacity() >= HAND_OVER && buf.capacity() > self.spare.capacity() {
            self.spare = buf;
        }
    }

    /// Swaps the spare buffer into `buf` if `buf` cannot hold a reply of `len` bytes and the
    /// spare can: a long reply is built without allocating (and faulting in) a buffer for it.
    fn lend_spare(&mut self, buf: &mut Vec<u8>, len: usize) {
        if buf.capacity() < len && self.spare.capacity() >= len {
            std::mem::swap(buf, &mut self.spare);
        }
    }

    /// Writes what the socket takes of the queue now (single layout). A client whose socket
    /// has taken nothing for the idle timeout is dropped.
    fn drain(&mut self, shared: &Shared) {
        while !self.dead {
            let Some(front) = self.queue.front() else { break };
            let len = front.len();
            match send_nowait(&self.stream, &front[self.front_sent..]) {
                Ok(0) => break,
                Ok(n) => {
                    self.front_sent += n;
                    if self.front_sent == len {
                        if let Some(done) = self.queue.pop_front() {
                            self.keep_spare(done);
                        }
                        self.front_sent = 0;
                    }
                    self.give_back(shared, n);
                    self.progress = Instant::now();
                }
                Err(_) => self.kill(shared),
            }
        }
        if self.waiting() && self.progress.elapsed() > shared.idle_timeout {
            self.drop_idle(shared);
        }
    }

    /// Replies wait for the socket.
    fn waiting(&self) -> bool {
        !self.dead && !self.queue.is_empty()
    }

    /// The client went away or stopped reading: it gets nothing more. What was queued for it is
    /// given back; replies still to come are given back as they come.
    fn kill(&mut self, shared: &Shared) {
        if self.dead {
            return;
        }
        self.dead = true;
        let queued = self.queue.iter().map(Vec::len).sum::<usize>() - self.front_sent;
        self.queue.clear();
        self.front_sent = 0;
        self.give_back(shared, queued);
        self.stream.shutdown(Shutdown::Both);
    }

    /// The client has taken none of its replies for the idle timeout: dropped, said, counted.
    fn drop_idle(&mut self, shared: &Shared) {
        if self.dead {
            return;
        }
        (shared.log)(&format!(
            "{}: dropped: read none of its replies for {} ({} bytes of replies unread)",
            self.who,
            in_secs(shared.idle_timeout),
            self.owed
        ));
        shared.dropped.fetch_add(1, Ordering::SeqCst);
        self.kill(shared);
    }
}

/// One client connection, as the threads that answer it see it (per-connection layout).
struct Conn {
    out: Mutex<Out>,
    /// The writer thread waits here for replies to write, or the connection's end.
    ready: Condvar,
    /// The reading thread waits here for room for its next reply.
    room: Condvar,
}

impl Conn {
    fn new(out: Out) -> Conn {
        Conn { out: Mutex::new(out), ready: Condvar::new(), room: Condvar::new() }
    }

    fn out(&self) -> MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the sending side, then wakes the reading thread if `f` made room (or ended
    /// the connection) and the writer thread if `f` queued replies (or ended it).
    fn with<R>(&self, f: impl FnOnce(&mut Out) -> R) -> R {
        let mut out = self.out();
        let owed = out.owed;
        let r = f(&mut out);
        let wake_reader = out.reader_waits && (out.owed < owed || out.dead);
        let wake_writer = out.writer_waits && (!out.queue.is_empty() || out.dead || (out.closing && out.owed == 0));
        drop(out);
        if wake_reader {
            self.room.notify_all();
        }
        if wake_writer {
            self.ready.notify_all();
        }
        r
    }
}

/// Writes what the socket takes of `data` now, without waiting (`MSG_DONTWAIT`, on this call
/// only: the connection's thread keeps reading the same socket in blocking mode). `Ok(0)`: the
/// socket is full.
fn send_nowait(stream: &Stream, data: &[u8]) -> io::Result<usize> {
    loop {
        if data.is_empty() {
            return Ok(0);
        }
        // SAFETY: `data` is a live slice of `data.len()` bytes; the descriptor is open while
        // `stream` is.
        let n = unsafe { libc::send(stream.fd(), data.as_ptr().cast(), data.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(0),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
}

/// Writes some of `data`, waiting for the socket as long as its send timeout allows (then
/// `WouldBlock`): for a connection's writer thread.
fn send_blocking(stream: &Stream, data: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: as in `send_nowait`.
        let n = unsafe { libc::send(stream.fd(), data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) };
        if n > 0 {
            return Ok(n as usize);
        }
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A request on its way to the model.
struct Submission {
    /// Its connection: a thread's (per-connection), or the I/O thread's number for it (single).
    conn: Option<Arc<Conn>>,
    conn_id: u64,
    cookie: u64,
    export: usize,
    op: IoOp,
    /// Within the export.
    offset: u64,
    len: u64,
    arrived: Instant,
    /// Reply bytes reserved for it.
    reserved: usize,
}

/// One export as the connection threads see it.
#[derive(Clone)]
struct ExportRegion {
    name: String,
    /// Where it starts in the store (the tenant's region on the drive).
    base: u64,
    size: u64,
}

/// What every thread shares.
struct Shared {
    store: Box<dyn Store>,
    exports: Vec<ExportRegion>,
    nbd_exports: Vec<nbd::Export>,
    timing: bool,
    stopping: AtomicBool,
    /// Connections served now (past their handshake), and the most allowed.
    served: AtomicUsize,
    max_connections: usize,
    /// Connections in their handshake, by number (oldest first): at most `max_connections`.
    handshaking: Mutex<BTreeMap<u64, Instant>>,
    handshake_timeout: Duration,
    idle_timeout: Duration,
    budget: ReplyBudget,
    /// Connections accepted ever, refused, dropped for not reading, and handshakes closed
    /// unfinished (timed out, or to make room for a newer one).
    connections: AtomicU64,
    refused: AtomicU64,
    dropped: AtomicU64,
    handshakes_timed_out: AtomicU64,
    handshakes_evicted: AtomicU64,
    /// Times a connection stopped reading requests to wait for room for replies.
    read_pauses: AtomicU64,
    /// Every open connection's socket, to shut down at the end.
    open: Mutex<BTreeMap<u64, Stream>>,
    /// Requests handed to the model thread, for it to notice while it spins.
    submitted: AtomicU64,
    /// Requests answered by connection threads themselves (errors, and all with timing off).
    direct: AtomicU64,
    direct_errors: AtomicU64,
    /// The model thread, to wake when a request arrives (per-connection).
    model: OnceLock<thread::Thread>,
    log: Box<dyn Fn(&str) + Send + Sync>,
}

/// Serves `scenario`'s exports until `stop` is set, then answers what is in flight and returns
/// the run's results. `log` receives the server's messages (listening, connections, stats).
pub fn serve(scenario: Scenario, opts: Options, stop: Arc<AtomicBool>, log: Box<dyn Fn(&str) + Send + Sync>) -> Result<RunResults, ServeError> {
    serve_streaming(scenario, opts, stop, log, None)
}

/// [`serve`], with the timeline's rows handed to `timeline` as intervals close instead of kept
/// for the results (a server may run for days). A stop while the drive is preconditioned ends
/// the run before the socket opens.
pub fn serve_streaming(
    scenario: Scenario,
    opts: Options,
    stop: Arc<AtomicBool>,
    log: Box<dyn Fn(&str) + Send + Sync>,
    timeline: Option<Box<dyn crate::sim::TimelineSink>>,
) -> Result<RunResults, ServeError> {
    if scenario.precondition.state != crate::device::precondition::PreconditionState::Clean {
        // Aging a large drive takes seconds before the socket opens: say so.
        log(&format!(
            "preconditioning the drive ({}, fill {:.0}%)",
            scenario.precondition.state.name(),
            scenario.precondition.fill * 100.0
        ));
    }
    let mut engine: Engine<Submission> = Engine::new_polling(scenario, &|| stop.load(Ordering::SeqCst))?;
    if let Some(t) = timeline {
        engine.stream_timeline(t);
    }
    if engine.stopped_before_serving() {
        log("stopped while the drive was preconditioned: nothing was served");
        let result = ServeResult {
            listen: opts.listen.to_string(),
            io_threads: opts.io_threads.name().to_string(),
            timing: opts.timing,
            reply_bytes_limit: opts.reply_memory,
            ..ServeResult::default()
        };
        return Ok(engine.finish(0, result));
    }
    let capacity = engine.capacity_bytes();
    let store: Box<dyn Store> = match &opts.backing {
        Some(p) => Box::new(FileStore::open(p, capacity).map_err(|e| backing_error(p, &e))?),
        None => Box::new(MemStore::new(capacity)),
    };
    let exports: Vec<ExportRegion> =
        engine.exports().iter().map(|e| ExportRegion { name: e.name.clone(), base: e.offset, size: e.size }).collect();
    let nbd_exports = exports
        .iter()
        .map(|e| nbd::Export { name: e.name.clone(), size: e.size, description: format!("flashmux tenant '{}'", e.name) })
        .collect();
    let (listener, listen) = Listener::bind(&opts.listen)?;
    let shared = Arc::new(Shared {
        store,
        exports,
        nbd_exports,
        timing: opts.timing,
        stopping: AtomicBool::new(false),
        served: AtomicUsize::new(0),
        max_connections: opts.max_connections.max(1),
        handshaking: Mutex::new(BTreeMap::new()),
        handshake_timeout: opts.handshake_timeout,
        idle_timeout: opts.idle_timeout,
        budget: ReplyBudget::new(opts.reply_memory),
        connections: AtomicU64::new(0),
        refused: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        handshakes_timed_out: AtomicU64::new(0),
        handshakes_evicted: AtomicU64::new(0),
        read_pauses: AtomicU64::new(0),
        open: Mutex::new(BTreeMap::new()),
        submitted: AtomicU64::new(0),
        direct: AtomicU64::new(0),
        direct_errors: AtomicU64::new(0),
        model: OnceLock::new(),
        log,
    });
    let names: Vec<&str> = shared.exports.iter().map(|e| e.name.as_str()).collect();
    (shared.log)(&format!(
        "serving {} on {} ({}, timing {}, data {})",
        names.join(", "),
        listen,
        opts.io_threads.name(),
        if opts.timing { "on" } else { "off" },
        opts.backing.as_ref().map_or("in memory".to_string(), |p| p.display().to_string())
    ));
    let origin = Instant::now();
    let stats = opts.stats_interval;
    let (model, route) = match opts.io_threads {
        IoThreads::PerConnection => {
            let (tx, rx) = mpsc::channel::<Submission>();
            let shared = shared.clone();
            let model = thread::Builder::new()
                .name("flashmux-model".into())
                .spawn(move || model_thread(&shared, engine, rx, origin, stats))
                .map_err(io_err("starting the model thread"))?;
            (model, Route::PerConnection(tx))
        }
        IoThreads::Single => {
            let (tx, rx) = mpsc::channel::<single::Handoff>();
            let (wake_tx, wake_rx) = UnixStream::pair().map_err(io_err("creating the I/O thread's wake-up socket"))?;
            let shared = shared.clone();
            let io = thread::Builder::new()
                .name("flashmux-io".into())
                .spawn(move || single::io_thread(&shared, engine, rx, wake_rx, origin, stats))
                .map_err(io_err("starting the I/O thread"))?;
            (io, Route::Single(tx, Arc::new(wake_tx)))
        }
    };
    let _ = shared.model.set(model.thread().clone());
    let acceptor = {
        let shared = shared.clone();
        thread::Builder::new()
            .name("flashmux-accept".into())
            .spawn(move || accept_loop(&shared, &listener, route))
            .map_err(io_err("starting the accept thread"))?
    };
    while !stop.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(20));
    }
    (shared.log)("stopping: answering the requests in flight");
    shared.stopping.store(true, Ordering::SeqCst);
    // Connections stop reading; what they already sent is answered. Once more after the
    // acceptor has ended: it may have taken one more connection meanwhile.
    let stop_reading = || {
        for s in shared.open.lock().unwrap_or_else(|e| e.into_inner()).values() {
            s.shutdown(Shutdown::Read);
        }
    };
    listen.poke();
    stop_reading();
    acceptor.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    stop_reading();
    if let Listen::Unix(p) = &listen {
        let _ = std::fs::remove_file(p);
    }
    let (engine, now_ns) = model.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    if let Err(e) = shared.store.flush() {
        (shared.log)(&format!("flushing the store failed: {e}"));
    }
    let result = ServeResult {
        listen: listen.to_string(),
        io_threads: opts.io_threads.name().to_string(),
        timing: shared.timing,
        wall_s: origin.elapsed().as_secs_f64(),
        connections: shared.connections.load(Ordering::SeqCst),
        connections_refused: shared.refused.load(Ordering::SeqCst),
        connections_dropped: shared.dropped.load(Ordering::SeqCst),
        handshakes_timed_out: shared.handshakes_timed_out.load(Ordering::SeqCst),
        handshakes_evicted: shared.handshakes_evicted.load(Ordering::SeqCst),
        read_pauses: shared.read_pauses.load(Ordering::SeqCst),
        reply_bytes_peak: shared.budget.peak.load(Ordering::SeqCst) as u64,
        reply_bytes_per_connection: shared.budget.per_connection as u64,
        reply_bytes_limit: shared.budget.total as u64,
        requests: 0,
        errors: 0,
        timing_error_ns: None,
    };
    let mut r = engine.finish(now_ns, result);
    if let Some(s) = &mut r.serve {
        s.requests += shared.direct.load(Ordering::SeqCst);
        s.errors += shared.direct_errors.load(Ordering::SeqCst);
    }
    Ok(r)
}

/// Where accepted connections go.
enum Route {
    /// A thread each, feeding the model thread.
    PerConnection(Sender<Submission>),
    /// A handshake thread each, then to the I/O thread, woken through the socket.
    Single(Sender<single::Handoff>, Arc<UnixStream>),
}

fn accept_loop(shared: &Arc<Shared>, listener: &Listener, route: Route) {
    let max = shared.max_connections;
    let mut next_id = 0u64;
    loop {
        let stream = match listener.accept() {
            Ok(s) => s,
            Err(_) if shared.stopping.load(Ordering::SeqCst) => break,
            Err(e) => {
                (shared.log)(&format!("accepting a connection failed: {e}"));
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        if shared.served.load(Ordering::SeqCst) >= max {
            shared.refused.fetch_add(1, Ordering::SeqCst);
            (shared.log)(&format!("refused a connection: {max} are being served (--max-connections)"));
            stream.shutdown(Shutdown::Both);
            continue;
        }
        let id = next_id;
        next_id += 1;
        let ctl = match stream.try_clone() {
            Ok(c) => c,
            Err(e) => {
                (shared.log)(&format!("connection {id}: {e}"));
                continue;
            }
        };
        let accepted = Instant::now();
        shared.connections.fetch_add(1, Ordering::SeqCst);
        shared.open.lock().unwrap_or_else(|e| e.into_inner()).insert(id, ctl);
        make_room_for_handshake(shared, id, accepted);
        let sh = shared.clone();
        let spawned = match &route {
            Route::PerConnection(tx) => {
                let tx = tx.clone();
                thread::Builder::new().name(format!("flashmux-conn-{id}")).spawn(move || {
                    connection(&sh, id, accepted, stream, &tx);
                    sh.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                })
            }
            Route::Single(tx, wake) => {
                let (tx, wake) = (tx.clone(), wake.clone());
                thread::Builder::new().name(format!("flashmux-handshake-{id}")).spawn(move || {
                    let mut stream = stream;
                    let handed = match negotiate(&sh, id, accepted, &mut stream) {
                        Some((export, flags)) => {
                            let handed = tx.send(single::Handoff { id, stream, export, flags }).is_ok();
                            if !handed {
                                sh.served.fetch_sub(1, Ordering::SeqCst);
                            }
                            handed
                        }
                        None => false,
                    };
                    if handed {
                        let _ = (&*wake).write(&[1]);
                    } else {
                        sh.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                    }
                })
            }
        };
        if let Err(e) = spawned {
            (shared.log)(&format!("connection {id}: cannot start its thread: {e}"));
            shared.handshaking.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            shared.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        }
    }
}

/// Lists connection `id` among those in their handshake. If as many as `--max-connections` are
/// already, the one that has been negotiating longest is closed to make room: a real client's
/// handshake is over in milliseconds, so the oldest unfinished one is the likeliest to be a
/// connection that says nothing at all.
fn make_room_for_handshake(shared: &Shared, id: u64, now: Instant) {
    let mut handshaking = shared.handshaking.lock().unwrap_or_else(|e| e.into_inner());
    if handshaking.len() >= shared.max_connections {
        if let Some((oldest, since)) = handshaking.pop_first() {
            if let Some(s) = shared.open.lock().unwrap_or_else(|e| e.into_inner()).get(&oldest) {
                s.shutdown(Shutdown::Both);
            }
            shared.handshakes_evicted.fetch_add(1, Ordering::SeqCst);
            (shared.log)(&format!(
                "connection {oldest}: no handshake after {:.1} s: closed to make room for connection {id} ({} handshakes at once, as --max-connections)",
                now.saturating_duration_since(since).as_secs_f64(),
                shared.max_connections
            ));
        }
    }
    handshaking.insert(id, now);
}

/// A negotiated connection takes one of the `--max-connections` places, if one is free.
fn take_place(shared: &Shared, id: u64) -> bool {
    let max = shared.max_connections;
    if shared.served.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1)).is_ok() {
        return true;
    }
    shared.refused.fetch_add(1, Ordering::SeqCst);
    (shared.log)(&format!("connection {id}: refused at the end of its handshake: {max} are being served (--max-connections)"));
    false
}

/// The handshake, which must be over by `accepted` + the handshake timeout: the export chosen
/// and the transmission flags, with a place under `--max-connections` taken (before the client
/// is told it may begin), or `None` if the client left, broke the protocol, took too long, found
/// no place, or was closed to make room for a newer connection.
fn negotiate(shared: &Shared, id: u64, accepted: Instant, stream: &mut Stream) -> Option<(usize, u16)> {
    let deadline = accepted + shared.handshake_timeout;
    let result = nbd::handshake_admitting(&mut Deadlined { stream, deadline }, &shared.nbd_exports, &LIMITS, transmission_flags(), &mut |_| {
        take_place(shared, id)
    });
    // No longer listed: closed meanwhile by `make_room_for_handshake`, which said so.
    let evicted = shared.handshaking.lock().unwrap_or_else(|e| e.into_inner()).remove(&id).is_none();
    let _ = stream.set_read_timeout(None);
    let _ = stream.set_write_timeout(None);
    match result {
        Ok(nbd::Handshake::Transmission(n)) if !evicted => Some((n.export, n.transmission_flags)),
        Ok(nbd::Handshake::Transmission(_)) => {
            shared.served.fetch_sub(1, Ordering::SeqCst);
            None
        }
        Ok(nbd::Handshake::Aborted) => None,
        // `take_place` said why.
        Err(nbd::NbdError::Refused) => None,
        Err(_) if evicted || shared.stopping.load(Ordering::SeqCst) => None,
        Err(e) => {
            let timed_out = Instant::now() >= deadline
                || matches!(&e, nbd::NbdError::Io { source, .. } if matches!(source.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut));
            if timed_out {
                shared.handshakes_timed_out.fetch_add(1, Ordering::SeqCst);
                (shared.log)(&format!("connection {id}: no handshake within {}: closed", in_secs(shared.handshake_timeout)));
            } else {
                (shared.log)(&format!("connection {id}: handshake failed: {e}"));
            }
            None
        }
    }
}

/// One connection on its own thread: handshake, then requests until the client disconnects or
/// the server stops, with a second thread writing what replies the socket did not take at once.
fn connection(shared: &Shared, id: u64, accepted: Instant, mut stream: Stream, tx: &Sender<Submission>) {
    let Some((export, flags)) = negotiate(shared, id, accepted, &mut stream) else { return };
    serve_connection(shared, id, stream, export, flags, tx);
    shared.served.fetch_sub(1, Ordering::SeqCst);
}

fn serve_connection(shared: &Shared, id: u64, mut stream: Stream, export: usize, flags: u16, tx: &Sender<Submission>) {
    let region = shared.exports[export].clone();
    let who = format!("connection {id} ({})", region.name);
    let (sender, writer) = match (stream.try_clone(), stream.try_clone()) {
        (Ok(s), Ok(w)) => (s, w),
        (Err(e), _) | (_, Err(e)) => {
            (shared.log)(&format!("{who}: {e}"));
            return;
        }
    };
    // The writer thread waits for the client this long without progress, then drops it.
    let _ = writer.set_write_timeout(Some(shared.idle_timeout));
    let conn = Arc::new(Conn::new(Out::new(who.clone(), sender)));
    thread::scope(|scope| {
        let started = thread::Builder::new().name(format!("flashmux-reply-{id}")).spawn_scoped(scope, || write_replies(shared, &conn, &writer));
        if let Err(e) = started {
            (shared.log)(&format!("{who}: cannot start its writer thread: {e}"));
            return;
        }
        read_requests(shared, id, &mut stream, &region, export, flags, &conn, tx);
        conn.with(|o| o.closing = true);
    });
}

/// Reads a connection's requests until the client closes it (or the server stops), each only
/// once there is room for its reply.
#[allow(clippy::too_many_arguments)]
fn read_requests(
    shared: &Shared,
    id: u64,
    stream: &mut Stream,
    region: &ExportRegion,
    export: usize,
    flags: u16,
    conn: &Arc<Conn>,
    tx: &Sender<Submission>,
) {
    let mut payload = Vec::new();
    let mut reply = Vec::new();
    let mut hdr = [0u8; nbd::REQUEST_LEN];
    loop {
        if stream.read_exact(&mut hdr).is_err() {
            // The client closed the connection (or the server is stopping).
            return;
        }
        let req = match nbd::parse_request(&hdr) {
            Ok(r) => r,
            Err(e) => {
                conn.with(|o| {
                    (shared.log)(&format!("{}: {e}; closing it", o.who));
                    o.kill(shared);
                });
                return;
            }
        };
        let checked = nbd::check_request(&req, region.size, flags, &LIMITS);
        let reserved = reply_bytes(&req, checked);
        if !reserve(shared, conn, reserved) {
            return;
        }
        let give_back = || conn.with(|o| o.give_back(shared, reserved));
        if checked.is_err() {
            // Keep the framing: a refused write's data still follows its header.
            let follows = u64::from(req.payload_len());
            if follows > 0 && io::copy(&mut (&mut *stream).take(follows), &mut io::sink()).ok() != Some(follows) {
                give_back();
                return;
            }
        } else if req.cmd == Command::Write {
            payload.resize(req.len as usize, 0);
            if stream.read_exact(&mut payload).is_err() {
                give_back();
                return;
            }
        }
        let arrived = Instant::now();
        match handle(shared, region, checked, &req, &payload) {
            Action::Close => {
                give_back();
                return;
            }
            Action::Reply { error, read } => {
                let data = read.then_some((region.base + req.offset, u64::from(req.len)));
                if read && reply.capacity() < reserved {
                    conn.with(|o| o.lend_spare(&mut reply, reserved));
                }
                let error = build_reply(shared, &mut reply, req.cookie, error, data);
                conn.with(|o| o.send(shared, &mut reply, reserved));
                count_direct(shared, error);
            }
            Action::Model(op) => {
                let s = Submission {
                    conn: Some(conn.clone()),
                    conn_id: id,
                    cookie: req.cookie,
                    export,
                    op,
                    offset: req.offset,
                    len: u64::from(req.len),
                    arrived,
                    reserved,
                };
                if tx.send(s).is_err() {
                    give_back();
                    return;
                }
                shared.submitted.fetch_add(1, Ordering::SeqCst);
                if let Some(t) = shared.model.get() {
                    t.unpark();
                }
            }
        }
    }
}

/// The bytes of the reply `req` will get: its header, and a read's data if it is served.
fn reply_bytes(req: &Request, checked: Result<(), u32>) -> usize {
    match (req.cmd, checked) {
        (Command::Disc, Ok(())) => 0,
        (Command::Read, Ok(())) => nbd::SIMPLE_REPLY_LEN + req.len as usize,
        _ => nbd::SIMPLE_REPLY_LEN,
    }
}

/// Waits until the connection, and the server, have room for a reply of `n` bytes, and
/// reserves it; reading pauses meanwhile (counted once per wait). False if the connection ended.
fn reserve(shared: &Shared, conn: &Conn, n: usize) -> bool {
    let mut paused = false;
    let mut out = conn.out();
    loop {
        if out.dead {
            return false;
        }
        let room = shared.budget.take(&mut out.owed, n);
        if room == Room::Taken {
            return true;
        }
        if !paused {
            paused = true;
            shared.read_pauses.fetch_add(1, Ordering::SeqCst);
        }
        if room == Room::ConnectionFull {
            out.reader_waits = true;
            out = conn.room.wait_timeout(out, ROOM_POLL).unwrap_or_else(PoisonError::into_inner).0;
            out.reader_waits = false;
        } else {
            drop(out);
            shared.budget.wait(n, ROOM_POLL);
            out = conn.out();
        }
    }
}

/// A connection's writer thread (per-connection layout): writes the replies its socket did not
/// take at once, waiting for the client as the model thread never does. A client that takes
/// nothing for the idle timeout (the socket's send timeout) is dropped. Ends once reading has
/// ended and nothing is owed, or the connection is dead.
fn write_replies(shared: &Shared, conn: &Conn, stream: &Stream) {
    loop {
        let (buf, mut at) = {
            let mut out = conn.out();
            loop {
                if out.dead || (out.closing && out.owed == 0) {
                    return;
                }
                if let Some(b) = out.queue.pop_front() {
                    out.writing = true;
                    let at = std::mem::take(&mut out.front_sent);
                    break (b, at);
                }
                out.writer_waits = true;
                out = conn.ready.wait_timeout(out, ROOM_POLL).unwrap_or_else(PoisonError::into_inner).0;
                out.writer_waits = false;
            }
        };
        let mut failed = None;
        while at < buf.len() {
            match send_blocking(stream, &buf[at..buf.len().min(at + WRITE_CHUNK)]) {
                Ok(n) => {
                    at += n;
                    conn.with(|o| {
                        o.give_back(shared, n);
                        o.progress = Instant::now();
                    });
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        conn.with(|o| {
            o.writing = false;
            match failed {
                None => o.keep_spare(buf),
                Some(e) => {
                    o.give_back(shared, buf.len() - at);
                    if e.kind() == io::ErrorKind::WouldBlock {
                        o.drop_idle(shared);
                    } else {
                        o.kill(shared);
                    }
                }
            }
        });
    }
}

/// What a request comes to, once checked and its data stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// Answer now: with `error`, or (`read`) with the data in the store.
    Reply { error: u32, read: bool },
    /// Hand it to the model, as this operation; answer when the model completes it.
    Model(IoOp),
    /// The client asked to disconnect.
    Close,
}

/// A request's data side (a write's data into the store, trims, durability for FUA and
/// flushes), given what [`nbd::check_request`] said of it. A write's `payload` has been read in
/// full (or skipped, if the request is refused).
fn handle(shared: &Shared, region: &ExportRegion, checked: Result<(), u32>, req: &Request, payload: &[u8]) -> Action {
    if let Err(error) = checked {
        return Action::Reply { error, read: false };
    }
    if req.cmd == Command::Disc {
        return Action::Close;
    }
    if req.cmd == Command::Cache || (req.len == 0 && req.cmd != Command::Flush) {
        // Advisory prefetch, and requests of no bytes: nothing for the drive to do.
        return Action::Reply { error: 0, read: false };
    }
    let at = region.base + req.offset;
    let len = u64::from(req.len);
    let fua = req.flags & nbd::CMD_FLAG_FUA != 0;
    let durable = |r: io::Result<()>| r.and_then(|()| if fua { shared.store.flush() } else { Ok(()) });
    let (op, done) = match req.cmd {
        Command::Read => (IoOp::Read, Ok(())),
        Command::Write => (IoOp::Write, durable(shared.store.write(at, payload))),
        Command::Flush => (IoOp::Flush, shared.store.flush()),
        Command::Trim => (IoOp::Trim, durable(shared.store.zero(at, len, true))),
        Command::WriteZeroes => {
            // Without NO_HOLE the range may be deallocated: a trim to the drive. With it, the
            // zeros are written.
            let no_hole = req.flags & nbd::CMD_FLAG_NO_HOLE != 0;
            let op = if no_hole { IoOp::Write } else { IoOp::Trim };
            (op, durable(shared.store.zero(at, len, !no_hole)))
        }
        // check_request refuses every other command.
        _ => return Action::Reply { error: nbd::EINVAL, read: false },
    };
    if let Err(e) = done {
        (shared.log)(&format!("store: {e}"));
        return Action::Reply { error: nbd::error_value(&e), read: false };
    }
    if shared.timing {
        Action::Model(op)
    } else {
        Action::Reply { error: 0, read: op == IoOp::Read }
    }
}

/// Builds a simple reply in `buf`: its header with `error`, and for `read` (where in the store,
/// how many bytes; only without an error) the data, read from the store now (a failed read is
/// answered with its error instead). Returns the error the reply carries. `buf`'s bytes are
/// overwritten, not zeroed first.
fn build_reply(shared: &Shared, buf: &mut Vec<u8>, cookie: u64, error: u32, read: Option<(u64, u64)>) -> u32 {
    let mut error = error;
    let data_len = read.map_or(0, |(_, len)| len as usize);
    buf.resize(nbd::SIMPLE_REPLY_LEN + data_len, 0);
    if let Some((at, _)) = read {
        if let Err(e) = shared.store.read(at, &mut buf[nbd::SIMPLE_REPLY_LEN..]) {
            (shared.log)(&format!("store: {e}"));
            error = nbd::error_value(&e);
            buf.truncate(nbd::SIMPLE_REPLY_LEN);
        }
    }
    buf[..nbd::SIMPLE_REPLY_LEN].copy_from_slice(&nbd::encode_simple_reply(error, cookie));
    error
}

/// A request answered without the model: counted in the results with the model's.
fn count_direct(shared: &Shared, error: u32) {
    shared.direct.fetch_add(1, Ordering::Relaxed);
    if error != 0 {
        shared.direct_errors.fetch_add(1, Ordering::Relaxed);
    }
}

fn ns_since(origin: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(origin).as_nanos() as u64
}

/// Below this, the model thread spins instead of sleeping: a sleeping thread wakes tens of
/// microseconds late.
const SPIN_NS: u64 = 200_000;
/// The model thread looks at the stop flag and the stats at least this often.
const MAX_SLEEP_NS: u64 = 20_000_000;

/// The model's owner: submissions in, events as their time comes, replies out. Returns the
/// engine and the time it stopped, once the server is stopping, every connection has gone and
/// nothing is in flight.
fn model_thread(shared: &Shared, mut engine: Engine<Submission>, rx: Receiver<Submission>, origin: Instant, stats: Option<Duration>) -> (Engine<Submission>, u64) {
    let mut due: Vec<Due<Submission>> = Vec::new();
    let mut data = Vec::new();
    let mut taken = 0u64;
    let mut senders_gone = false;
    let stats_ns = stats.map(|d| d.as_nanos().max(1) as u64);
    let mut next_stats = stats_ns.unwrap_or(u64::MAX);
    // Timed sleeps end when asked, not up to 50 µs later (Linux's default timer slack).
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    loop {
        loop {
            match rx.try_recv() {
                Ok(s) => {
                    taken += 1;
                    let at = ns_since(origin, s.arrived);
                    let (export, op, offset, len) = (s.export, s.op, s.offset, s.len);
                    if let Err((s, e)) = engine.submit(at, export, op, offset, len, s) {
                        // The connection thread checked it; the model disagreeing is a bug
                        // worth a message, and the client gets an error, not silence.
                        (shared.log)(&format!("the model refused a request: {e}"));
                        if let Some(c) = &s.conn {
                            build_reply(shared, &mut data, s.cookie, nbd::EINVAL, None);
                            c.with(|o| o.send(shared, &mut data, s.reserved));
                        }
                        engine.record_reply(None, true);
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    senders_gone = true;
                    break;
                }
            }
        }
        let now = ns_since(origin, Instant::now());
        engine.advance(now, &mut due);
        for d in due.drain(..) {
            if let Some(c) = d.info.conn.as_ref().filter(|_| data.capacity() < d.info.reserved) {
                c.with(|o| o.lend_spare(&mut data, d.info.reserved));
            }
            answer_due(shared, &mut engine, d, origin, &mut data, |s, reply| {
                if let Some(c) = &s.conn {
                    c.with(|o| o.send(shared, reply, s.reserved));
                }
            });
        }
        if now >= next_stats {
            print_stats(shared, &mut engine, now, stats_ns.unwrap_or(1));
            next_stats = now + stats_ns.unwrap_or(u64::MAX);
        }
        // Every connection thread has ended, so every reply has been written (or its client
        // has gone).
        if senders_gone && engine.in_flight() == 0 {
            return (engine, ns_since(origin, Instant::now()));
        }
        wait(shared, &engine, origin, taken, next_stats);
    }
}

/// Answers a request the model has completed: builds its reply in `buf` (a read takes its data
/// from the store now) and hands it to `send`.
fn answer_due(
    shared: &Shared,
    engine: &mut Engine<Submission>,
    d: Due<Submission>,
    origin: Instant,
    buf: &mut Vec<u8>,
    send: impl FnOnce(&Submission, &mut Vec<u8>),
) {
    let s = d.info;
    let read = (s.op == IoOp::Read).then(|| (shared.exports[s.export].base + s.offset, s.len));
    let error = build_reply(shared, buf, s.cookie, 0, read);
    // The reply is late by the time it starts to leave; sending its data is the link's time.
    let late = ns_since(origin, Instant::now()).saturating_sub(d.due_ns);
    send(&s, buf);
    engine.record_reply(Some(late), error != 0);
}

/// Sleeps until the model's next event (or a submission, or the next stats line), spinning
/// for the last [`SPIN_NS`].
fn wait(shared: &Shared, engine: &Engine<Submission>, origin: Instant, taken: u64, next_stats: u64) {
    let now = ns_since(origin, Instant::now());
    let target = engine.next_event_ns().unwrap_or(u64::MAX).min(next_stats).min(now + MAX_SLEEP_NS);
    if target <= now {
        return;
    }
    let arrived = || shared.submitted.load(Ordering::SeqCst) != taken;
    if target - now > SPIN_NS && !arrived() {
        thread::park_timeout(Duration::from_nanos(target - now - SPIN_NS));
    }
    let mut spins = 0u32;
    while ns_since(origin, Instant::now()) < target && !arrived() {
        spins += 1;
        if spins % 64 == 0 {
            thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// One line per export: what it did over the last `interval_ns`.
fn print_stats(shared: &Shared, engine: &mut Engine<Submission>, now_ns: u64, interval_ns: u64) {
    let secs = interval_ns as f64 / 1e9;
    for iv in engine.take_interval() {
        (shared.log)(&format!(
            "{:>8.1}s {}: read {:.0} IOPS {:.1} MB/s, write {:.0} IOPS {:.1} MB/s, latency mean {:.0} µs max {:.0} µs, GC moved {} units",
            now_ns as f64 / 1e9,
            iv.name,
            iv.reads as f64 / secs,
            iv.read_bytes as f64 / 1e6 / secs,
            iv.writes as f64 / secs,
            iv.write_bytes as f64 / 1e6 / secs,
            iv.lat_mean_ns / 1e3,
            iv.lat_max_ns as f64 / 1e3,
            iv.gc_units_moved,
        ));
    }
    let handshaking = shared.handshaking.lock().unwrap_or_else(|e| e.into_inner()).len();
    (shared.log)(&format!(
        "{:>8.1}s server: {} connections served, {} in handshake; replies owed {:.1} MiB (at most {:.0} MiB, {:.0} MiB per connection); reading paused {} times; {} dropped (idle {}), {} handshakes timed out, {} closed for newer ones",
        now_ns as f64 / 1e9,
        shared.served.load(Ordering::SeqCst),
        handshaking,
        shared.budget.owed() as f64 / f64::from(1 << 20),
        shared.budget.total as f64 / f64::from(1 << 20),
        shared.budget.per_connection as f64 / f64::from(1 << 20),
        shared.read_pauses.load(Ordering::SeqCst),
        shared.dropped.load(Ordering::SeqCst),
        in_secs(shared.idle_timeout),
        shared.handshakes_timed_out.load(Ordering::SeqCst),
        shared.handshakes_evicted.load(Ordering::SeqCst),
    ));
}
