//! The seam between a policy and the world it schedules.
//!
//! A policy sees and changes its world through [`Cx`] only: the clock, the topology of one
//! host (pCPUs, vCPUs and domains numbered from 0), the state of each vCPU and of its guest
//! as a hypervisor can observe it, and its actions — reschedule a pCPU, set a timer, bump a
//! counter, report a co-scheduling launch, publish a figure to the run's trace, fail the
//! run. Nothing here knows of the simulator.
//!
//! A world is anything that implements [`World`]: the simulator (`sim::world`) is one, the
//! hand-driven `hand_world::Bench` another, and real KVM vCPUs could be a third. `World` is
//! the narrow set of facts and actions a world must provide; `Cx` wraps it (as `&mut dyn World`) and
//! adds what can be derived from them, plus the helpers policy authors expect (in the
//! spirit of sched_ext's `scx_bpf_select_cpu_dfl`): find an idle pCPU, kick it once.
//!
//! Why a trait object and not generics: policies are chosen by name at run time and stored
//! as `Box<dyn Policy>`, so callbacks cannot be generic over the world; one indirect call
//! per query measured no slower than the simulator's former concrete context
//! (docs/performance.md, "The policy seam").

use vsched_engine::{StreamRng, Time};

use crate::domain::{DomainInfo, VcpuState};
use crate::ids::{DomId, PcpuId, VcpuId};
use crate::trace::CounterOf;

/// What a world provides to a policy, on one host, with host-local ids.
///
/// Contracts a world keeps: ids are dense from 0 (`0..n_pcpus()`, `0..n_vcpus()`,
/// `0..n_domains()`); a domain's vCPUs are `first_vcpu .. first_vcpu + vcpus`; state
/// reads reflect every change that happened at `now()` before the callback; `now()` does
/// not change during a callback ([`Cx`] reads it once); actions take effect as documented
/// on each method and never call back into the policy re-entrantly.
pub trait World {
    /// Current time in nanoseconds since the start of the run.
    fn now(&self) -> Time;
    fn n_pcpus(&self) -> usize;
    /// The socket (last-level cache) of pCPU `p`.
    fn socket_of(&self, p: PcpuId) -> usize;
    /// The physical core of pCPU `p` (its SMT siblings share it).
    fn core_of(&self, p: PcpuId) -> usize;
    fn n_vcpus(&self) -> usize;
    fn n_domains(&self) -> usize;
    fn domain(&self, d: DomId) -> &DomainInfo;
    /// The domain of vCPU `v`.
    fn dom_of(&self, v: VcpuId) -> DomId;
    /// The index of `v` within its domain (its `vcpu_id`).
    fn vcpu_index(&self, v: VcpuId) -> usize;
    fn state(&self, v: VcpuId) -> VcpuState;
    /// The pCPU `v` last ran on.
    fn last_pcpu(&self, v: VcpuId) -> Option<PcpuId>;
    /// The vCPU `p` is running, or `None` if idle.
    fn curr(&self, p: PcpuId) -> Option<VcpuId>;
    /// The pCPU the current callback runs on, if any.
    fn here(&self) -> Option<PcpuId>;
    /// Whether a reschedule of `p` has been requested and has not happened yet.
    fn resched_pending(&self, p: PcpuId) -> bool;
    /// Whether `v`'s guest is in kernel mode as the hypervisor learns it on a VM exit (KVM's
    /// `kvm_arch_vcpu_preempted_in_kernel`).
    fn guest_in_kernel(&self, v: VcpuId) -> bool;
    /// Whether `v`'s guest is busy-waiting (a lock, a spinning barrier, IPI
    /// acknowledgements, polling for a message).
    fn guest_spinning(&self, v: VcpuId) -> bool;
    /// Whether an interrupt was sent to `v` and `v` has not taken it yet.
    fn pending_interrupt(&self, v: VcpuId) -> bool;
    /// Whether the host posts interrupts (APICv): pending ones then sit in a descriptor the
    /// hypervisor reads without running the vCPU.
    fn posted_interrupts(&self) -> bool;
    /// The one pCPU `v` may run on, if it is bound to one (a host's per-CPU kernel thread,
    /// `kthread_bind`); `None` for a vCPU that may run anywhere. A world without bound
    /// threads keeps this default.
    fn pinned(&self, _v: VcpuId) -> Option<PcpuId> {
        None
    }
    /// How many of domain `d`'s vCPUs are runnable or running. A world that keeps the count
    /// answers at once; this default looks at each vCPU.
    fn runnable_vcpus(&self, d: DomId) -> usize {
        let dom = self.domain(d);
        (dom.first_vcpu..dom.first_vcpu + dom.vcpus)
            .filter(|&v| matches!(self.state(v), VcpuState::Runnable | VcpuState::Running(_)))
            .count()
    }

    /// Asks `p` to call `pick_next`: at once on `here`, otherwise by an IPI that lands after
    /// the host's IPI latency. Returns whether an IPI was sent (a request already pending
    /// at or before that time sends none).
    fn resched(&mut self, p: PcpuId) -> bool;
    /// A co-scheduling signal: a `resched` that the world also counts as such when it is
    /// an IPI (seed 004's SCHED_SIG, seed 003's SCHEDULE_SOFTIRQ raise).
    fn co_signal(&mut self, p: PcpuId);
    /// Records that the policy launched a co-scheduling of domain `d`.
    fn co_launch(&mut self, d: DomId);
    /// Calls the policy's `timer(id)` at `at` (not before now).
    fn set_timer(&mut self, at: Time, id: u64);
    /// Adds `amount` to a policy-specific counter, reported under `host.policy_counters`.
    fn count(&mut self, name: &'static str, amount: u64);
    /// The policy's own seeded random stream (deterministic per run and host).
    fn rng(&mut self) -> &mut StreamRng;
    /// Stops the run with a policy error (`message`, one line) once the current event has
    /// been handled; the first failure of a run is the one reported. A policy whose code can
    /// fail (a callback written in Python that raised) reports it here, since callbacks
    /// return nothing.
    fn fail(&mut self, message: String);
    /// Whether the run's trace keeps the counters a policy publishes. A world without traces
    /// keeps this default.
    fn tracing(&self) -> bool {
        false
    }
    /// Counter `name` of `of` (host-local ids; `Host(_)` is this host) holds `value` from now
    /// on, in the run's trace. A world without traces keeps this default: nothing.
    fn trace_counter(&mut self, _name: &'static str, _of: CounterOf, _value: i64) {}
}

/// A policy's view of its world during one callback (see the module notes).
pub struct Cx<'a> {
    world: &'a mut dyn World,
    /// `world.now()`, read once: the clock does not move during a callback, and a policy
    /// asks for it several times in each (an indirect call apiece, otherwise).
    now: Time,
}

impl<'a> Cx<'a> {
    pub fn new(world: &'a mut dyn World) -> Self {
        let now = world.now();
        Cx { world, now }
    }

    // ---- Facts ----

    /// Current time in nanoseconds.
    #[inline]
    pub fn now(&self) -> Time {
        self.now
    }
    /// Whether the run is under way, so that a `vcpu_insert` belongs to a VM created mid-run.
    /// The initial vCPUs are inserted at time 0 before any pCPU schedules, and only VMs that
    /// start later are created during the run.
    #[inline]
    pub fn mid_run(&self) -> bool {
        self.now() > 0
    }
    #[inline]
    pub fn n_pcpus(&self) -> usize {
        self.world.n_pcpus()
    }
    #[inline]
    /// The socket of pCPU `p`: pCPUs of one socket share a last-level cache (Xen's
    /// `cpu_core_map`, Linux's LLC domain).
    pub fn socket_of(&self, p: PcpuId) -> usize {
        self.world.socket_of(p)
    }

    /// The physical core of pCPU `p`: hardware threads of one core share it (Xen's
    /// `cpu_sibling_map`). Without SMT each pCPU is its own core.
    pub fn core_of(&self, p: PcpuId) -> usize {
        self.world.core_of(p)
    }

    /// The hardware threads of `p`'s core, `p` included: a core's threads are numbered next to
    /// each other. Just `p` without SMT.
    pub fn core_threads(&self, p: PcpuId) -> std::ops::Range<PcpuId> {
        let core = self.core_of(p);
        let first = (0..p).rev().take_while(|&q| self.core_of(q) == core).last().unwrap_or(p);
        let end = (p + 1..self.n_pcpus()).take_while(|&q| self.core_of(q) == core).last().map_or(p + 1, |q| q + 1);
        first..end
    }

    pub fn n_vcpus(&self) -> usize {
        self.world.n_vcpus()
    }
    /// Every domain of the host, by id.
    pub fn domains(&self) -> impl ExactSizeIterator<Item = &DomainInfo> + '_ {
        (0..self.world.n_domains()).map(|d| self.world.domain(d))
    }
    #[inline]
    pub fn domain(&self, d: DomId) -> &DomainInfo {
        self.world.domain(d)
    }
    /// The vCPUs of domain `d`.
    pub fn vcpus_of(&self, d: DomId) -> std::ops::Range<VcpuId> {
        let info = self.domain(d);
        info.first_vcpu..info.first_vcpu + info.vcpus
    }
    /// The domain of vCPU `v`.
    #[inline]
    pub fn dom_of(&self, v: VcpuId) -> DomId {
        self.world.dom_of(v)
    }
    /// The index of `v` within its domain (its `vcpu_id`).
    #[inline]
    pub fn vcpu_index(&self, v: VcpuId) -> usize {
        self.world.vcpu_index(v)
    }
    #[inline]
    pub fn state(&self, v: VcpuId) -> VcpuState {
        self.world.state(v)
    }
    /// Runnable or running.
    #[inline]
    pub fn is_runnable(&self, v: VcpuId) -> bool {
        matches!(self.state(v), VcpuState::Runnable | VcpuState::Running(_))
    }
    #[inline]
    pub fn running_on(&self, v: VcpuId) -> Option<PcpuId> {
        match self.state(v) {
            VcpuState::Running(p) => Some(p),
            _ => None,
        }
    }
    /// The pCPU `v` last ran on.
    #[inline]
    pub fn last_pcpu(&self, v: VcpuId) -> Option<PcpuId> {
        self.world.last_pcpu(v)
    }
    /// The vCPU `p` is running, or `None` if idle.
    #[inline]
    pub fn curr(&self, p: PcpuId) -> Option<VcpuId> {
        self.world.curr(p)
    }
    /// The pCPU this callback runs on, if any.
    #[inline]
    pub fn here(&self) -> Option<PcpuId> {
        self.world.here()
    }
    /// Whether a reschedule of `p` is on its way (requested, not yet handled).
    #[inline]
    pub fn resched_pending(&self, p: PcpuId) -> bool {
        self.world.resched_pending(p)
    }
    /// Whether `v`'s guest is in kernel mode (holding or spinning on a kernel lock, or
    /// waiting for IPI acknowledgements), as the hypervisor learns it on a VM exit (KVM's
    /// `kvm_arch_vcpu_preempted_in_kernel`).
    #[inline]
    pub fn guest_in_kernel(&self, v: VcpuId) -> bool {
        self.world.guest_in_kernel(v)
    }
    /// Whether `v`'s guest is busy-waiting (on a lock, at a spinning barrier, for IPI
    /// acknowledgements, polling for a message).
    #[inline]
    pub fn guest_spinning(&self, v: VcpuId) -> bool {
        self.world.guest_spinning(v)
    }
    /// Whether an interrupt was sent to `v` (an IPI) and `v` has not taken it yet. KVM's
    /// `kvm_arch_dy_has_pending_interrupt` is this and [`Cx::posted_interrupts`].
    #[inline]
    pub fn pending_interrupt(&self, v: VcpuId) -> bool {
        self.world.pending_interrupt(v)
    }
    /// Whether the host posts interrupts (APICv).
    #[inline]
    pub fn posted_interrupts(&self) -> bool {
        self.world.posted_interrupts()
    }
    /// The one pCPU `v` may run on, if it is bound to one: a host's per-CPU kernel thread
    /// (`kthread_bind`), which a KVM host's scheduler runs beside the vCPU threads
    /// (`sim/host_threads.rs`). A policy must never run a bound vCPU elsewhere: the world
    /// refuses the decision.
    #[inline]
    pub fn pinned(&self, v: VcpuId) -> Option<PcpuId> {
        self.world.pinned(v)
    }
    /// How many vCPUs of domain `d` are runnable (`is_runnable`), without a walk over them
    /// where the world keeps the count (the simulator does).
    #[inline]
    pub fn runnable_vcpus(&self, d: DomId) -> usize {
        self.world.runnable_vcpus(d)
    }

    // ---- Actions ----

    /// Ask `p` to call `pick_next`. On `here` it happens at once; on another pCPU it is an
    /// IPI that lands after the host's IPI latency (and is counted).
    #[inline]
    pub fn resched(&mut self, p: PcpuId) {
        self.world.resched(p);
    }
    /// A co-scheduling signal: like [`Cx::resched`], and also counted in the host's
    /// `co_ipis` when it is an IPI (seed 004's SCHED_SIG, seed 003's SCHEDULE_SOFTIRQ raise).
    #[inline]
    pub fn co_signal(&mut self, p: PcpuId) {
        self.world.co_signal(p)
    }
    /// Records that the policy launched a co-scheduling of domain `d` (reported per VM and as
    /// `co_launches_per_s`, seed 004 Fig. 5).
    #[inline]
    pub fn co_launch(&mut self, d: DomId) {
        self.world.co_launch(d)
    }
    /// Calls `timer(id)` at time `at` (not before now).
    #[inline]
    pub fn set_timer(&mut self, at: Time, id: u64) {
        self.world.set_timer(at, id)
    }
    /// Adds one to a policy-specific counter, reported under `host.policy_counters`.
    #[inline]
    pub fn count(&mut self, name: &'static str) {
        self.world.count(name, 1)
    }
    /// Adds `amount` to a policy-specific counter (a total: time, bytes).
    #[inline]
    pub fn count_by(&mut self, name: &'static str, amount: u64) {
        self.world.count(name, amount)
    }
    /// The policy's own seeded random stream.
    #[inline]
    pub fn rng(&mut self) -> &mut StreamRng {
        self.world.rng()
    }
    /// Stops the run with a policy error: `message` is one line saying what went wrong. The
    /// callback still returns (a `pick_next` returns a decision, e.g. idle); the run ends once
    /// the current event has been handled, and only the first failure is reported.
    pub fn fail(&mut self, message: impl Into<String>) {
        self.world.fail(message.into())
    }
    /// Whether the run is traced so that [`Cx::trace_counter`] keeps anything: a policy skips
    /// computing counters otherwise.
    #[inline]
    pub fn tracing(&self) -> bool {
        self.world.tracing()
    }
    /// Publishes one of the policy's own figures (a run queue's length, a vCPU's credit) to
    /// the run's trace: counter `name` of `of` holds `value` from now on, a counter track
    /// named "`name` `owner`" in Perfetto. Nothing unless the run is traced; the trace keeps
    /// changes only, so publishing an unchanged value costs nothing in the file.
    #[inline]
    pub fn trace_counter(&mut self, name: &'static str, of: CounterOf, value: i64) {
        self.world.trace_counter(name, of, value)
    }

    // ---- Helpers ----

    /// An idle pCPU with no reschedule on its way, trying `first`, then `first + 1`, ...
    /// around the host; `None` if there is none. A wake-up path uses it to pick a pCPU to
    /// kick without kicking the same idle pCPU twice for two wake-ups.
    pub fn idle_pcpu_from(&self, first: PcpuId) -> Option<PcpuId> {
        let n = self.n_pcpus();
        (0..n).map(|k| (first + k) % n).find(|&p| self.curr(p).is_none() && !self.resched_pending(p))
    }
    /// Kicks the pCPU [`Cx::idle_pcpu_from`] finds, if any, and returns it.
    pub fn kick_idle_from(&mut self, first: PcpuId) -> Option<PcpuId> {
        let p = self.idle_pcpu_from(first)?;
        self.resched(p);
        Some(p)
    }
    /// Reschedules the pCPU this callback runs on, if it runs on one (a yield's usual
    /// answer: give up the rest of the slice).
    pub fn resched_here(&mut self) {
        if let Some(p) = self.here() {
            self.resched(p);
        }
    }
}
