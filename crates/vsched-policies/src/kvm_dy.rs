//! `kvm-dy` — KVM's reaction to a pause-loop exit: a directed yield to a preempted sibling
//! (`kvm_vcpu_on_spin`, virt/kvm/kvm_main.c), on top of `cfs`.
//!
//! # How it works
//! A vCPU that spins in guest kernel mode longer than the PLE window exits to KVM, which
//! guesses that the lock it waits for is held by a sibling vCPU that is not running, and
//! donates its pCPU to one (`kvm_vcpu_on_spin`):
//! - Scan the VM's vCPUs round robin, starting after `last_boosted` (the last successful
//!   target, per VM) and wrapping around (KVM's "two passes").
//! - Skip: itself; a vCPU that is not `ready` (KVM sets `ready` when a vCPU thread is
//!   scheduled out while runnable, or when it is woken, and clears it when the vCPU runs, so
//!   running, blocked and never-run vCPUs are skipped — our blocked vCPUs never have a pending
//!   event, so `vcpu_dy_runnable` never rescues one); a vCPU preempted in guest user mode when
//!   the spinner is in kernel mode (always, for a PLE exit): it cannot hold a kernel lock.
//! - `kvm_vcpu_eligible_for_directed_yield`: a candidate that is itself spinning is eligible
//!   only every other time it is checked (a per-vCPU toggle, `dy_eligible`), so two waiters
//!   do not bounce the pCPU between them for ever. KVM knows a vCPU spins because it is inside
//!   its own `kvm_vcpu_on_spin` (`in_spin_loop`); ours handles the exit in no time, so we use
//!   "preempted while busy-waiting" (`Cx::guest_spinning`) as its analogue. The spinner's own
//!   toggle is reset after its scan, as KVM does.
//! - `yield_to` the first eligible candidate (core.c `yield_to`, fair.c
//!   `yield_to_task_fair`, in `cfs.rs`): it fails with -ESRCH when both run queues hold a
//!   single entity; otherwise the target becomes its queue's next buddy, the spinner its
//!   queue's skip buddy, the target's pCPU gets a reschedule IPI and the spinner's pCPU
//!   reschedules. CFS still decides: a target more than a wakeup granularity ahead of its
//!   queue's leftmost entity does not run. On success the target is the new `last_boosted`;
//!   after 3 -ESRCH failures the scan gives up.
//!
//! Counters: `kvm_dy.yields` (successful `yield_to`), `kvm_dy.esrch` (failed ones),
//! `kvm_dy.gave_up` (scans stopped by the third failure), `kvm_dy.no_target` (scans that ended
//! without a yield otherwise: no eligible sibling).
//!
//! Not modelled: the PLE window growing and shrinking per vCPU (the engine's window is
//! fixed), the pending-interrupt shortcut (`kvm_arch_dy_has_pending_interrupt`) and PV
//! kicks with their directed yield.
//!
//! Suits: the KVM baseline of lock-holder-preemption papers. Known weakness: a guess — it
//! may boost a sibling that does not hold the lock, and it only helps when CFS lets the
//! target run (the next buddy must be close to fair).

use vsched_model::{
    ConfigError, Cx, Decision, DomId, DomainInfo, Params, PcpuId, Policy, PolicyInfo, Time, VcpuId, VmType, YieldReason,
};

use crate::cfs::{self, Cfs, YieldTo};

/// `kvm_vcpu_on_spin`'s `try = 3`: -ESRCH failures before the scan gives up.
const YIELD_TRIES: u32 = 3;

// ---- State, by scope ----

/// What KVM keeps per vCPU for directed yield (`struct kvm_vcpu`).
#[derive(Clone, Copy, Default)]
struct VcpuState {
    /// `vcpu->ready`: scheduled out while runnable, or woken; not run since.
    ready: bool,
    /// `vcpu->preempted`: scheduled out while runnable; not run since.
    preempted: bool,
    /// `vcpu->spin_loop.dy_eligible`.
    dy_eligible: bool,
}

pub struct KvmDy {
    cfs: Cfs,
    /// Per VM: `kvm->last_boosted_vcpu`, an index within the VM.
    last_boosted: Vec<usize>,
    vcpus: Vec<VcpuState>,
}

impl KvmDy {
    /// The filters of `kvm_vcpu_on_spin` for candidate `c`, ending with
    /// `kvm_vcpu_eligible_for_directed_yield` (which flips a spinning candidate's toggle).
    fn eligible(&mut self, cx: &Cx, c: VcpuId, yield_to_kernel_mode: bool) -> bool {
        let s = self.vcpus[c];
        // `ready` implies Runnable; the state check guards against a stale flag.
        if !s.ready || cx.state(c) != vsched_model::VcpuState::Runnable {
            return false;
        }
        if s.preempted && yield_to_kernel_mode && !cx.guest_in_kernel(c) {
            return false;
        }
        if cx.guest_spinning(c) {
            self.vcpus[c].dy_eligible = !s.dy_eligible;
            return s.dy_eligible;
        }
        true
    }

    /// `kvm_vcpu_on_spin(me, yield_to_kernel_mode)`.
    fn on_spin(&mut self, cx: &mut Cx, me: VcpuId) {
        let d: DomId = cx.dom_of(me);
        let vcpus = cx.vcpus_of(d);
        let (first, n) = (vcpus.start, vcpus.len());
        // VMX and SVM pass "the spinner is in kernel mode"; a PLE exit only happens there.
        let kernel = cx.guest_in_kernel(me);
        let mut tries = YIELD_TRIES;
        let mut yielded = false;
        for k in 1..=n {
            let i = (self.last_boosted[d] + k) % n;
            let c = first + i;
            if c == me || !self.eligible(cx, c, kernel) {
                continue;
            }
            match self.cfs.yield_to(cx, me, c) {
                YieldTo::Yielded => {
                    self.last_boosted[d] = i;
                    cx.count("kvm_dy.yields");
                    yielded = true;
                    break;
                }
                YieldTo::Esrch => {
                    cx.count("kvm_dy.esrch");
                    tries -= 1;
                    if tries == 0 {
                        cx.count("kvm_dy.gave_up");
                        break;
                    }
                }
            }
        }
        if !yielded && tries > 0 {
            cx.count("kvm_dy.no_target");
        }
        // "Ensure vcpu is not eligible during next spinloop".
        self.vcpus[me].dy_eligible = false;
    }
}

impl Policy for KvmDy {
    fn admit(&self, pcpus: usize, domains: &[DomainInfo]) -> Result<(), String> {
        self.cfs.admit(pcpus, domains)
    }

    fn init(&mut self, cx: &mut Cx) {
        self.cfs.init(cx);
        self.last_boosted = vec![0; cx.domains().len()];
        self.vcpus = vec![VcpuState::default(); cx.n_vcpus()];
    }

    fn tick_period_ns(&self) -> Option<Time> {
        self.cfs.tick_period_ns()
    }

    fn ticks_aligned(&self) -> bool {
        self.cfs.ticks_aligned()
    }

    fn ple_window_grow(&self) -> u32 {
        self.cfs.ple_window_grow()
    }

    fn supports_vm_lifecycle(&self) -> bool {
        true
    }

    /// A new vCPU is neither ready nor preempted (`kvm_vcpu_init`).
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.vcpus[v] = VcpuState::default();
        self.cfs.vcpu_insert(cx, v);
    }

    fn vcpu_remove(&mut self, cx: &mut Cx, v: VcpuId) {
        self.vcpus[v] = VcpuState::default();
        self.cfs.vcpu_remove(cx, v);
    }

    /// `kvm_vcpu_wake_up` sets `ready` (not `preempted`).
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.vcpus[v].ready = true;
        self.cfs.wake(cx, v);
    }

    fn sleep(&mut self, cx: &mut Cx, v: VcpuId) {
        self.cfs.sleep(cx, v);
    }

    /// A pause-loop exit (`handle_pause` → `kvm_vcpu_on_spin`).
    fn yield_(&mut self, cx: &mut Cx, v: VcpuId, why: YieldReason) {
        match why {
            YieldReason::PauseLoopExit => self.on_spin(cx, v),
            YieldReason::SchedYield { .. } | YieldReason::Kick { .. } => {}
        }
    }

    /// CFS decides; KVM's preempt notifiers (`kvm_sched_out` / `kvm_sched_in`) keep `ready`
    /// and `preempted`.
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        let decision = self.cfs.pick_next(cx, p, prev);
        if let Some(u) = prev.filter(|&u| decision.next != Some(u) && cx.running_on(u) == Some(p)) {
            self.vcpus[u].ready = true;
            self.vcpus[u].preempted = true;
        }
        if let Some(v) = decision.next {
            self.vcpus[v].ready = false;
            self.vcpus[v].preempted = false;
        }
        decision
    }

    fn tick(&mut self, cx: &mut Cx, p: PcpuId) {
        self.cfs.tick(cx, p)
    }

    fn timer(&mut self, cx: &mut Cx, id: u64) {
        self.cfs.timer(cx, id)
    }

    fn vm_type_changed(&mut self, cx: &mut Cx, d: DomId, old: VmType) {
        self.cfs.vm_type_changed(cx, d, old)
    }

    fn check(&self, cx: &Cx) -> Result<(), String> {
        self.cfs.check(cx)
    }
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(KvmDy { cfs: cfs::from_params(params)?, last_boosted: Vec::new(), vcpus: Vec::new() }))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "kvm-dy",
    description: "KVM on CFS with PLE handling: directed yield to a preempted sibling (kvm_vcpu_on_spin)",
    hypervisor: vsched_model::Hypervisor::Kvm,
    params: cfs::PARAMS,
    build,
};
