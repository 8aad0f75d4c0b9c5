//! The NBD transmission phase: request headers parsed and checked, simple replies encoded.
//!
//! A request is a 28-byte header ([`REQUEST_LEN`]: magic, command flags, type, cookie, offset,
//! length), followed by the data for a write; the reply is a 16-byte simple reply
//! ([`SIMPLE_REPLY_LEN`]: magic, error, cookie), followed by the data for a successful read.
//! [`check_request`] says whether the server may serve a request, as an NBD error value, without
//! the connection losing its framing: a refused write's data still follows its header.
//!
//! Example: a 4 KiB read at offset 1 MiB of a 512 KiB export is refused with `EINVAL` (past the
//! end; a write there gets `ENOSPC`), and its reply is the 16 bytes of
//! `encode_simple_reply(EINVAL, cookie)` with no data.
//!
//! Source: the NBD protocol, `doc/proto.md` of the NBD project.

use super::*;
use std::io::Write;

/// A request type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// `NBD_CMD_READ` (0).
    Read,
    /// `NBD_CMD_WRITE` (1): *length* bytes of data follow the header.
    Write,
    /// `NBD_CMD_DISC` (2): the client is done; no reply.
    Disc,
    /// `NBD_CMD_FLUSH` (3).
    Flush,
    /// `NBD_CMD_TRIM` (4).
    Trim,
    /// `NBD_CMD_CACHE` (5).
    Cache,
    /// `NBD_CMD_WRITE_ZEROES` (6).
    WriteZeroes,
    /// `NBD_CMD_BLOCK_STATUS` (7): needs metadata contexts, which are never negotiated.
    BlockStatus,
    /// Any other type.
    Unknown(u16),
}

impl Command {
    /// The command a wire type denotes.
    pub fn from_wire(t: u16) -> Self {
        match t {
            0 => Command::Read,
            1 => Command::Write,
            2 => Command::Disc,
            3 => Command::Flush,
            4 => Command::Trim,
            5 => Command::Cache,
            6 => Command::WriteZeroes,
            7 => Command::BlockStatus,
            t => Command::Unknown(t),
        }
    }

    /// The wire type of the command.
    pub fn to_wire(self) -> u16 {
        match self {
            Command::Read => 0,
            Command::Write => 1,
            Command::Disc => 2,
            Command::Flush => 3,
            Command::Trim => 4,
            Command::Cache => 5,
            Command::WriteZeroes => 6,
            Command::BlockStatus => 7,
            Command::Unknown(t) => t,
        }
    }
}

/// A transmission request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Command flags (`CMD_FLAG_*`).
    pub flags: u16,
    /// The request type.
    pub cmd: Command,
    /// The client's tag for the request (the protocol's *handle*), echoed in the reply.
    pub cookie: u64,
    /// Byte offset into the export.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
}

impl Request {
    /// Bytes of data that follow this header on the wire: *length* for `NBD_CMD_WRITE`, none
    /// for anything else. The server must read (or discard) exactly this many bytes before the
    /// next header, even when it refuses the request, or the stream loses its framing.
    pub fn payload_len(&self) -> u32 {
        match self.cmd {
            Command::Write => self.len,
            _ => 0,
        }
    }

    /// The header as a client sends it.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.cmd.to_wire().to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.len.to_be_bytes());
        b
    }
}

/// Parses a request header. Only the magic is checked: a bad magic means the stream has lost its
/// framing and the connection must close. Whether the request itself is acceptable is for
/// [`check_request`] to say.
pub fn parse_request(hdr: &[u8; REQUEST_LEN]) -> Result<Request, NbdError> {
    let magic = u32::from_be_bytes(take(hdr, 0));
    if magic != REQUEST_MAGIC {
        return Err(NbdError::BadRequestMagic(magic));
    }
    Ok(Request {
        flags: u16::from_be_bytes(take(hdr, 4)),
        cmd: Command::from_wire(u16::from_be_bytes(take(hdr, 6))),
        cookie: u64::from_be_bytes(take(hdr, 8)),
        offset: u64::from_be_bytes(take(hdr, 16)),
        len: u32::from_be_bytes(take(hdr, 24)),
    })
}

/// Says whether a well-framed request may be served, and if not, the error to reply with.
///
/// `transmission_flags` and `limits` are what the handshake advertised. The rules, first match
/// wins:
///
/// 1. `NBD_CMD_DISC` is always accepted: it has no reply; the server closes the connection.
/// 2. `EINVAL` for a command not offered: unknown types, `NBD_CMD_BLOCK_STATUS` (no metadata
///    context is ever negotiated), and `NBD_CMD_FLUSH`, `NBD_CMD_TRIM`, `NBD_CMD_WRITE_ZEROES`
///    when their `NBD_FLAG_SEND_*` flag was not sent. `NBD_CMD_CACHE` is always accepted (some
///    clients send it unadvertised); it is a hint the server may ignore.
/// 3. `EINVAL` for a command flag that is unknown or not valid on the command: `FUA` is valid on
///    any command if `NBD_FLAG_SEND_FUA` was sent; `NO_HOLE` on write-zeroes; `FAST_ZERO` on
///    write-zeroes if `NBD_FLAG_SEND_FAST_ZERO` was sent; `DF` and `REQ_ONE` never (they need
///    structured replies and metadata contexts).
/// 4. `EPERM` for a write, trim or write-zeroes on a read-only export.
/// 5. `NBD_CMD_FLUSH`: `EINVAL` unless offset and length are zero (they are reserved).
/// 6. A range past the end of the export (or whose end overflows): `ENOSPC` for a write or
///    write-zeroes, `EINVAL` for anything else (read, trim, cache), as the protocol recommends.
/// 7. `EINVAL` if the offset or length is not a multiple of the minimum block size.
/// 8. `EINVAL` for a read or write longer than `max_payload`. Trim, write-zeroes and cache carry
///    no payload and are not limited: clients (the Linux kernel among them) size discards and
///    zeroing independently of the negotiated maximum.
///
/// A zero length passes (the protocol leaves it unspecified and asks servers not to disconnect):
/// serve it as a no-op. A refused `NBD_CMD_WRITE` still has [`Request::payload_len`] bytes of
/// data on the wire: read and discard them before the next header.
pub fn check_request(req: &Request, export_size: u64, transmission_flags: u16, limits: &Limits) -> Result<(), u32> {
    let flag = |f: u16| transmission_flags & f != 0;
    let offered = match req.cmd {
        Command::Disc => return Ok(()),
        Command::Read | Command::Write | Command::Cache => true,
        Command::Flush => flag(FLAG_SEND_FLUSH),
        Command::Trim => flag(FLAG_SEND_TRIM),
        Command::WriteZeroes => flag(FLAG_SEND_WRITE_ZEROES),
        Command::BlockStatus | Command::Unknown(_) => false,
    };
    if !offered {
        return Err(EINVAL);
    }

    let mut valid_flags = 0;
    if flag(FLAG_SEND_FUA) {
        valid_flags |= CMD_FLAG_FUA;
    }
    if req.cmd == Command::WriteZeroes {
        valid_flags |= CMD_FLAG_NO_HOLE;
        if flag(FLAG_SEND_FAST_ZERO) {
            valid_flags |= CMD_FLAG_FAST_ZERO;
        }
    }
    if req.flags & !valid_flags != 0 {
        return Err(EINVAL);
    }

    let writes = matches!(req.cmd, Command::Write | Command::Trim | Command::WriteZeroes);
    if writes && flag(FLAG_READ_ONLY) {
        return Err(EPERM);
    }

    if req.cmd == Command::Flush {
        return if req.offset == 0 && req.len == 0 { Ok(()) } else { Err(EINVAL) };
    }

    let len = u64::from(req.len);
    if req.offset.checked_add(len).is_none_or(|end| end > export_size) {
        return Err(match req.cmd {
            Command::Write | Command::WriteZeroes => ENOSPC,
            _ => EINVAL,
        });
    }

    // A zero minimum (a configuration `Limits::validate` refuses) must not divide by zero here.
    let min = u64::from(limits.min_block.max(1));
    if req.offset % min != 0 || len % min != 0 {
        return Err(EINVAL);
    }

    if matches!(req.cmd, Command::Read | Command::Write) && req.len > limits.max_payload {
        return Err(EINVAL);
    }
    Ok(())
}

/// A simple reply header: magic, error (0 for success), the request's cookie. For a successful
/// `NBD_CMD_READ`, exactly *length* bytes of data follow it; for a failed one, none.
pub fn encode_simple_reply(error: u32, cookie: u64) -> [u8; SIMPLE_REPLY_LEN] {
    let mut b = [0u8; SIMPLE_REPLY_LEN];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// Writes a simple reply header (see [`encode_simple_reply`]).
pub fn write_simple_reply<W: Write + ?Sized>(out: &mut W, error: u32, cookie: u64) -> io::Result<()> {
    out.write_all(&encode_simple_reply(error, cookie))
}

/// The NBD error value for a failed operation on the store: `EINVAL` for a bad argument,
/// `ENOSPC` for a full disk, a quota or a file too large, `EPERM` for a permission or a
/// read-only file system, `ENOMEM` for memory, `EIO` for anything else.
pub fn error_value(err: &io::Error) -> u32 {
    match err.kind() {
        io::ErrorKind::InvalidInput => EINVAL,
        io::ErrorKind::StorageFull | io::ErrorKind::FileTooLarge => ENOSPC,
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => EPERM,
        io::ErrorKind::OutOfMemory => ENOMEM,
        _ => EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TFLAGS: u16 = FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES;

    fn req(cmd: Command, flags: u16, offset: u64, len: u32) -> Request {
        Request { flags, cmd, cookie: 0x0102_0304_0506_0708, offset, len }
    }

    #[test]
    fn request_header_round_trips_and_bad_magic_is_an_error() {
        let r = req(Command::WriteZeroes, CMD_FLAG_FUA | CMD_FLAG_NO_HOLE, 0x1122_3344_5566_7788, 0x99aa_bbcc);
        let b = r.encode();
        assert_eq!(
            b,
            [
                0x25, 0x60, 0x95, 0x13, 0, 3, 0, 6, 1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                0x88, 0x99, 0xaa, 0xbb, 0xcc
            ]
        );
        assert_eq!(parse_request(&b).unwrap(), r);
        for t in 0..=u16::MAX {
            assert_eq!(Command::from_wire(t).to_wire(), t);
        }
        assert_eq!(Command::from_wire(8), Command::Unknown(8));
        let mut bad = b;
        bad[3] = 0x12;
        assert!(matches!(parse_request(&bad), Err(NbdError::BadRequestMagic(0x2560_9512))));
    }

    #[test]
    fn only_writes_carry_a_payload() {
        assert_eq!(req(Command::Write, 0, 0, 4096).payload_len(), 4096);
        for cmd in [Command::Read, Command::Trim, Command::WriteZeroes, Command::Cache, Command::Unknown(1000)] {
            assert_eq!(req(cmd, 0, 0, 4096).payload_len(), 0, "{cmd:?}");
        }
    }

    #[test]
    fn check_request_rules() {
        use Command::*;
        const SIZE: u64 = 1 << 20;
        let all = TFLAGS | FLAG_HAS_FLAGS | FLAG_SEND_FAST_ZERO;
        let l = Limits { min_block: 512, preferred_block: 4096, max_payload: 64 << 10 };
        #[rustfmt::skip]
        let table: &[(&str, Request, u16, Result<(), u32>)] = &[
            ("read", req(Read, 0, 0, 4096), all, Ok(())),
            ("read to the end", req(Read, 0, SIZE - 512, 512), all, Ok(())),
            ("read at max payload", req(Read, 0, 0, 64 << 10), all, Ok(())),
            ("read zero length", req(Read, 0, 4096, 0), all, Ok(())),
            ("read zero length at the end", req(Read, 0, SIZE, 0), all, Ok(())),
            ("write", req(Write, 0, 512, 1024), all, Ok(())),
            ("write zero length", req(Write, 0, 0, 0), all, Ok(())),
            ("disc, whatever its fields", req(Disc, 0xffff, 7, 9), 0, Ok(())),
            ("flush", req(Flush, 0, 0, 0), all, Ok(())),
            ("flush with fua", req(Flush, CMD_FLAG_FUA, 0, 0), all, Ok(())),
            ("trim", req(Trim, 0, 0, SIZE as u32), all, Ok(())),
            ("trim beyond max payload", req(Trim, 0, 0, 1 << 20), all, Ok(())),
            ("write zeroes beyond max payload", req(WriteZeroes, CMD_FLAG_NO_HOLE, 0, 1 << 20), all, Ok(())),
            ("write zeroes fast", req(WriteZeroes, CMD_FLAG_FAST_ZERO, 0, 512), all, Ok(())),
            ("cache unadvertised", req(Cache, 0, 0, 4096), 0, Ok(())),
            ("write with fua", req(Write, CMD_FLAG_FUA, 0, 512), all, Ok(())),
            ("read with fua", req(Read, CMD_FLAG_FUA, 0, 512), all, Ok(())),
            // Commands not offered.
            ("unknown command", req(Unknown(8), 0, 0, 512), all, Err(EINVAL)),
            ("unknown command, high", req(Unknown(0xffff), 0, 0, 0), all, Err(EINVAL)),
            ("block status", req(BlockStatus, 0, 0, 512), all, Err(EINVAL)),
            ("flush unadvertised", req(Flush, 0, 0, 0), FLAG_HAS_FLAGS, Err(EINVAL)),
            ("trim unadvertised", req(Trim, 0, 0, 512), FLAG_HAS_FLAGS, Err(EINVAL)),
            ("write zeroes unadvertised", req(WriteZeroes, 0, 0, 512), FLAG_HAS_FLAGS, Err(EINVAL)),
            // Flags.
            ("fua unadvertised", req(Write, CMD_FLAG_FUA, 0, 512), FLAG_HAS_FLAGS, Err(EINVAL)),
            ("no hole on a write", req(Write, CMD_FLAG_NO_HOLE, 0, 512), all, Err(EINVAL)),
            ("df on a read", req(Read, CMD_FLAG_DF, 0, 512), all, Err(EINVAL)),
            ("req one on a read", req(Read, CMD_FLAG_REQ_ONE, 0, 512), all, Err(EINVAL)),
            ("fast zero on a trim", req(Trim, CMD_FLAG_FAST_ZERO, 0, 512), all, Err(EINVAL)),
            ("fast zero unadvertised", req(WriteZeroes, CMD_FLAG_FAST_ZERO, 0, 512), TFLAGS, Err(EINVAL)),
            ("unknown flag", req(Read, 1 << 5, 0, 512), all, Err(EINVAL)),
            ("unknown high flag", req(Write, 1 << 15, 0, 512), all, Err(EINVAL)),
            // Read-only.
            ("write read-only", req(Write, 0, 0, 512), all | FLAG_READ_ONLY, Err(EPERM)),
            ("trim read-only", req(Trim, 0, 0, 512), all | FLAG_READ_ONLY, Err(EPERM)),
            ("write zeroes read-only", req(WriteZeroes, 0, 0, 512), all | FLAG_READ_ONLY, Err(EPERM)),
            ("read read-only", req(Read, 0, 0, 512), all | FLAG_READ_ONLY, Ok(())),
            ("flush read-only", req(Flush, 0, 0, 0), all | FLAG_READ_ONLY, Ok(())),
            // Flush fields are reserved.
            ("flush with offset", req(Flush, 0, 512, 0), all, Err(EINVAL)),
            ("flush with length", req(Flush, 0, 0, 512), all, Err(EINVAL)),
            // Range.
            ("read past the end", req(Read, 0, SIZE - 512, 1024), all, Err(EINVAL)),
            ("read starting past the end", req(Read, 0, SIZE + 512, 0), all, Err(EINVAL)),
            ("read overflowing", req(Read, 0, u64::MAX - 511, 1024), all, Err(EINVAL)),
            ("write past the end", req(Write, 0, SIZE, 512), all, Err(ENOSPC)),
            ("write overflowing", req(Write, 0, u64::MAX - 511, 1024), all, Err(ENOSPC)),
            ("write zeroes past the end", req(WriteZeroes, 0, SIZE - 512, 1024), all, Err(ENOSPC)),
            ("trim past the end", req(Trim, 0, SIZE - 512, 1024), all, Err(EINVAL)),
            ("cache past the end", req(Cache, 0, SIZE, 512), all, Err(EINVAL)),
            // Alignment.
            ("read misaligned offset", req(Read, 0, 100, 512), all, Err(EINVAL)),
            ("read misaligned length", req(Read, 0, 0, 100), all, Err(EINVAL)),
            ("write misaligned", req(Write, 0, 512 + 1, 512), all, Err(EINVAL)),
            ("trim misaligned", req(Trim, 0, 0, 513), all, Err(EINVAL)),
            ("write zeroes misaligned", req(WriteZeroes, 0, 256, 512), all, Err(EINVAL)),
            ("zero length misaligned", req(Read, 0, 1, 0), all, Err(EINVAL)),
            // Payload.
            ("read over max payload", req(Read, 0, 0, (64 << 10) + 512), all, Err(EINVAL)),
            ("write over max payload", req(Write, 0, 0, (64 << 10) + 512), all, Err(EINVAL)),
        ];
        for (name, r, flags, want) in table {
            assert_eq!(check_request(r, SIZE, *flags, &l), *want, "{name}");
        }
        // A zero minimum block is not a division by zero.
        let zero = Limits { min_block: 0, ..l };
        assert_eq!(check_request(&req(Read, 0, 3, 5), SIZE, all, &zero), Ok(()));
    }

    #[test]
    fn simple_reply_layout() {
        assert_eq!(
            encode_simple_reply(ENOSPC, 0x0102_0304_0506_0708),
            [0x67, 0x44, 0x66, 0x98, 0, 0, 0, 28, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        let mut out = Vec::new();
        write_simple_reply(&mut out, 0, u64::MAX).unwrap();
        assert_eq!(out, [0x67, 0x44, 0x66, 0x98, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    }

    #[test]
    fn store_errors_map_to_protocol_errors() {
        assert_eq!(error_value(&io::ErrorKind::InvalidInput.into()), EINVAL);
        assert_eq!(error_value(&io::Error::from_raw_os_error(28)), ENOSPC);
        assert_eq!(error_value(&io::ErrorKind::PermissionDenied.into()), EPERM);
        assert_eq!(error_value(&io::ErrorKind::Other.into()), EIO);
    }

    proptest! {
        #[test]
        fn requests_parse_and_check_without_panic(
            hdr in proptest::array::uniform28(any::<u8>()),
            size in any::<u64>(),
            flags in any::<u16>(),
            valid_magic in any::<bool>(),
        ) {
            let mut hdr = hdr;
            if valid_magic {
                hdr[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
            }
            match parse_request(&hdr) {
                Ok(r) => {
                    prop_assert!(valid_magic || hdr[0..4] == REQUEST_MAGIC.to_be_bytes());
                    prop_assert_eq!(r.encode(), hdr);
                    let _ = check_request(&r, size, flags, &Limits::default());
                }
                Err(_) => prop_assert!(!valid_magic),
            }
        }
    }
}
