//! Messages between guests, and the driver domain that carries them.
//!
//! Guests exchange messages between ranks of a job (a virtual cluster, or one VM alone):
//! `send` is asynchronous, `recv` takes the next message from one source rank, busy-polling
//! (user mode, no PLE) or blocking. A message takes one of three routes:
//! - ranks of one VM: shared memory, `shm_latency + bytes / shm_bandwidth`;
//! - VMs of one host: the software bridge, `intra_host_latency + bytes / intra_host_bandwidth`,
//!   after one pass through the host's driver domain if it has one;
//! - VMs of different hosts: the sender's link, FIFO (a message starts when the link is free
//!   and holds it for `bytes / bandwidth`), then `latency` to the receiving host; with a
//!   driver domain, one pass through the sender's (transmit) and one through the receiver's
//!   (receive).
//!
//! On a KVM host with host threads (`host_threads`) each VM's vhost-net worker is its
//! backend: a message to another VM passes the sender's worker (transmit), the bridge or the
//! wire, then the receiver's worker (receive), `vhost_packet_ns` per packet each time.
//!
//! A message is carried as one unit; its packets (`ceil(bytes / mtu)`, at least one) only set
//! the driver domain's work and the receiving VM's `rx_packets`. The receiving NIC does not
//! serialize (no incast contention).
//!
//! # The driver domain (dom0)
//! Xen's network I/O goes through dom0's netback, and its block I/O through dom0's blkback
//! (`disk`); the hypervisor schedules dom0 like any VM. A host's driver domain is a VM whose
//! vCPUs run `NetServe`: take the next pass from the host's backlog (a message, or a disk
//! request), spend its CPU time on it (`dom0_packet_ns` per packet of a message; no progress
//! elsewhere while it waits for a pCPU), forward it, repeat; with an empty backlog a vCPU
//! blocks, and a new pass wakes one blocked vCPU at once (an event-channel notification,
//! which goes through the policy's `wake`: Credit boosts the vCPU, and the pCPU it tickles
//! hears of it one IPI latency later). Whichever
//! dom0 vCPU is free takes the next pass, as any dom0 vCPU can run netback's and blkback's
//! work. Before a pass a vCPU serves the timer wake-ups it owes (`disk`).

use vsched_engine::Time;

use super::config::NetworkConfig;
use super::events::Ev;
use super::host_threads::Backend;
use super::interpret::Step;
use super::state::{Core, ThreadState};
use super::RunError;
use crate::domain::VcpuState;
use crate::guest::BarrierWait;
use crate::ids::{DomId, ThreadId, VcpuId};
use crate::trace::{FlowKind, Track};

/// One unit of driver-domain work: a message pass, a disk request's submission or
/// completion, a client's request received for a thread, or a reply's packets sent
/// (`client`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pass {
    Net(u32),
    Disk(u32),
    ClientRx(ThreadId),
    ClientTx(u64),
}

/// Where a message is on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Waiting for, or in, the sending host's driver domain.
    Transmit,
    /// Waiting for, or in, the driver domain of the host of both VMs.
    Bridge,
    /// On the wire to the receiving host.
    Wire,
    /// Waiting for, or in, the receiving host's driver domain.
    Receive,
    /// Travelling to the receiving vCPU (shared memory, bridge or last hop).
    Deliver,
}

pub(super) struct Msg {
    pub(super) src: ThreadId,
    pub(super) dst: ThreadId,
    pub(super) bytes: u64,
    pub(super) packets: u64,
    pub(super) sent_at: Time,
    pub(super) stage: Stage,
}

/// Network-wide tallies.
#[derive(Default)]
pub(super) struct NetStats {
    pub(super) messages: u64,
    pub(super) bytes: u64,
    pub(super) packets: u64,
    pub(super) driver_passes: u64,
    pub(super) delivered: u64,
    pub(super) latency_sum_ns: Time,
}

impl Core {
    /// The host thread `t`'s VM runs on.
    pub(super) fn host_of(&self, t: ThreadId) -> usize {
        self.doms[self.threads[t].dom].host
    }

    /// The thread `v` runs sends `bytes` to rank `to` of its job.
    pub(super) fn send(&mut self, v: VcpuId, to: u32, bytes: u64) {
        let now = self.now();
        let src = self.vcpus[v].curr;
        let d = self.threads[src].dom;
        let ranks = &self.jobs[self.doms[d].job];
        let Some(&dst) = ranks.get(to as usize) else {
            let (name, world) = (&self.doms[d].info.name, ranks.len());
            self.error.get_or_insert(RunError::Workload(format!(
                "guest error: VM {name:?} sends to rank {to}, but its job has {world} ranks"
            )));
            return;
        };
        self.net.messages += 1;
        self.net.bytes += bytes;
        let packets = self.network.packets(bytes);
        let msg = Msg { src, dst, bytes, packets, sent_at: now, stage: Stage::Deliver };
        let m = self.msgs.insert(msg);
        self.with_trace(|t| t.flow_sent(FlowKind::Message, (m as usize, 0), Track::Vcpu(v), now));
        let (from_host, to_host) = (self.host_of(src), self.host_of(dst));
        if self.threads[dst].dom == d {
            let net = &self.network;
            let at = now + net.shm_latency_ns + NetworkConfig::transfer_ns(bytes, net.shm_bandwidth_gbps);
            self.post(at, Ev::Net { m });
        } else if from_host == to_host {
            match self.net_backend(d) {
                // One driver domain serves both VMs: one pass, then the bridge.
                Some(Backend::Driver(h)) => self.queue_msg(m, Stage::Bridge, Backend::Driver(h)),
                // The sender's vhost worker transmits, the receiver's receives (`Wire`).
                Some(b) => self.queue_msg(m, Stage::Transmit, b),
                None => self.over_bridge(m),
            }
        } else if let Some(b) = self.net_backend(d) {
            self.queue_msg(m, Stage::Transmit, b);
        } else {
            self.onto_wire(m);
        }
    }

    /// Queues message `m` for backend `b`, at `stage`.
    fn queue_msg(&mut self, m: u32, stage: Stage, b: Backend) {
        self.msgs[m].stage = stage;
        self.queue_pass(Pass::Net(m), b);
    }

    /// Queues a pass for backend `b` and wakes it if it waits for work.
    pub(super) fn queue_pass(&mut self, pass: Pass, b: Backend) {
        match b {
            Backend::Driver(h) => self.queue_driver_pass(pass, h),
            Backend::Thread { h, io } => self.queue_io_pass(pass, h, io),
        }
    }

    /// Queues a pass for host `h`'s driver domain and wakes one of its idle vCPUs.
    fn queue_driver_pass(&mut self, pass: Pass, h: usize) {
        self.hosts[h].backlog.push_back(pass);
        let driver = self.hosts[h].driver.expect("a host with a backlog has a driver");
        let idle = self.doms[driver].threads.clone().find(|&u| self.threads[u].state == ThreadState::BlockedNet);
        if let Some(t) = idle {
            // An event-channel notification: Xen marks the event pending and wakes the blocked
            // vCPU at once, on the notifier's pCPU (`evtchn_set_pending` -> `vcpu_unblock`,
            // xen/common/event_channel.c, 4.0); the policy's wake then tickles a pCPU, and
            // that reschedule IPI is the notification's only latency.
            self.threads[t].state = ThreadState::Ready;
            let now = self.now();
            self.post(now, Ev::Wake { t });
        }
    }

    /// A backend finished its pass over message `m`.
    fn forward(&mut self, m: u32) {
        match self.msgs[m].stage {
            // Only a VM's vhost worker transmits to a VM of its own host (a driver domain
            // bridges in one pass): over the bridge to the receiver's.
            Stage::Transmit if self.host_of(self.msgs[m].src) == self.host_of(self.msgs[m].dst) => self.bridge_hop(m),
            Stage::Transmit => self.onto_wire(m),
            Stage::Bridge => self.over_bridge(m),
            Stage::Receive => self.deliver(m),
            Stage::Wire | Stage::Deliver => unreachable!("a driver domain only holds messages in its stages"),
        }
    }

    /// From one VM to another on the same host, after any driver-domain pass.
    fn over_bridge(&mut self, m: u32) {
        let net = &self.network;
        let bytes = self.msgs[m].bytes;
        let at =
            self.now() + net.intra_host_latency_ns + NetworkConfig::transfer_ns(bytes, net.intra_host_bandwidth_gbps);
        self.msgs[m].stage = Stage::Deliver;
        self.post(at, Ev::Net { m });
    }

    /// Over the bridge to the receiving VM's vhost worker, which receives it when it arrives
    /// (the `Wire` stage's end).
    fn bridge_hop(&mut self, m: u32) {
        let net = &self.network;
        let bytes = self.msgs[m].bytes;
        let at =
            self.now() + net.intra_host_latency_ns + NetworkConfig::transfer_ns(bytes, net.intra_host_bandwidth_gbps);
        self.msgs[m].stage = Stage::Wire;
        self.post(at, Ev::Net { m });
    }

    /// Onto the sending host's link: FIFO behind what it is already sending.
    fn onto_wire(&mut self, m: u32) {
        let h = self.host_of(self.msgs[m].src);
        let msg = &mut self.msgs[m];
        msg.stage = Stage::Wire;
        let start = self.hosts[h].link_free_at.max(self.queue.now());
        let done = start + NetworkConfig::transfer_ns(msg.bytes, self.network.bandwidth_gbps);
        self.hosts[h].link_free_at = done;
        let at = done + self.network.latency_ns;
        self.post(at, Ev::Net { m });
    }

    /// A timed stage of message `m` ended.
    pub(super) fn net_stage_done(&mut self, m: u32) {
        match self.msgs[m].stage {
            Stage::Wire => match self.net_backend(self.threads[self.msgs[m].dst].dom) {
                Some(b) => self.queue_msg(m, Stage::Receive, b),
                None => self.deliver(m),
            },
            Stage::Deliver => self.deliver(m),
            Stage::Transmit | Stage::Bridge | Stage::Receive => unreachable!("driver stages end in NetServe"),
        }
    }

    /// Message `m` reaches its receiver: it ends a matching wait, or waits in the mailbox.
    fn deliver(&mut self, m: u32) {
        let now = self.now();
        self.msgs.release(m);
        let Msg { src, dst, packets, sent_at, .. } = self.msgs[m];
        let to = Track::Vcpu(self.threads[dst].vcpu);
        self.with_trace(|t| t.flow_arrived(FlowKind::Message, (m as usize, 0), to, now));
        self.net.latency_sum_ns += now - sent_at;
        self.net.delivered += 1;
        let (from_dom, to_dom) = (self.threads[src].dom, self.threads[dst].dom);
        let dom = &mut self.doms[to_dom];
        dom.messages_received += 1;
        if from_dom != to_dom {
            dom.info.rx_packets += packets;
            self.net.packets += packets;
        }
        let world = self.jobs[dom.job].len();
        let rank = self.threads[src].rank;
        let th = &mut self.threads[dst];
        match th.state {
            ThreadState::SpinRecv { from, .. } | ThreadState::BlockedRecv { from } if from == rank => {
                self.release_waiter(dst);
            }
            _ if self.vcpus[th.vcpu].state == VcpuState::Offline => {} // its VM is gone
            _ => {
                th.mailbox.put(rank, world);
            }
        }
    }

    /// `recv(from, wait)`: take a message from rank `from` if one waits in the mailbox,
    /// else busy-poll (user mode, no PLE), block, or poll then block.
    pub(super) fn recv(&mut self, v: VcpuId, d: DomId, from: u32, wait: BarrierWait) -> Step {
        let world = self.jobs[self.doms[d].job].len();
        if from as usize >= world {
            let name = &self.doms[d].info.name;
            self.error.get_or_insert(RunError::Workload(format!(
                "guest error: VM {name:?} receives from rank {from}, but its job has {world} ranks"
            )));
            return Step::Wait;
        }
        if self.curr_thread_mut(v).mailbox.take(from) {
            return Step::Next;
        }
        match self.spin_limit(wait) {
            None => {
                self.curr_thread_mut(v).state = ThreadState::BlockedRecv { from };
                self.block(v);
                Step::Wait
            }
            Some(limit) => {
                self.curr_thread_mut(v).state = ThreadState::SpinRecv { from, limit };
                self.wait_running(v)
            }
        }
    }

    /// `NetServe` (a driver-domain vCPU, or a KVM host's I/O thread): forward the pass it
    /// finished, else take the next pass from its backlog (the host's, or its own) and spend
    /// its CPU time on it; block when there is nothing to do.
    pub(super) fn net_serve(&mut self, v: VcpuId, d: DomId) -> Step {
        let Some(backend) = self.served_by(self.vcpus[v].curr, d) else {
            let name = &self.doms[d].info.name;
            self.error.get_or_insert(RunError::Workload(format!(
                "guest error: VM {name:?} is not its host's driver domain or I/O thread"
            )));
            return Step::Wait;
        };
        match self.curr_thread_mut(v).pass.take() {
            Some(Pass::Net(m)) => self.forward(m),
            Some(Pass::Disk(r)) => self.forward_disk(r),
            Some(Pass::ClientRx(t)) => self.forward_client_rx(t),
            Some(Pass::ClientTx(_)) | None => {}
        }
        let (next, packet_ns, request_ns) = match backend {
            Backend::Driver(h) => {
                (self.hosts[h].backlog.pop_front(), self.network.dom0_packet_ns, self.host.io.blkback_request_ns)
            }
            Backend::Thread { h, io } => {
                let ht = self.host.host_threads.as_ref().expect("a host with I/O threads has their costs");
                let (packet_ns, request_ns) = (ht.vhost_packet_ns, ht.virtio_blk_request_ns);
                let backlog = &mut self.hosts[h].io.as_mut().expect("a host with I/O threads").backlogs[io];
                (backlog.pop_front(), packet_ns, request_ns)
            }
        };
        let Some(pass) = next else {
            self.curr_thread_mut(v).state = ThreadState::BlockedNet;
            self.block(v);
            return Step::Wait;
        };
        let work = match pass {
            Pass::Net(m) => {
                self.net.driver_passes += 1;
                self.msgs[m].packets * packet_ns
            }
            Pass::Disk(r) => self.disk_pass_ns(r, request_ns),
            // A client's request is one packet; a reply, its packets (`client`).
            Pass::ClientRx(_) => packet_ns,
            Pass::ClientTx(packets) => packets * packet_ns,
        };
        let th = self.curr_thread_mut(v);
        th.pass = Some(pass);
        if work == 0 {
            return Step::Next;
        }
        th.state = ThreadState::Computing { left: work };
        self.wait_running(v)
    }
}
