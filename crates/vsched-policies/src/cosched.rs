//! `cosched` — strict co-scheduling (gang scheduling): all vCPUs of a CON VM start together
//! or none does.
//!
//! # Where it comes from
//! The Co_scheduling baseline of seed 000 (Liu et al. 2018, §1 and §5: "either all VCPUs of
//! a VM are scheduled at the same time or none of the VCPU is scheduled"), and VMware ESX
//! 2.x strict co-scheduling (specs/hypervisor-mechanisms.md §6: a co-stopped VM "restarts
//! only when pCPUs are free for all its vCPUs at once"). A blocked gang member leaves its
//! pCPU idle on behalf of the gang, as Xen core scheduling does (specs §3).
//!
//! # How it works
//! Time is cut into rounds of `slice_ms` (Xen's 30 ms slice). At each round boundary one
//! global timer plans the next round:
//! 1. Fair share: every domain has a virtual time, the CPU time it actually received divided
//!    by its weight × active vCPUs, Xen `csched_acct`'s share (`rounds::FairShare`, shared
//!    with `vds`). Units are ordered by it, lowest first,
//!    ties by domain order. A CON VM with a runnable vCPU is one unit needing one pCPU per
//!    vCPU (strict: all of them, blocked ones included); each runnable vCPU of a HIT VM is a
//!    unit of one pCPU.
//! 2. First fit: units are packed in that order onto the P pCPUs; a unit that does not fit
//!    is skipped and later, smaller units may still fit. The lowest unit always fits (admit
//!    refuses CON VMs wider than the host), so the lowest virtual time is never passed over;
//!    but a wide gang can wait round after round behind HIT units of lower virtual time that
//!    keep arriving (seed 000 Fig. 4: Domain-0's vCPUs, woken in rounds whose gangs fill
//!    every pCPU, wait for the next plan and outrank the 8-vCPU BSP gang there; 27 of 50
//!    runs do not finish within 3,000 s).
//! 3. Placement: a planned vCPU that is running keeps its pCPU (a gang that continues is not
//!    relaunched); one that held a slot last round keeps it if free; the others take free
//!    pCPUs (see `placement`). There is no stable vCPU→pCPU mapping, which seed 000 §5.3
//!    blames for Co_scheduling's variance.
//! 4. Every pCPU whose running vCPU is not its planned one gets a reschedule IPI (a
//!    co-scheduling signal when it starts a gang member), all sent at the same instant, so
//!    the whole round starts one IPI latency after the boundary.
//!
//! Within a round the plan is fixed: a pCPU runs its planned vCPU with no slice timer. A gang
//! member that blocks leaves its pCPU idle and runs there again if it wakes within the
//! round. A HIT slot whose vCPU blocked, or a pCPU no unit fits on, is filled by the
//! waiting HIT vCPU of lowest virtual time (work conserving for HIT VMs, never for a CON
//! vCPU outside its gang); a planned HIT vCPU that wakes takes its slot back. A pCPU that
//! would idle mid-round (no HIT vCPU waits) looks for a gang that was not planned: if the
//! pCPUs idle at that moment can hold all of its vCPUs, the one of lowest virtual time starts
//! on them at once, for the rest of the round (`start_waiting_gang`). This is Ousterhout's
//! "alternate selection" (Scheduling Techniques for Concurrent Systems, ICDCS 1982, §4: a
//! processor whose process in the current row cannot run takes one from another row), taken
//! a whole gang at a time so that the all-or-none rule of seed 000 §1 still holds; a blocked
//! HIT vCPU whose slot the gang takes waits as a filler when it wakes.
//! A domain whose vCPUs were all blocked rejoins at no less than the lowest virtual time of
//! the domains that were runnable at the last plan, so sleeping does not bank CPU time (as
//! CFS clamps to min_vruntime).
//!
//! # Readings and approximations
//! - The paper gives no algorithm for its Co_scheduling baseline; this is the textbook gang
//!   scheduler with ESX 2.x's all-or-nothing start. Packing is first fit in fair-share
//!   order, not an optimal bin packing. Seed 000 (§1, §2) blames Co_scheduling for "CPU
//!   fragmentation and priority inversion": what remains here is structural (gangs whose
//!   widths do not add up to the host, and gang slots held for blocked members), not pCPUs
//!   held for a whole round after a short HIT vCPU blocked (the reading before issue 16,
//!   which left a freed pCPU idle until the next round even when a gang could start).
//! - Fairness follows Xen Credit's `csched_acct` (Xen 4.1.2, which seed 000 built on): a
//!   domain's share is its weight × active vCPUs (`rounds::FairShare` says how "active" is
//!   approximated). A gang can only take whole rounds on all its vCPUs, so some shares are
//!   not achievable exactly (a 4-vCPU VM on 4 pCPUs can never run beside anyone).
//! - A gang is charged for the pCPUs held on its behalf, a blocked member's idle slot
//!   included, as Xen's core scheduling burns a unit's credit for as long as it is scheduled,
//!   idle siblings included (`burn_credits` on the `csched_unit`, RELEASE-4.19.0
//!   `sched/credit.c`). Charging only what its vCPUs ran let a nearly idle gang, woken by
//!   its guest's timers, keep the lowest virtual time round after round while holding the
//!   host's only gang place (seed 001 at VOR 2.5, seed 7: one VM waited 36 s).
//! - Caps are not enforced; PLE exits are ignored (the round's plan is fixed: spinning
//!   inside a co-scheduled gang is short by construction).
//! - A VM type change re-plans at once and restarts the round there.
//! - `placement = "rotate"` hands free pCPUs out from a cursor that advances one pCPU each
//!   round (whichever pCPUs are free, with no affinity); `"sticky"` first tries the pCPU a
//!   vCPU last ran on (an ablation: co-scheduling with affinity). A seeded random placement
//!   would need the engine's `Rng` trait, which this crate does not depend on.
//! - Invariant (`check`, after every event): a CON vCPU runs only in its own gang slot; a
//!   planned gang's runnable vCPUs run in their slots; an unplanned gang's vCPUs do not run
//!   — each "except on a pCPU with a reschedule in flight" (the instant between the IPIs
//!   that start or stop a gang). Hence, whenever no reschedule is in flight, every CON VM
//!   runs all of its runnable vCPUs or none, which is also checked literally.
//!
//! Suits: CON VMs with fine-grained synchronization (spinlocks, barriers) on a host where
//! gangs pack well. Known weakness: fragmentation — pCPUs left idle because the next gang
//! does not fit, or on behalf of blocked gang members (the engine's `frag_idle_s`) — and
//! priority inversion behind a wide gang.

use std::ops::Range;

use vsched_model::{
    ConfigError, Cx, Decision, DomId, DomainInfo, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy,
    PolicyInfo, Time, VcpuId, VcpuState, VmType, NS_PER_MS,
};

use crate::cosched_fillers::Fillers;
use crate::pcpu_set::PcpuSet;
use crate::rounds::{release_first, FairShare, Handoff};

// ---- Constants (defaults; each is a scenario parameter) ----

/// Round length: Xen's 30 ms time slice, the slice seed 000's Xen 4.1.2 baselines use.
const SLICE_MS: i64 = 30;
/// Default placement of gangs that (re)start: whichever pCPUs are free, no affinity.
const PLACEMENT: &str = "rotate";
const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "slice_ms", default: ParamDefault::Int(SLICE_MS), range: ParamRange::Int { min: 1, max: 10_000 }, doc: "round length (gang time slice), ms" },
    ParamSpec {
        name: "placement",
        default: ParamDefault::Str(PLACEMENT),
        range: ParamRange::Any, doc: "pCPUs for a (re)starting vCPU: \"rotate\" (free pCPUs from a cursor moving each round) or \"sticky\" (last pCPU first)",
    },
];

// ---- State, by scope ----

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Placement {
    Rotate,
    Sticky,
}

/// What a pCPU was planned to run this round.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    /// No unit fits here: HIT vCPUs may fill it.
    Free,
    /// Reserved for this vCPU of a CON VM's gang (idle while it is blocked).
    Gang(VcpuId),
    /// Planned for this HIT vCPU (filled by another HIT vCPU while it is blocked).
    Hit(VcpuId),
}

impl Slot {
    /// The domain an idle pCPU in this slot is held for: a gang's, charged for it.
    fn gang_dom(self, cx: &Cx) -> Option<DomId> {
        match self {
            Slot::Gang(v) => Some(cx.dom_of(v)),
            _ => None,
        }
    }
}

/// One schedulable unit at a plan: a whole CON VM, or one runnable HIT vCPU.
struct Unit {
    dom: DomId,
    gang: bool,
    members: Range<VcpuId>,
}

pub struct Cosched {
    // Configuration.
    slice_ns: Time,
    placement: Placement,
    /// Gang-schedule every VM that fits the host, whatever its type (seed 001's
    /// co-scheduling, inside `cvs-adaptive`); otherwise only CON VMs.
    gang_all: bool,
    /// Added to this policy's timer ids, so that a policy embedding it can tell them apart.
    timer_base: u64,
    /// A re-plan is already due at this instant (VMs created or destroyed).
    replan_pending: bool,
    // Global state.
    fair: FairShare,
    /// Round number; the round timer carries it as its id, so a timer left over from a
    /// round that a re-plan cut short is recognised and ignored.
    round: u64,
    /// Where the rotating hand-out of free pCPUs starts this round.
    cursor: PcpuId,
    // Per pCPU.
    slot: Vec<Slot>,
    /// Reschedules in flight.
    handoff: Handoff,
    /// The pCPUs that idle: those whose last decision was to idle (what a pCPU runs changes
    /// only by its own decision), the only ones a waking filler or a waiting gang may take.
    idle: PcpuSet,
    // Per vCPU.
    /// The pCPU this vCPU is planned on this round.
    slot_of: Vec<Option<PcpuId>>,
    /// The HIT vCPUs that may wait as fillers, for `pick_filler`.
    fillers: Fillers,
    // Per domain.
    /// Scheduled as a gang (`gang_by_type`, kept from `reset` and each type change).
    gang: Vec<bool>,
    /// The domains that are gangs, by id.
    gangs: Vec<DomId>,
    /// Planned as a gang this round.
    planned: Vec<bool>,
}

/// The timer id (above `timer_base`) of an immediate re-plan; rounds use 0, 1, 2, ...
const TIMER_REPLAN: u64 = 1 << 40;

impl Cosched {
    fn new(slice_ns: Time, placement: Placement) -> Self {
        Cosched {
            slice_ns,
            placement,
            gang_all: false,
            timer_base: 0,
            replan_pending: false,
            fair: FairShare::empty(),
            round: 0,
            cursor: 0,
            slot: Vec::new(),
            handoff: Handoff::new(0),
            idle: PcpuSet::new(0),
            slot_of: Vec::new(),
            fillers: Fillers::new(0, 0),
            gang: Vec::new(),
            gangs: Vec::new(),
            planned: Vec::new(),
        }
    }

    /// Strict co-scheduling at default parameters, for `cvs-adaptive`: every VM that fits
    /// is a gang, and timer ids start at `timer_base`.
    pub(crate) fn embedded(timer_base: u64) -> Self {
        Cosched { gang_all: true, timer_base, ..Cosched::new(SLICE_MS as Time * NS_PER_MS, Placement::Rotate) }
    }

    /// Whether domain `d` is to be scheduled as a gang, by its type and width.
    fn gang_by_type(&self, cx: &Cx, d: DomId) -> bool {
        let dom = cx.domain(d);
        if self.gang_all {
            dom.vcpus > 1 && dom.vcpus <= cx.n_pcpus()
        } else {
            dom.vm_type == VmType::Con
        }
    }

    /// Sorts the domains into gangs and the others (at a reset and a type change).
    fn classify(&mut self, cx: &Cx) {
        self.gang = (0..cx.domains().len()).map(|d| self.gang_by_type(cx, d)).collect();
        self.gangs = (0..cx.domains().len()).filter(|&d| self.gang[d]).collect();
    }

    /// Whether domain `d` is scheduled as a gang.
    fn is_gang(&self, d: DomId) -> bool {
        self.gang[d]
    }

    fn is_hit(&self, cx: &Cx, v: VcpuId) -> bool {
        !self.is_gang(cx.dom_of(v))
    }

    /// Fresh state: no plan, and fair-share history from now.
    fn reset(&mut self, cx: &Cx) {
        let n = cx.n_pcpus();
        self.classify(cx);
        self.fair = FairShare::new(cx);
        self.slot = vec![Slot::Free; n];
        self.handoff = Handoff::new(n);
        self.idle = PcpuSet::new(n);
        (0..n).for_each(|p| self.idle.set(p, cx.curr(p).is_none()));
        self.slot_of = vec![None; cx.n_vcpus()];
        self.fillers = Fillers::new(cx.n_vcpus(), cx.domains().len());
        self.refill_fillers(cx);
        self.planned = vec![false; cx.domains().len()];
    }

    /// `v` may have become a waiting filler (woken, descheduled, inserted): the index must
    /// hear of every such change (`cosched_fillers.rs`); it checks the rest at a pick.
    fn note_filler(&mut self, cx: &Cx, v: VcpuId) {
        let d = cx.dom_of(v);
        if !self.is_gang(d) && self.slot_of[v].is_none() && cx.is_runnable(v) {
            self.fillers.add(v, d, cx.vcpus_of(d), self.fair.vtime(d));
        }
    }

    /// The index of fillers afresh, after the plan changed: every waiting unplanned HIT vCPU
    /// (a filler running now is the index's again when it is descheduled).
    fn refill_fillers(&mut self, cx: &Cx) {
        self.fillers.clear();
        for v in 0..cx.n_vcpus() {
            if cx.state(v) == VcpuState::Runnable {
                self.note_filler(cx, v);
            }
        }
    }

    /// Takes over a host another policy was scheduling (`cvs-adaptive` switching to
    /// co-scheduling): fresh state, and a round planned now, which reschedules every pCPU
    /// whose current vCPU disagrees with it.
    pub(crate) fn activate(&mut self, cx: &mut Cx) {
        self.reset(cx);
        self.plan(cx);
    }

    /// Whether timer `id` is one of ours.
    pub(crate) fn owns_timer(&self, id: u64) -> bool {
        id >= self.timer_base
    }

    /// The vCPU `p` should run now according to the plan (`None`: idle or a HIT filler).
    fn planned_vcpu(&self, cx: &Cx, p: PcpuId) -> Option<VcpuId> {
        match self.slot[p] {
            Slot::Gang(v) | Slot::Hit(v) if cx.is_runnable(v) => Some(v),
            _ => None,
        }
    }

    /// Whether what `p` runs now (`c`) agrees with the plan.
    fn agrees(&self, cx: &Cx, p: PcpuId, c: Option<VcpuId>) -> bool {
        match (self.planned_vcpu(cx, p), self.slot[p]) {
            (Some(v), _) => c == Some(v),
            (None, Slot::Gang(_)) => c.is_none(),
            // A free or blocked-HIT slot may run an unplanned HIT filler.
            (None, _) => c.is_none_or(|u| self.is_hit(cx, u) && self.slot_of[u].is_none()),
        }
    }

    /// Re-plans at the end of this instant (after every vCPU a VM change adds or removes).
    fn replan_soon(&mut self, cx: &mut Cx) {
        if !self.replan_pending {
            self.replan_pending = true;
            let now = cx.now();
            cx.set_timer(now, self.timer_base + TIMER_REPLAN);
        }
    }

    /// Plans the next round and starts it (see the header, steps 1-4).
    fn plan(&mut self, cx: &mut Cx) {
        let now = cx.now();
        let n = cx.n_pcpus();
        let slot = &self.slot;
        self.fair.charge_all(cx, |p| slot[p].gang_dom(cx));

        // 1. Units in fair-share order: by (virtual time, domain, first vCPU). A domain's
        // units are built by vCPU id, so only the domains are sorted (a few hundred at 512
        // pCPUs, against a unit per runnable HIT vCPU).
        let mut units = Vec::new();
        let mut runnable_doms = Vec::new();
        let mut units_of = Vec::new();
        for d in 0..cx.domains().len() {
            let vcpus = cx.vcpus_of(d);
            let before = units.len();
            if self.is_gang(d) {
                if vcpus.clone().any(|v| cx.is_runnable(v)) {
                    units.push(Unit { dom: d, gang: true, members: vcpus });
                }
            } else {
                let runnable = vcpus.filter(|&v| cx.is_runnable(v));
                units.extend(runnable.map(|v| Unit { dom: d, gang: false, members: v..v + 1 }));
            }
            if units.len() > before {
                runnable_doms.push(d);
                units_of.push(before..units.len());
            }
        }
        self.fair.settle(&runnable_doms);
        let mut by_share: Vec<usize> = (0..runnable_doms.len()).collect();
        by_share.sort_unstable_by_key(|&i| (self.fair.vtime(runnable_doms[i]), runnable_doms[i]));

        // 2. First fit.
        let mut free = n;
        let mut chosen: Vec<&Unit> = Vec::new();
        for u in by_share.into_iter().flat_map(|i| &units[units_of[i].clone()]) {
            if u.members.len() <= free {
                free -= u.members.len();
                chosen.push(u);
            }
        }

        // 3. Placement.
        let mut new_slot: Vec<Option<Slot>> = vec![None; n];
        let mut new_slot_of: Vec<Option<PcpuId>> = vec![None; cx.n_vcpus()];
        let make = |u: &Unit, v: VcpuId| if u.gang { Slot::Gang(v) } else { Slot::Hit(v) };
        for u in &chosen {
            for v in u.members.clone() {
                if let Some(q) = cx.running_on(v) {
                    new_slot[q] = Some(make(u, v));
                    new_slot_of[v] = Some(q);
                }
            }
        }
        for u in &chosen {
            for v in u.members.clone() {
                if let Some(q) = self.slot_of[v].filter(|&q| new_slot_of[v].is_none() && new_slot[q].is_none()) {
                    new_slot[q] = Some(make(u, v));
                    new_slot_of[v] = Some(q);
                }
            }
        }
        let cursor = self.cursor;
        // Slots only fill from here on, so the first free one from the cursor never moves
        // back: the hand-out goes on from the last one found.
        let mut scan_from = 0;
        for u in &chosen {
            for v in u.members.clone() {
                if new_slot_of[v].is_some() {
                    continue;
                }
                let last = cx.last_pcpu(v).filter(|&q| self.placement == Placement::Sticky && new_slot[q].is_none());
                let q = last
                    .or_else(|| {
                        scan_from = (scan_from..n).find(|&k| new_slot[(cursor + k) % n].is_none())?;
                        Some((cursor + scan_from) % n)
                    })
                    .expect("first fit left room for every chosen vCPU");
                new_slot[q] = Some(make(u, v));
                new_slot_of[v] = Some(q);
            }
        }
        self.cursor = (self.cursor + 1) % n;
        self.slot = new_slot.into_iter().map(|s| s.unwrap_or(Slot::Free)).collect();
        self.slot_of = new_slot_of;
        self.refill_fillers(cx);
        self.handoff.clear_awaiting();

        // Gang launches: gangs planned now that were not planned last round.
        let mut planned = vec![false; cx.domains().len()];
        for u in chosen.iter().filter(|u| u.gang) {
            planned[u.dom] = true;
            if !self.planned[u.dom] {
                cx.co_launch(u.dom);
            }
        }
        self.planned = planned;

        // 4. Start the round (planned vCPUs that run keep their pCPU, so nothing moves here;
        // the release-first order is a safeguard).
        let targets: Vec<PcpuId> = (0..n).filter(|&p| !self.agrees(cx, p, cx.curr(p))).collect();
        let takes_from: Vec<Option<PcpuId>> =
            targets.iter().map(|&p| self.planned_vcpu(cx, p).and_then(|v| cx.running_on(v))).collect();
        for p in release_first(&targets, &takes_from) {
            let co = matches!(self.slot[p], Slot::Gang(v) if cx.curr(p) != Some(v) && cx.is_runnable(v));
            self.handoff.kick(cx, p, co);
        }
        cx.count("cosched.rounds");
        self.round += 1;
        self.replan_pending = false;
        cx.set_timer(now + self.slice_ns, self.timer_base + self.round);
    }

    /// Charges what `p` ran since its last charge, or, idle in a gang slot, the time it was
    /// held for that gang (`FairShare::charge_held`).
    fn charge(&mut self, cx: &Cx, p: PcpuId) {
        self.fair.charge_held(cx, p, self.slot[p].gang_dom(cx));
    }

    /// The waiting HIT vCPU of lowest `(virtual time, vCPU)` that is not planned anywhere
    /// (`prev` may continue if it is such a filler on `p`).
    fn pick_filler(&mut self, cx: &Cx, p: PcpuId) -> Option<VcpuId> {
        let (gang, slot_of, fair) = (&self.gang, &self.slot_of, &self.fair);
        let is_filler = |v: VcpuId| !gang[cx.dom_of(v)] && slot_of[v].is_none() && cx.is_runnable(v);
        let here = cx.curr(p).filter(|&u| is_filler(u));
        let waiting =
            self.fillers.lowest(|d| fair.vtime(d), |d| cx.vcpus_of(d), |v| is_filler(v) && cx.running_on(v).is_none());
        here.into_iter().chain(waiting).min_by_key(|&v| (fair.vtime(cx.dom_of(v)), v))
    }

    /// Whether `q` idles and may be taken by a waking filler or a waiting gang: no
    /// reschedule in flight, not held for a gang, no runnable vCPU planned on it.
    fn takeable(&self, cx: &Cx, q: PcpuId) -> bool {
        cx.curr(q).is_none()
            && !self.handoff.in_transit(q)
            && !matches!(self.slot[q], Slot::Gang(_))
            && self.planned_vcpu(cx, q).is_none()
    }

    /// Ousterhout's alternate selection at gang granularity: `p` is about to idle mid-round
    /// (its planned HIT vCPU blocked, or no unit was planned on it, and no HIT vCPU waits);
    /// if the pCPUs idle now, `p` included, can hold a whole gang that was not planned this
    /// round, the one of lowest virtual time starts on them at once, for the rest of the
    /// round (strictness kept: all its vCPUs get a slot together). Returns whether one did.
    fn start_waiting_gang(&mut self, cx: &mut Cx, p: PcpuId) -> bool {
        let waits = |d: DomId| {
            !self.planned[d]
                && cx.vcpus_of(d).any(|v| cx.is_runnable(v))
                && cx.vcpus_of(d).all(|v| cx.running_on(v).is_none())
        };
        if !self.gangs.iter().any(|&d| waits(d)) {
            return false;
        }
        // The idle pCPUs from the cursor on, round the host.
        let (n, cursor) = (cx.n_pcpus(), self.cursor);
        let from_cursor = self.idle.iter_in(cursor..n).chain(self.idle.iter_in(0..cursor));
        let free: Vec<PcpuId> =
            std::iter::once(p).chain(from_cursor.filter(|&q| q != p && self.takeable(cx, q))).collect();
        let gang = self
            .gangs
            .iter()
            .copied()
            .filter(|&d| cx.vcpus_of(d).len() <= free.len() && waits(d))
            .min_by_key(|&d| (self.fair.vtime(d), d));
        let Some(d) = gang else { return false };
        // Runnable members first, so that `p` runs one.
        let mut members: Vec<VcpuId> = cx.vcpus_of(d).collect();
        members.sort_by_key(|&v| !cx.is_runnable(v));
        for (v, &q) in members.into_iter().zip(&free) {
            // Charged up to now as it was; from now on it is held for the gang.
            self.charge(cx, q);
            if let Slot::Hit(h) = self.slot[q] {
                // Its blocked HIT vCPU loses the slot: it waits as a filler when it wakes.
                self.slot_of[h] = None;
            }
            self.slot[q] = Slot::Gang(v);
            self.slot_of[v] = Some(q);
            if q != p && cx.is_runnable(v) {
                self.handoff.kick(cx, q, true);
            }
        }
        self.planned[d] = true;
        cx.co_launch(d);
        cx.count("cosched.gap_gangs");
        true
    }
}

impl Policy for Cosched {
    fn timer_slop_ns(&self) -> Time {
        crate::XEN_TIMER_SLOP_NS
    }

    /// Strict co-scheduling needs one pCPU per vCPU of every CON VM.
    fn admit(&self, pcpus: usize, domains: &[DomainInfo]) -> Result<(), String> {
        crate::credit_variant::admit_con_fits(pcpus, domains)
    }

    /// Contract: state exists, and the first round is planned at once (the timer fires at
    /// time 0, before the engine's initial reschedules).
    fn init(&mut self, cx: &mut Cx) {
        self.reset(cx);
        let now = cx.now();
        self.round += 1;
        cx.set_timer(now, self.timer_base + self.round);
    }

    fn supports_vm_lifecycle(&self) -> bool {
        true
    }

    /// No stall bound: a CON VM as wide as the host waits until every pCPU is free of the
    /// others' gangs at once, which under load may be never (seed 000's 8-vCPU BSP VM on 8
    /// pCPUs beside three 6-vCPU VMs runs 15 s of 3000), the fragmentation that strict
    /// co-scheduling is known for and the papers measure, not a lost vCPU.
    fn stall_timeout_ns(&self) -> Option<Time> {
        None
    }

    /// Contract: nothing to queue but the filler index; every plan looks at all runnable
    /// vCPUs.
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.note_filler(cx, v);
        if cx.mid_run() {
            self.replan_soon(cx);
        }
    }

    /// Contract: a VM that leaves frees its slots at once (a re-plan in this instant).
    fn vcpu_remove(&mut self, cx: &mut Cx, v: VcpuId) {
        if self.slot_of[v].is_some() || self.planned[cx.dom_of(v)] {
            self.replan_soon(cx);
        }
    }

    /// Contract: a planned vCPU goes back to its slot (a gang member resumes beside its
    /// siblings; a HIT vCPU displaces the filler); an unplanned HIT vCPU takes an idle
    /// fillable pCPU if there is one; an unplanned CON vCPU waits for its gang's round.
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.fair.woke(cx, v);
        if let Some(p) = self.slot_of[v] {
            if cx.curr(p) != Some(v) {
                self.handoff.kick(cx, p, false);
            }
            return;
        }
        if !self.is_hit(cx, v) {
            return;
        }
        self.note_filler(cx, v);
        let idle = self.idle.iter_in(0..cx.n_pcpus()).find(|&p| self.takeable(cx, p));
        if let Some(p) = idle {
            cx.count("cosched.hit_fills");
            self.handoff.kick(cx, p, false);
        }
    }

    /// Contract: run the planned vCPU; a gang slot whose member is blocked stays idle; a
    /// HIT or free slot without a runnable planned vCPU takes a HIT filler. No slice timer:
    /// the round timer ends every slice.
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        self.handoff.landed(p);
        self.charge(cx, p);
        let mut next = match (self.planned_vcpu(cx, p), self.slot[p]) {
            (Some(v), _) => Some(v),
            (None, Slot::Gang(_)) => None,
            (None, _) => self.pick_filler(cx, p),
        };
        if next.is_none() && !matches!(self.slot[p], Slot::Gang(_)) && self.start_waiting_gang(cx, p) {
            next = self.planned_vcpu(cx, p);
        }
        // Still running where it ran last round: start it when that pCPU lets go.
        let next = self.handoff.unless_elsewhere(cx, p, next, "cosched.awaits");
        let slot = &self.slot;
        self.handoff.release(cx, p, prev, next, |_, q, _| matches!(slot[q], Slot::Gang(_)));
        self.idle.set(p, next.is_none());
        if let Some(u) = prev.filter(|&u| next != Some(u)) {
            self.note_filler(cx, u); // descheduled: it may wait as a filler now
        }
        Decision { next, slice_ns: None }
    }

    /// The round boundary.
    fn timer(&mut self, cx: &mut Cx, id: u64) {
        if id == self.timer_base + self.round || (id == self.timer_base + TIMER_REPLAN && self.replan_pending) {
            self.plan(cx);
        }
    }

    /// A VM that changed type is scheduled by its new type from now on: re-plan at once.
    fn vm_type_changed(&mut self, cx: &mut Cx, _d: DomId, _old: VmType) {
        self.classify(cx);
        self.plan(cx);
    }

    /// See the header: gangs run whole except on pCPUs with a reschedule in flight.
    fn check(&self, cx: &Cx) -> Result<(), String> {
        let transit = |p: PcpuId| self.handoff.in_transit(p);
        let quiet = !(0..cx.n_pcpus()).any(transit);
        for d in 0..cx.domains().len() {
            let dom = cx.domain(d);
            if !self.is_gang(d) {
                continue;
            }
            let (mut runnable, mut running) = (0, 0);
            for v in cx.vcpus_of(d) {
                runnable += cx.is_runnable(v) as usize;
                if let Some(p) = cx.running_on(v) {
                    running += 1;
                    if self.slot[p] != Slot::Gang(v) && !transit(p) {
                        return Err(format!("vCPU {v} of CON VM {} runs on pCPU {p} outside its gang slot", dom.name));
                    }
                } else if cx.is_runnable(v) && self.planned[d] {
                    match self.slot_of[v] {
                        Some(p) if transit(p) => {}
                        _ => {
                            return Err(format!(
                                "vCPU {v} of planned gang {} waits with no reschedule in flight",
                                dom.name
                            ))
                        }
                    }
                }
            }
            if quiet && running != 0 && running != runnable {
                return Err(format!("CON VM {} runs {running} of its {runnable} runnable vCPUs", dom.name));
            }
        }
        Ok(())
    }
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    let slice_ms = params.int("slice_ms");
    let placement = match params.choice("placement", &["rotate", "sticky"])?.as_str() {
        "sticky" => Placement::Sticky,
        _ => Placement::Rotate,
    };
    Ok(Box::new(Cosched::new(slice_ms as Time * NS_PER_MS, placement)))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "cosched",
    description: "strict co-scheduling (gang): a CON VM's vCPUs start together or not at all, fair-share rounds",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: PARAMS,
    build,
};
