//! The books of `relaxed` (VMware's relaxed co-scheduling, `relaxed.rs`): each vCPU's
//! progress, its skew against its siblings in either of ESX's two measures, and the per-VM
//! figures the report gives in esxtop's names.
//!
//! The two measures (`skew_model`):
//! - `min-relative` (ESX 4 and later): a vCPU's progress minus that of its slowest sibling
//!   ("VMware vSphere 4: The CPU Scheduler in VMware ESX 4", 2009, §3.1, "Further Relaxed
//!   Co-Scheduling": the skew "is measured as the difference in progress between the slowest
//!   vCPU and each one of the other vCPUs").
//! - `cumulative` (ESX 3.x): a count per vCPU that grows while the vCPU runs and a sibling
//!   waits (ready or co-stopped); an idle vCPU, which makes progress, gains none ("idle
//!   vCPUs do not accumulate skew", VMware performance blog, June 2008). The same section and its Figure 1(a) say ESX 3.x accumulated skew per
//!   vCPU, so that a vCPU ahead of different siblings at different times counts every lead (3T
//!   in the figure where the true difference is 2T, "a 50 percent overestimation"). How ESX
//!   3.x cleared the count is not in the sources we could read; our reading, the simplest
//!   that keeps the count an upper bound of the true skew, is that it is cleared when the
//!   vCPU is level with its slowest sibling (its min-relative skew is 0, at an accounting
//!   point). So a co-stopped vCPU stays co-stopped until every laggard has caught up.
//!
//! Figures per VM (`policy_metrics`, esxtop's names; each over the VM's vCPUs and the run's
//! length, so 0-100 whatever the VM's width, where esxtop's VM row sums its vCPUs):
//! - `%CSTP`: time co-stopped; `%RDY`: time ready (runnable, not running, not co-stopped);
//! - `skew_us_max`, `skew_us_mean`: the VM's largest min-relative skew (the lead of its
//!   fastest vCPU over its slowest, whichever measure decides) sampled at accounting points,
//!   its largest value and its mean over time;
//! - `costops`: times one of its vCPUs co-stopped.

use vsched_model::{Cx, DomId, Time, VcpuId};

/// How skew is measured (module notes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SkewModel {
    MinRelative,
    Cumulative,
}

impl SkewModel {
    pub(crate) const NAMES: [&'static str; 2] = ["min-relative", "cumulative"];

    pub(crate) fn named(name: &str) -> Self {
        if name == "cumulative" {
            SkewModel::Cumulative
        } else {
            SkewModel::MinRelative
        }
    }
}

/// What a vCPU is doing, for its progress.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// Running guest code, or blocked (idle): making progress.
    Progressing,
    /// Ready and not running, or co-stopped: not.
    Waiting,
}

/// One vCPU's books.
#[derive(Clone, Debug)]
pub(crate) struct VcpuBooks {
    pub(crate) mode: Mode,
    /// Progress up to `since`, ns.
    pub(crate) progress_ns: Time,
    pub(crate) since: Time,
    /// Weighted consumption: ns run × `WEIGHT_SCALE` / the vCPU's weight.
    pub(crate) vtime: u64,
    /// When it last started running, if it runs.
    pub(crate) ran_from: Option<Time>,
    /// Co-stopped since this time.
    pub(crate) costopped_at: Option<Time>,
    /// Its weight: its VM's (shares per vCPU), at least 1.
    pub(crate) weight: u64,
    /// ESX 3.x's accumulated skew, ns, up to its VM's `accrued_to` (cumulative model only).
    pub(crate) accumulated_ns: Time,
    /// Finished periods of waiting (ready or co-stopped) and of co-stop, ns, for the report.
    pub(crate) waited_ns: Time,
    pub(crate) costopped_ns: Time,
    pub(crate) costops: u64,
}

impl VcpuBooks {
    pub(crate) fn new(now: Time, weight: u64) -> Self {
        VcpuBooks {
            mode: Mode::Waiting,
            progress_ns: 0,
            since: now,
            vtime: 0,
            ran_from: None,
            costopped_at: None,
            weight,
            accumulated_ns: 0,
            waited_ns: 0,
            costopped_ns: 0,
            costops: 0,
        }
    }
}

/// One VM's books: how far its cumulative skew is accrued, and its skew's statistics.
#[derive(Clone, Debug, Default)]
pub(crate) struct VmBooks {
    accrued_to: Time,
    /// Its largest skew at the last sample, and when that was.
    skew_ns: Time,
    sampled_at: Time,
    /// ∫ largest skew dt up to `sampled_at`, ns², and the largest skew seen.
    skew_area: f64,
    skew_max_ns: Time,
}

/// Every vCPU's and VM's books.
pub(crate) struct Books {
    pub(crate) model: SkewModel,
    pub(crate) vcpus: Vec<VcpuBooks>,
    vms: Vec<VmBooks>,
    /// Each vCPU's min-relative skew at the last accounting point (reused storage).
    pub(crate) skews: Vec<Time>,
}

impl Books {
    pub(crate) fn new(model: SkewModel) -> Self {
        Books { model, vcpus: Vec::new(), vms: Vec::new(), skews: Vec::new() }
    }

    /// Books for a new vCPU `v` of `d` (and for any lower id not yet seen).
    pub(crate) fn insert(&mut self, v: VcpuId, d: DomId, now: Time, weight: u64) {
        if self.vcpus.len() <= v {
            self.vcpus.resize(v + 1, VcpuBooks::new(now, weight));
            self.skews.resize(v + 1, 0);
        }
        if self.vms.len() <= d {
            self.vms.resize(d + 1, VmBooks::default());
        }
        self.vcpus[v].weight = weight;
    }

    /// `v`'s progress at `now`.
    pub(crate) fn progress(&self, v: VcpuId, now: Time) -> Time {
        let b = &self.vcpus[v];
        match b.mode {
            Mode::Progressing => b.progress_ns + now.saturating_sub(b.since),
            Mode::Waiting => b.progress_ns,
        }
    }

    /// `v` goes to `mode` at `now`, its progress (and its VM's cumulative skew) brought up to
    /// date first.
    pub(crate) fn set_mode(&mut self, cx: &Cx, v: VcpuId, mode: Mode, now: Time) {
        if self.model == SkewModel::Cumulative {
            self.accrue(cx, cx.dom_of(v), now);
        }
        let progress = self.progress(v, now);
        let b = &mut self.vcpus[v];
        if b.mode == Mode::Waiting {
            b.waited_ns += now.saturating_sub(b.since);
        }
        b.progress_ns = progress;
        b.since = now;
        b.mode = mode;
    }

    /// The vCPUs of `d` that have books.
    fn siblings<'a>(&self, cx: &'a Cx, d: DomId) -> impl Iterator<Item = VcpuId> + 'a {
        let known = self.vcpus.len();
        cx.vcpus_of(d).filter(move |&u| u < known)
    }

    /// ESX 3.x's count up to `now`: each vCPU of `d` running while a sibling waits (ready or
    /// co-stopped) gains the time since the last accrual. Modes do not change between
    /// accruals (every change of mode accrues first, before the policy charges a run), so
    /// this is exact.
    fn accrue(&mut self, cx: &Cx, d: DomId, now: Time) {
        let vm = &mut self.vms[d];
        let dt = now.saturating_sub(vm.accrued_to);
        vm.accrued_to = vm.accrued_to.max(now);
        if dt == 0 {
            return;
        }
        let lagging = self.siblings(cx, d).any(|u| self.vcpus[u].mode == Mode::Waiting);
        if lagging {
            let known = self.vcpus.len();
            for u in cx.vcpus_of(d).filter(|&u| u < known) {
                // Running, not idle: "idle vCPUs do not accumulate skew" (2008 blog).
                let b = &mut self.vcpus[u];
                if b.mode == Mode::Progressing && b.ran_from.is_some() {
                    b.accumulated_ns += dt;
                }
            }
        }
    }

    /// The accounting point's books: every vCPU's min-relative skew into `skews`, each VM's
    /// skew statistics, and in the cumulative model each count accrued, and cleared where
    /// the vCPU is level with its slowest sibling.
    pub(crate) fn sample(&mut self, cx: &Cx, now: Time) {
        for d in 0..self.vms.len() {
            let slowest = self.siblings(cx, d).map(|u| self.progress(u, now)).min().unwrap_or(0);
            let mut largest = 0;
            for u in self.siblings(cx, d).collect::<Vec<_>>() {
                let skew = self.progress(u, now) - slowest;
                self.skews[u] = skew;
                largest = largest.max(skew);
            }
            if self.model == SkewModel::Cumulative {
                self.accrue(cx, d, now);
                for u in self.siblings(cx, d).collect::<Vec<_>>() {
                    if self.skews[u] == 0 {
                        self.vcpus[u].accumulated_ns = 0;
                    }
                }
            }
            let vm = &mut self.vms[d];
            vm.skew_area += vm.skew_ns as f64 * now.saturating_sub(vm.sampled_at) as f64;
            vm.skew_ns = largest;
            vm.sampled_at = vm.sampled_at.max(now);
            vm.skew_max_ns = vm.skew_max_ns.max(largest);
        }
    }

    /// The skew that decides for `v` at the accounting point just sampled.
    pub(crate) fn deciding_skew(&self, v: VcpuId) -> Time {
        match self.model {
            SkewModel::MinRelative => self.skews[v],
            SkewModel::Cumulative => self.vcpus[v].accumulated_ns,
        }
    }

    /// `d`'s figures at `now` (module notes).
    pub(crate) fn report(&self, cx: &Cx, d: DomId, now: Time) -> Vec<(&'static str, f64)> {
        let Some(vm) = self.vms.get(d) else { return Vec::new() };
        let (mut costopped, mut waited, mut costops, mut n) = (0, 0, 0, 0u64);
        for u in self.siblings(cx, d) {
            let b = &self.vcpus[u];
            let open = now.saturating_sub(b.since);
            costopped += b.costopped_ns + b.costopped_at.map_or(0, |at| now.saturating_sub(at));
            waited += b.waited_ns + if b.mode == Mode::Waiting { open } else { 0 };
            costops += b.costops;
            n += 1;
        }
        let capacity = (now as f64) * n as f64;
        let percent = |ns: Time| if capacity > 0.0 { 100.0 * ns as f64 / capacity } else { 0.0 };
        let area = vm.skew_area + vm.skew_ns as f64 * now.saturating_sub(vm.sampled_at) as f64;
        let mean_ns = if now > 0 { area / now as f64 } else { 0.0 };
        vec![
            ("%CSTP", percent(costopped)),
            ("%RDY", percent(waited.saturating_sub(costopped))),
            ("costops", costops as f64),
            ("skew_us_max", vm.skew_max_ns as f64 / 1e3),
            ("skew_us_mean", mean_ns / 1e3),
        ]
    }
}
