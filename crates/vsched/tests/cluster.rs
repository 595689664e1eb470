//! Clusters of hosts: message timing over the network and through driver domains, and the
//! independence of the per-host policy instances (seed 002 §3: autonomous VMMs).

mod common;

use common::{domain, free_host, hog, policy, program};
use vsched_engine::Time;

const MS: Time = NS_PER_MS;
use vsched_model::{
    driver_guest, BarrierWait, DomainConfig, Instr, NetworkConfig, RunMetrics, Simulation, Span, Until, VmMetrics,
    VmType, NS_PER_MS, NS_PER_US,
};

const LATENCY_NS: u64 = 10 * NS_PER_US;
/// 10 Gbit/s: 1.25 bytes per ns, so 12 500 bytes take exactly 10 µs on the wire.
const GBPS: f64 = 10.0;

fn network() -> NetworkConfig {
    NetworkConfig {
        latency_ns: LATENCY_NS,
        bandwidth_gbps: GBPS,
        dom0_packet_ns: 2 * NS_PER_US,
        ..NetworkConfig::default()
    }
}

/// A domain of job `job` on `host`, finite, running `programs`.
fn member(name: &str, host: usize, job: &str, programs: Vec<vsched_model::Program>) -> DomainConfig {
    let mut d = domain(name, VmType::Hit, programs);
    d.host = host;
    d.job = Some(job.into());
    d.guest.finite = true;
    d
}

fn on_host(mut d: DomainConfig, host: usize) -> DomainConfig {
    d.host = host;
    d
}

fn dom0(host: usize, vcpus: usize) -> DomainConfig {
    DomainConfig {
        driver: true,
        guest: driver_guest(vcpus),
        ..on_host(domain(&format!("dom0.{host}"), VmType::Hit, vec![]), host)
    }
}

fn run_cluster(
    pcpus: usize,
    domains: Vec<DomainConfig>,
    hosts: usize,
    policy_name: &str,
    horizon_ms: u64,
) -> RunMetrics {
    let policies = (0..hosts).map(|_| policy(policy_name, &[])).collect();
    let mut sim = Simulation::cluster(free_host(pcpus), network(), domains, policies, 1);
    sim.run(horizon_ms * NS_PER_MS, Until::AllDone, &mut |_| true).expect("run failed")
}

fn vm<'a>(m: &'a RunMetrics, name: &str) -> &'a VmMetrics {
    m.vms.iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no VM {name}"))
}

fn completion_ns(m: &RunMetrics, name: &str) -> u64 {
    (vm(m, name).completion_s.expect("finished") * 1e9).round() as u64
}

/// Rank 0 on host 0 pings rank 1 on host 1 with `ping` bytes, which answers with `pong`.
fn ping_pong(ping: u64, pong: u64, wait: BarrierWait) -> Vec<DomainConfig> {
    vec![
        member("a", 0, "pp", vec![program(&[Instr::Send { to: 1, bytes: ping }, Instr::Recv { from: 1, wait }])]),
        member("b", 1, "pp", vec![program(&[Instr::Recv { from: 0, wait }, Instr::Send { to: 0, bytes: pong }])]),
    ]
}

#[test]
fn a_ping_pong_between_two_hosts_takes_two_latencies_plus_the_transfer() {
    // Zero host overheads, nothing else running: the round trip is the network's alone.
    let m = run_cluster(1, ping_pong(12_500, 0, BarrierWait::Spin), 2, "credit", 10);
    assert_eq!(completion_ns(&m, "a"), 2 * LATENCY_NS + 10_000);
    // The reply's bytes take their own time on the other host's link.
    let m = run_cluster(1, ping_pong(12_500, 2_500, BarrierWait::Spin), 2, "credit", 10);
    assert_eq!(completion_ns(&m, "a"), 2 * LATENCY_NS + 10_000 + 2_000);
    // Blocking receivers are woken by an interrupt (zero latency on this host) and run at
    // once on their idle pCPU: the same time.
    let m = run_cluster(1, ping_pong(12_500, 0, BarrierWait::Block), 2, "credit", 10);
    assert_eq!(completion_ns(&m, "a"), 2 * LATENCY_NS + 10_000);
    // Busy-polling burns the wait; blocking does not.
    let spin = run_cluster(1, ping_pong(12_500, 0, BarrierWait::Spin), 2, "credit", 10);
    assert!(vm(&spin, "a").spin_s > 29e-6 && vm(&m, "a").spin_s == 0.0);
    let net = spin.network.as_ref().expect("messages were sent");
    assert_eq!((net.messages, net.bytes, net.packets), (2, 12_500, 9 + 1));
    assert_eq!((vm(&spin, "a").rx_packets, vm(&spin, "b").rx_packets), (1, 9));
}

#[test]
fn messages_on_one_link_are_serialized_in_order() {
    // Two 12 500-byte messages sent at once: the second leaves the link 10 µs after the first.
    let a = program(&[Instr::Send { to: 1, bytes: 12_500 }, Instr::Send { to: 1, bytes: 12_500 }]);
    let b =
        program(&[Instr::Recv { from: 0, wait: BarrierWait::Spin }, Instr::Recv { from: 0, wait: BarrierWait::Spin }]);
    let m = run_cluster(1, vec![member("a", 0, "j", vec![a]), member("b", 1, "j", vec![b])], 2, "credit", 10);
    assert_eq!(completion_ns(&m, "b"), 20_000 + LATENCY_NS);
}

#[test]
fn driver_domains_carry_network_messages_at_their_cost_per_packet() {
    // With a 1-vCPU dom0 on a second pCPU of each host: the ping (10 packets of 1500 bytes at
    // most: 12 500 bytes = 9 packets) costs 9 × 2 µs in the sender's dom0 and again in the
    // receiver's; the empty pong 2 µs in each.
    let mut domains = vec![dom0(0, 1)];
    let pp = ping_pong(12_500, 0, BarrierWait::Spin);
    domains.push(pp[0].clone());
    domains.push(dom0(1, 1));
    domains.push(pp[1].clone());
    let m = run_cluster(2, domains, 2, "credit", 10);
    let ping = 18_000 + 10_000 + LATENCY_NS + 18_000;
    let pong = 2_000 + LATENCY_NS + 2_000;
    assert_eq!(completion_ns(&m, "a"), ping + pong);
    assert_eq!(m.network.as_ref().unwrap().driver_passes, 4);
    assert!((vm(&m, "dom0.0").cpu_s - 20e-6).abs() < 1e-12, "dom0.0 ran {} s", vm(&m, "dom0.0").cpu_s);
}

#[test]
fn ranks_of_one_vm_talk_through_shared_memory_and_send_no_packets() {
    let net = network();
    let a = program(&[Instr::Send { to: 1, bytes: 6_250 }]);
    let b = program(&[Instr::Recv { from: 0, wait: BarrierWait::Spin }]);
    let mut d = domain("a", VmType::Hit, vec![a, b]);
    d.guest.finite = true;
    let m = run_cluster(2, vec![d], 1, "credit", 10);
    let expected = net.shm_latency_ns + NetworkConfig::transfer_ns(6_250, net.shm_bandwidth_gbps);
    assert_eq!(completion_ns(&m, "a"), expected);
    assert_eq!(vm(&m, "a").rx_packets, 0);
    assert_eq!(vm(&m, "a").messages_received, 1);
}

#[test]
fn a_rank_on_a_descheduled_vcpu_delays_the_exchange() {
    // Host 1 has one pCPU shared by a hog (inserted first, so it runs first) and rank 1:
    // rank 0 spins until rank 1 first runs, one Credit slice (30 ms) later, and its answer
    // arrives one latency after that.
    let exchange =
        |peer: u32| program(&[Instr::Send { to: peer, bytes: 0 }, Instr::Recv { from: peer, wait: BarrierWait::Spin }]);
    let hog_vm = on_host(domain("hog", VmType::Hit, vec![hog()]), 1);
    let domains = vec![member("a", 0, "j", vec![exchange(1)]), hog_vm, member("b", 1, "j", vec![exchange(0)])];
    let m = run_cluster(1, domains, 2, "credit", 100);
    assert_eq!(completion_ns(&m, "a"), 30 * NS_PER_MS + LATENCY_NS);
    assert!(vm(&m, "a").spin_s > 0.030, "rank 0 spun {} s", vm(&m, "a").spin_s);
}

/// Host 0 runs a lock-heavy VM beside a hog under Credit; host 1 runs `host1`. No message
/// crosses hosts. Returns the metrics and the spans of host 0's pCPUs.
fn two_hosts(host1: Vec<DomainConfig>, talk: bool) -> (RunMetrics, Vec<Span>) {
    let spin = vsched_workloads::find("spinlock").unwrap();
    let params = vsched_model::Params::check("w", spin.params, &Default::default()).unwrap();
    let guest = (spin.build)(&params, &vsched_workloads::Ranks::alone(2)).unwrap();
    let mut locky = domain("locky", VmType::Hit, vec![]);
    locky.guest = guest;
    let mut domains = vec![locky, domain("hog0", VmType::Hit, vec![hog(), hog()])];
    if talk {
        // A control: a VM on host 0 exchanging messages with host 1 does change host 0.
        let ping = program(&[Instr::Send { to: 1, bytes: 100_000 }, Instr::Recv { from: 1, wait: BarrierWait::Spin }]);
        domains.push(member("talker", 0, "t", vec![ping]));
    }
    domains.extend(host1);
    if talk {
        let pong = program(&[Instr::Recv { from: 0, wait: BarrierWait::Spin }, Instr::Send { to: 0, bytes: 8 }]);
        domains.push(member("listener", 1, "t", vec![pong]));
    }
    let policies = vec![policy("credit", &[]), policy("credit", &[])];
    let mut sim = Simulation::cluster(free_host(2), network(), domains, policies, 7);
    sim.enable_trace(1_000_000);
    let m = sim.run(500 * NS_PER_MS, Until::Horizon, &mut |_| true).expect("run failed");
    let spans = sim.take_trace().unwrap().spans().iter().filter(|s| s.pcpu < 2).copied().collect();
    (m, spans)
}

#[test]
fn policies_on_different_hosts_share_no_state_but_the_network() {
    let busy = vec![on_host(domain("hogs", VmType::Hit, vec![hog(), hog(), hog()]), 1)];
    let idle =
        vec![on_host(domain("idle", VmType::Hit, vec![program(&[Instr::Io(vsched_model::Dur::Fixed(NS_PER_MS))])]), 1)];
    let (a, spans_a) = two_hosts(busy.clone(), false);
    let (b, spans_b) = two_hosts(idle, false);
    // Host 0's schedule, to the nanosecond, and its VMs' figures are the same whatever host 1 does.
    assert!(!spans_a.is_empty());
    assert_eq!(spans_a, spans_b);
    for name in ["locky", "hog0"] {
        assert_eq!(format!("{:?}", vm(&a, name)), format!("{:?}", vm(&b, name)));
    }
    assert_eq!(format!("{:?}", a.hosts[0]), format!("{:?}", b.hosts[0]));
    assert_ne!(format!("{:?}", a.hosts[1]), format!("{:?}", b.hosts[1]));
    // Each host's policy counts on its own.
    assert_eq!(a.host.context_switches, a.hosts[0].context_switches + a.hosts[1].context_switches);
    // Messages do couple the hosts: the control run's host 0 schedule differs.
    let (_, spans_c) = two_hosts(busy, true);
    assert_ne!(spans_a, spans_c.into_iter().filter(|s| s.dom < 2).collect::<Vec<_>>());
}

/// Eight ranks on four hosts (one 2-vCPU VM each, 2 pCPUs per host) compute 1 ms, except
/// rank 5 (10 ms), then allreduce 8 bytes and exit. `hog_on_2` adds a CPU hog VM on host 2,
/// inserted before the ranks' VM there, so ranks 4 and 5 wait one Credit slice first.
fn allreduce_run(hog_on_2: bool) -> RunMetrics {
    let world = 8;
    let mut domains = Vec::new();
    for host in 0..4 {
        if host == 2 && hog_on_2 {
            domains.push(on_host(domain("hog", VmType::Hit, vec![hog(), hog()]), 2));
        }
        let programs = (2 * host..2 * host + 2)
            .map(|rank| {
                let mut b = vsched_model::ProgramBuilder::new();
                let ms = if rank == 5 { 10 } else { 1 };
                b.push(Instr::Compute(vsched_model::Dur::Fixed(ms * NS_PER_MS)));
                vsched_workloads::mpi::allreduce(&mut b, rank, world, 8, BarrierWait::Spin);
                b.build()
            })
            .collect();
        domains.push(member(&format!("r{host}"), host, "allreduce", programs));
    }
    run_cluster(2, domains, 4, "credit", 200)
}

#[test]
fn an_allreduce_completes_only_when_every_rank_has_contributed() {
    // ⌈log2 8⌉ = 3 dissemination rounds: each rank hears from rank 5 through at most three
    // hops of at most one network latency (plus 6 ns for 8 bytes) after rank 5 contributes.
    let hops_ns = 3 * (LATENCY_NS + 6);
    for (hog_on_2, contributes_ns) in [(false, 10 * NS_PER_MS), (true, 40 * NS_PER_MS)] {
        let m = allreduce_run(hog_on_2);
        let cluster = &m.virtual_clusters[0];
        assert_eq!((cluster.name.as_str(), cluster.ranks), ("allreduce", 8));
        for host in 0..4 {
            let done = completion_ns(&m, &format!("r{host}"));
            assert!(
                done > contributes_ns && done <= contributes_ns + hops_ns,
                "hog {hog_on_2}: VM r{host} finished at {done} ns; rank 5 contributed at {contributes_ns} ns"
            );
        }
        // A rank on a descheduled vCPU (ranks 4 and 5 behind the hog's 30 ms slice) delays all:
        // the VMs on the other hosts spin while they wait.
        if hog_on_2 {
            assert!(vm(&m, "r0").spin_s > 0.070, "r0 spun {} s", vm(&m, "r0").spin_s);
        }
    }
}

/// Where host 1's slot boundaries fall relative to host 0's, in ns, for `clocks`: two hosts
/// (each in lockstep within itself) of one pCPU, each with two CPU hogs under `hybrid`, which switches vCPUs only at its 10 ms
/// slot boundaries (its scheduler ticks).
fn host_1_tick_lag(clocks: &str, seed: u64) -> Time {
    let hog_vm = |name: &str, host: u32| {
        format!("[[vm]]\nname = \"{name}\"\nvcpus = 1\nhost = {host}\n[vm.workload]\nkind = \"cpu_hog\"\n")
    };
    let toml = format!(
        "[cluster]\nhosts = 2\nclocks = \"{clocks}\"\n[host]\npcpus = 1\ndom0_vcpus = 0\ncontext_switch_us = 0\nipi_latency_us = 0\n\
         sched_cost_us = 0\nmemory_latency_ns = 0\nl3_latency_cycles = 0\nclocks = \"lockstep\"\n[scheduler]\nname = \"hybrid\"\n{}{}{}{}[run]\nhorizon_s = 0.1\n",
        hog_vm("a0", 0),
        hog_vm("b0", 0),
        hog_vm("a1", 1),
        hog_vm("b1", 1)
    );
    let (_, spans) = common::traced(&toml, seed);
    let switches = |pcpu: usize| -> Vec<Time> {
        let mut ends: Vec<Time> = spans.iter().filter(|s| s.pcpu == pcpu && s.end < 100 * MS).map(|s| s.end).collect();
        ends.sort();
        ends
    };
    let (host0, host1) = (switches(0), switches(1));
    // Host 0 keeps the original clock: every switch on a multiple of the slot.
    assert!(!host0.is_empty() && host0.iter().all(|t| t % (10 * MS) == 0), "host 0 switches at {host0:?}");
    // Host 1 switches every slot too, all at one lag.
    let lag = host1[0] % (10 * MS);
    assert!(host1.len() >= 8 && host1.iter().all(|t| t % (10 * MS) == lag), "host 1 switches at {host1:?}");
    lag
}

#[test]
fn hosts_clocks_are_independent_unless_aligned() {
    // Real hosts' timers are not synchronized: host 1 ticks at a lag drawn per run.
    let lags: Vec<Time> = (1..=3).map(|seed| host_1_tick_lag("independent", seed)).collect();
    assert!(lags.iter().all(|&l| l > 0), "lags {lags:?}");
    assert!(lags[0] != lags[1] && lags[1] != lags[2], "the lag is drawn per seed: {lags:?}");
    assert_eq!(host_1_tick_lag("independent", 2), lags[1], "and reproducibly");
    // Aligned clocks tick together.
    assert_eq!(host_1_tick_lag("aligned", 1), 0);
}
