//! The `[device]` and `[precondition]` sections: a preset, its geometry, timing, FTL, map cache,
//! write buffer and host interface overridden key by key, the drive sized to a capacity, and
//! how the drive is aged before the run.

use super::*;

crate::named! {
    /// `device.mode`.
    pub(super) enum DriveMode: "mode" {
        /// The drive runs its FTL.
        Ssd = "ssd",
        /// The FTL runs on the host, as pblk.
        OpenChannel = "open-channel",
    }
}

crate::named! {
    /// `device.interface.arbitration`.
    pub(super) enum ArbitrationKind: "arbitration" {
        RoundRobin = "round-robin",
        Wrr = "wrr",
    }
}

crate::named! {
    /// `device.buffer.flush`: when the flusher writes the buffer to flash.
    pub(super) enum FlushKind: "policy" {
        Page = "page",
        Watermark = "watermark",
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct DeviceSection {
    pub(super) preset: Option<String>,
    pub(super) mode: Option<DriveMode>,
    pub(super) capacity: Option<Size>,
    #[serde(default)]
    pub(super) geometry: GeometrySection,
    #[serde(default)]
    pub(super) timing: TimingSection,
    #[serde(default)]
    pub(super) ftl: FtlSection,
    #[serde(default)]
    pub(super) buffer: BufferSection,
    #[serde(default)]
    pub(super) interface: InterfaceSection,
    #[serde(default)]
    pub(super) null: NullSection,
    /// NVMe Flexible Data Placement.
    pub(super) fdp: Option<FdpSection>,
    /// The NVMe Streams directive.
    pub(super) streams: Option<StreamsSection>,
    /// A zoned namespace (NVMe ZNS).
    pub(super) zns: Option<ZnsSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct ZnsSection {
    /// Bytes of LBA space per zone.
    pub(super) zone_size: Option<Size>,
    /// Writable bytes per zone (default: the zone size).
    pub(super) zone_capacity: Option<Size>,
    /// Zones (default: as many as the flash holds).
    pub(super) zones: Option<u32>,
    pub(super) max_open: Option<u32>,
    pub(super) max_active: Option<u32>,
    pub(super) zone_append_limit: Option<Size>,
    /// Planes each zone stripes over (default: every plane).
    pub(super) zone_planes: Option<u32>,
    /// The controller's time per Zone Reset before its erases.
    pub(super) reset_overhead: Option<Duration>,
    /// Finish pads the rest of a partly written zone.
    pub(super) finish_pads: Option<bool>,
}

/// `[device.zns]` over the preset's zoned namespace (if any), on the resolved geometry.
fn resolve_zns(ctx: &Ctx, d: &DeviceSection, preset: Option<ZnsLayout>, geo: &Geometry) -> Result<Option<ZnsLayout>, ConfigError> {
    let Some(z) = &d.zns else {
        // The preset's zones, as many as its (perhaps changed) flash holds.
        return Ok(preset.map(|p| ZnsLayout { zones: ZnsLayout::max_zones(p.zone_planes, geo, p.capacity_bytes).max(1) as u32, ..p }));
    };
    let zone_bytes = match (&z.zone_size, preset) {
        (Some(s), _) => s.bytes,
        (None, Some(p)) => p.zone_bytes,
        (None, None) => {
            return Err(ctx.err(format!(
                "device.zns.zone_size: required (bytes of LBA space per zone, a multiple of a block in every plane: {} bytes on this flash)",
                ZnsLayout::layout_unit(z.zone_planes.or(preset.and_then(|p| p.zone_planes)), geo)
            )))
        }
    };
    let capacity_bytes = match (&z.zone_capacity, &z.zone_size, preset) {
        (Some(c), _, _) => c.bytes,
        (None, Some(s), _) => s.bytes,
        (None, None, Some(p)) => p.capacity_bytes,
        (None, None, None) => unreachable!("zone_size is required without a zoned preset"),
    };
    let zone_planes = z.zone_planes.or(preset.and_then(|p| p.zone_planes));
    let planes_ok = zone_planes.is_none_or(|n| n > 0 && geo.planes() % n == 0);
    let layout = ZnsLayout::layout_unit(zone_planes, geo);
    let zones = match z.zones {
        Some(n) => n,
        None if planes_ok && capacity_bytes >= layout && capacity_bytes % layout == 0 => {
            ZnsLayout::max_zones(zone_planes, geo, capacity_bytes).min(u32::MAX as u64) as u32
        }
        // Not whole layout units: validation says what is wrong with the capacity.
        None => 1,
    };
    Ok(Some(ZnsLayout {
        zones,
        zone_bytes,
        capacity_bytes,
        max_open: z.max_open.or(preset.and_then(|p| p.max_open)),
        max_active: z.max_active.or(preset.and_then(|p| p.max_active)),
        append_limit_bytes: z.zone_append_limit.as_ref().map(|s| s.bytes).or(preset.and_then(|p| p.append_limit_bytes)),
        zone_planes,
        reset_overhead: z
            .reset_overhead
            .as_ref()
            .map_or(preset.map_or(Nanos(0), |p| p.reset_overhead), |d| d.0),
        finish_pads: z.finish_pads.unwrap_or(preset.is_some_and(|p| p.finish_pads)),
    }))
}

crate::named! {
    /// `device.fdp.handle_type`: what GC may do with a handle's data.
    pub(super) enum HandleType: "handle type" {
        /// GC may move it into blocks with other initially isolated handles' data.
        InitiallyIsolated = "initially-isolated",
        /// GC moves it only into blocks of its own handle.
        PersistentlyIsolated = "persistently-isolated",
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FdpSection {
    /// Reclaim unit handles (placement handles 0 to handles − 1).
    pub(super) handles: Option<u32>,
    /// Every handle's type (default initially isolated).
    pub(super) handle_type: Option<HandleType>,
    /// The handles that are persistently isolated (the others initially isolated).
    pub(super) persistent: Option<Vec<u32>>,
    /// Tenant i writes through placement handle i unless it names its own (`placement`).
    pub(super) per_tenant: Option<bool>,
    /// The host updates a handle's reclaim unit (Reclaim Unit Handle Update) after every this
    /// many bytes written through it.
    pub(super) ru_update_every: Option<Size>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct StreamsSection {
    /// Streams the drive keeps open at once.
    pub(super) streams: Option<u32>,
    /// Tenant i writes to stream i + 1 unless it names its own (`placement`).
    pub(super) per_tenant: Option<bool>,
}

/// Handles an FDP drive has unless `device.fdp.handles` says otherwise: 8, as WARP's calibrated
/// FDP drive and CacheLib's reference namespace (4) fit within (docs/MODEL.md §1c).
pub(super) const DEFAULT_FDP_HANDLES: u32 = 8;
/// Streams a drive keeps open unless `device.streams.streams` says otherwise: 16, as the
/// drives fio's streams tests expect.
pub(super) const DEFAULT_STREAMS: u32 = 16;

/// `[device.fdp]` or `[device.streams]` (not both) over the preset's placement.
fn resolve_placement(ctx: &Ctx, d: &DeviceSection, preset: &PlacementMode) -> Result<PlacementMode, ConfigError> {
    match (&d.fdp, &d.streams) {
        (Some(_), Some(_)) => Err(ctx.err(
            "device.fdp and device.streams: a drive with FDP enabled cannot enable Streams (NVMe Base Specification, §8.1.9): give one",
        )),
        (Some(f), None) => {
            let handles = match f.handles {
                Some(h) if h == 0 || h > crate::ftl::Placements::MAX as u32 => {
                    return Err(ctx.err(format!(
                        "device.fdp.handles: {h} reclaim unit handles: expected 1 to {}",
                        crate::ftl::Placements::MAX
                    )))
                }
                Some(h) => h,
                None => preset.fdp_handles().map_or(DEFAULT_FDP_HANDLES, u32::from),
            };
            let mut persistent = vec![f.handle_type == Some(HandleType::PersistentlyIsolated); handles as usize];
            if let Some(list) = &f.persistent {
                if f.handle_type.is_some() {
                    return Err(ctx.err("device.fdp: handle_type and persistent both set the handles' types: give one"));
                }
                for &h in list {
                    let slot = persistent.get_mut(h as usize).ok_or_else(|| {
                        ctx.err(format!("device.fdp.persistent: handle {h}: the drive has handles 0 to {}", handles - 1))
                    })?;
                    *slot = true;
                }
            } else if f.handle_type.is_none() {
                if let PlacementMode::Fdp { persistent: p } = preset {
                    if p.len() == handles as usize {
                        persistent = p.clone();
                    }
                }
            }
            Ok(PlacementMode::Fdp { persistent })
        }
        (None, Some(s)) => {
            let streams = s.streams.unwrap_or(DEFAULT_STREAMS);
            if streams == 0 || streams >= crate::ftl::Placements::MAX as u32 {
                return Err(ctx.err(format!(
                    "device.streams.streams: {streams} open streams: expected 1 to {}",
                    crate::ftl::Placements::MAX - 1
                )));
            }
            Ok(PlacementMode::Streams { streams: streams as u16 })
        }
        (None, None) => Ok(preset.clone()),
    }
}

/// Tenant i's default placement directive under `per_tenant`: FDP's placement handle i, stream
/// i + 1.
pub(super) fn per_tenant_placement(d: &DeviceSection) -> Option<fn(usize) -> u32> {
    if d.fdp.as_ref().and_then(|f| f.per_tenant) == Some(true) {
        return Some(|i| i as u32);
    }
    if d.streams.as_ref().and_then(|s| s.per_tenant) == Some(true) {
        return Some(|i| i as u32 + 1);
    }
    None
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct GeometrySection {
    pub(super) channels: Option<u32>,
    pub(super) chips_per_channel: Option<u32>,
    pub(super) dies_per_chip: Option<u32>,
    pub(super) planes_per_die: Option<u32>,
    pub(super) blocks_per_plane: Option<u32>,
    pub(super) pages_per_block: Option<u32>,
    pub(super) page_size: Option<Size>,
    pub(super) unit_size: Option<Size>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct TimingSection {
    pub(super) read: Option<Duration>,
    pub(super) program: Option<Duration>,
    pub(super) erase: Option<Duration>,
    pub(super) channel_rate: Option<Rate>,
    pub(super) command: Option<Duration>,
    /// `false`: one command per chip at a time (MQSim's transaction scheduling).
    pub(super) interleave_dies: Option<bool>,
    /// Which pages one multi-plane program may take ("any", "same-page" as MQSim).
    pub(super) multiplane: Option<crate::flash::Multiplane>,
    /// `true`: a command waits for its channel to be idle (MQSim's PHY order).
    pub(super) data_out_first: Option<bool>,
    /// The controller's ECC encoder: bytes per second of page data programmed.
    pub(super) encode_rate: Option<Rate>,
    /// The controller's ECC decoder: bytes per second of page data read.
    pub(super) decode_rate: Option<Rate>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FtlSection {
    pub(super) overprovisioning: Option<f64>,
    pub(super) mapping: Option<MappingKind>,
    pub(super) gc_victim: Option<VictimPolicy>,
    /// RGA victims: blocks drawn per choice.
    pub(super) gc_rga_candidates: Option<u32>,
    /// `false`: GC moves pages over the channel (MQSim's `Use_Copyback_for_GC = false`).
    pub(super) gc_copyback: Option<bool>,
    pub(super) gc_threshold_blocks: Option<u32>,
    /// DFTL: bytes per L2P entry in a translation page.
    pub(super) entry_size: Option<u32>,
    pub(super) cmt: Option<CmtSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct CmtSection {
    /// Bytes ("256KiB") or a percentage of the whole translation table ("1%").
    pub(super) size: Option<String>,
    /// The same in translation pages.
    pub(super) pages: Option<u32>,
    pub(super) policy: Option<CmtPolicyKind>,
    /// Percent per tenant, summing to 100.
    pub(super) shares: Option<Vec<f64>>,
    pub(super) period: Option<Duration>,
    pub(super) step: Option<u32>,
    pub(super) floor: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct BufferSection {
    pub(super) size: Option<Size>,
    pub(super) program_queue_depth: Option<u32>,
    pub(super) flush: Option<FlushKind>,
    pub(super) high_watermark: Option<f64>,
    pub(super) low_watermark: Option<f64>,
    pub(super) volatile_write_cache: Option<bool>,
    /// The buffer's DRAM: time per access.
    pub(super) dram_access: Option<Duration>,
    /// The buffer's DRAM: bytes per second.
    pub(super) dram_rate: Option<Rate>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct InterfaceSection {
    pub(super) queues: Option<u16>,
    pub(super) queue_depth: Option<u32>,
    pub(super) controller_cores: Option<u32>,
    pub(super) command_overhead: Option<Duration>,
    pub(super) link_rate: Option<Rate>,
    pub(super) arbitration: Option<ArbitrationKind>,
    /// WRR: commands per turn of the high, medium and low classes.
    pub(super) wrr_weights: Option<Vec<u32>>,
    /// WRR: each queue's class.
    pub(super) queue_classes: Option<Vec<Priority>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct NullSection {
    pub(super) latency: Option<Duration>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct PreconditionSection {
    pub(super) state: Option<PreconditionState>,
    pub(super) fill: Option<f64>,
    /// A drive saved by `flashmux age --save`, loaded instead of aging (relative to the file).
    pub(super) state_file: Option<String>,
}

pub(super) fn resolve_device(ctx: &Ctx, d: &DeviceSection) -> Result<DeviceSpec, ConfigError> {
    let name = d.preset.as_deref().unwrap_or(DEFAULT_PRESET);
    let p = preset(name).ok_or_else(|| {
        ctx.err(format!("device.preset: unknown preset '{name}': expected one of {}", PRESET_NAMES.join(", ")))
    })?;
    let nvme = resolve_interface(ctx, &d.interface, p.nvme)?;
    let kind = match p.kind {
        DeviceKind::Null(n) => DeviceKind::Null(resolve_null(ctx, d, name, n)?),
        DeviceKind::Ssd(c) => DeviceKind::Ssd(resolve_ssd(ctx, d, name, c)?),
    };
    Ok(DeviceSpec { preset: name.to_string(), kind, nvme })
}

/// `[device.interface]` over the preset's NVMe front end (the link rate is the SSD's).
fn resolve_interface(ctx: &Ctx, i: &InterfaceSection, mut nvme: NvmeConfig) -> Result<NvmeConfig, ConfigError> {
    if let Some(q) = i.queues {
        nvme.queues = ctx.positive("device.interface.queues", q)?;
    }
    if let Some(q) = i.queue_depth {
        nvme.queue_depth = ctx.positive("device.interface.queue_depth", q)?;
    }
    if let Some(c) = i.controller_cores {
        nvme.controller_cores = ctx.positive("device.interface.controller_cores", c)?;
    }
    nvme.command_overhead = or(&i.command_overhead, nvme.command_overhead);
    Ok(nvme)
}

/// `device.interface.arbitration` and its classes, once the tenants are known: the queues'
/// classes are `queue_classes`, or each tenant's `priority` on its own queue (tenant i submits
/// to queue i when there is no CPU model), or `medium`.
pub(super) fn finish_arbitration(
    ctx: &Ctx,
    i: &InterfaceSection,
    tenants: &[TenantSection],
    nvme: &mut NvmeConfig,
    cpu_model: bool,
) -> Result<(), ConfigError> {
    let prioritized = tenants.iter().position(|t| t.priority.is_some());
    if i.arbitration != Some(ArbitrationKind::Wrr) {
        let given = [("wrr_weights", i.wrr_weights.is_some()), ("queue_classes", i.queue_classes.is_some())];
        if let Some((key, _)) = given.iter().find(|(_, g)| *g) {
            return Err(ctx.err(format!("device.interface.{key}: applies only with arbitration = \"wrr\"")));
        }
        if let Some(t) = prioritized {
            return Err(ctx.err(format!(
                "tenant[{t}] ({}).priority: a priority class needs device.interface.arbitration = \"wrr\"",
                tenants[t].name_or_default(t)
            )));
        }
        return Ok(());
    }
    let weights = match &i.wrr_weights {
        None => DEFAULT_WRR_WEIGHTS,
        Some(w) => <[u32; 3]>::try_from(w.as_slice()).map_err(|_| {
            ctx.err(format!("device.interface.wrr_weights: {} weights: expected 3 (high, medium, low)", w.len()))
        })?,
    };
    let queues = nvme.queues as usize;
    let classes = match (&i.queue_classes, prioritized) {
        (Some(_), Some(t)) => {
            return Err(ctx.err(format!(
                "tenant[{t}] ({}).priority: device.interface.queue_classes already gives each queue its class: give one",
                tenants[t].name_or_default(t)
            )))
        }
        (Some(c), None) => c.clone(),
        (None, Some(t)) => {
            if cpu_model {
                return Err(ctx.err(format!(
                    "tenant[{t}] ({}).priority: with the CPU model ([host.cpu] or a VM) requests go to the queue of the hardware thread that submits them, not a tenant's own; give device.interface.queue_classes instead",
                    tenants[t].name_or_default(t)
                )));
            }
            if tenants.len() > queues {
                return Err(ctx.err(format!(
                    "tenant[{t}] ({}).priority: {} tenants share {queues} queues: a tenant's class needs a queue of its own (device.interface.queues)",
                    tenants[t].name_or_default(t),
                    tenants.len()
                )));
            }
            (0..queues).map(|q| tenants.get(q).and_then(|t| t.priority).unwrap_or(Priority::Medium)).collect()
        }
        (None, None) => vec![Priority::Medium; queues],
    };
    nvme.arbitration = Arbitration::Wrr { weights, classes };
    nvme.arbitration.validate(nvme.queues).map_err(|e| ctx.err(e))
}

/// The null device: a capacity and a latency; every flash key is an error.
fn resolve_null(ctx: &Ctx, d: &DeviceSection, name: &str, mut n: NullConfig) -> Result<NullConfig, ConfigError> {
    reject_ssd_keys(ctx, d, name)?;
    if d.mode.is_some_and(|m| m != DriveMode::Ssd) {
        return Err(ctx.err(format!(
            "device.mode: preset '{name}' has no flash, so no FTL to run on the host: open-channel needs a flash preset"
        )));
    }
    if let Some(c) = &d.capacity {
        n.capacity_bytes = c.bytes;
        n.validate().map_err(|e| ctx.err(e))?;
    }
    n.latency = or(&d.null.latency, n.latency);
    if d.interface.link_rate.is_some() {
        return Err(ctx.err("device.interface.link_rate: the null device moves no data"));
    }
    Ok(n)
}

/// A flash preset with the scenario's keys applied, sized to the capacity asked for, and
/// checked ([`SsdConfig::validate`], then the FTL's own check with the fixes it suggests).
fn resolve_ssd(ctx: &Ctx, d: &DeviceSection, name: &str, mut c: SsdConfig) -> Result<SsdConfig, ConfigError> {
    if d.null.latency.is_some() {
        return Err(ctx.err(format!("device.null.latency: only for the null device, not preset '{name}'")));
    }
    apply_geometry(ctx, &d.geometry, &mut c.geometry)?;
    let t = &d.timing;
    for (src, dst) in [
        (&t.read, &mut c.timing.read),
        (&t.program, &mut c.timing.program),
        (&t.erase, &mut c.timing.erase),
        (&t.command, &mut c.timing.command),
    ] {
        *dst = or(src, *dst);
    }
    if let Some(r) = t.channel_rate {
        c.timing.channel_bytes_per_sec = r.0;
    }
    c.interleave_dies = t.interleave_dies.unwrap_or(c.interleave_dies);
    c.multiplane = t.multiplane.unwrap_or(c.multiplane);
    c.data_out_first = t.data_out_first.unwrap_or(c.data_out_first);
    if let Some(r) = t.encode_rate {
        c.ecc.encode_bytes_per_sec = Some(r.0);
    }
    if let Some(r) = t.decode_rate {
        c.ecc.decode_bytes_per_sec = Some(r.0);
    }
    if let Some(r) = d.interface.link_rate {
        c.host_link_bytes_per_sec = r.0;
    }
    let f = &d.ftl;
    if let Some(op) = f.overprovisioning {
        SsdConfig::check_overprovisioning(op).map_err(|e| ctx.err(e))?;
        c.overprovisioning = op;
    }
    c.mapping = resolve_mapping(ctx, f, &c.geometry)?;
    c.open_channel = d.mode.map_or(c.open_channel, |m| m == DriveMode::OpenChannel);
    c.victim_policy = f.gc_victim.unwrap_or(c.victim_policy);
    c.gc_rga_candidates = f.gc_rga_candidates.or(c.gc_rga_candidates);
    c.gc_copyback = f.gc_copyback.unwrap_or(c.gc_copyback);
    c.placement = resolve_placement(ctx, d, &c.placement)?;
    if let Some(every) = d.fdp.as_ref().and_then(|f| f.ru_update_every.as_ref()) {
        if every.bytes == 0 {
            return Err(ctx.err(format!(
                "device.fdp.ru_update_every: '{}': expected a size above zero, e.g. \"64MiB\" (bytes written through a handle between its reclaim unit updates)",
                every.text
            )));
        }
        c.ru_update_every = Some(every.bytes);
    }
    c.geometry.validate().map_err(|e| ctx.err(format!("device.geometry: {e}")))?;
    c.zns = resolve_zns(ctx, d, c.zns, &c.geometry)?;
    if c.zns.is_some() {
        reject_on_zoned(ctx, d)?;
    }
    let capacity = match &d.capacity {
        Some(_) if d.geometry.blocks_per_plane.is_some() => {
            return Err(ctx.err("device.capacity and device.geometry.blocks_per_plane both set the drive's size: give one"))
        }
        Some(cap) => Some((cap.text.as_str(), cap.bytes)),
        None => None,
    };
    if let Some(t) = f.gc_threshold_blocks {
        SsdConfig::check_gc_threshold(t).map_err(|e| ctx.err(e))?;
    }
    // What the over-provisioning decides (the size for a capacity, the default GC
    // threshold), kept apart so that a better over-provisioning can be looked for below.
    let unsized_drive = c.clone();
    size_drive(ctx, &mut c, capacity, f.gc_threshold_blocks)?;
    apply_buffer(ctx, &d.buffer, &mut c)?;
    c.validate().map_err(|e| ctx.err(e))?;
    Ftl::check_params(&c.geometry, &c.ftl_params()).map_err(|e| match e {
        FtlError::OverprovisioningTooLow { .. } => ctx.err(format!(
            "device.ftl: {e}; to fix it: {}",
            op_fixes(ctx, &unsized_drive, &c, capacity, f.gc_threshold_blocks).join(", or ")
        )),
        e => ctx.err(format!("device.ftl: {e}")),
    })?;
    Ok(c)
}

/// What a zoned drive has no use for: a capacity (its zones decide it), over-provisioning and
/// GC settings (it has no GC).
fn reject_on_zoned(ctx: &Ctx, d: &DeviceSection) -> Result<(), ConfigError> {
    if d.capacity.is_some() {
        return Err(ctx.err("device.capacity: a zoned drive's capacity is its zones (device.zns.zones x zone_size): set those, or device.geometry.blocks_per_plane for more flash"));
    }
    let f = &d.ftl;
    for (key, set) in [
        ("overprovisioning", f.overprovisioning.is_some()),
        ("gc_victim", f.gc_victim.is_some()),
        ("gc_threshold_blocks", f.gc_threshold_blocks.is_some()),
        ("gc_rga_candidates", f.gc_rga_candidates.is_some()),
        ("gc_copyback", f.gc_copyback.is_some()),
    ] {
        if set {
            return Err(ctx.err(format!(
                "device.ftl.{key}: a zoned drive has no garbage collection or spare area to set (the host resets zones to free space): remove it"
            )));
        }
    }
    Ok(())
}

/// `[device.geometry]` over the preset's.
fn apply_geometry(ctx: &Ctx, g: &GeometrySection, geo: &mut Geometry) -> Result<(), ConfigError> {
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
    for (key, src, dst) in [("page_size", &g.page_size, &mut geo.page_bytes), ("unit_size", &g.unit_size, &mut geo.unit_bytes)] {
        if let Some(v) = src {
            let bytes = v.bytes;
            *dst = u32::try_from(bytes).map_err(|_| ctx.err(format!("device.geometry.{key}: {bytes} bytes is too large")))?;
        }
    }
    Ok(())
}

/// `[device.buffer]` over the preset's, once the drive's unit size is known.
fn apply_buffer(ctx: &Ctx, b: &BufferSection, c: &mut SsdConfig) -> Result<(), ConfigError> {
    if let Some(s) = &b.size {
        c.buffer_units = u32::try_from(s.bytes / c.geometry.unit_bytes as u64)
            .map_err(|_| ctx.err("device.buffer.size: too large"))?;
    }
    if let Some(q) = b.program_queue_depth {
        c.program_queue_depth = ctx.positive("device.buffer.program_queue_depth", q)?;
    }
    c.flush = resolve_flush(ctx, b, c.flush)?;
    c.volatile_write_cache = b.volatile_write_cache.unwrap_or(c.volatile_write_cache);
    c.dram.access = or(&b.dram_access, c.dram.access);
    if let Some(r) = b.dram_rate {
        c.dram.bytes_per_sec = Some(r.0);
    }
    Ok(())
}

/// Sizes the drive for `capacity` (the key's text and its bytes), if one is given, and sets the
/// GC threshold (`threshold`, or the default for the drive's size): the settings that follow from
/// the over-provisioning.
pub(super) fn size_drive(ctx: &Ctx, c: &mut SsdConfig, capacity: Option<(&str, u64)>, threshold: Option<u32>) -> Result<(), ConfigError> {
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
pub(super) fn op_fixes(ctx: &Ctx, unsized_drive: &SsdConfig, c: &SsdConfig, capacity: Option<(&str, u64)>, threshold: Option<u32>) -> Vec<String> {
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
pub(super) const DEFAULT_CMT_PERCENT: f64 = 1.0;

pub(super) const DEFAULT_CMT_PERIOD: Nanos = Nanos::from_secs(10);

/// `device.ftl.mapping` and its DFTL keys. The CMT's size in pages is set later, once the
/// drive's size is known ([`finish_mapping`]); here it holds 0 and `cmt_size` what was asked.
pub(super) fn resolve_mapping(ctx: &Ctx, f: &FtlSection, geo: &Geometry) -> Result<MappingConfig, ConfigError> {
    match f.mapping.unwrap_or(MappingKind::Full) {
        MappingKind::Full => {
            if f.entry_size.is_some() || f.cmt.is_some() {
                return Err(ctx.err(
                    "device.ftl: entry_size and [device.ftl.cmt] apply only with mapping = \"dftl\"",
                ));
            }
            Ok(MappingConfig::Full)
        }
        MappingKind::Dftl => {
            let entry_bytes = f.entry_size.unwrap_or(4);
            SsdConfig::check_entry_size(entry_bytes, geo.page_bytes).map_err(|e| ctx.err(e))?;
            let empty = CmtSection::default();
            let s = f.cmt.as_ref().unwrap_or(&empty);
            let policy = s.policy.unwrap_or(CmtPolicyKind::Shared);
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
                Some(p) => match p.0 {
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
    }
}

/// Sets the CMT's size in translation pages now that the drive's size is known, and checks it
/// against the tenants.
pub(super) fn finish_mapping(ctx: &Ctx, f: &FtlSection, c: &mut SsdConfig, tenants: usize) -> Result<(), ConfigError> {
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

pub(super) fn resolve_flush(ctx: &Ctx, b: &BufferSection, preset: FlushPolicy) -> Result<FlushPolicy, ConfigError> {
    let watermarks = b.high_watermark.is_some() || b.low_watermark.is_some();
    match b.flush {
        None if !watermarks => Ok(preset),
        Some(FlushKind::Page) if !watermarks => Ok(FlushPolicy::Page),
        None | Some(FlushKind::Page) => Err(ctx.err(
            "device.buffer: high_watermark and low_watermark apply only with flush = \"watermark\"",
        )),
        Some(FlushKind::Watermark) => {
            let p = FlushPolicy::Watermark { high: b.high_watermark.unwrap_or(0.9), low: b.low_watermark.unwrap_or(0.7) };
            p.validate().map_err(|e| ctx.err(e))?;
            Ok(p)
        }
    }
}

pub(super) fn reject_ssd_keys(ctx: &Ctx, d: &DeviceSection, preset: &str) -> Result<(), ConfigError> {
    let g = &d.geometry;
    let t = &d.timing;
    let f = &d.ftl;
    let b = &d.buffer;
    let set = [
        ("geometry", g.channels.is_some() || g.chips_per_channel.is_some() || g.dies_per_chip.is_some()
            || g.planes_per_die.is_some() || g.blocks_per_plane.is_some() || g.pages_per_block.is_some()
            || g.page_size.is_some() || g.unit_size.is_some()),
        ("timing", t.read.is_some() || t.program.is_some() || t.erase.is_some() || t.channel_rate.is_some() || t.command.is_some() || t.interleave_dies.is_some()
            || t.multiplane.is_some() || t.encode_rate.is_some() || t.decode_rate.is_some() || t.data_out_first.is_some()),
        ("ftl", f.overprovisioning.is_some() || f.mapping.is_some() || f.gc_victim.is_some() || f.gc_threshold_blocks.is_some()
            || f.gc_rga_candidates.is_some() || f.gc_copyback.is_some() || f.entry_size.is_some() || f.cmt.is_some()),
        ("buffer", b.size.is_some() || b.program_queue_depth.is_some() || b.flush.is_some()
            || b.high_watermark.is_some() || b.low_watermark.is_some() || b.volatile_write_cache.is_some()
            || b.dram_access.is_some() || b.dram_rate.is_some()),
    ];
    let set = [set[0], set[1], set[2], set[3], ("fdp", d.fdp.is_some()), ("streams", d.streams.is_some()), ("zns", d.zns.is_some())];
    match set.iter().find(|(_, s)| *s) {
        Some((section, _)) => Err(ctx.err(format!("device.{section}: preset '{preset}' has no flash; remove this section"))),
        None => Ok(()),
    }
}

pub(super) fn resolve_precondition(ctx: &Ctx, p: &PreconditionSection) -> Result<PreconditionSpec, ConfigError> {
    let state = p.state.unwrap_or(PreconditionState::Clean);
    let fill = p.fill.unwrap_or(1.0);
    PreconditionSpec { state, fill }.validate().map_err(|e| ctx.err(e))?;
    if let (Some(f), PreconditionState::Clean) = (p.fill, state) {
        return Err(ctx.err(format!(
            "precondition.fill: {f} means nothing on a clean drive (precondition.state is \"clean\"{}): a clean drive holds no data; set state = \"sequential-fill\" or \"aged\", or drop fill",
            if p.state.is_none() { ", the default" } else { "" }
        )));
    }
    Ok(PreconditionSpec { state, fill })
}
