//! The event loop: what can happen at an instant, in which order, and how each event reaches
//! the guest interpreter, the dispatcher or a policy callback.

use vsched_engine::{Ticket, Time};

use super::stall::StallWatchdog;
use super::state::Core;
use super::watchdog::{Culprit, Watchdog};
use super::world::with_cx;
use super::{RunError, Simulation, Until};
use crate::domain::{VcpuState, VmType};
use crate::ids::{DomId, PcpuId, ThreadId, VcpuId};
use crate::metrics::RunMetrics;

/// Everything that can happen at an instant.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ev {
    Guest {
        v: VcpuId,
        gen: u32,
    },
    /// A blocked guest thread's wake-up (I/O done, a kick, an interrupt).
    Wake {
        t: ThreadId,
    },
    Timer {
        host: u32,
        id: u64,
    },
    Tick {
        p: PcpuId,
    },
    SliceEnd {
        p: PcpuId,
    },
    Resched {
        p: PcpuId,
        gen: u32,
    },
    /// The scenario changes a VM's type (seed 003 §4.4, seed 004 §V-B: `xm sched-... -t`).
    SetType {
        d: DomId,
        ty: VmType,
    },
    /// An IPI reaches a running vCPU (stale if it was descheduled since: `gen` is its
    /// `irq_gen`).
    Irq {
        v: VcpuId,
        gen: u32,
    },
    /// The scenario creates or destroys a VM.
    Create {
        d: DomId,
    },
    Destroy {
        d: DomId,
    },
    /// Message `m` reaches the end of its current network stage.
    Net {
        m: u32,
    },
    /// The disk finished request `r` (`disk`).
    Disk {
        r: u32,
    },
    /// A client's request for thread `t` reached the NIC of a host with a driver domain
    /// (`client`).
    Client {
        t: ThreadId,
    },
    /// vCPU `v`'s guest-kernel timer: a tick if it runs, a wake-up if it is halted
    /// (`guest_kernel`; stale if `gen` is not its `tick_gen`). Kept in the queue's slot `v`
    /// (`Core::post_guest_timer`), where arming it again replaces it.
    GuestTimer {
        v: VcpuId,
        gen: u32,
    },
}

impl Ev {
    /// Tie-break at one instant (see the `sim` module notes: guest progress first,
    /// reschedules last, so a decision at t sees every change made at t).
    pub(super) fn priority(&self) -> u8 {
        match self {
            Ev::Guest { .. } | Ev::Irq { .. } => 0,
            Ev::Wake { .. } | Ev::Net { .. } | Ev::Disk { .. } | Ev::Client { .. } | Ev::GuestTimer { .. } => 1,
            Ev::Timer { .. } | Ev::SetType { .. } | Ev::Create { .. } | Ev::Destroy { .. } => 2,
            Ev::Tick { .. } => 3,
            Ev::SliceEnd { .. } => 4,
            Ev::Resched { .. } => 5,
        }
    }
}

impl Core {
    pub(super) fn now(&self) -> Time {
        self.queue.now()
    }

    /// Queues `ev` at `at`, with its tie-break priority.
    pub(super) fn post(&mut self, at: Time, ev: Ev) -> Ticket {
        let priority = ev.priority();
        self.queue.schedule(at, priority, ev.into())
    }

    /// Makes `ev` at `at` vCPU `v`'s one pending guest timer, replacing the one it had. A
    /// vCPU re-arms its timer at every switch-in and drops it at every switch-out, so in
    /// the queue's slots (`vsched_engine::EventQueue::schedule_in_slot`) a dropped timer
    /// leaves nothing to pop and skip.
    pub(super) fn post_guest_timer(&mut self, v: VcpuId, at: Time, ev: Ev) {
        let priority = ev.priority();
        self.queue.schedule_in_slot(2 * v, at, priority, ev.into());
    }

    /// Makes a slice end at `at` pCPU `p`'s one pending slice-end event, replacing the one it
    /// had (`arm_slice_timer`). A slice timer is armed again whenever a shorter slice starts,
    /// and each one it replaced would be popped and skipped when it came due: queued
    /// apart, they were 80 % of a 256-host cluster's pending events (docs/performance.md,
    /// "Scale"). Guest timers take the even slots, slice ends the odd ones.
    pub(super) fn post_slice_end(&mut self, p: PcpuId, at: Time) {
        let ev = Ev::SliceEnd { p };
        self.queue.schedule_in_slot(2 * p + 1, at, ev.priority(), ev.into());
    }

    /// Queues the guest events armed during the instant that just ended whose vCPU was not
    /// re-armed or descheduled since (`PendingGuestEvent`); the others would only have been
    /// popped and skipped.
    pub(super) fn queue_guest_events(&mut self) {
        for i in 0..self.guest_events_due.len() {
            let due = self.guest_events_due[i];
            if self.vcpus[due.v].gen == due.gen {
                let ev = Ev::Guest { v: due.v, gen: due.gen };
                self.queue.schedule_reserved(due.ticket, due.at, ev.priority(), ev.into());
            }
        }
        self.guest_events_due.clear();
    }
}

impl Simulation {
    /// Runs until the horizon (or until every finite workload finished, with `AllDone`).
    /// `progress(now)` is called every few thousand events; returning `false` stops the run
    /// ([`RunError::Interrupted`]). Returns [`RunError::Policy`] if a policy made an unusable
    /// decision, broke an invariant or stopped simulated time, or a guest program misbehaved
    /// (a message to a rank outside its job); [`RunError::Scenario`] if the scenario's guests
    /// stopped simulated time (`watchdog`).
    pub fn run(
        &mut self,
        horizon: Time,
        until: Until,
        progress: &mut dyn FnMut(Time) -> bool,
    ) -> Result<RunMetrics, RunError> {
        self.start();
        let core = &self.core;
        let mut watchdog = Watchdog::new(core.vcpus.len() + core.pcpus.len() + core.threads.len());
        let mut stall = StallWatchdog::new(self.stall_timeout);
        let mut end = horizon;
        loop {
            let next = self.core.queue.peek_time();
            // The instant is over when the next event is later (or there is none): only then
            // are the guest events armed during it for later queued.
            let instant_over = next.is_none_or(|t| t > self.core.now());
            if instant_over && !self.core.guest_events_due.is_empty() {
                self.core.queue_guest_events();
                continue;
            }
            let Some(t) = next else {
                break;
            };
            if t > horizon {
                break;
            }
            let (now, packed) = self.core.queue.pop().expect("peeked");
            let ev = Ev::from(packed);
            if watchdog.tick(now) {
                if let Some(stall) = watchdog.blame(self.core.culprit(&ev)) {
                    return Err(self.core.stall_error(stall, Some(watchdog.events())));
                }
            }
            #[cfg(feature = "window-census")]
            let census_host = self.census.is_some().then(|| (ev.priority(), self.core.event_host(&ev)));
            let handled = self.handle(ev);
            if handled {
                self.core.events += 1;
            }
            #[cfg(feature = "window-census")]
            if let (Some(census), Some((priority, (host, crosses)))) = (&mut self.census, census_host) {
                census.record(now, priority, host, handled, crosses);
            }
            self.drain();
            self.stop_polls_beside_others();
            if let Some(e) = self.core.error.take() {
                return Err(e);
            }
            if let Some(d) = self.core.stalled.take() {
                return Err(self.core.stall_error(Culprit::Guest(d), None));
            }
            if self.checks {
                self.check(now)?;
            }
            if stall.due(now) {
                stall.look(&self.core, now)?;
            }
            if until == Until::AllDone && self.core.unfinished == 0 && self.core.doms.iter().any(|d| d.finite) {
                end = now;
                break;
            }
            if self.core.events.is_multiple_of(8192) && !progress(now) {
                return Err(RunError::Interrupted);
            }
        }
        // A policy may fail before any event (in `init` or `vcpu_insert`) of a run that has none.
        if let Some(e) = self.core.error.take() {
            return Err(e);
        }
        // A vCPU left waiting since the last event has waited until the end.
        stall.look(&self.core, end)?;
        let mut metrics = self.core.finish(end);
        self.add_policy_vm_metrics(&mut metrics);
        Ok(metrics)
    }

    /// Each policy's own figures for the VMs of its host (`Policy::vm_metrics`).
    fn add_policy_vm_metrics(&mut self, metrics: &mut crate::metrics::RunMetrics) {
        for (h, policy) in self.policies.iter().enumerate() {
            let doms = self.core.hosts[h].doms.clone();
            for d in doms.clone() {
                let figures = with_cx(&mut self.core, h, None, |cx| policy.vm_metrics(cx, d - doms.start));
                metrics.vms[d].policy_metrics.extend(figures.into_iter().map(|(name, x)| (name.to_string(), x)));
            }
        }
    }

    /// The simulator's invariants, then each policy's `check`.
    fn check(&mut self, now: Time) -> Result<(), RunError> {
        self.core
            .check_invariants()
            .map_err(|e| RunError::Policy(format!("simulator invariant broken at t={now} ns: {e}")))?;
        for (h, policy) in self.policies.iter().enumerate() {
            if let Err(e) = with_cx(&mut self.core, h, None, |cx| policy.check(cx)) {
                return Err(RunError::Policy(format!("policy invariant broken at t={now} ns on host {h}: {e}")));
            }
        }
        Ok(())
    }

    /// Time 0: each host's policy is initialized and given its vCPUs, then every pCPU's
    /// first decision and tick are armed (`clocks`).
    fn start(&mut self) {
        for (h, policy) in self.policies.iter_mut().enumerate() {
            let core = &mut self.core;
            with_cx(core, h, None, |cx| policy.init(cx));
            let vcpus = core.hosts[h].vcpus.clone();
            for v in vcpus.clone() {
                if core.vcpus[v].state != VcpuState::Offline {
                    with_cx(core, h, None, |cx| policy.vcpu_insert(cx, v - vcpus.start));
                }
            }
        }
        self.core.trace_start();
        self.start_clocks();
    }

    /// Handles one event; false if it was stale (cancelled by a generation bump).
    fn handle(&mut self, ev: Ev) -> bool {
        let core = &mut self.core;
        match ev {
            Ev::Guest { v, gen } => {
                if core.vcpus[v].gen != gen {
                    return false;
                }
                core.guest_event(v);
            }
            Ev::Wake { t } => {
                let Some(v) = core.wake(t) else {
                    return false; // no vCPU woke: stale, or its VM was destroyed while it waited
                };
                let h = core.vcpus[v].host;
                let local = v - core.hosts[h].vcpus.start;
                with_cx(core, h, None, |cx| self.policies[h].wake(cx, local));
            }
            Ev::Timer { host, id } => {
                let h = host as usize;
                with_cx(core, h, None, |cx| self.policies[h].timer(cx, id));
            }
            Ev::SetType { d, ty } => self.set_type(d, ty),
            Ev::Tick { p } => {
                let h = core.pcpus[p].host;
                let local = p - core.hosts[h].pcpus.start;
                // The tick interrupts what runs before the scheduler's part of it runs.
                core.host_tick(p);
                with_cx(core, h, Some(p), |cx| self.policies[h].tick(cx, local));
                if let Some(period) = self.policies[h].tick_period_ns() {
                    let drifts = super::clocks::ticks_drift(&core.host, self.policies[h].as_ref());
                    let late = if drifts { core.timer_late(h) } else { 0 };
                    let at = core.queue.now() + period + late;
                    core.post(at, Ev::Tick { p });
                }
            }
            Ev::SliceEnd { p } => return self.slice_end(p),
            Ev::Resched { p, gen } => {
                if core.pcpus[p].resched_gen != gen {
                    return false;
                }
                core.trace_resched_handled(p, gen);
                self.schedule(p);
            }
            Ev::Irq { v, gen } => {
                let vc = &core.vcpus[v];
                if vc.irq_gen != gen || vc.irqs.is_empty() || !matches!(vc.state, VcpuState::Running(_)) {
                    return false;
                }
                core.handle_irqs(v);
            }
            Ev::Create { d } => self.create(d),
            Ev::Destroy { d } => self.destroy(d),
            Ev::Net { m } => core.net_stage_done(m),
            Ev::Disk { r } => core.disk_done(r),
            Ev::Client { t } => core.client_arrival(t),
            Ev::GuestTimer { v, gen } => match core.guest_timer(v, gen) {
                None => return false,
                Some(false) => {}
                // A halted vCPU woke for its timer: a wake-up like any other for the policy.
                Some(true) => {
                    let h = core.vcpus[v].host;
                    let local = v - core.hosts[h].vcpus.start;
                    with_cx(core, h, None, |cx| self.policies[h].wake(cx, local));
                }
            },
        }
        true
    }

    /// Runs the guest steps and policy notifications this instant produced, until quiet.
    fn drain(&mut self) {
        loop {
            if let Some(v) = self.core.to_advance.pop_front() {
                self.core.advance(v);
            } else if let Some((v, p)) = self.core.to_sleep.pop_front() {
                let h = self.core.pcpus[p].host;
                let local = v - self.core.hosts[h].vcpus.start;
                with_cx(&mut self.core, h, Some(p), |cx| self.policies[h].sleep(cx, local));
                self.schedule(p);
            } else if let Some(t) = self.core.to_wake.pop_front() {
                if let Some(v) = self.core.wake(t) {
                    let h = self.core.vcpus[v].host;
                    let local = v - self.core.hosts[h].vcpus.start;
                    with_cx(&mut self.core, h, None, |cx| self.policies[h].wake(cx, local));
                }
            } else if let Some((v, why)) = self.core.to_yield.pop_front() {
                let VcpuState::Running(p) = self.core.vcpus[v].state else {
                    continue;
                };
                let h = self.core.pcpus[p].host;
                let first = self.core.hosts[h].vcpus.start;
                let local = v - first;
                let why = why.map_target(|t| t - first);
                with_cx(&mut self.core, h, Some(p), |cx| self.policies[h].yield_(cx, local, why));
            } else {
                break;
            }
        }
    }
}

impl Core {
    /// Whom event `ev` points to, for the watchdog.
    fn culprit(&self, ev: &Ev) -> Culprit {
        match *ev {
            Ev::Guest { v, .. } | Ev::Irq { v, .. } | Ev::GuestTimer { v, .. } => Culprit::Guest(self.vcpus[v].dom),
            Ev::Wake { t } | Ev::Client { t } => Culprit::Guest(self.threads[t].dom),
            Ev::SetType { d, .. } | Ev::Create { d } | Ev::Destroy { d } => Culprit::Guest(d),
            Ev::Net { .. } | Ev::Disk { .. } => Culprit::Io,
            Ev::Timer { .. } => Culprit::Policy("timer"),
            Ev::Tick { .. } => Culprit::Policy("tick"),
            Ev::SliceEnd { .. } => Culprit::Policy("slice end"),
            Ev::Resched { .. } => Culprit::Policy("reschedule"),
        }
    }

    /// The error that ends a run whose simulated time stopped at the current instant (after
    /// `events` events; `None`: inside one thread's program): the scenario's fault if guests
    /// or their I/O loop without taking time, the policy's if it re-arms its own events at
    /// the same instant.
    fn stall_error(&self, stall: Culprit, events: Option<u64>) -> RunError {
        let at = format!("simulated time stopped at t = {} s", vsched_engine::ns_to_secs(self.now()));
        let events = match events {
            Some(n) => format!("{n} events at this instant"),
            None => "a program's loop".to_string(),
        };
        match stall {
            Culprit::Guest(d) => {
                let dom = &self.doms[d];
                RunError::Scenario(format!(
                    "{at}: VM {:?} (workload {}) loops in steps that take no time ({events} events at this instant); \
                     expected durations that add up to more than 0 (e.g. its compute_us, cs_us, io_us or service_us)",
                    dom.info.name, dom.workload
                ))
            }
            Culprit::Io => RunError::Scenario(format!(
                "{at}: messages or disk requests move without taking time ({events} events at this instant); \
                 expected [network] latencies or the host's disk costs above 0"
            )),
            Culprit::Policy(kind) => RunError::Policy(format!(
                "{at}: the policy keeps re-arming a {kind} at the same instant ({events} events without time \
                 advancing): a policy bug, or a parameter that makes its period zero"
            )),
        }
    }
}
