//! Scenario files: parsing, validation with one-line errors, and building simulations.
//!
//! Parsing goes in two steps so every error can name its place: TOML syntax first (errors
//! carry the line and column), then the typed structure (errors carry the field path, e.g.
//! `vm[1].weight`), then value checks (ranges, known names) with the same paths.

use std::collections::BTreeMap;

use serde::Deserialize;
use vsched_model::{ConfigError, DomainConfig, DomainInfo, HostConfig, Params, Simulation, Time, Until, Value, VmType};

/// Default VM weight (Xen's `CSCHED_DEFAULT_WEIGHT`).
pub const DEFAULT_WEIGHT: u32 = 256;
/// Xen accepts weights in 1..=65535.
const MAX_WEIGHT: u32 = 65_535;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: Option<String>,
    host: HostSection,
    scheduler: NamedSection,
    #[serde(default)]
    vm: Vec<VmSection>,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HostSection {
    pcpus: u32,
    cpu_ghz: Option<f64>,
    context_switch_us: Option<f64>,
    ipi_latency_us: Option<f64>,
    migration_penalty_us: Option<f64>,
    sched_cost_us: Option<f64>,
    ple_window_cycles: Option<u64>,
    ple_gap_cycles: Option<u64>,
    ple_grow: Option<u32>,
    ple_window_max_cycles: Option<u64>,
    ipi_handler_us: Option<f64>,
    spin_iteration_cycles: Option<u64>,
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
    start_s: Option<f64>,
    stop_s: Option<f64>,
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

/// A validated scenario: everything needed to build a run for any seed.
#[derive(Clone)]
pub struct Scenario {
    pub name: String,
    pub host: HostConfig,
    pub policy: &'static vsched_model::PolicyInfo,
    pub policy_params: Params,
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
    pub workload: &'static vsched_workloads::WorkloadInfo,
    pub workload_params: Params,
    pub pv_spinlocks: bool,
    /// Created at (0: from the start) and destroyed at (never if `None`).
    pub start: Time,
    pub stop: Option<Time>,
}

fn err(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
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

/// A non-negative, finite number of microseconds, as nanoseconds.
fn micros(path: &str, v: Option<f64>, default: Time) -> Result<Time, ConfigError> {
    match v {
        None => Ok(default),
        Some(x) if x.is_finite() && x >= 0.0 => Ok((x * 1_000.0).round() as Time),
        Some(x) => Err(err(path, format!("expected a finite number of microseconds >= 0, got {x}"))),
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
        let mut table: toml::Table = toml::from_str(text).map_err(|e| {
            let (line, col) = e.span().map_or((0, 0), |s| line_col(text, s.start));
            // toml's messages may span lines (expected-token lists); keep our one-line promise.
            let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
            err("", format!("malformed TOML at line {line}, column {col}: {message}"))
        })?;
        if let Some(name) = policy {
            if vsched_policies::find(name).is_none() {
                let known = vsched_policies::names().join(", ");
                return Err(err("--policy", format!("unknown policy {name:?}; expected one of {known}")));
            }
            let mut scheduler = toml::Table::new();
            scheduler.insert("name".into(), toml::Value::String(name.into()));
            table.insert("scheduler".into(), toml::Value::Table(scheduler));
        }
        let file: ScenarioFile = serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
            let path = e.path().to_string();
            let message = e.inner().message().split_whitespace().collect::<Vec<_>>().join(" ");
            // serde names Rust types; say what a user should write instead.
            let message = message
                .replace("expected u32", "expected a non-negative integer")
                .replace("expected u64", "expected a non-negative integer")
                .replace("expected f64", "expected a number");
            if path == "." {
                err("", message)
            } else {
                err(path, message)
            }
        })?;
        Self::validate(file)
    }

    fn validate(f: ScenarioFile) -> Result<Scenario, ConfigError> {
        let h = &f.host;
        if h.pcpus == 0 || h.pcpus > 4096 {
            return Err(err("host.pcpus", format!("expected an integer in 1..=4096, got {}", h.pcpus)));
        }
        let defaults = HostConfig::default();
        let cpu_ghz = h.cpu_ghz.unwrap_or(defaults.cpu_ghz);
        if !(cpu_ghz.is_finite() && cpu_ghz > 0.0) {
            return Err(err("host.cpu_ghz", format!("expected a number > 0, got {cpu_ghz}")));
        }
        let host = HostConfig {
            pcpus: h.pcpus as usize,
            cpu_ghz,
            context_switch_ns: micros("host.context_switch_us", h.context_switch_us, defaults.context_switch_ns)?,
            ipi_latency_ns: micros("host.ipi_latency_us", h.ipi_latency_us, defaults.ipi_latency_ns)?,
            migration_penalty_ns: micros(
                "host.migration_penalty_us",
                h.migration_penalty_us,
                defaults.migration_penalty_ns,
            )?,
            sched_cost_ns: micros("host.sched_cost_us", h.sched_cost_us, defaults.sched_cost_ns)?,
            ple_window_cycles: h.ple_window_cycles.unwrap_or(defaults.ple_window_cycles),
            ple_gap_cycles: h.ple_gap_cycles.unwrap_or(defaults.ple_gap_cycles),
            ple_grow: h.ple_grow.unwrap_or(defaults.ple_grow),
            ple_window_max_cycles: h.ple_window_max_cycles.unwrap_or(defaults.ple_window_max_cycles),
            ipi_handler_ns: micros("host.ipi_handler_us", h.ipi_handler_us, defaults.ipi_handler_ns)?,
            spin_iteration_cycles: h.spin_iteration_cycles.unwrap_or(defaults.spin_iteration_cycles),
        };
        if host.ple_grow == 0 || host.ple_grow > 64 {
            return Err(err(
                "host.ple_grow",
                format!("expected an integer in 1..=64 (1 = fixed window), got {}", host.ple_grow),
            ));
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
        if host.spin_iteration_cycles == 0 || host.spin_iteration_cycles > 1_000_000 {
            return Err(err(
                "host.spin_iteration_cycles",
                format!("expected an integer in 1..=1000000, got {}", host.spin_iteration_cycles),
            ));
        }

        let policy = vsched_policies::find(&f.scheduler.name).ok_or_else(|| {
            err(
                "scheduler.name",
                format!(
                    "unknown policy {:?}; expected one of {}",
                    f.scheduler.name,
                    vsched_policies::names().join(", ")
                ),
            )
        })?;
        let given = to_params("scheduler", &f.scheduler.params)?;
        let policy_params = Params::check("scheduler", policy.params, &given)?;
        // Build once now so range errors surface at validation time.
        let built = (policy.build)(&policy_params)?;

        if f.vm.is_empty() {
            return Err(err("vm", "expected at least one [[vm]] table"));
        }
        let mut vms = Vec::new();
        for (i, v) in f.vm.iter().enumerate() {
            let at = |field: &str| format!("vm[{i}].{field}");
            if v.name.is_empty() {
                return Err(err(at("name"), "expected a non-empty name"));
            }
            if f.vm[..i].iter().any(|w| w.name == v.name) {
                return Err(err(at("name"), format!("expected a unique name, {:?} is used twice", v.name)));
            }
            if v.vcpus == 0 || v.vcpus > 1024 {
                return Err(err(at("vcpus"), format!("expected an integer in 1..=1024, got {}", v.vcpus)));
            }
            let weight = v.weight.unwrap_or(DEFAULT_WEIGHT);
            if weight == 0 || weight > MAX_WEIGHT {
                return Err(err(at("weight"), format!("expected an integer in 1..={MAX_WEIGHT}, got {weight}")));
            }
            let cap = v.cap.unwrap_or(0);
            if cap > 100 * v.vcpus {
                return Err(err(
                    at("cap"),
                    format!(
                        "expected a percentage of one pCPU in 0..={} (100 × vcpus; 0 = no cap), got {cap}",
                        100 * v.vcpus
                    ),
                ));
            }
            let vm_type = parse_type(&at("type"), v.vm_type.as_deref().unwrap_or("HIT"))?;
            let workload = vsched_workloads::find(&v.workload.kind).ok_or_else(|| {
                err(
                    at("workload.kind"),
                    format!(
                        "unknown workload {:?}; expected one of {}",
                        v.workload.kind,
                        vsched_workloads::names().join(", ")
                    ),
                )
            })?;
            let wpath = at("workload");
            let given = to_params(&wpath, &v.workload.params)?;
            let workload_params = Params::check(&wpath, workload.params, &given)?;
            (workload.build)(&workload_params, &vsched_workloads::Ranks::alone(v.vcpus as usize))?;
            vms.push(VmSpec {
                name: v.name.clone(),
                vcpus: v.vcpus as usize,
                weight,
                cap,
                vm_type,
                workload,
                workload_params,
                pv_spinlocks: v.pv_spinlocks.unwrap_or(false),
                start: 0,
                stop: None,
            });
        }

        let r = &f.run;
        let horizon_s = r.horizon_s.unwrap_or(DEFAULT_HORIZON_S);
        if !(horizon_s.is_finite() && horizon_s > 0.0 && horizon_s <= 1e6) {
            return Err(err("run.horizon_s", format!("expected a number of seconds in (0, 1000000], got {horizon_s}")));
        }
        let until = match r.until.as_deref().unwrap_or("horizon") {
            "horizon" => Until::Horizon,
            "all_done" => Until::AllDone,
            other => return Err(err("run.until", format!("expected \"horizon\" or \"all_done\", got {other:?}"))),
        };
        let reps = r.reps.unwrap_or(1);
        check_reps("run.reps", reps)?;

        for (i, v) in f.vm.iter().enumerate() {
            let at = |field: &str| format!("vm[{i}].{field}");
            let start_s = v.start_s.unwrap_or(0.0);
            if !(start_s.is_finite() && (0.0..horizon_s).contains(&start_s)) {
                return Err(err(
                    at("start_s"),
                    format!("expected seconds in [0, run.horizon_s = {horizon_s}), got {start_s}"),
                ));
            }
            if let Some(stop_s) = v.stop_s {
                if !(stop_s.is_finite() && stop_s > start_s && stop_s <= horizon_s) {
                    return Err(err(
                        at("stop_s"),
                        format!("expected seconds in (start_s = {start_s}, run.horizon_s = {horizon_s}], got {stop_s}"),
                    ));
                }
            }
            vms[i].start = vsched_engine::secs_to_ns(start_s);
            vms[i].stop = v.stop_s.map(vsched_engine::secs_to_ns);
        }
        if !built.supports_vm_lifecycle() {
            if let Some(i) = vms.iter().position(|v| v.start > 0 || v.stop.is_some()) {
                let field = if vms[i].start > 0 { "start_s" } else { "stop_s" };
                return Err(err(
                    format!("vm[{i}].{field}"),
                    format!(
                        "policy {} does not support VMs created or destroyed during the run; expected no start_s / stop_s, or one of {}",
                        policy.name,
                        lifecycle_policies().join(", ")
                    ),
                ));
            }
        }

        let mut events = Vec::new();
        for (i, e) in f.event.iter().enumerate() {
            let at = |field: &str| format!("event[{i}].{field}");
            if !(e.at_s.is_finite() && e.at_s >= 0.0 && e.at_s <= horizon_s) {
                return Err(err(
                    at("at_s"),
                    format!("expected seconds in [0, run.horizon_s = {horizon_s}], got {}", e.at_s),
                ));
            }
            let vm = vms.iter().position(|v| v.name == e.vm).ok_or_else(|| {
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
        let infos: Vec<DomainInfo> = vms
            .iter()
            .enumerate()
            .map(|(i, v)| DomainInfo {
                name: v.name.clone(),
                vcpus: v.vcpus,
                weight: v.weight,
                cap: v.cap,
                vm_type: if events.iter().any(|e| e.vm == i && e.vm_type == VmType::Con) {
                    VmType::Con
                } else {
                    v.vm_type
                },
                first_vcpu: 0,
                online: true,
                rx_packets: 0,
            })
            .collect();
        built
            .admit(host.pcpus, &infos)
            .map_err(|m| err("scheduler.name", format!("policy {} cannot run this scenario: {m}", policy.name)))?;
        Ok(Scenario {
            name: f.name.unwrap_or_else(|| "unnamed".to_string()),
            host,
            policy,
            policy_params,
            vms,
            horizon: vsched_engine::secs_to_ns(horizon_s),
            until,
            seed: r.seed.unwrap_or(1),
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
                workload: v.workload.name.to_string(),
                guest: (v.workload.build)(&v.workload_params, &vsched_workloads::Ranks::alone(v.vcpus)).expect("validated"),
                pv_spinlocks: v.pv_spinlocks,
                start_at: v.start,
                stop_at: v.stop,
            })
            .collect();
        let policy = (self.policy.build)(&self.policy_params).expect("validated");
        let mut sim = Simulation::new(self.host.clone(), domains, policy, seed);
        for e in &self.events {
            sim.schedule_type_change(e.at, e.vm, e.vm_type);
        }
        sim
    }
}

/// The policies that handle VMs created and destroyed during a run.
fn lifecycle_policies() -> Vec<&'static str> {
    vsched_policies::REGISTRY
        .iter()
        .filter(|p| {
            Params::check("scheduler", p.params, &BTreeMap::new())
                .and_then(|params| (p.build)(&params))
                .is_ok_and(|b| b.supports_vm_lifecycle())
        })
        .map(|p| p.name)
        .collect()
}

fn parse_type(path: &str, s: &str) -> Result<VmType, ConfigError> {
    match s {
        "HIT" => Ok(VmType::Hit),
        "CON" => Ok(VmType::Con),
        other => Err(err(path, format!("expected \"HIT\" or \"CON\", got {other:?}"))),
    }
}

/// Repetitions must be at least one (and a sane upper bound keeps typos from running forever).
pub fn check_reps(path: &str, reps: u32) -> Result<(), ConfigError> {
    if reps == 0 || reps > 100_000 {
        return Err(err(path, format!("expected an integer in 1..=100000, got {reps}")));
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
        let e = error_of(&MINIMAL.replace("kind = \"cpu_hog\"", "kind = \"spinlock\"\nlock_kind = \"mcs\""));
        assert_eq!(e, "vm[0].workload.lock_kind: expected one of \"ticket\", \"tas\", got \"mcs\"");
    }
}
