//! Each workload's working set: the memory one of its guest threads keeps reusing, which it
//! must refill after others evicted it from the caches or after it moved (the engine's
//! `sim/cache.rs`). A scenario overrides it with `working_set_kb` in the workload table.
//!
//! It is per thread because every workload model is one program per thread, and each
//! program is what has a footprint of its own: a compile job (one `cc1` process per `make`
//! slot), an MPI rank, a loop. The NPB models derive it from their problem size, split over
//! the ranks as NPB splits its grid (each rank's share of the arrays it sweeps every
//! iteration); the others from what the program touches. Every figure and its source is in docs/realism.md. Only the
//! part up to the cache sizes matters: a working set larger than the last-level cache
//! refills the whole cache either way.

use vsched_model::Params;

use crate::Ranks;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
/// A double, NPB's unit of data.
const F64_BYTES: u64 = 8;

/// The scenario key that overrides the default.
pub const KEY: &str = "working_set_kb";

/// Bytes each thread of workload `name` reuses, given its checked `params`.
pub fn default_bytes(name: &str, params: &Params, ranks: &Ranks) -> u64 {
    let per_rank = |total: u64| total / ranks.world.max(1) as u64;
    match name {
        "idle" => 0,
        // A loop, its counters and its stack: one page each for code and data.
        "cpu_hog" | "spinlock" | "bsp" => 8 * KIB,
        // A static page served from the page cache plus the server's per-request state:
        // the request and response buffers (two 4 KiB pages) and the page's 16 KiB.
        "web" => 24 * KIB,
        // gcc's cc1 compiling one file: 28 MB resident at its peak (our measurement,
        // `/usr/bin/time -f %M gcc -O2 -c` of a 5-line C file with stdio, gcc 12): an upper
        // bound, above any preset's L3 per core.
        "kernbench" => 28 * MIB,
        // NPB LU: u, rsd, frct and flux, 5 doubles per grid point each (lu.f / applu.incl),
        // over the rank's share of grid³ points.
        "npb-lu" => {
            let n = params.int("grid").max(1) as u64;
            per_rank(4 * 5 * F64_BYTES * n * n * n)
        }
        // NPB IS: the rank's keys and two key buffers, 4-byte integers (is.c).
        "npb-is" => per_rank(3 * 4 * (1u64 << params.int("keys_log2").clamp(0, 40))),
        // NPB CG: the sparse matrix, na × (nonzer + 1)² entries of a double and a 4-byte
        // column index (cg.f, `nz`; nonzer = 11 for class A, which `na` = 14000 is).
        "npb-cg" => per_rank(params.int("na").max(0) as u64 * 12 * 12 * (F64_BYTES + 4)),
        // NPB EP: every rank generates its own 2 × 2^16 doubles of random pairs (ep.f, `x`).
        "npb-ep" => 2 * (1 << 16) * F64_BYTES,
        // A workload that declares none: a loop's.
        _ => 8 * KIB,
    }
}

/// A driver domain's netback: the shared rings and the packet being copied, a few pages
/// (no measurement found).
pub const DRIVER_DOMAIN_BYTES: u64 = 16 * KIB;
