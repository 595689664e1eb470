//! `eevdf` under Linux core scheduling (linux_core_sched.rs): the core-wide pick on EEVDF's
//! queues. The queue's reference for comparing vruntimes across siblings is its average V
//! (Linux 6.12 uses `min_vruntime`, which this model does not keep).

use super::Eevdf;
use crate::linux_core_sched::{CoreSched, FairQueues};
use vsched_model::{Cx, Decision, PcpuId, VcpuId};

impl Eevdf {
    /// `pick_next_task` under core scheduling: the pick a sibling made for `p`, else the
    /// core-wide pick (after the newly idle pull of an empty queue), then, forced idle, a
    /// steal and the pick again; the previous entity goes back if another runs.
    pub(super) fn core_pick_next(&mut self, cx: &mut Cx, p: PcpuId) -> Decision {
        let now = cx.now();
        let runnable_here = |s: &Self, u: VcpuId| s.se[u].on_rq && !s.se[u].delayed && s.se[u].cpu == p;
        let made = self.core.take_pick(cx, p).filter(|pick| pick.is_none_or(|u| runnable_here(self, u)));
        let mut pick = match made {
            Some(pick) => pick,
            None => {
                if self.pick_task(cx, p).is_none() {
                    self.put_prev(now, p);
                    self.pull(cx, p, 0);
                }
                self.core_select(cx, p)
            }
        };
        if pick.is_none() {
            if let Some(u) = self.core.steal(cx, self, p, |u| !self.se[u].delayed && self.allowed(cx, u, p)) {
                self.move_waiting(cx, u, p);
                cx.count("core_sched.steals");
                pick = self.core_select(cx, p);
            }
        }
        let Some(next) = pick else {
            self.put_prev(now, p);
            return Decision::idle();
        };
        if self.rqs[p].curr != Some(next) {
            self.put_prev(now, p);
            self.set_next(now, p, next);
        }
        Decision { next: Some(next), slice_ns: None }
    }
}

/// What core scheduling reads of the queues.
impl FairQueues for Eevdf {
    /// `pick_task_fair`: charge a sibling's running entity (its slice may end), then pick as
    /// `pick_next_entity` does, delayed entities leaving as they are met.
    fn pick_task(&mut self, cx: &mut Cx, p: PcpuId) -> Option<VcpuId> {
        if cx.here() != Some(p) && self.update_curr(cx.now(), p) {
            cx.count("eevdf.slice_preemptions");
            cx.resched(p);
        }
        loop {
            if self.nr_queued(p) == 0 {
                return None;
            }
            let u = self.pick_next_entity(p)?;
            if !self.se[u].delayed {
                return Some(u);
            }
            self.finish_delayed(p, u);
        }
    }

    fn queued(&self, p: PcpuId) -> Vec<VcpuId> {
        let rq = &self.rqs[p];
        let curr = rq.curr.filter(|&c| self.se[c].on_rq);
        rq.tree.iter().map(|&(_, _, u)| u).chain(curr).filter(|&u| !self.se[u].delayed).collect()
    }

    fn vruntime(&self, v: VcpuId) -> i64 {
        self.se[v].vruntime
    }

    fn min_vruntime(&self, p: PcpuId) -> i64 {
        self.avg_vruntime(p)
    }

    fn core(&mut self) -> &mut CoreSched {
        &mut self.core
    }

    fn nr_running(&self, p: PcpuId) -> usize {
        self.nr_runnable(p)
    }
}
