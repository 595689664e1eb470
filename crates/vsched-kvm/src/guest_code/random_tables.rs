//! Random draws of a guest program, made on the host before the guest runs.
//!
//! The guest has no random numbers of its own: every instruction that draws (a jittered or
//! exponential compute, a lock chosen uniformly among the VM's) gets a table of draws in
//! guest memory that the guest code steps through, starting over at its end. The draws come
//! from a `vsched_engine` stream seeded from (seed, global vCPU index) and follow the
//! simulator's distributions exactly (`Dur::sample`, `gen_range(0..locks)`), so a scenario
//! and seed give the same tables, byte for byte, on every run. What differs from the
//! simulator is the order: it draws from one stream per VM in the order its threads happen
//! to execute, here each vCPU draws its own tables one after the other — the same
//! distributions, not the same sequence.

use vsched_engine::{Rng, RngStreams, StreamRng};
use vsched_model::{Dur, Instr, LockChoice, FOREVER};

use super::layout::{LINE, LOCKS, MAX_TABLE_LEN, SHARED_ADDR};

/// The draws of one random instruction of a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RandomTable {
    /// Index of the instruction in its program.
    pub instr: usize,
    /// TSC cycles of compute, or guest addresses of locks.
    pub entries: Vec<u64>,
}

/// Whether instruction `instr` draws each time it runs.
pub fn is_random(instr: &Instr) -> bool {
    match instr {
        Instr::Compute(Dur::Jitter { cv, .. }) | Instr::Io(Dur::Jitter { cv, .. }) => *cv > 0.0,
        Instr::Compute(Dur::Exp { .. }) | Instr::Io(Dur::Exp { .. }) => true,
        Instr::Lock { choice: LockChoice::Uniform, .. } => true,
        _ => false,
    }
}

/// The random stream of global vCPU `vcpu` for seed `seed`.
pub fn vcpu_stream(seed: u64, vcpu: usize) -> StreamRng {
    RngStreams::new(seed).stream(vcpu as u64)
}

/// The tables of `program`, in program order: as many draws as the instruction runs, at most
/// `MAX_TABLE_LEN` (a loop that runs forever gets the maximum).
pub fn draw_tables(program: &[Instr], locks: u32, tsc_hz: u64, rng: &mut StreamRng) -> Vec<RandomTable> {
    let runs = run_counts(program);
    let mut tables = Vec::new();
    for (i, instr) in program.iter().enumerate().filter(|(_, instr)| is_random(instr)) {
        let len = runs[i].map_or(MAX_TABLE_LEN, |n| n.min(MAX_TABLE_LEN));
        let entries = (0..len)
            .map(|_| match instr {
                Instr::Compute(dur) | Instr::Io(dur) => ns_to_cycles(dur.sample(rng), tsc_hz),
                _ => SHARED_ADDR + LOCKS + LINE * u64::from(rng.gen_range(0..locks)),
            })
            .collect();
        tables.push(RandomTable { instr: i, entries });
    }
    tables
}

/// How many times each instruction of `program` runs (None: forever), from its loops.
fn run_counts(program: &[Instr]) -> Vec<Option<u64>> {
    let mut enclosing: Vec<Option<u64>> = vec![Some(1)];
    let mut counts = Vec::with_capacity(program.len());
    for instr in program {
        let here = *enclosing.last().expect("the program level stays open");
        counts.push(here);
        match instr {
            Instr::Repeat { times, .. } => {
                let inner = match (here, times) {
                    (Some(outer), Some(n)) => Some(outer.saturating_mul(*n)),
                    _ => None,
                };
                enclosing.push(inner);
            }
            Instr::EndRepeat if enclosing.len() > 1 => {
                enclosing.pop();
            }
            _ => {}
        }
    }
    counts
}

/// Nanoseconds as TSC cycles at `tsc_hz`, rounded to the nearest; `FOREVER` and beyond
/// saturate.
pub fn ns_to_cycles(ns: u64, tsc_hz: u64) -> u64 {
    if ns >= FOREVER {
        return u64::MAX;
    }
    let cycles = (u128::from(ns) * u128::from(tsc_hz) + 500_000_000) / 1_000_000_000;
    u64::try_from(cycles).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use vsched_model::{Instr, ProgramBuilder};

    use super::*;

    fn spinlock_program(iterations: u64) -> vsched_model::Program {
        let mut b = ProgramBuilder::new();
        b.repeat(Some(iterations))
            .push(Instr::Compute(Dur::Jitter { mean: 50_000, cv: 0.2 }))
            .push(Instr::Lock { choice: LockChoice::Uniform, kernel: false })
            .push(Instr::Compute(Dur::Fixed(10_000)))
            .push(Instr::Unlock)
            .end_repeat();
        b.build()
    }

    #[test]
    fn tables_are_as_long_as_the_runs_and_reproducible() {
        let program = spinlock_program(100);
        let tables = draw_tables(&program, 4, 1_000_000_000, &mut vcpu_stream(7, 3));
        assert_eq!(tables.iter().map(|t| (t.instr, t.entries.len())).collect::<Vec<_>>(), [(1, 100), (2, 100)]);
        assert_eq!(tables, draw_tables(&program, 4, 1_000_000_000, &mut vcpu_stream(7, 3)));
        assert_ne!(tables, draw_tables(&program, 4, 1_000_000_000, &mut vcpu_stream(7, 4)));
        let locks: Vec<u64> = (0..4).map(|l| SHARED_ADDR + LOCKS + LINE * l).collect();
        assert!(tables[1].entries.iter().all(|a| locks.contains(a)));
        for l in &locks {
            assert!(tables[1].entries.contains(l), "100 uniform draws over 4 locks reach each");
        }
    }

    #[test]
    fn draws_follow_the_simulators_distribution() {
        // The same stream fed to Dur::sample gives the same values: the table is those draws
        // at 1 cycle per ns.
        let dur = Dur::Jitter { mean: 50_000, cv: 0.2 };
        let program = spinlock_program(1000);
        let tables = draw_tables(&program, 1, 1_000_000_000, &mut vcpu_stream(1, 0));
        let mut rng = vcpu_stream(1, 0);
        let expected: Vec<u64> = (0..1000).map(|_| dur.sample(&mut rng)).collect();
        assert_eq!(tables[0].entries, expected);
    }

    #[test]
    fn a_loop_forever_gets_the_longest_table_and_fixed_computes_none() {
        let mut b = ProgramBuilder::new();
        b.repeat(None).push(Instr::Compute(Dur::Exp { mean: 1000 })).push(Instr::Compute(Dur::Fixed(5))).end_repeat();
        let tables = draw_tables(&b.build(), 0, 2_000_000_000, &mut vcpu_stream(0, 0));
        assert_eq!(tables.len(), 1);
        assert_eq!(tables[0].entries.len() as u64, MAX_TABLE_LEN);
    }

    #[test]
    fn nanoseconds_become_cycles_at_the_tsc_rate() {
        assert_eq!(ns_to_cycles(20_000_000, 2_450_000_000), 49_000_000);
        assert_eq!(ns_to_cycles(1, 2_500_000_000), 3, "2.5 rounds to the nearest");
        assert_eq!(ns_to_cycles(FOREVER, 3_000_000_000), u64::MAX);
    }
}
