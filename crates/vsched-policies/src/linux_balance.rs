//! Balance scheduling on Linux's fair class: the rule that `balance-cfs` and `balance-eevdf`
//! add to `cfs` and `eevdf` (Sukwong & Kim, "Is co-scheduling too expensive for SMP VMs?",
//! EuroSys 2011; ../shared/specs/hypervisor-mechanisms.md §7). `balance` is the same rule on
//! Credit (`balance.rs`, `credit_spread.rs`).
//!
//! # The rule
//! Two sibling vCPU threads (of one VM) never sit in the same CPU's run queue, the running
//! thread counting as part of its queue (as `cfs_rq->curr` does). Siblings then tend to run
//! at the same time on different CPUs, without being forced to start together: there is no
//! co-start, no signal to other CPUs, nothing but placement. The paper built it into KVM by
//! restricting CFS's choice of a run queue so that a vCPU thread is not placed where a
//! sibling already is; everything else is the base scheduler's.
//!
//! # How we model the restriction
//! As an affinity mask (`p->cpus_ptr`) that balance scheduling gives a vCPU thread afresh at
//! each decision: the CPUs whose run queue holds the fewest of its siblings, that is none
//! whenever its VM has no more vCPUs than the host has CPUs. Linux's own handling of a mask
//! then decides the rest, read in 6.1.20 and 6.12.y (`kernel/sched/core.c`,
//! `kernel/sched/fair.c`; the same in both):
//! - Wake-up (`select_task_rq_fair` → `select_idle_sibling`, which searches
//!   `sched_domain_span ∩ p->cpus_ptr` only): an allowed idle CPU of the previous CPU's LLC,
//!   the previous one first; else the previous CPU. If that is not allowed (a sibling is
//!   queued there), `select_task_rq` falls back to `select_fallback_rq`: the first allowed CPU
//!   of the previous CPU's node, else the first allowed CPU (`wake_cpu`).
//! - Fork (`find_idlest_cpu`, whose group and CPU loops skip CPUs outside `p->cpus_ptr`): the
//!   least loaded allowed CPU (`fork_cpu`).
//! - Newly idle and periodic balancing (`load_balance` → `can_migrate_task`, which refuses a
//!   task whose `cpus_ptr` lacks the destination): only vCPUs allowed on the pulling CPU move;
//!   a busiest queue whose waiting vCPUs may none of them move is passed over for the next
//!   busiest (LBF_ALL_PINNED, `goto redo`).
//!
//! A vCPU that wakes where it is still queued (an EEVDF delayed dequeue, `ttwu_runnable`)
//! goes through no placement; it was counted in its queue all along, so the rule holds.
//!
//! # Approximations
//! - The paper's text was not reachable from here (only its abstract); this is the minimal
//!   published rule (siblings in different run queues, by restricting run-queue selection and
//!   load balancing, no co-start), and the mask above is our reading of "restricting".
//! - A VM with more vCPUs than CPUs cannot satisfy the rule; its vCPUs go where the fewest
//!   siblings are (the reading `balance` takes on Credit). Our choice, not the paper's.
//! - The mask is exact at every decision; a real implementation would update it as siblings
//!   move. A socket stands for a NUMA node in `select_fallback_rq`.
//! - Linux's LBF_DST_PINNED retry with another CPU of the destination group does not apply
//!   (our topology has one CPU per balancing group); active balancing is not modelled by the
//!   base policies either.

use vsched_model::{Cx, PcpuId, VcpuId};

use crate::linux_fair;

/// Counter: wake-ups whose previous CPU held a sibling, so the vCPU was placed elsewhere.
pub(crate) const SPREAD_WAKES: &str = "balance.spread_wakes";
/// Counter: placements where every run queue held a sibling (the VM outnumbers the CPUs).
pub(crate) const CROWDED: &str = "balance.crowded_placements";

/// Whether the rule covers `v`: a guest's vCPU thread. A KVM host's own threads (kernel
/// threads, QEMU and vhost threads; `DomainInfo::host_threads`) are not a VM's vCPUs and keep
/// the base's placement.
fn covers(cx: &Cx, v: VcpuId) -> bool {
    !cx.domain(cx.dom_of(v)).host_threads
}

/// `v`'s mask now, if the rule is `on` and covers it (else the base decides alone).
pub(crate) fn mask(on: bool, cx: &Cx, v: VcpuId, rq_of: impl Fn(VcpuId) -> Option<PcpuId>) -> Option<Mask> {
    (on && covers(cx, v)).then(|| Mask::of(cx, v, rq_of))
}

/// `can_migrate_task`'s affinity test under the rule: may `v` move to `p`? Always, if the
/// rule is off or does not cover `v`.
pub(crate) fn may_move(on: bool, cx: &Cx, v: VcpuId, p: PcpuId, rq_of: impl Fn(VcpuId) -> Option<PcpuId>) -> bool {
    !(on && covers(cx, v)) || Mask::allows_on(cx, v, p, rq_of)
}

/// Balance scheduling's affinity mask for one vCPU at one decision.
pub(crate) struct Mask {
    /// `allowed[q]`: `q`'s run queue holds the fewest siblings.
    allowed: Vec<bool>,
    /// That fewest: 0 unless the VM has more vCPUs than the host has CPUs.
    fewest: usize,
}

impl Mask {
    /// The mask of `v`, given where each vCPU is queued or running (`rq_of`, None if
    /// neither): the CPUs with the fewest siblings of `v` in their run queue.
    pub(crate) fn of(cx: &Cx, v: VcpuId, rq_of: impl Fn(VcpuId) -> Option<PcpuId>) -> Mask {
        let mut siblings = vec![0usize; cx.n_pcpus()];
        for u in cx.vcpus_of(cx.dom_of(v)).filter(|&u| u != v) {
            if let Some(q) = rq_of(u) {
                siblings[q] += 1;
            }
        }
        let fewest = siblings.iter().copied().min().unwrap_or(0);
        Mask { allowed: siblings.iter().map(|&s| s == fewest).collect(), fewest }
    }

    pub(crate) fn allows(&self, q: PcpuId) -> bool {
        self.allowed[q]
    }

    /// `Mask::of(cx, v, rq_of).allows(p)`, without building the mask when `p`'s run queue
    /// holds no sibling (the common case, and then `p` holds the fewest).
    pub(crate) fn allows_on(cx: &Cx, v: VcpuId, p: PcpuId, rq_of: impl Fn(VcpuId) -> Option<PcpuId>) -> bool {
        let here = cx.vcpus_of(cx.dom_of(v)).filter(|&u| u != v && rq_of(u) == Some(p)).count();
        here == 0 || Mask::of(cx, v, rq_of).allows(p)
    }

    /// Every run queue holds a sibling.
    pub(crate) fn crowded(&self) -> bool {
        self.fewest > 0
    }

    /// `select_fallback_rq(prev)`: the first allowed CPU of `prev`'s node, else the first
    /// allowed CPU (the mask is never empty).
    fn fallback(&self, cx: &Cx, prev: PcpuId) -> PcpuId {
        let n = self.allowed.len();
        let node = cx.socket_of(prev);
        (0..n)
            .find(|&q| self.allowed[q] && cx.socket_of(q) == node)
            .or_else(|| (0..n).find(|&q| self.allowed[q]))
            .unwrap_or(prev)
    }
}

/// `select_task_rq` for a wake-up under the mask: the base's `select_idle_sibling` among
/// allowed CPUs, then `select_fallback_rq` if its answer (the previous CPU) is not allowed.
/// Counts the wake-ups the rule moved and the crowded placements.
pub(crate) fn wake_cpu(cx: &mut Cx, mask: &Mask, prev: PcpuId, idle: impl Fn(PcpuId) -> bool) -> PcpuId {
    let allowed_idle = |q| mask.allows(q) && idle(q);
    let p = linux_fair::wake_cpu(cx, prev, allowed_idle, allowed_idle);
    if !mask.allows(prev) {
        cx.count(SPREAD_WAKES);
    }
    if mask.crowded() {
        cx.count(CROWDED);
    }
    if mask.allows(p) {
        p
    } else {
        mask.fallback(cx, prev)
    }
}

/// `find_idlest_cpu` for a new vCPU under the mask: the least loaded allowed CPU, lowest
/// index on ties.
pub(crate) fn fork_cpu(cx: &mut Cx, mask: &Mask, nr: impl Fn(PcpuId) -> usize) -> PcpuId {
    if mask.crowded() {
        cx.count(CROWDED);
    }
    (0..cx.n_pcpus()).filter(|&q| mask.allows(q)).min_by_key(|&q| nr(q)).unwrap_or(0)
}

/// The rule as an invariant: no two siblings in one run queue (`rq_of` as for `Mask::of`),
/// for every VM that fits on the host.
pub(crate) fn check(cx: &Cx, rq_of: impl Fn(VcpuId) -> Option<PcpuId>) -> Result<(), String> {
    let n = cx.n_pcpus();
    for d in 0..cx.domains().len() {
        let dom = cx.domain(d);
        if dom.vcpus > n || dom.host_threads {
            continue;
        }
        let mut owner: Vec<Option<VcpuId>> = vec![None; n];
        for v in cx.vcpus_of(d) {
            if let Some(q) = rq_of(v) {
                if let Some(u) = owner[q] {
                    return Err(format!(
                        "siblings vCPU {u} and vCPU {v} of VM {} share pCPU {q}'s run queue",
                        dom.name
                    ));
                }
                owner[q] = Some(v);
            }
        }
    }
    Ok(())
}
