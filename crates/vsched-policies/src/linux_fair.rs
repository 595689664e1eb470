//! What Linux's fair class does alike under CFS (`cfs.rs`, Linux ≤ 6.5) and EEVDF
//! (`eevdf.rs`, Linux ≥ 6.6): load weights, the scaling of tunables with the CPU count, and
//! the simplified placement and balancing rules both models use (kernel/sched/fair.c:
//! `select_idle_sibling`, `find_idlest_cpu`, `newidle_balance`, `load_balance`; the file
//! headers say what is left out). Each queue is described to these rules by closures, so
//! the two run-queue structures need not agree.

use vsched_model::{Cx, PcpuId, Time, VcpuId};

/// What `yield_to` did (core.c `yield_to`'s return value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum YieldTo {
    /// > 0: the target is the next buddy and both pCPUs reschedule.
    Yielded,
    /// -ESRCH: both run queues hold a single entity; yielding is pointless.
    Esrch,
}

/// `NICE_0_LOAD` (scaled down, as `avg_vruntime` uses it): the load weight of a nice-0 thread.
pub(crate) const NICE_0_LOAD: i64 = 1024;
/// The domain weight that maps to `NICE_0_LOAD` (Xen's default weight).
const NICE_0_DOMAIN_WEIGHT: i64 = 256;
/// `get_update_sysctl_factor` caps the CPU count at 8.
const SCALING_MAX_CPUS: usize = 8;

/// The load weight of a vCPU thread of a VM of `domain_weight`: proportional, 256 ↔ 1024.
pub(crate) fn load_weight(domain_weight: u32) -> i64 {
    (domain_weight as i64 * NICE_0_LOAD / NICE_0_DOMAIN_WEIGHT).max(1)
}

/// `calc_delta_fair`: wall time to vruntime for an entity of load weight `w`. Linux
/// multiplies by a 32-bit inverse weight, ⌊2³²/w⌋, which is exact when w is a power of two
/// and otherwise runs short by less than w/2³² of the result (under 10⁻⁶ for w ≤ 4096).
pub(crate) fn fair(delta: i64, w: i64) -> i64 {
    delta * NICE_0_LOAD / w
}

/// `get_update_sysctl_factor` (`sysctl_sched_tunable_scaling`): what the unscaled tunables
/// are multiplied by on a host of `pcpus` CPUs. `scaling` is "log", "linear" or "none".
pub(crate) fn tunable_factor(scaling: &str, pcpus: usize) -> i64 {
    let cpus = pcpus.clamp(1, SCALING_MAX_CPUS) as i64;
    match scaling {
        "none" => 1,
        "linear" => cpus,
        _ => 1 + cpus.ilog2() as i64,
    }
}

/// `select_task_rq_fair` for a wake-up, reduced to `select_idle_sibling` in the last-level
/// cache domain (no `wake_affine`): the previous pCPU if idle, else an idle pCPU of its
/// socket (round robin from the previous one), else the previous one. With SMT
/// (`sched_smt_active`), a pCPU of a fully idle core first (`select_idle_cpu` →
/// `select_idle_core`), else an idle hardware sibling of the previous pCPU
/// (`select_idle_smt`), else any idle pCPU, as in 6.12's `select_idle_sibling`. Linux keeps
/// "has idle cores" as a hint that may be stale; here it is exact.
///
/// `scan_idle` is `idle` for the last scan (`select_idle_cpu` → `__select_idle_cpu`), where
/// core scheduling also asks that the pCPU's core run the waking task's cookie
/// (`sched_cpu_cookie_match`).
pub(crate) fn wake_cpu(
    cx: &Cx,
    prev: PcpuId,
    idle: impl Fn(PcpuId) -> bool,
    scan_idle: impl Fn(PcpuId) -> bool,
) -> PcpuId {
    let n = cx.n_pcpus();
    let llc = cx.socket_of(prev);
    let candidates = || (0..n).map(move |k| (prev + k) % n).filter(move |&q| cx.socket_of(q) == llc);
    if idle(prev) {
        return prev;
    }
    if cx.core_threads(prev).len() > 1 {
        let idle_core = |q: PcpuId| cx.core_threads(q).all(&idle);
        if let Some(q) = candidates().find(|&q| idle_core(q)) {
            return q;
        }
        if let Some(q) = cx.core_threads(prev).find(|&q| idle(q)) {
            return q;
        }
    }
    candidates().find(|&q| scan_idle(q)).unwrap_or(prev)
}

/// `find_idlest_cpu` for a new thread: the pCPU with the fewest entities, lowest index on
/// ties. With SMT, `find_idlest_group` first picks among the cores (the groups of the
/// cache-sharing domain): the one with the most idle threads, then the fewest entities
/// (lowest index on ties); then its least loaded thread.
pub(crate) fn least_loaded(cx: &Cx, nr: impl Fn(PcpuId) -> usize) -> PcpuId {
    let n = cx.n_pcpus();
    let threads = cx.core_threads(0).len();
    if threads <= 1 {
        return (0..n).min_by_key(|&q| nr(q)).unwrap_or(0);
    }
    let idlest_core = (0..n).step_by(threads).min_by_key(|&first| {
        let core = cx.core_threads(first);
        let idle = core.clone().filter(|&q| nr(q) == 0).count();
        (std::cmp::Reverse(idle), core.map(&nr).sum::<usize>())
    });
    idlest_core.map_or(0, |first| cx.core_threads(first).min_by_key(|&q| nr(q)).unwrap_or(first))
}

/// The queue `p` pulls from: the other pCPU with the most entities (`nr`), at least
/// `min_gap` more than `p` and at least 2, with an entity waiting that may move
/// (`has_waiting`); the nearest after `p` on ties. `min_gap` 0 is the newly idle balance
/// (`newidle_balance`), 2 the periodic one (`load_balance`, counting entities, not load).
pub(crate) fn busiest(
    p: PcpuId,
    n: usize,
    min_gap: usize,
    nr: impl Fn(PcpuId) -> usize,
    has_waiting: impl Fn(PcpuId) -> bool,
) -> Option<PcpuId> {
    let nr_p = nr(p);
    (1..n)
        .map(|k| (p + k) % n)
        .filter(|&q| nr(q) >= (nr_p + min_gap).max(2) && has_waiting(q))
        .max_by_key(|&q| (nr(q), std::cmp::Reverse((q + n - p) % n)))
}

/// The waiting entity `detach_tasks` takes: the least recently run (it walks `cfs_tasks`
/// from its cold end), lowest id on ties.
pub(crate) fn coldest(waiting: impl Iterator<Item = VcpuId>, last_ran: impl Fn(VcpuId) -> Time) -> Option<VcpuId> {
    waiting.min_by_key(|&u| (last_ran(u), u))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsched_model::hand_world::Bench;

    /// Where a wake-up from pCPU 0 lands on 4 pCPUs in cores of `threads_per_core`, the
    /// pCPUs in `idle` idle.
    fn woken_on(threads_per_core: usize, idle: &[PcpuId]) -> PcpuId {
        let mut hand = Bench::new(4, 1);
        hand.threads_per_core = threads_per_core;
        let cx = Cx::new(&mut hand);
        wake_cpu(&cx, 0, |q| idle.contains(&q), |q| idle.contains(&q))
    }

    #[test]
    fn a_wake_up_prefers_a_fully_idle_core_with_smt() {
        // pCPU 0 busy, its sibling 1 idle, core {2, 3} idle: select_idle_core takes 2.
        assert_eq!(woken_on(2, &[1, 2, 3]), 2);
        // Without SMT the scan takes the next idle pCPU.
        assert_eq!(woken_on(1, &[1, 2, 3]), 1);
        // No idle core: the previous pCPU's idle sibling (select_idle_smt), then any idle one.
        assert_eq!(woken_on(2, &[1, 3]), 1);
        assert_eq!(woken_on(2, &[3]), 3);
        // The previous pCPU idle: it, whatever its sibling does.
        assert_eq!(woken_on(2, &[0, 2, 3]), 0);
        assert_eq!(woken_on(2, &[]), 0);
    }

    #[test]
    fn a_new_thread_goes_to_the_idlest_core_with_smt() {
        // pCPU 0 holds one entity: without SMT pCPU 1 is the least loaded; with SMT, pCPU 1 is
        // the busy pCPU 0's sibling and core {2, 3} is wholly idle.
        let placed = |threads_per_core: usize, load: [usize; 4]| {
            let mut hand = Bench::new(4, 1);
            hand.threads_per_core = threads_per_core;
            least_loaded(&Cx::new(&mut hand), |q| load[q])
        };
        assert_eq!(placed(1, [1, 0, 0, 0]), 1);
        assert_eq!(placed(2, [1, 0, 0, 0]), 2);
        // Both cores half busy: the one with fewer entities, then its idle thread.
        assert_eq!(placed(2, [2, 0, 1, 0]), 3);
        assert_eq!(placed(2, [1, 1, 1, 1]), 0);
    }
}
