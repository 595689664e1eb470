//! The kernel mutex (`LockKind::Mutex`): a sleeping lock with optimistic spinning, after
//! kernel/locking/mutex.c (`__mutex_lock_common`, `mutex_optimistic_spin`,
//! `mutex_spin_on_owner`, `__mutex_unlock_slowpath`, Linux 5.17 to 6.x; the handoff since
//! Linux 4.10), reduced to what the hypervisor sees.
//!
//! - **Lock.** A free mutex is taken at once, waiters or not (`__mutex_trylock`: only a
//!   handoff reserves it). A held one is spun for while its owner is on a CPU, else the
//!   thread sleeps: it joins the tail of the wait list and blocks, so its vCPU runs another
//!   thread or halts (`mutex_can_spin_on_owner`, then `list_add_tail`, `schedule`).
//! - **"On a CPU"** is the guest's view, `owner_on_cpu()` (include/linux/sched.h, commit
//!   c0bed69daf4b, Linux 5.17; the same test inline in mutex.c since Linux 4.10):
//!   `owner->on_cpu && !vcpu_is_preempted(task_cpu(owner))`. An owner switched out by its own
//!   guest, or whose vCPU halted, is off its CPU. An owner whose vCPU the host preempted
//!   (`VcpuState::Runnable`) still looks on its CPU unless the guest has steal time
//!   (`Paravirt::steal_time`): then `vcpu_is_preempted()` reads `steal_time.preempted`
//!   (`__kvm_vcpu_is_preempted`, arch/x86/kernel/kvm.c), which KVM sets when it schedules out
//!   a vCPU thread that is still runnable (`kvm_arch_vcpu_put` →
//!   `kvm_steal_time_set_preempted`, only `if (vcpu->preempted)` in current KVM).
//! - **Spinning** (`mutex_spin_on_owner`) is kernel-mode busy waiting with preemption
//!   disabled, so pause-loop exits apply. A spinner re-reads the owner continually: it stops
//!   and sleeps as soon as the owner is off its CPU (if the spinner itself is not running, as
//!   soon as it runs again), or when its own guest wants the CPU for another thread
//!   (`need_resched()`: its time slice ran out at a guest tick with others waiting).
//! - **Unlock** (`__mutex_unlock_slowpath`): if the first waiter asked for a handoff the lock
//!   goes straight to it (`__mutex_handoff`); otherwise it is released, an executing spinner
//!   takes it in the same instant, and the first sleeper, if any, is woken with an IPI
//!   (`wake_up_q` → `try_to_wake_up`), as a barrier's release wakes a halted waiter.
//! - **Woken first waiter** (`__mutex_trylock_or_handoff(lock, first)`): when it runs it
//!   takes a free lock; if someone took it meanwhile it sets the handoff flag, then spins
//!   while the owner is on a CPU (`mutex_optimistic_spin` with `waiter`) or sleeps again.
//!
//! Simplified: the spinners' own queue (the OSQ, `osq_lock`) is taken as arrival order, and
//! the first spinner that executes takes a released lock (the OSQ head spinning on the owner
//! does, and a preempted OSQ node is skipped, `vcpu_is_preempted(node_cpu(node->prev))`); a
//! mutex holder may be preempted by its guest (a preemptible kernel, or a section that
//! sleeps); `lock_waiter_preemptions` is not counted (a sleeping lock's waiter is expected
//! to be off its CPU).

use super::guest_sched::executing;
use super::interpret::Step;
use super::locks::{Lock, WaitAction};
use super::state::{Core, ThreadState};
use crate::domain::VcpuState;
use crate::guest::LockKind;
use crate::ids::{DomId, ThreadId, VcpuId};

impl Core {
    /// Whether the guest sees mutex owner `t` on a CPU (`owner_on_cpu`, see the module notes).
    pub(super) fn owner_on_cpu(&self, t: ThreadId) -> bool {
        let th = &self.threads[t];
        let vc = &self.vcpus[th.vcpu];
        if vc.curr != t || th.asleep {
            return false;
        }
        match vc.state {
            VcpuState::Running(_) => true,
            VcpuState::Runnable => !self.doms[th.dom].info.pv.steal_time,
            VcpuState::Blocked | VcpuState::Offline => false,
        }
    }

    /// What mutex waiter `t` of `l` does when it executes.
    pub(super) fn mutex_action(&self, l: &Lock, t: ThreadId) -> WaitAction {
        let Some(owner) = l.holder else { return WaitAction::Take };
        if !self.owner_on_cpu(owner) {
            WaitAction::Sleep
        } else if l.waiters.front() == Some(&t) && !l.handoff {
            WaitAction::Handoff
        } else {
            WaitAction::Spin
        }
    }

    /// `lock` on a mutex: take it if free, spin while the owner is on a CPU, else sleep.
    pub(super) fn mutex_lock(&mut self, v: VcpuId, d: DomId, lock: u32) -> Step {
        let now = self.now();
        let t = self.vcpus[v].curr;
        let owner = self.doms[d].locks[lock as usize].holder;
        match owner {
            None => {
                let l = &mut self.doms[d].locks[lock as usize];
                l.holder = Some(t);
                l.handoff = false;
                self.threads[t].held.push((lock, true));
                Step::Next
            }
            Some(o) if self.owner_on_cpu(o) => {
                self.doms[d].locks[lock as usize].spinners.push_back(t);
                self.threads[t].state = ThreadState::SpinLock { lock, kernel: true, budget: None };
                let vc = &mut self.vcpus[v];
                vc.ple_from = now.max(vc.run_from);
                self.wait_running(v)
            }
            Some(_) => {
                self.doms[d].locks[lock as usize].waiters.push_back(t);
                self.mutex_sleep(v, lock);
                Step::Wait
            }
        }
    }

    /// The mutex waiter on running vCPU `v` (already on the wait list) goes to sleep.
    fn mutex_sleep(&mut self, v: VcpuId, lock: u32) {
        self.curr_thread_mut(v).state = ThreadState::SleepMutex { lock, woken: false };
        self.block(v);
    }

    /// The guest event of a spinning mutex waiter (see `mutex_action`).
    pub(super) fn mutex_wait_event(&mut self, v: VcpuId, lock: u32) {
        let t = self.vcpus[v].curr;
        let d = self.threads[t].dom;
        match self.wait_action(v) {
            WaitAction::Take => self.take_waited(v, lock, true),
            WaitAction::Sleep => self.mutex_stop_spinning(v, lock),
            WaitAction::Handoff => {
                self.doms[d].locks[lock as usize].handoff = true;
                self.maybe_ple_exit(v);
            }
            _ => self.maybe_ple_exit(v),
        }
    }

    /// The spinner on running vCPU `v` gives up and sleeps: a spinner joins the tail of the
    /// wait list, the first waiter keeps its place.
    fn mutex_stop_spinning(&mut self, v: VcpuId, lock: u32) {
        let t = self.vcpus[v].curr;
        let l = &mut self.doms[self.threads[t].dom].locks[lock as usize];
        if let Some(i) = l.spinners.iter().position(|&s| s == t) {
            l.spinners.remove(i);
            l.waiters.push_back(t);
        }
        self.mutex_sleep(v, lock);
    }

    /// A guest tick found that running vCPU `v` should switch threads (`need_resched()`): a
    /// mutex spinner stops spinning and sleeps. False if `v` runs no mutex spinner.
    pub(super) fn mutex_spinner_resched(&mut self, v: VcpuId) -> bool {
        let th = self.curr_thread(v);
        let ThreadState::SpinLock { lock, .. } = th.state else { return false };
        if self.doms[th.dom].lock_kind != LockKind::Mutex {
            return false;
        }
        self.sync(v);
        self.mutex_stop_spinning(v, lock);
        true
    }

    /// Mutex unlock (see the module notes). Returns the waker's cost if it woke a sleeper:
    /// without IPI virtualization, the ICR write's exit.
    pub(super) fn mutex_unlock(&mut self, d: DomId, lock: u32) -> Option<u64> {
        let now = self.now();
        let l = &mut self.doms[d].locks[lock as usize];
        l.holder = None;
        let mut woke = false;
        if l.handoff && !l.waiters.is_empty() {
            // `__mutex_handoff`: the first waiter owns the lock now, running or not.
            let w = l.waiters.pop_front().expect("checked");
            l.handoff = false;
            l.holder = Some(w);
            self.threads[w].held.push((lock, true));
            self.trace_handoff(w, lock);
            woke = self.release_waiter(w);
        } else {
            let (vcpus, threads) = (&self.vcpus, &self.threads);
            let spinner = l.spinners.iter().position(|&s| {
                executing(vcpus, threads, s)
                    && vcpus[threads[s].vcpu].run_from <= now
                    && matches!(threads[s].state, ThreadState::SpinLock { .. })
            });
            if let Some(i) = spinner {
                let s = l.spinners.remove(i).expect("found");
                l.holder = Some(s);
                self.threads[s].held.push((lock, true));
                self.trace_handoff(s, lock);
                self.release_waiter(s);
            }
            let l = &self.doms[d].locks[lock as usize];
            if let Some(&w) = l.waiters.front() {
                if let ThreadState::SleepMutex { lock, woken: false } = self.threads[w].state {
                    self.threads[w].state = ThreadState::SleepMutex { lock, woken: true };
                    self.send_wake(w);
                    woke = true;
                }
            }
        }
        self.mutex_rearm(d, lock);
        (woke && !self.host.ipi_virtualization).then_some(self.host.vm_exit_ns)
    }

    /// Thread `t` left its CPU, or its vCPU was preempted (which the guest may or may not
    /// see): the spinners on each mutex it holds re-read their owner.
    pub(super) fn mutex_owner_moved(&mut self, t: ThreadId) {
        let d = self.threads[t].dom;
        if self.doms[d].lock_kind != LockKind::Mutex || self.threads[t].held.is_empty() {
            return;
        }
        for i in 0..self.threads[t].held.len() {
            let lock = self.threads[t].held[i].0;
            self.mutex_rearm(d, lock);
        }
    }

    /// The executing spinners of mutex `lock` (and its spinning first waiter) re-read the
    /// lock: each one's next guest event follows from what it sees now.
    fn mutex_rearm(&mut self, d: DomId, lock: u32) {
        let l = &self.doms[d].locks[lock as usize];
        let watchers: Vec<ThreadId> = l.spinners.iter().chain(l.waiters.front()).copied().collect();
        for s in watchers {
            if executing(&self.vcpus, &self.threads, s) && matches!(self.threads[s].state, ThreadState::SpinLock { .. })
            {
                let sv = self.threads[s].vcpu;
                self.sync(sv);
                self.arm(sv);
            }
        }
    }
}
