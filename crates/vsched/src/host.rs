//! The scenario's `[host]` table: the host's hardware, its hypervisor's overheads and its
//! clocks, checked with one-line errors naming the field.

use serde::Deserialize;
use vsched_model::{
    hardware, Caches, Clocks, ConfigError, HaltPoll, HostConfig, HostThreads, Hypervisor, IoConfig, ParamDefault,
    ParamRange, ParamSpec, DEFAULT_GUEST_HZ, DEFAULT_HARDWARE, DEFAULT_IDLE_WAKES_PER_S, HARDWARE,
};

use crate::scenario::{err, micros};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostSection {
    pub(crate) pcpus: u32,
    pub(crate) cpu_ghz: Option<f64>,
    pub(crate) context_switch_us: Option<f64>,
    pub(crate) migration_us: Option<f64>,
    pub(crate) ipi_latency_us: Option<f64>,
    /// Sockets and hardware threads per core (`vsched_model::HostConfig`).
    pub(crate) sockets: Option<u32>,
    pub(crate) threads_per_core: Option<u32>,
    /// With SMT, a thread's rate while its sibling runs (`vsched_model::HostConfig::smt_rate`).
    pub(crate) smt_rate: Option<f64>,
    /// The era's caches, overridden one by one (`vsched_model::Caches`).
    pub(crate) l2_kib: Option<u64>,
    pub(crate) l3_kib_per_core: Option<u64>,
    pub(crate) fill_buffers: Option<u32>,
    pub(crate) l3_latency_cycles: Option<u64>,
    pub(crate) memory_latency_ns: Option<u64>,
    pub(crate) sched_cost_us: Option<f64>,
    pub(crate) ple_window_cycles: Option<u64>,
    pub(crate) ple_gap_cycles: Option<u64>,
    pub(crate) ple_grow: Option<u32>,
    pub(crate) ple_window_max_cycles: Option<u64>,
    pub(crate) ipi_handler_us: Option<f64>,
    pub(crate) spin_iteration_cycles: Option<u64>,
    /// The hypervisor the host runs, "xen" or "kvm": what it has whatever policy runs it (a Xen
    /// host's Domain-0, a KVM host's threads). Absent: the policy's hypervisor decides.
    pub(crate) hypervisor: Option<String>,
    /// Xen's `sched-gran`: "cpu" (default), "core" or "socket" (`sched_gran.rs`).
    pub(crate) sched_gran: Option<String>,
    pub(crate) dom0_vcpus: Option<u32>,
    pub(crate) dom0_weight: Option<u32>,
    /// The Xen release whose Credit rules `credit` and the policies built on it follow,
    /// unless `[scheduler]` sets its own `xen_version`.
    pub(crate) xen_version: Option<String>,
    /// The Linux release whose KVM rules the KVM policies follow (and whose paravirtual
    /// features the host offers), unless `[scheduler]` sets its own `kvm_version`.
    pub(crate) kvm_version: Option<String>,
    /// "independent" (default) or "lockstep" (see `vsched_model::Clocks`).
    pub(crate) clocks: Option<String>,
    /// A hardware era's preset (`vsched_model::HARDWARE`); the costs above and below override it.
    pub(crate) hardware: Option<String>,
    pub(crate) vm_exit_us: Option<f64>,
    pub(crate) ple_handler_us: Option<f64>,
    pub(crate) idle_wake_us: Option<f64>,
    pub(crate) timer_irq_us: Option<f64>,
    pub(crate) thread_switch_us: Option<f64>,
    pub(crate) posted_interrupts: Option<bool>,
    pub(crate) ipi_virtualization: Option<bool>,
    pub(crate) timer_slop_us: Option<f64>,
    /// The longest a reschedule is put off inside a marked guest critical section.
    pub(crate) preempt_delay_us: Option<f64>,
    pub(crate) workload_start_spread_ms: Option<f64>,
    /// The disk and blkback (`vsched_model::IoConfig`), and the driver domain's idle wake-ups.
    pub(crate) disk_seek_ms: Option<f64>,
    pub(crate) disk_mb_per_s: Option<f64>,
    pub(crate) blkback_request_us: Option<f64>,
    pub(crate) dom0_idle_wakes_per_s: Option<f64>,
    /// A KVM host's own threads and tick (`vsched_model::HostThreads`): on by default under a
    /// KVM policy; the keys below apply while they are on.
    pub(crate) host_threads: Option<bool>,
    pub(crate) kthread_wakes_per_s: Option<f64>,
    pub(crate) kthread_run_us: Option<f64>,
    pub(crate) virtio_blk_request_us: Option<f64>,
    pub(crate) vhost_packet_us: Option<f64>,
    pub(crate) host_tick_us: Option<f64>,
    /// KVM's host halt polling, in its module parameters' names and units (`crate::halt_poll`).
    pub(crate) halt_poll_ns: Option<u64>,
    pub(crate) halt_poll_ns_grow: Option<u64>,
    pub(crate) halt_poll_ns_grow_start: Option<u64>,
    pub(crate) halt_poll_ns_shrink: Option<u64>,
}

/// `[host] xen_version`, checked as Credit checks its own.
pub(crate) const HOST_XEN_VERSION: &[ParamSpec] = &[ParamSpec {
    name: "xen_version",
    default: ParamDefault::Str("current"),
    range: ParamRange::Any,
    doc: "the Xen release whose Credit rules the host's policy follows",
}];

/// `[host] kvm_version`, checked as the KVM policies check their own.
pub(crate) const HOST_KVM_VERSION: &[ParamSpec] = &[ParamSpec {
    name: "kvm_version",
    default: ParamDefault::Str("6.1"),
    range: ParamRange::Any,
    doc: "the Linux release whose KVM rules the host's policy follows",
}];

/// The most pCPUs a host may have (and so the most vCPUs of its driver domain).
pub(crate) const MAX_PCPUS: u32 = 4096;

/// The host as the simulator takes it, from the `[host]` table.
pub(crate) fn host_config(h: &HostSection) -> Result<HostConfig, ConfigError> {
    if h.pcpus == 0 || h.pcpus > MAX_PCPUS {
        return Err(err("host.pcpus", format!("expected an integer in 1..={MAX_PCPUS}, got {}", h.pcpus)));
    }
    let era = h.hardware.as_deref().unwrap_or(DEFAULT_HARDWARE);
    let Some(era) = hardware(era) else {
        let names: Vec<&str> = HARDWARE.iter().map(|hw| hw.name).collect();
        return Err(err("host.hardware", format!("expected one of {}, got {era:?}", names.join(", "))));
    };
    let defaults = HostConfig::of(era);
    let cpu_ghz = h.cpu_ghz.unwrap_or(defaults.cpu_ghz);
    // Clock rates processors have had, with a wide margin: cycle counts (PLE windows, spin
    // iterations) become nanoseconds through it, so a tiny rate would make every spin eternal.
    if !(cpu_ghz.is_finite() && (0.1..=10.0).contains(&cpu_ghz)) {
        return Err(err(
            "host.cpu_ghz",
            format!("expected a number of GHz in [0.1, 10], got {}", vsched_model::number(cpu_ghz)),
        ));
    }
    let host = HostConfig {
        pcpus: h.pcpus as usize,
        cpu_ghz,
        context_switch_ns: micros("host.context_switch_us", h.context_switch_us, defaults.context_switch_ns)?,
        migration_ns: micros("host.migration_us", h.migration_us, defaults.migration_ns)?,
        ipi_latency_ns: micros("host.ipi_latency_us", h.ipi_latency_us, defaults.ipi_latency_ns)?,
        sockets: h.sockets.unwrap_or(1) as usize,
        threads_per_core: h.threads_per_core.unwrap_or(1) as usize,
        smt_rate: smt_rate(h.smt_rate, defaults.smt_rate)?,
        caches: caches(h, &defaults.caches)?,
        sched_cost_ns: micros("host.sched_cost_us", h.sched_cost_us, defaults.sched_cost_ns)?,
        ple_window_cycles: h.ple_window_cycles.unwrap_or(defaults.ple_window_cycles),
        ple_gap_cycles: h.ple_gap_cycles.unwrap_or(defaults.ple_gap_cycles),
        ple_grow: h.ple_grow,
        ple_window_max_cycles: h.ple_window_max_cycles.unwrap_or(defaults.ple_window_max_cycles),
        ipi_handler_ns: micros("host.ipi_handler_us", h.ipi_handler_us, defaults.ipi_handler_ns)?,
        spin_iteration_cycles: h.spin_iteration_cycles.unwrap_or(defaults.spin_iteration_cycles),
        vm_exit_ns: micros("host.vm_exit_us", h.vm_exit_us, defaults.vm_exit_ns)?,
        ple_handler_ns: micros("host.ple_handler_us", h.ple_handler_us, defaults.ple_handler_ns)?,
        idle_wake_ns: micros("host.idle_wake_us", h.idle_wake_us, defaults.idle_wake_ns)?,
        timer_irq_ns: micros("host.timer_irq_us", h.timer_irq_us, defaults.timer_irq_ns)?,
        thread_switch_ns: micros("host.thread_switch_us", h.thread_switch_us, defaults.thread_switch_ns)?,
        posted_interrupts: h.posted_interrupts.unwrap_or(defaults.posted_interrupts),
        ipi_virtualization: h.ipi_virtualization.unwrap_or(defaults.ipi_virtualization),
        clocks: match h.clocks.as_deref() {
            None | Some("independent") => Clocks::Independent,
            Some("lockstep") => Clocks::Lockstep,
            Some(other) => {
                return Err(err("host.clocks", format!("expected \"independent\" or \"lockstep\", got {other:?}")))
            }
        },
        timer_slop_ns: h.timer_slop_us.map(|us| micros("host.timer_slop_us", Some(us), 0)).transpose()?,
        preempt_delay_ns: h.preempt_delay_us.map(|us| micros("host.preempt_delay_us", Some(us), 0)).transpose()?,
        workload_start_spread_ns: match h.workload_start_spread_ms {
            None => defaults.workload_start_spread_ns,
            Some(ms) if ms.is_finite() && (0.0..=3_600_000.0).contains(&ms) => (ms * 1e6).round() as u64,
            Some(ms) => {
                return Err(err(
                    "host.workload_start_spread_ms",
                    format!("expected a number of milliseconds in 0..=3600000, got {}", vsched_model::number(ms)),
                ))
            }
        },
        io: io_config(h)?,
        // Known once the policy is (`host_threads`, `crate::halt_poll`).
        host_threads: None,
        halt_poll: HaltPoll::OFF,
    };
    if matches!(host.preempt_delay_ns, Some(delay) if delay > 100_000_000) {
        return Err(err("host.preempt_delay_us", "expected at most 100000 microseconds (100 ms; 0 = off)"));
    }
    if matches!(host.timer_slop_ns, Some(slop) if slop > 10_000_000) {
        return Err(err("host.timer_slop_us", "expected at most 10000 microseconds (10 ms)"));
    }
    if let Some(grow) = host.ple_grow.filter(|g| !(1..=64).contains(g)) {
        return Err(err(
            "host.ple_grow",
            format!("expected an integer in 1..=64 (1 = fixed window; default: the policy's hypervisor's), got {grow}"),
        ));
    }
    // PLE_Gap and PLE_Window are 32-bit VM-execution control fields (Intel SDM Vol. 3C,
    // 25.6.13 "Controls for PAUSE-Loop Exiting"), and KVM keeps them as `unsigned int`.
    for (field, cycles) in [
        ("ple_window_cycles", host.ple_window_cycles),
        ("ple_gap_cycles", host.ple_gap_cycles),
        ("ple_window_max_cycles", host.ple_window_max_cycles),
    ] {
        if cycles > u64::from(u32::MAX) {
            return Err(err(format!("host.{field}"), format!("expected an integer in 0..={}, got {cycles}", u32::MAX)));
        }
    }
    if host.ple_window_max_cycles < host.ple_window_cycles {
        return Err(err(
            "host.ple_window_max_cycles",
            format!(
                "expected at least host.ple_window_cycles = {}, got {}",
                host.ple_window_cycles, host.ple_window_max_cycles
            ),
        ));
    }
    topology(&host)?;
    if host.spin_iteration_cycles == 0 || host.spin_iteration_cycles > 1_000_000 {
        return Err(err(
            "host.spin_iteration_cycles",
            format!("expected an integer in 1..=1000000, got {}", host.spin_iteration_cycles),
        ));
    }
    Ok(host)
}

/// `host.ple_handler_us` under a policy that runs KVM's PLE handler: as given, else the era's cost of KVM's handler
/// (`Hardware::kvm_ple_handler_ns`; the default `ple_handler_us` is Xen's). Called after
/// `host_config` has checked the key.
pub(crate) fn kvm_ple_handler_ns(h: &HostSection) -> Result<vsched_model::Time, ConfigError> {
    let era = hardware(h.hardware.as_deref().unwrap_or(DEFAULT_HARDWARE)).expect("host_config checked the era");
    micros("host.ple_handler_us", h.ple_handler_us, era.kvm_ple_handler_ns)
}

/// `pcpus` splits evenly into sockets of whole cores.
fn topology(host: &HostConfig) -> Result<(), ConfigError> {
    if host.sockets == 0 || host.sockets > host.pcpus {
        return Err(err(
            "host.sockets",
            format!("expected an integer in 1..=pcpus ({}), got {}", host.pcpus, host.sockets),
        ));
    }
    if !(1..=8).contains(&host.threads_per_core) {
        return Err(err(
            "host.threads_per_core",
            format!("expected an integer in 1..=8 (2 with SMT), got {}", host.threads_per_core),
        ));
    }
    if !host.pcpus.is_multiple_of(host.sockets * host.threads_per_core) {
        return Err(err(
            "host.sockets",
            format!(
                "expected pcpus ({}) to be a multiple of sockets × threads_per_core ({} × {})",
                host.pcpus, host.sockets, host.threads_per_core
            ),
        ));
    }
    Ok(())
}

/// The era's caches with the `[host]` overrides, each in a range a processor could have.
/// `host.smt_rate`: a fraction in (0, 1] (1: siblings do not slow each other).
fn smt_rate(given: Option<f64>, default: f64) -> Result<f64, ConfigError> {
    let rate = given.unwrap_or(default);
    if !(rate.is_finite() && rate > 0.0 && rate <= 1.0) {
        return Err(err(
            "host.smt_rate",
            format!(
                "expected a fraction in (0, 1], a thread's rate while its sibling runs, got {}",
                vsched_model::number(rate)
            ),
        ));
    }
    Ok(rate)
}

fn caches(h: &HostSection, era: &Caches) -> Result<Caches, ConfigError> {
    let within = |field: &str, v: Option<u64>, default: u64, range: std::ops::RangeInclusive<u64>| match v {
        None => Ok(default),
        Some(x) if range.contains(&x) => Ok(x),
        Some(x) => Err(err(
            format!("host.{field}"),
            format!("expected an integer in {}..={}, got {x}", range.start(), range.end()),
        )),
    };
    Ok(Caches {
        l2_kib: within("l2_kib", h.l2_kib, era.l2_kib, 0..=1 << 20)?,
        l3_kib_per_core: within("l3_kib_per_core", h.l3_kib_per_core, era.l3_kib_per_core, 0..=1 << 20)?,
        fill_buffers: within("fill_buffers", h.fill_buffers.map(u64::from), era.fill_buffers.into(), 1..=1024)? as u32,
        l3_latency_cycles: within("l3_latency_cycles", h.l3_latency_cycles, era.l3_latency_cycles, 0..=100_000)?,
        memory_latency_ns: within("memory_latency_ns", h.memory_latency_ns, era.memory_latency_ns, 0..=100_000)?,
    })
}

/// The disk, blkback and dom0 timer keys of `[host]`, each checked with its own path.
fn io_config(h: &HostSection) -> Result<IoConfig, ConfigError> {
    let d = IoConfig::default();
    let disk_seek_ns = match h.disk_seek_ms {
        None => d.disk_seek_ns,
        Some(ms) if ms.is_finite() && (0.0..=10_000.0).contains(&ms) => (ms * 1e6).round() as u64,
        Some(ms) => {
            return Err(err(
                "host.disk_seek_ms",
                format!("expected a number of milliseconds in 0..=10000, got {}", vsched_model::number(ms)),
            ))
        }
    };
    let disk_mb_per_s = match h.disk_mb_per_s {
        None => d.disk_mb_per_s,
        // From a floppy (0.01 MB/s) to beyond any NVMe drive (1 TB/s).
        Some(x) if x.is_finite() && (0.01..=1e6).contains(&x) => x,
        Some(x) => {
            return Err(err(
                "host.disk_mb_per_s",
                format!("expected a number of MB/s in [0.01, 1000000], got {}", vsched_model::number(x)),
            ))
        }
    };
    Ok(IoConfig {
        disk_seek_ns,
        disk_mb_per_s,
        blkback_request_ns: micros("host.blkback_request_us", h.blkback_request_us, d.blkback_request_ns)?,
    })
}

/// `host.dom0_idle_wakes_per_s`: timer wake-ups per second of each idle driver-domain vCPU,
/// a tickless Linux of the seed papers' era by default (docs/realism.md).
pub(crate) fn dom0_idle_wakes_per_s(h: &HostSection) -> Result<f64, ConfigError> {
    match h.dom0_idle_wakes_per_s {
        None => Ok(DEFAULT_IDLE_WAKES_PER_S),
        Some(x) if x.is_finite() && (0.0..=DEFAULT_GUEST_HZ as f64).contains(&x) => Ok(x),
        Some(x) => Err(err(
            "host.dom0_idle_wakes_per_s",
            format!(
                "expected a number in 0..={DEFAULT_GUEST_HZ} (0 = none; at most its kernel's HZ), got {}",
                vsched_model::number(x)
            ),
        )),
    }
}

/// The most wake-ups per second of a pCPU's kernel threads: one per tick at the highest
/// `CONFIG_HZ` Linux offers (`kernel/Kconfig.hz`), far beyond any measured host.
const MAX_KTHREAD_WAKES_PER_S: f64 = 1000.0;

/// The host's own threads (`host.host_threads` and its keys) on a host of `hypervisor`:
/// on by default for a KVM host, refused for any other (whose I/O runs in a driver domain,
/// or nowhere); `None` when off. The cost keys are read only while they are on.
pub(crate) fn host_threads(
    h: &HostSection,
    host: &HostConfig,
    hypervisor: Hypervisor,
    policy: &str,
) -> Result<Option<HostThreads>, ConfigError> {
    let kvm = hypervisor == Hypervisor::Kvm;
    match h.host_threads {
        Some(true) if !kvm => {
            return Err(err(
                "host.host_threads",
                format!(
                    "expected false or no key under policy {policy} on this {} host (host.hypervisor): host threads \
                     are a KVM host's (a Xen host's I/O runs in its driver domain, host.dom0_vcpus)",
                    hypervisor.name()
                ),
            ))
        }
        Some(false) => return Ok(None),
        None if !kvm => return Ok(None),
        _ => {}
    }
    let d = HostThreads::defaults(host);
    let kthread_wakes_per_s = match h.kthread_wakes_per_s {
        None => d.kthread_wakes_per_s,
        Some(x) if x.is_finite() && (0.0..=MAX_KTHREAD_WAKES_PER_S).contains(&x) => x,
        Some(x) => {
            return Err(err(
                "host.kthread_wakes_per_s",
                format!(
                    "expected a number in 0..={MAX_KTHREAD_WAKES_PER_S} (0 = no per-CPU kernel threads), got {}",
                    vsched_model::number(x)
                ),
            ))
        }
    };
    Ok(Some(HostThreads {
        kthread_wakes_per_s,
        kthread_run_ns: micros("host.kthread_run_us", h.kthread_run_us, d.kthread_run_ns)?,
        virtio_blk_request_ns: micros("host.virtio_blk_request_us", h.virtio_blk_request_us, d.virtio_blk_request_ns)?,
        vhost_packet_ns: micros("host.vhost_packet_us", h.vhost_packet_us, d.vhost_packet_ns)?,
        host_tick_ns: micros("host.host_tick_us", h.host_tick_us, d.host_tick_ns)?,
    }))
}

/// The hypervisor the host runs: `host.hypervisor` when the scenario declares it, else the
/// policy's. A generic policy (rr, a Python policy that declares none) runs on the declared
/// hypervisor as it is (a Xen host keeps its Domain-0); a policy written for the other
/// hypervisor is refused, naming the key: running KVM's scheduler beside Xen's Domain-0, or
/// Credit beside KVM's host threads, would measure a host that exists nowhere.
pub(crate) fn hypervisor(
    h: &HostSection,
    policy: &str,
    policy_hypervisor: Hypervisor,
) -> Result<Hypervisor, ConfigError> {
    let declared = match h.hypervisor.as_deref() {
        None => return Ok(policy_hypervisor),
        Some("xen") => Hypervisor::Xen,
        Some("kvm") => Hypervisor::Kvm,
        Some(other) => return Err(err("host.hypervisor", format!("expected \"xen\" or \"kvm\", got {other:?}"))),
    };
    if policy_hypervisor != Hypervisor::Generic && policy_hypervisor != declared {
        let (host, theirs) = (declared.name(), policy_hypervisor.name());
        return Err(err(
            "host.hypervisor",
            format!(
                "the scenario's host runs {host}, but policy {policy} is a {theirs} scheduler; expected a {host} or \
                 generic policy (or --set host.hypervisor={theirs} to run it on a {theirs} host)"
            ),
        ));
    }
    Ok(declared)
}
