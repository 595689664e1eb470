//! Where a vCPU that takes a pause-loop exit waits: `credit` (Xen's `__runq_insert`), `ytt`
//! (yield to tail) and `yth` (yield to head), seed 001 §2 Fig. 1; and Credit's VM lifecycle
//! callbacks, driven by VMs the engine creates and destroys mid-run. Hand-checked on traces.
//!
//! The yield scenarios run on one pCPU of a host without overheads ([`free_host`]), so
//! decisions land on exact instants. A PLE window is 4096 cycles at 2 GHz = 2048 ns of continuous
//! kernel-mode spinning; the window restarts when the vCPU is scheduled in. Credit: 30 ms
//! slices, 10 ms ticks, accounting every 30 ms (300 credits to share on one pCPU), 1 ms rate
//! limit; a waking UNDER vCPU is BOOSTed until a tick finds it running.

mod common;
use common::*;
use vsched_model::*;

const MS: Time = NS_PER_MS;
/// One PLE window: 4096 cycles at 2 GHz.
const PLE: Time = 2048;

/// `(vcpu, start, end, spinning)`.
type Run = (VcpuId, Time, Time, bool);

/// Runs `doms` on one free pCPU under `policy_name` until `horizon`; returns what ran, in order.
fn runs(policy_name: &str, doms: Vec<DomainConfig>, horizon: Time) -> (RunMetrics, Vec<Run>) {
    let mut sim = Simulation::new(free_host(1), doms, policy(policy_name, &[]), 1);
    sim.enable_trace(100_000);
    let m = sim.run(horizon, Until::Horizon, &mut |_| true).expect("run failed");
    let trace = sim.take_trace().unwrap();
    (m, trace.spans().iter().map(|s| (s.vcpu, s.start, s.end, s.spinning)).collect())
}

/// VM "S" with one kernel ticket lock: vCPU 0 and vCPU 1 run these programs.
fn lock_vm(v0: &[Instr], v1: &[Instr]) -> DomainConfig {
    let mut d = domain("S", VmType::Hit, vec![program(v0), program(v1)]);
    d.guest.locks = 1;
    d
}

/// Scenario A: a lock holder preempted while its sibling, all others UNDER, spins.
/// vCPUs: S0 = 0 (holds the lock for 45 ms of CPU), S1 = 1 (wants it), H1 = 2, H2 = 3 (hogs).
fn holder_preempted() -> Vec<DomainConfig> {
    vec![
        lock_vm(
            &[kernel_lock(), compute(45 * MS), Instr::Unlock, compute(FOREVER)],
            &[kernel_lock(), Instr::Unlock, compute(FOREVER)],
        ),
        domain("H1", VmType::Hit, vec![hog()]),
        domain("H2", VmType::Hit, vec![hog()]),
    ]
}

const S0: VcpuId = 0;
const S1: VcpuId = 1;
const H1: VcpuId = 2;
const H2: VcpuId = 3;

// Scenario A, common to all three policies up to the yield:
//   t=0    queue [S0 S1 H1 H2], all UNDER with 0 credits. S0 runs and takes the lock.
//   10, 20 ticks charge S0 100 credits each (-200) and make it active.
//   30     accounting: S is the only active domain and gets all 300 credits: S0 +100, UNDER;
//          the tick charges it to 0. S0's slice ends holding the lock (15 ms of its critical
//          section left) and goes behind the others: [S1 H1 H2 S0]. S1 runs and spins.
//   30 ms + PLE: S1's pause-loop exit; it yields, UNDER, with [H1 H2 S0] all UNDER queued.

#[test]
fn ytt_runs_every_other_queued_vcpu_before_the_yielder() {
    // ytt: S1 to the tail: [H1 H2 S0 S1]. H1 runs a slice.
    //   60: accounting splits 300 between S and H1: 150 each; S0 0 -> 150 UNDER, H1 (charged
    //       ~200) -> OVER. H1's slice ends: OVER, to the tail: [H2 S0 S1 H1]. H2 runs.
    //   90: accounting splits 100 each among S, H1, H2: S0 250 UNDER, H1 and H2 OVER. H2
    //       to the tail: [S0 S1 H1 H2]. S0 runs, releases the lock 15 ms later (the ticket
    //       passes to the queued S1) and computes on.
    //  120: S0's slice ends; S1 runs, holding the lock: no more spinning.
    let (m, got) = runs("ytt", holder_preempted(), 200 * MS);
    assert_eq!(
        got[..6],
        [
            (S0, 0, 30 * MS, false),
            (S1, 30 * MS, 30 * MS + PLE, true),
            (H1, 30 * MS + PLE, 60 * MS + PLE, false),
            (H2, 60 * MS + PLE, 90 * MS + PLE, false),
            (S0, 90 * MS + PLE, 120 * MS + PLE, false),
            (S1, 120 * MS + PLE, 150 * MS + PLE, false),
        ]
    );
    assert_eq!(vm(&m, "S").ple_exits, 1, "S1 spins one window, once");
    // With every queued vCPU as UNDER as the yielder, Xen's rule ("behind its class and one
    // lower-priority vCPU": there is none) is the tail too.
    let (_, credit) = runs("credit", holder_preempted(), 200 * MS);
    assert_eq!(credit, got);
}

#[test]
fn yth_runs_the_yielder_right_after_the_vcpu_that_replaced_it() {
    // yth: the pCPU chooses among [H1 H2 S0] -> H1, and S1 waits first: [S1 H2 S0].
    //   60: accounting as for ytt (S0 150 UNDER, H1 OVER); H1 back at the tail: [S1 H2 S0 H1].
    //       S1 runs, spins one window (S0 still holds the lock), yields again: H2 runs,
    //       [S1 S0 H1].
    //   90: S0 250 UNDER, H1 and H2 OVER; H2 back: [S1 S0 H1 H2]. S1 spins, yields: S0 runs,
    //       [S1 H1 H2], and releases the lock to S1 15 ms later.
    //  120: S1, at the head, runs with the lock.
    let (m, got) = runs("yth", holder_preempted(), 200 * MS);
    assert_eq!(
        got[..8],
        [
            (S0, 0, 30 * MS, false),
            (S1, 30 * MS, 30 * MS + PLE, true),
            (H1, 30 * MS + PLE, 60 * MS + PLE, false),
            (S1, 60 * MS + PLE, 60 * MS + 2 * PLE, true),
            (H2, 60 * MS + 2 * PLE, 90 * MS + 2 * PLE, false),
            (S1, 90 * MS + 2 * PLE, 90 * MS + 3 * PLE, true),
            (S0, 90 * MS + 3 * PLE, 120 * MS + 3 * PLE, false),
            (S1, 120 * MS + 3 * PLE, 150 * MS + 3 * PLE, false),
        ]
    );
    assert_eq!(vm(&m, "S").ple_exits, 3, "S1 comes back after each slice until S0 runs");
}

#[test]
fn yth_waiters_yield_to_the_rest_of_the_queue_before_each_other() {
    // Two waiters on one pCPU: S0 = 0 holds the lock for 45 ms of CPU, S1 = 1 and S2 = 2 want
    // it (tickets in that order), H1 = 3 is a hog. Up to 30 ms as scenario A: queue [S1 S2 H1
    // S0] when S0's slice ends holding the lock.
    //   30: S1 spins, yields; the pCPU chooses without it: S2, which spins and yields too. Both
    //       yielded this round, so the pCPU chooses without either: H1 runs a slice, and the
    //       waiters wait at the head, the latest first: [S2 S1 S0].
    //   60: H1's slice ends (OVER, to the tail): the round is over. S2 spins and yields, S1
    //       spins and yields, S0 runs and releases the lock to S1 15 ms later.
    //   90: S0's slice ends; S1 runs with the lock.
    // Without rounds S1 and S2 would hand the pCPU to each other every window.
    let vms = vec![
        {
            let spin = [kernel_lock(), Instr::Unlock, compute(FOREVER)];
            let mut d = domain(
                "S",
                VmType::Hit,
                vec![
                    program(&[kernel_lock(), compute(45 * MS), Instr::Unlock, compute(FOREVER)]),
                    program(&spin),
                    program(&spin),
                ],
            );
            d.guest.locks = 1;
            d
        },
        domain("H1", VmType::Hit, vec![hog()]),
    ];
    let (s0, s1, s2, h1) = (0, 1, 2, 3);
    let (m, got) = runs("yth", vms, 200 * MS);
    assert_eq!(
        got[..8],
        [
            (s0, 0, 30 * MS, false),
            (s1, 30 * MS, 30 * MS + PLE, true),
            (s2, 30 * MS + PLE, 30 * MS + 2 * PLE, true),
            (h1, 30 * MS + 2 * PLE, 60 * MS + 2 * PLE, false),
            (s2, 60 * MS + 2 * PLE, 60 * MS + 3 * PLE, true),
            (s1, 60 * MS + 3 * PLE, 60 * MS + 4 * PLE, true),
            (s0, 60 * MS + 4 * PLE, 90 * MS + 4 * PLE, false),
            (s1, 90 * MS + 4 * PLE, 120 * MS + 4 * PLE, false),
        ]
    );
    assert_eq!(vm(&m, "S").ple_exits, 4);
}

#[test]
fn a_boosted_yielder_goes_one_vcpu_back_under_credit_but_to_the_tail_under_ytt() {
    // Scenario B. vCPUs: W = 0 (5 ms of I/O, then wants the lock), Hd = 1 (holds the lock for
    // 50 ms of CPU), H1 = 2 (3 ms of work, then I/O for longer than the run), H2 = 3 (hog).
    //   t=0  queue [W Hd H1 H2]: W starts its I/O at once (blocks); Hd runs, takes the lock.
    //   5    W wakes BOOSTed, goes first: [W H1 H2]; its tickle preempts Hd (5 ms > the rate
    //        limit), which goes behind the UNDER ones: [W H1 H2 Hd]. W spins.
    //   5 ms + PLE: W yields, still BOOST (no tick found it running), [H1 H2 Hd] all UNDER:
    //        credit: first lower-priority vCPU is H1, one further: [H1 W H2 Hd]
    //        ytt:    the tail:                                      [H1 H2 Hd W]
    //        yth:    H1 is chosen, W first:                     H1, [W H2 Hd]
    //   8 ms + PLE: H1 blocks after its 3 ms. The head runs: W (credit, yth), which spins and
    //        yields again behind H2 (credit: [H2 W Hd]; yth: H2 chosen, [W Hd]); H2 (ytt).
    // (What follows depends on the run-queue sort after the 30 ms accounting.)
    const W: VcpuId = 0;
    const HD: VcpuId = 1;
    let doms = || {
        vec![
            lock_vm(
                &[Instr::Io(Dur::Fixed(5 * MS)), kernel_lock(), Instr::Unlock, compute(FOREVER)],
                &[kernel_lock(), compute(50 * MS), Instr::Unlock, compute(FOREVER)],
            ),
            domain("H1", VmType::Hit, vec![program(&[compute(3 * MS), Instr::Io(Dur::Fixed(FOREVER))])]),
            domain("H2", VmType::Hit, vec![hog()]),
        ]
    };
    let start = [(HD, 0, 5 * MS, false), (W, 5 * MS, 5 * MS + PLE, true), (H1, 5 * MS + PLE, 8 * MS + PLE, false)];
    let one_back = [(W, 8 * MS + PLE, 8 * MS + 2 * PLE, true), (H2, 8 * MS + 2 * PLE, 38 * MS + 2 * PLE, false)];
    for name in ["credit", "yth"] {
        let (_, got) = runs(name, doms(), 60 * MS);
        assert_eq!(got[..5], [&start[..], &one_back[..]].concat(), "{name}");
    }
    let (_, got) = runs("ytt", doms(), 60 * MS);
    assert_eq!(got[..4], [&start[..], &[(H2, 8 * MS + PLE, 38 * MS + PLE, false)]].concat());
}

#[test]
fn before_xen_4_1_a_boosted_yielder_stays_first_until_a_tick_demotes_it() {
    // Scenario B under Xen 4.0.1's Credit: no YIELD flag (it ships in 4.1.0), so a yield is a
    // plain reschedule and W, still BOOST, goes back at the head of [H1 H2 Hd] (all UNDER):
    // it spins on, exit after exit, until the 10 ms tick demotes it to UNDER. Its first exit
    // after that puts it behind the UNDER ones, and H1 runs. Exits come every PLE window
    // from 5 ms: the first after 10 ms is the 2442nd (2442 × 2048 ns = 5.001216 ms).
    const W: VcpuId = 0;
    let doms = vec![
        lock_vm(
            &[Instr::Io(Dur::Fixed(5 * MS)), kernel_lock(), Instr::Unlock, compute(FOREVER)],
            &[kernel_lock(), compute(50 * MS), Instr::Unlock, compute(FOREVER)],
        ),
        domain("H1", VmType::Hit, vec![program(&[compute(3 * MS), Instr::Io(Dur::Fixed(FOREVER))])]),
        domain("H2", VmType::Hit, vec![hog()]),
    ];
    let mut sim =
        Simulation::new(free_host(1), doms, policy("credit", &[("xen_version", Value::Str("4.0".into()))]), 1);
    sim.enable_trace(100_000);
    sim.run(20 * MS, Until::Horizon, &mut |_| true).expect("run failed");
    let spans = sim.take_trace().unwrap().spans().to_vec();
    let after_w = spans.iter().find(|s| s.start >= 5 * MS && s.vcpu != W).expect("someone else runs");
    assert_eq!((after_w.vcpu, after_w.start), (H1, 5 * MS + 2442 * PLE));
    assert!(spans.iter().filter(|s| s.start >= 5 * MS && s.end <= after_w.start).all(|s| s.vcpu == W && s.spinning));
}

#[test]
fn a_yielder_with_nothing_else_to_run_runs_on() {
    // S0 takes the lock and blocks for 10 ms of I/O holding it; S1 spins alone on the pCPU.
    // Each pause-loop exit yields, but there is nobody to yield to (no peer to steal from
    // either), so S1 runs on: one spinning span, 10 ms / 2048 ns = 4882 exits. At 10 ms S0
    // wakes BOOSTed and preempts it.
    let doms = || {
        vec![lock_vm(
            &[kernel_lock(), Instr::Io(Dur::Fixed(10 * MS)), Instr::Unlock, compute(FOREVER)],
            &[kernel_lock(), Instr::Unlock, compute(FOREVER)],
        )]
    };
    for name in ["credit", "ytt", "yth"] {
        let (m, got) = runs(name, doms(), 20 * MS);
        assert_eq!(got[0], (S1, 0, 10 * MS, true), "{name}");
        assert_eq!((got[1].0, got[1].1), (S0, 10 * MS), "{name}");
        assert_eq!(vm(&m, "S").ple_exits, 4882, "{name}");
    }
}

// ---- VM lifecycle on Credit ----
// VMs created (`start_at`) and destroyed (`stop_at`) by the engine during the run.

const CREDIT_FAMILY: [&str; 4] = ["credit", "balance", "ytt", "yth"];

#[test]
fn credit_based_policies_declare_vm_lifecycle_support_and_stateful_co_schedulers_do_not() {
    for name in CREDIT_FAMILY.iter().chain(&["bcs"]) {
        assert!(policy(name, &[]).supports_vm_lifecycle(), "{name}");
    }
    for name in ["cs", "cds", "pcs", "cvs-comm"] {
        assert!(!policy(name, &[]).supports_vm_lifecycle(), "{name}");
    }
}

#[test]
fn a_vcpu_inserted_mid_run_is_boosted_and_picked_up_by_an_idle_pcpu_at_once() {
    // 2 pCPUs: hog A (vCPU 0) on pCPU 0; hog L (vCPU 1) arrives at 45 ms. Its run queue is
    // pCPU 1's (1 mod 2), idle since the start with no timer: only the insert's tickle wakes it.
    for name in CREDIT_FAMILY {
        let late = DomainConfig { start_at: 45 * MS, ..domain("L", VmType::Hit, vec![hog()]) };
        let doms = vec![domain("A", VmType::Hit, vec![hog()]), late];
        let mut sim = Simulation::new(free_host(2), doms, policy(name, &[]), 1);
        sim.enable_trace(1000);
        let m = sim.run(100 * MS, Until::Horizon, &mut |_| true).expect("run failed");
        let spans = sim.take_trace().unwrap().spans().to_vec();
        let first_l = spans.iter().find(|s| s.vcpu == 1).expect("L runs");
        assert_eq!((first_l.pcpu, first_l.start), (1, 45 * MS), "{name}");
        assert_eq!(m.host.policy_counters.get("credit.boosts"), Some(&1), "{name}: the wake-up after creation");
        assert!(spans.iter().all(|s| s.vcpu == 0 || s.start >= 45 * MS), "{name}");
    }
}

#[test]
fn a_removed_vcpu_never_runs_again_and_its_vm_leaves_the_accounting() {
    // 1 pCPU, hogs A (weight 256), B (512), C (256). C runs [60, 90) ms. Its VM is destroyed
    // at 100 ms, while C waits in the run queue, or at 75 ms, while it runs (its pCPU
    // reschedules at once). Either way C never runs again, and from 500 ms on A and B split
    // the pCPU 1:2. (Credit's debug check also verifies after every event that the run queue
    // and the active lists agree with the vCPUs' state.)
    for (name, (stop, c_last_expected)) in
        CREDIT_FAMILY.iter().flat_map(|&n| [(n, (100 * MS, 90 * MS)), (n, (75 * MS, 75 * MS))])
    {
        let weighted = |n: &str, w: u32| DomainConfig { weight: w, ..domain(n, VmType::Hit, vec![hog()]) };
        let doomed = DomainConfig { stop_at: Some(stop), ..weighted("C", 256) };
        let doms = vec![weighted("A", 256), weighted("B", 512), doomed];
        let mut sim = Simulation::new(free_host(1), doms, policy(name, &[]), 1);
        sim.enable_trace(100_000);
        sim.run(3_000 * MS, Until::Horizon, &mut |_| true).expect("run failed");
        let spans = sim.take_trace().unwrap().spans().to_vec();
        let c_last = spans.iter().filter(|s| s.vcpu == 2).map(|s| s.end).max().unwrap();
        assert_eq!(c_last, c_last_expected, "{name}, destroyed at {stop} ns: C's only slice starts at 60 ms");
        let cpu_after = |v: VcpuId| -> Time {
            spans.iter().filter(|s| s.vcpu == v).map(|s| s.end.saturating_sub(s.start.max(500 * MS))).sum()
        };
        let (a, b) = (cpu_after(0), cpu_after(1));
        assert_eq!(a + b, 2_500 * MS, "{name}: A and B keep the pCPU busy");
        let ratio = b as f64 / a as f64;
        assert!((ratio - 2.0).abs() < 0.1, "{name}: B/A = {ratio} after C left");
    }
}
