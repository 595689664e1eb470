//! `cds` — co-descheduling on Credit: hybrid co-scheduling (`cs.rs`) plus VMware's stricter
//! rule that co-scheduled vCPUs are also descheduled together (seed 004 §I and §VII, after
//! VMware's co-scheduling notes; a baseline in seed 004's Figs. 3–7).
//!
//! # How it works
//! Everything `cs` does (global co-scheduling lock, signals to all pCPUs, HIT fill), and:
//! whenever a running vCPU of a CON VM leaves its pCPU (its slice ended, a signal or a
//! higher-priority wake-up displaced it, it yielded, blocked or finished) every sibling still
//! running on another pCPU receives a co-descheduling signal; that pCPU puts the sibling back
//! in its run queue and runs the first vCPU of another VM in its queue (or idles and looks
//! again one tick later). The VM runs again when one of its vCPUs is next chosen, which
//! launches a new co-scheduling. A program that blocks often (a barrier, I/O) thus relaunches
//! its VM at every block, which is why seed 004 (Fig. 5) sees CDS launch several times more
//! often than CS.
//!
//! # Readings of ambiguous points
//! - Seed 004 does not give CDS's code; its only definition (§VII) is that "the concurrent
//!   VCPUs need to not only be scheduled concurrently but also be descheduled concurrently",
//!   after VMware's strict co-scheduling. A vCPU that blocks is descheduled like one that is
//!   preempted, so every deschedule triggers the rule. (An earlier reading exempted blocking,
//!   after VMware's relaxed co-scheduling, which counts a halted vCPU as making progress; that
//!   is ESX 3 and later, not the strict scheme seed 004 compares with, and it made `cds` behave
//!   exactly like `cs` whenever hogs were the only preempted vCPUs.)
//! - A vCPU descheduled by a co-descheduling signal does not signal its siblings again.
//! - A pCPU told to co-deschedule while it is also a pending co-scheduling participant
//!   follows the co-scheduling signal (the newer operation wins).
//!
//! Suits: nothing in particular; it is the strict baseline. Known weakness: fragmentation and
//! scheduling churn grow with every CON VM.

use vsched_model::{ConfigError, Params, Policy, PolicyInfo};

use crate::credit::{self, Credit};
use crate::credit_spread::Spread;
use crate::credit_variant::OnCredit;
use crate::cs::CoSched;

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(OnCredit { base: Credit::from_params(params, Spread::Con)?, variant: CoSched::new(true) }))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "cds",
    description: "co-descheduling on Credit: cs, and when a CON vCPU leaves its pCPU (preempted or blocked) its siblings are descheduled too",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: credit::PARAMS,
    build,
};
