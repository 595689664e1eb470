//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};

use vsched::Scenario;
use vsched_model::{
    Clocks, Cx, Decision, DomainConfig, Dur, GuestSpec, GuestTick, HostConfig, Instr, Params, PcpuId, Policy, Program,
    ProgramBuilder, RunMetrics, Span, Time, Value, VcpuId, VmMetrics, VmType, FOREVER,
};

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

/// A scenario with a host, a scheduler table and some VMs. The host has no driver domain
/// (`dom0_vcpus = 0`), which a Xen-family policy would otherwise add: the VMs a test names
/// are the whole world; a test that wants a dom0 replaces that line.
pub fn scenario(pcpus: u32, scheduler: &str, vms: &[String], run: &str) -> String {
    format!("[host]\npcpus = {pcpus}\ndom0_vcpus = 0\n[scheduler]\n{scheduler}\n{}\n[run]\n{run}\n", vms.join("\n"))
}

/// A CPU hog workload table.
pub const HOG: &str = "kind = \"cpu_hog\"";

/// `[host]` lines with every machine cost at zero (`hardware = "ideal"`) and clocks in lockstep, so IPIs land in the
/// same instant, rounds start exactly on time and every pCPU decides at 0: traces can be
/// read exactly.
pub const FREE_HOST: &str = "hardware = \"ideal\"\nclocks = \"lockstep\"";

/// A CON CPU hog VM table.
pub fn con(name: &str, vcpus: u32, extra: &str) -> String {
    vm_toml(name, vcpus, &format!("type = \"CON\"\n{extra}"), HOG)
}

/// `scenario` on a host with [`FREE_HOST`] overheads.
pub fn free_scenario(pcpus: u32, scheduler: &str, vms: &[String], run: &str) -> String {
    scenario(pcpus, scheduler, vms, run).replacen(
        &format!("pcpus = {pcpus}\n"),
        &format!("pcpus = {pcpus}\n{FREE_HOST}\n"),
        1,
    )
}

/// Runs a scenario with a trace; returns the metrics and every span (none dropped).
pub fn traced(toml: &str, seed: u64) -> (RunMetrics, Vec<Span>) {
    let scenario = Scenario::parse(toml).unwrap_or_else(|e| panic!("test scenario refused: {e}"));
    let mut sim = scenario.build(seed);
    sim.enable_trace(1_000_000);
    let m = sim.run(scenario.horizon, scenario.until, &mut |_| true).expect("run failed");
    let trace = sim.take_trace().expect("tracing was on");
    assert_eq!(trace.dropped(), 0);
    (m, trace.spans().to_vec())
}

/// Policy `name` built with `params` (others at their defaults), for `Simulation::new`.
pub fn policy(name: &str, params: &[(&str, Value)]) -> Box<dyn Policy> {
    let info = vsched_policies::find(name).unwrap();
    let given: BTreeMap<String, Value> = params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    (info.build)(&Params::check("scheduler", info.params, &given).unwrap()).unwrap()
}

/// A host of `pcpus` pCPUs with zero overheads and clocks in lockstep (as [`FREE_HOST`]).
pub fn free_host(pcpus: usize) -> HostConfig {
    HostConfig { pcpus, clocks: Clocks::Lockstep, ..HostConfig::of(vsched_model::hardware("ideal").unwrap()) }
}

/// A weight-256 domain running hand-written programs, one per vCPU, its guest kernel silent.
pub fn domain(name: &str, vm_type: VmType, programs: Vec<Program>) -> DomainConfig {
    DomainConfig {
        name: name.into(),
        weight: 256,
        cap: 0,
        vm_type,
        workload: "test".into(),
        guest: GuestSpec::lockless(programs, false),
        pv: Default::default(),
        slice_request_ns: None,
        start_at: 0,
        stop_at: None,
        host: 0,
        job: None,
        driver: false,
        working_set_bytes: 0,
        // Hand-written programs are checked by hand: no guest timer unless a test asks.
        tick: GuestTick::Off,
    }
}

/// A program of these instructions.
pub fn program(steps: &[Instr]) -> Program {
    let mut b = ProgramBuilder::new();
    for s in steps {
        b.push(s.clone());
    }
    b.build()
}

/// A program that computes for ever.
pub fn hog() -> Program {
    program(&[Instr::Compute(Dur::Fixed(FOREVER))])
}

/// vCPU `v` runs only on pCPU `v % pcpus`; each pCPU round-robins its vCPUs with a fixed
/// slice (`None`: until the vCPU blocks). Pause-loop exits are ignored.
pub struct Pinned {
    slice_ns: Option<Time>,
    queues: Vec<VecDeque<VcpuId>>,
}

pub fn pinned(slice_ns: Option<Time>) -> Box<dyn Policy> {
    Box::new(Pinned { slice_ns, queues: Vec::new() })
}

impl Policy for Pinned {
    fn supports_vm_lifecycle(&self) -> bool {
        true
    }
    fn init(&mut self, cx: &mut Cx) {
        self.queues = vec![VecDeque::new(); cx.n_pcpus()];
    }
    fn vcpu_insert(&mut self, cx: &mut Cx, v: VcpuId) {
        self.wake(cx, v);
    }
    fn vcpu_remove(&mut self, _cx: &mut Cx, v: VcpuId) {
        self.queues.iter_mut().for_each(|q| q.retain(|&u| u != v));
    }
    fn wake(&mut self, cx: &mut Cx, v: VcpuId) {
        let p = v % cx.n_pcpus();
        self.queues[p].push_back(v);
        if cx.curr(p).is_none() {
            cx.resched(p);
        }
    }
    fn pick_next(&mut self, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        if let Some(u) = prev.filter(|&u| cx.is_runnable(u)) {
            self.queues[p].push_back(u);
        }
        match self.queues[p].pop_front() {
            Some(v) => Decision { next: Some(v), slice_ns: self.slice_ns },
            None => Decision::idle(),
        }
    }
}

/// `t` ns of computing.
pub fn compute(t: Time) -> Instr {
    Instr::Compute(Dur::Fixed(t))
}

/// `x` µs in ns.
pub fn us(x: u64) -> Time {
    x * vsched_model::NS_PER_US
}

/// Taking the VM's lock 0 in kernel mode (pause-loop exits apply).
pub fn kernel_lock() -> Instr {
    Instr::Lock { choice: vsched_model::LockChoice::Fixed(0), kernel: true }
}

/// A policy counter of the run (0 if the policy never bumped it).
pub fn counter(m: &RunMetrics, name: &str) -> u64 {
    m.host.policy_counters.get(name).copied().unwrap_or(0)
}

/// (vCPU, start, end) of the spans on `pcpu`, in time order.
pub fn on(spans: &[Span], pcpu: usize) -> Vec<(usize, Time, Time)> {
    spans.iter().filter(|s| s.pcpu == pcpu).map(|s| (s.vcpu, s.start, s.end)).collect()
}

/// A web server VM of one thread that waits for one client request (arriving at 1 ms), serves
/// it for 100 µs, sends a 3,000-byte reply (2 packets of the default 1,500-byte MTU) and
/// computes 1 ms more (while the reply goes out: the run ends with the server).
pub fn server() -> DomainConfig {
    let (us, ms) = (vsched_model::NS_PER_US, vsched_model::NS_PER_MS);
    let p = program(&[
        Instr::ClientRequest(Dur::Fixed(ms)),
        Instr::RequestBegin,
        Instr::Compute(Dur::Fixed(100 * us)),
        Instr::RequestEnd,
        Instr::ClientReply { bytes: 3_000 },
        Instr::Compute(Dur::Fixed(ms)),
    ]);
    let mut d = domain("web", VmType::Hit, vec![p]);
    d.guest.finite = true;
    d
}

/// `kvm-dy` with `tunable_scaling = "none"` and `params`, driven by hand (`hand_world::Bench`)
/// through the set-up its yield tests share (tests/kvm_yields.rs header): 2 pCPUs, one VM of
/// 4 vCPUs; after the first 4 ms tick v0 runs on pCPU 0, v1 on pCPU 1, and v2, v3 wait,
/// preempted. The reschedule requests are cleared.
pub fn kvm_dy_after_setup(params: &[(&str, Value)]) -> (vsched_model::hand_world::Bench, Box<dyn Policy>) {
    use vsched_model::hand_world::{start, Bench};
    let mut all = vec![("tunable_scaling", Value::Str("none".into()))];
    all.extend(params.iter().cloned());
    let mut policy = policy("kvm-dy", &all);
    let mut world = Bench::new(2, 4);
    start(&mut world, policy.as_mut());
    assert_eq!(world.curr, vec![Some(2), Some(3)]);
    for p in 0..2 {
        world.tick(policy.as_mut(), p, 4 * vsched_model::NS_PER_MS);
        world.schedule(policy.as_mut(), p);
    }
    assert_eq!(world.curr, vec![Some(0), Some(1)]);
    world.resched.clear();
    (world, policy)
}
