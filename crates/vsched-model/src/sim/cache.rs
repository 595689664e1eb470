//! Cache warmth: what a vCPU pays, without progress, to refill its working set when it is
//! switched in, and the host topology (sockets, cores, hardware threads) it depends on.
//!
//! # The model
//! A vCPU's working set is its VM's `working_set_bytes` (a workload property). Each core has
//! a private L2 and each socket a shared L3 (the last-level cache), of the hardware era's
//! sizes. A vCPU is warm only where it last ran: in that core's L2 and that socket's L3.
//!
//! - **What ran meanwhile.** Every cache keeps a running total of the footprints of the
//!   vCPUs that ran there: when one leaves it adds what it touched, its share of the cache
//!   `min(working set, cache)`, or less if it ran too briefly to touch it all (lines at the
//!   memory's rate, `fill_buffers / memory latency`). When a vCPU comes back, the total's
//!   growth since it left is the footprint of everyone who ran there meanwhile: on that core
//!   for the L2, on the whole socket (co-runners included) for the L3. Its time away matters
//!   through that footprint: the longer it was away, the more ran meanwhile.
//! - **How much of it survived.** Under LRU a vCPU's lines sink one place for every distinct
//!   line touched after it left, and fall out past the cache's size: of its resident
//!   `w = min(working set, cache)` bytes, `max(0, footprint − (cache − w))` are evicted (at
//!   most `w`). The cache is taken as fully associative, and an intruder that ran several
//!   times counts each time (an upper bound on the distinct lines it touched). Thiébaut and
//!   Stone's "Footprints in the cache" (ACM TOCS 5(4), 1987) is the classic treatment of
//!   this reload transient; ours is its simplest, integer form.
//! - **Where it comes from.** Lines missing from the L3 come from memory; lines missing
//!   only from the L2 come from the L3. A vCPU that moves to another core refills its whole
//!   L2 share; one that moves to another socket refills its whole L3 share from memory too:
//!   a move across sockets costs more than a move within one.
//! - **What it costs.** A refill is latency-bound: each 64-byte line costs one load latency
//!   (the era's L3 or DRAM latency), with at most `fill_buffers` misses in flight. So the
//!   cost is `lines × latency / fill_buffers`: a lower bound, since a program's dependent
//!   misses overlap less (docs/realism.md).
//!
//! # Not modelled
//! Remote-memory (NUMA) latency for a vCPU whose memory sits on another socket; an SMT
//! sibling's or a co-runner's slowdown while both run (only evictions are counted); TLB
//! refills; deep C-states flushing an idle core's L2; a vCPU staying warm on a core it left
//! before its last one.

use vsched_engine::{round_to_time, Time};

use super::config::HostConfig;
use super::state::Core;
use crate::ids::{PcpuId, VcpuId};

/// Bytes per cache line.
const LINE_BYTES: u64 = 64;

/// Where a vCPU last ran and the caches' fill totals when it left (global core and socket
/// ids).
#[derive(Debug, Clone, Copy)]
pub(super) struct Warmth {
    core: usize,
    socket: usize,
    l2_mark: u64,
    l3_mark: u64,
}

/// Bytes brought into each core's L2 and each socket's L3 so far (global ids), and what the
/// refills need of the host, worked out once: the dispatch path does no division.
#[derive(Debug)]
pub(super) struct CacheFills {
    l2: Vec<u64>,
    l3: Vec<u64>,
    /// Global core and socket of each global pCPU.
    place: Vec<(usize, usize)>,
    l2_bytes: u64,
    l3_bytes: u64,
    /// A line's load latency from the L3 and from DRAM, in ns, and the misses in flight
    /// (`refill_ns`).
    l3_line_ns: f64,
    memory_line_ns: f64,
    in_flight: f64,
    /// Both latencies are zero (`hardware = "ideal"`): every refill takes no time, and no
    /// warmth is tracked.
    free: bool,
}

impl CacheFills {
    pub(super) fn new(host: &HostConfig, hosts: usize) -> Self {
        let place = (0..hosts)
            .flat_map(|h| {
                (0..host.pcpus).map(move |p| (h * host.cores() + host.core_of(p), h * host.sockets + host.socket_of(p)))
            })
            .collect();
        CacheFills {
            l2: vec![0; host.cores() * hosts],
            l3: vec![0; host.sockets * hosts],
            place,
            l2_bytes: host.l2_bytes(),
            l3_bytes: host.l3_bytes(),
            l3_line_ns: host.caches.l3_latency_cycles as f64 / host.cpu_ghz,
            memory_line_ns: host.caches.memory_latency_ns as f64,
            in_flight: host.caches.fill_buffers.max(1) as f64,
            free: host.caches.l3_latency_cycles == 0 && host.caches.memory_latency_ns == 0,
        }
    }

    /// The refill time of `l3_lines` lines from the L3 and `memory_lines` from DRAM.
    fn refill_ns(&self, l3_lines: u64, memory_lines: u64) -> Time {
        // Nothing to refill takes no time: the arithmetic below would give exactly 0 too, at
        // the end of a chain of conversions and a division on the dispatch's critical path.
        if (l3_lines | memory_lines) == 0 {
            return 0;
        }
        round_to_time((l3_lines as f64 * self.l3_line_ns + memory_lines as f64 * self.memory_line_ns) / self.in_flight)
    }

    /// The part of a working set that the L2 and the L3 hold.
    fn shares(&self, working_set: u64) -> (u64, u64) {
        (working_set.min(self.l2_bytes), working_set.min(self.l3_bytes))
    }
}

impl HostConfig {
    /// pCPUs per socket.
    pub fn pcpus_per_socket(&self) -> usize {
        self.pcpus / self.sockets
    }

    /// Physical cores per host.
    pub fn cores(&self) -> usize {
        self.pcpus / self.threads_per_core
    }

    /// The socket of host-local pCPU `p`.
    pub fn socket_of(&self, p: PcpuId) -> usize {
        p / self.pcpus_per_socket()
    }

    /// The physical core (host-local) of host-local pCPU `p`: a core's hardware threads are
    /// numbered next to each other.
    pub fn core_of(&self, p: PcpuId) -> usize {
        p / self.threads_per_core
    }

    fn l2_bytes(&self) -> u64 {
        self.caches.l2_kib * 1024
    }

    fn l3_bytes(&self) -> u64 {
        self.caches.l3_kib_per_core * 1024 * (self.pcpus_per_socket() / self.threads_per_core) as u64
    }
}

/// Of `resident` bytes a vCPU left in a cache of `capacity`, those evicted once `footprint`
/// new bytes came in after it (LRU: the rest of the cache goes first).
fn evicted(resident: u64, footprint: u64, capacity: u64) -> u64 {
    footprint.saturating_sub(capacity - resident).min(resident)
}

impl Core {
    /// `v` is switched in on global pCPU `p`: the refill it pays before its guest runs, and
    /// the caches now hold its working set.
    pub(super) fn refill(&mut self, v: VcpuId, p: PcpuId) -> Time {
        let fills = &mut self.caches;
        if fills.free {
            // Every refill would take exactly 0 ns; the vCPU's warmth is read by nothing
            // else, so it is not tracked (and `leave_caches` finds none).
            return 0;
        }
        let (core, socket) = fills.place[p];
        let working_set = self.doms[self.vcpus[v].dom].working_set_bytes;
        let (l2_cap, l3_cap) = (fills.l2_bytes, fills.l3_bytes);
        let (w2, w3) = fills.shares(working_set);
        let (miss2, miss3) = match self.vcpus[v].warmth {
            Some(w) => (
                if w.core == core { evicted(w2, fills.l2[core] - w.l2_mark, l2_cap) } else { w2 },
                if w.socket == socket { evicted(w3, fills.l3[socket] - w.l3_mark, l3_cap) } else { w3 },
            ),
            None => (w2, w3),
        };
        // The L3 (inclusive on Nehalem) supplies what the L2 lost and it kept.
        let from_memory = miss3.div_ceil(LINE_BYTES);
        let from_l3 = miss2.saturating_sub(miss3).div_ceil(LINE_BYTES);
        // Its footprint here is added when it leaves (`leave_caches`), by how long it ran.
        self.vcpus[v].warmth = Some(Warmth { core, socket, l2_mark: fills.l2[core], l3_mark: fills.l3[socket] });
        fills.refill_ns(from_l3, from_memory)
    }

    /// `v`'s refill stall ran `[start, end)` (`dispatch`); at `now`, as it leaves or the run
    /// ends, its host counts the part it sat through: a vCPU preempted before its refill
    /// ended spent only that long refilling (its next switch-in refills again).
    pub(super) fn count_refill(&mut self, v: VcpuId, now: Time) {
        let (start, end) = std::mem::take(&mut self.vcpus[v].refill_span);
        let h = self.vcpus[v].host;
        self.hosts[h].cache_refill_ns += now.clamp(start, end) - start;
    }

    /// `v` leaves its pCPU at `now`: what it touched while it ran (its share of each cache,
    /// or less if it ran too briefly to touch it all at the memory's line rate) joins the
    /// caches' footprints, and its marks move past its own contribution.
    pub(super) fn leave_caches(&mut self, v: VcpuId, now: Time) {
        let Some(mut w) = self.vcpus[v].warmth else { return };
        let host = &self.host;
        let ran = now.saturating_sub(self.vcpus[v].run_from);
        let working_set = self.doms[self.vcpus[v].dom].working_set_bytes;
        let touched = match host.caches.memory_latency_ns {
            0 => working_set,
            latency => ran.saturating_mul(u64::from(host.caches.fill_buffers) * LINE_BYTES) / latency,
        };
        let fills = &mut self.caches;
        let (w2, w3) = fills.shares(working_set);
        fills.l2[w.core] += touched.min(w2);
        fills.l3[w.socket] += touched.min(w3);
        w.l2_mark = fills.l2[w.core];
        w.l3_mark = fills.l3[w.socket];
        self.vcpus[v].warmth = Some(w);
    }
}
