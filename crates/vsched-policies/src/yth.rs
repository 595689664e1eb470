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
//! when the head is OVER or the queue empty), runs it, and queues the yielder first, so it
//! runs when that vCPU's turn ends. A "round" ends when a vCPU leaves the pCPU without
//! yielding: until then every vCPU that yielded there in the round is passed over, so a second
//! waiter that replaces the first and yields too hands the pCPU to the rest of the queue, not
//! back to the first. With nothing else to run, the waiter that yielded earliest runs. Unlike
//! `credit` and `ytt`, the waiter gives up one turn, not a round of its whole queue.
//!
//! # Readings
//! - The head is a position, not a priority: a vCPU that wakes BOOSTed later still goes ahead
//!   of an UNDER yielder by Credit's priority insert, and the run-queue sort after the next
//!   accounting moves an OVER yielder behind UNDER vCPUs. Stealing pCPUs see the yielder at
//!   the head, as any queued vCPU.
//! - If the holder is still preempted when the yielder runs again, the yielder spins for one
//!   PLE window, exits and yields again: the seed's Fig. 1(b) shows one round only.
//! - Rounds and stealing are our readings: the figure shows one waiter. Without rounds, two
//!   waiters of one lock on one pCPU hand it to each other every PLE window and the rest of
//!   the queue (the holder, say) waits until the next accounting re-sorts it; and a waiter
//!   that peers may steal while it waits for its round is run elsewhere at once, which undoes
//!   its yield: on the seed 001 Kernbench scenarios at VOR ≥ 2 both livelocked the host (waiters
//!   stolen back and forth, holders never run). So a waiting yielder is not stolen.
//!
//! Everything else is Credit's (`credit.rs`).
//!
//! Suits: moderately consolidated hosts, where the holder probably runs or runs soon and the
//! waiter should not lose a whole round (seed 001 Table 1: middle performance). Known
//! weakness: when the holder is queued behind the waiter, the waiter keeps coming back to spin
//! for a window and yield again, one slice of another vCPU at a time.

use vsched_model::{ConfigError, Params, Policy, PolicyInfo};

use crate::credit::{self, Credit, YieldPlacement};
use crate::credit_spread::Spread;

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(Credit::from_params(params, Spread::Off)?.with_yield_placement(YieldPlacement::Head)))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "yth",
    description: "yield to head on Credit: after a pause-loop exit one other vCPU runs a slice, then the yielder",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: credit::PARAMS,
    build,
};
