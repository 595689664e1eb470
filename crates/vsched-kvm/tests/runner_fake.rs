//! The real-vCPU runner on the fake backend (vCPUs as busy host threads): policies run
//! unchanged, share pCPUs as they decide, never overlap two vCPUs on a host CPU, fail, stop
//! at their deadline and let finished vCPUs go. These run anywhere, `/dev/kvm` or not.
//!
//! Timing tolerances: the fake's threads share this machine's CPUs with everything else, so
//! the bounds below are those of a policy's decisions (slices), not of a quiet machine.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use vsched::scenario::Scenario;
use vsched::{ExternalPolicy, PolicyResolver};
use vsched_kvm::fake::FakeBackend;
use vsched_kvm::real_report::vm_specs;
use vsched_kvm::runner::{self, RunPlan};
use vsched_kvm::{
    admission, run_real_json_with, BackendError, Control, MachineSettings, RealError, RealOptions, VmSpec,
};
use vsched_model::{ConfigError, Cx, Decision, GuestSpec, Hypervisor, PcpuId, Policy, Until, Value, VcpuId};

/// One test at a time: they measure CPU shares on a machine with few CPUs.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn scenario_text(pcpus: u32, scheduler: &str, vms: &[(&str, u32, &str)], run: &str) -> String {
    let mut text = format!("[host]\npcpus = {pcpus}\ndom0_vcpus = 0\n[scheduler]\n{scheduler}\n");
    for (name, vcpus, workload) in vms {
        text += &format!("[[vm]]\nname = \"{name}\"\nvcpus = {vcpus}\n[vm.workload]\n{workload}\n");
    }
    text + "[run]\n" + run + "\n"
}

const HOG: &str = "kind = \"cpu_hog\"";
/// A finite workload: on the fake it only makes its VM one that finishes (the fake runs no
/// guest code; its vCPUs finish after the work the test gives them).
const FINITE: &str = "kind = \"spinlock\"\nmode = \"user\"";

/// Runs the report on the fake backend, `work` giving each VM's per-vCPU CPU time.
fn report(text: &str, opts: &RealOptions, work: fn(&str) -> Option<Duration>) -> Result<Json, RealError> {
    let control = Control::default();
    let json = run_real_json_with(
        text,
        opts,
        &control,
        "fake",
        |_, _| Ok(None),
        |vms, _, _| FakeBackend::new(vms, |vm| work(vm.name)),
    )?;
    Ok(serde_json::from_str(&json).expect("JSON"))
}

fn vm<'a>(report: &'a Json, rep: usize, name: &str) -> &'a Json {
    report["runs"][rep]["vms"].as_array().unwrap().iter().find(|v| v["name"] == name).expect("a VM of that name")
}

fn never(_: &str) -> Option<Duration> {
    None
}

#[test]
fn rr_and_credit_give_two_vcpus_on_one_pcpu_equal_shares() {
    let _serial = serial();
    for scheduler in ["name = \"rr\"", "name = \"credit\""] {
        let text = scenario_text(1, scheduler, &[("a", 1, HOG), ("b", 1, HOG)], "horizon_s = 0.9");
        let report = report(&text, &RealOptions::default(), never).unwrap();
        let (a, b) = (vm(&report, 0, "a"), vm(&report, 0, "b"));
        let (share_a, share_b) = (a["cpu_share"].as_f64().unwrap(), b["cpu_share"].as_f64().unwrap());
        // 0.9 s of 10 ms (rr) or 30 ms (credit) slices: one slice more for one VM is 1 or
        // 3 % of the run; 10 % leaves room for late timers on a busy host.
        assert!((share_a - share_b).abs() < 0.10, "{scheduler}: {share_a} against {share_b}");
        assert!(share_a + share_b > 0.9, "{scheduler}: the pCPU idled: {share_a} + {share_b}");
        // Credit gives 30 ms slices, and the simulator counts 23 switches for this scenario.
        let switches = report["runs"][0]["host"]["context_switches"].as_u64().unwrap();
        assert!(switches >= 15, "{scheduler}: only {switches} context switches in 0.9 s");
        // Each waited while the other ran: steal is about the other's CPU time.
        let steal = a["steal_s"].as_f64().unwrap();
        assert!((steal - b["cpu_s"].as_f64().unwrap()).abs() < 0.1, "{scheduler}: steal {steal}");
    }
}

#[test]
fn no_host_cpu_ever_executes_two_vcpus() {
    let _serial = serial();
    // Three vCPUs on two pCPUs with 1 ms slices: hundreds of stops and starts, and vCPUs that
    // move between host CPUs.
    let text = scenario_text(2, "name = \"rr\"\nslice_us = 1000", &[("a", 2, HOG), ("b", 1, HOG)], "horizon_s = 0.6");
    let scenario = Scenario::parse(&text).unwrap();
    let guests: Vec<GuestSpec> = scenario.vms.iter().map(|vm| vm.guest_spec()).collect();
    let vms = vm_specs(&scenario, &guests);
    let mut backend = FakeBackend::new(&vms, |_| None).unwrap();
    let host_cpus = admission::host_cpus().unwrap();
    if host_cpus.len() < 2 {
        eprintln!("skipped: this process may use only {} host CPU", host_cpus.len());
        return;
    }
    let plan = RunPlan { host_cpus: &host_cpus[..2], end_ns: 600_000_000, until: Until::Horizon };
    let run = runner::run(&scenario, &vms, 1, &mut backend, &plan, &Control::default(), None).unwrap();
    assert!(run.metrics.host.context_switches > 200, "{}", run.metrics.host.context_switches);
    assert!(run.metrics.host.migrations > 0);
    assert_eq!(backend.most_on_one_cpu(), 1);
}

/// A policy that decides as round robin for `picks` decisions, then fails.
struct FailsAfter {
    picks: u32,
    queue: std::collections::VecDeque<VcpuId>,
}

impl Policy for FailsAfter {
    fn vcpu_insert(&mut self, _cx: &mut Cx, v: VcpuId) {
        self.queue.push_back(v);
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        self.queue.push_back(v);
        cx.kick_idle_from(0);
    }
    fn pick_next(&mut self, cx: &mut Cx, _pcpu: PcpuId, prev: Option<VcpuId>) -> Decision {
        if self.picks == 0 {
            cx.fail("gave up on purpose");
        }
        self.picks = self.picks.saturating_sub(1);
        if let Some(p) = prev.filter(|&p| cx.is_runnable(p)) {
            self.queue.push_back(p);
        }
        self.queue.pop_front().map_or(Decision::idle(), |v| Decision::run(v, 2_000_000))
    }
}

/// A policy of the test's own, resolved by its name `test:…` as an external policy (the way
/// a Python policy reaches the core).
#[derive(Clone, Copy)]
struct TestPolicy {
    name: &'static str,
    build: fn() -> Box<dyn Policy>,
}

impl ExternalPolicy for TestPolicy {
    fn name(&self) -> &str {
        self.name
    }
    fn hypervisor(&self) -> Hypervisor {
        Hypervisor::Generic
    }
    fn build(&self) -> Result<Box<dyn Policy>, String> {
        Ok((self.build)())
    }
}

impl PolicyResolver for TestPolicy {
    fn resolve(
        &self,
        _field: &str,
        _name: &str,
        _params: &BTreeMap<String, Value>,
    ) -> Result<Arc<dyn ExternalPolicy>, ConfigError> {
        Ok(Arc::new(*self))
    }
}

/// Runs `policy` once over `vms` on one pCPU of the fake, for at most 5 s.
fn run_test_policy(policy: TestPolicy, vms: &[(&str, u32, &str)]) -> Result<runner::RealRun, RealError> {
    let text = scenario_text(1, &format!("name = \"{}\"", policy.name), vms, "horizon_s = 5");
    let scenario = Scenario::parse_with_resolver(&text, None, 0, Some(&policy)).unwrap();
    let guests: Vec<GuestSpec> = scenario.vms.iter().map(|vm| vm.guest_spec()).collect();
    let vms = vm_specs(&scenario, &guests);
    let mut backend = FakeBackend::new(&vms, |_| None).unwrap();
    let cpus = admission::host_cpus().unwrap();
    let plan = RunPlan { host_cpus: &cpus[..1], end_ns: 5_000_000_000, until: Until::Horizon };
    runner::run(&scenario, &vms, 1, &mut backend, &plan, &Control::default(), None)
}

#[test]
fn a_policy_that_fails_stops_the_run_with_its_message() {
    let _serial = serial();
    let fails_after =
        TestPolicy { name: "test:FailsAfter", build: || Box::new(FailsAfter { picks: 10, queue: Default::default() }) };
    let started = Instant::now();
    let outcome = run_test_policy(fails_after, &[("a", 2, HOG)]);
    assert_eq!(outcome.err(), Some(RealError::Policy("gave up on purpose".into())));
    // Ten 2 ms slices, not the 5 s horizon.
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

#[test]
fn an_unusable_decision_is_a_policy_error() {
    let _serial = serial();
    // A policy that names a vCPU out of range: its decisions are checked like any other's.
    struct Wrong;
    impl Policy for Wrong {
        fn vcpu_insert(&mut self, _cx: &mut Cx, _v: VcpuId) {}
        fn wake(&mut self, _cx: &mut Cx, _v: VcpuId) {}
        fn pick_next(&mut self, _cx: &mut Cx, _p: PcpuId, _prev: Option<VcpuId>) -> Decision {
            Decision::run(7, 1_000_000)
        }
    }
    let wrong = TestPolicy { name: "test:Wrong", build: || Box::new(Wrong) };
    let error = run_test_policy(wrong, &[("a", 1, HOG)]).err();
    assert_eq!(
        error,
        Some(RealError::Policy("unusable decision: pCPU 0 was given vCPU 7, which does not exist".into()))
    );
}

#[test]
fn the_deadline_stops_a_run_that_would_not_end() {
    let _serial = serial();
    // Hogs never finish and the horizon is a minute away: the deadline ends the run.
    let text =
        scenario_text(1, "name = \"rr\"", &[("a", 1, HOG), ("b", 1, FINITE)], "horizon_s = 60\nuntil = \"all_done\"");
    let opts = RealOptions { deadline_s: Some(0.3), ..Default::default() };
    let started = Instant::now();
    let report = report(&text, &opts, never).unwrap();
    let length = report["runs"][0]["sim_s"].as_f64().unwrap();
    assert!((0.3..0.5).contains(&length), "the run lasted {length} s");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(report["real"]["deadline_s"], 0.3);
    // The finite VM's workload was cut short, as the simulator reports a horizon's cut.
    assert_eq!(vm(&report, 0, "b")["finished"], false);
    assert_eq!(vm(&report, 0, "b")["completion_s"], Json::Null);
    assert_eq!(vm(&report, 0, "a")["finished"], Json::Null);
}

#[test]
fn finished_vcpus_leave_the_run_and_the_others_go_on() {
    let _serial = serial();
    // One pCPU: a 2-vCPU job whose vCPUs each need 100 ms of CPU, beside a hog.
    let text = scenario_text(
        1,
        "name = \"rr\"",
        &[("job", 2, FINITE), ("hog", 1, HOG)],
        "horizon_s = 10\nuntil = \"all_done\"",
    );
    let work = |name: &str| (name == "job").then_some(Duration::from_millis(100));
    let report = report(&text, &RealOptions { reps: Some(2), ..Default::default() }, work).unwrap();
    for rep in 0..2 {
        let job = vm(&report, rep, "job");
        assert_eq!(job["finished"], true);
        let completion = job["completion_s"].as_f64().unwrap();
        // 200 ms of the job's work on a pCPU shared three ways, then two ways: about 0.3 s
        // on a quiet host, and no bound above but the horizon on a busy one (5.7 s was seen
        // at a load of 9 on 2 cores: the fake's work is its threads' own CPU time).
        assert!(completion >= 0.2, "completion {completion}");
        // The run ends when the job does (`until = "all_done"`), not at the horizon.
        let length = report["runs"][rep]["sim_s"].as_f64().unwrap();
        assert!(length - completion < 0.05, "the run went on to {length} s after {completion} s");
        // Its vCPUs held the pCPU at least as long as their work took (the fake refuses to
        // start a finished vCPU, which would have failed the run).
        let cpu = job["cpu_s"].as_f64().unwrap();
        assert!(cpu >= 0.2 && cpu <= completion, "the job held the pCPU {cpu} s");
    }
    assert_eq!(report["summary"]["vms"][0]["runs_finished"], 2);
}

#[test]
fn the_stop_flag_interrupts_a_run_and_cleans_up() {
    let _serial = serial();
    let text = scenario_text(1, "name = \"rr\"", &[("a", 2, HOG)], "horizon_s = 60");
    let control = Arc::new(Control::default());
    let raiser = control.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        raiser.stop.store(true, Ordering::Relaxed);
    });
    let started = Instant::now();
    let outcome = run_real_json_with(
        &text,
        &RealOptions::default(),
        &control,
        "fake",
        |_, _| Ok(None),
        |vms, _, _| FakeBackend::new(vms, |_| None),
    );
    stopper.join().unwrap();
    assert_eq!(outcome, Err(RealError::Interrupted));
    // The flag is looked at every 20 ms at least; dropping the backend joins its threads.
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
}

#[test]
fn the_report_has_the_simulator_report_keys_and_nulls_what_it_cannot_measure() {
    let _serial = serial();
    let text = scenario_text(1, "name = \"credit\"", &[("a", 1, HOG), ("b", 1, FINITE)], "horizon_s = 0.2");
    let real = report(&text, &RealOptions { reps: Some(2), ..Default::default() }, never).unwrap();
    let simulated: Json =
        serde_json::from_str(&vsched::run_scenario_json(&text, &Default::default(), &mut |_| true).unwrap()).unwrap();
    let keys = |value: &Json| value.as_object().unwrap().keys().cloned().collect::<Vec<String>>();
    let mut expected = keys(&simulated);
    expected.extend(["backend".to_string(), "real".to_string()]);
    expected.sort();
    assert_eq!(keys(&real), expected);
    assert_eq!(real["backend"], "fake");
    // Each VM also has what its guest counted itself executing, which the simulator has not.
    let mut vm_keys = keys(&simulated["runs"][0]["vms"][0]);
    vm_keys.push("guest_executed_s".to_string());
    vm_keys.sort();
    assert_eq!(keys(&real["runs"][0]["vms"][0]), vm_keys);
    // The fake's vCPUs count the CPU time their threads got: never more than they were given.
    let vm = &real["runs"][0]["vms"][0];
    let (executed, given) = (vm["guest_executed_s"].as_f64().unwrap(), vm["cpu_s"].as_f64().unwrap());
    assert!(executed > 0.0 && executed <= given, "{executed} {given}");
    assert_eq!(keys(&real["runs"][0]["host"]), keys(&simulated["runs"][0]["host"]));
    assert_eq!(keys(&real["summary"]["vms"][0]), keys(&simulated["summary"]["vms"][0]));
    assert_eq!(real["runs"][0]["vms"][0]["guest_ticks"], Json::Null);
    assert_eq!(real["summary"]["vms"][0]["guest_ticks_mean"], Json::Null);
    // Pause-loop exits are counted by the guests (the fake's never spin: 0).
    assert_eq!(real["runs"][0]["vms"][0]["ple_exits"], 0);
    assert_eq!(real["runs"][1]["host"]["cache_refill_s"], Json::Null);
    assert_eq!(real["runs"][1]["seed"], 2);
    assert!(real["runs"][0]["host"]["policy_counters"].is_object());
    assert!(real["runs"][0]["scheduler_late_us"]["max"].as_f64().is_some());
    assert!(real["runs"][0]["host"]["fairness"].as_f64().is_some());
}

#[test]
fn a_backend_that_refuses_a_guest_refuses_the_run_before_it_starts() {
    let _serial = serial();
    let text = scenario_text(1, "name = \"rr\"", &[("a", 1, HOG)], "horizon_s = 5");
    let refuse = |_: &[VmSpec], _| {
        Err(BackendError::Unsupported { field: "vm[0].workload.kind".into(), message: "expected a test".into() })
    };
    let built = std::cell::Cell::new(false);
    let outcome = run_real_json_with(
        &text,
        &RealOptions::default(),
        &Control::default(),
        "fake",
        refuse,
        |vms, _: &MachineSettings, _| {
            built.set(true);
            FakeBackend::new(vms, |_| None)
        },
    );
    assert_eq!(outcome, Err(RealError::Scenario("vm[0].workload.kind: expected a test".into())));
    assert!(!built.get());
}

#[test]
fn each_vm_starts_its_workload_when_the_simulator_starts_it_woken_by_the_policy() {
    let _serial = serial();
    // Two hogs, each alone on a pCPU, whose workloads start at seeded offsets in [0, 400 ms).
    let text =
        scenario_text(2, "name = \"credit\"", &[("a", 1, HOG), ("b", 1, HOG)], "horizon_s = 0.6\nseed = 3\nreps = 1")
            .replace("dom0_vcpus = 0\n", "dom0_vcpus = 0\nworkload_start_spread_ms = 400\n");
    let starts = Scenario::parse(&text).unwrap().build(3).workload_starts();
    assert!(starts.iter().any(|&s| s > 100_000_000), "the seed gives a late start: {starts:?}");
    let report = report(&text, &RealOptions::default(), never).unwrap();
    for (name, start) in ["a", "b"].into_iter().zip(&starts) {
        let cpu = vm(&report, 0, name)["cpu_s"].as_f64().unwrap();
        let after_start = 0.6 - *start as f64 / 1e9;
        // Before its start a vCPU given its pCPU halts at once; 50 ms covers the loop's
        // lateness on a busy machine (a start, a slice end or a tick that fires late).
        assert!(cpu <= after_start + 0.05, "{name}: {cpu} s of CPU, started at {start} ns");
        assert!(cpu >= after_start - 0.15, "{name}: {cpu} s of CPU, started at {start} ns");
    }
    // Each VM that started late halted first and was woken at its start: Credit BOOSTs it.
    let boosts = report["runs"][0]["host"]["policy_counters"]["credit.boosts"].as_u64().unwrap_or(0);
    let late = starts.iter().filter(|&&s| s > 0).count() as u64;
    assert!(boosts >= late, "{boosts} boosts for {late} late starts");
}
