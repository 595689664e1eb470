//! credit2's scheduling path: what a running vCPU pays (`burn_credits`, `t2c_update`), the
//! end of an epoch (`reset_credit`), the choice (`runq_candidate`), the slice
//! (`csched2_runtime`) and the whole of `csched2_schedule` with the `csched2_context_saved`
//! of the vCPU switched out. Line numbers are RELEASE-4.22.0's `xen/common/sched/credit2.c`.

use vsched_model::{Cx, Decision, PcpuId, Time, VcpuId};

use crate::credit2::{
    Credit2, CARRYOVER_MAX_NS, CREDIT_INIT_NS, CREDIT_MIN_NS, CREDIT_RESET_NS, MAX_TIMER_NS, MIGRATE_COMPENSATION_NS,
    MIN_TIMER_NS,
};

/// What `runq_candidate` chose.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pick {
    Idle,
    Vcpu(VcpuId),
}

impl Credit2 {
    /// `burn_credits` (L1865) and `t2c_update` (L816): charge running `v` for the time since
    /// `start_time`, `max_weight / weight` ns of credit per ns, the division's remainder kept;
    /// floored at `CREDIT_MIN` from 4.14. A capped vCPU also spends budget.
    pub(crate) fn burn_credits(&mut self, cx: &Cx, v: VcpuId) {
        let now = cx.now();
        let s = &self.vcpus[v];
        if now <= s.start_time {
            return;
        }
        let delta = now - s.start_time;
        let r = s.rq.expect("a running vCPU has a runqueue");
        let max_weight = self.rqs[r].max_weight as u64;
        let s = &mut self.vcpus[v];
        let val = delta * max_weight + s.residual;
        s.residual = val % s.weight as u64;
        s.credit -= (val / s.weight as u64) as i64;
        if self.profile.credit_floor && s.credit < CREDIT_MIN_NS {
            s.credit = CREDIT_MIN_NS;
        }
        if let Some(b) = s.budget.as_mut() {
            *b -= delta as i64;
        }
        s.start_time = now;
    }

    /// `reset_credit` (L1783): a new epoch for `p`'s runqueue. Every vCPU assigned to it
    /// (running ones charged first) gains `CREDIT_INIT` (twice that if `snext` sits at the
    /// floor; 4.12: as many times as it takes to bring `snext` above 0), clipped at
    /// `CREDIT_INIT + CARRYOVER_MAX`. A running vCPU out of budget has its pCPU tickled.
    fn reset_credit(&mut self, cx: &mut Cx, p: PcpuId, snext: VcpuId) {
        let r = self.pcpus[p].rq;
        let credit = self.vcpus[snext].credit;
        let reset = if self.profile.credit_floor {
            if credit == CREDIT_MIN_NS {
                2 * CREDIT_INIT_NS
            } else {
                CREDIT_INIT_NS
            }
        } else {
            let m = if credit < -CREDIT_INIT_NS { 1 + (-credit) / CREDIT_INIT_NS } else { 1 };
            m * CREDIT_INIT_NS
        };
        let svc = std::mem::take(&mut self.rqs[r].svc);
        for &u in &svc {
            let q = self.vcpus[u].processor;
            if cx.curr(q) == Some(u) {
                self.burn_credits(cx, u);
                if self.vcpus[u].budget.is_some_and(|b| b <= 0) {
                    self.tickle_cpu(cx, q);
                }
            }
            let s = &mut self.vcpus[u];
            s.credit = (s.credit + reset).min(CREDIT_INIT_NS + CARRYOVER_MAX_NS);
            s.start_time = cx.now();
        }
        self.rqs[r].svc = svc;
        cx.count("credit2.resets");
    }

    /// The credit of a pick (the idle vCPU's is `CSCHED2_IDLE_CREDIT`).
    fn credit_of(&self, pick: Pick) -> i64 {
        match pick {
            Pick::Idle => self.idle_credit(),
            Pick::Vcpu(v) => self.vcpus[v].credit,
        }
    }

    /// `runq_candidate` (L3384): the current vCPU while it is within its rate limit (unless it
    /// yields); else the first queued vCPU that may run here and has more credit than the
    /// current one (or the idle vCPU), or any such vCPU if the current one yields. A vCPU
    /// tickled for another pCPU that has not scheduled yet is left to it, one last run on
    /// another pCPU must beat the candidate by the migration resistance, and a capped one
    /// must get budget. Also returns how many queued vCPUs were passed over (4.12's reset
    /// rule).
    fn runq_candidate(&mut self, cx: &mut Cx, p: PcpuId, scurr: Option<VcpuId>) -> (Pick, u32) {
        let now = cx.now() as i64;
        let mut yield_ = false;
        let mut snext = Pick::Idle;
        if let Some(c) = scurr {
            yield_ = std::mem::take(&mut self.vcpus[c].yielding);
            let runnable = self.runnable(cx, c);
            if !yield_
                && self.ratelimit_ns != 0
                && runnable
                && now - (self.vcpus[c].run_start as i64) < self.ratelimit_ns
            {
                cx.count("credit2.ratelimited");
                return (Pick::Vcpu(c), 0);
            }
            if runnable {
                snext = Pick::Vcpu(c);
            }
        }
        let r = self.pcpus[p].rq;
        let mut skipped = 0;
        let mut i = 0;
        while i < self.rqs[r].runq.len() {
            let svc = self.rqs[r].runq[i];
            let snext_credit = self.credit_of(snext);
            let credit = self.vcpus[svc].credit;
            let stops = self.profile.scan_stops_on_credit;
            if stops && !yield_ && credit <= snext_credit {
                break;
            }
            i += 1;
            if stops && !self.runnable(cx, svc) {
                continue;
            }
            if !Credit2::allowed(cx, svc, p) {
                skipped += 1;
                continue;
            }
            if let Some(t) = self.vcpus[svc].tickled_cpu {
                if t != p && self.pcpus[t].tickled {
                    skipped += 1;
                    continue;
                }
            }
            if self.vcpus[svc].processor != p && snext_credit + self.migrate_resist_ns > credit {
                skipped += 1;
                continue;
            }
            // Before 4.16 the first vCPU that passes the checks decides: taken if better.
            if !stops && !yield_ && credit <= snext_credit {
                break;
            }
            if self.vcpus[svc].budget.is_some() && !self.grab_budget(cx, svc) {
                if !stops {
                    break;
                }
                // Parked: it left the runqueue, and the next one is at `i - 1` now.
                i -= 1;
                continue;
            }
            snext = Pick::Vcpu(svc);
            break;
        }
        if yield_ && snext != scurr.map_or(Pick::Idle, Pick::Vcpu) {
            cx.count("credit2.yields_passed_over");
        }
        (snext, skipped)
    }

    /// `csched2_runtime` (L3281): how long `snext` runs. Until its credit falls to the best
    /// waiter's (the head of the runqueue if it has credit; from 4.21 also the vCPU being
    /// switched out, `inflight`), or to 0, converted back to time at its weight; no more than
    /// a capped vCPU's budget; within [max(`MIN_TIMER`, what is left of the rate limit),
    /// `MAX_TIMER`].
    fn runtime(&self, cx: &Cx, p: PcpuId, snext: VcpuId, continuing: bool, inflight: i64) -> Time {
        let now = cx.now() as i64;
        let r = self.pcpus[p].rq;
        let s = &self.vcpus[snext];
        let mut min_time = MIN_TIMER_NS;
        if self.ratelimit_ns != 0 {
            let left = if continuing { s.run_start as i64 + self.ratelimit_ns - now } else { self.ratelimit_ns };
            min_time = min_time.max(left);
        }
        let mut rt_credit = s.credit;
        let head = self.rqs[r].runq.first().map(|&u| self.vcpus[u].credit).filter(|&c| c > 0).unwrap_or(0);
        let swait = if self.profile.inflight_runtime { head.max(inflight) } else { head };
        if swait > 0 {
            rt_credit = s.credit - swait;
        }
        // `c2t`: credit back to time at this vCPU's weight.
        let mut time = if rt_credit > 0 { rt_credit * s.weight as i64 / self.rqs[r].max_weight as i64 } else { 0 };
        if let Some(b) = s.budget {
            time = time.min(b);
        }
        if time < min_time {
            time = min_time;
        } else if time > MAX_TIMER_NS {
            time = MAX_TIMER_NS;
        }
        time as Time
    }

    /// `csched2_schedule` (L3582) on `p`, whose vCPU was `prev`, then `csched2_context_saved`
    /// (L2311) of `prev` if it is switched out: requeued and tickling if still runnable, out
    /// of the runqueue's load if not, and moved to another runqueue if `balance_load` asked.
    pub(crate) fn schedule(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        let now = cx.now() as i64;
        let r = self.pcpus[p].rq;
        if self.pcpus[p].tickled {
            self.pcpus[p].tickled = false;
            self.smt_idle_set(p);
        }
        if let Some(c) = prev {
            self.burn_credits(cx, c);
            if self.vcpus[c].budget.is_some_and(|b| b <= 0) {
                self.grab_budget(cx, c);
            }
        }
        let (snext, skipped) = self.runq_candidate(cx, p, prev);
        let requeue = prev.filter(|&c| snext != Pick::Vcpu(c) && self.runnable(cx, c));
        let mut inflight = 0;
        let decision = match snext {
            Pick::Vcpu(v) => {
                let continuing = prev == Some(v);
                if continuing {
                    if self.profile.load_on_continue {
                        self.update_load(r, Some(v), 0, now);
                    }
                } else {
                    self.runq_remove(v);
                }
                if self.pcpus[p].idle {
                    self.pcpus[p].idle = false;
                    self.smt_idle_clear(p);
                }
                let head = self.rqs[r].runq.first().map(|&u| self.vcpus[u].credit);
                let reset = if self.profile.reset_on_top_credit {
                    head.map_or(self.vcpus[v].credit, |h| h.max(self.vcpus[v].credit)) <= CREDIT_RESET_NS
                } else {
                    skipped == 0 && self.vcpus[v].credit <= CREDIT_RESET_NS
                };
                if reset {
                    self.picking = Some(v);
                    self.reset_credit(cx, p, v);
                    self.balance_load(cx, p);
                    self.picking = None;
                }
                if let Some(c) = requeue {
                    inflight = self.vcpus[c].credit;
                }
                let s = &mut self.vcpus[v];
                s.start_time = cx.now();
                s.tickled_cpu = None;
                if !continuing {
                    s.run_start = cx.now();
                }
                if s.processor != p {
                    s.credit += MIGRATE_COMPENSATION_NS;
                    s.processor = p;
                }
                Decision::run(v, self.runtime(cx, p, v, continuing, inflight))
            }
            Pick::Idle => {
                if !self.pcpus[p].idle {
                    self.pcpus[p].idle = true;
                    self.smt_idle_set(p);
                }
                self.update_load(r, None, 0, now);
                Decision::idle()
            }
        };
        if let Some(c) = prev.filter(|&c| decision.next != Some(c)) {
            self.switched = Some((p, decision.next));
            self.context_saved(cx, c, requeue.is_some());
            self.switched = None;
        }
        // A vCPU that `balance_load` asked to move while it was being picked runs until its
        // pCPU, tickled by `migrate`, schedules again.
        decision
    }

    /// `csched2_context_saved` (L2311) of `c`, just switched out: a capped vCPU returns its
    /// budget left (unparking its domain's parked vCPUs); a preempted one is queued again and
    /// tickles; any other leaves the runqueue's load. Then, if `balance_load` asked for it,
    /// `vcpu_migrate_finish`: `csched2_res_pick`, `migrate` and, if runnable, the wake-up.
    fn context_saved(&mut self, cx: &mut Cx, c: VcpuId, requeue: bool) {
        let now = cx.now() as i64;
        if self.vcpus[c].budget.is_some_and(|b| b > 0) {
            self.return_budget(cx, c);
        }
        let r = self.vcpus[c].rq.expect("a vCPU that ran has a runqueue");
        if requeue && self.runnable(cx, c) {
            self.runq_insert(c);
            self.runq_tickle(cx, c);
        } else {
            self.update_load(r, Some(c), -1, now);
        }
        if self.vcpus[c].migrate_to.is_some() {
            self.finish_migration(cx, c);
        }
    }
}
