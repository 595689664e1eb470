//! `balance-cfs` — balance scheduling on CFS, where the paper built it (Sukwong & Kim, "Is
//! co-scheduling too expensive for SMP VMs?", EuroSys 2011): `cfs` (cfs.rs, KVM with PLE
//! handling off) with sibling vCPU threads kept in different run queues at wake-up, at fork
//! and in newly idle and periodic balancing. The rule, how it enters Linux's placement, and
//! where we approximate: linux_balance.rs. `balance` is the same rule on Credit.
//!
//! Suits: SMP VMs with fine-grained synchronization on an overcommitted KVM host, the paper's
//! setting. Known weakness: no simultaneous start, so a lock holder can still be preempted
//! while a sibling spins on another CPU; the rule can also put a vCPU behind a busier queue
//! than plain CFS would.

use vsched_model::{ConfigError, Params, Policy, PolicyInfo};

use crate::cfs;

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(cfs::from_params(params)?.balanced()))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "balance-cfs",
    description:
        "balance scheduling on CFS (KVM, PLE exits ignored): sibling vCPUs never share a run queue; no forced co-start",
    hypervisor: vsched_model::Hypervisor::Kvm,
    params: cfs::PARAMS,
    build,
};
