//! Guest code that waits and blocks: spinning, halting until the host wakes the vCPU, and
//! waking others.
//!
//! There is no guest kernel, so nothing in the guest can halt: a ring-3 `HLT` faults (and
//! came back as a shutdown under kvm_pvm). The guest says it halts with a write to
//! `HALT_ADDR` instead, an exit after which its thread waits to be started again, and says
//! what it waits for in its `WAIT` line first: a 32-bit word of its memory and the value that
//! ends the wait (a blocking barrier's sense, or a message count to reach), or a sleep of so
//! many TSC cycles (`Io`). The host (the runner) checks a word wait before it blocks the
//! vCPU, so a release that came between the guest's last check and its halt is never lost;
//! the releasing vCPU's write to `WAKE_ADDR` makes the host wake the VM's halted waiters, as
//! the IPIs of a guest kernel's futex wake would. A woken vCPU checks its condition again when it runs, as a futex waiter
//! does, and halts again if it does not hold.
//!
//! The time a vCPU is halted is neither computing nor spinning, and its pause-loop window
//! restarts when it runs again (it was scheduled in): `Emitter::descheduled`.

use iced_x86::code_asm::*;
use vsched_model::{BarrierWait, Dur};

use super::{at, Cycles, EmitError, Emitted, Emitter};
use crate::guest_code::layout::*;
use crate::guest_code::random_tables::ns_to_cycles;

/// What a waiter waits for, each checked by one compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Until {
    /// The barrier's sense to be `edi` (a blocking barrier).
    BarrierSense,
    /// The 32-bit count at `rsi` to reach `edi`, unsigned (a message's arrival).
    CountAt,
}

impl Until {
    /// The activity word while waiting.
    fn activity(self) -> u32 {
        match self {
            Until::BarrierSense => ACTIVITY_BARRIER_WAIT,
            Until::CountAt => ACTIVITY_MESSAGE_WAIT,
        }
    }
}

impl Emitter<'_> {
    /// Halts (the exit to `HALT_ADDR`), having said what for in the `WAIT` line. Back in
    /// guest code, it notes when it resumed. Clobbers `rax`, `rcx`, `rdx`.
    fn halt(&mut self) -> Emitted {
        self.set_activity(ACTIVITY_HALTED)?;
        self.a.mov(eax, HALT_ADDR as u32)?;
        self.a.mov(byte_ptr(rax), 0u32)?;
        self.read_tsc()?;
        self.a.mov(qword_ptr(at(r15, LAST_TSC)), rax)?;
        self.descheduled()
    }

    /// After releasing a blocking barrier or delivering a message: the host wakes the VM's
    /// halted vCPUs whose wait has ended (`WAKE_ADDR`).
    pub(super) fn wake_waiters(&mut self) -> Emitted {
        self.a.mov(eax, WAKE_ADDR as u32)?;
        self.a.mov(byte_ptr(rax), 0u32)?;
        Ok(())
    }

    /// A waiter waits until `until` holds, as `wait` says, then jumps to `passed`. `Spin`
    /// spins; `Block` blocks at once (pthreads' barrier); `SpinThenBlock(t)` spins for `t`
    /// of running time first (a spin budget that does not run down while the vCPU is
    /// descheduled), `SpinForThenBlock(t)` until `t` of TSC time has passed since the wait
    /// began, running or not (`KMP_BLOCKTIME`), as `vsched_model::BarrierWait` says.
    pub(super) fn wait_until(&mut self, until: Until, wait: BarrierWait, passed: CodeLabel) -> Emitted {
        let mut block = self.a.create_label();
        let mut spin = self.a.create_label();
        match wait {
            BarrierWait::Spin => {
                self.a.set_label(&mut spin)?;
                self.a.pause()?;
                self.tick(SPIN_CYCLES)?;
                self.jump_if_holds(until, passed)?;
                self.a.jmp(spin)?;
                return Ok(());
            }
            BarrierWait::Block => {}
            BarrierWait::SpinThenBlock(t) => {
                self.a.mov(rbx, ns_to_cycles(t, self.context.tsc_hz))?;
                self.a.set_label(&mut spin)?;
                self.a.pause()?;
                self.tick(SPIN_CYCLES)?;
                self.jump_if_holds(until, passed)?;
                self.a.sub(rbx, rcx)?;
                self.a.ja(spin)?;
            }
            BarrierWait::SpinForThenBlock(t) => {
                self.read_tsc()?;
                self.a.mov(rbx, ns_to_cycles(t, self.context.tsc_hz))?;
                self.a.add(rbx, rax)?;
                self.a.set_label(&mut spin)?;
                self.a.pause()?;
                // `tick` leaves the TSC it read in `rax`, and the check keeps it.
                self.tick(SPIN_CYCLES)?;
                self.jump_if_holds(until, passed)?;
                self.a.cmp(rax, rbx)?;
                self.a.jb(spin)?;
            }
            BarrierWait::SpinIterationsThenBlock(_) => {
                return Err(EmitError::Malformed("real vCPUs cannot count spin iterations".into()));
            }
        }
        self.a.set_label(&mut block)?;
        self.jump_if_holds(until, passed)?;
        match until {
            Until::BarrierSense => {
                self.a.mov(rax, SHARED_ADDR + BARRIER_SENSE)?;
                self.a.mov(qword_ptr(at(r15, WAIT_ADDR)), rax)?;
                // `edi` was written as 32 bits, so `rdi` is the sense zero-extended.
                self.a.mov(qword_ptr(at(r15, WAIT_VALUE)), rdi)?;
            }
            Until::CountAt => {
                self.a.mov(qword_ptr(at(r15, WAIT_ADDR)), rsi)?;
                self.a.mov(rax, WAIT_AT_LEAST)?;
                self.a.or(rax, rdi)?;
                self.a.mov(qword_ptr(at(r15, WAIT_VALUE)), rax)?;
            }
        }
        self.halt()?;
        self.set_activity(until.activity())?;
        self.a.jmp(block)?;
        Ok(())
    }

    /// Jumps to `to` if `until` holds now. Leaves every register as it was.
    fn jump_if_holds(&mut self, until: Until, to: CodeLabel) -> Emitted {
        match until {
            Until::BarrierSense => {
                self.a.cmp(dword_ptr(at(r14, BARRIER_SENSE)), edi)?;
                self.a.je(to)?;
            }
            Until::CountAt => {
                self.a.cmp(dword_ptr(rsi), edi)?;
                self.a.jae(to)?;
            }
        }
        Ok(())
    }

    /// `Io(dur)`: sleeps for `dur` (blocked, not running), then goes on; a draw of 0 does
    /// not sleep, `FOREVER` never wakes (an idle vCPU).
    pub(super) fn io(&mut self, i: usize, dur: Dur) -> Emitted {
        let cycles = self.cycles_of(dur);
        let mut done = self.a.create_label();
        match cycles {
            Cycles::Zero => return Ok(()),
            Cycles::Forever => self.a.mov(rbx, u64::MAX)?,
            _ => self.load_cycles(i, cycles, done)?,
        }
        self.a.mov(qword_ptr(at(r15, WAIT_ADDR)), 0)?;
        self.a.mov(qword_ptr(at(r15, WAIT_CYCLES)), rbx)?;
        self.halt()?;
        self.set_activity(ACTIVITY_COMPUTE)?;
        self.a.set_label(&mut done)?;
        self.a.nop()?;
        Ok(())
    }
}
