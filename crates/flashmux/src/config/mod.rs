//! Scenario files (TOML) and their validation into a typed [`Scenario`].
//!
//! Every key is checked: unknown keys are errors, values are parsed with their units, and every
//! error names the file, the line and the key (`scenario.toml:12: device.capacity: ...`; a
//! key the file does not give, whose default is at fault, has no line; TOML syntax errors keep
//! the parser's line and column). Text a program wrote ([`Scenario::from_generated_toml`]) has
//! no lines worth naming.

pub mod limits;
mod presets;
mod schema;
mod trace;

pub use presets::{default_gc_threshold, preset, DeviceKind, Preset, PRESET_NAMES};
pub use trace::{LbaFit, PlaceTarget, TraceSpec, TraceTiming, DEFAULT_MAX_OUTSTANDING, MAX_TIME_SCALE, MIN_TIME_SCALE};

use crate::device::precondition::PreconditionSpec;
use crate::device::NvmeConfig;
use crate::host::HostConfig;
use crate::units::Nanos;
use crate::virt::VirtConfig;
use crate::workload::fio::{FioError, FioJob};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// A bad scenario: always the user's to fix, never a bug.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `line`: where in the file the key the message starts with is, if the file gives it.
    #[error("{file}{}: {message}", line.map_or(String::new(), |l| format!(":{l}")))]
    Invalid { file: String, line: Option<usize>, message: String },
    #[error(transparent)]
    Fio(#[from] FioError),
    /// The scenario file cannot be read. Only regular files of at most
    /// [`crate::fsutil::MAX_INPUT_FILE_BYTES`] are read.
    #[error("cannot read {path}: {error}")]
    Io { path: String, error: crate::fsutil::ReadError },
}

/// The device: a preset's configuration with the scenario's overrides applied.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    /// The preset it started from.
    pub preset: String,
    pub kind: DeviceKind,
    pub nvme: NvmeConfig,
}

impl DeviceSpec {
    /// Bytes of logical space the device exports.
    pub fn capacity_bytes(&self) -> u64 {
        match &self.kind {
            DeviceKind::Ssd(c) => c.logical_units() * c.geometry.unit_bytes as u64,
            DeviceKind::Null(n) => n.capacity_bytes,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StopSpec {
    /// Stop at this simulated time.
    pub time: Option<Nanos>,
    /// Stop after this many completed requests.
    pub requests: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OutputSpec {
    pub dir: PathBuf,
    pub timeline_interval: Nanos,
}

/// One tenant: its address space on the device and its jobs.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantSpec {
    pub name: String,
    /// (offset, length) in bytes of the device's logical space.
    pub region: (u64, u64),
    /// Proportional-share weight (cgroup `blkio.weight` style, 1..=1000): what fairness is
    /// measured against and what the `cfq`/`mcfq` schedulers divide device time by.
    pub weight: u32,
    pub workload: Workload,
    /// Jobs of one job file form a domain: fio's stonewall/new_group order them within it.
    pub domain: usize,
    /// Its writes' default data placement directive (an FDP placement identifier or a stream
    /// identifier; `[[tenant]] placement`, or the drive's `per_tenant`); `None`: none.
    pub placement: Option<u16>,
}

impl TenantSpec {
    /// Its jobs, as fio's outputs report them: a trace's or an export's one job.
    pub fn jobs(&self) -> &[FioJob] {
        self.workload.jobs()
    }

    /// Whether it is an NBD export (no workload of its own).
    pub fn is_export(&self) -> bool {
        matches!(self.workload, Workload::Export { .. })
    }
}

/// What a tenant runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// fio jobs (inline, from a job file or a personality) generate its I/O. None: the tenant is
    /// idle (as in the baseline run of another tenant alone).
    Fio(Vec<FioJob>),
    /// A trace, replayed by one job; `job` is that job as fio's outputs report it (its name, the
    /// trace's file, the replay's depth and the options given).
    Trace { spec: TraceSpec, job: FioJob },
    /// No workload: an NBD export under `flashmux serve`, whose one job (`job`, reported with
    /// `ioengine=nbd`) issues the requests of the export's clients. `flashmux run` rejects it.
    Export { job: FioJob },
    /// A Filebench workload on the tenant's filesystem (`[kernel] filesystem = "ext4"`): a job
    /// per thread definition of its processes (`numjobs`: the instances), each instance one
    /// thread making its flowops' system calls one at a time.
    Filebench { spec: Box<FilebenchSpec>, jobs: Vec<FioJob> },
}

/// A tenant's Filebench workload: where it came from and what it is, its variables set.
#[derive(Clone, Debug, PartialEq)]
pub struct FilebenchSpec {
    /// The file, or `<personality NAME>` for a bundled one.
    pub source: String,
    pub workload: crate::workload::filebench::Workload,
}

impl FilebenchSpec {
    /// Its jobs: one per thread definition, in the runner's thread order.
    pub fn jobs(&self) -> Vec<FioJob> {
        let w = &self.workload;
        let runtime = match w.run {
            Some(crate::workload::filebench::Run::Run { seconds: Some(s) })
            | Some(crate::workload::filebench::Run::Psrun { seconds: s, .. }) => Some(s * 1_000_000_000),
            _ => None,
        };
        let mut jobs = Vec::new();
        for p in &w.processes {
            for t in &p.threads {
                jobs.push(FioJob {
                    name: format!("{}.{}", p.name, t.name),
                    file: self.source.clone(),
                    line: t.line,
                    iodepth: 1,
                    numjobs: (p.instances * t.instances) as u32,
                    runtime,
                    time_based: true,
                    direct: false,
                    job_options: vec![
                        ("filebench".into(), self.source.clone()),
                        ("process".into(), p.name.clone()),
                        ("thread".into(), t.name.clone()),
                    ],
                    ..FioJob::default()
                });
            }
        }
        jobs
    }
}

impl Workload {
    /// Its jobs, as fio's outputs report them.
    pub fn jobs(&self) -> &[FioJob] {
        match self {
            Workload::Fio(jobs) => jobs,
            Workload::Trace { job, .. } | Workload::Export { job } => std::slice::from_ref(job),
            Workload::Filebench { jobs, .. } => jobs,
        }
    }
}

/// A fully resolved, validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    pub device: DeviceSpec,
    pub precondition: PreconditionSpec,
    pub host: HostConfig,
    pub virt: VirtConfig,
    /// A kernel above the block layer, with a page cache for buffered jobs (`[kernel]`).
    pub kernel: Option<crate::kernel::KernelConfig>,
    pub stop: StopSpec,
    pub output: OutputSpec,
    pub tenants: Vec<TenantSpec>,
    /// Problems worth a warning (unknown fio options, ...).
    pub warnings: Vec<String>,
    /// fio options accepted but not modelled, once each.
    pub notes: Vec<String>,
    /// `[global]` options of the job files (fio's `"global options"`), first occurrence of each.
    pub global_options: Vec<(String, String)>,
    /// `[precondition] state_file`: a drive saved by `flashmux age --save` to start from instead
    /// of aging one (`device::drive_state`). Not part of [`Scenario::config_hash`]: it gives the
    /// same drive, only sooner.
    pub drive_state: Option<PathBuf>,
}

pub const DEFAULT_SEED: u64 = 1;
/// A tenant's weight when the scenario gives none: Linux's default `blkio.weight`
/// (`CFQ_WEIGHT_DEFAULT`).
pub const DEFAULT_WEIGHT: u32 = 500;
/// The largest weight a tenant may have, as cgroup v1's `blkio.weight`.
pub const MAX_WEIGHT: u32 = 1000;
pub const DEFAULT_OUTPUT_DIR: &str = "flashmux-out";

/// The built-in scenario `flashmux run` runs with no arguments: a sequential writer and a random
/// writer, each on its own half of an aged paper-C drive.
pub const DEFAULT_SCENARIO: &str = include_str!("default_scenario.toml");

impl Scenario {
    /// Loads a scenario file; relative job-file paths are relative to the file's directory.
    pub fn load(path: &Path) -> Result<Scenario, ConfigError> {
        Self::load_with(path, Self::from_toml)
    }

    /// Reads a scenario file and resolves it with `parse` (text, file name, base directory).
    fn load_with(path: &Path, parse: fn(&str, &str, &Path) -> Result<Scenario, ConfigError>) -> Result<Scenario, ConfigError> {
        let text = crate::fsutil::read_text(path, crate::fsutil::MAX_INPUT_FILE_BYTES, "scenario file")
            .map_err(|error| ConfigError::Io { path: path.display().to_string(), error })?;
        let base = path.parent().unwrap_or(Path::new("."));
        parse(&text, &path.display().to_string(), base)
    }

    /// Parses scenario text; `file` names it in errors, `base` resolves relative job-file paths.
    /// Every tenant must have a workload.
    pub fn from_toml(text: &str, file: &str, base: &Path) -> Result<Scenario, ConfigError> {
        Self::for_run(text, file, base, true)
    }

    /// [`Scenario::from_toml`] for text a program wrote (an experiment's point, a replay's
    /// scenario): its errors name the keys but no lines, which would be the generated text's.
    /// `label` names it in errors.
    pub fn from_generated_toml(text: &str, label: &str, base: &Path) -> Result<Scenario, ConfigError> {
        Self::for_run(text, label, base, false)
    }

    fn for_run(text: &str, file: &str, base: &Path, located: bool) -> Result<Scenario, ConfigError> {
        let s = schema::resolve(text, file, base, located)?.within_limits(file)?;
        match s.tenants.iter().enumerate().find(|(_, t)| t.is_export()) {
            Some((i, t)) => Err(schema::located(
                if located { text } else { "" },
                file,
                format!(
                    "tenant[{i}] ({}): no workload: give fio = \"...\", job_file = \"...\", personality = \"...\" or trace = \"...\" (a tenant without one is an NBD export, for `flashmux serve`)",
                    t.name
                ),
            )),
            None => Ok(s),
        }
    }

    /// A scenario for `flashmux serve`: tenants without a workload are its NBD exports (at least
    /// one is needed); tenants with one run it in real time beside them.
    pub fn load_for_serve(path: &Path) -> Result<Scenario, ConfigError> {
        Self::load_with(path, Self::serve_from_toml)
    }

    /// [`Scenario::load_for_serve`] from text.
    pub fn serve_from_toml(text: &str, file: &str, base: &Path) -> Result<Scenario, ConfigError> {
        let s = schema::resolve(text, file, base, true)?.within_limits(file)?;
        if !s.tenants.iter().any(|t| t.is_export()) {
            return Err(ConfigError::Invalid {
                file: file.to_string(),
                line: None,
                message: "no tenant to export: a tenant without fio, job_file, personality or trace is an NBD export (e.g. [[tenant]] name = \"vm1\" region = { offset = \"0\", size = \"8GiB\" })".into(),
            });
        }
        Ok(s)
    }

    /// The built-in default scenario.
    pub fn default_scenario() -> Scenario {
        Self::from_toml(DEFAULT_SCENARIO, "<built-in default scenario>", Path::new("."))
            .expect("the built-in scenario is valid (tested)")
    }

    /// A scenario from a fio job file run as is: one tenant per job section, all sharing the
    /// whole device (as fio's jobs share one device), groups ordered by stonewall/new_group.
    pub fn from_fio_file(path: &Path, device_preset: &str) -> Result<Scenario, ConfigError> {
        let jf = crate::workload::fio::parse_job_file(path)?;
        let file = path.display().to_string();
        schema::from_fio_jobs(jf, &file, device_preset)?.within_limits(&file)
    }

    /// The scenario if it is within [`limits`] (with their warnings added), else the error.
    fn within_limits(mut self, file: &str) -> Result<Scenario, ConfigError> {
        let warnings = limits::check(&self, file)?;
        self.warnings.extend(warnings);
        Ok(self)
    }

    /// The same scenario with only tenant `tenant`'s jobs issuing I/O: the baseline its slowdown
    /// is measured against. Every tenant keeps its region, so the drive is preconditioned exactly
    /// as for the shared run, and the seed and the tenant's job streams are the same. `None` if
    /// there is no such tenant.
    pub fn alone(&self, tenant: usize) -> Option<Scenario> {
        let name = &self.tenants.get(tenant)?.name;
        let mut s = self.clone();
        s.name = format!("{} (alone: {name})", self.name);
        for (i, t) in s.tenants.iter_mut().enumerate() {
            if i != tenant {
                t.workload = Workload::Fio(Vec::new());
            }
        }
        Some(s)
    }

    /// Checks every part's rules (each config type's `validate`) and the rules between parts.
    /// The loader checks each where it reads the key (so its errors have lines);
    /// [`crate::sim::Simulator::new`] calls this, so a scenario built or changed in code meets
    /// the rules a file must. The error starts with the key it is about.
    pub fn validate(&self) -> Result<(), String> {
        match &self.device.kind {
            DeviceKind::Ssd(c) => c.validate()?,
            DeviceKind::Null(n) => n.validate()?,
        }
        self.device.nvme.arbitration.validate(self.device.nvme.queues)?;
        check_host_ftl(&self.host, &self.device)?;
        self.host.validate()?;
        self.virt.validate()?;
        if let Some(k) = &self.kernel {
            k.validate()?;
            if self.virt.mode.is_vm() && !k.per_tenant {
                return Err("kernel.per_tenant: false: each VM has its own kernel (virt.mode is a VM mode)".into());
            }
            self.check_requests_fit(k)?;
        }
        if self.virt.mode.is_vm() && self.host.cpu.is_none() {
            return Err(format!("virt.mode: a VM ({}) runs on host threads: it needs host.cpu", self.virt.mode));
        }
        self.precondition.validate()?;
        if self.stop.time == Some(Nanos::ZERO) {
            return Err("stop.time: must be longer than zero".into());
        }
        if self.stop.requests == Some(0) {
            return Err("stop.requests: must be at least 1 (got 0)".into());
        }
        if self.output.timeline_interval == Nanos::ZERO {
            return Err("output.timeline_interval: must be longer than zero".into());
        }
        if self.tenants.is_empty() {
            return Err("no tenants: a scenario needs at least one".into());
        }
        let capacity = self.device.capacity_bytes();
        for (i, t) in self.tenants.iter().enumerate() {
            if !(1..=MAX_WEIGHT).contains(&t.weight) {
                return Err(invalid_weight(&format!("tenant[{i}] ({})", t.name), t.weight));
            }
            let (off, len) = t.region;
            if len == 0 || off % 512 != 0 || len % 512 != 0 || off.checked_add(len).is_none_or(|end| end > capacity) {
                return Err(format!(
                    "tenant[{i}] ({}).region: {off}+{len} bytes: expected a non-zero multiple of 512 bytes within the device's {capacity} bytes",
                    t.name
                ));
            }
            if let Workload::Trace { spec, .. } = &t.workload {
                let resolved = match spec.place_by {
                    crate::workload::trace::TenantBy::None => spec.place.is_none(),
                    _ => spec.place.is_some() && spec.place == PlaceTarget::of(self.device.kind.placement()),
                };
                if !resolved {
                    return Err(format!(
                        "tenant[{i}] ({}).trace.place_by: \"{}\": expected a drive with FDP or Streams, the trace's values resolved against it",
                        t.name,
                        spec.place_by.name()
                    ));
                }
            }
        }
        Ok(())
    }

    /// What determines the drive a run's preconditioning leaves, part by part (name, value or
    /// SHA-256): a saved drive fits a scenario when every part agrees. The seed draws the aging
    /// writes; the device, the tenants' regions and (for `workload` aging) their workloads say
    /// what is written where; the version, because the model's aging may change between them.
    pub fn drive_key(&self) -> Vec<(&'static str, String)> {
        let hash = |v: &serde_json::Value| -> String {
            Sha256::digest(v.to_string().as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
        };
        let device = serde_json::json!({
            "preset": self.device.preset,
            "kind": match &self.device.kind {
                DeviceKind::Ssd(c) => serde_json::to_value(c),
                DeviceKind::Null(n) => serde_json::to_value(n),
            }.expect("device configs serialize"),
        });
        let regions: Vec<(u64, u64)> = self.tenants.iter().map(|t| t.region).collect();
        let workloads = if self.precondition.state == crate::device::precondition::PreconditionState::Workload {
            hash(&serde_json::json!(self
                .tenants
                .iter()
                .map(|t| serde_json::json!({
                    "name": t.name,
                    "jobs": t.jobs().iter().map(|j| j.all_options().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>()).collect::<Vec<_>>(),
                    "workload": format!("{:?}", std::mem::discriminant(&t.workload)),
                    "trace": match &t.workload { Workload::Trace { .. } => format!("{:?}", t.workload), _ => String::new() },
                }))
                .collect::<Vec<_>>()))
        } else {
            "not used".into()
        };
        let mut key = vec![
            ("flashmux version", crate::VERSION.to_string()),
            ("seed", self.seed.to_string()),
            ("device", hash(&device)),
            ("precondition", format!("{} fill {}", self.precondition.state.name(), self.precondition.fill)),
            ("tenants", self.tenants.len().to_string()),
            ("regions", hash(&serde_json::json!(regions))),
            ("workloads", workloads),
        ];
        // The tenants' data is aged through their placements (listed only when one has one, so
        // drives saved before placement existed keep their key).
        if self.tenants.iter().any(|t| t.placement.is_some()) {
            let placements: Vec<String> =
                self.tenants.iter().map(|t| t.placement.map_or("none".into(), |p| p.to_string())).collect();
            key.push(("placements", placements.join(",")));
        }
        key
    }

    /// SHA-256 (hex) of [`Scenario::drive_key`]: scenarios with the same id precondition the
    /// same drive (a sweep ages it once for all of them).
    pub fn drive_id(&self) -> String {
        let mut h = Sha256::new();
        for (k, v) in self.drive_key() {
            h.update(k.as_bytes());
            h.update([0]);
            h.update(v.as_bytes());
            h.update([0]);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// SHA-256 (hex) of everything that determines the run's results.
    pub fn config_hash(&self) -> String {
        let view = serde_json::json!({
            "seed": self.seed,
            "device": {
                "preset": self.device.preset,
                "kind": match &self.device.kind {
                    DeviceKind::Ssd(c) => serde_json::to_value(c),
                    DeviceKind::Null(n) => serde_json::to_value(n),
                }.expect("device configs serialize"),
                "nvme": serde_json::to_value(&self.device.nvme).expect("serializes"),
            },
            "precondition": serde_json::to_value(&self.precondition).expect("serializes"),
            "host": serde_json::to_value(&self.host).expect("serializes"),
            // Bare metal hashes as its mode alone, as before VM modes existed.
            "virt": (if self.virt.mode.is_vm() {
                serde_json::to_value(&self.virt)
            } else {
                serde_json::to_value(self.virt.mode)
            })
            .expect("serializes"),
            "stop": serde_json::to_value(&self.stop).expect("serializes"),
            "timeline_interval_ns": self.output.timeline_interval.0,
            "tenants": self.tenants.iter().map(|t| {
                let mut v = serde_json::json!({
                    "name": t.name,
                    "region": [t.region.0, t.region.1],
                    "domain": t.domain,
                    "jobs": t.jobs().iter().map(|j| serde_json::json!({
                        "name": j.name,
                        "options": j.all_options().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                });
                // The default weight hashes as absent, as before weights existed.
                if t.weight != DEFAULT_WEIGHT {
                    v["weight"] = t.weight.into();
                }
                if let Some(p) = t.placement {
                    v["placement"] = p.into();
                }
                v
            }).collect::<Vec<_>>(),
        });
        // A scenario without a kernel hashes as before kernels existed.
        let mut view = view;
        if let Some(k) = &self.kernel {
            view["kernel"] = serde_json::to_value(k).expect("serializes");
        }
        let mut h = Sha256::new();
        h.update(view.to_string().as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl Scenario {
    /// A buffered job's largest request must fit in its kernel's page cache (with a page either
    /// side for an unaligned one).
    fn check_requests_fit(&self, k: &crate::kernel::KernelConfig) -> Result<(), String> {
        let capacity = k.pagecache.capacity_pages * crate::kernel::PAGE_SIZE;
        for t in &self.tenants {
            let Workload::Fio(jobs) = &t.workload else { continue };
            for j in jobs.iter().filter(|j| !j.direct) {
                let largest = j.max_block_size();
                if largest + 2 * crate::kernel::PAGE_SIZE > capacity {
                    return Err(format!(
                        "kernel.pagecache.capacity: {capacity} bytes cannot hold the largest request ({largest} bytes) \
                         of tenant {}'s buffered job '{}' (with a page either side): expected a larger cache, or direct=1",
                        t.name, j.name
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The error for tenant `key`'s weight `v` (`key`: `tenant[i] (name)`).
fn invalid_weight(key: &str, v: impl std::fmt::Display) -> String {
    format!("{key}.weight: {v} is not a valid weight: expected a whole number from 1 to {MAX_WEIGHT} (default {DEFAULT_WEIGHT})")
}

/// The budget schedulers price requests by what they see of GC: only an open-channel drive (its
/// FTL is pblk, on the host) and an FDP drive (its statistics log page) show them any.
fn check_host_ftl(host: &HostConfig, device: &DeviceSpec) -> Result<(), String> {
    let open_channel = matches!(&device.kind, DeviceKind::Ssd(c) if c.open_channel);
    let fdp = device.kind.placement().fdp_handles().is_some();
    if host.scheduler.needs_host_ftl() && !open_channel && !fdp {
        return Err(format!(
            "host.scheduler: '{}' needs a drive that shows the host its garbage collection: an open-channel drive (device.mode = \"open-channel\", or preset \"cosmos\"), whose FTL runs on the host, or an FDP drive ([device.fdp], or preset \"tlc-nvme-fdp\"), whose statistics log page reports the media bytes it erases; it prices requests by whether GC ran, and this drive keeps that to itself",
            host.scheduler.name()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
