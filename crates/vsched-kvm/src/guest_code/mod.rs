//! Guest code: a VM's workload, as the simulator runs it (`vsched_model::GuestSpec`), turned
//! into the bytes of its guest memory — page tables, counters, random draws, and one block of
//! x86-64 ring-3 machine code per vCPU (`emit`). `machine` loads the image into a KVM VM.
//!
//! The image depends only on the guest, the seed and the TSC rate, so a scenario and seed
//! give the same image on a given machine. The code generator needs the `kvm` feature (its
//! assembler); the layout and the random draws do not.

pub mod boot;
#[cfg(feature = "kvm")]
pub mod emit;
#[cfg(feature = "kvm")]
mod image;
pub mod layout;
pub mod random_tables;

#[cfg(feature = "kvm")]
pub use image::{build_image, GuestImage, ImageError, VcpuImage};

/// A gap in the TSC between two checks of a guest loop longer than this means the vCPU did
/// not run in between. A loop iteration takes well under 1 µs and a host interrupt that
/// borrows the vCPU's CPU a few µs; being stopped and started again by the scheduler takes
/// at least ~100 µs here (stop p50 ~55 µs plus start p50 ~63 µs, `examples/kvm_costs.rs`).
/// 50 µs sits between: short interruptions count as running, as the simulator counts exit
/// overheads, and each descheduling is missed by at most 50 µs.
pub const DESCHEDULED_GAP_NS: u64 = 50_000;

