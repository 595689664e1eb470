//! Co-start skew (seed 004 Fig. 6) is measured per co-scheduling operation: from a launch to
//! the switch-in of each sibling that was waiting when it was launched.

mod common;

use std::collections::VecDeque;

use common::*;
use vsched_model::{Cx, Decision, PcpuId, Policy, Simulation, Time, Until, VcpuId, VmType, NS_PER_MS, NS_PER_US};

/// vCPU `v` runs only on pCPU `v % pcpus`, round robin in 1 ms slices; a timer launches a
/// co-scheduling of domain `dom` at each instant of `launches` (and does nothing else).
struct PinnedLauncher {
    dom: usize,
    launches: Vec<Time>,
    queues: Vec<VecDeque<VcpuId>>,
}

impl Policy for PinnedLauncher {
    fn init(&mut self, cx: &mut Cx) {
        self.queues = vec![VecDeque::new(); cx.n_pcpus()];
        for (i, &at) in self.launches.iter().enumerate() {
            cx.set_timer(at, i as u64);
        }
    }
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.queues[v % cx.n_pcpus()].push_back(v);
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.vcpu_insert(cx, v);
    }
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        if let Some(u) = prev.filter(|&u| cx.is_runnable(u)) {
            self.queues[p].push_back(u);
        }
        match self.queues[p].pop_front() {
            Some(v) => Decision::run(v, NS_PER_MS),
            None => Decision::idle(),
        }
    }
    fn timer(&mut self, cx: &mut Cx, _id: u64) {
        cx.co_launch(self.dom);
    }
}

#[test]
fn skew_runs_from_the_launch_to_each_waiting_siblings_switch_in() {
    // 2 pCPUs, no overheads. VM "other" (vCPU 0) and VM "con" (vCPUs 1 and 2), all hogs:
    // pCPU 1 runs vCPU 1 alone from 0 for ever; pCPU 0 runs vCPU 0 in [0, 1) ms, vCPU 2 in
    // [1, 2), vCPU 0 in [2, 3), vCPU 2 in [3, 4).
    // - Launch at 0.5 ms: vCPU 1 runs (not counted), vCPU 2 waits: pending; its switch-in at
    //   1 ms is one co-start of 500 µs.
    // - Launch at 1.5 ms: both run; nothing to co-start.
    // - Launches at 2.2 and 2.6 ms: vCPU 2 waits since 2 ms and keeps the first launch; it
    //   switches in at 3 ms: 800 µs.
    // The old measure (the time since the earliest sibling's switch-in, at each switch-in
    // that left the VM running) gave 1000 and 3000 µs: vCPU 1, running since 0, made
    // "skews" as long as the run.
    let doms = vec![domain("other", VmType::Hit, vec![hog()]), domain("con", VmType::Con, vec![hog(), hog()])];
    let launches = vec![500 * NS_PER_US, 1_500 * NS_PER_US, 2_200 * NS_PER_US, 2_600 * NS_PER_US];
    let policy = Box::new(PinnedLauncher { dom: 1, launches, queues: Vec::new() });
    let horizon = 3_500 * NS_PER_US;
    let m = Simulation::new(free_host(2), doms, policy, 1).run(horizon, Until::Horizon, &mut |_| true).unwrap();
    let con = vm(&m, "con");
    assert_eq!(con.co_launches, 4);
    assert_eq!(con.costarts, 2);
    assert_eq!(con.costart_skew_us_mean, Some(650.0));
    assert_eq!(con.costart_skew_us_quantiles.as_ref().map(|q| (q[0], q[20])), Some((500.0, 800.0)));
}
