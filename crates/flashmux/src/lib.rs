//! flashmux: a deterministic model of several tenants sharing one SSD, from the workload through
//! the guest, the hypervisor's I/O path, the host block layer and its scheduler, the NVMe device
//! and its FTL, down to the flash array.
//!
//! The model never reads a clock: every method takes the current simulated time and returns what
//! happens next. `flashmux run` drives it in virtual time; the same model can be driven in wall-clock
//! time.

pub mod config;
pub mod device;
pub mod engine;
pub mod experiment;
pub mod flash;
pub mod fsutil;
pub mod ftl;
pub mod host;
pub mod import;
pub mod kernel;
pub mod metrics;
pub mod names;
pub mod report;
pub mod serve;
pub mod sim;
pub mod swarm;
pub mod units;
pub mod virt;
pub mod workload;

/// flashmux's version, as reported in every result.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The message of an error as the command line prints it: the error followed by its sources,
/// joined by `: `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut m = e.to_string();
    let mut s = e.source();
    while let Some(x) = s {
        m += &format!(": {x}");
        s = x.source();
    }
    m
}
