//! What a scenario, and this machine, must be for a run on real vCPUs. Everything here is
//! checked before any VM exists, and every refusal is bad input (exit 2): one line naming
//! the field and what was expected.
//!
//! The scheduler side refuses what it does not model on real vCPUs (several hosts, driver
//! domains, VMs created mid-run, paravirtual guests, Python policies); the machine refuses
//! the guest programs it cannot generate code for (`machine::check_supported`).

use vsched::scenario::{Guest, Scenario};
use vsched_model::ConfigError;

/// Environment variable naming the KVM device a run opens (default `/dev/kvm`): tests set it
/// to a missing path to see the refusal a machine without KVM gives.
pub const KVM_DEVICE_VARIABLE: &str = "VSCHED_KVM_DEVICE";
const DEFAULT_KVM_DEVICE: &str = "/dev/kvm";

/// The KVM device a run uses: `VSCHED_KVM_DEVICE`, else `/dev/kvm`.
pub fn kvm_device_path() -> String {
    std::env::var(KVM_DEVICE_VARIABLE).unwrap_or_else(|_| DEFAULT_KVM_DEVICE.to_string())
}

/// The host CPUs this process may run on, in increasing order: pCPU i of a run is the i-th.
pub fn host_cpus() -> Result<Vec<usize>, String> {
    // SAFETY: `cpu_set_t` is plain data; `sched_getaffinity` writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid, writable `cpu_set_t` of `size` bytes.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Err(format!("cannot read this process's CPU affinity: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `CPU_ISSET` reads the set initialized above, for CPU numbers below its capacity.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).collect())
}

/// Refuses what the real-vCPU scheduler cannot run: the scenario must describe one host of
/// at most `host_cpus` pCPUs, without a driver domain, whose VMs exist for the whole run,
/// are not paravirtual and whose policy is compiled in.
pub fn check_scenario(scenario: &Scenario, host_cpus: usize) -> Result<(), ConfigError> {
    let refuse = |field: String, message: &str| Err(ConfigError::new(field, message));
    if scenario.hosts > 1 {
        return refuse("cluster.hosts".into(), "expected 1: real vCPUs run on this one host");
    }
    if scenario.host.pcpus > host_cpus {
        return Err(ConfigError::new(
            "host.pcpus",
            format!(
                "expected at most {host_cpus}, the host CPUs this process may use (each pCPU is one of them), \
                 got {}",
                scenario.host.pcpus
            ),
        ));
    }
    if let vsched::PolicySource::External(_) = scenario.policy {
        return refuse(
            "scheduler.name".into(),
            "expected a compiled-in policy: policies written in Python cannot run on real vCPUs yet",
        );
    }
    for (i, vm) in scenario.vms.iter().enumerate() {
        if matches!(vm.guest, Guest::Driver) {
            return refuse(
                "host.dom0_vcpus".into(),
                "expected 0: real vCPUs have no driver domain (a Xen policy gives a host one by default; \
                 set host.dom0_vcpus = 0)",
            );
        }
        if vm.job.is_some() {
            return refuse("virtual_cluster".into(), "expected none: real vCPUs run [[vm]] tables only");
        }
        // With neither a driver domain nor virtual clusters, VM i is the i-th [[vm]] table.
        if vm.start > 0 {
            return refuse(format!("vm[{i}].start_s"), "expected 0: real VMs exist for the whole run");
        }
        if vm.stop.is_some() {
            return refuse(format!("vm[{i}].stop_s"), "expected none: real VMs exist for the whole run");
        }
        let pv = &vm.pv;
        for (key, on) in [
            ("pv_spinlocks", pv.spinlocks),
            ("pv_steal_time", pv.steal_time),
            ("pv_tlb_flush", pv.tlb_flush),
            ("pv_sched_yield", pv.sched_yield),
            ("pv_critical_sections", pv.critical_sections),
        ] {
            if on {
                return refuse(
                    format!("vm[{i}].{key}"),
                    "expected false: the guest code of real vCPUs runs in ring 3 without a kernel, so \
                     it has no paravirtual features",
                );
            }
        }
    }
    if !scenario.events.is_empty() {
        return refuse("event[0]".into(), "expected no [[event]]: real VMs keep their type for the whole run");
    }
    Ok(())
}
