//! credit2's load tracking and balancing: the EWMA of each runqueue's and vCPU's load
//! (`update_runq_load` L1278, `update_svc_load` L1367), where a vCPU is placed
//! (`csched2_res_pick` L2353) and how runqueues even out at each reset (`balance_load` L2701,
//! `consider` L2582, `migrate` L2616). Line numbers are RELEASE-4.22.0's
//! `xen/common/sched/credit2.c`; the same code at 4.12.0, 4.14.0 and 4.21.0.
//!
//! Load is in Q18 fixed point (`1 << 18` = one vCPU always runnable) and time in units of
//! 2^10 ns; the window is 2^20 such units (2^30 ns ≈ 1.07 s). An update `delta` after the
//! last moves the average `delta / W` of the way to the instantaneous load; after more than a
//! window it is the instantaneous load.

use vsched_model::{Cx, PcpuId, VcpuId};

use crate::credit2::{Credit2, LOADAVG_GRANULARITY_SHIFT, LOADAVG_PRECISION_SHIFT, LOADAVG_WINDOW_SHIFT};
use crate::credit2_runq::cycle;

/// `prv->load_window_shift`: the window in units of 2^10 ns (`csched2_init`, L4217).
const W: u32 = LOADAVG_WINDOW_SHIFT - LOADAVG_GRANULARITY_SHIFT;
const P: u32 = LOADAVG_PRECISION_SHIFT;

/// One EWMA step of `avg` towards `load` (already in Q18) over `delta` units.
fn ewma(avg: i64, load_q: i64, delta: i64) -> i64 {
    avg + ((delta * load_q) >> W) - ((delta * avg) >> W)
}

impl Credit2 {
    /// `update_runq_load` (L1278): runqueue `r`'s averages move towards its load, which then
    /// changes by `change`.
    fn update_runq_load(&mut self, r: usize, change: i64, now: i64) {
        let now = now >> LOADAVG_GRANULARITY_SHIFT;
        let rq = &mut self.rqs[r];
        let load_q = rq.load << P;
        if rq.load_last_update + (1 << W) < now {
            rq.avgload = load_q;
            rq.b_avgload = load_q;
        } else {
            let delta = (now - rq.load_last_update).max(0);
            rq.avgload = ewma(rq.avgload, load_q, delta);
            rq.b_avgload = ewma(rq.b_avgload, load_q, delta);
        }
        rq.load += change;
        rq.load_last_update = now;
    }

    /// `update_svc_load` (L1367): `v`'s average moves towards 1 if it was runnable since the
    /// last update (it is leaving, `change` -1, or runnable now with `change` 0), else 0.
    fn update_svc_load(&mut self, cx: &Cx, v: VcpuId, change: i64, now: i64) {
        let load = match change {
            -1 => 1,
            1 => 0,
            _ => self.runnable(cx, v) as i64,
        };
        self.svc_load_towards(v, load, now);
    }

    /// `update_load` (L1426): the runqueue's load, and `v`'s if given. A change of 0 with a
    /// vCPU comes only from `csched2_schedule` running it on, so it is runnable.
    pub(crate) fn update_load(&mut self, r: usize, v: Option<VcpuId>, change: i64, now: i64) {
        self.update_runq_load(r, change, now);
        if let Some(v) = v {
            let load = if change == 0 { 1 } else { (-change).max(0) };
            self.svc_load_towards(v, load, now);
        }
    }

    /// `update_svc_load` with the load already decided (1 or 0).
    fn svc_load_towards(&mut self, v: VcpuId, load: i64, now: i64) {
        let now = now >> LOADAVG_GRANULARITY_SHIFT;
        let s = &mut self.vcpus[v];
        if s.load_last_update + (1 << W) < now {
            s.avgload = load << P;
        } else {
            let delta = (now - s.load_last_update).max(0);
            s.avgload = ewma(s.avgload, load << P, delta);
        }
        s.load_last_update = now;
    }

    /// `csched2_res_pick` (L2353) without a migration request: the runqueue with the lowest
    /// `b_avgload` (its own counted without `v`'s load), and in it the pCPU after its
    /// `pick_bias`, which moves there. Returns (runqueue, pCPU).
    pub(crate) fn res_pick(&mut self, cx: &Cx, v: VcpuId) -> (usize, PcpuId) {
        let mut min: Option<(i64, usize)> = None;
        for (r, rq) in self.rqs.iter().enumerate() {
            if !rq.cpus.iter().any(|&q| Credit2::allowed(cx, v, q)) {
                continue;
            }
            let load =
                if self.vcpus[v].rq == Some(r) { (rq.b_avgload - self.vcpus[v].avgload).max(0) } else { rq.b_avgload };
            if min.is_none_or(|(m, _)| load < m) {
                min = Some((load, r));
            }
        }
        let r = min.map_or(0, |(_, r)| r);
        let p = self.place_on(cx, v, r);
        (r, p)
    }

    /// The pCPU of runqueue `r` after its `pick_bias` that `v` may run on, which becomes the
    /// new `pick_bias` (`cpumask_cycle(rqd->pick_bias, ...)`).
    fn place_on(&mut self, cx: &Cx, v: VcpuId, r: usize) -> PcpuId {
        let rq = &self.rqs[r];
        let p = cycle(rq.pick_bias, &rq.cpus, |q| Credit2::allowed(cx, v, q)).unwrap_or(rq.cpus[0]);
        self.rqs[r].pick_bias = p;
        p
    }

    /// `balance_load` (L2701), at a reset on `p`: find the runqueue whose `b_avgload` differs
    /// most from `p`'s; if the difference passes the tolerance (`credit2_balance_under` below
    /// full load, `credit2_balance_over` at it, as log2 of a vCPU's load), push, pull or swap
    /// the vCPUs (one each way at most) that leave the smallest difference.
    pub(crate) fn balance_load(&mut self, cx: &mut Cx, p: PcpuId) {
        let now = cx.now() as i64;
        let l = self.pcpus[p].rq;
        self.update_runq_load(l, 0, now);
        let mut load_delta = 0;
        let mut max_delta: Option<usize> = None;
        // `st.orqd` after the scan: the last runqueue met (see the fidelity notes).
        let mut last = l;
        for o in 0..self.rqs.len() {
            last = o;
            if o == l {
                continue;
            }
            self.update_runq_load(o, 0, now);
            let delta = (self.rqs[l].b_avgload - self.rqs[o].b_avgload).abs();
            if delta > load_delta {
                load_delta = delta;
                max_delta = Some(o);
            }
        }
        let Some(o) = max_delta else { return };
        let load_max = self.rqs[l].b_avgload.max(self.rqs[last].b_avgload);
        let cpus_max = self.rqs[l].cpus.len().max(self.rqs[last].cpus.len()) as i64;
        let tolerance = if load_max < cpus_max << P { self.balance_under } else { self.balance_over };
        if load_delta < 1 << (P as i32 + tolerance) {
            return;
        }
        let movable = |s: &Credit2, v: VcpuId, to: usize| {
            s.vcpus[v].migrate_to.is_none() && s.rqs[to].cpus.iter().any(|&q| Credit2::allowed(cx, v, q))
        };
        let (lb, ob) = (self.rqs[l].b_avgload, self.rqs[o].b_avgload);
        let mut best: (i64, Option<VcpuId>, Option<VcpuId>) = (load_delta, None, None);
        let mut consider = |push: Option<VcpuId>, pull: Option<VcpuId>, s: &Credit2| {
            let (mut lo, mut oo) = (lb, ob);
            if let Some(v) = push {
                lo -= s.vcpus[v].avgload;
                oo += s.vcpus[v].avgload;
            }
            if let Some(v) = pull {
                lo += s.vcpus[v].avgload;
                oo -= s.vcpus[v].avgload;
            }
            let delta = (lo - oo).abs();
            if delta < best.0 {
                best = (delta, push, pull);
            }
        };
        let pushes = self.rqs[l].svc.clone();
        let pulls = self.rqs[o].svc.clone();
        let mut inner_updated = false;
        for &push in &pushes {
            self.update_svc_load(cx, push, 0, now);
            if !movable(self, push, o) {
                continue;
            }
            for &pull in &pulls {
                if !inner_updated {
                    self.update_svc_load(cx, pull, 0, now);
                }
                if !movable(self, pull, l) {
                    continue;
                }
                consider(Some(push), Some(pull), self);
            }
            inner_updated = true;
            consider(Some(push), None, self);
        }
        for &pull in &pulls {
            if movable(self, pull, l) {
                consider(None, Some(pull), self);
            }
        }
        let (_, push, pull) = best;
        if let Some(v) = push {
            self.migrate(cx, v, o);
        }
        if let Some(v) = pull {
            self.migrate(cx, v, l);
        }
    }

    /// `migrate` (L2616): `v` to runqueue `to`. A running vCPU is flagged and its pCPU
    /// tickled: it moves when switched out (`finish_migration`). Any other is moved now, onto
    /// the pCPU after the target's `pick_bias`, and requeued there (tickling) if it was
    /// queued.
    fn migrate(&mut self, cx: &mut Cx, v: VcpuId, to: usize) {
        let now = cx.now() as i64;
        cx.count("credit2.migrations");
        if cx.running_on(v).is_some() || self.picking == Some(v) {
            self.vcpus[v].migrate_to = Some(to);
            let q = self.vcpus[v].processor;
            self.tickle_cpu(cx, q);
            return;
        }
        let from = self.vcpus[v].rq.expect("a balanced vCPU has a runqueue");
        let on_runq = self.vcpus[v].queued;
        if on_runq {
            self.runq_remove(v);
            self.update_runq_load(from, -1, now);
        }
        self.runq_deassign(v);
        let p = self.place_on(cx, v, to);
        self.vcpus[v].processor = p;
        self.runq_assign(v, to);
        if on_runq {
            self.update_runq_load(to, 1, now);
            self.runq_insert(v);
            self.runq_tickle(cx, v);
        }
    }

    /// `vcpu_migrate_finish` for a vCPU `migrate` flagged, once switched out (and out of its
    /// runqueue's load): `csched2_res_pick` honours the request (the pCPU after the target's
    /// `pick_bias`), `csched2_unit_migrate` calls `migrate` (which places it again, after
    /// the new bias), and `vcpu_wake` queues it there if it is runnable.
    pub(crate) fn finish_migration(&mut self, cx: &mut Cx, v: VcpuId) {
        let Some(to) = self.vcpus[v].migrate_to.take() else { return };
        self.place_on(cx, v, to);
        self.runq_deassign(v);
        let p = self.place_on(cx, v, to);
        self.vcpus[v].processor = p;
        self.runq_assign(v, to);
        if self.runnable(cx, v) {
            let now = cx.now() as i64;
            self.update_load(to, Some(v), 1, now);
            self.runq_insert(v);
            self.runq_tickle(cx, v);
        }
    }
}
