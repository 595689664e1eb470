//! Xen core scheduling, `[host] sched_gran = "core" | "socket"` (issue 60), hand-checked on
//! traces of free hosts with SMT (`threads_per_core = 2`).
//!
//! Facts used (RELEASE-4.22.0 `xen/common/sched/core.c`): a unit is the vCPUs of a domain
//! with equal `vcpu_id / 2` (`sched_alloc_unit`), member `k` runs on thread `k` of the core
//! (`unit2vcpu_cpu`), a thread whose member cannot run idles (`sched_unit2vcpu_cpu`), and
//! every `schedule()` is a rendezvous of the core's threads (`sched_wait_rendezvous_in`).

mod common;

use common::*;
use vsched_model::*;

const MS: Time = NS_PER_MS;

/// A free host scenario (see `free_scenario`) with `threads_per_core` and `sched_gran` set.
fn smt_scenario(pcpus: u32, gran: &str, scheduler: &str, vms: &[String], run: &str) -> String {
    free_scenario(pcpus, scheduler, vms, run).replacen(
        "[host]\n",
        &format!("[host]\nthreads_per_core = 2\nsched_gran = \"{gran}\"\n"),
        1,
    )
}

fn refused(toml: &str) -> String {
    match vsched::Scenario::parse(toml) {
        Ok(_) => panic!("scenario accepted"),
        Err(e) => e.to_string(),
    }
}

/// Every pair of spans on two threads of one core (`pcpu / 2`) that overlap in time, as
/// (domain, index) of each.
fn co_running(spans: &[Span]) -> Vec<((DomId, usize), (DomId, usize))> {
    let mut pairs = Vec::new();
    for a in spans {
        for b in spans {
            if a.pcpu / 2 == b.pcpu / 2 && a.pcpu < b.pcpu && a.start < b.end && b.start < a.end {
                pairs.push(((a.dom, a.index), (b.dom, b.index)));
            }
        }
    }
    pairs
}

#[test]
fn two_2_vcpu_vms_on_one_core_never_mix() {
    for policy in ["credit", "credit2"] {
        let vms = [vm_toml("A", 2, "", HOG), vm_toml("B", 2, "", HOG)];
        // Clocks out of step, so that at the default granularity the VMs do share the core.
        let toml = smt_scenario(2, "core", &format!("name = \"{policy}\""), &vms, "horizon_s = 0.5")
            .replace("clocks = \"lockstep\"", "clocks = \"independent\"");
        let (m, spans) = traced(&toml, 1);
        let pairs = co_running(&spans);
        assert!(!pairs.is_empty(), "{policy}: the siblings co-run");
        for (a, b) in pairs {
            assert_eq!(a.0, b.0, "{policy}: two VMs on one core at once: {a:?} {b:?}");
        }
        // Member k on thread k; the SMT model's cross-VM core sharing agrees.
        assert!(spans.iter().all(|s| s.index == s.pcpu % 2), "{policy}");
        assert_eq!(m.host.smt_cross_vm_s, Some(0.0), "{policy}");
        let cpu = traced(&toml.replace("sched_gran = \"core\"", "sched_gran = \"cpu\""), 1).1;
        assert!(co_running(&cpu).iter().any(|(a, b)| a.0 != b.0), "{policy}: at cpu granularity they mix");
        // Both VMs are served, each close to half of the core.
        for name in ["A", "B"] {
            let share = vm(&m, name).cpu_s / 0.5 / 2.0;
            assert!((0.4..=0.6).contains(&share), "{policy}: {name} had {share} of the core");
        }
    }
}

#[test]
fn a_1_vcpu_vm_leaves_its_sibling_idle() {
    // Two 1-vCPU hogs on one 2-thread core: each is a unit of one member, which runs on
    // thread 0; thread 1 never runs anything and is unit-idle whenever a unit holds the core.
    let vms = [vm_toml("A", 1, "", HOG), vm_toml("B", 1, "", HOG)];
    let toml = smt_scenario(2, "core", "name = \"credit\"", &vms, "horizon_s = 0.5");
    let (m, spans) = traced(&toml, 1);
    assert!(spans.iter().all(|s| s.pcpu == 0), "thread 1 ran a vCPU");
    assert!(co_running(&spans).is_empty());
    let busy: Time = spans.iter().map(|s| s.end - s.start).sum();
    let unit_idle = counter(&m, "sched_gran.unit_idle_ns");
    // Thread 1 idles on behalf of a unit for all but the open interval at the end.
    assert!(unit_idle > 0 && unit_idle <= busy, "unit idle {unit_idle} ns, busy {busy} ns");
    assert!(unit_idle as f64 > 0.8 * 500.0 * MS as f64, "unit idle {unit_idle} ns");
    // At the default granularity both run all the time.
    let m = run(&toml.replace("sched_gran = \"core\"", "sched_gran = \"cpu\""), 1);
    assert!(vm(&m, "A").cpu_s > 0.45 && vm(&m, "B").cpu_s > 0.45);
    assert_eq!(counter(&m, "sched_gran.unit_idle_ns"), 0);
}

#[test]
fn an_8_vcpu_barrier_vm_loses_its_pairs_together() {
    // An 8-vCPU bulk-synchronous VM with blocking barriers beside a 4-vCPU hog on 4 cores:
    // vCPUs 2i and 2i+1 are a unit, so they only ever run on the two threads of one core, and
    // never beside another unit's vCPU.
    let bsp = "kind = \"bsp\"\nsupersteps = 200\ncompute_ms = 1.0\njitter = 0.2\nwait = \"block\"";
    let vms = [vm_toml("bsp", 8, "", bsp), vm_toml("hog", 4, "", HOG)];
    for policy in ["credit", "credit2"] {
        let toml = smt_scenario(8, "core", &format!("name = \"{policy}\""), &vms, "horizon_s = 1");
        let (m, spans) = traced(&toml, 1);
        assert!(spans.iter().all(|s| s.index % 2 == s.pcpu % 2), "{policy}: member k on thread k");
        let pairs = co_running(&spans);
        for (a, b) in &pairs {
            assert_eq!((a.0, a.1 / 2), (b.0, b.1 / 2), "{policy}: two units on one core");
        }
        // The barrier VM's pairs did co-run, and its blocked members left threads idle.
        assert!(pairs.iter().any(|(a, _)| a.0 == 0), "{policy}");
        assert!(counter(&m, "sched_gran.unit_idle_ns") > 0, "{policy}");
    }
}

#[test]
fn a_rendezvous_costs_ipi_latencies_at_each_unit_switch() {
    // One core, two 2-vCPU hogs, IPIs of 20 µs and nothing else costs. At a slice end the
    // thread that holds the slice enters the rendezvous and signals its sibling, which
    // arrives one IPI later, decides, and switches at once; the first thread is released by
    // a reschedule IPI and switches one IPI after that. So each switch of units leaves
    // thread `owner` idle 2 IPI latencies and its sibling 1.
    let ipi: Time = 20_000;
    let vms = [vm_toml("A", 2, "", HOG), vm_toml("B", 2, "", HOG)];
    let toml = smt_scenario(2, "core", "name = \"credit\"", &vms, "horizon_s = 0.5").replacen(
        "clocks = \"lockstep\"\n",
        "clocks = \"lockstep\"\nipi_latency_us = 20\n",
        1,
    );
    let (m, spans) = traced(&toml, 1);
    let rendezvous = counter(&m, "sched_gran.rendezvous");
    assert!(rendezvous >= 2, "{rendezvous} rendezvous");
    let wait = counter(&m, "sched_gran.rendezvous_wait_ns");
    assert!(wait >= rendezvous * ipi, "wait {wait} ns over {rendezvous} rendezvous");
    assert!(wait <= rendezvous * 3 * ipi, "wait {wait} ns over {rendezvous} rendezvous");
    // The thread that held the slice waits 2 IPI latencies at each switch of units (its
    // first run starts 1 IPI late: both threads enter the first rendezvous at 0); the one
    // that arrives last switches at once. The counter is exactly those waits.
    let mut waited = 0;
    for p in 0..2 {
        let runs = on(&spans, p);
        assert!(runs[0].1 == 0 || runs[0].1 == ipi, "thread {p} starts at {}", runs[0].1);
        waited += runs[0].1;
        for w in runs.windows(2) {
            let gap = w[1].1 - w[0].2;
            assert!(gap == 0 || gap == 2 * ipi, "thread {p}: gap {gap} ns between {w:?}");
            waited += gap;
        }
    }
    assert_eq!(wait, waited);
    // With free IPIs a rendezvous costs nothing.
    let free = run(&toml.replace("ipi_latency_us = 20\n", ""), 1);
    assert_eq!(counter(&free, "sched_gran.rendezvous_wait_ns"), 0);
    assert!(counter(&free, "sched_gran.rendezvous") > 0);
}

#[test]
fn credit_is_burned_per_unit_for_the_time_it_holds_the_core() {
    // A: 2 vCPUs, one a hog and one idle; B: 2 hogs; one core. Credit shares the core between
    // the two units by the time each holds it, idle thread included, so A's one hog gets half
    // of one thread and B's two hogs half of two: A runs half as much as B. At the default
    // thread's idle time counts against A.
    let vms = [vm_toml("A", 2, "idle_vcpus = 1", HOG), vm_toml("B", 2, "", HOG)];
    for policy in ["credit", "credit2"] {
        let toml = smt_scenario(2, "core", &format!("name = \"{policy}\""), &vms, "horizon_s = 2");
        let m = run(&toml, 1);
        let (a, b) = (vm(&m, "A").cpu_s / 2.0, vm(&m, "B").cpu_s / 2.0);
        assert!((0.4..=0.6).contains(&a), "{policy}: A ran {a} of a thread");
        assert!((0.8..=1.2).contains(&b), "{policy}: B ran {b} of a thread");
        // While A holds the core its idle vCPU's thread idles on its behalf.
        let unit_idle = counter(&m, "sched_gran.unit_idle_ns") as f64 / 1e9;
        assert!((unit_idle - vm(&m, "A").cpu_s).abs() < 0.1, "{policy}: unit idle {unit_idle} s");
    }
}

#[test]
fn domain_0_is_scheduled_in_units_too() {
    // A Xen host's Domain-0 (one vCPU per pCPU, woken by its kernel's timers) beside a
    // 4-vCPU hog on 2 cores: no core ever runs two units at once, Domain-0's included.
    let vms = [vm_toml("A", 4, "", HOG)];
    // On the default hardware: Domain-0's idle wake-ups cost nothing on the ideal one.
    let toml = scenario(4, "name = \"credit\"", &vms, "horizon_s = 1")
        .replace("dom0_vcpus = 0\n", "threads_per_core = 2\nsched_gran = \"core\"\n");
    let (_, spans) = traced(&toml, 1);
    assert!(spans.iter().any(|s| s.dom == 0), "Domain-0 ran");
    for (a, b) in co_running(&spans) {
        assert_eq!((a.0, a.1 / 2), (b.0, b.1 / 2));
    }
}

#[test]
fn socket_granularity_runs_a_unit_per_socket() {
    // 2 sockets of 2 cores of 2 threads: units of 4 vCPUs, one per socket at a time.
    let vms = [vm_toml("A", 4, "", HOG), vm_toml("B", 4, "", HOG), vm_toml("C", 4, "", HOG)];
    let toml = smt_scenario(8, "socket", "name = \"credit\"", &vms, "horizon_s = 0.5").replacen(
        "[host]\n",
        "[host]\nsockets = 2\n",
        1,
    );
    let (_, spans) = traced(&toml, 1);
    for a in &spans {
        assert_eq!(a.index, a.pcpu % 4, "member k on thread k of the socket");
        for b in &spans {
            if a.pcpu / 4 == b.pcpu / 4 && a.start < b.end && b.start < a.end {
                assert_eq!(a.dom, b.dom, "two units on one socket: {a:?} {b:?}");
            }
        }
    }
}

#[test]
fn one_thread_per_core_is_the_cpu_granularity() {
    // Xen rendezvouses only when a resource has more than one thread: byte-identical metrics.
    let vms = [vm_toml("A", 2, "", HOG), vm_toml("B", 3, "", HOG)];
    let toml = free_scenario(2, "name = \"credit\"", &vms, "horizon_s = 0.3");
    let core = toml.replacen("[host]\n", "[host]\nsched_gran = \"core\"\n", 1);
    let (a, b) = (run(&toml, 3), run(&core, 3));
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

#[test]
fn bad_granularities_are_refused_naming_the_field() {
    let vms = [vm_toml("A", 2, "", HOG)];
    let base = smt_scenario(2, "core", "name = \"credit\"", &vms, "horizon_s = 0.1");
    let e = refused(&base.replace("\"core\"", "\"thread\""));
    assert!(e.contains("host.sched_gran") && e.contains("\"thread\""), "{e}");
    let e = refused(&base.replace("name = \"credit\"", "name = \"rr\""));
    assert!(e.contains("host.sched_gran") && e.contains("credit and credit2"), "{e}");
    let e = refused(&base.replace("name = \"credit\"", "name = \"ytt\""));
    assert!(e.contains("host.sched_gran") && e.contains("ytt"), "{e}");
    let e = refused(&base.replace("name = \"credit\"", "name = \"credit\"\nxen_version = \"4.1\""));
    assert!(e.contains("host.sched_gran") && e.contains("4.13"), "{e}");
    let e = refused(&base.replace("name = \"credit\"", "name = \"credit2\"\nxen_version = \"4.12\""));
    assert!(e.contains("host.sched_gran") && e.contains("4.13"), "{e}");
    assert!(!e.contains('\n'));
    let late = base.replace("vcpus = 2\n", "vcpus = 2\nstart_s = 0.05\n");
    let e = refused(&late);
    assert!(e.contains("host.sched_gran") && e.contains("start_s"), "{e}");
}
