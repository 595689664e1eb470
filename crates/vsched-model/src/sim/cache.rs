//! Cache warmth: what a vCPU pays, without progress, to refill the footprint of what it is
//! about to run, and the host topology (sockets, cores, hardware threads) it depends on.
//!
//! # The model
//! Each core has a private L2 and each socket a shared L3 (the last-level cache), of the
//! hardware era's sizes. Warmth belongs to what runs, not to the vCPU that runs it:
//!
//! - **Footprints.** A guest thread's footprint is its VM's `working_set_bytes`, which each
//!   workload defines per thread, one program each (a compile job's cc1, an MPI rank's share
//!   of the grid, a loop: crates/vsched-workloads/src/working_set.rs). Each vCPU's guest
//!   kernel has one of its own, [`KERNEL_FOOTPRINT_BYTES`]: what a timer wake of an idle CPU
//!   touches. A running vCPU touches one of them: its current thread's, or only its kernel's
//!   while it is up for a timer with its thread halted (`guest_kernel`). A footprint is warm
//!   only where it last ran: in that core's L2 and that socket's L3.
//! - **What refills.** A vCPU switched in refills the footprint it is about to touch, and so
//!   does a running vCPU whose footprint changes: its thread resumes while it is up for its
//!   timer, or its guest switches threads (`guest_sched`). So a tick-only wake refills the
//!   kernel's footprint and never the thread's; a thread back on the core it left, with
//!   nothing run there meanwhile, refills nothing; a thread that moves refills its own.
//! - **What ran meanwhile.** Every cache keeps a running total of the footprints touched
//!   there: when a footprint stops being touched (its vCPU leaves, or touches another) it adds
//!   its share of the cache `min(footprint, cache)`, a thread's less if it ran too briefly to
//!   touch it all (lines at the memory's rate, `fill_buffers / memory latency`); a kernel's
//!   whole, since its size is what one wake touches. When a footprint comes back, the total's
//!   growth since it left is everything touched there meanwhile: on that core for the L2, on
//!   the whole socket (co-runners included) for the L3.
//! - **How much of it survived.** Under LRU a footprint's lines sink one place for every
//!   distinct line touched after it left, and fall out past the cache's size: of its resident
//!   `w = min(footprint, cache)` bytes, `max(0, touched meanwhile − (cache − w))` are evicted
//!   (at most `w`). The cache is taken as fully associative, and an intruder that ran several
//!   times counts each time (an upper bound on the distinct lines it touched). Thiébaut and
//!   Stone's "Footprints in the cache" (ACM TOCS 5(4), 1987) is the classic treatment of
//!   this reload transient; ours is its simplest, integer form.
//! - **Where it comes from.** Lines missing from the L3 come from memory; lines missing
//!   only from the L2 come from the L3. A footprint that moves to another core refills its
//!   whole L2 share; one that moves to another socket refills its whole L3 share from memory
//!   too: a move across sockets costs more than a move within one.
//! - **What it costs.** A refill is latency-bound: each 64-byte line costs one load latency
//!   (the era's L3 or DRAM latency), with at most `fill_buffers` misses in flight. So the
//!   cost is `lines × latency / fill_buffers`: a lower bound, since a program's dependent
//!   misses overlap less (docs/realism.md).
//!
//! # Not modelled
//! Remote-memory (NUMA) latency for a footprint whose memory sits on another socket; an SMT
//! sibling's or a co-runner's slowdown while both run (only evictions are counted); TLB
//! refills; deep C-states flushing an idle core's L2; a footprint staying warm on a core it
//! left before its last one; the kernel lines a thread's own ticks, interrupts and system
//! calls touch (its footprint stands for them); sharing between the threads of one VM (each
//! thread's footprint is its own). What a thread touched is counted from the end of its
//! vCPU's last stall (the switch-in's refill, a tick's or an IPI's handler), not from its
//! switch-in: a lower bound for a long run that took ticks, and a refill cut short adds
//! nothing to the caches.

use vsched_engine::{round_to_time, Time};

use super::config::HostConfig;
use super::state::Core;
use crate::domain::VcpuState;
use crate::ids::{PcpuId, ThreadId, VcpuId};

/// Bytes per cache line.
const LINE_BYTES: u64 = 64;

/// What a guest kernel's timer wake of an idle CPU brings into a cold L2: 148 KiB (2,362
/// lines, the middle of three medians), our measurement with the PMU's kernel-mode L2 demand
/// misses around a 100 µs sleep (`scripts/kernel_footprint.c`, Linux 6.18; docs/realism.md,
/// "Cache warmth"). The same in every era; only `hardware = "ideal"` makes its refill free.
pub const KERNEL_FOOTPRINT_BYTES: u64 = 148 * 1024;

/// Whose footprint a running vCPU touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Toucher {
    /// Its current guest thread's.
    Thread(ThreadId),
    /// Only its guest kernel's: it is up for its timer, its thread halted.
    Kernel,
}

/// Where a footprint last ran and the caches' fill totals when it left (global core and
/// socket ids).
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

/// Of `resident` bytes a footprint left in a cache of `capacity`, those evicted once
/// `footprint` new bytes came in after it (LRU: the rest of the cache goes first).
fn evicted(resident: u64, footprint: u64, capacity: u64) -> u64 {
    footprint.saturating_sub(capacity - resident).min(resident)
}

impl Core {
    /// What running (or dispatched) vCPU `v` touches now.
    fn toucher(&self, v: VcpuId) -> Toucher {
        let vc = &self.vcpus[v];
        if vc.timer_wake {
            Toucher::Kernel
        } else {
            Toucher::Thread(vc.curr)
        }
    }

    /// `v` is switched in on global pCPU `p`: the refill it pays before its guest runs, for
    /// the footprint it is about to touch.
    pub(super) fn refill(&mut self, v: VcpuId, p: PcpuId) -> Time {
        let who = self.toucher(v);
        self.vcpus[v].touching = Some(who);
        self.refill_of(v, who, p)
    }

    /// Running vCPU `v` may touch another footprint than it did (its thread resumed while it
    /// was up for its timer, or its guest switched threads): if so, the one it touched leaves
    /// the caches and the new one refills, `v` stalling for it after any stall it already
    /// owes. Returns whether it stalled; the caller re-arms its guest event.
    pub(super) fn retouch(&mut self, v: VcpuId) -> bool {
        let VcpuState::Running(p) = self.vcpus[v].state else { return false };
        let who = self.toucher(v);
        if self.vcpus[v].touching == Some(who) {
            return false;
        }
        let now = self.now();
        self.leave_caches(v, now);
        self.vcpus[v].touching = Some(who);
        let refill = self.refill_of(v, who, p);
        if refill == 0 {
            return false;
        }
        let start = self.vcpus[v].run_from.max(now);
        self.vcpus[v].refill_spans.push((start, start + refill));
        self.stall(v, refill);
        true
    }

    /// The refill of footprint `who` on vCPU `v`, about to be touched on global pCPU `p`;
    /// the caches now hold it.
    fn refill_of(&mut self, v: VcpuId, who: Toucher, p: PcpuId) -> Time {
        let fills = &mut self.caches;
        if fills.free {
            // Every refill would take exactly 0 ns; warmth is read by nothing else, so it is
            // not tracked (and `leave_caches` finds none).
            return 0;
        }
        let (core, socket) = fills.place[p];
        let (bytes, warmth) = match who {
            Toucher::Kernel => (KERNEL_FOOTPRINT_BYTES, &mut self.vcpus[v].kernel_warmth),
            Toucher::Thread(t) => (self.doms[self.threads[t].dom].working_set_bytes, &mut self.threads[t].warmth),
        };
        let (l2_cap, l3_cap) = (fills.l2_bytes, fills.l3_bytes);
        let (w2, w3) = fills.shares(bytes);
        let (miss2, miss3) = match *warmth {
            Some(w) => (
                if w.core == core { evicted(w2, fills.l2[core] - w.l2_mark, l2_cap) } else { w2 },
                if w.socket == socket { evicted(w3, fills.l3[socket] - w.l3_mark, l3_cap) } else { w3 },
            ),
            None => (w2, w3),
        };
        // The L3 (inclusive on Nehalem) supplies what the L2 lost and it kept.
        let from_memory = miss3.div_ceil(LINE_BYTES);
        let from_l3 = miss2.saturating_sub(miss3).div_ceil(LINE_BYTES);
        // Its footprint here is added when it stops being touched (`leave_caches`).
        *warmth = Some(Warmth { core, socket, l2_mark: fills.l2[core], l3_mark: fills.l3[socket] });
        fills.refill_ns(from_l3, from_memory)
    }

    /// `v`'s refill stalls ran over the spans noted since it was switched in (`dispatch`,
    /// `retouch`); at `now`, as it leaves or the run ends, its host counts the part it sat
    /// through: a vCPU preempted before a refill ended spent only that long refilling (its
    /// next switch-in refills again).
    pub(super) fn count_refill(&mut self, v: VcpuId, now: Time) {
        let spans = &mut self.vcpus[v].refill_spans;
        let sat: Time = spans.iter().map(|&(start, end)| now.clamp(start, end) - start).sum();
        spans.clear();
        let h = self.vcpus[v].host;
        self.hosts[h].cache_refill_ns += sat;
    }

    /// `v` stops touching its footprint at `now` (it leaves its pCPU, or touches another):
    /// what it touched joins the caches' totals, and its marks move past its own
    /// contribution. A thread touched its share of each cache, or less if it ran too briefly
    /// to touch it all at the memory's line rate; a kernel its whole share.
    pub(super) fn leave_caches(&mut self, v: VcpuId, now: Time) {
        let Some(who) = self.vcpus[v].touching.take() else { return };
        let ran = now.saturating_sub(self.vcpus[v].run_from);
        let (bytes, warmth) = match who {
            Toucher::Kernel => (KERNEL_FOOTPRINT_BYTES, &mut self.vcpus[v].kernel_warmth),
            Toucher::Thread(t) => (self.doms[self.threads[t].dom].working_set_bytes, &mut self.threads[t].warmth),
        };
        let Some(w) = warmth else { return };
        let host = &self.host;
        let touched = match (who, host.caches.memory_latency_ns) {
            (Toucher::Kernel, _) | (_, 0) => bytes,
            (Toucher::Thread(_), latency) => {
                ran.saturating_mul(u64::from(host.caches.fill_buffers) * LINE_BYTES) / latency
            }
        };
        let fills = &mut self.caches;
        let (w2, w3) = fills.shares(bytes);
        fills.l2[w.core] += touched.min(w2);
        fills.l3[w.socket] += touched.min(w3);
        w.l2_mark = fills.l2[w.core];
        w.l3_mark = fills.l3[w.socket];
    }
}
