//! The watchdog: a run whose simulated time stops advancing ends with an error naming the
//! culprit, the scenario's (a guest looping in steps of no duration) or the policy's (its own
//! events re-armed at one instant), instead of hanging. And `--check` in release builds.

mod common;
use common::*;
use vsched_model::{
    Cx, Decision, PcpuId, Policy, RunError, Simulation, Time, Until, VcpuId, VmType, NS_PER_MS, NS_PER_S,
};

/// A guest whose program repeats a zero-length compute for ever: it never takes time.
fn zero_loop() -> vsched_model::Program {
    let mut b = vsched_model::ProgramBuilder::new();
    b.repeat(None).push(compute(0)).end_repeat();
    b.build()
}

#[test]
fn a_guest_looping_without_taking_time_is_the_scenarios_fault() {
    let doms = vec![domain("busy", VmType::Hit, vec![hog()]), domain("stuck", VmType::Hit, vec![zero_loop()])];
    let error = Simulation::new(free_host(2), doms, pinned(None), 1)
        .run(100 * NS_PER_MS, Until::Horizon, &mut |_| true)
        .unwrap_err();
    let RunError::Scenario(message) = error else { panic!("expected a scenario error, got {error:?}") };
    assert!(message.starts_with("simulated time stopped at t = 0 s: VM \"stuck\" (workload test)"), "{message}");
}

/// Re-arms its timer at the current instant for ever: simulated time cannot pass.
struct Stuck;

impl Policy for Stuck {
    fn init(&mut self, cx: &mut Cx) {
        cx.set_timer(cx.now() + NS_PER_MS, 0);
    }
    fn vcpu_insert(&mut self, _cx: &mut Cx, _v: VcpuId) {}
    fn wake(&mut self, _cx: &mut Cx, _v: VcpuId) {}
    fn timer(&mut self, cx: &mut Cx, id: u64) {
        cx.set_timer(cx.now(), id);
    }
    fn pick_next(&mut self, _cx: &mut Cx, _p: PcpuId, _prev: Option<VcpuId>) -> Decision {
        Decision::idle()
    }
}

#[test]
fn a_policy_rearming_its_timer_at_one_instant_is_the_policys_fault() {
    let doms = vec![domain("a", VmType::Hit, vec![hog()])];
    let error =
        Simulation::new(free_host(1), doms, Box::new(Stuck), 1).run(NS_PER_MS * 10, Until::Horizon, &mut |_| true);
    let Err(RunError::Policy(message)) = error else { panic!("expected a policy error, got {error:?}") };
    assert!(
        message.starts_with("simulated time stopped at t = 0.001 s: the policy keeps re-arming a timer"),
        "{message}"
    );
}

/// Round robin on pinned queues whose own invariant breaks once time passes 1 ms.
struct Fussy(Box<dyn Policy>);

impl Policy for Fussy {
    fn init(&mut self, cx: &mut Cx) {
        self.0.init(cx)
    }
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.0.vcpu_insert(cx, v)
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.0.wake(cx, v)
    }
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        self.0.pick_next(cx, p, prev)
    }
    fn check(&self, cx: &Cx) -> Result<(), String> {
        if cx.now() > NS_PER_MS {
            return Err("queues out of order".into());
        }
        Ok(())
    }
}

#[test]
fn checks_run_the_policys_own_invariants_after_every_event() {
    // Debug builds (cargo test) always check; `enable_checks` is what `--check` calls in a
    // release build.
    let doms = vec![domain("a", VmType::Hit, vec![hog(), hog()])];
    let mut sim = Simulation::new(free_host(1), doms, Box::new(Fussy(pinned(Some(NS_PER_MS / 2)))), 1);
    sim.enable_checks();
    let error = sim.run(NS_PER_MS * 10, Until::Horizon, &mut |_| true);
    let Err(RunError::Policy(message)) = error else { panic!("expected a policy error, got {error:?}") };
    assert_eq!(message, "policy invariant broken at t=1500000 ns on host 0: queues out of order");
}

/// Round robin on one FIFO that forgets vCPU 0 when it is preempted: it is lost for good.
/// vCPU 0's slices are 1 ms; the others' end only when `endless` is false.
struct LosesFirst {
    queue: vsched_model::FifoQueue,
    endless: bool,
}

impl Policy for LosesFirst {
    fn vcpu_insert(&mut self, _cx: &mut Cx, v: VcpuId) {
        self.queue.push_back(v);
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.queue.push_back(v);
        cx.kick_idle_from(0);
    }
    fn pick_next(&mut self, cx: &mut Cx, _p: PcpuId, prev: Option<VcpuId>) -> Decision {
        if let Some(u) = prev.filter(|&u| u != 0 && cx.is_runnable(u)) {
            self.queue.push_back(u);
        }
        match self.queue.pop_front() {
            Some(v) => Decision { next: Some(v), slice_ns: (v == 0 || !self.endless).then_some(NS_PER_MS) },
            None => Decision::idle(),
        }
    }
}

fn loses_first(endless: bool) -> Simulation {
    let doms = vec![domain("a", VmType::Hit, vec![hog(), hog()])];
    Simulation::new(free_host(1), doms, Box::new(LosesFirst { queue: Default::default(), endless }), 1)
}

#[test]
fn a_runnable_vcpu_left_unrun_past_the_bound_fails_the_run_naming_it_and_the_time() {
    // vCPU 0 is lost at 1 ms; sched_ext's default bound, 30 s, ends the run at 30.001 s.
    let error = loses_first(false).run(60 * NS_PER_S, Until::Horizon, &mut |_| true);
    let Err(RunError::Policy(message)) = error else { panic!("expected a policy error, got {error:?}") };
    assert_eq!(
        message,
        "stall: vCPU 0 (VM \"a\" vCPU 0) has been runnable without running for 30 s at t = 30.001 s; the stall \
         watchdog ends a run after 30 s (run.stall_timeout_s): the policy lost a runnable vCPU (a pick_next that \
         drops prev, a wake that queues nothing)"
    );
}

#[test]
fn the_bound_is_settable_and_a_stall_until_the_end_of_the_run_counts() {
    let mut sim = loses_first(false);
    sim.set_stall_timeout(Some(2 * NS_PER_S));
    let Err(RunError::Policy(message)) = sim.run(3 * NS_PER_S, Until::Horizon, &mut |_| true) else {
        panic!("no stall")
    };
    assert!(message.contains("runnable without running for 2 s at t = 2.001 s"), "{message}");
    // No event after the loss (the other hog runs one endless slice): the end is where it looks.
    let mut sim = loses_first(true);
    sim.set_stall_timeout(Some(NS_PER_S));
    let Err(RunError::Policy(message)) = sim.run(3 * NS_PER_S / 2, Until::Horizon, &mut |_| true) else {
        panic!("no stall")
    };
    assert!(message.contains("runnable without running for 1.499 s at t = 1.5 s"), "{message}");
    let mut sim = loses_first(false);
    sim.set_stall_timeout(None);
    assert!(sim.run(3 * NS_PER_S, Until::Horizon, &mut |_| true).is_ok(), "off: the run ends");
}

/// Round robin whose slices are `slice_ns` long.
struct Slices(Time, vsched_model::FifoQueue);

impl Policy for Slices {
    fn vcpu_insert(&mut self, _cx: &mut Cx, v: VcpuId) {
        self.1.push_back(v);
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.1.push_back(v);
        cx.kick_idle_from(0);
    }
    fn pick_next(&mut self, cx: &mut Cx, _p: PcpuId, prev: Option<VcpuId>) -> Decision {
        if let Some(u) = prev.filter(|&u| cx.is_runnable(u)) {
            self.1.push_back(u);
        }
        self.1.pop_front().map_or_else(Decision::idle, |v| Decision::run(v, self.0))
    }
}

#[test]
fn a_slice_shorter_than_linuxs_hrtick_floor_fails_the_run_instead_of_crawling() {
    // A 0 ns slice once advanced time 1 ns per decision: a millisecond took a million events.
    let run = |slice_ns: Time| {
        let doms = vec![domain("a", VmType::Hit, vec![hog(), hog()])];
        Simulation::new(free_host(1), doms, Box::new(Slices(slice_ns, Default::default())), 1).run(
            10 * NS_PER_MS,
            Until::Horizon,
            &mut |_| true,
        )
    };
    let Err(RunError::Policy(message)) = run(0) else { panic!("a 0 ns slice ran") };
    assert_eq!(
        message,
        "unusable decision at t=0 ns: pCPU 0 was given a slice of 0 ns; expected at least 10000 ns (10 µs, the \
         shortest slice Linux arms, hrtick_start in kernel/sched/core.c)"
    );
    assert!(run(vsched_model::MIN_SLICE_NS - 1).is_err());
    assert!(run(vsched_model::MIN_SLICE_NS).is_ok());
}

#[test]
fn the_stall_bound_is_sched_exts_unless_the_policy_holds_gangs_without_bound() {
    assert_eq!(policy("credit", &[]).stall_timeout_ns(), Some(vsched_model::DEFAULT_STALL_TIMEOUT_NS));
    assert_eq!(policy("cfs", &[]).stall_timeout_ns(), Some(30 * NS_PER_S));
    // Strict gang scheduling may hold a host-wide gang for the whole run (seed 000's Fig. 5).
    assert_eq!(policy("cosched", &[]).stall_timeout_ns(), None);
    assert_eq!(policy("cvs-adaptive", &[]).stall_timeout_ns(), None);
    // Not yet known whether kvm-eevdf's 30 s waits on bench.toml are EEVDF's or the model's.
    assert_eq!(policy("kvm-eevdf", &[]).stall_timeout_ns(), None);
    assert_eq!(policy("kvm-dy", &[]).stall_timeout_ns(), Some(30 * NS_PER_S));
    // The scenario's key overrides the policy's bound, both ways.
    let text = |extra: &str| scenario(2, "name = \"cosched\"", &[con("a", 2, "")], &format!("horizon_s = 1\n{extra}"));
    let bound = |t: &str| vsched::Scenario::parse(t).map(|s| s.stall_timeout).map_err(|e| e.to_string());
    assert_eq!(bound(&text("")), Ok(None));
    assert_eq!(bound(&text("stall_timeout_s = 5")), Ok(Some(Some(5 * NS_PER_S))));
    assert_eq!(bound(&text("stall_timeout_s = 0")), Ok(Some(None)));
}
