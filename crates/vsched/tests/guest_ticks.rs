//! Issue 17 item 4, living guest kernels: the ticks of a running vCPU, the timer wake-ups of
//! a halted one (tickless or periodic), a thread woken while its vCPU is up for its timer,
//! and the rescheduling IPI a thread pays to wake a halted sibling. Every expected value
//! below is computed by hand from the parameters, on a host with zero machine costs but the
//! ones named, in lockstep (every domain's tick grid and idle timer at phase 0).

mod common;
use common::*;
use vsched_model::{
    BarrierWait, DomainConfig, Dur, GuestTick, HostConfig, Instr, RunMetrics, Simulation, Time, Until, VmType,
    NS_PER_MS, NS_PER_US,
};

const US: Time = NS_PER_US;
const MS: Time = NS_PER_MS;

/// A finite one-vCPU VM running `steps`, with guest kernel `tick`.
fn vm_of(name: &str, tick: GuestTick, steps: &[Instr]) -> DomainConfig {
    let mut d = domain(name, VmType::Hit, vec![program(steps)]);
    d.guest.finite = true;
    DomainConfig { tick, ..d }
}

fn run_on(host: HostConfig, domains: Vec<DomainConfig>, policy_name: &str, horizon: Time) -> RunMetrics {
    let until = if domains.iter().any(|d| d.guest.finite) { Until::AllDone } else { Until::Horizon };
    Simulation::new(host, domains, policy(policy_name, &[]), 1).run(horizon, until, &mut |_| true).unwrap()
}

fn completion_ns(m: &RunMetrics, name: &str) -> Time {
    (vm(m, name).completion_s.expect("finished") * 1e9).round() as Time
}

const HZ_250: GuestTick = GuestTick::Tickless { hz: 250, idle_wakes_per_s: 0.0 };

#[test]
fn a_running_vcpu_loses_one_handler_per_tick() {
    // 100 ms of compute from t = 0; ticks every 4 ms at 4, 8, ..., each stopping the guest
    // for 10 µs. The tick at 100 ms still comes before the end (24 ticks so far leave
    // 0.24 ms to do), so 25 ticks: done at 100 ms + 25 × 10 µs.
    let host = HostConfig { timer_irq_ns: 10 * US, ..free_host(1) };
    let m = run_on(host.clone(), vec![vm_of("a", HZ_250, &[Instr::Compute(Dur::Fixed(100 * MS))])], "rr", 200 * MS);
    assert_eq!(completion_ns(&m, "a"), 100 * MS + 250 * US);
    assert_eq!(vm(&m, "a").guest_ticks, 25);
    // The same guest with its kernel silent: exactly 100 ms.
    let m = run_on(host, vec![vm_of("a", GuestTick::Off, &[Instr::Compute(Dur::Fixed(100 * MS))])], "rr", 200 * MS);
    assert_eq!((completion_ns(&m, "a"), vm(&m, "a").guest_ticks), (100 * MS, 0));
}

#[test]
fn a_vcpu_preempted_across_a_tick_takes_one_at_entry() {
    // One pCPU, round robin with 10 ms slices: `a` (20 ms of compute, 250 Hz, 10 µs per tick)
    // and a silent hog `b`. a runs 0-10 ms (ticks at 4 and 8: 9.98 ms done); b 10-20;
    // a at 20 ms owes the tick of 12-20 (one, missed ones are not replayed): guest code from
    // 20.01, ticks at 24 and 28, so 10.02 ms more would end at 30.05, but the slice ends at
    // 30 with 0.05 ms left; b 30-40; a at 40 owes one tick again and ends at 40.06 ms.
    let host = HostConfig { timer_irq_ns: 10 * US, ..free_host(1) };
    let a = vm_of("a", HZ_250, &[Instr::Compute(Dur::Fixed(20 * MS))]);
    let b = domain("b", VmType::Hit, vec![hog()]);
    let m = run_on(host, vec![a, b], "rr", 100 * MS);
    assert_eq!(completion_ns(&m, "a"), 40 * MS + 60 * US);
    assert_eq!(vm(&m, "a").guest_ticks, 6);
}

/// One pCPU shared by a silent CPU hog and an idle VM (its one thread exits at once, the
/// vCPU halts) whose kernel is `tick`, timer interrupts costing 50 µs, for 1 s under Credit.
fn idle_beside_hog(tick: GuestTick) -> RunMetrics {
    let host = HostConfig { timer_irq_ns: 50 * US, ..free_host(1) };
    let mut idle = vm_of("idle", tick, &[]);
    idle.guest.finite = false;
    let hog_vm = domain("hog", VmType::Hit, vec![hog()]);
    run_on(host, vec![idle, hog_vm], "credit", 1_000 * MS)
}

#[test]
fn a_halted_tickless_vcpu_wakes_at_its_idle_timer_rate() {
    // Idle timer every 10 ms: wakes at 10, 20, ..., 1000 ms (100). Each goes through Credit's
    // wake, preempts the hog at once (BOOST) and runs the 50 µs handler; the last one, at
    // the horizon itself, has no time left.
    let m = idle_beside_hog(GuestTick::Tickless { hz: 250, idle_wakes_per_s: 100.0 });
    let idle = vm(&m, "idle");
    assert_eq!((idle.timer_wakes, idle.guest_ticks), (100, 0));
    assert!((idle.cpu_s - 99.0 * 50e-6).abs() < 1e-12, "idle ran {} s", idle.cpu_s);
    assert!((vm(&m, "hog").cpu_s - (1.0 - 99.0 * 50e-6)).abs() < 1e-12);
}

#[test]
fn a_halted_periodic_vcpu_wakes_at_every_tick() {
    // No NO_HZ: the halted vCPU wakes at every tick instant, 4, 8, ..., 1000 ms (250).
    let m = idle_beside_hog(GuestTick::Periodic { hz: 250 });
    let idle = vm(&m, "idle");
    assert_eq!(idle.timer_wakes, 250);
    assert!((idle.cpu_s - 249.0 * 50e-6).abs() < 1e-12, "idle ran {} s", idle.cpu_s);
    // A silent kernel: the vCPU halts once and never runs again.
    let m = idle_beside_hog(GuestTick::Off);
    assert_eq!((vm(&m, "idle").timer_wakes, vm(&m, "idle").cpu_s), (0, 0.0));
}

#[test]
fn a_thread_woken_during_its_vcpus_timer_handler_goes_on_after_it() {
    // The thread sleeps 10.02 ms (I/O), then computes 1 ms. Its vCPU halts at 0 and wakes
    // for its idle timer at 10 ms (100/s); the handler runs 10-10.05 ms; the I/O completes
    // at 10.02, inside it: the vCPU does not halt again, the thread computes from 10.05 and
    // exits at 11.05 ms. (Had the wake been lost, the thread would sleep for ever.)
    let host = HostConfig { timer_irq_ns: 50 * US, ..free_host(1) };
    let tick = GuestTick::Tickless { hz: 250, idle_wakes_per_s: 100.0 };
    let steps = [Instr::Io(Dur::Fixed(10 * MS + 20 * US)), Instr::Compute(Dur::Fixed(MS))];
    let m = run_on(host, vec![vm_of("a", tick, &steps)], "credit", 100 * MS);
    assert_eq!(completion_ns(&m, "a"), 11 * MS + 50 * US);
    assert_eq!(vm(&m, "a").timer_wakes, 1);
}

#[test]
fn a_wake_that_arrives_after_its_thread_went_on_is_dropped() {
    // Two pCPUs, Credit, IPIs of 100 µs, timer handlers of 50 µs, idle timers every 10 ms
    // (ticks of running vCPUs once a second: none here). vCPU 0 computes 1 ms and halts at
    // the barrier; its idle timer wakes it at 10 ms, its idle pCPU schedules it at 10.1 ms
    // (the tickle's IPI) and it runs the handler to 10.15 ms. vCPU 1 reaches the barrier at
    // 10.12 ms, during that handler: vCPU 0's thread is ready, and the rescheduling IPI's
    // wake-up will land at 10.22 ms. The thread goes on at 10.15 ms, computes 10 µs and
    // exits at 10.16 ms; the wake-up that lands after that is stale and must not revive the
    // exited thread. vCPU 1 computes 1 ms after the barrier: the VM ends at 11.12 ms.
    let host = HostConfig { timer_irq_ns: 50 * US, ipi_latency_ns: 100 * US, ..free_host(2) };
    let tick = GuestTick::Tickless { hz: 1, idle_wakes_per_s: 100.0 };
    let steps = |first: Time, then: Time| {
        program(&[
            Instr::Compute(Dur::Fixed(first)),
            Instr::Barrier(BarrierWait::Block),
            Instr::Compute(Dur::Fixed(then)),
        ])
    };
    let mut d = domain("a", VmType::Hit, vec![steps(MS, 10 * US), steps(10 * MS + 120 * US, MS)]);
    d.guest.finite = true;
    let m = run_on(host, vec![DomainConfig { tick, ..d }], "credit", 100 * MS);
    assert_eq!(completion_ns(&m, "a"), 11 * MS + 120 * US);
    assert_eq!(vm(&m, "a").timer_wakes, 1);
}

#[test]
fn waking_a_halted_barrier_waiter_costs_the_waker_an_exit_per_ipi() {
    // Two vCPUs on two pCPUs: vCPU 0 computes 1 ms and blocks at the barrier; vCPU 1
    // computes 2 ms, releases it, then computes 5 ms. Its rescheduling IPI to the halted
    // vCPU 0 exits (1 µs) without IPI virtualization: vCPU 1 ends at 7.001 ms, vCPU 0 (woken
    // 2 µs later, 1 ms of work) at 3.002 ms.
    let steps = |first: Time, then: Time| {
        program(&[
            Instr::Compute(Dur::Fixed(first)),
            Instr::Barrier(BarrierWait::Block),
            Instr::Compute(Dur::Fixed(then)),
        ])
    };
    for (ipi_virtualization, end) in [(false, 7 * MS + US), (true, 7 * MS)] {
        let host = HostConfig { vm_exit_ns: US, ipi_latency_ns: 2 * US, ipi_virtualization, ..free_host(2) };
        let mut d = domain("a", VmType::Hit, vec![steps(MS, MS), steps(2 * MS, 5 * MS)]);
        d.guest.finite = true;
        let m = run_on(host, vec![d], "credit", 100 * MS);
        assert_eq!(completion_ns(&m, "a"), end, "IPI virtualization {ipi_virtualization}");
    }
}

#[test]
fn scenarios_default_to_a_tickless_250_hz_guest() {
    let vm_table = |extra: &str| vm_toml("a", 2, extra, "kind = \"cpu_hog\"");
    let ticks = |extra: &str| {
        vsched::Scenario::parse(&scenario(2, "name = \"credit\"", &[vm_table(extra)], "")).unwrap().vms[0].tick
    };
    assert_eq!(ticks(""), GuestTick::Tickless { hz: 250, idle_wakes_per_s: 10.3 });
    assert_eq!(ticks("guest_tick = \"periodic\"\nguest_hz = 1000"), GuestTick::Periodic { hz: 1000 });
    assert_eq!(ticks("guest_tick = \"off\""), GuestTick::Off);
    let refused = |extra: &str| match vsched::Scenario::parse(&scenario(2, "name = \"credit\"", &[vm_table(extra)], ""))
    {
        Ok(_) => panic!("{extra:?} was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(refused("guest_tick = \"sometimes\"").contains("vm[0].guest_tick"));
    assert!(refused("guest_hz = 0").contains("vm[0].guest_hz"));
    assert!(refused("idle_wakes_per_s = 300").contains("vm[0].idle_wakes_per_s"));
    assert!(refused("guest_tick = \"periodic\"\nidle_wakes_per_s = 5").contains("vm[0].idle_wakes_per_s"));
}
