//! `rr` — global round robin, the reference policy.
//!
//! What it does: one FIFO of runnable vCPUs shared by all pCPUs; a pCPU that needs work takes
//! the head and runs it for a fixed slice; a preempted or yielding vCPU goes to the tail; a
//! waking vCPU goes to the tail and kicks one idle pCPU.
//! Where it comes from: the textbook round robin; it is here as the smallest complete
//! example of the [`Policy`] contract, in the spirit of sched_ext's `scx_simple`.
//! Suits: teaching, and as a sanity baseline. Weakness: ignores weights, caps and sibling
//! relations entirely, so lock holders are preempted as often as anyone.

use vsched_model::{
    ConfigError, Cx, Decision, FifoQueue, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy, PolicyInfo,
    Time, VcpuId, YieldReason, NS_PER_US,
};

/// Default slice: 10 ms, the order of a Linux CFS period on a loaded host.
const DEFAULT_SLICE_US: i64 = 10_000;

const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "slice_us",
    default: ParamDefault::Int(DEFAULT_SLICE_US),
    range: ParamRange::Int { min: 1, max: 10_000_000 },
    doc: "time slice in microseconds",
}];

pub struct RoundRobin {
    slice_ns: Time,
    /// Runnable vCPUs that are not running, oldest first (`vsched_model::queues`).
    queue: FifoQueue,
}

impl Policy for RoundRobin {
    /// Contract: every new vCPU joins the tail of the queue.
    fn vcpu_insert(&mut self, _cx: &mut Cx, v: VcpuId) {
        self.queue.push_back(v);
    }

    /// Contract: queue the woken vCPU and kick one idle pCPU (the lowest-numbered one not
    /// already kicked, so two wake-ups wake two pCPUs).
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.queue.push_back(v);
        cx.kick_idle_from(0);
    }

    /// Contract: a pause-loop exit gives up the rest of the slice (the vCPU goes to the
    /// tail); KVM's yield hypercalls are not this hypervisor's, and change nothing.
    fn yield_(&mut self, cx: &mut Cx, _v: VcpuId, why: YieldReason) {
        if why == YieldReason::PauseLoopExit {
            cx.resched_here();
        }
    }

    /// Contract: requeue a still-runnable `prev` at the tail, run the head.
    fn pick_next(&mut self, cx: &mut Cx, _pcpu: PcpuId, prev: Option<VcpuId>) -> Decision {
        if let Some(p) = prev.filter(|&p| cx.is_runnable(p)) {
            self.queue.push_back(p);
        }
        match self.queue.pop_front() {
            Some(v) => Decision::run(v, self.slice_ns),
            None => Decision::idle(),
        }
    }
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    let slice_us = params.int("slice_us");
    Ok(Box::new(RoundRobin { slice_ns: slice_us as Time * NS_PER_US, queue: FifoQueue::new() }))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "rr",
    description: "Global round robin with a fixed slice: the ~100-line reference policy",
    hypervisor: vsched_model::Hypervisor::Generic,
    params: PARAMS,
    build,
};
