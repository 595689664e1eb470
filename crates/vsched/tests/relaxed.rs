//! VMware's relaxed co-scheduling (`relaxed`): a vCPU that runs too far ahead of its slowest
//! sibling co-stops until the laggards catch up; idle vCPUs count as making progress; weights
//! share the CPU. Hand-checked on traces of a free host (no machine costs, clocks in
//! lockstep, so every pCPU's 1 ms skew check falls on a whole millisecond).

mod common;

use common::*;
use vsched_model::*;

const MS: u64 = NS_PER_MS;

/// A 2-vCPU hog VM alone on one pCPU under `relaxed` with `threshold_ms` and `skew_model`:
/// its spans.
fn two_vcpus_on_one_pcpu_model(threshold_ms: u64, model: &str) -> (RunMetrics, Vec<Span>) {
    let scheduler =
        format!("name = \"relaxed\"\ncostop_threshold_us = {}\nskew_model = \"{model}\"", threshold_ms * 1000);
    let toml = free_scenario(1, &scheduler, &[vm_toml("A", 2, "", HOG)], "horizon_s = 0.2");
    traced(&toml, 1)
}

/// The same at the default (ESX 4's min-relative) skew.
fn two_vcpus_on_one_pcpu(threshold_ms: u64) -> (RunMetrics, Vec<Span>) {
    two_vcpus_on_one_pcpu_model(threshold_ms, "min-relative")
}

/// VM `name`'s figure `key` among the policy's own (`policy_metrics`).
fn figure(m: &RunMetrics, name: &str, key: &str) -> f64 {
    *vm(m, name).policy_metrics.get(key).unwrap_or_else(|| panic!("{key} of {name}"))
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

#[test]
fn shares_are_per_vcpu_as_esx_defaults() {
    // A 2-vCPU and a 1-vCPU hog at one weight on one pCPU: ESX's default shares are per vCPU
    // (vSphere 4.1 Resource Management Guide), so the wide VM gets 2 : 1, not 1 : 1. Its two
    // vCPUs alternate by co-stops, which changes who runs, not the VMs' weighted consumption.
    let toml = free_scenario(
        1,
        "name = \"relaxed\"",
        &[vm_toml("wide", 2, "", HOG), vm_toml("narrow", 1, "", HOG)],
        "horizon_s = 3",
    );
    let m = run(&toml, 1);
    let ratio = vm(&m, "wide").cpu_s / vm(&m, "narrow").cpu_s;
    assert!((ratio - 2.0).abs() < 0.1, "{ratio}");
}

#[test]
fn esxtop_figures_add_up_on_the_hand_checked_trace() {
    // The trace of the first test over 200 ms: one of the two vCPUs always waits (200 of the
    // 400 vCPU-ms), and it co-stops at 4, 12, ..., 196 ms for 1 ms each (25 ms in all, every
    // co-stop closed before the end): %CSTP = 25 / 400, %RDY = (200 - 25) / 400.
    let (m, _) = two_vcpus_on_one_pcpu(3);
    assert_eq!(counter(&m, "relaxed.costop_us"), 25_000);
    assert!((figure(&m, "A", "%CSTP") - 6.25).abs() < 1e-9, "{:?}", vm(&m, "A").policy_metrics);
    assert!((figure(&m, "A", "%RDY") - 43.75).abs() < 1e-9, "{:?}", vm(&m, "A").policy_metrics);
    assert_eq!(figure(&m, "A", "costops"), counter(&m, "relaxed.costops") as f64);
    // The largest lead is the threshold plus the 1 ms check.
    assert_eq!(figure(&m, "A", "skew_us_max"), 4_000.0);
}

#[test]
fn other_policies_report_no_policy_figures() {
    let toml = free_scenario(1, "name = \"credit\"", &[vm_toml("A", 2, "", HOG)], "horizon_s = 0.05");
    assert!(vm(&run(&toml, 1), "A").policy_metrics.is_empty());
}

#[test]
fn cumulative_skew_keeps_the_leader_stopped_until_its_sibling_is_level() {
    // ESX 3.x's count on the first test's VM. v0 runs 0-4 ms, its count (time run while v1
    // waits) reaching 4 > 3 ms: it co-stops and v1 runs. v1 is the slower until 8 ms, so its
    // own count is cleared at every check, and v0's count does not shrink: v0 stays
    // co-stopped until v1 is level at 8 ms (both counts cleared), not until 5 ms as under the
    // min-relative skew. v1 runs on, counting from 8 ms, and co-stops at 12 ms (4 > 3): the
    // same runs as min-relative, each co-stop 4 ms instead of 1.
    let (m, spans) = two_vcpus_on_one_pcpu_model(3, "cumulative");
    let (_, relative) = two_vcpus_on_one_pcpu(3);
    assert_eq!(on(&spans, 0), on(&relative, 0), "two vCPUs: the count is the lead while it grows");
    let starts = counter(&m, "relaxed.costarts");
    assert_eq!(counter(&m, "relaxed.costop_us"), starts * 4_000);
    // 25 co-stops of 4 ms over 400 vCPU-ms (the last one, 196-200 ms, ends with the run).
    assert!((figure(&m, "A", "%CSTP") - 25.0).abs() < 1e-9, "{:?}", vm(&m, "A").policy_metrics);
    assert!((figure(&m, "A", "%RDY") - 25.0).abs() < 1e-9, "{:?}", vm(&m, "A").policy_metrics);
}

#[test]
fn cumulative_skew_overestimates_a_lead_over_different_siblings() {
    // Three hogs on two pCPUs: a vCPU is ahead of one sibling, then of another, and ESX
    // 3.x's count adds both leads (the white paper's Figure 1(a)), so it co-stops vCPUs
    // for longer than the min-relative skew, which sees only the lead over the slowest.
    let scenario = |model: &str| {
        let scheduler = format!("name = \"relaxed\"\nskew_model = \"{model}\"");
        free_scenario(2, &scheduler, &[vm_toml("A", 3, "", HOG)], "horizon_s = 0.5")
    };
    let (cumulative, relative) = (run(&scenario("cumulative"), 1), run(&scenario("min-relative"), 1));
    let (c, r) = (figure(&cumulative, "A", "%CSTP"), figure(&relative, "A", "%CSTP"));
    assert!(c > r, "%CSTP {c} (cumulative) against {r} (min-relative)");
}

#[test]
fn an_unknown_skew_model_is_refused_by_name() {
    let info = vsched_policies::find("relaxed").unwrap();
    let given = [("skew_model".to_string(), Value::Str("esx3".into()))].into_iter().collect();
    let params = vsched_model::Params::check("scheduler", info.params, &given).unwrap();
    let err = (info.build)(&params).err().unwrap().to_string();
    assert_eq!(err, "scheduler.skew_model: expected one of \"min-relative\", \"cumulative\", got \"esx3\"");
}
