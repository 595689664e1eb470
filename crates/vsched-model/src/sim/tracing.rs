//! What the simulator tells its trace (`crate::trace`), when the run is traced: each pCPU's
//! spans (opened and closed by `dispatch`), each vCPU's activity, the host's runnable vCPUs,
//! and the instants and flows recorded where they happen (`ple`, `dispatch`, `locks`,
//! `irq`, `network`, `world`).
//!
//! An untraced run must not pay for this: each hook is an inlined check of whether the run
//! is traced, and the work behind it a separate cold function, so the hot paths that call a
//! hook (a vCPU's state change, a reschedule) stay as small as they were without it
//! (docs/performance.md, "Traces").

use super::state::Core;
use super::RunError;
use crate::domain::VcpuState;
use crate::ids::{PcpuId, ThreadId, VcpuId};
use crate::trace::{CounterOf, Instant, Trace, Track, VcpuActivity, RUNNABLE_VCPUS};

impl Core {
    /// Applies `f` to the trace, if the run is traced. A trace whose sink failed (a full
    /// disk) ends the run: nothing more could be written, so running on would be wasted.
    #[inline]
    pub(super) fn with_trace(&mut self, f: impl FnOnce(&mut Trace)) {
        if let Some(t) = &mut self.trace {
            f(t);
            if t.failed() {
                self.error.get_or_insert(RunError::TraceSink);
            }
        }
    }

    /// Records a run/spin change of a running vCPU: on its pCPU's row and on its own track.
    #[inline]
    pub(super) fn trace_state(&mut self, v: VcpuId) {
        if self.trace.is_some() {
            self.traced_state(v);
        }
    }

    #[cold]
    #[inline(never)]
    fn traced_state(&mut self, v: VcpuId) {
        let vc = &self.vcpus[v];
        if let VcpuState::Running(p) = vc.state {
            let (now, spinning) = (self.queue.now(), self.threads[vc.curr].state.spinning());
            self.with_trace(|t| t.set_spinning(p, now, spinning));
            self.traced_vcpu(v);
        }
    }

    /// Records what `v` does from now on (its state changed, or its thread's spinning did).
    #[inline]
    pub(super) fn trace_vcpu(&mut self, v: VcpuId) {
        if self.trace.is_some() {
            self.traced_vcpu(v);
        }
    }

    #[cold]
    #[inline(never)]
    fn traced_vcpu(&mut self, v: VcpuId) {
        let vc = &self.vcpus[v];
        let activity = match vc.state {
            VcpuState::Running(pcpu) if self.threads[vc.curr].state.spinning() => Some(VcpuActivity::Spinning { pcpu }),
            VcpuState::Running(pcpu) => Some(VcpuActivity::Running { pcpu }),
            VcpuState::Runnable => Some(VcpuActivity::Runnable),
            VcpuState::Blocked => Some(VcpuActivity::Blocked),
            VcpuState::Offline => None,
        };
        let now = self.now();
        self.with_trace(|t| t.vcpu(v, activity, now));
    }

    /// `v` of host `h` changed state: its activity, and the host's count of runnable vCPUs
    /// that no pCPU runs (`HostState::n_waiting`).
    #[inline]
    pub(super) fn trace_state_change(&mut self, v: VcpuId, h: usize) {
        if self.trace.is_some() {
            self.traced_state_change(v, h);
        }
    }

    #[cold]
    #[inline(never)]
    fn traced_state_change(&mut self, v: VcpuId, h: usize) {
        self.traced_vcpu(v);
        self.traced_runnable(h);
    }

    fn traced_runnable(&mut self, h: usize) {
        let (now, waiting) = (self.now(), self.hosts[h].n_waiting as i64);
        self.with_trace(|t| t.counter(CounterOf::Host(h), RUNNABLE_VCPUS, waiting, now));
    }

    /// Records `what` at the current instant.
    #[inline]
    pub(super) fn trace_instant(&mut self, what: Instant) {
        if self.trace.is_some() {
            self.traced_instant(what);
        }
    }

    #[cold]
    #[inline(never)]
    fn traced_instant(&mut self, what: Instant) {
        let now = self.now();
        self.with_trace(|t| t.instant(what, now));
    }

    /// An unlock just made waiter `w` the holder of `lock`.
    #[inline]
    pub(super) fn trace_handoff(&mut self, w: ThreadId, lock: u32) {
        if self.trace.is_some() {
            self.traced_handoff(w, lock);
        }
    }

    #[cold]
    #[inline(never)]
    fn traced_handoff(&mut self, w: ThreadId, lock: u32) {
        let vcpu = self.threads[w].vcpu;
        let waiter_running = super::guest_sched::executing(&self.vcpus, &self.threads, w);
        self.traced_instant(Instant::LockHandoff { vcpu, lock, waiter_running });
    }

    /// A policy callback of host `host`, on pCPU `here` if any, sent a reschedule IPI to pCPU
    /// `p` (its request is `p`'s current `resched_gen`).
    #[inline]
    pub(super) fn trace_resched_sent(&mut self, host: usize, here: Option<PcpuId>, p: PcpuId) {
        if self.trace.is_some() {
            self.traced_resched_sent(host, here, p);
        }
    }

    #[cold]
    #[inline(never)]
    fn traced_resched_sent(&mut self, host: usize, here: Option<PcpuId>, p: PcpuId) {
        let from = here.map_or(Track::Host(host), Track::Pcpu);
        let (gen, now) = (self.pcpus[p].resched_gen, self.now());
        self.with_trace(|t| t.resched_ipi_sent(from, p, gen, now));
    }

    /// Request `gen` of pCPU `p` is handled now.
    #[inline]
    pub(super) fn trace_resched_handled(&mut self, p: PcpuId, gen: u32) {
        if self.trace.is_some() {
            let now = self.now();
            self.with_trace(|t| t.resched_handled(p, gen, now));
        }
    }

    /// The run starts: every vCPU's initial activity and every host's runnable count (set
    /// when the simulation was built, before the trace existed).
    pub(super) fn trace_start(&mut self) {
        if self.trace.is_none() {
            return;
        }
        for v in 0..self.vcpus.len() {
            self.traced_vcpu(v);
        }
        for h in 0..self.hosts.len() {
            self.traced_runnable(h);
        }
    }
}
