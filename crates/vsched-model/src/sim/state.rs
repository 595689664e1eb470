//! The simulator's state: each guest thread, each vCPU with the thread it runs and its
//! guest run queue, each pCPU, each domain, each host's share of the arrays, and the `Core`
//! that holds them all (everything but the policies). Fields are open to the simulator's modules, closed to everyone else: policies
//! see this state only through `world`.

use std::collections::VecDeque;

use vsched_engine::{EventQueue, StreamRng, Ticket, Time};

use super::cache::{CacheFills, Toucher, Warmth};
use super::config::{HostConfig, NetworkConfig};
use super::costart::CoStart;
use super::disk::{DiskReq, IoStats};
use super::guest_kernel::GuestTick;
use super::host_threads::HostIo;
use super::locks::Lock;
use super::mailbox::Mailbox;
use super::network::{Msg, NetStats, Pass};
use super::packed_event::PackedEv;
use super::slab::Slab;
use crate::domain::{DomainInfo, VcpuState};
use crate::entitlement::EntitlementMeter;
use crate::guest::{LockKind, Program};
use crate::histogram::Histogram;
use crate::ids::{DomId, PcpuId, ThreadId, VcpuId};
use crate::policy::YieldReason;
use crate::trace::Trace;

/// What a guest thread is doing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum ThreadState {
    /// Its VM's workload starts at `at` (`clocks`): until then the thread is blocked.
    Unstarted {
        at: Time,
    },
    /// Idle until its workload starts.
    BlockedStart,
    /// About to interpret its next instruction.
    Ready,
    Computing {
        left: Time,
    },
    /// Waiting for a lock, spinning. `budget` is spinning time left before something
    /// changes: a paravirtual waiter halts when it runs out; a preemptable-ticket waiter may
    /// then take the lock out of order (None once it may). Other kinds have none.
    SpinLock {
        lock: u32,
        kernel: bool,
        budget: Option<Time>,
    },
    /// A paravirtual lock waiter halted (`pv_wait`); `kicked` once an unlock kicked it.
    HaltedLock {
        lock: u32,
        kicked: bool,
    },
    /// A mutex waiter asleep on the lock's wait list (`sim/mutex.rs`); `woken` once an unlock
    /// woke it.
    SleepMutex {
        lock: u32,
        woken: bool,
    },
    /// Waiting for `pending` IPI acknowledgements (`ipi_sync`).
    SpinIpi {
        pending: u32,
    },
    /// Spinning at the barrier until released, or blocking when `limit` runs out.
    SpinBarrier {
        limit: SpinLimit,
    },
    /// Busy-polling for a message from rank `from`; `limit` as at a barrier.
    SpinRecv {
        from: u32,
        limit: SpinLimit,
    },
    BlockedIo,
    BlockedBarrier,
    BlockedRecv {
        from: u32,
    },
    /// A driver-domain vCPU with an empty backlog and no timer wake owed.
    BlockedNet,
    Exited,
}

/// When a thread spinning at a barrier or for a message gives up and blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SpinLimit {
    /// Never: it spins until released.
    Never,
    /// After this much more spinning while running (a spin budget: time or iterations).
    Running(Time),
    /// At this instant, running or not (a deadline on the guest's clock).
    At(Time),
}

impl SpinLimit {
    /// Whether a spinner with this limit must block at `now`.
    pub(super) fn expired(self, now: Time) -> bool {
        match self {
            SpinLimit::Never => false,
            SpinLimit::Running(left) => left == 0,
            SpinLimit::At(t) => now >= t,
        }
    }
}

impl ThreadState {
    pub(super) fn spinning(self) -> bool {
        matches!(
            self,
            ThreadState::SpinLock { .. }
                | ThreadState::SpinBarrier { .. }
                | ThreadState::SpinIpi { .. }
                | ThreadState::SpinRecv { .. }
        )
    }
}

/// A guest thread: one program of its VM's workload, run by one vCPU at a time (`guest_sched`).
pub(super) struct GuestThread {
    pub(super) dom: DomId,
    /// The vCPU it runs on, or whose run queue it waits in, or where it last ran.
    pub(super) vcpu: VcpuId,
    /// Asleep off its vCPU: blocked while its vCPU runs other threads (`guest_sched`).
    pub(super) asleep: bool,
    /// Its rank in its job.
    pub(super) rank: u32,
    /// Messages arrived and not yet received, per source rank.
    pub(super) mailbox: Mailbox,
    /// Driver domain: the pass this thread is processing.
    pub(super) pass: Option<Pass>,
    pub(super) program: Program,
    pub(super) pc: usize,
    pub(super) loops: Vec<(usize, Option<u64>)>,
    pub(super) state: ThreadState,
    /// Locks held, innermost last, each with whether it was taken in kernel mode.
    pub(super) held: Vec<(u32, bool)>,
    /// Its ticket at the preemptable ticket lock it waits for (`sim/locks.rs`).
    pub(super) ticket: u64,
    /// When the I/O that delivers the next request completed.
    pub(super) io_done_at: Option<Time>,
    /// Where its footprint is warm (`cache`).
    pub(super) warmth: Option<Warmth>,
    /// When a client's request for it reached the NIC, before the driver domain received
    /// it (`client`): the request's latency starts there.
    pub(super) arrived_at: Option<Time>,
    pub(super) request_start: Time,
}

pub(super) struct Vcpu {
    pub(super) dom: DomId,
    pub(super) host: usize,
    pub(super) index: usize,
    /// The guest thread it runs (or halted in, or last ran).
    pub(super) curr: ThreadId,
    /// Its guest kernel's run queue: threads ready to run here, FIFO (`guest_sched`).
    pub(super) guest_rq: VecDeque<ThreadId>,
    /// Running time `curr` has had since it was switched in, for the guest's time slice.
    pub(super) guest_slice_ns: Time,
    pub(super) state: VcpuState,
    pub(super) state_since: Time,
    /// Time spent in each state, at [`state_slot`](super::accounting::state_slot): running,
    /// runnable (steal), blocked, and offline (before its VM was created, after it was
    /// destroyed).
    pub(super) state_ns: [Time; 4],
    pub(super) spin_ns: Time,
    pub(super) last_pcpu: Option<PcpuId>,
    /// Where its guest kernel's own footprint is warm, and whose footprint it touches while
    /// it runs: its thread's or its kernel's (`cache`).
    pub(super) kernel_warmth: Option<Warmth>,
    pub(super) touching: Option<Toucher>,
    /// The refill stalls since it was switched in, `[start, end)` each: counted in the
    /// host's `cache_refill_ns` for the part it sat through, when it leaves (`cache`).
    pub(super) refill_spans: Vec<(Time, Time)>,
    /// Guest code runs from here on (after the dispatch overheads).
    pub(super) run_from: Time,
    /// Progress has been accounted up to here.
    pub(super) synced_to: Time,
    /// Continuous kernel spinning (for PLE) is measured from here.
    pub(super) ple_from: Time,
    pub(super) gen: u32,
    pub(super) woke_at: Option<Time>,
    pub(super) ple_exits: u64,
    /// The current PLE window (grows with `ple_grow > 1`).
    pub(super) ple_window_ns: Time,
    /// Senders of IPIs this vCPU has not handled yet.
    pub(super) irqs: Vec<VcpuId>,
    /// Bumped when the vCPU is descheduled: cancels an interrupt delivery in flight.
    pub(super) irq_gen: u32,
    /// Its guest kernel's pending timer (`guest_kernel`): bumped to cancel it.
    pub(super) tick_gen: u32,
    /// Up for its guest timer only: when it runs it takes the handler, then halts again
    /// unless its thread was woken meanwhile (`guest_kernel`).
    pub(super) timer_wake: bool,
    /// Where its idle timer falls on its own grid (a tickless guest, `guest_kernel`).
    pub(super) idle_phase: Time,
    /// The end of the grace a reschedule was put off to, inside a marked critical section
    /// (`preempt_delay`).
    pub(super) delay_until: Option<Time>,
    /// The one pCPU it may run on (global id): a host's per-CPU kernel thread
    /// (`host_threads`).
    pub(super) pinned: Option<PcpuId>,
    /// Its halt-polling windows and poll (`halt_poll`).
    pub(super) halt: super::halt_poll::VcpuHalt,
}

pub(super) struct Pcpu {
    pub(super) host: usize,
    pub(super) curr: Option<VcpuId>,
    pub(super) since: Time,
    pub(super) busy_ns: Time,
    pub(super) idle_ns: Time,
    /// When the current slice ends (the policy's `slice_ns`), if it has a limit.
    pub(super) slice_deadline: Option<Time>,
    /// The pending slice-end event's time. One event per pCPU serves successive slices: a
    /// redispatch with a later deadline leaves the earlier event in place, which re-arms
    /// itself when it fires, so pCPUs that reschedule often do not fill the queue.
    pub(super) slice_timer_at: Option<Time>,
    pub(super) resched_gen: u32,
    pub(super) resched_due: Option<Time>,
    /// Its first tick, where ticks drift (`clocks`).
    pub(super) tick_phase: Time,
}

pub(super) struct Dom {
    pub(super) info: DomainInfo,
    /// Its vCPUs' global ids (`info.first_vcpu` is local to its host).
    pub(super) span: std::ops::Range<VcpuId>,
    /// Its guest threads' ids.
    pub(super) threads: std::ops::Range<ThreadId>,
    pub(super) host: usize,
    pub(super) job: usize,
    pub(super) messages_received: u64,
    pub(super) workload: String,
    pub(super) lock_kind: LockKind,
    pub(super) locks: Vec<Lock>,
    pub(super) barrier_waiters: Vec<ThreadId>,
    pub(super) barrier_arrived: usize,
    /// Threads a barrier waits for: every thread but those of the halted `idle_vcpus`.
    pub(super) barrier_parties: usize,
    pub(super) rng: StreamRng,
    pub(super) finite: bool,
    pub(super) alive: usize,
    pub(super) finished_at: Option<Time>,
    pub(super) lock_holder_preemptions: u64,
    pub(super) lock_waiter_preemptions: u64,
    pub(super) wake_latency_sum: Time,
    pub(super) wakes: u64,
    /// Latencies of the requests it served (`Instr::RequestEnd`), as a distribution: its
    /// size does not grow with the number of requests.
    pub(super) request_latencies: Histogram,
    /// Co-scheduling launches the policy reported for this VM (`World::co_launch`).
    pub(super) co_launches: u64,
    pub(super) costart: CoStart,
    pub(super) created_at: Time,
    /// When its workload started (its creation, or a seeded offset after it: `clocks`).
    pub(super) started_at: Time,
    pub(super) destroyed_at: Option<Time>,
    pub(super) ipi_syncs: u64,
    pub(super) pv_halts: u64,
    pub(super) pv_kicks: u64,
    pub(super) pv_tlb_flushes_deferred: u64,
    pub(super) pv_sched_yields: u64,
    pub(super) preempt_delays: u64,
    pub(super) preempt_delays_completed: u64,
    pub(super) preempt_delays_expired: u64,
    /// Its workload's working set, for cache refills (`cache`).
    pub(super) working_set_bytes: u64,
    /// Its guest kernel's timer interrupts and the phase of its tick grid (`guest_kernel`).
    pub(super) tick: GuestTick,
    pub(super) tick_phase: Time,
    /// `tick`'s periods, worked out once: a switch-in needs the tick grid twice, and each
    /// period is a division and a rounding.
    pub(super) tick_period_ns: Option<Time>,
    pub(super) idle_period_ns: Option<Time>,
    pub(super) guest_ticks: u64,
    pub(super) timer_wakes: u64,
    /// Its vCPUs' halt polls (`halt_poll`).
    pub(super) halt_stats: super::halt_poll::HaltStats,
}

/// One host's share of the core: its slices of the global arrays, its network backlog and
/// its tallies.
pub(super) struct HostState {
    pub(super) pcpus: std::ops::Range<PcpuId>,
    pub(super) vcpus: std::ops::Range<VcpuId>,
    pub(super) doms: std::ops::Range<DomId>,
    /// Its driver domain, if it has one.
    pub(super) driver: Option<DomId>,
    /// Passes (messages, disk requests) waiting for the driver domain.
    pub(super) backlog: VecDeque<Pass>,
    /// Its host threads, on a KVM host that has them (`host_threads`).
    pub(super) io: Option<HostIo>,
    /// When the disk is free (`disk`).
    pub(super) disk_free_at: Time,
    /// When the outgoing link is free.
    pub(super) link_free_at: Time,
    /// How far this host's scheduler ticks lag host 0's, as a fraction of the tick period
    /// (real hosts' timers are not synchronized; see `Simulation::align_host_clocks`).
    pub(super) clock_phase: f64,
    /// Each timer fires late by a draw in `[0, timer_slop_ns)` from `timer_rng` (`clocks`).
    pub(super) timer_slop_ns: Time,
    pub(super) timer_rng: StreamRng,
    pub(super) policy_rng: StreamRng,
    pub(super) counters: super::policy_counters::PolicyCounters,
    pub(super) context_switches: u64,
    pub(super) ipis: u64,
    pub(super) migrations: u64,
    /// Time its vCPUs spent refilling caches at switch-in (`cache`).
    pub(super) cache_refill_ns: Time,
    pub(super) sched_invocations: u64,
    pub(super) ple_exits: u64,
    pub(super) co_launches: u64,
    pub(super) co_ipis: u64,
    // Fragmentation: idle pCPUs while some vCPU waited.
    pub(super) n_idle: usize,
    pub(super) n_waiting: usize,
    pub(super) frag_since: Time,
    pub(super) frag_idle_ns: Time,
    /// Its VMs' fair shares of its pCPUs, for the `fairness` index (`entitlement.rs`).
    pub(super) entitlement: EntitlementMeter,
}

/// Everything but the policies. Policies see it through `world`.
pub(super) struct Core {
    pub(super) host: HostConfig,
    pub(super) network: NetworkConfig,
    pub(super) queue: EventQueue<PackedEv>,
    pub(super) pcpus: Vec<Pcpu>,
    pub(super) vcpus: Vec<Vcpu>,
    pub(super) threads: Vec<GuestThread>,
    pub(super) doms: Vec<Dom>,
    pub(super) hosts: Vec<HostState>,
    /// Each job's ranks (guest threads).
    pub(super) jobs: Vec<Vec<ThreadId>>,
    /// Each job's name, for the named ones (virtual clusters).
    pub(super) job_names: Vec<Option<String>>,
    pub(super) msgs: Slab<Msg>,
    pub(super) net: NetStats,
    pub(super) caches: CacheFills,
    pub(super) disk_reqs: Slab<DiskReq>,
    pub(super) io: IoStats,
    pub(super) ple_window_ns: Option<Time>,
    pub(super) ple_window_max_ns: Time,
    /// The PLE window's growth per exit: the scenario's, else the policy's hypervisor's.
    pub(super) ple_grow: u32,
    /// The longest a reschedule is put off inside a marked critical section; 0: never
    /// (`preempt_delay`).
    pub(super) preempt_delay_ns: Time,
    pub(super) pv_spin_ns: Time,
    /// A preemptable ticket lock's timeout per place in line (`HostConfig::pmt_unit_ns`).
    pub(super) pmt_unit_ns: Time,
    pub(super) events: u64,
    // Work for the current instant.
    pub(super) to_advance: VecDeque<VcpuId>,
    pub(super) to_sleep: VecDeque<(VcpuId, PcpuId)>,
    /// Running vCPUs that yield, and why (targets are global ids).
    pub(super) to_yield: VecDeque<(VcpuId, YieldReason)>,
    /// Threads woken in this instant by the host itself (a kick hypercall wakes its target
    /// before the kicker's yield is handled).
    pub(super) to_wake: VecDeque<ThreadId>,
    /// Guest events armed for later than the current instant, queued when it ends if their
    /// vCPU's generation still matches (`events::queue_guest_events`).
    pub(super) guest_events_due: Vec<PendingGuestEvent>,
    pub(super) unfinished: usize,
    pub(super) trace: Option<Trace>,
    pub(super) error: Option<super::RunError>,
    /// A guest thread of this domain looped in steps that take no time (`interpret`).
    pub(super) stalled: Option<DomId>,
    /// Hardware threads slowing their siblings, and what ran beside what (`smt`).
    pub(super) smt: super::smt::Smt,
    /// vCPUs polling in the host (`halt_poll`): few, usually none.
    pub(super) host_pollers: Vec<VcpuId>,
}

/// A running vCPU's next guest event, armed for after the current instant but not queued
/// yet. A pause-loop exit re-arms the spinner, then the policy's answer deschedules it at the
/// same instant, which makes the event stale; queueing it only once the instant is over, and
/// only if its generation is still current, spares the heap a push and a pop that would do
/// nothing (a third of all pops in the standard benchmark). Its ticket was taken when it was
/// armed, so it sorts exactly where an event queued at once would have.
#[derive(Debug, Clone, Copy)]
pub(super) struct PendingGuestEvent {
    pub(super) v: VcpuId,
    pub(super) gen: u32,
    pub(super) at: Time,
    pub(super) ticket: Ticket,
}

/// The random stream of host `h`'s policy. Host 0 keeps stream 0 (what a single host always
/// had); the others sit far above the domains' streams (`1 + d`).
pub(super) fn policy_stream(h: usize) -> u64 {
    if h == 0 {
        0
    } else {
        (1 << 40) + h as u64
    }
}

/// Random streams of the hosts' clock phases (`CLOCK_PHASE_STREAM + h`), above the policies'.
pub(super) const CLOCK_PHASE_STREAM: u64 = 2 << 40;
