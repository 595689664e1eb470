//! VMware's relaxed co-scheduling (`relaxed`): a vCPU that runs too far ahead of its slowest
//! sibling co-stops until the laggards catch up; idle vCPUs count as making progress; weights
//! share the CPU. Hand-checked on traces of a free host (no machine costs, clocks in
//! lockstep, so every pCPU's 1 ms skew check falls on a whole millisecond).

mod common;

use common::*;
use vsched_model::*;

const MS: u64 = NS_PER_MS;

/// A 2-vCPU hog VM alone on one pCPU under `relaxed` with `threshold_ms`: its spans.
fn two_vcpus_on_one_pcpu(threshold_ms: u64) -> (RunMetrics, Vec<Span>) {
    let scheduler = format!("name = \"relaxed\"\ncostop_threshold_us = {}", threshold_ms * 1000);
    let toml = free_scenario(1, &scheduler, &[vm_toml("A", 2, "", HOG)], "horizon_s = 0.2");
    traced(&toml, 1)
}

#[test]
fn two_siblings_on_one_pcpu_alternate_as_the_leader_co_stops() {
    // v0 runs first (both at virtual time 0, lower id first); v1 waits, making no progress.
    // At the check at 4 ms v0 is 4 ms ahead, over the 3 ms threshold: it co-stops, v1 runs.
    // v0 is co-started at 5 ms (4 - 1 ≤ 3) and ready; v1 runs on until it is over 3 ms
    // ahead, at 12 ms (8 - 4 = 4 > 3), when it co-stops and v0 runs. From then on each runs
    // 8 ms: the skew swings between -4 and +4 ms, the threshold plus the check's period.
    let (m, spans) = two_vcpus_on_one_pcpu(3);
    let runs: Vec<(usize, Time, Time)> = on(&spans, 0);
    assert_eq!(runs[0], (0, 0, 4 * MS));
    assert_eq!(runs[1], (1, 4 * MS, 12 * MS));
    for pair in runs[1..runs.len() - 1].windows(2) {
        assert_ne!(pair[0].0, pair[1].0, "siblings alternate: {pair:?}");
        assert_eq!(pair[1].2 - pair[1].1, 8 * MS, "{pair:?}");
    }
    // Co-stops: one per switch; co-starts: one fewer, or as many (the last may be pending).
    let (stops, starts) = (counter(&m, "relaxed.costops"), counter(&m, "relaxed.costarts"));
    assert_eq!(stops as usize, runs.len() - 1);
    assert!(starts == stops || starts + 1 == stops, "{stops} co-stops, {starts} co-starts");
    // Each co-stop lasts 1 ms (back within the threshold at the next check).
    assert_eq!(counter(&m, "relaxed.costop_us"), starts * 1000);
}

#[test]
fn a_larger_threshold_lets_the_leader_run_longer() {
    let (_, spans) = two_vcpus_on_one_pcpu(10);
    let runs = on(&spans, 0);
    assert_eq!(runs[0], (0, 0, 11 * MS));
    assert_eq!(runs[2].2 - runs[2].1, 22 * MS, "2 × (10 + 1) ms");
}

#[test]
fn an_idle_sibling_counts_as_progress_and_seldom_stops_the_busy_one() {
    // One hog thread on a 2-vCPU VM: its second vCPU halts (`idle_vcpus`), which is progress,
    // so the busy vCPU runs its quanta. It co-stops only when the idle one has waited ready
    // (at the start, and when its guest kernel's timer wakes it while its sibling runs), a
    // fraction of what a busy sibling causes, and the VM keeps nearly all of the pCPU.
    let idle = free_scenario(1, "name = \"relaxed\"", &[vm_toml("A", 2, "idle_vcpus = 1", HOG)], "horizon_s = 0.2");
    let (m, spans) = traced(&idle, 1);
    let (busy, _) = two_vcpus_on_one_pcpu(3);
    let (stops, busy_stops) = (counter(&m, "relaxed.costops"), counter(&busy, "relaxed.costops"));
    assert!(5 * stops < busy_stops, "{stops} co-stops with an idle sibling, {busy_stops} with a busy one");
    assert!(vm(&m, "A").cpu_s > 0.95 * 0.2, "{}", vm(&m, "A").cpu_s);
    let longest = on(&spans, 0).iter().map(|&(_, from, to)| to - from).max().unwrap();
    assert!(longest > 50 * MS, "the busy vCPU runs whole quanta and more: {longest} ns");
}

#[test]
fn weights_share_the_cpu_between_vms() {
    // Two 1-vCPU hogs, weights 256 and 512, on one pCPU: 1 : 2 over the run (quanta of 50 ms,
    // the lighter one's virtual time advancing twice as fast).
    let toml = free_scenario(
        1,
        "name = \"relaxed\"",
        &[vm_toml("light", 1, "weight = 256", HOG), vm_toml("heavy", 1, "weight = 512", HOG)],
        "horizon_s = 3",
    );
    let m = run(&toml, 1);
    let ratio = vm(&m, "heavy").cpu_s / vm(&m, "light").cpu_s;
    assert!((ratio - 2.0).abs() < 0.05, "{ratio}");
}
