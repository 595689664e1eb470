//! `vds` — VCPU collaborative scheduling based on a virtual domain (seed 000: Liu, Li and
//! Wang, "Research on VCPU Collaborative Scheduling Mechanism Based on Virtual Domain", 2018).
//!
//! # How it works (with the paper's sections)
//! - Stable mapping (Definition 3.3): vCPU `j` of every VM runs on pCPU `j`. A VM with fewer
//!   vCPUs than pCPUs leaves the pCPUs beyond its width to a NULL vCPU: a fill slot.
//! - Periods (§3.2): each scheduling period of `period_ms` gang-schedules the vCPUs of one VM
//!   on their mapped pCPUs. The VM is the one of lowest virtual time (CPU time received,
//!   fills included, divided by weight × active vCPUs as Xen's `csched_acct` shares; ties
//!   by domain order), the rule `cosched` uses (`rounds::FairShare`).
//! - Virtual domain (Definition 3.6): VD = ⟨s, qb, qv, op⟩. `qv` holds every vCPU of the
//!   machine in order VC00, VC01, ..., VC10, ...; idle pCPUs are filled from it in sequence
//!   (DeQueue), and when nothing in it can fill, AddAll puts every vCPU back. Example 3.1 /
//!   Table 1: 4 pCPUs, VMs of 4, 3 and 2 vCPUs give K0 = VC00-VC03, K1 = VC10-VC12 + VC00 on
//!   C4, K2 = VC20, VC21 + VC01, VC02 on C3, C4.
//! - BOOST moves from the VM to the VD (§4): a waking vCPU does not make its VM run sooner;
//!   its VD entry leaves `qv` and joins `qb`, and idle pCPUs take `qb` before `qv`; a `qb`
//!   vCPU outranks a filler taken from `qv` (Definition 3.2; see below).
//! - The three cases of §4 / Algorithm 1, with Nb = |qb| and Nidle = the idle pCPUs of the
//!   period: (1) Nb = 0: fill from `qv`; (2) 0 < Nb <= Nidle: fill from `qb` first, then
//!   `qv`, an entry of the scheduled VM being dropped ("set to NULL", Alg. 1 lines 5-6);
//!   (3) Nb > Nidle: the `qb` entries that found no pCPU make the next period a boost
//!   period, which runs no VM: pCPUs 0.. take the first min(Nb, m) entries of `qb`, the
//!   rest come from `qv` (Alg. 1 lines 9-17).
//!
//! # Ambiguities, and the reading chosen
//! - Case (3) "in the next scheduling period" vs Algorithm 1 (which tests Nb against m, and
//!   whose `Nb > m` / `qb.length <= m` branches contradict each other): we follow the text.
//!   At a period's plan the idle pCPUs take `qb` first; if entries are left over, the next
//!   period is a boost period. A boost period runs at most m entries; leftovers trigger
//!   another. If `qb` emptied meanwhile, the next period is an ordinary one.
//! - Nb == Nidle: the idle pCPUs meet the need exactly; treated as case (2).
//! - "Idle CPU cycles" are read as idle pCPU time, so idle pCPUs are refilled mid-period
//!   too: when a filler blocks, when a gang member blocks (its pCPU is lent to the VD until
//!   it wakes, then it takes its pCPU back, displacing the filler), and when a vCPU wakes
//!   while a fillable pCPU is idle. A gang member blocked at the plan leaves its pCPU idle
//!   too, so it counts in Nidle.
//! - BOOST vs a running fill: Definition 3.2 ranks BOOST above UnBOOST, and §4 moves BOOST
//!   to the VD precisely to avoid priority inversion; so a vCPU that wakes into `qb` while
//!   every fillable pCPU is busy displaces a filler taken from `qv` (never one taken from
//!   `qb`, never a gang member), as Xen's BOOST preempts UNDER. Without this
//!   (`boost_preempts = false`) a woken vCPU waits in `qb` until a filler blocks or the
//!   period ends, and on a host full of CPU-bound fillers almost every period overflows
//!   into case (3) (in seed 000 Exp I, dom0 then serves ~5x fewer requests). A displaced
//!   filler goes back to the head of `qv`.
//! - A vCPU of the scheduled VM that wakes during its VM's period leaves `qv` (§4) but does
//!   not enter `qb`: its BOOST would be "set to NULL" at once (Alg. 1 lines 5-6) since it
//!   runs on its own pCPU. `qb` entries of the VM chosen for a period are dropped likewise.
//! - An entry that cannot fill (blocked, running, already placed, or of the scheduled VM) is
//!   dequeued and dropped when the sequence reaches it: it is "served" for this pass of
//!   `qv`; a blocked one re-enters through `qb` when it wakes. AddAll adds every vCPU not in
//!   `qb`, in order; it runs at most once per fill attempt. A filler that loses its pCPU at
//!   a period end has had its turn and waits for the next AddAll.
//! - Fills go to idle pCPUs in increasing pCPU order and ignore Definition 3.3 (Table 1
//!   puts VC00 on C4): only the scheduled VM keeps its mapping.
//! - Which VM runs next is not specified; we use weight-proportional fair share, which
//!   reproduces Table 1 exactly and keeps long-run CPU shares close to weights.
//! - VM types are not in the paper, which schedules every VM per period (its experiments
//!   are read as all CON). By default (`hit = "period"`) HIT VMs are period candidates like
//!   CON VMs, so the type changes only the accounting: a CON VM's period is a co-scheduling
//!   launch (`co_launch`, `co_signal`), a HIT VM's is not. With `hit = "fill"` HIT VMs run
//!   only through VD fills, never as a period's VM; but fills follow the weight-blind `qv`
//!   sequence, so HIT weights are then ignored (two HIT hogs of weights 1:2 split 50/50)
//!   and, when CON VMs fill every pCPU, a CPU-bound HIT vCPU runs only after a wake-up: it
//!   can starve. The default keeps weights honoured for every VM (tests/fairness.rs). A VM
//!   wider than the host (HIT, since CON ones are refused) is never a period's VM: its
//!   vCPUs run as fills. A type change takes effect at the next period.
//! - Caps are not enforced; PLE exits are ignored (the paper has neither).
//! - `check` (after every event): the VD queues are consistent (no duplicates, `qb`
//!   disjoint from `qv`, `qb` entries runnable, waiting and not of the scheduled VM); each
//!   running vCPU of the scheduled VM is on its mapped pCPU, each runnable one runs there,
//!   and every pCPU runs its planned owner or filler — each "except on a pCPU with a
//!   reschedule in flight", the instant between the IPIs that start a period.
//!
//! Suits: SMP VMs that synchronize (the paper's BSP matrix multiply) beside CPU-bound VMs:
//! gang periods without fragmentation, and a stable mapping (no migrations of the scheduled
//! VM). Known weaknesses: fills are handed out round robin by vCPU, ignoring weights, and a
//! CON VM's vCPUs also run one by one as fills, where a lock holder can be preempted; the
//! whole host turns over every period.

use std::collections::VecDeque;

use vsched_model::{
    ConfigError, Cx, Decision, DomId, DomainInfo, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy,
    PolicyInfo, Time, VcpuId, VmType, NS_PER_MS,
};

use crate::rounds::{release_first, FairShare, Handoff};

// ---- Constants (defaults; each is a scenario parameter) ----

/// Scheduling period: Xen's 30 ms slice (the paper's implementation is in Xen 4.1.2's
/// scheduler and gives no other figure).
const PERIOD_MS: i64 = 30;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "period_ms",
        default: ParamDefault::Int(PERIOD_MS),
        range: ParamRange::Int { min: 1, max: 10_000 },
        doc: "scheduling period, ms",
    },
    ParamSpec {
        name: "boost",
        default: ParamDefault::Bool(true),
        range: ParamRange::Any,
        doc: "waking vCPUs move from qv to qb and fill idle pCPUs first (§4); false = qv only",
    },
    ParamSpec {
        name: "hit",
        default: ParamDefault::Str("period"),
        range: ParamRange::Any,
        doc: "HIT VMs: \"period\" (scheduled per period like CON VMs) or \"fill\" (only through VD fills)",
    },
    ParamSpec {
        name: "boost_preempts",
        default: ParamDefault::Bool(true),
        range: ParamRange::Any,
        doc: "a qb vCPU displaces a filler taken from qv (BOOST outranks UnBOOST, Definition 3.2)",
    },
];

// ---- State, by scope ----

pub struct Vds {
    // Configuration.
    period_ns: Time,
    boost: bool,
    boost_preempts: bool,
    /// HIT VMs can be a period's VM.
    hit_periods: bool,
    // Global state.
    fair: FairShare,
    /// Period number; the period timer carries it as its id.
    period: u64,
    /// The VM gang-scheduled this period (`None`: a boost period, or no candidate runnable).
    gang: Option<DomId>,
    /// The VD's BOOST queue: vCPUs that woke from blocking, in wake order.
    qb: VecDeque<VcpuId>,
    /// The VD's UnBOOST queue, consumed in sequence and refilled by AddAll.
    qv: VecDeque<VcpuId>,
    /// Case (3) happened at the last plan: the next period runs `qb` first.
    boost_next: bool,
    // Per pCPU.
    /// The scheduled VM's vCPU mapped here (Definition 3.3), if any.
    owner: Vec<Option<VcpuId>>,
    /// The VD vCPU filling this pCPU (a NULL slot, or an owner's slot while it is blocked).
    fill: Vec<Option<VcpuId>>,
    /// The filler came from `qb` (BOOST): a waking vCPU cannot displace it.
    fill_boosted: Vec<bool>,
    /// Reschedules in flight.
    handoff: Handoff,
    // Per vCPU.
    /// The pCPU this vCPU fills, if it is a filler.
    filling: Vec<Option<PcpuId>>,
}

impl Vds {
    fn new(period_ns: Time, boost: bool, boost_preempts: bool, hit_periods: bool) -> Self {
        Vds {
            period_ns,
            boost,
            boost_preempts,
            hit_periods,
            fair: FairShare::empty(),
            period: 0,
            gang: None,
            qb: VecDeque::new(),
            qv: VecDeque::new(),
            boost_next: false,
            owner: Vec::new(),
            fill: Vec::new(),
            fill_boosted: Vec::new(),
            handoff: Handoff::new(0),
            filling: Vec::new(),
        }
    }

    /// AddAll(qv): every vCPU of the machine, in order (those in `qb` stay there).
    fn add_all(&mut self, cx: &mut Cx) {
        let qb = &self.qb;
        self.qv = (0..cx.n_vcpus()).filter(|v| !qb.contains(v)).collect();
        cx.count("vds.add_all");
    }

    /// Can `v` fill an idle pCPU? At a plan (`mid = false`) a running vCPU can: the plan
    /// takes it off its pCPU. Mid-period it must be waiting.
    fn fillable(&self, cx: &Cx, v: VcpuId, mid: bool) -> bool {
        cx.is_runnable(v)
            && Some(cx.dom_of(v)) != self.gang
            && self.filling[v].is_none()
            && !(mid && cx.running_on(v).is_some())
    }

    /// The next VD vCPU for an idle pCPU: `qb` first (cases 2 and 3), then `qv` in sequence
    /// (case 1), with one AddAll when `qv` runs out. Entries that cannot fill are dropped.
    fn take_fill(&mut self, cx: &mut Cx, mid: bool) -> Option<(VcpuId, bool)> {
        if let Some(v) = self.take_boosted(cx, mid) {
            return Some((v, true));
        }
        let mut refilled = false;
        loop {
            match self.qv.pop_front() {
                Some(v) if self.fillable(cx, v, mid) => {
                    cx.count("vds.qv_fills");
                    return Some((v, false));
                }
                Some(_) => {}
                None if !refilled => {
                    self.add_all(cx);
                    refilled = true;
                }
                None => return None,
            }
        }
    }

    /// The head of `qb` that can fill (entries that cannot are dropped).
    fn take_boosted(&mut self, cx: &mut Cx, mid: bool) -> Option<VcpuId> {
        while let Some(v) = self.qb.pop_front() {
            if self.fillable(cx, v, mid) {
                cx.count("vds.qb_fills");
                return Some(v);
            }
        }
        None
    }

    fn set_fill(&mut self, p: PcpuId, f: Option<(VcpuId, bool)>) {
        if let Some(old) = self.fill[p] {
            self.filling[old] = None;
        }
        self.fill[p] = f.map(|(v, _)| v);
        self.fill_boosted[p] = f.is_some_and(|(_, b)| b);
        if let Some((v, _)) = f {
            self.filling[v] = Some(p);
        }
    }

    /// A filler loses its pCPU mid-period through no fault of its own (a gang member came
    /// back, or a BOOST vCPU outranks it): it goes back to the head of `qv`, next in line.
    fn displace_fill(&mut self, p: PcpuId) {
        if let Some(f) = self.fill[p] {
            self.set_fill(p, None);
            if !self.qv.contains(&f) && !self.qb.contains(&f) {
                self.qv.push_front(f);
            }
        }
    }

    /// A pCPU a waking BOOST vCPU may take: idle and fillable, or (with `boost_preempts`)
    /// lent to a filler taken from `qv`, with nothing on the way.
    fn boost_target(&self, cx: &Cx) -> Option<PcpuId> {
        let n = cx.n_pcpus();
        (0..n).find(|&p| self.idle_fillable(cx, p)).or_else(|| {
            (0..n).find(|&p| {
                self.boost_preempts
                    && !self.handoff.in_transit(p)
                    && self.owner[p].is_none_or(|o| !cx.is_runnable(o))
                    && self.fill[p].is_some_and(|f| cx.running_on(f) == Some(p))
                    && !self.fill_boosted[p]
            })
        })
    }

    /// What `p` should run according to the plan: its owner if runnable, else its filler.
    fn want(&self, cx: &Cx, p: PcpuId) -> Option<VcpuId> {
        self.owner[p].filter(|&v| cx.is_runnable(v)).or(self.fill[p].filter(|&v| cx.is_runnable(v)))
    }

    /// Is `p` idle and free for a VD vCPU (no runnable owner, nothing on the way)?
    fn idle_fillable(&self, cx: &Cx, p: PcpuId) -> bool {
        cx.curr(p).is_none() && !self.handoff.in_transit(p) && self.owner[p].is_none_or(|o| !cx.is_runnable(o))
    }

    /// Plans the next period (Algorithm 1) and starts it.
    fn plan(&mut self, cx: &mut Cx) {
        let now = cx.now();
        let n = cx.n_pcpus();
        self.fair.charge_all(cx, |_| None);
        let runnable_doms: Vec<DomId> =
            (0..cx.domains().len()).filter(|&d| cx.vcpus_of(d).any(|v| cx.is_runnable(v))).collect();
        self.fair.settle(&runnable_doms);

        let prev_gang = self.gang;
        self.owner = vec![None; n];
        self.fill = vec![None; n];
        self.fill_boosted = vec![false; n];
        self.filling = vec![None; cx.n_vcpus()];
        self.handoff.clear_awaiting();

        // A boost period (case 3 at the last plan) runs qb, no VM; otherwise the VM of lowest
        // virtual time runs on its mapped pCPUs.
        let boost_period = self.boost_next && !self.qb.is_empty();
        self.boost_next = false;
        self.gang = if boost_period {
            cx.count("vds.boost_periods");
            None
        } else {
            runnable_doms
                .iter()
                .copied()
                .filter(|&d| {
                    let dom = cx.domain(d);
                    (dom.vm_type == VmType::Con || self.hit_periods) && dom.vcpus <= n
                })
                .min_by_key(|&d| (self.fair.vtime(d), d))
        };
        if let Some(d) = self.gang {
            // Alg. 1 lines 5-6: the scheduled VM's BOOST entries are already served.
            self.qb.retain(|&v| cx.dom_of(v) != d);
            for v in cx.vcpus_of(d) {
                self.owner[cx.vcpu_index(v)] = Some(v);
            }
            if prev_gang != Some(d) && cx.domain(d).vm_type == VmType::Con {
                cx.co_launch(d);
            }
        }

        // Idle pCPUs (NULL slots, and slots of blocked owners) take qb, then qv.
        for p in 0..n {
            if self.owner[p].is_none_or(|o| !cx.is_runnable(o)) {
                let f = self.take_fill(cx, false);
                self.set_fill(p, f);
            }
        }
        if !self.qb.is_empty() {
            // Case (3): Nb > Nidle.
            self.boost_next = true;
            cx.count("vds.qb_overflows");
        }

        // Start the period: a pCPU that takes a vCPU from another is signalled after it, so
        // the vCPU is free by the time its new pCPU reschedules (all land at one instant).
        let targets: Vec<PcpuId> = (0..n).filter(|&p| cx.curr(p) != self.want(cx, p)).collect();
        let takes_from: Vec<Option<PcpuId>> =
            targets.iter().map(|&p| self.want(cx, p).and_then(|v| cx.running_on(v))).collect();
        let co_period = self.gang.is_some_and(|d| cx.domain(d).vm_type == VmType::Con);
        for p in release_first(&targets, &takes_from) {
            let co = co_period && self.owner[p].is_some_and(|o| self.want(cx, p) == Some(o));
            self.handoff.kick(cx, p, co);
        }
        cx.count("vds.periods");
        self.period += 1;
        cx.set_timer(now + self.period_ns, self.period);
    }
}

impl Policy for Vds {
    fn timer_slop_ns(&self) -> Time {
        crate::XEN_TIMER_SLOP_NS
    }

    /// Definition 3.3 maps vCPU j to pCPU j: a CON VM wider than the host cannot be mapped.
    fn admit(&self, pcpus: usize, domains: &[DomainInfo]) -> Result<(), String> {
        crate::credit_variant::admit_con_fits(pcpus, domains)
    }

    /// Contract: the VD holds every vCPU in `qv` (AddAll), and the first period is planned at
    /// time 0, before the engine's initial reschedules.
    fn init(&mut self, cx: &mut Cx) {
        let n = cx.n_pcpus();
        self.fair = FairShare::new(cx);
        self.owner = vec![None; n];
        self.fill = vec![None; n];
        self.fill_boosted = vec![false; n];
        self.handoff = Handoff::new(n);
        self.filling = vec![None; cx.n_vcpus()];
        self.add_all(cx);
        let now = cx.now();
        cx.set_timer(now, self.period);
    }

    /// Contract: nothing to do; `init` put every vCPU in `qv`.
    fn vcpu_insert(&mut self, _cx: &mut Cx, _v: VcpuId) {}

    /// §4: the vCPU is not boosted in its VM; its VD entry moves from `qv` to `qb`, and an
    /// idle fillable pCPU takes it now. A vCPU of the scheduled VM goes back to its own pCPU.
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.fair.woke(cx, v);
        if let Some(p) = self.filling[v] {
            // Placed by the plan before it woke: its pCPU will run it.
            if cx.curr(p) != Some(v) {
                self.handoff.kick(cx, p, false);
            }
            return;
        }
        if Some(cx.dom_of(v)) == self.gang {
            self.qv.retain(|&u| u != v);
            let p = cx.vcpu_index(v);
            if cx.curr(p) != Some(v) {
                self.handoff.kick(cx, p, false);
            }
            return;
        }
        let target = if self.boost {
            self.qv.retain(|&u| u != v);
            if !self.qb.contains(&v) {
                self.qb.push_back(v);
                cx.count("vds.boosts");
            }
            self.boost_target(cx)
        } else {
            (0..cx.n_pcpus()).find(|&p| self.idle_fillable(cx, p))
        };
        if let Some(p) = target {
            self.handoff.kick(cx, p, false);
        }
    }

    /// Contract: the owner runs if runnable (displacing a filler); else the filler keeps the
    /// pCPU while runnable; else the VD gives the next fill (qb, then qv). No slice timer:
    /// the period timer ends every period.
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        self.handoff.landed(p);
        self.fair.charge(cx, p);
        let next = match self.owner[p].filter(|&v| cx.is_runnable(v)) {
            Some(v) => {
                if self.fill[p].is_some() {
                    cx.count("vds.gang_returns");
                }
                self.displace_fill(p);
                Some(v)
            }
            None => match self.fill[p].filter(|&f| cx.is_runnable(f)) {
                Some(f) if self.fill_boosted[p] || !self.boost_preempts => Some(f),
                Some(f) => match self.take_boosted(cx, true) {
                    // BOOST outranks the UnBOOST filler (Definition 3.2).
                    Some(b) => {
                        cx.count("vds.boost_preemptions");
                        self.displace_fill(p);
                        self.set_fill(p, Some((b, true)));
                        Some(b)
                    }
                    None => Some(f),
                },
                None => {
                    let f = self.take_fill(cx, true);
                    self.set_fill(p, f);
                    f.map(|(v, _)| v)
                }
            },
        };
        // Still on the pCPU it had last period: start it when that pCPU lets go.
        let next = self.handoff.unless_elsewhere(cx, p, next, "vds.awaits");
        let owner = &self.owner;
        self.handoff.release(cx, p, prev, next, |cx, q, u| {
            owner[q] == Some(u) && cx.domain(cx.dom_of(u)).vm_type == VmType::Con
        });
        Decision { next, slice_ns: None }
    }

    /// The period boundary.
    fn timer(&mut self, cx: &mut Cx, id: u64) {
        if id == self.period {
            self.plan(cx);
        }
    }

    /// See the header.
    fn check(&self, cx: &Cx) -> Result<(), String> {
        let transit = |p: PcpuId| self.handoff.in_transit(p);
        let mut in_qv = vec![false; cx.n_vcpus()];
        for &v in &self.qv {
            if std::mem::replace(&mut in_qv[v], true) {
                return Err(format!("vCPU {v} is twice in qv"));
            }
        }
        let mut in_qb = vec![false; cx.n_vcpus()];
        for &v in &self.qb {
            if std::mem::replace(&mut in_qb[v], true) || in_qv[v] {
                return Err(format!("vCPU {v} is twice in the VD (qb, qv)"));
            }
            if !cx.is_runnable(v) || cx.running_on(v).is_some() || Some(cx.dom_of(v)) == self.gang {
                return Err(format!("vCPU {v} in qb is blocked, running, or of the scheduled VM"));
            }
        }
        if let Some(d) = self.gang {
            for v in cx.vcpus_of(d) {
                let j = cx.vcpu_index(v);
                match cx.running_on(v) {
                    Some(p) if p != j && !transit(p) => {
                        return Err(format!("vCPU {v} (index {j}) of the scheduled VM runs on pCPU {p}"))
                    }
                    None if cx.is_runnable(v) && !transit(j) => {
                        return Err(format!("vCPU {v} of the scheduled VM waits while pCPU {j} is not rescheduling"))
                    }
                    _ => {}
                }
            }
        }
        for p in 0..cx.n_pcpus() {
            if let Some(u) = cx.curr(p) {
                if !transit(p) && self.owner[p] != Some(u) && self.fill[p] != Some(u) {
                    return Err(format!("pCPU {p} runs vCPU {u}, neither its owner nor its filler"));
                }
            }
        }
        Ok(())
    }
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    let period_ms = params.int("period_ms");
    let hit_periods = params.choice("hit", &["period", "fill"])? == "period";
    Ok(Box::new(Vds::new(
        period_ms as Time * NS_PER_MS,
        params.bool("boost"),
        params.bool("boost_preempts"),
        hit_periods,
    )))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "vds",
    description:
        "VD co-scheduling (seed 000): one VM per period on mapped pCPUs, idle pCPUs filled from a virtual domain",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: PARAMS,
    build,
};
