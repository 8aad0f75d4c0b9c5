//! The NBD protocol: handshake and transmission, as pure parsing and encoding.
//!
//! What is spoken is the baseline of the protocol (`doc/proto.md` of the NBD project): the fixed
//! newstyle handshake with `NBD_OPT_EXPORT_NAME`, `NBD_OPT_INFO`, `NBD_OPT_GO`, `NBD_OPT_LIST` and
//! `NBD_OPT_ABORT`, then a transmission phase of simple replies. Structured replies, metadata
//! contexts, extended headers and TLS are not offered: a client asking for them gets an error reply
//! it can act upon, and carries on without them.
//!
//! Everything here is a pure function over bytes except [`handshake`], which runs the negotiation
//! on a blocking stream. Nothing trusts the peer: every length it sends is bounded before anything
//! is allocated for it, and malformed input gives an [`NbdError`] or an NBD error code, never a
//! panic.
//!
//! All integers on the wire are big-endian.
//!
//! This file holds what both phases share: the protocol's numbers (magics, options, replies,
//! flags, error values, lengths and bounds), [`NbdError`], and the server's configuration
//! ([`Export`], [`Limits`]). The phases have a file each: `nbd/handshake.rs` (the option
//! negotiation, [`handshake`]; its tests in `nbd/handshake/tests.rs`) and `nbd/transmission.rs`
//! (requests and simple replies: [`parse_request`], [`check_request`], [`encode_simple_reply`]).

mod handshake;
mod transmission;

pub use handshake::{handshake, handshake_admitting, EnteredBy, Handshake, Negotiated};
pub use transmission::{
    check_request, encode_simple_reply, error_value, parse_request, write_simple_reply, Command, Request,
};

use std::io;

// ---------------------------------------------------------------------------------------------
// Magic numbers

/// `NBDMAGIC`: the first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the second 8 bytes of the greeting, and the start of every client option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// The start of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// The start of every transmission request (`NBD_REQUEST_MAGIC`).
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// The start of every simple reply (`NBD_SIMPLE_REPLY_MAGIC`).
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

// ---------------------------------------------------------------------------------------------
// Handshake flags (server, 16 bits) and client flags (32 bits)

/// Handshake flag: the server speaks fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: the server can leave out the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: the client speaks fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: the client wants no 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// ---------------------------------------------------------------------------------------------
// Options

/// Choose an export and enter transmission; cannot be answered with an error.
pub const OPT_EXPORT_NAME: u32 = 1;
/// End the negotiation; answered with `NBD_REP_ACK`.
pub const OPT_ABORT: u32 = 2;
/// List the exports.
pub const OPT_LIST: u32 = 3;
/// Upgrade to TLS (refused here: the server runs without TLS).
pub const OPT_STARTTLS: u32 = 5;
/// Describe an export without entering transmission.
pub const OPT_INFO: u32 = 6;
/// Describe an export and enter transmission.
pub const OPT_GO: u32 = 7;
/// Negotiate structured replies (not supported).
pub const OPT_STRUCTURED_REPLY: u32 = 8;
/// List metadata contexts (not supported).
pub const OPT_LIST_META_CONTEXT: u32 = 9;
/// Select metadata contexts (not supported).
pub const OPT_SET_META_CONTEXT: u32 = 10;
/// Negotiate extended headers (not supported).
pub const OPT_EXTENDED_HEADERS: u32 = 11;

// ---------------------------------------------------------------------------------------------
// Option replies

/// The option succeeded, or a list of replies is complete.
pub const REP_ACK: u32 = 1;
/// One export, in reply to `NBD_OPT_LIST`.
pub const REP_SERVER: u32 = 2;
/// One piece of information about an export, in reply to `NBD_OPT_INFO` or `NBD_OPT_GO`.
pub const REP_INFO: u32 = 3;
/// Error: the option is not supported by this server.
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
/// Error: the option is understood, but policy forbids it.
pub const REP_ERR_POLICY: u32 = (1 << 31) + 2;
/// Error: the option is syntactically or semantically invalid.
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
/// Error: the requested export is not available.
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
/// Error: the client must request block sizes first (never sent by this server).
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = (1 << 31) + 8;
/// Error: the request is too large to process.
pub const REP_ERR_TOO_BIG: u32 = (1 << 31) + 9;

// ---------------------------------------------------------------------------------------------
// Information types (in `NBD_REP_INFO` replies and `NBD_OPT_INFO`/`NBD_OPT_GO` requests)

/// Size and transmission flags of the export; always sent.
pub const INFO_EXPORT: u16 = 0;
/// Canonical name of the export.
pub const INFO_NAME: u16 = 1;
/// Human-readable description of the export.
pub const INFO_DESCRIPTION: u16 = 2;
/// Minimum, preferred and maximum block sizes.
pub const INFO_BLOCK_SIZE: u16 = 3;

// ---------------------------------------------------------------------------------------------
// Transmission flags (16 bits, per export)

/// Always set.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
/// The export is read-only: writes, trims and write-zeroes fail with `EPERM`.
pub const FLAG_READ_ONLY: u16 = 1 << 1;
/// `NBD_CMD_FLUSH` is supported.
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
/// `NBD_CMD_FLAG_FUA` is supported.
pub const FLAG_SEND_FUA: u16 = 1 << 3;
/// The export behaves like a rotational medium.
pub const FLAG_ROTATIONAL: u16 = 1 << 4;
/// `NBD_CMD_TRIM` is supported.
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
/// `NBD_CMD_WRITE_ZEROES` and `NBD_CMD_FLAG_NO_HOLE` are supported.
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// `NBD_CMD_FLAG_DF` is supported; only meaningful with structured replies, so never valid here.
pub const FLAG_SEND_DF: u16 = 1 << 7;
/// Flushes and FUA are visible across all connections to the export.
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
/// `NBD_CMD_CACHE` is understood.
pub const FLAG_SEND_CACHE: u16 = 1 << 10;
/// `NBD_CMD_FLAG_FAST_ZERO` is supported on `NBD_CMD_WRITE_ZEROES`.
pub const FLAG_SEND_FAST_ZERO: u16 = 1 << 11;

/// The transmission flags this implementation knows how to honour in [`check_request`].
const KNOWN_TRANSMISSION_FLAGS: u16 = FLAG_HAS_FLAGS
    | FLAG_READ_ONLY
    | FLAG_SEND_FLUSH
    | FLAG_SEND_FUA
    | FLAG_ROTATIONAL
    | FLAG_SEND_TRIM
    | FLAG_SEND_WRITE_ZEROES
    | FLAG_SEND_DF
    | FLAG_CAN_MULTI_CONN
    | FLAG_SEND_CACHE
    | FLAG_SEND_FAST_ZERO;

// ---------------------------------------------------------------------------------------------
// Command flags (16 bits, per request)

/// Force unit access: reply only once the command's writes are durable.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// On `NBD_CMD_WRITE_ZEROES`: do not deallocate.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// On `NBD_CMD_READ`: do not fragment the structured reply.
pub const CMD_FLAG_DF: u16 = 1 << 2;
/// On `NBD_CMD_BLOCK_STATUS`: one extent only.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
/// On `NBD_CMD_WRITE_ZEROES`: fail with `ENOTSUP` unless faster than writing.
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

// ---------------------------------------------------------------------------------------------
// Error values of the transmission phase (the protocol's own numbers, not the host's errno)

/// Operation not permitted (e.g. a write to a read-only export).
pub const EPERM: u32 = 1;
/// Input/output error.
pub const EIO: u32 = 5;
/// Cannot allocate memory.
pub const ENOMEM: u32 = 12;
/// Invalid argument.
pub const EINVAL: u32 = 22;
/// No space left on device (e.g. a write beyond the end of the export).
pub const ENOSPC: u32 = 28;
/// Value too large.
pub const EOVERFLOW: u32 = 75;
/// Operation not supported.
pub const ENOTSUP: u32 = 95;
/// The server is shutting down.
pub const ESHUTDOWN: u32 = 108;

// ---------------------------------------------------------------------------------------------
// Sizes and bounds

/// Bytes of the server's greeting: `NBDMAGIC`, `IHAVEOPT`, handshake flags.
pub const GREETING_LEN: usize = 18;
/// Bytes of a client option header: `IHAVEOPT`, option, data length.
pub const OPTION_HEADER_LEN: usize = 16;
/// Bytes of a transmission request header (compact headers; extended headers are never
/// negotiated).
pub const REQUEST_LEN: usize = 28;
/// Bytes of a simple reply header; a successful read's data follows it.
pub const SIMPLE_REPLY_LEN: usize = 16;
/// The longest option data read into memory. The protocol bounds strings (export names) at
/// 4096 bytes, so no option this server understands needs more; longer data is read and
/// discarded in small pieces and answered with `NBD_REP_ERR_TOO_BIG`.
pub const MAX_OPTION_DATA: u32 = 64 * 1024;
/// The most options one negotiation may send before the server gives up on the client.
pub const MAX_OPTIONS: usize = 1024;
/// The longest string (export name or description) the protocol allows.
pub const MAX_STRING: usize = 4096;

/// Bytes of zeros after the export size and flags in reply to `NBD_OPT_EXPORT_NAME`.
const EXPORT_NAME_PADDING: usize = 124;

// ---------------------------------------------------------------------------------------------
// Errors

/// Why a connection must end: the peer broke the protocol, went away, or the server's own
/// configuration cannot be offered. Each of these ends the connection (a hard disconnect).
#[derive(Debug, thiserror::Error)]
pub enum NbdError {
    /// Reading from or writing to the peer failed, including the peer closing the connection.
    #[error("{what}: {source}")]
    Io {
        /// What was being read or written.
        what: &'static str,
        /// The underlying error (`UnexpectedEof` when the peer closed the connection).
        #[source]
        source: io::Error,
    },
    /// The client did not set `NBD_FLAG_C_FIXED_NEWSTYLE`; only fixed newstyle is served.
    #[error("client flags {0:#x} lack fixed newstyle; only fixed newstyle negotiation is served")]
    NotFixedNewstyle(u32),
    /// The client set flags the server does not know or did not offer.
    #[error("client flags {0:#x} include unknown bits")]
    UnknownClientFlags(u32),
    /// An option did not start with `IHAVEOPT`.
    #[error("option header has magic {0:#018x}, expected IHAVEOPT")]
    BadOptionMagic(u64),
    /// `NBD_OPT_EXPORT_NAME` named an export that does not exist; the protocol has no error reply
    /// for it, so the session ends.
    #[error("client asked for unknown export {0:?}")]
    UnknownExport(String),
    /// `NBD_OPT_EXPORT_NAME` carried more data than any export name can have.
    #[error("option {option} carries {len} bytes of data, more than the {MAX_OPTION_DATA} allowed")]
    OptionTooLarge {
        /// The option.
        option: u32,
        /// The data length the client announced.
        len: u32,
    },
    /// The client sent more than [`MAX_OPTIONS`] options without choosing an export.
    #[error("client sent more than {MAX_OPTIONS} options without entering transmission")]
    TooManyOptions,
    /// A transmission request did not start with `NBD_REQUEST_MAGIC`: framing is lost.
    #[error("request has magic {0:#010x}, expected {REQUEST_MAGIC:#010x}")]
    BadRequestMagic(u32),
    /// The server's exports, limits or transmission flags cannot be offered as configured.
    #[error("NBD server configuration: {0}")]
    Config(String),
    /// The server would not admit the client to transmission (see [`handshake_admitting`]).
    #[error("the server admits no more connections")]
    Refused,
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> NbdError {
    move |source| NbdError::Io { what, source }
}

/// `N` bytes of `raw` from `at`; the caller guarantees the range (all uses are on fixed-size
/// arrays with constant offsets).
fn take<const N: usize>(raw: &[u8], at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&raw[at..at + N]);
    a
}

// ---------------------------------------------------------------------------------------------
// Configuration

/// One export: a named device a client can choose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    /// The name clients ask for; at most 4096 bytes, no NUL. The empty name a client may send
    /// selects the first export, whatever its name.
    pub name: String,
    /// Size in bytes; should be a multiple of the minimum block size, or the tail is unreachable.
    pub size: u64,
    /// Shown to people by clients that ask (`NBD_OPT_LIST`, `NBD_INFO_DESCRIPTION`); may be
    /// empty.
    pub description: String,
}

/// Block size constraints, advertised with `NBD_INFO_BLOCK_SIZE` and enforced by
/// [`check_request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Every offset and length must be a multiple of this: a power of two, at most 65536.
    pub min_block: u32,
    /// The size of efficient I/O: a power of two, at least `min_block` and at least 512.
    pub preferred_block: u32,
    /// The longest `NBD_CMD_READ` or `NBD_CMD_WRITE`: a multiple of `min_block` (or
    /// `u32::MAX`), at least `preferred_block`.
    pub max_payload: u32,
}

impl Default for Limits {
    /// 512-byte sectors, 4 KiB preferred, 32 MiB requests: what the protocol recommends
    /// clients assume for maximum interoperability.
    fn default() -> Self {
        Limits { min_block: 512, preferred_block: 4096, max_payload: 32 << 20 }
    }
}

impl Limits {
    /// Checks the constraints the protocol puts on advertised block sizes.
    pub fn validate(&self) -> Result<(), NbdError> {
        let Limits { min_block, preferred_block, max_payload } = *self;
        if !min_block.is_power_of_two() || min_block > 65536 {
            return Err(NbdError::Config(format!(
                "minimum block size {min_block} must be a power of two no larger than 65536"
            )));
        }
        if !preferred_block.is_power_of_two() || preferred_block < min_block.max(512) {
            return Err(NbdError::Config(format!(
                "preferred block size {preferred_block} must be a power of two, at least 512 and at \
                 least the minimum block size {min_block}"
            )));
        }
        if (max_payload != u32::MAX && max_payload % min_block != 0) || max_payload < preferred_block {
            return Err(NbdError::Config(format!(
                "maximum payload {max_payload} must be a multiple of the minimum block size \
                 {min_block} and at least the preferred block size {preferred_block}"
            )));
        }
        Ok(())
    }
}
