//! `kvm-dy`: on a pause-loop exit KVM yields to a preempted sibling, never to itself, a
//! running, blocked or user-mode-preempted one; spinning siblings are eligible every other
//! check; `yield_to` fails when both run queues hold one vCPU, and the scan gives up after 3.
//!
//! Every scenario runs hand-written programs on a zero-overhead host, so schedules can be
//! derived exactly. Shared facts used in the derivations:
//! - `tunable_scaling = "none"`: sched_latency 6 ms, min_granularity 0.75 ms, wakeup
//!   granularity 1 ms (overridden where said), tick 4 ms.
//! - PLE window: 4096 cycles at 2 GHz = 2048 ns of continuous kernel spinning.
//! - Insertion (START_DEBIT): vCPUs in global order go to the least loaded pCPU (lowest
//!   index on ties) at min_vruntime (0) + latency × 1 / (entities there, itself included):
//!   the first on a pCPU gets 6 ms, the second 3 ms, the third 2 ms. The pCPU runs the
//!   smallest vruntime first.
//! - With two entities on a queue the slice is 3 ms, so a tick (every 4 ms) finds the
//!   current one past its slice and switches to the other if it has a smaller vruntime.

mod common;
use common::*;
use vsched_model::{
    DomainConfig, Dur, Instr, RunMetrics, Simulation, Span, Time, Until, Value, VmType, FOREVER, NS_PER_MS, NS_PER_US,
};

const MS: Time = NS_PER_MS;
const US: Time = NS_PER_US;
/// One PLE window at the default 2 GHz.
const WINDOW: Time = 2048;

/// A VM of these programs with one kernel ticket lock.
fn vm_with_lock(name: &str, programs: Vec<vsched_model::Program>) -> DomainConfig {
    let mut d = domain(name, VmType::Hit, programs);
    d.guest.locks = 1;
    d
}

/// Runs `doms` under `name` (with `tunable_scaling = "none"` and `params`) on `host` up to
/// `horizon`; returns the metrics and the trace.
fn run_on(
    host: vsched_model::HostConfig,
    name: &str,
    params: &[(&str, Value)],
    doms: Vec<DomainConfig>,
    horizon: Time,
) -> (RunMetrics, Vec<Span>) {
    let mut all = vec![("tunable_scaling", Value::Str("none".into()))];
    all.extend(params.iter().cloned());
    let mut sim = Simulation::new(host, doms, policy(name, &all), 1);
    sim.enable_trace(1_000_000);
    let m = sim.run(horizon, Until::Horizon, &mut |_| true).unwrap();
    let spans = sim.take_trace().unwrap().spans().to_vec();
    (m, spans)
}

fn spans_of(spans: &[Span], vcpu: usize) -> Vec<(Time, Time)> {
    spans.iter().filter(|s| s.vcpu == vcpu).map(|s| (s.start, s.end)).collect()
}

/// Spans cut at `t` (what happened before `t`).
fn before(spans: &[Span], t: Time) -> Vec<Span> {
    spans.iter().filter(|s| s.start < t).map(|s| Span { end: s.end.min(t), ..*s }).collect()
}

/// `free_host` with a fixed PLE window (`ple_grow = 1`; KVM's own doubles it per exit, which
/// `guest_kernel.rs` checks), so that every exit comes one window after the last.
fn fixed_window(pcpus: usize) -> vsched_model::HostConfig {
    vsched_model::HostConfig { ple_grow: Some(1), ..free_host(pcpus) }
}

#[test]
fn kvm_dy_runs_a_preempted_lock_holder_at_the_next_pause_loop_exit() {
    // vCPUs: G = 0 (a hog VM), W = 1 and H = 2 (VM "vm"). Insertion: G -> pCPU 0 at 6 ms,
    // W -> pCPU 1 at 6 ms, H -> pCPU 0 at 3 ms. So H runs first on pCPU 0 and takes the lock
    // at t = 0 for a 30 ms critical section; W, alone on pCPU 1, computes 1 ms and then spins
    // on the lock, with a PLE exit every 2048 ns.
    // At 4 ms the tick preempts H (4 ms > its 3 ms slice; H at 7 ms of vruntime, G at 6).
    // - cfs: W's exits change nothing; G runs until the 8 ms tick, then H again.
    // - kvm-dy: until 4 ms H runs, so W's scans find no target (1464 exits: 1 ms + k × 2048
    //   for k = 1..=1464). The first exit after 4 ms, at 1 ms + 1465 × 2048 = 4.000320 ms,
    //   finds H ready, preempted in kernel mode (it holds a kernel lock) and not spinning:
    //   yield_to(H) succeeds (pCPU 0 holds G and H) and H becomes pCPU 0's next buddy. G has
    //   run 320 ns, so H is 1 ms − 320 ns of vruntime ahead of G, within the wakeup
    //   granularity (set to 2 ms here, so the margin is wide): H runs at once, at 4.000320 ms.
    let w = program(&[compute(MS), kernel_lock(), Instr::Unlock, compute(FOREVER)]);
    let h = program(&[kernel_lock(), compute(30 * MS), Instr::Unlock, compute(FOREVER)]);
    let doms = || vec![domain("hog", VmType::Hit, vec![hog()]), vm_with_lock("vm", vec![w.clone(), h.clone()])];
    let params = [("wakeup_granularity_us", Value::Int(2000))];
    let (dm, dy) = run_on(fixed_window(2), "kvm-dy", &params, doms(), 100 * MS);
    let (_, cfs) = run_on(fixed_window(2), "cfs", &params, doms(), 100 * MS);
    let (w, h) = (1, 2);

    let first_exit_after_4ms = MS + 1465 * WINDOW;
    assert_eq!(first_exit_after_4ms, 4 * MS + 320);
    assert_eq!(&spans_of(&dy, h)[..2], &[(0, 4 * MS), (first_exit_after_4ms, spans_of(&dy, h)[1].1)]);
    assert_eq!(spans_of(&cfs, h)[1].0, 8 * MS, "without PLE handling H waits for the tick");
    assert!(dy.iter().filter(|s| s.vcpu == h).all(|s| s.pcpu == 0), "the yield moves no vCPU");
    // Up to then both policies made the same decisions.
    assert_eq!(before(&dy, 4 * MS), before(&cfs, 4 * MS));

    assert!(counter(&dm, "kvm_dy.no_target") >= 1464, "no target while H runs");
    assert!(counter(&dm, "kvm_dy.yields") >= 1);
    assert_eq!(counter(&dm, "kvm_dy.esrch"), 0, "pCPU 0 always holds two vCPUs");
    // W gets the lock when its spinning ends: sooner when the holder is boosted.
    let got_lock = |spans: &[Span]| spans.iter().find(|s| s.vcpu == w && s.spinning).unwrap().end;
    assert!(got_lock(&dy) < got_lock(&cfs), "kvm-dy {} ns, cfs {} ns", got_lock(&dy), got_lock(&cfs));
}

#[test]
fn kvm_dy_skips_itself_and_running_blocked_or_user_mode_siblings() {
    // One 4-vCPU VM on 2 pCPUs: R = 0, W = 1, H = 2, U = 3. Insertion: R -> pCPU 0 (6 ms),
    // W -> pCPU 1 (6 ms), H -> pCPU 0 (3 ms), U -> pCPU 1 (3 ms).
    // pCPU 0: H runs first, takes the lock and blocks in I/O for 1 s holding it; R (user-mode
    //   compute) then runs there alone, never preempted.
    // pCPU 1: U (user-mode compute) runs first; the 4 ms tick switches to W (6 < 7 ms), which
    //   spins on the lock; the ticks then alternate U and W every 4 ms.
    // Every one of W's PLE exits scans H (blocked: not ready), R (running: not ready), U
    // (preempted in user mode while W spins in kernel mode) and W itself: no target, so
    // kvm-dy must schedule exactly as cfs does.
    let h = program(&[kernel_lock(), Instr::Io(Dur::Fixed(1_000 * MS)), Instr::Unlock, compute(FOREVER)]);
    let w = program(&[kernel_lock(), Instr::Unlock, compute(FOREVER)]);
    let doms = || vec![vm_with_lock("vm", vec![hog(), w.clone(), h.clone(), hog()])];
    let (dm, dy) = run_on(fixed_window(2), "kvm-dy", &[], doms(), 40 * MS);
    let (_, cfs) = run_on(fixed_window(2), "cfs", &[], doms(), 40 * MS);
    let (r, w, h, u) = (0, 1, 2, 3);

    let exits = vm(&dm, "vm").ple_exits;
    assert!(exits > 9000, "W spins in 5 turns of 4 ms: about 9760 exits, got {exits}");
    assert_eq!(counter(&dm, "kvm_dy.no_target"), exits);
    assert_eq!(counter(&dm, "kvm_dy.yields") + counter(&dm, "kvm_dy.esrch"), 0);
    assert_eq!(dy, cfs);
    assert!(spans_of(&dy, h).is_empty(), "H never runs while blocked");
    assert_eq!(spans_of(&dy, r), vec![(0, 40 * MS)]);
    let p1: Vec<(usize, Time, Time)> =
        dy.iter().filter(|s| s.pcpu == 1).map(|s| (s.vcpu, s.start / MS, s.end / MS)).collect();
    let expected: Vec<(usize, Time, Time)> =
        (0..10).map(|k| (if k % 2 == 0 { u } else { w }, 4 * k, 4 * k + 4)).collect();
    assert_eq!(p1, expected);
}

#[test]
fn a_spinning_sibling_is_eligible_every_other_check() {
    // One pCPU, one 3-vCPU VM: W2 = 0, W1 = 1, H = 2, inserted at vruntimes 6, 3 and 2 ms.
    // H runs first, takes the lock and blocks in I/O holding it. W1 then spins from t = 0;
    // its exits find no target: H is blocked and W2 has never run (not `ready`). At 4 ms the
    // tick switches to W2 (6 < 7 ms), which spins too (behind W1 in the ticket queue).
    // W2's first exit (4 ms + 2048) checks W1 — preempted while spinning, so its toggle
    // flips and it is not eligible this time; the second (4 ms + 4096) yields to W1. Both
    // are on this pCPU: W1 is the next buddy, W2 the skip buddy and leftmost, and W1 is
    // 1 ms − 4096 ns ahead, within the wakeup granularity (2 ms here, for a wide margin), so
    // W1 runs. From then on the two hand the pCPU back and forth after exactly two windows
    // each: their vruntimes move in lockstep and the gap stays under the granularity.
    let h = program(&[kernel_lock(), Instr::Io(Dur::Fixed(1_000 * MS)), Instr::Unlock, compute(FOREVER)]);
    let waiter = program(&[kernel_lock(), Instr::Unlock, compute(FOREVER)]);
    let doms = || vec![vm_with_lock("vm", vec![waiter.clone(), waiter.clone(), h.clone()])];
    let params = [("wakeup_granularity_us", Value::Int(2000))];
    let horizon = 6 * MS;
    let (dm, dy) = run_on(fixed_window(1), "kvm-dy", &params, doms(), horizon);
    let (_, cfs) = run_on(fixed_window(1), "cfs", &params, doms(), 10 * MS);
    let (w2, w1) = (0, 1);

    assert_eq!((dy[0].vcpu, dy[0].start, dy[0].end, dy[0].spinning), (w1, 0, 4 * MS, true));
    let handovers = &dy[1..];
    for (j, s) in handovers.iter().enumerate() {
        let start = 4 * MS + j as Time * 2 * WINDOW;
        assert_eq!(s.vcpu, if j % 2 == 0 { w2 } else { w1 }, "span {j}");
        assert_eq!(s.start, start, "span {j}");
        assert_eq!(s.end, (start + 2 * WINDOW).min(horizon), "span {j}");
        assert!(s.spinning);
    }
    // 2 ms / 4096 ns = 488 whole spans, then one cut by the horizon.
    assert_eq!(handovers.len(), 489);
    // Every span after the first W2 one began with a directed yield; every other exit (W1's
    // 1953 before 4 ms, and the first of each span) found no eligible target.
    assert_eq!(counter(&dm, "kvm_dy.yields"), 488);
    assert_eq!(counter(&dm, "kvm_dy.no_target"), 1953 + 488);
    assert_eq!(vm(&dm, "vm").ple_exits, 488 + 1953 + 488);
    assert_eq!(counter(&dm, "kvm_dy.esrch"), 0);
    // Plain cfs: W2 spins until the 8 ms tick.
    assert_eq!((cfs[1].vcpu, cfs[1].start, cfs[1].end), (w2, 4 * MS, 8 * MS));
}

#[test]
fn yield_to_fails_when_both_queues_hold_one_vcpu_and_the_scan_gives_up_after_three() {
    // Six pCPUs, one 6-vCPU VM, each vCPU alone on its pCPU; IPIs take 100 µs. H = 0 takes
    // the lock and blocks in I/O; W = 1 computes 10 µs, then spins (exits at 10 µs + k ×
    // 2048); S = 2..=5 block in I/O at t = 0 and wake at 1 ms on their own idle pCPUs, whose
    // reschedule IPIs land at 1.1 ms. In between, each of W's exits (k = 484..=532: 49 exits)
    // scans S2, S3, S4 — ready (woken), not spinning, eligible — and yield_to fails with
    // -ESRCH for each (W and the target are alone on their queues); the third failure ends
    // the scan, so S5 is never tried. Failures reschedule nothing: the trace equals cfs's.
    let h = program(&[kernel_lock(), Instr::Io(Dur::Fixed(1_000 * MS)), Instr::Unlock, compute(FOREVER)]);
    let w = program(&[compute(10 * US), kernel_lock(), Instr::Unlock, compute(FOREVER)]);
    let s = program(&[Instr::Io(Dur::Fixed(MS)), compute(FOREVER)]);
    let doms = || vec![vm_with_lock("vm", vec![h.clone(), w.clone(), s.clone(), s.clone(), s.clone(), s.clone()])];
    let host = || vsched_model::HostConfig { ipi_latency_ns: 100 * US, ..fixed_window(6) };
    let (dm, dy) = run_on(host(), "kvm-dy", &[], doms(), 2 * MS);
    let (_, cfs) = run_on(host(), "cfs", &[], doms(), 2 * MS);

    assert_eq!(counter(&dm, "kvm_dy.esrch"), 3 * 49);
    assert_eq!(counter(&dm, "kvm_dy.gave_up"), 49);
    assert_eq!(counter(&dm, "kvm_dy.yields"), 0);
    // Exits at 10 µs + k × 2048 < 2 ms: k = 1..=971.
    assert_eq!(vm(&dm, "vm").ple_exits, 971);
    assert_eq!(counter(&dm, "kvm_dy.no_target"), 971 - 49);
    assert_eq!(dy, cfs);
    for v in 2..=5 {
        assert_eq!(spans_of(&dy, v), vec![(MS + 100 * US, 2 * MS)], "S{v} runs once its IPI lands");
    }
}
