//! Helpers shared by the integration tests.
#![allow(dead_code)]

use vsched::Scenario;
use vsched_model::{RunMetrics, VmMetrics};

/// Runs a scenario given as TOML text with one seed.
pub fn run(toml: &str, seed: u64) -> RunMetrics {
    let scenario = match Scenario::parse(toml) {
        Ok(s) => s,
        Err(e) => panic!("test scenario refused: {e}"),
    };
    scenario.build(seed).run(scenario.horizon, scenario.until, &mut |_| true).expect("run failed")
}

pub fn vm<'a>(m: &'a RunMetrics, name: &str) -> &'a VmMetrics {
    m.vms.iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no VM {name}"))
}

/// A `[[vm]]` table.
pub fn vm_toml(name: &str, vcpus: u32, extra: &str, workload: &str) -> String {
    format!("[[vm]]\nname = \"{name}\"\nvcpus = {vcpus}\n{extra}\n[vm.workload]\n{workload}\n")
}

/// A scenario with a host, a scheduler table and some VMs.
pub fn scenario(pcpus: u32, scheduler: &str, vms: &[String], run: &str) -> String {
    format!("[host]\npcpus = {pcpus}\n[scheduler]\n{scheduler}\n{}\n[run]\n{run}\n", vms.join("\n"))
}
