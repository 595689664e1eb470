//! Test support for message-passing workloads: a static checker that runs the programs of
//! every rank of a job together, ignoring time.
//!
//! Each rank's program is interpreted (loops expanded); `Send` appends to the FIFO of its
//! (source, destination) pair, `Recv` takes the head of its pair's FIFO or blocks. Ranks run
//! round-robin, each until it blocks or exits. Because a receive names its source and sends
//! never block, the ranks form a Kahn network: which message each receive gets, and whether
//! the job deadlocks, is the same under every interleaving, so one run decides it for every
//! schedule the simulator could produce.
//!
//! It also keeps logical time: compute blocks take their mean duration and messages arrive
//! at once, so a rank's finish time is its critical path with free communication and a
//! pCPU per rank (what shows a wavefront's pipeline fill).

use std::collections::{BTreeMap, VecDeque};

use vsched_model::{BarrierWait, ConfigError, Dur, Instr, Params, Program, Value};

use crate::{Ranks, WorkloadInfo};

/// The programs of every rank of one job, rank order.
pub(crate) struct Job {
    pub programs: Vec<Program>,
}

impl Job {
    pub fn from_programs(programs: Vec<Program>) -> Job {
        Job { programs }
    }

    /// Builds a job of `world` ranks split into VMs of `per_vm` vCPUs (the last VM takes
    /// the rest), checking what every NPB model promises of each VM's guest.
    pub fn build(
        info: &WorkloadInfo,
        given: &[(&str, Value)],
        world: usize,
        per_vm: usize,
    ) -> Result<Job, ConfigError> {
        let params = params(info, given)?;
        let mut programs = Vec::with_capacity(world);
        let mut first = 0;
        while first < world {
            let vcpus = per_vm.min(world - first);
            let spec = (info.build)(&params, &Ranks { vcpus, first, world })?;
            assert!(spec.finite, "{}: not finite", info.name);
            assert_eq!(spec.locks, 0, "{}: uses locks", info.name);
            assert_eq!(spec.programs.len(), vcpus, "{}: one program per vCPU", info.name);
            programs.extend(spec.programs);
            first += vcpus;
        }
        Ok(Job { programs })
    }
}

/// `given` checked against the workload's parameter specs, at path "w".
pub(crate) fn params(info: &WorkloadInfo, given: &[(&str, Value)]) -> Result<Params, ConfigError> {
    let given: BTreeMap<String, Value> = given.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    Params::check("w", info.params, &given)
}

/// What a complete run did, per rank.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub sent: Vec<u64>,
    pub received: Vec<u64>,
    pub bytes_sent: Vec<u64>,
    /// Sum of the mean durations of the compute blocks executed, ns.
    pub compute_ns: Vec<f64>,
    /// Logical finish time, ns: compute at its mean, messages instantaneous.
    pub finish_ns: Vec<f64>,
    /// Messages per (source, destination).
    pub pairs: BTreeMap<(usize, usize), u64>,
    /// The distinct waiting modes of all receives.
    pub waits: Vec<BarrierWait>,
    /// Per rank: when it exited, had it heard (directly or through others) from every rank
    /// since the start? Vector clocks; only kept for jobs of at most `CLOCK_LIMIT` ranks.
    pub heard_from_all: Vec<bool>,
}

impl Stats {
    pub fn total_sent(&self) -> u64 {
        self.sent.iter().sum()
    }

    /// The job's logical completion time, ns.
    pub fn makespan_ns(&self) -> f64 {
        self.finish_ns.iter().copied().fold(0.0, f64::max)
    }
}

const CLOCK_LIMIT: usize = 32;

struct Thread {
    pc: usize,
    /// Open loops: (index of the Repeat, iterations left including the current one).
    loops: Vec<(usize, u64)>,
    done: bool,
    clock: Vec<u32>,
    now: f64,
}

/// Runs `job` to completion; an error (one line) on a deadlock, an unreceived message, or an
/// instruction a message-passing model should not contain.
pub(crate) fn run(job: &Job) -> Result<Stats, String> {
    let world = job.programs.len();
    let clocks = world <= CLOCK_LIMIT;
    let mut threads: Vec<Thread> = (0..world)
        .map(|r| Thread {
            pc: 0,
            loops: Vec::new(),
            done: false,
            clock: if clocks { (0..world).map(|i| u32::from(i == r)).collect() } else { Vec::new() },
            now: 0.0,
        })
        .collect();
    let mut queues: Vec<VecDeque<(f64, Vec<u32>)>> = (0..world * world).map(|_| VecDeque::new()).collect();
    let mut st = Stats {
        sent: vec![0; world],
        received: vec![0; world],
        bytes_sent: vec![0; world],
        compute_ns: vec![0.0; world],
        ..Stats::default()
    };
    loop {
        let mut progress = false;
        for r in 0..world {
            let prog = &job.programs[r];
            loop {
                let t = &mut threads[r];
                if t.done {
                    break;
                }
                let Some(instr) = prog.get(t.pc) else {
                    return Err(format!("rank {r} ran off the end of its program"));
                };
                match *instr {
                    Instr::Compute(d) => {
                        let mean = match d {
                            Dur::Fixed(x) | Dur::Jitter { mean: x, .. } | Dur::Exp { mean: x } => x as f64,
                        };
                        st.compute_ns[r] += mean;
                        t.now += mean;
                    }
                    Instr::Send { to, bytes } => {
                        let to = to as usize;
                        if to >= world || to == r {
                            return Err(format!("rank {r} sends to rank {to} of {world}"));
                        }
                        let stamp = t.clock.clone();
                        queues[r * world + to].push_back((t.now, stamp));
                        st.sent[r] += 1;
                        st.bytes_sent[r] += bytes;
                        *st.pairs.entry((r, to)).or_default() += 1;
                    }
                    Instr::Recv { from, wait } => {
                        let from = from as usize;
                        if from >= world || from == r {
                            return Err(format!("rank {r} receives from rank {from} of {world}"));
                        }
                        let Some((sent_at, stamp)) = queues[from * world + r].pop_front() else {
                            break; // blocked: stay on this Recv
                        };
                        t.now = t.now.max(sent_at);
                        for (mine, theirs) in t.clock.iter_mut().zip(stamp) {
                            *mine = (*mine).max(theirs);
                        }
                        st.received[r] += 1;
                        if !st.waits.contains(&wait) {
                            st.waits.push(wait);
                        }
                    }
                    Instr::Repeat { times: Some(n), .. } => t.loops.push((t.pc, n)),
                    Instr::EndRepeat => {
                        let (start, left) = t.loops.last_mut().ok_or(format!("rank {r}: EndRepeat outside a loop"))?;
                        if *left > 1 {
                            *left -= 1;
                            t.pc = *start;
                        } else {
                            t.loops.pop();
                        }
                    }
                    Instr::Exit => {
                        t.done = true;
                        progress = true;
                        break;
                    }
                    ref other => return Err(format!("rank {r}: unexpected instruction {other:?}")),
                }
                t.pc += 1;
                progress = true;
            }
        }
        if threads.iter().all(|t| t.done) {
            break;
        }
        if !progress {
            let blocked: Vec<String> = threads
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.done)
                .map(|(r, t)| match job.programs[r][t.pc] {
                    Instr::Recv { from, .. } => format!("{r}<-{from}"),
                    _ => format!("{r}@{}", t.pc),
                })
                .collect();
            return Err(format!("deadlock: ranks waiting (rank<-source): {}", blocked.join(" ")));
        }
    }
    for s in 0..world {
        for d in 0..world {
            let left = queues[s * world + d].len();
            if left > 0 {
                return Err(format!("{left} message(s) from rank {s} to rank {d} never received"));
            }
        }
    }
    st.finish_ns = threads.iter().map(|t| t.now).collect();
    if clocks {
        st.heard_from_all = threads.iter().map(|t| t.clock.iter().all(|&c| c >= 1)).collect();
    }
    Ok(st)
}

/// The world sizes and VM splits every model is checked on: (P, vCPUs per VM).
pub(crate) const SHAPES: &[(usize, usize)] =
    &[(1, 1), (2, 1), (2, 2), (3, 3), (3, 1), (5, 2), (8, 4), (8, 8), (16, 4), (16, 1), (12, 4)];

/// The error of building `info` with `given` on 8 ranks, which must fail.
pub(crate) fn build_error(info: &WorkloadInfo, given: &[(&str, Value)]) -> String {
    match Job::build(info, given, 8, 4) {
        Ok(_) => panic!("{}: {given:?} was accepted", info.name),
        Err(e) => e.to_string(),
    }
}

/// Asserts the error of `given` is one line naming parameter `name`.
pub(crate) fn assert_rejects(info: &WorkloadInfo, name: &str, given: &[(&str, Value)]) {
    let e = build_error(info, given);
    assert!(e.starts_with(&format!("w.{name}: ")), "{}: error {e:?} does not name {name}", info.name);
    assert!(!e.contains('\n'), "{}: error {e:?} is not one line", info.name);
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsched_model::ProgramBuilder;

    fn program(instrs: &[Instr]) -> Program {
        let mut b = ProgramBuilder::new();
        for i in instrs {
            b.push(i.clone());
        }
        b.build()
    }

    const SPIN: BarrierWait = BarrierWait::Spin;

    #[test]
    fn the_checker_finds_deadlocks_and_lost_messages() {
        // Both receive before sending.
        let job = Job::from_programs(vec![
            program(&[Instr::Recv { from: 1, wait: SPIN }, Instr::Send { to: 1, bytes: 1 }]),
            program(&[Instr::Recv { from: 0, wait: SPIN }, Instr::Send { to: 0, bytes: 1 }]),
        ]);
        assert_eq!(run(&job).unwrap_err(), "deadlock: ranks waiting (rank<-source): 0<-1 1<-0");
        // A message nobody takes.
        let job = Job::from_programs(vec![program(&[Instr::Send { to: 1, bytes: 1 }]), program(&[])]);
        assert_eq!(run(&job).unwrap_err(), "1 message(s) from rank 0 to rank 1 never received");
        // Out of range and to itself.
        let job = Job::from_programs(vec![program(&[Instr::Send { to: 0, bytes: 1 }])]);
        assert!(run(&job).unwrap_err().contains("sends to rank 0 of 1"));
    }

    #[test]
    fn the_checker_expands_loops_and_keeps_pairs_fifo() {
        // Rank 0 sends 3 × 2 messages in nested loops; rank 1 takes 6.
        let mut b = ProgramBuilder::new();
        b.repeat(Some(3)).repeat(Some(2)).push(Instr::Send { to: 1, bytes: 7 }).end_repeat().end_repeat();
        let mut c = ProgramBuilder::new();
        c.repeat(Some(6)).push(Instr::Recv { from: 0, wait: SPIN }).end_repeat();
        let stats = run(&Job::from_programs(vec![b.build(), c.build()])).unwrap();
        assert_eq!((stats.sent[0], stats.received[1], stats.bytes_sent[0]), (6, 6, 42));
        // One receive too many deadlocks.
        let mut c = ProgramBuilder::new();
        c.repeat(Some(7)).push(Instr::Recv { from: 0, wait: SPIN }).end_repeat();
        let mut b = ProgramBuilder::new();
        b.repeat(Some(6)).push(Instr::Send { to: 1, bytes: 7 }).end_repeat();
        assert!(run(&Job::from_programs(vec![b.build(), c.build()])).unwrap_err().starts_with("deadlock"));
    }
}
