//! `host.hypervisor`: a scenario's host says which hypervisor it runs, so a generic policy
//! keeps a Xen host's Domain-0 and a KVM host's threads, and a policy written for the other
//! hypervisor is refused naming the key (issue 57 item 1).

mod common;
use common::*;
use vsched::Scenario;

fn host(hypervisor: &str, scheduler: &str) -> String {
    let vms = [vm_toml("a", 2, "", HOG)];
    format!("[host]\npcpus = 2\n{hypervisor}\n[scheduler]\n{scheduler}\n{}\n[run]\nhorizon_s = 0.1\n", vms.join("\n"))
}

fn domains(text: &str) -> Vec<String> {
    match Scenario::parse(text) {
        Ok(s) => s.vms.iter().map(|v| v.name.clone()).collect(),
        Err(e) => panic!("refused: {e}"),
    }
}

fn refusal(text: &str) -> String {
    match Scenario::parse(text) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn without_the_key_the_policys_hypervisor_decides_as_before() {
    assert_eq!(domains(&host("", "name = \"credit\"")), ["dom0", "a"]);
    assert_eq!(domains(&host("", "name = \"rr\"")), ["a"]);
}

#[test]
fn a_generic_policy_runs_on_the_declared_hypervisors_host() {
    // rr declares no hypervisor: on a Xen host it gets Xen's Domain-0, on a KVM host KVM's threads.
    assert_eq!(domains(&host("hypervisor = \"xen\"", "name = \"rr\"")), ["dom0", "a"]);
    let kvm = Scenario::parse(&host("hypervisor = \"kvm\"", "name = \"rr\"")).map_err(|e| e.to_string());
    assert!(kvm.as_ref().is_ok_and(|s| s.host.host_threads.is_some()), "no host threads");
    // A policy of the declared hypervisor: the same host as without the key.
    assert_eq!(domains(&host("hypervisor = \"xen\"", "name = \"credit\"")), ["dom0", "a"]);
}

#[test]
fn a_policy_of_the_other_hypervisor_is_refused_naming_the_key() {
    assert_eq!(
        refusal(&host("hypervisor = \"xen\"", "name = \"kvm-dy\"")),
        "host.hypervisor: the scenario's host runs xen, but policy kvm-dy is a kvm scheduler; expected a xen or \
         generic policy (or --set host.hypervisor=kvm to run it on a kvm host)"
    );
    assert!(refusal(&host("hypervisor = \"kvm\"", "name = \"credit\""))
        .starts_with("host.hypervisor: the scenario's host runs kvm, but policy credit is a xen scheduler"));
    assert_eq!(
        refusal(&host("hypervisor = \"hyperv\"", "name = \"rr\"")),
        "host.hypervisor: expected \"xen\" or \"kvm\", got \"hyperv\""
    );
}

#[test]
fn every_paper_scenario_declares_the_xen_its_paper_ran() {
    let papers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/papers");
    let mut seen = 0;
    for paper in std::fs::read_dir(&papers).expect("papers") {
        for file in std::fs::read_dir(paper.expect("entry").path()).expect("paper") {
            let path = file.expect("entry").path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue; // each paper's README.md
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            let rr = text.replacen("name = \"credit\"", "name = \"rr\"", 1);
            let names = domains(&rr);
            assert!(
                names.iter().any(|n| n == "dom0" || n.starts_with("dom0.")),
                "{}: no Domain-0 under rr",
                path.display()
            );
            seen += 1;
        }
    }
    assert!(seen >= 60, "{seen} paper scenarios");
}

#[test]
fn a_summary_over_repetitions_keeps_every_metric() {
    // Issue 57 item 5: co-scheduling counters, migrations and policy counters were dropped.
    let text = scenario(4, "name = \"cosched\"", &[con("a", 4, ""), con("b", 4, "")], "horizon_s = 0.2\nreps = 2");
    let report = vsched::run_scenario_json(&text, &vsched::RunOptions::default(), &mut |_| true).expect("ran");
    let doc: serde_json::Value = serde_json::from_str(&report).expect("JSON");
    let host = &doc["summary"]["host"];
    for metric in ["migrations", "co_launches", "co_ipis", "sched_invocations", "cache_refill_s", "utilization"] {
        assert!(host[format!("{metric}_mean")].is_number(), "{metric}: {host}");
    }
    let counters = doc["runs"][0]["host"]["policy_counters"].as_object().expect("counters");
    assert!(!counters.is_empty(), "cosched counts");
    for name in counters.keys() {
        assert!(host["policy_counters"][format!("{name}_mean")].is_number(), "{name}: {host}");
    }
    let vm = &doc["summary"]["vms"][0];
    for metric in ["co_launches", "costart_skew_us", "wake_latency_us", "cpu_s", "completion_s"] {
        assert!(vm.get(format!("{metric}_mean")).is_some(), "{metric}: {vm}");
    }
    assert!(vm.get("vcpus_mean").is_none() && vm.get("finished_mean").is_none(), "{vm}");
}
