//! What a run reports. Every figure is defined here, once.
//!
//! Per VM:
//! - `completion_s`: how long after its creation the VM's last thread exited (null for a
//!   never-ending workload, or if the run or the VM stopped first).
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
//!   the sum of all VMs' weights.
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
//! - `host`: the host it runs on (0 on a single host); `virtual_cluster`: the virtual
//!   cluster (parallel job across VMs) it belongs to, if any.
//! - `messages_received`: messages delivered to its vCPUs (from any rank, shared memory
//!   included); `rx_packets`: network packets among them (messages from other VMs, counted
//!   in MTU-sized packets), what seed 002's CVS reads.
//!
//! Per host: `utilization` (busy pCPU time over capacity), `frag_idle_s` (pCPU idle time
//! while at least one vCPU was runnable and waiting), `context_switches`, `ipis`,
//! `migrations`, `sched_invocations`, `ple_exits`, `co_launches` and `co_launches_per_s`
//! (co-scheduling launches over all VMs), `co_ipis` (the IPIs among `ipis` that were
//! co-scheduling signals), `fairness` and `policy_counters`.
//! `fairness` is Jain's index over the CPU-bound VMs (blocked less than 5% of their vCPU
//! time) of (share of the CPU those VMs received) / (share of their total weight): 1.0 when
//! CPU is split exactly by weight, lower otherwise; null if no VM is CPU-bound.
//! On a cluster, `hosts` lists these per host and `host` totals them: counts are summed,
//! `utilization` is over all pCPUs, `fairness` over all VMs (each VM's share measured on
//! its own host), and `policy_counters` are summed by name.
//!
//! Per virtual cluster (`virtual_clusters`): `completion_s`, from the creation of its first
//! VM to the exit of the last thread of its last VM (null unless every VM finished);
//! `vms` and `ranks`.
//!
//! Network (`network`, present when any message was sent): `messages`, `bytes`, `packets`
//! (delivered between VMs), `driver_passes` (message passes through a driver domain) and
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
pub struct VmMetrics {
    pub name: String,
    pub workload: String,
    #[serde(rename = "type")]
    pub vm_type: String,
    pub vcpus: usize,
    pub weight: u32,
    pub cap: u32,
    pub completion_s: Option<f64>,
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
    #[serde(skip)]
    pub blocked_fraction: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostMetrics {
    pub pcpus: usize,
    pub utilization: f64,
    pub frag_idle_s: f64,
    pub context_switches: u64,
    pub ipis: u64,
    pub migrations: u64,
    /// Time vCPUs spent refilling their caches when switched in.
    pub cache_refill_s: f64,
    pub sched_invocations: u64,
    pub ple_exits: u64,
    pub co_launches: u64,
    pub co_launches_per_s: f64,
    pub co_ipis: u64,
    pub fairness: Option<f64>,
    pub policy_counters: BTreeMap<String, u64>,
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
            fairness: weighted_fairness(vms),
            policy_counters,
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

/// Jain's fairness index of CPU received against weight, over the CPU-bound VMs.
pub fn weighted_fairness(vms: &[VmMetrics]) -> Option<f64> {
    let bound: Vec<&VmMetrics> = vms.iter().filter(|v| v.blocked_fraction < 0.05).collect();
    let cpu: f64 = bound.iter().map(|v| v.cpu_s).sum();
    let weight: f64 = bound.iter().map(|v| v.weight as f64).sum();
    if bound.is_empty() || cpu <= 0.0 || weight <= 0.0 {
        return None;
    }
    let x: Vec<f64> = bound.iter().map(|v| (v.cpu_s / cpu) / (v.weight as f64 / weight)).collect();
    let sum: f64 = x.iter().sum();
    let sum_sq: f64 = x.iter().map(|a| a * a).sum();
    Some(sum * sum / (x.len() as f64 * sum_sq))
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

    #[test]
    fn cdf_levels_run_from_0_to_1_in_5_percent_steps() {
        let levels: Vec<f64> = cdf_levels().collect();
        assert_eq!(levels.len(), CDF_QUANTILES);
        assert_eq!((levels[0], levels[1], levels[10], levels[20]), (0.0, 0.05, 0.5, 1.0));
    }
}
