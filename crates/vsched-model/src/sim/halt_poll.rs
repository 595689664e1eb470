//! KVM halt-polling: the host's (`halt_poll_ns`) and the guest's (the `haltpoll` cpuidle
//! governor), both off by default.
//!
//! # Host (`HaltPoll`, `[host] halt_poll_ns`; Linux 6.12 `kvm_vcpu_halt`, virt/kvm/kvm_main.c)
//! A vCPU that halts (its guest has nothing to run) keeps its pCPU busy polling for up to its
//! own window, `VcpuHalt::host_window_ns` (0 when the vCPU is created). The poll ends
//! - at a wake-up (`kvm_vcpu_check_block` < 0): the vCPU goes on at once, with no block, no
//!   scheduler run and no switch, so it skips what a blocked vCPU's wake-up pays: the
//!   reschedule IPI and the idle pCPU's exit latency (`ipi_latency_ns`, `idle_wake_ns`), the
//!   scheduler (`sched_cost_ns`), the switch (`context_switch_ns`) and the cache refill;
//! - when the window elapses, or when the pCPU has something else to run
//!   (`kvm_vcpu_can_poll`: `single_task_running() && !need_resched()`, include/linux/kvm_host.h):
//!   a reschedule request on the pCPU, or another runnable entity in its run queue
//!   (`Policy::others_queued`); then the vCPU blocks as it does without polling.
//!
//! Polling is charged as the vCPU's running time (the VM's CPU time: the vCPU thread runs), so
//! the pCPU is busy and idle for nobody. After each halt, when the vCPU runs again, its window
//! moves by KVM's rules on `halt_ns`, the halt's whole length (poll, block and the wait for
//! the pCPU): kept if `halt_ns ≤ window`; shrunk (`shrink_halt_poll_ns`: ÷ `halt_poll_ns_shrink`,
//! 0 below `halt_poll_ns_grow_start`, 0 at once with shrink 0) if the window is not 0 and
//! `halt_ns > halt_poll_ns`; grown (`grow_halt_poll_ns`: × `halt_poll_ns_grow`, at least
//! `halt_poll_ns_grow_start`) if both the window and `halt_ns` are below `halt_poll_ns`. The
//! grown window may exceed `halt_poll_ns`: KVM clamps it at the next halt, as done here. x86 has
//! no invalid wake-ups (`vcpu_valid_wakeup` is true without `CONFIG_HAVE_KVM_INVALID_WAKEUPS`,
//! an s390 option), so `halt_poll_invalid` stays 0. A poll counts as successful when the vCPU
//! never blocked (`update_halt_poll_stats`).
//!
//! # Guest (`GuestHaltPoll`, a VM's `guest_haltpoll`; Linux 6.12 drivers/cpuidle/governors/haltpoll.c)
//! Its idle loop polls in the guest (`poll_idle`, drivers/cpuidle/poll_state.c) for up to its
//! own per-vCPU window before it executes HLT. The guest cannot see the host's run queues: the
//! poll is guest code like any other, so the vCPU holds its pCPU (or waits for it, preempted)
//! whoever else is runnable there. The governor (`haltpoll_select`) halts at once while the
//! window is 0 (its start), polls otherwise, and halts after a poll that ran out; the window
//! moves only after a halt (`haltpoll_reflect` → `adjust_poll_limit`) on the halt's length
//! (`block_ns`, from HLT until the vCPU runs again): grown (× grow, at least grow_start, at most
//! `guest_halt_poll_ns`) if `window < block_ns ≤ guest_halt_poll_ns`; shrunk (÷ shrink, 0 below
//! grow_start) if `block_ns > guest_halt_poll_ns` and `allow_shrink`. The driver turns host
//! polling off for its vCPUs (`arch_haltpoll_enable` writes 0 to `MSR_KVM_POLL_CONTROL`, which
//! `kvm_arch_no_poll` reads, arch/x86/kvm/x86.c): their halts neither poll in the host nor
//! move the host window. While a vCPU polls, its idle task has `TIF_POLLING_NRFLAG` set, so a
//! guest thread that wakes a thread there sets `need_resched` and sends no IPI
//! (`set_nr_if_polling`, kernel/sched/core.c): the wake-up arrives at once and costs the waker
//! no ICR-write exit.
//!
//! # Approximations
//! - A host poll that ends because the pCPU has other work ends in the instant the simulator
//!   learns of it (after the policy callback that queued the work), not one `cpu_relax` later.
//! - A guest poll is not a PAUSE loop for pause-loop exiting: `poll_idle` does execute PAUSE,
//!   but the driver loads only with `KVM_HINTS_REALTIME` (or `force`), which a host gives for
//!   dedicated pCPUs, where PLE is usually off.
//! - A wake-up from a host poll still takes the interrupt's latency (`ipi_latency_ns`) to reach
//!   the vCPU; only the reschedule and what follows are skipped.
//! - A pending guest IPI is taken on the way to halt (`sti; hlt`), as without polling; a
//!   polling vCPU is idle for its guest, so a TLB shootdown skips it (lazy TLB).
//! - Guest poll time is wall time from the poll's start to its end (the guest's clock, which
//!   keeps running while the vCPU is preempted), as `poll_idle` measures it.
//!
//! Defaults and their sources: docs/realism.md, "KVM halt-polling".

use vsched_engine::Time;

use super::state::Core;
use super::world::with_cx;
use super::Simulation;
use crate::domain::VcpuState;
use crate::ids::{PcpuId, VcpuId};
use crate::trace::CounterOf;

/// `KVM_HALT_POLL_NS_DEFAULT` on x86 (arch/x86/include/asm/kvm_host.h, Linux 6.12): 200 µs.
pub const KVM_HALT_POLL_NS_DEFAULT: Time = 200_000;
/// `halt_poll_ns_grow` (virt/kvm/kvm_main.c, Linux 6.12).
pub const KVM_HALT_POLL_NS_GROW: u32 = 2;
/// `halt_poll_ns_grow_start`: 10 µs.
pub const KVM_HALT_POLL_NS_GROW_START: Time = 10_000;
/// `halt_poll_ns_shrink`: 2 (halves) in Linux 6.12; 0 (a reset to 0) in the 5.4-era
/// kvm_main.c read beside it (docs/realism.md).
pub const KVM_HALT_POLL_NS_SHRINK: u32 = 2;

/// `guest_halt_poll_ns` (drivers/cpuidle/governors/haltpoll.c, Linux 6.12): 200 µs.
pub const GUEST_HALT_POLL_NS_DEFAULT: Time = 200_000;
/// `guest_halt_poll_grow`.
pub const GUEST_HALT_POLL_GROW: u32 = 2;
/// `guest_halt_poll_shrink`.
pub const GUEST_HALT_POLL_SHRINK: u32 = 2;
/// `guest_halt_poll_grow_start`: 50 µs.
pub const GUEST_HALT_POLL_GROW_START: Time = 50_000;

/// The trace counter of a vCPU's polling (1: in the host, 2: in the guest, 0: not polling).
const POLL_COUNTER: &str = "halt_poll";

/// KVM's host halt-polling module parameters (`/sys/module/kvm/parameters/halt_poll_ns*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HaltPoll {
    /// `halt_poll_ns`: the longest window; 0 turns host polling off (vsched's default).
    pub max_ns: Time,
    /// `halt_poll_ns_grow`: the window's factor when it grows (0: it never grows).
    pub grow: u32,
    /// `halt_poll_ns_grow_start`: where a window grows from, and below which it shrinks to 0.
    pub grow_start_ns: Time,
    /// `halt_poll_ns_shrink`: the window's divisor when it shrinks (0: it resets to 0).
    pub shrink: u32,
}

impl HaltPoll {
    /// Off (`max_ns` 0), with KVM's growth rules ready for a scenario that sets `max_ns`.
    pub const OFF: HaltPoll = HaltPoll {
        max_ns: 0,
        grow: KVM_HALT_POLL_NS_GROW,
        grow_start_ns: KVM_HALT_POLL_NS_GROW_START,
        shrink: KVM_HALT_POLL_NS_SHRINK,
    };

    /// `grow_halt_poll_ns`: no cap here; `kvm_vcpu_halt` clamps at the next halt.
    pub fn grown(&self, window: Time) -> Time {
        if self.grow == 0 {
            return window;
        }
        window.saturating_mul(self.grow as Time).max(self.grow_start_ns)
    }

    /// `shrink_halt_poll_ns`.
    pub fn shrunk(&self, window: Time) -> Time {
        let val = if self.shrink == 0 { 0 } else { window / self.shrink as Time };
        if val < self.grow_start_ns {
            0
        } else {
            val
        }
    }

    /// The window after a halt of `halt_ns` that began with `window` (the tail of
    /// `kvm_vcpu_halt`, every wake-up valid as on x86).
    pub fn after_halt(&self, window: Time, halt_ns: Time) -> Time {
        let max = self.max_ns;
        if max == 0 {
            0
        } else if halt_ns <= window {
            window
        } else if window > 0 && halt_ns > max {
            self.shrunk(window)
        } else if window < max && halt_ns < max {
            self.grown(window)
        } else {
            window
        }
    }
}

/// The guest `haltpoll` governor's module parameters, per VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestHaltPoll {
    /// `guest_halt_poll_ns`: the longest window.
    pub max_ns: Time,
    /// `guest_halt_poll_grow`.
    pub grow: u32,
    /// `guest_halt_poll_shrink` (0: the window resets to 0).
    pub shrink: u32,
    /// `guest_halt_poll_grow_start`.
    pub grow_start_ns: Time,
    /// `guest_halt_poll_allow_shrink`.
    pub allow_shrink: bool,
}

impl Default for GuestHaltPoll {
    fn default() -> Self {
        GuestHaltPoll {
            max_ns: GUEST_HALT_POLL_NS_DEFAULT,
            grow: GUEST_HALT_POLL_GROW,
            shrink: GUEST_HALT_POLL_SHRINK,
            grow_start_ns: GUEST_HALT_POLL_GROW_START,
            allow_shrink: true,
        }
    }
}

impl GuestHaltPoll {
    /// `adjust_poll_limit`: the window after a halt of `block_ns`.
    pub fn after_halt(&self, window: Time, block_ns: Time) -> Time {
        if block_ns > window && block_ns <= self.max_ns {
            window.saturating_mul(self.grow as Time).max(self.grow_start_ns).min(self.max_ns)
        } else if block_ns > self.max_ns && self.allow_shrink {
            match self.shrink {
                0 => 0,
                s => Some(window / s as Time).filter(|&w| w >= self.grow_start_ns).unwrap_or(0),
            }
        } else {
            window
        }
    }
}

/// Where a vCPU polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PollKind {
    Host,
    Guest,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Poll {
    kind: PollKind,
    start: Time,
    stop: Time,
}

/// A vCPU's halt-polling state.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct VcpuHalt {
    /// `vcpu->halt_poll_ns`.
    host_window_ns: Time,
    /// The governor's `dev->poll_limit_ns`.
    guest_window_ns: Time,
    pub(super) poll: Option<Poll>,
    /// When a halt the host window learns from began (ended when the vCPU runs again).
    host_halt_at: Option<Time>,
    /// When a guest HLT the guest window learns from began.
    guest_halt_at: Option<Time>,
}

/// A VM's polling tallies, in KVM's names where KVM has them. A poll counts when it ends (as
/// `update_halt_poll_stats` counts), so one still going at the end of the run does not.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct HaltStats {
    pub(super) attempted: u64,
    pub(super) successful: u64,
    pub(super) success_ns: Time,
    pub(super) fail_ns: Time,
    pub(super) guest_polls: u64,
    pub(super) guest_successful: u64,
    pub(super) guest_ns: Time,
}

impl Core {
    /// Whether `v` polls in the host when it halts: host polling on, a VM's vCPU (not the
    /// driver domain's, not a host thread), and its guest's haltpoll driver off.
    fn host_polls(&self, v: VcpuId) -> bool {
        let info = &self.doms[self.vcpus[v].dom].info;
        self.host.halt_poll.max_ns > 0 && !info.driver && !info.host_threads && info.pv.haltpoll.is_none()
    }

    /// Whether `v` polls (in the host or its guest): it is idle for its guest.
    pub(super) fn idle_polling(&self, v: VcpuId) -> bool {
        self.vcpus[v].halt.poll.is_some()
    }

    /// Whether `v` polls in its guest (a waker then sends no IPI).
    pub(super) fn guest_polling(&self, v: VcpuId) -> bool {
        matches!(self.vcpus[v].halt.poll, Some(Poll { kind: PollKind::Guest, .. }))
    }

    /// When `v`'s poll runs out, if it polls: the next guest event of a running poller.
    pub(super) fn poll_end_at(&self, v: VcpuId, from: Time) -> Option<Time> {
        self.vcpus[v].halt.poll.map(|poll| poll.stop.max(from))
    }

    fn trace_poll(&mut self, v: VcpuId, value: i64) {
        if self.trace.is_some() {
            let now = self.now();
            self.with_trace(|t| t.counter(CounterOf::Vcpu(v), POLL_COUNTER, value, now));
        }
    }

    /// Running `v`'s guest has nothing to run: it polls (true), in its guest (the haltpoll
    /// governor) or in the host, or it halts now (false; the caller halts it). A halt is
    /// remembered for the window it may move.
    pub(super) fn halt_poll_begins(&mut self, v: VcpuId) -> bool {
        let now = self.now();
        let d = self.vcpus[v].dom;
        let info = &self.doms[d].info;
        // A paravirtual lock waiter halts in `kvm_wait` (`safe_halt`), not in the idle loop.
        let idle_loop = !matches!(self.curr_thread(v).state, super::state::ThreadState::HaltedLock { .. });
        if info.pv.haltpoll.is_some() && !info.driver && !info.host_threads {
            let window = self.vcpus[v].halt.guest_window_ns;
            if window == 0 || !idle_loop {
                if idle_loop {
                    self.vcpus[v].halt.guest_halt_at = Some(now);
                }
                return false;
            }
            self.vcpus[v].halt.poll = Some(Poll { kind: PollKind::Guest, start: now, stop: now + window });
            self.arm(v);
            self.trace_poll(v, 2);
            return true;
        }
        if !self.host_polls(v) {
            return false;
        }
        let max = self.host.halt_poll.max_ns;
        let vh = &mut self.vcpus[v].halt;
        vh.host_halt_at = Some(now);
        vh.host_window_ns = vh.host_window_ns.min(max);
        if vh.host_window_ns == 0 {
            return false;
        }
        vh.poll = Some(Poll { kind: PollKind::Host, start: now, stop: now + vh.host_window_ns });
        // On the way to halt, as without polling: pending interrupts taken, the guest's
        // idle timer armed, the thread off its CPU for a mutex's spinners.
        for s in std::mem::take(&mut self.vcpus[v].irqs) {
            self.ipi_taken(s, v);
        }
        self.arm_idle_timer(v);
        self.mutex_owner_moved(self.vcpus[v].curr);
        self.host_pollers.push(v);
        self.arm(v);
        self.trace_poll(v, 1);
        true
    }

    /// Ends `v`'s host poll: it failed, or it succeeded (`woken`), `now - start` long.
    fn end_host_poll(&mut self, v: VcpuId, start: Time, woken: bool) {
        let now = self.now();
        self.vcpus[v].halt.poll = None;
        if let Some(i) = self.host_pollers.iter().position(|&u| u == v) {
            self.host_pollers.swap_remove(i);
        }
        let stats = &mut self.doms[self.vcpus[v].dom].halt_stats;
        stats.attempted += 1;
        if woken {
            stats.successful += 1;
            stats.success_ns += now - start;
        } else {
            stats.fail_ns += now - start;
        }
        self.trace_poll(v, 0);
    }

    /// `v`'s poll ran out (its guest event fired while it polled); false if it does not poll.
    /// A host poll blocks; a guest poll executes HLT, which blocks too (host polling is off
    /// for a guest with the haltpoll driver).
    pub(super) fn poll_timed_out(&mut self, v: VcpuId) -> bool {
        let Some(poll) = self.vcpus[v].halt.poll else { return false };
        let now = self.now();
        match poll.kind {
            PollKind::Host => {
                self.end_host_poll(v, poll.start, false);
                self.halt(v, false);
            }
            PollKind::Guest => {
                self.vcpus[v].halt.poll = None;
                let stats = &mut self.doms[self.vcpus[v].dom].halt_stats;
                stats.guest_polls += 1;
                stats.guest_ns += now - poll.start;
                self.vcpus[v].halt.guest_halt_at = Some(now);
                self.trace_poll(v, 0);
                self.halt(v, true);
            }
        }
        true
    }

    /// Polling vCPU `v`'s guest has a thread to run again: the poll succeeded and the vCPU
    /// goes on where it is (running, or preempted in a guest poll), the policy none the wiser.
    pub(super) fn poll_woken(&mut self, v: VcpuId) -> Option<VcpuId> {
        let poll = self.vcpus[v].halt.poll.expect("a polling vCPU");
        let now = self.now();
        match poll.kind {
            PollKind::Host => {
                self.end_host_poll(v, poll.start, true);
                self.host_halt_done(v);
                // Out of HLT: the guest's tick runs again.
                self.arm_running_tick(v);
            }
            PollKind::Guest => {
                self.vcpus[v].halt.poll = None;
                let stats = &mut self.doms[self.vcpus[v].dom].halt_stats;
                stats.guest_polls += 1;
                stats.guest_successful += 1;
                stats.guest_ns += now - poll.start;
                self.trace_poll(v, 0);
                if self.vcpus[v].state == VcpuState::Runnable {
                    // Preempted while it polled: it runs its thread when next scheduled.
                    self.vcpus[v].woke_at = Some(now);
                    return None;
                }
            }
        }
        let dom = &mut self.doms[self.vcpus[v].dom];
        dom.wakes += 1; // at once: no wake-up latency
        self.retouch(v);
        self.arm(v);
        self.trace_state(v);
        None
    }

    /// Host-polling `v`'s guest timer fired: a wake-up inside the window. The vCPU runs the
    /// handler where it is, then halts again unless its thread was woken meanwhile
    /// (`guest_kernel`). False if `v` does not poll in the host.
    pub(super) fn poll_timer(&mut self, v: VcpuId) -> bool {
        let Some(poll) = self.vcpus[v].halt.poll.filter(|p| p.kind == PollKind::Host) else { return false };
        self.doms[self.vcpus[v].dom].timer_wakes += 1;
        self.end_host_poll(v, poll.start, true);
        self.host_halt_done(v);
        self.vcpus[v].timer_wake = true;
        self.arm_running_tick(v);
        self.stall(v, self.host.timer_irq_ns);
        self.arm(v);
        self.trace_state(v);
        true
    }

    /// The host halt `v` was in is over (it runs again): its window moves (`kvm_vcpu_halt`).
    fn host_halt_done(&mut self, v: VcpuId) {
        let now = self.now();
        let hp = self.host.halt_poll;
        let vh = &mut self.vcpus[v].halt;
        if let Some(at) = vh.host_halt_at.take() {
            vh.host_window_ns = hp.after_halt(vh.host_window_ns, now - at);
        }
    }

    /// `v` is switched in: a halt it was in is over, and the windows learn its length.
    pub(super) fn halt_ended(&mut self, v: VcpuId) {
        self.host_halt_done(v);
        let now = self.now();
        let guest = self.doms[self.vcpus[v].dom].info.pv.haltpoll;
        let vh = &mut self.vcpus[v].halt;
        if let (Some(at), Some(g)) = (vh.guest_halt_at.take(), guest) {
            vh.guest_window_ns = g.after_halt(vh.guest_window_ns, now - at);
        }
    }

    /// A reschedule reached pCPU `p` (`need_resched`): a vCPU polling there in the host stops
    /// and blocks (`kvm_vcpu_block`); it is returned for the policy's `sleep`. A vCPU whose VM
    /// was destroyed while it polled just stops.
    fn poll_interrupted(&mut self, p: PcpuId) -> Option<VcpuId> {
        let v = self.pcpus[p].curr?;
        let poll = self.vcpus[v].halt.poll.filter(|poll| poll.kind == PollKind::Host)?;
        self.end_host_poll(v, poll.start, false);
        if self.vcpus[v].state != VcpuState::Running(p) {
            return None;
        }
        self.halt_in_place(v, false);
        Some(v)
    }
}

impl Simulation {
    /// Before `p`'s policy picks: a host poll there ends (see `Core::poll_interrupted`).
    pub(super) fn stop_poll_for_resched(&mut self, p: PcpuId) {
        if self.core.host_pollers.is_empty() {
            return;
        }
        if let Some(v) = self.core.poll_interrupted(p) {
            let h = self.core.pcpus[p].host;
            let local = v - self.core.hosts[h].vcpus.start;
            with_cx(&mut self.core, h, Some(p), |cx| self.policies[h].sleep(cx, local));
        }
    }

    /// After an event: a host poll whose pCPU's run queue now holds another runnable entity
    /// stops (`single_task_running()` is false), through a reschedule of that pCPU now.
    pub(super) fn stop_polls_beside_others(&mut self) {
        if self.core.host_pollers.is_empty() {
            return;
        }
        let now = self.core.now();
        for i in 0..self.core.host_pollers.len() {
            let v = self.core.host_pollers[i];
            let VcpuState::Running(p) = self.core.vcpus[v].state else { continue };
            let h = self.core.pcpus[p].host;
            let local = p - self.core.hosts[h].pcpus.start;
            if self.policies[h].others_queued(local) == Some(true) {
                self.core.request_resched(p, now);
            }
        }
    }
}
