//! `cvs-comm` — communication-driven VM scheduling (CVS) for virtual clusters, seed 002
//! §3.2–3.3, with the workload-type knowledge of §5, built on Xen's Credit1 as the paper
//! built it on Xen 3.2's credit scheduler.
//!
//! # How it works
//! A virtual cluster spreads one tightly-coupled parallel job (MPI ranks) over VMs on several
//! hosts, and each host's hypervisor schedules on its own, so the VMs of a cluster rarely run at
//! the same time (§2). Seed 002 (§3.1) finds that the packets a VM receives follow its
//! synchronization demand (Pearson 0.89 and 0.97 against spinlock counts for NPB lu and is,
//! 0.17 for ep) and lets every hypervisor favour, on its own, the parallel VM that received
//! the most packets since it last ran: no protocol between hosts. Which VMs are parallel comes
//! from the user (§5): here the CON VMs.
//!
//! Everything of Credit stays (`credit.rs`: accounting, BOOST/UNDER/OVER, rate limit, tickling,
//! work stealing); CON VMs keep their vCPUs in separate run queues (Credit's CON spread), so a
//! run queue holds at most one vCPU per parallel VM. What changes is how a pCPU picks (§3.2).
//! Credit still decides whose turn it is (the head of the best class queued: BOOST, then
//! UNDER, then OVER, first come first served within a class, see the first reading below); when
//! it is a parallel VM's turn, CVS decides which parallel VM takes it, among those queued in that
//! class ahead of its first non-parallel vCPU:
//! - if none is (a non-parallel vCPU heads the class), Credit's choice (the head, or a vCPU
//!   it steals);
//! - if exactly one is, that VM;
//! - if several are, the one with the most packets received since it was last descheduled; on
//!   a tie the one with more remaining credit; still tied, the first in the run queue.
//!
//! It runs that VM's first queued vCPU and co-schedules the VM on this host (§3.2 end, §3.3):
//! every other pCPU whose run queue holds a runnable sibling gets an IPI (`co_signal`, one
//! `co_launch` per launch) and, when it reschedules, runs that sibling from its own queue,
//! preempting what it ran (within Credit's classes and turns, see below). A pick of a
//! non-parallel VM is exactly Credit's.
//!
//! The selection itself is the pure function [`cvs_pick`] over a description of the run queue
//! ([`Queued`]), so its rules can be checked without a network; `CvsComm::selection_input`
//! builds that description from a live run.
//!
//! # Readings of what the paper leaves open
//! - **Parallel VMs and the other vCPUs** (`cvs_precedence`, default `"queue"`). §3.2 takes a
//!   parallel VM "without any hesitation" whenever one is queued, and never says how that meets
//!   Credit's priorities or its first-come-first-served order. Taken literally, a non-parallel
//!   vCPU does not run while a parallel VM waits beside it, and busy-polling MPI ranks always
//!   wait somewhere. The driver domain carries every packet between VMs (`sim/network.rs`, "The driver
//!   domain"): its vCPUs wake BOOSTed, but a tick that finds one in the middle of a pass takes
//!   BOOST away, and from then on it competes as UNDER. On seed 002's Fig. 3 hosts (is, 4 CON
//!   VMs and a 4-vCPU dom0 each) such a vCPU was never scheduled again: the CON VMs, which
//!   share all the credit when dom0 idles, take turns being UNDER, so one is always queued
//!   beside it; the host's messages stayed in its backlog, and every rank of every cluster
//!   polled until the horizon (`tests/cvs_comm.rs`, `the_driver_domain_keeps_the_clusters_going`).
//!   That hang needs current Xen's tickle (idlers first, the busy pCPU left alone): under Xen
//!   3.2's, which seed 002 ran (`xen_version = "3.2"` in its scenarios), a waking BOOSTed dom0
//!   vCPU preempts the rank on its pCPU and the literal readings finish too (issue 16 item 4).
//!   Starving dom0 stops the whole cluster, and with it the packet counts CVS reads. So by
//!   default (`"queue"`) Credit still decides whose turn it is, as described above: a
//!   non-parallel vCPU waits for the vCPUs queued ahead of it, as under Credit, each of which runs
//!   at most once before it (a vCPU that runs goes back behind it), not for every parallel VM of
//!   its queue. CVS chooses only among the parallel VMs ahead of the class's first non-parallel
//!   vCPU: choosing among all of the class's parallel VMs would let one that keeps losing on
//!   packets keep the head, and with it the turn, for ever. The paper's rules among parallel
//!   VMs (packets, credit, queue order) and its co-scheduling are kept; in seed 002's
//!   experiments the only non-parallel VM is dom0, which this leaves to Credit. The cost is
//!   beside CPU-bound non-parallel VMs: their turns come at any time on each pCPU, and a
//!   parallel VM runs whole only when no such turn holds one of its siblings' pCPUs (four
//!   4-vCPU VMs' gangs, `tests/cvs_comm.rs` `busy_host`: together 10% of their run time
//!   instead of 40–75% with `"class"`, and still 4x faster than under Credit). `"class"`: within
//!   the best class queued, every parallel VM goes before the non-parallel vCPUs (§3.2 within
//!   Credit's classes, this policy's first reading): an UNDER non-parallel VM still beats OVER
//!   parallel VMs, so one that earns credit, such as a CPU-bound VM, gets its share once the
//!   parallel VMs overrun theirs and go OVER; a vCPU that does not stay in the accounting, such
//!   as dom0, can wait for ever (the hang above). `"all"`: any queued parallel VM goes before
//!   every non-BOOST vCPU, UNDER or OVER (§3.2 over Credit's classes too): a CPU-bound
//!   non-parallel VM gets nothing while a parallel vCPU waits beside it. BOOST vCPUs run first
//!   under all three; among them `"class"` and `"all"` let a parallel VM's vCPU woken by its
//!   messages go before an earlier wake-up (dom0's, say), `"queue"` keeps the wake-ups' order.
//! - **Bypassed vCPUs enter the accounting** (`activate_bypassed`, default true). Credit
//!   enters a vCPU in its accounting only when a tick finds it running. A CPU-bound vCPU that
//!   has not run yet (or that dropped out with surplus credit) earns nothing and stays UNDER,
//!   and with two parallel VMs taking turns one of them is always UNDER too: CVS would pass it
//!   over for ever wherever it may pass it over at all (`tests/cvs_comm.rs` shows a HIT hog
//!   getting no CPU with `cvs_precedence = "class"`; by default Credit's order gives the hog
//!   its turns anyway, but a parallel VM can still be passed over by the others). Plain Credit
//!   needs no such rule, its FIFO brings every UNDER vCPU to the head. So every vCPU queued
//!   ahead of a CVS pick (one Credit would have run first) joins the accounting, as if a tick
//!   had found it running (`cvs_comm.activations` counts those that were not in it). It then
//!   earns its weight's share, the parallel VMs go OVER when they overrun theirs, and it wins
//!   by class.
//! - **Packets since last descheduled.** Per VM we keep `rx_packets` as it was when the VM was
//!   last descheduled: when one of its vCPUs leaves a pCPU (preempted, blocked or parked) and
//!   no other vCPU of it is running or takes that pCPU. The score is `rx_packets` now minus
//!   that mark (before a first descheduling, the count from the start). It keeps growing while
//!   some vCPU of the VM runs.
//! - **Remaining credit** is that of the VM's vCPU queued here (Xen keeps credit per vCPU; a
//!   sum over the VM would favour wide VMs, whose share grows with their active vCPUs).
//! - **Run-queue order** is the order of the entries, head first; a VM is placed by its first
//!   candidate vCPU.
//! - **Yielders** (a pause-loop exit) are not CVS candidates in the decision they yield: running
//!   the spinning waiter again at once would undo the yield. Credit's choice may still take it.
//! - **Stealing.** By default, when the CVS pick is OVER, Credit first looks for UNDER or BOOST
//!   work on its peers (`csched_load_balance`) and runs what it finds (`cvs_comm.steals_first`).
//!   A stolen vCPU of a parallel VM is co-scheduled like any pick.
//! - **Which picks launch.** Every pick of a parallel VM's vCPU (by CVS, by Credit's choice, by
//!   a steal, or `prev` running on) signals the pCPUs where a sibling waits. A VM with no
//!   waiting sibling (all running or blocked, or a single vCPU) launches nothing. A pCPU that
//!   runs a sibling because it was signalled does not launch again.
//! - **Who is signalled**: every other pCPU whose run queue holds a sibling, runnable and
//!   waiting. Running siblings stay where they are; blocked ones are skipped (their wake-up goes
//!   through Credit's BOOST and tickle, and may launch in turn).
//! - **Concurrent launches** of different VMs are allowed: the paper has no global lock (unlike
//!   seed 003/004's `syn_domain_id`). A pCPU holds one pending signal; if it is already
//!   signalled for another VM, the first signal wins (`cvs_comm.signal_conflicts`): that launch
//!   is under way on other pCPUs and should complete, and with latest-wins two VMs could take
//!   one pCPU from each other within an IPI latency.
//! - **Answering a signal.** A signal overrides Credit's rate limit (it came to preempt) but
//!   keeps the class rule: the sibling passes over no BOOST vCPU unless it is BOOST itself,
//!   and, unless `cvs_precedence = "all"`, no vCPU of a better class than the one its VM won
//!   with on the launching pCPU. (Comparing with the sibling's own class instead would let a VM
//!   whose vCPUs drifted apart in credit never run whole; and ignoring classes, as seed 004's
//!   signals do, starves a HIT hog beside two CON VMs.) By default (`"queue"`) it also keeps
//!   Credit's turns, as far as progress needs: (1) it does not preempt a non-parallel vCPU in
//!   the middle of its slice, unless the sibling, or another vCPU queued there, is of a better
//!   class (Credit preempts a running vCPU only for a better class): the vCPU runs to its
//!   slice's end, then goes behind the sibling as Credit requeues it, and the signal is answered
//!   then; (2) among the waiting non-parallel vCPUs that Credit would run before the sibling
//!   (of a better class than the sibling's, or of its class and queued ahead of it), the sibling
//!   passes over each at most once per wait (`cvs_comm.passed_over`): one that a signal passed
//!   over is not passed over again until it has run. Without (1) a signal could take dom0 off
//!   a pass half done and send it to the back of the queue; without (2), signals, which can
//!   come faster than the turns, could keep a non-parallel vCPU at the head for ever. With
//!   both, a non-parallel vCPU waits at most for the vCPUs queued ahead of it and one sibling
//!   run more, and then runs a whole turn. Not allowing even one pass would bind the siblings
//!   still more to the other VMs' turns (in `busy_host`, gangs about 6% of the run time
//!   instead of 10%). While the signal waits, the pCPU keeps the vCPU of (1), or picks by the CVS
//!   rules, and keeps the signal for its next reschedule (`cvs_comm.signals_deferred`). A signal
//!   is dropped, and the pCPU picks as usual (keeping a vCPU of (1) running), when its sibling is
//!   no longer queued there (stolen, or the VM is no longer CON: `cvs_comm.signals_void`) or when
//!   no vCPU of the VM runs on another pCPU any more (the co-scheduling it was to join is over:
//!   `signals_stale`).
//!
//! Counters: `cvs_comm.picks_single`, `picks_by_packets`, `picks_by_credit`, `picks_by_order`
//! (which §3.2 rule settled a CVS pick), `signals_answered` and those above.
//!
//! Suits: parallel VMs of virtual clusters whose ranks exchange messages (NPB lu, is) among
//! other VMs on overcommitted hosts. Known weaknesses: packets are a proxy, so a parallel VM
//! that receives much but synchronizes little is favoured anyway, and with no traffic the
//! choice falls to credit and queue order; every pick of a parallel VM preempts the pCPUs of
//! its waiting siblings, which costs many preemptions when parallel VMs are many (seed 002 §5
//! names this and leaves the remedy to future work); keeping Credit's classes, and by default
//! its turns, means a VM whose vCPUs sit behind better-class work or another VM's turn
//! elsewhere runs partly alone, much of the time beside CPU-bound non-parallel VMs;
//! co-scheduling is per host, and a cluster's VMs on different hosts meet only through each
//! host's packet counts.

use vsched_model::{
    concat_params, ConfigError, Cx, Decision, DomId, ParamDefault, ParamRange, ParamSpec, Params, PcpuId, Policy,
    PolicyInfo, Time, VcpuId, VmType,
};

use crate::credit::{self, Credit, PRI_BOOST, PRI_UNDER};
use crate::credit_spread::Spread;
use crate::credit_variant::{CreditVariant, OnCredit};

// ---- Constants (defaults; each is a scenario parameter) ----

/// Default reading: Credit's order decides between parallel and non-parallel vCPUs, CVS which
/// parallel VM takes a parallel turn (see the header: the literal readings can starve dom0).
const CVS_PRECEDENCE: &str = "queue";
/// Default: vCPUs that CVS passes over join Credit's accounting, without which a CPU-bound
/// vCPU that has not run yet can be passed over for ever (see the header).
const ACTIVATE_BYPASSED: bool = true;

const OWN_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "cvs_precedence",
        default: ParamDefault::Str(CVS_PRECEDENCE),
        range: ParamRange::Any, doc: "which non-parallel vCPUs a queued CON VM goes before: \"queue\" (those Credit would run after it; a co-scheduling signal may pass each other one over once per wait), \"class\" (also all of its Credit class), \"all\" (every non-BOOST one)",
    },
    ParamSpec {
        name: "activate_bypassed",
        default: ParamDefault::Bool(ACTIVATE_BYPASSED),
        range: ParamRange::Any, doc: "vCPUs a CVS pick passes over join Credit's accounting; false = only ticks activate, as in Credit",
    },
];

/// Credit's parameters, then ours.
const PARAMS: &[ParamSpec] = &ALL_PARAMS;
const ALL_PARAMS: [ParamSpec; credit::PARAMS.len() + OWN_PARAMS.len()] = concat_params(credit::PARAMS, OWN_PARAMS);

// ---- The selection (§3.2), a pure function ----

/// A Credit priority class, ordered so that the best is the greatest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    Over,
    Under,
    Boost,
}

impl Class {
    fn of(pri: i8) -> Class {
        if pri >= PRI_BOOST {
            Class::Boost
        } else if pri >= PRI_UNDER {
            Class::Under
        } else {
            Class::Over
        }
    }
}

/// One waiting vCPU of the deciding pCPU's run queue, as the selection sees it. A run queue
/// is a slice of these, head first: the position is the run-queue order of §3.2's last
/// tie-break. Build one by hand with [`Queued::parallel`] and [`Queued::other`] (packet-driven
/// tests), or see `CvsComm::selection_input` for how a live run fills it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    pub vcpu: VcpuId,
    pub dom: DomId,
    /// Its VM runs a parallel application (a CON VM).
    pub parallel: bool,
    pub class: Class,
    /// Packets its VM received since it was last descheduled.
    pub packets_since: u64,
    /// Its remaining credit.
    pub credit: i64,
    /// It is yielding the pCPU that decides: not a candidate this time.
    pub yielded: bool,
}

impl Queued {
    /// A vCPU of a parallel VM, UNDER, not yielding.
    pub fn parallel(vcpu: VcpuId, dom: DomId, packets_since: u64, credit: i64) -> Queued {
        Queued { vcpu, dom, parallel: true, class: Class::Under, packets_since, credit, yielded: false }
    }
    /// A vCPU of a non-parallel VM, UNDER, not yielding (packets and credit play no part).
    pub fn other(vcpu: VcpuId, dom: DomId) -> Queued {
        Queued { vcpu, dom, parallel: false, class: Class::Under, packets_since: 0, credit: 0, yielded: false }
    }
    pub fn with_class(self, class: Class) -> Queued {
        Queued { class, ..self }
    }
    pub fn yielding(self) -> Queued {
        Queued { yielded: true, ..self }
    }
}

/// Which rule of §3.2 settled a pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The only parallel VM among the candidates.
    Only,
    /// The most packets since last descheduled.
    Packets,
    /// Equal packets; the most remaining credit.
    Credit,
    /// Equal packets and credit; the first in the run queue.
    QueueOrder,
}

/// What [`cvs_pick`] decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// No parallel VM among the candidates: Credit chooses (its head, or a vCPU it steals).
    Credit,
    /// Run this vCPU, its VM's first candidate in the queue.
    Run { vcpu: VcpuId, by: Rule },
}

/// Which non-parallel vCPUs a queued parallel VM goes before (`cvs_precedence`; the header
/// says why the default is `Queue`). BOOST vCPUs go first under all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precedence {
    /// Only those Credit would run after it: Credit takes the head of the best class queued,
    /// and when that is a parallel VM's vCPU, CVS chooses among the parallel VMs queued in
    /// that class ahead of its first non-parallel vCPU.
    Queue,
    /// Also those of its own Credit class: CVS chooses among every parallel VM of the best
    /// class queued (§3.2 within Credit's classes).
    Class,
    /// Every non-BOOST one: CVS chooses among every queued parallel VM, UNDER or OVER, unless
    /// a BOOST vCPU is queued (§3.2 over Credit's classes too).
    All,
}

impl Precedence {
    pub const NAMES: [&'static str; 3] = ["queue", "class", "all"];

    pub fn from_name(name: &str) -> Option<Precedence> {
        match name {
            "queue" => Some(Precedence::Queue),
            "class" => Some(Precedence::Class),
            "all" => Some(Precedence::All),
            _ => None,
        }
    }
}

/// The CVS selection over one run queue (head first). Entries that yield are never
/// candidates. The candidates are, with `Queue`, the leading run of parallel vCPUs among the
/// best class's entries (none if that class's first entry is not parallel); with `Class`, the
/// best class's entries; with `All`, every entry unless a BOOST one is queued (then the BOOST
/// ones). Among the candidates' parallel VMs: none → [`Pick::Credit`]; one → it; several →
/// most packets, then most credit, then queue order.
pub fn cvs_pick(queue: &[Queued], precedence: Precedence) -> Pick {
    let eligible = || queue.iter().filter(|q| !q.yielded);
    let Some(best) = eligible().map(|q| q.class).max() else {
        return Pick::Credit;
    };
    let in_class = |q: &&Queued| q.class == best || (precedence == Precedence::All && best != Class::Boost);
    let candidates: Vec<&Queued> = match precedence {
        Precedence::Queue => eligible().filter(in_class).take_while(|q| q.parallel).collect(),
        Precedence::Class | Precedence::All => eligible().filter(in_class).collect(),
    };
    // Each parallel VM once, by its first candidate, in queue order.
    let mut vms: Vec<&Queued> = Vec::new();
    for q in candidates.into_iter().filter(|q| q.parallel) {
        if !vms.iter().any(|v| v.dom == q.dom) {
            vms.push(q);
        }
    }
    if vms.len() <= 1 {
        return vms.first().map_or(Pick::Credit, |v| Pick::Run { vcpu: v.vcpu, by: Rule::Only });
    }
    let most = vms.iter().map(|v| v.packets_since).max().unwrap_or(0);
    vms.retain(|v| v.packets_since == most);
    if vms.len() == 1 {
        return Pick::Run { vcpu: vms[0].vcpu, by: Rule::Packets };
    }
    let most = vms.iter().map(|v| v.credit).max().unwrap_or(0);
    vms.retain(|v| v.credit == most);
    Pick::Run { vcpu: vms[0].vcpu, by: if vms.len() == 1 { Rule::Credit } else { Rule::QueueOrder } }
}

// ---- State, by scope ----

struct CvsComm {
    // Configuration.
    precedence: Precedence,
    activate_bypassed: bool,
    // Per domain.
    /// Its `rx_packets` when it was last descheduled (see the header).
    rx_mark: Vec<u64>,
    // Per pCPU.
    /// A co-scheduling signal pending here: this pCPU runs its queued sibling at its next
    /// reschedule.
    signal: Vec<Option<Signal>>,
    /// When the slice of the vCPU this pCPU last chose to run ends.
    slice_end: Vec<Time>,
    // Per vCPU.
    /// A non-parallel vCPU that an answered signal passed over since it last ran: no signal
    /// passes it over again until it has run (see the header).
    passed_over: Vec<bool>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Signal {
    /// The parallel VM being co-scheduled.
    dom: DomId,
    /// The class its vCPU won with on the launching pCPU.
    class: Class,
}

/// How a signalled pCPU answers its signal.
enum Answer {
    /// Run this sibling.
    Sibling(VcpuId),
    /// Keep running `prev`, a non-parallel vCPU in the middle of its slice, to that slice's end.
    KeepPrev(VcpuId),
    /// Pick as usual.
    Usual,
}

fn is_parallel(cx: &Cx, d: DomId) -> bool {
    cx.domain(d).vm_type == VmType::Con
}

impl CvsComm {
    fn packets_since(&self, cx: &Cx, d: DomId) -> u64 {
        cx.domain(d).rx_packets.saturating_sub(self.rx_mark[d])
    }

    /// `p`'s run queue as [`cvs_pick`] reads it: the live counterpart of hand-built input.
    fn selection_input(&self, base: &Credit, cx: &Cx, p: PcpuId) -> Vec<Queued> {
        base.pcpus[p]
            .runq
            .iter()
            .map(|&v| {
                let d = cx.dom_of(v);
                Queued {
                    vcpu: v,
                    dom: d,
                    parallel: is_parallel(cx, d),
                    class: Class::of(base.pri[v]),
                    packets_since: self.packets_since(cx, d),
                    credit: base.credit_of(v),
                    yielded: base.is_yielding(v),
                }
            })
            .collect()
    }

    /// The CVS choice for `p` (nothing dequeued): the selection, with Credit's choice where it
    /// defers to Credit, or where Credit steals better work than an OVER pick.
    fn choose(&mut self, base: &mut Credit, cx: &mut Cx, p: PcpuId) -> Option<VcpuId> {
        let queue = self.selection_input(base, cx, p);
        let (v, by) = match cvs_pick(&queue, self.precedence) {
            Pick::Credit => return base.choose(cx, p),
            Pick::Run { vcpu, by } => (vcpu, by),
        };
        if self.precedence != Precedence::All && Class::of(base.pri[v]) == Class::Over {
            if let Some(u) = base.choose(cx, p) {
                if !(base.vcpus[u].queued && base.vcpus[u].processor == p) {
                    cx.count("cvs_comm.steals_first");
                    return Some(u);
                }
            }
        }
        cx.count(match by {
            Rule::Only => "cvs_comm.picks_single",
            Rule::Packets => "cvs_comm.picks_by_packets",
            Rule::Credit => "cvs_comm.picks_by_credit",
            Rule::QueueOrder => "cvs_comm.picks_by_order",
        });
        if self.activate_bypassed {
            // What Credit would have run first joins the accounting (see the header).
            for q in queue.iter().take_while(|q| q.vcpu != v).filter(|q| !q.yielded) {
                if base.activate(cx, q.vcpu) {
                    cx.count("cvs_comm.activations");
                }
            }
        }
        Some(v)
    }

    /// With `Queue` precedence, whether `prev` (put back in `p`'s run queue if still runnable) is
    /// a non-parallel vCPU in the middle of a turn that Credit would not cut short: still
    /// runnable here, not yielding, its slice not over, and nothing of a better class than its
    /// own queued here (Credit preempts a running vCPU only for a better class).
    fn mid_turn(&self, base: &Credit, cx: &Cx, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId> {
        let u = prev?;
        let class = |w: VcpuId| Class::of(base.pri[w]);
        let mid = self.precedence == Precedence::Queue
            && cx.now() < self.slice_end[p]
            && !is_parallel(cx, cx.dom_of(u))
            && base.vcpus[u].queued
            && base.vcpus[u].processor == p
            && !base.is_yielding(u)
            && !base.pcpus[p].runq.iter().any(|&w| !base.is_yielding(w) && class(w) > class(u));
        mid.then_some(u)
    }

    /// `p` (which put `prev` back in its run queue, if still runnable) was signalled to run its
    /// queued sibling of the signal's VM: run that sibling, keep `prev` running, or pick as
    /// usual (the signal dropped, or kept while a vCPU it may not pass over waits).
    fn answer_signal(&mut self, base: &Credit, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>, signal: Signal) -> Answer {
        let d = signal.dom;
        let sibling = if is_parallel(cx, d) { base.first_queued(p, |u| cx.dom_of(u) == d) } else { None };
        // Whatever becomes of the signal, a non-parallel vCPU in the middle of its turn is not
        // preempted by it unless the sibling is of a better class.
        let keep = self.mid_turn(base, cx, p, prev);
        let Some(s) = sibling else {
            self.signal[p] = None;
            cx.count("cvs_comm.signals_void");
            return keep.map_or(Answer::Usual, Answer::KeepPrev);
        };
        if !cx.vcpus_of(d).any(|u| cx.running_on(u).is_some_and(|q| q != p)) {
            // The co-scheduling this signal asked to join is over.
            self.signal[p] = None;
            cx.count("cvs_comm.signals_stale");
            return keep.map_or(Answer::Usual, Answer::KeepPrev);
        }
        let class = |u: VcpuId| Class::of(base.pri[u]);
        let sibling = class(s);
        if let Some(u) = keep.filter(|&u| class(u) >= sibling) {
            cx.count("cvs_comm.signals_deferred");
            return Answer::KeepPrev(u);
        }
        let runq = &base.pcpus[p].runq;
        // With `Queue`, the non-parallel vCPUs that Credit would run before the sibling: of a
        // better class than the sibling's, or of its class and queued ahead of it. The sibling
        // may pass each of them over once per wait (see the header).
        let at = runq.iter().position(|&u| u == s).unwrap_or(runq.len());
        let passed: Vec<VcpuId> = runq
            .iter()
            .enumerate()
            .filter(|&(i, &u)| {
                let c = class(u);
                self.precedence == Precedence::Queue
                    && u != s
                    && !base.is_yielding(u)
                    && !is_parallel(cx, cx.dom_of(u))
                    && (c > sibling || (c == sibling && i < at))
            })
            .map(|(_, &u)| u)
            .collect();
        // And the class rules of the selection: the sibling passes over no BOOST vCPU unless it
        // is BOOST itself, and unless precedence is `All`, nothing of a better class than the
        // one its VM won with on the launching pCPU.
        let must_wait = passed.iter().any(|&u| self.passed_over[u])
            || runq.iter().any(|&u| {
                let c = class(u);
                u != s
                    && !base.is_yielding(u)
                    && ((c == Class::Boost && sibling != Class::Boost)
                        || (self.precedence != Precedence::All && c > signal.class))
            });
        if must_wait {
            // Kept for the next reschedule; meanwhile `prev` runs on if in the middle of its turn.
            cx.count("cvs_comm.signals_deferred");
            return keep.map_or(Answer::Usual, Answer::KeepPrev);
        }
        for u in passed {
            self.passed_over[u] = true;
            cx.count("cvs_comm.passed_over");
        }
        self.signal[p] = None;
        cx.count("cvs_comm.signals_answered");
        Answer::Sibling(s)
    }

    /// `p` picked `v`: if its VM is parallel, signal every other pCPU where a sibling waits.
    fn launch(&mut self, base: &Credit, cx: &mut Cx, p: PcpuId, v: VcpuId) {
        let d = cx.dom_of(v);
        if !is_parallel(cx, d) {
            return;
        }
        let class = Class::of(base.pri[v]);
        let mut launched = false;
        for u in cx.vcpus_of(d) {
            let q = base.vcpus[u].processor;
            if u == v || !base.vcpus[u].queued || q == p {
                continue;
            }
            match self.signal[q] {
                None => {
                    self.signal[q] = Some(Signal { dom: d, class });
                    cx.co_signal(q);
                    launched = true;
                }
                Some(e) if e.dom == d => {}
                Some(_) => cx.count("cvs_comm.signal_conflicts"),
            }
        }
        if launched {
            cx.co_launch(d);
        }
    }

    /// `p` decided `d`: the vCPU it runs has had its wait, and has its slice until `d`'s timer.
    fn ran(&mut self, cx: &Cx, p: PcpuId, d: Decision) -> Decision {
        if let Some(v) = d.next {
            self.passed_over[v] = false;
            self.slice_end[p] = d.slice_ns.map_or(Time::MAX, |s| cx.now() + s);
        }
        d
    }

    /// `prev` left `p` for `next`: mark its VM descheduled if no vCPU of it runs any more.
    fn note_descheduled(&mut self, cx: &mut Cx, prev: Option<VcpuId>, next: Option<VcpuId>) {
        let Some(u) = prev else { return };
        if next == Some(u) {
            return;
        }
        let d = cx.dom_of(u);
        let replaced_by_sibling = next.is_some_and(|w| cx.dom_of(w) == d);
        if !replaced_by_sibling && !cx.vcpus_of(d).any(|w| w != u && cx.running_on(w).is_some()) {
            self.rx_mark[d] = cx.domain(d).rx_packets;
        }
    }
}

// ---- Callbacks, in lifecycle order ----

impl CreditVariant for CvsComm {
    fn init(&mut self, cx: &mut Cx) {
        self.rx_mark = cx.domains().map(|d| d.rx_packets).collect();
        self.signal = vec![None; cx.n_pcpus()];
        self.slice_end = vec![0; cx.n_pcpus()];
        self.passed_over = vec![false; cx.n_vcpus()];
    }

    /// `csched_schedule` with §3.2's selection and §3.3's co-scheduling signals.
    fn pick_next(&mut self, base: &mut Credit, cx: &mut Cx, p: PcpuId, prev: Option<VcpuId>) -> Decision {
        let signalled = self.signal[p];
        // A signal came to preempt: it overrides the rate limit.
        if let Some(keep) = base.put_prev(cx, p, prev, signalled.is_none()) {
            return self.ran(cx, p, keep);
        }
        let mut next = None;
        if let Some(signal) = signalled {
            match self.answer_signal(base, cx, p, prev, signal) {
                Answer::Sibling(s) => next = Some(s),
                Answer::KeepPrev(u) => {
                    // It runs on for what is left of its slice, a timer Credit programs no
                    // shorter than `CSCHED_MIN_TIMER` (a fuzzed case once left 421 ns).
                    base.commit(cx, p, prev, Some(u));
                    return Decision::run(u, (self.slice_end[p] - cx.now()).max(base.min_timer_ns()));
                }
                Answer::Usual => {}
            }
        }
        if next.is_none() {
            next = self.choose(base, cx, p);
            if let Some(v) = next {
                self.launch(base, cx, p, v);
            }
        }
        let decision = base.commit(cx, p, prev, next);
        self.note_descheduled(cx, prev, decision.next);
        self.ran(cx, p, decision)
    }

    /// Packet marks never run ahead of the counters; signals go only to siblings of CON VMs
    /// with siblings, never to the pCPU that launched.
    fn check(&self, _base: &Credit, cx: &Cx) -> Result<(), String> {
        for (d, &mark) in self.rx_mark.iter().enumerate() {
            let rx = cx.domain(d).rx_packets;
            if mark > rx {
                return Err(format!("VM {} marked at {mark} packets but has received {rx}", cx.domain(d).name));
            }
        }
        for (q, signal) in self.signal.iter().enumerate() {
            if let Some(Signal { dom: d, .. }) = *signal {
                if cx.domain(d).vcpus < 2 {
                    return Err(format!("pCPU {q} signalled for VM {}, which has no sibling", cx.domain(d).name));
                }
            }
        }
        Ok(())
    }
}

// ---- Registration ----

fn build(params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
    let precedence = params.choice("cvs_precedence", &Precedence::NAMES)?;
    let variant = CvsComm {
        precedence: Precedence::from_name(&precedence).expect("a checked choice"),
        activate_bypassed: params.bool("activate_bypassed"),
        rx_mark: Vec::new(),
        signal: Vec::new(),
        slice_end: Vec::new(),
        passed_over: Vec::new(),
    };
    Ok(Box::new(OnCredit { base: Credit::from_params(params, Spread::Con)?, variant }))
}

pub const INFO: PolicyInfo = PolicyInfo {
    name: "cvs-comm",
    description: "communication-driven VM scheduling on Credit (seed 002): the CON VM with most packets received runs, co-scheduled by IPIs",
    hypervisor: vsched_model::Hypervisor::Xen,
    params: PARAMS,
    build,
};

#[cfg(test)]
mod tests {
    use super::*;

    const QUEUE: Precedence = Precedence::Queue;
    const CLASS: Precedence = Precedence::Class;
    const ALL: Precedence = Precedence::All;

    fn run(vcpu: VcpuId, by: Rule) -> Pick {
        Pick::Run { vcpu, by }
    }

    /// The same pick under all three precedences.
    fn everywhere(q: &[Queued]) -> Pick {
        let pick = cvs_pick(q, QUEUE);
        assert_eq!((cvs_pick(q, CLASS), cvs_pick(q, ALL)), (pick, pick));
        pick
    }

    #[test]
    fn most_packets_wins() {
        // Queue: a (2 packets, more credit, first), b (7 packets).
        let q = [Queued::parallel(0, 0, 2, 300), Queued::parallel(1, 1, 7, 10)];
        assert_eq!(everywhere(&q), run(1, Rule::Packets));
    }

    #[test]
    fn equal_packets_more_credit_wins() {
        let q = [Queued::parallel(0, 0, 5, 40), Queued::parallel(2, 1, 5, 120), Queued::other(1, 2)];
        assert_eq!(everywhere(&q), run(2, Rule::Credit));
        // Credit only breaks ties among the VMs with the most packets.
        let q = [Queued::parallel(0, 0, 5, 40), Queued::parallel(1, 1, 4, 900), Queued::parallel(2, 2, 5, 120)];
        assert_eq!(everywhere(&q), run(2, Rule::Credit));
    }

    #[test]
    fn equal_packets_and_credit_go_by_queue_order() {
        let q = [Queued::parallel(1, 1, 3, 50), Queued::parallel(2, 0, 3, 50), Queued::other(0, 2)];
        assert_eq!(everywhere(&q), run(1, Rule::QueueOrder));
        assert_eq!(everywhere(&[q[1], q[0], q[2]]), run(2, Rule::QueueOrder));
    }

    #[test]
    fn a_non_parallel_head_runs_by_default() {
        // Credit's turn goes to the HIT vCPU at the head; §3.2 literally takes the CON VM.
        let q = [Queued::other(0, 0), Queued::other(1, 1), Queued::parallel(2, 2, 0, -50)];
        assert_eq!(cvs_pick(&q, QUEUE), Pick::Credit);
        assert_eq!(cvs_pick(&q, CLASS), run(2, Rule::Only));
        assert_eq!(cvs_pick(&q, ALL), run(2, Rule::Only));
    }

    #[test]
    fn by_default_cvs_chooses_among_the_parallel_vms_ahead_of_the_first_other() {
        // [a(1 packet) h b(9 packets)]: a's turn; b, behind the HIT vCPU h, waits for h.
        let q = [Queued::parallel(0, 0, 1, 0), Queued::other(1, 1), Queued::parallel(2, 2, 9, 0)];
        assert_eq!(cvs_pick(&q, QUEUE), run(0, Rule::Only));
        assert_eq!(cvs_pick(&q, CLASS), run(2, Rule::Packets));
        // [a c h b]: a and c (ahead of h) compete; b does not.
        let c = Queued::parallel(3, 3, 5, 0);
        assert_eq!(cvs_pick(&[q[0], c, q[1], q[2]], QUEUE), run(3, Rule::Packets));
        // A yielding h is no candidate, and no barrier either.
        assert_eq!(cvs_pick(&[q[0], q[1].yielding(), q[2]], QUEUE), run(2, Rule::Packets));
        // Entries of worse classes neither compete nor stop the run: an OVER HIT vCPU ahead.
        let over = Queued::other(4, 4).with_class(Class::Over);
        assert_eq!(cvs_pick(&[over, q[0], q[2]], QUEUE), run(2, Rule::Packets));
    }

    #[test]
    fn no_parallel_vm_leaves_the_choice_to_credit() {
        let q = [Queued::other(0, 0), Queued::other(1, 1).with_class(Class::Over)];
        assert_eq!(everywhere(&q), Pick::Credit);
        assert_eq!(everywhere(&[]), Pick::Credit);
    }

    #[test]
    fn boost_runs_first_under_every_precedence() {
        // dom0's BOOSTed vCPU behind a parallel VM: Credit's choice (the BOOST one).
        let q = [Queued::parallel(0, 0, 9, 100), Queued::other(1, 1).with_class(Class::Boost)];
        assert_eq!(everywhere(&q), Pick::Credit);
        // Among BOOST vCPUs the order of wake-ups decides by default; the other readings let
        // a parallel VM's wake-up go before an earlier one.
        let q = [
            Queued::other(0, 1).with_class(Class::Boost),
            Queued::parallel(1, 0, 1, 0).with_class(Class::Boost),
            Queued::parallel(2, 2, 9, 0),
        ];
        assert_eq!(cvs_pick(&q, QUEUE), Pick::Credit);
        assert_eq!(cvs_pick(&q, CLASS), run(1, Rule::Only));
        assert_eq!(cvs_pick(&q, ALL), run(1, Rule::Only));
        assert_eq!(everywhere(&q[1..]), run(1, Rule::Only));
    }

    #[test]
    fn under_non_parallel_beats_over_parallel_unless_all() {
        let q = [
            Queued::parallel(0, 0, 50, -100).with_class(Class::Over),
            Queued::other(1, 1),
            Queued::parallel(2, 2, 1, -10).with_class(Class::Over),
        ];
        assert_eq!(cvs_pick(&q, QUEUE), Pick::Credit);
        assert_eq!(cvs_pick(&q, CLASS), Pick::Credit);
        // §3.2 over Credit's classes: any parallel VM beats non-BOOST work, whatever its class.
        assert_eq!(cvs_pick(&q, ALL), run(0, Rule::Packets));
        // Among OVER vCPUs when nothing better is queued.
        assert_eq!(everywhere(&[q[0], q[2]]), run(0, Rule::Packets));
    }

    #[test]
    fn a_yielder_is_no_candidate() {
        let q = [Queued::other(0, 1), Queued::parallel(1, 0, 9, 0).yielding()];
        assert_eq!(everywhere(&q), Pick::Credit);
        // Nor does its class count: the best class is that of the others.
        let q = [Queued::parallel(0, 0, 0, 0).with_class(Class::Over), Queued::other(1, 1).yielding()];
        assert_eq!(everywhere(&q), run(0, Rule::Only));
        assert_eq!(everywhere(&[Queued::other(0, 1).yielding()]), Pick::Credit);
    }

    #[test]
    fn a_vm_counts_once_by_its_first_vcpu() {
        // Two vCPUs of VM 0 (a run queue of a VM too wide for the spread rule).
        let q = [Queued::parallel(0, 0, 1, 0), Queued::parallel(1, 0, 1, 0)];
        assert_eq!(everywhere(&q), run(0, Rule::Only));
    }

    #[test]
    fn params_are_credits_and_ours() {
        let names: Vec<&str> = PARAMS.iter().map(|p| p.name).collect();
        let credit: Vec<&str> = credit::PARAMS.iter().map(|p| p.name).collect();
        assert_eq!(names[..credit.len()], credit[..]);
        assert_eq!(names[credit.len()..], ["cvs_precedence", "activate_bypassed"]);
        for name in Precedence::NAMES {
            assert_eq!(Precedence::from_name(name).map(|_| ()), Some(()));
        }
        assert_eq!(Precedence::from_name(CVS_PRECEDENCE), Some(QUEUE));
    }
}
