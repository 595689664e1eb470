//! Guest-kernel mechanisms: pause-loop exit windows that grow and reset (KVM), paravirtual
//! spinlocks that halt and are kicked, TLB-shootdown IPIs, and VMs created and destroyed
//! during a run.
//!
//! Most runs here use `Pinned` (tests/common.rs), a test policy that keeps each vCPU on one pCPU and ignores
//! yields, on a host without overheads, so every instant below can be derived by hand.

mod common;
use common::*;
use vsched_model::{
    Cx, Decision, Dur, HostConfig, Instr, PcpuId, Policy, Program, Simulation, Time, Until, VcpuId, VmType, FOREVER,
    NS_PER_MS,
};

/// A finite VM with one kernel lock.
fn vm_of(name: &str, programs: Vec<Program>, pv: bool) -> vsched_model::DomainConfig {
    let mut d = domain(name, VmType::Hit, programs);
    d.guest.locks = 1;
    d.guest.finite = true;
    d.pv.spinlocks = pv;
    d
}

fn run_sim(
    host: HostConfig,
    doms: Vec<vsched_model::DomainConfig>,
    policy: Box<dyn Policy>,
    horizon: Time,
) -> vsched_model::RunMetrics {
    Simulation::new(host, doms, policy, 1).run(horizon, Until::AllDone, &mut |_| true).expect("run failed")
}

/// PLE window: 4096 cycles at 2 GHz.
const WINDOW_NS: Time = 2_048;

fn ple_host(grow: u32, max_cycles: u64) -> HostConfig {
    HostConfig { ple_grow: Some(grow), ple_window_max_cycles: max_cycles, ..free_host(2) }
}

/// vCPU 0 (pCPU 0) holds the kernel lock for 1 ms from t = 0; vCPU 1 (pCPU 1) asks for it at
/// 10 µs and spins, alone on its pCPU, until 1000 µs: 990 µs of continuous spinning.
fn one_long_spin(host: HostConfig) -> u64 {
    let holder = program(&[kernel_lock(), compute(us(1000)), Instr::Unlock]);
    let waiter = program(&[compute(us(10)), kernel_lock(), Instr::Unlock]);
    let m = run_sim(host, vec![vm_of("vm", vec![holder, waiter], false)], pinned(None), NS_PER_MS * 10);
    assert!((vm(&m, "vm").spin_s - 990e-6).abs() < 1e-9, "spin {}", vm(&m, "vm").spin_s);
    vm(&m, "vm").ple_exits
}

#[test]
fn ple_windows_are_fixed_in_xen_and_grow_in_kvm() {
    // Fixed window (Xen): one exit per whole window of the spin, floor(990 / 2.048) = 483.
    assert_eq!(one_long_spin(ple_host(1, u32::MAX as u64)), 990_000 / WINDOW_NS);
    // KVM, ×2 per exit: exits at w, 3w, 7w, ..., (2^k − 1)w; (2^8 − 1)w = 522 µs ≤ 990 µs
    // < (2^9 − 1)w = 1046 µs, so exactly 8.
    assert_eq!(one_long_spin(ple_host(2, u32::MAX as u64)), 8);
    // Capped at 4w (ple_window_max = 16384 cycles): windows w, 2w, 4w, 4w, ...; exit k ≥ 3
    // comes at (7 + 4(k − 3))w ≤ 990 µs, i.e. k ≤ 3 + floor((483.4 − 7) / 4) = 122.
    assert_eq!(one_long_spin(ple_host(2, 16_384)), 122);
}

#[test]
fn a_kvm_ple_window_resets_when_the_vcpu_is_scheduled_in() {
    // The holder keeps the lock for ever on pCPU 0; the waiter (vCPU 1) shares pCPU 1 with
    // a hog (vCPU 3) in 100 µs slices for 10 ms: it runs 0–100, 200–300, ... (50 slices),
    // spinning from 1 µs. Each slice restarts the window at w: exits at w, 3w, 7w, 15w, 31w
    // (63.5 µs) fit in a slice, 63w = 129 µs does not: 5 exits per slice, 250 in all.
    // Were the window kept across slices it would pass the slice length after 6 exits.
    let holder = program(&[kernel_lock(), compute(FOREVER)]);
    let waiter = program(&[compute(us(1)), kernel_lock(), Instr::Unlock]);
    let doms = vec![vm_of("vm", vec![holder, waiter], false), domain("hogs", VmType::Hit, vec![hog(), hog()])];
    let m = Simulation::new(ple_host(2, u32::MAX as u64), doms, pinned(Some(us(100))), 1)
        .run(10 * NS_PER_MS, Until::Horizon, &mut |_| true)
        .unwrap();
    assert_eq!(vm(&m, "vm").ple_exits, 250);
    // With a fixed window: floor(99 / 2.048) = 48 in the first slice, floor(100 / 2.048) =
    // 48 in the 49 others.
    let doms = vec![
        vm_of(
            "vm",
            vec![program(&[kernel_lock(), compute(FOREVER)]), program(&[compute(us(1)), kernel_lock()])],
            false,
        ),
        domain("hogs", VmType::Hit, vec![hog(), hog()]),
    ];
    let m = Simulation::new(ple_host(1, u32::MAX as u64), doms, pinned(Some(us(100))), 1)
        .run(10 * NS_PER_MS, Until::Horizon, &mut |_| true)
        .unwrap();
    assert_eq!(vm(&m, "vm").ple_exits, 50 * 48);
}

#[test]
fn a_halted_pv_lock_waiter_uses_no_cpu_and_the_unlock_wakes_it() {
    // pv spinlocks: vCPU 1 asks at 1 µs for a lock held until 2 ms, spins SPIN_THRESHOLD =
    // 2^15 iterations of 16 cycles at 2 GHz = 262.144 µs, then halts. The unlock at 2 ms
    // kicks it (zero IPI latency here); it takes the lock and runs its 10 µs section.
    let holder = program(&[kernel_lock(), compute(us(2000)), Instr::Unlock]);
    let waiter = program(&[compute(us(1)), kernel_lock(), compute(us(10)), Instr::Unlock]);
    let m = run_sim(
        free_host(2),
        vec![vm_of("vm", vec![holder.clone(), waiter.clone()], true)],
        pinned(None),
        10 * NS_PER_MS,
    );
    let v = vm(&m, "vm");
    assert_eq!((v.pv_halts, v.pv_kicks), (1, 1));
    assert!((v.spin_s - 262.144e-6).abs() < 1e-9, "spin {}", v.spin_s);
    // CPU: the holder's 2 ms, and the waiter's 1 + 262.144 + 10 µs: nothing while halted.
    assert!((v.cpu_s - (2000.0 + 1.0 + 262.144 + 10.0) * 1e-6).abs() < 1e-9, "cpu {}", v.cpu_s);
    assert!((v.completion_s.unwrap() - 2010e-6).abs() < 1e-9);
    // Without pv spinlocks the waiter spins the whole 1999 µs.
    let m = run_sim(free_host(2), vec![vm_of("vm", vec![holder, waiter], false)], pinned(None), 10 * NS_PER_MS);
    assert_eq!(vm(&m, "vm").pv_halts, 0);
    assert!((vm(&m, "vm").spin_s - 1999e-6).abs() < 1e-9);
}

#[test]
fn a_pv_lock_is_stolen_only_while_its_queue_head_is_not_spinning() {
    // The holder (vCPU 0, pCPU 0) holds until 1 ms; vCPU 1 (pCPU 1) queues at 1 µs and
    // halts at 263.144 µs. vCPU 2 shares pCPU 0: it runs when the holder finishes (the holder
    // exits at 1 ms) and asks at 1 ms + 5 µs, but the unlock at 1 ms kicked vCPU 1, which is
    // spinning again by then: vCPU 2 must queue behind it, not steal.
    let holder = program(&[kernel_lock(), compute(us(1000)), Instr::Unlock]);
    let waiter = program(&[compute(us(1)), kernel_lock(), compute(us(50)), Instr::Unlock]);
    let late = program(&[compute(us(5)), kernel_lock(), compute(us(10)), Instr::Unlock]);
    let m = run_sim(free_host(2), vec![vm_of("vm", vec![holder, waiter, late], true)], pinned(None), 10 * NS_PER_MS);
    let v = vm(&m, "vm");
    // vCPU 1 takes the lock at 1000 µs and holds it 50 µs; vCPU 2 spins 1005 → 1050 µs,
    // then runs 10 µs: done at 1060 µs.
    assert!((v.completion_s.unwrap() - 1060e-6).abs() < 1e-9, "{:?}", v.completion_s);
    assert!((v.spin_s - (262.144 + 45.0) * 1e-6).abs() < 1e-9, "spin {}", v.spin_s);

    // The kick wakes vCPU 1 at once (the host wakes it inside the hypercall), but its idle
    // pCPU 1 only runs it when the policy's reschedule IPI lands, 20 µs later (IPI latency
    // here), at 1020 µs. vCPU 2 (now on its own pCPU 2) asks at 1005 µs while the head is not
    // yet back on a pCPU, so it steals the free lock and holds it 10 µs. vCPU 1 runs at
    // 1020 µs, takes the free lock and holds it 50 µs: done at 1070 µs; nobody spins after
    // the halt.
    let host = HostConfig { ipi_latency_ns: us(20), ..free_host(3) };
    let holder = program(&[kernel_lock(), compute(us(1000)), Instr::Unlock]);
    let waiter = program(&[compute(us(1)), kernel_lock(), compute(us(50)), Instr::Unlock]);
    let late = program(&[compute(us(1005)), kernel_lock(), compute(us(10)), Instr::Unlock]);
    let m = run_sim(host, vec![vm_of("vm", vec![holder, waiter, late], true)], pinned(None), 10 * NS_PER_MS);
    let v = vm(&m, "vm");
    assert!((v.completion_s.unwrap() - 1070e-6).abs() < 1e-9, "{:?}", v.completion_s);
    assert!((v.spin_s - 262.144e-6).abs() < 1e-9, "spin {}", v.spin_s);
}

#[test]
fn a_shootdown_waits_for_running_and_preempted_targets_but_not_halted_ones() {
    // pCPU 0: vCPU 0 (the sender) and vCPU 2; pCPU 1: vCPU 1. Slices of 100 µs. vCPU 0
    // computes 10 µs, then interrupts vCPUs 1 (running) and 2 (queued behind it, preempted).
    // vCPU 1 acknowledges at 10 + 2 µs (IPI latency); vCPU 2 only when it runs, at 100 µs
    // when the sender's slice ends. The sender spins 10 → 100 µs, and the shootdown ends
    // when it runs again at 200 µs.
    let host = || HostConfig { ipi_latency_ns: us(2), ..free_host(2) };
    let sender = program(&[compute(us(10)), Instr::IpiSync, compute(us(10))]);
    let busy = program(&[compute(us(1000))]);
    let doms = |pv: bool| {
        let mut d = vm_of("vm", vec![sender.clone(), busy.clone(), busy.clone()], false);
        d.pv = vsched_model::Paravirt { tlb_flush: pv, steal_time: pv, ..Default::default() };
        vec![d]
    };
    let m = run_sim(host(), doms(false), pinned(Some(us(100))), 10 * NS_PER_MS);
    let v = vm(&m, "vm");
    assert_eq!(v.ipi_syncs, 1);
    assert!((v.spin_s - 90e-6).abs() < 1e-9, "spin {}", v.spin_s);
    // With the paravirtual TLB flush the preempted vCPU 2 is skipped: the wait is the
    // running vCPU 1's 2 µs.
    let m = run_sim(host(), doms(true), pinned(Some(us(100))), 10 * NS_PER_MS);
    assert!((vm(&m, "vm").spin_s - 2e-6).abs() < 1e-9, "spin {}", vm(&m, "vm").spin_s);

    // A halted (blocked) vCPU is not interrupted at all: vCPU 1 is in a 1 ms I/O.
    let halted = program(&[Instr::Io(Dur::Fixed(us(1000)))]);
    let alone = program(&[compute(us(10)), Instr::IpiSync]);
    let m = run_sim(host(), vec![vm_of("vm", vec![alone, halted], false)], pinned(None), 10 * NS_PER_MS);
    assert_eq!((vm(&m, "vm").ipi_syncs, vm(&m, "vm").spin_s), (0, 0.0));
}

#[test]
fn vms_are_created_and_destroyed_on_time() {
    // A 1-vCPU hog VM shares pCPU 0 of 1 with a hog that is created at 1 s and destroyed at
    // 3 s; a finite VM created at 2 s computes 100 ms on pCPU 0 of... one pCPU in all.
    let host = free_host(1);
    let mut late = domain("late", VmType::Hit, vec![hog()]);
    late.start_at = NS_PER_MS * 1000;
    late.stop_at = Some(NS_PER_MS * 3000);
    let mut job = vm_of("job", vec![program(&[compute(100 * NS_PER_MS)])], false);
    job.start_at = NS_PER_MS * 2000;
    let doms = vec![domain("first", VmType::Hit, vec![hog()]), late, job];
    let m = Simulation::new(host, doms, pinned(Some(10 * NS_PER_MS)), 1)
        .run(4 * NS_PER_MS * 1000, Until::Horizon, &mut |_| true)
        .unwrap();
    let (first, late, job) = (vm(&m, "first"), vm(&m, "late"), vm(&m, "job"));
    assert_eq!((late.created_s, late.destroyed_s), (Some(1.0), Some(3.0)));
    assert_eq!((job.created_s, job.destroyed_s), (Some(2.0), None));
    // 0–1 s: first alone. 1–2 s: first and late alternate 10 ms slices. 2 s on: three VMs
    // take turns until the job is done (100 ms of its own: 300 ms), then two until late goes
    // at 3 s; first alone after.
    assert!((late.cpu_s - (0.5 + 0.1 + 0.35)).abs() < 0.011, "late {}", late.cpu_s);
    assert!((job.completion_s.unwrap() - 0.3).abs() < 0.011, "job {:?}", job.completion_s);
    assert!((first.cpu_s + late.cpu_s + job.cpu_s - 4.0).abs() < 1e-9, "the pCPU never idles");
}

/// `Pinned`, recording at each `pick_next` whether a still-runnable `prev` (a preempted
/// vCPU) was in kernel mode.
struct KernelModeRecorder {
    inner: Box<dyn Policy>,
    seen: std::rc::Rc<std::cell::RefCell<Vec<(VcpuId, bool)>>>,
}

impl Policy for KernelModeRecorder {
    fn init(&mut self, cx: &mut Cx) {
        self.inner.init(cx)
    }
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.inner.vcpu_insert(cx, v)
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.inner.wake(cx, v)
    }
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        if let Some(u) = prev.filter(|&u| cx.is_runnable(u)) {
            self.seen.borrow_mut().push((u, cx.guest_in_kernel(u)));
        }
        self.inner.pick_next(cx, p, prev)
    }
}

#[test]
fn a_vcpu_waiting_for_ipi_acknowledgements_is_in_kernel_mode() {
    // One pCPU, 1 ms slices. vCPU 0 computes 10 µs in user mode, then sends a TLB-shootdown
    // IPI to vCPU 1 (runnable, not running: not paravirtual, so it is a target) and spins in
    // the kernel for its acknowledgement, which cannot come before vCPU 1 runs. At 1 ms
    // vCPU 0 is preempted while waiting: in kernel mode. vCPU 1 then computes in user mode
    // (it takes the IPI at once and acknowledges) and is preempted at 2 ms: in user mode.
    let sender = program(&[compute(us(10)), Instr::IpiSync, compute(FOREVER)]);
    let target = program(&[compute(FOREVER)]);
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let policy = Box::new(KernelModeRecorder { inner: pinned(Some(NS_PER_MS)), seen: seen.clone() });
    let doms = vec![domain("vm", VmType::Hit, vec![sender, target])];
    Simulation::new(free_host(1), doms, policy, 1).run(2 * NS_PER_MS, Until::Horizon, &mut |_| true).unwrap();
    assert_eq!(seen.borrow()[..2], [(0, true), (1, false)]);
}
