//! `npb-lu`: NPB LU over MPI: an SSOR solver whose triangular sweeps are wavefront pipelines.
//!
//! Built from the "NPB LU" row of workloads.md (SSOR wavefront, pure busy-wait, one k-plane
//! per wait, pipelined small messages: the most skew-sensitive NPB kernel) and seed 002,
//! where LU is the case between EP and IS (Pearson 0.89 between packets and spinning, §3.1;
//! Figs. 3(a), 4(a)).
//!
//! # The model
//! The `grid`³ points are split over a px × py grid of ranks, the most square factorisation
//! of P with px ≥ py (`mpi::grid2d`; NPB's own grid for powers of two, 1 × P for a prime);
//! rank r sits at column r mod px, row r div px, west/east and north/south being its
//! neighbours in the row and column. After a start barrier, each SSOR iteration does:
//! - the lower sweep over the grid − 2 interior k-planes, taken `plane_block` at a time:
//!   receive from west and north (when they exist), compute the block, send east and south
//!   the block's boundary (5 doubles per boundary point per plane: ny_local × 40 B × planes
//!   east, nx_local × 40 B × planes south);
//! - the upper sweep in the reverse direction and plane order (from east and south, to west
//!   and north);
//! - the halo exchange of `rhs` (two ghost layers of the 5 variables of u, over the whole
//!   face: 2 × ny_local × grid × 40 B east/west, 2 × nx_local × grid × 40 B north/south),
//!   then the rhs computation and the update of u.
//!
//! The sweeps take `SWEEP_SHARE` of an iteration's compute, spread evenly over the planes.
//! The residual norm (a 40-byte allreduce) follows every `norm_every`-th iteration and the
//! last (NPB: inorm = itmax, so only the last). Receives wait as the MPI `runtime` does:
//! both Open MPI and MPICH2 busy-poll (`runtime.rs`), so LU's pipeline sync is pure
//! spinning, as workloads.md says. Each rank computes `serial_s / P` in all (strong scaling).
//!
//! Scaling: 50 iterations instead of class A's 250, each 0.32 s of serial compute by default
//! (my estimate of a class-A iteration on hardware of seed 002's time), so a plane keeps
//! about its real grain and a rank computes 2 s at P = 8; two planes per pipeline step
//! (`plane_block`) halve the messages. Messages per rank per run:
//!   ⌈log2 P⌉ · (1 + norms) + iterations · (B + 1) · d,
//! with B = ⌈(grid − 2) / plane_block⌉ pipeline steps per sweep, d the rank's neighbours
//! (0–4) and norms = ⌈iterations / norm_every⌉ (1 if norm_every = 0). Defaults, P = 128
//! (16 × 8): at most 6,414 per rank, 744k for the job.

use vsched_model::{
    BarrierWait, ConfigError, GuestSpec, Instr, ParamDefault, ParamRange, ParamSpec, Params, ProgramBuilder,
};

use crate::mpi::{self, MPI_RUNTIME_PARAM, SPIN_LIMIT_PARAM, WAIT_PARAM};
use crate::{Ranks, WorkloadInfo};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "iterations",
        default: ParamDefault::Int(50),
        range: ParamRange::Int { min: 1, max: 100_000 },
        doc: "SSOR iterations (NPB: 250 for classes A–C; cut down, see serial_s)",
    },
    ParamSpec {
        name: "grid",
        default: ParamDefault::Int(64),
        range: ParamRange::Int { min: 3, max: 10_000 },
        doc: "points per side: 64 class A, 102 B, 162 C",
    },
    ParamSpec {
        name: "plane_block",
        default: ParamDefault::Int(2),
        range: ParamRange::Int { min: 1, max: 10_000 },
        doc: "k-planes per pipeline step (one message per neighbour per step)",
    },
    ParamSpec {
        name: "norm_every",
        default: ParamDefault::Int(0),
        range: ParamRange::Int { min: 0, max: 100_000 },
        doc: "residual-norm allreduce every this many iterations (0 = after the last only, NPB's default)",
    },
    mpi::serial_spec(16.0),
    mpi::jitter_spec(0.05),
    MPI_RUNTIME_PARAM,
    WAIT_PARAM,
    SPIN_LIMIT_PARAM,
];

/// Share of an iteration's compute in the two sweeps (jacld + blts, jacu + buts); the rest
/// is rhs and the update. An approximate profile.
const SWEEP_SHARE: f64 = 0.7;
/// Bytes per grid point of a boundary: LU's 5 double-precision variables.
const POINT_BYTES: u64 = 5 * 8;
/// The residual norm: 5 doubles.
const NORM_BYTES: u64 = 5 * 8;

/// The share of `n` points of part `i` of `parts` (the first `n mod parts` get one more).
fn share(n: usize, parts: usize, i: usize) -> u64 {
    (n / parts + usize::from(i < n % parts)) as u64
}

/// One rank's place in the px × py grid.
struct Place {
    west: Option<usize>,
    east: Option<usize>,
    north: Option<usize>,
    south: Option<usize>,
    /// Boundary points per plane toward east/west (a column) and north/south (a row).
    ew_points: u64,
    ns_points: u64,
}

impl Place {
    fn of(rank: usize, world: usize, grid: usize) -> Place {
        let (px, py) = mpi::grid2d(world);
        let (x, y) = (rank % px, rank / px);
        Place {
            west: (x > 0).then(|| rank - 1),
            east: (x + 1 < px).then(|| rank + 1),
            north: (y > 0).then(|| rank - px),
            south: (y + 1 < py).then(|| rank + px),
            ew_points: share(grid, py, y),
            ns_points: share(grid, px, x),
        }
    }
}

fn recv(b: &mut ProgramBuilder, from: Option<usize>, wait: BarrierWait) {
    if let Some(from) = from {
        b.push(Instr::Recv { from: from as u32, wait });
    }
}

fn send(b: &mut ProgramBuilder, to: Option<usize>, bytes: u64) {
    if let Some(to) = to {
        b.push(Instr::Send { to: to as u32, bytes });
    }
}

struct Shape {
    planes: usize,
    plane_block: usize,
    grid: usize,
    /// Compute per plane of one sweep, and of rhs + update per iteration, s.
    plane_s: f64,
    rhs_s: f64,
    jitter: f64,
    wait: BarrierWait,
}

impl Shape {
    /// One pipeline step of `planes` planes of the lower (`upper = false`) or upper sweep.
    fn step(&self, b: &mut ProgramBuilder, p: &Place, planes: usize, upper: bool) {
        let (ew, ns) = (p.ew_points * POINT_BYTES * planes as u64, p.ns_points * POINT_BYTES * planes as u64);
        let (from_x, from_y, to_x, to_y) =
            if upper { (p.east, p.south, p.west, p.north) } else { (p.west, p.north, p.east, p.south) };
        recv(b, from_x, self.wait);
        recv(b, from_y, self.wait);
        b.push(mpi::compute(self.plane_s * planes as f64, self.jitter));
        send(b, to_x, ew);
        send(b, to_y, ns);
    }

    fn iteration(&self, b: &mut ProgramBuilder, p: &Place) {
        let (full, rest) = ((self.planes / self.plane_block) as u64, self.planes % self.plane_block);
        mpi::times(b, full, |b| self.step(b, p, self.plane_block, false));
        if rest > 0 {
            self.step(b, p, rest, false);
            self.step(b, p, rest, true);
        }
        mpi::times(b, full, |b| self.step(b, p, self.plane_block, true));
        let (ew, ns) =
            (2 * p.ew_points * self.grid as u64 * POINT_BYTES, 2 * p.ns_points * self.grid as u64 * POINT_BYTES);
        send(b, p.east, ew);
        send(b, p.west, ew);
        send(b, p.south, ns);
        send(b, p.north, ns);
        for from in [p.west, p.east, p.north, p.south] {
            recv(b, from, self.wait);
        }
        b.push(mpi::compute(self.rhs_s, self.jitter));
    }
}

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let iterations = params.int("iterations") as u64;
    let grid = params.int("grid") as usize;
    let plane_block = params.int("plane_block") as usize;
    let norm_every = params.int("norm_every") as u64;
    let serial_s = mpi::serial_param(params)?;
    let jitter = mpi::jitter_param(params)?;
    let wait = mpi::wait_param(params, ranks)?;
    let world = ranks.world;
    let (px, py) = mpi::grid2d(world);
    if grid > 10_000 {
        return Err(params.invalid("grid", format!("expected an integer in [3, 10000], got {grid}")));
    }
    if grid < px {
        return Err(params.invalid(
            "grid",
            format!("expected >= {px} (a point per rank along x of the {px} x {py} grid of {world} ranks), got {grid}"),
        ));
    }
    let planes = grid - 2;
    if plane_block > planes {
        return Err(params.invalid(
            "plane_block",
            format!("expected an integer in [1, {planes}] (the grid's interior planes), got {plane_block}"),
        ));
    }
    let per_iteration = serial_s / world as f64 / iterations as f64;
    let shape = Shape {
        planes,
        plane_block,
        grid,
        plane_s: per_iteration * SWEEP_SHARE / (2 * planes) as f64,
        rhs_s: per_iteration * (1.0 - SWEEP_SHARE),
        jitter,
        wait,
    };
    // Iterations in runs of `norm_every`, each followed by the norm; then the remainder.
    let run = if norm_every == 0 { iterations } else { norm_every.min(iterations) };
    Ok(mpi::job_guest(ranks, |b, rank| {
        let place = Place::of(rank, world, grid);
        mpi::barrier(b, rank, world, wait);
        for (count, len) in [(iterations / run, run), (1, iterations % run)] {
            if len == 0 {
                continue;
            }
            mpi::times(b, count, |b| {
                mpi::times(b, len, |b| shape.iteration(b, &place));
                mpi::allreduce(b, rank, world, NORM_BYTES, wait);
            });
        }
    }))
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "npb-lu",
    description: "NPB LU over MPI: SSOR wavefront pipelines on a 2-D grid of ranks, small pipelined messages",
    models: "NPB LU (seed 002, Figs. 3(a), 4(a))",
    params: PARAMS,
    build,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::rounds;
    use crate::testkit::{assert_rejects, run, Job, SHAPES};
    use vsched_model::Value;

    /// The header's formula, for rank `r`.
    fn documented(r: usize, p: usize, iterations: u64, grid: usize, plane_block: usize, norm_every: u64) -> u64 {
        let (px, py) = mpi::grid2d(p);
        let (x, y) = (r % px, r / px);
        let d = [x > 0, x + 1 < px, y > 0, y + 1 < py].iter().filter(|&&n| n).count() as u64;
        let steps = (grid - 2).div_ceil(plane_block) as u64;
        let norms = if norm_every == 0 { 1 } else { iterations.div_ceil(norm_every) };
        rounds(p) as u64 * (1 + norms) + iterations * (steps + 1) * d
    }

    #[test]
    fn every_shape_completes_with_the_documented_messages() {
        for &(world, per_vm) in SHAPES {
            for (iterations, grid, plane_block, norm_every) in
                [(3, 16, 2, 0), (5, 17, 4, 2), (4, 12, 10, 1), (2, 64, 1, 7), (50, 64, 2, 0)]
            {
                let given = [
                    ("iterations", Value::Int(iterations)),
                    ("grid", Value::Int(grid)),
                    ("plane_block", Value::Int(plane_block)),
                    ("norm_every", Value::Int(norm_every)),
                ];
                let stats = run(&Job::build(&INFO, &given, world, per_vm).unwrap())
                    .unwrap_or_else(|e| panic!("P={world} {given:?}: {e}"));
                for r in 0..world {
                    let want =
                        documented(r, world, iterations as u64, grid as usize, plane_block as usize, norm_every as u64);
                    assert_eq!(stats.sent[r], want, "P={world} rank {r} {given:?}");
                    assert_eq!(stats.received[r], stats.sent[r]);
                    let want = 16e9 / world as f64;
                    assert!((stats.compute_ns[r] - want).abs() < want * 1e-5, "P={world} {given:?}");
                }
                assert_eq!(stats.waits, if world > 1 { vec![BarrierWait::Spin] } else { vec![] });
                assert!(stats.heard_from_all.iter().all(|&h| h));
            }
        }
    }

    #[test]
    fn the_sweeps_are_wavefronts() {
        // Without jitter and with free messages, an iteration's critical path is both
        // sweeps' pipeline fill and drain, 2 (B + px + py − 2) steps, plus rhs.
        for (world, per_vm, px, py) in [(8, 4, 4, 2), (12, 4, 4, 3), (5, 5, 5, 1), (1, 1, 1, 1)] {
            let given = [
                ("iterations", Value::Int(3)),
                ("grid", Value::Int(16)),
                ("plane_block", Value::Int(2)),
                ("jitter", Value::Float(0.0)),
                ("serial_s", Value::Float(world as f64 * 3.0)),
            ];
            let stats = run(&Job::build(&INFO, &given, world, per_vm).unwrap()).unwrap();
            // 1 s per iteration per rank; 7 steps of 2 of the 14 planes per sweep.
            let step = 1e9 * SWEEP_SHARE / 14.0;
            let want = 3.0 * (2.0 * (7 + px + py - 2) as f64 * step + 1e9 * (1.0 - SWEEP_SHARE));
            assert!((stats.makespan_ns() - want).abs() < 1e3, "P={world}: {} vs {want}", stats.makespan_ns());
        }
    }

    #[test]
    fn ranks_talk_to_grid_neighbours_only() {
        // 12 ranks: 4 × 3. Besides collectives (dissemination distances 1, 2, 4, 8), point-
        // to-point traffic is only between grid neighbours: count pairs with many messages.
        let stats = run(&Job::build(&INFO, &[], 12, 4).unwrap()).unwrap();
        let busy: Vec<(usize, usize)> = stats.pairs.iter().filter(|(_, &n)| n > 100).map(|(&p, _)| p).collect();
        for &(s, d) in &busy {
            let (sx, sy, dx, dy) = (s % 4, s / 4, d % 4, d / 4);
            assert_eq!(sx.abs_diff(dx) + sy.abs_diff(dy), 1, "{s} -> {d}");
        }
        // 4 × 3 grid: 2 × (3 × 3 + 4 × 2) directed neighbour pairs.
        assert_eq!(busy.len(), 34);
    }

    #[test]
    fn message_sizes_follow_the_grid() {
        // P = 8: 4 × 2 ranks, 64³ points: a rank holds 16 × 32 points of each plane.
        let given = [("iterations", Value::Int(1))];
        let stats = run(&Job::build(&INFO, &given, 8, 4).unwrap()).unwrap();
        // Rank 0 (corner, east and south neighbours): lower sweep, 31 steps of 2 planes
        // east (32 points) and south (16 points); halo 2 layers × 64 planes; barrier empty,
        // the norm allreduce 40 B × 3 rounds.
        let east = 31 * 2 * 32 * 40 + 2 * 32 * 64 * 40;
        let south = 31 * 2 * 16 * 40 + 2 * 16 * 64 * 40;
        assert_eq!(stats.bytes_sent[0], east + south + 3 * 40);
    }

    #[test]
    fn the_largest_cluster_stays_within_the_message_budget() {
        let stats = run(&Job::build(&INFO, &[], 128, 4).unwrap()).unwrap();
        let want: u64 = (0..128).map(|r| documented(r, 128, 50, 64, 2, 0)).sum();
        assert_eq!(stats.total_sent(), want);
        assert_eq!(stats.sent.iter().max(), Some(&6_414));
        // 4 virtual clusters.
        assert!(4 * stats.total_sent() < 3_000_000, "{}", stats.total_sent());
    }

    #[test]
    fn bad_parameters_are_named() {
        assert_rejects(&INFO, "iterations", &[("iterations", Value::Int(0))]);
        assert_rejects(&INFO, "grid", &[("grid", Value::Int(2))]);
        assert_rejects(&INFO, "grid", &[("grid", Value::Int(20_000))]);
        // 8 ranks are 4 × 2: a grid of 3 cannot give each of 4 columns a point.
        assert_rejects(&INFO, "grid", &[("grid", Value::Int(3))]);
        assert_rejects(&INFO, "plane_block", &[("plane_block", Value::Int(0))]);
        assert_rejects(&INFO, "plane_block", &[("plane_block", Value::Int(63))]);
        assert_rejects(&INFO, "norm_every", &[("norm_every", Value::Int(-1))]);
        assert_rejects(&INFO, "serial_s", &[("serial_s", Value::Float(0.0))]);
        assert_rejects(&INFO, "jitter", &[("jitter", Value::Float(-0.1))]);
        // An MPI program runs on an MPI library only.
        assert_eq!(
            crate::testkit::build_error(&INFO, &[("runtime", Value::Str("libgomp".into()))]),
            "w.runtime: expected one of \"openmpi\", \"mpich2\", got \"libgomp\""
        );
        assert_rejects(&INFO, "wait", &[("wait", Value::Str("yield".into()))]);
        assert_rejects(&INFO, "spin_limit_us", &[("spin_limit_us", Value::Float(5.0))]);
    }

    #[test]
    fn receives_poll_under_both_mpi_libraries_unless_overridden() {
        for runtime in ["openmpi", "mpich2"] {
            let job =
                Job::build(&INFO, &[("runtime", Value::Str(runtime.into())), ("iterations", Value::Int(1))], 4, 2);
            assert_eq!(run(&job.unwrap()).unwrap().waits, [BarrierWait::Spin], "{runtime}");
        }
        let given = [("wait", Value::Str("block".into())), ("iterations", Value::Int(1))];
        assert_eq!(run(&Job::build(&INFO, &given, 4, 2).unwrap()).unwrap().waits, [BarrierWait::Block]);
    }
}
