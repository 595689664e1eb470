//! Time accounting: how long each vCPU spends running, runnable (steal), blocked and
//! offline, how long each pCPU is busy or idle, and fragmentation (`frag_idle_s`: pCPU
//! idle time while some vCPU was runnable and waiting, integrated per host), and each VM's
//! entitlement (`entitlement.rs`: what it asks for changes with its vCPUs' states). Every
//! state change of a vCPU or a pCPU goes through here.

use vsched_engine::Time;

use super::state::Core;
use crate::domain::VcpuState;
use crate::ids::{PcpuId, VcpuId};

/// Where `Vcpu::state_ns` keeps the time spent in each state.
pub(super) const RUNNING: usize = 0;
pub(super) const RUNNABLE: usize = 1;
const BLOCKED: usize = 2;
const OFFLINE: usize = 3;

/// The slot of `Vcpu::state_ns` for `state`. Indexing an array by the state, rather than
/// matching on it to pick a field, spares every switch a jump whose target alternates
/// (running, runnable, running...): cachegrind's branch simulation missed it on most of
/// the standard scenario's switches.
pub(super) fn state_slot(state: VcpuState) -> usize {
    match state {
        VcpuState::Running(_) => RUNNING,
        VcpuState::Runnable => RUNNABLE,
        VcpuState::Blocked => BLOCKED,
        VcpuState::Offline => OFFLINE,
    }
}

/// A vCPU running or waiting to run wants a pCPU; a blocked or offline one does not.
pub(super) fn asks_for_a_pcpu(state: VcpuState) -> bool {
    matches!(state, VcpuState::Running(_) | VcpuState::Runnable)
}

impl Core {
    /// Moves host `h`'s fragmentation integral up to now.
    pub(super) fn integrate_frag(&mut self, h: usize) {
        let now = self.now();
        let hs = &mut self.hosts[h];
        if hs.n_waiting > 0 {
            hs.frag_idle_ns += hs.n_idle as Time * (now - hs.frag_since);
        }
        hs.frag_since = now;
    }

    pub(super) fn set_state(&mut self, v: VcpuId, new: VcpuState) {
        let now = self.now();
        let h = self.vcpus[v].host;
        self.integrate_frag(h);
        let hs = &mut self.hosts[h];
        let vc = &mut self.vcpus[v];
        if asks_for_a_pcpu(vc.state) != asks_for_a_pcpu(new) {
            let vm = vc.dom - hs.doms.start;
            if asks_for_a_pcpu(new) {
                hs.entitlement.start_asking(now, vm);
            } else {
                hs.entitlement.stop_asking(now, vm);
            }
        }
        vc.state_ns[state_slot(vc.state)] += now - vc.state_since;
        hs.n_waiting =
            hs.n_waiting + usize::from(new == VcpuState::Runnable) - usize::from(vc.state == VcpuState::Runnable);
        vc.state = new;
        vc.state_since = now;
        self.trace_state_change(v, h);
    }

    pub(super) fn set_curr(&mut self, p: PcpuId, next: Option<VcpuId>) {
        let rearm = self.smt_pcpu_changing(p, next);
        self.set_curr_accounted(p, next);
        self.smt_pcpu_changed(rearm);
    }

    fn set_curr_accounted(&mut self, p: PcpuId, next: Option<VcpuId>) {
        let now = self.now();
        let pc = &mut self.pcpus[p];
        if pc.curr.is_some() == next.is_some() {
            pc.curr = next;
            return;
        }
        let h = pc.host;
        self.integrate_frag(h);
        let pc = &mut self.pcpus[p];
        let hs = &mut self.hosts[h];
        let spent = now - pc.since;
        if pc.curr.is_some() {
            pc.busy_ns += spent;
            hs.n_idle += 1;
        } else {
            pc.idle_ns += spent;
            hs.n_idle -= 1;
        }
        pc.since = now;
        pc.curr = next;
    }
}
