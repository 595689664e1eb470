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
    pub migration_penalty_ns: Time,
    pub sched_cost_ns: Time,
    pub ipi_handler_ns: Time,
    pub spin_iteration_cycles: u64,
    pub vm_exit_ns: Time,
    pub ple_handler_ns: Time,
    pub posted_interrupts: bool,
    pub ipi_virtualization: bool,
    pub idle_wake_ns: Time,
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
/// The flat migration refill of the model before cache warmth (issue 17 item 3).
const MIGRATION_PENALTY_NS: Time = 20 * NS_PER_US;
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
    migration_penalty_ns: MIGRATION_PENALTY_NS,
    sched_cost_ns: SCHED_COST_NS,
    ipi_handler_ns: IPI_HANDLER_NS,
    spin_iteration_cycles: 16,
    vm_exit_ns: exit_ns(2.4),
    ple_handler_ns: 0,
    posted_interrupts: true,
    ipi_virtualization: false,
    // C1E exit latency, `skx_cstates`.
    idle_wake_ns: 10 * NS_PER_US,
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
        migration_penalty_ns: MIGRATION_PENALTY_NS,
        sched_cost_ns: SCHED_COST_NS,
        ipi_handler_ns: IPI_HANDLER_NS,
        spin_iteration_cycles: 16,
        vm_exit_ns: exit_ns(2.8),
        ple_handler_ns: 0,
        // Posted interrupts arrive with Ivy Bridge-EP (bhyve's support was tested on a Xeon
        // E5-2620 v2).
        posted_interrupts: false,
        ipi_virtualization: false,
        // C1E exit latency, `nehalem_cstates` (drivers/idle/intel_idle.c).
        idle_wake_ns: 10 * NS_PER_US,
    },
    SKYLAKE_2017,
    Hardware {
        name: "sapphire-2023",
        description: "Sapphire Rapids (Xeon Scalable, 4th generation): posted interrupts and IPI virtualization",
        // Intel's "IPI virtualization support for VM" (kvm, 2022): the sender no longer exits.
        ipi_virtualization: true,
        // C1E exit latency, `spr_cstates`.
        idle_wake_ns: 2 * NS_PER_US,
        ..SKYLAKE_2017
    },
    Hardware {
        name: "ideal",
        description: "every machine cost zero (hand-checked traces, teaching); a 2 GHz clock for PLE",
        cpu_ghz: 2.0,
        context_switch_ns: 0,
        ipi_latency_ns: 0,
        migration_penalty_ns: 0,
        sched_cost_ns: 0,
        ipi_handler_ns: 0,
        spin_iteration_cycles: 16,
        vm_exit_ns: 0,
        ple_handler_ns: 0,
        posted_interrupts: true,
        ipi_virtualization: true,
        idle_wake_ns: 0,
    },
];

/// The preset called `name`.
pub fn hardware(name: &str) -> Option<&'static Hardware> {
    HARDWARE.iter().find(|h| h.name == name)
}
