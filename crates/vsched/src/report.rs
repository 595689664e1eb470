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

/// Per-VM and host means and standard deviations over the repetitions.
pub fn summarize(runs: &[RunRecord]) -> Json {
    let Some(first) = runs.first() else {
        return json!({ "vms": [], "host": {} });
    };
    let mut vms = Vec::new();
    for (i, vm) in first.metrics.vms.iter().enumerate() {
        let col = |f: &dyn Fn(&vsched_model::VmMetrics) -> Option<f64>| -> Vec<f64> {
            runs.iter().filter_map(|r| f(&r.metrics.vms[i])).collect()
        };
        let mut o = serde_json::Map::new();
        o.insert("name".into(), json!(vm.name));
        let completions = col(&|v| v.completion_s);
        o.insert("runs_finished".into(), json!(completions.len()));
        let unfinished = runs.iter().filter(|r| r.metrics.vms[i].finished == Some(false)).count();
        o.insert("runs_unfinished".into(), json!(unfinished));
        put_stats(&mut o, "completion_s", &completions);
        put_stats(&mut o, "cpu_s", &col(&|v| Some(v.cpu_s)));
        put_stats(&mut o, "cpu_share", &col(&|v| Some(v.cpu_share)));
        put_stats(&mut o, "entitled_share", &col(&|v| Some(v.entitled_share)));
        put_stats(&mut o, "spin_s", &col(&|v| Some(v.spin_s)));
        put_stats(&mut o, "steal_s", &col(&|v| Some(v.steal_s)));
        put_stats(&mut o, "spin_share", &col(&|v| v.spin_share));
        put_stats(&mut o, "lock_holder_preemptions", &col(&|v| Some(v.lock_holder_preemptions as f64)));
        put_stats(&mut o, "lock_waiter_preemptions", &col(&|v| Some(v.lock_waiter_preemptions as f64)));
        put_stats(&mut o, "ple_exits", &col(&|v| Some(v.ple_exits as f64)));
        put_stats(&mut o, "ipi_syncs", &col(&|v| Some(v.ipi_syncs as f64)));
        put_stats(&mut o, "pv_halts", &col(&|v| Some(v.pv_halts as f64)));
        put_stats(&mut o, "timer_wakes", &col(&|v| Some(v.timer_wakes as f64)));
        put_stats(&mut o, "wake_latency_us", &col(&|v| v.wake_latency_us_mean));
        put_stats(&mut o, "throughput_rps", &col(&|v| v.throughput_rps));
        put_stats(&mut o, "latency_ms", &col(&|v| v.latency_ms_mean));
        vms.push(Json::Object(o));
    }
    let hcol = |f: &dyn Fn(&vsched_model::HostMetrics) -> Option<f64>| -> Vec<f64> {
        runs.iter().filter_map(|r| f(&r.metrics.host)).collect()
    };
    let mut host = serde_json::Map::new();
    put_stats(&mut host, "utilization", &hcol(&|h| Some(h.utilization)));
    put_stats(&mut host, "frag_idle_s", &hcol(&|h| Some(h.frag_idle_s)));
    put_stats(&mut host, "context_switches", &hcol(&|h| Some(h.context_switches as f64)));
    put_stats(&mut host, "ipis", &hcol(&|h| Some(h.ipis as f64)));
    put_stats(&mut host, "fairness", &hcol(&|h| h.fairness));
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
