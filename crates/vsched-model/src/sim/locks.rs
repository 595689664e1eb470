//! Guest locks: the lock table, and what each kind does when a thread asks for a lock, while
//! it waits, and at the unlock. The queued kinds (MCS, paravirtual) live in `queued`, the
//! mutex in `mutex`; ticket, test-and-set and preemptable ticket locks are here.
//!
//! A test-and-set lock goes to one of the waiters executing at the unlock (chosen at
//! random: they race); a ticket lock to the next ticket in line whether its vCPU runs or
//! not (a lock-waiter preemption if it does not). Spinning burns the waiter's pCPU time and
//! raises pause-loop exits in kernel mode (`ple`).
//!
//! Preemptable ticket lock (Ouyang and Lange, "Preemptable ticket spinlocks: improving
//! consolidated performance in the cloud", VEE 2013; the rule below is the authors' patch
//! published with the paper, `__ticket_spin_lock` in github.com/drouyang/pmtlock
//! vee13/pmtlock-v1.0.patch, Linux 3.5): a thread takes a ticket; if no one is ahead of it
//! it competes for the lock at once. Otherwise it waits in line for a timeout of
//! `TIMEOUT_UNIT` (2^14) loop iterations per ticket between its own and the one being
//! served, restarted whenever the line moves (an unlock); when its turn comes, or the
//! timeout runs out, it spins on a test-and-set flag and takes the lock whenever it finds it
//! free, out of order if need be. The timeout counts iterations of the waiter's loop, as
//! the patch does, so it only runs down while the waiter runs (`HostConfig::pmt_unit_ns`
//! turns the count into spinning time). An unlock moves the line by one whoever held the
//! lock.

use std::collections::VecDeque;

use rand::Rng;
use vsched_engine::Time;

use super::guest_sched::executing;
use super::interpret::Step;
use super::queued::queued_may_take;
use super::state::{Core, ThreadState};
use crate::guest::{LockChoice, LockKind};
use crate::ids::{DomId, ThreadId, VcpuId};

/// One guest lock of a domain.
#[derive(Default)]
pub(super) struct Lock {
    pub(super) holder: Option<ThreadId>,
    /// Ticket order (ticket locks), the set of spinners (test-and-set), the FIFO of queued
    /// waiters (MCS, paravirtual), or the wait list of sleepers (mutex).
    pub(super) waiters: VecDeque<ThreadId>,
    /// Mutex: its optimistic spinners, in arrival order.
    pub(super) spinners: VecDeque<ThreadId>,
    /// Mutex: the first waiter asked that the lock be handed to it (`MUTEX_FLAG_HANDOFF`).
    pub(super) handoff: bool,
    /// Preemptable ticket: the next ticket to hand out, and the one being served (the count
    /// of unlocks so far).
    pub(super) next_ticket: u64,
    pub(super) head: u64,
}

/// How a domain's lock behaves for an acquisition in kernel mode or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flavour {
    Ticket,
    Tas,
    /// MCS, or (`pv`) Linux's paravirtual qspinlock.
    Queued {
        pv: bool,
    },
    Preemptable,
    Mutex,
}

/// What a lock waiter does as soon as it executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WaitAction {
    /// Keeps spinning (until its budget runs out or a pause-loop exit).
    Spin,
    /// Takes the free lock.
    Take,
    /// Halts: a paravirtual waiter whose predecessor in the queue halted (`pv_wait_early`).
    Halt,
    /// Mutex: goes to sleep, the owner being off its CPU.
    Sleep,
    /// Mutex: the woken first waiter finds the lock taken and asks for a handoff.
    Handoff,
}

impl Core {
    /// The behaviour of domain `d`'s locks taken in kernel mode or not. Paravirtual spinlocks
    /// replace every spinlock kind for kernel locks (`pv_lock_ops` replace the native ones);
    /// a mutex is a mutex whatever the spinlocks are.
    pub(super) fn flavour(&self, d: DomId, kernel: bool) -> Flavour {
        let dom = &self.doms[d];
        match dom.lock_kind {
            LockKind::Mutex => Flavour::Mutex,
            _ if dom.info.pv.spinlocks && kernel => Flavour::Queued { pv: true },
            LockKind::Ticket => Flavour::Ticket,
            LockKind::Tas => Flavour::Tas,
            LockKind::Mcs => Flavour::Queued { pv: false },
            LockKind::PreemptableTicket => Flavour::Preemptable,
        }
    }

    /// What the lock waiter vCPU `v` runs does as soon as it executes (`Spin` for a thread
    /// that waits for no lock). A ticket lock is handed over by the unlock itself.
    pub(super) fn wait_action(&self, v: VcpuId) -> WaitAction {
        let t = self.vcpus[v].curr;
        let th = &self.threads[t];
        let ThreadState::SpinLock { lock, kernel, budget } = th.state else { return WaitAction::Spin };
        let l = &self.doms[th.dom].locks[lock as usize];
        let free = l.holder.is_none();
        match self.flavour(th.dom, kernel) {
            Flavour::Ticket => WaitAction::Spin,
            Flavour::Tas if free => WaitAction::Take,
            Flavour::Tas => WaitAction::Spin,
            Flavour::Queued { pv } => self.queued_action(l, t, pv),
            // Its turn came or its timeout ran out (no budget left): it may take a free lock.
            Flavour::Preemptable if free && budget.is_none() => WaitAction::Take,
            Flavour::Preemptable => WaitAction::Spin,
            Flavour::Mutex => self.mutex_action(l, t),
        }
    }

    /// `lock(choice, kernel)`: take the lock if it is free and this thread may take it,
    /// else wait as its kind says.
    pub(super) fn lock(&mut self, v: VcpuId, d: DomId, choice: LockChoice, kernel: bool) -> Step {
        let now = self.now();
        let dom = &mut self.doms[d];
        let lock = match choice {
            LockChoice::Fixed(l) => l,
            LockChoice::Uniform => dom.rng.gen_range(0..dom.locks.len() as u32),
        };
        let flavour = self.flavour(d, kernel);
        if flavour == Flavour::Mutex {
            return self.mutex_lock(v, d, lock);
        }
        let t = self.vcpus[v].curr;
        let dom = &mut self.doms[d];
        let l = &mut dom.locks[lock as usize];
        let mut budget = None;
        let may_take = match flavour {
            Flavour::Ticket => l.waiters.is_empty(),
            Flavour::Tas => true,
            Flavour::Queued { pv } => queued_may_take(&self.vcpus, &self.threads, l, pv),
            Flavour::Preemptable => {
                let ticket = l.next_ticket;
                l.next_ticket += 1;
                self.threads[t].ticket = ticket;
                // Nobody ahead (no holder, no waiter): straight to the test-and-set.
                if ticket > l.head {
                    budget = Some(self.pmt_unit_ns * (ticket - l.head));
                }
                ticket == l.head
            }
            Flavour::Mutex => unreachable!("handled above"),
        };
        let th = &mut self.threads[t];
        if l.holder.is_none() && may_take {
            l.holder = Some(t);
            th.held.push((lock, kernel));
            return Step::Next;
        }
        l.waiters.push_back(t);
        if flavour == (Flavour::Queued { pv: true }) {
            budget = Some(self.pv_spin_ns);
        }
        th.state = ThreadState::SpinLock { lock, kernel, budget };
        let vc = &mut self.vcpus[v];
        vc.ple_from = now.max(vc.run_from);
        self.wait_running(v)
    }

    /// The guest event of a spinning lock waiter: take the lock, halt a paravirtual waiter
    /// (its budget ran out: `pv_wait`, or its predecessor halted: `pv_wait_early`), end a
    /// preemptable-ticket waiter's timeout, or check for a pause-loop exit and keep spinning.
    pub(super) fn lock_wait_event(&mut self, v: VcpuId, lock: u32, kernel: bool, budget: Option<Time>) {
        let d = self.curr_thread(v).dom;
        let flavour = self.flavour(d, kernel);
        if flavour == Flavour::Mutex {
            return self.mutex_wait_event(v, lock);
        }
        let mut action = self.wait_action(v);
        if budget == Some(0) {
            match flavour {
                Flavour::Queued { pv: true } if action != WaitAction::Take => action = WaitAction::Halt,
                Flavour::Preemptable => {
                    self.curr_thread_mut(v).state = ThreadState::SpinLock { lock, kernel, budget: None };
                    action = self.wait_action(v);
                }
                _ => {}
            }
        }
        match action {
            WaitAction::Take => {
                self.take_waited(v, lock, kernel);
                if flavour == (Flavour::Queued { pv: true }) {
                    self.pv_new_head(d, lock);
                }
            }
            WaitAction::Halt => self.pv_halt(v, lock),
            WaitAction::Spin => {
                self.ple_exit_if_due(v);
                self.arm_spinner(v);
            }
            WaitAction::Sleep | WaitAction::Handoff => unreachable!("only a mutex waiter sleeps or asks for a handoff"),
        }
    }

    /// The waiter on running vCPU `v` takes the free `lock` and goes on at once.
    pub(super) fn take_waited(&mut self, v: VcpuId, lock: u32, kernel: bool) {
        let t = self.vcpus[v].curr;
        let th = &mut self.threads[t];
        let l = &mut self.doms[th.dom].locks[lock as usize];
        l.waiters.retain(|&w| w != t);
        l.spinners.retain(|&w| w != t);
        l.handoff = false;
        l.holder = Some(t);
        th.held.push((lock, kernel));
        th.state = ThreadState::Ready;
        self.to_advance.push_back(v);
    }

    /// Vcpu `v` releases `lock` of domain `d` (taken in kernel mode or not) and hands it on.
    /// Returns how long the unlock stops `v` (a hypercall, an IPI's exit), if it does.
    pub(super) fn unlock(&mut self, v: VcpuId, d: DomId, lock: u32, kernel: bool) -> Option<Time> {
        match self.flavour(d, kernel) {
            Flavour::Mutex => return self.mutex_unlock(d, lock),
            Flavour::Queued { pv } => return self.queued_unlock(v, d, lock, kernel, pv),
            Flavour::Preemptable => {
                self.pmt_unlock(d, lock);
                return None;
            }
            Flavour::Ticket | Flavour::Tas => {}
        }
        let dom = &mut self.doms[d];
        let l = &mut dom.locks[lock as usize];
        l.holder = None;
        let next = match dom.lock_kind {
            // Ticket: the next ticket in line owns the lock now, running or not.
            LockKind::Ticket => l.waiters.pop_front(),
            // Test-and-set: one of the spinners that is executing right now wins the race.
            _ => {
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
        let w = next?;
        l.holder = Some(w);
        let th = &mut self.threads[w];
        let kernel = matches!(th.state, ThreadState::SpinLock { kernel: true, .. });
        th.held.push((lock, kernel));
        // The next in line does not execute: its vCPU is preempted, or its guest switched it
        // out (a user-mode waiter whose time slice ran out).
        if !executing(&self.vcpus, &self.threads, w) {
            dom.lock_waiter_preemptions += 1;
        }
        self.trace_handoff(w, lock);
        // A running waiter continues through a guest event in this same instant.
        self.release_waiter(w);
        None
    }

    /// Preemptable ticket unlock (`__ticket_spin_unlock`: the head moves, the flag clears).
    /// Every waiter still in its timed wait sees the head move and restarts its timeout from
    /// its new distance; the one whose turn it is now stops waiting. Then the waiters that
    /// may compete and are executing race for the flag, as at a test-and-set lock.
    fn pmt_unlock(&mut self, d: DomId, lock: u32) {
        let now = self.now();
        let unit = self.pmt_unit_ns;
        let l = &mut self.doms[d].locks[lock as usize];
        l.holder = None;
        l.head += 1;
        let head = l.head;
        let waiters: Vec<ThreadId> = l.waiters.iter().copied().collect();
        let mut turn_preempted = false;
        for &w in &waiters {
            let wv = self.threads[w].vcpu;
            let running = executing(&self.vcpus, &self.threads, w);
            if running {
                self.sync(wv);
            }
            let th = &mut self.threads[w];
            let ticket = th.ticket;
            if ticket == head && !running {
                turn_preempted = true;
            }
            if let ThreadState::SpinLock { budget: budget @ Some(_), .. } = &mut th.state {
                *budget = (ticket > head).then(|| unit * (ticket - head));
            }
        }
        // A lock-waiter preemption as at a ticket lock: the next in line does not execute.
        // Here the lock does not wait for it, only for the others' timeouts.
        let dom = &mut self.doms[d];
        if turn_preempted {
            dom.lock_waiter_preemptions += 1;
        }
        let racers: Vec<ThreadId> = waiters
            .iter()
            .copied()
            .filter(|&w| {
                let vc = &self.vcpus[self.threads[w].vcpu];
                executing(&self.vcpus, &self.threads, w)
                    && vc.run_from <= now
                    && matches!(self.threads[w].state, ThreadState::SpinLock { budget: None, .. })
            })
            .collect();
        let winner = match racers.len() {
            0 => None,
            1 => Some(racers[0]),
            n => Some(racers[dom.rng.gen_range(0..n)]),
        };
        if let Some(w) = winner {
            let l = &mut dom.locks[lock as usize];
            l.waiters.retain(|&u| u != w);
            l.holder = Some(w);
            let th = &mut self.threads[w];
            let kernel = matches!(th.state, ThreadState::SpinLock { kernel: true, .. });
            th.held.push((lock, kernel));
            self.trace_handoff(w, lock);
            self.release_waiter(w);
        }
        // The others' timeouts changed: their next guest events with them.
        for w in waiters {
            if Some(w) != winner && executing(&self.vcpus, &self.threads, w) {
                self.arm(self.threads[w].vcpu);
            }
        }
    }
}
