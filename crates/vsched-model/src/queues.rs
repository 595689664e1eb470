//! Run queues a policy uses as they are, so that the common policy keeps no queue by hand:
//! a FIFO and a queue ordered by virtual time, after sched_ext's dispatch queues (DSQs),
//! which a BPF scheduler fills with `scx_bpf_dsq_insert` (FIFO) or `scx_bpf_dsq_insert_vtime`
//! (ordered by `p->scx.dsq_vtime`, kernel/sched/ext.c) and drains with `scx_bpf_dsq_move_to_local`.
//!
//! Both know which vCPUs they hold, so a vCPU is never queued twice (`push` answers whether it
//! was queued) and `remove` finds a vCPU wherever it is. Both are deterministic: equal virtual
//! times leave in the order they arrived, as the DSQ's rbtree does.

use std::collections::{BTreeSet, VecDeque};

use crate::ids::VcpuId;

/// Whether each vCPU id is in a queue, grown as ids appear.
#[derive(Debug, Default, Clone)]
struct Members(Vec<bool>);

impl Members {
    fn contains(&self, v: VcpuId) -> bool {
        self.0.get(v).copied().unwrap_or(false)
    }

    /// Marks `v` in or out; returns whether that changed anything.
    fn set(&mut self, v: VcpuId, member: bool) -> bool {
        if v >= self.0.len() {
            if !member {
                return false;
            }
            self.0.resize(v + 1, false);
        }
        std::mem::replace(&mut self.0[v], member) != member
    }
}

/// A first-in first-out queue of vCPUs (a DSQ filled with `scx_bpf_dsq_insert`).
#[derive(Debug, Default, Clone)]
pub struct FifoQueue {
    order: VecDeque<VcpuId>,
    members: Members,
}

impl FifoQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `v` at the tail; false (and nothing changes) if it is queued already.
    pub fn push_back(&mut self, v: VcpuId) -> bool {
        let added = self.members.set(v, true);
        if added {
            self.order.push_back(v);
        }
        added
    }

    /// Queues `v` at the head (`SCX_ENQ_HEAD`); false if it is queued already.
    pub fn push_front(&mut self, v: VcpuId) -> bool {
        let added = self.members.set(v, true);
        if added {
            self.order.push_front(v);
        }
        added
    }

    /// The vCPU at the head, taken out.
    pub fn pop_front(&mut self) -> Option<VcpuId> {
        let v = self.order.pop_front()?;
        self.members.set(v, false);
        Some(v)
    }

    /// The vCPU at the head, left in.
    pub fn front(&self) -> Option<VcpuId> {
        self.order.front().copied()
    }

    /// Takes `v` out wherever it is; false if it was not queued. Linear in the queue's length.
    pub fn remove(&mut self, v: VcpuId) -> bool {
        if !self.members.set(v, false) {
            return false;
        }
        if let Some(i) = self.order.iter().position(|&u| u == v) {
            self.order.remove(i);
        }
        true
    }

    pub fn contains(&self, v: VcpuId) -> bool {
        self.members.contains(v)
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The queued vCPUs, head first.
    pub fn iter(&self) -> impl Iterator<Item = VcpuId> + '_ {
        self.order.iter().copied()
    }
}

/// vCPUs ordered by virtual time, the smallest first, equal times first come first served (a
/// DSQ filled with `scx_bpf_dsq_insert_vtime`). What a virtual time means is the policy's:
/// CPU time over weight, a deadline, a priority.
#[derive(Debug, Default, Clone)]
pub struct VtimeQueue {
    /// (virtual time, arrival number, vCPU): the arrival number orders equal times.
    order: BTreeSet<(u64, u64, VcpuId)>,
    /// Each queued vCPU's key in `order`, by id.
    keys: Vec<Option<(u64, u64)>>,
    arrivals: u64,
}

impl VtimeQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `v` at virtual time `vtime`; false (and nothing changes) if it is queued
    /// already (`remove` it first to move it).
    pub fn insert(&mut self, v: VcpuId, vtime: u64) -> bool {
        if self.contains(v) {
            return false;
        }
        if v >= self.keys.len() {
            self.keys.resize(v + 1, None);
        }
        self.arrivals += 1;
        self.keys[v] = Some((vtime, self.arrivals));
        self.order.insert((vtime, self.arrivals, v));
        true
    }

    /// The vCPU with the smallest virtual time and that time, taken out.
    pub fn pop_min(&mut self) -> Option<(VcpuId, u64)> {
        let (vtime, _, v) = self.order.pop_first()?;
        self.keys[v] = None;
        Some((v, vtime))
    }

    /// The vCPU with the smallest virtual time and that time, left in.
    pub fn peek_min(&self) -> Option<(VcpuId, u64)> {
        self.order.first().map(|&(vtime, _, v)| (v, vtime))
    }

    /// Takes `v` out; its virtual time, or `None` if it was not queued.
    pub fn remove(&mut self, v: VcpuId) -> Option<u64> {
        let (vtime, arrival) = self.keys.get_mut(v)?.take()?;
        self.order.remove(&(vtime, arrival, v));
        Some(vtime)
    }

    /// The virtual time `v` is queued at, if it is.
    pub fn vtime(&self, v: VcpuId) -> Option<u64> {
        self.keys.get(v).copied().flatten().map(|(vtime, _)| vtime)
    }

    pub fn contains(&self, v: VcpuId) -> bool {
        self.vtime(v).is_some()
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The queued vCPUs with their virtual times, smallest first.
    pub fn iter(&self) -> impl Iterator<Item = (VcpuId, u64)> + '_ {
        self.order.iter().map(|&(vtime, _, v)| (v, vtime))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_serves_in_order_and_never_holds_a_vcpu_twice() {
        let mut q = FifoQueue::new();
        assert!(q.push_back(3) && q.push_back(1) && q.push_front(7));
        assert!(!q.push_back(3), "3 is queued already");
        assert_eq!(q.iter().collect::<Vec<_>>(), [7, 3, 1]);
        assert!(q.remove(3) && !q.remove(3) && !q.remove(100));
        assert_eq!((q.front(), q.len(), q.contains(1), q.contains(3)), (Some(7), 2, true, false));
        assert_eq!((q.pop_front(), q.pop_front(), q.pop_front()), (Some(7), Some(1), None));
        assert!(q.is_empty() && q.push_back(3), "a vCPU taken out may come back");
    }

    #[test]
    fn a_vtime_queue_serves_the_smallest_time_first_and_equal_times_in_arrival_order() {
        let mut q = VtimeQueue::new();
        assert!(q.insert(4, 50) && q.insert(2, 10) && q.insert(9, 50) && q.insert(1, 50));
        assert!(!q.insert(2, 0), "2 is queued already");
        assert_eq!((q.vtime(2), q.vtime(5), q.peek_min()), (Some(10), None, Some((2, 10))));
        assert_eq!(q.remove(9), Some(50));
        assert_eq!(q.remove(9), None);
        assert_eq!(q.iter().collect::<Vec<_>>(), [(2, 10), (4, 50), (1, 50)]);
        assert_eq!(
            (q.pop_min(), q.pop_min(), q.pop_min(), q.pop_min()),
            (Some((2, 10)), Some((4, 50)), Some((1, 50)), None)
        );
        assert!(q.is_empty() && q.insert(2, 0) && q.contains(2));
    }
}
