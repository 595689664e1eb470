//! Weng's slot model (seed 003, "The Hybrid Scheduling Framework for Virtual Machine
//! Systems", VEE'09, §2.3–2.4): an exact, tiny model of a concurrent job on an SMP VM, used
//! to check the paper's analysis against our simulator's intuition.
//!
//! # The model
//! Time is cut into slots; slot `t` is the interval `[t, t + 1)`. A concurrent job J has
//! |J| tasks; task k runs on vCPU k of VM V_i (one task per vCPU, |J| <= |V_i|) and has
//! |J_k| phases of exactly one slot each (§2.4: `J_k^m.e + J_k^m.s = 1`). Tasks synchronize
//! after every phase: phase m + 1 of any task starts only after phase m of every task has
//! finished (a task with fewer than m phases counts as finished with phase m). In a slot in
//! which its vCPU is scheduled, a task runs its next phase if the synchronization allows it;
//! otherwise the slot is *wasted* (the vCPU waits at the synchronization, §2.2). The VM has
//! weight proportion ω on |P| pCPUs, so each vCPU is entitled to `r = |P| ω / |V_i|` of
//! the slots (a vCPU cannot use more than every slot, so `r` is capped at 1).
//!
//! Two strategies give each vCPU its share with |Lag| <= 1 (Eq. 1, `Lag(t) = t r -
//! Received(0, t)`):
//! - **CPS** (co-proportional share): all vCPUs run together, in slot `t` iff
//!   `floor((t + 1) r) > floor(t r)`, so Received(0, t) = floor(t r) and 0 <= Lag < 1.
//! - **PS** (proportional share): every vCPU follows the same fair sequence, each with its
//!   own phase offset `o_j` (vCPU j runs in slot `t` iff CPS would run in slot `t + o_j`), as
//!   per-pCPU run queues with different competitors give; |Lag| < 1 for each vCPU, but the
//!   vCPUs are not aligned, so slots are wasted at the synchronizations.
//!
//! Everything is integer arithmetic on exact ratios: no floating point decides a slot.

/// A non-negative rational number `num / den`, kept in lowest terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    pub num: u64,
    pub den: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `ceil(a / b)` for `b > 0`.
fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b)
}

impl Ratio {
    /// `num / den` in lowest terms. Panics if `den` is 0.
    pub fn new(num: u64, den: u64) -> Ratio {
        assert!(den > 0, "a ratio needs a positive denominator");
        let g = gcd(num, den).max(1);
        Ratio { num: num / g, den: den / g }
    }

    /// `floor(t × self)`.
    pub fn floor_times(self, t: u64) -> u64 {
        (t as u128 * self.num as u128 / self.den as u128) as u64
    }
}

/// The host and the VM: |P| pCPUs, |V_i| vCPUs, weight proportion ω (0 < ω <= 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotSetup {
    pub pcpus: u64,
    pub vcpus: u64,
    pub weight: Ratio,
}

impl SlotSetup {
    /// The VM's setup; panics on an empty host or VM, or ω outside (0, 1].
    pub fn new(pcpus: u64, vcpus: u64, weight: Ratio) -> SlotSetup {
        assert!(pcpus > 0 && vcpus > 0, "the model needs at least one pCPU and one vCPU");
        assert!(weight.num > 0 && weight.num <= weight.den, "the weight proportion must be in (0, 1]");
        SlotSetup { pcpus, vcpus, weight }
    }

    /// Each vCPU's fair share of slots, `|P| ω / |V_i|`, before capping.
    pub fn share(&self) -> Ratio {
        Ratio::new(self.pcpus * self.weight.num, self.vcpus * self.weight.den)
    }

    /// The rate a vCPU is scheduled at: its share, capped at 1 (one slot per slot).
    pub fn rate(&self) -> Ratio {
        let s = self.share();
        if s.num > s.den {
            Ratio::new(1, 1)
        } else {
            s
        }
    }

    /// Theorem 2: the CPS makespan `ceil(max|J_k| × |V_i| / (|P| × ω))` of a job whose
    /// longest task has `max_phases` phases. Meaningful when the share is at most 1 (a larger
    /// share cannot be used: the makespan is then `max_phases`).
    pub fn theorem2_makespan(&self, max_phases: u64) -> u64 {
        let num = max_phases as u128 * self.vcpus as u128 * self.weight.den as u128;
        ceil_div(num, self.pcpus as u128 * self.weight.num as u128) as u64
    }

    /// Theorem 1: the supremum of the PS makespan, `max|J_k| × ceil(2 |Lag| |V_i| / (|P| ω))`,
    /// for a maximal deviation `lag`.
    pub fn theorem1_bound(&self, max_phases: u64, lag: Ratio) -> u64 {
        let num = 2 * lag.num as u128 * self.vcpus as u128 * self.weight.den as u128;
        let den = lag.den as u128 * self.pcpus as u128 * self.weight.num as u128;
        (max_phases as u128 * ceil_div(num, den)) as u64
    }
}

/// A schedule played out: what ran when, and what it achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    /// For each vCPU, the slots in which it was scheduled (ascending).
    pub runs: Vec<Vec<u64>>,
    /// For each task, the slot in which it ran each of its phases (`work[k][m]`: phase m + 1).
    pub work: Vec<Vec<u64>>,
    /// `step_ends[m]` is T_{m+1}: the slot boundary at which every task had finished phase
    /// m + 1 (the synchronization point). `step_ends.len()` steps completed.
    pub step_ends: Vec<u64>,
    /// Scheduled slots spent waiting at a synchronization.
    pub wasted: u64,
    /// Scheduled slots of vCPUs with nothing left to run (finished task, or no task).
    pub idle: u64,
    /// The slots played: the horizon, or the makespan if the job finished first.
    pub slots: u64,
    /// When the last phase finished, if it did.
    pub makespan: Option<u64>,
}

impl Execution {
    /// Steps (phases of every task) completed by time `t`.
    pub fn steps_by(&self, t: u64) -> usize {
        self.step_ends.iter().filter(|&&e| e <= t).count()
    }
}

/// Plays a schedule: `scheduled(v, t)` says whether vCPU `v` runs in slot `t`. Task k (of
/// `phases.len() <= vcpus` tasks) runs on vCPU k with `phases[k]` phases. Stops at `horizon`
/// slots or when the job finishes.
pub fn execute(phases: &[u64], vcpus: usize, horizon: u64, scheduled: impl Fn(usize, u64) -> bool) -> Execution {
    assert!(phases.len() <= vcpus, "the model runs one task per vCPU (|J| <= |V_i|)");
    let steps = phases.iter().copied().max().unwrap_or(0);
    let mut ex = Execution {
        runs: vec![Vec::new(); vcpus],
        work: vec![Vec::new(); phases.len()],
        step_ends: Vec::new(),
        wasted: 0,
        idle: 0,
        slots: 0,
        makespan: (steps == 0).then_some(0),
    };
    let mut done = vec![0u64; phases.len()];
    // Steps every task has finished (a task with fewer phases counts as finished).
    let mut level = 0u64;
    let mut t = 0;
    while t < horizon && level < steps {
        for (v, runs) in ex.runs.iter_mut().enumerate() {
            if !scheduled(v, t) {
                continue;
            }
            runs.push(t);
            match (phases.get(v), done.get(v)) {
                (Some(&n), Some(&d)) if d < n => {
                    // Phase d + 1 may start once step d is complete for every task.
                    if level >= d {
                        ex.work[v].push(t);
                    } else {
                        ex.wasted += 1;
                    }
                }
                _ => ex.idle += 1,
            }
        }
        // Phases finish at the end of the slot: count them after every vCPU has looked.
        for (k, w) in ex.work.iter().enumerate() {
            done[k] = w.len() as u64;
        }
        t += 1;
        while level < steps && (0..phases.len()).all(|k| done[k] >= (level + 1).min(phases[k])) {
            level += 1;
            ex.step_ends.push(t);
        }
    }
    ex.slots = t;
    if level == steps {
        ex.makespan = Some(ex.step_ends.last().copied().unwrap_or(0));
    }
    ex
}

/// Whether the fair sequence of rate `r` runs in slot `t`: `floor((t + 1) r) > floor(t r)`.
pub fn fair_slot(r: Ratio, t: u64) -> bool {
    r.floor_times(t + 1) > r.floor_times(t)
}

/// CPS: every vCPU runs in the slots of the fair sequence, all together.
pub fn cps(setup: &SlotSetup, phases: &[u64], horizon: u64) -> Execution {
    let r = setup.rate();
    execute(phases, setup.vcpus as usize, horizon, |_, t| fair_slot(r, t))
}

/// PS: vCPU j runs the fair sequence shifted by `offsets[j]` slots (missing offsets are 0).
pub fn ps(setup: &SlotSetup, phases: &[u64], offsets: &[u64], horizon: u64) -> Execution {
    let r = setup.rate();
    execute(phases, setup.vcpus as usize, horizon, |v, t| fair_slot(r, t + offsets.get(v).copied().unwrap_or(0)))
}

/// A horizon long enough for any schedule here to finish: every vCPU runs at least once
/// every `ceil(1 / r)` slots, so each step takes at most that long after the previous one.
fn enough_slots(setup: &SlotSetup, phases: &[u64]) -> u64 {
    let r = setup.rate();
    let gap = r.den.div_ceil(r.num);
    (phases.iter().copied().max().unwrap_or(0) + 2) * (gap + 1)
}

/// The CPS makespan, by playing the schedule.
pub fn cps_makespan(setup: &SlotSetup, phases: &[u64]) -> u64 {
    cps(setup, phases, enough_slots(setup, phases)).makespan.expect("CPS finishes within its bound")
}

/// The PS makespan with per-vCPU offsets, by playing the schedule.
pub fn ps_makespan(setup: &SlotSetup, phases: &[u64], offsets: &[u64]) -> u64 {
    let extra = offsets.iter().copied().max().unwrap_or(0);
    ps(setup, phases, offsets, enough_slots(setup, phases) + extra).makespan.expect("PS finishes within its bound")
}

/// The largest |Lag(t, v)| over `t` in `0..=until` (Eq. 1) of a vCPU scheduled in `runs`
/// with fair share `r`, exactly.
pub fn max_abs_lag(runs: &[u64], r: Ratio, until: u64) -> Ratio {
    let mut worst = 0u128;
    for t in 0..=until {
        let received = runs.iter().filter(|&&s| s < t).count() as u128;
        let fluid = t as u128 * r.num as u128;
        worst = worst.max(fluid.abs_diff(received * r.den as u128));
    }
    Ratio::new(worst as u64, r.den)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_reduce_and_floor_exactly() {
        assert_eq!(Ratio::new(6, 20), Ratio::new(3, 10));
        assert_eq!(Ratio::new(3, 10).floor_times(10), 3);
        assert_eq!(Ratio::new(3, 10).floor_times(9), 2);
        assert_eq!(Ratio::new(0, 5), Ratio { num: 0, den: 1 });
    }

    #[test]
    fn a_job_without_phases_is_done_at_once() {
        let ex = execute(&[0, 0], 2, 10, |_, _| true);
        assert_eq!(ex.makespan, Some(0));
        assert_eq!(ex.slots, 0);
    }
}
