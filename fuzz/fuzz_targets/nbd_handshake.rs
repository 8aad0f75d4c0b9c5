//! Any bytes, as everything a client sends during the NBD handshake: the server's side returns an
//! outcome or an error, never panics, always greets first, and can only pick an export it has.
#![no_main]

use flashmux::serve::nbd::{handshake, Export, Handshake, Limits, FLAG_SEND_FLUSH, FLAG_SEND_FUA, FLAG_SEND_TRIM};
use libfuzzer_sys::fuzz_target;
use std::io::{self, Cursor, Read, Write};

/// The client's bytes to read; what the server writes is only counted.
struct Client {
    input: Cursor<Vec<u8>>,
    written: usize,
}

impl Read for Client {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Client {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let exports = [
        Export { name: "sim".into(), size: 1 << 30, description: "the model".into() },
        Export { name: "scratch".into(), size: 64 << 20, description: String::new() },
    ];
    let mut client = Client { input: Cursor::new(data.to_vec()), written: 0 };
    let flags = FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_TRIM;
    let r = handshake(&mut client, &exports, &Limits::default(), flags);
    assert!(client.written >= 18, "no greeting");
    if let Ok(Handshake::Transmission(n)) = r {
        assert!(n.export < exports.len(), "export {} of {}", n.export, exports.len());
    }
});
