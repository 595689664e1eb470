//! The run queues of `vsched_model::queues` for policies written in Python: `vsched.FifoQueue`
//! and `vsched.VtimeQueue`, the same types under the same rules (a vCPU queued once; equal
//! virtual times first come first served), so a Python policy keeps no queue by hand and
//! ports to Rust call for call.

use pyo3::prelude::*;
use vsched_model::{FifoQueue, VcpuId, VtimeQueue};

/// A first-in first-out queue of vCPU ids (sched_ext's `scx_bpf_dsq_insert`).
#[pyclass(name = "FifoQueue", module = "vsched")]
#[derive(Default)]
pub struct PyFifoQueue(FifoQueue);

#[pymethods]
impl PyFifoQueue {
    #[new]
    fn new() -> Self {
        Self::default()
    }
    /// Queues `v` at the tail; False (and nothing changes) if it is queued already.
    fn push(&mut self, v: VcpuId) -> bool {
        self.0.push_back(v)
    }
    /// Queues `v` at the head; False if it is queued already.
    fn push_front(&mut self, v: VcpuId) -> bool {
        self.0.push_front(v)
    }
    /// The vCPU at the head, taken out; None if the queue is empty.
    fn pop(&mut self) -> Option<VcpuId> {
        self.0.pop_front()
    }
    /// The vCPU at the head, left in; None if the queue is empty.
    fn peek(&self) -> Option<VcpuId> {
        self.0.front()
    }
    /// Takes `v` out wherever it is; False if it was not queued.
    fn remove(&mut self, v: VcpuId) -> bool {
        self.0.remove(v)
    }
    /// The queued vCPUs, head first.
    fn to_list(&self) -> Vec<VcpuId> {
        self.0.iter().collect()
    }
    fn __len__(&self) -> usize {
        self.0.len()
    }
    fn __contains__(&self, v: VcpuId) -> bool {
        self.0.contains(v)
    }
    fn __repr__(&self) -> String {
        format!("FifoQueue({:?})", self.to_list())
    }
}

/// vCPU ids ordered by virtual time, the smallest first, equal times in arrival order
/// (sched_ext's `scx_bpf_dsq_insert_vtime`). Virtual times are non-negative integers.
#[pyclass(name = "VtimeQueue", module = "vsched")]
#[derive(Default)]
pub struct PyVtimeQueue(VtimeQueue);

#[pymethods]
impl PyVtimeQueue {
    #[new]
    fn new() -> Self {
        Self::default()
    }
    /// Queues `v` at virtual time `vtime`; False (and nothing changes) if it is queued
    /// already (`remove` it first to move it).
    fn push(&mut self, v: VcpuId, vtime: u64) -> bool {
        self.0.insert(v, vtime)
    }
    /// The vCPU with the smallest virtual time, taken out; None if the queue is empty.
    fn pop(&mut self) -> Option<VcpuId> {
        self.0.pop_min().map(|(v, _)| v)
    }
    /// The vCPU with the smallest virtual time, left in; None if the queue is empty.
    fn peek(&self) -> Option<VcpuId> {
        self.0.peek_min().map(|(v, _)| v)
    }
    /// The virtual time `v` is queued at, or None.
    fn vtime(&self, v: VcpuId) -> Option<u64> {
        self.0.vtime(v)
    }
    /// Takes `v` out; its virtual time, or None if it was not queued.
    fn remove(&mut self, v: VcpuId) -> Option<u64> {
        self.0.remove(v)
    }
    /// The queued (vCPU, virtual time) pairs, smallest time first.
    fn to_list(&self) -> Vec<(VcpuId, u64)> {
        self.0.iter().collect()
    }
    fn __len__(&self) -> usize {
        self.0.len()
    }
    fn __contains__(&self, v: VcpuId) -> bool {
        self.0.contains(v)
    }
    fn __repr__(&self) -> String {
        format!("VtimeQueue({:?})", self.to_list())
    }
}
