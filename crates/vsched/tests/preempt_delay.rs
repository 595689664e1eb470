//! Delayed preemption (`sim/preempt_delay.rs`): a reschedule of a vCPU inside a guest-marked
//! critical section waits until the section ends, or until the bound.
//!
//! Shared set-up: one pCPU without overheads under `rr` with 100 µs slices; one VM whose
//! vCPU 0 (H) takes a kernel lock at 0, holds it for 150 µs of computing, then computes for
//! ever, and whose vCPU 1 (G) computes for ever. `rr` runs H first; its slice ends at
//! 100 µs, inside the section.

mod common;
use common::*;
use vsched_model::{
    Dur, HostConfig, Instr, LockChoice, Paravirt, RunMetrics, Simulation, Span, Time, Until, Value, VmType, FOREVER,
    NS_PER_US,
};

const US: Time = NS_PER_US;

fn run(marked: bool, delay_us: Option<Time>) -> (RunMetrics, Vec<(usize, Time, Time)>) {
    let host = HostConfig { preempt_delay_ns: delay_us.map(|d| d * US), ..free_host(1) };
    let holder = program(&[
        Instr::Lock { choice: LockChoice::Fixed(0), kernel: true },
        Instr::Compute(Dur::Fixed(150 * US)),
        Instr::Unlock,
        Instr::Compute(Dur::Fixed(FOREVER)),
    ]);
    let mut vm = domain("vm", VmType::Hit, vec![holder, hog()]);
    vm.guest.locks = 1;
    vm.pv = Paravirt { critical_sections: marked, ..Default::default() };
    let mut sim = Simulation::new(host, vec![vm], policy("rr", &[("slice_us", Value::Int(100))]), 1);
    sim.enable_trace(1000);
    let m = sim.run(400 * US, Until::Horizon, &mut |_| true).unwrap();
    let spans = sim.take_trace().unwrap().spans().iter().map(|s: &Span| (s.vcpu, s.start, s.end)).collect();
    (m, spans)
}

fn counts(m: &RunMetrics) -> (u64, u64, u64, u64) {
    let v = vm(m, "vm");
    (v.preempt_delays, v.preempt_delays_completed, v.preempt_delays_expired, v.lock_holder_preemptions)
}

#[test]
fn a_marked_section_is_not_preempted_if_it_ends_within_the_bound() {
    // Without the delay H is preempted at 100 µs holding the lock, and finishes its section
    // on its next turn (200 → 250 µs).
    let (m, spans) = run(true, None);
    assert_eq!(&spans[..3], &[(0, 0, 100 * US), (1, 100 * US, 200 * US), (0, 200 * US, 300 * US)]);
    assert_eq!(counts(&m), (0, 0, 0, 1));
    // A bound of 100 µs: the slice end at 100 µs is put off; the section ends at 150 µs and
    // the guest yields at once, so G runs from 150 µs for its 100 µs slice.
    let (m, spans) = run(true, Some(100));
    assert_eq!(&spans[..3], &[(0, 0, 150 * US), (1, 150 * US, 250 * US), (0, 250 * US, 350 * US)]);
    assert_eq!(counts(&m), (1, 1, 0, 0));
}

#[test]
fn the_bound_cuts_a_long_section_short_and_an_unmarked_guest_gets_no_delay() {
    // A bound of 20 µs: the section still has 30 µs to go at 120 µs, so H is preempted there,
    // holding the lock; it finishes the section 100 µs later, on its next turn.
    let (m, spans) = run(true, Some(20));
    assert_eq!(&spans[..2], &[(0, 0, 120 * US), (1, 120 * US, 220 * US)]);
    assert_eq!(counts(&m), (1, 0, 1, 1));
    // A guest that does not mark its sections gets nothing from the host's option.
    let (m, spans) = run(false, Some(100));
    assert_eq!(spans, run(true, None).1);
    assert_eq!(counts(&m), (0, 0, 0, 1));
}

#[test]
fn the_kvm_policies_turn_the_delay_on_with_a_parameter() {
    // kvm-dy's `preempt_delay_us` reaches the host (`Policy::preempt_delay_ns`). Same VM with
    // a 10 ms section, under kvm-dy (`tunable_scaling = "none"`: 3 ms slices, 4 ms tick).
    // Insertion puts H at 6 ms of vruntime and G at 3 ms, so G runs first; the 4 ms tick
    // switches to H (6 < 7 ms), which takes the lock at 4 ms.
    // - No delay: the 8 ms tick preempts H (4 ms run > its slice, 10 > 7 ms) in its section,
    //   and so does the 16 ms one (H back at 12 ms, 4 more ms); H ends the section at 22 ms.
    // - A 50 ms bound: the 8 ms reschedule is put off (and the 12 ms one keeps that grace);
    //   the section ends at 14 ms and H yields there: one delay, completed.
    let holder = program(&[
        Instr::Lock { choice: LockChoice::Fixed(0), kernel: true },
        Instr::Compute(Dur::Fixed(10_000 * US)),
        Instr::Unlock,
        Instr::Compute(Dur::Fixed(FOREVER)),
    ]);
    let runs = |delay: i64| {
        let mut vm = domain("vm", VmType::Hit, vec![holder.clone(), hog()]);
        vm.guest.locks = 1;
        vm.pv = Paravirt { critical_sections: true, ..Default::default() };
        let params = [("tunable_scaling", Value::Str("none".into())), ("preempt_delay_us", Value::Int(delay))];
        let mut sim = Simulation::new(free_host(1), vec![vm], policy("kvm-dy", &params), 1);
        sim.enable_trace(1000);
        let m = sim.run(30_000 * US, Until::Horizon, &mut |_| true).unwrap();
        let h: Vec<(Time, Time)> =
            sim.take_trace().unwrap().spans().iter().filter(|s| s.vcpu == 0).map(|s| (s.start, s.end)).collect();
        (m, h)
    };
    let (m, h) = runs(0);
    assert_eq!(counts(&m), (0, 0, 0, 2));
    assert_eq!(&h[..2], &[(4_000 * US, 8_000 * US), (12_000 * US, 16_000 * US)]);
    let (m, h) = runs(50_000);
    assert_eq!(counts(&m), (1, 1, 0, 0));
    assert_eq!(h[0], (4_000 * US, 14_000 * US));
}
