//! Accepting connections, and their handshakes within limits.
//!
//! At most `--max-connections` connections are served at once (past their handshake); a
//! connection beyond that is refused, at accept or at the end of its handshake, where it takes
//! its place before its client is told it may begin. Connections in their handshake have a pool
//! of their own of the same size: when it is full, a new connection closes the one that has been
//! negotiating longest, so connections that never negotiate cannot lock out one that does. The
//! whole handshake has one deadline (`--handshake-timeout`, default 10 s), not each read.
//!
//! Example: with `--max-connections 2` and two clients served, a third connection is refused
//! as it is accepted. With one served and two negotiating, the first of the two to finish takes
//! the last place and the other is refused at the end of its handshake. A connection that says
//! nothing is closed after 10 s, or sooner when it is the oldest of two in their handshake and
//! another connection arrives.

use super::conn::connection;
use super::net::{Deadlined, Stream};
use super::*;

/// The acceptor thread: takes each new connection, refuses it if `--max-connections` are being
/// served, and starts its thread (a connection's own, or a handshake thread that hands it to the
/// single I/O thread). Ends when the server stops.
pub(super) fn accept_loop(shared: &Arc<Shared>, listener: &Listener, route: Route) {
    let max = shared.max_connections;
    let mut next_id = 0u64;
    while let Some(stream) = accept_next(shared, listener) {
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
        if let Err(e) = start_connection(shared, id, accepted, stream, &route) {
            (shared.log)(&format!("connection {id}: cannot start its thread: {e}"));
            shared.handshaking.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            shared.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        }
    }
}

/// The next accepted connection, or `None` once the server is stopping. A failed accept is
/// logged and tried again a little later.
fn accept_next(shared: &Shared, listener: &Listener) -> Option<Stream> {
    loop {
        let stream = match listener.accept() {
            Ok(s) => s,
            Err(_) if shared.stopping.load(Ordering::SeqCst) => return None,
            Err(e) => {
                (shared.log)(&format!("accepting a connection failed: {e}"));
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if shared.stopping.load(Ordering::SeqCst) {
            return None;
        }
        return Some(stream);
    }
}

/// Starts connection `id`'s thread on `route`: its own thread (per-connection), or a handshake
/// thread that hands it to the I/O thread (single). Either takes it off the open list when done
/// with it.
fn start_connection(
    shared: &Arc<Shared>,
    id: u64,
    accepted: Instant,
    stream: Stream,
    route: &Route,
) -> io::Result<thread::JoinHandle<()>> {
    let sh = shared.clone();
    match route {
        Route::PerConnection(tx) => {
            let tx = tx.clone();
            thread::Builder::new().name(format!("flashmux-conn-{id}")).spawn(move || {
                connection(&sh, id, accepted, stream, &tx);
                sh.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            })
        }
        Route::Single(tx, wake) => {
            let (tx, wake) = (tx.clone(), wake.clone());
            thread::Builder::new()
                .name(format!("flashmux-handshake-{id}"))
                .spawn(move || hand_over(&sh, id, accepted, stream, &tx, &wake))
        }
    }
}

/// A handshake thread (single layout): negotiates, then hands the connection to the I/O thread
/// and wakes it; a connection not handed over leaves the open list.
fn hand_over(
    shared: &Shared,
    id: u64,
    accepted: Instant,
    mut stream: Stream,
    tx: &Sender<single::Handoff>,
    wake: &UnixStream,
) {
    let handed = match negotiate(shared, id, accepted, &mut stream) {
        Some((export, flags)) => {
            let handed = tx.send(single::Handoff { id, stream, export, flags }).is_ok();
            if !handed {
                shared.served.fetch_sub(1, Ordering::SeqCst);
            }
            handed
        }
        None => false,
    };
    if handed {
        let _ = (&*wake).write(&[1]);
    } else {
        shared.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }
}

/// Lists connection `id` among those in their handshake. If as many as `--max-connections` are
/// already, the one that has been negotiating longest is closed to make room: a real client's
/// handshake is over in milliseconds, so the oldest unfinished one is the likeliest to be a
/// connection that says nothing at all.
pub(super) fn make_room_for_handshake(shared: &Shared, id: u64, now: Instant) {
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
pub(super) fn take_place(shared: &Shared, id: u64) -> bool {
    let max = shared.max_connections;
    if shared.served.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1)).is_ok() {
        return true;
    }
    shared.refused.fetch_add(1, Ordering::SeqCst);
    (shared.log)(&format!(
        "connection {id}: refused at the end of its handshake: {max} are being served (--max-connections)"
    ));
    false
}

/// The handshake, which must be over by `accepted` + the handshake timeout: the export chosen
/// and the transmission flags, with a place under `--max-connections` taken (before the client
/// is told it may begin), or `None` if the client left, broke the protocol, took too long, found
/// no place, or was closed to make room for a newer connection.
pub(super) fn negotiate(shared: &Shared, id: u64, accepted: Instant, stream: &mut Stream) -> Option<(usize, u16)> {
    let deadline = accepted + shared.handshake_timeout;
    let result = nbd::handshake_admitting(
        &mut Deadlined { stream, deadline },
        &shared.nbd_exports,
        &LIMITS,
        transmission_flags(),
        &mut |_| take_place(shared, id),
    );
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
                (shared.log)(&format!(
                    "connection {id}: no handshake within {}: closed",
                    in_secs(shared.handshake_timeout)
                ));
            } else {
                (shared.log)(&format!("connection {id}: handshake failed: {e}"));
            }
            None
        }
    }
}
