//! The KVM machine: VMs on `/dev/kvm` whose vCPUs run real x86-64 code, one OS thread per
//! vCPU, started and stopped by the real-vCPU scheduler (`backend::Backend`).
//!
//! (Design notes: see the end of this header.)

mod support;

pub use support::check_supported;

#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
mod kvm_backend;
#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
mod thread_setup;
#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
pub mod tsc;
#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
mod vcpu_thread;
#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
mod vm;

#[cfg(all(feature = "kvm", target_os = "linux", target_arch = "x86_64"))]
pub use kvm_backend::{kvm_available, KvmBackend};

#[cfg(not(all(feature = "kvm", target_os = "linux", target_arch = "x86_64")))]
mod unavailable;
#[cfg(not(all(feature = "kvm", target_os = "linux", target_arch = "x86_64")))]
pub use unavailable::{kvm_available, KvmBackend};
