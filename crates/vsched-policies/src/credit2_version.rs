//! Xen version profiles for credit2 (`xen_version` parameter of `credit2`).
//!
//! credit2 has been Xen's default scheduler since 4.12 (RELEASE-4.12.0 `xen/common/Kconfig`
//! L265: `default SCHED_CREDIT2_DEFAULT`). Its rules changed a few times since; a profile
//! gathers the ones that move a schedule, each checked against `credit2.c` at the tag named
//! (RELEASE-4.12.0 `xen/common/sched_credit2.c`; from 4.14 `xen/common/sched/credit2.c`):
//!
//! | rule                               | 4.12             | 4.14             | 4.21 / current (4.22) |
//! |------------------------------------|------------------|------------------|-----------------------|
//! | credit floor (`CSCHED2_CREDIT_MIN`)| none, idle −2^30 | −10 ms, idle −10 ms − 1 | same           |
//! | reset trigger                      | no unit skipped and snext ≤ 0 | max(snext, head) ≤ 0 | same     |
//! | CPUs per runqueue                  | unbounded        | ≤ 16, spread evenly | same               |
//! | `runq_candidate` scan              | first eligible unit decides | same | stops at first unit not better (4.16) |
//! | load of a unit that runs on        | not updated      | not updated      | updated (4.16)        |
//! | `csched2_runtime` waiter           | head of runqueue | head of runqueue | head, or the unit being switched out (4.21) |
//!
//! Sources, by rule:
//! - Credit floor: commit 36f3662f27 ("credit2: avoid vCPUs to ever reach lower credits than
//!   idle", first in 4.14.0): `t2c_update` floors at `CSCHED2_CREDIT_MIN` (RELEASE-4.22.0
//!   L816-L828), `CSCHED2_IDLE_CREDIT` becomes `CREDIT_MIN - 1` (L256), and `reset_credit`
//!   adds 2 × `CREDIT_INIT` when snext sits at the floor (L1783-L1804) instead of 4.12's
//!   multiplier `m = 1 + (-credit) / CREDIT_INIT` (RELEASE-4.12.0 L1615-L1640).
//! - Reset trigger: commit dae7b62e97 ("credit2: fix credit reset happening too few times",
//!   4.14.0): `csched2_schedule` resets when `max(snext->credit, head->credit) <= 0`
//!   (RELEASE-4.22.0 L3714-L3720); 4.12 reset when `skipped_vcpus == 0 && snext->credit <= 0`
//!   (RELEASE-4.12.0 L3573), `skipped` counting units passed over for affinity, a pending
//!   tickle or migration resistance (`runq_candidate`, L3360-L3390).
//! - CPUs per runqueue: commit 8e2aa76dc1 (4.14.0), `sched_credit2_max_cpus_runqueue` = 16
//!   (`MAX_CPUS_RUNQ`, RELEASE-4.22.0 L495) and `cpu_add_to_runqueue` (L933) which spreads CPUs
//!   evenly among `⌈n / 16⌉` runqueues; 4.12's `cpu_to_runqueue` (L849) has no bound.
//! - Scan: commit 07b0eb5d0e (4.16.0) moves the credit test to the top of the loop of
//!   `runq_candidate` (RELEASE-4.22.0 L3493: `if ( !yield && svc->credit <= snext->credit )
//!   break;`); before, the first unit that passes the affinity, tickle and resistance checks
//!   decides, taken if better, else the scan ends (RELEASE-4.14.0 `runq_candidate`).
//! - Load when running on: commit 89052b9fa2 (4.16.0), `update_load(ops, rqd, snext, 0, now)`
//!   when snext is the current unit (RELEASE-4.22.0 L3693).
//! - Runtime: commit ae648e9f80 ("factor in previous active unit's credit in
//!   csched2_runtime()", 4.21.0): the waiter a slice is cut against is the larger of the head
//!   of the runqueue and the unit being switched out (`inflight_credit`, RELEASE-4.22.0
//!   L3281-L3340, L3725-L3731). Before, two busy units alone on a pCPU each run 10 ms
//!   (`CSCHED2_MAX_TIMER`), since the one switched out is not yet queued when the slice is cut.
//!
//! Between 4.21.0 and 4.22.0 `credit2.c` changed in comments only (commit 6e48abe2f0), so
//! "4.21" and "current" are the same rules. Not in any profile (the same at every tag read):
//! the constants of `credit2.rs`, `runq_tickle`, `balance_load`, `csched2_res_pick`, caps.
//! 4.18's commit 1f5747ee92 (`credit2_runqueue=all` kept as one runqueue up to 16 CPUs
//! whatever the SMT siblings) is applied in every profile from 4.14: without SMT it changes
//! nothing.

use vsched_model::{ConfigError, Params};

/// The rules of credit2 that depend on the release.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Credit2Profile {
    /// Credit never falls below `CSCHED2_CREDIT_MIN` (4.14).
    pub(crate) credit_floor: bool,
    /// The reset fires when the best of snext and the head has no credit left (4.14); else
    /// when snext has none and no unit was skipped.
    pub(crate) reset_on_top_credit: bool,
    /// Runqueues hold at most `sched_credit2_max_cpus_runqueue` CPUs (4.14).
    pub(crate) bounded_runqueues: bool,
    /// `runq_candidate` stops at the first unit not better than the candidate (4.16).
    pub(crate) scan_stops_on_credit: bool,
    /// A unit that runs on has its load updated (4.16).
    pub(crate) load_on_continue: bool,
    /// `csched2_runtime` also cuts the slice against the unit switched out (4.21).
    pub(crate) inflight_runtime: bool,
}

/// The accepted `xen_version` values of credit2.
pub const NAMES: [&str; 4] = ["4.12", "4.14", "4.21", "current"];

const XEN_4_12: Credit2Profile = Credit2Profile {
    credit_floor: false,
    reset_on_top_credit: false,
    bounded_runqueues: false,
    scan_stops_on_credit: false,
    load_on_continue: false,
    inflight_runtime: false,
};

const XEN_4_14: Credit2Profile =
    Credit2Profile { credit_floor: true, reset_on_top_credit: true, bounded_runqueues: true, ..XEN_4_12 };

/// 4.21 and 4.22 (current).
const XEN_4_21: Credit2Profile =
    Credit2Profile { scan_stops_on_credit: true, load_on_continue: true, inflight_runtime: true, ..XEN_4_14 };

/// The profile named by `xen_version` in `params`.
pub(crate) fn from_params(params: &Params) -> Result<Credit2Profile, ConfigError> {
    Ok(match params.choice("xen_version", &NAMES)?.as_str() {
        "4.12" => XEN_4_12,
        "4.14" => XEN_4_14,
        _ => XEN_4_21,
    })
}
