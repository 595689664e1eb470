//! Xen credit2 (issue 56), hand-checked on traces of a host without overheads
//! ([`free_host`]: no machine costs, clocks in lockstep, no timer slop), so every decision
//! lands on the instant the source says.
//!
//! Facts used (RELEASE-4.22.0 `xen/common/sched/credit2.c`): a vCPU starts with 10 ms of
//! credit (`CSCHED2_CREDIT_INIT`) and burns `max_weight / weight` ns of it per ns run; a slice
//! runs until its credit falls to the best waiter's, at least 500 µs (`CSCHED2_MIN_TIMER`) or
//! what is left of the 1 ms rate limit (a vCPU just switched in: the whole 1 ms), at most
//! 10 ms (`csched2_runtime`); a queued vCPU replaces the current one only with strictly more
//! credit (`runq_candidate`); a waker tickles a busy pCPU only if its vCPU has run more than
//! the rate limit less 50 µs (`is_preemptable`).

mod common;
use common::*;
use vsched_model::*;

const MS: Time = NS_PER_MS;
const US: Time = NS_PER_US;

/// Runs `doms` on `pcpus` free pCPUs under credit2 with `params` until `horizon`; returns the
/// metrics and every span `(vcpu, pcpu, start, end)`, in order of start.
fn runs(
    pcpus: usize,
    params: &[(&str, Value)],
    doms: Vec<DomainConfig>,
    horizon: Time,
) -> (RunMetrics, Vec<(VcpuId, PcpuId, Time, Time)>) {
    let mut sim = Simulation::new(free_host(pcpus), doms, policy("credit2", params), 1);
    sim.enable_trace(1_000_000);
    let m = sim.run(horizon, Until::Horizon, &mut |_| true).expect("run failed");
    let trace = sim.take_trace().unwrap();
    assert_eq!(trace.dropped(), 0);
    let mut spans: Vec<_> = trace.spans().iter().map(|s| (s.vcpu, s.pcpu, s.start, s.end)).collect();
    spans.sort_by_key(|s| (s.2, s.1));
    (m, spans)
}

fn version(v: &str) -> Vec<(&'static str, Value)> {
    vec![("xen_version", Value::Str(v.into()))]
}

/// Two hogs, A (vCPU 0) and B (vCPU 1), of weight 256 on one pCPU.
fn two_hogs() -> Vec<DomainConfig> {
    vec![domain("A", VmType::Hit, vec![hog()]), domain("B", VmType::Hit, vec![hog()])]
}

/// Before 4.21 the slice of a vCPU that replaces another is cut against the head of the
/// runqueue only, and the vCPU switched out is not queued yet: alone with one other, each
/// runs until its credit is gone, about 10 ms. By hand: at 0 A is picked with B (10 ms)
/// waiting: slice 0, so the 1 ms of a new vCPU's rate limit; at 1 ms B (10 ms) beats A (9 ms)
/// and runs 10 ms (nobody queued yet) to 0; at 11 ms A (9 ms) runs 9 ms to 0; at 20 ms B has
/// no more credit than A (0 = 0), so A runs on and the epoch ends (both at 0): +10 ms each, and
/// A's slice, cut against B's 10 ms, is the 500 µs minimum. From then on, 10 ms each.
#[test]
fn two_equal_hogs_alternate_in_10_ms_slices_before_xen_4_21() {
    for v in ["4.12", "4.14"] {
        let (_, spans) = runs(1, &version(v), two_hogs(), 100 * MS);
        let turns: Vec<(VcpuId, Time, Time)> = spans.iter().map(|s| (s.0, s.2, s.3)).collect();
        let head = [
            (0, 0, MS),
            (1, MS, 11 * MS),
            (0, 11 * MS, 20 * MS + 500 * US),
            (1, 20 * MS + 500 * US, 30 * MS + 500 * US),
        ];
        assert_eq!(turns[..4], head, "{v}");
        // Then each turn is a whole epoch's 10 ms, A and B alternating, to the horizon.
        for w in turns[3..].windows(2) {
            assert_ne!(w[0].0, w[1].0, "{v}: alternate");
            assert_eq!(w[0].2, w[1].1, "{v}: no idle gap");
        }
        for t in &turns[3..turns.len() - 1] {
            assert_eq!(t.2 - t.1, 10 * MS, "{v}: turn {t:?}");
        }
    }
}

/// From 4.21 (commit ae648e9f80) the slice is also cut against the vCPU being switched out,
/// so two equal hogs trade the pCPU every rate limit. By hand: at 0 A runs 1 ms (B waits
/// with as much); at 1 ms B (10 ms) replaces A (9 ms), its slice cut against A's 9 ms: 1 ms
/// of credit, so 1 ms; at 2 ms B (9 ms) is no better than A (9 ms) and runs on, for the 500 µs
/// minimum (its rate limit is spent); at 2.5 ms A (9 ms) beats B (8.5 ms) and runs 1 ms; and
/// so on, a 1 ms turn each, the rate limit setting the pace.
#[test]
fn two_equal_hogs_trade_the_pcpu_every_rate_limit_from_xen_4_21() {
    for v in ["4.21", "current"] {
        let (_, spans) = runs(1, &version(v), two_hogs(), 100 * MS);
        let turns: Vec<(VcpuId, Time, Time)> = spans.iter().map(|s| (s.0, s.2, s.3)).collect();
        assert_eq!(
            turns[..3],
            [(0, 0, MS), (1, MS, 2 * MS + 500 * US), (0, 2 * MS + 500 * US, 3 * MS + 500 * US)],
            "{v}"
        );
        for w in turns[2..].windows(2) {
            assert_ne!(w[0].0, w[1].0, "{v}: alternate");
            assert_eq!(w[0].2, w[1].1, "{v}: no idle gap");
        }
        // Every turn but the last (cut by the horizon) lasts the 1 ms rate limit, resets
        // included: a reset gives both 10 ms and keeps their order.
        for t in &turns[2..turns.len() - 1] {
            assert_eq!(t.2 - t.1, MS, "{v}: turn {t:?}");
        }
        // With the rate limit off the slice of a vCPU switched in is the 500 µs minimum: A
        // runs 500 µs; B (10 ms) replaces A (9.5 ms) for the 500 µs that bring it to 9.5 ms,
        // then runs on (no better waiter) for 500 µs more: 1 ms turns again, of two slices.
        let mut off = version(v);
        off.push(("sched_ratelimit_us", Value::Int(0)));
        let (m, spans) = runs(1, &off, two_hogs(), 20 * MS);
        assert_eq!((spans[0].2, spans[0].3), (0, 500 * US), "{v}");
        assert!(spans[1..spans.len() - 1].iter().all(|s| s.3 - s.2 == MS), "{v}: {spans:?}");
        assert_eq!(counter(&m, "credit2.ratelimited"), 0, "{v}");
    }
}

/// Weights 256 and 512 on one pCPU: `max_weight` is 512, so the light vCPU burns 2 ns of
/// credit per ns and the heavy one 1. An epoch gives each 10 ms of credit: the heavy runs
/// 10 ms and the light 5 ms before the best credit is gone and the next reset. So over any
/// run the heavy's CPU time is twice the light's, give or take the epoch in progress (at
/// most 10 ms + the 500 µs carry-over of one side).
#[test]
fn weights_256_and_512_split_each_reset_epoch_one_to_two() {
    for v in ["4.12", "4.14", "current"] {
        let mut heavy = domain("heavy", VmType::Hit, vec![hog()]);
        heavy.weight = 512;
        for horizon in [97 * MS, 500 * MS, 1733 * MS] {
            let doms = vec![domain("light", VmType::Hit, vec![hog()]), heavy.clone()];
            let (m, spans) = runs(1, &version(v), doms, horizon);
            let cpu = |d: usize| spans.iter().filter(|s| s.0 == d).map(|s| (s.3 - s.2) as i64).sum::<i64>();
            let (light, heavy_ns) = (cpu(0), cpu(1));
            assert_eq!(light + heavy_ns, horizon as i64, "{v}: the pCPU never idles");
            assert!((heavy_ns - 2 * light).abs() <= 11 * MS as i64, "{v} at {horizon}: heavy {heavy_ns} light {light}");
            assert!(counter(&m, "credit2.resets") >= horizon / (16 * MS), "{v}: an epoch lasts 15 ms of run time");
        }
    }
}
/// W (vCPU 0) computes 100 µs, sleeps `nap`, then computes for ever; H (vCPU 1) is a hog.
/// W runs first (both have 10 ms, W queued first) and blocks at 100 µs; H then runs a 10 ms
/// slice (nobody waits). W wakes at 100 µs + `nap` with 9.9 ms of credit, more than H's.
/// Returns when W runs again.
fn waker_back_at(nap: Time) -> Time {
    let w = program(&[compute(100 * US), Instr::Io(Dur::Fixed(nap)), compute(FOREVER)]);
    let doms = vec![domain("W", VmType::Hit, vec![w]), domain("H", VmType::Hit, vec![hog()])];
    let (_, spans) = runs(1, &[], doms, 30 * MS);
    assert_eq!((spans[0].0, spans[0].2, spans[0].3), (0, 0, 100 * US));
    assert_eq!((spans[1].0, spans[1].2), (1, 100 * US), "H runs from 100 µs");
    assert_eq!(spans[2].0, 0, "W runs next: {spans:?}");
    assert_eq!(spans[1].3, spans[2].2);
    spans[2].2
}

/// A waker with more credit than the running vCPU preempts it only once that vCPU has run
/// the 1 ms rate limit, and only if something makes its pCPU schedule then: credit2 has no
/// tick, and a waker tickles a busy pCPU only if its vCPU has run more than the rate limit
/// less 50 µs (`is_preemptable`).
#[test]
fn a_waker_with_more_credit_preempts_only_after_the_rate_limit() {
    let h_start = 100 * US;
    // Woken after 300 µs of H: no tickle; W waits for the end of H's 10 ms slice.
    assert_eq!(waker_back_at(300 * US), h_start + 10 * MS);
    // Woken after 960 µs of H (within the 50 µs tolerance): H's pCPU is tickled at once, but
    // `runq_candidate` keeps H for the 40 µs of its rate limit left, and `csched2_runtime`
    // gives it the 500 µs minimum slice: W runs 1.46 ms after H started.
    assert_eq!(waker_back_at(960 * US), h_start + 1460 * US);
    // Woken after 5 ms of H: preempts at once.
    assert_eq!(waker_back_at(5 * MS), h_start + 5 * MS);
    // In no case before the rate limit.
    for nap in [10 * US, 500 * US, 940 * US, 950 * US, 999 * US, MS, 2 * MS] {
        let back = waker_back_at(nap);
        assert!(back >= h_start + MS, "woken after {nap} ns of H, back at {back}");
        assert!(back >= h_start + nap);
    }
}

/// A host of two sockets of one pCPU each: credit2 gives each socket a runqueue. Two hogs
/// and two sleepers are inserted in turn where `b_avgload` is lowest (ties to the first
/// runqueue), each bringing its starting load of one half: hogs 0 and 2 on socket 0, sleepers
/// 1 and 3 on socket 1. So socket 0 is overloaded (two hogs on one pCPU) and socket 1 idle.
/// With t/W for the time over the EWMA window W = 2^30 ns (1.07 s), socket 0's load is
/// 2 − e^(−t/W) and socket 1's e^(−t/W). `balance_load` runs at each reset on socket 0 (every
/// 20 ms of its two hogs) and acts once the gap, 2 − 2e^(−t/W), reaches 1/8 of a vCPU
/// (`credit2_balance_over` = −3, socket 0 being over full load): at t = W ln(16/15) ≈ 69.3
/// ms. It then takes the move that narrows the gap most: swapping a hog (load 1 − e^(−t/W)/2)
/// for a sleeper (e^(−t/W)/2, as its own average last moved) closes it. So one hog moves at
/// the first reset after 69.3 ms, well within one window, and the hogs keep a socket each.
#[test]
fn load_balancing_moves_one_hog_to_the_idle_socket_within_an_ewma_window() {
    let sleeper = || program(&[Instr::Io(Dur::Fixed(FOREVER))]);
    let doms = vec![
        domain("hog0", VmType::Hit, vec![hog()]),
        domain("sleeper1", VmType::Hit, vec![sleeper()]),
        domain("hog2", VmType::Hit, vec![hog()]),
        domain("sleeper3", VmType::Hit, vec![sleeper()]),
    ];
    let mut host = free_host(2);
    host.sockets = 2;
    let mut sim = Simulation::new(host, doms, policy("credit2", &[]), 1);
    sim.enable_trace(1_000_000);
    let m = sim.run(3_000 * MS, Until::Horizon, &mut |_| true).expect("run failed");
    let spans: Vec<_> = sim.take_trace().unwrap().spans().iter().map(|s| (s.vcpu, s.pcpu, s.start, s.end)).collect();
    let hog_on_1 = spans.iter().filter(|s| s.1 == 1 && (s.0 == 0 || s.0 == 2)).map(|s| s.2).min();
    let moved_at = hog_on_1.expect("a hog reaches socket 1");
    let threshold = ((1u64 << 30) as f64 * (16.0f64 / 15.0).ln()) as Time;
    assert!(moved_at >= threshold && moved_at <= threshold + 21 * MS, "moved at {moved_at} ns");
    // From then on each socket runs one hog, always the same.
    let after: Vec<_> = spans.iter().filter(|s| s.2 >= moved_at && (s.0 == 0 || s.0 == 2)).collect();
    let mover = after.iter().find(|s| s.1 == 1).unwrap().0;
    assert!(after.iter().all(|s| (s.1 == 1) == (s.0 == mover)), "hogs keep their sockets");
    let busy = |p: PcpuId| after.iter().filter(|s| s.1 == p).map(|s| s.3 - s.2).sum::<Time>();
    assert_eq!(busy(0), 3_000 * MS - moved_at);
    assert_eq!(busy(1), 3_000 * MS - moved_at);
    assert!(counter(&m, "credit2.migrations") >= 1);
}

/// Runqueues follow the topology (8 pCPUs, 2 sockets, 2 threads per core): a vCPU leaves its
/// runqueue only when `balance_load` moves it (counted), so with 16 equal hogs, which never
/// unbalance the runqueues, each vCPU runs only on the pCPUs of the runqueue it was placed in.
#[test]
fn vcpus_stay_in_the_runqueue_of_their_socket_core_or_cpu() {
    type Group = fn(PcpuId) -> usize;
    let cases: [(&str, Group); 4] = [("socket", |p| p / 4), ("node", |p| p / 4), ("core", |p| p / 2), ("cpu", |p| p)];
    for (arrangement, group) in cases {
        let mut host = free_host(8);
        host.sockets = 2;
        host.threads_per_core = 2;
        let doms = (0..16).map(|i| domain(&format!("h{i}"), VmType::Hit, vec![hog()])).collect();
        let params = [("credit2_runqueue", Value::Str(arrangement.into()))];
        let mut sim = Simulation::new(host, doms, policy("credit2", &params), 1);
        sim.enable_trace(1_000_000);
        let m = sim.run(300 * MS, Until::Horizon, &mut |_| true).expect("run failed");
        assert_eq!(counter(&m, "credit2.migrations"), 0, "{arrangement}");
        let spans = sim.take_trace().unwrap().spans().to_vec();
        for v in 0..16 {
            let groups: Vec<usize> = spans.iter().filter(|s| s.vcpu == v).map(|s| group(s.pcpu)).collect();
            assert!(
                !groups.is_empty() && groups.iter().all(|&g| g == groups[0]),
                "{arrangement}: vCPU {v} ran in {groups:?}"
            );
        }
    }
}

/// A Xen host boots the same Domain-0 under credit2 as under Credit (one vCPU per pCPU,
/// weight 256), and the host's `xen_version` reaches credit2 only with a release credit2
/// models; Credit's releases are refused naming the host's key.
#[test]
fn a_credit2_host_boots_credit_s_domain_0_and_takes_its_own_releases() {
    let vms = [vm_toml("hog", 1, "", HOG)];
    let toml = |scheduler: &str, host: &str| {
        scenario(4, scheduler, &vms, "horizon_s = 0.2").replacen("dom0_vcpus = 0\n", host, 1)
    };
    let dom0 = |m: &RunMetrics| {
        m.vms.iter().filter(|v| v.name != "hog").map(|v| (v.name.clone(), v.vcpus)).collect::<Vec<_>>()
    };
    let credit = run(&toml("name = \"credit\"", ""), 1);
    let credit2 = run(&toml("name = \"credit2\"", ""), 1);
    assert_eq!(dom0(&credit2), dom0(&credit));
    assert_eq!(dom0(&credit2).len(), 1);
    assert_eq!(dom0(&credit2)[0].1, 4);
    run(&toml("name = \"credit2\"", "xen_version = \"4.12\"\n"), 1);
    let refused =
        vsched::Scenario::parse(&toml("name = \"credit2\"", "xen_version = \"4.0\"\n")).err().unwrap().to_string();
    assert!(refused.starts_with("host.xen_version:") && refused.contains("\"4.12\""), "{refused}");
    let refused =
        vsched::Scenario::parse(&toml("name = \"credit\"", "xen_version = \"4.14\"\n")).err().unwrap().to_string();
    assert!(refused.starts_with("host.xen_version:") && refused.contains("\"4.1\""), "{refused}");
    let refused =
        vsched::Scenario::parse(&toml("name = \"credit2\"\nsched_ratelimit_us = 50", "")).err().unwrap().to_string();
    assert!(refused.starts_with("scheduler.sched_ratelimit_us:"), "{refused}");
}

/// A traced run shows each vCPU's credit in µs and each pCPU's runqueue length. Two hogs on
/// one free pCPU (4.21 on): each starts with 10,000 µs; A runs 1 ms and is charged 1,000 µs
/// when B replaces it; one vCPU is always queued.
#[test]
fn a_traced_run_shows_credit_in_us_and_the_runqueue_length() {
    let text = format!(
        "[host]\npcpus = 1\ndom0_vcpus = 0\n{FREE_HOST}\n[scheduler]\nname = \"credit2\"\n{}\n{}\n[run]\nhorizon_s = 0.003\n",
        vm_toml("a", 1, "", HOG),
        vm_toml("b", 1, "", HOG)
    );
    let path = std::env::temp_dir().join(format!("vsched-credit2-trace-{}.json", std::process::id()));
    let opts = vsched::RunOptions { reps: Some(1), trace_path: Some(path.clone()), ..Default::default() };
    vsched::run_scenario_json(&text, &opts, &mut |_| true).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    // Per counter track (name, pid, tid): its samples (ts in µs, value) in time order.
    let mut tracks: std::collections::BTreeMap<(String, i64, i64), Vec<(f64, i64)>> = Default::default();
    for e in events.iter().filter(|e| e["ph"] == "C") {
        let key = (e["name"].as_str().unwrap().to_string(), e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap());
        for v in e["args"].as_object().unwrap().values() {
            tracks.entry(key.clone()).or_default().push((e["ts"].as_f64().unwrap(), v.as_i64().unwrap()));
        }
    }
    for samples in tracks.values_mut() {
        samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let credit: Vec<&Vec<(f64, i64)>> = tracks.iter().filter(|(k, _)| k.0 == "credit").map(|(_, v)| v).collect();
    assert_eq!(credit.len(), 2, "{tracks:?}");
    // A (first to run) is charged 1 ms when B replaces it at 1 ms; B 1 ms at 2 ms (it ran on
    // for 500 µs more, charged at 2.5 ms).
    let mut firsts: Vec<_> = credit.iter().map(|s| (s[0], s[1])).collect();
    firsts.sort_by(|a, b| a.1 .0.total_cmp(&b.1 .0));
    assert_eq!(firsts, [((0.0, 10_000), (1_000.0, 9_000)), ((0.0, 10_000), (2_000.0, 9_000))]);
    let runq: Vec<_> = tracks.iter().filter(|(k, _)| k.0 == "runq").map(|(_, v)| v.clone()).collect();
    assert_eq!(runq, [vec![(0.0, 1)]], "one vCPU always queued");
}
