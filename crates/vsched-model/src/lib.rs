//! The vsched host model: pCPUs, domains, vCPUs running guest programs, the [`Policy`]
//! interface policies implement, accounting, metrics and traces.

pub mod guest;
pub mod ids;
pub mod metrics;
pub mod params;
pub mod policy;
pub mod sim;
pub mod trace;

pub use guest::{BarrierWait, Dur, GuestSpec, Instr, LockChoice, LockKind, Program, ProgramBuilder, FOREVER};
pub use ids::{DomId, PcpuId, VcpuId};
pub use metrics::{ClusterMetrics, HostMetrics, NetworkMetrics, RunMetrics, VmMetrics};
pub use params::{ConfigError, ParamDefault, ParamSpec, Params, Value};
pub use policy::{Decision, Policy, PolicyInfo, YieldReason};
pub use sim::{
    driver_guest, Cx, DomainConfig, DomainInfo, HostConfig, NetworkConfig, Simulation, Until, VcpuState, VmType,
    INTERRUPTED,
};
pub use trace::{Span, Trace};
pub use vsched_engine::{Time, NS_PER_MS, NS_PER_S, NS_PER_US};
