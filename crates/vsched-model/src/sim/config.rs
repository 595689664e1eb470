//! What a scenario configures: the host's hardware and hypervisor overheads, the network,
//! and each domain. Plain data with documented defaults; `build` turns it into a simulation.

use vsched_engine::{Time, NS_PER_MS, NS_PER_US};

use super::disk::IoConfig;
use super::guest_kernel::GuestTick;
use super::halt_poll::HaltPoll;
use super::hardware::{hardware, Caches, Hardware, DEFAULT_HARDWARE};
use super::host_threads::HostThreads;
use crate::domain::{Paravirt, VmType};
use crate::guest::{GuestSpec, Instr, ProgramBuilder};

/// Host hardware and hypervisor overheads. Defaults come from a hardware era (`hardware`,
/// docs/realism.md); every one can be set in the scenario's `[host]`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    pub pcpus: usize,
    /// Sockets, each with its own last-level cache; `pcpus` is a multiple of
    /// `sockets × threads_per_core`. pCPUs are numbered socket by socket, a core's hardware
    /// threads next to each other.
    pub sockets: usize,
    /// Hardware threads per core (2 with SMT); a core's threads share its L2.
    pub threads_per_core: usize,
    /// With SMT, a thread's compute rate while a sibling thread runs a vCPU, as a fraction of
    /// its rate alone (`smt`, [`super::smt::DEFAULT_SMT_RATE`]); in (0, 1].
    pub smt_rate: f64,
    /// Cache sizes and refill latencies (see `cache`).
    pub caches: Caches,
    /// Clock used to turn PLE cycle counts into time.
    pub cpu_ghz: f64,
    /// Saving one vCPU's state and loading another's (VMCS switch, register state).
    pub context_switch_ns: Time,
    /// Paid beyond `context_switch_ns` by a vCPU switched in on another pCPU than the one it
    /// last ran on. 0 by default: on hardware a migration's cost is the cache refill, which
    /// `cache` models; a platform whose migrating switch is dearer in itself (kvm_pvm's, its
    /// per-CPU state reloaded: docs/real-vcpus.md) sets it.
    pub migration_ns: Time,
    /// From sending an IPI to the target pCPU entering its scheduler.
    pub ipi_latency_ns: Time,
    /// Cost of one scheduler invocation on a pCPU (charged before the chosen vCPU runs).
    pub sched_cost_ns: Time,
    /// PLE window in cycles (0 disables pause-loop exiting). Xen and KVM default: 4096.
    pub ple_window_cycles: u64,
    /// PLE gap in cycles. Recorded for completeness; see `ple` for why it does
    /// not change a continuous spin.
    pub ple_gap_cycles: u64,
    /// Window growth factor per exit; 1 keeps it fixed (Xen), 2 is KVM's `ple_window_grow`
    /// (and then the window resets to `ple_window_cycles` when the vCPU is scheduled in).
    /// `None`: the policy's hypervisor's own (`Policy::ple_window_grow`).
    pub ple_grow: Option<u32>,
    /// The longest a reschedule of a vCPU inside a marked critical section is put off
    /// (`preempt_delay`); `None`: the policy's own (`Policy::preempt_delay_ns`), 0 = off.
    pub preempt_delay_ns: Option<Time>,
    /// KVM's `ple_window_max`: the window never grows beyond this.
    pub ple_window_max_cycles: u64,
    /// A guest's IPI handler (a TLB flush and its acknowledgement).
    pub ipi_handler_ns: Time,
    /// One iteration of a paravirtual spinlock's wait loop (PAUSE, load, compare).
    pub spin_iteration_cycles: u64,
    /// A VM exit and the VM entry that ends it (the round trip, nothing handled): paid by
    /// the vCPU, without progress, at each pause-loop exit, and at each interrupt it
    /// receives or sends unless the hardware delivers it without an exit (below).
    pub vm_exit_ns: Time,
    /// The hypervisor's work on a pause-loop exit beyond the exit itself (its yield handler).
    pub ple_handler_ns: Time,
    /// A running vCPU takes an interrupt without a VM exit (posted interrupts, APICv).
    pub posted_interrupts: bool,
    /// A vCPU sends an IPI without a VM exit (Intel IPI virtualization).
    pub ipi_virtualization: bool,
    /// From a wake-up IPI reaching an idle pCPU to that pCPU scheduling: the exit latency of
    /// the idle state it sleeps in (C1E on the presets' servers).
    pub idle_wake_ns: Time,
    /// A guest timer interrupt, whole: the exit, the injection, the guest's handler and its
    /// timer re-arm (`guest_kernel`): each tick of a running vCPU, each timer wake of a halted one.
    pub timer_irq_ns: Time,
    /// A guest kernel's switch between two threads of one VM (`guest_sched`).
    pub thread_switch_ns: Time,
    /// Whether the pCPUs' clocks are out of step (see `clocks`).
    pub clocks: Clocks,
    /// How late a hypervisor timer may fire; `None`: the policy's hypervisor's own
    /// (`Policy::timer_slop_ns`). Ignored with `Clocks::Lockstep`.
    pub timer_slop_ns: Option<Time>,
    /// Each VM present from the start begins its workload at an offset drawn uniformly in
    /// `[0, workload_start_spread_ns)`. Ignored with `Clocks::Lockstep`.
    pub workload_start_spread_ns: Time,
    /// The disk and the block backend (`disk`).
    pub io: IoConfig,
    /// The host's own threads and timer tick, on a KVM host (`host_threads`); `None`: a
    /// silent host.
    pub host_threads: Option<HostThreads>,
    /// KVM's host halt-polling (`halt_poll`): off (`halt_poll_ns` 0) unless the scenario sets it.
    pub halt_poll: HaltPoll,
}

/// How the pCPUs' timers relate to each other (see `sim/clocks.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clocks {
    /// As on a real host: every pCPU ticks at its own phase, timers
    /// fire late by up to the timer slop, and VMs start their workloads at seeded offsets.
    Independent,
    /// Every pCPU decides at t = 0 and ticks at the same instants, timers fire exactly and
    /// every workload starts at 0: traces can be checked by hand, but identical CPU-bound
    /// vCPUs stay aligned and a per-vCPU scheduler turns into an accidental gang scheduler.
    Lockstep,
}

impl Default for HostConfig {
    /// A 4-pCPU host of the default hardware era ([`DEFAULT_HARDWARE`]).
    fn default() -> Self {
        HostConfig::of(hardware(DEFAULT_HARDWARE).expect("the default hardware is a preset"))
    }
}

impl HostConfig {
    /// A 4-pCPU host with `hw`'s machine costs and the defaults for everything else.
    pub fn of(hw: &Hardware) -> Self {
        HostConfig {
            pcpus: 4,
            sockets: 1,
            threads_per_core: 1,
            smt_rate: super::smt::DEFAULT_SMT_RATE,
            caches: hw.caches,
            cpu_ghz: hw.cpu_ghz,
            context_switch_ns: hw.context_switch_ns,
            migration_ns: 0,
            ipi_latency_ns: hw.ipi_latency_ns,
            sched_cost_ns: hw.sched_cost_ns,
            ple_window_cycles: 4096,
            ple_gap_cycles: 128,
            ple_grow: None,
            preempt_delay_ns: None,
            // KVM_VMX_DEFAULT_PLE_WINDOW_MAX (UINT_MAX): unbounded in practice.
            ple_window_max_cycles: u32::MAX as u64,
            ipi_handler_ns: hw.ipi_handler_ns,
            spin_iteration_cycles: hw.spin_iteration_cycles,
            vm_exit_ns: hw.vm_exit_ns,
            ple_handler_ns: hw.ple_handler_ns,
            posted_interrupts: hw.posted_interrupts,
            ipi_virtualization: hw.ipi_virtualization,
            idle_wake_ns: hw.idle_wake_ns,
            timer_irq_ns: hw.timer_irq_ns,
            thread_switch_ns: hw.thread_switch_ns,
            clocks: Clocks::Independent,
            timer_slop_ns: None,
            // One Xen tick: enough to randomise the VMs' order against every scheduler's
            // clock, small against any measured run (see docs/realism.md).
            workload_start_spread_ns: 10 * NS_PER_MS,
            io: IoConfig::default(),
            host_threads: None,
            halt_poll: HaltPoll::OFF,
        }
    }

    pub fn ple_window_ns(&self) -> Option<Time> {
        (self.ple_window_cycles > 0).then(|| self.cycles_ns(self.ple_window_cycles))
    }

    pub fn cycles_ns(&self, cycles: u64) -> Time {
        ((cycles as f64) / self.cpu_ghz).round().max(1.0) as Time
    }

    /// How long a paravirtual spinlock waiter spins before it halts: `SPIN_THRESHOLD`
    /// (1 << 15, qspinlock_paravirt.h) iterations.
    pub fn pv_spin_ns(&self) -> Time {
        self.cycles_ns((1 << 15) * self.spin_iteration_cycles)
    }

    /// A preemptable ticket lock waiter's timeout per waiter ahead of it: `TIMEOUT_UNIT`
    /// (1 << 14) iterations of its wait loop (the authors' patch published with Ouyang and
    /// Lange, VEE 2013, `__ticket_spin_lock`, github.com/drouyang/pmtlock vee13/pmtlock-v1.0).
    pub fn pmt_unit_ns(&self) -> Time {
        self.cycles_ns((1 << 14) * self.spin_iteration_cycles)
    }
}

/// The network between and within hosts (see `network`). Defaults are a 10 GbE-class
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
    /// The paravirtual features its guest enables.
    pub pv: Paravirt,
    /// The slice its vCPU threads request of the host scheduler (`DomainInfo`).
    pub slice_request_ns: Option<Time>,
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
    /// The memory each of its guest threads keeps reusing: what a thread refills after
    /// others evicted it or after it moved (see `cache`).
    pub working_set_bytes: u64,
    /// Its guest kernel's timer interrupts (see `guest_kernel`).
    pub tick: GuestTick,
}

/// The guest of a driver domain with `vcpus` vCPUs: every vCPU serves the host's network
/// backlog forever (see `network`).
pub fn driver_guest(vcpus: usize) -> GuestSpec {
    let mut b = ProgramBuilder::new();
    b.repeat(None).push(Instr::NetServe).end_repeat();
    let program = b.build();
    GuestSpec::lockless(vec![program; vcpus], false)
}
