//! Building a simulation from its configuration: hosts, domains with their vCPUs and jobs,
//! the random streams, and the lifecycle events of VMs that start or stop during the run.

use std::collections::VecDeque;

use rand::Rng;
use vsched_engine::{EventQueue, RngStreams};

use super::accounting::asks_for_a_pcpu;
use super::cache::CacheFills;
use super::clocks;
use super::config::{DomainConfig, HostConfig, NetworkConfig};
use super::costart::CoStart;
use super::disk::IoStats;
use super::events::Ev;
use super::guest_kernel;
use super::host_threads::{self, HostIo, WithHostThreads};
use super::locks::Lock;
use super::mailbox::Mailbox;
use super::network::NetStats;
use super::slab::Slab;
use super::smt::Smt;
use super::state::{policy_stream, Core, Dom, GuestThread, HostState, Pcpu, ThreadState, Vcpu, CLOCK_PHASE_STREAM};
use super::Simulation;
use crate::domain::{DomainInfo, VcpuState};
use crate::entitlement::EntitlementMeter;
use crate::histogram::Histogram;
use crate::ids::ThreadId;
use crate::policy::Policy;
use crate::trace::{Trace, TraceSink};

impl Simulation {
    /// Passes every trace event (pCPU spans, vCPU slices, counters, instants, flows) to `sink`
    /// as it is recorded, at most `limit` of them ([`Trace::streaming`];
    /// [`Simulation::enable_trace`] keeps pCPU spans in memory instead). A sink error ends the
    /// run; [`Trace::finish`], on the trace [`Simulation::take_trace`] returns, gives the cause.
    pub fn stream_trace(&mut self, limit: usize, sink: Box<dyn TraceSink>) {
        self.core.trace = Some(Trace::streaming(limit, sink));
    }

    /// One host running `policy`, no network.
    pub fn new(host: HostConfig, domains: Vec<DomainConfig>, policy: Box<dyn Policy>, seed: u64) -> Self {
        Self::cluster(host, NetworkConfig::default(), domains, vec![policy], seed)
    }

    /// `policies.len()` identical hosts joined by `network`, each scheduled by its own
    /// policy instance. Domains are listed host by host (`DomainConfig::host`); a host has at
    /// most one driver domain.
    ///
    /// # Panics
    /// If the domains are not in host order, name a host out of range, or a host has two
    /// driver domains (scenario validation refuses these first).
    pub fn cluster(
        host: HostConfig,
        network: NetworkConfig,
        domains: Vec<DomainConfig>,
        policies: Vec<Box<dyn Policy>>,
        seed: u64,
    ) -> Self {
        let n_hosts = policies.len();
        assert!(n_hosts > 0, "a simulation needs at least one host");
        assert!(domains.windows(2).all(|w| w[0].host <= w[1].host), "domains must be listed host by host");
        assert!(domains.iter().all(|d| d.host < n_hosts), "a domain names a host out of range");
        // A KVM host's own threads: one more domain after each host's (`host_threads`).
        let WithHostThreads { domains, host_threads, user_doms } = host_threads::add_domains(&host, domains, n_hosts);
        let kthreads = host_threads::kthreads_per_host(&host);
        let streams = RngStreams::new(seed);
        let mut vcpus = Vec::new();
        let mut threads: Vec<GuestThread> = Vec::new();
        let mut doms = Vec::new();
        let mut unfinished = 0;
        let mut lifecycle = Vec::new();
        let mut jobs: Vec<Vec<ThreadId>> = Vec::new();
        let mut job_names: Vec<Option<String>> = Vec::new();
        let mut hosts: Vec<HostState> = (0..n_hosts)
            .map(|h| HostState {
                pcpus: h * host.pcpus..(h + 1) * host.pcpus,
                vcpus: 0..0,
                doms: 0..0,
                driver: None,
                backlog: VecDeque::new(),
                io: None,
                disk_free_at: 0,
                link_free_at: 0,
                clock_phase: if h == 0 { 0.0 } else { streams.stream(CLOCK_PHASE_STREAM + h as u64).gen::<f64>() },
                timer_slop_ns: 0,
                timer_rng: clocks::slop_stream(&streams, h),
                policy_rng: streams.stream(policy_stream(h)),
                counters: Default::default(),
                context_switches: 0,
                ipis: 0,
                migrations: 0,
                cache_refill_ns: 0,
                sched_invocations: 0,
                ple_exits: 0,
                co_launches: 0,
                co_ipis: 0,
                n_idle: host.pcpus,
                n_waiting: 0,
                frag_since: 0,
                frag_idle_ns: 0,
                entitlement: EntitlementMeter::new(0, []),
            })
            .collect();
        let ple_base_ns = host.ple_window_ns().unwrap_or(0);
        let lockstep = host.clocks == super::config::Clocks::Lockstep;
        for (d, cfg) in domains.into_iter().enumerate() {
            let h = cfg.host;
            let hs = &mut hosts[h];
            if hs.doms.is_empty() {
                hs.doms = d..d;
                hs.vcpus = vcpus.len()..vcpus.len();
            }
            hs.doms.end = d + 1;
            if cfg.driver {
                assert!(hs.driver.is_none(), "host {h} has two driver domains");
                hs.driver = Some(d);
            }
            let first_vcpu = vcpus.len();
            let first_thread = threads.len();
            let n = cfg.guest.vcpus;
            let n_threads = cfg.guest.programs.len();
            assert!(n >= 1 && n_threads >= n, "a guest needs a thread for each vCPU");
            hs.vcpus.end = first_vcpu + n;
            let local_first = first_vcpu - hs.vcpus.start;
            // A named job gathers its domains; an unnamed one is the domain alone.
            let existing = cfg.job.as_ref().and_then(|name| job_names.iter().position(|j| j.as_ref() == Some(name)));
            let job = existing.unwrap_or_else(|| {
                job_names.push(cfg.job.clone());
                jobs.push(Vec::new());
                jobs.len() - 1
            });
            let online = cfg.start_at == 0;
            let is_host = host_threads[d];
            let started_at = if online && !cfg.driver && !is_host {
                clocks::workload_start(&streams, &host, job)
            } else {
                cfg.start_at
            };
            if !online {
                lifecycle.push((cfg.start_at, Ev::Create { d }));
            }
            if let Some(at) = cfg.stop_at {
                lifecycle.push((at, Ev::Destroy { d }));
            }
            let start_state =
                if started_at > 0 && online { ThreadState::Unstarted { at: started_at } } else { ThreadState::Ready };
            if is_host {
                let io = n_threads - kthreads;
                hs.io = Some(HostIo { dom: d, first: first_thread + kthreads, backlogs: vec![VecDeque::new(); io] });
            }
            // Thread i starts on vCPU i mod n: the first n are the vCPUs' current threads, the
            // others wait in their queues (`guest_sched`).
            for (i, program) in cfg.guest.programs.iter().enumerate() {
                // A host's kernel thread first wakes at its phase (`host_threads`).
                let start_state = if is_host && i < kthreads {
                    match host_threads::kthread_phase(&streams, &host, hs.pcpus.start + i) {
                        0 => ThreadState::Ready,
                        at => ThreadState::Unstarted { at },
                    }
                } else {
                    start_state
                };
                jobs[job].push(threads.len());
                threads.push(GuestThread {
                    dom: d,
                    vcpu: first_vcpu + i % n,
                    asleep: false,
                    rank: jobs[job].len() as u32 - 1,
                    mailbox: Mailbox::default(),
                    pass: None,
                    program: program.clone(),
                    pc: 0,
                    loops: Vec::new(),
                    state: start_state,
                    held: Vec::new(),
                    ticket: 0,
                    io_done_at: None,
                    warmth: None,
                    arrived_at: None,
                    request_start: 0,
                });
            }
            for index in 0..n {
                let queued = (first_thread + index + n..first_thread + n_threads).step_by(n);
                vcpus.push(Vcpu {
                    dom: d,
                    host: h,
                    index,
                    curr: first_thread + index,
                    guest_rq: queued.collect(),
                    guest_slice_ns: 0,
                    state: if online { VcpuState::Runnable } else { VcpuState::Offline },
                    state_since: 0,
                    state_ns: [0; 4],
                    spin_ns: 0,
                    last_pcpu: None,
                    kernel_warmth: None,
                    touching: None,
                    refill_spans: Vec::new(),
                    run_from: 0,
                    synced_to: 0,
                    ple_from: 0,
                    gen: 0,
                    woke_at: None,
                    ple_exits: 0,
                    ple_window_ns: ple_base_ns,
                    irqs: Vec::new(),
                    irq_gen: 0,
                    tick_gen: 0,
                    timer_wake: false,
                    idle_phase: guest_kernel::idle_phase(&streams, lockstep, cfg.tick, vcpus.len()),
                    delay_until: None,
                    pinned: (is_host && index < kthreads).then_some(hs.pcpus.start + index),
                    halt: Default::default(),
                });
                if online {
                    hs.n_waiting += 1;
                }
            }
            if cfg.guest.finite {
                unfinished += 1;
            }
            doms.push(Dom {
                info: DomainInfo {
                    name: cfg.name,
                    vcpus: n,
                    weight: cfg.weight,
                    cap: cfg.cap,
                    vm_type: cfg.vm_type,
                    first_vcpu: local_first,
                    online,
                    driver: cfg.driver,
                    host_threads: is_host,
                    rx_packets: 0,
                    pv: cfg.pv,
                    slice_request_ns: cfg.slice_request_ns,
                },
                span: first_vcpu..first_vcpu + n,
                threads: first_thread..first_thread + n_threads,
                host: h,
                job,
                messages_received: 0,
                workload: cfg.workload,
                lock_kind: cfg.guest.lock_kind,
                locks: (0..cfg.guest.locks).map(|_| Lock::default()).collect(),
                barrier_waiters: Vec::new(),
                barrier_arrived: 0,
                barrier_parties: n_threads - cfg.guest.idle_vcpus,
                rng: streams.stream(1 + d as u64),
                finite: cfg.guest.finite,
                alive: n_threads,
                finished_at: None,
                lock_holder_preemptions: 0,
                lock_waiter_preemptions: 0,
                wake_latency_sum: 0,
                wakes: 0,
                request_latencies: Histogram::new(),
                co_launches: 0,
                costart: CoStart::new(n),
                created_at: cfg.start_at,
                started_at,
                destroyed_at: None,
                ipi_syncs: 0,
                pv_halts: 0,
                pv_kicks: 0,
                pv_tlb_flushes_deferred: 0,
                pv_sched_yields: 0,
                preempt_delays: 0,
                preempt_delays_completed: 0,
                preempt_delays_expired: 0,
                working_set_bytes: cfg.working_set_bytes,
                tick: cfg.tick,
                tick_phase: guest_kernel::tick_phase(&streams, lockstep, cfg.tick, d),
                tick_period_ns: cfg.tick.tick_period_ns(),
                idle_period_ns: cfg.tick.idle_period_ns(),
                guest_ticks: 0,
                timer_wakes: 0,
                halt_stats: Default::default(),
            });
        }
        // Hosts without domains still own an (empty) slice where the next host starts.
        for h in 0..n_hosts {
            if hosts[h].doms.is_empty() {
                let (d, v) = if h == 0 { (0, 0) } else { (hosts[h - 1].doms.end, hosts[h - 1].vcpus.end) };
                hosts[h].doms = d..d;
                hosts[h].vcpus = v..v;
            }
        }
        for hs in &mut hosts {
            hs.entitlement =
                EntitlementMeter::new(host.pcpus, doms[hs.doms.clone()].iter().map(|d| (d.info.weight, d.info.cap)));
            for vc in vcpus[hs.vcpus.clone()].iter().filter(|vc| asks_for_a_pcpu(vc.state)) {
                hs.entitlement.start_asking(0, vc.dom - hs.doms.start);
            }
        }
        let tick_phase = clocks::tick_phases(&streams, &host, policies[0].tick_period_ns(), n_hosts * host.pcpus);
        let pcpus = (0..n_hosts * host.pcpus)
            .map(|p| Pcpu {
                host: p / host.pcpus,
                curr: None,
                since: 0,
                busy_ns: 0,
                idle_ns: 0,
                slice_deadline: None,
                slice_timer_at: None,
                resched_gen: 0,
                resched_due: None,
                tick_phase: tick_phase[p],
            })
            .collect();
        let ple_window_ns = host.ple_window_ns();
        let ple_window_max_ns = host.cycles_ns(host.ple_window_max_cycles);
        let ple_grow = host.ple_grow.unwrap_or_else(|| policies[0].ple_window_grow());
        let preempt_delay_ns = host.preempt_delay_ns.unwrap_or_else(|| policies[0].preempt_delay_ns());
        let pv_spin_ns = host.pv_spin_ns();
        let pmt_unit_ns = host.pmt_unit_ns();
        let caches = CacheFills::new(&host, n_hosts);
        let smt = Smt::new(host.threads_per_core, host.smt_rate, n_hosts * host.pcpus, n_hosts, doms.len());
        let core = Core {
            host,
            network,
            queue: EventQueue::new(),
            pcpus,
            vcpus,
            threads,
            doms,
            hosts,
            jobs,
            job_names,
            msgs: Slab::new(),
            net: NetStats::default(),
            caches,
            disk_reqs: Slab::new(),
            io: IoStats::default(),
            ple_window_ns,
            ple_window_max_ns,
            ple_grow,
            preempt_delay_ns,
            pv_spin_ns,
            pmt_unit_ns,
            events: 0,
            to_advance: VecDeque::new(),
            to_sleep: VecDeque::new(),
            to_yield: VecDeque::new(),
            guest_events_due: Vec::new(),
            to_wake: VecDeque::new(),
            unfinished,
            trace: None,
            error: None,
            stalled: None,
            smt,
            host_pollers: Vec::new(),
        };
        // Every host runs the same policy; the first speaks for them.
        let stall_timeout =
            policies.first().map_or(Some(crate::policy::DEFAULT_STALL_TIMEOUT_NS), |p| p.stall_timeout_ns());
        let mut sim = Simulation {
            core,
            policies,
            checks: cfg!(debug_assertions),
            stall_timeout,
            user_doms,
            #[cfg(feature = "window-census")]
            census: None,
        };
        for (at, ev) in lifecycle {
            sim.core.post(at, ev);
        }
        sim
    }
}
