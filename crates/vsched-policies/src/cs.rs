//! `cs` — hybrid co-scheduling on Credit, as seed 004 (Yu et al., "Hybrid Co-scheduling
//! Optimizations for Concurrent Applications in Virtualized Environments") implements and
//! measures it (§II-B, the "CS" of Figs. 3–5), after Weng et al.'s §4.3 (seed 003).
//!
//! # How it works
//! Credit (`credit.rs`) schedules every VM; a CON VM's vCPUs are scattered so no two share a
//! run queue. When a pCPU's normal Credit choice is a vCPU of a CON VM, it takes the global
//! co-scheduling lock (Weng's `syn_domain_id`), records the pCPUs that must take part
//! (`syn_map`) and raises the co-scheduling signal on **every other online pCPU**: seed 004
//! §II-B: "when a CPU launches co-scheduling, it raises the co-scheduling signals to all CPUs
//! in the system, and forces other CPUs to reschedule regardless their own scheduling
//! status". A signalled pCPU puts its current vCPU back and runs the CON VM's vCPU from its
//! run queue; a pCPU without one runs the first HIT vCPU of its queue, or idles. When the
//! last signalled pCPU has rescheduled, the operation ends and the lock is free. While it is
//! held, no other CON VM can launch: a pCPU whose choice is another CON vCPU runs its first
//! HIT vCPU instead. That exclusiveness is the contention seed 004 measures.
//!
//! `cds` (co-descheduling) is this policy with one more rule; see `cds.rs`.
//!
//! # Readings of ambiguous points
//! - When the co-scheduling operation ends: Weng's skeleton releases its spin lock right
//!   after raising the softirq and never says when `syn_domain_id` clears. We clear it when
//!   every signalled pCPU has rescheduled (as seed 004's `CoWorkers` does for PCS).
//! - A signalled pCPU whose run queue has no vCPU of the co-scheduled VM (it is blocked, or
//!   runs elsewhere) runs its first HIT vCPU, as Algorithm 1 of seed 004 does for PCS.
//! - A signal overrides Credit's rate limit ("regardless their own scheduling status").
//! - A pCPU that idles only because of the co-scheduling rules (no co-scheduled vCPU and no
//!   HIT vCPU in its queue) looks again one Credit tick (10 ms) later. Xen would leave it
//!   idle until some wake-up tickles it, which on a real host (Dom0, timers) comes within
//!   milliseconds; with only CPU-bound guests it could starve a CON VM forever.
//!
//! Suits: one concurrent VM among throughput VMs. Known weakness: with two or more CON VMs
//! they co-schedule in turn, never together, and every launch disturbs all pCPUs.

use vsched_model::{ConfigError, Cx, Decision, DomId, Params, PcpuId, Policy, PolicyInfo, VcpuId, VmType};

use crate::credit::{self, Credit};
use crate::credit_spread::Spread;
use crate::credit_variant::{CreditVariant, OnCredit};

/// Global co-scheduling state (Weng §4.3).
pub(crate) struct CoSched {
    /// `syn_domain_id`: the VM being co-scheduled, while signalled pCPUs are pending.
    syn_domain: Option<DomId>,
    /// `syn_map`: signalled pCPUs that have not rescheduled yet.
    syn_map: Vec<bool>,
    /// cds: a pCPU must deschedule this VM's vCPU (co-descheduling signal).
    codesched: Vec<Option<DomId>>,
    /// Whether this is `cds`.
    co_deschedule: bool,
}

impl CoSched {
    pub(crate) fn new(co_deschedule: bool) -> Self {
        CoSched { syn_domain: None, syn_map: Vec::new(), codesched: Vec::new(), co_deschedule }
    }

    /// `p` handled its signal; the last one ends the operation and frees the lock.
    fn signal_done(&mut self, p: PcpuId) {
        self.syn_map[p] = false;
        if !self.syn_map.contains(&true) {
            self.syn_domain = None;
        }
    }

    /// Launch co-scheduling of `d` from `p`: signal every other online pCPU.
    fn launch(&mut self, cx: &mut Cx, p: PcpuId, d: DomId) {
        cx.co_launch(d);
        self.syn_domain = Some(d);
        for q in 0..self.syn_map.len() {
            if q != p {
                self.syn_map[q] = true;
                cx.co_signal(q);
            }
        }
        if !self.syn_map.contains(&true) {
            self.syn_domain = None;
        }
    }
}

impl CreditVariant for CoSched {
    fn init(&mut self, cx: &mut Cx) {
        self.syn_map = vec![false; cx.n_pcpus()];
        self.codesched = vec![None; cx.n_pcpus()];
    }

    fn pick_next(&mut self, base: &mut Credit, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        let signalled = self.syn_domain.is_some() && self.syn_map[p];
        let mut excluded = false;
        let codesched = self.codesched[p].take();
        if let Some(keep) = base.put_prev(cx, p, prev, !signalled && codesched.is_none()) {
            return keep;
        }
        let next = if signalled {
            // Participate: run the co-scheduled VM's vCPU queued here (Weng §4.3).
            let d = self.syn_domain.expect("signalled");
            let next = base.first_queued(p, |u| cx.dom_of(u) == d).or_else(|| {
                excluded = true;
                first_hit(base, cx, p)
            });
            self.signal_done(p);
            next
        } else {
            // Credit's choice; with a co-descheduling signal, never the descheduled VM.
            let choice = match codesched {
                Some(d) => base.first_queued(p, |u| cx.dom_of(u) != d),
                None => base.choose(cx, p),
            };
            match choice {
                Some(v) if cx.domain(cx.dom_of(v)).vm_type == VmType::Con && cx.domain(cx.dom_of(v)).vcpus > 1 => {
                    if self.syn_domain.is_none() {
                        self.launch(cx, p, cx.dom_of(v));
                        Some(v)
                    } else {
                        // Another CON VM holds the lock: exclusiveness (seed 004 §II-B 1).
                        cx.count("cs.lock_busy");
                        excluded = true;
                        first_hit(base, cx, p)
                    }
                }
                other => other,
            }
        };
        if self.co_deschedule && codesched.is_none() {
            self.co_deschedule_siblings(cx, p, prev, next);
        }
        // A co-descheduled pCPU with nothing else to run looks again one tick later, as a
        // pCPU left idle by the co-scheduling rules does.
        excluded |= codesched.is_some() && next.is_none();
        commit_or_retry(base, cx, p, prev, next, excluded)
    }

    fn check(&self, _base: &Credit, _cx: &Cx) -> Result<(), String> {
        if self.syn_domain.is_none() && self.syn_map.contains(&true) {
            return Err("pCPUs are signalled but no VM is being co-scheduled".into());
        }
        Ok(())
    }
}

impl CoSched {
    /// cds: `prev`, a vCPU of a CON VM, leaves this pCPU (preempted, yielded, blocked or
    /// finished: anything but being chosen again), so every sibling running elsewhere is
    /// descheduled too: seed 004 §VII, "the concurrent VCPUs need to not only be scheduled
    /// concurrently but also be descheduled concurrently". Not called when `prev` left
    /// because of a co-descheduling signal: that operation is already under way.
    fn co_deschedule_siblings(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>, next: Option<VcpuId>) {
        let Some(u) = prev else { return };
        let d = cx.dom_of(u);
        if next == Some(u) || cx.domain(d).vm_type != VmType::Con {
            return;
        }
        let mut any = false;
        for w in cx.vcpus_of(d) {
            if let Some(q) = cx.running_on(w) {
                if q != p && !self.syn_map[q] {
                    self.codesched[q] = Some(d);
                    cx.co_signal(q);
                    any = true;
                }
            }
        }
        if any {
            cx.count("cds.codeschedules");
        }
    }
}

/// The first HIT vCPU in `p`'s run queue (seed 004 Algorithm 1: "Pick Next the first HIT
/// VCPU in RUNQ"), or none.
pub(crate) fn first_hit(base: &Credit, cx: &Cx, p: PcpuId) -> Option<VcpuId> {
    base.first_queued(p, |u| cx.domain(cx.dom_of(u)).vm_type == VmType::Hit)
}

/// Commits `next`; a pCPU that a co-scheduling rule (`excluded`) leaves idle looks again
/// after one tick (see the header).
pub(crate) fn commit_or_retry(
    base: &mut Credit,
    cx: &mut Cx,
    p: PcpuId,
    prev: Option<VcpuId>,
    next: Option<VcpuId>,
    excluded: bool,
) -> Decision {
    let d = base.commit(cx, p, prev, next);
    if excluded && d.next.is_none() {
        cx.count("cosched.idle_retries");
        Decision { next: None, slice_ns: Some(base.tick_ns()) }
    } else {
        d
    }
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(OnCredit { base: Credit::from_params(params, Spread::Con)?, variant: CoSched::new(false) }))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "cs",
    description: "hybrid co-scheduling on Credit (seed 004's CS): one CON VM at a time, signals to all pCPUs",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: credit::PARAMS,
    build,
};
