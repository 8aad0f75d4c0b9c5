//! fio job files: a parser for fio's ini-style job format and a generator that turns one parsed job
//! into the stream of I/Os fio would issue for it.
//!
//! The parser follows fio's HOWTO ("Job file format", "Environment variables", "Parameter types",
//! and the per-option sections) and, where the HOWTO is silent, fio's own parser (`init.c`,
//! `parse.c`, `options.c`). The generator is a port of fio's offset, block-size and direction logic
//! (`io_u.c`, `backend.c`, `lib/zipf.c`, `lib/gauss.c`); the few places where it knowingly differs
//! are documented where they happen.
//!
//! Time is not modelled here: a [`JobGen`] only knows volume. The caller enforces `runtime`,
//! `time_based`, `ramp_time`, rates and think times (all available on [`FioJob`]) by deciding when
//! to call [`JobGen::next`], and issues the syncs of `fsync`, `fdatasync` and `end_fsync`.

mod dist;
mod gen;
mod job;
mod parse;
mod units;

use std::fmt;

use crate::units::shown;
use std::ops::{Index, IndexMut};

pub use gen::{IoUnit, JobGen, ZbdDevice, ZoneOp, ZonedDisk};
pub use job::{
    groups, phases, AbsZone, BsSplit, DataPlacement, FileEngine, FileService, FioJob, PlacementKind, PlidSelect,
    RandomDistribution, RateProcess, RwMode, RwModifier, RwSequencer, SchemeEntry, SizeSpec, StridedZones, ThinktimeBlocksType, Zone, ContinueOnError,
    ZoneMode, ZbdOptions, InZones, ZBD_MAX_WRITE_ZONES,
    DP_MAX_SCHEME_ENTRIES, FIO_MAX_DP_IDS,
};
pub use parse::{parse_job_file, parse_job_text, read_job_file, JobFile, MAX_JOBS};

/// Direction of one I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    Read,
    Write,
    Trim,
}

impl Dir {
    /// All directions, in fio's order (reads, writes, trims), which is also the order of the
    /// comma-separated per-direction values (`bs=4k,16k,8k`).
    pub const ALL: [Dir; 3] = [Dir::Read, Dir::Write, Dir::Trim];

    /// Position of the direction in [`Dir::ALL`].
    pub const fn index(self) -> usize {
        match self {
            Dir::Read => 0,
            Dir::Write => 1,
            Dir::Trim => 2,
        }
    }
}

/// One value per direction, for the options fio takes as `read[,write[,trim]]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PerDir<T> {
    pub read: T,
    pub write: T,
    pub trim: T,
}

impl<T: Clone> PerDir<T> {
    /// The same value for all three directions.
    pub fn splat(value: T) -> Self {
        PerDir {
            read: value.clone(),
            write: value.clone(),
            trim: value,
        }
    }
}

impl<T> Index<Dir> for PerDir<T> {
    type Output = T;
    fn index(&self, dir: Dir) -> &T {
        match dir {
            Dir::Read => &self.read,
            Dir::Write => &self.write,
            Dir::Trim => &self.trim,
        }
    }
}

impl<T> IndexMut<Dir> for PerDir<T> {
    fn index_mut(&mut self, dir: Dir) -> &mut T {
        match dir {
            Dir::Read => &mut self.read,
            Dir::Write => &mut self.write,
            Dir::Trim => &mut self.trim,
        }
    }
}

/// One diagnostic tied to a place in a job file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// A bad value, a malformed job file, or a job that cannot run in the space given to it.
#[derive(Debug, thiserror::Error)]
pub enum FioError {
    /// An option's value does not parse or is out of range.
    #[error("{file}:{line}: option '{}': invalid value '{}': expected {expected}", shown(.option), shown(.value))]
    InvalidValue {
        file: String,
        line: usize,
        option: String,
        value: String,
        expected: String,
    },
    /// A well-formed number that does not fit in 64 bits once its unit is applied (`value` is
    /// the part of the option's value that overflows).
    #[error("{file}:{line}: option '{}': '{}' is too large: the largest is {largest}", shown(.option), shown(.value))]
    TooLarge {
        file: String,
        line: usize,
        option: String,
        value: String,
        largest: &'static str,
    },
    /// The file's structure is wrong (option outside a section, bad section header, bad include).
    #[error("{file}:{line}: {message}")]
    Syntax {
        file: String,
        line: usize,
        message: String,
    },
    /// `${NAME}` names a variable the environment does not define.
    #[error("{file}:{line}: environment variable '{0}' is not set (used as ${{{0}}})", shown(.name))]
    MissingEnvVar {
        file: String,
        line: usize,
        name: String,
    },
    /// A valid fio option or value that would change the I/O stream in a way flashmux does not
    /// model; refusing it is better than silently generating a different workload.
    #[error("{file}:{line}: option '{}' is not supported by flashmux: {reason}", shown(.option))]
    Unsupported {
        file: String,
        line: usize,
        option: String,
        reason: String,
    },
    /// The job file cannot be read (an included one is a [`FioError::Syntax`] at its `include`
    /// line). Only regular files of at most [`crate::fsutil::MAX_INPUT_FILE_BYTES`] are read.
    #[error("cannot read job file '{path}': {error}")]
    Io {
        path: String,
        error: crate::fsutil::ReadError,
    },
    /// The job is well formed but cannot run in the address space it was given.
    #[error("{file}:{line}: job '{job}': {message}")]
    Job {
        file: String,
        line: usize,
        job: String,
        message: String,
    },
}
