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
//!
//! This file holds the server's options, what its threads share (`Shared`), and the run from
//! start to stop ([`serve_streaming`]). The rest, by role: `server/accept.rs` (accepting
//! connections, handshakes within limits), `server/conn.rs` (a connection's reader, with
//! back-pressure, and its writer thread), `server/reply.rs` (what the server owes its clients,
//! and a connection's sending side), `server/request.rs` (a request's data side and its reply),
//! `server/model.rs` (the model thread, stats lines), `server/single.rs` (the single I/O thread),
//! `server/net.rs` (sockets).

mod accept;
mod conn;
mod model;
mod net;
mod reply;
mod request;
mod single;

use self::accept::accept_loop;
use self::model::model_thread;
use self::net::{backing_error, Listener, Stream};
use self::reply::{Conn, Out, ReplyBudget, Room};
use self::request::{build_reply, count_direct, handle, reply_bytes, Action};
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
    /// Write the requests the model serves to this file, in this trace format
    /// (`super::record`; needs `timing`).
    pub record: Option<(PathBuf, crate::workload::trace::Format)>,
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
        return Ok(engine.finish(0, nothing_served(&opts)));
    }
    let recorder = match &opts.record {
        Some((path, format)) => {
            let names = engine.exports().iter().map(|e| e.name.clone()).collect();
            let (recorder, sink) = super::record::Recorder::start(path, *format, names)
                .map_err(|e| ServeError::BadInput(format!("--record: {}: {e}", path.display())))?;
            engine.record_to(sink);
            Some(recorder)
        }
        None => None,
    };
    let store = open_store(&opts, engine.capacity_bytes())?;
    let (listener, listen) = Listener::bind(&opts.listen)?;
    let shared = Arc::new(Shared::new(&engine, store, &opts, log));
    shared.say_serving(&listen, &opts);
    let origin = Instant::now();
    let (model, route) = start_model(&shared, engine, opts.io_threads, origin, opts.stats_interval)?;
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
    stop_serving(&shared, &listen, acceptor);
    let (engine, now_ns) = model.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    if let Err(e) = shared.store.flush() {
        (shared.log)(&format!("flushing the store failed: {e}"));
    }
    let mut r = engine.finish(now_ns, shared.result(&listen, &opts, origin));
    if let Some(rec) = recorder {
        match rec.finish() {
            Ok(n) => (shared.log)(&format!("recorded {n} requests to {}", opts.record.as_ref().map_or_else(String::new, |(p, _)| p.display().to_string()))),
            Err(e) => (shared.log)(&format!("recording failed: {e}")),
        }
    }
    if let Some(s) = &mut r.serve {
        s.requests += shared.direct.load(Ordering::SeqCst);
        s.errors += shared.direct_errors.load(Ordering::SeqCst);
    }
    Ok(r)
}

/// The server's part of the results of a run stopped before anything was served.
fn nothing_served(opts: &Options) -> ServeResult {
    ServeResult {
        listen: opts.listen.to_string(),
        io_threads: opts.io_threads.name().to_string(),
        timing: opts.timing,
        reply_bytes_limit: opts.reply_memory,
        ..ServeResult::default()
    }
}

/// The data store: `--backing`'s file, or memory.
fn open_store(opts: &Options, capacity: u64) -> Result<Box<dyn Store>, ServeError> {
    Ok(match &opts.backing {
        Some(p) => Box::new(FileStore::open(p, capacity).map_err(|e| backing_error(p, &e))?),
        None => Box::new(MemStore::new(capacity)),
    })
}

/// Starts the thread that owns the model (the model thread, or the single I/O thread), and
/// says where accepted connections go.
fn start_model(
    shared: &Arc<Shared>,
    engine: Engine<Submission>,
    io_threads: IoThreads,
    origin: Instant,
    stats: Option<Duration>,
) -> Result<(thread::JoinHandle<(Engine<Submission>, u64)>, Route), ServeError> {
    Ok(match io_threads {
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
    })
}

/// The server stops: no connection is accepted or read any more; what clients already sent is
/// answered (by the model's thread, which the caller joins next).
fn stop_serving(shared: &Shared, listen: &Listen, acceptor: thread::JoinHandle<()>) {
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
    if let Listen::Unix(p) = listen {
        let _ = std::fs::remove_file(p);
    }
}

impl Shared {
    fn new(engine: &Engine<Submission>, store: Box<dyn Store>, opts: &Options, log: Box<dyn Fn(&str) + Send + Sync>) -> Shared {
        let exports: Vec<ExportRegion> =
            engine.exports().iter().map(|e| ExportRegion { name: e.name.clone(), base: e.offset, size: e.size }).collect();
        let nbd_exports = exports
            .iter()
            .map(|e| nbd::Export { name: e.name.clone(), size: e.size, description: format!("flashmux tenant '{}'", e.name) })
            .collect();
        Shared {
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
        }
    }

    /// The line that says what is served, where and how.
    fn say_serving(&self, listen: &Listen, opts: &Options) {
        let names: Vec<&str> = self.exports.iter().map(|e| e.name.as_str()).collect();
        (self.log)(&format!(
            "serving {} on {} ({}, timing {}, data {})",
            names.join(", "),
            listen,
            opts.io_threads.name(),
            if opts.timing { "on" } else { "off" },
            opts.backing.as_ref().map_or("in memory".to_string(), |p| p.display().to_string())
        ));
    }

    /// The server's part of the results: its counters (the model adds its requests, errors and
    /// timing error).
    fn result(&self, listen: &Listen, opts: &Options, origin: Instant) -> ServeResult {
        ServeResult {
            listen: listen.to_string(),
            io_threads: opts.io_threads.name().to_string(),
            timing: self.timing,
            wall_s: origin.elapsed().as_secs_f64(),
            connections: self.connections.load(Ordering::SeqCst),
            connections_refused: self.refused.load(Ordering::SeqCst),
            connections_dropped: self.dropped.load(Ordering::SeqCst),
            handshakes_timed_out: self.handshakes_timed_out.load(Ordering::SeqCst),
            handshakes_evicted: self.handshakes_evicted.load(Ordering::SeqCst),
            read_pauses: self.read_pauses.load(Ordering::SeqCst),
            reply_bytes_peak: self.budget.peak.load(Ordering::SeqCst) as u64,
            reply_bytes_per_connection: self.budget.per_connection as u64,
            reply_bytes_limit: self.budget.total as u64,
            requests: 0,
            errors: 0,
            timing_error_ns: None,
        }
    }
}

/// Where accepted connections go.
enum Route {
    /// A thread each, feeding the model thread.
    PerConnection(Sender<Submission>),
    /// A handshake thread each, then to the I/O thread, woken through the socket.
    Single(Sender<single::Handoff>, Arc<UnixStream>),
}
