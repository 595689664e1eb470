//! Linux release profiles for the KVM host policies (`kvm_version` parameter of `cfs`,
//! `eevdf`, `kvm-dy`, `kvm-eevdf`, and of `balance-cfs` and `balance-eevdf`, which take their
//! base's parameters; `[host] kvm_version` sets it for all six).
//!
//! Researchers compare against the kernel of their paper's era, and KVM's reactions to a
//! spinning guest changed release by release. A profile gathers the rules that differ, each
//! read in that release's `virt/kvm/kvm_main.c` (`kvm_vcpu_on_spin`), `arch/x86/kvm/x86.c`
//! (`kvm_sched_yield`, `kvm_emulate_hypercall`), `arch/x86/kvm/vmx` (`grow_ple_window`) and
//! `kernel/sched/fair.c` (`yield_task_fair`, `features.h`). Read at 4.19.0, 5.4.214,
//! 5.15.100, 6.1.20 and 6.12.19, and the forfeit in its stable backport (`yield_task_fair`
//! of 6.12.y); 3.2, 3.12 and mainline from the commits named below (their trees were not
//! available whole here; see docs/policies.md "Linux versions").
//!
//! | rule                                      | 3.2  | 3.12 | 4.19 | 5.4 | 5.15 | 6.1 | 6.12 | 6.12.y | current |
//! |-------------------------------------------|------|------|------|-----|------|-----|------|--------|---------|
//! | fair class                                | CFS  | CFS  | CFS  | CFS | CFS  | CFS | EEVDF| EEVDF  | EEVDF   |
//! | PLE window grows ×2 per exit              | no   | no   | yes  | yes | yes  | yes | yes  | yes    | yes     |
//! | `dy_eligible` toggle                      | no   | yes  | yes  | yes | yes  | yes | yes  | yes    | yes     |
//! | give up after 3 -ESRCH                    | no   | yes  | yes  | yes | yes  | yes | yes  | yes    | yes     |
//! | candidates                                | not halted | preempted | preempted | ready | ready | ready | ready | ready | ready |
//! | skip a vCPU preempted in user mode        | no   | no   | yes  | yes | yes  | yes | yes  | yes    | yes     |
//! | ... unless an interrupt is posted for it  | —    | —    | no   | no  | yes  | yes | yes  | yes    | yes     |
//! | `KVM_HC_KICK_CPU` yields to the kicked vCPU | no | no   | no   | yes | yes  | yes | yes  | yes    | yes     |
//! | hypercall yields bail out on a lone task  | —    | —    | —    | no  | yes  | yes | yes  | yes    | yes     |
//! | PICK_BUDDY                                | —    | —    | —    | —   | —    | —   | no   | yes    | yes     |
//! | base slice (EEVDF), µs                    | —    | —    | —    | —   | —    | —   | 750  | 700    | 700     |
//! | yield forfeits the slice (EEVDF)          | —    | —    | —    | —   | —    | —   | no   | yes    | yes     |
//!
//! Sources, by rule:
//! - Fair class: EEVDF replaced CFS in 6.6 (commit 147f3efaa241); `cfs` refuses a release
//!   from 6.6 on and `eevdf` one before it.
//! - PLE window: `grow_ple_window` (`ple_window_grow` = 2, `ple_window_shrink` = 0, so it
//!   resets at sched-in) since 3.18 (commit b4a2d31da812, "KVM: VMX: dynamic PLE window");
//!   read in 4.19.0 `arch/x86/kvm/vmx.c` and 6.12.19 `arch/x86/kvm/vmx/vmx.c`. Before, the
//!   window is fixed.
//! - `dy_eligible`: `kvm_vcpu_eligible_for_directed_yield` since 3.7 (commit 06e48c510aa3,
//!   "KVM: Choose better candidate for directed yield"); -ESRCH tries (`try = 3`) since 3.8
//!   (commit c45c528e8999). In 3.2 `kvm_vcpu_on_spin` calls `yield_to` on every candidate
//!   until one succeeds; a failure is never counted.
//! - Candidates: 3.2 skips a vCPU waiting on its wait queue (halted) and one in guest mode
//!   (`PF_VCPU`), so a woken vCPU not yet run is a candidate, as `ready` makes it; from 3.11
//!   (commit 3a08a8f9f0f4, "kvm: Iterate over only vcpus that are preempted") only a vCPU
//!   `preempted` (scheduled out while runnable) is: 4.19.0 `kvm_vcpu_on_spin` reads
//!   `vcpu->preempted`. 5.3 (commit d73eb57b80b9, "KVM: Boost vCPUs that are delivering
//!   interrupts") introduces `vcpu->ready`, set also by `kvm_vcpu_wake_up`, so a vCPU woken
//!   by an interrupt is a candidate again: 5.4.214 reads `vcpu->ready`.
//! - User mode: since 4.13 (commit 199b5763d329, "KVM: add spinlock optimization
//!   framework") a spinner in kernel mode skips a candidate preempted in user mode (4.19.0;
//!   from 5.3 only a `preempted` one, which is every candidate of 4.19 anyway).
//! - Pending interrupt: since 5.13 (commit 52acd22faa1a, "KVM: Boost vCPU candidate in user
//!   mode which is delivering interrupt") a user-mode candidate with a posted interrupt
//!   (`kvm_arch_dy_has_pending_interrupt`) is kept: 5.15.100 has it, 5.4.214 does not.
//! - Kick yield: `KVM_HC_KICK_CPU` also calls `kvm_sched_yield` since commit 266e85a5ec91
//!   ("KVM: X86: Boost queue head vCPU to mitigate lock waiter preemption", Linux 5.4):
//!   5.4.214 has it, 4.19.0 does not.
//! - Bail-out: 5.15.100's `kvm_sched_yield` returns early when `single_task_running()` (and
//!   when the target is the yielder); 5.4.214's only checks that the target is `ready`.
//! - PICK_BUDDY (6.14, commit 2a77e4be12cb) is in 6.12.19's `features.h`; the 0.70 ms base
//!   slice (6.15, commit 2ae891b82695) reached 6.12.y after it; the yield forfeit (6.17,
//!   commit 79104becf42b, "sched/fair: Forfeit vruntime on yield") reached 6.12.y in 6.12.63
//!   (the stable backport of December 2025). "6.12" is 6.12.0; "6.12.y" is the 6.12 LTS
//!   updated since; "current" is mainline, the same in every rule modelled here (mainline
//!   also shortens RUN_TO_PARITY's protection, which `eevdf` does not model).
//!
//! Host paravirtual features (`pv_refusal`): what KVM offers a guest, so a VM asking for one
//! the release lacks is refused, naming the field: `KVM_FEATURE_PV_UNHALT` and
//! `KVM_HC_KICK_CPU` (3.12), steal time's `preempted` flag (4.10: before it the guest cannot
//! tell a preempted vCPU, which is all vsched's `pv_steal_time` gives it), `KVM_FEATURE_PV_TLB_FLUSH`
//! (4.16), `KVM_FEATURE_PV_SCHED_YIELD` (5.2). The guest's lock algorithm (`lock_kind`) is the
//! guest kernel's, not the host's, so no release changes it.
//!
//! Not modelled: 3.2's first pass skips `i < last_boosted_vcpu` (later `i <=`), so while
//! `last_boosted_vcpu` is 0 its scan tries vCPU 0 first rather than last; the order is
//! otherwise the same.
//!
//! Defaults (no `kvm_version` given): `cfs` and `kvm-dy` follow "6.1" and `eevdf` and
//! `kvm-eevdf` "6.12", which is exactly what they did before `kvm_version` existed. Each rule
//! also has its own switch, which wins over the profile.

use vsched_model::{ConfigError, ParamDefault, ParamRange, ParamSpec, Params};

/// The accepted `kvm_version` values, oldest first.
pub const NAMES: [&str; 9] = ["3.2", "3.12", "4.19", "5.4", "5.15", "6.1", "6.12", "6.12.y", "current"];

/// `kvm_version` of the policies on CFS: 6.1, the last LTS on CFS.
pub(crate) const CFS_PARAM: ParamSpec = ParamSpec {
    name: "kvm_version",
    default: ParamDefault::Str("6.1"),
    range: ParamRange::Any,
    doc: "the Linux release whose KVM rules apply: \"3.2\", \"3.12\", \"4.19\", \"5.4\", \"5.15\" or \"6.1\" (CFS)",
};

/// `kvm_version` of the policies on EEVDF: 6.12.0.
pub(crate) const EEVDF_PARAM: ParamSpec = ParamSpec {
    name: "kvm_version",
    default: ParamDefault::Str("6.12"),
    range: ParamRange::Any,
    doc: "the Linux release whose KVM and EEVDF rules apply: \"6.12\" (6.12.0), \"6.12.y\" or \"current\"",
};

/// Which candidates `kvm_vcpu_on_spin` considers at all.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Candidates {
    /// `vcpu->preempted`: scheduled out while runnable (3.11 to 5.2).
    Preempted,
    /// `vcpu->ready`: preempted, or woken and not run since (5.3 on; 3.2's "not halted, not
    /// in guest mode" alike).
    Ready,
}

/// The release-dependent rules of KVM and of the fair class under it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct KvmProfile {
    pub(crate) eevdf: bool,
    pub(crate) ple_window_grow: u32,
    pub(crate) dy_eligible: bool,
    pub(crate) give_up_after_esrch: bool,
    pub(crate) candidates: Candidates,
    pub(crate) skip_user_mode: bool,
    pub(crate) boost_pending_irq: bool,
    pub(crate) kick_yield: bool,
    pub(crate) yield_bail_out: bool,
    pub(crate) pick_buddy: bool,
    pub(crate) base_slice_us: i64,
    pub(crate) yield_forfeit: bool,
    /// The host paravirtual features, by the release that first offers each.
    pub(crate) pv_unhalt: bool,
    pub(crate) steal_time_preempted: bool,
    pub(crate) pv_tlb_flush: bool,
    pub(crate) pv_sched_yield: bool,
    /// Core scheduling (`CONFIG_SCHED_CORE`, Linux >= 5.14; linux_core_sched.rs).
    pub(crate) core_sched: bool,
}

const LINUX_3_2: KvmProfile = KvmProfile {
    eevdf: false,
    ple_window_grow: 1,
    dy_eligible: false,
    give_up_after_esrch: false,
    candidates: Candidates::Ready,
    skip_user_mode: false,
    boost_pending_irq: false,
    kick_yield: false,
    yield_bail_out: false,
    pick_buddy: false,
    base_slice_us: 750,
    yield_forfeit: false,
    pv_unhalt: false,
    steal_time_preempted: false,
    pv_tlb_flush: false,
    pv_sched_yield: false,
    core_sched: false,
};

const LINUX_3_12: KvmProfile = KvmProfile {
    dy_eligible: true,
    give_up_after_esrch: true,
    candidates: Candidates::Preempted,
    pv_unhalt: true,
    ..LINUX_3_2
};

const LINUX_4_19: KvmProfile = KvmProfile {
    ple_window_grow: 2,
    skip_user_mode: true,
    steal_time_preempted: true,
    pv_tlb_flush: true,
    ..LINUX_3_12
};

const LINUX_5_4: KvmProfile =
    KvmProfile { candidates: Candidates::Ready, kick_yield: true, pv_sched_yield: true, ..LINUX_4_19 };

const LINUX_5_15: KvmProfile =
    KvmProfile { boost_pending_irq: true, yield_bail_out: true, core_sched: true, ..LINUX_5_4 };

/// 6.1 has 5.15's rules (6.1.20 `kvm_vcpu_on_spin` and `kvm_sched_yield`).
const LINUX_6_1: KvmProfile = LINUX_5_15;

const LINUX_6_12: KvmProfile = KvmProfile { eevdf: true, ..LINUX_6_1 };

const LINUX_6_12_Y: KvmProfile = KvmProfile { pick_buddy: true, base_slice_us: 700, yield_forfeit: true, ..LINUX_6_12 };

/// The profile of release `name` (one of [`NAMES`]).
fn profile(name: &str) -> KvmProfile {
    match name {
        "3.2" => LINUX_3_2,
        "3.12" => LINUX_3_12,
        "4.19" => LINUX_4_19,
        "5.4" => LINUX_5_4,
        "5.15" => LINUX_5_15,
        "6.1" => LINUX_6_1,
        "6.12" => LINUX_6_12,
        _ => LINUX_6_12_Y,
    }
}

/// The profile named by `kvm_version` in `params`, refused if the policy's fair class
/// (`eevdf`: EEVDF, else CFS) is not the release's.
pub(crate) fn from_params(params: &Params, eevdf: bool) -> Result<KvmProfile, ConfigError> {
    let name = params.choice("kvm_version", &NAMES)?;
    let p = profile(&name);
    if p.eevdf != eevdf {
        let (class, names) =
            if eevdf { ("EEVDF, Linux >= 6.6", &NAMES[6..]) } else { ("CFS, Linux <= 6.5", &NAMES[..6]) };
        let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
        return Err(params.invalid(
            "kvm_version",
            format!("this policy runs {class}: expected one of {}, got {name:?}", quoted.join(", ")),
        ));
    }
    Ok(p)
}

/// Why a VM's paravirtual feature `key` (its `[[vm]]` key) is refused on a host running
/// release `kvm_version`, if it is: the release does not offer it.
pub fn pv_refusal(kvm_version: &str, key: &str) -> Option<String> {
    let p = profile(kvm_version);
    let (offered, what) = match key {
        "pv_spinlocks" => (p.pv_unhalt, "KVM_FEATURE_PV_UNHALT and KVM_HC_KICK_CPU (Linux >= 3.12)"),
        "pv_steal_time" => (p.steal_time_preempted, "steal time's preempted flag (Linux >= 4.10)"),
        "pv_tlb_flush" => (p.pv_tlb_flush, "KVM_FEATURE_PV_TLB_FLUSH (Linux >= 4.16)"),
        "pv_sched_yield" => (p.pv_sched_yield, "KVM_FEATURE_PV_SCHED_YIELD (Linux >= 5.2)"),
        _ => return None,
    };
    (!offered).then(|| format!("needs a host that offers {what}; kvm_version is {kvm_version:?}"))
}
