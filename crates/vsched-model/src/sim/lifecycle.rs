//! VMs created, destroyed or changing type during a run.
//!
//! Before its creation and after its destruction a VM's vCPUs are `Offline`. Creation makes
//! them runnable at the start of their programs and inserts them into the policy; destruction
//! takes running ones off their pCPUs (`sleep`, then `pick_next`) and removes them all. A
//! type change (seed 003 §4.4, seed 004 §V-B: `xm sched-... -t`) is told to the policy.

use super::state::ThreadState;
use super::world::with_cx;
use super::Simulation;
use crate::domain::{VcpuState, VmType};
use crate::ids::DomId;

impl Simulation {
    /// Brings domain `d` to life: its vCPUs start their programs and join the policy.
    pub(super) fn create(&mut self, d: DomId) {
        let core = &mut self.core;
        let now = core.now();
        core.doms[d].info.online = true;
        core.doms[d].created_at = now;
        core.doms[d].started_at = now;
        let h = core.doms[d].host;
        let base = core.hosts[h].vcpus.start;
        let vcpus = core.doms[d].span.clone();
        for v in vcpus.clone() {
            core.set_state(v, VcpuState::Runnable);
        }
        let policy = &mut self.policies[h];
        for v in vcpus {
            with_cx(core, h, None, |cx| policy.vcpu_insert(cx, v - base));
        }
    }

    /// Destroys domain `d`. An unfinished job never finishes.
    pub(super) fn destroy(&mut self, d: DomId) {
        let core = &mut self.core;
        let now = core.now();
        if !core.doms[d].info.online {
            return;
        }
        let dom = &mut core.doms[d];
        dom.info.online = false;
        dom.destroyed_at = Some(now);
        if dom.finite && dom.finished_at.is_none() {
            core.unfinished -= 1;
        }
        let h = dom.host;
        let base = core.hosts[h].vcpus.start;
        let vcpus = dom.span.clone();
        let mut running = Vec::new();
        for v in vcpus.clone() {
            core.sync(v);
            if let VcpuState::Running(p) = core.vcpus[v].state {
                running.push((v, p));
            }
            core.set_state(v, VcpuState::Offline);
            let vc = &mut core.vcpus[v];
            vc.guest_rq.clear();
            vc.gen = vc.gen.wrapping_add(1);
            vc.irq_gen = vc.irq_gen.wrapping_add(1);
            vc.irqs.clear();
        }
        for t in core.doms[d].threads.clone() {
            core.threads[t].state = ThreadState::Exited;
        }
        for v in vcpus {
            if !running.iter().any(|&(u, _)| u == v) {
                with_cx(&mut self.core, h, None, |cx| self.policies[h].vcpu_remove(cx, v - base));
            }
        }
        for (v, p) in running {
            with_cx(&mut self.core, h, Some(p), |cx| self.policies[h].sleep(cx, v - base));
            self.schedule(p);
            with_cx(&mut self.core, h, None, |cx| self.policies[h].vcpu_remove(cx, v - base));
        }
    }

    /// Domain `d` becomes of type `ty`; its policy hears of a real change.
    pub(super) fn set_type(&mut self, d: DomId, ty: VmType) {
        let core = &mut self.core;
        let old = std::mem::replace(&mut core.doms[d].info.vm_type, ty);
        if old != ty {
            let h = core.doms[d].host;
            let local = d - core.hosts[h].doms.start;
            with_cx(core, h, None, |cx| self.policies[h].vm_type_changed(cx, local, old));
        }
    }
}
