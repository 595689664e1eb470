//! The shape of a scenario file, as serde reads it: one struct per TOML table, every key
//! optional that has a default. Nothing here checks a value; `validate` does, naming the
//! same paths. `deny_unknown_fields` makes a misspelt key an error; it cannot be combined
//! with `flatten`, so the tables with free-form parameters (`[scheduler]`,
//! `[vm.workload]`) leave unknown keys to the policy's or the workload's own check, and
//! `[[vm]]` and `[[virtual_cluster]]` each list their VM keys.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::host::HostSection;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScenarioFile {
    pub(super) name: Option<String>,
    pub(super) host: HostSection,
    pub(super) scheduler: NamedSection,
    #[serde(default)]
    pub(super) cluster: ClusterSection,
    #[serde(default)]
    pub(super) network: NetworkSection,
    #[serde(default)]
    pub(super) vm: Vec<VmSection>,
    #[serde(default)]
    pub(super) virtual_cluster: Vec<VirtualClusterSection>,
    #[serde(default)]
    pub(super) run: RunSection,
    #[serde(default)]
    pub(super) event: Vec<EventSection>,
}

/// A change during the run: `[[event]] at_s = 5.0, vm = "lu", type = "CON"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EventSection {
    pub(super) at_s: f64,
    pub(super) vm: String,
    #[serde(rename = "type")]
    pub(super) vm_type: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct ClusterSection {
    pub(super) hosts: Option<u32>,
    pub(super) clocks: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct NetworkSection {
    pub(super) latency_us: Option<f64>,
    pub(super) bandwidth_gbps: Option<f64>,
    pub(super) intra_host_latency_us: Option<f64>,
    pub(super) intra_host_bandwidth_gbps: Option<f64>,
    pub(super) shm_latency_us: Option<f64>,
    pub(super) shm_bandwidth_gbps: Option<f64>,
    pub(super) mtu_bytes: Option<u64>,
    pub(super) dom0_packet_us: Option<f64>,
}

/// A parallel job over VMs: `[[virtual_cluster]]`, one VM per listed host.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct VirtualClusterSection {
    pub(super) name: String,
    /// vCPUs of each VM.
    pub(super) vcpus: u32,
    /// Hosts of its VMs, one VM per entry (default: one on every host).
    pub(super) hosts: Option<Vec<u32>>,
    pub(super) weight: Option<u32>,
    pub(super) cap: Option<u32>,
    #[serde(rename = "type")]
    pub(super) vm_type: Option<String>,
    pub(super) pv_spinlocks: Option<bool>,
    pub(super) pv_steal_time: Option<bool>,
    pub(super) pv_tlb_flush: Option<bool>,
    pub(super) pv_sched_yield: Option<bool>,
    pub(super) pv_critical_sections: Option<bool>,
    /// The slice its vCPU threads request of the host scheduler (EEVDF), µs.
    pub(super) sched_slice_us: Option<f64>,
    pub(super) guest_tick: Option<String>,
    pub(super) guest_hz: Option<u32>,
    pub(super) idle_wakes_per_s: Option<f64>,
    /// The guest's haltpoll cpuidle driver and its governor's parameters (`crate::halt_poll`).
    pub(super) guest_haltpoll: Option<bool>,
    pub(super) guest_halt_poll_ns: Option<u64>,
    pub(super) guest_halt_poll_grow: Option<u64>,
    pub(super) guest_halt_poll_shrink: Option<u64>,
    pub(super) guest_halt_poll_grow_start: Option<u64>,
    pub(super) guest_halt_poll_allow_shrink: Option<bool>,
    pub(super) workload: WorkloadSection,
}

/// A table with a `name`/`kind` and free-form parameters checked by the policy or workload.
#[derive(Deserialize)]
pub(super) struct NamedSection {
    #[serde(alias = "kind")]
    pub(super) name: String,
    #[serde(flatten)]
    pub(super) params: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct VmSection {
    pub(super) name: String,
    pub(super) vcpus: u32,
    pub(super) weight: Option<u32>,
    pub(super) cap: Option<u32>,
    #[serde(rename = "type")]
    pub(super) vm_type: Option<String>,
    pub(super) pv_spinlocks: Option<bool>,
    pub(super) pv_steal_time: Option<bool>,
    pub(super) pv_tlb_flush: Option<bool>,
    pub(super) pv_sched_yield: Option<bool>,
    pub(super) pv_critical_sections: Option<bool>,
    /// The slice its vCPU threads request of the host scheduler (EEVDF), µs.
    pub(super) sched_slice_us: Option<f64>,
    /// vCPUs the guest has but its workload does not use: halted for the whole run.
    pub(super) idle_vcpus: Option<u32>,
    pub(super) start_s: Option<f64>,
    pub(super) stop_s: Option<f64>,
    pub(super) host: Option<u32>,
    /// The guest kernel's timers (`guest_kernel`).
    pub(super) guest_tick: Option<String>,
    pub(super) guest_hz: Option<u32>,
    pub(super) idle_wakes_per_s: Option<f64>,
    /// The guest's haltpoll cpuidle driver and its governor's parameters (`crate::halt_poll`).
    pub(super) guest_haltpoll: Option<bool>,
    pub(super) guest_halt_poll_ns: Option<u64>,
    pub(super) guest_halt_poll_grow: Option<u64>,
    pub(super) guest_halt_poll_shrink: Option<u64>,
    pub(super) guest_halt_poll_grow_start: Option<u64>,
    pub(super) guest_halt_poll_allow_shrink: Option<bool>,
    pub(super) workload: WorkloadSection,
}

#[derive(Deserialize)]
pub(super) struct WorkloadSection {
    pub(super) kind: String,
    #[serde(flatten)]
    pub(super) params: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RunSection {
    pub(super) horizon_s: Option<f64>,
    pub(super) until: Option<String>,
    pub(super) seed: Option<u64>,
    pub(super) reps: Option<u32>,
    /// The stall watchdog's bound: a vCPU runnable this long without running fails the run.
    pub(super) stall_timeout_s: Option<f64>,
}
