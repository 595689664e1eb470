//! Balance scheduling on Linux's fair class (`balance-cfs`, `balance-eevdf`; the rule is in
//! crates/vsched-policies/src/linux_balance.rs): a vCPU thread never joins a run queue that
//! holds a sibling, at wake-up, at fork and in balancing, and goes where the fewest siblings
//! are when its VM is wider than the host. Each rule is shown on an exact trace, beside the
//! base policy that breaks it on the same set-up.
//!
//! Shared facts (derivations as in tests/cfs.rs and tests/eevdf.rs): 2 pCPUs with zero
//! overheads, `tunable_scaling = "none"`, a 4 ms tick. Under CFS a new vCPU goes to the
//! least loaded pCPU (lowest index on ties) at min_vruntime + latency / (entities there,
//! itself included): 6 ms alone, 3 ms as the second, 2 ms as the third; equal vruntimes go to
//! the lower id. Under EEVDF a new vCPU starts at V with half a 0.75 ms slice to its deadline;
//! equal deadlines go to the one queued first. Domains are inserted in the order given, so
//! vCPU ids follow it.

mod common;
use common::*;
use vsched_model::{
    DomainConfig, Dur, Instr, Program, RunMetrics, Simulation, Span, Time, Until, Value, VmType, FOREVER, NS_PER_MS,
};

const MS: Time = NS_PER_MS;

/// `name` with `tunable_scaling = "none"` on `pcpus` free pCPUs until `horizon`, traced.
fn run_traced(name: &str, pcpus: usize, doms: Vec<DomainConfig>, horizon: Time) -> (RunMetrics, Vec<Span>) {
    let params = [("tunable_scaling", Value::Str("none".into()))];
    let mut sim = Simulation::new(free_host(pcpus), doms, policy(name, &params), 1);
    sim.enable_trace(100_000);
    let m = sim.run(horizon, Until::Horizon, &mut |_| true).unwrap();
    let spans = sim.take_trace().unwrap().spans().to_vec();
    (m, spans)
}

/// Computes `first`, blocks for `nap`, then computes for ever.
fn napper(first: Time, nap: Time) -> Program {
    program(&[compute(first), Instr::Io(Dur::Fixed(nap)), compute(FOREVER)])
}

/// Blocks at once for `nap`, then computes for ever.
fn sleeper(nap: Time) -> Program {
    program(&[Instr::Io(Dur::Fixed(nap)), compute(FOREVER)])
}

fn hit(name: &str, programs: Vec<Program>) -> DomainConfig {
    domain(name, VmType::Hit, programs)
}

#[test]
fn on_cfs_a_waking_vcpu_leaves_a_run_queue_that_holds_a_sibling() {
    // A = {a0 = 0 (hog), a1 = 1 (computes 1 ms, sleeps 2 ms, then computes)}, H = {h = 2}.
    // Fork: a0 → pCPU 0 (6 ms), a1 → pCPU 1 (6 ms), h → pCPU 0 (3 ms), so h runs on pCPU 0
    // and a0 waits. At 1 ms a1 blocks (7 ms); pCPU 1 is empty and pulls a0, the only waiting
    // vCPU (no sibling is queued on pCPU 1), at 6 + 7 − 3 = 10 ms. At 3 ms a1 wakes; no pCPU
    // is idle.
    // - cfs: back to its previous pCPU 1 (`select_idle_sibling`), behind its sibling a0: it
    //   is placed at max(7, 12 − 3) = 9 ms, preempts a0 (12 − 9 > 1 ms) and runs until the
    //   8 ms tick (5 ms > its 3 ms slice). From 3 to 8 ms only one vCPU of A runs.
    // - balance-cfs: pCPU 1 holds a sibling, so its mask is {pCPU 0}; none of it is idle,
    //   and `select_fallback_rq` gives the first allowed pCPU, 0. Moved there at 7 + 3 − 7 =
    //   3 ms, placed at max(3, 6 − 3) = 3 ms (h is at 6), it preempts h; a0 keeps pCPU 1.
    //   From 3 to 8 ms both vCPUs of A run.
    let doms = || vec![hit("A", vec![hog(), napper(MS, 2 * MS)]), hit("H", vec![hog()])];
    let (m, spans) = run_traced("cfs", 2, doms(), 10 * MS);
    assert_eq!(on(&spans, 0), vec![(2, 0, 10 * MS)]);
    assert_eq!(on(&spans, 1), vec![(1, 0, MS), (0, MS, 3 * MS), (1, 3 * MS, 8 * MS), (0, 8 * MS, 10 * MS)]);
    assert_eq!(counter(&m, "balance.spread_wakes"), 0);

    let (m, spans) = run_traced("balance-cfs", 2, doms(), 10 * MS);
    assert_eq!(on(&spans, 0), vec![(2, 0, 3 * MS), (1, 3 * MS, 8 * MS), (2, 8 * MS, 10 * MS)]);
    assert_eq!(on(&spans, 1), vec![(1, 0, MS), (0, MS, 10 * MS)]);
    assert_eq!(counter(&m, "balance.spread_wakes"), 1);
    assert_eq!(counter(&m, "cfs.newidle_pulls"), 1);
}

#[test]
fn on_eevdf_a_waking_vcpu_leaves_a_run_queue_that_holds_a_sibling() {
    // H = {h = 0}, A = {a0 = 1 (computes 1 ms, sleeps 2 ms, then computes), a1 = 2 (hog)}.
    // Fork: h → pCPU 0, a0 → pCPU 1, a1 → pCPU 0, each at 0 with a 0.375 ms deadline; h was
    // queued first, so h runs on pCPU 0 and a1 waits. At 1 ms a0 blocks, eligible (alone, so
    // at V), and leaves with no lag; pCPU 1 pulls a1 (no sibling is queued there), which
    // starts at the empty queue's 1 ms. At 3 ms a0 wakes; no pCPU is idle.
    // - eevdf: back to pCPU 1 beside its sibling a1, at V = 3 ms with deadline 3.75 ms, the
    //   same as a1's new one: the tie goes against the running vCPU, so a0 runs and a1 waits.
    //   At the 4 ms tick a0 passes its deadline and a1 (eligible, deadline 3.75) runs until
    //   the 8 ms tick (EEVDF notices deadlines at ticks). Only one vCPU of A runs from 3 ms.
    // - balance-eevdf: its mask is {pCPU 0}, so it goes there beside h (3 ms, deadline
    //   3.75 ms after the 1 ms reschedule), wins the same tie and runs; a1 keeps pCPU 1.
    //   From 3 ms both vCPUs of A run, taking turns with h on pCPU 0 at each tick.
    let doms = || vec![hit("H", vec![hog()]), hit("A", vec![napper(MS, 2 * MS), hog()])];
    let (_, spans) = run_traced("eevdf", 2, doms(), 10 * MS);
    assert_eq!(on(&spans, 0), vec![(0, 0, 10 * MS)]);
    assert_eq!(
        on(&spans, 1),
        vec![(1, 0, MS), (2, MS, 3 * MS), (1, 3 * MS, 4 * MS), (2, 4 * MS, 8 * MS), (1, 8 * MS, 10 * MS)]
    );

    let (m, spans) = run_traced("balance-eevdf", 2, doms(), 10 * MS);
    assert_eq!(on(&spans, 0), vec![(0, 0, 3 * MS), (1, 3 * MS, 4 * MS), (0, 4 * MS, 8 * MS), (1, 8 * MS, 10 * MS)]);
    assert_eq!(on(&spans, 1), vec![(1, 0, MS), (2, MS, 10 * MS)]);
    assert_eq!(counter(&m, "balance.spread_wakes"), 1);
}

#[test]
fn on_eevdf_a_new_vcpu_goes_to_the_least_loaded_run_queue_without_a_sibling() {
    // X = 0 (hog), Z1 = 1 and Z2 = 3 (sleep 1 ms at once, then compute), Y = 2 (hog), then
    // A = {a0 = 4, a1 = 5} (hogs) created at 2 ms. Fork: X, Y → pCPU 0, Z1, Z2 → pCPU 1. At 0
    // X runs; Z1 and Z2 block at once and pCPU 1 pulls Y. At 1 ms both wake to pCPU 1 (no
    // pCPU is idle) and Z1 preempts Y: pCPU 0 holds 1 runnable vCPU, pCPU 1 holds 3. At 2 ms
    // a0 goes to the least loaded pCPU 0 and, with the earlier deadline (2.375 against X's
    // 2.75 ms), preempts X.
    // - eevdf: a1 also goes to pCPU 0 (2 < 3 runnable), behind a0: it runs only when a0's
    //   deadline passes, at the 4 ms tick.
    // - balance-eevdf: pCPU 0 holds a0, so a1 goes to pCPU 1 although it is busier, at V =
    //   4/3 ms with deadline 1.708 ms, the earliest eligible there: both vCPUs of A run at 2 ms.
    let doms = || {
        let a = DomainConfig { start_at: 2 * MS, ..hit("A", vec![hog(), hog()]) };
        vec![
            hit("X", vec![hog()]),
            hit("Z1", vec![sleeper(MS)]),
            hit("Y", vec![hog()]),
            hit("Z2", vec![sleeper(MS)]),
            a,
        ]
    };
    let (_, spans) = run_traced("eevdf", 2, doms(), 4 * MS);
    assert_eq!(on(&spans, 0), vec![(0, 0, 2 * MS), (4, 2 * MS, 4 * MS)]);
    assert_eq!(on(&spans, 1), vec![(2, 0, MS), (1, MS, 4 * MS)]);

    let (_, spans) = run_traced("balance-eevdf", 2, doms(), 4 * MS);
    assert_eq!(on(&spans, 0), vec![(0, 0, 2 * MS), (4, 2 * MS, 4 * MS)]);
    assert_eq!(on(&spans, 1), vec![(2, 0, MS), (1, MS, 2 * MS), (5, 2 * MS, 4 * MS)]);
}

#[test]
fn on_cfs_the_periodic_balance_does_not_pull_a_sibling() {
    // A = {a0 = 0, a1 = 1} (hogs), X = 2 and V = 4 (block for ever at once), Y = 3 and Z = 5
    // (hogs). Fork: a0 → pCPU 0 (6 ms), a1 → pCPU 1 (6 ms), X → pCPU 0 (3 ms), Y → pCPU 1
    // (3 ms), V → pCPU 0 (2 ms), Z → pCPU 1 (2 ms). On pCPU 0, V and X block at once and a0
    // runs alone (min_vruntime 6 ms); on pCPU 1, Z runs, a1 and Y wait. At the 4 ms tick
    // pCPU 0 (1 vCPU, a0 at 10 ms) pulls from pCPU 1 (3 vCPUs, min_vruntime 2 ms) the least
    // recently run waiting vCPU; a1 and Y last ran at 0, so the lower id, a1, comes first.
    // - cfs: it pulls a1, at 6 + 10 − 2 = 14 ms, beside its sibling. pCPU 1 runs Y, then Z,
    //   at each tick; on pCPU 0 a0 and a1 are both at 14 ms at the 8 ms tick, a0 keeps it
    //   (lower id), and a1 runs from 12 ms: the two never run at once.
    // - balance-cfs: a1 may not move to pCPU 0 (`can_migrate_task`), so Y moves (3 + 10 − 2
    //   = 11 ms) and runs after a0's slice, at 8 ms. On pCPU 1 a1 and Z tie at 6 ms at the
    //   4 ms tick and a1 runs (lower id): a0 and a1 run at once from 4 to 8 and 12 to 16 ms.
    let gone = || program(&[Instr::Io(Dur::Fixed(FOREVER))]);
    let doms = || {
        vec![
            hit("A", vec![hog(), hog()]),
            hit("X", vec![gone()]),
            hit("Y", vec![hog()]),
            hit("V", vec![gone()]),
            hit("Z", vec![hog()]),
        ]
    };
    let (m, spans) = run_traced("cfs", 2, doms(), 16 * MS);
    assert_eq!(on(&spans, 0), vec![(0, 0, 12 * MS), (1, 12 * MS, 16 * MS)]);
    assert_eq!(on(&spans, 1), vec![(5, 0, 4 * MS), (3, 4 * MS, 8 * MS), (5, 8 * MS, 12 * MS), (3, 12 * MS, 16 * MS)]);
    assert_eq!(counter(&m, "cfs.balance_pulls"), 1);

    let (m, spans) = run_traced("balance-cfs", 2, doms(), 16 * MS);
    assert_eq!(on(&spans, 0), vec![(0, 0, 8 * MS), (3, 8 * MS, 12 * MS), (0, 12 * MS, 16 * MS)]);
    assert_eq!(on(&spans, 1), vec![(5, 0, 4 * MS), (1, 4 * MS, 8 * MS), (5, 8 * MS, 12 * MS), (1, 12 * MS, 16 * MS)]);
    assert_eq!(counter(&m, "cfs.balance_pulls"), 1);
}

#[test]
fn a_vm_wider_than_the_host_goes_where_the_fewest_siblings_are() {
    // One VM of 4 vCPUs on 2 pCPUs: a0 = 0 and a2 = 2 compute, a1 = 1 sleeps 1 ms and a3 =
    // 3 sleeps 2 ms at once, then compute. Every run queue will hold a sibling, so the mask
    // is the pCPUs with the fewest. Fork: a0 → 0 (6 ms), a1 → 1 (6 ms), a2 → 0 (3 ms; one
    // sibling each side, 0 the less loaded by index), a3 → 1 (3 ms; 2 siblings on pCPU 0,
    // 1 on pCPU 1) — as cfs, which balances load. At 0 a2 runs on pCPU 0; a3 and a1 block at
    // once on pCPU 1, which pulls a0 (no sibling left there) at 6 + 6 − 3 = 9 ms. At 1 ms a1
    // wakes: one sibling on each pCPU, so it goes back to pCPU 1 (7 ms) and preempts a0
    // (10 − 7 > 1 ms). At 2 ms a3 wakes:
    // - cfs: back to pCPU 1, beside a0 and a1 (3 vCPUs of the VM there, 1 on pCPU 0), at
    //   7 ms, not far enough behind a1 (8 − 7 = 1 ms) to preempt it.
    // - balance-cfs: pCPU 1 holds 2 siblings, pCPU 0 one, so it goes to pCPU 0 (2 and 2),
    //   at max(3 + 3 − 10, 5 − 3) = 2 ms, and preempts a2 (5 ms): three vCPUs of the VM run.
    let doms = || vec![hit("A", vec![hog(), sleeper(MS), hog(), sleeper(2 * MS)])];
    let (_, spans) = run_traced("cfs", 2, doms(), 4 * MS);
    assert_eq!(on(&spans, 0), vec![(2, 0, 4 * MS)]);
    assert_eq!(on(&spans, 1), vec![(0, 0, MS), (1, MS, 4 * MS)]);

    let (m, spans) = run_traced("balance-cfs", 2, doms(), 4 * MS);
    assert_eq!(on(&spans, 0), vec![(2, 0, 2 * MS), (3, 2 * MS, 4 * MS)]);
    assert_eq!(on(&spans, 1), vec![(0, 0, MS), (1, MS, 4 * MS)]);
    assert_eq!(counter(&m, "balance.spread_wakes"), 1);
    // Fork of a2 and a3, wake-ups of a1 and a3 (the first placements found no sibling).
    assert_eq!(counter(&m, "balance.crowded_placements"), 4);
}

#[test]
fn no_two_siblings_ever_share_a_run_queue() {
    // Mixed wake-ups, spinning and blocking on 4 pCPUs, every VM no wider than the host.
    // The policies check the rule after every event (`Policy::check`, debug builds), so a
    // placement or a pull that stacked two siblings would fail the run. The host's own
    // threads (on by default, 12 of them on 4 pCPUs) are not a VM's vCPUs: were the rule to
    // cover them, their placements would count as crowded.
    let vms = [
        vm_toml("ticket", 4, "", "kind = \"spinlock\"\niterations = 3000\ncompute_us = 20\ncs_us = 5"),
        vm_toml("bsp", 4, "", "kind = \"bsp\"\nsupersteps = 300\ncompute_ms = 0.5\njitter = 0.3\nwait = \"spin-then-block\"\nspin_limit_us = 50"),
        vm_toml("web", 3, "", "kind = \"web\"\nservice_us = 50\nio_us = 500"),
        vm_toml("hog", 2, "", HOG),
    ];
    for name in ["balance-cfs", "balance-eevdf"] {
        for seed in 1..=3 {
            let m = run(&scenario(4, &format!("name = \"{name}\""), &vms, "horizon_s = 1"), seed);
            // The rule had work to do: wake-ups found a sibling on their previous pCPU.
            assert!(counter(&m, "balance.spread_wakes") > 0, "{name}, seed {seed}");
            assert_eq!(counter(&m, "balance.crowded_placements"), 0, "{name}, seed {seed}");
        }
    }
}

#[test]
fn the_new_policies_take_their_base_s_parameters_and_refuse_others_naming_the_field() {
    let text = |policy: &str, line: &str| {
        free_scenario(1, &format!("name = \"{policy}\"\n{line}"), &[vm_toml("vm", 2, "", HOG)], "horizon_s = 0.1")
    };
    let refusal = |text: String| vsched::Scenario::parse(&text).err().expect("refused").to_string();
    for (policy, line, start) in [
        ("balance-cfs", "kvm_version = \"6.12\"", "scheduler.kvm_version: this policy runs CFS, Linux <= 6.5"),
        ("balance-eevdf", "kvm_version = \"5.15\"", "scheduler.kvm_version: this policy runs EEVDF, Linux >= 6.6"),
        ("balance-cfs", "tunable_scaling = \"cubic\"", "scheduler.tunable_scaling: expected one of"),
        ("balance-cfs", "tslice_ms = 30", "scheduler.tslice_ms"),
        ("balance-eevdf", "latency_us = 6000", "scheduler.latency_us"),
    ] {
        let err = refusal(text(policy, line));
        assert!(err.starts_with(start), "{policy} with {line}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    for (policy, line) in [("balance-cfs", "kvm_version = \"4.19\""), ("balance-eevdf", "base_slice_us = 700")] {
        assert!(vsched::Scenario::parse(&text(policy, line)).is_ok(), "{policy} with {line}");
    }
}
