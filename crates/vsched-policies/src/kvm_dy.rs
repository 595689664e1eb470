//! `kvm-dy` — KVM on CFS: the Linux scheduler of the seed papers' era (`cfs`) with KVM's
//! PLE handler and yield hypercalls on top (`kvm.rs`).
//!
//! Suits: the KVM baseline of lock-holder-preemption papers. Known weakness: a directed yield
//! is a guess — it may boost a sibling that does not hold the lock, and it only helps when
//! CFS lets the target run (the next buddy must be within a wakeup granularity of the
//! leftmost entity).

use vsched_model::{concat_params, ConfigError, ParamSpec, Params, Policy, PolicyInfo};

use crate::{cfs, kvm, kvm_version};

const PARAMS: [ParamSpec; cfs::PARAMS.len() + kvm::PARAMS.len()] = concat_params(cfs::PARAMS, kvm::PARAMS);

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    let cfs = cfs::from_params(params)?;
    Ok(Box::new(kvm::Kvm::new(cfs, params, kvm_version::from_params(params, false)?)?))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "kvm-dy",
    description: "KVM on CFS with PLE handling: directed yield to a preempted sibling (kvm_vcpu_on_spin)",
    hypervisor: vsched_model::Hypervisor::Kvm,
    params: &PARAMS,
    build,
};
