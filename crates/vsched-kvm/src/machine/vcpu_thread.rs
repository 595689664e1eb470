//! One OS thread per vCPU, doing `KVM_RUN` when told and parked otherwise.
//!
//! The scheduler and the thread share a `VcpuControl`: a command (park, run, quit) the
//! scheduler sets, and a phase (parked, running, exited) the thread sets, both under one
//! mutex, with a condition variable each side waits on. The thread enters guest code only
//! after it has seen `Run` and published `Running` under the lock; `stop` sets `Park`,
//! kicks the thread if it is `Running` (`thread_setup`), and waits for it to publish
//! `Parked`. So when `stop` returns the vCPU is provably out of guest code.
//!
//! The thread returns its `VcpuFd` when it ends, even if it panics: the fd owns the mmapped
//! `kvm_run` whose `immediate_exit` the scheduler writes, and it must stay mapped until the
//! thread is joined (unmapping it earlier is the teardown race that segfaulted the
//! prototype).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kvm_ioctls::{VcpuExit, VcpuFd};

use super::thread_setup::{become_vcpu_thread, kick, pin};
use crate::backend::{BackendError, BackendEvent};
use crate::guest_code::layout::{DONE_ADDR, HALT_ADDR, PLE_EXIT_ADDR, SEND_ADDR, WAKE_ADDR};

/// How long the scheduler waits for a vCPU thread to acknowledge: to be up and parked after
/// `spawn`, or out of guest code after `stop` (which takes ~50-70 µs at p50 on an idle host).
/// On a loaded host the thread may wait that long for a CPU: a stop kicks it again every
/// [`KICK_AGAIN`] and gives up only after this, so load delays a run but does not fail it
/// (two runs of 30 at a load average of ~15 failed with a 1 s bound).
const ACK_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a stop that is not acknowledged kicks the vCPU thread again.
const KICK_AGAIN: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Park,
    Run,
    Quit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not started yet: the thread has not reported its id.
    Starting,
    Parked,
    Running,
    /// The guest program ended, the vCPU failed, or the backend is quitting.
    Exited,
}

struct Shared {
    command: Command,
    phase: Phase,
    /// Kernel thread id, for `sched_setaffinity`.
    tid: libc::pid_t,
    /// The host CPU the thread is pinned to, if any.
    pinned: Option<usize>,
    /// Why the thread ended, if it failed.
    failure: Option<String>,
    /// The thread's CPU time when it ended.
    final_cpu_ns: Option<u64>,
}

/// What the scheduler and one vCPU thread share.
pub struct VcpuControl {
    shared: Mutex<Shared>,
    changed: Condvar,
    /// `immediate_exit` of the vCPU's `kvm_run`; valid until the thread is joined.
    immediate_exit: *const AtomicU8,
    /// Global index and a name for messages.
    index: usize,
    label: String,
}

// SAFETY: `immediate_exit` points into the vCPU's kvm_run mapping, which the vCPU thread
// keeps alive until it is joined (it returns the fd), and it is only ever accessed
// atomically.
unsafe impl Send for VcpuControl {}
unsafe impl Sync for VcpuControl {}

/// A running vCPU thread, as the scheduler holds it.
pub struct VcpuThread {
    control: Arc<VcpuControl>,
    handle: Option<std::thread::JoinHandle<VcpuFd>>,
}

impl VcpuThread {
    /// Spawns the thread of `vcpu` (global index `index`), parked; returns once it is.
    pub fn spawn(
        mut vcpu: VcpuFd,
        index: usize,
        label: String,
        events: Sender<BackendEvent>,
    ) -> Result<VcpuThread, BackendError> {
        let immediate_exit = std::ptr::addr_of_mut!(vcpu.get_kvm_run().immediate_exit).cast::<AtomicU8>();
        let control = Arc::new(VcpuControl {
            shared: Mutex::new(Shared {
                command: Command::Park,
                phase: Phase::Starting,
                tid: 0,
                pinned: None,
                failure: None,
                final_cpu_ns: None,
            }),
            changed: Condvar::new(),
            immediate_exit,
            index,
            label,
        });
        let theirs = Arc::clone(&control);
        let handle = std::thread::Builder::new()
            .name(format!("vcpu-{index}"))
            .spawn(move || thread_main(vcpu, &theirs, &events))
            .map_err(|e| BackendError::Failed(format!("cannot start the thread of vCPU {index}: {e}")))?;
        let thread = VcpuThread { control, handle: Some(handle) };
        let started = {
            let shared = thread.control.lock();
            let (shared, _) = thread
                .control
                .changed
                .wait_timeout_while(shared, ACK_TIMEOUT, |s| s.phase == Phase::Starting)
                .unwrap_or_else(|e| e.into_inner());
            match shared.phase {
                Phase::Parked => Ok(()),
                _ => Err(shared.failure.clone().unwrap_or_else(|| format!("not within {ACK_TIMEOUT:?}"))),
            }
        };
        match started {
            Ok(()) => Ok(thread),
            // Dropping `thread` ends and joins it.
            Err(why) => {
                Err(BackendError::Failed(format!("the thread of {} did not start: {why}", thread.control.label)))
            }
        }
    }

    /// Lets the vCPU run on host CPU `cpu`. A vCPU whose thread has ended (its guest finished
    /// or it failed) stays ended: the scheduler may not have read that event yet, since a
    /// guest can finish just as it is stopped, so this is no error.
    pub fn start(&self, cpu: usize) -> Result<(), BackendError> {
        let c = &self.control;
        let mut shared = c.lock();
        match (shared.phase, shared.command) {
            (Phase::Exited, _) => return Ok(()),
            (_, Command::Run) => return Err(BackendError::Failed(format!("{} was started twice", c.label))),
            _ => {}
        }
        if shared.pinned != Some(cpu) {
            pin(shared.tid, cpu).map_err(|m| BackendError::Failed(format!("{}: {m}", c.label)))?;
            shared.pinned = Some(cpu);
        }
        shared.command = Command::Run;
        c.changed.notify_all();
        Ok(())
    }

    /// Stops the vCPU; returns once its thread is out of guest code (or exited).
    pub fn stop(&self) -> Result<(), BackendError> {
        let c = &self.control;
        let mut shared = c.lock();
        if shared.phase == Phase::Exited {
            return Ok(());
        }
        shared.command = Command::Park;
        if shared.phase != Phase::Running {
            // Parked: it will see `Park` before it could run.
            return Ok(());
        }
        c.set_immediate_exit(true);
        drop(shared);
        kick(self.pthread());
        let deadline = Instant::now() + ACK_TIMEOUT;
        let mut next_kick = Instant::now() + KICK_AGAIN;
        let mut shared = c.lock();
        while shared.phase == Phase::Running {
            let now = Instant::now();
            if now >= deadline {
                return Err(BackendError::Failed(format!("{} did not stop within {ACK_TIMEOUT:?}", c.label)));
            }
            if now >= next_kick {
                drop(shared);
                kick(self.pthread());
                next_kick = now + KICK_AGAIN;
                shared = c.lock();
                continue;
            }
            let wait = next_kick.min(deadline).saturating_duration_since(now);
            shared = c.changed.wait_timeout(shared, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
        Ok(())
    }

    /// Tells the thread to end, kicking it out of guest code if need be.
    pub fn quit(&self) {
        if self.handle.is_none() {
            return;
        }
        let c = &self.control;
        let mut shared = c.lock();
        shared.command = Command::Quit;
        let running = shared.phase == Phase::Running;
        if running {
            c.set_immediate_exit(true);
        }
        c.changed.notify_all();
        drop(shared);
        if running {
            kick(self.pthread());
        }
    }

    /// Waits for the thread to end (after `quit`) and closes its vCPU.
    pub fn join(&mut self) {
        if let Some(handle) = self.handle.take() {
            // A panicked thread still returned its fd through `catch_unwind`, so Err means a
            // panic in the unwinding itself: nothing is left to close.
            drop(handle.join());
        }
    }

    /// Host CPU time the thread has used so far (guest code included), from the kernel's
    /// scheduler statistics; `None` if they cannot be read.
    pub fn cpu_time_ns(&self) -> Option<u64> {
        let shared = self.control.lock();
        if shared.phase == Phase::Exited {
            return shared.final_cpu_ns;
        }
        let tid = shared.tid;
        drop(shared);
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        stat.split_whitespace().next()?.parse().ok()
    }

    fn pthread(&self) -> libc::pthread_t {
        use std::os::unix::thread::JoinHandleExt;
        self.handle.as_ref().expect("joined only when the backend drops").as_pthread_t()
    }
}

impl Drop for VcpuThread {
    fn drop(&mut self) {
        self.quit();
        self.join();
    }
}

impl VcpuControl {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding this lock leaves plain data behind: carry on.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_immediate_exit(&self, on: bool) {
        // SAFETY: valid while the thread is not joined (see the struct); the kernel reads
        // this byte at each KVM_RUN entry.
        unsafe { (*self.immediate_exit).store(u8::from(on), Ordering::SeqCst) };
    }
}

fn thread_main(mut vcpu: VcpuFd, control: &VcpuControl, events: &Sender<BackendEvent>) -> VcpuFd {
    let outcome = catch_unwind(AssertUnwindSafe(|| run_loop(&mut vcpu, control, events)));
    let failure = match &outcome {
        Ok(Err(message)) => Some(message.clone()),
        Err(_) => Some("its thread panicked".to_string()),
        Ok(Ok(_)) => None,
    };
    {
        let mut shared = control.lock();
        shared.phase = Phase::Exited;
        shared.failure.clone_from(&failure);
        shared.final_cpu_ns = own_cpu_time_ns();
        control.changed.notify_all();
    }
    let event = match (outcome, failure) {
        (Ok(Ok(Some(event))), _) => event,
        (_, Some(message)) => {
            BackendEvent::Failed { vcpu: control.index, message: format!("{}: {message}", control.label) }
        }
        _ => return vcpu,
    };
    // The scheduler may be gone already (it dropped the backend): nobody to tell.
    let _ = events.send(event);
    vcpu
}

/// Runs guest code whenever told, until the guest ends (`Some(Finished)`), the backend
/// quits (`None`) or something fails. A pause-loop exit or a wake is reported and the guest
/// resumed at once, unless a stop came meanwhile; a halt is reported and the thread parks.
fn run_loop(
    vcpu: &mut VcpuFd,
    control: &VcpuControl,
    events: &Sender<BackendEvent>,
) -> Result<Option<BackendEvent>, String> {
    let tid = become_vcpu_thread()?;
    {
        let mut shared = control.lock();
        shared.tid = tid;
        shared.phase = Phase::Parked;
        control.changed.notify_all();
    }
    loop {
        let mut shared = control.lock();
        loop {
            match shared.command {
                Command::Quit => return Ok(None),
                Command::Run => break,
                Command::Park => {
                    if shared.phase != Phase::Parked {
                        shared.phase = Phase::Parked;
                        control.changed.notify_all();
                    }
                    shared = control.changed.wait(shared).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
        shared.phase = Phase::Running;
        control.set_immediate_exit(false);
        drop(shared);
        match vcpu.run() {
            // Kicked (or interrupted by a signal meant for someone else): see what to do.
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {}
            Ok(VcpuExit::Intr) => {}
            Ok(VcpuExit::MmioWrite(DONE_ADDR, _)) => return Ok(Some(BackendEvent::Finished { vcpu: control.index })),
            // The scheduler may be gone already (it is dropping the backend): sends may fail.
            Ok(VcpuExit::MmioWrite(PLE_EXIT_ADDR, _)) => {
                let _ = events.send(BackendEvent::PauseLoopExit { vcpu: control.index });
            }
            Ok(VcpuExit::MmioWrite(WAKE_ADDR, _)) => {
                let _ = events.send(BackendEvent::Wake { vcpu: control.index });
            }
            Ok(VcpuExit::MmioWrite(SEND_ADDR, data)) => {
                // One 8-byte write: the receiving rank, then the bytes (`layout::SEND_ADDR`).
                let Ok(word) = <[u8; 8]>::try_from(data) else {
                    return Err(format!("the guest sent a message with a {}-byte write, not 8", data.len()));
                };
                let word = u64::from_le_bytes(word);
                let send = BackendEvent::Send { vcpu: control.index, to: word as u32, bytes: word >> 32 };
                let _ = events.send(send);
            }
            Ok(VcpuExit::MmioWrite(HALT_ADDR, _)) => {
                // Parks itself (unless told to quit): the scheduler starts it again when it
                // is woken, and a `stop` meanwhile finds it parked.
                let mut shared = control.lock();
                if shared.command == Command::Run {
                    shared.command = Command::Park;
                }
                drop(shared);
                let _ = events.send(BackendEvent::Halted { vcpu: control.index });
            }
            Ok(exit) => {
                let what = format!("{exit:?}");
                let rip = vcpu.get_regs().map(|r| format!("{:#x}", r.rip)).unwrap_or_else(|_| "unknown".into());
                return Err(format!("the guest stopped with an unexpected exit {what} at rip {rip}{}", hint(&what)));
            }
            Err(e) => return Err(format!("KVM_RUN failed: {e}")),
        }
    }
}

/// The calling thread's CPU time (the same account as its `schedstat`).
fn own_cpu_time_ns() -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    ok.then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// What an unexpected exit most likely means, for the message.
fn hint(exit: &str) -> &'static str {
    if exit.starts_with("Shutdown") {
        " (a triple fault: the guest code faulted)"
    } else if exit.starts_with("Hlt") {
        " (the guest halted, which its code never does)"
    } else {
        ""
    }
}
