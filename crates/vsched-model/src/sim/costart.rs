//! The co-start skew metric (seed 004 Fig. 6): how far apart sibling vCPUs start running.
//! Its definition for users is in `metrics.rs` (`costart_skew_us_*`); it is measured and
//! summarized here.

use vsched_engine::Time;

use super::state::Core;
use crate::domain::VcpuState;
use crate::histogram::Histogram;
use crate::ids::{DomId, PcpuId, VcpuId};
use crate::metrics::{cdf_levels, VmMetrics};

/// Measures co-start skew per co-scheduling operation (seed 004 Fig. 6, "the scheduling time
/// edge difference between the VCPUs"). A launch of the VM's co-scheduling (the policy's
/// `co_launch`, at time t) makes every sibling that is waiting in a run queue *pending*;
/// the pending sibling's next switch-in, at s, is one sample, `s - t`. Excluded: siblings
/// already running at the launch (nothing to co-start), blocked ones (nothing to run) and
/// the launcher itself (switched in at t on the pCPU that launched). A sibling still
/// pending at a later launch keeps its first launch: its skew runs from the operation that
/// first asked for it. Samples go into a [`Histogram`], so a VM's memory does not grow
/// with the run's length (quantiles within `histogram::RELATIVE_ERROR`).
pub(super) struct CoStart {
    /// Per vCPU of the VM: the launch it is pending on, as (time, launching global pCPU).
    pending: Vec<Option<(Time, Option<PcpuId>)>>,
    skews: Histogram,
}

impl CoStart {
    pub(super) fn new(vcpus: usize) -> Self {
        CoStart { pending: vec![None; vcpus], skews: Histogram::new() }
    }

    /// Writes `costarts` and the `costart_skew_us_*` figures of `vm`.
    pub(super) fn report(&self, vm: &mut VmMetrics) {
        let skews = &self.skews;
        let us = |t: Time| t as f64 / 1e3;
        vm.costarts = skews.count();
        vm.costart_skew_us_mean = skews.mean().map(|m| m / 1e3);
        // p50 and p99 first, then the CDF's levels, all in one pass over the histogram.
        let levels: Vec<f64> = [0.5, 0.99].into_iter().chain(cdf_levels()).collect();
        if let Some(q) = skews.quantiles(&levels) {
            vm.costart_skew_us_p50 = Some(us(q[0]));
            vm.costart_skew_us_p99 = Some(us(q[1]));
            vm.costart_skew_us_quantiles = Some(q[2..].iter().copied().map(us).collect());
        }
    }
}

impl Core {
    /// The policy launched a co-scheduling of global domain `d`, from global pCPU `from`
    /// (`None`: from a timer): its waiting siblings become pending (see [`CoStart`]).
    pub(super) fn note_co_launch(&mut self, d: DomId, from: Option<PcpuId>) {
        let now = self.now();
        let dom = &mut self.doms[d];
        for (i, u) in self.vcpus[dom.span.clone()].iter().enumerate() {
            if u.state == VcpuState::Runnable && dom.costart.pending[i].is_none() {
                dom.costart.pending[i] = Some((now, from));
            }
        }
    }

    /// `v` was switched in on global pCPU `p`: if it was pending on a launch, record its skew.
    pub(super) fn note_costart(&mut self, v: VcpuId, p: PcpuId) {
        let now = self.now();
        let (d, index) = (self.vcpus[v].dom, self.vcpus[v].index);
        let costart = &mut self.doms[d].costart;
        if let Some((launched_at, from)) = costart.pending[index].take() {
            let launcher = launched_at == now && from == Some(p);
            if !launcher {
                costart.skews.record(now - launched_at);
            }
        }
    }
}
