//! The policy interface, modelled on Xen's `struct scheduler` and Linux `sched_ext_ops`.
//!
//! A policy owns every runnable vCPU that is not running: it keeps them in whatever queues
//! it likes, and the simulator asks it which vCPU each pCPU runs next. It acts on the world
//! only through [`Cx`] (`cx.rs`): read the clock and the topology, send a reschedule IPI
//! to pCPUs, set timers, bump counters. `Cx` knows nothing of the simulator, which is one
//! world behind it among others (real KVM vCPUs, a Python bridge), so the same policy code
//! drives each of them.
//!
//! Callbacks, in lifecycle order. Every callback except `pick_next` has a default that does
//! nothing; `here` in the contracts means the pCPU the callback runs on, if any.

use vsched_engine::Time;

use crate::cx::Cx;
use crate::domain::{DomainInfo, VmType};
use crate::ids::{DomId, PcpuId, VcpuId};
use crate::params::{ConfigError, ParamSpec, Params};

/// sched_ext's default watchdog bound: a task runnable this long without running ejects the
/// BPF scheduler (`SCX_WATCHDOG_MAX_TIMEOUT` = 30 * HZ, kernel/sched/ext.c, used when the
/// scheduler sets no `timeout_ms`). The default of [`Policy::stall_timeout_ns`].
pub const DEFAULT_STALL_TIMEOUT_NS: Time = 30_000_000_000;

/// Why a vCPU yields. The two hypercalls are KVM's (`__kvm_emulate_hypercall`,
/// arch/x86/kvm/x86.c), which answers both with `kvm_sched_yield(target)`; a policy of
/// another hypervisor may ignore them, as its guests would not make them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YieldReason {
    /// A pause-loop exit: the vCPU spun longer than the PLE window.
    PauseLoopExit,
    /// `KVM_HC_SCHED_YIELD` (guests with `Paravirt::sched_yield`, Linux ≥ 5.2): the vCPU sent
    /// a call-function IPI to `target`, which the guest sees preempted, and asks that it run.
    SchedYield { target: VcpuId },
    /// `KVM_HC_KICK_CPU` (guests with `Paravirt::spinlocks`): the vCPU released a lock and
    /// kicked `target`, the halted waiter at the head of its queue, which is runnable now;
    /// KVM then yields to it (since Linux 5.4, "Boost queue head vCPU", commit 266e85a5ec9).
    Kick { target: VcpuId },
}

impl YieldReason {
    /// The same reason with its target renumbered by `f` (global to host-local ids).
    pub fn map_target(self, f: impl Fn(VcpuId) -> VcpuId) -> YieldReason {
        match self {
            YieldReason::PauseLoopExit => YieldReason::PauseLoopExit,
            YieldReason::SchedYield { target } => YieldReason::SchedYield { target: f(target) },
            YieldReason::Kick { target } => YieldReason::Kick { target: f(target) },
        }
    }
}

/// What a pCPU does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The vCPU to run, or `None` to go idle.
    pub next: Option<VcpuId>,
    /// When to call `pick_next` again on this pCPU; `None` for no timer (idle, or run until
    /// something else triggers a reschedule).
    pub slice_ns: Option<Time>,
}

impl Decision {
    pub fn run(v: VcpuId, slice_ns: Time) -> Self {
        Decision { next: Some(v), slice_ns: Some(slice_ns) }
    }
    pub fn idle() -> Self {
        Decision { next: None, slice_ns: None }
    }
}

/// A vCPU scheduling policy.
pub trait Policy {
    /// Before the run: can this policy run these domains on `pcpus` pCPUs? `domains` lists
    /// every VM as CON if it is CON at any time of the run. Return a one-line reason if not
    /// (e.g. a gang scheduler cannot run a CON VM with more vCPUs than pCPUs).
    fn admit(&self, _pcpus: usize, _domains: &[DomainInfo]) -> Result<(), String> {
        Ok(())
    }

    /// Called once when the host and its domains exist, before any vCPU is inserted.
    /// Set up per-pCPU / per-domain state and the first policy timers here.
    fn init(&mut self, _cx: &mut Cx) {}

    /// Period of the per-pCPU tick (`tick` below), or `None` for a tickless policy.
    fn tick_period_ns(&self) -> Option<Time> {
        None
    }

    /// Whether the hypervisor this policy belongs to keeps every pCPU's tick at the same
    /// instants. Linux does by default (`tick_setup_sched_timer` starts every CPU's tick at the
    /// same jiffy boundary unless `skew_tick=1`); Xen does not (each pCPU re-arms its own
    /// ticker from `NOW()` at every tick, so the phases drift apart), which is the default. Only read with independent clocks (`HostConfig::clocks`).
    fn ticks_aligned(&self) -> bool {
        false
    }

    /// How the hypervisor grows a vCPU's PLE window at each pause-loop exit: 1 keeps it fixed,
    /// as Xen does (the default); KVM multiplies it by `ple_window_grow` (2,
    /// `KVM_DEFAULT_PLE_WINDOW_GROW`, since the dynamic window of Linux 3.18) and resets it at
    /// sched-in. The scenario's `host.ple_grow` overrides it.
    fn ple_window_grow(&self) -> u32 {
        1
    }

    /// How long the hypervisor puts off rescheduling a vCPU whose guest marks that it is
    /// inside a critical section (`sim/preempt_delay.rs`), in ns; 0 (the default) never does.
    /// The scenario's `host.preempt_delay_us` overrides it.
    fn preempt_delay_ns(&self) -> Time {
        0
    }

    /// How late the hypervisor's timer subsystem may fire a timer (slice ends, ticks, policy
    /// timers), in ns; each firing is delayed by a uniform draw in `[0, slop)`. Xen batches
    /// timers within `timer_slop` (50 µs, `xen/common/timer.c`); the default 0 is a
    /// hypervisor that fires timers on time. The scenario's `host.timer_slop_us` overrides it.
    fn timer_slop_ns(&self) -> Time {
        0
    }

    /// Whether the policy handles VMs created and destroyed during a run (`vcpu_insert`
    /// after the start, `vcpu_remove`). Scenarios with such VMs are refused otherwise.
    fn supports_vm_lifecycle(&self) -> bool {
        false
    }

    /// How long a runnable vCPU may go unrun before the run fails as this policy's bug (the
    /// stall watchdog, `sim/stall.rs`), as a sched_ext scheduler sets `ops.timeout_ms`: by
    /// default [`DEFAULT_STALL_TIMEOUT_NS`], sched_ext's 30 s. `None` for a policy whose rules
    /// leave a vCPU waiting without bound by design (a strict gang scheduler holds a gang until
    /// as many pCPUs are idle together as it has vCPUs). The scenario's `run.stall_timeout_s`
    /// overrides it.
    fn stall_timeout_ns(&self) -> Option<Time> {
        Some(DEFAULT_STALL_TIMEOUT_NS)
    }

    /// `v` was created runnable (at the start, or when its VM is created mid-run, which
    /// `cx.mid_run()` tells; the domain is `online` by then): choose its run queue. Contract: afterwards the policy
    /// owns `v` until `pick_next` returns it; it may tickle pCPUs with `cx.resched`.
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId);

    /// `v`'s VM is being destroyed: `v` is `Offline` (not runnable) and not running (if it
    /// ran, its pCPU has already been through `pick_next` with it as `prev`). Contract:
    /// dequeue it if it is queued and forget it; it never comes back.
    fn vcpu_remove(&mut self, _cx: &mut Cx, _v: VcpuId) {}

    /// `v` was blocked and is runnable again (I/O done, barrier released, kick). Contract:
    /// queue it somewhere `pick_next` will find it; tickle a pCPU if it should run soon.
    fn wake(&mut self, cx: &mut Cx, v: VcpuId);

    /// `v` blocked while running on `here`. The simulator calls `pick_next(here, Some(v))`
    /// right after; `v` must not be queued (it is not runnable).
    fn sleep(&mut self, _cx: &mut Cx, _v: VcpuId) {}

    /// `v`, running on `here`, yields: a pause-loop exit, or a KVM hypercall naming the vCPU
    /// it would like to run (`YieldReason`). It keeps running unless the policy asks for a
    /// reschedule (`cx.resched(here)`). A hypercall's target is runnable or running.
    fn yield_(&mut self, _cx: &mut Cx, _v: VcpuId, _why: YieldReason) {}

    /// The critical path: pCPU `pcpu` needs a decision (start of run, slice end, an IPI, the
    /// current vCPU blocked or yielded). `prev` is what ran on it (maybe no longer runnable:
    /// check `cx.is_runnable`). Contract: return a runnable vCPU that is not running on
    /// another pCPU (or `prev` itself), or idle; if `prev` is runnable and not returned, keep
    /// it queued. The simulator validates the decision and fails the run if it is unusable.
    fn pick_next(&mut self, cx: &mut Cx, pcpu: PcpuId, prev: Option<VcpuId>) -> Decision;

    /// Whether `pcpu`'s run queue holds a runnable entity besides the one running there
    /// (Linux's `!single_task_running()`), for a policy with per-pCPU run queues. KVM's halt
    /// polling stops when it does (`kvm_vcpu_can_poll`, `sim/halt_poll.rs`); `None` (the
    /// default): the policy does not say, and only a reschedule of `pcpu` stops a poll.
    fn others_queued(&self, _pcpu: PcpuId) -> Option<bool> {
        None
    }

    /// The periodic tick on `pcpu` (see `tick_period_ns`).
    fn tick(&mut self, _cx: &mut Cx, _pcpu: PcpuId) {}

    /// A policy timer set with `cx.set_timer(at, id)` fired.
    fn timer(&mut self, _cx: &mut Cx, _id: u64) {}

    /// Domain `d` changed type (it was `old`; `cx.domain(d).vm_type` is the new one). A
    /// co-scheduling policy scatters a new CON VM's vCPUs here (seed 004 §IV-B).
    fn vm_type_changed(&mut self, _cx: &mut Cx, _d: DomId, _old: VmType) {}

    /// The policy's own invariants (e.g. "no two siblings share a run queue"), checked after
    /// every event in debug builds; an error fails the run.
    fn check(&self, _cx: &Cx) -> Result<(), String> {
        Ok(())
    }

    /// The policy's own figures for domain `d` at the end of the run (`cx.now()`), reported
    /// in the VM's `policy_metrics` (e.g. `relaxed`'s esxtop `%CSTP`). Contract: called once
    /// per domain after the last event; it changes nothing. Most policies report none.
    fn vm_metrics(&self, _cx: &Cx, _d: DomId) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// The hypervisor a policy is the scheduler of. It decides what a host has by default: a
/// Xen host boots a driver domain (Domain-0) with one vCPU per pCPU, which serves the guests'
/// I/O; a KVM host runs that work in its own threads (each VM's QEMU and vhost threads), with
/// a kernel thread bound to each pCPU, all scheduled by the policy beside the vCPU threads
/// (`sim/host_threads.rs`); a policy of no particular hypervisor (`rr`) gets a bare host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hypervisor {
    Xen,
    Kvm,
    Generic,
}

impl Hypervisor {
    pub fn name(self) -> &'static str {
        match self {
            Hypervisor::Xen => "xen",
            Hypervisor::Kvm => "kvm",
            Hypervisor::Generic => "generic",
        }
    }
}

/// How a policy appears in the registry and in `vsched policies`.
pub struct PolicyInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub hypervisor: Hypervisor,
    pub params: &'static [ParamSpec],
    /// Builds the policy from checked parameters; range errors name the parameter.
    pub build: fn(&Params) -> Result<Box<dyn Policy>, ConfigError>,
}
