//! One connection on its own threads (`--io-threads per-connection`): the reader, with
//! back-pressure, and the writer.
//!
//! The reader negotiates, then reads one request at a time: it reserves its reply's bytes
//! (waiting while the connection or the server owes its bound, counted once per wait as a read
//! pause), reads a write's data, stores it, and either answers at once (errors, and everything
//! with `--timing off`) or hands the request to the model thread. The writer thread writes what
//! the socket did not take when a reply was sent, waiting for the client as the model thread
//! never does; a client that takes nothing for the idle timeout is dropped.

use super::accept::negotiate;
use super::net::{send_blocking, Stream};
use super::*;

/// The writer thread of a connection hands its replies to the socket in pieces of at most this,
/// so the room they held is given back as they leave.
pub(super) const WRITE_CHUNK: usize = 1 << 20;

/// Threads waiting for room look at the connection's state at least this often.
pub(super) const ROOM_POLL: Duration = Duration::from_millis(100);

/// One connection on its own thread: handshake, then requests until the client disconnects or
/// the server stops, with a second thread writing what replies the socket did not take at once.
pub(super) fn connection(shared: &Shared, id: u64, accepted: Instant, mut stream: Stream, tx: &Sender<Submission>) {
    let Some((export, flags)) = negotiate(shared, id, accepted, &mut stream) else { return };
    serve_connection(shared, id, stream, export, flags, tx);
    shared.served.fetch_sub(1, Ordering::SeqCst);
}

pub(super) fn serve_connection(
    shared: &Shared,
    id: u64,
    mut stream: Stream,
    export: usize,
    flags: u16,
    tx: &Sender<Submission>,
) {
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
        let started = thread::Builder::new()
            .name(format!("flashmux-reply-{id}"))
            .spawn_scoped(scope, || write_replies(shared, &conn, &writer));
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
pub(super) fn read_requests(
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
    while let Some(req) = read_header(shared, stream, conn) {
        let checked = nbd::check_request(&req, region.size, flags, &LIMITS);
        let reserved = reply_bytes(&req, checked);
        if !reserve(shared, conn, reserved) {
            return;
        }
        let give_back = || conn.with(|o| o.give_back(shared, reserved));
        if !read_payload(stream, &req, checked, &mut payload) {
            give_back();
            return;
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
                if !submit(shared, tx, s) {
                    give_back();
                    return;
                }
            }
        }
    }
}

/// The next request's header, parsed; `None` if the client closed the connection (or the
/// server is stopping), or broke the framing (then the connection is killed, and said so).
fn read_header(shared: &Shared, stream: &mut Stream, conn: &Conn) -> Option<Request> {
    let mut hdr = [0u8; nbd::REQUEST_LEN];
    stream.read_exact(&mut hdr).ok()?;
    match nbd::parse_request(&hdr) {
        Ok(r) => Some(r),
        Err(e) => {
            conn.with(|o| {
                (shared.log)(&format!("{}: {e}; closing it", o.who));
                o.kill(shared);
            });
            None
        }
    }
}

/// Reads what follows `req`'s header: a write's data into `payload`, or, for a refused request,
/// its data skipped (the framing is kept). False if the stream ended first.
fn read_payload(stream: &mut Stream, req: &Request, checked: Result<(), u32>, payload: &mut Vec<u8>) -> bool {
    if checked.is_err() {
        let follows = u64::from(req.payload_len());
        return follows == 0 || io::copy(&mut (&mut *stream).take(follows), &mut io::sink()).ok() == Some(follows);
    }
    if req.cmd == Command::Write {
        payload.resize(req.len as usize, 0);
        return stream.read_exact(payload).is_ok();
    }
    true
}

/// Hands `s` to the model thread and wakes it. False if the model thread is gone.
fn submit(shared: &Shared, tx: &Sender<Submission>, s: Submission) -> bool {
    if tx.send(s).is_err() {
        return false;
    }
    shared.submitted.fetch_add(1, Ordering::SeqCst);
    if let Some(t) = shared.model.get() {
        t.unpark();
    }
    true
}

/// Waits until the connection, and the server, have room for a reply of `n` bytes, and
/// reserves it; reading pauses meanwhile (counted once per wait). False if the connection ended.
pub(super) fn reserve(shared: &Shared, conn: &Conn, n: usize) -> bool {
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
pub(super) fn write_replies(shared: &Shared, conn: &Conn, stream: &Stream) {
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
