//! `npb-cg`: NPB CG over MPI: conjugate-gradient steps on a 2-D grid of ranks.
//!
//! Built from the "NPB CG" row of workloads.md (fine grain; 25 inner CG steps per outer
//! iteration, 15 outer iterations for class A, 75 for B and C; many small messages and
//! reductions). CG is not in seed 002's figures; seed 004 runs it.
//!
//! # The model
//! Ranks form an nprows × npcols grid (`mpi::grid2d`, npcols ≥ nprows: NPB's grid for
//! powers of two); rank r is in row r div npcols, column r mod npcols, and owns a block of
//! the `na` × `na` matrix. After a start barrier, each outer iteration runs:
//! - ρ = r·r: a row allreduce of 8 bytes;
//! - 25 CG steps, each: the sparse mat-vec (80% of the step's compute); the reduce-scatter
//!   of its partial result across the row (recursive halving of the row block,
//!   ⌈na / nprows⌉ × 8 B); the exchange of the reduced piece (⌈na / P⌉ × 8 B) with the
//!   transpose partner; the dot product p·q (row allreduce, 8 B); the z and r updates (10%);
//!   ρ = r·r (row allreduce, 8 B); the p update (10%);
//! - the residual ‖x − A z‖: one more mat-vec step (reduce-scatter, transpose, 8-byte dot);
//! - the norms x·z and z·z for ζ: a row allreduce of 16 bytes.
//!
//! As in NPB's MPI code, dot products reduce within the row only (the vectors are
//! replicated across rows after the transpose). The transpose partner of (row, col) is the
//! rank whose flat index is col × nprows + row: NPB's partner on square grids; on others a
//! permutation rather than NPB's pairing (send to one rank, receive from another). The
//! OpenMP version's ~8 barriers per step (workloads.md) are, in MPI, these point-to-point
//! synchronisations; the only MPI_Barrier is the one before the timer. Each rank computes
//! `serial_s / P` in all (strong scaling: 2 s at P = 8 by default, 5 ms per mat-vec step),
//! split evenly over the 26 mat-vec steps of an outer iteration; NPB's untimed warm-up
//! iteration is left out.
//!
//! Messages per rank per run: ⌈log2 P⌉ + iterations · (79 · ⌈log2 npcols⌉ + 26 · t), t = 1
//! unless the rank is its own transpose partner. Defaults, P = 128 (8 × 16): ≤ 5,137 per
//! rank, 657k for the job.

use vsched_model::{ConfigError, GuestSpec, ParamDefault, ParamRange, ParamSpec, Params, ProgramBuilder};

use crate::mpi::{self, Group, MPI_RUNTIME_PARAM, SPIN_LIMIT_PARAM, WAIT_PARAM};
use crate::{Ranks, WorkloadInfo};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "iterations",
        default: ParamDefault::Int(15),
        range: ParamRange::Int { min: 1, max: 100_000 },
        doc: "outer iterations: 15 class A, 75 B and C",
    },
    ParamSpec {
        name: "na",
        default: ParamDefault::Int(14_000),
        range: ParamRange::Int { min: 1, max: 100_000_000 },
        doc: "matrix order: 14000 class A, 75000 B, 150000 C",
    },
    mpi::serial_spec(16.0),
    mpi::jitter_spec(0.05),
    MPI_RUNTIME_PARAM,
    WAIT_PARAM,
    SPIN_LIMIT_PARAM,
];

/// CG steps per outer iteration (NPB's cgitmax).
const CG_STEPS: u64 = 25;
/// Share of a step's compute in the sparse mat-vec; the rest is two vector updates.
const MATVEC_SHARE: f64 = 0.8;

/// The transpose partner of `rank` on a `cols` × `rows` grid, and the rank whose partner it
/// is (the inverse permutation).
fn transpose(rank: usize, cols: usize, rows: usize) -> (usize, usize) {
    let to = (rank % cols) * rows + rank / cols;
    let from = (rank % rows) * cols + rank / rows;
    (to, from)
}

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let iterations = params.int("iterations") as u64;
    let na = params.int("na") as u64;
    let serial_s = mpi::serial_param(params)?;
    let jitter = mpi::jitter_param(params)?;
    let wait = mpi::wait_param(params, ranks)?;
    let world = ranks.world;
    if na < world as u64 {
        return Err(params.invalid("na", format!("expected >= {world} (a row per rank), got {na}")));
    }
    let (cols, rows) = mpi::grid2d(world);
    let row_block_bytes = na.div_ceil(rows as u64) * 8;
    let piece_bytes = na.div_ceil(world as u64) * 8;
    // Compute of one mat-vec step: 25 CG steps and the residual per outer iteration.
    let step_s = serial_s / world as f64 / iterations as f64 / (CG_STEPS + 1) as f64;
    let update = mpi::compute(step_s * (1.0 - MATVEC_SHARE) / 2.0, jitter);
    Ok(mpi::job_guest(ranks, |b, rank| {
        let row = Group { first: rank / cols * cols, stride: 1, size: cols };
        let (partner_to, partner_from) = transpose(rank, cols, rows);
        let matvec = |b: &mut ProgramBuilder| {
            b.push(mpi::compute(step_s * MATVEC_SHARE, jitter));
            mpi::reduce_scatter_in(b, row, rank, row_block_bytes, wait);
            mpi::sendrecv(b, rank, partner_to, piece_bytes, partner_from, wait);
        };
        mpi::barrier(b, rank, world, wait);
        mpi::times(b, iterations, |b| {
            mpi::allreduce_in(b, row, rank, 8, wait);
            mpi::times(b, CG_STEPS, |b| {
                matvec(b);
                mpi::allreduce_in(b, row, rank, 8, wait);
                b.push(update.clone());
                mpi::allreduce_in(b, row, rank, 8, wait);
                b.push(update.clone());
            });
            matvec(b);
            b.push(update.clone());
            b.push(update.clone());
            mpi::allreduce_in(b, row, rank, 8, wait);
            mpi::allreduce_in(b, row, rank, 16, wait);
        });
    }))
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "npb-cg",
    description: "NPB CG over MPI: 25 CG steps per iteration, row reductions and transpose exchanges",
    models: "NPB CG (seed 004)",
    params: PARAMS,
    build,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::rounds;
    use crate::testkit::{assert_rejects, run, Job, SHAPES};
    use vsched_model::{BarrierWait, Value};

    /// The header's formula, for rank `r`.
    fn documented(r: usize, p: usize, iterations: u64) -> u64 {
        let (cols, rows) = mpi::grid2d(p);
        let t = u64::from(transpose(r, cols, rows).0 != r);
        rounds(p) as u64 + iterations * (79 * rounds(cols) as u64 + 26 * t)
    }

    #[test]
    fn transpose_partners() {
        // Square 4 × 4: the transpose, an involution, diagonal ranks are their own partner.
        for r in 0..16 {
            let (to, from) = transpose(r, 4, 4);
            assert_eq!(to, (r % 4) * 4 + r / 4);
            assert_eq!(to, from);
        }
        // 4 × 2 (P = 8) and 4 × 3: a permutation, `from` inverting `to`.
        for (cols, rows) in [(4, 2), (4, 3), (16, 8), (5, 1)] {
            let p = cols * rows;
            let mut hit = vec![false; p];
            for r in 0..p {
                let (to, _) = transpose(r, cols, rows);
                assert!(!hit[to], "{cols}x{rows}: {to} twice");
                hit[to] = true;
                assert_eq!(transpose(to, cols, rows).1, r);
            }
        }
    }

    #[test]
    fn every_shape_completes_with_the_documented_messages() {
        for &(world, per_vm) in SHAPES {
            for iterations in [1, 2, 15] {
                let given = [("iterations", Value::Int(iterations))];
                let stats = run(&Job::build(&INFO, &given, world, per_vm).unwrap())
                    .unwrap_or_else(|e| panic!("P={world}: {e}"));
                for r in 0..world {
                    assert_eq!(stats.sent[r], documented(r, world, iterations as u64), "P={world} rank {r}");
                    assert_eq!(stats.received[r], stats.sent[r]);
                    let want = 16e9 / world as f64;
                    assert!((stats.compute_ns[r] - want).abs() < want * 1e-5, "P={world}");
                }
                // Balanced ranks: nobody waits on the critical path.
                let longest = stats.compute_ns.iter().copied().fold(0.0, f64::max);
                assert!((stats.makespan_ns() - longest).abs() < 1.0, "P={world}");
                assert!(stats.heard_from_all.iter().all(|&h| h));
            }
        }
    }

    #[test]
    fn dot_products_stay_in_the_row() {
        // P = 8 (2 rows of 4), one iteration: only the start barrier (one empty message per
        // pair at distance 1, 2 or 4) and the 26 transpose exchanges cross rows.
        let stats = run(&Job::build(&INFO, &[("iterations", Value::Int(1))], 8, 4).unwrap()).unwrap();
        let mut crossing = 0;
        for (&(s, d), &n) in &stats.pairs {
            if s / 4 != d / 4 {
                let barrier = u64::from([1, 2, 4].contains(&((d + 8 - s) % 8)));
                let transposes = if transpose(s, 4, 2).0 == d { 26 } else { 0 };
                assert_eq!(n, barrier + transposes, "{s} -> {d}");
                crossing += n;
            }
        }
        assert!(crossing > 0);
    }

    #[test]
    fn message_sizes_follow_the_class() {
        // P = 8, class A, one iteration, rank 1 (row 0 of 4 columns; partner 2).
        let stats = run(&Job::build(&INFO, &[("iterations", Value::Int(1))], 8, 4).unwrap()).unwrap();
        let row_block = 7_000 * 8;
        let mat_vec = row_block / 2 + row_block / 4 + 1_750 * 8;
        // 26 mat-vecs; 1 + 2 × 25 + 1 8-byte dots and a 16-byte one, two rounds each.
        assert_eq!(stats.bytes_sent[1], 26 * mat_vec + 2 * (52 * 8 + 16));
    }

    #[test]
    fn the_largest_cluster_stays_within_the_message_budget() {
        let stats = run(&Job::build(&INFO, &[], 128, 4).unwrap()).unwrap();
        let want: u64 = (0..128).map(|r| documented(r, 128, 15)).sum();
        assert_eq!(stats.total_sent(), want);
        assert_eq!(stats.sent.iter().max(), Some(&5_137));
        assert!(4 * stats.total_sent() < 3_000_000, "{}", stats.total_sent());
    }

    #[test]
    fn wait_mode_applies() {
        let job = Job::build(&INFO, &[("wait", Value::Str("spin-then-block".into()))], 8, 4).unwrap();
        assert_eq!(run(&job).unwrap().waits, [BarrierWait::SpinThenBlock(200_000)]);
    }

    #[test]
    fn bad_parameters_are_named() {
        assert_rejects(&INFO, "iterations", &[("iterations", Value::Int(0))]);
        assert_rejects(&INFO, "na", &[("na", Value::Int(7))]); // 8 ranks
        assert_rejects(&INFO, "serial_s", &[("serial_s", Value::Float(0.0))]);
        assert_rejects(&INFO, "jitter", &[("jitter", Value::Float(-1.0))]);
        assert_rejects(&INFO, "wait", &[("wait", Value::Str("sleep".into()))]);
        assert_rejects(&INFO, "spin_limit_us", &[("spin_limit_us", Value::Float(-3.0))]);
    }
}
