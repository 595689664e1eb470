//! Issue 17 item 1: out-of-lockstep clocks (`sim/clocks.rs`), each effect in isolation on a
//! host without overheads, with values computed from the parameters.
//!
//! A probe policy records every tick and every decision; it runs each vCPU for a fixed slice,
//! like `rr`, and declares its ticks drifting (Xen) or aligned (Linux) as asked.

mod common;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use common::*;
use vsched_model::{
    Clocks, Cx, Decision, Dur, HostConfig, Instr, PcpuId, Policy, Simulation, Time, Until, VcpuId, VmType, NS_PER_MS,
    NS_PER_US,
};

const TICK_NS: Time = 10 * NS_PER_MS;
const SLICE_NS: Time = 3 * NS_PER_MS;

#[derive(Default)]
struct Log {
    /// (pCPU, instant) of every tick.
    ticks: Vec<(PcpuId, Time)>,
    /// (pCPU, instant) of every decision that ran a vCPU.
    runs: Vec<(PcpuId, Time)>,
}

struct Probe {
    aligned: bool,
    slop_ns: Time,
    queue: VecDeque<VcpuId>,
    log: Rc<RefCell<Log>>,
}

impl Policy for Probe {
    fn tick_period_ns(&self) -> Option<Time> {
        Some(TICK_NS)
    }
    fn ticks_aligned(&self) -> bool {
        self.aligned
    }
    fn timer_slop_ns(&self) -> Time {
        self.slop_ns
    }
    fn vcpu_insert(&mut self, _cx: &mut Cx, v: VcpuId) {
        self.queue.push_back(v);
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.queue.push_back(v);
        cx.kick_idle_from(0);
    }
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        if let Some(u) = prev.filter(|&u| cx.is_runnable(u)) {
            self.queue.push_back(u);
        }
        match self.queue.pop_front() {
            Some(v) => {
                self.log.borrow_mut().runs.push((p, cx.now()));
                Decision::run(v, SLICE_NS)
            }
            None => Decision::idle(),
        }
    }
    fn tick(&mut self, cx: &mut Cx, p: PcpuId) {
        self.log.borrow_mut().ticks.push((p, cx.now()));
    }
}

/// Runs `domains` on `pcpus` pCPUs without overheads, clocks as given, for `horizon`.
fn probe_run(host: HostConfig, aligned: bool, slop_ns: Time, doms: usize, seed: u64, horizon: Time) -> Log {
    let log = Rc::new(RefCell::new(Log::default()));
    let probe = Probe { aligned, slop_ns, queue: VecDeque::new(), log: log.clone() };
    let domains = (0..doms).map(|d| domain(&format!("hog{d}"), VmType::Hit, vec![hog()])).collect();
    Simulation::new(host, domains, Box::new(probe), seed).run(horizon, Until::Horizon, &mut |_| true).unwrap();
    Rc::try_unwrap(log).ok().unwrap().into_inner()
}

fn independent(pcpus: usize) -> HostConfig {
    HostConfig { clocks: Clocks::Independent, workload_start_spread_ns: 0, ..free_host(pcpus) }
}

fn ticks_of(log: &Log, p: PcpuId) -> Vec<Time> {
    log.ticks.iter().filter(|&&(q, _)| q == p).map(|&(_, t)| t).collect()
}

#[test]
fn every_pcpu_ticks_at_its_own_seeded_phase() {
    let phases = |seed: u64| -> Vec<Time> {
        let log = probe_run(independent(4), false, 0, 4, seed, 100 * NS_PER_MS);
        (0..4)
            .map(|p| {
                let ticks = ticks_of(&log, p);
                let phase = ticks[0];
                assert!(phase < TICK_NS, "pCPU {p}'s first tick at {phase} ns, within one period");
                // Without slop, a pCPU's ticks keep exactly their period after the phase.
                assert!(ticks.iter().enumerate().all(|(k, &t)| t == phase + k as Time * TICK_NS), "{ticks:?}");
                phase
            })
            .collect()
    };
    let first = phases(1);
    let mut distinct = first.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "four pCPUs, four phases: {first:?}");
    assert_eq!(phases(1), first, "the same seed draws the same phases");
    assert_ne!(phases(2), first, "another seed draws others");
}

#[test]
fn lockstep_and_aligned_ticks_fall_on_multiples_of_the_period() {
    for (host, aligned) in [(free_host(4), false), (independent(4), true)] {
        let log = probe_run(host, aligned, 0, 4, 1, 100 * NS_PER_MS);
        assert_eq!(log.ticks.len(), 4 * 10, "ten ticks per pCPU in 100 ms (the last at 100 ms)");
        assert!(log.ticks.iter().all(|&(_, t)| t % TICK_NS == 0 && t > 0), "{:?}", log.ticks);
    }
}

#[test]
fn timer_slop_delays_each_drifting_tick_and_slice_end_by_less_than_the_slop() {
    let slop = 50 * NS_PER_US;
    let log = probe_run(independent(2), false, slop, 4, 3, 1000 * NS_PER_MS);
    for p in 0..2 {
        let ticks = ticks_of(&log, p);
        let gaps: Vec<Time> = ticks.windows(2).map(|w| w[1] - w[0]).collect();
        // Each tick is re-armed from the instant it fired (Xen's `csched_tick`), so every
        // period is 10 ms plus that firing's delay, drawn in [0, 50 µs).
        assert!(gaps.iter().all(|&g| (TICK_NS..TICK_NS + slop).contains(&g)), "pCPU {p}: {gaps:?}");
        assert!(gaps.iter().any(|&g| g > TICK_NS + slop / 2), "the delays are spread over the slop");
        let runs: Vec<Time> = log.runs.iter().filter(|&&(q, _)| q == p).map(|&(_, t)| t).collect();
        let slices: Vec<Time> = runs.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(slices.iter().all(|&s| (SLICE_NS..SLICE_NS + slop).contains(&s)), "pCPU {p}: {slices:?}");
    }
    // The host's `timer_slop_us` overrides the policy's.
    let host = HostConfig { timer_slop_ns: Some(0), ..independent(2) };
    let log = probe_run(host, false, slop, 4, 3, 100 * NS_PER_MS);
    let runs: Vec<Time> = log.runs.iter().filter(|&&(q, _)| q == 0).map(|&(_, t)| t).collect();
    assert!(runs.windows(2).all(|w| w[1] - w[0] == SLICE_NS), "{runs:?}");
}

#[test]
fn each_vm_starts_its_workload_at_a_seeded_offset_and_is_timed_from_it() {
    // Two VMs computing 5 ms each on two pCPUs: each starts at its own offset in [0, 10 ms),
    // runs without waiting, and its completion time is its 5 ms of work.
    let spread = 10 * NS_PER_MS;
    let job = |name: &str| {
        let mut d = domain(name, VmType::Hit, vec![program(&[Instr::Compute(Dur::Fixed(5 * NS_PER_MS))])]);
        d.guest.finite = true;
        d
    };
    let host = HostConfig { workload_start_spread_ns: spread, ..independent(2) };
    let run_with = |seed: u64| {
        let mut sim = Simulation::new(host.clone(), vec![job("a"), job("b")], policy("rr", &[]), seed);
        sim.enable_trace(1000);
        let m = sim.run(NS_PER_MS * 100, Until::AllDone, &mut |_| true).unwrap();
        let spans = sim.take_trace().unwrap().spans().to_vec();
        let starts: Vec<Time> = (0..2)
            .map(|d| spans.iter().filter(|s| s.dom == d && s.end - s.start > 0).map(|s| s.start).min().unwrap())
            .collect();
        (m, starts)
    };
    let (m, starts) = run_with(1);
    assert!(starts.iter().all(|&s| s < spread) && starts[0] != starts[1], "starts {starts:?}");
    for name in ["a", "b"] {
        assert_eq!(vm(&m, name).completion_s, Some(0.005), "{name} is timed from its own start");
    }
    assert_ne!(run_with(2).1, starts, "another seed, other offsets");
    // In lockstep both start at 0.
    let mut sim = Simulation::new(free_host(2), vec![job("a"), job("b")], policy("rr", &[]), 1);
    let m = sim.run(NS_PER_MS * 100, Until::AllDone, &mut |_| true).unwrap();
    assert_eq!(m.sim_s, 0.005);
}
