//! The watchdog: a run whose simulated time stops advancing ends with an error naming the
//! culprit, the scenario's (a guest looping in steps of no duration) or the policy's (its own
//! events re-armed at one instant), instead of hanging. And `--check` in release builds.

mod common;
use common::*;
use vsched_model::{Cx, Decision, PcpuId, Policy, RunError, Simulation, Until, VcpuId, VmType, NS_PER_MS};

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
