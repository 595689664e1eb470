//! credit2's runqueues: how pCPUs are grouped (`cpu_add_to_runqueue`, 4.12's
//! `cpu_to_runqueue`), which vCPUs a runqueue holds (`runq_assign`, `update_max_weight`),
//! the credit-sorted queue (`runq_insert`) and which pCPU a queued vCPU wakes (`runq_tickle`,
//! `tickle_score`, the `idle` / `tickled` / `smt_idle` masks). Line numbers are
//! RELEASE-4.22.0's `xen/common/sched/credit2.c`.

use std::collections::HashMap;

use vsched_model::{Cx, PcpuId, VcpuId};

use crate::credit2::{Arrangement, Credit2, PcpuState, Runqueue, CREDIT_INIT_NS, RATELIMIT_TICKLE_TOLERANCE_NS};

/// `cpumask_cycle(n, mask)` over `cpus` (ascending pCPU ids): the first one after `n`,
/// wrapping around; `None` if none qualifies.
pub(crate) fn cycle(n: PcpuId, cpus: &[PcpuId], ok: impl Fn(PcpuId) -> bool) -> Option<PcpuId> {
    let after = cpus.iter().copied().filter(|&q| q > n && ok(q)).min();
    after.or_else(|| cpus.iter().copied().filter(|&q| q <= n && ok(q)).min())
}

/// `cpumask_test_or_cycle`: `n` itself if it qualifies, else [`cycle`].
fn test_or_cycle(n: PcpuId, cpus: &[PcpuId], ok: impl Fn(PcpuId) -> bool) -> Option<PcpuId> {
    if cpus.contains(&n) && ok(n) {
        return Some(n);
    }
    cycle(n, cpus, ok)
}

impl Credit2 {
    /// Groups the host's pCPUs into runqueues, adding them in order 0, 1, ... as Xen brings
    /// CPUs up. 4.14 on (`cpu_add_to_runqueue`, L933): a pCPU joins a runqueue its topology
    /// matches (compared with the runqueue's first pCPU, `pick_bias` at creation) that holds
    /// one of its hardware siblings, else the least full such runqueue with room for it and
    /// its siblings (at most `n / ⌈n / max⌉` pCPUs), else a new one. 4.12 (`cpu_to_runqueue`,
    /// RELEASE-4.12.0 L849): the first runqueue whose first pCPU matches, without bound.
    pub(crate) fn arrange(&mut self, cx: &Cx) {
        let n = cx.n_pcpus();
        let same_core = |a: PcpuId, b: PcpuId| cx.socket_of(a) == cx.socket_of(b) && cx.core_of(a) == cx.core_of(b);
        let matches = |peer: PcpuId, cpu: PcpuId| match self.arrangement {
            Arrangement::Cpu => false,
            Arrangement::Core => same_core(peer, cpu),
            Arrangement::Socket => cx.socket_of(peer) == cx.socket_of(cpu),
            Arrangement::All => true,
        };
        // Each pCPU's count of hardware siblings (itself included), counted once: the loop
        // below asks for it for every core of every candidate runqueue.
        let mut per_core: HashMap<(usize, usize), usize> = HashMap::new();
        for q in 0..n {
            *per_core.entry((cx.socket_of(q), cx.core_of(q))).or_default() += 1;
        }
        let nr_siblings: Vec<usize> = (0..n).map(|q| per_core[&(cx.socket_of(q), cx.core_of(q))]).collect();
        let min_rqs = (n - 1) / self.max_cpus_runqueue + 1;
        let max_cpus_runq = n / min_rqs;
        let mut groups: Vec<Vec<PcpuId>> = Vec::new();
        // For each group, the pCPUs of the cores it has a member of, counted whole.
        let mut whole_cores: Vec<usize> = Vec::new();
        for (cpu, &siblings) in nr_siblings.iter().enumerate() {
            let mut valid: Option<usize> = None;
            for (r, g) in groups.iter().enumerate() {
                if !matches(g[0], cpu) {
                    continue;
                }
                if !self.profile.bounded_runqueues {
                    valid = Some(r);
                    break;
                }
                if g.iter().any(|&q| same_core(q, cpu)) {
                    valid = Some(r);
                    break;
                }
                // `cpu_runqueue_siblings_match`: room for the cores already in, whole, and
                // for this pCPU's core (4.18 skips it for `all`).
                let fits = whole_cores[r] + siblings <= max_cpus_runq || self.arrangement == Arrangement::All;
                if g.len() < max_cpus_runq && fits && valid.is_none_or(|v| g.len() < groups[v].len()) {
                    valid = Some(r);
                }
            }
            let r = valid.unwrap_or_else(|| {
                groups.push(Vec::new());
                whole_cores.push(0);
                groups.len() - 1
            });
            if !groups[r].iter().any(|&q| same_core(q, cpu)) {
                whole_cores[r] += siblings;
            }
            groups[r].push(cpu);
        }
        let mut of = vec![0; n];
        for (r, g) in groups.iter().enumerate() {
            for &p in g {
                of[p] = r;
            }
        }
        self.rqs = groups
            .into_iter()
            .map(|cpus| Runqueue {
                pick_bias: cpus[0],
                cpus,
                runq: Vec::new(),
                svc: Vec::new(),
                max_weight: 1,
                load: 0,
                load_last_update: 0,
                avgload: 0,
                b_avgload: 0,
            })
            .collect();
        self.pcpus = (0..n)
            .map(|p| PcpuState {
                rq: of[p],
                idle: true,
                tickled: false,
                smt_idle: true,
                siblings: self.rqs[of[p]].cpus.iter().copied().filter(|&q| same_core(q, p)).collect(),
            })
            .collect();
    }

    /// `update_max_weight` (L1061): the largest weight among the runqueue's vCPUs (1 when
    /// none), found again only when the largest one leaves.
    fn update_max_weight(&mut self, r: usize, new_weight: u32, old_weight: u32) {
        if new_weight > self.rqs[r].max_weight {
            self.rqs[r].max_weight = new_weight;
        } else if old_weight == self.rqs[r].max_weight {
            let max = self.rqs[r].svc.iter().map(|&u| self.vcpus[u].weight).max().unwrap_or(1).max(1);
            self.rqs[r].max_weight = max;
        }
    }

    /// `_runq_assign` (L1107): `v` belongs to runqueue `r` from now on.
    pub(crate) fn runq_assign(&mut self, v: VcpuId, r: usize) {
        self.vcpus[v].rq = Some(r);
        self.rqs[r].svc.push(v);
        let w = self.vcpus[v].weight;
        self.update_max_weight(r, w, 0);
        self.rqs[r].b_avgload += self.vcpus[v].avgload;
    }

    /// `_runq_deassign` (L1145): `v` (not queued, not running) leaves its runqueue.
    pub(crate) fn runq_deassign(&mut self, v: VcpuId) {
        let Some(r) = self.vcpus[v].rq.take() else { return };
        self.rqs[r].svc.retain(|&u| u != v);
        let w = self.vcpus[v].weight;
        self.update_max_weight(r, 0, w);
        self.rqs[r].b_avgload = (self.rqs[r].b_avgload - self.vcpus[v].avgload).max(0);
    }

    /// `runq_insert` (L1437): behind every queued vCPU with at least its credit.
    pub(crate) fn runq_insert(&mut self, v: VcpuId) {
        let r = self.vcpus[v].rq.expect("a queued vCPU has a runqueue");
        let credit = self.vcpus[v].credit;
        let runq = &self.rqs[r].runq;
        let pos = runq.iter().position(|&u| credit > self.vcpus[u].credit).unwrap_or(runq.len());
        self.rqs[r].runq.insert(pos, v);
        self.vcpus[v].queued = true;
    }

    /// `runq_remove` (L1480).
    pub(crate) fn runq_remove(&mut self, v: VcpuId) {
        if let Some(r) = self.vcpus[v].rq {
            if let Some(i) = self.rqs[r].runq.iter().position(|&u| u == v) {
                self.rqs[r].runq.remove(i);
            }
        }
        self.vcpus[v].queued = false;
    }

    /// `smt_idle_mask_set` (L698): if every sibling of `p` is idle and untickled, their whole
    /// core is marked fully idle.
    pub(crate) fn smt_idle_set(&mut self, p: PcpuId) {
        if self.pcpus[p].siblings.iter().all(|&q| self.pcpus[q].idle && !self.pcpus[q].tickled) {
            for i in 0..self.pcpus[p].siblings.len() {
                let q = self.pcpus[p].siblings[i];
                self.pcpus[q].smt_idle = true;
            }
        }
    }

    /// `smt_idle_mask_clear` (L711): `p`'s core is no longer fully idle (only if it was
    /// marked whole).
    pub(crate) fn smt_idle_clear(&mut self, p: PcpuId) {
        if self.pcpus[p].siblings.iter().all(|&q| self.pcpus[q].smt_idle) {
            for i in 0..self.pcpus[p].siblings.len() {
                let q = self.pcpus[p].siblings[i];
                self.pcpus[q].smt_idle = false;
            }
        }
    }

    /// The bookkeeping of `tickle_cpu` (L1490) without the IPI.
    pub(crate) fn mark_tickled(&mut self, p: PcpuId) {
        self.pcpus[p].tickled = true;
        self.smt_idle_clear(p);
    }

    /// `tickle_cpu` (L1490): `p` is asked to schedule.
    pub(crate) fn tickle_cpu(&mut self, cx: &mut Cx, p: PcpuId) {
        self.mark_tickled(p);
        cx.resched(p);
    }

    /// `is_preemptable` (L1503): the vCPU running on `p` has run (nearly) its rate limit.
    fn is_preemptable(&self, cur: VcpuId, now: i64) -> bool {
        if self.ratelimit_ns <= RATELIMIT_TICKLE_TOLERANCE_NS {
            return true;
        }
        now - self.vcpus[cur].run_start as i64 > self.ratelimit_ns - RATELIMIT_TICKLE_TOLERANCE_NS
    }

    /// `tickle_score` (L1528): how much `new` deserves busy pCPU `p`; negative if not at all.
    /// Every vCPU's soft affinity is every pCPU here, so a positive score earns one
    /// `CREDIT_INIT` bonus (p is in new's soft affinity and in cur's).
    fn tickle_score(&mut self, cx: &Cx, new: VcpuId, p: PcpuId) -> i64 {
        let now = cx.now() as i64;
        let Some(cur) = self.curr_on(cx, p) else { return -1 };
        if !self.is_preemptable(cur, now) {
            return -1;
        }
        self.burn_credits(cx, cur);
        let mut score = self.vcpus[new].credit - self.vcpus[cur].credit;
        if self.vcpus[new].processor != p {
            score -= self.migrate_resist_ns;
        }
        if score > 0 {
            score += CREDIT_INIT_NS;
        }
        score
    }

    /// `runq_tickle` (L1601): wake a pCPU of `new`'s runqueue to run it: a fully idle core
    /// (its own pCPU first, then the next one up), else an idle untickled pCPU, else the
    /// untickled busy pCPU with the best positive `tickle_score` (its own pCPU taken at once
    /// if it scores). None if no pCPU qualifies.
    pub(crate) fn runq_tickle(&mut self, cx: &mut Cx, new: VcpuId) {
        let cpu = self.vcpus[new].processor;
        let r = self.vcpus[new].rq.expect("a queued vCPU has a runqueue");
        let cpus = std::mem::take(&mut self.rqs[r].cpus);
        let pcpus = &self.pcpus;
        let ok = |q: PcpuId| Credit2::allowed(cx, new, q);
        let picked = test_or_cycle(cpu, &cpus, |q| pcpus[q].smt_idle && ok(q))
            .or_else(|| test_or_cycle(cpu, &cpus, |q| pcpus[q].idle && !pcpus[q].tickled && ok(q)));
        let ipid = match picked {
            Some(q) => Some(q),
            None => {
                let mut best: Option<PcpuId> = None;
                let mut max = 0;
                let busy =
                    |s: &Credit2, q: PcpuId| !s.pcpus[q].idle && !s.pcpus[q].tickled && Credit2::allowed(cx, new, q);
                let mut own_taken = false;
                if cpus.contains(&cpu) && busy(self, cpu) {
                    let score = self.tickle_score(cx, new, cpu);
                    if score > max {
                        max = score;
                        best = Some(cpu);
                        own_taken = true;
                    }
                }
                if !own_taken {
                    for &q in &cpus {
                        if q == cpu || !busy(self, q) {
                            continue;
                        }
                        let score = self.tickle_score(cx, new, q);
                        if score > max {
                            max = score;
                            best = Some(q);
                        }
                    }
                }
                best
            }
        };
        self.rqs[r].cpus = cpus;
        if let Some(q) = ipid {
            self.tickle_cpu(cx, q);
            self.vcpus[new].tickled_cpu = Some(q);
            cx.count("credit2.tickles");
        }
    }
}
