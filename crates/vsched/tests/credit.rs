//! Xen Credit1 behaviour: weights, caps and BOOST (issue: foundation).

mod common;
use common::*;

const HOG: &str = "kind = \"cpu_hog\"";

#[test]
fn weights_256_and_512_split_one_pcpu_two_to_one() {
    let toml = scenario(
        1,
        "name = \"credit\"",
        &[vm_toml("light", 1, "weight = 256", HOG), vm_toml("heavy", 1, "weight = 512", HOG)],
        "horizon_s = 60",
    );
    let m = run(&toml, 1);
    let ratio = vm(&m, "heavy").cpu_s / vm(&m, "light").cpu_s;
    assert!((ratio - 2.0).abs() <= 0.05, "CPU ratio heavy/light = {ratio}");
    assert!(m.host.utilization > 0.999, "two hogs keep the pCPU busy");
}

#[test]
fn a_cap_of_50_holds_a_vm_to_half_a_pcpu() {
    // Alone on two pCPUs, so nothing but the cap limits it.
    let toml = scenario(2, "name = \"credit\"", &[vm_toml("capped", 1, "cap = 50", HOG)], "horizon_s = 60");
    let m = run(&toml, 1);
    let share_of_one_pcpu = vm(&m, "capped").cpu_s / m.sim_s;
    assert!((share_of_one_pcpu - 0.5).abs() <= 0.02, "capped VM got {share_of_one_pcpu} of a pCPU");
    assert!(m.host.policy_counters.get("credit.parks").copied().unwrap_or(0) > 0, "the cap works by parking");
}

#[test]
fn an_io_vm_wakes_faster_than_hogs_thanks_to_boost() {
    let io = "kind = \"web\"\nservice_us = 100\nio_us = 3000";
    let vms = [vm_toml("io", 1, "", io), vm_toml("hog1", 1, "", HOG), vm_toml("hog2", 1, "", HOG)];
    let with_boost = run(&scenario(1, "name = \"credit\"", &vms, "horizon_s = 20"), 1);
    let without = run(&scenario(1, "name = \"credit\"\nboost = false", &vms, "horizon_s = 20"), 1);
    let io = vm(&with_boost, "io");
    let io_latency = io.latency_ms_mean.unwrap();
    let io_wake_us = io.wake_latency_us_mean.unwrap();
    // The hogs take turns in 30 ms slices; a boosted waker preempts them (after at most
    // the 1 ms rate limit), so its wake-to-run latency stays far below a slice.
    assert!(io_wake_us < 1_000.0, "boosted wake-up latency {io_wake_us} µs");
    assert!(io_latency < 1.0, "boosted I/O requests complete within a ms, got {io_latency} ms");
    let unboosted = vm(&without, "io");
    let unboosted_wake_us = unboosted.wake_latency_us_mean.unwrap();
    assert!(unboosted_wake_us > 5.0 * io_wake_us, "without BOOST: {unboosted_wake_us} µs vs {io_wake_us} µs with it");
    assert!(unboosted.latency_ms_mean.unwrap() > 5.0 * io_latency);
    // BOOST is counted when granted; a vCPU that no tick catches running keeps it across
    // many wake-ups, so there are far fewer grants than wake-ups.
    assert!(with_boost.host.policy_counters["credit.boosts"] > 0);
    assert!(!without.host.policy_counters.contains_key("credit.boosts"));
}

#[test]
fn parked_vcpus_leave_pcpus_idle_which_counts_as_fragmentation() {
    // A capped VM whose vCPUs are parked is runnable but not allowed to run: the pCPUs they
    // leave idle are fragmentation. Uncapped hogs that fill the host leave none.
    let capped = run(&scenario(2, "name = \"credit\"", &[vm_toml("capped", 2, "cap = 50", HOG)], "horizon_s = 10"), 1);
    let idle_share = 1.0 - capped.host.utilization;
    assert!(idle_share > 0.7, "cap 50 of 2 pCPUs leaves ~75% idle, got {idle_share}");
    assert!(capped.host.frag_idle_s > 0.5 * idle_share * 2.0 * capped.sim_s, "frag {}", capped.host.frag_idle_s);
    let full = run(&scenario(2, "name = \"credit\"", &[vm_toml("hogs", 4, "", HOG)], "horizon_s = 10"), 1);
    // Only at t = 0: a pCPU idles for the few µs its sibling takes to let the not yet started
    // vCPUs (`sim/clocks.rs`) block in turn (at most one dispatch overhead per vCPU); and when
    // the workload starts, each of the 2 idle pCPUs waits for the tickle that wakes it (an IPI
    // and the wake-up from idle) while the woken vCPUs wait.
    let h = vsched_model::HostConfig::default();
    let start_ns = (4 * (h.sched_cost_ns + h.context_switch_ns) + 2 * (h.ipi_latency_ns + h.idle_wake_ns)) as f64;
    assert!(full.host.frag_idle_s <= start_ns * 1e-9, "frag {}", full.host.frag_idle_s);
}

/// `csched_runq_sort` after an accounting moves UNDER-or-better vCPUs ahead of OVER ones and
/// reorders nothing else: a BOOST vCPU queued behind one the accounting turned to UNDER stays
/// behind it (a stable sort by priority would put it first).
#[test]
fn the_sort_after_accounting_does_not_move_boost_ahead_of_under() {
    use vsched_model::hand_world::{start, Bench};
    const MS: u64 = vsched_model::NS_PER_MS;
    // 1 pCPU, 4 vCPUs of one domain: v0 runs, [v1 v2 v3] queued. v0 blocks at 1 ms and v1
    // runs; the tick at 10 ms finds it running and enters it in the accounting. v1 blocks at
    // 11 ms, v2 at 12 ms: v3 runs. v1 and v2 wake at 13 and 14 ms, BOOSTed, queued [v1 v2].
    // The accounting at 30 ms gives v1 (active, 100 credits burnt of 150) UNDER; v2, never
    // found running by a tick, is outside it and keeps BOOST. The tick at 30 ms sorts the
    // queue (Xen sorts at a tick, not at the accounting), then v3's pCPU reschedules.
    let mut world = Bench::new(1, 4);
    let mut p = policy("credit", &[]);
    start(&mut world, p.as_mut());
    world.now = MS;
    assert_eq!(world.block(p.as_mut(), 0), Some(1));
    world.tick(p.as_mut(), 0, 10 * MS);
    world.now = 11 * MS;
    assert_eq!(world.block(p.as_mut(), 0), Some(2));
    world.now = 12 * MS;
    assert_eq!(world.block(p.as_mut(), 0), Some(3));
    world.now = 13 * MS;
    world.wake(p.as_mut(), 1);
    world.now = 14 * MS;
    world.wake(p.as_mut(), 2);
    world.timer(p.as_mut(), 0, 30 * MS);
    world.tick(p.as_mut(), 0, 30 * MS);
    assert_eq!(world.schedule(p.as_mut(), 0), Some(1), "v1, UNDER, stays at the head ahead of v2, BOOST");
}
