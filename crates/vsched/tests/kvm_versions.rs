//! The KVM policies' `kvm_version` profiles (issue 54 item 2), each rule hand-checked against
//! the release it follows (sources in `crates/vsched-policies/src/kvm_version.rs`). Each test
//! fails if its rule were on where the release lacks it, or off where it has it.
//!
//! The PLE tests drive `kvm-dy` by hand (`hand_world::Bench`) on the set-up of
//! `tests/kvm_yields.rs`: 2 pCPUs, one VM of 4 vCPUs, `tunable_scaling = "none"`; after the
//! 4 ms tick v0 runs on pCPU 0 and v1 on pCPU 1, while v2 (on pCPU 0) and v3 (on pCPU 1)
//! wait, `ready` and `preempted`. v0 spins. Which sibling a scan boosts is read off the
//! reschedule requests: v2 reschedules pCPU 0 only, a target on pCPU 1 reschedules pCPU 1,
//! then pCPU 0.

mod common;
use common::*;
use vsched_model::hand_world::{start, Bench};
use vsched_model::{Policy, Time, Value, YieldReason, NS_PER_MS, NS_PER_US};

const MS: Time = NS_PER_MS;
const US: Time = NS_PER_US;

fn str(s: &str) -> Value {
    Value::Str(s.into())
}

/// `kvm-dy` at release `version` (with `params`), after the set-up of the header.
fn after_setup(version: &str, params: &[(&str, Value)]) -> (Bench, Box<dyn Policy>) {
    let mut all = vec![("kvm_version", str(version))];
    all.extend(params.iter().cloned());
    kvm_dy_after_setup(&all)
}

/// The reschedules `v`'s yield asked for (and clears them).
fn yield_of(world: &mut Bench, policy: &mut dyn Policy, v: usize, why: YieldReason) -> Vec<usize> {
    world.yield_(policy, v, why);
    std::mem::take(&mut world.resched)
}

fn ple_exit(world: &mut Bench, policy: &mut dyn Policy) -> Vec<usize> {
    yield_of(world, policy, 0, YieldReason::PauseLoopExit)
}

fn count(world: &Bench, name: &str) -> u64 {
    world.counters.get(name).copied().unwrap_or(0)
}

#[test]
fn a_kernel_mode_spinner_skips_siblings_preempted_in_user_mode_since_4_13() {
    // v2 and v3 were preempted in user mode. 3.12 has no such filter: the scan boosts v2,
    // the first after `last_boosted` (0). From 4.19 on both are skipped.
    for (version, boosted) in [("3.12", vec![0]), ("4.19", vec![]), ("6.1", vec![])] {
        let (mut world, mut policy) = after_setup(version, &[]);
        world.in_kernel[0] = true;
        assert_eq!(ple_exit(&mut world, policy.as_mut()), boosted, "{version}");
    }
    // The switch wins over the release.
    let (mut world, mut policy) = after_setup("6.1", &[("skip_user_mode", Value::Bool(false))]);
    world.in_kernel[0] = true;
    assert_eq!(ple_exit(&mut world, policy.as_mut()), vec![0]);
}

#[test]
fn a_user_mode_sibling_with_a_posted_interrupt_is_a_candidate_since_5_13() {
    // v3 was preempted in user mode with an IPI posted for it: 5.4 skips it like v2; 5.15
    // (commit 52acd22faa1a, 5.13) boosts it, on pCPU 1.
    for (version, boosted) in [("5.4", vec![]), ("5.15", vec![1, 0])] {
        let (mut world, mut policy) = after_setup(version, &[]);
        (world.in_kernel[0], world.pending_irq[3], world.posted) = (true, true, true);
        assert_eq!(ple_exit(&mut world, policy.as_mut()), boosted, "{version}");
    }
    let (mut world, mut policy) = after_setup("5.4", &[("boost_pending_irq", Value::Bool(true))]);
    (world.in_kernel[0], world.pending_irq[3], world.posted) = (true, true, true);
    assert_eq!(ple_exit(&mut world, policy.as_mut()), vec![1, 0]);
}

#[test]
fn a_woken_sibling_is_a_candidate_in_3_2_and_since_5_3_not_in_between() {
    // v1 blocks on pCPU 1 at 4 ms (v3 takes over) and wakes at once: it waits on pCPU 1
    // (vruntime 6 ms, 1 ms behind v3: not more than the wakeup granularity, so no
    // preemption), `ready` but not `preempted`. v2 waits, preempted in kernel mode. The scan
    // starts after v0: v1 first. With `ready` (3.2's "not halted", 5.3's `vcpu->ready`) v1 is
    // boosted (pCPU 1, then 0); with `preempted` only (3.11 to 5.2) it is skipped and v2 is.
    for (version, boosted) in [("3.2", vec![1, 0]), ("3.12", vec![0]), ("4.19", vec![0]), ("5.4", vec![1, 0])] {
        let (mut world, mut policy) = after_setup(version, &[]);
        (world.in_kernel[0], world.in_kernel[2]) = (true, true);
        assert_eq!(world.block(policy.as_mut(), 1), Some(3));
        world.wake(policy.as_mut(), 1);
        world.resched.clear();
        assert_eq!(world.curr, vec![Some(0), Some(3)], "{version}: v1 waits");
        assert_eq!(ple_exit(&mut world, policy.as_mut()), boosted, "{version}");
    }
    let (mut world, mut policy) = after_setup("6.1", &[("boost_woken", Value::Bool(false))]);
    (world.in_kernel[0], world.in_kernel[2]) = (true, true);
    world.block(policy.as_mut(), 1);
    world.wake(policy.as_mut(), 1);
    world.resched.clear();
    assert_eq!(ple_exit(&mut world, policy.as_mut()), vec![0]);
}

#[test]
fn a_spinning_candidate_is_passed_over_every_other_scan_since_3_7() {
    // v2 (next after v0) is itself busy-waiting, preempted in kernel mode; v3 is a plain
    // candidate (no user-mode filter in 3.x). 3.2 boosts v2; 3.12 passes it over once
    // (`dy_eligible` toggles) and boosts v3.
    for (version, boosted) in [("3.2", vec![0]), ("3.12", vec![1, 0])] {
        let (mut world, mut policy) = after_setup(version, &[]);
        (world.in_kernel[0], world.in_kernel[2], world.spinning[2]) = (true, true, true);
        assert_eq!(ple_exit(&mut world, policy.as_mut()), boosted, "{version}");
    }
    let (mut world, mut policy) = after_setup("3.12", &[("dy_eligible", Value::Bool(false))]);
    (world.in_kernel[0], world.in_kernel[2], world.spinning[2]) = (true, true, true);
    assert_eq!(ple_exit(&mut world, policy.as_mut()), vec![0]);
}

/// 5 pCPUs, one VM of 5 vCPUs, each alone on its pCPU; v1-v4 block and wake, so each waits,
/// `ready`, alone on its idle pCPU (which has not picked yet), while v0 runs alone: every
/// `yield_to` of v0's scan fails with -ESRCH. Returns the counters of one PLE exit.
fn lonely_scan(version: &str, params: &[(&str, Value)]) -> (u64, u64, u64) {
    let mut all = vec![("tunable_scaling", str("none")), ("kvm_version", str(version))];
    all.extend(params.iter().cloned());
    let mut policy = policy("kvm-dy", &all);
    let mut world = Bench::new(5, 5);
    start(&mut world, policy.as_mut());
    assert_eq!(world.curr, (0..5).map(Some).collect::<Vec<_>>());
    for p in 1..5 {
        assert_eq!(world.block(policy.as_mut(), p), None);
    }
    for v in 1..5 {
        world.wake(policy.as_mut(), v);
    }
    world.in_kernel[0] = true;
    world.resched.clear();
    assert!(ple_exit(&mut world, policy.as_mut()).is_empty());
    (count(&world, "kvm_dy.esrch"), count(&world, "kvm_dy.gave_up"), count(&world, "kvm_dy.no_target"))
}

#[test]
fn a_scan_gives_up_after_three_failed_yields_since_3_8() {
    // 3.2 tries all four siblings; 6.1 stops at the third failure.
    assert_eq!(lonely_scan("3.2", &[]), (4, 0, 1));
    assert_eq!(lonely_scan("6.1", &[]), (3, 1, 0));
    assert_eq!(lonely_scan("6.1", &[("give_up_after_esrch", Value::Bool(false))]), (4, 0, 1));
}

#[test]
fn the_kick_hypercall_yields_to_the_kicked_vcpu_since_5_4() {
    // v0 kicks v3 (ready, waiting on pCPU 1): 4.19 only wakes it (no yield, not even an
    // attempt in KVM's statistics); 5.4 (commit 266e85a5ec91) yields to it.
    for (version, boosted, attempts) in [("4.19", vec![], 0), ("5.4", vec![1, 0], 1)] {
        let (mut world, mut policy) = after_setup(version, &[]);
        assert_eq!(yield_of(&mut world, policy.as_mut(), 0, YieldReason::Kick { target: 3 }), boosted, "{version}");
        assert_eq!(count(&world, "kvm.kick_yield.attempted"), attempts, "{version}");
    }
    let (mut world, mut policy) = after_setup("6.1", &[("kick_yield", Value::Bool(false))]);
    assert!(yield_of(&mut world, policy.as_mut(), 0, YieldReason::Kick { target: 3 }).is_empty());
}

#[test]
fn a_hypercall_yield_from_a_lone_task_bails_out_since_5_15() {
    // Three vCPUs: v1 runs alone on pCPU 1; on pCPU 0 the tick replaces v2 by v0, so v2 is
    // ready. v1 asks to yield to v2. 5.15 bails out (`single_task_running`); 5.4 yields:
    // v2 becomes pCPU 0's next buddy (pCPU 0 reschedules), and v1's pCPU reschedules.
    for (version, resched) in [("5.4", vec![0, 1]), ("5.15", vec![])] {
        let params = [("tunable_scaling", str("none")), ("kvm_version", str(version))];
        let mut policy = policy("kvm-dy", &params);
        let mut world = Bench::new(2, 3);
        start(&mut world, policy.as_mut());
        world.tick(policy.as_mut(), 0, 4 * MS);
        world.schedule(policy.as_mut(), 0);
        assert_eq!(world.curr, vec![Some(0), Some(1)]);
        world.resched.clear();
        let asked = yield_of(&mut world, policy.as_mut(), 1, YieldReason::SchedYield { target: 2 });
        assert_eq!(asked, resched, "{version}");
        assert_eq!(count(&world, "kvm.sched_yield.successful"), resched.len() as u64 / 2, "{version}");
    }
}

#[test]
fn the_ple_window_grows_since_3_18() {
    for (name, version, grow) in [("cfs", "3.12", 1), ("kvm-dy", "3.2", 1), ("kvm-dy", "4.19", 2), ("eevdf", "6.12", 2)]
    {
        let p = policy(name, &[("kvm_version", str(version))]);
        assert_eq!(p.ple_window_grow(), grow, "{name} {version}");
    }
}

/// `kvm-eevdf` at `version` on 1 pCPU (tick 1 ms, base slice 3 ms unscaled): v0 and v1 of
/// one VM enter at V = 0 with deadline 1.5 ms (half a slice), v0 first. The pCPU schedules
/// only when the policy asks (a slice end at a tick, or a yield), as Linux does. At
/// `yield_at` the running vCPU takes a PLE exit and yields to the other (ready, preempted in
/// kernel mode). Returns who runs after each 1 ms tick up to `until_ms`, the yield's own
/// pick in place of the tick it precedes being checked: the other vCPU.
fn turns(version: &str, forfeit: Option<bool>, yield_at: Time, until_ms: Time) -> Vec<usize> {
    let mut params = vec![
        ("tunable_scaling", str("none")),
        ("kvm_version", str(version)),
        ("tick_hz", Value::Int(1000)),
        ("base_slice_us", Value::Int(3000)),
    ];
    params.extend(forfeit.map(|on| ("yield_forfeit", Value::Bool(on))));
    let mut policy = policy("kvm-eevdf", &params);
    let mut world = Bench::new(1, 2);
    start(&mut world, policy.as_mut());
    (world.in_kernel[0], world.in_kernel[1]) = (true, true);
    let mut turns = Vec::new();
    for ms in 1..=until_ms {
        if (ms - 1) * MS < yield_at && yield_at < ms * MS {
            world.now = yield_at;
            let me = world.curr[0].unwrap();
            assert_eq!(yield_of(&mut world, policy.as_mut(), me, YieldReason::PauseLoopExit), vec![0]);
            world.schedule(policy.as_mut(), 0);
        }
        world.tick(policy.as_mut(), 0, ms * MS);
        if std::mem::take(&mut world.resched).contains(&0) {
            world.schedule(policy.as_mut(), 0);
        }
        turns.push(world.curr[0].unwrap());
    }
    turns
}

#[test]
fn an_eligible_yielder_forfeits_the_rest_of_its_slice_in_6_12_y() {
    // v0 runs until the 2 ms tick sees its 1.5 ms deadline passed (new one 5 ms; V = 1 ms),
    // then v1. At 2.1 ms v1 (vruntime 0.1 ms ≤ V = 1.05 ms: eligible) yields to v0, which is
    // not eligible (2 ms), so v1 goes on, but no longer protected (its deadline moved).
    // 6.12.0 only moves v1's deadline a slice on (1.5 → 4.5 ms): v1 stays eligible until the
    // 5 ms tick (3 ms > V = 2.5 ms), where v0 takes over. 6.12.y (commit 79104becf42b) also
    // sets v1's vruntime to 1.5 ms: at the 3 ms tick it is 2.4 ms > V = 2.2 ms, and v0 runs
    // until its own 5 ms deadline is seen at the 6 ms tick (V = 3.7 ms: v1 again).
    let yield_at = 2 * MS + 100 * US;
    assert_eq!(turns("6.12", None, yield_at, 7), vec![0, 1, 1, 1, 0, 0, 0]);
    assert_eq!(turns("6.12.y", None, yield_at, 7), vec![0, 1, 0, 0, 0, 1, 1]);
    assert_eq!(turns("current", None, yield_at, 7), turns("6.12.y", None, yield_at, 7));
    // The switch wins over the release.
    assert_eq!(turns("6.12", Some(true), yield_at, 7), turns("6.12.y", None, yield_at, 7));
    assert_eq!(turns("6.12.y", Some(false), yield_at, 7), turns("6.12", None, yield_at, 7));
}

#[test]
fn an_ineligible_yielder_keeps_its_vruntime_and_deadline_in_6_12_y() {
    // v1 runs from 2 ms to the 4 ms tick (its vruntime 2 ms passes its 1.5 ms deadline; both
    // at 2 ms with deadline 5 ms, v0, queued first, wins). v0 runs past V, protected until
    // its deadline; at 5.5 ms (vruntime 3.5 ms > V = 2.75 ms: not eligible) it yields to v1,
    // which runs until the 9 ms tick (5.5 ms ≥ 5 ms; V = 4.5 ms: v0 again). 6.12.0 had moved
    // v0's deadline to 8 ms, so v0 keeps the pCPU past 12 ms; 6.12.y left it at 5 ms, reached
    // at the 11 ms tick (5.5 ms = V, a tie of deadlines at 8.5 ms that v1, queued, wins). A
    // forfeit here (vruntime 5 ms, deadline 8 ms) would keep v0 until the 12 ms tick.
    let yield_at = 5 * MS + 500 * US;
    assert_eq!(turns("6.12", None, yield_at, 12), vec![0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0]);
    assert_eq!(turns("6.12.y", None, yield_at, 12), vec![0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1]);
}

fn scenario_text(policy: &str, host: &str, scheduler: &str, vm_extra: &str) -> String {
    let vms = [vm_toml("vm", 2, vm_extra, HOG)];
    free_scenario(1, &format!("name = \"{policy}\"\n{scheduler}"), &vms, "horizon_s = 0.1").replacen(
        "[host]\n",
        &format!("[host]\n{host}\n"),
        1,
    )
}

fn refusal(text: &str) -> String {
    vsched::Scenario::parse(text).err().expect("refused").to_string()
}

#[test]
fn a_release_must_run_the_policy_s_fair_class_and_an_unknown_one_is_refused() {
    let err = refusal(&scenario_text("kvm-dy", "", "kvm_version = \"6.12\"", ""));
    assert!(
        err.starts_with("scheduler.kvm_version: this policy runs CFS, Linux <= 6.5: expected one of \"3.2\""),
        "{err}"
    );
    let err = refusal(&scenario_text("eevdf", "kvm_version = \"5.15\"", "", ""));
    assert!(
        err.starts_with("scheduler.kvm_version: this policy runs EEVDF, Linux >= 6.6: expected one of \"6.12\""),
        "{err}"
    );
    let err = refusal(&scenario_text("kvm-dy", "kvm_version = \"5.10\"", "", ""));
    assert!(err.starts_with("host.kvm_version: expected one of \"3.2\""), "{err}");
    assert_eq!(err.lines().count(), 1);
    // A Xen policy takes no kvm_version of its own, and the host's is only checked.
    assert!(vsched::Scenario::parse(&scenario_text("credit", "kvm_version = \"3.2\"", "", "")).is_ok());
}

#[test]
fn a_host_refuses_the_paravirtual_features_its_release_lacks() {
    let yield_vm = "pv_steal_time = true\npv_sched_yield = true";
    let err = refusal(&scenario_text("kvm-dy", "kvm_version = \"4.19\"", "", yield_vm));
    assert_eq!(
        err,
        "vm[0].pv_sched_yield: needs a host that offers KVM_FEATURE_PV_SCHED_YIELD (Linux >= 5.2); kvm_version is \"4.19\""
    );
    assert!(vsched::Scenario::parse(&scenario_text("kvm-dy", "kvm_version = \"5.4\"", "", yield_vm)).is_ok());
    let err = refusal(&scenario_text("kvm-dy", "", "kvm_version = \"3.2\"", "pv_spinlocks = true"));
    assert!(err.starts_with("vm[0].pv_spinlocks: needs a host that offers KVM_FEATURE_PV_UNHALT"), "{err}");
    let err = refusal(&scenario_text("cfs", "kvm_version = \"3.12\"", "", "pv_steal_time = true"));
    assert!(err.starts_with("vm[0].pv_steal_time: needs a host that offers steal time's preempted flag"), "{err}");
    // The defaults (6.1, 6.12) offer every feature; Xen policies ignore them.
    assert!(vsched::Scenario::parse(&scenario_text("kvm-eevdf", "", "", yield_vm)).is_ok());
    assert!(
        vsched::Scenario::parse(&scenario_text("credit", "kvm_version = \"3.2\"", "", "pv_spinlocks = true")).is_ok()
    );
}

#[test]
fn the_host_s_release_reaches_the_policy_unless_the_scheduler_sets_one_and_the_defaults_are_today_s() {
    // A 2-vCPU VM on one pCPU whose vCPUs share a kernel lock: PLE exits and yields.
    let locks = "kind = \"spinlock\"\niterations = 400\ncompute_us = 50\ncs_us = 20\nmode = \"kernel\"";
    let text = |policy: &str, host: &str, scheduler: &str| {
        let vms = [vm_toml("vm", 2, "", locks), vm_toml("hog", 1, "", HOG)];
        free_scenario(1, &format!("name = \"{policy}\"\n{scheduler}"), &vms, "horizon_s = 1").replacen(
            "[host]\n",
            &format!("[host]\n{host}\n"),
            1,
        )
    };
    let json = |t: &str| serde_json::to_string(&run(t, 1)).unwrap();
    // No kvm_version is 6.1 for CFS and 6.12 for EEVDF: the same report, byte for byte.
    assert_eq!(json(&text("kvm-dy", "", "")), json(&text("kvm-dy", "kvm_version = \"6.1\"", "")));
    assert_eq!(json(&text("kvm-eevdf", "", "")), json(&text("kvm-eevdf", "", "kvm_version = \"6.12\"")));
    // 3.2 keeps the PLE window fixed: more exits than 6.1's growing one.
    let exits = |host: &str, scheduler: &str| run(&text("kvm-dy", host, scheduler), 1).host.ple_exits;
    let (old, new) = (exits("kvm_version = \"3.2\"", ""), exits("", ""));
    assert!(old > new, "3.2: {old} exits, 6.1: {new}");
    assert_eq!(exits("kvm_version = \"3.2\"", "kvm_version = \"6.1\""), new);
}

#[test]
fn a_kvm_pause_loop_exit_costs_the_measured_handler_beyond_the_exit() {
    // `host.ple_handler_us` defaults to KVM's measured 1.5 µs (`scripts/lone_yield.c`) under
    // the policies that run KVM's PLE handler, in every era but "ideal"; `cfs` and `eevdf`
    // (PLE handling off) and Xen's stay at 0 (no measurement); a given value wins.
    let handler = |policy: &str, host: &str| {
        let vms = [vm_toml("vm", 2, "", HOG)];
        let text = scenario(1, &format!("name = \"{policy}\""), &vms, "horizon_s = 0.1");
        let text = text.replacen("[host]\n", &format!("[host]\n{host}\n"), 1);
        vsched::Scenario::parse(&text).unwrap().host.ple_handler_ns
    };
    for policy in ["kvm-dy", "kvm-eevdf"] {
        assert_eq!(handler(policy, ""), 1_500, "{policy}");
        assert_eq!(handler(policy, "hardware = \"sapphire-2023\""), 1_500, "{policy}");
        assert_eq!(handler(policy, "hardware = \"ideal\""), 0, "{policy}");
        assert_eq!(handler(policy, "ple_handler_us = 0.25"), 250, "{policy}");
    }
    for policy in ["cfs", "eevdf", "credit"] {
        assert_eq!(handler(policy, ""), 0, "{policy}");
    }
    assert_eq!(handler("credit", "ple_handler_us = 0.25"), 250);
}
