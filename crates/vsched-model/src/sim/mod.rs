//! The host simulator: pCPUs, domains, vCPUs, guest threads, and the event loop that joins
//! them to a [`Policy`] through the policy seam ([`crate::Cx`]).
//!
//! # Where things live
//! | module | what it does |
//! |---|---|
//! | `config` | what a scenario sets: host overheads, the network, each domain |
//! | `state` | the simulator's state: vCPUs, pCPUs, domains, hosts, and the `Core` holding them |
//! | `build` | turning a configuration into a ready `Simulation` |
//! | `clocks` | out-of-lockstep pCPU clocks, timer slop, workloads' start offsets |
//! | `hardware` | machine costs by hardware era (`[host] hardware`) |
//! | `cache` | cache warmth: refills at switch-in, and the host's sockets, cores and threads |
//! | `smt` | hardware threads of a core slowing each other, and which domains shared a core |
//! | `events` | the event kinds, their order at one instant, and the event loop |
//! | `packed_event` | an event as the queue stores it, packed in one `u128` |
//! | `dispatch` | applying a policy's decision: switch, overheads, slice timers, reschedule IPIs |
//! | `accounting` | time in each vCPU and pCPU state, and fragmentation |
//! | `lifecycle` | VMs created, destroyed or changing type during a run |
//! | `interpret` | the guest interpreter: progress, guest events, blocking and waking |
//! | `guest_kernel` | the guest kernels' timers: ticks of running vCPUs, timer wakes of halted ones |
//! | `guest_sched` | the guest kernels' schedulers: threads that outnumber vCPUs, time slices, wake-up placement |
//! | `ple` | pause-loop exits |
//! | `halt_poll` | KVM halt-polling: the host's `halt_poll_ns` and the guest's haltpoll governor |
//! | `preempt_delay` | putting off a reschedule inside a marked guest critical section |
//! | `irq` | guest IPIs (`ipi_sync`, TLB shootdowns) |
//! | `locks` | guest locks: ticket, test-and-set, preemptable ticket, and each kind's rules |
//! | `queued` | queued spinlocks: MCS and the paravirtual qspinlock |
//! | `mutex` | the kernel mutex with optimistic spinning |
//! | `network` | messages: shared memory, bridge, wire, and the driver domain |
//! | `mailbox` | a thread's messages arrived and not yet received, per source rank |
//! | `disk` | disk requests through the driver domain's blkback |
//! | `host_threads` | a KVM host's own threads: per-CPU kernel threads, each VM's QEMU and vhost threads, the host tick |
//! | `costart` | the co-start skew metric |
//! | `collect` | closing the books and building the report |
//! | `tracing` | what the simulator tells a trace: vCPU activity, runnable vCPUs, instants |
//! | `world` | the simulator as a [`crate::World`]: what a policy sees of one host |
//! | `watchdog` | stopping a run whose simulated time stops advancing, naming the culprit |
//! | `stall` | stopping a run in which a runnable vCPU goes unrun for `run.stall_timeout_s` |
//!
//! # Time and events
//! Everything happens at integer-nanosecond instants. At one instant, events are handled in
//! this order (the engine's `priority`), then in the order they were scheduled:
//! 1. guest progress (a compute finishes, a spin limit or the PLE window is reached),
//! 2. wake-ups from outside the guest (I/O completion, a barrier release after its IPI),
//! 3. policy timers (e.g. Credit's accounting) and scenario changes (a VM's type),
//! 4. per-pCPU ticks,
//! 5. slice ends,
//! 6. reschedule requests (IPIs and local reschedules).
//!
//! So a scheduling decision at time t sees every state change that happened at t.
//!
//! # Clusters
//! A simulation holds one or more identical hosts under one clock and one event queue. Each
//! host runs its own instance of the policy and sees only its own pCPUs, vCPUs and domains,
//! numbered from 0 (`world` translates), so the VMMs decide autonomously (seed 002 §3); they
//! share nothing but the messages their guests exchange (`network`). Their clocks are not
//! synchronized: every pCPU of every host draws its own tick phase (`clocks`), and where
//! ticks are aligned within a host (Linux, or lockstep) host h > 0's lag host 0's by a random
//! fraction of the tick period (drawn once per run from its own stream).
//! `align_host_clocks` makes every host start as host 0 does.

mod accounting;
mod build;
mod cache;
#[cfg(feature = "window-census")]
mod census;
mod client;
mod clocks;
mod collect;
mod config;
mod costart;
mod disk;
mod dispatch;
mod events;
mod guest_kernel;
mod guest_sched;
mod halt_poll;
mod hardware;
mod host_threads;
mod interpret;
mod irq;
mod lifecycle;
mod locks;
mod mailbox;
mod mutex;
mod network;
mod packed_event;
mod ple;
mod policy_counters;
mod preempt_delay;
mod queued;
mod slab;
mod smt;
mod stall;
mod state;
mod tracing;
mod watchdog;
mod world;

use vsched_engine::Time;

pub use cache::KERNEL_FOOTPRINT_BYTES;
pub use config::{driver_guest, Clocks, DomainConfig, HostConfig, NetworkConfig};
pub use disk::IoConfig;
pub use dispatch::MIN_SLICE_NS;
pub use guest_kernel::{GuestTick, DEFAULT_GUEST_HZ, DEFAULT_IDLE_WAKES_PER_S};
pub use halt_poll::{
    GuestHaltPoll, HaltPoll, GUEST_HALT_POLL_GROW, GUEST_HALT_POLL_GROW_START, GUEST_HALT_POLL_NS_DEFAULT,
    GUEST_HALT_POLL_SHRINK, KVM_HALT_POLL_NS_DEFAULT, KVM_HALT_POLL_NS_GROW, KVM_HALT_POLL_NS_GROW_START,
    KVM_HALT_POLL_NS_SHRINK,
};
pub use hardware::{hardware, Caches, Hardware, DEFAULT_HARDWARE, HARDWARE};
pub use host_threads::{
    domains_in_simulation_order, host_threads_name, HostThreads, DEFAULT_KTHREAD_RUN_NS, DEFAULT_KTHREAD_WAKES_PER_S,
    DEFAULT_VHOST_PACKET_NS, DEFAULT_VIRTIO_BLK_REQUEST_NS,
};
pub use smt::DEFAULT_SMT_RATE;

use crate::ids::DomId;
use crate::policy::Policy;
use crate::trace::Trace;
use crate::VmType;
use events::Ev;
use state::Core;

/// Why a run stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The progress callback asked to stop.
    Interrupted,
    /// A policy made an unusable decision or broke an invariant, or the simulator's own
    /// invariants broke: a bug, not bad input.
    Policy(String),
    /// The scenario cannot run: its guests loop in steps that take no simulated time.
    Scenario(String),
    /// A workload's guest program misbehaved (a message to a rank outside its job): a bug
    /// in the workload model.
    Workload(String),
    /// The trace's sink failed (a full disk): the run stopped, as nothing more could be
    /// written. Its I/O error says why.
    TraceSink,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Interrupted => f.write_str("interrupted"),
            RunError::TraceSink => f.write_str(crate::trace::SINK_FAILED),
            RunError::Policy(m) | RunError::Scenario(m) | RunError::Workload(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for RunError {}

/// Hosts, their domains and a policy instance per host, ready to run.
pub struct Simulation {
    core: Core,
    /// One per host, in host order.
    policies: Vec<Box<dyn Policy>>,
    /// Check the simulator's and the policies' invariants after every event (always in
    /// debug builds; `--check` in release builds).
    checks: bool,
    /// The stall watchdog's bound (`stall`); `None`: off.
    stall_timeout: Option<Time>,
    /// Where each domain the caller listed is in `core.doms`: the simulator adds a KVM host's
    /// own threads after each host's domains (`host_threads`).
    user_doms: Vec<DomId>,
    /// Events per lookahead window, when counted (`census`, docs/parallel.md).
    #[cfg(feature = "window-census")]
    census: Option<census::WindowCensus>,
}

/// How a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    Horizon,
    /// When every finite workload has finished (still capped by the horizon).
    AllDone,
}

impl Simulation {
    /// Makes every host's scheduler ticks fall at the same instants as host 0's. By default
    /// host h > 0 lags by a fraction of the tick period drawn from its own random stream, as
    /// unsynchronized hosts do; aligned ticks let tick-driven policies make the same decision
    /// at the same instant on every host, an implicit cluster-wide co-scheduling that real
    /// clusters do not get for free.
    /// With independent clocks, every host's pCPU k also ticks when host 0's does.
    pub fn align_host_clocks(&mut self) {
        let core = &mut self.core;
        let per_host = core.hosts[0].pcpus.len();
        for host in &mut core.hosts {
            host.clock_phase = 0.0;
        }
        for p in per_host..core.pcpus.len() {
            core.pcpus[p].tick_phase = core.pcpus[p % per_host].tick_phase;
        }
    }

    /// At `at`, domain `d` becomes of type `ty` (the policy hears of it through
    /// `vm_type_changed`). Call before `run`.
    pub fn schedule_type_change(&mut self, at: Time, d: DomId, ty: VmType) {
        let d = self.user_doms[d];
        self.core.post(at, Ev::SetType { d, ty });
    }

    /// When each of the caller's domains starts its workload, in ns (a domain created
    /// mid-run: its creation): the seeded offsets of `HostConfig::workload_start_spread_ns`,
    /// 0 in lockstep. The real-vCPU runner starts its VMs at these same instants, so both
    /// worlds follow one rule.
    pub fn workload_starts(&self) -> Vec<Time> {
        self.user_doms.iter().map(|&d| self.core.doms[d].started_at).collect()
    }

    /// Checks the simulator's invariants and the policies' `check` after every event, as
    /// debug builds always do; a broken one ends the run with [`RunError::Policy`].
    pub fn enable_checks(&mut self) {
        self.checks = true;
    }

    /// Ends the run with [`RunError::Policy`] when a vCPU stays runnable without running for
    /// `timeout` ns (`None`: never); by default the policy's `stall_timeout_ns` (`stall`).
    pub fn set_stall_timeout(&mut self, timeout: Option<Time>) {
        self.stall_timeout = timeout;
    }

    /// Records per-pCPU run intervals in memory, keeping at most `limit` of them.
    pub fn enable_trace(&mut self, limit: usize) {
        self.core.trace = Some(Trace::new(limit));
    }

    pub fn take_trace(&mut self) -> Option<Trace> {
        self.core.trace.take()
    }

    /// The event queue's mean length over the events handled so far (stale ones included):
    /// what the bare loop of `vsched bench` is measured at.
    pub fn event_queue_mean_len(&self) -> f64 {
        self.core.queue.mean_len()
    }

    /// Events popped that found nothing to do: stale by a generation check (a descheduled
    /// vCPU's guest timer or guest event, a superseded reschedule) or a renewed slice end.
    pub fn skipped_pops(&self) -> u64 {
        self.core.queue.delivered() - self.core.events
    }
}
