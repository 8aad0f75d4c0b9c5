//! Any bytes, as a SYSTOR '17 trace: see `trace_common.rs` for what is checked.
#![no_main]

use flashmux::workload::trace::Format;
use libfuzzer_sys::fuzz_target;

#[path = "trace_common.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::read(data, Some(Format::Systor)));
