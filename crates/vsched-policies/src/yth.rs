//! `yth` — yield to head: Credit whose yielding vCPUs wait at the head of their run queue
//! (seed 001: Wang et al., "Efficient consolidation-aware VCPU scheduling on multicore
//! virtualization platform", FGCS 2016, §2 and Fig. 1(b)).
//!
//! # How it works
//! A pause-loop exit says the vCPU is most likely spinning on a lock whose holder is not
//! running, and Xen's PLE handler makes it yield (../shared/specs/hypervisor-mechanisms.md §1,
//! §4). YTH "detects the lock waiter vCPU and inserts it to the head of the corresponding CPU
//! run queue": the waiter "yields its CPU time slice to other vCPUs and waits in the head of
//! CPU run queue for the next round". We read that as: the pCPU chooses its next vCPU without
//! the yielder, by Credit's usual rule (the head of its queue, or a vCPU stolen from a peer
//! when the head is OVER or the queue empty), runs it for a slice, and queues the yielder
//! first, so it runs when that slice ends. With nothing else to run the yielder runs on. Unlike
//! `credit` and `ytt`, the waiter gives up one slice, not a round of its queue.
//!
//! # Readings
//! - The head is a position, not a priority: a vCPU that wakes BOOSTed later still goes ahead
//!   of an UNDER yielder by Credit's priority insert, and the run-queue sort after the next
//!   accounting moves an OVER yielder behind UNDER vCPUs. Stealing pCPUs see the yielder at
//!   the head, as any queued vCPU.
//! - If the holder is still preempted when the yielder runs again, the yielder spins for one
//!   PLE window, exits and yields again: the seed's Fig. 1(b) shows one round only.
//!
//! Everything else is Credit's (`credit.rs`).
//!
//! Suits: moderately consolidated hosts, where the holder probably runs or runs soon and the
//! waiter should not lose a whole round (seed 001 Table 1: middle performance). Known
//! weakness: when the holder is queued behind the waiter, the waiter keeps coming back to spin
//! for a window and yield again, one slice of another vCPU at a time.

use vsched_model::{ConfigError, Params, Policy, PolicyInfo};

use crate::credit::{self, Credit, Spread, YieldPlacement};

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(Credit::from_params(params, Spread::Off)?.with_yield_placement(YieldPlacement::Head)))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "yth",
    description: "yield to head on Credit: after a pause-loop exit one other vCPU runs a slice, then the yielder",
    params: credit::PARAMS,
    build,
};
