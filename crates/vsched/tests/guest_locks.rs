//! Guest lock kinds, hand-checked: MCS queued spinlocks, the preemptable ticket lock, the
//! kernel mutex with optimistic spinning, and the paravirtual qspinlock's kick, early halt
//! and fresh head budget.
//!
//! Every run is on a host without overheads (`free_host`: IPIs land at once unless a test
//! says otherwise, exits cost nothing, 2 GHz, 16 cycles per spin iteration) under `Pinned`
//! (tests/common.rs: vCPU `v` on pCPU `v % pcpus`, round robin with a fixed slice), so every
//! instant can be derived from the programs. Times are in µs.

mod common;
use std::cell::RefCell;
use std::rc::Rc;

use common::*;
use vsched_model::{
    Cx, Decision, DomainConfig, Dur, HostConfig, Instr, LockChoice, LockKind, PcpuId, Policy, Program, RunMetrics,
    Simulation, Time, Until, VcpuId, VmType, NS_PER_MS,
};

/// A lock taken in kernel mode or not.
fn lock(kernel: bool) -> Instr {
    Instr::Lock { choice: LockChoice::Fixed(0), kernel }
}

/// A finite VM with one lock of `kind`.
fn vm_of(programs: Vec<Program>, kind: LockKind) -> DomainConfig {
    let mut d = domain("vm", VmType::Hit, programs);
    d.guest.locks = 1;
    d.guest.lock_kind = kind;
    d.guest.finite = true;
    d
}

fn run_sim(host: HostConfig, doms: Vec<DomainConfig>, policy: Box<dyn Policy>) -> RunMetrics {
    Simulation::new(host, doms, policy, 1).run(20 * NS_PER_MS, Until::AllDone, &mut |_| true).expect("run failed")
}

fn assert_us(what: &str, got_s: f64, want_us: f64) {
    assert!((got_s - want_us * 1e-6).abs() < 1e-9, "{what}: {got_s} s, expected {want_us} µs");
}

/// The lock-waiter preemption layout, user-mode locks of `kind`. pCPU 0 is shared by vCPU 0
/// and a hog (vCPU 3, another VM) in slices of `slice` µs; vCPUs 1 and 2 have pCPUs 1 and 2
/// to themselves. vCPU 1 holds the lock from 0 to `hold`; vCPU 0 asks at 10 and vCPU 2 at
/// `late`; each holds it 50 µs.
fn preempted_head(kind: LockKind, slice: u64, hold: u64, late: u64, holder_again: bool) -> RunMetrics {
    let waiter = program(&[compute(us(10)), lock(false), compute(us(50)), Instr::Unlock]);
    let mut holder = vec![lock(false), compute(us(hold)), Instr::Unlock];
    if holder_again {
        holder.extend([compute(us(10)), lock(false), compute(us(50)), Instr::Unlock]);
    }
    let late = program(&[compute(us(late)), lock(false), compute(us(50)), Instr::Unlock]);
    let doms = vec![vm_of(vec![waiter, program(&holder), late], kind), domain("hog", VmType::Hit, vec![hog()])];
    run_sim(free_host(3), doms, pinned(Some(us(slice))))
}

#[test]
fn an_mcs_lock_waits_for_its_preempted_head_and_lets_no_one_pass() {
    // Slices of 100: vCPU 0 runs 0–100, the hog 100–200, vCPU 0 from 200. Queue: vCPU 0
    // (asks at 10), vCPU 2 (at 20). The unlock at 150 leaves the lock free to a head that
    // does not execute: one lock-waiter preemption, and vCPU 2, spinning on its pCPU, may not
    // take it; nor may vCPU 1, back at 160 (a newcomer behind a queue). vCPU 0 takes it when
    // it runs again, 200–250; then vCPU 2, 250–300; then vCPU 1, 300–350.
    let m = preempted_head(LockKind::Mcs, 100, 150, 20, true);
    let v = vm(&m, "vm");
    assert_eq!(v.lock_waiter_preemptions, 1);
    assert_us("completion", v.completion_s.unwrap(), 350.0);
    // Spinning: vCPU 0 10–100 (90; not at 200, the lock is free then), vCPU 2 20–250
    // (230), vCPU 1 160–300 (140).
    assert_us("spin", v.spin_s, 90.0 + 230.0 + 140.0);
    // Test-and-set, for contrast: vCPU 2 takes the free lock at 150 (150–200), vCPU 1 finds
    // it held at 160 and spins, and at 200 vCPU 0 and vCPU 1 race for it: not 350.
    let m = preempted_head(LockKind::Tas, 100, 150, 20, true);
    assert!(vm(&m, "vm").completion_s.unwrap() < 349e-6, "{:?}", vm(&m, "vm").completion_s);
}

#[test]
fn a_preemptable_ticket_waiter_passes_a_preempted_one_after_its_timeout() {
    // The timeout unit is 2^14 iterations of 16 cycles at 2 GHz: U = 131.072 µs per ticket
    // between a waiter's and the one served, restarted when an unlock moves the line.
    // Slices of 1000: vCPU 0 runs 0–1000, the hog 1000–2000, vCPU 0 from 2000. Tickets:
    // vCPU 1 0 (holds 0–1100), vCPU 0 1 (asks at 10: timeout U, over at 141.072; it then
    // spins for the free lock), vCPU 2 2 (asks at 1050: timeout 2U). The unlock at 1100
    // serves ticket 1, whose waiter does not execute (a lock-waiter preemption), and restarts
    // vCPU 2's timeout at U: the lock stays free until 1231.072, when vCPU 2 takes it out of
    // order, 1231.072–1281.072. vCPU 0 takes it at 2000, done at 2050.
    let m = preempted_head(LockKind::PreemptableTicket, 1000, 1100, 1050, false);
    let v = vm(&m, "vm");
    assert_eq!(v.lock_waiter_preemptions, 1);
    assert_us("completion", v.completion_s.unwrap(), 2050.0);
    // Spinning: vCPU 0 10–1000 (990), vCPU 2 1050–1231.072 (181.072): not a moment past
    // its timeout, nor before it (the lock was free from 1100).
    assert_us("spin", v.spin_s, 990.0 + 181.072);
    // A ticket lock hands the lock to vCPU 0 at 1100: vCPU 2 waits for it, 2050–2100.
    let m = preempted_head(LockKind::Ticket, 1000, 1100, 1050, false);
    assert_us("ticket completion", vm(&m, "vm").completion_s.unwrap(), 2100.0);
    assert_us("ticket spin", vm(&m, "vm").spin_s, 990.0 + 1000.0);
}

/// A mutex owner (vCPU 0) preempted in its critical section: pCPU 0 shared with a hog in
/// 100 µs slices, so vCPU 0 runs 0–100 and 200–250 and unlocks at 250 (150 µs of section).
/// vCPU 1 (pCPU 1) asks at 50 and holds the mutex 10 µs.
fn preempted_owner(steal_time: bool) -> RunMetrics {
    let owner = program(&[lock(true), compute(us(150)), Instr::Unlock]);
    let waiter = program(&[compute(us(50)), lock(true), compute(us(10)), Instr::Unlock]);
    let mut d = vm_of(vec![owner, waiter], LockKind::Mutex);
    d.pv.steal_time = steal_time;
    let doms = vec![d, domain("hog", VmType::Hit, vec![hog()])];
    run_sim(free_host(2), doms, pinned(Some(us(100))))
}

#[test]
fn a_mutex_waiter_spins_on_a_preempted_owner_unless_steal_time_tells_it() {
    // Without steal time the guest cannot tell that vCPU 0 was preempted at 100
    // (`owner->on_cpu` stays set): vCPU 1 spins from 50 until the unlock at 250 and takes
    // the mutex then, 250–260.
    let blind = preempted_owner(false);
    let v = vm(&blind, "vm");
    assert_us("spin without steal time", v.spin_s, 200.0);
    assert_us("completion", v.completion_s.unwrap(), 260.0);
    // With steal time `vcpu_is_preempted()` is true from 100: vCPU 1 stops spinning at once
    // and sleeps (its vCPU halts); the unlock at 250 wakes it and it takes the mutex,
    // 250–260 again. It spun 150 µs less: the time its owner's vCPU was preempted before the
    // unlock.
    let told = preempted_owner(true);
    let w = vm(&told, "vm");
    assert_us("spin with steal time", w.spin_s, 50.0);
    assert_us("completion", w.completion_s.unwrap(), 260.0);
    assert_us("CPU saved", v.cpu_s - w.cpu_s, 150.0);
}

#[test]
fn a_mutex_waiter_sleeps_when_the_owner_blocks_and_the_unlock_wakes_it() {
    // An IPI takes 5 here. vCPU 0 takes the mutex at 0, computes 20, blocks 100 in an I/O
    // while holding it (its vCPU halts: the owner is off its CPU, steal time or not); the
    // I/O ends at 120 and the policy's reschedule IPI runs vCPU 0 again at 125; it computes
    // 10 and unlocks at 135. vCPU 1 asks at 10 with the owner running: it spins 10–20, then
    // sleeps. The unlock's IPI wakes it at 140, the policy's reschedule IPI runs it on its
    // idle pCPU at 145, and it takes the free mutex, 145–155.
    let owner = program(&[lock(true), compute(us(20)), Instr::Io(Dur::Fixed(us(100))), compute(us(10)), Instr::Unlock]);
    let waiter = program(&[compute(us(10)), lock(true), compute(us(10)), Instr::Unlock]);
    let host = HostConfig { ipi_latency_ns: us(5), ..free_host(2) };
    let m = run_sim(host, vec![vm_of(vec![owner, waiter], LockKind::Mutex)], pinned(None));
    let v = vm(&m, "vm");
    assert_us("spin", v.spin_s, 10.0);
    assert_us("completion", v.completion_s.unwrap(), 155.0);
}

#[test]
fn a_spinner_beats_the_woken_mutex_sleeper_which_then_gets_a_handoff() {
    // vCPU 0 takes the mutex at 0, computes 10, blocks 10–60 in an I/O, computes 40 and
    // unlocks at 100. vCPU 1 asks at 20 (owner blocked: it sleeps), vCPU 2 at 70 (owner
    // running: it spins), vCPU 3 at 120. The unlock at 100 releases the mutex: spinning
    // vCPU 2 takes it in that instant (100–130) and the unlock wakes vCPU 1, which runs at
    // 100, finds the mutex taken, asks for a handoff and spins. The unlock at 130 hands it to
    // vCPU 1 (130–140) although vCPU 3 has spun since 120; vCPU 3 takes it at 140 (140–160).
    let programs = vec![
        program(&[lock(true), compute(us(10)), Instr::Io(Dur::Fixed(us(50))), compute(us(40)), Instr::Unlock]),
        program(&[compute(us(20)), lock(true), compute(us(10)), Instr::Unlock]),
        program(&[compute(us(70)), lock(true), compute(us(30)), Instr::Unlock]),
        program(&[compute(us(120)), lock(true), compute(us(20)), Instr::Unlock]),
    ];
    let m = run_sim(free_host(4), vec![vm_of(programs, LockKind::Mutex)], pinned(None));
    let v = vm(&m, "vm");
    assert_us("completion", v.completion_s.unwrap(), 160.0);
    // Spinning: vCPU 2 70–100, vCPU 1 100–130, vCPU 3 120–140. Without the handoff vCPU 3
    // would take the mutex at 130 and vCPU 1 spin on to 150: 90.
    assert_us("spin", v.spin_s, 30.0 + 30.0 + 20.0);
}

/// What a policy heard, in order: wake-ups and yields, with their instants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heard {
    Wake(VcpuId, Time),
    Yield(VcpuId, vsched_model::YieldReason, Time),
}

/// `Pinned`, recording every wake-up and yield it hears.
struct Recorder {
    inner: Box<dyn Policy>,
    heard: Rc<RefCell<Vec<Heard>>>,
}

impl Policy for Recorder {
    fn init(&mut self, cx: &mut Cx) {
        self.inner.init(cx)
    }
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.inner.vcpu_insert(cx, v)
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.heard.borrow_mut().push(Heard::Wake(v, cx.now()));
        self.inner.wake(cx, v)
    }
    fn yield_(&mut self, cx: &mut Cx, v: VcpuId, why: vsched_model::YieldReason) {
        self.heard.borrow_mut().push(Heard::Yield(v, why, cx.now()));
    }
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        self.inner.pick_next(cx, p, prev)
    }
}

/// A VM with paravirtual spinlocks running `programs`.
fn pv_vm(programs: Vec<Program>) -> DomainConfig {
    let mut d = vm_of(programs, LockKind::Ticket);
    d.pv.spinlocks = true;
    d
}

#[test]
fn a_pv_unlock_wakes_the_halted_head_at_once_and_yields_to_it() {
    // vCPU 1 asks at 1 for the kernel lock vCPU 0 holds until 2000, spins SPIN_THRESHOLD =
    // 2^15 iterations (262.144 µs) and halts at 263.144. The unlock at 2000 kicks it: the
    // host wakes vCPU 1 inside the hypercall, at 2000 although an IPI takes 20 here, and
    // right after the policy hears vCPU 0 yield to it (KVM's `kvm_sched_yield` after the
    // kick). vCPU 0 computes on after the unlock, so it is still running for the yield.
    let holder = program(&[kernel_lock(), compute(us(2000)), Instr::Unlock, compute(us(100))]);
    let waiter = program(&[compute(us(1)), kernel_lock(), compute(us(10)), Instr::Unlock]);
    let heard = Rc::new(RefCell::new(Vec::new()));
    let policy = Box::new(Recorder { inner: pinned(None), heard: heard.clone() });
    let host = HostConfig { ipi_latency_ns: us(20), ..free_host(2) };
    let m = run_sim(host, vec![pv_vm(vec![holder, waiter])], policy);
    let kick = vsched_model::YieldReason::Kick { target: 1 };
    let heard = heard.borrow();
    let at = heard.iter().position(|h| *h == Heard::Wake(1, us(2000))).expect("vCPU 1 woken at the unlock");
    assert_eq!(heard.get(at + 1), Some(&Heard::Yield(0, kick, us(2000))), "{heard:?}");
    assert_eq!(heard.iter().filter(|h| matches!(h, Heard::Yield(_, y, _) if *y == kick)).count(), 1);
    let v = vm(&m, "vm");
    assert_eq!((v.pv_halts, v.pv_kicks), (1, 1));
    // The unlock found its queue head halted: a lock-waiter preemption.
    assert_eq!(v.lock_waiter_preemptions, 1);
    // vCPU 1 runs when the policy's reschedule IPI reaches its idle pCPU, 2020, and holds
    // the lock 10; vCPU 0 is done at 2100.
    assert_us("completion", v.completion_s.unwrap(), 2100.0);
    assert_us("spin", v.spin_s, 262.144);
}

#[test]
fn a_pv_waiter_behind_a_halted_one_halts_early() {
    // vCPU 0 holds the kernel lock until 2000. vCPU 1 queues at 1 and halts at 263.144;
    // vCPU 2 queues at 100 behind it and, seeing its predecessor halt (`pv_wait_early`),
    // halts at 263.144 too, after 163.144 µs of its own 262.144. The unlock at 2000 kicks
    // vCPU 1 (2000–2010), whose unlock kicks vCPU 2 (2010–2020).
    let holder = program(&[kernel_lock(), compute(us(2000)), Instr::Unlock]);
    let first = program(&[compute(us(1)), kernel_lock(), compute(us(10)), Instr::Unlock]);
    let second = program(&[compute(us(100)), kernel_lock(), compute(us(10)), Instr::Unlock]);
    let m = run_sim(free_host(3), vec![pv_vm(vec![holder, first, second])], pinned(None));
    let v = vm(&m, "vm");
    assert_eq!((v.pv_halts, v.pv_kicks, v.lock_waiter_preemptions), (2, 2, 2));
    assert_us("spin", v.spin_s, 262.144 + 163.144);
    assert_us("completion", v.completion_s.unwrap(), 2020.0);
}

#[test]
fn a_new_pv_queue_head_spins_a_fresh_threshold() {
    // vCPU 0 holds the kernel lock until 200; vCPU 1 queues at 1, vCPU 2 at 2. At 200 vCPU 1
    // takes it (until 400) and vCPU 2 becomes the head, with a fresh SPIN_THRESHOLD
    // (262.144 µs, to 462.144): it is still spinning at 400 and takes the lock, 400–410.
    // Counted from its arrival, its threshold would have run out at 264.144: a halt.
    let holder = program(&[kernel_lock(), compute(us(200)), Instr::Unlock]);
    let first = program(&[compute(us(1)), kernel_lock(), compute(us(200)), Instr::Unlock]);
    let second = program(&[compute(us(2)), kernel_lock(), compute(us(10)), Instr::Unlock]);
    let m = run_sim(free_host(3), vec![pv_vm(vec![holder, first, second])], pinned(None));
    let v = vm(&m, "vm");
    assert_eq!((v.pv_halts, v.pv_kicks, v.lock_waiter_preemptions), (0, 0, 0));
    assert_us("spin", v.spin_s, 199.0 + 398.0);
    assert_us("completion", v.completion_s.unwrap(), 410.0);
}

#[test]
fn every_lock_kind_runs_under_every_policy_and_repeats_itself() {
    // No hand-derived numbers here: the debug build's per-event invariants (no vCPU on two
    // pCPUs, states that agree) and each policy's own checks run through schedules of every
    // new kind: MCS with more threads than vCPUs (user-mode waiters switched out by their
    // guest), the preemptable ticket lock, kernbench under mutexes with steal time (guest
    // ticks, sleeps, handoffs), and paravirtual spinlocks with 200 µs sections (halts,
    // kicks, Kick yields). The same seed must give the same run.
    let vms = [
        vm_toml(
            "mcs",
            3,
            "",
            "kind = \"spinlock\"\niterations = 300\nlock_kind = \"mcs\"\nmode = \"user\"\nthreads = 5",
        ),
        vm_toml(
            "pmt",
            3,
            "",
            "kind = \"spinlock\"\niterations = 300\nlock_kind = \"preemptable-ticket\"\nmode = \"user\"",
        ),
        vm_toml(
            "mutex",
            2,
            "pv_steal_time = true",
            "kind = \"kernbench\"\njobs = 8\njob_ms = 2\nlock_kind = \"mutex\"",
        ),
        vm_toml("pv", 2, "pv_spinlocks = true", "kind = \"spinlock\"\niterations = 200\ncs_us = 200"),
    ];
    for info in vsched_policies::REGISTRY {
        let toml = scenario(3, &format!("name = \"{}\"", info.name), &vms, "horizon_s = 1\nuntil = \"all_done\"");
        let (a, b) = (run(&toml, 1), run(&toml, 1));
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{}: same seed, same run", info.name);
        for v in &a.vms {
            assert!(v.spin_s <= v.cpu_s * (1.0 + 1e-9), "{} {}: spinning is part of CPU time", info.name, v.name);
        }
    }
}
