//! `flashmux serve`: the model in real time behind an NBD server.
//!
//! Outside the model: sockets, threads and the wall clock live here, never in `sim` or below.
//! The protocol ([`nbd`]) and the data store ([`store`]) know nothing of the model.

pub mod nbd;
pub mod store;
pub mod engine;
pub mod record;
pub mod server;
