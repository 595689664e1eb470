//! `vsched real`: a scenario's repetitions on real vCPUs, reported in the JSON schema of
//! `vsched run --json` (`vsched::run_scenario_json`), so the same tables and tools read it.
//!
//! Same top-level keys, same per-run `vms` and `host` keys, plus `"backend"` (`"kvm"`), a
//! `"real"` table (the host CPU of each pCPU, the deadline, the memory cap, the scheduler
//! thread's nice value), per run `scheduler_late_us` (how late the loop handled slice ends,
//! ticks and timers: mean, p99, max) and `sends_between_vms` (the messages the runner carried,
//! each an exit of its sender), and per VM `guest_executed_s` (what its guest counted itself
//! executing; see `RealRun`). `sim_s` is the run's length on the wall clock.
//! Figures real vCPUs cannot measure are null, in the runs and in the summary
//! ([`VM_UNMEASURED`], [`HOST_UNMEASURED`]; docs/real-vcpus.md says why for each).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::{json, Value as Json};
use vsched::report::{document, RunRecord};
use vsched::scenario::{check_reps, Scenario};
use vsched::trace_json::TraceJsonWriter;
use vsched_engine::{ns_to_secs, secs_to_ns};
use vsched_model::trace::Trace;
use vsched_model::GuestSpec;

use crate::backend::{Backend, BackendError, MachineSettings, VmSpec};
use crate::error::RealError;
use crate::fake::FakeBackend;
use crate::ple_scaling::{self, ExitCost};
use crate::runner::{self, Control, RunPlan};
use crate::{admission, isolation};

/// The wall-clock deadline of one run when `--deadline-s` is not given: the scenario's
/// horizon still applies if it is shorter.
pub const DEFAULT_DEADLINE_S: f64 = 120.0;
/// The longest deadline a run may be given: an hour.
pub const MAX_DEADLINE_S: f64 = 3600.0;
/// Guest memory of one VM when `--memory-per-vm` is not given.
pub const DEFAULT_MEMORY_PER_VM: u64 = 64 << 20;
/// The range `--memory-per-vm` may take: from 1 MiB (page tables, code, counters) to 16 GiB.
pub const MEMORY_PER_VM_RANGE: std::ops::RangeInclusive<u64> = (1 << 20)..=(16 << 30);

/// Per-VM figures real vCPUs cannot measure: no guest kernel (ticks, timers, paravirtual
/// features, IPIs), no I/O or serving workloads, no co-start record. (Messages between
/// ranks are measured: `runner::messages`.)
pub const VM_UNMEASURED: &[&str] = &[
    "requests",
    "costarts",
    "ipi_syncs",
    "pv_halts",
    "pv_kicks",
    "pv_tlb_flushes_deferred",
    "pv_sched_yields",
    "preempt_delays",
    "preempt_delays_completed",
    "preempt_delays_expired",
    "guest_ticks",
    "timer_wakes",
];
/// Host figures real vCPUs cannot measure: cache refills are not observed.
pub const HOST_UNMEASURED: &[&str] = &["cache_refill_s"];

/// Options of `vsched real` that override the scenario.
#[derive(Debug, Clone, Default)]
pub struct RealOptions {
    pub seed: Option<u64>,
    pub reps: Option<u32>,
    /// Run under this registered policy (default parameters) instead of the scenario's.
    pub policy: Option<String>,
    /// The wall-clock deadline of each run, seconds ([`DEFAULT_DEADLINE_S`]).
    pub deadline_s: Option<f64>,
    /// Guest memory of one VM, bytes ([`DEFAULT_MEMORY_PER_VM`]).
    pub memory_per_vm_bytes: Option<u64>,
    /// Write the first repetition's trace here, in `vsched run --trace`'s format.
    pub trace_path: Option<PathBuf>,
    /// Most trace events written (0 = `vsched::DEFAULT_TRACE_LIMIT`).
    pub trace_limit: usize,
}

/// Whether this machine can run real vCPUs: `None` if it can, else the one-line reason.
pub fn unavailable_reason() -> Option<String> {
    if fake_backend_requested() {
        return None;
    }
    crate::machine::kvm_available().err().map(|e| e.to_string())
}

/// Whether [`BACKEND_VARIABLE`] asks for the fake backend.
fn fake_backend_requested() -> bool {
    std::env::var(BACKEND_VARIABLE).is_ok_and(|backend| backend == "fake")
}

/// Environment variable that puts the fake backend (`fake`) in the machine's place when set
/// to `fake`: the command line and its tests then run anywhere, reporting `"backend":
/// "fake"`. Each vCPU of a VM whose workload ends finishes after [`FAKE_WORK`] of CPU time.
pub const BACKEND_VARIABLE: &str = "VSCHED_REAL_BACKEND";
/// The CPU time a fake vCPU of a finite workload works before it finishes.
pub const FAKE_WORK: std::time::Duration = std::time::Duration::from_millis(100);

/// Runs a scenario's repetitions on KVM vCPUs and returns the JSON report (on the fake
/// backend instead when [`BACKEND_VARIABLE`] says so).
pub fn run_real_json(toml_text: &str, opts: &RealOptions, control: &Control) -> Result<String, RealError> {
    if fake_backend_requested() {
        let build =
            |vms: &[VmSpec], _: &MachineSettings, _| FakeBackend::new(vms, |vm| vm.guest.finite.then_some(FAKE_WORK));
        // Fake vCPUs never spin: no pause-loop exits to scale.
        return run_real_json_with(toml_text, opts, control, "fake", |_, _| Ok(None), build);
    }
    let check = |vms: &[VmSpec], host_cpu: usize| -> Result<Option<ExitCost>, BackendError> {
        // The guests first: a workload the machine cannot run is refused on any host.
        for vm in vms {
            crate::machine::check_supported(vm)?;
        }
        crate::machine::kvm_available()?;
        crate::machine::ple_exit_ns(host_cpu).map(Some)
    };
    run_real_json_with(toml_text, opts, control, "kvm", check, crate::machine::KvmBackend::new)
}

/// As [`run_real_json`] on any backend: `check` refuses what it cannot run before anything
/// is built and gives the cost of one pause-loop exit, measured on the host CPU it is given
/// (`None`: the backend raises none), `build` makes the backend of one repetition (its VMs,
/// settings and seed), named `backend_name` in the report. Each backend is dropped (its VMs and threads cleaned up) as
/// soon as its repetition ends, whatever way it ends.
pub fn run_real_json_with<B: Backend>(
    toml_text: &str,
    opts: &RealOptions,
    control: &Control,
    backend_name: &str,
    check: impl FnOnce(&[VmSpec], usize) -> Result<Option<ExitCost>, BackendError>,
    mut build: impl FnMut(&[VmSpec], &MachineSettings, u64) -> Result<B, BackendError>,
) -> Result<String, RealError> {
    if opts.policy.as_deref().is_some_and(vsched::external::is_external_name) {
        return Err(RealError::Scenario(
            "--policy: expected a compiled-in policy: policies written in Python cannot run on real vCPUs yet".into(),
        ));
    }
    let scenario = Scenario::parse_with(toml_text, opts.policy.as_deref(), 0)?;
    let seed = opts.seed.unwrap_or(scenario.seed);
    let reps = opts.reps.unwrap_or(scenario.reps);
    check_reps("--reps", reps)?;
    let deadline_s = opts.deadline_s.unwrap_or(DEFAULT_DEADLINE_S);
    if !(deadline_s.is_finite() && deadline_s > 0.0 && deadline_s <= MAX_DEADLINE_S) {
        return Err(RealError::Scenario(format!(
            "--deadline-s: expected a number of seconds in (0, {MAX_DEADLINE_S}], got {}",
            vsched_model::number(deadline_s)
        )));
    }
    let memory_per_vm_bytes = opts.memory_per_vm_bytes.unwrap_or(DEFAULT_MEMORY_PER_VM);
    if !MEMORY_PER_VM_RANGE.contains(&memory_per_vm_bytes) {
        return Err(RealError::Scenario(format!(
            "--memory-per-vm: expected from 1 MiB to 16 GiB ({} to {} bytes), got {memory_per_vm_bytes} bytes",
            MEMORY_PER_VM_RANGE.start(),
            MEMORY_PER_VM_RANGE.end()
        )));
    }
    let host_cpus = admission::host_cpus().map_err(RealError::Backend)?;
    admission::check_scenario(&scenario, host_cpus.len())?;
    admission::check_size(&scenario, host_cpus.len(), memory_per_vm_bytes, admission::available_memory())?;
    let host_cpus = &host_cpus[..scenario.host.pcpus];
    let guests: Vec<GuestSpec> = scenario.vms.iter().map(|vm| vm.guest_spec()).collect();
    let vms = vm_specs(&scenario, &guests);
    let exit_cost = check(&vms, host_cpus[0])?;
    let policy_grow = scenario.policy.build()?.ple_window_grow();
    let ple = exit_cost.and_then(|cost| ple_scaling::real_window(&scenario.host, policy_grow, cost));
    let settings = MachineSettings { memory_per_vm_bytes, ple };
    let plan = RunPlan { host_cpus, end_ns: secs_to_ns(deadline_s).min(scenario.horizon), until: scenario.until };
    let mut trace = match &opts.trace_path {
        Some(path) => Some(open_trace(path, &scenario, seed, opts.trace_limit)?),
        None => None,
    };
    control.reps.store(reps, Ordering::Relaxed);
    control.end_ns.store(plan.end_ns, Ordering::Relaxed);
    let mut records = Vec::with_capacity(reps as usize);
    let mut lateness = Vec::with_capacity(reps as usize);
    let mut executed = Vec::with_capacity(reps as usize);
    let mut isolated = Vec::with_capacity(reps as usize);
    let mut nice = 0;
    for rep in 0..reps {
        control.rep.store(rep, Ordering::Relaxed);
        let run_seed = seed.wrapping_add(rep as u64);
        let mut backend = build(&vms, &settings, run_seed)?;
        nice = runner::prepare_scheduler_thread();
        let before = isolation::sample(host_cpus);
        let started = Instant::now();
        let trace = if rep == 0 { trace.take() } else { None };
        let run = runner::run(&scenario, &vms, run_seed, &mut backend, &plan, control, trace).map_err(|e| match e {
            RealError::Policy(m) => RealError::Policy(format!("policy {}: {m}", scenario.policy.name())),
            other => other,
        })?;
        let wall_s = started.elapsed().as_secs_f64();
        isolated.push(isolation::report(before, isolation::sample(host_cpus), host_cpus.len(), wall_s));
        drop(backend);
        let late_us = |q: Option<u64>| q.map(|ns| ns as f64 / 1e3);
        executed.push((run.guest_executed_s.clone(), run.sends_between_vms));
        lateness.push(json!({
            "mean": run.late_ns.mean().map(|ns| ns / 1e3),
            "p99": late_us(run.late_ns.quantile(0.99)),
            "max": late_us(run.late_ns.max()),
        }));
        records.push(RunRecord { seed: run_seed, wall_s, metrics: run.metrics });
    }
    let mut doc = document(&scenario, seed, reps, &records);
    doc["backend"] = json!(backend_name);
    doc["real"] = json!({
        "host_cpus": host_cpus,
        "deadline_s": ns_to_secs(plan.end_ns),
        "memory_per_vm_bytes": memory_per_vm_bytes,
        "scheduler_nice": nice,
        "ple_exit_us": exit_cost.map(|c| c.exit_ns as f64 / 1e3),
        "ple_window_stretch": exit_cost.map(|c| ple_scaling::stretch(&scenario.host, c.exit_ns)),
        "ple_window_us": ple.zip(exit_cost).map(|(w, c)| w.base_cycles as f64 * 1e6 / c.tsc_hz as f64),
    });
    let runs = doc["runs"].as_array_mut().expect("runs").iter_mut();
    for (((run, late), (executed, sends)), isolation) in runs.zip(lateness).zip(executed).zip(isolated) {
        run["scheduler_late_us"] = late;
        run["isolation"] = isolation;
        run["sends_between_vms"] = json!(sends);
        for (vm, seconds) in run["vms"].as_array_mut().expect("vms").iter_mut().zip(executed) {
            vm["guest_executed_s"] = json!(seconds);
        }
    }
    mark_unmeasured(&mut doc);
    Ok(doc.to_string())
}

/// The scenario's VMs as a backend builds them, with `guests` (each VM's `guest_spec`):
/// vCPUs numbered over the VMs in order, each VM named by the table it comes from
/// (`admission::vm_tables`).
pub fn vm_specs<'a>(scenario: &'a Scenario, guests: &'a [GuestSpec]) -> Vec<VmSpec<'a>> {
    let mut first_vcpu = 0;
    let mut specs = Vec::with_capacity(guests.len());
    for ((vm, guest), table) in scenario.vms.iter().zip(guests).zip(admission::vm_tables(scenario)) {
        let (first_rank, world) = (vm.ranks.first, vm.ranks.world);
        specs.push(VmSpec { name: &vm.name, table, guest, first_vcpu, first_rank, world });
        first_vcpu += guest.vcpus;
    }
    specs
}

/// A streaming trace into a new file at `path`, in `vsched run --trace`'s format.
fn open_trace(path: &Path, scenario: &Scenario, seed: u64, limit: usize) -> Result<Trace, RealError> {
    let fail = |e: std::io::Error| RealError::Scenario(format!("--trace: {}: {e}", path.display()));
    let limit = if limit == 0 { vsched::DEFAULT_TRACE_LIMIT } else { limit };
    let file = BufWriter::new(File::create(path).map_err(fail)?);
    let writer = TraceJsonWriter::new(file, scenario, seed, limit).map_err(fail)?;
    Ok(Trace::streaming(limit, Box::new(writer)))
}

/// Writes null for every figure real vCPUs cannot measure, in the runs and the summary.
fn mark_unmeasured(doc: &mut Json) {
    let null_keys = |table: &mut Json, keys: &[&str]| {
        for key in keys {
            for name in [key.to_string(), format!("{key}_mean"), format!("{key}_std")] {
                if let Some(value) = table.get_mut(&name) {
                    *value = Json::Null;
                }
            }
        }
    };
    for run in doc["runs"].as_array_mut().expect("runs") {
        for vm in run["vms"].as_array_mut().expect("vms") {
            null_keys(vm, VM_UNMEASURED);
        }
        null_keys(&mut run["host"], HOST_UNMEASURED);
    }
    for vm in doc["summary"]["vms"].as_array_mut().expect("summary vms") {
        null_keys(vm, VM_UNMEASURED);
    }
    null_keys(&mut doc["summary"]["host"], HOST_UNMEASURED);
}
