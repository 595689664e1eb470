//! The sibling-spread rule on Credit: which vCPUs must never share a run queue with a vCPU
//! of their own VM, where such a vCPU is queued instead, and the invariant that checks it.
//!
//! Plain Credit ignores siblings (`Spread::Off`). Balance scheduling (Sukwong & Kim,
//! EuroSys'11) spreads every VM; the co-scheduling policies spread their CON VMs, at the
//! initial mapping and on balancing (seed 003 §3.3) and by scattering a VM that becomes CON
//! (seed 004 §IV-B). Xen has no such rule: these are the papers' additions, kept apart from
//! `credit.rs`, which is Xen's scheduler.

use vsched_model::{Cx, DomId, PcpuId, VcpuId, VmType};

use crate::credit::Credit;

/// Which vCPUs must never share a run queue with a sibling (a vCPU of the same VM).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spread {
    /// Plain Credit: placement ignores siblings.
    Off,
    /// CON VMs only: the co-scheduling policies (seed 003 §3.3 initial mapping and
    /// balancing; seed 004 §IV-B scatter).
    Con,
    /// Every VM: balance scheduling (Sukwong & Kim, EuroSys'11).
    All,
}

impl Credit {
    /// Whether `v` follows the spread rule (never shares a run queue with a sibling).
    pub(crate) fn spreads(&self, cx: &Cx, v: VcpuId) -> bool {
        let dom = cx.domain(cx.dom_of(v));
        dom.vcpus > 1
            && match self.spread {
                Spread::Off => false,
                Spread::Con => dom.vm_type == VmType::Con,
                Spread::All => true,
            }
    }

    /// Is a sibling of `v` queued on, or running on, `p`?
    pub(crate) fn sibling_on(&self, cx: &Cx, v: VcpuId, p: PcpuId) -> bool {
        cx.vcpus_of(cx.dom_of(v))
            .any(|u| u != v && ((self.vcpus[u].queued && self.vcpus[u].processor == p) || cx.running_on(u) == Some(p)))
    }

    /// Balance scheduling's rule for `v` about to be queued on `p` (on wake, on migration):
    /// another run queue, without a sibling, if `p`'s has one.
    pub(crate) fn away_from_siblings(&self, cx: &Cx, v: VcpuId, p: PcpuId) -> Option<PcpuId> {
        (self.spreads(cx, v) && self.sibling_on(cx, v, p)).then(|| self.spread_target(cx, v))
    }

    /// Where `v` should be queued under the spread rule: the pCPU with the fewest siblings of
    /// `v` (ideally none), then the fewest vCPUs of spreading VMs (seed 004 §IV-B: "least
    /// concurrent VCPUs"), then idle before busy, then the shortest run queue; ties go round
    /// robin from `v`'s current processor.
    pub(crate) fn spread_target(&self, cx: &Cx, v: VcpuId) -> PcpuId {
        let n = self.pcpus.len();
        let d = cx.dom_of(v);
        let mut load = vec![(0usize, 0usize, 0usize, 0usize); n];
        for u in 0..self.vcpus.len() {
            if u == v {
                continue;
            }
            let at = if let Some(q) = cx.running_on(u) {
                q
            } else if self.vcpus[u].queued {
                self.vcpus[u].processor
            } else {
                continue;
            };
            if cx.dom_of(u) == d {
                load[at].0 += 1;
            }
            if self.spreads(cx, u) {
                load[at].1 += 1;
            }
            if cx.running_on(u).is_some() {
                load[at].2 = 1;
            }
            load[at].3 += 1;
        }
        let start = self.vcpus[v].processor;
        (0..n).map(|k| (start + k) % n).min_by_key(|&q| load[q]).unwrap_or(start)
    }

    /// Moves each queued vCPU of `d` that shares a run queue with a sibling to its spread
    /// target (seed 004 §IV-B, when a VM becomes CON). Running vCPUs stay: spread targets
    /// already avoid the pCPUs they run on, and blocked ones are placed when they wake.
    pub(crate) fn scatter(&mut self, cx: &mut Cx, d: DomId) {
        for v in cx.vcpus_of(d) {
            if self.vcpus[v].queued && self.sibling_on(cx, v, self.vcpus[v].processor) {
                let target = self.spread_target(cx, v);
                self.runq_remove(v);
                self.runq_insert(cx, target, v);
                cx.count("credit.scatter_moves");
            }
        }
    }

    /// The spread invariant: no two siblings of a spreading VM in one run queue (a running
    /// vCPU counts as part of its pCPU's queue), when the VM fits on the host.
    pub(crate) fn check_spread(&self, cx: &Cx) -> Result<(), String> {
        for d in 0..cx.domains().len() {
            let dom = cx.domain(d);
            if dom.vcpus > self.pcpus.len() {
                continue;
            }
            let mut owner: Vec<Option<VcpuId>> = vec![None; self.pcpus.len()];
            for v in cx.vcpus_of(d) {
                if !self.spreads(cx, v) {
                    continue;
                }
                let places = [cx.running_on(v), self.vcpus[v].queued.then_some(self.vcpus[v].processor)];
                for q in places.into_iter().flatten() {
                    if let Some(u) = owner[q] {
                        return Err(format!(
                            "siblings vCPU {u} and vCPU {v} of VM {} share pCPU {q}'s run queue",
                            dom.name
                        ));
                    }
                    owner[q] = Some(v);
                }
            }
        }
        Ok(())
    }
}
