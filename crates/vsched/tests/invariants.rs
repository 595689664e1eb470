//! Accounting invariants over a mix of every workload, under every policy and several seeds.
//!
//! The simulator itself checks after every event (in debug builds, i.e. under `cargo test`)
//! that no vCPU runs on two pCPUs and that pCPU and vCPU states agree, and at the end of
//! every run that per pCPU busy + idle = elapsed and per vCPU running + waiting + blocked =
//! its lifetime. This test drives those checks through varied schedules and adds the
//! cross-VM identities that follow from them. Two VMs are CON (one from the start, one from
//! a mid-run event) so co-scheduling policies run their own self-checks (`Policy::check`).

mod common;
use common::*;

fn mixed(policy: &str) -> String {
    let vms = [
        vm_toml("ticket", 3, "type = \"CON\"", "kind = \"spinlock\"\niterations = 3000\ncompute_us = 20\ncs_us = 5\nlocks = 2"),
        vm_toml("tas", 2, "weight = 512", "kind = \"spinlock\"\niterations = 3000\nlock_kind = \"tas\"\nmode = \"user\""),
        vm_toml("bsp", 4, "cap = 150", "kind = \"bsp\"\nsupersteps = 200\ncompute_ms = 0.5\njitter = 0.3\nwait = \"spin-then-block\"\nspin_limit_us = 50"),
        vm_toml("web", 2, "", "kind = \"web\"\nservice_us = 50\nio_us = 500"),
        vm_toml("hog", 2, "", "kind = \"cpu_hog\""),
        vm_toml("idle", 1, "", "kind = \"idle\""),
    ];
    // `tas` turns CON mid-run, so co-scheduling policies scatter it while it runs.
    let run = "horizon_s = 2\n[[event]]\nat_s = 0.7\nvm = \"tas\"\ntype = \"CON\"";
    scenario(3, &format!("name = \"{policy}\""), &vms, run)
}

#[test]
fn accounting_adds_up_under_every_policy() {
    for info in vsched_policies::REGISTRY {
        for seed in 1..=4 {
            let m = run(&mixed(info.name), seed);
            let capacity = m.sim_s * m.host.pcpus as f64;
            let used: f64 = m.vms.iter().map(|v| v.cpu_s).sum();
            assert!(used <= capacity * (1.0 + 1e-9), "{}: {used} s used of {capacity}", info.name);
            assert!((used / capacity - m.host.utilization).abs() < 1e-9, "{}: busy pCPU time is vCPU time", info.name);
            for v in &m.vms {
                let lifetime = m.sim_s * v.vcpus as f64;
                assert!(v.cpu_s + v.steal_s <= lifetime * (1.0 + 1e-9), "{} {}", info.name, v.name);
                assert!(v.spin_s <= v.cpu_s, "{} {}: spinning is part of CPU time", info.name, v.name);
            }
            // An idle vCPU runs once, for the dispatch overheads, before it halts, then only
            // for its guest kernel's timer wake-ups: each a dispatch (0.5 + 2 µs), a refill of
            // the kernel's 148 KiB footprint (at most 2,368 lines from memory at 81 ns, 10 in
            // flight: 19.2 µs; issue 54) and the 3.4 µs handler, under 26 µs.
            let idle = vm(&m, "idle");
            assert!(idle.timer_wakes > 0, "{}: an idle tickless guest still wakes", info.name);
            assert!(idle.cpu_s < 1e-4 + idle.timer_wakes as f64 * 26e-6, "{}: idle ran {} s", info.name, idle.cpu_s);
            assert!(vm(&m, "web").requests > 0, "{}: the web VM served", info.name);
            assert!(vm(&m, "hog").cpu_s > 0.0);
        }
    }
}
