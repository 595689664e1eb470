//! Guest programs: what each vCPU's guest thread executes.
//!
//! A workload (crate `vsched-workloads`) compiles to one [`Program`] per vCPU. The simulator
//! interprets it (see `sim/interpret.rs`): computing makes progress only while the vCPU runs; waiting
//! for a lock or at a spinning barrier burns the vCPU's time without progress; blocking
//! (I/O, a blocking barrier, exit) gives the pCPU back to the hypervisor.

use std::sync::Arc;

use rand::Rng;
use vsched_engine::{round_to_time, StreamRng, Time};

/// A duration drawn each time the instruction runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dur {
    Fixed(Time),
    /// Normal with the given mean and coefficient of variation, truncated at zero.
    Jitter {
        mean: Time,
        cv: f64,
    },
    /// Exponential with the given mean (Poisson arrivals, think times).
    Exp {
        mean: Time,
    },
}

/// "Forever": a compute that never finishes within any horizon (CPU hogs).
pub const FOREVER: Time = u64::MAX / 4;

impl Dur {
    pub fn sample(&self, rng: &mut StreamRng) -> Time {
        match *self {
            Dur::Fixed(t) => t,
            Dur::Jitter { mean, cv } => {
                if cv <= 0.0 {
                    return mean;
                }
                // Box-Muller: two uniforms give one standard normal, through libm's pure-Rust
                // log and cos (the same bits on every platform, unlike the system libm), or
                // faster with the same result (`jitter`).
                let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
                let u2: f64 = rng.gen();
                crate::jitter::duration(mean, cv, u1, u2)
            }
            Dur::Exp { mean } => {
                let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
                round_to_time(-(mean as f64) * libm::log(u))
            }
        }
    }
}

/// A guest lock's algorithm (`sim/locks.rs` and its siblings say what each does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// FIFO tickets: the lock passes to the next waiter in line even if that waiter's vCPU
    /// is descheduled (lock-waiter preemption).
    Ticket,
    /// Test-and-set: whichever spinner is running when the lock frees takes it.
    Tas,
    /// Queued (MCS) spinlock, Linux's native qspinlock: waiters queue FIFO and the head of the
    /// queue takes the lock when it executes; newcomers cannot pass a queue.
    Mcs,
    /// Ouyang and Lange's preemptable ticket spinlock (VEE 2013): FIFO tickets, but a waiter
    /// that has waited longer than a timeout proportional to its place in line may take a
    /// free lock out of order.
    PreemptableTicket,
    /// A kernel sleeping lock (`struct mutex`): waiters spin while the owner is on a CPU and
    /// sleep once it is not (optimistic spinning, kernel/locking/mutex.c).
    Mutex,
}

/// Which lock an acquisition takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockChoice {
    Fixed(u32),
    /// One of the VM's locks, uniformly at random.
    Uniform,
}

/// How a thread waits at a barrier or for a message. Workloads derive it from the guest's
/// parallel runtime (`vsched-workloads/src/runtime.rs`), which says which runtime waits how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarrierWait {
    Spin,
    Block,
    /// Spin for at most this much running time, then block.
    SpinThenBlock(Time),
    /// Spin for at most this many iterations of a check-and-`PAUSE` loop, then block (a spin
    /// COUNT, libgomp's `GOMP_SPINCOUNT`). Iterations only advance while the vCPU runs, so
    /// the simulator turns the count into running time with its host's
    /// `spin_iteration_cycles` and `cpu_ghz`, which the workload does not know.
    SpinIterationsThenBlock(u64),
    /// Spin until this much guest time has passed since the wait began, whether the vCPU ran
    /// or not, then block (a deadline read from the timestamp counter, which keeps counting
    /// while the vCPU is descheduled: Intel OpenMP's `KMP_BLOCKTIME`). A waiter whose
    /// deadline passed while it was descheduled blocks as soon as it runs again.
    SpinForThenBlock(Time),
}

/// One instruction of a guest program.
#[derive(Debug, Clone, PartialEq)]
pub enum Instr {
    Compute(Dur),
    /// Acquire a lock, waiting as its kind says while it is held (spinning; a mutex also
    /// sleeps, a paravirtual spinlock also halts). `kernel` spinning is subject to pause-loop
    /// exiting (Intel PLE only fires at CPL 0); user-mode spinning is not. A mutex is a
    /// kernel lock whatever `kernel` says.
    Lock {
        choice: LockChoice,
        kernel: bool,
    },
    /// Release the lock acquired most recently.
    Unlock,
    /// Wait until every thread of the VM has arrived.
    Barrier(BarrierWait),
    /// Interrupt the VM's other vCPUs and spin (in kernel mode) until each has acknowledged:
    /// a TLB shootdown (`flush_tlb_mm_range` → `smp_call_function_many`). Which vCPUs are
    /// interrupted, and when they answer, is the simulator's (`sim/irq.rs`).
    IpiSync,
    /// Send `bytes` to rank `to` of the VM's parallel job (its virtual cluster, or the VM
    /// alone: rank = vCPU index). Asynchronous, as MPI's eager protocol: the sender goes on
    /// at once and the network delivers (`sim/network.rs`). Messages from one rank to
    /// another arrive in the order they were sent.
    Send {
        to: u32,
        bytes: u64,
    },
    /// Take the next message from rank `from`, waiting as `wait` says if none has arrived
    /// (MPI receivers busy-poll by default; `Spin` here is user-mode polling, so no PLE).
    Recv {
        from: u32,
        wait: BarrierWait,
    },
    /// Driver domain (dom0) only: forward the pass (a message, a disk request) this thread
    /// was processing, then take the next one from the host's backlog and process it, or
    /// block until one arrives.
    NetServe,
    /// Block for a duration (I/O, sleep), then wake.
    Io(Dur),
    /// Read or write `bytes` on the VM's virtual disk and block until the request completes:
    /// through the host's driver domain (blkback) and its disk (`sim/disk.rs`).
    Disk {
        bytes: u64,
    },
    /// Block until the next request of a client outside the host arrives, a drawn gap from
    /// now; on a host with a driver domain the request passes its netback first
    /// (`sim/client.rs`).
    ClientRequest(Dur),
    /// Send a reply of `bytes` to the client (through the driver domain's netback, without
    /// waiting).
    ClientReply {
        bytes: u64,
    },
    /// Start of a loop body run `times` times (None = forever). `end` is the index of the
    /// matching [`Instr::EndRepeat`].
    Repeat {
        times: Option<u64>,
        end: usize,
    },
    EndRepeat,
    /// Marks the start / end of a request (web serving latency and throughput).
    RequestBegin,
    RequestEnd,
    Exit,
}

/// An immutable guest program, shared by the threads that run it.
pub type Program = Arc<[Instr]>;

/// Builds programs with well-formed loops.
#[derive(Default)]
pub struct ProgramBuilder {
    instrs: Vec<Instr>,
    open: Vec<usize>,
}

impl ProgramBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, instr: Instr) -> &mut Self {
        self.instrs.push(instr);
        self
    }

    /// Opens a loop; close it with [`ProgramBuilder::end_repeat`].
    pub fn repeat(&mut self, times: Option<u64>) -> &mut Self {
        assert!(times != Some(0), "an empty loop is the caller's to skip");
        self.open.push(self.instrs.len());
        self.instrs.push(Instr::Repeat { times, end: 0 });
        self
    }

    pub fn end_repeat(&mut self) -> &mut Self {
        let start = self.open.pop().expect("end_repeat without repeat");
        let end = self.instrs.len();
        if let Instr::Repeat { end: e, .. } = &mut self.instrs[start] {
            *e = end;
        }
        self.instrs.push(Instr::EndRepeat);
        self
    }

    /// Finishes the program, appending `Exit`.
    pub fn build(mut self) -> Program {
        assert!(self.open.is_empty(), "unclosed loop");
        self.instrs.push(Instr::Exit);
        self.instrs.into()
    }
}

/// What a workload hands the simulator for one VM.
#[derive(Debug, Clone)]
pub struct GuestSpec {
    /// One program per guest thread: at least one per vCPU; more threads than vCPUs share
    /// them through the guest's scheduler (`sim/guest_sched.rs`).
    pub programs: Vec<Program>,
    /// The VM's vCPUs.
    pub vcpus: usize,
    pub locks: u32,
    pub lock_kind: LockKind,
    /// True when every thread eventually exits, so the VM has a completion time.
    pub finite: bool,
    /// The last `idle_vcpus` programs are not threads of the workload but halted vCPUs
    /// (`[[vm]] idle_vcpus`): they take part in no barrier.
    pub idle_vcpus: usize,
}

impl GuestSpec {
    /// A guest that takes no locks (its `lock_kind` is then irrelevant), one thread per vCPU.
    pub fn lockless(programs: Vec<Program>, finite: bool) -> GuestSpec {
        GuestSpec { vcpus: programs.len(), programs, locks: 0, lock_kind: LockKind::Ticket, finite, idle_vcpus: 0 }
    }

    /// This guest on `vcpus` vCPUs. With fewer programs than vCPUs, the vCPUs beyond them are
    /// halted (`idle_vcpus`): each runs a thread that exits at its first run, so it never runs
    /// again and does not hold back completion. With more, the threads share the vCPUs.
    pub fn on_vcpus(mut self, vcpus: usize) -> GuestSpec {
        self.vcpus = vcpus;
        self.idle_vcpus = vcpus.saturating_sub(self.programs.len());
        if self.idle_vcpus > 0 {
            self.programs.resize(vcpus, ProgramBuilder::new().build());
        }
        self
    }
}
