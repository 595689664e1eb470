//! Guest IPIs (`ipi_sync`, a TLB shootdown).
//!
//! The sender interrupts every other vCPU of its VM that has the address space live, then
//! spins in kernel mode until each has acknowledged. A halted vCPU (blocked) is in lazy-TLB
//! mode and is skipped, as Linux skips lazy CPUs. A running target
//! takes the interrupt one IPI latency later; a preempted one when it is next scheduled in
//! (virtual interrupts are injected at VM entry); a target that halts first handles it on
//! the way (interrupts are enabled at `sti; hlt`). The acknowledgement is sent as the
//! handler starts; the handler then costs the target `ipi_handler_ns` of no progress.
//!
//! Exits: without IPI virtualization every IPI the sender writes to its virtual APIC (one
//! ICR write per target in x2APIC physical mode, `__x2apic_send_IPI_mask`) traps, costing
//! the sender `vm_exit_ns` each; without posted interrupts the target takes an exit to
//! have the interrupt injected, `vm_exit_ns` more before its handler.
//!
//! Paravirtual features of the guest (`Paravirt`, arch/x86/kernel/kvm.c):
//! - `tlb_flush` (`kvm_flush_tlb_multi`, Linux ≥ 4.16): a target the guest sees preempted
//!   (steal time's `preempted` flag, set while its vCPU is runnable but not running) is not
//!   interrupted; the guest sets `KVM_VCPU_FLUSH_TLB` in its steal-time record instead, and KVM
//!   flushes its TLB at its next entry (`record_steal_time`). That flush costs the target no
//!   modelled time (the refill that follows is the same either way); it is counted.
//! - `sched_yield` (`kvm_smp_send_call_func_ipi`, Linux ≥ 5.2): after sending, the sender
//!   looks for a target that is preempted and, for the first one, makes the
//!   `KVM_HC_SCHED_YIELD` hypercall (an exit, `vm_exit_ns`) asking the host to run it
//!   (`YieldReason::SchedYield`). With `tlb_flush` on, a shootdown has no preempted target
//!   left, so only shootdowns of guests without it yield.

use super::events::Ev;
use super::interpret::Step;
use super::state::{Core, ThreadState};
use crate::domain::VcpuState;
use crate::ids::{DomId, VcpuId};
use crate::policy::YieldReason;
use crate::trace::{FlowKind, Track};

impl Core {
    /// `ipi_sync`: interrupt every other vCPU of the domain that has the address space live
    /// and spin until all have acknowledged (nothing to wait for if there is none).
    pub(super) fn ipi_sync(&mut self, v: VcpuId, d: DomId) -> Step {
        let now = self.now();
        let pv = self.doms[d].info.pv;
        let mut deferred = 0;
        let targets: Vec<VcpuId> = self.doms[d]
            .span
            .clone()
            .filter(|&u| {
                u != v
                    && match self.vcpus[u].state {
                        // A polling vCPU is idle for its guest: lazy TLB (`halt_poll`).
                        _ if self.idle_polling(u) => false,
                        VcpuState::Running(_) => true,
                        VcpuState::Runnable if pv.tlb_flush => {
                            deferred += 1;
                            false
                        }
                        VcpuState::Runnable => true,
                        VcpuState::Blocked | VcpuState::Offline => false,
                    }
            })
            .collect();
        self.doms[d].pv_tlb_flushes_deferred += deferred;
        if targets.is_empty() {
            return Step::Next;
        }
        self.doms[d].ipi_syncs += 1;
        if !self.host.ipi_virtualization {
            self.stall(v, targets.len() as u64 * self.host.vm_exit_ns);
        }
        self.curr_thread_mut(v).state = ThreadState::SpinIpi { pending: targets.len() as u32 };
        self.vcpus[v].ple_from = now.max(self.vcpus[v].run_from);
        for &u in &targets {
            self.send_irq(v, u);
        }
        let preempted = targets.iter().copied().find(|&u| self.vcpus[u].state == VcpuState::Runnable);
        if let Some(target) = preempted.filter(|_| pv.sched_yield) {
            self.stall(v, self.host.vm_exit_ns); // the hypercall
            self.doms[d].pv_sched_yields += 1;
            self.to_yield.push_back((v, YieldReason::SchedYield { target }));
        }
        self.wait_running(v)
    }

    /// `sender` interrupts `target` (an `ipi_sync`): the IPI leaves when the sender is back
    /// from its exits, and reaches a running target one latency later, plus the target's own
    /// exit without posted interrupts (counted as delivery: the target's guest code is not
    /// stopped for that exit, a sub-µs approximation).
    fn send_irq(&mut self, sender: VcpuId, target: VcpuId) {
        let now = self.now();
        self.with_trace(|t| t.flow_sent(FlowKind::GuestIpi, (sender, target), Track::Vcpu(sender), now));
        let sent = now.max(self.vcpus[sender].run_from);
        let latency = self.host.ipi_latency_ns + self.receive_exit_ns();
        let vc = &mut self.vcpus[target];
        vc.irqs.push(sender);
        if let VcpuState::Running(_) = vc.state {
            let (at, gen) = ((sent + latency).max(vc.run_from), vc.irq_gen);
            self.post(at, Ev::Irq { v: target, gen });
        }
    }

    /// Running vCPU `v` takes its pending interrupts: it acknowledges each sender at once,
    /// then spends `ipi_handler_ns` in the handler before its own code resumes.
    pub(super) fn handle_irqs(&mut self, v: VcpuId) {
        self.sync(v);
        self.stall(v, self.host.ipi_handler_ns + self.receive_exit_ns());
        for s in std::mem::take(&mut self.vcpus[v].irqs) {
            self.ipi_taken(s, v);
        }
        self.arm(v);
    }

    /// The exit a running vCPU takes to have an interrupt injected (none if posted).
    fn receive_exit_ns(&self) -> vsched_engine::Time {
        if self.host.posted_interrupts {
            0
        } else {
            self.host.vm_exit_ns
        }
    }

    /// `target` takes the IPI `sender` sent it (in its handler, or on its way to halt) and
    /// acknowledges it.
    pub(super) fn ipi_taken(&mut self, sender: VcpuId, target: VcpuId) {
        let now = self.now();
        self.with_trace(|t| t.flow_arrived(FlowKind::GuestIpi, (sender, target), Track::Vcpu(target), now));
        self.ack(sender);
    }

    /// One acknowledgement reaches vCPU `sender`; the last one ends its thread's wait (a
    /// thread waiting for acknowledgements keeps its vCPU: preemption is disabled).
    fn ack(&mut self, sender: VcpuId) {
        let t = self.vcpus[sender].curr;
        if let ThreadState::SpinIpi { pending } = &mut self.threads[t].state {
            *pending -= 1;
            if *pending == 0 {
                self.release_waiter(t);
            }
        }
    }
}
