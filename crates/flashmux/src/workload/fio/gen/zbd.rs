//! fio's zoned block device mode (`zonemode=zbd`), ported from fio's `zbd.c`: a job's writes go
//! to the write pointer of a zone it may write, its reads stay below the write pointers, its
//! trims are zone resets, and fio resets and finishes zones itself when it needs to.
//!
//! The host's view of the drive is fio's `struct zoned_block_device_info` ([`ZbdDevice`]): the
//! write pointer of every zone as fio advances it, the zones being written (`write_zones`, at
//! most `max_open_zones`), the written bytes for `zone_reset_threshold` and the write count for
//! `zone_reset_frequency`. It is shared by every job on the drive, as fio shares it between the
//! jobs that open the same device (`zbd_init_zone_info`); one job's state (`td->num_write_zones`,
//! its zone range `f->min_zone`..`f->max_zone`) is a [`ZbdJob`].
//!
//! How fio's threads and locks come out here: the generator runs one job at a time, so fio's zone
//! locks and `io_u_quiesce` waits have nothing to order; the write pointer moves when a write is
//! generated (fio moves it when the write is queued, `zbd_queue_io`), and a zone leaves the
//! written zones when the write that fills it is generated (fio, when it completes,
//! `zbd_end_zone_io`). The waits themselves — fio quiesces its I/O before a zone reset or finish
//! and issues it synchronously — are the caller's: a reset or finish is an [`IoUnit`] with
//! [`IoUnit::zone`] set, which the job issues alone, once its other I/O has completed, and
//! waits for. fio's retries after such waits (`should_retry` in `zbd_convert_to_write_zone`)
//! find the same state here, and are not repeated.
//!
//! Every zone is sequential write required and starts empty with its write pointer at its
//! start, as the drive reports at start ([`ZonedDisk`]): fio's conventional zones, offline
//! zones and zones open at start do not arise.

use std::sync::{Arc, Mutex, MutexGuard};

use super::{IoUnit, READ, TRIM, WRITE};
use crate::workload::fio::Dir;

/// fio's `ZBD_MAX_WRITE_ZONES`: the size of its array of written zones.
const MAX_WRITE_ZONES: usize = crate::workload::fio::ZBD_MAX_WRITE_ZONES as usize;

/// A zoned drive as the host learns it at start (Identify Namespace, Report Zones): `zones`
/// zones of `zone_bytes` each from byte 0, of which the first `capacity_bytes` are writable
/// (ZNS's zone capacity, fio's `zonecapacity` on a zoned device), every zone empty.
/// `max_open`/`max_active` are the drive's open and active zone limits (ZNS MOR + 1 and
/// MAR + 1; `None`: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZonedDisk {
    pub zone_bytes: u64,
    pub capacity_bytes: u64,
    pub zones: u32,
    pub max_open: Option<u32>,
    pub max_active: Option<u32>,
}

impl ZonedDisk {
    /// The drive's size in bytes.
    pub fn bytes(&self) -> u64 {
        self.zone_bytes * u64::from(self.zones)
    }
}

/// The zone command an [`IoUnit`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZoneOp {
    /// Zone Management Send, Reset of the zone starting at the unit's offset; its length is the
    /// zone size. With [`Dir::Write`] it is fio's own reset (`zbd_reset_zone`, not I/O in fio's
    /// statistics); with [`Dir::Trim`] it is a trim, which fio does as a zone reset
    /// (`zbd_do_io_u_trim`) and counts as a trim.
    Reset,
    /// Zone Management Send, Finish of the zone starting at the unit's offset (`zbd_finish_zone`),
    /// not I/O in fio's statistics.
    Finish,
    /// A write sent as a Zone Append to the zone starting at the unit's offset
    /// (`write_mode=zone_append`); the drive writes it at the zone's write pointer.
    Append,
}

/// fio's `struct zoned_block_device_info` for one drive: shared by the jobs on it (cloning the
/// handle shares it). Build one per drive and job file with [`ZbdDevice::new`] and give it to
/// each of the file's jobs ([`super::JobGen::new_zoned`]).
#[derive(Debug, Clone)]
pub struct ZbdDevice(Arc<Mutex<ZbdInfo>>);

#[derive(Debug)]
pub(super) struct ZbdInfo {
    disk: ZonedDisk,
    /// fio's `max_write_zones` (0: no limit), set by the first job on the drive
    /// (`zbd_set_max_write_zones`); `None` before.
    max_write_zones: Option<u32>,
    /// Per zone: the write pointer (device bytes), whether it is being written (`write`), and
    /// whether it is to be reset before its next write (`reset_zone`).
    wp: Vec<u64>,
    write: Vec<bool>,
    reset_zone: Vec<bool>,
    /// fio's `write_zones` array and `num_write_zones`: the array keeps its stale tail after a
    /// removal (fio `memmove`s it), which fio reads when the count is 0.
    write_zones: Vec<u32>,
    num_write_zones: usize,
    /// `wp_valid_data_bytes`, `write_min_zone`, `write_max_zone`, `write_cnt`.
    wp_valid_data_bytes: u64,
    write_min_zone: u32,
    write_max_zone: u32,
    write_cnt: u32,
    resets: u64,
    finishes: u64,
}

impl ZbdDevice {
    /// The host's view of `disk` at start: every zone empty, none being written.
    pub fn new(disk: ZonedDisk) -> Result<ZbdDevice, String> {
        if disk.zones == 0 || disk.zone_bytes == 0 {
            return Err("a zoned drive needs at least one zone of at least one byte".into());
        }
        if disk.zone_bytes % 512 != 0 {
            return Err(format!("zone size {} is not a multiple of 512 bytes", disk.zone_bytes));
        }
        if disk.capacity_bytes == 0 || disk.capacity_bytes > disk.zone_bytes || disk.capacity_bytes % 512 != 0 {
            return Err(format!(
                "zone capacity {} must be a multiple of 512 bytes from 512 to the zone size {}",
                disk.capacity_bytes, disk.zone_bytes
            ));
        }
        if disk.zone_bytes.checked_mul(u64::from(disk.zones) + 1).is_none() {
            return Err("the zoned drive's size overflows".into());
        }
        let n = disk.zones as usize;
        Ok(ZbdDevice(Arc::new(Mutex::new(ZbdInfo {
            disk,
            max_write_zones: None,
            wp: (0..disk.zones).map(|i| u64::from(i) * disk.zone_bytes).collect(),
            write: vec![false; n],
            reset_zone: vec![false; n],
            write_zones: vec![0; MAX_WRITE_ZONES],
            num_write_zones: 0,
            wp_valid_data_bytes: 0,
            write_min_zone: 0,
            write_max_zone: 0,
            write_cnt: 0,
            resets: 0,
            finishes: 0,
        }))))
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, ZbdInfo> {
        // Nothing panics while holding it; a poisoned lock still holds consistent state.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn disk(&self) -> ZonedDisk {
        self.lock().disk
    }

    /// Zone `zone`'s write pointer as fio keeps it (device bytes).
    pub fn write_pointer(&self, zone: u32) -> u64 {
        self.lock().wp[zone as usize]
    }

    /// The zones being written (fio's write target zones), in fio's order.
    pub fn write_zones(&self) -> Vec<u32> {
        let z = self.lock();
        z.write_zones[..z.num_write_zones].to_vec()
    }

    /// The limit on zones written at once all jobs share (fio's `max_write_zones`; 0: none),
    /// once a job has met the drive.
    pub fn max_write_zones(&self) -> Option<u32> {
        self.lock().max_write_zones
    }

    /// Zone resets (fio's and trims') and finishes generated so far by all jobs.
    pub fn resets_and_finishes(&self) -> (u64, u64) {
        let z = self.lock();
        (z.resets, z.finishes)
    }
}

impl ZbdInfo {
    fn zone_size(&self) -> u64 {
        self.disk.zone_bytes
    }

    fn nr_zones(&self) -> u32 {
        self.disk.zones
    }

    /// `zbd_offset_to_zone_idx`: the sentinel (`nr_zones`) for offsets past the end.
    fn zone_idx(&self, offset: u64) -> u32 {
        (offset / self.disk.zone_bytes).min(u64::from(self.disk.zones)) as u32
    }

    fn start(&self, z: u32) -> u64 {
        u64::from(z) * self.disk.zone_bytes
    }

    /// `zbd_zone_end`: the next zone's start.
    fn end(&self, z: u32) -> u64 {
        self.start(z + 1)
    }

    /// `zbd_zone_capacity_end`.
    fn capacity_end(&self, z: u32) -> u64 {
        self.start(z) + self.disk.capacity_bytes
    }

    /// The write pointer; fio's sentinel zone is zeroed memory.
    fn wp(&self, z: u32) -> u64 {
        self.wp.get(z as usize).copied().unwrap_or(0)
    }

    /// `zbd_zone_remainder`.
    fn remainder(&self, z: u32) -> u64 {
        self.capacity_end(z).saturating_sub(self.wp(z))
    }

    /// `zbd_zone_full` (without `write_zone_remainder`, which is refused).
    fn full(&self, z: u32, required: u64) -> bool {
        required > self.remainder(z)
    }

    /// `_zbd_reset_write_cnt`: `1 / zone_reset_frequency` writes to the next reset.
    fn reset_write_cnt(&mut self, zrf: f64) {
        self.write_cnt = if zrf > 0.0 { (1.0 / zrf).min(f64::from(u32::MAX)) as u32 } else { u32::MAX };
    }

    /// `zbd_dec_and_reset_write_cnt`.
    fn dec_and_reset_write_cnt(&mut self, zrf: f64) -> bool {
        let mut left = 0;
        if self.write_cnt > 0 {
            self.write_cnt -= 1;
            left = self.write_cnt;
        }
        if left == 0 {
            self.reset_write_cnt(zrf);
        }
        left == 0
    }

    /// `zbd_pick_write_zone`'s and `zbd_convert_to_write_zone`'s "quasi-random" index into the
    /// written zones (`pick_random_zone_idx`): the offset's place in the file, scaled.
    fn pick_random_idx(&self, f: FileView, offset: u64) -> usize {
        let pos = u128::from(offset.wrapping_sub(f.file_offset));
        (pos * self.num_write_zones as u128 / u128::from(f.io_size.max(1))) as usize
    }
}

/// The job's file as fio's `zbd.c` sees it: `f->file_offset` (which `zoneskip` moves) and
/// `f->io_size`, in device bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct FileView {
    pub file_offset: u64,
    pub io_size: u64,
}

impl FileView {
    /// `is_valid_offset`.
    fn valid(&self, offset: u64) -> bool {
        offset.wrapping_sub(self.file_offset) < self.io_size
    }
}

/// One job's part of fio's zoned mode: its zone range and open zone count, its options, and
/// the zone commands it has generated and not yet handed out.
#[derive(Debug, Clone)]
pub(super) struct ZbdJob {
    pub dev: ZbdDevice,
    /// `f->min_zone`, `f->max_zone` (exclusive).
    pub min_zone: u32,
    pub max_zone: u32,
    /// `td->num_write_zones` (fio's unsigned arithmetic: another job's put can wrap it).
    num_write_zones: u32,
    pub job_max_open_zones: u32,
    /// `td->o.min_bs` per direction.
    pub min_bs: [u64; 3],
    /// `td_random`, `td_write`, `td_rw`, `rwmix[DDIR_WRITE] == 0`.
    pub random: bool,
    pub writes: bool,
    pub rw_mix: bool,
    pub no_mixed_writes: bool,
    pub read_beyond_wp: bool,
    /// `zone_reset_threshold`, `zone_reset_frequency`.
    pub zrt: f64,
    pub zrf: f64,
    /// `verify` is set (not `none`).
    pub verify: bool,
    pub append: bool,
    /// `zoneskip` in bytes (a multiple of the zone size).
    pub zone_skip: u64,
    /// Zone commands generated, to be handed out in order before the I/O that needed them.
    pub cmds: std::collections::VecDeque<IoUnit>,
    /// fio's `nr_zone_resets` for this job.
    pub resets: u64,
    /// It is the job that counts the written bytes of the range when it starts
    /// (`zbd_verify_and_set_vdb`, for the first job with `zone_reset_threshold`).
    counts_written: bool,
}

/// A zone command for zone `z`.
fn command(zi: &ZbdInfo, z: u32, dir: Dir, op: ZoneOp) -> IoUnit {
    IoUnit { dir, offset: zi.start(z), len: zi.zone_size(), dspec: 0, zone: Some(op) }
}

impl ZbdJob {
    pub fn new(dev: ZbdDevice) -> ZbdJob {
        ZbdJob {
            dev,
            min_zone: 0,
            max_zone: 0,
            num_write_zones: 0,
            job_max_open_zones: 0,
            min_bs: [0; 3],
            random: false,
            writes: false,
            rw_mix: false,
            no_mixed_writes: false,
            read_beyond_wp: false,
            zrt: 0.0,
            zrf: 0.0,
            verify: false,
            append: false,
            zone_skip: 0,
            cmds: Default::default(),
            resets: 0,
            counts_written: false,
        }
    }

    /// `accounting_vdb`: the written bytes are counted for `zone_reset_threshold`.
    fn accounting_vdb(&self) -> bool {
        self.zrt != 0.0 && self.writes
    }

    /// `__zbd_reset_zone`: a reset command if the zone holds data, the write pointer back to
    /// the zone's start.
    fn reset_zone_wp(&mut self, zi: &mut ZbdInfo, z: u32) {
        let data = zi.wp(z) - zi.start(z);
        if data == 0 {
            return;
        }
        self.cmds.push_back(command(zi, z, Dir::Write, ZoneOp::Reset));
        self.note_reset(zi, z, data);
    }

    /// What a reset of `data` bytes of zone `z` does to fio's counts. fio subtracts the zone's
    /// data whether or not it counted it in (a finished zone's unwritten end), unsigned.
    fn note_reset(&mut self, zi: &mut ZbdInfo, z: u32, data: u64) {
        if self.accounting_vdb() {
            zi.wp_valid_data_bytes = zi.wp_valid_data_bytes.wrapping_sub(data);
        }
        zi.wp[z as usize] = zi.start(z);
        zi.resets += 1;
        self.resets += 1;
    }

    /// `zbd_write_zone_put`: zone `z` is no longer being written.
    fn write_zone_put(&mut self, zi: &mut ZbdInfo, z: u32) {
        if !zi.write[z as usize] {
            return;
        }
        let Some(i) = zi.write_zones[..zi.num_write_zones].iter().position(|&w| w == z) else { return };
        zi.write_zones.copy_within(i + 1.., i);
        zi.num_write_zones -= 1;
        self.num_write_zones = self.num_write_zones.wrapping_sub(1);
        zi.write[z as usize] = false;
    }

    /// `__zbd_write_zone_get`: zone `z` is (or may become) one the job writes, within
    /// `max_open_zones` and `job_max_open_zones`.
    fn write_zone_get_any(&mut self, zi: &mut ZbdInfo, z: u32) -> bool {
        if self.verify && zi.remainder(z) == 0 {
            return false;
        }
        let Some(max) = zi.max_write_zones.filter(|&m| m > 0) else { return true };
        if zi.write[z as usize] {
            // A zone filled by writes already out is full, not a zone being written.
            return zi.remainder(z) != 0;
        }
        if self.job_max_open_zones > 0 && self.num_write_zones >= self.job_max_open_zones {
            return false;
        }
        if zi.num_write_zones >= max as usize {
            return false;
        }
        zi.write_zones[zi.num_write_zones] = z;
        zi.num_write_zones += 1;
        self.num_write_zones = self.num_write_zones.wrapping_add(1);
        zi.write[z as usize] = true;
        true
    }

    /// `zbd_write_zone_get`: with verify, a full zone is never written again.
    fn write_zone_get(&mut self, zi: &mut ZbdInfo, z: u32) -> bool {
        if self.verify && zi.full(z, self.min_bs[WRITE]) {
            return false;
        }
        self.write_zone_get_any(zi, z)
    }

    /// `zbd_finish_zone`: a finish command; the write pointer goes to the zone's end (fio does
    /// not count the unwritten end in the written bytes).
    fn finish_zone(&mut self, zi: &mut ZbdInfo, z: u32) {
        self.cmds.push_back(command(zi, z, Dir::Write, ZoneOp::Finish));
        zi.wp[z as usize] = zi.end(z);
        zi.finishes += 1;
    }

    /// `zbd_pick_write_zone`: from a quasi-random place in the written zones, the first in the
    /// job's range.
    fn pick_write_zone(&self, zi: &ZbdInfo, f: FileView, offset: u64) -> Option<u32> {
        let n = zi.num_write_zones;
        let mut i = zi.pick_random_idx(f, offset);
        for _ in 0..n {
            if i >= n {
                i = 0;
            }
            let z = zi.write_zones[i];
            if (self.min_zone..self.max_zone).contains(&z) {
                return Some(z);
            }
            i += 1;
        }
        None
    }

    /// `zbd_convert_to_write_zone`: the zone a write with offset `offset` (in zone `zb`) goes
    /// to, opening it within the limits, or finishing zones whose remainder is smaller than a
    /// block; `None` if there is none (fio's `io_u_eof`). In order:
    ///
    /// 1. A first zone with a remainder smaller than the least write block is finished, and the
    ///    next zone (wrapping in the job's range) is the first instead — unless it was the
    ///    range's last and the job is sequential, which ends the pass.
    /// 2. The first zone, if the job may write it.
    /// 3. Else, with open zone limits, the written zone at the offset's quasi-random place
    ///    (`pick_random_zone_idx`), or with none the offset's zone, clamped to the job's range,
    ///    then `zbd_pick_write_zone` until it settles; taken if a block fits.
    /// 4. Else: a random job tries its first zone again; then the following zones in turn
    ///    (wrapping), skipping those being written, the first it may write.
    /// 5. Else any zone being written in the job's range in which a block fits.
    /// 6. Else a random job (without verify) finishes the written zone `zbd_pick_write_zone`
    ///    picks, and writes there (the full zone is then reset).
    fn convert_to_write_zone(&mut self, zi: &mut ZbdInfo, f: FileView, offset: &mut u64, first: u32) -> Option<u32> {
        let min_bs = self.min_bs[WRITE];
        let mut zb = first;
        if zi.remainder(zb) > 0 && zi.remainder(zb) < min_bs {
            self.write_zone_put(zi, zb);
            self.finish_zone(zi, zb);
            if zb + 1 >= self.max_zone && !self.random {
                return None;
            }
            zb += 1;
            if zb >= self.max_zone {
                zb = self.min_zone;
            }
        }
        if self.write_zone_get(zi, zb) {
            return Some(zb);
        }
        let limited = zi.max_write_zones.unwrap_or(0) > 0 || self.job_max_open_zones > 0;
        let mut zone_idx = if limited {
            zi.write_zones[zi.pick_random_idx(f, *offset).min(MAX_WRITE_ZONES - 1)]
        } else {
            zi.zone_idx(*offset)
        };
        zone_idx = zone_idx.clamp(self.min_zone, self.max_zone - 1);
        let examine = loop {
            if !limited {
                break true;
            }
            if zi.num_write_zones == 0 {
                break false;
            }
            let new = self.pick_write_zone(zi, f, *offset)?;
            if new == zone_idx {
                break true;
            }
            zone_idx = new;
        };
        // fio's `out:` label: the write moves to the chosen zone's start.
        let mut out = |z: u32| {
            *offset = zi.start(z);
            Some(z)
        };
        if examine && zi.remainder(zone_idx) >= min_bs {
            return out(zone_idx);
        }
        // fio waits for its writes here when the limits are reached; nothing changes by it.
        let mut z = zone_idx;
        if self.random {
            if self.write_zone_get(zi, zb) {
                return Some(zb);
            }
            z = zb;
        }
        for _ in 0..f.io_size / zi.zone_size() {
            z += 1;
            if !f.valid(zi.start(z)) {
                z = self.min_zone;
            }
            if zi.write[z as usize] {
                continue;
            }
            if self.write_zone_get(zi, z) {
                *offset = zi.start(z);
                return Some(z);
            }
        }
        for i in 0..zi.num_write_zones {
            let w = zi.write_zones[i];
            if !(self.min_zone..self.max_zone).contains(&w) {
                continue;
            }
            if zi.remainder(w) >= min_bs && self.write_zone_get(zi, w) {
                *offset = zi.start(w);
                return Some(w);
            }
        }
        if self.random && !self.verify {
            if let Some(w) = self.pick_write_zone(zi, f, *offset) {
                self.finish_zone(zi, w);
                *offset = zi.start(w);
                return Some(w);
            }
        }
        None
    }

    /// `zbd_find_zone`: the next zone of the job's range (and for a random job also the
    /// nearest before) with at least `min_bytes` written.
    fn find_zone(&self, zi: &ZbdInfo, min_bytes: u64, zb: u32) -> Option<u32> {
        let (zf, zl) = (i64::from(self.min_zone), i64::from(self.max_zone));
        let (mut z1, mut z2) = (i64::from(zb) + 1, i64::from(zb) - 1);
        let readable = |z: i64| zi.start(z as u32) + min_bytes <= zi.wp(z as u32);
        while z1 < zl || z2 >= zf {
            if z1 < zl {
                if readable(z1) {
                    return Some(z1 as u32);
                }
            } else if !self.random {
                break;
            }
            if self.random && z2 >= zf && readable(z2) {
                return Some(z2 as u32);
            }
            z1 += 1;
            z2 -= 1;
        }
        None
    }

    /// `zbd_adjust_ddir`: a mixed job reads nothing before it has written, unless it reads
    /// beyond write pointers or never writes.
    pub fn adjust_ddir(&self, d: usize, wrote: bool) -> usize {
        if d != READ || !self.rw_mix || wrote || self.read_beyond_wp || self.no_mixed_writes {
            d
        } else {
            WRITE
        }
    }

    /// `zbd_adjust_block`: the I/O's offset and length as fio sends it, or `None` (fio's
    /// `io_u_eof`, which ends the pass). Zone commands it needs first go to `cmds`.
    ///
    /// - Reads (`read_beyond_wp` off): a zone with less than a block written, or for a
    ///   sequential job a read whose block would pass the write pointer, moves the read to the
    ///   next zone with a block written (`zbd_find_zone`; a random job also looks back), at its
    ///   start for a sequential job; none ends the pass. A random read keeps its place in the
    ///   zone modulo the written range (`(offset - zone start) % (written - len)`, in blocks);
    ///   the length is cut at the write pointer.
    /// - Writes: the zone from `zbd_convert_to_write_zone`; past `zone_reset_threshold` every
    ///   `1 / zone_reset_frequency`-th write marks it for a reset; a marked or full zone is reset;
    ///   the write goes at the write pointer, cut at the zone capacity to whole blocks.
    /// - Random trims of an empty zone go to the nearest zone with data.
    pub fn adjust_block(&mut self, f: FileView, d: usize, offset: u64, len: u64) -> Option<(u64, u64)> {
        let dev = self.dev.clone();
        let mut guard = dev.lock();
        let zi = &mut *guard;
        let min_bs = self.min_bs[d];
        let zb = zi.zone_idx(offset);
        if zb >= zi.nr_zones() {
            return None;
        }
        match d {
            READ => {
                if self.read_beyond_wp {
                    return Some((offset, len));
                }
                let orig = zb;
                let mut zb = zb;
                let (mut offset, mut len) = (offset, len);
                let mut range = zi.wp(zb) - zi.start(zb);
                if range < min_bs || (!self.random && offset + min_bs > zi.wp(zb)) {
                    zb = self.find_zone(zi, min_bs, zb)?;
                    range = zi.wp(zb) - zi.start(zb);
                    if !self.random {
                        offset = zi.start(zb);
                    }
                }
                if range <= len {
                    offset = zi.start(zb);
                } else if self.random {
                    offset = zi.start(zb) + ((offset - zi.start(orig)) % (range - len)) / min_bs * min_bs;
                }
                let new_len = len.min(zi.wp(zb) - offset) / min_bs * min_bs;
                if new_len < len {
                    len = new_len;
                }
                Some((offset, len))
            }
            WRITE => {
                if len > zi.zone_size() {
                    return None;
                }
                let (mut z, mut offset) = (zb, offset);
                // fio retries until the zone has no small remainder; each retry finishes one.
                for _ in 0..=zi.nr_zones() {
                    z = self.convert_to_write_zone(zi, f, &mut offset, z)?;
                    let rem = zi.remainder(z);
                    if rem == 0 || rem >= min_bs {
                        break;
                    }
                }
                if zi.remainder(z) > 0 && zi.remainder(z) < min_bs {
                    return None;
                }
                if self.zrf != 0.0
                    && zi.wp_valid_data_bytes as f64 >= f.io_size as f64 * self.zrt
                    && zi.dec_and_reset_write_cnt(self.zrf)
                {
                    zi.reset_zone[z as usize] = true;
                }
                if zi.reset_zone[z as usize] || zi.full(z, min_bs) {
                    zi.reset_zone[z as usize] = false;
                    self.reset_zone_wp(zi, z);
                    if zi.disk.capacity_bytes < min_bs {
                        return None;
                    }
                }
                let offset = zi.wp(z);
                if !f.valid(offset) {
                    return None;
                }
                let new_len = len.min(zi.capacity_end(z) - offset) / min_bs * min_bs;
                if new_len == len || new_len >= min_bs {
                    Some((offset, new_len))
                } else {
                    None
                }
            }
            TRIM => {
                if !self.random || zi.wp(zb) > zi.start(zb) {
                    return Some((offset, len));
                }
                let z = self.find_zone(zi, 1, zb)?;
                Some((zi.start(z), len))
            }
            _ => Some((offset, len)),
        }
    }

    /// What happens as the I/O is sent (`zbd_queue_io`, and `zbd_end_zone_io` at its
    /// completion, done here at once): a write moves its zone's write pointer (to at most the
    /// capacity) and counts its bytes for the threshold; a write that reaches the capacity ends
    /// the zone's being written. A trim resets its zone (`zbd_do_io_u_trim`): the I/O is the
    /// reset; `None` if its offset is not a zone's start (fio's "Trim offset not at zone
    /// start", which fails the job). Returns the I/O as it goes to the drive.
    pub fn queue(&mut self, io: IoUnit) -> Option<IoUnit> {
        let dev = self.dev.clone();
        let mut guard = dev.lock();
        let zi = &mut *guard;
        let z = zi.zone_idx(io.offset);
        match io.dir {
            Dir::Write => {
                let zone_end = (io.offset + io.len).min(zi.capacity_end(z));
                if self.accounting_vdb() && zi.wp(z) <= zone_end {
                    // Unsigned, as fio's: a reset may have taken it below zero (`note_reset`).
                    zi.wp_valid_data_bytes = zi.wp_valid_data_bytes.wrapping_add(zone_end - zi.wp(z));
                }
                zi.wp[z as usize] = zone_end;
                if io.offset + io.len >= zi.capacity_end(z) {
                    self.write_zone_put(zi, z);
                }
                if self.append {
                    return Some(IoUnit { offset: zi.start(z), zone: Some(ZoneOp::Append), ..io });
                }
                Some(io)
            }
            Dir::Trim => {
                if io.offset != zi.start(z) {
                    return None;
                }
                let data = zi.wp(z) - zi.start(z);
                if data > 0 {
                    self.note_reset(zi, z, data);
                }
                self.write_zone_put(zi, z);
                Some(IoUnit { zone: Some(ZoneOp::Reset), ..io })
            }
            Dir::Read => Some(io),
        }
    }

    /// What fio does as the job starts (its `setup_files` and first `fio_file_reset`, at the
    /// job's start, so after the jobs of earlier phases have written): the first job with
    /// `zone_reset_threshold` counts the bytes written in its range; then `file_reset`.
    pub fn start(&mut self) {
        if self.counts_written {
            let mut zi = self.dev.lock();
            zi.wp_valid_data_bytes = (self.min_zone..self.max_zone).map(|z| zi.wp(z) - zi.start(z)).sum();
        }
        self.file_reset();
    }

    /// `zbd_file_reset`, as fio resets the job's file at the start of each pass: a writing job
    /// with verify resets its zones first (so that what it verifies is what it wrote), and the
    /// count to the next `zone_reset_frequency` reset starts again.
    pub fn file_reset(&mut self) {
        if !self.writes {
            return;
        }
        let dev = self.dev.clone();
        let mut guard = dev.lock();
        let zi = &mut *guard;
        if self.verify {
            // zbd_reset_zones
            for z in self.min_zone..self.max_zone {
                if zi.wp(z) != zi.start(z) {
                    self.reset_zone_wp(zi, z);
                    self.write_zone_put(zi, z);
                }
            }
        }
        zi.reset_write_cnt(self.zrf);
    }

    /// `setup_zbd_zone_mode`: before a sequential write picks its offset, a position at the
    /// capacity of a zone smaller than its size jumps to the zone's end; with `zoneskip`, a
    /// sequential job moves on `zonesize + zoneskip` once it has done a zone's worth of bytes,
    /// reached the zone's end, or (reads) its write pointer, wrapping to its start offset at
    /// the end of the file. Positions are device bytes; returns the new (position, file offset)
    /// and whether the zone byte count restarts.
    pub fn zone_mode(&self, d: usize, pos: u64, file_offset: u64, zone_bytes: u64) -> ZoneStep {
        let zi = self.dev.lock();
        let mut step = ZoneStep { pos, file_offset, skipped: false };
        let z = zi.zone_idx(pos);
        let real = z < zi.nr_zones();
        if real && zi.disk.capacity_bytes < zi.zone_size() && !self.random && d == WRITE && pos >= zi.capacity_end(z) {
            step.pos = zi.end(z);
        }
        if self.random || self.zone_skip == 0 {
            return step;
        }
        let wp = zi.wp(z);
        if zone_bytes >= zi.zone_size() || step.pos >= zi.end(z) || (d == READ && !self.read_beyond_wp && step.pos >= wp) {
            step.skipped = true;
            step.file_offset = file_offset.saturating_add(zi.zone_size() + self.zone_skip);
        }
        step
    }
}

/// A write decided after zone commands it needed: its I/O as first generated (`offset`,
/// `len`, device bytes) and as adjusted (`at`, `adjusted`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Resume {
    pub d: usize,
    pub offset: u64,
    pub len: u64,
    pub at: u64,
    pub adjusted: u64,
}

impl ZbdJob {
    /// The write adjusted to `at` with `len`, once its zone commands are out: at the zone's
    /// write pointer (which other jobs may have moved since), cut at the capacity to whole
    /// blocks; `None` if it no longer fits a block (zbd_adjust_block's last step).
    pub fn resume_write(&mut self, f: FileView, at: u64, len: u64) -> Option<(u64, u64)> {
        let zi = self.dev.lock();
        let z = zi.zone_idx(at);
        let min_bs = self.min_bs[WRITE];
        let offset = zi.wp(z);
        let new_len = len.min(zi.capacity_end(z).saturating_sub(offset)) / min_bs * min_bs;
        (f.valid(offset) && new_len >= min_bs).then_some((offset, new_len))
    }
}

/// What `setup_zbd_zone_mode` did: the position and file offset after it, and whether it moved
/// to another zone (the caller then wraps the file offset and restarts the position there).
#[derive(Debug, Clone, Copy)]
pub(super) struct ZoneStep {
    pub pos: u64,
    pub file_offset: u64,
    pub skipped: bool,
}

/// Setting a job up on the drive (`zbd_set_max_write_zones`, `zbd_verify_and_set_vdb`, the
/// write-job checks of `zbd_setup_files`). `Err` is fio's message.
impl ZbdJob {
    pub fn setup(&mut self, max_open_zones: u32, ignore_zone_limits: bool) -> Result<(), String> {
        let dev = self.dev.clone();
        let mut guard = dev.lock();
        let zi = &mut *guard;
        let max = match zi.max_write_zones {
            Some(m) => m,
            None => {
                // zbd_set_max_write_zones, for the first job on the drive.
                let m = match zi.disk.max_open.filter(|&m| m > 0) {
                    _ if ignore_zone_limits => max_open_zones,
                    None => max_open_zones,
                    Some(dev) if max_open_zones == 0 => dev,
                    Some(dev) if max_open_zones <= dev => max_open_zones,
                    Some(dev) => {
                        return Err(format!(
                            "max_open_zones={max_open_zones} is larger than the drive's limit of {dev} open zones \
                             (ignore_zone_limits=1 allows it)"
                        ))
                    }
                };
                if m as usize > MAX_WRITE_ZONES {
                    return Err(format!(
                        "max_open_zones: the drive's limit of {m} open zones is larger than fio's {MAX_WRITE_ZONES}"
                    ));
                }
                zi.max_write_zones = Some(m);
                m
            }
        };
        if max_open_zones > 0 && max != max_open_zones {
            return Err(format!(
                "max_open_zones={max_open_zones} differs from the {max} of an earlier job on the drive \
                 (fio: Different 'max_open_zones' values)"
            ));
        }
        if self.accounting_vdb() {
            // zbd_verify_and_set_vdb
            if zi.write_min_zone != zi.write_max_zone {
                if zi.write_min_zone != self.min_zone || zi.write_max_zone != self.max_zone {
                    return Err("zone_reset_threshold: jobs with different write ranges on the drive are not supported".into());
                }
            } else {
                zi.write_min_zone = self.min_zone;
                zi.write_max_zone = self.max_zone;
                self.counts_written = true;
            }
        }
        if self.writes && self.job_max_open_zones > 0 && max == 0 {
            return Err("job_max_open_zones cannot be used without a limit on open zones for the drive (max_open_zones)".into());
        }
        Ok(())
    }
}


#[cfg(test)]
mod tests;
