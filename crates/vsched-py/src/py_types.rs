//! The policy interface's plain data as Python classes, under the Rust names (`vsched-model`'s
//! `policy.rs` and `domain.rs`): `Decision`, `YieldReason`, `VcpuState`, `VmType`,
//! `DomainInfo`, `Paravirt`, `CounterOf`. Values cross by copy: a `DomainInfo` is a snapshot taken when the
//! policy asked for it.

use pyo3::prelude::*;
use vsched_model as model;

/// What a pCPU does next: `Decision.run(v, slice_ns)` or `Decision.idle()`.
#[pyclass(name = "Decision", module = "vsched", frozen, eq)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PyDecision(pub model::Decision);

#[pymethods]
impl PyDecision {
    /// Run vCPU `v`, and call `pick_next` on this pCPU again after `slice_ns` nanoseconds.
    #[staticmethod]
    fn run(v: usize, slice_ns: u64) -> Self {
        PyDecision(model::Decision::run(v, slice_ns))
    }

    /// Go idle (until something reschedules the pCPU).
    #[staticmethod]
    fn idle() -> Self {
        PyDecision(model::Decision::idle())
    }

    /// The vCPU to run, or None to go idle.
    #[getter]
    fn next(&self) -> Option<usize> {
        self.0.next
    }

    /// When to call `pick_next` again on this pCPU, or None.
    #[getter]
    fn slice_ns(&self) -> Option<u64> {
        self.0.slice_ns
    }

    fn __repr__(&self) -> String {
        match (self.0.next, self.0.slice_ns) {
            (Some(v), Some(slice)) => format!("Decision.run({v}, {slice})"),
            (None, None) => "Decision.idle()".to_string(),
            (next, slice) => format!("Decision(next={next:?}, slice_ns={slice:?})"),
        }
    }
}

/// Whose figure a trace counter is (`trace/event.rs`): `CounterOf.host()`, `CounterOf.pcpu(p)`
/// or `CounterOf.vcpu(v)`, with host-local ids.
#[pyclass(name = "CounterOf", module = "vsched", frozen, eq)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PyCounterOf(pub model::CounterOf);

#[pymethods]
impl PyCounterOf {
    /// A figure of the whole host (this policy's).
    #[staticmethod]
    fn host() -> Self {
        PyCounterOf(model::CounterOf::Host(0))
    }

    /// A figure of pCPU `p`.
    #[staticmethod]
    fn pcpu(p: usize) -> Self {
        PyCounterOf(model::CounterOf::Pcpu(p))
    }

    /// A figure of vCPU `v`.
    #[staticmethod]
    fn vcpu(v: usize) -> Self {
        PyCounterOf(model::CounterOf::Vcpu(v))
    }

    fn __repr__(&self) -> String {
        match self.0 {
            model::CounterOf::Host(_) => "CounterOf.host()".to_string(),
            model::CounterOf::Pcpu(p) => format!("CounterOf.pcpu({p})"),
            model::CounterOf::Vcpu(v) => format!("CounterOf.vcpu({v})"),
        }
    }
}

/// Why a vCPU yields: `YieldReason.PauseLoopExit()`, `YieldReason.SchedYield(target=v)` or
/// `YieldReason.Kick(target=v)` (see `policy.rs`).
#[pyclass(name = "YieldReason", module = "vsched", frozen, eq)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PyYieldReason {
    PauseLoopExit(),
    SchedYield { target: usize },
    Kick { target: usize },
}

impl From<model::YieldReason> for PyYieldReason {
    fn from(why: model::YieldReason) -> Self {
        match why {
            model::YieldReason::PauseLoopExit => PyYieldReason::PauseLoopExit(),
            model::YieldReason::SchedYield { target } => PyYieldReason::SchedYield { target },
            model::YieldReason::Kick { target } => PyYieldReason::Kick { target },
        }
    }
}

/// The host-level state of a vCPU: `VcpuState.Running(pcpu=p)`, `VcpuState.Runnable()`,
/// `VcpuState.Blocked()` or `VcpuState.Offline()`.
#[pyclass(name = "VcpuState", module = "vsched", frozen, eq)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PyVcpuState {
    Running { pcpu: usize },
    Runnable(),
    Blocked(),
    Offline(),
}

impl From<model::VcpuState> for PyVcpuState {
    fn from(state: model::VcpuState) -> Self {
        match state {
            model::VcpuState::Running(pcpu) => PyVcpuState::Running { pcpu },
            model::VcpuState::Runnable => PyVcpuState::Runnable(),
            model::VcpuState::Blocked => PyVcpuState::Blocked(),
            model::VcpuState::Offline => PyVcpuState::Offline(),
        }
    }
}

/// A VM's type: `VmType.Hit` (high-throughput) or `VmType.Con` (concurrent).
#[pyclass(name = "VmType", module = "vsched", frozen, eq, eq_int)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PyVmType {
    Hit,
    Con,
}

impl From<model::VmType> for PyVmType {
    fn from(ty: model::VmType) -> Self {
        match ty {
            model::VmType::Hit => PyVmType::Hit,
            model::VmType::Con => PyVmType::Con,
        }
    }
}

/// The paravirtual features a guest kernel turns on (see `domain.rs`).
#[pyclass(name = "Paravirt", module = "vsched", frozen, get_all)]
#[derive(Clone, Copy)]
pub struct PyParavirt {
    spinlocks: bool,
    steal_time: bool,
    tlb_flush: bool,
    sched_yield: bool,
    critical_sections: bool,
}

/// What a policy may read about a domain, as it was when the policy asked (see `domain.rs`).
#[pyclass(name = "DomainInfo", module = "vsched", frozen, get_all)]
pub struct PyDomainInfo {
    name: String,
    vcpus: usize,
    weight: u32,
    cap: u32,
    vm_type: PyVmType,
    first_vcpu: usize,
    online: bool,
    driver: bool,
    host_threads: bool,
    rx_packets: u64,
    pv: PyParavirt,
    slice_request_ns: Option<u64>,
}

#[pymethods]
impl PyDomainInfo {
    fn __repr__(&self) -> String {
        format!(
            "DomainInfo(name={:?}, vcpus={}, first_vcpu={}, weight={})",
            self.name, self.vcpus, self.first_vcpu, self.weight
        )
    }
}

impl From<&model::DomainInfo> for PyDomainInfo {
    fn from(d: &model::DomainInfo) -> Self {
        let pv = d.pv;
        PyDomainInfo {
            name: d.name.clone(),
            vcpus: d.vcpus,
            weight: d.weight,
            cap: d.cap,
            vm_type: d.vm_type.into(),
            first_vcpu: d.first_vcpu,
            online: d.online,
            driver: d.driver,
            host_threads: d.host_threads,
            rx_packets: d.rx_packets,
            pv: PyParavirt {
                spinlocks: pv.spinlocks,
                steal_time: pv.steal_time,
                tlb_flush: pv.tlb_flush,
                sched_yield: pv.sched_yield,
                critical_sections: pv.critical_sections,
            },
            slice_request_ns: d.slice_request_ns,
        }
    }
}

/// Adds the classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDecision>()?;
    m.add_class::<PyYieldReason>()?;
    m.add_class::<PyVcpuState>()?;
    m.add_class::<PyVmType>()?;
    m.add_class::<PyParavirt>()?;
    m.add_class::<PyDomainInfo>()?;
    m.add_class::<PyCounterOf>()?;
    Ok(())
}
