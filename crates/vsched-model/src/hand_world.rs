//! `Bench`: a minimal hand-driven world behind `Cx` (no events: the caller calls the
//! callbacks and moves the clock). It runs policies unchanged, in situations a test sets up
//! exactly, such as pCPUs whose ticks are not aligned or a wake-up while given pCPUs are
//! idle; the policies' own unit tests and the integration tests share it.

use std::collections::BTreeMap;

use crate::{Cx, DomId, DomainInfo, PcpuId, Policy, Time, VcpuId, VcpuState, VmType, World, YieldReason};
use vsched_engine::{RngStreams, StreamRng};

/// One host: `n_pcpus` pCPUs and one domain of `vcpus` vCPUs; the test sets the clock and
/// applies decisions itself.
pub struct Bench {
    pub now: Time,
    here: Option<PcpuId>,
    domain: DomainInfo,
    pub states: Vec<VcpuState>,
    pub curr: Vec<Option<VcpuId>>,
    /// Every pCPU the policy asked to reschedule, in order (the test clears it).
    pub resched: Vec<PcpuId>,
    pub counters: BTreeMap<&'static str, u64>,
    /// What the guest of each vCPU shows the hypervisor (all false unless the test says).
    pub in_kernel: Vec<bool>,
    pub spinning: Vec<bool>,
    pub pending_irq: Vec<bool>,
    /// The host posts interrupts (APICv).
    pub posted: bool,
    /// The policy's failures (`Cx::fail`), in order (the test reads them).
    pub failures: Vec<String>,
    /// The topology: pCPUs split evenly into `sockets`, numbered in cores of
    /// `threads_per_core` hardware threads (1 and 1 unless the test says).
    pub sockets: usize,
    pub threads_per_core: usize,
    rng: StreamRng,
}

impl Bench {
    pub fn new(n_pcpus: usize, vcpus: usize) -> Self {
        let domain = DomainInfo {
            name: "vm".into(),
            vcpus,
            weight: 256,
            cap: 0,
            vm_type: VmType::Hit,
            first_vcpu: 0,
            online: true,
            driver: false,
            host_threads: false,
            rx_packets: 0,
            pv: Default::default(),
            slice_request_ns: None,
        };
        Bench {
            now: 0,
            here: None,
            domain,
            states: vec![VcpuState::Runnable; vcpus],
            curr: vec![None; n_pcpus],
            resched: Vec::new(),
            counters: BTreeMap::new(),
            in_kernel: vec![false; vcpus],
            spinning: vec![false; vcpus],
            pending_irq: vec![false; vcpus],
            posted: false,
            failures: Vec::new(),
            sockets: 1,
            threads_per_core: 1,
            rng: RngStreams::new(1).stream(0),
        }
    }

    /// Calls `pick_next` on `p` and applies the decision.
    pub fn schedule(&mut self, policy: &mut dyn Policy, p: PcpuId) -> Option<VcpuId> {
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

    pub fn tick(&mut self, policy: &mut dyn Policy, p: PcpuId, at: Time) {
        self.now = at;
        self.here = Some(p);
        policy.tick(&mut Cx::new(self), p);
    }

    /// The vCPU running on `p` blocks; `p` schedules.
    pub fn block(&mut self, policy: &mut dyn Policy, p: PcpuId) -> Option<VcpuId> {
        let v = self.curr[p].expect("a vCPU runs there");
        self.states[v] = VcpuState::Blocked;
        self.here = Some(p);
        policy.sleep(&mut Cx::new(self), v);
        self.schedule(policy, p)
    }

    /// Running `v` yields for `why`, on its pCPU.
    pub fn yield_(&mut self, policy: &mut dyn Policy, v: VcpuId, why: YieldReason) {
        let VcpuState::Running(p) = self.states[v] else { panic!("vCPU {v} is not running") };
        self.here = Some(p);
        policy.yield_(&mut Cx::new(self), v, why);
    }

    /// A `Cx` on this world, as if a callback ran on `here`.
    pub fn cx(&mut self, here: Option<PcpuId>) -> Cx<'_> {
        self.here = here;
        Cx::new(self)
    }

    /// Blocked `v` wakes (from no pCPU in particular).
    pub fn wake(&mut self, policy: &mut dyn Policy, v: VcpuId) {
        self.states[v] = VcpuState::Runnable;
        self.here = None;
        policy.wake(&mut Cx::new(self), v);
    }

    /// The policy's timer `id` fires at `at`.
    pub fn timer(&mut self, policy: &mut dyn Policy, id: u64, at: Time) {
        self.now = at;
        self.here = None;
        policy.timer(&mut Cx::new(self), id);
    }
}

impl World for Bench {
    fn now(&self) -> Time {
        self.now
    }
    fn n_pcpus(&self) -> usize {
        self.curr.len()
    }
    /// One socket; each pCPU its own core.
    fn socket_of(&self, p: PcpuId) -> usize {
        p / (self.curr.len() / self.sockets).max(1)
    }
    fn core_of(&self, p: PcpuId) -> usize {
        p / self.threads_per_core
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
    fn guest_in_kernel(&self, v: VcpuId) -> bool {
        self.in_kernel[v]
    }
    fn guest_spinning(&self, v: VcpuId) -> bool {
        self.spinning[v]
    }
    fn pending_interrupt(&self, v: VcpuId) -> bool {
        self.pending_irq[v]
    }
    fn posted_interrupts(&self) -> bool {
        self.posted
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
    fn count(&mut self, name: &'static str, amount: u64) {
        *self.counters.entry(name).or_insert(0) += amount;
    }
    fn rng(&mut self) -> &mut StreamRng {
        &mut self.rng
    }
    fn fail(&mut self, message: String) {
        self.failures.push(message);
    }
}

/// Starts `policy` on `world`: init, every vCPU inserted, every pCPU scheduled once.
pub fn start(world: &mut Bench, policy: &mut dyn Policy) {
    let all: Vec<PcpuId> = (0..world.curr.len()).collect();
    start_on(world, policy, &all);
}

/// As [`start`], but only `pcpus` schedule (the others have not picked yet); the
/// reschedule requests so far are cleared.
pub fn start_on(world: &mut Bench, policy: &mut dyn Policy, pcpus: &[PcpuId]) {
    policy.init(&mut Cx::new(world));
    for v in 0..world.states.len() {
        policy.vcpu_insert(&mut Cx::new(world), v);
    }
    for &p in pcpus {
        world.schedule(policy, p);
    }
    world.resched.clear();
}
