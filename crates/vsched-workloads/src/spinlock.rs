//! `spinlock`: threads compute, then take one of a few spinlocks for a short critical
//! section, `iterations` times.
//!
//! Models the kernel-lock part of the Kernbench row of workloads.md (µs critical sections,
//! frequent acquisitions) and the per-cell locks of SPLASH-2 Barnes, reduced to their
//! synchronization skeleton. This is the classic lock-holder-preemption micro-benchmark:
//! with `lock_kind = "ticket"` a preempted waiter also stalls the queue behind it.
//! Waiters spin in guest kernel mode by default, so pause-loop exiting applies
//! (`mode = "user"` for user-level spinlocks, which PLE does not see).

use vsched_model::{
    ConfigError, Dur, GuestSpec, Instr, LockChoice, ParamDefault, ParamRange, ParamSpec, Params, ProgramBuilder,
};

use crate::{lock_kind_of, threads_of, us, Ranks, WorkloadInfo, THREADS_PARAM};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "iterations",
        default: ParamDefault::Int(10_000),
        range: ParamRange::Int { min: 1, max: 1_000_000_000 },
        doc: "lock acquisitions per thread",
    },
    ParamSpec {
        name: "compute_us",
        default: ParamDefault::Float(50.0),
        range: ParamRange::Float { min: 0.0, max: 1e9 },
        doc: "mean compute between acquisitions, µs",
    },
    ParamSpec {
        name: "cs_us",
        default: ParamDefault::Float(10.0),
        range: ParamRange::Float { min: 0.0, max: 1e9 },
        doc: "critical section length, µs",
    },
    ParamSpec {
        name: "jitter",
        default: ParamDefault::Float(0.2),
        range: ParamRange::Float { min: 0.0, max: 10.0 },
        doc: "coefficient of variation of the compute phase",
    },
    ParamSpec {
        name: "locks",
        default: ParamDefault::Int(1),
        range: ParamRange::Int { min: 1, max: 1_000_000 },
        doc: "number of locks; each acquisition picks one uniformly",
    },
    ParamSpec {
        name: "lock_kind",
        default: ParamDefault::Str("ticket"),
        range: ParamRange::Any,
        doc: "\"ticket\" (FIFO), \"tas\" (test-and-set), \"mcs\" (queued: Linux's native qspinlock), \
              \"preemptable-ticket\" (FIFO, but a waiter past a timeout proportional to its place in line may \
              take a free lock out of order: Ouyang and Lange, VEE 2013) or \"mutex\" (a kernel mutex: spins \
              while the owner is on a CPU, else sleeps; kernel mode whatever `mode` says); with the VM's \
              pv_spinlocks, kernel-mode spinlocks of every kind are paravirtual queued spinlocks",
    },
    ParamSpec {
        name: "mode",
        default: ParamDefault::Str("kernel"),
        range: ParamRange::Any,
        doc: "\"kernel\" (PLE applies) or \"user\" spinning",
    },
    THREADS_PARAM,
];

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let vcpus = ranks.vcpus;
    let iterations = params.int("iterations") as u64;
    let compute_us = params.float("compute_us");
    let cs_us = params.float("cs_us");
    // Durations are whole nanoseconds: a loop of sub-nanosecond steps would take no time.
    if us(compute_us) + us(cs_us) == 0 {
        return Err(params.invalid("compute_us", "expected compute_us + cs_us >= 0.001 (a nanosecond)"));
    }
    let jitter = params.float("jitter");
    let locks = params.int("locks") as u32;
    let lock_kind = lock_kind_of(params)?;
    let kernel = params.choice("mode", &["kernel", "user"])? == "kernel";
    let choice = if locks == 1 { LockChoice::Fixed(0) } else { LockChoice::Uniform };
    let mut b = ProgramBuilder::new();
    b.repeat(Some(iterations))
        .push(Instr::Compute(Dur::Jitter { mean: us(compute_us), cv: jitter }))
        .push(Instr::Lock { choice, kernel })
        .push(Instr::Compute(Dur::Fixed(us(cs_us))))
        .push(Instr::Unlock)
        .end_repeat();
    let program = b.build();
    let threads = threads_of(params, vcpus);
    Ok(GuestSpec { programs: vec![program; threads], vcpus, locks, lock_kind, finite: true, idle_vcpus: 0 })
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "spinlock",
    description: "Compute, then a short critical section under a spinlock, N times per thread",
    models: "Kernbench (guest-kernel spinlocks), SPLASH-2 Barnes (per-cell locks)",
    params: PARAMS,
    build,
};
