//! Living guest kernels: the timer interrupts every guest kernel takes, running or idle.
//!
//! # Why
//! A guest kernel is not silent when its threads are. While a vCPU runs, its kernel's
//! periodic tick interrupts it `hz` times a second (`scheduler_tick`, timekeeping, timers);
//! while it is halted, its kernel still wakes it for timers: every tick with a periodic
//! kernel, only for the timers that are due with a tickless one (`CONFIG_NO_HZ_IDLE`, Linux
//! ≥ 2.6.21, and XenLinux's `stop_hz_timer` before `HYPERVISOR_block`). Each such wake is a
//! hypervisor wake-up like any other: Xen's `vcpu_singleshot_timer_fn` → `vcpu_unblock`
//! (Credit BOOSTs the vCPU, `csched_vcpu_wake`), KVM's hrtimer → the vCPU thread's wake-up.
//! So a guest with more vCPUs than work, or an idle guest beside busy ones, costs the host
//! wake-ups, context switches and, under Credit, preemptions of whatever ran.
//!
//! # What is modelled (per domain: `GuestTick`)
//! - **Running vCPU**: a tick interrupt every `1/hz` on the domain's tick grid (Linux aligns
//!   the ticks of all CPUs of one kernel on jiffy boundaries, `tick_setup_sched_timer`,
//!   unless `skew_tick=1`); each stops the guest's code for the host's `timer_irq_ns` (the
//!   exit, the injection, the handler, the timer re-arm). A vCPU that was preempted across a
//!   tick instant takes one pending tick at VM entry (interrupts are injected at entry; the
//!   missed ones are not replayed).
//! - **Halted vCPU**: with a periodic kernel it wakes at every tick instant; with a tickless
//!   one it wakes `idle_wakes_per_s` times a second on a clock of its own (phase drawn from
//!   the run's seed). A wake goes through the policy's `wake`; when the vCPU is scheduled it
//!   refills only its kernel's cache footprint (`cache`), runs the handler (`timer_irq_ns`)
//!   and halts again, unless its thread was woken meanwhile, in which case the thread goes
//!   on (refilling its own footprint first). Hypervisor timer slop delays each firing
//!   like every hypervisor timer (`clocks`).
//! - `GuestTick::Off`: no guest timer at all, the dead guest of hand-checked traces.
//!
//! The driver domain is a guest kernel like any other: its rate of idle wakes is
//! `host.dom0_idle_wakes_per_s`. Defaults and their sources: docs/realism.md, "Living guest
//! kernels".

use rand::Rng;
use vsched_engine::{RngStreams, Time, NS_PER_S};

use super::events::Ev;
use super::state::{Core, ThreadState};
use crate::domain::VcpuState;
use crate::ids::{DomId, VcpuId};

/// A guest kernel's timer interrupts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GuestTick {
    /// No timer interrupts at all (hand-checked traces).
    Off,
    /// `hz` ticks a second, running or halted (no `NO_HZ`; e.g. RHEL 5's 2.6.18 at 1000).
    Periodic { hz: u32 },
    /// `hz` ticks a second while running; halted, it wakes only for due timers,
    /// `idle_wakes_per_s` times a second (`CONFIG_NO_HZ_IDLE`).
    Tickless { hz: u32, idle_wakes_per_s: f64 },
}

/// `CONFIG_HZ`'s default since Linux 2.6.13 (`kernel/Kconfig.hz`: `default HZ_250`).
pub const DEFAULT_GUEST_HZ: u32 = 250;

/// Timer wake-ups of an idle tickless Linux of the seed papers' era: 10.3 per CPU per
/// second (docs/realism.md, "Living guest kernels").
pub const DEFAULT_IDLE_WAKES_PER_S: f64 = 10.3;

impl Default for GuestTick {
    fn default() -> Self {
        GuestTick::Tickless { hz: DEFAULT_GUEST_HZ, idle_wakes_per_s: DEFAULT_IDLE_WAKES_PER_S }
    }
}

fn period_ns(per_s: f64) -> Option<Time> {
    (per_s > 0.0).then(|| ((NS_PER_S as f64 / per_s).round() as Time).max(1))
}

impl GuestTick {
    /// Time between two ticks of a running vCPU.
    pub fn tick_period_ns(self) -> Option<Time> {
        match self {
            GuestTick::Off => None,
            GuestTick::Periodic { hz } | GuestTick::Tickless { hz, .. } => period_ns(hz as f64),
        }
    }

    /// Time between two timer wake-ups of a halted tickless vCPU.
    pub(super) fn idle_period_ns(self) -> Option<Time> {
        match self {
            GuestTick::Tickless { idle_wakes_per_s, .. } => period_ns(idle_wakes_per_s),
            _ => None,
        }
    }
}

/// Random streams of the guest kernels' clocks: each domain's tick grid
/// (`TICK_GRID_STREAM + d`) and each vCPU's idle-timer phase (`IDLE_TIMER_STREAM + v`), above
/// those of `clocks` (3–5 << 40).
const TICK_GRID_STREAM: u64 = 6 << 40;
const IDLE_TIMER_STREAM: u64 = 7 << 40;

/// The first instant of the grid `phase + k·period` strictly after `t`.
fn next_on_grid(phase: Time, period: Time, t: Time) -> Time {
    if t < phase {
        return phase;
    }
    phase + ((t - phase) / period + 1) * period
}

/// Domain `d`'s tick phase: uniform over the period, or 0 in lockstep.
pub(super) fn tick_phase(streams: &RngStreams, lockstep: bool, tick: GuestTick, d: usize) -> Time {
    match tick.tick_period_ns() {
        Some(period) if !lockstep => streams.stream(TICK_GRID_STREAM + d as u64).gen_range(0..period),
        _ => 0,
    }
}

/// vCPU `v`'s idle-timer phase: uniform over the period, or 0 in lockstep.
pub(super) fn idle_phase(streams: &RngStreams, lockstep: bool, tick: GuestTick, v: usize) -> Time {
    match tick.idle_period_ns() {
        Some(period) if !lockstep => streams.stream(IDLE_TIMER_STREAM + v as u64).gen_range(0..period),
        _ => 0,
    }
}

impl ThreadState {
    /// Whether a thread in this state leaves its vCPU halted (nothing to run).
    pub(super) fn halted(self) -> bool {
        matches!(
            self,
            ThreadState::BlockedStart
                | ThreadState::BlockedIo
                | ThreadState::BlockedBarrier
                | ThreadState::BlockedRecv { .. }
                | ThreadState::BlockedNet
                | ThreadState::HaltedLock { .. }
                | ThreadState::SleepMutex { .. }
                | ThreadState::Exited
        )
    }
}

impl Core {
    /// Domain `d`'s first tick instant after `t`, if its kernel ticks.
    fn next_tick(&self, d: DomId, t: Time) -> Option<Time> {
        let dom = &self.doms[d];
        dom.tick_period_ns.map(|period| next_on_grid(dom.tick_phase, period, t))
    }

    /// `v` is switched in at `now`: arms its next tick and returns the guest-kernel time it
    /// owes at entry (the timer handler it was woken for, or one tick that fell due while it
    /// was preempted).
    pub(super) fn guest_ticks_at_entry(&mut self, v: VcpuId) -> Time {
        let now = self.now();
        let vc = &self.vcpus[v];
        let (d, timer_wake) = (vc.dom, vc.timer_wake);
        let irq = self.host.timer_irq_ns;
        let Some(next) = self.next_tick(d, now) else {
            return if timer_wake { irq } else { 0 };
        };
        let pending_tick = !timer_wake
            && vc.woke_at.is_none()
            && vc.state_since < now
            && self.next_tick(d, vc.state_since).is_some_and(|t| t <= now);
        if pending_tick {
            self.doms[d].guest_ticks += 1;
        }
        self.arm_guest_timer(v, next);
        if timer_wake || pending_tick {
            irq
        } else {
            0
        }
    }

    /// `v` halts: its guest timer now wakes it (periodic: the next tick; tickless: its next
    /// idle timer), if it has one.
    pub(super) fn arm_idle_timer(&mut self, v: VcpuId) {
        let now = self.now();
        let vc = &self.vcpus[v];
        let dom = &self.doms[vc.dom];
        let at = match dom.tick {
            GuestTick::Off => None,
            GuestTick::Periodic { .. } => self.next_tick(vc.dom, now),
            GuestTick::Tickless { .. } => dom.idle_period_ns.map(|p| next_on_grid(vc.idle_phase, p, now)),
        };
        match at {
            Some(at) => self.arm_guest_timer(v, at),
            None => self.cancel_guest_timer(v),
        }
    }

    /// Running `v` left a halt without a switch (a host poll caught its wake-up): its tick
    /// runs again from the next instant of its grid, if its kernel ticks.
    pub(super) fn arm_running_tick(&mut self, v: VcpuId) {
        let now = self.now();
        match self.next_tick(self.vcpus[v].dom, now) {
            Some(next) => self.arm_guest_timer(v, next),
            None => self.cancel_guest_timer(v),
        }
    }

    /// Cancels `v`'s pending guest timer (a preempted vCPU's tick waits for its next entry).
    /// The event stays in its slot until the timer is armed again (which replaces it in
    /// place, usually by one due within the timer slop of it) or until it comes due, and is
    /// then skipped: at most one skipped pop per vCPU and tick period.
    pub(super) fn cancel_guest_timer(&mut self, v: VcpuId) {
        let vc = &mut self.vcpus[v];
        vc.tick_gen = vc.tick_gen.wrapping_add(1);
    }

    fn arm_guest_timer(&mut self, v: VcpuId, at: Time) {
        self.cancel_guest_timer(v);
        let late = self.timer_late(self.vcpus[v].host);
        let gen = self.vcpus[v].tick_gen;
        self.post_guest_timer(v, at + late, Ev::GuestTimer { v, gen });
    }

    /// `v`'s guest timer fired. A running vCPU takes its tick (`Some(false)`); a halted one
    /// wakes for its timer (`Some(true)`: the policy must hear of the wake). `None`: stale.
    pub(super) fn guest_timer(&mut self, v: VcpuId, gen: u32) -> Option<bool> {
        let now = self.now();
        let vc = &mut self.vcpus[v];
        if vc.tick_gen != gen {
            return None;
        }
        // Its idle timer, while it polls in the host: a wake-up inside the window (`halt_poll`).
        if self.poll_timer(v) {
            return Some(false);
        }
        let vc = &mut self.vcpus[v];
        match vc.state {
            VcpuState::Running(_) => {
                self.doms[vc.dom].guest_ticks += 1;
                self.sync(v);
                self.stall(v, self.host.timer_irq_ns);
                self.arm(v);
                let next = self.next_tick(self.vcpus[v].dom, now).expect("a running vCPU's timer is its tick");
                self.arm_guest_timer(v, next);
                self.guest_tick_preempt(v);
                Some(false)
            }
            VcpuState::Blocked => {
                self.doms[vc.dom].timer_wakes += 1;
                vc.timer_wake = true;
                self.set_state(v, VcpuState::Runnable);
                Some(true)
            }
            VcpuState::Runnable | VcpuState::Offline => None,
        }
    }

    /// A vCPU up for its timer only finished the handler: it halts again if its thread has
    /// nothing to run (true), or its thread goes on, at once (false) or after refilling its
    /// footprint (true: its guest event is re-armed for then; `cache`).
    pub(super) fn timer_handler_done(&mut self, v: VcpuId) -> bool {
        self.vcpus[v].timer_wake = false;
        if self.curr_thread(v).state.halted() {
            self.block(v);
            return true;
        }
        if self.retouch(v) {
            self.arm(v);
            return true;
        }
        false
    }
}
