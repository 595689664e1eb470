//! One vCPU's guest program as x86-64 machine code (ring 3, long mode).
//!
//! Registers: `r15` holds the vCPU's private area, `r14` the VM's shared area (both set by
//! the entry code); `rbx` the cycles of compute left; `rsi` the lock at hand; `edi` a
//! ticket or a barrier sense; `rax`, `rcx`, `rdx`, `r8` are scratch. Nothing uses a stack.
//!
//! Time is counted in TSC cycles with one rule everywhere (`tick`): the cycles since the
//! previous check go to the phase's counter (compute or spin), unless they exceed the
//! descheduling threshold — then the vCPU was not running (stopped by the scheduler, or its
//! thread preempted on the host), the gap counts for nothing, and the guest notes when it
//! resumed. So a compute of `d` lasts `d` cycles of *running*, and spin cycles are cycles the
//! vCPU ran while waiting, as the simulator counts them (`sim/interpret.rs`, `sync`).
//!
//! Pause-loop exits are synthesized (`ple_check`): the code of a kernel-mode lock runs in
//! ring 3 like any other, but its spin loop adds the running cycles it spins to a count and,
//! when the count reaches the vCPU's window, writes to `PLE_EXIT_ADDR`, an exit the vCPU's
//! thread reports to the scheduler. The window restarts after each exit and whenever the
//! guest notices it was descheduled (VT-x restarts its count at each VM entry); it grows at
//! each exit by the hypervisor's factor up to its maximum, and returns to its base when the
//! vCPU is scheduled in again (KVM's `grow_ple_window` / `shrink_ple_window`, as
//! `vsched_model::sim::ple` models them). The window's length is `PleWindow`'s, scaled to
//! this machine's exit cost (`ple_scaling`).

use iced_x86::code_asm::*;
use iced_x86::IcedError;
use vsched_model::{BarrierWait, Dur, Instr, LockChoice, LockKind};

mod blocking;
mod messages;

use blocking::Until;

use super::layout::*;
use super::random_tables::ns_to_cycles;
use crate::backend::PleWindow;

/// Where one random instruction's draws are: guest address, entries, and the slot of its
/// cursor among the vCPU's.
#[derive(Debug, Clone, Copy)]
pub struct TablePlace {
    pub instr: usize,
    pub addr: u64,
    pub len: u64,
}

/// What the code of one vCPU needs to know beyond its program.
pub struct EmitContext<'a> {
    pub lock_kind: LockKind,
    /// Threads that take part in the VM's barriers.
    pub barrier_parties: u32,
    /// Guest address of this vCPU's private area.
    pub private_base: u64,
    pub tables: &'a [TablePlace],
    pub tsc_hz: u64,
    /// A TSC gap longer than this (cycles) between two checks means the vCPU was not
    /// running.
    pub gap_cycles: u64,
    /// Pause-loop exiting of kernel-mode spinning; `None`: off.
    pub ple: Option<PleWindow>,
    /// The VM's mailboxes, if its guest exchanges messages.
    pub mailboxes: Option<Mailboxes>,
    /// This vCPU's index in its VM.
    pub own_index: u64,
}

/// Where a VM's mailboxes are (`layout::mailbox_size`) and which ranks its vCPUs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mailboxes {
    /// Guest address of the first vCPU's mailbox; the others follow.
    pub first_addr: u64,
    /// Guest address of the first vCPU's private area (its activity word, for a sender).
    pub first_private: u64,
    /// The rank of the VM's first vCPU, the ranks it holds, and the job's.
    pub first_rank: u64,
    pub ranks: u64,
    pub world: u64,
}

impl Mailboxes {
    /// The mailbox of the VM's `i`-th vCPU.
    pub fn of(&self, i: u64) -> u64 {
        self.first_addr + i * mailbox_size(self.world)
    }
}

/// Assembles `program` for address `ip`. Errors name what is malformed (a program
/// `machine::check_supported` accepted never errs).
pub fn assemble(program: &[Instr], context: &EmitContext, ip: u64) -> Result<Vec<u8>, String> {
    let mut e = Emitter { a: CodeAssembler::new(64).map_err(asm_err)?, context, held: Vec::new(), loops: Vec::new() };
    e.program(program).map_err(|err| match err {
        EmitError::Asm(err) => asm_err(err),
        EmitError::Malformed(m) => m,
    })?;
    e.a.assemble(ip).map_err(asm_err)
}

fn asm_err(err: IcedError) -> String {
    format!("the guest code does not assemble: {err}")
}

enum EmitError {
    Asm(IcedError),
    Malformed(String),
}

impl From<IcedError> for EmitError {
    fn from(err: IcedError) -> Self {
        EmitError::Asm(err)
    }
}

type Emitted = Result<(), EmitError>;

/// The cycles of a duration, as the code gets them (`Emitter::cycles_of`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cycles {
    Zero,
    Forever,
    Fixed(u64),
    Drawn,
}

struct Emitter<'a> {
    a: CodeAssembler,
    context: &'a EmitContext<'a>,
    /// Locks held at this point of the program, by nesting depth: whether each is a
    /// kernel-mode one.
    held: Vec<bool>,
    /// Open loops: the label of each body, and whether it runs forever.
    loops: Vec<(CodeLabel, bool)>,
}

/// A memory operand at `offset` from `base`.
fn at(base: AsmRegister64, offset: u64) -> AsmMemoryOperand {
    base + offset as i32
}

impl Emitter<'_> {
    fn program(&mut self, program: &[Instr]) -> Emitted {
        self.a.mov(r15, self.context.private_base)?;
        self.a.mov(r14, SHARED_ADDR)?;
        self.read_tsc()?;
        self.a.mov(qword_ptr(at(r15, LAST_TSC)), rax)?;
        if let Some(ple) = self.context.ple {
            self.a.mov(rax, ple.base_cycles)?;
            self.a.mov(qword_ptr(at(r15, PLE_WINDOW)), rax)?;
        }
        for (i, instr) in program.iter().enumerate() {
            self.instr(i, instr)?;
        }
        Ok(())
    }

    fn instr(&mut self, i: usize, instr: &Instr) -> Emitted {
        match instr {
            Instr::Compute(dur) => self.compute(i, *dur),
            Instr::Lock { choice, kernel } => self.lock(i, *choice, *kernel),
            Instr::Unlock => self.unlock(),
            Instr::Barrier(wait) => self.barrier(*wait),
            Instr::Io(dur) => self.io(i, *dur),
            Instr::Repeat { times, .. } => self.repeat(*times),
            Instr::EndRepeat => self.end_repeat(),
            Instr::Exit => self.exit(),
            Instr::Send { to, bytes } => self.send(*to, *bytes),
            Instr::Recv { from, wait } => self.recv(*from, *wait),
            other => Err(EmitError::Malformed(format!("real vCPUs cannot run {other:?}"))),
        }
    }

    /// `rax` = the TSC (`rdtsc` leaves it in `edx:eax`); clobbers `rdx`.
    fn read_tsc(&mut self) -> Emitted {
        self.a.rdtsc()?;
        self.a.shl(rdx, 32)?;
        self.a.or(rax, rdx)?;
        Ok(())
    }

    /// Adds the running cycles since the last check to the counter at `counter` and leaves
    /// them in `rcx` (0 across a descheduling gap). Clobbers `rax`, `rdx`.
    fn tick(&mut self, counter: u64) -> Emitted {
        self.read_tsc()?;
        self.a.mov(rcx, rax)?;
        self.a.sub(rcx, qword_ptr(at(r15, LAST_TSC)))?;
        self.a.mov(qword_ptr(at(r15, LAST_TSC)), rax)?;
        self.a.mov(rdx, self.context.gap_cycles)?;
        self.a.cmp(rcx, rdx)?;
        let mut ran = self.a.create_label();
        self.a.jbe(ran)?;
        self.descheduled()?;
        self.a.xor(ecx, ecx)?;
        self.a.set_label(&mut ran)?;
        self.a.add(qword_ptr(at(r15, counter)), rcx)?;
        Ok(())
    }

    /// Notes that the vCPU was not running until `rax` (the TSC): when it resumed, one more
    /// gap, and (scheduled in again) its pause-loop count restarts and its window shrinks
    /// back to its base. Clobbers `rcx`.
    fn descheduled(&mut self) -> Emitted {
        self.a.mov(qword_ptr(at(r15, RESUME_TSC)), rax)?;
        self.a.inc(qword_ptr(at(r15, GAPS)))?;
        if let Some(ple) = self.context.ple {
            self.a.mov(qword_ptr(at(r15, PLE_SPUN)), 0)?;
            self.a.mov(rcx, ple.base_cycles)?;
            self.a.mov(qword_ptr(at(r15, PLE_WINDOW)), rcx)?;
        }
        Ok(())
    }

    fn set_activity(&mut self, activity: u32) -> Emitted {
        self.a.mov(qword_ptr(at(r15, ACTIVITY)), activity as i32)?;
        Ok(())
    }

    /// Loads the next draw of instruction `i`'s table into `dest` and moves its cursor on.
    fn next_draw(&mut self, i: usize, dest: AsmRegister64) -> Emitted {
        let Some(slot) = self.context.tables.iter().position(|t| t.instr == i) else {
            return Err(EmitError::Malformed(format!("instruction {i} draws but has no table")));
        };
        let table = self.context.tables[slot];
        let cursor = at(r15, TABLE_CURSORS + 8 * slot as u64);
        self.a.mov(rcx, qword_ptr(cursor))?;
        self.a.mov(rax, table.addr)?;
        self.a.mov(dest, qword_ptr(rax + rcx * 8))?;
        self.a.inc(rcx)?;
        self.a.cmp(rcx, table.len as i32)?;
        let mut keep = self.a.create_label();
        self.a.jb(keep)?;
        self.a.xor(ecx, ecx)?;
        self.a.set_label(&mut keep)?;
        self.a.mov(qword_ptr(cursor), rcx)?;
        Ok(())
    }

    /// Where the cycles of a duration come from: none, for ever, fixed, or drawn from the
    /// instruction's table (`random_tables`).
    fn cycles_of(&self, dur: Dur) -> Cycles {
        let fixed = match dur {
            Dur::Fixed(t) => Some(t),
            Dur::Jitter { mean, cv } if cv <= 0.0 => Some(mean),
            _ => None,
        };
        match fixed.map(|t| ns_to_cycles(t, self.context.tsc_hz)) {
            Some(0) => Cycles::Zero,
            Some(u64::MAX) => Cycles::Forever,
            Some(c) => Cycles::Fixed(c),
            None => Cycles::Drawn,
        }
    }

    /// Loads a duration's cycles into `rbx`, jumping to `done` when a draw is 0 (the
    /// duration takes no time, as in the simulator). Not for `Zero` or `Forever`.
    fn load_cycles(&mut self, i: usize, cycles: Cycles, done: CodeLabel) -> Emitted {
        match cycles {
            Cycles::Fixed(c) => self.a.mov(rbx, c)?,
            _ => {
                self.next_draw(i, rbx)?;
                self.a.test(rbx, rbx)?;
                self.a.jz(done)?;
            }
        }
        Ok(())
    }

    /// `Compute(dur)`: ticks until `dur` of running time has passed. A compute that draws 0
    /// takes no time, as in the simulator; one of `FOREVER` never ends.
    fn compute(&mut self, i: usize, dur: Dur) -> Emitted {
        let cycles = self.cycles_of(dur);
        if cycles == Cycles::Zero {
            return Ok(());
        }
        self.set_activity(ACTIVITY_COMPUTE)?;
        let mut work = self.a.create_label();
        let mut done = self.a.create_label();
        if cycles == Cycles::Forever {
            self.a.set_label(&mut work)?;
            self.tick(COMPUTE_CYCLES)?;
            self.a.jmp(work)?;
            return Ok(());
        }
        self.load_cycles(i, cycles, done)?;
        self.a.set_label(&mut work)?;
        self.tick(COMPUTE_CYCLES)?;
        self.a.sub(rbx, rcx)?;
        self.a.ja(work)?;
        self.a.set_label(&mut done)?;
        self.a.nop()?;
        Ok(())
    }

    /// The spin loop's accounting: `tick` into the spin counter, then, for a kernel-mode
    /// lock, the pause-loop check. Clobbers `rax`, `rcx`, `rdx`.
    fn spin_tick(&mut self, kernel: bool) -> Emitted {
        self.tick(SPIN_CYCLES)?;
        match (kernel, self.context.ple) {
            (true, Some(ple)) => self.ple_check(ple),
            _ => Ok(()),
        }
    }

    /// Adds the cycles just spun (`rcx`) to the pause-loop count and exits when it reaches
    /// the window: the count restarts, the window grows (up to its maximum), the exit
    /// counter goes up, and the write to `PLE_EXIT_ADDR` leaves guest code until the vCPU's
    /// thread resumes it. The exit's own time is the hypervisor's, neither spinning nor
    /// computing; an exit longer than `ple.exit_gap_cycles` means the vCPU was stopped
    /// during it, a descheduling like any other.
    fn ple_check(&mut self, ple: PleWindow) -> Emitted {
        let mut below = self.a.create_label();
        self.a.add(qword_ptr(at(r15, PLE_SPUN)), rcx)?;
        self.a.mov(rax, qword_ptr(at(r15, PLE_SPUN)))?;
        self.a.cmp(rax, qword_ptr(at(r15, PLE_WINDOW)))?;
        self.a.jb(below)?;
        self.a.mov(qword_ptr(at(r15, PLE_SPUN)), 0)?;
        self.a.inc(qword_ptr(at(r15, PLE_EXITS)))?;
        if ple.grow > 1 {
            self.a.mov(rax, qword_ptr(at(r15, PLE_WINDOW)))?;
            self.a.mov(rcx, u64::from(ple.grow))?;
            self.a.imul_2(rax, rcx)?;
            self.a.mov(rcx, ple.max_cycles)?;
            self.a.cmp(rax, rcx)?;
            self.a.cmova(rax, rcx)?;
            self.a.mov(qword_ptr(at(r15, PLE_WINDOW)), rax)?;
        }
        self.a.mov(eax, PLE_EXIT_ADDR as u32)?;
        self.a.mov(byte_ptr(rax), 0u32)?;
        self.read_tsc()?;
        self.a.mov(rcx, rax)?;
        self.a.sub(rcx, qword_ptr(at(r15, LAST_TSC)))?;
        self.a.mov(qword_ptr(at(r15, LAST_TSC)), rax)?;
        self.a.mov(rdx, ple.exit_gap_cycles)?;
        self.a.cmp(rcx, rdx)?;
        self.a.jbe(below)?;
        self.descheduled()?;
        self.a.set_label(&mut below)?;
        self.a.nop()?;
        Ok(())
    }

    /// `Lock`: spins with `PAUSE` until the lock is this thread's, then counts the
    /// acquisition, starts its hold time and bumps the lock's witness. A kernel-mode lock
    /// runs the same code (in ring 3: there is no guest kernel), marks its activity as in
    /// kernel, and raises pause-loop exits while it spins.
    fn lock(&mut self, i: usize, choice: LockChoice, kernel: bool) -> Emitted {
        if self.held.len() == MAX_LOCK_DEPTH {
            return Err(EmitError::Malformed(format!("more than {MAX_LOCK_DEPTH} locks held at once")));
        }
        let mode = if kernel { ACTIVITY_IN_KERNEL } else { 0 };
        self.set_activity(ACTIVITY_LOCK_WAIT | mode)?;
        match choice {
            LockChoice::Fixed(l) => self.a.mov(esi, (SHARED_ADDR + LOCKS + LINE * u64::from(l)) as u32)?,
            LockChoice::Uniform => self.next_draw(i, rsi)?,
        }
        let mut got = self.a.create_label();
        match self.context.lock_kind {
            // Linux's ticket spinlock before qspinlock (arch/x86/include/asm/spinlock.h,
            // v4.1 `arch_spin_lock`): take a ticket with `lock xadd`, then spin with
            // `cpu_relax()` (PAUSE) until the ticket being served is ours.
            LockKind::Ticket => {
                self.a.mov(edi, 1)?;
                self.a.lock().xadd(dword_ptr(at(rsi, LOCK_WORD)), edi)?;
                let mut check = self.a.create_label();
                self.a.set_label(&mut check)?;
                self.a.cmp(dword_ptr(at(rsi, LOCK_SERVING)), edi)?;
                self.a.je(got)?;
                self.a.pause()?;
                self.spin_tick(kernel)?;
                self.a.jmp(check)?;
            }
            // Test-and-test-and-set (the simulator's tas: whoever executes when the lock is
            // free takes it, newcomers included): `xchg` to take it, and while it is held
            // spin reading it, so waiters do not bounce its line.
            LockKind::Tas => {
                let mut attempt = self.a.create_label();
                let mut spin = self.a.create_label();
                self.a.set_label(&mut attempt)?;
                self.a.mov(eax, 1)?;
                self.a.xchg(dword_ptr(at(rsi, LOCK_WORD)), eax)?;
                self.a.test(eax, eax)?;
                self.a.jz(got)?;
                self.a.set_label(&mut spin)?;
                self.a.pause()?;
                self.spin_tick(kernel)?;
                self.a.cmp(dword_ptr(at(rsi, LOCK_WORD)), 0)?;
                self.a.jne(spin)?;
                self.a.jmp(attempt)?;
            }
            other => return Err(EmitError::Malformed(format!("real vCPUs cannot run {other:?} locks"))),
        }
        self.a.set_label(&mut got)?;
        // The witness is read here and written back last, a window of a few dozen cycles in
        // which a second holder would lose an increment.
        self.a.mov(r8, qword_ptr(at(rsi, LOCK_WITNESS)))?;
        let depth = 8 * self.held.len() as u64;
        self.a.mov(qword_ptr(at(r15, HELD + depth)), rsi)?;
        self.read_tsc()?;
        self.a.mov(qword_ptr(at(r15, HOLD_START + depth)), rax)?;
        self.a.inc(qword_ptr(at(r15, ACQUISITIONS)))?;
        self.a.inc(r8)?;
        self.a.mov(qword_ptr(at(rsi, LOCK_WITNESS)), r8)?;
        self.held.push(kernel);
        self.set_activity(ACTIVITY_LOCK_HELD | mode)
    }

    /// `Unlock`: releases the lock taken last and adds its hold time.
    fn unlock(&mut self) -> Emitted {
        if self.held.pop().is_none() {
            return Err(EmitError::Malformed("an unlock without a lock held".into()));
        }
        let depth = self.held.len();
        let slot = 8 * depth as u64;
        self.a.mov(rsi, qword_ptr(at(r15, HELD + slot)))?;
        self.read_tsc()?;
        self.a.sub(rax, qword_ptr(at(r15, HOLD_START + slot)))?;
        self.a.add(qword_ptr(at(r15, HOLD_CYCLES)), rax)?;
        match self.context.lock_kind {
            // `arch_spin_unlock`: serve the next ticket. Only the holder writes it, so a plain
            // add suffices (x86 stores are released in order).
            LockKind::Ticket => self.a.add(dword_ptr(at(rsi, LOCK_SERVING)), 1)?,
            _ => self.a.mov(dword_ptr(at(rsi, LOCK_WORD)), 0u32)?,
        }
        match self.held.last() {
            None => self.set_activity(ACTIVITY_COMPUTE),
            Some(&kernel) => self.set_activity(ACTIVITY_LOCK_HELD | if kernel { ACTIVITY_IN_KERNEL } else { 0 }),
        }
    }

    /// `Barrier(wait)`: a sense-reversing centralized barrier (Mellor-Crummey and Scott,
    /// "Algorithms for scalable synchronization on shared-memory multiprocessors", TOCS
    /// 1991, Fig. 8): each arrival flips its own sense and decrements the count; the last
    /// resets the count and publishes its sense, which releases the waiters. A barrier
    /// whose waiters may block also wakes them (`blocking`); each waits as `wait` says.
    fn barrier(&mut self, wait: BarrierWait) -> Emitted {
        self.set_activity(ACTIVITY_BARRIER_WAIT)?;
        self.a.mov(edi, dword_ptr(at(r15, SENSE)))?;
        self.a.xor(edi, 1)?;
        self.a.mov(dword_ptr(at(r15, SENSE)), edi)?;
        self.a.mov(eax, -1)?;
        self.a.lock().xadd(dword_ptr(at(r14, BARRIER_COUNT)), eax)?;
        let mut waiting = self.a.create_label();
        let mut passed = self.a.create_label();
        self.a.cmp(eax, 1)?;
        self.a.jne(waiting)?;
        self.a.mov(dword_ptr(at(r14, BARRIER_COUNT)), self.context.barrier_parties)?;
        self.a.mov(dword_ptr(at(r14, BARRIER_SENSE)), edi)?;
        if wait != BarrierWait::Spin {
            self.wake_waiters()?;
        }
        self.a.jmp(passed)?;
        self.a.set_label(&mut waiting)?;
        // A label marks the next instruction, and each wait begins with a label of its own.
        self.a.nop()?;
        self.wait_until(Until::BarrierSense, wait, passed)?;
        self.a.set_label(&mut passed)?;
        self.a.inc(qword_ptr(at(r15, BARRIERS)))?;
        self.set_activity(ACTIVITY_COMPUTE)
    }

    fn repeat(&mut self, times: Option<u64>) -> Emitted {
        if self.loops.len() == MAX_LOOP_DEPTH {
            return Err(EmitError::Malformed(format!("loops nested deeper than {MAX_LOOP_DEPTH}")));
        }
        if let Some(n) = times {
            self.a.mov(rax, n)?;
            self.a.mov(qword_ptr(at(r15, LOOPS + 8 * self.loops.len() as u64)), rax)?;
        }
        let mut body = self.a.create_label();
        self.a.set_label(&mut body)?;
        // A label marks the next instruction, and the body may start with another loop's.
        self.a.nop()?;
        self.loops.push((body, times.is_none()));
        Ok(())
    }

    fn end_repeat(&mut self) -> Emitted {
        let Some((body, forever)) = self.loops.pop() else {
            return Err(EmitError::Malformed("EndRepeat without Repeat".into()));
        };
        if forever {
            self.a.jmp(body)?;
        } else {
            self.a.dec(qword_ptr(at(r15, LOOPS + 8 * self.loops.len() as u64)))?;
            self.a.jnz(body)?;
        }
        Ok(())
    }

    /// `Exit`: the program's only VM exit, a write to the done page (MMIO). Should the host
    /// ever resume it, `ud2` faults instead of running on.
    fn exit(&mut self) -> Emitted {
        self.set_activity(ACTIVITY_DONE)?;
        self.a.mov(eax, DONE_ADDR as u32)?;
        self.a.mov(byte_ptr(rax), 0u32)?;
        self.a.ud2()?;
        Ok(())
    }
}
