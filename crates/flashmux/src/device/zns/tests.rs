//! The zone state machine: one worked example per rule, and a property test of random command
//! sequences against a separately written reference model.

use super::*;
use proptest::prelude::*;
use ZoneState::{Closed, Empty, ExplicitlyOpened, Full, ImplicitlyOpened, Offline, ReadOnly};

fn config(zones: u32, size: u64, cap: u64, max_open: Option<u32>, max_active: Option<u32>) -> ZnsConfig {
    ZnsConfig {
        geometry: ZoneGeometry { zones, zone_size: size, zone_capacity: cap },
        max_open,
        max_active,
        zone_append_limit: None,
    }
}

fn zones(zones: u32, size: u64, cap: u64, max_open: Option<u32>, max_active: Option<u32>) -> Zones {
    Zones::new(config(zones, size, cap, max_open, max_active)).unwrap()
}

fn states(z: &Zones) -> Vec<ZoneState> {
    (0..z.zone_count()).map(|i| z.state(i).unwrap()).collect()
}

/// Everything observable, to show that a failed command changed nothing.
fn snapshot(z: &Zones) -> Vec<(ZoneState, u64, ZoneCounters)> {
    (0..z.zone_count()).map(|i| (z.state(i).unwrap(), z.write_pointer(i).unwrap(), z.counters(i).unwrap())).collect()
}

// ---------------------------------------------------------------------------------------------
// The rules, one example each.

#[test]
fn status_codes_are_the_specs() {
    let codes = [
        (ZnsStatus::InvalidField, 0x002),
        (ZnsStatus::LbaOutOfRange, 0x080),
        (ZnsStatus::ZoneBoundaryError, 0x1b8),
        (ZnsStatus::ZoneIsFull, 0x1b9),
        (ZnsStatus::ZoneIsReadOnly, 0x1ba),
        (ZnsStatus::ZoneIsOffline, 0x1bb),
        (ZnsStatus::ZoneInvalidWrite, 0x1bc),
        (ZnsStatus::TooManyActiveZones, 0x1bd),
        (ZnsStatus::TooManyOpenZones, 0x1be),
        (ZnsStatus::InvalidZoneStateTransition, 0x1bf),
    ];
    for (status, code) in codes {
        assert_eq!(status.code(), code, "{status}");
    }
    assert_eq!(ZnsStatus::ZoneIsFull.to_string(), "Zone Is Full (B9h)");
    let state_codes: Vec<u8> = ZoneState::ALL.iter().map(|s| s.code()).collect();
    assert_eq!(state_codes, [0x1, 0x2, 0x3, 0x4, 0xD, 0xE, 0xF]);
    let actions: Vec<u8> = ZoneAction::ALL.iter().map(|a| a.code()).collect();
    assert_eq!(actions, [0x03, 0x01, 0x02, 0x04, 0x05]);
}

#[test]
fn mor_and_mar_are_zeroes_based() {
    let c = config(8, 16, 16, Some(2), Some(3));
    assert_eq!((c.mor(), c.mar()), (1, 2));
    let c = config(8, 16, 16, None, None);
    assert_eq!((c.mor(), c.mar()), (0xFFFF_FFFF, 0xFFFF_FFFF));
}

#[test]
fn validate_names_the_key_and_what_was_expected() {
    let err = |c: ZnsConfig| c.validate().unwrap_err();
    assert!(err(config(0, 16, 16, None, None)).starts_with("device.zns.zones: must be at least 1"));
    assert!(err(config(4, 0, 0, None, None)).starts_with("device.zns.zone_size:"));
    let e = err(config(4, 16, 17, None, None));
    assert!(
        e.starts_with("device.zns.zone_capacity: 17 LBAs") && e.contains("expected 1 <= zone_capacity <= zone_size"),
        "{e}"
    );
    assert!(err(config(4, 16, 0, None, None)).starts_with("device.zns.zone_capacity:"));
    assert!(err(config(u32::MAX, u64::MAX / 2, 1, None, None)).contains("overflow"));
    assert!(err(config(4, 16, 16, Some(0), None)).starts_with("device.zns.max_open: must be at least 1"));
    assert!(err(config(4, 16, 16, Some(1), Some(0))).starts_with("device.zns.max_active: must be at least 1"));
    let e = err(config(4, 16, 16, Some(3), Some(2)));
    assert!(
        e.starts_with("device.zns.max_open: 3 with max_active = 2") && e.contains("expected max_open <= max_active"),
        "{e}"
    );
    assert!(err(config(4, 16, 16, None, Some(2))).starts_with("device.zns.max_open: absent"));
    let mut c = config(4, 16, 16, None, None);
    c.zone_append_limit = Some(0);
    assert!(err(c).starts_with("device.zns.zone_append_limit:"));
    assert!(Zones::new(config(4, 16, 0, None, None)).is_err());
    // Fine: equal limits, open only, limits above the zone count.
    for c in [config(4, 16, 8, Some(2), Some(2)), config(4, 16, 16, Some(2), None), config(4, 16, 16, Some(9), Some(9))]
    {
        assert_eq!(c.validate(), Ok(()));
    }
}

#[test]
fn worked_example_of_the_header() {
    let mut z = zones(8, 1000, 800, Some(2), Some(3));
    z.write(0, 100).unwrap();
    assert_eq!(
        (z.state(0), z.write_pointer(0), z.open_zones(), z.active_zones()),
        (Some(ImplicitlyOpened), Some(100), 1, 1)
    );
    z.write(1000, 50).unwrap();
    assert_eq!((z.open_zones(), z.active_zones()), (2, 2));
    assert_eq!(z.manage(2000, ZoneAction::Open, false), Ok(1));
    assert_eq!(states(&z)[..3], [Closed, ImplicitlyOpened, ExplicitlyOpened]);
    assert_eq!((z.open_zones(), z.active_zones(), z.counters(0).unwrap().implicit_closes), (2, 3, 1));
    let before = snapshot(&z);
    assert_eq!(z.write(3000, 1), Err(ZnsStatus::TooManyActiveZones));
    assert_eq!(snapshot(&z), before);
    z.write(100, 700).unwrap();
    assert_eq!(states(&z)[..3], [Full, Closed, ExplicitlyOpened]);
    assert_eq!((z.write_pointer(0), z.open_zones(), z.active_zones()), (Some(800), 1, 2));
    z.check_invariants();
}

#[test]
fn a_write_to_an_empty_or_closed_zone_opens_it_implicitly() {
    let mut z = zones(4, 100, 100, None, None);
    z.write(0, 10).unwrap();
    assert_eq!(z.state(0), Some(ImplicitlyOpened));
    assert_eq!((z.open_zones(), z.active_zones()), (1, 1));
    z.manage(0, ZoneAction::Close, false).unwrap();
    assert_eq!((z.state(0), z.open_zones(), z.active_zones()), (Some(Closed), 0, 1));
    z.write(10, 5).unwrap();
    assert_eq!(
        (z.state(0), z.write_pointer(0), z.open_zones(), z.active_zones()),
        (Some(ImplicitlyOpened), Some(15), 1, 1)
    );
    // An explicitly opened zone stays explicitly opened when written.
    z.manage(100, ZoneAction::Open, false).unwrap();
    z.write(100, 1).unwrap();
    assert_eq!(z.state(1), Some(ExplicitlyOpened));
}

#[test]
fn at_the_open_limit_the_zone_implicitly_opened_longest_ago_is_closed() {
    let mut z = zones(6, 10, 10, Some(3), None);
    // Zone 2 opened first, then 0, then 1; writing to 0 again does not make it younger.
    for lba in [20, 0, 10, 1] {
        z.write(lba, 1).unwrap();
    }
    z.write(30, 1).unwrap();
    assert_eq!(states(&z), [ImplicitlyOpened, ImplicitlyOpened, Closed, ImplicitlyOpened, Empty, Empty]);
    assert_eq!(z.counters(2).unwrap().implicit_closes, 1);
    // An explicit open makes room the same way: zone 0 goes next.
    z.manage(40, ZoneAction::Open, false).unwrap();
    assert_eq!(states(&z), [Closed, ImplicitlyOpened, Closed, ImplicitlyOpened, ExplicitlyOpened, Empty]);
    // Reopening a closed zone by writing: zone 1 is now the oldest.
    z.write(21, 1).unwrap();
    assert_eq!(states(&z), [Closed, Closed, ImplicitlyOpened, ImplicitlyOpened, ExplicitlyOpened, Empty]);
    assert_eq!((z.open_zones(), z.active_zones(), z.implicitly_opened_zones()), (3, 5, 2));
    z.check_invariants();
}

#[test]
fn too_many_open_zones_when_every_open_zone_is_explicitly_opened() {
    let mut z = zones(4, 10, 10, Some(2), None);
    z.manage(0, ZoneAction::Open, false).unwrap();
    z.manage(10, ZoneAction::Open, false).unwrap();
    let before = snapshot(&z);
    assert_eq!(z.write(20, 1), Err(ZnsStatus::TooManyOpenZones));
    assert_eq!(z.append(20, 1), Err(ZnsStatus::TooManyOpenZones));
    assert_eq!(z.manage(20, ZoneAction::Open, false), Err(ZnsStatus::TooManyOpenZones));
    assert_eq!(snapshot(&z), before);
    // Writes to the open zones need nothing more.
    z.write(0, 10).unwrap();
    z.write(20, 1).unwrap();
    assert_eq!(states(&z), [Full, ExplicitlyOpened, ImplicitlyOpened, Empty]);
}

#[test]
fn too_many_active_zones_and_closing_does_not_free_an_active_resource() {
    let mut z = zones(4, 10, 10, Some(2), Some(2));
    z.write(0, 1).unwrap();
    z.write(10, 1).unwrap();
    z.manage(0, ZoneAction::Close, false).unwrap();
    let before = snapshot(&z);
    // Two zones active (one closed, one open): a third is refused even though an open resource
    // is free, and the implicitly opened zone is not closed for it.
    assert_eq!(z.write(20, 1), Err(ZnsStatus::TooManyActiveZones));
    assert_eq!(z.manage(20, ZoneAction::Open, false), Err(ZnsStatus::TooManyActiveZones));
    assert_eq!(snapshot(&z), before);
    // Reopening the closed zone needs no active resource.
    z.write(1, 1).unwrap();
    assert_eq!((z.open_zones(), z.active_zones()), (2, 2));
    // Finishing one frees it.
    z.manage(0, ZoneAction::Finish, false).unwrap();
    z.write(20, 1).unwrap();
    assert_eq!(states(&z), [Full, ImplicitlyOpened, ImplicitlyOpened, Empty]);
}

#[test]
fn active_is_checked_before_open() {
    // MAR = MOR: both resources gone, Too Many Active Zones (ZNS §2.1.1.4.1 b).
    let mut z = zones(3, 10, 10, Some(1), Some(1));
    z.manage(0, ZoneAction::Open, false).unwrap();
    assert_eq!(z.write(10, 1), Err(ZnsStatus::TooManyActiveZones));
}

#[test]
fn zone_invalid_write_when_not_at_the_write_pointer() {
    let mut z = zones(2, 100, 100, None, None);
    z.write(0, 10).unwrap();
    let before = snapshot(&z);
    for lba in [0, 9, 11, 50] {
        assert_eq!(z.write(lba, 1), Err(ZnsStatus::ZoneInvalidWrite), "lba {lba}");
    }
    assert_eq!(z.write(101, 1), Err(ZnsStatus::ZoneInvalidWrite), "an empty zone's pointer is its start");
    assert_eq!(snapshot(&z), before);
}

#[test]
fn zone_boundary_error_past_the_capacity_or_into_the_next_zone() {
    let mut z = zones(3, 100, 80, None, None);
    z.write(0, 70).unwrap();
    let before = snapshot(&z);
    assert_eq!(z.write(70, 11), Err(ZnsStatus::ZoneBoundaryError));
    assert_eq!(z.append(0, 11), Err(ZnsStatus::ZoneBoundaryError));
    assert_eq!(z.write(100, 101), Err(ZnsStatus::ZoneBoundaryError), "crossing into zone 2");
    assert_eq!(snapshot(&z), before);
    z.write(70, 10).unwrap();
    assert_eq!(z.state(0), Some(Full));
    // Past the namespace is LBA Out of Range, whatever the zone.
    assert_eq!(z.write(200, 101), Err(ZnsStatus::LbaOutOfRange));
    assert_eq!(z.write(u64::MAX, 2), Err(ZnsStatus::LbaOutOfRange));
    assert_eq!(z.write(0, 0), Err(ZnsStatus::InvalidField));
}

#[test]
fn a_write_reaching_the_capacity_makes_the_zone_full_and_frees_its_resources() {
    let mut z = zones(2, 16, 12, Some(1), Some(1));
    z.write(0, 12).unwrap();
    assert_eq!((z.state(0), z.write_pointer(0), z.open_zones(), z.active_zones()), (Some(Full), Some(12), 0, 0));
    // Even a write that fills a zone at once needs its resources on the way (ZSE→ZSIO→ZSF).
    let mut y = zones(2, 16, 12, Some(1), Some(1));
    y.manage(16, ZoneAction::Open, false).unwrap();
    assert_eq!(y.write(0, 12), Err(ZnsStatus::TooManyActiveZones));
}

#[test]
fn zone_is_full() {
    let mut z = zones(2, 10, 10, None, None);
    z.write(0, 10).unwrap();
    let before = snapshot(&z);
    assert_eq!(z.write(10 - 1, 1), Err(ZnsStatus::ZoneIsFull), "state is checked before the write pointer");
    assert_eq!(z.write(0, 1), Err(ZnsStatus::ZoneIsFull));
    assert_eq!(z.append(0, 1), Err(ZnsStatus::ZoneIsFull));
    assert_eq!(snapshot(&z), before);
}

#[test]
fn append_writes_at_the_write_pointer_and_returns_where() {
    let mut z = zones(3, 100, 90, None, None);
    assert_eq!(z.append(100, 8), Ok(100));
    assert_eq!(z.append(100, 8), Ok(108));
    assert_eq!(z.state(1), Some(ImplicitlyOpened));
    assert_eq!(z.write(116, 4), Ok(()));
    assert_eq!(z.append(100, 70), Ok(120));
    assert_eq!((z.state(1), z.write_pointer(1)), (Some(Full), Some(190)));
    // Not a zone start: Invalid Field; too many blocks for the namespace: LBA Out of Range.
    assert_eq!(z.append(101, 1), Err(ZnsStatus::InvalidField));
    assert_eq!(z.append(200, 101), Err(ZnsStatus::LbaOutOfRange));
    assert_eq!(z.append(0, 0), Err(ZnsStatus::InvalidField));
    // The Zone Append Size Limit.
    let mut c = config(3, 100, 90, None, None);
    c.zone_append_limit = Some(16);
    let mut z = Zones::new(c).unwrap();
    assert_eq!(z.append(0, 17), Err(ZnsStatus::InvalidField));
    assert_eq!(z.append(0, 16), Ok(0));
}

#[test]
fn finish_from_empty_and_from_closed() {
    let mut z = zones(4, 10, 8, Some(2), Some(2));
    // Empty to Full takes no resources, even with none left.
    z.write(10, 1).unwrap();
    z.write(20, 1).unwrap();
    assert_eq!(z.manage(0, ZoneAction::Finish, false), Ok(1));
    assert_eq!((z.state(0), z.open_zones(), z.active_zones()), (Some(Full), 2, 2));
    // Closed to Full releases the active resource.
    z.manage(10, ZoneAction::Close, false).unwrap();
    assert_eq!(z.manage(10, ZoneAction::Finish, false), Ok(1));
    assert_eq!((z.state(1), z.write_pointer(1), z.open_zones(), z.active_zones()), (Some(Full), Some(11), 1, 1));
    // A full zone is left as it is; it is not counted again.
    assert_eq!(z.manage(10, ZoneAction::Finish, false), Ok(0));
    assert_eq!(z.counters(1).unwrap().finishes, 1);
    // Report shows no write pointer for a full zone.
    let r = z.report(10, ReportFilter::All, 1, false).unwrap();
    assert_eq!(r.zones[0].write_pointer, None);
}

#[test]
fn reset_from_full_empties_the_zone() {
    let mut z = zones(2, 10, 10, None, None);
    z.write(10, 10).unwrap();
    assert_eq!(z.manage(10, ZoneAction::Reset, false), Ok(1));
    assert_eq!((z.state(1), z.write_pointer(1), z.counters(1).unwrap().resets), (Some(Empty), Some(10), 1));
    // Resetting an empty zone changes nothing and is not counted.
    assert_eq!(z.manage(10, ZoneAction::Reset, false), Ok(0));
    assert_eq!(z.counters(1).unwrap().resets, 1);
    // Reset of an open zone releases both resources.
    z.write(0, 3).unwrap();
    z.manage(0, ZoneAction::Reset, false).unwrap();
    assert_eq!((z.open_zones(), z.active_zones(), z.write_pointer(0)), (0, 0, Some(0)));
    z.write(0, 1).unwrap();
}

#[test]
fn close_leaves_a_zone_at_its_start_closed_and_active() {
    // ZNS §2.1.1.3.3 and QEMU's nvme_zrm_close: ZSEO→ZSC whatever the write pointer (null_blk,
    // following ZBC, would make it Empty).
    let mut z = zones(2, 10, 10, None, None);
    z.manage(0, ZoneAction::Open, false).unwrap();
    assert_eq!(z.manage(0, ZoneAction::Close, false), Ok(1));
    assert_eq!((z.state(0), z.write_pointer(0), z.open_zones(), z.active_zones()), (Some(Closed), Some(0), 0, 1));
    assert_eq!(z.manage(0, ZoneAction::Close, false), Ok(0), "closing a closed zone changes nothing");
    // Close of an empty or full zone is an invalid transition.
    assert_eq!(z.manage(10, ZoneAction::Close, false), Err(ZnsStatus::InvalidZoneStateTransition));
    z.write(10, 10).unwrap();
    assert_eq!(z.manage(10, ZoneAction::Close, false), Err(ZnsStatus::InvalidZoneStateTransition));
}

#[test]
fn open_accepts_empty_implicitly_opened_and_closed_zones() {
    let mut z = zones(4, 10, 10, Some(3), Some(3));
    z.write(0, 1).unwrap();
    assert_eq!(z.manage(0, ZoneAction::Open, false), Ok(1));
    assert_eq!((z.state(0), z.open_zones(), z.active_zones()), (Some(ExplicitlyOpened), 1, 1));
    assert_eq!(z.manage(0, ZoneAction::Open, false), Ok(0));
    z.manage(0, ZoneAction::Close, false).unwrap();
    assert_eq!(z.manage(0, ZoneAction::Open, false), Ok(1));
    assert_eq!(z.manage(10, ZoneAction::Open, false), Ok(1));
    z.write(20, 10).unwrap();
    assert_eq!(z.manage(20, ZoneAction::Open, false), Err(ZnsStatus::InvalidZoneStateTransition));
}

#[test]
fn read_only_and_offline_zones() {
    let mut z = zones(4, 10, 10, Some(2), Some(2));
    z.write(0, 4).unwrap();
    z.write(10, 4).unwrap();
    // The media makes zone 0 read only: its resources are released.
    z.fail_zone(0, ReadOnly).unwrap();
    assert_eq!((z.open_zones(), z.active_zones()), (1, 1));
    assert_eq!(z.write(4, 1), Err(ZnsStatus::ZoneIsReadOnly));
    assert_eq!(z.append(0, 1), Err(ZnsStatus::ZoneIsReadOnly));
    assert_eq!(z.read_check(0, 10, false), Ok(()), "a read-only zone reads");
    for action in [ZoneAction::Open, ZoneAction::Close, ZoneAction::Finish, ZoneAction::Reset] {
        assert_eq!(z.manage(0, action, false), Err(ZnsStatus::InvalidZoneStateTransition), "{action:?}");
    }
    assert_eq!(z.manage(10, ZoneAction::Offline, false), Err(ZnsStatus::InvalidZoneStateTransition));
    assert_eq!(z.manage(0, ZoneAction::Offline, false), Ok(1));
    assert_eq!(z.manage(0, ZoneAction::Offline, false), Ok(0));
    assert_eq!(z.read_check(0, 1, false), Err(ZnsStatus::ZoneIsOffline));
    assert_eq!(z.write(4, 1), Err(ZnsStatus::ZoneIsOffline));
    assert_eq!(z.append(0, 1), Err(ZnsStatus::ZoneIsOffline));
    assert_eq!(z.manage(0, ZoneAction::Reset, false), Err(ZnsStatus::InvalidZoneStateTransition));
    // Nothing leaves ZSO.
    assert_eq!(z.fail_zone(0, ReadOnly), Err(ZnsStatus::InvalidZoneStateTransition));
    assert_eq!(z.fail_zone(0, Offline), Ok(()));
    assert_eq!(z.fail_zone(9, Offline), Err(ZnsStatus::InvalidField));
    assert_eq!(z.fail_zone(1, Closed), Err(ZnsStatus::InvalidField));
    // Offline All takes every read-only zone.
    z.fail_zone(2, ReadOnly).unwrap();
    z.fail_zone(3, ReadOnly).unwrap();
    assert_eq!(z.manage(0, ZoneAction::Offline, true), Ok(2));
    assert_eq!(states(&z), [Offline, ImplicitlyOpened, Offline, Offline]);
    z.check_invariants();
}

#[test]
fn reads_anywhere_in_a_zone_but_across_zones_only_with_read_across_zone_boundaries() {
    let mut z = zones(4, 10, 6, None, None);
    z.write(0, 2).unwrap();
    assert_eq!(z.read_check(0, 10, false), Ok(()), "below and beyond the write pointer, past the capacity");
    assert_eq!(z.read_check(8, 4, false), Err(ZnsStatus::ZoneBoundaryError));
    assert_eq!(z.read_check(8, 4, true), Ok(()));
    assert_eq!(z.read_check(5, 30, true), Ok(()));
    z.fail_zone(2, Offline).unwrap();
    assert_eq!(z.read_check(5, 30, true), Err(ZnsStatus::ZoneIsOffline));
    assert_eq!(z.read_check(5, 10, true), Ok(()));
    assert_eq!(z.read_check(30, 11, true), Err(ZnsStatus::LbaOutOfRange));
    assert_eq!(z.read_check(0, 0, true), Err(ZnsStatus::InvalidField));
}

#[test]
fn select_all_affects_only_the_states_each_action_lists() {
    // Zones: 0 empty, 1 implicitly opened, 2 explicitly opened, 3 closed, 4 full, 5 read only.
    let setup = || {
        let mut z = zones(6, 10, 10, None, None);
        z.write(10, 1).unwrap();
        z.manage(20, ZoneAction::Open, false).unwrap();
        z.write(30, 1).unwrap();
        z.manage(30, ZoneAction::Close, false).unwrap();
        z.write(40, 10).unwrap();
        z.fail_zone(5, ReadOnly).unwrap();
        z
    };
    let cases = [
        (ZoneAction::Close, 2, [Empty, Closed, Closed, Closed, Full, ReadOnly]),
        (ZoneAction::Finish, 3, [Empty, Full, Full, Full, Full, ReadOnly]),
        (ZoneAction::Open, 1, [Empty, ImplicitlyOpened, ExplicitlyOpened, ExplicitlyOpened, Full, ReadOnly]),
        (ZoneAction::Reset, 4, [Empty, Empty, Empty, Empty, Empty, ReadOnly]),
        (ZoneAction::Offline, 1, [Empty, ImplicitlyOpened, ExplicitlyOpened, Closed, Full, Offline]),
    ];
    for (action, changed, expected) in cases {
        let mut z = setup();
        // The SLBA is ignored, even one past the namespace or not at a zone start.
        assert_eq!(z.manage(u64::MAX, action, true), Ok(changed), "{action:?}");
        assert_eq!(states(&z), expected, "{action:?}");
        z.check_invariants();
    }
}

#[test]
fn open_all_is_all_or_nothing_and_may_close_implicitly_opened_zones() {
    // Two closed zones; zones 2 and 3 open, one of them implicitly.
    let setup = |max_open| {
        let mut z = zones(5, 10, 10, Some(max_open), None);
        for lba in [0, 10] {
            z.write(lba, 1).unwrap();
            z.manage(lba, ZoneAction::Close, false).unwrap();
        }
        z.manage(20, ZoneAction::Open, false).unwrap();
        z.write(30, 1).unwrap();
        z
    };
    // Three open resources: one implicitly opened zone to close, and it is not reopened.
    let mut z = setup(3);
    assert_eq!(z.manage(0, ZoneAction::Open, true), Ok(2));
    assert_eq!(states(&z), [ExplicitlyOpened, ExplicitlyOpened, ExplicitlyOpened, Closed, Empty]);
    assert_eq!(z.counters(3).unwrap().implicit_closes, 1);
    // Two: it would have to close two zones but only one is implicitly opened.
    let mut z = setup(2);
    let before = snapshot(&z);
    assert_eq!(z.manage(0, ZoneAction::Open, true), Err(ZnsStatus::TooManyOpenZones));
    assert_eq!(snapshot(&z), before);
}

#[test]
fn management_of_a_single_zone_needs_its_start() {
    let mut z = zones(3, 10, 10, None, None);
    let before = snapshot(&z);
    for action in ZoneAction::ALL {
        assert_eq!(z.manage(5, action, false), Err(ZnsStatus::InvalidField), "{action:?}");
        assert_eq!(z.manage(30, action, false), Err(ZnsStatus::LbaOutOfRange), "{action:?}");
    }
    assert_eq!(snapshot(&z), before);
}

#[test]
fn report_filters_and_partial_reports() {
    let mut z = zones(6, 10, 8, None, None);
    z.write(10, 3).unwrap();
    z.write(20, 8).unwrap();
    z.write(30, 2).unwrap();
    z.manage(30, ZoneAction::Close, false).unwrap();
    z.write(40, 1).unwrap();
    // States: Empty, ZSIO (wp 13), Full, Closed (wp 32), ZSIO (wp 41), Empty.
    let all = z.report(0, ReportFilter::All, 64, false).unwrap();
    assert_eq!(all.nr_zones, 6);
    assert_eq!(
        all.zones[1],
        ZoneDescriptor {
            zone_type: ZoneType::SequentialWriteRequired,
            state: ImplicitlyOpened,
            capacity: 8,
            zslba: 10,
            write_pointer: Some(13)
        }
    );
    assert_eq!(all.zones[2].write_pointer, None);
    assert_eq!(all.zones[5].write_pointer, Some(50));
    // From the zone holding the SLBA on, whatever LBA of it.
    let io = z.report(15, ReportFilter::State(ImplicitlyOpened), 64, false).unwrap();
    assert_eq!(io.zones.iter().map(|d| d.zslba).collect::<Vec<_>>(), [10, 40]);
    let io = z.report(11, ReportFilter::State(ImplicitlyOpened), 64, false).unwrap();
    assert_eq!(io.nr_zones, 2);
    assert_eq!(z.report(41, ReportFilter::State(ImplicitlyOpened), 64, false).unwrap().nr_zones, 1);
    assert_eq!(
        z.report(0, ReportFilter::State(Offline), 64, false).unwrap(),
        ZoneReport { nr_zones: 0, zones: vec![] }
    );
    // Room for two descriptors: without Partial Report the count is of every match.
    let r = z.report(0, ReportFilter::All, 2, false).unwrap();
    assert_eq!((r.nr_zones, r.zones.len()), (6, 2));
    let r = z.report(0, ReportFilter::All, 2, true).unwrap();
    assert_eq!((r.nr_zones, r.zones.len()), (2, 2));
    let r = z.report(0, ReportFilter::State(Empty), 0, false).unwrap();
    assert_eq!((r.nr_zones, r.zones.len()), (2, 0));
    assert_eq!(z.report(60, ReportFilter::All, 1, false), Err(ZnsStatus::LbaOutOfRange));
    // The reporting options' values.
    for code in 0u8..=7 {
        assert_eq!(ReportFilter::from_code(code).unwrap().code(), code);
    }
    assert_eq!(ReportFilter::from_code(8), Err(ZnsStatus::InvalidField));
    assert_eq!(ReportFilter::from_code(0x3F), Err(ZnsStatus::InvalidField));
}

// ---------------------------------------------------------------------------------------------
// The reference model: a second implementation written plainly from the same rules — counts
// by scanning every zone, the order of implicit opens in a Vec, one match per command.

struct Reference {
    size: u64,
    cap: u64,
    max_open: Option<u32>,
    max_active: Option<u32>,
    append_limit: Option<u64>,
    state: Vec<ZoneState>,
    wp: Vec<u64>,
    /// Zones in ZSIO, the one opened longest ago first.
    implicit_order: Vec<usize>,
    resets: Vec<u64>,
    finishes: Vec<u64>,
    implicit_closes: Vec<u64>,
}

impl Reference {
    fn new(c: &ZnsConfig) -> Reference {
        let n = c.geometry.zones as usize;
        Reference {
            size: c.geometry.zone_size,
            cap: c.geometry.zone_capacity,
            max_open: c.max_open,
            max_active: c.max_active,
            append_limit: c.zone_append_limit,
            state: vec![Empty; n],
            wp: (0..n as u64).map(|i| i * c.geometry.zone_size).collect(),
            implicit_order: Vec::new(),
            resets: vec![0; n],
            finishes: vec![0; n],
            implicit_closes: vec![0; n],
        }
    }

    fn total(&self) -> u128 {
        self.state.len() as u128 * self.size as u128
    }

    fn open_count(&self) -> u32 {
        self.state.iter().filter(|s| matches!(s, ImplicitlyOpened | ExplicitlyOpened)).count() as u32
    }

    fn active_count(&self) -> u32 {
        self.state.iter().filter(|s| matches!(s, ImplicitlyOpened | ExplicitlyOpened | Closed)).count() as u32
    }

    fn go(&mut self, z: usize, to: ZoneState) {
        if self.state[z] == to {
            return;
        }
        self.implicit_order.retain(|&x| x != z);
        if to == ImplicitlyOpened {
            self.implicit_order.push(z);
        }
        self.state[z] = to;
    }

    fn close_oldest_implicit(&mut self) {
        let victim = self.implicit_order[0];
        self.go(victim, Closed);
        self.implicit_closes[victim] += 1;
    }

    /// Zone z, empty or closed, is about to open.
    fn make_room(&mut self, z: usize) -> Result<(), ZnsStatus> {
        if self.state[z] == Empty && self.max_active.is_some_and(|m| self.active_count() + 1 > m) {
            return Err(ZnsStatus::TooManyActiveZones);
        }
        if self.max_open.is_some_and(|m| self.open_count() + 1 > m) {
            if self.implicit_order.is_empty() {
                return Err(ZnsStatus::TooManyOpenZones);
            }
            self.close_oldest_implicit();
        }
        Ok(())
    }

    fn in_range(&self, slba: u64, nlb: u64) -> Result<(), ZnsStatus> {
        if nlb == 0 {
            Err(ZnsStatus::InvalidField)
        } else if slba as u128 + nlb as u128 > self.total() {
            Err(ZnsStatus::LbaOutOfRange)
        } else {
            Ok(())
        }
    }

    fn writable(&self, z: usize) -> Result<(), ZnsStatus> {
        match self.state[z] {
            Full => Err(ZnsStatus::ZoneIsFull),
            ReadOnly => Err(ZnsStatus::ZoneIsReadOnly),
            Offline => Err(ZnsStatus::ZoneIsOffline),
            _ => Ok(()),
        }
    }

    fn put(&mut self, z: usize, nlb: u64) -> Result<(), ZnsStatus> {
        let limit = z as u128 * self.size as u128 + self.cap as u128;
        if self.wp[z] as u128 + nlb as u128 > limit {
            return Err(ZnsStatus::ZoneBoundaryError);
        }
        if self.state[z] == Empty || self.state[z] == Closed {
            self.make_room(z)?;
            self.go(z, ImplicitlyOpened);
        }
        self.wp[z] += nlb;
        if self.wp[z] as u128 == limit {
            self.go(z, Full);
        }
        Ok(())
    }

    fn write(&mut self, slba: u64, nlb: u64) -> Result<(), ZnsStatus> {
        self.in_range(slba, nlb)?;
        let z = (slba / self.size) as usize;
        self.writable(z)?;
        if slba != self.wp[z] {
            return Err(ZnsStatus::ZoneInvalidWrite);
        }
        self.put(z, nlb)
    }

    fn append(&mut self, zslba: u64, nlb: u64) -> Result<u64, ZnsStatus> {
        self.in_range(zslba, nlb)?;
        if zslba % self.size != 0 || self.append_limit.is_some_and(|l| nlb > l) {
            return Err(ZnsStatus::InvalidField);
        }
        let z = (zslba / self.size) as usize;
        self.writable(z)?;
        let at = self.wp[z];
        self.put(z, nlb)?;
        Ok(at)
    }

    fn read(&self, slba: u64, nlb: u64, cross: bool) -> Result<(), ZnsStatus> {
        self.in_range(slba, nlb)?;
        let first = (slba / self.size) as usize;
        let last = ((slba + nlb - 1) / self.size) as usize;
        if self.state[first] == Offline {
            return Err(ZnsStatus::ZoneIsOffline);
        }
        if last > first && !cross {
            return Err(ZnsStatus::ZoneBoundaryError);
        }
        if (first..=last).any(|z| self.state[z] == Offline) {
            return Err(ZnsStatus::ZoneIsOffline);
        }
        Ok(())
    }

    fn manage(&mut self, zslba: u64, action: ZoneAction, all: bool) -> Result<u32, ZnsStatus> {
        if all {
            return self.manage_all(action);
        }
        if zslba as u128 >= self.total() {
            return Err(ZnsStatus::LbaOutOfRange);
        }
        if zslba % self.size != 0 {
            return Err(ZnsStatus::InvalidField);
        }
        let z = (zslba / self.size) as usize;
        let bad = Err(ZnsStatus::InvalidZoneStateTransition);
        match action {
            ZoneAction::Open => match self.state[z] {
                ExplicitlyOpened => Ok(0),
                ImplicitlyOpened => {
                    self.go(z, ExplicitlyOpened);
                    Ok(1)
                }
                Empty | Closed => {
                    self.make_room(z)?;
                    self.go(z, ExplicitlyOpened);
                    Ok(1)
                }
                _ => bad,
            },
            ZoneAction::Close => match self.state[z] {
                ImplicitlyOpened | ExplicitlyOpened => {
                    self.go(z, Closed);
                    Ok(1)
                }
                Closed => Ok(0),
                _ => bad,
            },
            ZoneAction::Finish => match self.state[z] {
                Empty | ImplicitlyOpened | ExplicitlyOpened | Closed => {
                    self.go(z, Full);
                    self.finishes[z] += 1;
                    Ok(1)
                }
                Full => Ok(0),
                _ => bad,
            },
            ZoneAction::Reset => match self.state[z] {
                ImplicitlyOpened | ExplicitlyOpened | Closed | Full => {
                    self.go(z, Empty);
                    self.wp[z] = z as u64 * self.size;
                    self.resets[z] += 1;
                    Ok(1)
                }
                Empty => Ok(0),
                _ => bad,
            },
            ZoneAction::Offline => match self.state[z] {
                ReadOnly => {
                    self.go(z, Offline);
                    Ok(1)
                }
                Offline => Ok(0),
                _ => bad,
            },
        }
    }

    fn manage_all(&mut self, action: ZoneAction) -> Result<u32, ZnsStatus> {
        let n = self.state.len();
        let mut changed = 0;
        match action {
            ZoneAction::Open => {
                let closed: Vec<usize> = (0..n).filter(|&z| self.state[z] == Closed).collect();
                if let Some(m) = self.max_open {
                    let over = (self.open_count() as usize + closed.len()).saturating_sub(m as usize);
                    if over > self.implicit_order.len() {
                        return Err(ZnsStatus::TooManyOpenZones);
                    }
                    for _ in 0..over {
                        self.close_oldest_implicit();
                    }
                }
                for z in closed {
                    self.go(z, ExplicitlyOpened);
                    changed += 1;
                }
            }
            ZoneAction::Close => {
                for z in 0..n {
                    if matches!(self.state[z], ImplicitlyOpened | ExplicitlyOpened) {
                        self.go(z, Closed);
                        changed += 1;
                    }
                }
            }
            ZoneAction::Finish => {
                for z in 0..n {
                    if matches!(self.state[z], ImplicitlyOpened | ExplicitlyOpened | Closed) {
                        self.go(z, Full);
                        self.finishes[z] += 1;
                        changed += 1;
                    }
                }
            }
            ZoneAction::Reset => {
                for z in 0..n {
                    if matches!(self.state[z], ImplicitlyOpened | ExplicitlyOpened | Closed | Full) {
                        self.go(z, Empty);
                        self.wp[z] = z as u64 * self.size;
                        self.resets[z] += 1;
                        changed += 1;
                    }
                }
            }
            ZoneAction::Offline => {
                for z in 0..n {
                    if self.state[z] == ReadOnly {
                        self.go(z, Offline);
                        changed += 1;
                    }
                }
            }
        }
        Ok(changed)
    }

    fn fail(&mut self, zone: u32, to: ZoneState) -> Result<(), ZnsStatus> {
        let z = zone as usize;
        if !(to == ReadOnly || to == Offline) || z >= self.state.len() {
            return Err(ZnsStatus::InvalidField);
        }
        if self.state[z] == Offline && to == ReadOnly {
            return Err(ZnsStatus::InvalidZoneStateTransition);
        }
        self.go(z, to);
        Ok(())
    }

    fn report(&self, slba: u64, filter: ReportFilter, max: usize, partial: bool) -> Result<ZoneReport, ZnsStatus> {
        if slba as u128 >= self.total() {
            return Err(ZnsStatus::LbaOutOfRange);
        }
        let first = (slba / self.size) as usize;
        let all: Vec<ZoneDescriptor> = (first..self.state.len())
            .filter(|&z| match filter {
                ReportFilter::All => true,
                ReportFilter::State(s) => self.state[z] == s,
            })
            .map(|z| ZoneDescriptor {
                zone_type: ZoneType::SequentialWriteRequired,
                state: self.state[z],
                capacity: self.cap,
                zslba: z as u64 * self.size,
                write_pointer: matches!(self.state[z], Empty | ImplicitlyOpened | ExplicitlyOpened | Closed)
                    .then_some(self.wp[z]),
            })
            .collect();
        let zones = all[..max.min(all.len())].to_vec();
        let nr_zones = if partial { zones.len() } else { all.len() } as u64;
        Ok(ZoneReport { nr_zones, zones })
    }
}

// ---------------------------------------------------------------------------------------------
// The property test.

/// A command, in raw numbers that the runner fits to the geometry.
#[derive(Clone, Debug)]
enum Op {
    /// A write at the zone's write pointer (most writes are).
    WriteAtWp {
        zone: u32,
        nlb: u64,
    },
    /// A write anywhere near the namespace.
    Write {
        lba: u64,
        nlb: u64,
    },
    Append {
        zone: u32,
        nlb: u64,
    },
    AppendAt {
        lba: u64,
        nlb: u64,
    },
    Read {
        lba: u64,
        nlb: u64,
        cross: bool,
    },
    Manage {
        zone: u32,
        action: ZoneAction,
        all: bool,
    },
    ManageAt {
        lba: u64,
        action: ZoneAction,
    },
    Fail {
        zone: u32,
        offline: bool,
    },
    Report {
        lba: u64,
        filter: u8,
        max: usize,
        partial: bool,
    },
    /// Any numbers at all, to every command.
    Raw {
        a: u64,
        b: u64,
        action: ZoneAction,
        cross: bool,
    },
}

fn action() -> impl Strategy<Value = ZoneAction> {
    prop::sample::select(ZoneAction::ALL.to_vec())
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (any::<u32>(), 1u64..12).prop_map(|(zone, nlb)| Op::WriteAtWp { zone, nlb }),
        2 => (any::<u64>(), 0u64..30).prop_map(|(lba, nlb)| Op::Write { lba, nlb }),
        4 => (any::<u32>(), 1u64..12).prop_map(|(zone, nlb)| Op::Append { zone, nlb }),
        1 => (any::<u64>(), 0u64..30).prop_map(|(lba, nlb)| Op::AppendAt { lba, nlb }),
        2 => (any::<u64>(), 0u64..60, any::<bool>()).prop_map(|(lba, nlb, cross)| Op::Read { lba, nlb, cross }),
        6 => (any::<u32>(), action(), prop::bool::weighted(0.15))
            .prop_map(|(zone, action, all)| Op::Manage { zone, action, all }),
        1 => (any::<u64>(), action()).prop_map(|(lba, action)| Op::ManageAt { lba, action }),
        1 => (any::<u32>(), any::<bool>()).prop_map(|(zone, offline)| Op::Fail { zone, offline }),
        1 => (any::<u64>(), 0u8..10, 0usize..8, any::<bool>())
            .prop_map(|(lba, filter, max, partial)| Op::Report { lba, filter, max, partial }),
        1 => (any::<u64>(), any::<u64>(), action(), any::<bool>())
            .prop_map(|(a, b, action, cross)| Op::Raw { a, b, action, cross }),
    ]
}

/// Geometry and limits: 1–10 zones of 1–24 LBAs, any capacity, limits from 1 to a zone more
/// than there are, or none.
fn zns_config() -> impl Strategy<Value = ZnsConfig> {
    (1u32..=10, 1u64..=24, any::<u64>(), any::<u32>(), any::<u32>(), 0u8..4, any::<u64>()).prop_map(
        |(zones, size, cap_pick, open_pick, active_pick, limits, append_pick)| {
            let cap = 1 + cap_pick % size;
            let active = 1 + active_pick % (zones + 1);
            let open = 1 + open_pick % (zones + 1);
            let (max_open, max_active) = match limits {
                0 => (None, None),
                1 => (Some(open), None),
                _ => (Some(open.min(active)), Some(active)),
            };
            let zone_append_limit = (append_pick % 3 == 0).then(|| 1 + append_pick % size);
            ZnsConfig {
                geometry: ZoneGeometry { zones, zone_size: size, zone_capacity: cap },
                max_open,
                max_active,
                zone_append_limit,
            }
        },
    )
}

/// What both implementations answered.
#[derive(Debug, PartialEq)]
enum Answer {
    Unit(Result<(), ZnsStatus>),
    Lba(Result<u64, ZnsStatus>),
    Count(Result<u32, ZnsStatus>),
    Report(Result<ZoneReport, ZnsStatus>),
    /// Every command's answer to the same raw numbers.
    Raw(String),
}

fn step(real: &mut Zones, model: &mut Reference, op: &Op) -> (Answer, Answer) {
    let n = real.zone_count();
    let size = model.size;
    let total = u64::from(n) * size;
    // Positions a little past the namespace too.
    let near = |lba: u64| lba % (total + 2 * size);
    let zslba = |zone: u32| u64::from(zone % n) * size;
    match *op {
        Op::WriteAtWp { zone, nlb } => {
            let at = model.wp[(zone % n) as usize];
            (Answer::Unit(real.write(at, nlb)), Answer::Unit(model.write(at, nlb)))
        }
        Op::Write { lba, nlb } => (Answer::Unit(real.write(near(lba), nlb)), Answer::Unit(model.write(near(lba), nlb))),
        Op::Append { zone, nlb } => {
            (Answer::Lba(real.append(zslba(zone), nlb)), Answer::Lba(model.append(zslba(zone), nlb)))
        }
        Op::AppendAt { lba, nlb } => {
            (Answer::Lba(real.append(near(lba), nlb)), Answer::Lba(model.append(near(lba), nlb)))
        }
        Op::Read { lba, nlb, cross } => {
            (Answer::Unit(real.read_check(near(lba), nlb, cross)), Answer::Unit(model.read(near(lba), nlb, cross)))
        }
        Op::Manage { zone, action, all } => (
            Answer::Count(real.manage(zslba(zone), action, all)),
            Answer::Count(model.manage(zslba(zone), action, all)),
        ),
        Op::ManageAt { lba, action } => (
            Answer::Count(real.manage(near(lba), action, false)),
            Answer::Count(model.manage(near(lba), action, false)),
        ),
        Op::Fail { zone, offline } => {
            let to = if offline { Offline } else { ReadOnly };
            // Two in three name no zone, which keeps failed zones rare.
            (Answer::Unit(real.fail_zone(zone % (3 * n), to)), Answer::Unit(model.fail(zone % (3 * n), to)))
        }
        Op::Report { lba, filter, max, partial } => {
            let filter = ReportFilter::from_code(filter).unwrap_or(ReportFilter::All);
            (
                Answer::Report(real.report(near(lba), filter, max, partial)),
                Answer::Report(model.report(near(lba), filter, max, partial)),
            )
        }
        Op::Raw { a, b, action, cross } => {
            let r = (
                real.write(a, b),
                real.append(a, b),
                real.read_check(a, b, cross),
                real.manage(a, action, false),
                real.report(a, ReportFilter::All, (b % 4) as usize, cross).map(|r| r.nr_zones),
                real.fail_zone(a as u32, ZoneState::ALL[(b % 7) as usize]),
            );
            let m = (
                model.write(a, b),
                model.append(a, b),
                model.read(a, b, cross),
                model.manage(a, action, false),
                model.report(a, ReportFilter::All, (b % 4) as usize, cross).map(|r| r.nr_zones),
                model.fail(a as u32, ZoneState::ALL[(b % 7) as usize]),
            );
            (Answer::Raw(format!("{r:?}")), Answer::Raw(format!("{m:?}")))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn zones_agree_with_the_reference_model(cfg in zns_config(), ops in prop::collection::vec(op(), 1..160)) {
        let mut real = Zones::new(cfg).unwrap();
        let mut model = Reference::new(&cfg);
        for (i, op) in ops.iter().enumerate() {
            let (got, want) = step(&mut real, &mut model, op);
            prop_assert_eq!(got, want, "step {}: {:?}", i, op);
            for z in 0..real.zone_count() {
                let zi = z as usize;
                prop_assert_eq!(real.state(z), Some(model.state[zi]), "step {}: {:?}: zone {} state", i, op, z);
                let wp = real.write_pointer(z);
                prop_assert_eq!(wp, Some(model.wp[zi]), "step {}: {:?}: zone {} write pointer", i, op, z);
                let want = ZoneCounters {
                    resets: model.resets[zi],
                    finishes: model.finishes[zi],
                    implicit_closes: model.implicit_closes[zi],
                };
                prop_assert_eq!(real.counters(z), Some(want), "step {}: {:?}: zone {} counters", i, op, z);
            }
            prop_assert_eq!(real.open_zones(), model.open_count(), "step {}: {:?}: open zones", i, op);
            prop_assert_eq!(real.active_zones(), model.active_count(), "step {}: {:?}: active zones", i, op);
            prop_assert_eq!(real.implicitly_opened_zones() as usize, model.implicit_order.len());
            prop_assert!(cfg.max_open.is_none_or(|m| real.open_zones() <= m), "step {}: open over the limit", i);
            prop_assert!(cfg.max_active.is_none_or(|m| real.active_zones() <= m), "step {}: active over the limit", i);
            real.check_invariants();
        }
    }
}
