//! `relaxed` — VMware ESX's relaxed co-scheduling: a proportional-share scheduler that stops a
//! vCPU which runs too far ahead of its slowest sibling.
//!
//! What it does. Each vCPU has a *progress*: the time it ran guest code, and the time it was
//! blocked (an idle vCPU makes progress: it has nothing to do, so its siblings are not
//! waiting for it). A vCPU ready to run but not running, or co-stopped, makes none. The
//! *skew* of a vCPU is its progress minus that of the slowest vCPU of its VM. At every
//! accounting point (a scheduling decision, and a periodic check every
//! [`ACCOUNTING_PERIOD_NS`] on each pCPU) a running or ready vCPU whose skew exceeds
//! `costop_threshold_us` is *co-stopped*: descheduled and not eligible to run, which lets the
//! laggards catch up; it is *co-started* (eligible again) as soon as its skew is back within
//! the threshold. Each vCPU decides for itself; there is no gang start (that was ESX 2.x's
//! strict co-scheduling, vsched's `cosched`), so nothing is fragmented. Among the eligible
//! ready vCPUs the one with the least weighted consumption runs next (a proportional-share
//! virtual time, `VtimeQueue`: equal times in arrival order), for [`DEFAULT_SLICE_MS`] at
//! most; a woken vCPU starts no further back than the least virtual time queued, so sleeping
//! earns no credit.
//!
//! Where it comes from: "VMware vSphere 4: The CPU Scheduler in VMware ESX 4" (technical
//! white paper, 2009), "Relaxed Co-Scheduling": ESX 4 tracks each vCPU's progress and
//! measures the skew against the slowest sibling; a leading vCPU whose skew exceeds a
//! threshold co-stops itself, and is co-started when the laggards have caught up; idle
//! vCPUs count as making progress ("ESX Scheduler Support for SMP VMs: Co-scheduling and
//! More", VMware performance blog, June 2008). "The CPU Scheduler in VMware vSphere 5.1"
//! (2013) says both decisions are individual: a leading vCPU co-stops itself, and co-stopped
//! vCPUs may co-start once the slowest sibling progresses.
//!
//! ESX 3.x profile (`skew_model = "cumulative"`): the skew is ESX 3.x's accumulated count
//! (`relaxed_books.rs` says what the sources give and what is our reading); co-stop and
//! co-start stay per vCPU, by the same threshold. Whether ESX 3.x co-stopped the whole VM
//! is not in the sources we could read, so the profile changes the measure only.
//!
//! Approximations: the threshold is not published — `costop_threshold_us` is a parameter,
//! its default our choice in the range the literature sweeps (docs/policies.md shows its
//! effect); ESX's per-pCPU run queues, its load balancing, shares / reservations / limits and
//! its cache- and topology-aware placement are reduced to one global run queue ordered by
//! weighted consumption, each vCPU weighted by its VM's weight: ESX's default shares are per
//! vCPU, "all virtual machines associated with the same host receive an equal share of CPU
//! per virtual CPU" (vSphere 4.1 Resource Management Guide, "CPU Virtualization Basics"), so a
//! VM's entitlement grows with its width as under Credit; the slice is a secondary source's (the default quantum of 50 ms,
//! "vSphere High Performance Cookbook", 2nd ed., ch. 1, which cites VMware's documentation).
//!
//! Metrics: per VM in esxtop's names (`policy_metrics`: `%CSTP`, `%RDY`, skew;
//! `relaxed_books.rs`), and per host (`host.policy_counters`) `relaxed.costops`,
//! `relaxed.costarts` (how many times) and `relaxed.costop_us` (time vCPUs spent co-stopped).

use vsched_model::queues::VtimeQueue;
use vsched_model::{
    ConfigError, Cx, Decision, DomId, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy, PolicyInfo, Time,
    VcpuId, VcpuState, YieldReason, NS_PER_MS, NS_PER_US,
};

use crate::relaxed_books::{Books, Mode, SkewModel};

/// The default co-stop threshold: 3 ms. Not published by VMware; our choice, within the
/// 1-10 ms the literature's sweeps cover (docs/policies.md, "relaxed").
const DEFAULT_COSTOP_THRESHOLD_US: i64 = 3_000;
/// The default quantum: 50 ms (module notes).
const DEFAULT_SLICE_MS: i64 = 50;
/// How often each pCPU looks at skew between decisions: 1 ms, well under the threshold, so
/// that the threshold, not this period, decides when a vCPU co-stops. Our choice.
const ACCOUNTING_PERIOD_NS: Time = NS_PER_MS;
/// Fixed-point scale of weighted consumption (ns × scale / weight), so that integer division
/// by a weight loses no more than a nanosecond's share.
const WEIGHT_SCALE: u64 = 1 << 10;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "costop_threshold_us",
        default: ParamDefault::Int(DEFAULT_COSTOP_THRESHOLD_US),
        range: ParamRange::Int { min: 1, max: 10_000_000 },
        doc: "skew against the slowest sibling beyond which a vCPU co-stops, in microseconds (not published)",
    },
    ParamSpec {
        name: "slice_ms",
        default: ParamDefault::Int(DEFAULT_SLICE_MS),
        range: ParamRange::Int { min: 1, max: 10_000 },
        doc: "quantum in milliseconds",
    },
    ParamSpec {
        name: "skew_model",
        default: ParamDefault::Str("min-relative"),
        range: ParamRange::Any,
        doc: "\"min-relative\" (ESX 4 and later: lead over the slowest sibling) or \"cumulative\" (ESX 3.x: \
              accumulated while ahead)",
    },
];

pub struct Relaxed {
    threshold_ns: Time,
    slice_ns: Time,
    books: Books,
    /// Ready vCPUs that are not co-stopped, by virtual time.
    ready: VtimeQueue,
}

impl Relaxed {
    fn enqueue(&mut self, v: VcpuId) {
        self.ready.insert(v, self.books.vcpus[v].vtime);
    }

    /// Charges `v`'s running since it was picked.
    fn charge(&mut self, v: VcpuId, now: Time) {
        let b = &mut self.books.vcpus[v];
        if let Some(from) = b.ran_from.take() {
            b.vtime += now.saturating_sub(from) * WEIGHT_SCALE / b.weight;
        }
    }

    /// Co-stops `v` (ready or running) at `now`.
    fn costop(&mut self, cx: &mut Cx, v: VcpuId, now: Time) {
        self.books.set_mode(cx, v, Mode::Waiting, now);
        self.books.vcpus[v].costopped_at = Some(now);
        self.books.vcpus[v].costops += 1;
        self.ready.remove(v);
        cx.count("relaxed.costops");
        if let Some(p) = cx.running_on(v) {
            cx.resched(p);
        }
    }

    /// Co-starts `v` at `now`: ready again, and an idle pCPU is asked to take it. One still on
    /// its pCPU (co-stopped and back within the threshold before that pCPU rescheduled) is
    /// requeued by that pCPU's `pick_next` instead.
    fn costart(&mut self, cx: &mut Cx, v: VcpuId, now: Time) {
        let since = self.books.vcpus[v].costopped_at.take().expect("co-stopped");
        self.books.vcpus[v].costopped_ns += now - since;
        cx.count("relaxed.costarts");
        cx.count_by("relaxed.costop_us", (now - since) / NS_PER_US);
        if cx.state(v) == VcpuState::Runnable {
            self.enqueue(v);
            cx.kick_idle_from(0);
        }
    }

    /// The accounting point: co-stop every running or ready vCPU too far ahead, co-start every
    /// co-stopped one back within the threshold.
    fn account(&mut self, cx: &mut Cx) {
        let now = cx.now();
        self.books.sample(cx, now);
        for v in 0..self.books.vcpus.len() {
            let skew = self.books.deciding_skew(v);
            let stopped = self.books.vcpus[v].costopped_at.is_some();
            let asks = matches!(cx.state(v), VcpuState::Running(_) | VcpuState::Runnable);
            if !stopped && asks && skew > self.threshold_ns {
                self.costop(cx, v, now);
            } else if stopped && skew <= self.threshold_ns {
                self.costart(cx, v, now);
            }
        }
    }
}

impl Policy for Relaxed {
    /// Contract: the periodic skew check (`ACCOUNTING_PERIOD_NS`).
    fn tick_period_ns(&self) -> Option<Time> {
        Some(ACCOUNTING_PERIOD_NS)
    }

    /// Contract: a new vCPU is ready, weighted by its VM's weight (shares per vCPU, as ESX's
    /// defaults; module notes).
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        let d: DomId = cx.dom_of(v);
        let weight = u64::from(cx.domain(d).weight).max(1);
        self.books.insert(v, d, cx.now(), weight);
        self.enqueue(v);
        cx.kick_idle_from(0);
    }

    /// Contract: a woken vCPU is ready (unless co-stopped), no further back in virtual time
    /// than the least queued; an idle pCPU is asked to take it.
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        let now = cx.now();
        self.books.set_mode(cx, v, Mode::Waiting, now);
        if let Some((_, floor)) = self.ready.peek_min() {
            self.books.vcpus[v].vtime = self.books.vcpus[v].vtime.max(floor);
        }
        if self.books.vcpus[v].costopped_at.is_none() {
            self.enqueue(v);
            cx.kick_idle_from(0);
        }
    }

    /// Contract: a blocked vCPU is idle, which counts as progress.
    fn sleep(&mut self, cx: &mut Cx, v: VcpuId) {
        let now = cx.now();
        self.books.set_mode(cx, v, Mode::Progressing, now);
        self.charge(v, now);
    }

    /// Contract: a pause-loop exit gives up the rest of the quantum; KVM's hypercalls are
    /// not ESX's.
    fn yield_(&mut self, cx: &mut Cx, _v: VcpuId, why: YieldReason) {
        if why == YieldReason::PauseLoopExit {
            cx.resched_here();
        }
    }

    /// Contract: account (co-stops, co-starts), requeue a runnable `prev` that is not
    /// co-stopped, and run the eligible ready vCPU with the least virtual time.
    fn pick_next(&mut self, cx: &mut Cx, _pcpu: PcpuId, prev: Option<VcpuId>) -> Decision {
        let now = cx.now();
        let runnable_prev = prev.filter(|&u| cx.is_runnable(u));
        // Mode first: the cumulative skew accrues up to now while `prev` still counts as running.
        if let Some(u) = runnable_prev {
            self.books.set_mode(cx, u, Mode::Waiting, now);
        }
        if let Some(u) = prev {
            self.charge(u, now);
        }
        // Accounting first: it may co-stop `prev`, or co-start it (a co-start leaves a vCPU
        // still on its pCPU to that pCPU), so `prev` is queued after, unless co-stopped.
        self.account(cx);
        if let Some(u) = runnable_prev.filter(|&u| self.books.vcpus[u].costopped_at.is_none()) {
            self.enqueue(u);
        }
        // A queued vCPU still on another pCPU (switching out) waits there until it is off.
        let free = |v: VcpuId| cx.state(v) == VcpuState::Runnable || (Some(v) == prev && cx.is_runnable(v));
        let Some(v) = self.ready.iter().map(|(v, _)| v).find(|&v| free(v)) else {
            return Decision::idle();
        };
        self.ready.remove(v);
        self.books.set_mode(cx, v, Mode::Progressing, now);
        self.books.vcpus[v].ran_from = Some(now);
        Decision::run(v, self.slice_ns)
    }

    /// Contract: the skew check between decisions.
    fn tick(&mut self, cx: &mut Cx, _pcpu: PcpuId) {
        self.account(cx);
    }

    /// Contract: the VM's esxtop figures (`relaxed_books.rs`).
    fn vm_metrics(&self, cx: &Cx, d: DomId) -> Vec<(&'static str, f64)> {
        self.books.report(cx, d, cx.now())
    }

    /// Invariants: a co-stopped vCPU does not run and is not queued; a ready one that is not
    /// co-stopped is queued.
    fn check(&self, cx: &Cx) -> Result<(), String> {
        for (v, b) in self.books.vcpus.iter().enumerate() {
            let queued = self.ready.contains(v);
            if b.costopped_at.is_some() && queued {
                return Err(format!("vCPU {v} is co-stopped and queued"));
            }
            if b.costopped_at.is_none() && cx.state(v) == VcpuState::Runnable && !queued {
                return Err(format!("vCPU {v} is ready, not co-stopped, and not queued"));
            }
            let running = cx.running_on(v);
            if b.costopped_at.is_some() && running.is_some_and(|p| !cx.resched_pending(p)) {
                return Err(format!("vCPU {v} is co-stopped and runs without a reschedule pending"));
            }
        }
        Ok(())
    }
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    let model = params.choice("skew_model", &SkewModel::NAMES)?;
    Ok(Box::new(Relaxed {
        threshold_ns: params.int("costop_threshold_us") as Time * NS_PER_US,
        slice_ns: params.int("slice_ms") as Time * NS_PER_MS,
        books: Books::new(SkewModel::named(&model)),
        ready: VtimeQueue::new(),
    }))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "relaxed",
    description:
        "VMware ESX's relaxed co-scheduling: proportional share, a vCPU too far ahead of its slowest sibling co-stops",
    hypervisor: vsched_model::Hypervisor::Generic,
    params: PARAMS,
    build,
};
