//! Who is where in a trace file: the pid, tid and name of every host, pCPU row, VM and vCPU.

use vsched_model::{domains_in_simulation_order, Track};

use crate::scenario::Scenario;

/// Who is where: the pid, tid and name of every row, from the scenario's domains in
/// simulation order (the simulator numbers vCPUs in that order, a domain's consecutively).
pub(super) struct Layout {
    pub(super) hosts: usize,
    pub(super) pcpus_per_host: usize,
    /// Each VM's name, by global domain id (a KVM host's host-threads domain included).
    pub(super) vms: Vec<String>,
    /// Each VM's host and vCPU count, likewise.
    pub(super) vm_places: Vec<(usize, usize)>,
    /// Each VM's first global vCPU id.
    pub(super) first_vcpu: Vec<usize>,
    /// Each vCPU's domain and index in it, by global vCPU id.
    pub(super) vcpus: Vec<(usize, usize)>,
    /// "pCPU 3", or "host 1 pCPU 3" on a cluster, by global pCPU id; on an SMT host with
    /// the core and thread ("pCPU 3 (core 1.1)"), so that siblings read as such.
    pub(super) pcpu_names: Vec<String>,
}

impl Layout {
    pub(super) fn new(scenario: &Scenario) -> Self {
        let (hosts, pcpus_per_host) = (scenario.hosts, scenario.host.pcpus);
        let threads = scenario.host.threads_per_core;
        let pcpu_names = (0..hosts * pcpus_per_host)
            .map(|p| {
                let local = p % pcpus_per_host;
                let name =
                    if hosts == 1 { format!("pCPU {p}") } else { format!("host {} pCPU {local}", p / pcpus_per_host) };
                if threads > 1 {
                    format!("{name} (core {}.{})", local / threads, local % threads)
                } else {
                    name
                }
            })
            .collect();
        // A KVM host's host-threads domain is the simulator's, not the scenario's.
        let given: Vec<(usize, String, usize)> =
            scenario.vms.iter().map(|vm| (vm.host, vm.name.clone(), vm.vcpus)).collect();
        let domains = domains_in_simulation_order(&scenario.host, &given, hosts);
        let mut first_vcpu = Vec::new();
        let mut vcpus = Vec::new();
        for (d, (_, _, n)) in domains.iter().enumerate() {
            first_vcpu.push(vcpus.len());
            vcpus.extend((0..*n).map(|i| (d, i)));
        }
        let vm_places = domains.iter().map(|&(h, _, n)| (h, n)).collect();
        let vms = domains.into_iter().map(|(_, name, _)| name).collect();
        Layout { hosts, pcpus_per_host, vms, vm_places, first_vcpu, vcpus, pcpu_names }
    }

    pub(super) fn pcpu_rows(&self) -> usize {
        self.pcpu_names.len()
    }
    pub(super) fn host_of_pcpu(&self, p: usize) -> u32 {
        (p / self.pcpus_per_host) as u32
    }
    pub(super) fn vm_pid(&self, d: usize) -> u32 {
        (self.hosts + d) as u32
    }
    pub(super) fn vcpu_tid(&self, v: usize) -> usize {
        self.pcpu_rows() + v
    }
    pub(super) fn hypervisor_tid(&self, h: usize) -> usize {
        self.pcpu_rows() + self.vcpus.len() + h
    }
    /// "spin.v0".
    pub(super) fn vcpu_name(&self, v: usize) -> String {
        let (d, i) = self.vcpus[v];
        format!("{}.v{i}", self.vms[d])
    }
    pub(super) fn host_name(&self, h: usize) -> String {
        if self.hosts == 1 {
            "host".to_string()
        } else {
            format!("host {h}")
        }
    }
    /// The pid and tid of a track.
    pub(super) fn place(&self, track: Track) -> (u32, usize) {
        match track {
            Track::Pcpu(p) => (self.host_of_pcpu(p), p),
            Track::Vcpu(v) => (self.vm_pid(self.vcpus[v].0), self.vcpu_tid(v)),
            Track::Host(h) => (h as u32, self.hypervisor_tid(h)),
        }
    }
}
