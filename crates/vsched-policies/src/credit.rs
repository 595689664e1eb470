//! `credit` — Xen's Credit1 scheduler (xen/common/sched/credit.c).
//!
//! # How it works
//! Credit is proportional share with a fixed currency. Every accounting period (one time
//! slice, 30 ms) the master pCPU hands out `credits_per_tslice × pCPUs` credits among the
//! *active* domains in proportion to `weight × active vCPUs`, bounded by each domain's cap
//! (`csched_acct`). A running vCPU burns 10 credits per ms (`burn_credits`). A vCPU with
//! credit left is UNDER, one in debt is OVER; each pCPU runs the head of its own run queue,
//! UNDER before OVER, FIFO within a priority, for a 30 ms slice (`csched_schedule`). A vCPU
//! that wakes while UNDER is BOOSTed above both, and loses BOOST only when a 10 ms tick finds
//! it running (`csched_unit_acct`), so a vCPU doing short I/O bursts stays boosted. A waking
//! vCPU tickles its pCPU (if idle, or if it outranks the current vCPU and nobody is idle) or
//! else one idle pCPU (`__runq_tickle`); a pCPU with nothing better than OVER work steals a
//! strictly higher-priority vCPU from a peer's run queue (`csched_load_balance`,
//! `csched_runq_steal`). A vCPU whose credit exceeds one slice's worth is idle-ish: it leaves
//! the active list and halves its credit. Capped domains that overspend are parked until
//! their credit turns positive again.
//!
//! # Xen versions
//! This is current Xen (4.19) by default. `xen_version = "3.0" | "3.2" | "4.0" | "4.1"` selects
//! the rules of an older release instead (tick-sampled debit, per-domain weights, the old
//! tickle, no rate limits, no YIELD flag...): see `xen_version.rs` for each rule and its source.
//!
//! # Fidelity notes (what we approximate)
//! - Credit arithmetic follows `csched_acct` step by step (integer rounding included).
//!   `burn_credits` keeps the sub-credit residual and restarts the charge at `now`.
//! - Initial placement spreads vCPUs round robin over pCPUs in creation order (Xen's
//!   `_csched_cpu_pick` at insert spreads them over idle pCPUs, the same result when VMs
//!   boot one after the other on a quiet host).
//! - After each accounting a pCPU's next tick re-sorts its run queue as `csched_runq_sort`
//!   does: UNDER-or-better ahead of OVER, nothing else reordered (a BOOSTed vCPU queued
//!   behind an UNDER one stays there).
//! - The tick-time migration check of `csched_unit_acct` follows each release's
//!   `_csched_cpu_pick` (`credit_pick.rs`), sockets and hardware threads included.
//! - No soft affinity, pinning or cpupools; every vCPU may run on every pCPU.
//! - Each pCPU ticks at its own phase, and every timer fires up to Xen's 50 µs slop late
//!   (`sim/clocks.rs`), as Xen's per-pCPU tickers drift apart after boot.
//! - A VM created mid-run is queued as at the start and then woken, as Xen creates a domain
//!   paused and unpauses it (`csched_unit_insert`, then `csched_unit_wake`: BOOST and tickle).
//!   A destroyed VM's vCPUs leave their run queue and their domain's active list
//!   (`csched_unit_remove`).
//!
//! # Where a yielding vCPU goes
//! Xen's `__runq_insert` puts a yielder behind its own priority class and one lower-priority
//! vCPU (`YieldPlacement::Xen`, this policy). `ytt` and `yth` (seed 001 §2, Fig. 1) are this
//! scheduler with the yielder at the tail of its run queue or at its head; see
//! [`YieldPlacement`]. Any of the three can leave a run queue out of priority order until the
//! next `csched_runq_sort`; nothing here assumes order beyond what Xen does (see `runq_insert`).
//!
//! Suits: the baseline every seed paper measures against. Known weakness: blind to guest
//! synchronization, so it preempts lock holders and runs spinning waiters (the LHP problem).
//!
//! # Beside this file
//! `credit_acct.rs`: the accounting (`burn_credits`, the active lists, `csched_acct`).
//! `credit_runq.rs`: the run queues (insert, remove, the sort after accounting, tickle, steal).
//! `credit_pick.rs`: `_csched_cpu_pick` and the tick-time migration. `credit_trace.rs`: what
//! Credit publishes to a trace. `credit_spread.rs`: the papers' sibling-spread rule (Xen has
//! none). `credit_variant.rs`: the co-scheduling policies built on Credit (`OnCredit`).

use crate::credit_pick::PickMasks;
use crate::credit_spread::Spread;
use crate::credit_trace::Published;
use crate::pcpu_set::PcpuSet;
use crate::xen_version::{self, Debit, XenProfile, XEN_TIMER_SLOP_NS};
use vsched_model::{
    ConfigError, Cx, Decision, DomId, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy, PolicyInfo, Time,
    VcpuId, VmType, YieldReason, NS_PER_MS, NS_PER_US,
};

// ---- Constants (defaults; each is a scenario parameter) ----

/// Time slice and accounting period: Xen's `sched_credit_tslice_ms` default.
const TSLICE_MS: i64 = 30;
/// Ticks per slice (`CSCHED_TICKS_PER_TSLICE`): one tick every 10 ms.
const TICKS_PER_TSLICE: i64 = 3;
/// Credits burnt per ms of running (`CSCHED_CREDITS_PER_MSEC`).
const CREDITS_PER_MSEC: i64 = 10;
/// A vCPU runs at least this long before a reschedule may replace it
/// (`sched_ratelimit_us`, default 1000 since Xen 4.2; the default is the `xen_version`'s).
const RATELIMIT_US: i64 = 1_000;
/// A pCPU, busy or idle, looks for work to steal at most this often (`load_balance_ratelimit`,
/// 1 ms since Xen 4.18; the default is the `xen_version`'s).
const LOAD_BALANCE_RATELIMIT_US: i64 = 1_000;
/// Never program a slice timer shorter than this (`CSCHED_MIN_TIMER`, 100 µs).
const MIN_TIMER_US: i64 = 100;

/// Priorities (`CSCHED_PRI_*`); larger runs first.
pub(crate) const PRI_BOOST: i8 = 0;
pub(crate) const PRI_UNDER: i8 = -1;
pub(crate) const PRI_OVER: i8 = -2;
/// What an idle pCPU competes with when it looks for work to steal.
pub(crate) const PRI_IDLE: i8 = -64;

/// The accounting timer's id.
const TIMER_ACCT: u64 = 0;

/// `xen_version`, which every policy built on Credit declares so that a scenario's `[host]
/// xen_version` reaches it (`xen_version.rs`).
pub(crate) const XEN_VERSION_PARAM: ParamSpec = ParamSpec {
    name: "xen_version",
    default: ParamDefault::Str("current"),
    range: ParamRange::Any,
    doc: "Credit's rules as in Xen \"3.0\", \"3.2\", \"4.0\", \"4.1\" or \"current\" (4.19)",
};

pub(crate) const PARAMS: &[ParamSpec] = &[
    XEN_VERSION_PARAM,
    ParamSpec { name: "tslice_ms", default: ParamDefault::Int(TSLICE_MS), range: ParamRange::Int { min: 1, max: 1_000 }, doc: "time slice and accounting period, ms" },
    ParamSpec {
        name: "ticks_per_tslice",
        default: ParamDefault::Int(TICKS_PER_TSLICE),
        range: ParamRange::Int { min: 1, max: 1_000 }, doc: "ticks per slice (tick = tslice / this)",
    },
    ParamSpec {
        name: "credits_per_msec",
        default: ParamDefault::Int(CREDITS_PER_MSEC),
        range: ParamRange::Int { min: 1, max: 1_000_000 }, doc: "credits burnt per ms of CPU",
    },
    ParamSpec {
        name: "ratelimit_us",
        default: ParamDefault::Int(RATELIMIT_US),
        range: ParamRange::Int { min: 0, max: 500_000 }, doc: "minimum run time before preemption, µs (0 = off; default: 1000 in current Xen, 0 before 4.2)",
    },
    ParamSpec {
        name: "load_balance_ratelimit_us",
        default: ParamDefault::Int(LOAD_BALANCE_RATELIMIT_US),
        range: ParamRange::Int { min: 0, max: 1_000_000 }, doc: "minimum interval between work-stealing passes of a pCPU, busy or idle, µs (0 = off; default: 1000 in current Xen, 0 before 4.18)",
    },
    ParamSpec { name: "min_timer_us", default: ParamDefault::Int(MIN_TIMER_US), range: ParamRange::Int { min: 10, max: 1_000_000 }, doc: "shortest slice timer, µs (at least the simulator's 10 µs, vsched_model::MIN_SLICE_NS)" },
    ParamSpec { name: "boost", default: ParamDefault::Bool(true), range: ParamRange::Any, doc: "raise waking UNDER vCPUs to BOOST" },
    ParamSpec {
        name: "tickle_one_idle",
        default: ParamDefault::Bool(true),
        range: ParamRange::Any, doc: "wake one idle pCPU per tickle, not all (default: true from Xen 4.1, false before)",
    },
];

/// Where a yielding vCPU goes back in its pCPU's run queue (seed 001 §2, Fig. 1).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum YieldPlacement {
    /// Xen's `__runq_insert`: behind the vCPUs of its own priority and one lower-priority vCPU.
    Xen,
    /// Yield to tail (`ytt`): behind every queued vCPU, whatever its priority.
    Tail,
    /// Yield to head (`yth`): the pCPU chooses among the others (work stealing included), then
    /// the yielder waits at the head of the run queue for the next round. Alone, it runs on.
    Head,
}

// ---- State, by scope ----

pub(crate) struct PcpuState {
    /// Run queue, head first, ordered by priority then arrival.
    pub(crate) runq: Vec<VcpuId>,
    /// Where `_csched_cpu_pick` starts among this pCPU's group's idlers (`idle_bias`).
    pub(crate) idle_bias: PcpuId,
    /// When it last looked for work to steal; `None` before the first time (the host has
    /// been up long before the run starts).
    last_load_balance: Option<Time>,
    /// The accounting epoch this run queue was last sorted in.
    pub(crate) sort_epoch: u64,
}

#[derive(Clone)]
pub(crate) struct VcpuState {
    /// Sub-credit remainder of burnt time, in (ns × credits per ms).
    pub(crate) residual: u64,
    /// Credits are burnt from here.
    pub(crate) start_time: Time,
    /// When it was last scheduled in (for the rate limit).
    run_start: Time,
    /// The pCPU whose run queue it belongs to (Xen's `v->processor`).
    pub(crate) processor: PcpuId,
    pub(crate) queued: bool,
    pub(crate) yielding: bool,
    /// Xen ≥ 4.18 (`yield_kept_queued`): yielded, and has not left a run queue since, so
    /// YIELD is still set after the yield's reschedule (a peer does not steal it, and it
    /// wakes as a yielder if it blocked).
    pub(crate) yield_kept: bool,
    /// `Head` placement: yielded in its pCPU's current round, so passed over until a vCPU
    /// that did not yield has had its turn there (see `pick_next_yield_to_head`).
    pub(crate) head_wait: bool,
    pub(crate) active: bool,
    /// Flagged at a tick to move where `_csched_cpu_pick` prefers (`_VPF_migrating`).
    pub(crate) migrating: bool,
}

impl VcpuState {
    /// A yielder left queued on purpose: no peer steals it (see `load_balance`).
    pub(crate) fn waits_for_its_pcpu(&self) -> bool {
        self.head_wait || self.yield_kept
    }

    /// A vCPU as Xen allocates it (`csched_alloc_udata`): on no list (and, in `Credit`'s
    /// dense arrays, no credit, UNDER, not parked).
    fn new() -> Self {
        VcpuState {
            residual: 0,
            start_time: 0,
            run_start: 0,
            processor: 0,
            queued: false,
            yielding: false,
            yield_kept: false,
            head_wait: false,
            active: false,
            migrating: false,
        }
    }
}

pub(crate) struct DomState {
    pub(crate) weight: u32,
    pub(crate) cap: u32,
    /// Active vCPUs, in activation order.
    pub(crate) active_vcpus: Vec<VcpuId>,
}

pub(crate) struct Credit {
    // Configuration.
    tslice_ns: Time,
    pub(crate) tick_ns: Time,
    pub(crate) credits_per_msec: i64,
    pub(crate) credits_per_tslice: i64,
    ratelimit_ns: Time,
    load_balance_ratelimit_ns: Time,
    min_timer_ns: Time,
    pub(crate) boost: bool,
    pub(crate) tickle_one_idle: bool,
    /// The version-dependent rules (`xen_version`).
    pub(crate) profile: XenProfile,
    pub(crate) spread: Spread,
    pub(crate) yield_placement: YieldPlacement,
    // State.
    pub(crate) pcpus: Vec<PcpuState>,
    /// Xen's `prv->idlers`: the pCPUs that ran idle at their last schedule and have not been
    /// tickled since.
    pub(crate) idlers: PcpuSet,
    pub(crate) vcpus: Vec<VcpuState>,
    /// Each vCPU's priority (Xen's `svc->pri`; UNDER when allocated), kept apart from the rest
    /// of its state: the run-queue walks (`credit_runq.rs`) read one byte per entry from here.
    pub(crate) pri: Vec<i8>,
    /// Each vCPU's credit (`svc->credit`) and whether it is parked over its cap
    /// (`CSCHED_FLAG_UNIT_PARKED`), apart for the same reason: `csched_acct` visits every
    /// active vCPU every 30 ms and reads only these and `pri` (`credit_acct.rs`).
    pub(crate) credit: Vec<i64>,
    pub(crate) parked: Vec<bool>,
    pub(crate) doms: Vec<DomState>,
    /// Active domains, in list order (`csched_acct` reorders it).
    pub(crate) active_doms: Vec<DomId>,
    /// Sum over active domains of their accounting weight (`prv->weight`; see `share_weight`).
    pub(crate) weight_total: i64,
    pub(crate) credit_balance: i64,
    pub(crate) sort_epoch: u64,
    /// Scratch copies of the active lists `csched_acct` walks (`credit_acct.rs`).
    pub(crate) acct_doms: Vec<DomId>,
    pub(crate) acct_vcpus: Vec<VcpuId>,
    /// Scratch masks of `cpu_pick` (`credit_pick.rs`).
    pub(crate) pick_masks: PickMasks,
    pub(crate) last_tickle: PcpuId,
    /// The pCPUs a tickle sends to, kept between tickles to spare an allocation per wake-up.
    pub(crate) tickle_targets: Vec<PcpuId>,
    /// The OVER vCPUs `runq_sort` moves behind the others, kept to spare an allocation.
    pub(crate) runq_sort_over: Vec<VcpuId>,
    pub(crate) balance_bias: PcpuId,
    /// The run queues' lengths and credits last published to the trace.
    published: Published,
}

impl Credit {
    /// The shortest slice timer it programs (`CSCHED_MIN_TIMER`).
    pub(crate) fn min_timer_ns(&self) -> Time {
        self.min_timer_ns
    }

    /// First half of `csched_schedule`: charge `prev`, and put it back in `p`'s run queue
    /// if it is still runnable. With `ratelimit`, a vCPU that ran less than the rate limit
    /// keeps the pCPU: the decision to return is `Some`.
    pub(crate) fn put_prev(
        &mut self,
        cx: &mut Cx,
        p: PcpuId,
        prev: Option<VcpuId>,
        ratelimit: bool,
    ) -> Option<Decision> {
        let cur = prev?;
        if self.profile.debit == Debit::TimeBurnt {
            self.burn_credits(cur, cx.now());
        }
        let still_running = cx.running_on(cur) == Some(p);
        if std::mem::take(&mut self.vcpus[cur].migrating) && still_running {
            // `_VPF_migrating` makes it not runnable here: no rate limit, no requeue on `p`.
            // (One that blocked before this reschedule simply loses the flag.)
            self.migrate(cx, cur, p);
            return None;
        }
        let s = &self.vcpus[cur];
        let runtime = cx.now() - s.run_start;
        if ratelimit
            && self.ratelimit_ns > 0
            && still_running
            && !s.yielding
            && !self.parked[cur]
            && runtime < self.ratelimit_ns
        {
            cx.count("credit.ratelimited");
            return Some(Decision::run(cur, (self.ratelimit_ns - runtime).max(self.min_timer_ns)));
        }
        if still_running && !self.parked[cur] {
            self.runq_insert(cx, p, cur);
        }
        None
    }

    /// Credit's choice for `p`: the head of its run queue, or, when that is OVER or idle, a
    /// higher-priority vCPU stolen from a peer (`csched_load_balance`). Nothing is dequeued.
    pub(crate) fn choose(&mut self, cx: &mut Cx, p: PcpuId) -> Option<VcpuId> {
        let now = cx.now();
        let head_pri = self.pcpus[p].runq.first().map_or(PRI_IDLE, |&u| self.pri[u]);
        // Xen 4.18's rate limit holds for an idle pCPU too (see `xen_version.rs`); 0 turns it
        // off, as before 4.18.
        let may_balance = self.load_balance_ratelimit_ns == 0
            || self.pcpus[p].last_load_balance.is_none_or(|t| now - t > self.load_balance_ratelimit_ns);
        if head_pri <= PRI_OVER && may_balance {
            self.pcpus[p].last_load_balance = Some(now);
            if let Some(u) = self.load_balance(cx, p, head_pri) {
                return Some(u);
            }
        }
        self.pcpus[p].runq.first().copied()
    }

    /// Second half of `csched_schedule`: dequeue `next` (from whichever run queue holds it)
    /// and run it on `p` for a slice, or go idle.
    pub(crate) fn commit(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>, next: Option<VcpuId>) -> Decision {
        let now = cx.now();
        if let Some(cur) = prev {
            // Up to Xen 4.17 the yield ends here; from 4.18 YIELD stays set until the vCPU
            // leaves a run queue (`runq_remove`), so that it is not stolen meanwhile.
            let s = &mut self.vcpus[cur];
            s.yield_kept |= s.yielding && self.profile.yield_kept_queued;
            s.yielding = false;
        }
        match next {
            Some(v) => {
                self.runq_remove(v);
                self.idlers.remove(p);
                let s = &mut self.vcpus[v];
                // It runs, so it has left its run queue, even if `Head` placement took it
                // out before this pick: its YIELD is over.
                s.yield_kept = false;
                s.processor = p;
                s.start_time = now;
                s.head_wait = false;
                if prev != Some(v) {
                    s.run_start = now;
                }
                Decision::run(v, self.tslice_ns)
            }
            None => {
                self.idlers.insert(p);
                if self.profile.idle_slice {
                    // Xen 3.x gives the idle vCPU a slice too (3.0.4 `csched_schedule` L1204).
                    Decision { next: None, slice_ns: Some(self.tslice_ns) }
                } else {
                    Decision::idle()
                }
            }
        }
    }

    /// Credit's tick period: how long a pCPU left idle by a co-scheduling rule waits before
    /// it looks again.
    pub(crate) fn tick_ns(&self) -> Time {
        self.tick_ns
    }

    /// `v`'s remaining credit as last charged. A waiting vCPU's is current: it burns nothing
    /// while queued, and `put_prev` charges a vCPU as it leaves its pCPU.
    pub(crate) fn credit_of(&self, v: VcpuId) -> i64 {
        self.credit[v]
    }

    /// Publishes the run queues' lengths and the credits that changed to a traced run
    /// (`credit_trace`); called at the end of each callback.
    #[inline]
    pub(crate) fn publish(&mut self, cx: &mut Cx) {
        if self.published.on() {
            let (pcpus, credit) = (&self.pcpus, &self.credit);
            self.published.publish(cx, |p| pcpus[p].runq.len(), |v| credit[v]);
        }
    }

    /// Whether `v` is on its domain's active list (Xen's `sdom->active_unit`: charged and
    /// earning credit, whether it runs or waits).
    pub(crate) fn is_active(&self, v: VcpuId) -> bool {
        self.vcpus[v].active
    }

    /// Enters a waiting `v` in its domain's accounting (`__csched_unit_acct_start`), as a tick
    /// would if it found `v` running: from the next accounting on, `v` earns its share. Returns
    /// whether it was outside the accounting until now.
    pub(crate) fn activate(&mut self, cx: &Cx, v: VcpuId) -> bool {
        let was = self.vcpus[v].active;
        self.acct_start(cx, v);
        !was
    }

    /// Whether `v` yielded its pCPU and has not been through `commit` since (so while that pCPU
    /// chooses its replacement, `v` is the yielder).
    pub(crate) fn is_yielding(&self, v: VcpuId) -> bool {
        self.vcpus[v].yielding
    }

    /// Bookkeeping: each queued vCPU is in its processor's queue, once, runnable, not running
    /// and not parked (priority order is not an invariant, see `runq_insert`); the domains'
    /// active lists hold exactly the active vCPUs, and `weight_total` sums them.
    fn check_books(&self, cx: &Cx) -> Result<(), String> {
        let mut in_queues = 0;
        for (p, s) in self.pcpus.iter().enumerate() {
            in_queues += s.runq.len();
            for &u in &s.runq {
                let su = &self.vcpus[u];
                let waiting = cx.is_runnable(u) && cx.running_on(u).is_none();
                if !su.queued || su.processor != p || self.parked[u] || !waiting {
                    return Err(format!(
                        "vCPU {u} in pCPU {p}'s run queue: queued {}, processor {}, parked {}, {:?}",
                        su.queued,
                        su.processor,
                        self.parked[u],
                        cx.state(u)
                    ));
                }
            }
        }
        let flagged = self.vcpus.iter().filter(|s| s.queued).count();
        if flagged != in_queues {
            return Err(format!("{flagged} vCPUs flagged queued but {in_queues} run queue entries"));
        }
        let active = self.vcpus.iter().filter(|s| s.active).count();
        let listed: usize = self.doms.iter().map(|d| d.active_vcpus.len()).sum();
        let weight: i64 = (0..self.doms.len()).map(|d| self.share_weight(d)).sum();
        let stray = self.doms.iter().flat_map(|d| &d.active_vcpus).any(|&u| !self.vcpus[u].active);
        if active != listed || stray || weight != self.weight_total {
            return Err(format!(
                "active lists: {active} vCPUs active, {listed} listed (stray: {stray}), weight {weight} but total {}",
                self.weight_total
            ));
        }
        Ok(())
    }
}

impl Policy for Credit {
    /// Contract: per-pCPU state exists, and the master accounting timer is armed.
    fn init(&mut self, cx: &mut Cx) {
        self.pcpus = (0..cx.n_pcpus())
            .map(|_| PcpuState {
                runq: Vec::new(),
                // Xen starts every bias at NR_CPUS - 1: the first pick takes the lowest idler.
                idle_bias: cx.n_pcpus() - 1,
                last_load_balance: None,
                sort_epoch: 0,
            })
            .collect();
        self.idlers = PcpuSet::new(cx.n_pcpus());
        (0..cx.n_pcpus()).for_each(|p| self.idlers.insert(p));
        self.pick_masks = PickMasks::for_host(cx);
        self.doms = cx.domains().map(|d| DomState { weight: d.weight, cap: d.cap, active_vcpus: Vec::new() }).collect();
        self.vcpus = vec![VcpuState::new(); cx.n_vcpus()];
        self.pri = vec![PRI_UNDER; cx.n_vcpus()];
        self.credit = vec![0; cx.n_vcpus()];
        self.parked = vec![false; cx.n_vcpus()];
        self.published.start(cx, cx.n_pcpus(), cx.n_vcpus());
        let at = cx.now() + self.tslice_ns;
        cx.set_timer(at, TIMER_ACCT);
    }

    fn tick_period_ns(&self) -> Option<Time> {
        Some(self.tick_ns)
    }

    fn timer_slop_ns(&self) -> Time {
        XEN_TIMER_SLOP_NS
    }

    fn supports_vm_lifecycle(&self) -> bool {
        true
    }

    /// Contract: queue the new vCPU on a pCPU chosen round robin (see fidelity notes), or on
    /// its spread target under a spread rule. After the start it belongs to a VM created
    /// mid-run, which Xen creates paused and then unpauses: the wake-up BOOSTs it (it is UNDER,
    /// as every new vCPU) and tickles, so an idle pCPU picks it up.
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.vcpus[v].processor = v % cx.n_pcpus();
        let p = if self.spreads(cx, v) { self.spread_target(cx, v) } else { v % cx.n_pcpus() };
        if cx.mid_run() && self.boost {
            self.pri[v] = PRI_BOOST;
            cx.count("credit.boosts");
        }
        self.runq_insert(cx, p, v);
        if cx.mid_run() {
            self.tickle(cx, v);
        }
        self.publish(cx);
    }

    /// `csched_unit_remove`: off its run queue and its domain's active list (the domain leaves
    /// the accounting with its last active vCPU); nothing of it is kept.
    fn vcpu_remove(&mut self, cx: &mut Cx, v: VcpuId) {
        self.runq_remove(v);
        if self.vcpus[v].active {
            self.acct_stop(cx, v);
        }
        self.vcpus[v] = VcpuState::new();
        self.pri[v] = PRI_UNDER;
        self.publish(cx);
    }

    /// `csched_unit_wake`: BOOST an UNDER vCPU, queue it on its processor, tickle.
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        if self.vcpus[v].queued || self.parked[v] || cx.running_on(v).is_some() {
            return;
        }
        if self.boost && self.pri[v] == PRI_UNDER {
            self.pri[v] = PRI_BOOST;
            cx.count("credit.boosts");
        }
        let mut p = self.vcpus[v].processor;
        if let Some(q) = self.away_from_siblings(cx, v, p) {
            p = q;
            cx.count("credit.spread_wakes");
        }
        self.runq_insert(cx, p, v);
        self.tickle(cx, v);
        self.publish(cx);
    }

    /// `csched_unit_yield` (reached from Xen's PLE handler): set YIELD and reschedule. KVM's
    /// hypercalls have no Xen counterpart: ignored.
    fn yield_(&mut self, cx: &mut Cx, v: VcpuId, why: YieldReason) {
        if why != YieldReason::PauseLoopExit {
            return;
        }
        self.vcpus[v].yielding = true;
        cx.resched_here();
    }

    /// `csched_schedule` (see `Credit::schedule`), then the trace's counters.
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        let decision = self.schedule(cx, p, prev);
        self.publish(cx);
        decision
    }

    /// `csched_tick` + `csched_unit_acct`: BOOST ends here and only here; the running vCPU
    /// is charged and (re)joins the active list; the run queue is re-sorted after accounting.
    fn tick(&mut self, cx: &mut Cx, p: PcpuId) {
        if let Some(v) = cx.curr(p) {
            if self.pri[v] == PRI_BOOST {
                self.pri[v] = PRI_UNDER;
            }
            match self.profile.debit {
                Debit::TimeBurnt => self.burn_credits(v, cx.now()),
                // Xen 3.x: the vCPU found running pays for the whole tick.
                Debit::PerTick => self.credit[v] -= self.credits_per_tick(),
            }
            if self.vcpus[v].active {
                self.check_migrate_running(cx, v, p);
            } else {
                self.acct_start(cx, v);
            }
        }
        self.runq_sort(p);
        self.publish(cx);
    }

    /// The master's accounting timer (`csched_acct`), every slice.
    fn timer(&mut self, cx: &mut Cx, id: u64) {
        debug_assert_eq!(id, TIMER_ACCT);
        self.account(cx);
        self.publish(cx);
        let at = cx.now() + self.tslice_ns;
        cx.set_timer(at, TIMER_ACCT);
    }

    /// A VM that became CON is scattered when the spread rule covers CON VMs.
    fn vm_type_changed(&mut self, cx: &mut Cx, d: DomId, _old: VmType) {
        if self.spread == Spread::Con && cx.domain(d).vm_type == VmType::Con {
            self.scatter(cx, d);
            self.publish(cx);
        }
    }

    fn check(&self, cx: &Cx) -> Result<(), String> {
        self.check_books(cx)?;
        if self.spread == Spread::Off {
            return Ok(());
        }
        self.check_spread(cx)
    }
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(Credit::from_params(params, Spread::Off)?))
}

impl Credit {
    /// This Credit with yielding vCPUs placed by `placement` instead of Xen's rule.
    pub(crate) fn with_yield_placement(mut self, placement: YieldPlacement) -> Credit {
        self.yield_placement = placement;
        self
    }

    /// `csched_schedule`: put the current vCPU back, take the head (or steal), run it.
    fn schedule(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        if let Some(keep) = self.put_prev(cx, p, prev, true) {
            return keep;
        }
        if self.yield_placement == YieldPlacement::Head {
            return self.pick_next_yield_to_head(cx, p, prev);
        }
        let next = self.choose(cx, p);
        self.commit(cx, p, prev, next)
    }

    /// `pick_next` under `Head` placement (seed 001 Fig. 1(b): the waiter "yields its CPU time
    /// slice to other vCPUs and waits in the head of CPU run queue for the next round").
    /// `put_prev` has queued a yielding `prev` first. Every vCPU that yielded on `p` in the
    /// current round (`head_wait`) steps out of the queue while `p` chooses by Credit's rule,
    /// then goes back to the head, the latest yielder first. A round ends when a vCPU leaves
    /// `p` without yielding (its slice ended, it blocked or was preempted): the waiters are
    /// then chosen again. So two waiters on one pCPU cannot hand it back and forth while the
    /// rest of the queue waits; with nothing else to run, the earliest yielder runs.
    fn pick_next_yield_to_head(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        let yielded = prev.filter(|&v| self.vcpus[v].yielding && self.vcpus[v].queued);
        match yielded {
            Some(y) => self.vcpus[y].head_wait = true,
            None => {
                for &u in &self.pcpus[p].runq {
                    self.vcpus[u].head_wait = false;
                }
            }
        }
        let waiting: Vec<VcpuId> = self.pcpus[p].runq.iter().copied().filter(|&u| self.vcpus[u].head_wait).collect();
        for &u in &waiting {
            self.runq_remove(u);
        }
        // Nothing else to run: the yielder that has waited longest runs (alone, the yielder
        // runs on). Running the latest one would let one waiter spin while the next ticket
        // holder waits behind it.
        let next = self.choose(cx, p).or(waiting.last().copied());
        let decision = self.commit(cx, p, prev, next);
        for (i, &u) in waiting.iter().filter(|&&u| next != Some(u)).enumerate() {
            self.pcpus[p].runq.insert(i, u);
            self.vcpus[u].queued = true;
        }
        decision
    }

    /// Changes where yielding vCPUs go from now on (`cvs-adaptive` switching between yth
    /// and ytt). A vCPU already queued stays where it is.
    pub(crate) fn set_yield_placement(&mut self, placement: YieldPlacement) {
        self.yield_placement = placement;
    }

    /// Takes over a host another policy was scheduling (`cvs-adaptive` leaving
    /// co-scheduling): each running vCPU is charged from now on the pCPU it runs on, each
    /// waiting one is queued on the pCPU it last ran on (or its insertion pCPU), and every
    /// pCPU reschedules so that the run queues, not the old plan, decide what runs.
    pub(crate) fn adopt(&mut self, cx: &mut Cx) {
        let now = cx.now();
        for p in 0..cx.n_pcpus() {
            self.idlers.set(p, cx.curr(p).is_none());
        }
        for v in 0..cx.n_vcpus() {
            self.vcpus[v].yielding = false;
            self.vcpus[v].yield_kept = false;
            self.vcpus[v].head_wait = false;
            if let Some(p) = cx.running_on(v) {
                let s = &mut self.vcpus[v];
                s.processor = p;
                s.start_time = now;
                s.run_start = now;
            } else if cx.is_runnable(v) && !self.vcpus[v].queued {
                let p = cx.last_pcpu(v).unwrap_or(v % cx.n_pcpus());
                self.runq_insert(cx, p, v);
            }
        }
        for p in 0..cx.n_pcpus() {
            cx.resched(p);
        }
    }

    /// Hands the host to another policy (`cvs-adaptive` entering co-scheduling): every run
    /// queue is emptied. Priorities, credits and active lists are kept for a later `adopt`.
    pub(crate) fn release_all(&mut self) {
        for pcpu in &mut self.pcpus {
            for &v in &pcpu.runq {
                self.vcpus[v].queued = false;
            }
            pcpu.runq.clear();
        }
    }

    /// Credit configured from its parameters (`PARAMS`), with a sibling-spread rule.
    pub(crate) fn from_params(params: &Params, spread: Spread) -> Result<Credit, ConfigError> {
        let tslice_ms = params.int("tslice_ms");
        let ticks = params.int("ticks_per_tslice");
        let credits_per_msec = params.int("credits_per_msec");
        let profile = xen_version::from_params(params)?;
        params.int("ratelimit_us");
        params.int("load_balance_ratelimit_us");
        let ratelimit_us = params.int_or("ratelimit_us", profile.ratelimit_us);
        if ratelimit_us > tslice_ms * 1000 {
            return Err(params.invalid(
                "ratelimit_us",
                format!("expected at most tslice_ms × 1000 = {}, got {ratelimit_us}", tslice_ms * 1000),
            ));
        }
        let lb_us = params.int_or("load_balance_ratelimit_us", profile.load_balance_ratelimit_us);
        let tslice_ns = tslice_ms as Time * NS_PER_MS;
        Ok(Credit {
            tslice_ns,
            tick_ns: tslice_ns / ticks as Time,
            credits_per_msec,
            credits_per_tslice: credits_per_msec * tslice_ms,
            ratelimit_ns: ratelimit_us as Time * NS_PER_US,
            load_balance_ratelimit_ns: lb_us as Time * NS_PER_US,
            min_timer_ns: params.int("min_timer_us") as Time * NS_PER_US,
            boost: params.bool("boost"),
            tickle_one_idle: params.bool_or("tickle_one_idle", profile.tickle_one_idle),
            profile,
            spread,
            yield_placement: YieldPlacement::Xen,
            pcpus: Vec::new(),
            vcpus: Vec::new(),
            pri: Vec::new(),
            credit: Vec::new(),
            parked: Vec::new(),
            doms: Vec::new(),
            active_doms: Vec::new(),
            weight_total: 0,
            credit_balance: 0,
            sort_epoch: 0,
            acct_doms: Vec::new(),
            acct_vcpus: Vec::new(),
            idlers: PcpuSet::default(),
            pick_masks: PickMasks::default(),
            last_tickle: 0,
            tickle_targets: Vec::new(),
            runq_sort_over: Vec::new(),
            balance_bias: 0,
            published: Published::default(),
        })
    }
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "credit",
    description: "Xen Credit1: weights, caps, 30 ms slices, BOOST/UNDER/OVER, tickling and work stealing",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: PARAMS,
    build,
};
