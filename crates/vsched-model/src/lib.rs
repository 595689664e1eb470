//! The vsched host model: the [`Policy`] interface and the seam it schedules through
//! ([`Cx`] over a [`World`]), and the simulator, one world behind that seam: pCPUs,
//! domains, vCPUs running guest programs, accounting, metrics and traces.
//!
//! Dependencies inside the crate run one way: `ids`, `domain`, `params`, `trace` (plain data) <-
//! `cx` (the seam) <- `policy` (the interface) <- `sim` (a world). Nothing above `sim`
//! knows it exists.

pub mod cx;
pub mod domain;
pub mod entitlement;
pub mod guest;
pub mod hand_world;
pub mod histogram;
pub mod ids;
pub mod jitter;
pub mod metrics;
pub mod params;
pub mod policy;
pub mod queues;
pub mod sim;
pub mod trace;
pub mod water_filling;

pub use cx::{Cx, World};
pub use domain::{DomainInfo, Paravirt, VcpuState, VmType};
pub use guest::{BarrierWait, Dur, GuestSpec, Instr, LockChoice, LockKind, Program, ProgramBuilder, FOREVER};
pub use histogram::Histogram;
pub use ids::{DomId, PcpuId, VcpuId};
pub use metrics::{ClusterMetrics, HaltPollMetrics, HostMetrics, IoMetrics, NetworkMetrics, RunMetrics, VmMetrics};
pub use params::{concat_params, number, ConfigError, ParamDefault, ParamRange, ParamSpec, Params, Value};
pub use policy::{Decision, Hypervisor, Policy, PolicyInfo, YieldReason, DEFAULT_STALL_TIMEOUT_NS};
pub use queues::{FifoQueue, VtimeQueue};
pub use sim::{
    domains_in_simulation_order, driver_guest, hardware, host_threads_name, Caches, Clocks, DomainConfig,
    GuestHaltPoll, GuestTick, HaltPoll, Hardware, HostConfig, HostThreads, IoConfig, NetworkConfig, RunError,
    Simulation, Until, DEFAULT_GUEST_HZ, DEFAULT_HARDWARE, DEFAULT_IDLE_WAKES_PER_S, DEFAULT_KTHREAD_RUN_NS,
    DEFAULT_KTHREAD_WAKES_PER_S, DEFAULT_VHOST_PACKET_NS, DEFAULT_VIRTIO_BLK_REQUEST_NS, GUEST_HALT_POLL_NS_DEFAULT,
    HARDWARE, KERNEL_FOOTPRINT_BYTES, KVM_HALT_POLL_NS_DEFAULT, MIN_SLICE_NS,
};
pub use trace::{
    CounterOf, FlowKind, FlowPoint, Instant, Span, Trace, TraceEvent, TraceSink, Track, VcpuActivity, VcpuSlice,
};
pub use vsched_engine::{Time, NS_PER_MS, NS_PER_S, NS_PER_US};
