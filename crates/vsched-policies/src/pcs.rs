//! `pcs` — Partial Co-Scheduling on Credit (seed 004, Yu et al., §IV, Algorithm 1).
//!
//! # How it works
//! Hybrid co-scheduling (`cs.rs`) signals every pCPU and lets one CON VM co-schedule at a
//! time. PCS signals only the pCPUs that hold the chosen VM's vCPUs, so CON VMs on disjoint
//! pCPUs co-schedule at the same time (§IV-A). State (§IV-B):
//! - per pCPU `CoDom`: the VM this pCPU must co-schedule at its next scheduling, if any;
//! - per domain `CoCPUs`: the pCPUs holding its vCPUs (their run queues);
//! - global `CoWorkers`: pCPUs with a pending co-scheduling request;
//! - global `CoPartners`: pCPUs taking part in a co-scheduling that is not finished.
//!
//! Algorithm 1 on every scheduling of pCPU `p`: with a pending `CoDom`, run that VM's vCPU from
//! the run queue (or the first HIT vCPU), clear `p` from `CoWorkers`, and when none of the
//! VM's `CoCPUs` is still a worker, clear them from `CoPartners` (the operation is over).
//! Otherwise pick by Credit's rules; if the pick belongs to a CON VM and none of its other
//! `CoCPUs` is a partner of another operation, set `CoDom` on them, add them to `CoWorkers`
//! and `CoPartners` and raise the signal on them; if one is busy in another operation, run the
//! first HIT vCPU of the run queue instead. A VM that becomes CON is scattered so no two of
//! its vCPUs share a run queue (§IV-B: fewest vCPUs of this VM, then fewest CON vCPUs).
//!
//! # Readings of ambiguous points
//! - `CoCPUs` "records the VCPU distribution on online CPUs" and is "configured as soon as a
//!   domain becomes concurrent". vCPUs still move (work stealing, wake placement), so we read
//!   the distribution at launch time from each vCPU's current run queue, and keep that set
//!   for the operation so it ends on the same pCPUs it started on.
//! - Algorithm 1 clears the launching pCPU from the `CoCPUs` it signals, so the launcher is
//!   not a partner; we follow it.
//! - "Pick Next the first HIT VCPU in RUNQ" may find none: the pCPU idles, and looks again
//!   one Credit tick later (our addition, as in `cs`).
//! - A signal overrides Credit's rate limit.
//!
//! Suits: several concurrent VMs on one host (seed 004's dual-CON). Known weakness: more
//! bookkeeping on the critical path than `cs`; a VM's co-start still waits for its partners.

use vsched_model::{ConfigError, Cx, Decision, DomId, Params, PcpuId, Policy, PolicyInfo, VcpuId, VmType};

use crate::credit::{self, Credit};
use crate::credit_spread::Spread;
use crate::credit_variant::{CreditVariant, OnCredit};
use crate::cs::{commit_or_retry, first_hit};

struct Pcs {
    /// Per pCPU `CoDom`.
    co_dom: Vec<Option<DomId>>,
    /// Per domain: the `CoCPUs` of its current operation.
    co_cpus: Vec<Vec<bool>>,
    /// `CoWorkers` and `CoPartners`.
    co_workers: Vec<bool>,
    co_partners: Vec<bool>,
}

impl Pcs {
    /// The pCPUs whose run queues hold (or which run) a vCPU of `d`, except `p`.
    fn distribution(base: &Credit, cx: &Cx, d: DomId, p: PcpuId) -> Vec<bool> {
        let mut cpus = vec![false; cx.n_pcpus()];
        for v in cx.vcpus_of(d) {
            if cx.is_runnable(v) {
                let q = cx.running_on(v).unwrap_or(base.vcpus[v].processor);
                cpus[q] = true;
            }
        }
        cpus[p] = false;
        cpus
    }
}

impl CreditVariant for Pcs {
    fn init(&mut self, cx: &mut Cx) {
        let n = cx.n_pcpus();
        self.co_dom = vec![None; n];
        self.co_cpus = vec![vec![false; n]; cx.domains().len()];
        self.co_workers = vec![false; n];
        self.co_partners = vec![false; n];
    }

    /// Algorithm 1 (Partial Co-scheduling Kernel).
    fn pick_next(&mut self, base: &mut Credit, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        let pending = self.co_dom[p];
        let mut excluded = false;
        // "Put the current VCPU back to RUNQ(cur_cpu)"; a pending signal skips the rate limit.
        if let Some(keep) = base.put_prev(cx, p, prev, pending.is_none()) {
            return keep;
        }
        let next = if let Some(d) = pending {
            let next = base.first_queued(p, |u| cx.dom_of(u) == d).or_else(|| {
                excluded = true;
                first_hit(base, cx, p)
            });
            self.co_workers[p] = false;
            let cpus = &self.co_cpus[d];
            if !(0..cpus.len()).any(|q| cpus[q] && self.co_workers[q]) {
                // The operation is over: its pCPUs are free partners again.
                for (partner, &involved) in self.co_partners.iter_mut().zip(cpus) {
                    if involved {
                        *partner = false;
                    }
                }
            }
            self.co_dom[p] = None;
            next
        } else {
            match base.choose(cx, p) {
                Some(v) if cx.domain(cx.dom_of(v)).vm_type == VmType::Con => {
                    let d = cx.dom_of(v);
                    let cpus = Self::distribution(base, cx, d, p);
                    if (0..cpus.len()).any(|q| cpus[q] && self.co_partners[q]) {
                        cx.count("pcs.partner_busy");
                        excluded = true;
                        first_hit(base, cx, p)
                    } else {
                        if cpus.contains(&true) {
                            cx.co_launch(d);
                        }
                        for (q, &involved) in cpus.iter().enumerate() {
                            if involved {
                                self.co_dom[q] = Some(d);
                                self.co_workers[q] = true;
                                self.co_partners[q] = true;
                                cx.co_signal(q);
                            }
                        }
                        self.co_cpus[d] = cpus;
                        Some(v)
                    }
                }
                other => other,
            }
        };
        commit_or_retry(base, cx, p, prev, next, excluded)
    }

    fn check(&self, _base: &Credit, _cx: &Cx) -> Result<(), String> {
        for q in 0..self.co_workers.len() {
            if self.co_workers[q] && !self.co_partners[q] {
                return Err(format!("pCPU {q} is a co-scheduling worker but not a partner"));
            }
            if self.co_workers[q] != self.co_dom[q].is_some() {
                return Err(format!("pCPU {q}: CoWorkers and CoDom disagree"));
            }
        }
        Ok(())
    }
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    let variant = Pcs { co_dom: Vec::new(), co_cpus: Vec::new(), co_workers: Vec::new(), co_partners: Vec::new() };
    Ok(Box::new(OnCredit { base: Credit::from_params(params, Spread::Con)?, variant }))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "pcs",
    description: "partial co-scheduling on Credit (seed 004): signals only the pCPUs holding the CON VM's vCPUs",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: credit::PARAMS,
    build,
};
