//! credit2's caps (L1919-L2155 of RELEASE-4.22.0 `xen/common/sched/credit2.c`, the same
//! since 4.10): a capped domain has a budget of `cap% × credit2_cap_period_ms`, refilled
//! every period (`replenish_domain_budget`); a vCPU takes `max(budget / vCPUs, 500 µs)` from
//! it before it runs (`unit_grab_budget`), spends it as it runs (`burn_credits`), gives back
//! what it did not use when switched out (`unit_return_budget`), and is parked, out of its
//! runqueue, when the domain has none left (`park_unit`), until budget comes back
//! (`unpark_parked_units`). A slice never outlasts the vCPU's budget (`csched2_runtime`).

use vsched_model::{Cx, DomId, VcpuId};

use crate::credit2::{Credit2, TIMER_REPLENISH};

impl Credit2 {
    /// `csched2_dom_cntl` setting a cap on domain `d` (L2967-L3050): its budget is full, its
    /// first refill one period away; its vCPUs start with no budget of their own (set in
    /// `vcpu_insert`).
    pub(crate) fn cap_init(&mut self, cx: &mut Cx, d: DomId) {
        let dom = &mut self.doms[d];
        if dom.cap == 0 {
            return;
        }
        dom.tot_budget = self.cap_period_ns * dom.cap as i64 / 100;
        dom.budget = dom.tot_budget;
        dom.next_repl = cx.now() + self.cap_period_ns as u64;
        let at = dom.next_repl;
        cx.set_timer(at, TIMER_REPLENISH + d as u64);
    }

    /// `unit_grab_budget` (L1948): whether `v` has budget to run, taking its quota (or what
    /// is left) from its domain, whose pool first pays `v`'s overrun. Parks `v` if none.
    pub(crate) fn grab_budget(&mut self, cx: &mut Cx, v: VcpuId) -> bool {
        let Some(budget) = self.vcpus[v].budget else { return true };
        if budget > 0 {
            return true;
        }
        let d = cx.dom_of(v);
        let dom = &mut self.doms[d];
        dom.budget += budget;
        if dom.budget > 0 {
            let take = self.vcpus[v].budget_quota.min(dom.budget);
            dom.budget -= take;
            self.vcpus[v].budget = Some(take);
            true
        } else {
            self.vcpus[v].budget = Some(0);
            self.park(cx, v);
            false
        }
    }

    /// `park_unit` (L1919): `v` may not run until its domain has budget; a queued `v` leaves
    /// its runqueue and its load.
    fn park(&mut self, cx: &mut Cx, v: VcpuId) {
        self.vcpus[v].parked = true;
        cx.count("credit2.parks");
        if self.vcpus[v].queued {
            self.runq_remove(v);
            let r = self.vcpus[v].rq.expect("a queued vCPU has a runqueue");
            let now = cx.now() as i64;
            self.update_load(r, Some(v), -1, now);
        }
        let d = cx.dom_of(v);
        self.doms[d].parked.insert(0, v);
    }

    /// `unit_return_budget` (L1995): switched-out `v` gives back its unused budget; if the
    /// domain then has some, its parked vCPUs are unparked.
    pub(crate) fn return_budget(&mut self, cx: &mut Cx, v: VcpuId) {
        let d = cx.dom_of(v);
        let left = self.vcpus[v].budget.replace(0).unwrap_or(0);
        self.doms[d].budget += left;
        if self.doms[d].budget > 0 {
            self.unpark_all(cx, d);
        }
    }

    /// `unpark_parked_units` (L2036): every parked vCPU of `d` may run again; a runnable one
    /// that is not running is queued and tickles.
    fn unpark_all(&mut self, cx: &mut Cx, d: DomId) {
        let parked = std::mem::take(&mut self.doms[d].parked);
        let now = cx.now() as i64;
        for v in parked {
            self.vcpus[v].parked = false;
            let running = cx.running_on(v).is_some();
            if !running && !self.vcpus[v].queued && self.runnable(cx, v) {
                let r = self.vcpus[v].rq.expect("an inserted vCPU has a runqueue");
                self.update_load(r, Some(v), 1, now);
                self.runq_insert(v);
                self.runq_tickle(cx, v);
            }
        }
    }

    /// `replenish_domain_budget` (L2089): a period's budget (more if the timer is late by a
    /// period or more), at most one period's in all, then unpark; the next refill a period on.
    pub(crate) fn replenish(&mut self, cx: &mut Cx, d: DomId) {
        let now = cx.now();
        let period = self.cap_period_ns as u64;
        let dom = &mut self.doms[d];
        dom.next_repl += period;
        dom.budget += dom.tot_budget;
        while dom.next_repl <= now {
            dom.next_repl += period;
            dom.budget += dom.tot_budget;
        }
        let at = dom.next_repl;
        if dom.budget > 0 {
            dom.budget = dom.budget.min(dom.tot_budget);
            self.unpark_all(cx, d);
        }
        cx.set_timer(at, TIMER_REPLENISH + d as u64);
    }
}
