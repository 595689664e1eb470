//! The watchdog: a run whose simulated time stops advancing is stopped with an error that
//! names the likely culprit, instead of hanging (sched_ext's watchdog does the same for a
//! BPF scheduler that stops scheduling: `scx_watchdog_workfn` in kernel/sched/ext.c ejects
//! it after `scx_watchdog_timeout`).
//!
//! Simulated time stands still for two reasons: a guest whose program loops in steps of no
//! duration (a compute of 0 ns, an I/O of 0 ns), which the scenario made; or a policy that
//! re-arms a timer, a slice or a reschedule at the same instant forever, a policy bug. Many
//! events at one instant are normal (every pCPU's first decision at time 0, a barrier
//! releasing thousands of threads), so the bound grows with the size of the simulation and
//! lies far above what any of them needs. When it is reached, the last [`TALLY_EVENTS`]
//! events' kinds decide whom to blame.

use vsched_engine::Time;

use crate::ids::DomId;

/// Events at one instant allowed before the watchdog looks, per vCPU, pCPU or thread of the
/// simulation, beyond a floor: no scenario of ours comes near (a 4,096-thread barrier release
/// at one instant is some 10 events per thread).
const EVENTS_PER_ENTITY: u64 = 1_000;
const EVENTS_FLOOR: u64 = 1_000_000;
/// How many of the stuck instant's last events are classified to name a culprit.
const TALLY_EVENTS: u64 = 4_096;

/// Whom an event at the stuck instant points to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Culprit {
    /// A guest event of this domain (its progress, a wake-up, an interrupt, a timer).
    Guest(DomId),
    /// A message or disk request moving through the host's I/O path.
    Io,
    /// A policy timer, tick, slice end or reschedule.
    Policy(&'static str),
}

pub(super) struct Watchdog {
    limit: u64,
    instant: Time,
    same: u64,
    /// During the tally: events per culprit, in order of first appearance.
    tally: Vec<(Culprit, u64)>,
}

impl Watchdog {
    /// A watchdog for a simulation of `entities` vCPUs, pCPUs and threads.
    pub(super) fn new(entities: usize) -> Self {
        let limit = EVENTS_FLOOR.saturating_add(EVENTS_PER_ENTITY.saturating_mul(entities as u64));
        Watchdog { limit, instant: 0, same: 0, tally: Vec::new() }
    }

    /// Notes an event handled at `now`; true if the instant has lasted long enough that the
    /// caller must say whom the event points to ([`Watchdog::blame`]).
    // Branch-free: whether an event shares the last one's instant is a coin toss on the
    // standard scenario, where a branch on it was missed on 0.43 of the events in
    // cachegrind's branch simulation.
    pub(super) fn tick(&mut self, now: Time) -> bool {
        let same_instant = now == self.instant;
        self.same = if same_instant { self.same + 1 } else { 1 };
        self.instant = now;
        self.same > self.limit - TALLY_EVENTS
    }

    /// Counts `culprit` for the current event. Once the instant has lasted `limit` events,
    /// returns why simulated time stopped: the culprit of most of the tallied events.
    pub(super) fn blame(&mut self, culprit: Culprit) -> Option<Culprit> {
        if self.same == self.limit - TALLY_EVENTS + 1 {
            self.tally.clear(); // the first tallied event of this instant
        }
        match self.tally.iter_mut().find(|(c, _)| *c == culprit) {
            Some((_, n)) => *n += 1,
            None => self.tally.push((culprit, 1)),
        }
        if self.same < self.limit {
            return None;
        }
        // The most frequent culprit; the first seen among equals.
        let mut best = self.tally[0];
        for &(c, n) in &self.tally[1..] {
            if n > best.1 {
                best = (c, n);
            }
        }
        Some(best.0)
    }

    /// Events the instant has lasted.
    pub(super) fn events(&self) -> u64 {
        self.same
    }
}
