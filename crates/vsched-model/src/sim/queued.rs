//! Queued spinlocks: MCS, and Linux's paravirtual qspinlock, which is the same queue plus
//! halting, kicking and lock stealing.
//!
//! **MCS** (`LockKind::Mcs`): Linux's native qspinlock (kernel/locking/qspinlock.c,
//! `queued_spin_lock_slowpath`, Linux 4.2 and later), reduced to its scheduling effects.
//! Waiters queue FIFO; the unlock only clears the lock (`queued_spin_unlock`); the head of
//! the queue takes it when it executes (`atomic_try_cmpxchg_relaxed` on the lock word after
//! `atomic_cond_read_acquire`), and hands the head role to the next node; a newcomer cannot
//! take a free lock while the queue has a tail (`queued_spin_trylock` fails on any set bit).
//! An unlock that leaves the lock to a head that does not execute (its vCPU preempted, or a
//! user-mode waiter switched out by its guest) is a lock-waiter preemption: the lock then
//! waits for that vCPU. The pending bit and the first waiter's spinning on it are left out:
//! a queue of one behaves the same.
//!
//! **Paravirtual** (`Paravirt::spinlocks`, kernel locks of every spinlock kind): the same
//! queue with the hooks of kernel/locking/qspinlock_paravirt.h (Linux 4.2 and later;
//! rules checked against Linux 6.x):
//! - a queued waiter spins `SPIN_THRESHOLD` (2^15) iterations of `spin_iteration_cycles`,
//!   then halts (`pv_wait_node`, `pv_wait_head_or_lock` → `pv_wait` → `kvm_wait`, a `HLT`:
//!   the vCPU blocks); a waiter that becomes the head of the queue gets a fresh threshold
//!   (`pv_wait_head_or_lock` starts its own loop);
//! - a waiter behind the head halts early when its predecessor halted (`pv_wait_early`,
//!   "locking/pvqspinlock: Queue node adaptive spinning", Linux 4.6): Linux checks every 256
//!   iterations (`PV_PREV_CHECK_MASK`, under 2 µs), we at once;
//! - an unlock hands the lock to a head spinning on a pCPU; a halted head is kicked
//!   (`pv_kick` → `kvm_kick_cpu` → `KVM_HC_KICK_CPU`): the host wakes its vCPU inside the
//!   hypercall (`kvm_pv_kick_cpu_op`), so the wake-up reaches the host scheduler in the same
//!   instant (`Core::to_wake`), and then yields to it (`kvm_sched_yield(vcpu, a1)` after the
//!   kick, arch/x86/kvm/x86.c, since commit 266e85a5ec9 "KVM: X86: Boost queue head vCPU
//!   to mitigate lock waiter preemption", Linux 5.4): `YieldReason::Kick` on
//!   `Core::to_yield`. The hypercall costs the kicker one exit (`vm_exit_ns`);
//! - a newcomer may steal the free lock while the head is not spinning on a pCPU
//!   (`pv_hybrid_queued_unfair_trylock`: the head sets the pending bit only while it spins);
//! - an unlock whose head does not execute (halted or preempted) counts as a lock-waiter
//!   preemption, as for MCS.
//!
//! Approximated: a waiter's `pv_state` flips to running when it is woken rather than when it
//! next runs; a stealer that finds the lock held queues at once rather than spinning in the
//! unfair loop first.

use super::guest_sched::executing;
use super::locks::{Lock, WaitAction};
use super::state::{Core, GuestThread, ThreadState, Vcpu};
use crate::ids::{DomId, ThreadId, VcpuId};
use crate::policy::YieldReason;

/// Whether a newcomer may take `l` if it is free: with an empty queue only, except that a
/// paravirtual lock may be stolen while its head is not spinning on a pCPU.
pub(super) fn queued_may_take(vcpus: &[Vcpu], threads: &[GuestThread], l: &Lock, pv: bool) -> bool {
    match l.waiters.front() {
        None => true,
        Some(&h) => pv && !(executing(vcpus, threads, h) && matches!(threads[h].state, ThreadState::SpinLock { .. })),
    }
}

impl Core {
    /// What queued waiter `t` of `l` does when it executes: the head takes a free lock; a
    /// paravirtual waiter behind a halted one halts (`pv_wait_early`).
    pub(super) fn queued_action(&self, l: &Lock, t: ThreadId, pv: bool) -> WaitAction {
        if l.holder.is_none() && l.waiters.front() == Some(&t) {
            return WaitAction::Take;
        }
        if pv && self.predecessor(l, t).is_some_and(|p| matches!(self.threads[p].state, ThreadState::HaltedLock { .. }))
        {
            return WaitAction::Halt;
        }
        WaitAction::Spin
    }

    /// The waiter queued just ahead of `t` in `l`, if any.
    fn predecessor(&self, l: &Lock, t: ThreadId) -> Option<ThreadId> {
        let i = l.waiters.iter().position(|&w| w == t)?;
        i.checked_sub(1).map(|p| l.waiters[p])
    }

    /// The unlock of a queued lock by vCPU `v` (see the module notes). Returns the kick
    /// hypercall's cost if it kicked.
    pub(super) fn queued_unlock(&mut self, v: VcpuId, d: DomId, lock: u32, kernel: bool, pv: bool) -> Option<u64> {
        let now = self.now();
        let dom = &mut self.doms[d];
        let l = &mut dom.locks[lock as usize];
        l.holder = None;
        let &h = l.waiters.front()?;
        let hv = self.threads[h].vcpu;
        let running = executing(&self.vcpus, &self.threads, h);
        if !running {
            dom.lock_waiter_preemptions += 1;
        }
        match self.threads[h].state {
            // The head spins on a pCPU: it takes the lock in this instant.
            ThreadState::SpinLock { .. } if running && self.vcpus[hv].run_from <= now => {
                l.waiters.pop_front();
                l.holder = Some(h);
                self.threads[h].held.push((lock, kernel));
                self.trace_handoff(h, lock);
                self.release_waiter(h);
                if pv {
                    self.pv_new_head(d, lock);
                }
            }
            ThreadState::HaltedLock { lock, kicked: false } if pv => {
                self.threads[h].state = ThreadState::HaltedLock { lock, kicked: true };
                dom.pv_kicks += 1;
                self.to_wake.push_back(h);
                self.to_yield.push_back((v, YieldReason::Kick { target: hv }));
                return Some(self.host.vm_exit_ns);
            }
            // About to execute (its dispatch overheads): it takes the lock when it does, if
            // nobody steals it first.
            _ if running => {
                self.sync(hv);
                self.arm(hv);
            }
            // Preempted, or kicked and not running yet: the lock waits for it.
            _ => {}
        }
        None
    }

    /// The head of paravirtual `lock`'s queue left it (it took the lock): the next waiter is
    /// the head now and, if it spins, starts `pv_wait_head_or_lock`'s fresh threshold. (A
    /// halted one stays halted until an unlock kicks it, as `pv_kick_node` arranges.)
    pub(super) fn pv_new_head(&mut self, d: DomId, lock: u32) {
        let Some(&h) = self.doms[d].locks[lock as usize].waiters.front() else { return };
        if !matches!(self.threads[h].state, ThreadState::SpinLock { .. }) {
            return;
        }
        let hv = self.threads[h].vcpu;
        let running = executing(&self.vcpus, &self.threads, h);
        if running {
            self.sync(hv);
        }
        if let ThreadState::SpinLock { budget, .. } = &mut self.threads[h].state {
            *budget = Some(self.pv_spin_ns);
        }
        if running {
            self.arm(hv);
        }
    }

    /// The paravirtual waiter on running vCPU `v` halts (`pv_wait`): its vCPU blocks until a
    /// kick. The waiter behind it, if it spins on a pCPU, sees it halt and halts too
    /// (`pv_wait_early`), and so on down the queue.
    pub(super) fn pv_halt(&mut self, v: VcpuId, lock: u32) {
        let t = self.vcpus[v].curr;
        let d = self.threads[t].dom;
        self.threads[t].state = ThreadState::HaltedLock { lock, kicked: false };
        self.doms[d].pv_halts += 1;
        self.block(v);
        let l = &self.doms[d].locks[lock as usize];
        let i = l.waiters.iter().position(|&w| w == t).expect("a halting waiter is queued");
        if let Some(&s) = l.waiters.get(i + 1) {
            if executing(&self.vcpus, &self.threads, s) && matches!(self.threads[s].state, ThreadState::SpinLock { .. })
            {
                let sv = self.threads[s].vcpu;
                self.sync(sv);
                self.arm(sv);
            }
        }
    }
}
