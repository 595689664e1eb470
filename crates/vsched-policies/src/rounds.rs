//! Machinery shared by the round-based co-schedulers, `cosched` and `vds`: fair share by
//! per-domain virtual time weighted as Xen's Credit weights domains, and the hand-off of vCPUs between pCPUs when a round starts.
//! Not a policy itself.

use std::collections::VecDeque;

use vsched_model::{Cx, DomId, PcpuId, Time, VcpuId, NS_PER_MS};

/// Fixed-point scale of virtual time (CPU ns × scale / weight): exact for power-of-two
/// weights such as Xen's default 256, and fine-grained for any weight up to 65535.
const VTIME_SCALE: u128 = 1 << 20;

/// How long a vCPU counts as active after it last ran: Xen Credit's accounting period
/// (`CSCHED_ACCT_PERIOD`, 30 ms), after which `csched_acct` drops a vCPU that consumed
/// nothing from its domain's active list.
const ACTIVE_WINDOW_NS: Time = 30 * NS_PER_MS;

/// Per-domain virtual time: CPU time received divided by weight × active vCPUs. Charged
/// from the policy's own view of who runs where: whenever a pCPU reschedules and at every
/// plan (and, for `cosched`, an idle pCPU held for a gang to that gang: `charge_held`).
///
/// The share follows Xen's `csched_acct` (xen/common/sched_credit.c, Xen 4.1.2, the version
/// seed 000's co-schedulers were built into), which hands each domain credits in
/// proportion to `weight * active_vcpu_count`: a domain with more vCPUs at work gets more
/// CPU, as under `credit`. Approximated: Xen's active list holds vCPUs that consumed credit
/// recently and leaves a vCPU that has not for an accounting period; here a vCPU is active
/// while it is runnable (running or waiting) and for `ACTIVE_WINDOW_NS` after it last ran,
/// so that vCPUs which block briefly at every barrier still count, at least one per domain.
///
/// A domain's active vCPUs are counted as its runnable ones (a count the world keeps) and
/// those of its recent ones that are not runnable, so a charge looks at the vCPUs that ran
/// within the window, not at every vCPU of the domain (at 512 pCPUs Domain-0 has 512).
pub(crate) struct FairShare {
    vtime: Vec<u128>,
    /// Per vCPU: when it was last seen running (charged).
    last_ran: Vec<Option<Time>>,
    /// Per domain: its vCPUs seen running within the last `ACTIVE_WINDOW_NS`, in no order.
    recent: Vec<Vec<VcpuId>>,
    /// Per vCPU: its place in its domain's `recent`, if there.
    recent_at: Vec<Option<usize>>,
    /// Every `last_ran` set within the window, oldest first, with the vCPU's domain: where
    /// a vCPU's window ends.
    ran_at: VecDeque<(Time, VcpuId, DomId)>,
    /// Per pCPU: its current vCPU has been charged up to here.
    since: Vec<Time>,
    /// The lowest virtual time among domains runnable at the last plan (never decreases).
    vmin: u128,
}

impl FairShare {
    pub(crate) fn new(cx: &Cx) -> Self {
        FairShare {
            vtime: vec![0; cx.domains().len()],
            last_ran: vec![None; cx.n_vcpus()],
            recent: vec![Vec::new(); cx.domains().len()],
            recent_at: vec![None; cx.n_vcpus()],
            ran_at: VecDeque::new(),
            since: vec![cx.now(); cx.n_pcpus()],
            vmin: 0,
        }
    }

    /// A placeholder until `init` knows the host.
    pub(crate) fn empty() -> Self {
        FairShare {
            vtime: Vec::new(),
            last_ran: Vec::new(),
            recent: Vec::new(),
            recent_at: Vec::new(),
            ran_at: VecDeque::new(),
            since: Vec::new(),
            vmin: 0,
        }
    }

    pub(crate) fn vtime(&self, d: DomId) -> u128 {
        self.vtime[d]
    }

    /// Charges what `p` ran since the last charge to its domain. Call at the start of
    /// `pick_next(p)` (the engine still shows `prev` as `curr(p)` then).
    pub(crate) fn charge(&mut self, cx: &Cx, p: PcpuId) {
        self.charge_held(cx, p, None);
    }

    /// As `charge`, and an idle `p` held for domain `held_for` (a gang slot whose member is
    /// blocked) is charged to that domain: it was given the pCPU and left it idle.
    pub(crate) fn charge_held(&mut self, cx: &Cx, p: PcpuId, held_for: Option<DomId>) {
        let now = cx.now();
        if let Some(window_start) = now.checked_sub(ACTIVE_WINDOW_NS) {
            self.forget_until(window_start);
        }
        let receiver = match cx.curr(p) {
            Some(u) => {
                let d = cx.dom_of(u);
                self.ran(u, d, now);
                Some(d)
            }
            None => held_for,
        };
        if let Some(d) = receiver {
            let active = self.active(cx, d).max(1) as u128;
            let w = cx.domain(d).weight.max(1) as u128 * active;
            self.vtime[d] += (now - self.since[p]) as u128 * VTIME_SCALE / w;
        }
        self.since[p] = now;
    }

    /// `u` of domain `d` is seen running at `now`.
    fn ran(&mut self, u: VcpuId, d: DomId, now: Time) {
        if self.last_ran[u] == Some(now) {
            return;
        }
        self.last_ran[u] = Some(now);
        self.ran_at.push_back((now, u, d));
        if self.recent_at[u].is_none() {
            self.recent_at[u] = Some(self.recent[d].len());
            self.recent[d].push(u);
        }
    }

    /// Drops from `recent` the vCPUs last seen running at or before `t`: their window is over.
    fn forget_until(&mut self, t: Time) {
        while let Some(&(at, v, d)) = self.ran_at.front().filter(|&&(at, _, _)| at <= t) {
            self.ran_at.pop_front();
            if self.last_ran[v] != Some(at) {
                continue; // it ran again since: a later entry ends its window
            }
            let i = self.recent_at[v].take().expect("a vCPU within its window is in its domain's list");
            self.recent[d].swap_remove(i);
            if let Some(&moved) = self.recent[d].get(i) {
                self.recent_at[moved] = Some(i);
            }
        }
    }

    /// The vCPUs of `d` on Xen's active list, as approximated here (see the type's notes):
    /// runnable, or seen running within the window.
    fn active(&self, cx: &Cx, d: DomId) -> usize {
        let runnable = cx.runnable_vcpus(d);
        if runnable == cx.vcpus_of(d).len() {
            return runnable;
        }
        runnable + self.recent[d].iter().filter(|&&v| !cx.is_runnable(v)).count()
    }

    /// `charge_held` on every pCPU, `held_for(p)` saying whom an idle `p` is held for.
    pub(crate) fn charge_all(&mut self, cx: &Cx, held_for: impl Fn(PcpuId) -> Option<DomId>) {
        for p in 0..cx.n_pcpus() {
            self.charge_held(cx, p, held_for(p));
        }
    }

    /// At a plan: the floor for re-joining domains rises to the lowest runnable domain.
    pub(crate) fn settle(&mut self, runnable_doms: &[DomId]) {
        if let Some(m) = runnable_doms.iter().map(|&d| self.vtime[d]).min() {
            self.vmin = self.vmin.max(m);
        }
    }

    /// `v` woke: if it is its domain's only runnable vCPU, the domain re-joins at no less
    /// than the floor (it does not bank CPU time while asleep).
    pub(crate) fn woke(&mut self, cx: &Cx, v: VcpuId) {
        let d = cx.dom_of(v);
        if cx.runnable_vcpus(d) == usize::from(cx.is_runnable(v)) {
            self.vtime[d] = self.vtime[d].max(self.vmin);
        }
    }
}

/// The order in which to send the IPIs that start a round or period, all landing at the
/// same instant and handled in the order sent: `pcpus[i]` will take a vCPU now running on
/// `takes_from[i]`, if any; a pCPU goes after the one it takes from, so the vCPU is free by
/// then. Members of a cycle (two pCPUs swapping vCPUs) go last, in index order: one of them
/// waits for the other's release (`pick_next` hands off with one more IPI).
pub(crate) fn release_first(pcpus: &[PcpuId], takes_from: &[Option<PcpuId>]) -> Vec<PcpuId> {
    let mut order = Vec::with_capacity(pcpus.len());
    let mut done = vec![false; pcpus.len()];
    loop {
        let mut progress = false;
        for i in 0..pcpus.len() {
            let ready = match takes_from[i] {
                None => true,
                Some(q) => pcpus.iter().zip(&done).all(|(&r, &d)| r != q || d),
            };
            if !done[i] && ready {
                done[i] = true;
                order.push(pcpus[i]);
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    order.extend(pcpus.iter().zip(&done).filter(|(_, &d)| !d).map(|(&p, _)| p));
    order
}

/// Reschedules in flight, per pCPU: one sent and not yet handled (`kicked`), or a planned
/// vCPU the pCPU waits for because it still runs elsewhere (`awaiting`). A pCPU with either
/// is in transit: the plan and what runs may disagree there for a moment.
pub(crate) struct Handoff {
    kicked: Vec<bool>,
    awaiting: Vec<Option<VcpuId>>,
    /// How many pCPUs await a vCPU: a release when none does looks no further.
    n_awaiting: usize,
}

impl Handoff {
    pub(crate) fn new(pcpus: usize) -> Self {
        Handoff { kicked: vec![false; pcpus], awaiting: vec![None; pcpus], n_awaiting: 0 }
    }

    /// Reschedules `p`, as a co-scheduling signal if `co`.
    pub(crate) fn kick(&mut self, cx: &mut Cx, p: PcpuId, co: bool) {
        self.kicked[p] = true;
        if co {
            cx.co_signal(p);
        } else {
            cx.resched(p);
        }
    }

    pub(crate) fn in_transit(&self, p: PcpuId) -> bool {
        self.kicked[p] || self.awaiting[p].is_some()
    }

    /// A new plan: nothing is awaited any more.
    pub(crate) fn clear_awaiting(&mut self) {
        self.awaiting.iter_mut().for_each(|a| *a = None);
        self.n_awaiting = 0;
    }

    /// The first step of `pick_next(p)`: `p`'s pending reschedule has landed.
    pub(crate) fn landed(&mut self, p: PcpuId) {
        self.kicked[p] = false;
        if self.awaiting[p].take().is_some() {
            self.n_awaiting -= 1;
        }
    }

    /// What `p` runs now instead of the planned `next`: `next`, unless it still runs on
    /// another pCPU, in which case `p` waits for it (counted under `counter`) and idles until
    /// `release` kicks it.
    pub(crate) fn unless_elsewhere(
        &mut self,
        cx: &mut Cx,
        p: PcpuId,
        next: Option<VcpuId>,
        counter: &'static str,
    ) -> Option<VcpuId> {
        match next {
            Some(v) if cx.running_on(v).is_some_and(|q| q != p) => {
                if self.awaiting[p].replace(v).is_none() {
                    self.n_awaiting += 1;
                }
                cx.count(counter);
                None
            }
            other => other,
        }
    }

    /// `prev` leaves `p` for `next`: kick the pCPUs that wait for it; `co(q, u)` says
    /// whether that kick is a co-scheduling signal.
    pub(crate) fn release(
        &mut self,
        cx: &mut Cx,
        p: PcpuId,
        prev: Option<VcpuId>,
        next: Option<VcpuId>,
        co: impl Fn(&Cx, PcpuId, VcpuId) -> bool,
    ) {
        let Some(u) = prev.filter(|&u| next != Some(u) && self.n_awaiting > 0) else { return };
        for q in 0..self.awaiting.len() {
            if q != p && self.awaiting[q] == Some(u) {
                let signal = co(cx, q, u);
                self.kick(cx, q, signal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use vsched_model::hand_world::Bench;
    use vsched_model::VcpuState;

    use super::*;

    /// A domain's active vCPUs, counted from the window and the world's count of runnable
    /// ones, are those a scan of the whole domain finds (how they were counted before), over
    /// random wake-ups, halts, switches and charges, with windows that start and end.
    #[test]
    fn active_vcpus_from_the_window_match_a_scan_of_the_domain() {
        let (pcpus, vcpus) = (4, 70);
        let mut world = Bench::new(pcpus, vcpus);
        world.states.fill(VcpuState::Blocked);
        let mut fair = FairShare::new(&world.cx(None));
        let mut seed = 59u64;
        let mut below = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) % n as u64) as usize
        };
        for _ in 0..20_000 {
            // Steps of 3 ms, some of 0 (the same instant): ages reach the 30 ms window exactly.
            world.now += below(4) as Time * 3 * NS_PER_MS;
            let (p, v) = (below(pcpus), below(vcpus));
            match below(3) {
                0 if world.states[v] == VcpuState::Blocked => world.states[v] = VcpuState::Runnable,
                // The vCPU on `p` halts; it stays current until `p` schedules.
                1 => world.curr[p].into_iter().for_each(|u| world.states[u] = VcpuState::Blocked),
                // `p` schedules: charged first, as `pick_next` charges, then switched to `v`.
                2 => {
                    fair.charge(&world.cx(Some(p)), p);
                    if let Some(u) = world.curr[p].filter(|&u| world.states[u] != VcpuState::Blocked) {
                        world.states[u] = VcpuState::Runnable;
                    }
                    let next = (world.states[v] == VcpuState::Runnable).then_some(v);
                    next.into_iter().for_each(|v| world.states[v] = VcpuState::Running(p));
                    world.curr[p] = next;
                }
                _ => {}
            }
            let q = below(pcpus);
            fair.charge(&world.cx(Some(q)), q);
            let now = world.now;
            let scan = (0..vcpus)
                .filter(|&v| {
                    world.states[v] != VcpuState::Blocked
                        || fair.last_ran[v].is_some_and(|t| now - t < ACTIVE_WINDOW_NS)
                })
                .count();
            assert_eq!(fair.active(&world.cx(None), 0), scan, "at {now} ns");
        }
    }

    #[test]
    fn release_first_orders_chains_and_puts_cycles_last() {
        // 3 takes from 2, 2 from 1, 1 from nobody; 4 and 5 swap.
        let pcpus = [3, 2, 1, 4, 5];
        let takes_from = [Some(2), Some(1), None, Some(5), Some(4)];
        assert_eq!(release_first(&pcpus, &takes_from), vec![1, 2, 3, 4, 5]);
        // Taking from a pCPU that is not signalled (it keeps running) is no constraint.
        assert_eq!(release_first(&[0, 1], &[Some(7), None]), vec![0, 1]);
    }
}
