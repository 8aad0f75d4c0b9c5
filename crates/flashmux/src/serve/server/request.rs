//! A request's data side, the same in both layouts: what a checked request comes to
//! ([`Action`]), the store's part of it (a write's data, zeroes and trims, durability for FUA and
//! flushes), the bytes its reply will need, and building that reply (a read takes its data from
//! the store when it is answered, not when it arrives).

use super::*;

/// The bytes of the reply `req` will get: its header, and a read's data if it is served.
pub(super) fn reply_bytes(req: &Request, checked: Result<(), u32>) -> usize {
    match (req.cmd, checked) {
        (Command::Disc, Ok(())) => 0,
        (Command::Read, Ok(())) => nbd::SIMPLE_REPLY_LEN + req.len as usize,
        _ => nbd::SIMPLE_REPLY_LEN,
    }
}

/// What a request comes to, once checked and its data stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
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
pub(super) fn handle(
    shared: &Shared,
    region: &ExportRegion,
    checked: Result<(), u32>,
    req: &Request,
    payload: &[u8],
) -> Action {
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
pub(super) fn build_reply(
    shared: &Shared,
    buf: &mut Vec<u8>,
    cookie: u64,
    error: u32,
    read: Option<(u64, u64)>,
) -> u32 {
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
pub(super) fn count_direct(shared: &Shared, error: u32) {
    shared.direct.fetch_add(1, Ordering::Relaxed);
    if error != 0 {
        shared.direct_errors.fetch_add(1, Ordering::Relaxed);
    }
}
