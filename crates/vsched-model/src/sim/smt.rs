//! Simultaneous multithreading: hardware threads of one core slow each other down, and what
//! ran beside what.
//!
//! # The throughput model
//! On a host with `threads_per_core` > 1, a guest compute progresses at rate 1 while every
//! other hardware thread of its core is idle, and at `smt_rate` (< 1) while any of them runs
//! a vCPU (`[host] smt_rate`, default [`DEFAULT_SMT_RATE`], docs/realism.md). A core of two
//! busy threads thus does `2 × smt_rate` of one thread's work. The rate is a fixed-point
//! fraction of 2¹⁶ so that progress stays in integer nanoseconds and is the same on every
//! machine; a compute's end is rounded up, so it never ends before its work is done.
//!
//! Approximations: one rate for every pair of workloads (real gains vary from a loss to
//! nearly 2x with the two threads' instruction mix); a thread is busy whenever its pCPU runs
//! a vCPU, spinning or in a dispatch overhead included (a PAUSE loop yields pipeline slots
//! to its sibling on real cores; not modelled); only guest computes slow down: spinning,
//! spin limits, overheads and handlers are measured in time, not work.
//!
//! # Metrics (per host, present when `threads_per_core` > 1)
//! - `smt.corun_s`: summed over cores, the time at least two of a core's threads ran vCPUs;
//! - `smt.cross_vm_s`: summed over cores, the time a core's threads ran vCPUs of two or more
//!   different domains (what core scheduling exists to prevent);
//! - per VM, `core_shared_s`: the time its vCPUs ran while a sibling thread of their core
//!   ran another domain's vCPU (summed over its vCPUs).
//!
//! Both are integrated at every change of what a pCPU runs ([`Core::smt_pcpu_changing`]), so
//! they cost nothing on hosts without SMT.

use vsched_engine::Time;

use super::state::{Core, ThreadState};
use crate::domain::VcpuState;
use crate::ids::{DomId, PcpuId, VcpuId};

/// One thread's rate while a sibling runs, per cent of its solo rate: 65 %. Intel reports
/// Hyper-Threading gains "of up to 30 %" on server benchmarks (Marr et al., "Hyper-Threading
/// Technology Architecture and Microarchitecture", Intel Technology Journal 6(1), 2002,
/// p. 11): two threads doing 1.3 threads' work is 0.65 each. "Up to": an optimistic figure,
/// so sharing a core costs at least this much (docs/realism.md).
pub const DEFAULT_SMT_RATE: f64 = 0.65;

/// The fixed-point unit of a rate: 2¹⁶ is a rate of 1.
const RATE_ONE: u64 = 1 << 16;

/// The host's SMT state: the sibling rate and, per core, what its threads ran since when.
#[derive(Debug, Default)]
pub(super) struct Smt {
    /// Hardware threads per core; 1 switches everything here off.
    threads_per_core: usize,
    /// A thread's rate while a sibling runs, in units of [`RATE_ONE`].
    rate: u64,
    /// Per core (global numbering): when its figures were last integrated.
    since: Vec<Time>,
    /// Per host: time with two or more threads of a core busy, summed over its cores.
    pub(super) corun_ns: Vec<Time>,
    /// Per host: time a core ran two or more domains at once, summed over its cores.
    pub(super) cross_vm_ns: Vec<Time>,
    /// Per domain: its vCPUs' time beside another domain's vCPU on one core.
    pub(super) shared_ns: Vec<Time>,
}

impl Smt {
    /// SMT state for `pcpus` pCPUs (all hosts), `hosts` hosts and `doms` domains.
    pub(super) fn new(threads_per_core: usize, smt_rate: f64, pcpus: usize, hosts: usize, doms: usize) -> Self {
        if threads_per_core <= 1 {
            return Smt { threads_per_core: 1, rate: RATE_ONE, ..Smt::default() };
        }
        let rate = ((smt_rate * RATE_ONE as f64).round() as u64).clamp(1, RATE_ONE);
        Smt {
            threads_per_core,
            rate,
            since: vec![0; pcpus / threads_per_core],
            corun_ns: vec![0; hosts],
            cross_vm_ns: vec![0; hosts],
            shared_ns: vec![0; doms],
        }
    }

    /// Whether the host has SMT (and so these metrics).
    pub(super) fn enabled(&self) -> bool {
        self.threads_per_core > 1
    }

    /// Whether siblings slow each other down.
    fn slows(&self) -> bool {
        self.enabled() && self.rate < RATE_ONE
    }

    /// The pCPUs of `p`'s core, `p` included (a core's threads are numbered next to each other).
    fn core_of(&self, p: PcpuId) -> std::ops::Range<PcpuId> {
        let first = p - p % self.threads_per_core;
        first..first + self.threads_per_core
    }
}

/// Work done in `elapsed` ns at `rate`, rounded down.
fn work_in(elapsed: Time, rate: u64) -> Time {
    if rate == RATE_ONE {
        return elapsed;
    }
    ((elapsed as u128 * rate as u128) / RATE_ONE as u128) as Time
}

/// Time `work` takes at `rate`, rounded up: the work is done by then.
fn time_for(work: Time, rate: u64) -> Time {
    if rate == RATE_ONE {
        return work;
    }
    let t = (work as u128 * RATE_ONE as u128).div_ceil(rate as u128);
    t.min(Time::MAX as u128) as Time
}

impl Core {
    /// The rate at which running vCPU `v`'s guest computes now progress.
    fn smt_rate_of(&self, v: VcpuId) -> u64 {
        if !self.smt.slows() {
            return RATE_ONE;
        }
        match self.vcpus[v].state {
            VcpuState::Running(p) if self.smt.core_of(p).any(|q| q != p && self.pcpus[q].curr.is_some()) => {
                self.smt.rate
            }
            _ => RATE_ONE,
        }
    }

    /// Work running vCPU `v` did in `elapsed` ns of guest execution.
    pub(super) fn smt_work_in(&self, v: VcpuId, elapsed: Time) -> Time {
        work_in(elapsed, self.smt_rate_of(v))
    }

    /// Time running vCPU `v` needs for `work`, at the rate it has now.
    pub(super) fn smt_time_for(&self, v: VcpuId, work: Time) -> Time {
        time_for(work, self.smt_rate_of(v))
    }

    /// Called before pCPU `p` changes what it runs (`next`): integrates the core's figures
    /// and brings its siblings' progress up to now at the rate they had. Returns the sibling
    /// vCPUs whose rate may change, for [`Core::smt_pcpu_changed`].
    pub(super) fn smt_pcpu_changing(&mut self, p: PcpuId, next: Option<VcpuId>) -> [Option<VcpuId>; 8] {
        let mut rearm = [None; 8];
        if !self.smt.enabled() {
            return rearm;
        }
        self.smt_integrate(p);
        if self.smt.slows() && self.pcpus[p].curr.is_some() != next.is_some() {
            for (slot, q) in self.smt.core_of(p).enumerate() {
                if q == p {
                    continue;
                }
                if let Some(u) = self.pcpus[q].curr {
                    self.sync(u);
                    if matches!(self.threads[self.vcpus[u].curr].state, ThreadState::Computing { .. }) {
                        rearm[slot] = Some(u);
                    }
                }
            }
        }
        rearm
    }

    /// After pCPU `p`'s change: re-arms the sibling computes whose rate changed.
    pub(super) fn smt_pcpu_changed(&mut self, rearm: [Option<VcpuId>; 8]) {
        for u in rearm.into_iter().flatten() {
            self.arm(u);
        }
    }

    /// Adds the time since the last change of `p`'s core to its co-run and cross-VM figures.
    fn smt_integrate(&mut self, p: PcpuId) {
        let tpc = self.smt.threads_per_core;
        let core = p / tpc;
        let now = self.now();
        let spent = now - self.smt.since[core];
        self.smt.since[core] = now;
        if spent == 0 {
            return;
        }
        let mut doms: [Option<DomId>; 8] = [None; 8];
        for (i, q) in self.smt.core_of(p).enumerate() {
            doms[i] = self.pcpus[q].curr.map(|v| self.vcpus[v].dom);
        }
        let busy = doms.iter().flatten().count();
        if busy < 2 {
            return;
        }
        let h = self.pcpus[p].host;
        self.smt.corun_ns[h] += spent;
        let running = &doms[..tpc];
        if running.iter().flatten().any(|&d| running.iter().flatten().any(|&e| e != d)) {
            self.smt.cross_vm_ns[h] += spent;
            for &d in running.iter().flatten() {
                if running.iter().flatten().any(|&e| e != d) {
                    self.smt.shared_ns[d] += spent;
                }
            }
        }
    }

    /// Integrates every core's figures up to now (at the end of a run).
    pub(super) fn smt_close(&mut self) {
        if !self.smt.enabled() {
            return;
        }
        for p in (0..self.pcpus.len()).step_by(self.smt.threads_per_core) {
            self.smt_integrate(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_and_time_round_so_that_work_is_done() {
        let rate = (0.65 * RATE_ONE as f64).round() as u64;
        for work in [1, 2, 3, 999, 1_000_000, 123_456_789] {
            let t = time_for(work, rate);
            assert!(work_in(t, rate) >= work, "work {work} not done in {t} ns");
            assert!(work_in(t - 1, rate) < work, "work {work} done before {t} ns");
        }
        assert_eq!(work_in(1_000, RATE_ONE), 1_000);
        assert_eq!(time_for(1_000, RATE_ONE), 1_000);
        assert_eq!(work_in(1_000, RATE_ONE / 2), 500);
        assert_eq!(time_for(500, RATE_ONE / 2), 1_000);
    }
}
