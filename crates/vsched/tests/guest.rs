//! Guest execution: pause-loop exits, barriers, I/O, and decisions the engine refuses.

mod common;
use common::*;

/// Two threads hammer one kernel-mode ticket lock on two pCPUs (no CPU contention), so the
/// only spinning is the waiter waiting out the holder's critical section.
fn ple_run(cs_us: f64, window_cycles: u64) -> vsched_model::RunMetrics {
    let spin = format!(
        "kind = \"spinlock\"\niterations = 2000\ncompute_us = 0\ncs_us = {cs_us}\njitter = 0\nmode = \"kernel\""
    );
    let toml = format!(
        "[host]\npcpus = 2\ncpu_ghz = 2.0\nple_window_cycles = {window_cycles}\n[scheduler]\nname = \"rr\"\n{}\n[run]\nhorizon_s = 10\nuntil = \"all_done\"\n",
        vm_toml("spin", 2, "", &spin)
    );
    run(&toml, 1)
}

#[test]
fn a_pause_loop_exit_needs_continuous_spinning_of_a_whole_window() {
    // Window: 4096 cycles at 2 GHz = 2.048 µs.
    let short = ple_run(1.5, 4096);
    assert!(vm(&short, "spin").spin_s > 0.0, "the waiter spins");
    assert_eq!(vm(&short, "spin").ple_exits, 0, "1.5 µs waits never reach a 2.048 µs window");

    let long = ple_run(20.0, 4096);
    let v = vm(&long, "spin");
    assert!(v.ple_exits > 0);
    // Every exit needs one whole window of spinning: exits x window <= spin time.
    assert!(v.ple_exits as f64 * 2.048e-6 <= v.spin_s, "{} exits in {} s of spinning", v.ple_exits, v.spin_s);
    // A waiter spins about 20 µs per acquisition, i.e. 9 whole windows (the window
    // restarts after each exit and after the scheduler's 0.5 µs on re-entry).
    assert!(v.ple_exits >= 2000 * 5, "got {} exits", v.ple_exits);

    let off = ple_run(20.0, 0);
    assert_eq!(vm(&off, "spin").ple_exits, 0, "ple_window_cycles = 0 disables PLE");
}

#[test]
fn user_mode_spinning_never_exits() {
    let spin = "kind = \"spinlock\"\niterations = 500\ncompute_us = 0\ncs_us = 20\nmode = \"user\"";
    let m =
        run(&scenario(2, "name = \"rr\"", &[vm_toml("spin", 2, "", spin)], "horizon_s = 5\nuntil = \"all_done\""), 1);
    assert!(vm(&m, "spin").spin_s > 0.0);
    assert_eq!(vm(&m, "spin").ple_exits, 0);
}

#[test]
fn a_bsp_superstep_waits_for_the_slowest_thread() {
    // 4 threads on 4 pCPUs with no jitter: 10 supersteps of 1 ms take 10 ms plus overheads.
    let bsp = "kind = \"bsp\"\nsupersteps = 10\ncompute_ms = 1.0\njitter = 0.0\nwait = \"spin\"";
    let m =
        run(&scenario(4, "name = \"credit\"", &[vm_toml("bsp", 4, "", bsp)], "horizon_s = 5\nuntil = \"all_done\""), 1);
    let done = vm(&m, "bsp").completion_s.unwrap();
    assert!((0.010..0.0105).contains(&done), "completion {done}");
    // With 2 threads per pCPU the VM needs at least twice as long, and blocking barriers
    // let the other thread use the pCPU instead of spinning.
    for wait in ["spin", "block"] {
        let bsp = format!("kind = \"bsp\"\nsupersteps = 10\ncompute_ms = 1.0\njitter = 0.0\nwait = \"{wait}\"");
        let m = run(
            &scenario(2, "name = \"credit\"", &[vm_toml("bsp", 4, "", &bsp)], "horizon_s = 5\nuntil = \"all_done\""),
            1,
        );
        let v = vm(&m, "bsp");
        assert!(v.completion_s.unwrap() >= 0.020, "{wait}: {:?}", v.completion_s);
        if wait == "block" {
            assert_eq!(v.spin_s, 0.0);
        }
    }
}

#[test]
fn io_blocks_the_vcpu_and_frees_the_pcpu() {
    // One vCPU doing 1 ms of I/O per 100 µs of work on one pCPU beside a hog: the hog gets
    // the pCPU while the I/O VM is blocked.
    let io = "kind = \"web\"\nrequests = 100\nservice_us = 100\njitter = 0\nio_us = 1000";
    let m = run(
        &scenario(
            1,
            "name = \"credit\"",
            &[vm_toml("io", 1, "", io), vm_toml("hog", 1, "", "kind = \"cpu_hog\"")],
            "horizon_s = 5\nuntil = \"all_done\"",
        ),
        1,
    );
    let io = vm(&m, "io");
    assert_eq!(io.requests, 100);
    let done = io.completion_s.unwrap();
    assert!(vm(&m, "hog").cpu_s > 0.8 * done, "hog ran while the I/O VM was blocked");
    assert!((io.cpu_s - 0.01).abs() < 0.002, "100 requests x 100 µs of CPU (+ overheads), got {}", io.cpu_s);
}

/// `idle_vcpus`: a guest with more vCPUs than its workload uses (seed 004's solo BT: one MPI
/// process in a 2-vCPU domain). The extra vCPU halts at once, so the VM runs and finishes
/// exactly as its workload alone would, and co-scheduling finds that vCPU never runnable.
#[test]
fn idle_vcpus_halt_for_the_whole_run() {
    let bsp = "kind = \"bsp\"\nsupersteps = 50\ncompute_ms = 2\njitter = 0\nwait = \"spin\"";
    let with = |vcpus: u32, extra: &str| {
        let toml = free_scenario(
            3,
            "name = \"cs\"",
            &[vm_toml("job", vcpus, extra, bsp)],
            "horizon_s = 5\nuntil = \"all_done\"",
        );
        run(&toml, 1)
    };
    let alone = with(2, "type = \"CON\"");
    let padded = with(3, "type = \"CON\"\nidle_vcpus = 1");
    assert_eq!(vm(&padded, "job").completion_s, vm(&alone, "job").completion_s);
    assert_eq!(vm(&padded, "job").cpu_s, vm(&alone, "job").cpu_s);
    let toml = free_scenario(2, "name = \"cs\"", &[vm_toml("job", 2, "idle_vcpus = 2", bsp)], "horizon_s = 5");
    let e = vsched::Scenario::parse(&toml).err().expect("refused").to_string();
    assert!(e.starts_with("vm[0].idle_vcpus: expected fewer idle vCPUs than vcpus = 2"), "{e}");
}
