//! The real-vCPU scheduler: one thread that runs a policy over a [`Backend`]'s vCPUs,
//! turning each `Decision` into stopping and starting vCPU threads.
//!
//! pCPU i of the scenario is host CPU `host_cpus[i]` (the i-th CPU of the process's affinity
//! mask, `admission::host_cpus`); a vCPU given pCPU i runs pinned there, and the runner
//! stops a pCPU's vCPU before it starts another, so no host CPU ever executes two vCPUs of
//! the run at once (asserted in debug builds, tested on the fake backend).
//!
//! The loop, at each step (one instant of the run's clock), handles what is due in the
//! simulator's order at an instant (`vsched_model::sim`): guest events (a vCPU finished),
//! policy timers, per-pCPU ticks (`tick_period_ns`), slice ends, then reschedules, until
//! nothing is left; then it sleeps in `Backend::next_event` until the next deadline or
//! event. What maps to what:
//! - `pick_next` on pCPU p: `stop` the vCPU it ran (if another is chosen), `start` the new
//!   one on p's host CPU, arm the slice end;
//! - a VM's start: each VM starts its workload at the instant the simulator starts it (the
//!   seeded offsets of `host.workload_start_spread_ms`, read from the simulation of the same
//!   scenario and seed: `Simulation::workload_starts`). Every vCPU is inserted runnable at
//!   time 0; one given a pCPU before its VM's start halts at once (`sleep`), as a guest with
//!   nothing to run does in the simulator, and at the start the runner wakes it (`wake`),
//!   which is Credit's BOOST, the VM's halted vCPUs in the order the simulator wakes them
//!   (`starts`): under CFS that order decides which vCPUs end up sharing a pCPU;
//! - what guests do on their own (a program that ends, a pause-loop exit, a halt, a wake):
//!   `guest_events`; a message to another VM: `messages`.
//!
//! Approximations, against the simulator: ticks, slices and timers fire when the loop gets
//! to them, late by the host's wake-up latency (measured: `scheduler_late_us`); the
//! simulator's timer slop is not added (the real host has its own jitter).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use vsched::scenario::Scenario;
use vsched_engine::{Rng, RngStreams, Time, NS_PER_MS};
use vsched_model::trace::Trace;
use vsched_model::{Clocks, Decision, Histogram, PcpuId, Policy, RunMetrics, Until, VcpuId, VcpuState, World};

use crate::accounting::{HostTally, VmTally};
use crate::backend::{Backend, BackendEvent, GuestActivity, VmSpec};
use crate::error::RealError;
use crate::world::RealWorld;

mod guest_events;
mod messages;
mod starts;

/// The longest the loop sleeps without looking at the stop flag.
const POLL_NS: Time = 20 * NS_PER_MS;
/// Random streams of the run's seed for the first tick of each pCPU (`TICK_PHASE_STREAM + p`):
/// drawn as the simulator draws them (`sim/clocks.rs`: uniform in one period), from streams
/// of their own.
const TICK_PHASE_STREAM: u64 = 7 << 40;

/// Shared between a run and its caller: the caller raises `stop` (Ctrl-C); the run publishes
/// where it is, for progress reports.
#[derive(Debug, Default)]
pub struct Control {
    pub stop: AtomicBool,
    /// The repetition under way, from 0.
    pub rep: AtomicU32,
    /// Repetitions in all.
    pub reps: AtomicU32,
    /// How far the repetition under way has got, in ns of its clock.
    pub elapsed_ns: AtomicU64,
    /// When each repetition ends at the latest (its deadline), ns.
    pub end_ns: AtomicU64,
}

/// The nice value the scheduler's thread asks for: a larger CFS/EEVDF weight, so that when
/// its timer fires it preempts the vCPU thread on that host CPU sooner. Not a real-time
/// class: a SCHED_FIFO scheduler waiting for a vCPU thread pinned to its own CPU would starve
/// it, and threads it spawns would inherit it (a pitfall the prototype met).
const SCHEDULER_NICE: i32 = -10;

/// Sets up the calling thread to be the scheduler: nice [`SCHEDULER_NICE`] when permitted
/// (after the backend built its vCPU threads, so they do not inherit it) and a timer slack
/// of 1 ns (Linux's default 50 µs would make every deadline that much later). Returns the
/// nice value in effect.
pub fn prepare_scheduler_thread() -> i32 {
    // SAFETY: plain system calls on the calling thread (`gettid` names it for setpriority).
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, SCHEDULER_NICE);
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, tid)
    }
}

/// How one run goes: where its pCPUs are and when it ends.
pub struct RunPlan<'a> {
    /// The host CPU of each pCPU.
    pub host_cpus: &'a [usize],
    /// The run ends at this time of its clock whatever else happens (the wall-clock deadline).
    pub end_ns: Time,
    /// `AllDone`: also as soon as every VM whose workload ends has finished.
    pub until: Until,
}

/// One run's results.
pub struct RealRun {
    pub metrics: RunMetrics,
    /// How late the loop handled each deadline (slice end, tick, policy timer), in ns.
    pub late_ns: Histogram,
    /// Per VM, in scenario order: the seconds its guest counted itself executing (compute
    /// and spin cycles, gaps of descheduling left out). Against its `cpu_s`, the time the
    /// scheduler gave it, the difference is what stops, starts and the host took.
    pub guest_executed_s: Vec<f64>,
    /// Messages sent to another VM: each an exit of its sender (`messages`).
    pub sends_between_vms: u64,
}

/// Runs `scenario` once on `backend`, whose vCPUs are those of `vms` (built for this run,
/// with `seed`), recording it into `trace` if given (finished when the run ends). Every vCPU the runner started is stopped again before it returns, error or
/// not; dropping the backend is the caller's cleanup.
pub fn run<B: Backend>(
    scenario: &Scenario,
    vms: &[VmSpec],
    seed: u64,
    backend: &mut B,
    plan: &RunPlan,
    control: &Control,
    trace: Option<Trace>,
) -> Result<RealRun, RealError> {
    let policy = scenario.policy.build()?;
    let mut runner = Runner::new(scenario, vms, seed, policy, backend, plan);
    if let Some(trace) = trace {
        runner.world.attach_trace(trace);
    }
    let outcome = runner.run(control);
    let stopped = runner.stop_all();
    let traced = runner.world.take_trace().map(Trace::finish);
    let end = outcome?;
    stopped?;
    if let Some(Err(e)) = traced {
        return Err(RealError::Scenario(format!("--trace: {e}")));
    }
    Ok(runner.finish(end))
}

struct Runner<'a, B: Backend> {
    world: RealWorld,
    policy: Box<dyn Policy>,
    backend: &'a mut B,
    plan: &'a RunPlan<'a>,
    /// The host CPU each vCPU was started on and not stopped since.
    started_on: Vec<Option<usize>>,
    /// vCPUs whose guest program ended.
    exited: Vec<bool>,
    /// vCPUs blocked because their guest halted (`guest_events`), and when each sleeping
    /// one wakes.
    halted: Vec<bool>,
    sleep_until: Vec<Option<Time>>,
    /// Messages between VMs on their way (`messages`).
    network: messages::Network,
    /// vCPUs whose VM has not started its workload yet.
    unstarted: Vec<bool>,
    /// The order in which unstarted vCPUs halted, for the wakes at their VM's start.
    start_order: starts::StartOrder,
    /// When each VM starts its workload, and whether it has.
    starts: Vec<(Time, bool)>,
    vm_of: Vec<usize>,
    vms: Vec<VmTally>,
    /// vCPUs of each VM still running their program.
    alive: Vec<usize>,
    slice_end: Vec<Option<Time>>,
    next_tick: Vec<Option<Time>>,
    tick_period: Option<Time>,
    ticks_drift: bool,
    context_switches: u64,
    migrations: u64,
    sched_invocations: u64,
    events: u64,
    late_ns: Histogram,
}

impl<'a, B: Backend> Runner<'a, B> {
    fn new(
        scenario: &Scenario,
        vms: &[VmSpec],
        seed: u64,
        policy: Box<dyn Policy>,
        backend: &'a mut B,
        plan: &'a RunPlan<'a>,
    ) -> Self {
        let world = RealWorld::new(scenario, seed);
        let starts: Vec<Time> = scenario.build(seed).workload_starts();
        let vm_of: Vec<usize> =
            vms.iter().enumerate().flat_map(|(d, vm)| std::iter::repeat_n(d, vm.guest.vcpus)).collect();
        let n_pcpus = scenario.host.pcpus;
        let tick_period = policy.tick_period_ns();
        let ticks_drift = scenario.host.clocks == Clocks::Independent && !policy.ticks_aligned();
        let streams = RngStreams::new(seed);
        let next_tick = (0..n_pcpus)
            .map(|p| {
                tick_period.map(|period| {
                    if ticks_drift {
                        streams.stream(TICK_PHASE_STREAM + p as u64).gen_range(0..period.max(1))
                    } else {
                        period
                    }
                })
            })
            .collect();
        Runner {
            world,
            policy,
            backend,
            plan,
            started_on: vec![None; vm_of.len()],
            exited: vec![false; vm_of.len()],
            halted: vec![false; vm_of.len()],
            sleep_until: vec![None; vm_of.len()],
            network: messages::Network::new(scenario, vms),
            unstarted: vm_of.iter().map(|&d| starts[d] > 0).collect(),
            start_order: starts::StartOrder::new(vm_of.len(), n_pcpus),
            starts: starts.iter().map(|&at| (at, at == 0)).collect(),
            vms: vms
                .iter()
                .zip(&scenario.vms)
                .zip(&starts)
                .map(|((vm, spec), &started_at)| VmTally {
                    workload: spec.workload_name(),
                    finite: vm.guest.finite,
                    started_at,
                    finished_at: None,
                    spin_s: 0.0,
                    lock_holder_preemptions: 0,
                    lock_waiter_preemptions: 0,
                    ple_exits: 0,
                    co_launches: 0,
                    messages_received: 0,
                    virtual_cluster: spec.job.clone(),
                })
                .collect(),
            alive: vms.iter().map(|vm| vm.guest.vcpus).collect(),
            vm_of,
            slice_end: vec![None; n_pcpus],
            next_tick,
            tick_period,
            ticks_drift,
            context_switches: 0,
            migrations: 0,
            sched_invocations: 0,
            events: 0,
            late_ns: Histogram::new(),
        }
    }

    /// The loop; returns the run's end time.
    fn run(&mut self, control: &Control) -> Result<Time, RealError> {
        self.world.start_clock();
        self.world.with_cx(None, |cx| self.policy.init(cx));
        for v in 0..self.exited.len() {
            self.world.with_cx(None, |cx| self.policy.vcpu_insert(cx, v));
        }
        self.check_failure()?;
        for p in 0..self.slice_end.len() {
            self.world.mark(p);
        }
        loop {
            self.step()?;
            let now = self.world.now();
            control.elapsed_ns.store(now, Ordering::Relaxed);
            let all_done =
                self.vms.iter().any(|t| t.finite) && self.vms.iter().all(|t| !t.finite || t.finished_at.is_some());
            if (self.plan.until == Until::AllDone && all_done) || now >= self.plan.end_ns {
                return Ok(now);
            }
            if control.stop.load(Ordering::Relaxed) {
                return Err(RealError::Interrupted);
            }
            let wake_at = [self.world.next_timer(), self.next_deadline(), Some(self.plan.end_ns)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(self.plan.end_ns)
                .min(now + POLL_NS);
            if let Some(event) = self.backend.next_event(self.world.instant_of(wake_at)) {
                self.events += 1;
                self.world.tick_clock();
                match event {
                    BackendEvent::Finished { vcpu } => self.finished(vcpu)?,
                    BackendEvent::PauseLoopExit { vcpu } => self.pause_loop_exit(vcpu)?,
                    BackendEvent::Halted { vcpu } => self.halted(vcpu)?,
                    BackendEvent::Wake { vcpu } => self.wake_released(vcpu)?,
                    BackendEvent::Send { vcpu, to, bytes } => self.send(vcpu, to, bytes)?,
                    BackendEvent::Failed { vcpu, message } => {
                        return Err(RealError::Backend(format!("real vCPUs failed: vCPU {vcpu}: {message}")))
                    }
                }
            }
        }
    }

    /// The earliest slice end, tick, VM start, end of a guest's sleep or message arrival.
    fn next_deadline(&self) -> Option<Time> {
        let start = self.starts.iter().filter(|(_, done)| !done).map(|&(at, _)| at).min();
        let times = self.slice_end.iter().chain(&self.next_tick).chain(&self.sleep_until);
        times.flatten().copied().chain(start).chain(self.network.next_arrival()).min()
    }

    /// Everything due at the clock's current instant, in the simulator's order.
    fn step(&mut self) -> Result<(), RealError> {
        let now = self.world.tick_clock();
        let backend = &*self.backend;
        self.world.observe_guests(|v| (backend.activity(v), backend.in_kernel(v)));
        self.start_due_vms(now)?;
        self.wake_sleepers(now)?;
        self.deliver_due(now)?;
        while let Some((at, id)) = self.world.take_due_timer() {
            self.late(at);
            self.world.with_cx(None, |cx| self.policy.timer(cx, id));
            self.check_failure()?;
        }
        for p in 0..self.next_tick.len() {
            let Some(at) = self.next_tick[p].filter(|&at| at <= now) else { continue };
            self.late(at);
            self.world.with_cx(Some(p), |cx| self.policy.tick(cx, p));
            self.check_failure()?;
            let period = self.tick_period.expect("ticks have a period");
            // Xen re-arms each pCPU's ticker from NOW() (`csched_tick`), so drifting ticks
            // count from when this one fired; Linux keeps its ticks on the period's grid.
            self.next_tick[p] = Some(if self.ticks_drift { now } else { at } + period);
        }
        for p in 0..self.slice_end.len() {
            if let Some(at) = self.slice_end[p].filter(|&at| at <= now) {
                self.late(at);
                self.slice_end[p] = None;
                self.world.mark(p);
            }
        }
        while let Some(p) = self.world.take_resched() {
            self.schedule(p)?;
        }
        if cfg!(debug_assertions) {
            self.check()?;
        }
        Ok(())
    }

    fn late(&mut self, due: Time) {
        self.events += 1;
        self.late_ns.record(self.world.now().saturating_sub(due));
    }

    fn check_failure(&self) -> Result<(), RealError> {
        match self.world.failure() {
            Some(message) => Err(RealError::Policy(message.to_string())),
            None => Ok(()),
        }
    }

    /// Asks the policy what `p` runs next and makes it so.
    fn schedule(&mut self, p: PcpuId) -> Result<(), RealError> {
        let mut prev = self.world.curr(p);
        loop {
            let decision = self.world.with_cx(Some(p), |cx| self.policy.pick_next(cx, p, prev));
            self.world.unmark(p);
            self.sched_invocations += 1;
            self.check_failure()?;
            self.validate(p, prev, decision)?;
            let now = self.world.now();
            self.slice_end[p] = decision.slice_ns.map(|slice| now + slice.max(1));
            if prev == decision.next {
                return Ok(());
            }
            if let Some(u) = prev {
                self.take_off(p, u)?;
            }
            let Some(v) = decision.next else { return Ok(()) };
            self.context_switches += 1;
            if self.world.last_pcpu(v).is_some_and(|q| q != p) {
                self.migrations += 1;
            }
            self.world.set_curr(p, Some(v));
            self.world.set_state(v, VcpuState::Running(p));
            if !self.unstarted[v] && !self.has_exited(v) {
                let cpu = self.plan.host_cpus[p];
                self.backend.start(v, cpu)?;
                self.started_on[v] = Some(cpu);
                debug_assert_eq!(
                    self.started_on.iter().filter(|&&c| c == Some(cpu)).count(),
                    1,
                    "host CPU {cpu} was given two vCPUs"
                );
                return Ok(());
            }
            // Its VM has not started, or its guest ended while it was stopped: it halts as soon
            // as it runs.
            if self.unstarted[v] {
                self.start_order.halted(v, p, now);
            }
            self.block(p, v);
            prev = Some(v);
        }
    }

    /// The policy's decision is usable: the vCPU exists and is runnable, or is `prev`.
    fn validate(&self, p: PcpuId, prev: Option<VcpuId>, d: Decision) -> Result<(), RealError> {
        let Some(v) = d.next else { return Ok(()) };
        let now = self.world.now();
        if v >= self.exited.len() {
            return Err(RealError::Policy(format!(
                "unusable decision: pCPU {p} was given vCPU {v}, which does not exist"
            )));
        }
        let state = self.world.state(v);
        let ok = match state {
            VcpuState::Runnable => true,
            VcpuState::Running(q) => q == p && prev == Some(v),
            VcpuState::Blocked | VcpuState::Offline => false,
        };
        if !ok {
            return Err(RealError::Policy(format!(
                "unusable decision at t={now} ns: pCPU {p} was given vCPU {v} in state {state:?}"
            )));
        }
        Ok(())
    }

    /// Takes `u` off `p`: stops it, and if it was preempted (not blocked) counts what its
    /// guest was doing, read once it no longer executes.
    fn take_off(&mut self, p: PcpuId, u: VcpuId) -> Result<(), RealError> {
        if self.started_on[u].take().is_some() {
            self.backend.stop(u)?;
        }
        if let VcpuState::Running(_) = self.world.state(u) {
            let tally = &mut self.vms[self.vm_of[u]];
            match self.backend.activity(u) {
                GuestActivity::LockHeld => tally.lock_holder_preemptions += 1,
                GuestActivity::LockWait => tally.lock_waiter_preemptions += 1,
                _ => {}
            }
            self.world.set_state(u, VcpuState::Runnable);
        }
        self.world.set_curr(p, None);
        Ok(())
    }

    /// The runner's invariants, then the policy's (`Policy::check`): each pCPU runs at most
    /// one vCPU, in agreement with that vCPU's state, and no two started vCPUs share a host CPU.
    fn check(&mut self) -> Result<(), RealError> {
        let now = self.world.now();
        let broken = |what: String| Err(RealError::Policy(format!("real-vCPU invariant broken at t={now} ns: {what}")));
        for p in 0..self.slice_end.len() {
            if let Some(v) = self.world.curr(p) {
                let state = self.world.state(v);
                if state != VcpuState::Running(p) {
                    return broken(format!("pCPU {p} runs vCPU {v}, which is {state:?}"));
                }
            }
        }
        for (v, cpu) in self.started_on.iter().enumerate() {
            let Some(cpu) = *cpu else { continue };
            if self.started_on.iter().filter(|&&c| c == Some(cpu)).count() > 1 {
                return broken(format!("host CPU {cpu} executes vCPU {v} and another"));
            }
            let state = self.world.state(v);
            if !matches!(state, VcpuState::Running(p) if self.plan.host_cpus[p] == cpu) {
                return broken(format!("vCPU {v} executes on host CPU {cpu} but is {state:?}"));
            }
        }
        let result = self.world.with_cx(None, |cx| self.policy.check(cx));
        result.map_err(|e| RealError::Policy(format!("policy invariant broken at t={now} ns: {e}")))
    }

    /// Stops every vCPU still started (at the end of a run, or on its failure).
    fn stop_all(&mut self) -> Result<(), RealError> {
        let mut first_error = Ok(());
        for v in 0..self.started_on.len() {
            if self.started_on[v].take().is_some() {
                if let Err(e) = self.backend.stop(v) {
                    first_error = first_error.and(Err(e.into()));
                }
            }
        }
        first_error
    }

    /// Closes the books at `end` and builds the run's figures.
    fn finish(mut self, end: Time) -> RealRun {
        let states: Vec<VcpuState> = (0..self.exited.len()).map(|v| self.world.state(v)).collect();
        let busy: Vec<bool> = (0..self.slice_end.len()).map(|p| self.world.curr(p).is_some()).collect();
        self.world.books.close(end, &states, &busy);
        let tsc_hz = self.backend.tsc_hz().max(1) as f64;
        let mut guest_executed_s = vec![0.0; self.vms.len()];
        for v in 0..self.exited.len() {
            let counters = self.backend.counters(v);
            self.vms[self.vm_of[v]].spin_s += counters.spin_cycles as f64 / tsc_hz;
            self.vms[self.vm_of[v]].ple_exits += counters.ple_exits;
            self.vms[self.vm_of[v]].messages_received += counters.messages_received;
            guest_executed_s[self.vm_of[v]] += (counters.spin_cycles + counters.compute_cycles) as f64 / tsc_hz;
        }
        for (tally, &launches) in self.vms.iter_mut().zip(&self.world.co_launches) {
            tally.co_launches = launches;
        }
        let host = HostTally {
            context_switches: self.context_switches,
            migrations: self.migrations,
            sched_invocations: self.sched_invocations,
            ipis: self.world.ipis,
            co_ipis: self.world.co_ipis,
            events: self.events,
            policy_counters: self.world.counters().iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        };
        let metrics = self.world.books.metrics(end, self.world.domains(), &self.vms, host);
        RealRun { metrics, late_ns: self.late_ns, guest_executed_s, sends_between_vms: self.network.sent() }
    }
}
