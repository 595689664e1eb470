//! `FakeBackend`: vCPUs as plain host threads, so that the runner can be tested without
//! `/dev/kvm`.
//!
//! Each vCPU is a thread that, while started, burns CPU pinned to the host CPU it was given,
//! and "finishes" once it has consumed its work, measured in its own CPU time
//! (CLOCK_THREAD_CPUTIME_ID), so a noisy host delays it but does not shorten it. What it can
//! honestly report: its compute (`compute_cycles`, in nanoseconds: its `tsc_hz` is 1 GHz) and
//! that it computes, then is done; it takes no locks, waits at no barrier and never spins.
//! It also records how many of its threads executed on one host CPU at once, at most
//! ([`FakeBackend::most_on_one_cpu`]): 1 if whoever drives it never overlaps two vCPUs.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::{Backend, BackendError, BackendEvent, GuestActivity, GuestCounters, VmSpec};

/// Work of this many ns of CPU time between two looks at the stop request.
const CHECK_EVERY_NS: u64 = 10_000;

/// What the scheduler asked of one vCPU thread, under its lock.
#[derive(Default)]
struct Orders {
    /// Execute on this host CPU (taken by the thread when it starts executing).
    run_on: Option<usize>,
    /// The thread is in its busy loop.
    executing: bool,
    quit: bool,
}

/// One vCPU, shared between the scheduler's side and its thread.
struct Slot {
    orders: Mutex<Orders>,
    changed: Condvar,
    stop_requested: AtomicBool,
    consumed_ns: AtomicU64,
    done: AtomicBool,
}

/// How many threads execute on each host CPU now, and the most ever seen on one.
#[derive(Default)]
struct Occupancy {
    now: Mutex<std::collections::BTreeMap<usize, usize>>,
    most: AtomicUsize,
}

/// vCPUs as busy host threads (see the module notes). Dropping it ends every thread.
pub struct FakeBackend {
    slots: Vec<Arc<Slot>>,
    threads: Vec<JoinHandle<()>>,
    events: Receiver<BackendEvent>,
    occupancy: Arc<Occupancy>,
}

impl FakeBackend {
    /// One thread per vCPU of `vms`; a vCPU finishes after `work(vm)` of CPU time, or never
    /// (`None`).
    pub fn new(vms: &[VmSpec], work: impl Fn(&VmSpec) -> Option<Duration>) -> Result<FakeBackend, BackendError> {
        let (sender, events) = channel();
        let occupancy = Arc::new(Occupancy::default());
        let mut backend = FakeBackend { slots: Vec::new(), threads: Vec::new(), events, occupancy };
        for vm in vms {
            let work_ns = work(vm).map(|w| u64::try_from(w.as_nanos()).unwrap_or(u64::MAX));
            for _ in 0..vm.guest.vcpus {
                let vcpu = backend.slots.len();
                let slot = Arc::new(Slot {
                    orders: Mutex::new(Orders::default()),
                    changed: Condvar::new(),
                    stop_requested: AtomicBool::new(false),
                    consumed_ns: AtomicU64::new(0),
                    done: AtomicBool::new(false),
                });
                let (thread_slot, sender, occupancy) = (slot.clone(), sender.clone(), backend.occupancy.clone());
                let thread = std::thread::Builder::new()
                    .name(format!("fake-vcpu-{vcpu}"))
                    .spawn(move || vcpu_thread(vcpu, &thread_slot, work_ns, &sender, &occupancy))
                    .map_err(|e| BackendError::Failed(format!("cannot start a vCPU thread: {e}")))?;
                backend.slots.push(slot);
                backend.threads.push(thread);
            }
        }
        Ok(backend)
    }

    /// The most vCPU threads that ever executed on one host CPU at once.
    pub fn most_on_one_cpu(&self) -> usize {
        self.occupancy.most.load(Ordering::SeqCst)
    }
}

/// The calling thread's CPU time, in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Pins the calling thread to host CPU `cpu` (best effort: a CPU it may not use is left as is).
fn pin_to(cpu: usize) {
    // SAFETY: a zeroed `cpu_set_t` is an empty set; `CPU_SET` stays within its capacity for
    // CPU numbers the affinity mask can hold, and `sched_setaffinity` reads `size` bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu < libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

fn vcpu_thread(vcpu: usize, slot: &Slot, work_ns: Option<u64>, events: &Sender<BackendEvent>, occupancy: &Occupancy) {
    loop {
        let cpu = {
            let mut orders = slot.orders.lock().expect("orders");
            while !orders.quit && orders.run_on.is_none() {
                orders = slot.changed.wait(orders).expect("orders");
            }
            if orders.quit {
                return;
            }
            orders.executing = true;
            orders.run_on.take().expect("a start")
        };
        pin_to(cpu);
        let on_cpu = {
            let mut now = occupancy.now.lock().expect("occupancy");
            let count = now.entry(cpu).or_insert(0);
            *count += 1;
            *count
        };
        occupancy.most.fetch_max(on_cpu, Ordering::SeqCst);
        let mut last = thread_cpu_ns();
        let mut finished = false;
        while !slot.stop_requested.load(Ordering::Acquire) {
            let until = last + CHECK_EVERY_NS;
            while thread_cpu_ns() < until {
                std::hint::spin_loop();
            }
            let t = thread_cpu_ns();
            let consumed = slot.consumed_ns.fetch_add(t - last, Ordering::Relaxed) + (t - last);
            last = t;
            if work_ns.is_some_and(|w| consumed >= w) {
                finished = true;
                break;
            }
        }
        *occupancy.now.lock().expect("occupancy").get_mut(&cpu).expect("counted") -= 1;
        if finished {
            slot.done.store(true, Ordering::Release);
            let _ = events.send(BackendEvent::Finished { vcpu });
        }
        slot.orders.lock().expect("orders").executing = false;
        slot.changed.notify_all();
        if finished {
            return;
        }
    }
}

impl Backend for FakeBackend {
    fn n_vcpus(&self) -> usize {
        self.slots.len()
    }

    /// The fake's "cycles" are nanoseconds.
    fn tsc_hz(&self) -> u64 {
        1_000_000_000
    }

    fn start(&mut self, vcpu: usize, host_cpu: usize) -> Result<(), BackendError> {
        let slot = &self.slots[vcpu];
        if slot.done.load(Ordering::Acquire) {
            return Err(BackendError::Failed(format!("vCPU {vcpu} was started after its program ended")));
        }
        let mut orders = slot.orders.lock().expect("orders");
        if orders.executing || orders.run_on.is_some() {
            return Err(BackendError::Failed(format!("vCPU {vcpu} was started twice")));
        }
        slot.stop_requested.store(false, Ordering::Release);
        orders.run_on = Some(host_cpu);
        slot.changed.notify_all();
        Ok(())
    }

    fn stop(&mut self, vcpu: usize) -> Result<(), BackendError> {
        let slot = &self.slots[vcpu];
        slot.stop_requested.store(true, Ordering::Release);
        let mut orders = slot.orders.lock().expect("orders");
        // A start the thread has not taken yet is withdrawn; one it took is waited out.
        orders.run_on = None;
        while orders.executing {
            orders = slot.changed.wait(orders).expect("orders");
        }
        Ok(())
    }

    fn activity(&self, vcpu: usize) -> GuestActivity {
        if self.slots[vcpu].done.load(Ordering::Acquire) {
            GuestActivity::Done
        } else {
            GuestActivity::Compute
        }
    }

    fn counters(&self, vcpu: usize) -> GuestCounters {
        GuestCounters { compute_cycles: self.slots[vcpu].consumed_ns.load(Ordering::Relaxed), ..Default::default() }
    }

    fn next_event(&mut self, deadline: Instant) -> Option<BackendEvent> {
        self.events.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok()
    }
}

impl Drop for FakeBackend {
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.stop_requested.store(true, Ordering::Release);
            slot.orders.lock().map(|mut orders| orders.quit = true).ok();
            slot.changed.notify_all();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
