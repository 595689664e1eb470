//! `hybrid` — Weng et al.'s hybrid scheduling framework ("The Hybrid Scheduling Framework for
//! Virtual Machine Systems", VEE'09; seed 003), with its own potential-energy accounting.
//!
//! # How it works
//! VMs are HIT (high-throughput, scheduled vCPU by vCPU) or CON (concurrent, co-scheduled).
//! Time is cut into slots (§2.4); every pCPU keeps a run queue sorted by decreasing
//! *potential energy* (PE), the paper's name for what Credit calls credit (§3.3):
//! - **Initial mapping.** Each vCPU goes to the least-loaded pCPU it is allowed on: any pCPU
//!   for a HIT vCPU, one whose run queue holds no sibling for a CON vCPU.
//! - **PE allocation.** Every allocation interval of L slots the BSP (pCPU 0) hands out
//!   `PE_total = |P| × PE_unit × L`, split among VMs by weight and equally among a VM's
//!   vCPUs; each vCPU's PE is *reset* to its share ("the PE value of each virtual CPU is reset
//!   according to the weight"), then every run queue is re-sorted.
//! - **PE dissipation.** At the end of every slot, the vCPU running on each pCPU loses
//!   `PE_unit`.
//! - **Scheduling and balancing**, at the start of every slot on every pCPU P_k, looking at
//!   the head of its run queue: (1) PE <= 0: run the highest-PE head of another run queue
//!   instead (migrating it), never one of a CON VM that has a sibling in P_k's queue;
//!   (2) PE > 0 and CON: IPI the pCPUs of all its siblings so the whole VM runs; (3) PE > 0
//!   and HIT: run it.
//! - **One co-scheduling at a time** (§4.3): a global `syn_domain_id`, taken when a pCPU
//!   launches rule 2, and `syn_map`, the pCPUs that must take part. A pCPU in `syn_map` runs
//!   the co-scheduled VM's vCPU from its own run queue; a pCPU outside it takes its head as
//!   it is (no launch, no balancing), as the §4.3 skeleton does, until the lock clears.
//! - **Type changes** (§4.4): a VM that becomes CON has its vCPUs re-placed so that no two
//!   share a run queue.
//!
//! # Readings of what the paper leaves open
//! - **PE sampling.** The paper charges `PE_unit` to the vCPU *found running at the end of
//!   a slot* (§3.3, "PE dissipation"), which we implement as written. So a vCPU is charged
//!   a whole slot or nothing, whatever it really ran: one that blocks just before the slot
//!   boundary runs for free, one that is switched in just before it pays a whole slot (e.g.
//!   a sibling started mid-slot by a co-scheduling IPI). Guests that block often (I/O,
//!   blocking barriers) can therefore get more than their weight; CPU-bound VMs are charged
//!   exactly. Xen 3.x's Credit charged its 10 ms ticks the same way (later versions burn
//!   credit by measured run time).
//! - **Reset, not add.** The allocation pseudocode is missing from the paper's text; the
//!   prose says PE is *reset* each interval, so neither debt nor surplus carries over.
//!   Consequence: a vCPU with any PE left (> 0) runs a whole slot, so within an interval a
//!   share is rounded up to whole slots when the host has the spare capacity. Shares that are
//!   whole multiples of `PE_unit` are exact; others drift by up to one slot per vCPU and
//!   interval (see `tests/hybrid.rs`): a VM whose vCPUs each get 2/3 of a slot per
//!   interval takes a whole slot each, at its heavier neighbour's expense. The parameter
//!   `carry_debt` (off by default) keeps the debt instead, and long-run shares become exact.
//! - **PE exactly 0** counts as used up: the §4.3 skeleton runs the head only "if its PE > 0"
//!   and balances otherwise.
//! - **"Head of the run queue" of another pCPU** (rule 1) is its first *waiting* vCPU: in the
//!   paper the running vCPU is the head (`PV(P_k)`), but migrating a running vCPU makes no
//!   sense, and Xen's `runq` (which Weng's code is built on) holds only waiting vCPUs.
//! - **No positive PE anywhere.** Rule 1 (and the skeleton's `hsched_workload_balance`) only
//!   takes vCPUs "with positive PE"; when none exists we stay work-conserving like Credit
//!   (cap 0, the paper's setting): run the local head anyway, or, with an empty run queue,
//!   take the highest-PE head of another queue whatever its PE. A stolen vCPU runs alone,
//!   even a CON one: the skeleton returns the balancer's choice without launching.
//! - **When `syn_domain_id` clears.** The skeleton releases its spin lock right after raising
//!   the softirq and never says when `syn_domain_id` resets. We clear it when the last pCPU of
//!   `syn_map` has rescheduled (taken part). While it is set, no vCPU of the co-scheduled VM is
//!   stolen, and no other CON VM can launch: a pCPU outside `syn_map` whose head is such a
//!   vCPU runs it alone (counted `hybrid.lock_busy`) until the lock clears (next bullet).
//! - **A participant without a sibling** in its run queue (it blocked meanwhile) takes its
//!   head, like a non-participant.
//! - **Who is signalled**: every pCPU where a runnable sibling is queued or running (a running
//!   one must be kept, not replaced, when that pCPU reschedules at the same slot boundary).
//!   Blocked siblings are skipped; a CON VM with no runnable sibling just runs (no launch).
//! - **Slot boundaries are per pCPU.** Each pCPU's slot ends at its own tick, where the
//!   vCPU it runs pays `PE_unit`; the BSP (pCPU 0) counts slots and allocates every L of its
//!   own, once for the host (before issue 16 the first tick at an instant did every pCPU's
//!   dissipation, which would have charged each vCPU P times a slot had the ticks not been
//!   aligned). With the engine's aligned ticks the pCPUs' boundaries fall at one instant and
//!   are handled in index order, the BSP first, so its allocation comes before the other
//!   pCPUs' dissipation of that slot; then pCPUs schedule in index order. The skeleton's race
//!   (a pCPU scheduling while another's launch is in flight is a non-participant) becomes
//!   systematic at aligned boundaries: the lowest-numbered launcher would win every
//!   boundary, and a second CON VM whose pCPUs decide after it would never co-schedule. So a
//!   pCPU that decided as a non-participant decides again when `syn_domain_id` clears (an
//!   IPI, counted `hybrid.lock_retries`; our addition). In real time the lock is held for
//!   one IPI latency, so this costs microseconds.
//! - **Wake-ups** are not discussed; §4.2 only says the scheduler keeps "the structure of the
//!   credit scheduler in Xen" and lists `tick` and `do_schedule`. We give the unlisted wake
//!   callback Credit's behaviour (`csched_vcpu_wake` and `__runq_tickle` in Xen 3.x's
//!   sched_credit.c), translated to PE: a vCPU that wakes with PE > 0 is *boosted*: it queues
//!   ahead of every unboosted vCPU of its run queue (the queue is ordered by boost, then PE),
//!   and it preempts its pCPU's current vCPU at once unless that one is boosted too or some
//!   pCPU is idle (then the idle pCPU is tickled and may take it by rule 1). Boost ends, as in
//!   Credit, only when a slot boundary finds the vCPU running, or when an allocation leaves it
//!   no PE. A waking vCPU also returns to its own run queue (re-placed by the initial-mapping
//!   rule if that queue now holds a sibling of a CON VM). Why it matters: the driver domain
//!   (dom0) and I/O guests block and wake constantly; without boost each wake-up waits for
//!   the next slot and for the co-scheduling lock (tens of ms per network pass, which stalls
//!   message-passing clusters; seed 002's setting). A boosted preemption may take a pCPU from
//!   a co-scheduled CON VM for the rest of the slot, and, the other way round, a signal does
//!   not pass over a boosted vCPU for an unboosted sibling (next bullet), as cvs-comm's
//!   signals pass over no BOOST vCPU. `wake_boost = false` gives the plain reading: a
//!   wake-up never preempts and waits for the next slot unless a pCPU is idle.
//! - **A signal passes a vCPU over at most once per slot it runs.** Rule 2 makes a
//!   signalled pCPU run the sibling instead of whatever it would run (its head, or the vCPU
//!   it was running). Taken literally that starves vCPUs outright, and with them a driver
//!   domain (dom0) whose network passes then never finish, so message-passing guests hang
//!   (seed 002's clusters did, both ways): (a) the pCPU that decides first at a boundary
//!   launches at every boundary, so the others are participants at every boundary and
//!   their own heads never run; (b) the head of a low-numbered pCPU (PE > 0, never charged
//!   because it never runs to a boundary) starts at every boundary, and a launch decided by
//!   a higher pCPU at the same instant signals it away one IPI later (Xen's unaligned ticks
//!   would give it part of a slot). So a signal passes over the head that rule 3 would run
//!   (PE > 0 or boosted) at most once: passed over again, before a slot boundary has found
//!   it running or it has blocked, it keeps the pCPU and the sibling waits for the next
//!   slot (counted `hybrid.co_deferred`, as is keeping a boosted head). Our addition.
//! - **Pause-loop exits** are ignored (Xen 3.0.4 had no PLE handling): a spinner keeps its
//!   slot.
//! - **Load** in the initial mapping is the number of vCPUs queued on or running on a pCPU;
//!   ties go to the lowest pCPU index.
//!
//! Suits: one or a few concurrent VMs (barrier- or lock-heavy) among throughput VMs, the
//! paper's §5 setting. Known weaknesses: PE sampling (above); a co-scheduling launch
//! overrides the signalled pCPUs' own choices mid-slot; CON VMs co-schedule one at a time.

use vsched_model::{
    ConfigError, Cx, Decision, DomId, DomainInfo, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy,
    PolicyInfo, Time, VcpuId, VmType, NS_PER_MS,
};

// ---- Constants (defaults; each is a scenario parameter) ----

/// Slot length: Xen 3.0.4 Credit's 10 ms tick, the scheduling unit Weng built on (§4.1).
const SLOT_MS: i64 = 10;
/// PE allocation interval L, in slots: Credit's 30 ms accounting period = 3 ticks (§4.1).
const ALLOC_INTERVAL_SLOTS: i64 = 3;
/// PE dissipated per slot: 100, so integer shares are exact to 1% of a slot.
const PE_UNIT_PER_SLOT: i64 = 100;
/// Off: the paper resets PE at every allocation (§3.3). On: a vCPU's debt (negative PE) is
/// kept, floored at one interval of one pCPU (-L × PE_unit, as Credit floors credit at
/// minus one slice), which makes long-run shares exact for CPU-bound VMs (our extension).
const CARRY_DEBT: bool = false;
/// On: a vCPU waking with PE > 0 is boosted and preempts (Credit's wake path, our reading of
/// the callbacks §4.2 leaves out; see the header). Off: wake-ups wait for the next slot.
const WAKE_BOOST: bool = true;

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "slot_ms", default: ParamDefault::Int(SLOT_MS), range: ParamRange::Int { min: 1, max: MAX_SLOT_MS }, doc: "slot length (scheduling unit), ms" },
    ParamSpec {
        name: "alloc_interval_slots",
        default: ParamDefault::Int(ALLOC_INTERVAL_SLOTS),
        range: ParamRange::Int { min: 1, max: MAX_ALLOC_INTERVAL_SLOTS }, doc: "PE allocation interval L, in slots",
    },
    ParamSpec {
        name: "pe_unit",
        default: ParamDefault::Int(PE_UNIT_PER_SLOT),
        range: ParamRange::Int { min: 1, max: MAX_PE_UNIT }, doc: "PE dissipated by the running vCPU per slot",
    },
    ParamSpec {
        name: "carry_debt",
        default: ParamDefault::Bool(CARRY_DEBT),
        range: ParamRange::Any, doc: "keep negative PE across allocations (floored at -L x pe_unit); false = the paper's reset",
    },
    ParamSpec {
        name: "wake_boost",
        default: ParamDefault::Bool(WAKE_BOOST),
        range: ParamRange::Any, doc: "a vCPU waking with PE > 0 queues first and preempts until a slot boundary finds it running (Credit's BOOST)",
    },
];

// ---- State, by scope ----

struct PcpuState {
    /// Waiting vCPUs, head first: boosted ones first, then by decreasing PE (FIFO among equals).
    runq: Vec<VcpuId>,
    /// Sent a reschedule for a wake-up that has not landed yet.
    tickled: bool,
}

#[derive(Clone)]
struct VcpuState {
    pe: i64,
    /// The pCPU whose run queue it belongs to (where it runs, or waits, or last was).
    processor: PcpuId,
    queued: bool,
    /// Woke with PE > 0 and no slot boundary has found it running since (see the header).
    boosted: bool,
    /// A co-scheduling signal passed it over (it was about to run, or running), and since
    /// then no slot boundary has found it running and it has not blocked: the next signal
    /// leaves it the pCPU (see the header).
    passed_over: bool,
}

impl VcpuState {
    /// Run-queue order: smaller runs first.
    fn order(&self) -> (bool, std::cmp::Reverse<i64>) {
        (!self.boosted, std::cmp::Reverse(self.pe))
    }
}

struct Hybrid {
    // Configuration.
    slot_ns: Time,
    alloc_interval_slots: u64,
    pe_unit: i64,
    carry_debt: bool,
    wake_boost: bool,
    // State.
    pcpus: Vec<PcpuState>,
    vcpus: Vec<VcpuState>,
    /// Slot boundaries of the BSP (pCPU 0) passed since the start.
    slots: u64,
    /// The BSP's slot boundary called for an allocation, done at its next scheduling.
    alloc_pending: bool,
    /// `syn_domain_id` (§4.3): the CON VM being co-scheduled.
    syn_domain: Option<DomId>,
    /// `syn_map` (§4.3): pCPUs that must take part and have not rescheduled yet.
    syn_map: Vec<bool>,
    /// pCPUs that scheduled outside `syn_map` while `syn_domain_id` was set: they decide
    /// again when it clears (see the header, "Slot boundaries are simultaneous").
    provisional: Vec<bool>,
}

impl Hybrid {
    /// Does `d` get co-scheduled (CON, with siblings to co-schedule)?
    fn is_con(cx: &Cx, d: DomId) -> bool {
        let dom = cx.domain(d);
        dom.vm_type == VmType::Con && dom.vcpus > 1
    }

    /// Inserts `v` into `p`'s run queue after every vCPU that goes before it or ties with it.
    fn runq_insert(&mut self, p: PcpuId, v: VcpuId) {
        let key = self.vcpus[v].order();
        let runq = &self.pcpus[p].runq;
        let i = runq.iter().position(|&u| self.vcpus[u].order() > key).unwrap_or(runq.len());
        self.pcpus[p].runq.insert(i, v);
        let s = &mut self.vcpus[v];
        s.queued = true;
        s.processor = p;
    }

    fn runq_remove(&mut self, v: VcpuId) {
        let s = &mut self.vcpus[v];
        if s.queued {
            s.queued = false;
            self.pcpus[s.processor].runq.retain(|&u| u != v);
        }
    }

    /// Is a sibling of `v` queued on, or running on, `p`?
    fn sibling_on(&self, cx: &Cx, v: VcpuId, p: PcpuId) -> bool {
        cx.vcpus_of(cx.dom_of(v))
            .any(|u| u != v && ((self.vcpus[u].queued && self.vcpus[u].processor == p) || cx.running_on(u) == Some(p)))
    }

    /// vCPUs queued on or running on `p`, `v` itself excepted.
    fn load(&self, cx: &Cx, p: PcpuId, v: VcpuId) -> usize {
        let queued = self.pcpus[p].runq.iter().filter(|&&u| u != v).count();
        queued + usize::from(cx.curr(p).is_some_and(|u| u != v))
    }

    /// §3.3 initial mapping: the least-loaded pCPU of AP(v) — all pCPUs for a HIT vCPU,
    /// those without a sibling in their run queue for a CON vCPU. Ties: lowest index.
    fn placement(&self, cx: &Cx, v: VcpuId) -> PcpuId {
        let con = Self::is_con(cx, cx.dom_of(v));
        let allowed = |p: &PcpuId| !con || !self.sibling_on(cx, v, *p);
        let best = (0..self.pcpus.len()).filter(allowed).min_by_key(|&p| self.load(cx, p, v));
        // `admit` guarantees a CON VM fits, so AP(v) is never empty; stay total anyway.
        best.unwrap_or_else(|| (0..self.pcpus.len()).min_by_key(|&p| self.load(cx, p, v)).unwrap_or(0))
    }

    /// §3.3 "Physical CPU time allocation": reset every vCPU's PE to its share of
    /// `|P| × PE_unit × L`, by VM weight, then equally among the VM's vCPUs.
    fn allocate(&mut self, cx: &mut Cx) {
        let total_weight: i128 = cx.domains().map(|d| d.weight as i128).sum();
        let pe_total = self.pcpus.len() as i128 * self.pe_unit as i128 * self.alloc_interval_slots as i128;
        let debt_floor = -self.pe_unit * self.alloc_interval_slots as i64;
        for d in 0..cx.domains().len() {
            let dom = cx.domain(d);
            let share = (pe_total * dom.weight as i128 / (total_weight * dom.vcpus as i128).max(1)) as i64;
            for v in cx.vcpus_of(d) {
                let s = &mut self.vcpus[v];
                let debt = if self.carry_debt { s.pe.clamp(debt_floor, 0) } else { 0 };
                s.pe = share + debt;
                // Credit's `csched_acct` likewise drops BOOST from a vCPU it makes OVER.
                s.boosted &= s.pe > 0;
            }
        }
        cx.count("hybrid.allocations");
    }

    /// Stable re-sort of every run queue (boosted first, then by decreasing PE).
    fn sort_runqs(&mut self) {
        let vcpus = &self.vcpus;
        for pc in &mut self.pcpus {
            pc.runq.sort_by_key(|&u| vcpus[u].order());
        }
    }

    /// The end of a slot on `p` (§3.3 "PE dissipation"), at `p`'s own tick: the vCPU
    /// running there pays `PE_unit` and loses its boost (as `csched_tick` ends BOOST). Every
    /// L slots of the BSP (pCPU 0), the BSP re-allocates (§3.3 "PE allocation"), once for the
    /// host, before the next scheduling decision.
    fn slot_boundary(&mut self, cx: &mut Cx, p: PcpuId) {
        if let Some(v) = cx.curr(p) {
            let s = &mut self.vcpus[v];
            s.pe -= self.pe_unit;
            s.boosted = false;
            s.passed_over = false;
        }
        if p == 0 {
            self.slots += 1;
            // Allocated at the next scheduling on any pCPU (at once: the BSP's tick
            // reschedules it), so that pCPUs whose slot ends at this same instant have paid
            // for it first.
            self.alloc_pending = self.slots.is_multiple_of(self.alloc_interval_slots);
        }
        self.sort_runqs();
    }

    /// Rule 1's balancer (`hsched_workload_balance`): the highest-PE head of another run
    /// queue (with PE > 0 if `positive_only`), never a CON vCPU with a sibling on `p`, never
    /// a vCPU of the VM being co-scheduled. A boosted head goes before any unboosted one, as
    /// Credit steals by priority. Scans from `p + 1` round robin; first best wins.
    fn steal_candidate(&self, cx: &Cx, p: PcpuId, positive_only: bool) -> Option<VcpuId> {
        let n = self.pcpus.len();
        let mut best: Option<VcpuId> = None;
        for q in (1..n).map(|k| (p + k) % n) {
            let Some(&h) = self.pcpus[q].runq.first() else { continue };
            let pe = self.vcpus[h].pe;
            let d = cx.dom_of(h);
            if (positive_only && pe <= 0)
                || self.syn_domain == Some(d)
                || (Self::is_con(cx, d) && self.sibling_on(cx, h, p))
            {
                continue;
            }
            if best.is_none_or(|b| self.vcpus[h].order() < self.vcpus[b].order()) {
                best = Some(h);
            }
        }
        best
    }

    /// The local head, or (empty queue) any steal: what a non-participant runs.
    fn head_or_steal(&self, cx: &Cx, p: PcpuId) -> Option<VcpuId> {
        self.pcpus[p].runq.first().copied().or_else(|| self.steal_candidate(cx, p, false))
    }

    /// Rule 2 (§3.3) with §4.3's lock: `p` runs `h` of CON VM `d` and signals the pCPUs of
    /// its runnable siblings, which join when they reschedule.
    fn launch(&mut self, cx: &mut Cx, p: PcpuId, h: VcpuId) {
        let d = cx.dom_of(h);
        let mut any = false;
        for u in cx.vcpus_of(d) {
            if u == h || !cx.is_runnable(u) {
                continue;
            }
            let q = cx.running_on(u).unwrap_or(self.vcpus[u].processor);
            if q != p {
                self.syn_map[q] = true;
                any = true;
            }
        }
        if !any {
            return; // every sibling is blocked: nothing to co-schedule
        }
        self.syn_domain = Some(d);
        cx.co_launch(d);
        for q in 0..self.syn_map.len() {
            if self.syn_map[q] {
                cx.co_signal(q);
            }
        }
    }

    /// The last participant (`p`) has rescheduled: `syn_domain_id` clears, and pCPUs that
    /// scheduled as non-participants meanwhile decide again.
    fn release(&mut self, cx: &mut Cx, p: PcpuId) {
        self.syn_domain = None;
        for q in 0..self.provisional.len() {
            if std::mem::take(&mut self.provisional[q]) && q != p {
                cx.count("hybrid.lock_retries");
                cx.resched(q);
            }
        }
    }

    /// Rules 1–3 of §3.3 under the §4.3 skeleton: what `p` runs next (not yet dequeued).
    /// Would rule 3 run `v` if it were at the head of a run queue?
    fn would_run(&self, v: VcpuId) -> bool {
        self.vcpus[v].pe > 0 || self.vcpus[v].boosted
    }

    /// Does the head `h` of a signalled pCPU's queue keep the pCPU against sibling `u` of the
    /// co-scheduled VM? Yes if `h` is boosted and `u` is not, or if a signal passed `h` over
    /// already since it last ran to a slot boundary (see the header).
    fn keeps_pcpu_against(&self, h: VcpuId, u: VcpuId) -> bool {
        let (h, u) = (&self.vcpus[h], &self.vcpus[u]);
        (h.boosted && !u.boosted) || h.passed_over
    }

    fn choose(&mut self, cx: &mut Cx, p: PcpuId) -> Option<VcpuId> {
        match self.syn_domain {
            Some(d) if self.syn_map[p] => {
                // Participating: run the co-scheduled VM's vCPU from our run queue.
                self.syn_map[p] = false;
                if !self.syn_map.contains(&true) {
                    self.release(cx, p);
                }
                // The head is what rule 3 would run here without the signal (the vCPU that
                // was running is queued again by now, in order).
                let head = self.pcpus[p].runq.first().copied().filter(|&h| self.would_run(h));
                match self.pcpus[p].runq.iter().copied().find(|&u| cx.dom_of(u) == d) {
                    Some(u) if head.is_some_and(|h| h != u && self.keeps_pcpu_against(h, u)) => {
                        cx.count("hybrid.co_deferred");
                        head
                    }
                    Some(u) => {
                        if let Some(h) = head.filter(|&h| h != u) {
                            self.vcpus[h].passed_over = true;
                        }
                        Some(u)
                    }
                    None => {
                        cx.count("hybrid.co_missing");
                        self.head_or_steal(cx, p)
                    }
                }
            }
            Some(d) => {
                // Not participating: take the head as it is, for now.
                self.provisional[p] = true;
                let next = self.head_or_steal(cx, p);
                if let Some(u) = next {
                    let e = cx.dom_of(u);
                    if e != d && Self::is_con(cx, e) && self.vcpus[u].pe > 0 {
                        cx.count("hybrid.lock_busy");
                    }
                }
                next
            }
            None => {
                let head = self.pcpus[p].runq.first().copied();
                match head {
                    Some(h) if self.vcpus[h].pe > 0 => {
                        if Self::is_con(cx, cx.dom_of(h)) {
                            self.launch(cx, p, h); // rule 2
                        }
                        Some(h) // rules 2 and 3: the head runs here
                    }
                    _ => {
                        // Rule 1: the head has used its PE (or there is none).
                        if let Some(u) = self.steal_candidate(cx, p, true) {
                            cx.count("hybrid.steals");
                            return Some(u);
                        }
                        // No positive PE anywhere: stay work-conserving.
                        head.or_else(|| {
                            let u = self.steal_candidate(cx, p, false);
                            if u.is_some() {
                                cx.count("hybrid.idle_steals");
                            }
                            u
                        })
                    }
                }
            }
        }
    }

    /// Sends a reschedule to an idle pCPU (not already tickled), `first` if it is one.
    /// Returns whether one was found.
    fn tickle_idle(&mut self, cx: &mut Cx, first: PcpuId) -> bool {
        let n = self.pcpus.len();
        let idle = (0..n).map(|k| (first + k) % n).find(|&q| cx.curr(q).is_none() && !self.pcpus[q].tickled);
        if let Some(q) = idle {
            self.pcpus[q].tickled = true;
            cx.resched(q);
        }
        idle.is_some()
    }
}

impl Policy for Hybrid {
    /// The hybrid framework co-schedules a CON VM, so it needs one pCPU per vCPU (§2.3:
    /// |C(V_i)| <= |P|).
    fn admit(&self, pcpus: usize, domains: &[DomainInfo]) -> Result<(), String> {
        crate::credit_variant::admit_con_fits(pcpus, domains)
    }

    /// Contract: per-pCPU state exists and every vCPU holds its first PE allocation.
    fn init(&mut self, cx: &mut Cx) {
        self.pcpus = (0..cx.n_pcpus()).map(|_| PcpuState { runq: Vec::new(), tickled: false }).collect();
        self.vcpus =
            vec![VcpuState { pe: 0, processor: 0, queued: false, boosted: false, passed_over: false }; cx.n_vcpus()];
        self.syn_map = vec![false; cx.n_pcpus()];
        self.provisional = vec![false; cx.n_pcpus()];
        self.allocate(cx);
    }

    fn tick_period_ns(&self) -> Option<Time> {
        Some(self.slot_ns)
    }

    /// Slots are common to all pCPUs: §2.2 cuts time into slots `[i, i + 1)` in which every
    /// pCPU runs one vCPU, and §3.3 schedules "at the beginning of each slot". The paper does
    /// not say how its Xen 3.0.4 prototype keeps the pCPUs' ticks together (3.0.4 starts every
    /// CPU's `t_timer` at once, `schedule.c` L711-712, and lets each re-arm from `NOW()`), so
    /// we keep them aligned as its model requires. With per-pCPU phases (this returning false),
    /// a partner switched in mid-slot by a co-scheduling IPI is charged a whole slot at its
    /// own boundary: `tests/fairness.rs`'s two CON hogs of weights 1:2 on 2 pCPUs then split
    /// the host 53:47 instead of 33:67.
    fn ticks_aligned(&self) -> bool {
        true
    }

    fn timer_slop_ns(&self) -> Time {
        crate::XEN_TIMER_SLOP_NS
    }

    /// §3.3 initial mapping.
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        let p = self.placement(cx, v);
        self.runq_insert(p, v);
    }

    fn vcpu_remove(&mut self, _cx: &mut Cx, v: VcpuId) {
        self.runq_remove(v);
    }

    /// Back to its own run queue (re-placed if a CON sibling is there now), boosted if it has
    /// PE (and `wake_boost`). Then `__runq_tickle`'s rule: an idle pCPU (its own first) is
    /// tickled; with none, a boosted vCPU preempts its pCPU's unboosted current vCPU.
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        if self.vcpus[v].queued || cx.running_on(v).is_some() {
            return;
        }
        if self.wake_boost && self.vcpus[v].pe > 0 {
            self.vcpus[v].boosted = true;
            cx.count("hybrid.boosts");
        }
        let mut p = self.vcpus[v].processor;
        if Self::is_con(cx, cx.dom_of(v)) && self.sibling_on(cx, v, p) {
            p = self.placement(cx, v);
            cx.count("hybrid.wake_moves");
        }
        self.runq_insert(p, v);
        if !self.tickle_idle(cx, p) && self.vcpus[v].boosted && cx.curr(p).is_some_and(|u| !self.vcpus[u].boosted) {
            cx.count("hybrid.boost_preemptions");
            cx.resched(p);
        }
    }

    /// Put `prev` back, apply rules 1–3 (and §4.3), run the choice until the next slot.
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        if std::mem::take(&mut self.alloc_pending) {
            self.allocate(cx);
            self.sort_runqs();
        }
        self.pcpus[p].tickled = false;
        if let Some(u) = prev {
            if cx.running_on(u) == Some(p) {
                self.runq_insert(p, u);
            } else {
                self.vcpus[u].passed_over = false; // it blocked
            }
        }
        let next = self.choose(cx, p);
        if let Some(v) = next {
            self.runq_remove(v);
            self.vcpus[v].processor = p;
        }
        // The next slot boundary (the tick) reschedules: no slice timer.
        Decision { next, slice_ns: None }
    }

    /// `p`'s slot boundary (dissipation here, allocation on the BSP), then schedule here.
    fn tick(&mut self, cx: &mut Cx, p: PcpuId) {
        self.slot_boundary(cx, p);
        cx.resched(p);
    }

    /// §4.4: a VM that became CON must not keep two vCPUs in one run queue. Queued vCPUs
    /// that share a queue with a sibling move by the initial-mapping rule (running ones are
    /// on distinct pCPUs already; blocked ones are placed when they wake).
    fn vm_type_changed(&mut self, cx: &mut Cx, d: DomId, _old: VmType) {
        if !Self::is_con(cx, d) {
            return;
        }
        for v in cx.vcpus_of(d) {
            if self.vcpus[v].queued && self.sibling_on(cx, v, self.vcpus[v].processor) {
                let target = self.placement(cx, v);
                self.runq_remove(v);
                self.runq_insert(target, v);
                cx.count("hybrid.scatter_moves");
                if cx.curr(target).is_none() {
                    self.tickle_idle(cx, target);
                }
            }
        }
    }

    fn check(&self, cx: &Cx) -> Result<(), String> {
        if self.syn_domain.is_none() && self.provisional.contains(&true) {
            return Err("pCPUs wait to decide again but no co-scheduling is in flight".into());
        }
        if self.syn_domain.is_some() != self.syn_map.contains(&true) {
            return Err(format!("syn_domain_id {:?} disagrees with syn_map {:?}", self.syn_domain, self.syn_map));
        }
        for (p, pc) in self.pcpus.iter().enumerate() {
            for w in pc.runq.windows(2) {
                if self.vcpus[w[0]].order() > self.vcpus[w[1]].order() {
                    return Err(format!("pCPU {p}'s run queue is not sorted by boost, then decreasing PE"));
                }
            }
            for &u in &pc.runq {
                let s = &self.vcpus[u];
                if !s.queued || s.processor != p || !cx.is_runnable(u) || cx.running_on(u).is_some() {
                    return Err(format!("vCPU {u} in pCPU {p}'s run queue is not a waiting vCPU of it"));
                }
            }
        }
        for v in 0..self.vcpus.len() {
            if cx.is_runnable(v) && !self.vcpus[v].queued && cx.running_on(v).is_none() {
                return Err(format!("runnable vCPU {v} is neither queued nor running"));
            }
        }
        // §3.3/§4.4: no two vCPUs of a CON VM in one run queue (the running one included).
        for d in 0..cx.domains().len() {
            if !Self::is_con(cx, d) {
                continue;
            }
            let mut owner: Vec<Option<VcpuId>> = vec![None; self.pcpus.len()];
            for v in cx.vcpus_of(d) {
                let places = [cx.running_on(v), self.vcpus[v].queued.then_some(self.vcpus[v].processor)];
                for q in places.into_iter().flatten() {
                    if let Some(u) = owner[q] {
                        return Err(format!(
                            "vCPUs {u} and {v} of CON VM {} share pCPU {q}'s run queue",
                            cx.domain(d).name
                        ));
                    }
                    owner[q] = Some(v);
                }
            }
        }
        Ok(())
    }
}

/// Upper bounds of the parameters: a slot is a scheduling slice (at most seconds), and the
/// products of the three stay far from overflowing nanosecond and PE arithmetic.
const MAX_SLOT_MS: i64 = 10_000;
const MAX_ALLOC_INTERVAL_SLOTS: i64 = 1_000_000;
const MAX_PE_UNIT: i64 = 1_000_000;

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    let slot_ms = params.int("slot_ms");
    let alloc_interval_slots = params.int("alloc_interval_slots");
    let pe_unit = params.int("pe_unit");
    Ok(Box::new(Hybrid {
        slot_ns: slot_ms as Time * NS_PER_MS,
        alloc_interval_slots: alloc_interval_slots as u64,
        pe_unit,
        carry_debt: params.bool("carry_debt"),
        wake_boost: params.bool("wake_boost"),
        pcpus: Vec::new(),
        vcpus: Vec::new(),
        slots: 0,
        alloc_pending: false,
        syn_domain: None,
        syn_map: Vec::new(),
        provisional: Vec::new(),
    }))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "hybrid",
    description: "Weng's hybrid framework (VEE'09): PE per slot, HIT vCPU by vCPU, CON co-scheduled one VM at a time",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: PARAMS,
    build,
};
