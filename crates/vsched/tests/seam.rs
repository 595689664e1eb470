//! The policy seam: a world other than the simulator can stand behind `Cx`. `Bench`
//! (`hand_world`) is a minimal hand-driven world (no events: the test calls the callbacks and moves the
//! clock), enough to run registered policies unchanged and to put them in situations the
//! simulator does not produce yet, such as pCPUs whose ticks are not aligned.

mod common;

use common::policy;
use vsched_model::hand_world::{start, Bench};
use vsched_model::{Cx, Decision, PcpuId, Policy, VcpuId, NS_PER_MS};

#[test]
fn round_robin_runs_unchanged_in_another_world() {
    // 2 pCPUs, 3 vCPUs: rr runs vCPUs 0 and 1, then at p0's next decision the queue's head.
    let mut world = Bench::new(2, 3);
    let mut rr = policy("rr", &[]);
    start(&mut world, rr.as_mut());
    assert_eq!(world.curr, vec![Some(0), Some(1)]);
    assert_eq!(world.schedule(rr.as_mut(), 0), Some(2));
    assert_eq!(world.schedule(rr.as_mut(), 1), Some(0));
}

#[test]
fn hybrid_allocates_once_per_interval_of_the_bsp_when_ticks_are_not_aligned() {
    // 2 pCPUs running one vCPU each, 10 ms slots, allocation every 3 slots (the defaults).
    // pCPU 0 ticks at 10, 20, 30 ms, pCPU 1 at 13, 23, 33 ms. The BSP's third slot ends at
    // 30 ms: one allocation there, besides the initial one. Were each tick a boundary for
    // the whole host (the reading before issue 16), the host would count six slots by 33 ms
    // and allocate at the third and the sixth.
    let mut world = Bench::new(2, 2);
    let mut hybrid = policy("hybrid", &[]);
    start(&mut world, hybrid.as_mut());
    assert_eq!(world.curr, vec![Some(0), Some(1)]);
    for slot in 1..=3 {
        for (p, lag) in [(0, 0), (1, 3 * NS_PER_MS)] {
            world.tick(hybrid.as_mut(), p, slot * 10 * NS_PER_MS + lag);
            world.schedule(hybrid.as_mut(), p);
        }
    }
    assert_eq!(world.counters.get("hybrid.allocations"), Some(&2), "{:?}", world.counters);
}

/// Gives up at its first decision.
struct GivesUp;

impl Policy for GivesUp {
    fn vcpu_insert(&mut self, _cx: &mut Cx, _v: VcpuId) {}
    fn wake(&mut self, _cx: &mut Cx, _v: VcpuId) {}
    fn pick_next(&mut self, cx: &mut Cx, pcpu: PcpuId, _prev: Option<VcpuId>) -> Decision {
        cx.fail(format!("nothing to run on pCPU {pcpu}"));
        Decision::idle()
    }
}

#[test]
fn a_policys_failure_reaches_the_world_behind_cx() {
    let mut world = Bench::new(2, 1);
    start(&mut world, &mut GivesUp);
    assert_eq!(world.failures, vec!["nothing to run on pCPU 0", "nothing to run on pCPU 1"]);
}
