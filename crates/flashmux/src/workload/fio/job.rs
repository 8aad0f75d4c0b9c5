//! The typed job ([`FioJob`]); the mapping from fio options onto it is in `job/options.rs`,
//! option values with a structure of their own in `job/values.rs`.
//!
//! Option names, aliases, value types and defaults are fio's (HOWTO "Job file parameters" and the
//! option table in fio's `options.c`). Options about the host, the engine, buffers or reporting
//! are accepted and listed in [`FioJob::noted_unmodelled`]; options that would change fio's timing
//! or stopping rules in ways flashmux does not model produce a warning; options that would change
//! the I/O stream itself in unmodelled ways are refused with [`FioError::Unsupported`].

use super::units::{self, KbBase, Quantity};
use super::{Diagnostic, Dir, FioError, PerDir};

mod options;
mod values;

pub(crate) use options::{canonical_name, priority, Outcome, RawOption, NEEDS_ZBD};
pub use options::ZBD_MAX_WRITE_ZONES;
use values::*;

/// fio's file and directory operation engines (`ioengine=`, fio's `engines/fileoperations.c`):
/// each "opens" a job's file with one timed system call on it and then completes its I/Os
/// without doing them (`FIO_FAKEIO`). What the job measures is that call's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileEngine {
    /// `filecreate`: `open(O_CREAT)`, making the file (an existing one is opened).
    FileCreate,
    /// `filestat`: `stat` of a file fio lays out before the run.
    FileStat,
    /// `filedelete`: `unlink` of a file fio lays out before the run.
    FileDelete,
    /// `dircreate`: `mkdir`.
    DirCreate,
    /// `dirstat`: `stat` of a directory made before the run.
    DirStat,
    /// `dirdelete`: `rmdir` of a directory made before the run.
    DirDelete,
}

impl FileEngine {
    pub fn from_fio(name: &str) -> Option<FileEngine> {
        Some(match name {
            "filecreate" => FileEngine::FileCreate,
            "filestat" => FileEngine::FileStat,
            "filedelete" => FileEngine::FileDelete,
            "dircreate" => FileEngine::DirCreate,
            "dirstat" => FileEngine::DirStat,
            "dirdelete" => FileEngine::DirDelete,
            _ => return None,
        })
    }

    pub fn fio_name(self) -> &'static str {
        match self {
            FileEngine::FileCreate => "filecreate",
            FileEngine::FileStat => "filestat",
            FileEngine::FileDelete => "filedelete",
            FileEngine::DirCreate => "dircreate",
            FileEngine::DirStat => "dirstat",
            FileEngine::DirDelete => "dirdelete",
        }
    }

    /// Its files are directories.
    pub fn on_dirs(self) -> bool {
        matches!(self, FileEngine::DirCreate | FileEngine::DirStat | FileEngine::DirDelete)
    }

    /// It makes its files or directories as it runs (fio's `FIO_DISKLESSIO` engines with
    /// `open_file`): nothing is laid out before the run, and a file is `bs` bytes (fio's
    /// `get_file_size` for them) unless `filesize` or `size` say otherwise.
    pub fn creates(self) -> bool {
        matches!(self, FileEngine::FileCreate | FileEngine::DirCreate)
    }

    /// Its call fails on a second open of the same file (a second `loops` pass): the file is
    /// gone (`filedelete`, `dirdelete`) or exists (`mkdir` gives EEXIST).
    pub fn once_per_file(self) -> bool {
        matches!(self, FileEngine::FileDelete | FileEngine::DirCreate | FileEngine::DirDelete)
    }
}

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

/// fio's `zonemode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZoneMode {
    /// No zones: `zonesize`, `zonerange` and `zoneskip` do nothing (and fio refuses a
    /// `zonesize` with it).
    #[default]
    None,
    /// I/O stays in one zone of `zonerange` bytes until `zonesize` bytes were transferred, then
    /// moves `zonerange + zoneskip` bytes on.
    Strided,
    /// Zoned block device mode (fio's `zbd.c`): writes go to the write pointer of a zone the
    /// job may write, reads stay below the write pointers. Runs only against a zoned drive
    /// ([`super::ZonedDisk`], [`super::JobGen::new_zoned`]).
    Zbd,
}

/// The options of `zonemode=zbd` (HOWTO "zonecapacity" to "zone_reset_frequency", fio's
/// `options.c`), as given; [`super::JobGen::new_zoned`] checks them against the drive as fio's
/// `zbd_setup_files` does.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ZbdOptions {
    /// `zonecapacity` in bytes, 0 when not given. fio uses it only to emulate zones on a
    /// conventional device; on a zoned drive the capacity is the drive's and this is ignored.
    pub zone_capacity: u64,
    /// `max_open_zones`: the most zones all jobs on the drive write at once; 0 is the drive's
    /// limit, or none when the drive has none.
    pub max_open_zones: u32,
    /// `job_max_open_zones`: the most zones this job writes at once; 0 is no limit.
    pub job_max_open_zones: u32,
    /// `ignore_zone_limits`: `max_open_zones` may exceed the drive's limit.
    pub ignore_zone_limits: bool,
    /// `zone_reset_threshold`, in [0, 1]: the share of the written bytes in the job's zones
    /// over which zones are reset every `1 / zone_reset_frequency` writes.
    pub zone_reset_threshold: f64,
    /// `zone_reset_frequency`, in [0, 1]; 0 is never.
    pub zone_reset_frequency: f64,
    /// `read_beyond_wp`: reads may go past a zone's write pointer.
    pub read_beyond_wp: bool,
    /// `write_mode=zone_append` (the `io_uring_cmd` engine's): writes are sent as Zone Append
    /// commands to the start of their zone.
    pub zone_append: bool,
}

/// Options given as a number of zones (`size=8z`, fio's `_nz` fields, `str_size_cb` and its
/// siblings): fio turns them into bytes once the zone size is known
/// (`zbd_recalc_options_with_zone_granularity`), the drive's with `zonemode=zbd`, `zonesize`
/// with `zonemode=strided`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InZones {
    pub size: Option<u64>,
    pub io_size: Option<u64>,
    pub offset: Option<u64>,
    pub offset_increment: Option<u64>,
    pub zone_skip: Option<u64>,
}

impl InZones {
    pub fn any(&self) -> bool {
        self.size.is_some()
            || self.io_size.is_some()
            || self.offset.is_some()
            || self.offset_increment.is_some()
            || self.zone_skip.is_some()
    }
}

/// A job's strided zones (`zonemode=strided`), in bytes, after fio's `fixup_options`: `range`
/// is `zonerange`, or `zonesize` when that was not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StridedZones {
    /// `zonesize`: bytes transferred in a zone before the next one starts.
    pub size: u64,
    /// `zonerange`: the zone's length, where sequential I/O runs and random offsets fall.
    pub range: u64,
    /// `zoneskip`: bytes between the end of one zone and the start of the next.
    pub skip: u64,
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

/// `file_service_type` (HOWTO, "file_service_type"): how a job with several files picks the
/// file of its next I/O.
#[derive(Debug, Clone, PartialEq)]
pub enum FileService {
    /// In turn, this many I/Os to each (`roundrobin[:N]`, the default).
    RoundRobin(u64),
    /// Each file to its end before the next (`sequential`).
    Sequential,
    /// A file drawn uniformly, this many I/Os to each (`random[:N]`).
    Random(u64),
    /// A file drawn from `zipf`, `pareto` or `normal` (`gauss`) over the job's files.
    Skewed(RandomDistribution),
}

/// The directive a job's writes carry (`dataplacement=`; fio's `FIO_DP_FDP`, `FIO_DP_STREAMS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementKind {
    /// NVMe Flexible Data Placement (`dataplacement=fdp`, or `fdp=1`): a write's directive
    /// specific value is a placement ID.
    Fdp,
    /// The NVMe Streams directive (`dataplacement=streams`): a write's value is a stream ID.
    Streams,
}

/// One line of a `dp_scheme` file: writes at offsets in `[start, end)` of the job's file get
/// placement ID `pli`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemeEntry {
    pub start: u64,
    pub end: u64,
    pub pli: u16,
}

/// How a write's placement ID is chosen (`plid_select`/`fdp_pli_select`, fio's `dp_id_select`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlidSelect {
    /// The job's IDs in turn, one write each (`roundrobin`, the default).
    RoundRobin,
    /// One of the job's IDs drawn uniformly for each write (`random`).
    Random,
    /// By the write's offset in the job's file (`scheme`, with `dp_scheme=`): the first entry
    /// whose range holds it gives its `pli`, which is what the write carries (fio does not map
    /// it through `plids`); an offset no entry holds gets 0. At most
    /// [`DP_MAX_SCHEME_ENTRIES`] entries, in the file's order.
    Scheme(Vec<SchemeEntry>),
}

/// A job's data placement (HOWTO, "dataplacement", "plids", "plid_select", "dp_scheme"). Only
/// writes carry it; see [`super::IoUnit::dspec`].
///
/// fio sends the directive only with the `io_uring_cmd` (`cmd_type=nvme`) and `xnvme` engines.
/// flashmux applies it whatever `ioengine` says, since the engine is often given on fio's
/// command line (fio's `examples/xnvme-fdp.fio` leaves it there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPlacement {
    pub kind: PlacementKind,
    /// `plids`/`fdp_pli`, sorted ascending as fio sorts them (duplicates kept). For FDP they are
    /// indices into the drive's list of placement IDs, for streams stream IDs. `None` when not
    /// given: with FDP, [`FioJob::resolve_placement`] fills in the drive's whole list.
    pub ids: Option<Vec<u16>>,
    pub select: PlidSelect,
}

/// fio's `FIO_MAX_DP_IDS`: the most placement or stream IDs a job may list, and the most of a
/// drive's placement IDs a job uses when it lists none.
pub const FIO_MAX_DP_IDS: usize = 128;
/// fio's `DP_MAX_SCHEME_ENTRIES`: the `dp_scheme` lines fio applies; it ignores the rest.
pub const DP_MAX_SCHEME_ENTRIES: usize = 32;

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
    /// `nrfiles`: the files each instance spreads its I/O over (on a filesystem). Default 1.
    pub nrfiles: u32,
    /// `file_service_type`: which file the next I/O goes to. Default round robin, one I/O each.
    pub file_service: FileService,
    /// `zonemode`: `none` (the default), `strided` or `zbd`.
    pub zone_mode: ZoneMode,
    /// `zonesize`, `zonerange` and `zoneskip` in bytes, as given (0 when not); see
    /// [`FioJob::strided_zones`] for what they come to.
    pub zone_size: u64,
    pub zone_range: u64,
    pub zone_skip: u64,
    /// The options of `zonemode=zbd`.
    pub zbd: ZbdOptions,
    /// `size`, `io_size`, `offset`, `offset_increment` and `zoneskip` given in zones.
    pub in_zones: InZones,
    /// Where `zonemode=zbd` was given (file, line), for the error when the drive is not zoned.
    pub(crate) zbd_given_at: Option<(String, usize)>,
    /// `create_on_open`: on a filesystem, a writing job's files are made when it first uses
    /// them, not laid out before it starts.
    pub create_on_open: bool,
    /// `unlink`: on a filesystem, the job's files are deleted when it ends.
    pub unlink: bool,
    /// `fallocate`: on a filesystem, a writing job's files get their blocks when laid out
    /// (`native`, the default, `posix`, `keep`, `1`), or only their size (`none`, `truncate`, `0`).
    pub fallocate: bool,
    /// `ioengine` when it is one of the file and directory operation engines; `None` for every
    /// engine that does block I/O.
    pub engine: Option<FileEngine>,
    /// Data placement directives on the job's writes (`dataplacement`/`data_placement`, `fdp`,
    /// `plids`/`fdp_pli`, `plid_select`/`fdp_pli_select`, `dp_scheme`); `None` is fio's
    /// default, `dataplacement=none`.
    pub data_placement: Option<DataPlacement>,
    /// The placement options as given, combined into `data_placement` once the section is
    /// parsed (they depend on each other and may come from a `[global]` above).
    pub(crate) placement_options: PlacementOptions,
    /// `io_size`/`io_limit`; `None` means `size`.
    pub io_size: Option<u64>,
    pub number_ios: Option<u64>,
    /// `continue_on_error`: which failed I/Os the job goes on after (fio stops at the first by
    /// default).
    pub continue_on_error: ContinueOnError,

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
    /// `fsync_on_close`: a writing job syncs each file as it closes it — when its writes are
    /// done, as `end_fsync` (fio's `put_file`; skipped, as fio's `should_fsync` skips it, when
    /// the last I/O was a sync, so with `end_fsync` too the files are synced once).
    pub fsync_on_close: bool,
    /// `direct` (and `buffered`, its opposite): O_DIRECT I/O that bypasses the page cache. fio's
    /// default is buffered (`direct=0`); a scenario without a `[kernel]` has no page cache, and
    /// runs every job as if direct.
    pub direct: bool,

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
            nrfiles: 1,
            zone_mode: ZoneMode::None,
            zone_size: 0,
            zone_range: 0,
            zone_skip: 0,
            zbd: ZbdOptions::default(),
            in_zones: InZones::default(),
            zbd_given_at: None,
            file_service: FileService::RoundRobin(1),
            create_on_open: false,
            unlink: false,
            fallocate: true,
            engine: None,
            data_placement: None,
            placement_options: PlacementOptions::default(),
            io_size: None,
            number_ios: None,
            continue_on_error: ContinueOnError::None,
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
            fsync_on_close: false,
            direct: false,
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
    /// The strided zones the job's I/O walks, if any: `zonemode=strided` with one file. fio
    /// turns strided zones off for a job with more than one open file (`fixup_options`:
    /// "Strided zone mode only really works with 1 file"; `openfiles` defaults to `nrfiles`).
    pub fn strided_zones(&self) -> Option<StridedZones> {
        (self.zone_mode == ZoneMode::Strided && self.nrfiles == 1).then(|| StridedZones {
            size: self.zone_size,
            range: if self.zone_range == 0 { self.zone_size } else { self.zone_range },
            skip: self.zone_skip,
        })
    }

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

    /// Resolves the job's placement against the drive, as fio's `dp_init` does against the
    /// device it opens: `fdp_handles` = Some(n) on an FDP drive (placement IDs 0..n, PID i =
    /// index i, one reclaim group), `max_streams` = Some(m) on a drive with the Streams
    /// directive.
    ///
    /// - FDP: the `plids` given are indices into the drive's placement ID list and must be
    ///   below n (fio's "PID index {i} must be smaller than {n}"); as PID i is index i, they are
    ///   then the PIDs the writes carry. None given is all of them, at most
    ///   [`FIO_MAX_DP_IDS`] (the first 128). A `dp_scheme` entry's `pli` goes to the drive as it
    ///   is (fio sends it unchecked); one the drive does not have is an error here.
    /// - Streams: the `plids` are stream IDs and are required (fio's "stream IDs must be
    ///   provided for dataplacement=streams"), even with `plid_select=scheme`, as in fio.
    ///   NVMe stream IDs are the host's names for streams, not indices, so they are not
    ///   checked against m (which must not be 0).
    /// - FDP on a drive without FDP, streams on a drive without streams: an error naming the
    ///   job, the option and what the drive lacks.
    ///
    /// A job without placement is left alone. Errors read as [`FioError::Job`]s do.
    pub fn resolve_placement(&mut self, fdp_handles: Option<u16>, max_streams: Option<u16>) -> Result<(), String> {
        let Some(placement) = &self.data_placement else {
            return Ok(());
        };
        let fail = |message: String| Err(self.error(message).to_string());
        let ids = match placement.kind {
            PlacementKind::Fdp => {
                let n = match fdp_handles {
                    Some(n) if n > 0 => n,
                    Some(_) => return fail("dataplacement=fdp (fdp=1): the drive's FDP configuration has no placement handles".into()),
                    None => return fail("dataplacement=fdp (fdp=1): the drive has no FDP (Flexible Data Placement)".into()),
                };
                if let Some(&i) = placement.ids.iter().flatten().find(|&&i| i >= n) {
                    return fail(format!("plids: PID index {i} must be smaller than {n}, the drive's placement IDs"));
                }
                if let PlidSelect::Scheme(entries) = &placement.select {
                    if let Some(e) = entries.iter().find(|e| e.pli >= n) {
                        return fail(format!(
                            "dp_scheme: the entry {}, {}, {} names placement ID {}; the drive's are 0 to {}",
                            e.start,
                            e.end,
                            e.pli,
                            e.pli,
                            n - 1
                        ));
                    }
                }
                let all = || (0..n).take(FIO_MAX_DP_IDS).collect();
                Some(placement.ids.clone().unwrap_or_else(all))
            }
            PlacementKind::Streams => {
                match max_streams {
                    Some(m) if m > 0 => {}
                    Some(_) => return fail("dataplacement=streams: the drive's Streams directive has no streams".into()),
                    None => return fail("dataplacement=streams: the drive has no Streams directive".into()),
                }
                if placement.ids.is_none() {
                    return fail("stream IDs must be provided for dataplacement=streams (plids=...)".into());
                }
                placement.ids.clone()
            }
        };
        if let Some(placement) = &mut self.data_placement {
            placement.ids = ids;
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


/// fio's `continue_on_error` (`ERROR_TYPE_*` in fio's io_u.h): the failed I/Os a job goes on
/// after.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContinueOnError {
    /// Stop at the first error (fio's default).
    #[default]
    None,
    Read,
    Write,
    /// Reads and writes (and trims: fio's `ERROR_TYPE_READ | ERROR_TYPE_WRITE` covers every
    /// data direction but verify).
    Io,
    /// Verification failures only: flashmux verifies nothing, so no I/O error is covered.
    Verify,
    All,
}

impl ContinueOnError {
    /// Whether a failed `op` lets the job go on.
    pub fn covers(self, op: crate::device::IoOp) -> bool {
        use crate::device::IoOp;
        match self {
            ContinueOnError::None | ContinueOnError::Verify => false,
            ContinueOnError::All => true,
            ContinueOnError::Read => op == IoOp::Read,
            ContinueOnError::Write => matches!(op, IoOp::Write | IoOp::ZoneAppend),
            ContinueOnError::Io => op != IoOp::Flush,
        }
    }
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
        // An engine given as a mode: the message says where it belongs.
        assert!(err("rw=filecreate").contains("ioengine=filecreate"));
    }

    #[test]
    fn file_operation_engines() {
        use super::FileEngine::*;
        for (name, engine) in [
            ("filecreate", FileCreate),
            ("filestat", FileStat),
            ("filedelete", FileDelete),
            ("dircreate", DirCreate),
            ("dirstat", DirStat),
            ("dirdelete", DirDelete),
        ] {
            let j = job(&format!("ioengine={name}\nfilesize=8k\nnrfiles=3"));
            assert_eq!((j.engine, j.filesize), (Some(engine), Some((8192, 8192))), "{name}");
            assert_eq!(engine.fio_name(), name);
        }
        // Another engine after one of them: block I/O again.
        assert_eq!(job("ioengine=filestat\nioengine=libaio").engine, None);
        // fio's get_file_size for the creating engines: a file is the least block size.
        assert_eq!(job("ioengine=filecreate\nbs=2k,8k").filesize, Some((2048, 2048)));
        assert_eq!(job("ioengine=dircreate\nrw=write\nbs=2k,8k").filesize, Some((8192, 8192)));
        assert_eq!(job("ioengine=filecreate\nsize=1m").filesize, None, "size sizes the files");
        // The calls' latencies go where fio's stat_ddir puts them.
        assert_eq!(job("ioengine=filestat\nfilesize=4k").engine_stat_dir(), Dir::Read);
        assert_eq!(job("ioengine=filestat\nfilesize=4k\nrw=randrw").engine_stat_dir(), Dir::Read);
        assert_eq!(job("ioengine=filecreate\nrw=write").engine_stat_dir(), Dir::Write);
        assert_eq!(job("ioengine=filecreate\nrw=trim").engine_stat_dir(), Dir::Read);
        // stat_type is the stat engines' own option.
        assert_eq!(job("ioengine=filestat\nfilesize=4k\nstat_type=statx").engine, Some(FileStat));
        assert!(err("ioengine=filestat\nfilesize=4k\nstat_type=fstat").contains("stat, lstat or statx"));
        // What fio would fail at, or what is not modelled, refused with the reason.
        assert!(err("ioengine=filestat").contains("needs filesize"));
        assert!(err("ioengine=filedelete\nfilesize=4k\ncreate_on_open=1").contains("ENOENT"));
        assert!(err("ioengine=filestat\nfilesize=4k\ncreate_on_open=1").contains("the stat fails"));
        assert!(err("ioengine=dircreate\nloops=2").contains("EEXIST"));
        assert!(err("ioengine=filedelete\nfilesize=4k\nloops=3").contains("loops=3"));
        assert!(err("ioengine=filecreate\nrw=write\nfsync=1").contains("syncs"));
        assert!(err("ioengine=filecreate\nend_fsync=1").contains("syncs"));
        // A second pass of filecreate opens what the first made: allowed.
        assert_eq!(job("ioengine=filecreate\nloops=2").loops, 2);
        // time_based: a deleting engine's second pass would fail; said, not refused.
        let f = parse("ioengine=dirdelete\nfilesize=4k\ntime_based\nruntime=1");
        assert!(f.warnings.iter().any(|w| w.message.contains("ends after its first pass")), "{:?}", f.warnings);
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
        // An offset may be 0% (fio's uring-cmd-fdp.fio example starts a job at offset=0%); a
        // size may not.
        assert_eq!((job("offset=0%").offset, job("offset_increment=00%").offset_increment), (SizeSpec::Bytes(0), SizeSpec::Bytes(0)));
        assert_eq!(job("offset=100%").offset, SizeSpec::Percent(100));
        assert!(err("offset=101%").contains("expected a size such as 4k, 64KiB or 4096, or a percentage from 0% to 100%"));
        assert!(err("size=0%").contains("a percentage from 1% to 100%"));
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
        assert_eq!((j.fsync, j.fdatasync, j.end_fsync, j.fsync_on_close), (32, 8, true, true));
        assert!(j.noted_unmodelled.is_empty());
        let d = job("rw=write");
        assert_eq!((d.fsync, d.fdatasync, d.end_fsync, d.fsync_on_close), (0, 0, false, false));
        assert!(err("fsync_on_close=2").contains("0 or 1"));
        assert!(err("fsync=-1").contains("option 'fsync'"));
        assert!(err("fdatasync=4294967296").contains("from 0 to 4294967295"));
        assert!(err("end_fsync=yes").contains("0 or 1"));
    }

    #[test]
    fn direct_and_buffered_are_opposites_and_buffered_is_the_default() {
        assert!(!job("rw=read").direct, "fio's default is buffered I/O");
        assert!(job("direct=1").direct);
        assert!(job("buffered=0").direct);
        assert!(!job("direct=1\nbuffered=1").direct, "the later option wins");
        assert!(err("direct=2").contains("0 or 1"));
    }

    #[test]
    fn fsync_on_close_over_loops_is_noted() {
        assert!(parse("fsync_on_close=1\nloops=1").warnings.is_empty());
        let file = parse("fsync_on_close=1\nloops=3");
        assert!(file.warnings[0].message.contains("between its 3 loops"), "{}", file.warnings[0].message);
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
        assert!(err("write_zone_remainder=1").contains("not supported"));
        assert!(err("bs_unaligned").contains("not supported"));
        assert!(err("size=(1+2)*1g").contains("arithmetic"));
        assert!(err("size=8*$mb_memory").contains("host-dependent"));
        let file = parse("nrfiles=3\nfile_service_type=random:2\nioengine=libaio\nlatency_target=10ms\nzonemode=none");
        assert_eq!(file.jobs[0].noted_unmodelled, vec!["ioengine"]);
        assert_eq!((file.jobs[0].nrfiles, &file.jobs[0].file_service), (3, &FileService::Random(2)));
        assert!(file.warnings[0]
            .message
            .contains("'latency_target' is not modelled"));
    }

    #[test]
    fn strided_zone_options_as_fio_reads_them() {
        // fio's disk-zone-profile.fio: zonerange defaults to zonesize (fixup_options).
        let j = job("zonemode=strided\nzonesize=256m\nzoneskip=2g");
        assert_eq!(j.zone_mode, ZoneMode::Strided);
        assert_eq!(j.strided_zones(), Some(StridedZones { size: 256 << 20, range: 256 << 20, skip: 2 << 30 }));
        assert!(j.noted_unmodelled.is_empty());
        let j = job("zonemode=strided\nzonesize=64KiB\nzonerange=1m\nkb_base=1000");
        assert_eq!(j.strided_zones(), Some(StridedZones { size: 64 * 1024, range: 1_000_000, skip: 0 }));
        // The default is none; none with no zonesize is nothing.
        assert_eq!(job("").strided_zones(), None);
        assert_eq!(job("zonemode=none").strided_zones(), None);
        // Later options win, as in fio: a job can turn its global section's zones off.
        let file = parse_job_text(
            "[global]\nzonemode=strided\nzonesize=1m\n[a]\n[b]\nzonemode=none\nzonesize=0\n",
            "t.fio",
            &|_| None,
        )
        .unwrap();
        assert!(file.jobs[0].strided_zones().is_some() && file.jobs[1].strided_zones().is_none());
        // fio turns strided zones off with several files, and flashmux says so.
        let file = parse("zonemode=strided\nzonesize=1m\nnrfiles=2");
        assert_eq!(file.jobs[0].strided_zones(), None);
        assert!(file.warnings[0].message.contains("fio turns strided zones off"), "{:?}", file.warnings);
    }

    #[test]
    fn bad_zone_options_are_clear_errors() {
        let cases = [
            ("zonemode=strided", "zonemode=strided needs a zonesize greater than 0"),
            ("zonemode=strided\nzonesize=0", "zonemode=strided needs a zonesize greater than 0"),
            ("zonesize=1m", "zonesize needs zonemode=strided (fio: zonemode=none and zonesize are not compatible)"),
            ("zonemode=stride", "option 'zonemode': invalid value 'stride': expected none, strided or zbd"),
            ("zonemode=strided\nzonesize=big", "option 'zonesize': invalid value 'big': expected a size such as 4k"),
            ("zonemode=strided\nzonesize=1m\nzonerange=-1", "option 'zonerange': invalid value '-1'"),
            (
                "zonemode=strided\nzonesize=1m\nrw=randread\nrandom_distribution=zipf:1.2",
                "zonemode=strided with a zipf, pareto or normal random_distribution is not modelled",
            ),
        ];
        for (body, want) in cases {
            let e = err(body);
            assert!(e.contains(want), "{body}: {e}");
        }
    }

    /// fio's zbd options (options.c) with their defaults: no limits, no resets, no reads past
    /// the write pointer; sizes in zones stay zones until the drive is known.
    #[test]
    fn zbd_options_as_fio_reads_them() {
        let j = job("zonemode=zbd");
        assert_eq!((j.zone_mode, j.zbd, j.in_zones), (ZoneMode::Zbd, ZbdOptions::default(), InZones::default()));
        assert_eq!(j.zbd_given_at, Some(("t.fio".into(), 2)));
        let j = job(
            "zonemode=zbd\nzonesize=256M\nzonecapacity=200M\nmax_open_zones=32\njob_max_open_zones=4\n\
             ignore_zone_limits=1\nzone_reset_threshold=0.7\nzone_reset_frequency=0.125\nread_beyond_wp=1\n\
             size=8z\noffset=524z\nio_size=16z\noffset_increment=2z\nzoneskip=1z\nioengine=io_uring_cmd\n\
             write_mode=zone_append\nrecover_zbd_write_error=1",
        );
        assert_eq!(j.zone_size, 256 << 20);
        assert_eq!(
            j.zbd,
            ZbdOptions {
                zone_capacity: 200 << 20,
                max_open_zones: 32,
                job_max_open_zones: 4,
                ignore_zone_limits: true,
                zone_reset_threshold: 0.7,
                zone_reset_frequency: 0.125,
                read_beyond_wp: true,
                zone_append: true,
            }
        );
        assert_eq!(
            j.in_zones,
            InZones { size: Some(8), io_size: Some(16), offset: Some(524), offset_increment: Some(2), zone_skip: Some(1) }
        );
        assert_eq!((j.size, j.offset, j.io_size, j.zone_skip), (None, SizeSpec::Bytes(0), None, 0));
        // A later value in bytes replaces one in zones, and 0z is 0.
        let j = job("zonemode=zbd\nsize=8z\nsize=1g\noffset=0z");
        assert_eq!((j.size, j.in_zones), (Some(SizeSpec::Bytes(1 << 30)), InZones::default()));
        // With strided zones fio counts zones of zonesize (zbd_recalc_options_with_zone_granularity).
        let j = job("zonemode=strided\nzonesize=1m\nzoneskip=2z\nsize=4z\noffset=1z");
        assert_eq!(j.strided_zones(), Some(StridedZones { size: 1 << 20, range: 1 << 20, skip: 2 << 20 }));
        assert_eq!((j.size, j.offset, j.in_zones), (Some(SizeSpec::Bytes(4 << 20)), SizeSpec::Bytes(1 << 20), InZones::default()));
        // The zbd options do nothing without zonemode=zbd, as in fio, and a warning says so.
        let file = parse("max_open_zones=8\nread_beyond_wp=1");
        assert!(file.warnings[0].message.contains("max_open_zones, read_beyond_wp only apply with zonemode=zbd"), "{:?}", file.warnings);
    }

    #[test]
    fn bad_zbd_options_are_clear_errors() {
        let cases = [
            ("zonemode=zbd\nmax_open_zones=4097", "t.fio:3: option 'max_open_zones': invalid value '4097': expected an integer from 0 to 4096"),
            ("zonemode=zbd\njob_max_open_zones=-1", "option 'job_max_open_zones': invalid value '-1'"),
            ("zonemode=zbd\nzone_reset_threshold=1.5", "option 'zone_reset_threshold': invalid value '1.5': expected a number from 0 to 1"),
            ("zonemode=zbd\nzone_reset_frequency=often", "option 'zone_reset_frequency': invalid value 'often'"),
            ("zonemode=zbd\nread_beyond_wp=2", "option 'read_beyond_wp': invalid value '2': expected 0 or 1"),
            ("zonemode=zbd\nignore_zone_limits=yes", "option 'ignore_zone_limits': invalid value 'yes'"),
            ("zonemode=zbd\nzonecapacity=big", "option 'zonecapacity': invalid value 'big'"),
            ("zonemode=zbd\nsize=8zz", "option 'size': invalid value '8zz': expected a number of zones such as 8z"),
            ("zonemode=zbd\noffset=z", "option 'offset': invalid value 'z': expected a number of zones such as 8z"),
            ("zonemode=zbd\nio_size=-1z", "option 'io_size': invalid value '-1z'"),
            ("zonemode=zbd\nzoneskip=99999999999z", "option 'zoneskip': invalid value '99999999999z'"),
            ("size=2z", "job 'j': a size in zones (z suffix) needs zonemode=zbd, or zonemode=strided with a zonesize"),
            ("zonemode=zbd\ncreate_serialize=0", "zonemode=zbd and create_serialize=0 are not compatible"),
            ("zonemode=zbd\nexperimental_verify=1", "zonemode=zbd does not support experimental_verify"),
            ("zonemode=zbd\nrw=randtrim\nbsrange=1m-2m", "bsrange and bssplit are not allowed for trim with zonemode=zbd"),
            ("zonemode=zbd\nnrfiles=2", "zonemode=zbd with nrfiles=2: only a job on the zoned drive itself is modelled"),
            ("write_mode=zone_append", "write_mode=zone_append requires zonemode=zbd"),
            ("zonemode=zbd\nwrite_mode=zeroes", "option 'write_mode' is not supported by flashmux: only writes (write) and Zone Append"),
            ("zonemode=zbd\nwrite_mode=write/50:zeroes/50", "option 'write_mode' is not supported by flashmux: a mix of write commands"),
            ("zonemode=zbd\nwrite_mode=append", "option 'write_mode': invalid value 'append': expected write, uncor, zeroes, verify or zone_append"),
            ("zonemode=zbd\nwrite_zone_remainder=1", "option 'write_zone_remainder' is not supported by flashmux"),
        ];
        for (body, want) in cases {
            let e = err(body);
            assert!(e.contains(want), "{body}: {e}");
        }
        // Accepted: write_zone_remainder=0 is fio's default, create_serialize=1 too.
        job("zonemode=zbd\nwrite_zone_remainder=0\ncreate_serialize=1");
    }

    fn placement(body: &str) -> Option<DataPlacement> {
        job(body).data_placement
    }

    fn ids(body: &str) -> Vec<u16> {
        placement(body).expect("a placement").ids.expect("plids")
    }

    #[test]
    fn data_placement_options_as_fio_reads_them() {
        let fdp = |ids: Option<Vec<u16>>, select| Some(DataPlacement { kind: PlacementKind::Fdp, ids, select });
        assert_eq!(placement(""), None, "dataplacement=none is fio's default");
        assert_eq!(placement("fdp=1"), fdp(None, PlidSelect::RoundRobin));
        // fdp=1 is dataplacement=fdp, under either name.
        assert_eq!(placement("dataplacement=fdp"), placement("fdp=1"));
        assert_eq!(placement("data_placement=fdp"), placement("fdp=1"));
        assert_eq!(placement("fdp=1\ndataplacement=fdp"), placement("fdp=1"));
        assert_eq!(placement("fdp=0"), None);
        assert_eq!(placement("dataplacement=none"), None);
        assert_eq!(
            placement("dataplacement=streams\nplids=3,7\nplid_select=random"),
            Some(DataPlacement { kind: PlacementKind::Streams, ids: Some(vec![3, 7]), select: PlidSelect::Random })
        );
        assert_eq!(placement("fdp=1\nfdp_pli_select=roundrobin\nfdp_pli=2"), fdp(Some(vec![2]), PlidSelect::RoundRobin));
        // Values and ranges, strtoull's bases, sorted as fio sorts them, duplicates kept.
        assert_eq!(ids("fdp=1\nplids=1,2-4,5"), [1, 2, 3, 4, 5]);
        assert_eq!(ids("fdp=1\nplids=0x10,0-1"), [0, 1, 16]);
        assert_eq!(ids("fdp=1\nplids=010,0X0a"), [8, 10]);
        assert_eq!(ids("fdp=1\nplids=6-8,1,3"), [1, 3, 6, 7, 8]);
        assert_eq!(ids("fdp=1\nplids=2,2"), [2, 2]);
        assert_eq!(ids("fdp=1\nplids=1 , 3 - 4"), [1, 3, 4]);
        assert_eq!(ids("fdp=1\nplids=1,2,"), [1, 2], "a trailing comma means what fio makes of it");
        assert_eq!(ids("fdp=1\nplids=65408-65535").len(), 128);
        // Listed under fio's canonical names.
        let j = job("fdp_pli=1\nfdp_pli_select=random\ndata_placement=fdp\nfdp=1");
        let names: Vec<&str> = j.job_options.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["plids", "plid_select", "dataplacement", "fdp"]);
        assert!(j.noted_unmodelled.is_empty());
        // From a [global] section.
        let file = parse_job_text("[global]\nfdp=1\nplids=4,5\n[a]\n[b]\nplids=0\n", "t.fio", &|_| None).unwrap();
        assert_eq!(file.jobs[0].data_placement, fdp(Some(vec![4, 5]), PlidSelect::RoundRobin));
        assert_eq!(file.jobs[1].data_placement, fdp(Some(vec![0]), PlidSelect::RoundRobin));
    }

    #[test]
    fn bad_placement_values_name_the_file_line_and_what_fio_expects() {
        const LIST: &str = "expected a comma-separated list of IDs or ranges such as 1,2-4,5";
        for (body, what) in [
            ("fdp=1\nplids=3-1", format!("option 'plids': invalid value '3-1': {LIST} (the range 3-1 starts after it ends)")),
            ("fdp=1\nfdp_pli=0-128", format!("option 'plids': invalid value '0-128': {LIST}: only 128 IDs supported")),
            ("fdp=1\nplids=0-65535", format!("option 'plids': invalid value '0-65535': {LIST}: only 128 IDs supported")),
            ("fdp=1\nplids=65536", format!("option 'plids': invalid value '65536': {LIST}: Placement IDs cannot exceed 0xFFFF")),
            ("fdp=1\nplids=0xffff-0x10000", format!("invalid value '0xffff-0x10000': {LIST}: Placement IDs cannot exceed 0xFFFF")),
            ("fdp=1\nplids=1,,3", format!("invalid value '1,,3': {LIST}, without empty entries (fio stops reading the list at one and would use 1 only)")),
            ("fdp=1\nplids=", format!("invalid value '': {LIST}, without empty entries (fio stops reading the list at one)")),
            ("fdp=1\nplids=x", format!("invalid value 'x': {LIST} ('x' is not a number; hex 0x.. and octal 0.. are allowed)")),
            ("fdp=1\nplids=08", format!("invalid value '08': {LIST} ('08' is not a number")),
            ("fdp=1\nplids=-3", format!("invalid value '-3': {LIST} ('-3' is not a value or a start-end range)")),
            ("fdp=1\nplids=1-2-3", format!("invalid value '1-2-3': {LIST} ('1-2-3' is not a value or a start-end range)")),
            ("fdp=1\nplid_select=sideways", "option 'plid_select': invalid value 'sideways': expected random, roundrobin or scheme".into()),
            ("fdp_pli_select=rr", "option 'plid_select': invalid value 'rr': expected random, roundrobin or scheme".into()),
            ("dataplacement=zns", "option 'dataplacement': invalid value 'zns': expected none, fdp or streams".into()),
            ("fdp=yes", "option 'fdp': invalid value 'yes': expected 0 or 1".into()),
        ] {
            // The bad option is the body's last line, after the section header.
            let e = err(body);
            assert!(e.starts_with(&format!("t.fio:{}: ", body.lines().count() + 1)), "{body}: {e}");
            assert!(e.contains(&what), "{body}:\n{e}\n{what}");
        }
        // fio's fixup_options: fdp=1 with an explicit dataplacement other than fdp, wherever given.
        for body in ["fdp=1\ndataplacement=none", "dataplacement=streams\nfdp=1\nplids=1"] {
            assert_eq!(err(body), "t.fio:1: job 'j': fdp=1 is not compatible with dataplacement={streams, none}");
        }
        let e = parse_job_text("[global]\ndataplacement=none\n[j]\nfdp=1\n", "t.fio", &|_| None).unwrap_err();
        assert!(e.to_string().contains("fdp=1 is not compatible"), "{e}");
        // fio's tests 302 and 303: scheme selection without a scheme file.
        for body in ["fdp=1\nfdp_pli=3\nfdp_pli_select=scheme", "dataplacement=fdp\nplids=3\nplid_select=scheme"] {
            assert!(err(body).contains("plid_select=scheme needs dp_scheme=<file>"), "{body}");
        }
    }

    #[test]
    fn placement_details_without_a_placement_are_said_to_do_nothing() {
        let file = parse("plids=1,2\nplid_select=random");
        assert_eq!(file.jobs[0].data_placement, None);
        assert!(file.warnings[0].message.contains("have no effect without dataplacement=fdp or streams"), "{:?}", file.warnings);
        assert!(parse("fdp=1\nplids=1").warnings.is_empty());
    }

    #[test]
    fn io_uring_cmd_and_xnvme_options() {
        let j = job("ioengine=io_uring_cmd\ncmd_type=nvme\nfixedbufs\nnonvectored=1\nforce_async=4");
        assert_eq!(j.noted_unmodelled, ["ioengine", "cmd_type", "fixedbufs", "nonvectored", "force_async"]);
        let j = job("ioengine=xnvme\nxnvme_async=io_uring_cmd\nxnvme_sync=nvme\nxnvme_dev_nsid=1\nthread=1");
        assert_eq!(j.noted_unmodelled, ["ioengine", "xnvme_async", "xnvme_sync", "xnvme_dev_nsid", "thread"]);
        assert!(err("cmd_type=bsg").contains("option 'cmd_type' is not supported by flashmux: SCSI passthrough (bsg)"));
        assert!(err("cmd_type=scsi").contains("option 'cmd_type': invalid value 'scsi': expected nvme or bsg"));
    }

    /// A scratch directory, unique per test and process.
    fn scratch_dir(test: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("flashmux-fio-job-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Parses `[j]\n{body}` as if it were `job.fio` in `dir`.
    fn parse_in(dir: &std::path::Path, body: &str) -> Result<super::super::JobFile, FioError> {
        parse_job_text(&format!("[j]\n{body}\n"), &dir.join("job.fio").display().to_string(), &|_| None)
    }

    #[test]
    fn dp_scheme_files_are_read_next_to_the_job_file() {
        let dir = scratch_dir("scheme");
        // HOWTO's example.
        std::fs::write(dir.join("lba.scheme"), "0, 10737418240, 0\n10737418240, 21474836480, 1\n21474836480, 32212254720, 2\n")
            .unwrap();
        let file = parse_in(&dir, "fdp=1\nplid_select=scheme\ndp_scheme=lba.scheme").unwrap();
        let entry = |start, end, pli| SchemeEntry { start, end, pli };
        assert_eq!(
            file.jobs[0].data_placement.as_ref().unwrap().select,
            PlidSelect::Scheme(vec![
                entry(0, 10 << 30, 0),
                entry(10 << 30, 20 << 30, 1),
                entry(20 << 30, 30 << 30, 2)
            ])
        );
        assert!(file.warnings.is_empty(), "{:?}", file.warnings);
        // fio's own test writes them so; blank lines are skipped, as fscanf skips them.
        std::fs::write(dir.join("t.scheme"), "\n0,8192,3\n\n  4096,16384,  5  \n").unwrap();
        let file = parse_in(&dir, "fdp=1\nplid_select=scheme\ndp_scheme=t.scheme").unwrap();
        assert_eq!(file.jobs[0].data_placement.as_ref().unwrap().select, PlidSelect::Scheme(vec![entry(0, 8192, 3), entry(4096, 16384, 5)]));
        // An absolute path is taken as it is.
        let abs = dir.join("t.scheme").display().to_string();
        assert!(parse_job_text(&format!("[j]\nfdp=1\nplid_select=scheme\ndp_scheme={abs}\n"), "elsewhere/x.fio", &|_| None).is_ok());
        // Only with plid_select=scheme does the scheme choose.
        let file = parse_in(&dir, "fdp=1\ndp_scheme=t.scheme").unwrap();
        assert_eq!(file.jobs[0].data_placement.as_ref().unwrap().select, PlidSelect::RoundRobin);
        assert!(file.warnings[0].message.contains("dp_scheme is only used with plid_select=scheme"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bad_dp_scheme_files_name_the_scheme_file_and_its_line() {
        let dir = scratch_dir("bad-scheme");
        let at = |name: &str| dir.join(name).display().to_string();
        let expected = "expected a scheme file of 'start, end, pli' lines";
        for (name, text, what) in [
            ("space.scheme", "0, 4096, 1\n4096 ,8192, 2\n", "space.scheme:2: '4096 ,8192, 2' is not 'start, end, pli'"),
            ("two.scheme", "0, 4096\n", "two.scheme:1: '0, 4096' is not 'start, end, pli'"),
            ("hex.scheme", "0x0, 4096, 1\n", "hex.scheme:1: '0x0, 4096, 1' is not"),
            ("comment.scheme", "# start, end, pli\n0, 4096, 1\n", "comment.scheme:1: '# start, end, pli' is not"),
            ("pli.scheme", "0, 4096, 1\n\n0, 4096, 65536\n", "pli.scheme:3: placement ID 65536 is above 65535"),
        ] {
            std::fs::write(dir.join(name), text).unwrap();
            let e = parse_in(&dir, &format!("fdp=1\nplid_select=scheme\n\ndp_scheme={name}")).unwrap_err().to_string();
            let head = format!("{}:5: option 'dp_scheme': invalid value '{name}': {expected}; {}", at("job.fio"), at(""));
            assert!(e.starts_with(&head), "{e}");
            assert!(e.contains(what), "{e}");
        }
        let e = parse_in(&dir, "dp_scheme=missing.scheme").unwrap_err().to_string();
        assert!(e.contains(&format!("{expected}; cannot read '{}': No such file or directory", at("missing.scheme"))), "{e}");
        let e = parse_in(&dir, &format!("dp_scheme={}", dir.display())).unwrap_err().to_string();
        assert!(e.contains("it is a directory, not a regular file"), "{e}");
        // More than fio's 32 entries: the first 32 are applied and the rest said to be ignored.
        let text: String = (0..40).map(|i| format!("{}, {}, {}\n", i * 4096, (i + 1) * 4096, i % 8)).collect();
        std::fs::write(dir.join("long.scheme"), text).unwrap();
        let file = parse_in(&dir, "fdp=1\nplid_select=scheme\ndp_scheme=long.scheme").unwrap();
        let PlidSelect::Scheme(entries) = &file.jobs[0].data_placement.as_ref().unwrap().select else { panic!("scheme") };
        assert_eq!((entries.len(), entries[31].start), (32, 31 * 4096));
        let w = &file.warnings[0];
        assert_eq!(w.line, 4);
        assert!(w.message.ends_with("long.scheme: 40 entries; only the first 32 are applied, as in fio (DP_MAX_SCHEME_ENTRIES), from line 33 on they are ignored"), "{}", w.message);
        // What fio reads without complaint but never matches, or has no entries, is said.
        std::fs::write(dir.join("odd.scheme"), "8192, 4096, 1\n").unwrap();
        let file = parse_in(&dir, "fdp=1\nplid_select=scheme\ndp_scheme=odd.scheme").unwrap();
        assert!(file.warnings[0].message.ends_with("odd.scheme:1: the range 8192..4096 is empty; no write matches it"));
        std::fs::write(dir.join("empty.scheme"), "\n").unwrap();
        let file = parse_in(&dir, "fdp=1\nplid_select=scheme\ndp_scheme=empty.scheme").unwrap();
        assert!(file.warnings[0].message.contains("no entries; every write gets placement ID 0"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn resolve_placement_against_the_drive() {
        let resolved = |body: &str, fdp: Option<u16>, streams: Option<u16>| {
            let mut j = job(body);
            j.resolve_placement(fdp, streams).map(|()| j.data_placement.and_then(|p| p.ids))
        };
        // FDP without plids: every placement ID of the drive, at most 128.
        assert_eq!(resolved("fdp=1", Some(8), None), Ok(Some((0..8).collect())));
        assert_eq!(resolved("fdp=1", Some(300), None), Ok(Some((0..128).collect())));
        // plids are indices, which must be below the drive's count.
        assert_eq!(resolved("fdp=1\nplids=7,0", Some(8), Some(4)), Ok(Some(vec![0, 7])));
        assert_eq!(
            resolved("fdp=1\nplids=8", Some(8), None),
            Err("t.fio:1: job 'j': plids: PID index 8 must be smaller than 8, the drive's placement IDs".into())
        );
        assert_eq!(
            resolved("dataplacement=fdp", None, Some(16)),
            Err("t.fio:1: job 'j': dataplacement=fdp (fdp=1): the drive has no FDP (Flexible Data Placement)".into())
        );
        assert!(resolved("fdp=1", Some(0), None).unwrap_err().contains("no placement handles"));
        // Streams: the IDs are required, and are stream IDs, not indices.
        assert_eq!(
            resolved("dataplacement=streams", None, Some(16)),
            Err("t.fio:1: job 'j': stream IDs must be provided for dataplacement=streams (plids=...)".into())
        );
        assert_eq!(resolved("dataplacement=streams\nplids=1,300", None, Some(16)), Ok(Some(vec![1, 300])));
        assert_eq!(
            resolved("dataplacement=streams\nplids=1", Some(8), None),
            Err("t.fio:1: job 'j': dataplacement=streams: the drive has no Streams directive".into())
        );
        // No placement: nothing to resolve, whatever the drive.
        assert_eq!(resolved("rw=write", None, None), Ok(None));
        // A scheme's placement IDs go to the drive as they are.
        let mut j = job("fdp=1");
        let scheme = |pli| PlidSelect::Scheme(vec![SchemeEntry { start: 0, end: 4096, pli }]);
        j.data_placement.as_mut().unwrap().select = scheme(7);
        assert_eq!(j.resolve_placement(Some(8), None), Ok(()));
        j.data_placement.as_mut().unwrap().select = scheme(8);
        assert_eq!(
            j.resolve_placement(Some(8), None),
            Err("t.fio:1: job 'j': dp_scheme: the entry 0, 4096, 8 names placement ID 8; the drive's are 0 to 7".into())
        );
    }

    /// fio's examples/uring-cmd-fdp.fio, as fio ships it.
    const URING_CMD_FDP: &str = include_str!("../../../tests/data/fio/uring-cmd-fdp.fio");
    /// fio's examples/xnvme-fdp.fio, as fio ships it.
    const XNVME_FDP: &str = include_str!("../../../tests/data/fio/xnvme-fdp.fio");

    #[test]
    fn fios_fdp_examples_parse() {
        let file = parse_job_text(URING_CMD_FDP, "uring-cmd-fdp.fio", &|_| None).unwrap();
        assert!(file.warnings.is_empty(), "{:?}", file.warnings);
        let got: Vec<(&str, Vec<u16>, u32)> = file
            .jobs
            .iter()
            .map(|j| {
                let p = j.data_placement.as_ref().unwrap();
                assert_eq!((p.kind, &p.select), (PlacementKind::Fdp, &PlidSelect::RoundRobin));
                (j.name.as_str(), p.ids.clone().unwrap(), j.rwmixread)
            })
            .collect();
        assert_eq!(got, [("write-heavy", vec![0, 1, 2, 3], 10), ("write-mid", vec![4, 5], 70), ("write-light", vec![6], 90)]);
        assert_eq!(file.jobs[0].noted_unmodelled, ["ioengine", "cmd_type", "filename"]);
        // "This assumes the namespace ... has at least 8 available reclaim units."
        for mut j in file.jobs.clone() {
            assert_eq!(j.resolve_placement(Some(8), None), Ok(()));
        }
        let mut light = file.jobs[2].clone();
        assert!(light.resolve_placement(Some(6), None).unwrap_err().contains("PID index 6 must be smaller than 6"));

        // The [default] section is the one to run (fio --section=default); [override] takes its
        // values from the environment, here as the file's README sets them.
        let env = |name: &str| match name {
            "FIO_BS" => Some("512".to_string()),
            "FIO_RW" => Some("read".to_string()),
            "FIO_IODEPTH" => Some("16".to_string()),
            _ => None,
        };
        let file = parse_job_text(XNVME_FDP, "xnvme-fdp.fio", &env).unwrap();
        assert!(file.warnings.is_empty(), "{:?}", file.warnings);
        let default = file.jobs.iter().find(|j| j.name == "default").unwrap();
        assert_eq!((default.rw, default.size, default.bs.write), (RwMode::RandWrite, Some(SizeSpec::Bytes(2 << 20)), 4096));
        let fdp45 = Some(DataPlacement { kind: PlacementKind::Fdp, ids: Some(vec![4, 5]), select: PlidSelect::RoundRobin });
        assert_eq!(default.data_placement, fdp45);
        assert_eq!(default.noted_unmodelled, ["thread"]);
        let over = file.jobs.iter().find(|j| j.name == "override").unwrap();
        assert_eq!((over.rw, over.iodepth, over.bs.read, &over.data_placement), (RwMode::Read, 16, 512, &fdp45));
        // Without the variables, [override] names the first it needs.
        let e = parse_job_text(XNVME_FDP, "xnvme-fdp.fio", &|_| None).unwrap_err().to_string();
        assert_eq!(e, "xnvme-fdp.fio:54: environment variable 'FIO_RW' is not set (used as ${FIO_RW})");
    }
}
