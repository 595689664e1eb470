//! KVM's own scheduling code, on top of the Linux scheduler that runs its vCPU threads. Not a
//! policy by itself: `kvm-dy` puts it on `cfs`, `kvm-eevdf` on `eevdf`.
//!
//! # Why a layer
//! Under KVM a vCPU is a host thread, so the Linux scheduler (CFS until 6.5, EEVDF since 6.6)
//! decides who runs. KVM adds only reactions to what a guest does, all of which end in the
//! scheduler's `yield_to` (kernel/sched/core.c):
//! - **A pause-loop exit** (`handle_pause` → `kvm_vcpu_on_spin`, virt/kvm/kvm_main.c): the
//!   spinning vCPU donates its pCPU to a sibling it guesses holds what it waits for.
//! - **`KVM_HC_SCHED_YIELD`** (Linux ≥ 5.2) and **`KVM_HC_KICK_CPU`** (which has yielded since
//!   5.4, commit 266e85a5ec91): `kvm_sched_yield(vcpu, target)` (arch/x86/kvm/x86.c) yields
//!   to the named vCPU if the target is `ready` and, since 5.15's bail-out, the yielder's run
//!   queue holds something else (`single_task_running`) and the target is not the yielder.
//!
//! Which of these rules apply is the Linux release's (`kvm_version`, `kvm_version.rs`, where
//! each is cited); each also has its own switch. Below, the rules of 6.1 and 6.12 (the
//! defaults), with the release each first appeared in.
//!
//! # The PLE handler (`kvm_vcpu_on_spin`, read in 6.12.19 `virt/kvm/kvm_main.c`)
//! Scan the VM's other vCPUs (candidate order below); skip:
//! - one that is not `ready` (set when its thread is scheduled out while runnable, or woken;
//!   cleared when it runs; commit d73eb57b80b9, Linux 5.3): running, blocked and never-run
//!   vCPUs. From 3.11 to 5.2 only `preempted` vCPUs (scheduled out while runnable) were
//!   candidates, so a vCPU woken by an interrupt was not (`boost_woken = false`). Our blocked
//!   vCPUs have no pending event, so `vcpu_dy_runnable` never rescues one;
//! - one preempted in guest user mode while the spinner is in kernel mode (always, for a PLE
//!   exit; Linux ≥ 4.13, `skip_user_mode`), unless an interrupt is posted for it
//!   (`kvm_arch_dy_has_pending_interrupt`, Linux ≥ 5.13, commit 52acd22faa1a "Boost vCPU
//!   candidate in user mode which is delivering interrupt": the spinner may wait for that
//!   vCPU to take an IPI). KVM sees posted interrupts only with APICv, so the rule needs the
//!   host's posted interrupts; `boost_pending_irq = false` turns it off;
//! - `kvm_vcpu_eligible_for_directed_yield` (Linux ≥ 3.7, `dy_eligible`): a candidate that is
//!   itself spinning is eligible every other time it is checked (`dy_eligible` toggles), so
//!   two waiters do not bounce the pCPU between them for ever. KVM knows a vCPU spins because
//!   it is inside its own `kvm_vcpu_on_spin`; ours handles the exit in no time, so "preempted
//!   while busy-waiting" (`Cx::guest_spinning`) stands for it. The spinner's own toggle is
//!   cleared after its scan.
//!
//! `yield_to` the first eligible candidate: on success it becomes `last_boosted` and the scan
//! ends; after 3 -ESRCH failures (both run queues hold one entity) the scan gives up (Linux ≥
//! 3.8, `give_up_after_esrch`; before, every candidate was tried).
//!
//! # Candidate order (`candidates`, a research knob)
//! - `"round-robin"` — Linux: from the vCPU after `last_boosted`, wrapping around (two
//!   passes up to 6.12, one loop since; the order is the same).
//! - `"random"` — a uniformly random order each scan, so the first eligible candidate is a
//!   uniform pick among the eligible ones: the baseline against which smarter choices are
//!   usually measured.
//! - `"pending-irq-first"` — vCPUs with an interrupt pending (posted or not) first, then the
//!   rest, each group round robin: the idea of boosting IPI receivers first (Kim et al.,
//!   "Demand-based coordinated scheduling for SMP VMs", ASPLOS '13; Ishiguro et al.,
//!   "Mitigating excessive vCPU spinning in VM-agnostic KVM", VEE '21), reduced to what the
//!   host sees.
//!
//! # Delayed preemption (`preempt_delay_us`, a research knob; off by default)
//! Not in Linux: the eCS proposal (Kashyap et al., USENIX ATC '18) patches the host scheduler
//! to put off preempting a vCPU whose guest marked a critical section. The mechanism is the
//! simulator's, for every policy (`sim/preempt_delay.rs`); this parameter turns it on for
//! the KVM policies (`host.preempt_delay_us` does for any).
//!
//! Counters: `kvm_dy.yields` (successful PLE `yield_to`), `kvm_dy.esrch` (failed ones),
//! `kvm_dy.gave_up` (scans stopped by the third failure), `kvm_dy.no_target` (scans that
//! ended without a yield otherwise); `kvm.sched_yield.attempted` / `.successful` and
//! `kvm.kick_yield.attempted` / `.successful` (KVM's `directed_yield_attempted` /
//! `_successful` statistics, split by hypercall).
//!
//! Not modelled: `vcpu_dy_runnable` for blocked vCPUs with pending events (ours have none
//! that KVM could see), `kvm_arch_vcpu_preempted_in_kernel`'s AMD/Intel differences (both
//! report the mode the guest was preempted in), 3.2's candidacy of a vCPU that never ran
//! (not halted, not in guest mode: `ready` leaves it out).

use rand::RngCore;
use vsched_model::{
    Cx, Decision, DomainInfo, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy, Time, VcpuId, VmType,
    YieldReason, NS_PER_US,
};

use crate::kvm_version::{Candidates, KvmProfile};
use crate::linux_fair::YieldTo;

/// `kvm_vcpu_on_spin`'s `try = 3`: -ESRCH failures before the scan gives up.
const YIELD_TRIES: u32 = 3;

/// The longest delay `preempt_delay_us` accepts (as `host.preempt_delay_us`).
const MAX_PREEMPT_DELAY_US: i64 = 100_000;

/// A rule's switch; its default is the `kvm_version`'s (the declared `true` is 6.1's and
/// 6.12's, every rule on).
const fn rule(name: &'static str, doc: &'static str) -> ParamSpec {
    ParamSpec { name, default: ParamDefault::Bool(true), range: ParamRange::Any, doc }
}

/// KVM's parameters, which `kvm-dy` and `kvm-eevdf` add to their scheduler's (whose own
/// parameters hold `kvm_version`).
pub(crate) const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "candidates",
        default: ParamDefault::Str("round-robin"),
        range: ParamRange::Any,
        doc: "order in which a PLE exit tries siblings: \"round-robin\" (Linux), \"random\", \"pending-irq-first\"",
    },
    rule("boost_woken", "candidates are ready vCPUs, woken ones included (Linux >= 5.3; else only preempted ones)"),
    rule("skip_user_mode", "a spinner in kernel mode skips a sibling preempted in user mode (Linux >= 4.13)"),
    rule("boost_pending_irq", "... unless an interrupt is posted for it (Linux >= 5.13, commit 52acd22faa1a)"),
    rule("dy_eligible", "a spinning candidate is eligible every other scan (Linux >= 3.7)"),
    rule("give_up_after_esrch", "a PLE scan stops after 3 failed yield_to (Linux >= 3.8)"),
    rule("kick_yield", "KVM_HC_KICK_CPU also yields to the kicked vCPU (Linux >= 5.4)"),
    rule("yield_bail_out", "hypercall yields skip a yielder alone on its run queue (Linux >= 5.15)"),
    ParamSpec {
        name: "preempt_delay_us",
        default: ParamDefault::Int(0),
        range: ParamRange::Int { min: 0, max: MAX_PREEMPT_DELAY_US },
        doc: "put off preempting a vCPU in a guest-marked critical section by at most this, µs (eCS); 0 = off",
    },
];

/// What KVM needs of the Linux scheduler beneath it.
pub(crate) trait LinuxSched: Policy {
    /// core.c `yield_to`: `me`, running, asks that the queued `target` run next.
    fn yield_to(&mut self, cx: &mut Cx, me: VcpuId, target: VcpuId) -> YieldTo;
    /// `single_task_running()` on pCPU `p`: its run queue holds only its current entity.
    fn single_task_running(&self, p: PcpuId) -> bool;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    RoundRobin,
    Random,
    PendingIrqFirst,
}

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

pub(crate) struct Kvm<S> {
    sched: S,
    candidates: Order,
    /// The release's rules (`kvm_version`), each switch applied.
    rules: KvmProfile,
    /// The bound of delayed preemption (`sim/preempt_delay.rs`); 0: off.
    preempt_delay_ns: Time,
    /// Per VM: `kvm->last_boosted_vcpu`, an index within the VM.
    last_boosted: Vec<usize>,
    vcpus: Vec<VcpuState>,
    /// The scan order of the current PLE exit (indices within the VM), kept to reuse.
    order: Vec<usize>,
    /// The stall watchdog's bound (`Policy::stall_timeout_ns`).
    stall_timeout_ns: Option<Time>,
}

impl<S: LinuxSched> Kvm<S> {
    /// KVM on `sched`, configured from `params` (which hold `PARAMS`) and the release's
    /// `profile` (the scheduler's `kvm_version`), each rule's switch winning over it.
    pub(crate) fn new(sched: S, params: &Params, profile: KvmProfile) -> Result<Self, vsched_model::ConfigError> {
        let candidates = match params.choice("candidates", &["round-robin", "random", "pending-irq-first"])?.as_str() {
            "random" => Order::Random,
            "pending-irq-first" => Order::PendingIrqFirst,
            _ => Order::RoundRobin,
        };
        let woken = params.bool_or("boost_woken", profile.candidates == Candidates::Ready);
        let rules = KvmProfile {
            candidates: if woken { Candidates::Ready } else { Candidates::Preempted },
            skip_user_mode: params.bool_or("skip_user_mode", profile.skip_user_mode),
            boost_pending_irq: params.bool_or("boost_pending_irq", profile.boost_pending_irq),
            dy_eligible: params.bool_or("dy_eligible", profile.dy_eligible),
            give_up_after_esrch: params.bool_or("give_up_after_esrch", profile.give_up_after_esrch),
            kick_yield: params.bool_or("kick_yield", profile.kick_yield),
            yield_bail_out: params.bool_or("yield_bail_out", profile.yield_bail_out),
            ..profile
        };
        let preempt_delay_us = params.int("preempt_delay_us");
        Ok(Kvm {
            sched,
            candidates,
            rules,
            preempt_delay_ns: preempt_delay_us as Time * NS_PER_US,
            last_boosted: Vec::new(),
            vcpus: Vec::new(),
            order: Vec::new(),
            stall_timeout_ns: Some(vsched_model::DEFAULT_STALL_TIMEOUT_NS),
        })
    }

    /// This KVM with stall bound `timeout` instead of sched_ext's 30 s (`kvm_eevdf.rs` says why).
    pub(crate) fn with_stall_timeout(self, timeout: Option<Time>) -> Self {
        Kvm { stall_timeout_ns: timeout, ..self }
    }

    /// The filters of `kvm_vcpu_on_spin` for candidate `c`, ending with
    /// `kvm_vcpu_eligible_for_directed_yield` (which flips a spinning candidate's toggle).
    fn eligible(&mut self, cx: &Cx, c: VcpuId, yield_to_kernel_mode: bool) -> bool {
        let s = self.vcpus[c];
        let r = self.rules;
        // `vcpu->ready` (5.3 on) or `vcpu->preempted` (3.11 to 5.2); either implies Runnable,
        // and the state check guards against a stale flag.
        let candidate = match r.candidates {
            Candidates::Ready => s.ready,
            Candidates::Preempted => s.preempted,
        };
        if !candidate || cx.state(c) != vsched_model::VcpuState::Runnable {
            return false;
        }
        let irq_posted = r.boost_pending_irq && cx.posted_interrupts() && cx.pending_interrupt(c);
        if r.skip_user_mode && s.preempted && yield_to_kernel_mode && !irq_posted && !cx.guest_in_kernel(c) {
            return false;
        }
        if r.dy_eligible && cx.guest_spinning(c) {
            self.vcpus[c].dy_eligible = !s.dy_eligible;
            return s.dy_eligible;
        }
        true
    }

    /// Fills `self.order` with the VM's vCPU indices in the order this scan tries them.
    fn scan_order(&mut self, cx: &mut Cx, first: VcpuId, n: usize, last: usize) {
        self.order.clear();
        self.order.extend((1..=n).map(|k| (last + k) % n));
        match self.candidates {
            Order::RoundRobin => {}
            Order::Random => {
                // Fisher-Yates, from the policy's own seeded stream.
                for i in (1..n).rev() {
                    let j = (cx.rng().next_u64() % (i as u64 + 1)) as usize;
                    self.order.swap(i, j);
                }
            }
            // A stable sort keeps each group in round-robin order.
            Order::PendingIrqFirst => self.order.sort_by_key(|&i| !cx.pending_interrupt(first + i)),
        }
    }

    /// `kvm_vcpu_on_spin(me, yield_to_kernel_mode)`.
    fn on_spin(&mut self, cx: &mut Cx, me: VcpuId) {
        let d = cx.dom_of(me);
        let vcpus = cx.vcpus_of(d);
        let (first, n) = (vcpus.start, vcpus.len());
        // VMX and SVM pass "the spinner is in kernel mode"; a PLE exit only happens there.
        let kernel = cx.guest_in_kernel(me);
        self.scan_order(cx, first, n, self.last_boosted[d]);
        let mut tries = YIELD_TRIES;
        let mut yielded = false;
        for k in 0..n {
            let i = self.order[k];
            let c = first + i;
            if c == me || !self.eligible(cx, c, kernel) {
                continue;
            }
            match self.sched.yield_to(cx, me, c) {
                YieldTo::Yielded => {
                    self.last_boosted[d] = i;
                    cx.count("kvm_dy.yields");
                    yielded = true;
                    break;
                }
                YieldTo::Esrch => {
                    cx.count("kvm_dy.esrch");
                    // Before 3.8 a failed `yield_to` was not counted: the scan went on.
                    if !self.rules.give_up_after_esrch {
                        continue;
                    }
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

    /// `kvm_sched_yield(me, target)`: the answer to both yield hypercalls. `kvm_vcpu_yield_to`
    /// returns 0 for a target that is running (core.c `yield_to` checks `task_on_cpu`), so a
    /// yield to oneself fails with or without 5.15's explicit check.
    fn sched_yield(&mut self, cx: &mut Cx, me: VcpuId, target: VcpuId, counters: [&'static str; 2]) {
        cx.count(counters[0]);
        let Some(p) = cx.running_on(me) else { return };
        if (self.rules.yield_bail_out && self.sched.single_task_running(p))
            || target == me
            || !self.vcpus[target].ready
            || cx.state(target) != vsched_model::VcpuState::Runnable
        {
            return;
        }
        if self.sched.yield_to(cx, me, target) == YieldTo::Yielded {
            cx.count(counters[1]);
        }
    }
}

impl<S: LinuxSched> Policy for Kvm<S> {
    fn admit(&self, pcpus: usize, domains: &[DomainInfo]) -> Result<(), String> {
        self.sched.admit(pcpus, domains)
    }

    fn init(&mut self, cx: &mut Cx) {
        self.sched.init(cx);
        self.last_boosted = vec![0; cx.domains().len()];
        self.vcpus = vec![VcpuState::default(); cx.n_vcpus()];
    }

    fn tick_period_ns(&self) -> Option<Time> {
        self.sched.tick_period_ns()
    }

    fn others_queued(&self, p: PcpuId) -> Option<bool> {
        self.sched.others_queued(p)
    }

    fn ticks_aligned(&self) -> bool {
        self.sched.ticks_aligned()
    }

    fn ple_window_grow(&self) -> u32 {
        self.sched.ple_window_grow()
    }

    fn preempt_delay_ns(&self) -> Time {
        self.preempt_delay_ns
    }

    fn supports_vm_lifecycle(&self) -> bool {
        self.sched.supports_vm_lifecycle()
    }

    fn stall_timeout_ns(&self) -> Option<Time> {
        self.stall_timeout_ns
    }

    /// A new vCPU is neither ready nor preempted (`kvm_vcpu_init`).
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.vcpus[v] = VcpuState::default();
        self.sched.vcpu_insert(cx, v);
    }

    fn vcpu_remove(&mut self, cx: &mut Cx, v: VcpuId) {
        self.vcpus[v] = VcpuState::default();
        self.sched.vcpu_remove(cx, v);
    }

    /// `kvm_vcpu_wake_up` sets `ready` (not `preempted`).
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.vcpus[v].ready = true;
        self.sched.wake(cx, v);
    }

    fn sleep(&mut self, cx: &mut Cx, v: VcpuId) {
        self.sched.sleep(cx, v);
    }

    /// A pause-loop exit (`handle_pause` → `kvm_vcpu_on_spin`) or a yield hypercall
    /// (`kvm_sched_yield`).
    fn yield_(&mut self, cx: &mut Cx, v: VcpuId, why: YieldReason) {
        match why {
            YieldReason::PauseLoopExit => self.on_spin(cx, v),
            YieldReason::SchedYield { target } => {
                self.sched_yield(cx, v, target, ["kvm.sched_yield.attempted", "kvm.sched_yield.successful"])
            }
            // Before 5.4 `KVM_HC_KICK_CPU` only wakes the vCPU (`kvm_pv_kick_cpu_op`).
            YieldReason::Kick { .. } if !self.rules.kick_yield => {}
            YieldReason::Kick { target } => {
                self.sched_yield(cx, v, target, ["kvm.kick_yield.attempted", "kvm.kick_yield.successful"])
            }
        }
    }

    /// The scheduler decides; KVM's preempt notifiers (`kvm_sched_out` / `kvm_sched_in`) keep
    /// `ready` and `preempted`.
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        let decision = self.sched.pick_next(cx, p, prev);
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
        self.sched.tick(cx, p)
    }

    fn timer(&mut self, cx: &mut Cx, id: u64) {
        self.sched.timer(cx, id)
    }

    fn vm_type_changed(&mut self, cx: &mut Cx, d: vsched_model::DomId, old: VmType) {
        self.sched.vm_type_changed(cx, d, old)
    }

    fn check(&self, cx: &Cx) -> Result<(), String> {
        self.sched.check(cx)
    }

    fn vm_metrics(&self, cx: &Cx, d: vsched_model::DomId) -> Vec<(&'static str, f64)> {
        self.sched.vm_metrics(cx, d)
    }
}
