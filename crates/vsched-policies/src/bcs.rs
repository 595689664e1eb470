//! `bcs` — Boost Co-Scheduling on Credit (seed 004, Yu et al., §V, Algorithm 2).
//!
//! # How it works
//! BCS co-schedules without signals. It adds a priority COS above BOOST. When Credit picks a
//! vCPU of a CON VM whose priority is not COS, BCS raises that VM's other active vCPUs to
//! COS, so each of their pCPUs picks them (or keeps them) at its own next scheduling; a COS
//! vCPU that is picked falls back to the default priority (UNDER). No IPI is sent: the siblings start
//! when their pCPUs next reschedule, so starts are only approximately aligned (seed 004 Fig. 6
//! measures that skew; our `costart_skew_us_*` metrics are the same measurement). A VM that
//! becomes CON is scattered as in PCS (§V-B).
//!
//! # Readings of ambiguous points
//! - Algorithm 2 boosts "Next.Dom.ActiveVCPUs", and §V-B "all the VCPUs in this concurrent
//!   domain". We take Credit's active list (`sdom->active_vcpu` in Xen 4.0.1's
//!   `sched_credit.c`: the vCPUs being charged, running or waiting), less `Next` itself. A
//!   waiting sibling is re-queued at COS, ahead of everything on its pCPU. A running one
//!   keeps running with COS: when its slice ends, `csched_schedule` puts it back in its run
//!   queue by priority, at the head, and picks it again (it then falls to UNDER), so it
//!   stays on its pCPU beside the sibling just picked instead of giving way. A blocked
//!   sibling still on the list wakes at COS (Credit's wake path boosts UNDER vCPUs only).
//! - A launch (seed 004 Fig. 5's "co-scheduling frequency") is a pass through the boosting
//!   branch that raised at least one sibling to COS: §V-B's "a co-scheduling operation need
//!   to be launched" when a CON vCPU is picked at another priority, with nothing to launch
//!   when no sibling is active or every one already has COS. `bcs.boosted_waiting` and
//!   `bcs.boosted_running` count the siblings raised, by their state at the launch.
//! - Credit's accounting (`csched_acct`) resets priorities every 30 ms, COS included, as
//!   patching a few lines into Credit (§V-A) would.
//!
//! Suits: several CON VMs with synchronization coarse enough to tolerate sub-slice skew.
//! Known weakness: imprecise alignment; seed 004 sees BT (cross-domain) suffer under BCS.

use vsched_model::{ConfigError, Cx, Decision, Params, PcpuId, Policy, PolicyInfo, VcpuId, VmType};

use crate::credit::{self, Credit, PRI_UNDER};
use crate::credit_spread::Spread;
use crate::credit_variant::{CreditVariant, OnCredit};

/// The co-scheduling priority, above BOOST (`PRI_BOOST` = 0).
const PRI_COS: i8 = 1;

struct Bcs;

impl CreditVariant for Bcs {
    /// BCS keeps no state of its own: it only raises queued siblings to COS, and Credit
    /// resets a removed vCPU's priority with the rest of its state.
    fn supports_vm_lifecycle(&self) -> bool {
        true
    }

    /// Algorithm 2 (Boost Co-scheduling Kernel).
    fn pick_next(&mut self, base: &mut Credit, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        if let Some(keep) = base.put_prev(cx, p, prev, true) {
            return keep;
        }
        let next = base.choose(cx, p);
        if let Some(v) = next {
            let d = cx.dom_of(v);
            if base.pri[v] == PRI_COS {
                base.pri[v] = PRI_UNDER;
            } else if cx.domain(d).vm_type == VmType::Con {
                // Algorithm 2's else branch: every other active vCPU of the domain to COS.
                let siblings: Vec<VcpuId> =
                    cx.vcpus_of(d).filter(|&u| u != v && base.is_active(u) && base.pri[u] != PRI_COS).collect();
                if !siblings.is_empty() {
                    cx.co_launch(d);
                }
                for u in siblings {
                    if base.vcpus[u].queued {
                        // Re-queue at its new priority (the head of its run queue, FIFO among COS).
                        let q = base.vcpus[u].processor;
                        base.runq_remove(u);
                        base.pri[u] = PRI_COS;
                        base.runq_insert(cx, q, u);
                        cx.count("bcs.boosted_waiting");
                    } else {
                        base.pri[u] = PRI_COS;
                        if cx.running_on(u).is_some() {
                            cx.count("bcs.boosted_running");
                        }
                    }
                }
            }
        }
        base.commit(cx, p, prev, next)
    }
}

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(Box::new(OnCredit { base: Credit::from_params(params, Spread::Con)?, variant: Bcs }))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "bcs",
    description: "boost co-scheduling on Credit (seed 004): a CON VM's waiting vCPUs get a COS priority, no IPIs",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: credit::PARAMS,
    build,
};
