//! `cfs`: wake-up preemption beyond the wakeup granularity, sleeper placement, tunable
//! scaling and newidle balancing, from exact traces on a zero-overhead host. (Weights give
//! proportional shares: fairness.rs checks that for every policy.)
//!
//! Shared facts used in the derivations: with `tunable_scaling = "none"` the latency is 6 ms,
//! the minimum granularity 0.75 ms and the wakeup granularity 1 ms; the tick is 4 ms.
//! vCPUs are inserted in global order on the least loaded pCPU (lowest index on ties) at
//! min_vruntime (0) + latency / (entities there, itself included) (START_DEBIT): 6 ms for
//! the first on a pCPU, 3 ms for the second. With two entities a slice is 3 ms.

mod common;
use common::*;
use vsched_model::{
    DomainConfig, Dur, HostConfig, Instr, RunMetrics, Simulation, Span, Time, Until, Value, VmType, FOREVER, NS_PER_MS,
    NS_PER_US,
};

const MS: Time = NS_PER_MS;
const US: Time = NS_PER_US;

fn run_cfs(
    host: HostConfig,
    params: &[(&str, Value)],
    doms: Vec<DomainConfig>,
    horizon: Time,
) -> (RunMetrics, Vec<Span>) {
    let mut sim = Simulation::new(host, doms, policy("cfs", params), 1);
    sim.enable_trace(100_000);
    let m = sim.run(horizon, Until::Horizon, &mut |_| true).unwrap();
    let spans = sim.take_trace().unwrap().spans().to_vec();
    (m, spans)
}

fn none() -> (&'static str, Value) {
    ("tunable_scaling", Value::Str("none".into()))
}

#[test]
fn a_waking_vcpu_preempts_only_beyond_the_wakeup_granularity() {
    // One pCPU: G = 0 (a hog, inserted at 6 ms) and S = 1 (inserted at 3 ms), which
    // computes 3.5 ms, sleeps 1.2 ms, then computes for ever.
    // S runs first and blocks at 3.5 ms with 6.5 ms of vruntime; G runs from 3.5 ms (alone:
    // the 4 ms tick does nothing). S wakes at 4.7 ms: G is at 6 + 1.2 = 7.2 ms, S keeps its
    // 6.5 ms (above min_vruntime − 3 ms), so G is 0.7 ms ahead.
    // - wakeup granularity 1 ms: no preemption; at the 8 ms tick G has run 4.5 ms > its
    //   3 ms slice, so S runs from 8 ms.
    // - wakeup granularity 0.5 ms: 0.7 ms > 0.5 ms, S preempts G at once, at 4.7 ms.
    let doms = || {
        let s = program(&[compute(3500 * US), Instr::Io(Dur::Fixed(1200 * US)), compute(FOREVER)]);
        vec![domain("G", VmType::Hit, vec![hog()]), domain("S", VmType::Hit, vec![s])]
    };
    let (g, s) = (0, 1);
    let (m, spans) = run_cfs(free_host(1), &[none()], doms(), 10 * MS);
    assert_eq!(&on(&spans, 0)[..3], &[(s, 0, 3500 * US), (g, 3500 * US, 8 * MS), (s, 8 * MS, 10 * MS)]);
    assert_eq!(counter(&m, "cfs.wakeup_preemptions"), 0);

    let (m, spans) = run_cfs(free_host(1), &[none(), ("wakeup_granularity_us", Value::Int(500))], doms(), 10 * MS);
    assert_eq!(&on(&spans, 0)[..3], &[(s, 0, 3500 * US), (g, 3500 * US, 4700 * US), (s, 4700 * US, 8 * MS)]);
    assert_eq!(counter(&m, "cfs.wakeup_preemptions"), 1);
}

#[test]
fn a_long_sleeper_gets_half_a_latency_of_credit_not_its_old_vruntime() {
    // One pCPU: G = 0 (a hog, 6 ms) and S = 1 (3 ms), which sleeps 10 ms, then computes for
    // ever. S runs first and blocks at once; G runs alone until 10 ms (vruntime 16 ms). S
    // wakes at 10 ms and is placed at max(3, 16 − 6 / 2) = 13 ms (GENTLE_FAIR_SLEEPERS), 3 ms
    // behind G: beyond the 1 ms wakeup granularity, so it preempts G at once. It then runs
    // until G is the smaller and it has used a slice: at the 12 ms tick it is at 15 < 16 ms;
    // at 16 ms it has run 6 ms > 3 ms. After that the two alternate at every tick.
    // Placed at its old 3 ms vruntime instead, S would have run until 24 ms.
    let s_prog = program(&[Instr::Io(Dur::Fixed(10 * MS)), compute(FOREVER)]);
    let doms = vec![domain("G", VmType::Hit, vec![hog()]), domain("S", VmType::Hit, vec![s_prog])];
    let (g, s) = (0, 1);
    let (m, spans) = run_cfs(free_host(1), &[none()], doms, 30 * MS);
    assert_eq!(
        on(&spans, 0),
        vec![
            (g, 0, 10 * MS),
            (s, 10 * MS, 16 * MS),
            (g, 16 * MS, 20 * MS),
            (s, 20 * MS, 24 * MS),
            (g, 24 * MS, 28 * MS),
            (s, 28 * MS, 30 * MS)
        ]
    );
    assert_eq!(counter(&m, "cfs.wakeup_preemptions"), 1);
}

#[test]
fn tunables_scale_with_the_log_of_the_pcpu_count() {
    // Two pCPUs, four hogs: 0 and 2 on pCPU 0, 1 and 3 on pCPU 1. Default "log" scaling
    // doubles the tunables (1 + ilog2(2)): latency 12 ms, slice 6 ms with two entities, and
    // insertion at 12 and 6 ms. Hog 2 runs first; at the 4 ms tick it has used 4 < 6 ms and
    // is behind (10 < 12 ms); at 8 ms it has used 8 ms: hog 0 runs, and so on every 8 ms.
    // With "none", slices are 3 ms and the pCPU switches at every 4 ms tick.
    let doms = || vec![domain("hogs", VmType::Hit, vec![hog(), hog(), hog(), hog()])];
    let (_, spans) = run_cfs(free_host(2), &[], doms(), 24 * MS);
    assert_eq!(on(&spans, 0), vec![(2, 0, 8 * MS), (0, 8 * MS, 16 * MS), (2, 16 * MS, 24 * MS)]);
    assert_eq!(on(&spans, 1), vec![(3, 0, 8 * MS), (1, 8 * MS, 16 * MS), (3, 16 * MS, 24 * MS)]);
    let (_, spans) = run_cfs(free_host(2), &[none()], doms(), 12 * MS);
    assert_eq!(on(&spans, 0), vec![(2, 0, 4 * MS), (0, 4 * MS, 8 * MS), (2, 8 * MS, 12 * MS)]);
}

#[test]
fn an_idle_pcpu_pulls_a_waiting_vcpu() {
    // Two pCPUs. A = 0 (hog) goes to pCPU 0, Q = 1 (computes 1 ms, then exits) to pCPU 1,
    // B = 2 (hog) to pCPU 0 at the smaller vruntime, so B runs there and A waits. When Q
    // exits at 1 ms, pCPU 1's queue is empty and it pulls A, the only waiting vCPU, from
    // pCPU 0; from then on each hog has a pCPU of its own and nothing moves again.
    let q = program(&[compute(MS), Instr::Exit]);
    let doms = vec![
        domain("A", VmType::Hit, vec![hog()]),
        domain("Q", VmType::Hit, vec![q]),
        domain("B", VmType::Hit, vec![hog()]),
    ];
    let (m, spans) = run_cfs(free_host(2), &[none()], doms, 20 * MS);
    assert_eq!(on(&spans, 0), vec![(2, 0, 20 * MS)]);
    assert_eq!(on(&spans, 1), vec![(1, 0, MS), (0, MS, 20 * MS)]);
    assert_eq!(counter(&m, "cfs.newidle_pulls"), 1);
    assert_eq!(counter(&m, "cfs.balance_pulls"), 0);
}
