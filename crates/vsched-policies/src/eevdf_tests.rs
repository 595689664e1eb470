//! `Eevdf::yield_to` on a hand-driven world (the test calls the callbacks; the clock stays
//! at 0). A PLE handler on EEVDF will call it, as `kvm-dy` calls `Cfs::yield_to`; until
//! then these tests are its only caller.
//!
//! Facts used: with `tunable_scaling = "none"` a slice is 0.75 ms; each vCPU starts at
//! vruntime 0 (V of its queue) with its deadline at 0.375 ms; the pick takes the earliest
//! eligible deadline, the vCPU queued first on ties, and the running vCPU keeps its pCPU
//! while it has the deadline it was picked with (RUN_TO_PARITY).

use std::collections::BTreeMap;

use vsched_engine::{RngStreams, StreamRng};
use vsched_model::{
    Cx, DomId, DomainInfo, Params, PcpuId, Policy, Time, Value, VcpuId, VcpuState, VmType, World, NS_PER_US,
};

use super::{from_params, Eevdf, PARAMS};
use crate::cfs::YieldTo;

/// One host, one domain of weight 256; the test applies decisions itself.
struct Hand {
    here: Option<PcpuId>,
    domain: DomainInfo,
    states: Vec<VcpuState>,
    curr: Vec<Option<VcpuId>>,
    /// pCPUs asked to reschedule and not yet scheduled, in order.
    resched: Vec<PcpuId>,
    rng: StreamRng,
}

impl World for Hand {
    fn now(&self) -> Time {
        0
    }
    fn n_pcpus(&self) -> usize {
        self.curr.len()
    }
    fn socket_of(&self, _p: PcpuId) -> usize {
        0
    }
    fn core_of(&self, p: PcpuId) -> usize {
        p
    }
    fn n_vcpus(&self) -> usize {
        self.states.len()
    }
    fn n_domains(&self) -> usize {
        1
    }
    fn domain(&self, _d: DomId) -> &DomainInfo {
        &self.domain
    }
    fn dom_of(&self, _v: VcpuId) -> DomId {
        0
    }
    fn vcpu_index(&self, v: VcpuId) -> usize {
        v
    }
    fn state(&self, v: VcpuId) -> VcpuState {
        self.states[v]
    }
    fn last_pcpu(&self, _v: VcpuId) -> Option<PcpuId> {
        None
    }
    fn curr(&self, p: PcpuId) -> Option<VcpuId> {
        self.curr[p]
    }
    fn here(&self) -> Option<PcpuId> {
        self.here
    }
    fn resched_pending(&self, p: PcpuId) -> bool {
        self.resched.contains(&p)
    }
    fn guest_in_kernel(&self, _v: VcpuId) -> bool {
        false
    }
    fn guest_spinning(&self, _v: VcpuId) -> bool {
        false
    }
    fn pending_interrupt(&self, _v: VcpuId) -> bool {
        false
    }
    fn posted_interrupts(&self) -> bool {
        false
    }
    fn resched(&mut self, p: PcpuId) -> bool {
        if !self.resched.contains(&p) {
            self.resched.push(p);
        }
        Some(p) != self.here
    }
    fn co_signal(&mut self, p: PcpuId) {
        self.resched(p);
    }
    fn co_launch(&mut self, _d: DomId) {}
    fn set_timer(&mut self, _at: Time, _id: u64) {}
    fn count(&mut self, _name: &'static str) {}
    fn rng(&mut self) -> &mut StreamRng {
        &mut self.rng
    }
}

impl Hand {
    /// `eevdf` (with `pick_buddy` as given) on `pcpus` pCPUs, its `vcpus` vCPUs inserted in
    /// order, then pCPUs `first` scheduled.
    fn start(pcpus: usize, vcpus: usize, pick_buddy: bool, first: &[PcpuId]) -> (Hand, Eevdf) {
        let given: BTreeMap<String, Value> = [
            ("tunable_scaling".to_string(), Value::Str("none".into())),
            ("pick_buddy".to_string(), Value::Bool(pick_buddy)),
        ]
        .into();
        let mut policy = from_params(&Params::check("scheduler", PARAMS, &given).unwrap()).unwrap();
        let domain = DomainInfo {
            name: "vm".into(),
            vcpus,
            weight: 256,
            cap: 0,
            vm_type: VmType::Hit,
            first_vcpu: 0,
            online: true,
            driver: false,
            rx_packets: 0,
            pv: Default::default(),
            slice_request_ns: None,
        };
        let mut hand = Hand {
            here: None,
            domain,
            states: vec![VcpuState::Runnable; vcpus],
            curr: vec![None; pcpus],
            resched: Vec::new(),
            rng: RngStreams::new(1).stream(0),
        };
        policy.init(&mut Cx::new(&mut hand));
        for v in 0..vcpus {
            policy.vcpu_insert(&mut Cx::new(&mut hand), v);
        }
        for &p in first {
            hand.schedule(&mut policy, p);
        }
        hand.resched.clear();
        (hand, policy)
    }

    /// `p` picks; the decision is applied.
    fn schedule(&mut self, policy: &mut Eevdf, p: PcpuId) -> Option<VcpuId> {
        self.here = Some(p);
        self.resched.retain(|&q| q != p);
        let prev = self.curr[p];
        let next = policy.pick_next(&mut Cx::new(self), p, prev).next;
        if let Some(u) = prev.filter(|&u| Some(u) != next) {
            self.states[u] = VcpuState::Runnable;
        }
        if let Some(v) = next {
            self.states[v] = VcpuState::Running(p);
        }
        self.curr[p] = next;
        next
    }

    /// `me`, running, yields to `target`.
    fn yield_to(&mut self, policy: &mut Eevdf, me: VcpuId, target: VcpuId) -> YieldTo {
        self.here = self.curr.iter().position(|&c| c == Some(me));
        policy.yield_to(&mut Cx::new(self), me, target)
    }
}

#[test]
fn yield_to_fails_with_esrch_when_both_queues_hold_one_vcpu() {
    // vCPU 0 on pCPU 0 (running), vCPU 1 queued alone on pCPU 1, which has not picked yet.
    let (mut hand, mut eevdf) = Hand::start(2, 2, false, &[0]);
    assert_eq!(hand.yield_to(&mut eevdf, 0, 1), YieldTo::Esrch);
    assert!(hand.resched.is_empty());
}

#[test]
fn a_yielder_sharing_its_queue_moves_its_deadline_a_slice_later() {
    // One pCPU, vCPUs 0 (running), 1 and 2, all at vruntime 0 with deadline 0.375 ms. vCPU 0
    // yields to 2: its deadline moves a slice later, to 1.125 ms (`yield_task_fair`), which
    // ends its protection; the pCPU reschedules. Linux 6.12 then ignores the next buddy: the
    // earliest eligible deadline is vCPU 1's (queued before 2). With PICK_BUDDY, vCPU 2 runs.
    for (pick_buddy, runs) in [(false, 1), (true, 2)] {
        let (mut hand, mut eevdf) = Hand::start(1, 3, pick_buddy, &[0]);
        assert_eq!(hand.curr[0], Some(0));
        assert_eq!(hand.yield_to(&mut eevdf, 0, 2), YieldTo::Yielded);
        assert_eq!(eevdf.se[0].deadline, 1125 * NS_PER_US as i64);
        assert_eq!(hand.resched, vec![0]);
        assert_eq!(hand.schedule(&mut eevdf, 0), Some(runs), "pick_buddy = {pick_buddy}");
    }
}

#[test]
fn a_remote_target_becomes_its_queues_next_buddy_and_both_pcpus_reschedule() {
    // Two pCPUs: vCPUs 0 and 2 on pCPU 0 (0 runs, queued first), vCPU 1 alone on pCPU 1.
    // vCPU 1 yields to 2: both pCPUs reschedule, the target's first; vCPU 1, alone, keeps
    // its deadline (`yield_task_fair` returns when nr_running is 1) and runs on. On pCPU 0,
    // vCPU 0 is eligible and protected, so it runs on unless the next buddy counts.
    for (pick_buddy, runs) in [(false, 0), (true, 2)] {
        let (mut hand, mut eevdf) = Hand::start(2, 3, pick_buddy, &[0, 1]);
        assert_eq!(hand.yield_to(&mut eevdf, 1, 2), YieldTo::Yielded);
        assert_eq!(hand.resched, vec![0, 1]);
        assert_eq!(eevdf.se[1].deadline, 375 * NS_PER_US as i64);
        assert_eq!(hand.schedule(&mut eevdf, 0), Some(runs), "pick_buddy = {pick_buddy}");
        assert_eq!(hand.schedule(&mut eevdf, 1), Some(1));
    }
}
