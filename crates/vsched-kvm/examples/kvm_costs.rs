//! What real vCPUs cost on this host: the figures docs/real-vcpus.md cites.
//!
//! `cargo run --release -p vsched-kvm --example kvm_costs` prints the calibrated TSC rate;
//! p50/p90 of stopping a vCPU in guest code and of starting one up to its first guest
//! instruction (the guest notes the TSC when it notices it resumed; guest and host read one
//! TSC); how often a vCPU never stopped still sees a descheduling gap (host interruptions
//! longer than the threshold); what a switch between two vCPUs costs the vCPU switched in,
//! on one host CPU and migrating at every switch; and a 2-vCPU ticket-spinlock VM's rate
//! when alone, over several runs, since the host is shared and noisy.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use vsched_kvm::guest_code::DESCHEDULED_GAP_NS;
use vsched_kvm::machine::tsc::rdtsc;
use vsched_kvm::machine::{kvm_available, KvmBackend};
use vsched_kvm::{Backend, BackendEvent, MachineSettings, VmSpec};
use vsched_model::{GuestSpec, Params, Value};
use vsched_workloads::Ranks;

const LIMITS: MachineSettings = MachineSettings { memory_per_vm_bytes: 64 << 20, ple: None };
const ROUNDS: usize = 300;
const SPINLOCK_RUNS: usize = 5;

fn main() {
    if let Err(e) = kvm_available() {
        eprintln!("kvm_costs: {e}");
        std::process::exit(2);
    }
    let cpus = host_cpus();
    let (scheduler_cpu, vcpu_cpu) = (cpus[0], *cpus.last().expect("a CPU"));
    pin_self(scheduler_cpu);
    println!(
        "host: {} CPUs usable; this thread on CPU {scheduler_cpu}, the measured vCPU on CPU {vcpu_cpu}",
        cpus.len()
    );

    let hog = workload("cpu_hog", 1, &[]);
    let mut backend =
        KvmBackend::new(&[VmSpec::alone("hog", 0, &hog, 0)], &LIMITS, 1).unwrap_or_else(|e| fail(&e.to_string()));
    let hz = backend.tsc_hz();
    println!("TSC: {:.3} MHz (calibrated against CLOCK_MONOTONIC over 50 ms)", hz as f64 / 1e6);

    let (mut stops, mut starts, mut unseen) = (Vec::new(), Vec::new(), 0);
    for _ in 0..ROUNDS {
        let before_start = rdtsc();
        backend.start(0, vcpu_cpu).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let resumed = backend.resumed_at(0);
        let t = Instant::now();
        backend.stop(0).unwrap();
        let stop_us = t.elapsed().as_secs_f64() * 1e6;
        // A guest that did not resume within the 2 ms (its thread waited for the busy host
        // CPU) was never in guest code: neither figure applies to that round.
        if resumed > before_start {
            starts.push((resumed - before_start) as f64 / hz as f64 * 1e6);
            stops.push(stop_us);
        } else {
            unseen += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let left_out =
        if unseen > 0 { format!(" ({unseen} rounds where the guest had not resumed left out)") } else { String::new() };
    println!("stop (kick to out of guest code), {} rounds: {}{left_out}", stops.len(), percentiles(&mut stops));
    println!("start to first guest instruction, {} rounds: {}", starts.len(), percentiles(&mut starts));

    let (gaps_before, cpu_before, counted_before) =
        (backend.descheduled_gaps(0), backend.cpu_time_ns(0), backend.counters(0).compute_cycles);
    backend.start(0, vcpu_cpu).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    backend.stop(0).unwrap();
    let gaps = backend.descheduled_gaps(0) - gaps_before - 1; // the first: it resumed
    let thread_ms = backend.cpu_time_ns(0).zip(cpu_before).map_or(f64::NAN, |(a, b)| (a - b) as f64 / 1e6);
    let counted_ms = (backend.counters(0).compute_cycles - counted_before) as f64 / hz as f64 * 1e3;
    println!(
        "a vCPU run 1 s without a stop: its thread ran {thread_ms:.1} ms, its guest counted {counted_ms:.1} ms of \
         compute, and saw {gaps} gaps > {} µs (host preemptions and interrupts)",
        DESCHEDULED_GAP_NS / 1000
    );
    drop(backend);

    println!("a switch between two vCPUs, what the one switched in loses:");
    for migrate in [false, true] {
        switch_cost(&cpus, Duration::from_millis(10), migrate);
    }

    spinlock_alone(vcpu_cpu, &cpus);
}

/// A 2-vCPU ticket-spinlock VM (the spinlock workload's defaults, user mode), each vCPU on
/// its own host CPU, run to completion `SPINLOCK_RUNS` times.
fn spinlock_alone(vcpu_cpu: usize, cpus: &[usize]) {
    let iterations = 4000;
    let guest = workload("spinlock", 2, &[("iterations", Value::Int(iterations)), ("mode", Value::Str("user".into()))]);
    let (mut rates, mut spinning, mut share) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..SPINLOCK_RUNS {
        let vms = [VmSpec::alone("spinlock", 0, &guest, 0)];
        let mut backend = KvmBackend::new(&vms, &LIMITS, run as u64).unwrap_or_else(|e| fail(&e.to_string()));
        let cpu_before: Vec<u64> = (0..2).map(|v| backend.cpu_time_ns(v).unwrap_or(0)).collect();
        let began = Instant::now();
        backend.start(0, cpus[0]).unwrap();
        backend.start(1, vcpu_cpu).unwrap();
        let mut left = 2;
        while left > 0 {
            match backend.next_event(began + Duration::from_secs(60)) {
                Some(BackendEvent::Finished { .. }) => left -= 1,
                Some(BackendEvent::Failed { message, .. }) => fail(&message),
                Some(other) => fail(&format!("a user-mode spinlock guest does not {other:?}")),
                None => fail("the spinlock VM did not finish within 60 s"),
            }
        }
        let wall = began.elapsed().as_secs_f64();
        let c: Vec<_> = (0..2).map(|v| backend.counters(v)).collect();
        let acquisitions: u64 = c.iter().map(|c| c.acquisitions).sum();
        let spin: u64 = c.iter().map(|c| c.spin_cycles).sum();
        let ran: u64 = c.iter().map(|c| c.spin_cycles + c.compute_cycles).sum();
        let thread_ns: u64 = (0..2).map(|v| backend.cpu_time_ns(v).unwrap_or(0) - cpu_before[v]).sum();
        share.push(100.0 * thread_ns as f64 / 1e9 / (2.0 * wall));
        rates.push(acquisitions as f64 / wall);
        spinning.push(100.0 * spin as f64 / ran as f64);
    }
    println!(
        "spinlock alone (2 vCPUs on CPUs {} and {vcpu_cpu}, ticket, user mode, compute 50 µs ± 20 %, critical \
         section 10 µs, 1 lock, {iterations} iterations each), {SPINLOCK_RUNS} runs:",
        cpus[0]
    );
    println!("  acquisitions/s: {}", spread(&mut rates, 0));
    println!("  spinning, % of running: {}", spread(&mut spinning, 1));
    // Below 100 % the host's other processes took the rest: the rate is this host's today.
    println!("  CPU the vCPU threads got, % of their two CPUs: {}", spread(&mut share, 1));
}

/// Two 1-vCPU hogs take turns for `slice` each, `SWITCHES` times: on one host CPU, or
/// (`migrate`) each turn on the other of two. Prints, per switch, how much of the time the
/// scheduler gave a vCPU its thread did not get (the host's doing) and its guest did not
/// count as executing (the thread's and the guest's entry, including the host's and the
/// virtualization's work at each entry).
fn switch_cost(cpus: &[usize], slice: Duration, migrate: bool) {
    const SWITCHES: usize = 100;
    let hog = workload("cpu_hog", 1, &[]);
    let vms = [VmSpec::alone("a", 0, &hog, 0), VmSpec::alone("b", 1, &hog, 1)];
    let mut backend = KvmBackend::new(&vms, &LIMITS, 1).unwrap_or_else(|e| fail(&e.to_string()));
    let hz = backend.tsc_hz() as f64;
    let cpu_time = |b: &KvmBackend, v| b.cpu_time_ns(v).unwrap_or(0) as f64;
    let before = [cpu_time(&backend, 0), cpu_time(&backend, 1)];
    let mut given_ns = [0.0f64; 2];
    for turn in 0..SWITCHES {
        let v = turn % 2;
        let cpu = if migrate { cpus[turn % cpus.len()] } else { cpus[cpus.len() - 1] };
        let t = Instant::now();
        backend.start(v, cpu).unwrap();
        std::thread::sleep(slice);
        backend.stop(v).unwrap();
        given_ns[v] += t.elapsed().as_nanos() as f64;
    }
    let thread_ns: f64 = (0..2).map(|v| cpu_time(&backend, v) - before[v]).sum();
    let guest_ns: f64 = (0..2).map(|v| backend.counters(v).compute_cycles as f64 / hz * 1e9).sum();
    let given: f64 = given_ns.iter().sum();
    let per_switch = |ns: f64| ns / SWITCHES as f64 / 1e3;
    println!(
        "  {} ms turns, {}: per switch, thread not on its CPU {:.0} µs, guest not executing {:.0} µs \
         (given {:.0} ms in all)",
        slice.as_millis(),
        if migrate { "migrating at every switch" } else { "on one host CPU" },
        per_switch(given - thread_ns),
        per_switch(given - guest_ns),
        given / 1e6
    );
}

fn workload(name: &str, vcpus: usize, given: &[(&str, Value)]) -> GuestSpec {
    let info = vsched_workloads::REGISTRY.iter().find(|w| w.name == name).expect("a workload of the registry");
    let given: BTreeMap<String, Value> = given.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let params = Params::check("vm[0].workload", info.params, &given).unwrap_or_else(|e| fail(&e.to_string()));
    (info.build)(&params, &Ranks::alone(vcpus)).unwrap_or_else(|e| fail(&e.to_string()))
}

/// "p50 X µs, p90 Y µs (min .., max ..)" of samples in µs.
fn percentiles(samples: &mut [f64]) -> String {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    format!("p50 {:.1} µs, p90 {:.1} µs (min {:.1}, max {:.1})", at(0.5), at(0.9), at(0.0), at(1.0))
}

/// "median M (min .. max)" with `decimals` decimals.
fn spread(samples: &mut [f64], decimals: usize) -> String {
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    let (min, max) = (samples[0], samples[samples.len() - 1]);
    format!("median {median:.decimals$} (min {min:.decimals$}, max {max:.decimals$})")
}

fn host_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid for sched_getaffinity to fill, then to read.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

fn pin_self(cpu: usize) {
    // SAFETY: as above; pins the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn fail(message: &str) -> ! {
    eprintln!("kvm_costs: {message}");
    std::process::exit(1);
}
