//! `hybrid` (Weng et al., VEE'09, seed 003): step-by-step traces of its rules on small
//! hand-checked hosts, and fairness against weight.
//!
//! Hosts have no overheads (so every span boundary is a slot boundary or an IPI landing),
//! except the IPI latency, set large where it makes a co-scheduling signal visible. PE
//! arithmetic in the comments: `PE_total = |P| × 100 × 3` per 30 ms interval, split by
//! weight among all VMs, then equally among a VM's vCPUs (integer division).

mod common;
use common::*;
use vsched::Scenario;
use vsched_model::{RunMetrics, Span, NS_PER_MS, NS_PER_US};

/// A host without overheads but `ipi_us` of IPI latency, clocks in lockstep, running
/// `hybrid` (with `extra` scheduler parameters).
fn host(pcpus: u32, ipi_us: u32, extra: &str) -> String {
    format!(
        "[host]\npcpus = {pcpus}\ndom0_vcpus = 0\ncontext_switch_us = 0\nipi_latency_us = {ipi_us}\nsched_cost_us = 0\n\
         memory_latency_ns = 0\nl3_latency_cycles = 0\nclocks = \"lockstep\"\n[scheduler]\nname = \"hybrid\"\n{extra}\n"
    )
}

/// Spans as (pCPU, VM name, vCPU index, start µs, end µs), sorted by pCPU then start.
fn table(m: &RunMetrics, spans: &[Span]) -> Vec<(usize, String, usize, u64, u64)> {
    let mut t: Vec<_> = spans
        .iter()
        .map(|s| (s.pcpu, m.vms[s.dom].name.clone(), s.index, s.start / NS_PER_US, s.end / NS_PER_US))
        .collect();
    t.sort_by_key(|r| (r.0, r.3));
    t
}

fn row(p: usize, vm: &str, i: usize, start_us: u64, end_us: u64) -> (usize, String, usize, u64, u64) {
    (p, vm.to_string(), i, start_us, end_us)
}

#[test]
fn a_con_vm_starts_together_after_one_pcpu_picks_one_of_its_vcpus() {
    // 4 pCPUs; `con` (CON, 4 vCPUs, weight 256) and `hit` (HIT, 3 vCPUs, weight 512).
    // PE per interval: con 1200 × 256/768 / 4 = 100 per vCPU, hit 1200 × 512/768 / 3 = 266.
    // Initial mapping: con0..con3 on p0..p3 (distinct pCPUs), hit0..hit2 on the least-loaded
    // pCPUs p0..p2. Queues: p0..p2 [hit 266, con 100], p3 [con3 100].
    // t = 0: p0..p2 run their HIT heads (rule 3). p3's head con3 has PE > 0 and is CON
    //   (rule 2): it runs, and p3 IPIs p0..p2, which take con0..con2 from their queues
    //   when the IPI lands (100 µs).
    // t = 10, 20 ms: con has used its PE (100 - 100 = 0): the hit vCPUs run on p0..p2;
    //   p3 finds no positive PE anywhere and keeps con3 (alone: no launch at PE <= 0).
    // t = 30 ms: allocation resets PE; p3 launches again.
    let vms = [vm_toml("con", 4, "type = \"CON\"\nweight = 256", HOG), vm_toml("hit", 3, "weight = 512", HOG)];
    let toml = format!("{}{}\n[run]\nhorizon_s = 0.04\n", host(4, 100, ""), vms.join("\n"));
    let (m, spans) = traced(&toml, 1);
    let mut expected = Vec::new();
    for p in 0..3 {
        expected.extend([
            row(p, "hit", p, 0, 100),
            row(p, "con", p, 100, 10_000),
            row(p, "hit", p, 10_000, 30_100),
            row(p, "con", p, 30_100, 40_000),
        ]);
    }
    expected.push(row(3, "con", 3, 0, 40_000));
    assert_eq!(table(&m, &spans), expected);
    assert_eq!(vm(&m, "con").co_launches, 2, "one launch per allocation interval");
    assert_eq!(vm(&m, "hit").co_launches, 0);
    assert_eq!(m.host.co_ipis, 6, "p3 signals p0, p1 and p2 at each launch");
}

#[test]
fn syn_domain_id_lets_one_con_vm_co_schedule_at_a_time() {
    // 4 pCPUs, IPIs take 1 ms. CON VMs `a` and `b` (2 vCPUs, weight 256: PE 133 each), HIT
    // `x` and `z` (1 vCPU, weight 256: PE 266), HIT `y` (2 vCPUs, weight 128: PE 66).
    // Initial mapping, in VM order: a0 p0, a1 p1, b0 p2, b1 p3, x p0, y0 p1, y1 p2, z p3.
    // Queues: p0 [x, a0], p1 [a1, y0], p2 [b0, y1], p3 [z, b1].
    // t = 0, pCPUs in index order:
    //   p0 runs x (rule 3);
    //   p1's head a1 is CON: it takes syn_domain_id = a, syn_map = {p0}, IPIs p0;
    //   p2's head b0 is CON too, but the lock is held and p2 is not in syn_map: §4.3 takes
    //     the head as it is (b0 runs alone, no launch);
    //   p3 likewise takes its head z.
    // t = 1 ms: the IPI lands; p0 runs a0; syn_domain_id clears, and p2, p3, which decided
    //   while it was held, are told to decide again (IPIs).
    // t = 2 ms: p2 launches b (syn_map = {p3}); p3 takes part and runs b1.
    let vms = [
        vm_toml("a", 2, "type = \"CON\"\nweight = 256", HOG),
        vm_toml("b", 2, "type = \"CON\"\nweight = 256", HOG),
        vm_toml("x", 1, "weight = 256", HOG),
        vm_toml("y", 2, "weight = 128", HOG),
        vm_toml("z", 1, "weight = 256", HOG),
    ];
    let toml = format!("{}{}\n[run]\nhorizon_s = 0.0099\n", host(4, 1000, ""), vms.join("\n"));
    let (m, spans) = traced(&toml, 1);
    assert_eq!(
        table(&m, &spans),
        vec![
            row(0, "x", 0, 0, 1_000),
            row(0, "a", 0, 1_000, 9_900),
            row(1, "a", 1, 0, 9_900),
            row(2, "b", 0, 0, 9_900),
            row(3, "z", 0, 0, 2_000),
            row(3, "b", 1, 2_000, 9_900),
        ]
    );
    assert_eq!((vm(&m, "a").co_launches, vm(&m, "b").co_launches), (1, 1), "launched one after the other");
    assert_eq!(counter(&m, "hybrid.lock_busy"), 1, "b0 had to run alone while a held the lock");
    assert_eq!(counter(&m, "hybrid.lock_retries"), 2);

    // Over a long run both CON VMs keep co-scheduling, never sharing the lock, and no two
    // vCPUs of a CON VM ever share a run queue (the policy's `check`, after every event).
    let toml = format!("{}{}\n[run]\nhorizon_s = 3\n", host(4, 1000, ""), vms.join("\n"));
    let m = run(&toml, 1);
    let (a, b) = (vm(&m, "a").co_launches, vm(&m, "b").co_launches);
    assert!(a > 50 && b > 50, "launches: a {a}, b {b}");
    assert_eq!(m.host.co_launches, a + b);
}

#[test]
fn a_hit_vm_runs_vcpu_by_vcpu_and_the_same_vm_as_con_together() {
    // 2 pCPUs, IPIs take 100 µs. `h` (2 vCPUs, weight 256: PE 100 each) and `x` (1 vCPU,
    // weight 512: PE 400). Mapping: h0 p0, h1 p1, x p0. Queues: p0 [x, h0], p1 [h1].
    let slot0 = |ty: &str| {
        let vms =
            [vm_toml("h", 2, &format!("type = \"{ty}\"\nweight = 256"), HOG), vm_toml("x", 1, "weight = 512", HOG)];
        let toml = format!("{}{}\n[run]\nhorizon_s = 0.0099\n", host(2, 100, ""), vms.join("\n"));
        let (m, spans) = traced(&toml, 1);
        (table(&m, &spans), m)
    };
    // HIT: each pCPU runs its own head (rule 3): h1 runs while h0 waits behind x.
    let (hit, m) = slot0("HIT");
    assert_eq!(hit, vec![row(0, "x", 0, 0, 9_900), row(1, "h", 1, 0, 9_900)]);
    assert_eq!(m.host.co_launches, 0);
    assert_eq!(m.host.ipis, 0);
    // CON: p1's head h1 launches (rule 2): p0 is signalled and runs h0 from its queue.
    let (con, m) = slot0("CON");
    assert_eq!(con, vec![row(0, "x", 0, 0, 100), row(0, "h", 0, 100, 9_900), row(1, "h", 1, 0, 9_900)]);
    assert_eq!(m.host.co_launches, 1);
    assert_eq!(m.host.co_ipis, 1);
}

#[test]
fn turning_con_rescatters_vcpus_that_shared_a_run_queue() {
    // 2 pCPUs, no overheads. `idle` (1 vCPU that halts at once, weight 1: PE 1), `h` (HIT,
    // 2 vCPUs, weight 200: PE 133 each), `x` (1 vCPU, weight 250: PE 332); turns h CON at
    // 25 ms. Mapping: idle p0, h0 p1, h1 p0, x p1. Queues: p0 [h1, idle], p1 [x, h0].
    // t = 0, 10 ms: p0 runs h1, p1 runs x.
    // t = 20 ms: h1 is at -67; p0 runs idle (PE 1), which halts at once; p0 decides again:
    //   its head h1 has no PE, so rule 1 takes the best head elsewhere, h0 (133) from p1,
    //   and runs it. h0 and h1 now share p0's run queue (HIT vCPUs may).
    // t = 25 ms: h becomes CON; §4.4: waiting h1 moves to p1, the pCPU without a sibling.
    // t = 30 ms: PE reset; p0's head h0 launches; p1 takes part and runs h1.
    // The idle VM's guest kernel is silent: its timer wake-ups would add decisions.
    let idle = "kind = \"idle\"";
    let vms = [
        vm_toml("idle", 1, "weight = 1\nguest_tick = \"off\"", idle),
        vm_toml("h", 2, "weight = 200", HOG),
        vm_toml("x", 1, "weight = 250", HOG),
    ];
    let event = "[[event]]\nat_s = 0.025\nvm = \"h\"\ntype = \"CON\"";
    let toml = format!("{}{}\n[run]\nhorizon_s = 0.0399\n{event}\n", host(2, 0, ""), vms.join("\n"));
    let (m, spans) = traced(&toml, 1);
    assert_eq!(
        table(&m, &spans),
        vec![
            row(0, "h", 1, 0, 20_000),
            row(0, "h", 0, 20_000, 39_900),
            row(1, "x", 0, 0, 30_000),
            row(1, "h", 1, 30_000, 39_900),
        ]
    );
    assert_eq!(counter(&m, "hybrid.steals"), 1);
    assert_eq!(counter(&m, "hybrid.scatter_moves"), 1);
    assert_eq!(vm(&m, "h").co_launches, 1);

    // From then on the siblings never share a run queue (the policy's `check` asserts it
    // after every event): rule 1 may not bring one onto the other's pCPU, so on 2 pCPUs
    // each stays on its own, while launches keep starting them together.
    let toml = format!("{}{}\n[run]\nhorizon_s = 0.5\n{event}\n", host(2, 0, ""), vms.join("\n"));
    let (m, spans) = traced(&toml, 1);
    let h = m.vms.iter().position(|v| v.name == "h").unwrap();
    let pcpus_of = |index: usize| {
        let mut ps: Vec<usize> =
            spans.iter().filter(|s| s.dom == h && s.index == index && s.end > 25 * NS_PER_MS).map(|s| s.pcpu).collect();
        ps.dedup();
        ps
    };
    assert_eq!((pcpus_of(0), pcpus_of(1)), (vec![0], vec![1]));
    assert!(vm(&m, "h").co_launches > 10, "{} launches", vm(&m, "h").co_launches);
}

/// Share of the host's CPU of VMs `a` (weight `wa`) and `b` (weight `wb`), all CPU-bound,
/// over 20 s (2000 slots).
fn shares(pcpus: u32, (na, wa): (u32, u32), (nb, wb): (u32, u32), extra: &str) -> (f64, f64) {
    let vms = [vm_toml("a", na, &format!("weight = {wa}"), HOG), vm_toml("b", nb, &format!("weight = {wb}"), HOG)];
    let toml = format!("{}{}\n[run]\nhorizon_s = 20\n", host(pcpus, 2, extra), vms.join("\n"));
    let m = run(&toml, 1);
    (vm(&m, "a").cpu_share, vm(&m, "b").cpu_share)
}

// Tolerance of the fairness tests: 0.005 of the host. CPU-bound vCPUs never block, so the
// end-of-slot sampling charges exactly what they ran; with per-vCPU shares that are whole
// slots the PE reset makes every 30 ms interval exact, and the only error left is the
// IPI-free start and the last partial interval, a few slots of the 2000 × |P| played.

#[test]
fn cpu_share_follows_weight_one_to_two() {
    // 2 pCPUs, 2 + 2 vCPUs: PE 100 and 200 per vCPU per interval, i.e. 1 and 2 slots.
    let (a, b) = shares(2, (2, 256), (2, 512), "");
    assert!((a - 1.0 / 3.0).abs() < 0.005 && (b - 2.0 / 3.0).abs() < 0.005, "a {a}, b {b}");
    // 4 pCPUs, 3 + 3 vCPUs: PE 133 and 266, where the PE order settles on the exact share.
    let (a, b) = shares(4, (3, 256), (3, 512), "");
    assert!((a - 1.0 / 3.0).abs() < 0.005 && (b - 2.0 / 3.0).abs() < 0.005, "a {a}, b {b}");
}

#[test]
fn the_pe_reset_rounds_small_shares_up_and_carry_debt_repairs_it() {
    // 2 pCPUs, 3 + 3 vCPUs, weights 1:2: PE 66 and 133 per vCPU per interval of 6 slots
    // of CPU. Under the paper's reset, any positive PE buys a whole slot, and a's 66 beats
    // b's leftover 33 after b's first slot: a's vCPUs each get 1 slot of 3 (a ceiling of 3
    // slots of 6 for a), twice its 2-slot share. The rounding is bounded by one slot per
    // vCPU and interval.
    let (a, _) = shares(2, (3, 100), (3, 200), "");
    assert!(a > 0.45 && a <= 0.5 + 0.005, "reset: a gets {a}, up to its rounded-up 3 of 6 slots");
    // Keeping the debt, the overrun is paid back in the next interval: exact in the long run.
    let (a, b) = shares(2, (3, 100), (3, 200), "carry_debt = true");
    assert!((a - 1.0 / 3.0).abs() < 0.005 && (b - 2.0 / 3.0).abs() < 0.005, "carry_debt: a {a}, b {b}");
    // The §2.2 proportions, 3/10 and 7/10 of 4 pCPUs (PE 90 and 210 per vCPU): reset gives
    // the small VM its rounded-up 1 slot in 3; carry_debt the exact 30%.
    let (a, _) = shares(4, (4, 300), (4, 700), "");
    assert!((a - 1.0 / 3.0).abs() < 0.005, "reset: a {a}");
    let (a, _) = shares(4, (4, 300), (4, 700), "carry_debt = true");
    assert!((a - 0.3).abs() < 0.005, "carry_debt: a {a}");
}

#[test]
fn a_co_scheduling_signal_passes_a_vcpu_over_once_per_slot_it_runs() {
    // 2 pCPUs, IPIs take 100 µs. `x` (HIT, 1 vCPU, weight 3: PE 600 × 3/7 = 257) and `c`
    // (CON, 2 vCPUs, weight 4: PE 171 each). Mapping, in VM order: x p0, c0 p1 (least
    // loaded), c1 p0 (no sibling there). Queues: p0 [x 257, c1 171], p1 [c0 171].
    // t = 0: p0 runs its head x (rule 3); p1's head c0 launches (rule 2) and signals p0,
    //   which passes x over for c1 when the IPI lands (100 µs): x, queued again, is its head.
    // t = 10 ms: c0 and c1 pay 100 (71 left); x, never found running, still has 257 and is
    //   p0's head again: it runs. p1's c0 launches again and signals p0; x was passed over
    //   since it last ran to a boundary, so p0 keeps it and c1 waits (`co_deferred`).
    // t = 20 ms: x pays 100; c0 (-29) finds no positive head it may steal (c1 has a sibling
    //   on p1) and keeps running alone.
    let vms = [vm_toml("x", 1, "weight = 3", HOG), vm_toml("c", 2, "type = \"CON\"\nweight = 4", HOG)];
    let toml = format!("{}{}\n[run]\nhorizon_s = 0.0299\n", host(2, 100, ""), vms.join("\n"));
    let (m, spans) = traced(&toml, 1);
    assert_eq!(
        table(&m, &spans),
        vec![
            row(0, "x", 0, 0, 100),
            row(0, "c", 1, 100, 10_000),
            row(0, "x", 0, 10_000, 29_900),
            row(1, "c", 0, 0, 29_900),
        ]
    );
    assert_eq!(vm(&m, "c").co_launches, 2);
    assert_eq!(counter(&m, "hybrid.co_deferred"), 1);
}

#[test]
fn a_vcpu_waking_with_pe_is_boosted_and_preempts_unless_wake_boost_is_off() {
    // 1 pCPU, no overheads: a 1-vCPU web server (requests of 200 µs every 2 ms on average)
    // beside a hog, equal weights (PE 150 each per interval). Every wake-up finds the hog
    // running. With the default wake_boost, a waking vCPU with PE > 0 preempts at once.
    let web = "kind = \"web\"\nservice_us = 200\njitter = 0\nio_us = 2000";
    let run_with = |extra: &str| {
        let vms = [vm_toml("web", 1, "", web), vm_toml("hog", 1, "", HOG)];
        let m = run(&format!("{}{}\n[run]\nhorizon_s = 5\n", host(1, 0, extra), vms.join("\n")), 1);
        let latency_us = vm(&m, "web").wake_latency_us_mean.expect("the web vCPU woke");
        (m, latency_us)
    };
    let (m, boosted_us) = run_with("");
    let boosts = counter(&m, "hybrid.boosts");
    assert!(boosts > 1000, "only {boosts} boosts in ~2270 wake-ups");
    assert_eq!(counter(&m, "hybrid.boost_preemptions"), boosts, "each boost found the unboosted hog running");
    // Exactly 0 while boosted; a wake-up after the web vCPU was found running at two slot
    // boundaries of one interval (PE 150 - 200 < 0) is not boosted and waits, which is rare
    // at a 10% duty cycle, hence a bound rather than 0.
    assert!(boosted_us < 50.0, "boosted wake latency {boosted_us} µs");
    // The plain reading: wake-ups wait for the next slot boundary (5 ms on average, more
    // when the hog's PE is ahead).
    let (m, plain_us) = run_with("wake_boost = false");
    assert_eq!(counter(&m, "hybrid.boosts"), 0);
    assert!(plain_us > 3_000.0, "unboosted wake latency {plain_us} µs");
}

#[test]
fn a_con_vm_wider_than_the_host_is_refused() {
    let vms = [vm_toml("wide", 3, "type = \"CON\"", HOG)];
    let toml = format!("{}{}\n[run]\nhorizon_s = 1\n", host(2, 2, ""), vms.join("\n"));
    let e = Scenario::parse(&toml).err().expect("refused").to_string();
    assert!(e.contains("scheduler.name") && e.contains("3 vCPUs") && e.contains("2 pCPUs"), "{e}");
}
