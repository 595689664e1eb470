//! Issue 17 item 6: the driver domain as a real one — disk requests through blkback and a
//! FIFO disk, any idle dom0 vCPU taking the next pass, dom0's guest-kernel timer wake-ups — each checked
//! against times computed by hand on a host with zero machine costs, in lockstep.

mod common;
use common::*;
use vsched_model::{
    driver_guest, Dur, GuestTick, HostConfig, Instr, IoConfig, RunMetrics, Simulation, Time, Until, VmType, NS_PER_MS,
    NS_PER_US,
};

const US: Time = NS_PER_US;
const MS: Time = NS_PER_MS;

/// A disk of 5 ms positioning and 100 MB/s (200 000 bytes take 2 ms), blkback 10 µs per
/// request. (`dom0()`'s guest kernel has no timers: they are tested on their own below.)
fn io() -> IoConfig {
    IoConfig { disk_seek_ns: 5 * MS, disk_mb_per_s: 100.0, blkback_request_ns: 10 * US }
}

/// `free_host` with `io()` and an IPI latency of 2 µs: every wake of a blocked vCPU (an
/// event-channel notification, a completion) tickles an idle pCPU, which schedules 2 µs later.
fn host(pcpus: usize) -> HostConfig {
    HostConfig { ipi_latency_ns: 2 * US, io: io(), ..free_host(pcpus) }
}

/// A driver domain of `vcpus` vCPUs.
fn dom0(vcpus: usize) -> vsched_model::DomainConfig {
    vsched_model::DomainConfig { driver: true, guest: driver_guest(vcpus), ..domain("dom0", VmType::Hit, vec![]) }
}

/// A finite VM whose vCPUs each compute 1 ms (so that dom0 has gone idle), then read
/// `bytes` from disk.
fn reader(vcpus: usize, bytes: u64) -> vsched_model::DomainConfig {
    let p = program(&[Instr::Compute(Dur::Fixed(MS)), Instr::Disk { bytes }]);
    let mut d = domain("vm", VmType::Hit, vec![p; vcpus]);
    d.guest.finite = true;
    d
}

fn run(host: HostConfig, domains: Vec<vsched_model::DomainConfig>) -> RunMetrics {
    Simulation::new(host, domains, policy("credit", &[]), 1).run(100 * MS, Until::AllDone, &mut |_| true).unwrap()
}

fn completion_ns(m: &RunMetrics, name: &str) -> Time {
    (vm(m, name).completion_s.expect("finished") * 1e9).round() as Time
}

#[test]
fn without_a_driver_domain_a_request_takes_the_disk_time_alone() {
    // Positioning 5 ms + 200 000 bytes at 100 MB/s (2 ms), after the 1 ms of compute; the
    // completion wakes the vCPU, whose idle pCPU hears of it 2 µs later.
    let m = run(host(1), vec![reader(1, 200_000)]);
    assert_eq!(completion_ns(&m, "vm"), MS + 5 * MS + 2 * MS + 2 * US);
    let io = m.io.as_ref().expect("a disk request was issued");
    assert_eq!((io.disk_requests, io.disk_completed, io.disk_bytes), (1, 1, 200_000));
    assert_eq!(io.disk_latency_ms_mean, Some(7.0));
}

#[test]
fn through_the_driver_domain_a_request_adds_blkback_and_two_notifications() {
    // At 1 ms the request wakes the idle dom0 vCPU, which runs 2 µs later (the tickle's IPI),
    // spends 10 µs in blkback and submits it at 1.012 ms; the disk finishes at 8.012 ms and
    // its interrupt wakes dom0 (running at 8.014 ms), which completes it (no CPU charged) and
    // wakes the guest at once; the guest runs 2 µs later: 8.016 ms.
    let m = run(host(2), vec![dom0(1), reader(1, 200_000)]);
    assert_eq!(completion_ns(&m, "vm"), MS + 2 * US + 10 * US + 7 * MS + 2 * US + 2 * US);
    assert!((vm(&m, "dom0").cpu_s - 10e-6).abs() < 1e-12, "dom0 ran {} s", vm(&m, "dom0").cpu_s);
    // The request's latency runs to the guest's wake-up (8.014 ms), not to its run.
    assert_eq!(m.io.as_ref().unwrap().disk_latency_ms_mean, Some(7.014));
}

#[test]
fn the_disk_serves_requests_one_at_a_time_in_arrival_order() {
    // Without dom0: two vCPUs ask at 1 ms; the first is done at 8 ms, the second waits 7 ms
    // for the disk and is done at 15 ms (its vCPU runs 2 µs later).
    let m = run(host(2), vec![reader(2, 200_000)]);
    assert_eq!(completion_ns(&m, "vm"), MS + 2 * 7 * MS + 2 * US);
    let io = m.io.as_ref().unwrap();
    assert_eq!((io.disk_wait_ms_mean, io.disk_latency_ms_mean), (Some(3.5), Some(10.5)));
    assert!((io.disk_busy_s - 14e-3).abs() < 1e-12);
    // With a 1-vCPU dom0: it submits the first at 1.012 ms and the second at 1.022 ms, which
    // starts when the first ends (8.012 ms) and ends at 15.012 ms; dom0 runs for it 2 µs
    // later and the guest 2 µs after that.
    let m = run(host(3), vec![dom0(1), reader(2, 200_000)]);
    assert_eq!(completion_ns(&m, "vm"), MS + 2 * US + 10 * US + 2 * 7 * MS + 2 * US + 2 * US);
    assert!((vm(&m, "dom0").cpu_s - 20e-6).abs() < 1e-12);
}

/// The spans dom0's vCPUs ran, as (vCPU index, start, end), and the run's metrics: two
/// requests at 1 ms on an instant disk (no positioning, empty requests), 100 µs of blkback
/// each, so what is left is dom0's CPU.
fn dom0_spans(dom0_vcpus: usize) -> (RunMetrics, Vec<(usize, Time, Time)>) {
    let io = IoConfig { disk_seek_ns: 0, blkback_request_ns: 100 * US, ..io() };
    let mut sim =
        Simulation::new(HostConfig { io, ..host(4) }, vec![dom0(dom0_vcpus), reader(2, 0)], policy("credit", &[]), 1);
    sim.enable_trace(1_000);
    let m = sim.run(100 * MS, Until::AllDone, &mut |_| true).unwrap();
    let spans =
        sim.take_trace().unwrap().spans().iter().filter(|s| s.dom == 0).map(|s| (s.index, s.start, s.end)).collect();
    (m, spans)
}

#[test]
fn any_idle_driver_domain_vcpu_takes_the_next_pass() {
    // Two dom0 vCPUs take one submission each, in parallel: both run from 1.002 ms (woken at
    // 1 ms, 2 µs for the tickle) to 1.102 ms. (Their completions take no CPU, so no span.)
    let (_, spans) = dom0_spans(2);
    assert_eq!(spans, vec![(0, MS + 2 * US, MS + 102 * US), (1, MS + 2 * US, MS + 102 * US)]);
    // One dom0 vCPU does both in turn, from 1.002 to 1.202 ms.
    let (m, spans) = dom0_spans(1);
    assert_eq!(spans, vec![(0, MS + 2 * US, MS + 202 * US)]);
    assert!((vm(&m, "dom0").cpu_s - 200e-6).abs() < 1e-12);
}

/// One pCPU shared by a CPU hog and a 1-vCPU dom0 whose tickless guest kernel wakes it 100
/// times a second (every 10 ms) when idle, each timer interrupt costing 50 µs, for 1 s.
fn dom0_timer_run() -> RunMetrics {
    let tick = GuestTick::Tickless { hz: 250, idle_wakes_per_s: 100.0 };
    let hog_vm = domain("hog", VmType::Hit, vec![hog()]);
    let host = HostConfig { timer_irq_ns: 50 * US, io: io(), ..free_host(1) };
    Simulation::new(host, vec![vsched_model::DomainConfig { tick, ..dom0(1) }, hog_vm], policy("credit", &[]), 1)
        .run(1_000 * MS, Until::Horizon, &mut |_| true)
        .unwrap()
}

#[test]
fn an_idle_driver_domain_wakes_at_its_timer_rate_and_boosts_past_a_hog() {
    let m = dom0_timer_run();
    // In lockstep the timer fires at 10, 20, ..., 1000 ms: 100 wakes by the horizon.
    assert_eq!(vm(&m, "dom0").timer_wakes, 100);
    // Each wake goes through Credit's wake: dom0 is BOOSTed, preempts the hog at once and
    // runs its 50 µs; the last wake, at the horizon itself, has no time left to run. BOOST is
    // granted once: only a tick that finds dom0 running ends it (`csched_tick`), and in
    // lockstep dom0's wakes fall on tick instants, where the tick comes first and finds the hog.
    assert_eq!(m.host.policy_counters.get("credit.boosts"), Some(&1));
    let dom0_cpu = vm(&m, "dom0").cpu_s;
    assert!((dom0_cpu - 99.0 * 50e-6).abs() < 1e-12, "dom0 ran {dom0_cpu} s");
    // Timer wake-ups are not thread wake-ups: no wake latency is recorded for them.
    assert_eq!(vm(&m, "dom0").wake_latency_us_mean, None);
}

#[test]
fn the_disk_workload_runs_from_a_scenario_file_through_dom0() {
    // `disk`: 3 requests of 4 KiB, no think time; one 1-vCPU dom0; IPIs are free on the ideal
    // host. Each request: 10 µs of blkback, then 12.87 ms + 4096 B / 138 MB/s (29 681.16 ns,
    // rounded to 29 681 ns) on the disk.
    let dom0_host = format!("{FREE_HOST}\ndom0_idle_wakes_per_s = 0");
    let text = scenario(
        2,
        "name = \"credit\"",
        &[vm_toml("io", 1, "", "kind = \"disk\"\nrequests = 3")],
        "horizon_s = 1.0\nuntil = \"all_done\"",
    )
    .replacen("pcpus = 2\n", &format!("pcpus = 2\n{dom0_host}\n"), 1)
    .replacen("dom0_vcpus = 0", "dom0_vcpus = 1", 1);
    let m = common::run(&text, 1);
    let per_request = 10 * US + 12_870 * US + 29_681;
    assert_eq!(completion_ns(&m, "io"), 3 * per_request);
    assert_eq!(m.io.as_ref().unwrap().disk_requests, 3);
    // The same guest on a host without a driver domain pays the disk alone.
    let m = common::run(&text.replace("dom0_vcpus = 1", "dom0_vcpus = 0"), 1);
    assert_eq!(completion_ns(&m, "io"), 3 * (12_870 * US + 29_681));
}

#[test]
fn disk_io_and_dom0_timers_are_deterministic_with_independent_clocks() {
    let text = scenario(
        2,
        "name = \"credit\"",
        &[vm_toml("io", 2, "", "kind = \"disk\"\nthink_us = 500"), vm_toml("hog", 2, "", HOG)],
        "horizon_s = 0.5",
    )
    .replacen("dom0_vcpus = 0", "dom0_vcpus = 2", 1);
    let json = |seed| serde_json::to_string(&common::run(&text, seed)).unwrap();
    assert_eq!(json(7), json(7));
    assert_ne!(json(7), json(8));
}

/// The domains a scenario builds, as (name, vCPUs).
fn domains_of(toml: &str) -> Vec<(String, usize)> {
    let s = vsched::Scenario::parse(toml).unwrap_or_else(|e| panic!("refused: {e}"));
    s.vms.iter().map(|v| (v.name.clone(), v.vcpus)).collect()
}

#[test]
fn a_xen_host_boots_a_driver_domain_by_default_a_kvm_host_none() {
    // Xen gives Domain-0 one vCPU per pCPU unless dom0_max_vcpus says otherwise; a KVM host
    // runs its I/O in the host kernel; `rr` belongs to no hypervisor.
    let text = |policy: &str, host: &str| {
        format!(
            "[host]\npcpus = 3\n{host}\n[scheduler]\nname = \"{policy}\"\n{}\n[run]\nhorizon_s = 0.1\n",
            vm_toml("hog", 1, "", HOG)
        )
    };
    let with_dom0 = vec![("dom0".to_string(), 3), ("hog".to_string(), 1)];
    let bare = vec![("hog".to_string(), 1)];
    for p in ["credit", "balance", "ytt", "yth", "cs", "pcs", "bcs", "cds", "hybrid", "vds", "cosched", "cvs-comm"] {
        assert_eq!(domains_of(&text(p, "")), with_dom0, "{p}");
        assert_eq!(domains_of(&text(p, "dom0_vcpus = 0")), bare, "{p}: dom0_vcpus = 0 removes it");
    }
    for p in ["cfs", "kvm-dy", "rr"] {
        assert_eq!(domains_of(&text(p, "")), bare, "{p}");
    }
    assert_eq!(domains_of(&text("cfs", "dom0_vcpus = 2"))[0], ("dom0".to_string(), 2), "asked for, any host has one");
    // A cluster's hosts each boot their own.
    let cluster = text("credit", "")
        .replace("[host]", "[cluster]\nhosts = 2\n[host]")
        .replace("[[vm]]\nname = \"hog\"\nvcpus = 1\n", "[[vm]]\nname = \"hog\"\nvcpus = 1\nhost = 1\n");
    let names: Vec<String> = domains_of(&cluster).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["dom0.0", "dom0.1", "hog"]);
}

#[test]
fn a_client_request_passes_netback_before_the_server_sees_it() {
    let packet = vsched_model::NetworkConfig::default().dom0_packet_ns;
    assert_eq!(packet, 2 * US, "the arithmetic below takes netback's 2 µs per packet");
    // Without a driver domain the arrival at 1 ms wakes the server, which runs 2 µs later
    // (the tickle's IPI) and ends the request at 1.102 ms: 102 µs after its arrival.
    let m = run(host(2), vec![server()]);
    assert_eq!(completion_ns(&m, "web"), MS + 2 * US + 100 * US + MS);
    assert_eq!(vm(&m, "web").latency_ms_mean, Some(0.102));
    // Through dom0: the arrival wakes dom0's vCPU (running 2 µs later), which receives the
    // packet in 2 µs and wakes the server at once (running 2 µs later, at 1.006 ms): the
    // request ends at 1.106 ms, 106 µs after it reached the NIC. Then dom0 sends the reply's
    // 2 packets: 4 µs more of its CPU, 6 µs in all.
    let m = run(host(2), vec![dom0(1), server()]);
    assert_eq!(completion_ns(&m, "web"), MS + 2 * US + packet + 2 * US + 100 * US + MS);
    assert_eq!(vm(&m, "web").latency_ms_mean, Some(0.106));
    assert!((vm(&m, "dom0").cpu_s - 6e-6).abs() < 1e-12, "dom0 ran {} s", vm(&m, "dom0").cpu_s);
}
