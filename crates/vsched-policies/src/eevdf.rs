//! `eevdf` — Linux's EEVDF scheduler (Earliest Eligible Virtual Deadline First; Stoica &
//! Abdel-Wahab, 1995), the fair class that replaced CFS in Linux 6.6 and is therefore KVM's
//! vCPU scheduler on current hosts. Follows kernel/sched/fair.c of Linux 6.12 (the LTS
//! release of November 2024, the first with the complete EEVDF: delayed dequeue, shorter
//! slices that preempt, slices requested through `sched_setattr`).
//!
//! # What it models
//! Under KVM a vCPU is an ordinary host thread. Each pCPU has a run queue; each vCPU thread
//! a `sched_entity` with a load weight (a domain's weight 256 ↔ NICE_0_LOAD 1024, as in
//! `cfs`), a vruntime that grows by run time × 1024 / weight (`update_curr`), a slice r
//! (the request) and a virtual deadline vd = vruntime + r × 1024 / weight.
//! - The queue's virtual time V is the weighted average vruntime of its entities, the
//!   running one included (`avg_vruntime`, rounded down). An entity is eligible when it is
//!   owed service, vruntime ≤ V (`entity_eligible`, compared exactly as Σw·v ≥ v·Σw).
//! - Pick (`pick_eevdf`): the eligible entity with the earliest deadline (ties: the one
//!   queued first), the running one only if strictly earlier. RUN_TO_PARITY: the running
//!   entity keeps the pCPU while it is eligible and has the deadline it was picked with
//!   (`set_next_entity` stashes it). A pCPU that picks its current entity again does not
//!   refresh that stash (`pick_next_task_fair` skips `set_next_entity` when prev == next).
//! - Slice end (`update_curr` → `update_deadline`): once its vruntime reaches its deadline,
//!   the entity gets a new one (vruntime + r/w) and, with others queued, the pCPU
//!   reschedules. Linux notices at the tick (CONFIG_HZ 250; HRTICK is off by default) and
//!   wherever else it calls `update_curr` (an enqueue on that queue, a wake-up check).
//! - Sleep and wake-up (`dequeue_entity`, `place_entity`, PLACE_LAG): a sleeper keeps its
//!   lag vl = V − vruntime, clamped to ±(max(2r, tick) × 1024 / w) (`update_entity_lag`),
//!   and returns at V − vl × (W + w) / W, W the queue's weight without it (so that adding
//!   it leaves it exactly vl behind the new average); it is placed at V, with no lag, on an
//!   empty queue. Its deadline is then vruntime + r/w. A new vCPU starts at V with half a
//!   slice to its deadline (PLACE_DEADLINE_INITIAL).
//! - Delayed dequeue (DELAY_DEQUEUE, DELAY_ZERO, since 6.12): a vCPU that blocks while not
//!   eligible stays queued, competing, until it is picked (then it leaves, its positive lag
//!   cut to 0) or wakes (it is requeued where it is, on its old pCPU, re-placed at V if its
//!   lag is positive: `requeue_delayed_entity`, core.c `ttwu_runnable`).
//! - Wake-up preemption (`check_preempt_wakeup_fair`): unless a reschedule is already
//!   pending, the woken entity preempts if `pick_eevdf` would now pick it. PREEMPT_SHORT
//!   (6.12): a woken entity with a shorter slice that is eligible and has an earlier deadline
//!   (or finds the current one not eligible) cancels the current entity's RUN_TO_PARITY
//!   protection; a current entity so exposed is preempted at the next `update_curr` that
//!   finds it not eligible (`did_preempt_short`).
//! - Slices: `sysctl_sched_base_slice` 0.75 ms × (1 + ilog2(min(pCPUs, 8))) (the
//!   `tunable_scaling` of `cfs`); a VM's `slice_request_ns` (`sched_setattr`'s
//!   `sched_runtime`) is its vCPUs' custom slice (`custom_slice`, since 6.12), unscaled.
//! - Placement and balancing as `cfs` (linux_fair.rs): a waking vCPU goes to its previous
//!   pCPU if idle, else an idle pCPU of its socket, else its previous pCPU; new vCPUs to the
//!   least loaded; an idle pCPU pulls the least recently run waiting vCPU from the busiest
//!   queue, and each tick a pCPU pulls one from a queue at least 2 longer. Queues are
//!   compared by runnable entities, and delayed ones do not move (`can_migrate_task` since
//!   Linux 6.14, Vincent Guittot's delayed-dequeue fixes; 6.12.0 could move one), nor do
//!   threads bound to one pCPU (`Cx::pinned`), which are inserted and woken there. A pulled
//!   vCPU keeps its lag and its relative deadline (PLACE_REL_DEADLINE); `update_curr` runs on
//!   the queue it leaves, as `detach_task`'s dequeue does.
//! - `yield_to` (for KVM's PLE handler, as in `cfs`): core.c `yield_to`, fair.c
//!   `yield_to_task_fair` and `yield_task_fair`: -ESRCH if both queues hold a single entity
//!   (delayed ones count, as `rq->nr_running` counts them in 6.12); otherwise the target
//!   becomes its queue's next buddy, the yielder's deadline moves one slice later, the
//!   target's pCPU and the yielder's reschedule. Linux 6.12 picks the next buddy only with
//!   NEXT_BUDDY, off by default, so the buddy changes nothing there; PICK_BUDDY (Linux 6.14,
//!   commit 2a77e4be12cb, backported to 6.12.y in 2025) picks it when eligible: `pick_buddy`.
//!   Linux 6.17 (commit 79104becf42b, in 6.12.y since 6.12.63) changed the yield: an
//!   eligible yielder's vruntime moves to its deadline (it forfeits the rest of its slice)
//!   and the deadline one slice further; an ineligible one keeps both: `yield_forfeit`.
//!   `kvm_version` (`kvm_version.rs`) sets `pick_buddy`, `yield_forfeit` and `base_slice_us`:
//!   "6.12" (the default) is 6.12.0, "6.12.y" and "current" have all three changes.
//!
//! # Left out (approximations)
//! Group scheduling (cgroups: a VM's weight applies to each vCPU thread; no bandwidth caps,
//! no min-slice propagation); PELT (balancing counts entities, every tick, no cache-hot
//! check); NUMA/SMT/MC domains and wake_affine; NEXT_BUDDY on wake-up (off by default);
//! HRTICK; reweighting (weights never change here). `calc_delta_fair` divides exactly where
//! Linux multiplies by an inverse weight (under 10⁻⁶ apart up to VM weight 1024). Later
//! changes not in 6.12.0 that `kvm_version = "6.12.y"` brings: the 0.70 ms base slice (6.15,
//! commit 2ae891b82695), PICK_BUDDY and the yield forfeit (above). Not modelled: RUN_TO_PARITY's
//! protection shortened to the queue's minimum slice (mainline).
//!
//! A pause-loop exit reaches `yield_` and does nothing here: KVM with PLE handling off.
//!
//! Suits: the KVM baseline on current kernels. Known weakness: like CFS, blind to guest
//! synchronization; short slices cut lock holders' turns but also bring waiters back sooner.

use std::collections::BTreeSet;

use crate::kvm_version;
use crate::linux_balance::{self, Mask};
use crate::linux_core_sched::{self, CoreSched};
use crate::linux_fair::YieldTo;
use crate::linux_fair::{self, fair};
use vsched_model::{
    ConfigError, Cx, Decision, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy, PolicyInfo, Time, VcpuId,
    VcpuState, YieldReason, NS_PER_S, NS_PER_US,
};

// ---- Constants (defaults; each is a scenario parameter) ----

/// `normalized_sysctl_sched_base_slice`, µs (Linux 6.6–6.14).
const BASE_SLICE_US: i64 = 750;
/// CONFIG_HZ of common distribution kernels: a 4 ms tick.
const TICK_HZ: i64 = 250;

const fn feature(name: &'static str, on: bool, doc: &'static str) -> ParamSpec {
    ParamSpec { name, default: ParamDefault::Bool(on), range: ParamRange::Any, doc }
}

pub(crate) const PARAMS: &[ParamSpec] = &[
    kvm_version::EEVDF_PARAM,
    linux_core_sched::PARAM,
    ParamSpec {
        name: "base_slice_us",
        default: ParamDefault::Int(BASE_SLICE_US),
        range: ParamRange::Int { min: 1, max: 1_000_000 },
        doc: "sysctl_sched_base_slice, unscaled, µs (default: the kvm_version's; 750, or 700 in 6.12.y and current)",
    },
    ParamSpec {
        name: "tunable_scaling",
        default: ParamDefault::Str("log"),
        range: ParamRange::Any,
        doc: "scale the base slice by \"log\" (1 + ilog2(min(pCPUs, 8))), \"linear\" (min(pCPUs, 8)) or \"none\"",
    },
    ParamSpec {
        name: "tick_hz",
        default: ParamDefault::Int(TICK_HZ),
        range: ParamRange::Int { min: 1, max: 10_000 },
        doc: "scheduler tick frequency (CONFIG_HZ)",
    },
    feature("place_lag", true, "PLACE_LAG: a waking vCPU keeps its lag (else it starts at the queue's average)"),
    feature("place_deadline_initial", true, "PLACE_DEADLINE_INITIAL: a new vCPU's first deadline is half a slice away"),
    feature("run_to_parity", true, "RUN_TO_PARITY: the running vCPU keeps the pCPU while eligible, until its deadline"),
    feature("preempt_short", true, "PREEMPT_SHORT: a waking vCPU with a shorter slice cancels RUN_TO_PARITY"),
    feature(
        "delay_dequeue",
        true,
        "DELAY_DEQUEUE: a vCPU blocking while not eligible stays queued until picked or woken",
    ),
    feature("delay_zero", true, "DELAY_ZERO: a delayed vCPU's positive lag is cut to 0 when it leaves or wakes"),
    feature(
        "pick_buddy",
        false,
        "PICK_BUDDY (Linux ≥ 6.14, 6.12.y): pick yield_to's next buddy if eligible (default: the kvm_version's)",
    ),
    feature(
        "yield_forfeit",
        false,
        "an eligible yielder forfeits the rest of its slice (Linux ≥ 6.17, 6.12.y; default: the kvm_version's)",
    ),
];

// ---- State, by scope ----

/// The scheduler features of fair.c that change decisions (kernel/sched/features.h).
#[derive(Clone, Copy)]
struct Features {
    place_lag: bool,
    place_deadline_initial: bool,
    run_to_parity: bool,
    preempt_short: bool,
    delay_dequeue: bool,
    delay_zero: bool,
    pick_buddy: bool,
    /// `yield_task_fair` of commit 79104becf42b (not a `features.h` flag: the release's).
    yield_forfeit: bool,
}

/// A pCPU's `cfs_rq`.
#[derive(Default)]
struct RunQueue {
    /// Queued entities except `curr`, by (deadline, enqueue order): the rb-tree, where an
    /// entity goes right of those with an equal deadline. Delayed entities stay in it.
    tree: BTreeSet<(i64, u64, VcpuId)>,
    /// The entity last picked (`cfs_rq->curr`), kept out of the tree; after it blocks it stays
    /// here, no longer queued, until the pCPU picks again.
    curr: Option<VcpuId>,
    /// Σ weight × vruntime and Σ weight over the tree (`avg_vruntime`, `avg_load`; Linux keeps
    /// them relative to a reference vruntime to fit 64 bits, which rounds the same).
    sum_wv: i128,
    sum_w: i64,
    /// Where V rests while the queue is empty: the average when its last entity left. Only
    /// the first entity placed on an empty queue reads it, and nothing compares it with others.
    zero_vruntime: i64,
    /// The next buddy (`yield_to`).
    next: Option<VcpuId>,
}

/// A vCPU thread's `sched_entity`.
#[derive(Clone, Default)]
struct Entity {
    weight: i64,
    vruntime: i64,
    deadline: i64,
    /// The request r, ns: the base slice, or the VM's `slice_request_ns` (`custom_slice`).
    slice: i64,
    custom_slice: bool,
    /// Virtual lag at its last dequeue (`vlag`).
    vlag: i64,
    /// `deadline` holds deadline − vruntime (PLACE_REL_DEADLINE, after a migration).
    rel_deadline: bool,
    /// Its run queue (`task_cpu`).
    cpu: PcpuId,
    /// Queued on `cpu` (`on_rq`): in the tree, or its `curr` and runnable, or delayed.
    on_rq: bool,
    /// Blocked, but its dequeue delayed (`sched_delayed`).
    delayed: bool,
    /// Its key in the tree, if there.
    tree_key: Option<(i64, u64)>,
    /// RUN_TO_PARITY's stash (Linux keeps it in `vlag`): its deadline when last picked; the
    /// slice is protected while the deadline is unchanged.
    picked_deadline: Option<i64>,
    exec_start: Time,
    /// When it was last picked (`prev_sum_exec_runtime`: it runs from then until it stops).
    picked_at: Time,
    /// When it last stopped running (for the least-recently-run pull).
    last_ran: Time,
    /// The one pCPU it may run on (`kthread_bind`: a host's per-CPU kernel thread).
    pinned: Option<PcpuId>,
}

pub struct Eevdf {
    // Configuration (`base_slice_ns` unscaled until `init`).
    base_slice_ns: i64,
    scaling: String,
    tick_ns: Time,
    feat: Features,
    /// Balance scheduling's sibling rule (`balance-eevdf`, linux_balance.rs); off in `eevdf`.
    balance: bool,
    /// Core scheduling with a cookie per VM (`core_sched = "vm"`, linux_core_sched.rs).
    core_sched: bool,
    // State.
    rqs: Vec<RunQueue>,
    se: Vec<Entity>,
    core: CoreSched,
    /// Enqueue counter: the tree's tie-break.
    enqueues: u64,
}

/// ⌊a / b⌋ for b > 0 (`avg_vruntime` rounds down, "sign flips effective floor / ceiling").
fn div_floor(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && a < 0 {
        q - 1
    } else {
        q
    }
}

impl Eevdf {
    /// The same scheduler with balance scheduling's sibling rule (`balance-eevdf`).
    pub(crate) fn balanced(self) -> Eevdf {
        Eevdf { balance: true, ..self }
    }

    /// The run queue `u` is on (`on_rq`: waiting, running, or blocked with its dequeue
    /// delayed); None once it has left.
    fn rq_of(&self, u: VcpuId) -> Option<PcpuId> {
        self.se[u].on_rq.then_some(self.se[u].cpu)
    }

    /// Balance scheduling's mask for `u` now (linux_balance.rs), if the rule is on.
    fn mask(&self, cx: &Cx, u: VcpuId) -> Option<Mask> {
        linux_balance::mask(self.balance, cx, u, |w| self.rq_of(w))
    }

    /// `is_cpu_allowed`: a thread bound to its pCPU stays (`cpus_ptr`), and under balance
    /// scheduling only one allowed on `p` moves.
    fn allowed(&self, cx: &Cx, u: VcpuId, p: PcpuId) -> bool {
        self.se[u].pinned.is_none() && linux_balance::may_move(self.balance, cx, u, p, |w| self.rq_of(w))
    }

    /// `can_migrate_task`: a delayed vCPU stays (see the header), and only where allowed; with
    /// core scheduling not into a core that runs another cookie (`task_hot`).
    fn may_move(&self, cx: &Cx, u: VcpuId, p: PcpuId) -> bool {
        !self.se[u].delayed && self.allowed(cx, u, p) && self.core.core_cookie_match(cx, p, u)
    }

    /// `cfs_rq->nr_running`: queued entities, delayed ones and a runnable `curr` included.
    fn nr_queued(&self, p: PcpuId) -> usize {
        let rq = &self.rqs[p];
        rq.tree.len() + rq.curr.is_some_and(|c| self.se[c].on_rq) as usize
    }

    /// Entities that want to run: queued and not delayed (what balancing compares).
    fn nr_runnable(&self, p: PcpuId) -> usize {
        let rq = &self.rqs[p];
        let curr = rq.curr.is_some_and(|c| self.se[c].on_rq && !self.se[c].delayed) as usize;
        rq.tree.iter().filter(|&&(_, _, u)| !self.se[u].delayed).count() + curr
    }

    /// Σ w·v and Σ w over the queue, its runnable `curr` included.
    fn load(&self, p: PcpuId) -> (i128, i128) {
        let rq = &self.rqs[p];
        let (mut wv, mut w) = (rq.sum_wv, rq.sum_w as i128);
        if let Some(c) = rq.curr.filter(|&c| self.se[c].on_rq) {
            wv += self.se[c].weight as i128 * self.se[c].vruntime as i128;
            w += self.se[c].weight as i128;
        }
        (wv, w)
    }

    /// `avg_vruntime`: V, rounded down.
    fn avg_vruntime(&self, p: PcpuId) -> i64 {
        match self.load(p) {
            (_, 0) => self.rqs[p].zero_vruntime,
            (wv, w) => div_floor(wv, w) as i64,
        }
    }

    /// `entity_eligible`: v ≤ V, without the rounding of V.
    fn eligible(&self, p: PcpuId, u: VcpuId) -> bool {
        let (wv, w) = self.load(p);
        wv >= self.se[u].vruntime as i128 * w
    }

    /// The request in `u`'s vruntime: r × 1024 / w.
    fn vslice(&self, u: VcpuId) -> i64 {
        fair(self.se[u].slice, self.se[u].weight)
    }

    /// `entity_lag`: V − vruntime, within ±(max(2r, tick) in `u`'s vruntime).
    fn entity_lag(&self, avg: i64, u: VcpuId) -> i64 {
        let e = &self.se[u];
        let limit = fair((2 * e.slice).max(self.tick_ns as i64), e.weight);
        (avg - e.vruntime).clamp(-limit, limit)
    }

    /// RUN_TO_PARITY's test (`protect_slice`).
    fn protected(&self, u: VcpuId) -> bool {
        self.se[u].picked_deadline == Some(self.se[u].deadline)
    }

    fn tree_insert(&mut self, p: PcpuId, u: VcpuId) {
        self.enqueues += 1;
        let e = &mut self.se[u];
        let key = (e.deadline, self.enqueues);
        e.tree_key = Some(key);
        let rq = &mut self.rqs[p];
        rq.tree.insert((key.0, key.1, u));
        rq.sum_wv += e.weight as i128 * e.vruntime as i128;
        rq.sum_w += e.weight;
    }

    fn tree_remove(&mut self, u: VcpuId) {
        let e = &mut self.se[u];
        if let Some((deadline, order)) = e.tree_key.take() {
            let rq = &mut self.rqs[e.cpu];
            rq.tree.remove(&(deadline, order, u));
            rq.sum_wv -= e.weight as i128 * e.vruntime as i128;
            rq.sum_w -= e.weight;
        }
    }

    /// `clear_buddies`.
    fn clear_buddies(&mut self, p: PcpuId, u: VcpuId) {
        if self.rqs[p].next == Some(u) {
            self.rqs[p].next = None;
        }
    }

    /// `update_curr` + `update_deadline`: charges `p`'s current entity up to `now`; true if
    /// Linux would reschedule `p` (its slice ended, or PREEMPT_SHORT exposed it).
    fn update_curr(&mut self, now: Time, p: PcpuId) -> bool {
        let Some(c) = self.rqs[p].curr else { return false };
        let delta = now as i64 - self.se[c].exec_start as i64;
        if delta <= 0 {
            return false;
        }
        let base_slice = self.base_slice_ns;
        let e = &mut self.se[c];
        e.exec_start = now;
        e.vruntime += fair(delta, e.weight);
        let slice_ended = e.vruntime >= e.deadline;
        if slice_ended {
            if !e.custom_slice {
                e.slice = base_slice;
            }
            e.deadline = e.vruntime + fair(e.slice, e.weight);
        }
        if self.nr_queued(p) == 1 {
            return false;
        }
        // `did_preempt_short`: the protection was cancelled and it is no longer owed service.
        let exposed = self.feat.preempt_short && !self.protected(c) && !self.eligible(p, c);
        if slice_ended || exposed {
            self.clear_buddies(p, c);
        }
        slice_ended || exposed
    }

    /// `update_curr` where Linux lets it reschedule (a tick, an enqueue, a wake-up check).
    fn charge(&mut self, cx: &mut Cx, p: PcpuId) {
        if self.update_curr(cx.now(), p) {
            cx.count("eevdf.slice_preemptions");
            cx.resched(p);
        }
    }

    /// `pick_eevdf`: the earliest eligible deadline, RUN_TO_PARITY first.
    fn pick_eevdf(&self, p: PcpuId) -> Option<VcpuId> {
        let rq = &self.rqs[p];
        let curr = rq.curr.filter(|&c| self.se[c].on_rq);
        if self.nr_queued(p) == 1 {
            return curr.or_else(|| rq.tree.first().map(|&(_, _, u)| u));
        }
        let curr = curr.filter(|&c| self.eligible(p, c));
        if let Some(c) = curr.filter(|&c| self.feat.run_to_parity && self.protected(c)) {
            return Some(c);
        }
        let best = rq.tree.iter().map(|&(_, _, u)| u).find(|&u| self.eligible(p, u));
        match (best, curr) {
            (Some(b), Some(c)) if self.se[c].deadline < self.se[b].deadline => Some(c),
            (None, c) => c,
            (b, _) => b,
        }
    }

    /// `pick_next_entity`: the next buddy if PICK_BUDDY and it is eligible, else EEVDF.
    fn pick_next_entity(&self, p: PcpuId) -> Option<VcpuId> {
        match self.rqs[p].next {
            Some(n) if self.feat.pick_buddy && self.eligible(p, n) => Some(n),
            _ => self.pick_eevdf(p),
        }
    }

    /// `place_entity`: V − inflated lag (PLACE_LAG), the deadline a request later.
    fn place(&mut self, p: PcpuId, u: VcpuId, initial: bool) {
        if !self.se[u].custom_slice {
            self.se[u].slice = self.base_slice_ns;
        }
        let mut vslice = self.vslice(u);
        let avg = self.avg_vruntime(p);
        let mut lag = 0;
        if self.feat.place_lag && self.nr_queued(p) > 0 {
            let (_, load) = self.load(p);
            lag = (self.se[u].vlag as i128 * (load + self.se[u].weight as i128) / load) as i64;
        }
        let e = &mut self.se[u];
        e.vruntime = avg - lag;
        if e.rel_deadline {
            e.deadline += e.vruntime;
            e.rel_deadline = false;
            return;
        }
        if self.feat.place_deadline_initial && initial {
            vslice /= 2;
        }
        e.deadline = e.vruntime + vslice;
    }

    /// `enqueue_entity` on `p` (a wake-up, a new vCPU or a pulled one).
    fn enqueue(&mut self, cx: &mut Cx, p: PcpuId, u: VcpuId, initial: bool) {
        self.charge(cx, p);
        self.se[u].cpu = p;
        self.place(p, u, initial);
        self.tree_insert(p, u);
        self.se[u].on_rq = true;
    }

    /// `dequeue_entity` of a queued entity that really leaves `p`: its lag is kept.
    fn dequeue(&mut self, p: PcpuId, u: VcpuId) {
        self.clear_buddies(p, u);
        let avg = self.avg_vruntime(p);
        self.se[u].vlag = self.entity_lag(avg, u);
        self.rqs[p].zero_vruntime = avg;
        self.tree_remove(u);
        self.se[u].on_rq = false;
    }

    /// `pick_next_entity` picked a delayed entity: it leaves now (DEQUEUE_DELAYED).
    fn finish_delayed(&mut self, p: PcpuId, u: VcpuId) {
        self.dequeue(p, u);
        self.se[u].delayed = false;
        if self.feat.delay_zero {
            self.se[u].vlag = self.se[u].vlag.min(0);
        }
    }

    /// `requeue_delayed_entity`: a delayed entity woke where it is queued.
    fn requeue_delayed(&mut self, p: PcpuId, u: VcpuId) {
        self.se[u].delayed = false;
        if !self.feat.delay_zero {
            return;
        }
        let avg = self.avg_vruntime(p);
        self.se[u].vlag = self.entity_lag(avg, u);
        if self.se[u].vlag > 0 {
            self.tree_remove(u);
            self.se[u].vlag = 0;
            self.place(p, u, false);
            self.tree_insert(p, u);
        }
    }

    /// `check_preempt_wakeup_fair`: `u` was just queued on `p`.
    fn wakeup_preempt(&mut self, cx: &mut Cx, p: PcpuId, u: VcpuId) {
        let Some(c) = self.rqs[p].curr else {
            cx.resched(p); // the idle class yields to any fair entity
            return;
        };
        if c == u || cx.resched_pending(p) {
            return;
        }
        self.charge(cx, p);
        // `do_preempt_short` → `cancel_protect_slice`.
        let (woken, current) = (&self.se[u], &self.se[c]);
        if self.feat.preempt_short
            && woken.slice < current.slice
            && self.eligible(p, u)
            && (woken.deadline < current.deadline || !self.eligible(p, c))
        {
            self.se[c].picked_deadline = None;
        }
        if self.pick_eevdf(p) == Some(u) {
            cx.count("eevdf.wakeup_preemptions");
            cx.resched(p);
        }
    }

    /// `put_prev_entity`: the current entity, if still queued, goes back into the tree.
    fn put_prev(&mut self, now: Time, p: PcpuId) {
        if let Some(c) = self.rqs[p].curr.take() {
            self.se[c].last_ran = now;
            if self.se[c].on_rq {
                self.tree_insert(p, c);
            }
        }
    }

    /// `set_next_entity`: `u` leaves the tree to run, its slice protected (RUN_TO_PARITY).
    fn set_next(&mut self, now: Time, p: PcpuId, u: VcpuId) {
        self.clear_buddies(p, u);
        self.tree_remove(u);
        let e = &mut self.se[u];
        e.picked_deadline = Some(e.deadline);
        e.exec_start = now;
        e.picked_at = now;
        self.rqs[p].curr = Some(u);
    }

    /// Moves the least recently run waiting vCPU of the busiest other queue to `p`, if that
    /// queue holds at least `min_gap` more runnable entities than `p` (`detach_task`, then
    /// `attach_task`: the relative deadline and the lag travel with it).
    fn pull(&mut self, cx: &mut Cx, p: PcpuId, min_gap: usize) -> Option<VcpuId> {
        let movable = |q: PcpuId| self.rqs[q].tree.iter().any(|&(_, _, u)| self.may_move(cx, u, p));
        let q = linux_fair::busiest(p, self.rqs.len(), min_gap, |q| self.nr_runnable(q), movable)?;
        let waiting = self.rqs[q].tree.iter().map(|&(_, _, u)| u).filter(|&u| self.may_move(cx, u, p));
        let u = linux_fair::coldest(waiting, |u| self.se[u].last_ran)?;
        self.move_waiting(cx, u, p);
        cx.count(if min_gap == 0 { "eevdf.newidle_pulls" } else { "eevdf.balance_pulls" });
        Some(u)
    }

    /// `detach_task` + `attach_task`: the waiting `u` moves to `p`'s queue, its relative
    /// deadline and its lag with it.
    fn move_waiting(&mut self, cx: &mut Cx, u: VcpuId, p: PcpuId) {
        let q = self.se[u].cpu;
        self.charge(cx, q);
        self.dequeue(q, u);
        self.core.dequeued(cx, q, self.nr_runnable(q));
        let e = &mut self.se[u];
        e.deadline -= e.vruntime;
        e.rel_deadline = true;
        self.enqueue(cx, p, u, false);
        self.core.enqueued(cx, p);
    }
}

/// KVM's handlers on EEVDF (`kvm-eevdf`).
impl crate::kvm::LinuxSched for Eevdf {
    /// core.c `yield_to` + fair.c `yield_to_task_fair` / `yield_task_fair` (Linux 6.12):
    /// `me`, running, asks that the waiting `target` run next. Callers pass a queued,
    /// runnable `target`. See the header for what the next buddy does.
    fn yield_to(&mut self, cx: &mut Cx, me: VcpuId, target: VcpuId) -> YieldTo {
        let (p, q) = (self.se[me].cpu, self.se[target].cpu);
        debug_assert_eq!(self.rqs[p].curr, Some(me), "yield_to from a vCPU that is not running");
        debug_assert!(self.se[target].tree_key.is_some() && !self.se[target].delayed, "yield_to a vCPU not waiting");
        if self.nr_queued(p) == 1 && self.nr_queued(q) == 1 {
            return YieldTo::Esrch;
        }
        self.rqs[q].next = Some(target);
        if self.nr_queued(p) > 1 {
            self.clear_buddies(p, me);
            self.update_curr(cx.now(), p); // the yielder reschedules below anyway
            let vslice = self.vslice(me);
            if !self.feat.yield_forfeit {
                self.se[me].deadline += vslice;
            } else if self.eligible(p, me) {
                // Commit 79104becf42b ("sched/fair: Forfeit vruntime on yield", 6.17; in
                // 6.12.y since 6.12.63): an eligible yielder gives up the rest of its request,
                // its vruntime moved to its deadline, and starts the next one; an ineligible
                // one keeps both (core scheduling may run it while ineligible).
                let e = &mut self.se[me];
                e.vruntime = e.deadline;
                e.deadline += vslice;
            }
        }
        if q != p {
            cx.resched(q); // resched_curr(p_rq): "pick_next_entity takes care of fairness"
        }
        cx.resched(p); // the yielder calls schedule()
        YieldTo::Yielded
    }

    /// `rq->nr_running == 1`; a delayed vCPU still counts in 6.12.
    fn single_task_running(&self, p: PcpuId) -> bool {
        self.nr_queued(p) == 1
    }
}

impl Policy for Eevdf {
    /// Contract: per-pCPU queues exist; the base slice is scaled for this host.
    fn init(&mut self, cx: &mut Cx) {
        self.base_slice_ns *= linux_fair::tunable_factor(&self.scaling, cx.n_pcpus());
        self.rqs = (0..cx.n_pcpus()).map(|_| RunQueue::default()).collect();
        self.se = vec![Entity::default(); cx.n_vcpus()];
        self.core.init(cx, self.core_sched);
    }

    fn others_queued(&self, p: PcpuId) -> Option<bool> {
        Some(self.nr_queued(p) > 1)
    }

    fn tick_period_ns(&self) -> Option<Time> {
        Some(self.tick_ns)
    }

    /// Linux starts every CPU's tick on the same jiffy (`tick_setup_sched_timer`; `skew_tick`
    /// is off by default).
    fn ticks_aligned(&self) -> bool {
        true
    }

    /// KVM grows the PLE window ×2 per exit (`ple_window_grow`, Linux ≥ 3.18, so in every
    /// release with EEVDF).
    fn ple_window_grow(&self) -> u32 {
        2
    }

    fn supports_vm_lifecycle(&self) -> bool {
        true
    }

    /// Contract: a new vCPU thread goes to the pCPU with the fewest runnable entities (lowest
    /// index on ties), a thread bound to a pCPU to that one, at V with half a slice to its deadline; mid-run it may preempt like
    /// a wake-up (`wake_up_new_task`).
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        let info = cx.domain(cx.dom_of(v));
        let (slice, custom_slice) = match info.slice_request_ns {
            Some(ns) => (ns as i64, true),
            None => (self.base_slice_ns, false),
        };
        let weight = linux_fair::load_weight(info.weight);
        let pinned = cx.pinned(v);
        self.se[v] = Entity { weight, slice, custom_slice, last_ran: cx.now(), pinned, ..Entity::default() };
        self.core.insert(cx, v);
        let p = match (pinned, self.mask(cx, v)) {
            (Some(q), _) => q,
            (None, Some(mask)) => linux_balance::fork_cpu(cx, &mask, |q| self.nr_runnable(q)),
            (None, None) => linux_fair::least_loaded(cx, |q| self.nr_runnable(q)),
        };
        self.enqueue(cx, p, v, true);
        self.core.enqueued(cx, p);
        if cx.mid_run() {
            self.wakeup_preempt(cx, p, v);
        }
    }

    /// Contract: dequeue (a delayed entity too) and forget.
    fn vcpu_remove(&mut self, cx: &mut Cx, v: VcpuId) {
        let p = self.se[v].cpu;
        if self.se[v].tree_key.is_some() {
            self.dequeue(p, v);
        }
        self.clear_buddies(p, v);
        if self.rqs[p].curr == Some(v) {
            self.rqs[p].curr = None;
        }
        self.se[v].on_rq = false;
        self.se[v].delayed = false;
        self.core.dequeued(cx, p, self.nr_runnable(p));
    }

    /// `try_to_wake_up`: a delayed vCPU is requeued where it is (`ttwu_runnable`); any other
    /// chooses a pCPU, is placed with its lag and enqueued; then the wake-up preemption check.
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        let p = if self.se[v].delayed {
            let p = self.se[v].cpu;
            self.requeue_delayed(p, v);
            p
        } else {
            let (prev, idle) = (self.se[v].cpu, |q| self.nr_queued(q) == 0);
            let scan = |q| idle(q) && self.core.cookie_match(cx, q, v);
            let p = match (self.se[v].pinned, self.mask(cx, v)) {
                (Some(q), _) => q,
                (None, Some(mask)) => linux_balance::wake_cpu(cx, &mask, prev, idle),
                (None, None) => linux_fair::wake_cpu(cx, prev, idle, scan),
            };
            self.enqueue(cx, p, v, false);
            p
        };
        self.core.enqueued(cx, p);
        self.wakeup_preempt(cx, p, v);
    }

    /// `dequeue_entity(DEQUEUE_SLEEP)`: delayed if not eligible (DELAY_DEQUEUE), else `v`
    /// leaves with its lag. It stays its pCPU's `curr` until `pick_next`.
    fn sleep(&mut self, cx: &mut Cx, v: VcpuId) {
        let p = self.se[v].cpu;
        self.update_curr(cx.now(), p); // a reschedule is under way
        self.clear_buddies(p, v);
        // `sched_core_dequeue` runs before the class's dequeue, delayed or not.
        self.core.dequeued(cx, p, self.nr_runnable(p).saturating_sub(1));
        if self.feat.delay_dequeue && !self.eligible(p, v) {
            self.se[v].delayed = true;
            cx.count("eevdf.delayed_dequeues");
            return;
        }
        self.dequeue(p, v);
    }

    /// PLE handling disabled: a pause-loop exit changes nothing (see the header).
    fn yield_(&mut self, _cx: &mut Cx, _v: VcpuId, _why: YieldReason) {}

    /// `pick_next_task_fair`: pick in place (delayed picks leave and the pick repeats); an
    /// empty queue pulls work; a different pick puts the previous entity back.
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, _prev: Option<VcpuId>) -> Decision {
        let now = cx.now();
        self.update_curr(now, p); // we are rescheduling already
        if self.core.on() {
            return self.core_pick_next(cx, p);
        }
        let next = loop {
            if self.nr_queued(p) == 0 {
                self.put_prev(now, p);
                if self.pull(cx, p, 0).is_some() {
                    continue;
                }
                return Decision::idle();
            }
            let u = self.pick_next_entity(p).expect("a non-empty queue has an eligible entity");
            if !self.se[u].delayed {
                break u;
            }
            self.finish_delayed(p, u);
        };
        if self.rqs[p].curr != Some(next) {
            self.put_prev(now, p);
            self.set_next(now, p, next);
        }
        // The tick and wake-ups preempt; no slice timer (HRTICK is off by default).
        Decision { next: Some(next), slice_ns: None }
    }

    /// `task_tick_fair` → `entity_tick` → `update_curr`, then the periodic balance.
    fn tick(&mut self, cx: &mut Cx, p: PcpuId) {
        self.charge(cx, p);
        if let Some(c) = self.rqs[p].curr.filter(|_| self.core.on()) {
            let ran = (cx.now() - self.se[c].picked_at) as i64;
            self.core.tick(cx, p, self.nr_queued(p), ran, self.se[c].slice);
        }
        if let Some(v) = self.pull(cx, p, 2) {
            self.wakeup_preempt(cx, p, v);
        }
    }

    /// Every waiting vCPU is in exactly its queue's tree, delayed ones are blocked, each
    /// tree's sums match it, every pCPU's `curr` is the host's.
    fn check(&self, cx: &Cx) -> Result<(), String> {
        for (v, e) in self.se.iter().enumerate() {
            let waiting = cx.state(v) == VcpuState::Runnable;
            let queued = e.tree_key.is_some_and(|(d, o)| self.rqs[e.cpu].tree.contains(&(d, o, v)));
            if waiting != (queued && !e.delayed) || (e.delayed && !queued) {
                return Err(format!("vCPU {v}: waiting = {waiting}, queued = {queued}, delayed = {}", e.delayed));
            }
        }
        for (p, rq) in self.rqs.iter().enumerate() {
            if rq.curr != cx.curr(p) {
                return Err(format!("pCPU {p}: eevdf runs {:?}, the host {:?}", rq.curr, cx.curr(p)));
            }
            let w: i64 = rq.tree.iter().map(|&(_, _, u)| self.se[u].weight).sum();
            let wv: i128 =
                rq.tree.iter().map(|&(_, _, u)| self.se[u].weight as i128 * self.se[u].vruntime as i128).sum();
            if (w, wv) != (rq.sum_w, rq.sum_wv) {
                return Err(format!("pCPU {p}: avg_load {} and avg_vruntime sum stale", rq.sum_w));
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

/// `eevdf` configured from its parameters (`PARAMS`); a PLE handler on EEVDF shares them.
pub(crate) fn from_params(params: &Params) -> Result<Eevdf, ConfigError> {
    let profile = kvm_version::from_params(params, true)?;
    params.int("base_slice_us");
    let base_slice_ns = params.int_or("base_slice_us", profile.base_slice_us) * NS_PER_US as i64;
    let scaling = params.choice("tunable_scaling", &["log", "linear", "none"])?;
    let hz = params.int("tick_hz");
    if hz > 100_000 {
        return Err(params.invalid("tick_hz", format!("expected an integer <= 100000, got {hz}")));
    }
    let feat = Features {
        place_lag: params.bool("place_lag"),
        place_deadline_initial: params.bool("place_deadline_initial"),
        run_to_parity: params.bool("run_to_parity"),
        preempt_short: params.bool("preempt_short"),
        delay_dequeue: params.bool("delay_dequeue"),
        delay_zero: params.bool("delay_zero"),
        pick_buddy: params.bool_or("pick_buddy", profile.pick_buddy),
        yield_forfeit: params.bool_or("yield_forfeit", profile.yield_forfeit),
    };
    Ok(Eevdf {
        base_slice_ns,
        scaling,
        tick_ns: NS_PER_S / hz as Time,
        feat,
        balance: false,
        core_sched: linux_core_sched::from_params(params)?,
        rqs: Vec::new(),
        se: Vec::new(),
        core: CoreSched::default(),
        enqueues: 0,
    })
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(from_params(params)?))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "eevdf",
    description: "Linux 6.12 EEVDF as KVM's host scheduler: earliest eligible virtual deadline, lag, delayed dequeue, slice requests; PLE exits ignored",
    hypervisor: vsched_model::Hypervisor::Kvm,
    params: PARAMS,
    build,
};

#[path = "eevdf_core_sched.rs"]
mod core_sched;

#[cfg(test)]
#[path = "eevdf_tests.rs"]
mod tests;
