//! PyO3 glue between the `vsched` facade crate and the Python package (`vsched._core`).
//!
//! Conversions, and the bridge for policies written in Python: every function forwards to the
//! facade and maps its errors onto Python exceptions; `py_policy`, `py_cx` and `py_types` run a
//! Python class as a Rust `Policy`. The typed Python API lives in `python/vsched/__init__.py`
//! and `python/vsched/policy.py`; this module's signatures are mirrored in
//! `python/vsched/_core.pyi`. `py_real` runs scenarios on real vCPUs (crate `vsched-kvm`).

// PyO3 0.22's `#[pyfunction]` expansion converts `PyErr` into itself, which newer clippy
// flags in every function returning `PyResult`.
#![allow(clippy::useless_conversion)]

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::path::PathBuf;
use std::sync::Once;

mod py_cx;
mod py_policy;
mod py_queues;
mod py_real;
mod py_types;

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    vsched,
    ScenarioError,
    PyValueError,
    "Bad scenario or run option: the message is one line naming the field path and what was expected."
);
create_exception!(
    vsched,
    PolicyError,
    PyRuntimeError,
    "A scheduling policy made an unusable decision: a bug in the policy, not in the input."
);

create_exception!(
    vsched,
    InternalError,
    PyRuntimeError,
    "A bug in vsched itself (the Rust core panicked): the message is one line with the panic's text and where it happened."
);

// Panics: every call into the facade runs under `guarded`, which catches a panic and raises
// `InternalError` with one line instead of letting PyO3 turn it into a `PanicException` (a
// `BaseException` that would reach the user as a traceback). While a guard is active on a
// thread, the panic hook records the message and location for it instead of printing them.
thread_local! {
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static PANIC_HOOK: Once = Once::new();

const INTERNAL_ERROR_PREFIX: &str = "internal error (a vsched bug, please report)";

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    };
    // One line, whatever the panic printed (assert_eq! writes left and right on lines of their own).
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn describe_panic(info: &PanicHookInfo<'_>) -> String {
    let message = panic_message(info.payload());
    match info.location() {
        Some(location) => format!("{message} at {}:{}", location.file(), location.line()),
        None => message,
    }
}

fn install_panic_hook() {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if GUARDED.with(Cell::get) {
                LAST_PANIC.with(|last| *last.borrow_mut() = Some(describe_panic(info)));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `call`, turning a panic inside it into `InternalError`.
fn guarded<T>(call: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    install_panic_hook();
    // Nothing recorded earlier (a panic the core caught itself) can be taken for this call's.
    LAST_PANIC.with(|last| last.borrow_mut().take());
    let outer = GUARDED.with(|guarded| guarded.replace(true));
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(call));
    GUARDED.with(|guarded| guarded.set(outer));
    outcome.unwrap_or_else(|payload| {
        // The hook saw the panic on this thread; one resumed from another thread
        // (`resume_unwind`) reaches here with its payload only.
        let detail = LAST_PANIC.with(|last| last.borrow_mut().take()).unwrap_or_else(|| panic_message(&*payload));
        Err(InternalError::new_err(format!("{INTERNAL_ERROR_PREFIX}: {detail}")))
    })
}

fn to_py_err(error: vsched::Error) -> PyErr {
    match error {
        vsched::Error::Scenario(message) => ScenarioError::new_err(message),
        vsched::Error::Io(message) => PyOSError::new_err(message),
        vsched::Error::Policy(message) => PolicyError::new_err(message),
        vsched::Error::Interrupted => PyRuntimeError::new_err("interrupted"),
    }
}

/// The resolver of Python policies for one call: relative paths against `policy_dir` (the
/// current directory if `None`), and `policy_class` under the name `policy`.
fn python_policies(
    py: Python<'_>,
    policy: Option<&str>,
    policy_class: Option<Bound<'_, PyAny>>,
    policy_dir: Option<String>,
) -> PyResult<py_policy::PythonPolicies> {
    let policy_dir = match policy_dir {
        Some(dir) => dir,
        None => py.import_bound("os")?.call_method0("getcwd")?.extract()?,
    };
    let given = match (policy, policy_class) {
        (Some(name), Some(class)) => Some((name.to_string(), class.unbind())),
        (None, Some(_)) => return Err(PyTypeError::new_err("policy_class needs policy, the name it runs under")),
        (_, None) => None,
    };
    Ok(py_policy::PythonPolicies { policy_dir, given, failure: py_policy::FailureSlot::default() })
}

/// The `PolicyError` of a run that a Python policy failed: the one-line `message`, with the
/// policy's exception as its cause and that exception's traceback (the user's code) as
/// `policy_traceback`. A Ctrl-C that arrived during a callback is raised as it is.
fn python_policy_error(py: Python<'_>, message: String, exception: Option<PyErr>) -> PyErr {
    let error = PolicyError::new_err(message);
    let Some(exception) = exception else {
        return error;
    };
    if exception.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
        return exception;
    }
    let value = error.value_bound(py);
    let traceback = py
        .import_bound(py_policy::POLICY_MODULE)
        .and_then(|m| m.getattr("_traceback"))
        .and_then(|format| format.call1((exception.value_bound(py),)));
    match traceback {
        Ok(text) => {
            let _ = value.setattr("policy_traceback", text);
        }
        // A Ctrl-C while the exception's `str()` ran (one that loops, say).
        Err(trouble) if trouble.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) => return trouble,
        Err(_) => {}
    }
    error.set_cause(py, Some(exception));
    error
}

/// Runs a scenario (TOML text) and returns the JSON report as text.
///
/// `progress(rep, reps, sim_s, horizon_s)` is called at most every 100 ms of wall-clock
/// time; `rep` counts from 0. A policy written in Python is named `path/to/file.py:ClassName`
/// (relative to `policy_dir`, default the current directory), or given as `policy_class`
/// with its name in `policy`.
#[pyfunction]
#[pyo3(signature = (scenario_toml, seed=None, reps=None, policy=None, trace=None, trace_limit=0, progress=None, check=false, max_memory=0, policy_class=None, policy_dir=None))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    scenario_toml: &str,
    seed: Option<u64>,
    reps: Option<u32>,
    policy: Option<String>,
    trace: Option<PathBuf>,
    trace_limit: usize,
    progress: Option<Bound<'_, PyAny>>,
    check: bool,
    max_memory: u64,
    policy_class: Option<Bound<'_, PyAny>>,
    policy_dir: Option<String>,
) -> PyResult<String> {
    let resolver = python_policies(py, policy.as_deref(), policy_class, policy_dir)?;
    if let Some(callback) = &progress {
        if !callback.is_callable() {
            return Err(PyTypeError::new_err("progress must be callable or None"));
        }
    }
    let options = vsched::RunOptions { seed, reps, policy, trace_path: trace, trace_limit, check, max_memory };
    let mut python_error: Option<PyErr> = None;
    let mut on_progress = |report: vsched::Progress| {
        // Progress reports are the only moments Python gets control during a run, so they are
        // also where a pending Ctrl-C is noticed; an error stops the run at once.
        let outcome = py.check_signals().and_then(|()| match &progress {
            Some(callback) => callback.call1((report.rep, report.reps, report.sim_s, report.horizon_s)).map(drop),
            None => Ok(()),
        });
        match outcome {
            Ok(()) => true,
            Err(error) => {
                python_error = Some(error);
                false
            }
        }
    };
    let result = resolver.failure.interrupted_or(guarded(|| {
        Ok(vsched::run_scenario_json_with(scenario_toml, &options, Some(&resolver), &mut on_progress))
    }))?;
    match (result, python_error) {
        (Err(vsched::Error::Interrupted), Some(error)) => Err(error),
        (Err(vsched::Error::Policy(message)), _) => {
            Err(python_policy_error(py, message, resolver.failure.take_exception()))
        }
        (result, _) => result.map_err(to_py_err),
    }
}

/// Checks a scenario (TOML text) without running it and returns the memory a run of it is
/// estimated to hold (bytes); raises `ScenarioError` if it is invalid or that estimate exceeds
/// `max_memory` bytes (0 = the default budget). A Python policy's file is resolved against
/// `policy_dir` (default: the current directory).
#[pyfunction]
#[pyo3(signature = (scenario_toml, max_memory=0, policy_dir=None))]
fn validate(py: Python<'_>, scenario_toml: &str, max_memory: u64, policy_dir: Option<String>) -> PyResult<u64> {
    let resolver = python_policies(py, None, None, policy_dir)?;
    let result =
        guarded(|| vsched::estimate_memory_with(scenario_toml, max_memory, Some(&resolver)).map_err(to_py_err));
    resolver.failure.interrupted_or(result)
}

/// The scenario's TOML with `[scheduler]` replaced by `policy` (when given), then each
/// `(dotted key, value as JSON text)` of `overrides` set; the text unchanged when there is
/// nothing to apply. Raises `ScenarioError` naming the key (or `--policy`).
#[pyfunction]
#[pyo3(signature = (scenario_toml, policy=None, overrides=Vec::new()))]
fn apply_overrides(scenario_toml: &str, policy: Option<&str>, overrides: Vec<(String, String)>) -> PyResult<String> {
    guarded(|| vsched::apply_overrides_json(scenario_toml, policy, &overrides).map_err(to_py_err))
}

/// The TOML text of a scenario given as JSON text (an object); raises `ScenarioError` if it
/// is not one.
#[pyfunction]
fn scenario_toml(scenario_json: &str) -> PyResult<String> {
    guarded(|| vsched::scenario_toml_from_json(scenario_json).map_err(to_py_err))
}

/// The report of several single-repetition reports of one scenario (seeds `seed`,
/// `seed + 1`, ...), as `run` writes it for all of them at once. A policy written in Python is
/// found as `run` finds it (`policy_dir`).
#[pyfunction]
#[pyo3(signature = (scenario_toml, policy, max_memory, seed, reports, policy_dir=None))]
fn combine_reports(
    py: Python<'_>,
    scenario_toml: &str,
    policy: Option<&str>,
    max_memory: u64,
    seed: u64,
    reports: Vec<String>,
    policy_dir: Option<String>,
) -> PyResult<String> {
    let resolver = python_policies(py, None, None, policy_dir)?;
    resolver.failure.interrupted_or(guarded(|| {
        vsched::combine_reports_json(scenario_toml, policy, max_memory, seed, &reports, Some(&resolver))
            .map_err(to_py_err)
    }))
}

/// The registered scheduling policies as JSON text.
#[pyfunction]
fn policies() -> PyResult<String> {
    guarded(|| Ok(vsched::policies_json()))
}

/// The registered guest workloads as JSON text.
#[pyfunction]
fn workloads() -> PyResult<String> {
    guarded(|| Ok(vsched::workloads_json()))
}

/// Runs the standard benchmark scenario (`sim_s` simulated seconds, or its default; its VMs
/// repeated `copies` times) and the bare event loop, and returns their figures as JSON text.
#[pyfunction]
#[pyo3(name = "bench", signature = (sim_s=None, copies=1))]
fn run_bench(py: Python<'_>, sim_s: Option<f64>, copies: u32) -> PyResult<String> {
    interruptible(py, |keep_going| vsched::bench_json_with(sim_s, copies, keep_going))
}

/// Runs `call` with a `keep_going` that notices a pending Ctrl-C (Python's signal handlers
/// run there): the benchmark stops at once and the `KeyboardInterrupt` is raised.
fn interruptible(
    py: Python<'_>,
    call: impl FnOnce(&mut dyn FnMut() -> bool) -> Result<String, vsched::Error>,
) -> PyResult<String> {
    let mut python_error: Option<PyErr> = None;
    let mut keep_going = || match py.check_signals() {
        Ok(()) => true,
        Err(error) => {
            python_error = Some(error);
            false
        }
    };
    let result = guarded(|| Ok(call(&mut keep_going)))?;
    match (result, python_error) {
        (Err(vsched::Error::Interrupted), Some(error)) => Err(error),
        (result, _) => result.map_err(to_py_err),
    }
}

/// Runs the scenario `toml_text` `runs` times with its own seed and returns the wall-clock
/// time of a run (median, minimum, maximum) as JSON text.
#[pyfunction]
#[pyo3(name = "bench_scenario")]
fn run_bench_scenario(py: Python<'_>, toml_text: &str, runs: u32, copies: u32) -> PyResult<String> {
    interruptible(py, |keep_going| vsched::bench_file_json_with(toml_text, runs, copies, keep_going))
}

/// Runs the scale comparisons of `vsched bench --scale` (`runs` interleaved rounds) and
/// returns their figures as JSON text.
#[pyfunction]
#[pyo3(name = "bench_scale")]
fn run_bench_scale(py: Python<'_>, runs: u32) -> PyResult<String> {
    interruptible(py, |keep_going| vsched::bench_scale_json_with(runs, keep_going))
}

/// The TOML text of a scale scenario (`vsched bench --scale-scenario NAME`).
#[pyfunction]
fn scale_scenario(name: &str) -> PyResult<String> {
    vsched::scale_scenario_toml(name).map_err(to_py_err)
}

// The seed papers' scenarios, embedded by build.rs: (path under scenarios/papers, TOML text).
include!(concat!(env!("OUT_DIR"), "/paper_scenarios.rs"));

/// The paper scenarios embedded at build time, as a dict {path under scenarios/papers: TOML}.
#[pyfunction]
fn paper_scenarios(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let dict = pyo3::types::PyDict::new_bound(py);
    for (name, text) in PAPER_SCENARIOS {
        dict.set_item(name, text)?;
    }
    Ok(dict)
}

/// Panics with `message` under the same guard as every other call: the tests' way to see a
/// panic become `InternalError` without depending on a bug in the core. Not part of the API.
#[pyfunction]
fn _panic_for_tests(message: &str) -> PyResult<()> {
    guarded(|| panic!("{message}"))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ScenarioError", m.py().get_type_bound::<ScenarioError>())?;
    m.add("PolicyError", m.py().get_type_bound::<PolicyError>())?;
    m.add("InternalError", m.py().get_type_bound::<InternalError>())?;
    m.add("DEFAULT_SCENARIO", vsched::DEFAULT_SCENARIO)?;
    m.add("DEFAULT_BASELINE_SCENARIO", vsched::DEFAULT_BASELINE_SCENARIO)?;
    m.add("DEFAULT_SEED", vsched::scenario::DEFAULT_SEED)?;
    m.add("DEFAULT_REPS", vsched::scenario::DEFAULT_REPS)?;
    m.add("MAX_REPS", vsched::scenario::MAX_REPS)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(apply_overrides, m)?)?;
    m.add_function(wrap_pyfunction!(scenario_toml, m)?)?;
    m.add_function(wrap_pyfunction!(combine_reports, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(run_bench, m)?)?;
    m.add_function(wrap_pyfunction!(run_bench_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(run_bench_scale, m)?)?;
    m.add_function(wrap_pyfunction!(scale_scenario, m)?)?;
    m.add("MAX_BENCH_RUNS", vsched::MAX_BENCH_RUNS)?;
    m.add("MAX_SCALE_RUNS", vsched::MAX_SCALE_RUNS)?;
    m.add("MAX_BENCH_COPIES", vsched::MAX_BENCH_COPIES)?;
    m.add_function(wrap_pyfunction!(paper_scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(py_real::run_real, m)?)?;
    m.add_function(wrap_pyfunction!(py_real::real_unavailable, m)?)?;
    m.add("REAL_DEFAULT_DEADLINE_S", vsched_kvm::real_report::DEFAULT_DEADLINE_S)?;
    m.add("REAL_DEFAULT_MEMORY_PER_VM", vsched_kvm::real_report::DEFAULT_MEMORY_PER_VM)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    py_types::register(m)?;
    m.add_class::<py_cx::PyCx>()?;
    m.add_class::<py_cx::PyRng>()?;
    m.add_class::<py_queues::PyFifoQueue>()?;
    m.add_class::<py_queues::PyVtimeQueue>()?;
    Ok(())
}
