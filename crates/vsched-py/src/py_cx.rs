//! `Cx` for policies written in Python: every public method of the Rust `Cx` (`cx.rs`), under
//! the same name and arguments, over the world of the callback that received it.
//!
//! A Rust `Cx` borrows its world for one callback only, so the Python object holds a pointer
//! to it that is valid during that callback and is cleared when the callback returns
//! ([`scoped`]); a `cx` kept and used later raises `RuntimeError` instead of reaching a world
//! that has moved on. Ids are checked here (an out-of-range pCPU raises `IndexError` naming the
//! method), since the Rust `Cx` trusts its callers and would panic.

use std::collections::HashSet;
use std::sync::Mutex;
use std::thread::ThreadId;

use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rand::{Rng, RngCore};
use vsched_model::{CounterOf, Cx, DomId, PcpuId, VcpuId};

use crate::py_types::{PyCounterOf, PyDomainInfo, PyVcpuState};

/// The latest instant a timer may be set for: far past any run (2^62 ns is 146 years), far
/// enough from `u64::MAX` that adding the timer slop cannot overflow.
pub const MAX_TIME_NS: u64 = 1 << 62;

/// What the Python object may reach of the callback's `Cx`.
enum Access {
    /// The callback has returned.
    Gone,
    /// During `check`, which reads only (the Rust callback takes `&Cx`).
    Read(*const Cx<'static>),
    Write(*mut Cx<'static>),
}

/// A policy's view of its world during one callback (the Rust `Cx`).
///
/// Not `unsendable`: PyO3 would panic when another thread touches it, and the panic would
/// reach the user as a Rust backtrace. Every method checks the thread instead (`cx`,
/// `cx_mut`): on another thread it raises `RuntimeError` and records the misuse, which
/// fails the run with one line once the callback returns (`scoped`).
#[pyclass(name = "Cx", module = "vsched")]
pub struct PyCx {
    access: Access,
    /// The thread of the callback: the only one that may reach the world.
    owner: ThreadId,
    /// The first use from another thread, described (a `Mutex` since methods take `&self`).
    misuse: Mutex<Option<String>>,
}

// SAFETY: the pointers in `access` are dereferenced only on `owner`, the thread whose callback
// holds the `Cx` they point to (`PyCx::cx`, `PyCx::cx_mut` check it first); another thread
// gets an error and reaches nothing.
unsafe impl Send for PyCx {}

/// What a callback made of its `cx`: its outcome, and how it was used from another thread, if
/// it was (a policy bug that fails the run whatever the outcome).
pub type Scoped<R> = (PyResult<R>, Option<String>);

/// Runs `f` with a Python `Cx` over `cx`, valid until `f` returns.
pub fn scoped<R>(py: Python<'_>, cx: &mut Cx<'_>, f: impl FnOnce(&Bound<'_, PyCx>) -> PyResult<R>) -> Scoped<R> {
    // SAFETY (for every dereference of the pointer, in `PyCx::cx` and `PyCx::cx_mut`): it comes
    // from `cx`, which this function borrows mutably until it returns, so nothing else uses
    // that `Cx` meanwhile; the pointer is cleared before the function returns, whatever `f`
    // did. Only the erased lifetime is a lie, and no reference made from the pointer outlives
    // the method call that made it. Only this thread dereferences it (`PyCx::owner`), and no
    // method calls back into Python while it holds a reference (the world never calls the
    // policy back), so references made from the pointer never overlap.
    // The second cast erases the lifetime (which clippy does not count as a change of type).
    #[allow(clippy::unnecessary_cast)]
    let pointer = cx as *mut Cx<'_> as *mut Cx<'static>;
    with_access(py, Access::Write(pointer), f)
}

/// As [`scoped`], for a callback that may only read (`check`).
pub fn scoped_read<R>(py: Python<'_>, cx: &Cx<'_>, f: impl FnOnce(&Bound<'_, PyCx>) -> PyResult<R>) -> Scoped<R> {
    #[allow(clippy::unnecessary_cast)]
    let pointer = cx as *const Cx<'_> as *const Cx<'static>;
    with_access(py, Access::Read(pointer), f)
}

fn with_access<R>(py: Python<'_>, access: Access, f: impl FnOnce(&Bound<'_, PyCx>) -> PyResult<R>) -> Scoped<R> {
    let object = match Bound::new(py, PyCx { access, owner: std::thread::current().id(), misuse: Mutex::new(None) }) {
        Ok(object) => object,
        Err(e) => return (Err(e), None),
    };
    let outcome = f(&object);
    let mut this = object.borrow_mut();
    this.access = Access::Gone;
    let misuse = this.misuse.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
    (outcome, misuse)
}

/// Counter names live as long as the process: `World::count` takes `&'static str`, as Rust
/// policies name their counters with literals. Each distinct name is leaked once.
fn interned(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(&known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

impl PyCx {
    /// An error unless this is the callback's thread; the first misuse is recorded.
    fn on_owner_thread(&self) -> PyResult<()> {
        if std::thread::current().id() == self.owner {
            return Ok(());
        }
        // Python's name for the thread (a `threading.Thread`'s `name`): the one its author gave.
        let name = Python::with_gil(|py| -> PyResult<String> {
            py.import_bound("threading")?.call_method0("current_thread")?.getattr("name")?.extract()
        });
        let thread = name.map_or_else(|_| "another thread".to_string(), |n| format!("thread {n:?}"));
        let message = format!("cx was used from {thread}, not the thread of the callback that received it");
        self.misuse.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get_or_insert_with(|| message.clone());
        Err(PyRuntimeError::new_err(format!("{message}; a cx may only be used by its callback, on its thread")))
    }

    fn cx(&self) -> PyResult<&Cx<'static>> {
        self.on_owner_thread()?;
        match self.access {
            // SAFETY: see `scoped`.
            Access::Read(pointer) => Ok(unsafe { &*pointer }),
            Access::Write(pointer) => Ok(unsafe { &*pointer }),
            Access::Gone => Err(gone()),
        }
    }

    fn cx_mut(&mut self, method: &str) -> PyResult<&mut Cx<'static>> {
        self.on_owner_thread()?;
        match self.access {
            // SAFETY: see `scoped`.
            Access::Write(pointer) => Ok(unsafe { &mut *pointer }),
            Access::Read(_) => {
                Err(PyRuntimeError::new_err(format!("cx.{method}: check(cx) may only read the world, not act on it")))
            }
            Access::Gone => Err(gone()),
        }
    }

    fn pcpu(&self, method: &str, p: PcpuId) -> PyResult<PcpuId> {
        let n = self.cx()?.n_pcpus();
        if p < n {
            Ok(p)
        } else {
            Err(PyIndexError::new_err(format!("cx.{method}: pCPU {p} does not exist; expected an id below {n}")))
        }
    }

    fn vcpu(&self, method: &str, v: VcpuId) -> PyResult<VcpuId> {
        let n = self.cx()?.n_vcpus();
        if v < n {
            Ok(v)
        } else {
            Err(PyIndexError::new_err(format!("cx.{method}: vCPU {v} does not exist; expected an id below {n}")))
        }
    }

    fn dom(&self, method: &str, d: DomId) -> PyResult<DomId> {
        let n = self.cx()?.domains().len();
        if d < n {
            Ok(d)
        } else {
            Err(PyIndexError::new_err(format!("cx.{method}: domain {d} does not exist; expected an id below {n}")))
        }
    }
}

fn gone() -> PyErr {
    PyRuntimeError::new_err("cx is only valid during the callback that received it; use the cx of the current callback")
}

#[pymethods]
impl PyCx {
    // ---- Facts ----

    /// Current time in nanoseconds.
    fn now(&self) -> PyResult<u64> {
        Ok(self.cx()?.now())
    }
    /// Whether the run is under way, so that a `vcpu_insert` belongs to a VM created mid-run.
    fn mid_run(&self) -> PyResult<bool> {
        Ok(self.cx()?.mid_run())
    }
    fn n_pcpus(&self) -> PyResult<usize> {
        Ok(self.cx()?.n_pcpus())
    }
    /// The socket (last-level cache) of pCPU `p`.
    fn socket_of(&self, p: PcpuId) -> PyResult<usize> {
        let p = self.pcpu("socket_of", p)?;
        Ok(self.cx()?.socket_of(p))
    }
    /// The physical core of pCPU `p` (its SMT siblings share it).
    fn core_of(&self, p: PcpuId) -> PyResult<usize> {
        let p = self.pcpu("core_of", p)?;
        Ok(self.cx()?.core_of(p))
    }
    fn n_vcpus(&self) -> PyResult<usize> {
        Ok(self.cx()?.n_vcpus())
    }
    /// Every domain of the host, by id.
    fn domains(&self) -> PyResult<Vec<PyDomainInfo>> {
        Ok(self.cx()?.domains().map(PyDomainInfo::from).collect())
    }
    fn domain(&self, d: DomId) -> PyResult<PyDomainInfo> {
        let d = self.dom("domain", d)?;
        Ok(self.cx()?.domain(d).into())
    }
    /// The vCPUs of domain `d`, as a `range`.
    fn vcpus_of<'py>(&self, py: Python<'py>, d: DomId) -> PyResult<Bound<'py, PyAny>> {
        let d = self.dom("vcpus_of", d)?;
        let vcpus = self.cx()?.vcpus_of(d);
        py.import_bound("builtins")?.getattr(pyo3::intern!(py, "range"))?.call1((vcpus.start, vcpus.end))
    }
    /// The domain of vCPU `v`.
    fn dom_of(&self, v: VcpuId) -> PyResult<DomId> {
        let v = self.vcpu("dom_of", v)?;
        Ok(self.cx()?.dom_of(v))
    }
    /// The index of `v` within its domain (its `vcpu_id`).
    fn vcpu_index(&self, v: VcpuId) -> PyResult<usize> {
        let v = self.vcpu("vcpu_index", v)?;
        Ok(self.cx()?.vcpu_index(v))
    }
    fn state(&self, v: VcpuId) -> PyResult<PyVcpuState> {
        let v = self.vcpu("state", v)?;
        Ok(self.cx()?.state(v).into())
    }
    /// Runnable or running.
    fn is_runnable(&self, v: VcpuId) -> PyResult<bool> {
        let v = self.vcpu("is_runnable", v)?;
        Ok(self.cx()?.is_runnable(v))
    }
    /// The pCPU `v` runs on, or None.
    fn running_on(&self, v: VcpuId) -> PyResult<Option<PcpuId>> {
        let v = self.vcpu("running_on", v)?;
        Ok(self.cx()?.running_on(v))
    }
    /// The pCPU `v` last ran on, or None.
    fn last_pcpu(&self, v: VcpuId) -> PyResult<Option<PcpuId>> {
        let v = self.vcpu("last_pcpu", v)?;
        Ok(self.cx()?.last_pcpu(v))
    }
    /// The one pCPU `v` may run on, if it is bound to one (a KVM host's per-CPU kernel
    /// thread); a policy must never run it elsewhere.
    fn pinned(&self, v: VcpuId) -> PyResult<Option<PcpuId>> {
        let v = self.vcpu("pinned", v)?;
        Ok(self.cx()?.pinned(v))
    }
    /// The vCPU `p` is running, or None if idle.
    fn curr(&self, p: PcpuId) -> PyResult<Option<VcpuId>> {
        let p = self.pcpu("curr", p)?;
        Ok(self.cx()?.curr(p))
    }
    /// The pCPU this callback runs on, if any.
    fn here(&self) -> PyResult<Option<PcpuId>> {
        Ok(self.cx()?.here())
    }
    /// Whether a reschedule of `p` is on its way (requested, not yet handled).
    fn resched_pending(&self, p: PcpuId) -> PyResult<bool> {
        let p = self.pcpu("resched_pending", p)?;
        Ok(self.cx()?.resched_pending(p))
    }
    /// Whether `v`'s guest is in kernel mode, as the hypervisor learns it on a VM exit.
    fn guest_in_kernel(&self, v: VcpuId) -> PyResult<bool> {
        let v = self.vcpu("guest_in_kernel", v)?;
        Ok(self.cx()?.guest_in_kernel(v))
    }
    /// Whether `v`'s guest is busy-waiting (a lock, a barrier, IPI acknowledgements, a message).
    fn guest_spinning(&self, v: VcpuId) -> PyResult<bool> {
        let v = self.vcpu("guest_spinning", v)?;
        Ok(self.cx()?.guest_spinning(v))
    }
    /// Whether an interrupt was sent to `v` and `v` has not taken it yet.
    fn pending_interrupt(&self, v: VcpuId) -> PyResult<bool> {
        let v = self.vcpu("pending_interrupt", v)?;
        Ok(self.cx()?.pending_interrupt(v))
    }
    /// Whether the host posts interrupts (APICv).
    fn posted_interrupts(&self) -> PyResult<bool> {
        Ok(self.cx()?.posted_interrupts())
    }

    // ---- Actions ----

    /// Ask `p` to call `pick_next`: at once on `here`, otherwise by an IPI.
    fn resched(&mut self, p: PcpuId) -> PyResult<()> {
        let p = self.pcpu("resched", p)?;
        self.cx_mut("resched")?.resched(p);
        Ok(())
    }
    /// A co-scheduling signal: a `resched` also counted as such when it is an IPI.
    fn co_signal(&mut self, p: PcpuId) -> PyResult<()> {
        let p = self.pcpu("co_signal", p)?;
        self.cx_mut("co_signal")?.co_signal(p);
        Ok(())
    }
    /// Records that the policy launched a co-scheduling of domain `d`.
    fn co_launch(&mut self, d: DomId) -> PyResult<()> {
        let d = self.dom("co_launch", d)?;
        self.cx_mut("co_launch")?.co_launch(d);
        Ok(())
    }
    /// Calls the policy's `timer(cx, id)` at time `at` (not before now).
    fn set_timer(&mut self, at: u64, id: u64) -> PyResult<()> {
        if at > MAX_TIME_NS {
            return Err(PyValueError::new_err(format!(
                "cx.set_timer: at = {at} ns is past any run; expected a time in ns up to {MAX_TIME_NS}"
            )));
        }
        self.cx_mut("set_timer")?.set_timer(at, id);
        Ok(())
    }
    /// Adds one to a policy-specific counter, reported under `host.policy_counters`.
    fn count(&mut self, name: &str) -> PyResult<()> {
        let cx = self.cx_mut("count")?;
        cx.count(interned(name));
        Ok(())
    }
    /// The policy's own seeded random stream (deterministic per run and host).
    fn rng(slf: Bound<'_, Self>) -> PyResult<PyRng> {
        slf.borrow_mut().cx_mut("rng")?;
        Ok(PyRng { cx: slf.unbind() })
    }
    /// Whether the run is traced, so that `trace_counter` keeps anything: a policy skips
    /// computing its counters otherwise.
    fn tracing(&self) -> PyResult<bool> {
        Ok(self.cx()?.tracing())
    }
    /// Publishes one of the policy's own figures to the run's trace: counter `name` of `of`
    /// (a `CounterOf`) holds the integer `value` from now on. Nothing unless the run is traced.
    fn trace_counter(&mut self, name: &str, of: PyCounterOf, value: i64) -> PyResult<()> {
        // Ids are checked as every method checks them; the world names the host itself.
        match of.0 {
            CounterOf::Host(_) => {}
            CounterOf::Pcpu(p) => _ = self.pcpu("trace_counter", p)?,
            CounterOf::Vcpu(v) => _ = self.vcpu("trace_counter", v)?,
        }
        self.cx_mut("trace_counter")?.trace_counter(interned(name), of.0, value);
        Ok(())
    }
    /// Stops the run with a policy error: `message` says what went wrong.
    fn fail(&mut self, message: &str) -> PyResult<()> {
        self.cx_mut("fail")?.fail(message);
        Ok(())
    }

    // ---- Helpers ----

    /// An idle pCPU with no reschedule on its way, trying `first`, `first + 1`, ... around
    /// the host; None if there is none.
    fn idle_pcpu_from(&self, first: PcpuId) -> PyResult<Option<PcpuId>> {
        let first = self.pcpu("idle_pcpu_from", first)?;
        Ok(self.cx()?.idle_pcpu_from(first))
    }
    /// Kicks the pCPU `idle_pcpu_from(first)` finds, if any, and returns it.
    fn kick_idle_from(&mut self, first: PcpuId) -> PyResult<Option<PcpuId>> {
        let first = self.pcpu("kick_idle_from", first)?;
        Ok(self.cx_mut("kick_idle_from")?.kick_idle_from(first))
    }
    /// Reschedules the pCPU this callback runs on, if it runs on one.
    fn resched_here(&mut self) -> PyResult<()> {
        self.cx_mut("resched_here")?.resched_here();
        Ok(())
    }
}

/// The policy's seeded random stream (`cx.rng()`), valid as long as the `cx` it came from, on
/// its thread (each draw goes through `PyCx::cx_mut`, which checks both).
#[pyclass(name = "Rng", module = "vsched")]
pub struct PyRng {
    cx: Py<PyCx>,
}

impl PyRng {
    fn draw<T>(&self, py: Python<'_>, method: &str, f: impl FnOnce(&mut vsched_engine::StreamRng) -> T) -> PyResult<T> {
        let mut cx = self.cx.bind(py).borrow_mut();
        Ok(f(cx.cx_mut(method)?.rng()))
    }
}

#[pymethods]
impl PyRng {
    /// A uniform 64-bit integer.
    fn next_u64(&self, py: Python<'_>) -> PyResult<u64> {
        self.draw(py, "rng().next_u64", |rng| rng.next_u64())
    }
    /// A uniform float in [0, 1).
    fn next_f64(&self, py: Python<'_>) -> PyResult<f64> {
        self.draw(py, "rng().next_f64", |rng| rng.gen::<f64>())
    }
    /// A uniform integer in [low, high).
    fn gen_range(&self, py: Python<'_>, low: u64, high: u64) -> PyResult<u64> {
        if low >= high {
            return Err(PyValueError::new_err(format!(
                "cx.rng().gen_range: expected low < high, got {low} and {high}"
            )));
        }
        self.draw(py, "rng().gen_range", |rng| rng.gen_range(low..high))
    }
}
