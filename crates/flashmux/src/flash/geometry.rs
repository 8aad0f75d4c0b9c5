use crate::units::{ChannelId, DieId, Nanos, PlaneId};
use serde::Serialize;

/// The physical organisation of the flash array.
///
/// A *flash page* (`page_bytes`) is the unit of a read or program; it holds
/// `page_bytes / unit_bytes` *mapping units* (the FTL maps 4 KiB units, as real drives do even
/// when NAND pages are 16 KiB). Planes of one die work together (multi-plane operations) but share
/// the die; dies work independently; the dies of one channel share its bus.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_bytes: u32,
    /// The FTL's mapping unit (logical page size).
    pub unit_bytes: u32,
}

crate::named! {
    /// Which pages of a die's planes one multi-plane command may take.
    #[derive(Default)]
    pub enum Multiplane: "multi-plane rule" {
        /// Any page of each plane (one program takes a page from every ready plane of the die).
        #[default]
        Any = "any",
        /// Only pages at the same page index in their blocks (the blocks may differ), as MQSim
        /// forms multi-plane commands (`TSU_Base::issue_command_to_chip`).
        SamePage = "same-page",
    }
}

/// Operation timing of the flash array and its channels.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timing {
    /// tR: array read of one page into the page register.
    pub read: Nanos,
    /// tPROG: program of one page (or of one page per plane, multi-plane).
    pub program: Nanos,
    /// tBERS: erase of one block.
    pub erase: Nanos,
    /// Channel (NAND bus) transfer rate, bytes per second.
    pub channel_bytes_per_sec: u64,
    /// Fixed cost on the channel per command (command and address cycles).
    pub command: Nanos,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    #[error("{field} must be at least 1")]
    Zero { field: &'static str },
    #[error("{field} must be a power of two (got {value})")]
    NotPowerOfTwo { field: &'static str, value: u32 },
    #[error("page_size ({page}) must be a multiple of the mapping unit ({unit})")]
    PageNotMultipleOfUnit { page: u32, unit: u32 },
    #[error("unit_size must be at least 512 bytes (got {0})")]
    UnitTooSmall(u32),
    #[error("the drive has {units} mapping units; at most {max} are supported (32-bit physical addresses)")]
    TooLarge { units: u64, max: u64 },
}

impl Geometry {
    pub fn validate(&self) -> Result<(), GeometryError> {
        let fields = [
            ("channels", self.channels),
            ("chips_per_channel", self.chips_per_channel),
            ("dies_per_chip", self.dies_per_chip),
            ("planes_per_die", self.planes_per_die),
            ("blocks_per_plane", self.blocks_per_plane),
            ("pages_per_block", self.pages_per_block),
            ("page_size", self.page_bytes),
            ("unit_size", self.unit_bytes),
        ];
        for (field, v) in fields {
            if v == 0 {
                return Err(GeometryError::Zero { field });
            }
        }
        for (field, value) in [("page_size", self.page_bytes), ("unit_size", self.unit_bytes)] {
            if !value.is_power_of_two() {
                return Err(GeometryError::NotPowerOfTwo { field, value });
            }
        }
        if self.unit_bytes < 512 {
            return Err(GeometryError::UnitTooSmall(self.unit_bytes));
        }
        if self.page_bytes % self.unit_bytes != 0 {
            return Err(GeometryError::PageNotMultipleOfUnit { page: self.page_bytes, unit: self.unit_bytes });
        }
        // u32::MAX is reserved as "no address"; the top bit marks write-buffer slots in the L2P table.
        let max = (1u64 << 31) - 1;
        if self.total_units() > max {
            return Err(GeometryError::TooLarge { units: self.total_units(), max });
        }
        Ok(())
    }

    pub fn units_per_page(&self) -> u32 {
        self.page_bytes / self.unit_bytes
    }
    pub fn units_per_block(&self) -> u32 {
        self.units_per_page() * self.pages_per_block
    }
    pub fn dies(&self) -> u32 {
        self.channels * self.chips_per_channel * self.dies_per_chip
    }
    pub fn planes(&self) -> u32 {
        self.dies() * self.planes_per_die
    }
    pub fn blocks(&self) -> u64 {
        self.planes() as u64 * self.blocks_per_plane as u64
    }
    pub fn total_units(&self) -> u64 {
        self.blocks() * self.units_per_block() as u64
    }
    pub fn physical_bytes(&self) -> u64 {
        self.total_units() * self.unit_bytes as u64
    }
    pub fn units_per_plane(&self) -> u64 {
        self.blocks_per_plane as u64 * self.units_per_block() as u64
    }
    /// The channel a die sits on. Dies are numbered channel-major: die = (channel × chips + chip) × dies_per_chip + die.
    pub fn channel_of_die(&self, die: DieId) -> ChannelId {
        debug_assert!(die.0 < self.dies(), "die {} of {}", die.0, self.dies());
        ChannelId(die.0 / (self.chips_per_channel * self.dies_per_chip))
    }
    pub fn die_of_plane(&self, plane: PlaneId) -> DieId {
        debug_assert!(plane.0 < self.planes(), "plane {} of {}", plane.0, self.planes());
        DieId(plane.0 / self.planes_per_die)
    }
    /// The planes of `die`, in order.
    pub fn planes_of_die(&self, die: DieId) -> impl Iterator<Item = PlaneId> {
        let ppd = self.planes_per_die;
        (die.0 * ppd..(die.0 + 1) * ppd).map(PlaneId)
    }
    /// Every plane of the drive, in order.
    pub fn all_planes(&self) -> impl Iterator<Item = PlaneId> {
        (0..self.planes()).map(PlaneId)
    }

    /// Plane index for the n-th stripe position. Consecutive stripes go to consecutive channels
    /// first, then chips, then dies, then planes, so that sequential data is spread over every
    /// channel before any channel is used twice (channel-way-die-plane striping).
    pub fn plane_for_stripe(&self, stripe: u64) -> PlaneId {
        let planes = self.planes() as u64;
        let mut s = stripe % planes;
        let channel = s % self.channels as u64;
        s /= self.channels as u64;
        let chip = s % self.chips_per_channel as u64;
        s /= self.chips_per_channel as u64;
        let die_in_chip = s % self.dies_per_chip as u64;
        s /= self.dies_per_chip as u64;
        let plane_in_die = s;
        let die = (channel * self.chips_per_channel as u64 + chip) * self.dies_per_chip as u64 + die_in_chip;
        PlaneId((die * self.planes_per_die as u64 + plane_in_die) as u32)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn tiny() -> Geometry {
        Geometry {
            channels: 2,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 16,
            pages_per_block: 8,
            page_bytes: 8192,
            unit_bytes: 4096,
        }
    }

    #[test]
    fn derived_counts() {
        let g = tiny();
        g.validate().unwrap();
        assert_eq!(g.dies(), 4);
        assert_eq!(g.planes(), 8);
        assert_eq!(g.units_per_page(), 2);
        assert_eq!(g.units_per_block(), 16);
        assert_eq!(g.total_units(), 8 * 16 * 16);
        assert_eq!(g.channel_of_die(DieId(0)), ChannelId(0));
        assert_eq!(g.channel_of_die(DieId(1)), ChannelId(0));
        assert_eq!(g.channel_of_die(DieId(2)), ChannelId(1));
    }

    #[test]
    fn striping_is_channel_first_and_a_bijection() {
        let g = tiny();
        let order: Vec<PlaneId> = (0..8).map(|s| g.plane_for_stripe(s)).collect();
        // stripe 0 -> ch0 chip0 plane0 (plane 0), stripe 1 -> ch1 chip0 (die 2, plane 4), ...
        assert_eq!(g.channel_of_die(g.die_of_plane(order[0])), ChannelId(0));
        assert_eq!(g.channel_of_die(g.die_of_plane(order[1])), ChannelId(1));
        assert_eq!(order, [0, 4, 2, 6, 1, 5, 3, 7].map(PlaneId));
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, (0..8).map(PlaneId).collect::<Vec<_>>());
        assert_eq!(g.plane_for_stripe(8), order[0]);
    }

    #[test]
    fn rejects_impossible_geometry() {
        let mut g = tiny();
        g.channels = 0;
        assert_eq!(g.validate(), Err(GeometryError::Zero { field: "channels" }));
        let mut g = tiny();
        g.page_bytes = 6000;
        assert!(matches!(g.validate(), Err(GeometryError::NotPowerOfTwo { field: "page_size", .. })));
        let mut g = tiny();
        g.unit_bytes = 16384;
        assert!(matches!(g.validate(), Err(GeometryError::PageNotMultipleOfUnit { .. })));
        let mut g = tiny();
        g.blocks_per_plane = 1 << 30;
        assert!(matches!(g.validate(), Err(GeometryError::TooLarge { .. })));
    }
}
