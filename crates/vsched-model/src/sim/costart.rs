//! The co-start skew metric (seed 004 Fig. 6): how far apart sibling vCPUs start running.
//! Its definition for users is in `metrics.rs` (`costart_skew_us_*`); it is measured and
//! summarized here.

use vsched_engine::Time;

use super::state::Core;
use crate::domain::VcpuState;
use crate::ids::VcpuId;
use crate::metrics::{cdf_quantiles, quantile, VmMetrics};

/// Measures co-start skew (seed 004 Fig. 6, "the scheduling time edge difference between
/// the VCPUs"): each time a vCPU starts running (a switch-in; a running vCPU given a new
/// slice has no new edge) and every vCPU of its VM that is not blocked is running (at least
/// two of them), one sample is the time from the earliest of their switch-ins to now.
pub(super) struct CoStart {
    /// When each vCPU of the VM last started running.
    pub(super) started_at: Vec<Time>,
    skews: Vec<Time>,
}

impl CoStart {
    pub(super) fn new(vcpus: usize) -> Self {
        CoStart { started_at: vec![0; vcpus], skews: Vec::new() }
    }

    /// Writes `costarts` and the `costart_skew_us_*` figures of `vm`.
    pub(super) fn report(&mut self, vm: &mut VmMetrics) {
        self.skews.sort_unstable();
        let skews = &self.skews;
        let us = |t: Time| t as f64 / 1e3;
        vm.costarts = skews.len() as u64;
        vm.costart_skew_us_mean =
            (!skews.is_empty()).then(|| skews.iter().sum::<Time>() as f64 / skews.len() as f64 / 1e3);
        vm.costart_skew_us_p50 = quantile(skews, 0.5).map(us);
        vm.costart_skew_us_p99 = quantile(skews, 0.99).map(us);
        vm.costart_skew_us_quantiles = cdf_quantiles(skews).map(|q| q.into_iter().map(us).collect());
    }
}

impl Core {
    /// A vCPU was switched in: if its whole VM (blocked vCPUs aside) now runs, record the
    /// co-start skew (see [`CoStart`]).
    pub(super) fn note_costart(&mut self, v: VcpuId) {
        let now = self.now();
        let (d, index) = (self.vcpus[v].dom, self.vcpus[v].index);
        let dom = &mut self.doms[d];
        if dom.info.vcpus < 2 {
            return;
        }
        dom.costart.started_at[index] = now;
        let mut earliest = now;
        let mut running = 0;
        for (i, u) in self.vcpus[dom.span.clone()].iter().enumerate() {
            match u.state {
                VcpuState::Running(_) => {
                    running += 1;
                    earliest = earliest.min(dom.costart.started_at[i]);
                }
                VcpuState::Runnable => return,
                VcpuState::Blocked | VcpuState::Offline => {}
            }
        }
        if running >= 2 {
            dom.costart.skews.push(now - earliest);
        }
    }
}
