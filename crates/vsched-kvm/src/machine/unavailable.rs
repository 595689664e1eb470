//! A build without the KVM backend (feature `kvm` off, or not Linux on x86-64): the same
//! API, refusing clearly, so the scheduler side builds and runs on its fake backend.

use std::time::Instant;

use crate::backend::{Backend, BackendError, BackendEvent, GuestActivity, GuestCounters, MachineSettings, VmSpec};

const WHY: &str = "this build of vsched has no KVM backend (it needs Linux on x86-64 and the `kvm` feature)";

/// Always `Unavailable` in this build.
pub fn kvm_available() -> Result<(), BackendError> {
    Err(BackendError::Unavailable(WHY.into()))
}

/// Always `Unavailable` in this build.
pub fn ple_exit_ns(_host_cpu: usize) -> Result<crate::ple_scaling::ExitCost, BackendError> {
    Err(BackendError::Unavailable(WHY.into()))
}

/// Cannot be built in this build: `new` refuses.
pub struct KvmBackend {
    never: std::convert::Infallible,
}

impl KvmBackend {
    /// Refuses: `Unavailable`.
    pub fn new(_vms: &[VmSpec], _limits: &MachineSettings, _seed: u64) -> Result<KvmBackend, BackendError> {
        Err(BackendError::Unavailable(WHY.into()))
    }

    /// As the KVM backend's; never reached here (no backend exists), nor are the next three.
    pub fn critical_sections(&self, _vm: usize, _lock: u32) -> u64 {
        match self.never {}
    }
    /// As the KVM backend's.
    pub fn resumed_at(&self, _vcpu: usize) -> u64 {
        match self.never {}
    }
    /// As the KVM backend's.
    pub fn descheduled_gaps(&self, _vcpu: usize) -> u64 {
        match self.never {}
    }
    /// As the KVM backend's.
    pub fn cpu_time_ns(&self, _vcpu: usize) -> Option<u64> {
        match self.never {}
    }
}

impl Backend for KvmBackend {
    fn n_vcpus(&self) -> usize {
        match self.never {}
    }
    fn tsc_hz(&self) -> u64 {
        match self.never {}
    }
    fn start(&mut self, _vcpu: usize, _host_cpu: usize) -> Result<(), BackendError> {
        match self.never {}
    }
    fn stop(&mut self, _vcpu: usize) -> Result<(), BackendError> {
        match self.never {}
    }
    fn activity(&self, _vcpu: usize) -> GuestActivity {
        match self.never {}
    }
    fn counters(&self, _vcpu: usize) -> GuestCounters {
        match self.never {}
    }
    fn next_event(&mut self, _deadline: Instant) -> Option<BackendEvent> {
        match self.never {}
    }
}

/// As the KVM backend's: there is nothing to stop.
impl Drop for KvmBackend {
    fn drop(&mut self) {
        match self.never {}
    }
}
