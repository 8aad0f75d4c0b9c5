//! The virtualization I/O path between a tenant's guest and the host block layer.
//!
//! `bare-metal` is the identity: requests go straight from the workload to the host block layer,
//! and completions straight back. The hypervisor paths (virtqueues, I/O threads, VM exits,
//! polling, interrupt delivery) are further modes of this layer.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VirtMode {
    /// No VM: the workload runs on the host.
    BareMetal,
}

impl VirtMode {
    pub const NAMES: [&'static str; 1] = ["bare-metal"];

    pub fn from_name(name: &str) -> Option<VirtMode> {
        match name {
            "bare-metal" => Some(VirtMode::BareMetal),
            _ => None,
        }
    }
}
