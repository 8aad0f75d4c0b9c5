//! A zoned drive's case: one seed in ten, decided from a stream of its own (`swarm-zoned`), so
//! every other seed draws what it always drew. The drive is `tlc-nvme-zns` on a small flash
//! (1 to 16 planes of 4 to 64 pages, 4 to 48 blocks each) with its zones drawn: over every
//! plane or a plane group, a capacity of 1 to 3 blocks per plane, a size equal to it or a few
//! layout units more, fewer zones than the flash holds now and then, open and active limits
//! or none, a reset overhead and Finish padding or not. Its tenants either run fio's zoned
//! mode (`zonemode=zbd`) on a zone range each — sequential and random writes, reads, several
//! jobs sharing the tenant's view of the drive, fio's own open-zone limit and reset threshold
//! — or ordinary jobs on the conventional space of a host FTL (`[host.zoned_ftl]`, one log or
//! one per tenant). The drive's state machine checks every command: a case passes only if none
//! fails where the workload keeps to the rules, and the run's invariants hold throughout.

use super::{Case, G};
use crate::engine::rng_for;
use crate::swarm::toml::{self as t, Doc};

/// Bytes of a `tlc-nvme` flash page (and so of the zoned preset's).
const PAGE: u64 = 16 << 10;

/// Whether seed `seed`'s case is a zoned drive's: one in ten, from its own stream.
pub(super) fn is_zoned(seed: u64) -> bool {
    use rand::Rng;
    rng_for(seed, "swarm-zoned").random_bool(0.1)
}

/// The zoned case for `seed`.
pub(super) fn zoned_case(seed: u64) -> Case {
    let mut g = G { rng: rng_for(seed, "swarm-zoned-case"), tags: Vec::new(), files: Vec::new(), mistakes: false };
    g.tag("zoned", true);
    let mut doc = Doc::default();
    if g.chance(0.8) {
        doc.top("seed", g.int(0, i64::MAX as u64).to_string());
    }
    let check_every = g.log(1, 1000);
    doc.set("device", "preset", t::string("tlc-nvme-zns"));
    let dims = [("channels", g.int(1, 2)), ("chips_per_channel", g.int(1, 2)), ("dies_per_chip", g.int(1, 2)), ("planes_per_die", g.int(1, 2))];
    let planes: u64 = dims.iter().map(|d| d.1).product();
    for (k, v) in dims {
        doc.set("device.geometry", k, v.to_string());
    }
    let ppb = g.pick(&[4u64, 16, 64]);
    let bpp = g.int(4, 48);
    doc.set("device.geometry", "pages_per_block", ppb.to_string());
    doc.set("device.geometry", "blocks_per_plane", bpp.to_string());
    // Zones over every plane or a plane group (a divisor of the planes).
    let divisors: Vec<u64> = (1..=planes).filter(|d| planes % d == 0).collect();
    let zone_planes = if g.chance(0.6) { planes } else { g.pick(&divisors) };
    if zone_planes != planes || g.chance(0.2) {
        doc.set("device.zns", "zone_planes", zone_planes.to_string());
    }
    g.tag("zone_planes", if zone_planes == planes { "all" } else { "group" });
    let layout = zone_planes * ppb * PAGE;
    let cap_blocks = g.int(1, 3.min(bpp));
    let capacity = cap_blocks * layout;
    let size = capacity + if g.chance(0.6) { 0 } else { g.int(1, 2) * layout };
    doc.set("device.zns", "zone_size", t::string(&t::size(size)));
    if size != capacity || g.chance(0.3) {
        doc.set("device.zns", "zone_capacity", t::string(&t::size(capacity)));
    }
    let most = (planes / zone_planes) * (bpp / cap_blocks);
    let zones = if g.chance(0.25) { g.int(1, most) } else { most };
    if zones != most {
        doc.set("device.zns", "zones", zones.to_string());
    }
    let host_ftl = zones >= 12 && g.chance(0.4);
    let tenants = g.int(1, zones.min(4));
    // Open and active limits: none, or enough for what the tenants write at once.
    let limits = match g.weighted(&[(0u8, 3), (1, 4), (2, 3)]) {
        0 => None,
        1 => Some((2 * tenants + g.int(0, 4), 0)),
        _ => Some((2 * tenants + g.int(0, 4), g.int(0, 4))),
    };
    if let Some((open, extra)) = limits {
        doc.set("device.zns", "max_open", open.to_string());
        doc.set("device.zns", "max_active", (open + extra).to_string());
        g.tag("zone_limits", true);
    }
    if g.chance(0.5) {
        doc.set("device.zns", "reset_overhead", t::string(&t::duration(g.cost(3_000_000))));
    }
    let pads = g.chance(0.5);
    doc.set("device.zns", "finish_pads", pads.to_string());
    g.tag("finish_pads", pads);
    // Stop: always a time (zbd jobs run on), sometimes a request count too.
    doc.set("stop", "time", t::string(&t::duration(g.log(1_000_000, 200_000_000))));
    if g.chance(0.3) {
        doc.set("stop", "requests", g.log(50, 20_000).to_string());
    }
    if host_ftl {
        g.tag("zoned_mode", "host-ftl");
        let per_tenant = tenants > 1 && g.chance(0.5);
        doc.set("host.zoned_ftl", "per_tenant", per_tenant.to_string());
        if g.chance(0.3) {
            doc.set("host.zoned_ftl", "gc_threshold_zones", g.int(2, 3).to_string());
        }
        for i in 0..tenants {
            let rw = g.pick(&["randwrite", "write", "randrw", "randread", "trim"]);
            let bs = 4096 * g.log(1, 32);
            let job = format!("[j]\nrw={rw}\nbs={bs}\niodepth={}\ndirect=1\ntime_based\nruntime=1h\n", g.log(1, 32));
            doc.tenant(vec![("name".into(), t::string(&format!("t{i}"))), ("fio".into(), t::multiline(&job))]);
        }
    } else {
        g.tag("zoned_mode", "zbd");
        let per = zones / tenants;
        for i in 0..tenants {
            let region = format!(
                "{{ offset = {}, size = {} }}",
                t::string(&t::size(i * per * size)),
                t::string(&t::size(per * size))
            );
            let mut text = String::from("[global]\nzonemode=zbd\ndirect=1\ntime_based\nruntime=1h\n");
            if let Some((open, _)) = limits.filter(|_| g.chance(0.3)) {
                text.push_str(&format!("max_open_zones={}\n", g.int(1, open)));
            }
            for j in 0..g.int(1, 3) {
                let rw = g.weighted(&[("write", 4), ("randwrite", 4), ("read", 1), ("randread", 1)]);
                g.tag("zbd_rw", rw);
                let bs = 4096 * g.log(1, (capacity / 4096).min(64));
                text.push_str(&format!("[j{j}]\nrw={rw}\nbs={bs}\niodepth={}\n", g.log(1, 16)));
                if rw == "randwrite" && g.chance(0.4) {
                    text.push_str(&format!("zone_reset_threshold={}\nzone_reset_frequency={}\n", g.int(1, 9) as f64 / 10.0, g.int(1, 8) as f64 / 8.0));
                }
            }
            doc.tenant(vec![
                ("name".into(), t::string(&format!("t{i}"))),
                ("region".into(), region),
                ("fio".into(), t::multiline(&text)),
            ]);
        }
    }
    let rerun = g.chance(0.1);
    Case { seed, scenario: doc.render(), files: g.files, check_every, rerun, alone: false, tags: g.tags }
}
