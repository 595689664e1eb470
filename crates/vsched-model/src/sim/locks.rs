//! Guest spinlocks: test-and-set, ticket, and paravirtual.
//!
//! A test-and-set lock goes to one of the waiters executing at the unlock (chosen at
//! random: they race); a ticket lock to the next ticket in line whether its vCPU runs or
//! not (a lock-waiter preemption if it does not). Spinning burns the waiter's pCPU time and
//! raises pause-loop exits in kernel mode (`ple`).
//!
//! Paravirtual spinlocks (a VM option; kernel locks only):
//! Linux's pv qspinlock (kernel/locking/qspinlock_paravirt.h), reduced to its scheduling
//! effects: waiters queue FIFO; a queued waiter spins `SPIN_THRESHOLD` (2^15) iterations of
//! `spin_iteration_cycles`, then halts (`pv_wait`, the vCPU blocks); an unlock hands the lock
//! to the queue head if it is spinning on a pCPU, otherwise leaves it free and kicks the head
//! if it halted (`pv_kick`, woken one IPI latency later). While the head is not spinning on a
//! pCPU a newcomer may steal the free lock (`pv_hybrid_queued_unfair_trylock`). Not
//! modelled: a waiter halting early when its predecessor's vCPU is preempted, and the
//! directed yield that KVM's kick hypercall adds.

use std::collections::VecDeque;

use rand::Rng;
use vsched_engine::Time;

use super::events::Ev;
use super::guest_sched::executing;
use super::interpret::Step;
use super::state::{Core, ThreadState};
use crate::domain::VcpuState;
use crate::guest::{LockChoice, LockKind};
use crate::ids::{DomId, ThreadId, VcpuId};

/// One guest lock of a domain.
#[derive(Default)]
pub(super) struct Lock {
    pub(super) holder: Option<ThreadId>,
    /// Ticket order (ticket locks), the set of spinners (test-and-set), or the FIFO of
    /// queued waiters (paravirtual).
    pub(super) waiters: VecDeque<ThreadId>,
}

impl Core {
    /// Whether the lock waiter vCPU `v` runs may take its lock now: it is free and either
    /// anyone may grab it (test-and-set) or the waiter heads a paravirtual lock's queue. (A
    /// ticket lock is handed over by the unlock itself.)
    pub(super) fn lock_free_for(&self, v: VcpuId) -> bool {
        let t = self.vcpus[v].curr;
        let th = &self.threads[t];
        let ThreadState::SpinLock { lock, kernel, .. } = th.state else { return false };
        let dom = &self.doms[th.dom];
        let l = &dom.locks[lock as usize];
        l.holder.is_none()
            && if dom.info.pv.spinlocks && kernel { l.waiters.front() == Some(&t) } else { dom.lock_kind == LockKind::Tas }
    }

    /// `lock(choice, kernel)`: take the lock if it is free and this thread may take it,
    /// else queue and spin (a paravirtual waiter with a spinning budget).
    pub(super) fn lock(&mut self, v: VcpuId, d: DomId, choice: LockChoice, kernel: bool) -> Step {
        let now = self.now();
        let dom = &mut self.doms[d];
        let lock = match choice {
            LockChoice::Fixed(l) => l,
            LockChoice::Uniform => dom.rng.gen_range(0..dom.locks.len() as u32),
        };
        let pv = dom.info.pv.spinlocks && kernel;
        let l = &mut dom.locks[lock as usize];
        let may_take = if pv {
            // A newcomer steals a free lock unless the queue head spins for it.
            l.waiters.front().is_none_or(|&h| {
                !(executing(&self.vcpus, &self.threads, h)
                    && matches!(self.threads[h].state, ThreadState::SpinLock { .. }))
            })
        } else {
            dom.lock_kind == LockKind::Tas || l.waiters.is_empty()
        };
        let t = self.vcpus[v].curr;
        let th = &mut self.threads[t];
        if l.holder.is_none() && may_take {
            l.holder = Some(t);
            th.held.push((lock, kernel));
            return Step::Next;
        }
        l.waiters.push_back(t);
        let budget = pv.then_some(self.pv_spin_ns);
        th.state = ThreadState::SpinLock { lock, kernel, budget };
        let vc = &mut self.vcpus[v];
        vc.ple_from = now.max(vc.run_from);
        self.wait_running(v)
    }

    /// The guest event of a lock waiter: take the lock if it is free for it, halt a
    /// paravirtual waiter whose spinning budget ran out (`pv_wait`), or check for a
    /// pause-loop exit and keep spinning.
    pub(super) fn lock_wait_event(&mut self, v: VcpuId, lock: u32, kernel: bool, budget: Option<Time>) {
        let free = self.lock_free_for(v);
        let t = self.vcpus[v].curr;
        let th = &mut self.threads[t];
        if free {
            let l = &mut self.doms[th.dom].locks[lock as usize];
            l.waiters.retain(|&w| w != t);
            l.holder = Some(t);
            th.held.push((lock, kernel));
            th.state = ThreadState::Ready;
            self.to_advance.push_back(v);
        } else if budget == Some(0) {
            th.state = ThreadState::HaltedLock { lock, kicked: false };
            self.doms[th.dom].pv_halts += 1;
            self.block(v);
        } else {
            self.maybe_ple_exit(v);
        }
    }

    /// Releases `lock` of domain `d` (taken in kernel mode or not) and hands it on. True if
    /// the unlock kicked a halted paravirtual waiter (`KVM_HC_KICK_CPU`, a hypercall).
    pub(super) fn unlock(&mut self, d: DomId, lock: u32, kernel: bool) -> bool {
        let now = self.now();
        let dom = &mut self.doms[d];
        let l = &mut dom.locks[lock as usize];
        l.holder = None;
        if dom.info.pv.spinlocks && kernel {
            // Paravirtual: hand over only to a head spinning on a pCPU; kick a halted head.
            // A kernel lock's waiter never leaves its vCPU (preemption is disabled): the
            // head is its vCPU's current thread.
            let Some(&h) = l.waiters.front() else { return false };
            let hv = self.threads[h].vcpu;
            let hc = &self.vcpus[hv];
            let th = &mut self.threads[h];
            match (hc.state, th.state) {
                (VcpuState::Running(_), ThreadState::SpinLock { .. }) if hc.run_from <= now => {
                    l.waiters.pop_front();
                    l.holder = Some(h);
                    th.held.push((lock, kernel));
                    self.release_waiter(h);
                }
                (_, ThreadState::HaltedLock { lock, kicked: false }) => {
                    th.state = ThreadState::HaltedLock { lock, kicked: true };
                    dom.pv_kicks += 1;
                    self.hosts[dom.host].ipis += 1;
                    let at = now + self.host.ipi_latency_ns;
                    self.post(at, Ev::Wake { t: h });
                    return true;
                }
                // Head about to execute: it takes the lock when it does (if nobody steals it).
                (VcpuState::Running(_), _) => {
                    self.sync(hv);
                    self.arm(hv);
                }
                _ => {}
            }
            return false;
        }
        let next = match dom.lock_kind {
            // Ticket: the next ticket in line owns the lock now, running or not.
            LockKind::Ticket => l.waiters.pop_front(),
            // Test-and-set: one of the spinners that is executing right now wins the race.
            LockKind::Tas => {
                let now = self.queue.now();
                let (vcpus, threads) = (&self.vcpus, &self.threads);
                let running: Vec<usize> = (0..l.waiters.len())
                    .filter(|&i| {
                        let t = l.waiters[i];
                        executing(vcpus, threads, t) && vcpus[threads[t].vcpu].run_from <= now
                    })
                    .collect();
                if running.is_empty() {
                    None
                } else {
                    let pick = running[dom.rng.gen_range(0..running.len())];
                    l.waiters.remove(pick)
                }
            }
        };
        let Some(w) = next else { return false };
        l.holder = Some(w);
        let th = &mut self.threads[w];
        let kernel = matches!(th.state, ThreadState::SpinLock { kernel: true, .. });
        th.held.push((lock, kernel));
        // The next in line does not execute: its vCPU is preempted, or its guest switched it
        // out (a user-mode waiter whose time slice ran out).
        if !executing(&self.vcpus, &self.threads, w) {
            dom.lock_waiter_preemptions += 1;
        }
        // A running waiter continues through a guest event in this same instant.
        self.release_waiter(w);
        false
    }
}
