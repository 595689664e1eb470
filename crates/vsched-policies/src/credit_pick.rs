//! Credit's `_csched_cpu_pick` and the tick-time migration of a running vCPU: where Credit
//! places work on a host with sockets and hardware threads.
//!
//! # What Xen does
//! At each tick, a vCPU that was already active when the tick found it running asks
//! `_csched_cpu_pick` whether another pCPU would serve it better (`csched_vcpu_acct`, 3.0.4 to
//! 4.0.1; `csched_unit_acct` in 4.19). If so it is flagged `_VPF_migrating` and its pCPU
//! reschedules: the vCPU leaves, `vcpu_migrate` picks again (this time committing the
//! per-pCPU `idle_bias`) and wakes it on the new pCPU (`csched_vcpu_wake`: queued, tickled,
//! and BOOSTed if UNDER — until Xen 4.7 flags migrating wake-ups so they are not boosted).
//!
//! `_csched_cpu_pick` starts from the vCPU's pCPU and walks the idle pCPUs (`idlers`),
//! comparing the number of idlers around the current choice with those around the next
//! candidate: within one socket, in each one's core (`cpu_sibling_map`); across sockets, in
//! each one's socket (`cpu_core_map`). It moves when the candidate's group has more idlers,
//! "so that we don't run two vCPUs on co-hyperthreads while there are idle cores or sockets".
//! The rules by release (read at the tags of `xen_version.rs`):
//! - 3.0.4 / 3.2 `csched_cpu_pick`: the current pCPU counts as idle; move to the candidate
//!   itself when its group has more idlers.
//! - 4.0.1 `_csched_cpu_pick`: the same, but move to the next idler of the candidate's group
//!   after that group's `idle_bias` (round robin), committing the bias on a real move.
//! - 4.1.2: crossing sockets needs more than twice the idlers (`migrate_factor` = 2); the
//!   candidates are the remaining ones of the group.
//! - current (4.19 `_csched_cpu_pick`): the current pCPU counts as idle only if its run queue
//!   is empty (4.8); if it does not, and some pCPU idles, start from the next idler (4.12):
//!   a running vCPU whose pCPU has waiters moves to an idle pCPU, even on a flat host.
//!
//! # What we leave out
//! Affinities, cpupools and NUMA balance steps (every vCPU may run everywhere here), and
//! `sched_smt_power_savings` (off by default in every release).

use std::ops::Range;

use vsched_model::{Cx, PcpuId, VcpuId};

use crate::credit::{Credit, PRI_BOOST, PRI_UNDER};
use crate::pcpu_set::PcpuSet;
use crate::xen_version::Pick;

/// What `_csched_cpu_pick` works on besides the idlers: the host's groups (Xen's
/// `cpu_sibling_map` and `cpu_core_map`, runs of consecutive pCPUs) and two scratch masks,
/// kept between picks to spare allocations.
#[derive(Default)]
pub(crate) struct PickMasks {
    /// Each pCPU's core, as the range of its hardware threads.
    core: Vec<Range<PcpuId>>,
    /// Each pCPU's socket, as the range of its pCPUs.
    socket: Vec<Range<PcpuId>>,
    idlers: PcpuSet,
    cpus: PcpuSet,
}

/// For each of the `n` pCPUs, the run of consecutive pCPUs with its `key` (its core, or its
/// socket). A group is such a run by the numbering of `Cx` (`Cx::core_threads`, pCPUs split
/// evenly into sockets).
fn groups(n: usize, key: impl Fn(PcpuId) -> usize) -> Vec<Range<PcpuId>> {
    let mut ranges = Vec::with_capacity(n);
    let mut start = 0;
    for p in 1..=n {
        if p == n || key(p) != key(start) {
            debug_assert!((p..n).all(|q| key(q) != key(start)), "pCPUs of group {} are not consecutive", key(start));
            ranges.extend(std::iter::repeat_n(start..p, p - start));
            start = p;
        }
    }
    ranges
}

impl PickMasks {
    pub(crate) fn for_host(cx: &Cx) -> PickMasks {
        let n = cx.n_pcpus();
        PickMasks {
            core: groups(n, |p| cx.core_of(p)),
            socket: groups(n, |p| cx.socket_of(p)),
            idlers: PcpuSet::new(n),
            cpus: PcpuSet::new(n),
        }
    }
}

impl Credit {
    /// `_csched_cpu_pick` for a vCPU that runs on (or belongs to) `cpu`; `commit` updates the
    /// chosen group's `idle_bias`.
    pub(crate) fn cpu_pick(&mut self, cpu: PcpuId, commit: bool) -> PcpuId {
        let mut masks = std::mem::take(&mut self.pick_masks);
        let picked = self.cpu_pick_in(cpu, commit, &mut masks);
        self.pick_masks = masks;
        picked
    }

    fn cpu_pick_in(&mut self, cpu: PcpuId, commit: bool, masks: &mut PickMasks) -> PcpuId {
        let PickMasks { core, socket, idlers, cpus } = masks;
        let rule = self.profile.pick;
        idlers.copy_from(&self.idlers);
        if rule != Pick::Current || self.pcpus[cpu].runq.is_empty() {
            idlers.insert(cpu);
        }
        cpus.copy_from(idlers);
        let mut cpu = cpu;
        if rule == Pick::Current && !cpus.contains(cpu) {
            if let Some(q) = cpus.cycle(cpu) {
                cpu = q;
            }
        }
        cpus.remove(cpu);
        let mut moved_in: Option<PcpuId> = None;
        // Each pass takes at least one pCPU out of `cpus`; the bound is a guard, not a rule.
        for _ in 0..=self.pcpus.len() {
            let Some(nxt) = cpus.cycle(cpu) else { break };
            let same_socket = socket[cpu] == socket[nxt];
            // `cpu_sibling_map` when `cpu` and `nxt` share a socket, else `cpu_core_map`.
            let group = |of: PcpuId| if same_socket { core[of].clone() } else { socket[of].clone() };
            let (weight_cpu, weight_nxt) = (idlers.count_in(group(cpu)), idlers.count_in(group(nxt)));
            let factor = if rule >= Pick::Xen41 && !same_socket { 2 } else { 1 };
            if weight_cpu * factor < weight_nxt {
                if rule == Pick::Xen3 {
                    cpu = nxt;
                    cpus.remove(cpu);
                    continue;
                }
                // The candidates: `nxt`'s group's idlers, from 4.1 those still in `cpus`.
                let still_in = (rule >= Pick::Xen41).then_some(&*cpus);
                let chosen = idlers.cycle_in(self.pcpus[nxt].idle_bias, still_in, group(nxt)).unwrap_or(nxt);
                if commit && rule < Pick::Current {
                    self.pcpus[nxt].idle_bias = chosen;
                }
                moved_in = Some(nxt);
                cpu = chosen;
                cpus.remove_range(core[cpu].clone());
            } else {
                cpus.remove_common_in(idlers, group(nxt));
            }
        }
        if let (true, Pick::Current, Some(nxt)) = (commit, rule, moved_in) {
            self.pcpus[nxt].idle_bias = cpu;
        }
        cpu
    }

    /// The tail of `csched_vcpu_acct` for `v`, active and running on `p` at a tick: flag it
    /// for migration when `_csched_cpu_pick` prefers another pCPU, and reschedule `p`.
    pub(crate) fn check_migrate_running(&mut self, cx: &mut Cx, v: VcpuId, p: PcpuId) {
        if self.cpu_pick(p, false) != p {
            self.vcpus[v].migrating = true;
            cx.count("credit.migrate_running");
            cx.resched(p);
        }
    }

    /// `vcpu_migrate` for `v`, just descheduled from `p` with `_VPF_migrating`: pick again
    /// (committing), then wake it there (`csched_vcpu_wake`: BOOST an UNDER vCPU unless the
    /// release flags migrating wake-ups, queue, tickle).
    pub(crate) fn migrate(&mut self, cx: &mut Cx, v: VcpuId, p: PcpuId) {
        let picked = self.cpu_pick(p, true);
        let q = self.away_from_siblings(cx, v, picked).unwrap_or(picked);
        self.vcpus[v].processor = q;
        if self.boost && self.profile.boost_migrating && self.pri[v] == PRI_UNDER && !self.parked[v] {
            self.pri[v] = PRI_BOOST;
            cx.count("credit.boosts");
        }
        if !self.profile.yield_kept_queued {
            // Up to Xen 4.17 `csched_schedule` cleared YIELD before the context switch that
            // completes the migration (RELEASE-4.17.0 L1945): the vCPU wakes as any waker.
            self.vcpus[v].yielding = false;
        }
        self.runq_insert(cx, q, v);
        self.tickle(cx, v);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use vsched_model::hand_world::{start_on, Bench};
    use vsched_model::{Params, PcpuId, Value};

    use crate::credit::{Credit, PARAMS};
    use crate::credit_spread::Spread;
    use crate::xen_version::Pick;

    /// `_csched_cpu_pick` as it was written on one flag per pCPU before the masks became
    /// bitsets: the reference the bitset version must agree with, pick for pick.
    fn flag_pick(
        idle: &[bool],
        cpu_runq_empty: bool,
        cpu: PcpuId,
        rule: Pick,
        bias: &mut [PcpuId],
        commit: bool,
        (socket_of, core_of): (&dyn Fn(PcpuId) -> usize, &dyn Fn(PcpuId) -> usize),
    ) -> PcpuId {
        let n = idle.len();
        let cycle = |n0: PcpuId, mask: &[bool]| (1..=n).map(|k| (n0 + k) % n).find(|&q| mask[q]);
        let mut idlers = idle.to_vec();
        if rule != Pick::Current || cpu_runq_empty {
            idlers[cpu] = true;
        }
        let mut cpus = idlers.clone();
        let mut cpu = cpu;
        if rule == Pick::Current && !cpus[cpu] {
            if let Some(q) = cycle(cpu, &cpus) {
                cpu = q;
            }
        }
        cpus[cpu] = false;
        let group = |a: PcpuId, b: PcpuId, of: PcpuId, q: PcpuId| {
            if socket_of(a) == socket_of(b) {
                core_of(q) == core_of(of)
            } else {
                socket_of(q) == socket_of(of)
            }
        };
        let mut moved_in = None;
        for _ in 0..=n {
            let Some(nxt) = cycle(cpu, &cpus) else { break };
            let count = |of: PcpuId| (0..n).filter(|&q| idlers[q] && group(cpu, nxt, of, q)).count();
            let factor = if rule >= Pick::Xen41 && socket_of(cpu) != socket_of(nxt) { 2 } else { 1 };
            let nxt_idlers: Vec<bool> = (0..n).map(|q| idlers[q] && group(cpu, nxt, nxt, q)).collect();
            if count(cpu) * factor < count(nxt) {
                if rule == Pick::Xen3 {
                    cpu = nxt;
                    cpus[cpu] = false;
                    continue;
                }
                let candidates: Vec<bool> = (0..n).map(|q| nxt_idlers[q] && (rule < Pick::Xen41 || cpus[q])).collect();
                let chosen = cycle(bias[nxt], &candidates).unwrap_or(nxt);
                if commit && rule < Pick::Current {
                    bias[nxt] = chosen;
                }
                moved_in = Some(nxt);
                cpu = chosen;
                for (q, allowed) in cpus.iter_mut().enumerate().take(n) {
                    if core_of(q) == core_of(cpu) {
                        *allowed = false;
                    }
                }
            } else {
                for q in 0..n {
                    cpus[q] &= !nxt_idlers[q];
                }
            }
        }
        if let (true, Pick::Current, Some(nxt)) = (commit, rule, moved_in) {
            bias[nxt] = cpu;
        }
        cpu
    }

    #[test]
    fn the_bitset_pick_agrees_with_the_flag_pick_on_every_release_and_topology() {
        let mut state = 7u64;
        let mut draw = |below: usize| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as usize % below
        };
        for (pcpus, sockets, threads) in [(8, 1, 1), (8, 2, 2), (12, 3, 2), (130, 2, 1), (128, 4, 2)] {
            for version in ["3.0", "3.2", "4.0", "4.1", "current"] {
                let given = BTreeMap::from([("xen_version".to_string(), Value::Str(version.into()))]);
                let params = Params::check("scheduler", PARAMS, &given).unwrap();
                let mut credit = Credit::from_params(&params, Spread::Off).unwrap();
                let mut hand = Bench::new(pcpus, 1);
                (hand.sockets, hand.threads_per_core) = (sockets, threads);
                start_on(&mut hand, &mut credit, &[]);
                let socket_of = |p: PcpuId| p / (pcpus / sockets);
                let core_of = |p: PcpuId| p / threads;
                for _ in 0..300 {
                    // Idlers from none to all, so that every branch of the walk is taken.
                    let density = draw(5);
                    let idle: Vec<bool> = (0..pcpus).map(|_| draw(4) < density).collect();
                    (0..pcpus).for_each(|p| credit.idlers.set(p, idle[p]));
                    let cpu = draw(pcpus);
                    // Only the starting pCPU's run queue is read: empty, or holding vCPU 0.
                    let cpu_runq_empty = draw(2) == 0;
                    credit.pcpus[cpu].runq = if cpu_runq_empty { Vec::new() } else { vec![0] };
                    let mut bias: Vec<PcpuId> = (0..pcpus).map(|_| draw(pcpus)).collect();
                    (0..pcpus).for_each(|p| credit.pcpus[p].idle_bias = bias[p]);
                    let commit = draw(2) == 0;
                    let rule = credit.profile.pick;
                    let expected =
                        flag_pick(&idle, cpu_runq_empty, cpu, rule, &mut bias, commit, (&socket_of, &core_of));
                    let context =
                        format!("{pcpus} pCPUs, {sockets} sockets, {threads} threads, Xen {version}, from {cpu}");
                    assert_eq!(credit.cpu_pick(cpu, commit), expected, "{context}");
                    let biases: Vec<PcpuId> = credit.pcpus.iter().map(|s| s.idle_bias).collect();
                    assert_eq!(biases, bias, "{context}");
                }
            }
        }
    }
}
