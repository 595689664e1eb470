//! Value checks of a parsed scenario file, table by table: the host and its policy, the
//! cluster and its network, the driver domains, the VMs, the run; then what depends on all
//! of them (VM lifetimes, events, whether the policy can run these VMs). The first error
//! found is the one reported, so the order of the steps in [`validate`] is part of what
//! users see: a scenario with two mistakes names the same one in every release.
//!
//! Validation stays linear in the scenario's size (names in a set, VMs bucketed by host),
//! so the fuzzer's large scenarios are refused or accepted quickly.

use std::collections::{HashMap, HashSet};

use vsched_model::{
    ConfigError, DomainInfo, GuestTick, HostConfig, Hypervisor, Params, Paravirt, Until, Value, VmType,
};
use vsched_workloads::{working_set, Ranks};

use super::file::{ClusterSection, EventSection, NamedSection, RunSection, ScenarioFile, VmSection};
use super::network::network_config;
use super::policy::{lifecycle_policies, policy_source};
use super::values::{check_reps, err, parse_type};
use super::vm::{vm_spec, VmShape, MAX_WEIGHT};
use super::{
    EventSpec, Guest, Scenario, VmSpec, DEFAULT_HORIZON_S, DEFAULT_REPS, DEFAULT_SEED, DEFAULT_WEIGHT, MAX_HORIZON_S,
};
use crate::external::{PolicyResolver, PolicySource};
use crate::footprint::Budget;
use crate::guest_kernel::dom0_tick;
use crate::host::{self, HostSection};

/// The most hosts a cluster may have.
pub(crate) const MAX_HOSTS: u32 = 1024;

/// The checked scenario of file `f`, whose policy is named at `policy_field`, refused if its
/// estimated memory exceeds `max_memory` bytes (`footprint`).
pub(super) fn validate(
    f: ScenarioFile,
    max_memory: u64,
    policy_field: &str,
    resolver: Option<&dyn PolicyResolver>,
) -> Result<Scenario, ConfigError> {
    let mut host = host::host_config(&f.host)?;
    let mut budget = Budget::new(max_memory);
    let policy = policy(&f.host, &f.scheduler, policy_field, resolver)?;
    let hypervisor = host::hypervisor(&f.host, policy.name(), policy.hypervisor())?;
    // KVM's PLE handler costs what we measured where it runs: `kvm-dy`, `kvm-eevdf`, and a
    // Python policy on a KVM host (which sees the exits); not under `cfs` and `eevdf`, KVM
    // with PLE handling off.
    let handles_ple = match &policy {
        PolicySource::Builtin { info, .. } => vsched_policies::KVM_PLE_HANDLERS.contains(&info.name),
        PolicySource::External(_) => hypervisor == Hypervisor::Kvm,
    };
    if handles_ple {
        host.ple_handler_ns = host::kvm_ple_handler_ns(&f.host)?;
    }
    // Build once now so range errors surface at validation time.
    let built = policy.build()?;
    host.host_threads = host::host_threads(&f.host, &host, hypervisor, policy.name())?;
    let sched_gran = crate::sched_gran::sched_gran(&f.host, &host, &policy)?;
    let built = crate::sched_gran::wrap(built, sched_gran);
    host.halt_poll = crate::halt_poll::host_halt_poll(&f.host, hypervisor, policy.name())?;
    let haltpoll_tables = f.vm.iter().enumerate().map(|(i, v)| (format!("vm[{i}]"), v.guest_haltpoll == Some(true)));
    let cluster_tables = f
        .virtual_cluster
        .iter()
        .enumerate()
        .map(|(c, v)| (format!("virtual_cluster[{c}]"), v.guest_haltpoll == Some(true)));
    crate::halt_poll::refuse_off_kvm(hypervisor, policy.name(), haltpoll_tables.chain(cluster_tables))?;
    let (hosts, aligned_clocks) = cluster(&f.cluster)?;
    let network = network_config(&f.network)?;
    let dom0 = driver_domain(&f.host, &host, hypervisor, hosts, &mut budget)?;
    let mut user = user_vms(&f, hosts, dom0.vcpus > 0, host.host_threads.is_some(), &mut budget)?;
    kvm_features(&f, &policy)?;
    let run = run(&f.run)?;
    lifetimes(&f.vm, run.horizon_s, &mut user)?;
    let (vms, table_of) = simulation_order(user, hosts, &dom0);
    if sched_gran.is_some() && vms.iter().any(|v| v.start > 0 || v.stop.is_some()) {
        return Err(err(
            "host.sched_gran",
            "core scheduling is not modelled with VMs created or destroyed during the run (start_s / stop_s)",
        ));
    }
    if !built.supports_vm_lifecycle() {
        no_lifecycle(&policy, &vms, &table_of)?;
    }
    let events = events(&f.event, &vms, run.horizon_s)?;
    // Ask the policy whether it can run these VMs (a gang scheduler cannot run a CON VM
    // wider than the host).
    for (h, here) in domain_infos(&vms, &events, hosts).iter().enumerate() {
        built.admit(host.pcpus, here).map_err(|m| {
            let on = if hosts > 1 { format!(" (host {h})") } else { String::new() };
            err("scheduler.name", format!("policy {} cannot run this scenario{on}: {m}", policy.name()))
        })?;
    }
    Ok(Scenario {
        name: f.name.unwrap_or_else(|| "unnamed".to_string()),
        host,
        hosts,
        aligned_clocks,
        network,
        policy,
        sched_gran,
        vms,
        horizon: vsched_engine::secs_to_ns(run.horizon_s),
        until: run.until,
        seed: run.seed,
        reps: run.reps,
        stall_timeout: run.stall_timeout,
        events,
        memory_estimate: budget.used(),
    })
}

/// `[scheduler]`, after the host's `xen_version` and `kvm_version` (the defaults of the
/// policies that follow Xen's and Linux's releases) are checked.
fn policy(
    h: &HostSection,
    scheduler: &NamedSection,
    policy_field: &str,
    resolver: Option<&dyn PolicyResolver>,
) -> Result<PolicySource, ConfigError> {
    if let Some(version) = &h.xen_version {
        let host_given = [("xen_version".to_string(), Value::Str(version.clone()))].into_iter().collect();
        let releases: Vec<&str> = vsched_policies::XEN_VERSIONS
            .iter()
            .chain(vsched_policies::CREDIT2_XEN_VERSIONS.iter().filter(|v| !vsched_policies::XEN_VERSIONS.contains(v)))
            .copied()
            .collect();
        Params::check("host", host::HOST_XEN_VERSION, &host_given)?.choice("xen_version", &releases)?;
        // A release the host names must be one its scheduler follows (Credit's releases
        // under `credit` and its family, credit2's under `credit2`).
        if let Some(info) = vsched_policies::find(&scheduler.name) {
            let own = vsched_policies::xen_versions_of(info.name);
            let declares = info.params.iter().any(|p| p.name == "xen_version");
            if declares && !scheduler.params.contains_key("xen_version") && !own.contains(&version.as_str()) {
                let quoted: Vec<String> = own.iter().map(|c| format!("{c:?}")).collect();
                return Err(err(
                    "host.xen_version",
                    format!("policy {:?} follows Xen {}, got {version:?}", info.name, quoted.join(", ")),
                ));
            }
        }
    }
    if let Some(version) = &h.kvm_version {
        let host_given = [("kvm_version".to_string(), Value::Str(version.clone()))].into_iter().collect();
        Params::check("host", host::HOST_KVM_VERSION, &host_given)?
            .choice("kvm_version", &vsched_policies::KVM_VERSIONS)?;
    }
    let releases = [("xen_version", h.xen_version.as_deref()), ("kvm_version", h.kvm_version.as_deref())];
    policy_source(scheduler, releases, policy_field, resolver)
}

/// Refuses a paravirtual feature a VM asks for that the KVM host's release does not offer
/// (`kvm_version` of a KVM policy, `vsched_policies::kvm_pv_refusal`). Xen policies and
/// Python policies ignore the KVM features, so nothing is refused under them.
fn kvm_features(f: &ScenarioFile, policy: &PolicySource) -> Result<(), ConfigError> {
    let PolicySource::Builtin { info, params } = policy else { return Ok(()) };
    if !info.params.iter().any(|p| p.name == "kvm_version") {
        return Ok(());
    }
    let version = params.str("kvm_version");
    let vms =
        f.vm.iter()
            .enumerate()
            .map(|(i, v)| (format!("vm[{i}]"), [v.pv_spinlocks, v.pv_steal_time, v.pv_tlb_flush, v.pv_sched_yield]));
    let clusters = f.virtual_cluster.iter().enumerate().map(|(c, v)| {
        (format!("virtual_cluster[{c}]"), [v.pv_spinlocks, v.pv_steal_time, v.pv_tlb_flush, v.pv_sched_yield])
    });
    for (table, asks) in vms.chain(clusters) {
        let keys = ["pv_spinlocks", "pv_steal_time", "pv_tlb_flush", "pv_sched_yield"];
        for (key, on) in keys.into_iter().zip(asks) {
            if let Some(why) = on.filter(|&on| on).and_then(|_| vsched_policies::kvm_pv_refusal(version, key)) {
                return Err(err(format!("{table}.{key}"), why));
            }
        }
    }
    Ok(())
}

/// `[cluster]`: the number of hosts, and whether their clocks are aligned.
fn cluster(c: &ClusterSection) -> Result<(usize, bool), ConfigError> {
    let hosts = c.hosts.unwrap_or(1);
    if hosts == 0 || hosts > MAX_HOSTS {
        return Err(err("cluster.hosts", format!("expected an integer in 1..={MAX_HOSTS}, got {hosts}")));
    }
    let aligned_clocks = match c.clocks.as_deref() {
        None | Some("independent") => false,
        Some("aligned") => true,
        Some(other) => {
            return Err(err("cluster.clocks", format!("expected \"independent\" or \"aligned\", got {other:?}")))
        }
    };
    Ok((hosts as usize, aligned_clocks))
}

/// Each host's driver domain (dom0), as the host's keys and its `hypervisor` describe it.
struct DriverDomain {
    /// 0: none.
    vcpus: u32,
    weight: u32,
    tick: GuestTick,
}

/// The driver domain of every host. The hosts, dom0 included, are charged to `budget`.
fn driver_domain(
    h: &HostSection,
    host: &HostConfig,
    hypervisor: Hypervisor,
    hosts: usize,
    budget: &mut Budget,
) -> Result<DriverDomain, ConfigError> {
    // A Xen host boots Domain-0 with one vCPU per pCPU unless `dom0_max_vcpus` says
    // otherwise (docs/misc/xen-command-line.markdown, Xen 4.2); KVM has no driver domain.
    let vcpus = h.dom0_vcpus.unwrap_or(if hypervisor == Hypervisor::Xen { h.pcpus } else { 0 });
    if vcpus > host::MAX_PCPUS {
        return Err(err(
            "host.dom0_vcpus",
            format!("expected an integer in 0..={} (0 = no driver domain), got {vcpus}", host::MAX_PCPUS),
        ));
    }
    // A KVM host's kernel threads, one per pCPU (its VMs' I/O threads are charged nowhere:
    // two threads without vCPU state beside each VM's own).
    let kthreads = host.host_threads.as_ref().filter(|ht| ht.kthread_wakes_per_s > 0.0).map_or(0, |_| host.pcpus);
    budget.hosts(hosts, host.pcpus + vcpus as usize + kthreads)?;
    let weight = h.dom0_weight.unwrap_or(DEFAULT_WEIGHT);
    let tick = dom0_tick(host::dom0_idle_wakes_per_s(h)?);
    if weight == 0 || weight > MAX_WEIGHT {
        return Err(err("host.dom0_weight", format!("expected an integer in 1..={MAX_WEIGHT}, got {weight}")));
    }
    Ok(DriverDomain { vcpus, weight, tick })
}

/// The names given so far: each must be unique, and none may be a driver domain's or a
/// KVM host's host threads'.
struct Names {
    taken: HashSet<String>,
    dom0: bool,
    host_threads: bool,
}

impl Names {
    /// Takes `name`, given at `path`.
    fn claim(&mut self, path: String, name: &str) -> Result<(), ConfigError> {
        if name.is_empty() {
            return Err(err(path, "expected a non-empty name"));
        }
        if self.taken.contains(name) {
            return Err(err(path, format!("expected a unique name, {name:?} is used twice")));
        }
        if self.dom0 && (name == "dom0" || name.starts_with("dom0.")) {
            return Err(err(
                path,
                format!(
                    "expected a name other than {name:?}, which names the driver domain (a Xen host has one by default; host.dom0_vcpus = 0 removes it)"
                ),
            ));
        }
        if self.host_threads && (name == "host-threads" || name.starts_with("host-threads.")) {
            return Err(err(
                path,
                format!(
                    "expected a name other than {name:?}, which names the host's own threads (a KVM host has them by default; host.host_threads = false removes them)"
                ),
            ));
        }
        self.taken.insert(name.to_string());
        Ok(())
    }
}

/// The user's VMs, each with the index of its `[[vm]]` table (None: a cluster member): the
/// `[[vm]]` tables first, in order, then each virtual cluster's members.
fn user_vms(
    f: &ScenarioFile,
    hosts: usize,
    dom0: bool,
    host_threads: bool,
    budget: &mut Budget,
) -> Result<Vec<(Option<usize>, VmSpec)>, ConfigError> {
    if f.vm.is_empty() && f.virtual_cluster.is_empty() {
        return Err(err("vm", "expected at least one [[vm]] or [[virtual_cluster]] table"));
    }
    let mut user = Vec::new();
    let mut names = Names { taken: HashSet::new(), dom0, host_threads };
    for (i, v) in f.vm.iter().enumerate() {
        let at = |field: &str| format!("vm[{i}].{field}");
        names.claim(at("name"), &v.name)?;
        let host = v.host.unwrap_or(0) as usize;
        if host >= hosts {
            return Err(err(
                at("host"),
                format!("expected a host index in 0..{hosts} (cluster.hosts = {hosts}), got {host}"),
            ));
        }
        let idle_vcpus = v.idle_vcpus.unwrap_or(0);
        if idle_vcpus >= v.vcpus {
            return Err(err(
                at("idle_vcpus"),
                format!(
                    "expected fewer idle vCPUs than vcpus = {} (the workload needs one), got {idle_vcpus}",
                    v.vcpus
                ),
            ));
        }
        if idle_vcpus > 0 && v.workload.params.contains_key("threads") {
            return Err(err(
                at("idle_vcpus"),
                "expected no idle_vcpus beside workload.threads (threads fewer than vcpus leave the other vCPUs halted)",
            ));
        }
        let ranks = Ranks::alone((v.vcpus - idle_vcpus) as usize);
        let spec = vm_spec(&at, VmShape::of_vm(v), "HIT", &v.workload, ranks, Some((&mut *budget, 1)))?;
        user.push((Some(i), VmSpec { name: v.name.clone(), host, ..spec }));
    }
    for (c, vc) in f.virtual_cluster.iter().enumerate() {
        let at = |field: &str| format!("virtual_cluster[{c}].{field}");
        names.claim(at("name"), &vc.name)?;
        let members: Vec<usize> = match &vc.hosts {
            None => (0..hosts).collect(),
            Some(list) => list.iter().map(|&h| h as usize).collect(),
        };
        if members.is_empty() {
            return Err(err(at("hosts"), "expected at least one host index"));
        }
        if let Some(&bad) = members.iter().find(|&&h| h >= hosts) {
            return Err(err(
                at("hosts"),
                format!("expected host indices in 0..{hosts} (cluster.hosts = {hosts}), got {bad}"),
            ));
        }
        if members.windows(2).any(|w| w[0] > w[1]) {
            return Err(err(at("hosts"), "expected host indices in increasing order (ranks follow them)"));
        }
        let world = members.len() * vc.vcpus as usize;
        for (k, &host) in members.iter().enumerate() {
            let name = format!("{}.{k}", vc.name);
            names.claim(at("name"), &name)?;
            let ranks = Ranks { vcpus: vc.vcpus as usize, first: k * vc.vcpus as usize, world };
            // Members differ only in their ranks: the first one's footprint stands for
            // all, charged before any is built.
            let charge = (k == 0).then_some((&mut *budget, members.len()));
            let spec = vm_spec(&at, VmShape::of_cluster_member(vc), "CON", &vc.workload, ranks, charge)?;
            user.push((None, VmSpec { name, host, job: Some(vc.name.clone()), ..spec }));
        }
    }
    Ok(user)
}

/// `[run]`, with its defaults.
struct Run {
    horizon_s: f64,
    until: Until,
    seed: u64,
    reps: u32,
    /// `run.stall_timeout_s`: `None` leaves the policy's bound, `Some(None)` turns it off.
    stall_timeout: Option<Option<vsched_engine::Time>>,
}

fn run(r: &RunSection) -> Result<Run, ConfigError> {
    let horizon_s = r.horizon_s.unwrap_or(DEFAULT_HORIZON_S);
    if !(horizon_s.is_finite() && horizon_s > 0.0 && horizon_s <= MAX_HORIZON_S) {
        return Err(err(
            "run.horizon_s",
            format!("expected a number of seconds in (0, {MAX_HORIZON_S}], got {}", vsched_model::number(horizon_s)),
        ));
    }
    let until = match r.until.as_deref().unwrap_or("horizon") {
        "horizon" => Until::Horizon,
        "all_done" => Until::AllDone,
        other => return Err(err("run.until", format!("expected \"horizon\" or \"all_done\", got {other:?}"))),
    };
    let reps = r.reps.unwrap_or(DEFAULT_REPS);
    check_reps("run.reps", reps)?;
    // Absent: the policy's bound (`Policy::stall_timeout_ns`, sched_ext's 30 s by default); 0: off.
    let stall_timeout = match r.stall_timeout_s {
        None => None,
        Some(0.0) => Some(None),
        Some(s) if s.is_finite() && (0.001..=MAX_HORIZON_S).contains(&s) => Some(Some(vsched_engine::secs_to_ns(s))),
        Some(s) => {
            return Err(err(
                "run.stall_timeout_s",
                format!(
                    "expected 0 (off) or a number of seconds in [0.001, {MAX_HORIZON_S}], got {}",
                    vsched_model::number(s)
                ),
            ))
        }
    };
    Ok(Run { horizon_s, until, seed: r.seed.unwrap_or(DEFAULT_SEED), reps, stall_timeout })
}

/// Each `[[vm]]` table's `start_s` and `stop_s`, within the run, onto its spec in `user`.
fn lifetimes(tables: &[VmSection], horizon_s: f64, user: &mut [(Option<usize>, VmSpec)]) -> Result<(), ConfigError> {
    for (i, v) in tables.iter().enumerate() {
        let at = |field: &str| format!("vm[{i}].{field}");
        let start_s = v.start_s.unwrap_or(0.0);
        if !(start_s.is_finite() && (0.0..horizon_s).contains(&start_s)) {
            return Err(err(
                at("start_s"),
                format!("expected seconds in [0, run.horizon_s = {horizon_s}), got {}", vsched_model::number(start_s)),
            ));
        }
        if let Some(stop_s) = v.stop_s {
            if !(stop_s.is_finite() && stop_s > start_s && stop_s <= horizon_s) {
                return Err(err(
                    at("stop_s"),
                    format!(
                        "expected seconds in (start_s = {start_s}, run.horizon_s = {horizon_s}], got {}",
                        vsched_model::number(stop_s)
                    ),
                ));
            }
        }
        // The [[vm]] tables' specs come first in `user`, in table order.
        debug_assert_eq!(user[i].0, Some(i));
        let spec = &mut user[i].1;
        spec.start = vsched_engine::secs_to_ns(start_s);
        spec.stop = v.stop_s.map(vsched_engine::secs_to_ns);
    }
    Ok(())
}

/// Every domain in simulation order (host by host, the driver domain first), with the index
/// of the `[[vm]]` table of each (None: a driver domain or a cluster member).
fn simulation_order(
    user: Vec<(Option<usize>, VmSpec)>,
    hosts: usize,
    dom0: &DriverDomain,
) -> (Vec<VmSpec>, Vec<Option<usize>>) {
    let mut vms: Vec<VmSpec> = Vec::new();
    let mut table_of: Vec<Option<usize>> = Vec::new();
    let mut by_host: Vec<Vec<(Option<usize>, VmSpec)>> = vec![Vec::new(); hosts];
    for (t, spec) in user {
        by_host[spec.host].push((t, spec));
    }
    for (host, user) in by_host.into_iter().enumerate() {
        if dom0.vcpus > 0 {
            vms.push(VmSpec {
                name: if hosts == 1 { "dom0".to_string() } else { format!("dom0.{host}") },
                vcpus: dom0.vcpus as usize,
                weight: dom0.weight,
                cap: 0,
                vm_type: VmType::Hit,
                guest: Guest::Driver,
                pv: Paravirt::default(),
                slice_request_ns: None,
                start: 0,
                stop: None,
                host,
                job: None,
                ranks: Ranks::alone(dom0.vcpus as usize),
                working_set_bytes: working_set::DRIVER_DOMAIN_BYTES,
                tick: dom0.tick,
            });
            table_of.push(None);
        }
        for (t, spec) in user {
            vms.push(spec);
            table_of.push(t);
        }
    }
    (vms, table_of)
}

/// Refuses a VM created or destroyed during the run, for a policy that cannot handle one.
fn no_lifecycle(policy: &PolicySource, vms: &[VmSpec], table_of: &[Option<usize>]) -> Result<(), ConfigError> {
    let Some(d) = vms.iter().position(|v| v.start > 0 || v.stop.is_some()) else { return Ok(()) };
    let i = table_of[d].expect("only [[vm]] tables have start_s / stop_s");
    let field = if vms[d].start > 0 { "start_s" } else { "stop_s" };
    Err(err(
        format!("vm[{i}].{field}"),
        format!(
            "policy {} does not support VMs created or destroyed during the run; expected no start_s / stop_s, or one of {}",
            policy.name(),
            lifecycle_policies().join(", ")
        ),
    ))
}

/// `[[event]]`: changes of a VM's type during the run.
fn events(tables: &[EventSection], vms: &[VmSpec], horizon_s: f64) -> Result<Vec<EventSpec>, ConfigError> {
    let index_of: HashMap<&str, usize> = vms.iter().enumerate().map(|(i, v)| (v.name.as_str(), i)).collect();
    let mut events = Vec::new();
    for (i, e) in tables.iter().enumerate() {
        let at = |field: &str| format!("event[{i}].{field}");
        if !(e.at_s.is_finite() && e.at_s >= 0.0 && e.at_s <= horizon_s) {
            return Err(err(
                at("at_s"),
                format!("expected seconds in [0, run.horizon_s = {horizon_s}], got {}", vsched_model::number(e.at_s)),
            ));
        }
        let vm = index_of.get(e.vm.as_str()).copied().ok_or_else(|| {
            let names: Vec<&str> = vms.iter().map(|v| v.name.as_str()).collect();
            err(at("vm"), format!("unknown VM {:?}; expected one of {}", e.vm, names.join(", ")))
        })?;
        events.push(EventSpec {
            at: vsched_engine::secs_to_ns(e.at_s),
            vm,
            vm_type: parse_type(&at("type"), &e.vm_type)?,
        });
    }
    Ok(events)
}

/// What the policy of each host is told about its domains before the run, for its admission
/// check: a VM counts as CON if it is CON at any time.
fn domain_infos(vms: &[VmSpec], events: &[EventSpec], hosts: usize) -> Vec<Vec<DomainInfo>> {
    let ever_con: HashSet<usize> = events.iter().filter(|e| e.vm_type == VmType::Con).map(|e| e.vm).collect();
    let mut infos: Vec<Vec<DomainInfo>> = vec![Vec::new(); hosts];
    for (i, v) in vms.iter().enumerate() {
        infos[v.host].push(DomainInfo {
            name: v.name.clone(),
            vcpus: v.vcpus,
            weight: v.weight,
            cap: v.cap,
            vm_type: if ever_con.contains(&i) { VmType::Con } else { v.vm_type },
            first_vcpu: 0,
            online: true,
            driver: matches!(v.guest, Guest::Driver),
            host_threads: false,
            rx_packets: 0,
            pv: v.pv,
            slice_request_ns: v.slice_request_ns,
        });
    }
    infos
}
