//! Data placement: which of the drive's placements (`Placement`, each with its own open block
//! in every plane, `ftl/core/alloc.rs`) a write's data goes to, from the directive the host put
//! in the write command — NVMe Flexible Data Placement (FDP) or the Streams directive.
//!
//! # Model
//! - **FDP** (NVMe TP4146, `[device.fdp]`). One reclaim group holds the whole drive and
//!   placement handle *i* is reclaim unit handle (RUH) *i*, so a write's placement identifier
//!   (the command's DSPEC, with no reclaim-group bits) is the handle. Each handle writes into its
//!   current reclaim unit (RU): in this model an erase block in every plane, the handle's open
//!   host block there (a real drive stripes one RU over its dies; the static striping by
//!   logical page that places data in planes (`Ftl::plane_of`) makes a handle's RU one block per
//!   plane, each switched to a fresh one as it fills). A write without a directive uses
//!   placement handle 0, as the specification says. A placement identifier past the handles does
//!   not fail the write: the specification lets the controller choose a handle the namespace may
//!   use and log an *Invalid Placement Identifier* event (03h); this drive chooses handle 0, as
//!   QEMU's and FEMU's FDP emulation do, and counts the event (`invalid_placement_ids`).
//!   Handles are *initially isolated* (GC may move their data into blocks shared with other
//!   initially isolated handles' data: the shared GC block; each such move is the controller
//!   event *Media Reallocated*, 80h, counted in units) or *persistently isolated* (GC moves
//!   their data only into blocks of their own) — the FTL's persistent placements. The host's
//!   *Reclaim Unit Handle Update* (`ru_update_every`: after every so many bytes through a
//!   handle) closes the handle's reclaim unit where it is, logging *Reclaim Unit Not Fully
//!   Written* (00h) if it was written but not full (`Ssd::update_reclaim_unit`). Not modelled:
//!   reclaim unit time limits, more than one reclaim group.
//! - **Streams** (`[device.streams]`). Stream identifiers 1–65535 name streams; the drive keeps
//!   up to `streams` of them open, each with its own open block in every plane (placements 1 to
//!   `streams`; placement 0 is data without a stream). A write to a stream that is not open opens
//!   it in a free resource; with all of them taken, an open stream is released and its resource
//!   (its open blocks, whatever they hold) goes to the new stream (`streams_released`): the
//!   specification releases an arbitrary one, this drive the one written least recently. A
//!   write never fails for want of a stream. GC moves stream data like unplaced data (into the
//!   shared GC block). Streams and FDP exclude each other, as in the specification.
//!
//! # Worked example
//! Streams with `streams = 2`: writes to streams 7, 9, 7, 4 take placements 1 (7), 2 (9), 1
//! (7 again), then 4 finds both taken and releases the least recently written, 9: placement 2 is
//! 4's from then on (opened 3, released 1).
//!
//! # Parameters
//! `[device.fdp] handles` (1–256), `handle_type` (`initially-isolated`, `persistently-isolated`)
//! or `persistent` (the handles that are persistently isolated), `ru_update_every` (bytes);
//! `[device.streams] streams` (1–255).
//!
//! Source: NVM Express TP4146 (Flexible Data Placement), in the NVM Express Base Specification
//! 2.1 and later (§8.1.11: placement identifiers, a write's placement, reclaim unit handle
//! types; §5.2.12.1.31–32: the FDP statistics and events log pages); the Streams directive
//! (§8.1.9.3: implicit open, release when resources run out); QEMU's `hw/nvme/ctrl.c`
//! (`nvme_do_write_fdp`) and FEMU's `hw/femu/bbssd/ftl-fdp.c` for the invalid identifier.

use crate::ftl::Placements;
use crate::units::Placement;
use serde::Serialize;

/// The data placement a drive offers its host.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum PlacementMode {
    /// Every write goes to the same open blocks.
    #[default]
    None,
    /// NVMe FDP with one reclaim group: handle *i* is persistently isolated when `persistent[i]`.
    Fdp { persistent: Vec<bool> },
    /// The NVMe Streams directive, with up to `streams` streams open at once.
    Streams { streams: u16 },
}

impl PlacementMode {
    pub fn is_none(&self) -> bool {
        *self == PlacementMode::None
    }
    /// The FDP drive's reclaim unit handles.
    pub fn fdp_handles(&self) -> Option<u16> {
        match self {
            PlacementMode::Fdp { persistent } => Some(persistent.len() as u16),
            _ => None,
        }
    }
    /// The streams the drive keeps open at once.
    pub fn max_streams(&self) -> Option<u16> {
        match self {
            PlacementMode::Streams { streams } => Some(*streams),
            _ => None,
        }
    }
    /// The placements the FTL keeps apart.
    pub fn placements(&self) -> Placements {
        match self {
            PlacementMode::None => Placements::default(),
            PlacementMode::Fdp { persistent } if persistent.len() > 1 || persistent.iter().any(|&p| p) => {
                Placements { persistent: persistent.clone() }
            }
            PlacementMode::Fdp { .. } => Placements::default(),
            PlacementMode::Streams { streams } => Placements::shared(*streams as usize + 1),
        }
    }
    /// Handles 1 to 256, streams 1 to 255.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            PlacementMode::None => Ok(()),
            PlacementMode::Fdp { persistent } if (1..=Placements::MAX).contains(&persistent.len()) => Ok(()),
            PlacementMode::Fdp { persistent } => Err(format!(
                "device.fdp.handles: {} reclaim unit handles: expected 1 to {}",
                persistent.len(),
                Placements::MAX
            )),
            PlacementMode::Streams { streams } if (1..Placements::MAX as u16).contains(streams) => Ok(()),
            PlacementMode::Streams { streams } => {
                Err(format!("device.streams.streams: {streams} open streams: expected 1 to {}", Placements::MAX - 1))
            }
        }
    }
}

/// What the drive's placement did, for `results.json`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PlacementEvents {
    /// FDP: writes whose placement identifier named no handle (placed by handle 0).
    pub invalid_placement_ids: u64,
    /// Streams: streams opened (implicitly, by their first write).
    pub streams_opened: u64,
    /// Streams: open streams released to open another.
    pub streams_released: u64,
    /// FDP: Reclaim Unit Handle Updates the host issued (`ru_update_every`).
    pub ruh_updates: u64,
    /// FDP: *Reclaim Unit Not Fully Written* (00h): updates that switched a handle away from a
    /// reclaim unit before it was full.
    pub ru_not_fully_written: u64,
}

/// Decides each write's placement from its directive.
pub(super) struct Placer {
    mode: PlacementMode,
    /// Streams: the stream each placement 1.. holds (0: free) and the write count at its last write.
    open: Vec<(u16, u64)>,
    writes: u64,
    /// Bytes the host wrote through each placement.
    host_bytes: Vec<u64>,
    /// FDP with `ru_update_every`: bytes written through each placement since its last
    /// reclaim unit update.
    since_update: Vec<u64>,
    pub(super) events: PlacementEvents,
}

impl Placer {
    pub(super) fn new(mode: &PlacementMode) -> Placer {
        let streams = mode.max_streams().unwrap_or(0) as usize;
        Placer {
            mode: mode.clone(),
            open: vec![(0, 0); streams],
            writes: 0,
            host_bytes: vec![0; mode.placements().count()],
            since_update: vec![0; mode.placements().count()],
            events: PlacementEvents::default(),
        }
    }

    /// The placement of a write of `bytes` whose command carries directive value `dspec` (0:
    /// none).
    #[inline]
    pub(super) fn place(&mut self, dspec: u16, bytes: u64) -> Placement {
        let p = match &self.mode {
            PlacementMode::None => Placement(0),
            PlacementMode::Fdp { persistent } => {
                if (dspec as usize) < persistent.len() {
                    Placement(dspec)
                } else {
                    self.events.invalid_placement_ids += 1;
                    Placement(0)
                }
            }
            PlacementMode::Streams { .. } if dspec == 0 => Placement(0),
            PlacementMode::Streams { .. } => self.stream(dspec),
        };
        if let Some(b) = self.host_bytes.get_mut(p.index()) {
            *b += bytes;
        }
        p
    }

    /// The placement holding stream `id`, opening it (and releasing the stream written least
    /// recently when every placement is taken).
    fn stream(&mut self, id: u16) -> Placement {
        self.writes += 1;
        let now = self.writes;
        if let Some(i) = self.open.iter().position(|&(s, _)| s == id) {
            self.open[i].1 = now;
            return Placement(i as u16 + 1);
        }
        self.events.streams_opened += 1;
        let i = match self.open.iter().position(|&(s, _)| s == 0) {
            Some(i) => i,
            None => {
                self.events.streams_released += 1;
                // Least recently written; ties cannot happen (each write has its own count).
                (0..self.open.len()).min_by_key(|&i| self.open[i].1).expect("at least one stream")
            }
        };
        self.open[i] = (id, now);
        Placement(i as u16 + 1)
    }

    /// A write of `bytes` went through `p` under `ru_update_every = every`: whether the host
    /// now updates `p`'s reclaim unit (once `every` bytes have been written through it since
    /// the last update; the count starts afresh, whatever one write carried beyond it).
    pub(super) fn due_ru_update(&mut self, p: Placement, bytes: u64, every: u64) -> bool {
        let Some(n) = self.since_update.get_mut(p.index()) else { return false };
        *n += bytes;
        if *n < every {
            return false;
        }
        *n = 0;
        self.events.ruh_updates += 1;
        true
    }

    /// Bytes the host wrote through placement `p`.
    pub(super) fn host_bytes(&self, p: Placement) -> u64 {
        self.host_bytes.get(p.index()).copied().unwrap_or(0)
    }

    /// Zeroes the counters (the measured run counts from here); open streams stay open.
    pub(super) fn reset_stats(&mut self) {
        self.host_bytes.fill(0);
        self.events = PlacementEvents::default();
    }

    pub(super) fn mode(&self) -> &PlacementMode {
        &self.mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header's example: two stream resources, writes to streams 7, 9, 7, 4.
    #[test]
    fn streams_open_implicitly_and_release_the_least_recently_written() {
        let mut p = Placer::new(&PlacementMode::Streams { streams: 2 });
        let got: Vec<u16> = [7, 9, 7, 4].iter().map(|&s| p.place(s, 4096).0).collect();
        assert_eq!(got, vec![1, 2, 1, 2]);
        assert_eq!(p.events, PlacementEvents { invalid_placement_ids: 0, streams_opened: 3, streams_released: 1, ..Default::default() });
        // 9 was released: writing it again takes the resource of 7 (written before 4).
        assert_eq!(p.place(9, 4096), Placement(1));
        assert_eq!(p.place(0, 4096), Placement(0), "no stream");
        assert_eq!((p.host_bytes(Placement(0)), p.host_bytes(Placement(1)), p.host_bytes(Placement(2))), (4096, 3 * 4096, 2 * 4096));
    }

    /// A placement identifier is the handle (one reclaim group); one past the handles goes to
    /// handle 0 and is logged.
    #[test]
    fn fdp_placement_ids_decode_to_handles() {
        let mut p = Placer::new(&PlacementMode::Fdp { persistent: vec![false; 4] });
        assert_eq!([0, 3, 1].map(|d| p.place(d, 512).0), [0, 3, 1]);
        assert_eq!(p.place(4, 512), Placement(0));
        assert_eq!(p.place(0xffff, 512), Placement(0));
        assert_eq!(p.events.invalid_placement_ids, 2);
        assert_eq!(p.host_bytes(Placement(0)), 3 * 512);
        let none = Placer::new(&PlacementMode::None).place(5, 512);
        assert_eq!(none, Placement(0), "a drive without placement ignores the directive");
    }

    #[test]
    fn limits_are_checked() {
        assert!(PlacementMode::Fdp { persistent: vec![] }.validate().unwrap_err().contains("expected 1 to 256"));
        assert!(PlacementMode::Fdp { persistent: vec![false; 257] }.validate().is_err());
        assert!(PlacementMode::Fdp { persistent: vec![true; 256] }.validate().is_ok());
        assert!(PlacementMode::Streams { streams: 0 }.validate().unwrap_err().contains("expected 1 to 255"));
        assert!(PlacementMode::Streams { streams: 256 }.validate().is_err());
        assert_eq!(PlacementMode::Streams { streams: 4 }.placements().count(), 5);
        assert_eq!(PlacementMode::Fdp { persistent: vec![false] }.placements().count(), 1);
        assert_eq!(PlacementMode::Fdp { persistent: vec![true] }.placements().persistent, vec![true]);
    }
}
