//! The simulator as a [`World`]: what one host's policy sees and does. The policy numbers
//! its host's pCPUs, vCPUs and domains from 0; the core numbers them across all hosts, so
//! this view translates every id on the way in and out.

use vsched_engine::{StreamRng, Time};

use super::accounting::asks_for_a_pcpu;
use super::events::Ev;
use super::state::{Core, ThreadState, Vcpu};
use super::RunError;
use crate::cx::{Cx, World};
use crate::domain::{DomainInfo, VcpuState};
use crate::ids::{DomId, PcpuId, VcpuId};
use crate::trace::{CounterOf, Instant, Trace};

/// Host `host`'s view of the core during one callback, on global pCPU `here` if any.
pub(super) struct HostView<'a> {
    core: &'a mut Core,
    host: usize,
    /// Global id of `here`.
    here: Option<PcpuId>,
    /// The host's first global pCPU, vCPU and domain ids, and its counts (read once:
    /// callbacks ask for them on every step).
    pcpu_base: PcpuId,
    vcpu_base: VcpuId,
    dom_base: DomId,
    n_pcpus: usize,
    n_vcpus: usize,
    n_doms: usize,
}

impl<'a> HostView<'a> {
    pub(super) fn new(core: &'a mut Core, host: usize, here: Option<PcpuId>) -> Self {
        let hs = &core.hosts[host];
        let (pcpu_base, vcpu_base, dom_base) = (hs.pcpus.start, hs.vcpus.start, hs.doms.start);
        let (n_pcpus, n_vcpus, n_doms) = (hs.pcpus.len(), hs.vcpus.len(), hs.doms.len());
        HostView { core, host, here, pcpu_base, vcpu_base, dom_base, n_pcpus, n_vcpus, n_doms }
    }

    fn vc(&self, v: VcpuId) -> &Vcpu {
        &self.core.vcpus[self.vcpu_base + v]
    }
}

/// Runs `f` with host `host`'s policy context, on global pCPU `here` if any.
#[inline]
pub(super) fn with_cx<R>(core: &mut Core, host: usize, here: Option<PcpuId>, f: impl FnOnce(&mut Cx) -> R) -> R {
    let mut view = HostView::new(core, host, here);
    f(&mut Cx::new(&mut view))
}

impl World for HostView<'_> {
    fn now(&self) -> Time {
        self.core.queue.now()
    }
    fn n_pcpus(&self) -> usize {
        self.n_pcpus
    }
    fn socket_of(&self, p: PcpuId) -> usize {
        self.core.host.socket_of(p)
    }
    fn core_of(&self, p: PcpuId) -> usize {
        self.core.host.core_of(p)
    }
    fn n_vcpus(&self) -> usize {
        self.n_vcpus
    }
    fn n_domains(&self) -> usize {
        self.n_doms
    }
    fn domain(&self, d: DomId) -> &DomainInfo {
        &self.core.doms[self.dom_base + d].info
    }
    fn dom_of(&self, v: VcpuId) -> DomId {
        self.vc(v).dom - self.dom_base
    }
    fn vcpu_index(&self, v: VcpuId) -> usize {
        self.vc(v).index
    }
    fn state(&self, v: VcpuId) -> VcpuState {
        match self.vc(v).state {
            VcpuState::Running(p) => VcpuState::Running(p - self.pcpu_base),
            other => other,
        }
    }
    fn last_pcpu(&self, v: VcpuId) -> Option<PcpuId> {
        self.vc(v).last_pcpu.map(|p| p - self.pcpu_base)
    }
    fn curr(&self, p: PcpuId) -> Option<VcpuId> {
        self.core.pcpus[self.pcpu_base + p].curr.map(|v| v - self.vcpu_base)
    }
    fn here(&self) -> Option<PcpuId> {
        self.here.map(|p| p - self.pcpu_base)
    }
    fn resched_pending(&self, p: PcpuId) -> bool {
        self.core.pcpus[self.pcpu_base + p].resched_due.is_some()
    }
    /// Holding or spinning on a kernel lock, or waiting for the acknowledgements of the IPIs
    /// it sent (`ipi_sync`: `smp_call_function_many` spins in the kernel, as
    /// `flush_tlb_others` does).
    fn guest_in_kernel(&self, v: VcpuId) -> bool {
        let th = &self.core.threads[self.vc(v).curr];
        matches!(th.state, ThreadState::SpinLock { kernel: true, .. } | ThreadState::SpinIpi { .. })
            || th.held.iter().any(|&(_, k)| k)
    }
    fn guest_spinning(&self, v: VcpuId) -> bool {
        self.core.threads[self.vc(v).curr].state.spinning()
    }

    fn pending_interrupt(&self, v: VcpuId) -> bool {
        !self.vc(v).irqs.is_empty()
    }

    fn posted_interrupts(&self) -> bool {
        self.core.host.posted_interrupts
    }

    fn pinned(&self, v: VcpuId) -> Option<PcpuId> {
        self.vc(v).pinned.map(|p| p - self.pcpu_base)
    }

    /// The entitlement meter's count: it hears of every vCPU that starts or stops asking for
    /// a pCPU (`sim/accounting.rs`).
    fn runnable_vcpus(&self, d: DomId) -> usize {
        let asking = self.core.hosts[self.host].entitlement.asking(d);
        debug_assert_eq!(
            asking,
            self.core.doms[self.dom_base + d]
                .span
                .clone()
                .filter(|&v| asks_for_a_pcpu(self.core.vcpus[v].state))
                .count(),
            "the entitlement meter's count of domain {d}'s runnable vCPUs"
        );
        asking
    }

    fn resched(&mut self, p: PcpuId) -> bool {
        let now = self.core.queue.now();
        let p = self.pcpu_base + p;
        if Some(p) == self.here {
            self.core.request_resched(p, now);
            false
        } else {
            // An idle pCPU first leaves its idle state.
            let idle_wake = if self.core.pcpus[p].curr.is_none() { self.core.host.idle_wake_ns } else { 0 };
            let at = now + self.core.host.ipi_latency_ns + idle_wake;
            let sent = self.core.request_resched(p, at);
            if sent {
                self.core.hosts[self.host].ipis += 1;
                self.core.trace_resched_sent(self.host, self.here, p);
            }
            sent
        }
    }
    fn co_signal(&mut self, p: PcpuId) {
        if self.resched(p) {
            self.core.hosts[self.host].co_ipis += 1;
        }
    }
    fn co_launch(&mut self, d: DomId) {
        self.core.doms[self.dom_base + d].co_launches += 1;
        self.core.hosts[self.host].co_launches += 1;
        self.core.note_co_launch(self.dom_base + d, self.here);
        self.core.trace_instant(Instant::CoLaunch { dom: self.dom_base + d, pcpu: self.here });
    }
    fn set_timer(&mut self, at: Time, id: u64) {
        let at = at.max(self.core.queue.now()) + self.core.timer_late(self.host);
        let host = self.host as u32;
        self.core.post(at, Ev::Timer { host, id });
    }
    fn count(&mut self, name: &'static str, amount: u64) {
        self.core.hosts[self.host].counters.bump(name, amount);
    }
    fn rng(&mut self) -> &mut StreamRng {
        &mut self.core.hosts[self.host].policy_rng
    }
    fn fail(&mut self, message: String) {
        self.core.error.get_or_insert(RunError::Policy(message));
    }
    fn tracing(&self) -> bool {
        self.core.trace.as_ref().is_some_and(Trace::detailed)
    }
    fn trace_counter(&mut self, name: &'static str, of: CounterOf, value: i64) {
        let of = match of {
            CounterOf::Host(_) => CounterOf::Host(self.host),
            CounterOf::Pcpu(p) => CounterOf::Pcpu(self.pcpu_base + p),
            CounterOf::Vcpu(v) => CounterOf::Vcpu(self.vcpu_base + v),
        };
        let now = self.core.queue.now();
        self.core.with_trace(|t| t.counter(of, name, value, now));
    }
}
