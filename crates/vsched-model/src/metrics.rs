//! What a run reports. Every figure is defined here, once.
//!
//! Per VM:
//! - `completion_s`: how long after its creation the VM's last thread exited (null for a
//!   never-ending workload, or if the run or the VM stopped first).
//! - `finished`: whether its workload finished; null for a workload that never ends (a CPU
//!   hog, a server), false for one the end of the run, or of the VM, cut short. The tables
//!   and `vsched run` flag a false loudly: its figures describe a job that was not done.
//! - `created_s`, `destroyed_s`: when the VM was created (0 unless the scenario creates it
//!   later; null if the run ended before) and destroyed (null if never).
//! - `cpu_s`: time its vCPUs held a pCPU (including dispatch overheads).
//! - `spin_s`: the part of `cpu_s` spent spinning on locks or barriers (wasted).
//! - `steal_s`: time its vCPUs were runnable but not running (waiting in a run queue).
//! - `lock_holder_preemptions`: times a vCPU was descheduled while holding a lock.
//! - `lock_waiter_preemptions`: unlocks that left a spinlock to a next waiter in line that
//!   was not executing (its vCPU preempted or halted, or switched out by its guest): a
//!   ticket lock's next ticket, which then owns the lock and keeps it idle until it runs; an
//!   MCS or paravirtual queue's head (halted or preempted), which the lock then waits for
//!   (a paravirtual lock may be stolen meanwhile); a preemptable ticket lock's next ticket,
//!   which the others pass once their timeouts run out. Test-and-set locks and mutexes
//!   count none.
//! - `ple_exits`: pause-loop exits.
//! - `ipi_syncs`: guest IPI rounds (`ipi_sync`, e.g. TLB shootdowns) that interrupted at
//!   least one other vCPU; the sender's wait for acknowledgements is part of `spin_s`.
//! - `pv_halts`, `pv_kicks`: paravirtual spinlock waiters that halted (after spinning their
//!   threshold, or early behind a halted waiter), and kicks of halted waiters by unlocks.
//! - `spin_s` includes a mutex waiter's optimistic spinning, not its sleep.
//! - `pv_tlb_flushes_deferred`: preempted vCPUs a shootdown skipped with the paravirtual TLB
//!   flush (each flushes at its next entry); `pv_sched_yields`: `KVM_HC_SCHED_YIELD`
//!   hypercalls its vCPUs made after an IPI to a preempted vCPU (what the host did with them is
//!   in the policy's counters).
//! - `preempt_delays`, `preempt_delays_completed`, `preempt_delays_expired`: reschedules put
//!   off because a vCPU was inside a marked critical section, those whose section ended
//!   within the bound, and those the bound cut short (`sim/preempt_delay.rs`).
//! - `wake_latency_us_mean`: mean time from a wake-up of a thread to running (its guest
//!   timer's wake-ups are not counted here).
//! - `guest_ticks`: tick interrupts its guest kernel took on running vCPUs (one per vCPU
//!   preempted across a tick, at entry); `timer_wakes`: halted vCPUs woken by their guest
//!   kernel's timer (`sim/guest_kernel.rs`).
//! - `cpu_share`: `cpu_s` over host capacity (pCPUs x elapsed); `weight_share`: weight over
//!   the sum of all VMs' weights on its host.
//! - `entitled_share`: its entitlement over host capacity, beside `cpu_share`: the CPU a
//!   weighted max-min fair split of its host would have given it for what it asked
//!   ([`crate::entitlement`]: instant by instant, it asks for a pCPU per vCPU running or
//!   runnable, at most its cap; VMs asking for less than their weight's share get all they
//!   ask, the others split the rest by weight).
//! - `requests`, `throughput_rps`, `latency_ms_mean`, `latency_ms_p99`: for serving
//!   workloads; a request's latency runs from the I/O completion that delivers it to the end
//!   of its processing. `requests` and the mean are exact; p99 is histogram-based (below).
//! - `co_launches`: co-scheduling launches of this VM, as the policy reports them (seed 004
//!   Fig. 5 counts these per second).
//! - `costarts`, `costart_skew_us_*`: co-start skew (seed 004 Fig. 6, "the scheduling time
//!   edge difference" between sibling vCPUs), per co-scheduling operation. A launch (see
//!   `co_launches`) at time t makes each sibling waiting in a run queue pending; its next
//!   switch-in at s is a co-start with skew `s - t`. Siblings already running at the launch,
//!   blocked ones and the launcher itself are not counted; a sibling still pending at a later
//!   launch keeps the first one. Policies that launch no co-scheduling (Credit, CFS) have no
//!   co-starts. `costarts` counts them; mean, median and p99 are in µs, and
//!   `costart_skew_us_quantiles` gives the distribution as 21 quantiles (p0, p5, ..., p100),
//!   enough to draw the paper's CDF. The count and mean are exact; the quantiles are
//!   histogram-based (below), p0 and p100 exact. Under a gang scheduler the skew is about
//!   the IPI latency; under boost co-scheduling it is however long the boosted sibling waits
//!   for its pCPU's current vCPU to give way.
//!
//! Quantiles (`latency_ms_p99`, `costart_skew_us_p50`, `_p99`, `_quantiles`) are nearest-rank
//! (quantile q of n samples is the `ceil(q n)`-th smallest, at least the first), read from a
//! log-bucketed histogram ([`crate::histogram`]) so that memory does not grow with the run:
//! the value reported is the midpoint of the histogram bucket holding that sample, clamped to
//! the smallest and largest sample. It is exact below 2,048 ns and otherwise within 1/2048
//! (0.049 %) of the true nearest-rank quantile; the smallest and largest samples (p0, p100)
//! are exact.
//! - `halt_attempted_poll`, `halt_successful_poll`, `halt_poll_invalid`, `halt_poll_success_s`,
//!   `halt_poll_fail_s`, `guest_halt_polls`, `guest_halt_successful_polls`,
//!   `guest_halt_poll_s`: its halt polls, in the host and in its guest ([`HaltPollMetrics`]);
//!   only for a VM that may poll. A wake-up a poll caught counts in `wake_latency_us_mean`
//!   with latency 0 (the vCPU never left its pCPU).
//! - `host`: the host it runs on (0 on a single host); `virtual_cluster`: the virtual
//!   cluster (parallel job across VMs) it belongs to, if any.
//! - `messages_received`: messages delivered to its vCPUs (from any rank, shared memory
//!   included); `rx_packets`: network packets among them (messages from other VMs, counted
//!   in MTU-sized packets), what seed 002's CVS reads.
//! - `policy_metrics`: figures the policy keeps per VM, by name (only present when the policy
//!   keeps any): `relaxed` gives esxtop's `%CSTP` and `%RDY` and its skew (docs/policies.md).
//!
//! Per host: `utilization` (busy pCPU time over capacity), `frag_idle_s` (pCPU idle time
//! while at least one vCPU was runnable and waiting), `context_switches`, `ipis`,
//! `migrations`, `sched_invocations`, `ple_exits`, `co_launches` and `co_launches_per_s`
//! (co-scheduling launches over all VMs), `co_ipis` (the IPIs among `ipis` that were
//! co-scheduling signals), `fairness` and `policy_counters`.
//!
//! SMT hosts only (`threads_per_core` > 1; absent otherwise), see `sim/smt.rs`:
//! `smt_corun_s` (summed over cores, time two or more of a core's hardware threads ran
//! vCPUs), `smt_cross_vm_s` (likewise, time a core's threads ran vCPUs of two or more
//! domains); per VM, `core_shared_s` (its vCPUs' time beside another domain's vCPU on one
//! core, summed over its vCPUs).
//!
//! `fairness` is Jain's index (Jain, Chiu & Hawe, DEC-TR-301, 1984) of each VM's CPU
//! received over its entitlement, `x = cpu_share / entitled_share`, with each VM counted in
//! proportion to its entitlement: `(Σ e x)² / (Σ e · Σ e x²)` for entitlements `e`. 1.0 when
//! every VM got the same fraction of its entitlement (all of it, on a busy host), lower
//! otherwise: three equal VMs that all asked for the whole host and got 46.5 %, 4.3 % and
//! 49.2 % of it read 0.72. Why these choices:
//! - Against entitlement, not weight: a VM that blocks by itself and gets what it asks for
//!   is treated fairly although it received less than its weight's share; one kept waiting
//!   in a run queue is not. (Before issue 19 the index was over weight and left out every VM
//!   blocked 5 % of its time or more, starved ones included, so it read 0.999 beside a VM
//!   given 4.3 % of the host.)
//! - Counted by entitlement: a domain that asked for a thousandth of a pCPU-second weighs a
//!   thousandth of one that asked for a pCPU-second, so the wake-ups of idle vCPUs do not
//!   swing the index. With equal entitlements it is Jain's plain index; in general it is
//!   Jain's index over pCPU-seconds of entitlement, each one a user.
//! - The driver domain (Domain-0) counts like any VM: Xen schedules it by weight like a
//!   guest (Credit's `csched_alloc_domdata` gives every domain, dom0 included,
//!   `CSCHED_DEFAULT_WEIGHT` = 256, as vsched does), and a dom0 kept waiting delays every
//!   guest's I/O.
//! - Time a VM's vCPUs waited counts as asked for, so a VM served late (e.g. a web server
//!   whose requests wait behind hogs) lowers the index even if it got its work done: in the
//!   fluid split it would have run at once. `steal_s` and the latencies say how late.
//! - An equal shortfall for everyone (pCPUs idle while vCPUs wait, as under gang
//!   scheduling) is fair by this index; `utilization` and `frag_idle_s` measure it.
//!
//! `fairness` is null if no VM asked for CPU.
//! On a cluster, `hosts` lists these per host and `host` totals them: counts are summed,
//! `utilization` is over all pCPUs, `fairness` over all VMs (each VM's share measured on
//! its own host), and `policy_counters` are summed by name.
//!
//! Per virtual cluster (`virtual_clusters`): `completion_s`, from the creation of its first
//! VM to the exit of the last thread of its last VM (null unless every VM finished);
//! `vms` and `ranks`.
//!
//! Network (`network`, present when any message was sent): `messages`, `bytes`, `packets`
//! (delivered between VMs), `driver_passes` (message passes through a driver domain or a
//! KVM host's vhost worker) and
//! `message_latency_us_mean` (from the send to the delivery into the receiver's mailbox).
//!
//! Disk (`io`, present when a disk request was issued): `disk_requests` and `disk_bytes` issued; `disk_completed`;
//! `disk_latency_ms_mean`, from the issue to the wake-up of the issuing vCPU (its wait for a
//! pCPU after that is not included); `disk_wait_ms_mean`, the time a request that reached
//! the disk spent queued there behind others; `disk_busy_s`, the disks' service time of the
//! requests they took, summed over hosts (one still in service at the end counts whole).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(Default))]
pub struct VmMetrics {
    pub name: String,
    pub workload: String,
    #[serde(rename = "type")]
    pub vm_type: String,
    pub vcpus: usize,
    pub weight: u32,
    pub cap: u32,
    pub completion_s: Option<f64>,
    pub finished: Option<bool>,
    pub created_s: Option<f64>,
    pub destroyed_s: Option<f64>,
    pub cpu_s: f64,
    pub spin_s: f64,
    pub steal_s: f64,
    pub spin_share: Option<f64>,
    pub lock_holder_preemptions: u64,
    pub lock_waiter_preemptions: u64,
    pub ple_exits: u64,
    pub wake_latency_us_mean: Option<f64>,
    pub cpu_share: f64,
    pub weight_share: f64,
    pub entitled_share: f64,
    pub requests: u64,
    pub throughput_rps: Option<f64>,
    pub latency_ms_mean: Option<f64>,
    pub latency_ms_p99: Option<f64>,
    pub co_launches: u64,
    pub costarts: u64,
    pub costart_skew_us_mean: Option<f64>,
    pub costart_skew_us_p50: Option<f64>,
    pub costart_skew_us_p99: Option<f64>,
    pub costart_skew_us_quantiles: Option<Vec<f64>>,
    pub ipi_syncs: u64,
    pub pv_halts: u64,
    pub pv_kicks: u64,
    pub pv_tlb_flushes_deferred: u64,
    pub pv_sched_yields: u64,
    pub preempt_delays: u64,
    pub preempt_delays_completed: u64,
    pub preempt_delays_expired: u64,
    pub guest_ticks: u64,
    pub timer_wakes: u64,
    pub host: usize,
    pub virtual_cluster: Option<String>,
    pub messages_received: u64,
    pub rx_packets: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_shared_s: Option<f64>,
    /// The policy's own figures for this VM (`Policy::vm_metrics`), e.g. `relaxed`'s `%CSTP`;
    /// left out of the report when the policy gives none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policy_metrics: BTreeMap<String, f64>,
    /// Halt polling, present only for a VM that may poll (`HaltPollMetrics`).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub halt_poll: Option<HaltPollMetrics>,
}

/// A VM's halt polls (`sim/halt_poll.rs`), in KVM's stat names where KVM has them
/// (`struct kvm_vcpu_stat_generic`, include/linux/kvm_host.h), summed over its vCPUs.
/// Reported for a VM on a host with `halt_poll_ns` > 0 or with `guest_haltpoll`; absent
/// otherwise, so reports of runs without polling are unchanged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HaltPollMetrics {
    /// Host polls started (`halt_attempted_poll`).
    pub halt_attempted_poll: u64,
    /// Host polls that ended in a wake-up, the vCPU never blocked (`halt_successful_poll`).
    pub halt_successful_poll: u64,
    /// Successful polls ended by an invalid wake-up (`halt_poll_invalid`): always 0 on x86,
    /// where every wake-up is valid.
    pub halt_poll_invalid: u64,
    /// Time spent in successful and in failed host polls (`halt_poll_success_ns`,
    /// `halt_poll_fail_ns`, in seconds).
    pub halt_poll_success_s: f64,
    pub halt_poll_fail_s: f64,
    /// Guest polls (the haltpoll governor's `poll_idle`), those a wake-up ended, and their
    /// time (wall time, the guest's clock).
    pub guest_halt_polls: u64,
    pub guest_halt_successful_polls: u64,
    pub guest_halt_poll_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostMetrics {
    pub pcpus: usize,
    pub utilization: f64,
    pub frag_idle_s: f64,
    pub context_switches: u64,
    pub ipis: u64,
    pub migrations: u64,
    /// Time vCPUs spent refilling caches: at switch-in, and when a running vCPU starts
    /// touching another footprint (a guest thread switch, a thread resumed in a timer wake).
    pub cache_refill_s: f64,
    pub sched_invocations: u64,
    pub ple_exits: u64,
    pub co_launches: u64,
    pub co_launches_per_s: f64,
    pub co_ipis: u64,
    pub fairness: Option<f64>,
    pub policy_counters: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt_corun_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt_cross_vm_s: Option<f64>,
}

impl HostMetrics {
    /// The cluster-wide totals of per-host figures (see the module notes).
    pub fn total(hosts: &[HostMetrics], vms: &[VmMetrics], sim_s: f64) -> HostMetrics {
        let sum = |f: fn(&HostMetrics) -> u64| hosts.iter().map(f).sum::<u64>();
        let pcpus: usize = hosts.iter().map(|h| h.pcpus).sum();
        let mut policy_counters = BTreeMap::new();
        for h in hosts {
            for (k, v) in &h.policy_counters {
                *policy_counters.entry(k.clone()).or_insert(0) += v;
            }
        }
        let co_launches = sum(|h| h.co_launches);
        let sum_some = |f: fn(&HostMetrics) -> Option<f64>| hosts.iter().map(f).sum::<Option<f64>>();
        HostMetrics {
            pcpus,
            utilization: hosts.iter().map(|h| h.utilization * h.pcpus as f64).sum::<f64>() / pcpus.max(1) as f64,
            frag_idle_s: hosts.iter().map(|h| h.frag_idle_s).sum(),
            context_switches: sum(|h| h.context_switches),
            ipis: sum(|h| h.ipis),
            migrations: sum(|h| h.migrations),
            cache_refill_s: hosts.iter().map(|h| h.cache_refill_s).sum(),
            sched_invocations: sum(|h| h.sched_invocations),
            ple_exits: sum(|h| h.ple_exits),
            co_launches,
            co_launches_per_s: if sim_s > 0.0 { co_launches as f64 / sim_s } else { 0.0 },
            co_ipis: sum(|h| h.co_ipis),
            fairness: fairness(vms),
            policy_counters,
            smt_corun_s: sum_some(|h| h.smt_corun_s),
            smt_cross_vm_s: sum_some(|h| h.smt_cross_vm_s),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterMetrics {
    pub name: String,
    pub workload: String,
    pub vms: usize,
    pub ranks: usize,
    pub completion_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NetworkMetrics {
    pub messages: u64,
    pub bytes: u64,
    pub packets: u64,
    pub driver_passes: u64,
    pub message_latency_us_mean: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IoMetrics {
    pub disk_requests: u64,
    pub disk_bytes: u64,
    pub disk_completed: u64,
    pub disk_latency_ms_mean: Option<f64>,
    pub disk_wait_ms_mean: Option<f64>,
    pub disk_busy_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMetrics {
    pub sim_s: f64,
    pub events: u64,
    pub vms: Vec<VmMetrics>,
    /// The host, or on a cluster the totals over `hosts`.
    pub host: HostMetrics,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostMetrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkMetrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoMetrics>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virtual_clusters: Vec<ClusterMetrics>,
}

/// The host `fairness` figure: Jain's index of each VM's CPU received over its entitlement,
/// each VM counted in proportion to its entitlement (see the module notes). Null if no VM
/// was entitled to CPU or none received any.
pub fn fairness(vms: &[VmMetrics]) -> Option<f64> {
    let entitled: Vec<&VmMetrics> = vms.iter().filter(|v| v.entitled_share > 0.0).collect();
    let received_over_entitled: Vec<f64> = entitled.iter().map(|v| v.cpu_share / v.entitled_share).collect();
    let weights: Vec<f64> = entitled.iter().map(|v| v.entitled_share).collect();
    jain_index(&received_over_entitled, &weights)
}

/// Jain's fairness index of allocations `x` (Jain, Chiu & Hawe, "A Quantitative Measure of
/// Fairness and Discrimination for Resource Allocation in Shared Computer Systems",
/// DEC-TR-301, 1984), `(Σx)² / (n Σx²)`, with user i counted `weights[i]` times:
/// `(Σ wx)² / (Σw Σ wx²)`. It is 1 when all x are equal, and k/n when k of n equally
/// weighted users get equal amounts and the others nothing. Null when every x is zero.
pub fn jain_index(x: &[f64], weights: &[f64]) -> Option<f64> {
    let weighted_sum: f64 = x.iter().zip(weights).map(|(x, w)| w * x).sum();
    let weighted_sum_sq: f64 = x.iter().zip(weights).map(|(x, w)| w * x * x).sum();
    let weight: f64 = weights.iter().sum();
    (weighted_sum_sq > 0.0).then(|| weighted_sum * weighted_sum / (weight * weighted_sum_sq))
}

/// Quantiles in 5 % steps from p0 to p100, for CDF figures.
pub const CDF_QUANTILES: usize = 21;

/// The levels of the `CDF_QUANTILES` quantiles: 0, 0.05, ..., 1.
pub fn cdf_levels() -> impl Iterator<Item = f64> {
    (0..CDF_QUANTILES).map(|i| i as f64 / (CDF_QUANTILES - 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::entitlement::EntitlementMeter;

    const S: u64 = 1_000_000_000;

    /// A VM's figures as `collect` builds them: CPU received and the meter's entitlement,
    /// both as shares of a host of `pcpus` pCPUs over `sim_s` seconds.
    fn vm(cpu_s: f64, meter: &EntitlementMeter, index: usize, pcpus: f64, sim_s: f64) -> VmMetrics {
        let capacity = pcpus * sim_s;
        VmMetrics {
            cpu_s,
            cpu_share: cpu_s / capacity,
            entitled_share: meter.entitled_ns(index) / 1e9 / capacity,
            ..VmMetrics::default()
        }
    }

    /// Three 4-vCPU VMs of equal weight on 4 pCPUs, all asking for CPU for 10 s.
    fn three_busy_vms() -> EntitlementMeter {
        let mut meter = EntitlementMeter::new(4, [(256, 0); 3]);
        for index in 0..3 {
            for _ in 0..4 {
                meter.start_asking(0, index);
            }
        }
        meter.advance(10 * S);
        meter
    }

    #[test]
    fn a_starved_vm_pulls_the_index_down() {
        // The case: 46.5 %, 4.3 % and 49.2 % of the host for three equal VMs that
        // all asked for it. The old index left out the starved VM and read 0.999.
        let meter = three_busy_vms();
        let vms: Vec<VmMetrics> =
            [0.465, 0.043, 0.492].iter().enumerate().map(|(i, share)| vm(share * 40.0, &meter, i, 4.0, 10.0)).collect();
        let index = fairness(&vms).unwrap();
        // x = 1.395, 0.129, 1.476: (Σx)² / (3 Σx²) = 9 / (3 × 4.141).
        assert!((index - 0.7245).abs() < 1e-3, "{index}");
    }

    #[test]
    fn an_equal_split_of_a_busy_host_is_fair() {
        let meter = three_busy_vms();
        let vms: Vec<VmMetrics> = (0..3).map(|i| vm(40.0 / 3.0, &meter, i, 4.0, 10.0)).collect();
        assert!((fairness(&vms).unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_vm_that_blocks_and_gets_what_it_asks_for_is_treated_fairly() {
        // VM 0 asks with all 4 vCPUs for the first half, then blocks: its entitlement is a
        // third of the host for 5 s (6.67 pCPU-s), the others' a third then a half (16.67).
        let mut meter = EntitlementMeter::new(4, [(256, 0); 3]);
        for index in 0..3 {
            for _ in 0..4 {
                meter.start_asking(0, index);
            }
        }
        for _ in 0..4 {
            meter.stop_asking(5 * S, 0);
        }
        meter.advance(10 * S);
        let received = [4.0 / 3.0 * 5.0, 4.0 / 3.0 * 5.0 + 10.0, 4.0 / 3.0 * 5.0 + 10.0];
        let vms: Vec<VmMetrics> =
            received.iter().enumerate().map(|(i, &cpu_s)| vm(cpu_s, &meter, i, 4.0, 10.0)).collect();
        assert!((fairness(&vms).unwrap() - 1.0).abs() < 1e-9);
        // Splitting by weight alone (its cpu share 17 % against a third) would call this unfair.
        assert!(vms[0].cpu_share < 0.17);
    }

    #[test]
    fn weights_set_the_entitlement() {
        // Weights 1:2 on 3 pCPUs: entitled to 1 and 2 pCPUs. An even split is unfair.
        let mut meter = EntitlementMeter::new(3, [(256, 0), (512, 0)]);
        for _ in 0..4 {
            meter.start_asking(0, 0);
            meter.start_asking(0, 1);
        }
        meter.advance(10 * S);
        let by_weight = [vm(10.0, &meter, 0, 3.0, 10.0), vm(20.0, &meter, 1, 3.0, 10.0)];
        assert!((fairness(&by_weight).unwrap() - 1.0).abs() < 1e-12);
        let even = [vm(15.0, &meter, 0, 3.0, 10.0), vm(15.0, &meter, 1, 3.0, 10.0)];
        // x = 1.5, 0.75 counted 1 and 2 times: (1.5 + 1.5)² / (3 × (2.25 + 1.125)) = 8/9.
        assert!((fairness(&even).unwrap() - 8.0 / 9.0).abs() < 1e-12);
    }

    #[test]
    fn a_capped_vm_that_gets_its_cap_is_treated_fairly() {
        // 2 pCPUs; VM 0 capped at 50 % of one pCPU: entitled to 0.5 pCPU, VM 1 to 1.5.
        let mut meter = EntitlementMeter::new(2, [(256, 50), (256, 0)]);
        for _ in 0..2 {
            meter.start_asking(0, 0);
            meter.start_asking(0, 1);
        }
        meter.advance(10 * S);
        let capped = [vm(5.0, &meter, 0, 2.0, 10.0), vm(15.0, &meter, 1, 2.0, 10.0)];
        assert!((fairness(&capped).unwrap() - 1.0).abs() < 1e-12);
        let cap_ignored = [vm(10.0, &meter, 0, 2.0, 10.0), vm(10.0, &meter, 1, 2.0, 10.0)];
        // x = 2, 2/3 counted 1 and 3 times: (2 + 2)² / (4 × (4 + 4/3)) = 0.75.
        assert!((fairness(&cap_ignored).unwrap() - 0.75).abs() < 1e-12);
    }

    #[test]
    fn a_vm_that_asked_for_little_counts_little() {
        // Beside three VMs that got exactly their due, a fourth entitled to a thousandth of a
        // pCPU-second that received half of it: the index barely moves (unweighted, it would
        // read 0.94 for that thousandth).
        let mut meter = EntitlementMeter::new(4, [(256, 0); 4]);
        for index in 0..3 {
            for _ in 0..4 {
                meter.start_asking(0, index);
            }
        }
        meter.start_asking(0, 3);
        meter.stop_asking(1_000_000, 3);
        meter.advance(10 * S);
        let entitled = |i: usize| meter.entitled_ns(i) / 1e9;
        let received = [entitled(0), entitled(1), entitled(2), entitled(3) / 2.0];
        let vms: Vec<VmMetrics> =
            received.iter().enumerate().map(|(i, &cpu_s)| vm(cpu_s, &meter, i, 4.0, 10.0)).collect();
        let index = fairness(&vms).unwrap();
        assert!(index < 1.0 && index > 0.9999, "{index}");
    }

    #[test]
    fn vms_that_never_asked_are_left_out_and_no_vm_means_no_index() {
        let meter = EntitlementMeter::new(4, [(256, 0)]);
        assert_eq!(fairness(&[vm(0.0, &meter, 0, 4.0, 10.0)]), None);
        assert_eq!(fairness(&[]), None);
        let busy = three_busy_vms();
        let mut vms: Vec<VmMetrics> = (0..3).map(|i| vm(40.0 / 3.0, &busy, i, 4.0, 10.0)).collect();
        vms.push(vm(0.0, &meter, 0, 4.0, 10.0));
        assert!((fairness(&vms).unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn cdf_levels_run_from_0_to_1_in_5_percent_steps() {
        let levels: Vec<f64> = cdf_levels().collect();
        assert_eq!(levels.len(), CDF_QUANTILES);
        assert_eq!((levels[0], levels[1], levels[10], levels[20]), (0.0, 0.05, 0.5, 1.0));
    }
}
