//! Weng's slot model (seed 003 §2.2–2.4) against the paper's scenario and theorems, and the
//! `hybrid` policy's co-scheduling against the same effect in the simulator.

// The simulator helpers of the facade's integration tests, shared rather than copied.
#[path = "../../vsched/tests/common.rs"]
mod common;
use common::*;
use vsched_analytic::slot_model::{cps, cps_makespan, execute, max_abs_lag, ps, ps_makespan, Ratio, SlotSetup};

/// §2.2: a 4-vCPU VM of weight 3/10 on 4 pCPUs, one slot per step, a synchronization
/// after every step, watched for 10 slots. The job is longer than that (100 steps).
fn section_2_2() -> SlotSetup {
    SlotSetup::new(4, 4, Ratio::new(3, 10))
}

#[test]
fn section_2_2_cps_completes_three_steps_in_ten_slots() {
    let setup = section_2_2();
    let ex = cps(&setup, &[100; 4], 10);
    // Figure 3: every vCPU runs 3 of the 10 slots, all in the same slots.
    for runs in &ex.runs {
        assert_eq!(runs, &vec![3, 6, 9]);
    }
    assert_eq!(ex.steps_by(10), 3);
    assert_eq!(ex.step_ends, vec![4, 7, 10]);
    assert_eq!(ex.wasted, 0, "co-scheduled vCPUs never wait at a synchronization");
    // CPS is fair: 0 <= Lag < 1 for every vCPU (Eq. 1).
    for runs in &ex.runs {
        assert!(max_abs_lag(runs, setup.share(), 10).num < max_abs_lag(runs, setup.share(), 10).den);
    }
}

#[test]
fn section_2_2_ps_with_the_same_shares_completes_two_steps() {
    let setup = section_2_2();
    let share = setup.share();
    // Figure-2-like: each vCPU gets exactly the same fair sequence (3 slots in 10, |Lag| < 1),
    // shifted by the competitors on its pCPU.
    let ex = ps(&setup, &[100; 4], &[0, 2, 3, 6], 10);
    for runs in &ex.runs {
        assert_eq!(runs.len(), 3, "each vCPU runs 3 of the 10 slots");
        assert!(max_abs_lag(runs, share, 10).num < share.den, "fair share, |Lag| < 1");
    }
    assert_eq!(ex.steps_by(10), 2);
    assert_eq!(ex.wasted, 3, "slots scheduled while waiting at a synchronization");

    // The paper's Figure 2 counts 4 wasted slots: one lag-bounded schedule that does so.
    // vCPUs 0–2 run slots 0, 3, 6; vCPU 3 runs 3, 4, 6. vCPU 3 is late: the others run
    // phase 1 in slot 0 and waste slot 3 waiting for it; step 1 ends at 4; vCPU 3 runs
    // phase 2 in slot 4, the others in slot 6, where vCPU 3 waits: step 2 ends at 7, and
    // nothing else completes by 10.
    let fig2: [&[u64]; 4] = [&[0, 3, 6], &[0, 3, 6], &[0, 3, 6], &[3, 4, 6]];
    let ex = execute(&[100; 4], 4, 10, |v, t| fig2[v].contains(&t));
    for runs in &ex.runs {
        let lag = max_abs_lag(runs, share, 10);
        assert!(lag.num <= lag.den, "|Lag| <= 1, as Eq. 1 allows");
    }
    assert_eq!(ex.step_ends, vec![4, 7]);
    assert_eq!(ex.wasted, 4);
    assert_eq!(ex.runs.iter().map(Vec::len).sum::<usize>(), 12, "the same 12 slots of CPU as CPS");
}

/// Weight proportions of the grid, including the paper's 3/10.
const WEIGHTS: [(u64, u64); 7] = [(3, 10), (1, 2), (1, 4), (2, 3), (1, 1), (1, 3), (1, 8)];

/// Every (|P|, |V_i| <= |P|, ω) of the grid.
fn grid() -> Vec<SlotSetup> {
    let mut out = Vec::new();
    for pcpus in [1, 2, 3, 4, 6, 8] {
        for vcpus in 1..=pcpus {
            for (num, den) in WEIGHTS {
                out.push(SlotSetup::new(pcpus, vcpus, Ratio::new(num, den)));
            }
        }
    }
    out
}

/// Theorem 2 by integers only: `ceil(M × |V| / (|P| × ω))` with ω = num/den.
fn theorem2(pcpus: u64, vcpus: u64, (num, den): (u64, u64), m: u64) -> u64 {
    (m * vcpus * den).div_ceil(pcpus * num)
}

#[test]
fn theorem_2_cps_makespan_is_exact_over_the_grid() {
    let mut checked = 0;
    for setup in grid() {
        let share = setup.share();
        let w = (setup.weight.num, setup.weight.den);
        for m in 1..=20 {
            // Tasks of unequal length: the longest has m phases (Theorem 2 uses max |J_k|).
            let phases: Vec<u64> = (0..setup.vcpus).map(|k| if k == 0 { m } else { 1 + (m - 1) * k % m }).collect();
            let makespan = cps_makespan(&setup, &phases);
            if share.num <= share.den {
                assert_eq!(makespan, theorem2(setup.pcpus, setup.vcpus, w, m), "{setup:?}, {m} phases");
                assert_eq!(makespan, setup.theorem2_makespan(m));
                checked += 1;
            } else {
                // |P| ω > |V_i|: the VM cannot use its whole share; every phase still needs
                // a slot, so the job takes one slot per phase (Theorem 2 assumes share <= 1).
                assert_eq!(makespan, m, "{setup:?}, {m} phases");
            }
        }
    }
    assert!(checked > 2000, "the grid exercises Theorem 2 in {checked} cases");
}

/// PS offsets: vCPU j shifted by `j × period / |V_i|` (spread over the fair sequence's
/// period), vCPU 0 not shifted.
fn staggered(setup: &SlotSetup) -> Vec<u64> {
    let period = setup.rate().den;
    (0..setup.vcpus).map(|j| j * period / setup.vcpus).collect()
}

#[test]
fn theorem_1_ps_never_beats_cps_and_stays_under_its_bound() {
    let one = Ratio::new(1, 1);
    let mut strictly_slower = 0;
    let mut cases = 0;
    for setup in grid() {
        let share = setup.share();
        for offsets in [staggered(&setup), (0..setup.vcpus).collect::<Vec<_>>()] {
            for m in 1..=20 {
                let phases = vec![m; setup.vcpus as usize];
                let cps_m = cps_makespan(&setup, &phases);
                let ps_m = ps_makespan(&setup, &phases, &offsets);
                // vCPU 0 follows CPS's slots exactly, and the job waits for its slowest
                // vCPU, so unaligned PS cannot finish earlier (Corollary 1's direction).
                assert!(ps_m >= cps_m, "{setup:?} {offsets:?} {m}: PS {ps_m} < CPS {cps_m}");
                if share.num <= share.den {
                    // Theorem 1 with the PS schedule's own |Lag| <= 1.
                    assert!(ps_m <= setup.theorem1_bound(m, one), "{setup:?} {offsets:?} {m}: PS {ps_m}");
                    let ex = ps(&setup, &phases, &offsets, ps_m);
                    for runs in &ex.runs {
                        let lag = max_abs_lag(runs, share, ps_m);
                        assert!(lag.num <= lag.den, "{setup:?}: PS is lag-bounded");
                    }
                }
                // Count the cases where PS can be unaligned at all: several vCPUs, each with
                // less than every slot, and several steps to synchronize.
                if setup.vcpus > 1 && share.num < share.den && m > 1 {
                    cases += 1;
                    if ps_m > cps_m {
                        strictly_slower += 1;
                    }
                }
            }
        }
    }
    // Deterministic: 1403 of 3382. Offsets that happen to fall on the same fair slots (or
    // jobs short enough to finish inside one period) tie with CPS; none beats it.
    assert!(strictly_slower * 3 > cases, "unaligned PS loses in {strictly_slower} of {cases} cases");
}

/// The simulator's version of §2.2: a 4-vCPU BSP VM (spin barriers, one 2 ms compute per
/// superstep) with weight 3/10, beside CPU hogs of weight 7/10 spread unevenly over the
/// 4 pCPUs, under `hybrid`. As HIT, each of its vCPUs runs when its own pCPU's PE order
/// says so; the pCPUs hold different competitors, so the vCPUs run in different slots and
/// the ones that arrive first spin at the barrier for the rest of their slot (Figure 2).
/// As CON, rule 2 starts all four together (Figure 3): nothing spins, and the same CPU
/// share completes the job much sooner.
#[test]
fn a_con_bsp_vm_finishes_sooner_than_the_same_vm_as_hit() {
    let run_as = |ty: &str| {
        let bsp = "kind = \"bsp\"\nsupersteps = 100\ncompute_ms = 2.0\njitter = 0.0\nwait = \"spin\"";
        let vms = [
            vm_toml("bsp", 4, &format!("type = \"{ty}\"\nweight = 300"), bsp),
            vm_toml("h1", 1, "weight = 100", "kind = \"cpu_hog\""),
            vm_toml("h2", 2, "weight = 200", "kind = \"cpu_hog\""),
            vm_toml("h3", 3, "weight = 400", "kind = \"cpu_hog\""),
        ];
        run(&scenario(4, "name = \"hybrid\"", &vms, "horizon_s = 30\nuntil = \"all_done\""), 1)
    };
    let hit = run_as("HIT");
    let con = run_as("CON");
    let (h, c) = (vm(&hit, "bsp"), vm(&con, "bsp"));
    let (h_done, c_done) = (h.completion_s.unwrap(), c.completion_s.unwrap());
    assert!(c_done * 2.0 < h_done, "CON finishes in {c_done} s, HIT in {h_done} s");
    assert!(c.spin_s < 0.01 * c.cpu_s, "co-scheduled: almost no spinning ({} of {} s)", c.spin_s, c.cpu_s);
    assert!(h.spin_s > 0.3 * h.cpu_s, "unaligned: much of the CPU is spent spinning ({} of {} s)", h.spin_s, h.cpu_s);
    assert!(c.co_launches > 0 && h.co_launches == 0);
}
