//! Requests from clients outside the host (`Instr::ClientRequest`, `Instr::ClientReply`).
//!
//! A server VM (the `web` workload) waits for requests that clients on other machines send
//! over the host's NIC. On a Xen host the NIC belongs to the driver domain: a request's
//! packet is received by dom0's netback, which copies it into the guest's ring and notifies
//! the guest through its event channel; the reply goes back the same way (netfront puts it
//! on the ring, netback transmits it). So here:
//! 1. the server thread blocks (`BlockedIo`) until the next request reaches the NIC, a
//!    drawn gap later (`ClientRequest(gap)`: httperf-style open arrivals, one stream per
//!    server thread);
//! 2. with a driver domain, the request joins the host's backlog as a pass of one packet
//!    (`dom0_packet_ns` of dom0 CPU, any dom0 vCPU); the end of the pass wakes the server
//!    thread at once (the event-channel notification, through the policy's `wake`);
//!    on a KVM host with host threads the server VM's vhost-net worker does that pass
//!    (`vhost_packet_ns`, `host_threads`); without either the arrival wakes it;
//! 3. the request's latency runs from its arrival at the NIC, so it includes the time it
//!    waited for dom0 as well as for a pCPU;
//! 4. `ClientReply { bytes }` queues the reply's packets (`ceil(bytes / mtu)`) for one
//!    transmit pass in dom0 (or the vhost worker) and goes on: the server does not wait for
//!    the wire.
//!
//! A request counts as one packet received by the server VM (`rx_packets`, which `cvs-comm`
//! reads). Not modelled: TCP's connection set-up and acknowledgements (a request is its one
//! data packet), the client's side, the NIC's interrupt moderation.

use super::events::Ev;
use super::interpret::Step;
use super::network::Pass;
use super::state::{Core, ThreadState};
use crate::guest::Dur;
use crate::ids::{ThreadId, VcpuId};

impl Core {
    /// `ClientRequest(gap)`: the thread on `v` blocks until its next request arrives, `gap`
    /// (drawn) from now.
    pub(super) fn client_request(&mut self, v: VcpuId, gap: Dur) -> Step {
        let t = self.vcpus[v].curr;
        let d = self.threads[t].dom;
        let at = self.now() + gap.sample(&mut self.doms[d].rng);
        self.threads[t].state = ThreadState::BlockedIo;
        // Without a backend (a driver domain, a vhost worker) the arrival is the wake-up itself.
        let ev = if self.net_backend(d).is_some() { Ev::Client { t } } else { Ev::Wake { t } };
        self.post(at, ev);
        self.block(v);
        Step::Wait
    }

    /// A request for thread `t` reached the NIC: it waits for its backend (the driver
    /// domain's netback, or its VM's vhost worker).
    pub(super) fn client_arrival(&mut self, t: ThreadId) {
        let now = self.now();
        self.threads[t].arrived_at = Some(now);
        let b = self.net_backend(self.threads[t].dom).expect("a client's request with a backend");
        self.queue_pass(Pass::ClientRx(t), b);
    }

    /// The driver domain received thread `t`'s request: the guest's event channel wakes it.
    pub(super) fn forward_client_rx(&mut self, t: ThreadId) {
        let d = self.threads[t].dom;
        self.doms[d].info.rx_packets += 1;
        let now = self.now();
        self.post(now, Ev::Wake { t });
    }

    /// `ClientReply { bytes }`: the reply leaves through the backend, if there is one.
    pub(super) fn client_reply(&mut self, v: VcpuId, bytes: u64) -> Step {
        if let Some(b) = self.net_backend(self.vcpus[v].dom) {
            let packets = self.network.packets(bytes);
            self.queue_pass(Pass::ClientTx(packets), b);
        }
        Step::Next
    }
}
