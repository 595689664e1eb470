//! PyO3 glue between the `vsched` facade crate and the Python package (`vsched._core`).
//!
//! Conversions only: every function forwards to the facade and maps its errors onto Python
//! exceptions. The typed Python API lives in `python/vsched/__init__.py`; this module's
//! signatures are mirrored in `python/vsched/_core.pyi`.

// PyO3 0.22's `#[pyfunction]` expansion converts `PyErr` into itself, which newer clippy
// flags in every function returning `PyResult`.
#![allow(clippy::useless_conversion)]

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::path::PathBuf;
use std::sync::Once;

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

/// Runs a scenario (TOML text) and returns the JSON report as text.
///
/// `progress(rep, reps, sim_s, horizon_s)` is called at most every 100 ms of wall-clock
/// time; `rep` counts from 0.
#[pyfunction]
#[pyo3(signature = (scenario_toml, seed=None, reps=None, policy=None, trace=None, trace_limit=0, progress=None, check=false, max_memory=0))]
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
) -> PyResult<String> {
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
    let result = guarded(|| Ok(vsched::run_scenario_json(scenario_toml, &options, &mut on_progress)))?;
    match (result, python_error) {
        (Err(vsched::Error::Interrupted), Some(error)) => Err(error),
        (result, _) => result.map_err(to_py_err),
    }
}

/// Checks a scenario (TOML text) without running it; raises `ScenarioError` if it is invalid
/// or its estimated memory exceeds `max_memory` bytes (0 = the default budget).
#[pyfunction]
#[pyo3(signature = (scenario_toml, max_memory=0))]
fn validate(scenario_toml: &str, max_memory: u64) -> PyResult<()> {
    guarded(|| vsched::validate_scenario(scenario_toml, max_memory).map_err(to_py_err))
}

/// The scenario's TOML with `[scheduler]` replaced by `policy` (when given), then each
/// `(dotted key, value as JSON text)` of `overrides` set; the text unchanged when there is
/// nothing to apply. Raises `ScenarioError` naming the key (or `--policy`).
#[pyfunction]
#[pyo3(signature = (scenario_toml, policy=None, overrides=Vec::new()))]
fn apply_overrides(scenario_toml: &str, policy: Option<&str>, overrides: Vec<(String, String)>) -> PyResult<String> {
    guarded(|| vsched::apply_overrides_json(scenario_toml, policy, &overrides).map_err(to_py_err))
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
fn run_bench(sim_s: Option<f64>, copies: u32) -> PyResult<String> {
    guarded(|| vsched::bench_json(sim_s, copies).map_err(to_py_err))
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
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(apply_overrides, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(run_bench, m)?)?;
    m.add_function(wrap_pyfunction!(paper_scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    Ok(())
}
