//! Plain data a policy reads about its world: a domain's description and a vCPU's
//! host-level state. No behaviour, no simulator: every world behind [`crate::Cx`] speaks
//! these types.

use vsched_engine::Time;

use crate::ids::{PcpuId, VcpuId};

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

/// What policies may read about a domain.
#[derive(Debug, Clone)]
pub struct DomainInfo {
    pub name: String,
    pub vcpus: usize,
    pub weight: u32,
    pub cap: u32,
    pub vm_type: VmType,
    /// Id of the domain's vCPU 0 on its host; its vCPUs are `first_vcpu .. first_vcpu + vcpus`.
    pub first_vcpu: VcpuId,
    /// The VM exists now (false before it is created and after it is destroyed).
    pub online: bool,
    /// The host's driver domain (Xen's Domain-0), which serves the guests' I/O rather than
    /// being a guest itself.
    pub driver: bool,
    /// A KVM host's own threads (per-CPU kernel threads, each VM's QEMU and vhost threads;
    /// `sim/host_threads.rs`), which are not a guest either.
    pub host_threads: bool,
    /// Network packets delivered to the VM's vCPUs so far (messages from other VMs, counted
    /// in MTU-sized packets; messages between ranks of one VM use shared memory and are not
    /// packets). Seed 002's CVS reads its change since a VM was last descheduled.
    pub rx_packets: u64,
    /// The paravirtual features its guest kernel enables.
    pub pv: Paravirt,
    /// The time slice its vCPU threads ask of the host scheduler (`sched_setattr`'s
    /// `sched_runtime`, which EEVDF reads as the entity's slice since Linux 6.12); `None`
    /// keeps the scheduler's default.
    pub slice_request_ns: Option<Time>,
}

/// The paravirtual features a guest kernel turns on, each a per-VM switch, all off by
/// default. KVM advertises them as CPUID feature bits (`KVM_FEATURE_*`,
/// arch/x86/include/uapi/asm/kvm_para.h) and Linux's guest enables each one it finds
/// (`kvm_guest_init`, arch/x86/kernel/kvm.c); the last is a proposal of the literature.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Paravirt {
    /// `KVM_FEATURE_PV_UNHALT`: paravirtual queued spinlocks, whose waiters halt
    /// (`kvm_wait`) and are kicked (`KVM_HC_KICK_CPU`, after which KVM yields to the kicked
    /// vCPU) for kernel locks of every spinlock kind (`sim/queued.rs`).
    pub spinlocks: bool,
    /// `KVM_FEATURE_STEAL_TIME`: the host tells the guest whether each vCPU is preempted
    /// (`steal_time.preempted`), which `vcpu_is_preempted()` reads in the guest's spinning
    /// decisions: a mutex waiter stops spinning on a preempted owner (`sim/mutex.rs`).
    pub steal_time: bool,
    /// `KVM_FEATURE_PV_TLB_FLUSH` (needs `steal_time`): a TLB shootdown skips preempted
    /// vCPUs and asks the host to flush them at their next entry (`kvm_flush_tlb_multi`).
    pub tlb_flush: bool,
    /// `KVM_FEATURE_PV_SCHED_YIELD` (needs `steal_time`): a vCPU that sent a call-function
    /// IPI to a preempted vCPU asks the host to yield to it (`KVM_HC_SCHED_YIELD`).
    pub sched_yield: bool,
    /// The guest marks its kernel critical sections (spinlock held) in memory the host reads,
    /// so that a host with `preempt_delay` may put off preempting it (Uhlig et al., VM '04;
    /// Kashyap et al., eCS, USENIX ATC '18).
    pub critical_sections: bool,
    /// The guest's `cpuidle-haltpoll` driver and `haltpoll` governor (Linux ≥ 5.4), with its
    /// module parameters: it polls before HLT and turns host polling off through
    /// `MSR_KVM_POLL_CONTROL` (`KVM_FEATURE_POLL_CONTROL`, Linux ≥ 5.3; `sim/halt_poll.rs`).
    pub haltpoll: Option<crate::sim::GuestHaltPoll>,
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
