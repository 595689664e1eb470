//! PLACEHOLDER until the KVM machine merges (issue 18, part A, built in parallel): this file
//! is replaced by the real `machine` module, which creates VMs through `/dev/kvm` and runs
//! one thread per vCPU. Until then every entry point says the machine is not there, so
//! `vsched real` refuses cleanly (exit 2) and the scheduler side runs on `fake` only.

use crate::backend::{Backend, BackendError, BackendEvent, GuestActivity, GuestCounters, Limits, VmSpec};

fn not_merged() -> BackendError {
    BackendError::Unavailable("the KVM machine is not merged yet".into())
}

/// Whether this machine can run real vCPUs.
pub fn kvm_available() -> Result<(), BackendError> {
    Err(not_merged())
}

/// Whether the machine can run `vm`'s guest (refusals name the field).
pub fn check_supported(_vm: &VmSpec) -> Result<(), BackendError> {
    Err(not_merged())
}

/// The VMs of a run on KVM (never built by the placeholder).
pub struct KvmBackend;

impl KvmBackend {
    pub fn new(_vms: &[VmSpec], _limits: &Limits, _seed: u64) -> Result<KvmBackend, BackendError> {
        Err(not_merged())
    }
}

impl Backend for KvmBackend {
    fn n_vcpus(&self) -> usize {
        0
    }
    fn tsc_hz(&self) -> u64 {
        1
    }
    fn start(&mut self, _vcpu: usize, _host_cpu: usize) -> Result<(), BackendError> {
        Err(not_merged())
    }
    fn stop(&mut self, _vcpu: usize) -> Result<(), BackendError> {
        Err(not_merged())
    }
    fn activity(&self, _vcpu: usize) -> GuestActivity {
        GuestActivity::Compute
    }
    fn counters(&self, _vcpu: usize) -> GuestCounters {
        GuestCounters::default()
    }
    fn next_event(&mut self, _deadline: std::time::Instant) -> Option<BackendEvent> {
        None
    }
}
