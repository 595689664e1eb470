//! Credit's `xen_version` profiles (issue 16 item 8), each rule hand-checked against the
//! release it follows (sources in `crates/vsched-policies/src/xen_version.rs`). Each test
//! runs the same situation under two versions whose rules differ, so it fails if the
//! parameter changes nothing.

mod common;

use common::*;
use vsched_model::hand_world::{start, Bench};
use vsched_model::{Policy, Simulation, Until, Value, VcpuState, VmType, YieldReason, NS_PER_MS};

const MS: u64 = NS_PER_MS;

fn credit(version: &str) -> Box<dyn Policy> {
    policy("credit", &[("xen_version", Value::Str(version.into()))])
}

/// `__runq_tickle` when a vCPU wakes on a busy pCPU while two others idle.
#[test]
fn a_waker_preempts_its_busy_pcpu_before_4_3_and_goes_to_an_idler_after() {
    // 4 pCPUs, 5 vCPUs of one domain, inserted round robin: v0..v3 on p0..p3, v4 queued on p0.
    // v1 blocks: p1 steals v4. v2 and v3 block: p2 and p3 idle. Then v1 wakes on its
    // processor p1, BOOSTed (it is UNDER), above v4 (UNDER) which runs there.
    let tickled = |version: &str| {
        let mut world = Bench::new(4, 5);
        let mut p = credit(version);
        start(&mut world, p.as_mut());
        assert_eq!(world.block(p.as_mut(), 1), Some(4), "{version}: p1 steals v4");
        assert_eq!(world.block(p.as_mut(), 2), None);
        assert_eq!(world.block(p.as_mut(), 3), None);
        world.resched.clear();
        world.wake(p.as_mut(), 1);
        world.resched
    };
    // 3.0.4 / 4.0.1: the waker's pCPU (BOOST > UNDER) and, as it is busy, every idler.
    assert_eq!(tickled("3.0"), vec![1, 2, 3]);
    assert_eq!(tickled("4.0"), vec![1, 2, 3]);
    // 4.1.2: the waker's pCPU and one idler, round robin from pCPU 0.
    assert_eq!(tickled("4.1"), vec![1, 2]);
    // 4.3 and later: an idler takes it; the busy pCPU is left alone.
    assert_eq!(tickled("current"), vec![2]);
}

/// Debit: per tick (3.x) against time burnt (4.0 on).
#[test]
fn xen_3_charges_whoever_runs_at_the_tick_and_4_0_charges_the_time_run() {
    // 1 pCPU, v0 and v1 of one domain. v0 runs [0, 19 ms), v1 [19, 30 ms); ticks at 10, 20
    // and 30 ms, then the 30 ms accounting: 300 credits for 2 active vCPUs, 150 each.
    //   4.0: v0 burns 190, v1 110 -> v0 -40 (OVER), v1 +40 (UNDER): v1 stays at 30 ms.
    //   3.0: the tick at 10 ms charges v0 100, those at 20 and 30 ms charge v1 200
    //        -> v0 +50 (UNDER), v1 -50 (OVER): v0 takes over at 30 ms.
    let next_at_30 = |version: &str| {
        let mut world = Bench::new(1, 2);
        let mut p = credit(version);
        start(&mut world, p.as_mut());
        assert_eq!(world.curr, vec![Some(0)]);
        world.tick(p.as_mut(), 0, 10 * MS);
        world.now = 19 * MS;
        assert_eq!(world.schedule(p.as_mut(), 0), Some(1));
        world.tick(p.as_mut(), 0, 20 * MS);
        world.tick(p.as_mut(), 0, 30 * MS);
        world.timer(p.as_mut(), 0, 30 * MS);
        world.schedule(p.as_mut(), 0)
    };
    assert_eq!(next_at_30("4.0"), Some(1));
    assert_eq!(next_at_30("3.0"), Some(0));
}

/// An idle pCPU's slice: 30 ms in 3.x, none from 4.0.
#[test]
fn an_idle_pcpu_looks_again_after_a_slice_in_xen_3_only() {
    let idle_slice = |version: &str| {
        let mut world = Bench::new(1, 1);
        let mut p = credit(version);
        start(&mut world, p.as_mut());
        world.states[0] = VcpuState::Blocked;
        p.pick_next(&mut vsched_model::Cx::new(&mut world), 0, Some(0)).slice_ns
    };
    assert_eq!(idle_slice("3.2"), Some(30 * MS));
    assert_eq!(idle_slice("4.0"), None);
}

/// `csched_acct` weights: per domain up to 4.0, weight × active vCPUs from 4.1.
#[test]
fn a_domain_s_weight_is_shared_by_its_vcpus_until_4_1() {
    // 1 pCPU; A has 2 CPU-bound vCPUs, B one, equal weights. Per domain, B earns half of
    // the pCPU; per vCPU, a third.
    let b_share = |version: &str| {
        let doms = vec![domain("A", VmType::Hit, vec![hog(), hog()]), domain("B", VmType::Hit, vec![hog()])];
        let p = credit(version);
        let m = Simulation::new(free_host(1), doms, p, 1).run(30_000 * MS, Until::Horizon, &mut |_| true).unwrap();
        vm(&m, "B").cpu_s / m.sim_s
    };
    // Tolerance: Credit converges over 30 ms periods by whole slices; 30 s leaves 1 % at most.
    let (old, new) = (b_share("4.0"), b_share("4.1"));
    assert!((old - 0.5).abs() < 0.01, "4.0: B had {old:.3} of the pCPU");
    assert!((new - 1.0 / 3.0).abs() < 0.01, "4.1: B had {new:.3} of the pCPU");
}

/// `sched_ratelimit_us` arrived in 4.2 (default 1000); a scenario may still set it.
#[test]
fn the_rate_limit_is_current_xen_s_unless_a_scenario_sets_it() {
    let ratelimited = |params: &[(&str, Value)]| {
        let doms = vec![domain("io", VmType::Hit, vec![io_loop()]), domain("hog", VmType::Hit, vec![hog()])];
        let m = Simulation::new(free_host(1), doms, policy("credit", params), 1)
            .run(1_000 * MS, Until::Horizon, &mut |_| true)
            .unwrap();
        m.host.policy_counters.get("credit.ratelimited").copied().unwrap_or(0)
    };
    let v41 = ("xen_version", Value::Str("4.1".into()));
    assert!(ratelimited(&[]) > 0);
    assert_eq!(ratelimited(std::slice::from_ref(&v41)), 0);
    assert!(ratelimited(&[v41, ("ratelimit_us", Value::Int(1000))]) > 0);
}

/// 4.18: a yielder keeps YIELD while it waits in its run queue, and no peer steals it.
#[test]
fn a_queued_yielder_is_stolen_before_4_18_and_left_alone_after() {
    // 2 pCPUs, 3 vCPUs of one domain, inserted round robin: v0 on p0, v1 on p1, v2 queued on
    // p0, all UNDER. At 1 ms v0 takes a pause-loop exit: it goes behind v2 (nothing of lower
    // priority is queued) and v2 runs. At 2 ms v1 blocks, and idle p1 looks for work: the only
    // queued vCPU outranking idle is v0, the yielder. Nothing else in this sequence differs
    // between 4.1 and current (no wake-up, so no tickle; a yielder is not rate limited; p1
    // has never balanced, so 4.18's balancing rate limit lets it).
    let stolen_at_2ms = |version: &str| {
        let mut world = Bench::new(2, 3);
        let mut p = credit(version);
        start(&mut world, p.as_mut());
        assert_eq!(world.curr, vec![Some(0), Some(1)]);
        world.now = MS;
        world.yield_(p.as_mut(), 0, YieldReason::PauseLoopExit);
        assert_eq!(world.schedule(p.as_mut(), 0), Some(2), "{version}: v2 runs after the yield");
        world.now = 2 * MS;
        world.block(p.as_mut(), 1)
    };
    assert_eq!(stolen_at_2ms("4.1"), Some(0), "4.1 clears YIELD once the yielder is queued");
    assert_eq!(stolen_at_2ms("current"), None, "4.18 keeps it, and p1 stays idle");
}

/// 4.18: YIELD is cleared only when a vCPU leaves a run queue, so one that yielded and then
/// blocked before it was queued wakes as a yielder, one vCPU further back.
#[test]
fn a_vcpu_that_yields_then_blocks_wakes_as_a_yielder_from_4_18() {
    // 1 pCPU, 4 vCPUs: v0 runs, [v1 v2 v3] queued, all UNDER. At 1 ms v0 yields and blocks
    // in the same instant: it is not queued, and v1 runs. At 2 ms v0 wakes BOOSTed, outranks
    // the whole queue [v2 v3] and preempts v1 (its 1 ms rate limit is over).
    let next_after_wake = |version: &str| {
        let mut world = Bench::new(1, 4);
        let mut p = credit(version);
        start(&mut world, p.as_mut());
        world.now = MS;
        world.yield_(p.as_mut(), 0, YieldReason::PauseLoopExit);
        assert_eq!(world.block(p.as_mut(), 0), Some(1));
        world.now = 2 * MS;
        world.resched.clear();
        world.wake(p.as_mut(), 0);
        assert_eq!(world.resched, vec![0], "{version}: the waker outranks v1");
        world.schedule(p.as_mut(), 0)
    };
    assert_eq!(next_after_wake("4.1"), Some(0), "4.1: queued first, as any BOOSTed waker");
    assert_eq!(next_after_wake("current"), Some(2), "current: behind v2, the first lower-priority vCPU");
}

/// 4.18's balancing rate limit holds for an idle pCPU too: tickled within 1 ms of its last
/// look, it does not steal the waker it was tickled for.
#[test]
fn an_idle_pcpu_tickled_within_the_balancing_rate_limit_does_not_steal() {
    // 2 pCPUs, 3 vCPUs: v0 on p0, v1 on p1, v2 queued on p0. v0 blocks at 0.1 ms (v2 runs on
    // p0); v1 blocks at 0.5 ms, and p1, idle, looks for work and finds none. v0 wakes at
    // `wake_at` BOOSTed on its busy processor p0: an idler is tickled first (4.3 on), p1,
    // which steals v0 only if its last look is more than the rate limit ago.
    let p1_runs = |wake_at: u64, params: &[(&str, Value)]| {
        let mut world = Bench::new(2, 3);
        let mut p = policy("credit", params);
        start(&mut world, p.as_mut());
        world.now = MS / 10;
        assert_eq!(world.block(p.as_mut(), 0), Some(2));
        world.now = MS / 2;
        assert_eq!(world.block(p.as_mut(), 1), None);
        world.now = wake_at;
        world.wake(p.as_mut(), 0);
        assert_eq!(world.resched, vec![1], "the idler is tickled");
        world.schedule(p.as_mut(), 1)
    };
    assert_eq!(p1_runs(MS, &[]), None, "0.5 ms after its last look: rate limited");
    assert_eq!(p1_runs(MS * 16 / 10, &[]), Some(0), "1.1 ms after: it steals the waker");
    let off = [("load_balance_ratelimit_us", Value::Int(0))];
    assert_eq!(p1_runs(MS, &off), Some(0), "0 turns the rate limit off");
}

/// 100 µs of work every 300 µs: each wake-up BOOSTs it over the hog, inside the hog's first ms.
fn io_loop() -> vsched_model::Program {
    use vsched_model::{Dur, Instr, ProgramBuilder};
    let mut b = ProgramBuilder::new();
    b.repeat(None).push(Instr::Compute(Dur::Fixed(MS / 10))).push(Instr::Io(Dur::Fixed(MS / 5))).end_repeat();
    b.build()
}

#[test]
fn an_unknown_xen_version_is_refused_naming_the_field() {
    let info = vsched_policies::find("credit").unwrap();
    let given = [("xen_version".to_string(), Value::Str("3.1".into()))].into_iter().collect();
    let params = vsched_model::Params::check("scheduler", info.params, &given).unwrap();
    let err = (info.build)(&params).err().expect("3.1 is not a profile").to_string();
    assert!(err.starts_with("scheduler.xen_version: expected one of \"3.0\""), "{err}");
}

/// `[host] xen_version` is the default of every policy that follows Xen's versions, so a
/// paper's scenario keeps its release under `--policy`; `[scheduler] xen_version` wins.
/// `cvs-adaptive` passes it on to the Credit it runs between co-scheduling phases (here, 2
/// vCPUs on 1 pCPU: VOR 2, yield to tail).
#[test]
fn the_host_s_xen_version_reaches_the_policy_unless_the_scheduler_sets_one() {
    let text = |policy: &str, host: &str, scheduler: &str| {
        let vms = [vm_toml("io", 1, "", "kind = \"web\"\nservice_us = 100\nio_us = 200"), vm_toml("hog", 1, "", HOG)];
        free_scenario(1, &format!("name = \"{policy}\"\n{scheduler}"), &vms, "horizon_s = 1").replacen(
            "[host]\n",
            &format!("[host]\n{host}\n"),
            1,
        )
    };
    for policy in ["cs", "cvs-adaptive"] {
        let ratelimited = |host: &str, scheduler: &str| {
            let m = run(&text(policy, host, scheduler), 1);
            m.host.policy_counters.get("credit.ratelimited").copied().unwrap_or(0)
        };
        assert!(ratelimited("", "") > 0, "{policy}: current Xen has the 1 ms rate limit");
        assert_eq!(ratelimited("xen_version = \"4.0\"", ""), 0, "{policy}");
        assert!(ratelimited("xen_version = \"4.0\"", "xen_version = \"current\"") > 0, "{policy}");
    }
    let err = vsched::Scenario::parse(&text("cs", "xen_version = \"4.0.1\"", "")).err().expect("refused").to_string();
    assert!(err.starts_with("host.xen_version: expected one of \"3.0\""), "{err}");
}
