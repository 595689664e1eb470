//! Time accounting of a run on real vCPUs, and its report: how long each vCPU was running,
//! runnable (steal) or blocked by the scheduler's clock, how long each pCPU was busy, the
//! fragmentation (`frag_idle_s`) and each VM's entitlement, with the same definitions as the
//! simulator's (`vsched_model::metrics`; `EntitlementMeter` is the simulator's own).
//!
//! "Running" is from the runner's `start` of a vCPU to its `stop`: it includes the backend's
//! latency to enter and leave guest code, as the simulator's `cpu_s` includes its dispatch
//! overheads. What the guest did meanwhile comes from its own counters (`GuestCounters`).

use vsched_engine::Time;
use vsched_model::entitlement::EntitlementMeter;
use vsched_model::metrics::fairness;
use vsched_model::{ClusterMetrics, DomId, DomainInfo, HostMetrics, RunMetrics, VcpuState, VmMetrics};

/// Per-vCPU and per-pCPU times, integrated as states change.
pub(crate) struct Books {
    dom_of: Vec<DomId>,
    running_ns: Vec<Time>,
    runnable_ns: Vec<Time>,
    blocked_ns: Vec<Time>,
    vcpu_since: Vec<Time>,
    busy_ns: Vec<Time>,
    pcpu_since: Vec<Time>,
    n_idle: usize,
    n_waiting: usize,
    frag_since: Time,
    frag_idle_ns: Time,
    entitlement: EntitlementMeter,
}

fn asks_for_a_pcpu(state: VcpuState) -> bool {
    matches!(state, VcpuState::Running(_) | VcpuState::Runnable)
}

impl Books {
    /// At time 0: every vCPU runnable, every pCPU idle.
    pub(crate) fn new(n_pcpus: usize, domains: &[DomainInfo], dom_of: &[DomId]) -> Self {
        let n = dom_of.len();
        let mut entitlement = EntitlementMeter::new(n_pcpus, domains.iter().map(|d| (d.weight, d.cap)));
        for &d in dom_of {
            entitlement.start_asking(0, d);
        }
        Books {
            dom_of: dom_of.to_vec(),
            running_ns: vec![0; n],
            runnable_ns: vec![0; n],
            blocked_ns: vec![0; n],
            vcpu_since: vec![0; n],
            busy_ns: vec![0; n_pcpus],
            pcpu_since: vec![0; n_pcpus],
            n_idle: n_pcpus,
            n_waiting: n,
            frag_since: 0,
            frag_idle_ns: 0,
            entitlement,
        }
    }

    fn integrate_frag(&mut self, now: Time) {
        if self.n_waiting > 0 {
            self.frag_idle_ns += self.n_idle as Time * (now - self.frag_since);
        }
        self.frag_since = now;
    }

    /// vCPU `v` goes from `old` to `new` at `now`.
    pub(crate) fn vcpu_state(&mut self, v: usize, old: VcpuState, new: VcpuState, now: Time) {
        self.integrate_frag(now);
        if asks_for_a_pcpu(old) != asks_for_a_pcpu(new) {
            if asks_for_a_pcpu(new) {
                self.entitlement.start_asking(now, self.dom_of[v]);
            } else {
                self.entitlement.stop_asking(now, self.dom_of[v]);
            }
        }
        let spent = now - self.vcpu_since[v];
        match old {
            VcpuState::Running(_) => self.running_ns[v] += spent,
            VcpuState::Runnable => {
                self.runnable_ns[v] += spent;
                self.n_waiting -= 1;
            }
            VcpuState::Blocked | VcpuState::Offline => self.blocked_ns[v] += spent,
        }
        if new == VcpuState::Runnable {
            self.n_waiting += 1;
        }
        self.vcpu_since[v] = now;
    }

    /// pCPU `p` goes from busy (`was_busy`) or idle to `busy` or idle at `now`.
    pub(crate) fn pcpu(&mut self, p: usize, was_busy: bool, busy: bool, now: Time) {
        self.integrate_frag(now);
        if was_busy {
            self.busy_ns[p] += now - self.pcpu_since[p];
        }
        self.pcpu_since[p] = now;
        match (was_busy, busy) {
            (false, true) => self.n_idle -= 1,
            (true, false) => self.n_idle += 1,
            _ => {}
        }
    }

    /// Brings every figure up to `now`, the end of the run; `states` and `busy` are the
    /// vCPUs' and pCPUs' states at the end.
    pub(crate) fn close(&mut self, now: Time, states: &[VcpuState], busy: &[bool]) {
        for (v, &state) in states.iter().enumerate() {
            self.vcpu_state(v, state, state, now);
        }
        for (p, &b) in busy.iter().enumerate() {
            self.pcpu(p, b, b, now);
        }
        self.entitlement.advance(now);
    }
}

fn secs(ns: Time) -> f64 {
    ns as f64 / 1e9
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// What the runner measured of one VM, beside the books.
pub(crate) struct VmTally {
    pub(crate) workload: &'static str,
    pub(crate) finite: bool,
    /// When its workload started (the simulator's seeded offset, `Simulation::workload_starts`).
    pub(crate) started_at: Time,
    pub(crate) finished_at: Option<Time>,
    /// Guest spin time from its counters, seconds.
    pub(crate) spin_s: f64,
    pub(crate) lock_holder_preemptions: u64,
    pub(crate) lock_waiter_preemptions: u64,
    /// Pause-loop exits, from its guest's counters.
    pub(crate) ple_exits: u64,
    pub(crate) co_launches: u64,
    /// Messages its guest received, from its counters; its virtual cluster, if any.
    pub(crate) messages_received: u64,
    pub(crate) virtual_cluster: Option<String>,
}

/// Each virtual cluster, in the order its first VM comes: its VMs, ranks (their vCPUs) and
/// completion from its first VM's start to its last VM's finish, as the simulator reports it
/// (`sim/collect.rs`, `cluster_metrics`).
fn virtual_clusters(domains: &[DomainInfo], vms: &[VmTally]) -> Vec<ClusterMetrics> {
    let mut clusters: Vec<(ClusterMetrics, Time, Option<Time>)> = Vec::new();
    for (info, tally) in domains.iter().zip(vms) {
        let Some(name) = &tally.virtual_cluster else { continue };
        let at = clusters.iter().position(|(c, _, _)| &c.name == name).unwrap_or_else(|| {
            let empty = ClusterMetrics {
                name: name.clone(),
                workload: tally.workload.to_string(),
                vms: 0,
                ranks: 0,
                completion_s: None,
            };
            clusters.push((empty, Time::MAX, Some(0)));
            clusters.len() - 1
        });
        let (cluster, started, finished) = &mut clusters[at];
        cluster.vms += 1;
        cluster.ranks += info.vcpus;
        *started = (*started).min(tally.started_at);
        *finished = finished.zip(tally.finished_at).map(|(a, b)| a.max(b));
    }
    clusters
        .into_iter()
        .map(|(cluster, started, finished)| ClusterMetrics {
            completion_s: finished.map(|t| secs(t - started)),
            ..cluster
        })
        .collect()
}

/// What the runner measured of the host, beside the books.
pub(crate) struct HostTally {
    pub(crate) context_switches: u64,
    pub(crate) migrations: u64,
    pub(crate) sched_invocations: u64,
    pub(crate) ipis: u64,
    pub(crate) co_ipis: u64,
    pub(crate) events: u64,
    pub(crate) policy_counters: std::collections::BTreeMap<String, u64>,
}

impl Books {
    /// The run's report, in the simulator's types: figures real vCPUs cannot measure are 0
    /// here, and `real_report` writes them as null.
    pub(crate) fn metrics(
        &self,
        end: Time,
        domains: &[DomainInfo],
        vms: &[VmTally],
        measured: HostTally,
    ) -> RunMetrics {
        let capacity = end as f64 * self.busy_ns.len() as f64;
        let total_weight: f64 = domains.iter().map(|d| d.weight as f64).sum();
        let vm_metrics = domains
            .iter()
            .zip(vms)
            .enumerate()
            .map(|(d, (info, tally))| {
                let span = info.first_vcpu..info.first_vcpu + info.vcpus;
                let cpu_ns: Time = self.running_ns[span.clone()].iter().sum();
                let cpu_s = secs(cpu_ns);
                VmMetrics {
                    name: info.name.clone(),
                    workload: tally.workload.to_string(),
                    vm_type: info.vm_type.as_str().to_string(),
                    vcpus: info.vcpus,
                    weight: info.weight,
                    cap: info.cap,
                    // Timed from its own start, as in the simulator (`sim/collect.rs`).
                    completion_s: tally.finished_at.map(|t| secs(t - tally.started_at)),
                    finished: tally.finite.then_some(tally.finished_at.is_some()),
                    created_s: Some(0.0),
                    destroyed_s: None,
                    cpu_s,
                    spin_s: tally.spin_s,
                    steal_s: secs(self.runnable_ns[span].iter().sum()),
                    spin_share: (cpu_ns > 0).then(|| tally.spin_s / cpu_s),
                    lock_holder_preemptions: tally.lock_holder_preemptions,
                    lock_waiter_preemptions: tally.lock_waiter_preemptions,
                    ple_exits: tally.ple_exits,
                    wake_latency_us_mean: None,
                    cpu_share: ratio(cpu_ns as f64, capacity),
                    weight_share: ratio(info.weight as f64, total_weight),
                    entitled_share: ratio(self.entitlement.entitled_ns(d), capacity),
                    requests: 0,
                    throughput_rps: None,
                    latency_ms_mean: None,
                    latency_ms_p99: None,
                    co_launches: tally.co_launches,
                    costarts: 0,
                    costart_skew_us_mean: None,
                    costart_skew_us_p50: None,
                    costart_skew_us_p99: None,
                    costart_skew_us_quantiles: None,
                    ipi_syncs: 0,
                    pv_halts: 0,
                    pv_kicks: 0,
                    pv_tlb_flushes_deferred: 0,
                    pv_sched_yields: 0,
                    preempt_delays: 0,
                    preempt_delays_completed: 0,
                    preempt_delays_expired: 0,
                    guest_ticks: 0,
                    timer_wakes: 0,
                    host: 0,
                    virtual_cluster: tally.virtual_cluster.clone(),
                    messages_received: tally.messages_received,
                    rx_packets: info.rx_packets,
                    core_shared_s: None,
                    policy_metrics: Default::default(),
                    halt_poll: None,
                }
            })
            .collect::<Vec<_>>();
        let co_launches: u64 = vms.iter().map(|t| t.co_launches).sum();
        let host = HostMetrics {
            pcpus: self.busy_ns.len(),
            utilization: ratio(self.busy_ns.iter().sum::<Time>() as f64, capacity),
            frag_idle_s: secs(self.frag_idle_ns),
            context_switches: measured.context_switches,
            ipis: measured.ipis,
            migrations: measured.migrations,
            cache_refill_s: 0.0,
            sched_invocations: measured.sched_invocations,
            ple_exits: vms.iter().map(|t| t.ple_exits).sum(),
            co_launches,
            co_launches_per_s: ratio(co_launches as f64, secs(end)),
            co_ipis: measured.co_ipis,
            fairness: fairness(&vm_metrics),
            policy_counters: measured.policy_counters,
            smt_corun_s: None,
            smt_cross_vm_s: None,
        };
        RunMetrics {
            sim_s: secs(end),
            events: measured.events,
            vms: vm_metrics,
            host,
            hosts: Vec::new(),
            network: None,
            io: None,
            virtual_clusters: virtual_clusters(domains, vms),
        }
    }
}
