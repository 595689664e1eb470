//! A VM's paravirtual keys (`[[vm]]` and `[[virtual_cluster]]`): `pv_spinlocks`,
//! `pv_steal_time`, `pv_tlb_flush`, `pv_sched_yield`, `pv_critical_sections`, and the slice
//! request `sched_slice_us`, checked with one-line errors naming the field
//! (`vsched_model::Paravirt` says what each feature does).

use vsched_model::{ConfigError, Paravirt, Time, NS_PER_US};

use crate::scenario::err;

/// The keys as a VM table gives them.
#[derive(Default)]
pub(crate) struct PvKeys {
    pub(crate) spinlocks: Option<bool>,
    pub(crate) steal_time: Option<bool>,
    pub(crate) tlb_flush: Option<bool>,
    pub(crate) sched_yield: Option<bool>,
    pub(crate) critical_sections: Option<bool>,
    pub(crate) sched_slice_us: Option<f64>,
    pub(crate) haltpoll: crate::halt_poll::GuestPollKeys,
}

/// Linux clamps a requested slice to [0.1 ms, 100 ms] (`__setscheduler_params`,
/// kernel/sched/syscalls.c, Linux 6.12, commit 857b158dc5e8); we refuse what it would clamp.
const SLICE_US: std::ops::RangeInclusive<f64> = 100.0..=100_000.0;

/// The features and the slice request a VM table asks for (`at` names its fields).
pub(crate) fn paravirt(at: &dyn Fn(&str) -> String, keys: &PvKeys) -> Result<(Paravirt, Option<Time>), ConfigError> {
    let pv = Paravirt {
        spinlocks: keys.spinlocks.unwrap_or(false),
        steal_time: keys.steal_time.unwrap_or(false),
        tlb_flush: keys.tlb_flush.unwrap_or(false),
        sched_yield: keys.sched_yield.unwrap_or(false),
        critical_sections: keys.critical_sections.unwrap_or(false),
        haltpoll: crate::halt_poll::guest_haltpoll(at, &keys.haltpoll)?,
    };
    // Linux turns both on only when the host also offers steal time, whose `preempted` flag
    // they read (`pv_tlb_flush_supported`, `pv_sched_yield_supported`, arch/x86/kernel/kvm.c).
    for (key, on) in [("pv_tlb_flush", pv.tlb_flush), ("pv_sched_yield", pv.sched_yield)] {
        if on && !pv.steal_time {
            return Err(err(
                at(key),
                "needs pv_steal_time = true (Linux reads the preempted flag of steal time to use it)",
            ));
        }
    }
    let slice = match keys.sched_slice_us {
        None => None,
        Some(us) if us.is_finite() && SLICE_US.contains(&us) => Some((us * NS_PER_US as f64).round() as Time),
        Some(us) => {
            return Err(err(
                at("sched_slice_us"),
                format!("expected microseconds in 100..=100000 (EEVDF's clamp), got {}", vsched_model::number(us)),
            ))
        }
    };
    Ok((pv, slice))
}
