//! Closing the books at the end of a run and building its report. The figures are defined
//! for users in `metrics.rs`; the co-start skew is summarized in `costart`.

use vsched_engine::Time;

use super::accounting::{RUNNABLE, RUNNING};
use super::state::{Core, Dom, HostState};
use crate::metrics::{fairness, ClusterMetrics, HaltPollMetrics, HostMetrics, NetworkMetrics, RunMetrics, VmMetrics};

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

fn secs(ns: Time) -> f64 {
    ns as f64 / 1e9
}

impl Core {
    /// Closes all accounting at `end` and builds the report.
    pub(super) fn finish(&mut self, end: Time) -> RunMetrics {
        let now = end.max(self.now());
        self.close_books(now);
        let mut vms: Vec<VmMetrics> = (0..self.doms.len()).map(|d| self.vm_metrics(d, now)).collect();
        let mut hosts: Vec<HostMetrics> =
            self.hosts.iter().map(|hs| self.host_metrics(hs, &mut vms[hs.doms.clone()], now)).collect();
        let host =
            if hosts.len() == 1 { hosts.pop().expect("one host") } else { HostMetrics::total(&hosts, &vms, secs(now)) };
        RunMetrics {
            sim_s: secs(now),
            events: self.events,
            vms,
            host,
            hosts: if hosts.len() > 1 { hosts } else { Vec::new() },
            network: self.network_metrics(),
            io: self.io_metrics(),
            virtual_clusters: self.cluster_metrics(),
        }
    }

    /// Brings every vCPU's, pCPU's and host's accounting up to `now`, and checks that each
    /// vCPU's and pCPU's states add up to the run's length.
    fn close_books(&mut self, now: Time) {
        self.queue.advance_to(now);
        for v in 0..self.vcpus.len() {
            self.sync(v);
            self.count_refill(v, now);
            let s = self.vcpus[v].state;
            self.set_state(v, s);
        }
        for pc in &mut self.pcpus {
            if pc.curr.is_some() {
                pc.busy_ns += now - pc.since;
            } else {
                pc.idle_ns += now - pc.since;
            }
            pc.since = now;
        }
        self.smt_close();
        self.with_trace(|t| t.close_all(now));
        for h in 0..self.hosts.len() {
            self.integrate_frag(h);
            self.hosts[h].entitlement.advance(now);
        }
        for pc in &self.pcpus {
            assert_eq!(pc.busy_ns + pc.idle_ns, now, "pCPU busy + idle must equal elapsed time");
        }
        for vc in &self.vcpus {
            assert_eq!(
                vc.state_ns.iter().sum::<Time>(),
                now,
                "vCPU running + waiting + blocked + offline must equal the run's length"
            );
        }
    }

    /// Domain `d`'s figures (its `weight_share` is set with its host's).
    fn vm_metrics(&self, d: usize, now: Time) -> VmMetrics {
        let host_capacity = (now as f64) * self.host.pcpus as f64;
        let dom: &Dom = &self.doms[d];
        let vcpus = &self.vcpus[dom.span.clone()];
        let cpu_ns: Time = vcpus.iter().map(|v| v.state_ns[RUNNING]).sum();
        let spin_ns: Time = vcpus.iter().map(|v| v.spin_ns).sum();
        let hs = &self.hosts[dom.host];
        let entitled_ns = hs.entitlement.entitled_ns(d - hs.doms.start);
        let lat = &dom.request_latencies;
        let mut vm = VmMetrics {
            name: dom.info.name.clone(),
            workload: dom.workload.clone(),
            vm_type: dom.info.vm_type.as_str().to_string(),
            vcpus: dom.info.vcpus,
            weight: dom.info.weight,
            cap: dom.info.cap,
            completion_s: dom.finished_at.map(|t| secs(t - dom.started_at)),
            finished: dom.finite.then_some(dom.finished_at.is_some()),
            // A VM due after the run ended was never created.
            created_s: (dom.created_at <= now).then(|| secs(dom.created_at)),
            destroyed_s: dom.destroyed_at.map(secs),
            cpu_s: secs(cpu_ns),
            spin_s: secs(spin_ns),
            steal_s: secs(vcpus.iter().map(|v| v.state_ns[RUNNABLE]).sum()),
            spin_share: (cpu_ns > 0).then(|| spin_ns as f64 / cpu_ns as f64),
            lock_holder_preemptions: dom.lock_holder_preemptions,
            lock_waiter_preemptions: dom.lock_waiter_preemptions,
            ple_exits: vcpus.iter().map(|v| v.ple_exits).sum(),
            wake_latency_us_mean: (dom.wakes > 0).then(|| dom.wake_latency_sum as f64 / dom.wakes as f64 / 1e3),
            cpu_share: ratio(cpu_ns as f64, host_capacity),
            weight_share: 0.0,
            entitled_share: ratio(entitled_ns, host_capacity),
            requests: lat.count(),
            throughput_rps: (!lat.is_empty()).then(|| ratio(lat.count() as f64, secs(now))),
            latency_ms_mean: lat.mean().map(|m| m / 1e6),
            latency_ms_p99: lat.quantile(0.99).map(|l| l as f64 / 1e6),
            co_launches: dom.co_launches,
            costarts: 0,
            costart_skew_us_mean: None,
            costart_skew_us_p50: None,
            costart_skew_us_p99: None,
            costart_skew_us_quantiles: None,
            ipi_syncs: dom.ipi_syncs,
            pv_halts: dom.pv_halts,
            pv_kicks: dom.pv_kicks,
            pv_tlb_flushes_deferred: dom.pv_tlb_flushes_deferred,
            pv_sched_yields: dom.pv_sched_yields,
            preempt_delays: dom.preempt_delays,
            preempt_delays_completed: dom.preempt_delays_completed,
            preempt_delays_expired: dom.preempt_delays_expired,
            guest_ticks: dom.guest_ticks,
            timer_wakes: dom.timer_wakes,
            host: dom.host,
            virtual_cluster: self.job_names[dom.job].clone(),
            messages_received: dom.messages_received,
            rx_packets: dom.info.rx_packets,
            core_shared_s: self.smt.enabled().then(|| secs(self.smt.shared_ns[d])),
            policy_metrics: Default::default(),
            halt_poll: self.halt_poll_metrics(d),
        };
        dom.costart.report(&mut vm);
        vm
    }

    /// Host `hs`'s figures; sets the `weight_share` of its VMs (`vms_here`).
    fn host_metrics(&self, hs: &HostState, vms_here: &mut [VmMetrics], now: Time) -> HostMetrics {
        let host_capacity = (now as f64) * self.host.pcpus as f64;
        let total_weight: f64 = vms_here.iter().map(|v| v.weight as f64).sum();
        for vm in vms_here.iter_mut() {
            vm.weight_share = ratio(vm.weight as f64, total_weight);
        }
        let busy: Time = self.pcpus[hs.pcpus.clone()].iter().map(|p| p.busy_ns).sum();
        let h = self.pcpus[hs.pcpus.start].host;
        let smt = |ns: &[Time]| self.smt.enabled().then(|| secs(ns[h]));
        HostMetrics {
            pcpus: hs.pcpus.len(),
            utilization: ratio(busy as f64, host_capacity),
            frag_idle_s: secs(hs.frag_idle_ns),
            context_switches: hs.context_switches,
            ipis: hs.ipis,
            migrations: hs.migrations,
            cache_refill_s: hs.cache_refill_ns as f64 / 1e9,
            sched_invocations: hs.sched_invocations,
            ple_exits: hs.ple_exits,
            co_launches: hs.co_launches,
            co_launches_per_s: ratio(hs.co_launches as f64, secs(now)),
            co_ipis: hs.co_ipis,
            fairness: fairness(vms_here),
            policy_counters: hs.counters.sorted(),
            smt_corun_s: smt(&self.smt.corun_ns),
            smt_cross_vm_s: smt(&self.smt.cross_vm_ns),
        }
    }

    /// Domain `d`'s halt polls, if it may poll: a VM (not the driver domain, not the host's
    /// threads) on a host with `halt_poll_ns` > 0 or with its guest's haltpoll driver.
    fn halt_poll_metrics(&self, d: usize) -> Option<HaltPollMetrics> {
        let dom = &self.doms[d];
        let info = &dom.info;
        let may_poll =
            (self.host.halt_poll.max_ns > 0 || info.pv.haltpoll.is_some()) && !info.driver && !info.host_threads;
        let s = &dom.halt_stats;
        may_poll.then(|| HaltPollMetrics {
            halt_attempted_poll: s.attempted,
            halt_successful_poll: s.successful,
            halt_poll_invalid: 0,
            halt_poll_success_s: secs(s.success_ns),
            halt_poll_fail_s: secs(s.fail_ns),
            guest_halt_polls: s.guest_polls,
            guest_halt_successful_polls: s.guest_successful,
            guest_halt_poll_s: secs(s.guest_ns),
        })
    }

    /// Each named job (virtual cluster): its VMs, ranks and completion.
    fn cluster_metrics(&self) -> Vec<ClusterMetrics> {
        (0..self.jobs.len())
            .filter_map(|j| {
                let name = self.job_names[j].clone()?;
                let members: Vec<&Dom> = self.doms.iter().filter(|d| d.job == j).collect();
                let finished = members.iter().map(|d| d.finished_at).collect::<Option<Vec<Time>>>();
                let started = members.iter().map(|d| d.started_at).min().unwrap_or(0);
                Some(ClusterMetrics {
                    name,
                    workload: members[0].workload.clone(),
                    vms: members.len(),
                    ranks: self.jobs[j].len(),
                    completion_s: finished.and_then(|f| f.into_iter().max()).map(|t| secs(t - started)),
                })
            })
            .collect()
    }

    /// The network's tallies, if any message was sent.
    fn network_metrics(&self) -> Option<NetworkMetrics> {
        let net = &self.net;
        (net.messages > 0).then(|| NetworkMetrics {
            messages: net.messages,
            bytes: net.bytes,
            packets: net.packets,
            driver_passes: net.driver_passes,
            message_latency_us_mean: (net.delivered > 0)
                .then(|| net.latency_sum_ns as f64 / net.delivered as f64 / 1e3),
        })
    }
}
