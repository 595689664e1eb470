//! Real vCPUs from Python (`vsched.real`, `vsched real`): the run goes on a thread of its
//! own, without the GIL, while this side waits for it in 50 ms steps, noticing Ctrl-C
//! (`check_signals`) and calling the progress callback; on either's error it raises the
//! run's stop flag and waits for the run to clean up (stop its vCPUs, drop its VMs) before
//! raising.

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use vsched_kvm::{Control, RealError, RealOptions};

use crate::{guarded, InternalError, PolicyError, ScenarioError};

/// How often the waiting side looks at signals.
const POLL: Duration = Duration::from_millis(50);
/// How often the progress callback is called, at most.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

fn to_py_err(error: RealError) -> PyErr {
    match error {
        RealError::Scenario(message) => ScenarioError::new_err(message),
        RealError::Policy(message) => PolicyError::new_err(message),
        RealError::Backend(message) => InternalError::new_err(message),
        RealError::Interrupted => PyRuntimeError::new_err("interrupted"),
    }
}

/// Runs a scenario (TOML text) on real vCPUs and returns the JSON report as text.
///
/// `progress(rep, reps, elapsed_s, deadline_s)` is called at most every 100 ms; `rep` counts
/// from 0. `deadline_s` caps each run's wall-clock length (with the scenario's horizon),
/// `memory_per_vm` is each VM's guest memory in bytes (None: the defaults); `trace` a file
/// for the first repetition's trace (at most `trace_limit` events, 0 = the default bound).
#[pyfunction]
#[pyo3(signature = (scenario_toml, seed=None, reps=None, policy=None, deadline_s=None, memory_per_vm=None, progress=None, trace=None, trace_limit=0))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_real(
    py: Python<'_>,
    scenario_toml: &str,
    seed: Option<u64>,
    reps: Option<u32>,
    policy: Option<String>,
    deadline_s: Option<f64>,
    memory_per_vm: Option<u64>,
    progress: Option<Bound<'_, PyAny>>,
    trace: Option<std::path::PathBuf>,
    trace_limit: usize,
) -> PyResult<String> {
    if progress.as_ref().is_some_and(|callback| !callback.is_callable()) {
        return Err(pyo3::exceptions::PyTypeError::new_err("progress must be callable or None"));
    }
    let options = RealOptions {
        seed,
        reps,
        policy,
        deadline_s,
        memory_per_vm_bytes: memory_per_vm,
        trace_path: trace,
        trace_limit,
    };
    let control = Arc::new(Control::default());
    let (sender, results) = mpsc::channel();
    let (text, run_control) = (scenario_toml.to_string(), control.clone());
    let run = std::thread::Builder::new()
        .name("vsched-real".into())
        .spawn(move || {
            let result = guarded(|| Ok(vsched_kvm::run_real_json(&text, &options, &run_control)));
            let _ = sender.send(result);
        })
        .map_err(|e| InternalError::new_err(format!("cannot start the scheduler's thread: {e}")))?;
    let mut last_progress = Instant::now();
    let mut results = results;
    let outcome = loop {
        // The receiver goes to the GIL-free side and back (it is Send, not Sync).
        let (back, received) = py.allow_threads(move || {
            let received = results.recv_timeout(POLL);
            (results, received)
        });
        results = back;
        match received {
            Ok(outcome) => break outcome,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(InternalError::new_err("the real-vCPU run ended without a result"))
            }
        }
        let mut stopping = py.check_signals().err();
        if stopping.is_none() && last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = Instant::now();
            if let Some(callback) = &progress {
                let (rep, reps) = (control.rep.load(Ordering::Relaxed), control.reps.load(Ordering::Relaxed));
                let elapsed_s = control.elapsed_ns.load(Ordering::Relaxed) as f64 / 1e9;
                let end_s = control.end_ns.load(Ordering::Relaxed) as f64 / 1e9;
                stopping = callback.call1((rep, reps, elapsed_s, end_s)).err();
            }
        }
        if let Some(error) = stopping {
            control.stop.store(true, Ordering::Relaxed);
            // The run stops within one loop step; its cleanup is done when it answers.
            let _ = py.allow_threads(move || results.recv());
            let _ = run.join();
            return Err(error);
        }
    };
    let _ = run.join();
    outcome?.map_err(to_py_err)
}

/// Why this machine cannot run real vCPUs, or None if it can.
#[pyfunction]
pub(crate) fn real_unavailable() -> PyResult<Option<String>> {
    guarded(|| Ok(vsched_kvm::unavailable_reason()))
}
