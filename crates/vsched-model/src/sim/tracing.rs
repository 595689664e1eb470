//! What the simulator tells its trace (`crate::trace`), when the run is traced: each pCPU's
//! spans (opened and closed by `dispatch`), each vCPU's activity, the host's runnable vCPUs,
//! and the instants and flows recorded where they happen (`ple`, `dispatch`, `locks`,
//! `irq`, `network`, `world`). Every hook checks first whether the run is traced, so an
//! untraced run pays one branch per hook.

use super::state::Core;
use super::RunError;
use crate::domain::VcpuState;
use crate::ids::{ThreadId, VcpuId};
use crate::trace::{CounterOf, Instant, Trace, VcpuActivity, RUNNABLE_VCPUS};

impl Core {
    /// Applies `f` to the trace, if the run is traced. A trace whose sink failed (a full
    /// disk) ends the run: nothing more could be written, so running on would be wasted.
    pub(super) fn with_trace(&mut self, f: impl FnOnce(&mut Trace)) {
        if let Some(t) = &mut self.trace {
            f(t);
            if t.failed() {
                self.error.get_or_insert(RunError::TraceSink);
            }
        }
    }

    /// Records a run/spin change of a running vCPU: on its pCPU's row and on its own track.
    pub(super) fn trace_state(&mut self, v: VcpuId) {
        if self.trace.is_none() {
            return;
        }
        let vc = &self.vcpus[v];
        if let VcpuState::Running(p) = vc.state {
            let (now, spinning) = (self.queue.now(), self.threads[vc.curr].state.spinning());
            self.with_trace(|t| t.set_spinning(p, now, spinning));
            self.trace_vcpu(v);
        }
    }

    /// Records what `v` does from now on (its state changed, or its thread's spinning did).
    pub(super) fn trace_vcpu(&mut self, v: VcpuId) {
        if self.trace.is_none() {
            return;
        }
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

    /// Records host `h`'s count of runnable vCPUs that no pCPU runs (`HostState::n_waiting`).
    pub(super) fn trace_runnable(&mut self, h: usize) {
        if self.trace.is_none() {
            return;
        }
        let (now, waiting) = (self.now(), self.hosts[h].n_waiting as i64);
        self.with_trace(|t| t.counter(CounterOf::Host(h), RUNNABLE_VCPUS, waiting, now));
    }

    /// Records `what` at the current instant.
    pub(super) fn trace_instant(&mut self, what: Instant) {
        let now = self.now();
        self.with_trace(|t| t.instant(what, now));
    }

    /// An unlock just made waiter `w` the holder of `lock`.
    pub(super) fn trace_handoff(&mut self, w: ThreadId, lock: u32) {
        if self.trace.is_none() {
            return;
        }
        let vcpu = self.threads[w].vcpu;
        let waiter_running = super::guest_sched::executing(&self.vcpus, &self.threads, w);
        self.trace_instant(Instant::LockHandoff { vcpu, lock, waiter_running });
    }

    /// The run starts: every vCPU's initial activity and every host's runnable count (set
    /// when the simulation was built, before the trace existed).
    pub(super) fn trace_start(&mut self) {
        if self.trace.is_none() {
            return;
        }
        for v in 0..self.vcpus.len() {
            self.trace_vcpu(v);
        }
        for h in 0..self.hosts.len() {
            self.trace_runnable(h);
        }
    }
}
