//! fio's `group_reporting`: the job clones of a reporting group in which any job sets the option
//! are reported as one entry.
//!
//! # Model
//!
//! fio numbers reporting groups within a job file: a group runs from a job with `new_group` (or
//! `stonewall`, which implies it) to the next; with `group_reporting` set in any job of a group,
//! every clone of the group (`numjobs`) is summed into one entry named after the group's first
//! job (`sum_thread_stats`): I/O counts, bytes and latency statistics add, runtime is the
//! longest, and the iodepth distribution is averaged weighted by each member's I/Os. Groups of
//! different job files (tenants' domains) never merge. Entries keep the order of each group's
//! first clone; clones of groups without the option stay as they are.
//!
//! # Worked example
//!
//! Clones a, b (domain 0, group 0, `group_reporting`), c (domain 0, group 1), d (domain 1,
//! group 0): three entries, `[a+b, c, d]`; a and b report in entry 0, c in 1, d in 2 (d shares
//! group number 0 with a and b, but not their job file).
//!
//! # Source
//!
//! fio's HOWTO (`group_reporting`, `new_group`, `stonewall`) and `stat.c` (`sum_thread_stats`).

use crate::metrics::JobResult;

/// A clone's reporting group: its tenant's job-file domain and fio's group number in it.
pub type GroupKey = (usize, u32);

/// The entries reported for `clones` (whose groups are `keys`, and which set `group_reporting`
/// where `grouped` says so), and the entry each clone is reported in.
pub fn group_reporting(clones: Vec<JobResult>, keys: &[GroupKey], grouped: &[bool]) -> (Vec<JobResult>, Vec<usize>) {
    assert_eq!(clones.len(), keys.len(), "a group key per clone");
    assert_eq!(clones.len(), grouped.len(), "a group_reporting flag per clone");
    let mut merged: Vec<GroupKey> = keys.iter().zip(grouped).filter(|(_, &g)| g).map(|(&k, _)| k).collect();
    merged.sort_unstable();
    merged.dedup();
    let mut out: Vec<JobResult> = Vec::new();
    // The entry of each clone; the first clone of a merged group opens its entry.
    let mut entry_of: Vec<usize> = Vec::with_capacity(clones.len());
    let mut group_entry: Vec<(GroupKey, usize)> = Vec::new();
    for (clone, &k) in clones.into_iter().zip(keys) {
        if merged.binary_search(&k).is_err() {
            entry_of.push(out.len());
            out.push(clone);
            continue;
        }
        match group_entry.iter().find(|(g, _)| *g == k) {
            Some(&(_, e)) => {
                out[e].absorb(&clone);
                entry_of.push(e);
            }
            None => {
                group_entry.push((k, out.len()));
                entry_of.push(out.len());
                out.push(clone);
            }
        }
    }
    debug_assert_eq!(
        out.iter().map(|j| j.members as usize).sum::<usize>(),
        entry_of.len(),
        "every clone reported once"
    );
    (out, entry_of)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{IoStats, Samples};

    fn clone(name: &str, ios: u64, runtime_ns: u64) -> JobResult {
        let mut io = IoStats::default();
        for _ in 0..ios {
            io.read.record(4096, 1_000, 10_000);
        }
        JobResult {
            errors: 0,
            zone_commands: 0,
            error: 0,
            name: name.into(),
            clone: 0,
            members: 1,
            groupid: 0,
            tenant: "t".into(),
            tenant_index: 0,
            options: Vec::new(),
            iodepth: 1,
            runtime_ns,
            io,
            iodepth_levels: vec![(1, 1.0)],
            sample_interval_ns: 500_000_000,
            samples: Samples::default(),
        }
    }

    #[test]
    fn the_header_example() {
        let clones = vec![clone("a", 3, 10), clone("b", 5, 30), clone("c", 1, 5), clone("d", 2, 7)];
        let keys = [(0, 0), (0, 0), (0, 1), (1, 0)];
        let (out, entry_of) = group_reporting(clones, &keys, &[true, false, false, false]);
        assert_eq!(entry_of, [0, 0, 1, 2]);
        assert_eq!(out.iter().map(|j| j.name.as_str()).collect::<Vec<_>>(), ["a", "c", "d"]);
        assert_eq!((out[0].members, out[0].io.read.ios, out[0].runtime_ns), (2, 8, 30), "sums, longest runtime");
        assert_eq!((out[2].members, out[2].io.read.ios), (1, 2), "another job file's group 0 is not merged");
    }

    #[test]
    fn without_group_reporting_every_clone_is_its_own_entry() {
        let clones = vec![clone("a", 1, 1), clone("a", 1, 1), clone("b", 1, 1)];
        let (out, entry_of) = group_reporting(clones, &[(0, 0); 3], &[false; 3]);
        assert_eq!((out.len(), entry_of), (3, vec![0, 1, 2]));
    }

    #[test]
    fn a_later_member_opens_nothing_and_entries_keep_first_clone_order() {
        // Group (0, 1) is interleaved with (0, 0): its members still merge into the entry its
        // first clone opened.
        let clones = vec![clone("x", 1, 1), clone("y", 1, 1), clone("x2", 1, 1), clone("y2", 1, 1)];
        let keys = [(0, 1), (0, 0), (0, 1), (0, 0)];
        let (out, entry_of) = group_reporting(clones, &keys, &[false, true, true, false]);
        assert_eq!(entry_of, [0, 1, 0, 1]);
        assert_eq!(out.iter().map(|j| (j.name.as_str(), j.members)).collect::<Vec<_>>(), [("x", 2), ("y", 2)]);
    }
}
