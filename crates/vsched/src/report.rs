//! Runs a scenario's repetitions and renders the JSON report.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use vsched_model::{RunError, RunMetrics, TraceSink, Until};

use crate::scenario::Scenario;

/// One repetition: its seed, the metrics, and how long it took on the wall clock. It reads
/// back from the report's JSON exactly (floats are written in their shortest exact form), so
/// repetitions run in separate processes combine into the report one process would write
/// ([`crate::combine_reports_json`]).
#[derive(Serialize, Deserialize)]
pub struct RunRecord {
    pub seed: u64,
    pub wall_s: f64,
    #[serde(flatten)]
    pub metrics: RunMetrics,
}

/// Mean and sample standard deviation (0 for a single value); `None` for no values.
pub fn mean_std(xs: &[f64]) -> Option<(f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 { xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    Some((mean, var.sqrt()))
}

fn put_stats(obj: &mut serde_json::Map<String, Json>, key: &str, xs: &[f64]) {
    let (m, s) = match mean_std(xs) {
        Some((m, s)) => (json!(m), json!(s)),
        None => (Json::Null, Json::Null),
    };
    obj.insert(format!("{key}_mean"), m);
    obj.insert(format!("{key}_std"), s);
}

/// Per-VM fields that describe the VM rather than measure the run, and the `finished` flag
/// (null for a workload that never ends): not averaged.
const VM_CONFIG_FIELDS: &[&str] = &[
    "name",
    "workload",
    "type",
    "vcpus",
    "weight",
    "cap",
    "host",
    "virtual_cluster",
    "created_s",
    "destroyed_s",
    "finished",
];
/// Host fields that describe the host rather than measure the run.
const HOST_CONFIG_FIELDS: &[&str] = &["pcpus"];

/// The summary's name of a run metric: `x_mean` (a run's own mean, such as
/// `wake_latency_us_mean`) is summarized as `x` (`wake_latency_us_mean`, `wake_latency_us_std`).
fn summary_name(key: &str) -> &str {
    key.strip_suffix("_mean").unwrap_or(key)
}

/// Mean and standard deviation of every numeric field of the objects `records` (one per run,
/// the same serialized struct), except `skip`: a field added to the metrics is summarized
/// without a change here. Nulls (a metric that does not apply to a run) are left out of the
/// statistics; nested tables of counters (`policy_counters`) are summarized name by name, a
/// counter missing from a run counting 0 there (a policy counts only what happened).
fn put_numeric_stats(obj: &mut serde_json::Map<String, Json>, records: &[Json], skip: &[&str]) {
    let Some(Json::Object(first)) = records.first() else { return };
    for key in first.keys() {
        if skip.contains(&key.as_str()) || obj.contains_key(key) {
            continue;
        }
        let values: Vec<&Json> = records.iter().filter_map(|r| r.get(key)).collect();
        if values.iter().all(|v| v.is_number() || v.is_null()) {
            let xs: Vec<f64> = values.iter().filter_map(|v| v.as_f64()).collect();
            put_stats(obj, summary_name(key), &xs);
        } else if values.iter().all(|v| v.is_object()) {
            let names: std::collections::BTreeSet<&String> =
                values.iter().filter_map(|v| v.as_object()).flat_map(|counters| counters.keys()).collect();
            let mut nested = serde_json::Map::new();
            for name in names {
                let count = |r: &Json| r.get(key).and_then(|c| c.get(name)).and_then(Json::as_f64).unwrap_or(0.0);
                put_stats(&mut nested, name, &records.iter().map(count).collect::<Vec<f64>>());
            }
            obj.insert(key.clone(), Json::Object(nested));
        }
        // Flags (`finished`) and distributions (`*_quantiles`) are not averaged.
    }
}

/// A run's metrics as JSON, to be summarized field by field.
fn as_json(metrics: &impl Serialize) -> Json {
    serde_json::to_value(metrics).expect("metrics serialize to JSON")
}

/// Per-VM and host means and standard deviations over the repetitions: every metric the runs
/// report (`completion_s`, `co_launches`, `host.migrations`, `host.policy_counters`, ...).
pub fn summarize(runs: &[RunRecord]) -> Json {
    let Some(first) = runs.first() else {
        return json!({ "vms": [], "host": {} });
    };
    let mut vms = Vec::new();
    for (i, vm) in first.metrics.vms.iter().enumerate() {
        let mut o = serde_json::Map::new();
        o.insert("name".into(), json!(vm.name));
        let completions: Vec<f64> = runs.iter().filter_map(|r| r.metrics.vms[i].completion_s).collect();
        o.insert("runs_finished".into(), json!(completions.len()));
        let unfinished = runs.iter().filter(|r| r.metrics.vms[i].finished == Some(false)).count();
        o.insert("runs_unfinished".into(), json!(unfinished));
        let records: Vec<Json> = runs.iter().map(|r| as_json(&r.metrics.vms[i])).collect();
        put_numeric_stats(&mut o, &records, VM_CONFIG_FIELDS);
        vms.push(Json::Object(o));
    }
    let mut host = serde_json::Map::new();
    let records: Vec<Json> = runs.iter().map(|r| as_json(&r.metrics.host)).collect();
    put_numeric_stats(&mut host, &records, HOST_CONFIG_FIELDS);
    let mut doc = json!({ "vms": vms, "host": Json::Object(host) });
    if !first.metrics.virtual_clusters.is_empty() {
        let clusters: Vec<Json> = first
            .metrics
            .virtual_clusters
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let completions: Vec<f64> =
                    runs.iter().filter_map(|r| r.metrics.virtual_clusters[i].completion_s).collect();
                let mut o = serde_json::Map::new();
                o.insert("name".into(), json!(c.name));
                o.insert("workload".into(), json!(c.workload));
                o.insert("ranks".into(), json!(c.ranks));
                o.insert("runs_finished".into(), json!(completions.len()));
                put_stats(&mut o, "completion_s", &completions);
                Json::Object(o)
            })
            .collect();
        doc["virtual_clusters"] = json!(clusters);
    }
    if runs.iter().any(|r| r.metrics.network.is_some()) {
        let ncol = |f: &dyn Fn(&vsched_model::NetworkMetrics) -> Option<f64>| -> Vec<f64> {
            runs.iter().filter_map(|r| r.metrics.network.as_ref().and_then(f)).collect()
        };
        let mut net = serde_json::Map::new();
        put_stats(&mut net, "messages", &ncol(&|n| Some(n.messages as f64)));
        put_stats(&mut net, "packets", &ncol(&|n| Some(n.packets as f64)));
        put_stats(&mut net, "driver_passes", &ncol(&|n| Some(n.driver_passes as f64)));
        put_stats(&mut net, "message_latency_us", &ncol(&|n| n.message_latency_us_mean));
        doc["network"] = Json::Object(net);
    }
    if runs.iter().any(|r| r.metrics.io.is_some()) {
        let icol = |f: &dyn Fn(&vsched_model::IoMetrics) -> Option<f64>| -> Vec<f64> {
            runs.iter().filter_map(|r| r.metrics.io.as_ref().and_then(f)).collect()
        };
        let mut io = serde_json::Map::new();
        put_stats(&mut io, "disk_requests", &icol(&|i| Some(i.disk_requests as f64)));
        put_stats(&mut io, "disk_latency_ms", &icol(&|i| i.disk_latency_ms_mean));
        doc["io"] = Json::Object(io);
    }
    doc
}

/// Why repetitions stopped.
#[derive(Debug)]
pub enum RunFailure {
    /// The simulator's error (a policy's unusable decision, a guest's, a stall, or an
    /// interruption).
    Run(RunError),
    /// The trace's sink could not write.
    Trace(std::io::Error),
}

/// Runs every repetition of `scenario`. `on_progress(rep, sim_ns)` is called every few
/// thousand events and stops everything by returning `false`. With `trace = (limit, sink)`
/// the first repetition streams at most `limit` trace events into `sink` as they are
/// recorded, and the trace is finished (`TraceSink::finish`) as soon as that repetition ends.
pub fn run_reps(
    scenario: &Scenario,
    seed: u64,
    reps: u32,
    mut trace: Option<(usize, Box<dyn TraceSink>)>,
    checks: bool,
    on_progress: &mut dyn FnMut(u32, u64) -> bool,
) -> Result<Vec<RunRecord>, RunFailure> {
    let mut records = Vec::new();
    for rep in 0..reps {
        let run_seed = seed.wrapping_add(rep as u64);
        let mut sim = scenario.build(run_seed);
        if let Some((limit, sink)) = trace.take() {
            sim.stream_trace(limit, sink);
        }
        if checks {
            sim.enable_checks();
        }
        let started = Instant::now();
        let result = sim.run(scenario.horizon, scenario.until, &mut |now| on_progress(rep, now));
        let wall_s = started.elapsed().as_secs_f64();
        // A write error is the cause of the run's end if it ended early, so it comes first.
        if let Some(t) = sim.take_trace() {
            t.finish().map_err(RunFailure::Trace)?;
        }
        let metrics = result.map_err(RunFailure::Run)?;
        records.push(RunRecord { seed: run_seed, wall_s, metrics });
    }
    Ok(records)
}

/// The whole JSON report.
pub fn document(scenario: &Scenario, seed: u64, reps: u32, runs: &[RunRecord]) -> Json {
    json!({
        "scenario": scenario.name,
        "policy": scenario.policy.name(),
        "pcpus": scenario.host.pcpus,
        "hosts": scenario.hosts,
        "horizon_s": vsched_engine::ns_to_secs(scenario.horizon),
        "until": match scenario.until { Until::Horizon => "horizon", Until::AllDone => "all_done" },
        "seed": seed,
        "reps": reps,
        "runs": runs,
        "summary": summarize(runs),
    })
}
