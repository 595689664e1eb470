//! `bsp`: bulk-synchronous supersteps: every thread computes, then waits at a barrier.
//!
//! Models the "BSP matrix multiply" row of workloads.md (seed 000's BSPcloud benchmark:
//! block multiply, then a barrier, per superstep) and, with a fine grain, the barrier
//! structure of the NPB and SPLASH-2 LU rows. `jitter` is the coefficient of variation of
//! each thread's compute per superstep (load imbalance). Waiting is the `runtime`'s
//! (`runtime.rs`): `pthreads` blocks (a mutex + condvar or `pthread_barrier_t` barrier, the
//! default: a threaded program without a parallel runtime), `libgomp` and `iomp` spin then
//! block, `openmpi` and `mpich2` busy-poll (user mode, so PLE does not apply). `wait` and
//! `spin_limit_us` override it. `threads` sets the program's threads (one per vCPU by
//! default): beyond the VM's vCPUs its guest kernel schedules them, and the OpenMP runtimes
//! wait as they do when oversubscribed.

use vsched_model::{ConfigError, Dur, GuestSpec, Instr, ParamDefault, ParamRange, ParamSpec, Params, ProgramBuilder};

use crate::{runtime, threads_of, us, Ranks, WorkloadInfo, THREADS_PARAM};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "supersteps",
        default: ParamDefault::Int(100),
        range: ParamRange::Int { min: 1, max: 1_000_000_000 },
        doc: "number of compute + barrier steps",
    },
    ParamSpec {
        name: "compute_ms",
        default: ParamDefault::Float(10.0),
        range: ParamRange::Float { min: 0.0, max: 1e6 },
        doc: "mean compute per superstep, ms",
    },
    ParamSpec {
        name: "jitter",
        default: ParamDefault::Float(0.1),
        range: ParamRange::Float { min: 0.0, max: 10.0 },
        doc: "coefficient of variation of per-thread compute",
    },
    THREADS_PARAM,
    runtime::runtime_param("pthreads"),
    runtime::WAIT_PARAM,
    runtime::SPIN_LIMIT_PARAM,
];

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let vcpus = ranks.vcpus;
    let supersteps = params.int("supersteps") as u64;
    let compute_ms = params.float("compute_ms");
    if compute_ms <= 0.0 {
        return Err(params.invalid("compute_ms", format!("expected a number > 0, got {compute_ms}")));
    }
    let jitter = params.float("jitter");
    let threads = threads_of(params, vcpus);
    let wait = runtime::wait_of(params, runtime::RUNTIMES, threads, vcpus)?;
    let mut b = ProgramBuilder::new();
    b.repeat(Some(supersteps))
        .push(Instr::Compute(Dur::Jitter { mean: us(compute_ms * 1_000.0), cv: jitter }))
        .push(Instr::Barrier(wait))
        .end_repeat();
    let program = b.build();
    Ok(GuestSpec { vcpus, ..GuestSpec::lockless(vec![program; threads], true) })
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "bsp",
    description: "Supersteps of compute then a barrier, waited at as the runtime waits",
    models: "BSP matrix multiply (seed 000); barrier phases of NPB and SPLASH-2 LU",
    params: PARAMS,
    build,
};

#[cfg(test)]
mod tests {
    use vsched_model::{BarrierWait, Value};

    use super::*;
    use crate::testkit::{assert_rejects, params};

    /// The waits of the barriers of a 4-vCPU `bsp` VM built from `given`.
    fn barrier_waits(given: &[(&str, Value)]) -> Vec<BarrierWait> {
        let spec = build(&params(&INFO, given).unwrap(), &Ranks::alone(4)).unwrap();
        let mut waits: Vec<BarrierWait> = spec
            .programs
            .iter()
            .flat_map(|p| p.iter())
            .filter_map(|i| if let Instr::Barrier(w) = i { Some(*w) } else { None })
            .collect();
        waits.dedup();
        waits
    }

    fn runtime(name: &str) -> Vec<BarrierWait> {
        barrier_waits(&[("runtime", Value::Str(name.into()))])
    }

    #[test]
    fn every_runtime_sets_the_barrier_wait() {
        assert_eq!(barrier_waits(&[]), [BarrierWait::Block], "pthreads by default");
        assert_eq!(runtime("pthreads"), [BarrierWait::Block]);
        // libgomp: GOMP_SPINCOUNT's default of 300,000 iterations (4 threads on 4 vCPUs).
        assert_eq!(runtime("libgomp"), [BarrierWait::SpinIterationsThenBlock(300_000)]);
        // Intel: KMP_BLOCKTIME's 200 ms, in ns of guest time.
        assert_eq!(runtime("iomp"), [BarrierWait::SpinForThenBlock(200_000_000)]);
        assert_eq!(runtime("openmpi"), [BarrierWait::Spin]);
        assert_eq!(runtime("mpich2"), [BarrierWait::Spin]);
    }

    #[test]
    fn wait_overrides_the_runtime() {
        let given = [("runtime", Value::Str("pthreads".into())), ("wait", Value::Str("spin".into()))];
        assert_eq!(barrier_waits(&given), [BarrierWait::Spin]);
        let given = [("wait", Value::Str("spin-then-block".into())), ("spin_limit_us", Value::Float(75.0))];
        assert_eq!(barrier_waits(&given), [BarrierWait::SpinThenBlock(75_000)]);
    }

    #[test]
    fn bad_parameters_are_named() {
        assert_rejects(&INFO, "runtime", &[("runtime", Value::Str("x".into()))]);
        assert_rejects(&INFO, "wait", &[("wait", Value::Str("poll".into()))]);
        assert_rejects(&INFO, "spin_limit_us", &[("spin_limit_us", Value::Float(-1.0))]);
        // A spin limit without spin-then-block would be silently ignored: refused instead.
        assert_rejects(&INFO, "spin_limit_us", &[("spin_limit_us", Value::Float(100.0))]);
    }
}
