//! Strict co-scheduling (`cosched`): gangs run whole, alternate by fair share, fragment the
//! host when they do not pack, and split the CPU by weight. Hand-checked on traces.

mod common;
use std::collections::BTreeSet;

use common::*;
use vsched_model::*;

const MS: u64 = NS_PER_MS;

/// `(from, to, {(dom, index)})`: the vCPUs running from `from` to `to`.
type Interval = (Time, Time, BTreeSet<(DomId, usize)>);

/// The vCPUs running in each interval between consecutive span boundaries.
fn timeline(spans: &[Span]) -> Vec<Interval> {
    let cuts: BTreeSet<Time> = spans.iter().flat_map(|s| [s.start, s.end]).collect();
    let cuts: Vec<Time> = cuts.into_iter().collect();
    cuts.windows(2)
        .map(|w| {
            let running = spans.iter().filter(|s| s.start <= w[0] && w[0] < s.end).map(|s| (s.dom, s.index)).collect();
            (w[0], w[1], running)
        })
        .collect()
}

/// Asserts that at no time a CON VM runs a strict subset of its vCPUs (all these VMs are
/// CPU hogs, so all their vCPUs are always runnable); `gangs` lists (domain, width).
fn assert_whole_gangs(spans: &[Span], gangs: &[(DomId, usize)]) {
    for (from, to, running) in timeline(spans) {
        for &(d, n) in gangs {
            let k = running.iter().filter(|(dd, _)| *dd == d).count();
            assert!(k == 0 || k == n, "VM {d} runs {k} of its {n} vCPUs in [{from}, {to}) ns");
        }
    }
}

/// The domains running in the middle of each 30 ms round.
fn gangs_per_round(spans: &[Span], rounds: u64) -> Vec<BTreeSet<DomId>> {
    (0..rounds)
        .map(|k| {
            let t = k * 30 * MS + 15 * MS;
            spans.iter().filter(|s| s.start <= t && t < s.end).map(|s| s.dom).collect()
        })
        .collect()
}

#[test]
fn two_small_gangs_alternate_with_a_wide_one_by_fair_share() {
    // 4 pCPUs; A and B have 2 vCPUs, C has 4; equal weights. Virtual time = CPU ms received
    // over weight × runnable vCPUs (Xen's `weight * active_vcpu_count`), here CPU ms over the
    // domain's vCPUs: a round of any gang adds 30. Ties by domain order. Round by round:
    //   R0  A0 B0 C0     -> A+B fit, C does not        A30  B30  C0
    //   R1  C lowest     -> C alone                    A30  B30  C30
    //   R2  tie at 30    -> A+B (domain order)         A60  B60  C30
    //   R3  C lowest     -> C                          C60
    //   ... so A+B and C alternate: 5 rounds each, and CPU goes 1 : 1 : 2 as weight × vCPUs.
    // (Shared per domain, C's rounds would count 4 × 30 and A+B would get 7 of the 10.)
    let toml =
        free_scenario(4, "name = \"cosched\"", &[con("A", 2, ""), con("B", 2, ""), con("C", 4, "")], "horizon_s = 0.3");
    let (m, spans) = traced(&toml, 1);
    assert_whole_gangs(&spans, &[(0, 2), (1, 2), (2, 4)]);
    let ab: BTreeSet<DomId> = [0, 1].into();
    let c: BTreeSet<DomId> = [2].into();
    let expected = vec![&ab, &c, &ab, &c, &ab, &c, &ab, &c, &ab, &c];
    let got = gangs_per_round(&spans, 10);
    assert_eq!(got.iter().collect::<Vec<_>>(), expected);
    // Every round starts on the 30 ms boundary and fills the host: no idle pCPU time.
    for (from, to, running) in timeline(&spans) {
        assert_eq!(running.len(), 4, "all 4 pCPUs busy in [{from}, {to})");
    }
    assert!(spans.iter().all(|s| s.start % (30 * MS) == 0 && s.end % (30 * MS) == 0));
    assert_eq!(m.host.frag_idle_s, 0.0);
    // 5 A+B rounds × 2 vCPUs × 30 ms, 5 C rounds × 4 × 30 ms.
    assert!((vm(&m, "A").cpu_s - 0.300).abs() < 1e-9);
    assert!((vm(&m, "B").cpu_s - 0.300).abs() < 1e-9);
    assert!((vm(&m, "C").cpu_s - 0.600).abs() < 1e-9);
    // Every round changes gangs, so each round launches: C in R1, R3, R5, R7, R9; A and B in
    // R0, R2, R4, R6, R8 and, at the plan at t = 300 ms (the horizon itself, all three tied
    // at 150), R10.
    assert_eq!(vm(&m, "A").co_launches, 6);
    assert_eq!(vm(&m, "B").co_launches, 6);
    assert_eq!(vm(&m, "C").co_launches, 5);
    assert_eq!(m.host.co_launches, 17);
}

#[test]
fn a_gang_that_cannot_fill_the_host_fragments_it() {
    // 4 pCPUs; A has 3 vCPUs, B has 2, equal weights. Only one gang fits at a time
    // (3 + 2 > 4). Xen's share is weight × active vCPUs, so a round of A (3 vCPUs × 30 ms
    // over 3 × 256) and a round of B (2 × 30 ms over 2 × 256) advance each domain's virtual
    // time alike: the gangs alternate, A first on the tie (domain order): A B A B A B A B A B.
    // (Shared per domain, B would take 6 rounds to A's 4, for equal CPU time.)
    // An A round leaves 1 pCPU idle while B's 2 vCPUs wait; a B round leaves 2 idle while
    // A's 3 wait. Fragmentation = 5 A rounds × 1 × 30 ms + 5 B rounds × 2 × 30 ms = 0.45 s.
    let toml = free_scenario(4, "name = \"cosched\"", &[con("A", 3, ""), con("B", 2, "")], "horizon_s = 0.3");
    let (m, spans) = traced(&toml, 1);
    assert_whole_gangs(&spans, &[(0, 3), (1, 2)]);
    let a: BTreeSet<DomId> = [0].into();
    let b: BTreeSet<DomId> = [1].into();
    let expected = vec![&a, &b, &a, &b, &a, &b, &a, &b, &a, &b];
    assert_eq!(gangs_per_round(&spans, 10).iter().collect::<Vec<_>>(), expected);
    assert!((m.host.frag_idle_s - 0.450).abs() < 1e-9, "frag_idle_s = {}", m.host.frag_idle_s);
    // CPU in the ratio of weight × vCPUs, 3 : 2.
    assert!((vm(&m, "A").cpu_s - 0.450).abs() < 1e-9);
    assert!((vm(&m, "B").cpu_s - 0.300).abs() < 1e-9);
    // (5 × 3 + 5 × 2) pCPU-rounds busy of 10 × 4.
    assert!((m.host.utilization - 0.625).abs() < 1e-9);
}

#[test]
fn cpu_bound_gangs_share_the_host_by_weight() {
    // A (weight 512) should get half the host, B and C a quarter each. A runs every round
    // beside B or C, which alternate — feasible for gangs of 2 on 4 pCPUs. Over 60 s there
    // are 2000 rounds; the schedule's discretisation error is at most one round of one VM
    // (2 × 30 ms of 240 pCPU-s = 0.025 %), and the default host overheads (a few µs per
    // switch, charged to the vCPU that switches in) shift shares by far less than 0.1 %.
    // So 1 % relative tolerance is generous yet would catch any per-vCPU weighting or
    // lost round.
    let vms = [con("A", 2, "weight = 512"), con("B", 2, "weight = 256"), con("C", 2, "weight = 256")];
    let m = run(&scenario(4, "name = \"cosched\"", &vms, "horizon_s = 60"), 1);
    for v in &m.vms {
        let ratio = v.cpu_share / v.weight_share;
        assert!((ratio - 1.0).abs() < 0.01, "{}: share {} for weight share {}", v.name, v.cpu_share, v.weight_share);
    }
    assert!(m.host.fairness.unwrap() > 0.9999);
    assert!(m.host.utilization > 0.999, "gangs of 2 pack 4 pCPUs exactly");
}

#[test]
fn a_blocked_gang_member_keeps_its_pcpu_idle_and_hit_vcpus_never_borrow_it() {
    // 2 pCPUs. CON VM G: vCPU 0 is a hog; vCPU 1 computes 10 ms, waits 10 ms for I/O, then
    // computes forever. HIT VM H: one hog.
    // R0 [0, 30): G (tie, domain order) takes both pCPUs; H waits. G1 blocks at 10 ms: its
    //   pCPU stays idle on behalf of the gang — H may not borrow it — and G1 resumes there
    //   at 20 ms. Fragmentation: 10 ms (one idle pCPU while H waits).
    // Virtual time in ms of CPU over weight × active vCPUs (Xen's share; a vCPU that ran in
    // the last 30 ms stays active while it blocks), charged when a pCPU reschedules and at
    // each plan, in ms per 256:
    // R0: G1's 10 ms as it blocks, G0's 30 ms and G1's last 10 ms at the plan, each over
    //   G's 2 active vCPUs: 5 + 15 + 5 = 25.
    // R1 [30, 60): G 25, H 0 -> H first (1 pCPU), then G needs 2 and only 1 is left: the
    //   free pCPU idles while G's 2 vCPUs wait (30 ms of fragmentation). G's vCPUs never
    //   run one without the other.
    // R2 [60, 90): G 25 < H 30 -> G on both pCPUs; H waits (G 55).
    // R3 [90, 120): H 30 < G 55 -> H; G does not fit and a pCPU idles 30 ms.
    let mut b = ProgramBuilder::new();
    b.push(Instr::Compute(Dur::Fixed(10 * MS)))
        .push(Instr::Io(Dur::Fixed(10 * MS)))
        .push(Instr::Compute(Dur::Fixed(FOREVER)));
    let doms = vec![domain("G", VmType::Con, vec![hog(), b.build()]), domain("H", VmType::Hit, vec![hog()])];
    let mut sim =
        Simulation::new(free_host(2), doms, policy("cosched", &[("placement", Value::Str("sticky".into()))]), 1);
    sim.enable_trace(1000);
    let m = sim.run(120 * MS, Until::Horizon, &mut |_| true).unwrap();
    let spans = sim.take_trace().unwrap().spans().to_vec();
    let mut got: Vec<(PcpuId, VcpuId, u64, u64)> =
        spans.iter().map(|s| (s.pcpu, s.vcpu, s.start / MS, s.end / MS)).collect();
    got.sort();
    // vCPUs: G0 = 0, G1 = 1, H0 = 2. Sticky placement: a vCPU that never ran takes the
    // first free pCPU from the cursor, which has moved to pCPU 1 by R1, so H runs on pCPU 1
    // (and goes back there in R3); in R2 G0 and G1 go back to their last pCPUs, 0 and 1.
    assert_eq!(
        got,
        vec![
            (0, 0, 0, 30), // G0, R0
            (0, 0, 60, 90),
            (1, 1, 0, 10),  // G1 runs 10 ms and blocks: pCPU 1 idles 10-20 ms
            (1, 1, 20, 30), // G1 back on its pCPU
            (1, 1, 60, 90),
            (1, 2, 30, 60), // H0, R1; pCPU 0 idles while G waits
            (1, 2, 90, 120),
        ]
    );
    // Fragmentation: 10 ms in R0, 30 ms in R1 and R3 each.
    assert!((m.host.frag_idle_s - 0.070).abs() < 1e-9, "frag {}", m.host.frag_idle_s);
}

#[test]
fn a_blocked_hit_vcpu_lends_its_slot_to_another_hit_vcpu_until_it_wakes() {
    // 3 pCPUs. CON VM G: 2 hogs. HIT VM H: H0 computes 10 ms, waits 10 ms for I/O, then
    // computes forever; H1 is a hog. R0 plans G (2 pCPUs) + H0 (1) by domain then vCPU order,
    // H1 does not fit. When H0 blocks at 10 ms its slot takes the waiting HIT vCPU H1 (work
    // conserving for HIT); when H0 wakes at 20 ms it takes its planned slot back.
    let mut b = ProgramBuilder::new();
    b.push(Instr::Compute(Dur::Fixed(10 * MS)))
        .push(Instr::Io(Dur::Fixed(10 * MS)))
        .push(Instr::Compute(Dur::Fixed(FOREVER)));
    let doms = vec![domain("G", VmType::Con, vec![hog(), hog()]), domain("H", VmType::Hit, vec![b.build(), hog()])];
    let mut sim = Simulation::new(free_host(3), doms, policy("cosched", &[]), 1);
    sim.enable_trace(1000);
    let m = sim.run(30 * MS, Until::Horizon, &mut |_| true).unwrap();
    let mut got: Vec<(PcpuId, VcpuId, u64, u64)> =
        sim.take_trace().unwrap().spans().iter().map(|s| (s.pcpu, s.vcpu, s.start / MS, s.end / MS)).collect();
    got.sort_by_key(|&(p, _, start, _)| (p, start));
    // vCPUs: G0 = 0, G1 = 1, H0 = 2, H1 = 3; the rotating hand-out starts at pCPU 0.
    assert_eq!(got, vec![(0, 0, 0, 30), (1, 1, 0, 30), (2, 2, 0, 10), (2, 3, 10, 20), (2, 2, 20, 30)]);
    assert_eq!(m.host.frag_idle_s, 0.0);
    assert_eq!(m.host.policy_counters.get("cosched.hit_fills"), None, "H1 filled at H0's block, not on a wake");
}

#[test]
fn hit_vcpus_pack_beside_a_gang_but_never_stand_in_for_it() {
    // 4 pCPUs, CON VM G of 3 hogs, HIT VM H of 2 hogs (each HIT vCPU is a unit of one pCPU).
    // Virtual time: ms of CPU over weight × runnable vCPUs (G: 3, H: 2), in ms per 256:
    //   R0  tie at 0          -> G (3) + H0 (1): full           G30  H15
    //   R1  H 15 < G 30       -> H0 + H1; G needs 3, 2 are left  H45   (2 pCPUs idle)
    //   R2  G 30 < H 45       -> G + H0                          G60  H60
    //   R3  tie at 60         -> G + H0 (domain order)           G90  H75
    //   R4  H                 -> H0 + H1                         H105  (2 idle)
    //   R5, R6 G + H0; R7 H alone; R8, R9 G + H0 (the cycle of R2-R4).
    // The 2 pCPUs of an H round idle while G waits: a HIT VM packs beside a gang but cannot
    // stand in for one. Fragmentation = 3 × 2 × 30 ms = 0.18 s; G gets 7 × 90 ms, H gets
    // 7 × 30 + 3 × 60 ms.
    let vms = [con("G", 3, ""), vm_toml("H", 2, "", HOG)];
    let (m, spans) = traced(&free_scenario(4, "name = \"cosched\"", &vms, "horizon_s = 0.3"), 1);
    assert_whole_gangs(&spans, &[(0, 3)]);
    let g_and_h: BTreeSet<DomId> = [0, 1].into();
    let h: BTreeSet<DomId> = [1].into();
    let rounds = gangs_per_round(&spans, 10);
    for (k, r) in rounds.iter().enumerate() {
        assert_eq!(r, if [1, 4, 7].contains(&k) { &h } else { &g_and_h }, "round {k}");
    }
    for (from, to, running) in timeline(&spans) {
        let busy = if running.iter().any(|(d, _)| *d == 0) { 4 } else { 2 };
        assert_eq!(running.len(), busy, "[{from}, {to})");
    }
    assert!((m.host.frag_idle_s - 0.180).abs() < 1e-9, "frag {}", m.host.frag_idle_s);
    assert!((vm(&m, "G").cpu_s - 0.630).abs() < 1e-9);
    assert!((vm(&m, "H").cpu_s - 0.390).abs() < 1e-9);
}

#[test]
fn realistic_overheads_and_type_changes_keep_the_gang_invariant() {
    // Default overheads (IPI latency 2 µs: gangs start one IPI after the boundary), mixed
    // synchronizing workloads, and a VM that turns CON mid-run. The policy's own check
    // (strict subsets only while reschedules are in flight) runs after every event in
    // debug builds; this drives it through wake-ups, blocking gang members and re-plans.
    let vms = [
        vm_toml("lock", 3, "type = \"CON\"", "kind = \"spinlock\"\niterations = 20000\ncompute_us = 20\ncs_us = 5"),
        vm_toml("bsp", 2, "type = \"CON\"", "kind = \"bsp\"\nsupersteps = 1000\ncompute_ms = 1\nwait = \"block\""),
        vm_toml("web", 2, "", "kind = \"web\"\nservice_us = 50\nio_us = 500"),
        vm_toml("hog", 2, "", HOG),
    ];
    let events =
        "[[event]]\nat_s = 0.5\nvm = \"hog\"\ntype = \"CON\"\n[[event]]\nat_s = 1.0\nvm = \"lock\"\ntype = \"HIT\"\n";
    let toml = format!("{}{events}", scenario(4, "name = \"cosched\"", &vms, "horizon_s = 2"));
    let m = run(&toml, 3);
    assert!(vm(&m, "web").requests > 0);
    assert!(vm(&m, "lock").completion_s.is_some() && vm(&m, "bsp").completion_s.is_some());
    assert!(m.host.co_launches > 0 && m.host.co_ipis > 0);
}

#[test]
fn a_con_vm_wider_than_the_host_is_refused() {
    let toml = scenario(4, "name = \"cosched\"", &[con("wide", 5, "")], "horizon_s = 1");
    let err = vsched::Scenario::parse(&toml).err().expect("refused").to_string();
    assert!(err.contains("cosched cannot run") && err.contains("5 vCPUs"), "{err}");
}

/// Issue 16 item 6: pCPUs that free up mid-round take a whole waiting gang at once
/// (Ousterhout's alternate selection, at gang granularity so that strictness holds), rather
/// than idling until the next round.
#[test]
fn a_waiting_gang_starts_as_soon_as_enough_pcpus_free_up() {
    // 2 pCPUs. HIT VM H (domain 0): one vCPU that computes 1 ms then waits for I/O for
    // ever. CON VM G (domain 1): 2 hogs. The first plan, all virtual times 0, ties by
    // domain order: H's vCPU gets a slot, G (2 wide) does not fit beside it, and the other
    // pCPU has nothing to run. At 1 ms H blocks: both pCPUs are free and G starts on them
    // then, for the rest of the round and the next ones (H never wakes). Planned only at
    // round boundaries (the reading before issue 16), G would start at 30 ms and the host
    // would lose 29 ms on one pCPU and 30 ms on the other.
    let mut b = ProgramBuilder::new();
    b.push(Instr::Compute(Dur::Fixed(MS))).push(Instr::Io(Dur::Fixed(FOREVER)));
    let doms = vec![domain("H", VmType::Hit, vec![b.build()]), domain("G", VmType::Con, vec![hog(), hog()])];
    let mut sim = Simulation::new(free_host(2), doms, policy("cosched", &[]), 1);
    sim.enable_trace(1000);
    let m = sim.run(60 * MS, Until::Horizon, &mut |_| true).unwrap();
    let spans = sim.take_trace().unwrap().spans().to_vec();
    let g_start: Vec<Time> = spans.iter().filter(|s| s.dom == 1).map(|s| s.start).collect();
    assert_eq!(g_start, vec![MS, MS], "{spans:?}");
    assert_eq!(vm(&m, "G").cpu_s, 2.0 * 0.059);
    assert_eq!(m.host.policy_counters.get("cosched.gap_gangs"), Some(&1));
    assert_whole_gangs(&spans, &[(1, 2)]);
}

#[test]
fn an_idle_gang_planned_for_a_timer_wake_up_pays_for_the_pcpus_it_holds() {
    // Seed 001 at VOR 2.5 (four 5-vCPU kernbench VMs on 8 pCPUs; one gang fits at a time),
    // seed 7: when the others near their end, vm2 is ahead of them in virtual time (at 1.95 s
    // by about 0.6 of a round of its 5 vCPUs, in a debug print of each plan). Once they finish, they are idle but for their guests' timer wake-ups, and a
    // woken one is still a gang unit of 5 vCPUs. When only what its vCPUs ran was charged,
    // such a gang stayed below vm2 in virtual time round after round, took the host's only
    // gang place for a few µs of work and left vm2 waiting: vm2 finished at 38.3 s against
    // about 2 s for the others. Charged for the pCPUs held on its behalf (as Xen's core
    // scheduling burns a unit's credit while it is scheduled, idle siblings included), it
    // soon ranks above vm2: every VM finishes within 2.4 s.
    let toml = include_str!("../../../scenarios/papers/seed001/kernbench-vcpus-5.toml")
        .replace("name = \"credit\"", "name = \"cosched\"");
    let m = run(&toml, 7);
    let done: Vec<f64> = m.vms.iter().filter(|v| v.name != "dom0").map(|v| v.completion_s.expect("finished")).collect();
    let (first, last) = (done.iter().cloned().fold(f64::MAX, f64::min), done.iter().cloned().fold(0.0, f64::max));
    assert!(last < 1.5 * first, "completions {done:?}: the last VM waited behind idle gangs");
}
