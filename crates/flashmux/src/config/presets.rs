//! Built-in device presets. Every number and its source is listed in `docs/MODEL.md`.

use crate::device::{Arbitration, EccRates, NullConfig, NvmeConfig, PlacementMode, SsdConfig};
use crate::flash::{Geometry, Timing};
use crate::units::Nanos;

pub use crate::device::DeviceKind;

#[derive(Clone, Debug, PartialEq)]
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    pub kind: DeviceKind,
    pub nvme: NvmeConfig,
}

pub const PRESET_NAMES: [&str; 8] = ["paper-c", "x25e", "840pro", "tlc-nvme", "tlc-nvme-fdp", "tlc-nvme-zns", "cosmos", "null"];

/// GC threshold used by the presets: 1% of a plane's blocks, at least 2.
pub fn default_gc_threshold(blocks_per_plane: u32) -> u32 {
    (blocks_per_plane / 100).max(2)
}

/// A preset's drive: [`SsdConfig::new`] with the presets' GC threshold; each preset sets what
/// differs from the defaults there.
fn drive(geometry: Geometry, timing: Timing, overprovisioning: f64, buffer_units: u32, link_bytes_per_sec: u64) -> SsdConfig {
    let threshold = default_gc_threshold(geometry.blocks_per_plane);
    SsdConfig::new(geometry, timing, threshold, overprovisioning, buffer_units, link_bytes_per_sec)
}

pub fn preset(name: &str) -> Option<Preset> {
    match name {
        "paper-c" => Some(paper_c()),
        "x25e" => Some(x25e()),
        "840pro" => Some(mlc_840pro()),
        "tlc-nvme" => Some(tlc_nvme()),
        "tlc-nvme-fdp" => Some(tlc_nvme_fdp()),
        "tlc-nvme-zns" => Some(tlc_nvme_zns()),
        "cosmos" => Some(cosmos()),
        "null" => Some(null()),
        _ => None,
    }
}

/// Paper C's simulated drive (SSDsim): 8 GiB of flash, 8 channels × 2 chips, 4 KiB pages,
/// tR 65 µs, tPROG 0.55 ms, tBERS 1.5 ms, 3% over-provisioning.
fn paper_c() -> Preset {
    let geometry = Geometry {
        channels: 8,
        chips_per_channel: 2,
        dies_per_chip: 1,
        planes_per_die: 1,
        blocks_per_plane: 2048,
        pages_per_block: 64,
        page_bytes: 4096,
        unit_bytes: 4096,
    };
    Preset {
        name: "paper-c",
        summary: "8 GiB flash, 8 ch x 2 chips, 4 KiB pages, tR 65us, tPROG 0.55ms, tBERS 1.5ms, OP 3% (paper C / SSDsim)",
        kind: DeviceKind::Ssd(SsdConfig {
            // SSDsim models no flush command or power loss; flashmux keeps its protected buffer.
            volatile_write_cache: false,
            ..drive(
                geometry,
                Timing {
                    read: Nanos::from_us(65),
                    program: Nanos::from_us(550),
                    erase: Nanos::from_us(1500),
                    channel_bytes_per_sec: 200_000_000,
                    command: Nanos(0),
                },
                0.03,
                1024,
                3_200_000_000,
            )
        }),
        nvme: NvmeConfig {
            queues: 8,
            queue_depth: 1024,
            controller_cores: 4,
            command_overhead: Nanos(500),
            arbitration: Arbitration::RoundRobin,
        },
    }
}

/// An Intel X25-E-like SLC SATA drive (paper B): 32 GB class, 10 channels, SLC timing, one
/// NCQ queue of 32, a 3 Gb/s SATA link.
fn x25e() -> Preset {
    let geometry = Geometry {
        channels: 10,
        chips_per_channel: 1,
        dies_per_chip: 1,
        planes_per_die: 1,
        blocks_per_plane: 16384,
        pages_per_block: 64,
        page_bytes: 4096,
        unit_bytes: 4096,
    };
    Preset {
        name: "x25e",
        summary: "SLC SATA drive like the Intel X25-E 32GB: 10 ch, 4 KiB pages, tR 25us, tPROG 240us, NCQ 32, 250 MB/s link, volatile write cache",
        kind: DeviceKind::Ssd(SsdConfig {
            // Intel's X25 generation has no power-loss capacitor (it arrived with the SSD 320).
            volatile_write_cache: true,
            ..drive(
                geometry,
                Timing {
                    read: Nanos::from_us(25),
                    // Calibrated: 10 dies × 4 KiB / 240 us = 170.7 MB/s, the datasheet's 170 MB/s.
                    program: Nanos::from_us(240),
                    erase: Nanos::from_us(1500),
                    channel_bytes_per_sec: 133_000_000,
                    command: Nanos(0),
                },
                0.25,
                256,
                250_000_000,
            )
        }),
        nvme: NvmeConfig {
            queues: 1,
            queue_depth: 32,
            controller_cores: 1,
            command_overhead: Nanos::from_us(5),
            arbitration: Arbitration::RoundRobin,
        },
    }
}

/// A Samsung 840 Pro 256 GB-like consumer MLC SATA drive (paper D): 8 channels × 4 dies of 21 nm
/// 64 Gbit MLC, two planes, 8 KiB pages, 1 MiB blocks, 256 GiB of flash for 256 GB (7% OP),
/// Toggle 2.0 channels (400 MB/s), a three-core controller, NCQ 32 on a 6 Gb/s SATA link. tPROG
/// and the command cost are calibrated to the datasheet's 520 MB/s sequential write and 100K IOPS
/// random read (docs/MODEL.md).
fn mlc_840pro() -> Preset {
    let geometry = Geometry {
        channels: 8,
        chips_per_channel: 4,
        dies_per_chip: 1,
        planes_per_die: 2,
        blocks_per_plane: 4096,
        pages_per_block: 128,
        page_bytes: 8192,
        unit_bytes: 4096,
    };
    Preset {
        name: "840pro",
        summary: "consumer MLC SATA drive like the Samsung 840 Pro 256GB: 8 ch x 4 dies x 2 planes, 8 KiB pages, tR 50us, tPROG 1ms, tBERS 3.5ms, OP 7%, NCQ 32, 550 MB/s link, volatile write cache",
        kind: DeviceKind::Ssd(SsdConfig {
            // A consumer drive: no power-loss protection, so a FLUSH programs the buffer.
            volatile_write_cache: true,
            ..drive(
                geometry,
                Timing {
                    read: Nanos::from_us(50),
                    program: Nanos::from_us(1000),
                    erase: Nanos::from_us(3500),
                    channel_bytes_per_sec: 400_000_000,
                    command: Nanos(0),
                },
                0.074,
                2048,
                550_000_000,
            )
        }),
        nvme: NvmeConfig {
            queues: 1,
            queue_depth: 32,
            controller_cores: 3,
            command_overhead: Nanos::from_us(30),
            arbitration: Arbitration::RoundRobin,
        },
    }
}

/// A modern datacenter TLC NVMe drive like the Samsung PM9A3 7.68 TB (PCIe 4.0 x4, 8 channels of
/// 16 dies of 128-layer TLC, 16 KiB pages, two planes per die), with its capacity scaled down to
/// 128 GiB of flash (fewer, smaller blocks; the same dies) so runs take seconds; set
/// `device.capacity` to model a larger one. The controller's command cost and ECC encoder are
/// calibrated to the datasheet's random read IOPS and sequential write bandwidth (docs/MODEL.md §6).
fn tlc_nvme() -> Preset {
    let geometry = Geometry {
        channels: 8,
        chips_per_channel: 4,
        dies_per_chip: 4,
        planes_per_die: 2,
        blocks_per_plane: 512,
        pages_per_block: 64,
        page_bytes: 16384,
        unit_bytes: 4096,
    };
    Preset {
        name: "tlc-nvme",
        summary: "datacenter TLC NVMe like the Samsung PM9A3, PCIe 4.0 x4: 8 ch x 16 dies x 2 planes, 16 KiB pages, tR 45us, tPROG 450us, tBERS 3.5ms, 3.5 GB/s ECC encoder, OP 14.5%, 128 GiB flash (scalable)",
        kind: DeviceKind::Ssd(SsdConfig {
            // Datacenter NVMe drives protect their write buffer with capacitors.
            volatile_write_cache: false,
            // Calibrated: the datasheet's 3.5 GB/s sequential write; 128 dies could program 9.3 GB/s.
            ecc: EccRates { encode_bytes_per_sec: Some(3_500_000_000), decode_bytes_per_sec: None },
            // TLC firmware corrects GC's data on its way through the controller (no copy-back).
            gc_copyback: false,
            ..drive(
                geometry,
                Timing {
                    read: Nanos::from_us(45),
                    program: Nanos::from_us(450),
                    erase: Nanos::from_us(3500),
                    channel_bytes_per_sec: 1_200_000_000,
                    command: Nanos(0),
                },
                0.145,
                16384,
                7_000_000_000,
            )
        }),
        nvme: NvmeConfig {
            queues: 16,
            queue_depth: 1024,
            controller_cores: 8,
            // Calibrated: 8 cores / 8.9 us = 899K commands/s, the datasheet's 900K random reads.
            command_overhead: Nanos(8_900),
            arbitration: Arbitration::RoundRobin,
        },
    }
}

/// `tlc-nvme` with NVMe Flexible Data Placement enabled, as datacenter TLC drives ship it (the
/// Samsung PM9D3a): one reclaim group, 8 initially isolated reclaim unit handles (the handle
/// count of WARP's calibrated FDP drive; the PM9D3a's is not published), a handle's reclaim
/// unit one block in every plane (docs/MODEL.md §1c).
fn tlc_nvme_fdp() -> Preset {
    let base = tlc_nvme();
    let DeviceKind::Ssd(c) = base.kind else { unreachable!("tlc-nvme is a flash drive") };
    Preset {
        name: "tlc-nvme-fdp",
        summary: "tlc-nvme (PM9A3-like datacenter TLC) with NVMe FDP: 1 reclaim group, 8 initially isolated reclaim unit handles, a reclaim unit = a block in every plane",
        kind: DeviceKind::Ssd(SsdConfig { placement: PlacementMode::Fdp { persistent: vec![false; 8] }, ..c }),
        nvme: base.nvme,
    }
}

/// `tlc-nvme`'s flash and controller as a zoned namespace, with the zone layout and limits of
/// a WD Ultrastar DC ZN540 (the drive of Bjørling et al., USENIX ATC '21): zones of 2 GiB of
/// LBA space, 14 open and active zones; the zone capacity is 1 GiB, four 1 MiB blocks in each
/// of the 256 planes (the ZN540's is 1,077 MiB, over its own flash layout). Flash scaled to
/// 64 GiB (64 zones) so runs take seconds; `device.geometry.blocks_per_plane` gives more
/// (docs/MODEL.md, ZNS).
fn tlc_nvme_zns() -> Preset {
    let base = tlc_nvme();
    let DeviceKind::Ssd(c) = base.kind else { unreachable!("tlc-nvme is a flash drive") };
    let geometry = crate::flash::Geometry { blocks_per_plane: 256, ..c.geometry.clone() };
    Preset {
        name: "tlc-nvme-zns",
        summary: "tlc-nvme (PM9A3-like TLC) as a zoned namespace like the WD ZN540: 2 GiB zones of 1 GiB capacity (4 blocks in each of 256 planes), 14 open/active zones, no device GC, 64 zones (scalable)",
        kind: DeviceKind::Ssd(SsdConfig {
            zns: Some(crate::device::ZnsLayout {
                zones: 64,
                zone_bytes: 2 << 30,
                capacity_bytes: 1 << 30,
                max_open: Some(14),
                max_active: Some(14),
                append_limit_bytes: None,
                zone_planes: None,
                // The WD ZN540's reset of an empty zone: 1.61 ms (docs/MODEL.md §5).
                reset_overhead: Nanos(1_600_000),
                // The ZN540 writes the rest of a partly written zone on Finish (docs/MODEL.md §5).
                finish_pads: true,
            }),
            geometry,
            ..c
        }),
        nvme: base.nvme,
    }
}

/// An OpenSSD Cosmos+ board with open-channel firmware under Linux pblk (paper E): 8 channels ×
/// 8 ways of MLC NAND with 16 KiB pages and 256-page blocks, NV-DDR channels at 200 MB/s, PCIe
/// Gen2 x8; the FTL (pblk) runs on the host with 11% over-provisioning, its ring write buffer in
/// host memory. Flash scaled to 32 GiB so runs take seconds; set `device.capacity` for more.
/// Every number and its source: docs/MODEL.md §6.
fn cosmos() -> Preset {
    let geometry = Geometry {
        channels: 8,
        chips_per_channel: 8,
        dies_per_chip: 1,
        planes_per_die: 1,
        blocks_per_plane: 128,
        pages_per_block: 256,
        page_bytes: 16384,
        unit_bytes: 4096,
    };
    Preset {
        name: "cosmos",
        summary: "OpenSSD Cosmos+ as an open-channel SSD under pblk (host FTL): 8 ch x 8 ways MLC, 16 KiB pages, tR 75us, tPROG 1.3ms, tBERS 3.8ms, OP 11%, 8 MiB ring write buffer, 32 GiB flash (scalable)",
        kind: DeviceKind::Ssd(SsdConfig {
            // pblk's ring write buffer is host memory: a flush (REQ_PREFLUSH) must program it.
            volatile_write_cache: true,
            open_channel: true,
            ..drive(
                geometry,
                Timing {
                    read: Nanos::from_us(75),
                    program: Nanos::from_us(1300),
                    erase: Nanos::from_us(3800),
                    channel_bytes_per_sec: 200_000_000,
                    command: Nanos(0),
                },
                0.11,
                2048,
                3_200_000_000,
            )
        }),
        // The "controller" of an open-channel drive is pblk's submission path on host cores.
        nvme: NvmeConfig {
            queues: 8,
            queue_depth: 1024,
            controller_cores: 4,
            command_overhead: Nanos::from_us(3),
            arbitration: Arbitration::RoundRobin,
        },
    }
}

/// Like Linux `null_blk` in multi-queue mode: no media; each queue's commands cost a fixed
/// processing time.
fn null() -> Preset {
    Preset {
        name: "null",
        summary: "no media (like null_blk, queue_mode=2): 8 queues, 1us processing per command, 64 GiB",
        kind: DeviceKind::Null(NullConfig { capacity_bytes: 64 << 30, latency: Nanos::ZERO }),
        nvme: NvmeConfig {
            queues: 8,
            queue_depth: 1024,
            controller_cores: 8,
            command_overhead: Nanos(1000),
            arbitration: Arbitration::RoundRobin,
        },
    }
}

/// hWA-BC's `G = a·ln(R) + b` for a preset's drive, fitted by `flashmux profile gc-contribution
/// --device <preset> --capacity 16GiB` (defaults otherwise: 4, 8 and 16 KiB against 64 KiB, 30 s
/// each, seed 1; the table is in docs/MODEL.md §3, "hwabc"); the null device, which has no GC,
/// gets the relation the paper's observation implies (`HwabcParams::PAPER`).
pub fn gc_contribution_fit(preset: &str) -> (f64, f64) {
    match preset {
        "cosmos" => (0.1396, 0.6639),
        "paper-c" => (-0.0149, 0.4825),
        "x25e" => (-0.0088, 0.4897),
        "840pro" => (0.0058, 0.5068),
        "tlc-nvme" | "tlc-nvme-fdp" => (0.2189, 0.7569),
        _ => crate::host::HwabcParams::PAPER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::Ftl;

    #[test]
    fn every_preset_is_valid_and_gc_can_progress() {
        for name in PRESET_NAMES {
            let p = preset(name).unwrap();
            assert_eq!(p.name, name);
            if let DeviceKind::Ssd(c) = &p.kind {
                c.geometry.validate().unwrap();
                let f = Ftl::new(&c.geometry, c.ftl_params());
                assert!(f.is_ok(), "{name}: {:?}", f.err());
                assert!(c.buffer_units >= 2 * c.geometry.planes() * c.geometry.units_per_page());
            }
        }
        assert!(preset("nope").is_none());
    }

    #[test]
    fn paper_c_matches_the_paper() {
        let DeviceKind::Ssd(c) = preset("paper-c").unwrap().kind else { panic!() };
        assert_eq!(c.geometry.physical_bytes(), 8 << 30);
        assert_eq!((c.geometry.channels, c.geometry.chips_per_channel), (8, 2));
        assert_eq!(c.timing.program, Nanos::from_us(550));
        assert_eq!(c.timing.read, Nanos::from_us(65));
        assert_eq!(c.timing.erase, Nanos::from_us(1500));
        assert_eq!(c.overprovisioning, 0.03);
    }
}
