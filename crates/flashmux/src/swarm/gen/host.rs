//! The host's draws: `[host]` (the I/O scheduler, the host queue depth, the elevator's merging,
//! the submission and completion paths' costs) and the scheduler's own section:
//! `[host.mq-deadline]`, `[host.cfq]` for cfq and mcfq,
//! `[host.mcfq]` for MoTS, `[host.fair]` or `[host.hwabc]` for the budget schedulers. The
//! scheduler itself is drawn earlier, in `generate`, since the drive depends on it (a budget
//! scheduler needs an open-channel drive or an FDP one).

use super::G;
use crate::swarm::toml::{self as t, Doc};

const MS: u64 = 1_000_000;

/// `[host]`, its scheduler and the scheduler's section.
pub(super) fn host(g: &mut G, doc: &mut Doc, sched: &str) {
    g.tag("scheduler", sched);
    if sched != "none" || g.chance(0.3) {
        doc.set("host", "scheduler", t::string(sched));
    }
    if g.chance(0.3) {
        doc.set(
            "host",
            "queue_depth",
            g.weighted(&[(1u64, 2), (2, 1), (4, 1), (8, 1), (32, 2), (128, 1), (1024, 1)]).to_string(),
        );
    }
    if g.chance(0.2) {
        doc.set("host", "nomerges", g.weighted(&[(0u64, 1), (1, 1), (2, 1)]).to_string());
    }
    if g.chance(0.2) {
        doc.set("host", "max_sectors_kb", g.weighted(&[(4u64, 1), (64, 1), (128, 1), (512, 2), (1280, 1)]).to_string());
    }
    for key in ["submit_overhead", "completion_overhead"] {
        if g.chance(0.15) {
            doc.set("host", key, t::string(&t::duration(g.cost(20_000))));
        }
    }
    if sched == "mq-deadline" && g.chance(0.5) {
        deadline(g, doc);
    }
    if matches!(sched, "cfq" | "mcfq") && g.chance(0.5) {
        cfq(g, doc);
    }
    if sched == "mcfq" && g.chance(0.6) {
        mcfq(g, doc);
    }
    if matches!(sched, "fair" | "hwabc" | "hwabc-oracle") && g.chance(0.6) {
        budget(g, doc, sched);
    }
}

/// `[host.mq-deadline]`: the deadlines, the batch, the writes' starvation limit.
fn deadline(g: &mut G, doc: &mut Doc) {
    for key in ["read_expire", "write_expire"] {
        if g.chance(0.5) {
            doc.set("host.mq-deadline", key, t::string(&t::duration(g.log(MS, 5_000 * MS))));
        }
    }
    if g.chance(0.5) {
        doc.set("host.mq-deadline", "fifo_batch", g.weighted(&[(1u64, 1), (4, 1), (16, 2), (64, 1)]).to_string());
    }
    if g.chance(0.3) {
        doc.set("host.mq-deadline", "writes_starved", g.weighted(&[(0u64, 1), (2, 2), (8, 1)]).to_string());
    }
}

/// `[host.cfq]`: slices, idling, the target latency, the dispatch quantum, the write FIFO's expiry.
fn cfq(g: &mut G, doc: &mut Doc) {
    if g.chance(0.5) {
        doc.set("host.cfq", "slice_sync", t::string(&t::duration(g.log(100_000, 200 * MS))));
    }
    if g.chance(0.5) {
        doc.set(
            "host.cfq",
            "slice_idle",
            t::string(&t::duration(if g.chance(0.3) { 0 } else { g.log(1_000, 20 * MS) })),
        );
    }
    if g.chance(0.4) {
        doc.set("host.cfq", "target_latency", t::string(&t::duration(g.log(MS, 500 * MS))));
    }
    if g.chance(0.4) {
        doc.set("host.cfq", "quantum", g.int(1, 16).to_string());
    }
    if g.chance(0.3) {
        doc.set("host.cfq", "fifo_expire_write", t::string(&t::duration(g.log(MS, 500 * MS))));
    }
}

/// `[host.mcfq]`: MoTS's sampling interval and window (a whole number of intervals), the
/// bounds of its slice scale, and its reading of the paper's Fig. 5.
fn mcfq(g: &mut G, doc: &mut Doc) {
    let interval = g.log(1, 100) * MS;
    if g.chance(0.6) {
        doc.set("host.mcfq", "interval", t::string(&t::duration(interval)));
        if g.chance(0.6) {
            let k = g.int(1, 20);
            doc.set("host.mcfq", "window", t::string(&t::duration(interval * k)));
        }
    }
    if g.chance(0.5) {
        doc.set("host.mcfq", "min_scale", t::float(g.int(1, 100) as f64 / 100.0));
    }
    if g.chance(0.5) {
        doc.set("host.mcfq", "max_scale", t::float(g.int(100, 100_000) as f64 / 100.0));
    }
    if g.chance(0.3) {
        doc.set("host.mcfq", "reading", t::string(g.pick(&["printed", "compounding"])));
    }
}

/// `[host.fair]` or `[host.hwabc]`: the budget period and windows; for hWA-BC also the smoothing
/// and the cost regression's coefficients.
fn budget(g: &mut G, doc: &mut Doc, sched: &str) {
    let section = if sched == "fair" { "host.fair" } else { "host.hwabc" };
    if g.chance(0.6) {
        doc.set(section, "period", t::string(&t::duration(g.log(100_000, 1_000 * MS))));
    }
    if g.chance(0.5) {
        doc.set(section, "window", g.log(1, 2000).to_string());
    }
    if g.chance(0.5) {
        doc.set(section, "windows", g.int(1, 16).to_string());
    }
    if sched != "fair" {
        if g.chance(0.4) {
            doc.set(section, "alpha", t::float(g.int(1, 99) as f64 / 100.0));
        }
        if g.chance(0.3) {
            doc.set(section, "a", t::float(g.int(0, 400) as f64 / 1000.0 - 0.1));
            doc.set(section, "b", t::float(g.int(1, 1000) as f64 / 1000.0));
        }
    }
}
