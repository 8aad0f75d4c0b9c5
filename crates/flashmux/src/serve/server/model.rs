//! The model thread (`--io-threads per-connection`), the model's only owner: it submits each
//! request at the time it arrived, processes the model's events as the wall clock reaches them,
//! and sends each reply when the model completes its request. Between events it sleeps, and
//! spins for the last [`SPIN_NS`] (200 µs), so replies leave within microseconds of their time;
//! the lateness is measured and reported. Also the stats lines both layouts print.

use super::*;

pub(super) fn ns_since(origin: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(origin).as_nanos() as u64
}

/// Below this, the model thread spins instead of sleeping: a sleeping thread wakes tens of
/// microseconds late.
pub(super) const SPIN_NS: u64 = 200_000;

/// The model thread looks at the stop flag and the stats at least this often.
pub(super) const MAX_SLEEP_NS: u64 = 20_000_000;

/// The model's owner: submissions in, events as their time comes, replies out. Returns the
/// engine and the time it stopped, once the server is stopping, every connection has gone and
/// nothing is in flight.
pub(super) fn model_thread(
    shared: &Shared,
    mut engine: Engine<Submission>,
    rx: Receiver<Submission>,
    origin: Instant,
    stats: Option<Duration>,
) -> (Engine<Submission>, u64) {
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
pub(super) fn answer_due(
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
pub(super) fn wait(shared: &Shared, engine: &Engine<Submission>, origin: Instant, taken: u64, next_stats: u64) {
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
pub(super) fn print_stats(shared: &Shared, engine: &mut Engine<Submission>, now_ns: u64, interval_ns: u64) {
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
