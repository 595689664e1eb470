//! The KVM machine on real vCPUs: guest code that counts right, locks that exclude, barriers
//! that hold, computes that last their running time, stops and starts that keep all of it,
//! and teardown that leaves nothing behind. Each test that needs `/dev/kvm` returns early,
//! saying so, where there is none; the refusals need none.
//!
//! The tests take turns (`serial`): the host has 2 CPUs, and counting this process's vCPU
//! threads needs no other test's about.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use vsched_kvm::machine::{check_supported, kvm_available, KvmBackend};
use vsched_kvm::{Backend, BackendError, BackendEvent, GuestActivity, Limits, VmSpec};
use vsched_model::{
    BarrierWait, Dur, GuestSpec, Instr, LockChoice, LockKind, Params, Program, ProgramBuilder, Value, NS_PER_MS,
    NS_PER_US,
};
use vsched_workloads::{Ranks, WorkloadInfo};

const LIMITS: Limits = Limits { memory_per_vm_bytes: 64 << 20 };
/// Longest a test's guest may take to finish on a busy shared host.
const RUN_TIMEOUT: Duration = Duration::from_secs(10);

fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// True when real vCPUs can run here; else says why the test is skipped.
fn have_kvm() -> bool {
    match kvm_available() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

/// The host CPUs this process may use.
fn host_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid for sched_getaffinity to fill.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
        set
    };
    // SAFETY: reading bits of an initialized set.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

fn one_vm(guest: &GuestSpec) -> Vec<VmSpec<'_>> {
    vec![VmSpec { name: "test", index: 0, guest, first_vcpu: 0 }]
}

/// A guest of `threads` threads on as many vCPUs: `iterations` × (compute about `compute_us`,
/// lock, `cs_us` under the lock, unlock).
fn lock_guest(threads: usize, kind: LockKind, locks: u32, iterations: u64, compute_us: u64, cs_us: u64) -> GuestSpec {
    let choice = if locks == 1 { LockChoice::Fixed(0) } else { LockChoice::Uniform };
    let mut b = ProgramBuilder::new();
    b.repeat(Some(iterations))
        .push(Instr::Compute(Dur::Jitter { mean: compute_us * NS_PER_US, cv: 0.2 }))
        .push(Instr::Lock { choice, kernel: false })
        .push(Instr::Compute(Dur::Fixed(cs_us * NS_PER_US)))
        .push(Instr::Unlock)
        .end_repeat();
    let program = b.build();
    GuestSpec { programs: vec![program; threads], vcpus: threads, locks, lock_kind: kind, finite: true, idle_vcpus: 0 }
}

/// Starts every vCPU, vCPU `v` on host CPU `v mod n`, and waits until each has finished.
fn run_to_completion(backend: &mut KvmBackend) {
    let cpus = host_cpus();
    for v in 0..backend.n_vcpus() {
        backend.start(v, cpus[v % cpus.len()]).unwrap();
    }
    wait_finished(backend, &mut vec![false; backend.n_vcpus()]);
}

/// Waits for the `Finished` of every vCPU not yet marked in `finished`; fails on `Failed` or
/// after `RUN_TIMEOUT`.
fn wait_finished(backend: &mut KvmBackend, finished: &mut [bool]) {
    let deadline = Instant::now() + RUN_TIMEOUT;
    while finished.iter().any(|f| !f) {
        match backend.next_event(deadline) {
            Some(BackendEvent::Finished { vcpu }) => finished[vcpu] = true,
            Some(BackendEvent::Failed { message, .. }) => panic!("a vCPU failed: {message}"),
            None => panic!("not finished within {RUN_TIMEOUT:?}: {finished:?}"),
        }
    }
}

fn total_acquisitions(backend: &KvmBackend) -> u64 {
    (0..backend.n_vcpus()).map(|v| backend.counters(v).acquisitions).sum()
}

#[test]
fn a_ticket_lock_counts_every_acquisition_and_excludes() {
    let _turn = serial();
    if !have_kvm() {
        return;
    }
    let n = 20_000;
    let guest = lock_guest(2, LockKind::Ticket, 1, n, 2, 1);
    let mut backend = KvmBackend::new(&one_vm(&guest), &LIMITS, 1).unwrap();
    run_to_completion(&mut backend);
    for v in 0..2 {
        let c = backend.counters(v);
        assert_eq!(c.acquisitions, n, "vCPU {v}");
        assert!(c.hold_cycles > 0 && c.compute_cycles > 0, "vCPU {v}: {c:?}");
        assert_eq!(backend.activity(v), GuestActivity::Done);
    }
    assert_eq!(backend.critical_sections(0, 0), 2 * n);
}
