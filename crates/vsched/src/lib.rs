//! vsched facade: the one crate the Python bindings (and Rust users) call.
//!
//! It turns scenario text into simulations, runs repetitions and renders the JSON report.
//! The PyO3 layer depends on exactly these items:
//! - [`run_scenario_json`], [`validate_scenario`], [`apply_overrides_json`], [`policies_json`],
//!   [`workloads_json`], [`bench_json`], [`scenario_toml_from_json`], [`combine_reports_json`],
//!   [`DEFAULT_SCENARIO`], [`Error`];
//! - for policies written in Python: [`run_scenario_json_with`], [`validate_scenario_with`] and
//!   the traits of [`external`] they take.

mod bench;
mod bench_scale;
pub mod external;
mod footprint;
mod guest_kernel;
mod halt_poll;
mod host;
pub mod overrides;
mod paravirt;
pub mod policy_spec;
pub mod report;
pub mod scenario;
mod sched_gran;
pub mod trace_json;

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

pub use bench::{
    bench_draws_json, bench_file_json, bench_file_json_with, bench_json, bench_json_with, MAX_BENCH_COPIES,
    MAX_BENCH_DRAWS, MAX_BENCH_RUNS,
};
pub use bench_scale::{
    bench_scale_json, bench_scale_json_with, scale_scenario_names, scale_scenario_toml, MAX_SCALE_RUNS,
};
pub use external::{ExternalPolicy, PolicyResolver, PolicySource};
pub use scenario::Scenario;

/// The embedded default scenario that `vsched demo` runs (scenarios/demo.toml).
pub const DEFAULT_SCENARIO: &str = include_str!("../../../scenarios/demo.toml");
/// The demo's baseline: its spinlock VM without the hogs (scenarios/demo-alone.toml).
pub const DEFAULT_BASELINE_SCENARIO: &str = include_str!("../../../scenarios/demo-alone.toml");
/// The standard benchmark scenario of `vsched bench` (scenarios/bench.toml).
pub const BENCH_SCENARIO: &str = include_str!("../../../scenarios/bench.toml");
/// Default bound on the number of trace events written. It bounds the file (about 110 bytes
/// an event), not memory: events are written as they are recorded.
pub const DEFAULT_TRACE_LIMIT: usize = 1_000_000;
/// The trace file's write buffer: large enough that writes are few, small beside a run.
const TRACE_BUFFER_BYTES: usize = 1 << 16;
/// Default memory budget of one run: what the scenario's estimate must fit (`--max-memory`).
pub const DEFAULT_MAX_MEMORY: u64 = 4 << 30;

/// Options given on the command line that override the scenario's `[run]` table.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub seed: Option<u64>,
    pub reps: Option<u32>,
    /// Run under this policy instead of the scenario's `[scheduler]`: at its default parameters,
    /// or those it names (`credit(tslice_ms=10)`, [`policy_spec`]).
    pub policy: Option<String>,
    pub trace_path: Option<PathBuf>,
    /// Maximum number of trace events written (0 = [`DEFAULT_TRACE_LIMIT`]).
    pub trace_limit: usize,
    /// Run the simulator's invariant checks after every event (`--check`), as debug builds do.
    pub check: bool,
    /// The memory budget a scenario's estimate must fit, in bytes (0 = [`DEFAULT_MAX_MEMORY`]).
    pub max_memory: u64,
}

/// A progress report, emitted at most every 100 ms of wall-clock time while runs go on.
/// The callback returns `false` to stop the run ([`Error::Interrupted`]).
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub rep: u32,
    pub reps: u32,
    pub sim_s: f64,
    pub horizon_s: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Bad input: one line naming the field path and what was expected.
    Scenario(String),
    /// A file could not be written (trace).
    Io(String),
    /// A policy made an unusable decision (a bug in the policy, not in the input).
    Policy(String),
    /// The progress callback asked to stop.
    Interrupted,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Scenario(m) | Error::Io(m) | Error::Policy(m) => f.write_str(m),
            Error::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for Error {}

fn parse(text: &str) -> Result<Scenario, Error> {
    Scenario::parse(text).map_err(|e| Error::Scenario(e.to_string()))
}

/// Checks a scenario without running it, including that its estimated memory fits
/// `max_memory` bytes (0 = [`DEFAULT_MAX_MEMORY`]).
pub fn validate_scenario(toml_text: &str, max_memory: u64) -> Result<(), Error> {
    validate_scenario_with(toml_text, max_memory, None)
}

/// As [`validate_scenario`], with `resolver` finding the policies that are not in the registry.
pub fn validate_scenario_with(
    toml_text: &str,
    max_memory: u64,
    resolver: Option<&dyn PolicyResolver>,
) -> Result<(), Error> {
    Scenario::parse_with_resolver(toml_text, None, max_memory, resolver)
        .map(|_| ())
        .map_err(|e| Error::Scenario(e.to_string()))
}

/// As [`validate_scenario_with`], returning the memory a run of the scenario is estimated to
/// hold, in bytes: what runs in parallel multiply (`vsched sweep --jobs`).
pub fn estimate_memory_with(
    toml_text: &str,
    max_memory: u64,
    resolver: Option<&dyn PolicyResolver>,
) -> Result<u64, Error> {
    Scenario::parse_with_resolver(toml_text, None, max_memory, resolver)
        .map(|scenario| scenario.memory_estimate)
        .map_err(|e| Error::Scenario(e.to_string()))
}

/// Runs a scenario (all its repetitions) and returns the JSON report as text.
pub fn run_scenario_json(
    toml_text: &str,
    opts: &RunOptions,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<String, Error> {
    run_scenario_json_with(toml_text, opts, None, progress)
}

/// As [`run_scenario_json`], with `resolver` finding the policies that are not in the
/// registry (policies written in Python: see [`external`]).
pub fn run_scenario_json_with(
    toml_text: &str,
    opts: &RunOptions,
    resolver: Option<&dyn PolicyResolver>,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<String, Error> {
    let scenario = Scenario::parse_with_resolver(toml_text, opts.policy.as_deref(), opts.max_memory, resolver)
        .map_err(|e| Error::Scenario(e.to_string()))?;
    let seed = opts.seed.unwrap_or(scenario.seed);
    let reps = opts.reps.unwrap_or(scenario.reps);
    scenario::check_reps("--reps", reps).map_err(|e| Error::Scenario(e.to_string()))?;
    let limit = if opts.trace_limit == 0 { DEFAULT_TRACE_LIMIT } else { opts.trace_limit };
    let horizon_s = vsched_engine::ns_to_secs(scenario.horizon);
    let mut last = Instant::now();
    let mut on_progress = |rep: u32, now: u64| {
        if last.elapsed() < Duration::from_millis(100) {
            return true;
        }
        last = Instant::now();
        progress(Progress { rep, reps, sim_s: vsched_engine::ns_to_secs(now), horizon_s })
    };
    // The trace streams into its file while the first repetition runs (memory stays flat
    // whatever the limit); the file is opened first, so an unwritable path fails at once.
    let io_error = |path: &Path, e: std::io::Error| Error::Io(format!("{}: {e}", path.display()));
    let trace = match &opts.trace_path {
        Some(path) => {
            let file = File::create(path).map_err(|e| io_error(path, e))?;
            let out = BufWriter::with_capacity(TRACE_BUFFER_BYTES, file);
            let writer =
                trace_json::TraceJsonWriter::new(out, &scenario, seed, limit).map_err(|e| io_error(path, e))?;
            Some((limit, Box::new(writer) as Box<dyn vsched_model::TraceSink>))
        }
        None => None,
    };
    let runs = report::run_reps(&scenario, seed, reps, trace, opts.check, &mut on_progress).map_err(|failure| {
        // A failed run leaves no half-written trace behind (it would not even be JSON), as
        // before traces streamed; only a regular file is removed, never a device or a pipe
        // (`--trace /dev/stdout`) or what a symbolic link points to.
        if let Some(path) = &opts.trace_path {
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
                let _ = std::fs::remove_file(path);
            }
        }
        match failure {
            report::RunFailure::Run(error) => run_error(&scenario, error),
            report::RunFailure::Trace(e) => io_error(opts.trace_path.as_deref().expect("traced"), e),
        }
    })?;
    Ok(report::document(&scenario, seed, reps, &runs).to_string())
}

/// A run's failure as the facade reports it, naming the policy where it is to blame.
fn run_error(scenario: &Scenario, error: vsched_model::RunError) -> Error {
    use vsched_model::RunError as R;
    match error {
        R::Interrupted => Error::Interrupted,
        R::Policy(m) => Error::Policy(format!("policy {}: {m}", scenario.policy.name())),
        R::Scenario(m) => Error::Scenario(m),
        R::Workload(m) => Error::Policy(m),
        // The sink's own I/O error is reported instead (`run_reps` checks it first).
        R::TraceSink => Error::Io(error.to_string()),
    }
}

/// A scenario's text with `[scheduler]` replaced by `policy` (when given) and each dotted key
/// of `overrides` set, its value given as JSON text (see [`overrides`] for the rules).
pub fn apply_overrides_json(
    toml_text: &str,
    policy: Option<&str>,
    overrides: &[(String, String)],
) -> Result<String, Error> {
    let scenario_error = |e: vsched_model::ConfigError| Error::Scenario(e.to_string());
    let values = overrides
        .iter()
        .map(|(key, json)| Ok((key.clone(), overrides::value_from_json_text(key, json)?)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(scenario_error)?;
    overrides::apply_overrides(toml_text, policy, &values).map_err(scenario_error)
}

/// The TOML text of a scenario given as a JSON object (how `vsched.Scenario` crosses over from
/// Python), written by the same writer as [`apply_overrides_json`]; not validated.
pub fn scenario_toml_from_json(json_text: &str) -> Result<String, Error> {
    let scenario_error = |e: vsched_model::ConfigError| Error::Scenario(e.to_string());
    let toml::Value::Table(table) = overrides::value_from_json_text("scenario", json_text).map_err(scenario_error)?
    else {
        return Err(Error::Scenario("scenario: expected a table of the scenario's keys".into()));
    };
    toml::to_string(&table).map_err(|e| Error::Scenario(format!("scenario: cannot be written as TOML: {e}")))
}

/// The report of the repetitions in `reports`, each the JSON report of one repetition of the
/// scenario `toml_text` (run with `policy`, as [`run_scenario_json`] with `reps = 1`), the
/// i-th with seed `seed + i`: the text [`run_scenario_json`] writes for all of them in one
/// process (`vsched run --jobs`), wall-clock times apart.
pub fn combine_reports_json(
    toml_text: &str,
    policy: Option<&str>,
    max_memory: u64,
    seed: u64,
    reports: &[String],
    resolver: Option<&dyn PolicyResolver>,
) -> Result<String, Error> {
    #[derive(serde::Deserialize)]
    struct OneRepetition {
        runs: Vec<report::RunRecord>,
    }
    let scenario = Scenario::parse_with_resolver(toml_text, policy, max_memory, resolver)
        .map_err(|e| Error::Scenario(e.to_string()))?;
    let reps = u32::try_from(reports.len()).unwrap_or(u32::MAX);
    scenario::check_reps("reps", reps).map_err(|e| Error::Scenario(e.to_string()))?;
    let mut runs = Vec::with_capacity(reports.len());
    for (i, text) in reports.iter().enumerate() {
        let bad = |why: String| Error::Scenario(format!("reports[{i}]: {why}"));
        let one: OneRepetition =
            serde_json::from_str(text).map_err(|e| bad(format!("expected a report of vsched: {e}")))?;
        let [run]: [report::RunRecord; 1] = one
            .runs
            .try_into()
            .map_err(|runs: Vec<_>| bad(format!("expected the report of one repetition, got {}", runs.len())))?;
        let expected = seed.wrapping_add(i as u64);
        if run.seed != expected {
            return Err(bad(format!("expected the repetition of seed {expected}, got seed {}", run.seed)));
        }
        runs.push(run);
    }
    Ok(report::document(&scenario, seed, reps, &runs).to_string())
}

/// Every policy with its description and parameters, as JSON.
pub fn policies_json() -> String {
    let list: Vec<_> = vsched_policies::REGISTRY
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "description": p.description,
                "hypervisor": p.hypervisor.name(),
                "base": vsched_policies::base_of(p.name),
                "vm_lifecycle": scenario::supports_vm_lifecycle(p),
                "params": params_json(p.params),
            })
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// Every workload with its description, the workloads.md rows it models and its parameters.
pub fn workloads_json() -> String {
    let list: Vec<_> = vsched_workloads::REGISTRY
        .iter()
        .map(|w| json!({"name": w.name, "description": w.description, "models": w.models, "params": params_json(w.params)}))
        .collect();
    serde_json::Value::Array(list).to_string()
}

fn params_json(specs: &[vsched_model::ParamSpec]) -> serde_json::Value {
    use vsched_model::{ParamDefault as D, ParamRange as R};
    specs
        .iter()
        .map(|s| {
            let default = match s.default {
                D::Int(i) => json!(i),
                D::Float(x) => json!(x),
                D::Bool(b) => json!(b),
                D::Str(t) => json!(t),
            };
            let (min, max) = match s.range {
                R::Any => (json!(null), json!(null)),
                R::Int { min, max } => (json!(min), json!(max)),
                R::Float { min, max } => (json!(min), json!(max)),
            };
            json!({"name": s.name, "default": default, "min": min, "max": max, "doc": s.doc})
        })
        .collect()
}
