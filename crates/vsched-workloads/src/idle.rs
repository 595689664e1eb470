//! `idle`: a VM whose vCPUs only sleep (halted, never runnable).
//!
//! Models an idle guest, such as the idle HIT domains beside the measured one in seed 004's
//! LU experiment. It takes no CPU; it still counts in the host's total weight.

use vsched_model::{ConfigError, Dur, GuestSpec, Instr, Params, ProgramBuilder, FOREVER};

use crate::{Ranks, WorkloadInfo};

fn build(_params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let mut b = ProgramBuilder::new();
    b.push(Instr::Io(Dur::Fixed(FOREVER)));
    let program = b.build();
    Ok(GuestSpec::lockless(vec![program; ranks.vcpus], false))
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "idle",
    description: "Every vCPU sleeps for ever (an idle guest)",
    models: "(no row: an idle guest)",
    params: &[],
    build,
};
