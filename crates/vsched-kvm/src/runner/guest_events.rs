//! What the runner does when a guest acts on its own: its program ends, it raises a
//! pause-loop exit, it halts, it wakes the halted waiters of a barrier it released, or its
//! sleep ends. Each is what a hypervisor sees of the same guest act, and the policy hears of
//! it through the same callback as in the simulator:
//!
//! - a program that ends (`BackendEvent::Finished`): the vCPU blocks, as a thread exiting
//!   does in the simulator: `sleep`, then `pick_next` on its pCPU. A vCPU whose guest ended
//!   while it was stopped (the event and the stop crossed) blocks when next given a pCPU, as
//!   a real hypervisor sees it: it runs, halts at once;
//! - a pause-loop exit (`PauseLoopExit`, synthesized by the guest code of a kernel-mode
//!   lock, `ple_scaling`): `yield_` with `PauseLoopExit` on the spinner's pCPU if the vCPU
//!   still runs and still waits for its lock. The guest went on at once (its exit cost is
//!   its own), so by the time the runner reads the exit it may have taken the lock: such a
//!   yield is dropped, as no hardware exit would have been raised then;
//! - a halt (`Halted`: a blocking barrier's waiter, a sleep; `guest_code::emit::blocking`):
//!   the runner makes sure the vCPU is out of guest code, then reads what it waits for. A
//!   barrier that was released meanwhile lets it run on at once (the release and the halt
//!   crossed); otherwise it blocks (`sleep`, then `pick_next` on its pCPU), a sleeper with
//!   its wake-up time. A halt read after the runner stopped the vCPU for other reasons is
//!   ignored: the guest checks its condition again, and halts again, when it next runs;
//! - a wake (`Wake`, from the vCPU that released a blocking barrier): every halted vCPU of
//!   its VM whose barrier is released becomes runnable (`wake`), as a futex wake's IPIs make
//!   a guest kernel's waiters runnable; a sleeper's wake-up time does the same for it.
//!   Neither wake has a pCPU of its own (`wake` is called with none), as the VM starts' do.

use vsched_engine::Time;
use vsched_model::trace::Instant as TraceInstant;
use vsched_model::{PcpuId, VcpuId, VcpuState, World, YieldReason};

use super::Runner;
use crate::backend::{Backend, GuestActivity, GuestWait};
use crate::error::RealError;

impl<B: Backend> Runner<'_, B> {
    /// Whether `v`'s guest program ended: the backend said so, or its activity word says so
    /// before the event arrived.
    pub(super) fn has_exited(&mut self, v: VcpuId) -> bool {
        if !self.exited[v] && self.backend.activity(v) == GuestActivity::Done {
            self.exit(v);
        }
        self.exited[v]
    }

    /// `v`'s guest program ended now; its VM finishes with its last vCPU.
    fn exit(&mut self, v: VcpuId) {
        if std::mem::replace(&mut self.exited[v], true) {
            return;
        }
        let d = self.vm_of[v];
        self.alive[d] -= 1;
        if self.alive[d] == 0 {
            self.vms[d].finished_at = Some(self.world.now());
        }
    }

    /// Running `v` on `p` blocks: the policy hears of it (`sleep`, on `p`).
    pub(super) fn block(&mut self, p: PcpuId, v: VcpuId) {
        self.world.set_state(v, VcpuState::Blocked);
        self.world.with_cx(Some(p), |cx| self.policy.sleep(cx, v));
    }

    /// The backend says `v`'s program ended.
    pub(super) fn finished(&mut self, v: VcpuId) -> Result<(), RealError> {
        self.exit(v);
        if let VcpuState::Running(p) = self.world.state(v) {
            self.block(p, v);
            self.check_failure()?;
            self.schedule(p)?;
        }
        Ok(())
    }

    /// `v`'s guest raised a pause-loop exit: the policy hears of it if `v` still runs and
    /// waits for its lock (module notes).
    pub(super) fn pause_loop_exit(&mut self, v: VcpuId) -> Result<(), RealError> {
        let VcpuState::Running(p) = self.world.state(v) else { return Ok(()) };
        if self.started_on[v].is_none() || self.backend.activity(v) != GuestActivity::LockWait {
            return Ok(());
        }
        self.world.trace_instant(TraceInstant::PleExit { vcpu: v });
        self.world.with_cx(Some(p), |cx| self.policy.yield_(cx, v, YieldReason::PauseLoopExit));
        self.check_failure()
    }

    /// `v`'s guest halted: it runs on if what it waits for has come, else it blocks
    /// (module notes).
    pub(super) fn halted(&mut self, v: VcpuId) -> Result<(), RealError> {
        let VcpuState::Running(p) = self.world.state(v) else { return Ok(()) };
        let Some(cpu) = self.started_on[v].take() else { return Ok(()) };
        // Parked already, unless the halt is stale and the guest runs again: then this stop
        // takes it out of guest code, and it checks its condition when it next runs.
        self.backend.stop(v)?;
        match self.backend.wait(v) {
            GuestWait::Release { released: true } | GuestWait::Sleep { cycles: 0 } => {
                self.backend.start(v, cpu)?;
                self.started_on[v] = Some(cpu);
                return Ok(());
            }
            GuestWait::Sleep { cycles } => self.sleep_until[v] = self.sleep_end(cycles),
            GuestWait::Release { released: false } => {}
        }
        self.halted[v] = true;
        self.block(p, v);
        self.check_failure()?;
        self.schedule(p)
    }

    /// When a sleep of `cycles` TSC cycles from now ends (`None`: never).
    fn sleep_end(&self, cycles: u64) -> Option<Time> {
        if cycles == u64::MAX {
            return None;
        }
        let ns = (cycles as u128 * 1_000_000_000 / u128::from(self.backend.tsc_hz().max(1))) as Time;
        Some(self.world.now().saturating_add(ns))
    }

    /// `v` released a blocking barrier of its VM: its halted waiters whose barrier is
    /// released run again.
    pub(super) fn wake_released(&mut self, v: VcpuId) -> Result<(), RealError> {
        let d = self.vm_of[v];
        for u in 0..self.vm_of.len() {
            if self.vm_of[u] == d && self.halted[u] && self.backend.wait(u) == (GuestWait::Release { released: true }) {
                self.wake(u)?;
            }
        }
        Ok(())
    }

    /// Sleepers whose sleep ended by `now` run again.
    pub(super) fn wake_sleepers(&mut self, now: Time) -> Result<(), RealError> {
        for v in 0..self.sleep_until.len() {
            if let Some(at) = self.sleep_until[v].filter(|&at| at <= now) {
                self.late(at);
                self.wake(v)?;
            }
        }
        Ok(())
    }

    /// Halted `v` is runnable again: the policy hears of it (`wake`, on no pCPU).
    pub(super) fn wake(&mut self, v: VcpuId) -> Result<(), RealError> {
        self.halted[v] = false;
        self.sleep_until[v] = None;
        self.world.set_state(v, VcpuState::Runnable);
        self.world.with_cx(None, |cx| self.policy.wake(cx, v));
        self.check_failure()
    }
}
