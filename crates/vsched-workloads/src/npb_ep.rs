//! `npb-ep`: NPB EP (embarrassingly parallel) over MPI: compute, then one small reduction.
//!
//! Built from the "NPB EP" row of workloads.md (one parallel region, one reduction at the
//! end) and seed 002, where EP is the CPU-bound, communication-free case: its received
//! packets do not track its spinning (Pearson 0.17, §3.1) and every scheduler performs the
//! same on it (Figs. 3(c) and 4(c)).
//!
//! # The model
//! A start barrier (NPB's MPI codes synchronise before starting their timer), one compute
//! block of `serial_s / P` per rank (strong scaling: a fixed problem, as NPB's classes; 2 s
//! at P = 8 by default), then one allreduce of 96 bytes: EP's three `MPI_Allreduce` (the
//! sums sx, sy and the 10 annulus counts) merged into one, the same synchronisation with
//! 2 ⌈log2 P⌉ fewer messages per rank.
//! `jitter` is small by default: EP's batches are balanced by construction.
//!
//! Messages per rank per run: 2 ⌈log2 P⌉ (barrier and allreduce, dissemination).

use vsched_model::{ConfigError, GuestSpec, ParamSpec, Params};

use crate::mpi::{self, MPI_RUNTIME_PARAM, SPIN_LIMIT_PARAM, WAIT_PARAM};
use crate::{Ranks, WorkloadInfo};

const PARAMS: &[ParamSpec] =
    &[mpi::serial_spec(16.0), mpi::jitter_spec(0.01), MPI_RUNTIME_PARAM, WAIT_PARAM, SPIN_LIMIT_PARAM];

/// sx, sy and q[0..10], as doubles.
const REDUCE_BYTES: u64 = 12 * 8;

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let serial_s = mpi::serial_param(params)?;
    let jitter = mpi::jitter_param(params)?;
    let wait = mpi::wait_param(params, ranks)?;
    let world = ranks.world;
    Ok(mpi::job_guest(ranks, |b, rank| {
        mpi::barrier(b, rank, world, wait);
        b.push(mpi::compute(serial_s / world as f64, jitter));
        mpi::allreduce(b, rank, world, REDUCE_BYTES, wait);
    }))
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "npb-ep",
    description: "NPB EP over MPI: one long compute per rank, then a small allreduce",
    models: "NPB EP (seed 002, Figs. 3(c), 4(c))",
    params: PARAMS,
    build,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::rounds;
    use crate::testkit::{assert_rejects, run, Job, SHAPES};
    use vsched_model::{BarrierWait, Value};

    #[test]
    fn every_shape_completes_with_the_documented_messages() {
        for &(world, per_vm) in SHAPES {
            let stats = run(&Job::build(&INFO, &[], world, per_vm).unwrap()).unwrap();
            for r in 0..world {
                assert_eq!(stats.sent[r], 2 * rounds(world) as u64, "P={world} rank {r}");
                assert_eq!(stats.received[r], stats.sent[r]);
                let want = 16e9 / world as f64;
                assert!((stats.compute_ns[r] - want).abs() < 1.0, "P={world}: {}", stats.compute_ns[r]);
            }
            // Balanced ranks: nobody waits on the critical path.
            let longest = stats.compute_ns.iter().copied().fold(0.0, f64::max);
            assert!((stats.makespan_ns() - longest).abs() < 1.0, "P={world}");
            assert!(stats.heard_from_all.iter().all(|&h| h), "P={world}");
        }
    }

    #[test]
    fn wait_modes_reach_every_receive() {
        let job = Job::build(&INFO, &[("wait", Value::Str("block".into()))], 5, 2).unwrap();
        assert_eq!(run(&job).unwrap().waits, [BarrierWait::Block]);
        let given = [("wait", Value::Str("spin-then-block".into())), ("spin_limit_us", Value::Float(50.0))];
        let job = Job::build(&INFO, &given, 5, 2).unwrap();
        assert_eq!(run(&job).unwrap().waits, [BarrierWait::SpinThenBlock(50_000)]);
        assert_eq!(run(&Job::build(&INFO, &[], 5, 2).unwrap()).unwrap().waits, [BarrierWait::Spin]);
        // MPICH2's nemesis polls as Open MPI does; `wait` wins over either.
        let job = Job::build(&INFO, &[("runtime", Value::Str("mpich2".into()))], 5, 2).unwrap();
        assert_eq!(run(&job).unwrap().waits, [BarrierWait::Spin]);
        let given = [("runtime", Value::Str("mpich2".into())), ("wait", Value::Str("block".into()))];
        assert_eq!(run(&Job::build(&INFO, &given, 5, 2).unwrap()).unwrap().waits, [BarrierWait::Block]);
    }

    #[test]
    fn bad_parameters_are_named() {
        assert_rejects(&INFO, "serial_s", &[("serial_s", Value::Float(0.0))]);
        assert_rejects(&INFO, "jitter", &[("jitter", Value::Float(-0.5))]);
        assert_rejects(&INFO, "wait", &[("wait", Value::Str("yield".into()))]);
        assert_rejects(&INFO, "spin_limit_us", &[("spin_limit_us", Value::Float(-1.0))]);
        assert_rejects(&INFO, "runtime", &[("runtime", Value::Str("pthreads".into()))]);
    }
}
