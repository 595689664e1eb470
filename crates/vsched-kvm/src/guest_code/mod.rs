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
pub use image::{build_image, GuestImage, ImageError, JobPlace, Mailbox, VcpuImage};

/// A gap in the TSC between two checks of a guest loop longer than this means the vCPU did
/// not run in between. Picked by measurement (a vCPU never stopped, 2 s, this host): the
/// guest's running time then matched its thread's CPU time to 0.6 ms at 50 µs, while 10 and
/// 20 µs dropped 14 and 19 ms (host interrupts that take the vCPU's CPU for 10–50 µs, which
/// the thread's time includes: the simulator too counts such overheads as running) and 100
/// to 1000 µs counted 0.3 to 2.6 ms more than the thread ran (short host preemptions). Being
/// stopped by the scheduler is longer still (stop p50 ~45 µs plus start p50 ~45 µs,
/// `examples/kvm_costs.rs`), so each descheduling is missed by at most 50 µs.
pub const DESCHEDULED_GAP_NS: u64 = 50_000;
