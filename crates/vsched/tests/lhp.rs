//! Lock-holder preemption emerges from the schedule (issue: foundation).
//!
//! A 4-vCPU ticket-spinlock VM (compute 50 µs, critical section 10 µs) alone on 4 pCPUs,
//! then beside three 4-vCPU CPU hogs under Credit. Fair share would make it 4x slower; the
//! lock holder being preempted (and waiters spinning through whole slices) must make it
//! clearly worse. Both runs include a 1-vCPU Domain-0 doing light I/O, as the demo does:
//! it is what desynchronizes the pCPUs (see scenarios/lhp-demo.toml).

mod common;
use common::*;

const SPIN: &str =
    "kind = \"spinlock\"\niterations = 20000\ncompute_us = 50\ncs_us = 10\nlock_kind = \"ticket\"\nmode = \"user\"";
const DOM0: &str = "kind = \"web\"\nservice_us = 100\nio_us = 5000";

fn lhp_run(with_hogs: bool, seed: u64) -> vsched_model::RunMetrics {
    let mut vms = vec![vm_toml("spin", 4, "", SPIN)];
    if with_hogs {
        for h in ["hog1", "hog2", "hog3"] {
            vms.push(vm_toml(h, 4, "", "kind = \"cpu_hog\""));
        }
    }
    vms.push(vm_toml("dom0", 1, "", DOM0));
    run(&scenario(4, "name = \"credit\"", &vms, "horizon_s = 120\nuntil = \"all_done\""), seed)
}

#[test]
fn lock_holder_preemption_emerges_under_credit() {
    for seed in [1, 2, 3] {
        let alone = lhp_run(false, seed);
        let crowded = lhp_run(true, seed);
        let (a, c) = (vm(&alone, "spin"), vm(&crowded, "spin"));
        let slowdown = c.completion_s.expect("finishes beside hogs") / a.completion_s.expect("finishes alone");
        println!(
            "seed {seed}: alone {:.3} s (spin share {:.3}, LHP {}), with hogs {:.3} s (spin share {:.3}, LHP {}, LWP {}): slowdown {slowdown:.2}x",
            a.completion_s.unwrap(),
            a.spin_share.unwrap(),
            a.lock_holder_preemptions,
            c.completion_s.unwrap(),
            c.spin_share.unwrap(),
            c.lock_holder_preemptions,
            c.lock_waiter_preemptions,
        );
        assert!(slowdown >= 5.0, "seed {seed}: slowdown {slowdown} should clearly exceed the fair 4x");
        assert!(
            c.spin_share.unwrap() > 3.0 * a.spin_share.unwrap(),
            "seed {seed}: spinning must take a larger share of CPU"
        );
        assert!(c.lock_holder_preemptions > 10, "seed {seed}: lock holders are preempted");
        assert!(c.lock_holder_preemptions > a.lock_holder_preemptions);
    }
}
