//! `cfs` under Linux core scheduling (linux_core_sched.rs): the core-wide pick on CFS's
//! queues.

use super::Cfs;
use crate::linux_core_sched::{CoreSched, FairQueues};
use vsched_model::{Cx, PcpuId, VcpuId};

impl Cfs {
    /// `pick_next_task` under core scheduling (linux_core_sched.rs): the pick a sibling made
    /// for `p`, else the newly idle pull and the core-wide pick, then, forced idle, a steal
    /// and the pick again.
    pub(super) fn core_pick(&mut self, cx: &mut Cx, p: PcpuId) -> Option<VcpuId> {
        let made =
            self.core.take_pick(cx, p).filter(|pick| pick.is_none_or(|v| self.se[v].in_tree && self.se[v].cpu == p));
        let pick = match made {
            Some(pick) => pick,
            None => {
                if self.rqs[p].tree.is_empty() {
                    self.pull(cx, p, 0);
                }
                self.core_select(cx, p)
            }
        };
        if pick.is_some() {
            return pick;
        }
        let v = self.core.steal(cx, self, p, |v| self.allowed(cx, v, p))?;
        self.move_waiting(cx, v, p);
        cx.count("core_sched.steals");
        self.core_select(cx, p)
    }
}

/// What core scheduling reads of the queues (linux_core_sched.rs).
impl FairQueues for Cfs {
    /// `pick_task_fair`: charge a sibling's running entity, then choose with it.
    fn pick_task(&mut self, cx: &mut Cx, p: PcpuId) -> Option<VcpuId> {
        self.update_curr(cx, p);
        self.choose(p)
    }

    fn queued(&self, p: PcpuId) -> Vec<VcpuId> {
        self.rqs[p].tree.iter().map(|&(_, u)| u).chain(self.rqs[p].curr).collect()
    }

    fn vruntime(&self, v: VcpuId) -> i64 {
        self.se[v].vruntime
    }

    fn min_vruntime(&self, p: PcpuId) -> i64 {
        self.rqs[p].min_vruntime
    }

    fn core(&mut self) -> &mut CoreSched {
        &mut self.core
    }

    fn nr_running(&self, p: PcpuId) -> usize {
        Cfs::nr_running(self, p)
    }
}
