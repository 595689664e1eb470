//! KVM's yield paths today (`kvm.rs`): the PLE handler's pending-interrupt rule and its
//! candidate orders, and `kvm_sched_yield` answering the `KVM_HC_SCHED_YIELD` and
//! `KVM_HC_KICK_CPU` hypercalls; plus the guest side of the paravirtual sched_yield and TLB
//! flush (`sim/irq.rs`).
//!
//! The first tests drive `kvm-dy` by hand (`hand_world::Bench`), so that which sibling a scan
//! chooses is read off the reschedule requests: a target on the spinner's pCPU reschedules
//! that pCPU only; a target elsewhere reschedules its own pCPU first. The set-up shared by
//! them (`tunable_scaling = "none"`: latency 6 ms, 2 entities → 3 ms slices, 4 ms tick):
//! 2 pCPUs, one VM of 4 vCPUs. Insertion puts v0, v1 on pCPUs 0, 1 at vruntime 6 ms and v2,
//! v3 at 3 ms, so v2 and v3 run first; the 4 ms tick finds each past its 3 ms slice and
//! behind its queue-mate (7 > 6 ms), so v0 runs on pCPU 0 and v1 on pCPU 1, while v2 and v3
//! wait, `ready` and `preempted`. v0 is the spinner.

mod common;
use common::*;
use vsched_model::hand_world::{start, Bench};
use vsched_model::{
    HostConfig, Instr, Paravirt, Policy, Time, Value, VmType, YieldReason, FOREVER, NS_PER_MS, NS_PER_US,
};

const MS: Time = NS_PER_MS;
const US: Time = NS_PER_US;

/// `kvm-dy` with `tunable_scaling = "none"` and `params`, after the set-up of the header.
fn after_setup(params: &[(&str, Value)]) -> (Bench, Box<dyn Policy>) {
    kvm_dy_after_setup(params)
}

/// The sibling v0's pause-loop exit yielded to, read off the reschedule requests (and
/// cleared): v2 shares pCPU 0 with v0; v3 is on pCPU 1.
fn boosted(world: &mut Bench) -> Option<usize> {
    let r = std::mem::take(&mut world.resched);
    match r.as_slice() {
        [] => None,
        [0] => Some(2),
        [1, 0] => Some(3),
        other => panic!("unexpected reschedules {other:?}"),
    }
}

fn ple_exit(world: &mut Bench, policy: &mut dyn Policy) -> Option<usize> {
    world.yield_(policy, 0, YieldReason::PauseLoopExit);
    boosted(world)
}

fn str(s: &str) -> Value {
    Value::Str(s.into())
}

#[test]
fn a_sibling_preempted_in_user_mode_is_boosted_only_with_a_posted_interrupt() {
    // v2 and v3 were preempted in user mode: neither can hold a kernel lock, so a kernel-mode
    // spinner skips both. An IPI pending for v3 makes it a candidate (Linux >= 5.13), but KVM
    // sees it only when the host posts interrupts; `boost_pending_irq = false` is the older
    // rule.
    let (mut world, mut policy) = after_setup(&[]);
    world.in_kernel[0] = true;
    assert_eq!(ple_exit(&mut world, policy.as_mut()), None);
    world.pending_irq[3] = true;
    assert_eq!(ple_exit(&mut world, policy.as_mut()), None, "not posted: KVM cannot see it");
    world.posted = true;
    assert_eq!(ple_exit(&mut world, policy.as_mut()), Some(3));
    assert_eq!(world.counters.get("kvm_dy.no_target"), Some(&2));
    assert_eq!(world.counters.get("kvm_dy.yields"), Some(&1));

    let (mut world, mut policy) = after_setup(&[("boost_pending_irq", Value::Bool(false))]);
    (world.in_kernel[0], world.pending_irq[3], world.posted) = (true, true, true);
    assert_eq!(ple_exit(&mut world, policy.as_mut()), None);
}

#[test]
fn round_robin_starts_after_the_last_boosted_and_pending_irq_first_puts_ipi_receivers_first() {
    // v2 and v3 were preempted in kernel mode: both are candidates. Round robin starts after
    // `last_boosted` (0): v1 runs (not ready), so v2 is boosted; the next scan starts after 2
    // and boosts v3; the next starts after 3: v0 is the spinner, v1 runs, v2 again.
    let (mut world, mut policy) = after_setup(&[]);
    (world.in_kernel[0], world.in_kernel[2], world.in_kernel[3]) = (true, true, true);
    let picks: Vec<_> = (0..4).map(|_| ple_exit(&mut world, policy.as_mut())).collect();
    assert_eq!(picks, vec![Some(2), Some(3), Some(2), Some(3)]);

    // With an IPI pending for v3, "pending-irq-first" tries v3 before v2 every time.
    let (mut world, mut policy) = after_setup(&[("candidates", str("pending-irq-first"))]);
    (world.in_kernel[0], world.in_kernel[2], world.in_kernel[3]) = (true, true, true);
    world.pending_irq[3] = true;
    let picks: Vec<_> = (0..4).map(|_| ple_exit(&mut world, policy.as_mut())).collect();
    assert_eq!(picks, vec![Some(3); 4]);
}

#[test]
fn random_candidates_pick_among_the_eligible_siblings() {
    // Two eligible siblings, 200 scans from the policy's seeded stream: each is chosen, and
    // neither more than 2/3 of the time (a fair coin leaves 100 ± 7 for each; the bound
    // only catches an order that is not random).
    let (mut world, mut policy) = after_setup(&[("candidates", str("random"))]);
    (world.in_kernel[0], world.in_kernel[2], world.in_kernel[3]) = (true, true, true);
    let picks: Vec<_> = (0..200).map(|_| ple_exit(&mut world, policy.as_mut()).unwrap()).collect();
    let v3 = picks.iter().filter(|&&v| v == 3).count();
    assert!((67..=133).contains(&v3), "v3 chosen {v3} times of 200");
    // The sequence is not round robin's alternation.
    assert!(picks.windows(2).any(|w| w[0] == w[1]));
}

#[test]
fn a_yield_hypercall_runs_its_target_if_it_is_ready_and_queued_behind_something() {
    // `kvm_sched_yield`: v3 is ready and waiting on pCPU 1 behind v1: v0 yields to it.
    let (mut world, mut policy) = after_setup(&[]);
    world.yield_(policy.as_mut(), 0, YieldReason::SchedYield { target: 3 });
    assert_eq!(boosted(&mut world), Some(3));
    // A running target (v1), or itself, gets nothing.
    world.yield_(policy.as_mut(), 0, YieldReason::Kick { target: 1 });
    world.yield_(policy.as_mut(), 0, YieldReason::Kick { target: 0 });
    assert_eq!(boosted(&mut world), None);
    let count = |name| world.counters.get(name).copied().unwrap_or(0);
    assert_eq!((count("kvm.sched_yield.attempted"), count("kvm.sched_yield.successful")), (1, 1));
    assert_eq!((count("kvm.kick_yield.attempted"), count("kvm.kick_yield.successful")), (2, 0));

    // `single_task_running`: a yielder alone on its run queue does not yield. Three vCPUs:
    // v1 is alone on pCPU 1; on pCPU 0 the tick replaces v2 by v0, so v2 is ready.
    let mut policy = common::policy("kvm-dy", &[("tunable_scaling", str("none"))]);
    let mut world = Bench::new(2, 3);
    start(&mut world, policy.as_mut());
    world.tick(policy.as_mut(), 0, 4 * MS);
    world.schedule(policy.as_mut(), 0);
    assert_eq!(world.curr, vec![Some(0), Some(1)]);
    world.resched.clear();
    world.yield_(policy.as_mut(), 1, YieldReason::SchedYield { target: 2 });
    assert!(world.resched.is_empty());
    assert_eq!(world.counters.get("kvm.sched_yield.successful"), None);
}

// ---- The guest side, end to end ----

/// One pCPU, one VM: S = vCPU 0 computes 10 µs, then shoots down the TLB of T = vCPU 1, a
/// user-mode hog. Insertion: S at 6 ms of vruntime, T at 3 ms, so T runs first; the 4 ms
/// tick (T past its 3 ms slice, 7 > 6 ms) switches to S, which interrupts the preempted T
/// at 4.010 ms and spins in kernel mode: a PLE exit every 2048 ns (fixed window).
fn shootdown_of_a_preempted_sibling(name: &str, posted: bool, pv: Paravirt) -> vsched_model::RunMetrics {
    let host = HostConfig { posted_interrupts: posted, ple_grow: Some(1), ..free_host(1) };
    let mut vm = domain(
        "vm",
        VmType::Hit,
        vec![program(&[compute(10 * US), Instr::IpiSync, compute(FOREVER)]), program(&[compute(FOREVER)])],
    );
    vm.pv = pv;
    let params = [("tunable_scaling", Value::Str("none".into()))];
    let mut sim = vsched_model::Simulation::new(host, vec![vm], policy(name, &params), 1);
    sim.run(10 * MS, vsched_model::Until::Horizon, &mut |_| true).unwrap()
}

#[test]
fn the_shootdown_sender_boosts_its_preempted_receiver() {
    // Without the boost S spins from 4.010 ms until the 8 ms tick gives T the pCPU (T takes
    // the IPI at entry and answers at once on this zero-cost host): 3.990 ms.
    let plain = shootdown_of_a_preempted_sibling("kvm-dy", false, Paravirt::default());
    assert_eq!(vm(&plain, "vm").spin_s, 3.990e-3);
    // With posted interrupts, the first PLE exit (2048 ns in) finds T preempted in user mode
    // but with an interrupt pending: yield_to(T) makes T the next buddy and S the skip buddy;
    // S (6 ms + 12.048 µs) is leftmost, T (7 ms) is 0.988 ms behind, within the 1 ms wakeup
    // granularity, so T runs and answers: S spun 2048 ns.
    let boosted = shootdown_of_a_preempted_sibling("kvm-dy", true, Paravirt::default());
    assert_eq!(vm(&boosted, "vm").spin_s, 2048e-9);
    assert_eq!(boosted.host.policy_counters["kvm_dy.yields"], 1);

    // The paravirtual sched_yield does it without waiting for an exit: right after sending,
    // the guest sees T preempted and calls KVM_HC_SCHED_YIELD(T), and T answers at once.
    let pv = Paravirt { steal_time: true, sched_yield: true, ..Default::default() };
    let hypercall = shootdown_of_a_preempted_sibling("kvm-dy", false, pv);
    assert_eq!((vm(&hypercall, "vm").spin_s, vm(&hypercall, "vm").pv_sched_yields), (0.0, 1));
    assert_eq!(hypercall.host.policy_counters["kvm.sched_yield.successful"], 1);
    // Plain CFS ignores the hypercall: S spins as without it.
    let cfs = shootdown_of_a_preempted_sibling("cfs", false, pv);
    assert_eq!(vm(&cfs, "vm").spin_s, 3.990e-3);

    // With the paravirtual TLB flush the preempted T is not interrupted at all: nothing to
    // wait for, no hypercall, one flush deferred to T's next entry.
    let pv = Paravirt { steal_time: true, sched_yield: true, tlb_flush: true, ..Default::default() };
    let flush = shootdown_of_a_preempted_sibling("kvm-dy", false, pv);
    let v = vm(&flush, "vm");
    assert_eq!((v.spin_s, v.ipi_syncs, v.pv_sched_yields, v.pv_tlb_flushes_deferred), (0.0, 0, 0, 1));
}
