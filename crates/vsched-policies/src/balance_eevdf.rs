//! `balance-eevdf` — balance scheduling (Sukwong & Kim, EuroSys 2011) on the fair class of
//! current Linux: `eevdf` (eevdf.rs, Linux 6.12, KVM with PLE handling off) with sibling
//! vCPU threads kept in different run queues at wake-up, at fork and in newly idle and
//! periodic balancing. The rule, how it enters Linux's placement, and where we approximate:
//! linux_balance.rs. The paper built it on CFS (`balance-cfs`); EEVDF keeps CFS's placement
//! and balancing, so the rule carries over unchanged. A vCPU blocked with its dequeue delayed
//! still holds its place in its run queue.
//!
//! Suits: SMP VMs with fine-grained synchronization on an overcommitted KVM host of today.
//! Known weakness: as `balance-cfs`, no simultaneous start.

use vsched_model::{ConfigError, Params, Policy, PolicyInfo};

use crate::eevdf;

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(eevdf::from_params(params)?.balanced()))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "balance-eevdf",
    description: "balance scheduling on EEVDF (KVM on Linux 6.12, PLE exits ignored): sibling vCPUs never share a run queue; no forced co-start",
    hypervisor: vsched_model::Hypervisor::Kvm,
    params: eevdf::PARAMS,
    build,
};
