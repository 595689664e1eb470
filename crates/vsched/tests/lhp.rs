//! Lock-holder and lock-waiter preemption emerge from the schedule (issue: foundation, and
//! issue 17: without any background VM to break the symmetry).
//!
//! A 4-vCPU ticket-spinlock VM (compute 50 µs, critical section 10 µs, 20,000 iterations per
//! thread) alone on 4 pCPUs, then beside three 4-vCPU CPU hogs under Credit, as the demo
//! (scenarios/lhp-demo.toml). A fair share would make it 4x slower. With the pCPUs' clocks
//! out of step (`sim/clocks.rs`) the VM's vCPUs run in different 30 ms slices, so holders are
//! preempted and waiters spin through slices; and a ticket lock handed to a waiter that is
//! not running stalls every other waiter until that one runs (lock-waiter preemption), which
//! on some seeds turns into a convoy of one acquisition per slice that cannot finish in the
//! horizon. An unfinished run counts as the horizon, a lower bound of its slowdown.
//!
//! And the README's `two-vms` example, where Credit's yield on a pause-loop exit starves a
//! FIFO-lock VM beside a hog (docs/policies.md explains the cycle).

mod common;
use common::*;

const SPIN: &str =
    "kind = \"spinlock\"\niterations = 20000\ncompute_us = 50\ncs_us = 10\nlock_kind = \"ticket\"\nmode = \"user\"";
const HORIZON_S: f64 = 120.0;

fn lhp_run(with_hogs: bool, clocks: &str, seed: u64) -> vsched_model::RunMetrics {
    let mut vms = vec![vm_toml("spin", 4, "", SPIN)];
    if with_hogs {
        for h in ["hog1", "hog2", "hog3"] {
            vms.push(vm_toml(h, 4, "", "kind = \"cpu_hog\""));
        }
    }
    let toml = scenario(4, "name = \"credit\"", &vms, &format!("horizon_s = {HORIZON_S}\nuntil = \"all_done\""));
    run(&toml.replacen("pcpus = 4\n", &format!("pcpus = 4\nclocks = \"{clocks}\"\n"), 1), seed)
}

#[test]
fn lock_holder_preemption_emerges_under_credit_without_a_background_vm() {
    for seed in 1..=5 {
        let alone = lhp_run(false, "independent", seed);
        let crowded = lhp_run(true, "independent", seed);
        let (a, c) = (vm(&alone, "spin"), vm(&crowded, "spin"));
        let alone_s = a.completion_s.expect("finishes alone");
        let slowdown = c.completion_s.unwrap_or(HORIZON_S) / alone_s;
        let (spin_alone, spin_crowded) = (a.spin_share.unwrap(), c.spin_share.unwrap());
        println!(
            "seed {seed}: alone {alone_s:.3} s (spin share {spin_alone:.3}), with hogs {:?} s (spin share \
             {spin_crowded:.3}, LHP {}, LWP {}): slowdown {slowdown:.2}x",
            c.completion_s, c.lock_holder_preemptions, c.lock_waiter_preemptions,
        );
        // Issue 17's target. Seeds 2-4 give 8.5x to 9.6x; seeds 1 and 5 fall into a convoy and
        // do not finish (docs/realism.md).
        assert!(slowdown >= 5.0, "seed {seed}: slowdown {slowdown:.2} should clearly exceed the fair 4x");
        assert!(spin_crowded > 2.0 * spin_alone, "seed {seed}: spin share {spin_crowded} vs {spin_alone} alone");
        assert!(c.lock_holder_preemptions + c.lock_waiter_preemptions > 10, "seed {seed}: locks are preempted");
    }
}

#[test]
fn in_lockstep_the_same_vm_is_gang_scheduled_by_accident() {
    // Every pCPU switches at the same instants, so the VM's four vCPUs (one per pCPU, placed
    // by Xen's cyclic rule) always run together: the slowdown is the fair share's and hardly
    // any spinning is added. This is the artifact the independent clocks remove.
    let alone = vm(&lhp_run(false, "lockstep", 1), "spin").clone();
    let crowded = vm(&lhp_run(true, "lockstep", 1), "spin").clone();
    let slowdown = crowded.completion_s.unwrap() / alone.completion_s.unwrap();
    assert!((3.5..4.5).contains(&slowdown), "lockstep slowdown {slowdown:.2}");
    assert!(crowded.lock_waiter_preemptions == 0, "LWP {}", crowded.lock_waiter_preemptions);
}

/// The README's `two-vms` example: a 2-vCPU VM running the default (kernel, ticket-lock)
/// `spinlock` workload beside a 2-vCPU hog on 2 pCPUs, with the scenario's default seed.
fn two_vms(scheduler: &str, vm_extra: &str, lock_kind: &str) -> vsched_model::VmMetrics {
    let spin = format!("kind = \"spinlock\"\niterations = 2000\nlock_kind = \"{lock_kind}\"");
    let vms = [vm_toml("spin", 2, vm_extra, &spin), vm_toml("hog", 2, "", "kind = \"cpu_hog\"")];
    let toml = scenario(2, &format!("name = \"{scheduler}\""), &vms, "horizon_s = 2\nuntil = \"all_done\"");
    vm(&run(&toml, 1), "spin").clone()
}

#[test]
fn a_fifo_lock_vm_beside_a_hog_gives_its_slices_away_under_credit() {
    // docs/policies.md, "A ticket-lock VM beside a hog gets almost nothing": under Credit
    // each pause-loop exit yields behind the OVER hog, which runs 30 ms, and the FIFO lock
    // goes to a waiter that is not running. The VM gets about 1 % of the CPU and does not
    // finish 2,000 iterations (about 0.25 s of work) in 2 s. Each of its turns ends in an
    // exit: at least one per vCPU every 30 ms, 133 in 2 s (147 with the default seed).
    for lock_kind in ["ticket", "mcs"] {
        let starved = two_vms("credit", "", lock_kind);
        println!("credit, {lock_kind}: {starved:?}");
        assert!(starved.completion_s.is_none(), "{lock_kind}: finished at {:?}", starved.completion_s);
        assert!(starved.cpu_share < 0.05, "{lock_kind}: CPU share {}", starved.cpu_share);
        assert!(starved.ple_exits > 100, "{lock_kind}: {} PLE exits", starved.ple_exits);
    }
    // Ending any link of the cycle ends the starvation: a lock whoever runs may take, waiters
    // that halt instead of spinning, or a host scheduler that gives no 30 ms slice away on an
    // exit (CFS, KVM with PLE handling off).
    for (scheduler, vm_extra, lock_kind) in
        [("credit", "", "tas"), ("credit", "pv_spinlocks = true", "ticket"), ("cfs", "", "ticket")]
    {
        let m = two_vms(scheduler, vm_extra, lock_kind);
        assert!(
            m.completion_s.is_some_and(|s| s < 0.5),
            "{scheduler}, {lock_kind}, {vm_extra:?}: {:?}",
            m.completion_s
        );
        assert!(m.cpu_share > 0.3, "{scheduler}, {lock_kind}, {vm_extra:?}: CPU share {}", m.cpu_share);
    }
}
