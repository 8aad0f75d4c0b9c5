//! `--io-threads single`: one thread does every connection's I/O and drives the model.
//!
//! This is QEMU's arrangement before per-queue I/O threads (paper A's baseline): one event loop
//! polls every client's socket, and everything it does — reading requests, storing data,
//! running the model, writing replies — is serialised in it, as if under one global lock.
//! Handshakes run on short-lived threads, which hand each negotiated connection over.

use super::model::{answer_due, ns_since, print_stats, MAX_SLEEP_NS, SPIN_NS};
use super::*;
use std::os::unix::net::UnixStream;

/// A negotiated connection, handed to the I/O thread.
pub(super) struct Handoff {
    pub id: u64,
    pub stream: Stream,
    pub export: usize,
    pub flags: u16,
}

/// A connection as the I/O thread holds it.
struct Polled {
    export: usize,
    flags: u16,
    /// Bytes read and not yet parsed: at most one request's worth beyond what was handled.
    input: Vec<u8>,
    /// Its sending side (the replies the socket has not taken, and what it owes).
    out: Out,
    /// Requests of this connection in the model.
    in_model: usize,
    /// The client closed its side (or sent DISC): nothing more is read.
    eof: bool,
    /// The socket reported a hang-up or an error: it is no longer polled (reads and sends
    /// finish without waiting).
    hup: bool,
    /// A whole request waits in `input` for room for its reply: reading is paused.
    blocked: bool,
}

impl Polled {
    /// Whether the socket should be read now.
    fn wants_input(&self) -> bool {
        !self.eof && !self.out.dead && !self.blocked && self.input.len() < INPUT_CAP
    }
}

const READ_CHUNK: usize = 256 << 10;
/// Reading stops once this much is waiting to be parsed: one request with the most data.
const INPUT_CAP: usize = nbd::REQUEST_LEN + LIMITS.max_payload as usize;

/// The I/O thread: returns the engine and the time it stopped, once the server is stopping,
/// every connection has been handed over and closed, and nothing is in flight.
pub(super) fn io_thread(
    shared: &Shared,
    mut engine: Engine<Submission>,
    handoffs: Receiver<Handoff>,
    wake: UnixStream,
    origin: Instant,
    stats: Option<Duration>,
) -> (Engine<Submission>, u64) {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let _ = wake.set_nonblocking(true);
    let mut io = IoLoop {
        conns: BTreeMap::new(),
        due: Vec::new(),
        data: Vec::new(),
        chunk: vec![0u8; READ_CHUNK],
        fds: Vec::new(),
        ids: Vec::new(),
    };
    let mut handoffs_done = false;
    let stats_ns = stats.map(|d| d.as_nanos().max(1) as u64);
    let mut next_stats = stats_ns.unwrap_or(u64::MAX);
    loop {
        handoffs_done |= io.take_handoffs(shared, &handoffs);
        let ready = io.poll(&wake, &engine, origin, next_stats);
        io.serve_sockets(shared, &mut engine, ready, origin);
        let now = ns_since(origin, Instant::now());
        io.answer_due(shared, &mut engine, now, origin);
        io.send_and_unblock(shared, &mut engine, origin);
        if now >= next_stats {
            print_stats(shared, &mut engine, now, stats_ns.unwrap_or(1));
            next_stats = now + stats_ns.unwrap_or(u64::MAX);
        }
        io.close_finished(shared);
        if handoffs_done && io.conns.is_empty() && engine.in_flight() == 0 {
            return (engine, ns_since(origin, Instant::now()));
        }
    }
}

/// The I/O thread's state: its connections, and buffers reused from turn to turn.
struct IoLoop {
    conns: BTreeMap<u64, Polled>,
    /// Requests the model has completed, to answer.
    due: Vec<Due<Submission>>,
    /// The reply being built.
    data: Vec<u8>,
    /// What a socket read lands in.
    chunk: Vec<u8>,
    /// The poll set: the wake-up socket, then a connection each (their numbers in `ids`).
    fds: Vec<libc::pollfd>,
    ids: Vec<u64>,
}

impl IoLoop {
    /// Takes the connections handed over since the last turn. True once the handshake threads
    /// can hand over no more (the server is stopping).
    fn take_handoffs(&mut self, shared: &Shared, handoffs: &Receiver<Handoff>) -> bool {
        loop {
            match handoffs.try_recv() {
                Ok(h) => {
                    if h.stream.set_nonblocking(true).is_err() {
                        close(shared, h.id);
                        continue;
                    }
                    let who = format!("connection {} ({})", h.id, shared.exports[h.export].name);
                    let p = Polled {
                        export: h.export,
                        flags: h.flags,
                        input: Vec::new(),
                        out: Out::new(who, h.stream),
                        in_model: 0,
                        eof: false,
                        hup: false,
                        blocked: false,
                    };
                    self.conns.insert(h.id, p);
                }
                Err(TryRecvError::Empty) => return false,
                Err(TryRecvError::Disconnected) => return true,
            }
        }
    }

    /// Waits for a socket, a handover, or the model's next event (or the next stats line): in
    /// the kernel until shortly before the event, then without sleeping. Returns what `ppoll`
    /// returned (above 0: sockets are ready).
    fn poll(&mut self, wake: &UnixStream, engine: &Engine<Submission>, origin: Instant, next_stats: u64) -> libc::c_int {
        self.fds.clear();
        self.ids.clear();
        self.fds.push(libc::pollfd { fd: std::os::fd::AsRawFd::as_raw_fd(wake), events: libc::POLLIN, revents: 0 });
        for (&id, c) in &self.conns {
            let mut events = 0;
            if c.wants_input() {
                events |= libc::POLLIN;
            }
            if c.out.waiting() {
                events |= libc::POLLOUT;
            }
            // A hung-up socket would wake every poll: it is read and written without one.
            let fd = if c.hup { -1 } else { c.out.stream.fd() };
            self.fds.push(libc::pollfd { fd, events, revents: 0 });
            self.ids.push(id);
        }
        let now = ns_since(origin, Instant::now());
        let target = engine.next_event_ns().unwrap_or(u64::MAX).min(next_stats).min(now + MAX_SLEEP_NS);
        let sleep = target.saturating_sub(now).saturating_sub(SPIN_NS);
        let ts = libc::timespec { tv_sec: (sleep / 1_000_000_000) as libc::time_t, tv_nsec: (sleep % 1_000_000_000) as libc::c_long };
        // SAFETY: `fds` is a live, initialised array of `fds.len()` pollfds; `ts` outlives the call.
        let ready = unsafe { libc::ppoll(self.fds.as_mut_ptr(), self.fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
        if ready > 0 && self.fds[0].revents != 0 {
            let mut sink = [0u8; 64];
            while matches!((&*wake).read(&mut sink), Ok(n) if n > 0) {}
        }
        ready
    }

    /// Reads the sockets that are ready (or hung up) and handles the whole requests their
    /// input holds.
    fn serve_sockets(&mut self, shared: &Shared, engine: &mut Engine<Submission>, ready: libc::c_int, origin: Instant) {
        for (i, &id) in self.ids.iter().enumerate() {
            let revents = if ready > 0 { self.fds[i + 1].revents } else { 0 };
            let Some(c) = self.conns.get_mut(&id) else { continue };
            if revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                c.hup = true;
            }
            if c.wants_input() && (c.hup || revents & libc::POLLIN != 0) {
                read_input(shared, c, &mut self.chunk);
            }
            if !c.input.is_empty() {
                handle_input(shared, engine, id, c, &mut self.data, origin);
            }
        }
    }

    /// Advances the model to `now` and answers what it completed.
    fn answer_due(&mut self, shared: &Shared, engine: &mut Engine<Submission>, now: u64, origin: Instant) {
        engine.advance(now, &mut self.due);
        for d in self.due.drain(..) {
            let id = d.info.conn_id;
            if let Some(c) = self.conns.get_mut(&id) {
                c.out.lend_spare(&mut self.data, d.info.reserved);
            }
            let conns = &mut self.conns;
            answer_due(shared, engine, d, origin, &mut self.data, |s, reply| match conns.get_mut(&id) {
                Some(c) => {
                    c.in_model -= 1;
                    c.out.send(shared, reply, s.reserved);
                }
                // Not expected (a connection stays while it has requests in the model); the
                // reservation is given back all the same.
                None => shared.budget.give_back(&mut s.reserved.clone(), s.reserved),
            });
        }
    }

    /// Writes what the sockets take of the queued replies; then handles the requests that
    /// waited for room, as replies that left (or connections that went) may have made some.
    fn send_and_unblock(&mut self, shared: &Shared, engine: &mut Engine<Submission>, origin: Instant) {
        for c in self.conns.values_mut() {
            c.out.drain(shared);
        }
        for (&id, c) in self.conns.iter_mut() {
            if c.blocked {
                handle_input(shared, engine, id, c, &mut self.data, origin);
            }
        }
    }

    /// Closes the connections that are done: dead, or closed by the client with nothing left
    /// to answer or send, and none of their requests in the model.
    fn close_finished(&mut self, shared: &Shared) {
        let finished: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.in_model == 0 && (c.out.dead || (c.eof && !c.blocked && !c.out.waiting())))
            .map(|(&id, _)| id)
            .collect();
        for id in finished {
            self.conns.remove(&id);
            close(shared, id);
        }
    }
}

/// The connection is gone: its place under `--max-connections` is free.
fn close(shared: &Shared, id: u64) {
    shared.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    shared.served.fetch_sub(1, Ordering::SeqCst);
}

/// Reads what the client sent, up to one request's worth beyond what waits to be parsed.
fn read_input(shared: &Shared, c: &mut Polled, chunk: &mut [u8]) {
    while c.input.len() < INPUT_CAP {
        match c.out.stream.read(chunk) {
            Ok(0) => {
                c.eof = true;
                break;
            }
            Ok(n) => c.input.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                c.out.kill(shared);
                return;
            }
        }
    }
}

/// Handles every whole request in the connection's input for whose reply there is room; the
/// first without room waits there, and reading pauses until there is.
fn handle_input(shared: &Shared, engine: &mut Engine<Submission>, id: u64, c: &mut Polled, data: &mut Vec<u8>, origin: Instant) {
    let region = shared.exports[c.export].clone();
    let was_blocked = std::mem::take(&mut c.blocked);
    let mut at = 0;
    while !c.out.dead && c.input.len() - at >= nbd::REQUEST_LEN {
        let hdr: &[u8; nbd::REQUEST_LEN] = c.input[at..at + nbd::REQUEST_LEN].try_into().expect("a whole header");
        let req = match nbd::parse_request(hdr) {
            Ok(r) => r,
            Err(e) => {
                (shared.log)(&format!("{}: {e}; closing it", c.out.who));
                c.out.kill(shared);
                break;
            }
        };
        let follows = req.payload_len() as usize;
        if c.input.len() - at < nbd::REQUEST_LEN + follows {
            break;
        }
        let checked = nbd::check_request(&req, region.size, c.flags, &LIMITS);
        let reserved = reply_bytes(&req, checked);
        if shared.budget.take(&mut c.out.owed, reserved) != Room::Taken {
            if !was_blocked {
                shared.read_pauses.fetch_add(1, Ordering::SeqCst);
            }
            c.blocked = true;
            break;
        }
        let payload_at = at + nbd::REQUEST_LEN;
        at = payload_at + follows;
        let arrived = Instant::now();
        match handle(shared, &region, checked, &req, &c.input[payload_at..at]) {
            Action::Close => {
                c.out.give_back(shared, reserved);
                c.eof = true;
                c.input.clear();
                return;
            }
            Action::Reply { error, read } => {
                c.out.lend_spare(data, reserved);
                let error = build_reply(shared, data, req.cookie, error, read.then_some((region.base + req.offset, u64::from(req.len))));
                c.out.send(shared, data, reserved);
                count_direct(shared, error);
            }
            Action::Model(op) => {
                let s = Submission {
                    conn: None,
                    conn_id: id,
                    cookie: req.cookie,
                    export: c.export,
                    op,
                    offset: req.offset,
                    len: u64::from(req.len),
                    arrived,
                    reserved,
                };
                match engine.submit(ns_since(origin, arrived), c.export, op, req.offset, u64::from(req.len), s) {
                    Ok(()) => c.in_model += 1,
                    Err((s, e)) => {
                        (shared.log)(&format!("the model refused a request: {e}"));
                        build_reply(shared, data, s.cookie, nbd::EINVAL, None);
                        c.out.send(shared, data, s.reserved);
                        engine.record_reply(None, true);
                    }
                }
            }
        }
    }
    c.input.drain(..at);
}
