//! Small copyable identifiers. Indices into the host's flat tables.

/// A physical CPU of the host, numbered from 0.
pub type PcpuId = usize;
/// A vCPU, numbered from 0 across all domains (domain 0's vCPUs first).
pub type VcpuId = usize;
/// A domain (VM), numbered from 0 in scenario order.
pub type DomId = usize;
/// A guest thread, numbered from 0 across all domains (domain 0's threads first). A VM has
/// at least one per vCPU; more where its workload asks for them (`sim/guest_sched.rs`).
pub type ThreadId = usize;
