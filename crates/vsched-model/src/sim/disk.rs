//! Disk I/O through the driver domain's block backend.
//!
//! # A disk request (`Instr::Disk`)
//! Xen's paravirtual block I/O is a split driver: the guest's blkfront puts the request on
//! a ring shared with dom0 and notifies dom0 through an event channel; dom0's blkback maps
//! the guest's pages, builds a bio and submits it to the real disk; the disk's interrupt
//! reaches dom0 (a physical IRQ bound to an event channel), whose blkback completes the
//! request, writes the response on the ring and notifies the guest through its event
//! channel, which wakes the blocked vCPU (through the policy's `wake`: Credit boosts it).
//! So a request here goes:
//! 1. the guest vCPU blocks (`BlockedIo`); the request joins the host's driver backlog, and
//!    an event-channel notification wakes an idle dom0 vCPU (as for a network pass: at once,
//!    the policy's wake then tickling a pCPU, one IPI latency away);
//! 2. a dom0 vCPU — any of them, the first to take it — spends `blkback_request_ns` of CPU
//!    on it, then submits it to the host's disk;
//! 3. the disk serves requests one at a time in arrival order (FIFO): a request starts when
//!    the disk is free and takes `disk_seek_ns + bytes / disk_mb_per_s` (positioning, then
//!    the transfer);
//! 4. the completion joins the driver backlog again: a dom0 vCPU must run to complete it
//!    (no CPU time is charged for it: the per-request cost is charged once, at step 2);
//! 5. the guest vCPU is woken by its event channel (at once; the tickle costs the IPI).
//!
//! On a KVM host with host threads (`host_threads`) the VM's QEMU thread takes dom0's part
//! in steps 1, 2 and 4 (its ioeventfd wakes it; it spends `virtio_blk_request_ns`; the AIO
//! completion wakes it again, and its irqfd wakes the vCPU). Without either (`dom0_vcpus =
//! 0` under Xen, `host_threads = false` under KVM), steps 2 and 4 vanish: the request goes
//! straight to the disk and its completion wakes the vCPU at once.
//!
//! Not modelled: the disk's cache, request merging and reordering (elevator, NCQ), and
//! sequential streams: every request pays the average positioning time, which makes this
//! a disk under random I/O.
//!
//! The driver domain's own timer wake-ups are its guest kernel's (`guest_kernel`).
//! Sources of every default: docs/realism.md, "The driver domain and the disk".

use vsched_engine::{Time, NS_PER_US};

use super::events::Ev;
use super::interpret::Step;
use super::network::Pass;
use super::state::{Core, ThreadState};
use crate::ids::{ThreadId, VcpuId};
use crate::metrics::IoMetrics;

/// The disk, the block backend and the driver domain's background activity of a host.
/// Defaults: a 7200 rpm SATA disk and an idle Linux dom0 of the seed papers' era (2007–2013);
/// every value is sourced in docs/realism.md.
#[derive(Debug, Clone, PartialEq)]
pub struct IoConfig {
    /// Average positioning time of a request: average seek plus average rotational latency.
    pub disk_seek_ns: Time,
    /// Sustained transfer rate, in 10^6 bytes per second (datasheet megabytes).
    pub disk_mb_per_s: f64,
    /// Driver-domain CPU time per block request (blkback: grant mapping, bio, response).
    pub blkback_request_ns: Time,
}

impl Default for IoConfig {
    fn default() -> Self {
        IoConfig {
            // Hitachi Deskstar 7K1000 (7200 rpm SATA, 2007): average seek 8.7 ms plus average
            // rotational latency 4.17 ms (half a turn at 7200 rpm).
            disk_seek_ns: 12_870 * NS_PER_US,
            // Seagate Barracuda XT (7200 rpm SATA, 2009) datasheet: sustained data rate
            // 138 MB/s at the outer diameter.
            disk_mb_per_s: 138.0,
            // No measurement found: 10 µs, an order of magnitude (two grant hypercalls,
            // a bio submission and a response); see docs/realism.md.
            blkback_request_ns: 10 * NS_PER_US,
        }
    }
}

impl IoConfig {
    /// How long the disk works on a request of `bytes`: positioning, then the transfer.
    pub fn disk_service_ns(&self, bytes: u64) -> Time {
        self.disk_seek_ns + (bytes as f64 * 1_000.0 / self.disk_mb_per_s).round() as Time
    }
}

/// Where a disk request is on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DiskStage {
    /// Waiting for, or in, blkback's submission.
    Submit,
    /// Queued at, or served by, the disk.
    OnDisk,
    /// Waiting for, or in, blkback's completion.
    Complete,
}

pub(super) struct DiskReq {
    /// The thread that issued it.
    pub(super) t: ThreadId,
    pub(super) bytes: u64,
    pub(super) issued_at: Time,
    pub(super) stage: DiskStage,
}

/// Run-wide tallies of disk I/O.
#[derive(Default)]
pub(super) struct IoStats {
    pub(super) requests: u64,
    pub(super) bytes: u64,
    pub(super) completed: u64,
    /// From issue to the wake-up of the issuing vCPU, summed over completed requests.
    pub(super) latency_sum_ns: Time,
    /// Requests the disk took (served, or queued to be).
    pub(super) on_disk: u64,
    /// Time those requests waited for the disk to be free, summed.
    pub(super) disk_wait_sum_ns: Time,
    pub(super) disk_busy_ns: Time,
}

impl Core {
    /// `disk(bytes)`: vCPU `v` issues a request and blocks until it completes.
    pub(super) fn disk_io(&mut self, v: VcpuId, bytes: u64) -> Step {
        let now = self.now();
        self.io.requests += 1;
        self.io.bytes += bytes;
        let t = self.vcpus[v].curr;
        let req = DiskReq { t, bytes, issued_at: now, stage: DiskStage::Submit };
        let r = self.disk_reqs.insert(req);
        self.threads[t].state = ThreadState::BlockedIo;
        match self.disk_backend(self.threads[t].dom) {
            Some(b) => self.queue_pass(Pass::Disk(r), b),
            None => self.onto_disk(r),
        }
        self.block(v);
        Step::Wait
    }

    /// The backend's CPU time of a pass over disk request `r`, whose submission costs
    /// `request_ns` (blkback's, or QEMU's virtio-blk).
    pub(super) fn disk_pass_ns(&self, r: u32, request_ns: Time) -> Time {
        match self.disk_reqs[r].stage {
            DiskStage::Submit => request_ns,
            _ => 0,
        }
    }

    /// A backend finished its pass over disk request `r`.
    pub(super) fn forward_disk(&mut self, r: u32) {
        match self.disk_reqs[r].stage {
            DiskStage::Submit => self.onto_disk(r),
            // The event-channel notification to the guest: its vCPU wakes at once, as a
            // driver-domain vCPU does (`queue_pass`).
            DiskStage::Complete => self.notify_guest(r, self.now()),
            DiskStage::OnDisk => unreachable!("a backend holds disk requests before and after the disk"),
        }
    }

    /// Onto the host's disk: FIFO behind what it is already serving.
    fn onto_disk(&mut self, r: u32) {
        let now = self.now();
        let h = self.host_of(self.disk_reqs[r].t);
        let req = &mut self.disk_reqs[r];
        req.stage = DiskStage::OnDisk;
        let start = self.hosts[h].disk_free_at.max(now);
        let service = self.host.io.disk_service_ns(req.bytes);
        self.hosts[h].disk_free_at = start + service;
        self.io.on_disk += 1;
        self.io.disk_wait_sum_ns += start - now;
        self.io.disk_busy_ns += service;
        self.post(start + service, Ev::Disk { r });
    }

    /// The disk finished request `r`: its interrupt goes to the driver domain (or, on a KVM
    /// host with host threads, the host kernel completes the AIO and wakes the VM's QEMU
    /// thread), or without either the request completes at once.
    pub(super) fn disk_done(&mut self, r: u32) {
        match self.disk_backend(self.threads[self.disk_reqs[r].t].dom) {
            Some(b) => {
                self.disk_reqs[r].stage = DiskStage::Complete;
                self.queue_pass(Pass::Disk(r), b);
            }
            None => self.notify_guest(r, self.now()),
        }
    }

    /// Request `r` is complete: its vCPU wakes at `at`.
    fn notify_guest(&mut self, r: u32, at: Time) {
        let req = &self.disk_reqs[r];
        let t = req.t;
        self.io.completed += 1;
        self.io.latency_sum_ns += at - req.issued_at;
        self.disk_reqs.release(r);
        self.post(at, Ev::Wake { t });
    }
}

impl Core {
    /// The disk and driver-domain tallies, if there was any such activity.
    pub(super) fn io_metrics(&self) -> Option<IoMetrics> {
        let io = &self.io;
        let per_request_ms = |sum: Time, n: u64| (n > 0).then(|| sum as f64 / n as f64 / 1e6);
        (io.requests > 0).then(|| IoMetrics {
            disk_requests: io.requests,
            disk_bytes: io.bytes,
            disk_completed: io.completed,
            disk_latency_ms_mean: per_request_ms(io.latency_sum_ns, io.completed),
            disk_wait_ms_mean: per_request_ms(io.disk_wait_sum_ns, io.on_disk),
            disk_busy_s: io.disk_busy_ns as f64 / 1e9,
        })
    }
}
