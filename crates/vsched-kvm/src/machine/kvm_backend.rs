//! `KvmBackend`: the VMs of a scenario on `/dev/kvm`, one parked thread per vCPU, started
//! and stopped as the scheduler says.

use std::ffi::CString;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Instant;

use kvm_ioctls::{Cap, Kvm};

use super::support::check_supported;
use super::thread_setup::install_kick_handler;
use super::tsc;
use super::vcpu_thread::VcpuThread;
use super::vm::{self, GuestMemory, Vm};
use crate::admission::kvm_device_path;
use crate::backend::{
    Backend, BackendError, BackendEvent, GuestActivity, GuestCounters, GuestWait, MachineSettings, VmSpec,
};
use crate::guest_code::layout::*;
use crate::guest_code::{build_image, ImageError, JobPlace, Mailbox, VcpuImage};

/// Ok when the KVM device (`admission::kvm_device_path`: `/dev/kvm` unless
/// `VSCHED_KVM_DEVICE` names another) can be opened and has the capabilities we need; else
/// `BackendError::Unavailable` with one line saying why.
pub fn kvm_available() -> Result<(), BackendError> {
    open_kvm().map(drop)
}

fn open_kvm() -> Result<Kvm, BackendError> {
    let path = kvm_device_path();
    let unavailable = |why: String| {
        BackendError::Unavailable(format!(
            "real vCPUs need KVM, and {path} cannot be opened ({why}); expected a host with KVM \
             (kvm_intel, kvm_amd or kvm_pvm loaded) and read-write access to its device"
        ))
    };
    let c_path = CString::new(path.clone()).map_err(|_| unavailable("its name holds a NUL".into()))?;
    let kvm = Kvm::new_with_path(&c_path).map_err(|e| {
        unavailable(match e.errno() {
            libc::ENOENT => "it does not exist: this host has no KVM".into(),
            libc::EACCES | libc::EPERM => "permission denied: add this user to the kvm group".into(),
            _ => e.to_string(),
        })
    })?;
    let version = kvm.get_api_version();
    if version != kvm_bindings::KVM_API_VERSION as i32 {
        return Err(BackendError::Unavailable(format!("{path} speaks KVM API version {version}, not 12")));
    }
    for (cap, name) in [(Cap::UserMemory, "KVM_CAP_USER_MEMORY"), (Cap::ImmediateExit, "KVM_CAP_IMMEDIATE_EXIT")] {
        if !kvm.check_extension(cap) {
            return Err(BackendError::Unavailable(format!("{path} lacks {name}, which real vCPUs need")));
        }
    }
    Ok(kvm)
}

/// Where one vCPU's counters are, and its mailbox if its guest exchanges messages.
struct VcpuPlace {
    vm: usize,
    private_base: u64,
    mailbox: Option<Mailbox>,
}

/// The scenario's VMs on KVM. Dropping it stops and joins every vCPU thread before anything
/// is unmapped.
pub struct KvmBackend {
    /// By global vCPU index.
    threads: Vec<VcpuThread>,
    places: Vec<VcpuPlace>,
    vms: Vec<Vm>,
    /// Locks of each VM, to bound `critical_sections`.
    locks: Vec<u32>,
    events: Receiver<BackendEvent>,
    /// Kept so that `next_event` waits out its deadline even when every thread has ended.
    _events_sender: Sender<BackendEvent>,
    tsc_hz: u64,
}

impl KvmBackend {
    /// Builds `vms` (their vCPUs numbered from 0 over all of them, in order) with every vCPU
    /// stopped. Refuses, before touching `/dev/kvm`, a guest real vCPUs cannot run or one
    /// whose memory would exceed `settings`; the random draws of global vCPU `v` come from
    /// stream `v` of `seed`.
    pub fn new(vms: &[VmSpec], settings: &MachineSettings, seed: u64) -> Result<KvmBackend, BackendError> {
        let mut expected_first = 0;
        for spec in vms {
            check_supported(spec)?;
            if spec.first_vcpu != expected_first {
                return Err(BackendError::Failed(format!(
                    "{} starts at vCPU {}, expected {expected_first}: vCPUs are numbered over the VMs in order",
                    spec.table, spec.first_vcpu
                )));
            }
            expected_first += spec.guest.vcpus;
        }
        // Images first: a scenario's own faults are refused whether or not this host has KVM.
        let tsc_hz = tsc::tsc_hz();
        let mut images = Vec::with_capacity(vms.len());
        for spec in vms {
            let job = JobPlace { first_rank: spec.first_rank, world: spec.world };
            let image = build_image(spec.guest, job, spec.first_vcpu, seed, tsc_hz, settings)
                .map_err(|e| image_refusal(spec, e))?;
            images.push(image);
        }
        let kvm = open_kvm()?;
        install_kick_handler()?;
        let (sender, events) = channel();
        let mut backend = KvmBackend {
            threads: Vec::new(),
            places: Vec::new(),
            vms: Vec::new(),
            locks: Vec::new(),
            events,
            _events_sender: sender.clone(),
            tsc_hz,
        };
        // Built in place: should anything fail, dropping `backend` cleans up what exists.
        for (spec, image) in vms.iter().zip(images) {
            let (vm, fds) =
                vm::create(&kvm, &image).map_err(|m| BackendError::Failed(format!("vm \"{}\": {m}", spec.name)))?;
            backend.vms.push(vm);
            backend.locks.push(spec.guest.locks);
            for (i, fd) in fds.into_iter().enumerate() {
                let index = spec.first_vcpu + i;
                let label = format!("vm \"{}\" vCPU {i} (vCPU {index} of the host)", spec.name);
                let VcpuImage { private_base, mailbox, .. } = image.vcpus[i];
                backend.places.push(VcpuPlace { vm: backend.vms.len() - 1, private_base, mailbox });
                backend.threads.push(VcpuThread::spawn(fd, index, label, sender.clone())?);
            }
        }
        Ok(backend)
    }

    /// Critical sections run so far under lock `lock` of VM `vm` (its index in `new`'s
    /// list), counted by a plain increment inside each: equal to the acquisitions of that
    /// lock if and only if no two holders ever overlapped.
    pub fn critical_sections(&self, vm: usize, lock: u32) -> u64 {
        assert!(lock < self.locks[vm], "vm[{vm}] has {} locks", self.locks[vm]);
        self.vms[vm].memory.read_u64(SHARED_ADDR + LOCKS + LINE * u64::from(lock) + LOCK_WITNESS)
    }

    /// The TSC at which `vcpu`'s guest last noticed it had not run for a while (it resumed
    /// then), 0 if it never did; comparable with the host's TSC.
    pub fn resumed_at(&self, vcpu: usize) -> u64 {
        self.word(vcpu, RESUME_TSC)
    }

    /// Descheduling gaps `vcpu`'s guest noticed.
    pub fn descheduled_gaps(&self, vcpu: usize) -> u64 {
        self.word(vcpu, GAPS)
    }

    /// Host CPU time `vcpu`'s thread has used so far, in ns: an account of its running
    /// independent of the guest's own (`None` where `/proc` cannot tell).
    pub fn cpu_time_ns(&self, vcpu: usize) -> Option<u64> {
        self.threads.get(vcpu)?.cpu_time_ns()
    }

    fn word(&self, vcpu: usize, offset: u64) -> u64 {
        let place = &self.places[vcpu];
        self.vms[place.vm].memory.read_u64(place.private_base + offset)
    }

    /// `vcpu`'s VM's memory and its mailbox, if its guest exchanges messages.
    fn place_mailbox(&self, vcpu: usize) -> Option<(&GuestMemory, Mailbox)> {
        let place = self.places.get(vcpu)?;
        Some((&self.vms[place.vm].memory, place.mailbox?))
    }

    fn thread(&self, vcpu: usize) -> Result<&VcpuThread, BackendError> {
        self.threads.get(vcpu).ok_or_else(|| BackendError::Failed(format!("there is no vCPU {vcpu}")))
    }
}

fn image_refusal(spec: &VmSpec, error: ImageError) -> BackendError {
    let message = match error {
        ImageError::TooLarge { needed, limit } => format!(
            "its guest needs {needed} bytes of memory (code, counters, random draws), more than the {limit} bytes \
             a VM may have"
        ),
        ImageError::Malformed(m) => m,
    };
    BackendError::Unsupported { field: format!("{}.workload", spec.table), message }
}

impl Backend for KvmBackend {
    fn n_vcpus(&self) -> usize {
        self.threads.len()
    }

    fn tsc_hz(&self) -> u64 {
        self.tsc_hz
    }

    fn start(&mut self, vcpu: usize, host_cpu: usize) -> Result<(), BackendError> {
        self.thread(vcpu)?.start(host_cpu)
    }

    fn stop(&mut self, vcpu: usize) -> Result<(), BackendError> {
        self.thread(vcpu)?.stop()
    }

    fn activity(&self, vcpu: usize) -> GuestActivity {
        match self.word(vcpu, ACTIVITY) as u32 & !ACTIVITY_IN_KERNEL {
            ACTIVITY_LOCK_WAIT => GuestActivity::LockWait,
            ACTIVITY_LOCK_HELD => GuestActivity::LockHeld,
            ACTIVITY_BARRIER_WAIT => GuestActivity::BarrierWait,
            ACTIVITY_MESSAGE_WAIT => GuestActivity::MessageWait,
            ACTIVITY_DONE => GuestActivity::Done,
            ACTIVITY_HALTED => GuestActivity::Halted,
            _ => GuestActivity::Compute,
        }
    }

    fn wait(&self, vcpu: usize) -> GuestWait {
        let addr = self.word(vcpu, WAIT_ADDR);
        if addr == 0 {
            return GuestWait::Sleep { cycles: self.word(vcpu, WAIT_CYCLES) };
        }
        let memory = &self.vms[self.places[vcpu].vm].memory;
        // The guest wrote an address of its own memory; one outside it never takes a value.
        let inside = addr.is_multiple_of(4) && addr.saturating_add(4) <= memory.len() as u64;
        let value = self.word(vcpu, WAIT_VALUE);
        let released = inside
            && if value & WAIT_AT_LEAST != 0 {
                memory.read_u32(addr) >= value as u32
            } else {
                u64::from(memory.read_u32(addr)) == value
            };
        GuestWait::Release { released }
    }

    fn in_kernel(&self, vcpu: usize) -> bool {
        self.word(vcpu, ACTIVITY) as u32 & ACTIVITY_IN_KERNEL != 0
    }

    fn counters(&self, vcpu: usize) -> GuestCounters {
        GuestCounters {
            acquisitions: self.word(vcpu, ACQUISITIONS),
            spin_cycles: self.word(vcpu, SPIN_CYCLES),
            hold_cycles: self.word(vcpu, HOLD_CYCLES),
            barriers: self.word(vcpu, BARRIERS),
            compute_cycles: self.word(vcpu, COMPUTE_CYCLES),
            ple_exits: self.word(vcpu, PLE_EXITS),
            messages_received: self.place_mailbox(vcpu).map_or(0, |(memory, mailbox)| {
                (0..mailbox.world)
                    .map(|from| u64::from(memory.read_u32(mailbox.addr + mailbox_received(mailbox.world, from))))
                    .sum()
            }),
        }
    }

    fn deliver(&mut self, vcpu: usize, from: u32) {
        if let Some((memory, mailbox)) = self.place_mailbox(vcpu) {
            if u64::from(from) < mailbox.world {
                memory.add_u32(mailbox.addr + mailbox_delivered(u64::from(from)), 1);
            }
        }
    }

    fn next_event(&mut self, deadline: Instant) -> Option<BackendEvent> {
        match deadline.checked_duration_since(Instant::now()) {
            Some(wait) if !wait.is_zero() => self.events.recv_timeout(wait).ok(),
            _ => self.events.try_recv().ok(),
        }
    }
}

impl Drop for KvmBackend {
    fn drop(&mut self) {
        // Every thread first told, then joined: they leave guest code in parallel.
        for thread in &self.threads {
            thread.quit();
        }
        for thread in &mut self.threads {
            thread.join();
        }
        // `vms` drop after this: each VM's fd, then its memory.
    }
}
