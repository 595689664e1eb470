//! The pause-loop window of real vCPUs, scaled to this machine's exit cost.
//!
//! On hardware a pause-loop exit costs the spinner a VM exit and the hypervisor's handler
//! (`host.vm_exit_us + host.ple_handler_us`, about 1-2.5 µs) after a window of
//! `host.ple_window_cycles` (4,096 cycles, about 1.4 µs). The synthesized exit of real vCPUs
//! here (`guest_code::emit`, `ple_check`) costs what an MMIO exit and re-entry cost on this
//! machine, measured at the start of a run (`machine::exit_cost`: about 25 µs under
//! kvm_pvm, 10 to 30 times the hardware's). With the hardware's window a spinner would spend
//! over nine tenths of its spinning in exits; so the window is stretched by the same factor
//! as the exit:
//!
//! ```text
//! window_real = window_sim × exit_real / exit_sim      (and the same for the maximum)
//! ```
//!
//! which keeps the share of spinning lost to exits, and the number of exits per second of
//! spinning over that factor, as on hardware. What it cannot keep: a wait shorter than the
//! stretched window raises no exit on real vCPUs where it would on hardware, and the first
//! exit of a wait comes that much later (tens of µs against one or two). Both worlds still
//! send every long wait (a preempted holder, a descheduled predecessor in a ticket queue: a
//! slice of milliseconds) to the policy's `yield_` within a few windows.

use vsched_model::{HostConfig, Time};

/// What a synthesized pause-loop exit costs on this machine, and its TSC rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitCost {
    /// Wall-clock ns one exit costs the vCPU (`machine::ple_exit_ns`).
    pub exit_ns: Time,
    pub tsc_hz: u64,
}

use crate::backend::PleWindow;
use crate::guest_code::random_tables::ns_to_cycles;
use crate::guest_code::DESCHEDULED_GAP_NS;

/// The real vCPUs' pause-loop window for a run on `host`, whose policy grows the window by
/// `policy_grow` (`Policy::ple_window_grow`) unless the host says otherwise, on a machine
/// whose exits cost `cost`; `None` when the host has pause-loop exiting off
/// (`ple_window_cycles = 0`).
pub fn real_window(host: &HostConfig, policy_grow: u32, cost: ExitCost) -> Option<PleWindow> {
    let window_ns = host.ple_window_ns()?;
    let (scale, tsc_hz) = (stretch(host, cost.exit_ns), cost.tsc_hz);
    let scaled = |ns: Time| ns_to_cycles((ns as f64 * scale).min(u64::MAX as f64 / 2.0) as Time, tsc_hz).max(1);
    let base_cycles = scaled(window_ns);
    let max_cycles = scaled(host.cycles_ns(host.ple_window_max_cycles)).max(base_cycles);
    // Twice the exit's least cost plus the guest's own descheduling threshold: a stop and a
    // start alone take longer (about 100 µs, `kvm_costs`).
    let exit_gap_cycles = ns_to_cycles(2 * cost.exit_ns + DESCHEDULED_GAP_NS, tsc_hz);
    Some(PleWindow { base_cycles, grow: host.ple_grow.unwrap_or(policy_grow).max(1), max_cycles, exit_gap_cycles })
}

/// How many times longer an exit is here than on the simulated host: the window's stretch.
pub fn stretch(host: &HostConfig, exit_ns: Time) -> f64 {
    let simulated = (host.vm_exit_ns + host.ple_handler_ns).max(1);
    exit_ns as f64 / simulated as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_stretches_with_the_exit_and_keeps_the_share_lost_to_exits() {
        let host = HostConfig::default();
        let exit_sim = host.vm_exit_ns + host.ple_handler_ns;
        let window_sim = host.ple_window_ns().unwrap();
        let w = real_window(&host, 1, ExitCost { exit_ns: 20 * exit_sim, tsc_hz: 1_000_000_000 }).unwrap();
        assert_eq!(w.base_cycles, 20 * window_sim);
        let share_sim = exit_sim as f64 / (exit_sim + window_sim) as f64;
        let share_real = (20 * exit_sim) as f64 / (20 * exit_sim + w.base_cycles) as f64;
        assert!((share_sim - share_real).abs() < 1e-9);
        assert_eq!(w.grow, 1);
        assert!(w.max_cycles >= w.base_cycles);
    }

    const COST: ExitCost = ExitCost { exit_ns: 25_000, tsc_hz: 3_000_000_000 };

    #[test]
    fn the_host_growth_wins_over_the_policy_and_no_window_means_no_exits() {
        let mut host = HostConfig { ple_grow: Some(3), ..HostConfig::default() };
        assert_eq!(real_window(&host, 2, COST).unwrap().grow, 3);
        host.ple_grow = None;
        assert_eq!(real_window(&host, 2, COST).unwrap().grow, 2);
        host.ple_window_cycles = 0;
        assert_eq!(real_window(&host, 2, COST), None);
    }
}
