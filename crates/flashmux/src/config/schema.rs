//! The TOML schema (serde, unknown keys rejected) and its resolution into a [`Scenario`].

use super::presets::{default_gc_threshold, gc_contribution_fit, preset, DeviceKind, PRESET_NAMES};
use super::{
    ConfigError, DeviceSpec, OutputSpec, Scenario, StopSpec, TenantSpec, Workload, DEFAULT_OUTPUT_DIR, DEFAULT_SEED,
    DEFAULT_WEIGHT, MAX_WEIGHT,
};
use crate::device::precondition::{PreconditionSpec, PreconditionState};
use crate::device::FlushPolicy;
use crate::device::SsdConfig;
use crate::flash::Geometry;
use crate::ftl::{CmtConfig, CmtPolicyKind, Ftl, FtlError, MappingConfig, VictimPolicy};
use crate::host::{BudgetParams, CfqParams, HostConfig, MotsParams, SchedulerKind};
use crate::units::{parse_duration, parse_rate, parse_size, Nanos};
use crate::virt::{Aio, Completion, CpuConfig, Emulation, ExitReason, Notify, VirtConfig, VirtMode};
use crate::workload::fio::{parse_job_text, read_job_file, FioJob, JobFile};
use crate::workload::personality;
use serde::Deserialize;
use std::path::Path;

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
    #[serde(default)]
    stop: StopSection,
    #[serde(default)]
    output: OutputSection,
    #[serde(default, rename = "tenant")]
    tenants: Vec<TenantSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DeviceSection {
    preset: Option<String>,
    /// `ssd` (the drive runs its FTL) or `open-channel` (the FTL runs on the host, as pblk).
    mode: Option<String>,
    capacity: Option<String>,
    #[serde(default)]
    geometry: GeometrySection,
    #[serde(default)]
    timing: TimingSection,
    #[serde(default)]
    ftl: FtlSection,
    #[serde(default)]
    buffer: BufferSection,
    #[serde(default)]
    interface: InterfaceSection,
    #[serde(default)]
    null: NullSection,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct GeometrySection {
    channels: Option<u32>,
    chips_per_channel: Option<u32>,
    dies_per_chip: Option<u32>,
    planes_per_die: Option<u32>,
    blocks_per_plane: Option<u32>,
    pages_per_block: Option<u32>,
    page_size: Option<String>,
    unit_size: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TimingSection {
    read: Option<String>,
    program: Option<String>,
    erase: Option<String>,
    channel_rate: Option<String>,
    command: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FtlSection {
    overprovisioning: Option<f64>,
    mapping: Option<String>,
    gc_victim: Option<String>,
    gc_threshold_blocks: Option<u32>,
    /// DFTL: bytes per L2P entry in a translation page.
    entry_size: Option<u32>,
    cmt: Option<CmtSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CmtSection {
    /// Bytes ("256KiB") or a percentage of the whole translation table ("1%").
    size: Option<String>,
    /// The same in translation pages.
    pages: Option<u32>,
    policy: Option<String>,
    /// Percent per tenant, summing to 100.
    shares: Option<Vec<f64>>,
    period: Option<String>,
    step: Option<u32>,
    floor: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct BufferSection {
    size: Option<String>,
    program_queue_depth: Option<u32>,
    flush: Option<String>,
    high_watermark: Option<f64>,
    low_watermark: Option<f64>,
    volatile_write_cache: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct InterfaceSection {
    queues: Option<u16>,
    queue_depth: Option<u32>,
    controller_cores: Option<u32>,
    command_overhead: Option<String>,
    link_rate: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NullSection {
    latency: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PreconditionSection {
    state: Option<String>,
    fill: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HostSection {
    queue_depth: Option<u32>,
    scheduler: Option<String>,
    submit_overhead: Option<String>,
    completion_overhead: Option<String>,
    cpu: Option<CpuSection>,
    cfq: Option<CfqSection>,
    mcfq: Option<McfqSection>,
    fair: Option<FairSection>,
    hwabc: Option<HwabcSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HwabcSection {
    period: Option<String>,
    window: Option<u32>,
    windows: Option<u32>,
    /// Smoothing of the update-write run lengths.
    alpha: Option<f64>,
    /// `G = a·ln(R) + b`.
    a: Option<f64>,
    b: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FairSection {
    /// Budget refill period.
    period: Option<String>,
    /// Completed requests per regression window.
    window: Option<u32>,
    /// Windows in each least-squares fit.
    windows: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CfqSection {
    slice_sync: Option<String>,
    slice_idle: Option<String>,
    target_latency: Option<String>,
    quantum: Option<u32>,
    fifo_expire_write: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct McfqSection {
    interval: Option<String>,
    window: Option<String>,
    min_scale: Option<f64>,
    max_scale: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CpuSection {
    cores: Option<u32>,
    threads_per_core: Option<u32>,
    quantum: Option<String>,
    context_switch: Option<String>,
    wakeup: Option<String>,
    spin: Option<String>,
    syscall: Option<String>,
    app: Option<String>,
    smt_slowdown: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct VirtSection {
    mode: Option<String>,
    vcpus: Option<u32>,
    notify: Option<String>,
    emulation: Option<String>,
    completion: Option<String>,
    queue_size: Option<u32>,
    max_merge: Option<String>,
    batch_window: Option<String>,
    pin_vcpus: Option<bool>,
    pin_iothreads: Option<bool>,
    vq_add: Option<String>,
    vq_pop: Option<String>,
    request_cost: Option<String>,
    vq_push: Option<String>,
    userspace_switch: Option<String>,
    aio: Option<String>,
    poll_detect: Option<String>,
    ide_submit_exits: Option<u32>,
    ide_complete_exits: Option<u32>,
    exits: Option<ExitsSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ExitsSection {
    io_inst: Option<ExitCostSection>,
    ext_int: Option<ExitCostSection>,
    msr_write: Option<ExitCostSection>,
    hlt: Option<ExitCostSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ExitCostSection {
    direct: Option<String>,
    indirect: Option<String>,
    sync: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StopSection {
    time: Option<String>,
    requests: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct OutputSection {
    dir: Option<String>,
    timeline_interval: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantSection {
    name: Option<String>,
    region: Option<RegionValue>,
    /// An integer, but read as any TOML value so that 0, negative and fractional weights get a
    /// clear error rather than a type mismatch.
    weight: Option<toml::Value>,
    fio: Option<String>,
    job_file: Option<String>,
    /// A built-in workload (`workload::personality`) by name.
    personality: Option<String>,
    /// A block trace (`config/trace.rs`).
    trace: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RegionValue {
    Named(String),
    Range { offset: String, size: String },
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
/// Partitions made by `region = "auto"` start on this boundary, as partitioning tools align them.
const AUTO_REGION_ALIGN: u64 = 1 << 20;

struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn err(&self, message: impl Into<String>) -> ConfigError {
        // Values quoted in the message may hold control characters (TOML's "\u0000"): escaped,
        // line by line (the TOML parser's messages span lines).
        let message: String = message.into();
        let message = message.split('\n').map(crate::units::shown).collect::<Vec<_>>().join("\n");
        ConfigError::Invalid { file: self.file.to_string(), message }
    }
    fn size(&self, key: &str, v: &str) -> Result<u64, ConfigError> {
        parse_size(v).map_err(|e| self.err(format!("{key}: {e}")))
    }
    fn duration(&self, key: &str, v: &str) -> Result<Nanos, ConfigError> {
        parse_duration(v).map_err(|e| self.err(format!("{key}: {e}")))
    }
    fn rate(&self, key: &str, v: &str) -> Result<u64, ConfigError> {
        parse_rate(v).map_err(|e| self.err(format!("{key}: {e}")))
    }
    fn positive<T: PartialOrd + Default + Copy + std::fmt::Display>(&self, key: &str, v: T) -> Result<T, ConfigError> {
        if v > T::default() {
            Ok(v)
        } else {
            Err(self.err(format!("{key}: must be at least 1 (got {v})")))
        }
    }
}

pub(super) fn resolve(text: &str, file: &str, base: &Path) -> Result<Scenario, ConfigError> {
    let ctx = Ctx { file };
    let f: ScenarioFile = toml::from_str(text).map_err(|e| ctx.err(e.to_string().trim_end().to_string()))?;
    let device = resolve_device(&ctx, &f.device)?;
    let precondition = resolve_precondition(&ctx, &f.precondition)?;
    let mut host = resolve_host(&ctx, &f.host, &device.preset)?;
    let open_channel = matches!(&device.kind, DeviceKind::Ssd(c) if c.open_channel);
    if host.scheduler.needs_host_ftl() && !open_channel {
        return Err(ctx.err(format!(
            "host.scheduler: '{}' needs an open-channel drive (device.mode = \"open-channel\", or preset \"cosmos\"): it throttles where the host FTL takes requests (pblk's ring write buffer) and prices them from what that FTL sees; a drive that runs its own FTL shows the host neither",
            host.scheduler.name()
        )));
    }
    let virt = resolve_virt(&ctx, &f.virt)?;
    if virt.mode.is_vm() && host.cpu.is_none() {
        // A VM runs on host threads: the CPU model is on, with paper A's host by default.
        host.cpu = Some(CpuConfig::default());
    }
    let stop = StopSpec {
        time: f.stop.time.as_deref().map(|t| ctx.duration("stop.time", t)).transpose()?,
        requests: f.stop.requests.map(|r| ctx.positive("stop.requests", r)).transpose()?,
    };
    if stop.time == Some(Nanos::ZERO) {
        return Err(ctx.err("stop.time: must be longer than zero"));
    }
    let output = OutputSpec {
        dir: f.output.dir.clone().unwrap_or_else(|| DEFAULT_OUTPUT_DIR.into()).into(),
        timeline_interval: match &f.output.timeline_interval {
            None => DEFAULT_TIMELINE_INTERVAL,
            Some(v) => match ctx.duration("output.timeline_interval", v)? {
                Nanos::ZERO => return Err(ctx.err("output.timeline_interval: must be longer than zero")),
                d => d,
            },
        },
    };
    let mut collected = Collected::default();
    if matches!(device.kind, DeviceKind::Null(_)) && precondition.state != PreconditionState::Clean {
        collected.warnings.push(format!(
            "{file}: precondition.state has no effect on the null device (it has no flash to age)"
        ));
    }
    let tenants = resolve_tenants(&ctx, &f.tenants, base, device.capacity_bytes(), &mut collected)?;
    if let Some(cpu) = &host.cpu {
        check_threads(&ctx, cpu, &virt, tenants.len(), &mut collected)?;
    }
    let mut device = device;
    if let DeviceKind::Ssd(c) = &mut device.kind {
        finish_mapping(&ctx, &f.device.ftl, c, tenants.len())?;
    }
    Ok(Scenario {
        name: f.name.unwrap_or_else(|| Path::new(file).file_stem().map_or("scenario".into(), |s| s.to_string_lossy().into())),
        seed: f.seed.unwrap_or(DEFAULT_SEED),
        device,
        precondition,
        host,
        virt,
        stop,
        output,
        tenants,
        warnings: collected.warnings,
        notes: collected.notes,
        global_options: collected.globals,
    })
}

fn resolve_device(ctx: &Ctx, d: &DeviceSection) -> Result<DeviceSpec, ConfigError> {
    let name = d.preset.as_deref().unwrap_or(DEFAULT_PRESET);
    let p = preset(name).ok_or_else(|| {
        ctx.err(format!("device.preset: unknown preset '{name}': expected one of {}", PRESET_NAMES.join(", ")))
    })?;
    let mut nvme = p.nvme;
    let i = &d.interface;
    if let Some(q) = i.queues {
        nvme.queues = ctx.positive("device.interface.queues", q)?;
    }
    if let Some(q) = i.queue_depth {
        nvme.queue_depth = ctx.positive("device.interface.queue_depth", q)?;
    }
    if let Some(c) = i.controller_cores {
        nvme.controller_cores = ctx.positive("device.interface.controller_cores", c)?;
    }
    if let Some(o) = &i.command_overhead {
        nvme.command_overhead = ctx.duration("device.interface.command_overhead", o)?;
    }
    let kind = match p.kind {
        DeviceKind::Null(mut n) => {
            reject_ssd_keys(ctx, d, name)?;
            if d.mode.as_deref().is_some_and(|m| m != "ssd") {
                return Err(ctx.err(format!(
                    "device.mode: preset '{name}' has no flash, so no FTL to run on the host: open-channel needs a flash preset"
                )));
            }
            if let Some(c) = &d.capacity {
                n.capacity_bytes = ctx.size("device.capacity", c)?;
                if n.capacity_bytes < 4096 {
                    return Err(ctx.err("device.capacity: must be at least 4 KiB"));
                }
            }
            if let Some(l) = &d.null.latency {
                n.latency = ctx.duration("device.null.latency", l)?;
            }
            if i.link_rate.is_some() {
                return Err(ctx.err("device.interface.link_rate: the null device moves no data"));
            }
            DeviceKind::Null(n)
        }
        DeviceKind::Ssd(mut c) => {
            if d.null.latency.is_some() {
                return Err(ctx.err(format!("device.null.latency: only for the null device, not preset '{name}'")));
            }
            let g = &d.geometry;
            let geo = &mut c.geometry;
            let bpp_given = g.blocks_per_plane.is_some();
            for (key, src, dst) in [
                ("channels", g.channels, &mut geo.channels),
                ("chips_per_channel", g.chips_per_channel, &mut geo.chips_per_channel),
                ("dies_per_chip", g.dies_per_chip, &mut geo.dies_per_chip),
                ("planes_per_die", g.planes_per_die, &mut geo.planes_per_die),
                ("blocks_per_plane", g.blocks_per_plane, &mut geo.blocks_per_plane),
                ("pages_per_block", g.pages_per_block, &mut geo.pages_per_block),
            ] {
                if let Some(v) = src {
                    *dst = ctx.positive(&format!("device.geometry.{key}"), v)?;
                }
            }
            for (key, src, dst) in [
                ("page_size", &g.page_size, &mut geo.page_bytes),
                ("unit_size", &g.unit_size, &mut geo.unit_bytes),
            ] {
                if let Some(v) = src {
                    let bytes = ctx.size(&format!("device.geometry.{key}"), v)?;
                    *dst = u32::try_from(bytes)
                        .map_err(|_| ctx.err(format!("device.geometry.{key}: {bytes} bytes is too large")))?;
                }
            }
            let t = &d.timing;
            for (key, src, dst) in [
                ("read", &t.read, &mut c.timing.read),
                ("program", &t.program, &mut c.timing.program),
                ("erase", &t.erase, &mut c.timing.erase),
                ("command", &t.command, &mut c.timing.command),
            ] {
                if let Some(v) = src {
                    *dst = ctx.duration(&format!("device.timing.{key}"), v)?;
                }
            }
            if let Some(r) = &t.channel_rate {
                c.timing.channel_bytes_per_sec = ctx.rate("device.timing.channel_rate", r)?;
            }
            if let Some(r) = &i.link_rate {
                c.host_link_bytes_per_sec = ctx.rate("device.interface.link_rate", r)?;
            }
            let f = &d.ftl;
            if let Some(op) = f.overprovisioning {
                if !(op > 0.0 && op <= MAX_OVERPROVISIONING) {
                    return Err(ctx.err(format!(
                        "device.ftl.overprovisioning: {op} is out of range: expected a fraction of the logical capacity above 0 and at most {MAX_OVERPROVISIONING} (0.07 is 7% more flash than logical space, 10 is 11 times as much)"
                    )));
                }
                c.overprovisioning = op;
            }
            c.mapping = resolve_mapping(ctx, f, &c.geometry)?;
            c.open_channel = match d.mode.as_deref() {
                None => c.open_channel,
                Some("ssd") => false,
                Some("open-channel") => true,
                Some(m) => {
                    return Err(ctx.err(format!("device.mode: unknown mode '{m}': expected one of ssd, open-channel")))
                }
            };
            if c.open_channel && c.mapping != MappingConfig::Full {
                return Err(ctx.err(
                    "device.ftl.mapping: an open-channel drive's FTL runs on the host (pblk), which keeps the whole L2P table in host memory: use mapping = \"full\"",
                ));
            }
            if let Some(v) = &f.gc_victim {
                c.victim_policy = match v.as_str() {
                    "greedy" => VictimPolicy::Greedy,
                    "cost-benefit" => VictimPolicy::CostBenefit,
                    _ => {
                        return Err(ctx.err(format!(
                            "device.ftl.gc_victim: unknown policy '{v}': expected one of greedy, cost-benefit"
                        )))
                    }
                };
            }
            c.geometry.validate().map_err(|e| ctx.err(format!("device.geometry: {e}")))?;
            let capacity = match &d.capacity {
                Some(_) if bpp_given => {
                    return Err(ctx.err(
                        "device.capacity and device.geometry.blocks_per_plane both set the drive's size: give one",
                    ))
                }
                Some(cap) => Some((cap.as_str(), ctx.size("device.capacity", cap)?)),
                None => None,
            };
            if let Some(t) = f.gc_threshold_blocks {
                if t < 2 {
                    return Err(ctx.err(format!(
                        "device.ftl.gc_threshold_blocks: {t} is too low: at least 2 free blocks per plane are needed (one for host writes, one for GC)"
                    )));
                }
            }
            // What the over-provisioning decides (the size for a capacity, the default GC
            // threshold), kept apart so that a better over-provisioning can be looked for below.
            let unsized_drive = c.clone();
            size_drive(ctx, &mut c, capacity, f.gc_threshold_blocks)?;
            let b = &d.buffer;
            if let Some(s) = &b.size {
                let bytes = ctx.size("device.buffer.size", s)?;
                c.buffer_units = u32::try_from(bytes / c.geometry.unit_bytes as u64)
                    .map_err(|_| ctx.err("device.buffer.size: too large"))?;
            }
            if let Some(q) = b.program_queue_depth {
                c.program_queue_depth = ctx.positive("device.buffer.program_queue_depth", q)?;
            }
            c.flush = resolve_flush(ctx, b, c.flush)?;
            c.volatile_write_cache = b.volatile_write_cache.unwrap_or(c.volatile_write_cache);
            let stripe_units = c.geometry.planes() * c.geometry.units_per_page();
            if c.buffer_units < 2 * stripe_units {
                return Err(ctx.err(format!(
                    "device.buffer.size: {} bytes is too small: the write buffer must hold at least two flash pages per plane ({} bytes) so the flusher can always fill a page",
                    c.buffer_units as u64 * c.geometry.unit_bytes as u64,
                    2 * stripe_units as u64 * c.geometry.page_bytes as u64 / c.geometry.units_per_page() as u64
                )));
            }
            if c.logical_units() == 0 {
                return Err(ctx.err(
                    "device: the drive's capacity is smaller than one flash page per plane after over-provisioning",
                ));
            }
            Ftl::check_params(&c.geometry, &c.ftl_params()).map_err(|e| match e {
                FtlError::OverprovisioningTooLow { .. } => ctx.err(format!(
                    "device.ftl: {e}; to fix it: {}",
                    op_fixes(ctx, &unsized_drive, &c, capacity, f.gc_threshold_blocks).join(", or ")
                )),
                e => ctx.err(format!("device.ftl: {e}")),
            })?;
            DeviceKind::Ssd(c)
        }
    };
    Ok(DeviceSpec { preset: name.to_string(), kind, nvme })
}

/// The largest `device.ftl.overprovisioning`: eleven times as much flash as logical space.
const MAX_OVERPROVISIONING: f64 = 10.0;

/// Sizes the drive for `capacity` (the key's text and its bytes), if one is given, and sets the
/// GC threshold (`threshold`, or the default for the drive's size): the settings that follow from
/// the over-provisioning.
fn size_drive(ctx: &Ctx, c: &mut SsdConfig, capacity: Option<(&str, u64)>, threshold: Option<u32>) -> Result<(), ConfigError> {
    if let Some((cap, want)) = capacity {
        let geo = &c.geometry;
        let block_bytes = geo.units_per_block() as u64 * geo.unit_bytes as u64;
        let min = block_bytes * geo.planes() as u64;
        if want < min {
            return Err(ctx.err(format!(
                "device.capacity: {want} bytes is smaller than one block per plane ({min} bytes: {} planes × {block_bytes}-byte blocks)",
                geo.planes()
            )));
        }
        let raw = (want as f64 * (1.0 + c.overprovisioning)).ceil() as u64;
        let bpp = raw.div_ceil(block_bytes * geo.planes() as u64);
        // Rounding the logical space down to whole stripes may cost a little; add blocks until it fits.
        c.geometry.blocks_per_plane = u32::try_from(bpp.max(1))
            .map_err(|_| ctx.err(format!("device.capacity: {cap} is too large for this geometry")))?;
        while c.logical_units() * (c.geometry.unit_bytes as u64) < want {
            c.geometry.blocks_per_plane += 1;
        }
        c.geometry.validate().map_err(|e| ctx.err(format!("device.capacity: {e}")))?;
    }
    c.gc_threshold_blocks = threshold.unwrap_or_else(|| default_gc_threshold(c.geometry.blocks_per_plane));
    Ok(())
}

/// What would give GC enough spare blocks, of the settings this scenario can change: the least
/// over-provisioning (in hundredths) that is enough, a larger capacity when the capacity sets
/// the size or more blocks per plane when the geometry does, and a lower GC threshold when it is
/// above its minimum of 2.
fn op_fixes(ctx: &Ctx, unsized_drive: &SsdConfig, c: &SsdConfig, capacity: Option<(&str, u64)>, threshold: Option<u32>) -> Vec<String> {
    let enough = |op: f64| {
        let mut t = unsized_drive.clone();
        t.overprovisioning = op;
        size_drive(ctx, &mut t, capacity, threshold).is_ok()
            && t.logical_units() > 0
            && Ftl::check_params(&t.geometry, &t.ftl_params()).is_ok()
    };
    let max = (MAX_OVERPROVISIONING * 100.0) as u32;
    let mut fixes = vec![match (1..=max).map(|k| k as f64 / 100.0).find(|&op| op > c.overprovisioning && enough(op)) {
        Some(op) => format!("set device.ftl.overprovisioning = {op} or more (it is {})", c.overprovisioning),
        None => format!("no over-provisioning up to {MAX_OVERPROVISIONING} is enough for this geometry"),
    }];
    match capacity {
        Some((cap, _)) => fixes.push(format!("give a larger device.capacity (it is {cap}; the spare blocks grow with it)")),
        None => fixes.push(format!("give more device.geometry.blocks_per_plane (it is {})", c.geometry.blocks_per_plane)),
    }
    if c.gc_threshold_blocks > 2 {
        let by_default = if threshold.is_none() { " by default here" } else { "" };
        fixes.push(format!("lower device.ftl.gc_threshold_blocks ({}{by_default}; the least is 2)", c.gc_threshold_blocks));
    }
    fixes
}

/// Default map-cache size with DFTL: 1% of the translation table.
const DEFAULT_CMT_PERCENT: f64 = 1.0;
const DEFAULT_CMT_PERIOD: Nanos = Nanos::from_secs(10);

/// `device.ftl.mapping` and its DFTL keys. The CMT's size in pages is set later, once the
/// drive's size is known ([`finish_mapping`]); here it holds 0 and `cmt_size` what was asked.
fn resolve_mapping(ctx: &Ctx, f: &FtlSection, geo: &Geometry) -> Result<MappingConfig, ConfigError> {
    let mode = f.mapping.as_deref().unwrap_or("full");
    match mode {
        "full" => {
            if f.entry_size.is_some() || f.cmt.is_some() {
                return Err(ctx.err(
                    "device.ftl: entry_size and [device.ftl.cmt] apply only with mapping = \"dftl\"",
                ));
            }
            Ok(MappingConfig::Full)
        }
        "dftl" => {
            let entry_bytes = f.entry_size.unwrap_or(4);
            if entry_bytes == 0 || entry_bytes > geo.page_bytes {
                return Err(ctx.err(format!(
                    "device.ftl.entry_size: {entry_bytes} bytes: expected 1 to the page size ({} bytes)",
                    geo.page_bytes
                )));
            }
            let empty = CmtSection::default();
            let s = f.cmt.as_ref().unwrap_or(&empty);
            let policy = match s.policy.as_deref() {
                None => CmtPolicyKind::Shared,
                Some(p) => CmtPolicyKind::from_name(p).ok_or_else(|| {
                    ctx.err(format!(
                        "device.ftl.cmt.policy: unknown policy '{p}': expected one of {}",
                        CmtPolicyKind::NAMES.join(", ")
                    ))
                })?,
            };
            let shares = match &s.shares {
                None => None,
                Some(v) => {
                    if let Some(bad) = v.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
                        return Err(ctx.err(format!("device.ftl.cmt.shares: {bad}: each share must be a percentage above 0")));
                    }
                    let sum: f64 = v.iter().sum();
                    if (sum - 100.0).abs() > 1e-6 {
                        return Err(ctx.err(format!(
                            "device.ftl.cmt.shares: the shares sum to {sum}%: expected 100% (one percentage per tenant)"
                        )));
                    }
                    Some(v.iter().map(|x| x / 100.0).collect())
                }
            };
            let period = match &s.period {
                None => DEFAULT_CMT_PERIOD,
                Some(p) => match ctx.duration("device.ftl.cmt.period", p)? {
                    Nanos::ZERO => return Err(ctx.err("device.ftl.cmt.period: must be longer than zero")),
                    d => d,
                },
            };
            let step = ctx.positive("device.ftl.cmt.step", s.step.unwrap_or(1))?;
            let floor = ctx.positive("device.ftl.cmt.floor", s.floor.unwrap_or(1))?;
            // period/step/floor (balanced only) and shares (partitioned, balanced) are accepted
            // with every policy so one base scenario can sweep the policy.
            Ok(MappingConfig::Dftl { entry_bytes, cmt: CmtConfig { pages: 0, policy, shares, period, step, floor } })
        }
        other => Err(ctx.err(format!(
            "device.ftl.mapping: unknown mapping '{other}': expected one of {}",
            MappingConfig::NAMES.join(", ")
        ))),
    }
}

/// Sets the CMT's size in translation pages now that the drive's size is known, and checks it
/// against the tenants.
fn finish_mapping(ctx: &Ctx, f: &FtlSection, c: &mut SsdConfig, tenants: usize) -> Result<(), ConfigError> {
    let map_pages = c.ftl_params().map_pages();
    let page_bytes = c.geometry.page_bytes as u64;
    let MappingConfig::Dftl { cmt, .. } = &mut c.mapping else { return Ok(()) };
    let s = f.cmt.as_ref();
    let (key, pages) = match (s.and_then(|s| s.size.as_deref()), s.and_then(|s| s.pages)) {
        (Some(_), Some(_)) => return Err(ctx.err("device.ftl.cmt: size and pages both set the cache's size: give one")),
        (None, Some(p)) => ("device.ftl.cmt.pages", p as u64),
        (Some(v), None) => {
            let pages = match v.trim().strip_suffix('%') {
                Some(p) => {
                    let pct: f64 = p.trim().parse().map_err(|_| ctx.err(format!("device.ftl.cmt.size: invalid percentage '{v}'")))?;
                    if !(pct > 0.0 && pct <= 100.0) {
                        return Err(ctx.err(format!("device.ftl.cmt.size: {pct}% is out of range: expected (0, 100]% of the translation table")));
                    }
                    (map_pages as f64 * pct / 100.0).round() as u64
                }
                None => ctx.size("device.ftl.cmt.size", v)? / page_bytes,
            };
            ("device.ftl.cmt.size", pages)
        }
        (None, None) => ("device.ftl.cmt.size", (map_pages as f64 * DEFAULT_CMT_PERCENT / 100.0).round() as u64),
    };
    let pages = pages.min(map_pages as u64) as u32;
    if (pages as usize) < tenants.max(1) {
        return Err(ctx.err(format!(
            "{key}: a cache of {pages} translation pages ({} bytes) is smaller than one translation page per tenant ({tenants} tenants, {page_bytes}-byte pages)",
            pages as u64 * page_bytes
        )));
    }
    if let Some(sh) = &cmt.shares {
        if sh.len() != tenants {
            return Err(ctx.err(format!(
                "device.ftl.cmt.shares: {} shares for {tenants} tenants: expected one per tenant",
                sh.len()
            )));
        }
    }
    cmt.pages = pages;
    crate::ftl::cmt::build(cmt, tenants, map_pages).map_err(|e| ctx.err(format!("device.ftl.cmt: {e}")))?;
    Ok(())
}

fn resolve_flush(ctx: &Ctx, b: &BufferSection, preset: FlushPolicy) -> Result<FlushPolicy, ConfigError> {
    let watermarks = b.high_watermark.is_some() || b.low_watermark.is_some();
    match b.flush.as_deref() {
        None if !watermarks => Ok(preset),
        Some("page") if !watermarks => Ok(FlushPolicy::Page),
        None | Some("page") => Err(ctx.err(
            "device.buffer: high_watermark and low_watermark apply only with flush = \"watermark\"",
        )),
        Some("watermark") => {
            let high = b.high_watermark.unwrap_or(0.9);
            let low = b.low_watermark.unwrap_or(0.7);
            if !(0.0 < low && low < high && high <= 1.0) {
                return Err(ctx.err(format!(
                    "device.buffer: watermarks low = {low}, high = {high}: expected 0 < low < high <= 1 (fractions of the buffer)"
                )));
            }
            Ok(FlushPolicy::Watermark { high, low })
        }
        Some(other) => Err(ctx.err(format!("device.buffer.flush: unknown policy '{other}': expected one of page, watermark"))),
    }
}

fn reject_ssd_keys(ctx: &Ctx, d: &DeviceSection, preset: &str) -> Result<(), ConfigError> {
    let g = &d.geometry;
    let t = &d.timing;
    let f = &d.ftl;
    let b = &d.buffer;
    let set = [
        ("geometry", g.channels.is_some() || g.chips_per_channel.is_some() || g.dies_per_chip.is_some()
            || g.planes_per_die.is_some() || g.blocks_per_plane.is_some() || g.pages_per_block.is_some()
            || g.page_size.is_some() || g.unit_size.is_some()),
        ("timing", t.read.is_some() || t.program.is_some() || t.erase.is_some() || t.channel_rate.is_some() || t.command.is_some()),
        ("ftl", f.overprovisioning.is_some() || f.mapping.is_some() || f.gc_victim.is_some() || f.gc_threshold_blocks.is_some()
            || f.entry_size.is_some() || f.cmt.is_some()),
        ("buffer", b.size.is_some() || b.program_queue_depth.is_some() || b.flush.is_some()
            || b.high_watermark.is_some() || b.low_watermark.is_some() || b.volatile_write_cache.is_some()),
    ];
    match set.iter().find(|(_, s)| *s) {
        Some((section, _)) => Err(ctx.err(format!("device.{section}: preset '{preset}' has no flash; remove this section"))),
        None => Ok(()),
    }
}

fn resolve_precondition(ctx: &Ctx, p: &PreconditionSection) -> Result<PreconditionSpec, ConfigError> {
    let state = match p.state.as_deref() {
        None => PreconditionState::Clean,
        Some(name) => PreconditionState::from_name(name).ok_or_else(|| {
            ctx.err(format!(
                "precondition.state: unknown state '{name}': expected one of {}",
                PreconditionState::NAMES.join(", ")
            ))
        })?,
    };
    let fill = p.fill.unwrap_or(1.0);
    if !(fill > 0.0 && fill <= 1.0) {
        return Err(ctx.err(format!("precondition.fill: {fill} is out of range: expected a fraction in (0, 1], e.g. 0.8")));
    }
    if let (Some(f), PreconditionState::Clean) = (p.fill, state) {
        return Err(ctx.err(format!(
            "precondition.fill: {f} means nothing on a clean drive (precondition.state is \"clean\"{}): a clean drive holds no data; set state = \"sequential-fill\" or \"aged\", or drop fill",
            if p.state.is_none() { ", the default" } else { "" }
        )));
    }
    Ok(PreconditionSpec { state, fill })
}

fn resolve_host(ctx: &Ctx, h: &HostSection, device_preset: &str) -> Result<HostConfig, ConfigError> {
    let scheduler = match &h.scheduler {
        None => SchedulerKind::None,
        Some(s) => SchedulerKind::from_name(s).ok_or_else(|| {
            ctx.err(format!("host.scheduler: unknown scheduler '{s}': expected one of {}", SchedulerKind::NAMES.join(", ")))
        })?,
    };
    let scheduler = resolve_scheduler_params(ctx, h, scheduler, device_preset)?;
    Ok(HostConfig {
        queue_depth: ctx.positive("host.queue_depth", h.queue_depth.unwrap_or(DEFAULT_HOST_QUEUE_DEPTH))?,
        scheduler,
        submit_overhead: match &h.submit_overhead {
            Some(v) => ctx.duration("host.submit_overhead", v)?,
            None => DEFAULT_SUBMIT_OVERHEAD,
        },
        completion_overhead: match &h.completion_overhead {
            Some(v) => ctx.duration("host.completion_overhead", v)?,
            None => DEFAULT_COMPLETION_OVERHEAD,
        },
        cpu: h.cpu.as_ref().map(|c| resolve_cpu(ctx, c)).transpose()?,
    })
}

/// `[host.cfq]` and `[host.mcfq]`: each only with a scheduler that uses it.
fn resolve_scheduler_params(ctx: &Ctx, h: &HostSection, kind: SchedulerKind, device_preset: &str) -> Result<SchedulerKind, ConfigError> {
    let name = kind.name();
    if h.cfq.is_some() && !matches!(kind, SchedulerKind::Cfq(_) | SchedulerKind::Mcfq(..)) {
        return Err(ctx.err(format!("host.cfq: applies only with scheduler = \"cfq\" or \"mcfq\" (the scheduler is '{name}')")));
    }
    if h.mcfq.is_some() && !matches!(kind, SchedulerKind::Mcfq(..)) {
        return Err(ctx.err(format!("host.mcfq: applies only with scheduler = \"mcfq\" (the scheduler is '{name}')")));
    }
    if h.fair.is_some() && !matches!(kind, SchedulerKind::Fair(..)) {
        return Err(ctx.err(format!("host.fair: applies only with scheduler = \"fair\" (the scheduler is '{name}')")));
    }
    if h.hwabc.is_some() && !matches!(kind, SchedulerKind::Hwabc(..)) {
        return Err(ctx.err(format!(
            "host.hwabc: applies only with scheduler = \"hwabc\" or \"hwabc-oracle\" (the scheduler is '{name}')"
        )));
    }
    let cfq = |p: CfqParams| h.cfq.as_ref().map_or(Ok(p), |c| resolve_cfq(ctx, c, p));
    Ok(match kind {
        SchedulerKind::None => kind,
        SchedulerKind::Cfq(p) => SchedulerKind::Cfq(cfq(p)?),
        SchedulerKind::Mcfq(p, m) => {
            SchedulerKind::Mcfq(cfq(p)?, h.mcfq.as_ref().map_or(Ok(m), |s| resolve_mots(ctx, s, m))?)
        }
        SchedulerKind::Fair(p) => SchedulerKind::Fair(match &h.fair {
            Some(f) => resolve_budget(ctx, "host.fair", (&f.period, f.window, f.windows), p)?,
            None => p,
        }),
        SchedulerKind::Hwabc(p, mut hw) => {
            // The drive's profiled G = a·ln(R) + b, unless the scenario gives its own.
            (hw.a, hw.b) = gc_contribution_fit(device_preset);
            let Some(s) = &h.hwabc else { return Ok(SchedulerKind::Hwabc(p, hw)) };
            let p = resolve_budget(ctx, "host.hwabc", (&s.period, s.window, s.windows), p)?;
            hw.alpha = s.alpha.unwrap_or(hw.alpha);
            hw.a = s.a.unwrap_or(hw.a);
            hw.b = s.b.unwrap_or(hw.b);
            hw.validate().map_err(|e| ctx.err(format!("host.hwabc.{e}")))?;
            SchedulerKind::Hwabc(p, hw)
        }
    })
}

/// `period`, `window` and `windows` of `[host.fair]` or `[host.hwabc]`.
fn resolve_budget(
    ctx: &Ctx,
    section: &str,
    (period, window, windows): (&Option<String>, Option<u32>, Option<u32>),
    mut p: BudgetParams,
) -> Result<BudgetParams, ConfigError> {
    if let Some(v) = period {
        p.period = ctx.duration(&format!("{section}.period"), v)?;
        if p.period < Nanos::from_us(100) {
            return Err(ctx.err(format!("{section}.period: {v} is too short: expected at least 100us (a refill per request or more)")));
        }
    }
    if let Some(w) = window {
        p.cost.window_requests = ctx.positive(&format!("{section}.window"), w)?;
    }
    if let Some(n) = windows {
        p.cost.windows = ctx.positive(&format!("{section}.windows"), n)?;
    }
    p.cost.validate().map_err(|e| ctx.err(format!("{section}: {e}")))?;
    Ok(p)
}

fn resolve_cfq(ctx: &Ctx, c: &CfqSection, d: CfqParams) -> Result<CfqParams, ConfigError> {
    let dur = |key: &str, v: &Option<String>, default: Nanos| -> Result<Nanos, ConfigError> {
        v.as_deref().map_or(Ok(default), |v| ctx.duration(&format!("host.cfq.{key}"), v))
    };
    let p = CfqParams {
        slice_sync: dur("slice_sync", &c.slice_sync, d.slice_sync)?,
        slice_idle: dur("slice_idle", &c.slice_idle, d.slice_idle)?,
        target_latency: dur("target_latency", &c.target_latency, d.target_latency)?,
        quantum: ctx.positive("host.cfq.quantum", c.quantum.unwrap_or(d.quantum))?,
        fifo_expire_write: dur("fifo_expire_write", &c.fifo_expire_write, d.fifo_expire_write)?,
    };
    for (key, v) in [("slice_sync", p.slice_sync), ("target_latency", p.target_latency)] {
        if v == Nanos::ZERO {
            return Err(ctx.err(format!("host.cfq.{key}: must be longer than zero")));
        }
    }
    Ok(p)
}

fn resolve_mots(ctx: &Ctx, m: &McfqSection, d: MotsParams) -> Result<MotsParams, ConfigError> {
    let interval = match &m.interval {
        Some(v) => ctx.duration("host.mcfq.interval", v)?,
        None => d.interval,
    };
    if interval < Nanos::from_ms(1) {
        return Err(ctx.err("host.mcfq.interval: must be at least 1ms"));
    }
    let window = match &m.window {
        None => d.window,
        Some(v) => {
            let w = ctx.duration("host.mcfq.window", v)?;
            if w < interval || w.0 % interval.0 != 0 {
                return Err(ctx.err(format!(
                    "host.mcfq.window: {v} is not a whole number of sampling intervals ({interval}): the window is made of samples"
                )));
            }
            u32::try_from(w.0 / interval.0).map_err(|_| ctx.err("host.mcfq.window: too many samples"))?
        }
    };
    let min_scale = m.min_scale.unwrap_or(d.min_scale);
    let max_scale = m.max_scale.unwrap_or(d.max_scale);
    if !(min_scale > 0.0 && min_scale <= 1.0 && (1.0..=1000.0).contains(&max_scale)) {
        return Err(ctx.err(format!(
            "host.mcfq: min_scale = {min_scale}, max_scale = {max_scale}: expected 0 < min_scale <= 1 <= max_scale <= 1000"
        )));
    }
    Ok(MotsParams { interval, window, min_scale, max_scale })
}

fn resolve_cpu(ctx: &Ctx, c: &CpuSection) -> Result<CpuConfig, ConfigError> {
    let d = CpuConfig::default();
    let dur = |key: &str, v: &Option<String>, default: Nanos| -> Result<Nanos, ConfigError> {
        v.as_deref().map_or(Ok(default), |v| ctx.duration(&format!("host.cpu.{key}"), v))
    };
    let quantum = dur("quantum", &c.quantum, d.quantum)?;
    if quantum == Nanos::ZERO {
        return Err(ctx.err("host.cpu.quantum: must be longer than zero"));
    }
    Ok(CpuConfig {
        cores: ctx.positive("host.cpu.cores", c.cores.unwrap_or(d.cores))?,
        threads_per_core: ctx.positive("host.cpu.threads_per_core", c.threads_per_core.unwrap_or(d.threads_per_core))?,
        quantum,
        context_switch: dur("context_switch", &c.context_switch, d.context_switch)?,
        wakeup: dur("wakeup", &c.wakeup, d.wakeup)?,
        spin: dur("spin", &c.spin, d.spin)?,
        syscall: dur("syscall", &c.syscall, d.syscall)?,
        app: dur("app", &c.app, d.app)?,
        smt_slowdown: match c.smt_slowdown {
            None => d.smt_slowdown,
            Some(x) if (1.0..=4.0).contains(&x) => x,
            Some(x) => return Err(ctx.err(format!("host.cpu.smt_slowdown: {x} is out of range: expected a factor from 1.0 (none) to 4.0"))),
        },
    })
}

fn choice<T>(ctx: &Ctx, key: &str, v: &Option<String>, names: &[&str], values: &[T], default: T) -> Result<T, ConfigError>
where
    T: Copy,
{
    match v.as_deref() {
        None => Ok(default),
        Some(s) => match names.iter().position(|n| *n == s) {
            Some(i) => Ok(values[i]),
            None => Err(ctx.err(format!("{key}: unknown value '{s}': expected one of {}", names.join(", ")))),
        },
    }
}

fn resolve_virt(ctx: &Ctx, v: &VirtSection) -> Result<VirtConfig, ConfigError> {
    let d = VirtConfig::default();
    let mode = match &v.mode {
        None => VirtMode::BareMetal,
        Some(m) => VirtMode::from_name(m).ok_or_else(|| {
            ctx.err(format!("virt.mode: unknown mode '{m}': expected one of {}", VirtMode::NAMES.join(", ")))
        })?,
    };
    if !mode.is_vm() {
        let given = [
            ("vcpus", v.vcpus.is_some()),
            ("notify", v.notify.is_some()),
            ("emulation", v.emulation.is_some()),
            ("completion", v.completion.is_some()),
            ("queue_size", v.queue_size.is_some()),
            ("batch_window", v.batch_window.is_some()),
            ("pin_vcpus", v.pin_vcpus.is_some()),
            ("pin_iothreads", v.pin_iothreads.is_some()),
            ("aio", v.aio.is_some()),
            ("exits", v.exits.is_some()),
        ];
        if let Some((k, _)) = given.iter().find(|(_, g)| *g) {
            return Err(ctx.err(format!("virt.{k}: only with a VM mode (virt.mode is bare-metal)")));
        }
    }
    if v.batch_window.is_some() && mode != VirtMode::Multiqueue {
        return Err(ctx.err(format!("virt.batch_window: only for mode multiqueue, not {}", mode.name())));
    }
    let dur = |key: &str, x: &Option<String>, default: Nanos| -> Result<Nanos, ConfigError> {
        x.as_deref().map_or(Ok(default), |x| ctx.duration(&format!("virt.{key}"), x))
    };
    let vcpus = v.vcpus.unwrap_or(d.vcpus);
    if vcpus == 0 {
        return Err(ctx.err("virt.vcpus: a VM needs at least 1 vCPU (got 0)"));
    }
    let mut exits = d.exits;
    if let Some(e) = &v.exits {
        for (r, sec) in ExitReason::ALL.iter().zip([&e.io_inst, &e.ext_int, &e.msr_write, &e.hlt]) {
            let Some(sec) = sec else { continue };
            let key = ExitReason::KEYS[r.index()];
            let c = &mut exits[r.index()];
            c.direct = dur(&format!("exits.{key}.direct"), &sec.direct, c.direct)?;
            c.indirect = dur(&format!("exits.{key}.indirect"), &sec.indirect, c.indirect)?;
            c.sync = dur(&format!("exits.{key}.sync"), &sec.sync, c.sync)?;
        }
    }
    let c = VirtConfig {
        mode,
        vcpus,
        notify: choice(ctx, "virt.notify", &v.notify, &["exit", "poll"], &[Notify::Exit, Notify::Poll], d.notify)?,
        emulation: choice(
            ctx,
            "virt.emulation",
            &v.emulation,
            &["userspace", "in-hypervisor"],
            &[Emulation::Userspace, Emulation::InHypervisor],
            if mode == VirtMode::IdeEmulation { Emulation::Userspace } else { d.emulation },
        )?,
        completion: choice(
            ctx,
            "virt.completion",
            &v.completion,
            &["inject", "exitless"],
            &[Completion::Inject, Completion::Exitless],
            d.completion,
        )?,
        queue_size: ctx.positive("virt.queue_size", v.queue_size.unwrap_or(d.queue_size))?,
        max_merge_bytes: v.max_merge.as_deref().map_or(Ok(d.max_merge_bytes), |m| ctx.size("virt.max_merge", m))?,
        batch_window: dur("batch_window", &v.batch_window, d.batch_window)?,
        pin_vcpus: v.pin_vcpus.unwrap_or(d.pin_vcpus),
        pin_iothreads: v.pin_iothreads.unwrap_or(d.pin_iothreads),
        vq_add: dur("vq_add", &v.vq_add, d.vq_add)?,
        vq_pop: dur("vq_pop", &v.vq_pop, d.vq_pop)?,
        request_cost: dur("request_cost", &v.request_cost, d.request_cost)?,
        vq_push: dur("vq_push", &v.vq_push, d.vq_push)?,
        userspace_switch: dur("userspace_switch", &v.userspace_switch, d.userspace_switch)?,
        aio: choice(ctx, "virt.aio", &v.aio, &["native", "threads"], &[Aio::Native, Aio::Threads], d.aio)?,
        poll_detect: dur("poll_detect", &v.poll_detect, d.poll_detect)?,
        ide_submit_exits: v.ide_submit_exits.unwrap_or(d.ide_submit_exits),
        ide_complete_exits: v.ide_complete_exits.unwrap_or(d.ide_complete_exits),
        exits,
    };
    if c.aio == Aio::Threads && c.emulation == Emulation::InHypervisor {
        return Err(ctx.err("virt.aio = \"threads\": QEMU's thread pool is userspace emulation's; with emulation = \"in-hypervisor\" the hypervisor submits requests itself (drop virt.aio)"));
    }
    Ok(c)
}

/// Polling threads each own a hardware thread: at least one must be left for everything else.
fn check_threads(ctx: &Ctx, cpu: &CpuConfig, virt: &VirtConfig, vms: usize, collected: &mut Collected) -> Result<(), ConfigError> {
    if !virt.mode.is_vm() || virt.notify != Notify::Poll {
        return Ok(());
    }
    let hw = cpu.hw_threads();
    let pollers = vms as u32 * virt.iothreads();
    if pollers >= hw {
        return Err(ctx.err(format!(
            "virt.notify = \"poll\": {pollers} polling thread(s) ({vms} VM(s) × {} I/O thread(s) in mode {}) are each pinned to a hardware thread of their own, \
             but the host has {hw} (host.cpu.cores × threads_per_core): none would be left for the vCPUs; \
             add hardware threads or use fewer VMs / vCPUs",
            virt.iothreads(),
            virt.mode.name()
        )));
    }
    let vcpus = vms as u32 * virt.vcpus;
    if pollers + vcpus > hw {
        collected.warnings.push(format!(
            "{}: {vcpus} vCPU(s) share the {} hardware thread(s) the {pollers} polling thread(s) leave free",
            ctx.file,
            hw - pollers
        ));
    }
    Ok(())
}

fn resolve_tenants(
    ctx: &Ctx,
    ts: &[TenantSection],
    base: &Path,
    capacity: u64,
    collected: &mut Collected,
) -> Result<Vec<TenantSpec>, ConfigError> {
    if ts.is_empty() {
        return Err(ctx.err("no tenants: add at least one [[tenant]] with a workload (fio = \"...\", job_file = \"...\", personality = \"...\" or trace = \"...\")"));
    }
    // Before any tenant is resolved (each parses a job file).
    if ts.len() > super::limits::MAX_TENANTS {
        return Err(ctx.err(format!("{} tenants: at most {}", ts.len(), super::limits::MAX_TENANTS)));
    }
    let n = ts.len() as u64;
    let mut out: Vec<TenantSpec> = Vec::new();
    for (i, t) in ts.iter().enumerate() {
        let name = t.name.clone().unwrap_or_else(|| format!("tenant{i}"));
        let key = format!("tenant[{i}] ({name})");
        if name.is_empty() || name.contains(|c: char| c.is_control() || c == ',') {
            return Err(ctx.err(format!("{key}.name: must be non-empty, without commas or control characters")));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(ctx.err(format!("{key}.name: '{name}' is used by another tenant")));
        }
        let region = match &t.region {
            None => auto_region(i as u64, n, capacity),
            Some(RegionValue::Named(s)) if s == "auto" => auto_region(i as u64, n, capacity),
            Some(RegionValue::Named(s)) if s == "whole" => (0, capacity),
            Some(RegionValue::Named(s)) => {
                return Err(ctx.err(format!(
                    "{key}.region: unknown region '{s}': expected \"auto\", \"whole\" or {{ offset = \"...\", size = \"...\" }}"
                )))
            }
            Some(RegionValue::Range { offset, size }) => {
                let off = size_or_percent(ctx, &format!("{key}.region.offset"), offset, capacity)?;
                let len = size_or_percent(ctx, &format!("{key}.region.size"), size, capacity)?;
                if len == 0 || off % 512 != 0 || len % 512 != 0 {
                    return Err(ctx.err(format!(
                        "{key}.region: offset and size must be multiples of 512 bytes and the size non-zero"
                    )));
                }
                if off + len > capacity {
                    return Err(ctx.err(format!(
                        "{key}.region: {off}+{len} bytes exceeds the device's capacity of {capacity} bytes"
                    )));
                }
                (off, len)
            }
        };
        let weight = resolve_weight(ctx, &key, t.weight.as_ref())?;
        if let Some(v) = &t.trace {
            if t.fio.is_some() || t.job_file.is_some() || t.personality.is_some() {
                return Err(ctx.err(format!("{key}: give only one of fio, job_file, personality and trace")));
            }
            let spec = super::trace::resolve_trace(v, &format!("{key}.trace"), base, &|m| ctx.err(m), &|k, v| ctx.duration(k, v))?;
            let job = FioJob {
                name: name.clone(),
                file: spec.paths[0].display().to_string(),
                iodepth: spec.depth(),
                job_options: spec.job_options(),
                ..FioJob::default()
            };
            out.push(TenantSpec { name, region, weight, workload: Workload::Trace { spec, job }, domain: i });
            continue;
        }
        if t.fio.is_none() && t.job_file.is_none() && t.personality.is_none() {
            // No workload: an NBD export. Its one job issues what the export's clients send.
            let job = FioJob {
                name: name.clone(),
                iodepth: EXPORT_DEPTH,
                job_options: vec![("ioengine".into(), "nbd".into())],
                ..FioJob::default()
            };
            out.push(TenantSpec { name, region, weight, workload: Workload::Export { job }, domain: i });
            continue;
        }
        let jf = tenant_workload(ctx, &key, &name, t, base)?;
        if jf.jobs.is_empty() {
            return Err(ctx.err(format!("{key}: the fio job has no job sections")));
        }
        collect_diagnostics(&jf, collected);
        out.push(TenantSpec { name, region, weight, workload: Workload::Fio(jf.jobs), domain: i });
    }
    check_overlaps(ctx, &out, capacity)?;
    Ok(out)
}

/// A tenant's jobs: from exactly one of `fio`, `job_file` and `personality`.
fn tenant_workload(ctx: &Ctx, key: &str, name: &str, t: &TenantSection, base: &Path) -> Result<JobFile, ConfigError> {
    match (&t.fio, &t.job_file, &t.personality) {
        (Some(text), None, None) => {
            let label = format!("{}[tenant {name}].fio", ctx.file);
            Ok(parse_job_text(text, &label, &|v| std::env::var(v).ok())?)
        }
        (None, Some(path), None) => {
            let full = base.join(path);
            let shown = if full == Path::new(path) { format!("'{path}'") } else { format!("'{path}' ({})", full.display()) };
            let text = read_job_file(&full).map_err(|e| ctx.err(format!("{key}.job_file: cannot read job file {shown}: {e}")))?;
            Ok(parse_job_text(&text, &full.display().to_string(), &|v| std::env::var(v).ok())?)
        }
        (None, None, Some(p)) => match personality::get(p) {
            Some(p) => Ok(p.parse()?),
            None => Err(ctx.err(format!(
                "{key}.personality: unknown personality '{p}': expected one of {} (flashmux personalities)",
                personality::names()
            ))),
        },
        (None, None, None) => Err(ctx.err(format!(
            "{key}: no workload: give fio = \"...\", job_file = \"...\", personality = \"...\" or trace = \"...\""
        ))),
        _ => Err(ctx.err(format!("{key}: give only one of fio, job_file and personality"))),
    }
}

fn resolve_weight(ctx: &Ctx, key: &str, v: Option<&toml::Value>) -> Result<u32, ConfigError> {
    let Some(v) = v else { return Ok(DEFAULT_WEIGHT) };
    match v.as_integer() {
        Some(w) if (1..=MAX_WEIGHT as i64).contains(&w) => Ok(w as u32),
        _ => Err(ctx.err(format!(
            "{key}.weight: {v} is not a valid weight: expected a whole number from 1 to {MAX_WEIGHT} (default {DEFAULT_WEIGHT})"
        ))),
    }
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

/// The i-th of n equal slices of the device, aligned to 1 MiB where the device is large enough;
/// a lone tenant gets the whole device.
fn auto_region(i: u64, n: u64, capacity: u64) -> (u64, u64) {
    if n == 1 {
        return (0, capacity);
    }
    let align = if capacity / n >= 64 * AUTO_REGION_ALIGN { AUTO_REGION_ALIGN } else { 4096 };
    let slice = capacity / n / align * align;
    (i * slice, slice)
}

fn size_or_percent(ctx: &Ctx, key: &str, v: &str, capacity: u64) -> Result<u64, ConfigError> {
    match v.trim().strip_suffix('%') {
        Some(p) => {
            let pct: f64 = p.trim().parse().map_err(|_| ctx.err(format!("{key}: invalid percentage '{v}'")))?;
            if !(0.0..=100.0).contains(&pct) {
                return Err(ctx.err(format!("{key}: {pct}% is out of range 0-100%")));
            }
            // Down to a whole 4 KiB, so percentages give aligned regions.
            Ok((capacity as f64 * pct / 100.0) as u64 / 4096 * 4096)
        }
        None => ctx.size(key, v),
    }
}

fn check_overlaps(ctx: &Ctx, ts: &[TenantSpec], capacity: u64) -> Result<(), ConfigError> {
    for (i, a) in ts.iter().enumerate() {
        for b in &ts[i + 1..] {
            let whole = |t: &TenantSpec| t.region == (0, capacity);
            if whole(a) || whole(b) {
                continue; // "whole" is an explicit choice to share the device
            }
            if a.region.0 < b.region.0 + b.region.1 && b.region.0 < a.region.0 + a.region.1 {
                return Err(ctx.err(format!(
                    "tenants '{}' and '{}' have overlapping regions ({}+{} and {}+{} bytes); partitions must be disjoint (use region = \"whole\" to share the device)",
                    a.name, b.name, a.region.0, a.region.1, b.region.0, b.region.1
                )));
            }
        }
    }
    Ok(())
}

/// A scenario from a fio job file run as fio would: one tenant per job section, all on the
/// whole device, one group domain, the device's defaults for everything else.
pub(super) fn from_fio_jobs(jf: JobFile, file: &str, device_preset: &str) -> Result<Scenario, ConfigError> {
    let ctx = Ctx { file };
    let device = resolve_device(&ctx, &DeviceSection { preset: Some(device_preset.to_string()), ..Default::default() })?;
    let capacity = device.capacity_bytes();
    if jf.jobs.is_empty() {
        return Err(ctx.err("the job file has no job sections"));
    }
    let mut collected = Collected::default();
    collect_diagnostics(&jf, &mut collected);
    let mut tenants: Vec<TenantSpec> = Vec::new();
    for job in jf.jobs {
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
        });
    }
    Ok(Scenario {
        name: Path::new(file).file_stem().map_or("fio".into(), |s| s.to_string_lossy().into()),
        seed: DEFAULT_SEED,
        device,
        precondition: PreconditionSpec { state: PreconditionState::Clean, fill: 1.0 },
        host: resolve_host(&ctx, &HostSection::default(), device_preset)?,
        virt: VirtConfig::default(),
        stop: StopSpec { time: None, requests: None },
        output: OutputSpec { dir: DEFAULT_OUTPUT_DIR.into(), timeline_interval: DEFAULT_TIMELINE_INTERVAL },
        tenants,
        warnings: collected.warnings,
        notes: collected.notes,
        global_options: collected.globals,
    })
}
