//! `eevdf`: picks by earliest eligible virtual deadline, lag kept across a sleep, slice
//! requests with PREEMPT_SHORT, the exact wake-up preemption rule and delayed dequeue, from
//! exact traces on a zero-overhead host. (Weights give proportional shares: fairness.rs
//! checks that for every policy.)
//!
//! Shared facts used in the derivations, all at weight 256 (load weight 1024, so vruntime
//! advances at wall-clock speed and a slice r is r of vruntime too): with `tunable_scaling =
//! "none"` the base slice is 0.75 ms unless a test sets `base_slice_us`; the tick is 4 ms,
//! and a slice end (vruntime ≥ deadline) is noticed at the next tick (or enqueue on that
//! pCPU). V is the average vruntime of a pCPU's queued vCPUs, the running one included; a
//! vCPU is eligible when its vruntime ≤ V. A new vCPU starts at V (0 on an empty pCPU) with
//! its deadline half a slice later; ties on deadlines go to the vCPU queued first. Only
//! the first pick after a vCPU is chosen protects its slice (RUN_TO_PARITY): a vCPU picked
//! again after its deadline moved keeps the pCPU only while it has the earliest eligible
//! deadline.

mod common;
use common::*;
use vsched_model::{
    DomainConfig, Dur, HostConfig, Instr, RunMetrics, Simulation, Span, Time, Until, Value, VmType, FOREVER, NS_PER_MS,
    NS_PER_US,
};

const MS: Time = NS_PER_MS;
const US: Time = NS_PER_US;

fn io(t: Time) -> Instr {
    Instr::Io(Dur::Fixed(t))
}

fn run_eevdf(
    host: HostConfig,
    params: &[(&str, Value)],
    doms: Vec<DomainConfig>,
    horizon: Time,
) -> (RunMetrics, Vec<Span>) {
    let mut params = params.to_vec();
    params.push(("tunable_scaling", Value::Str("none".into())));
    let mut sim = Simulation::new(host, doms, policy("eevdf", &params), 1);
    sim.enable_trace(100_000);
    let m = sim.run(horizon, Until::Horizon, &mut |_| true).unwrap();
    let spans = sim.take_trace().unwrap().spans().to_vec();
    (m, spans)
}

fn off(feature: &str) -> (&str, Value) {
    (feature, Value::Bool(false))
}

/// A domain whose vCPU threads ask for a slice of `us` µs (`sched_slice_us`).
fn requesting(us: Time, dom: DomainConfig) -> DomainConfig {
    DomainConfig { slice_request_ns: Some(us * US), ..dom }
}

#[test]
fn two_hogs_alternate_by_earliest_eligible_deadline_one_slice_a_turn() {
    // One pCPU, hogs A = 0 and B = 1, slices r = 10 ms. Both start at vruntime 0 with their
    // deadline at r/2 = 5 ms; A was queued first, so A runs. A passes 5 ms at t = 5 and the
    // tick at 8 ms notices: A's new deadline is 8 + 10 = 18 ms, V = (8 + 0) / 2 = 4, A is not
    // eligible, B is: B runs from 8 ms, until the tick after its vruntime passes 5 (t = 16).
    // Then both are at 8 with deadline 18; V = 8, both are eligible, B's new deadline is not
    // earlier than A's and A was queued first: A runs. From there each turn is a request,
    // 10 ms of vruntime, noticed at the next tick: 12 ms.
    let doms = vec![domain("A", VmType::Hit, vec![hog()]), domain("B", VmType::Hit, vec![hog()])];
    let (a, b) = (0, 1);
    let (m, spans) = run_eevdf(free_host(1), &[("base_slice_us", Value::Int(10_000))], doms, 64 * MS);
    assert_eq!(
        on(&spans, 0),
        vec![
            (a, 0, 8 * MS),
            (b, 8 * MS, 16 * MS),
            (a, 16 * MS, 28 * MS),
            (b, 28 * MS, 40 * MS),
            (a, 40 * MS, 52 * MS),
            (b, 52 * MS, 64 * MS)
        ]
    );
    // Each switch is a slice end found at a tick, none a wake-up.
    assert_eq!(counter(&m, "eevdf.wakeup_preemptions"), 0);
}

#[test]
fn a_sleeper_returns_with_its_lag_whatever_the_length_of_its_sleep() {
    // One pCPU, default slices (0.75 ms). G = 0 (a hog) runs first; at the 4 ms tick it is at
    // 4 ms, past its deadline, and S = 1 (vruntime 0) runs, computes 1 ms and sleeps. At 5 ms
    // V = (4 + 1) / 2 = 2.5: S is owed 1.5 ms (its lag; the clamp is max(2r, tick) = 4 ms).
    // It wakes beside G alone (W = w): placed at V − 1.5 × (W + w) / W = V − 3 ms, so that
    // the new average is 1.5 ms ahead of it, and it preempts G, which is then ahead of V.
    // S then keeps the pCPU until a tick finds it past V (its 0.75 ms deadlines pass at once,
    // so each tick asks for the earliest eligible deadline, and only S is eligible):
    // - sleep 1 ms (wakes at 6; G at 5 → S at 2): at 8 S is at 4 ≤ V = 4.5 and G at 5 is not
    //   eligible, so S runs on; at 12 S is at 8 > V = 6.5: S ran 6–12.
    // - sleep 17 ms (wakes at 22, same tick phase; G at 22 → S at 19): S runs 22–28 likewise.
    //   The lag, not the sleep, decides. (CFS places a sleeper by how long it slept: at
    //   max(its vruntime, min_vruntime − latency / 2), GENTLE_FAIR_SLEEPERS.)
    // - without PLACE_LAG S returns at V = 22 (deadline 22.75, as G's just renewed one; S
    //   is queued last but G was picked before: G is no longer protected and not earlier,
    //   so S runs) and is past V at the next tick: 22–24.
    let doms = |sleep: Time| {
        let s = program(&[compute(MS), io(sleep), compute(FOREVER)]);
        vec![domain("G", VmType::Hit, vec![hog()]), domain("S", VmType::Hit, vec![s])]
    };
    let (g, s) = (0, 1);
    let (m, spans) = run_eevdf(free_host(1), &[], doms(MS), 20 * MS);
    assert_eq!(
        &on(&spans, 0)[..5],
        &[(g, 0, 4 * MS), (s, 4 * MS, 5 * MS), (g, 5 * MS, 6 * MS), (s, 6 * MS, 12 * MS), (g, 12 * MS, 16 * MS)]
    );
    assert_eq!(counter(&m, "eevdf.wakeup_preemptions"), 1);

    let (_, spans) = run_eevdf(free_host(1), &[], doms(17 * MS), 32 * MS);
    assert_eq!(&on(&spans, 0)[2..5], &[(g, 5 * MS, 22 * MS), (s, 22 * MS, 28 * MS), (g, 28 * MS, 32 * MS)]);

    let (_, spans) = run_eevdf(free_host(1), &[off("place_lag")], doms(17 * MS), 32 * MS);
    assert_eq!(&on(&spans, 0)[2..5], &[(g, 5 * MS, 22 * MS), (s, 22 * MS, 24 * MS), (g, 24 * MS, 28 * MS)]);
}

#[test]
fn a_shorter_requested_slice_preempts_a_protected_vcpu_on_wake_up() {
    // One pCPU, base slice 3 ms. S = 0 runs first and sleeps at once (lag 0), waking at
    // 0.5 ms; G = 1, a hog, runs from 0 with its deadline at 1.5 ms (half a slice), its slice
    // protected (RUN_TO_PARITY) while it keeps that deadline. At 0.5 ms both are at V = 0.5.
    // - S without a request: deadline 0.5 + 3; G is eligible and protected: S waits for the
    //   4 ms tick (G's slice has ended by then).
    // - S asks for 500 µs: deadline 1.0 ms, before G's 1.5 ms, and S is eligible with the
    //   shorter slice (PREEMPT_SHORT): G loses its protection and S, now the earliest
    //   eligible deadline, preempts at once.
    // - the same without PREEMPT_SHORT: G stays protected; S waits for the tick.
    let doms = |request: Option<Time>| {
        let s = domain("S", VmType::Hit, vec![program(&[io(500 * US), compute(FOREVER)])]);
        let s = match request {
            Some(us) => requesting(us, s),
            None => s,
        };
        vec![s, domain("G", VmType::Hit, vec![hog()])]
    };
    let (s, g) = (0, 1);
    let base = || ("base_slice_us", Value::Int(3000));
    let (m, spans) = run_eevdf(free_host(1), &[base()], doms(None), 6 * MS);
    assert_eq!(on(&spans, 0), vec![(g, 0, 4 * MS), (s, 4 * MS, 6 * MS)]);
    assert_eq!(counter(&m, "eevdf.wakeup_preemptions"), 0);

    let (m, spans) = run_eevdf(free_host(1), &[base()], doms(Some(500)), 6 * MS);
    assert_eq!(&on(&spans, 0)[..2], &[(g, 0, 500 * US), (s, 500 * US, 4 * MS)]);
    assert_eq!(counter(&m, "eevdf.wakeup_preemptions"), 1);

    let (m, spans) = run_eevdf(free_host(1), &[base(), off("preempt_short")], doms(Some(500)), 6 * MS);
    assert_eq!(on(&spans, 0), vec![(g, 0, 4 * MS), (s, 4 * MS, 6 * MS)]);
    assert_eq!(counter(&m, "eevdf.wakeup_preemptions"), 0);
}

#[test]
fn a_wake_up_preempts_exactly_when_the_woken_vcpu_would_be_picked() {
    // One pCPU, base slice 3 ms. S = 0 runs first and sleeps at once (lag 0) until 10 ms.
    // Hogs A = 1 and B = 2 start with deadlines at 1.5 ms. A runs 0–4 (at the tick: vruntime
    // 4, deadline 4 + 3 = 7), B runs 4–8 (likewise), then A, queued first, runs again from 8
    // with its slice protected. At 10 ms A is at 6, B at 4, V = 5: A is no longer eligible,
    // B is, and S returns at V = 5 (lag 0), eligible, deadline 5 + its slice. The pick would
    // be S only if that deadline is before B's 7 ms:
    // - S's slice 3 ms (deadline 8): the pick is B, so no preemption, even though A is not
    //   eligible; at the 12 ms tick A's slice has ended and B runs.
    // - 2 ms (deadline 7, as B's): B was queued first, so still no preemption.
    // - 1.999 ms (deadline 6.999): S preempts at 10 ms.
    let doms = |request: Option<Time>| {
        let s = domain("S", VmType::Hit, vec![program(&[io(10 * MS), compute(FOREVER)])]);
        let s = match request {
            Some(us) => requesting(us, s),
            None => s,
        };
        vec![s, domain("A", VmType::Hit, vec![hog()]), domain("B", VmType::Hit, vec![hog()])]
    };
    let (s, a, b) = (0, 1, 2);
    let base = || ("base_slice_us", Value::Int(3000));
    for request in [None, Some(2000)] {
        let (m, spans) = run_eevdf(free_host(1), &[base()], doms(request), 14 * MS);
        assert_eq!(
            on(&spans, 0),
            vec![(a, 0, 4 * MS), (b, 4 * MS, 8 * MS), (a, 8 * MS, 12 * MS), (b, 12 * MS, 14 * MS)]
        );
        assert_eq!(counter(&m, "eevdf.wakeup_preemptions"), 0, "request {request:?}");
    }
    let (m, spans) = run_eevdf(free_host(1), &[base()], doms(Some(1999)), 14 * MS);
    assert_eq!(&on(&spans, 0)[2..], &[(a, 8 * MS, 10 * MS), (s, 10 * MS, 12 * MS), (b, 12 * MS, 14 * MS)]);
    assert_eq!(counter(&m, "eevdf.wakeup_preemptions"), 1);
}

#[test]
fn a_vcpu_blocking_while_not_eligible_stays_queued_and_wakes_where_it_was() {
    // Two pCPUs, default slices (0.75 ms). S = 0 and A = 2 share pCPU 0; Q = 1 computes 11 ms
    // on pCPU 1 and exits. S runs 0–4, A 4–8, S again from 8 (queued first at equal
    // deadlines) until it has computed 6 ms, at 10 ms: at vruntime 6 against A's 4 it is
    // not eligible (V = 5), so its dequeue is delayed (DELAY_DEQUEUE): it stays in pCPU 0's
    // queue. Q exits at 11 ms and pCPU 1, idle, finds nothing to pull (pCPU 0 holds one
    // runnable vCPU). S's I/O ends at 11.5 ms: it is requeued on pCPU 0, not eligible
    // (6 > V = 5.75), so A runs on; pCPU 1's tick at 12 ms pulls S (pCPU 0 has 2 runnable
    // vCPUs, pCPU 1 none). Without delayed dequeue S leaves at 10 ms and wakes onto the
    // idle pCPU 1 at 11.5 ms.
    let s_prog = program(&[compute(6 * MS), io(1500 * US), compute(FOREVER)]);
    let doms = || {
        vec![
            domain("S", VmType::Hit, vec![s_prog.clone()]),
            domain("Q", VmType::Hit, vec![program(&[compute(11 * MS), Instr::Exit])]),
            domain("A", VmType::Hit, vec![hog()]),
        ]
    };
    let (s, q) = (0, 1);
    let (m, spans) = run_eevdf(free_host(2), &[], doms(), 14 * MS);
    assert_eq!(on(&spans, 1), vec![(q, 0, 11 * MS), (s, 12 * MS, 14 * MS)]);
    assert_eq!((counter(&m, "eevdf.delayed_dequeues"), counter(&m, "eevdf.balance_pulls")), (1, 1));

    let (m, spans) = run_eevdf(free_host(2), &[off("delay_dequeue")], doms(), 14 * MS);
    assert_eq!(on(&spans, 1), vec![(q, 0, 11 * MS), (s, 11_500 * US, 14 * MS)]);
    assert_eq!(counter(&m, "eevdf.delayed_dequeues"), 0);
}

#[test]
fn bad_parameters_are_refused_by_name() {
    let info = vsched_policies::find("eevdf").unwrap();
    let build = |key: &str, value: Value| {
        let given = [(key.to_string(), value)].into_iter().collect();
        match vsched_model::Params::check("scheduler", info.params, &given) {
            Err(e) => e.to_string(),
            Ok(params) => (info.build)(&params).err().unwrap().to_string(),
        }
    };
    assert_eq!(
        build("base_slice_us", Value::Int(0)),
        "scheduler.base_slice_us: expected an integer in 1..=1000000, got 0"
    );
    assert_eq!(build("tick_hz", Value::Int(0)), "scheduler.tick_hz: expected an integer in 1..=10000, got 0");
    assert!(
        build("tunable_scaling", Value::Str("sqrt".into())).starts_with("scheduler.tunable_scaling: expected one of")
    );
}
