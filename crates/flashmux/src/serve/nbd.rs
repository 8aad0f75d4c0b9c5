//! The NBD protocol: handshake and transmission, as pure parsing and encoding.
