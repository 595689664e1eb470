//! Runs a scenario's repetitions and renders the JSON report.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use vsched_model::{RunError, RunMetrics, Span, SpanSink, Until};

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
        put_stats(&mut o, "completion_s", &completions);
        put_stats(&mut o, "cpu_s", &col(&|v| Some(v.cpu_s)));
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
/// the first repetition streams at most `limit` run intervals into `sink` as they close,
/// and the trace is finished (`SpanSink::finish`) as soon as that repetition ends.
pub fn run_reps(
    scenario: &Scenario,
    seed: u64,
    reps: u32,
    mut trace: Option<(usize, Box<dyn SpanSink>)>,
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

/// Writes a trace as Chrome trace-event JSON (opens in Perfetto and chrome://tracing) while
/// the run goes: one thread per pCPU, one complete ("X") event per run interval, category
/// `run` or `spin`. The file is `{"displayTimeUnit": "ms", "traceEvents": [...], "otherData":
/// {...}}`: `otherData` holds the run's description and the span counts, known only at the
/// end, so it comes after the events (JSON objects are unordered; Perfetto reads `otherData`
/// in either place). Each event is written as `serde_json` writes a `json!` object (keys in
/// order), so the events are byte for byte what the whole-document renderer wrote before.
pub struct TraceJsonWriter<W: Write> {
    out: W,
    /// Each VM's name, by global domain id.
    vms: Vec<String>,
    /// `otherData` without the counts.
    other: serde_json::Map<String, Json>,
    /// Reused for each event's "<vm>.v<index>".
    name: String,
}

#[derive(Serialize)]
struct ThreadName<'a> {
    args: NameArg<'a>,
    name: &'static str,
    ph: &'static str,
    pid: u32,
    tid: usize,
}

#[derive(Serialize)]
struct NameArg<'a> {
    name: &'a str,
}

/// A complete event; fields in key order, as `json!` (a sorted map) writes them.
#[derive(Serialize)]
struct Complete<'a> {
    args: SpanArgs<'a>,
    cat: &'static str,
    dur: f64,
    name: &'a str,
    ph: &'static str,
    pid: u32,
    tid: usize,
    ts: f64,
}

#[derive(Serialize)]
struct SpanArgs<'a> {
    vcpu: usize,
    vm: &'a str,
}

impl<W: Write> TraceJsonWriter<W> {
    /// Writes the document's head and one thread-name event per pCPU row into `out`.
    pub fn new(mut out: W, scenario: &Scenario, seed: u64, limit: usize) -> io::Result<Self> {
        out.write_all(br#"{"displayTimeUnit":"ms","traceEvents":["#)?;
        // One row per pCPU; on a cluster, host h's pCPU i is row h × pcpus + i.
        let pcpus = scenario.host.pcpus;
        for p in 0..pcpus * scenario.hosts {
            let name = if scenario.hosts == 1 {
                format!("pCPU {p}")
            } else {
                format!("host {} pCPU {}", p / pcpus, p % pcpus)
            };
            if p > 0 {
                out.write_all(b",")?;
            }
            let event = ThreadName { args: NameArg { name: &name }, name: "thread_name", ph: "M", pid: 0, tid: p };
            serde_json::to_writer(&mut out, &event)?;
        }
        let vms: Vec<String> = scenario.vms.iter().map(|v| v.name.clone()).collect();
        let other = json!({
            "scenario": scenario.name,
            "policy": scenario.policy.name(),
            "seed": seed,
            "pcpus": scenario.host.pcpus,
            "vms": vms,
            "span_limit": limit,
        });
        let Json::Object(other) = other else { unreachable!("json! of an object") };
        Ok(TraceJsonWriter { out, vms, other, name: String::new() })
    }
}

impl<W: Write> SpanSink for TraceJsonWriter<W> {
    fn span(&mut self, s: &Span) -> io::Result<()> {
        let vm = &self.vms[s.dom];
        self.name.clear();
        write!(self.name, "{vm}.v{}", s.index).expect("writing to a String");
        // Every trace has at least one thread-name event before its spans.
        self.out.write_all(b",")?;
        let event = Complete {
            args: SpanArgs { vcpu: s.index, vm },
            cat: if s.spinning { "spin" } else { "run" },
            dur: (s.end - s.start) as f64 / 1e3,
            name: &self.name,
            ph: "X",
            pid: 0,
            tid: s.pcpu,
            ts: s.start as f64 / 1e3,
        };
        serde_json::to_writer(&mut self.out, &event)?;
        Ok(())
    }

    fn finish(&mut self, spans: u64, dropped: u64) -> io::Result<()> {
        let mut other = std::mem::take(&mut self.other);
        other.insert("spans".into(), json!(spans));
        other.insert("dropped_spans".into(), json!(dropped));
        self.out.write_all(br#"],"otherData":"#)?;
        serde_json::to_writer(&mut self.out, &other)?;
        self.out.write_all(b"}")?;
        self.out.flush()
    }
}
