//! What a trace records: plain data, no presentation. A sink (`vsched`'s JSON writer) decides
//! how each event looks in Perfetto. Every id here is global (across the hosts of a cluster),
//! as the simulator numbers them.

use vsched_engine::Time;

use crate::ids::{DomId, PcpuId, VcpuId};

/// One interval during which a pCPU ran one vCPU, either making progress or spinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub pcpu: PcpuId,
    pub vcpu: VcpuId,
    pub dom: DomId,
    /// The vCPU's index within its domain.
    pub index: usize,
    pub start: Time,
    pub end: Time,
    pub spinning: bool,
}

/// What a vCPU is doing, as its own track shows it. An offline vCPU (its VM not created yet,
/// or destroyed) has no activity: its track is empty there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VcpuActivity {
    /// On pCPU `pcpu`, making progress (or in the hypervisor on its behalf: exits, handlers).
    Running { pcpu: PcpuId },
    /// On pCPU `pcpu`, busy-waiting: a lock, a spinning barrier, IPI acknowledgements, a poll.
    Spinning { pcpu: PcpuId },
    /// Ready but waiting for a pCPU: the guest's steal time.
    Runnable,
    /// Halted: nothing to run until a wake-up.
    Blocked,
}

/// One interval of one vCPU's activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VcpuSlice {
    pub vcpu: VcpuId,
    pub activity: VcpuActivity,
    pub start: Time,
    pub end: Time,
}

/// Whose value a counter is: a host's, a pCPU's or a vCPU's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CounterOf {
    Host(usize),
    Pcpu(PcpuId),
    Vcpu(VcpuId),
}

/// The name of the simulator's own counter: a host's runnable vCPUs that no pCPU runs (its
/// waiting line, whatever the policy's run queues look like).
pub const RUNNABLE_VCPUS: &str = "runnable vCPUs";

/// A counter's value from `at` on (until its next sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterSample {
    pub of: CounterOf,
    /// The counter's name: [`RUNNABLE_VCPUS`], or one a policy publishes (`Cx::trace_counter`).
    pub name: &'static str,
    pub at: Time,
    pub value: i64,
}

/// Something that happens at an instant, on a vCPU's track or a VM's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instant {
    /// `vcpu` spun in kernel mode past the PLE window and exited to the hypervisor.
    PleExit { vcpu: VcpuId },
    /// `vcpu` was descheduled while its running thread held a lock.
    LockHolderPreempted { vcpu: VcpuId, locks_held: usize },
    /// An unlock passed `lock` straight to a waiter on `vcpu`; `waiter_running` is false when
    /// that waiter was not executing (a lock-waiter preemption, as the metrics count it).
    LockHandoff { vcpu: VcpuId, lock: u32, waiter_running: bool },
    /// The policy launched a co-scheduling of domain `dom` (`World::co_launch`), from `pcpu`
    /// if the callback ran on one.
    CoLaunch { dom: DomId, pcpu: Option<PcpuId> },
}

/// What a flow (an arrow from one track to another) stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FlowKind {
    /// A reschedule IPI from a policy callback to another pCPU.
    ReschedIpi,
    /// A guest IPI (`ipi_sync`, a TLB shootdown) from one vCPU to another of its VM.
    GuestIpi,
    /// A message between guest ranks, from the sender's vCPU to the receiver's.
    Message,
}

/// A row a flow starts or ends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Track {
    Pcpu(PcpuId),
    Vcpu(VcpuId),
    /// What a host does outside any pCPU in the model (a wake-up's tickle, a policy timer).
    Host(usize),
}

/// One end of a flow: its start (`leaving`) or its end, which carry the same `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowPoint {
    pub kind: FlowKind,
    /// Unique within a trace: both ends of one flow carry it.
    pub id: u64,
    pub at: Time,
    pub on: Track,
    pub leaving: bool,
}

/// One recorded event, in the order the trace records it (each interval when it closes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceEvent {
    Span(Span),
    Vcpu(VcpuSlice),
    Counter(CounterSample),
    Instant { at: Time, what: Instant },
    Flow(FlowPoint),
}
