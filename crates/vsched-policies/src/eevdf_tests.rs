//! `Eevdf::yield_to` on a hand-driven world (`vsched_model::hand_world`: the test calls the
//! callbacks; the clock stays at 0), as `kvm-eevdf`'s PLE handler and hypercalls call it.
//!
//! Facts used: with `tunable_scaling = "none"` a slice is 0.75 ms; each vCPU starts at
//! vruntime 0 (V of its queue) with its deadline at 0.375 ms; the pick takes the earliest
//! eligible deadline, the vCPU queued first on ties, and the running vCPU keeps its pCPU
//! while it has the deadline it was picked with (RUN_TO_PARITY).

use std::collections::BTreeMap;

use vsched_model::hand_world::{start_on, Bench};
use vsched_model::{Params, PcpuId, Value, VcpuId, NS_PER_US};

use super::{from_params, Eevdf, PARAMS};
use crate::kvm::LinuxSched;
use crate::linux_fair::YieldTo;

/// `eevdf` (with `tunable_scaling = "none"` and `pick_buddy` as given) on `pcpus` pCPUs
/// with one VM of `vcpus` vCPUs inserted in order, then pCPUs `first` scheduled.
fn start(pcpus: usize, vcpus: usize, pick_buddy: bool, first: &[PcpuId]) -> (Bench, Eevdf) {
    let given: BTreeMap<String, Value> = [
        ("tunable_scaling".to_string(), Value::Str("none".into())),
        ("pick_buddy".to_string(), Value::Bool(pick_buddy)),
    ]
    .into();
    let mut policy = from_params(&Params::check("scheduler", PARAMS, &given).unwrap()).unwrap();
    let mut world = Bench::new(pcpus, vcpus);
    start_on(&mut world, &mut policy, first);
    (world, policy)
}

/// `me`, running, yields to `target`.
fn yield_to(world: &mut Bench, policy: &mut Eevdf, me: VcpuId, target: VcpuId) -> YieldTo {
    let here = world.curr.iter().position(|&c| c == Some(me));
    policy.yield_to(&mut world.cx(here), me, target)
}

#[test]
fn yield_to_fails_with_esrch_when_both_queues_hold_one_vcpu() {
    // vCPU 0 on pCPU 0 (running), vCPU 1 queued alone on pCPU 1, which has not picked yet.
    let (mut hand, mut eevdf) = start(2, 2, false, &[0]);
    assert_eq!(yield_to(&mut hand, &mut eevdf, 0, 1), YieldTo::Esrch);
    assert!(hand.resched.is_empty());
}

#[test]
fn a_yielder_sharing_its_queue_moves_its_deadline_a_slice_later() {
    // One pCPU, vCPUs 0 (running), 1 and 2, all at vruntime 0 with deadline 0.375 ms. vCPU 0
    // yields to 2: its deadline moves a slice later, to 1.125 ms (`yield_task_fair`), which
    // ends its protection; the pCPU reschedules. Linux 6.12 then ignores the next buddy: the
    // earliest eligible deadline is vCPU 1's (queued before 2). With PICK_BUDDY, vCPU 2 runs.
    for (pick_buddy, runs) in [(false, 1), (true, 2)] {
        let (mut hand, mut eevdf) = start(1, 3, pick_buddy, &[0]);
        assert_eq!(hand.curr[0], Some(0));
        assert_eq!(yield_to(&mut hand, &mut eevdf, 0, 2), YieldTo::Yielded);
        assert_eq!(eevdf.se[0].deadline, 1125 * NS_PER_US as i64);
        assert_eq!(hand.resched, vec![0]);
        assert_eq!(hand.schedule(&mut eevdf, 0), Some(runs), "pick_buddy = {pick_buddy}");
    }
}

#[test]
fn a_remote_target_becomes_its_queues_next_buddy_and_both_pcpus_reschedule() {
    // Two pCPUs: vCPUs 0 and 2 on pCPU 0 (0 runs, queued first), vCPU 1 alone on pCPU 1.
    // vCPU 1 yields to 2: both pCPUs reschedule, the target's first; vCPU 1, alone, keeps
    // its deadline (`yield_task_fair` returns when nr_running is 1) and runs on. On pCPU 0,
    // vCPU 0 is eligible and protected, so it runs on unless the next buddy counts.
    for (pick_buddy, runs) in [(false, 0), (true, 2)] {
        let (mut hand, mut eevdf) = start(2, 3, pick_buddy, &[0, 1]);
        assert_eq!(yield_to(&mut hand, &mut eevdf, 1, 2), YieldTo::Yielded);
        assert_eq!(hand.resched, vec![0, 1]);
        assert_eq!(eevdf.se[1].deadline, 375 * NS_PER_US as i64);
        assert_eq!(hand.schedule(&mut eevdf, 0), Some(runs), "pick_buddy = {pick_buddy}");
        assert_eq!(hand.schedule(&mut eevdf, 1), Some(1));
    }
}
