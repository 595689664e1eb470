//! Issue 17 item 2: the machine's costs (VM exits, interrupt delivery, wake-up from idle),
//! each in isolation on an otherwise free host in lockstep, values computed from the
//! parameters; and the hardware presets.

mod common;
use common::*;
use vsched_model::{
    hardware, Dur, HostConfig, Instr, LockChoice, LockKind, Simulation, Time, Until, Value, VmType, HARDWARE, NS_PER_US,
};

const US: Time = NS_PER_US;

/// `free_host` with the given exit cost and interrupt hardware.
fn host(pcpus: usize, vm_exit_ns: Time, posted: bool) -> HostConfig {
    HostConfig { vm_exit_ns, posted_interrupts: posted, ipi_virtualization: posted, ..free_host(pcpus) }
}

/// Two vCPUs on two pCPUs under `rr`: vCPU 0 takes a kernel lock and computes 1 ms inside
/// it; vCPU 1 then spins on the lock for that 1 ms. Returns vCPU 1's pause-loop exits.
fn ple_exits(vm_exit_ns: Time) -> u64 {
    let lock = |kernel| Instr::Lock { choice: LockChoice::Fixed(0), kernel };
    let holder = program(&[lock(true), Instr::Compute(Dur::Fixed(1000 * US)), Instr::Unlock]);
    let waiter = program(&[Instr::Compute(Dur::Fixed(1)), lock(true), Instr::Unlock]);
    let mut d = domain("vm", VmType::Hit, vec![holder, waiter]);
    d.guest.locks = 1;
    d.guest.lock_kind = LockKind::Ticket;
    d.guest.finite = true;
    let m = Simulation::new(host(2, vm_exit_ns, true), vec![d], policy("rr", &[]), 1)
        .run(10_000 * US, Until::AllDone, &mut |_| true)
        .unwrap();
    vm(&m, "vm").ple_exits
}

#[test]
fn each_pause_loop_exit_costs_the_spinner_one_exit_before_its_window_restarts() {
    // The window is 4096 cycles at 2 GHz = 2,048 ns; the waiter spins from 1 ns to 1 ms.
    // Free exits: one per window; exits of 1 µs: one per window + exit.
    let window = 2_048;
    let spin = 1000 * US - 1;
    assert_eq!(ple_exits(0), spin / window);
    assert_eq!(ple_exits(US), spin / (window + US));
}

/// vCPU 0 computes 10 µs, then interrupts vCPU 1 (`ipi_sync`) and waits for its
/// acknowledgement; vCPU 1 computes 100 µs. Returns (the VM's spin, vCPU 1's finish) in ns.
fn ipi_costs(vm_exit_ns: Time, posted: bool) -> (Time, Time) {
    let sender = program(&[Instr::Compute(Dur::Fixed(10 * US)), Instr::IpiSync]);
    let target = program(&[Instr::Compute(Dur::Fixed(100 * US))]);
    let mut d = domain("vm", VmType::Hit, vec![sender, target]);
    d.guest.finite = true;
    // No PLE: the sender's 3 µs wait would otherwise reach the 2 µs window.
    let host =
        HostConfig { ipi_latency_ns: 2 * US, ipi_handler_ns: US, ple_window_cycles: 0, ..host(2, vm_exit_ns, posted) };
    let m =
        Simulation::new(host, vec![d], policy("rr", &[]), 1).run(10_000 * US, Until::AllDone, &mut |_| true).unwrap();
    let v = vm(&m, "vm");
    ((v.spin_s * 1e9).round() as Time, (v.completion_s.unwrap() * 1e9).round() as Time)
}

#[test]
fn an_ipi_costs_exits_on_both_sides_unless_the_hardware_posts_it() {
    // No posted interrupts, no IPI virtualization, exits of 1 µs: the sender traps on its
    // ICR write (1 µs, not spinning), the IPI travels 2 µs and the target exits (1 µs) to
    // have it injected: the sender spins 3 µs. The target loses its exit and its 1 µs handler.
    assert_eq!(ipi_costs(US, false), (3 * US, 102 * US));
    // Posted interrupts and IPI virtualization: no exit on either side.
    assert_eq!(ipi_costs(US, true), (2 * US, 101 * US));
    // Free exits: the hardware does not matter.
    assert_eq!(ipi_costs(0, false), ipi_costs(0, true));
}

#[test]
fn a_wake_up_that_tickles_an_idle_pcpu_waits_for_it_to_leave_its_idle_state() {
    // One vCPU does 100 µs of I/O, then computes; its pCPU idles meanwhile, and the wake-up
    // reaches it through an IPI (2 µs) and its idle state's exit latency.
    let io_then_compute = program(&[Instr::Io(Dur::Fixed(100 * US)), Instr::Compute(Dur::Fixed(10 * US))]);
    for idle_wake_ns in [0, 10 * US] {
        let host = HostConfig { ipi_latency_ns: 2 * US, idle_wake_ns, ..free_host(1) };
        let mut d = domain("io", VmType::Hit, vec![io_then_compute.clone()]);
        d.guest.finite = true;
        let m = Simulation::new(host, vec![d], policy("rr", &[]), 1)
            .run(10_000 * US, Until::AllDone, &mut |_| true)
            .unwrap();
        let io = vm(&m, "io");
        assert_eq!(io.wake_latency_us_mean, Some((2 * US + idle_wake_ns) as f64 / 1e3));
        let done_ns = (io.completion_s.unwrap() * 1e9).round() as Time;
        assert_eq!(done_ns, 112 * US + idle_wake_ns);
    }
}

#[test]
fn presets_set_the_era_s_costs_and_the_scenario_overrides_each() {
    let nehalem = hardware("nehalem-2010").unwrap();
    // 2,000 cycles (SplitX, Xeon X5570) at 2.8 GHz.
    assert_eq!(nehalem.vm_exit_ns, 714);
    assert!(!nehalem.posted_interrupts && !hardware("skylake-2017").unwrap().ipi_virtualization);
    assert!(hardware("sapphire-2023").unwrap().ipi_virtualization);
    assert_eq!(HostConfig::default().vm_exit_ns, nehalem.vm_exit_ns, "the default era is the seeds'");
    let text = |extra: &str| {
        scenario(2, "name = \"rr\"", &[vm_toml("hog", 1, "", HOG)], "horizon_s = 0.01").replacen(
            "pcpus = 2\n",
            &format!("pcpus = 2\n{extra}\n"),
            1,
        )
    };
    let built = |extra: &str| vsched::Scenario::parse(&text(extra)).unwrap().host;
    assert_eq!(built("hardware = \"sapphire-2023\"").idle_wake_ns, 2 * US);
    let custom = built("hardware = \"sapphire-2023\"\nidle_wake_us = 7\nposted_interrupts = false");
    assert_eq!((custom.idle_wake_ns, custom.posted_interrupts, custom.cpu_ghz), (7 * US, false, 2.4));
    let Err(err) = vsched::Scenario::parse(&text("hardware = \"pentium\"")) else { panic!("an unknown era") };
    let err = err.to_string();
    assert!(err.contains("host.hardware") && HARDWARE.iter().all(|h| err.contains(h.name)), "{err}");
}

/// Three vCPUs of one VM, each computing 10 ms, on two pCPUs under 1 ms round robin, with
/// switches of 10 µs and migrations of `migration_ns` beyond them. Returns the run's
/// migrations and the CPU time the vCPUs were given beyond their 30 ms of work, in ns.
fn switching_costs(migration_ns: Time) -> (u64, u64, f64) {
    let work = || program(&[Instr::Compute(Dur::Fixed(10_000 * US))]);
    let mut d = domain("vm", VmType::Hit, vec![work(), work(), work()]);
    d.guest.finite = true;
    let host = HostConfig { context_switch_ns: 10 * US, migration_ns, ..free_host(2) };
    let m = Simulation::new(host, vec![d], policy("rr", &[("slice_us", Value::Int(1000))]), 1)
        .run(100_000 * US, Until::AllDone, &mut |_| true)
        .unwrap();
    let given_ns = vm(&m, "vm").cpu_s * 1e9;
    (m.host.context_switches, m.host.migrations, given_ns - 30_000.0 * US as f64)
}

#[test]
fn a_switch_onto_another_pcpu_costs_the_migration_beyond_the_switch() {
    for migration_ns in [0, 50 * US] {
        let (switches, migrations, overhead_ns) = switching_costs(migration_ns);
        assert!(migrations > 0, "three vCPUs on two pCPUs under round robin migrate");
        let expected = (switches * 10 * US + migrations * migration_ns) as f64;
        assert!((overhead_ns - expected).abs() < 1.0, "{migration_ns}: {overhead_ns} ns against {expected} ns");
    }
}
