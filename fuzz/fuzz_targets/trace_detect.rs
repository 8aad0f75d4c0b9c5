//! Any bytes, as a trace of unknown format: detection picks one or says why not, and the
//! chosen format's reader then holds to what `trace_common.rs` checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "trace_common.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::read(data, None));
