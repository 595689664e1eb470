//! Plain data a policy reads about its world: a domain's description and a vCPU's
//! host-level state. No behaviour, no simulator: every world behind [`crate::Cx`] speaks
//! these types.

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
