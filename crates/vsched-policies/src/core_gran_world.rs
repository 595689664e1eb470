//! The world as a policy sees it under Xen's `sched-gran=core|socket` (`core_gran.rs`): one
//! pCPU per scheduling resource (a core, or a socket) and one vCPU per scheduling unit.
//!
//! Xen's schedulers have scheduled `struct sched_unit`s onto `struct sched_resource`s since
//! 4.13; with `sched-gran=cpu` each unit holds one vCPU and each resource one pCPU, which is
//! why Credit and credit2 run unchanged at any granularity. vsched does the same: [`UnitWorld`]
//! is a [`World`] whose pCPUs are the resources and whose vCPUs are the units, built over the
//! physical world, so that `credit.rs` and `credit2*.rs` run unchanged on it.
//!
//! What each fact of a unit is (Xen 4.22, `xen/common/sched/private.h` and `core.c`):
//! - runnable if any member is (`unit_runnable`); running on resource `r` while it holds `r`
//!   (`sr->curr`), whatever its members do;
//! - in kernel, spinning, or with an interrupt pending if any member is (Credit and credit2
//!   read none of these; they are defined for completeness);
//! - a unit's `vcpu_index` is its rank in its domain (`unit_id / granularity`).

use vsched_engine::{StreamRng, Time};
use vsched_model::trace::CounterOf;
use vsched_model::{Cx, DomId, DomainInfo, PcpuId, VcpuId, VcpuState, World};

/// A rendezvous in progress on one resource (`sched_wait_rendezvous_in`).
pub(crate) struct Rdv {
    /// Which of the resource's threads have arrived, by index.
    pub(crate) arrived: Vec<bool>,
    pub(crate) count: usize,
}

/// The units, the resources, and which unit holds which resource.
pub(crate) struct Map {
    /// Physical pCPU → its resource, and its index in it (`sched_res_idx`).
    pub(crate) res_of: Vec<usize>,
    pub(crate) idx_of: Vec<usize>,
    /// Resource → its threads, in order; thread 0 is the resource's master (`master_cpu`).
    pub(crate) threads: Vec<Vec<PcpuId>>,
    /// Physical vCPU → its unit.
    pub(crate) unit_of: Vec<VcpuId>,
    /// Unit → its member for each thread index (`unit2vcpu_cpu`: member `k` runs on thread `k`
    /// of the resource); `None` past the domain's last vCPU.
    pub(crate) members: Vec<Vec<Option<VcpuId>>>,
    pub(crate) unit_dom: Vec<DomId>,
    pub(crate) unit_index: Vec<usize>,
    /// The domains as the policy sees them: `vcpus` and `first_vcpu` count units.
    pub(crate) vdoms: Vec<DomainInfo>,
    /// Unit → the resource it holds, and the one it last held.
    pub(crate) unit_res: Vec<Option<usize>>,
    pub(crate) unit_last: Vec<Option<usize>>,
    /// Resource → the unit that holds it (`sr->curr`; `None` is the idle unit).
    pub(crate) res_unit: Vec<Option<VcpuId>>,
    pub(crate) rdv: Vec<Option<Rdv>>,
}

impl Map {
    /// The units of the domains of `cx`'s world, `gran` threads per resource, the resource of a
    /// pCPU being what `resource_of` says (its core, or its socket).
    pub(crate) fn new(cx: &Cx, gran: usize, resource_of: impl Fn(&Cx, PcpuId) -> usize) -> Map {
        let n = cx.n_pcpus();
        let mut res_ids: Vec<usize> = Vec::new();
        let mut threads: Vec<Vec<PcpuId>> = Vec::new();
        let (mut res_of, mut idx_of) = (vec![0; n], vec![0; n]);
        for p in 0..n {
            let id = resource_of(cx, p);
            let r = match res_ids.iter().position(|&x| x == id) {
                Some(r) => r,
                None => {
                    res_ids.push(id);
                    threads.push(Vec::new());
                    res_ids.len() - 1
                }
            };
            res_of[p] = r;
            idx_of[p] = threads[r].len();
            threads[r].push(p);
        }
        let mut unit_of = vec![0; cx.n_vcpus()];
        let (mut members, mut unit_dom, mut unit_index, mut vdoms) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (d, info) in cx.domains().enumerate() {
            let first = members.len();
            // `sched_alloc_unit`: the vCPUs with equal `vcpu_id / gran` share a unit.
            for rank in 0..info.vcpus.div_ceil(gran) {
                let mut m = vec![None; gran];
                for (k, slot) in m.iter_mut().enumerate() {
                    let i = rank * gran + k;
                    if i < info.vcpus {
                        *slot = Some(info.first_vcpu + i);
                        unit_of[info.first_vcpu + i] = members.len();
                    }
                }
                members.push(m);
                unit_dom.push(d);
                unit_index.push(rank);
            }
            let mut v = info.clone();
            v.first_vcpu = first;
            v.vcpus = members.len() - first;
            vdoms.push(v);
        }
        let units = members.len();
        let resources = threads.len();
        Map {
            res_of,
            idx_of,
            threads,
            unit_of,
            members,
            unit_dom,
            unit_index,
            vdoms,
            unit_res: vec![None; units],
            unit_last: vec![None; units],
            res_unit: vec![None; resources],
            rdv: (0..resources).map(|_| None).collect(),
        }
    }

    /// Copies what changes during a run (type, existence, packets) from the physical domains.
    pub(crate) fn refresh(&mut self, cx: &Cx) {
        for (v, info) in self.vdoms.iter_mut().zip(cx.domains()) {
            v.vm_type = info.vm_type;
            v.online = info.online;
            v.rx_packets = info.rx_packets;
            v.weight = info.weight;
            v.cap = info.cap;
        }
    }

    pub(crate) fn unit_members(&self, u: VcpuId) -> impl Iterator<Item = VcpuId> + '_ {
        self.members[u].iter().flatten().copied()
    }

    /// `unit_runnable`: any member runnable (or running).
    pub(crate) fn unit_runnable(&self, cx: &Cx, u: VcpuId) -> bool {
        self.unit_members(u).any(|v| cx.is_runnable(v))
    }

    /// The unit's state as the policy sees it: running where it holds a resource while any
    /// member is runnable; a unit whose last member just blocked is blocked at once, as a vCPU
    /// is before its pCPU schedules.
    pub(crate) fn unit_state(&self, cx: &Cx, u: VcpuId) -> VcpuState {
        let mut state = VcpuState::Offline;
        for v in self.unit_members(u) {
            match cx.state(v) {
                VcpuState::Runnable | VcpuState::Running(_) => {
                    return self.unit_res[u].map_or(VcpuState::Runnable, VcpuState::Running)
                }
                VcpuState::Blocked => state = VcpuState::Blocked,
                VcpuState::Offline => {}
            }
        }
        state
    }
}

/// The physical world's context, writable during a callback, read-only during `check`.
pub(crate) enum CxRef<'c, 'w> {
    Mut(&'c mut Cx<'w>),
    Shared(&'c Cx<'w>, StreamRng),
}

impl<'w> CxRef<'_, 'w> {
    fn get(&self) -> &Cx<'w> {
        match self {
            CxRef::Mut(cx) => cx,
            CxRef::Shared(cx, _) => cx,
        }
    }
    fn get_mut(&mut self) -> Option<&mut Cx<'w>> {
        match self {
            CxRef::Mut(cx) => Some(cx),
            CxRef::Shared(..) => None,
        }
    }
}

/// Resources as pCPUs, units as vCPUs (see the module notes).
pub(crate) struct UnitWorld<'m, 'c, 'w> {
    pub(crate) cx: CxRef<'c, 'w>,
    pub(crate) m: &'m Map,
}

impl World for UnitWorld<'_, '_, '_> {
    fn now(&self) -> Time {
        self.cx.get().now()
    }
    fn n_pcpus(&self) -> usize {
        self.m.threads.len()
    }
    fn socket_of(&self, r: PcpuId) -> usize {
        self.cx.get().socket_of(self.m.threads[r][0])
    }
    fn core_of(&self, r: PcpuId) -> usize {
        // A resource is at least a core: it has no SMT siblings of its own.
        r
    }
    fn n_vcpus(&self) -> usize {
        self.m.members.len()
    }
    fn n_domains(&self) -> usize {
        self.m.vdoms.len()
    }
    fn domain(&self, d: DomId) -> &DomainInfo {
        &self.m.vdoms[d]
    }
    fn dom_of(&self, u: VcpuId) -> DomId {
        self.m.unit_dom[u]
    }
    fn vcpu_index(&self, u: VcpuId) -> usize {
        self.m.unit_index[u]
    }
    fn state(&self, u: VcpuId) -> VcpuState {
        self.m.unit_state(self.cx.get(), u)
    }
    fn last_pcpu(&self, u: VcpuId) -> Option<PcpuId> {
        self.m.unit_last[u]
    }
    fn curr(&self, r: PcpuId) -> Option<VcpuId> {
        self.m.res_unit[r]
    }
    fn here(&self) -> Option<PcpuId> {
        self.cx.get().here().map(|p| self.m.res_of[p])
    }
    fn resched_pending(&self, r: PcpuId) -> bool {
        let cx = self.cx.get();
        self.m.rdv[r].is_some() || self.m.threads[r].iter().any(|&p| cx.resched_pending(p))
    }
    fn guest_in_kernel(&self, u: VcpuId) -> bool {
        self.m.unit_members(u).any(|v| self.cx.get().guest_in_kernel(v))
    }
    fn guest_spinning(&self, u: VcpuId) -> bool {
        self.m.unit_members(u).any(|v| self.cx.get().guest_spinning(v))
    }
    fn pending_interrupt(&self, u: VcpuId) -> bool {
        self.m.unit_members(u).any(|v| self.cx.get().pending_interrupt(v))
    }
    fn posted_interrupts(&self) -> bool {
        self.cx.get().posted_interrupts()
    }

    /// `SCHEDULE_SOFTIRQ` on a resource: on this thread if the callback runs on the resource,
    /// else on its master thread (Credit and credit2 tickle `sr->master_cpu`). A resource in a
    /// rendezvous decides when the last thread arrives, after whatever asked for it now.
    fn resched(&mut self, r: PcpuId) -> bool {
        if self.m.rdv[r].is_some() {
            return false;
        }
        let here = self.cx.get().here().filter(|&p| self.m.res_of[p] == r);
        let p = here.unwrap_or(self.m.threads[r][0]);
        match self.cx.get_mut() {
            Some(cx) => {
                cx.resched(p);
                true
            }
            None => false,
        }
    }
    fn co_signal(&mut self, r: PcpuId) {
        if self.m.rdv[r].is_some() {
            return;
        }
        let here = self.cx.get().here().filter(|&p| self.m.res_of[p] == r);
        let p = here.unwrap_or(self.m.threads[r][0]);
        if let Some(cx) = self.cx.get_mut() {
            cx.co_signal(p);
        }
    }
    fn co_launch(&mut self, d: DomId) {
        if let Some(cx) = self.cx.get_mut() {
            cx.co_launch(d);
        }
    }
    fn set_timer(&mut self, at: Time, id: u64) {
        if let Some(cx) = self.cx.get_mut() {
            cx.set_timer(at, id);
        }
    }
    fn count(&mut self, name: &'static str, amount: u64) {
        if let Some(cx) = self.cx.get_mut() {
            cx.count_by(name, amount);
        }
    }
    fn rng(&mut self) -> &mut StreamRng {
        match &mut self.cx {
            CxRef::Mut(cx) => cx.rng(),
            CxRef::Shared(_, rng) => rng,
        }
    }
    fn fail(&mut self, message: String) {
        if let Some(cx) = self.cx.get_mut() {
            cx.fail(message);
        }
    }
    fn tracing(&self) -> bool {
        self.cx.get().tracing()
    }
    /// A resource's counter goes to its master thread, a unit's to its first member.
    fn trace_counter(&mut self, name: &'static str, of: CounterOf, value: i64) {
        let of = match of {
            CounterOf::Pcpu(r) => CounterOf::Pcpu(self.m.threads[r][0]),
            CounterOf::Vcpu(u) => match self.m.unit_members(u).next() {
                Some(v) => CounterOf::Vcpu(v),
                None => return,
            },
            host => host,
        };
        if let Some(cx) = self.cx.get_mut() {
            cx.trace_counter(name, of, value);
        }
    }
}
