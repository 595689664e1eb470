//! The guest kernel's scheduler: threads that outnumber their VM's vCPUs.
//!
//! # Why
//! A VM whose program has more threads than the VM has vCPUs (an OpenMP program started with
//! `OMP_NUM_THREADS` above the guest's CPUs, a `make -j` wider than the VM) is scheduled
//! twice: the hypervisor picks which vCPU runs, the guest kernel which thread runs on it. A
//! thread that blocks gives its vCPU to another thread instead of halting it; a spinner
//! keeps it for its whole time slice; a lock holder can be preempted by its own guest.
//!
//! # What is modelled (a simple scheduler, after Linux's CFS)
//! - **Placement.** Thread `i` of a VM with `n` vCPUs starts on vCPU `i mod n`, first
//!   threads first: vCPU `k` runs thread `k`, the others wait in its run queue (FIFO).
//! - **Blocking.** A thread that blocks (I/O, a blocking barrier or receive, exit) is
//!   switched out: its vCPU runs the head of its run queue, paying `thread_switch_ns` and
//!   the refill of that thread's cache footprint (`cache`), and halts only when the queue is
//!   empty. A paravirtual lock waiter that halts (`pv_wait`)
//!   halts the vCPU itself: it waits with preemption disabled. Before a VM's workload starts
//!   (`clocks`) its vCPUs halt with their threads queued.
//! - **Time slices.** At each guest tick (`guest_kernel`) the running thread is preempted if
//!   others wait and it has run its slice: CFS's `sched_slice` for equal weights
//!   (kernel/sched/fair.c, Linux 2.6.38 to 6.5): a period of `sched_latency` = 6 ms, or
//!   `nr × min_granularity` (0.75 ms) beyond 8 threads, divided by the `nr` runnable
//!   threads, both scaled by `1 + log2(min(cpus, 8))` (`SCHED_TUNABLESCALING_LOG`); checked
//!   at the tick as `check_preempt_tick` does. The preempted thread goes to the tail of the
//!   queue: round robin, which is the order CFS's virtual runtimes give threads of equal
//!   weight that never sleep. A thread holding or spinning on a kernel lock, or spinning
//!   for IPI acknowledgements, is not preemptible (`preempt_disable`).
//! - **Wake-ups.** A thread woken while switched out goes back to its vCPU if that vCPU is
//!   idle (halted, or up only for its timer), else to the first idle vCPU of its VM, else
//!   to the tail of its own vCPU's queue: `select_idle_sibling`'s preference for the
//!   previous CPU, then any idle CPU sharing the cache (one VM's vCPUs are taken as one
//!   cache domain). Waking an idle vCPU is a wake-up the policy hears of.
//!
//! # Approximations
//! No wake-up preemption (`check_preempt_wakeup`: a woken thread waits for the tick or for
//! the running thread to block), no periodic load balancing between vCPUs (a thread moves
//! only when it wakes), no vruntime credit for sleepers, and no steal-time correction of the
//! slice (the slice counts the thread's running time, the hypervisor's preemptions
//! excluded). With one thread per vCPU nothing here ever runs.

use vsched_engine::{Time, NS_PER_US};

use super::state::{Core, GuestThread, ThreadState, Vcpu};
use crate::domain::VcpuState;
use crate::guest::LockKind;
use crate::ids::{ThreadId, VcpuId};

/// CFS's targeted preemption latency and minimum granularity before scaling
/// (`sysctl_sched_latency` = 6 ms, `sysctl_sched_min_granularity` = 0.75 ms), and the
/// number of threads beyond which the period stretches (`sched_nr_latency` = 8).
const SCHED_LATENCY_NS: Time = 6_000 * NS_PER_US;
const SCHED_MIN_GRANULARITY_NS: Time = 750 * NS_PER_US;
const SCHED_NR_LATENCY: Time = 8;

/// The time slice of each of `nr` runnable threads on a guest of `cpus` CPUs (`sched_slice`).
pub(super) fn guest_slice_ns(nr: usize, cpus: usize) -> Time {
    let factor = 1 + cpus.clamp(1, 8).ilog2() as Time; // get_update_sysctl_factor
    let nr = nr.max(1) as Time;
    let period = if nr > SCHED_NR_LATENCY { nr * SCHED_MIN_GRANULARITY_NS * factor } else { SCHED_LATENCY_NS * factor };
    period / nr
}

/// Whether thread `t` executes: it is its vCPU's current thread and that vCPU runs. (A
/// function of the two tables, not of `Core`, so that code holding a domain's locks mutably
/// can ask.)
pub(super) fn executing(vcpus: &[Vcpu], threads: &[GuestThread], t: ThreadId) -> bool {
    let vc = &vcpus[threads[t].vcpu];
    vc.curr == t && matches!(vc.state, VcpuState::Running(_))
}

impl GuestThread {
    /// Whether the guest may switch this thread out now (it is not inside the kernel with
    /// preemption disabled). A kernel spinlock's holder is not; a mutex's (`mutexes`) is:
    /// its critical section runs with preemption enabled.
    fn preemptible(&self, mutexes: bool) -> bool {
        !matches!(
            self.state,
            ThreadState::SpinLock { kernel: true, .. } | ThreadState::SpinIpi { .. } | ThreadState::HaltedLock { .. }
        ) && (mutexes || !self.held.iter().any(|&(_, kernel)| kernel))
    }
}

impl Core {
    /// The thread vCPU `v` runs.
    pub(super) fn curr_thread(&self, v: VcpuId) -> &GuestThread {
        &self.threads[self.vcpus[v].curr]
    }

    pub(super) fn curr_thread_mut(&mut self, v: VcpuId) -> &mut GuestThread {
        &mut self.threads[self.vcpus[v].curr]
    }

    /// Whether vCPU `v` is idle for its guest: its thread has nothing to run and it is halted
    /// or up for its timer only (a paravirtual lock waiter's halt is not idleness).
    fn guest_idle(&self, v: VcpuId) -> bool {
        let vc = &self.vcpus[v];
        let state = self.threads[vc.curr].state;
        state.halted()
            && !matches!(state, ThreadState::HaltedLock { .. })
            && (vc.state == VcpuState::Blocked || vc.timer_wake || vc.halt.poll.is_some())
    }

    /// Running vCPU `v`'s thread blocked: the vCPU runs the next thread of its queue instead
    /// (true), or has none and must halt (false).
    pub(super) fn switch_on_block(&mut self, v: VcpuId) -> bool {
        if matches!(self.curr_thread(v).state, ThreadState::HaltedLock { .. } | ThreadState::BlockedStart) {
            return false;
        }
        let Some(next) = self.vcpus[v].guest_rq.pop_front() else { return false };
        self.curr_thread_mut(v).asleep = true;
        self.switch_to(v, next);
        true
    }

    /// A guest tick on running vCPU `v`: its thread is preempted if it has run its slice
    /// and another waits. A mutex spinner is not preemptible but sees `need_resched()` and
    /// goes to sleep (`sim/mutex.rs`).
    pub(super) fn guest_tick_preempt(&mut self, v: VcpuId) {
        let vc = &self.vcpus[v];
        let mutexes = self.doms[vc.dom].lock_kind == LockKind::Mutex;
        if vc.guest_rq.is_empty() || !(mutexes || self.curr_thread(v).preemptible(false)) {
            return;
        }
        let cpus = self.doms[vc.dom].info.vcpus;
        if vc.guest_slice_ns < guest_slice_ns(vc.guest_rq.len() + 1, cpus) {
            return;
        }
        if mutexes && (self.mutex_spinner_resched(v) || !self.curr_thread(v).preemptible(true)) {
            return;
        }
        let vc = &mut self.vcpus[v];
        let next = vc.guest_rq.pop_front().expect("checked");
        vc.guest_rq.push_back(vc.curr);
        self.switch_to(v, next);
    }

    /// Running vCPU `v` switches to thread `next` (taken off its queue), paying a guest
    /// context switch, then the refill of `next`'s footprint (`cache`).
    fn switch_to(&mut self, v: VcpuId, next: ThreadId) {
        self.sync(v);
        self.leave_caches(v, self.now());
        let vc = &mut self.vcpus[v];
        let prev = std::mem::replace(&mut vc.curr, next);
        vc.guest_slice_ns = 0;
        debug_assert_eq!(self.threads[next].vcpu, v, "a queued thread waits in its own vCPU's queue");
        self.stall(v, self.host.thread_switch_ns);
        self.retouch(v);
        self.arm(v);
        self.trace_state(v);
        // A mutex owner switched out is off its CPU: its spinners see it.
        self.mutex_owner_moved(prev);
    }

    /// The wake-up of thread `t`, switched out and asleep: it goes where it can run
    /// (see the module notes). Returns the vCPU it woke, if it woke a halted one.
    pub(super) fn wake_asleep(&mut self, t: ThreadId) -> Option<VcpuId> {
        // Stale if it already runs or waits in a queue.
        if !self.threads[t].asleep || !self.resume(t) {
            return None;
        }
        let th = &mut self.threads[t];
        th.asleep = false;
        let prev = th.vcpu;
        let span = self.doms[th.dom].span.clone();
        let idle =
            std::iter::once(prev).chain((prev + 1..span.end).chain(span.start..prev)).find(|&u| self.guest_idle(u));
        let Some(v) = idle else {
            self.vcpus[prev].guest_rq.push_back(t);
            return None;
        };
        self.threads[t].vcpu = v;
        let vc = &mut self.vcpus[v];
        let idle_thread = std::mem::replace(&mut vc.curr, t);
        vc.guest_slice_ns = 0;
        self.threads[idle_thread].asleep = true;
        self.resume_vcpu(v)
    }
}
