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

/// The most vCPUs a run may have per host CPU this process may use. **Our choice**: 8 times
/// the largest overcommit of the seed papers (4 vCPUs per pCPU, seed 001's VOR 4), so that
/// every setup they study fits with room; each vCPU is a host thread with its own KVM vCPU,
/// and a run of 5,000 of them on 2 CPUs once drove this machine's load average to about 900.
pub const MAX_VCPUS_PER_HOST_CPU: usize = 32;

/// The memory this machine has for new work (`MemAvailable` of `/proc/meminfo`), bytes;
/// `None` where it cannot be read.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The scenario table each VM comes from, for field paths: `vm[0]`, `virtual_cluster[1]`. An
/// admitted scenario has one host and no driver domain, so its VMs are the `[[vm]]` tables
/// in order, then each virtual cluster's members (`vsched::scenario`'s validation).
pub fn vm_tables(scenario: &Scenario) -> Vec<String> {
    let (mut tables, mut clusters) = (0, Vec::<&str>::new());
    let mut names = Vec::with_capacity(scenario.vms.len());
    for vm in &scenario.vms {
        names.push(match &vm.job {
            None => {
                tables += 1;
                format!("vm[{}]", tables - 1)
            }
            Some(job) => {
                let c = clusters.iter().position(|j| j == job).unwrap_or_else(|| {
                    clusters.push(job);
                    clusters.len() - 1
                });
                format!("virtual_cluster[{c}]")
            }
        });
    }
    names
}

/// Refuses a run larger than this machine: more than [`MAX_VCPUS_PER_HOST_CPU`] vCPUs per
/// host CPU (naming the VM whose vCPUs cross the bound), or more guest memory in all than
/// `available_bytes` (naming `--memory-per-vm`, the size each VM gets).
pub fn check_size(
    scenario: &Scenario,
    host_cpus: usize,
    memory_per_vm_bytes: u64,
    available_bytes: Option<u64>,
) -> Result<(), ConfigError> {
    let most = MAX_VCPUS_PER_HOST_CPU * host_cpus;
    let mut vcpus = 0;
    for (vm, table) in scenario.vms.iter().zip(vm_tables(scenario)) {
        vcpus += vm.vcpus;
        if vcpus > most {
            return Err(ConfigError::new(
                format!("{table}.vcpus"),
                format!(
                    "expected at most {most} vCPUs in all on real vCPUs ({MAX_VCPUS_PER_HOST_CPU} per host CPU \
                     this process may use, {host_cpus} here), got {vcpus} with this VM's"
                ),
            ));
        }
    }
    let vms = scenario.vms.len() as u64;
    if let Some(available) = available_bytes {
        if vms.saturating_mul(memory_per_vm_bytes) > available {
            const MIB: u64 = 1 << 20;
            return Err(ConfigError::new(
                "--memory-per-vm",
                format!(
                    "expected at most {} MiB per VM: the {vms} VMs' guest memory must fit in the {} MiB this \
                     machine has available (MemAvailable), got {} MiB",
                    available / vms.max(1) / MIB,
                    available / MIB,
                    memory_per_vm_bytes / MIB
                ),
            ));
        }
    }
    Ok(())
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
/// are not paravirtual and whose policy is compiled in. A virtual cluster's VMs all sit on
/// that host (`hosts = [0, 0]`), and the runner carries their messages.
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
    for (vm, table) in scenario.vms.iter().zip(vm_tables(scenario)) {
        if matches!(vm.guest, Guest::Driver) {
            return refuse(
                "host.dom0_vcpus".into(),
                "expected 0: real vCPUs have no driver domain (a Xen policy gives a host one by default; \
                 set host.dom0_vcpus = 0)",
            );
        }
        if vm.start > 0 {
            return refuse(format!("{table}.start_s"), "expected 0: real VMs exist for the whole run");
        }
        if vm.stop.is_some() {
            return refuse(format!("{table}.stop_s"), "expected none: real VMs exist for the whole run");
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
                    format!("{table}.{key}"),
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
