//! Zoned namespaces (NVMe ZNS): the zone state machine of a zoned namespace, with its write
//! pointers, open and active zone limits, Zone Append, Zone Management Send and Receive. Pure
//! and untimed: no flash, no timing — the drive model maps zones to blocks and times what
//! these operations decide.
//!
//! # Model
//! The namespace is `zones` zones of `zone_size` LBAs each; zone `i` starts at
//! `ZSLBA = i × zone_size`, and its first `zone_capacity` LBAs are writable. Every zone has a
//! state and a write pointer (WP), the next LBA to write (ZNS 1.1 §2.1.1.2.1):
//!
//! | state | WP valid | active | open | enters it by |
//! |---|---|---|---|---|
//! | ZSE Empty | yes | | | Reset |
//! | ZSIO Implicitly Opened | yes | yes | yes | a write or append to ZSE or ZSC |
//! | ZSEO Explicitly Opened | yes | yes | yes | Open (from ZSE, ZSIO or ZSC) |
//! | ZSC Closed | yes | yes | | Close; or the controller, from ZSIO, for resources |
//! | ZSF Full | no | | | the WP reaching the capacity; Finish |
//! | ZSRO Read Only | no | | | the media (outside the spec): [`Zones::fail_zone`] |
//! | ZSO Offline | no | | | Offline (from ZSRO); the media |
//!
//! Nothing leaves ZSO (§2.1.1.3.7). The open and active zone counts are kept as zones change
//! state (§2.1.1.4.1: ZSE→ZSF by Finish uses neither), never recomputed.
//!
//! **Writes** (Write, and every User Data Out command, §2.1.1.2.1.1), checked in this order, as
//! QEMU's `nvme_do_write` and `nvme_check_zone_write` do: a range past the namespace is
//! *LBA Out of Range*; a zone in ZSF, ZSRO or ZSO is *Zone Is Full*, *Zone Is Read Only*,
//! *Zone Is Offline*; a start other than the WP is *Zone Invalid Write*; a range past the
//! zone's capacity (so also one crossing into the next zone) is *Zone Boundary Error*; then the
//! resources. A write to a zone in ZSE or ZSC opens it implicitly (ZSIO), which needs an open
//! resource, and, from ZSE, an active one (§2.1.1.3.1, §2.1.1.3.4) — even a write that fills
//! the zone at once, which passes through ZSIO to ZSF (§2.1.1.3: "multiple state machine
//! transitions"). When the WP reaches the capacity the zone is Full and stops counting as open
//! and active.
//!
//! **Resources** (§2.1.1.4.1, QEMU `nvme_zrm_open_flags`, `nvme_zns_check_resources`): a zone
//! about to open from ZSE needs `active + 1 ≤ max_active`, else *Too Many Active Zones*; any
//! zone about to open from ZSE or ZSC needs `open + 1 ≤ max_open`. At the open limit, the
//! controller "may transition zones in the ZSIO:Implicitly Opened state to the ZSC:Closed state
//! for resource management purposes": it closes the implicitly opened zone that has been in
//! ZSIO longest (QEMU `nvme_zrm_auto_transition_zone`, the head of its `imp_open_zones` list,
//! to which zones are appended as they enter ZSIO), and the open succeeds; with every open
//! zone explicitly opened it is *Too Many Open Zones*. The oldest is QEMU's choice (it
//! emulates an NVMe controller) and needs no clock; null_blk's `null_close_imp_open_zone`
//! instead goes round the zone numbers from the one after the zone it closed last. Active is
//! checked first, and nothing is closed when the command fails anyway (QEMU closes the zone
//! before its active check; null_blk's `null_check_open` only after it, as here). Checking
//! active first gives the spec's status in both of its cases: when MAR = MOR, a zone in ZSC
//! exists only while an open resource is free, so only Too Many Active can arise.
//!
//! **Zone Append** (§3.4.1): the ZSLBA must be a zone's first LBA (else *Invalid Field*), the
//! block count at most the Zone Append Size Limit (ZASL, Identify Controller §4.1.5.2; QEMU:
//! *Invalid Field*); the controller writes at the WP, with the checks of a write, and returns
//! the LBA it wrote at (ALBA). As in QEMU, the namespace bounds are checked on
//! `[ZSLBA, ZSLBA + NLB)`, the command's own fields.
//!
//! **Reads** (§2.1.1.2.1.2): a zone in ZSO is *Zone Is Offline*; a range in more than one zone
//! is *Zone Boundary Error* unless the namespace has Read Across Zone Boundaries, when every
//! zone it touches must not be offline (QEMU `nvme_check_zone_read`). Reads below or beyond the
//! WP, up to the zone size, are allowed: unwritten blocks read as deallocated.
//!
//! **Zone Management Send** (§3.4.3.1; ZSA codes 1h Close, 2h Finish, 3h Open, 4h Reset,
//! 5h Offline). Without Select All the SLBA must be a zone's first LBA (else *Invalid Field*;
//! past the namespace, *LBA Out of Range* as QEMU's `nvme_get_mgmt_zone_slba_idx`):
//!
//! | action | transitions | no change | anything else |
//! |---|---|---|---|
//! | Open | ZSE, ZSIO, ZSC → ZSEO (resources as above; ZSIO needs none) | ZSEO | Invalid Zone State Transition |
//! | Close | ZSIO, ZSEO → ZSC | ZSC | Invalid Zone State Transition |
//! | Finish | ZSE, ZSIO, ZSEO, ZSC → ZSF | ZSF | Invalid Zone State Transition |
//! | Reset | ZSIO, ZSEO, ZSC, ZSF → ZSE, WP = ZSLBA | ZSE | Invalid Zone State Transition |
//! | Offline | ZSRO → ZSO | ZSO | Invalid Zone State Transition |
//!
//! With Select All the SLBA is ignored and the action applies to every zone in the states it
//! lists for Select All — Open: ZSC; Close: ZSIO, ZSEO; Finish: ZSIO, ZSEO, ZSC (not ZSE);
//! Reset: ZSIO, ZSEO, ZSC, ZSF; Offline: ZSRO — in zone order; it cannot fail, except Open,
//! which needs an open resource per closed zone: "no zone state transition shall occur" when
//! they are lacking (§3.4.3.1.3). Open All may close the implicitly opened zones that have
//! been open longest, as a single Open may; the zones it closes are not opened by it (it
//! opens the zones that were in ZSC when it began). Close leaves a zone whose WP is at its
//! ZSLBA in ZSC, still active: the ZNS transition ZSEO→ZSC has no condition on the WP
//! (§2.1.1.3.3), a ZSC zone with its WP at the start is legal (Set Zone Descriptor Extension
//! makes one, §2.1.1.3.1), and QEMU's `nvme_zrm_close` does so; null_blk's `__null_close_zone`
//! instead makes such a zone Empty, which is ZBC's rule (a SCSI zone condition), not ZNS's.
//! Finish leaves the WP where writing stopped (QEMU's `w_ptr`; null_blk moves it to the zone's
//! end): the spec calls it invalid in ZSF, and it tells the drive how much the zone holds. Every
//! command that fails changes nothing.
//!
//! **Zone Management Receive, Report Zones** (§3.4.2): the zone descriptors (type —
//! Sequential Write Required, the only type ZNS has —, state, capacity, ZSLBA, WP) of the zone
//! holding the SLBA and those after it, in zone order, that match the reporting option (0h all;
//! 1h–7h one state each). Without Partial Report the Number of Zones counts every match; with
//! it, only the descriptors returned. ZBC's "not write pointer" option (3Fh) has no ZNS
//! counterpart (reserved): every ZNS zone has a write pointer. The WP of a zone in ZSF, ZSRO or
//! ZSO is invalid (Figure 4): reported as `None` (QEMU reports all ones).
//!
//! Media failures, outside the spec's commands, move any zone not offline to ZSRO or ZSO
//! (§2.1.1.3), releasing its resources. Each zone counts, for the drive's report, the Resets
//! that emptied it, the Finishes that filled it and the times the controller closed it.
//!
//! # Worked example
//! 8 zones of 1000 LBAs, capacity 800, `max_open` 2, `max_active` 3:
//! - write 100 LBAs at 0: zone 0 ZSE→ZSIO, WP 100; open 1, active 1;
//! - write 50 at 1000: zone 1 ZSIO; open 2, active 2;
//! - Open zone 2 (ZSLBA 2000): active 3 ≤ 3; open is at its limit, so zone 0, in ZSIO longest,
//!   is closed (ZSC, WP 100); zone 2 ZSEO; open 2, active 3;
//! - write 1 at 3000: zone 3 would be a fourth active zone: *Too Many Active Zones* (BDh),
//!   nothing changes;
//! - write 700 at 100: zone 0 (ZSC) needs an open resource: zone 1 is closed for it; zone 0
//!   ZSIO, WP 800 = its capacity, so ZSF; open 1 (zone 2), active 2 (zones 1 and 2).
//!
//! # Parameters
//! [`ZnsConfig`]: `zones` (count), `zone_size` and `zone_capacity` (LBAs, capacity ≤ size),
//! `max_open` and `max_active` (zones; `None` for no limit — Identify Namespace's MOR and MAR
//! are these minus one, FFFFFFFFh for no limit, §4.1.5.1), `zone_append_limit` (LBAs; `None`
//! for none besides the zone's capacity). Read Across Zone Boundaries is an argument of
//! [`Zones::read_check`].
//!
//! # Sources
//! NVM Express Zoned Namespace Command Set Specification 1.1 (2021): §2.1.1.2.1 (writing and
//! reading SWR zones), §2.1.1.3 (state machine), §2.1.1.4 (resources), §3.1.2 Figure 11
//! (status codes), §3.4.1 (Zone Append), §3.4.2 (Zone Management Receive), §3.4.3 (Zone
//! Management Send), §4.1.5 (MAR, MOR, ZASL). QEMU `hw/nvme/ctrl.c` (`nvme_do_write`,
//! `nvme_check_zone_write`, `nvme_check_zone_read`, `nvme_zrm_*`, `nvme_zns_check_resources`,
//! `nvme_zone_mgmt_send`, `nvme_zone_mgmt_recv`); Linux `drivers/block/null_blk/zoned.c`
//! (`null_check_zone_resources`, `null_close_imp_open_zone`, `__null_close_zone`); status
//! values as Linux's `include/linux/nvme.h` (`NVME_SC_ZONE_*`, status code type 1).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A zone's state (ZNS §2.1.1.3); [`ZoneState::code`] is its value in a zone descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ZoneState {
    /// ZSE: nothing written, WP at ZSLBA.
    Empty,
    /// ZSIO: opened by a write or append.
    ImplicitlyOpened,
    /// ZSEO: opened by Zone Management Send's Open.
    ExplicitlyOpened,
    /// ZSC: active but not open.
    Closed,
    /// ZSF: written to its capacity, or finished.
    Full,
    /// ZSRO: readable only (a media condition).
    ReadOnly,
    /// ZSO: neither readable nor writable; final.
    Offline,
}

impl ZoneState {
    /// Every state, in descriptor-code order.
    pub const ALL: [ZoneState; 7] = [
        ZoneState::Empty,
        ZoneState::ImplicitlyOpened,
        ZoneState::ExplicitlyOpened,
        ZoneState::Closed,
        ZoneState::ReadOnly,
        ZoneState::Full,
        ZoneState::Offline,
    ];

    /// The Zone State field of a zone descriptor (ZNS Figure 37).
    pub fn code(self) -> u8 {
        match self {
            ZoneState::Empty => 0x1,
            ZoneState::ImplicitlyOpened => 0x2,
            ZoneState::ExplicitlyOpened => 0x3,
            ZoneState::Closed => 0x4,
            ZoneState::ReadOnly => 0xD,
            ZoneState::Full => 0xE,
            ZoneState::Offline => 0xF,
        }
    }

    /// The spec's name, `ZSE:Empty` and so on.
    pub fn name(self) -> &'static str {
        match self {
            ZoneState::Empty => "ZSE:Empty",
            ZoneState::ImplicitlyOpened => "ZSIO:Implicitly Opened",
            ZoneState::ExplicitlyOpened => "ZSEO:Explicitly Opened",
            ZoneState::Closed => "ZSC:Closed",
            ZoneState::Full => "ZSF:Full",
            ZoneState::ReadOnly => "ZSRO:Read Only",
            ZoneState::Offline => "ZSO:Offline",
        }
    }

    /// Holds an open resource (ZSIO, ZSEO).
    pub fn is_open(self) -> bool {
        matches!(self, ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened)
    }

    /// Holds an active resource (ZSIO, ZSEO, ZSC).
    pub fn is_active(self) -> bool {
        self.is_open() || self == ZoneState::Closed
    }

    /// Its write pointer is valid (ZNS Figure 4): ZSE, ZSIO, ZSEO, ZSC.
    pub fn has_valid_write_pointer(self) -> bool {
        self == ZoneState::Empty || self.is_active()
    }
}

impl fmt::Display for ZoneState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a zoned command failed: the NVMe status a drive completes it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ZnsStatus {
    /// Generic 02h, Invalid Field in Command: e.g. an SLBA that is not a zone's first LBA, a
    /// zero block count, a Zone Append over the size limit.
    InvalidField,
    /// Generic 80h, LBA Out of Range: the range goes past the namespace.
    LbaOutOfRange,
    /// B8h, Zone Boundary Error: a write past the zone's capacity, or a read in more than one
    /// zone without Read Across Zone Boundaries.
    ZoneBoundaryError,
    /// B9h, Zone Is Full: a write to a zone in ZSF.
    ZoneIsFull,
    /// BAh, Zone Is Read Only: a write to a zone in ZSRO.
    ZoneIsReadOnly,
    /// BBh, Zone Is Offline: any access to a zone in ZSO.
    ZoneIsOffline,
    /// BCh, Zone Invalid Write: a write not at the zone's write pointer.
    ZoneInvalidWrite,
    /// BDh, Too Many Active Zones.
    TooManyActiveZones,
    /// BEh, Too Many Open Zones.
    TooManyOpenZones,
    /// BFh, Invalid Zone State Transition: a Zone Management Send action the zone's state
    /// does not accept.
    InvalidZoneStateTransition,
}

impl ZnsStatus {
    /// Status Code Type: 0 generic, 1 command specific.
    pub fn status_code_type(self) -> u8 {
        match self {
            ZnsStatus::InvalidField | ZnsStatus::LbaOutOfRange => 0,
            _ => 1,
        }
    }

    /// Status Code (ZNS Figure 11; NVMe Base for the generic ones).
    pub fn status_code(self) -> u8 {
        match self {
            ZnsStatus::InvalidField => 0x02,
            ZnsStatus::LbaOutOfRange => 0x80,
            ZnsStatus::ZoneBoundaryError => 0xB8,
            ZnsStatus::ZoneIsFull => 0xB9,
            ZnsStatus::ZoneIsReadOnly => 0xBA,
            ZnsStatus::ZoneIsOffline => 0xBB,
            ZnsStatus::ZoneInvalidWrite => 0xBC,
            ZnsStatus::TooManyActiveZones => 0xBD,
            ZnsStatus::TooManyOpenZones => 0xBE,
            ZnsStatus::InvalidZoneStateTransition => 0xBF,
        }
    }

    /// Type and code as Linux's `nvme.h` writes them, `SCT << 8 | SC`: 0x1b8 for Zone
    /// Boundary Error, 0x80 for LBA Out of Range.
    pub fn code(self) -> u16 {
        u16::from(self.status_code_type()) << 8 | u16::from(self.status_code())
    }

    /// The errno Linux completes the request with (what fio reports as a job's `error`):
    /// `nvme_error_status` (drivers/nvme/host/core.c) turns the open and active resource
    /// statuses into `BLK_STS_ZONE_OPEN_RESOURCE` and `BLK_STS_ZONE_ACTIVE_RESOURCE`, Invalid
    /// Field into `BLK_STS_NOTSUPP`, LBA Out of Range into `BLK_STS_TARGET`, and every other
    /// zone status into `BLK_STS_IOERR`; `blk_status_to_errno` (block/blk-core.c) gives
    /// ETOOMANYREFS (109), EOVERFLOW (75), EOPNOTSUPP (95), EREMOTEIO (121) and EIO (5).
    pub fn linux_errno(self) -> i32 {
        match self {
            ZnsStatus::TooManyOpenZones => 109,
            ZnsStatus::TooManyActiveZones => 75,
            ZnsStatus::InvalidField => 95,
            ZnsStatus::LbaOutOfRange => 121,
            _ => 5,
        }
    }

    /// The spec's name.
    pub fn name(self) -> &'static str {
        match self {
            ZnsStatus::InvalidField => "Invalid Field in Command",
            ZnsStatus::LbaOutOfRange => "LBA Out of Range",
            ZnsStatus::ZoneBoundaryError => "Zone Boundary Error",
            ZnsStatus::ZoneIsFull => "Zone Is Full",
            ZnsStatus::ZoneIsReadOnly => "Zone Is Read Only",
            ZnsStatus::ZoneIsOffline => "Zone Is Offline",
            ZnsStatus::ZoneInvalidWrite => "Zone Invalid Write",
            ZnsStatus::TooManyActiveZones => "Too Many Active Zones",
            ZnsStatus::TooManyOpenZones => "Too Many Open Zones",
            ZnsStatus::InvalidZoneStateTransition => "Invalid Zone State Transition",
        }
    }
}

impl fmt::Display for ZnsStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:02X}h)", self.name(), self.status_code())
    }
}

impl std::error::Error for ZnsStatus {}

/// A Zone Management Send action (its Zone Send Action code: [`ZoneAction::code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ZoneAction {
    /// 03h: to ZSEO.
    Open,
    /// 01h: to ZSC.
    Close,
    /// 02h: to ZSF.
    Finish,
    /// 04h: to ZSE, write pointer to ZSLBA.
    Reset,
    /// 05h: ZSRO to ZSO.
    Offline,
}

impl ZoneAction {
    /// Every action.
    pub const ALL: [ZoneAction; 5] =
        [ZoneAction::Open, ZoneAction::Close, ZoneAction::Finish, ZoneAction::Reset, ZoneAction::Offline];

    /// The Zone Send Action field (ZNS Figure 39).
    pub fn code(self) -> u8 {
        match self {
            ZoneAction::Close => 0x01,
            ZoneAction::Finish => 0x02,
            ZoneAction::Open => 0x03,
            ZoneAction::Reset => 0x04,
            ZoneAction::Offline => 0x05,
        }
    }
}

/// A zone descriptor's Zone Type: ZNS defines one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneType {
    /// 2h: written sequentially at the write pointer.
    SequentialWriteRequired,
}

impl ZoneType {
    /// The Zone Type field (ZNS Figure 37).
    pub fn code(self) -> u8 {
        0x2
    }
}

/// How the namespace is divided into zones. LBAs are the namespace's logical blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneGeometry {
    /// Number of zones.
    pub zones: u32,
    /// LBAs per zone (Identify's ZSZE); zone `i` starts at `i × zone_size`.
    pub zone_size: u64,
    /// Writable LBAs at the start of each zone (the descriptor's ZCAP), at most `zone_size`.
    pub zone_capacity: u64,
}

impl ZoneGeometry {
    /// LBAs in the namespace (`zones × zone_size`); `None` if that overflows.
    pub fn namespace_lbas(&self) -> Option<u64> {
        u64::from(self.zones).checked_mul(self.zone_size)
    }
}

/// A zoned namespace's parameters (`[device.zns]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZnsConfig {
    /// Zone count, size and capacity.
    pub geometry: ZoneGeometry,
    /// Most zones open at once (ZSIO + ZSEO); `None` for no limit. MOR + 1.
    pub max_open: Option<u32>,
    /// Most zones active at once (ZSIO + ZSEO + ZSC); `None` for no limit. MAR + 1.
    pub max_active: Option<u32>,
    /// Most LBAs a Zone Append may write (ZASL, in LBAs); `None` for no limit but the zone's.
    pub zone_append_limit: Option<u64>,
}

impl ZnsConfig {
    /// Checks the parameters; the error names the key (`device.zns.*`) and what was expected.
    pub fn validate(&self) -> Result<(), String> {
        let g = &self.geometry;
        if g.zones == 0 {
            return Err("device.zns.zones: must be at least 1".into());
        }
        if g.zone_size == 0 {
            return Err("device.zns.zone_size: must be at least 1 LBA".into());
        }
        if g.zone_capacity == 0 || g.zone_capacity > g.zone_size {
            return Err(format!(
                "device.zns.zone_capacity: {} LBAs with zone_size = {} LBAs: expected 1 <= zone_capacity <= zone_size",
                g.zone_capacity, g.zone_size
            ));
        }
        if g.namespace_lbas().is_none() {
            return Err(format!(
                "device.zns.zones: {} zones of {} LBAs overflow a 64-bit LBA: expected fewer or smaller zones",
                g.zones, g.zone_size
            ));
        }
        if self.max_open == Some(0) {
            return Err("device.zns.max_open: must be at least 1 zone, or absent for no limit".into());
        }
        if self.max_active == Some(0) {
            return Err("device.zns.max_active: must be at least 1 zone, or absent for no limit".into());
        }
        if let Some(active) = self.max_active {
            match self.max_open {
                None => {
                    return Err(format!(
                        "device.zns.max_open: absent (no limit) while max_active = {active}: expected max_open <= max_active"
                    ))
                }
                Some(open) if open > active => {
                    return Err(format!(
                        "device.zns.max_open: {open} with max_active = {active}: expected max_open <= max_active"
                    ))
                }
                Some(_) => {}
            }
        }
        if self.zone_append_limit == Some(0) {
            return Err("device.zns.zone_append_limit: must be at least 1 LBA, or absent for no limit".into());
        }
        Ok(())
    }

    /// Identify Namespace's Maximum Open Resources: 0's based, FFFFFFFFh for no limit.
    pub fn mor(&self) -> u32 {
        self.max_open.map_or(u32::MAX, |n| n.saturating_sub(1))
    }

    /// Identify Namespace's Maximum Active Resources: 0's based, FFFFFFFFh for no limit.
    pub fn mar(&self) -> u32 {
        self.max_active.map_or(u32::MAX, |n| n.saturating_sub(1))
    }
}

/// Zone Management Receive's reporting options (the Zone Receive Action Specific field of
/// Report Zones, ZNS Figure 34).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReportFilter {
    /// 0h: every zone.
    All,
    /// 1h–7h: the zones in one state.
    State(ZoneState),
}

impl ReportFilter {
    /// The reporting option's value.
    pub fn code(self) -> u8 {
        match self {
            ReportFilter::All => 0x0,
            ReportFilter::State(s) => match s {
                ZoneState::Empty => 0x1,
                ZoneState::ImplicitlyOpened => 0x2,
                ZoneState::ExplicitlyOpened => 0x3,
                ZoneState::Closed => 0x4,
                ZoneState::Full => 0x5,
                ZoneState::ReadOnly => 0x6,
                ZoneState::Offline => 0x7,
            },
        }
    }

    /// The option with value `code`; a reserved value is Invalid Field (as QEMU's
    /// `nvme_zone_mgmt_recv`).
    pub fn from_code(code: u8) -> Result<ReportFilter, ZnsStatus> {
        Ok(match code {
            0x0 => ReportFilter::All,
            0x1 => ReportFilter::State(ZoneState::Empty),
            0x2 => ReportFilter::State(ZoneState::ImplicitlyOpened),
            0x3 => ReportFilter::State(ZoneState::ExplicitlyOpened),
            0x4 => ReportFilter::State(ZoneState::Closed),
            0x5 => ReportFilter::State(ZoneState::Full),
            0x6 => ReportFilter::State(ZoneState::ReadOnly),
            0x7 => ReportFilter::State(ZoneState::Offline),
            _ => return Err(ZnsStatus::InvalidField),
        })
    }

    /// Whether a zone in `state` is reported.
    pub fn matches(self, state: ZoneState) -> bool {
        match self {
            ReportFilter::All => true,
            ReportFilter::State(s) => s == state,
        }
    }
}

/// One zone as Report Zones describes it (ZNS Figure 37).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneDescriptor {
    /// Always Sequential Write Required.
    pub zone_type: ZoneType,
    /// The zone's state.
    pub state: ZoneState,
    /// Writable LBAs (ZCAP).
    pub capacity: u64,
    /// The zone's first LBA.
    pub zslba: u64,
    /// The write pointer; `None` where the spec calls it invalid (ZSF, ZSRO, ZSO).
    pub write_pointer: Option<u64>,
}

/// Report Zones' data: its Number of Zones and the descriptors that fitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneReport {
    /// Without Partial Report, every zone from the SLBA's on that matches; with it, the
    /// descriptors returned.
    pub nr_zones: u64,
    /// In zone order, at most the number asked for.
    pub zones: Vec<ZoneDescriptor>,
}

/// What a zone has been through, for the drive's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneCounters {
    /// Resets that emptied the zone (a Reset of an empty zone changes nothing and is not
    /// counted).
    pub resets: u64,
    /// Finish actions that made it Full (not writes that filled it, nor a Finish of a full
    /// zone).
    pub finishes: u64,
    /// Times the controller closed it (ZSIO→ZSC) to open another zone.
    pub implicit_closes: u64,
}

#[derive(Clone, Copy, Debug)]
struct Zone {
    state: ZoneState,
    /// The next LBA to write. Stays where writing stopped when the zone is finished (as
    /// QEMU's `w_ptr`), which tells the drive how much of a Full zone holds data.
    wp: u64,
    /// While in ZSIO: its key in [`Zones::implicit`].
    opened_seq: u64,
    counters: ZoneCounters,
}

/// The zones of one zoned namespace: states, write pointers and resources.
#[derive(Clone, Debug)]
pub struct Zones {
    cfg: ZnsConfig,
    /// `zones × zone_size`.
    lbas: u64,
    zone: Vec<Zone>,
    /// Zones in ZSIO or ZSEO, in zone order.
    open: BTreeSet<u32>,
    /// Zones in ZSIO, ZSEO or ZSC.
    active: u32,
    /// The zones in ZSIO, by when they entered it (a sequence number): the first is the one
    /// the controller closes when it must.
    implicit: BTreeMap<u64, u32>,
    next_seq: u64,
}

impl Zones {
    /// Every zone Empty, with its write pointer at its start. The configuration is validated.
    pub fn new(cfg: ZnsConfig) -> Result<Zones, String> {
        cfg.validate()?;
        let g = cfg.geometry;
        let lbas = g.namespace_lbas().ok_or("device.zns.zones: the namespace overflows a 64-bit LBA")?;
        let zone = (0..u64::from(g.zones))
            .map(|i| Zone {
                state: ZoneState::Empty,
                wp: i * g.zone_size,
                opened_seq: 0,
                counters: ZoneCounters::default(),
            })
            .collect();
        Ok(Zones { cfg, lbas, zone, open: BTreeSet::new(), active: 0, implicit: BTreeMap::new(), next_seq: 0 })
    }

    /// The configuration.
    pub fn config(&self) -> &ZnsConfig {
        &self.cfg
    }

    /// Number of zones.
    pub fn zone_count(&self) -> u32 {
        self.cfg.geometry.zones
    }

    /// LBAs in the namespace.
    pub fn namespace_lbas(&self) -> u64 {
        self.lbas
    }

    /// The zone holding `lba`, if it is in the namespace.
    pub fn zone_of(&self, lba: u64) -> Option<u32> {
        (lba < self.lbas).then(|| (lba / self.cfg.geometry.zone_size) as u32)
    }

    /// Zone `zone`'s first LBA (ZSLBA).
    pub fn zslba(&self, zone: u32) -> Option<u64> {
        (zone < self.zone_count()).then(|| u64::from(zone) * self.cfg.geometry.zone_size)
    }

    /// Zone `zone`'s state.
    pub fn state(&self, zone: u32) -> Option<ZoneState> {
        self.zone.get(zone as usize).map(|z| z.state)
    }

    /// Zone `zone`'s write pointer. Valid (the next LBA to write) in ZSE, ZSIO, ZSEO and ZSC;
    /// in ZSF it is where writing stopped (ZSLBA + capacity if written full, less if
    /// finished); in ZSRO and ZSO, where it was.
    pub fn write_pointer(&self, zone: u32) -> Option<u64> {
        self.zone.get(zone as usize).map(|z| z.wp)
    }

    /// Zone `zone`'s counters.
    pub fn counters(&self, zone: u32) -> Option<ZoneCounters> {
        self.zone.get(zone as usize).map(|z| z.counters)
    }

    /// Zones open now (ZSIO and ZSEO).
    pub fn open_zones(&self) -> u32 {
        self.open.len() as u32
    }

    /// The zones open now (ZSIO and ZSEO), in zone order.
    pub fn open_zone_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.open.iter().copied()
    }

    /// Zones active now (ZSIO, ZSEO and ZSC).
    pub fn active_zones(&self) -> u32 {
        self.active
    }

    /// Zones implicitly opened now (ZSIO).
    pub fn implicitly_opened_zones(&self) -> u32 {
        self.implicit.len() as u32
    }

    /// The end of zone `z`'s writable LBAs.
    fn writable_end(&self, z: usize) -> u64 {
        z as u64 * self.cfg.geometry.zone_size + self.cfg.geometry.zone_capacity
    }

    /// `[slba, slba + nlb)` is a non-empty range in the namespace.
    fn check_range(&self, slba: u64, nlb: u64) -> Result<(), ZnsStatus> {
        if nlb == 0 {
            return Err(ZnsStatus::InvalidField);
        }
        match slba.checked_add(nlb) {
            Some(end) if end <= self.lbas => Ok(()),
            _ => Err(ZnsStatus::LbaOutOfRange),
        }
    }

    /// Every change of state goes through here: it keeps the open and active counts and the
    /// order of implicitly opened zones.
    fn set_state(&mut self, z: usize, to: ZoneState) {
        let from = self.zone[z].state;
        if from == to {
            return;
        }
        if from.is_open() {
            self.open.remove(&(z as u32));
        }
        if from.is_active() {
            self.active -= 1;
        }
        if from == ZoneState::ImplicitlyOpened {
            self.implicit.remove(&self.zone[z].opened_seq);
        }
        if to.is_open() {
            self.open.insert(z as u32);
        }
        if to.is_active() {
            self.active += 1;
        }
        if to == ZoneState::ImplicitlyOpened {
            self.zone[z].opened_seq = self.next_seq;
            self.implicit.insert(self.next_seq, z as u32);
            self.next_seq += 1;
        }
        self.zone[z].state = to;
    }

    /// Before zone `z` (in ZSE or ZSC) opens: the active limit, then the open limit, closing
    /// the implicitly opened zone open longest if that makes room. Changes nothing on error.
    fn acquire_open(&mut self, z: usize) -> Result<(), ZnsStatus> {
        let from = self.zone[z].state;
        debug_assert!(matches!(from, ZoneState::Empty | ZoneState::Closed));
        if let Some(max) = self.cfg.max_active {
            if from == ZoneState::Empty && self.active >= max {
                return Err(ZnsStatus::TooManyActiveZones);
            }
        }
        if let Some(max) = self.cfg.max_open {
            if self.open.len() as u32 >= max {
                let Some((_, &victim)) = self.implicit.iter().next() else {
                    return Err(ZnsStatus::TooManyOpenZones);
                };
                self.close_implicitly(victim as usize);
            }
        }
        Ok(())
    }

    /// The controller closes implicitly opened zone `z` for resources (§2.1.1.4.1).
    fn close_implicitly(&mut self, z: usize) {
        self.set_state(z, ZoneState::Closed);
        self.zone[z].counters.implicit_closes += 1;
    }

    /// The states a write may go to.
    fn check_writable(&self, z: usize) -> Result<(), ZnsStatus> {
        match self.zone[z].state {
            ZoneState::Full => Err(ZnsStatus::ZoneIsFull),
            ZoneState::ReadOnly => Err(ZnsStatus::ZoneIsReadOnly),
            ZoneState::Offline => Err(ZnsStatus::ZoneIsOffline),
            _ => Ok(()),
        }
    }

    /// Writes `nlb` LBAs at zone `z`'s write pointer, whose state accepts writes.
    fn write_at_wp(&mut self, z: usize, nlb: u64) -> Result<(), ZnsStatus> {
        let end = self.writable_end(z);
        let wp = self.zone[z].wp;
        if nlb > end - wp {
            return Err(ZnsStatus::ZoneBoundaryError);
        }
        if matches!(self.zone[z].state, ZoneState::Empty | ZoneState::Closed) {
            self.acquire_open(z)?;
            self.set_state(z, ZoneState::ImplicitlyOpened);
        }
        self.zone[z].wp = wp + nlb;
        if self.zone[z].wp == end {
            self.set_state(z, ZoneState::Full);
        }
        Ok(())
    }

    /// A Write (or any address-specific write) of `nlb` LBAs at `slba`.
    pub fn write(&mut self, slba: u64, nlb: u64) -> Result<(), ZnsStatus> {
        self.check_range(slba, nlb)?;
        let z = (slba / self.cfg.geometry.zone_size) as usize;
        self.check_writable(z)?;
        if slba != self.zone[z].wp {
            return Err(ZnsStatus::ZoneInvalidWrite);
        }
        self.write_at_wp(z, nlb)
    }

    /// A Zone Append of `nlb` LBAs to the zone starting at `zslba`: returns the LBA the
    /// controller wrote them at (ALBA).
    pub fn append(&mut self, zslba: u64, nlb: u64) -> Result<u64, ZnsStatus> {
        self.check_range(zslba, nlb)?;
        if zslba % self.cfg.geometry.zone_size != 0 {
            return Err(ZnsStatus::InvalidField);
        }
        if self.cfg.zone_append_limit.is_some_and(|limit| nlb > limit) {
            return Err(ZnsStatus::InvalidField);
        }
        let z = (zslba / self.cfg.geometry.zone_size) as usize;
        self.check_writable(z)?;
        let alba = self.zone[z].wp;
        self.write_at_wp(z, nlb)?;
        Ok(alba)
    }

    /// Whether a Read (or Compare, Verify) of `nlb` LBAs at `slba` may proceed;
    /// `cross_boundaries` is the namespace's Read Across Zone Boundaries.
    pub fn read_check(&self, slba: u64, nlb: u64, cross_boundaries: bool) -> Result<(), ZnsStatus> {
        self.check_range(slba, nlb)?;
        let size = self.cfg.geometry.zone_size;
        let first = slba / size;
        let last = (slba + nlb - 1) / size;
        if self.zone[first as usize].state == ZoneState::Offline {
            return Err(ZnsStatus::ZoneIsOffline);
        }
        if last != first {
            if !cross_boundaries {
                return Err(ZnsStatus::ZoneBoundaryError);
            }
            if self.zone[first as usize + 1..=last as usize].iter().any(|z| z.state == ZoneState::Offline) {
                return Err(ZnsStatus::ZoneIsOffline);
            }
        }
        Ok(())
    }

    /// A Zone Management Send: `action` on the zone starting at `zslba`, or, with
    /// `select_all`, on every zone in the states that action selects (`zslba` ignored).
    /// Returns how many zones it changed the state of (not counting zones the controller
    /// closed to make room).
    pub fn manage(&mut self, zslba: u64, action: ZoneAction, select_all: bool) -> Result<u32, ZnsStatus> {
        if select_all {
            return self.manage_all(action);
        }
        if zslba >= self.lbas {
            return Err(ZnsStatus::LbaOutOfRange);
        }
        if zslba % self.cfg.geometry.zone_size != 0 {
            return Err(ZnsStatus::InvalidField);
        }
        let z = (zslba / self.cfg.geometry.zone_size) as usize;
        use ZoneState::*;
        let state = self.zone[z].state;
        let to = match (action, state) {
            (ZoneAction::Open, ExplicitlyOpened)
            | (ZoneAction::Close, Closed)
            | (ZoneAction::Finish, Full)
            | (ZoneAction::Reset, Empty)
            | (ZoneAction::Offline, Offline) => return Ok(0),
            (ZoneAction::Open, Empty | Closed) => {
                self.acquire_open(z)?;
                ExplicitlyOpened
            }
            (ZoneAction::Open, ImplicitlyOpened) => ExplicitlyOpened,
            (ZoneAction::Close, ImplicitlyOpened | ExplicitlyOpened) => Closed,
            (ZoneAction::Finish, Empty | ImplicitlyOpened | ExplicitlyOpened | Closed) => Full,
            (ZoneAction::Reset, ImplicitlyOpened | ExplicitlyOpened | Closed | Full) => Empty,
            (ZoneAction::Offline, ReadOnly) => Offline,
            _ => return Err(ZnsStatus::InvalidZoneStateTransition),
        };
        self.apply(z, action, to);
        Ok(1)
    }

    /// Moves zone `z` to `to` for `action`, with the write pointer and counters.
    fn apply(&mut self, z: usize, action: ZoneAction, to: ZoneState) {
        self.set_state(z, to);
        match action {
            ZoneAction::Reset => {
                self.zone[z].wp = z as u64 * self.cfg.geometry.zone_size;
                self.zone[z].counters.resets += 1;
            }
            ZoneAction::Finish => self.zone[z].counters.finishes += 1,
            _ => {}
        }
    }

    /// Select All: the states each action selects (§3.4.3.1), in zone order.
    fn manage_all(&mut self, action: ZoneAction) -> Result<u32, ZnsStatus> {
        use ZoneState::*;
        let (selects, to): (fn(ZoneState) -> bool, ZoneState) = match action {
            ZoneAction::Open => (|s| s == Closed, ExplicitlyOpened),
            ZoneAction::Close => (ZoneState::is_open, Closed),
            ZoneAction::Finish => (ZoneState::is_active, Full),
            ZoneAction::Reset => (|s| s.is_active() || s == Full, Empty),
            ZoneAction::Offline => (|s| s == ReadOnly, Offline),
        };
        let chosen: Vec<usize> = (0..self.zone.len()).filter(|&z| selects(self.zone[z].state)).collect();
        if action == ZoneAction::Open {
            // All or nothing: one open resource per closed zone, making room as a single Open
            // would (the zones closed for it are not among those it opens).
            if let Some(max) = self.cfg.max_open {
                let need = self.open.len() as u64 + chosen.len() as u64;
                let excess = need.saturating_sub(u64::from(max));
                if excess > self.implicit.len() as u64 {
                    return Err(ZnsStatus::TooManyOpenZones);
                }
                for _ in 0..excess {
                    let Some((_, &victim)) = self.implicit.iter().next() else { break };
                    self.close_implicitly(victim as usize);
                }
            }
        }
        for &z in &chosen {
            self.apply(z, action, to);
        }
        Ok(chosen.len() as u32)
    }

    /// The media turns zone `zone` read only or offline (`to` is [`ZoneState::ReadOnly`] or
    /// [`ZoneState::Offline`]), a transition outside the spec's commands (§2.1.1.3); its
    /// resources are released. An offline zone stays offline (Invalid Zone State Transition
    /// if asked to be read only); a bad zone or target state is Invalid Field.
    pub fn fail_zone(&mut self, zone: u32, to: ZoneState) -> Result<(), ZnsStatus> {
        if !matches!(to, ZoneState::ReadOnly | ZoneState::Offline) {
            return Err(ZnsStatus::InvalidField);
        }
        let z = zone as usize;
        let Some(from) = self.zone.get(z).map(|z| z.state) else { return Err(ZnsStatus::InvalidField) };
        if from == ZoneState::Offline && to == ZoneState::ReadOnly {
            return Err(ZnsStatus::InvalidZoneStateTransition);
        }
        self.set_state(z, to);
        Ok(())
    }

    /// Zone Management Receive, Report Zones: the descriptors of the zone holding `slba` and
    /// the zones after it that match `filter`, at most `max` of them (what fits in the host's
    /// buffer). `partial` is the Partial Report bit.
    pub fn report(&self, slba: u64, filter: ReportFilter, max: usize, partial: bool) -> Result<ZoneReport, ZnsStatus> {
        if slba >= self.lbas {
            return Err(ZnsStatus::LbaOutOfRange);
        }
        let first = (slba / self.cfg.geometry.zone_size) as usize;
        let mut matching = (first..self.zone.len()).filter(|&z| filter.matches(self.zone[z].state));
        let zones: Vec<ZoneDescriptor> = matching.by_ref().take(max).map(|z| self.descriptor(z)).collect();
        let nr_zones = if partial { zones.len() as u64 } else { zones.len() as u64 + matching.count() as u64 };
        Ok(ZoneReport { nr_zones, zones })
    }

    fn descriptor(&self, z: usize) -> ZoneDescriptor {
        let zone = &self.zone[z];
        ZoneDescriptor {
            zone_type: ZoneType::SequentialWriteRequired,
            state: zone.state,
            capacity: self.cfg.geometry.zone_capacity,
            zslba: z as u64 * self.cfg.geometry.zone_size,
            write_pointer: zone.state.has_valid_write_pointer().then_some(zone.wp),
        }
    }

    /// Checks the incremental counts against the zones themselves; panics on a mismatch.
    pub fn check_invariants(&self) {
        let open: BTreeSet<u32> = (0..self.zone_count()).filter(|&z| self.zone[z as usize].state.is_open()).collect();
        let active = self.zone.iter().filter(|z| z.state.is_active()).count() as u32;
        assert_eq!(open, self.open, "open zones out of step");
        assert_eq!(active, self.active, "active zone count out of step");
        assert!(self.cfg.max_open.is_none_or(|m| self.open_zones() <= m), "more zones open than max_open");
        assert!(self.cfg.max_active.is_none_or(|m| self.active <= m), "more zones active than max_active");
        let implicit = self.zone.iter().filter(|z| z.state == ZoneState::ImplicitlyOpened).count();
        assert_eq!(implicit, self.implicit.len(), "implicitly opened zones out of step");
        for (&seq, &z) in &self.implicit {
            let zone = &self.zone[z as usize];
            assert!(
                zone.state == ZoneState::ImplicitlyOpened && zone.opened_seq == seq,
                "zone {z} misfiled as implicitly opened"
            );
        }
        for (z, zone) in self.zone.iter().enumerate() {
            let start = z as u64 * self.cfg.geometry.zone_size;
            assert!(
                zone.wp >= start && zone.wp <= self.writable_end(z),
                "zone {z}: write pointer {} outside the zone",
                zone.wp
            );
            if zone.state == ZoneState::Empty {
                assert_eq!(zone.wp, start, "zone {z}: empty with its write pointer past its start");
            }
            if zone.state.is_active() {
                assert!(zone.wp < self.writable_end(z), "zone {z}: active with no room left");
            }
        }
    }
}

#[cfg(test)]
mod tests;
