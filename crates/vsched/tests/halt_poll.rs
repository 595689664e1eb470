//! KVM halt-polling (`sim/halt_poll.rs`), checked by hand on traces small enough to follow:
//! the host's window grows and shrinks by `kvm_vcpu_halt`'s rules (Linux 6.12), a wake-up
//! inside it skips the block, the scheduler and the switch, a runnable competitor ends it, and
//! the guest's haltpoll governor polls whoever else waits for the pCPU.
//!
//! Unless a test says otherwise the host is `free_host` (every cost 0, clocks in lockstep,
//! guest timers off), so each instant below follows from the programs alone.

mod common;

use common::*;
use vsched::Scenario;
use vsched_model::{
    DomainConfig, Dur, GuestHaltPoll, HaltPoll, HaltPollMetrics, HostConfig, Instr, RunMetrics, Simulation, Time,
    Until, VmType, KVM_HALT_POLL_NS_DEFAULT,
};

/// `[host] halt_poll_ns` at KVM's x86 default (200 µs) with KVM's growth rules.
fn kvm_polling() -> HaltPoll {
    HaltPoll { max_ns: KVM_HALT_POLL_NS_DEFAULT, ..HaltPoll::OFF }
}

fn io(t: Time) -> Instr {
    Instr::Io(Dur::Fixed(t))
}

fn vm_of(name: &str, steps: &[Instr]) -> DomainConfig {
    let mut d = domain(name, VmType::Hit, vec![program(steps)]);
    d.guest.finite = true;
    d
}

fn run_until_done(
    host: HostConfig,
    doms: Vec<DomainConfig>,
    policy_name: &str,
) -> (RunMetrics, Vec<vsched_model::Span>) {
    let pol = if policy_name == "pinned" { pinned(Some(us(1000))) } else { policy(policy_name, &[]) };
    let mut sim = Simulation::new(host, doms, pol, 1);
    sim.enable_trace(100_000);
    let m = sim.run(us(100_000), Until::AllDone, &mut |_| true).expect("run failed");
    let spans = sim.take_trace().expect("traced").spans().to_vec();
    (m, spans)
}

fn polls(m: &RunMetrics, name: &str) -> HaltPollMetrics {
    vm(m, name).halt_poll.clone().expect("a VM that may poll reports its polls")
}

/// `grow_halt_poll_ns` and `shrink_halt_poll_ns` as `kvm_vcpu_halt` applies them: from 0 a
/// halt shorter than `halt_poll_ns` grows the window to `grow_start` (10 µs), then doubles it
/// (20, 40, 80, 160, 320 µs: the grown window is not capped, the next halt clamps it to 200);
/// a halt within the window keeps it; a halt longer than 200 µs halves it, and below
/// `grow_start` it drops to 0.
#[test]
fn window_grows_from_grow_start_to_the_cap_and_shrinks_on_long_halts() {
    let hp = kvm_polling();
    let mut w = 0;
    let mut seen = Vec::new();
    for _ in 0..6 {
        w = hp.after_halt(w, us(199));
        seen.push(w / 1000);
    }
    assert_eq!(seen, [10, 20, 40, 80, 160, 320]);
    // The next halt starts with the window clamped to halt_poll_ns; 199 µs ≤ 200 µs keeps it.
    w = w.min(hp.max_ns);
    assert_eq!(hp.after_halt(w, us(199)), us(200));
    // Exactly halt_poll_ns: neither longer (shrink) nor shorter (grow).
    assert_eq!(hp.after_halt(us(100), us(200)), us(100));
    let mut shrinking = Vec::new();
    for _ in 0..5 {
        w = hp.after_halt(w, us(1000));
        shrinking.push(w);
    }
    assert_eq!(shrinking, [100_000, 50_000, 25_000, 12_500, 0]);
    // From 0 a long halt changes nothing; `halt_poll_ns_shrink = 0` resets at once.
    assert_eq!(hp.after_halt(0, us(1000)), 0);
    assert_eq!(HaltPoll { shrink: 0, ..hp }.after_halt(us(160), us(1000)), 0);
}

/// The guest governor (`adjust_poll_limit`): grows from 0 to `grow_start` (50 µs) on a halt of
/// at most `guest_halt_poll_ns`, capped there; shrinks on a longer one unless `allow_shrink` is
/// off.
#[test]
fn guest_window_follows_adjust_poll_limit() {
    let g = GuestHaltPoll::default();
    assert_eq!(g.after_halt(0, us(5)), us(50));
    assert_eq!(g.after_halt(us(50), us(120)), us(100));
    assert_eq!(g.after_halt(us(100), us(150)), us(200));
    assert_eq!(g.after_halt(us(200), us(200)), us(200));
    assert_eq!(g.after_halt(us(100), us(80)), us(100));
    assert_eq!(g.after_halt(us(200), us(201)), us(100));
    assert_eq!(g.after_halt(us(50), us(1000)), 0);
    assert_eq!(GuestHaltPoll { allow_shrink: false, ..g }.after_halt(us(200), us(1000)), us(200));
}

/// One vCPU alone, `Io(5 µs)`, 10 µs of work, `Io(5 µs)`, 10 µs, exit; the dispatcher charges
/// 1 µs of scheduler and 2 µs of switch. Without polling: dispatch at 0 (runs from 3), halt at
/// 3, woken at 8, dispatched (runs from 11), halt at 21, woken at 26, runs from 29, exits at
/// 39. With `halt_poll_ns` = 200 µs the first halt cannot poll (the window starts at 0) and
/// grows it to 10 µs (halt of 5 µs < 200 µs); the second polls from 21, the wake-up at 26
/// ends the poll and the vCPU goes on at 26 with no scheduler run and no switch: it exits at
/// 36, after 2 switches rather than 3, with one successful poll of 5 µs charged as its CPU.
#[test]
fn a_wake_inside_the_window_skips_the_block_and_the_switch() {
    let steps = [io(us(5)), compute(us(10)), io(us(5)), compute(us(10)), Instr::Exit];
    let costs = HostConfig { sched_cost_ns: us(1), context_switch_ns: us(2), ..free_host(1) };
    let (off, _) = run_until_done(costs.clone(), vec![vm_of("a", &steps)], "cfs");
    assert_eq!(vm(&off, "a").completion_s, Some(39e-6));
    assert_eq!(off.host.context_switches, 3);
    assert!(vm(&off, "a").halt_poll.is_none(), "no polling figures without polling");

    let (on, spans) = run_until_done(HostConfig { halt_poll: kvm_polling(), ..costs }, vec![vm_of("a", &steps)], "cfs");
    let a = vm(&on, "a");
    assert_eq!(a.completion_s, Some(36e-6));
    assert_eq!(on.host.context_switches, 2);
    let p = polls(&on, "a");
    assert_eq!((p.halt_attempted_poll, p.halt_successful_poll, p.halt_poll_invalid), (1, 1, 0));
    assert_eq!((p.halt_poll_success_s, p.halt_poll_fail_s), (5e-6, 0.0));
    // Running 0..3 (overheads), 3 (halt), 8..21 (3 of overheads, 10 of work), 21..26 polling,
    // 26..36 working.
    assert_eq!(a.cpu_s, 31e-6);
    // The pCPU's spans: the vCPU from 0 to its first halt, then from 8 on without a break.
    assert_eq!(on_spans(&spans), vec![(0, 0, us(3)), (0, us(8), us(36))]);
    // Two wake-ups: 0 µs (caught by the poll) and 8 − 8 = 0 µs from waking to dispatch.
    assert_eq!(a.wake_latency_us_mean, Some(0.0));
}

fn on_spans(spans: &[vsched_model::Span]) -> Vec<(usize, Time, Time)> {
    on(spans, 0)
}

/// Two VMs on one pCPU under `cfs`, no costs, `halt_poll_ns_grow_start` = 100 µs so that the
/// first grown window is 100 µs. A: `Io(5)`, 10 µs, `Io(150)`, 10 µs, exit. B: `Io(30)`, 50 µs,
/// exit. Both halt at 0 (windows 0). A wakes at 5 (window → 100 µs), works to 15 and polls
/// from 15 (to 115 at most). B's wake-up at 30 queues it on the pCPU: `single_task_running()`
/// is false, A's poll fails after 15 µs and A blocks; B runs 30..80 and polls from its exit
/// (its window grew to 100 µs at 30). A's wake-up at 165 queues A beside polling B, whose poll
/// fails after 85 µs; A runs 165..175 and exits.
#[test]
fn a_runnable_competitor_ends_the_poll() {
    let host = HostConfig { halt_poll: HaltPoll { grow_start_ns: us(100), ..kvm_polling() }, ..free_host(1) };
    let a = vm_of("A", &[io(us(5)), compute(us(10)), io(us(150)), compute(us(10)), Instr::Exit]);
    let b = vm_of("B", &[io(us(30)), compute(us(50)), Instr::Exit]);
    let (m, spans) = run_until_done(host, vec![a, b], "cfs");
    let (pa, pb) = (polls(&m, "A"), polls(&m, "B"));
    assert_eq!((pa.halt_attempted_poll, pa.halt_successful_poll, pa.halt_poll_fail_s), (1, 0, 15e-6));
    assert_eq!((pb.halt_attempted_poll, pb.halt_successful_poll, pb.halt_poll_fail_s), (1, 0, 85e-6));
    assert_eq!(vm(&m, "A").completion_s, Some(175e-6));
    assert_eq!(vm(&m, "B").completion_s, Some(80e-6));
    let runs: Vec<(usize, Time, Time)> = on_spans(&spans).into_iter().filter(|&(_, s, e)| e > s).collect();
    assert_eq!(runs, vec![(0, us(5), us(30)), (1, us(30), us(165)), (0, us(165), us(175))]);
}

/// Overcommit and the guest governor, under a per-pCPU round robin with 1 ms slices (`pinned`):
/// G (`guest_haltpoll`): `Io(5)`, 10 µs, `Io(100)`, 10 µs, exit; H, a CPU hog created at 30 µs.
/// G's first halt (window 0) executes HLT at 0; it wakes at 5 and its window grows to 50 µs
/// (halt of 5 µs). Its next idle at 15 polls in the guest until 65 although H is runnable from
/// 30: H waits 35 µs, G burns 50 µs polling. Then G halts, H runs its slice 65..1065, G
/// (woken at 115) runs 1065..1075 while H waits 10 µs more. Without guest polling H runs from
/// 30 (its slice to 1030) and waits only for G's last 10 µs.
#[test]
fn guest_polling_burns_the_pcpu_under_overcommit() {
    let g_steps = [io(us(5)), compute(us(10)), io(us(100)), compute(us(10)), Instr::Exit];
    let hog_vm = || DomainConfig { start_at: us(30), ..domain("H", VmType::Hit, vec![hog()]) };
    let (off, _) = run_until_done(free_host(1), vec![vm_of("G", &g_steps), hog_vm()], "pinned");
    assert_eq!(vm(&off, "H").steal_s, 10e-6);
    assert_eq!(vm(&off, "G").cpu_s, 20e-6);

    let mut g = vm_of("G", &g_steps);
    g.pv.haltpoll = Some(GuestHaltPoll::default());
    let (on, spans) = run_until_done(free_host(1), vec![g, hog_vm()], "pinned");
    let p = polls(&on, "G");
    assert_eq!((p.guest_halt_polls, p.guest_halt_successful_polls, p.guest_halt_poll_s), (1, 0, 50e-6));
    assert_eq!(p.halt_attempted_poll, 0, "the guest's driver turned host polling off");
    assert_eq!(vm(&on, "G").cpu_s, 70e-6);
    assert_eq!(vm(&on, "H").steal_s, 45e-6);
    assert_eq!(vm(&on, "G").completion_s, Some(1075e-6));
    let runs: Vec<(usize, Time, Time)> = on_spans(&spans).into_iter().filter(|&(_, s, e)| e > s).collect();
    assert_eq!(runs, vec![(0, us(5), us(65)), (1, us(65), us(1065)), (0, us(1065), us(1075))]);
}

/// A guest poll caught in time: the same G alone, its second wait 30 µs, within the 50 µs
/// window: the wake-up at 45 ends the poll (no HLT, no block), G goes on at once and exits at
/// 55, with one switch in all.
#[test]
fn a_guest_poll_catches_a_wake_up_without_a_switch() {
    let mut g = vm_of("G", &[io(us(5)), compute(us(10)), io(us(30)), compute(us(10)), Instr::Exit]);
    g.pv.haltpoll = Some(GuestHaltPoll::default());
    let (m, _) = run_until_done(free_host(1), vec![g], "cfs");
    let p = polls(&m, "G");
    assert_eq!((p.guest_halt_polls, p.guest_halt_successful_polls, p.guest_halt_poll_s), (1, 1, 30e-6));
    assert_eq!(vm(&m, "G").completion_s, Some(55e-6));
    assert_eq!(m.host.context_switches, 2);
}

/// Polling needs `halt_poll_ns` > 0: the same run with halt polling off is the run of before,
/// figure for figure (the report has no polling fields at all).
#[test]
fn off_by_default_and_silent() {
    assert_eq!(HostConfig::default().halt_poll, HaltPoll::OFF);
    assert_eq!(HaltPoll::OFF.max_ns, 0);
    let toml = scenario(2, "name = \"kvm-eevdf\"", &[vm_toml("w", 1, "", HOG)], "horizon_s = 0.01");
    let m = run(&toml, 1);
    let json = serde_json::to_string(&m).unwrap();
    assert!(!json.contains("halt_"), "{json}");
}

fn refusal(toml: &str) -> String {
    match Scenario::parse(toml) {
        Ok(_) => panic!("accepted: {toml}"),
        Err(e) => e.to_string(),
    }
}

/// Bad values are refused in one line naming the field.
#[test]
fn bad_settings_are_refused_naming_the_field() {
    let kvm = |host: &str, vm_extra: &str| {
        format!(
            "[host]\npcpus = 2\n{host}\n[scheduler]\nname = \"kvm-eevdf\"\n{}\n[run]\nhorizon_s = 0.01\n",
            vm_toml("w", 1, vm_extra, HOG)
        )
    };
    let e = refusal(&kvm("halt_poll_ns = 5000000000", ""));
    assert!(e.contains("host.halt_poll_ns") && e.contains("0..=4294967295"), "{e}");
    let e = refusal(&kvm("halt_poll_ns = -1", ""));
    assert!(e.contains("halt_poll_ns"), "{e}");
    let e = refusal(&kvm("halt_poll_ns_shrink = 1.5", ""));
    assert!(e.contains("halt_poll_ns_shrink"), "{e}");
    let e = refusal(&kvm("", "guest_halt_poll_ns = 100000"));
    assert!(e.contains("vm[0].guest_halt_poll_ns") && e.contains("guest_haltpoll = true"), "{e}");
    let e = refusal(&kvm("", "guest_haltpoll = true\nguest_halt_poll_grow_start = 99999999999"));
    assert!(e.contains("vm[0].guest_halt_poll_grow_start"), "{e}");
    // KVM's, refused on a Xen host.
    let xen = |host: &str, vm_extra: &str| {
        format!(
            "[host]\npcpus = 2\ndom0_vcpus = 0\n{host}\n[scheduler]\nname = \"credit\"\n{}\n[run]\nhorizon_s = 0.01\n",
            vm_toml("w", 1, vm_extra, HOG)
        )
    };
    let e = refusal(&xen("halt_poll_ns = 200000", ""));
    assert!(e.contains("host.halt_poll_ns") && e.contains("KVM"), "{e}");
    let e = refusal(&xen("", "guest_haltpoll = true"));
    assert!(e.contains("vm[0].guest_haltpoll"), "{e}");
    for e in [refusal(&kvm("halt_poll_ns = 5000000000", "")), refusal(&xen("", "guest_haltpoll = true"))] {
        assert!(!e.contains('\n'), "one line: {e}");
    }
    // And accepted where they apply.
    assert!(Scenario::parse(&kvm("halt_poll_ns = 200000", "guest_haltpoll = true")).is_ok());
}

/// A waker skips the IPI to a vCPU polling in its guest (`TIF_POLLING_NRFLAG`). Two vCPUs on
/// two pCPUs (`pinned`, no slices), IPIs of 2 µs, exits of 1 µs, no IPI virtualization. Both
/// halt at 0 and are woken at 5; the reschedule IPIs put them on their pCPUs at 7 (the
/// window grows to 50 µs). vCPU 0 reaches a blocking barrier at 17; vCPU 1 releases it at 37.
/// With guest haltpoll vCPU 0 polls from 17, sees the release at 37 at once (no IPI, no exit
/// for the waker) and both finish at 47. Without, vCPU 0 halts; the release's IPI wakes it at
/// 39, the waker pays its ICR-write exit (finishing at 48) and the reschedule IPI puts vCPU 0
/// back at 41: it finishes at 51, after 2 more IPIs (each run also has the 4 reschedule IPIs
/// of the start and of the wake-ups at 5).
#[test]
fn a_waker_skips_the_ipi_to_a_vcpu_polling_in_its_guest() {
    let barrier = Instr::Barrier(vsched_model::BarrierWait::Block);
    let v0 = program(&[io(us(5)), compute(us(10)), barrier.clone(), compute(us(10)), Instr::Exit]);
    let v1 = program(&[io(us(5)), compute(us(30)), barrier, compute(us(10)), Instr::Exit]);
    let host = HostConfig { ipi_latency_ns: us(2), vm_exit_ns: us(1), ipi_virtualization: false, ..free_host(2) };
    let make = |haltpoll: bool| {
        let mut d = domain("B", VmType::Hit, vec![v0.clone(), v1.clone()]);
        d.guest.finite = true;
        d.pv.haltpoll = haltpoll.then(GuestHaltPoll::default);
        d
    };
    let run = |haltpoll: bool| {
        let mut sim = Simulation::new(host.clone(), vec![make(haltpoll)], pinned(None), 1);
        sim.run(us(100_000), Until::AllDone, &mut |_| true).expect("run failed")
    };
    let (on, off) = (run(true), run(false));
    assert_eq!(vm(&on, "B").completion_s, Some(47e-6));
    // The reschedule IPIs of the start and of the wake-ups at 5, two each.
    assert_eq!(on.host.ipis, 4);
    let p = polls(&on, "B");
    assert_eq!((p.guest_halt_polls, p.guest_halt_successful_polls, p.guest_halt_poll_s), (1, 1, 20e-6));
    assert_eq!(vm(&off, "B").completion_s, Some(51e-6));
    assert_eq!(off.host.ipis, 6);
}
