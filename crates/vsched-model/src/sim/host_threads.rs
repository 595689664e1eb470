//! A KVM host is never silent: the host's own threads, scheduled beside the vCPU threads.
//!
//! # Why
//! Under KVM a vCPU is a thread of the host's Linux, and the same scheduler (CFS, EEVDF)
//! runs the host's other threads beside it. Without them, identical guests that never block
//! leave each pCPU with the same entities, switched at the same aligned ticks: every pCPU
//! switches in step, the guests run as accidental gangs and lock-holder preemption nearly
//! vanishes. Real hosts run per-CPU kernel threads, take timer interrupts, and run each VM's
//! QEMU and vhost threads when its guest does I/O; each wake-up of such a thread preempts a
//! vCPU thread at an instant of its own (CFS places a waking sleeper up to half a latency
//! behind, `place_entity`, and preempts for it), which is what keeps real pCPUs apart.
//!
//! # What is modelled (`HostThreads`; on by default under a KVM policy)
//! Each host gets one more domain, `host-threads` (weight 256: nice 0, the threads' default),
//! whose "vCPUs" are host threads. The policy schedules them as it schedules vCPU threads:
//! they are woken, placed, preempt and are preempted by its rules.
//! - **Per-CPU kernel threads**: one per pCPU, bound to it (`kthread_bind`: `Cx::pinned`,
//!   which the simulator enforces at dispatch). Each wakes `kthread_wakes_per_s` times a
//!   second and runs `kthread_run_ns`: the kernel's timer-driven per-CPU work on a busy CPU.
//!   It wakes again one period after its run ends, as a delayed work re-queued at the end of
//!   its own function does (`vmstat_update`, mm/vmstat.c); the first wake falls at a phase
//!   drawn per pCPU (0 in lockstep).
//! - **Each VM's I/O threads**: QEMU's main-loop thread, which serves the VM's virtio-blk
//!   requests (`virtio_blk_request_ns` of CPU per request), and its vhost-net worker
//!   (`vhost-<pid>`), which moves its virtio-net packets (`vhost_packet_ns` per packet, both
//!   ways). Each serves a backlog of its own as the driver domain serves its host's
//!   (`network`, `NetServe`): the guest's notification wakes it (an ioeventfd), it does the
//!   work, and its completion wakes the guest's vCPU thread (an irqfd). The guest's timers
//!   wake no QEMU thread: KVM emulates the local APIC timer in the kernel (`apic_timer_fn`,
//!   arch/x86/kvm/lapic.c), which wakes the vCPU thread itself (`guest_kernel`).
//! - **The host's timer tick**: at each tick of the host's scheduler (`Policy::tick_period_ns`,
//!   HZ) the running thread stops for `host_tick_ns` (an external-interrupt exit of a
//!   running vCPU, the tick handler, the entry): a cost on the pCPU, not a thread.
//!
//! Approximations: one kernel thread per pCPU stands for all the periodic per-CPU work, at
//! the sum of its rates (`round_jiffies`' per-CPU skew is approximated by independent
//! phases); work the host's threads do on request of no guest (RCU's grace-period thread,
//! writeback, the host's daemons) is not modelled; a notification costs the guest no exit;
//! a request's CPU is charged once, when it is submitted (the completion pass takes the
//! thread's wake-up and dispatch, no more), as for the driver domain (`disk`). Defaults and
//! their sources: docs/realism.md, "A KVM host is never silent".

use std::collections::VecDeque;

use rand::Rng;
use vsched_engine::{RngStreams, Time, NS_PER_S, NS_PER_US};

use super::config::{DomainConfig, HostConfig};
use super::events::Ev;
use super::guest_kernel::GuestTick;
use super::network::Pass;
use super::state::{Core, ThreadState};
use crate::domain::{Paravirt, VcpuState, VmType};
use crate::guest::{Dur, GuestSpec, Instr, ProgramBuilder};
use crate::ids::{DomId, PcpuId, ThreadId};

/// The host's own threads on a KVM host (see the module notes). Every value is sourced in
/// docs/realism.md.
#[derive(Debug, Clone, PartialEq)]
pub struct HostThreads {
    /// Wake-ups per second of each pCPU's kernel thread (0: none).
    pub kthread_wakes_per_s: f64,
    /// CPU time of one such wake-up.
    pub kthread_run_ns: Time,
    /// CPU time a VM's QEMU thread spends on one virtio-blk request.
    pub virtio_blk_request_ns: Time,
    /// CPU time a VM's vhost-net worker spends on one packet.
    pub vhost_packet_ns: Time,
    /// What each tick of the host's scheduler costs the thread running on the pCPU.
    pub host_tick_ns: Time,
}

/// The kernel's periodic per-CPU work on a busy CPU: `vmstat_update` every
/// `sysctl_stat_interval` (HZ jiffies: 1 s, mm/vmstat.c) and the soft-lockup watchdog's
/// kick of the CPU's stopper thread every `2 × watchdog_thresh / 5` = 4 s
/// (kernel/watchdog.c, `watchdog_thresh` = 10).
pub const DEFAULT_KTHREAD_WAKES_PER_S: f64 = 1.25;
/// Our measurement of a per-CPU kernel thread's run (`scripts/kthread_noise.sh`).
pub const DEFAULT_KTHREAD_RUN_NS: Time = 44_800;
/// No measurement found: blkback's (`disk`), for the same work.
pub const DEFAULT_VIRTIO_BLK_REQUEST_NS: Time = 10 * NS_PER_US;
/// No measurement found: netback's (`network.dom0_packet_us`), for the same work.
pub const DEFAULT_VHOST_PACKET_NS: Time = 2 * NS_PER_US;

/// The host threads' working set: the driver domain's (16 KiB, no measurement found).
const WORKING_SET_BYTES: u64 = 16 << 10;

/// Random streams of the kernel threads' phases (`KTHREAD_PHASE_STREAM + p`), above the
/// guest kernels' (6–7 << 40).
const KTHREAD_PHASE_STREAM: u64 = 8 << 40;

impl HostThreads {
    /// The defaults on `host`: the tick costs what a timer interrupt costs there
    /// (`timer_irq_ns`, the same measured interruption).
    pub fn defaults(host: &HostConfig) -> HostThreads {
        HostThreads {
            kthread_wakes_per_s: DEFAULT_KTHREAD_WAKES_PER_S,
            kthread_run_ns: DEFAULT_KTHREAD_RUN_NS,
            virtio_blk_request_ns: DEFAULT_VIRTIO_BLK_REQUEST_NS,
            vhost_packet_ns: DEFAULT_VHOST_PACKET_NS,
            host_tick_ns: host.timer_irq_ns,
        }
    }

    /// Kernel threads per pCPU: one, unless they never wake.
    fn kthreads(&self) -> bool {
        self.kthread_wakes_per_s > 0.0
    }
}

/// The vCPUs of a host-threads domain serving `vms` VMs: one kernel thread per pCPU (unless
/// they never wake), a QEMU and a vhost thread per VM. 0: the host has no such domain.
fn host_threads_vcpus(host: &HostConfig, ht: &HostThreads, vms: usize) -> usize {
    let kthreads = if ht.kthreads() { host.pcpus } else { 0 };
    kthreads + 2 * vms
}

/// Every domain as (host, name, vCPUs) in simulation order, `domains` being the caller's,
/// host by host: the order `add_domains` builds, host-threads domains included, for what
/// names a run's rows before it starts (a trace's layout).
pub fn domains_in_simulation_order(
    host: &HostConfig,
    domains: &[(usize, String, usize)],
    n_hosts: usize,
) -> Vec<(usize, String, usize)> {
    let mut out = Vec::new();
    for h in 0..n_hosts {
        let here: Vec<&(usize, String, usize)> = domains.iter().filter(|d| d.0 == h).collect();
        out.extend(here.iter().map(|&d| d.clone()));
        if let Some(ht) = &host.host_threads {
            let vcpus = host_threads_vcpus(host, ht, here.len());
            if vcpus > 0 {
                out.push((h, host_threads_name(h, n_hosts), vcpus));
            }
        }
    }
    out
}

/// The name of host `h`'s host-threads domain in a cluster of `hosts`.
pub fn host_threads_name(h: usize, hosts: usize) -> String {
    if hosts == 1 {
        "host-threads".to_string()
    } else {
        format!("host-threads.{h}")
    }
}

/// A host's I/O threads: the VMs' QEMU and vhost threads, each with its backlog.
pub(super) struct HostIo {
    /// The host-threads domain.
    pub(super) dom: DomId,
    /// The first I/O thread: the k-th VM of the host has its QEMU thread at `first + 2k` and
    /// its vhost worker at `first + 2k + 1`.
    pub(super) first: ThreadId,
    /// Each I/O thread's passes, in the same order.
    pub(super) backlogs: Vec<VecDeque<Pass>>,
}

/// Where a guest's I/O is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Backend {
    /// Host `h`'s driver domain: any of its vCPUs.
    Driver(usize),
    /// I/O thread `io` (the index into its `HostIo`) of host `h`.
    Thread { h: usize, io: usize },
}

/// What `add_domains` adds: the domains in simulation order, which of them is a host's
/// host-threads domain, and where each of the caller's domains went.
pub(super) struct WithHostThreads {
    pub(super) domains: Vec<DomainConfig>,
    pub(super) host_threads: Vec<bool>,
    pub(super) user_doms: Vec<DomId>,
}

/// `domains` (host by host) with each host's host-threads domain after its own, if `host`
/// has host threads: one kernel thread per pCPU, then a QEMU and a vhost thread per VM.
pub(super) fn add_domains(host: &HostConfig, domains: Vec<DomainConfig>, n_hosts: usize) -> WithHostThreads {
    let n = domains.len();
    let Some(ht) = &host.host_threads else {
        return WithHostThreads { domains, host_threads: vec![false; n], user_doms: (0..n).collect() };
    };
    let mut out = WithHostThreads { domains: Vec::new(), host_threads: Vec::new(), user_doms: Vec::new() };
    let mut domains = domains.into_iter().peekable();
    for h in 0..n_hosts {
        let mut vms = 0;
        while let Some(d) = domains.next_if(|d| d.host == h) {
            out.user_doms.push(out.domains.len());
            out.domains.push(d);
            out.host_threads.push(false);
            vms += 1;
        }
        if host_threads_vcpus(host, ht, vms) == 0 {
            continue;
        }
        let kthreads = if ht.kthreads() { host.pcpus } else { 0 };
        let period = ((NS_PER_S as f64 / ht.kthread_wakes_per_s).round() as Time).max(1);
        let mut kthread = ProgramBuilder::new();
        kthread
            .repeat(None)
            .push(Instr::Compute(Dur::Fixed(ht.kthread_run_ns)))
            .push(Instr::Io(Dur::Fixed(period)))
            .end_repeat();
        let kthread = kthread.build();
        let mut io = ProgramBuilder::new();
        io.repeat(None).push(Instr::NetServe).end_repeat();
        let io = io.build();
        let mut programs = vec![kthread; kthreads];
        programs.extend(std::iter::repeat_n(io, 2 * vms));
        out.domains.push(DomainConfig {
            name: host_threads_name(h, n_hosts),
            weight: 256,
            cap: 0,
            vm_type: VmType::Hit,
            workload: "host-threads".to_string(),
            guest: GuestSpec::lockless(programs, false),
            pv: Paravirt::default(),
            slice_request_ns: None,
            start_at: 0,
            stop_at: None,
            host: h,
            job: None,
            driver: false,
            working_set_bytes: WORKING_SET_BYTES,
            tick: GuestTick::Off,
        });
        out.host_threads.push(true);
    }
    assert!(domains.next().is_none(), "domains must be listed host by host");
    out
}

/// The first wake of the kernel thread bound to global pCPU `p`: uniform over its period,
/// 0 in lockstep.
pub(super) fn kthread_phase(streams: &RngStreams, host: &HostConfig, p: PcpuId) -> Time {
    let ht = host.host_threads.as_ref().expect("a host-threads domain has its configuration");
    let period = ((NS_PER_S as f64 / ht.kthread_wakes_per_s).round() as Time).max(1);
    if host.clocks == super::config::Clocks::Lockstep {
        return 0;
    }
    streams.stream(KTHREAD_PHASE_STREAM + p as u64).gen_range(0..period)
}

/// How many kernel threads (one per pCPU, or none) a host-threads domain of `host` has.
pub(super) fn kthreads_per_host(host: &HostConfig) -> usize {
    match &host.host_threads {
        Some(ht) if ht.kthreads() => host.pcpus,
        _ => 0,
    }
}

impl Core {
    /// Where domain `d`'s disk requests are served: its host's driver domain, else its QEMU
    /// thread, else nowhere (straight to the disk).
    pub(super) fn disk_backend(&self, d: DomId) -> Option<Backend> {
        self.backend(d, 0)
    }

    /// Where domain `d`'s packets are served: its host's driver domain, else its vhost
    /// worker, else nowhere (straight to the bridge or the wire).
    pub(super) fn net_backend(&self, d: DomId) -> Option<Backend> {
        self.backend(d, 1)
    }

    fn backend(&self, d: DomId, which: usize) -> Option<Backend> {
        let h = self.doms[d].host;
        let hs = &self.hosts[h];
        if hs.driver.is_some() {
            return Some(Backend::Driver(h));
        }
        let io = hs.io.as_ref()?;
        // The host's VMs come first in its domains, in order; its host threads last.
        (d != io.dom).then(|| Backend::Thread { h, io: 2 * (d - hs.doms.start) + which })
    }

    /// Queues `pass` for I/O thread `io` of host `h` and wakes it if it waits for work (an
    /// ioeventfd or the NIC's interrupt: the thread is woken at once, through the policy's
    /// `wake`).
    pub(super) fn queue_io_pass(&mut self, pass: Pass, h: usize, io: usize) {
        let host_io = self.hosts[h].io.as_mut().expect("a host with I/O threads");
        host_io.backlogs[io].push_back(pass);
        let t = host_io.first + io;
        if self.threads[t].state == ThreadState::BlockedNet {
            self.threads[t].state = ThreadState::Ready;
            let now = self.now();
            self.post(now, Ev::Wake { t });
        }
    }

    /// The backend thread `t` of domain `d` serves, if it serves one: the driver domain, or
    /// the I/O thread it is.
    pub(super) fn served_by(&self, t: ThreadId, d: DomId) -> Option<Backend> {
        let h = self.doms[d].host;
        let hs = &self.hosts[h];
        if hs.driver == Some(d) {
            return Some(Backend::Driver(h));
        }
        let io = hs.io.as_ref().filter(|io| io.dom == d)?;
        let i = t.checked_sub(io.first).filter(|&i| i < io.backlogs.len())?;
        Some(Backend::Thread { h, io: i })
    }

    /// The host's tick on pCPU `p` interrupts the thread running there for `host_tick_ns`.
    pub(super) fn host_tick(&mut self, p: PcpuId) {
        let Some(ns) = self.host.host_threads.as_ref().map(|ht| ht.host_tick_ns).filter(|&ns| ns > 0) else {
            return;
        };
        let Some(v) = self.pcpus[p].curr else { return };
        // A vCPU that halted in this instant is still `curr` until its pCPU reschedules.
        if self.vcpus[v].state != VcpuState::Running(p) {
            return;
        }
        self.sync(v);
        self.stall(v, ns);
        self.arm(v);
    }
}
