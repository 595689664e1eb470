//! Co-scheduling policies built on Credit, as seeds 003 and 004 built theirs into Xen's
//! credit scheduler: a `CreditVariant` replaces how a pCPU picks its next vCPU, and
//! `OnCredit` runs it on top of Credit, which keeps accounting, priorities, BOOST, tickling,
//! work stealing and the CON scatter.

use vsched_model::{Cx, Decision, DomId, DomainInfo, PcpuId, Policy, Time, VcpuId, VmType, YieldReason};

use crate::credit::Credit;

/// A co-scheduling policy built on Credit (as seeds 003 and 004 built theirs into Xen's
/// credit scheduler): the variant replaces how a pCPU picks its next vCPU; Credit keeps
/// accounting, priorities, BOOST, tickling, work stealing and the CON scatter. `OnCredit`
/// forwards every `Policy` callback to Credit and tells the variant where it has a hook.
pub(crate) trait CreditVariant {
    /// The host is known (after Credit's own `init`): size per-pCPU / per-domain state.
    fn init(&mut self, _cx: &mut Cx) {}

    /// Replaces `csched_schedule` (use `put_prev`, `choose` and `commit` of `base`).
    fn pick_next(&mut self, base: &mut Credit, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision;

    /// A vCPU woke; Credit has queued it and tickled.
    fn woke(&mut self, _base: &mut Credit, _cx: &mut Cx, _v: VcpuId) {}

    /// Whether the variant handles VMs created and destroyed during a run. A variant that
    /// keeps co-scheduling state about domains or pCPUs (a pending gang, a partner pCPU)
    /// must say what becomes of it when a VM goes, in `removed`, before it answers true.
    fn supports_vm_lifecycle(&self) -> bool {
        false
    }

    /// `v`'s VM is being destroyed; Credit has already forgotten `v`.
    fn removed(&mut self, _base: &mut Credit, _cx: &mut Cx, _v: VcpuId) {}

    /// The variant's own invariants (debug builds, after every event).
    fn check(&self, _base: &Credit, _cx: &Cx) -> Result<(), String> {
        Ok(())
    }
}

pub(crate) struct OnCredit<V> {
    pub(crate) base: Credit,
    pub(crate) variant: V,
}

impl<V: CreditVariant> Policy for OnCredit<V> {
    /// Co-scheduling needs one pCPU per vCPU of a CON VM (seed 003 §2.3: |C(V_i)| <= |P|).
    fn admit(&self, pcpus: usize, domains: &[DomainInfo]) -> Result<(), String> {
        self.base.admit(pcpus, domains)?;
        admit_con_fits(pcpus, domains)
    }
    fn init(&mut self, cx: &mut Cx) {
        self.base.init(cx);
        self.variant.init(cx);
    }
    fn tick_period_ns(&self) -> Option<Time> {
        self.base.tick_period_ns()
    }
    fn timer_slop_ns(&self) -> Time {
        self.base.timer_slop_ns()
    }
    fn supports_vm_lifecycle(&self) -> bool {
        self.base.supports_vm_lifecycle() && self.variant.supports_vm_lifecycle()
    }
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.base.vcpu_insert(cx, v)
    }
    fn vcpu_remove(&mut self, cx: &mut Cx, v: VcpuId) {
        self.base.vcpu_remove(cx, v);
        self.variant.removed(&mut self.base, cx, v);
        self.base.publish(cx);
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.base.wake(cx, v);
        self.variant.woke(&mut self.base, cx, v);
        self.base.publish(cx);
    }
    fn sleep(&mut self, cx: &mut Cx, v: VcpuId) {
        self.base.sleep(cx, v)
    }
    fn yield_(&mut self, cx: &mut Cx, v: VcpuId, why: YieldReason) {
        self.base.yield_(cx, v, why)
    }
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        let decision = self.variant.pick_next(&mut self.base, cx, p, prev);
        self.base.publish(cx);
        decision
    }
    fn tick(&mut self, cx: &mut Cx, p: PcpuId) {
        self.base.tick(cx, p)
    }
    fn timer(&mut self, cx: &mut Cx, id: u64) {
        self.base.timer(cx, id)
    }
    fn vm_type_changed(&mut self, cx: &mut Cx, d: DomId, old: VmType) {
        self.base.vm_type_changed(cx, d, old)
    }
    fn check(&self, cx: &Cx) -> Result<(), String> {
        self.base.check(cx)?;
        self.variant.check(&self.base, cx)
    }
}

/// Rejects a CON VM with more vCPUs than the host has pCPUs (it could never run together).
pub(crate) fn admit_con_fits(pcpus: usize, domains: &[DomainInfo]) -> Result<(), String> {
    match domains.iter().find(|d| d.vm_type == VmType::Con && d.vcpus > pcpus) {
        Some(d) => Err(format!(
            "CON VM {:?} has {} vCPUs but the host has {pcpus} pCPUs; co-scheduling needs one pCPU per vCPU",
            d.name, d.vcpus
        )),
        None => Ok(()),
    }
}
