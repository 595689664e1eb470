//! Small copyable identifiers. Indices into the host's flat tables.

/// A physical CPU of the host, numbered from 0.
pub type PcpuId = usize;
/// A vCPU, numbered from 0 across all domains (domain 0's vCPUs first).
pub type VcpuId = usize;
/// A domain (VM), numbered from 0 in scenario order.
pub type DomId = usize;
