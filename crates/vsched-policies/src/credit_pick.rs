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
            ranges.extend(std::iter::repeat(start..p).take(p - start));
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
