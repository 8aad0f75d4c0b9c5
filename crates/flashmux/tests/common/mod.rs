//! Helpers shared by the end-to-end tests (each test file is its own crate).
#![allow(dead_code)]

use flashmux::config::{ConfigError, Scenario};
use flashmux::device::IoOp;
use flashmux::metrics::RunResults;
use flashmux::sim::{DispatchSink, Simulator};
use flashmux::units::{SimTime, TenantId};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A null device answering in 100 us; ext4 on each tenant's region; a 16 MiB page cache.
pub const EXT4: &str = "[device]\npreset = \"null\"\n[device.null]\nlatency = \"100us\"\n\
                        [kernel]\nfilesystem = \"ext4\"\n[kernel.pagecache]\ncapacity = \"16MiB\"\n";

/// One tenant `t` on the first GiB, running fio job `j` with options `fio`.
pub fn one_job_tenant(fio: &str) -> String {
    format!(
        "[[tenant]]\nname = \"t\"\nregion = {{ offset = \"0\", size = \"1GiB\" }}\nfio = \"\"\"\n[j]\n{fio}\n\"\"\"\n"
    )
}

pub fn scenario(text: &str) -> Scenario {
    Scenario::from_toml(text, "test.toml", Path::new(".")).unwrap()
}

/// Runs a scenario to its end, checking every component's invariants every `every` events.
pub fn run_checked(text: &str, every: u64) -> RunResults {
    let mut sim = Simulator::new(scenario(text)).unwrap();
    sim.check_invariants_every(every);
    sim.run();
    sim.finish()
}

/// The loader's error for `text` (as `k.toml`), which must be a configuration error.
pub fn load_err(text: &str) -> String {
    match Scenario::from_toml(text, "k.toml", Path::new(".")) {
        Err(e @ ConfigError::Invalid { .. }) => e.to_string(),
        other => panic!("expected a configuration error, got {:?}", other.map(|s| s.name)),
    }
}

/// Every command the block layer sends: (op, offset, len).
type Sent = Arc<Mutex<Vec<(IoOp, u64, u64)>>>;

struct Record(Sent);

impl DispatchSink for Record {
    fn dispatched(&mut self, _: SimTime, _: TenantId, op: IoOp, offset: u64, len: u64) {
        self.0.lock().unwrap().push((op, offset, len));
    }
}

/// Runs `text` checking invariants after every event; also returns what reached the device.
pub fn run_recorded(text: &str) -> (RunResults, Vec<(IoOp, u64, u64)>) {
    let sent = Sent::default();
    let mut sim = Simulator::new(scenario(text)).unwrap();
    sim.record_dispatches(Box::new(Record(sent.clone())));
    sim.check_invariants_every(1);
    sim.run();
    let r = sim.finish();
    let sent = sent.lock().unwrap().clone();
    (r, sent)
}

/// A file in a fresh temporary directory of its own (named after the test binary, the process
/// and the file), removed when the test ends.
pub struct TempFile(std::path::PathBuf);

impl TempFile {
    pub fn new(name: &str, text: &str) -> TempFile {
        let dir = std::env::temp_dir().join(format!("flashmux-{}-{}-{name}", env!("CARGO_CRATE_NAME"), std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        TempFile(p)
    }
    pub fn path(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}
