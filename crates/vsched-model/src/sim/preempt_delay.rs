//! Delayed preemption: a host that puts off preempting a vCPU inside a guest critical section.
//!
//! # Why
//! Lock-holder preemption happens because the hypervisor preempts a vCPU without knowing its
//! guest holds a spinlock. Paravirtual proposals let the guest say so: it flags its critical
//! sections in memory the host reads, the host gives a vCPU inside one a bounded grace before
//! preempting it, and the guest gives the pCPU back as soon as the section ends (Uhlig et al.,
//! "Towards scalable multiprocessor virtual machines", VM '04, §4 "delayed preemption";
//! Kashyap et al., "Scaling guest OS critical sections with eCS", USENIX ATC '18, which
//! extends a KVM host's CFS time slice for a vCPU in a marked section). Neither Linux nor Xen
//! ships it.
//!
//! # What is modelled
//! - The host option: `preempt_delay_ns` (`host.preempt_delay_us`, or the policy's own
//!   `Policy::preempt_delay_ns`: the KVM policies' `preempt_delay_us`); 0 turns it off.
//! - The guest: a VM with `Paravirt::critical_sections` marks a thread that holds a kernel
//!   spinlock and is not itself spinning as inside a section.
//! - When a pCPU is due to ask its policy again (a slice end, a tick's or a wake-up's
//!   reschedule) while its vCPU is inside a marked section, the request is put off for up to
//!   the bound, once per section. If the section ends first, the guest yields at once (a
//!   hypercall, `vm_exit_ns`) and the pCPU asks its policy then: the preemption, if there is
//!   one, falls outside the section. Otherwise the pCPU asks at the bound. The policy is not
//!   asked meanwhile, so a request that would have kept the vCPU anyway is put off too,
//!   harmlessly.
//!
//! Counters per VM: `preempt_delays` (requests put off), `preempt_delays_completed` (the
//! section ended within the bound), `preempt_delays_expired` (the bound came first).
//! A vCPU that blocks or yields for another reason during its grace ends it uncounted.

use super::state::Core;
use crate::domain::VcpuState;
use crate::ids::{PcpuId, VcpuId};

impl Core {
    /// `p` is about to ask its policy for a decision: false to go ahead, true if the request
    /// is put off because its vCPU is inside a marked critical section (a reschedule is then
    /// re-requested at the end of the grace).
    pub(super) fn defer_preemption(&mut self, p: PcpuId) -> bool {
        let bound = self.preempt_delay_ns;
        let Some(v) = self.pcpus[p].curr.filter(|_| bound > 0) else { return false };
        let now = self.now();
        let (state, dom, granted) = (self.vcpus[v].state, self.vcpus[v].dom, self.vcpus[v].delay_until);
        if state != VcpuState::Running(p) {
            return false;
        }
        if let Some(until) = granted {
            if now < until {
                // Another request during the grace: keep the grace's end.
                self.rearm_resched(p, until);
                return true;
            }
            self.vcpus[v].delay_until = None;
            self.doms[dom].preempt_delays_expired += 1;
            return false;
        }
        if !self.in_marked_section(v) {
            return false;
        }
        let until = now + bound;
        self.vcpus[v].delay_until = Some(until);
        self.doms[dom].preempt_delays += 1;
        self.rearm_resched(p, until);
        true
    }

    /// The thread of running `v` left a critical section: if it was granted a grace, the
    /// guest yields now (a hypercall) and the pCPU asks its policy.
    pub(super) fn section_ended(&mut self, v: VcpuId) {
        let vc = &self.vcpus[v];
        let (Some(_), VcpuState::Running(p)) = (vc.delay_until, vc.state) else { return };
        if self.in_marked_section(v) {
            return; // still holding another kernel lock
        }
        self.vcpus[v].delay_until = None;
        self.doms[self.vcpus[v].dom].preempt_delays_completed += 1;
        self.stall(v, self.host.vm_exit_ns);
        let at = self.vcpus[v].run_from;
        self.rearm_resched(p, at);
    }

    /// Whether `v`'s current thread is in a critical section its guest marks: it holds a
    /// kernel lock and is not spinning for another.
    fn in_marked_section(&self, v: VcpuId) -> bool {
        let vc = &self.vcpus[v];
        let th = &self.threads[vc.curr];
        self.doms[vc.dom].info.pv.critical_sections && th.held.iter().any(|&(_, kernel)| kernel) && !th.state.spinning()
    }

    /// Replaces `p`'s pending reschedule request by one at `at`.
    fn rearm_resched(&mut self, p: PcpuId, at: vsched_engine::Time) {
        self.pcpus[p].resched_due = None;
        self.request_resched(p, at);
    }
}
