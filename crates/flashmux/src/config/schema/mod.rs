//! The TOML schema (serde, unknown keys rejected) and its resolution into a [`Scenario`]: this
//! file holds the scenario file's top level, `[stop]` and `[output]`; each other section has its
//! own file (device.rs, host.rs, virt.rs, tenants.rs).

use super::presets::{default_gc_threshold, gc_contribution_fit, preset, DeviceKind, PRESET_NAMES};
use super::{
    ConfigError, DeviceSpec, OutputSpec, Scenario, StopSpec, TenantSpec, Workload, DEFAULT_OUTPUT_DIR, DEFAULT_SEED,
    DEFAULT_WEIGHT, MAX_WEIGHT,
};
use crate::device::precondition::{PreconditionSpec, PreconditionState};
use crate::device::FlushPolicy;
use crate::device::{Arbitration, NullConfig, NvmeConfig, PlacementMode, Priority, SsdConfig, ZnsLayout, DEFAULT_WRR_WEIGHTS, MAX_OVERPROVISIONING};
use crate::flash::Geometry;
use crate::ftl::{CmtConfig, CmtPolicyKind, Ftl, FtlError, MappingConfig, MappingKind, VictimPolicy};
use crate::host::{BudgetParams, CfqParams, DeadlineParams, HostConfig, MergeConfig, MotsParams, SchedulerKind};
use crate::units::{parse_duration, parse_size, Nanos};
use crate::virt::{Aio, Completion, CpuConfig, Emulation, ExitReason, Notify, VirtConfig, VirtMode};
use crate::workload::fio::{parse_job_text, read_job_file, FioJob, JobFile};
use crate::workload::personality;
use serde::Deserialize;
use std::path::Path;

mod device;
mod host;
mod kernel;
mod locate;
mod tenants;
mod value;
mod virt;

use locate::Lines;
use value::{or, Duration, Rate, Size};

use device::*;
use host::*;
use kernel::*;
use tenants::*;
use virt::*;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: Option<String>,
    seed: Option<u64>,
    #[serde(default)]
    device: DeviceSection,
    #[serde(default)]
    precondition: PreconditionSection,
    #[serde(default)]
    host: HostSection,
    #[serde(default)]
    virt: VirtSection,
    kernel: Option<KernelSection>,
    #[serde(default)]
    stop: StopSection,
    #[serde(default)]
    output: OutputSection,
    #[serde(default, rename = "tenant")]
    tenants: Vec<TenantSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StopSection {
    time: Option<Duration>,
    requests: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct OutputSection {
    dir: Option<String>,
    timeline_interval: Option<Duration>,
}

/// Defaults that are not part of a device preset.
pub const DEFAULT_HOST_QUEUE_DEPTH: u32 = 1024;

pub const DEFAULT_SUBMIT_OVERHEAD: Nanos = Nanos(1_500);

pub const DEFAULT_COMPLETION_OVERHEAD: Nanos = Nanos(1_500);

pub const DEFAULT_TIMELINE_INTERVAL: Nanos = Nanos::from_secs(1);

pub const DEFAULT_PRESET: &str = "tlc-nvme";

/// An export's job depth: no bound of the model's own. Its clients decide how much is in flight
/// (an NBD client's queue depth is its own), and the host queue depth bounds the device.
pub const EXPORT_DEPTH: u32 = 1 << 16;

struct Ctx<'a> {
    file: &'a str,
    lines: Lines<'a>,
}

impl Ctx<'_> {
    /// The error `message`, which starts with the key it is about: with that key's line when
    /// the file gives the key.
    fn err(&self, message: impl Into<String>) -> ConfigError {
        let message: String = message.into();
        let line = self.lines.of_key(&message);
        self.err_at(line, message)
    }

    fn err_at(&self, line: Option<usize>, message: String) -> ConfigError {
        // Values quoted in the message may hold control characters (TOML's "\u0000"): escaped,
        // line by line (the TOML parser's messages span lines).
        let message = message.split('\n').map(crate::units::shown).collect::<Vec<_>>().join("\n");
        ConfigError::Invalid { file: self.file.to_string(), line, message }
    }

    /// A value serde rejected: a syntax error keeps the TOML parser's message (its line, column
    /// and the line's text); a value of the wrong type or form is named by its key path and line.
    fn rejected(&self, e: serde_path_to_error::Error<toml::de::Error>) -> ConfigError {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            return self.err_at(None, inner.to_string().trim_end().to_string());
        }
        let line = inner.span().and_then(|s| self.lines.line_at(s.start)).or_else(|| self.lines.of_key(&path));
        self.err_at(line, format!("{path}: {}", inner.message().trim_end()))
    }
    fn size(&self, key: &str, v: &str) -> Result<u64, ConfigError> {
        parse_size(v).map_err(|e| self.err(format!("{key}: {e}")))
    }
    fn duration(&self, key: &str, v: &str) -> Result<Nanos, ConfigError> {
        parse_duration(v).map_err(|e| self.err(format!("{key}: {e}")))
    }
    fn positive<T: PartialOrd + Default + Copy + std::fmt::Display>(&self, key: &str, v: T) -> Result<T, ConfigError> {
        if v > T::default() {
            Ok(v)
        } else {
            Err(self.err(format!("{key}: must be at least 1 (got {v})")))
        }
    }
}

/// An error about the key `message` starts with, in scenario text `text` from `file`.
pub(super) fn located(text: &str, file: &str, message: String) -> ConfigError {
    Ctx { file, lines: Lines::new(text) }.err(message)
}

/// Resolves scenario text. `located`: errors name the lines of `text` (not for generated text,
/// whose lines are nobody's).
pub(super) fn resolve(text: &str, file: &str, base: &Path, located: bool) -> Result<Scenario, ConfigError> {
    let ctx = Ctx { file, lines: if located { Lines::new(text) } else { Lines::none() } };
    let f: ScenarioFile = serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| ctx.rejected(e))?;
    let device = resolve_device(&ctx, &f.device)?;
    let precondition = resolve_precondition(&ctx, &f.precondition)?;
    let mut host = resolve_host(&ctx, &f.host, &device.preset)?;
    // A host FTL on the zoned drive: the tenants' space is the one it exports.
    let exported = match (&mut host.zoned_ftl, &device.kind) {
        (None, _) => device.capacity_bytes(),
        (Some(p), DeviceKind::Ssd(c)) if c.zns.is_some() => {
            let z = c.zns.expect("checked");
            if p.tenant_logs > 0 {
                p.tenant_logs = f.tenants.len().max(1) as u32;
            }
            let given = f.host.zoned_ftl.as_ref().and_then(|s| s.spare_zones).is_some();
            if !given {
                p.spare_zones = crate::host::zoned_ftl::HostZonedConfig::default_spare(z.zones, p.gc_threshold_zones, p.tenant_logs);
            }
            let cfg = crate::host::zoned_ftl::HostZonedConfig::of(&z, c.geometry.unit_bytes as u64, *p);
            cfg.validate().map_err(|e| ctx.err(format!("host.zoned_ftl: {e}")))?
        }
        (Some(_), _) => {
            return Err(ctx.err("host.zoned_ftl: a host FTL writes a zoned drive's zones: use a zoned drive ([device.zns], or preset \"tlc-nvme-zns\")"))
        }
    };
    super::check_host_ftl(&host, &device).map_err(|e| ctx.err(e))?;
    let virt = resolve_virt(&ctx, &f.virt)?;
    // The kernel's block device's tags: the VM's virtio disk's, else the host's — none under pblk,
    // a bio-based driver (an open-channel drive's host FTL).
    let open_channel = matches!(&device.kind, crate::device::DeviceKind::Ssd(c) if c.open_channel);
    let tags = if virt.mode.is_vm() {
        Some(virt.queue_size)
    } else {
        (!open_channel).then_some(host.queue_depth)
    };
    let kernel =
        f.kernel.as_ref().map(|k| resolve_kernel(&ctx, k, host.merge.max_bytes, virt.mode.is_vm(), tags)).transpose()?;
    if virt.mode.is_vm() && host.cpu.is_none() {
        // A VM runs on host threads: the CPU model is on, with paper A's host by default.
        host.cpu = Some(CpuConfig::default());
    }
    let stop = StopSpec {
        time: f.stop.time.as_ref().map(|t| t.0),
        requests: f.stop.requests.map(|r| ctx.positive("stop.requests", r)).transpose()?,
    };
    if stop.time == Some(Nanos::ZERO) {
        return Err(ctx.err("stop.time: must be longer than zero"));
    }
    let output = OutputSpec {
        dir: f.output.dir.clone().unwrap_or_else(|| DEFAULT_OUTPUT_DIR.into()).into(),
        timeline_interval: match &f.output.timeline_interval {
            None => DEFAULT_TIMELINE_INTERVAL,
            Some(v) => match v.0 {
                Nanos::ZERO => return Err(ctx.err("output.timeline_interval: must be longer than zero")),
                d => d,
            },
        },
    };
    let mut collected = Collected::default();
    let zoned = matches!(&device.kind, DeviceKind::Ssd(c) if c.zns.is_some());
    if zoned && precondition.state != PreconditionState::Clean {
        return Err(ctx.err("precondition.state: a zoned drive starts with every zone empty; preconditioning writes through a conventional FTL, which it does not have: use state = \"clean\""));
    }
    if zoned && f.precondition.state_file.is_some() {
        return Err(ctx.err("precondition.state_file: drive state files hold a conventional drive's FTL; a zoned drive starts with every zone empty"));
    }
    if matches!(device.kind, DeviceKind::Null(_)) && precondition.state != PreconditionState::Clean {
        collected.warnings.push(format!(
            "{file}: precondition.state has no effect on the null device (it has no flash to age)"
        ));
    }
    let ext4 = kernel.as_ref().is_some_and(|k| k.filesystem == crate::kernel::kernels::Filesystem::Ext4);
    let placement = (device.kind.placement(), per_tenant_placement(&f.device));
    let tenants = resolve_tenants(&ctx, &f.tenants, base, exported, ext4, &mut collected, placement)?;
    if zoned && host.zoned_ftl.is_none() {
        if kernel.is_some() {
            return Err(ctx.err("kernel: the guest kernel's page cache and filesystem write a conventional block device; on a zoned drive they would need a zoned filesystem (zonefs, f2fs, btrfs), which is not modelled: remove [kernel], or use a conventional preset"));
        }
        if let Some(t) = tenants.iter().find(|t| matches!(t.workload, Workload::Export { .. })) {
            return Err(ctx.err(format!(
                "tenant '{}': an NBD export (flashmux serve) on a zoned drive: NBD has no zone commands, so its clients cannot write the zones; use a conventional preset",
                t.name
            )));
        }
    }
    if kernel.is_none() {
        note_buffered_jobs(&tenants, &mut collected);
    }
    if ext4 {
        // A buffered job's files are made on the filesystem, named and placed by these; a direct
        // job's I/O goes to the raw region under it, where they mean nothing.
        let direct_uses = |key: &str| {
            tenants.iter().any(|t| {
                matches!(&t.workload, Workload::Fio(jobs)
                    if jobs.iter().any(|j| j.direct && j.all_options().any(|(k, _)| k == key)))
            })
        };
        let modelled: Vec<&str> = ["filename", "directory"].into_iter().filter(|k| !direct_uses(k)).collect();
        collected.notes.retain(|n| !modelled.contains(&n.as_str()));
    }
    if virt.mode.is_vm() {
        // virtio-blk carries no placement directive: only the hypervisor's (a tenant's) applies.
        let placed = tenants.iter().find_map(|t| t.jobs().iter().find(|j| j.data_placement.is_some()).map(|j| (t, j)));
        if let Some((t, j)) = placed {
            return Err(ctx.err(format!(
                "tenant '{}': job '{}' places its writes (dataplacement), but in a VM they reach the drive through virtio-blk, which carries no placement directive: give the tenant a placement ([[tenant]] placement or the drive's per_tenant) instead",
                t.name, j.name
            )));
        }
        let placed = tenants.iter().find(|t| matches!(&t.workload, Workload::Trace { spec, .. } if spec.place.is_some()));
        if let Some(t) = placed {
            return Err(ctx.err(format!(
                "tenant '{}': its trace places its writes (trace.place_by), but in a VM they reach the drive through virtio-blk, which carries no placement directive: give the tenant a placement ([[tenant]] placement or the drive's per_tenant) instead",
                t.name
            )));
        }
    }
    if let Some(cpu) = &host.cpu {
        check_threads(&ctx, cpu, &virt, tenants.len(), &mut collected)?;
    }
    let mut device = device;
    finish_arbitration(&ctx, &f.device.interface, &f.tenants, &mut device.nvme, host.cpu.is_some())?;
    if let DeviceKind::Ssd(c) = &mut device.kind {
        finish_mapping(&ctx, &f.device.ftl, c, tenants.len())?;
    }
    let s = Scenario {
        name: f.name.unwrap_or_else(|| Path::new(file).file_stem().map_or("scenario".into(), |s| s.to_string_lossy().into())),
        seed: f.seed.unwrap_or(DEFAULT_SEED),
        device,
        precondition,
        host,
        virt,
        kernel,
        stop,
        output,
        tenants,
        warnings: collected.warnings,
        notes: collected.notes,
        global_options: collected.globals,
        drive_state: match &f.precondition.state_file {
            Some(p) if p.trim().is_empty() => {
                return Err(ctx.err("precondition.state_file: empty: give the file `flashmux age --save` wrote"))
            }
            Some(p) => Some(base.join(p)),
            None => None,
        },
    };
    // Every rule was checked above, where its key was read; this is the boundary's assertion
    // that the scenario meets the rules `Simulator::new` will check again.
    s.validate().map_err(|e| ctx.err(e))?;
    Ok(s)
}

/// Gathers what every job file contributes beyond its jobs: warnings, notes of unmodelled
/// options, and `[global]` options.
#[derive(Default)]
struct Collected {
    warnings: Vec<String>,
    notes: Vec<String>,
    globals: Vec<(String, String)>,
}

fn collect_diagnostics(jf: &JobFile, c: &mut Collected) {
    let (warnings, notes) = (&mut c.warnings, &mut c.notes);
    for (k, v) in &jf.global_options {
        if !c.globals.iter().any(|(gk, _)| gk == k) {
            c.globals.push((k.clone(), v.clone()));
        }
    }
    warnings.extend(jf.warnings.iter().map(|w| w.to_string()));
    for j in &jf.jobs {
        for opt in &j.noted_unmodelled {
            if !notes.contains(opt) {
                notes.push(opt.clone());
            }
        }
    }
}

/// Buffered jobs (`direct=0`, fio's default) run as direct ones without a `[kernel]`: noted once.
fn note_buffered_jobs(tenants: &[TenantSpec], c: &mut Collected) {
    const NOTE: &str = "direct=0 (buffered I/O: without a [kernel] section there is no page cache, so as direct=1)";
    let buffered = tenants.iter().any(|t| matches!(&t.workload, Workload::Fio(jobs) if jobs.iter().any(|j| !j.direct)));
    if buffered && !c.notes.iter().any(|n| n == NOTE) {
        c.notes.push(NOTE.to_string());
    }
}

/// A scenario from a fio job file run as fio would: one tenant per job section, all on the
/// whole device, one group domain, the device's defaults for everything else.
pub(super) fn from_fio_jobs(jf: JobFile, file: &str, device_preset: &str) -> Result<Scenario, ConfigError> {
    let ctx = Ctx { file, lines: Lines::none() };
    let device = resolve_device(&ctx, &DeviceSection { preset: Some(device_preset.to_string()), ..Default::default() })?;
    let capacity = device.capacity_bytes();
    if jf.jobs.is_empty() {
        return Err(ctx.err("the job file has no job sections"));
    }
    let mut collected = Collected::default();
    collect_diagnostics(&jf, &mut collected);
    let host = resolve_host(&ctx, &HostSection::default(), device_preset)?;
    let stem = Path::new(file).file_stem().map_or("fio".into(), |s| s.to_string_lossy().into_owned());
    let mut tenants: Vec<TenantSpec> = Vec::new();
    let mut kernel = None;
    let mut jobs = jf.jobs;
    let mode = device.kind.placement();
    for j in &mut jobs {
        j.resolve_placement(mode.fdp_handles(), mode.max_streams()).map_err(|e| ctx.err(e))?;
    }
    if jobs.iter().any(|j| j.engine.is_some()) {
        // fio's file operation engines make, stat and delete files in the directory fio runs
        // in: the jobs share one filesystem on the device, as one tenant.
        let section = KernelSection { filesystem: Some(crate::kernel::kernels::Filesystem::Ext4), ..Default::default() };
        kernel = Some(resolve_kernel(&ctx, &section, host.merge.max_bytes, false, Some(host.queue_depth))?);
        tenants.push(TenantSpec {
            name: stem.clone(),
            region: (0, capacity),
            weight: DEFAULT_WEIGHT,
            workload: Workload::Fio(std::mem::take(&mut jobs)),
            domain: 0,
            placement: None,
        });
    }
    for job in jobs {
        // Job names may repeat in fio files; tenants need unique names.
        let mut name = job.name.clone();
        let mut k = 1;
        while tenants.iter().any(|t| t.name == name) {
            k += 1;
            name = format!("{}#{k}", job.name);
        }
        tenants.push(TenantSpec {
            name,
            region: (0, capacity),
            weight: DEFAULT_WEIGHT,
            workload: Workload::Fio(vec![job]),
            domain: 0,
            placement: None,
        });
    }
    if kernel.is_none() {
        note_buffered_jobs(&tenants, &mut collected);
    }
    Ok(Scenario {
        name: stem,
        seed: DEFAULT_SEED,
        device,
        precondition: PreconditionSpec { state: PreconditionState::Clean, fill: 1.0 },
        host,
        virt: VirtConfig::default(),
        kernel,
        stop: StopSpec { time: None, requests: None },
        output: OutputSpec { dir: DEFAULT_OUTPUT_DIR.into(), timeline_interval: DEFAULT_TIMELINE_INTERVAL },
        tenants,
        warnings: collected.warnings,
        notes: collected.notes,
        global_options: collected.globals,
        drive_state: None,
    })
}
