//! The seam between the real-vCPU scheduler (`world`, `runner`) and whatever runs the vCPUs
//! (`machine`: KVM; `fake`: plain threads, for tests without `/dev/kvm`).
//!
//! The scheduler owns every decision: which vCPU holds which pCPU (a host CPU), for how
//! long, and when. A backend only carries them out — let a vCPU execute guest code on one
//! host CPU, stop it — and reports what the guest did, read from guest memory, never from
//! exits (real guests do not exit to say they spin).

use std::time::Instant;

/// What the guest of one vCPU has done so far, from counters the guest code keeps in its
/// own memory. Cycles are TSC cycles (`Backend::tsc_hz` converts them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GuestCounters {
    /// Locks acquired.
    pub acquisitions: u64,
    /// Cycles spent busy-waiting (lock and barrier waits) while the vCPU ran: gaps in the
    /// TSC longer than the backend's descheduling threshold are not counted.
    pub spin_cycles: u64,
    /// Cycles from each acquisition to its release, preemptions included.
    pub hold_cycles: u64,
    /// Barrier episodes passed.
    pub barriers: u64,
    /// Cycles of compute the guest did while the vCPU ran (same rule as `spin_cycles`).
    pub compute_cycles: u64,
    /// Pause-loop exits the guest made (kernel-mode spinning that reached its window).
    pub ple_exits: u64,
    /// Messages the guest received (`Recv`s completed), from any rank.
    pub messages_received: u64,
}

/// What the guest of a vCPU is doing now, as its code last wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestActivity {
    /// Not started, or computing.
    Compute,
    /// Waiting for a lock.
    LockWait,
    /// Holding a lock.
    LockHeld,
    /// Waiting at a barrier.
    BarrierWait,
    /// Polling for a message (`Recv`).
    MessageWait,
    /// Halted (blocked) until the host wakes it: at a blocking barrier, or asleep.
    Halted,
    /// The program ended.
    Done,
}

/// What a halted vCPU waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestWait {
    /// A word of its memory to take a value (a blocking barrier's release) or to reach one
    /// (a message count, a blocking `Recv`); `released`: it has it now.
    Release { released: bool },
    /// A sleep of this many TSC cycles from its halt (`u64::MAX`: for ever).
    Sleep { cycles: u64 },
}

/// Something a vCPU did on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendEvent {
    /// The guest program of `vcpu` ended; the vCPU will not run guest code again.
    Finished { vcpu: usize },
    /// `vcpu`'s kernel-mode spinning reached its pause-loop window. The vCPU went back to
    /// guest code at once; the scheduler answers (`yield_`) when it gets the event.
    PauseLoopExit { vcpu: usize },
    /// `vcpu` halted: it left guest code and waits to be started again; what it waits for
    /// is `Backend::wait`.
    Halted { vcpu: usize },
    /// `vcpu` released a blocking barrier of its VM and went on: the VM's vCPUs halted on it
    /// may run again.
    Wake { vcpu: usize },
    /// `vcpu` sent a message to rank `to` of its job in another VM (`bytes` long) and went
    /// on: the scheduler carries it (`Backend::deliver`), as a host's network would.
    Send { vcpu: usize, to: u32, bytes: u64 },
    /// `vcpu` stopped for a reason the backend cannot recover from (an unexpected exit, a
    /// failed ioctl): the run fails with this message.
    Failed { vcpu: usize, message: String },
}

/// Why a backend cannot be built or used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendError {
    /// This machine cannot run real vCPUs (no `/dev/kvm`, no permission, a build without
    /// the `kvm` feature): refused as bad input, exit 2.
    Unavailable(String),
    /// The scenario asks for something the backend cannot run yet; `field` is the scenario
    /// path (`vm[0].workload.lock_kind`): refused as bad input, exit 2.
    Unsupported { field: String, message: String },
    /// Something failed while running: exit 1.
    Failed(String),
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendError::Unavailable(m) | BackendError::Failed(m) => f.write_str(m),
            BackendError::Unsupported { field, message } => write!(f, "{field}: {message}"),
        }
    }
}

/// One VM to build: its name (for messages), its guest (the workload's own description, the
/// one the simulator runs), the global index of its first vCPU and its vCPUs' ranks in its
/// job. vCPUs are numbered over all VMs of the host, in order, as the policy's `VcpuId`s are.
pub struct VmSpec<'a> {
    pub name: &'a str,
    /// The scenario table it comes from, for field paths in errors: `vm[0]`,
    /// `virtual_cluster[1]`.
    pub table: String,
    pub guest: &'a vsched_model::GuestSpec,
    pub first_vcpu: usize,
    /// The rank of its first vCPU in its job, and the job's ranks (a VM that is not in a
    /// virtual cluster is its own job: 0 and its vCPUs).
    pub first_rank: usize,
    pub world: usize,
}

impl<'a> VmSpec<'a> {
    /// A VM that is its own job, from the `index`-th `[[vm]]` table.
    pub fn alone(name: &'a str, index: usize, guest: &'a vsched_model::GuestSpec, first_vcpu: usize) -> Self {
        VmSpec { name, table: format!("vm[{index}]"), guest, first_vcpu, first_rank: 0, world: guest.vcpus }
    }
}

/// What a backend builds its VMs with.
#[derive(Debug, Clone, Copy)]
pub struct MachineSettings {
    /// Guest memory of one VM, at most.
    pub memory_per_vm_bytes: u64,
    /// Pause-loop exiting of the guests' kernel-mode spinning; `None`: off.
    pub ple: Option<PleWindow>,
}

/// The pause-loop window of a guest's kernel-mode spinning, in TSC cycles of running
/// (`ple_scaling` derives it from the scenario's host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PleWindow {
    /// The window at the start, and again each time the vCPU is scheduled in.
    pub base_cycles: u64,
    /// Growth factor at each exit (1: fixed, as Xen; 2: KVM's `ple_window_grow`).
    pub grow: u32,
    /// The window never grows past this.
    pub max_cycles: u64,
    /// An exit that keeps the vCPU out of guest code longer than this means it was stopped
    /// meanwhile (a descheduling); a shorter one is the exit's own cost.
    pub exit_gap_cycles: u64,
}

/// Runs vCPUs as the scheduler says. Every method is called from the scheduler's thread.
pub trait Backend {
    fn n_vcpus(&self) -> usize;
    /// TSC ticks per second, for `GuestCounters` cycles.
    fn tsc_hz(&self) -> u64;
    /// Lets `vcpu` execute guest code on host CPU `host_cpu` (its thread pinned there) until
    /// `stop`. Returns once the request is issued. `vcpu` must be stopped and not finished.
    fn start(&mut self, vcpu: usize, host_cpu: usize) -> Result<(), BackendError>;
    /// Stops `vcpu` and returns once it no longer executes guest code (or has finished).
    fn stop(&mut self, vcpu: usize) -> Result<(), BackendError>;
    /// What `vcpu`'s guest is doing now (racy by nature: the guest may change it next).
    fn activity(&self, vcpu: usize) -> GuestActivity;
    /// Whether `vcpu`'s guest is in kernel mode now (waiting for or holding a kernel-mode
    /// lock); as racy as `activity`.
    fn in_kernel(&self, _vcpu: usize) -> bool {
        false
    }
    fn counters(&self, vcpu: usize) -> GuestCounters;
    /// Delivers to `vcpu` a message from rank `from` of its job (after `BackendEvent::Send`):
    /// its guest's count of messages from `from` goes up. Backends whose guests never send
    /// need not answer.
    fn deliver(&mut self, _vcpu: usize, _from: u32) {}
    /// What `vcpu`, halted (after `BackendEvent::Halted`), waits for. Backends whose
    /// guests never halt need not answer.
    fn wait(&self, _vcpu: usize) -> GuestWait {
        GuestWait::Release { released: true }
    }
    /// Waits for the next event until `deadline`; `None` when the deadline passed first.
    fn next_event(&mut self, deadline: Instant) -> Option<BackendEvent>;
}
