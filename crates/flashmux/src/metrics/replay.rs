//! What a trace replay did with its trace, and how well it kept up with the trace's times
//! (`results.json`'s `replay` record per trace tenant), and what a user must be told of it.

use crate::units::Nanos;
use serde::Serialize;

/// A request is counted as late when it is issued this long after it was due.
pub const LATE: Nanos = Nanos::from_ms(1);
/// What a replay did with its trace, and how well it kept up.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplayStats {
    /// The trace's format.
    pub format: String,
    /// Requests handed to the simulation.
    pub requests: u64,
    /// Valid requests of other streams (not `select`ed), before `start` or after the window.
    pub skipped: u64,
    /// Requests beyond the region with `lba_fit = "reject"`.
    pub out_of_range: u64,
    /// Requests longer than the region, shortened to it.
    pub clipped: u64,
    /// Lines (or binary records) the reader could not use, and the first few.
    pub bad_lines: u64,
    pub first_bad_lines: Vec<(u64, String)>,
    /// Requests whose trace time is earlier than the previous one's.
    pub out_of_order: u64,
    /// Open loop: how far issue fell behind the (scaled) trace times.
    pub behind_max_ns: u64,
    pub behind_mean_ns: f64,
    /// Requests issued more than [`LATE`] after they were due.
    pub late: u64,
    /// A read error that ended the replay early.
    pub error: Option<String>,
    /// With `place_by`: what the trace's values did with its writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<ReplayPlacement>,
    /// Why no request was replayed, when none was and the trace could be read (the window is
    /// past the trace's end, or empty; the selected stream is not in the trace).
    #[serde(skip)]
    pub nothing_replayed: Option<String>,
    #[serde(skip)]
    behind_sum_ns: u128,
}

/// How a replay placed its writes by a trace field (`place_by`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplayPlacement {
    /// The field.
    pub field: String,
    /// Its distinct values seen in the replayed stream, numbered 0 to `values` − 1 in order of
    /// first appearance (value k: FDP placement identifier k, or stream k + 1).
    pub values: u32,
    /// An FDP drive's placement handles; `None` on a streams drive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fdp_handles: Option<u16>,
    /// FDP: writes issued whose value's index is not below `fdp_handles`: the drive placed each
    /// through handle 0 and logged an Invalid Placement Identifier event.
    pub invalid_placement_writes: u64,
}

impl ReplayStats {
    /// Nothing replayed yet, from a trace of `format`.
    pub fn new(format: &str) -> ReplayStats {
        ReplayStats { format: format.to_string(), ..Default::default() }
    }

    /// Issue of a request due at `due` happened `behind` after it.
    pub fn record_issue(&mut self, behind: Nanos) {
        self.behind_max_ns = self.behind_max_ns.max(behind.0);
        self.behind_sum_ns += behind.0 as u128;
        if behind > LATE {
            self.late += 1;
        }
    }

    pub(crate) fn finish_mean(&mut self) {
        if self.requests > 0 {
            self.behind_mean_ns = self.behind_sum_ns as f64 / self.requests as f64;
        }
    }
}

/// What a user must be told about a tenant's replay: lines skipped, requests refused or
/// shortened, a read error, nothing replayed (and why), times out of order, more placement
/// values than the drive has FDP handles, and a trace too fast for the device.
pub fn replay_warnings(tenant: &str, r: &ReplayStats) -> Vec<String> {
    let mut w = Vec::new();
    if r.bad_lines > 0 {
        let first: Vec<String> = r.first_bad_lines.iter().map(|(l, why)| format!("line {l}: {why}")).collect();
        w.push(format!(
            "tenant '{tenant}': {} bad trace line(s) skipped (--strict fails on them); first: {}",
            r.bad_lines,
            first.join("; ")
        ));
    }
    if r.out_of_range > 0 {
        w.push(format!(
            "tenant '{tenant}': {} request(s) beyond the tenant's region were not replayed (lba_fit = \"reject\")",
            r.out_of_range
        ));
    }
    if r.clipped > 0 {
        w.push(format!(
            "tenant '{tenant}': {} request(s) longer than the tenant's region were shortened to it",
            r.clipped
        ));
    }
    if let Some(e) = &r.error {
        w.push(format!("tenant '{tenant}': the trace could not be read to its end: {e}"));
    }
    if let Some(why) = &r.nothing_replayed {
        w.push(format!("tenant '{tenant}': nothing was replayed: {why}"));
    }
    if r.out_of_order > 0 {
        w.push(format!(
            "tenant '{tenant}': {} request(s) of the trace are out of time order (earlier than the request before them): replay keeps the file's order, issuing each as soon as the one before it",
            r.out_of_order
        ));
    }
    if let Some(p) = &r.placement {
        if let Some(handles) = p.fdp_handles.filter(|&h| p.values > u32::from(h)) {
            w.push(format!(
                "tenant '{tenant}': place_by = \"{}\" found {} distinct values in the trace, but the drive's FDP has {handles} placement handles (device.fdp.handles): {} write(s) of values {handles} and on carried placement identifiers past them, which the drive placed through handle 0 (Invalid Placement Identifier events)",
                p.field, p.values, p.invalid_placement_writes
            ));
        }
    }
    if r.late > 0 {
        w.push(format!(
            "tenant '{tenant}': the trace was too fast for the device: {} of {} requests were issued more than {} ms late (at most {:.3} s, mean {:.3} ms behind the trace)",
            r.late,
            r.requests,
            LATE.0 / 1_000_000,
            r.behind_max_ns as f64 / 1e9,
            r.behind_mean_ns / 1e6
        ));
    }
    w
}
