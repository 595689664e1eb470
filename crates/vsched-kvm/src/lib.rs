//! vsched-kvm: the policies of vsched scheduling real vCPUs.
//!
//! A policy written for the simulator runs here unchanged: `world::RealWorld` implements
//! the same `World` seam over vCPUs that execute real x86-64 code, and `runner` turns the
//! policy's decisions into starting and stopping vCPU threads, one per vCPU, each doing
//! `KVM_RUN`. See docs/real-vcpus.md.

pub mod backend;
pub mod guest_code;
pub mod machine;

pub use backend::{Backend, BackendError, BackendEvent, GuestActivity, GuestCounters, Limits, VmSpec};
