//! The `[virt]` section: the virtualization mode and the options of its I/O path (notification,
//! emulation, completion, exits and their costs), and the check that the host has the hardware
//! threads the VMs' threads need.

use super::*;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct VirtSection {
    pub(super) mode: Option<VirtMode>,
    pub(super) vcpus: Option<u32>,
    pub(super) notify: Option<Notify>,
    pub(super) emulation: Option<Emulation>,
    pub(super) completion: Option<Completion>,
    pub(super) queue_size: Option<u32>,
    pub(super) max_merge: Option<Size>,
    pub(super) nomerges: Option<u8>,
    pub(super) batch_window: Option<Duration>,
    pub(super) pin_vcpus: Option<bool>,
    pub(super) pin_iothreads: Option<bool>,
    pub(super) vq_add: Option<Duration>,
    pub(super) vq_pop: Option<Duration>,
    pub(super) request_cost: Option<Duration>,
    pub(super) vq_push: Option<Duration>,
    pub(super) userspace_switch: Option<Duration>,
    pub(super) aio: Option<Aio>,
    pub(super) poll_detect: Option<Duration>,
    pub(super) ide_submit_exits: Option<u32>,
    pub(super) ide_complete_exits: Option<u32>,
    pub(super) exits: Option<ExitsSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct ExitsSection {
    pub(super) io_inst: Option<ExitCostSection>,
    pub(super) ext_int: Option<ExitCostSection>,
    pub(super) msr_write: Option<ExitCostSection>,
    pub(super) hlt: Option<ExitCostSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct ExitCostSection {
    pub(super) direct: Option<Duration>,
    pub(super) indirect: Option<Duration>,
    pub(super) sync: Option<Duration>,
}

pub(super) fn resolve_virt(ctx: &Ctx, v: &VirtSection) -> Result<VirtConfig, ConfigError> {
    let d = VirtConfig::default();
    let mode = v.mode.unwrap_or(VirtMode::BareMetal);
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
    let vcpus = v.vcpus.unwrap_or(d.vcpus);
    let mut exits = d.exits;
    if let Some(e) = &v.exits {
        for (r, sec) in ExitReason::ALL.iter().zip([&e.io_inst, &e.ext_int, &e.msr_write, &e.hlt]) {
            let Some(sec) = sec else { continue };
            let c = &mut exits[r.index()];
            c.direct = or(&sec.direct, c.direct);
            c.indirect = or(&sec.indirect, c.indirect);
            c.sync = or(&sec.sync, c.sync);
        }
    }
    let c = VirtConfig {
        mode,
        vcpus,
        notify: v.notify.unwrap_or(d.notify),
        emulation: v.emulation.unwrap_or(if mode == VirtMode::IdeEmulation { Emulation::Userspace } else { d.emulation }),
        completion: v.completion.unwrap_or(d.completion),
        queue_size: v.queue_size.unwrap_or(d.queue_size),
        max_merge_bytes: v.max_merge.as_ref().map_or(d.max_merge_bytes, |m| m.bytes),
        nomerges: v.nomerges.unwrap_or(d.nomerges),
        batch_window: or(&v.batch_window, d.batch_window),
        pin_vcpus: v.pin_vcpus.unwrap_or(d.pin_vcpus),
        pin_iothreads: v.pin_iothreads.unwrap_or(d.pin_iothreads),
        vq_add: or(&v.vq_add, d.vq_add),
        vq_pop: or(&v.vq_pop, d.vq_pop),
        request_cost: or(&v.request_cost, d.request_cost),
        vq_push: or(&v.vq_push, d.vq_push),
        userspace_switch: or(&v.userspace_switch, d.userspace_switch),
        aio: v.aio.unwrap_or(d.aio),
        poll_detect: or(&v.poll_detect, d.poll_detect),
        ide_submit_exits: v.ide_submit_exits.unwrap_or(d.ide_submit_exits),
        ide_complete_exits: v.ide_complete_exits.unwrap_or(d.ide_complete_exits),
        exits,
    };
    c.validate().map_err(|e| ctx.err(e))?;
    Ok(c)
}

/// Polling threads each own a hardware thread: at least one must be left for everything else.
pub(super) fn check_threads(ctx: &Ctx, cpu: &CpuConfig, virt: &VirtConfig, vms: usize, collected: &mut Collected) -> Result<(), ConfigError> {
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
