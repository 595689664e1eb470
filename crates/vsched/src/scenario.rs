//! Scenario files: parsing, validation with one-line errors, and building simulations.
//!
//! Parsing goes in two steps so every error can name its place: TOML syntax first (errors
//! carry the line and column), then the typed structure (errors carry the field path, e.g.
//! `vm[1].weight`), then value checks (ranges, known names) with the same paths.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Deserialize;
use vsched_model::{
    driver_guest, ConfigError, DomainConfig, DomainInfo, GuestTick, HostConfig, Hypervisor, NetworkConfig, Params,
    Paravirt, Simulation, Time, Until, Value, VmType,
};
use vsched_workloads::{working_set, Ranks, WorkloadInfo};

use crate::external::{is_external_name, PolicyResolver, PolicySource};
use crate::footprint::{Budget, VmFootprint};
use crate::guest_kernel::{dom0_tick, guest_tick, TickKeys};
use crate::host::{self, HostSection};
use crate::overrides;
use crate::paravirt::{paravirt, PvKeys};

/// Default VM weight (Xen's `CSCHED_DEFAULT_WEIGHT`).
pub const DEFAULT_WEIGHT: u32 = 256;
/// Xen accepts weights in 1..=65535.
const MAX_WEIGHT: u32 = 65_535;
/// 1 TiB: more memory than any VM of the presets' hosts could have.
const MAX_WORKING_SET_KB: i64 = 1 << 30;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: Option<String>,
    host: HostSection,
    scheduler: NamedSection,
    #[serde(default)]
    cluster: ClusterSection,
    #[serde(default)]
    network: NetworkSection,
    #[serde(default)]
    vm: Vec<VmSection>,
    #[serde(default)]
    virtual_cluster: Vec<VirtualClusterSection>,
    #[serde(default)]
    run: RunSection,
    #[serde(default)]
    event: Vec<EventSection>,
}

/// A change during the run: `[[event]] at_s = 5.0, vm = "lu", type = "CON"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventSection {
    at_s: f64,
    vm: String,
    #[serde(rename = "type")]
    vm_type: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ClusterSection {
    hosts: Option<u32>,
    clocks: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NetworkSection {
    latency_us: Option<f64>,
    bandwidth_gbps: Option<f64>,
    intra_host_latency_us: Option<f64>,
    intra_host_bandwidth_gbps: Option<f64>,
    shm_latency_us: Option<f64>,
    shm_bandwidth_gbps: Option<f64>,
    mtu_bytes: Option<u64>,
    dom0_packet_us: Option<f64>,
}

/// A parallel job over VMs: `[[virtual_cluster]]`, one VM per listed host.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VirtualClusterSection {
    name: String,
    /// vCPUs of each VM.
    vcpus: u32,
    /// Hosts of its VMs, one VM per entry (default: one on every host).
    hosts: Option<Vec<u32>>,
    weight: Option<u32>,
    cap: Option<u32>,
    #[serde(rename = "type")]
    vm_type: Option<String>,
    pv_spinlocks: Option<bool>,
    pv_steal_time: Option<bool>,
    pv_tlb_flush: Option<bool>,
    pv_sched_yield: Option<bool>,
    pv_critical_sections: Option<bool>,
    /// The slice its vCPU threads request of the host scheduler (EEVDF), µs.
    sched_slice_us: Option<f64>,
    guest_tick: Option<String>,
    guest_hz: Option<u32>,
    idle_wakes_per_s: Option<f64>,
    workload: WorkloadSection,
}

/// A table with a `name`/`kind` and free-form parameters checked by the policy or workload.
#[derive(Deserialize)]
struct NamedSection {
    #[serde(alias = "kind")]
    name: String,
    #[serde(flatten)]
    params: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VmSection {
    name: String,
    vcpus: u32,
    weight: Option<u32>,
    cap: Option<u32>,
    #[serde(rename = "type")]
    vm_type: Option<String>,
    pv_spinlocks: Option<bool>,
    pv_steal_time: Option<bool>,
    pv_tlb_flush: Option<bool>,
    pv_sched_yield: Option<bool>,
    pv_critical_sections: Option<bool>,
    /// The slice its vCPU threads request of the host scheduler (EEVDF), µs.
    sched_slice_us: Option<f64>,
    /// vCPUs the guest has but its workload does not use: halted for the whole run.
    idle_vcpus: Option<u32>,
    start_s: Option<f64>,
    stop_s: Option<f64>,
    host: Option<u32>,
    /// The guest kernel's timers (`guest_kernel`).
    guest_tick: Option<String>,
    guest_hz: Option<u32>,
    idle_wakes_per_s: Option<f64>,
    workload: WorkloadSection,
}

#[derive(Deserialize)]
struct WorkloadSection {
    kind: String,
    #[serde(flatten)]
    params: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RunSection {
    horizon_s: Option<f64>,
    until: Option<String>,
    seed: Option<u64>,
    reps: Option<u32>,
}

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
    /// Every domain in simulation order: host by host, each host's driver domain first, then
    /// its `[[vm]]`s, then its virtual-cluster VMs.
    pub vms: Vec<VmSpec>,
    pub horizon: Time,
    pub until: Until,
    pub seed: u64,
    pub reps: u32,
    pub events: Vec<EventSpec>,
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
    /// What each vCPU reuses in the caches (`working_set_kb`, or the workload's default).
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

pub(crate) fn err(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::new(path, message)
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

fn to_value(path: &str, v: &toml::Value) -> Result<Value, ConfigError> {
    Ok(match v {
        toml::Value::Integer(i) => Value::Int(*i),
        toml::Value::Float(x) => Value::Float(*x),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::String(s) => Value::Str(s.clone()),
        other => return Err(err(path, format!("expected a number, string or boolean, got {}", other.type_str()))),
    })
}

fn to_params(path: &str, raw: &BTreeMap<String, toml::Value>) -> Result<BTreeMap<String, Value>, ConfigError> {
    raw.iter().map(|(k, v)| Ok((k.clone(), to_value(&format!("{path}.{k}"), v)?))).collect()
}

/// The longest cost or latency a `*_us` key may give: a second, far above any machine cost
/// or network latency, and small enough that sums of them cannot overflow simulated time.
const MAX_MICROS: f64 = 1e6;

/// A number of microseconds in `[0, MAX_MICROS]`, as nanoseconds.
pub(crate) fn micros(path: &str, v: Option<f64>, default: Time) -> Result<Time, ConfigError> {
    match v {
        None => Ok(default),
        Some(x) if x.is_finite() && (0.0..=MAX_MICROS).contains(&x) => Ok((x * 1_000.0).round() as Time),
        Some(x) => Err(err(
            path,
            format!("expected a number of microseconds in [0, {MAX_MICROS}], got {}", vsched_model::number(x)),
        )),
    }
}

/// Scenario text as a TOML table, or a one-line error naming the line and column.
pub(crate) fn parse_toml(text: &str) -> Result<toml::Table, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let (line, col) = e.span().map_or((0, 0), |s| line_col(text, s.start));
        // toml's messages may span lines (expected-token lists); keep our one-line promise.
        let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
        err("", format!("malformed TOML at line {line}, column {col}: {message}"))
    })
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
        Self::validate(file, max_memory, policy_field, resolver)
    }

    fn validate(
        f: ScenarioFile,
        max_memory: u64,
        policy_field: &str,
        resolver: Option<&dyn PolicyResolver>,
    ) -> Result<Scenario, ConfigError> {
        let h = &f.host;
        let host = host::host_config(h)?;
        let mut budget = Budget::new(max_memory);

        if let Some(version) = &h.xen_version {
            let host_given = [("xen_version".to_string(), Value::Str(version.clone()))].into_iter().collect();
            Params::check("host", host::HOST_XEN_VERSION, &host_given)?
                .choice("xen_version", &vsched_policies::XEN_VERSIONS)?;
        }
        let policy = policy_source(&f.scheduler, h.xen_version.as_deref(), policy_field, resolver)?;
        // Build once now so range errors surface at validation time.
        let built = policy.build()?;

        let hosts = f.cluster.hosts.unwrap_or(1);
        if hosts == 0 || hosts > 1024 {
            return Err(err("cluster.hosts", format!("expected an integer in 1..=1024, got {hosts}")));
        }
        let hosts = hosts as usize;
        let aligned_clocks = match f.cluster.clocks.as_deref() {
            None | Some("independent") => false,
            Some("aligned") => true,
            Some(other) => {
                return Err(err("cluster.clocks", format!("expected \"independent\" or \"aligned\", got {other:?}")))
            }
        };
        let network = network_config(&f.network)?;
        // A Xen host boots Domain-0 with one vCPU per pCPU unless `dom0_max_vcpus` says
        // otherwise (docs/misc/xen-command-line.markdown, Xen 4.2); KVM has no driver domain.
        let dom0_vcpus = h.dom0_vcpus.unwrap_or(if policy.hypervisor() == Hypervisor::Xen { h.pcpus } else { 0 });
        if dom0_vcpus > host::MAX_PCPUS {
            return Err(err(
                "host.dom0_vcpus",
                format!("expected an integer in 0..={} (0 = no driver domain), got {dom0_vcpus}", host::MAX_PCPUS),
            ));
        }
        budget.hosts(hosts, host.pcpus + dom0_vcpus as usize)?;
        let dom0_weight = h.dom0_weight.unwrap_or(DEFAULT_WEIGHT);
        let dom0_tick = dom0_tick(host::dom0_idle_wakes_per_s(h)?);
        if dom0_weight == 0 || dom0_weight > MAX_WEIGHT {
            return Err(err("host.dom0_weight", format!("expected an integer in 1..={MAX_WEIGHT}, got {dom0_weight}")));
        }

        if f.vm.is_empty() && f.virtual_cluster.is_empty() {
            return Err(err("vm", "expected at least one [[vm]] or [[virtual_cluster]] table"));
        }
        // The user's VMs, each with the index of its [[vm]] table (None: a cluster member).
        let mut user: Vec<(Option<usize>, VmSpec)> = Vec::new();
        // Validation stays linear in the scenario's size: names in a set, VMs bucketed by host.
        let mut names: HashSet<String> = HashSet::new();
        let mut claim_name = |path: String, name: &str| -> Result<(), ConfigError> {
            if name.is_empty() {
                return Err(err(path, "expected a non-empty name"));
            }
            if names.contains(name) {
                return Err(err(path, format!("expected a unique name, {name:?} is used twice")));
            }
            if dom0_vcpus > 0 && (name == "dom0" || name.starts_with("dom0.")) {
                return Err(err(
                    path,
                    format!(
                        "expected a name other than {name:?}, which names the driver domain (a Xen host has one by default; host.dom0_vcpus = 0 removes it)"
                    ),
                ));
            }
            names.insert(name.to_string());
            Ok(())
        };
        for (i, v) in f.vm.iter().enumerate() {
            let at = |field: &str| format!("vm[{i}].{field}");
            claim_name(at("name"), &v.name)?;
            let host = v.host.unwrap_or(0) as usize;
            if host >= hosts {
                return Err(err(
                    at("host"),
                    format!("expected a host index in 0..{hosts} (cluster.hosts = {hosts}), got {host}"),
                ));
            }
            let idle_vcpus = v.idle_vcpus.unwrap_or(0);
            if idle_vcpus >= v.vcpus {
                return Err(err(
                    at("idle_vcpus"),
                    format!(
                        "expected fewer idle vCPUs than vcpus = {} (the workload needs one), got {idle_vcpus}",
                        v.vcpus
                    ),
                ));
            }
            if idle_vcpus > 0 && v.workload.params.contains_key("threads") {
                return Err(err(
                    at("idle_vcpus"),
                    "expected no idle_vcpus beside workload.threads (threads fewer than vcpus leave the other vCPUs halted)",
                ));
            }
            let ranks = Ranks::alone((v.vcpus - idle_vcpus) as usize);
            let shape = VmShape {
                vcpus: v.vcpus,
                weight: v.weight,
                cap: v.cap,
                vm_type: v.vm_type.as_deref(),
                tick: TickKeys { mode: v.guest_tick.as_deref(), hz: v.guest_hz, idle_wakes_per_s: v.idle_wakes_per_s },
                pv: PvKeys {
                    spinlocks: v.pv_spinlocks,
                    steal_time: v.pv_steal_time,
                    tlb_flush: v.pv_tlb_flush,
                    sched_yield: v.pv_sched_yield,
                    critical_sections: v.pv_critical_sections,
                    sched_slice_us: v.sched_slice_us,
                },
            };
            let spec = vm_spec(&at, shape, "HIT", &v.workload, ranks, Some((&mut budget, 1)))?;
            user.push((Some(i), VmSpec { name: v.name.clone(), host, ..spec }));
        }
        for (c, vc) in f.virtual_cluster.iter().enumerate() {
            let at = |field: &str| format!("virtual_cluster[{c}].{field}");
            claim_name(at("name"), &vc.name)?;
            let members: Vec<usize> = match &vc.hosts {
                None => (0..hosts).collect(),
                Some(list) => list.iter().map(|&h| h as usize).collect(),
            };
            if members.is_empty() {
                return Err(err(at("hosts"), "expected at least one host index"));
            }
            if let Some(&bad) = members.iter().find(|&&h| h >= hosts) {
                return Err(err(
                    at("hosts"),
                    format!("expected host indices in 0..{hosts} (cluster.hosts = {hosts}), got {bad}"),
                ));
            }
            if members.windows(2).any(|w| w[0] > w[1]) {
                return Err(err(at("hosts"), "expected host indices in increasing order (ranks follow them)"));
            }
            let world = members.len() * vc.vcpus as usize;
            for (k, &host) in members.iter().enumerate() {
                let name = format!("{}.{k}", vc.name);
                claim_name(at("name"), &name)?;
                let ranks = Ranks { vcpus: vc.vcpus as usize, first: k * vc.vcpus as usize, world };
                let shape = VmShape {
                    vcpus: vc.vcpus,
                    weight: vc.weight,
                    cap: vc.cap,
                    vm_type: vc.vm_type.as_deref(),
                    tick: TickKeys {
                        mode: vc.guest_tick.as_deref(),
                        hz: vc.guest_hz,
                        idle_wakes_per_s: vc.idle_wakes_per_s,
                    },
                    pv: PvKeys {
                        spinlocks: vc.pv_spinlocks,
                        steal_time: vc.pv_steal_time,
                        tlb_flush: vc.pv_tlb_flush,
                        sched_yield: vc.pv_sched_yield,
                        critical_sections: vc.pv_critical_sections,
                        sched_slice_us: vc.sched_slice_us,
                    },
                };
                // Members differ only in their ranks: the first one's footprint stands for
                // all, charged before any is built.
                let charge = (k == 0).then_some((&mut budget, members.len()));
                let spec = vm_spec(&at, shape, "CON", &vc.workload, ranks, charge)?;
                user.push((None, VmSpec { name, host, job: Some(vc.name.clone()), ..spec }));
            }
        }
        let r = &f.run;
        let horizon_s = r.horizon_s.unwrap_or(DEFAULT_HORIZON_S);
        if !(horizon_s.is_finite() && horizon_s > 0.0 && horizon_s <= MAX_HORIZON_S) {
            return Err(err(
                "run.horizon_s",
                format!(
                    "expected a number of seconds in (0, {MAX_HORIZON_S}], got {}",
                    vsched_model::number(horizon_s)
                ),
            ));
        }
        let until = match r.until.as_deref().unwrap_or("horizon") {
            "horizon" => Until::Horizon,
            "all_done" => Until::AllDone,
            other => return Err(err("run.until", format!("expected \"horizon\" or \"all_done\", got {other:?}"))),
        };
        let reps = r.reps.unwrap_or(DEFAULT_REPS);
        check_reps("run.reps", reps)?;

        for (i, v) in f.vm.iter().enumerate() {
            let at = |field: &str| format!("vm[{i}].{field}");
            let start_s = v.start_s.unwrap_or(0.0);
            if !(start_s.is_finite() && (0.0..horizon_s).contains(&start_s)) {
                return Err(err(
                    at("start_s"),
                    format!(
                        "expected seconds in [0, run.horizon_s = {horizon_s}), got {}",
                        vsched_model::number(start_s)
                    ),
                ));
            }
            if let Some(stop_s) = v.stop_s {
                if !(stop_s.is_finite() && stop_s > start_s && stop_s <= horizon_s) {
                    return Err(err(
                        at("stop_s"),
                        format!(
                            "expected seconds in (start_s = {start_s}, run.horizon_s = {horizon_s}], got {}",
                            vsched_model::number(stop_s)
                        ),
                    ));
                }
            }
            // The [[vm]] tables' specs come first in `user`, in table order.
            debug_assert_eq!(user[i].0, Some(i));
            let spec = &mut user[i].1;
            spec.start = vsched_engine::secs_to_ns(start_s);
            spec.stop = v.stop_s.map(vsched_engine::secs_to_ns);
        }
        // Simulation order: host by host, the driver domain first.
        let mut vms: Vec<VmSpec> = Vec::new();
        let mut table_of: Vec<Option<usize>> = Vec::new();
        let mut by_host: Vec<Vec<(Option<usize>, VmSpec)>> = vec![Vec::new(); hosts];
        for (t, spec) in user {
            by_host[spec.host].push((t, spec));
        }
        for (host, user) in by_host.into_iter().enumerate() {
            if dom0_vcpus > 0 {
                vms.push(VmSpec {
                    name: if hosts == 1 { "dom0".to_string() } else { format!("dom0.{host}") },
                    vcpus: dom0_vcpus as usize,
                    weight: dom0_weight,
                    cap: 0,
                    vm_type: VmType::Hit,
                    guest: Guest::Driver,
                    pv: Paravirt::default(),
                    slice_request_ns: None,
                    start: 0,
                    stop: None,
                    host,
                    job: None,
                    ranks: Ranks::alone(dom0_vcpus as usize),
                    working_set_bytes: working_set::DRIVER_DOMAIN_BYTES,
                    tick: dom0_tick,
                });
                table_of.push(None);
            }
            for (t, spec) in user {
                vms.push(spec);
                table_of.push(t);
            }
        }
        if !built.supports_vm_lifecycle() {
            if let Some(d) = vms.iter().position(|v| v.start > 0 || v.stop.is_some()) {
                let i = table_of[d].expect("only [[vm]] tables have start_s / stop_s");
                let field = if vms[d].start > 0 { "start_s" } else { "stop_s" };
                return Err(err(
                    format!("vm[{i}].{field}"),
                    format!(
                        "policy {} does not support VMs created or destroyed during the run; expected no start_s / stop_s, or one of {}",
                        policy.name(),
                        lifecycle_policies().join(", ")
                    ),
                ));
            }
        }

        let index_of: HashMap<&str, usize> = vms.iter().enumerate().map(|(i, v)| (v.name.as_str(), i)).collect();
        let mut events = Vec::new();
        for (i, e) in f.event.iter().enumerate() {
            let at = |field: &str| format!("event[{i}].{field}");
            if !(e.at_s.is_finite() && e.at_s >= 0.0 && e.at_s <= horizon_s) {
                return Err(err(
                    at("at_s"),
                    format!(
                        "expected seconds in [0, run.horizon_s = {horizon_s}], got {}",
                        vsched_model::number(e.at_s)
                    ),
                ));
            }
            let vm = index_of.get(e.vm.as_str()).copied().ok_or_else(|| {
                let names: Vec<&str> = vms.iter().map(|v| v.name.as_str()).collect();
                err(at("vm"), format!("unknown VM {:?}; expected one of {}", e.vm, names.join(", ")))
            })?;
            events.push(EventSpec {
                at: vsched_engine::secs_to_ns(e.at_s),
                vm,
                vm_type: parse_type(&at("type"), &e.vm_type)?,
            });
        }
        // Ask the policy whether it can run these VMs (a gang scheduler cannot run a CON VM
        // wider than the host); a VM counts as CON if it is CON at any time.
        let ever_con: HashSet<usize> = events.iter().filter(|e| e.vm_type == VmType::Con).map(|e| e.vm).collect();
        let mut infos: Vec<Vec<DomainInfo>> = vec![Vec::new(); hosts];
        for (i, v) in vms.iter().enumerate() {
            infos[v.host].push(DomainInfo {
                name: v.name.clone(),
                vcpus: v.vcpus,
                weight: v.weight,
                cap: v.cap,
                vm_type: if ever_con.contains(&i) { VmType::Con } else { v.vm_type },
                first_vcpu: 0,
                online: true,
                driver: matches!(v.guest, Guest::Driver),
                rx_packets: 0,
                pv: v.pv,
                slice_request_ns: v.slice_request_ns,
            });
        }
        for (h, here) in infos.iter().enumerate() {
            built.admit(host.pcpus, here).map_err(|m| {
                let on = if hosts > 1 { format!(" (host {h})") } else { String::new() };
                err("scheduler.name", format!("policy {} cannot run this scenario{on}: {m}", policy.name()))
            })?;
        }
        Ok(Scenario {
            name: f.name.unwrap_or_else(|| "unnamed".to_string()),
            host,
            hosts,
            aligned_clocks,
            network,
            policy,
            vms,
            horizon: vsched_engine::secs_to_ns(horizon_s),
            until,
            seed: r.seed.unwrap_or(DEFAULT_SEED),
            reps,
            events,
        })
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
        let policies = (0..self.hosts).map(|_| self.policy.build_for_run()).collect();
        let mut sim = Simulation::cluster(self.host.clone(), self.network.clone(), domains, policies, seed);
        if self.aligned_clocks {
            sim.align_host_clocks();
        }
        for e in &self.events {
            sim.schedule_type_change(e.at, e.vm, e.vm_type);
        }
        sim
    }
}

/// What a VM table says about the VM itself (a `[[vm]]` or a `[[virtual_cluster]]`).
struct VmShape<'a> {
    vcpus: u32,
    weight: Option<u32>,
    cap: Option<u32>,
    vm_type: Option<&'a str>,
    tick: TickKeys<'a>,
    pv: PvKeys,
}

/// Checks a VM's shape and workload (built once with `ranks`, so that errors surface now);
/// the rest of the spec is left for the caller to fill in. With `charge = (budget, copies)`,
/// `copies` such VMs are charged to the memory budget first (see `footprint`).
fn vm_spec(
    at: &dyn Fn(&str) -> String,
    shape: VmShape,
    default_type: &str,
    workload: &WorkloadSection,
    ranks: Ranks,
    charge: Option<(&mut Budget, usize)>,
) -> Result<VmSpec, ConfigError> {
    let vcpus = shape.vcpus;
    if vcpus == 0 || vcpus > 1024 {
        return Err(err(at("vcpus"), format!("expected an integer in 1..=1024, got {vcpus}")));
    }
    let weight = shape.weight.unwrap_or(DEFAULT_WEIGHT);
    if weight == 0 || weight > MAX_WEIGHT {
        return Err(err(at("weight"), format!("expected an integer in 1..={MAX_WEIGHT}, got {weight}")));
    }
    let cap = shape.cap.unwrap_or(0);
    if cap > 100 * vcpus {
        return Err(err(
            at("cap"),
            format!("expected a percentage of one pCPU in 0..={} (100 × vcpus; 0 = no cap), got {cap}", 100 * vcpus),
        ));
    }
    let vm_type = parse_type(&at("type"), shape.vm_type.unwrap_or(default_type))?;
    let tick = guest_tick(at, &shape.tick)?;
    let (pv, slice_request_ns) = paravirt(at, &shape.pv)?;
    let info = vsched_workloads::find(&workload.kind).ok_or_else(|| {
        err(
            at("workload.kind"),
            format!("unknown workload {:?}; expected one of {}", workload.kind, vsched_workloads::names().join(", ")),
        )
    })?;
    let wpath = at("workload");
    let mut given = to_params(&wpath, &workload.params)?;
    let working_set_kb = given.remove(working_set::KEY);
    let params = Params::check(&wpath, info.params, &given)?;
    let (web, con) = (info.name == "web", vm_type == VmType::Con);
    match charge {
        // A rank's program may grow with its job (an all-to-all has a step per rank), so a
        // VM of a larger job is measured by one rank's program before all are built.
        Some((budget, copies)) if ranks.world > ranks.vcpus => {
            let one = Ranks { vcpus: 1, ..ranks };
            let footprint =
                VmFootprint::of(&(info.build)(&params, &one)?, 1, &one).times(ranks.vcpus).with_distributions(web, con);
            budget.vms(at, footprint, copies)?;
            (info.build)(&params, &ranks)?;
        }
        Some((budget, copies)) => {
            let guest = (info.build)(&params, &ranks)?.on_vcpus(vcpus as usize);
            let footprint = VmFootprint::of(&guest, vcpus as usize, &ranks).with_distributions(web, con);
            budget.vms(at, footprint, copies)?;
        }
        None => {
            (info.build)(&params, &ranks)?;
        }
    }
    let working_set_bytes = match working_set_kb {
        None => working_set::default_bytes(info.name, &params, &ranks),
        Some(Value::Int(kb)) if (0..=MAX_WORKING_SET_KB).contains(&kb) => kb as u64 * 1024,
        Some(other) => {
            return Err(err(
                format!("{wpath}.{}", working_set::KEY),
                format!("expected an integer number of KiB in 0..={MAX_WORKING_SET_KB}, got {other}"),
            ))
        }
    };
    Ok(VmSpec {
        name: String::new(),
        vcpus: vcpus as usize,
        weight,
        cap,
        vm_type,
        guest: Guest::Workload(info, params),
        pv,
        slice_request_ns,
        start: 0,
        stop: None,
        host: 0,
        job: None,
        ranks,
        working_set_bytes,
        tick,
    })
}

/// A link's bandwidth in Gbit/s, from a slow serial line (1 Mbit/s) to far beyond any NIC
/// or memory bus (10 Tbit/s): a slower one would take longer than the longest run per packet.
fn gbps(path: &str, v: Option<f64>, default: f64) -> Result<f64, ConfigError> {
    const RANGE: std::ops::RangeInclusive<f64> = 1e-3..=1e4;
    match v {
        None => Ok(default),
        Some(x) if x.is_finite() && RANGE.contains(&x) => Ok(x),
        Some(x) => {
            Err(err(path, format!("expected a number of Gbit/s in [0.001, 10000], got {}", vsched_model::number(x))))
        }
    }
}

fn network_config(n: &NetworkSection) -> Result<NetworkConfig, ConfigError> {
    let d = NetworkConfig::default();
    let mtu_bytes = n.mtu_bytes.unwrap_or(d.mtu_bytes);
    if !(64..=1 << 20).contains(&mtu_bytes) {
        return Err(err("network.mtu_bytes", format!("expected an integer in 64..=1048576, got {mtu_bytes}")));
    }
    Ok(NetworkConfig {
        latency_ns: micros("network.latency_us", n.latency_us, d.latency_ns)?,
        bandwidth_gbps: gbps("network.bandwidth_gbps", n.bandwidth_gbps, d.bandwidth_gbps)?,
        intra_host_latency_ns: micros(
            "network.intra_host_latency_us",
            n.intra_host_latency_us,
            d.intra_host_latency_ns,
        )?,
        intra_host_bandwidth_gbps: gbps(
            "network.intra_host_bandwidth_gbps",
            n.intra_host_bandwidth_gbps,
            d.intra_host_bandwidth_gbps,
        )?,
        shm_latency_ns: micros("network.shm_latency_us", n.shm_latency_us, d.shm_latency_ns)?,
        shm_bandwidth_gbps: gbps("network.shm_bandwidth_gbps", n.shm_bandwidth_gbps, d.shm_bandwidth_gbps)?,
        mtu_bytes,
        dom0_packet_ns: micros("network.dom0_packet_us", n.dom0_packet_us, d.dom0_packet_ns)?,
    })
}

/// The policy `[scheduler]` names, its parameters checked: a registered policy, or one that
/// `resolver` finds (an external name, see `external`). `xen_version` is the host's release,
/// the default of a registered policy that follows Xen's versions; `field` is where the name
/// was given, for errors.
fn policy_source(
    scheduler: &NamedSection,
    xen_version: Option<&str>,
    field: &str,
    resolver: Option<&dyn PolicyResolver>,
) -> Result<PolicySource, ConfigError> {
    let name = &scheduler.name;
    let mut given = to_params("scheduler", &scheduler.params)?;
    if is_external_name(name) {
        let resolver = resolver.ok_or_else(|| {
            err(field, format!("{name:?} names a policy written in Python, which only the Python package can load"))
        })?;
        return Ok(PolicySource::External(resolver.resolve(field, name, &given)?));
    }
    let info = vsched_policies::find(name).ok_or_else(|| {
        err(
            "scheduler.name",
            format!(
                "unknown policy {name:?}; expected one of {}, or a Python policy as path/to/file.py:ClassName",
                vsched_policies::names().join(", ")
            ),
        )
    })?;
    if let Some(version) = xen_version {
        if info.params.iter().any(|p| p.name == "xen_version") && !given.contains_key("xen_version") {
            given.insert("xen_version".into(), Value::Str(version.to_string()));
        }
    }
    let params = Params::check("scheduler", info.params, &given)?;
    Ok(PolicySource::Builtin { info, params })
}

/// Whether policy `info`, at its default parameters, handles VMs created and destroyed
/// during a run.
pub fn supports_vm_lifecycle(info: &vsched_model::PolicyInfo) -> bool {
    Params::check("scheduler", info.params, &BTreeMap::new())
        .and_then(|params| (info.build)(&params))
        .is_ok_and(|b| b.supports_vm_lifecycle())
}

/// The policies that handle VMs created and destroyed during a run.
fn lifecycle_policies() -> Vec<&'static str> {
    vsched_policies::REGISTRY.iter().filter(|p| supports_vm_lifecycle(p)).map(|p| p.name).collect()
}

fn parse_type(path: &str, s: &str) -> Result<VmType, ConfigError> {
    match s {
        "HIT" => Ok(VmType::Hit),
        "CON" => Ok(VmType::Con),
        other => Err(err(path, format!("expected \"HIT\" or \"CON\", got {other:?}"))),
    }
}

/// Repetitions must be at least one and at most [`MAX_REPS`].
pub fn check_reps(path: &str, reps: u32) -> Result<(), ConfigError> {
    if reps == 0 || reps > MAX_REPS {
        return Err(err(path, format!("expected an integer in 1..={MAX_REPS}, got {reps}")));
    }
    Ok(())
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
