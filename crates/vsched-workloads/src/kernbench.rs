//! `kernbench`: a parallel kernel build (`make -j`), reduced to what a hypervisor sees.
//!
//! Built from the Kernbench row of shared/specs/workloads.md: no user-level synchronization
//! (the compile jobs are independent processes); the sensitivity to vCPU scheduling comes
//! from the guest kernel — short, frequent spinlock critical sections (system calls, page
//! faults: µs long, taken in kernel mode so pause-loop exiting applies) and TLB-shootdown
//! IPIs when processes unmap memory and exit (`ipi_sync`: the sender spins until every
//! other live vCPU has acknowledged). Seed 001 (Wang et al. 2015) runs it in 4 VMs to show
//! how lock-holder preemption grows with the vCPU over-commitment rate.
//!
//! # The model
//! The build is `jobs` compile jobs shared evenly among `threads` job slots (`make -j
//! threads`, by default kernbench's optimal load of four per vCPU; make keeps each slot busy; static shares stand in for
//! make's dynamic hand-out, so a slot that draws long jobs finishes last, much as the
//! slowest files do). More slots than vCPUs share the vCPUs through the guest kernel's
//! scheduler. A job forks and execs (`exec_io_us`,
//! blocking: the vCPU halts), then computes `job_ms` of CPU in sections of mean
//! `syscall_every_us`, each followed by a kernel critical section of `cs_us` under one of
//! `locks` kernel spinlocks, and unmaps memory `shootdowns_per_job` times (the last one
//! as it exits). When every job is done, the first slot links the kernel alone (`link_ms`)
//! while the others idle: the serial tail of a real build.
//!
//! Defaults are scaled down from a real build (thousands of jobs of ~0.1–1 s) to keep runs
//! short; what matters for scheduling — µs critical sections every ~100 µs of compute,
//! a shootdown every few ms, blocking between jobs — keeps its real time scale.

use vsched_model::{
    BarrierWait, ConfigError, Dur, GuestSpec, Instr, LockChoice, ParamDefault, ParamRange, ParamSpec, Params,
    ProgramBuilder,
};

use crate::{lock_kind_of, threads_of, us, Ranks, WorkloadInfo, MAX_THREADS};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "jobs",
        default: ParamDefault::Int(96),
        range: ParamRange::Int { min: 1, max: 10_000_000 },
        doc: "compile jobs in the whole build (shared by the vCPUs)",
    },
    ParamSpec {
        name: "job_ms",
        default: ParamDefault::Float(20.0),
        range: ParamRange::Float { min: 0.001, max: 1e6 },
        doc: "mean CPU time of one job, ms",
    },
    ParamSpec {
        name: "syscall_every_us",
        default: ParamDefault::Float(100.0),
        range: ParamRange::Float { min: 0.1, max: 1e9 },
        doc: "mean compute between kernel critical sections, µs (exponential)",
    },
    ParamSpec {
        name: "cs_us",
        default: ParamDefault::Float(2.0),
        range: ParamRange::Float { min: 0.0, max: 1e6 },
        doc: "mean kernel critical section, µs",
    },
    ParamSpec {
        name: "locks",
        default: ParamDefault::Int(2),
        range: ParamRange::Int { min: 1, max: 65_536 },
        doc: "hot kernel spinlocks (each section takes one at random)",
    },
    ParamSpec {
        name: "shootdowns_per_job",
        default: ParamDefault::Int(2),
        range: ParamRange::Int { min: 0, max: 10_000 },
        doc: "TLB shootdowns (ipi_sync) per job, the last at exit; 0 = none",
    },
    ParamSpec {
        name: "exec_io_us",
        default: ParamDefault::Float(300.0),
        range: ParamRange::Float { min: 0.0, max: 1e9 },
        doc: "mean blocking time to fork and exec a job, µs (exponential)",
    },
    ParamSpec {
        name: "link_ms",
        default: ParamDefault::Float(50.0),
        range: ParamRange::Float { min: 0.0, max: 1e6 },
        doc: "serial link at the end, on vCPU 0, ms",
    },
    ParamSpec {
        name: "lock_kind",
        default: ParamDefault::Str("ticket"),
        range: ParamRange::Any,
        doc: "the kernel locks: \"ticket\" (Linux 2.6.25–4.1), \"tas\" (a guest qspinlock without PV support \
              falls back to test-and-set), \"mcs\" (the native qspinlock, Linux 4.2 on), \"preemptable-ticket\" \
              (Ouyang and Lange, VEE 2013) or \"mutex\" (the sections under kernel mutexes instead); with the \
              VM's pv_spinlocks every spinlock kind is the paravirtual qspinlock",
    },
    ParamSpec {
        name: "threads",
        default: ParamDefault::Int(0),
        range: ParamRange::Int { min: 0, max: MAX_THREADS },
        doc: "make's parallel jobs, `make -j` (0: kernbench's optimal load, 4 per vCPU); more than the VM's \
              vCPUs share them through the guest kernel's scheduler",
    },
];

/// kernbench's "optimal load": `make -j` four jobs per CPU (kernbench 0.42 by Con Kolivas,
/// `optijobs=${optijobs:=$(( $cpus * 4 ))}`; the load of its warm-up run too, and the only
/// one it runs with `-H -M`). The guest's CPUs are its vCPUs.
const OPTIMAL_JOBS_PER_CPU: usize = 4;

/// Variation of a critical section's length around its mean.
const CS_CV: f64 = 0.5;

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let vcpus = ranks.vcpus;
    let jobs = params.int("jobs") as u64;
    let job_ms = params.float("job_ms");
    let every_us = params.float("syscall_every_us");
    let cs_us = params.float("cs_us");
    let locks = params.int("locks") as u32;
    let shootdowns = params.int("shootdowns_per_job") as u64;
    let exec_io_us = params.float("exec_io_us");
    let link_ms = params.float("link_ms");
    let lock_kind = lock_kind_of(params)?;
    // Sections per job, split into one chunk per shootdown (at least one chunk).
    let sections = ((job_ms * 1000.0 / every_us).round() as u64).max(1);
    let chunks = shootdowns.clamp(1, sections);
    let per_chunk = sections / chunks;
    let choice = if locks == 1 { LockChoice::Fixed(0) } else { LockChoice::Uniform };
    let threads = threads_of(params, OPTIMAL_JOBS_PER_CPU * vcpus) as u64;
    let programs = (0..threads)
        .map(|i| {
            let mine = jobs / threads + u64::from(i < jobs % threads);
            let mut b = ProgramBuilder::new();
            if mine > 0 {
                b.repeat(Some(mine));
                if exec_io_us > 0.0 {
                    b.push(Instr::Io(Dur::Exp { mean: us(exec_io_us) }));
                }
                b.repeat(Some(chunks)).repeat(Some(per_chunk));
                b.push(Instr::Compute(Dur::Exp { mean: us(every_us) }))
                    .push(Instr::Lock { choice, kernel: true })
                    .push(Instr::Compute(Dur::Jitter { mean: us(cs_us), cv: CS_CV }))
                    .push(Instr::Unlock)
                    .end_repeat();
                if shootdowns > 0 {
                    b.push(Instr::IpiSync);
                }
                b.end_repeat().end_repeat();
            }
            b.push(Instr::Barrier(BarrierWait::Block));
            if i == 0 && link_ms > 0.0 {
                b.push(Instr::Compute(Dur::Fixed(us(link_ms * 1000.0))));
            }
            b.build()
        })
        .collect();
    Ok(GuestSpec { programs, vcpus, locks, lock_kind, finite: true, idle_vcpus: 0 })
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "kernbench",
    description: "Parallel kernel build (make -j): independent jobs, kernel spinlocks, TLB shootdowns",
    models: "Kernbench",
    params: PARAMS,
    build,
};
