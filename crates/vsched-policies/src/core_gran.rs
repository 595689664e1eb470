//! Xen's core scheduling, `sched-gran=core|socket` (Xen ≥ 4.13), over `credit` or `credit2`.
//!
//! # What Xen does (RELEASE-4.22.0, `xen/common/sched/core.c` and `cpupool.c`; since 4.13)
//! - `sched-gran=core` makes each core a scheduling resource, `socket` each socket
//!   (`cpupool_check_granularity`: the number of threads per resource, which must be the same
//!   everywhere, else Xen falls back to the next finer granularity, `cpupool_gran_init`).
//! - A scheduling unit is the vCPUs of one domain with equal `vcpu_id / granularity`
//!   (`sched_alloc_unit`); member `k` of a unit runs on thread `k` of its resource
//!   (`unit2vcpu_cpu`). Credit and credit2 schedule units onto resources as they schedule
//!   vCPUs onto pCPUs at `sched-gran=cpu`: a unit is runnable if any member is
//!   (`unit_runnable`), it burns credit for as long as it holds the resource (`burn_credits` on
//!   the unit), and a thread whose member is blocked or absent runs the idle vCPU
//!   (`sched_unit2vcpu_cpu`), never another domain's vCPU.
//! - Every `schedule()` on a thread of a resource with more than one thread is a rendezvous:
//!   it sends `SCHED_SLAVE_SOFTIRQ` to the siblings and waits until all have entered
//!   (`sched_wait_rendezvous_in`); the last to arrive calls the scheduler (`do_schedule`), and
//!   all switch together, waiting again until every sibling has switched
//!   (`sched_context_switched`, `rendezvous_out_cnt`).
//! - A member that blocks while another member of its unit runs only idles its own thread,
//!   and a member that wakes while its unit runs only starts on its own thread, without a
//!   rendezvous (`sched_force_context_switch`, from `vcpu_sleep_nosync_locked` and
//!   `vcpu_wake`); the last running member that blocks makes its thread `schedule()`.
//!
//! # What vsched does
//! [`CoreGran`] wraps the policy and shows it a world of resources and units
//! (`core_gran_world.rs`), so `credit.rs` and `credit2*.rs` run unchanged. It turns their
//! decisions into one per thread:
//! - a `pick_next` on a thread is a rendezvous arrival if one is in progress on its resource;
//!   else a forced idle if its member blocked while a sibling member runs; else the thread's
//!   member of the holding unit if the wrapper asked it to start one; else a `schedule()`: it
//!   starts a rendezvous, co-signals (an IPI) every sibling and idles while it waits;
//! - the last thread to arrive calls the policy's `pick_next` for the resource, runs its own
//!   member, and releases the others with a reschedule IPI each (those whose member is
//!   runnable); the slice timer of the decision is armed on that thread.
//!
//! # Approximations
//! - Waiting threads spin in Xen and see the rendezvous counter at once; here they are
//!   released by a reschedule IPI, so each rendezvous costs a fixed one IPI latency
//!   (`host.ipi_latency_us`, sourced in docs/realism.md) on top of the wait for the siblings to
//!   arrive (one more IPI latency, plus whatever they were doing). This release latency stands
//!   for Xen's out-rendezvous (`sched_context_switched`) and is the "fixed cost". A released
//!   thread was idle, so it also pays the host's wake-up from idle (`idle_wake_us`), which a
//!   spinning Xen thread does not: an overestimate.
//! - A thread that waits goes idle, so a unit chosen again at a slice end pays a context
//!   switch on each thread but the last to arrive (Xen's `continue_running` pays none).
//! - Credit's and credit2's tick and timers run on each resource's master thread.
//! - VMs created or destroyed mid-run are not supported (the run is refused), nor are the
//!   policies other than `credit` and `credit2` (the facade refuses them).
//! - Counters (`host.policy_counters`): `sched_gran.rendezvous` (how many),
//!   `sched_gran.rendezvous_wait_ns` (thread time spent waiting in or released from one) and
//!   `sched_gran.unit_idle_ns` (thread time idle while the resource is held by a unit whose
//!   member for that thread is blocked or absent). Time still open when the run ends is not
//!   counted.

use vsched_engine::RngStreams;
use vsched_model::trace::CounterOf;
use vsched_model::{
    Cx, Decision, DomId, DomainInfo, PcpuId, Policy, Time, VcpuId, VcpuState, VmType, YieldReason, MIN_SLICE_NS,
};

use crate::core_gran_world::{CxRef, Map, Rdv, UnitWorld};

/// Xen's `sched-gran` (`enum sched_gran`, `xen/common/sched/private.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedGran {
    Cpu,
    Core,
    Socket,
}

impl SchedGran {
    pub const NAMES: [&'static str; 3] = ["cpu", "core", "socket"];

    pub fn parse(name: &str) -> Option<SchedGran> {
        match name {
            "cpu" => Some(SchedGran::Cpu),
            "core" => Some(SchedGran::Core),
            "socket" => Some(SchedGran::Socket),
            _ => None,
        }
    }

    /// Threads per resource on a host (`cpupool_check_granularity`; vsched's topologies are
    /// symmetric, so Xen's fallback never applies).
    pub fn threads(self, pcpus: usize, sockets: usize, threads_per_core: usize) -> usize {
        match self {
            SchedGran::Cpu => 1,
            SchedGran::Core => threads_per_core,
            SchedGran::Socket => pcpus / sockets.max(1),
        }
    }
}

/// The policies core scheduling runs over (Xen 4.13+ runs every scheduler on units; vsched
/// models the two Xen ships as defaults).
pub const SUPPORTED: [&str; 2] = ["credit", "credit2"];

/// What a thread is doing, for the counters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Run,
    /// Idle while its resource's unit has no runnable member for it.
    UnitIdle,
    /// In a rendezvous, or released from one and not yet switched.
    Wait,
    /// Idle with the resource idle.
    Free,
}

/// A policy run at a coarser scheduling granularity (see the module notes).
pub struct CoreGran {
    inner: Box<dyn Policy>,
    gran: SchedGran,
    threads: usize,
    m: Option<Map>,
    /// Per thread: the wrapper asked it to start its member (`sched_force_context_switch`).
    sync: Vec<bool>,
    /// Per thread: the member that just blocked on it (`sleep` before `pick_next`).
    slept: Vec<Option<VcpuId>>,
    /// Per resource: the thread that holds its slice timer, and when the slice ends.
    slice: Vec<Option<(PcpuId, Time)>>,
    phase: Vec<(Phase, Time)>,
}

impl CoreGran {
    /// `inner` with `threads` (≥ 2) threads per resource.
    pub fn new(inner: Box<dyn Policy>, gran: SchedGran, threads: usize) -> CoreGran {
        CoreGran { inner, gran, threads, m: None, sync: vec![], slept: vec![], slice: vec![], phase: vec![] }
    }

    fn map(&self) -> &Map {
        self.m.as_ref().expect("init ran")
    }

    /// Runs `f` on the inner policy with the unit world.
    fn inner<R>(&mut self, cx: &mut Cx, f: impl FnOnce(&mut dyn Policy, &mut Cx) -> R) -> R {
        let m = self.m.as_mut().expect("init ran");
        m.refresh(cx);
        let mut world = UnitWorld { cx: CxRef::Mut(cx), m };
        let mut vcx = Cx::new(&mut world);
        f(self.inner.as_mut(), &mut vcx)
    }

    /// The member thread `p` should run now, with the slice timer if `p` holds it.
    fn member(&self, cx: &Cx, p: PcpuId) -> Decision {
        let m = self.map();
        let r = m.res_of[p];
        let next = m.res_unit[r].and_then(|u| m.members[u][m.idx_of[p]]).filter(|&v| match cx.state(v) {
            VcpuState::Runnable => true,
            VcpuState::Running(q) => q == p,
            _ => false,
        });
        let slice_ns = match self.slice[r] {
            Some((owner, end)) if owner == p => Some(end.saturating_sub(cx.now()).max(MIN_SLICE_NS)),
            _ => None,
        };
        Decision { next, slice_ns }
    }

    /// `schedule()` on thread `p`: enter a rendezvous and signal the siblings.
    fn start_rendezvous(&mut self, cx: &mut Cx, p: PcpuId) -> Decision {
        let m = self.m.as_mut().expect("init ran");
        let r = m.res_of[p];
        let mut arrived = vec![false; self.threads];
        arrived[m.idx_of[p]] = true;
        m.rdv[r] = Some(Rdv { arrived, count: 1 });
        self.slice[r] = None;
        cx.count("sched_gran.rendezvous");
        for &q in &m.threads[r] {
            if q != p {
                self.sync[q] = false;
                cx.co_signal(q); // SCHED_SLAVE_SOFTIRQ
            }
        }
        Decision::idle()
    }

    /// The last thread `q` arrived: the policy decides for the resource (`do_schedule`), `q`
    /// switches, and the siblings are released.
    fn complete_rendezvous(&mut self, cx: &mut Cx, q: PcpuId) -> Decision {
        let (r, prev) = {
            let m = self.m.as_mut().expect("init ran");
            let r = m.res_of[q];
            m.rdv[r] = None;
            (r, m.res_unit[r])
        };
        let d = self.inner(cx, |policy, vcx| policy.pick_next(vcx, r, prev));
        let now = cx.now();
        let m = self.m.as_mut().expect("init ran");
        let next = d.next.filter(|&u| {
            let ok = u < m.members.len() && m.unit_res[u].is_none_or(|h| h == r) && m.unit_runnable(cx, u);
            if !ok {
                let held = m.unit_res.get(u).copied().flatten();
                cx.fail(format!(
                    "unusable decision at t={now} ns: resource {r} was given unit {u} (held by {held:?}, runnable {})",
                    u < m.members.len() && m.unit_runnable(cx, u)
                ));
            }
            ok
        });
        if let Some(u) = prev {
            m.unit_res[u] = None;
        }
        if let Some(u) = next {
            m.unit_res[u] = Some(r);
            m.unit_last[u] = Some(r);
        }
        m.res_unit[r] = next;
        self.slice[r] = d.slice_ns.map(|s| (q, now + s));
        let threads = m.threads[r].clone();
        for w in threads.into_iter().filter(|&w| w != q) {
            if self.member(cx, w).next.is_some() {
                self.sync[w] = true;
                cx.resched(w);
            } else {
                let phase = if next.is_some() { Phase::UnitIdle } else { Phase::Free };
                self.enter(cx, w, phase);
            }
        }
        self.member(cx, q)
    }

    /// Thread `p` enters `phase` now: the time of the phase it leaves is counted.
    fn enter(&mut self, cx: &mut Cx, p: PcpuId, phase: Phase) {
        let now = cx.now();
        let (old, since) = std::mem::replace(&mut self.phase[p], (phase, now));
        if old == phase {
            self.phase[p].1 = since;
            return;
        }
        let spent = now - since;
        match old {
            Phase::UnitIdle if spent > 0 => cx.count_by("sched_gran.unit_idle_ns", spent),
            Phase::Wait if spent > 0 => cx.count_by("sched_gran.rendezvous_wait_ns", spent),
            _ => {}
        }
        if cx.tracing() {
            let of = CounterOf::Pcpu(p);
            cx.trace_counter("unit idle", of, i64::from(phase == Phase::UnitIdle));
            cx.trace_counter("rendezvous", of, i64::from(phase == Phase::Wait));
        }
    }

    /// Whether a member of `v`'s unit other than `v` runs on a sibling of `p`.
    fn sibling_member_runs(&self, cx: &Cx, p: PcpuId, v: VcpuId) -> bool {
        let m = self.map();
        m.unit_members(m.unit_of[v]).any(|w| w != v && matches!(cx.state(w), VcpuState::Running(q) if q != p))
    }

    /// Physical domains as units, for `admit` (before any world exists).
    fn unit_domains(&self, domains: &[DomainInfo]) -> Vec<DomainInfo> {
        let mut first = 0;
        domains
            .iter()
            .map(|d| {
                let mut u = d.clone();
                u.vcpus = d.vcpus.div_ceil(self.threads);
                u.first_vcpu = first;
                first += u.vcpus;
                u
            })
            .collect()
    }
}

impl Policy for CoreGran {
    fn admit(&self, pcpus: usize, domains: &[DomainInfo]) -> Result<(), String> {
        self.inner.admit(pcpus / self.threads, &self.unit_domains(domains))
    }

    fn init(&mut self, cx: &mut Cx) {
        let gran = self.gran;
        let map = Map::new(cx, self.threads, move |cx, p| match gran {
            SchedGran::Socket => cx.socket_of(p),
            _ => cx.core_of(p),
        });
        if let Some(r) = map.threads.iter().position(|t| t.len() != self.threads) {
            cx.fail(format!(
                "sched_gran: resource {r} has {} threads, expected {}",
                map.threads[r].len(),
                self.threads
            ));
        }
        let n = cx.n_pcpus();
        self.sync = vec![false; n];
        self.slept = vec![None; n];
        self.slice = vec![None; map.threads.len()];
        self.phase = vec![(Phase::Free, 0); n];
        self.m = Some(map);
        self.inner(cx, |policy, vcx| policy.init(vcx));
    }

    fn tick_period_ns(&self) -> Option<Time> {
        self.inner.tick_period_ns()
    }
    fn ticks_aligned(&self) -> bool {
        self.inner.ticks_aligned()
    }
    fn ple_window_grow(&self) -> u32 {
        self.inner.ple_window_grow()
    }
    fn preempt_delay_ns(&self) -> Time {
        self.inner.preempt_delay_ns()
    }
    fn timer_slop_ns(&self) -> Time {
        self.inner.timer_slop_ns()
    }
    fn stall_timeout_ns(&self) -> Option<Time> {
        self.inner.stall_timeout_ns()
    }

    /// A unit is inserted with its first member.
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        let u = self.map().unit_of[v];
        if self.map().unit_members(u).next() == Some(v) {
            self.inner(cx, |policy, vcx| policy.vcpu_insert(vcx, u));
        }
    }

    /// `vcpu_wake`: the scheduler hears of a unit that was not runnable; a member of a unit
    /// that holds its resource starts on its own thread (`sched_force_context_switch`).
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        let m = self.map();
        let u = m.unit_of[v];
        let others = m.unit_res[u].is_some() || m.unit_members(u).any(|w| w != v && cx.is_runnable(w));
        if !others {
            self.inner(cx, |policy, vcx| policy.wake(vcx, u));
        }
        let m = self.map();
        if let Some(r) = m.unit_res[u].filter(|&r| m.rdv[r].is_none()) {
            let k = m.members[u].iter().position(|&w| w == Some(v)).expect("a member");
            let w = m.threads[r][k];
            if cx.curr(w).is_none() && !self.sync[w] {
                self.sync[w] = true;
                cx.resched(w);
            }
        }
    }

    /// `vcpu_sleep_nosync_locked`: the scheduler hears only of a unit with no runnable member.
    fn sleep(&mut self, cx: &mut Cx, v: VcpuId) {
        if let Some(p) = cx.here() {
            self.slept[p] = Some(v);
        }
        let m = self.map();
        let u = m.unit_of[v];
        if m.unit_res[u].is_some() && !m.unit_runnable(cx, u) {
            self.inner(cx, |policy, vcx| policy.sleep(vcx, u));
        }
    }

    /// A yield reaches the scheduler for the unit that holds the resource, outside a rendezvous.
    fn yield_(&mut self, cx: &mut Cx, v: VcpuId, why: YieldReason) {
        let m = self.map();
        let u = m.unit_of[v];
        let Some(r) = m.unit_res[u] else { return };
        if m.rdv[r].is_some() {
            return;
        }
        let why = why.map_target(|t| m.unit_of[t]);
        self.inner(cx, |policy, vcx| policy.yield_(vcx, u, why));
    }

    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, _prev: Option<VcpuId>) -> Decision {
        let slept = self.slept[p].take();
        let sync = std::mem::take(&mut self.sync[p]);
        let (r, k) = (self.map().res_of[p], self.map().idx_of[p]);
        let m = self.m.as_mut().expect("init ran");
        let d = if let Some(rdv) = m.rdv[r].as_mut() {
            if !rdv.arrived[k] {
                rdv.arrived[k] = true;
                rdv.count += 1;
            }
            if rdv.count == self.threads {
                self.complete_rendezvous(cx, p)
            } else {
                Decision::idle()
            }
        } else if slept.is_some_and(|v| self.sibling_member_runs(cx, p, v)) || sync {
            self.member(cx, p)
        } else {
            self.start_rendezvous(cx, p)
        };
        let m = self.map();
        let phase = if d.next.is_some() {
            Phase::Run
        } else if m.rdv[r].is_some() || self.sync[p] {
            Phase::Wait
        } else if m.res_unit[r].is_some() {
            Phase::UnitIdle
        } else {
            Phase::Free
        };
        self.enter(cx, p, phase);
        d
    }

    /// Credit's and credit2's per-resource tick, on the resource's master thread.
    fn tick(&mut self, cx: &mut Cx, p: PcpuId) {
        let m = self.map();
        if m.idx_of[p] == 0 {
            let r = m.res_of[p];
            self.inner(cx, |policy, vcx| policy.tick(vcx, r));
        }
    }

    fn timer(&mut self, cx: &mut Cx, id: u64) {
        self.inner(cx, |policy, vcx| policy.timer(vcx, id));
    }

    fn vm_type_changed(&mut self, cx: &mut Cx, d: DomId, old: VmType) {
        self.inner(cx, |policy, vcx| policy.vm_type_changed(vcx, d, old));
    }

    /// Never two units on one resource: whatever runs on thread `k` of a resource is member
    /// `k` of the unit that holds it (before its rendezvous decides, the old one). Then the
    /// policy's own invariants, in the unit world, while no rendezvous is in progress.
    fn check(&self, cx: &Cx) -> Result<(), String> {
        let m = self.map();
        for (r, threads) in m.threads.iter().enumerate() {
            for (k, &p) in threads.iter().enumerate() {
                if let Some(v) = cx.curr(p) {
                    let expected = m.res_unit[r].and_then(|u| m.members[u][k]);
                    if expected != Some(v) {
                        return Err(format!(
                            "sched_gran: pCPU {p} runs vCPU {v}, not member {k} of resource {r}'s unit {:?}",
                            m.res_unit[r]
                        ));
                    }
                }
            }
        }
        // The policy decides for a resource when its rendezvous completes: until then a unit
        // whose last member blocked still holds the resource, which no policy's invariants
        // expect (in a world of pCPUs, `sleep` and `pick_next` come in the same instant).
        if m.rdv.iter().any(Option::is_some) {
            return Ok(());
        }
        let mut world = UnitWorld { cx: CxRef::Shared(cx, RngStreams::new(0).stream(0)), m };
        let vcx = Cx::new(&mut world);
        self.inner.check(&vcx)
    }
}

impl std::fmt::Debug for CoreGran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CoreGran({:?}, {} threads)", self.gran, self.threads)
    }
}
