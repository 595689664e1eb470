//! Linux core scheduling, `[scheduler] core_sched = "vm"` under `cfs`, `eevdf` and the KVM
//! policies (issue 60), hand-checked on traces of free SMT hosts (`threads_per_core = 2`, every
//! machine cost 0, clocks in lockstep, the host's own threads off so that only the VMs run).
//!
//! Facts used (Linux 6.12.19, kernel/sched/core.c `pick_next_task`, `try_steal_cookie`;
//! fair.c `task_tick_core`): the threads of a core run tasks of one cookie at a time, each
//! VM's vCPU threads share a cookie, a thread with no task of the core's cookie is forced idle,
//! and a task that keeps a sibling forced idle yields at a tick once it ran half its slice.

mod common;

use common::*;
use vsched_model::*;

const POLICIES: [&str; 4] = ["cfs", "eevdf", "kvm-dy", "kvm-eevdf"];

/// A free SMT host with the host's threads off, under `policy` with `core_sched`.
fn smt_scenario(pcpus: u32, policy: &str, core_sched: &str, vms: &[String], run: &str) -> String {
    let scheduler = format!("name = \"{policy}\"\ncore_sched = \"{core_sched}\"");
    free_scenario(pcpus, &scheduler, vms, run).replacen(
        "[host]\n",
        "[host]\nthreads_per_core = 2\nhost_threads = false\n",
        1,
    )
}

fn refused(toml: &str) -> String {
    match vsched::Scenario::parse(toml) {
        Ok(_) => panic!("scenario accepted"),
        Err(e) => e.to_string(),
    }
}

/// Time two different VMs ran at once on the two threads of one core (`pcpu / 2`).
fn cross_vm_ns(spans: &[Span]) -> Time {
    let mut total = 0;
    for a in spans {
        for b in spans {
            if a.pcpu / 2 == b.pcpu / 2 && a.pcpu < b.pcpu && a.dom != b.dom {
                total += a.end.min(b.end).saturating_sub(a.start.max(b.start));
            }
        }
    }
    total
}

fn busy_ns(spans: &[Span], dom: DomId) -> Time {
    spans.iter().filter(|s| s.dom == dom).map(|s| s.end - s.start).sum()
}

#[test]
fn two_2_vcpu_vms_on_one_core_never_mix() {
    // Two 2-vCPU bulk-synchronous VMs whose vCPUs block at barriers, with jittered phases, on
    // one 2-thread core: wake-ups, blocks and ticks all reach the core-wide pick.
    let bsp = "kind = \"bsp\"\nsupersteps = 100\ncompute_ms = 1.0\njitter = 0.3\nwait = \"block\"";
    let vms = [vm_toml("A", 2, "", bsp), vm_toml("B", 2, "", bsp)];
    for policy in POLICIES {
        let toml = smt_scenario(2, policy, "vm", &vms, "horizon_s = 2");
        let (m, spans) = traced(&toml, 1);
        assert_eq!(cross_vm_ns(&spans), 0, "{policy}: two VMs ran on one core at once");
        assert_eq!(m.host.smt_cross_vm_s, Some(0.0), "{policy}");
        for name in ["A", "B"] {
            assert!(vm(&m, name).completion_s.is_some(), "{policy}: {name} did not finish");
        }
        assert!(counter(&m, "core_sched.forced_idle_ns") > 0, "{policy}");
        // Off, the same host mixes them.
        let (_, off) = traced(&toml.replace("core_sched = \"vm\"", "core_sched = \"off\""), 1);
        assert!(cross_vm_ns(&off) > 0, "{policy}: without core scheduling the VMs share the core");
    }
}

#[test]
fn a_1_vcpu_vm_forces_its_sibling_idle() {
    // Two 1-vCPU hogs on one 2-thread core: each VM has one task, so whichever runs leaves the
    // other thread forced idle, and they take turns. Off, both run all the time.
    let vms = [vm_toml("A", 1, "", HOG), vm_toml("B", 1, "", HOG)];
    for policy in POLICIES {
        let toml = smt_scenario(2, policy, "vm", &vms, "horizon_s = 0.5");
        let (m, spans) = traced(&toml, 1);
        assert_eq!(cross_vm_ns(&spans), 0, "{policy}");
        let (a, b) = (busy_ns(&spans, 0), busy_ns(&spans, 1));
        assert!(a + b <= 500 * NS_PER_MS, "{policy}: one thread at a time, {a} + {b} ns");
        for (name, busy) in [("A", a), ("B", b)] {
            assert!(busy > 150 * NS_PER_MS, "{policy}: {name} ran only {busy} ns");
        }
        // The forced idle: the idle thread's whole time, while the other's VM ran.
        let forced = counter(&m, "core_sched.forced_idle_ns");
        assert!(forced > 400 * NS_PER_MS && forced <= a + b, "{policy}: forced idle {forced} ns of {}", a + b);
        // Linux's per-task core_forceidle_sum: each VM is charged the forced idle while it ran.
        let sums: f64 = ["A", "B"].iter().map(|n| vm(&m, n).policy_metrics["core_forceidle_sum_s"]).sum();
        assert!((sums - forced as f64 / 1e9).abs() < 1e-6, "{policy}: {sums} s against {forced} ns");
        let off = run(&toml.replace("core_sched = \"vm\"", "core_sched = \"off\""), 1);
        assert!(vm(&off, "A").cpu_s > 0.45 && vm(&off, "B").cpu_s > 0.45, "{policy}");
        assert_eq!(counter(&off, "core_sched.forced_idle_ns"), 0);
        assert!(vm(&off, "A").policy_metrics.is_empty(), "{policy}: no core figures when off");
    }
}

#[test]
fn a_split_pair_keeps_a_thread_forced_idle_beside_an_idle_core() {
    // One 2-vCPU hog VM and one 1-vCPU hog on two cores (4 threads). Placed at fork on the
    // idlest core each (`find_idlest_cpu`), the pair's vCPUs land on cores 0 and 1 and the solo
    // VM beside pair vCPU 0 on core 0. Core scheduling moves no task to make a core's tasks
    // match: core 0 alternates its two cookies, one thread forced idle all the time, while
    // pCPU 3 stays idle (its newly idle pull needs a queue of 2, and 6.12's balancer leaves
    // a fully busy core beside one with a single idle thread, `sched_balance_find_src_group`).
    let vms = [vm_toml("pair", 2, "", HOG), vm_toml("solo", 1, "", HOG)];
    let horizon = 200 * NS_PER_MS;
    for policy in POLICIES {
        let toml = smt_scenario(4, policy, "vm", &vms, "horizon_s = 0.2");
        let (m, spans) = traced(&toml, 1);
        assert_eq!(cross_vm_ns(&spans), 0, "{policy}");
        let on_pcpu = |p: PcpuId| spans.iter().filter(|s| s.pcpu == p).map(|s| s.end - s.start).sum::<Time>();
        assert_eq!(on_pcpu(0) + on_pcpu(1), horizon, "{policy}: core 0 runs one thread at a time");
        assert_eq!(on_pcpu(2), horizon, "{policy}: pair vCPU 1 holds pCPU 2");
        assert_eq!(on_pcpu(3), 0, "{policy}: pCPU 3 stays idle");
        assert_eq!(counter(&m, "core_sched.forced_idle_ns"), horizon, "{policy}");
        assert!(vm(&m, "solo").cpu_s > 0.05, "{policy}: the solo VM gets its turns");
    }
}

#[test]
fn a_forced_idle_thread_steals_a_task_of_its_cores_cookie() {
    // Three 2-vCPU hogs on 2 cores with the clocks out of step: the queues hold tasks of every
    // VM, and a thread left without a task of its core's cookie takes one from another pCPU
    // (`try_steal_cookie`) rather than stay idle.
    let vms = [vm_toml("A", 2, "", HOG), vm_toml("B", 2, "", HOG), vm_toml("C", 2, "", HOG)];
    for policy in ["cfs", "eevdf"] {
        let toml = smt_scenario(4, policy, "vm", &vms, "horizon_s = 1")
            .replace("clocks = \"lockstep\"", "clocks = \"independent\"");
        let (m, spans) = traced(&toml, 1);
        assert!(counter(&m, "core_sched.steals") > 0, "{policy}: no steal");
        assert_eq!(m.host.smt_cross_vm_s, Some(0.0), "{policy}");
        // Six tasks on four threads: the host stays busy most of the time despite forced idle.
        let busy: Time = spans.iter().map(|s| s.end - s.start).sum();
        assert!(busy as f64 > 0.8 * 4.0 * 1e9, "{policy}: busy {busy} ns of 4 s");
    }
}

/// The "forced idle" samples of a streamed (detailed) trace: (pCPU, at, value).
#[derive(Clone, Default)]
struct ForcedIdleSamples(std::rc::Rc<std::cell::RefCell<Vec<(PcpuId, Time, i64)>>>);

impl vsched_model::TraceSink for ForcedIdleSamples {
    fn event(&mut self, event: &TraceEvent) -> std::io::Result<()> {
        if let TraceEvent::Counter(c) = event {
            if let (CounterOf::Pcpu(p), "forced idle") = (c.of, c.name) {
                self.0.borrow_mut().push((p, c.at, c.value));
            }
        }
        Ok(())
    }

    fn finish(&mut self, _events: u64, _dropped: u64) -> std::io::Result<()> {
        Ok(())
    }
}

/// Thread-ns spent at 1 on the pCPUs' "forced idle" trace tracks, to `horizon`.
fn forced_idle_track_ns(toml: &str, horizon: Time) -> Time {
    let scenario = vsched::Scenario::parse(toml).expect("scenario");
    let mut sim = scenario.build(1);
    let samples = ForcedIdleSamples::default();
    sim.stream_trace(1_000_000, Box::new(samples.clone()));
    sim.run(scenario.horizon, scenario.until, &mut |_| true).expect("run");
    let mut since: std::collections::BTreeMap<PcpuId, Time> = Default::default();
    let mut total = 0;
    for &(p, at, value) in samples.0.borrow().iter() {
        match (value, since.remove(&p)) {
            (1, None) => drop(since.insert(p, at)),
            (0, Some(t)) => total += at - t,
            (0, None) => {} // a track may start at 0
            other => panic!("pCPU {p}: forced idle {other:?} at {at}"),
        }
    }
    total + since.values().map(|&t| horizon - t).sum::<Time>()
}

#[test]
fn perfetto_shows_forced_idle_as_the_counter_counts_it() {
    let vms = [vm_toml("A", 1, "", HOG), vm_toml("B", 1, "", HOG)];
    for policy in ["cfs", "eevdf"] {
        let toml = smt_scenario(2, policy, "vm", &vms, "horizon_s = 0.5");
        let m = run(&toml, 1);
        let track = forced_idle_track_ns(&toml, 500 * NS_PER_MS);
        assert_eq!(track, counter(&m, "core_sched.forced_idle_ns"), "{policy}");
    }
}

#[test]
fn off_and_one_thread_per_core_change_nothing() {
    // `core_sched = "vm"` on a host without SMT is Linux's core scheduling with one thread per
    // core: each pCPU's own pick, byte for byte.
    let bsp = "kind = \"bsp\"\nsupersteps = 100\ncompute_ms = 1.0\njitter = 0.2\nwait = \"block\"";
    let vms = [vm_toml("bsp", 4, "", bsp), vm_toml("hog", 2, "", HOG)];
    for policy in POLICIES {
        let with = scenario(4, &format!("name = \"{policy}\"\ncore_sched = \"vm\""), &vms, "horizon_s = 1");
        let without = scenario(4, &format!("name = \"{policy}\""), &vms, "horizon_s = 1");
        let (a, b) = (run(&with, 3), run(&without, 3));
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{policy}");
    }
}

#[test]
fn bad_core_sched_is_refused_naming_the_field() {
    let vms = [vm_toml("A", 2, "", HOG)];
    let e = refused(&smt_scenario(2, "cfs", "yes", &vms, "horizon_s = 0.1"));
    assert!(e.contains("core_sched") && e.contains("\"off\""), "{e}");
    // Core scheduling arrived in Linux 5.14.
    let old = smt_scenario(2, "cfs", "vm", &vms, "horizon_s = 0.1")
        .replace("core_sched", "kvm_version = \"5.4\"\ncore_sched");
    let e = refused(&old);
    assert!(e.contains("core_sched") && e.contains("5.14"), "{e}");
    // Not a parameter of the Xen policies.
    let e = refused(&smt_scenario(2, "credit", "vm", &vms, "horizon_s = 0.1"));
    assert!(e.contains("core_sched"), "{e}");
}
