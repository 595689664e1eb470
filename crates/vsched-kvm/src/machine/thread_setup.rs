//! The OS-level plumbing of vCPU threads: the kick signal that gets a thread out of
//! `KVM_RUN`, the signal mask and scheduling class each vCPU thread sets for itself, and
//! pinning a thread to a host CPU.
//!
//! Kicking (the way QEMU and cloud-hypervisor do it): the scheduler sets `immediate_exit`
//! in the vCPU's `kvm_run` and sends the thread a signal whose handler does nothing and is
//! installed without `SA_RESTART`. A thread in guest mode exits with `EINTR`; one about to
//! enter sees `immediate_exit` and returns at once (KVM API docs, `KVM_CAP_IMMEDIATE_EXIT`),
//! so a signal that arrives just before `KVM_RUN` is not lost.

use std::sync::OnceLock;

use crate::backend::BackendError;

/// The kick signal: a real-time signal well past those glibc and the usual VMM libraries
/// take (vmm-sys-util hands out `SIGRTMIN() + n` from 0).
pub fn kick_signal() -> libc::c_int {
    libc::SIGRTMIN() + 7
}

extern "C" fn ignore_kick(_signal: libc::c_int) {}

fn handler_address() -> libc::sighandler_t {
    ignore_kick as *const () as libc::sighandler_t
}

/// Installs the kick handler once per process. Refuses if something else already handles
/// that signal (taking it over would break that something).
pub fn install_kick_handler() -> Result<(), BackendError> {
    static INSTALLED: OnceLock<Result<(), BackendError>> = OnceLock::new();
    INSTALLED.get_or_init(install).clone()
}

fn install() -> Result<(), BackendError> {
    let signal = kick_signal();
    // SAFETY: sigaction with a zeroed struct, an empty mask and a handler that touches
    // nothing is async-signal-safe; `old` is a valid struct to write.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
            return Err(os_failure("cannot read the kick signal's handler"));
        }
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != handler_address() {
            return Err(BackendError::Unavailable(format!(
                "signal {signal} (SIGRTMIN+7), which stops vCPUs, already has a handler in this process"
            )));
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler_address();
        action.sa_flags = 0; // no SA_RESTART: KVM_RUN must return EINTR
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
            return Err(os_failure("cannot install the kick signal's handler"));
        }
    }
    Ok(())
}

/// Makes the calling thread a vCPU thread: the normal time-sharing class whatever its
/// creator's (a vCPU thread that inherits a real-time scheduler thread's priority starves
/// that scheduler), and every asynchronous signal blocked but the kick (Ctrl-C and the like
/// go to the scheduler's threads, which clean up). Returns its kernel thread id.
pub fn become_vcpu_thread() -> Result<libc::pid_t, String> {
    // SAFETY: plain syscalls on the calling thread with valid, initialized arguments.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        let err = libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_OTHER, &param);
        if err != 0 {
            return Err(format!("cannot set SCHED_OTHER: {}", std::io::Error::from_raw_os_error(err)));
        }
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut mask);
        // Faults are synchronous: blocking them would only turn a crash into a hang.
        for keep in [kick_signal(), libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGTRAP] {
            libc::sigdelset(&mut mask, keep);
        }
        let err = libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
        if err != 0 {
            return Err(format!("cannot set the signal mask: {}", std::io::Error::from_raw_os_error(err)));
        }
        Ok(libc::gettid())
    }
}

/// Sends the kick signal to `thread`.
pub fn kick(thread: libc::pthread_t) {
    // SAFETY: `thread` is a vCPU thread not yet joined (the backend joins only when it
    // drops), so its handle is valid; an exited one makes this return ESRCH, harmlessly.
    unsafe { libc::pthread_kill(thread, kick_signal()) };
}

/// Pins kernel thread `tid` to host CPU `cpu`.
pub fn pin(tid: libc::pid_t, cpu: usize) -> Result<(), String> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("host CPU {cpu} is beyond the CPU sets this build handles"));
    }
    // SAFETY: a zeroed cpu_set_t is the empty set; `cpu` is within it (checked above).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!("cannot pin to host CPU {cpu}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

fn os_failure(what: &str) -> BackendError {
    BackendError::Failed(format!("{what}: {}", std::io::Error::last_os_error()))
}
