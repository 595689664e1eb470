//! Applying a policy's decision on a pCPU: validate it, switch vCPUs, charge the dispatch
//! overheads (scheduler, context switch, migration), arm the slice timer; and the
//! reschedule requests (IPIs) that make a pCPU ask its policy again.
//!
//! A vCPU dispatched at `t` starts executing guest code at `t + overhead` (scheduler cost,
//! plus a context switch if it replaces another vCPU, plus the migration penalty if it last
//! ran on another pCPU). One slice-end event per pCPU serves successive slices: a
//! redispatch with a later deadline leaves the earlier event in place, which re-arms itself
//! when it fires, so pCPUs that reschedule often do not fill the queue.

use vsched_engine::Time;

use super::events::Ev;
use super::state::Core;
use super::world::with_cx;
use super::{RunError, Simulation};
use crate::domain::VcpuState;
use crate::ids::{PcpuId, VcpuId};
use crate::policy::Decision;
use crate::trace::Instant;

/// The shortest slice a decision may ask for: Linux's floor for a scheduler's high-resolution
/// slice timer ("Don't schedule slices shorter than 10000ns, that just doesn't make sense and
/// can cause timer DoS", `hrtick_start`, kernel/sched/core.c). A shorter slice is a policy bug
/// that makes simulated time crawl, not a schedule: it fails the run.
pub const MIN_SLICE_NS: Time = 10_000;

impl Simulation {
    /// Asks the policy what `p` runs next and makes it so.
    pub(super) fn schedule(&mut self, p: PcpuId) {
        self.stop_poll_for_resched(p);
        if self.core.defer_preemption(p) {
            return;
        }
        let h = self.core.pcpus[p].host;
        let (pbase, vbase) = (self.core.hosts[h].pcpus.start, self.core.hosts[h].vcpus.start);
        let prev = self.core.pcpus[p].curr.map(|v| v - vbase);
        let policy = &mut self.policies[h];
        let mut decision = with_cx(&mut self.core, h, Some(p), |cx| policy.pick_next(cx, p - pbase, prev));
        if let Some(v) = decision.next {
            if v >= self.core.hosts[h].vcpus.len() {
                self.core.error.get_or_insert(RunError::Policy(format!(
                    "unusable decision: pCPU {} was given vCPU {v}, which does not exist",
                    p - pbase
                )));
                return;
            }
            decision.next = Some(v + vbase);
        }
        if let Err(e) = self.core.dispatch(p, decision) {
            self.core.error.get_or_insert(RunError::Policy(e));
        }
    }

    /// `p`'s slice-end event fired; false if nothing happened (superseded, or the slice
    /// was renewed and the event re-armed for its new deadline).
    pub(super) fn slice_end(&mut self, p: PcpuId) -> bool {
        let now = self.core.now();
        let pc = &mut self.core.pcpus[p];
        if pc.slice_timer_at != Some(now) {
            return false; // superseded by an earlier slice-end event
        }
        pc.slice_timer_at = None;
        match pc.slice_deadline {
            Some(deadline) if deadline == now => {
                self.schedule(p);
                true
            }
            Some(deadline) if deadline > now => {
                self.core.arm_slice_timer(p, deadline);
                false // the slice was renewed: nothing happened here
            }
            _ => false,
        }
    }
}

impl Core {
    /// Schedules a reschedule of `p` at `at`; false if one at or before `at` is pending.
    pub(super) fn request_resched(&mut self, p: PcpuId, at: Time) -> bool {
        let pc = &mut self.pcpus[p];
        if matches!(pc.resched_due, Some(due) if due <= at) {
            return false;
        }
        pc.resched_gen = pc.resched_gen.wrapping_add(1);
        pc.resched_due = Some(at);
        let gen = pc.resched_gen;
        self.post(at, Ev::Resched { p, gen });
        true
    }

    /// Applies a policy decision on `p`.
    pub(super) fn dispatch(&mut self, p: PcpuId, d: Decision) -> Result<(), String> {
        let now = self.now();
        let prev = self.pcpus[p].curr;
        let h = self.pcpus[p].host;
        self.hosts[h].sched_invocations += 1;
        {
            let pc = &mut self.pcpus[p];
            pc.resched_gen = pc.resched_gen.wrapping_add(1);
            pc.resched_due = None;
        }
        if let Some(v) = d.next {
            if v >= self.vcpus.len() {
                return Err(format!("unusable decision: pCPU {p} was given vCPU {v}, which does not exist"));
            }
            let ok = match self.vcpus[v].state {
                VcpuState::Runnable => true,
                VcpuState::Running(q) => q == p && prev == Some(v),
                VcpuState::Blocked | VcpuState::Offline => false,
            };
            if !ok {
                return Err(format!(
                    "unusable decision at t={now} ns: pCPU {p} was given vCPU {v} in state {:?}",
                    self.vcpus[v].state
                ));
            }
            if let Some(q) = self.vcpus[v].pinned.filter(|&q| q != p) {
                return Err(format!(
                    "unusable decision at t={now} ns: pCPU {p} was given vCPU {v}, a kernel thread bound to pCPU {q}"
                ));
            }
        }
        if let Some(slice) = d.slice_ns.filter(|&s| s < MIN_SLICE_NS) {
            // Time would crawl a few ns per decision: a 2 s run would take hours.
            return Err(format!(
                "unusable decision at t={now} ns: pCPU {p} was given a slice of {slice} ns; expected at least \
                 {MIN_SLICE_NS} ns (10 µs, the shortest slice Linux arms, hrtick_start in kernel/sched/core.c)"
            ));
        }
        if prev != d.next {
            if let Some(u) = prev {
                self.deschedule(u);
            }
        }
        self.set_curr(p, d.next);
        if let Some(v) = d.next {
            let switching = prev != Some(v);
            let mut overhead = self.host.sched_cost_ns;
            if switching {
                overhead += self.host.context_switch_ns;
                self.hosts[h].context_switches += 1;
                let vc = &self.vcpus[v];
                if vc.last_pcpu.is_some() && vc.last_pcpu != Some(p) {
                    self.hosts[h].migrations += 1;
                    overhead += self.host.migration_ns;
                }
                let woke_at = vc.woke_at;
                let refill = self.refill(v, p);
                if refill > 0 {
                    self.vcpus[v].refill_spans.push((now + overhead, now + overhead + refill));
                }
                overhead += refill;
                overhead += self.guest_ticks_at_entry(v);
                self.halt_ended(v);
                if let Some(w) = woke_at {
                    let dom = &mut self.doms[self.vcpus[v].dom];
                    dom.wake_latency_sum += now - w;
                    dom.wakes += 1;
                }
                self.set_state(v, VcpuState::Running(p));
                let grows = self.ple_grow > 1;
                let base = self.ple_window_ns.unwrap_or(0);
                let vc = &mut self.vcpus[v];
                vc.woke_at = None;
                vc.last_pcpu = Some(p);
                if grows {
                    vc.ple_window_ns = base; // KVM: shrink_ple_window at sched-in
                }
                self.note_costart(v, p);
            } else {
                self.sync(v);
            }
            let vc = &mut self.vcpus[v];
            // A vCPU that stays keeps what it still owed (a VM exit, an interrupt handler):
            // the scheduler ran inside that exit.
            let owed_until = if switching { now } else { vc.run_from.max(now) };
            vc.run_from = owed_until + overhead;
            vc.synced_to = now;
            vc.ple_from = vc.run_from;
            if self.trace.is_some() {
                let vc = &self.vcpus[v];
                let (dom, index, spinning) = (vc.dom, vc.index, self.threads[vc.curr].state.spinning());
                self.with_trace(|t| t.open(p, v, dom, index, now, spinning));
                self.trace_vcpu(v); // a vCPU that stays may have started or stopped spinning
            }
            let vc = &self.vcpus[v];
            if !vc.irqs.is_empty() {
                // Interrupts that arrived while it waited are injected at VM entry.
                let (at, gen) = (vc.run_from, vc.irq_gen);
                self.post(at, Ev::Irq { v, gen });
            }
            self.arm(v);
        } else {
            self.with_trace(|t| t.close(p, now));
        }
        let deadline = d.slice_ns.map(|s| now + s.max(1) + self.timer_late(h));
        self.pcpus[p].slice_deadline = deadline;
        if let Some(deadline) = deadline {
            if !matches!(self.pcpus[p].slice_timer_at, Some(t) if t <= deadline) {
                self.arm_slice_timer(p, deadline);
            }
        }
        Ok(())
    }

    pub(super) fn arm_slice_timer(&mut self, p: PcpuId, at: Time) {
        self.pcpus[p].slice_timer_at = Some(at);
        self.post_slice_end(p, at);
    }

    /// Takes `v` off its pCPU: it stops making progress; a runnable vCPU starts waiting.
    pub(super) fn deschedule(&mut self, v: VcpuId) {
        self.sync(v);
        self.leave_caches(v, self.queue.now());
        self.count_refill(v, self.queue.now());
        let preempted = matches!(self.vcpus[v].state, VcpuState::Running(_));
        if preempted {
            self.cancel_guest_timer(v); // a halted vCPU keeps its idle timer
        }
        let vc = &mut self.vcpus[v];
        vc.gen = vc.gen.wrapping_add(1);
        vc.irq_gen = vc.irq_gen.wrapping_add(1);
        vc.delay_until = None; // a grace ends with the vCPU's turn
        if preempted {
            let t = vc.curr;
            let locks_held = self.threads[t].held.len();
            if locks_held > 0 {
                self.doms[vc.dom].lock_holder_preemptions += 1;
                self.trace_instant(Instant::LockHolderPreempted { vcpu: v, locks_held });
            }
            self.set_state(v, VcpuState::Runnable);
            // A preempted mutex owner: its spinners see it if the guest has steal time.
            self.mutex_owner_moved(t);
        }
    }

    /// The checks after every event of a debug build or a `--check` run: a vCPU never runs
    /// on two pCPUs, and pCPU and vCPU states agree.
    pub(super) fn check_invariants(&self) -> Result<(), String> {
        let mut running = vec![false; self.vcpus.len()];
        for (p, pc) in self.pcpus.iter().enumerate() {
            if let Some(v) = pc.curr {
                if running[v] {
                    return Err(format!("vCPU {v} runs on two pCPUs"));
                }
                running[v] = true;
                if self.vcpus[v].state != VcpuState::Running(p) {
                    return Err(format!("pCPU {p} runs vCPU {v}, which is {:?}", self.vcpus[v].state));
                }
            }
        }
        for (v, vc) in self.vcpus.iter().enumerate() {
            if let VcpuState::Running(p) = vc.state {
                if self.pcpus[p].curr != Some(v) {
                    return Err(format!("vCPU {v} thinks it runs on pCPU {p}, which runs {:?}", self.pcpus[p].curr));
                }
            }
        }
        Ok(())
    }
}
