//! [`JobGen`]: the I/O stream of one instance of a job, ported from fio's `io_u.c` (offsets,
//! block sizes, directions) and `backend.c` (when a pass and the job end).
//!
//! Positions are kept as fio keeps them, relative to the start of the job's space ("the file"):
//! the region is `[region_start, region_start + region_len)`.
//!
//! This file owns the generator's state and the issuing of I/O (the hot path: `next`, `fill`,
//! the direction, offset and size draws, the ends of passes); setting an instance up from its
//! job — checks, region, block sizes, the random-offset scheme, limits — is in gen/setup.rs.

mod files;
mod placement;
mod setup;
mod zbd;

pub use zbd::{ZbdDevice, ZoneOp, ZonedDisk};

use super::dist::{self, JobRng, RandomMap, SkewSampler, ZoneTable};
use super::job::{BsSplit, StridedZones};
use super::Dir;

/// One I/O. `offset` is in bytes from the start of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoUnit {
    pub dir: Dir,
    pub offset: u64,
    pub len: u64,
    /// The directive specific value fio puts in a write command (NVMe DSPEC, fio's
    /// `io_u->dspec`): with `dataplacement=fdp` the write's placement ID, with `streams` its
    /// stream ID (which directive is the job's [`FioJob::data_placement`](super::FioJob));
    /// 0 for reads, trims and every I/O of a job without data placement. Chosen by
    /// `plid_select` (see gen/placement.rs).
    pub dspec: u16,
    /// `zonemode=zbd`: the zone command this unit is, if any (see [`ZoneOp`]): fio's own
    /// zone resets and finishes, a trim done as a zone reset, a write sent as a Zone Append.
    /// `None` for every other I/O.
    pub zone: Option<ZoneOp>,
}

impl IoUnit {
    /// A zone reset or finish fio makes itself (not a trim): not I/O in fio's statistics, and
    /// issued alone, once the job's other I/O has completed, the job waiting for it (fio
    /// quiesces and issues it synchronously).
    pub fn is_zone_management(&self) -> bool {
        matches!(self.zone, Some(ZoneOp::Reset | ZoneOp::Finish)) && self.dir != Dir::Trim
    }
}

const READ: usize = 0;
const WRITE: usize = 1;
const TRIM: usize = 2;
/// No previous I/O in this direction (fio's `-1ULL`).
const NONE: u64 = u64::MAX;
/// Block-size draws before a variable-size I/O gives up on fitting (fio retries forever; with a
/// 0% `bssplit` entry as the only one that fits, forever is reachable).
const MAX_SIZE_DRAWS: usize = 1000;

/// How random block numbers are drawn.
#[derive(Debug, Clone)]
enum Offsets {
    /// Independent uniform draws.
    Uniform,
    /// Every block once per pass (fio's default random map).
    Map(RandomMap),
    /// fio's zipf, pareto and normal generators keep their own random state, which a new loop
    /// does not reseed.
    Skewed {
        samplers: [Option<SkewSampler>; 3],
        rng: JobRng,
    },
    /// Per direction; a direction without zones draws uniformly.
    Zoned([Option<ZoneTable>; 3]),
}

/// The I/Os of one instance (`clone_index`) of a job, in the order fio would issue them: an
/// [`Iterator`] of [`IoUnit`]s that ends when the job's volume is done. Cloning one forks the
/// stream: both copies continue identically.
#[derive(Debug, Clone)]
pub struct JobGen {
    // What the job does.
    random: bool,
    single_dir: usize,
    read_write_mix: bool,
    trim_write: bool,
    rand_trim_write: bool,
    rwmixread: u32,
    percentage_random: [u32; 3],
    bs_min: [u64; 3],
    bs_max: [u64; 3],
    bssplit: [Box<[BsSplit]>; 3],
    blockalign: [u64; 3],
    last_block: [u64; 3],
    bs_is_seq_rand: bool,
    /// fio's `ddir_seq_nr`: a new random offset every this many I/Os.
    ios_per_offset: u64,
    /// fio's `ddir_seq_add`: bytes skipped after each sequential I/O.
    skip: u64,
    identical: bool,
    time_based: bool,
    /// Every pass replays the same random sequence (fio reseeds at each loop when `randrepeat`
    /// is on and no `randseed` is given).
    replay_passes: bool,
    offsets: Offsets,

    // Where.
    space_offset: u64,
    space_len: u64,
    region_start: u64,
    region_len: u64,
    region_end: u64,
    /// fio's `f->file_offset`, where positions count from: the region's start, except that
    /// strided zones move it to the current zone's start.
    file_offset: u64,
    /// `zonemode=strided`: the zones the I/O walks.
    strided: Option<StridedZones>,
    /// fio's `td->zone_bytes`: bytes transferred in the current zone.
    zone_bytes: u64,

    // When to stop.
    /// Bytes after which a pass ends (fio's `total_bytes` in `do_io`).
    pass_cap: u64,
    /// `io_size`, or `size`.
    volume: u64,
    io_size_set: bool,
    /// Limits across all passes on the directions fio counts, and on I/Os.
    byte_limit: u64,
    ios_limit: u64,
    loops: u64,
    max_bs: u64,
    /// Which directions' bytes count toward `byte_limit` (fio's `__io_bytes_exceeded`).
    counted: [bool; 3],
    start_delay: u64,

    // State.
    rng: JobRng,
    pass_seed: JobRng,
    last_pos: [u64; 3],
    last_start: [u64; 3],
    seq_countdown: u64,
    rwmix_dir: usize,
    rwmix_issues: u64,
    issues: [u64; 3],
    passes_done: u64,
    pass_bytes: u64,
    pass_ios: u64,
    /// fio's issue-side bytes of the counted directions (`io_issue_bytes`), checked against
    /// `byte_limit`.
    counted_bytes: u64,
    /// fio's completed-I/O counters (`io_bytes`, `io_blocks`), which restart when the ramp
    /// ends: they decide `number_ios` and whether another pass runs.
    stat_bytes: u64,
    stat_ios: u64,
    /// Totals for `bytes_issued` and `ios_issued`.
    bytes: u64,
    ios: u64,
    done: bool,
    /// With `nrfiles > 1`, the files (each with its own generator) this one serves I/O from;
    /// its own state then only describes the whole range and counts.
    files: Option<Box<files::FileSet>>,
    /// It is one of those files: it ends when its range is used up, and restarts when the job
    /// starts a pass (`restart_in_set`).
    in_set: bool,
    /// The job's data placement: what each write's `dspec` is. A job's files have none of
    /// their own; the job places what they issue.
    placement: Option<Box<placement::Placer>>,
    /// `zonemode=zbd`: the job's part of fio's zoned mode, with the drive's state it shares
    /// with the other jobs on the drive (so a clone of the generator shares it too).
    zbd: Option<Box<zbd::ZbdJob>>,
    /// A write that needed zone commands first: finished once they are handed out.
    zbd_resume: Option<zbd::Resume>,
    /// The job has started (fio's start-of-job zone work is done).
    zbd_started: bool,
}

impl JobGen {
    /// Bytes in all I/Os returned so far.
    pub fn bytes_issued(&self) -> u64 {
        self.bytes
    }

    /// I/Os returned so far.
    pub fn ios_issued(&self) -> u64 {
        self.ios
    }

    /// The job's region on the device: (first byte, length).
    pub fn region(&self) -> (u64, u64) {
        (self.space_offset + self.region_start, self.region_len)
    }

    /// Passes over its files ended so far: the pass of the last I/O returned, from 0.
    pub fn passes_done(&self) -> u64 {
        self.passes_done
    }

    /// How many files it has (`nrfiles`; 1 for most jobs).
    pub fn file_count(&self) -> usize {
        self.files.as_ref().map_or(1, |f| f.len())
    }

    /// File `i`'s range of the device, (first byte, length): the job's files lie one after
    /// another from its region's start; a job with one file has the region.
    pub fn file_range(&self, i: usize) -> (u64, u64) {
        match &self.files {
            Some(f) => f.range(i),
            None => self.region(),
        }
    }

    /// The index of the file whose range holds device offset `offset`.
    pub fn file_of(&self, offset: u64) -> usize {
        self.files.as_ref().map_or(0, |f| f.file_of(offset))
    }

    /// This instance's `startdelay` in nanoseconds (drawn from the range, if one was given).
    pub fn start_delay(&self) -> u64 {
        self.start_delay
    }

    /// Whether the job ever writes (`rw` includes writes and `rwmixread` leaves them a share).
    pub fn writes(&self) -> bool {
        if self.trim_write {
            return true;
        }
        if self.read_write_mix {
            return self.rwmixread < 100;
        }
        self.single_dir == WRITE
    }

    /// `zonemode=zbd`: the zone resets this job made (fio's per-job "zone resets" count: its
    /// own resets of zones with data, and its trims of zones with data).
    pub fn zone_resets(&self) -> u64 {
        self.zbd.as_ref().map_or(0, |z| z.resets)
    }

    /// Whether random offsets come from the random map (each block once per pass).
    pub fn uses_random_map(&self) -> bool {
        matches!(self.offsets, Offsets::Map(_))
    }

    /// Tells the generator that the job's `ramp_time` has passed; call it once, at that moment.
    /// fio then clears its completed-I/O statistics (`reset_all_stats` in `ramp_time_over`), so
    /// I/Os issued during the ramp do not count toward `number_ios`, toward the `io_size`
    /// check made between loops, or toward the issue counts that steer `rwmixread`. They do
    /// count toward the `io_size` limit within a loop, whose issue-side counter fio leaves alone.
    pub fn end_ramp(&mut self) {
        if let Some(f) = &mut self.files {
            f.end_ramp();
        }
        self.stat_bytes = 0;
        self.stat_ios = 0;
        self.issues = [0; 3];
        self.rwmix_issues = 0;
    }

    /// fio's `clear_io_state` at the start of every loop: positions back to the start of the
    /// region, random map cleared, and with `randrepeat` the random generators reseeded, so
    /// every loop replays the first.
    fn begin_pass(&mut self) {
        if self.replay_passes {
            self.rng = self.pass_seed.clone();
            if let Some(p) = &mut self.placement {
                p.replay();
            }
        }
        // clear_io_state: the file starts at its start again, and the zone count from 0.
        self.file_offset = self.region_start;
        self.zone_bytes = 0;
        self.reset_file();
        self.rwmix_issues = 0;
        self.pass_bytes = 0;
        self.pass_ios = 0;
        if let Some(files) = &mut self.files {
            files.restart();
        }
    }

    /// One file of a job's several: its next I/O until its range (or random map) is used up,
    /// whatever the volume (the job counts that); then done until the job's next pass.
    fn next_in_set(&mut self) -> Option<IoUnit> {
        if self.done {
            return None;
        }
        let io = self.fill();
        match io {
            Some(io) => self.account(io),
            None => self.done = true,
        }
        io
    }

    /// A file of a job's several starts the job's next pass.
    fn restart_in_set(&mut self) {
        debug_assert!(self.in_set, "only a job's file restarts with the job");
        self.done = false;
        self.begin_pass();
    }

    /// fio's `fio_file_reset`: positions to the start, a fresh random-map order, and with
    /// `zonemode=zbd` `zbd_file_reset` (once the job has started: its first is at its start).
    fn reset_file(&mut self) {
        self.last_pos = [self.file_offset; 3];
        self.last_start = [NONE; 3];
        if let Offsets::Map(map) = &mut self.offsets {
            map.rekey(&mut self.rng);
        }
        if let Some(z) = self.zbd.as_mut().filter(|_| self.zbd_started) {
            z.file_reset();
        }
    }

    /// fio's `keep_running` after a pass: the first `loops` passes always run; after that, more
    /// passes run while fewer than `io_size` bytes were done, unless the rest is less than one
    /// maximum-size block, or the region ran out and no `io_size` asked for more.
    #[cold]
    fn end_pass(&mut self, region_used_up: bool) {
        // fio stops a job whose pass did no I/O at all.
        if self.pass_ios == 0 {
            self.done = true;
            return;
        }
        self.passes_done += 1;
        let again = self.time_based
            || self.passes_done < self.loops
            || (self.stat_ios < self.ios_limit
                && self.stat_bytes < self.volume
                && self.volume - self.stat_bytes >= self.max_bs
                && (self.io_size_set || !region_used_up));
        if again {
            self.begin_pass();
        } else {
            self.done = true;
        }
    }

    /// Sets the `dspec` of the I/O just filled (fio's `dp_fill_dspec_data`, called from
    /// `fill_io_u` once the offset is known): the placement sees the file it went to and its
    /// offset in that file.
    #[inline]
    fn place(&mut self, io: &mut IoUnit) {
        let (file, file_start) = match &self.files {
            Some(files) => {
                let f = files.served();
                (f, files.range(f).0)
            }
            None => (0, self.space_offset),
        };
        if let Some(p) = &mut self.placement {
            io.dspec = p.dspec(io.dir, file, io.offset - file_start);
        }
    }

    #[inline]
    fn account(&mut self, io: IoUnit) {
        let d = io.dir.index();
        self.issues[d] += 1;
        self.ios += 1;
        self.bytes += io.len;
        self.stat_ios += 1;
        self.stat_bytes += io.len;
        self.pass_ios += 1;
        self.pass_bytes += io.len;
        if self.counted[d] {
            self.counted_bytes += io.len;
        }
    }

    /// fio's `fill_io_u`: direction, offset, size; `None` if the I/O does not fit.
    #[inline]
    fn fill(&mut self) -> Option<IoUnit> {
        let mut d = self.pick_dir();
        if let Some(z) = &self.zbd {
            d = z.adjust_ddir(d, self.last_start[WRITE] != NONE);
        }
        if let Some(zones) = self.strided {
            self.strided_zone(zones, d);
        } else if self.zbd.is_some() {
            self.zbd_zone_mode(d);
        }
        // fio's get_next_offset: with rw=rand...:<nr> only every nr-th I/O gets a new offset.
        let mut new_offset = true;
        if self.ios_per_offset != 1 {
            self.seq_countdown -= 1;
            if self.seq_countdown == 0 {
                self.seq_countdown = self.ios_per_offset;
            } else {
                new_offset = false;
            }
        }
        let (pos, is_random) = self.next_position(d, new_offset)?;
        if pos >= self.region_len {
            return None;
        }
        // fio's get_next_offset: relative to the file offset (a strided zone's start), and
        // inside the file.
        let offset = self.file_offset.checked_add(pos).filter(|&o| o < self.space_len)?;
        let size_dir = match (self.bs_is_seq_rand, is_random) {
            (false, _) => d,
            (true, true) => WRITE,
            (true, false) => READ,
        };
        let mut len = self.block_len(size_dir, offset)?;
        let mut offset = offset;
        if self.zbd.is_some() {
            (offset, len) = self.zbd_adjust(d, offset, len)??;
        }
        self.finish_fill(d, offset, len)
    }

    /// The end of `fill`, once the offset (in the space) and length are final.
    #[inline]
    fn finish_fill(&mut self, d: usize, offset: u64, len: u64) -> Option<IoUnit> {
        // A fixed-size I/O may pass the region's end, as in fio, but never the space's.
        if len > self.space_len - offset {
            return None;
        }
        let mut io = IoUnit { dir: Dir::ALL[d], offset: self.space_offset + offset, len, dspec: 0, zone: None };
        if let Some(z) = &mut self.zbd {
            io = z.queue(io)?;
        }
        self.last_start[d] = offset;
        self.last_pos[d] = offset + len;
        self.zone_bytes += len;
        Some(io)
    }

    /// fio's `zbd_adjust_block` for an I/O at `offset` (in the space): `None` ends the pass
    /// (fio's `io_u_eof`); `Some(None)` when a write needs zone commands first — it is
    /// finished (`zbd_resume`) once they are handed out, so that every I/O generated after
    /// them, by any job on the drive, comes after them, as fio's zone lock orders them.
    fn zbd_adjust(&mut self, d: usize, offset: u64, len: u64) -> Option<Option<(u64, u64)>> {
        let base = self.space_offset;
        let f = zbd::FileView { file_offset: base + self.file_offset, io_size: self.region_len };
        let z = self.zbd.as_mut()?;
        let (o, l) = z.adjust_block(f, d, base + offset, len)?;
        if d == WRITE && !z.cmds.is_empty() {
            self.zbd_resume = Some(zbd::Resume { d, offset: base + offset, len, at: o, adjusted: l });
            return Some(None);
        }
        Some(Some((o - base, l)))
    }

    /// The write that waited for its zone commands: at its zone's write pointer now, if the
    /// zone still takes it; else decided again, as fio's job decides once it has waited for
    /// the zone. `None` ends the pass; `Some(None)`: more zone commands first.
    fn zbd_resume_write(&mut self, r: zbd::Resume) -> Option<Option<IoUnit>> {
        let base = self.space_offset;
        let f = zbd::FileView { file_offset: base + self.file_offset, io_size: self.region_len };
        let z = self.zbd.as_mut()?;
        let (offset, len) = match z.resume_write(f, r.at, r.adjusted) {
            Some(at) => at,
            None => match self.zbd_adjust(r.d, r.offset - base, r.len)? {
                Some((o, l)) => (base + o, l),
                None => return Some(None),
            },
        };
        self.finish_fill(r.d, offset - base, len).map(Some)
    }

    /// fio's `setup_zbd_zone_mode` (zbd.c), run by `fill_io_u` where strided zones run theirs:
    /// see `ZbdJob::zone_mode`. A move to the next zone wraps to the job's start offset at
    /// the end of the file, and starts the direction there.
    fn zbd_zone_mode(&mut self, d: usize) {
        let Some(z) = &self.zbd else { return };
        let base = self.space_offset;
        let step = z.zone_mode(d, base + self.last_pos[d], base + self.file_offset, self.zone_bytes);
        self.last_pos[d] = step.pos - base;
        if step.skipped {
            self.zone_bytes = 0;
            self.file_offset = step.file_offset - base;
            if self.file_offset >= self.space_len {
                self.file_offset = self.region_start;
            }
            self.last_pos[d] = self.file_offset;
        }
    }

    /// fio's `get_rw_ddir` and `set_rw_ddir`.
    #[inline]
    fn pick_dir(&mut self) -> usize {
        if self.trim_write {
            // A trim, then a write of the same blocks.
            return if self.last_pos[WRITE] == self.last_pos[TRIM] {
                TRIM
            } else {
                WRITE
            };
        }
        if !self.read_write_mix {
            return self.single_dir;
        }
        // fio draws a direction with probability rwmixread, but once it switches it stays with
        // the new direction until that direction's issue count reaches the old one's times the
        // new direction's share, which pulls the observed mix toward the target early on.
        if self.issues[self.rwmix_dir] >= self.rwmix_issues {
            let dir = if dist::percent_roll(&mut self.rng) <= self.rwmixread {
                READ
            } else {
                WRITE
            };
            if dir != self.rwmix_dir {
                let share = if dir == READ {
                    self.rwmixread
                } else {
                    100 - self.rwmixread
                };
                self.rwmix_issues = self.issues[self.rwmix_dir] * u64::from(share) / 100;
            }
            self.rwmix_dir = dir;
        }
        self.rwmix_dir
    }

    /// fio's `get_next_block`: (offset relative to the region, whether it is a random offset).
    #[inline]
    fn next_position(&mut self, d: usize, new_offset: bool) -> Option<(u64, bool)> {
        if self.rand_trim_write && d == WRITE {
            // The write of a randtrimwrite pair goes where its trim went.
            let start = self.last_start[TRIM];
            return (start != NONE).then(|| (start.wrapping_sub(self.file_offset), true));
        }
        if new_offset {
            if !self.random {
                return self.seq_position(d).map(|p| (p, false));
            }
            if self.should_do_random(d) {
                return self.random_block(d).map(|b| (b * self.blockalign[d], true));
            }
        } else if self.identical {
            let start = self.last_start[d];
            return Some((
                if start == NONE {
                    0
                } else {
                    start.wrapping_sub(self.file_offset)
                },
                false,
            ));
        }
        // Sequential within a random job; when the region ends, a random offset instead.
        match self.seq_position(d) {
            Some(pos) => Some((pos, false)),
            None => self
                .random_block(d)
                .map(|b| (b * self.blockalign[d], false)),
        }
    }

    /// fio's `setup_strided_zone_mode` (io_u.c), run by `fill_io_u` before each read, write or
    /// trim picks its offset. The rules of `zonemode=strided`, with where fio has them:
    ///
    /// - Zones: `zonerange` bytes (default `zonesize`: `fixup_options`, init.c) starting at the
    ///   job's offset; positions count from the zone's start, fio's `f->file_offset`
    ///   (`get_next_offset`).
    /// - Moving on: once `zonesize` bytes were transferred in the zone (`td->zone_bytes`, the
    ///   sizes of all I/Os filled, added at the end of `fill_io_u`), the next I/O starts a zone
    ///   `zonerange + zoneskip` bytes further, at its start; if that is at or past the end of
    ///   the file (the space, not the job's region) it wraps to the job's start offset
    ///   (`get_start_offset`). So `zonesize=64k zoneskip=192k` reads 64 KiB, skips 192 KiB.
    /// - Staying: when a direction's position reaches the zone's end before `zonesize` bytes
    ///   (`zonesize > zonerange`) it goes back to the zone's start, so the zone is read again.
    /// - Random I/O: block numbers are drawn over `zonerange` bytes (`last_block`, io_u.c; the
    ///   random map is that size, `init_random_map`, filesetup.c) from the zone's start, and the
    ///   file is reset (`fio_file_reset`: positions to the zone's start, a fresh random map)
    ///   whenever the zone's byte count is a multiple of `zonerange`, so at each new zone.
    /// - Ends: an I/O whose position is `size` bytes or more past the zone's start, or that
    ///   would pass the end of the file, is not issued (`get_next_offset`, `fill_io_u`), which
    ///   ends the pass; a variable-size I/O must fit before the region's end (`io_u_fits`). The
    ///   job still ends when its `io_size` (default `size`) bytes or `number_ios` I/Os are done,
    ///   counted over the I/O issued only (the skipped bytes, fio's `io_skip_bytes`, count for
    ///   nothing). Each loop starts again from the first zone with a zero byte count
    ///   (`clear_io_state`, libfio.c).
    #[inline]
    fn strided_zone(&mut self, zones: StridedZones, d: usize) {
        if self.zone_bytes >= zones.size {
            self.zone_bytes = 0;
            self.file_offset = self.file_offset.saturating_add(zones.range.saturating_add(zones.skip));
            if self.file_offset >= self.space_len {
                self.file_offset = self.region_start;
            }
            self.last_pos[d] = self.file_offset;
        }
        if self.last_pos[d] >= self.file_offset.saturating_add(zones.range) {
            self.last_pos[d] = self.file_offset;
        }
        if self.zone_bytes % zones.range == 0 {
            self.reset_file();
        }
    }

    /// fio's `should_do_random` (`percentage_random`).
    #[inline]
    fn should_do_random(&mut self, d: usize) -> bool {
        let percent = self.percentage_random[d];
        percent == 100 || dist::percent_roll(&mut self.rng) <= percent
    }

    /// fio's `get_next_seq_offset`: where the direction's previous I/O ended, plus the hole.
    #[inline]
    fn seq_position(&mut self, d: usize) -> Option<u64> {
        if self.time_based && self.last_pos[d] >= self.region_end {
            self.last_pos[d] = self.file_offset;
        }
        if self.last_pos[d] >= self.space_len {
            return None;
        }
        // As fio's unsigned arithmetic: a position before the file offset is far past the
        // region's end, which ends the pass.
        let mut pos = self.last_pos[d].wrapping_sub(self.file_offset);
        if pos != 0 && self.skip != 0 {
            pos = pos.saturating_add(self.skip);
            // As in fio, holed I/O wraps to the start only when it passes the end of the whole
            // space (fio compares with the file size); otherwise the region's end ends the pass.
            if pos >= self.space_len {
                pos = 0;
            }
        }
        Some(pos)
    }

    /// fio's `get_next_rand_block`: a time-based job that used up its random map starts a new
    /// one.
    #[inline]
    fn random_block(&mut self, d: usize) -> Option<u64> {
        if let Some(block) = self.draw_block(d) {
            return Some(block);
        }
        if self.time_based {
            self.reset_file();
            return self.draw_block(d);
        }
        None
    }

    #[inline]
    fn draw_block(&mut self, d: usize) -> Option<u64> {
        let n = self.last_block[d];
        if n == 0 {
            return None;
        }
        let rng = &mut self.rng;
        match &mut self.offsets {
            Offsets::Uniform => Some(dist::below(rng, n)),
            Offsets::Map(map) => map.next(),
            Offsets::Skewed { samplers, rng } => samplers[d].as_ref().map(|s| s.sample(rng)),
            Offsets::Zoned(tables) => Some(match &tables[d] {
                Some(table) => table.sample(rng),
                None => dist::below(rng, n),
            }),
        }
    }

    /// fio's `get_next_buflen`. A range draws `min + max * U[0,1)` and rounds down to a multiple
    /// of `min` (capped at `max`); a split walks its entries in ascending percentage until the
    /// cumulative percentage passes the draw. Either way the size must fit before the region's
    /// end, or it is drawn again.
    #[inline]
    fn block_len(&mut self, d: usize, offset: u64) -> Option<u64> {
        let (min, max) = (self.bs_min[d], self.bs_max[d]);
        if min == max {
            return Some(min);
        }
        // fio's io_u_fits; a strided zone may lie past the region's end, where nothing fits.
        let room = self.region_end.saturating_sub(offset);
        let fits = |len: u64| len <= room;
        if !fits(min) {
            return None;
        }
        for _ in 0..MAX_SIZE_DRAWS {
            let u = dist::unit(&mut self.rng);
            let split = &self.bssplit[d];
            let mut len = if split.is_empty() {
                min.saturating_add((max as f64 * u) as u64)
            } else {
                let mut cumulative = 0;
                let mut chosen = 0;
                for entry in split.iter().filter(|e| e.percent > 0) {
                    chosen = entry.bs;
                    cumulative += entry.percent;
                    if u * 100.0 < f64::from(cumulative) && fits(chosen) {
                        break;
                    }
                }
                chosen
            };
            len = if min.is_power_of_two() {
                len & !(min - 1)
            } else {
                len - len % min
            };
            len = len.min(max);
            if len > 0 && fits(len) {
                return Some(len);
            }
        }
        None
    }
}

/// The I/O stream.
impl Iterator for JobGen {
    type Item = IoUnit;

    /// The next I/O, or `None` once the job's volume is done: `io_size` (default `size`) bytes,
    /// `number_ios` I/Os, each times `loops`, with fio's pass rules. A time-based job never ends
    /// by volume; the caller stops it.
    #[inline]
    fn next(&mut self) -> Option<IoUnit> {
        if self.in_set {
            return self.next_in_set();
        }
        if !self.zbd_started && self.zbd.is_some() {
            self.zbd_started = true;
            if let Some(z) = &mut self.zbd {
                z.start();
            }
        }
        loop {
            if let Some(z) = &mut self.zbd {
                if let Some(cmd) = z.cmds.pop_front() {
                    return Some(cmd);
                }
                if let Some(r) = self.zbd_resume.take() {
                    match self.zbd_resume_write(r) {
                        Some(Some(mut io)) => {
                            if self.placement.is_some() {
                                self.place(&mut io);
                            }
                            self.account(io);
                            return Some(io);
                        }
                        Some(None) => {}
                        None => self.end_pass(true),
                    }
                    continue;
                }
            }
            if self.done {
                return None;
            }
            if !self.time_based {
                if self.counted_bytes >= self.byte_limit || self.stat_ios >= self.ios_limit {
                    self.done = true;
                    return None;
                }
                if self.pass_bytes >= self.pass_cap {
                    self.end_pass(false);
                    continue;
                }
            }
            let io = match &mut self.files {
                Some(files) => files.next(),
                None => self.fill(),
            };
            if let Some(mut io) = io {
                if self.placement.is_some() {
                    self.place(&mut io);
                }
                self.account(io);
                return Some(io);
            }
            if self.zbd_resume.is_some() {
                continue; // zone commands, then the write
            }
            // The region (or the random map, or every file) is used up.
            self.end_pass(true);
        }
    }
}

/// Once done, a generator stays done.
impl std::iter::FusedIterator for JobGen {}

#[cfg(test)]
mod tests {
    use super::super::{parse_job_text, FioJob};
    use super::*;
    use std::collections::{HashMap, HashSet};

    const K: u64 = 1024;
    const M: u64 = 1024 * 1024;

    fn job(body: &str) -> FioJob {
        parse_job_text(&format!("[t]\n{body}\n"), "t.fio", &|_| None)
            .expect("job parses")
            .jobs
            .remove(0)
    }

    fn gen(body: &str, space: u64) -> JobGen {
        JobGen::new(&job(body), 0, 0, space, 512, 7).expect("job fits")
    }

    fn all(g: &mut JobGen) -> Vec<IoUnit> {
        let ios: Vec<IoUnit> = std::iter::from_fn(|| g.next()).take(10_000_000).collect();
        assert!(ios.len() < 10_000_000, "runaway generator");
        ios
    }

    fn take(g: &mut JobGen, n: usize) -> Vec<IoUnit> {
        (0..n)
            .map(|_| g.next().expect("time-based jobs never end"))
            .collect()
    }

    fn offsets(ios: &[IoUnit]) -> Vec<u64> {
        ios.iter().map(|io| io.offset).collect()
    }

    /// `n` I/Os of a job whose volume does not end it first and whose loops continue the random
    /// stream rather than replaying it.
    fn sample(body: &str, space: u64, n: usize) -> Vec<IoUnit> {
        let ios = all(&mut gen(
            &format!("{body}\nio_size=1p\nnumber_ios={n}\nrandrepeat=0"),
            space,
        ));
        assert_eq!(ios.len(), n);
        ios
    }

    fn new_err(body: &str, space: u64) -> String {
        match JobGen::new(&job(body), 0, 0, space, 512, 7) {
            Ok(_) => panic!("{body} should not fit"),
            Err(e) => e.to_string(),
        }
    }

    /// Share of accesses that went to the most-accessed tenth of `blocks` blocks.
    fn top_tenth_share(ios: &[IoUnit], blocks: usize) -> f64 {
        let mut counts: HashMap<u64, usize> = HashMap::new();
        for io in ios {
            *counts.entry(io.offset).or_default() += 1;
        }
        let mut sorted: Vec<usize> = counts.into_values().collect();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        sorted.iter().take(blocks / 10).sum::<usize>() as f64 / ios.len() as f64
    }

    /// `n` zones of `per_zone` offsets from `zone_starts`, `bs` apart: what a strided
    /// sequential job reads.
    fn strided_offsets(zone_starts: &[u64], per_zone: u64, bs: u64) -> Vec<u64> {
        zone_starts.iter().flat_map(|&z| (0..per_zone).map(move |i| z + i * bs)).collect()
    }

    /// fio's setup_strided_zone_mode with zonesize=64k, zoneskip=192k (zonerange=64k) and
    /// bs=16k: four reads in a zone (zone_bytes reaches 64k), then the zone start moves
    /// 64k + 192k = 256k on. In a 1 MiB file the zones are at 0, 256k, 512k and 768k; the next
    /// (1 MiB) is at the file's end, so fio wraps to the start offset. size=1m reads 1 MiB: the
    /// four zones four times.
    #[test]
    fn strided_sequential_reads_zonesize_then_skips_zoneskip() {
        let body = "rw=read\nbs=16k\nzonemode=strided\nzonesize=64k\nzoneskip=192k";
        let ios = all(&mut gen(body, M));
        let cycle = strided_offsets(&[0, 256 * K, 512 * K, 768 * K], 4, 16 * K);
        assert_eq!(offsets(&ios[..8]), [0, 16 * K, 32 * K, 48 * K, 256 * K, 272 * K, 288 * K, 304 * K]);
        assert_eq!(offsets(&ios), cycle.repeat(4));
        assert!(ios.iter().all(|io| io.dir == Dir::Read && io.len == 16 * K));

        // The zones walk past the job's region (size) up to the end of the file, as fio's
        // zone start is checked against the file size only; the job still ends after `size`.
        let ios = all(&mut gen(&format!("{body}\nsize=256k"), 4 * M));
        assert_eq!(offsets(&ios), strided_offsets(&[0, 256 * K, 512 * K, 768 * K], 4, 16 * K));

        // offset= is where the zones start, and where they wrap to.
        let ios = all(&mut gen(&format!("{body}\noffset=128k\nsize=512k"), M));
        let starts = [128 * K, 384 * K, 640 * K, 896 * K, 128 * K, 384 * K, 640 * K, 896 * K];
        assert_eq!(offsets(&ios), strided_offsets(&starts, 4, 16 * K));
    }

    /// A zone that passes the end of the file: fio's fill_io_u refuses the I/O that would pass
    /// it (get_next_offset refuses one starting at or past it), which ends the pass; without
    /// io_size the job then ends, short of its size.
    #[test]
    fn strided_zone_at_the_end_of_the_file_ends_the_pass() {
        let body = "rw=read\nbs=16k\nzonemode=strided\nzonesize=64k\nzoneskip=192k";
        let ios = all(&mut gen(body, 800 * K));
        let mut want = strided_offsets(&[0, 256 * K, 512 * K], 4, 16 * K);
        want.extend([768 * K, 784 * K]);
        assert_eq!(offsets(&ios), want);
        // With loops=2 the second pass starts again from the first zone.
        let ios = all(&mut gen(&format!("{body}\nloops=2"), 800 * K));
        assert_eq!(offsets(&ios), want.repeat(2));
        // A time-based job never reaches the file's end: get_next_seq_offset sends a position
        // at the region's end (800k) back to the file offset, the zone's start, so the last
        // zone's 32k are read twice to make its 64k, and the next zone wraps to 0.
        let mut g = gen(&format!("{body}\ntime_based\nruntime=1"), 800 * K);
        let mut cycle = want.clone();
        cycle.extend([768 * K, 784 * K]);
        assert_eq!(offsets(&take(&mut g, 32)), cycle.repeat(2));
    }

    /// zonesize > zonerange: fio keeps the zone until zonesize bytes were transferred, going
    /// back to its start whenever the position reaches its end, so each zone is read twice.
    #[test]
    fn strided_zonesize_larger_than_zonerange_rereads_the_zone() {
        let body = "rw=read\nbs=16k\nzonemode=strided\nzonesize=128k\nzonerange=64k\nzoneskip=64k\nsize=512k";
        let ios = all(&mut gen(body, 4 * M));
        let starts = [0, 0, 128 * K, 128 * K, 256 * K, 256 * K, 384 * K, 384 * K];
        assert_eq!(offsets(&ios), strided_offsets(&starts, 4, 16 * K));
    }

    /// zoneskip defaults to 0 and zonerange to zonesize: the zones follow one another, so a
    /// sequential job reads as it would without zones.
    #[test]
    fn strided_defaults_zoneskip_0_and_zonerange_zonesize() {
        let plain = all(&mut gen("rw=read\nbs=16k\nsize=1m", 2 * M));
        let zoned = all(&mut gen("rw=read\nbs=16k\nsize=1m\nzonemode=strided\nzonesize=64k", 2 * M));
        assert_eq!(offsets(&zoned), offsets(&plain));
        // Random: each 64k zone gets 16 I/Os at 16 distinct blocks of it (the map is the zone's).
        let ios = all(&mut gen("rw=randread\nbs=4k\nsize=1m\nzonemode=strided\nzonesize=64k", 2 * M));
        assert_eq!(ios.len(), 256);
        for (i, zone) in ios.chunks(16).enumerate() {
            let start = i as u64 * 64 * K;
            let blocks: HashSet<u64> = zone.iter().map(|io| (io.offset - start) / (4 * K)).collect();
            assert_eq!(blocks, (0..16).collect(), "zone {i}");
        }
    }

    /// Random offsets stay in the current zone's range: fio's last_block is zonerange long and
    /// counted from the zone's start; zonesize I/O bytes later the next zone starts.
    #[test]
    fn strided_random_offsets_stay_in_the_zone_range() {
        // zonesize < zonerange: 8 I/Os in each 64k range (of 16 blocks), no block twice.
        let body = "rw=randread\nbs=4k\nzonemode=strided\nzonesize=32k\nzonerange=64k\nzoneskip=64k\nsize=1m";
        let ios = all(&mut gen(body, M));
        assert_eq!(ios.len(), 256);
        for (i, zone) in ios.chunks(8).enumerate() {
            // Zones every 128k; after the one at 896k the next (1 MiB) wraps to 0.
            let start = (i as u64 % 8) * 128 * K;
            assert!(zone.iter().all(|io| (start..start + 64 * K - 4 * K + 1).contains(&io.offset)), "zone {i}: {zone:?}");
            assert_eq!(zone.iter().map(|io| io.offset).collect::<HashSet<_>>().len(), 8, "zone {i}");
        }
        // zonesize > zonerange: the random map is reset every zonerange bytes, so each
        // zone's 32 I/Os are two rounds over its 16 blocks.
        let body = "rw=randread\nbs=4k\nzonemode=strided\nzonesize=128k\nzonerange=64k\nzoneskip=192k\nsize=512k";
        let ios = all(&mut gen(body, 4 * M));
        assert_eq!(ios.len(), 128);
        for (i, round) in ios.chunks(16).enumerate() {
            let start = (i as u64 / 2) * 256 * K;
            let blocks: HashSet<u64> = round.iter().map(|io| (io.offset - start) / (4 * K)).collect();
            assert_eq!(blocks, (0..16).collect(), "round {i}");
        }
        // norandommap: independent draws, still inside the zone.
        let ios = all(&mut gen(&format!("{body}\nnorandommap"), 4 * M));
        for (i, zone) in ios.chunks(32).enumerate() {
            let start = i as u64 * 256 * K;
            assert!(zone.iter().all(|io| io.offset >= start && io.offset + io.len <= start + 64 * K), "zone {i}");
        }
    }

    /// Zone starts must stay sector-aligned; several files turn the zones off, as in fio.
    #[test]
    fn strided_alignment_and_several_files() {
        let e = new_err("rw=read\nzonemode=strided\nzonesize=64k\nzoneskip=1000", M);
        assert!(e.contains("zonerange + zoneskip (66536 bytes) is not a multiple of the 512-byte sector"), "{e}");
        let plain = all(&mut gen("rw=read\nbs=4k\nnrfiles=2\nfilesize=64k", M));
        let zoned = all(&mut gen("rw=read\nbs=4k\nnrfiles=2\nfilesize=64k\nzonemode=strided\nzonesize=16k\nzoneskip=16k", M));
        assert_eq!(offsets(&zoned), offsets(&plain));
    }

    #[test]
    fn sequential_read_covers_the_region_once() {
        let mut g = gen("rw=read\nbs=4k\nsize=64k", M);
        let ios = all(&mut g);
        assert_eq!(ios.len(), 16);
        assert_eq!(
            offsets(&ios),
            (0..16).map(|i| i * 4 * K).collect::<Vec<_>>()
        );
        assert!(ios.iter().all(|io| io.dir == Dir::Read && io.len == 4 * K));
        assert_eq!((g.ios_issued(), g.bytes_issued()), (16, 64 * K));
        assert_eq!(g.next(), None);
    }

    #[test]
    fn offsets_are_device_addresses_inside_the_space() {
        let j = job("rw=write\noffset=8k\nsize=16k");
        let mut g = JobGen::new(&j, 0, 10 * M, M, 512, 1).unwrap();
        assert_eq!(g.region(), (10 * M + 8 * K, 16 * K));
        let ios = all(&mut g);
        assert_eq!(
            offsets(&ios),
            vec![
                10 * M + 8 * K,
                10 * M + 12 * K,
                10 * M + 16 * K,
                10 * M + 20 * K
            ]
        );
        assert!(ios.iter().all(|io| io.dir == Dir::Write));
    }

    #[test]
    fn random_map_visits_every_block_once_per_pass() {
        for (randrepeat, replayed) in [("1", true), ("0", false)] {
            let body = format!("rw=randwrite\nsize=4000k\nloops=3\nrandrepeat={randrepeat}");
            let mut g = gen(&body, 8 * M);
            assert!(g.uses_random_map());
            let ios = all(&mut g);
            assert_eq!(ios.len(), 3000);
            let passes: Vec<Vec<u64>> = ios.chunks(1000).map(offsets).collect();
            for pass in &passes {
                let blocks: HashSet<u64> = pass.iter().copied().collect();
                assert_eq!(blocks.len(), 1000, "a block repeated within a pass");
                assert!(pass.iter().all(|&o| o % (4 * K) == 0 && o < 4000 * K));
            }
            // fio reseeds at each loop when randrepeat is on, so the loops repeat.
            assert_eq!(passes[0] == passes[1] && passes[1] == passes[2], replayed);
        }
    }

    #[test]
    fn norandommap_draws_independently() {
        let mut g = gen("rw=randread\nnorandommap\nsize=4000k", 8 * M);
        assert!(!g.uses_random_map());
        let ios = all(&mut g);
        assert_eq!(ios.len(), 1000);
        let distinct: HashSet<u64> = offsets(&ios).into_iter().collect();
        // About 1000 * (1 - 1/e) distinct blocks.
        assert!((580..700).contains(&distinct.len()), "{}", distinct.len());
    }

    #[test]
    fn offsets_stay_in_region_and_aligned() {
        let cases = [
            ("rw=randread\nnorandommap", 4 * K),
            ("rw=randrw\nbsrange=4k-64k", 4 * K),
            ("rw=randwrite\nbssplit=4k/30:16k/30:128k/40", 4 * K),
            ("rw=randread\nrandom_distribution=zipf:1.1", 4 * K),
            ("rw=randread\nrandom_distribution=pareto:0.2:0.5", 4 * K),
            ("rw=randread\nrandom_distribution=normal:10:0.2", 4 * K),
            ("rw=randread\nrandom_distribution=zoned:50/10:50/90", 4 * K),
            ("rw=randwrite\nbs=8k\nba=512", 512),
            ("rw=randtrim\nbs=16k", 16 * K),
            ("rw=read\nbsrange=4k-128k", 4 * K),
        ];
        for (body, align) in cases {
            let j = job(&format!("{body}\noffset=1m\nsize=10m\nnumber_ios=20000"));
            let mut g = JobGen::new(&j, 0, 64 * M, 16 * M, 512, 3).unwrap();
            let (start, len) = g.region();
            assert_eq!((start, len), (65 * M, 10 * M));
            for io in all(&mut g) {
                assert!(
                    io.offset >= start && io.offset + io.len <= start + len,
                    "{body}: {io:?}"
                );
                assert_eq!((io.offset - start) % align, 0, "{body}: {io:?}");
                assert_eq!(io.len % 512, 0, "{body}: {io:?}");
            }
        }
    }

    #[test]
    fn rwmix_ratio() {
        for (body, expect) in [("", 0.5), ("rwmixread=70", 0.7), ("rwmixwrite=90", 0.1)] {
            let ios = sample(&format!("rw=randrw\nnorandommap\n{body}"), 64 * M, 100_000);
            let reads = ios.iter().filter(|io| io.dir == Dir::Read).count() as f64 / 1e5;
            assert!((reads - expect).abs() < 0.01, "{body}: {reads}");
            assert!(ios.iter().all(|io| io.dir != Dir::Trim));
        }
        let ios = all(&mut gen("rw=randrw\nrwmixread=100\nnumber_ios=1000", M));
        assert!(ios.iter().all(|io| io.dir == Dir::Read));
    }

    #[test]
    fn bssplit_proportions() {
        let ios = sample("rw=randread\nbssplit=4k/10:64k/50:32k/40", 256 * M, 100_000);
        let share = |len| ios.iter().filter(|io| io.len == len).count() as f64 / ios.len() as f64;
        assert!((share(4 * K) - 0.1).abs() < 0.01, "{}", share(4 * K));
        assert!((share(32 * K) - 0.4).abs() < 0.01, "{}", share(32 * K));
        assert!((share(64 * K) - 0.5).abs() < 0.01, "{}", share(64 * K));
        // Per direction.
        let mut g = gen(
            "rw=randrw\nbssplit=2k/50:4k/50,4k/90:8k/10\nnumber_ios=20000",
            64 * M,
        );
        for io in all(&mut g) {
            match io.dir {
                Dir::Read => assert!(io.len == 2 * K || io.len == 4 * K),
                _ => assert!(io.len == 4 * K || io.len == 8 * K),
            }
        }
    }

    #[test]
    fn bsrange_draws_multiples_of_the_minimum() {
        let ios = sample("rw=randwrite\nbsrange=4k-16k", 64 * M, 40_000);
        for len in [4 * K, 8 * K, 12 * K, 16 * K] {
            let share = ios.iter().filter(|io| io.len == len).count() as f64 / ios.len() as f64;
            assert!((share - 0.25).abs() < 0.015, "{len}: {share}");
        }
        assert!(ios.iter().all(|io| io.len % (4 * K) == 0));
    }

    #[test]
    fn skewed_distributions() {
        let blocks = 10_240;
        let run = |dist: &str| {
            sample(
                &format!("rw=randread\nrandom_distribution={dist}\nsize=40m"),
                64 * M,
                200_000,
            )
        };
        let uniform = top_tenth_share(&run("random"), blocks);
        let zipf = top_tenth_share(&run("zipf:1.2"), blocks);
        let pareto = top_tenth_share(&run("pareto:0.2"), blocks);
        let normal = top_tenth_share(&run("normal"), blocks);
        assert!(uniform < 0.15, "uniform {uniform}");
        assert!(zipf > 0.8, "zipf {zipf}");
        assert!(pareto > 0.6, "pareto {pareto}");
        assert!(normal > 0.3 && normal < 0.6, "normal {normal}");
        // fio hashes the ranks: the hottest blocks are not packed at the start of the region.
        let ios = run("zipf:1.2");
        let in_first_tenth = ios.iter().filter(|io| io.offset < 4 * M).count() as f64;
        assert!(in_first_tenth / (ios.len() as f64) < 0.5);
    }

    #[test]
    fn zoned_distribution() {
        let body = "rw=randread\nrandom_distribution=zoned:60/10:30/20:8/30:2/40\nsize=100m";
        let ios = sample(body, 128 * M, 100_000);
        let share = |lo: u64, hi: u64| {
            ios.iter()
                .filter(|io| io.offset >= lo * M && io.offset < hi * M)
                .count() as f64
                / 1e5
        };
        assert!((share(0, 10) - 0.60).abs() < 0.01);
        assert!((share(10, 30) - 0.30).abs() < 0.01);
        assert!((share(30, 60) - 0.08).abs() < 0.005);
        assert!((share(60, 100) - 0.02).abs() < 0.005);
        let body = "rw=randread\nrandom_distribution=zoned_abs:60/20m:40/80m\nsize=100m";
        let ios = sample(body, 128 * M, 50_000);
        let first = ios.iter().filter(|io| io.offset < 20 * M).count() as f64 / 5e4;
        assert!((first - 0.6).abs() < 0.015, "{first}");
        let e = new_err(
            "rw=randread\nrandom_distribution=zoned_abs:60/20m:40/80m\nsize=64m",
            128 * M,
        );
        assert!(e.contains("zoned_abs zones end at byte 104857600, beyond the first 67108864 bytes"), "{e}");
        // Zones end inside the size but past the last place a whole block can start.
        let e = new_err("rw=randread\nbs=4k\nba=512\nrandom_distribution=zoned_abs:100/3k\nsize=4k", M);
        assert!(
            e.contains("zoned_abs zones end at byte 3072, beyond the first 512 bytes, where a 4096-byte block (aligned to 512 bytes) can start in the job's 4096-byte size"),
            "{e}"
        );
    }

    #[test]
    fn time_based_sequential_wraps_around_the_region() {
        let mut g = gen("rw=write\nsize=16k\nruntime=1\ntime_based", M);
        let ios = take(&mut g, 1000);
        assert_eq!(offsets(&ios[..6]), vec![0, 4 * K, 8 * K, 12 * K, 0, 4 * K]);
        assert!(ios.iter().all(|io| io.offset < 16 * K));
        // Mixed directions wrap independently, and holes wrap too.
        let mut g = gen("rw=rw\nsize=16k\nruntime=1\ntime_based", M);
        assert!(take(&mut g, 1000).iter().all(|io| io.offset < 16 * K));
        let mut g = gen("rw=read:4k\nsize=32k\nruntime=1\ntime_based", M);
        let ios = take(&mut g, 8);
        assert_eq!(
            offsets(&ios),
            vec![0, 8 * K, 16 * K, 24 * K, 0, 8 * K, 16 * K, 24 * K]
        );
    }

    #[test]
    fn time_based_random_map_starts_over_when_used_up() {
        let mut g = gen("rw=randwrite\nsize=16k\nruntime=1\ntime_based", M);
        let ios = take(&mut g, 400);
        for window in ios.chunks(4) {
            let distinct: HashSet<u64> = offsets(window).into_iter().collect();
            assert_eq!(distinct.len(), 4);
        }
        // A new order for each round, not a replay.
        assert!(ios.chunks(4).map(offsets).collect::<HashSet<_>>().len() > 1);
    }

    #[test]
    fn io_size_number_ios_and_loops() {
        assert_eq!(
            all(&mut gen("rw=write\nsize=1m\nio_size=256k", 4 * M)).len(),
            64
        );
        // io_size above size: more passes over the region.
        let ios = all(&mut gen("rw=write\nsize=1m\nio_size=4m", 4 * M));
        assert_eq!(ios.len(), 1024);
        assert_eq!(ios[256].offset, 0);
        assert!(ios.iter().all(|io| io.offset < M));
        let ios = all(&mut gen("rw=randread\nsize=1m\nio_size=3m", 4 * M));
        assert_eq!(ios.len(), 768);
        assert_eq!(offsets(&ios[..256]), offsets(&ios[256..512]));
        assert_eq!(
            all(&mut gen("rw=randread\nnumber_ios=10\nsize=1m", 4 * M)).len(),
            10
        );
        assert_eq!(
            all(&mut gen("rw=read\nnumber_ios=10\nloops=2\nsize=1m", 4 * M)).len(),
            20
        );
        let ios = all(&mut gen("rw=read\nsize=64k\nloops=3", M));
        assert_eq!(ios.len(), 48);
        assert_eq!(offsets(&ios[..16]), offsets(&ios[32..]));
        // The volume limit is io_size x loops; fio fills it in one pass if the region allows.
        let ios = all(&mut gen("rw=write\nsize=1m\nio_size=256k\nloops=2", 4 * M));
        assert_eq!(ios.len(), 128);
        assert!(ios.windows(2).all(|w| w[1].offset == w[0].offset + 4 * K));
    }

    #[test]
    fn ramp_io_does_not_count_toward_number_ios() {
        let mut g = gen("rw=randread\nnumber_ios=10\nsize=1m", 4 * M);
        assert_eq!(take(&mut g, 4).len(), 4);
        g.end_ramp();
        assert_eq!(all(&mut g).len(), 10);
        assert_eq!(g.ios_issued(), 14);
        // io_size keeps counting the ramp's bytes.
        let mut g = gen("rw=write\nsize=64k", M);
        take(&mut g, 4);
        g.end_ramp();
        assert_eq!(all(&mut g).len(), 12);
    }

    #[test]
    fn fixed_size_ios_may_pass_the_region_end_but_not_the_space_end() {
        // As in fio, which checks a fixed block size against the file, not the region.
        let ios = all(&mut gen("rw=write\nsize=10k", M));
        assert_eq!(offsets(&ios), vec![0, 4 * K, 8 * K]);
        let ios = all(&mut gen("rw=write", 10 * K));
        assert_eq!(offsets(&ios), vec![0, 4 * K]);
    }

    #[test]
    fn sequential_mixed_rw_keeps_a_position_per_direction() {
        let ios = all(&mut gen("rw=rw\nsize=1m", 4 * M));
        assert_eq!(ios.len(), 256);
        for dir in [Dir::Read, Dir::Write] {
            let own: Vec<u64> = ios
                .iter()
                .filter(|io| io.dir == dir)
                .map(|io| io.offset)
                .collect();
            assert!(own.len() > 64, "{dir:?}: {}", own.len());
            assert_eq!(
                own,
                (0..own.len() as u64).map(|i| i * 4 * K).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn sequential_holes() {
        // rw=read:4k skips 4k after every read; the region ends the pass early.
        let ios = all(&mut gen("rw=read:4k\nsize=64k", M));
        assert_eq!(offsets(&ios), (0..8).map(|i| i * 8 * K).collect::<Vec<_>>());
        // If the region reaches the end of the space, fio wraps to the start instead.
        let ios = all(&mut gen("rw=read:4k", 64 * K));
        assert_eq!(ios.len(), 16);
        assert_eq!(offsets(&ios[8..]), offsets(&ios[..8]));
    }

    #[test]
    fn random_with_a_sequential_run_length() {
        let ios = all(&mut gen("rw=randread:4\nsize=4m\nnumber_ios=103", 4 * M));
        // Three sequential I/Os from the start, then runs of four from each random offset.
        assert_eq!(offsets(&ios[..3]), vec![0, 4 * K, 8 * K]);
        for run in ios[3..].chunks(4) {
            let first = run[0].offset;
            assert_eq!(
                offsets(run),
                (0..4).map(|i| first + i * 4 * K).collect::<Vec<_>>()
            );
        }
        let ios = all(&mut gen(
            "rw=randread:4\nrw_sequencer=identical\nsize=4m\nnumber_ios=11",
            4 * M,
        ));
        assert_eq!(offsets(&ios[..3]), vec![0, 0, 0]);
        assert!(ios[3..7].iter().all(|io| io.offset == ios[3].offset));
    }

    #[test]
    fn percentage_random() {
        let ios = all(&mut gen("rw=randread\npercentage_random=0\nsize=64k", M));
        assert_eq!(
            offsets(&ios),
            (0..16).map(|i| i * 4 * K).collect::<Vec<_>>()
        );
        let ios = sample(
            "rw=randread\npercentage_random=30\nnorandommap",
            64 * M,
            20_000,
        );
        let sequential = ios
            .windows(2)
            .filter(|w| w[1].offset == w[0].offset + w[0].len)
            .count();
        let share = sequential as f64 / ios.len() as f64;
        assert!((share - 0.7).abs() < 0.02, "{share}");
    }

    #[test]
    fn trimwrite_trims_then_writes_each_block() {
        let ios = all(&mut gen("rw=trimwrite\nsize=64k", M));
        assert_eq!(ios.len(), 32);
        for (i, pair) in ios.chunks(2).enumerate() {
            assert_eq!((pair[0].dir, pair[1].dir), (Dir::Trim, Dir::Write));
            assert_eq!(
                (pair[0].offset, pair[1].offset),
                (i as u64 * 4 * K, i as u64 * 4 * K)
            );
        }
        let ios = all(&mut gen("rw=randtrimwrite\nsize=64k", M));
        assert_eq!(ios.len(), 32);
        let trims: HashSet<u64> = ios.chunks(2).map(|p| p[0].offset).collect();
        assert_eq!(trims.len(), 16);
        assert!(ios.chunks(2).all(|p| p[0].dir == Dir::Trim
            && p[1].dir == Dir::Write
            && p[0].offset == p[1].offset));
        // number_ios counts both halves of each pair.
        assert_eq!(
            all(&mut gen("rw=trimwrite\nsize=64k\nnumber_ios=5", M)).len(),
            10
        );
    }

    #[test]
    fn deterministic_per_seed_and_instance() {
        let j = job("rw=randrw\nbsrange=4k-64k\nnumjobs=2\nsize=64m\nnumber_ios=10000");
        let stream = |clone, seed| all(&mut JobGen::new(&j, clone, 0, 64 * M, 512, seed).unwrap());
        assert_eq!(stream(0, 11), stream(0, 11));
        assert_ne!(stream(0, 11), stream(1, 11));
        assert_ne!(stream(0, 11), stream(0, 12));
        // A clone continues exactly like the original.
        let mut a = JobGen::new(&j, 0, 0, 64 * M, 512, 11).unwrap();
        a.by_ref().take(100).for_each(drop);
        let b = a.clone();
        assert_eq!(a.collect::<Vec<_>>(), b.collect::<Vec<_>>());
    }

    #[test]
    fn instances_and_offset_increment() {
        let j = job("rw=write\nnumjobs=4\nsize=1m\noffset_increment=1m");
        let g = JobGen::new(&j, 2, 0, 4 * M, 512, 1).unwrap();
        assert_eq!(g.region(), (2 * M, M));
        let j = job("rw=write\nnumjobs=4\nsize=10%\noffset_increment=25%");
        let g = JobGen::new(&j, 3, 0, 10 * M, 512, 1).unwrap();
        assert_eq!(
            g.region(),
            ((30 * M / 4).div_ceil(4 * K) * 4 * K, M - M % (4 * K))
        );
        let e = JobGen::new(&j, 4, 0, 10 * M, 512, 1).expect_err("no instance 4");
        assert!(e.to_string().contains("numjobs=4"), "{e}");
    }

    #[test]
    fn percentage_size_and_offset() {
        let g = gen("size=50%\noffset=25%", 10 * M);
        assert_eq!(g.region(), (10 * M / 4, 5 * M));
        // Rounded up to the block size (offset) and down (size).
        let g = gen("size=50%\noffset=10%", 1_000_448);
        assert_eq!(g.region(), (102_400, 500_224 - 500_224 % 4096));
        let g = gen("size=50%\noffset=10%\noffset_align=512", 1_000_448);
        assert_eq!(g.region().0, 100_352);
        assert_eq!(gen("", 3 * M).region(), (0, 3 * M));
    }

    #[test]
    fn setup_errors() {
        for (body, space, expect) in [
            ("offset=2m", M, "is not inside its 1048576-byte space"),
            ("size=2m", M, "extends beyond"),
            ("offset=512k\nsize=1m", M, "extends beyond"),
            ("bs=8k\nsize=4k", M, "larger than the job's 4096-byte size"),
            ("bs=1000", M, "not a multiple of the 512-byte sector"),
            ("offset=100", M, "offset 100 is not a multiple"),
            ("rw=write:100", M, "hole of 100 bytes"),
            ("rw=randread\nbs=4k\nba=8k\nsize=4k", M, "leaves no room"),
            ("size=0", M, "size is 0"),
        ] {
            let e = new_err(body, space);
            assert!(e.starts_with("t.fio:1: job 't': "), "{e}");
            assert!(e.contains(expect), "{body}: {e}");
        }
        assert!(JobGen::new(&job(""), 0, 0, M, 0, 1).is_err());
    }

    #[test]
    fn start_delay_range() {
        let j = job("startdelay=1-3\nnumjobs=8");
        let delays: Vec<u64> = (0..8)
            .map(|c| JobGen::new(&j, c, 0, M, 512, 5).unwrap().start_delay())
            .collect();
        assert!(delays
            .iter()
            .all(|d| (1_000_000_000..=3_000_000_000).contains(d)));
        assert!(delays.iter().collect::<HashSet<_>>().len() > 1);
        assert_eq!(
            JobGen::new(&j, 3, 0, M, 512, 5).unwrap().start_delay(),
            delays[3]
        );
        assert_eq!(gen("startdelay=2", M).start_delay(), 2_000_000_000);
    }

    #[test]
    fn blockalign_and_variable_sizes_turn_the_random_map_off() {
        let mut g = gen("rw=randread\nbs=4k\nba=512\nnumber_ios=1000", M);
        assert!(!g.uses_random_map());
        let ios = all(&mut g);
        assert!(ios.iter().all(|io| io.offset % 512 == 0));
        assert!(ios.iter().any(|io| io.offset % (4 * K) != 0));
        assert!(!gen("rw=randread\nbsrange=4k-8k", M).uses_random_map());
        assert!(!gen("rw=randread\nrandom_distribution=zipf", M).uses_random_map());
        assert!(gen("rw=randrw\nbs=8k", M).uses_random_map());
        assert!(!gen("rw=randrw\nbs=4k,8k", M).uses_random_map());
    }

    #[test]
    fn bs_is_seq_rand_sizes_by_randomness() {
        let body = "rw=randwrite\nbs=4k,64k\nbs_is_seq_rand=1\npercentage_random=50\nnorandommap\n\
                    number_ios=2000";
        let ios = all(&mut gen(body, 64 * M));
        assert!(ios.iter().all(|io| io.len == 4 * K || io.len == 64 * K));
        assert!(ios.iter().any(|io| io.len == 4 * K) && ios.iter().any(|io| io.len == 64 * K));
    }

    /// (direction, dspec) of every I/O.
    fn dspecs(ios: &[IoUnit]) -> Vec<(Dir, u16)> {
        ios.iter().map(|io| (io.dir, io.dspec)).collect()
    }

    /// The dspec of every write.
    fn write_dspecs(ios: &[IoUnit]) -> Vec<u16> {
        ios.iter().filter(|io| io.dir == Dir::Write).map(|io| io.dspec).collect()
    }

    #[test]
    fn without_data_placement_every_io_carries_0() {
        let ios = all(&mut gen("rw=randrw\nnumber_ios=2000", 64 * M));
        assert!(ios.iter().all(|io| io.dspec == 0));
    }

    #[test]
    fn round_robin_cycles_the_writes_and_reads_do_not_move_it() {
        // fio sorts plids, so 6,4,5 is 4,5,6.
        let ios = sample("rw=randrw\nnorandommap\nfdp=1\nplids=6,4,5", 64 * M, 3000);
        assert!(ios.iter().filter(|io| io.dir == Dir::Read).all(|io| io.dspec == 0));
        let writes = write_dspecs(&ios);
        assert!(writes.len() > 1000, "{}", writes.len());
        assert_eq!(writes, (0..writes.len()).map(|i| [4, 5, 6][i % 3]).collect::<Vec<u16>>());
        // Reads came between writes: a write, reads, then the next ID.
        let d = dspecs(&ios);
        let i = d.windows(2).position(|w| w[0].0 == Dir::Write && w[1].0 == Dir::Read).unwrap();
        let next_write = d[i + 1..].iter().find(|(dir, _)| *dir == Dir::Write).unwrap().1;
        assert_eq!(next_write, [5, 6, 4][[4, 5, 6].iter().position(|&p| p == d[i].1).unwrap()]);
        // trimwrite: the writes carry the IDs, the trims 0; streams take theirs as given.
        let ios = all(&mut gen("rw=trimwrite\nsize=32k\ndataplacement=streams\nplids=9,3", M));
        assert_eq!(
            dspecs(&ios[..6]),
            [(Dir::Trim, 0), (Dir::Write, 3), (Dir::Trim, 0), (Dir::Write, 9), (Dir::Trim, 0), (Dir::Write, 3)]
        );
        // The cycle carries on across loops (fio never resets pli_loc).
        let ios = all(&mut gen("rw=write\nsize=16k\nloops=2\nfdp=1\nplids=0-2", M));
        assert_eq!(write_dspecs(&ios), [0, 1, 2, 0, 1, 2, 0, 1]);
    }

    #[test]
    fn round_robin_keeps_a_position_per_file() {
        // Two 16 KiB files served in turn: each file cycles the IDs on its own, as fio keeps
        // pli_loc per file.
        let mut g = gen("rw=write\nbs=4k\nsize=32k\nnrfiles=2\nfdp=1\nplids=0-2", M);
        let ios = all(&mut g);
        let by_file: Vec<(usize, u16)> = ios.iter().map(|io| (g.file_of(io.offset), io.dspec)).collect();
        assert_eq!(by_file, [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 0), (1, 0)]);
    }

    #[test]
    fn random_selection_is_uniform_deterministic_and_leaves_the_other_draws_alone() {
        let body = "rw=randrw\nrwmixread=20\nbsrange=4k-16k\nnorandommap";
        let placed = format!("{body}\ndataplacement=streams\nplids=1-8\nplid_select=random");
        let ios = sample(&placed, 64 * M, 20_000);
        let writes = write_dspecs(&ios);
        // About 16,000 writes over 8 IDs: 2,000 each, with a standard deviation of
        // sqrt(n p (1 - p)) = sqrt(16,000 / 8 * 7 / 8) ~ 42 per count. Five deviations (210)
        // is a bound a fair draw essentially never passes, and an unfair one (a missing ID, a
        // bias of 1/8 from an off-by-one) always does.
        let n = writes.len() as f64;
        let sigma = (n / 8.0 * 7.0 / 8.0).sqrt();
        for id in 1..=8u16 {
            let count = writes.iter().filter(|&&w| w == id).count() as f64;
            assert!((count - n / 8.0).abs() < 5.0 * sigma, "ID {id}: {count} of {n}");
        }
        assert!(writes.iter().all(|w| (1..=8).contains(w)));
        assert!(ios.iter().filter(|io| io.dir != Dir::Write).all(|io| io.dspec == 0));
        // Same seed, same sequence; another seed, another.
        let j = job(&format!("{placed}\nnumber_ios=5000"));
        let run = |seed| write_dspecs(&all(&mut JobGen::new(&j, 0, 0, 64 * M, 512, seed).unwrap()));
        assert_eq!(run(11), run(11));
        assert_ne!(run(11), run(12));
        // Its own stream: directions, offsets and sizes are those of the job without placement.
        let plain = sample(body, 64 * M, 20_000);
        let strip = |ios: &[IoUnit]| ios.iter().map(|io| (io.dir, io.offset, io.len)).collect::<Vec<_>>();
        assert_eq!(strip(&ios), strip(&plain));
        let rr = sample(&format!("{body}\nfdp=1\nplids=1-8"), 64 * M, 20_000);
        assert_eq!(strip(&rr), strip(&plain));
    }

    #[test]
    fn random_selection_replays_with_the_loops_under_randrepeat() {
        let body = "rw=write\nsize=64k\nloops=2\nfdp=1\nplids=0-7\nplid_select=random";
        let ios = all(&mut gen(body, M));
        assert_eq!(write_dspecs(&ios[..16]), write_dspecs(&ios[16..]));
        let ios = all(&mut gen(&format!("{body}\nrandrepeat=0"), M));
        assert_ne!(write_dspecs(&ios[..16]), write_dspecs(&ios[16..]));
    }

    #[test]
    fn scheme_takes_the_first_entry_holding_the_offset_in_the_file() {
        let dir = std::env::temp_dir().join(format!("flashmux-fio-gen-scheme-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Overlapping entries: 4096 is in both, the first wins; 16 KiB on is in none.
        std::fs::write(dir.join("lba.scheme"), "0, 8192, 3\n4096, 16384, 5\n").unwrap();
        let text = "[t]\nrw=rw\nbs=4k\nsize=24k\nfdp=1\nplids=1\nplid_select=scheme\ndp_scheme=lba.scheme\n";
        let j = parse_job_text(text, &dir.join("t.fio").display().to_string(), &|_| None).unwrap().jobs.remove(0);
        // The offsets are the job's file's: its space starts 10 MiB into the device.
        let ios = all(&mut JobGen::new(&j, 0, 10 * M, M, 512, 7).unwrap());
        let writes: Vec<(u64, u16)> =
            ios.iter().filter(|io| io.dir == Dir::Write).map(|io| (io.offset - 10 * M, io.dspec)).collect();
        let expect = |o: u64| match o {
            0..=8191 => 3,
            8192..=16383 => 5,
            _ => 0,
        };
        assert!(writes.len() >= 3, "{writes:?}");
        assert!(writes.iter().all(|&(o, d)| d == expect(o)), "{writes:?}");
        assert!(ios.iter().filter(|io| io.dir == Dir::Read).all(|io| io.dspec == 0));
        let j = parse_job_text(&text.replace("rw=rw", "rw=write"), &dir.join("t.fio").display().to_string(), &|_| None)
            .unwrap()
            .jobs
            .remove(0);
        let ios = all(&mut JobGen::new(&j, 0, 10 * M, M, 512, 7).unwrap());
        assert_eq!(write_dspecs(&ios), [3, 3, 5, 5, 0, 0]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn fdp_without_plids_needs_the_drives_placement_ids() {
        let e = new_err("rw=write\nfdp=1", M);
        assert!(e.contains("resolve_placement was not called"), "{e}");
        let mut j = job("rw=write\nsize=16k\nfdp=1");
        j.resolve_placement(Some(3), None).unwrap();
        let ios = all(&mut JobGen::new(&j, 0, 0, M, 512, 7).unwrap());
        assert_eq!(write_dspecs(&ios), [0, 1, 2, 0]);
    }

    const OPTIONAL: &[&str] = &[
        "bs=8k",
        "bs=4k,16k",
        "bsrange=512-64k",
        "bssplit=4k/50:16k/:64k/",
        "ba=512",
        "size=37%",
        "size=3m",
        "offset=10%",
        "offset=1m",
        "io_size=10m",
        "number_ios=500",
        "loops=2",
        "norandommap",
        "percentage_random=40",
        "random_distribution=zipf:0.9",
        "random_distribution=pareto:0.3:0.7",
        "random_distribution=normal:20",
        "random_distribution=zoned:50/10:50/",
        "random_distribution=zoned_abs:50/1m:50/1m",
        "rwmixread=30",
        "rw_sequencer=identical",
        "bs_is_seq_rand=1",
        "randrepeat=0",
        "filesize=1m-3m",
        "offset_increment=5%",
        "numjobs=3",
        "runtime=1\ntime_based",
        "fdp=1\nplids=2-5\nplid_select=random",
    ];
    const MODES: &[&str] = &[
        "read",
        "write",
        "trim",
        "randread",
        "randwrite",
        "randtrim",
        "rw",
        "randrw",
        "trimwrite",
        "randtrimwrite",
        "randread:3",
        "write:8k",
    ];

    proptest::proptest! {
        #[test]
        fn every_io_of_any_job_is_inside_its_space_and_aligned(
            mode in 0..MODES.len(),
            chosen in proptest::collection::vec(proptest::bool::ANY, OPTIONAL.len()),
            space_kib in 1u64..20_000,
            seed in proptest::num::u64::ANY,
            clone in 0u32..3,
        ) {
            let mut body = format!("rw={}", MODES[mode]);
            for (option, _) in OPTIONAL.iter().zip(&chosen).filter(|(_, &on)| on) {
                body.push('\n');
                body.push_str(option);
            }
            let job = job(&body);
            let (space_offset, space) = (7 * M, space_kib * K);
            if let Ok(mut g) = JobGen::new(&job, clone, space_offset, space, 512, seed) {
                for io in g.by_ref().take(3000) {
                    proptest::prop_assert!(io.len > 0 && io.len % 512 == 0, "{body}: {io:?}");
                    proptest::prop_assert!(io.offset % 512 == 0, "{body}: {io:?}");
                    proptest::prop_assert!(io.offset >= space_offset, "{body}: {io:?}");
                    proptest::prop_assert!(io.offset + io.len <= space_offset + space, "{body}: {io:?}");
                    proptest::prop_assert!(job.rw.does(io.dir), "{body}: {io:?}");
                    let placed = job.data_placement.is_some() && io.dir == Dir::Write;
                    proptest::prop_assert!(if placed { (2..=5).contains(&io.dspec) } else { io.dspec == 0 }, "{body}: {io:?}");
                }
                if job.is_time_based() {
                    proptest::prop_assert!(g.next().is_some(), "{body}: time-based job ended");
                }
            }
        }
    }

    /// Not a correctness test: prints what `next()` costs. Run with
    /// `cargo test --release -- --ignored --nocapture next_cost`.
    #[test]
    #[ignore]
    fn next_cost() {
        for body in [
            "rw=randwrite\nbs=4k",
            "rw=randwrite\nbs=4k\nnorandommap",
            "rw=write\nbs=4k",
        ] {
            let mut g = gen(&format!("{body}\nruntime=1\ntime_based"), 1 << 40);
            let n = 20_000_000u64;
            let start = std::time::Instant::now();
            let mut sum = 0u64;
            for _ in 0..n {
                sum = sum.wrapping_add(std::hint::black_box(g.next()).map_or(0, |io| io.offset));
            }
            let ns = start.elapsed().as_nanos() as f64 / n as f64;
            println!("{:40} {ns:.1} ns/next ({sum})", body.replace('\n', " "));
        }
    }
}
