//! Any text, as a fio job file: parsing returns jobs or an error, never panics; every parsed job
//! either builds a generator for a 1 GiB space or is rejected, and a few I/Os come out of it.
#![no_main]

use flashmux::workload::fio::{parse_job_text, JobGen};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(jf) = parse_job_text(text, "fuzz.fio", &|_| Some("4k".to_string())) else { return };
    for job in jf.jobs.iter().take(4) {
        if let Ok(mut gen) = JobGen::new(job, 0, 0, 1 << 30, 512, 1) {
            for io in gen.by_ref().take(64) {
                assert!(io.offset + io.len <= 1 << 30, "I/O beyond the space");
            }
        }
    }
});
