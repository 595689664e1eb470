//! Fairness under every registered policy: CPU-bound VMs receive CPU in proportion to their
//! weights, whether they are HIT or CON.
//!
//! Setup: 2 pCPUs and two 2-vCPU CPU hogs of weights 256 and 512, for 30 s. The fair shares
//! are 1/3 and 2/3 of the host, which both VMs can use (neither is limited by its vCPU
//! count) and which a gang scheduler can also honour (one 2-vCPU gang fills the host, so
//! gangs simply alternate 1:2 in time).
//!
//! Tolerance: 2 percentage points of the host. Every policy here allocates in quanta of
//! tens of ms (Credit's 30 ms accounting period and slices, the gang schedulers' 30 ms
//! periods, hybrid's 10 ms slots with sampled charging), and a VM's share can be off by a
//! few quanta at any moment: 3 quanta of 30 ms on 2 pCPUs over 30 s is 0.3 % of the host,
//! and sampled charging adds at most a slot per allocation interval. 2 points leaves room
//! for that and nothing like a policy that ignored weights (which would give 50/50, 17
//! points off).

mod common;
use common::*;

fn weighted(policy: &str, vm_type: &str) -> String {
    let vms = [
        vm_toml("light", 2, &format!("weight = 256\ntype = \"{vm_type}\""), "kind = \"cpu_hog\""),
        vm_toml("heavy", 2, &format!("weight = 512\ntype = \"{vm_type}\""), "kind = \"cpu_hog\""),
    ];
    scenario(2, &format!("name = \"{policy}\""), &vms, "horizon_s = 30")
}

#[test]
fn cpu_share_follows_weight_under_every_policy() {
    for info in vsched_policies::REGISTRY {
        for vm_type in ["HIT", "CON"] {
            let m = run(&weighted(info.name, vm_type), 1);
            let (light, heavy) = (vm(&m, "light").cpu_share, vm(&m, "heavy").cpu_share);
            let what = format!("{} with {vm_type} VMs: light {light:.4}, heavy {heavy:.4}", info.name);
            assert!(light + heavy > 0.97, "{what}: the host idled");
            if info.name == "rr" {
                // Round robin has no notion of weight: an equal split is its definition.
                assert!((light - 0.5).abs() < 0.02, "{what}");
            } else {
                assert!((light - 1.0 / 3.0).abs() < 0.02 && (heavy - 2.0 / 3.0).abs() < 0.02, "{what}");
            }
        }
    }
}
