//! The hardening issue's reproducers, each refused at validation with one line naming the
//! field: values that wrapped or divided by zero, livelocks, runaway memory. And the rule
//! behind most of them: every integer or number parameter of every policy and workload
//! declares the range its meaning allows, with its default inside, so no product or cast
//! built on a parameter can wrap.

use vsched_model::{ParamDefault, ParamRange, ParamSpec};

fn check(owner: &str, specs: &[ParamSpec]) {
    for spec in specs {
        let default = spec.default.to_value();
        let numeric = matches!(spec.default, ParamDefault::Int(_) | ParamDefault::Float(_));
        assert_eq!(
            numeric,
            spec.range != ParamRange::Any,
            "{owner}.{}: a numeric parameter needs a range, a boolean or string none",
            spec.name
        );
        assert!(spec.range.contains(&default), "{owner}.{}: default {default} outside {:?}", spec.name, spec.range);
    }
}

#[test]
fn every_numeric_parameter_has_a_range_holding_its_default() {
    for p in vsched_policies::REGISTRY {
        check(p.name, p.params);
    }
    for w in vsched_workloads::REGISTRY {
        check(w.name, w.params);
    }
}

#[test]
fn values_outside_a_range_are_refused_with_the_field() {
    let scenario = |scheduler: &str, workload: &str| {
        format!(
            "[host]\npcpus = 2\n[scheduler]\n{scheduler}\n[[vm]]\nname = \"a\"\nvcpus = 2\n[vm.workload]\n{workload}\n"
        )
    };
    let error = |text: String| vsched::validate_scenario(&text, 0).unwrap_err().to_string();
    // The reproducers of the hardening issue: each wrapped or divided by zero before.
    assert_eq!(
        error(scenario("name = \"cfs\"\nmin_granularity_us = 4611686018427387904", "kind = \"cpu_hog\"")),
        "scheduler.min_granularity_us: expected an integer in 100..=1000000, got 4611686018427387904"
    );
    assert_eq!(
        error(scenario("name = \"credit\"", "kind = \"spinlock\"\nlocks = 4294967296")),
        "vm[0].workload.locks: expected an integer in 1..=1000000, got 4294967296"
    );
    assert_eq!(
        error(scenario("name = \"credit\"\nticks_per_tslice = 2147483648", "kind = \"cpu_hog\"")),
        "scheduler.ticks_per_tslice: expected an integer in 1..=1000, got 2147483648"
    );
    assert_eq!(
        error(scenario("name = \"rr\"\nslice_us = 4611686018427387904", "kind = \"cpu_hog\"")),
        "scheduler.slice_us: expected an integer in 1..=10000000, got 4611686018427387904"
    );
    assert_eq!(
        error(scenario("name = \"rr\"", "kind = \"web\"\nio_us = nan")),
        "vm[0].workload.io_us: expected a finite number in [0, 1000000000], got NaN"
    );
    for (policy, key) in [("cosched", "slice_ms"), ("vds", "period_ms")] {
        assert_eq!(
            error(scenario(&format!("name = \"{policy}\"\n{key} = 4611686018427387904"), "kind = \"cpu_hog\"")),
            format!("scheduler.{key}: expected an integer in 1..=10000, got 4611686018427387904")
        );
    }
    assert_eq!(
        error(scenario("name = \"credit\"", "kind = \"kernbench\"\nlocks = 1000000000")),
        "vm[0].workload.locks: expected an integer in 1..=65536, got 1000000000"
    );
    // A value inside its range still runs.
    assert!(vsched::validate_scenario(&scenario("name = \"rr\"\nslice_us = 10000000", "kind = \"cpu_hog\""), 0).is_ok());
}

#[test]
fn host_keys_that_stopped_time_or_overflowed_are_refused() {
    let host = |line: &str| {
        format!("[host]\npcpus = 2\n{line}\n[scheduler]\nname = \"rr\"\n[[vm]]\nname = \"a\"\nvcpus = 2\n[vm.workload]\nkind = \"cpu_hog\"\n")
    };
    let error = |line: &str| vsched::validate_scenario(&host(line), 0).unwrap_err().to_string();
    // A 1e-300 GHz clock made every spin iteration last for ever: simulated time stopped.
    assert_eq!(error("cpu_ghz = 1e-300"), "host.cpu_ghz: expected a number of GHz in [0.1, 10], got 1e-300");
    assert_eq!(
        error("ipi_latency_us = 1e300"),
        "host.ipi_latency_us: expected a number of microseconds in [0, 1000000], got 1e300"
    );
    assert_eq!(
        error("ple_window_cycles = 4294967296"),
        "host.ple_window_cycles: expected an integer in 0..=4294967295, got 4294967296"
    );
    // `vsched bench --sim-s 1e300` ran for ever.
    assert_eq!(
        vsched::bench_json(Some(1e300), 1).unwrap_err().to_string(),
        "--sim-s: expected a number of seconds in (0, 1000000], got 1e300"
    );
}

#[test]
fn a_job_too_large_for_memory_is_refused_before_it_is_built() {
    // A million MPI ranks: each rank's all-to-all has a step per rank and a mailbox counter
    // per rank, so this aborted past 8 GB while validating. Now the estimate from one rank's
    // program refuses it, naming the list that makes it large.
    let ranks = vec!["0"; 1_000_000].join(", ");
    let text = format!(
        "[host]\npcpus = 4\n[scheduler]\nname = \"credit\"\n[[virtual_cluster]]\nname = \"c\"\nvcpus = 1\nhosts = [{ranks}]\n[virtual_cluster.workload]\nkind = \"npb-is\"\n"
    );
    let e = vsched::validate_scenario(&text, 0).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "virtual_cluster[0].hosts: the scenario with 1000000 VMs of this virtual cluster would need about"
        ),
        "{e}"
    );
    assert!(
        e.ends_with(
            "more than the budget of 4.0 GiB; expected a smaller scenario, or --max-memory to raise the budget"
        ),
        "{e}"
    );
    // The same job of 64 ranks fits, and a budget below its estimate refuses it.
    let small = text.replace(&ranks, &vec!["0"; 64].join(", "));
    assert!(vsched::validate_scenario(&small, 0).is_ok());
    let e = vsched::validate_scenario(&small, 1 << 20).unwrap_err().to_string();
    assert!(e.starts_with("host.pcpus: the hosts would need about 64.0 MiB"), "{e}");
}

#[test]
fn the_estimate_of_a_run_is_what_the_budget_checked() {
    // What runs in parallel multiply (`vsched sweep --jobs`, python/vsched/parallel_memory.py):
    // the same figure the budget compares, growing with the job.
    let text = |ranks: usize| {
        let hosts = vec!["0"; ranks].join(", ");
        format!(
            "[host]\npcpus = 4\n[scheduler]\nname = \"credit\"\n[[virtual_cluster]]\nname = \"c\"\nvcpus = 1\nhosts = [{hosts}]\n[virtual_cluster.workload]\nkind = \"npb-is\"\n"
        )
    };
    let small = vsched::estimate_memory_with(&text(64), 0, None).unwrap();
    let large = vsched::estimate_memory_with(&text(4096), 0, None).unwrap();
    assert!((64 << 20) < small && small < large, "{small} {large}");
    let e = vsched::validate_scenario(&text(4096), large - 1).unwrap_err().to_string();
    assert!(e.contains("would need about"), "{e}");
    assert!(vsched::validate_scenario(&text(4096), large).is_ok());
}

#[test]
fn a_vm_due_after_the_run_ended_was_never_created() {
    // The fuzz campaign's finding: `until = "all_done"` ended the run at 0.01 s, before the
    // late VM's start, and its `created_s` said 0.5 s, after the run's end.
    let text = "[host]\npcpus = 2\ndom0_vcpus = 0\n[scheduler]\nname = \"credit\"\n\
        [[vm]]\nname = \"quick\"\nvcpus = 2\n[vm.workload]\nkind = \"spinlock\"\niterations = 10\n\
        [[vm]]\nname = \"late\"\nvcpus = 1\nstart_s = 0.5\n[vm.workload]\nkind = \"cpu_hog\"\n\
        [run]\nhorizon_s = 1\nuntil = \"all_done\"\n";
    let scenario = vsched::Scenario::parse(text).unwrap();
    let m = scenario.build(1).run(scenario.horizon, scenario.until, &mut |_| true).unwrap();
    assert!(m.sim_s < 0.5, "the run ends when the finite workload is done, at {} s", m.sim_s);
    let late = m.vms.iter().find(|v| v.name == "late").unwrap();
    assert_eq!((late.created_s, late.cpu_s), (None, 0.0));
}

#[test]
fn cvs_comm_keeps_a_vcpu_no_shorter_than_credits_min_timer() {
    // The fuzz campaign's case 16770: a signalled pCPU let its vCPU run out its slice, 421 ns
    // of it, a decision the simulator refuses (`MIN_SLICE_NS`); Credit programs no timer
    // shorter than `CSCHED_MIN_TIMER`.
    let toml = include_str!("fuzz_cases/cvs-comm-short-slice.toml");
    let scenario = vsched::Scenario::parse(toml).expect("the case is valid");
    let result = scenario.build(scenario.seed).run(scenario.horizon, scenario.until, &mut |_| true);
    assert!(result.is_ok(), "{:?}", result.err());
}
