//! `cvs-comm`: seed 002's communication-driven VM scheduling on Credit (see the header of
//! `crates/vsched-policies/src/cvs_comm.rs` for the rules and readings).
//!
//! By default (`cvs_precedence = "queue"`) Credit's order decides between parallel (CON) and
//! other vCPUs, and CVS chooses which parallel VM takes a parallel VM's turn; `"class"` and
//! `"all"` take §3.2's "without any hesitation" literally within, or over, Credit's classes,
//! and starve a non-BOOST vCPU beside busy parallel VMs (see
//! `a_non_boost_hit_vcpu_is_served_beside_wide_con_vms` and
//! `the_driver_domain_keeps_the_clusters_going`).
//!
//! In most scenarios here no packets flow (every VM's `rx_packets` stays 0), so every CVS pick
//! is settled by the other rules: the only parallel VM of its class, then remaining credit,
//! then run-queue order. `packets_decide_before_queue_order` sends packets from another host
//! and checks that they decide. The rules themselves are also unit-tested on the pure
//! selection `cvs_pick` in the policy file (`Queued::parallel(vcpu, dom, packets_since,
//! credit)` builds a queue by hand, see `queues_built_by_hand_for_packet_tests`); in runs the
//! counters `cvs_comm.picks_by_packets` / `picks_by_credit` / `picks_by_order` /
//! `picks_single` say which rule settled each pick.
//!
//! Hand-checked traces run on hosts without overheads ([`FREE_HOST`]): decisions land on exact
//! instants and co-scheduling IPIs arrive at once. Credit: 30 ms slices, a tick every 10 ms
//! (charging the running vCPU 100 credits and entering it in the accounting), accounting every
//! 30 ms (300 credits per pCPU shared among active domains by weight, all 256 here; debt
//! makes a vCPU OVER, credit >= 0 UNDER). At one instant the accounting comes first, then the
//! ticks, then slice ends (in pCPU order), then IPIs.

mod common;
use common::*;
use vsched_model::{RunMetrics, Span, Time, NS_PER_MS};
use vsched_policies::cvs_comm::{cvs_pick, Class, Pick, Precedence, Queued, Rule};

const MS: Time = NS_PER_MS;

/// `(domain, start, end)` of what ran on `pcpu`, in order.
fn runs_on(spans: &[Span], pcpu: usize) -> Vec<(usize, Time, Time)> {
    spans.iter().filter(|s| s.pcpu == pcpu).map(|s| (s.dom, s.start, s.end)).collect()
}

#[test]
fn one_pcpu_parallel_vms_go_by_credit_then_queue_order() {
    // Three 1-vCPU CON hogs a, b, c (vCPUs 0, 1, 2) on one pCPU, all UNDER with 0 credit.
    //   0   [a b c]: equal packets (0) and credit (0): queue order, a.
    //   30  a, the only active domain, gets all 300: -200 + 300, charged to 0 by the tick.
    //       [b c a] all at 0: queue order, b.
    //   60  a, b active, 150 each: a 150 UNDER, b -50 OVER (-150 after the tick).
    //       [c a b]: c (0) and a (150) are UNDER: more credit, a. Credit would run c, its
    //       head; c is passed over, so it joins the accounting.
    //   90  100 each: a 50 (-50 after the tick), b -50 OVER, c 100. [c a b]: c by credit.
    //   120 a 50, b 50, c 0 (-100 after the tick), all UNDER. [a b c]: a and b tie on
    //       credit too: queue order, a.
    //   150 a -50 OVER, b 150, c 0. [b c a]: b by credit.
    //   180 a -50 OVER, b 50 (-50 after the tick), c 100. [c b a]: c by credit.
    //   210 a 50, b 50, c 0 (-100 after the tick). [b a c]: b and a tie: queue order, b.
    let vms = [con("a", 1, ""), con("b", 1, ""), con("c", 1, "")];
    let (m, spans) = traced(&free_scenario(1, "name = \"cvs-comm\"", &vms, "horizon_s = 0.235"), 1);
    let (a, b, c) = (0, 1, 2);
    assert_eq!(
        runs_on(&spans, 0),
        [
            (a, 0, 30 * MS),
            (b, 30 * MS, 60 * MS),
            (a, 60 * MS, 90 * MS),
            (c, 90 * MS, 120 * MS),
            (a, 120 * MS, 150 * MS),
            (b, 150 * MS, 180 * MS),
            (c, 180 * MS, 210 * MS),
            (b, 210 * MS, 235 * MS),
        ]
    );
    assert_eq!(counter(&m, "cvs_comm.picks_by_order"), 4);
    assert_eq!(counter(&m, "cvs_comm.picks_by_credit"), 4);
    assert_eq!(counter(&m, "cvs_comm.picks_by_packets"), 0);
    assert_eq!(counter(&m, "cvs_comm.activations"), 1, "c, passed over at 60 ms");
    // Single-vCPU VMs have no sibling to co-schedule.
    assert_eq!(m.host.co_launches, 0);

    // Credit runs its head at 60 ms: c.
    let (_, spans) = traced(&free_scenario(1, "name = \"credit\"", &vms, "horizon_s = 0.235"), 1);
    assert_eq!(runs_on(&spans, 0)[2], (c, 60 * MS, 90 * MS));
}

/// Two 2-vCPU CON hogs a, b and a 1-vCPU HIT hog h on 2 pCPUs, for `horizon_s`.
fn two_con_one_hit(scheduler: &str, horizon_s: &str) -> String {
    let vms = [con("a", 2, ""), con("b", 2, ""), vm_toml("h", 1, "", HOG)];
    free_scenario(2, scheduler, &vms, &format!("horizon_s = {horizon_s}"))
}

#[test]
fn two_con_vms_are_coscheduled_and_the_hit_hog_gets_its_turn() {
    // The CON spread places a.v0 b.v0 on pCPU 0 and a.v1 b.v1 on pCPU 1; h goes to pCPU 0
    // (round robin by vCPU id 4). Queues: pCPU 0 [a0 b0 h], pCPU 1 [a1 b1].
    //   0   pCPU 0: a0 heads the queue, a parallel VM's turn: a and b (both ahead of h) tie
    //       (0 packets, 0 credit): queue order, a0; it signals pCPU 1, which runs a1.
    //   30  a, the only active domain, got all 600 credits (300 per vCPU): 0 after the tick.
    //       pCPU 0 [b0 h a0]: only b is ahead of h: b0; pCPU 1 is signalled and runs b1.
    //   60  a, b active: 300 each (150 per vCPU): a0 150 UNDER, b0 -150 OVER. pCPU 0
    //       [h a0 b0]: h heads the UNDER class and is not parallel: Credit's turn, h runs.
    //       pCPU 1 [a1 b1]: a1, the only UNDER parallel VM, signalling pCPU 0 for a0. h has
    //       just started its slice and a0 is not of a better class: h runs on, the signal
    //       waits (deferred).
    //   90  a, b, h active (5 vCPUs x 256): 120 credits per vCPU: a0 270, b0 -30 OVER, h -80
    //       OVER (-180 after the tick), a1 -30 (UNDER until the next accounting), b1 -30
    //       OVER. pCPU 0: h's slice is over, it goes back behind a0 and b0 and the signal is
    //       answered: a0. pCPU 1 [a1 b1]: a1 runs on (the only UNDER one; a0 runs, no signal).
    //   120 a0 90, b0 90, h -60 OVER, a1 -210 OVER, b1 90. pCPU 0 [b0 a0 h]: b and a tie on
    //       credit (90): queue order, b0, signalling pCPU 1, which runs b1.
    //   150 a0 210, b0 -90 (after the tick), h 60, a1 -90 OVER, b1 -90 UNDER. pCPU 0
    //       [a0 h b0]: only a is ahead of h: a0, signalling pCPU 1 for a1 (as UNDER): b1 is
    //       parallel, a1 runs.
    //   180 a0 30 (after the tick), h 180, b0 30, a1 -270 OVER, b1 30. pCPU 0 [h b0 a0]: h's
    //       turn. pCPU 1 [b1 a1]: b1, the only UNDER parallel VM, signalling pCPU 0: h holds
    //       its turn again, the signal waits.
    //   210 h 0 (after the tick), b0 150, a0 150, a1 -150 OVER, b1 -150 OVER. pCPU 0: h's slice
    //       is over; [b0 a0 h]: the signal is answered, b0. pCPU 1 [b1 a1], both OVER: the
    //       CVS pick (b1, queue order) is OVER, so Credit first steals UNDER work: h.
    let (m, spans) = traced(&two_con_one_hit("name = \"cvs-comm\"", "0.235"), 1);
    let (a, b, h) = (0, 1, 2);
    let p0 = [
        (a, 0, 30 * MS),
        (b, 30 * MS, 60 * MS),
        (h, 60 * MS, 90 * MS),
        (a, 90 * MS, 120 * MS),
        (b, 120 * MS, 150 * MS),
        (a, 150 * MS, 180 * MS),
        (h, 180 * MS, 210 * MS),
        (b, 210 * MS, 235 * MS),
    ];
    let p1 = [
        (a, 0, 30 * MS),
        (b, 30 * MS, 60 * MS),
        (a, 60 * MS, 120 * MS),
        (b, 120 * MS, 150 * MS),
        (a, 150 * MS, 180 * MS),
        (b, 180 * MS, 210 * MS),
        (h, 210 * MS, 235 * MS),
    ];
    assert_eq!(runs_on(&spans, 0), p0);
    assert_eq!(runs_on(&spans, 1), p1);
    assert_eq!(counter(&m, "cvs_comm.picks_by_order"), 2, "0 and 120 ms");
    assert_eq!(counter(&m, "cvs_comm.picks_single"), 5, "30, 60, 90, 150, 180 ms");
    assert_eq!(counter(&m, "cvs_comm.signals_answered"), 6, "0, 30, 90, 120, 150, 210 ms");
    assert_eq!(counter(&m, "cvs_comm.signals_deferred"), 2, "h holding its turn at 60 and 180 ms");
    assert_eq!(counter(&m, "cvs_comm.steals_first"), 1, "h at 210 ms");
    // Credit's order runs h before it is passed over: nothing to enter in the accounting.
    assert_eq!(counter(&m, "cvs_comm.activations"), 0);
    assert_eq!((vm(&m, "a").co_launches, vm(&m, "b").co_launches), (3, 3));
    // Six signals; the one at 0 ms joins pCPU 1's first scheduling, which was due anyway.
    assert_eq!(m.host.co_ipis, 5);
}

#[test]
fn with_class_precedence_the_con_vms_pass_the_hit_hog_over() {
    // The same host with CON VMs before the non-parallel vCPUs of their class (§3.2 literally,
    // within Credit's classes). Up to 60 ms as by default.
    //   60  a0 150 UNDER, b0 -150 OVER. [h a0 b0]: a is the only parallel VM among the UNDER
    //       ones: a0, with a1 signalled. h, passed over, joins the accounting.
    //   90  a, b, h active (5 vCPUs x 256): 120 credits per vCPU: a -30 UNDER, b -30 OVER,
    //       h 120. Both pCPUs keep a (the only UNDER parallel VM); a1 runs already, no signal.
    //   120 a OVER, b UNDER: b on both.  150: b again (h left the accounting with more than a
    //       slice of credit, then was passed over again: back in).
    //   180 a UNDER, b OVER: a on both.
    //   210 a0, b0 OVER -150, h UNDER: pCPU 0 has no UNDER parallel VM: Credit's head, h.
    //       pCPU 1 [b1 a1], both OVER -150: queue order, b1, signalling pCPU 0 for b0 (with
    //       class OVER). pCPU 0 must not pass over the UNDER h for it: the signal is deferred
    //       and h runs on; b1 runs alone.
    let (m, spans) = traced(&two_con_one_hit("name = \"cvs-comm\"\ncvs_precedence = \"class\"", "0.235"), 1);
    let (a, b, h) = (0, 1, 2);
    let common = [(a, 0, 30 * MS), (b, 30 * MS, 60 * MS), (a, 60 * MS, 120 * MS), (b, 120 * MS, 180 * MS)];
    let mut p0 = common.to_vec();
    p0.extend([(a, 180 * MS, 210 * MS), (h, 210 * MS, 235 * MS)]);
    let mut p1 = common.to_vec();
    p1.extend([(a, 180 * MS, 210 * MS), (b, 210 * MS, 235 * MS)]);
    assert_eq!(runs_on(&spans, 0), p0);
    assert_eq!(runs_on(&spans, 1), p1);
    assert_eq!(counter(&m, "cvs_comm.picks_by_order"), 3, "0, 30 and 210 ms");
    assert_eq!(counter(&m, "cvs_comm.picks_single"), 7, "60, 90 (x2), 120, 150 (x2), 180 ms");
    assert_eq!(counter(&m, "cvs_comm.signals_answered"), 5);
    assert_eq!(counter(&m, "cvs_comm.signals_deferred"), 1);
    assert_eq!(counter(&m, "cvs_comm.activations"), 2, "h at 60 and 150 ms");
    assert_eq!((vm(&m, "a").co_launches, vm(&m, "b").co_launches), (3, 3));
    assert_eq!(m.host.co_ipis, 5);
}

#[test]
fn the_hit_hog_keeps_its_share_unless_parallel_vms_take_its_turns() {
    // Over 3 s the five vCPUs of equal weight share 2 pCPUs: h's fair share is 1/5 of the host.
    let share = |scheduler: &str| vm(&run(&two_con_one_hit(scheduler, "3"), 1), "h").cpu_share;
    let credit = share("name = \"credit\"");
    assert!((credit - 0.2).abs() < 0.02, "credit gives h {credit}");
    // By default h takes its turns in Credit's order; with CON VMs first within a class, it
    // still gets its share once passed-over vCPUs join the accounting, as the CON VMs go OVER.
    for scheduler in [
        "name = \"cvs-comm\"",
        "name = \"cvs-comm\"\nactivate_bypassed = false",
        "name = \"cvs-comm\"\ncvs_precedence = \"class\"",
    ] {
        let cvs = share(scheduler);
        assert!((cvs - 0.2).abs() < 0.03, "{scheduler}: h gets {cvs}");
    }
    // Without entering passed-over vCPUs in the accounting, h never earns credit and stays
    // behind whichever CON VM is UNDER; with CON VMs above Credit's classes, it never runs.
    let inactive = share("name = \"cvs-comm\"\ncvs_precedence = \"class\"\nactivate_bypassed = false");
    let literal = share("name = \"cvs-comm\"\ncvs_precedence = \"all\"");
    assert!(inactive < 0.01, "class, activate_bypassed = false gives h {inactive}");
    assert!(literal < 0.01, "cvs_precedence = \"all\" gives h {literal}");
}

/// One HIT vCPU `w` that computes 1 ms before each 5 ms of I/O beside four CPU-bound 4-vCPU CON
/// VMs on 4 pCPUs (no overheads), with Credit's BOOST off so that every wake-up is UNDER, as
/// a dom0 vCPU that a tick found in the middle of a pass. Returns the metrics and the spans of
/// `w` (domain 4), in time order.
fn waker_beside_con_vms(precedence: &str) -> (RunMetrics, Vec<Span>) {
    use vsched_model::{Dur, Instr, ProgramBuilder, Simulation, Until, Value, VmType};
    let mut b = ProgramBuilder::new();
    b.repeat(None)
        .push(Instr::RequestBegin)
        .push(Instr::Compute(Dur::Fixed(MS)))
        .push(Instr::RequestEnd)
        .push(Instr::Io(Dur::Fixed(5 * MS)))
        .end_repeat();
    let mut domains: Vec<_> = ["c0", "c1", "c2", "c3"].iter().map(|n| domain(n, VmType::Con, vec![hog(); 4])).collect();
    domains.push(domain("w", VmType::Hit, vec![b.build()]));
    let params = [("boost", Value::Bool(false)), ("cvs_precedence", Value::Str(precedence.into()))];
    let mut sim = Simulation::new(free_host(4), domains, policy("cvs-comm", &params), 1);
    sim.enable_trace(1_000_000);
    let m = sim.run(3_000 * MS, Until::Horizon, &mut |_| true).expect("run failed");
    let mut spans: Vec<Span> = sim.take_trace().unwrap().spans().iter().filter(|s| s.dom == 4).cloned().collect();
    spans.sort_by_key(|s| s.start);
    (m, spans)
}

#[test]
fn a_non_boost_hit_vcpu_is_served_beside_wide_con_vms() {
    // Each pCPU queues one vCPU of each CON VM (the spread rule). w, woken UNDER, waits in
    // Credit's order behind at most the 4 CON vCPUs of its pCPU (the running one's slice
    // included), 30 ms each, and a signal may put one more sibling run before it: it runs again
    // within 5 ms of I/O + 5 x 30 ms of a run's end, to the end of the 3 s.
    let (m, spans) = waker_beside_con_vms("queue");
    let bound = 155 * MS;
    assert!(spans.first().is_some_and(|s| s.start <= bound), "w first runs at {:?}", spans.first());
    let longest = spans.windows(2).map(|w| w[1].start - w[0].end).max().unwrap();
    assert!(longest <= bound, "w waited {} ms", longest / MS);
    assert!(spans.last().is_some_and(|s| s.end >= 3_000 * MS - bound));
    assert!(vm(&m, "w").requests >= 3_000 / 155, "w served {} requests", vm(&m, "w").requests);
    // With CON VMs first within a class (§3.2 literally), some CON VM is always UNDER in w's
    // queue: w never runs.
    for precedence in ["class", "all"] {
        let (m, spans) = waker_beside_con_vms(precedence);
        assert!(spans.is_empty() && vm(&m, "w").requests == 0, "{precedence}: w ran {} times", spans.len());
    }
}

#[test]
fn the_driver_domain_keeps_the_clusters_going() {
    // Seed 002 Fig. 3, is on 2 hosts (4 CON VMs of 4 busy-polling ranks and a 4-vCPU dom0 per
    // host), seed 1 (the hang needs an unlucky timing: 2 of seeds 1-10 here). Under current
    // Xen's tickle (idlers first, the busy pCPU left alone while one idles) and with CON VMs
    // first within a class, a dom0 vCPU that a tick found in the middle of a pass (no longer
    // BOOST) is never scheduled again: the messages queued behind it never leave, and every
    // rank polls until the horizon. Under Xen 3.2's tickle, the paper's, a waking BOOSTed dom0
    // vCPU preempts the rank on its pCPU, and the literal reading finishes too (issue 16
    // item 4). The default precedence finishes under both.
    //
    // Under current Xen that hang comes and goes with the host: it went away with issue 17's
    // exits and came back with cache refills and the two sockets of the paper's hosts (current
    // Xen's `_csched_cpu_pick` also moves running ranks onto idlers), with clocks in lockstep
    // or independent. Under Xen 3.2, the paper's, the literal reading finishes either way; the
    // default precedence finishes under both releases.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/papers/seed002/fig3-is-hosts-2.toml"
    ))
    .unwrap()
    .replace("horizon_s = 600", "horizon_s = 30");
    assert!(text.contains("xen_version = \"3.2\""));
    let done = |m: &RunMetrics| m.virtual_clusters.iter().filter(|c| c.completion_s.is_some()).count();
    for clocks in ["lockstep", "independent"] {
        let text = text.replacen("[host]\n", &format!("[host]\nclocks = \"{clocks}\"\n"), 1);
        let with = |precedence: &str, version: &str| {
            let scheduler = format!("name = \"cvs-comm\"\ncvs_precedence = \"{precedence}\"");
            let text = text.replace("xen_version = \"3.2\"", &format!("xen_version = \"{version}\""));
            run(&text.replace("name = \"credit\"", &scheduler), 1)
        };
        for version in ["3.2", "current"] {
            let m = with("queue", version);
            assert_eq!(done(&m), 4, "{clocks}, {version}: {:?}", m.virtual_clusters);
            assert!(m.virtual_clusters.iter().all(|c| c.completion_s.unwrap() < 10.0));
            if version == "3.2" {
                assert_eq!(done(&with("class", version)), 4, "{clocks}, {version}, class precedence");
            }
        }
    }
}

/// The share of the time some vCPU of domain `dom` (of `n` vCPUs) runs during which all do.
fn gang_share(spans: &[Span], dom: usize, n: usize) -> f64 {
    let mut edges: Vec<(Time, i32)> = Vec::new();
    for s in spans.iter().filter(|s| s.dom == dom) {
        edges.push((s.start, 1));
        edges.push((s.end, -1));
    }
    // Ends before starts at one instant: back-to-back spans are not overlap.
    edges.sort_by_key(|&(t, d)| (t, d));
    let (mut running, mut last, mut any, mut all) = (0, 0, 0, 0);
    for (t, d) in edges {
        if running > 0 {
            any += t - last;
        }
        if running == n as i32 {
            all += t - last;
        }
        running += d;
        last = t;
    }
    all as f64 / any.max(1) as f64
}

/// A driver domain with light I/O on every pCPU (so pCPUs drift out of step), two 4-vCPU CON
/// VMs in busy-polling supersteps of 1 ms, and a 4-vCPU HIT hog, on 4 pCPUs with the default
/// overheads: 3 vCPUs per pCPU besides dom0.
fn busy_host(scheduler: &str) -> String {
    let bsp = "kind = \"bsp\"\nsupersteps = 300\ncompute_ms = 1\njitter = 0.2\nwait = \"spin\"";
    let vms = [
        vm_toml("dom0", 4, "", "kind = \"web\"\nservice_us = 100\nio_us = 5000"),
        vm_toml("a", 4, "type = \"CON\"", bsp),
        vm_toml("b", 4, "type = \"CON\"", bsp),
        vm_toml("h", 4, "", HOG),
    ];
    scenario(4, &format!("name = \"{scheduler}\""), &vms, "horizon_s = 30\nuntil = \"all_done\"")
}

#[test]
fn spinning_con_vms_run_as_gangs_and_finish_far_sooner_than_under_credit() {
    let (cvs, cvs_spans) = traced(&busy_host("cvs-comm"), 1);
    let (credit, credit_spans) = traced(&busy_host("credit"), 1);
    let class_host =
        busy_host("cvs-comm").replace("name = \"cvs-comm\"", "name = \"cvs-comm\"\ncvs_precedence = \"class\"");
    let (_, class_spans) = traced(&class_host, 1);
    for (d, name) in [(1, "a"), (2, "b")] {
        // Under Credit a VM's four vCPUs almost never run all at once, so every superstep
        // waits for a straggler's next slice. Co-scheduling keeps them together part of the
        // time: not while the HIT hog (one vCPU per pCPU) has its turn on a sibling's pCPU,
        // which by default comes in Credit's order. With CON VMs first within their class the
        // hog runs when they are OVER, on all pCPUs at once, and the gangs hold far longer.
        let (with, without) = (gang_share(&cvs_spans, d, 4), gang_share(&credit_spans, d, 4));
        // The bounds were 0.07 and 0.005 with lockstep clocks and no exit or wake-up costs;
        // with them (issue 17) `a` holds its gang about a tenth of its run, more than ten
        // times Credit's accidental overlap (0.006).
        assert!(
            with > 0.05 && with > 10.0 * without,
            "{name}: all vCPUs together {with:.3} of its run vs {without:.3}"
        );
        let literal = gang_share(&class_spans, d, 4);
        assert!(literal > 0.3, "{name}: all vCPUs together {literal:.3} of its run with class precedence");
        let (done, baseline) = (vm(&cvs, name).completion_s.unwrap(), vm(&credit, name).completion_s.unwrap());
        // 0.3 with lockstep clocks; out of step (issue 17) `a` takes 0.33 of Credit's time.
        assert!(done < 0.4 * baseline, "{name}: done in {done} s vs {baseline} s under credit");
        assert!(vm(&cvs, name).co_launches > 0);
    }
    assert!(cvs.host.co_ipis > 0);
    // No packets: picks go by the only parallel VM of a class, by credit, or by queue order.
    assert_eq!(counter(&cvs, "cvs_comm.picks_by_packets"), 0);
    assert!(counter(&cvs, "cvs_comm.picks_by_credit") > 0 && counter(&cvs, "cvs_comm.picks_single") > 0);
    // The HIT hog gets about what Credit gives it, and dom0 (BOOSTed on every wake-up) is
    // served about as fast.
    let (h, h0) = (vm(&cvs, "h").cpu_share, vm(&credit, "h").cpu_share);
    assert!((h - h0).abs() < 0.05, "h: {h:.3} of the host vs {h0:.3} under credit");
    let (lat, lat0) = (vm(&cvs, "dom0").latency_ms_mean.unwrap(), vm(&credit, "dom0").latency_ms_mean.unwrap());
    assert!(lat < 2.0 * lat0, "dom0 requests take {lat} ms vs {lat0} ms under credit");
}

#[test]
fn queues_built_by_hand_for_packet_tests() {
    // How a packet-driven check reads: a run queue, head first, as the policy builds it from a
    // live run (parallel VMs with their packets since last descheduled and credit).
    let queue = [
        Queued::parallel(2, 0, 12, 40),              // VM 0: 12 packets, at the head
        Queued::parallel(5, 1, 30, -20),             // VM 1: 30 packets, less credit
        Queued::other(7, 3),                         // a HIT vCPU
        Queued::parallel(8, 5, 99, 0),               // VM 5: 99 packets, behind the HIT vCPU
        Queued::other(9, 4).with_class(Class::Over), // an OVER HIT vCPU
        Queued::parallel(6, 2, 30, 10).yielding(),   // VM 2 just yielded: no candidate
    ];
    // By default CVS chooses among the parallel VMs queued ahead of the HIT vCPU.
    assert_eq!(cvs_pick(&queue, Precedence::Queue), Pick::Run { vcpu: 5, by: Rule::Packets });
    // §3.2 within Credit's classes: among all of them.
    assert_eq!(cvs_pick(&queue, Precedence::Class), Pick::Run { vcpu: 8, by: Rule::Packets });
    // With the HIT vCPU at the head, its turn comes first by default.
    let hit_first = [queue[2], queue[0], queue[1], queue[3]];
    assert_eq!(cvs_pick(&hit_first, Precedence::Queue), Pick::Credit);
    // A BOOSTed wake-up (dom0 carrying the packets) runs first under every precedence.
    let mut boosted = queue;
    boosted[4] = boosted[4].with_class(Class::Boost);
    for precedence in [Precedence::Queue, Precedence::Class, Precedence::All] {
        assert_eq!(cvs_pick(&boosted, precedence), Pick::Credit);
    }
}

/// Host 0 (one pCPU) queues the 1-vCPU CON hogs b, c, a in that order; a is rank 0 of a
/// virtual cluster whose rank 1, alone on host 1, sends it `messages` messages of 3000 bytes
/// (2 packets each) at time 0. Returns what host 0's pCPU ran.
fn packets_run(messages: usize) -> (RunMetrics, Vec<(usize, Time, Time)>) {
    use vsched_model::{Instr, NetworkConfig, Simulation, Until, VmType};
    let con_hog = |name: &str| domain(name, VmType::Con, vec![hog()]);
    let mut a = con_hog("a");
    a.job = Some("vc".into());
    let sends: Vec<Instr> = (0..messages).map(|_| Instr::Send { to: 0, bytes: 3_000 }).collect();
    let mut sender = domain("a-peer", VmType::Con, vec![program(&sends)]);
    sender.host = 1;
    sender.job = Some("vc".into());
    let domains = vec![con_hog("b"), con_hog("c"), a, sender];
    let policies = vec![policy("cvs-comm", &[]), policy("cvs-comm", &[])];
    let mut sim = Simulation::cluster(free_host(1), NetworkConfig::default(), domains, policies, 1);
    sim.enable_trace(100_000);
    let m = sim.run(100 * MS, Until::Horizon, &mut |_| true).expect("run failed");
    let spans = sim.take_trace().unwrap().spans().to_vec();
    (m, runs_on(&spans, 0))
}

#[test]
fn packets_decide_before_queue_order() {
    //   0   [b c a], no packets yet, equal credit: queue order, b runs its 30 ms slice.
    //       a's peer on host 1 sends 3 messages (6 packets) at 0; they arrive within 20 µs.
    //   30  [c a b]: a received 6 packets since it was last descheduled (never: since the
    //       start), c none, b none since it left the pCPU: a runs, though c heads the queue.
    let (m, runs) = packets_run(3);
    assert_eq!(m.vms[2].rx_packets, 6);
    assert_eq!(&runs[..2], &[(0, 0, 30 * MS), (2, 30 * MS, 60 * MS)]);
    assert!(counter(&m, "cvs_comm.picks_by_packets") >= 1);
    // Without the packets, queue order: c at 30 ms.
    let (m, runs) = packets_run(0);
    assert_eq!(m.vms[2].rx_packets, 0);
    assert_eq!(&runs[..2], &[(0, 0, 30 * MS), (1, 30 * MS, 60 * MS)]);
    assert_eq!(counter(&m, "cvs_comm.picks_by_packets"), 0);
}
