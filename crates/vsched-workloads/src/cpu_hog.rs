//! `cpu_hog`: every vCPU computes forever and never synchronizes.
//!
//! Models the "CPU hog" row of workloads.md: the CPU-bound filler threads of seed 000 ("a
//! multiplication in a loop"). Never finishes, so it has no completion time.

use vsched_model::{ConfigError, Dur, GuestSpec, Instr, Params, ProgramBuilder, FOREVER};

use crate::{Ranks, WorkloadInfo};

fn build(_params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let mut b = ProgramBuilder::new();
    b.push(Instr::Compute(Dur::Fixed(FOREVER)));
    let program = b.build();
    Ok(GuestSpec::lockless(vec![program; ranks.vcpus], false))
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "cpu_hog",
    description: "Every vCPU computes forever (CPU-bound filler)",
    models: "CPU hog",
    params: &[],
    build,
};
