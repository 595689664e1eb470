//! `cvs-adaptive` (seed 001): the scheduling algorithm follows VOR as VMs come and go.

mod common;
use common::*;
use vsched_model::{Span, Time, NS_PER_MS};

/// Which VMs (by domain index) run at instant `t`, one entry per busy pCPU.
fn running_at(spans: &[Span], t: Time) -> Vec<usize> {
    let mut doms: Vec<usize> = spans.iter().filter(|s| s.start <= t && t < s.end).map(|s| s.dom).collect();
    doms.sort();
    doms
}

#[test]
fn cvs_switches_algorithm_when_vor_crosses_a_threshold() {
    // 4 pCPUs; thresholds: co-schedule up to VOR 1, yield to head up to 2, to tail above.
    // "base" (4 vCPUs) is alone until 1 s: VOR 1, co-scheduling. "extra" (3 vCPUs) exists from
    // 1 s to 2 s: VOR 1.75, yield to head; "spike" (2 vCPUs) from 1.5 s to 1.8 s: VOR 2.25,
    // yield to tail. After 2 s, base is alone again: back to co-scheduling.
    let vms = [
        vm_toml("base", 4, "", HOG),
        vm_toml("extra", 3, "start_s = 1.0\nstop_s = 2.0", HOG),
        vm_toml("spike", 2, "start_s = 1.5\nstop_s = 1.8", HOG),
    ];
    let toml = scenario(4, "name = \"cvs-adaptive\"\nco_max_vor = 1.0\nyth_max_vor = 2.0", &vms, "horizon_s = 3");
    let (m, spans) = traced(&toml, 1);
    let counter = |name: &str| m.host.policy_counters.get(name).copied().unwrap_or(0);
    assert_eq!(
        (counter("cvs.to_yth"), counter("cvs.to_ytt"), counter("cvs.to_cosched")),
        (2, 1, 1),
        "co → yth (1 s) → ytt (1.5 s) → yth (1.8 s) → co (2 s): {:?}",
        m.host.policy_counters
    );
    // Co-scheduling phases: base's gang fills the host whenever it runs, which is always (it
    // is alone). Sampled every 10 ms, away from the switch instants.
    let ms = |x: u64| x * NS_PER_MS;
    for t in (10..990).step_by(10).chain((2010..2990).step_by(10)) {
        assert_eq!(running_at(&spans, ms(t)), vec![0, 0, 0, 0], "at {t} ms");
    }
    // Credit phases: base and extra share the host. A gang scheduler would run them in turns
    // (extra's gang of 3 leaves a pCPU idle, base's gang needs all 4); Credit runs base's
    // fourth vCPU beside extra's three, so at many instants both VMs run. (With two 4-vCPU
    // hogs Credit alternates them in whole-host turns too: its ticks are synchronized.)
    let mixed = (1010..1490).step_by(10).filter(|&t| {
        let r = running_at(&spans, ms(t));
        r.contains(&0) && r.contains(&1)
    });
    assert!(mixed.count() > 10, "Credit interleaves the two VMs' vCPUs");
    let (base, extra) = (vm(&m, "base"), vm(&m, "extra"));
    // Each of extra's vCPUs shares a pCPU with one of base's for 1 s, which Credit splits
    // evenly: about 1.5 CPU-seconds (the spike's 0.3 s and work stealing move it a little).
    assert!((extra.cpu_s - 1.5).abs() < 0.25, "extra: {}", extra.cpu_s);
    // Base has the whole host for 2 s outside [1, 2] s, and at least a pCPU inside.
    assert!(base.cpu_s > 2.0 * 4.0 + 1.0, "base: {}", base.cpu_s);
    assert_eq!((extra.created_s, extra.destroyed_s), (Some(1.0), Some(2.0)));
}

#[test]
fn cvs_starts_in_the_mode_its_initial_vor_calls_for() {
    // Two 4-vCPU VMs on 4 pCPUs (VOR 2) from the start. With thresholds 1 and 1.5, CVS runs
    // yield-to-tail on Credit from the start and never switches: no switch counters and no
    // co-scheduling launch. With thresholds 2 and 3 it co-schedules: gangs launch in turn.
    let vms = [vm_toml("a", 4, "", HOG), vm_toml("b", 4, "", HOG)];
    let m = run(&scenario(4, "name = \"cvs-adaptive\"\nco_max_vor = 1.0\nyth_max_vor = 1.5", &vms, "horizon_s = 1"), 1);
    assert!(m.host.policy_counters.keys().all(|k| !k.starts_with("cvs.")), "{:?}", m.host.policy_counters);
    assert_eq!(m.host.co_launches, 0);
    // The same VMs under thresholds that call for co-scheduling at VOR 2: gangs launch.
    let co = scenario(4, "name = \"cvs-adaptive\"\nco_max_vor = 2.0\nyth_max_vor = 3.0", &vms, "horizon_s = 1");
    let m = run(&co, 1);
    assert!(m.host.co_launches > 10, "{}", m.host.co_launches);
    // Xen's default Domain-0 (4 vCPUs here) is no guest: VOR stays 2 and gangs still launch
    // (counted, it would make VOR 3: yield to head, no launches).
    let m = run(&co.replacen("dom0_vcpus = 0\n", "", 1), 1);
    assert_eq!(m.vms[0].name, "dom0");
    assert!(m.host.co_launches > 10, "{}", m.host.co_launches);
    assert!(m.host.policy_counters.keys().all(|k| !k.starts_with("cvs.")), "{:?}", m.host.policy_counters);
}
