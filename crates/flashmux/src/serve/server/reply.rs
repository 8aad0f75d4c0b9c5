//! What the server owes its clients, and the sending side of a connection.
//!
//! Every request reserves the bytes of its reply (its 16-byte header, and a read's data) in the
//! [`ReplyBudget`] before the request is read further; the bytes are given back as the client's
//! socket takes them. A connection may owe [`REPLY_BYTES_PER_CONNECTION`], all together
//! `--reply-memory`; at either bound the connection reads no further request ([`Room`] says
//! which bound), so a slow client is made to wait through its socket, never dropped for being
//! slow. [`Out`] sends a reply at once as far as the socket takes it and queues the rest (a long
//! rest as the reply's own buffer, no copy); [`Conn`] is `Out` behind the lock the threads of
//! one connection share, waking the reader when room is made and the writer when replies wait.
//!
//! Example: a client reading 4 KiB blocks at queue depth 32 owes at most 32 × (16 + 4,096) =
//! 131,584 bytes; one reading 32 MiB blocks reaches its connection's bound (two of the longest
//! replies) with two requests out, and its third request waits until the first reply has left.
//!
//! Parameters: [`REPLY_BYTES_PER_CONNECTION`] (2 × (16 B + 32 MiB)); `--reply-memory` (at least
//! [`MIN_REPLY_MEMORY`], 64 MiB; default [`DEFAULT_REPLY_MEMORY`], 1 GiB); `--idle-timeout`
//! (default 10 s: a client whose socket takes nothing that long is dropped, logged, counted);
//! `HAND_OVER` (64 KiB: a shorter unsent rest is copied instead of handed over).

use super::net::{send_nowait, Stream};
use super::*;

/// What the socket does not take of a reply at least this long is queued as the reply's own
/// buffer (the sender takes the connection's spare one instead); less is copied.
pub(super) const HAND_OVER: usize = 64 << 10;

/// Reply bytes the server owes its clients: replies still in the model or at the connection's
/// thread, waiting for a socket, or being written. Each request reserves its reply's bytes
/// before it is read further; they are given back as the socket takes them.
pub(super) struct ReplyBudget {
    /// Bound for one connection, and for all together.
    pub(super) per_connection: usize,
    pub(super) total: usize,
    pub(super) used: Mutex<usize>,
    /// Threads waiting in [`ReplyBudget::wait`] for room, which `freed` wakes.
    pub(super) waiters: AtomicUsize,
    pub(super) freed: Condvar,
    /// The most owed at once.
    pub(super) peak: AtomicUsize,
}

/// Whether a reply's bytes could be reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Room {
    Taken,
    /// The connection owes its bound.
    ConnectionFull,
    /// All connections together owe the server's bound.
    TotalFull,
}

impl ReplyBudget {
    pub(super) fn new(total: u64) -> ReplyBudget {
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

    pub(super) fn used(&self) -> MutexGuard<'_, usize> {
        self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves `n` bytes for a connection that owes `owed`, if neither bound is passed.
    pub(super) fn take(&self, owed: &mut usize, n: usize) -> Room {
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
    pub(super) fn give_back(&self, owed: &mut usize, n: usize) {
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
    pub(super) fn wait(&self, n: usize, limit: Duration) {
        let used = self.used();
        if *used + n > self.total {
            self.waiters.fetch_add(1, Ordering::SeqCst);
            drop(self.freed.wait_timeout(used, limit).unwrap_or_else(PoisonError::into_inner));
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub(super) fn owed(&self) -> usize {
        *self.used()
    }
}

/// A connection's sending side: its socket, the reply bytes it has not taken yet, and what the
/// connection owes. Both layouts send through it; neither the model thread (per-connection) nor
/// the polling thread (single) ever waits for a client's socket.
pub(super) struct Out {
    /// `connection N (export)`, for messages.
    pub(super) who: String,
    pub(super) stream: Stream,
    /// Reply bytes the socket has not taken, oldest first.
    pub(super) queue: VecDeque<Vec<u8>>,
    /// Bytes of the queue's first buffer already sent.
    pub(super) front_sent: usize,
    /// A reply buffer the socket has taken, kept for the next long reply (at most one, the
    /// largest): streaming large reads allocates nothing.
    pub(super) spare: Vec<u8>,
    /// Reply bytes reserved and not yet taken by the socket: replies to come, queued, and being
    /// written.
    pub(super) owed: usize,
    /// The writer thread is writing a buffer it took from the queue (per-connection layout):
    /// nothing else may be sent meanwhile.
    pub(super) writing: bool,
    /// When the socket last took reply bytes (or replies began to wait).
    pub(super) progress: Instant,
    /// No more requests are read: the writer thread ends once nothing is owed.
    pub(super) closing: bool,
    /// A reply could not be written, or the client stopped reading: nothing more is sent.
    pub(super) dead: bool,
    /// The connection's reading thread waits for room, its writer thread for replies
    /// (per-connection layout): [`Conn::with`] wakes them.
    pub(super) reader_waits: bool,
    pub(super) writer_waits: bool,
}

impl Out {
    pub(super) fn new(who: String, stream: Stream) -> Out {
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

    pub(super) fn give_back(&mut self, shared: &Shared, n: usize) {
        shared.budget.give_back(&mut self.owed, n);
    }

    /// A reply built whole in `reply` (see [`build_reply`]), for which `reserved` bytes were
    /// reserved: written as far as the socket takes it without waiting; the rest is queued. A
    /// long rest is queued as `reply` itself, which becomes the connection's spare buffer (or
    /// an empty one): no reply is copied.
    pub(super) fn send(&mut self, shared: &Shared, reply: &mut Vec<u8>, reserved: usize) {
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
    pub(super) fn keep_spare(&mut self, buf: Vec<u8>) {
        if buf.capacity() >= HAND_OVER && buf.capacity() > self.spare.capacity() {
            self.spare = buf;
        }
    }

    /// Swaps the spare buffer into `buf` if `buf` cannot hold a reply of `len` bytes and the
    /// spare can: a long reply is built without allocating (and faulting in) a buffer for it.
    pub(super) fn lend_spare(&mut self, buf: &mut Vec<u8>, len: usize) {
        if buf.capacity() < len && self.spare.capacity() >= len {
            std::mem::swap(buf, &mut self.spare);
        }
    }

    /// Writes what the socket takes of the queue now (single layout). A client whose socket
    /// has taken nothing for the idle timeout is dropped.
    pub(super) fn drain(&mut self, shared: &Shared) {
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
    pub(super) fn waiting(&self) -> bool {
        !self.dead && !self.queue.is_empty()
    }

    /// The client went away or stopped reading: it gets nothing more. What was queued for it is
    /// given back; replies still to come are given back as they come.
    pub(super) fn kill(&mut self, shared: &Shared) {
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
    pub(super) fn drop_idle(&mut self, shared: &Shared) {
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
pub(super) struct Conn {
    pub(super) out: Mutex<Out>,
    /// The writer thread waits here for replies to write, or the connection's end.
    pub(super) ready: Condvar,
    /// The reading thread waits here for room for its next reply.
    pub(super) room: Condvar,
}

impl Conn {
    pub(super) fn new(out: Out) -> Conn {
        Conn { out: Mutex::new(out), ready: Condvar::new(), room: Condvar::new() }
    }

    pub(super) fn out(&self) -> MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the sending side, then wakes the reading thread if `f` made room (or ended
    /// the connection) and the writer thread if `f` queued replies (or ended it).
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut Out) -> R) -> R {
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
