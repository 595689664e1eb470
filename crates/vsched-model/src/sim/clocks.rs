//! Out-of-lockstep clocks: when each pCPU ticks, how late timers fire, and
//! when each VM starts its workload.
//!
//! # Why
//! A simulator that starts every pCPU at t = 0 and ticks them together keeps identical
//! CPU-bound vCPUs aligned for ever: every pCPU switches at the same instants, so the vCPUs
//! of one VM placed on different pCPUs run at the same time and a per-vCPU scheduler such as
//! Credit behaves like an accidental gang scheduler (no lock-holder preemption at all). Real
//! pCPUs are never in step:
//! - **Xen** arms each pCPU's ticker from `NOW()` at boot (`csched_start_tickers`, 4.0.1
//!   `sched_credit.c`; 3.0.4 starts its `t_timer`s with `smp_call_function`) and re-arms it
//!   from `NOW()` at every tick (`csched_tick`), and every timer fires up to `timer_slop`
//!   (50 µs, `xen/common/timer.c`) off its expiry. So phases random-walk apart; after minutes of uptime they are spread
//!   uniformly over the tick period, which is what we draw.
//! - **Linux** starts every CPU's tick on the same jiffy boundary (`tick_setup_sched_timer`,
//!   `kernel/time/tick-sched.c`, unless `skew_tick=1`) and forwards it without drift, so
//!   ticks stay aligned (`Policy::ticks_aligned`); scheduling decisions are still not.
//! - VMs are started by hand or by scripts, never in the same nanosecond.
//!
//! # What we draw (each from its own random stream of the run's seed)
//! - Every pCPU's tick phase: its first tick falls at an offset uniform in `[0, period)`
//!   (unless the policy's ticks are aligned). The pCPUs have been up long before the run
//!   starts, so none of them idles at the start waiting to come online.
//! - Every timer (slice end, tick, policy timer) fires late by a uniform draw in
//!   `[0, slop)`, the hypervisor's timer slop (`Policy::timer_slop_ns`, or `host.timer_slop_us`).
//!   Xen's slop batches timers rather than delaying each at random; a uniform delay is our
//!   approximation of its effect here: instants that were equal drift apart.
//! - Every VM present from the start (but the driver domain) starts its workload at an offset
//!   uniform in `[0, host.workload_start_spread)`, the VMs of a virtual cluster together;
//!   until then its vCPUs are idle (blocked). Its completion time counts from its start. Every pCPU still decides at t = 0 (and
//!   finds the vCPUs idle), so the pCPUs' first real decisions come when the workloads
//!   start and wake them: at seeded instants.
//!
//! `Clocks::Lockstep` turns all of this off (every pCPU at 0, exact timers, workloads at 0):
//! hand-checked traces need it, and comparing the two shows what lockstep does to a result.
//! Hosts of a cluster draw their own phases (see `Simulation::align_host_clocks`).

use rand::Rng;
use vsched_engine::{RngStreams, Time};

use super::config::{Clocks, HostConfig};
use super::events::Ev;
use super::state::Core;
use super::Simulation;
use crate::policy::Policy;

/// Random streams, above the policies' (`1 << 40 + h`) and the hosts' phases (`2 << 40`).
const TICK_PHASE_STREAM: u64 = 3 << 40;
const TIMER_SLOP_STREAM: u64 = 4 << 40;
const WORKLOAD_START_STREAM: u64 = 5 << 40;

/// Each of `n` pCPUs' (global ids) first tick, a draw in `[0, period)` for ticks that
/// drift (none without a tick, or in lockstep).
pub(super) fn tick_phases(streams: &RngStreams, host: &HostConfig, tick: Option<Time>, n: usize) -> Vec<Time> {
    match tick {
        Some(period) if host.clocks == Clocks::Independent => {
            (0..n).map(|p| streams.stream(TICK_PHASE_STREAM + p as u64).gen_range(0..period.max(1))).collect()
        }
        _ => vec![0; n],
    }
}

/// When the VMs of job `job` (a VM alone, or a virtual cluster's VMs, which start together
/// as `mpirun` starts its ranks) present from the start begin their workload; 0 in lockstep.
pub(super) fn workload_start(streams: &RngStreams, host: &HostConfig, job: usize) -> Time {
    if host.clocks == Clocks::Lockstep || host.workload_start_spread_ns == 0 {
        return 0;
    }
    streams.stream(WORKLOAD_START_STREAM + job as u64).gen_range(0..host.workload_start_spread_ns)
}

/// Host `h`'s timer-slop stream.
pub(super) fn slop_stream(streams: &RngStreams, h: usize) -> vsched_engine::StreamRng {
    streams.stream(TIMER_SLOP_STREAM + h as u64)
}

/// Whether `policy`'s ticks drift apart on `host` (each re-armed from the instant it fired,
/// as Xen's are) rather than keep their exact period.
pub(super) fn ticks_drift(host: &HostConfig, policy: &dyn Policy) -> bool {
    host.clocks == Clocks::Independent && !policy.ticks_aligned()
}

impl Core {
    /// How late a timer of host `h` armed now fires.
    pub(super) fn timer_late(&mut self, h: usize) -> Time {
        let host = &mut self.hosts[h];
        if host.timer_slop_ns == 0 {
            return 0;
        }
        host.timer_rng.gen_range(0..host.timer_slop_ns)
    }
}

impl Simulation {
    /// Time 0 for the clocks: every pCPU's first decision (now) and first tick, and each
    /// host's timer slop (the scenario's, else its policy's; none in lockstep).
    pub(super) fn start_clocks(&mut self) {
        for (h, policy) in self.policies.iter().enumerate() {
            let core = &mut self.core;
            let lockstep = core.host.clocks == Clocks::Lockstep;
            core.hosts[h].timer_slop_ns =
                if lockstep { 0 } else { core.host.timer_slop_ns.unwrap_or_else(|| policy.timer_slop_ns()) };
            let drift = ticks_drift(&core.host, policy.as_ref());
            let pcpus = core.hosts[h].pcpus.clone();
            if let Some(period) = policy.tick_period_ns() {
                let lag = (period as f64 * core.hosts[h].clock_phase) as Time;
                for p in pcpus.clone() {
                    let first = if drift { core.pcpus[p].tick_phase } else { lag + period };
                    core.post(first, Ev::Tick { p });
                }
            }
            for p in pcpus {
                core.request_resched(p, 0);
            }
        }
    }
}
