//! Guest workload models. Each workload compiles its parameters into one guest program per
//! vCPU (see `vsched_model::guest`) and documents which rows of
//! `shared/specs/workloads.md` it models.
//!
//! To add a workload: write `src/<name>.rs` with a `pub const INFO: WorkloadInfo` and list it
//! in [`REGISTRY`].

pub mod bsp;
pub mod cpu_hog;
pub mod disk;
pub mod idle;
pub mod kernbench;
pub mod mpi;
pub mod npb_cg;
pub mod npb_ep;
pub mod npb_is;
pub mod npb_lu;
pub mod runtime;
pub mod spinlock;
pub mod web;
pub mod working_set;

#[cfg(test)]
mod testkit;

use vsched_model::{ConfigError, GuestSpec, LockKind, ParamDefault, ParamRange, ParamSpec, Params};

/// How a workload appears in the registry and in `vsched workloads`.
pub struct WorkloadInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// The rows of shared/specs/workloads.md this model is built from.
    pub models: &'static str,
    pub params: &'static [ParamSpec],
    /// Builds the guest of one VM, placed in its job by `ranks`; range errors name the
    /// parameter.
    pub build: fn(&Params, &Ranks) -> Result<GuestSpec, ConfigError>,
}

/// Where a VM's vCPUs sit in its parallel job: one MPI rank per vCPU, the VM's vCPU `i`
/// being rank `first + i` of `world`. A VM outside any virtual cluster is a job of its own
/// (`first = 0`, `world = vcpus`); workloads that do not communicate only read `vcpus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ranks {
    pub vcpus: usize,
    pub first: usize,
    pub world: usize,
}

impl Ranks {
    /// A VM that is its own job.
    pub fn alone(vcpus: usize) -> Ranks {
        Ranks { vcpus, first: 0, world: vcpus }
    }
}

pub const REGISTRY: &[WorkloadInfo] = &[
    cpu_hog::INFO,
    idle::INFO,
    spinlock::INFO,
    bsp::INFO,
    web::INFO,
    kernbench::INFO,
    disk::INFO,
    npb_ep::INFO,
    npb_is::INFO,
    npb_lu::INFO,
    npb_cg::INFO,
];

pub fn find(name: &str) -> Option<&'static WorkloadInfo> {
    REGISTRY.iter().find(|w| w.name == name)
}

pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|w| w.name).collect()
}

/// The most threads a program may ask for: far beyond any guest of the papers, small enough
/// that a typo cannot ask the simulator for millions.
pub const MAX_THREADS: i64 = 4096;

/// The names a `lock_kind` parameter takes, and the kind each one names
/// (`vsched_model::LockKind`; `sim/locks.rs` and its siblings say what each does).
const LOCK_KINDS: [(&str, LockKind); 5] = [
    ("ticket", LockKind::Ticket),
    ("tas", LockKind::Tas),
    ("mcs", LockKind::Mcs),
    ("preemptable-ticket", LockKind::PreemptableTicket),
    ("mutex", LockKind::Mutex),
];

/// A workload's `lock_kind` parameter.
pub(crate) fn lock_kind_of(params: &Params) -> Result<LockKind, ConfigError> {
    let names = LOCK_KINDS.map(|(name, _)| name);
    let name = params.choice("lock_kind", &names)?;
    Ok(LOCK_KINDS.iter().find(|(n, _)| *n == name).expect("a listed choice").1)
}

/// The `threads` parameter of a threaded program.
pub(crate) const THREADS_PARAM: ParamSpec = ParamSpec {
    name: "threads",
    default: ParamDefault::Int(0),
    range: ParamRange::Int { min: 0, max: MAX_THREADS },
    doc: "the program's threads (0: one per vCPU); more than the VM's vCPUs share them through the guest \
          kernel's scheduler, fewer leave the other vCPUs halted",
};

/// The program's threads: `threads` if given (not 0), else `default`.
pub(crate) fn threads_of(params: &Params, default: usize) -> usize {
    let n = params.int("threads");
    if n == 0 {
        default
    } else {
        n as usize
    }
}

/// Microseconds (as the user writes them) to nanoseconds.
pub(crate) fn us(x: f64) -> vsched_model::Time {
    (x * 1_000.0).round() as vsched_model::Time
}
