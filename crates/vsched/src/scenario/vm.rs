//! One VM table, a `[[vm]]` or a member of a `[[virtual_cluster]]`: its shape (vCPUs,
//! weight, cap, type, guest kernel) and its workload, checked and built once so that every
//! error surfaces before a run.

use vsched_model::{ConfigError, Params, Value, VmType};
use vsched_workloads::{working_set, Ranks};

use super::file::{VirtualClusterSection, VmSection, WorkloadSection};
use super::values::{err, parse_type, to_params};
use super::{Guest, VmSpec, DEFAULT_WEIGHT};
use crate::footprint::{Budget, VmFootprint};
use crate::guest_kernel::{guest_tick, TickKeys};
use crate::paravirt::{paravirt, PvKeys};

/// Xen accepts weights in 1..=65535.
pub(super) const MAX_WEIGHT: u32 = 65_535;
/// 1 TiB: more memory than any VM of the presets' hosts could have.
const MAX_WORKING_SET_KB: i64 = 1 << 30;

/// What a VM table says about the VM itself (a `[[vm]]` or a `[[virtual_cluster]]`).
pub(super) struct VmShape<'a> {
    vcpus: u32,
    weight: Option<u32>,
    cap: Option<u32>,
    vm_type: Option<&'a str>,
    tick: TickKeys<'a>,
    pv: PvKeys,
}

/// A [`VmShape`] read from a VM table. The two kinds of table list the same VM keys, since
/// serde's `deny_unknown_fields` cannot be combined with a flattened common part: this says
/// once how those keys make a shape.
macro_rules! vm_shape {
    ($table:expr) => {
        VmShape {
            vcpus: $table.vcpus,
            weight: $table.weight,
            cap: $table.cap,
            vm_type: $table.vm_type.as_deref(),
            tick: TickKeys {
                mode: $table.guest_tick.as_deref(),
                hz: $table.guest_hz,
                idle_wakes_per_s: $table.idle_wakes_per_s,
            },
            pv: PvKeys {
                spinlocks: $table.pv_spinlocks,
                steal_time: $table.pv_steal_time,
                tlb_flush: $table.pv_tlb_flush,
                sched_yield: $table.pv_sched_yield,
                critical_sections: $table.pv_critical_sections,
                sched_slice_us: $table.sched_slice_us,
                haltpoll: crate::halt_poll::GuestPollKeys {
                    on: $table.guest_haltpoll,
                    ns: $table.guest_halt_poll_ns,
                    grow: $table.guest_halt_poll_grow,
                    shrink: $table.guest_halt_poll_shrink,
                    grow_start: $table.guest_halt_poll_grow_start,
                    allow_shrink: $table.guest_halt_poll_allow_shrink,
                },
            },
        }
    };
}

impl<'a> VmShape<'a> {
    /// The shape a `[[vm]]` table gives.
    pub(super) fn of_vm(v: &'a VmSection) -> Self {
        vm_shape!(v)
    }

    /// The shape each member of a `[[virtual_cluster]]` has.
    pub(super) fn of_cluster_member(vc: &'a VirtualClusterSection) -> Self {
        vm_shape!(vc)
    }
}

/// Checks a VM's shape and workload (built once with `ranks`, so that errors surface now);
/// the rest of the spec is left for the caller to fill in. With `charge = (budget, copies)`,
/// `copies` such VMs are charged to the memory budget first (see `footprint`).
pub(super) fn vm_spec(
    at: &dyn Fn(&str) -> String,
    shape: VmShape,
    default_type: &str,
    workload: &WorkloadSection,
    ranks: Ranks,
    charge: Option<(&mut Budget, usize)>,
) -> Result<VmSpec, ConfigError> {
    let vcpus = shape.vcpus;
    if vcpus == 0 || vcpus > 1024 {
        return Err(err(at("vcpus"), format!("expected an integer in 1..=1024, got {vcpus}")));
    }
    let weight = shape.weight.unwrap_or(DEFAULT_WEIGHT);
    if weight == 0 || weight > MAX_WEIGHT {
        return Err(err(at("weight"), format!("expected an integer in 1..={MAX_WEIGHT}, got {weight}")));
    }
    let cap = shape.cap.unwrap_or(0);
    if cap > 100 * vcpus {
        return Err(err(
            at("cap"),
            format!("expected a percentage of one pCPU in 0..={} (100 × vcpus; 0 = no cap), got {cap}", 100 * vcpus),
        ));
    }
    let vm_type = parse_type(&at("type"), shape.vm_type.unwrap_or(default_type))?;
    let tick = guest_tick(at, &shape.tick)?;
    let (pv, slice_request_ns) = paravirt(at, &shape.pv)?;
    let info = vsched_workloads::find(&workload.kind).ok_or_else(|| {
        err(
            at("workload.kind"),
            format!("unknown workload {:?}; expected one of {}", workload.kind, vsched_workloads::names().join(", ")),
        )
    })?;
    let wpath = at("workload");
    let mut given = to_params(&wpath, &workload.params)?;
    let working_set_kb = given.remove(working_set::KEY);
    let params = Params::check(&wpath, info.params, &given)?;
    let (web, con) = (info.name == "web", vm_type == VmType::Con);
    match charge {
        // A rank's program may grow with its job (an all-to-all has a step per rank), so a
        // VM of a larger job is measured by one rank's program before all are built.
        Some((budget, copies)) if ranks.world > ranks.vcpus => {
            let one = Ranks { vcpus: 1, ..ranks };
            let footprint =
                VmFootprint::of(&(info.build)(&params, &one)?, 1, &one).times(ranks.vcpus).with_distributions(web, con);
            budget.vms(at, footprint, copies)?;
            (info.build)(&params, &ranks)?;
        }
        Some((budget, copies)) => {
            let guest = (info.build)(&params, &ranks)?.on_vcpus(vcpus as usize);
            let footprint = VmFootprint::of(&guest, vcpus as usize, &ranks).with_distributions(web, con);
            budget.vms(at, footprint, copies)?;
        }
        None => {
            (info.build)(&params, &ranks)?;
        }
    }
    let working_set_bytes = match working_set_kb {
        None => working_set::default_bytes(info.name, &params, &ranks),
        Some(Value::Int(kb)) if (0..=MAX_WORKING_SET_KB).contains(&kb) => kb as u64 * 1024,
        Some(other) => {
            return Err(err(
                format!("{wpath}.{}", working_set::KEY),
                format!("expected an integer number of KiB in 0..={MAX_WORKING_SET_KB}, got {other}"),
            ))
        }
    };
    Ok(VmSpec {
        name: String::new(),
        vcpus: vcpus as usize,
        weight,
        cap,
        vm_type,
        guest: Guest::Workload(info, params),
        pv,
        slice_request_ns,
        start: 0,
        stop: None,
        host: 0,
        job: None,
        ranks,
        working_set_bytes,
        tick,
    })
}
