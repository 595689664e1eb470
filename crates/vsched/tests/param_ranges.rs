//! Every integer or number parameter of every policy and workload declares the range its
//! meaning allows, and its default lies in it: the scenario loader refuses what is outside,
//! so no product or cast built on a parameter can wrap.

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
    // A value inside its range still runs.
    assert!(vsched::validate_scenario(&scenario("name = \"rr\"\nslice_us = 10000000", "kind = \"cpu_hog\""), 0).is_ok());
}
