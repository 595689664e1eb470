//! `RealWorld`: the policy seam (`vsched_model::World`) over real vCPUs, so that a policy
//! written for the simulator schedules vCPU threads unchanged.
//!
//! What each fact is here:
//! - `now()`: nanoseconds since the run started, on CLOCK_MONOTONIC (`Instant`), read once
//!   per step of the runner so that one callback sees one instant;
//! - the topology: the scenario's `[host]` (its pCPUs are host CPUs, see `runner`);
//! - `state`, `curr`, `last_pcpu`: as the runner last set them (it starts and stops vCPUs);
//! - `guest_spinning`: the guest's own activity word (`Backend::activity`) says it waits for
//!   a lock or at a barrier, sampled by the runner before each step (`observe_guests`);
//! - `guest_in_kernel`: the activity word says the guest waits for or holds a kernel-mode
//!   lock (whose code runs in ring 3 too: there is no guest kernel, `Backend::in_kernel`);
//! - no interrupts are ever pending, none are posted.
//!
//! Actions: `resched(p)` marks `p` for `pick_next` as soon as the runner's loop gets to it.
//! The runner is one thread deciding for every pCPU, so there is no IPI and no IPI latency to
//! model; what a remote reschedule costs instead is real: the rest of the current step, then
//! stopping the vCPU (a signal and `immediate_exit`: tens of µs on kvm_pvm, docs/real-vcpus.md).
//! A remote request is still counted as the IPI a hypervisor would send (`ipis`, `co_ipis`).
//! `set_timer` queues a policy timer the runner fires when due; `count`, `co_launch` tally;
//! `rng` is the policy's seeded stream, drawn as the simulator seeds it; `fail` keeps the
//! first failure, which ends the run after the current step.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::Instant;

use vsched::scenario::Scenario;
use vsched_engine::{RngStreams, StreamRng, Time};
use vsched_model::trace::{Instant as TraceInstant, Trace, VcpuActivity};
use vsched_model::{Cx, DomId, DomainInfo, HostConfig, PcpuId, VcpuId, VcpuState, World};

use crate::accounting::Books;
use crate::backend::GuestActivity;

/// The random stream of a policy on host 0 of a simulation (`sim::state::policy_stream(0)`),
/// so that a policy draws the same numbers from a seed in both worlds.
const POLICY_STREAM: u64 = 0;

/// One host's worth of real vCPUs as a policy sees them (see the module notes).
pub struct RealWorld {
    started: Instant,
    now: Time,
    host: HostConfig,
    domains: Vec<DomainInfo>,
    dom_of: Vec<DomId>,
    vcpu_index: Vec<usize>,
    states: Vec<VcpuState>,
    last_pcpu: Vec<Option<PcpuId>>,
    curr: Vec<Option<VcpuId>>,
    here: Option<PcpuId>,
    /// pCPUs marked for `pick_next`, in the order they were marked (`marked` mirrors it).
    resched_order: VecDeque<PcpuId>,
    marked: Vec<bool>,
    spinning: Vec<bool>,
    in_kernel: Vec<bool>,
    /// Policy timers: (due, order of setting, id), earliest first.
    timers: BinaryHeap<Reverse<(Time, u64, u64)>>,
    timers_set: u64,
    counters: BTreeMap<&'static str, u64>,
    rng: StreamRng,
    failure: Option<String>,
    /// Remote reschedule requests (what a hypervisor would send as IPIs), and those that
    /// were co-scheduling signals.
    pub(crate) ipis: u64,
    pub(crate) co_ipis: u64,
    pub(crate) co_launches: Vec<u64>,
    pub(crate) books: Books,
    /// The run's trace, if it is traced (`attach_trace`): pCPU spans, vCPU activity, and
    /// instants, in the simulator's trace events (`vsched_model::trace`).
    trace: Option<Trace>,
}

impl RealWorld {
    /// The world of one run of `scenario` with `seed`: every vCPU runnable and on no pCPU,
    /// the clock at 0 until [`RealWorld::start_clock`].
    pub fn new(scenario: &Scenario, seed: u64) -> Self {
        let mut domains = Vec::with_capacity(scenario.vms.len());
        let (mut dom_of, mut vcpu_index) = (Vec::new(), Vec::new());
        for (d, vm) in scenario.vms.iter().enumerate() {
            domains.push(DomainInfo {
                name: vm.name.clone(),
                vcpus: vm.vcpus,
                weight: vm.weight,
                cap: vm.cap,
                vm_type: vm.vm_type,
                first_vcpu: dom_of.len(),
                online: true,
                driver: false,
                host_threads: false,
                rx_packets: 0,
                pv: vm.pv,
                slice_request_ns: vm.slice_request_ns,
            });
            for index in 0..vm.vcpus {
                dom_of.push(d);
                vcpu_index.push(index);
            }
        }
        let (n_vcpus, n_pcpus) = (dom_of.len(), scenario.host.pcpus);
        let books = Books::new(n_pcpus, &domains, &dom_of);
        RealWorld {
            started: Instant::now(),
            now: 0,
            host: scenario.host.clone(),
            co_launches: vec![0; domains.len()],
            domains,
            dom_of,
            vcpu_index,
            states: vec![VcpuState::Runnable; n_vcpus],
            last_pcpu: vec![None; n_vcpus],
            curr: vec![None; n_pcpus],
            here: None,
            resched_order: VecDeque::new(),
            marked: vec![false; n_pcpus],
            spinning: vec![false; n_vcpus],
            in_kernel: vec![false; n_vcpus],
            timers: BinaryHeap::new(),
            timers_set: 0,
            counters: BTreeMap::new(),
            rng: RngStreams::new(seed).stream(POLICY_STREAM),
            failure: None,
            ipis: 0,
            co_ipis: 0,
            books,
            trace: None,
        }
    }

    /// Records the run from now on into `trace`.
    pub fn attach_trace(&mut self, trace: Trace) {
        self.trace = Some(trace);
    }

    /// The run's trace, its open intervals closed at the current instant.
    pub fn take_trace(&mut self) -> Option<Trace> {
        let mut trace = self.trace.take()?;
        trace.close_all(self.now);
        Some(trace)
    }

    /// Records an instant (a pause-loop exit) in the trace, if any.
    pub fn trace_instant(&mut self, what: TraceInstant) {
        if let Some(trace) = &mut self.trace {
            trace.instant(what, self.now);
        }
    }

    /// What `v` does from now on, in the trace, if any.
    fn trace_vcpu(&mut self, v: VcpuId) {
        let Some(trace) = &mut self.trace else { return };
        let activity = match self.states[v] {
            VcpuState::Running(pcpu) if self.spinning[v] => Some(VcpuActivity::Spinning { pcpu }),
            VcpuState::Running(pcpu) => Some(VcpuActivity::Running { pcpu }),
            VcpuState::Runnable => Some(VcpuActivity::Runnable),
            VcpuState::Blocked => Some(VcpuActivity::Blocked),
            VcpuState::Offline => None,
        };
        trace.vcpu(v, activity, self.now);
    }

    /// Time 0 of the run is now.
    pub fn start_clock(&mut self) {
        self.started = Instant::now();
        self.now = 0;
    }

    /// Reads the clock: the instant the next callbacks see. Never goes back.
    pub fn tick_clock(&mut self) -> Time {
        let elapsed = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.now = self.now.max(elapsed);
        self.now
    }

    /// The wall-clock instant of run time `at`.
    pub fn instant_of(&self, at: Time) -> Instant {
        self.started + std::time::Duration::from_nanos(at)
    }

    /// Samples what each guest shows the hypervisor: what vCPU `v` does and whether it is
    /// in kernel mode (`observe(v)`).
    pub fn observe_guests(&mut self, observe: impl Fn(VcpuId) -> (GuestActivity, bool)) {
        for v in 0..self.spinning.len() {
            let (activity, in_kernel) = observe(v);
            let spinning =
                matches!(activity, GuestActivity::LockWait | GuestActivity::BarrierWait | GuestActivity::MessageWait);
            self.in_kernel[v] = in_kernel;
            if std::mem::replace(&mut self.spinning[v], spinning) != spinning {
                if let (Some(trace), VcpuState::Running(p)) = (&mut self.trace, self.states[v]) {
                    trace.set_spinning(p, self.now, spinning);
                    self.trace_vcpu(v);
                }
            }
        }
    }

    /// Runs `f` with the policy's context, on pCPU `here` if any.
    pub fn with_cx<R>(&mut self, here: Option<PcpuId>, f: impl FnOnce(&mut Cx) -> R) -> R {
        self.here = here;
        let result = f(&mut Cx::new(self));
        self.here = None;
        result
    }

    /// Marks `p` for `pick_next`; false if it was marked already.
    pub fn mark(&mut self, p: PcpuId) -> bool {
        if self.marked[p] {
            return false;
        }
        self.marked[p] = true;
        self.resched_order.push_back(p);
        true
    }

    /// The next pCPU marked for `pick_next`, unmarking it.
    pub fn take_resched(&mut self) -> Option<PcpuId> {
        let p = self.resched_order.pop_front()?;
        self.marked[p] = false;
        Some(p)
    }

    /// Drops a mark on `p` (its `pick_next` just ran: as in the simulator, a reschedule the
    /// policy asked of `here` during `pick_next` is answered by that very decision).
    pub fn unmark(&mut self, p: PcpuId) {
        if std::mem::take(&mut self.marked[p]) {
            self.resched_order.retain(|&q| q != p);
        }
    }

    /// The policy timer due at or before `now`, if any, taken off the queue: (due, id).
    pub fn take_due_timer(&mut self) -> Option<(Time, u64)> {
        match self.timers.peek() {
            Some(Reverse((at, _, _))) if *at <= self.now => {
                let Reverse((at, _, id)) = self.timers.pop().expect("peeked");
                Some((at, id))
            }
            _ => None,
        }
    }

    /// When the next policy timer is due.
    pub fn next_timer(&self) -> Option<Time> {
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The policy's first failure, if it failed.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// `v` is now in `state` (the runner's bookkeeping; the time it spent in the previous
    /// state is accounted).
    pub fn set_state(&mut self, v: VcpuId, state: VcpuState) {
        self.books.vcpu_state(v, self.states[v], state, self.now);
        self.states[v] = state;
        self.trace_vcpu(v);
    }

    /// `p` now runs `v` (or idles); `v`'s state is the caller's to set.
    pub fn set_curr(&mut self, p: PcpuId, v: Option<VcpuId>) {
        self.books.pcpu(p, self.curr[p].is_some(), v.is_some(), self.now);
        self.curr[p] = v;
        if let Some(v) = v {
            self.last_pcpu[v] = Some(p);
        }
        if let Some(trace) = &mut self.trace {
            match v {
                Some(v) => {
                    let (dom, index) = (self.dom_of[v], self.vcpu_index[v]);
                    trace.open(p, v, dom, index, self.now, self.spinning[v]);
                }
                None => trace.close(p, self.now),
            }
        }
    }

    /// Policy counters, by name.
    pub fn counters(&self) -> &BTreeMap<&'static str, u64> {
        &self.counters
    }

    /// The domains, by id.
    pub fn domains(&self) -> &[DomainInfo] {
        &self.domains
    }

    /// Domain `d` received `packets` from another VM (`runner::messages`): what `cvs-comm`
    /// reads.
    pub(crate) fn add_rx_packets(&mut self, d: usize, packets: u64) {
        self.domains[d].rx_packets += packets;
    }
}

impl World for RealWorld {
    fn now(&self) -> Time {
        self.now
    }
    fn n_pcpus(&self) -> usize {
        self.curr.len()
    }
    fn socket_of(&self, p: PcpuId) -> usize {
        self.host.socket_of(p)
    }
    fn core_of(&self, p: PcpuId) -> usize {
        self.host.core_of(p)
    }
    fn n_vcpus(&self) -> usize {
        self.states.len()
    }
    fn n_domains(&self) -> usize {
        self.domains.len()
    }
    fn domain(&self, d: DomId) -> &DomainInfo {
        &self.domains[d]
    }
    fn dom_of(&self, v: VcpuId) -> DomId {
        self.dom_of[v]
    }
    fn vcpu_index(&self, v: VcpuId) -> usize {
        self.vcpu_index[v]
    }
    fn state(&self, v: VcpuId) -> VcpuState {
        self.states[v]
    }
    fn last_pcpu(&self, v: VcpuId) -> Option<PcpuId> {
        self.last_pcpu[v]
    }
    fn curr(&self, p: PcpuId) -> Option<VcpuId> {
        self.curr[p]
    }
    fn here(&self) -> Option<PcpuId> {
        self.here
    }
    fn resched_pending(&self, p: PcpuId) -> bool {
        self.marked[p]
    }
    fn guest_in_kernel(&self, v: VcpuId) -> bool {
        self.in_kernel[v]
    }
    fn guest_spinning(&self, v: VcpuId) -> bool {
        self.spinning[v]
    }
    /// Real guests here take no interrupts (no IPIs, no timers of their own).
    fn pending_interrupt(&self, _v: VcpuId) -> bool {
        false
    }
    fn posted_interrupts(&self) -> bool {
        false
    }
    fn resched(&mut self, p: PcpuId) -> bool {
        if !self.mark(p) {
            return false;
        }
        let remote = Some(p) != self.here;
        if remote {
            self.ipis += 1;
        }
        remote
    }
    fn co_signal(&mut self, p: PcpuId) {
        if self.resched(p) {
            self.co_ipis += 1;
        }
    }
    fn co_launch(&mut self, d: DomId) {
        self.co_launches[d] += 1;
    }
    fn set_timer(&mut self, at: Time, id: u64) {
        self.timers_set += 1;
        self.timers.push(Reverse((at.max(self.now), self.timers_set, id)));
    }
    fn count(&mut self, name: &'static str, amount: u64) {
        *self.counters.entry(name).or_insert(0) += amount;
    }
    fn rng(&mut self) -> &mut StreamRng {
        &mut self.rng
    }
    fn fail(&mut self, message: String) {
        self.failure.get_or_insert(message);
    }
}
