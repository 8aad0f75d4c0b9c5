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
use std::sync::{Arc, Mutex, OnceLock};
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

/// How long a reply may take to reach a client.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// `--handshake-timeout` when not given: a real client's handshake takes milliseconds (QEMU's
/// NBD server allows 10 s too).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// One client connection, as the threads that answer it see it.
struct Conn {
    /// Replies go out through this, one at a time.
    out: Mutex<Out>,
}

/// A connection's sending side: its socket, and reply bytes the socket has not taken yet.
/// Both layouts send through it: the model thread (per-connection) and the polling thread
/// (single) never wait for a client's socket.
struct Out {
    stream: Stream,
    backlog: VecDeque<u8>,
    /// When the backlog last shrank (or began).
    progress: Instant,
    /// A reply could not be written, or the client stopped reading: nothing more is sent.
    dead: bool,
}

/// Reply bytes a client may leave unread before it is dropped: it is not reading its replies.
const MAX_BACKLOG: usize = 256 << 20;

impl Out {
    fn new(stream: Stream) -> Out {
        Out { stream, backlog: VecDeque::new(), progress: Instant::now(), dead: false }
    }

    /// A simple reply (with `data` after it for a successful read), written as far as the socket
    /// takes it without waiting; the rest waits in the backlog. Returns whether some waits.
    fn send(&mut self, cookie: u64, error: u32, data: Option<&[u8]>) -> bool {
        if self.dead {
            return false;
        }
        let header = nbd::encode_simple_reply(error, cookie);
        let mut parts: [&[u8]; 2] = [&header, data.unwrap_or_default()];
        if self.backlog.is_empty() {
            for p in &mut parts {
                match send_nowait(&self.stream, p) {
                    Ok(n) => *p = &p[n..],
                    Err(_) => return self.kill(),
                }
                if !p.is_empty() {
                    break;
                }
            }
            self.progress = Instant::now();
        }
        for p in parts {
            self.backlog.extend(p);
        }
        if self.backlog.len() > MAX_BACKLOG {
            return self.kill();
        }
        self.waiting()
    }

    /// The same, waiting until it is all written: for a connection's own thread.
    fn send_wait(&mut self, buf: &mut Vec<u8>, cookie: u64, error: u32, data: Option<&[u8]>) {
        if self.dead {
            return;
        }
        buf.clear();
        buf.extend(self.backlog.drain(..));
        buf.extend_from_slice(&nbd::encode_simple_reply(error, cookie));
        if let Some(d) = data {
            buf.extend_from_slice(d);
        }
        if self.stream.write_all(buf).is_err() {
            self.kill();
        }
    }

    /// Writes what the socket takes of the backlog now. Returns whether some still waits; a
    /// client that has taken nothing for [`WRITE_TIMEOUT`] is dropped.
    fn drain(&mut self) -> bool {
        while self.waiting() {
            let sent = {
                let (front, _) = self.backlog.as_slices();
                send_nowait(&self.stream, front)
            };
            match sent {
                Ok(0) => break,
                Ok(n) => {
                    self.backlog.drain(..n);
                    self.progress = Instant::now();
                }
                Err(_) => return self.kill(),
            }
        }
        if self.waiting() && self.progress.elapsed() > WRITE_TIMEOUT {
            return self.kill();
        }
        self.waiting()
    }

    /// Replies wait for the socket.
    fn waiting(&self) -> bool {
        !self.dead && !self.backlog.is_empty()
    }

    /// The client went away or stopped reading: it gets nothing more.
    fn kill(&mut self) -> bool {
        self.dead = true;
        self.backlog.clear();
        self.stream.shutdown(Shutdown::Both);
        false
    }
}

impl Conn {
    fn new(stream: Stream) -> Conn {
        Conn { out: Mutex::new(Out::new(stream)) }
    }

    fn out(&self) -> std::sync::MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
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
    /// Connections accepted ever, refused, and handshakes closed unfinished (timed out, or to
    /// make room for a newer one).
    connections: AtomicU64,
    refused: AtomicU64,
    handshakes_timed_out: AtomicU64,
    handshakes_evicted: AtomicU64,
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
    if scenario.precondition.state != crate::device::precondition::PreconditionState::Clean {
        // Aging a large drive takes seconds before the socket opens: say so.
        log(&format!(
            "preconditioning the drive ({}, fill {:.0}%)",
            scenario.precondition.state.name(),
            scenario.precondition.fill * 100.0
        ));
    }
    let engine: Engine<Submission> = Engine::new(scenario)?;
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
        connections: AtomicU64::new(0),
        refused: AtomicU64::new(0),
        handshakes_timed_out: AtomicU64::new(0),
        handshakes_evicted: AtomicU64::new(0),
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
        handshakes_timed_out: shared.handshakes_timed_out.load(Ordering::SeqCst),
        handshakes_evicted: shared.handshakes_evicted.load(Ordering::SeqCst),
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
/// the server stops.
fn connection(shared: &Shared, id: u64, accepted: Instant, mut stream: Stream, tx: &Sender<Submission>) {
    let Some((export, flags)) = negotiate(shared, id, accepted, &mut stream) else { return };
    serve_connection(shared, id, stream, export, flags, tx);
    shared.served.fetch_sub(1, Ordering::SeqCst);
}

fn serve_connection(shared: &Shared, id: u64, mut stream: Stream, export: usize, flags: u16, tx: &Sender<Submission>) {
    let writer = match stream.try_clone() {
        Ok(w) => w,
        Err(e) => {
            (shared.log)(&format!("connection {id}: {e}"));
            return;
        }
    };
    let _ = writer.set_write_timeout(Some(WRITE_TIMEOUT));
    let conn = Arc::new(Conn::new(writer));
    let region = shared.exports[export].clone();
    let mut reply = Vec::new();
    let mut payload = Vec::new();
    let mut hdr = [0u8; nbd::REQUEST_LEN];
    loop {
        if stream.read_exact(&mut hdr).is_err() {
            // The client closed the connection (or the server is stopping).
            return;
        }
        let req = match nbd::parse_request(&hdr) {
            Ok(r) => r,
            Err(e) => {
                (shared.log)(&format!("connection {id} ({}): {e}; closing it", region.name));
                conn.out().kill();
                return;
            }
        };
        let checked = nbd::check_request(&req, region.size, flags, &LIMITS);
        if checked.is_err() {
            // Keep the framing: a refused write's data still follows its header.
            let follows = u64::from(req.payload_len());
            if follows > 0 && io::copy(&mut (&mut stream).take(follows), &mut io::sink()).ok() != Some(follows) {
                return;
            }
        } else if req.cmd == Command::Write {
            payload.resize(req.len as usize, 0);
            if stream.read_exact(&mut payload).is_err() {
                return;
            }
        }
        let arrived = Instant::now();
        match handle(shared, &region, checked, &req, &payload) {
            Action::Close => return,
            Action::Reply { error, read: false } => answer_now(shared, &conn, &mut reply, req.cookie, error, None),
            Action::Reply { error: _, read: true } => match read_data(shared, region.base + req.offset, u64::from(req.len), &mut payload) {
                Ok(d) => answer_now(shared, &conn, &mut reply, req.cookie, 0, Some(d)),
                Err(errno) => answer_now(shared, &conn, &mut reply, req.cookie, errno, None),
            },
            Action::Model(op) => {
                let s = Submission { conn: Some(conn.clone()), conn_id: id, cookie: req.cookie, export, op, offset: req.offset, len: u64::from(req.len), arrived };
                if tx.send(s).is_err() {
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

/// A read's data from the store, into `buf`.
fn read_data<'a>(shared: &Shared, at: u64, len: u64, buf: &'a mut Vec<u8>) -> Result<&'a [u8], u32> {
    buf.resize(len as usize, 0);
    match shared.store.read(at, buf) {
        Ok(()) => Ok(buf),
        Err(e) => {
            (shared.log)(&format!("store: {e}"));
            Err(nbd::error_value(&e))
        }
    }
}

fn answer_now(shared: &Shared, conn: &Conn, buf: &mut Vec<u8>, cookie: u64, error: u32, data: Option<&[u8]>) {
    conn.out().send_wait(buf, cookie, error, data);
    count_direct(shared, error);
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
    // Connections whose replies the socket has not all taken yet.
    let mut backlog: Vec<Arc<Conn>> = Vec::new();
    let note = |backlog: &mut Vec<Arc<Conn>>, c: &Arc<Conn>, waiting: bool| {
        if waiting && !backlog.iter().any(|b| Arc::ptr_eq(b, c)) {
            backlog.push(c.clone());
        }
    };
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
                            note(&mut backlog, c, c.out().send(s.cookie, nbd::EINVAL, None));
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
            answer_due(shared, &mut engine, d, origin, &mut data, |s, error, payload| {
                if let Some(c) = &s.conn {
                    note(&mut backlog, c, c.out().send(s.cookie, error, payload));
                }
            });
        }
        backlog.retain(|c| c.out().drain());
        if now >= next_stats {
            print_stats(shared, &mut engine, now, stats_ns.unwrap_or(1));
            next_stats = now + stats_ns.unwrap_or(u64::MAX);
        }
        if senders_gone && engine.in_flight() == 0 && backlog.is_empty() {
            return (engine, ns_since(origin, Instant::now()));
        }
        // With replies waiting for a socket to drain, look again within a millisecond.
        let next_look = if backlog.is_empty() { next_stats } else { next_stats.min(now + 1_000_000) };
        wait(shared, &engine, origin, taken, next_look);
    }
}

/// Answers a request the model has completed, through `send(submission, error, read data)`.
fn answer_due(
    shared: &Shared,
    engine: &mut Engine<Submission>,
    d: Due<Submission>,
    origin: Instant,
    data: &mut Vec<u8>,
    send: impl FnOnce(&Submission, u32, Option<&[u8]>),
) {
    let s = d.info;
    let (error, payload) = match s.op {
        IoOp::Read => match read_data(shared, shared.exports[s.export].base + s.offset, s.len, data) {
            Ok(d) => (0, Some(d)),
            Err(e) => (e, None),
        },
        _ => (0, None),
    };
    // The reply is late by the time it starts to leave; sending its data is the link's time.
    let late = ns_since(origin, Instant::now()).saturating_sub(d.due_ns);
    send(&s, error, payload);
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
}
