//! The typed workload: filesets, processes → threads → flowops, the run, the variables, every
//! number resolved. Plain data; [`Workload::check_invariants`] states what validation guarantees.

use std::collections::BTreeMap;

use serde::Serialize;

/// Highest file descriptor a flowop may name: Filebench's `THREADFLOW_MAXFD` (`threadflow.h`);
/// descriptors run from 1 to it.
pub const MAX_FD: u32 = 128;

/// A variable's value as `set $name = value` gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Value {
    /// An integer or a size (`16k` is 16,384).
    Int(u64),
    Bool(bool),
    Str(String),
}

/// A parsed and validated WML file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workload {
    /// Filesets and files (`define file` is a fileset of one entry), in file order.
    pub filesets: Vec<Fileset>,
    /// Processes in file order.
    pub processes: Vec<Process>,
    /// The `run`/`psrun` command, if the file has one.
    pub run: Option<Run>,
    /// `set mode quit ...`: when a run ends (Filebench's default: at its time limit).
    pub quit_mode: QuitMode,
    /// Every variable with its last assigned value, by name (without the `$`).
    pub variables: BTreeMap<String, Value>,
}

/// `define fileset` or `define file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fileset {
    pub name: String,
    /// Line of its `define`.
    pub line: usize,
    pub kind: FilesetKind,
    /// Directory it lives under (`path=`).
    pub path: String,
    /// Number of files (`entries=`; 1 for a `define file`).
    pub entries: u64,
    /// Mean number of entries per directory (`dirwidth=`; 10 for a `define file`, as Filebench).
    pub dirwidth: u64,
    /// Mean file size in bytes (`size=` or `filesize=`; 0 if absent).
    pub mean_size: u64,
    /// Gamma shape of the file-size distribution × 1,000 (`filesizegamma=`; 1,500 for a
    /// fileset, 0 = every file exactly `mean_size` for a `define file`).
    pub size_gamma: u64,
    /// Gamma shape of the directory-depth distribution × 1,000 (`dirgamma=`; 1,500, 0 for a file).
    pub dir_gamma: u64,
    /// Percentage of the files created before the run (`prealloc` alone is 100, absent 0).
    pub prealloc_percent: u64,
    /// Keep existing files from an earlier run (`reuse`).
    pub reuse: bool,
    /// Preallocate with several threads (`paralloc`).
    pub paralloc: bool,
    /// No flowop may write to it (`readonly`).
    pub readonly: bool,
    /// No flowop may read it (`writeonly`).
    pub writeonly: bool,
    /// Trust that an existing tree matches without checking it (`trusttree`).
    pub trusttree: bool,
    /// Leave the files in the page cache after creating them (`cached`, Filebench 1.4); without
    /// it Filebench drops them from the cache before the run.
    pub cached: bool,
}

/// Whether a fileset was defined as a set or as one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FilesetKind {
    Fileset,
    File,
}

/// `define process name=..., instances=N { thread ... }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Process {
    pub name: String,
    pub line: usize,
    /// Copies of the process (default 1).
    pub instances: u64,
    /// `nice=`, kept for reports; the model has no CPU priorities.
    pub nice: Option<u64>,
    pub threads: Vec<Thread>,
}

/// `thread name=..., memsize=..., useism, instances=N { flowop ... }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Thread {
    pub name: String,
    pub line: usize,
    /// Copies of the thread in each process instance (default 1).
    pub instances: u64,
    /// The thread's I/O buffer in bytes (`memsize=`), if given.
    pub memsize: Option<u64>,
    /// Share the buffer between the process's threads (`useism`).
    pub useism: bool,
    /// `ioprio=`, kept for reports.
    pub ioprio: Option<u64>,
    /// The loop the thread runs, in order.
    pub flowops: Vec<Flowop>,
}

/// One flowop of a thread's loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flowop {
    pub kind: FlowopKind,
    pub name: String,
    pub line: usize,
    pub attrs: FlowopAttrs,
}

/// A flowop's attributes, typed, with Filebench's defaults (`parser_flowop_get_attrs`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct FlowopAttrs {
    /// `filesetname=` or `filename=`: the fileset it picks files from.
    pub fileset: Option<String>,
    /// `fd=`: the thread's file descriptor (1..=[`MAX_FD`]) it uses; absent, the thread's default
    /// descriptor (Filebench's descriptor 0, `flowoplib_fdnum`).
    pub fd: Option<u32>,
    /// `srcfd=`: the descriptor a `writewholefile` takes its size from.
    pub srcfd: Option<u32>,
    /// `iosize=` in bytes (for whole-file flowops, absent means the whole file in one call).
    pub iosize: Option<u64>,
    /// `iters=`: times the flowop repeats each time the loop reaches it (default 1).
    pub iters: u64,
    /// `workingset=` in bytes: the part of the file random offsets fall in (absent: all of it).
    pub workingset: Option<u64>,
    /// `value=`: the count, byte count, delay (seconds) or CPU loop count, by flowop.
    pub value: Option<u64>,
    /// `target=`: the flowop a `sempost` or `wakeup` acts on.
    pub target: Option<String>,
    /// `indexed=`: a fixed file index in the fileset instead of a free file.
    pub indexed: Option<u64>,
    /// `highwater=` of a `semblock`.
    pub highwater: Option<u64>,
    pub random: bool,
    pub dsync: bool,
    pub directio: bool,
    pub blocking: bool,
    /// `opennext`: open the next file of the fileset each time.
    pub opennext: bool,
    pub noreadahead: bool,
}

crate::named! {
    /// A flowop type, by its WML name.
    #[derive(PartialOrd, Ord, Hash)]
    pub enum FlowopKind: "flowop" {
        CreateFile = "createfile",
        OpenFile = "openfile",
        CloseFile = "closefile",
        DeleteFile = "deletefile",
        StatFile = "statfile",
        ReadWholeFile = "readwholefile",
        WriteWholeFile = "writewholefile",
        AppendFile = "appendfile",
        AppendFileRand = "appendfilerand",
        Read = "read",
        Write = "write",
        Fsync = "fsync",
        FsyncSet = "fsyncset",
        OpsLimit = "opslimit",
        IopsLimit = "iopslimit",
        BwLimit = "bwlimit",
        EventLimit = "eventlimit",
        FinishOnCount = "finishoncount",
        FinishOnBytes = "finishonbytes",
        Delay = "delay",
        Hog = "hog",
        SemBlock = "semblock",
        SemPost = "sempost",
        Block = "block",
        Wakeup = "wakeup",
    }
}

/// What the file-system model can do with a flowop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Support {
    /// The model runs it.
    Modelled,
    /// Filebench returns at once from it in a run without an event generator (`eventgen`, which
    /// this reader does not take), so running it as nothing is exact.
    NoEffect,
    /// Parsed and typed, but the model does not run it: a runner refuses it with the reason.
    Unmodelled(&'static str),
}

impl FlowopKind {
    pub fn support(self) -> Support {
        use FlowopKind::*;
        match self {
            OpsLimit | IopsLimit | BwLimit | EventLimit => Support::NoEffect,
            Hog => Support::Unmodelled("CPU work (hog) is not modelled"),
            SemBlock | SemPost | Block | Wakeup => {
                Support::Unmodelled("synchronisation between threads is not modelled")
            }
            _ => Support::Modelled,
        }
    }

    /// Flowops that fail in Filebench without an I/O size (`flowoplib_iobufsetup`: "zero iosize").
    pub fn needs_iosize(self) -> bool {
        use FlowopKind::*;
        matches!(self, Read | Write | AppendFile | AppendFileRand)
    }

    /// Flowops that pick a file and so need `filesetname` (an fd alone names no fileset).
    pub fn needs_fileset(self) -> bool {
        use FlowopKind::*;
        matches!(self, CreateFile | OpenFile | FsyncSet)
    }

    /// Flowops that act on another flowop (`target=`).
    pub fn needs_target(self) -> bool {
        matches!(self, FlowopKind::SemPost | FlowopKind::Wakeup)
    }
}

/// Flowops Filebench has that this reader refuses, with why.
pub(super) const REFUSED_FLOWOPS: &[(&str, &str)] = &[
    ("aiowrite", "asynchronous I/O is not modelled"),
    ("aiowait", "asynchronous I/O is not modelled"),
    ("makedir", "directory flowops need leafdirs filesets, which are not supported"),
    ("removedir", "directory flowops need leafdirs filesets, which are not supported"),
    ("listdir", "directory flowops need leafdirs filesets, which are not supported"),
    ("testrandvar", "random variables are not supported"),
    ("print", "print flowops are not supported"),
];

/// `run N` or `psrun`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Run {
    /// `run [N]`: run for N seconds (`None`: until the quit mode ends it).
    Run { seconds: Option<u64> },
    /// `psrun [interval [N]]`: run printing statistics every `interval` (negative: ms).
    Psrun { interval: i64, seconds: u64 },
}

crate::named! {
    /// `set mode quit ...`.
    #[derive(Default)]
    pub enum QuitMode: "quit mode" {
        /// The run lasts its time.
        #[default]
        Timeout = "timeout",
        /// The run ends when every thread has finished (`finishoncount`, ...).
        AllDone = "alldone",
        /// The run ends when the first thread finishes.
        FirstDone = "firstdone",
    }
}

impl Workload {
    /// The fileset named `name`.
    pub fn fileset(&self, name: &str) -> Option<&Fileset> {
        self.filesets.iter().find(|f| f.name == name)
    }

    /// Every flowop of every thread, in file order.
    pub fn flowops(&self) -> impl Iterator<Item = &Flowop> {
        self.processes.iter().flat_map(|p| &p.threads).flat_map(|t| &t.flowops)
    }

    /// What validation guarantees; panics naming the first broken rule.
    pub fn check_invariants(&self) {
        for (i, f) in self.filesets.iter().enumerate() {
            assert!(self.filesets[..i].iter().all(|g| g.name != f.name), "fileset {} twice", f.name);
            assert!(f.entries >= 1 && f.dirwidth >= 1 && f.prealloc_percent <= 100, "fileset {}", f.name);
            assert!(f.kind == FilesetKind::Fileset || f.entries == 1, "file {} with several entries", f.name);
        }
        for (i, p) in self.processes.iter().enumerate() {
            assert!(self.processes[..i].iter().all(|q| q.name != p.name), "process {} twice", p.name);
            assert!(p.instances >= 1 && !p.threads.is_empty(), "process {}", p.name);
            for (j, t) in p.threads.iter().enumerate() {
                assert!(p.threads[..j].iter().all(|u| u.name != t.name), "thread {} twice", t.name);
                assert!(t.instances >= 1 && !t.flowops.is_empty(), "thread {}", t.name);
                for (k, op) in t.flowops.iter().enumerate() {
                    assert!(t.flowops[..k].iter().all(|o| o.name != op.name), "flowop {} twice", op.name);
                    self.check_flowop(op);
                }
            }
        }
    }

    fn check_flowop(&self, op: &Flowop) {
        let a = &op.attrs;
        assert!(a.fileset.as_deref().is_none_or(|f| self.fileset(f).is_some()), "flowop {}", op.name);
        assert!([a.fd, a.srcfd].iter().flatten().all(|&fd| (1..=MAX_FD).contains(&fd)), "flowop {}", op.name);
        assert!(a.iosize != Some(0) && a.iters >= 1, "flowop {}", op.name);
        assert!(!op.kind.needs_iosize() || a.iosize.is_some(), "flowop {} without iosize", op.name);
        assert!(!op.kind.needs_fileset() || a.fileset.is_some(), "flowop {} without fileset", op.name);
        if let Some(target) = &a.target {
            assert!(self.flowops().any(|o| &o.name == target), "flowop {}: target {}", op.name, target);
        }
        assert!(!op.kind.needs_target() || a.target.is_some(), "flowop {} without target", op.name);
    }
}
