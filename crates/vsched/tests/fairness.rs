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

/// Host `fairness` (metrics.rs): received over entitlement. A web server beside two hogs on
/// 4 pCPUs asks for far less than its third of the host. CFS serves it at once and reads
/// fair; round robin makes each of its requests wait behind the hogs' slices, so it gets a
/// fraction of what it asked for while the hogs get more than theirs, and the index must
/// show it (the old index, over weight among CPU-bound VMs, left the web server out and
/// read 1.0 for both).
#[test]
fn fairness_reads_a_starved_server_but_not_one_that_asks_for_little() {
    let web_beside_hogs = |policy: &str| {
        let vms = [vm_toml("web", 4, "", "kind = \"web\""), vm_toml("hog1", 4, "", HOG), vm_toml("hog2", 4, "", HOG)];
        run(&scenario(4, &format!("name = \"{policy}\""), &vms, "horizon_s = 5"), 1)
    };
    let cfs = web_beside_hogs("cfs");
    let web = vm(&cfs, "web");
    assert!(web.cpu_share < 0.2 && web.entitled_share < 0.2, "the web server asks for little: {web:?}");
    let index = cfs.host.fairness.unwrap();
    assert!(index > 0.99, "CFS: {index}");
    let rr = web_beside_hogs("rr");
    let web = vm(&rr, "web");
    assert!(web.cpu_share < 0.5 * web.entitled_share, "round robin starves it: {web:?}");
    let index = rr.host.fairness.unwrap();
    assert!(index < 0.8, "round robin: {index}");
}

/// A finite job that finishes early, beside a hog that then has the host to itself: both got
/// their due at every instant, so the index reads fair although the job's share of the run is
/// far below its weight's (a split over the whole run would call it starved).
#[test]
fn fairness_follows_demand_over_time() {
    let vms = [vm_toml("job", 2, "", "kind = \"bsp\"\nsupersteps = 100\ncompute_ms = 10"), vm_toml("hog", 2, "", HOG)];
    let m = run(&scenario(2, "name = \"cfs\"", &vms, "horizon_s = 20"), 1);
    let job = vm(&m, "job");
    assert!(job.completion_s.unwrap() < 5.0 && job.cpu_share < 0.2, "{job:?}");
    let index = m.host.fairness.unwrap();
    assert!(index > 0.99, "{index}");
}
