//! `cosched`'s index of the HIT vCPUs that may be waiting to fill a slot, so that a pick
//! finds the one of lowest `(virtual time, vCPU)` without scanning every vCPU of the host
//! (issue 59: at 512 pCPUs that scan was most of an event's cost).
//!
//! The index holds candidates, a superset checked on the way out: the policy adds a vCPU
//! wherever it may have become a waiting filler (woken, descheduled, inserted, left
//! unplanned by a plan), and a lookup drops each candidate it finds is not one (running,
//! blocked, planned). An add too many costs a lookup a check, never its answer; only a
//! missing add could change the answer, so each way into being a filler has its hook
//! (`Cosched::note_filler`'s callers).
//!
//! Candidates are grouped by domain, as virtual time is per domain: the domains with a
//! candidate are queued by `(virtual time, first vCPU)`, which puts their vCPUs in
//! `(virtual time, vCPU)` order, the order of `pick_filler`'s scan, since a domain's vCPUs
//! are consecutive ids. Virtual time only grows (`FairShare` charges and raises it; a fresh
//! one comes with a fresh index), so a queued domain's key is never above its current one:
//! it is brought up to date when it reaches the head, and a head that is up to date is the
//! domain of lowest virtual time among those with a candidate.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;

use vsched_model::{DomId, VcpuId};

use crate::pcpu_set::VcpuSet;

pub(crate) struct Fillers {
    candidates: VcpuSet,
    /// The domains with a candidate, each once: `(virtual time when queued, first vCPU,
    /// domain)`, lowest first.
    queue: BinaryHeap<Reverse<(u128, VcpuId, DomId)>>,
    /// Per domain: in `queue`.
    queued: Vec<bool>,
}

impl Fillers {
    /// An empty index for `vcpus` vCPUs in `domains` domains.
    pub(crate) fn new(vcpus: usize, domains: usize) -> Self {
        Fillers { candidates: VcpuSet::new(vcpus), queue: BinaryHeap::new(), queued: vec![false; domains] }
    }

    /// Forgets every candidate.
    pub(crate) fn clear(&mut self) {
        self.candidates.clear();
        self.queue.clear();
        self.queued.fill(false);
    }

    /// `v` of domain `d` (vCPUs `vcpus`, virtual time `vtime`) may be a waiting filler now.
    pub(crate) fn add(&mut self, v: VcpuId, d: DomId, vcpus: Range<VcpuId>, vtime: u128) {
        self.candidates.insert(v);
        if !self.queued[d] {
            self.queued[d] = true;
            self.queue.push(Reverse((vtime, vcpus.start, d)));
        }
    }

    /// The waiting filler of lowest `(vtime(its domain), vCPU)`, among the candidates that
    /// `is_filler` confirms; those it refutes are dropped. `vtime` must not have decreased
    /// since a domain was queued.
    pub(crate) fn lowest(
        &mut self,
        vtime: impl Fn(DomId) -> u128,
        vcpus_of: impl Fn(DomId) -> Range<VcpuId>,
        mut is_filler: impl FnMut(VcpuId) -> bool,
    ) -> Option<VcpuId> {
        while let Some(&Reverse((queued_at, first, d))) = self.queue.peek() {
            let current = vtime(d);
            debug_assert!(queued_at <= current, "virtual time fell while domain {d} was queued");
            if queued_at != current {
                self.queue.pop();
                self.queue.push(Reverse((current, first, d)));
                continue;
            }
            let mut rest = vcpus_of(d);
            while let Some(v) = self.candidates.first_in_range(rest.clone()) {
                if is_filler(v) {
                    return Some(v);
                }
                self.candidates.remove(v);
                rest.start = v + 1;
            }
            self.queue.pop();
            self.queued[d] = false;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed pseudo-random sequence (an LCG): `below(n)` in `0..n`.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n as u64) as usize
        }
    }

    /// Random changes to which vCPUs wait as fillers and to the domains' virtual times, with
    /// an add wherever a vCPU starts to wait (as `cosched`'s hooks do) and no removal:
    /// every lookup must answer as a scan of all vCPUs does.
    #[test]
    fn lookups_answer_as_a_scan_of_every_vcpu_over_random_changes() {
        let mut rng = Lcg(59);
        for _ in 0..40 {
            let domains = 1 + rng.below(12);
            // Domain ids do not follow vCPU ids: the ranges are laid out in a shuffled order.
            let mut layout: Vec<DomId> = (0..domains).collect();
            for i in (1..domains).rev() {
                layout.swap(i, rng.below(i + 1));
            }
            let mut vcpus_of = vec![0..0; domains];
            let mut next = 0;
            for &d in &layout {
                let width = 1 + rng.below(70); // some domains span more than one 64-bit word
                vcpus_of[d] = next..next + width;
                next += width;
            }
            let n = next;
            let dom_of: Vec<DomId> =
                (0..n).map(|v| (0..domains).find(|&d| vcpus_of[d].contains(&v)).unwrap()).collect();
            let mut vtime = vec![0u128; domains];
            let mut waiting = vec![false; n];
            let mut index = Fillers::new(n, domains);
            for _ in 0..3000 {
                match rng.below(10) {
                    0..=3 => {
                        let v = rng.below(n);
                        waiting[v] = true;
                        index.add(v, dom_of[v], vcpus_of[dom_of[v]].clone(), vtime[dom_of[v]]);
                    }
                    4 => {
                        // An add for a vCPU that does not wait (a hook's superset).
                        let v = rng.below(n);
                        index.add(v, dom_of[v], vcpus_of[dom_of[v]].clone(), vtime[dom_of[v]]);
                    }
                    5..=6 => waiting[rng.below(n)] = false,
                    7..=8 => vtime[rng.below(domains)] += rng.below(3) as u128, // ties included
                    _ => {
                        // A plan: every waiting vCPU added afresh.
                        index.clear();
                        for v in (0..n).filter(|&v| waiting[v]) {
                            index.add(v, dom_of[v], vcpus_of[dom_of[v]].clone(), vtime[dom_of[v]]);
                        }
                    }
                }
                let scan = (0..n).filter(|&v| waiting[v]).min_by_key(|&v| (vtime[dom_of[v]], v));
                let found = index.lowest(|d| vtime[d], |d| vcpus_of[d].clone(), |v| waiting[v]);
                assert_eq!(found, scan);
            }
        }
    }
}
