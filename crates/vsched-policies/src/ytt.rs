//! `ytt` — yield to tail: Credit whose yielding vCPUs wait at the tail of their run queue
//! (seed 001: Wang et al., "Efficient consolidation-aware VCPU scheduling on multicore
//! virtualization platform", FGCS 2016, §2 and Fig. 1(c)).
//!
//! # How it works
//! A pause-loop exit says the vCPU is most likely spinning on a lock whose holder is not
//! running, and Xen's PLE handler makes it yield (../shared/specs/hypervisor-mechanisms.md §1,
//! §4). YTT "detects the lock waiter vCPU and inserts it to the tail of the corresponding CPU
//! run queue": the waiter gives up the rest of its slice and "waits in the tail of CPU run
//! queue for the next round", behind every vCPU queued on its pCPU, among them possibly the
//! preempted lock holder. Everything else is Credit's (`credit.rs`): accounting, priorities,
//! BOOST, tickling, work stealing.
//!
//! # How it differs from `credit`
//! The paper calls YTT Xen's default. Xen's `__runq_insert` (`credit`) is close but not the
//! same: it puts the yielder behind the vCPUs of its own priority and only *one* lower-priority
//! vCPU further back; `ytt` puts it behind all of them. The two agree whenever at most one
//! queued vCPU has a lower priority than the yielder (e.g. all UNDER); they differ when an
//! UNDER or BOOST yielder shares its queue with several lower-priority vCPUs. Either way a
//! yielder left behind lower-priority vCPUs comes forward at the next run-queue sort, within
//! one accounting period (30 ms), as Xen's comment on its rule says.
//!
//! Suits: heavily consolidated hosts, where the lock holder is likely queued somewhere and the
//! waiter has nothing better to do than let everyone else run (seed 001 Table 1: low overhead,
//! low degradation). Known weakness: the waiter waits a whole round of its queue even when the
//! holder releases the lock right after the yield (Table 1: low performance).

use vsched_model::{ConfigError, Params, Policy, PolicyInfo};

use crate::credit::{self, Credit, YieldPlacement};
use crate::credit_spread::Spread;

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(Credit::from_params(params, Spread::Off)?.with_yield_placement(YieldPlacement::Tail)))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "ytt",
    description: "yield to tail on Credit: a pause-loop exit sends the vCPU behind every vCPU in its run queue",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: credit::PARAMS,
    build,
};
