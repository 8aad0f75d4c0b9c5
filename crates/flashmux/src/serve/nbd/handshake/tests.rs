//! The handshake against scripted clients: each test feeds a client's bytes and compares what
//! the server wrote with the protocol's replies, byte for byte; proptests feed arbitrary bytes.

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
    assert_eq!(
        d.output,
        expect(&[info_export(OPT_INFO, 64 << 20), info_block_size(OPT_INFO), rep(OPT_INFO, REP_ACK, &[])])
    );
    // The same with EXPORT_NAME; an admitted client gets what `handshake` sends.
    let mut d = Duplex { input: Cursor::new(client(1, &[(OPT_EXPORT_NAME, b"sim".to_vec())])), output: Vec::new() };
    assert!(matches!(
        handshake_admitting(&mut d, &exports(), &Limits::default(), TFLAGS, &mut |_| false),
        Err(NbdError::Refused)
    ));
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
    let (r, out) =
        run(client(1, &[(OPT_INFO, info_data("nope", &[])), (OPT_GO, info_data("nope", &[])), (OPT_ABORT, vec![])]));
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
    let refused =
        [OPT_STRUCTURED_REPLY, OPT_LIST_META_CONTEXT, OPT_SET_META_CONTEXT, OPT_EXTENDED_HEADERS, 4, 99, u32::MAX];
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
    for (i, data) in
        [vec![], vec![0; 5], name_too_long, count_too_large, count_too_small, huge_name].into_iter().enumerate()
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
}
