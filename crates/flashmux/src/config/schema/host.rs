//! The `[host]` section: the host block layer's queue depth and overheads, the I/O scheduler and
//! its parameters (`[host.cfq]`, `[host.mcfq]`, `[host.fair]`, `[host.hwabc]`), the CPU model
//! (`[host.cpu]`).

use super::*;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct HostSection {
    pub(super) queue_depth: Option<u32>,
    pub(super) scheduler: Option<String>,
    /// Linux's `nomerges`: 0, 1 or 2.
    pub(super) nomerges: Option<u8>,
    /// The largest merged request, KiB.
    pub(super) max_sectors_kb: Option<u64>,
    pub(super) submit_overhead: Option<Duration>,
    pub(super) completion_overhead: Option<Duration>,
    pub(super) cpu: Option<CpuSection>,
    #[serde(rename = "mq-deadline")]
    pub(super) deadline: Option<DeadlineSection>,
    pub(super) cfq: Option<CfqSection>,
    pub(super) mcfq: Option<McfqSection>,
    pub(super) fair: Option<FairSection>,
    pub(super) hwabc: Option<HwabcSection>,
    pub(super) zoned_ftl: Option<ZonedFtlSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct ZonedFtlSection {
    pub(super) spare_zones: Option<u32>,
    pub(super) gc_threshold_zones: Option<u32>,
    /// A log per tenant (default: one shared).
    pub(super) per_tenant: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct HwabcSection {
    pub(super) period: Option<Duration>,
    pub(super) window: Option<u32>,
    pub(super) windows: Option<u32>,
    /// Smoothing of the update-write run lengths.
    pub(super) alpha: Option<f64>,
    /// `G = a·ln(R) + b`.
    pub(super) a: Option<f64>,
    pub(super) b: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FairSection {
    /// Budget refill period.
    pub(super) period: Option<Duration>,
    /// Completed requests per regression window.
    pub(super) window: Option<u32>,
    /// Windows in each least-squares fit.
    pub(super) windows: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct DeadlineSection {
    pub(super) read_expire: Option<Duration>,
    pub(super) write_expire: Option<Duration>,
    pub(super) fifo_batch: Option<u32>,
    pub(super) writes_starved: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct CfqSection {
    pub(super) slice_sync: Option<Duration>,
    pub(super) slice_idle: Option<Duration>,
    pub(super) target_latency: Option<Duration>,
    pub(super) quantum: Option<u32>,
    pub(super) fifo_expire_write: Option<Duration>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct McfqSection {
    pub(super) interval: Option<Duration>,
    pub(super) window: Option<Duration>,
    pub(super) min_scale: Option<f64>,
    pub(super) max_scale: Option<f64>,
    /// `"printed"` (Fig. 5's pseudocode) or `"compounding"`.
    pub(super) reading: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct CpuSection {
    pub(super) cores: Option<u32>,
    pub(super) threads_per_core: Option<u32>,
    /// The fixed slice of the CPU model before CFS's: rejected with a pointer to its successors.
    pub(super) quantum: Option<Duration>,
    pub(super) latency: Option<Duration>,
    pub(super) min_granularity: Option<Duration>,
    pub(super) wakeup_granularity: Option<Duration>,
    pub(super) context_switch: Option<Duration>,
    pub(super) wakeup: Option<Duration>,
    pub(super) spin: Option<Duration>,
    pub(super) syscall: Option<Duration>,
    pub(super) app: Option<Duration>,
    pub(super) smt_slowdown: Option<f64>,
}

pub(super) fn resolve_host(ctx: &Ctx, h: &HostSection, device_preset: &str) -> Result<HostConfig, ConfigError> {
    let scheduler = match &h.scheduler {
        None => SchedulerKind::None,
        Some(s) => SchedulerKind::from_name(s).ok_or_else(|| {
            ctx.err(format!("host.scheduler: unknown scheduler '{s}': expected one of {}", SchedulerKind::NAMES.join(", ")))
        })?,
    };
    let scheduler = resolve_scheduler_params(ctx, h, scheduler, device_preset)?;
    if h.cpu.as_ref().is_some_and(|c| c.quantum.is_some()) {
        return Err(ctx.err(
            "host.cpu.quantum: no longer a key: the scheduler is CFS's, whose slice is latency / runnable threads, \
             at least min_granularity; give host.cpu.min_granularity (and latency, wakeup_granularity) instead",
        ));
    }
    let host = HostConfig {
        queue_depth: h.queue_depth.unwrap_or(DEFAULT_HOST_QUEUE_DEPTH),
        scheduler,
        merge: MergeConfig {
            nomerges: h.nomerges.unwrap_or(MergeConfig::DEFAULT.nomerges),
            max_bytes: h.max_sectors_kb.map_or(MergeConfig::DEFAULT.max_bytes, |k| k.saturating_mul(1024)),
        },
        submit_overhead: or(&h.submit_overhead, DEFAULT_SUBMIT_OVERHEAD),
        completion_overhead: or(&h.completion_overhead, DEFAULT_COMPLETION_OVERHEAD),
        cpu: h.cpu.as_ref().map(resolve_cpu),
        // The spare zones' default needs the drive's zone count: `resolve_zoned_ftl`.
        zoned_ftl: h.zoned_ftl.as_ref().map(|z| crate::host::ZonedFtlParams {
            spare_zones: z.spare_zones.unwrap_or(0),
            gc_threshold_zones: z.gc_threshold_zones.unwrap_or(2),
            // The tenants' count, once they are known (`resolve`).
            tenant_logs: u32::from(z.per_tenant == Some(true)),
        }),
    };
    host.validate().map_err(|e| ctx.err(e))?;
    Ok(host)
}

/// `[host.cfq]` and `[host.mcfq]`: each only with a scheduler that uses it.
pub(super) fn resolve_scheduler_params(ctx: &Ctx, h: &HostSection, kind: SchedulerKind, device_preset: &str) -> Result<SchedulerKind, ConfigError> {
    let name = kind.name();
    if h.deadline.is_some() && !matches!(kind, SchedulerKind::MqDeadline(_)) {
        return Err(ctx.err(format!("host.mq-deadline: applies only with scheduler = \"mq-deadline\" (the scheduler is '{name}')")));
    }
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
    let cfq = |p: CfqParams| h.cfq.as_ref().map_or(p, |c| resolve_cfq(c, p));
    Ok(match kind {
        SchedulerKind::None => kind,
        SchedulerKind::MqDeadline(p) => SchedulerKind::MqDeadline(match &h.deadline {
            Some(d) => DeadlineParams {
                read_expire: or(&d.read_expire, p.read_expire),
                write_expire: or(&d.write_expire, p.write_expire),
                fifo_batch: d.fifo_batch.unwrap_or(p.fifo_batch),
                writes_starved: d.writes_starved.unwrap_or(p.writes_starved),
            },
            None => p,
        }),
        SchedulerKind::Cfq(p) => SchedulerKind::Cfq(cfq(p)),
        SchedulerKind::Mcfq(p, m) => {
            SchedulerKind::Mcfq(cfq(p), h.mcfq.as_ref().map_or(Ok(m), |s| resolve_mots(ctx, s, m))?)
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
            SchedulerKind::Hwabc(p, hw)
        }
    })
}

/// `period`, `window` and `windows` of `[host.fair]` or `[host.hwabc]`.
pub(super) fn resolve_budget(
    ctx: &Ctx,
    section: &str,
    (period, window, windows): (&Option<Duration>, Option<u32>, Option<u32>),
    mut p: BudgetParams,
) -> Result<BudgetParams, ConfigError> {
    if let Some(v) = period {
        p.period = v.0;
        if p.period < Nanos::from_us(100) {
            return Err(ctx.err(format!("{section}.period: {} is too short: expected at least 100us (a refill per request or more)", v.1)));
        }
    }
    if let Some(w) = window {
        p.cost.window_requests = ctx.positive(&format!("{section}.window"), w)?;
    }
    if let Some(n) = windows {
        p.cost.windows = ctx.positive(&format!("{section}.windows"), n)?;
    }
    Ok(p)
}

/// `[host.cfq]` over `d` (its rules are [`CfqParams::validate`]'s).
pub(super) fn resolve_cfq(c: &CfqSection, d: CfqParams) -> CfqParams {
    CfqParams {
        slice_sync: or(&c.slice_sync, d.slice_sync),
        slice_idle: or(&c.slice_idle, d.slice_idle),
        target_latency: or(&c.target_latency, d.target_latency),
        quantum: c.quantum.unwrap_or(d.quantum),
        fifo_expire_write: or(&c.fifo_expire_write, d.fifo_expire_write),
    }
}

/// `[host.mcfq]` over `d`: the window is given as a duration, a whole number of sampling
/// intervals (the other rules are [`MotsParams::validate`]'s).
pub(super) fn resolve_mots(ctx: &Ctx, m: &McfqSection, d: MotsParams) -> Result<MotsParams, ConfigError> {
    let mut p = MotsParams {
        interval: or(&m.interval, d.interval),
        window: d.window,
        min_scale: m.min_scale.unwrap_or(d.min_scale),
        max_scale: m.max_scale.unwrap_or(d.max_scale),
        compounding: match m.reading.as_deref() {
            None => d.compounding,
            Some("printed") => false,
            Some("compounding") => true,
            Some(other) => {
                return Err(ctx.err(format!(
                    "host.mcfq.reading: unknown reading '{other}': expected \"printed\" (Fig. 5's pseudocode: the multiplier scales CFQ's slice) or \"compounding\" (it scales the slice as it then is)"
                )))
            }
        },
    };
    p.validate().map_err(|e| ctx.err(e))?;
    if let Some(v) = &m.window {
        let (w, interval) = (v.0, p.interval);
        if w < interval || w.0 % interval.0 != 0 {
            return Err(ctx.err(format!(
                "host.mcfq.window: {} is not a whole number of sampling intervals ({interval}): the window is made of samples",
                v.1
            )));
        }
        p.window = u32::try_from(w.0 / interval.0).map_err(|_| ctx.err("host.mcfq.window: too many samples"))?;
    }
    Ok(p)
}

/// `[host.cpu]` over paper A's host (its rules are [`CpuConfig::validate`]'s); CFS's tunables
/// default to Linux's for the number of hardware threads.
pub(super) fn resolve_cpu(c: &CpuSection) -> CpuConfig {
    let d = CpuConfig::default();
    let (cores, threads_per_core) = (c.cores.unwrap_or(d.cores), c.threads_per_core.unwrap_or(d.threads_per_core));
    let (latency, min_granularity, wakeup_granularity) = CpuConfig::cfs_tunables(cores.saturating_mul(threads_per_core));
    CpuConfig {
        cores,
        threads_per_core,
        latency: or(&c.latency, latency),
        min_granularity: or(&c.min_granularity, min_granularity),
        wakeup_granularity: or(&c.wakeup_granularity, wakeup_granularity),
        context_switch: or(&c.context_switch, d.context_switch),
        wakeup: or(&c.wakeup, d.wakeup),
        spin: or(&c.spin, d.spin),
        syscall: or(&c.syscall, d.syscall),
        app: or(&c.app, d.app),
        smt_slowdown: c.smt_slowdown.unwrap_or(d.smt_slowdown),
    }
}
