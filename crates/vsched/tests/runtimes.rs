//! Issue 17 item 5: guest runtimes' waiting (`vsched-workloads/src/runtime.rs`), hand-checked
//! on a free host in lockstep: a spin count is spun exactly, as running time at the host's
//! cost per iteration, then the waiter blocks; a blocktime is a deadline that runs on while
//! the waiter is descheduled; and a scenario's `runtime` reaches the engine.

mod common;
use common::*;
use vsched_model::{BarrierWait, Dur, HostConfig, Instr, Simulation, Time, Until, VmType, NS_PER_MS, NS_PER_US};

const US: Time = NS_PER_US;
const MS: Time = NS_PER_MS;

/// A 2-vCPU VM under `rr` (slice `slice_ms`) on `host`: vCPU 0 computes `compute`, then
/// reaches the barrier last; vCPU 1 computes 1 ns and waits there as `wait` says. Returns
/// the VM's (spin, completion) in ns.
fn barrier_run(host: HostConfig, slice_ms: i64, compute: Time, wait: BarrierWait) -> (Time, Time) {
    let late = program(&[Instr::Compute(Dur::Fixed(compute)), Instr::Barrier(wait)]);
    let early = program(&[Instr::Compute(Dur::Fixed(1)), Instr::Barrier(wait)]);
    let mut d = domain("job", VmType::Hit, vec![late, early]);
    d.guest.finite = true;
    let rr = policy("rr", &[("slice_us", vsched_model::Value::Int(slice_ms * 1000))]);
    let m = Simulation::new(host, vec![d], rr, 1).run(1_000 * MS, Until::AllDone, &mut |_| true).unwrap();
    let v = vm(&m, "job");
    ((v.spin_s * 1e9).round() as Time, (v.completion_s.unwrap() * 1e9).round() as Time)
}

/// libgomp's default: GOMP_SPINCOUNT = 300,000 iterations (env.c, GCC 4.6 and later).
const LIBGOMP: BarrierWait = BarrierWait::SpinIterationsThenBlock(300_000);

#[test]
fn a_libgomp_waiter_spins_exactly_its_count_then_blocks() {
    // The ideal host: 16 cycles per iteration at 2 GHz, so 300,000 × 16 / 2 = 2,400,000 ns.
    // Each vCPU has a pCPU: the waiter spins from 1 ns to 2.4 ms + 1 ns, then blocks; the
    // other arrives at 10 ms and releases it (free IPIs), so the job ends at 10 ms.
    assert_eq!(barrier_run(free_host(2), 100, 10 * MS, LIBGOMP), (2_400_000, 10 * MS));
    // At the Core i5-760's 2.8 GHz: 4,800,000 cycles are 1,714,285.7 ns, rounded.
    let nehalem_clock = HostConfig { cpu_ghz: 2.8, ..free_host(2) };
    assert_eq!(barrier_run(nehalem_clock, 100, 10 * MS, LIBGOMP).0, 1_714_286);
    // Released within its count, it never blocks: 1 ms of spinning (1 ns to 1 ms + 1 ns...
    // minus the 1 ns the late one's compute ends before: 1 ms − 1 ns).
    assert_eq!(barrier_run(free_host(2), 100, MS, LIBGOMP), (MS - 1, MS));
    // A plain spinner spins the whole 10 ms − 1 ns: the count is what made it block.
    assert_eq!(barrier_run(free_host(2), 100, 10 * MS, BarrierWait::Spin), (10 * MS - 1, 10 * MS));
}

#[test]
fn an_intel_blocktime_runs_on_while_the_waiter_is_descheduled() {
    // One pCPU, slices of 10 ms: the late vCPU runs [0, 10 ms) of its 30 ms; the waiter
    // runs from 10 ms, computes 1 ns and spins until its slice ends at 20 ms (10 ms − 1 ns).
    // A 15 ms blocktime is a deadline at 25 ms + 1 ns: when the waiter runs again at 30 ms
    // it has passed, so it blocks at once. The late vCPU finishes at 40 ms.
    let blocktime = BarrierWait::SpinForThenBlock(15 * MS);
    assert_eq!(barrier_run(free_host(1), 10, 30 * MS, blocktime), (10 * MS - 1, 40 * MS));
    // A 15 ms budget of running time instead spins 5 ms + 1 ns more from 30 ms, blocks at
    // 35 ms + 1 ns, and the late vCPU's last 10 ms end at 45 ms + 1 ns.
    let budget = BarrierWait::SpinThenBlock(15 * MS);
    assert_eq!(barrier_run(free_host(1), 10, 30 * MS, budget), (15 * MS, 45 * MS + 1));
}

/// The spin, ns, of a 2-vCPU `bsp` VM of one superstep with these workload lines, on 2
/// free pCPUs.
fn bsp_spin_ns(lines: &str) -> Time {
    let bsp = format!("kind = \"bsp\"\nsupersteps = 1\ncompute_ms = 10\njitter = 0.5\n{lines}");
    let toml = free_scenario(2, "name = \"rr\"", &[vm_toml("job", 2, "", &bsp)], "horizon_s = 5\nuntil = \"all_done\"");
    (vm(&run(&toml, 1), "job").spin_s * 1e9).round() as Time
}

#[test]
fn a_scenario_s_runtime_sets_how_its_threads_wait() {
    // Jitter makes one thread arrive first; how long it spins is the runtime's: never under
    // pthreads (the default), at most libgomp's 2.4 ms on this host, however long the other
    // takes under Open MPI and MPICH2; `wait` overrides the runtime.
    let openmpi = bsp_spin_ns("runtime = \"openmpi\"");
    assert!(openmpi > 2_400 * US, "seed 1's imbalance must exceed libgomp's count: {openmpi} ns");
    assert_eq!(bsp_spin_ns(""), 0);
    assert_eq!(bsp_spin_ns("runtime = \"pthreads\""), 0);
    assert_eq!(bsp_spin_ns("runtime = \"libgomp\""), 2_400 * US);
    assert_eq!(bsp_spin_ns("runtime = \"mpich2\""), openmpi);
    assert_eq!(bsp_spin_ns("runtime = \"openmpi\"\nwait = \"block\""), 0);
    assert_eq!(bsp_spin_ns("runtime = \"pthreads\"\nwait = \"spin\""), openmpi);
    assert_eq!(bsp_spin_ns("wait = \"spin-then-block\"\nspin_limit_us = 100"), 100 * US);
    // Intel's 200 ms blocktime outlasts the imbalance (10 ms mean): it spins like a poller.
    assert_eq!(bsp_spin_ns("runtime = \"iomp\""), openmpi);
}

#[test]
fn runtimes_are_deterministic() {
    for lines in ["runtime = \"libgomp\"", "runtime = \"iomp\"", "runtime = \"openmpi\""] {
        let bsp = format!("kind = \"bsp\"\nsupersteps = 50\ncompute_ms = 1\njitter = 0.3\n{lines}");
        let vms = [vm_toml("a", 4, "", &bsp), vm_toml("b", 2, "", HOG)];
        let toml = scenario(2, "name = \"credit\"", &vms, "horizon_s = 2");
        let (x, y) = (run(&toml, 7), run(&toml, 7));
        assert_eq!(serde_json::to_string(&x).unwrap(), serde_json::to_string(&y).unwrap(), "{lines}");
    }
}
