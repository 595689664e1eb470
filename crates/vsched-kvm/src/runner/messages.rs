//! Messages between VMs on real vCPUs: the runner is the host's network.
//!
//! Ranks of one VM exchange messages through their memory (`guest_code::emit::messages`);
//! a message to a rank of another VM leaves its guest through an exit (`BackendEvent::Send`)
//! and the runner carries it. It arrives after the scenario's network takes it between VMs
//! of one host, `intra_host_latency + bytes / intra_host_bandwidth` (`[network]`, as the
//! simulator's `sim/network.rs` routes it without a driver domain, which real vCPUs do not
//! have), plus whatever the loop is late by (`scheduler_late_us`). On arrival the runner
//! raises the receiver's count in its guest memory (`Backend::deliver`), adds the message's
//! packets (`ceil(bytes / mtu)`) to the receiving VM's `rx_packets` — what `cvs-comm`
//! reads — and wakes the receiver if it halted in a blocking receive that the message ends,
//! as the interrupt of a virtual NIC would.
//!
//! Against the simulator: the sender's exit costs it what an exit costs here (tens of µs on
//! kvm_pvm, `real.ple_exit_us`), where the simulator charges a send nothing; messages are
//! delivered in the order of their arrival times, ties in the order they were sent.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use vsched::scenario::Scenario;
use vsched_engine::Time;
use vsched_model::{NetworkConfig, VcpuId, World};

use super::Runner;
use crate::backend::{Backend, GuestWait, VmSpec};
use crate::error::RealError;

/// A message on its way: when it arrives, the order it was sent in, its receiving vCPU, its
/// sending rank and its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Time,
    seq: u64,
    to: VcpuId,
    from: u32,
    packets: u64,
}

/// The ranks of the run's jobs and the messages between VMs on their way.
pub(super) struct Network {
    config: NetworkConfig,
    /// Per VM, its job; per job, the vCPU of each rank (`None`: an idle vCPU's).
    job_of: Vec<usize>,
    jobs: Vec<Vec<Option<VcpuId>>>,
    /// Per vCPU, its rank in its job.
    rank_of: Vec<u32>,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    sent: u64,
}

impl Network {
    pub(super) fn new(scenario: &Scenario, vms: &[VmSpec]) -> Network {
        let mut names: HashMap<&str, usize> = HashMap::new();
        let (mut job_of, mut jobs, mut rank_of) = (Vec::new(), Vec::<Vec<Option<VcpuId>>>::new(), Vec::new());
        for (d, (spec, vm)) in vms.iter().zip(&scenario.vms).enumerate() {
            let job = match &vm.job {
                Some(name) => *names.entry(name).or_insert_with(|| {
                    jobs.push(Vec::new());
                    jobs.len() - 1
                }),
                None => {
                    jobs.push(Vec::new());
                    jobs.len() - 1
                }
            };
            debug_assert!(job_of.len() == d);
            job_of.push(job);
            let ranks = &mut jobs[job];
            ranks.resize(ranks.len().max(spec.world), None);
            for i in 0..spec.guest.vcpus {
                let rank = spec.first_rank + i;
                rank_of.push(rank as u32);
                if i < vm.ranks.vcpus {
                    ranks[rank] = Some(spec.first_vcpu + i);
                }
            }
        }
        Network { config: scenario.network.clone(), job_of, jobs, rank_of, in_flight: BinaryHeap::new(), sent: 0 }
    }

    /// Messages sent so far.
    pub(super) fn sent(&self) -> u64 {
        self.sent
    }

    /// When the next message arrives.
    pub(super) fn next_arrival(&self) -> Option<Time> {
        self.in_flight.peek().map(|Reverse(m)| m.at)
    }

    fn take_due(&mut self, now: Time) -> Option<InFlight> {
        if self.next_arrival()? > now {
            return None;
        }
        self.in_flight.pop().map(|Reverse(m)| m)
    }
}

impl<B: Backend> Runner<'_, B> {
    /// vCPU `v` sent `bytes` to rank `to` of its job, in another VM: the message is on its way.
    pub(super) fn send(&mut self, v: VcpuId, to: u32, bytes: u64) -> Result<(), RealError> {
        let net = &mut self.network;
        let job = &net.jobs[net.job_of[self.vm_of[v]]];
        let Some(&Some(dst)) = job.get(to as usize) else {
            return Err(RealError::Backend(format!(
                "real vCPUs failed: vCPU {v} sent a message to rank {to}, which its job of {} ranks does not run",
                job.len()
            )));
        };
        let config = &net.config;
        let latency = if self.vm_of[dst] == self.vm_of[v] {
            config.shm_latency_ns + NetworkConfig::transfer_ns(bytes, config.shm_bandwidth_gbps)
        } else {
            config.intra_host_latency_ns + NetworkConfig::transfer_ns(bytes, config.intra_host_bandwidth_gbps)
        };
        let at = self.world.now().saturating_add(latency);
        let message = InFlight { at, seq: net.sent, to: dst, from: net.rank_of[v], packets: config.packets(bytes) };
        net.sent += 1;
        net.in_flight.push(Reverse(message));
        Ok(())
    }

    /// Messages that have arrived by `now` are delivered (module notes).
    pub(super) fn deliver_due(&mut self, now: Time) -> Result<(), RealError> {
        while let Some(m) = self.network.take_due(now) {
            self.late(m.at);
            self.backend.deliver(m.to, m.from);
            self.world.add_rx_packets(self.vm_of[m.to], m.packets);
            if self.halted[m.to] && self.backend.wait(m.to) == (GuestWait::Release { released: true }) {
                self.wake(m.to)?;
            }
        }
        Ok(())
    }
}
