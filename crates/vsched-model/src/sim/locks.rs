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
use super::interpret::Step;
use super::state::{Core, Thread};
use crate::domain::VcpuState;
use crate::guest::{LockChoice, LockKind};
use crate::ids::{DomId, VcpuId};

/// One guest lock of a domain.
#[derive(Default)]
pub(super) struct Lock {
    pub(super) holder: Option<VcpuId>,
    /// Ticket order (ticket locks), the set of spinners (test-and-set), or the FIFO of
    /// queued waiters (paravirtual).
    pub(super) waiters: VecDeque<VcpuId>,
}

impl Core {
    /// Whether lock waiter `v` may take its lock now: it is free and either anyone may grab
    /// it (test-and-set) or `v` heads a paravirtual lock's queue. (A ticket lock is handed
    /// over by the unlock itself.)
    pub(super) fn lock_free_for(&self, v: VcpuId) -> bool {
        let vc = &self.vcpus[v];
        let Thread::SpinLock { lock, kernel, .. } = vc.thread else { return false };
        let dom = &self.doms[vc.dom];
        let l = &dom.locks[lock as usize];
        l.holder.is_none()
            && if dom.pv_spinlocks && kernel { l.waiters.front() == Some(&v) } else { dom.lock_kind == LockKind::Tas }
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
        let pv = dom.pv_spinlocks && kernel;
        let l = &mut dom.locks[lock as usize];
        let may_take = if pv {
            // A newcomer steals a free lock unless the queue head spins for it.
            l.waiters.front().is_none_or(|&h| {
                let hc = &self.vcpus[h];
                !(matches!(hc.state, VcpuState::Running(_)) && matches!(hc.thread, Thread::SpinLock { .. }))
            })
        } else {
            dom.lock_kind == LockKind::Tas || l.waiters.is_empty()
        };
        let vc = &mut self.vcpus[v];
        if l.holder.is_none() && may_take {
            l.holder = Some(v);
            vc.held.push((lock, kernel));
            return Step::Next;
        }
        l.waiters.push_back(v);
        let budget = pv.then_some(self.pv_spin_ns);
        vc.thread = Thread::SpinLock { lock, kernel, budget };
        vc.ple_from = now.max(vc.run_from);
        self.wait_running(v)
    }

    /// The guest event of a lock waiter: take the lock if it is free for it, halt a
    /// paravirtual waiter whose spinning budget ran out (`pv_wait`), or check for a
    /// pause-loop exit and keep spinning.
    pub(super) fn lock_wait_event(&mut self, v: VcpuId, lock: u32, kernel: bool, budget: Option<Time>) {
        let free = self.lock_free_for(v);
        let vc = &mut self.vcpus[v];
        if free {
            let l = &mut self.doms[vc.dom].locks[lock as usize];
            l.waiters.retain(|&w| w != v);
            l.holder = Some(v);
            vc.held.push((lock, kernel));
            vc.thread = Thread::Ready;
            self.to_advance.push_back(v);
        } else if budget == Some(0) {
            vc.thread = Thread::HaltedLock { lock, kicked: false };
            self.doms[vc.dom].pv_halts += 1;
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
        if dom.pv_spinlocks && kernel {
            // Paravirtual: hand over only to a head spinning on a pCPU; kick a halted head.
            let Some(&h) = l.waiters.front() else { return false };
            let hc = &mut self.vcpus[h];
            match (hc.state, hc.thread) {
                (VcpuState::Running(_), Thread::SpinLock { .. }) if hc.run_from <= now => {
                    l.waiters.pop_front();
                    l.holder = Some(h);
                    hc.held.push((lock, kernel));
                    self.release_waiter(h);
                }
                (_, Thread::HaltedLock { lock, kicked: false }) => {
                    hc.thread = Thread::HaltedLock { lock, kicked: true };
                    dom.pv_kicks += 1;
                    self.hosts[dom.host].ipis += 1;
                    let at = now + self.host.ipi_latency_ns;
                    self.post(at, Ev::Wake { v: h });
                    return true;
                }
                // Head about to execute: it takes the lock when it does (if nobody steals it).
                (VcpuState::Running(_), _) => {
                    self.sync(h);
                    self.arm(h);
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
                let vcpus = &self.vcpus;
                let running: Vec<usize> = (0..l.waiters.len())
                    .filter(|&i| {
                        let w = &vcpus[l.waiters[i]];
                        matches!(w.state, VcpuState::Running(_)) && w.run_from <= now
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
        let wc = &mut self.vcpus[w];
        let kernel = matches!(wc.thread, Thread::SpinLock { kernel: true, .. });
        wc.held.push((lock, kernel));
        if !matches!(wc.state, VcpuState::Running(_)) {
            dom.lock_waiter_preemptions += 1;
        }
        // A running waiter continues through a guest event in this same instant.
        self.release_waiter(w);
        false
    }
}
