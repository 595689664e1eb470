//! Issue 17 item 4, threads that outnumber vCPUs (`sim/guest_sched.rs`): a thread that
//! blocks hands its vCPU to the next, a running one is preempted at the tick once it has run
//! its CFS slice (unless it is in the kernel with preemption disabled), a woken thread goes
//! to an idle vCPU of its VM, and a barrier wakes a thread whose vCPU runs another. Every
//! expected value is computed by hand from the parameters, on a host with zero machine
//! costs but a 100 µs thread switch, in lockstep (the guest's ticks at 4, 8, 12 ms, ...).

mod common;
use common::*;
use vsched_model::{
    BarrierWait, DomainConfig, Dur, GuestTick, HostConfig, Instr, LockChoice, RunMetrics, Simulation, Time, Until,
    VmType, NS_PER_MS, NS_PER_US,
};

const US: Time = NS_PER_US;
const MS: Time = NS_PER_MS;

/// A finite VM on `vcpus` vCPUs running one thread per program (thread i starts on vCPU
/// i mod vcpus), with guest kernel `tick` and one lock.
fn threaded(vcpus: usize, tick: GuestTick, programs: &[&[Instr]]) -> DomainConfig {
    let mut d = domain("vm", VmType::Hit, programs.iter().map(|p| program(p)).collect());
    d.guest.vcpus = vcpus;
    d.guest.finite = true;
    d.guest.locks = 1;
    DomainConfig { tick, ..d }
}

/// Runs `vm` alone on `pcpus` pCPUs under round robin until it finishes.
fn run_alone(pcpus: usize, vm: DomainConfig) -> RunMetrics {
    let host = HostConfig { thread_switch_ns: 100 * US, ..free_host(pcpus) };
    Simulation::new(host, vec![vm], policy("rr", &[]), 1).run(1_000 * MS, Until::AllDone, &mut |_| true).unwrap()
}

fn completion_ns(m: &RunMetrics) -> Time {
    (vm(m, "vm").completion_s.expect("finished") * 1e9).round() as Time
}

const HZ_250: GuestTick = GuestTick::Tickless { hz: 250, idle_wakes_per_s: 0.0 };

fn compute(ms: Time) -> Instr {
    Instr::Compute(Dur::Fixed(ms * MS))
}

#[test]
fn two_threads_on_one_vcpu_take_turns_at_the_tick() {
    // One vCPU (CFS scale factor 1 + log2(1) = 1), two runnable threads: slice = 6 ms / 2 =
    // 3 ms, checked at each 4 ms tick. A runs 0-4 (6 ms left); B 4.1-8 (6.1 left); A 8.1-12
    // (2.1 left); B 12.1-16 (2.2 left); A 16.1-18.2 and exits; B 18.3-20.5 (the tick at 20
    // finds no one waiting).
    let m = run_alone(1, threaded(1, HZ_250, &[&[compute(10)], &[compute(10)]]));
    assert_eq!(completion_ns(&m), 20 * MS + 500 * US);
    // Without a tick the guest never preempts: A 0-10, B 10.1-20.1.
    let m = run_alone(1, threaded(1, GuestTick::Off, &[&[compute(10)], &[compute(10)]]));
    assert_eq!(completion_ns(&m), 20 * MS + 100 * US);
}

#[test]
fn a_thread_that_blocks_hands_its_vcpu_to_the_next() {
    // A blocks for 5 ms of I/O at once: B runs 0.1-3.1 and exits, the vCPU halts; A's wake
    // at 5 ms wakes the vCPU (no thread switch: it was idle) and A computes 5-6.
    let a: &[Instr] = &[Instr::Io(Dur::Fixed(5 * MS)), compute(1)];
    let m = run_alone(1, threaded(1, GuestTick::Off, &[a, &[compute(3)]]));
    assert_eq!(completion_ns(&m), 6 * MS);
}

#[test]
fn a_woken_thread_goes_to_an_idle_vcpu_of_its_vm() {
    // Two vCPUs on two pCPUs, three threads: T0 and T2 start on vCPU 0, T1 on vCPU 1. T0
    // blocks for 2 ms of I/O, so T2 runs 0.1-10.1 on vCPU 0; T1 computes 0-1 and vCPU 1
    // halts. At 2 ms T0's vCPU is busy and vCPU 1 idle: T0 runs there, 2-7. Done at 10.1 ms
    // (T0 queued behind T2 on vCPU 0 instead would end at 15.2).
    let t0: &[Instr] = &[Instr::Io(Dur::Fixed(2 * MS)), compute(5)];
    let m = run_alone(2, threaded(2, GuestTick::Off, &[t0, &[compute(1)], &[compute(10)]]));
    assert_eq!(completion_ns(&m), 10 * MS + 100 * US);
}

#[test]
fn a_barrier_wakes_a_thread_whose_vcpu_runs_another() {
    // One vCPU: A computes 0-1 and blocks at the barrier; B runs 1.1-4.1 and releases it
    // with an IPI (50 µs), then computes 4.1-5.1. A's wake at 4.15 finds its only vCPU busy:
    // A waits in its queue until B exits, then runs 5.2-6.2.
    let host = HostConfig { thread_switch_ns: 100 * US, ipi_latency_ns: 50 * US, ..free_host(1) };
    let a: &[Instr] = &[compute(1), Instr::Barrier(BarrierWait::Block), compute(1)];
    let b: &[Instr] = &[compute(3), Instr::Barrier(BarrierWait::Block), compute(1)];
    let vm_cfg = threaded(1, GuestTick::Off, &[a, b]);
    let m = Simulation::new(host, vec![vm_cfg], policy("rr", &[]), 1)
        .run(1_000 * MS, Until::AllDone, &mut |_| true)
        .unwrap();
    assert_eq!(completion_ns(&m), 6 * MS + 200 * US);
}

#[test]
fn a_spinning_waiter_burns_its_slice_while_the_thread_it_waits_for_is_queued() {
    // One vCPU, user-mode spinning at the barrier: A computes 0-1 and spins 1-4 until the
    // tick switches to B (4.1-8: 2.1 ms of its 6 left); A spins again 8.1-12; B 12.1-14.2
    // reaches the barrier (A, queued, is released), computes 14.2-15.2 and exits; A runs
    // 15.3-16.3. A spun 3 + 3.9 = 6.9 ms.
    let a: &[Instr] = &[compute(1), Instr::Barrier(BarrierWait::Spin), compute(1)];
    let b: &[Instr] = &[compute(6), Instr::Barrier(BarrierWait::Spin), compute(1)];
    let m = run_alone(1, threaded(1, HZ_250, &[a, b]));
    assert_eq!(completion_ns(&m), 16 * MS + 300 * US);
    assert_eq!((vm(&m, "vm").spin_s * 1e9).round() as Time, 6 * MS + 900 * US);
}

#[test]
fn a_kernel_lock_holder_is_not_preempted_by_its_guest() {
    // A holds a lock for 10 ms, B has 1 ms to do, one vCPU, 3 ms slices. In the kernel
    // (preemption disabled) A keeps the vCPU through the ticks at 4 and 8: A 0-10, B
    // 10.1-11.1. In user mode the tick at 4 switches to B (4.1-5.1), then A 5.2-11.2.
    let hold = |kernel| -> Vec<Instr> {
        vec![Instr::Lock { choice: LockChoice::Fixed(0), kernel }, compute(10), Instr::Unlock]
    };
    let (kernel, user) = (hold(true), hold(false));
    let m = run_alone(1, threaded(1, HZ_250, &[&kernel, &[compute(1)]]));
    assert_eq!(completion_ns(&m), 11 * MS + 100 * US);
    let m = run_alone(1, threaded(1, HZ_250, &[&user, &[compute(1)]]));
    assert_eq!(completion_ns(&m), 11 * MS + 200 * US);
}

#[test]
fn workloads_take_a_threads_parameter() {
    // bsp with 8 threads on 4 vCPUs: 8 × 8 ms of compute per superstep on 4 vCPUs alone on
    // 4 pCPUs, at least 16 ms per step whatever the order; one thread per vCPU needs 8 ms.
    let bsp = |threads: u32| {
        let workload = format!("kind = \"bsp\"\nsupersteps = 10\ncompute_ms = 8\njitter = 0\nthreads = {threads}");
        let toml = free_scenario(4, "name = \"rr\"", &[vm_toml("vm", 4, "", &workload)], "until = \"all_done\"");
        vm(&run(&toml, 1), "vm").completion_s.expect("finished")
    };
    let (one_each, two_each) = (bsp(4), bsp(8));
    assert!((0.080..0.081).contains(&one_each), "{one_each}");
    assert!(two_each >= 0.160, "{two_each}");
    // Threads the scenario cannot mean, or that contradict idle_vcpus, are refused by name.
    let refused = |extra: &str, threads: &str| {
        let workload = format!("kind = \"kernbench\"\nthreads = {threads}");
        let toml = free_scenario(4, "name = \"rr\"", &[vm_toml("vm", 4, extra, &workload)], "horizon_s = 1");
        vsched::Scenario::parse(&toml).err().expect("refused").to_string()
    };
    let e = refused("", "5000");
    assert!(e.starts_with("vm[0].workload.threads: expected an integer in 0..=4096"), "{e}");
    let e = refused("idle_vcpus = 1", "2");
    assert!(e.starts_with("vm[0].idle_vcpus: expected no idle_vcpus beside workload.threads"), "{e}");
}

#[test]
fn oversubscribed_guests_run_to_completion_under_every_policy() {
    // Threads beyond vCPUs in every shape the workloads make (an oversubscribed libgomp
    // program, a make -j 4 per vCPU with paravirtual kernel locks, kernel spinlock threads
    // 5 on 2 vCPUs) beside a hog, on a host with every machine cost: every policy schedules
    // them to the end, with the engine's invariants checked after each event in debug builds.
    let vms = [
        vm_toml(
            "omp",
            4,
            "type = \"CON\"",
            "kind = \"bsp\"\nsupersteps = 20\ncompute_ms = 2\nthreads = 10\nruntime = \"libgomp\"",
        ),
        vm_toml("make", 2, "type = \"CON\"\npv_spinlocks = true", "kind = \"kernbench\"\njobs = 24\njob_ms = 5"),
        vm_toml(
            "locks",
            2,
            "type = \"CON\"",
            "kind = \"spinlock\"\niterations = 300\nthreads = 5\nmode = \"kernel\"\ncompute_us = 20",
        ),
        vm_toml("hog", 2, "", HOG),
    ];
    for info in vsched_policies::REGISTRY {
        let toml = scenario(4, &format!("name = \"{}\"", info.name), &vms, "horizon_s = 30\nuntil = \"all_done\"");
        let m = run(&toml, 3);
        for name in ["omp", "make", "locks"] {
            assert!(vm(&m, name).completion_s.is_some(), "{name} unfinished under {}", info.name);
        }
    }
}
