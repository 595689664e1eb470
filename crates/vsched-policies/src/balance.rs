//! `balance` — balance scheduling on Credit (Sukwong & Kim, "Is co-scheduling too expensive
//! for SMP VMs?", EuroSys 2011; ../shared/specs/hypervisor-mechanisms.md §7).
//!
//! # How it works
//! Balance scheduling keeps one rule and nothing else: two sibling vCPUs (of one VM) never
//! wait in the same pCPU's run queue, so they are never stacked behind each other and tend
//! to run at the same time, without forcing them to start together. The rule applies
//! wherever a vCPU is placed:
//! - at creation, each vCPU goes to the pCPU with the fewest siblings, then the shortest queue;
//! - on wake, a vCPU whose run queue holds a sibling (queued or running) moves to one that
//!   does not, idle pCPUs first;
//! - in work stealing, a pCPU never steals a vCPU whose sibling is queued or running there.
//!
//! Everything else is Credit's (`credit.rs`): accounting, priorities, BOOST, tickling.
//!
//! # Fidelity notes
//! - The paper builds on KVM/CFS; we build on our Credit1 so it compares with the other
//!   co-scheduling policies of the seed papers on the same base. Say so when comparing
//!   against the paper's numbers.
//! - A running vCPU counts as part of its pCPU's run queue (as in CFS, where `curr` is on
//!   the runqueue).
//! - A VM with more vCPUs than pCPUs cannot satisfy the rule; its vCPUs go where the fewest
//!   siblings are.
//!
//! Suits: SMP VMs with fine-grained synchronization on an overcommitted host, where
//! co-scheduling's fragmentation is too costly. Known weakness: no simultaneous start, so a
//! lock holder can still be preempted while a sibling spins on another pCPU.

use vsched_model::{ConfigError, Params, Policy, PolicyInfo};

use crate::credit::{self, Credit};
use crate::credit_spread::Spread;

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(Credit::from_params(params, Spread::All)?))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "balance",
    description: "balance scheduling on Credit: sibling vCPUs never share a run queue; no forced co-start",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: credit::PARAMS,
    build,
};
