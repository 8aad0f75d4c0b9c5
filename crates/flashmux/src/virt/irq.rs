//! Crossings between a guest and the host: the guest's notification (kick) of new requests,
//! VM exits and what they cost, and the completion path back — the I/O thread's interrupt, its
//! delivery to a vCPU, the guest's handler, and the IPIs a guest sends to wake another vCPU.
//!
//! # Model
//! - **Kick**: after adding a batch, the guest notifies — with `notify = "exit"` an IO_INST exit
//!   that signals the I/O thread's eventfd, suppressed while the I/O thread is inside the
//!   queue's handler or collecting a batch (virtio's `VRING_USED_F_NO_NOTIFY`); with
//!   `notify = "poll"` no exit: the polling thread notices within `poll_detect`.
//! - **Exit**: the exiting vCPU pays `direct + indirect` (+ `userspace_switch` when emulated in
//!   the QEMU process); every other vCPU of the VM that is in a burst is held up by `sync`.
//! - **Interrupt**: raised once per virtqueue until handled; a running vCPU takes an EXT_INT exit
//!   (unless `completion = "exitless"`), a sleeping one is woken. The handler completes each
//!   used entry (`complete` each), checks the ring again, and ends with an EOI (an MSR_WRITE exit
//!   with `inject`). Completing a request of a process on another vCPU sends it an IPI (an
//!   MSR_WRITE exit); so does a vCPU handing a mutex to a halted vCPU.
//!
//! # Example (default exit costs, no sync cost)
//! A kick is an IO_INST exit: 1.5 us direct + 1.0 us indirect = 2.5 us of the vCPU. The
//! interrupt on a running vCPU: EXT_INT 1.2 + 0.8 = 2.0 us, the handler, the EOI 1.0 + 0.5 = 1.5 us.
//! With `exitless` both exits vanish; with `poll` the kick does.
//!
//! Parameters (`[virt]`): `notify`, `completion`, `emulation`, `poll_detect` (ns), `exits.*`
//! (`direct`, `indirect`, `sync`, ns), `userspace_switch` (ns), `ide_complete_exits`.
//! Source: paper B (Table 1: exit costs; ELI exitless interrupts; polling), KVM's exit reasons,
//! virtio-pci notification and MSI-X interrupt delivery, x2APIC EOI and ICR writes.

use super::ids::{LockId, ThreadId, VcpuId, VqId};
use super::machine::{Machine, VirtOutbox};
use super::thread::{Act, Op, Role, TState};
use super::{Completion, Emulation, ExitReason, Notify, VirtMode};
use crate::units::{Nanos, ReqId, SimTime};

impl Machine {
    /// The guest decides whether to notify the host of new requests in virtqueue `q`.
    pub(super) fn kick(&mut self, now: SimTime, t: ThreadId, q: VqId, out: &mut VirtOutbox) {
        let io = self.vqs[q].iothread;
        let it = self.iots[io].thread;
        match self.virt.notify {
            Notify::Poll => self.notify(now, it, out),
            Notify::Exit => {
                // Notifications are off (virtio's VRING_USED_F_NO_NOTIFY) while the I/O thread
                // is in the queue's handler or collecting a batch.
                let io = &self.iots[io];
                if !io.popping && io.window_end.is_none() {
                    self.vms[self.vqs[q].vm].kicks += 1;
                    let ops = [Op::Exit(ExitReason::IoInst, false), Op::Burst(Nanos::ZERO, Act::KickDone(q))];
                    self.push_front(t, &ops);
                }
            }
        }
    }

    /// Counts an exit on vCPU thread `t`, holds up the VM's other running vCPUs by its sync
    /// cost, and returns the exiting vCPU's own time.
    pub(super) fn exit(&mut self, t: ThreadId, reason: ExitReason, userspace: bool, out: &mut VirtOutbox) -> Nanos {
        let Role::Vcpu(v) = self.cpu.thread(t).role else { panic!("exit on a thread that is not a vCPU") };
        let vm = self.vcpus[v].vm;
        let c = self.virt.exit_cost(reason);
        self.count_exit(v, reason);
        if c.sync.0 > 0 {
            for k in 0..self.vms[vm].vcpus.len() {
                let u = self.vms[vm].vcpus[k];
                let ut = self.vcpus[u].thread;
                if u != v && self.cpu.delay_burst(ut, c.sync, &mut out.events) {
                    self.vms[vm].exits[reason.index()].sync_ns += c.sync.0;
                }
            }
        }
        let user = if userspace { self.virt.userspace_switch } else { Nanos::ZERO };
        Nanos(c.direct.0 + c.indirect.0 + user.0)
    }

    pub(super) fn count_exit(&mut self, v: VcpuId, reason: ExitReason) {
        let vm = self.vcpus[v].vm;
        let c = self.virt.exit_cost(reason);
        let st = &mut self.vms[vm].exits[reason.index()];
        st.count += 1;
        st.direct_ns += c.direct.0;
        st.indirect_ns += c.indirect.0;
    }

    /// Thread `t` releases mutex `l`; a vCPU that hands it to a halted vCPU wakes that one with
    /// an IPI (an x2APIC ICR write, an exit).
    pub(super) fn release(&mut self, now: SimTime, t: ThreadId, l: LockId, out: &mut VirtOutbox) {
        let Some(w) = self.cpu.release(now, t, l, &mut out.events) else { return };
        if let (Role::Vcpu(v), Role::Vcpu(_)) = (self.cpu.thread(t).role, self.cpu.thread(w).role) {
            self.vms[self.vcpus[v].vm].ipis += 1;
            self.push_front(t, &[Op::Exit(ExitReason::MsrWrite, false)]);
        }
    }

    /// The guest's interrupt handler for virtqueue `q` starts (after IDE's status reads).
    pub(super) fn irq_start(&mut self, t: ThreadId, q: VqId) {
        let mut ops = Vec::new();
        if self.virt.mode == VirtMode::IdeEmulation {
            let user = self.virt.emulation == Emulation::Userspace;
            ops.extend(std::iter::repeat_n(Op::Exit(ExitReason::IoInst, user), self.virt.ide_complete_exits as usize));
        }
        self.handler_ops(q, &mut ops);
        self.push_front(t, &ops);
    }

    /// The handler looks at the used ring again: more to complete, or the end (an EOI).
    pub(super) fn irq_end(&mut self, t: ThreadId, q: VqId) {
        let mut ops = Vec::new();
        if self.vqs[q].has_used() {
            self.handler_ops(q, &mut ops);
        } else {
            self.vqs[q].irq_done();
            if self.virt.completion == Completion::Inject {
                ops.push(Op::Exit(ExitReason::MsrWrite, false));
            }
        }
        self.push_front(t, &ops);
    }

    fn handler_ops(&mut self, q: VqId, ops: &mut Vec<Op>) {
        for r in self.vqs[q].take_used() {
            ops.push(Op::Burst(self.complete, Act::Completed(r)));
        }
        ops.push(Op::Burst(Nanos::ZERO, Act::IrqEnd(q)));
    }

    /// The I/O thread signals virtqueue `q`'s interrupt (irqfd), unless it is raised already.
    pub(super) fn raise_irq(&mut self, now: SimTime, q: VqId, out: &mut VirtOutbox) {
        if !self.vqs[q].raise() {
            return;
        }
        let v = self.vqs[q].irq_vcpu;
        self.vms[self.vqs[q].vm].interrupts += 1;
        self.vcpus[v].irqs.push_back(q);
        self.deliver(now, v, self.virt.completion == Completion::Exitless, out);
    }

    /// An interrupt for vCPU `v`: a running vCPU takes an EXT_INT exit unless delivery is
    /// exitless; a halted one is woken.
    fn deliver(&mut self, now: SimTime, v: VcpuId, exitless: bool, out: &mut VirtOutbox) {
        let t = self.vcpus[v].thread;
        self.vcpus[v].hlt_done = false;
        match self.cpu.thread(t).state {
            TState::OnCpu(_) => {
                if !exitless {
                    self.vcpus[v].ext_int = true;
                }
            }
            _ => self.notify(now, t, out),
        }
    }

    /// The guest completed used entry `r` (and the requests merged into it) on vCPU thread `t`:
    /// its slot frees, and each request goes to the vCPU of the process that issued it.
    pub(super) fn guest_complete(&mut self, now: SimTime, t: ThreadId, r: ReqId, out: &mut VirtOutbox) {
        let Role::Vcpu(v) = self.cpu.thread(t).role else { unreachable!("only a vCPU completes guest requests") };
        let q = self.reqs[r].vq.expect("a used entry went through a virtqueue");
        self.vqs[q].free_slot();
        self.restart_queue(now, q, v, out);
        for x in self.reqs.chain(r) {
            let u = self.job_vcpu[self.reqs[x].job].expect("a guest request's job runs on a vCPU");
            let first = self.vcpus[u].reaps.is_empty();
            self.vcpus[u].reaps.push_back(x);
            if u != v && first {
                // Waking the process on another vCPU: an IPI (an x2APIC ICR write).
                self.vms[self.vcpus[v].vm].ipis += 1;
                self.push_front(t, &[Op::Exit(ExitReason::MsrWrite, false)]);
                self.deliver(now, u, false, out);
            }
        }
    }

    /// A virtqueue slot freed: let a vCPU with waiting requests dispatch one.
    fn restart_queue(&mut self, now: SimTime, q: VqId, current: VcpuId, out: &mut VirtOutbox) {
        let vcpus = &self.vcpus;
        let Some(u) = self.vqs[q].next_waiting(|u| !vcpus[u].gqueue.is_empty()) else { return };
        if u != current {
            let ut = self.vcpus[u].thread;
            self.vcpus[u].hlt_done = false;
            self.notify(now, ut, out);
        }
    }
}
