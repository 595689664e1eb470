//! Hardware eras: the machine costs that move together when the processor generation
//! changes, as presets a scenario picks with `[host] hardware = "..."`.
//!
//! Every value is cited in docs/realism.md (the table there is the reference; the comments
//! here only name the source). A scenario can override any single cost after the preset.

use vsched_engine::{Time, NS_PER_US};

/// One era's machine costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hardware {
    pub name: &'static str,
    pub description: &'static str,
    pub cpu_ghz: f64,
    pub context_switch_ns: Time,
    pub ipi_latency_ns: Time,
    pub sched_cost_ns: Time,
    pub ipi_handler_ns: Time,
    pub spin_iteration_cycles: u64,
    pub vm_exit_ns: Time,
    /// Xen's PLE handler beyond the exit (no measurement found: 0).
    pub ple_handler_ns: Time,
    /// KVM's PLE handler beyond the exit (`kvm_vcpu_on_spin`'s scan and `yield_to`), which a
    /// scenario under a KVM policy pays instead of `ple_handler_ns`.
    pub kvm_ple_handler_ns: Time,
    pub posted_interrupts: bool,
    pub ipi_virtualization: bool,
    pub idle_wake_ns: Time,
    pub timer_irq_ns: Time,
    pub thread_switch_ns: Time,
    pub caches: Caches,
}

/// What a vCPU's cache refill costs on this era's processor (see `sim/cache.rs` for the
/// model). A refill is latency-bound: each missing 64-byte line costs one load latency, and
/// the core keeps at most `fill_buffers` misses in flight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Caches {
    /// Private per-core L2.
    pub l2_kib: u64,
    /// Shared last-level cache per core of a socket (a socket's L3 is this × its cores).
    pub l3_kib_per_core: u64,
    /// L1D fill buffers: the misses a core keeps in flight.
    pub fill_buffers: u32,
    /// Load-to-use latency of an L3 hit.
    pub l3_latency_cycles: u64,
    /// Load-to-use latency of local DRAM.
    pub memory_latency_ns: Time,
}

/// The era of the seed papers' testbeds (2008-2013), and the default.
pub const DEFAULT_HARDWARE: &str = "nehalem-2010";

/// Costs without a measurement we could find, the same in every era (docs/realism.md says
/// so row by row): a vCPU world switch, one scheduler invocation, the one-way delivery of an
/// IPI and a guest's IPI handler.
const CONTEXT_SWITCH_NS: Time = 2 * NS_PER_US;
const SCHED_COST_NS: Time = NS_PER_US / 2;
const IPI_LATENCY_NS: Time = 2 * NS_PER_US;
const IPI_HANDLER_NS: Time = NS_PER_US;
/// A guest timer interrupt taken on a busy vCPU, whole (exits included): our measurement on
/// a virtualized machine (`scripts/hiccup.c`, docs/realism.md), the same in every era.
const TIMER_IRQ_NS: Time = 3_400;
/// A guest kernel's switch from one thread to another of the same process, whole (the
/// blocking thread's system call, the switch, the woken thread's return): our measurement on
/// a virtualized machine (`scripts/thread_switch.c`, docs/realism.md), the same in every era.
const THREAD_SWITCH_NS: Time = 2_100;
/// KVM's PLE handler beyond the exit: the kernel work of a `sched_yield()` that picks the
/// caller again (run-queue lock, `update_curr`, one pass of the scheduler), net of the system
/// call around it: our measurement on a virtualized machine (`scripts/lone_yield.c`,
/// docs/realism.md), the same in every era.
const KVM_PLE_HANDLER_NS: Time = 1_500;
/// One VM exit and entry, "direct cost" (the hardware world switch out and back): 2,000
/// cycles on a Xeon X5570 under KVM (Landau et al., SplitX, §1). No bare measurement of a
/// later generation was found, so later presets keep the cycle count.
const VM_EXIT_CYCLES: f64 = 2_000.0;

const fn exit_ns(ghz: f64) -> Time {
    (VM_EXIT_CYCLES / ghz) as Time
}

const SKYLAKE_2017: Hardware = Hardware {
    name: "skylake-2017",
    description: "Skylake-SP (Xeon Scalable, 1st generation): posted interrupts",
    cpu_ghz: 2.4,
    context_switch_ns: CONTEXT_SWITCH_NS,
    ipi_latency_ns: IPI_LATENCY_NS,
    sched_cost_ns: SCHED_COST_NS,
    ipi_handler_ns: IPI_HANDLER_NS,
    spin_iteration_cycles: 16,
    vm_exit_ns: exit_ns(2.4),
    ple_handler_ns: 0,
    kvm_ple_handler_ns: KVM_PLE_HANDLER_NS,
    posted_interrupts: true,
    ipi_virtualization: false,
    // C1E exit latency, `skx_cstates`.
    idle_wake_ns: 10 * NS_PER_US,
    timer_irq_ns: TIMER_IRQ_NS,
    thread_switch_ns: THREAD_SWITCH_NS,
    caches: Caches {
        // Intel's Xeon Scalable specifications: 1 MiB L2 and 1.375 MiB of L3 per core.
        l2_kib: 1024,
        l3_kib_per_core: 1408,
        // 10 L1D fill buffers per core from Nehalem to Skylake (Intel 64 and IA-32
        // Optimization Reference Manual; the figure behind the single-core bandwidth limit).
        fill_buffers: 10,
        // AnandTech's LMBench of a Xeon Platinum 8176 (2017, "Intel Skylake-EP vs AMD EPYC
        // 7000", memory subsystem: latency): L3 54-56 cycles, DRAM 89-91 ns.
        l3_latency_cycles: 55,
        memory_latency_ns: 90,
    },
};

/// The presets, oldest first.
pub const HARDWARE: &[Hardware] = &[
    Hardware {
        name: "nehalem-2010",
        description: "Nehalem/Westmere (Core i5-760, Xeon 5500/5600): no posted interrupts; the seed papers' hosts",
        // The i5-760 of seed 004: "Intel(R) Core(TM) i5 CPU 760 @ 2.80GHz".
        cpu_ghz: 2.8,
        context_switch_ns: CONTEXT_SWITCH_NS,
        ipi_latency_ns: IPI_LATENCY_NS,
        sched_cost_ns: SCHED_COST_NS,
        ipi_handler_ns: IPI_HANDLER_NS,
        spin_iteration_cycles: 16,
        vm_exit_ns: exit_ns(2.8),
        ple_handler_ns: 0,
        kvm_ple_handler_ns: KVM_PLE_HANDLER_NS,
        // Posted interrupts arrive with Ivy Bridge-EP (bhyve's support was tested on a Xeon
        // E5-2620 v2).
        posted_interrupts: false,
        ipi_virtualization: false,
        // C1E exit latency, `nehalem_cstates` (drivers/idle/intel_idle.c).
        idle_wake_ns: 10 * NS_PER_US,
        timer_irq_ns: TIMER_IRQ_NS,
        thread_switch_ns: THREAD_SWITCH_NS,
        caches: Caches {
            // Xeon 5500 / Core i5-700: 256 KiB L2 per core, an inclusive 8 MiB L3 for four
            // cores (HP's Xeon 5500 technology brief; Intel's i5-760 specification).
            l2_kib: 256,
            l3_kib_per_core: 2048,
            // 10 L1D fill buffers per core (Intel 64 and IA-32 Optimization Reference Manual).
            fill_buffers: 10,
            // SiSoft Sandra 2010 on a Xeon X5570 (AnandTech, "AMD's 12-core Magny-Cours
            // Opteron 6174 vs. Intel's 6-core Xeon", 2010): L3 47 cycles, memory 81 ns.
            l3_latency_cycles: 47,
            memory_latency_ns: 81,
        },
    },
    SKYLAKE_2017,
    Hardware {
        name: "sapphire-2023",
        description: "Sapphire Rapids (Xeon Scalable, 4th generation): posted interrupts and IPI virtualization",
        // Intel's "IPI virtualization support for VM" (kvm, 2022): the sender no longer exits.
        ipi_virtualization: true,
        // C1E exit latency, `spr_cstates`.
        idle_wake_ns: 2 * NS_PER_US,
        caches: Caches {
            // Intel's 4th-generation Xeon Scalable specifications: 2 MiB L2 and 1.875 MiB
            // of L3 per core.
            l2_kib: 2048,
            l3_kib_per_core: 1920,
            // Golden Cove: 16 L1D fill buffers (Intel Architecture Day 2021).
            fill_buffers: 16,
            // No measurement found: Skylake-SP's latencies (docs/realism.md).
            ..SKYLAKE_2017.caches
        },
        ..SKYLAKE_2017
    },
    Hardware {
        name: "ideal",
        description: "every machine cost zero (hand-checked traces, teaching); a 2 GHz clock for PLE",
        cpu_ghz: 2.0,
        context_switch_ns: 0,
        ipi_latency_ns: 0,
        sched_cost_ns: 0,
        ipi_handler_ns: 0,
        spin_iteration_cycles: 16,
        vm_exit_ns: 0,
        ple_handler_ns: 0,
        kvm_ple_handler_ns: 0,
        posted_interrupts: true,
        ipi_virtualization: true,
        idle_wake_ns: 0,
        timer_irq_ns: 0,
        thread_switch_ns: 0,
        // Caches of the Nehalem sizes that refill in no time.
        caches: Caches {
            l2_kib: 256,
            l3_kib_per_core: 2048,
            fill_buffers: 10,
            l3_latency_cycles: 0,
            memory_latency_ns: 0,
        },
    },
];

/// The preset called `name`.
pub fn hardware(name: &str) -> Option<&'static Hardware> {
    HARDWARE.iter().find(|h| h.name == name)
}
