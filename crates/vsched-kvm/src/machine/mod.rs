//! The KVM machine: VMs on `/dev/kvm` whose vCPUs run real x86-64 code, one OS thread per
//! vCPU, started and stopped by the real-vCPU scheduler through `backend::Backend`.
//!
//! # What it builds
//!
//! Each scenario VM becomes a KVM VM (rust-vmm's `kvm-ioctls`) with one memory slot holding
//! the image `guest_code` compiles from the VM's `GuestSpec` — the very description the
//! simulator runs. Each vCPU gets an OS thread (`vcpu_thread`) that is parked until `start`
//! pins it to a host CPU (`sched_setaffinity`, only when the CPU changes) and lets it
//! `KVM_RUN`; `stop` sets `immediate_exit`, sends a no-op signal installed without
//! `SA_RESTART`, and returns once the thread says it is out of guest code (or fails after
//! 1 s). The scheduler decides everything; the host CPU is the vCPU's alone only if the
//! scheduler gives it to no one else (the host's other processes still preempt it).
//!
//! # Guest code
//!
//! 64-bit ring-3 code, entered directly in long mode through the segment registers: under
//! `kvm_pvm` (this host's `/dev/kvm`: page-table-based virtualization inside a KVM guest)
//! ring-0 and real-mode guest code is emulated instruction by instruction (~2 µs a loop
//! iteration) while ring-3 code runs natively. Identity-mapped 2 MiB pages with the user
//! bit; no interrupts, no stack. Supported: `Compute` (TSC-timed loops), ticket and
//! test-and-set spinlocks with `PAUSE` in the spin loop (kernel-mode ones run in ring 3 too,
//! and raise synthesized pause-loop exits: `ple_scaling`), `Unlock`, spinning
//! sense-reversing barriers among the VM's working threads (not its `idle_vcpus`), finite
//! and endless loops, `Exit`. Everything else is refused by `check_supported`, which names
//! the scenario field to change; so is a guest whose image exceeds `MachineSettings`.
//!
//! The guest reports through counters in its memory, one cache line each (the
//! `GuestCounters`, and the `GuestActivity` word it writes as it enters and leaves each
//! phase), never by exits: it exits only to say it finished, with an MMIO write
//! to a mapped page no memory backs (not an `out`: `kvm_pvm` drops IOPL 3 at the first
//! exit), and to raise a pause-loop exit, with a write to the same page. Random draws
//! (jittered computes, locks chosen at random) are made on the host from
//! `vsched_engine` streams seeded from (seed, global vCPU) with the simulator's
//! distributions, and stored in tables the guest cycles through (`random_tables`).
//!
//! # Approximations, and facts measured here
//!
//! - Running time is the guest's own TSC count minus gaps longer than
//!   `guest_code::DESCHEDULED_GAP_NS` (50 µs): the vCPU was not running then. It agrees with
//!   the vCPU thread's CPU time to 0.03 % on this host (see that constant for how it was
//!   picked). Guest RDTSC reads the host TSC here, so guest and scheduler share one clock;
//!   `tsc::tsc_hz` calibrates it against `CLOCK_MONOTONIC` once per process.
//! - No hardware pause-loop exits: this host has no PLE, and PLE only fires at CPL 0 anyway,
//!   while our spinning is at CPL 3. The guest code synthesizes them for kernel-mode locks
//!   (an MMIO write after a window of spinning, `ple_scaling`), which its thread reports as
//!   `BackendEvent::PauseLoopExit` without waiting for the scheduler's answer.
//! - Exits are expensive (an I/O exit round trip ~90 µs, `KVM_RUN` with `immediate_exit`
//!   ~10 µs), hence the counters in memory. Stop and start latencies: `kvm_costs`.
//! - Hold times include preemptions (they are what lock-holder preemption lengthens); spin
//!   and compute cycles do not.
//! - The random draws follow the simulator's distributions, not its sequence: it draws
//!   from one stream per VM as its threads happen to run, here each vCPU has its own.
//!
//! # Safety
//!
//! vCPU threads are `SCHED_OTHER` whatever their creator's class (a vCPU thread inheriting
//! a real-time scheduler thread's priority starves it) and block every asynchronous signal
//! but the kick, so Ctrl-C reaches the scheduler's threads. Dropping `KvmBackend` (normally,
//! on an error, or while unwinding from a panic) tells every thread to quit, kicks those in
//! guest code, joins them all, and only then closes the VMs and unmaps their memory; each
//! thread hands back its vCPU fd, whose mmapped `kvm_run` the kick writes, so nothing is
//! unmapped while it may still be written (the teardown race that crashed the prototype).
//! A backend that fails half-built drops what it built the same way.

mod support;

pub use support::check_supported;

#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
mod exit_cost;
#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
mod kvm_backend;
#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
mod thread_setup;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod tsc;
#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
mod vcpu_thread;
#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
mod vm;

#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
pub use exit_cost::ple_exit_ns;
#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
pub use kvm_backend::{kvm_available, KvmBackend};

#[cfg(not(all(feature = "kvm", target_os = "linux", target_arch = "x86_64")))]
mod unavailable;
#[cfg(not(all(feature = "kvm", target_os = "linux", target_arch = "x86_64")))]
pub use unavailable::{kvm_available, ple_exit_ns, KvmBackend};
