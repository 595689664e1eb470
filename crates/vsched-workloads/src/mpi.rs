//! Message-passing collectives for the MPI models (the NPB workloads): each helper appends
//! one rank's part of a collective to that rank's program, as `Instr::Send` / `Instr::Recv`.
//!
//! Sends are eager (the sender goes on at once) and a receive takes the next message from
//! one source rank, FIFO per ordered pair, without tags. That is enough for matching as long
//! as every rank runs the same sequence of collectives: within one collective a rank sends
//! at most one message to each peer, so the n-th message from `s` to `d` is always the one
//! the n-th receive from `s` at `d` expects. Which rank a collective sends to depends only on
//! ranks, never on timing, so the programs form a Kahn network: whether they deadlock does
//! not depend on the schedule (what lets `testkit` check them by running them once).
//!
//! Message sizes are a timing model: nothing is computed, and the patterns are the ones an
//! MPI library uses for small payloads, not an exact account of every library's algorithm.
//! Ranks are `usize` as in [`crate::Ranks`]; a group (communicator) of `P = 1` sends nothing.

use vsched_model::{
    BarrierWait, ConfigError, Dur, GuestSpec, Instr, ParamDefault, ParamRange, ParamSpec, Params, ProgramBuilder, Time,
    NS_PER_S,
};

use crate::Ranks;

/// Payload of a barrier message: MPI barriers send empty messages.
pub const BARRIER_BYTES: u64 = 0;

/// The ranks of a collective, as an MPI communicator: member `i` is rank
/// `first + i * stride`, for `i` in `0..size` (the world, a row or a column of a grid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    pub first: usize,
    pub stride: usize,
    pub size: usize,
}

impl Group {
    /// All ranks `0..world`.
    pub fn world(world: usize) -> Group {
        Group { first: 0, stride: 1, size: world }
    }

    fn rank(&self, i: usize) -> u32 {
        (self.first + i * self.stride) as u32
    }

    /// `rank`'s index in the group; panics if it is not a member (a caller's bug).
    fn index_of(&self, rank: usize) -> usize {
        let offset = rank.checked_sub(self.first).filter(|o| o.is_multiple_of(self.stride));
        match offset.map(|o| o / self.stride) {
            Some(i) if i < self.size => i,
            _ => panic!("rank {rank} is not in {self:?}"),
        }
    }
}

/// ⌈log2 n⌉: the rounds of a dissemination collective over `n` ranks (0 for `n` ≤ 1).
pub fn rounds(n: usize) -> u32 {
    if n <= 1 {
        0
    } else {
        (n - 1).ilog2() + 1
    }
}

/// Dissemination: in round `k` (0-based, ⌈log2 n⌉ rounds) member `i` sends `bytes(k)` to
/// `(i + 2^k) mod n` and receives from `(i − 2^k) mod n`. After the last round every member
/// has heard, directly or through others, from every member, for any `n` (Hensgen, Finkel
/// and Manber's barrier). The `2^k` are distinct and below `n`, so each pair talks at most
/// once per collective.
fn dissemination(b: &mut ProgramBuilder, g: Group, rank: usize, wait: BarrierWait, bytes: impl Fn(u32) -> u64) {
    let (n, me) = (g.size, g.index_of(rank));
    for k in 0..rounds(n) {
        let d = 1usize << k;
        b.push(Instr::Send { to: g.rank((me + d) % n), bytes: bytes(k) });
        b.push(Instr::Recv { from: g.rank((me + n - d) % n), wait });
    }
}

/// `MPI_Barrier` over ranks `0..world`: a dissemination barrier of empty messages.
/// Messages: ⌈log2 P⌉ sent and ⌈log2 P⌉ received per rank.
pub fn barrier(b: &mut ProgramBuilder, rank: usize, world: usize, wait: BarrierWait) {
    dissemination(b, Group::world(world), rank, wait, |_| BARRIER_BYTES);
}

/// `MPI_Allreduce` of `bytes` over ranks `0..world`; see [`allreduce_in`].
pub fn allreduce(b: &mut ProgramBuilder, rank: usize, world: usize, bytes: u64, wait: BarrierWait) {
    allreduce_in(b, Group::world(world), rank, bytes, wait);
}

/// `MPI_Allreduce` of `bytes` within `group`, as the dissemination pattern with the whole
/// payload in every round. A timing model: libraries use recursive doubling (with a fold
/// step when P is not a power of two) for small payloads, which has the same ⌈log2 P⌉
/// latency-bound rounds; for P not a power of two the dissemination sums would count some
/// contributions twice, which does not matter as nothing is summed.
/// Messages: ⌈log2 P⌉ sent and received per rank, `bytes` each.
pub fn allreduce_in(b: &mut ProgramBuilder, group: Group, rank: usize, bytes: u64, wait: BarrierWait) {
    dissemination(b, group, rank, wait, |_| bytes);
}

/// `MPI_Reduce_scatter` of a `bytes` vector within `group`, as recursive halving: the
/// dissemination pattern with the payload halving every round (round `k` carries
/// ⌈bytes / 2^(k+1)⌉). Messages: ⌈log2 P⌉ sent and received per rank.
pub fn reduce_scatter_in(b: &mut ProgramBuilder, group: Group, rank: usize, bytes: u64, wait: BarrierWait) {
    dissemination(b, group, rank, wait, |k| bytes.div_ceil(1u64 << (k + 1).min(63)));
}

/// `MPI_Alltoall` over ranks `0..world`, as the pairwise exchange: in step `i` of `1..P`
/// rank `r` sends `bytes_per_pair` to `(r + i) mod P`, then receives from `(r − i) mod P`.
/// Messages: P − 1 sent and P − 1 received per rank.
pub fn alltoall(b: &mut ProgramBuilder, rank: usize, world: usize, bytes_per_pair: u64, wait: BarrierWait) {
    for i in 1..world {
        b.push(Instr::Send { to: ((rank + i) % world) as u32, bytes: bytes_per_pair });
        b.push(Instr::Recv { from: ((rank + world - i) % world) as u32, wait });
    }
}

/// `MPI_Sendrecv`: send `bytes` to `to`, then receive from `from`. One message each way;
/// nothing when `to` and `from` are the rank itself (a local copy).
pub fn sendrecv(b: &mut ProgramBuilder, rank: usize, to: usize, bytes: u64, from: usize, wait: BarrierWait) {
    assert_eq!(to == rank, from == rank, "a rank exchanging with itself must do so both ways");
    if to != rank {
        b.push(Instr::Send { to: to as u32, bytes });
        b.push(Instr::Recv { from: from as u32, wait });
    }
}

/// The most square 2-D grid of `p` ranks, as `MPI_Dims_create(p, 2)`: `(cols, rows)` with
/// `rows` the largest divisor of `p` not above √p, so `cols ≥ rows` (a prime gives a 1-row
/// grid). For powers of two this is NPB's grid (cols = rows or 2 × rows).
pub fn grid2d(p: usize) -> (usize, usize) {
    let rows = (1..=p.isqrt()).rev().find(|&d| p.is_multiple_of(d)).unwrap_or(1);
    (p / rows, rows)
}

/// Appends `body` run `n` times: nothing for 0, no loop for 1.
pub(crate) fn times(b: &mut ProgramBuilder, n: u64, mut body: impl FnMut(&mut ProgramBuilder)) {
    match n {
        0 => {}
        1 => body(b),
        _ => {
            b.repeat(Some(n));
            body(b);
            b.end_repeat();
        }
    }
}

/// A finite, lock-free guest whose vCPU i runs the program `rank_program` writes for job rank
/// `ranks.first + i`. Panics if `ranks` is inconsistent (the scenario loader builds it, so
/// that is a bug, not bad input).
pub(crate) fn job_guest(ranks: &Ranks, mut rank_program: impl FnMut(&mut ProgramBuilder, usize)) -> GuestSpec {
    assert!(ranks.vcpus >= 1 && ranks.first + ranks.vcpus <= ranks.world, "inconsistent ranks {ranks:?}");
    let programs = (ranks.first..ranks.first + ranks.vcpus)
        .map(|rank| {
            let mut b = ProgramBuilder::new();
            rank_program(&mut b, rank);
            b.build()
        })
        .collect();
    GuestSpec::lockless(programs, true)
}

// Parameters shared by the NPB models.

pub(crate) use crate::runtime::{MPI_RUNTIME_PARAM, SPIN_LIMIT_PARAM, WAIT_PARAM};
const JITTER_DOC: &str = "coefficient of variation of each compute block";
const SERIAL_DOC: &str = "CPU time of the whole job on one rank, s (each rank computes serial_s / P)";

/// The `serial_s` parameter of an NPB model, `default_s` seconds by default (up to 10^6 s,
/// the longest horizon).
pub(crate) const fn serial_spec(default_s: f64) -> ParamSpec {
    ParamSpec {
        name: "serial_s",
        default: ParamDefault::Float(default_s),
        range: ParamRange::Float { min: 0.0, max: 1e6 },
        doc: SERIAL_DOC,
    }
}

/// The `jitter` parameter of an NPB model (a coefficient of variation up to 10).
pub(crate) const fn jitter_spec(default_cv: f64) -> ParamSpec {
    ParamSpec {
        name: "jitter",
        default: ParamDefault::Float(default_cv),
        range: ParamRange::Float { min: 0.0, max: 10.0 },
        doc: JITTER_DOC,
    }
}

/// How the VM's ranks wait in a receive: `wait` if given, else the MPI `runtime`'s polling.
/// A VM runs one rank per vCPU, never more.
pub(crate) fn wait_param(params: &Params, ranks: &Ranks) -> Result<BarrierWait, ConfigError> {
    crate::runtime::wait_of(params, crate::runtime::MPI_RUNTIMES, ranks.vcpus, ranks.vcpus)
}

/// The `serial_s` parameter, checked.
pub(crate) fn serial_param(params: &Params) -> Result<f64, ConfigError> {
    let s = params.float("serial_s");
    if s <= 0.0 {
        return Err(params.invalid("serial_s", format!("expected a number > 0, got {s}")));
    }
    Ok(s)
}

/// The `jitter` parameter (its range is checked with the others).
pub(crate) fn jitter_param(params: &Params) -> Result<f64, ConfigError> {
    Ok(params.float("jitter"))
}

/// A compute block of mean `secs` seconds with coefficient of variation `cv`.
pub(crate) fn compute(secs: f64, cv: f64) -> Instr {
    Instr::Compute(Dur::Jitter { mean: (secs * NS_PER_S as f64).round() as Time, cv })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{run, Job};

    /// A job of `world` ranks, rank `r` running what `f` appends for it.
    fn job_of(world: usize, f: impl Fn(&mut ProgramBuilder, usize)) -> Job {
        Job::from_programs(
            (0..world)
                .map(|r| {
                    let mut b = ProgramBuilder::new();
                    f(&mut b, r);
                    b.build()
                })
                .collect(),
        )
    }

    #[test]
    fn rounds_is_ceil_log2() {
        let got: Vec<u32> = (1..=9).map(rounds).collect();
        assert_eq!(got, [0, 1, 2, 2, 3, 3, 3, 3, 4]);
        assert_eq!(rounds(128), 7);
        assert_eq!(rounds(129), 8);
    }

    #[test]
    fn grid_is_the_most_square_factorisation() {
        let got: Vec<(usize, usize)> = [1, 2, 3, 4, 5, 6, 8, 12, 16, 32, 128].into_iter().map(grid2d).collect();
        assert_eq!(got, [(1, 1), (2, 1), (3, 1), (2, 2), (5, 1), (3, 2), (4, 2), (4, 3), (4, 4), (8, 4), (16, 8)]);
    }

    #[test]
    fn barrier_and_allreduce_synchronise_every_world_size() {
        for world in 1..=17 {
            for (name, job) in [
                ("barrier", job_of(world, |b, r| barrier(b, r, world, BarrierWait::Spin))),
                ("allreduce", job_of(world, |b, r| allreduce(b, r, world, 40, BarrierWait::Block))),
            ] {
                let stats = run(&job).unwrap_or_else(|e| panic!("{name} P={world}: {e}"));
                for r in 0..world {
                    assert_eq!(stats.sent[r], rounds(world) as u64, "{name} P={world} rank {r}");
                    assert_eq!(stats.received[r], rounds(world) as u64, "{name} P={world} rank {r}");
                    // A barrier: no rank leaves before it has heard (transitively) from all.
                    assert!(stats.heard_from_all[r], "{name} P={world}: rank {r} left early");
                }
                let bytes = if name == "barrier" { 0 } else { 40 * rounds(world) as u64 };
                assert!(stats.bytes_sent.iter().all(|&x| x == bytes), "{name} P={world}");
            }
        }
    }

    #[test]
    fn half_a_dissemination_is_not_a_barrier() {
        // The clock check can fail: stopping after the first round leaves ranks uninformed.
        let job = job_of(5, |b, r| {
            b.push(Instr::Send { to: ((r + 1) % 5) as u32, bytes: 0 });
            b.push(Instr::Recv { from: ((r + 4) % 5) as u32, wait: BarrierWait::Spin });
        });
        let stats = run(&job).unwrap();
        assert!(stats.heard_from_all.iter().all(|&h| !h));
    }

    #[test]
    fn alltoall_is_pairwise_and_reduce_scatter_halves() {
        for world in [1, 2, 3, 5, 8, 16] {
            let stats = run(&job_of(world, |b, r| alltoall(b, r, world, 100, BarrierWait::Spin))).unwrap();
            assert!(stats.sent.iter().all(|&s| s == world as u64 - 1), "P={world}");
            assert!(stats.heard_from_all.iter().all(|&h| h), "P={world}");
            assert!(stats.bytes_sent.iter().all(|&x| x == 100 * (world as u64 - 1)), "P={world}");
        }
        let stats = run(&job_of(8, |b, r| reduce_scatter_in(b, Group::world(8), r, 1000, BarrierWait::Spin))).unwrap();
        assert!(stats.bytes_sent.iter().all(|&x| x == 500 + 250 + 125), "{:?}", stats.bytes_sent);
    }

    #[test]
    fn row_and_column_groups_talk_only_within_themselves() {
        // 3 rows of 4: an allreduce in each row, then one in each column.
        let job = job_of(12, |b, r| {
            allreduce_in(b, Group { first: r / 4 * 4, stride: 1, size: 4 }, r, 8, BarrierWait::Spin);
            allreduce_in(b, Group { first: r % 4, stride: 4, size: 3 }, r, 8, BarrierWait::Spin);
        });
        let stats = run(&job).unwrap();
        assert!(stats.sent.iter().all(|&s| s == 2 + 2));
        // Row then column reaches everyone (r hears from its row, each of which heard its own).
        assert!(stats.heard_from_all.iter().all(|&h| h));
        for &(s, d) in stats.pairs.keys() {
            assert!(s / 4 == d / 4 || s % 4 == d % 4, "{s} -> {d} crosses groups");
        }
        // A row alone does not.
        let rows_only =
            job_of(12, |b, r| allreduce_in(b, Group { first: r / 4 * 4, stride: 1, size: 4 }, r, 8, BarrierWait::Spin));
        assert!(run(&rows_only).unwrap().heard_from_all.iter().all(|&h| !h));
    }

    #[test]
    fn sendrecv_with_itself_is_a_copy() {
        let mut b = ProgramBuilder::new();
        sendrecv(&mut b, 3, 3, 100, 3, BarrierWait::Spin);
        assert_eq!(b.build().len(), 1, "only Exit");
    }
}
