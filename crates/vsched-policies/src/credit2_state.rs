//! What credit2's callbacks ask of its state: whether a vCPU may run, what runs on a pCPU
//! while a switch is under way, the idle vCPU's credit, the trace's counters, and the
//! bookkeeping checked after every event in debug builds.

use vsched_model::{Cx, PcpuId, VcpuId};

use crate::credit2::{Credit2, CREDIT_MIN_NS};

impl Credit2 {
    /// The credit of the idle vCPU (`CSCHED2_IDLE_CREDIT`).
    pub(crate) fn idle_credit(&self) -> i64 {
        if self.profile.credit_floor {
            CREDIT_MIN_NS - 1
        } else {
            -(1 << 30)
        }
    }

    /// Whether `v` may run: runnable, not parked, not on its way to another runqueue
    /// (`unit_runnable`, with `_VPF_parked` and `_VPF_migrating`).
    pub(crate) fn runnable(&self, cx: &Cx, v: VcpuId) -> bool {
        let s = &self.vcpus[v];
        cx.is_runnable(v) && !s.parked && s.migrate_to.is_none()
    }

    /// What runs on `q` (`curr_on_cpu`), the switch in progress included.
    pub(crate) fn curr_on(&self, cx: &Cx, q: PcpuId) -> Option<VcpuId> {
        match self.switched {
            Some((p, next)) if p == q => next,
            _ => cx.curr(q),
        }
    }

    /// Publishes the trace's counters that changed (only in a traced run).
    pub(crate) fn publish(&mut self, cx: &mut Cx) {
        if self.published.on() {
            let (pcpus, rqs, vcpus) = (&self.pcpus, &self.rqs, &self.vcpus);
            self.published.publish(cx, |p| rqs[pcpus[p].rq].runq.len(), |v| vcpus[v].credit / 1_000);
        }
    }

    /// Whether `v` may run on `p` (its hard affinity).
    pub(crate) fn allowed(cx: &Cx, v: VcpuId, p: PcpuId) -> bool {
        cx.pinned(v).is_none_or(|q| q == p)
    }

    /// Bookkeeping: each queued vCPU is in its runqueue once, runnable and not running; each
    /// runqueue is sorted by credit and its load counts its queued and running vCPUs.
    pub(crate) fn check_books(&self, cx: &Cx) -> Result<(), String> {
        for (r, rq) in self.rqs.iter().enumerate() {
            for w in rq.runq.windows(2) {
                if self.vcpus[w[0]].credit < self.vcpus[w[1]].credit {
                    return Err(format!("runqueue {r} out of credit order: {:?}", rq.runq));
                }
            }
            for &u in &rq.runq {
                let s = &self.vcpus[u];
                if !s.queued || s.rq != Some(r) || !self.runnable(cx, u) || cx.running_on(u).is_some() {
                    return Err(format!(
                        "vCPU {u} in runqueue {r}: queued {}, rq {:?}, {:?}",
                        s.queued,
                        s.rq,
                        cx.state(u)
                    ));
                }
            }
            let running = rq.svc.iter().filter(|&&u| cx.running_on(u).is_some()).count();
            if rq.load != (rq.runq.len() + running) as i64 {
                return Err(format!(
                    "runqueue {r}: load {} but {} queued and {running} running",
                    rq.load,
                    rq.runq.len()
                ));
            }
        }
        let flagged = self.vcpus.iter().filter(|s| s.queued).count();
        let queued: usize = self.rqs.iter().map(|rq| rq.runq.len()).sum();
        if flagged != queued {
            return Err(format!("{flagged} vCPUs flagged queued but {queued} runqueue entries"));
        }
        Ok(())
    }
}
