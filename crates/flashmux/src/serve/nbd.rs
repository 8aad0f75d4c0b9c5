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

use std::io::{self, Read, Write};

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

/// Checks everything [`handshake`] will advertise; returns the transmission flags to send, with
/// `NBD_FLAG_HAS_FLAGS` set.
fn check_config(exports: &[Export], limits: &Limits, transmission_flags: u16) -> Result<u16, NbdError> {
    limits.validate()?;
    for e in exports {
        for (what, s) in [("name", &e.name), ("description", &e.description)] {
            if s.len() > MAX_STRING || s.contains('\0') {
                return Err(NbdError::Config(format!(
                    "export {what} {:?} must be at most {MAX_STRING} bytes without NUL",
                    s.chars().take(64).collect::<String>()
                )));
            }
        }
    }
    let unknown = transmission_flags & !KNOWN_TRANSMISSION_FLAGS;
    if unknown != 0 {
        return Err(NbdError::Config(format!("unknown transmission flags {unknown:#x}")));
    }
    if transmission_flags & FLAG_SEND_DF != 0 {
        return Err(NbdError::Config("NBD_FLAG_SEND_DF needs structured replies, which are not served".into()));
    }
    if transmission_flags & FLAG_SEND_FAST_ZERO != 0 && transmission_flags & FLAG_SEND_WRITE_ZEROES == 0 {
        return Err(NbdError::Config("NBD_FLAG_SEND_FAST_ZERO needs NBD_FLAG_SEND_WRITE_ZEROES".into()));
    }
    Ok(transmission_flags | FLAG_HAS_FLAGS)
}

// ---------------------------------------------------------------------------------------------
// Handshake

/// How a successful negotiation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// The client chose an export: the transmission phase starts with the next byte.
    Transmission(Negotiated),
    /// The client sent `NBD_OPT_ABORT` (and was acknowledged): close the connection.
    Aborted,
}

/// Which option took the client into transmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnteredBy {
    /// The old `NBD_OPT_EXPORT_NAME`, which carries no block size negotiation.
    ExportName,
    /// `NBD_OPT_GO`.
    Go,
}

/// What the handshake agreed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Index of the chosen export in the slice given to [`handshake`].
    pub export: usize,
    /// The option that ended the negotiation.
    pub entered_by: EnteredBy,
    /// The client requested `NBD_INFO_BLOCK_SIZE` in its `NBD_OPT_GO`, and so promised to obey
    /// the limits. Without it the server still refuses requests outside the limits with
    /// `EINVAL` ([`check_request`] does so in both cases); the flag only tells a server that
    /// such a request is a broken promise rather than a client that never knew.
    pub block_size_requested: bool,
    /// The client negotiated `NBD_FLAG_C_NO_ZEROES`.
    pub no_zeroes: bool,
    /// The transmission flags sent to the client (always with `NBD_FLAG_HAS_FLAGS`).
    pub transmission_flags: u16,
}

/// The server's greeting: `NBDMAGIC`, `IHAVEOPT`, and the handshake flags (fixed newstyle, no
/// zeroes).
fn greeting() -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[0..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    g[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    g[16..18].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    g
}

/// Parses the client flags; returns whether the client negotiated `NBD_FLAG_C_NO_ZEROES`.
fn parse_client_flags(flags: u32) -> Result<bool, NbdError> {
    if flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(NbdError::UnknownClientFlags(flags));
    }
    if flags & FLAG_C_FIXED_NEWSTYLE == 0 {
        return Err(NbdError::NotFixedNewstyle(flags));
    }
    Ok(flags & FLAG_C_NO_ZEROES != 0)
}

/// Parses an option header into (option, data length).
fn parse_option_header(raw: &[u8; OPTION_HEADER_LEN]) -> Result<(u32, u32), NbdError> {
    let magic = u64::from_be_bytes(take(raw, 0));
    if magic != IHAVEOPT {
        return Err(NbdError::BadOptionMagic(magic));
    }
    Ok((u32::from_be_bytes(take(raw, 8)), u32::from_be_bytes(take(raw, 12))))
}

/// `N` bytes of `raw` from `at`; the caller guarantees the range (all uses are on fixed-size
/// arrays with constant offsets).
fn take<const N: usize>(raw: &[u8], at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&raw[at..at + N]);
    a
}

/// Appends an option reply: magic, option, reply type, length, data.
fn option_reply(out: &mut Vec<u8>, option: u32, reply: u32, data: &[&[u8]]) {
    let len: usize = data.iter().map(|d| d.len()).sum();
    out.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&reply.to_be_bytes());
    // Every reply this server builds is a few strings of at most MAX_STRING bytes.
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    for d in data {
        out.extend_from_slice(d);
    }
}

/// The data of an `NBD_OPT_INFO` or `NBD_OPT_GO`: an export name and a list of information
/// requests.
struct InfoRequest<'a> {
    name: &'a [u8],
    /// The requested information types, 2 bytes each.
    requests: &'a [u8],
}

impl<'a> InfoRequest<'a> {
    /// Parses the option data; `None` if the lengths inside disagree with the data length.
    fn parse(data: &'a [u8]) -> Option<Self> {
        let name_len = usize::try_from(u32::from_be_bytes(data.get(0..4)?.try_into().ok()?)).ok()?;
        // The name must leave room for the 16-bit request count.
        if name_len > data.len().checked_sub(6)? {
            return None;
        }
        let name = &data[4..4 + name_len];
        let rest = &data[4 + name_len..];
        let count = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let requests = &rest[2..];
        (requests.len() == 2 * count).then_some(InfoRequest { name, requests })
    }

    fn wants(&self, info: u16) -> bool {
        self.requests.chunks_exact(2).any(|c| u16::from_be_bytes([c[0], c[1]]) == info)
    }
}

/// What to do after answering one option.
enum Step {
    /// Read the next option.
    Continue,
    /// The negotiation is over.
    Done(Handshake),
    /// End the session without a reply.
    Close(NbdError),
}

/// The server's side of option haggling, as a pure function of each option.
struct Negotiation<'a> {
    exports: &'a [Export],
    limits: Limits,
    transmission_flags: u16,
    no_zeroes: bool,
}

impl Negotiation<'_> {
    /// The export a client's name selects: the empty name is the first export.
    fn find(&self, name: &[u8]) -> Option<usize> {
        if name.is_empty() {
            return (!self.exports.is_empty()).then_some(0);
        }
        self.exports.iter().position(|e| e.name.as_bytes() == name)
    }

    fn negotiated(&self, export: usize, entered_by: EnteredBy, block_size_requested: bool) -> Step {
        Step::Done(Handshake::Transmission(Negotiated {
            export,
            entered_by,
            block_size_requested,
            no_zeroes: self.no_zeroes,
            transmission_flags: self.transmission_flags,
        }))
    }

    /// Answers one option whose data is in memory: appends the reply bytes to `out`.
    fn answer(&self, option: u32, data: &[u8], out: &mut Vec<u8>) -> Step {
        match option {
            OPT_EXPORT_NAME => self.export_name(data, out),
            // The protocol asks the server to ignore any data sent with an abort.
            OPT_ABORT => {
                option_reply(out, option, REP_ACK, &[]);
                Step::Done(Handshake::Aborted)
            }
            OPT_LIST if !data.is_empty() => {
                option_reply(out, option, REP_ERR_INVALID, &[b"NBD_OPT_LIST takes no data"]);
                Step::Continue
            }
            OPT_LIST => {
                for e in self.exports {
                    let name = e.name.as_bytes();
                    let name_len = (name.len() as u32).to_be_bytes();
                    // What follows the name in NBD_REP_SERVER is text for people: the description.
                    option_reply(out, option, REP_SERVER, &[&name_len, name, e.description.as_bytes()]);
                }
                option_reply(out, option, REP_ACK, &[]);
                Step::Continue
            }
            // No TLS: the option is understood, but policy is to run without it.
            OPT_STARTTLS => {
                option_reply(out, option, REP_ERR_POLICY, &[b"TLS is not offered"]);
                Step::Continue
            }
            OPT_INFO | OPT_GO => self.info(option, data, out),
            _ => {
                option_reply(out, option, REP_ERR_UNSUP, &[b"option not supported"]);
                Step::Continue
            }
        }
    }

    fn export_name(&self, name: &[u8], out: &mut Vec<u8>) -> Step {
        let Some(i) = self.find(name) else {
            let shown: String = String::from_utf8_lossy(name).chars().take(64).collect();
            return Step::Close(NbdError::UnknownExport(shown));
        };
        out.extend_from_slice(&self.exports[i].size.to_be_bytes());
        out.extend_from_slice(&self.transmission_flags.to_be_bytes());
        if !self.no_zeroes {
            out.extend_from_slice(&[0u8; EXPORT_NAME_PADDING]);
        }
        self.negotiated(i, EnteredBy::ExportName, false)
    }

    /// `NBD_OPT_INFO` and `NBD_OPT_GO`: the same replies; GO then enters transmission.
    ///
    /// `NBD_INFO_BLOCK_SIZE` is sent whether or not the client asked: the limits are stricter than
    /// the protocol's defaults, so the server should advertise them, and a client must ignore
    /// information it did not ask for. A client that did not ask is still let in (no
    /// `NBD_REP_ERR_BLOCK_SIZE_REQD`), as the protocol recommends for interoperability:
    /// [`check_request`] refuses what falls outside the limits, cleanly.
    fn info(&self, option: u32, data: &[u8], out: &mut Vec<u8>) -> Step {
        let Some(req) = InfoRequest::parse(data) else {
            option_reply(out, option, REP_ERR_INVALID, &[b"malformed export name or information requests"]);
            return Step::Continue;
        };
        let Some(i) = self.find(req.name) else {
            option_reply(out, option, REP_ERR_UNKNOWN, &[b"no such export"]);
            return Step::Continue;
        };
        let e = &self.exports[i];
        option_reply(
            out,
            option,
            REP_INFO,
            &[&INFO_EXPORT.to_be_bytes(), &e.size.to_be_bytes(), &self.transmission_flags.to_be_bytes()],
        );
        if req.wants(INFO_NAME) {
            option_reply(out, option, REP_INFO, &[&INFO_NAME.to_be_bytes(), e.name.as_bytes()]);
        }
        if req.wants(INFO_DESCRIPTION) && !e.description.is_empty() {
            option_reply(out, option, REP_INFO, &[&INFO_DESCRIPTION.to_be_bytes(), e.description.as_bytes()]);
        }
        let l = &self.limits;
        option_reply(
            out,
            option,
            REP_INFO,
            &[
                &INFO_BLOCK_SIZE.to_be_bytes(),
                &l.min_block.to_be_bytes(),
                &l.preferred_block.to_be_bytes(),
                &l.max_payload.to_be_bytes(),
            ],
        );
        option_reply(out, option, REP_ACK, &[]);
        if option == OPT_GO {
            self.negotiated(i, EnteredBy::Go, req.wants(INFO_BLOCK_SIZE))
        } else {
            Step::Continue
        }
    }
}

/// Reads and drops `len` bytes, a small buffer at a time.
fn discard<R: Read + ?Sized>(stream: &mut R, len: u64) -> Result<(), NbdError> {
    let copied = io::copy(&mut stream.take(len), &mut io::sink()).map_err(io_err("discarding option data"))?;
    if copied < len {
        return Err(NbdError::Io {
            what: "discarding option data",
            source: io::ErrorKind::UnexpectedEof.into(),
        });
    }
    Ok(())
}

fn send<W: Write + ?Sized>(stream: &mut W, bytes: &[u8], what: &'static str) -> Result<(), NbdError> {
    stream.write_all(bytes).and_then(|()| stream.flush()).map_err(io_err(what))
}

/// Runs the server's side of the fixed newstyle negotiation on a blocking stream.
///
/// Sends the greeting (with `NBD_FLAG_FIXED_NEWSTYLE` and `NBD_FLAG_NO_ZEROES`), reads the client
/// flags, then answers options until the client enters transmission or aborts:
///
/// - `NBD_OPT_EXPORT_NAME`: the export's size and `transmission_flags`, then 124 zero bytes unless
///   the client negotiated no zeroes. An unknown name ends the session with
///   [`NbdError::UnknownExport`]: the option has no error reply.
/// - `NBD_OPT_INFO`, `NBD_OPT_GO`: `NBD_INFO_EXPORT`, `NBD_INFO_NAME` and `NBD_INFO_DESCRIPTION`
///   if requested (the latter only when not empty), `NBD_INFO_BLOCK_SIZE` always, then
///   `NBD_REP_ACK`; an unknown export gets `NBD_REP_ERR_UNKNOWN`, malformed data
///   `NBD_REP_ERR_INVALID`. GO then enters transmission.
/// - `NBD_OPT_LIST`: one `NBD_REP_SERVER` per export, then `NBD_REP_ACK`.
/// - `NBD_OPT_ABORT`: `NBD_REP_ACK` (a client already gone is not an error), then
///   [`Handshake::Aborted`].
/// - `NBD_OPT_STARTTLS`: `NBD_REP_ERR_POLICY`. Everything else (structured replies, metadata
///   contexts, extended headers, unknown options): `NBD_REP_ERR_UNSUP`.
///
/// Option data longer than [`MAX_OPTION_DATA`] is never held in memory: it is read and discarded
/// in small pieces and answered with `NBD_REP_ERR_TOO_BIG` (an oversized `NBD_OPT_EXPORT_NAME`
/// ends the session instead, having no error reply).
///
/// `transmission_flags` are sent for every export, with `NBD_FLAG_HAS_FLAGS` added. The exports,
/// limits and flags are checked before anything is sent ([`NbdError::Config`]). Any broken rule of
/// the protocol by the client, or the end of its stream, is an error: close the connection.
pub fn handshake<S: Read + Write + ?Sized>(
    stream: &mut S,
    exports: &[Export],
    limits: &Limits,
    transmission_flags: u16,
) -> Result<Handshake, NbdError> {
    handshake_admitting(stream, exports, limits, transmission_flags, &mut |_| true)
}

/// [`handshake`], asking `admit(export)` just before the reply that enters transmission is sent:
/// if it says no, nothing more is sent and the handshake ends with [`NbdError::Refused`]. A
/// server counting its connections counts one before its client can know it is connected.
pub fn handshake_admitting<S: Read + Write + ?Sized>(
    stream: &mut S,
    exports: &[Export],
    limits: &Limits,
    transmission_flags: u16,
    admit: &mut dyn FnMut(usize) -> bool,
) -> Result<Handshake, NbdError> {
    let transmission_flags = check_config(exports, limits, transmission_flags)?;
    send(stream, &greeting(), "sending the greeting")?;
    let mut flags = [0u8; 4];
    stream.read_exact(&mut flags).map_err(io_err("reading the client flags"))?;
    let neg = Negotiation {
        exports,
        limits: *limits,
        transmission_flags,
        no_zeroes: parse_client_flags(u32::from_be_bytes(flags))?,
    };
    let mut data = Vec::new();
    let mut out = Vec::new();
    for _ in 0..MAX_OPTIONS {
        let mut header = [0u8; OPTION_HEADER_LEN];
        stream.read_exact(&mut header).map_err(io_err("reading an option header"))?;
        let (option, len) = parse_option_header(&header)?;
        out.clear();
        let step = if len > MAX_OPTION_DATA {
            if option == OPT_EXPORT_NAME {
                return Err(NbdError::OptionTooLarge { option, len });
            }
            discard(stream, u64::from(len))?;
            if option == OPT_ABORT {
                neg.answer(option, &[], &mut out)
            } else {
                option_reply(&mut out, option, REP_ERR_TOO_BIG, &[b"option data too long"]);
                Step::Continue
            }
        } else {
            // Bounded by MAX_OPTION_DATA above.
            data.resize(len as usize, 0);
            stream.read_exact(&mut data).map_err(io_err("reading option data"))?;
            neg.answer(option, &data, &mut out)
        };
        match step {
            Step::Continue => send(stream, &out, "sending an option reply")?,
            // The client may close right after its abort without waiting for the reply.
            Step::Done(Handshake::Aborted) => {
                let _ = send(stream, &out, "acknowledging an abort");
                return Ok(Handshake::Aborted);
            }
            Step::Done(done) => {
                if let Handshake::Transmission(n) = &done {
                    if !admit(n.export) {
                        return Err(NbdError::Refused);
                    }
                }
                send(stream, &out, "sending the export's details")?;
                return Ok(done);
            }
            Step::Close(err) => return Err(err),
        }
    }
    Err(NbdError::TooManyOptions)
}

// ---------------------------------------------------------------------------------------------
// Transmission

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
    use std::io::Cursor;

    /// A client's bytes to read, and what the server wrote.
    struct Duplex {
        input: Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Duplex {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Duplex {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    const TFLAGS: u16 = FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES;

    fn exports() -> Vec<Export> {
        vec![
            Export { name: "sim".into(), size: 1 << 30, description: "the model".into() },
            Export { name: "scratch".into(), size: 64 << 20, description: String::new() },
        ]
    }

    fn run_with(input: Vec<u8>, exports: &[Export]) -> (Result<Handshake, NbdError>, Vec<u8>) {
        let mut d = Duplex { input: Cursor::new(input), output: Vec::new() };
        let r = handshake(&mut d, exports, &Limits::default(), TFLAGS);
        (r, d.output)
    }

    fn run(input: Vec<u8>) -> (Result<Handshake, NbdError>, Vec<u8>) {
        run_with(input, &exports())
    }

    /// The client's bytes: its flags, then each option with its data.
    fn client(flags: u32, options: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut b = flags.to_be_bytes().to_vec();
        for (option, data) in options {
            b.extend_from_slice(b"IHAVEOPT");
            b.extend_from_slice(&option.to_be_bytes());
            b.extend_from_slice(&(data.len() as u32).to_be_bytes());
            b.extend_from_slice(data);
        }
        b
    }

    /// The data of an `NBD_OPT_INFO` or `NBD_OPT_GO`.
    fn info_data(name: &str, requests: &[u16]) -> Vec<u8> {
        let mut b = (name.len() as u32).to_be_bytes().to_vec();
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(&(requests.len() as u16).to_be_bytes());
        for r in requests {
            b.extend_from_slice(&r.to_be_bytes());
        }
        b
    }

    /// One option reply, built independently of the code under test.
    fn rep(option: u32, reply: u32, data: &[u8]) -> Vec<u8> {
        let mut b = vec![0x00, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9];
        b.extend_from_slice(&option.to_be_bytes());
        b.extend_from_slice(&reply.to_be_bytes());
        b.extend_from_slice(&(data.len() as u32).to_be_bytes());
        b.extend_from_slice(data);
        b
    }

    const SENT_FLAGS: u16 = TFLAGS | FLAG_HAS_FLAGS;

    fn info_export(option: u32, size: u64) -> Vec<u8> {
        let mut d = vec![0, 0];
        d.extend_from_slice(&size.to_be_bytes());
        d.extend_from_slice(&SENT_FLAGS.to_be_bytes());
        rep(option, REP_INFO, &d)
    }

    fn info_block_size(option: u32) -> Vec<u8> {
        // 512, 4096, 32 MiB
        rep(option, REP_INFO, &[0, 3, 0, 0, 2, 0, 0, 0, 16, 0, 2, 0, 0, 0])
    }

    fn info_string(option: u32, info: u16, s: &str) -> Vec<u8> {
        let mut d = info.to_be_bytes().to_vec();
        d.extend_from_slice(s.as_bytes());
        rep(option, REP_INFO, &d)
    }

    const GREETING: &[u8; 18] = b"NBDMAGICIHAVEOPT\x00\x03";

    fn expect(parts: &[Vec<u8>]) -> Vec<u8> {
        let mut b = GREETING.to_vec();
        for p in parts {
            b.extend_from_slice(p);
        }
        b
    }

    fn go(export: usize, block_size_requested: bool, no_zeroes: bool) -> Handshake {
        Handshake::Transmission(Negotiated {
            export,
            entered_by: EnteredBy::Go,
            block_size_requested,
            no_zeroes,
            transmission_flags: SENT_FLAGS,
        })
    }

    #[test]
    fn greeting_is_the_magics_and_both_handshake_flags() {
        assert_eq!(&greeting(), GREETING);
        assert_eq!(NBDMAGIC.to_be_bytes(), *b"NBDMAGIC");
        assert_eq!(IHAVEOPT.to_be_bytes(), *b"IHAVEOPT");
        let (r, out) = run(Vec::new());
        assert!(matches!(r, Err(NbdError::Io { .. })), "{r:?}");
        assert_eq!(out, GREETING);
    }

    #[test]
    fn go_without_information_requests_selects_the_default_export() {
        let (r, out) = run(client(FLAG_C_FIXED_NEWSTYLE, &[(OPT_GO, info_data("", &[]))]));
        assert_eq!(r.unwrap(), go(0, false, false));
        assert_eq!(out, expect(&[info_export(OPT_GO, 1 << 30), info_block_size(OPT_GO), rep(OPT_GO, REP_ACK, &[])]));
    }

    #[test]
    fn go_answers_the_information_requested_and_ignores_unknown_types() {
        let requests = [INFO_DESCRIPTION, 0x7777, INFO_NAME, INFO_BLOCK_SIZE];
        let (r, out) = run(client(3, &[(OPT_GO, info_data("sim", &requests))]));
        assert_eq!(r.unwrap(), go(0, true, true));
        assert_eq!(
            out,
            expect(&[
                info_export(OPT_GO, 1 << 30),
                info_string(OPT_GO, INFO_NAME, "sim"),
                info_string(OPT_GO, INFO_DESCRIPTION, "the model"),
                info_block_size(OPT_GO),
                rep(OPT_GO, REP_ACK, &[]),
            ])
        );
        // An empty description is left out even when asked for.
        let (r, out) = run(client(1, &[(OPT_GO, info_data("scratch", &[INFO_DESCRIPTION]))]));
        assert_eq!(r.unwrap(), go(1, false, false));
        assert_eq!(out, expect(&[info_export(OPT_GO, 64 << 20), info_block_size(OPT_GO), rep(OPT_GO, REP_ACK, &[])]));
    }

    #[test]
    fn info_then_go() {
        let (r, out) = run(client(
            1,
            &[(OPT_INFO, info_data("scratch", &[INFO_NAME])), (OPT_GO, info_data("scratch", &[INFO_BLOCK_SIZE]))],
        ));
        assert_eq!(r.unwrap(), go(1, true, false));
        assert_eq!(
            out,
            expect(&[
                info_export(OPT_INFO, 64 << 20),
                info_string(OPT_INFO, INFO_NAME, "scratch"),
                info_block_size(OPT_INFO),
                rep(OPT_INFO, REP_ACK, &[]),
                info_export(OPT_GO, 64 << 20),
                info_block_size(OPT_GO),
                rep(OPT_GO, REP_ACK, &[]),
            ])
        );
    }

    #[test]
    fn a_client_not_admitted_is_told_nothing_more() {
        let input = client(1, &[(OPT_INFO, info_data("scratch", &[])), (OPT_GO, info_data("scratch", &[]))]);
        let mut asked = Vec::new();
        let mut d = Duplex { input: Cursor::new(input.clone()), output: Vec::new() };
        let r = handshake_admitting(&mut d, &exports(), &Limits::default(), TFLAGS, &mut |e| {
            asked.push(e);
            false
        });
        assert!(matches!(r, Err(NbdError::Refused)), "{r:?}");
        // INFO is answered; GO, which would enter transmission, is not.
        assert_eq!(asked, [1]);
        assert_eq!(d.output, expect(&[info_export(OPT_INFO, 64 << 20), info_block_size(OPT_INFO), rep(OPT_INFO, REP_ACK, &[])]));
        // The same with EXPORT_NAME; an admitted client gets what `handshake` sends.
        let mut d = Duplex { input: Cursor::new(client(1, &[(OPT_EXPORT_NAME, b"sim".to_vec())])), output: Vec::new() };
        assert!(matches!(handshake_admitting(&mut d, &exports(), &Limits::default(), TFLAGS, &mut |_| false), Err(NbdError::Refused)));
        assert_eq!(d.output, GREETING);
        let mut d = Duplex { input: Cursor::new(input.clone()), output: Vec::new() };
        let admitted = handshake_admitting(&mut d, &exports(), &Limits::default(), TFLAGS, &mut |_| true).unwrap();
        let (plain, out) = run(input);
        assert_eq!(admitted, plain.unwrap());
        assert_eq!(d.output, out);
    }

    #[test]
    fn list_sends_one_server_reply_per_export_then_ack() {
        let (r, out) = run(client(1, &[(OPT_LIST, vec![]), (OPT_ABORT, vec![])]));
        assert_eq!(r.unwrap(), Handshake::Aborted);
        assert_eq!(
            out,
            expect(&[
                rep(OPT_LIST, REP_SERVER, b"\x00\x00\x00\x03simthe model"),
                rep(OPT_LIST, REP_SERVER, b"\x00\x00\x00\x07scratch"),
                rep(OPT_LIST, REP_ACK, &[]),
                rep(OPT_ABORT, REP_ACK, &[]),
            ])
        );
        // No exports: just the acknowledgement.
        let (_, out) = run_with(client(1, &[(OPT_LIST, vec![])]), &[]);
        assert_eq!(out, expect(&[rep(OPT_LIST, REP_ACK, &[])]));
        // LIST takes no data.
        let (_, out) = run(client(1, &[(OPT_LIST, vec![0])]));
        assert_eq!(out, expect(&[rep(OPT_LIST, REP_ERR_INVALID, b"NBD_OPT_LIST takes no data")]));
    }

    #[test]
    fn export_name_sends_size_flags_and_zeroes_unless_no_zeroes() {
        let mut details = (64u64 << 20).to_be_bytes().to_vec();
        details.extend_from_slice(&SENT_FLAGS.to_be_bytes());
        let mut padded = details.clone();
        padded.extend_from_slice(&[0; 124]);
        for (flags, tail, no_zeroes) in [(1, padded, false), (3, details, true)] {
            let (r, out) = run(client(flags, &[(OPT_EXPORT_NAME, b"scratch".to_vec())]));
            let want = Negotiated {
                export: 1,
                entered_by: EnteredBy::ExportName,
                block_size_requested: false,
                no_zeroes,
                transmission_flags: SENT_FLAGS,
            };
            assert_eq!(r.unwrap(), Handshake::Transmission(want));
            assert_eq!(out, expect(&[tail]));
        }
        // The empty name is the first export.
        let (r, _) = run(client(1, &[(OPT_EXPORT_NAME, vec![])]));
        assert!(matches!(r, Ok(Handshake::Transmission(Negotiated { export: 0, .. }))), "{r:?}");
    }

    #[test]
    fn unknown_export() {
        // INFO and GO can say so and carry on.
        let (r, out) = run(client(
            1,
            &[(OPT_INFO, info_data("nope", &[])), (OPT_GO, info_data("nope", &[])), (OPT_ABORT, vec![])],
        ));
        assert_eq!(r.unwrap(), Handshake::Aborted);
        assert_eq!(
            out,
            expect(&[
                rep(OPT_INFO, REP_ERR_UNKNOWN, b"no such export"),
                rep(OPT_GO, REP_ERR_UNKNOWN, b"no such export"),
                rep(OPT_ABORT, REP_ACK, &[]),
            ])
        );
        // EXPORT_NAME cannot: the session ends with nothing sent.
        let (r, out) = run(client(1, &[(OPT_EXPORT_NAME, b"nope".to_vec())]));
        assert!(matches!(&r, Err(NbdError::UnknownExport(n)) if n == "nope"), "{r:?}");
        assert_eq!(out, GREETING);
        // No exports at all: not even the default.
        let (r, out) = run_with(client(1, &[(OPT_GO, info_data("", &[]))]), &[]);
        assert!(matches!(r, Err(NbdError::Io { .. })), "{r:?}");
        assert_eq!(out, expect(&[rep(OPT_GO, REP_ERR_UNKNOWN, b"no such export")]));
    }

    #[test]
    fn unsupported_options_are_refused_and_negotiation_continues() {
        let refused = [OPT_STRUCTURED_REPLY, OPT_LIST_META_CONTEXT, OPT_SET_META_CONTEXT, OPT_EXTENDED_HEADERS, 4, 99, u32::MAX];
        let mut options: Vec<(u32, Vec<u8>)> = refused.iter().map(|&o| (o, vec![1, 2, 3])).collect();
        options.push((OPT_STARTTLS, vec![]));
        options.push((OPT_GO, info_data("", &[])));
        let (r, out) = run(client(1, &options));
        assert_eq!(r.unwrap(), go(0, false, false));
        let mut want: Vec<Vec<u8>> = refused.iter().map(|&o| rep(o, REP_ERR_UNSUP, b"option not supported")).collect();
        want.push(rep(OPT_STARTTLS, REP_ERR_POLICY, b"TLS is not offered"));
        want.extend([info_export(OPT_GO, 1 << 30), info_block_size(OPT_GO), rep(OPT_GO, REP_ACK, &[])]);
        assert_eq!(out, expect(&want));
    }

    #[test]
    fn abort_is_acknowledged_even_with_data_and_even_if_the_client_is_gone() {
        let (r, out) = run(client(1, &[(OPT_ABORT, b"bye".to_vec())]));
        assert_eq!(r.unwrap(), Handshake::Aborted);
        assert_eq!(out, expect(&[rep(OPT_ABORT, REP_ACK, &[])]));

        /// Accepts the greeting, then fails every write.
        struct Gone(Cursor<Vec<u8>>, usize);
        impl Read for Gone {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.0.read(buf)
            }
        }
        impl Write for Gone {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.1 += 1;
                if self.1 > 1 {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut s = Gone(Cursor::new(client(1, &[(OPT_ABORT, vec![])])), 0);
        assert_eq!(handshake(&mut s, &exports(), &Limits::default(), 0).unwrap(), Handshake::Aborted);
    }

    #[test]
    fn oversized_option_data_is_discarded_and_refused() {
        let big = vec![0xab; MAX_OPTION_DATA as usize + 1];
        let (r, out) = run(client(1, &[(OPT_INFO, big.clone()), (77, big.clone()), (OPT_GO, info_data("", &[]))]));
        assert_eq!(r.unwrap(), go(0, false, false));
        assert_eq!(
            out,
            expect(&[
                rep(OPT_INFO, REP_ERR_TOO_BIG, b"option data too long"),
                rep(77, REP_ERR_TOO_BIG, b"option data too long"),
                info_export(OPT_GO, 1 << 30),
                info_block_size(OPT_GO),
                rep(OPT_GO, REP_ACK, &[]),
            ])
        );
        // An oversized abort is still an abort.
        let (r, out) = run(client(1, &[(OPT_ABORT, big.clone())]));
        assert_eq!(r.unwrap(), Handshake::Aborted);
        assert_eq!(out, expect(&[rep(OPT_ABORT, REP_ACK, &[])]));
        // EXPORT_NAME has no error reply: the session ends.
        let (r, out) = run(client(1, &[(OPT_EXPORT_NAME, big)]));
        assert!(matches!(r, Err(NbdError::OptionTooLarge { option: OPT_EXPORT_NAME, .. })), "{r:?}");
        assert_eq!(out, GREETING);
        // A 4 GiB announcement with nothing behind it is an end of stream, and no allocation.
        let mut input = client(1, &[]);
        input.extend_from_slice(b"IHAVEOPT\x00\x00\x00\x06\xff\xff\xff\xff");
        let (r, out) = run(input);
        assert!(matches!(r, Err(NbdError::Io { .. })), "{r:?}");
        assert_eq!(out, GREETING);
    }

    #[test]
    fn malformed_info_requests_are_invalid() {
        let mut name_too_long = info_data("sim", &[]);
        name_too_long[3] = 4; // claims 4 bytes of name, leaving 1 for the 2-byte count
        let mut count_too_large = info_data("sim", &[INFO_NAME]);
        count_too_large.pop();
        let mut count_too_small = info_data("sim", &[]);
        count_too_small.push(0);
        let mut huge_name = info_data("sim", &[]);
        huge_name[0] = 0xff;
        for (i, data) in [vec![], vec![0; 5], name_too_long, count_too_large, count_too_small, huge_name]
            .into_iter()
            .enumerate()
        {
            let (r, out) = run(client(1, &[(OPT_GO, data)]));
            assert!(matches!(r, Err(NbdError::Io { .. })), "case {i}: {r:?}");
            assert_eq!(
                out,
                expect(&[rep(OPT_GO, REP_ERR_INVALID, b"malformed export name or information requests")]),
                "case {i}"
            );
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let input = client(
            3,
            &[
                (OPT_LIST, vec![]),
                (OPT_INFO, info_data("scratch", &[INFO_NAME])),
                (OPT_GO, info_data("sim", &[INFO_BLOCK_SIZE])),
            ],
        );
        assert!(run(input.clone()).0.is_ok());
        for cut in 0..input.len() {
            let (r, _) = run(input[..cut].to_vec());
            assert!(matches!(r, Err(NbdError::Io { .. })), "cut at {cut}: {r:?}");
        }
    }

    #[test]
    fn broken_client_flags_and_magic_end_the_session() {
        let (r, _) = run(client(0, &[(OPT_GO, info_data("", &[]))]));
        assert!(matches!(r, Err(NbdError::NotFixedNewstyle(0))), "{r:?}");
        let (r, _) = run(client(1 | 4, &[]));
        assert!(matches!(r, Err(NbdError::UnknownClientFlags(5))), "{r:?}");
        let mut input = client(1, &[(OPT_GO, info_data("", &[]))]);
        input[4] = b'i';
        let (r, out) = run(input);
        assert!(matches!(r, Err(NbdError::BadOptionMagic(m)) if m == u64::from_be_bytes(*b"iHAVEOPT")), "{r:?}");
        assert_eq!(out, GREETING);
    }

    #[test]
    fn endless_options_are_cut_off() {
        let options = vec![(OPT_LIST, vec![]); MAX_OPTIONS + 1];
        let (r, _) = run_with(client(1, &options), &[]);
        assert!(matches!(r, Err(NbdError::TooManyOptions)), "{r:?}");
    }

    #[test]
    fn configuration_is_checked_before_anything_is_sent() {
        let bad_limits = [
            Limits { min_block: 0, ..Limits::default() },
            Limits { min_block: 3, ..Limits::default() },
            Limits { min_block: 1 << 17, preferred_block: 1 << 17, max_payload: 1 << 25 },
            Limits { preferred_block: 256, ..Limits::default() },
            Limits { min_block: 4096, preferred_block: 2048, ..Limits::default() },
            Limits { max_payload: (32 << 20) + 1, ..Limits::default() },
            Limits { max_payload: 2048, ..Limits::default() },
        ];
        for l in bad_limits {
            assert!(l.validate().is_err(), "{l:?}");
            let mut d = Duplex { input: Cursor::new(client(1, &[])), output: Vec::new() };
            assert!(matches!(handshake(&mut d, &exports(), &l, 0), Err(NbdError::Config(_))));
            assert!(d.output.is_empty());
        }
        for l in [
            Limits::default(),
            Limits { min_block: 1, preferred_block: 512, max_payload: u32::MAX },
            Limits { min_block: 65536, preferred_block: 65536, max_payload: 65536 },
        ] {
            l.validate().unwrap();
        }
        for flags in [FLAG_SEND_DF, FLAG_SEND_FAST_ZERO, 1 << 9, 1 << 15] {
            let mut d = Duplex { input: Cursor::new(Vec::new()), output: Vec::new() };
            let r = handshake(&mut d, &exports(), &Limits::default(), flags);
            assert!(matches!(r, Err(NbdError::Config(_))), "{flags:#x}: {r:?}");
        }
        let bad_export = Export { name: "a\0b".into(), size: 0, description: String::new() };
        let mut d = Duplex { input: Cursor::new(Vec::new()), output: Vec::new() };
        assert!(matches!(handshake(&mut d, &[bad_export], &Limits::default(), 0), Err(NbdError::Config(_))));
        // HAS_FLAGS is always sent.
        let mut d = Duplex { input: Cursor::new(client(1, &[(OPT_EXPORT_NAME, vec![])])), output: Vec::new() };
        let r = handshake(&mut d, &exports(), &Limits::default(), 0).unwrap();
        assert!(matches!(r, Handshake::Transmission(Negotiated { transmission_flags: FLAG_HAS_FLAGS, .. })));
    }

    // --- transmission ---

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
        fn handshake_survives_any_client_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = run(bytes);
        }

        #[test]
        fn handshake_survives_any_options(
            options in proptest::collection::vec((0u32..16, proptest::collection::vec(any::<u8>(), 0..64)), 0..8),
            flags in 0u32..4,
        ) {
            let (r, out) = run(client(flags, &options));
            prop_assert!(out.starts_with(GREETING));
            if let Ok(Handshake::Transmission(n)) = r {
                prop_assert!(n.export < 2);
            }
        }

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
