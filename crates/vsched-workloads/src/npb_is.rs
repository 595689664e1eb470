//! `npb-is`: NPB IS (integer sort) over MPI: bucket sort with an all-to-all key exchange.
//!
//! Built from the "NPB IS" row of workloads.md (10 iterations; count, prefix sum,
//! redistribute; MPI Alltoall + Alltoallv every iteration, large; keys 2^23 / 2^25 / 2^27
//! for classes A / B / C) and seed 002, where IS is the communication-intensive case:
//! packets track spinning closely (Pearson 0.97, §3.1) and CVS gains most (Figs. 3(b), 4(b)).
//!
//! # The model
//! A start barrier, then `iterations` times: bucket counting (half the iteration's compute),
//! an allreduce of the 1024 bucket sizes (4 KiB), an alltoall of the send counts (4 bytes
//! per pair), the key alltoall (`4 × 2^keys_log2 / P²` bytes per pair: the keys are
//! uniform, so each rank sends each other rank an equal share of its `2^keys_log2 / P`
//! keys), and the local ranking (the other half). A final 8-byte allreduce stands for the
//! verification's reduction. Each rank computes `serial_s / P` in all (strong scaling; by
//! default 1 s at P = 8, 100 ms per iteration, while each iteration moves 32 MiB of keys).
//! Defaults, P = 128: 2,624 messages per rank, 336k for the job.
//! Approximated: the half/half split of compute; Alltoallv as a pairwise exchange of equal
//! shares; IS's untimed first iteration and the verification's neighbour key are left out.
//!
//! Messages per rank per run: (iterations + 2) · ⌈log2 P⌉ + 2 · iterations · (P − 1).

use vsched_model::{ConfigError, GuestSpec, ParamDefault, ParamRange, ParamSpec, Params};

use crate::mpi::{self, MPI_RUNTIME_PARAM, SPIN_LIMIT_PARAM, WAIT_PARAM};
use crate::{Ranks, WorkloadInfo};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "iterations",
        default: ParamDefault::Int(10),
        range: ParamRange::Int { min: 1, max: 100_000 },
        doc: "ranking iterations (NPB: 10)",
    },
    ParamSpec {
        name: "keys_log2",
        default: ParamDefault::Int(23),
        range: ParamRange::Int { min: 10, max: 40 },
        doc: "log2 of the number of 4-byte keys: 23 class A, 25 B, 27 C",
    },
    mpi::serial_spec(8.0),
    mpi::jitter_spec(0.05),
    MPI_RUNTIME_PARAM,
    WAIT_PARAM,
    SPIN_LIMIT_PARAM,
];

/// IS's bucket-size vector: 2^10 buckets of 4-byte counts.
const BUCKET_BYTES: u64 = 1024 * 4;
/// Bytes of one key.
const KEY_BYTES: u64 = 4;
/// Share of an iteration's compute before the exchange (counting); the rest is ranking.
const COUNT_SHARE: f64 = 0.5;

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let iterations = params.int("iterations") as u64;
    let keys_log2 = params.int("keys_log2");
    if keys_log2 > 40 {
        return Err(params.invalid("keys_log2", format!("expected an integer in [10, 40], got {keys_log2}")));
    }
    let serial_s = mpi::serial_param(params)?;
    let jitter = mpi::jitter_param(params)?;
    let wait = mpi::wait_param(params, ranks)?;
    let world = ranks.world;
    let per_pair = (KEY_BYTES << keys_log2).div_ceil((world * world) as u64);
    let per_iteration = serial_s / world as f64 / iterations as f64;
    Ok(mpi::job_guest(ranks, |b, rank| {
        mpi::barrier(b, rank, world, wait);
        mpi::times(b, iterations, |b| {
            b.push(mpi::compute(per_iteration * COUNT_SHARE, jitter));
            mpi::allreduce(b, rank, world, BUCKET_BYTES, wait);
            mpi::alltoall(b, rank, world, 4, wait);
            mpi::alltoall(b, rank, world, per_pair, wait);
            b.push(mpi::compute(per_iteration * (1.0 - COUNT_SHARE), jitter));
        });
        mpi::allreduce(b, rank, world, 8, wait);
    }))
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "npb-is",
    description: "NPB IS over MPI: per iteration bucket counting, a small allreduce, large alltoalls, ranking",
    models: "NPB IS (seed 002, Figs. 3(b), 4(b))",
    params: PARAMS,
    build,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::rounds;
    use crate::testkit::{assert_rejects, run, Job, SHAPES};
    use vsched_model::{BarrierWait, Value};

    fn documented(iterations: u64, p: usize) -> u64 {
        (iterations + 2) * rounds(p) as u64 + 2 * iterations * (p as u64 - 1)
    }

    #[test]
    fn every_shape_completes_with_the_documented_messages() {
        for &(world, per_vm) in SHAPES {
            for iterations in [1, 3, 10] {
                let given = [("iterations", Value::Int(iterations))];
                let stats = run(&Job::build(&INFO, &given, world, per_vm).unwrap()).unwrap();
                for r in 0..world {
                    assert_eq!(stats.sent[r], documented(iterations as u64, world), "P={world} rank {r}");
                    assert_eq!(stats.received[r], stats.sent[r]);
                    assert!((stats.compute_ns[r] - 8e9 / world as f64).abs() < 10.0, "P={world}");
                }
                // Balanced ranks: nobody waits on the critical path.
                let longest = stats.compute_ns.iter().copied().fold(0.0, f64::max);
                assert!((stats.makespan_ns() - longest).abs() < 1.0, "P={world}");
                assert!(stats.heard_from_all.iter().all(|&h| h));
            }
        }
    }

    #[test]
    fn the_key_exchange_carries_the_class_a_keys() {
        // P = 8: 2^23 keys × 4 B / 64 per pair; plus 4 KiB per allreduce round and 4 B counts.
        let world = 8u64;
        let stats = run(&Job::build(&INFO, &[("iterations", Value::Int(1))], 8, 4).unwrap()).unwrap();
        let keys = (4u64 << 23) / (world * world) * (world - 1);
        assert_eq!(stats.bytes_sent[0], keys + 4 * (world - 1) + 4096 * 3 + 8 * 3);
        // Class C: 16 times the key bytes.
        let given = [("iterations", Value::Int(1)), ("keys_log2", Value::Int(27))];
        let c = run(&Job::build(&INFO, &given, 8, 4).unwrap()).unwrap();
        assert_eq!(c.bytes_sent[0] - stats.bytes_sent[0], 15 * keys);
    }

    #[test]
    fn the_largest_cluster_stays_within_the_message_budget() {
        // 4 virtual clusters of 128 ranks (32 hosts × 4-vCPU VMs).
        let stats = run(&Job::build(&INFO, &[], 128, 4).unwrap()).unwrap();
        assert_eq!(stats.total_sent(), 128 * documented(10, 128));
        assert!(4 * stats.total_sent() < 2_000_000, "{}", stats.total_sent());
    }

    #[test]
    fn wait_mode_applies() {
        let job = Job::build(&INFO, &[("wait", Value::Str("block".into()))], 3, 3).unwrap();
        assert_eq!(run(&job).unwrap().waits, [BarrierWait::Block]);
    }

    #[test]
    fn bad_parameters_are_named() {
        assert_rejects(&INFO, "iterations", &[("iterations", Value::Int(0))]);
        assert_rejects(&INFO, "keys_log2", &[("keys_log2", Value::Int(9))]);
        assert_rejects(&INFO, "keys_log2", &[("keys_log2", Value::Int(41))]);
        assert_rejects(&INFO, "serial_s", &[("serial_s", Value::Float(-1.0))]);
        assert_rejects(&INFO, "jitter", &[("jitter", Value::Float(11.0))]);
        assert_rejects(&INFO, "wait", &[("wait", Value::Str("nap".into()))]);
    }
}
