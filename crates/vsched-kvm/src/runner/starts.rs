//! A VM's start on real vCPUs: the vCPUs given a pCPU before their VM starts its workload
//! halt at once, and at the start the runner wakes them (`wake`, Credit's BOOST) in the
//! order the simulator wakes them, which under CFS decides which vCPUs share a pCPU.

use vsched_engine::Time;
use vsched_model::{PcpuId, VcpuId, VcpuState, World};

use super::Runner;
use crate::backend::Backend;
use crate::error::RealError;

/// When each unstarted vCPU halted: the instant, how many the same pCPU had halted before it
/// at that instant (its dispatch round), and the pCPU.
pub(super) struct StartOrder {
    halts: Vec<Option<(Time, u32, PcpuId)>>,
    /// Per pCPU, the instant of its last halt of an unstarted vCPU and how many it halted then.
    last: Vec<(Time, u32)>,
}

impl StartOrder {
    pub(super) fn new(vcpus: usize, pcpus: usize) -> Self {
        StartOrder { halts: vec![None; vcpus], last: vec![(0, 0); pcpus] }
    }

    /// Unstarted `v` halted on `p` at `now`.
    pub(super) fn halted(&mut self, v: VcpuId, p: PcpuId, now: Time) {
        let (at, count) = &mut self.last[p];
        if *at != now {
            (*at, *count) = (now, 0);
        }
        self.halts[v] = Some((now, *count, p));
        *count += 1;
    }

    /// `vcpus` in the order the simulator wakes them at their VM's start: by the instant each
    /// halted, then its dispatch round, then its pCPU; those that never halted first.
    pub(super) fn sort(&self, vcpus: &mut [VcpuId]) {
        vcpus.sort_by_key(|&v| self.halts[v]);
    }
}

impl<B: Backend> Runner<'_, B> {
    /// The VMs due to start their workload: their vCPUs may run it now, and each that halted
    /// meanwhile is woken (first in an instant, as a guest thread's start in the simulator).
    pub(super) fn start_due_vms(&mut self, now: Time) -> Result<(), RealError> {
        for d in 0..self.starts.len() {
            let (at, done) = self.starts[d];
            if done || at > now {
                continue;
            }
            self.starts[d].1 = true;
            self.late(at);
            let mut members: Vec<VcpuId> = (0..self.vm_of.len()).filter(|&v| self.vm_of[v] == d).collect();
            // In the order the simulator's would wake: its halted vCPUs post their wake-ups
            // as they halt (`sim/interpret.rs`, `ThreadState::Unstarted`), each one dispatch
            // after it was given its pCPU, so a pCPU's second halt at an instant comes after
            // every pCPU's first.
            self.start_order.sort(&mut members);
            for v in members {
                self.unstarted[v] = false;
                if self.world.state(v) == VcpuState::Blocked {
                    self.world.set_state(v, VcpuState::Runnable);
                    self.world.with_cx(None, |cx| self.policy.wake(cx, v));
                    self.check_failure()?;
                }
            }
        }
        Ok(())
    }
}
