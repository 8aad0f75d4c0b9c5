//! The mapping from fio's options onto a [`FioJob`]: each option's canonical name and aliases,
//! its value type and the message when the value is not of it, which options are noted as having
//! no effect on a storage model or as not modelled, and the order fio applies them in.
//!
//! Option names, aliases, value types and defaults are fio's (HOWTO "Job file parameters" and
//! the option table in fio's `options.c`).

use super::*;
use crate::units::shown;

pub(super) const NS_PER_SEC: u64 = 1_000_000_000;
pub(super) const NS_PER_USEC: u64 = 1_000;

pub(super) const EXPECT_SIZE: &str = "a size such as 4k, 64KiB or 4096";
pub(super) const EXPECT_SIZE_OR_PERCENT: &str =
    "a size such as 4k, 64KiB or 4096, or a percentage from 1% to 100%";
pub(super) const EXPECT_OFFSET: &str =
    "a size such as 4k, 64KiB or 4096, or a percentage from 0% to 100%";
pub(super) const EXPECT_INT: &str = "an integer such as 32";
pub(super) const EXPECT_PERCENT: &str = "an integer percentage from 0 to 100";
pub(super) const EXPECT_BOOL: &str = "0 or 1";
pub(super) const EXPECT_TIME_S: &str = "a time such as 30, 500ms or 2m (a bare number is seconds)";
pub(super) const EXPECT_TIME_US: &str = "a time such as 100, 5ms or 1s (a bare number is microseconds)";
/// Why `zonemode=zbd` is refused on a conventional drive.
pub(crate) const NEEDS_ZBD: &str =
    "zonemode=zbd needs a zoned block device (NVMe ZNS); the drive is conventional";
/// fio's `ZBD_MAX_WRITE_ZONES`: the largest `max_open_zones` and `job_max_open_zones`.
pub const ZBD_MAX_WRITE_ZONES: u32 = 4096;
pub(super) const EXPECT_ZONES: &str = "a number of zones such as 8z";
pub(super) const EXPECT_FRACTION: &str = "a number from 0 to 1, such as 0.5";
/// The options only `zonemode=zbd` uses.
const ZBD_ONLY: &[&str] = &[
    "zonecapacity", "max_open_zones", "job_max_open_zones", "ignore_zone_limits", "zone_reset_threshold",
    "zone_reset_frequency", "read_beyond_wp",
];
pub(super) const EXPECT_RW: &str = "one of read, write, trim, randread, randwrite, randtrim, rw, readwrite, \
                         randrw, trimwrite, randtrimwrite, optionally followed by :<nr>";


impl FioJob {
    /// Applies one option. Unknown and unmodelled options are reported through the outcome,
    /// quirks worth knowing about through `warnings`.
    pub(crate) fn apply(
        &mut self,
        opt: &RawOption<'_>,
        warnings: &mut Vec<Diagnostic>,
    ) -> Result<Outcome, FioError> {
        let o = Opt {
            raw: opt,
            kb: self.kb_base,
        };
        match opt.name {
            "name" => self.name = o.text("a job name")?.to_string(),
            "rw" => self.set_rw(&o)?,
            "rw_sequencer" => {
                self.rw_sequencer = match o.text("sequential or identical")? {
                    "sequential" => RwSequencer::Sequential,
                    "identical" => RwSequencer::Identical,
                    _ => return Err(o.invalid("sequential or identical")),
                }
            }
            "rwmixread" => self.rwmixread = o.percent()?,
            "rwmixwrite" => self.rwmixread = 100 - o.percent()?,
            "kb_base" => {
                self.kb_base = match o.text("1000 or 1024")? {
                    "1024" => KbBase::K1024,
                    "1000" => KbBase::K1000,
                    _ => return Err(o.invalid("1000 or 1024")),
                }
            }
            "bs" => {
                let sizes = o.per_dir(warnings, EXPECT_SIZE, |t| {
                    units::parse_size(t, o.kb).filter(|&v| v > 0)
                })?;
                merge(&mut self.bs, sizes);
            }
            "ba" => {
                let sizes = o.per_dir(warnings, EXPECT_SIZE, |t| {
                    units::parse_size(t, o.kb).filter(|&v| v > 0)
                })?;
                merge(&mut self.blockalign, sizes.map(|s| s.map(Some)));
            }
            "bsrange" => self.set_bsrange(&o)?,
            "bssplit" => self.set_bssplit(&o)?,
            "bs_is_seq_rand" => self.bs_is_seq_rand = o.bool()?,
            // size, io_size, offset, offset_increment and zoneskip also take a number of zones
            // (fio's FIO_OPT_STR_VAL_ZONE: `8z`), which becomes bytes once the zone size is known.
            "size" => match o.zones()? {
                Some(n) => (self.size, self.in_zones.size) = (None, Some(n).filter(|&n| n > 0)),
                None => (self.size, self.in_zones.size) = (Some(o.quantity()?.into()), None),
            },
            "offset" => match o.zones()? {
                Some(n) => (self.offset, self.in_zones.offset) = (SizeSpec::Bytes(0), Some(n).filter(|&n| n > 0)),
                None => (self.offset, self.in_zones.offset) = (o.offset()?, None),
            },
            "offset_increment" => match o.zones()? {
                Some(n) => {
                    (self.offset_increment, self.in_zones.offset_increment) = (SizeSpec::Bytes(0), Some(n).filter(|&n| n > 0))
                }
                None => (self.offset_increment, self.in_zones.offset_increment) = (o.offset()?, None),
            },
            "offset_align" => self.offset_align = Some(o.size()?).filter(|&v| v > 0),
            "filesize" => {
                let (low, high) = o.range(EXPECT_SIZE, |t| {
                    units::parse_size(t, o.kb).filter(|&v| v > 0)
                })?;
                self.filesize = Some((low, high));
            }
            "io_size" => match o.zones()? {
                Some(n) => (self.io_size, self.in_zones.io_size) = (None, Some(n).filter(|&n| n > 0)),
                None => (self.io_size, self.in_zones.io_size) = (Some(o.size()?).filter(|&v| v > 0), None),
            },
            "number_ios" => self.number_ios = Some(o.int()?).filter(|&v| v > 0),
            "iodepth" => self.iodepth = o.int_in(1, u32::MAX as u64)? as u32,
            "iodepth_batch" => self.iodepth_batch = o.int_in(0, u32::MAX as u64)? as u32,
            "iodepth_batch_complete_min" => {
                self.iodepth_batch_complete_min = o.int_in(0, u32::MAX as u64)? as u32
            }
            "numjobs" => self.numjobs = o.int_in(1, u32::MAX as u64)? as u32,
            // fio runs a job with loops=0 once.
            "loops" => self.loops = (o.int_in(0, u32::MAX as u64)? as u32).max(1),
            "runtime" => self.runtime = Some(o.time(NS_PER_SEC, EXPECT_TIME_S)?).filter(|&v| v > 0),
            "time_based" => self.time_based = o.flag()?,
            "ramp_time" => self.ramp_time = o.time(NS_PER_SEC, EXPECT_TIME_S)?,
            "startdelay" => {
                self.startdelay =
                    o.range(EXPECT_TIME_S, |t| units::parse_time_ns(t, NS_PER_SEC))?;
            }
            "rate" => {
                let rates = o.per_dir(warnings, EXPECT_SIZE, |t| units::parse_size(t, o.kb))?;
                merge(
                    &mut self.rate,
                    rates.map(|r| r.map(|v| Some(v).filter(|&v| v > 0))),
                );
            }
            "rate_iops" => {
                let rates = o.per_dir(warnings, EXPECT_INT, |t| units::parse_size(t, o.kb))?;
                merge(
                    &mut self.rate_iops,
                    rates.map(|r| r.map(|v| Some(v).filter(|&v| v > 0))),
                );
            }
            "rate_process" => {
                self.rate_process = match o.text("linear or poisson")? {
                    "linear" => RateProcess::Linear,
                    "poisson" => RateProcess::Poisson,
                    _ => return Err(o.invalid("linear or poisson")),
                }
            }
            "thinktime" => self.thinktime = o.time(NS_PER_USEC, EXPECT_TIME_US)?,
            "thinktime_spin" => self.thinktime_spin = o.time(NS_PER_USEC, EXPECT_TIME_US)?,
            "thinktime_blocks" => self.thinktime_blocks = o.int_in(1, u64::MAX)?,
            "thinktime_blocks_type" => {
                self.thinktime_blocks_type = match o.text("complete or issue")? {
                    "complete" => ThinktimeBlocksType::Complete,
                    "issue" => ThinktimeBlocksType::Issue,
                    _ => return Err(o.invalid("complete or issue")),
                }
            }
            "thinktime_iotime" => self.thinktime_iotime = o.time(NS_PER_SEC, EXPECT_TIME_S)?,
            // fio's continue_on_error (options.c: none, read, write, io, verify, all; 0 and 1 as
            // none and all): which failed I/Os the job goes on after.
            "continue_on_error" => {
                const EXPECT: &str = "none, read, write, io, verify, all, 0 or 1";
                self.continue_on_error = match o.text(EXPECT)? {
                    "none" | "0" => ContinueOnError::None,
                    "read" => ContinueOnError::Read,
                    "write" => ContinueOnError::Write,
                    "io" => ContinueOnError::Io,
                    "verify" => ContinueOnError::Verify,
                    "all" | "1" => ContinueOnError::All,
                    _ => return Err(o.invalid(EXPECT)),
                }
            }
            "fsync" => self.fsync = o.int_in(0, u32::MAX as u64)?,
            "fdatasync" => self.fdatasync = o.int_in(0, u32::MAX as u64)?,
            "end_fsync" => self.end_fsync = o.bool()?,
            "fsync_on_close" => self.fsync_on_close = o.bool()?,
            "direct" => self.direct = o.bool()?,
            "buffered" => self.direct = !o.bool()?,
            "random_distribution" => self.random_distribution = parse_distribution(&o)?,
            "percentage_random" => {
                let p = o.per_dir(warnings, EXPECT_PERCENT, |t| {
                    t.parse::<u32>().ok().filter(|&v| v <= 100)
                })?;
                merge(&mut self.percentage_random, p);
            }
            "norandommap" => self.norandommap = o.flag()?,
            "randrepeat" => self.randrepeat = o.bool()?,
            "randseed" => self.randseed = Some(o.int()?),
            "stonewall" => self.stonewall = o.flag()?,
            "new_group" => self.new_group = o.flag()?,
            "group_reporting" => self.group_reporting = o.flag()?,
            "ioengine" => {
                // The engines whose "I/O" is a timed system call on a file or directory (fio's
                // engines/fileoperations.c) change what the job does; any other engine issues
                // block I/O, which the model times the same whatever submits it.
                let engine = o.text("an I/O engine")?;
                self.engine = FileEngine::from_fio(engine);
                return Ok(if self.engine.is_some() { Outcome::Applied } else { Outcome::Noted });
            }
            // The file and directory stat engines' option (fio's `filestat_options`): which of
            // stat, lstat and statx; they cost the same here.
            "stat_type" => {
                return match o.text("stat, lstat or statx")? {
                    "stat" | "lstat" | "statx" => Ok(Outcome::Noted),
                    _ => Err(o.invalid("stat, lstat or statx")),
                }
            }
            // io_uring_cmd's passthrough command set: NVMe, or SCSI through bsg.
            "cmd_type" => {
                return match o.text("nvme or bsg")? {
                    "nvme" => Ok(Outcome::Noted),
                    "bsg" => Err(o.unsupported("SCSI passthrough (bsg) is not modelled; the simulated drive is NVMe")),
                    _ => Err(o.invalid("nvme or bsg")),
                }
            }
            "fdp" => self.placement_options.fdp = o.bool()?,
            "dataplacement" => {
                self.placement_options.kind = Some(match o.text("none, fdp or streams")? {
                    "none" => None,
                    "fdp" => Some(PlacementKind::Fdp),
                    "streams" => Some(PlacementKind::Streams),
                    _ => return Err(o.invalid("none, fdp or streams")),
                })
            }
            "plids" => {
                let ids = parse_plids(o.text(EXPECT_PLIDS)?).map_err(|e| o.invalid(&e))?;
                self.placement_options.ids = Some(ids);
            }
            "plid_select" => {
                self.placement_options.select = Some(match o.text("random, roundrobin or scheme")? {
                    "random" => SelectName::Random,
                    "roundrobin" => SelectName::RoundRobin,
                    "scheme" => SelectName::Scheme,
                    _ => return Err(o.invalid("random, roundrobin or scheme")),
                })
            }
            "dp_scheme" => self.placement_options.scheme = Some(read_scheme(&o, warnings)?),
            // fio's zonemode, zonesize, zonerange and zoneskip (options.c): sizes with fio's
            // units; `finish` checks them together as fio's `fixup_options` does.
            "zonemode" => {
                self.zone_mode = match o.text("none, strided or zbd")? {
                    "none" => ZoneMode::None,
                    "strided" => ZoneMode::Strided,
                    "zbd" => {
                        self.zbd_given_at = Some((o.raw.file.to_string(), o.raw.line));
                        ZoneMode::Zbd
                    }
                    _ => return Err(o.invalid("none, strided or zbd")),
                }
            }
            "zonesize" => self.zone_size = o.size()?,
            "zonerange" => self.zone_range = o.size()?,
            "zoneskip" => match o.zones()? {
                Some(n) => (self.zone_skip, self.in_zones.zone_skip) = (0, Some(n).filter(|&n| n > 0)),
                None => (self.zone_skip, self.in_zones.zone_skip) = (o.size()?, None),
            },
            // The options of zonemode=zbd (options.c): checked against the drive when the job
            // meets it (JobGen::new_zoned), as fio's zbd_setup_files does.
            "zonecapacity" => self.zbd.zone_capacity = o.size()?,
            "max_open_zones" => self.zbd.max_open_zones = o.int_in(0, u64::from(ZBD_MAX_WRITE_ZONES))? as u32,
            "job_max_open_zones" => {
                self.zbd.job_max_open_zones = o.int_in(0, u64::from(ZBD_MAX_WRITE_ZONES))? as u32
            }
            "ignore_zone_limits" => self.zbd.ignore_zone_limits = o.bool()?,
            "zone_reset_threshold" => self.zbd.zone_reset_threshold = o.fraction()?,
            "zone_reset_frequency" => self.zbd.zone_reset_frequency = o.fraction()?,
            "read_beyond_wp" => self.zbd.read_beyond_wp = o.bool()?,
            // The io_uring_cmd engine's write command (engines/io_uring.c, str_write_mode_cb).
            "write_mode" => {
                const EXPECTED: &str = "write, uncor, zeroes, verify or zone_append";
                self.zbd.zone_append = match o.text(EXPECTED)? {
                    "write" => false,
                    "zone_append" => true,
                    "uncor" | "zeroes" | "verify" => {
                        return Err(o.unsupported("only writes (write) and Zone Append (zone_append) are modelled"))
                    }
                    t if t.contains('/') => {
                        return Err(o.unsupported("a mix of write commands is not modelled; give write or zone_append"))
                    }
                    _ => return Err(o.invalid(EXPECTED)),
                }
            }
            "write_zone_remainder" => {
                return match o.bool()? {
                    false => Ok(Outcome::Noted),
                    true => Err(o.unsupported(
                        "writing zone remainders with writes smaller than the block size is not modelled; \
                         fio's default, finishing such zones, is",
                    )),
                }
            }
            // It recovers from failed writes, which the model's drive does not fail.
            "recover_zbd_write_error" => {
                o.bool()?;
                return Ok(Outcome::Noted);
            }
            "nrfiles" => self.nrfiles = o.int_in(1, MAX_NRFILES)? as u32,
            "file_service_type" => self.file_service = parse_file_service(&o)?,
            "create_on_open" => self.create_on_open = o.bool()?,
            "unlink" => self.unlink = o.bool()?,
            "fallocate" => {
                self.fallocate = match o.text("none, native, posix, keep, truncate, 0 or 1")? {
                    "native" | "posix" | "keep" | "1" => true,
                    "none" | "truncate" | "0" => false,
                    _ => return Err(o.invalid("none, native, posix, keep, truncate, 0 or 1")),
                }
            }
            "read_iolog" => return Err(o.unsupported("I/O log replay is not modelled")),
            "bs_unaligned" => {
                return Err(o.unsupported("the simulated device needs sector-aligned I/O sizes"))
            }
            "file_append" | "fill_device" | "verify_only" => {
                return match o.bool()? {
                    false => Ok(Outcome::Noted),
                    true => Err(o.unsupported("this changes the I/O stream in an unmodelled way")),
                }
            }
            "percentage_sequential" => {
                return Err(o.unsupported("fio deprecated it; use percentage_random"))
            }
            name if NOTED.contains(&name) => return Ok(Outcome::Noted),
            name if NOT_MODELLED.contains(&name) => return Ok(Outcome::NotModelled),
            _ => return Ok(Outcome::Unknown),
        }
        Ok(Outcome::Applied)
    }

    fn set_rw(&mut self, o: &Opt<'_>) -> Result<(), FioError> {
        let text = o.text(EXPECT_RW)?;
        let (mode_text, suffix) = match text.split_once(':') {
            Some((m, s)) => (m, Some(s.trim())),
            None => (text, None),
        };
        let mode = match RwMode::from_fio(mode_text) {
            Some(mode) => mode,
            None if FileEngine::from_fio(mode_text).is_some() => {
                return Err(o.invalid(&format!("{EXPECT_RW} ({mode_text} is an I/O engine: ioengine={mode_text})")))
            }
            None => return Err(o.invalid(EXPECT_RW)),
        };
        // Every rw= resets the modifier (fio's str_rw_cb).
        self.rw = mode;
        self.rw_modifier = match suffix {
            None => RwModifier::None,
            Some(s) if s.starts_with('-') => {
                return Err(o.unsupported("backwards sequential I/O (negative rw offset modifier)"))
            }
            Some(s) if mode.is_random() => match s.parse::<u64>() {
                Ok(n) if n >= 1 => RwModifier::IosPerOffset(n),
                _ => {
                    return Err(
                        o.invalid("a random mode followed by :<nr of I/Os>, such as randread:8")
                    )
                }
            },
            Some(s) => match units::parse_size(s, o.kb) {
                Some(0) => RwModifier::None,
                Some(bytes) => RwModifier::Skip(bytes),
                None => {
                    return Err(o.invalid("a sequential mode followed by :<size>, such as write:4k"))
                }
            },
        };
        Ok(())
    }

    fn set_bsrange(&mut self, o: &Opt<'_>) -> Result<(), FioError> {
        const EXPECTED: &str = "a block size range such as 1k-4k (or 1k:4k), per direction";
        // fio splits a range option at commas only; '-' and ':' separate the ends of a range.
        let text = o.text(EXPECTED)?;
        let comps: Vec<&str> = text.split(',').collect();
        let ranges = assign_per_dir(&comps, |c| {
            let (low, high) = c.split_once('-').or_else(|| c.split_once(':'))?;
            let low = units::parse_size(low, o.kb).filter(|&v| v > 0)?;
            let high = units::parse_size(high, o.kb).filter(|&v| v > 0)?;
            Some((low.min(high), low.max(high)))
        })
        .ok_or_else(|| o.invalid(EXPECTED))?;
        merge(&mut self.bsrange, ranges.map(|r| r.map(Some)));
        Ok(())
    }

    fn set_bssplit(&mut self, o: &Opt<'_>) -> Result<(), FioError> {
        const EXPECTED: &str = "block size/percentage pairs such as 4k/10:64k/50:32k/40 whose \
                                percentages add up to 100 (blank percentages share the rest), \
                                per direction";
        let text = o.text(EXPECTED)?;
        let comps: Vec<&str> = text.split(',').collect();
        // What a direction's split got wrong, when more can be said than EXPECTED.
        let why = std::cell::RefCell::new(None);
        let splits = assign_per_dir(&comps, |c| {
            parse_bssplit(c, o.kb).map_err(|w| *why.borrow_mut() = w).ok()
        })
        .ok_or_else(|| match why.take() {
            Some(w) => o.invalid(&w),
            None => o.invalid(EXPECTED),
        })?;
        merge(&mut self.bssplit, splits);
        Ok(())
    }

    /// Cross-option checks fio makes once a job's options are all parsed (`fixup_options`).
    pub(crate) fn finish(&mut self, warnings: &mut Vec<Diagnostic>) -> Result<(), FioError> {
        if self.time_based && self.runtime.is_none() {
            warnings.push(Diagnostic {
                file: self.file.clone(),
                line: self.line,
                message: format!(
                    "job '{}': time_based requires a runtime; running size-based instead",
                    self.name
                ),
            });
            self.time_based = false;
        }
        if self.fsync_on_close && self.loops > 1 {
            warnings.push(Diagnostic {
                file: self.file.clone(),
                line: self.line,
                message: format!(
                    "job '{}': fsync_on_close syncs the files once, when the job ends; fio also closes and syncs them between its {} loops, which run here as one pass",
                    self.name, self.loops
                ),
            });
        }
        if let Some(engine) = self.engine {
            self.finish_engine(engine, warnings)?;
        }
        // fio's fixup_options: a batch of 0 or above the depth is the depth.
        if self.iodepth_batch == 0 || self.iodepth_batch > self.iodepth {
            self.iodepth_batch = self.iodepth;
        }
        self.iodepth_batch_complete_min = self.iodepth_batch_complete_min.clamp(1, self.iodepth);
        let any = |v: &PerDir<Option<u64>>| Dir::ALL.iter().any(|&d| v[d].is_some());
        if any(&self.rate) && any(&self.rate_iops) {
            return Err(self.error("rate and rate_iops are mutually exclusive"));
        }
        self.data_placement = self.settle_placement(warnings)?;
        self.check_zones(warnings)?;
        Ok(())
    }

    /// fio's checks of the zone options (`fixup_options` in init.c): `zonemode=strided` needs
    /// a `zonesize`, and a `zonesize` needs a zone mode (fio's `zonemode` defaults to `none`,
    /// so its older rule making a bare `zonesize` strided no longer applies). With more than
    /// one file fio turns strided zones off. Random offsets from a skewed distribution are
    /// refused with strided zones: fio sizes those to the file, not to the zone, so they would
    /// leave the zone. Sizes given in zones are zones of `zonesize` with strided zones (fio's
    /// `zbd_recalc_options_with_zone_granularity`); with `zonemode=zbd` the drive's zones, so
    /// they stay in zones until the job meets the drive; without a zone mode fio leaves them 0,
    /// which flashmux refuses rather than reading as "the whole file".
    fn check_zones(&mut self, warnings: &mut Vec<Diagnostic>) -> Result<(), FioError> {
        if self.zone_mode != ZoneMode::Zbd {
            let given: Vec<&str> = ZBD_ONLY.iter().copied().filter(|&n| self.option(n).is_some()).collect();
            if !given.is_empty() {
                warnings.push(Diagnostic {
                    file: self.file.clone(),
                    line: self.line,
                    message: format!("job '{}': {} only apply with zonemode=zbd (ignored)", self.name, given.join(", ")),
                });
            }
            if self.zbd.zone_append {
                // fio_ioring_cmd_init.
                return Err(self.error("write_mode=zone_append requires zonemode=zbd"));
            }
        }
        match self.zone_mode {
            ZoneMode::None if self.zone_size > 0 => {
                return Err(self.error("zonesize needs zonemode=strided (fio: zonemode=none and zonesize are not compatible)"))
            }
            ZoneMode::None if self.in_zones.any() => {
                return Err(self.error(
                    "a size in zones (z suffix) needs zonemode=zbd, or zonemode=strided with a zonesize \
                     (fio leaves it 0 without zones)",
                ))
            }
            ZoneMode::None => return Ok(()),
            ZoneMode::Strided if self.zone_size == 0 => {
                return Err(self.error("zonemode=strided needs a zonesize greater than 0"))
            }
            ZoneMode::Strided => self.strided_zone_counts()?,
            ZoneMode::Zbd => return self.check_zbd(),
        }
        if self.nrfiles > 1 {
            warnings.push(Diagnostic {
                file: self.file.clone(),
                line: self.line,
                message: format!(
                    "job '{}': zonemode=strided with nrfiles={}: fio turns strided zones off for more than one file, and so does flashmux",
                    self.name, self.nrfiles
                ),
            });
        }
        let skewed = !matches!(
            self.random_distribution,
            RandomDistribution::Random | RandomDistribution::Zoned(_) | RandomDistribution::ZonedAbs(_)
        );
        if skewed && self.rw.is_random() && self.nrfiles == 1 {
            return Err(self.error(
                "zonemode=strided with a zipf, pareto or normal random_distribution is not modelled \
                 (fio draws those over the whole file, not the zone)",
            ));
        }
        Ok(())
    }

    /// Sizes given in zones, with strided zones: zones of `zonesize` bytes
    /// (`zbd_recalc_options_with_zone_granularity`: "zonemode=strided doesn't get per-file zone
    /// size").
    fn strided_zone_counts(&mut self) -> Result<(), FioError> {
        *self = self.with_zone_counts(self.zone_size)?;
        Ok(())
    }

    /// The job with its sizes given in zones in bytes, for zones of `zone` bytes (fio's
    /// `zbd_recalc_options_with_zone_granularity`).
    pub(crate) fn with_zone_counts(&self, zone: u64) -> Result<FioJob, FioError> {
        let mut j = self.clone();
        let z = std::mem::take(&mut j.in_zones);
        let bytes = |n: u64, what: &str| {
            n.checked_mul(zone).ok_or_else(|| self.error(format!("{what} of {n} zones of {zone} bytes overflows")))
        };
        if let Some(n) = z.size {
            j.size = Some(SizeSpec::Bytes(bytes(n, "size")?));
        }
        if let Some(n) = z.io_size {
            j.io_size = Some(bytes(n, "io_size")?);
        }
        if let Some(n) = z.offset {
            j.offset = SizeSpec::Bytes(bytes(n, "offset")?);
        }
        if let Some(n) = z.offset_increment {
            j.offset_increment = SizeSpec::Bytes(bytes(n, "offset_increment")?);
        }
        if let Some(n) = z.zone_skip {
            j.zone_skip = bytes(n, "zoneskip")?;
        }
        Ok(j)
    }

    /// What fio checks of `zonemode=zbd` without the drive (`fixup_options` in init.c; the
    /// parts of `zbd_verify_bs` and `zbd_setup_files` that need no zone): the rest is checked
    /// against the drive by [`super::super::JobGen::new_zoned`].
    fn check_zbd(&self) -> Result<(), FioError> {
        if self.option("create_serialize").is_some_and(|v| units::parse_bool(v) == Some(false)) {
            return Err(self.error("zonemode=zbd and create_serialize=0 are not compatible"));
        }
        if self.option("experimental_verify").is_some_and(|v| v.is_empty() || units::parse_bool(v) == Some(true)) {
            return Err(self.error("zonemode=zbd does not support experimental_verify"));
        }
        if self.rw.does(Dir::Trim) && (self.bsrange[Dir::Trim].is_some() || !self.bssplit[Dir::Trim].is_empty()) {
            return Err(self.error("bsrange and bssplit are not allowed for trim with zonemode=zbd"));
        }
        if self.nrfiles > 1 {
            return Err(self.error(format!(
                "zonemode=zbd with nrfiles={}: only a job on the zoned drive itself is modelled (nrfiles=1)",
                self.nrfiles
            )));
        }
        Ok(())
    }

    /// The value of an option given to the job (here or in a `[global]` above), the last one
    /// given; `""` for an option given without a value.
    pub(crate) fn option(&self, name: &str) -> Option<&str> {
        self.all_options().filter(|(n, _)| n == name).last().map(|(_, v)| v.as_str())
    }

    /// fio's checks of the data placement options once all are in (`fixup_options`, `dp_init`):
    /// `fdp=1` is `dataplacement=fdp` and may not meet an explicit `dataplacement=none` or
    /// `streams`; `plid_select=scheme` needs `dp_scheme`. What fio would silently ignore is
    /// said: the other options without a placement, `dp_scheme` without `plid_select=scheme`.
    fn settle_placement(&self, warnings: &mut Vec<Diagnostic>) -> Result<Option<DataPlacement>, FioError> {
        let p = &self.placement_options;
        let mut warn = |message: String| {
            warnings.push(Diagnostic { file: self.file.clone(), line: self.line, message: format!("job '{}': {message}", self.name) })
        };
        let kind = match (p.fdp, p.kind) {
            (true, Some(None | Some(PlacementKind::Streams))) => {
                return Err(self.error("fdp=1 is not compatible with dataplacement={streams, none}"))
            }
            (true, _) => Some(PlacementKind::Fdp),
            (false, kind) => kind.flatten(),
        };
        let Some(kind) = kind else {
            if p.any_detail() {
                warn("plids, plid_select and dp_scheme have no effect without dataplacement=fdp or streams (or fdp=1)".into());
            }
            return Ok(None);
        };
        let select = match p.select.unwrap_or(SelectName::RoundRobin) {
            SelectName::RoundRobin => PlidSelect::RoundRobin,
            SelectName::Random => PlidSelect::Random,
            SelectName::Scheme => PlidSelect::Scheme(p.scheme.clone().ok_or_else(|| {
                self.error("plid_select=scheme needs dp_scheme=<file> (fio fails to open the scheme file)")
            })?),
        };
        if p.scheme.is_some() && !matches!(select, PlidSelect::Scheme(_)) {
            warn("dp_scheme is only used with plid_select=scheme".into());
        }
        Ok(Some(DataPlacement { kind, ids: p.ids.clone(), select }))
    }
}

/// `dp_scheme`: the scheme file, found as an `include` is (as given, then next to the job file
/// that names it; fio itself opens it relative to its working directory), read and checked
/// when the option is parsed (fio checks it is a regular file then and reads it when the job
/// starts). At most [`DP_MAX_SCHEME_ENTRIES`] entries are kept, with a warning about the rest,
/// as fio logs and ignores them.
fn read_scheme(o: &Opt<'_>, warnings: &mut Vec<Diagnostic>) -> Result<Vec<SchemeEntry>, FioError> {
    const EXPECTED: &str = "a scheme file of 'start, end, pli' lines";
    let found = super::super::parse::resolve_path(o.text(EXPECTED)?, o.raw.file);
    let path = found.display().to_string();
    let text = crate::fsutil::read_text(&found, crate::fsutil::MAX_INPUT_FILE_BYTES, "data placement scheme file")
        .map_err(|e| o.invalid(&format!("{EXPECTED}; cannot read '{}': {e}", shown(&path))))?;
    let mut entries =
        parse_scheme(&text).map_err(|(line, what)| o.invalid(&format!("{EXPECTED}; {}:{line}: {what}", shown(&path))))?;
    let mut warn = |message: String| {
        warnings.push(Diagnostic {
            file: o.raw.file.to_string(),
            line: o.raw.line,
            message: format!("option 'dp_scheme': {}{message}", shown(&path)),
        })
    };
    if entries.is_empty() {
        warn(": no entries; every write gets placement ID 0, as fio gives a write no entry holds".into());
    }
    for (line, e) in entries.iter().take(DP_MAX_SCHEME_ENTRIES) {
        if e.start >= e.end {
            warn(format!(":{line}: the range {}..{} is empty; no write matches it", e.start, e.end));
        }
    }
    if entries.len() > DP_MAX_SCHEME_ENTRIES {
        warn(format!(
            ": {} entries; only the first {DP_MAX_SCHEME_ENTRIES} are applied, as in fio (DP_MAX_SCHEME_ENTRIES), from line {} on they are ignored",
            entries.len(),
            entries[DP_MAX_SCHEME_ENTRIES].0
        ));
        entries.truncate(DP_MAX_SCHEME_ENTRIES);
    }
    Ok(entries.into_iter().map(|(_, e)| e).collect())
}

impl FioJob {
    /// What fio's file and directory operation engines need of a job, and what they refuse.
    fn finish_engine(&mut self, engine: FileEngine, warnings: &mut Vec<Diagnostic>) -> Result<(), FioError> {
        let name = engine.fio_name();
        if engine.once_per_file() && self.is_time_based() {
            warnings.push(Diagnostic {
                file: self.file.clone(),
                line: self.line,
                message: format!(
                    "job '{}': ioengine={name} with time_based: fio's second pass over the files fails and ends the job; here it ends after its first pass",
                    self.name
                ),
            });
        }
        if self.fsync > 0 || self.fdatasync > 0 || self.end_fsync || self.fsync_on_close {
            return Err(self.error(format!(
                "ioengine={name} with fsync, fdatasync, end_fsync or fsync_on_close: syncs of the files such an engine opens are not modelled"
            )));
        }
        if engine.once_per_file() && self.loops > 1 {
            let why = match engine {
                FileEngine::DirCreate => "mkdir of a directory the first made fails (EEXIST)",
                _ => "the first deleted its files (ENOENT)",
            };
            return Err(self.error(format!(
                "ioengine={name} with loops={}: fio's second loop fails and ends the job ({why}); give loops=1",
                self.loops
            )));
        }
        if matches!(engine, FileEngine::FileStat | FileEngine::FileDelete) && self.create_on_open {
            return Err(self.error(format!(
                "ioengine={name} with create_on_open=1: fio then never makes the files before the run, and the {} fails (ENOENT); drop create_on_open",
                if engine == FileEngine::FileStat { "stat" } else { "unlink" }
            )));
        }
        if self.filesize.is_none() && self.size.is_none() {
            if !engine.creates() {
                return Err(self.error(format!(
                    "ioengine={name} needs filesize (or size): fio lays the files out before the run at that size"
                )));
            }
            // fio's get_file_size for these engines: each file is the least block size.
            let least = Dir::ALL
                .iter()
                .filter(|&&d| self.rw.does(d))
                .map(|&d| self.block_size_range(d).0)
                .min()
                .unwrap_or(self.bs[Dir::Read]);
            self.filesize = Some((least, least));
        }
        Ok(())
    }

    /// The direction whose latency statistics a file operation engine's calls go to (fio's
    /// `stat_ddir`): reads if the job reads, else writes if it writes, else reads.
    pub fn engine_stat_dir(&self) -> Dir {
        if !self.rw.does(Dir::Read) && self.rw.does(Dir::Write) {
            Dir::Write
        } else {
            Dir::Read
        }
    }
}

/// Result of applying one option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Applied,
    /// Known to fio, no effect on a storage model.
    Noted,
    /// Known to fio, affects timing or stopping in a way flashmux does not model.
    NotModelled,
    Unknown,
}

/// One `name[=value]` line, after `${VAR}` expansion, with the canonical option name.
pub(crate) struct RawOption<'a> {
    pub name: &'a str,
    pub value: Option<&'a str>,
    pub file: &'a str,
    pub line: usize,
}

/// fio's canonical name for an option given under an alias (the name fio prints).
pub(crate) fn canonical_name(name: &str) -> &str {
    match name {
        "readwrite" => "rw",
        "blocksize" => "bs",
        "blockalign" => "ba",
        "blocksize_range" => "bsrange",
        "blocksize_unaligned" => "bs_unaligned",
        "io_limit" => "io_size",
        "timeout" => "runtime",
        "wait_for_previous" => "stonewall",
        "fileoffset" => "offset",
        "nr_files" => "nrfiles",
        "fill_fs" => "fill_device",
        "iomem" => "mem",
        "mem_align" => "iomem_align",
        "ratemin" => "rate_min",
        "iodepth_batch_submit" => "iodepth_batch",
        "iodepth_batch_complete" => "iodepth_batch_complete_min",
        "disable_bw" => "disable_bw_measurement",
        "ss" => "steadystate",
        "ss_dur" => "steadystate_duration",
        "ss_ramp" => "steadystate_ramp_time",
        "data_placement" => "dataplacement",
        "fdp_pli" => "plids",
        "fdp_pli_select" => "plid_select",
        other => other,
    }
}

/// fio parses a section's options in descending priority, keeping file order otherwise
/// (`sort_options`): `kb_base` first so it applies to every size in the section, `filename`
/// last. The same order is what fio prints.
pub(crate) fn priority(canonical: &str) -> i32 {
    match canonical {
        "kb_base" | "unit_base" => 1,
        "filename" | "filename_format" => -1,
        _ => 0,
    }
}

/// The most files a job may have (`nrfiles`): each is a file of its tenant's filesystem.
pub const MAX_NRFILES: u64 = 1 << 20;

/// fio's `file_service_type` (`str_fst_cb`): `random`, `roundrobin` and `sequential` take an
/// I/O count after a colon (ignored by `sequential`, which stays with a file until it is done),
/// the skewed ones their distribution's parameter and center; `gauss` is `normal`.
fn parse_file_service(o: &Opt<'_>) -> Result<FileService, FioError> {
    const EXPECTED: &str = "roundrobin[:N], sequential, random[:N], zipf[:theta], pareto[:h] or normal[:deviation]";
    let text = o.text(EXPECTED)?;
    let (kind, params) = match text.split_once(':') {
        Some((k, p)) => (k, Some(p)),
        None => (text, None),
    };
    let count = || -> Result<u64, FioError> {
        match params {
            None => Ok(1),
            Some(n) => n.trim().parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| o.invalid(EXPECTED)),
        }
    };
    let kind = if kind == "gauss" { "normal" } else { kind };
    Ok(match kind {
        "roundrobin" => FileService::RoundRobin(count()?),
        "sequential" => {
            count()?;
            FileService::Sequential
        }
        "random" => FileService::Random(count()?),
        _ => match parse_skewed(o, kind, params)? {
            Some(d) => FileService::Skewed(d),
            None => return Err(o.invalid(EXPECTED)),
        },
    })
}

/// fio options flashmux accepts without modelling them: they concern the host, the I/O engine,
/// buffers, logging or reporting, or (`sync`, `verify` and their families) they
/// make fio send extra commands (flushes, verification reads) or open files in modes the
/// simulator does not model. Jobs list them in `noted_unmodelled` so the caller can say so once.
#[rustfmt::skip]
pub(super) const NOTED: &[&str] = &[
    "description", "filename", "filename_format", "directory",
    "unique_filename", "opendir", "lockfile", "thread", "nice", "prio", "prioclass", "cpumask",
    "cpus_allowed", "cpus_allowed_policy", "numa_cpu_nodes", "numa_mem_policy", "cgroup",
    "cgroup_weight", "cgroup_nodelete", "uid", "gid", "exec_prerun", "exec_postrun", "invalidate",
    "sync", "write_barrier",
    "sync_file_range", "create_serialize", "create_fsync", "create_only",
    "allow_file_create", "allow_mounted_write", "pre_read", "unlink_each_loop",
    "overwrite", "fadvise_hint", "write_hint", "mem", "iomem_align", "hugepage-size",
    "lockmem", "zero_buffers", "refill_buffers", "scramble_buffers", "buffer_compress_percentage",
    "buffer_compress_chunk", "buffer_pattern", "dedupe_percentage", "dedupe_mode",
    "dedupe_working_set_percentage", "dedupe_global", "verify", "do_verify", "verify_interval",
    "verify_offset", "verify_pattern", "verify_fatal", "verify_dump", "verify_async",
    "verify_async_cpus", "verify_backlog", "verify_backlog_batch", "verify_state_save",
    "verify_state_load", "experimental_verify", "trim_percentage", "trim_verify_zero",
    "trim_backlog", "trim_backlog_batch", "iodepth_batch_complete_max", "iodepth_low",
    "serialize_overlap", "io_submit_mode",
    "random_generator", "softrandommap", "allrandrepeat", "clocksource", "gtod_reduce", "gtod_cpu",
    "write_bw_log", "write_lat_log", "write_hist_log", "write_iops_log", "write_iolog",
    "log_entries", "log_avg_msec", "log_hist_msec", "log_hist_coarseness", "log_max_value",
    "log_offset", "log_compression", "log_compression_cpus", "log_store_compressed",
    "log_unix_epoch", "log_alternate_epoch", "log_alternate_epoch_clock_id", "per_job_logs",
    "block_error_percentiles", "bwavgtime", "iopsavgtime", "disk_util", "disable_lat",
    "disable_clat", "disable_slat", "disable_bw_measurement", "slat_percentiles",
    "clat_percentiles", "lat_percentiles", "percentile_list", "significant_figures", "stats",
    "unified_rw_reporting", "unit_base", "ignore_error", "error_dump",
    "exitall_on_error", "ioscheduler", "openfiles", "hipri", "fixedbufs",
    "registerfiles", "sqthread_poll", "sqthread_poll_cpu", "userspace_reap", "nowait",
    "cmdprio_percentage", "cmdprio_class", "cmdprio", "cmdprio_bssplit", "replay_no_stall",
    "replay_redirect", "replay_align", "replay_scale", "replay_time_scale", "replay_skip",
    "read_iolog_chunked", "nonvectored", "force_async", "xnvme_async", "xnvme_sync", "xnvme_admin",
    "xnvme_dev_nsid", "xnvme_dev_subnqn", "xnvme_mem", "xnvme_iovec",
];

/// fio options that change when a job stops or how fast it goes, in ways flashmux does not model.
#[rustfmt::skip]
pub(super) const NOT_MODELLED: &[&str] = &[
    "rate_min", "rate_iops_min", "rate_cycle", "rate_ignore_thinktime", "latency_target",
    "latency_window", "latency_percentile", "latency_run", "max_latency", "steadystate",
    "steadystate_duration", "steadystate_ramp_time", "exitall", "exit_what", "wait_for", "flow",
    "flow_id", "flow_sleep",
];

/// An option being applied, with the helpers that turn its value into typed data.
pub(super) struct Opt<'a> {
    pub(super) raw: &'a RawOption<'a>,
    pub(super) kb: KbBase,
}

impl Opt<'_> {
    pub(super) fn invalid(&self, expected: &str) -> FioError {
        FioError::InvalidValue {
            file: self.raw.file.to_string(),
            line: self.raw.line,
            option: self.raw.name.to_string(),
            value: self.raw.value.unwrap_or("").to_string(),
            expected: expected.to_string(),
        }
    }

    /// The error for a value that does not parse as a size (or an integer, which takes size
    /// suffixes): too large when one of its parts is a well-formed size beyond 64 bits, else
    /// [`Opt::invalid`].
    pub(super) fn invalid_size(&self, expected: &str) -> FioError {
        let value = self.raw.value.unwrap_or("");
        let part = value
            .split([',', ':', '-', '/', '%'])
            .find(|p| units::size_too_large(p, self.kb));
        match part {
            Some(p) => self.too_large(p, units::SIZE_LARGEST),
            None => self.invalid(expected),
        }
    }

    /// `e`, or the too-large error when `e` is a bad value that is a size beyond 64 bits.
    pub(super) fn or_too_large(&self, e: FioError, expected: &str) -> FioError {
        match e {
            FioError::InvalidValue { .. } => self.invalid_size(expected),
            e => e,
        }
    }

    pub(super) fn too_large(&self, part: &str, largest: &'static str) -> FioError {
        FioError::TooLarge {
            file: self.raw.file.to_string(),
            line: self.raw.line,
            option: self.raw.name.to_string(),
            value: part.to_string(),
            largest,
        }
    }

    pub(super) fn unsupported(&self, reason: &str) -> FioError {
        FioError::Unsupported {
            file: self.raw.file.to_string(),
            line: self.raw.line,
            option: self.raw.name.to_string(),
            reason: reason.to_string(),
        }
    }

    /// The value, which must be present.
    pub(super) fn text(&self, expected: &str) -> Result<&str, FioError> {
        self.raw.value.ok_or_else(|| self.invalid(expected))
    }

    /// The value of a numeric option, refusing fio's arithmetic and host keywords by name rather
    /// than as a generic bad value.
    pub(super) fn numeric(&self, expected: &str) -> Result<&str, FioError> {
        let text = self.text(expected)?;
        if text.starts_with('(') {
            return Err(self.unsupported("fio arithmetic expressions are not supported"));
        }
        if ["$pagesize", "$mb_memory", "$ncpus"]
            .iter()
            .any(|k| text.contains(k))
        {
            return Err(self.unsupported(
                "fio's host-dependent keywords ($pagesize, $mb_memory, $ncpus) are not supported",
            ));
        }
        Ok(text)
    }

    pub(super) fn parsed<T>(&self, expected: &str, parse: impl Fn(&str) -> Option<T>) -> Result<T, FioError> {
        parse(self.numeric(expected)?).ok_or_else(|| self.invalid(expected))
    }

    pub(super) fn size(&self) -> Result<u64, FioError> {
        self.parsed(EXPECT_SIZE, |t| units::parse_size(t, self.kb))
            .map_err(|e| self.or_too_large(e, EXPECT_SIZE))
    }

    pub(super) fn quantity(&self) -> Result<Quantity, FioError> {
        self.parsed(EXPECT_SIZE_OR_PERCENT, |t| {
            units::parse_quantity(t, self.kb)
        })
        .map_err(|e| self.or_too_large(e, EXPECT_SIZE_OR_PERCENT))
    }

    /// An offset (`offset`, `offset_increment`): a size or a percentage, where 0% is allowed
    /// and is 0 bytes, as fio reads it (`str_offset_cb`: a start 0% into the file).
    pub(super) fn offset(&self) -> Result<SizeSpec, FioError> {
        let zero_percent = |t: &str| t.strip_suffix('%').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b == b'0'));
        self.parsed(EXPECT_OFFSET, |t| {
            if zero_percent(t) {
                Some(SizeSpec::Bytes(0))
            } else {
                units::parse_quantity(t, self.kb).map(SizeSpec::from)
            }
        })
        .map_err(|e| self.or_too_large(e, EXPECT_OFFSET))
    }

    /// fio integers accept size suffixes (`number_ios=1k` is 1024).
    pub(super) fn int(&self) -> Result<u64, FioError> {
        self.parsed(EXPECT_INT, |t| units::parse_size(t, self.kb))
            .map_err(|e| self.or_too_large(e, EXPECT_INT))
    }

    pub(super) fn int_in(&self, min: u64, max: u64) -> Result<u64, FioError> {
        let expected = format!("an integer from {min} to {max}");
        self.parsed(&expected, |t| {
            units::parse_size(t, self.kb).filter(|v| (min..=max).contains(v))
        })
    }

    /// A number of zones (`8z`, fio's `FIO_OPT_STR_VAL_ZONE`), if the value ends with `z`: the
    /// decimal number before it (fio: "unexpected zone value" otherwise).
    pub(super) fn zones(&self) -> Result<Option<u64>, FioError> {
        let text = self.numeric(EXPECT_ZONES)?;
        let Some(n) = text.strip_suffix('z') else { return Ok(None) };
        match n.parse::<u32>() {
            Ok(v) if n.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(u64::from(v))),
            _ => Err(self.invalid(EXPECT_ZONES)),
        }
    }

    /// A floating-point number from 0 to 1 (fio's `FIO_OPT_FLOAT_LIST` with `minfp` 0 and
    /// `maxfp` 1: "value out of range").
    pub(super) fn fraction(&self) -> Result<f64, FioError> {
        self.parsed(EXPECT_FRACTION, |t| units::parse_f64(t).filter(|v| (0.0..=1.0).contains(v)))
    }

    pub(super) fn percent(&self) -> Result<u32, FioError> {
        self.parsed(EXPECT_PERCENT, |t| {
            t.parse::<u32>().ok().filter(|&v| v <= 100)
        })
    }

    pub(super) fn bool(&self) -> Result<bool, FioError> {
        self.parsed(EXPECT_BOOL, units::parse_bool)
    }

    /// fio's "no argument" options (`time_based`, `norandommap`, `stonewall`): present means
    /// set, or an explicit `=0`/`=1`.
    pub(super) fn flag(&self) -> Result<bool, FioError> {
        match self.raw.value {
            None => Ok(true),
            Some(_) => self.bool(),
        }
    }

    pub(super) fn time(&self, default_unit: u64, expected: &str) -> Result<u64, FioError> {
        let text = self.numeric(expected)?;
        units::parse_time_ns(text, default_unit).ok_or_else(|| {
            if units::time_too_large(text, default_unit) {
                self.too_large(text, units::TIME_LARGEST)
            } else {
                self.invalid(expected)
            }
        })
    }

    /// A value or a `low-high` (or `low:high`) range; the ends are swapped if reversed (HOWTO,
    /// "int": "If the lower value specified happens to be larger than the upper value the two
    /// values are swapped").
    pub(super) fn range(
        &self,
        expected: &str,
        parse: impl Fn(&str) -> Option<u64>,
    ) -> Result<(u64, u64), FioError> {
        let text = self.numeric(expected)?;
        let (low, high) = match text.split_once('-').or_else(|| text.split_once(':')) {
            Some((l, h)) => (parse(l), parse(h)),
            None => (parse(text), parse(text)),
        };
        match (low, high) {
            (Some(l), Some(h)) => Ok((l.min(h), l.max(h))),
            _ => Err(self.invalid(expected)),
        }
    }

    /// A `read[,write[,trim]]` value (HOWTO, "blocksize"): a value not terminated by a comma
    /// also applies to the directions after it, an empty one leaves its direction unchanged.
    ///
    /// fio splits these values at commas, or, when there is none, at `:` or `-`, so
    /// `bs=1k-4k` means reads 1k and writes/trims 4k, not a range. That is reproduced, with a
    /// warning, because it is easy to mistake for `bsrange`.
    pub(super) fn per_dir<T: Clone>(
        &self,
        warnings: &mut Vec<Diagnostic>,
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<PerDir<Option<T>>, FioError> {
        let text = self.numeric(expected)?;
        let mut comps = Vec::new();
        let mut rest = text;
        let mut split_on_dash_or_colon = false;
        loop {
            let sep = rest.find(',').or_else(|| {
                let other = rest.find(':').or_else(|| rest.find('-'));
                split_on_dash_or_colon |= other.is_some();
                other
            });
            match sep {
                Some(i) => {
                    comps.push(&rest[..i]);
                    rest = &rest[i + 1..];
                }
                None => {
                    comps.push(rest);
                    break;
                }
            }
        }
        let values = assign_per_dir(&comps, parse).ok_or_else(|| self.invalid_size(expected))?;
        if split_on_dash_or_colon {
            warnings.push(Diagnostic {
                file: self.raw.file.to_string(),
                line: self.raw.line,
                message: format!(
                    "option '{}': fio reads '{}' as separate read,write,trim values, not as a \
                     range{}",
                    self.raw.name,
                    text,
                    if self.raw.name == "bs" {
                        "; use bsrange for a range"
                    } else {
                        ""
                    }
                ),
            });
        }
        Ok(values)
    }
}
