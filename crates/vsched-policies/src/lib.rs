//! vsched's scheduling policies, one per file, and the registry that names them.
//!
//! How to add one (or to write one in Python instead): docs/writing-policies.md.

pub mod balance;
pub mod balance_cfs;
pub mod balance_eevdf;
pub mod bcs;
pub mod cds;
pub mod cfs;
pub mod core_gran;
/// Not a policy: the unit world `core_gran` shows its policy.
mod core_gran_world;
pub mod cosched;
/// Not a policy: `cosched`'s index of waiting fillers.
mod cosched_fillers;
pub mod credit;
pub mod credit2;
mod credit2_balance;
mod credit2_cap;
mod credit2_runq;
mod credit2_sched;
mod credit2_state;
#[cfg(test)]
mod credit2_tests;
/// Not a policy: credit2's rules by Xen release (`xen_version`).
mod credit2_version;
mod credit_acct;
mod credit_pick;
mod credit_runq;
mod credit_spread;
mod credit_trace;
mod credit_variant;
pub mod cs;
pub mod cvs_adaptive;
pub mod cvs_comm;
pub mod eevdf;
pub mod hybrid;
/// Not a policy: KVM's PLE handler and yield hypercalls, over `cfs` or `eevdf`.
mod kvm;
pub mod kvm_dy;
pub mod kvm_eevdf;
/// Not a policy: the KVM policies' rules by Linux release (`kvm_version`).
mod kvm_version;
/// Not a policy: balance scheduling's sibling rule on `cfs` and `eevdf`.
mod linux_balance;
/// Not a policy: Linux core scheduling (cookies, the core-wide pick) for `cfs` and `eevdf`.
mod linux_core_sched;
/// Not a policy: what `cfs` and `eevdf` share (weights, tunable scaling, placement, balancing).
mod linux_fair;
mod pcpu_set;
pub mod pcs;
pub mod relaxed;
mod relaxed_books;
/// Not a policy: what `cosched` and `vds` share.
mod rounds;
pub mod rr;
pub mod vds;
/// Not a policy: Credit's rules by Xen release (`xen_version`).
mod xen_version;
pub mod yth;
pub mod ytt;

use vsched_model::PolicyInfo;

/// The releases `xen_version` accepts (`credit` and the policies built on it).
pub use xen_version::{NAMES as XEN_VERSIONS, XEN_TIMER_SLOP_NS};

/// The releases `xen_version` accepts under `credit2`.
pub use credit2_version::NAMES as CREDIT2_XEN_VERSIONS;

/// The releases `kvm_version` accepts (`cfs`, `eevdf`, `kvm-dy`, `kvm-eevdf`, `balance-cfs`,
/// `balance-eevdf`), and the host
/// paravirtual features each offers.
pub use kvm_version::{pv_refusal as kvm_pv_refusal, NAMES as KVM_VERSIONS};

/// The registered policies that run KVM's PLE handler (`kvm.rs`) and so pay its cost
/// (`Hardware::kvm_ple_handler_ns`); `cfs` and `eevdf` are KVM with PLE handling off.
pub const KVM_PLE_HANDLERS: [&str; 2] = [kvm_dy::INFO.name, kvm_eevdf::INFO.name];

/// Every policy, by name.
pub const REGISTRY: &[PolicyInfo] = &[
    rr::INFO,
    credit::INFO,
    credit2::INFO,
    balance::INFO,
    ytt::INFO,
    yth::INFO,
    cs::INFO,
    cds::INFO,
    pcs::INFO,
    bcs::INFO,
    cosched::INFO,
    vds::INFO,
    hybrid::INFO,
    cvs_adaptive::INFO,
    cvs_comm::INFO,
    cfs::INFO,
    eevdf::INFO,
    kvm_dy::INFO,
    kvm_eevdf::INFO,
    balance_cfs::INFO,
    balance_eevdf::INFO,
    relaxed::INFO,
];

/// The Xen releases policy `name` follows (its `xen_version` values): credit2's for
/// `credit2`, Credit's for every other.
pub fn xen_versions_of(name: &str) -> &'static [&'static str] {
    if name == credit2::INFO.name {
        &credit2_version::NAMES
    } else {
        &xen_version::NAMES
    }
}

/// The policy a registered policy is built on (its base scheduler), if any: the
/// co-scheduling and yield policies of the seed papers run on Credit (`credit.rs`, its
/// `OnCredit` and spread rules), KVM's PLE handler and balance scheduling on Linux's CFS or
/// EEVDF. None of them runs on credit2 (see docs/policies.md, "credit2").
pub fn base_of(name: &str) -> Option<&'static str> {
    const ON_CREDIT: [&str; 9] = ["balance", "ytt", "yth", "cs", "cds", "pcs", "bcs", "cvs-adaptive", "cvs-comm"];
    if ON_CREDIT.contains(&name) {
        return Some(credit::INFO.name);
    }
    match name {
        "kvm-dy" | "balance-cfs" => Some(cfs::INFO.name),
        "kvm-eevdf" | "balance-eevdf" => Some(eevdf::INFO.name),
        _ => None,
    }
}

/// Looks a policy up by name.
pub fn find(name: &str) -> Option<&'static PolicyInfo> {
    REGISTRY.iter().find(|p| p.name == name)
}

/// Names of all policies, for error messages.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|p| p.name).collect()
}
