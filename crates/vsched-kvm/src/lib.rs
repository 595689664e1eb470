//! vsched-kvm: the policies of vsched scheduling real vCPUs.
//!
//! A policy written for the simulator runs here unchanged: `world::RealWorld` implements
//! the same `World` seam over vCPUs that execute real x86-64 code, and `runner` turns the
//! policy's decisions into starting and stopping vCPU threads, one per vCPU, each doing
//! `KVM_RUN`. See docs/real-vcpus.md.

mod accounting;
pub mod admission;
pub mod backend;
pub mod error;
pub mod fake;
pub mod guest_code;
pub mod isolation;
pub mod machine;
pub mod ple_scaling;
pub mod real_report;
pub mod runner;
pub mod world;

pub use backend::{
    Backend, BackendError, BackendEvent, GuestActivity, GuestCounters, GuestWait, MachineSettings, PleWindow, VmSpec,
};
pub use error::RealError;
pub use real_report::{run_real_json, run_real_json_with, unavailable_reason, RealOptions};
pub use runner::Control;
