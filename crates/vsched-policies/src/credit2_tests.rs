//! credit2 on the hand-driven world (`vsched_model::hand_world`): the runqueue arrangement
//! (`cpu_add_to_runqueue`) and the yield flag (`runq_candidate`), set up exactly.

use std::collections::BTreeMap;

use vsched_model::hand_world::{start_on, Bench};
use vsched_model::{Params, PcpuId, Value, YieldReason, NS_PER_US};

use crate::credit2::{Credit2, PARAMS};

fn credit2(params: &[(&str, Value)]) -> Credit2 {
    let given: BTreeMap<String, Value> = params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    Credit2::from_params(&Params::check("scheduler", PARAMS, &given).unwrap()).unwrap()
}

/// The runqueues (their pCPUs) of a host of `pcpus` pCPUs in `sockets` sockets with
/// `threads` threads per core.
fn runqueues(pcpus: usize, sockets: usize, threads: usize, params: &[(&str, Value)]) -> Vec<Vec<PcpuId>> {
    let mut policy = credit2(params);
    let mut hand = Bench::new(pcpus, 1);
    hand.sockets = sockets;
    hand.threads_per_core = threads;
    start_on(&mut hand, &mut policy, &[]);
    policy.rqs.iter().map(|rq| rq.cpus.clone()).collect()
}

fn s(v: &str) -> Value {
    Value::Str(v.into())
}

#[test]
fn runqueues_are_sockets_cores_cpus_or_the_host() {
    let by = |arr: &str| runqueues(8, 2, 2, &[("credit2_runqueue", s(arr))]);
    assert_eq!(by("socket"), [vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    assert_eq!(by("node"), by("socket"));
    assert_eq!(by("core"), [vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
    assert_eq!(by("cpu"), (0..8).map(|p| vec![p]).collect::<Vec<_>>());
    assert_eq!(by("all"), [(0..8).collect::<Vec<_>>()]);
}

/// From 4.14 a runqueue holds at most 16 pCPUs, spread evenly (`cpu_add_to_runqueue`): a
/// socket of 24 pCPUs makes two runqueues of 12 (`max_cpus_runq` = 24 / ⌈24 / 16⌉), each
/// new pCPU going to the less full one; 4.12 keeps the socket whole.
#[test]
fn from_xen_4_14_a_runqueue_holds_at_most_16_pcpus_spread_evenly() {
    let rqs = runqueues(24, 1, 1, &[]);
    assert_eq!(rqs.len(), 2);
    assert!(rqs.iter().all(|rq| rq.len() == 12), "{rqs:?}");
    // The first 12 fill runqueue 0 (it has room and is the only match), then pCPU 12 finds it
    // full at 12 = max_cpus_runq and opens runqueue 1.
    assert_eq!(rqs[0], (0..12).collect::<Vec<_>>());
    let whole = runqueues(24, 1, 1, &[("xen_version", s("4.12"))]);
    assert_eq!(whole, [(0..24).collect::<Vec<_>>()]);
    // Hardware threads stay together: 20 pCPUs in cores of 2 under a bound of 4.
    let rqs = runqueues(20, 1, 2, &[("sched_credit2_max_cpus_runqueue", Value::Int(4))]);
    assert!(rqs.iter().all(|rq| rq.len() == 4 && rq.chunks(2).all(|c| c[0] / 2 == c[1] / 2)), "{rqs:?}");
}

/// One pCPU, three vCPUs of one VM: v0 runs, v1 and v2 wait with far less credit. A yield
/// (a pause-loop exit) within v0's rate limit hands the pCPU to the head of the runqueue
/// whatever the credits; without it v0 keeps the pCPU (rate limit, then its credit).
#[test]
fn a_yielder_is_passed_over_whatever_its_credit() {
    for version in ["4.12", "4.14", "4.21", "current"] {
        let mut policy = credit2(&[("xen_version", s(version))]);
        let mut hand = Bench::new(1, 3);
        start_on(&mut hand, &mut policy, &[0]);
        assert_eq!(hand.curr[0], Some(0));
        for (v, credit) in [(1, 2_000_000), (2, 1_000_000)] {
            policy.runq_remove(v);
            policy.vcpus[v].credit = credit;
            policy.runq_insert(v);
        }
        // No yield: a reschedule at 200 µs keeps v0 (its rate limit), one at 2 ms too (9.8 ms
        // of credit against v1's 2 ms).
        hand.now = 200 * NS_PER_US;
        assert_eq!(hand.schedule(&mut policy, 0), Some(0), "{version}");
        hand.now = 2_000 * NS_PER_US;
        assert_eq!(hand.schedule(&mut policy, 0), Some(0), "{version}");
        // A yield at 2.1 ms: v1, the head, runs although v0 has 8 ms of credit (10 ms less
        // the 2 ms run) against its 2 ms; v0 is queued again with its credit.
        hand.now = 2_100 * NS_PER_US;
        hand.yield_(&mut policy, 0, YieldReason::PauseLoopExit);
        assert_eq!(hand.resched, [0]);
        assert_eq!(hand.schedule(&mut policy, 0), Some(1), "{version}");
        assert_eq!(policy.vcpus[0].credit, 7_900_000, "{version}");
        assert!(policy.vcpus[0].queued && !policy.vcpus[0].yielding);
        // KVM's hypercalls are not Xen's: no flag, no reschedule.
        hand.resched.clear();
        hand.yield_(&mut policy, 1, YieldReason::SchedYield { target: 2 });
        assert!(hand.resched.is_empty() && !policy.vcpus[1].yielding);
    }
}

/// A yielder with nothing else to run runs on.
#[test]
fn a_yielder_alone_runs_on() {
    let mut policy = credit2(&[]);
    let mut hand = Bench::new(1, 1);
    start_on(&mut hand, &mut policy, &[0]);
    hand.now = 100 * NS_PER_US;
    hand.yield_(&mut policy, 0, YieldReason::PauseLoopExit);
    assert_eq!(hand.schedule(&mut policy, 0), Some(0));
}
