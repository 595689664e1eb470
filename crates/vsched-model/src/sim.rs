//! The host simulator: pCPUs, domains, vCPUs, guest threads, and the event loop that joins
//! them to a [`Policy`].
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
//! # Guest execution
//! A vCPU dispatched at `t` starts executing guest code at `t + overhead` (scheduler cost,
//! plus a context switch if it replaces another vCPU, plus the migration penalty if it last
//! ran on another pCPU). Progress is analytic: a compute of `d` that starts at `s` finishes at
//! `s + d` unless the vCPU is descheduled first, in which case what is left is kept. Spinning
//! is a state, not a loop of events: a spinner costs one event when it starts, one when its
//! wait ends, and one per pause-loop exit. Each running vCPU has at most one pending guest
//! event, stamped with a generation number; descheduling bumps the generation, which cancels
//! the event in O(1) (a stale event is dropped when it surfaces and is not counted).
//!
//! # Pause-loop exiting (PLE)
//! Intel VT-x exits when a guest in kernel mode executes PAUSE in a loop longer than
//! `ple_window` cycles, PAUSEs closer than `ple_gap` cycles counting as one loop. A spinner
//! here pauses continuously, so the gap never splits a loop: continuous kernel-mode spinning
//! of `ple_window_cycles / cpu_ghz` ns raises an exit, which the policy sees as `yield_`; the
//! window restarts after each exit and each time the vCPU is scheduled in. Xen keeps the
//! window fixed; KVM grows it ×`ple_grow` at each exit (`grow_ple_window`, vmx.c) and resets
//! it when the vCPU is scheduled in (`vmx_sched_in` → `shrink_ple_window` with the default
//! `ple_window_shrink = 0`), which `ple_grow > 1` turns on.
//!
//! # Guest IPIs (`ipi_sync`, a TLB shootdown)
//! The sender interrupts every other vCPU of its VM that has the address space live, then
//! spins in kernel mode until each has acknowledged. A halted vCPU (blocked) is in lazy-TLB
//! mode and is skipped, as Linux skips lazy CPUs; with paravirtual features on, a preempted
//! vCPU is skipped too (KVM's PV TLB flush sets a flag instead, specs §5). A running target
//! takes the interrupt one IPI latency later; a preempted one when it is next scheduled in
//! (virtual interrupts are injected at VM entry); a target that halts first handles it on
//! the way (interrupts are enabled at `sti; hlt`). The acknowledgement is sent as the
//! handler starts; the handler then costs the target `ipi_handler_ns` of no progress.
//!
//! # Paravirtual spinlocks (a VM option; kernel locks only)
//! Linux's pv qspinlock (kernel/locking/qspinlock_paravirt.h), reduced to its scheduling
//! effects: waiters queue FIFO; a queued waiter spins `SPIN_THRESHOLD` (2^15) iterations of
//! `spin_iteration_cycles`, then halts (`pv_wait`, the vCPU blocks); an unlock hands the lock
//! to the queue head if it is spinning on a pCPU, otherwise leaves it free and kicks the head
//! if it halted (`pv_kick`, woken one IPI latency later). While the head is not spinning on a
//! pCPU a newcomer may steal the free lock (`pv_hybrid_queued_unfair_trylock`). Not
//! modelled: a waiter halting early when its predecessor's vCPU is preempted, and the
//! directed yield that KVM's kick hypercall adds.
//!
//! # Clusters and the network
//! A simulation holds one or more identical hosts under one clock and one event queue. Each
//! host runs its own instance of the policy and sees only its own pCPUs, vCPUs and domains,
//! numbered from 0 ([`Cx`] translates), so the VMMs decide autonomously (seed 002 §3); they
//! share nothing but the messages their guests exchange. Their clocks are not synchronized:
//! host h > 0's scheduler ticks lag host 0's by a random fraction of the tick period (drawn
//! once per run from its own stream; `align_host_clocks` removes the lag). Policy timers
//! are not shifted.
//!
//! Guests exchange messages between ranks of a job (a virtual cluster, or one VM alone):
//! `send` is asynchronous, `recv` takes the next message from one source rank, busy-polling
//! (user mode, no PLE) or blocking. A message takes one of three routes:
//! - ranks of one VM: shared memory, `shm_latency + bytes / shm_bandwidth`;
//! - VMs of one host: the software bridge, `intra_host_latency + bytes / intra_host_bandwidth`,
//!   after one pass through the host's driver domain if it has one;
//! - VMs of different hosts: the sender's link, FIFO (a message starts when the link is free
//!   and holds it for `bytes / bandwidth`), then `latency` to the receiving host; with a
//!   driver domain, one pass through the sender's (transmit) and one through the receiver's
//!   (receive).
//!
//! A message is carried as one unit; its packets (`ceil(bytes / mtu)`, at least one) only set
//! the driver domain's work and the receiving VM's `rx_packets`. The receiving NIC does not
//! serialize (no incast contention).
//!
//! # The driver domain (dom0)
//! Xen's network I/O goes through dom0's netback, which the hypervisor schedules like any
//! VM. A host's driver domain is a VM whose vCPUs run `NetServe`: take the next message pass
//! from the host's backlog, spend `dom0_packet_ns` per packet on it (no progress elsewhere
//! while it waits for a pCPU), forward it, repeat; with an empty backlog a vCPU blocks, and
//! a new pass wakes one blocked vCPU one IPI latency later (an event-channel notification).
//!
//! # VMs created and destroyed during a run
//! Before its creation and after its destruction a VM's vCPUs are `Offline`. Creation makes
//! them runnable at the start of their programs and inserts them into the policy; destruction
//! takes running ones off their pCPUs (`sleep`, then `pick_next`) and removes them all.

use std::collections::{BTreeMap, VecDeque};

use vsched_engine::{EventQueue, RngStreams, StreamRng, Ticket, Time, NS_PER_US};

use crate::guest::{BarrierWait, GuestSpec, Instr, LockChoice, LockKind, Program, FOREVER};
use crate::ids::{DomId, PcpuId, VcpuId};
use crate::metrics::{
    cdf_quantiles, quantile, weighted_fairness, ClusterMetrics, HostMetrics, NetworkMetrics, RunMetrics, VmMetrics,
};
use crate::policy::{Decision, Policy, YieldReason};
use crate::trace::Trace;
use rand::Rng;

/// Host hardware and hypervisor overheads. Defaults are order-of-magnitude figures for a
/// 2010s x86 server running Xen or KVM; every one can be set in the scenario's `[host]`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    pub pcpus: usize,
    /// Clock used to turn PLE cycle counts into time.
    pub cpu_ghz: f64,
    /// Saving one vCPU's state and loading another's (VMCS switch, register state).
    pub context_switch_ns: Time,
    /// From sending an IPI to the target pCPU entering its scheduler.
    pub ipi_latency_ns: Time,
    /// Cache refill a vCPU pays (no progress) after it moves to another pCPU.
    pub migration_penalty_ns: Time,
    /// Cost of one scheduler invocation on a pCPU (charged before the chosen vCPU runs).
    pub sched_cost_ns: Time,
    /// PLE window in cycles (0 disables pause-loop exiting). Xen and KVM default: 4096.
    pub ple_window_cycles: u64,
    /// PLE gap in cycles. Recorded for completeness; see the module notes for why it does
    /// not change a continuous spin.
    pub ple_gap_cycles: u64,
    /// Window growth factor per exit; 1 keeps it fixed (Xen), 2 is KVM's `ple_window_grow`
    /// (and then the window resets to `ple_window_cycles` when the vCPU is scheduled in).
    pub ple_grow: u32,
    /// KVM's `ple_window_max`: the window never grows beyond this.
    pub ple_window_max_cycles: u64,
    /// A guest's IPI handler (a TLB flush and its acknowledgement).
    pub ipi_handler_ns: Time,
    /// One iteration of a paravirtual spinlock's wait loop (PAUSE, load, compare).
    pub spin_iteration_cycles: u64,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            pcpus: 4,
            cpu_ghz: 2.0,
            context_switch_ns: 2 * NS_PER_US,
            ipi_latency_ns: 2 * NS_PER_US,
            migration_penalty_ns: 20 * NS_PER_US,
            sched_cost_ns: NS_PER_US / 2,
            ple_window_cycles: 4096,
            ple_gap_cycles: 128,
            ple_grow: 1,
            // KVM_VMX_DEFAULT_PLE_WINDOW_MAX (UINT_MAX): unbounded in practice.
            ple_window_max_cycles: u32::MAX as u64,
            ipi_handler_ns: NS_PER_US,
            // A 2010s PAUSE takes ~10 cycles, plus the load and branch of the loop.
            spin_iteration_cycles: 16,
        }
    }
}

impl HostConfig {
    pub fn ple_window_ns(&self) -> Option<Time> {
        (self.ple_window_cycles > 0).then(|| self.cycles_ns(self.ple_window_cycles))
    }

    fn cycles_ns(&self, cycles: u64) -> Time {
        ((cycles as f64) / self.cpu_ghz).round().max(1.0) as Time
    }

    /// How long a paravirtual spinlock waiter spins before it halts: `SPIN_THRESHOLD`
    /// (1 << 15, qspinlock_paravirt.h) iterations.
    pub fn pv_spin_ns(&self) -> Time {
        self.cycles_ns((1 << 15) * self.spin_iteration_cycles)
    }
}

/// The network between and within hosts (see the module notes). Defaults are a 10 GbE-class
/// cluster of the early 2010s with kernel TCP/IP (MPI over TCP); every one can be set in the
/// scenario's `[network]`.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfig {
    /// One way between hosts: NIC, switch and protocol stack, for a small message.
    pub latency_ns: Time,
    /// Each host's link, bits per nanosecond (= Gbit/s).
    pub bandwidth_gbps: f64,
    /// One way between VMs of one host through the software bridge.
    pub intra_host_latency_ns: Time,
    pub intra_host_bandwidth_gbps: f64,
    /// Between ranks of one VM (MPI's shared-memory transport).
    pub shm_latency_ns: Time,
    pub shm_bandwidth_gbps: f64,
    /// Packet size for packet counts and driver-domain work.
    pub mtu_bytes: u64,
    /// Driver-domain (dom0) CPU time per packet and pass (netback and bridge work).
    pub dom0_packet_ns: Time,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            // 10 GbE with kernel TCP: ~10 µs one way for a small message.
            latency_ns: 10 * NS_PER_US,
            bandwidth_gbps: 10.0,
            // A bridge hop between two virtual NICs: a few µs, a memory copy.
            intra_host_latency_ns: 5 * NS_PER_US,
            intra_host_bandwidth_gbps: 20.0,
            // Shared-memory MPI: sub-µs latency, memory bandwidth.
            shm_latency_ns: NS_PER_US / 2,
            shm_bandwidth_gbps: 50.0,
            mtu_bytes: 1500,
            // Xen netback of the era: ~2 µs of dom0 CPU per 1500-byte packet.
            dom0_packet_ns: 2 * NS_PER_US,
        }
    }
}

impl NetworkConfig {
    /// Time to push `bytes` through a link of `gbps`, rounded to the nanosecond.
    pub fn transfer_ns(bytes: u64, gbps: f64) -> Time {
        ((bytes * 8) as f64 / gbps).round() as Time
    }

    /// The packets a message of `bytes` takes (at least one).
    pub fn packets(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.mtu_bytes).max(1)
    }
}

/// A VM's type, used by co-scheduling policies (seed 003): HIT (high-throughput) VMs are
/// scheduled vCPU by vCPU; CON (concurrent) VMs want their vCPUs to run together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmType {
    Hit,
    Con,
}

impl VmType {
    pub fn as_str(self) -> &'static str {
        match self {
            VmType::Hit => "HIT",
            VmType::Con => "CON",
        }
    }
}

/// A domain as the scenario describes it.
#[derive(Debug, Clone)]
pub struct DomainConfig {
    pub name: String,
    pub weight: u32,
    /// Percent of one pCPU; 0 = no cap.
    pub cap: u32,
    pub vm_type: VmType,
    /// Workload name, for reports.
    pub workload: String,
    pub guest: GuestSpec,
    /// Paravirtual spinlocks for kernel locks (see the module notes).
    pub pv_spinlocks: bool,
    /// When the VM is created (0: exists from the start).
    pub start_at: Time,
    /// When the VM is destroyed, if ever.
    pub stop_at: Option<Time>,
    /// The host it runs on. Domains must be listed host by host (non-decreasing).
    pub host: usize,
    /// The parallel job (virtual cluster) it belongs to; domains naming the same job form it,
    /// their vCPUs being its ranks in domain order. `None`: the VM is a job of its own.
    pub job: Option<String>,
    /// The host's driver domain (dom0): its guest must be [`driver_guest`].
    pub driver: bool,
}

/// The guest of a driver domain with `vcpus` vCPUs: every vCPU serves the host's network
/// backlog forever (see the module notes).
pub fn driver_guest(vcpus: usize) -> GuestSpec {
    let mut b = crate::guest::ProgramBuilder::new();
    b.repeat(None).push(Instr::NetServe).end_repeat();
    let program = b.build();
    GuestSpec::lockless(vec![program; vcpus], false)
}

/// What policies may read about a domain.
#[derive(Debug, Clone)]
pub struct DomainInfo {
    pub name: String,
    pub vcpus: usize,
    pub weight: u32,
    pub cap: u32,
    pub vm_type: VmType,
    /// Global id of the domain's vCPU 0; its vCPUs are `first_vcpu .. first_vcpu + vcpus`.
    pub first_vcpu: VcpuId,
    /// The VM exists now (false before it is created and after it is destroyed).
    pub online: bool,
    /// Network packets delivered to the VM's vCPUs so far (messages from other VMs, counted
    /// in MTU-sized packets; messages between ranks of one VM use shared memory and are not
    /// packets). Seed 002's CVS reads its change since a VM was last descheduled.
    pub rx_packets: u64,
}

/// The host-level state of a vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VcpuState {
    Running(PcpuId),
    /// Runnable but not running: waiting in some policy queue (this is steal time).
    Runnable,
    Blocked,
    /// The VM does not exist (yet, or any more): created later in the run, or destroyed.
    Offline,
}

/// What the vCPU's guest thread is doing.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Thread {
    /// About to interpret its next instruction.
    Ready,
    Computing {
        left: Time,
    },
    /// Waiting for a lock; `budget` is what is left of a paravirtual waiter's spinning
    /// before it halts.
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
    /// Waiting for `pending` IPI acknowledgements (`ipi_sync`).
    SpinIpi {
        pending: u32,
    },
    /// Spinning at the barrier; `limit_left` is the spinning time left before blocking.
    SpinBarrier {
        limit_left: Option<Time>,
    },
    /// Busy-polling for a message from rank `from`; `limit_left` as at a barrier.
    SpinRecv {
        from: u32,
        limit_left: Option<Time>,
    },
    BlockedIo,
    BlockedBarrier,
    BlockedRecv {
        from: u32,
    },
    /// A driver-domain vCPU with an empty backlog.
    BlockedNet,
    Exited,
}

impl Thread {
    fn spinning(self) -> bool {
        matches!(
            self,
            Thread::SpinLock { .. } | Thread::SpinBarrier { .. } | Thread::SpinIpi { .. } | Thread::SpinRecv { .. }
        )
    }
}

struct Vcpu {
    dom: DomId,
    host: usize,
    index: usize,
    /// Its rank in its job.
    rank: u32,
    /// Messages arrived and not yet received, per source rank (sized on first use).
    mailbox: Vec<u32>,
    /// Driver domain: the message pass this vCPU is processing.
    net_msg: Option<u32>,
    state: VcpuState,
    state_since: Time,
    running_ns: Time,
    runnable_ns: Time,
    blocked_ns: Time,
    /// Before its VM was created and after it was destroyed.
    offline_ns: Time,
    spin_ns: Time,
    last_pcpu: Option<PcpuId>,
    /// Guest code runs from here on (after the dispatch overheads).
    run_from: Time,
    /// Progress has been accounted up to here.
    synced_to: Time,
    /// Continuous kernel spinning (for PLE) is measured from here.
    ple_from: Time,
    gen: u32,
    woke_at: Option<Time>,
    program: Program,
    pc: usize,
    loops: Vec<(usize, Option<u64>)>,
    thread: Thread,
    /// Locks held, innermost last, each with whether it was taken in kernel mode.
    held: Vec<(u32, bool)>,
    /// When the I/O that delivers the next request completed.
    io_done_at: Option<Time>,
    request_start: Time,
    ple_exits: u64,
    /// The current PLE window (grows with `ple_grow > 1`).
    ple_window_ns: Time,
    /// Senders of IPIs this vCPU has not handled yet.
    irqs: Vec<VcpuId>,
    /// Bumped when the vCPU is descheduled: cancels an interrupt delivery in flight.
    irq_gen: u32,
}

struct Pcpu {
    host: usize,
    curr: Option<VcpuId>,
    since: Time,
    busy_ns: Time,
    idle_ns: Time,
    /// When the current slice ends (the policy's `slice_ns`), if it has a limit.
    slice_deadline: Option<Time>,
    /// The pending slice-end event's time. One event per pCPU serves successive slices: a
    /// redispatch with a later deadline leaves the earlier event in place, which re-arms
    /// itself when it fires, so pCPUs that reschedule often do not fill the queue.
    slice_timer_at: Option<Time>,
    resched_gen: u32,
    resched_due: Option<Time>,
}

#[derive(Default)]
struct Lock {
    holder: Option<VcpuId>,
    /// Ticket order (ticket locks) or the set of spinners (test-and-set).
    waiters: VecDeque<VcpuId>,
}

struct Dom {
    info: DomainInfo,
    /// Its vCPUs' global ids (`info.first_vcpu` is local to its host).
    span: std::ops::Range<VcpuId>,
    host: usize,
    job: usize,
    messages_received: u64,
    workload: String,
    lock_kind: LockKind,
    locks: Vec<Lock>,
    barrier_waiters: Vec<VcpuId>,
    barrier_arrived: usize,
    rng: StreamRng,
    finite: bool,
    alive: usize,
    finished_at: Option<Time>,
    lock_holder_preemptions: u64,
    lock_waiter_preemptions: u64,
    wake_latency_sum: Time,
    wakes: u64,
    request_latencies: Vec<Time>,
    /// Co-scheduling launches the policy reported for this VM (`Cx::co_launch`).
    co_launches: u64,
    costart: CoStart,
    pv_spinlocks: bool,
    created_at: Time,
    destroyed_at: Option<Time>,
    ipi_syncs: u64,
    pv_halts: u64,
    pv_kicks: u64,
}

/// Measures co-start skew (seed 004 Fig. 6, "the scheduling time edge difference between
/// the VCPUs"): each time a vCPU starts running (a switch-in; a running vCPU given a new
/// slice has no new edge) and every vCPU of its VM that is not blocked is running (at least
/// two of them), one sample is the time from the earliest of their switch-ins to now.
#[derive(Default)]
struct CoStart {
    /// When each vCPU of the VM last started running.
    started_at: Vec<Time>,
    skews: Vec<Time>,
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    Guest {
        v: VcpuId,
        gen: u32,
    },
    Wake {
        v: VcpuId,
    },
    Timer {
        host: u32,
        id: u64,
    },
    Tick {
        p: PcpuId,
    },
    SliceEnd {
        p: PcpuId,
    },
    Resched {
        p: PcpuId,
        gen: u32,
    },
    /// The scenario changes a VM's type (seed 003 §4.4, seed 004 §V-B: `xm sched-... -t`).
    SetType {
        d: DomId,
        ty: VmType,
    },
    /// An IPI reaches a running vCPU (stale if it was descheduled since: `gen` is its
    /// `irq_gen`).
    Irq {
        v: VcpuId,
        gen: u32,
    },
    /// The scenario creates or destroys a VM.
    Create {
        d: DomId,
    },
    Destroy {
        d: DomId,
    },
    /// Message `m` reaches the end of its current network stage.
    Net {
        m: u32,
    },
}

impl Ev {
    /// Tie-break at one instant (see the module notes).
    fn priority(&self) -> u8 {
        match self {
            Ev::Guest { .. } | Ev::Irq { .. } => 0,
            Ev::Wake { .. } | Ev::Net { .. } => 1,
            Ev::Timer { .. } | Ev::SetType { .. } | Ev::Create { .. } | Ev::Destroy { .. } => 2,
            Ev::Tick { .. } => 3,
            Ev::SliceEnd { .. } => 4,
            Ev::Resched { .. } => 5,
        }
    }
}

/// Where a message is on its way (see the module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting for, or in, the sending host's driver domain.
    Transmit,
    /// Waiting for, or in, the driver domain of the host of both VMs.
    Bridge,
    /// On the wire to the receiving host.
    Wire,
    /// Waiting for, or in, the receiving host's driver domain.
    Receive,
    /// Travelling to the receiving vCPU (shared memory, bridge or last hop).
    Deliver,
}

struct Msg {
    src: VcpuId,
    dst: VcpuId,
    bytes: u64,
    packets: u64,
    sent_at: Time,
    stage: Stage,
}

/// One host's share of the core: its slices of the global arrays, its network backlog and
/// its tallies.
struct HostState {
    pcpus: std::ops::Range<PcpuId>,
    vcpus: std::ops::Range<VcpuId>,
    doms: std::ops::Range<DomId>,
    /// Its driver domain, if it has one.
    driver: Option<DomId>,
    /// Message passes waiting for the driver domain.
    backlog: VecDeque<u32>,
    /// When the outgoing link is free.
    link_free_at: Time,
    /// How far this host's scheduler ticks lag host 0's, as a fraction of the tick period
    /// (real hosts' timers are not synchronized; see `Simulation::align_host_clocks`).
    clock_phase: f64,
    policy_rng: StreamRng,
    counters: BTreeMap<&'static str, u64>,
    context_switches: u64,
    ipis: u64,
    migrations: u64,
    sched_invocations: u64,
    ple_exits: u64,
    co_launches: u64,
    co_ipis: u64,
    // Fragmentation: idle pCPUs while some vCPU waited.
    n_idle: usize,
    n_waiting: usize,
    frag_since: Time,
    frag_idle_ns: Time,
}

/// Network-wide tallies.
#[derive(Default)]
struct NetStats {
    messages: u64,
    bytes: u64,
    packets: u64,
    driver_passes: u64,
    delivered: u64,
    latency_sum_ns: Time,
}

/// Everything but the policies. Policies see it through [`Cx`].
pub struct Core {
    pub host: HostConfig,
    pub network: NetworkConfig,
    queue: EventQueue<Ev>,
    pcpus: Vec<Pcpu>,
    vcpus: Vec<Vcpu>,
    doms: Vec<Dom>,
    hosts: Vec<HostState>,
    /// Each job's ranks (global vCPU ids).
    jobs: Vec<Vec<VcpuId>>,
    /// Each job's name, for the named ones (virtual clusters).
    job_names: Vec<Option<String>>,
    msgs: Vec<Msg>,
    free_msgs: Vec<u32>,
    net: NetStats,
    ple_window_ns: Option<Time>,
    ple_window_max_ns: Time,
    pv_spin_ns: Time,
    events: u64,
    // Work for the current instant.
    to_advance: VecDeque<VcpuId>,
    to_sleep: VecDeque<(VcpuId, PcpuId)>,
    to_yield: VecDeque<VcpuId>,
    unfinished: usize,
    trace: Option<Trace>,
    error: Option<String>,
}

/// The policy's window on the simulator: one host, whose pCPUs, vCPUs and domains it
/// numbers from 0. `here` is the pCPU the callback runs on, if any.
pub struct Cx<'a> {
    core: &'a mut Core,
    host: usize,
    /// Global id of `here`.
    here: Option<PcpuId>,
    /// The host's first global pCPU, vCPU and domain ids, and its counts (read once: callbacks
    /// ask for them on every step).
    pcpu_base: PcpuId,
    vcpu_base: VcpuId,
    dom_base: DomId,
    n_pcpus: usize,
    n_vcpus: usize,
}

impl<'a> Cx<'a> {
    /// The context of host `h`'s policy, on global pCPU `here`.
    fn new(core: &'a mut Core, h: usize, here: Option<PcpuId>) -> Self {
        let hs = &core.hosts[h];
        let (pcpu_base, vcpu_base, dom_base) = (hs.pcpus.start, hs.vcpus.start, hs.doms.start);
        let (n_pcpus, n_vcpus) = (hs.pcpus.len(), hs.vcpus.len());
        Cx { core, host: h, here, pcpu_base, vcpu_base, dom_base, n_pcpus, n_vcpus }
    }
    fn local_state(&self, s: VcpuState) -> VcpuState {
        match s {
            VcpuState::Running(p) => VcpuState::Running(p - self.pcpu_base),
            other => other,
        }
    }
    fn vc(&self, v: VcpuId) -> &Vcpu {
        &self.core.vcpus[self.vcpu_base + v]
    }

    /// Current time in nanoseconds.
    pub fn now(&self) -> Time {
        self.core.queue.now()
    }
    /// Whether the run is under way, so that a `vcpu_insert` belongs to a VM created mid-run.
    /// The initial vCPUs are inserted at time 0 before any pCPU schedules, and only VMs that
    /// start later are created by an event.
    pub fn mid_run(&self) -> bool {
        self.now() > 0
    }
    pub fn n_pcpus(&self) -> usize {
        self.n_pcpus
    }
    pub fn n_vcpus(&self) -> usize {
        self.n_vcpus
    }
    pub fn domains(&self) -> impl ExactSizeIterator<Item = &DomainInfo> {
        self.core.doms[self.core.hosts[self.host].doms.clone()].iter().map(|d| &d.info)
    }
    pub fn domain(&self, d: DomId) -> &DomainInfo {
        &self.core.doms[self.dom_base + d].info
    }
    /// The domain of vCPU `v`.
    pub fn dom_of(&self, v: VcpuId) -> DomId {
        self.vc(v).dom - self.dom_base
    }
    /// The index of `v` within its domain (its `vcpu_id`).
    pub fn vcpu_index(&self, v: VcpuId) -> usize {
        self.vc(v).index
    }
    pub fn state(&self, v: VcpuId) -> VcpuState {
        self.local_state(self.vc(v).state)
    }
    /// Runnable or running.
    pub fn is_runnable(&self, v: VcpuId) -> bool {
        matches!(self.vc(v).state, VcpuState::Runnable | VcpuState::Running(_))
    }
    /// Whether `v`'s guest is in kernel mode (holding or spinning on a kernel lock, or
    /// waiting for IPI acknowledgements), as the hypervisor learns it on a VM exit
    /// (KVM's `kvm_arch_vcpu_preempted_in_kernel`).
    pub fn guest_in_kernel(&self, v: VcpuId) -> bool {
        let vc = self.vc(v);
        matches!(vc.thread, Thread::SpinLock { kernel: true, .. }) || vc.held.iter().any(|&(_, k)| k)
    }
    /// Whether `v`'s guest is busy-waiting (on a lock, at a spinning barrier, for IPI
    /// acknowledgements, polling for a message).
    pub fn guest_spinning(&self, v: VcpuId) -> bool {
        self.vc(v).thread.spinning()
    }
    pub fn running_on(&self, v: VcpuId) -> Option<PcpuId> {
        match self.vc(v).state {
            VcpuState::Running(p) => Some(p - self.pcpu_base),
            _ => None,
        }
    }
    /// The pCPU `v` last ran on.
    pub fn last_pcpu(&self, v: VcpuId) -> Option<PcpuId> {
        self.vc(v).last_pcpu.map(|p| p - self.pcpu_base)
    }
    /// The vCPU `p` is running, or `None` if idle.
    pub fn curr(&self, p: PcpuId) -> Option<VcpuId> {
        self.core.pcpus[self.pcpu_base + p].curr.map(|v| v - self.vcpu_base)
    }
    /// The pCPU this callback runs on, if any.
    pub fn here(&self) -> Option<PcpuId> {
        self.here.map(|p| p - self.pcpu_base)
    }

    /// Ask `p` to call `pick_next`. On `here` it happens at once; on another pCPU it is an
    /// IPI that lands after the host's IPI latency (and is counted).
    pub fn resched(&mut self, p: PcpuId) {
        let now = self.now();
        let p = self.pcpu_base + p;
        if Some(p) == self.here {
            self.core.request_resched(p, now);
        } else {
            let at = now + self.core.host.ipi_latency_ns;
            if self.core.request_resched(p, at) {
                self.core.hosts[self.host].ipis += 1;
            }
        }
    }

    /// A co-scheduling signal: like [`Cx::resched`], and also counted in the host's
    /// `co_ipis` when it is an IPI (seed 004's SCHED_SIG, seed 003's SCHEDULE_SOFTIRQ raise).
    pub fn co_signal(&mut self, p: PcpuId) {
        let before = self.core.hosts[self.host].ipis;
        self.resched(p);
        let h = &mut self.core.hosts[self.host];
        h.co_ipis += h.ipis - before;
    }

    /// Records that the policy launched a co-scheduling of domain `d` (reported per VM and as
    /// `co_launches_per_s`, seed 004 Fig. 5).
    pub fn co_launch(&mut self, d: DomId) {
        let d = self.dom_base + d;
        self.core.doms[d].co_launches += 1;
        self.core.hosts[self.host].co_launches += 1;
    }

    /// The vCPUs of domain `d`.
    pub fn vcpus_of(&self, d: DomId) -> std::ops::Range<VcpuId> {
        let info = self.domain(d);
        info.first_vcpu..info.first_vcpu + info.vcpus
    }

    /// Calls `timer(id)` at time `at` (not before now).
    pub fn set_timer(&mut self, at: Time, id: u64) -> Ticket {
        let at = at.max(self.now());
        let host = self.host as u32;
        self.core.post(at, Ev::Timer { host, id })
    }

    pub fn cancel_timer(&mut self, ticket: Ticket) {
        self.core.queue.cancel(ticket);
    }

    /// Adds one to a policy-specific counter, reported under `host.policy_counters`.
    pub fn count(&mut self, name: &'static str) {
        *self.core.hosts[self.host].counters.entry(name).or_insert(0) += 1;
    }

    /// The policy's own seeded random stream.
    pub fn rng(&mut self) -> &mut StreamRng {
        &mut self.core.hosts[self.host].policy_rng
    }
}

/// The error of a run its progress callback stopped.
pub const INTERRUPTED: &str = "interrupted";

/// Hosts, their domains and a policy instance per host, ready to run.
pub struct Simulation {
    core: Core,
    /// One per host, in host order.
    policies: Vec<Box<dyn Policy>>,
}

/// How a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    Horizon,
    /// When every finite workload has finished (still capped by the horizon).
    AllDone,
}

/// The random stream of host `h`'s policy. Host 0 keeps stream 0 (what a single host always
/// had); the others sit far above the domains' streams (`1 + d`).
fn policy_stream(h: usize) -> u64 {
    if h == 0 {
        0
    } else {
        (1 << 40) + h as u64
    }
}

/// Random streams of the hosts' clock phases (`CLOCK_PHASE_STREAM + h`), above the policies'.
const CLOCK_PHASE_STREAM: u64 = 2 << 40;

impl Simulation {
    /// One host running `policy`, no network.
    pub fn new(host: HostConfig, domains: Vec<DomainConfig>, policy: Box<dyn Policy>, seed: u64) -> Self {
        Self::cluster(host, NetworkConfig::default(), domains, vec![policy], seed)
    }

    /// `policies.len()` identical hosts joined by `network`, each scheduled by its own
    /// policy instance. Domains are listed host by host (`DomainConfig::host`); a host has at
    /// most one driver domain.
    ///
    /// # Panics
    /// If the domains are not in host order, name a host out of range, or a host has two
    /// driver domains (scenario validation refuses these first).
    pub fn cluster(
        host: HostConfig,
        network: NetworkConfig,
        domains: Vec<DomainConfig>,
        policies: Vec<Box<dyn Policy>>,
        seed: u64,
    ) -> Self {
        let n_hosts = policies.len();
        assert!(n_hosts > 0, "a simulation needs at least one host");
        assert!(domains.windows(2).all(|w| w[0].host <= w[1].host), "domains must be listed host by host");
        assert!(domains.iter().all(|d| d.host < n_hosts), "a domain names a host out of range");
        let streams = RngStreams::new(seed);
        let mut vcpus = Vec::new();
        let mut doms = Vec::new();
        let mut unfinished = 0;
        let mut lifecycle = Vec::new();
        let mut jobs: Vec<Vec<VcpuId>> = Vec::new();
        let mut job_names: Vec<Option<String>> = Vec::new();
        let mut hosts: Vec<HostState> = (0..n_hosts)
            .map(|h| HostState {
                pcpus: h * host.pcpus..(h + 1) * host.pcpus,
                vcpus: 0..0,
                doms: 0..0,
                driver: None,
                backlog: VecDeque::new(),
                link_free_at: 0,
                clock_phase: if h == 0 { 0.0 } else { streams.stream(CLOCK_PHASE_STREAM + h as u64).gen::<f64>() },
                policy_rng: streams.stream(policy_stream(h)),
                counters: BTreeMap::new(),
                context_switches: 0,
                ipis: 0,
                migrations: 0,
                sched_invocations: 0,
                ple_exits: 0,
                co_launches: 0,
                co_ipis: 0,
                n_idle: host.pcpus,
                n_waiting: 0,
                frag_since: 0,
                frag_idle_ns: 0,
            })
            .collect();
        let ple_base_ns = host.ple_window_ns().unwrap_or(0);
        for (d, cfg) in domains.into_iter().enumerate() {
            let h = cfg.host;
            let hs = &mut hosts[h];
            if hs.doms.is_empty() {
                hs.doms = d..d;
                hs.vcpus = vcpus.len()..vcpus.len();
            }
            hs.doms.end = d + 1;
            if cfg.driver {
                assert!(hs.driver.is_none(), "host {h} has two driver domains");
                hs.driver = Some(d);
            }
            let first_vcpu = vcpus.len();
            let n = cfg.guest.programs.len();
            hs.vcpus.end = first_vcpu + n;
            let local_first = first_vcpu - hs.vcpus.start;
            // A named job gathers its domains; an unnamed one is the domain alone.
            let existing = cfg.job.as_ref().and_then(|name| job_names.iter().position(|j| j.as_ref() == Some(name)));
            let job = existing.unwrap_or_else(|| {
                job_names.push(cfg.job.clone());
                jobs.push(Vec::new());
                jobs.len() - 1
            });
            let online = cfg.start_at == 0;
            if !online {
                lifecycle.push((cfg.start_at, Ev::Create { d }));
            }
            if let Some(at) = cfg.stop_at {
                lifecycle.push((at, Ev::Destroy { d }));
            }
            for (index, program) in cfg.guest.programs.iter().enumerate() {
                let rank = jobs[job].len() as u32;
                jobs[job].push(vcpus.len());
                vcpus.push(Vcpu {
                    dom: d,
                    host: h,
                    index,
                    rank,
                    mailbox: Vec::new(),
                    net_msg: None,
                    state: if online { VcpuState::Runnable } else { VcpuState::Offline },
                    state_since: 0,
                    running_ns: 0,
                    runnable_ns: 0,
                    blocked_ns: 0,
                    offline_ns: 0,
                    spin_ns: 0,
                    last_pcpu: None,
                    run_from: 0,
                    synced_to: 0,
                    ple_from: 0,
                    gen: 0,
                    woke_at: None,
                    program: program.clone(),
                    pc: 0,
                    loops: Vec::new(),
                    thread: Thread::Ready,
                    held: Vec::new(),
                    io_done_at: None,
                    request_start: 0,
                    ple_exits: 0,
                    ple_window_ns: ple_base_ns,
                    irqs: Vec::new(),
                    irq_gen: 0,
                });
                if online {
                    hs.n_waiting += 1;
                }
            }
            if cfg.guest.finite {
                unfinished += 1;
            }
            doms.push(Dom {
                info: DomainInfo {
                    name: cfg.name,
                    vcpus: n,
                    weight: cfg.weight,
                    cap: cfg.cap,
                    vm_type: cfg.vm_type,
                    first_vcpu: local_first,
                    online,
                    rx_packets: 0,
                },
                span: first_vcpu..first_vcpu + n,
                host: h,
                job,
                messages_received: 0,
                workload: cfg.workload,
                lock_kind: cfg.guest.lock_kind,
                locks: (0..cfg.guest.locks).map(|_| Lock::default()).collect(),
                barrier_waiters: Vec::new(),
                barrier_arrived: 0,
                rng: streams.stream(1 + d as u64),
                finite: cfg.guest.finite,
                alive: n,
                finished_at: None,
                lock_holder_preemptions: 0,
                lock_waiter_preemptions: 0,
                wake_latency_sum: 0,
                wakes: 0,
                request_latencies: Vec::new(),
                co_launches: 0,
                costart: CoStart { started_at: vec![0; n], skews: Vec::new() },
                pv_spinlocks: cfg.pv_spinlocks,
                created_at: cfg.start_at,
                destroyed_at: None,
                ipi_syncs: 0,
                pv_halts: 0,
                pv_kicks: 0,
            });
        }
        // Hosts without domains still own an (empty) slice where the next host starts.
        for h in 0..n_hosts {
            if hosts[h].doms.is_empty() {
                let (d, v) = if h == 0 { (0, 0) } else { (hosts[h - 1].doms.end, hosts[h - 1].vcpus.end) };
                hosts[h].doms = d..d;
                hosts[h].vcpus = v..v;
            }
        }
        let pcpus = (0..n_hosts * host.pcpus)
            .map(|p| Pcpu {
                host: p / host.pcpus,
                curr: None,
                since: 0,
                busy_ns: 0,
                idle_ns: 0,
                slice_deadline: None,
                slice_timer_at: None,
                resched_gen: 0,
                resched_due: None,
            })
            .collect();
        let ple_window_ns = host.ple_window_ns();
        let ple_window_max_ns = host.cycles_ns(host.ple_window_max_cycles);
        let pv_spin_ns = host.pv_spin_ns();
        let core = Core {
            host,
            network,
            queue: EventQueue::new(),
            pcpus,
            vcpus,
            doms,
            hosts,
            jobs,
            job_names,
            msgs: Vec::new(),
            free_msgs: Vec::new(),
            net: NetStats::default(),
            ple_window_ns,
            ple_window_max_ns,
            pv_spin_ns,
            events: 0,
            to_advance: VecDeque::new(),
            to_sleep: VecDeque::new(),
            to_yield: VecDeque::new(),
            unfinished,
            trace: None,
            error: None,
        };
        let mut sim = Simulation { core, policies };
        for (at, ev) in lifecycle {
            sim.core.post(at, ev);
        }
        sim
    }

    /// At `at`, domain `d` becomes of type `ty` (the policy hears of it through
    /// `vm_type_changed`). Call before `run`.
    /// Makes every host's scheduler ticks fall at the same instants as host 0's. By default
    /// host h > 0 lags by a fraction of the tick period drawn from its own random stream, as
    /// unsynchronized hosts do; aligned ticks let tick-driven policies make the same decision
    /// at the same instant on every host, an implicit cluster-wide co-scheduling that real
    /// clusters do not get for free.
    pub fn align_host_clocks(&mut self) {
        for host in &mut self.core.hosts {
            host.clock_phase = 0.0;
        }
    }

    pub fn schedule_type_change(&mut self, at: Time, d: DomId, ty: VmType) {
        self.core.post(at, Ev::SetType { d, ty });
    }

    /// Records per-pCPU run intervals, keeping at most `limit` of them.
    pub fn enable_trace(&mut self, limit: usize) {
        self.core.trace = Some(Trace::new(limit));
    }

    pub fn take_trace(&mut self) -> Option<Trace> {
        self.core.trace.take()
    }

    /// Runs until the horizon (or until every finite workload finished, with `AllDone`).
    /// `progress(now)` is called every few thousand events; returning `false` stops the run
    /// (an error [`INTERRUPTED`]). Returns an error if a policy made an unusable decision or
    /// a guest program misbehaved (a message to a rank outside its job).
    pub fn run(
        &mut self,
        horizon: Time,
        until: Until,
        progress: &mut dyn FnMut(Time) -> bool,
    ) -> Result<RunMetrics, String> {
        self.start();
        let mut end = horizon;
        while let Some(t) = self.core.queue.peek_time() {
            if t > horizon {
                break;
            }
            let (now, ev) = self.core.queue.pop().expect("peeked");
            if self.handle(ev) {
                self.core.events += 1;
            }
            self.drain();
            if let Some(e) = self.core.error.take() {
                return Err(e);
            }
            #[cfg(debug_assertions)]
            {
                self.core.check_invariants();
                for (h, policy) in self.policies.iter().enumerate() {
                    if let Err(e) = policy.check(&Cx::new(&mut self.core, h, None)) {
                        return Err(format!("policy invariant broken at t={now} ns on host {h}: {e}"));
                    }
                }
            }
            if until == Until::AllDone && self.core.unfinished == 0 && self.core.doms.iter().any(|d| d.finite) {
                end = now;
                break;
            }
            if self.core.events.is_multiple_of(8192) && !progress(now) {
                return Err(INTERRUPTED.to_string());
            }
        }
        Ok(self.core.finish(end))
    }

    fn start(&mut self) {
        for (h, policy) in self.policies.iter_mut().enumerate() {
            let mut cx = Cx::new(&mut self.core, h, None);
            policy.init(&mut cx);
            let vcpus = cx.core.hosts[h].vcpus.clone();
            for v in vcpus.clone() {
                if cx.core.vcpus[v].state != VcpuState::Offline {
                    policy.vcpu_insert(&mut cx, v - vcpus.start);
                }
            }
            let pcpus = cx.core.hosts[h].pcpus.clone();
            if let Some(period) = policy.tick_period_ns() {
                let lag = (period as f64 * cx.core.hosts[h].clock_phase) as Time;
                for p in pcpus.clone() {
                    cx.core.post(period + lag, Ev::Tick { p });
                }
            }
            for p in pcpus {
                cx.core.request_resched(p, 0);
            }
        }
    }

    /// Handles one event; false if it was stale (cancelled by a generation bump).
    fn handle(&mut self, ev: Ev) -> bool {
        let core = &mut self.core;
        match ev {
            Ev::Guest { v, gen } => {
                if core.vcpus[v].gen != gen {
                    return false;
                }
                core.guest_event(v);
            }
            Ev::Wake { v } => {
                let now = core.queue.now();
                let pv_spin_ns = core.pv_spin_ns;
                let vc = &mut core.vcpus[v];
                if vc.state != VcpuState::Blocked {
                    return false; // its VM was destroyed while it waited
                }
                vc.thread = match vc.thread {
                    Thread::BlockedIo => {
                        vc.io_done_at = Some(now);
                        Thread::Ready
                    }
                    // Kicked: back to spinning at the head of the queue, with a fresh budget.
                    Thread::HaltedLock { lock, .. } => {
                        Thread::SpinLock { lock, kernel: true, budget: Some(pv_spin_ns) }
                    }
                    _ => Thread::Ready,
                };
                vc.woke_at = Some(now);
                let h = vc.host;
                core.set_state(v, VcpuState::Runnable);
                let local = v - core.hosts[h].vcpus.start;
                self.policies[h].wake(&mut Cx::new(core, h, None), local);
            }
            Ev::Timer { host, id } => {
                let h = host as usize;
                self.policies[h].timer(&mut Cx::new(core, h, None), id)
            }
            Ev::SetType { d, ty } => {
                let old = std::mem::replace(&mut core.doms[d].info.vm_type, ty);
                if old != ty {
                    let h = core.doms[d].host;
                    let local = d - core.hosts[h].doms.start;
                    self.policies[h].vm_type_changed(&mut Cx::new(core, h, None), local, old);
                }
            }
            Ev::Tick { p } => {
                let h = core.pcpus[p].host;
                let local = p - core.hosts[h].pcpus.start;
                self.policies[h].tick(&mut Cx::new(core, h, Some(p)), local);
                if let Some(period) = self.policies[h].tick_period_ns() {
                    let at = self.core.queue.now() + period;
                    self.core.post(at, Ev::Tick { p });
                }
            }
            Ev::SliceEnd { p } => {
                let now = core.queue.now();
                let pc = &mut core.pcpus[p];
                if pc.slice_timer_at != Some(now) {
                    return false; // superseded by an earlier slice-end event
                }
                pc.slice_timer_at = None;
                match pc.slice_deadline {
                    Some(deadline) if deadline == now => self.schedule(p),
                    Some(deadline) if deadline > now => {
                        core.arm_slice_timer(p, deadline);
                        return false; // the slice was renewed: nothing happened here
                    }
                    _ => return false,
                }
            }
            Ev::Resched { p, gen } => {
                if core.pcpus[p].resched_gen != gen {
                    return false;
                }
                self.schedule(p);
            }
            Ev::Irq { v, gen } => {
                let vc = &core.vcpus[v];
                if vc.irq_gen != gen || vc.irqs.is_empty() || !matches!(vc.state, VcpuState::Running(_)) {
                    return false;
                }
                core.handle_irqs(v);
            }
            Ev::Create { d } => self.create(d),
            Ev::Destroy { d } => self.destroy(d),
            Ev::Net { m } => core.net_stage_done(m),
        }
        true
    }

    /// Brings domain `d` to life: its vCPUs start their programs and join the policy.
    fn create(&mut self, d: DomId) {
        let core = &mut self.core;
        let now = core.now();
        core.doms[d].info.online = true;
        core.doms[d].created_at = now;
        let h = core.doms[d].host;
        let base = core.hosts[h].vcpus.start;
        let vcpus = core.doms[d].span.clone();
        for v in vcpus.clone() {
            core.set_state(v, VcpuState::Runnable);
        }
        for v in vcpus {
            self.policies[h].vcpu_insert(&mut Cx::new(&mut self.core, h, None), v - base);
        }
    }

    /// Destroys domain `d` (see the module notes). An unfinished job never finishes.
    fn destroy(&mut self, d: DomId) {
        let core = &mut self.core;
        let now = core.now();
        if !core.doms[d].info.online {
            return;
        }
        let dom = &mut core.doms[d];
        dom.info.online = false;
        dom.destroyed_at = Some(now);
        if dom.finite && dom.finished_at.is_none() {
            core.unfinished -= 1;
        }
        let h = dom.host;
        let base = core.hosts[h].vcpus.start;
        let vcpus = dom.span.clone();
        let mut running = Vec::new();
        for v in vcpus.clone() {
            core.sync(v);
            if let VcpuState::Running(p) = core.vcpus[v].state {
                running.push((v, p));
            }
            core.set_state(v, VcpuState::Offline);
            let vc = &mut core.vcpus[v];
            vc.thread = Thread::Exited;
            vc.gen = vc.gen.wrapping_add(1);
            vc.irq_gen = vc.irq_gen.wrapping_add(1);
            vc.irqs.clear();
        }
        for v in vcpus {
            if !running.iter().any(|&(u, _)| u == v) {
                self.policies[h].vcpu_remove(&mut Cx::new(&mut self.core, h, None), v - base);
            }
        }
        for (v, p) in running {
            self.policies[h].sleep(&mut Cx::new(&mut self.core, h, Some(p)), v - base);
            self.schedule(p);
            self.policies[h].vcpu_remove(&mut Cx::new(&mut self.core, h, None), v - base);
        }
    }

    /// Asks the policy what `p` runs next and makes it so.
    fn schedule(&mut self, p: PcpuId) {
        let h = self.core.pcpus[p].host;
        let (pbase, vbase) = (self.core.hosts[h].pcpus.start, self.core.hosts[h].vcpus.start);
        let prev = self.core.pcpus[p].curr.map(|v| v - vbase);
        let mut decision = self.policies[h].pick_next(&mut Cx::new(&mut self.core, h, Some(p)), p - pbase, prev);
        if let Some(v) = decision.next {
            if v >= self.core.hosts[h].vcpus.len() {
                self.core.error.get_or_insert(format!(
                    "policy error: pCPU {} was given vCPU {v}, which does not exist",
                    p - pbase
                ));
                return;
            }
            decision.next = Some(v + vbase);
        }
        if let Err(e) = self.core.dispatch(p, decision) {
            self.core.error.get_or_insert(e);
        }
    }

    /// Runs the guest steps and policy notifications this instant produced, until quiet.
    fn drain(&mut self) {
        loop {
            if let Some(v) = self.core.to_advance.pop_front() {
                self.core.advance(v);
            } else if let Some((v, p)) = self.core.to_sleep.pop_front() {
                let h = self.core.pcpus[p].host;
                let local = v - self.core.hosts[h].vcpus.start;
                self.policies[h].sleep(&mut Cx::new(&mut self.core, h, Some(p)), local);
                self.schedule(p);
            } else if let Some(v) = self.core.to_yield.pop_front() {
                let VcpuState::Running(p) = self.core.vcpus[v].state else {
                    continue;
                };
                let h = self.core.pcpus[p].host;
                let local = v - self.core.hosts[h].vcpus.start;
                self.policies[h].yield_(&mut Cx::new(&mut self.core, h, Some(p)), local, YieldReason::PauseLoopExit);
            } else {
                break;
            }
        }
    }
}

impl Core {
    fn now(&self) -> Time {
        self.queue.now()
    }

    /// Queues `ev` at `at`, with its tie-break priority.
    fn post(&mut self, at: Time, ev: Ev) -> Ticket {
        let priority = ev.priority();
        self.queue.schedule(at, priority, ev)
    }

    /// Schedules a reschedule of `p` at `at`; false if one at or before `at` is pending.
    fn request_resched(&mut self, p: PcpuId, at: Time) -> bool {
        let pc = &mut self.pcpus[p];
        if matches!(pc.resched_due, Some(due) if due <= at) {
            return false;
        }
        pc.resched_gen = pc.resched_gen.wrapping_add(1);
        pc.resched_due = Some(at);
        let gen = pc.resched_gen;
        self.post(at, Ev::Resched { p, gen });
        true
    }

    /// Moves host `h`'s fragmentation integral up to now.
    fn integrate_frag(&mut self, h: usize) {
        let now = self.now();
        let hs = &mut self.hosts[h];
        if hs.n_waiting > 0 {
            hs.frag_idle_ns += hs.n_idle as Time * (now - hs.frag_since);
        }
        hs.frag_since = now;
    }

    fn set_state(&mut self, v: VcpuId, new: VcpuState) {
        let now = self.now();
        let h = self.vcpus[v].host;
        self.integrate_frag(h);
        let hs = &mut self.hosts[h];
        let vc = &mut self.vcpus[v];
        let spent = now - vc.state_since;
        match vc.state {
            VcpuState::Running(_) => vc.running_ns += spent,
            VcpuState::Runnable => {
                vc.runnable_ns += spent;
                hs.n_waiting -= 1;
            }
            VcpuState::Blocked => vc.blocked_ns += spent,
            VcpuState::Offline => vc.offline_ns += spent,
        }
        if new == VcpuState::Runnable {
            hs.n_waiting += 1;
        }
        vc.state = new;
        vc.state_since = now;
    }

    fn set_curr(&mut self, p: PcpuId, next: Option<VcpuId>) {
        let now = self.now();
        let pc = &mut self.pcpus[p];
        if pc.curr.is_some() == next.is_some() {
            pc.curr = next;
            return;
        }
        let h = pc.host;
        self.integrate_frag(h);
        let pc = &mut self.pcpus[p];
        let hs = &mut self.hosts[h];
        let spent = now - pc.since;
        if pc.curr.is_some() {
            pc.busy_ns += spent;
            hs.n_idle += 1;
        } else {
            pc.idle_ns += spent;
            hs.n_idle -= 1;
        }
        pc.since = now;
        pc.curr = next;
    }

    /// Applies a policy decision on `p`.
    fn dispatch(&mut self, p: PcpuId, d: Decision) -> Result<(), String> {
        let now = self.now();
        let prev = self.pcpus[p].curr;
        let h = self.pcpus[p].host;
        self.hosts[h].sched_invocations += 1;
        {
            let pc = &mut self.pcpus[p];
            pc.resched_gen = pc.resched_gen.wrapping_add(1);
            pc.resched_due = None;
        }
        if let Some(v) = d.next {
            if v >= self.vcpus.len() {
                return Err(format!("policy error: pCPU {p} was given vCPU {v}, which does not exist"));
            }
            let ok = match self.vcpus[v].state {
                VcpuState::Runnable => true,
                VcpuState::Running(q) => q == p && prev == Some(v),
                VcpuState::Blocked | VcpuState::Offline => false,
            };
            if !ok {
                return Err(format!(
                    "policy error at t={now} ns: pCPU {p} was given vCPU {v} in state {:?}",
                    self.vcpus[v].state
                ));
            }
        }
        if prev != d.next {
            if let Some(u) = prev {
                self.deschedule(u);
            }
        }
        self.set_curr(p, d.next);
        if let Some(v) = d.next {
            let switching = prev != Some(v);
            let mut overhead = self.host.sched_cost_ns;
            if switching {
                overhead += self.host.context_switch_ns;
                self.hosts[h].context_switches += 1;
                let vc = &self.vcpus[v];
                if vc.last_pcpu.is_some() && vc.last_pcpu != Some(p) {
                    overhead += self.host.migration_penalty_ns;
                    self.hosts[h].migrations += 1;
                }
                if let Some(w) = vc.woke_at {
                    let dom = &mut self.doms[vc.dom];
                    dom.wake_latency_sum += now - w;
                    dom.wakes += 1;
                }
                self.set_state(v, VcpuState::Running(p));
                let grows = self.host.ple_grow > 1;
                let base = self.ple_window_ns.unwrap_or(0);
                let vc = &mut self.vcpus[v];
                vc.woke_at = None;
                vc.last_pcpu = Some(p);
                if grows {
                    vc.ple_window_ns = base; // KVM: shrink_ple_window at sched-in
                }
                self.note_costart(v);
            } else {
                self.sync(v);
            }
            let vc = &mut self.vcpus[v];
            vc.run_from = now + overhead;
            vc.synced_to = now;
            vc.ple_from = vc.run_from;
            if let Some(t) = &mut self.trace {
                t.open(p, v, vc.dom, vc.index, now, vc.thread.spinning());
            }
            if !vc.irqs.is_empty() {
                // Interrupts that arrived while it waited are injected at VM entry.
                let (at, gen) = (vc.run_from, vc.irq_gen);
                self.post(at, Ev::Irq { v, gen });
            }
            self.arm(v);
        } else if let Some(t) = &mut self.trace {
            t.close(p, now);
        }
        let deadline = d.slice_ns.map(|s| now + s.max(1));
        self.pcpus[p].slice_deadline = deadline;
        if let Some(deadline) = deadline {
            if !matches!(self.pcpus[p].slice_timer_at, Some(t) if t <= deadline) {
                self.arm_slice_timer(p, deadline);
            }
        }
        Ok(())
    }

    /// A vCPU was switched in: if its whole VM (blocked vCPUs aside) now runs, record the
    /// co-start skew (see [`CoStart`]).
    fn note_costart(&mut self, v: VcpuId) {
        let now = self.now();
        let (d, index) = (self.vcpus[v].dom, self.vcpus[v].index);
        let dom = &mut self.doms[d];
        if dom.info.vcpus < 2 {
            return;
        }
        dom.costart.started_at[index] = now;
        let mut earliest = now;
        let mut running = 0;
        for (i, u) in self.vcpus[dom.span.clone()].iter().enumerate() {
            match u.state {
                VcpuState::Running(_) => {
                    running += 1;
                    earliest = earliest.min(dom.costart.started_at[i]);
                }
                VcpuState::Runnable => return,
                VcpuState::Blocked | VcpuState::Offline => {}
            }
        }
        if running >= 2 {
            dom.costart.skews.push(now - earliest);
        }
    }

    fn arm_slice_timer(&mut self, p: PcpuId, at: Time) {
        self.pcpus[p].slice_timer_at = Some(at);
        self.post(at, Ev::SliceEnd { p });
    }

    /// Takes `v` off its pCPU: it stops making progress; a runnable vCPU starts waiting.
    fn deschedule(&mut self, v: VcpuId) {
        self.sync(v);
        let vc = &mut self.vcpus[v];
        vc.gen = vc.gen.wrapping_add(1);
        vc.irq_gen = vc.irq_gen.wrapping_add(1);
        if let VcpuState::Running(_) = vc.state {
            if !vc.held.is_empty() {
                self.doms[vc.dom].lock_holder_preemptions += 1;
            }
            self.set_state(v, VcpuState::Runnable);
        }
    }

    /// Accounts the guest progress of a running vCPU up to now.
    fn sync(&mut self, v: VcpuId) {
        let now = self.now();
        let vc = &mut self.vcpus[v];
        let from = vc.synced_to.max(vc.run_from);
        vc.synced_to = now;
        if !matches!(vc.state, VcpuState::Running(_)) || now <= from {
            return;
        }
        let elapsed = now - from;
        match &mut vc.thread {
            Thread::Computing { left } => *left -= elapsed.min(*left),
            Thread::SpinLock { budget, .. } => {
                vc.spin_ns += elapsed;
                if let Some(b) = budget {
                    *b -= elapsed.min(*b);
                }
            }
            Thread::SpinIpi { .. } => vc.spin_ns += elapsed,
            Thread::SpinBarrier { limit_left } | Thread::SpinRecv { limit_left, .. } => {
                vc.spin_ns += elapsed;
                if let Some(l) = limit_left {
                    *l -= elapsed.min(*l);
                }
            }
            _ => {}
        }
    }

    /// (Re)schedules the single pending guest event of a running vCPU.
    fn arm(&mut self, v: VcpuId) {
        let now = self.now();
        let free = matches!(self.vcpus[v].thread, Thread::SpinLock { .. }) && self.lock_free_for(v);
        let ple_at = self.ple_deadline(v);
        let vc = &mut self.vcpus[v];
        vc.gen = vc.gen.wrapping_add(1);
        if !matches!(vc.state, VcpuState::Running(_)) {
            return;
        }
        let from = now.max(vc.run_from);
        let at = match vc.thread {
            Thread::Ready => Some(from),
            Thread::Computing { left } => Some(from.saturating_add(left)),
            // The lock is free for us: grab it as soon as we execute.
            Thread::SpinLock { .. } if free => Some(from),
            Thread::SpinLock { budget, .. } => match (ple_at, budget.map(|b| from + b)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            Thread::SpinIpi { .. } => ple_at,
            Thread::SpinBarrier { limit_left } | Thread::SpinRecv { limit_left, .. } => limit_left.map(|l| from + l),
            Thread::BlockedIo
            | Thread::BlockedBarrier
            | Thread::BlockedRecv { .. }
            | Thread::BlockedNet
            | Thread::HaltedLock { .. }
            | Thread::Exited => None,
        };
        if let Some(at) = at {
            if at < FOREVER {
                let gen = vc.gen;
                self.post(at, Ev::Guest { v, gen });
            }
        }
    }

    /// Whether lock waiter `v` may take its lock now: it is free and either anyone may grab
    /// it (test-and-set) or `v` heads a paravirtual lock's queue. (A ticket lock is handed
    /// over by the unlock itself.)
    fn lock_free_for(&self, v: VcpuId) -> bool {
        let vc = &self.vcpus[v];
        let Thread::SpinLock { lock, kernel, .. } = vc.thread else { return false };
        let dom = &self.doms[vc.dom];
        let l = &dom.locks[lock as usize];
        l.holder.is_none()
            && if dom.pv_spinlocks && kernel { l.waiters.front() == Some(&v) } else { dom.lock_kind == LockKind::Tas }
    }

    /// When `v`'s current kernel-mode spinning raises a pause-loop exit, if PLE applies.
    fn ple_deadline(&self, v: VcpuId) -> Option<Time> {
        let vc = &self.vcpus[v];
        let kernel = matches!(vc.thread, Thread::SpinLock { kernel: true, .. } | Thread::SpinIpi { .. });
        (kernel && self.ple_window_ns.is_some()).then(|| vc.ple_from.max(vc.run_from) + vc.ple_window_ns)
    }

    /// A spinner's guest event: a pause-loop exit if the window is reached, else re-arm.
    fn maybe_ple_exit(&mut self, v: VcpuId) {
        let now = self.now();
        if self.ple_deadline(v).is_some_and(|at| at <= now) {
            let max = self.ple_window_max_ns;
            let grow = self.host.ple_grow as Time;
            let vc = &mut self.vcpus[v];
            vc.ple_exits += 1;
            vc.ple_from = now;
            if grow > 1 {
                vc.ple_window_ns = (vc.ple_window_ns * grow).min(max); // KVM: grow_ple_window
            }
            let h = self.vcpus[v].host;
            self.hosts[h].ple_exits += 1;
            self.to_yield.push_back(v);
        }
        self.arm(v);
    }

    /// `sender` interrupts `target` (an `ipi_sync`); see the module notes.
    fn send_irq(&mut self, sender: VcpuId, target: VcpuId) {
        let now = self.now();
        let latency = self.host.ipi_latency_ns;
        let vc = &mut self.vcpus[target];
        vc.irqs.push(sender);
        if let VcpuState::Running(_) = vc.state {
            let (at, gen) = ((now + latency).max(vc.run_from), vc.irq_gen);
            self.post(at, Ev::Irq { v: target, gen });
        }
    }

    /// Running vCPU `v` takes its pending interrupts: it acknowledges each sender at once,
    /// then spends `ipi_handler_ns` in the handler before its own code resumes.
    fn handle_irqs(&mut self, v: VcpuId) {
        self.sync(v);
        let now = self.now();
        let handler = self.host.ipi_handler_ns;
        let vc = &mut self.vcpus[v];
        vc.run_from = vc.run_from.max(now) + handler;
        for s in std::mem::take(&mut vc.irqs) {
            self.ack(s);
        }
        self.arm(v);
    }

    /// One acknowledgement reaches `sender`; the last one ends its wait.
    fn ack(&mut self, sender: VcpuId) {
        let vc = &mut self.vcpus[sender];
        if let Thread::SpinIpi { pending } = &mut vc.thread {
            *pending -= 1;
            if *pending == 0 {
                self.release_waiter(sender);
            }
        }
    }

    /// A running vCPU's pending guest event fired.
    fn guest_event(&mut self, v: VcpuId) {
        self.sync(v);
        let free = self.lock_free_for(v);
        let vc = &mut self.vcpus[v];
        match vc.thread {
            Thread::Ready => self.to_advance.push_back(v),
            Thread::Computing { left } => {
                if left == 0 {
                    vc.thread = Thread::Ready;
                    self.to_advance.push_back(v);
                } else {
                    self.arm(v);
                }
            }
            Thread::SpinLock { lock, kernel, budget } => {
                if free {
                    let l = &mut self.doms[vc.dom].locks[lock as usize];
                    l.waiters.retain(|&w| w != v);
                    l.holder = Some(v);
                    vc.held.push((lock, kernel));
                    vc.thread = Thread::Ready;
                    self.to_advance.push_back(v);
                } else if budget == Some(0) {
                    // A paravirtual waiter spun its threshold out: halt until kicked (pv_wait).
                    vc.thread = Thread::HaltedLock { lock, kicked: false };
                    self.doms[vc.dom].pv_halts += 1;
                    self.block(v);
                } else {
                    self.maybe_ple_exit(v);
                }
            }
            Thread::SpinIpi { .. } => self.maybe_ple_exit(v),
            Thread::SpinBarrier { limit_left: Some(0) } => {
                vc.thread = Thread::BlockedBarrier;
                self.block(v);
            }
            Thread::SpinRecv { from, limit_left: Some(0) } => {
                vc.thread = Thread::BlockedRecv { from };
                self.block(v);
            }
            _ => self.arm(v),
        }
        self.trace_state(v);
    }

    /// Records a run/spin change of a running vCPU in the trace.
    fn trace_state(&mut self, v: VcpuId) {
        if let Some(t) = &mut self.trace {
            let vc = &self.vcpus[v];
            if let VcpuState::Running(p) = vc.state {
                t.set_spinning(p, self.queue.now(), vc.thread.spinning());
            }
        }
    }

    /// The running thread of `v` blocks: its pCPU reschedules in this same instant (until
    /// then it is still `curr` there, for zero time).
    fn block(&mut self, v: VcpuId) {
        self.sync(v);
        let vc = &mut self.vcpus[v];
        vc.gen = vc.gen.wrapping_add(1);
        let VcpuState::Running(p) = vc.state else { unreachable!("only a running thread blocks") };
        // Pending interrupts are taken on the way to halt (`sti; hlt`).
        for s in std::mem::take(&mut vc.irqs) {
            self.ack(s);
        }
        self.set_state(v, VcpuState::Blocked);
        self.to_sleep.push_back((v, p));
    }

    /// Makes a waiting thread continue (it got its lock, or its barrier opened).
    fn release_waiter(&mut self, w: VcpuId) {
        self.sync(w);
        let vc = &mut self.vcpus[w];
        match vc.thread {
            Thread::BlockedBarrier | Thread::BlockedRecv { .. } => {
                // A blocked waiter is woken by an interrupt: an IPI from the releasing vCPU, or
                // the virtual NIC's.
                vc.thread = Thread::Ready;
                let at = self.queue.now() + self.host.ipi_latency_ns;
                self.hosts[vc.host].ipis += 1;
                self.post(at, Ev::Wake { v: w });
            }
            _ => {
                vc.thread = Thread::Ready;
                self.arm(w);
                self.trace_state(w);
            }
        }
    }

    /// Interprets `v`'s program from its current instruction until it must wait.
    fn advance(&mut self, v: VcpuId) {
        let now = self.now();
        debug_assert!(matches!(self.vcpus[v].state, VcpuState::Running(_)));
        for _ in 0..1_000_000 {
            let vc = &mut self.vcpus[v];
            let d = vc.dom;
            let instr = vc.program[vc.pc].clone();
            vc.pc += 1;
            match instr {
                Instr::Compute(dur) => {
                    let t = dur.sample(&mut self.doms[d].rng);
                    if t > 0 {
                        self.vcpus[v].thread = Thread::Computing { left: t };
                        self.arm(v);
                        self.trace_state(v);
                        return;
                    }
                }
                Instr::Lock { choice, kernel } => {
                    let dom = &mut self.doms[d];
                    let lock = match choice {
                        LockChoice::Fixed(l) => l,
                        LockChoice::Uniform => dom.rng.gen_range(0..dom.locks.len() as u32),
                    };
                    let pv = dom.pv_spinlocks && kernel;
                    let l = &mut dom.locks[lock as usize];
                    let may_take = if pv {
                        // A newcomer steals a free lock unless the queue head spins for it.
                        l.waiters.front().is_none_or(|&h| {
                            let hc = &self.vcpus[h];
                            !(matches!(hc.state, VcpuState::Running(_)) && matches!(hc.thread, Thread::SpinLock { .. }))
                        })
                    } else {
                        dom.lock_kind == LockKind::Tas || l.waiters.is_empty()
                    };
                    let vc = &mut self.vcpus[v];
                    if l.holder.is_none() && may_take {
                        l.holder = Some(v);
                        vc.held.push((lock, kernel));
                    } else {
                        l.waiters.push_back(v);
                        let budget = pv.then_some(self.pv_spin_ns);
                        vc.thread = Thread::SpinLock { lock, kernel, budget };
                        vc.ple_from = now.max(vc.run_from);
                        self.arm(v);
                        self.trace_state(v);
                        return;
                    }
                }
                Instr::Unlock => {
                    let (lock, kernel) = vc.held.pop().expect("workload unlocks a lock it does not hold");
                    self.unlock(d, lock, kernel);
                }
                Instr::IpiSync => {
                    let pv = self.doms[d].pv_spinlocks;
                    let targets: Vec<VcpuId> = self.doms[d]
                        .span
                        .clone()
                        .filter(|&u| {
                            u != v
                                && match self.vcpus[u].state {
                                    VcpuState::Running(_) => true,
                                    VcpuState::Runnable => !pv,
                                    VcpuState::Blocked | VcpuState::Offline => false,
                                }
                        })
                        .collect();
                    if targets.is_empty() {
                        continue;
                    }
                    self.doms[d].ipi_syncs += 1;
                    self.vcpus[v].thread = Thread::SpinIpi { pending: targets.len() as u32 };
                    self.vcpus[v].ple_from = now.max(self.vcpus[v].run_from);
                    for u in targets {
                        self.send_irq(v, u);
                    }
                    self.arm(v);
                    self.trace_state(v);
                    return;
                }
                Instr::Barrier(wait) => {
                    let dom = &mut self.doms[d];
                    dom.barrier_arrived += 1;
                    if dom.barrier_arrived == dom.info.vcpus {
                        dom.barrier_arrived = 0;
                        for w in std::mem::take(&mut dom.barrier_waiters) {
                            self.release_waiter(w);
                        }
                        continue;
                    }
                    dom.barrier_waiters.push(v);
                    match wait {
                        BarrierWait::Block => {
                            vc.thread = Thread::BlockedBarrier;
                            self.block(v);
                        }
                        BarrierWait::Spin => vc.thread = Thread::SpinBarrier { limit_left: None },
                        BarrierWait::SpinThenBlock(l) => vc.thread = Thread::SpinBarrier { limit_left: Some(l) },
                    }
                    self.arm(v);
                    self.trace_state(v);
                    return;
                }
                Instr::Io(dur) => {
                    let t = dur.sample(&mut self.doms[d].rng);
                    self.vcpus[v].thread = Thread::BlockedIo;
                    self.post(now + t, Ev::Wake { v });
                    self.block(v);
                    return;
                }
                Instr::Repeat { times, .. } => vc.loops.push((vc.pc, times)),
                Instr::EndRepeat => {
                    let top = vc.loops.last_mut().expect("EndRepeat without Repeat");
                    match top.1 {
                        None => vc.pc = top.0,
                        Some(n) if n > 1 => {
                            top.1 = Some(n - 1);
                            vc.pc = top.0;
                        }
                        _ => {
                            vc.loops.pop();
                        }
                    }
                }
                Instr::RequestBegin => vc.request_start = vc.io_done_at.take().unwrap_or(now),
                Instr::RequestEnd => {
                    let latency = now - vc.request_start;
                    self.doms[d].request_latencies.push(latency);
                }
                Instr::Send { to, bytes } => self.send(v, to, bytes),
                Instr::Recv { from, wait } => {
                    let world = self.jobs[self.doms[d].job].len();
                    if from as usize >= world {
                        let name = &self.doms[d].info.name;
                        self.error.get_or_insert(format!(
                            "guest error: VM {name:?} receives from rank {from}, but its job has {world} ranks"
                        ));
                        return;
                    }
                    let vc = &mut self.vcpus[v];
                    if let Some(n @ 1..) = vc.mailbox.get_mut(from as usize) {
                        *n -= 1;
                        continue;
                    }
                    vc.thread = match wait {
                        BarrierWait::Block => Thread::BlockedRecv { from },
                        BarrierWait::Spin => Thread::SpinRecv { from, limit_left: None },
                        BarrierWait::SpinThenBlock(l) => Thread::SpinRecv { from, limit_left: Some(l) },
                    };
                    if wait == BarrierWait::Block {
                        self.block(v);
                    } else {
                        self.arm(v);
                        self.trace_state(v);
                    }
                    return;
                }
                Instr::NetServe => {
                    let h = self.vcpus[v].host;
                    if self.hosts[h].driver != Some(d) {
                        let name = &self.doms[d].info.name;
                        self.error.get_or_insert(format!("guest error: VM {name:?} is not its host's driver domain"));
                        return;
                    }
                    if let Some(m) = self.vcpus[v].net_msg.take() {
                        self.forward(m);
                    }
                    let Some(m) = self.hosts[h].backlog.pop_front() else {
                        self.vcpus[v].thread = Thread::BlockedNet;
                        self.block(v);
                        return;
                    };
                    self.net.driver_passes += 1;
                    let work = self.msgs[m as usize].packets * self.network.dom0_packet_ns;
                    let vc = &mut self.vcpus[v];
                    vc.net_msg = Some(m);
                    if work > 0 {
                        vc.thread = Thread::Computing { left: work };
                        self.arm(v);
                        self.trace_state(v);
                        return;
                    }
                }
                Instr::Exit => {
                    vc.thread = Thread::Exited;
                    let dom = &mut self.doms[d];
                    dom.alive -= 1;
                    if dom.alive == 0 && dom.finite {
                        dom.finished_at = Some(now);
                        self.unfinished -= 1;
                    }
                    self.block(v);
                    return;
                }
            }
        }
        panic!("guest program of vCPU {v} loops without taking time");
    }

    // ---- Messages (see the module notes) ----

    /// `v` sends `bytes` to rank `to` of its job.
    fn send(&mut self, v: VcpuId, to: u32, bytes: u64) {
        let now = self.now();
        let d = self.vcpus[v].dom;
        let ranks = &self.jobs[self.doms[d].job];
        let Some(&dst) = ranks.get(to as usize) else {
            let (name, world) = (&self.doms[d].info.name, ranks.len());
            self.error
                .get_or_insert(format!("guest error: VM {name:?} sends to rank {to}, but its job has {world} ranks"));
            return;
        };
        self.net.messages += 1;
        self.net.bytes += bytes;
        let packets = self.network.packets(bytes);
        let msg = Msg { src: v, dst, bytes, packets, sent_at: now, stage: Stage::Deliver };
        let m = match self.free_msgs.pop() {
            Some(m) => {
                self.msgs[m as usize] = msg;
                m
            }
            None => {
                self.msgs.push(msg);
                (self.msgs.len() - 1) as u32
            }
        };
        let (from_host, to_host) = (self.vcpus[v].host, self.vcpus[dst].host);
        if self.vcpus[dst].dom == d {
            let net = &self.network;
            let at = now + net.shm_latency_ns + NetworkConfig::transfer_ns(bytes, net.shm_bandwidth_gbps);
            self.post(at, Ev::Net { m });
        } else if from_host == to_host {
            if self.hosts[from_host].driver.is_some() {
                self.queue_for_driver(m, Stage::Bridge, from_host);
            } else {
                self.over_bridge(m);
            }
        } else if self.hosts[from_host].driver.is_some() {
            self.queue_for_driver(m, Stage::Transmit, from_host);
        } else {
            self.onto_wire(m);
        }
    }

    /// Queues message `m` for host `h`'s driver domain and wakes one of its idle vCPUs.
    fn queue_for_driver(&mut self, m: u32, stage: Stage, h: usize) {
        self.msgs[m as usize].stage = stage;
        self.hosts[h].backlog.push_back(m);
        let driver = self.hosts[h].driver.expect("a host with a backlog has a driver");
        let idle = self.doms[driver].span.clone().find(|&u| self.vcpus[u].thread == Thread::BlockedNet);
        if let Some(u) = idle {
            // An event-channel notification: the vCPU wakes one IPI latency later.
            self.vcpus[u].thread = Thread::Ready;
            self.hosts[h].ipis += 1;
            let at = self.now() + self.host.ipi_latency_ns;
            self.post(at, Ev::Wake { v: u });
        }
    }

    /// A driver domain finished its pass over message `m`.
    fn forward(&mut self, m: u32) {
        match self.msgs[m as usize].stage {
            Stage::Transmit => self.onto_wire(m),
            Stage::Bridge => self.over_bridge(m),
            Stage::Receive => self.deliver(m),
            Stage::Wire | Stage::Deliver => unreachable!("a driver domain only holds messages in its stages"),
        }
    }

    /// From one VM to another on the same host, after any driver-domain pass.
    fn over_bridge(&mut self, m: u32) {
        let net = &self.network;
        let bytes = self.msgs[m as usize].bytes;
        let at =
            self.now() + net.intra_host_latency_ns + NetworkConfig::transfer_ns(bytes, net.intra_host_bandwidth_gbps);
        self.msgs[m as usize].stage = Stage::Deliver;
        self.post(at, Ev::Net { m });
    }

    /// Onto the sending host's link: FIFO behind what it is already sending.
    fn onto_wire(&mut self, m: u32) {
        let msg = &mut self.msgs[m as usize];
        msg.stage = Stage::Wire;
        let h = self.vcpus[msg.src].host;
        let start = self.hosts[h].link_free_at.max(self.queue.now());
        let done = start + NetworkConfig::transfer_ns(msg.bytes, self.network.bandwidth_gbps);
        self.hosts[h].link_free_at = done;
        let at = done + self.network.latency_ns;
        self.post(at, Ev::Net { m });
    }

    /// A timed stage of message `m` ended.
    fn net_stage_done(&mut self, m: u32) {
        match self.msgs[m as usize].stage {
            Stage::Wire => {
                let h = self.vcpus[self.msgs[m as usize].dst].host;
                if self.hosts[h].driver.is_some() {
                    self.queue_for_driver(m, Stage::Receive, h);
                } else {
                    self.deliver(m);
                }
            }
            Stage::Deliver => self.deliver(m),
            Stage::Transmit | Stage::Bridge | Stage::Receive => unreachable!("driver stages end in NetServe"),
        }
    }

    /// Message `m` reaches its receiver: it ends a matching wait, or waits in the mailbox.
    fn deliver(&mut self, m: u32) {
        let now = self.now();
        self.free_msgs.push(m);
        let Msg { src, dst, packets, sent_at, .. } = self.msgs[m as usize];
        self.net.latency_sum_ns += now - sent_at;
        self.net.delivered += 1;
        let (from_dom, to_dom) = (self.vcpus[src].dom, self.vcpus[dst].dom);
        let dom = &mut self.doms[to_dom];
        dom.messages_received += 1;
        if from_dom != to_dom {
            dom.info.rx_packets += packets;
            self.net.packets += packets;
        }
        let world = self.jobs[dom.job].len();
        let rank = self.vcpus[src].rank;
        let vc = &mut self.vcpus[dst];
        match vc.thread {
            Thread::SpinRecv { from, .. } | Thread::BlockedRecv { from } if from == rank => self.release_waiter(dst),
            _ if vc.state == VcpuState::Offline => {} // its VM is gone
            _ => {
                if vc.mailbox.is_empty() {
                    vc.mailbox = vec![0; world];
                }
                vc.mailbox[rank as usize] += 1;
            }
        }
    }

    /// Releases `lock` of domain `d` (taken in kernel mode or not) and hands it on.
    fn unlock(&mut self, d: DomId, lock: u32, kernel: bool) {
        let now = self.now();
        let dom = &mut self.doms[d];
        let l = &mut dom.locks[lock as usize];
        l.holder = None;
        if dom.pv_spinlocks && kernel {
            // Paravirtual: hand over only to a head spinning on a pCPU; kick a halted head.
            let Some(&h) = l.waiters.front() else { return };
            let hc = &mut self.vcpus[h];
            match (hc.state, hc.thread) {
                (VcpuState::Running(_), Thread::SpinLock { .. }) if hc.run_from <= now => {
                    l.waiters.pop_front();
                    l.holder = Some(h);
                    hc.held.push((lock, kernel));
                    self.release_waiter(h);
                }
                (_, Thread::HaltedLock { lock, kicked: false }) => {
                    hc.thread = Thread::HaltedLock { lock, kicked: true };
                    dom.pv_kicks += 1;
                    self.hosts[dom.host].ipis += 1;
                    let at = now + self.host.ipi_latency_ns;
                    self.post(at, Ev::Wake { v: h });
                }
                // Head about to execute: it takes the lock when it does (if nobody steals it).
                (VcpuState::Running(_), _) => {
                    self.sync(h);
                    self.arm(h);
                }
                _ => {}
            }
            return;
        }
        let next = match dom.lock_kind {
            // Ticket: the next ticket in line owns the lock now, running or not.
            LockKind::Ticket => l.waiters.pop_front(),
            // Test-and-set: one of the spinners that is executing right now wins the race.
            LockKind::Tas => {
                let now = self.queue.now();
                let vcpus = &self.vcpus;
                let running: Vec<usize> = (0..l.waiters.len())
                    .filter(|&i| {
                        let w = &vcpus[l.waiters[i]];
                        matches!(w.state, VcpuState::Running(_)) && w.run_from <= now
                    })
                    .collect();
                if running.is_empty() {
                    None
                } else {
                    let pick = running[dom.rng.gen_range(0..running.len())];
                    l.waiters.remove(pick)
                }
            }
        };
        let Some(w) = next else { return };
        l.holder = Some(w);
        let wc = &mut self.vcpus[w];
        let kernel = matches!(wc.thread, Thread::SpinLock { kernel: true, .. });
        wc.held.push((lock, kernel));
        if !matches!(wc.state, VcpuState::Running(_)) {
            dom.lock_waiter_preemptions += 1;
        }
        // A running waiter continues through a guest event in this same instant.
        self.release_waiter(w);
    }

    /// Debug-build checks after every event: a vCPU never runs on two pCPUs, and pCPU and
    /// vCPU states agree.
    #[cfg(debug_assertions)]
    fn check_invariants(&self) {
        let mut running = vec![false; self.vcpus.len()];
        for (p, pc) in self.pcpus.iter().enumerate() {
            if let Some(v) = pc.curr {
                assert!(!running[v], "vCPU {v} runs on two pCPUs");
                running[v] = true;
                assert_eq!(self.vcpus[v].state, VcpuState::Running(p), "pCPU {p} runs vCPU {v} in another state");
            }
        }
        for (v, vc) in self.vcpus.iter().enumerate() {
            if let VcpuState::Running(p) = vc.state {
                assert_eq!(self.pcpus[p].curr, Some(v), "vCPU {v} thinks it runs on pCPU {p}");
            }
        }
    }

    /// Closes all accounting at `end` and builds the report.
    fn finish(&mut self, end: Time) -> RunMetrics {
        let now = end.max(self.now());
        self.queue.advance_to(now);
        for v in 0..self.vcpus.len() {
            self.sync(v);
            let s = self.vcpus[v].state;
            self.set_state(v, s);
        }
        for p in 0..self.pcpus.len() {
            let curr = self.pcpus[p].curr;
            let pc = &mut self.pcpus[p];
            if curr.is_some() {
                pc.busy_ns += now - pc.since;
            } else {
                pc.idle_ns += now - pc.since;
            }
            pc.since = now;
            if let Some(t) = &mut self.trace {
                t.close(p, now);
            }
        }
        for h in 0..self.hosts.len() {
            self.integrate_frag(h);
        }
        for pc in &self.pcpus {
            assert_eq!(pc.busy_ns + pc.idle_ns, now, "pCPU busy + idle must equal elapsed time");
        }
        for vc in &self.vcpus {
            assert_eq!(
                vc.running_ns + vc.runnable_ns + vc.blocked_ns + vc.offline_ns,
                now,
                "vCPU running + waiting + blocked + offline must equal the run's length"
            );
        }
        let host_capacity = (now as f64) * self.host.pcpus as f64;
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let secs = |ns: Time| ns as f64 / 1e9;
        let mut vms = Vec::new();
        for dom in &mut self.doms {
            let vcpus = &self.vcpus[dom.span.clone()];
            let cpu_ns: Time = vcpus.iter().map(|v| v.running_ns).sum();
            let spin_ns: Time = vcpus.iter().map(|v| v.spin_ns).sum();
            let blocked_ns: Time = vcpus.iter().map(|v| v.blocked_ns).sum();
            dom.request_latencies.sort_unstable();
            dom.costart.skews.sort_unstable();
            let skews = &dom.costart.skews;
            let us = |t: Time| t as f64 / 1e3;
            let lat = &dom.request_latencies;
            let serving = !lat.is_empty();
            vms.push(VmMetrics {
                name: dom.info.name.clone(),
                workload: dom.workload.clone(),
                vm_type: dom.info.vm_type.as_str().to_string(),
                vcpus: dom.info.vcpus,
                weight: dom.info.weight,
                cap: dom.info.cap,
                completion_s: dom.finished_at.map(|t| secs(t - dom.created_at)),
                created_s: secs(dom.created_at),
                destroyed_s: dom.destroyed_at.map(secs),
                cpu_s: secs(cpu_ns),
                spin_s: secs(spin_ns),
                steal_s: secs(vcpus.iter().map(|v| v.runnable_ns).sum()),
                spin_share: (cpu_ns > 0).then(|| spin_ns as f64 / cpu_ns as f64),
                lock_holder_preemptions: dom.lock_holder_preemptions,
                lock_waiter_preemptions: dom.lock_waiter_preemptions,
                ple_exits: vcpus.iter().map(|v| v.ple_exits).sum(),
                wake_latency_us_mean: (dom.wakes > 0).then(|| dom.wake_latency_sum as f64 / dom.wakes as f64 / 1e3),
                cpu_share: ratio(cpu_ns as f64, host_capacity),
                weight_share: 0.0,
                requests: lat.len() as u64,
                throughput_rps: serving.then(|| ratio(lat.len() as f64, secs(now))),
                latency_ms_mean: serving.then(|| lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1e6),
                latency_ms_p99: quantile(lat, 0.99).map(|l| l as f64 / 1e6),
                co_launches: dom.co_launches,
                costarts: skews.len() as u64,
                costart_skew_us_mean: (!skews.is_empty())
                    .then(|| skews.iter().sum::<Time>() as f64 / skews.len() as f64 / 1e3),
                costart_skew_us_p50: quantile(skews, 0.5).map(us),
                costart_skew_us_p99: quantile(skews, 0.99).map(us),
                costart_skew_us_quantiles: cdf_quantiles(skews).map(|q| q.into_iter().map(us).collect()),
                ipi_syncs: dom.ipi_syncs,
                pv_halts: dom.pv_halts,
                pv_kicks: dom.pv_kicks,
                host: dom.host,
                virtual_cluster: self.job_names[dom.job].clone(),
                messages_received: dom.messages_received,
                rx_packets: dom.info.rx_packets,
                blocked_fraction: ratio(
                    blocked_ns as f64,
                    (dom.destroyed_at.unwrap_or(now).saturating_sub(dom.created_at) as f64) * vcpus.len() as f64,
                ),
            });
        }
        let mut hosts = Vec::new();
        for hs in &self.hosts {
            let vms_here = &mut vms[hs.doms.clone()];
            let total_weight: f64 = vms_here.iter().map(|v| v.weight as f64).sum();
            for vm in vms_here.iter_mut() {
                vm.weight_share = ratio(vm.weight as f64, total_weight);
            }
            let busy: Time = self.pcpus[hs.pcpus.clone()].iter().map(|p| p.busy_ns).sum();
            hosts.push(HostMetrics {
                pcpus: hs.pcpus.len(),
                utilization: ratio(busy as f64, host_capacity),
                frag_idle_s: secs(hs.frag_idle_ns),
                context_switches: hs.context_switches,
                ipis: hs.ipis,
                migrations: hs.migrations,
                sched_invocations: hs.sched_invocations,
                ple_exits: hs.ple_exits,
                co_launches: hs.co_launches,
                co_launches_per_s: ratio(hs.co_launches as f64, secs(now)),
                co_ipis: hs.co_ipis,
                fairness: weighted_fairness(vms_here),
                policy_counters: hs.counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            });
        }
        let host =
            if hosts.len() == 1 { hosts.pop().expect("one host") } else { HostMetrics::total(&hosts, &vms, secs(now)) };
        let virtual_clusters = (0..self.jobs.len())
            .filter_map(|j| {
                let name = self.job_names[j].clone()?;
                let members: Vec<&Dom> = self.doms.iter().filter(|d| d.job == j).collect();
                let finished = members.iter().map(|d| d.finished_at).collect::<Option<Vec<Time>>>();
                let started = members.iter().map(|d| d.created_at).min().unwrap_or(0);
                Some(ClusterMetrics {
                    name,
                    workload: members[0].workload.clone(),
                    vms: members.len(),
                    ranks: self.jobs[j].len(),
                    completion_s: finished.and_then(|f| f.into_iter().max()).map(|t| secs(t - started)),
                })
            })
            .collect();
        let net = &self.net;
        let network = (net.messages > 0).then(|| NetworkMetrics {
            messages: net.messages,
            bytes: net.bytes,
            packets: net.packets,
            driver_passes: net.driver_passes,
            message_latency_us_mean: (net.delivered > 0)
                .then(|| net.latency_sum_ns as f64 / net.delivered as f64 / 1e3),
        });
        RunMetrics {
            sim_s: secs(now),
            events: self.events,
            vms,
            host,
            hosts: if hosts.len() > 1 { hosts } else { Vec::new() },
            network,
            virtual_clusters,
        }
    }
}
