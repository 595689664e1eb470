//! Credit's run queues (`xen/common/sched/credit.c`): how a vCPU joins and leaves its pCPU's
//! queue (`__runq_insert`, `__runq_remove`), the re-sort after an accounting
//! (`csched_runq_sort`), which pCPUs hear of a queued vCPU (`__runq_tickle`), and what a pCPU
//! with nothing better steals from a peer's queue (`csched_load_balance`'s walk,
//! `csched_runq_steal`). Xen's queues are linked lists; these are vectors, so an insert or a
//! removal shifts the entries behind it, where Xen relinks two pointers: the same order, at a
//! cost that grows with the queue's length. The scheduling half is in `credit.rs`.

use crate::credit::{Credit, YieldPlacement, PRI_IDLE, PRI_UNDER};
use crate::xen_version::Tickle;
use vsched_model::{Cx, PcpuId, VcpuId};

impl Credit {
    /// `__runq_insert`: after every vCPU of equal or higher priority. A yielding vCPU goes
    /// where `yield_placement` says: also behind the first lower-priority vCPU, if there is one
    /// (Xen); behind everyone (`Tail`); or first (`Head`: `pick_next` holds it out of its choice).
    ///
    /// So a queue is not always in priority order: `Xen` and `Tail` can leave a yielder behind
    /// lower-priority vCPUs (Xen's comment on this rule: the next `csched_runq_sort`, after an
    /// accounting, brings it forward), `Head` can put an OVER yielder before UNDER vCPUs, and
    /// accounting changes priorities between sorts. Readers cope as Xen's do: a pCPU runs its
    /// head, an insert stops at the first lower-priority entry, and stealing stops at the first
    /// entry that does not outrank the thief (`csched_runq_steal`'s `break`).
    ///
    /// From Xen 4.18 a vCPU that yielded and then left its pCPU without being queued (it
    /// blocked, or migrates) keeps YIELD, so it may be inserted as a yielder at its wake-up,
    /// into the queue of a pCPU that runs idle. There Xen's idle vCPU is not queued behind
    /// the others, and the yielder steps over a lower-priority vCPU only if another entry
    /// follows it (RELEASE-4.19.0 `__runq_insert`, L302). Where every entry outranks it, Xen
    /// reads the list head as a vCPU; we take no step.
    pub(crate) fn runq_insert(&mut self, cx: &Cx, p: PcpuId, v: VcpuId) {
        let pri = self.pri[v];
        let runq = &self.pcpus[p].runq;
        let mut i = runq.iter().position(|&u| pri > self.pri[u]).unwrap_or(runq.len());
        if self.vcpus[v].yielding || self.vcpus[v].yield_kept {
            i = match self.yield_placement {
                // Before Xen 4.1 a yield is a plain reschedule: behind its peers only.
                YieldPlacement::Xen if !self.profile.yield_flag => i,
                YieldPlacement::Xen if cx.curr(p).is_none() && i + 1 >= runq.len() => i,
                YieldPlacement::Xen => (i + 1).min(runq.len()),
                YieldPlacement::Tail => runq.len(),
                YieldPlacement::Head => 0,
            };
        }
        self.pcpus[p].runq.insert(i, v);
        let s = &mut self.vcpus[v];
        s.queued = true;
        s.processor = p;
    }

    /// `__runq_remove`, which since Xen 4.18 also clears a kept YIELD flag.
    pub(crate) fn runq_remove(&mut self, v: VcpuId) {
        let s = &mut self.vcpus[v];
        if s.queued {
            s.queued = false;
            s.yield_kept = false;
            let runq = &mut self.pcpus[s.processor].runq;
            // A vCPU is queued once: the scan stops where it is (Xen's `list_del` is O(1)).
            if let Some(i) = runq.iter().position(|&u| u == v) {
                runq.remove(i);
            }
        }
    }

    /// `csched_runq_sort` (4.19 `credit.c`, the same since 4.1): after an accounting, move every
    /// vCPU of priority UNDER or above ahead of the OVER ones, each group keeping its order. It
    /// is a stable partition, not a sort: BOOST is not moved ahead of UNDER (nor BCS's COS ahead
    /// of either), as Xen's walk moves an element only up to the last UNDER-or-above one.
    pub(crate) fn runq_sort(&mut self, p: PcpuId) {
        if self.pcpus[p].sort_epoch == self.sort_epoch {
            return;
        }
        self.pcpus[p].sort_epoch = self.sort_epoch;
        // (Slices, not the vectors: their length and address then stay in registers.)
        let pri: &[i8] = &self.pri;
        let runq = &mut self.pcpus[p].runq;
        // Everything before the first OVER vCPU stays; from there, UNDER-or-above vCPUs close
        // up behind it and the OVER ones follow, in order.
        let Some(first_over) = runq.iter().position(|&u| pri[u] < PRI_UNDER) else { return };
        let over = &mut self.runq_sort_over;
        over.clear();
        let mut kept = first_over;
        let entries: &mut [VcpuId] = runq;
        for i in first_over..entries.len() {
            let u = entries[i];
            if pri[u] >= PRI_UNDER {
                entries[kept] = u;
                kept += 1;
            } else {
                over.push(u);
            }
        }
        runq.truncate(kept);
        runq.extend_from_slice(over);
    }

    fn cur_pri(&self, cx: &Cx, p: PcpuId) -> i8 {
        cx.curr(p).map_or(PRI_IDLE, |u| self.pri[u])
    }

    /// `__runq_tickle`: after `v` was queued on its processor, send a reschedule to the
    /// pCPU(s) that should look at it, by the rule of the `xen_version` (see `Tickle`).
    pub(crate) fn tickle(&mut self, cx: &mut Cx, v: VcpuId) {
        let p = self.vcpus[v].processor;
        let outranks = self.pri[v] > self.cur_pri(cx, p);
        let busy = cx.curr(p).is_some();
        let any_idle = !self.idlers.is_empty();
        let mut targets = std::mem::take(&mut self.tickle_targets);
        targets.clear();
        match self.profile.tickle {
            Tickle::IdlersFirst => {
                if !busy || (!any_idle && outranks) {
                    targets.push(p);
                } else if any_idle {
                    self.idlers_to_tickle(&mut targets);
                }
            }
            Tickle::PreemptAndIdlers => {
                if outranks {
                    targets.push(p);
                }
                if busy && any_idle {
                    self.idlers_to_tickle(&mut targets);
                }
            }
        }
        for &q in &targets {
            // Since Xen 4.3 tickled pCPUs leave the idlers mask at once, so the next wake-up
            // picks another; before, a pCPU leaves it when it schedules a vCPU.
            if self.profile.tickle == Tickle::IdlersFirst {
                self.idlers.remove(q);
            }
            cx.count("credit.tickles");
            cx.resched(q);
        }
        self.tickle_targets = targets;
    }

    /// Appends the idle pCPUs a tickle wakes to `targets`: one, round robin after the last
    /// one tickled, or all.
    fn idlers_to_tickle(&mut self, targets: &mut Vec<PcpuId>) {
        if self.tickle_one_idle {
            if let Some(q) = self.idlers.cycle(self.last_tickle) {
                self.last_tickle = q;
                targets.push(q);
            }
        } else {
            let n = self.pcpus.len();
            targets.extend((1..=n).map(|k| (self.last_tickle + k) % n).filter(|&q| self.idlers.contains(q)));
        }
    }

    /// `csched_runq_steal` over peers, round robin from the last pCPU stolen from
    /// (`balance_bias`): the first queued vCPU of strictly higher priority than `pri` (left
    /// queued; `commit` moves it). Under a spread rule, never one with a sibling on `p`.
    pub(crate) fn load_balance(&mut self, cx: &mut Cx, p: PcpuId, pri: i8) -> Option<VcpuId> {
        let n = self.pcpus.len();
        for k in 1..=n {
            let peer = (self.balance_bias + k) % n;
            if peer == p || self.idlers.contains(peer) {
                continue;
            }
            // Scan while entries outrank `pri`, as `csched_runq_steal` does: a vCPU misplaced
            // behind lower-priority ones (a yielder, see `runq_insert`) waits for the next sort.
            // A `Head` yielder waiting for its pCPU's next round is not taken either: running
            // it elsewhere at once would undo its yield (and waiters stolen back and forth
            // between pCPUs would keep the lock holders out). From Xen 4.18 no yielder still
            // queued is taken ("it's waiting for a reason", RELEASE-4.19.0 `csched_runq_steal`
            // L1643).
            let found = self.pcpus[peer].runq.iter().copied().take_while(|&u| self.pri[u] > pri).find(|&u| {
                cx.running_on(u).is_none()
                    && !self.vcpus[u].waits_for_its_pcpu()
                    && !(self.spreads(cx, u) && self.sibling_on(cx, u, p))
            });
            if let Some(u) = found {
                self.balance_bias = peer;
                cx.count("credit.steals");
                return Some(u);
            }
        }
        None
    }

    /// The first vCPU in `p`'s run queue that satisfies `pred` (any priority).
    pub(crate) fn first_queued(&self, p: PcpuId, mut pred: impl FnMut(VcpuId) -> bool) -> Option<VcpuId> {
        self.pcpus[p].runq.iter().copied().find(|&u| pred(u))
    }
}
