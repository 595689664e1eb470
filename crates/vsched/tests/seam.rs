//! The policy seam: a world other than the simulator can stand behind `Cx`. `Bench` here is
//! a minimal hand-driven world (no events: the test calls the callbacks and moves the
//! clock), enough to run registered policies unchanged and to put them in situations the
//! simulator does not produce yet, such as pCPUs whose ticks are not aligned.

mod common;

use std::collections::BTreeMap;

use common::policy;
use vsched_engine::{RngStreams, StreamRng};
use vsched_model::{Cx, DomId, DomainInfo, PcpuId, Policy, Time, VcpuId, VcpuState, VmType, World, NS_PER_MS};

/// One host: `n_pcpus` pCPUs and one domain of `vcpus` vCPUs; the test sets the clock and
/// applies decisions itself.
struct Bench {
    now: Time,
    here: Option<PcpuId>,
    domain: DomainInfo,
    states: Vec<VcpuState>,
    curr: Vec<Option<VcpuId>>,
    resched: Vec<PcpuId>,
    counters: BTreeMap<&'static str, u64>,
    rng: StreamRng,
}

impl Bench {
    fn new(n_pcpus: usize, vcpus: usize) -> Self {
        let domain = DomainInfo {
            name: "vm".into(),
            vcpus,
            weight: 256,
            cap: 0,
            vm_type: VmType::Hit,
            first_vcpu: 0,
            online: true,
            rx_packets: 0,
        };
        Bench {
            now: 0,
            here: None,
            domain,
            states: vec![VcpuState::Runnable; vcpus],
            curr: vec![None; n_pcpus],
            resched: Vec::new(),
            counters: BTreeMap::new(),
            rng: RngStreams::new(1).stream(0),
        }
    }

    /// Calls `pick_next` on `p` and applies the decision.
    fn schedule(&mut self, policy: &mut dyn Policy, p: PcpuId) -> Option<VcpuId> {
        self.here = Some(p);
        let prev = self.curr[p];
        let next = policy.pick_next(&mut Cx::new(self), p, prev).next;
        if let Some(u) = prev.filter(|&u| Some(u) != next) {
            self.states[u] = VcpuState::Runnable;
        }
        if let Some(v) = next {
            assert!(self.states[v] == VcpuState::Runnable || prev == Some(v), "vCPU {v} is not free");
            self.states[v] = VcpuState::Running(p);
        }
        self.curr[p] = next;
        next
    }

    fn tick(&mut self, policy: &mut dyn Policy, p: PcpuId, at: Time) {
        self.now = at;
        self.here = Some(p);
        policy.tick(&mut Cx::new(self), p);
    }
}

impl World for Bench {
    fn now(&self) -> Time {
        self.now
    }
    fn n_pcpus(&self) -> usize {
        self.curr.len()
    }
    fn n_vcpus(&self) -> usize {
        self.states.len()
    }
    fn n_domains(&self) -> usize {
        1
    }
    fn domain(&self, _d: DomId) -> &DomainInfo {
        &self.domain
    }
    fn dom_of(&self, _v: VcpuId) -> DomId {
        0
    }
    fn vcpu_index(&self, v: VcpuId) -> usize {
        v
    }
    fn state(&self, v: VcpuId) -> VcpuState {
        self.states[v]
    }
    fn last_pcpu(&self, _v: VcpuId) -> Option<PcpuId> {
        None
    }
    fn curr(&self, p: PcpuId) -> Option<VcpuId> {
        self.curr[p]
    }
    fn here(&self) -> Option<PcpuId> {
        self.here
    }
    fn resched_pending(&self, p: PcpuId) -> bool {
        self.resched.contains(&p)
    }
    fn guest_in_kernel(&self, _v: VcpuId) -> bool {
        false
    }
    fn guest_spinning(&self, _v: VcpuId) -> bool {
        false
    }
    fn resched(&mut self, p: PcpuId) -> bool {
        self.resched.push(p);
        Some(p) != self.here
    }
    fn co_signal(&mut self, p: PcpuId) {
        self.resched(p);
    }
    fn co_launch(&mut self, _d: DomId) {}
    fn set_timer(&mut self, _at: Time, _id: u64) {}
    fn count(&mut self, name: &'static str) {
        *self.counters.entry(name).or_insert(0) += 1;
    }
    fn rng(&mut self) -> &mut StreamRng {
        &mut self.rng
    }
}

/// Starts `policy` on `world`: init, every vCPU inserted, every pCPU scheduled once.
fn start(world: &mut Bench, policy: &mut dyn Policy) {
    policy.init(&mut Cx::new(world));
    for v in 0..world.states.len() {
        policy.vcpu_insert(&mut Cx::new(world), v);
    }
    for p in 0..world.curr.len() {
        world.schedule(policy, p);
    }
}

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
