//! Credit's accounting (`xen/common/sched/credit.c`): what a vCPU pays for the CPU it uses
//! (`burn_credits`, or whoever runs at a tick in Xen 3.x), which vCPUs earn credit (the
//! domains' active lists, `__csched_unit_acct_start` / `_stop`), and `csched_acct`, which
//! every 30 ms shares a period's credits among the active domains by weight, bounded by
//! their caps, and sets each vCPU's priority. The scheduling half is in `credit.rs`.

use crate::credit::{Credit, PRI_OVER, PRI_UNDER};
use vsched_model::{Cx, DomId, Time, VcpuId, NS_PER_MS};

impl Credit {
    /// `burn_credits`: charge a running vCPU for the time since `start_time`.
    pub(crate) fn burn_credits(&mut self, v: VcpuId, now: Time) {
        let s = &mut self.vcpus[v];
        if now <= s.start_time {
            return;
        }
        let val = (now - s.start_time) * self.credits_per_msec as u64 + s.residual;
        self.credit[v] -= (val / NS_PER_MS) as i64;
        s.residual = val % NS_PER_MS;
        s.start_time = now;
    }

    /// `__csched_unit_acct_start`: `v` joins its domain's active list.
    pub(crate) fn acct_start(&mut self, cx: &Cx, v: VcpuId) {
        if self.vcpus[v].active {
            return;
        }
        let d = cx.dom_of(v);
        self.vcpus[v].active = true;
        let dom = &mut self.doms[d];
        dom.active_vcpus.push(v);
        let first = dom.active_vcpus.len() == 1;
        if first {
            self.active_doms.push(d);
        }
        if first || self.profile.weight_per_vcpu {
            self.weight_total += dom.weight as i64;
        }
    }

    /// `__csched_unit_acct_stop_locked`: `v` leaves the active list.
    pub(crate) fn acct_stop(&mut self, cx: &Cx, v: VcpuId) {
        let d = cx.dom_of(v);
        self.vcpus[v].active = false;
        let dom = &mut self.doms[d];
        dom.active_vcpus.retain(|&u| u != v);
        let last = dom.active_vcpus.is_empty();
        if last || self.profile.weight_per_vcpu {
            self.weight_total -= dom.weight as i64;
        }
        if last {
            self.active_doms.retain(|&e| e != d);
        }
    }

    /// A domain's weight in `csched_acct`: weight × active vCPUs from Xen 4.1 (4.1.2
    /// `csched_acct` L1024), the weight alone before (4.0.1 L885). 0 when inactive.
    pub(crate) fn share_weight(&self, d: DomId) -> i64 {
        let dom = &self.doms[d];
        let n_active = dom.active_vcpus.len() as i64;
        if self.profile.weight_per_vcpu {
            dom.weight as i64 * n_active
        } else {
            dom.weight as i64 * n_active.min(1)
        }
    }

    /// Credits one tick is worth (`CSCHED_CREDITS_PER_TICK`, 100 with the defaults).
    pub(crate) fn credits_per_tick(&self) -> i64 {
        self.credits_per_msec * (self.tick_ns / NS_PER_MS) as i64
    }

    /// `csched_acct`: share out a period's credits among active domains.
    pub(crate) fn account(&mut self, cx: &mut Cx) {
        let weight_total = self.weight_total;
        let mut credit_total = self.credits_per_tslice * self.pcpus.len() as i64;
        if self.credit_balance < 0 {
            credit_total -= self.credit_balance;
        }
        if weight_total == 0 {
            self.credit_balance = 0;
            return;
        }
        let credits_per_tslice = self.credits_per_tslice;
        let mut weight_left = weight_total;
        let mut credit_balance = 0i64;
        let mut credit_xtra = false;
        // The walk is over the list as it was (Xen's `list_for_each_safe`): a domain moved to
        // the head or leaving is not met again. Scratch lists spare two allocations per walk.
        let mut doms = std::mem::take(&mut self.acct_doms);
        doms.clear();
        doms.extend_from_slice(&self.active_doms);
        let mut vcpus = std::mem::take(&mut self.acct_vcpus);
        for &d in &doms {
            let weight = self.share_weight(d);
            let (cap, n_active) = (self.doms[d].cap as i64, self.doms[d].active_vcpus.len() as i64);
            weight_left -= weight;
            // At most enough credit to run every active vCPU for a whole period, more only
            // when the system as a whole is in debt.
            let mut credit_peak = n_active * self.credits_per_tslice;
            if self.credit_balance < 0 {
                credit_peak += (-self.credit_balance * weight + (weight_total - 1)) / weight_total;
            }
            let mut credit_cap = 0;
            if cap != 0 {
                credit_cap = (cap * self.credits_per_tslice + 99) / 100;
                credit_peak = credit_peak.min(credit_cap);
                credit_cap = (credit_cap + (n_active - 1)) / n_active;
            }
            let mut credit_fair = (credit_total * weight + (weight_total - 1)) / weight_total;
            if credit_fair < credit_peak {
                credit_xtra = true;
            } else {
                if weight_left != 0 {
                    // Give other domains a chance at the credits this one cannot use.
                    credit_total += ((credit_fair - credit_peak) * weight_total + (weight_left - 1)) / weight_left;
                }
                if credit_xtra {
                    // Lazily keep domains with spare credit at the head of the list.
                    if let Some(i) = self.active_doms.iter().position(|&e| e == d) {
                        self.active_doms.remove(i);
                        self.active_doms.insert(0, d);
                    }
                }
                credit_fair = credit_peak;
            }
            let credit_fair_per_vcpu = (credit_fair + (n_active - 1)) / n_active;
            // Most vCPUs only earn their share and take their priority (see `earn_in_place`);
            // from the first that needs more on, the walk goes over a copy of what is left of
            // the domain's list, as Xen walks it.
            let list = &self.doms[d].active_vcpus;
            let (in_place, earned) = earn_in_place(
                (&mut self.credit, &self.parked, &mut self.pri),
                list,
                credit_fair_per_vcpu,
                (cap, credit_cap),
                credits_per_tslice,
            );
            credit_balance += earned;
            if in_place == list.len() {
                continue;
            }
            vcpus.clear();
            vcpus.extend_from_slice(&list[in_place..]);
            for &v in &vcpus {
                self.credit[v] += credit_fair_per_vcpu;
                let credit = if self.credit[v] < 0 {
                    self.pri[v] = PRI_OVER;
                    if cap != 0 && self.credit[v] < -credit_cap && !self.parked[v] {
                        self.park(cx, v);
                    }
                    self.credit[v] = self.credit[v].max(-credits_per_tslice);
                    self.credit[v]
                } else {
                    self.pri[v] = PRI_UNDER;
                    // Unparking changes no credit: the surplus test may read it first.
                    let (parked, surplus) = (self.parked[v], self.credit[v] > credits_per_tslice);
                    if parked {
                        self.unpark(cx, v);
                    }
                    if surplus {
                        // Not using its share: stop earning, and keep half as a head start
                        // (Xen >= 4.1) or nothing (before).
                        self.acct_stop(cx, v);
                        let credit = self.credit[v];
                        self.credit[v] = if self.profile.halve_surplus { credit / 2 } else { 0 };
                    }
                    self.credit[v]
                };
                credit_balance += credit;
            }
        }
        self.acct_doms = doms;
        self.acct_vcpus = vcpus;
        self.credit_balance = credit_balance;
        self.sort_epoch += 1;
    }

    /// Over its cap: `v` is paused until its credit is positive again (`csched_acct`'s
    /// `CSCHED_FLAG_UNIT_PARKED`), so it leaves its run queue or its pCPU.
    fn park(&mut self, cx: &mut Cx, v: VcpuId) {
        self.parked[v] = true;
        cx.count("credit.parks");
        if self.vcpus[v].queued {
            self.runq_remove(v);
        } else if let Some(q) = cx.running_on(v) {
            cx.resched(q);
        }
    }

    /// Back under its cap: a parked `v` that is runnable is queued again and tickled.
    fn unpark(&mut self, cx: &mut Cx, v: VcpuId) {
        self.parked[v] = false;
        if cx.is_runnable(v) && cx.running_on(v).is_none() {
            let p = self.vcpus[v].processor;
            self.runq_insert(cx, p, v);
            self.tickle(cx, v);
        }
    }
}

/// The common case of `csched_acct`'s walk over one domain's active vCPUs, in list order: a
/// vCPU earns `credit_fair_per_vcpu` and takes its priority (OVER in debt, its debt bounded by
/// one slice's credits; UNDER otherwise). It stops at the first vCPU that needs more (to be
/// parked or unparked, or to leave the active list with a surplus) and leaves it untouched.
/// `(cap, credit_cap)`: the domain's cap (0 for none) and, if capped, the debt per vCPU
/// below which a vCPU is parked.
/// Returns how many vCPUs it did and the sum of their new credits.
///
/// Nothing it does changes the list or anything another vCPU's turn reads, so doing these in
/// place is the walk over a copy of the list, only cheaper.
#[inline]
fn earn_in_place(
    (credits, parked, pri): (&mut [i64], &[bool], &mut [i8]),
    list: &[VcpuId],
    credit_fair_per_vcpu: i64,
    (cap, credit_cap): (i64, i64),
    credits_per_tslice: i64,
) -> (usize, i64) {
    // (All three of one length, so one bounds check serves them all.)
    let (parked, pri) = (&parked[..credits.len()], &mut pri[..credits.len()]);
    let mut earned = 0;
    for (i, &v) in list.iter().enumerate() {
        let credit = credits[v] + credit_fair_per_vcpu;
        let (new_pri, kept) = if credit < 0 {
            if cap != 0 && credit < -credit_cap && !parked[v] {
                return (i, earned);
            }
            (PRI_OVER, credit.max(-credits_per_tslice))
        } else {
            if parked[v] || credit > credits_per_tslice {
                return (i, earned);
            }
            (PRI_UNDER, credit)
        };
        pri[v] = new_pri;
        credits[v] = kept;
        earned += kept;
    }
    (list.len(), earned)
}
