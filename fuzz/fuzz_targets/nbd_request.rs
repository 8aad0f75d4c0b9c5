//! Any bytes, as an export size and transmission flags (the first 10 bytes) then NBD request
//! headers (28 bytes each): parsing and checking never panic, a parsed header encodes back to the
//! same bytes, and a request accepted for reading or writing lies within the export and the
//! limits.
#![no_main]

use flashmux::serve::nbd::{check_request, parse_request, Command, Limits, REQUEST_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, requests)) = data.split_first_chunk::<10>() else { return };
    let size = u64::from_be_bytes([head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7]]);
    let flags = u16::from_be_bytes([head[8], head[9]]);
    let limits = Limits::default();
    for chunk in requests.chunks_exact(REQUEST_LEN) {
        let Ok(hdr) = <&[u8; REQUEST_LEN]>::try_from(chunk) else { return };
        let Ok(req) = parse_request(hdr) else { continue };
        assert_eq!(&req.encode(), hdr, "round trip");
        assert!(req.payload_len() <= req.len);
        if check_request(&req, size, flags, &limits).is_ok() && matches!(req.cmd, Command::Read | Command::Write) {
            assert!(req.offset.checked_add(u64::from(req.len)).is_some_and(|end| end <= size), "{req:?} beyond {size}");
            assert!(req.len <= limits.max_payload, "{req:?} over the maximum payload");
            assert!(req.offset % u64::from(limits.min_block) == 0 && req.len % limits.min_block == 0, "{req:?} misaligned");
        }
    }
});
