//! The trace as Perfetto shows it (`--trace`): a process per host with its pCPU rows and a
//! process per VM with a track per vCPU, named; vCPU activity that agrees with the pCPU rows;
//! counters, instants and flows that agree with the report's tallies; an index that finds
//! each checkpoint; the same bytes for the same seed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use common::*;
use serde_json::Value;
use vsched::RunOptions;

/// A trace file's parsed events and its raw text.
struct TraceFile {
    text: String,
    events: Vec<Value>,
    report: Value,
}

impl TraceFile {
    fn of_phase<'a>(&'a self, ph: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.events.iter().filter(move |e| e["ph"] == ph)
    }

    /// Each thread's name, by tid.
    fn thread_names(&self) -> BTreeMap<u64, String> {
        self.of_phase("M")
            .filter(|e| e["name"] == "thread_name")
            .map(|e| (e["tid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_string()))
            .collect()
    }

    /// The complete events of one category.
    fn slices<'a>(&'a self, cat: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.of_phase("X").filter(move |e| e["cat"] == cat)
    }

    /// The report's figure `key` for VM `vm`.
    fn vm_figure(&self, vm: &str, key: &str) -> u64 {
        let vms = self.report["runs"][0]["vms"].as_array().unwrap();
        vms.iter().find(|v| v["name"] == vm).unwrap()[key].as_u64().unwrap()
    }
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("vsched-perfetto-{}-{name}", std::process::id()))
}

/// Runs `toml` once with seed 1, traced without a limit, and reads the trace back.
fn traced_run(toml: &str, name: &str) -> TraceFile {
    let path = temp_path(name);
    let opts = RunOptions {
        seed: Some(1),
        reps: Some(1),
        trace_path: Some(path.clone()),
        trace_limit: 1 << 40,
        ..Default::default()
    };
    let report = vsched::run_scenario_json(toml, &opts, &mut |_| true).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["otherData"]["dropped_events"], 0);
    let events = doc["traceEvents"].as_array().unwrap().clone();
    TraceFile { text, events, report: serde_json::from_str(&report).unwrap() }
}

/// scenarios/lhp-demo.toml (a spinlock VM beside three hogs on 4 pCPUs under Credit, no driver domain), cut to 1 s.
fn demo() -> String {
    include_str!("../../../scenarios/lhp-demo.toml")
        .replace("horizon_s = 300", "horizon_s = 1")
        .replace("until = \"all_done\"", "")
}

/// Three VMs on 4 pCPUs under Credit, 1 s: a spinlock VM, a BSP VM whose vCPUs spin then
/// block at each barrier, and a CPU hog; so vCPUs run, spin, wait and block.
fn mixed() -> String {
    let vms = [
        vm_toml("spin", 4, "", "kind = \"spinlock\"\niterations = 100000000\ncompute_us = 50\ncs_us = 10"),
        vm_toml(
            "bsp",
            4,
            "",
            "kind = \"bsp\"\nsupersteps = 100000000\ncompute_ms = 1.0\njitter = 0.2\nwait = \"spin-then-block\"\nspin_limit_us = 100",
        ),
        vm_toml("hog", 4, "", HOG),
    ];
    scenario(4, "name = \"credit\"", &vms, "horizon_s = 1")
}

/// Times in µs are whole ns as doubles (`trace_json::records::micros`): in µs, a slice's start
/// plus its duration can differ from the next slice's start in the last bit.
const ROUNDING_US: f64 = 1e-6;

fn micros(e: &Value, key: &str) -> f64 {
    e[key].as_f64().unwrap()
}

#[test]
fn hosts_and_vms_are_processes_and_every_vcpu_a_named_thread() {
    let t = traced_run(&demo(), "names.json");
    let processes: BTreeMap<u64, &str> = t
        .of_phase("M")
        .filter(|e| e["name"] == "process_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap()))
        .collect();
    assert_eq!(processes, BTreeMap::from([(0, "host"), (1, "spin"), (2, "hog1"), (3, "hog2"), (4, "hog3")]));
    let threads = t.thread_names();
    let mut expected: BTreeMap<u64, String> = (0..4).map(|p| (p, format!("pCPU {p}"))).collect();
    for (d, vm) in ["spin", "hog1", "hog2", "hog3"].iter().enumerate() {
        for i in 0..4 {
            expected.insert(4 + 4 * d as u64 + i, format!("{vm}.v{i}"));
        }
    }
    expected.insert(20, "hypervisor".into());
    assert_eq!(threads, expected);
    // Perfetto names threads by tid alone: each tid lives in one process.
    let mut pid_of: BTreeMap<u64, u64> = BTreeMap::new();
    for e in t.events.iter().filter(|e| e.get("tid").is_some()) {
        let (tid, pid) = (e["tid"].as_u64().unwrap(), e["pid"].as_u64().unwrap());
        assert_eq!(*pid_of.entry(tid).or_insert(pid), pid, "tid {tid} in two processes: {e}");
    }
    // No event holds an array (Perfetto's tokenizer refuses them).
    assert!(t.events.iter().all(|e| !e.to_string().contains('[')));
}

#[test]
fn each_vcpu_track_covers_the_run_and_agrees_with_the_pcpu_rows() {
    let t = traced_run(&mixed(), "agree.json");
    let names = t.thread_names();
    let mut by_vcpu: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for e in t.slices("vcpu") {
        by_vcpu.entry(e["tid"].as_u64().unwrap()).or_default().push(e);
    }
    assert_eq!(by_vcpu.len(), 12, "every vCPU has slices");
    let mut on_vcpus = BTreeSet::new();
    for (tid, slices) in &mut by_vcpu {
        slices.sort_by(|a, b| micros(a, "ts").total_cmp(&micros(b, "ts")));
        // From 0 to the end (1 s), without gap or overlap: these VMs are never offline.
        let mut at = 0.0;
        for s in slices.iter() {
            assert!((micros(s, "ts") - at).abs() < ROUNDING_US, "gap or overlap on {} at {at} µs", names[tid]);
            at = micros(s, "ts") + micros(s, "dur");
            let name = s["name"].as_str().unwrap();
            assert!(["running", "spinning", "runnable", "blocked"].contains(&name), "{s}");
            if name == "running" || name == "spinning" {
                let pcpu = s["args"]["pcpu"].as_u64().unwrap();
                on_vcpus.insert((
                    names[tid].clone(),
                    pcpu,
                    s["ts"].to_string(),
                    s["dur"].to_string(),
                    name == "spinning",
                ));
            } else {
                assert!(s.get("args").is_none(), "{s}");
            }
        }
        assert!((at - 1e6).abs() < ROUNDING_US, "{} ends at {at} µs", names[tid]);
    }
    let on_pcpus: BTreeSet<_> = t
        .of_phase("X")
        .filter(|e| e["cat"] == "run" || e["cat"] == "spin")
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_string();
            (name, e["tid"].as_u64().unwrap(), e["ts"].to_string(), e["dur"].to_string(), e["cat"] == "spin")
        })
        .collect();
    assert!(on_pcpus.len() > 1000, "{} spans", on_pcpus.len());
    assert_eq!(on_vcpus, on_pcpus, "running and spinning slices are the pCPU rows' spans");
    // Steal time on the tracks is the report's.
    let steal_us: f64 =
        t.slices("vcpu").filter(|e| e["name"] == "runnable" && e["pid"] == 1).map(|e| micros(e, "dur")).sum();
    let vms = t.report["runs"][0]["vms"].as_array().unwrap();
    let steal_s = vms.iter().find(|v| v["name"] == "spin").unwrap()["steal_s"].as_f64().unwrap();
    assert!((steal_us / 1e6 - steal_s).abs() < 1e-9, "{steal_us} µs against {steal_s} s");
}

/// Each vCPU's activity at `ts` (µs): the slice with ts' <= ts < ts' + dur.
fn runnable_at(vcpu_slices: &[(f64, f64, bool)], ts: f64) -> usize {
    vcpu_slices.iter().filter(|&&(start, end, runnable)| runnable && start <= ts && ts < end).count()
}

#[test]
fn counters_give_the_runnable_vcpus_and_credits_run_queues() {
    let t = traced_run(&mixed(), "counters.json");
    // A slice's end, a hair early, so that a slice ending where a sample is does not count.
    let end = |e: &Value| micros(e, "ts") + micros(e, "dur") - ROUNDING_US;
    let slices: Vec<(f64, f64, bool)> =
        t.slices("vcpu").map(|e| (micros(e, "ts"), end(e), e["name"] == "runnable")).collect();
    let mut runnable = Vec::new();
    let mut runq: BTreeMap<String, Vec<(f64, i64)>> = BTreeMap::new();
    let mut credits: BTreeSet<String> = BTreeSet::new();
    for c in t.of_phase("C") {
        let (owner, value) = c["args"].as_object().unwrap().iter().next().unwrap();
        let value = value.as_i64().unwrap();
        match c["name"].as_str().unwrap() {
            "runnable vCPUs" => {
                assert_eq!((owner.as_str(), &c["pid"]), ("host", &0.into()));
                runnable.push((micros(c, "ts"), value));
            }
            "runq" => {
                assert_eq!(c["pid"], 0, "a pCPU's counter is in its host's process");
                assert!(value >= 0);
                runq.entry(owner.clone()).or_default().push((micros(c, "ts"), value));
            }
            "credit" => {
                let pid = c["pid"].as_u64().unwrap();
                let vm = ["spin", "bsp", "hog"][pid as usize - 1];
                assert!(owner.starts_with(&format!("{vm}.v")), "{owner} in process {pid}");
                credits.insert(owner.clone());
            }
            other => panic!("unexpected counter {other}"),
        }
    }
    // One sample per change: the count of vCPU tracks in `runnable` there.
    assert!(runnable.len() > 100, "{} samples", runnable.len());
    assert!(runnable.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 != w[1].1), "one sample per change");
    for &(ts, value) in &runnable {
        assert_eq!(runnable_at(&slices, ts), value as usize, "at {ts} µs");
    }
    assert_eq!(runq.keys().cloned().collect::<Vec<_>>(), ["pCPU 0", "pCPU 1", "pCPU 2", "pCPU 3"]);
    // Under Credit every runnable vCPU that no pCPU runs waits in a run queue (no caps here):
    // at each instant the queues add up to the simulator's count.
    let mut instants: BTreeSet<u64> = runnable.iter().map(|&(ts, _)| ts.to_bits()).collect();
    instants.extend(runq.values().flatten().map(|&(ts, _)| ts.to_bits()));
    let value_at =
        |series: &[(f64, i64)], ts: f64| series.iter().take_while(|&&(t, _)| t <= ts).last().map_or(0, |s| s.1);
    for ts in instants.into_iter().map(f64::from_bits) {
        let queued: i64 = runq.values().map(|s| value_at(s, ts)).sum();
        assert_eq!(queued, value_at(&runnable, ts), "at {ts} µs");
    }
    assert_eq!(credits.len(), 12, "a credit series per vCPU: {credits:?}");
}

/// Four VMs on 4 pCPUs under Credit, 2 s: ticket spinlocks in kernel mode (PLE exits) and in
/// user mode (lock-holder preemptions), both handed off at each unlock; kernbench with short
/// jobs (TLB-shootdown IPIs); an MPI job of ranks in one VM (messages).
fn busy_host() -> String {
    let spinlock = |mode: &str, compute_us: u32| {
        format!(
            "kind = \"spinlock\"\niterations = 100000000\ncompute_us = {compute_us}\ncs_us = 10\nlock_kind = \"ticket\"\nmode = \"{mode}\""
        )
    };
    let vms = [
        vm_toml("spin", 4, "", &spinlock("kernel", 20)),
        vm_toml("uspin", 4, "", &spinlock("user", 50)),
        vm_toml("make", 4, "", "kind = \"kernbench\"\njobs = 100000\njob_ms = 2"),
        vm_toml("cg", 4, "", "kind = \"npb-cg\"\niterations = 50"),
    ];
    scenario(4, "name = \"credit\"", &vms, "horizon_s = 2")
}

#[test]
fn instants_and_flows_agree_with_the_report() {
    let t = traced_run(&busy_host(), "busy.json");
    let names = t.thread_names();
    let mut instants: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for e in t.of_phase("i") {
        assert_eq!(e["s"], "t");
        let vcpu = &names[&e["tid"].as_u64().unwrap()];
        let vm = vcpu.split(".v").next().unwrap();
        *instants.entry((e["name"].as_str().unwrap(), vm)).or_default() += 1;
        if e["name"] == "lock hand-off" {
            assert!(e["args"]["waiter_running"].is_boolean() && e["args"]["lock"].is_u64(), "{e}");
        }
    }
    let count = |name, vm| instants.get(&(name, vm)).copied().unwrap_or(0);
    for vm in ["spin", "uspin", "make", "cg"] {
        assert_eq!(count("PLE exit", vm), t.vm_figure(vm, "ple_exits"), "{vm}");
        assert_eq!(count("lock-holder preemption", vm), t.vm_figure(vm, "lock_holder_preemptions"), "{vm}");
    }
    assert!(count("PLE exit", "spin") > 100 && count("lock-holder preemption", "uspin") > 0, "{instants:?}");
    for vm in ["spin", "uspin"] {
        assert!(count("lock hand-off", vm) > 100, "{instants:?}");
        // A ticket lock's hand-off to a waiter that does not execute is a lock-waiter preemption.
        let to_waiting = t
            .of_phase("i")
            .filter(|e| e["name"] == "lock hand-off" && e["args"]["waiter_running"] == false)
            .filter(|e| names[&e["tid"].as_u64().unwrap()].starts_with(&format!("{vm}.")))
            .count() as u64;
        assert_eq!(to_waiting, t.vm_figure(vm, "lock_waiter_preemptions"), "{vm}");
    }

    // Every flow's end follows its start, once, with the same kind.
    let mut starts: BTreeMap<u64, &Value> = BTreeMap::new();
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for e in t.slices("ipi").chain(t.slices("message")) {
        assert_eq!(e["dur"], 0.0);
        let id = e["bind_id"].as_u64().unwrap();
        if e["flow_out"] == true {
            assert!(starts.insert(id, e).is_none(), "flow {id} starts twice");
        }
    }
    for e in t.slices("ipi").chain(t.slices("message")).filter(|e| e["flow_in"] == true) {
        let from = starts[&e["bind_id"].as_u64().unwrap()];
        assert_eq!((&from["name"], &from["cat"]), (&e["name"], &e["cat"]));
        assert!(micros(from, "ts") <= micros(e, "ts"));
        let (from_row, to_row) = (&names[&from["tid"].as_u64().unwrap()], &names[&e["tid"].as_u64().unwrap()]);
        match e["name"].as_str().unwrap() {
            "reschedule IPI" => {
                assert!(to_row.starts_with("pCPU "), "{to_row}");
                assert!(from_row.starts_with("pCPU ") || from_row == "hypervisor", "{from_row}");
            }
            "guest IPI" => {
                assert!(from_row.starts_with("make.") && to_row.starts_with("make."), "{from_row} -> {to_row}")
            }
            "message" => assert!(from_row.starts_with("cg.") && to_row.starts_with("cg."), "{from_row} -> {to_row}"),
            other => panic!("unexpected flow {other}"),
        }
        *kinds.entry(e["name"].as_str().unwrap()).or_default() += 1;
    }
    // Every pCPU is busy here, so Credit rarely tickles one: a few reschedule IPIs only.
    assert!(kinds.len() == 3 && kinds.values().all(|&n| n > 5), "{kinds:?}");
    let delivered = t.report["runs"][0]["vms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["messages_received"].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(kinds["message"], delivered);
}

#[test]
fn a_co_scheduling_launch_is_an_instant_on_its_vm() {
    let vms = [
        vm_toml("a", 2, "type = \"CON\"", "kind = \"cpu_hog\""),
        vm_toml("b", 2, "type = \"CON\"", "kind = \"cpu_hog\""),
        vm_toml("h", 4, "", "kind = \"cpu_hog\""),
    ];
    let t = traced_run(&free_scenario(4, "name = \"cs\"", &vms, "horizon_s = 1"), "cosched.json");
    for (pid, vm) in [(1, "a"), (2, "b")] {
        let launches: Vec<&Value> =
            t.of_phase("i").filter(|e| e["name"] == "co-scheduling launch" && e["pid"] == pid).collect();
        assert!(!launches.is_empty());
        assert_eq!(launches.len() as u64, t.vm_figure(vm, "co_launches"), "{vm}");
        assert!(launches.iter().all(|e| e["s"] == "p" && e["args"]["pcpu"].is_u64()));
    }
}

#[test]
fn the_same_seed_writes_the_same_bytes() {
    let (a, b) = (traced_run(&busy_host(), "same-a.json"), traced_run(&busy_host(), "same-b.json"));
    assert!(a.text == b.text, "two runs of one seed wrote different traces");
}

#[test]
fn the_index_finds_each_checkpoint_and_the_events_between() {
    // Long enough for several checkpoints (16,384 events apart).
    let t = traced_run(&mixed().replace("horizon_s = 1", "horizon_s = 3"), "index.json");
    let doc: Value = serde_json::from_str(&t.text).unwrap();
    let index = &doc["otherData"]["index"];
    assert_eq!(index["pcpu_rows"], serde_json::json!(["pCPU 0", "pCPU 1", "pCPU 2", "pCPU 3"]));
    let at = |key: &str| index[key].as_u64().unwrap() as usize;
    let (events_at, events_end) = (at("events_at"), at("events_end"));
    assert!(t.text[..events_at].ends_with('}') && t.text[events_end..].starts_with("],\"otherData\":"));
    let times: Vec<f64> = index["checkpoint_ts"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let ends: Vec<usize> =
        index["checkpoint_end"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    assert!(times.len() >= 3, "{} checkpoints", times.len());
    let mut from = events_at;
    for (&ts, &end) in times.iter().zip(&ends) {
        // The bytes since the previous checkpoint: events, then this checkpoint.
        let chunk: Vec<Value> =
            serde_json::from_str(&format!("[{}]", t.text[from..end].trim_start_matches(','))).unwrap();
        let checkpoint = chunk.last().unwrap();
        assert_eq!(
            (&checkpoint["name"], &checkpoint["ph"], micros(checkpoint, "ts")),
            (&"vsched_checkpoint".into(), &"M".into(), ts)
        );
        // The spans written before it closed by then; the ones it lists were open then.
        for span in chunk.iter().filter(|e| e["cat"] == "run" || e["cat"] == "spin") {
            assert!(micros(span, "ts") + micros(span, "dur") <= ts + ROUNDING_US, "{span} after {ts}");
        }
        for (row, span) in checkpoint["args"]["open"].as_object().unwrap() {
            assert_eq!(span["tid"].to_string(), *row);
            assert!((micros(span, "ts") + micros(span, "dur") - ts).abs() < ROUNDING_US, "{span}");
        }
        from = end;
    }
}
