//! `--trace`: events stream into the file as they are recorded, within the limit, in the
//! documented Chrome trace-event format; a write error ends the run with `Error::Io`. What
//! the events show in Perfetto is tested in `perfetto.rs`.

mod common;

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde_json::Value;
use vsched::{Error, RunOptions, Scenario};
use vsched_model::{TraceEvent, TraceSink};

/// scenarios/lhp-demo.toml (a spinlock VM beside three hogs on 4 pCPUs, no driver domain), cut to 2 simulated seconds.
fn demo() -> String {
    include_str!("../../../scenarios/lhp-demo.toml")
        .replace("horizon_s = 300", "horizon_s = 2")
        .replace("until = \"all_done\"", "")
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("vsched-test-{}-{name}", std::process::id()))
}

fn run_traced(toml: &str, path: &Path, limit: usize) -> Result<String, Error> {
    let opts = RunOptions {
        seed: Some(3),
        reps: Some(2),
        trace_path: Some(path.into()),
        trace_limit: limit,
        ..Default::default()
    };
    vsched::run_scenario_json(toml, &opts, &mut |_| true)
}

fn without_wall_clock(text: &str) -> Value {
    let mut doc: Value = serde_json::from_str(text).unwrap();
    for run in doc["runs"].as_array_mut().unwrap() {
        run.as_object_mut().unwrap().remove("wall_s");
    }
    doc
}

/// Whole nanoseconds of a time the trace gives in µs: truncating, as the most lossy reader
/// does; the file's times read back exactly that way too.
fn nanos(us: &Value) -> u64 {
    (us.as_f64().unwrap() * 1e3) as u64
}

/// The pCPU rows' run intervals of a trace file, as (pCPU, start ns, duration ns, spinning,
/// VM, vCPU).
fn intervals(doc: &Value) -> Vec<(u64, u64, u64, bool, String, u64)> {
    doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && (e["cat"] == "run" || e["cat"] == "spin"))
        .map(|e| {
            let (vm, vcpu) = (e["args"]["vm"].as_str().unwrap().to_string(), e["args"]["vcpu"].as_u64().unwrap());
            assert_eq!(e["name"], format!("{vm}.v{vcpu}"));
            assert_eq!(e["pid"], 0);
            (e["tid"].as_u64().unwrap(), nanos(&e["ts"]), nanos(&e["dur"]), e["cat"] == "spin", vm, vcpu)
        })
        .collect()
}

#[test]
fn the_file_holds_every_span_of_the_first_repetition_in_the_documented_format() {
    let path = temp_path("full.json");
    let report = run_traced(&demo(), &path, 0).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();

    // The same spans as the simulator's in-memory trace of the same run, in closing order.
    let scenario = Scenario::parse(&demo()).unwrap();
    let (_, spans) = common::traced(&demo(), 3);
    let expected: Vec<_> = spans
        .iter()
        .map(|s| {
            let vm = scenario.vms[s.dom].name.clone();
            (s.pcpu as u64, s.start, s.end - s.start, s.spinning, vm, s.index as u64)
        })
        .collect();
    assert!(expected.len() > 1000, "a trace worth the name: {} spans", expected.len());
    assert_eq!(intervals(&doc), expected);

    // Names first (pCPU 0's first of all), then the run's description and the counts, known
    // at the end, after the events.
    let events = doc["traceEvents"].as_array().unwrap();
    assert_eq!(
        events[0],
        serde_json::json!({"args": {"name": "pCPU 0"}, "name": "thread_name", "ph": "M", "pid": 0, "tid": 0})
    );
    let first_event = events.iter().position(|e| e["ph"] != "M").unwrap();
    assert!(events[first_event..].iter().all(|e| e["ph"] != "M" || e["name"] == "vsched_checkpoint"));
    let other = &doc["otherData"];
    assert_eq!(other["events"], events.len() - first_event - checkpoints(&doc));
    assert_eq!(other["dropped_events"], 0);
    assert_eq!(other["event_limit"], vsched::DEFAULT_TRACE_LIMIT);
    assert_eq!(
        (&other["scenario"], &other["policy"], &other["seed"], &other["pcpus"], &other["hosts"]),
        (&"lhp-demo".into(), &"credit".into(), &3.into(), &4.into(), &1.into())
    );
    assert_eq!(other["vms"], serde_json::json!(["spin", "hog1", "hog2", "hog3"]));

    // Byte for byte: each event and `otherData` as serde_json writes the parsed value (keys
    // sorted), `displayTimeUnit` first (Perfetto wants it before the events).
    let events: Vec<String> = doc["traceEvents"].as_array().unwrap().iter().map(Value::to_string).collect();
    let canonical =
        format!(r#"{{"displayTimeUnit":"ms","traceEvents":[{}],"otherData":{}}}"#, events.join(","), doc["otherData"]);
    assert!(text == canonical, "the file is not in the canonical layout");

    // Tracing changes nothing in the report.
    let untraced = vsched::run_scenario_json(
        &demo(),
        &RunOptions { seed: Some(3), reps: Some(2), ..Default::default() },
        &mut |_| true,
    )
    .unwrap();
    assert_eq!(without_wall_clock(&report), without_wall_clock(&untraced));
}

/// The checkpoint events of a trace (`trace_json`'s index).
fn checkpoints(doc: &Value) -> usize {
    doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["name"] == "vsched_checkpoint").count()
}

#[test]
fn past_the_limit_events_are_counted_not_written() {
    let (full_path, cut_path) = (temp_path("all.json"), temp_path("cut.json"));
    run_traced(&demo(), &full_path, 0).unwrap();
    run_traced(&demo(), &cut_path, 100).unwrap();
    let read = |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (full, cut) = (read(&full_path), read(&cut_path));
    std::fs::remove_file(&full_path).unwrap();
    std::fs::remove_file(&cut_path).unwrap();
    // The limit counts every event, not only spans: the first 100 of the full trace.
    let events = |doc: &Value| -> Vec<Value> {
        let all = doc["traceEvents"].as_array().unwrap();
        all.iter().filter(|e| e["ph"] != "M").cloned().collect()
    };
    assert_eq!(events(&cut), events(&full)[..100]);
    let (all, first) = (intervals(&full), intervals(&cut));
    assert!(!first.is_empty() && first.len() < 100);
    assert_eq!(first, all[..first.len()]);
    let total = full["otherData"]["events"].as_u64().unwrap();
    assert_eq!(cut["otherData"]["events"], 100);
    assert_eq!(cut["otherData"]["event_limit"], 100);
    assert_eq!(cut["otherData"]["dropped_events"], total - 100);
}

#[test]
fn an_unwritable_path_is_an_io_error_naming_it() {
    let path = temp_path("no-such-dir").join("t.json");
    let Err(Error::Io(message)) = run_traced(&demo(), &path, 0) else { panic!("expected an I/O error") };
    assert!(message.starts_with(&format!("{}: ", path.display())), "{message}");
    assert!(!message.contains('\n'));
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_ends_the_run_with_an_io_error_and_removes_nothing_it_did_not_create() {
    // /dev/full accepts the open and fails every write with ENOSPC.
    let path = Path::new("/dev/full");
    assert!(path.exists(), "Linux has /dev/full");
    let Err(Error::Io(message)) = run_traced(&demo(), path, 0) else { panic!("expected an I/O error") };
    assert!(message.starts_with("/dev/full: "), "{message}");
    assert!(path.exists(), "a device is never removed");
}

#[test]
fn an_interrupted_run_leaves_no_trace_file() {
    // Long enough that a progress report comes (every 100 ms of wall-clock time).
    let toml = vsched::BENCH_SCENARIO.replace("horizon_s = 60", "horizon_s = 100000");
    let path = temp_path("interrupted.json");
    let opts = RunOptions { reps: Some(1), trace_path: Some(path.clone()), ..Default::default() };
    let result = vsched::run_scenario_json(&toml, &opts, &mut |_| false);
    assert_eq!(result, Err(Error::Interrupted));
    assert!(!path.exists());
}

/// A sink that fails at its `fail_at`-th span and notes that it did.
struct FailingSink {
    written: usize,
    fail_at: usize,
    failed: Rc<Cell<bool>>,
}

impl TraceSink for FailingSink {
    fn event(&mut self, _: &TraceEvent) -> io::Result<()> {
        self.written += 1;
        if self.written == self.fail_at {
            self.failed.set(true);
            return Err(io::Error::other("disk full"));
        }
        Ok(())
    }

    fn finish(&mut self, _: u64, _: u64) -> io::Result<()> {
        panic!("a failed trace is not finished")
    }
}

#[test]
fn a_sink_error_stops_the_simulation_at_once() {
    let scenario = Scenario::parse(&vsched::BENCH_SCENARIO.replace("horizon_s = 60", "horizon_s = 5")).unwrap();
    let mut sim = scenario.build(1);
    let failed = Rc::new(Cell::new(false));
    sim.stream_trace(1_000_000, Box::new(FailingSink { written: 0, fail_at: 1000, failed: failed.clone() }));
    // Progress comes every 8192 events: one after the failure means the run went on.
    let (mut before, mut after) = (0, 0);
    let result = sim.run(scenario.horizon, scenario.until, &mut |_| {
        if failed.get() {
            after += 1;
        } else {
            before += 1;
        }
        true
    });
    assert_eq!(result.unwrap_err(), vsched_model::RunError::TraceSink);
    assert_eq!(after, 0, "the run went on after its trace failed ({before} reports before)");
    let trace = sim.take_trace().unwrap();
    assert_eq!(trace.finish().unwrap_err().to_string(), "disk full");
}

/// The rows' names of a trace file: (pid, tid) → name.
fn row_names(doc: &Value) -> std::collections::BTreeMap<(u64, u64), String> {
    doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            (key, e["args"]["name"].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn a_kvm_hosts_threads_and_an_smt_hosts_cores_have_their_rows() {
    // A KVM host adds its host-threads domain (a kernel thread per pCPU, a QEMU and a vhost
    // thread per VM) to the scenario's VMs: its rows must exist (a trace of it once failed).
    let toml =
        demo().replace("name = \"credit\"", "name = \"cfs\"").replace("pcpus = 4", "pcpus = 4\nthreads_per_core = 2");
    let path = temp_path("kvm-smt.json");
    run_traced(&toml, &path, 100_000).expect("a KVM host traces");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let names = row_names(&doc);
    let all: Vec<&String> = names.values().collect();
    // 4 kernel threads, and QEMU and vhost threads for the 4 VMs.
    assert!(all.iter().any(|n| *n == "host-threads.v11") && !all.iter().any(|n| *n == "host-threads.v12"), "{all:?}");
    assert_eq!(names[&(0, 3)], "pCPU 3 (core 1.1)");
    // Every vCPU row that ran something is named.
    for (pid, tid) in doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
    {
        assert!(names.contains_key(&(pid, tid)), "unnamed row {pid}/{tid}");
    }
}
