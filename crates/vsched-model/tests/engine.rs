//! Step-by-step lifecycle tests of the simulator with hand-made policies and programs.

use vsched_model::*;

/// Round robin on one global queue with a fixed slice: small enough to check by hand.
struct Fifo {
    queue: std::collections::VecDeque<VcpuId>,
    slice: Time,
}

impl Policy for Fifo {
    fn vcpu_insert(&mut self, _cx: &mut Cx, v: VcpuId) {
        self.queue.push_back(v);
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.queue.push_back(v);
        if let Some(p) = (0..cx.n_pcpus()).find(|&p| cx.curr(p).is_none()) {
            cx.resched(p);
        }
    }
    fn pick_next(&mut self, cx: &mut Cx, _p: PcpuId, prev: Option<VcpuId>) -> Decision {
        if let Some(u) = prev.filter(|&u| cx.is_runnable(u)) {
            self.queue.push_back(u);
        }
        match self.queue.pop_front() {
            Some(v) => Decision::run(v, self.slice),
            None => Decision::idle(),
        }
    }
}

/// Always runs vCPU 0: on two pCPUs that puts it on both, which the engine must refuse.
struct Broken;

impl Policy for Broken {
    fn vcpu_insert(&mut self, _cx: &mut Cx, _v: VcpuId) {}
    fn wake(&mut self, _cx: &mut Cx, _v: VcpuId) {}
    fn pick_next(&mut self, _cx: &mut Cx, _p: PcpuId, _prev: Option<VcpuId>) -> Decision {
        Decision::run(0, NS_PER_MS)
    }
}

fn free_host(pcpus: usize) -> HostConfig {
    HostConfig { pcpus, clocks: Clocks::Lockstep, ..HostConfig::of(hardware("ideal").unwrap()) }
}

fn compute_vm(name: &str, vcpus: usize, program: Program) -> DomainConfig {
    DomainConfig {
        name: name.into(),
        weight: 256,
        cap: 0,
        vm_type: VmType::Hit,
        workload: "test".into(),
        guest: GuestSpec {
            programs: vec![program; vcpus],
            vcpus,
            locks: 1,
            lock_kind: LockKind::Ticket,
            finite: true,
            idle_vcpus: 0,
        },
        pv: Default::default(),
        slice_request_ns: None,
        start_at: 0,
        stop_at: None,
        host: 0,
        job: None,
        driver: false,
        working_set_bytes: 0,
        tick: GuestTick::Off,
    }
}

fn compute(ms: u64) -> Program {
    let mut b = ProgramBuilder::new();
    b.push(Instr::Compute(Dur::Fixed(ms * NS_PER_MS)));
    b.build()
}

fn spans(sim: &mut Simulation) -> Vec<(VcpuId, u64, u64, bool)> {
    sim.take_trace()
        .unwrap()
        .spans()
        .iter()
        .map(|s| (s.vcpu, s.start / NS_PER_MS, s.end / NS_PER_MS, s.spinning))
        .collect()
}

#[test]
fn round_robin_on_one_pcpu_follows_the_slices() {
    let policy = Box::new(Fifo { queue: Default::default(), slice: 10 * NS_PER_MS });
    let mut sim = Simulation::new(free_host(1), vec![compute_vm("a", 2, compute(15))], policy, 1);
    sim.enable_trace(100);
    let m = sim.run(NS_PER_S, Until::AllDone, &mut |_| true).unwrap();
    assert_eq!(spans(&mut sim), vec![(0, 0, 10, false), (1, 10, 20, false), (0, 20, 25, false), (1, 25, 30, false)]);
    assert_eq!(m.vms[0].completion_s, Some(0.030));
    assert_eq!(m.vms[0].cpu_s, 0.030);
    // vCPU 0 waited 10-20, vCPU 1 waited 0-10 and 20-25.
    assert!((m.vms[0].steal_s - 0.025).abs() < 1e-12);
    assert_eq!(m.host.context_switches, 4);
}

#[test]
fn a_ticket_lock_holder_preempted_mid_critical_section_stalls_the_waiter() {
    // Two threads on one pCPU: each takes the lock for 15 ms of critical section. The 10 ms
    // slice preempts the holder (an LHP); the waiter then spins its whole slice.
    let mut b = ProgramBuilder::new();
    b.push(Instr::Lock { choice: LockChoice::Fixed(0), kernel: false })
        .push(Instr::Compute(Dur::Fixed(15 * NS_PER_MS)))
        .push(Instr::Unlock);
    let policy = Box::new(Fifo { queue: Default::default(), slice: 10 * NS_PER_MS });
    let mut sim = Simulation::new(free_host(1), vec![compute_vm("a", 2, b.build())], policy, 1);
    sim.enable_trace(100);
    let m = sim.run(NS_PER_S, Until::AllDone, &mut |_| true).unwrap();
    assert_eq!(
        spans(&mut sim),
        vec![(0, 0, 10, false), (1, 10, 20, true), (0, 20, 25, false), (1, 25, 40, false)],
        "holder runs, waiter spins a whole slice, holder finishes, waiter gets the lock"
    );
    assert_eq!(m.vms[0].lock_holder_preemptions, 1);
    assert_eq!(m.vms[0].spin_s, 0.010);
    assert_eq!(m.vms[0].completion_s, Some(0.040));
}

#[test]
fn ticket_handoff_to_a_descheduled_waiter_is_a_lock_waiter_preemption() {
    // Three threads, one pCPU, 15 ms critical sections, 10 ms slices, FIFO queue:
    // v0 holds 0-10 and is preempted (LHP 1); v1 and v2 take tickets and spin a slice each;
    // v0 releases at 35 while v1, next in line, is descheduled (LWP 1) and exits; v1 holds
    // 35-45 and is preempted (LHP 2); v2 spins 45-55; v1 releases at 60 to v2, descheduled
    // again (LWP 2); v2 runs its critical section 60-75.
    let mut b = ProgramBuilder::new();
    b.push(Instr::Lock { choice: LockChoice::Fixed(0), kernel: false })
        .push(Instr::Compute(Dur::Fixed(15 * NS_PER_MS)))
        .push(Instr::Unlock);
    let policy = Box::new(Fifo { queue: Default::default(), slice: 10 * NS_PER_MS });
    let mut sim = Simulation::new(free_host(1), vec![compute_vm("a", 3, b.build())], policy, 1);
    sim.enable_trace(100);
    let m = sim.run(NS_PER_S, Until::AllDone, &mut |_| true).unwrap();
    assert_eq!(
        spans(&mut sim),
        vec![
            (0, 0, 10, false),
            (1, 10, 20, true),
            (2, 20, 30, true),
            (0, 30, 35, false),
            (1, 35, 45, false),
            (2, 45, 55, true),
            (1, 55, 60, false),
            (2, 60, 75, false),
        ]
    );
    assert_eq!(m.vms[0].lock_holder_preemptions, 2, "v0 at 10 ms, v1 at 45 ms");
    assert_eq!(m.vms[0].lock_waiter_preemptions, 2, "v1 at 35 ms, v2 at 60 ms");
    assert_eq!(m.vms[0].completion_s, Some(0.075));
}

#[test]
fn the_engine_refuses_a_vcpu_on_two_pcpus() {
    let mut sim = Simulation::new(free_host(2), vec![compute_vm("a", 2, compute(5))], Box::new(Broken), 1);
    let err = sim.run(NS_PER_S, Until::AllDone, &mut |_| true).unwrap_err();
    assert!(matches!(&err, vsched_model::RunError::Policy(m) if m.contains("pCPU 1 was given vCPU 0")), "{err}");
}
