//! Guest runtimes: how a parallel program's threads wait for their peers, as the library
//! that implements its barriers and receives does it.
//!
//! A thread that reaches a barrier early, or polls for a message that has not arrived, does
//! not choose how to wait: its runtime does. Whether it burns its vCPU (and so its VM's
//! share of the host) or gives the vCPU back to the hypervisor decides what a vCPU
//! scheduler can gain by co-scheduling, so the waiting is set by the runtime the program was
//! built with, never per paper. Each profile below is read from the runtime's own source, at
//! its default settings (no environment variable set):
//!
//! - `pthreads` (glibc NPTL): blocks at once. `pthread_barrier_wait` (nptl/
//!   pthread_barrier_wait.c, glibc 2.23 and later) calls `futex_wait` without spinning ("TODO
//!   We should add spinning with back-off"), and `pthread_cond_wait` spins `maxspin = 0`
//!   times (`__pthread_cond_wait_common`, nptl/pthread_cond_wait.c, glibc 2.25 and later):
//!   the mutex + condition-variable barrier of SPLASH-2's POSIX macros blocks too.
//! - `libgomp` (GCC's OpenMP): spins a COUNT of iterations, then blocks. `do_wait`
//!   (config/linux/wait.h) runs `do_spin`, a loop of a relaxed load and `cpu_relax()` (x86
//!   `PAUSE`, config/linux/x86/futex.h) `gomp_spin_count_var` times, then `futex_wait`.
//!   `initialize_env` (env.c) sets the count to 300,000 when neither `OMP_WAIT_POLICY` nor
//!   `GOMP_SPINCOUNT` is set (GCC 4.6 and later: r167371, PR libgomp/43706, 2010; GCC 4.4
//!   and 4.5 spun 20,000,000), and to `gomp_throttled_spin_count_var` = 100 when the
//!   program has more threads than the guest has CPUs (`gomp_managed_threads >
//!   gomp_available_cpus`). The simulator turns the count into running time with its host's
//!   `spin_iteration_cycles` (`BarrierWait::SpinIterationsThenBlock`).
//! - `iomp` (Intel OpenMP, open-sourced as LLVM's libomp, openmp/runtime/src): spins until
//!   `KMP_BLOCKTIME` = 200 ms has passed on the timestamp counter, then suspends
//!   (`KMP_DEFAULT_BLOCKTIME`, kmp.h: 200 ms in every revision we read, LLVM 2016 (review
//!   D25102) to today, written 200000 µs since review D157646; `__kmp_wait_template`,
//!   kmp_wait_release.h: `hibernate_goal = KMP_NOW() + ...`). The deadline is wall-clock
//!   time, so time spent descheduled counts (`BarrierWait::SpinForThenBlock`). With more
//!   threads than processors the runtime forces an immediate suspend (`__kmp_zero_bt`,
//!   `KMP_ADJUST_BLOCKTIME`, in the monitor-thread builds of the same function).
//! - `openmpi` (Open MPI): busy-polls for ever. `opal_progress()` (opal/runtime/
//!   opal_progress.c) calls `sched_yield()` between polls only when `mpi_yield_when_idle`
//!   is set, which `mpirun` does only when a node is oversubscribed (ompi/runtime/
//!   ompi_mpi_params.c: "will default to 1 when oversubscribing nodes"; the same test in the
//!   1.x and 4.x `opal_progress`); no receive blocks.
//! - `mpich2` (MPICH2's nemesis channel): polls for ever. `MPID_nem_mpich2_blocking_recv`
//!   (nemesis's mpid_nem_inline.h, MPICH2 1.x; MPICH 3 renamed the `mpich2` functions)
//!   loops on the shared-memory queues and calls
//!   `sched_yield()` every `MPID_NEM_POLLS_BEFORE_YIELD` = 1000 polls.
//!
//! A `sched_yield()` in a guest whose other threads all have vCPUs of their own returns at
//! once: the guest kernel has nothing else to run and the hypervisor never sees the call
//! (no exit). The vCPU goes on polling, so both MPI profiles are `Spin`; a yield would only
//! matter with more runnable threads than vCPUs in the guest, and an MPI VM runs one rank
//! per vCPU.
//!
//! Oversubscription inside the guest: a threaded workload's `threads` parameter may exceed
//! its VM's vCPUs (the guest kernel then schedules them, `sim/guest_sched.rs`); its runtime
//! then waits as it does oversubscribed (libgomp's throttled count, Intel OpenMP's zero
//! blocktime).

use vsched_model::{BarrierWait, ConfigError, ParamDefault, ParamRange, ParamSpec, Params, Time, NS_PER_MS};

use crate::us;

/// libgomp's default spin count, iterations (env.c `initialize_env`, GCC 4.6 and later,
/// `OMP_WAIT_POLICY` unset).
pub const LIBGOMP_SPIN_COUNT_ITERATIONS: u64 = 300_000;
/// libgomp's spin count with more threads than CPUs, iterations (`gomp_throttled_spin_count_var`,
/// same function).
pub const LIBGOMP_THROTTLED_SPIN_COUNT_ITERATIONS: u64 = 100;
/// Intel OpenMP's default blocktime, ms (`KMP_DEFAULT_BLOCKTIME`, kmp.h: 200 ms on every
/// processor but hybrid ones, where recent libomp uses 0: LLVM review D113012).
pub const IOMP_BLOCKTIME_MS: u64 = 200;

/// A program's parallel runtime: what implements its barriers and receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    Pthreads,
    Libgomp,
    Iomp,
    OpenMpi,
    Mpich2,
}

/// Every runtime, as a scenario names it.
pub const RUNTIMES: &[(&str, Runtime)] = &[
    ("pthreads", Runtime::Pthreads),
    ("libgomp", Runtime::Libgomp),
    ("iomp", Runtime::Iomp),
    ("openmpi", Runtime::OpenMpi),
    ("mpich2", Runtime::Mpich2),
];

/// The message-passing runtimes: the only ones an MPI program can be built with.
pub const MPI_RUNTIMES: &[(&str, Runtime)] = &[("openmpi", Runtime::OpenMpi), ("mpich2", Runtime::Mpich2)];

impl Runtime {
    /// How a thread of this runtime waits, in a guest where `threads` threads of the program
    /// share `cpus` CPUs (vCPUs).
    pub fn wait(self, threads: usize, cpus: usize) -> BarrierWait {
        let oversubscribed = threads > cpus;
        match self {
            Runtime::Pthreads => BarrierWait::Block,
            Runtime::Libgomp if oversubscribed => {
                BarrierWait::SpinIterationsThenBlock(LIBGOMP_THROTTLED_SPIN_COUNT_ITERATIONS)
            }
            Runtime::Libgomp => BarrierWait::SpinIterationsThenBlock(LIBGOMP_SPIN_COUNT_ITERATIONS),
            Runtime::Iomp if oversubscribed => BarrierWait::Block,
            Runtime::Iomp => BarrierWait::SpinForThenBlock(IOMP_BLOCKTIME_MS * NS_PER_MS),
            // Their yields return at once (see the header), so the vCPU polls on.
            Runtime::OpenMpi | Runtime::Mpich2 => BarrierWait::Spin,
        }
    }
}

const RUNTIME_DOC: &str = "the program's parallel runtime, which sets how it waits: \"pthreads\" (block), \"libgomp\" \
     (spin 300,000 iterations, then block), \"iomp\" (spin 200 ms, then block), \"openmpi\" or \"mpich2\" (poll)";
const MPI_RUNTIME_DOC: &str = "the MPI library, which sets how receives wait: \"openmpi\" or \"mpich2\" (both poll)";

/// The `runtime` parameter of a threaded program (any runtime), defaulting to `default`.
pub(crate) const fn runtime_param(default: &'static str) -> ParamSpec {
    ParamSpec { name: "runtime", default: ParamDefault::Str(default), range: ParamRange::Any, doc: RUNTIME_DOC }
}

/// The `runtime` parameter of an MPI program: Open MPI by default. Both MPI libraries poll,
/// so the choice does not change the waiting; Open MPI is the library the models' receives
/// were first written after.
pub(crate) const MPI_RUNTIME_PARAM: ParamSpec =
    ParamSpec { name: "runtime", default: ParamDefault::Str("openmpi"), range: ParamRange::Any, doc: MPI_RUNTIME_DOC };

/// The expert override: unset (`"runtime"`) leaves the waiting to the runtime.
pub(crate) const WAIT_PARAM: ParamSpec = ParamSpec {
    name: "wait",
    default: ParamDefault::Str("runtime"),
    range: ParamRange::Any, doc: "expert override of the runtime's waiting: \"spin\", \"block\" or \"spin-then-block\" (\"runtime\": as the runtime waits)",
};
pub(crate) const SPIN_LIMIT_PARAM: ParamSpec = ParamSpec {
    name: "spin_limit_us",
    default: ParamDefault::Float(200.0),
    range: ParamRange::Float { min: 0.0, max: 1e9 },
    doc: "with wait = \"spin-then-block\": running time spent spinning before blocking, µs",
};

/// How the program's threads wait: `wait` if the scenario overrides it, else its `runtime`
/// (one of `runtimes`) for `threads` threads on `cpus` vCPUs.
pub(crate) fn wait_of(
    params: &Params,
    runtimes: &[(&str, Runtime)],
    threads: usize,
    cpus: usize,
) -> Result<BarrierWait, ConfigError> {
    let names: Vec<&str> = runtimes.iter().map(|&(name, _)| name).collect();
    let chosen = params.choice("runtime", &names)?;
    let runtime = runtimes.iter().find(|&&(name, _)| name == chosen).map(|&(_, r)| r).expect("a listed runtime");
    let spin_limit: Time = us(params.float("spin_limit_us"));
    let wait = params.choice("wait", &["runtime", "spin", "block", "spin-then-block"])?;
    if params.is_given("spin_limit_us") && wait != "spin-then-block" {
        return Err(params.invalid("spin_limit_us", "applies only with wait = \"spin-then-block\""));
    }
    Ok(match wait.as_str() {
        "spin" => BarrierWait::Spin,
        "block" => BarrierWait::Block,
        "spin-then-block" => BarrierWait::SpinThenBlock(spin_limit),
        _ => runtime.wait(threads, cpus),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use vsched_model::Value;

    use super::*;

    const SPECS: &[ParamSpec] = &[runtime_param("pthreads"), WAIT_PARAM, SPIN_LIMIT_PARAM];

    fn wait(given: &[(&str, Value)], threads: usize, cpus: usize) -> Result<BarrierWait, ConfigError> {
        let given: BTreeMap<String, Value> = given.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let params = Params::check("vm[0].workload", SPECS, &given)?;
        wait_of(&params, RUNTIMES, threads, cpus)
    }

    fn runtime(name: &str) -> [(&'static str, Value); 1] {
        [("runtime", Value::Str(name.into()))]
    }

    #[test]
    fn each_runtime_waits_as_its_source_says() {
        // Budgets written out from the cited constants, not from the code's own constants.
        assert_eq!(wait(&runtime("pthreads"), 4, 4), Ok(BarrierWait::Block));
        assert_eq!(wait(&runtime("libgomp"), 4, 4), Ok(BarrierWait::SpinIterationsThenBlock(300_000)));
        // 200 ms = 200,000,000 ns of guest time.
        assert_eq!(wait(&runtime("iomp"), 4, 4), Ok(BarrierWait::SpinForThenBlock(200_000_000)));
        assert_eq!(wait(&runtime("openmpi"), 4, 4), Ok(BarrierWait::Spin));
        assert_eq!(wait(&runtime("mpich2"), 4, 4), Ok(BarrierWait::Spin));
        // The default here is pthreads.
        assert_eq!(wait(&[], 4, 4), Ok(BarrierWait::Block));
    }

    #[test]
    fn oversubscribed_guests_throttle_openmp_and_not_mpi() {
        // Five threads on four vCPUs: libgomp's throttled count, Intel's zero blocktime.
        assert_eq!(wait(&runtime("libgomp"), 5, 4), Ok(BarrierWait::SpinIterationsThenBlock(100)));
        assert_eq!(wait(&runtime("iomp"), 5, 4), Ok(BarrierWait::Block));
        assert_eq!(wait(&runtime("openmpi"), 5, 4), Ok(BarrierWait::Spin));
        assert_eq!(wait(&runtime("mpich2"), 5, 4), Ok(BarrierWait::Spin));
        // Fewer threads than vCPUs (halted idle vCPUs) is not oversubscription.
        assert_eq!(wait(&runtime("libgomp"), 1, 2), Ok(BarrierWait::SpinIterationsThenBlock(300_000)));
    }

    #[test]
    fn wait_overrides_the_runtime() {
        let given = [("runtime", Value::Str("libgomp".into())), ("wait", Value::Str("spin".into()))];
        assert_eq!(wait(&given, 4, 4), Ok(BarrierWait::Spin));
        let given = [
            ("runtime", Value::Str("openmpi".into())),
            ("wait", Value::Str("spin-then-block".into())),
            ("spin_limit_us", Value::Float(50.0)),
        ];
        assert_eq!(wait(&given, 4, 4), Ok(BarrierWait::SpinThenBlock(50_000)));
        assert_eq!(wait(&[("wait", Value::Str("runtime".into()))], 4, 4), Ok(BarrierWait::Block));
    }

    #[test]
    fn bad_values_name_the_field() {
        let err = wait(&runtime("x"), 4, 4).unwrap_err();
        assert_eq!(
            err.to_string(),
            "vm[0].workload.runtime: expected one of \"pthreads\", \"libgomp\", \"iomp\", \"openmpi\", \"mpich2\", got \"x\""
        );
        let err = wait(&[("spin_limit_us", Value::Float(10.0))], 4, 4).unwrap_err();
        assert_eq!(err.path, "vm[0].workload.spin_limit_us");
        let err = wait(&[("wait", Value::Str("nap".into()))], 4, 4).unwrap_err();
        assert_eq!(err.path, "vm[0].workload.wait");
    }
}
