//! Issue 60 part 1: SMT in the host model (`sim/smt.rs`). Hand-checked on a free host in
//! lockstep: a compute slows to `smt_rate` while a sibling thread runs and speeds up again
//! when it stops; the co-run and cross-VM figures integrate what ran beside what; hosts
//! without SMT report none of it; and placement prefers a fully idle core.

mod common;
use common::*;
use vsched_model::{Dur, HostConfig, Instr, RunMetrics, Simulation, Time, Until, VmType, NS_PER_MS};

const MS: Time = NS_PER_MS;

/// A host of `pcpus` pCPUs, `threads_per_core` threads per core, with `smt_rate`.
fn smt_host(pcpus: usize, threads_per_core: usize, smt_rate: f64) -> HostConfig {
    HostConfig { threads_per_core, smt_rate, ..free_host(pcpus) }
}

/// A VM whose vCPUs compute `ms` each, then exit.
fn finite(name: &str, ms: &[Time]) -> vsched_model::DomainConfig {
    let programs = ms.iter().map(|&t| program(&[Instr::Compute(Dur::Fixed(t * MS))])).collect();
    let mut d = domain(name, VmType::Hit, programs);
    d.guest.finite = true;
    d
}

/// A 1-vCPU VM that computes `ms` then exits.
fn job(name: &str, ms: Time) -> vsched_model::DomainConfig {
    finite(name, &[ms])
}

fn run_until_done(host: HostConfig, doms: Vec<vsched_model::DomainConfig>, policy_name: &str) -> RunMetrics {
    Simulation::new(host, doms, policy(policy_name, &[]), 1).run(10_000 * MS, Until::AllDone, &mut |_| true).unwrap()
}

fn completion_ms(m: &RunMetrics, name: &str) -> f64 {
    vm(m, name).completion_s.expect("finished") * 1e3
}

#[test]
fn siblings_slow_each_other_while_both_run() {
    // One core of two threads at rate 1/2. b computes 20 ms: at half speed it ends at 40 ms.
    // By then a did 20 ms of its 100; alone on the core it does the other 80 at full speed
    // and ends at 120 ms.
    let m = run_until_done(smt_host(2, 2, 0.5), vec![job("a", 100), job("b", 20)], "rr");
    assert_eq!(completion_ms(&m, "b"), 40.0);
    assert_eq!(completion_ms(&m, "a"), 120.0);
    // 40 ms with both threads busy, each running another domain.
    assert_eq!(m.host.smt_corun_s, Some(0.040));
    assert_eq!(m.host.smt_cross_vm_s, Some(0.040));
    assert_eq!(vm(&m, "a").core_shared_s, Some(0.040));
    assert_eq!(vm(&m, "b").core_shared_s, Some(0.040));
}

#[test]
fn threads_of_separate_cores_do_not_slow_each_other() {
    // Two cores of two threads: rr puts a and b on pCPUs 0 and 1, one core. Two cores of
    // one thread each (no SMT) run both at full speed and report no SMT figures.
    let no_smt = run_until_done(smt_host(2, 1, 0.5), vec![job("a", 100), job("b", 20)], "rr");
    assert_eq!(completion_ms(&no_smt, "a"), 100.0);
    assert_eq!(completion_ms(&no_smt, "b"), 20.0);
    assert_eq!(no_smt.host.smt_corun_s, None);
    assert_eq!(vm(&no_smt, "a").core_shared_s, None);
    let json = serde_json::to_string(&no_smt).unwrap();
    assert!(!json.contains("smt_") && !json.contains("core_shared_s"), "a host without SMT reports none: {json}");
}

#[test]
fn a_rate_of_one_leaves_times_alone_but_still_counts_sharing() {
    let m = run_until_done(smt_host(2, 2, 1.0), vec![job("a", 100), job("b", 20)], "rr");
    assert_eq!(completion_ms(&m, "a"), 100.0);
    assert_eq!(completion_ms(&m, "b"), 20.0);
    assert_eq!(m.host.smt_corun_s, Some(0.020));
    assert_eq!(m.host.smt_cross_vm_s, Some(0.020));
}

#[test]
fn two_vcpus_of_one_vm_corun_without_sharing_across_vms() {
    // A 2-vCPU VM on one 2-thread core: both threads busy, but one domain.
    let m = run_until_done(smt_host(2, 2, 0.5), vec![finite("pair", &[30, 30])], "rr");
    assert_eq!(completion_ms(&m, "pair"), 60.0);
    assert_eq!(m.host.smt_corun_s, Some(0.060));
    assert_eq!(m.host.smt_cross_vm_s, Some(0.0));
    assert_eq!(vm(&m, "pair").core_shared_s, Some(0.0));
}

#[test]
fn bad_smt_rates_are_refused_naming_the_field() {
    for bad in ["0", "1.5", "-0.2", "nan"] {
        let toml = format!(
            "[host]\npcpus = 2\nthreads_per_core = 2\nsmt_rate = {bad}\n[scheduler]\nname = \"rr\"\n{}\n[run]\nhorizon_s = 1\n",
            vm_toml("a", 1, "", HOG)
        );
        let err = vsched::Scenario::parse(&toml).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("host.smt_rate") && err.contains("(0, 1]"), "smt_rate = {bad}: {err}");
    }
}
