//! A zoned namespace (NVMe ZNS) on the drive's flash: the zone state machine
//! (`device/zns/`) decides what each command may do; this file maps zones to erase blocks and
//! times what they do.
//!
//! # Model
//! - **Zones on flash.** Zone *z* is the FTL's placement *z* (`ftl::ZonedFtl`): its LBA range
//!   stripes over every plane by flash page, as any logical page does, and in each plane its
//!   data goes to an open block of its own, opened from the plane's free blocks as the zone's
//!   writes reach it. A block only ever holds one zone's data. A zone's capacity is whole
//!   *layout units* (a block in every plane), so a full zone is `capacity / layout` blocks in
//!   every plane. The write buffer keeps a queue per zone and plane, so a flash page holds one
//!   zone's data.
//! - **Commands** are checked by the state machine when the controller has fetched them, in
//!   the order it fetches them: a write not at the write pointer, past the zone's capacity, to
//!   a full zone, or past the open or active limits completes at once with its NVMe status
//!   (counted per tenant), and changes nothing. A write or Zone Append that passes goes through
//!   the write buffer like any write; a Zone Append's data goes to the LBA the state machine
//!   returns (ALBA), which the completion carries. Reads of a zone below or beyond its write
//!   pointer are allowed (unwritten LBAs read as zeros); Read Across Zone Boundaries is
//!   supported, as the host's requests do not split at zone boundaries.
//! - **Zone Management Send.** Open and Close change state only. **Finish** of a partly
//!   written zone, on a drive that pads (`finish_pads`, as the ZN540), writes the rest of the
//!   zone's capacity with padding through the write buffer — programmed, never mapped, owned
//!   by no tenant — as far as the zone's blocks in each plane hold it, and completes when the
//!   padding is in the buffer; without padding it leaves the rest of the zone's blocks
//!   unwritten (erased with the zone). **Reset**, after the controller's `reset_overhead`, of
//!   a zone that holds anything unmaps its LBAs (dropping what is still in the write buffer)
//!   and erases every block it wrote, all at once on each die (a multi-plane erase of one
//!   block per plane at a time): the command completes when the last die's erases end. The
//!   blocks are free at once; a program on them waits for its die, which the erase occupies.
//! - **No garbage collection**: a zone's data never moves; the host frees space by resetting
//!   zones.
//!
//! # Worked example
//! 4 dies of 2 planes, 64-page blocks of 16 KiB (1 MiB), tBERS 3.5 ms: the layout unit is
//! 8 MiB. A zone of 16 MiB capacity is 2 blocks in every plane. Written full and reset at t,
//! each die erases 2 blocks per plane, one round of a multi-plane erase after another:
//! the reset completes at t + 2 × 3.5 ms = t + 7 ms (once the die is free of earlier work),
//! plus the controller's `reset_overhead` before the erases start (1.6 ms on `tlc-nvme-zns`:
//! t + 8.6 ms). An empty zone's reset erases nothing and completes after the overhead alone.
//! Finished with 4 MiB written and padding, the zone's other 12 MiB are padded at the drive's
//! write rate: at 3.5 GB/s, less the write buffer still filling at completion.
//!
//! # Parameters
//! `[device.zns]`: `zone_size`, `zone_capacity` (bytes, multiples of the layout unit),
//! `zones` (default: as many as the flash holds), `max_open`, `max_active` (zones),
//! `zone_append_limit` (bytes), `reset_overhead` (time, default 0), `finish_pads` (default
//! false; `tlc-nvme-zns`: 1.6 ms and true, the WD ZN540's, from Doekemeijer et al., IEEE
//! CLUSTER '23, raw data). LBAs are 512 bytes.
//!
//! Source: NVM Express Zoned Namespace Command Set 1.1 (§2.1.1 zone states and writes, §3.4
//! Zone Append and Zone Management); the mapping of a zone to whole erase blocks striped over
//! the dies as Bjørling et al., "ZNS: Avoiding the Block Interface Tax for Flash-based SSDs"
//! (USENIX ATC '21, §3: a zone's capacity is whole erase blocks, zone reset erases them).

use super::Ssd;
use crate::device::zns::{ZoneAction, ZoneState, Zones};
use crate::device::{CmdState, DeviceEvent, IoOp, Outbox, ZnsLayout, ZNS_LBA_BYTES};
use crate::ftl::Loc;
use crate::units::{Lpn, Placement, SimTime, TenantId};
use serde::Serialize;
use std::collections::BTreeMap;

/// One tenant's zone commands and their outcomes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TenantZoneStats {
    /// Zone Resets that emptied a zone.
    pub resets: u64,
    /// Zone Finish commands that filled a zone.
    pub finishes: u64,
    /// Zone Open and Close commands that succeeded.
    pub opens: u64,
    pub closes: u64,
    /// Zone Appends that succeeded.
    pub appends: u64,
    /// Zones the tenant opened (by a write or an Open) that are open at the end.
    pub open_zones: u64,
    /// Commands that failed, by NVMe status (`Zone Invalid Write (BCh)`: 3, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
}

impl TenantZoneStats {
    /// Commands that failed, whatever the status.
    pub fn failed(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// The drive-wide zone report in `results.json` (`device.zns`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ZnsReport {
    pub zones: u32,
    pub zone_bytes: u64,
    pub capacity_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_open: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_active: Option<u32>,
    /// Zones in each state at the end (`empty`, `implicitly-opened`, ...), states with none left
    /// out.
    pub states: BTreeMap<String, u64>,
    /// The most zones open, and active, at once.
    pub peak_open: u32,
    pub peak_active: u32,
    /// Resets that emptied a zone, and the blocks they erased.
    pub resets: u64,
    pub blocks_erased: u64,
    /// Time the resets that emptied a zone took, from fetch to completion, summed.
    pub reset_ns: u64,
    /// Implicitly opened zones the controller closed to open another (all zones).
    pub implicit_closes: u64,
    /// Bytes the drive wrote as padding to finish partly written zones (`finish_pads`).
    pub padded_bytes: u64,
    /// Commands that failed, by NVMe status.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
}

/// The zoned namespace's state beside the flash: zones, who opened them, counters.
pub(super) struct ZonedNs {
    layout: ZnsLayout,
    zones: Zones,
    /// Per zone, the tenant whose write or Open last opened it.
    opener: Vec<u16>,
    tenants: Vec<TenantZoneStats>,
    peak_open: u32,
    peak_active: u32,
    resets: u64,
    blocks_erased: u64,
    reset_ns: u64,
    padded_bytes: u64,
    /// Reused by resets: the blocks a reset erased.
    erased: Vec<u32>,
}

impl ZonedNs {
    pub(super) fn new(layout: ZnsLayout) -> Result<ZonedNs, String> {
        let zones = Zones::new(layout.state_machine())?;
        Ok(ZonedNs {
            opener: vec![0; layout.zones as usize],
            layout,
            zones,
            tenants: Vec::new(),
            peak_open: 0,
            peak_active: 0,
            resets: 0,
            blocks_erased: 0,
            reset_ns: 0,
            padded_bytes: 0,
            erased: Vec::new(),
        })
    }

    pub(super) fn zones(&self) -> &Zones {
        &self.zones
    }

    fn tenant(&mut self, t: TenantId) -> &mut TenantZoneStats {
        if t.index() >= self.tenants.len() {
            self.tenants.resize(t.index() + 1, TenantZoneStats::default());
        }
        &mut self.tenants[t.index()]
    }

    fn note_peaks(&mut self) {
        self.peak_open = self.peak_open.max(self.zones.open_zones());
        self.peak_active = self.peak_active.max(self.zones.active_zones());
    }

    /// `tenant`'s zone statistics (zones open now counted from the open zones' openers: at
    /// most the open zones are visited, not the namespace).
    pub(super) fn tenant_stats(&self, tenant: TenantId) -> TenantZoneStats {
        let mut s = self.tenants.get(tenant.index()).cloned().unwrap_or_default();
        s.open_zones = self.zones.open_zone_ids().filter(|&z| self.opener[z as usize] == tenant.0).count() as u64;
        s
    }

    pub(super) fn report(&self) -> ZnsReport {
        let mut states = BTreeMap::new();
        let mut implicit_closes = 0;
        for z in 0..self.layout.zones {
            *states.entry(self.zones.state(z).expect("a zone of the namespace").name().to_string()).or_insert(0) += 1;
            implicit_closes += self.zones.counters(z).expect("a zone of the namespace").implicit_closes;
        }
        let mut errors = BTreeMap::new();
        for t in &self.tenants {
            for (k, v) in &t.errors {
                *errors.entry(k.clone()).or_insert(0) += v;
            }
        }
        ZnsReport {
            zones: self.layout.zones,
            zone_bytes: self.layout.zone_bytes,
            capacity_bytes: self.layout.capacity_bytes,
            max_open: self.layout.max_open,
            max_active: self.layout.max_active,
            states,
            peak_open: self.peak_open,
            peak_active: self.peak_active,
            resets: self.resets,
            blocks_erased: self.blocks_erased,
            reset_ns: self.reset_ns,
            implicit_closes,
            padded_bytes: self.padded_bytes,
            errors,
        }
    }
}

/// What the zone checks decided for a command.
pub(super) enum ZoneOutcome {
    /// The command goes on as a read or write (a Zone Append now at its ALBA), its data
    /// placed in the zone's blocks.
    Proceed(Placement),
    /// A Finish on a drive that pads: the command now writes the rest of the zone's capacity
    /// (its offset and length set to it) with padding through the write buffer, and completes
    /// when the padding is in.
    Pad(Placement),
    /// Done here: failed, or a zone management command whose completion is scheduled.
    Done,
}

impl Ssd {
    /// Runs the zone checks of the command in `slot` on a zoned drive and does what a zone
    /// management command asks.
    pub(super) fn zone_command(&mut self, now: SimTime, slot: u32, cmds: &mut [CmdState], out: &mut Outbox) -> ZoneOutcome {
        let cmd = cmds[slot as usize].cmd;
        let ns = self.zoned.as_mut().expect("a zoned drive");
        let (slba, nlb) = (cmd.offset / ZNS_LBA_BYTES, cmd.len.div_ceil(ZNS_LBA_BYTES));
        let zone_lbas = ns.layout.zone_bytes / ZNS_LBA_BYTES;
        let zone = (slba / zone_lbas) as u16;
        // A management command's zone as it was: a Reset of a zone not empty is one that empties
        // it (counted, and timed in the report); a Finish pads the rest of an active zone from
        // where writing stopped (a Finish of a full zone changes nothing; of an empty one,
        // writes nothing). Not looked up for reads and writes.
        let (before, stopped) = if cmd.op.is_zone_management() {
            (ns.zones.state(zone as u32), ns.zones.write_pointer(zone as u32).unwrap_or(0) * ZNS_LBA_BYTES)
        } else {
            (None, 0)
        };
        let emptying = cmd.op == IoOp::ZoneReset && before.is_some_and(|s| s != ZoneState::Empty);
        let active = before.is_some_and(ZoneState::is_active);
        let result = match cmd.op {
            IoOp::Write => ns.zones.write(slba, nlb).map(|()| Some(Placement(zone))),
            IoOp::ZoneAppend => ns.zones.append(slba, nlb).map(|alba| {
                let st = &mut cmds[slot as usize];
                st.cmd.offset = alba * ZNS_LBA_BYTES;
                st.alba = Some(alba * ZNS_LBA_BYTES);
                Some(Placement(zone))
            }),
            IoOp::Read => ns.zones.read_check(slba, nlb, true).map(|()| Some(Placement(0))),
            IoOp::Trim | IoOp::Flush => Ok(Some(Placement(0))),
            IoOp::ZoneReset | IoOp::ZoneFinish | IoOp::ZoneOpen | IoOp::ZoneClose => {
                let action = cmd.op.zone_action().expect("a zone management command");
                ns.zones.manage(slba, action, false).map(|changed| {
                    let t = ns.tenant(cmd.tenant);
                    match (action, changed > 0) {
                        (ZoneAction::Reset, true) => t.resets += 1,
                        (ZoneAction::Finish, true) => t.finishes += 1,
                        (ZoneAction::Open, _) => t.opens += 1,
                        (ZoneAction::Close, _) => t.closes += 1,
                        _ => {}
                    }
                    ns.resets += u64::from(emptying);
                    None
                })
            }
        };
        let ns = self.zoned.as_mut().expect("a zoned drive");
        match result {
            Err(status) => {
                *ns.tenant(cmd.tenant).errors.entry(status.to_string()).or_insert(0) += 1;
                cmds[slot as usize].status = Some(status);
                out.events.push((now, DeviceEvent::Complete(slot)));
                ZoneOutcome::Done
            }
            Ok(Some(p)) => {
                if matches!(cmd.op, IoOp::Write | IoOp::ZoneAppend) {
                    ns.opener[zone as usize] = cmd.tenant.0;
                    ns.tenant(cmd.tenant).appends += u64::from(cmd.op == IoOp::ZoneAppend);
                }
                ns.note_peaks();
                ZoneOutcome::Proceed(p)
            }
            Ok(None) => {
                if cmd.op == IoOp::ZoneOpen {
                    ns.opener[zone as usize] = cmd.tenant.0;
                }
                ns.note_peaks();
                if cmd.op == IoOp::ZoneFinish && ns.layout.finish_pads {
                    // The rest of the capacity from the first whole unit after the write
                    // pointer (a unit the host began is already the host's, in the buffer).
                    let unit = self.geo.unit_bytes as u64;
                    let zslba = zone as u64 * ns.layout.zone_bytes;
                    let (from, end) = (stopped.next_multiple_of(unit), zslba + ns.layout.capacity_bytes);
                    if active && stopped > zslba && from < end {
                        ns.padded_bytes += end - from;
                        let st = &mut cmds[slot as usize];
                        (st.cmd.offset, st.cmd.len, st.padding) = (from, end - from, true);
                        return ZoneOutcome::Pad(Placement(zone));
                    }
                }
                let done = if cmd.op == IoOp::ZoneReset { self.reset_zone(now, zone as u32, emptying, cmds, out) } else { now };
                out.events.push((done, DeviceEvent::Complete(slot)));
                ZoneOutcome::Done
            }
        }
    }

    /// A reset zone's flash work: after the controller's `reset_overhead`, its LBAs unmapped
    /// (buffered data dropped) and its blocks erased on their dies. Returns when the last erase
    /// ends (the overhead's end if the zone held nothing). `emptying`: the zone was not empty
    /// (the reset is counted and its time reported).
    ///
    /// A write to the zone still waiting for buffer space when the reset comes is done: what
    /// it had in the buffer is dropped with the rest, the remainder never enters it, and it
    /// completes now — as if written and then reset, which is what the host asked, in order.
    fn reset_zone(&mut self, now: SimTime, zone: u32, emptying: bool, cmds: &[CmdState], out: &mut Outbox) -> SimTime {
        let unit = self.geo.unit_bytes as u64;
        let ns = self.zoned.as_mut().expect("a zoned drive");
        let (start, cap_end) = (zone as u64 * ns.layout.zone_bytes, zone as u64 * ns.layout.zone_bytes + ns.layout.capacity_bytes);
        self.flusher.waiting.retain(|&s| {
            let c = &cmds[s as usize].cmd;
            let ours = c.offset >= start && c.offset < cap_end;
            if ours {
                out.events.push((now, DeviceEvent::Complete(s)));
            }
            !ours
        });
        let (first, end) = (start / unit, cap_end / unit);
        let mut erased = std::mem::take(&mut ns.erased);
        for lpn in first..end {
            if let Loc::Buffer(s) = self.ftl.discard(Lpn(lpn as u32)) {
                self.flusher.drop_dirty(now, s, out);
            }
        }
        erased.clear();
        self.ftl.erase_zone(Placement(zone as u16), &mut erased);
        // Erases per plane, then per die the most of any of its planes: rounds of a
        // multi-plane erase.
        let mut per_plane = vec![0u32; self.geo.planes() as usize];
        for &b in &erased {
            per_plane[(b / self.geo.blocks_per_plane) as usize] += 1;
        }
        // The erases start once the controller has done its part.
        let erase_from = now + self.zoned.as_ref().expect("a zoned drive").layout.reset_overhead;
        let mut done = erase_from;
        for die in (0..self.geo.dies()).map(crate::units::DieId) {
            let rounds = self.geo.planes_of_die(die).map(|p| per_plane[p.index()]).max().unwrap_or(0);
            if rounds > 0 {
                done = done.max(self.array.reserve_erase(erase_from, die, rounds));
            }
        }
        let ns = self.zoned.as_mut().expect("a zoned drive");
        ns.blocks_erased += erased.len() as u64;
        if emptying {
            ns.reset_ns += done.since(now).0;
        }
        ns.erased = erased;
        done
    }

    /// The zone report, on a zoned drive.
    pub fn zns_report(&self) -> Option<ZnsReport> {
        self.zoned.as_ref().map(ZonedNs::report)
    }

    /// `tenant`'s zone statistics, on a zoned drive.
    pub fn tenant_zone_stats(&self, tenant: TenantId) -> Option<TenantZoneStats> {
        self.zoned.as_ref().map(|z| z.tenant_stats(tenant))
    }

    /// The zone state machine, on a zoned drive (Report Zones).
    pub fn zones(&self) -> Option<&Zones> {
        self.zoned.as_ref().map(ZonedNs::zones)
    }
}

#[cfg(test)]
#[path = "zoned_tests.rs"]
mod tests;
