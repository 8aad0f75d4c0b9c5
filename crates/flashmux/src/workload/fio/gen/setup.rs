//! Setting up one instance of a job ([`JobGen::new`]): the job's options resolved into what the
//! generator reads as it issues I/O, in the order fio's `fixup_options`, `setup_files` and
//! `init_random_state` work them out.
//!
//! The steps: the instance and space are checked; the block sizes per direction are gathered
//! (`bs`, `bs_is_seq_rand`, `blockalign`); the region is resolved inside the space (`offset`,
//! `offset_increment`, `size`, `filesize`); sizes, alignments and the `rw` hole are checked
//! against the sector; the number of block starts per direction (fio's `last_block`) is counted;
//! the random offsets are chosen (uniform, the random map, zones, or a skewed sampler); the
//! pass and job limits are set (`size`, `io_size`, `number_ios`, `loops`, trimwrite's doubling);
//! and the job's data placement is set up (gen/placement.rs).
//!
//! Example: `rw=randwrite bs=4k size=1m` in a 16 MiB space gives region [0, 1 MiB), 256 block
//! starts, the random map (every block once per pass), and a 1 MiB pass that counts writes.
//!
//! Randomness: three independent streams per instance from the seed (`stream_seed`): the
//! setup's (a `filesize` range, the skewed samplers' offset, the `startdelay` range, drawn in that
//! order), the I/O stream's, and the skewed samplers'; and two more when the job asks for them,
//! the files' (gen/files.rs) and `plid_select=random`'s (gen/placement.rs).

use rand::{RngCore, SeedableRng};

use super::placement::Placer;
use super::zbd::{ZbdDevice, ZbdJob};
use super::{JobGen, Offsets, NONE, READ, WRITE};
use crate::workload::fio::dist::{self, JobRng, RandomMap, SkewSampler, ZoneTable};
use crate::workload::fio::job::{FioJob, RandomDistribution, RwModifier, RwSequencer, SizeSpec, ZoneMode, NEEDS_ZBD};
use crate::workload::fio::{Dir, FioError};

const SEED_IO: u64 = 1;
const SEED_SETUP: u64 = 2;
const SEED_SKEW: u64 = 3;

/// The job's blocks per direction (indexed by `Dir::index`).
struct Blocks {
    /// The directions the job does.
    active: [bool; 3],
    /// The directions whose block sizes are used: with `bs_is_seq_rand` the read sizes serve
    /// sequential and the write sizes random I/O.
    sized: [bool; 3],
    /// Least and largest block size, in bytes.
    ranges: [(u64, u64); 3],
    /// Random blocks start at multiples of this many bytes.
    blockalign: [u64; 3],
    /// How many block starts the region has (fio's `last_block`); 0 until the region is known.
    last_block: [u64; 3],
}

impl Blocks {
    fn of(job: &FioJob, random: bool) -> Blocks {
        let active = Dir::ALL.map(|d| job.rw.does(d));
        let sized = if job.bs_is_seq_rand { [true, true, false] } else { active };
        let ranges = Dir::ALL.map(|d| job.block_size_range(d));
        // blockalign only applies to random I/O; by default it is the minimum block size.
        let blockalign = Dir::ALL.map(|d| match job.blockalign[d] {
            Some(align) if random => align,
            _ => ranges[d.index()].0,
        });
        Blocks { active, sized, ranges, blockalign, last_block: [0; 3] }
    }
}

/// When a pass and the job end.
struct Limits {
    /// Bytes after which a pass ends.
    pass_cap: u64,
    /// `io_size`, or `size`.
    volume: u64,
    loops: u64,
    /// Which directions' bytes count toward the byte limit.
    counted: [bool; 3],
}

/// Everything `new` works out, for the generator to be assembled from.
struct Parts {
    random: bool,
    blocks: Blocks,
    space: (u64, u64),
    region: (u64, u64),
    /// fio's `ddir_seq_add` and `ddir_seq_nr`.
    skip: u64,
    ios_per_offset: u64,
    offsets: Offsets,
    limits: Limits,
    start_delay: u64,
    placement: Option<Box<Placer>>,
}

impl JobGen {
    /// Prepares instance `clone_index` (`0..numjobs`) of `job` for the byte range
    /// `[space_offset, space_offset + space_len)` of the device, fio's "file": the job's
    /// `offset`, `size` and `offset_increment` (bytes or `%`) resolve inside it. Offsets and sizes
    /// must be multiples of `min_align` (the sector size). `seed` is the only source of
    /// randomness; clones get independent streams from it. A job with FDP placement and no
    /// `plids` needs the drive's placement IDs: call [`FioJob::resolve_placement`] first.
    ///
    /// A job with `zonemode=zbd` needs a zoned drive: it is refused here (naming where
    /// `zonemode=zbd` was given); see [`JobGen::new_zoned`].
    pub fn new(
        job: &FioJob,
        clone_index: u32,
        space_offset: u64,
        space_len: u64,
        min_align: u64,
        seed: u64,
    ) -> Result<JobGen, FioError> {
        if job.zone_mode == ZoneMode::Zbd {
            let (file, line) = job.zbd_given_at.clone().unwrap_or_else(|| (job.file.clone(), job.line));
            return Err(FioError::Unsupported { file, line, option: "zonemode".into(), reason: NEEDS_ZBD.into() });
        }
        JobGen::build(job, clone_index, space_offset, space_len, min_align, seed)
    }

    /// [`JobGen::new`] for a job on a zoned drive, whose host view `dev` the drive's other jobs
    /// (of the same job file) share: fio's `zbd_init_files`, `zbd_recalc_options_with_zone_granularity`
    /// and `zbd_setup_files`. A job without `zonemode=zbd` is built as by [`JobGen::new`]. The
    /// job's space must be whole zones of the drive. Checked, with fio's rules:
    ///
    /// - `zonesize`, if given, is the drive's zone size (`parse_zone_info`); sizes given in
    ///   zones (`size=8z`) are zones of the drive; `zoneskip` is a multiple of it
    ///   (`zbd_zone_align_file_sizes`).
    /// - A write is at most a zone (fio fails the job at its first larger one) and the zone
    ///   capacity holds the least write block; trims are of exactly a zone (`zbd_verify_bs`).
    /// - A writing job uses direct I/O (`zbd_using_direct_io`: fio writes to a host-managed block
    ///   device only with `direct=1`), unless its engine is `io_uring_cmd`, which goes through the
    ///   namespace's character device.
    /// - `max_open_zones` is at most the drive's limit unless `ignore_zone_limits`, and is the
    ///   same for every job on the drive; `job_max_open_zones` needs a limit
    ///   (`zbd_set_max_write_zones`, `zbd_setup_files`); jobs with `zone_reset_threshold` share
    ///   one write range (`zbd_verify_and_set_vdb`).
    ///
    /// The job's region is then aligned to zones as fio's `zbd_zone_align_file_sizes` does it:
    /// a job that only reads ends at the last zone boundary in its range; any other starts at
    /// the first zone boundary at or after its offset and ends at the last one, and must hold a
    /// zone (fio logs the rounding; the volume to do, `size` or `io_size`, is not changed).
    pub fn new_zoned(
        job: &FioJob,
        clone_index: u32,
        space_offset: u64,
        space_len: u64,
        min_align: u64,
        seed: u64,
        dev: &ZbdDevice,
    ) -> Result<JobGen, FioError> {
        if job.zone_mode != ZoneMode::Zbd {
            return JobGen::build(job, clone_index, space_offset, space_len, min_align, seed);
        }
        check_space(job, clone_index, space_offset, space_len, min_align)?;
        let disk = dev.disk();
        let zs = disk.zone_bytes;
        if space_offset % zs != 0 || space_offset.checked_add(space_len).is_none_or(|end| end > disk.bytes()) {
            return Err(job.error(format!(
                "zonemode=zbd: the job's space {space_offset}+{space_len} is not whole zones of the {}-byte drive's {zs}-byte zones",
                disk.bytes()
            )));
        }
        if job.zone_size != 0 && job.zone_size != zs {
            return Err(job.error(format!("zonesize {} does not match the drive's zone size {zs}", job.zone_size)));
        }
        let j = job.with_zone_counts(zs)?;
        if j.zone_skip % zs != 0 {
            return Err(j.error(format!("zoneskip {} is not a multiple of the drive's zone size {zs}", j.zone_skip)));
        }
        let (wmin, wmax) = j.block_size_range(Dir::Write);
        if j.rw.does(Dir::Write) {
            if wmax > zs {
                return Err(j.error(format!("write block size {wmax} exceeds the zone size {zs}")));
            }
            if disk.capacity_bytes < wmin {
                return Err(j.error(format!(
                    "zone capacity {} is smaller than the least write block size {wmin}",
                    disk.capacity_bytes
                )));
            }
            let engine = j.option("ioengine").unwrap_or("");
            if !j.direct && engine != "io_uring_cmd" {
                return Err(j.error("writing to a zoned drive needs direct I/O (direct=1), as fio requires"));
            }
        }
        if j.rw.does(Dir::Trim) && j.bs[Dir::Trim] != zs {
            return Err(j.error(format!("trim block size {} is not the zone size {zs}", j.bs[Dir::Trim])));
        }
        let first = JobGen::build(&j, clone_index, space_offset, space_len, min_align, seed)?;
        let (start, len) = zone_aligned(&j, first.space_offset + first.region_start, first.region_len, zs)?;
        let mut gen = if (start, len) == (first.space_offset + first.region_start, first.region_len) {
            first
        } else {
            let mut aligned = j.clone();
            aligned.offset = SizeSpec::Bytes(start - space_offset);
            aligned.offset_increment = SizeSpec::Bytes(0);
            aligned.filesize = None;
            aligned.size = Some(SizeSpec::Bytes(len));
            let mut gen = JobGen::build(&aligned, clone_index, space_offset, space_len, min_align, seed)?;
            // The volume is the job's own, not the aligned region's.
            (gen.pass_cap, gen.volume, gen.byte_limit, gen.io_size_set) =
                (first.pass_cap, first.volume, first.byte_limit, first.io_size_set);
            gen
        };
        let mut z = ZbdJob::new(dev.clone());
        z.min_zone = (start / zs) as u32;
        z.max_zone = ((start + len) / zs).min(u64::from(disk.zones)) as u32;
        z.job_max_open_zones = j.zbd.job_max_open_zones;
        z.min_bs = Dir::ALL.map(|d| j.block_size_range(d).0);
        z.random = j.rw.is_random();
        z.writes = j.rw.does(Dir::Write);
        z.rw_mix = j.rw.is_read_write_mix();
        z.no_mixed_writes = j.rwmixread == 100;
        z.read_beyond_wp = j.zbd.read_beyond_wp;
        z.zrt = j.zbd.zone_reset_threshold;
        z.zrf = j.zbd.zone_reset_frequency;
        z.verify = j.option("verify").is_some_and(|v| !matches!(v, "0" | "none"));
        z.append = j.zbd.zone_append;
        z.zone_skip = j.zone_skip;
        // fio notes that job_max_open_zones is only for writing jobs; they run without it.
        z.setup(j.zbd.max_open_zones, j.zbd.ignore_zone_limits).map_err(|e| j.error(e))?;
        gen.zbd = Some(Box::new(z));
        Ok(gen)
    }

    /// [`JobGen::new`] once the job is known to be runnable here.
    fn build(
        job: &FioJob,
        clone_index: u32,
        space_offset: u64,
        space_len: u64,
        min_align: u64,
        seed: u64,
    ) -> Result<JobGen, FioError> {
        check_space(job, clone_index, space_offset, space_len, min_align)?;
        if job.nrfiles > 1 {
            return JobGen::with_files(job, clone_index, space_offset, space_len, min_align, seed);
        }
        let random = job.rw.is_random();
        let mut blocks = Blocks::of(job, random);
        let mut setup_rng = JobRng::seed_from_u64(stream_seed(seed, clone_index, SEED_SETUP));
        let min_bs = job.min_block_size();
        let (region_start, region_len, pass_base) =
            resolve_region(job, clone_index, space_len, min_bs, &mut setup_rng)?;
        check_alignment(job, &blocks, region_start, region_len, min_align)?;
        let skip = hole(job, random, min_align)?;
        // fio's last_block: with strided zones, random offsets fall in the zone's range.
        let strided = job.strided_zones();
        if let Some(z) = strided {
            let stride = z.range.saturating_add(z.skip);
            if stride % min_align != 0 {
                return Err(job.error(format!(
                    "zonerange + zoneskip ({stride} bytes) is not a multiple of the {min_align}-byte sector, \
                     so the zones would start unaligned"
                )));
            }
        }
        let span = strided.map_or(region_len, |z| z.range);
        blocks.last_block = last_blocks(job, &blocks, random, span)?;
        let norandommap = fio_norandommap(job, &blocks);
        let skew_offset = setup_rng.next_u64() >> 32;
        let offsets = if random {
            let skew_seed = stream_seed(seed, clone_index, SEED_SKEW);
            random_offsets(job, &blocks, norandommap, span, skew_offset, skew_seed)?
        } else {
            Offsets::Uniform
        };
        let limits = limits(job, pass_base, random, blocks.active, norandommap);
        let (delay_low, delay_high) = job.startdelay;
        let start_delay = delay_low + dist::below(&mut setup_rng, (delay_high - delay_low).saturating_add(1));
        let ios_per_offset = match job.rw_modifier {
            RwModifier::IosPerOffset(n) if random => n,
            _ => 1,
        };
        let rng = JobRng::seed_from_u64(stream_seed(seed, clone_index, SEED_IO));
        let placement = Placer::new(job, clone_index, seed)?.map(Box::new);
        let parts = Parts {
            random,
            blocks,
            space: (space_offset, space_len),
            region: (region_start, region_len),
            skip,
            ios_per_offset,
            offsets,
            limits,
            start_delay,
            placement,
        };
        let mut gen = JobGen::assemble(job, parts, rng);
        debug_assert!(gen.region_end <= gen.space_len, "the region is inside the space");
        gen.begin_pass();
        Ok(gen)
    }

    /// A job with several files: a generator over the range they cover, for the job's own
    /// figures (`region`, `start_delay`, `writes`), that serves I/O from its files'.
    fn with_files(
        job: &FioJob,
        clone_index: u32,
        space_offset: u64,
        space_len: u64,
        min_align: u64,
        seed: u64,
    ) -> Result<JobGen, FioError> {
        let (files, span, volume) = super::files::FileSet::new(job, clone_index, space_offset, space_len, min_align, seed)?;
        // The job's own limits as fio keeps them: a pass is every file once (`size` is the sum
        // of the files' sizes), `io_size` and `number_ios` count over all of them.
        let mut whole = job.clone();
        whole.nrfiles = 1;
        // fio turns strided zones off for a job with several files.
        whole.zone_mode = ZoneMode::None;
        whole.filesize = Some((span, span));
        whole.size = Some(SizeSpec::Bytes(files.total_size()));
        whole.io_size = volume;
        let mut gen = JobGen::new(&whole, clone_index, space_offset, space_len, min_align, seed)?;
        gen.files = Some(Box::new(files));
        Ok(gen)
    }

    /// The generator from its parts, before its first pass.
    fn assemble(job: &FioJob, p: Parts, rng: JobRng) -> JobGen {
        let rw = job.rw;
        let trim_write = rw.is_trim_write();
        let (region_start, region_len) = p.region;
        let Limits { pass_cap, volume, loops, counted } = p.limits;
        JobGen {
            random: p.random,
            single_dir: p.blocks.active.iter().position(|&a| a).unwrap_or(READ),
            read_write_mix: rw.is_read_write_mix(),
            trim_write,
            rand_trim_write: trim_write && p.random,
            rwmixread: job.rwmixread,
            percentage_random: Dir::ALL.map(|d| job.percentage_random[d]),
            bs_min: p.blocks.ranges.map(|r| r.0),
            bs_max: p.blocks.ranges.map(|r| r.1),
            bssplit: Dir::ALL.map(|d| job.bssplit[d].clone().into_boxed_slice()),
            blockalign: p.blocks.blockalign,
            last_block: p.blocks.last_block,
            bs_is_seq_rand: job.bs_is_seq_rand,
            ios_per_offset: p.ios_per_offset,
            skip: p.skip,
            identical: job.rw_sequencer == RwSequencer::Identical,
            time_based: job.is_time_based(),
            replay_passes: job.randrepeat && job.randseed.is_none(),
            offsets: p.offsets,
            space_offset: p.space.0,
            space_len: p.space.1,
            region_start,
            region_len,
            region_end: region_start + region_len,
            file_offset: region_start,
            strided: job.strided_zones(),
            zone_bytes: 0,
            pass_cap,
            volume,
            io_size_set: job.io_size.is_some(),
            byte_limit: volume.saturating_mul(loops),
            ios_limit: job
                .number_ios
                .map_or(u64::MAX, |n| n.saturating_mul(loops).saturating_mul(if trim_write { 2 } else { 1 })),
            loops,
            max_bs: job.max_block_size(),
            counted,
            start_delay: p.start_delay,
            pass_seed: rng.clone(),
            rng,
            last_pos: [region_start; 3],
            last_start: [NONE; 3],
            seq_countdown: p.ios_per_offset,
            rwmix_dir: READ,
            rwmix_issues: 0,
            issues: [0; 3],
            passes_done: 0,
            pass_bytes: 0,
            pass_ios: 0,
            counted_bytes: 0,
            stat_bytes: 0,
            stat_ios: 0,
            bytes: 0,
            ios: 0,
            done: false,
            files: None,
            in_set: false,
            placement: p.placement,
            zbd: None,
            zbd_resume: None,
            zbd_started: false,
        }
    }
}

/// fio's `zbd_zone_align_file_sizes`: the job's region (device bytes) aligned to zones.
fn zone_aligned(job: &FioJob, start: u64, len: u64, zone: u64) -> Result<(u64, u64), FioError> {
    let too_small = || job.error(format!("zonemode=zbd: io_size must be at least one zone ({zone} bytes) past the first zone boundary"));
    let end = start + len;
    let new_end = end / zone * zone;
    let reads_only = job.rw.does(Dir::Read) && !job.rw.does(Dir::Write) && !job.rw.does(Dir::Trim);
    if reads_only {
        // fio would read nothing (io_size 0) from a range inside one zone.
        if new_end <= start {
            return Err(too_small());
        }
        return Ok((start, new_end - start));
    }
    let new_start = start.div_ceil(zone) * zone;
    if new_start >= end || new_end <= new_start {
        return Err(too_small());
    }
    Ok((new_start, new_end - new_start))
}

/// The instance exists, the space does not wrap and the alignment is not 0.
fn check_space(
    job: &FioJob,
    clone_index: u32,
    space_offset: u64,
    space_len: u64,
    min_align: u64,
) -> Result<(), FioError> {
    if clone_index >= job.numjobs {
        return Err(job.error(format!("instance {clone_index} does not exist (numjobs={})", job.numjobs)));
    }
    if min_align == 0 || space_offset.checked_add(space_len).is_none() {
        return Err(job.error(format!("invalid space {space_offset}+{space_len} or alignment {min_align}")));
    }
    Ok(())
}

/// Every block size, `bssplit` entry, `blockalign` and the region's start are multiples of the
/// sector, and each direction's least block fits the region.
fn check_alignment(
    job: &FioJob,
    blocks: &Blocks,
    region_start: u64,
    region_len: u64,
    min_align: u64,
) -> Result<(), FioError> {
    let aligned = |v: u64| v % min_align == 0;
    for (i, dir) in Dir::ALL.into_iter().enumerate() {
        if !(blocks.active[i] || blocks.sized[i]) {
            continue;
        }
        let (min, max) = blocks.ranges[i];
        let split_ok = job.bssplit[dir].iter().all(|s| aligned(s.bs));
        if !aligned(min) || !aligned(max) || !split_ok {
            return Err(
                job.error(format!("{dir:?} block size {min}..{max} is not a multiple of the {min_align}-byte sector"))
            );
        }
        if !aligned(blocks.blockalign[i]) {
            return Err(job.error(format!(
                "blockalign {} is not a multiple of the {min_align}-byte sector",
                blocks.blockalign[i]
            )));
        }
        if min > region_len {
            return Err(job.error(format!("{dir:?} block size {min} is larger than the job's {region_len}-byte size")));
        }
    }
    if !aligned(region_start) {
        return Err(job.error(format!("offset {region_start} is not a multiple of the {min_align}-byte sector")));
    }
    Ok(())
}

/// The hole a sequential job skips after each I/O (`rw=write:4k`), a multiple of the sector.
fn hole(job: &FioJob, random: bool, min_align: u64) -> Result<u64, FioError> {
    let skip = match job.rw_modifier {
        RwModifier::Skip(bytes) if !random => bytes,
        _ => 0,
    };
    if skip % min_align != 0 {
        return Err(job.error(format!("rw hole of {skip} bytes is not a multiple of the {min_align}-byte sector")));
    }
    Ok(skip)
}

/// Block starts per direction; a random job needs at least one in each direction it does.
fn last_blocks(job: &FioJob, blocks: &Blocks, random: bool, region_len: u64) -> Result<[u64; 3], FioError> {
    let (ranges, blockalign) = (blocks.ranges, blocks.blockalign);
    let last_block = [0, 1, 2].map(|i| last_block(region_len, ranges[i].0, blockalign[i]));
    if random {
        if let Some(i) = (0..3).find(|&i| blocks.active[i] && last_block[i] == 0) {
            return Err(job.error(format!(
                "blockalign {} leaves no room for a {}-byte block in the job's {region_len}-byte size",
                blockalign[i], ranges[i].0
            )));
        }
    }
    Ok(last_block)
}

/// fio's effective norandommap (`fixup_options`): set by the option, by any non-uniform
/// distribution, and by a blockalign other than the minimum block size.
fn fio_norandommap(job: &FioJob, blocks: &Blocks) -> bool {
    job.norandommap
        || job.random_distribution != RandomDistribution::Random
        || (0..3).any(|i| blocks.active[i] && blocks.blockalign[i] != blocks.ranges[i].0)
}

/// How a random job draws its block numbers.
fn random_offsets(
    job: &FioJob,
    blocks: &Blocks,
    norandommap: bool,
    region_len: u64,
    skew_offset: u64,
    skew_seed: u64,
) -> Result<Offsets, FioError> {
    let (active, last_block) = (blocks.active, blocks.last_block);
    let mut sizes_used = (0..3).filter(|&i| active[i] || blocks.sized[i]).map(|i| blocks.ranges[i]);
    let first = sizes_used.next().unwrap_or((0, 0));
    let fixed_bs = first.0 == first.1 && sizes_used.all(|r| r == first);
    Ok(match &job.random_distribution {
        // fio keeps its map for variable block sizes too, marking every block an I/O covers
        // and shortening I/Os that would overlap marked blocks; that needs a bitmap, so
        // variable sizes draw independently here.
        RandomDistribution::Random if !norandommap && fixed_bs => {
            Offsets::Map(RandomMap::new(last_block[active.iter().position(|&a| a).unwrap_or(0)]))
        }
        RandomDistribution::Random => Offsets::Uniform,
        RandomDistribution::Zoned(zones) => Offsets::Zoned(Dir::ALL.map(|d| {
            let i = d.index();
            (!zones[d].is_empty()).then(|| ZoneTable::percent(&zones[d], last_block[i]))
        })),
        RandomDistribution::ZonedAbs(zones) => {
            let mut tables = [None, None, None];
            for (i, dir) in Dir::ALL.into_iter().enumerate() {
                if !active[i] || zones[dir].is_empty() {
                    continue;
                }
                let table = ZoneTable::absolute(&zones[dir], blocks.blockalign[i], last_block[i]).map_err(|end| {
                    // Zones hold block starts: a zone past the last block that fits is
                    // refused even when it ends inside the job's size.
                    job.error(format!(
                        "zoned_abs zones end at byte {end}, beyond the first {} bytes, where a {}-byte block \
                             (aligned to {} bytes) can start in the job's {region_len}-byte size",
                        last_block[i] * blocks.blockalign[i],
                        blocks.ranges[i].0,
                        blocks.blockalign[i]
                    ))
                })?;
                tables[i] = Some(table);
            }
            Offsets::Zoned(tables)
        }
        dist => Offsets::Skewed {
            samplers: last_block.map(|n| (n > 0).then(|| SkewSampler::new(dist, n, skew_offset)).flatten()),
            rng: JobRng::seed_from_u64(skew_seed),
        },
    })
}

/// A pass's and the job's limits from `size` (`pass_base`), `io_size` and `loops`.
fn limits(job: &FioJob, pass_base: u64, random: bool, active: [bool; 3], norandommap: bool) -> Limits {
    let rw = job.rw;
    let volume = job.io_size.unwrap_or(pass_base);
    let mut pass_cap = pass_base;
    // fio lets a random writer without a random map write up to io_size in one pass.
    if random && active[WRITE] && norandommap {
        pass_cap = pass_cap.max(job.io_size.unwrap_or(0));
    }
    // Each trimwrite byte is trimmed and written, so the pass and number_ios double (the
    // byte volume counts writes only, see `counted`).
    if rw.is_trim_write() {
        pass_cap = pass_cap.saturating_add(volume);
    }
    let loops = u64::from(job.loops.max(1));
    let counted = if rw.is_read_write_mix() {
        [true, true, false]
    } else if active[WRITE] {
        [false, true, false]
    } else {
        active
    };
    Limits { pass_cap, volume, loops, counted }
}

/// fio's `last_block`: how many `align`-spaced offsets leave room for a `min_bs` block.
fn last_block(region_len: u64, min_bs: u64, align: u64) -> u64 {
    region_len.saturating_sub(min_bs.saturating_sub(align)) / align
}

/// Resolves `offset`, `offset_increment`, `size` and `filesize` inside the space, as fio's
/// `get_start_offset` and `setup_files` do: percentages are of the whole space; a percentage
/// offset (or increment) is rounded up to `offset_align`, default the minimum block size; a
/// percentage size is capped at what follows the offset and rounded down to the minimum block
/// size. Returns (region start, region length, bytes per pass), the last being `size` when a
/// `filesize` sets the region.
fn resolve_region(
    job: &FioJob,
    clone_index: u32,
    space_len: u64,
    min_bs: u64,
    rng: &mut JobRng,
) -> Result<(u64, u64, u64), FioError> {
    let percent_of = |p: u32| (u128::from(space_len) * u128::from(p) / 100) as u64;
    let overflow = || job.error("offset overflows");
    let (increment, mut align) = match job.offset_increment {
        SizeSpec::Bytes(b) => (b, false),
        SizeSpec::Percent(p) => (percent_of(p), true),
    };
    let base = match job.offset {
        SizeSpec::Bytes(b) => b,
        SizeSpec::Percent(p) => {
            align = true;
            percent_of(p)
        }
    };
    let mut start =
        increment.checked_mul(u64::from(clone_index)).and_then(|step| step.checked_add(base)).ok_or_else(overflow)?;
    if align {
        let a = job.offset_align.unwrap_or(min_bs);
        start = start.div_ceil(a).checked_mul(a).ok_or_else(overflow)?;
    }
    if start >= space_len {
        return Err(job.error(format!("offset {start} is not inside its {space_len}-byte space")));
    }
    let room = space_len - start;
    let (len, per_pass) = match (job.filesize, job.size) {
        (Some((low, high)), size) => {
            let mut len = low;
            if high > low {
                len = low + dist::below(rng, high - low + 1);
                len = (len - len % min_bs).max(low);
            }
            let per_pass = match size {
                Some(SizeSpec::Bytes(b)) => b.min(len),
                _ => len,
            };
            (len, per_pass)
        }
        (None, Some(SizeSpec::Bytes(b))) => (b, b),
        (None, Some(SizeSpec::Percent(p))) => {
            let len = percent_of(p).min(room);
            let len = len - len % min_bs;
            (len, len)
        }
        (None, None) => (room, room),
    };
    if len == 0 {
        return Err(job.error("size is 0"));
    }
    if len > room {
        return Err(job.error(format!("offset {start} + size {len} extends beyond its {space_len}-byte space")));
    }
    Ok((start, len, per_pass))
}

/// Independent generator seeds per (seed, instance, purpose).
pub(super) fn stream_seed(seed: u64, clone_index: u32, purpose: u64) -> u64 {
    splitmix64(seed ^ splitmix64(u64::from(clone_index) << 8 | purpose))
}

pub(super) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::fio::parse_job_text;

    fn job(body: &str) -> FioJob {
        parse_job_text(&format!("[t]\n{body}\n"), "t.fio", &|_| None).expect("job parses").jobs.remove(0)
    }

    /// The step that sets a pass's and the job's limits: trimwrite's pass holds the trims and
    /// the writes, a random writer without the random map may write its io_size in one pass, and
    /// only the directions fio counts count.
    #[test]
    fn limits_by_direction_and_map() {
        let j = job("rw=trimwrite\nbs=4k\nsize=1m");
        let l = limits(&j, 1 << 20, false, Blocks::of(&j, false).active, false);
        assert_eq!((l.pass_cap, l.volume, l.counted), (2 << 20, 1 << 20, [false, true, false]));

        let j = job("rw=randwrite\nbs=4k\nsize=1m\nio_size=8m");
        let active = Blocks::of(&j, true).active;
        assert_eq!(limits(&j, 1 << 20, true, active, true).pass_cap, 8 << 20);
        assert_eq!(limits(&j, 1 << 20, true, active, false).pass_cap, 1 << 20);

        let j = job("rw=randrw\nbs=4k\nloops=3");
        let l = limits(&j, 1 << 20, true, Blocks::of(&j, true).active, false);
        assert_eq!((l.loops, l.counted), (3, [true, true, false]));
    }

    /// fio's effective norandommap: the option, a skewed distribution, or a blockalign other
    /// than the least block size; the random map otherwise.
    #[test]
    fn norandommap_as_fio_fixes_it_up() {
        let on = |body: &str| {
            let j = job(body);
            fio_norandommap(&j, &Blocks::of(&j, j.rw.is_random()))
        };
        assert!(!on("rw=randread\nbs=4k"));
        assert!(on("rw=randread\nbs=4k\nnorandommap"));
        assert!(on("rw=randread\nbs=4k\nrandom_distribution=zipf:1.2"));
        assert!(on("rw=randread\nbs=8k\nba=4k"));
        assert!(!on("rw=randread\nbs=4k\nba=4k"));
    }

    /// A sequential job's hole must be whole sectors; a random job has none.
    #[test]
    fn holes_are_sector_multiples() {
        assert_eq!(hole(&job("rw=write:8k\nbs=4k"), false, 512).ok(), Some(8192));
        assert_eq!(hole(&job("rw=randwrite:4\nbs=4k"), true, 512).ok(), Some(0));
        assert!(hole(&job("rw=write:1000\nbs=4k"), false, 512).is_err());
    }

    /// Three streams per instance, different from each other and from another instance's.
    #[test]
    fn stream_seeds_are_independent() {
        let seeds = [SEED_IO, SEED_SETUP, SEED_SKEW].map(|p| stream_seed(7, 0, p));
        assert!(seeds[0] != seeds[1] && seeds[1] != seeds[2] && seeds[0] != seeds[2]);
        assert_ne!(stream_seed(7, 1, SEED_IO), seeds[0]);
        assert_eq!(stream_seed(7, 0, SEED_IO), seeds[0]);
    }
}
