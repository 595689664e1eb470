//! The stall watchdog: a run in which a runnable vCPU goes unrun for longer than a bound ends
//! with a policy error naming the vCPU and the time, as sched_ext ejects a BPF scheduler that
//! leaves a runnable task unscheduled for `scx_watchdog_timeout` (kernel/sched/ext.c:
//! `check_rq_for_timeouts` compares each runnable task's `runnable_at` with the timeout,
//! which defaults to `SCX_WATCHDOG_MAX_TIMEOUT` = 30 * HZ, 30 s, when the scheduler sets no
//! `timeout_ms`).
//!
//! A policy that drops a vCPU (a `pick_next` that forgets `prev`) otherwise leaves its VM
//! runnable and unrun for the rest of the run, and the only symptom is a workload that "did
//! not finish". The bound is the policy's (`Policy::stall_timeout_ns`, as a sched_ext
//! scheduler sets `ops.timeout_ms`), 30 s unless it says otherwise: a proportional-share
//! scheduler serves every runnable vCPU within a few of its accounting periods (Credit's
//! 30 ms, CFS's latency target). `cosched` says none: strict gang scheduling can hold a VM as
//! wide as the host for the whole run, the starvation the co-scheduling papers measure. The
//! scenario's `run.stall_timeout_s` overrides the policy's.
//!
//! The watchdog adds no event (a run's events and results are those of a run without it): it
//! looks after the event that reaches its next deadline, the earliest instant at which some
//! vCPU runnable at the last look could have waited the bound, and at the end of the run.
//! Between looks a vCPU's wait is `now - state_since` while it stays `Runnable`.

use vsched_engine::{ns_to_secs, Time};

use super::{Core, RunError};
use crate::domain::VcpuState;

pub(super) struct StallWatchdog {
    /// `None`: off.
    timeout: Option<Time>,
    /// The next instant at which a vCPU could have waited `timeout`.
    next_look: Time,
}

impl StallWatchdog {
    pub(super) fn new(timeout: Option<Time>) -> Self {
        StallWatchdog { timeout, next_look: timeout.unwrap_or(Time::MAX) }
    }

    /// Whether it is time to look (one comparison per event).
    #[inline]
    pub(super) fn due(&self, now: Time) -> bool {
        now >= self.next_look
    }

    /// Looks at every vCPU at `now`: the error if one has been runnable and unrun for the
    /// bound, else the next instant to look.
    pub(super) fn look(&mut self, core: &Core, now: Time) -> Result<(), RunError> {
        let Some(timeout) = self.timeout else { return Ok(()) };
        let mut next = now.saturating_add(timeout);
        for (v, vc) in core.vcpus.iter().enumerate() {
            if vc.state != VcpuState::Runnable {
                continue;
            }
            let deadline = vc.state_since.saturating_add(timeout);
            if deadline <= now {
                return Err(stalled(core, v, now - vc.state_since, timeout, now));
            }
            next = next.min(deadline);
        }
        self.next_look = next;
        Ok(())
    }
}

/// The error naming vCPU `v` (global id), runnable and unrun for `waited` ns at `now`.
fn stalled(core: &Core, v: usize, waited: Time, timeout: Time, now: Time) -> RunError {
    let vc = &core.vcpus[v];
    let dom = &core.doms[vc.dom];
    let host = if core.hosts.len() > 1 { format!(" on host {}", vc.host) } else { String::new() };
    let local = v - core.hosts[vc.host].vcpus.start;
    RunError::Policy(format!(
        "stall: vCPU {local} (VM {:?} vCPU {}{host}) has been runnable without running for {} s at t = {} s; \
         the stall watchdog ends a run after {} s (run.stall_timeout_s): the policy lost a runnable vCPU \
         (a pick_next that drops prev, a wake that queues nothing)",
        dom.info.name,
        vc.index,
        ns_to_secs(waited),
        ns_to_secs(now),
        ns_to_secs(timeout),
    ))
}
