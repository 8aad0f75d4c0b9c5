//! Any text, as a Filebench workload file: reading returns a workload or an error, never panics;
//! every workload read satisfies its invariants and reads back the same from its printed text.
#![no_main]

use flashmux::workload::filebench::{parse_wml, to_wml};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(file) = parse_wml(text, "fuzz.f") else { return };
    file.workload.check_invariants();
    let printed = to_wml(&file.workload);
    let again = parse_wml(&printed, "printed.f").expect("printed workload reads back");
    assert_eq!(again.workload.filesets.len(), file.workload.filesets.len());
    assert_eq!(again.workload.processes.len(), file.workload.processes.len());
    assert_eq!(to_wml(&again.workload), printed, "printing is stable");
});
