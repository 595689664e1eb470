//! `bsp`: bulk-synchronous supersteps: every thread computes, then waits at a barrier.
//!
//! Models the "BSP matrix multiply" row of workloads.md (seed 000's BSPcloud benchmark:
//! block multiply, then a barrier, per superstep) and, with a fine grain, the barrier
//! structure of the NPB and SPLASH-2 LU rows. `jitter` is the coefficient of variation of
//! each thread's compute per superstep (load imbalance). Waiting: `spin` (MPI busy-polling,
//! user mode so PLE does not apply), `block` (mutex + condvar barriers), or
//! `spin-then-block` with `spin_limit_us` of spinning first (libgomp's GOMP_SPINCOUNT).

use vsched_model::{BarrierWait, ConfigError, Dur, GuestSpec, Instr, ParamDefault, ParamSpec, Params, ProgramBuilder};

use crate::{us, Ranks, WorkloadInfo};

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "supersteps", default: ParamDefault::Int(100), doc: "number of compute + barrier steps" },
    ParamSpec { name: "compute_ms", default: ParamDefault::Float(10.0), doc: "mean compute per superstep, ms" },
    ParamSpec {
        name: "jitter",
        default: ParamDefault::Float(0.1),
        doc: "coefficient of variation of per-thread compute",
    },
    ParamSpec { name: "wait", default: ParamDefault::Str("spin"), doc: "\"spin\", \"block\" or \"spin-then-block\"" },
    ParamSpec {
        name: "spin_limit_us",
        default: ParamDefault::Float(200.0),
        doc: "spinning before blocking (spin-then-block), µs",
    },
];

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let vcpus = ranks.vcpus;
    let supersteps = params.int_at_least("supersteps", 1)? as u64;
    let compute_ms = params.float_in("compute_ms", 0.0, f64::INFINITY)?;
    if compute_ms <= 0.0 {
        return Err(params.invalid("compute_ms", format!("expected a number > 0, got {compute_ms}")));
    }
    let jitter = params.float_in("jitter", 0.0, 10.0)?;
    let spin_limit = us(params.float_in("spin_limit_us", 0.0, f64::INFINITY)?);
    let wait = match params.choice("wait", &["spin", "block", "spin-then-block"])?.as_str() {
        "spin" => BarrierWait::Spin,
        "block" => BarrierWait::Block,
        _ => BarrierWait::SpinThenBlock(spin_limit),
    };
    let mut b = ProgramBuilder::new();
    b.repeat(Some(supersteps))
        .push(Instr::Compute(Dur::Jitter { mean: us(compute_ms * 1_000.0), cv: jitter }))
        .push(Instr::Barrier(wait))
        .end_repeat();
    let program = b.build();
    Ok(GuestSpec::lockless(vec![program; vcpus], true))
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "bsp",
    description: "Supersteps of compute then a barrier (spin, block or spin-then-block)",
    models: "BSP matrix multiply (seed 000); barrier phases of NPB and SPLASH-2 LU",
    params: PARAMS,
    build,
};
