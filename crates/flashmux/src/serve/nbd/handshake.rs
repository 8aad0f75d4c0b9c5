//! The NBD handshake: the fixed newstyle option negotiation, from the server's greeting to the
//! transmission phase (or the client's abort).
//!
//! The server sends its greeting (`NBDMAGIC`, `IHAVEOPT`, fixed newstyle and no zeroes), reads
//! the client's flags, then answers one option at a time (`Negotiation::answer`: each option's
//! reply bytes built in memory, then sent whole) until an `NBD_OPT_GO` or `NBD_OPT_EXPORT_NAME`
//! names an export, or the client aborts. [`handshake`] is the only function here that does I/O,
//! on a blocking stream the caller bounds in time.
//!
//! Example: a client sending flags `1` (fixed newstyle) and `NBD_OPT_GO` for the empty name
//! with no information requests gets `NBD_INFO_EXPORT` (size and transmission flags),
//! `NBD_INFO_BLOCK_SIZE` and `NBD_REP_ACK` for the default (first) export, and the handshake
//! returns [`Handshake::Transmission`] with that export.
//!
//! Bounds: option data over [`MAX_OPTION_DATA`] (64 KiB) is discarded unread; more than
//! [`MAX_OPTIONS`] (1,024) options without an export ends the session; names and strings are at
//! most [`MAX_STRING`] (4,096) bytes. Source: the NBD protocol, `doc/proto.md` of the NBD project.

use super::*;
use std::io::{Read, Write};

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
        return Err(NbdError::Io { what: "discarding option data", source: io::ErrorKind::UnexpectedEof.into() });
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

#[cfg(test)]
mod tests;
