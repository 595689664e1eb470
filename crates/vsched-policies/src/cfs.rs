//! `cfs` — Linux's Completely Fair Scheduler, the fair-share base KVM runs vCPU threads on
//! (kernel/sched/fair.c as of Linux 3.x–5.x, the era of the seed papers).
//!
//! # What it models
//! Under KVM a vCPU is an ordinary host thread, so the hypervisor's vCPU scheduler *is* CFS.
//! Each pCPU has a run queue ordered by virtual runtime: a running entity's vruntime grows by
//! its run time × NICE_0_LOAD / weight (`update_curr`), and the pCPU runs the entity with the
//! smallest (the "leftmost"). A domain's Xen-style weight maps to a load weight
//! proportionally, 256 ↔ 1024 (nice 0). Each queue keeps a monotonic `min_vruntime`.
//! - Slice (`sched_slice`): the period (`sched_latency`, or `nr × min_granularity` beyond
//!   `sched_nr_latency` entities) × weight / queue weight, at least `min_granularity`.
//! - Tick (`entity_tick`, `check_preempt_tick`; CONFIG_HZ = 250): the current entity is
//!   preempted once it has run longer than its slice, or, after `min_granularity`, when it is
//!   more than a slice of vruntime ahead of the leftmost.
//! - Wake-up (`place_entity`, GENTLE_FAIR_SLEEPERS): vruntime = max(vruntime, min_vruntime −
//!   latency / 2), so a sleeper gets at most half a latency of credit; it preempts the current
//!   entity if that is more than the wakeup granularity ahead (`check_preempt_wakeup`,
//!   `wakeup_preempt_entity`). New vCPUs start a vslice after min_vruntime (START_DEBIT).
//! - Buddies (`pick_next_entity`): the next buddy (set by `yield_to`) runs instead of the
//!   leftmost if it is at most a wakeup granularity ahead of it; the skip buddy (a yielder)
//!   is passed over if the second entity is at most that far behind.
//! - Placement: a waking vCPU goes to its previous pCPU if idle, else to an idle pCPU of its
//!   socket (round robin from the previous one), else back to the previous one
//!   (`select_idle_sibling` within the LLC domain, without `wake_affine`); new vCPUs go to
//!   the least loaded pCPU (`find_idlest_cpu`). An idle pCPU pulls
//!   the least recently run waiting vCPU from the busiest queue (`newidle_balance`,
//!   `detach_tasks` walks `cfs_tasks` from its cold end); at each tick a pCPU pulls one from a
//!   queue at least 2 entities longer (`load_balance`, simplified). Moved vCPUs keep their
//!   vruntime relative to min_vruntime (`migrate_task_rq_fair`). A thread bound to one pCPU
//!   (`Cx::pinned`: a host's per-CPU kernel thread, `kthread_bind`) is inserted and woken
//!   there and never pulled (`can_migrate_task` checks `cpus_ptr`).
//! - Tunables scale by `1 + ilog2(min(pCPUs, 8))` (`sysctl_sched_tunable_scaling` = log,
//!   `get_update_sysctl_factor`): 6 ms / 0.75 ms / 1 ms are the unscaled defaults.
//!
//! # Left out (approximations)
//! Group scheduling (cgroups), so a VM's weight applies to each of its vCPU threads and caps
//! (CFS bandwidth control) are ignored; PELT load tracking (balancing counts entities instead
//! of load, every tick instead of every `balance_interval`, with no cache-hot check); NUMA,
//! SMT and MC scheduling domains (the topology is flat); wake_affine; the LAST_BUDDY and
//! NEXT_BUDDY-on-wakeup features; HRTICK. EEVDF replaced CFS in Linux 6.6; we model CFS as
//! KVM ran on it when the seed papers measured it.
//!
//! A pause-loop exit reaches `yield_` and does nothing here: this is KVM with PLE handling
//! disabled. `kvm-dy` (kvm_dy.rs) adds KVM's directed yield on top, through `yield_to`.
//!
//! Suits: general-purpose hosts, the KVM baseline of the seed papers. Known weakness: blind to
//! guest synchronization, so it preempts lock holders and runs spinning waiters.

use std::collections::BTreeSet;

use crate::kvm_version;
use crate::linux_balance::{self, Mask};
use crate::linux_core_sched::{self, CoreSched};
use crate::linux_fair::{self, fair, YieldTo};
use vsched_model::{
    ConfigError, Cx, Decision, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy, PolicyInfo, Time, VcpuId,
    YieldReason, NS_PER_S, NS_PER_US,
};

// ---- Constants (defaults; each is a scenario parameter) ----

/// `sysctl_sched_latency`, unscaled: the period in which every runnable entity runs once.
const LATENCY_US: i64 = 6_000;
/// `sysctl_sched_min_granularity`, unscaled: the shortest slice before a tick may preempt.
const MIN_GRANULARITY_US: i64 = 750;
/// `sysctl_sched_wakeup_granularity`, unscaled: how far ahead the current entity must be
/// before a waking one preempts it (and how far a buddy may be favoured).
const WAKEUP_GRANULARITY_US: i64 = 1_000;
/// CONFIG_HZ of common distribution kernels: a 4 ms tick.
const TICK_HZ: i64 = 250;

pub(crate) const PARAMS: &[ParamSpec] = &[
    kvm_version::CFS_PARAM,
    linux_core_sched::PARAM,
    ParamSpec {
        name: "latency_us",
        default: ParamDefault::Int(LATENCY_US),
        range: ParamRange::Int { min: 100, max: 1_000_000 },
        doc: "sched_latency, unscaled, µs",
    },
    ParamSpec {
        name: "min_granularity_us",
        default: ParamDefault::Int(MIN_GRANULARITY_US),
        range: ParamRange::Int { min: 100, max: 1_000_000 },
        doc: "sched_min_granularity, unscaled, µs",
    },
    ParamSpec {
        name: "wakeup_granularity_us",
        default: ParamDefault::Int(WAKEUP_GRANULARITY_US),
        range: ParamRange::Int { min: 0, max: 1_000_000 },
        doc: "sched_wakeup_granularity, unscaled, µs",
    },
    ParamSpec {
        name: "tunable_scaling",
        default: ParamDefault::Str("log"),
        range: ParamRange::Any,
        doc: "scale the three tunables by \"log\" (1 + ilog2(min(pCPUs, 8))), \"linear\" (min(pCPUs, 8)) or \"none\"",
    },
    ParamSpec {
        name: "tick_hz",
        default: ParamDefault::Int(TICK_HZ),
        range: ParamRange::Int { min: 1, max: 10_000 },
        doc: "scheduler tick frequency (CONFIG_HZ)",
    },
];

// ---- State, by scope ----

/// A pCPU's `cfs_rq`.
#[derive(Default)]
struct RunQueue {
    /// Waiting entities by (vruntime, id): the red-black tree.
    tree: BTreeSet<(i64, VcpuId)>,
    /// The running entity (on the queue, but not in the tree, as in fair.c).
    curr: Option<VcpuId>,
    min_vruntime: i64,
    next: Option<VcpuId>,
    skip: Option<VcpuId>,
}

/// A vCPU thread's `sched_entity`.
#[derive(Clone, Default)]
struct Entity {
    vruntime: i64,
    weight: i64,
    /// The run queue it belongs to (`task_cpu`).
    cpu: PcpuId,
    in_tree: bool,
    exec_start: Time,
    sum_exec: Time,
    /// `prev_sum_exec_runtime`: `sum_exec` when it was last picked.
    slice_start: Time,
    /// When it last stopped running (for the least-recently-run pull).
    last_ran: Time,
    /// The one pCPU it may run on (`kthread_bind`: a host's per-CPU kernel thread).
    pinned: Option<PcpuId>,
}

pub struct Cfs {
    // Configuration (unscaled; `init` scales).
    latency_ns: i64,
    min_gran_ns: i64,
    wakeup_gran_ns: i64,
    scaling: String,
    tick_ns: Time,
    /// `sched_nr_latency`: beyond this many entities the period stretches.
    nr_latency: usize,
    /// KVM's PLE window growth of the `kvm_version` (`kvm_version.rs`).
    ple_window_grow: u32,
    /// Balance scheduling's sibling rule (`balance-cfs`, linux_balance.rs); off in `cfs`.
    balance: bool,
    /// Core scheduling with a cookie per VM (`core_sched = "vm"`, linux_core_sched.rs).
    core_sched: bool,
    // State.
    rqs: Vec<RunQueue>,
    se: Vec<Entity>,
    core: CoreSched,
}

impl Cfs {
    /// The same scheduler with balance scheduling's sibling rule (`balance-cfs`).
    pub(crate) fn balanced(self) -> Cfs {
        Cfs { balance: true, ..self }
    }

    /// The run queue `u` is in, waiting or running (None while it sleeps).
    fn rq_of(&self, u: VcpuId) -> Option<PcpuId> {
        let cpu = self.se[u].cpu;
        (self.se[u].in_tree || self.rqs[cpu].curr == Some(u)).then_some(cpu)
    }

    /// Balance scheduling's mask for `v` now (linux_balance.rs), if the rule is on.
    fn mask(&self, cx: &Cx, v: VcpuId) -> Option<Mask> {
        linux_balance::mask(self.balance, cx, v, |u| self.rq_of(u))
    }

    /// `is_cpu_allowed`: may `v` run on `p`?
    fn allowed(&self, cx: &Cx, v: VcpuId, p: PcpuId) -> bool {
        self.se[v].pinned.is_none() && linux_balance::may_move(self.balance, cx, v, p, |u| self.rq_of(u))
    }

    /// `can_migrate_task`: may the balancer move `v` to `p`? Where allowed, and with core
    /// scheduling not into a core that runs another cookie (`task_hot`).
    fn may_move(&self, cx: &Cx, v: VcpuId, p: PcpuId) -> bool {
        self.allowed(cx, v, p) && self.core.core_cookie_match(cx, p, v)
    }

    /// `wakeup_gran`: the wakeup granularity in `v`'s vruntime.
    fn gran(&self, v: VcpuId) -> i64 {
        fair(self.wakeup_gran_ns, self.se[v].weight)
    }

    fn nr_running(&self, p: PcpuId) -> usize {
        self.rqs[p].tree.len() + self.rqs[p].curr.is_some() as usize
    }

    fn idle(&self, p: PcpuId) -> bool {
        self.nr_running(p) == 0
    }

    /// `sched_slice`: `v`'s share of the period on `p`, counting `v` if it is not there yet.
    fn slice(&self, p: PcpuId, v: VcpuId) -> i64 {
        let rq = &self.rqs[p];
        let on_rq = rq.curr == Some(v) || (self.se[v].in_tree && self.se[v].cpu == p);
        let mut load: i64 = rq.tree.iter().map(|&(_, u)| self.se[u].weight).sum();
        load += rq.curr.map_or(0, |c| self.se[c].weight);
        let mut nr = self.nr_running(p);
        if !on_rq {
            load += self.se[v].weight;
            nr += 1;
        }
        let period = if nr > self.nr_latency { nr as i64 * self.min_gran_ns } else { self.latency_ns };
        (period * self.se[v].weight / load).max(self.min_gran_ns)
    }

    /// `update_min_vruntime`: never decreases.
    fn update_min(&mut self, p: PcpuId) {
        let rq = &self.rqs[p];
        let curr = rq.curr.map(|c| self.se[c].vruntime);
        let left = rq.tree.first().map(|&(v, _)| v);
        if let Some(m) = [curr, left].into_iter().flatten().min() {
            self.rqs[p].min_vruntime = self.rqs[p].min_vruntime.max(m);
        }
    }

    /// `update_curr`: charge the running entity of `p` up to now.
    fn update_curr(&mut self, cx: &Cx, p: PcpuId) {
        let Some(c) = self.rqs[p].curr else { return };
        let e = &mut self.se[c];
        let delta = cx.now() - e.exec_start;
        e.exec_start = cx.now();
        e.sum_exec += delta;
        e.vruntime += fair(delta as i64, e.weight);
        self.update_min(p);
    }

    fn enqueue(&mut self, p: PcpuId, v: VcpuId) {
        let e = &mut self.se[v];
        e.cpu = p;
        e.in_tree = true;
        // Like `__enqueue_entity`, this leaves min_vruntime alone: only `update_curr` and
        // dequeues move it.
        self.rqs[p].tree.insert((e.vruntime, v));
    }

    fn tree_remove(&mut self, v: VcpuId) {
        let e = &mut self.se[v];
        if e.in_tree {
            e.in_tree = false;
            self.rqs[e.cpu].tree.remove(&(e.vruntime, v));
        }
    }

    /// `clear_buddies`: forget `v` as a buddy of its queue.
    fn clear_buddies(&mut self, p: PcpuId, v: VcpuId) {
        let rq = &mut self.rqs[p];
        if rq.next == Some(v) {
            rq.next = None;
        }
        if rq.skip == Some(v) {
            rq.skip = None;
        }
    }

    /// A waiting or sleeping vCPU moves to `to`, keeping its lag behind min_vruntime.
    fn migrate(&mut self, v: VcpuId, to: PcpuId) {
        let from = self.se[v].cpu;
        self.se[v].vruntime += self.rqs[to].min_vruntime - self.rqs[from].min_vruntime;
        self.se[v].cpu = to;
    }

    /// `place_entity`: START_DEBIT for a new vCPU, GENTLE_FAIR_SLEEPERS for a waking one.
    fn place(&mut self, p: PcpuId, v: VcpuId, initial: bool) {
        let min = self.rqs[p].min_vruntime;
        let target = if initial { min + fair(self.slice(p, v), self.se[v].weight) } else { min - self.latency_ns / 2 };
        let e = &mut self.se[v];
        e.vruntime = if initial { target } else { e.vruntime.max(target) };
    }

    /// `check_preempt_wakeup`: `v` was just queued on `p`.
    fn check_preempt(&mut self, cx: &mut Cx, p: PcpuId, v: VcpuId) {
        let Some(c) = self.rqs[p].curr else {
            cx.resched(p);
            return;
        };
        self.update_curr(cx, p);
        if self.se[c].vruntime - self.se[v].vruntime > self.gran(v) {
            cx.count("cfs.wakeup_preemptions");
            cx.resched(p);
        }
    }

    /// Moves the least recently run waiting vCPU of the busiest other queue to `p`, if that
    /// queue holds at least `min_gap` more entities than `p` and one is waiting.
    /// Only a thread allowed on `p` counts (`can_migrate_task` checks `cpus_ptr`): never one
    /// bound to its pCPU, and under balance scheduling only one whose mask holds `p`.
    fn pull(&mut self, cx: &mut Cx, p: PcpuId, min_gap: usize) -> Option<VcpuId> {
        let movable = |q: PcpuId| self.rqs[q].tree.iter().any(|&(_, u)| self.may_move(cx, u, p));
        let busiest = linux_fair::busiest(p, self.rqs.len(), min_gap, |q| self.nr_running(q), movable)?;
        let waiting = self.rqs[busiest].tree.iter().map(|&(_, u)| u).filter(|&u| self.may_move(cx, u, p));
        let v = linux_fair::coldest(waiting, |u| self.se[u].last_ran)?;
        self.move_waiting(cx, v, p);
        cx.count(if min_gap == 0 { "cfs.newidle_pulls" } else { "cfs.balance_pulls" });
        Some(v)
    }

    /// `detach_task` + `attach_task`: the waiting `v` moves to `to`'s queue.
    fn move_waiting(&mut self, cx: &mut Cx, v: VcpuId, to: PcpuId) {
        let from = self.se[v].cpu;
        self.tree_remove(v);
        self.clear_buddies(from, v);
        self.update_min(from);
        self.core.dequeued(cx, from, self.nr_running(from));
        self.migrate(v, to);
        self.enqueue(to, v);
        self.core.enqueued(cx, to);
    }

    /// `pick_next_entity(cfs_rq, curr)` with the next and skip buddies: the running entity
    /// counts if it is still queued (a sibling's, under core scheduling; `pick_next` puts its
    /// own back first). Takes nothing out of the tree.
    fn choose(&self, p: PcpuId) -> Option<VcpuId> {
        let rq = &self.rqs[p];
        let vr = |u: VcpuId| self.se[u].vruntime;
        let curr = rq.curr;
        let first = rq.tree.first().map(|&(_, u)| u);
        // `entity_before(curr, left)`: strictly earlier.
        let left = match (first, curr) {
            (Some(f), Some(c)) if vr(c) < vr(f) => c,
            (Some(f), _) => f,
            (None, c) => c?,
        };
        let gran = self.gran(left);
        let mut se = left;
        if rq.skip == Some(left) {
            let second = if Some(left) == curr {
                first
            } else {
                let after = rq.tree.range((vr(left), left)..).nth(1).map(|&(_, u)| u);
                match (after, curr) {
                    (Some(a), Some(c)) if vr(c) < vr(a) => Some(c),
                    (None, c) => c,
                    (a, _) => a,
                }
            };
            if let Some(second) = second.filter(|&u| vr(u) - vr(left) <= gran) {
                se = second;
            }
        }
        let queued_here = |n: VcpuId| (self.se[n].in_tree && self.se[n].cpu == p) || curr == Some(n);
        if let Some(n) = rq.next.filter(|&n| queued_here(n)) {
            if vr(n) - vr(left) <= gran {
                se = n;
            }
        }
        Some(se)
    }

    /// `set_next_entity`: `v`, chosen on `p`, leaves the tree to run.
    fn take(&mut self, p: PcpuId, v: VcpuId) {
        self.clear_buddies(p, v);
        self.tree_remove(v);
    }
}

impl crate::kvm::LinuxSched for Cfs {
    /// core.c `yield_to` + fair.c `yield_to_task_fair` / `yield_task_fair`: `me`, running,
    /// asks that the waiting `target` run next. Callers pass a queued `target`.
    fn yield_to(&mut self, cx: &mut Cx, me: VcpuId, target: VcpuId) -> YieldTo {
        let (p, q) = (self.se[me].cpu, self.se[target].cpu);
        debug_assert_eq!(self.rqs[p].curr, Some(me), "yield_to from a vCPU that is not running");
        debug_assert!(self.se[target].in_tree, "yield_to a vCPU that is not waiting");
        if self.nr_running(p) == 1 && self.nr_running(q) == 1 {
            return YieldTo::Esrch;
        }
        self.rqs[q].next = Some(target);
        if self.nr_running(p) > 1 {
            self.clear_buddies(p, me);
            self.update_curr(cx, p);
            self.rqs[p].skip = Some(me);
        }
        if q != p {
            cx.resched(q); // resched_curr(p_rq): "pick_next_entity takes care of fairness"
        }
        cx.resched(p); // the yielder calls schedule()
        YieldTo::Yielded
    }

    fn single_task_running(&self, p: PcpuId) -> bool {
        self.nr_running(p) == 1
    }
}

impl Policy for Cfs {
    /// Contract: per-pCPU queues exist; tunables are scaled for this host.
    fn init(&mut self, cx: &mut Cx) {
        let factor = linux_fair::tunable_factor(&self.scaling, cx.n_pcpus());
        self.latency_ns *= factor;
        self.min_gran_ns *= factor;
        self.wakeup_gran_ns *= factor;
        self.rqs = (0..cx.n_pcpus()).map(|_| RunQueue::default()).collect();
        self.se = vec![Entity::default(); cx.n_vcpus()];
        self.core.init(cx, self.core_sched);
    }

    fn others_queued(&self, p: PcpuId) -> Option<bool> {
        Some(self.nr_running(p) > 1)
    }

    fn tick_period_ns(&self) -> Option<Time> {
        Some(self.tick_ns)
    }

    /// Linux starts every CPU's tick on the same jiffy (`tick_setup_sched_timer`,
    /// kernel/time/tick-sched.c; `skew_tick` is off by default) and forwards it exactly.
    fn ticks_aligned(&self) -> bool {
        true
    }

    /// KVM grows the PLE window ×2 per exit (`ple_window_grow`, Linux ≥ 3.18); before, it
    /// is fixed (`kvm_version.rs`).
    fn ple_window_grow(&self) -> u32 {
        self.ple_window_grow
    }

    fn supports_vm_lifecycle(&self) -> bool {
        true
    }

    /// Contract: a new vCPU thread goes to the least loaded pCPU (lowest index on ties), a
    /// thread bound to a pCPU to that one, a vslice after its min_vruntime; mid-run it may
    /// preempt like a wake-up (`wake_up_new_task`).
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        let weight = linux_fair::load_weight(cx.domain(cx.dom_of(v)).weight);
        let pinned = cx.pinned(v);
        self.se[v] = Entity { weight, last_ran: cx.now(), pinned, ..Entity::default() };
        self.core.insert(cx, v);
        let p = match (pinned, self.mask(cx, v)) {
            (Some(q), _) => q,
            (None, Some(mask)) => linux_balance::fork_cpu(cx, &mask, |q| self.nr_running(q)),
            (None, None) => linux_fair::least_loaded(cx, |q| self.nr_running(q)),
        };
        self.update_curr(cx, p);
        self.se[v].cpu = p;
        self.place(p, v, true);
        self.enqueue(p, v);
        self.core.enqueued(cx, p);
        if cx.mid_run() {
            self.check_preempt(cx, p, v);
        }
    }

    /// Contract: dequeue and forget.
    fn vcpu_remove(&mut self, cx: &mut Cx, v: VcpuId) {
        let p = self.se[v].cpu;
        self.tree_remove(v);
        self.clear_buddies(p, v);
        if self.rqs[p].curr == Some(v) {
            self.rqs[p].curr = None;
        }
        self.update_min(p);
        self.core.dequeued(cx, p, self.nr_running(p));
    }

    /// `try_to_wake_up`: choose a pCPU (a bound thread's own), place, enqueue, maybe preempt.
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        let prev = self.se[v].cpu;
        let scan = |q| self.idle(q) && self.core.cookie_match(cx, q, v);
        let p = match (self.se[v].pinned, self.mask(cx, v)) {
            (Some(q), _) => q,
            (None, Some(mask)) => linux_balance::wake_cpu(cx, &mask, prev, |q| self.idle(q)),
            (None, None) => linux_fair::wake_cpu(cx, prev, |q| self.idle(q), scan),
        };
        if p != prev {
            self.migrate(v, p);
        }
        self.update_curr(cx, p);
        self.place(p, v, false);
        self.enqueue(p, v);
        self.core.enqueued(cx, p);
        self.check_preempt(cx, p, v);
    }

    /// `dequeue_entity(DEQUEUE_SLEEP)`: `v` leaves its queue; its vruntime stays absolute.
    fn sleep(&mut self, cx: &mut Cx, v: VcpuId) {
        let p = self.se[v].cpu;
        self.update_curr(cx, p);
        self.clear_buddies(p, v);
        if self.rqs[p].curr == Some(v) {
            self.rqs[p].curr = None;
            self.se[v].last_ran = cx.now();
        }
        self.update_min(p);
        self.core.dequeued(cx, p, self.nr_running(p));
    }

    /// PLE handling disabled: a pause-loop exit changes nothing (see the header).
    fn yield_(&mut self, _cx: &mut Cx, _v: VcpuId, _why: YieldReason) {}

    /// `pick_next_task_fair`: put `prev` back, pick with buddies, or pull work if empty.
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, _prev: Option<VcpuId>) -> Decision {
        self.update_curr(cx, p);
        if let Some(c) = self.rqs[p].curr.take() {
            self.se[c].last_ran = cx.now();
            if cx.running_on(c) == Some(p) {
                self.enqueue(p, c);
            }
        }
        let next = if self.core.on() {
            self.core_pick(cx, p)
        } else {
            if self.rqs[p].tree.is_empty() {
                self.pull(cx, p, 0);
            }
            self.choose(p)
        };
        let Some(v) = next else {
            return Decision::idle();
        };
        self.take(p, v);
        self.rqs[p].curr = Some(v);
        let e = &mut self.se[v];
        e.exec_start = cx.now();
        e.slice_start = e.sum_exec;
        // The tick and wake-ups preempt; no slice timer (HRTICK is off by default).
        Decision { next: Some(v), slice_ns: None }
    }

    /// `entity_tick` → `check_preempt_tick`, then the periodic balance.
    fn tick(&mut self, cx: &mut Cx, p: PcpuId) {
        self.update_curr(cx, p);
        if let Some(c) = self.rqs[p].curr.filter(|_| self.nr_running(p) > 1) {
            let ideal = self.slice(p, c);
            let ran = (self.se[c].sum_exec - self.se[c].slice_start) as i64;
            let left = self.rqs[p].tree.first().map_or(i64::MIN, |&(v, _)| v);
            // Linux compares the vruntime lead with the wall-clock slice, as written here.
            let ahead = ran >= self.min_gran_ns && self.se[c].vruntime - left > ideal;
            if ran > ideal || ahead {
                if ran > ideal {
                    self.clear_buddies(p, c);
                }
                cx.count("cfs.tick_preemptions");
                cx.resched(p);
            }
        }
        if let Some(c) = self.rqs[p].curr.filter(|_| self.core.on()) {
            let (ran, slice) = ((self.se[c].sum_exec - self.se[c].slice_start) as i64, self.slice(p, c));
            self.core.tick(cx, p, self.nr_running(p), ran, slice);
        }
        if let Some(v) = self.pull(cx, p, 2) {
            self.check_preempt(cx, p, v);
        }
    }

    /// Every waiting vCPU is in exactly its queue's tree; every running one is its pCPU's curr.
    fn check(&self, cx: &Cx) -> Result<(), String> {
        for (v, e) in self.se.iter().enumerate() {
            let waiting = cx.state(v) == vsched_model::VcpuState::Runnable;
            if waiting != e.in_tree || (e.in_tree && !self.rqs[e.cpu].tree.contains(&(e.vruntime, v))) {
                return Err(format!("vCPU {v} waiting = {waiting} but in a run queue = {}", e.in_tree));
            }
        }
        for (p, rq) in self.rqs.iter().enumerate() {
            if rq.curr != cx.curr(p) {
                return Err(format!("pCPU {p}: cfs runs {:?}, the host {:?}", rq.curr, cx.curr(p)));
            }
        }
        if self.balance {
            linux_balance::check(cx, |u| self.rq_of(u))?;
        }
        self.core.check(cx)
    }

    /// Under core scheduling, each VM's `core_forceidle_sum_s`.
    fn vm_metrics(&self, _cx: &Cx, d: vsched_model::DomId) -> Vec<(&'static str, f64)> {
        self.core.vm_metrics(d)
    }
}

/// `cfs` configured from its parameters (`PARAMS`); `kvm-dy` shares them.
pub(crate) fn from_params(params: &Params) -> Result<Cfs, ConfigError> {
    let latency_ns = params.int("latency_us") * NS_PER_US as i64;
    let min_gran_ns = params.int("min_granularity_us") * NS_PER_US as i64;
    let wakeup_gran_ns = params.int("wakeup_granularity_us") * NS_PER_US as i64;
    let scaling = params.choice("tunable_scaling", &["log", "linear", "none"])?;
    let hz = params.int("tick_hz");
    if hz > 100_000 {
        return Err(params.invalid("tick_hz", format!("expected an integer <= 100000, got {hz}")));
    }
    let profile = kvm_version::from_params(params, false)?;
    let core_sched = linux_core_sched::from_params(params)?;
    if core_sched && !profile.core_sched {
        return Err(params.invalid(
            "core_sched",
            format!("core scheduling arrived in Linux 5.14; kvm_version is {:?}", params.str("kvm_version")),
        ));
    }
    Ok(Cfs {
        ple_window_grow: profile.ple_window_grow,
        balance: false,
        core_sched,
        core: CoreSched::default(),
        latency_ns,
        min_gran_ns,
        wakeup_gran_ns,
        scaling,
        tick_ns: NS_PER_S / hz as Time,
        // DIV_ROUND_UP(latency, min_granularity); the scaling factor cancels out.
        nr_latency: ((latency_ns + min_gran_ns - 1) / min_gran_ns) as usize,
        rqs: Vec::new(),
        se: Vec::new(),
    })
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(from_params(params)?))
}

#[path = "cfs_core_sched.rs"]
mod core_sched;

pub const INFO: PolicyInfo = PolicyInfo {
    name: "cfs",
    description: "Linux CFS as KVM's host scheduler: weighted vruntime, wake-up placement and preemption, buddies; PLE exits ignored",
    hypervisor: vsched_model::Hypervisor::Kvm,
    params: PARAMS,
    build,
};
