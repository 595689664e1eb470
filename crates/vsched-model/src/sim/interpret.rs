//! The guest interpreter: each vCPU's thread runs its program of instructions.
//!
//! A vCPU dispatched at `t` starts executing guest code at `t + overhead` (see `dispatch`).
//! Progress is analytic: a compute of `d` that starts at `s` finishes at `s + d` unless the
//! vCPU is descheduled first, in which case what is left is kept. Spinning is a state, not a
//! loop of events: a spinner costs one event when it starts, one when its wait ends, and one
//! per pause-loop exit. Each running vCPU has at most one pending guest event, stamped with
//! a generation number; descheduling bumps the generation, which cancels the event in O(1)
//! (a stale event is dropped when it surfaces and is not counted).
//!
//! Instructions that wait on others live with what they wait on: locks in `locks` (and
//! `queued`, `mutex`),
//! `ipi_sync` in `irq`, `send`/`recv` and the driver domain's `NetServe` in `network`, `disk` in `disk`.

use vsched_engine::Time;

use super::events::Ev;
use super::locks::WaitAction;
use super::state::{Core, PendingGuestEvent, SpinLimit, ThreadState};
use crate::domain::VcpuState;
use crate::guest::{BarrierWait, Dur, Instr, FOREVER};
use crate::ids::{DomId, PcpuId, ThreadId, VcpuId};

/// Steps one thread may take in one instant before its program is declared to loop without
/// taking time: far more than any program of ours takes between two durations.
const MAX_STEPS_PER_INSTANT: u32 = 1_000_000;

/// What an instruction left the guest thread doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Go on to the next instruction at once.
    Next,
    /// The thread computes, spins or blocks: interpretation stops until its next event.
    Wait,
}

impl Core {
    /// Accounts the guest progress of a running vCPU up to now.
    pub(super) fn sync(&mut self, v: VcpuId) {
        let now = self.now();
        let vc = &mut self.vcpus[v];
        let from = vc.synced_to.max(vc.run_from);
        vc.synced_to = now;
        if !matches!(vc.state, VcpuState::Running(_)) || now <= from {
            return;
        }
        let elapsed = now - from;
        vc.guest_slice_ns += elapsed;
        let t = vc.curr;
        let work = self.smt_work_in(v, elapsed);
        let vc = &mut self.vcpus[v];
        match &mut self.threads[t].state {
            ThreadState::Computing { left } => *left -= work.min(*left),
            ThreadState::SpinLock { budget, .. } => {
                vc.spin_ns += elapsed;
                if let Some(b) = budget {
                    *b -= elapsed.min(*b);
                }
            }
            ThreadState::SpinIpi { .. } => vc.spin_ns += elapsed,
            ThreadState::SpinBarrier { limit } | ThreadState::SpinRecv { limit, .. } => {
                vc.spin_ns += elapsed;
                if let SpinLimit::Running(l) = limit {
                    *l -= elapsed.min(*l);
                }
            }
            _ => {}
        }
    }

    /// Running vCPU `v`'s guest code stops for `ns` more (VM exits, an interrupt handler)
    /// before it goes on; the caller re-arms its guest event.
    pub(super) fn stall(&mut self, v: VcpuId, ns: Time) {
        let now = self.now();
        let vc = &mut self.vcpus[v];
        vc.run_from = vc.run_from.max(now) + ns;
    }

    /// (Re)schedules the single pending guest event of a running vCPU.
    pub(super) fn arm(&mut self, v: VcpuId) {
        self.arm_with(v, Self::next_guest_event);
    }

    /// [`Core::arm`] for a spinning lock waiter whose [`Core::wait_action`] was just found
    /// to be `Spin` (`locks::lock_wait_event`), with nothing changed since but its PLE
    /// state: only its spinning can end, so the lock is not looked at a second time.
    pub(super) fn arm_spinner(&mut self, v: VcpuId) {
        debug_assert!(self.wait_action(v) == WaitAction::Spin);
        self.arm_with(v, Self::spin_event);
    }

    /// `arm`, with `next` saying when the thread next needs the interpreter.
    #[inline(always)]
    fn arm_with(&mut self, v: VcpuId, next: fn(&Self, VcpuId, Time) -> Option<Time>) {
        let now = self.now();
        let vc = &mut self.vcpus[v];
        vc.gen = vc.gen.wrapping_add(1);
        if !matches!(vc.state, VcpuState::Running(_)) {
            return;
        }
        let (gen, from) = (vc.gen, now.max(vc.run_from));
        // Up for its guest timer: the handler ends at `from` (`guest_kernel`).
        let at = if vc.timer_wake { Some(from) } else { next(self, v, from) };
        if let Some(at) = at.filter(|&at| at < FOREVER) {
            if at > now {
                // Queued when this instant's events are all handled, and only if still wanted
                // (`events::queue_guest_events`).
                let ticket = self.queue.reserve();
                self.guest_events_due.push(PendingGuestEvent { v, gen, at, ticket });
            } else {
                self.post(at, Ev::Guest { v, gen });
            }
        }
    }

    /// When running vCPU `v`'s thread, executing from `from` on, next needs the interpreter:
    /// its compute ends, its spinning must be looked at, or never (None).
    fn next_guest_event(&self, v: VcpuId, from: Time) -> Option<Time> {
        // A polling vCPU's thread is halted: the poll's end (`halt_poll`).
        if let Some(at) = self.poll_end_at(v, from) {
            return Some(at);
        }
        match self.threads[self.vcpus[v].curr].state {
            ThreadState::Ready | ThreadState::Unstarted { .. } => Some(from),
            ThreadState::Computing { left } => Some(from.saturating_add(self.smt_time_for(v, left))),
            // Something to do about the lock (take it, halt, sleep): as soon as we execute.
            ThreadState::SpinLock { .. } if self.wait_action(v) != WaitAction::Spin => Some(from),
            ThreadState::SpinLock { .. } | ThreadState::SpinIpi { .. } => self.spin_event(v, from),
            ThreadState::SpinBarrier { limit } | ThreadState::SpinRecv { limit, .. } => match limit {
                SpinLimit::Never => None,
                SpinLimit::Running(l) => Some(from + l),
                // A deadline that passed while the vCPU was away: check as soon as it runs.
                SpinLimit::At(t) => Some(from.max(t)),
            },
            ThreadState::BlockedIo
            | ThreadState::BlockedBarrier
            | ThreadState::BlockedRecv { .. }
            | ThreadState::BlockedNet
            | ThreadState::BlockedStart
            | ThreadState::HaltedLock { .. }
            | ThreadState::SleepMutex { .. }
            | ThreadState::Exited => None,
        }
    }

    /// When running vCPU `v`'s thread, spinning on from `from` (a lock it may not take yet,
    /// IPI acknowledgements), next needs the interpreter: its pause-loop exit, or the end of
    /// its spin budget.
    fn spin_event(&self, v: VcpuId, from: Time) -> Option<Time> {
        match self.threads[self.vcpus[v].curr].state {
            ThreadState::SpinLock { budget, .. } => match (self.ple_deadline(v), budget.map(|b| from + b)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            ThreadState::SpinIpi { .. } => self.ple_deadline(v),
            _ => unreachable!("vCPU {v} does not spin"),
        }
    }

    /// A running vCPU's pending guest event fired.
    pub(super) fn guest_event(&mut self, v: VcpuId) {
        // An event starts with nothing left over from the last one (`Simulation::drain`), so
        // a thread that goes on now is interpreted first, right here, exactly where popping
        // it from `to_advance` would have put it.
        debug_assert!(self.to_advance.is_empty());
        self.sync(v);
        let now = self.queue.now();
        if self.poll_timed_out(v) {
            return;
        }
        if self.vcpus[v].timer_wake && self.timer_handler_done(v) {
            return;
        }
        let t = self.vcpus[v].curr;
        let th = &mut self.threads[t];
        let mut goes_on = false;
        match th.state {
            ThreadState::Ready => goes_on = true,
            // Not started yet: idle until the workload starts (`clocks`).
            ThreadState::Unstarted { at } if at > self.queue.now() => {
                th.state = ThreadState::BlockedStart;
                self.post(at, Ev::Wake { t });
                self.block(v);
            }
            ThreadState::Unstarted { .. } => {
                th.state = ThreadState::Ready;
                goes_on = true;
            }
            ThreadState::Computing { left } => {
                if left == 0 {
                    th.state = ThreadState::Ready;
                    goes_on = true;
                } else {
                    self.arm(v);
                }
            }
            ThreadState::SpinLock { lock, kernel, budget } => self.lock_wait_event(v, lock, kernel, budget),
            ThreadState::SpinIpi { .. } => self.maybe_ple_exit(v),
            ThreadState::SpinBarrier { limit } if limit.expired(now) => {
                th.state = ThreadState::BlockedBarrier;
                self.block(v);
            }
            ThreadState::SpinRecv { from, limit } if limit.expired(now) => {
                th.state = ThreadState::BlockedRecv { from };
                self.block(v);
            }
            _ => self.arm(v),
        }
        self.trace_state(v);
        if goes_on {
            self.advance(v);
        }
    }

    /// The thread of running vCPU `v` waits on its own (a compute, a spin): its next guest
    /// event is armed and the trace notes whether it spins.
    pub(super) fn wait_running(&mut self, v: VcpuId) -> Step {
        self.arm(v);
        self.trace_state(v);
        Step::Wait
    }

    /// The running thread of `v` blocks: the vCPU runs another thread of its guest
    /// (`guest_sched`), or halts and its pCPU reschedules in this same instant (until then
    /// it is still `curr` there, for zero time).
    pub(super) fn block(&mut self, v: VcpuId) {
        self.sync(v);
        if self.switch_on_block(v) {
            return;
        }
        // Or it polls first (`halt_poll`).
        if self.halt_poll_begins(v) {
            return;
        }
        self.halt(v, true);
    }

    /// Running vCPU `v` halts (its guest has nothing to run) and its pCPU reschedules in this
    /// same instant; `arm_timer` unless its idle timer is armed already (a poll armed it).
    pub(super) fn halt(&mut self, v: VcpuId, arm_timer: bool) {
        let p = self.halt_in_place(v, arm_timer);
        self.to_sleep.push_back((v, p));
    }

    /// `halt` but for the reschedule, which the caller sees to. Returns the vCPU's pCPU.
    pub(super) fn halt_in_place(&mut self, v: VcpuId, arm_timer: bool) -> PcpuId {
        let vc = &mut self.vcpus[v];
        vc.gen = vc.gen.wrapping_add(1);
        let VcpuState::Running(p) = vc.state else { unreachable!("only a running thread blocks") };
        // Pending interrupts are taken on the way to halt (`sti; hlt`).
        for s in std::mem::take(&mut vc.irqs) {
            self.ipi_taken(s, v);
        }
        self.set_state(v, VcpuState::Blocked);
        if arm_timer {
            self.arm_idle_timer(v);
        }
        // A mutex owner that blocks is off its CPU: its spinners see it.
        self.mutex_owner_moved(self.vcpus[v].curr);
        p
    }

    /// Thread `t`'s wake-up arrived (I/O done, a kick, an interrupt): it resumes, and its
    /// halted vCPU becomes runnable. A vCPU up for its guest timer (`guest_kernel`) is not
    /// halted: the thread resumes there. A thread switched out goes where its guest
    /// scheduler puts it (`guest_sched`). Returns the vCPU whose wake-up the policy must hear
    /// of; none when the vCPU was not halted, its VM was destroyed while the thread waited,
    /// or the wake is stale.
    pub(super) fn wake(&mut self, t: ThreadId) -> Option<VcpuId> {
        let v = self.threads[t].vcpu;
        if self.vcpus[v].curr != t {
            return self.wake_asleep(t);
        }
        let vc = &self.vcpus[v];
        // Up for its guest timer only (`guest_kernel`): its thread resumes where the vCPU is.
        let timer_woken = vc.timer_wake && matches!(vc.state, VcpuState::Runnable | VcpuState::Running(_));
        if vc.state != VcpuState::Blocked && !timer_woken && vc.halt.poll.is_none() {
            return None;
        }
        if !self.resume(t) {
            return None;
        }
        self.resume_vcpu(v)
    }

    /// Blocked thread `t` takes its wake-up: false if the wake is stale (the wait it was
    /// meant to end is over: the thread went on when its vCPU was up for its guest timer, and
    /// now waits for something else).
    pub(super) fn resume(&mut self, t: ThreadId) -> bool {
        let now = self.now();
        let th = &mut self.threads[t];
        th.state = match th.state {
            // Its waker made it ready (a barrier, a message, a driver-domain pass).
            ThreadState::Ready | ThreadState::BlockedStart => ThreadState::Ready,
            ThreadState::BlockedIo => {
                th.io_done_at = Some(now);
                ThreadState::Ready
            }
            // Kicked: back to spinning at the head of the queue, with a fresh budget.
            ThreadState::HaltedLock { lock, .. } => {
                ThreadState::SpinLock { lock, kernel: true, budget: Some(self.pv_spin_ns) }
            }
            // Woken on a mutex's wait list: it tries again when it runs (`sim/mutex.rs`).
            ThreadState::SleepMutex { lock, .. } => ThreadState::SpinLock { lock, kernel: true, budget: None },
            _ => return false,
        };
        true
    }

    /// Halted vCPU `v`, or one up for its guest timer, goes on with its (new) current
    /// thread: a halted one becomes runnable and is returned (the policy must hear of it). One
    /// up for its timer and running now touches its thread's footprint (`cache`).
    pub(super) fn resume_vcpu(&mut self, v: VcpuId) -> Option<VcpuId> {
        if self.idle_polling(v) {
            return self.poll_woken(v);
        }
        let vc = &mut self.vcpus[v];
        if vc.timer_wake {
            vc.timer_wake = false;
            self.retouch(v);
            self.arm(v);
            return None;
        }
        vc.woke_at = Some(self.queue.now());
        self.set_state(v, VcpuState::Runnable);
        Some(v)
    }

    /// Makes a waiting thread continue (it got its lock, its barrier opened, its message
    /// arrived, its IPIs were acknowledged). True if it was blocked, so that waking it took
    /// an interrupt.
    pub(super) fn release_waiter(&mut self, w: ThreadId) -> bool {
        let v = self.threads[w].vcpu;
        let current = self.vcpus[v].curr == w;
        if current {
            self.sync(v);
        }
        let th = &mut self.threads[w];
        let blocked = matches!(
            th.state,
            ThreadState::BlockedBarrier
                | ThreadState::BlockedRecv { .. }
                | ThreadState::SleepMutex { woken: false, .. }
        );
        th.state = ThreadState::Ready;
        if blocked {
            return self.send_wake(w);
        } else if current {
            self.arm(v);
            self.trace_state(v);
        }
        blocked
    }

    /// Blocked thread `w` is woken by an interrupt: an IPI from the vCPU that releases it, or
    /// the virtual NIC's, which arrives one IPI latency later. A vCPU polling in its guest
    /// needs none: the waker sets `need_resched`, seen at once (`halt_poll`). True if an
    /// interrupt was sent.
    pub(super) fn send_wake(&mut self, w: ThreadId) -> bool {
        let v = self.threads[w].vcpu;
        if self.guest_polling(v) {
            self.post(self.queue.now(), Ev::Wake { t: w });
            return false;
        }
        let at = self.queue.now() + self.host.ipi_latency_ns;
        self.hosts[self.vcpus[v].host].ipis += 1;
        self.post(at, Ev::Wake { t: w });
        true
    }

    /// Interprets `v`'s program from its current instruction until it must wait.
    pub(super) fn advance(&mut self, v: VcpuId) {
        let now = self.now();
        debug_assert!(matches!(self.vcpus[v].state, VcpuState::Running(_)));
        for _ in 0..MAX_STEPS_PER_INSTANT {
            let t = self.vcpus[v].curr;
            let th = &mut self.threads[t];
            let d = th.dom;
            let instr = th.program[th.pc].clone();
            th.pc += 1;
            let step = match instr {
                Instr::Compute(dur) => self.compute(v, d, dur),
                Instr::Lock { choice, kernel } => self.lock(v, d, choice, kernel),
                Instr::Unlock => {
                    let (lock, kernel) = th.held.pop().expect("workload unlocks a lock it does not hold");
                    // A kick hypercall, or the exit of a wake-up IPI.
                    if let Some(ns) = self.unlock(v, d, lock, kernel) {
                        self.stall(v, ns);
                    }
                    if kernel {
                        self.section_ended(v);
                    }
                    Step::Next
                }
                Instr::IpiSync => self.ipi_sync(v, d),
                Instr::Barrier(wait) => self.barrier(v, d, wait),
                Instr::Io(dur) => {
                    let dt = dur.sample(&mut self.doms[d].rng);
                    self.threads[t].state = ThreadState::BlockedIo;
                    self.post(now + dt, Ev::Wake { t });
                    self.block(v);
                    Step::Wait
                }
                Instr::Repeat { times, .. } => {
                    th.loops.push((th.pc, times));
                    Step::Next
                }
                Instr::EndRepeat => {
                    let top = th.loops.last_mut().expect("EndRepeat without Repeat");
                    match top.1 {
                        None => th.pc = top.0,
                        Some(n) if n > 1 => {
                            top.1 = Some(n - 1);
                            th.pc = top.0;
                        }
                        _ => {
                            th.loops.pop();
                        }
                    }
                    Step::Next
                }
                Instr::RequestBegin => {
                    let (arrived, io_done) = (th.arrived_at.take(), th.io_done_at.take());
                    th.request_start = arrived.or(io_done).unwrap_or(now);
                    Step::Next
                }
                Instr::RequestEnd => {
                    let latency = now - th.request_start;
                    self.doms[d].request_latencies.record(latency);
                    Step::Next
                }
                Instr::Send { to, bytes } => {
                    self.send(v, to, bytes);
                    Step::Next
                }
                Instr::Recv { from, wait } => self.recv(v, d, from, wait),
                Instr::NetServe => self.net_serve(v, d),
                Instr::Disk { bytes } => self.disk_io(v, bytes),
                Instr::ClientRequest(gap) => self.client_request(v, gap),
                Instr::ClientReply { bytes } => self.client_reply(v, bytes),
                Instr::Exit => self.exit(v, d),
            };
            if step == Step::Wait {
                return;
            }
        }
        // A program whose loop takes no time would never return: the run stops instead
        // (`watchdog`).
        let t = self.vcpus[v].curr;
        self.stalled.get_or_insert(self.threads[t].dom);
    }

    /// `compute(dur)`: a sampled duration of progress (none if it samples to 0).
    fn compute(&mut self, v: VcpuId, d: DomId, dur: Dur) -> Step {
        let t: Time = dur.sample(&mut self.doms[d].rng);
        if t == 0 {
            return Step::Next;
        }
        self.curr_thread_mut(v).state = ThreadState::Computing { left: t };
        self.wait_running(v)
    }

    /// `barrier(wait)`: the last of the domain's vCPUs to arrive releases the others; the
    /// others spin, block, or spin then block.
    fn barrier(&mut self, v: VcpuId, d: DomId, wait: BarrierWait) -> Step {
        let dom = &mut self.doms[d];
        dom.barrier_arrived += 1;
        if dom.barrier_arrived == dom.barrier_parties {
            dom.barrier_arrived = 0;
            let mut halted = 0;
            for w in std::mem::take(&mut dom.barrier_waiters) {
                halted += self.release_waiter(w) as u64;
            }
            // The last thread wakes each halted waiter's vCPU with a rescheduling IPI
            // (`try_to_wake_up` → `smp_send_reschedule`): without IPI virtualization each ICR
            // write exits (`sim/irq.rs`).
            if !self.host.ipi_virtualization {
                self.stall(v, halted * self.host.vm_exit_ns);
            }
            return Step::Next;
        }
        dom.barrier_waiters.push(self.vcpus[v].curr);
        match self.spin_limit(wait) {
            None => {
                self.curr_thread_mut(v).state = ThreadState::BlockedBarrier;
                self.block(v);
            }
            Some(limit) => self.curr_thread_mut(v).state = ThreadState::SpinBarrier { limit },
        }
        self.wait_running(v)
    }

    /// How long a thread that starts waiting now spins before it blocks (None: it blocks at
    /// once). A spin count becomes running time here, where the host is known: each
    /// iteration of the runtime's check-and-`PAUSE` loop costs `spin_iteration_cycles`, the
    /// same loop shape as the paravirtual spinlock's wait (`HostConfig::pv_spin_ns`).
    pub(super) fn spin_limit(&self, wait: BarrierWait) -> Option<SpinLimit> {
        match wait {
            BarrierWait::Block => None,
            BarrierWait::Spin => Some(SpinLimit::Never),
            BarrierWait::SpinThenBlock(l) => Some(SpinLimit::Running(l)),
            // `cycles_ns` rounds up to 1 ns, so a zero count is kept apart: no spinning.
            BarrierWait::SpinIterationsThenBlock(0) => Some(SpinLimit::Running(0)),
            BarrierWait::SpinIterationsThenBlock(n) => {
                Some(SpinLimit::Running(self.host.cycles_ns(n.saturating_mul(self.host.spin_iteration_cycles))))
            }
            BarrierWait::SpinForThenBlock(l) => Some(SpinLimit::At(self.now().saturating_add(l))),
        }
    }

    /// `exit`: the thread ends; the last thread of a finite workload finishes its VM.
    fn exit(&mut self, v: VcpuId, d: DomId) -> Step {
        let now = self.now();
        self.curr_thread_mut(v).state = ThreadState::Exited;
        let dom = &mut self.doms[d];
        dom.alive -= 1;
        if dom.alive == 0 && dom.finite {
            dom.finished_at = Some(now);
            self.unfinished -= 1;
        }
        self.block(v);
        Step::Wait
    }
}
