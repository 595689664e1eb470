//! Policies from outside the registry (`external`): the facade runs a policy its caller
//! supplies exactly as a registered one, and a policy can fail a run (`Cx::fail`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::Value as Json;
use vsched::{Error, ExternalPolicy, PolicyResolver, RunOptions};
use vsched_model::{ConfigError, Cx, Decision, Hypervisor, Params, PcpuId, Policy, Value, VcpuId};

/// The registry's `rr` under another name, with the `[scheduler]` keys as its parameters.
struct RrByAnotherName {
    name: String,
    params: Params,
}

impl ExternalPolicy for RrByAnotherName {
    fn name(&self) -> &str {
        &self.name
    }
    fn hypervisor(&self) -> Hypervisor {
        Hypervisor::Generic
    }
    fn build(&self) -> Result<Box<dyn Policy>, String> {
        (vsched_policies::rr::INFO.build)(&self.params).map_err(|e| e.to_string())
    }
}

/// Fails the run at its `fails_at`-th decision.
struct FailsAtDecision {
    fails_at: usize,
    decisions: usize,
}

impl Policy for FailsAtDecision {
    fn vcpu_insert(&mut self, _cx: &mut Cx, _v: VcpuId) {}
    fn wake(&mut self, _cx: &mut Cx, _v: VcpuId) {}
    fn pick_next(&mut self, cx: &mut Cx, pcpu: PcpuId, _prev: Option<VcpuId>) -> Decision {
        self.decisions += 1;
        if self.decisions == self.fails_at {
            cx.fail(format!("gave up on pCPU {pcpu}"));
            cx.fail("a second failure, which is not reported");
        }
        Decision::idle()
    }
}

struct Failing {
    fails_at: usize,
    /// Instances built so far; the one at `broken_build` (counting from 0) cannot be built.
    builds: AtomicUsize,
    broken_build: Option<usize>,
}

impl ExternalPolicy for Failing {
    fn name(&self) -> &str {
        "failing.py:Failing"
    }
    fn hypervisor(&self) -> Hypervisor {
        Hypervisor::Generic
    }
    fn build(&self) -> Result<Box<dyn Policy>, String> {
        let n = self.builds.fetch_add(1, Ordering::SeqCst);
        if Some(n) == self.broken_build {
            return Err("the constructor raised this time".into());
        }
        Ok(Box::new(FailsAtDecision { fails_at: self.fails_at, decisions: 0 }))
    }
}

/// Resolves `rr.py:RoundRobin` to `rr`, `failing.py:Failing` to `Failing` and nothing else.
struct Resolver {
    fails_at: usize,
    broken_build: Option<usize>,
}

/// A resolver whose `Failing` fails at the second decision (the second pCPU's first).
const FAILS_AT_SECOND_DECISION: Resolver = Resolver { fails_at: 2, broken_build: None };

impl PolicyResolver for Resolver {
    fn resolve(
        &self,
        field: &str,
        name: &str,
        params: &BTreeMap<String, Value>,
    ) -> Result<Arc<dyn ExternalPolicy>, ConfigError> {
        match name {
            "rr.py:RoundRobin" => Ok(Arc::new(RrByAnotherName {
                name: name.to_string(),
                params: Params::check("scheduler", vsched_policies::rr::INFO.params, params)?,
            })),
            "failing.py:Failing" => Ok(Arc::new(Failing {
                fails_at: self.fails_at,
                builds: AtomicUsize::new(0),
                broken_build: self.broken_build,
            })),
            _ => Err(ConfigError::new(field, format!("no policy {name:?} here"))),
        }
    }
}

const SCENARIO: &str = r#"
[host]
pcpus = 2
[scheduler]
name = "rr"
slice_us = 3000
[[vm]]
name = "spin"
vcpus = 3
[vm.workload]
kind = "spinlock"
[[vm]]
name = "hog"
vcpus = 2
[vm.workload]
kind = "cpu_hog"
[run]
horizon_s = 0.3
"#;

fn run(text: &str, policy: Option<&str>, resolver: &Resolver) -> Result<Json, Error> {
    let opts = RunOptions { seed: Some(3), reps: Some(2), policy: policy.map(str::to_string), ..Default::default() };
    let json = vsched::run_scenario_json_with(text, &opts, Some(resolver), &mut |_| true)?;
    let mut doc: Json = serde_json::from_str(&json).unwrap();
    for run in doc["runs"].as_array_mut().unwrap() {
        run.as_object_mut().unwrap().remove("wall_s");
    }
    Ok(doc)
}

#[test]
fn an_external_policy_runs_exactly_as_the_registered_one_it_wraps() {
    let resolver = FAILS_AT_SECOND_DECISION;
    let builtin = run(SCENARIO, None, &resolver).unwrap();
    let external_text = SCENARIO.replace("name = \"rr\"", "name = \"rr.py:RoundRobin\"");
    let mut external = run(&external_text, None, &resolver).unwrap();
    assert_eq!(external["policy"], "rr.py:RoundRobin");
    external["policy"] = builtin["policy"].clone();
    assert_eq!(builtin.to_string(), external.to_string());
    // The [scheduler] keys reached the external policy: another slice gives other results.
    let other = run(&external_text.replace("slice_us = 3000", "slice_us = 500"), None, &resolver).unwrap();
    assert_ne!(other["runs"][0]["host"], builtin["runs"][0]["host"]);
}

#[test]
fn a_policy_that_fails_stops_the_run_with_its_first_message() {
    let resolver = FAILS_AT_SECOND_DECISION;
    let error = run(SCENARIO, Some("failing.py:Failing"), &resolver).unwrap_err();
    assert_eq!(error, Error::Policy("policy failing.py:Failing: gave up on pCPU 1".into()));
}

#[test]
fn a_policy_that_cannot_be_built_for_a_run_fails_that_run() {
    // Build 0 is validation's, build 1 the first repetition's.
    let resolver = Resolver { fails_at: usize::MAX, broken_build: Some(1) };
    let error = run(SCENARIO, Some("failing.py:Failing"), &resolver).unwrap_err();
    assert_eq!(
        error,
        Error::Policy(
            "policy failing.py:Failing: could not be built for the run: the constructor raised this time".into()
        )
    );
    // At validation, the same failure is the scenario's: its [scheduler] cannot be built.
    let resolver = Resolver { fails_at: usize::MAX, broken_build: Some(0) };
    let error = run(SCENARIO, Some("failing.py:Failing"), &resolver).unwrap_err();
    assert_eq!(error, Error::Scenario("scheduler: the constructor raised this time".into()));
}

#[test]
fn an_external_name_is_refused_without_a_resolver_and_errors_name_where_it_was_given() {
    let text = SCENARIO.replace("name = \"rr\"", "name = \"rr.py:RoundRobin\"");
    let error = vsched::validate_scenario(&text, 0).unwrap_err();
    assert_eq!(
        error.to_string(),
        "scheduler.name: \"rr.py:RoundRobin\" names a policy written in Python, which only the Python package can load"
    );
    let resolver = FAILS_AT_SECOND_DECISION;
    let error = run(SCENARIO, Some("other.py:Nothing"), &resolver).unwrap_err();
    assert_eq!(error, Error::Scenario("--policy: no policy \"other.py:Nothing\" here".into()));
    let text = SCENARIO.replace("name = \"rr\"", "name = \"other.py:Nothing\"");
    let error = vsched::validate_scenario_with(&text, 0, Some(&resolver)).unwrap_err();
    assert_eq!(error.to_string(), "scheduler.name: no policy \"other.py:Nothing\" here");
}
