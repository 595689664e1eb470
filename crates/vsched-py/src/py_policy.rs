//! Policies written in Python (`class MyPolicy(vsched.Policy)`), run by the same engine as the
//! Rust ones: [`PythonPolicies`] resolves the scenario's `path/to/file.py:ClassName` for the
//! facade (`vsched::external`), [`PythonPolicyClass`] builds an instance per host and run, and
//! [`PythonPolicy`] implements the Rust `Policy` trait by calling the instance's methods of
//! the same names, with a Python `Cx` (`py_cx`) as their `cx`.
//!
//! Loading a file and checking a class is Python code (`vsched/policy.py`); this module calls
//! it. A callback that raises stops the run (`Cx::fail`) with one line naming the callback,
//! the exception and the user's line; the exception itself is kept ([`FailureSlot`]) so that
//! the `PolicyError` raised at the end carries its traceback. After a failure no callback
//! reaches Python again: the run ends once the current event has been handled.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use vsched::{ExternalPolicy, PolicyResolver};
use vsched_model::{
    ConfigError, Cx, Decision, DomId, DomainInfo, Hypervisor, PcpuId, Policy, Time, Value, VcpuId, VmType, YieldReason,
};

use crate::py_cx::{scoped, scoped_read, MAX_TIME_NS};
use crate::py_types::{PyDecision, PyDomainInfo, PyVmType, PyYieldReason};

/// The Python module with the loader and the `Policy` base class.
pub const POLICY_MODULE: &str = "vsched.policy";
/// The most a policy may delay preemption or fire timers late: the bounds of the host options
/// that override them (`host.preempt_delay_us`, `host.timer_slop_us` in `vsched/src/host.rs`).
const MAX_PREEMPT_DELAY_NS: u64 = 100_000_000;
const MAX_TIMER_SLOP_NS: u64 = 10_000_000;

/// How a run with Python policies failed, shared by every instance of one run.
#[derive(Clone, Default)]
pub struct FailureSlot(Arc<Mutex<Failure>>);

#[derive(Default)]
struct Failure {
    failed: bool,
    /// The exception of the first failure, if it was one.
    exception: Option<PyErr>,
    /// A Ctrl-C (`KeyboardInterrupt`) that arrived while Python code ran: loading a policy, its
    /// `__init__`, `admit`, or the `str()` of its exception. It ends the call, whatever error
    /// the core made of the failure it caused.
    interrupt: Option<PyErr>,
}

impl FailureSlot {
    fn failed(&self) -> bool {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).failed
    }

    fn record(&self, exception: Option<PyErr>) {
        let mut failure = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !failure.failed {
            failure.failed = true;
            failure.exception = exception;
        }
    }

    /// The exception that failed the run, if any.
    pub fn take_exception(&self) -> Option<PyErr> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).exception.take()
    }

    /// Keeps `error` if it is a Ctrl-C; whether it was.
    pub fn keep_interrupt(&self, py: Python<'_>, error: &PyErr) -> bool {
        if !error.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
            return false;
        }
        let mut failure = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        failure.interrupt.get_or_insert_with(|| error.clone_ref(py));
        true
    }

    /// The Ctrl-C kept during the call, if any, else `result`.
    pub fn interrupted_or<T>(&self, result: PyResult<T>) -> PyResult<T> {
        match self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).interrupt.take() {
            Some(interrupt) => Err(interrupt),
            None => result,
        }
    }
}

/// Calls `vsched.policy.<function>(*args)`.
fn call_helper<'py>(py: Python<'py>, function: &str, args: impl IntoPy<Py<PyTuple>>) -> PyResult<Bound<'py, PyAny>> {
    py.import_bound(POLICY_MODULE)?.getattr(function)?.call1(args)
}

/// `error` with its traceback set on the exception object, where Python code looks for it
/// (`__traceback__`); an error fetched from a call keeps it beside the object only.
fn settled(py: Python<'_>, error: PyErr) -> PyErr {
    PyErr::from_value_bound(error.into_value(py).into_bound(py).into_any())
}

/// One line about `error` (`settled`): its type, message and the line of the policy's code
/// that raised it. A Ctrl-C while its `str()` runs (one that loops, say) is kept in `failure`
/// and the type alone is said; nothing calls that `str()` again.
fn describe(py: Python<'_>, error: &PyErr, failure: &FailureSlot) -> String {
    failure.keep_interrupt(py, error);
    call_helper(py, "_describe", (error.value_bound(py),)).and_then(|text| text.extract::<String>()).unwrap_or_else(
        |trouble| {
            failure.keep_interrupt(py, &trouble);
            error.get_type_bound(py).qualname().map_or_else(|_| "an exception".to_string(), |name| name.to_string())
        },
    )
}

/// The `repr()` of a value a policy returned, or "a value" if that fails (a Ctrl-C while it
/// runs is kept in `failure`).
fn shown(py: Python<'_>, value: &Bound<'_, PyAny>, failure: &FailureSlot) -> String {
    value.repr().map_or_else(
        |trouble| {
            failure.keep_interrupt(py, &trouble);
            "a value".to_string()
        },
        |r| r.to_string(),
    )
}

/// One line about an error of the loader or of a class being checked, a Ctrl-C kept.
fn loader_error(py: Python<'_>, error: &PyErr, failure: &FailureSlot) -> String {
    if failure.keep_interrupt(py, error) {
        return "interrupted".to_string();
    }
    error.value_bound(py).str().map_or_else(
        |trouble| {
            failure.keep_interrupt(py, &trouble);
            "an exception whose str() failed".to_string()
        },
        |text| text.to_string(),
    )
}

/// Resolves the external names of one run's scenario to Python classes.
pub struct PythonPolicies {
    /// The directory relative file paths are resolved against.
    pub policy_dir: String,
    /// A class passed as an object (`vsched.run(..., policy=MyPolicy)`), with the name it runs
    /// under.
    pub given: Option<(String, Py<PyAny>)>,
    pub failure: FailureSlot,
}

impl PolicyResolver for PythonPolicies {
    fn resolve(
        &self,
        field: &str,
        name: &str,
        params: &BTreeMap<String, Value>,
    ) -> Result<Arc<dyn ExternalPolicy>, ConfigError> {
        Python::with_gil(|py| {
            let given = match &self.given {
                Some((given_name, class)) if given_name == name => Some(class.clone_ref(py)),
                _ => None,
            };
            let class = call_helper(py, "_resolve", (name, &self.policy_dir, given))
                .map_err(|e| ConfigError::new(field, loader_error(py, &e, &self.failure)))?;
            let hypervisor = match class.getattr("hypervisor").and_then(|h| h.extract::<String>()).as_deref() {
                Ok("xen") => Hypervisor::Xen,
                Ok("kvm") => Hypervisor::Kvm,
                // `_resolve` checked it is one of the three.
                _ => Hypervisor::Generic,
            };
            let kwargs = PyDict::new_bound(py);
            for (key, value) in params {
                let value = match value {
                    Value::Int(i) => i.into_py(py),
                    Value::Float(x) => x.into_py(py),
                    Value::Bool(b) => b.into_py(py),
                    Value::Str(s) => s.into_py(py),
                };
                kwargs
                    .set_item(key, value)
                    .map_err(|e| ConfigError::new(field, loader_error(py, &e, &self.failure)))?;
            }
            let class_name = class.getattr("__qualname__").map(|q| q.to_string()).unwrap_or_else(|_| name.to_string());
            Ok(Arc::new(PythonPolicyClass {
                name: name.to_string(),
                class_name,
                class: class.unbind(),
                kwargs: kwargs.unbind(),
                hypervisor,
                failure: self.failure.clone(),
            }) as Arc<dyn ExternalPolicy>)
        })
    }
}

/// A Python policy class with the `[scheduler]` keys it is built with.
pub struct PythonPolicyClass {
    name: String,
    class_name: String,
    class: Py<PyAny>,
    kwargs: Py<PyDict>,
    hypervisor: Hypervisor,
    failure: FailureSlot,
}

impl ExternalPolicy for PythonPolicyClass {
    fn name(&self) -> &str {
        &self.name
    }

    fn hypervisor(&self) -> Hypervisor {
        self.hypervisor
    }

    fn build(&self) -> Result<Box<dyn Policy>, String> {
        Python::with_gil(|py| {
            let kwargs = self.kwargs.bind(py);
            let instance = self.class.bind(py).call((), Some(kwargs)).map_err(|e| {
                let e = settled(py, e);
                let args: Vec<String> = kwargs
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.repr().map_or(String::new(), |r| r.to_string())))
                    .collect();
                format!("{}({}) raised {}", self.class_name, args.join(", "), describe(py, &e, &self.failure))
            })?;
            PythonPolicy::new(py, &self.class_name, instance, self.failure.clone())
        })
        .map(|policy| Box::new(policy) as Box<dyn Policy>)
    }
}

/// The instance's callbacks, as bound methods; `None` where the class keeps the base class's
/// (which does nothing), so that the run does not call Python for nothing.
struct Callbacks {
    admit: Option<Py<PyAny>>,
    init: Option<Py<PyAny>>,
    vcpu_insert: Option<Py<PyAny>>,
    vcpu_remove: Option<Py<PyAny>>,
    wake: Option<Py<PyAny>>,
    sleep: Option<Py<PyAny>>,
    yield_: Option<Py<PyAny>>,
    pick_next: Option<Py<PyAny>>,
    tick: Option<Py<PyAny>>,
    timer: Option<Py<PyAny>>,
    vm_type_changed: Option<Py<PyAny>>,
    check: Option<Py<PyAny>>,
}

/// One instance of a Python policy, for one host of one run.
pub struct PythonPolicy {
    callbacks: Callbacks,
    // What the Rust trait asks by method, read once when the instance is built.
    tick_period_ns: Option<Time>,
    ticks_aligned: bool,
    ple_window_grow: u32,
    preempt_delay_ns: Time,
    timer_slop_ns: Time,
    supports_vm_lifecycle: bool,
    failure: FailureSlot,
}

impl PythonPolicy {
    fn new(py: Python<'_>, class_name: &str, instance: Bound<'_, PyAny>, failure: FailureSlot) -> Result<Self, String> {
        let trouble = |e: PyErr| loader_error(py, &e, &failure);
        let base = py.import_bound(POLICY_MODULE).and_then(|m| m.getattr("Policy")).map_err(trouble)?;
        let class = instance.get_type();
        let method = |name: &str| -> Result<Option<Py<PyAny>>, String> {
            let mine = class.getattr(name).map_err(trouble)?;
            let default = base.getattr(name).map_err(trouble)?;
            if mine.is(&default) {
                return Ok(None);
            }
            Ok(Some(instance.getattr(name).map_err(trouble)?.unbind()))
        };
        let callbacks = Callbacks {
            admit: method("admit")?,
            init: method("init")?,
            vcpu_insert: method("vcpu_insert")?,
            vcpu_remove: method("vcpu_remove")?,
            wake: method("wake")?,
            sleep: method("sleep")?,
            yield_: method("yield_")?,
            pick_next: method("pick_next")?,
            tick: method("tick")?,
            timer: method("timer")?,
            vm_type_changed: method("vm_type_changed")?,
            check: method("check")?,
        };
        // A constant of the policy: what its method returns, checked.
        let constant = |name: &str, expected: &str, convert: &dyn Fn(&Bound<'_, PyAny>) -> Option<u64>| {
            let value = instance
                .call_method0(name)
                .map_err(|e| format!("{class_name}.{name}() raised {}", describe(py, &settled(py, e), &failure)))?;
            convert(&value).ok_or_else(|| {
                let shown = shown(py, &value, &failure);
                format!("{class_name}.{name}() returned {shown}; expected {expected}")
            })
        };
        let int_in = |low: u64, high: u64| {
            move |value: &Bound<'_, PyAny>| -> Option<u64> {
                if value.is_instance_of::<pyo3::types::PyBool>() {
                    return None;
                }
                value.extract::<u64>().ok().filter(|n| (low..=high).contains(n))
            }
        };
        let boolean = |value: &Bound<'_, PyAny>| -> Option<u64> { value.extract::<bool>().ok().map(u64::from) };
        let period = int_in(1, MAX_TIME_NS);
        const NO_TICK: u64 = 0;
        let tick_period_ns =
            constant("tick_period_ns", &format!("None or a period in ns from 1 to {MAX_TIME_NS}"), &|v| {
                if v.is_none() {
                    Some(NO_TICK)
                } else {
                    period(v)
                }
            })?;
        Ok(PythonPolicy {
            callbacks,
            tick_period_ns: Some(tick_period_ns).filter(|&p| p != NO_TICK),
            ticks_aligned: constant("ticks_aligned", "a bool", &boolean)? != 0,
            ple_window_grow: constant("ple_window_grow", "an int from 1 to 64", &int_in(1, 64))? as u32,
            preempt_delay_ns: constant(
                "preempt_delay_ns",
                &format!("an int from 0 to {MAX_PREEMPT_DELAY_NS} (ns)"),
                &int_in(0, MAX_PREEMPT_DELAY_NS),
            )?,
            timer_slop_ns: constant(
                "timer_slop_ns",
                &format!("an int from 0 to {MAX_TIMER_SLOP_NS} (ns)"),
                &int_in(0, MAX_TIMER_SLOP_NS),
            )?,
            supports_vm_lifecycle: constant("supports_vm_lifecycle", "a bool", &boolean)? != 0,
            failure,
        })
    }

    /// Calls `method` (callback `callback`) with a Python `Cx` over `cx` and the arguments
    /// `args` makes of it; its result, or `None` if it raised (the run then fails) or if
    /// there is nothing to call.
    fn invoke<A: IntoPy<Py<PyTuple>>>(
        &self,
        cx: &mut Cx,
        callback: &str,
        method: Option<&Py<PyAny>>,
        args: impl FnOnce(Py<crate::py_cx::PyCx>) -> A,
    ) -> Option<PyObject> {
        let method = method?;
        if self.failure.failed() {
            return None;
        }
        Python::with_gil(|py| {
            let (outcome, misuse) = scoped(py, cx, |py_cx| method.call1(py, args(py_cx.clone().unbind())));
            if let Some(misuse) = misuse {
                // Whatever the callback then did (a thread's error re-raised, or nothing).
                cx.fail(format!(
                    "{callback}: {misuse} at t={} ns; a cx may only be used by its callback, on its thread",
                    cx.now()
                ));
                self.failure.record(None);
                return None;
            }
            match outcome {
                Ok(value) => Some(value),
                Err(error) => {
                    self.raised(py, cx, callback, error);
                    None
                }
            }
        })
    }

    /// The run fails: `callback` raised `error`.
    fn raised(&self, py: Python<'_>, cx: &mut Cx, callback: &str, error: PyErr) {
        let error = settled(py, error);
        cx.fail(format!("{callback} raised {} at t={} ns", describe(py, &error, &self.failure), cx.now()));
        self.failure.record(Some(error));
    }
}

impl Policy for PythonPolicy {
    fn admit(&self, pcpus: usize, domains: &[DomainInfo]) -> Result<(), String> {
        let Some(method) = &self.callbacks.admit else {
            return Ok(());
        };
        Python::with_gil(|py| {
            let views: Vec<PyDomainInfo> = domains.iter().map(PyDomainInfo::from).collect();
            let answer = method
                .call1(py, (pcpus, views))
                .map_err(|e| format!("admit raised {}", describe(py, &settled(py, e), &self.failure)))?;
            reason(py, "admit", answer, &self.failure)
        })
    }

    fn init(&mut self, cx: &mut Cx) {
        self.invoke(cx, "init", self.callbacks.init.as_ref(), |py_cx| (py_cx,));
    }

    fn tick_period_ns(&self) -> Option<Time> {
        self.tick_period_ns
    }

    fn ticks_aligned(&self) -> bool {
        self.ticks_aligned
    }

    fn ple_window_grow(&self) -> u32 {
        self.ple_window_grow
    }

    fn preempt_delay_ns(&self) -> Time {
        self.preempt_delay_ns
    }

    fn timer_slop_ns(&self) -> Time {
        self.timer_slop_ns
    }

    fn supports_vm_lifecycle(&self) -> bool {
        self.supports_vm_lifecycle
    }

    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.invoke(cx, "vcpu_insert", self.callbacks.vcpu_insert.as_ref(), |py_cx| (py_cx, v));
    }

    fn vcpu_remove(&mut self, cx: &mut Cx, v: VcpuId) {
        self.invoke(cx, "vcpu_remove", self.callbacks.vcpu_remove.as_ref(), |py_cx| (py_cx, v));
    }

    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.invoke(cx, "wake", self.callbacks.wake.as_ref(), |py_cx| (py_cx, v));
    }

    fn sleep(&mut self, cx: &mut Cx, v: VcpuId) {
        self.invoke(cx, "sleep", self.callbacks.sleep.as_ref(), |py_cx| (py_cx, v));
    }

    fn yield_(&mut self, cx: &mut Cx, v: VcpuId, why: YieldReason) {
        self.invoke(cx, "yield_", self.callbacks.yield_.as_ref(), |py_cx| (py_cx, v, PyYieldReason::from(why)));
    }

    fn pick_next(&mut self, cx: &mut Cx, pcpu: PcpuId, prev: Option<VcpuId>) -> Decision {
        let Some(answer) = self.invoke(cx, "pick_next", self.callbacks.pick_next.as_ref(), |py_cx| (py_cx, pcpu, prev))
        else {
            return Decision::idle();
        };
        Python::with_gil(|py| match answer.extract::<PyDecision>(py) {
            Ok(decision) => decision.0,
            Err(_) => {
                let shown = shown(py, answer.bind(py), &self.failure);
                cx.fail(format!(
                    "pick_next returned {shown} at t={} ns; expected a vsched.Decision (Decision.run(v, slice_ns) or Decision.idle())",
                    cx.now()
                ));
                self.failure.record(None);
                Decision::idle()
            }
        })
    }

    fn tick(&mut self, cx: &mut Cx, pcpu: PcpuId) {
        self.invoke(cx, "tick", self.callbacks.tick.as_ref(), |py_cx| (py_cx, pcpu));
    }

    fn timer(&mut self, cx: &mut Cx, id: u64) {
        self.invoke(cx, "timer", self.callbacks.timer.as_ref(), |py_cx| (py_cx, id));
    }

    fn vm_type_changed(&mut self, cx: &mut Cx, d: DomId, old: VmType) {
        self.invoke(cx, "vm_type_changed", self.callbacks.vm_type_changed.as_ref(), |py_cx| {
            (py_cx, d, PyVmType::from(old))
        });
    }

    fn check(&self, cx: &Cx) -> Result<(), String> {
        let Some(method) = &self.callbacks.check else {
            return Ok(());
        };
        if self.failure.failed() {
            return Ok(());
        }
        Python::with_gil(|py| match scoped_read(py, cx, |py_cx| method.call1(py, (py_cx.clone(),))) {
            (_, Some(misuse)) => {
                self.failure.record(None);
                Err(format!("check: {misuse}; a cx may only be used by its callback, on its thread"))
            }
            (Ok(answer), None) => reason(py, "check", answer, &self.failure),
            (Err(error), None) => {
                let error = settled(py, error);
                let message = format!("check raised {}", describe(py, &error, &self.failure));
                self.failure.record(Some(error));
                Err(message)
            }
        })
    }
}

/// What `admit` or `check` answered: None for yes, or a one-line reason why not.
fn reason(py: Python<'_>, callback: &str, answer: PyObject, failure: &FailureSlot) -> Result<(), String> {
    let answer = answer.bind(py);
    if answer.is_none() {
        return Ok(());
    }
    match answer.extract::<String>() {
        Ok(reason) => Err(reason),
        Err(_) => {
            let shown = shown(py, answer, failure);
            Err(format!("{callback} returned {shown}; expected None or a str saying what is wrong"))
        }
    }
}
