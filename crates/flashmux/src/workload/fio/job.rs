//! The typed job ([`FioJob`]) and the mapping from fio options onto it.
//!
//! Option names, aliases, value types and defaults are fio's (HOWTO "Job file parameters" and the
//! option table in fio's `options.c`). Options about the host, the engine, buffers or reporting
//! are accepted and listed in [`FioJob::noted_unmodelled`]; options that would change fio's timing
//! or stopping rules in ways flashmux does not model produce a warning; options that would change
//! the I/O stream itself in unmodelled ways are refused with [`FioError::Unsupported`].

use super::units::{self, KbBase, Quantity};
use super::{Diagnostic, Dir, FioError, PerDir};

const NS_PER_SEC: u64 = 1_000_000_000;
const NS_PER_USEC: u64 = 1_000;

const EXPECT_SIZE: &str = "a size such as 4k, 64KiB or 4096";
const EXPECT_SIZE_OR_PERCENT: &str =
    "a size such as 4k, 64KiB or 4096, or a percentage from 1% to 100%";
const EXPECT_INT: &str = "an integer such as 32";
const EXPECT_PERCENT: &str = "an integer percentage from 0 to 100";
const EXPECT_BOOL: &str = "0 or 1";
const EXPECT_TIME_S: &str = "a time such as 30, 500ms or 2m (a bare number is seconds)";
const EXPECT_TIME_US: &str = "a time such as 100, 5ms or 1s (a bare number is microseconds)";
const EXPECT_RW: &str = "one of read, write, trim, randread, randwrite, randtrim, rw, readwrite, \
                         randrw, trimwrite, randtrimwrite, optionally followed by :<nr>";

/// fio's I/O pattern (`rw=`/`readwrite=`, HOWTO "I/O type").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwMode {
    Read,
    Write,
    Trim,
    RandRead,
    RandWrite,
    RandTrim,
    /// `rw` / `readwrite`: sequential mixed reads and writes.
    ReadWrite,
    RandRw,
    /// Sequential trim+write pairs: each block is trimmed, then written.
    TrimWrite,
    /// Like `trimwrite`, at random offsets.
    RandTrimWrite,
}

impl RwMode {
    fn from_fio(text: &str) -> Option<RwMode> {
        Some(match text {
            "read" => RwMode::Read,
            "write" => RwMode::Write,
            "trim" => RwMode::Trim,
            "randread" => RwMode::RandRead,
            "randwrite" => RwMode::RandWrite,
            "randtrim" => RwMode::RandTrim,
            "rw" | "readwrite" => RwMode::ReadWrite,
            "randrw" => RwMode::RandRw,
            "trimwrite" => RwMode::TrimWrite,
            "randtrimwrite" => RwMode::RandTrimWrite,
            _ => return None,
        })
    }

    /// The name fio uses for the mode.
    pub fn fio_name(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
            RwMode::Trim => "trim",
            RwMode::RandRead => "randread",
            RwMode::RandWrite => "randwrite",
            RwMode::RandTrim => "randtrim",
            RwMode::ReadWrite => "rw",
            RwMode::RandRw => "randrw",
            RwMode::TrimWrite => "trimwrite",
            RwMode::RandTrimWrite => "randtrimwrite",
        }
    }

    /// Random offsets (fio's `td_random`).
    pub fn is_random(self) -> bool {
        matches!(
            self,
            RwMode::RandRead
                | RwMode::RandWrite
                | RwMode::RandTrim
                | RwMode::RandRw
                | RwMode::RandTrimWrite
        )
    }

    /// Whether the mode issues I/O in `dir`.
    pub fn does(self, dir: Dir) -> bool {
        match self {
            RwMode::Read | RwMode::RandRead => dir == Dir::Read,
            RwMode::Write | RwMode::RandWrite => dir == Dir::Write,
            RwMode::Trim | RwMode::RandTrim => dir == Dir::Trim,
            RwMode::ReadWrite | RwMode::RandRw => dir != Dir::Trim,
            RwMode::TrimWrite | RwMode::RandTrimWrite => dir != Dir::Read,
        }
    }

    /// Reads and writes mixed by `rwmixread` (fio's `td_rw`).
    pub fn is_read_write_mix(self) -> bool {
        matches!(self, RwMode::ReadWrite | RwMode::RandRw)
    }

    /// Trim-then-write pairs (fio's `td_trimwrite`).
    pub fn is_trim_write(self) -> bool {
        matches!(self, RwMode::TrimWrite | RwMode::RandTrimWrite)
    }
}

/// The `:<nr>` suffix of `rw=` (HOWTO, "readwrite"), whose meaning depends on the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwModifier {
    None,
    /// Random modes: a new random offset only every `n` I/Os; the I/Os in between follow
    /// `rw_sequencer` (`rw=randread:8`).
    IosPerOffset(u64),
    /// Sequential modes: this many bytes are skipped after every I/O, "turning sequential I/O
    /// into sequential I/O with holes" (`rw=write:4k`).
    Skip(u64),
}

/// What the I/Os between two random offsets of `rw=rand...:<nr>` do (HOWTO, "rw_sequencer").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwSequencer {
    /// Continue sequentially from the previous I/O.
    Sequential,
    /// Repeat the previous offset.
    Identical,
}

/// How a rate-limited job spaces its I/Os (HOWTO, "rate_process").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateProcess {
    Linear,
    /// Exponentially distributed gaps, mean 1/IOPS.
    Poisson,
}

/// Whether `thinktime_blocks` counts completed or issued I/Os.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinktimeBlocksType {
    Complete,
    Issue,
}

/// A size that may be a percentage of the job's address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeSpec {
    Bytes(u64),
    Percent(u32),
}

impl From<Quantity> for SizeSpec {
    fn from(q: Quantity) -> Self {
        match q {
            Quantity::Bytes(b) => SizeSpec::Bytes(b),
            Quantity::Percent(p) => SizeSpec::Percent(p),
        }
    }
}

/// One `bssplit` entry: `percent`% of the direction's I/Os use block size `bs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BsSplit {
    pub bs: u64,
    pub percent: u32,
}

/// One `zoned` entry: `access_percent`% of the accesses go to the next `size_percent`% of the
/// region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone {
    pub access_percent: u32,
    pub size_percent: u32,
}

/// One `zoned_abs` entry: `access_percent`% of the accesses go to the next `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbsZone {
    pub access_percent: u32,
    pub size: u64,
}

/// `random_distribution` (HOWTO, "random_distribution"). `center` is fio's optional second
/// value, in `[0, 1]`.
#[derive(Debug, Clone, PartialEq)]
pub enum RandomDistribution {
    Random,
    Zipf {
        theta: f64,
        center: Option<f64>,
    },
    Pareto {
        h: f64,
        center: Option<f64>,
    },
    /// `deviation` is a percentage of the region, in `[0, 100)`.
    Normal {
        deviation: f64,
        center: Option<f64>,
    },
    Zoned(PerDir<Vec<Zone>>),
    ZonedAbs(PerDir<Vec<AbsZone>>),
}

/// One job section of a job file, with the `[global]` sections above it applied.
///
/// Sizes are bytes, durations nanoseconds, rates bytes (or I/Os) per second. Fields hold fio's
/// defaults when the option is absent.
#[derive(Debug, Clone, PartialEq)]
pub struct FioJob {
    /// Section name, or the job's own `name=`.
    pub name: String,
    /// The file the section header is in, and its line.
    pub file: String,
    pub line: usize,

    pub rw: RwMode,
    pub rw_modifier: RwModifier,
    pub rw_sequencer: RwSequencer,
    /// Percentage of mixed I/O that is reads; `rwmixwrite=x` sets it to `100 - x`. Default 50.
    pub rwmixread: u32,

    /// `bs`, default 4096 for every direction.
    pub bs: PerDir<u64>,
    /// `bsrange`: (min, max) per direction.
    pub bsrange: PerDir<Option<(u64, u64)>>,
    /// `bssplit`, sorted by ascending percentage as fio keeps it; blank percentages are filled.
    pub bssplit: PerDir<Vec<BsSplit>>,
    /// `blockalign`/`ba` (random I/O only); `None` means the minimum block size.
    pub blockalign: PerDir<Option<u64>>,
    /// `bs_is_seq_rand`: the read sizes apply to sequential I/O and the write sizes to random I/O.
    pub bs_is_seq_rand: bool,

    /// `size`; `None` is the whole space after `offset`.
    pub size: Option<SizeSpec>,
    pub offset: SizeSpec,
    pub offset_increment: SizeSpec,
    pub offset_align: Option<u64>,
    /// `filesize` as (low, high); a range picks a size at random per job instance.
    pub filesize: Option<(u64, u64)>,
    /// `io_size`/`io_limit`; `None` means `size`.
    pub io_size: Option<u64>,
    pub number_ios: Option<u64>,

    pub iodepth: u32,
    /// `iodepth_batch_submit`/`iodepth_batch`: I/Os handed to the kernel per submission call
    /// (one `io_submit`, under one block-layer plug), 1 to `iodepth`; fio's 0 means `iodepth`.
    pub iodepth_batch: u32,
    /// `iodepth_batch_complete_min`: completions a job waits for once its queue is full,
    /// 1 to `iodepth` (fio's 0, polling without waiting, refills like 1).
    pub iodepth_batch_complete_min: u32,
    pub numjobs: u32,
    /// `loops`, at least 1.
    pub loops: u32,

    /// `runtime`/`timeout`; `None` is no limit.
    pub runtime: Option<u64>,
    /// Cleared (with a warning) when no runtime is given, as fio does.
    pub time_based: bool,
    /// Lead-in before measurements. fio does not count it in `runtime`: the runtime clock
    /// starts when the ramp ends (HOWTO: "it will increase the total runtime"; fio resets the
    /// job's epoch at that point), so a time-based job runs for `ramp_time + runtime`. See
    /// [`super::JobGen::end_ramp`] for how the ramp affects volume limits.
    pub ramp_time: u64,
    /// `startdelay` as (low, high); a range picks a delay at random per job instance.
    pub startdelay: (u64, u64),

    /// `rate` in bytes/s per direction; `None` is unlimited.
    pub rate: PerDir<Option<u64>>,
    /// `rate_iops` per direction.
    pub rate_iops: PerDir<Option<u64>>,
    pub rate_process: RateProcess,
    /// Stall after I/O completion (`thinktime`, a bare number is microseconds).
    pub thinktime: u64,
    pub thinktime_spin: u64,
    pub thinktime_blocks: u64,
    pub thinktime_blocks_type: ThinktimeBlocksType,
    pub thinktime_iotime: u64,

    /// `fsync`: a writing job syncs after every this many writes issued; 0 never.
    pub fsync: u64,
    /// `fdatasync`: the same with fdatasync(2); on a block device it does what `fsync` does.
    pub fdatasync: u64,
    /// `end_fsync`: a writing job syncs once more when its writes are done.
    pub end_fsync: bool,

    pub random_distribution: RandomDistribution,
    /// `percentage_random` per direction, default 100.
    pub percentage_random: PerDir<u32>,
    pub norandommap: bool,
    /// Kept for reference: flashmux derives all randomness from its own seed. What `randrepeat`
    /// does control here is whether every loop of the job replays the same random sequence.
    pub randrepeat: bool,
    pub randseed: Option<u64>,

    pub stonewall: bool,
    pub new_group: bool,
    pub group_reporting: bool,

    /// The section's own options as fio prints them under `"job options"` in its JSON output:
    /// canonical names (`blocksize=8k` is listed as `bs`), values as written after `${VAR}`
    /// expansion, `""` for options given without a value, in fio's parse order.
    pub job_options: Vec<(String, String)>,
    /// Options from the `[global]` sections above this job, in the same form. fio prints these
    /// once, under `"global options"` (see [`super::JobFile::global_options`]).
    pub inherited_options: Vec<(String, String)>,
    /// Options given (here or in a `[global]` above) that flashmux accepts without modelling:
    /// `direct`, `ioengine`, `filename`, `fsync_on_close`, `verify`, ... Each name once, in fio's parse
    /// order.
    pub noted_unmodelled: Vec<String>,

    pub(crate) kb_base: KbBase,
}

impl Default for FioJob {
    fn default() -> Self {
        FioJob {
            name: String::new(),
            file: String::new(),
            line: 0,
            rw: RwMode::Read,
            rw_modifier: RwModifier::None,
            rw_sequencer: RwSequencer::Sequential,
            rwmixread: 50,
            bs: PerDir::splat(4096),
            bsrange: PerDir::splat(None),
            bssplit: PerDir::default(),
            blockalign: PerDir::splat(None),
            bs_is_seq_rand: false,
            size: None,
            offset: SizeSpec::Bytes(0),
            offset_increment: SizeSpec::Bytes(0),
            offset_align: None,
            filesize: None,
            io_size: None,
            number_ios: None,
            iodepth: 1,
            iodepth_batch: 1,
            iodepth_batch_complete_min: 1,
            numjobs: 1,
            loops: 1,
            runtime: None,
            time_based: false,
            ramp_time: 0,
            startdelay: (0, 0),
            rate: PerDir::splat(None),
            rate_iops: PerDir::splat(None),
            rate_process: RateProcess::Linear,
            thinktime: 0,
            thinktime_spin: 0,
            thinktime_blocks: 1,
            thinktime_blocks_type: ThinktimeBlocksType::Complete,
            thinktime_iotime: 0,
            fsync: 0,
            fdatasync: 0,
            end_fsync: false,
            random_distribution: RandomDistribution::Random,
            percentage_random: PerDir::splat(100),
            norandommap: false,
            randrepeat: true,
            randseed: None,
            stonewall: false,
            new_group: false,
            group_reporting: false,
            job_options: Vec::new(),
            inherited_options: Vec::new(),
            noted_unmodelled: Vec::new(),
            kb_base: KbBase::K1024,
        }
    }
}

impl FioJob {
    /// Runs for `runtime` regardless of volume (fio ignores `time_based` without a runtime).
    pub fn is_time_based(&self) -> bool {
        self.time_based && self.runtime.is_some()
    }

    /// (min, max) block size of a direction: `bssplit` if given, else `bsrange`, else `bs`.
    pub fn block_size_range(&self, dir: Dir) -> (u64, u64) {
        let split = &self.bssplit[dir];
        if !split.is_empty() {
            let min = split.iter().map(|s| s.bs).min().unwrap_or(self.bs[dir]);
            let max = split.iter().map(|s| s.bs).max().unwrap_or(self.bs[dir]);
            return (min, max);
        }
        self.bsrange[dir].unwrap_or((self.bs[dir], self.bs[dir]))
    }

    /// The smallest block size over all directions (fio's `td_min_bs`), used to align
    /// percentage offsets and sizes.
    pub fn min_block_size(&self) -> u64 {
        Dir::ALL
            .iter()
            .map(|&d| self.block_size_range(d).0)
            .min()
            .unwrap_or(4096)
    }

    /// The largest block size over all directions (fio's `td_max_bs`).
    pub fn max_block_size(&self) -> u64 {
        Dir::ALL
            .iter()
            .map(|&d| self.block_size_range(d).1)
            .max()
            .unwrap_or(4096)
    }

    /// The `[global]` options in effect followed by the job's own, as fio would apply them.
    pub fn all_options(&self) -> impl Iterator<Item = &(String, String)> {
        self.inherited_options.iter().chain(self.job_options.iter())
    }

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
            "size" => self.size = Some(o.quantity()?.into()),
            "offset" => self.offset = o.quantity()?.into(),
            "offset_increment" => self.offset_increment = o.quantity()?.into(),
            "offset_align" => self.offset_align = Some(o.size()?).filter(|&v| v > 0),
            "filesize" => {
                let (low, high) = o.range(EXPECT_SIZE, |t| {
                    units::parse_size(t, o.kb).filter(|&v| v > 0)
                })?;
                self.filesize = Some((low, high));
            }
            "io_size" => self.io_size = Some(o.size()?).filter(|&v| v > 0),
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
            "fsync" => self.fsync = o.int_in(0, u32::MAX as u64)?,
            "fdatasync" => self.fdatasync = o.int_in(0, u32::MAX as u64)?,
            "end_fsync" => self.end_fsync = o.bool()?,
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
            "zonemode" => {
                return match o.text("none")? {
                    "none" => Ok(Outcome::Noted),
                    _ => Err(o.unsupported("zoned and strided zone modes are not modelled")),
                }
            }
            "zonesize" | "zonerange" | "zoneskip" | "zonecapacity" => {
                return Err(o.unsupported("zone modes are not modelled"))
            }
            "nrfiles" => {
                return match o.int()? {
                    1 => Ok(Outcome::Noted),
                    _ => Err(o.unsupported("a job addresses one file (its tenant's space)")),
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
            None if matches!(mode_text, "filecreate" | "filestat" | "filedelete") => {
                return Err(o.unsupported("file-system metadata workloads are not modelled"))
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
        // fio's fixup_options: a batch of 0 or above the depth is the depth.
        if self.iodepth_batch == 0 || self.iodepth_batch > self.iodepth {
            self.iodepth_batch = self.iodepth;
        }
        self.iodepth_batch_complete_min = self.iodepth_batch_complete_min.clamp(1, self.iodepth);
        let any = |v: &PerDir<Option<u64>>| Dir::ALL.iter().any(|&d| v[d].is_some());
        if any(&self.rate) && any(&self.rate_iops) {
            return Err(self.error("rate and rate_iops are mutually exclusive"));
        }
        Ok(())
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> FioError {
        FioError::Job {
            file: self.file.clone(),
            line: self.line,
            job: self.name.clone(),
            message: message.into(),
        }
    }
}

/// Reporting groups in fio's `groupid` order: a job with `stonewall` or `new_group` starts a new
/// group unless the current group is still empty (fio's `add_job`). Indices are into `jobs`; the
/// `numjobs` clones of a job belong to the job's group.
pub fn groups(jobs: &[FioJob]) -> Vec<Vec<usize>> {
    split_jobs(jobs, |j| j.stonewall || j.new_group)
}

/// Execution phases: a job with `stonewall` waits for every job before it to finish, so it starts
/// a new phase; jobs within a phase run concurrently.
pub fn phases(jobs: &[FioJob]) -> Vec<Vec<usize>> {
    split_jobs(jobs, |j| j.stonewall)
}

fn split_jobs(jobs: &[FioJob], starts_new: impl Fn(&FioJob) -> bool) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        match out.last_mut() {
            Some(current) if !starts_new(job) => current.push(i),
            _ => out.push(vec![i]),
        }
    }
    out
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

/// fio options flashmux accepts without modelling them: they concern the host, the I/O engine,
/// buffers, logging or reporting, or (`fsync_on_close`, `sync`, `verify` and their families) they
/// make fio send extra commands (flushes, verification reads) or open files in modes the
/// simulator does not model. Jobs list them in `noted_unmodelled` so the caller can say so once.
#[rustfmt::skip]
const NOTED: &[&str] = &[
    "description", "direct", "buffered", "ioengine", "filename", "filename_format", "directory",
    "unique_filename", "opendir", "lockfile", "thread", "nice", "prio", "prioclass", "cpumask",
    "cpus_allowed", "cpus_allowed_policy", "numa_cpu_nodes", "numa_mem_policy", "cgroup",
    "cgroup_weight", "cgroup_nodelete", "uid", "gid", "exec_prerun", "exec_postrun", "invalidate",
    "fsync_on_close", "sync", "write_barrier",
    "sync_file_range", "create_serialize", "create_fsync", "create_on_open", "create_only",
    "allow_file_create", "allow_mounted_write", "pre_read", "unlink", "unlink_each_loop",
    "overwrite", "fallocate", "fadvise_hint", "write_hint", "mem", "iomem_align", "hugepage-size",
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
    "unified_rw_reporting", "unit_base", "continue_on_error", "ignore_error", "error_dump",
    "exitall_on_error", "ioscheduler", "openfiles", "file_service_type", "hipri", "fixedbufs",
    "registerfiles", "sqthread_poll", "sqthread_poll_cpu", "userspace_reap", "nowait",
    "cmdprio_percentage", "cmdprio_class", "cmdprio", "cmdprio_bssplit", "replay_no_stall",
    "replay_redirect", "replay_align", "replay_scale", "replay_time_scale", "replay_skip",
    "read_iolog_chunked",
];

/// fio options that change when a job stops or how fast it goes, in ways flashmux does not model.
#[rustfmt::skip]
const NOT_MODELLED: &[&str] = &[
    "rate_min", "rate_iops_min", "rate_cycle", "rate_ignore_thinktime", "latency_target",
    "latency_window", "latency_percentile", "latency_run", "max_latency", "steadystate",
    "steadystate_duration", "steadystate_ramp_time", "exitall", "exit_what", "wait_for", "flow",
    "flow_id", "flow_sleep",
];

/// An option being applied, with the helpers that turn its value into typed data.
struct Opt<'a> {
    raw: &'a RawOption<'a>,
    kb: KbBase,
}

impl Opt<'_> {
    fn invalid(&self, expected: &str) -> FioError {
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
    fn invalid_size(&self, expected: &str) -> FioError {
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
    fn or_too_large(&self, e: FioError, expected: &str) -> FioError {
        match e {
            FioError::InvalidValue { .. } => self.invalid_size(expected),
            e => e,
        }
    }

    fn too_large(&self, part: &str, largest: &'static str) -> FioError {
        FioError::TooLarge {
            file: self.raw.file.to_string(),
            line: self.raw.line,
            option: self.raw.name.to_string(),
            value: part.to_string(),
            largest,
        }
    }

    fn unsupported(&self, reason: &str) -> FioError {
        FioError::Unsupported {
            file: self.raw.file.to_string(),
            line: self.raw.line,
            option: self.raw.name.to_string(),
            reason: reason.to_string(),
        }
    }

    /// The value, which must be present.
    fn text(&self, expected: &str) -> Result<&str, FioError> {
        self.raw.value.ok_or_else(|| self.invalid(expected))
    }

    /// The value of a numeric option, refusing fio's arithmetic and host keywords by name rather
    /// than as a generic bad value.
    fn numeric(&self, expected: &str) -> Result<&str, FioError> {
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

    fn parsed<T>(&self, expected: &str, parse: impl Fn(&str) -> Option<T>) -> Result<T, FioError> {
        parse(self.numeric(expected)?).ok_or_else(|| self.invalid(expected))
    }

    fn size(&self) -> Result<u64, FioError> {
        self.parsed(EXPECT_SIZE, |t| units::parse_size(t, self.kb))
            .map_err(|e| self.or_too_large(e, EXPECT_SIZE))
    }

    fn quantity(&self) -> Result<Quantity, FioError> {
        self.parsed(EXPECT_SIZE_OR_PERCENT, |t| {
            units::parse_quantity(t, self.kb)
        })
        .map_err(|e| self.or_too_large(e, EXPECT_SIZE_OR_PERCENT))
    }

    /// fio integers accept size suffixes (`number_ios=1k` is 1024).
    fn int(&self) -> Result<u64, FioError> {
        self.parsed(EXPECT_INT, |t| units::parse_size(t, self.kb))
            .map_err(|e| self.or_too_large(e, EXPECT_INT))
    }

    fn int_in(&self, min: u64, max: u64) -> Result<u64, FioError> {
        let expected = format!("an integer from {min} to {max}");
        self.parsed(&expected, |t| {
            units::parse_size(t, self.kb).filter(|v| (min..=max).contains(v))
        })
    }

    fn percent(&self) -> Result<u32, FioError> {
        self.parsed(EXPECT_PERCENT, |t| {
            t.parse::<u32>().ok().filter(|&v| v <= 100)
        })
    }

    fn bool(&self) -> Result<bool, FioError> {
        self.parsed(EXPECT_BOOL, units::parse_bool)
    }

    /// fio's "no argument" options (`time_based`, `norandommap`, `stonewall`): present means
    /// set, or an explicit `=0`/`=1`.
    fn flag(&self) -> Result<bool, FioError> {
        match self.raw.value {
            None => Ok(true),
            Some(_) => self.bool(),
        }
    }

    fn time(&self, default_unit: u64, expected: &str) -> Result<u64, FioError> {
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
    fn range(
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
    fn per_dir<T: Clone>(
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

/// Spreads up to three comma-separated components over the directions: component `i` sets
/// direction `i`, the last non-empty trailing component also sets the remaining directions, an
/// empty component leaves its direction alone. `None` if a component does not parse or there are
/// more than three.
fn assign_per_dir<T: Clone>(
    comps: &[&str],
    parse: impl Fn(&str) -> Option<T>,
) -> Option<PerDir<Option<T>>> {
    if comps.len() > 3 {
        return None;
    }
    let mut out = PerDir::splat(None);
    for (i, comp) in comps.iter().enumerate() {
        if comp.is_empty() {
            continue;
        }
        let value = parse(comp)?;
        let last = i + 1 == comps.len();
        for dir in &Dir::ALL[i..if last { 3 } else { i + 1 }] {
            out[*dir] = Some(value.clone());
        }
    }
    Some(out)
}

fn merge<T>(target: &mut PerDir<T>, values: PerDir<Option<T>>) {
    let PerDir { read, write, trim } = values;
    for (dir, value) in Dir::ALL.into_iter().zip([read, write, trim]) {
        if let Some(v) = value {
            target[dir] = v;
        }
    }
}

impl<T> PerDir<T> {
    fn map<U>(self, f: impl Fn(T) -> U) -> PerDir<U> {
        PerDir {
            read: f(self.read),
            write: f(self.write),
            trim: f(self.trim),
        }
    }
}

/// fio allows at most 64 `bssplit` entries (`BSSPLIT_MAX`) and 256 zones (`ZONESPLIT_MAX`) per
/// direction.
const BSSPLIT_MAX: usize = 64;
const ZONESPLIT_MAX: usize = 256;

/// Fills blank percentages the way fio does (`bssplit_ddir`, `zone_split_ddir`): the rest of
/// 100 is divided evenly, rounding down; a single blank entry gets 100.
fn fill_blanks(percents: &mut [Option<u32>]) -> Option<()> {
    let given: u32 = percents.iter().flatten().sum();
    let blanks = percents.iter().filter(|p| p.is_none()).count() as u32;
    if given > 100 || (blanks == 0 && given != 100) {
        return None;
    }
    for p in percents.iter_mut().filter(|p| p.is_none()) {
        *p = Some((100 - given) / blanks);
    }
    Some(())
}

/// One direction's `bssplit`: `bs[/percent]` entries separated by `:`. As in fio, a percentage
/// of 0 counts as blank. fio itself rejects a total above 100 only when more than one entry is
/// blank, and gives whatever is missing from 100 to the most frequent size; here, following the
/// HOWTO ("The percentages always add up to 100"), the given percentages may not exceed 100 and,
/// with no blank entry, must add up to exactly 100. An entry written with 0 that fio would give a
/// share to (all zeros, or zeros beside percentages short of 100) is an error: it would run the
/// opposite of what was written. `Err(Some(what))` says what was expected when more can be said
/// than the option's general form.
fn parse_bssplit(text: &str, kb: KbBase) -> Result<Vec<BsSplit>, Option<String>> {
    let mut sizes = Vec::new();
    let mut percents = Vec::new();
    let mut zeros = Vec::new();
    for entry in text.split(':') {
        let (bs, percent) = match entry.split_once('/') {
            Some((bs, p)) => (bs, Some(p)),
            None => (entry, None),
        };
        sizes.push(units::parse_size(bs, kb).filter(|&v| v > 0).ok_or(None)?);
        let p = match percent {
            None | Some("") => None,
            Some(p) => Some(p.parse::<u32>().ok().filter(|&v| v <= 100).ok_or(None)?),
        };
        zeros.push(p == Some(0));
        percents.push(p.filter(|&v| v > 0));
    }
    if sizes.len() > BSSPLIT_MAX {
        return Err(None);
    }
    fill_blanks(&mut percents).ok_or(None)?;
    if zeros.iter().all(|&z| z) {
        return Err(Some(
            "at least one percentage above 0 (fio reads a percentage of 0 as blank and would split the I/Os evenly; \
             leave the percentages blank, as 4k/:8k/, for that)"
                .into(),
        ));
    }
    let entries: Vec<&str> = text.split(':').collect();
    if let Some(i) = (0..sizes.len()).find(|&i| zeros[i] && percents[i] != Some(0)) {
        return Err(Some(format!(
            "percentages that add up to 100 (fio reads {} as blank and would give it {}% of the I/Os; give it its share, or leave it out)",
            entries[i],
            percents[i].unwrap_or(0)
        )));
    }
    let mut split: Vec<BsSplit> = sizes
        .into_iter()
        .zip(percents)
        .map(|(bs, p)| BsSplit {
            bs,
            percent: p.unwrap_or(0),
        })
        .collect();
    // fio keeps the entries sorted by ascending percentage; selection walks them in this order.
    split.sort_by_key(|s| s.percent);
    Ok(split)
}

fn parse_distribution(o: &Opt<'_>) -> Result<RandomDistribution, FioError> {
    const EXPECTED: &str = "random, zipf[:theta[:center]], pareto[:h[:center]], \
                            normal[:deviation[:center]], zoned:<access%>/<size%>:... or \
                            zoned_abs:<access%>/<size>:...";
    let text = o.text(EXPECTED)?;
    let (kind, params) = match text.split_once(':') {
        Some((k, p)) => (k, Some(p)),
        None => (text, None),
    };
    // fio's defaults: FIO_DEF_ZIPF 1.1, FIO_DEF_PARETO 0.2, normal 0.
    let value_and_center = |default: f64, expected: &str| -> Result<(f64, Option<f64>), FioError> {
        let Some(params) = params else {
            return Ok((default, None));
        };
        let (value, center) = match params.split_once(':') {
            Some((v, c)) => (v, Some(c)),
            None => (params, None),
        };
        let value = units::parse_f64(value).ok_or_else(|| o.invalid(expected))?;
        let center = match center {
            None => None,
            Some(c) => Some(
                units::parse_f64(c)
                    .filter(|c| (0.0..=1.0).contains(c))
                    .ok_or_else(|| o.invalid("a distribution center from 0 to 1"))?,
            ),
        };
        Ok((value, center))
    };
    Ok(match kind {
        "random" if params.is_none() => RandomDistribution::Random,
        "zipf" => {
            const E: &str = "zipf:<theta>, theta >= 0 and not 1, e.g. zipf:1.2";
            let (theta, center) = value_and_center(1.1, E)?;
            if theta < 0.0 || theta == 1.0 {
                return Err(o.invalid(E));
            }
            RandomDistribution::Zipf { theta, center }
        }
        "pareto" => {
            const E: &str = "pareto:<h>, 0 < h < 1, e.g. pareto:0.2";
            let (h, center) = value_and_center(0.2, E)?;
            if h <= 0.0 || h >= 1.0 {
                return Err(o.invalid(E));
            }
            RandomDistribution::Pareto { h, center }
        }
        "normal" => {
            const E: &str = "normal:<deviation %>, 0 <= deviation < 100, e.g. normal:5";
            let (deviation, center) = value_and_center(0.0, E)?;
            if !(0.0..100.0).contains(&deviation) {
                return Err(o.invalid(E));
            }
            RandomDistribution::Normal { deviation, center }
        }
        "zoned" | "zoned_abs" => {
            let absolute = kind == "zoned_abs";
            let expected = if absolute {
                "zoned_abs:<access%>/<size>:... such as zoned_abs:60/20G:30/100G:10/500G, \
                 access percentages adding up to 100, per direction"
            } else {
                "zoned:<access%>/<size%>:... such as zoned:60/10:30/20:8/30:2/40, access \
                 percentages adding up to 100 and sizes to at most 100, per direction"
            };
            let comps: Vec<&str> = params
                .ok_or_else(|| o.invalid(expected))?
                .split(',')
                .collect();
            if absolute {
                let zones = assign_per_dir(&comps, |c| parse_abs_zones(c, o.kb))
                    .ok_or_else(|| o.invalid(expected))?;
                RandomDistribution::ZonedAbs(zones.map(Option::unwrap_or_default))
            } else {
                let zones =
                    assign_per_dir(&comps, parse_zones).ok_or_else(|| o.invalid(expected))?;
                RandomDistribution::Zoned(zones.map(Option::unwrap_or_default))
            }
        }
        _ => return Err(o.invalid(EXPECTED)),
    })
}

/// Access percentages must be given and add up to exactly 100 (fio refuses both more and less);
/// sizes may be blank (sharing the rest) and add up to at most 100, leaving the tail of the region
/// unused if less (fio's `zone_split_ddir`).
fn zone_entries(text: &str) -> Option<Vec<(u32, &str)>> {
    let mut entries = Vec::new();
    for entry in text.split(':') {
        let (access, size) = entry.split_once('/').unwrap_or((entry, ""));
        entries.push((access.parse::<u32>().ok().filter(|&v| v <= 100)?, size));
    }
    let total: u32 = entries.iter().map(|e| e.0).sum();
    (total == 100 && entries.len() <= ZONESPLIT_MAX).then_some(entries)
}

fn parse_zones(text: &str) -> Option<Vec<Zone>> {
    let entries = zone_entries(text)?;
    let mut sizes: Vec<Option<u32>> = Vec::new();
    for (_, size) in &entries {
        sizes.push(match *size {
            "" => None,
            s => Some(s.parse::<u32>().ok().filter(|&v| v <= 100)?).filter(|&v| v > 0),
        });
    }
    let given: u32 = sizes.iter().flatten().sum();
    let blanks = sizes.iter().filter(|s| s.is_none()).count() as u32;
    if given > 100 {
        return None;
    }
    Some(
        entries
            .iter()
            .zip(sizes)
            .map(|(&(access_percent, _), size)| Zone {
                access_percent,
                size_percent: size.unwrap_or((100 - given) / blanks.max(1)),
            })
            .collect(),
    )
}

fn parse_abs_zones(text: &str, kb: KbBase) -> Option<Vec<AbsZone>> {
    zone_entries(text)?
        .into_iter()
        .map(|(access_percent, size)| {
            Some(AbsZone {
                access_percent,
                size: units::parse_size(size, kb).filter(|&v| v > 0)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::parse_job_text;
    use super::*;

    fn job(body: &str) -> FioJob {
        parse(body).jobs.remove(0)
    }

    fn parse(body: &str) -> super::super::JobFile {
        parse_job_text(&format!("[j]\n{body}\n"), "t.fio", &|_| None).expect("parses")
    }

    fn err(body: &str) -> String {
        parse_job_text(&format!("[j]\n{body}\n"), "t.fio", &|_| None)
            .expect_err("must fail")
            .to_string()
    }

    fn dirs<T: Clone>(r: T, w: T, t: T) -> PerDir<T> {
        PerDir {
            read: r,
            write: w,
            trim: t,
        }
    }

    #[test]
    fn defaults_are_fios() {
        let j = job("");
        assert_eq!(j.rw, RwMode::Read);
        assert_eq!(j.rwmixread, 50);
        assert_eq!(j.bs, PerDir::splat(4096));
        assert_eq!((j.iodepth, j.numjobs, j.loops), (1, 1, 1));
        assert_eq!(j.percentage_random, PerDir::splat(100));
        assert!(j.randrepeat && !j.norandommap && !j.time_based);
        assert_eq!(j.random_distribution, RandomDistribution::Random);
        assert_eq!(j.thinktime_blocks, 1);
        assert_eq!(j.offset, SizeSpec::Bytes(0));
    }

    #[test]
    fn rw_modes_and_suffixes() {
        for (text, mode) in [
            ("read", RwMode::Read),
            ("randtrim", RwMode::RandTrim),
            ("rw", RwMode::ReadWrite),
            ("readwrite", RwMode::ReadWrite),
            ("randrw", RwMode::RandRw),
            ("trimwrite", RwMode::TrimWrite),
            ("randtrimwrite", RwMode::RandTrimWrite),
        ] {
            assert_eq!(job(&format!("rw={text}")).rw, mode, "{text}");
        }
        let j = job("readwrite=randread:8");
        assert_eq!(
            (j.rw, j.rw_modifier),
            (RwMode::RandRead, RwModifier::IosPerOffset(8))
        );
        let j = job("rw=write:4k");
        assert_eq!(
            (j.rw, j.rw_modifier),
            (RwMode::Write, RwModifier::Skip(4096))
        );
        // A later rw= without a suffix clears the modifier.
        assert_eq!(job("rw=write:4k\nrw=write").rw_modifier, RwModifier::None);
        assert!(err("rw=randomread").contains("option 'rw': invalid value 'randomread'"));
        assert!(err("rw=read:-4k").contains("not supported"));
        assert!(err("rw=randread:0").contains("invalid value"));
        assert!(err("rw=filecreate").contains("not supported"));
    }

    #[test]
    fn rwmix() {
        assert_eq!(job("rwmixread=70").rwmixread, 70);
        assert_eq!(job("rwmixwrite=30").rwmixread, 70);
        // The later of the two wins (HOWTO, "rwmixwrite").
        assert_eq!(job("rwmixread=10\nrwmixwrite=30").rwmixread, 70);
        assert_eq!(job("rwmixwrite=30\nrwmixread=10").rwmixread, 10);
        assert!(err("rwmixread=101").contains("percentage"));
    }

    #[test]
    fn block_sizes_per_direction() {
        assert_eq!(job("bs=256k").bs, PerDir::splat(256 << 10));
        assert_eq!(job("bs=4k,16k").bs, dirs(4096, 16384, 16384));
        assert_eq!(job("bs=4k,16k,8k").bs, dirs(4096, 16384, 8192));
        assert_eq!(job("bs=8k,32k,").bs, dirs(8192, 32768, 4096));
        assert_eq!(job("bs=,8k").bs, dirs(4096, 8192, 8192));
        assert_eq!(job("bs=,8k,").bs, dirs(4096, 8192, 4096));
        assert_eq!(job("blocksize=8k").bs, PerDir::splat(8192));
        assert!(err("bs=4k,4k,4k,4k").contains("option 'bs'"));
        assert!(err("bs=0").contains("option 'bs'"));
    }

    #[test]
    fn bs_with_a_dash_is_per_direction_as_in_fio() {
        let file = parse("bs=1k-4k");
        assert_eq!(file.jobs[0].bs, dirs(1024, 4096, 4096));
        assert_eq!(file.jobs[0].block_size_range(Dir::Read), (1024, 1024));
        assert_eq!(file.warnings.len(), 1);
        assert!(
            file.warnings[0].message.contains("use bsrange"),
            "{:?}",
            file.warnings
        );
    }

    #[test]
    fn bsrange_and_blockalign() {
        let j = job("bsrange=1k-4k");
        assert_eq!(j.bsrange, PerDir::splat(Some((1024, 4096))));
        assert_eq!(j.block_size_range(Dir::Write), (1024, 4096));
        let j = job("bsrange=1k-4k,2k:8k");
        assert_eq!(
            j.bsrange,
            dirs(Some((1024, 4096)), Some((2048, 8192)), Some((2048, 8192)))
        );
        assert_eq!(
            job("blocksize_range=4k-1k").bsrange.read,
            Some((1024, 4096))
        );
        assert!(err("bsrange=4k").contains("option 'bsrange'"));
        assert_eq!(job("ba=512").blockalign, PerDir::splat(Some(512)));
        assert_eq!(
            job("blockalign=,8k").blockalign,
            dirs(None, Some(8192), Some(8192))
        );
        assert!(job("bs_is_seq_rand=1").bs_is_seq_rand);
    }

    #[test]
    fn numbers_too_large_for_64_bits_say_so() {
        for (opt, part) in [
            ("size=99999999999p", "99999999999p"),
            ("io_size=99999999999999999999", "99999999999999999999"),
            ("bs=4k,99999999999999999999k", "99999999999999999999k"),
            ("offset=0x1ffffffffffffffff", "0x1ffffffffffffffff"),
            ("runtime=18446744073709551615", "18446744073709551615"),
            ("thinktime=99999999999999d", "99999999999999d"),
        ] {
            let e = err(opt);
            let name = opt.split('=').next().unwrap();
            assert!(
                e.contains(&format!("option '{name}': '{part}' is too large: the largest is ")),
                "{opt}: {e}"
            );
        }
        // An option with a narrower range states it.
        assert!(err("iodepth=99999999999999999999").contains("expected an integer from 1 to 4294967295"));
    }

    #[test]
    fn bssplit_zero_percentages_that_fio_would_fill_are_errors() {
        // fio reads a percentage of 0 as blank and shares out what the others leave of 100: all
        // zeros would be an even split, the opposite of what was written.
        let e = err("bssplit=4k/0:8k/0");
        assert!(e.contains("option 'bssplit': invalid value '4k/0:8k/0': expected at least one percentage above 0"), "{e}");
        assert!(e.contains("fio reads a percentage of 0 as blank and would split the I/Os evenly"), "{e}");
        let e = err("bssplit=4k/0:8k/50");
        assert!(e.contains("fio reads 4k/0 as blank and would give it 50%"), "{e}");
        let e = err("bssplit=16k/100,4k/0:8k/");
        assert!(e.contains("fio reads 4k/0 as blank and would give it 50%"), "{e}");
        // A 0 that gets 0 is what was meant (and what fio does).
        let j = job("bssplit=4k/0:8k/100");
        assert_eq!(j.bssplit.read, vec![BsSplit { bs: 4096, percent: 0 }, BsSplit { bs: 8192, percent: 100 }]);
    }

    #[test]
    fn bssplit() {
        let j = job("bssplit=4k/10:64k/50:32k/40");
        let expect = vec![
            BsSplit {
                bs: 4096,
                percent: 10,
            },
            BsSplit {
                bs: 32768,
                percent: 40,
            },
            BsSplit {
                bs: 65536,
                percent: 50,
            },
        ];
        assert_eq!(j.bssplit, PerDir::splat(expect));
        assert_eq!(j.block_size_range(Dir::Read), (4096, 65536));
        // HOWTO: "bssplit=4k/50:1k/:32k/ would have 50% 4k ios, and 25% 1k and 32k ios".
        let j = job("bssplit=4k/50:1k/:32k/");
        let percent_of = |bs| j.bssplit.read.iter().find(|s| s.bs == bs).unwrap().percent;
        assert_eq!(
            (percent_of(4096), percent_of(1024), percent_of(32768)),
            (50, 25, 25)
        );
        let j = job("bssplit=2k/50:4k/50,4k/90:8k/10");
        assert_eq!(j.bssplit.read.len(), 2);
        assert_eq!(
            j.bssplit.write,
            vec![
                BsSplit {
                    bs: 8192,
                    percent: 10
                },
                BsSplit {
                    bs: 4096,
                    percent: 90
                }
            ]
        );
        assert_eq!(j.bssplit.trim, j.bssplit.write);
        assert_eq!(job("bssplit=,4k/100").bssplit.read, vec![]);
        assert!(err("bssplit=4k/60:8k/60").contains("option 'bssplit'"));
        assert!(err("bssplit=4k/60:8k/30").contains("add up to 100"));
        assert!(err("bssplit=4k/50::8k/50").contains("option 'bssplit'"));
    }

    #[test]
    fn sizes_offsets_and_volume() {
        let j = job("size=20%\noffset=10%\noffset_increment=1g\noffset_align=64k");
        assert_eq!(j.size, Some(SizeSpec::Percent(20)));
        assert_eq!(j.offset, SizeSpec::Percent(10));
        assert_eq!(j.offset_increment, SizeSpec::Bytes(1 << 30));
        assert_eq!(j.offset_align, Some(65536));
        assert_eq!(job("size=1g").size, Some(SizeSpec::Bytes(1 << 30)));
        assert_eq!(job("filesize=1m-2m").filesize, Some((1 << 20, 2 << 20)));
        assert_eq!(job("filesize=1m").filesize, Some((1 << 20, 1 << 20)));
        assert_eq!(job("io_limit=5g").io_size, Some(5 << 30));
        assert_eq!(job("io_size=5g").io_size, Some(5 << 30));
        assert_eq!(job("number_ios=1k").number_ios, Some(1024));
        assert_eq!(job("iodepth=32").iodepth, 32);
        let b = job("iodepth=8\niodepth_batch_submit=4\niodepth_batch_complete_min=2");
        assert_eq!((b.iodepth_batch, b.iodepth_batch_complete_min), (4, 2));
        // fio: a batch of 0 or beyond the depth is the depth; polling (0) reaps at least one.
        let b = job("iodepth=8\niodepth_batch=0\niodepth_batch_complete_min=0");
        assert_eq!((b.iodepth_batch, b.iodepth_batch_complete_min), (8, 1));
        let b = job("iodepth=4\niodepth_batch_submit=16\niodepth_batch_complete=9");
        assert_eq!((b.iodepth_batch, b.iodepth_batch_complete_min), (4, 4));
        assert_eq!((job("").iodepth_batch, job("").iodepth_batch_complete_min), (1, 1));
        assert!(err("iodepth_batch=-1").contains("iodepth_batch"));
        assert_eq!(job("numjobs=4").numjobs, 4);
        assert_eq!(job("loops=3").loops, 3);
        assert_eq!(job("loops=0").loops, 1);
        assert!(err("io_size=20%").contains("option 'io_size'"));
        assert!(err("iodepth=0").contains("from 1"));
        assert!(err("size=1.5g").contains("expected a size such as 4k, 64KiB or 4096"));
    }

    #[test]
    fn kb_base_applies_to_the_whole_section_whatever_its_position() {
        let j = job("bs=4k\nsize=1KiB\nkb_base=1000");
        assert_eq!(j.bs, PerDir::splat(4000));
        assert_eq!(j.size, Some(SizeSpec::Bytes(1024)));
        // fio lists it first, too.
        assert_eq!(j.job_options[0], ("kb_base".into(), "1000".into()));
        assert!(err("kb_base=1001").contains("1000 or 1024"));
    }

    #[test]
    fn times() {
        let j = job("runtime=30\ntime_based\nramp_time=500ms\nstartdelay=2m");
        assert_eq!(j.runtime, Some(30_000_000_000));
        assert!(j.time_based && j.is_time_based());
        assert_eq!(j.ramp_time, 500_000_000);
        assert_eq!(j.startdelay, (120_000_000_000, 120_000_000_000));
        assert_eq!(
            job("startdelay=8-2").startdelay,
            (2_000_000_000, 8_000_000_000)
        );
        assert_eq!(job("timeout=1h").runtime, Some(3_600_000_000_000));
        assert_eq!(job("thinktime=10\nthinktime_blocks=4").thinktime, 10_000);
        assert_eq!(job("thinktime=10ms").thinktime, 10_000_000);
        assert_eq!(job("thinktime_blocks=4").thinktime_blocks, 4);
        assert_eq!(job("thinktime_spin=5").thinktime_spin, 5_000);
        assert_eq!(job("thinktime_iotime=9s").thinktime_iotime, 9_000_000_000);
        assert_eq!(
            job("thinktime_blocks_type=issue").thinktime_blocks_type,
            ThinktimeBlocksType::Issue
        );
        assert!(!job("runtime=30\ntime_based=0").time_based);
        assert!(err("runtime=30x").contains("option 'runtime'"));
        assert!(err("time_based=yes").contains("0 or 1"));
    }

    #[test]
    fn sync_options_are_modelled() {
        let j = job("fsync=32\nfdatasync=8\nend_fsync=1\nfsync_on_close=1");
        assert_eq!((j.fsync, j.fdatasync, j.end_fsync), (32, 8, true));
        assert_eq!(j.noted_unmodelled, vec!["fsync_on_close"]);
        let d = job("rw=write");
        assert_eq!((d.fsync, d.fdatasync, d.end_fsync), (0, 0, false));
        assert!(err("fsync=-1").contains("option 'fsync'"));
        assert!(err("fdatasync=4294967296").contains("from 0 to 4294967295"));
        assert!(err("end_fsync=yes").contains("0 or 1"));
    }

    #[test]
    fn time_based_without_runtime_is_dropped_with_a_warning() {
        let file = parse("time_based");
        assert!(!file.jobs[0].time_based);
        assert!(file.warnings[0].message.contains("requires a runtime"));
        assert_eq!(file.warnings[0].line, 1);
    }

    #[test]
    fn rates() {
        // HOWTO: "rate=1m,500k would limit reads to 1MiB/sec and writes to 500KiB/sec".
        let j = job("rate=1m,500k");
        assert_eq!(
            j.rate,
            dirs(Some(1 << 20), Some(500 << 10), Some(500 << 10))
        );
        assert_eq!(job("rate=500k,").rate, dirs(Some(500 << 10), None, None));
        assert_eq!(
            job("rate=,500k").rate,
            dirs(None, Some(500 << 10), Some(500 << 10))
        );
        assert_eq!(job("rate_iops=1000").rate_iops, PerDir::splat(Some(1000)));
        assert_eq!(
            job("rate_process=poisson").rate_process,
            RateProcess::Poisson
        );
        let e = parse_job_text("[j]\nrate=1m\nrate_iops=10\n", "t.fio", &|_| None).unwrap_err();
        assert!(e.to_string().contains("mutually exclusive"), "{e}");
    }

    #[test]
    fn random_options() {
        let j = job("random_distribution=zipf:1.2");
        assert_eq!(
            j.random_distribution,
            RandomDistribution::Zipf {
                theta: 1.2,
                center: None
            }
        );
        assert_eq!(
            job("random_distribution=zipf").random_distribution,
            RandomDistribution::Zipf {
                theta: 1.1,
                center: None
            }
        );
        assert_eq!(
            job("random_distribution=zipf:1.2:0.25").random_distribution,
            RandomDistribution::Zipf {
                theta: 1.2,
                center: Some(0.25)
            }
        );
        assert_eq!(
            job("random_distribution=pareto:0.3").random_distribution,
            RandomDistribution::Pareto {
                h: 0.3,
                center: None
            }
        );
        assert_eq!(
            job("random_distribution=normal:5").random_distribution,
            RandomDistribution::Normal {
                deviation: 5.0,
                center: None
            }
        );
        let zones = vec![
            Zone {
                access_percent: 60,
                size_percent: 10,
            },
            Zone {
                access_percent: 30,
                size_percent: 20,
            },
            Zone {
                access_percent: 8,
                size_percent: 30,
            },
            Zone {
                access_percent: 2,
                size_percent: 40,
            },
        ];
        assert_eq!(
            job("random_distribution=zoned:60/10:30/20:8/30:2/40").random_distribution,
            RandomDistribution::Zoned(PerDir::splat(zones))
        );
        let RandomDistribution::Zoned(z) =
            job("random_distribution=zoned:50/:50/,100/100").random_distribution
        else {
            panic!("zoned");
        };
        assert_eq!(
            z.read[1],
            Zone {
                access_percent: 50,
                size_percent: 50
            }
        );
        assert_eq!(
            z.write,
            vec![Zone {
                access_percent: 100,
                size_percent: 100
            }]
        );
        let RandomDistribution::ZonedAbs(z) =
            job("random_distribution=zoned_abs:60/20G:30/100G:10/500g").random_distribution
        else {
            panic!("zoned_abs");
        };
        assert_eq!(
            z.trim[2],
            AbsZone {
                access_percent: 10,
                size: 500 << 30
            }
        );
        for bad in [
            "zipf:1",
            "zipf:-1",
            "pareto:1.5",
            "normal:100",
            "zipf:1.2:2",
            "gauss",
            "zoned",
        ] {
            assert!(
                err(&format!("random_distribution={bad}")).contains("random_distribution"),
                "{bad}"
            );
        }
        assert!(err("random_distribution=zoned:60/10:30/20").contains("adding up to 100"));
        assert!(err("random_distribution=zoned:50/60:50/60").contains("random_distribution"));
        assert_eq!(
            job("percentage_random=50").percentage_random,
            PerDir::splat(50)
        );
        assert_eq!(
            job("percentage_random=10,20").percentage_random,
            dirs(10, 20, 20)
        );
        assert!(err("percentage_random=101").contains("percentage"));
        assert!(job("norandommap").norandommap);
        let j = job("randrepeat=0\nrandseed=42");
        assert!(!j.randrepeat);
        assert_eq!(j.randseed, Some(42));
        assert_eq!(
            job("rw_sequencer=identical").rw_sequencer,
            RwSequencer::Identical
        );
    }

    #[test]
    fn grouping_flags_and_groups() {
        let file = parse_job_text(
            "[a]\n[b]\nstonewall\n[c]\nnew_group\n[d]\n[e]\nwait_for_previous\ngroup_reporting\n",
            "t.fio",
            &|_| None,
        )
        .unwrap();
        let j = &file.jobs;
        assert!(j[1].stonewall && j[2].new_group && j[4].stonewall && j[4].group_reporting);
        assert_eq!(groups(j), vec![vec![0], vec![1], vec![2, 3], vec![4]]);
        assert_eq!(phases(j), vec![vec![0], vec![1, 2, 3], vec![4]]);
        // A stonewall on the first job does not open an empty group.
        let file = parse_job_text("[a]\nstonewall\n[b]\n", "t.fio", &|_| None).unwrap();
        assert_eq!(groups(&file.jobs), vec![vec![0, 1]]);
    }

    #[test]
    fn unsupported_and_unmodelled_options() {
        assert!(err("zonemode=strided").contains("not supported"));
        assert!(err("nrfiles=2").contains("not supported"));
        assert!(err("bs_unaligned").contains("not supported"));
        assert!(err("size=(1+2)*1g").contains("arithmetic"));
        assert!(err("size=8*$mb_memory").contains("host-dependent"));
        let file = parse("nrfiles=1\nlatency_target=10ms\nzonemode=none");
        assert_eq!(file.jobs[0].noted_unmodelled, vec!["nrfiles", "zonemode"]);
        assert!(file.warnings[0]
            .message
            .contains("'latency_target' is not modelled"));
    }
}
