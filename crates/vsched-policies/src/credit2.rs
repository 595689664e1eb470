//! `credit2` — Xen's credit2 scheduler (`xen/common/sched/credit2.c`), Xen's default since 4.12.
//!
//! # How it works
//! credit2 keeps one run queue per socket (`credit2_runqueue`), shared by that socket's
//! pCPUs, sorted by credit, most first. Credit is time: every vCPU ("unit") starts an epoch
//! with `CSCHED2_CREDIT_INIT` = 10 ms and a running one burns it at `max_weight / weight`
//! ns per ns, `max_weight` being the largest weight assigned to its runqueue (`burn_credits`,
//! `t2c_update`), so a vCPU of half the weight burns twice as fast. There are no ticks and no
//! BOOST: a pCPU reschedules when its slice timer fires, when it is tickled, or when its vCPU
//! blocks or yields, and then runs the queued vCPU with the most credit if it has more than
//! the current one (`runq_candidate`): not before the current one has run `sched_ratelimit_us`
//! (1 ms), except when it yields; a vCPU last run on another pCPU only if it beats the
//! candidate by `sched_credit2_migrate_resist` (500 µs); and a vCPU of a capped domain only if
//! it can take some budget. The slice lasts until the chosen vCPU's credit would fall to the
//! next waiter's (`csched2_runtime`), between 500 µs (or what is left of the rate limit) and
//! 10 ms. When the best credit on the runqueue is gone, the epoch ends: every vCPU of the
//! runqueue gets 10 ms more, clipped at 10.5 ms (`reset_credit`), and the runqueue compares
//! its load with the others' and may push, pull or swap one vCPU (`balance_load`). A waking
//! vCPU is queued by credit and tickles a pCPU of its runqueue: a fully idle core first, then
//! an idle pCPU, then the busy pCPU whose vCPU it beats by the most (`runq_tickle`). A yield
//! sets a flag: at the next pick the yielder is passed over whatever its credit, if any other
//! vCPU may run there.
//!
//! # Sources
//! Read at RELEASE-4.12.0 (`xen/common/sched_credit2.c`), RELEASE-4.14.0, RELEASE-4.21.0 and
//! RELEASE-4.22.0 (`xen/common/sched/credit2.c`); line numbers are 4.22.0's unless said:
//! constants L229-L276, boot options L324-L497, `t2c_update` L816, `c2t` L830,
//! `cpu_add_to_runqueue` L933, `update_max_weight` L1061, `update_runq_load` L1278,
//! `update_svc_load` L1367, `runq_insert` L1437, `tickle_cpu` L1490, `is_preemptable` L1503,
//! `tickle_score` L1528, `runq_tickle` L1601, `reset_credit` L1783, `burn_credits` L1865,
//! caps L1919-L2155, `csched2_unit_sleep` L2226, `csched2_unit_wake` L2248,
//! `csched2_unit_yield` L2303, `csched2_context_saved` L2311, `csched2_res_pick` L2353,
//! `consider` L2582, `migrate` L2616, `balance_load` L2701, `csched2_unit_insert` L3220,
//! `csched2_runtime` L3281, `runq_candidate` L3384, `csched2_schedule` L3582. What changed
//! between releases: `credit2_version.rs`.
//!
//! # What we model, and how
//! - The simulator's `pick_next` is `csched2_schedule` followed at once by
//!   `csched2_context_saved` of the vCPU switched out (a context switch costs no policy time):
//!   a preempted vCPU is queued again and tickles (`delayed_runq_add`), a blocked one leaves
//!   the runqueue's load.
//! - Runqueues follow the host's topology: `socket` (default) groups the pCPUs of a scenario
//!   socket, `core` the hardware threads of a core (`threads_per_core`), `cpu` gives each pCPU
//!   its own, `all` one for the host; `node` is `socket`, since vsched has no NUMA nodes. From
//!   4.14, at most `sched_credit2_max_cpus_runqueue` (16) pCPUs share one, as evenly as
//!   `cpu_add_to_runqueue` spreads them (pCPUs are added in order 0, 1, ...).
//! - Every vCPU may run everywhere (no pinning or soft affinity: Xen's default soft affinity
//!   is every pCPU, so `tickle_score` adds its 10 ms bonus to every positive score and takes
//!   the waker's own pCPU as soon as it scores). A vCPU a host pins (a KVM kernel thread) is
//!   not a Xen thing; `hard affinity` is honoured through `Cx::pinned` anyway.
//! - Placement: `csched2_res_pick` at insert (the runqueue with the lowest `b_avgload`,
//!   the pCPU after its `pick_bias`), then `balance_load` at every reset. A running vCPU
//!   that `balance_load` moves leaves its pCPU at that pCPU's next schedule (`migrate`'s
//!   `_VPF_migrating` and tickle), is placed on the target by `csched2_res_pick` and
//!   `migrate`, and wakes there.
//! - `balance_load` reads `load_max` and `cpus_max` from the last runqueue of its scan, not
//!   from the one with the largest difference (`st.orqd` is only set to `max_delta_rqd` after
//!   the threshold, L2764-L2804): with two runqueues the two agree.
//! - VMs created mid-run go through `csched2_unit_insert` and then `csched2_unit_wake`
//!   (queued, tickled); at the start of a run they are queued untickled, and every pCPU
//!   schedules. A destroyed VM's vCPUs leave their runqueue (`csched2_unit_remove`).
//! - Caps: a capped domain's budget is refilled every `credit2_cap_period_ms`; its vCPUs take
//!   `max(budget / vCPUs, 500 µs)` at a time and are parked, out of their runqueue, when the
//!   domain has none (`unit_grab_budget`, `park_unit`, `replenish_domain_budget`).
//! - Timers fire up to Xen's 50 µs `timer_slop` late, as under `credit`.
//! - Not modelled: tasklets, cpupools, runqueue changes at run time, the trylock failures of
//!   `csched2_res_pick` and `balance_load` (every lock is taken here), the 32-bit `int`
//!   credit (credit is an i64; only 4.12 without a floor could overflow it).
//!
//! # Yield and pause-loop exits
//! Xen's PLE handler yields (`vmx_vmexit_handler`: `EXIT_REASON_PAUSE_INSTRUCTION` →
//! `vcpu_yield()`, RELEASE-4.22.0 `xen/arch/x86/hvm/vmx/vmx.c` L4799-L4801; `vcpu_yield`,
//! `xen/common/sched/core.c` L1524, calls the scheduler's yield hook and raises
//! `SCHEDULE_SOFTIRQ`), and `csched2_unit_yield` only sets `CSFLAG_unit_yield`. The
//! next `runq_candidate` skips the rate limit and takes the first vCPU of the runqueue that
//! may run here, whatever the two credits; with none, the yielder runs on. The queue is the
//! socket's, so a preempted lock holder queued anywhere on the socket can be picked at once.
//! KVM's yield hypercalls are not Xen's and change nothing.
//!
//! Suits: what Xen runs today (4.12 on). Known weaknesses: blind to guest synchronization,
//! like Credit; the 1 ms rate limit delays a waker with more credit.
//!
//! # Beside this file
//! `credit2_version.rs`: the rules by release. `credit2_state.rs`: what the callbacks ask of
//! the state (runnable, the idle credit, the trace, the bookkeeping checks).
//! `credit2_runq.rs`: runqueue arrangement,
//! insert, tickle. `credit2_sched.rs`: burn, reset, `runq_candidate`, `csched2_runtime`,
//! `csched2_schedule`. `credit2_balance.rs`: load tracking, `balance_load`, `migrate`,
//! `csched2_res_pick`. `credit2_cap.rs`: budgets. `credit2_tests.rs`: hand-driven checks.

use crate::credit2_version::{self, Credit2Profile};
use crate::credit_trace::Published;
use crate::xen_version::XEN_TIMER_SLOP_NS;
use vsched_model::{
    ConfigError, Cx, Decision, DomainInfo, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy, PolicyInfo,
    Time, VcpuId, YieldReason, NS_PER_MS, NS_PER_US,
};

// ---- Constants (credit2.c, the same at every release read) ----

/// `CSCHED2_MIN_TIMER`: the shortest slice.
pub(crate) const MIN_TIMER_NS: i64 = 500_000;
/// `CSCHED2_CREDIT_INIT`: the credit of a new vCPU and of each reset.
pub(crate) const CREDIT_INIT_NS: i64 = 10_000_000;
/// `CSCHED2_CREDIT_MIN` (4.14): the lowest credit a vCPU may reach.
pub(crate) const CREDIT_MIN_NS: i64 = -CREDIT_INIT_NS;
/// `CSCHED2_CARRYOVER_MAX`: credit kept beyond `CREDIT_INIT` across a reset.
pub(crate) const CARRYOVER_MAX_NS: i64 = MIN_TIMER_NS;
/// `CSCHED2_MIGRATE_COMPENSATION`: credit given to a vCPU pulled from another pCPU.
pub(crate) const MIGRATE_COMPENSATION_NS: i64 = 50_000;
/// `CSCHED2_RATELIMIT_TICKLE_TOLERANCE`: a busy pCPU may be tickled this long before its
/// vCPU's rate limit ends.
pub(crate) const RATELIMIT_TICKLE_TOLERANCE_NS: i64 = 50_000;
/// `CSCHED2_CREDIT_RESET`: an epoch ends when the best credit is at or below this.
pub(crate) const CREDIT_RESET_NS: i64 = 0;
/// `CSCHED2_MAX_TIMER`: the longest slice.
pub(crate) const MAX_TIMER_NS: i64 = CREDIT_INIT_NS;
/// `LOADAVG_GRANULARITY_SHIFT`: load is tracked in units of 2^10 ns.
pub(crate) const LOADAVG_GRANULARITY_SHIFT: u32 = 10;
/// `LOADAVG_WINDOW_SHIFT`: the EWMA window, 2^30 ns (1.07 s).
pub(crate) const LOADAVG_WINDOW_SHIFT: u32 = 30;
/// `LOADAVG_PRECISION_SHIFT`: 18 fractional bits.
pub(crate) const LOADAVG_PRECISION_SHIFT: u32 = 18;

// ---- Parameters (Xen's boot options; defaults from credit2.c and core.c) ----

/// `sched_ratelimit_us` (`SCHED_DEFAULT_RATELIMIT_US`, `xen/common/sched/private.h` L21).
const RATELIMIT_US: i64 = 1_000;
/// `sched_credit2_migrate_resist` (`opt_migrate_resist`, L324).
const MIGRATE_RESIST_US: i64 = 500;
/// `credit2_balance_under` (L408) and `credit2_balance_over` (L410): log2 tolerances.
const BALANCE_UNDER: i64 = 0;
const BALANCE_OVER: i64 = -3;
/// `credit2_cap_period_ms` (L418).
const CAP_PERIOD_MS: i64 = 10;
/// `sched_credit2_max_cpus_runqueue` (`MAX_CPUS_RUNQ`, L495; 4.14 on).
const MAX_CPUS_RUNQUEUE: i64 = 16;
/// `XEN_SYSCTL_SCHED_RATELIMIT_MIN` (`xen/include/public/sysctl.h` L797): a non-zero rate
/// limit below it is out of range.
const RATELIMIT_MIN_US: i64 = 100;

/// `credit2_runqueue` values (`opt_runqueue_str`, L457).
pub(crate) const RUNQUEUE_NAMES: [&str; 5] = ["cpu", "core", "socket", "node", "all"];

pub(crate) const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "xen_version",
        default: ParamDefault::Str("current"),
        range: ParamRange::Any,
        doc: "credit2's rules as in Xen \"4.12\", \"4.14\", \"4.21\" or \"current\" (4.22, the same as 4.21)",
    },
    ParamSpec {
        name: "credit2_runqueue",
        default: ParamDefault::Str("socket"),
        range: ParamRange::Any,
        doc: "pCPUs sharing a runqueue: \"cpu\", \"core\", \"socket\", \"node\" (= socket) or \"all\"",
    },
    ParamSpec {
        name: "sched_credit2_max_cpus_runqueue",
        default: ParamDefault::Int(MAX_CPUS_RUNQUEUE),
        range: ParamRange::Int { min: 1, max: 4096 },
        doc: "most pCPUs per runqueue (Xen >= 4.14; 4.12 has no bound)",
    },
    ParamSpec {
        name: "sched_ratelimit_us",
        default: ParamDefault::Int(RATELIMIT_US),
        range: ParamRange::Int { min: 0, max: 500_000 },
        doc: "minimum run time before a preemption, µs (0 = off, else at least 100)",
    },
    ParamSpec {
        name: "sched_credit2_migrate_resist",
        default: ParamDefault::Int(MIGRATE_RESIST_US),
        range: ParamRange::Int { min: 0, max: 1_000_000 },
        doc: "credit, µs, a vCPU last run on another pCPU must have beyond the candidate's to be pulled",
    },
    ParamSpec {
        name: "credit2_balance_under",
        default: ParamDefault::Int(BALANCE_UNDER),
        range: ParamRange::Int { min: -18, max: 40 },
        doc: "log2 of the load difference, in vCPUs, that balances runqueues below full load",
    },
    ParamSpec {
        name: "credit2_balance_over",
        default: ParamDefault::Int(BALANCE_OVER),
        range: ParamRange::Int { min: -18, max: 40 },
        doc: "log2 of the load difference, in vCPUs, that balances runqueues at full load",
    },
    ParamSpec {
        name: "credit2_cap_period_ms",
        default: ParamDefault::Int(CAP_PERIOD_MS),
        range: ParamRange::Int { min: 1, max: 10_000 },
        doc: "period of a capped domain's budget, ms",
    },
];

/// The replenishment timer of domain `d` is `TIMER_REPLENISH + d`.
pub(crate) const TIMER_REPLENISH: u64 = 1;

/// How pCPUs are grouped into runqueues (`opt_runqueue`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Arrangement {
    Cpu,
    Core,
    Socket,
    All,
}

// ---- State, by scope ----

/// A runqueue (`csched2_runqueue_data`).
pub(crate) struct Runqueue {
    /// Its pCPUs, in the order they were added (`active`).
    pub(crate) cpus: Vec<PcpuId>,
    /// Queued vCPUs, most credit first (`runq`).
    pub(crate) runq: Vec<VcpuId>,
    /// Every vCPU assigned to it, queued, running or blocked, in assignment order (`svc`).
    pub(crate) svc: Vec<VcpuId>,
    pub(crate) max_weight: u32,
    /// Runnable vCPUs assigned here (queued or running): the instantaneous load.
    pub(crate) load: i64,
    /// In units of 2^10 ns.
    pub(crate) load_last_update: i64,
    pub(crate) avgload: i64,
    /// `avgload` as `balance_load` and `csched2_res_pick` adjust it for vCPUs moved in or out.
    pub(crate) b_avgload: i64,
    /// The pCPU the last placement on this runqueue chose; the next starts after it.
    pub(crate) pick_bias: PcpuId,
}

pub(crate) struct PcpuState {
    /// Index of its runqueue.
    pub(crate) rq: usize,
    /// In the runqueue's `idle` mask: ran idle at its last schedule.
    pub(crate) idle: bool,
    /// In `tickled`: asked to schedule, and has not yet.
    pub(crate) tickled: bool,
    /// In `smt_idle`: its whole core was idle and untickled when last looked at.
    pub(crate) smt_idle: bool,
    /// Its hardware siblings in its runqueue, itself included (`sibling_mask`).
    pub(crate) siblings: Vec<PcpuId>,
}

#[derive(Clone)]
pub(crate) struct VcpuState {
    /// ns of credit (`credit`).
    pub(crate) credit: i64,
    /// Remainder of the weight division in `t2c_update`.
    pub(crate) residual: u64,
    pub(crate) weight: u32,
    /// Credit is burnt from here.
    pub(crate) start_time: Time,
    /// When it last started running (Xen's `state_entry_time` of the running state).
    pub(crate) run_start: Time,
    /// Its runqueue (`svc->rqd`), once inserted.
    pub(crate) rq: Option<usize>,
    /// The pCPU it belongs to (`sched_unit_master`).
    pub(crate) processor: PcpuId,
    pub(crate) queued: bool,
    /// `CSFLAG_unit_yield`.
    pub(crate) yielding: bool,
    /// The pCPU tickled to pick it up (`tickled_cpu`).
    pub(crate) tickled_cpu: Option<PcpuId>,
    /// Its own load EWMA (`avgload`, `load_last_update`).
    pub(crate) avgload: i64,
    pub(crate) load_last_update: i64,
    /// Budget, ns, if its domain is capped (`budget`; Xen's `STIME_MAX` is `None`).
    pub(crate) budget: Option<i64>,
    pub(crate) budget_quota: i64,
    /// Parked for want of budget (`_VPF_parked`).
    pub(crate) parked: bool,
    /// `balance_load` moves it to this runqueue when its pCPU next deschedules it
    /// (`migrate_rqd`, `_VPF_migrating`, `CSFLAG_runq_migrate_request`).
    pub(crate) migrate_to: Option<usize>,
}

impl VcpuState {
    fn new() -> Self {
        VcpuState {
            credit: CREDIT_INIT_NS,
            residual: 0,
            weight: 256,
            start_time: 0,
            run_start: 0,
            rq: None,
            processor: 0,
            queued: false,
            yielding: false,
            tickled_cpu: None,
            avgload: 0,
            load_last_update: 0,
            budget: None,
            budget_quota: 0,
            parked: false,
            migrate_to: None,
        }
    }
}

/// A domain's budget (`csched2_dom`), for a capped domain.
pub(crate) struct DomState {
    /// Cap in percent of one pCPU; 0 for none.
    pub(crate) cap: u32,
    pub(crate) tot_budget: i64,
    pub(crate) budget: i64,
    pub(crate) next_repl: Time,
    /// Parked vCPUs, the last parked first (`list_add`).
    pub(crate) parked: Vec<VcpuId>,
}

pub(crate) struct Credit2 {
    // Configuration.
    pub(crate) profile: Credit2Profile,
    pub(crate) arrangement: Arrangement,
    pub(crate) max_cpus_runqueue: usize,
    pub(crate) ratelimit_ns: i64,
    pub(crate) migrate_resist_ns: i64,
    pub(crate) balance_under: i32,
    pub(crate) balance_over: i32,
    pub(crate) cap_period_ns: i64,
    // State.
    pub(crate) rqs: Vec<Runqueue>,
    pub(crate) pcpus: Vec<PcpuState>,
    pub(crate) vcpus: Vec<VcpuState>,
    pub(crate) doms: Vec<DomState>,
    /// While `csched2_schedule` holds it: the vCPU it chose (Xen's `CSFLAG_scheduled` is set
    /// on it before `reset_credit` and `balance_load` run).
    pub(crate) picking: Option<VcpuId>,
    /// While the vCPU switched out is saved: its pCPU and what now runs there (`Cx` still
    /// shows the vCPU switched out).
    pub(crate) switched: Option<(PcpuId, Option<VcpuId>)>,
    /// What a traced run shows (`credit_trace.rs`): each pCPU's runqueue length (its
    /// runqueue's, shared with the runqueue's other pCPUs) and each vCPU's credit, in µs.
    pub(crate) published: Published,
}

impl Policy for Credit2 {
    /// `csched2_dom_cntl` refuses a cap above 100 × the domain's vCPUs.
    fn admit(&self, _pcpus: usize, domains: &[DomainInfo]) -> Result<(), String> {
        match domains.iter().find(|d| d.cap as usize > 100 * d.vcpus) {
            Some(d) => Err(format!(
                "VM {:?} has cap {} but credit2 accepts at most 100 × its {} vCPUs",
                d.name, d.cap, d.vcpus
            )),
            None => Ok(()),
        }
    }

    /// Contract: runqueues are arranged, domains' budgets filled and their refill timers set.
    fn init(&mut self, cx: &mut Cx) {
        self.arrange(cx);
        self.vcpus = vec![VcpuState::new(); cx.n_vcpus()];
        self.doms = cx
            .domains()
            .map(|d| DomState { cap: d.cap, tot_budget: 0, budget: 0, next_repl: 0, parked: Vec::new() })
            .collect();
        for d in 0..self.doms.len() {
            self.cap_init(cx, d);
        }
        self.published.start(cx, cx.n_pcpus(), cx.n_vcpus());
    }

    fn timer_slop_ns(&self) -> Time {
        XEN_TIMER_SLOP_NS
    }

    fn supports_vm_lifecycle(&self) -> bool {
        true
    }

    /// `csched2_alloc_udata` + `csched2_unit_insert` (placed by `csched2_res_pick`), then the
    /// wake-up that unpausing the domain brings (`csched2_unit_wake`): queued, and tickled
    /// after the start.
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        let d = cx.dom_of(v);
        let now = cx.now() as i64;
        let s = &mut self.vcpus[v];
        *s = VcpuState::new();
        s.weight = cx.domain(d).weight.max(1);
        // "Starting load of 50%".
        s.avgload = 1 << (LOADAVG_PRECISION_SHIFT - 1);
        s.load_last_update = now >> LOADAVG_GRANULARITY_SHIFT;
        if self.doms[d].cap != 0 {
            s.budget = Some(0);
            s.budget_quota = (self.doms[d].tot_budget / cx.domain(d).vcpus as i64).max(MIN_TIMER_NS);
        }
        let (r, p) = self.res_pick(cx, v);
        self.vcpus[v].processor = p;
        self.runq_assign(v, r);
        if self.runnable(cx, v) {
            self.update_load(r, Some(v), 1, now);
            self.runq_insert(v);
            if cx.mid_run() {
                self.runq_tickle(cx, v);
            }
        }
        self.publish(cx);
    }

    /// `csched2_unit_remove`: off its runqueue (and its domain's parked list), deassigned.
    fn vcpu_remove(&mut self, cx: &mut Cx, v: VcpuId) {
        let now = cx.now() as i64;
        if let Some(r) = self.vcpus[v].rq {
            if self.vcpus[v].queued {
                self.runq_remove(v);
                self.update_load(r, Some(v), -1, now);
            }
            self.runq_deassign(v);
        }
        let d = cx.dom_of(v);
        self.doms[d].parked.retain(|&u| u != v);
        self.vcpus[v] = VcpuState::new();
        self.publish(cx);
    }

    /// `csched2_unit_wake`: queued by credit, then `runq_tickle`. A parked vCPU stays parked
    /// (Xen does not wake a vCPU with `_VPF_parked`); it is queued when unparked.
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        let s = &self.vcpus[v];
        if s.queued || cx.running_on(v).is_some() || !self.runnable(cx, v) {
            return;
        }
        let Some(r) = s.rq else { return };
        let now = cx.now() as i64;
        self.update_load(r, Some(v), 1, now);
        self.runq_insert(v);
        self.runq_tickle(cx, v);
        self.publish(cx);
    }

    /// `csched2_unit_sleep` of the running vCPU: `tickle_cpu` on its pCPU, which schedules
    /// next (the simulator calls `pick_next` right after).
    fn sleep(&mut self, cx: &mut Cx, v: VcpuId) {
        if let Some(p) = cx.running_on(v) {
            self.mark_tickled(p);
        }
    }

    /// `csched2_unit_yield`: set the flag and reschedule (`vcpu_yield`, `core.c` L1524,
    /// raises `SCHEDULE_SOFTIRQ`). KVM's hypercalls have no Xen counterpart: ignored.
    fn yield_(&mut self, cx: &mut Cx, v: VcpuId, why: YieldReason) {
        if why != YieldReason::PauseLoopExit {
            return;
        }
        self.vcpus[v].yielding = true;
        cx.resched_here();
    }

    /// `csched2_schedule`, then `csched2_context_saved` (see `credit2_sched.rs`).
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        let decision = self.schedule(cx, p, prev);
        self.publish(cx);
        decision
    }

    /// `replenish_domain_budget` of a capped domain.
    fn timer(&mut self, cx: &mut Cx, id: u64) {
        self.replenish(cx, (id - TIMER_REPLENISH) as usize);
        self.publish(cx);
    }

    fn check(&self, cx: &Cx) -> Result<(), String> {
        self.check_books(cx)
    }
}

impl Credit2 {
    /// credit2 configured from its parameters (`PARAMS`).
    pub(crate) fn from_params(params: &Params) -> Result<Credit2, ConfigError> {
        let profile = credit2_version::from_params(params)?;
        let arrangement = match params.choice("credit2_runqueue", &RUNQUEUE_NAMES)?.as_str() {
            "cpu" => Arrangement::Cpu,
            "core" => Arrangement::Core,
            "all" => Arrangement::All,
            _ => Arrangement::Socket,
        };
        let ratelimit_us = params.int("sched_ratelimit_us");
        if ratelimit_us != 0 && ratelimit_us < RATELIMIT_MIN_US {
            return Err(params.invalid(
                "sched_ratelimit_us",
                format!("expected 0 (off) or {RATELIMIT_MIN_US}..=500000, got {ratelimit_us}"),
            ));
        }
        Ok(Credit2 {
            profile,
            arrangement,
            max_cpus_runqueue: params.int("sched_credit2_max_cpus_runqueue") as usize,
            ratelimit_ns: ratelimit_us * NS_PER_US as i64,
            migrate_resist_ns: params.int("sched_credit2_migrate_resist") * NS_PER_US as i64,
            balance_under: params.int("credit2_balance_under") as i32,
            balance_over: params.int("credit2_balance_over") as i32,
            cap_period_ns: params.int("credit2_cap_period_ms") * NS_PER_MS as i64,
            rqs: Vec::new(),
            pcpus: Vec::new(),
            vcpus: Vec::new(),
            doms: Vec::new(),
            picking: None,
            switched: None,
            published: Published::default(),
        })
    }
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(Credit2::from_params(params)?))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "credit2",
    description:
        "Xen credit2 (default since 4.12): per-socket runqueues sorted by credit, rate limit, EWMA load balancing, caps",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: PARAMS,
    build,
};
