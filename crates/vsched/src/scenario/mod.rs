//! Scenario files: parsing, validation with one-line errors, and building simulations.
//!
//! Parsing goes in steps so every error can name its place: TOML syntax first (errors
//! carry the line and column), then the typed structure (`file`: errors carry the field
//! path, e.g. `vm[1].weight`), then value checks (`validate`: ranges, known names) with the
//! same paths. The tables' own readers are beside it: `network`, `policy` (`[scheduler]`),
//! `vm` (one VM table), `values` (single values); the host's keys are in `crate::host`.

mod file;
mod network;
mod policy;
mod validate;
mod values;
mod vm;

pub use policy::supports_vm_lifecycle;
pub(crate) use validate::MAX_HOSTS;
pub use values::check_reps;
pub(crate) use values::{err, micros, parse_toml};

use vsched_model::{
    driver_guest, ConfigError, DomainConfig, GuestTick, HostConfig, NetworkConfig, Params, Paravirt, Simulation, Time,
    Until, VmType,
};
use vsched_workloads::{Ranks, WorkloadInfo};

use crate::external::{PolicyResolver, PolicySource};
use crate::overrides;
use file::ScenarioFile;

/// Default VM weight (Xen's `CSCHED_DEFAULT_WEIGHT`).
pub const DEFAULT_WEIGHT: u32 = 256;

/// Default horizon when `[run] horizon_s` is absent.
pub const DEFAULT_HORIZON_S: f64 = 60.0;
/// The longest horizon: about 11.6 simulated days.
pub const MAX_HORIZON_S: f64 = 1e6;
/// The first seed of a scenario without `run.seed`.
pub const DEFAULT_SEED: u64 = 1;
/// The repetitions of a scenario without `run.reps`.
pub const DEFAULT_REPS: u32 = 1;
/// The most repetitions of one run: a sane bound that keeps a typo from running for ever.
pub const MAX_REPS: u32 = 100_000;

/// A validated scenario: everything needed to build a run for any seed.
#[derive(Clone)]
pub struct Scenario {
    pub name: String,
    pub host: HostConfig,
    /// Number of identical hosts.
    pub hosts: usize,
    /// `[cluster] clocks = "aligned"`: every host's scheduler ticks at host 0's instants.
    pub aligned_clocks: bool,
    pub network: NetworkConfig,
    /// The policy, with its parameters: a registered one or the caller's (`external`).
    pub policy: PolicySource,
    /// Xen's `sched-gran` coarser than a pCPU, with its threads per resource (`sched_gran.rs`);
    /// `None` schedules each pCPU on its own.
    pub sched_gran: Option<(vsched_policies::core_gran::SchedGran, usize)>,
    /// Every domain in simulation order: host by host, each host's driver domain first, then
    /// its `[[vm]]`s, then its virtual-cluster VMs.
    pub vms: Vec<VmSpec>,
    pub horizon: Time,
    pub until: Until,
    pub seed: u64,
    pub reps: u32,
    /// The stall watchdog's bound as `run.stall_timeout_s` sets it: `None` leaves the policy's
    /// (`Policy::stall_timeout_ns`), `Some(None)` turns it off.
    pub stall_timeout: Option<Option<Time>>,
    pub events: Vec<EventSpec>,
    /// The memory a run of this scenario is estimated to hold, in bytes (`footprint`).
    pub memory_estimate: u64,
}

/// A scheduled change of a VM's type.
#[derive(Clone)]
pub struct EventSpec {
    pub at: Time,
    /// Index into `vms`.
    pub vm: usize,
    pub vm_type: VmType,
}

#[derive(Clone)]
pub struct VmSpec {
    pub name: String,
    pub vcpus: usize,
    pub weight: u32,
    pub cap: u32,
    pub vm_type: VmType,
    pub guest: Guest,
    /// Its guest's paravirtual features (`pv_*`).
    pub pv: Paravirt,
    /// The slice its vCPU threads request of the host scheduler (`sched_slice_us`).
    pub slice_request_ns: Option<Time>,
    /// Created at (0: from the start) and destroyed at (never if `None`).
    pub start: Time,
    pub stop: Option<Time>,
    pub host: usize,
    /// Its virtual cluster, if any.
    pub job: Option<String>,
    /// Its vCPUs' place in its job.
    pub ranks: Ranks,
    /// What each guest thread reuses in the caches (`working_set_kb`, or the workload's
    /// default).
    pub working_set_bytes: u64,
    /// Its guest kernel's timer interrupts (`guest_tick`, `guest_hz`, `idle_wakes_per_s`).
    pub tick: GuestTick,
}

/// What a domain runs.
#[derive(Clone)]
pub enum Guest {
    Workload(&'static WorkloadInfo, Params),
    /// The host's driver domain (dom0), serving the network.
    Driver,
}

impl VmSpec {
    pub fn workload_name(&self) -> &'static str {
        match &self.guest {
            Guest::Workload(w, _) => w.name,
            Guest::Driver => "dom0",
        }
    }

    /// What its vCPUs run: the workload's programs on its vCPUs, as every world runs them
    /// (the simulator, real vCPUs).
    pub fn guest_spec(&self) -> vsched_model::GuestSpec {
        match &self.guest {
            Guest::Workload(w, params) => (w.build)(params, &self.ranks).expect("validated").on_vcpus(self.vcpus),
            Guest::Driver => driver_guest(self.vcpus),
        }
    }
}

impl Scenario {
    /// Parses and validates scenario text.
    pub fn parse(text: &str) -> Result<Scenario, ConfigError> {
        Self::parse_with_policy(text, None)
    }

    /// Parses and validates scenario text, with `[scheduler]` replaced by policy `policy` at
    /// its default parameters when given (`vsched run --policy`).
    pub fn parse_with_policy(text: &str, policy: Option<&str>) -> Result<Scenario, ConfigError> {
        Self::parse_with(text, policy, 0)
    }

    /// As [`Scenario::parse_with_policy`], refusing a scenario whose estimated memory exceeds
    /// `max_memory` bytes (0: [`crate::DEFAULT_MAX_MEMORY`]; see `footprint`).
    pub fn parse_with(text: &str, policy: Option<&str>, max_memory: u64) -> Result<Scenario, ConfigError> {
        Self::parse_with_resolver(text, policy, max_memory, None)
    }

    /// As [`Scenario::parse_with`], with `resolver` finding the policies that are not in the
    /// registry (`external`); without one, a scenario naming such a policy is refused.
    pub fn parse_with_resolver(
        text: &str,
        policy: Option<&str>,
        max_memory: u64,
        resolver: Option<&dyn PolicyResolver>,
    ) -> Result<Scenario, ConfigError> {
        let mut table = parse_toml(text)?;
        overrides::apply(&mut table, policy, &[])?;
        let file: ScenarioFile = serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
            let path = e.path().to_string();
            let message = e.inner().message().split_whitespace().collect::<Vec<_>>().join(" ");
            // serde names Rust types; say what a user should write instead.
            let message = message
                .replace("expected u32", "expected a non-negative integer")
                .replace("expected u64", "expected a non-negative integer")
                .replace("expected f64", "expected a number");
            // `missing field `x`` at `p`: the missing key is the field to name.
            let missing = message.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`'));
            match (path.as_str(), missing) {
                (".", Some(key)) => err(key, "missing; expected this key, which has no default"),
                (_, Some(key)) => err(format!("{path}.{key}"), "missing; expected this key, which has no default"),
                (".", None) => err("", message),
                (_, None) => err(path, message),
            }
        })?;
        // An external policy given as `--policy` is named by the option in its errors.
        let policy_field = if policy.is_some() { "--policy" } else { "scheduler.name" };
        let max_memory = if max_memory == 0 { crate::DEFAULT_MAX_MEMORY } else { max_memory };
        validate::validate(file, max_memory, policy_field, resolver)
    }

    /// A ready-to-run simulation of this scenario with `seed`.
    pub fn build(&self, seed: u64) -> Simulation {
        let domains = self
            .vms
            .iter()
            .map(|v| DomainConfig {
                name: v.name.clone(),
                weight: v.weight,
                cap: v.cap,
                vm_type: v.vm_type,
                workload: v.workload_name().to_string(),
                guest: v.guest_spec(),
                pv: v.pv,
                slice_request_ns: v.slice_request_ns,
                start_at: v.start,
                stop_at: v.stop,
                host: v.host,
                job: v.job.clone(),
                driver: matches!(v.guest, Guest::Driver),
                working_set_bytes: v.working_set_bytes,
                tick: v.tick,
            })
            .collect();
        let policies =
            (0..self.hosts).map(|_| crate::sched_gran::wrap(self.policy.build_for_run(), self.sched_gran)).collect();
        let mut sim = Simulation::cluster(self.host.clone(), self.network.clone(), domains, policies, seed);
        if self.aligned_clocks {
            sim.align_host_clocks();
        }
        if let Some(timeout) = self.stall_timeout {
            sim.set_stall_timeout(timeout);
        }
        for e in &self.events {
            sim.schedule_type_change(e.at, e.vm, e.vm_type);
        }
        sim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[host]
pcpus = 2
[scheduler]
name = "rr"
[[vm]]
name = "a"
vcpus = 2
[vm.workload]
kind = "cpu_hog"
"#;

    fn error_of(text: &str) -> String {
        match Scenario::parse(text) {
            Ok(_) => panic!("scenario was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn minimal_scenario_gets_defaults() {
        let Ok(s) = Scenario::parse(MINIMAL) else { panic!("minimal scenario refused") };
        assert_eq!(s.vms[0].weight, DEFAULT_WEIGHT);
        assert_eq!(s.reps, 1);
        assert_eq!(s.host.ple_window_cycles, 4096);
    }

    #[test]
    fn malformed_toml_names_the_line() {
        let e = error_of("[host]\npcpus = 2\n[scheduler\nname = \"rr\"\n");
        assert!(e.starts_with("malformed TOML at line 3"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn unknown_keys_and_wrong_types_name_the_path() {
        let e = error_of(&MINIMAL.replace("vcpus = 2", "vcpus = 2\nweigth = 3"));
        assert!(e.starts_with("vm[0]") && e.contains("unknown field `weigth`"), "{e}");
        let e = error_of(&MINIMAL.replace("pcpus = 2", "pcpus = \"two\""));
        assert!(e.starts_with("host.pcpus: invalid type: string \"two\""), "{e}");
        let e = error_of(&MINIMAL.replace("vcpus = 2", "vcpus = 2\nweight = -5"));
        assert_eq!(e, "vm[0].weight: invalid value: integer `-5`, expected a non-negative integer");
        assert_eq!(error_of(""), "host: missing; expected this key, which has no default");
        let e = error_of(&MINIMAL.replace("vcpus = 2\n", ""));
        assert_eq!(e, "vm[0].vcpus: missing; expected this key, which has no default");
    }

    #[test]
    fn impossible_values_are_refused() {
        assert_eq!(
            error_of(&MINIMAL.replace("pcpus = 2", "pcpus = 0")),
            "host.pcpus: expected an integer in 1..=4096, got 0"
        );
        let e = error_of(&MINIMAL.replace("vcpus = 2", "vcpus = 2\ncap = 201"));
        assert!(e.starts_with("vm[0].cap: expected a percentage of one pCPU in 0..=200"), "{e}");
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let e = error_of(&MINIMAL.replace("\"rr\"", "\"fifo\""));
        assert!(e.starts_with("scheduler.name: unknown policy \"fifo\"; expected one of rr, credit"), "{e}");
        let e = error_of(&MINIMAL.replace("cpu_hog", "hog"));
        assert!(e.starts_with("vm[0].workload.kind: unknown workload \"hog\"; expected one of cpu_hog"), "{e}");
        let e = error_of(&MINIMAL.replace("kind = \"cpu_hog\"", "kind = \"spinlock\"\nlock_kind = \"rwlock\""));
        assert_eq!(
            e,
            "vm[0].workload.lock_kind: expected one of \"ticket\", \"tas\", \"mcs\", \"preemptable-ticket\", \
             \"mutex\", got \"rwlock\""
        );
    }
}
