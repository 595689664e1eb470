//! What real vCPUs can run, checked on the guest's own description and without `/dev/kvm`:
//! refusals name the scenario field to change.

use vsched_model::{BarrierWait, Instr, LockChoice, LockKind};

use crate::backend::{BackendError, VmSpec};
use crate::guest_code::layout::{MAX_LOCK_DEPTH, MAX_LOOP_DEPTH, MAX_RANDOM_INSTRS};
use crate::guest_code::random_tables::is_random;

/// Checks, without `/dev/kvm`, that `vm`'s guest can run on real vCPUs; else
/// `BackendError::Unsupported` naming the scenario field, e.g. `vm[0].workload.lock_kind`.
pub fn check_supported(vm: &VmSpec) -> Result<(), BackendError> {
    let guest = vm.guest;
    let field = |name: &str| format!("{}.workload{name}", vm.table);
    let refuse = |name: &str, message: String| Err(BackendError::Unsupported { field: field(name), message });
    if guest.programs.len() > guest.vcpus {
        return refuse(
            ".threads",
            format!(
                "real vCPUs run one guest thread per vCPU (there is no guest kernel to share them); this \
                 workload has {} threads on {} vCPUs",
                guest.programs.len(),
                guest.vcpus
            ),
        );
    }
    if guest.programs.len() < guest.vcpus {
        return refuse(
            "",
            format!("the guest has {} programs for {} vCPUs (one each expected)", guest.programs.len(), guest.vcpus),
        );
    }
    let takes_locks = guest.programs.iter().flat_map(|p| p.iter()).any(|i| matches!(i, Instr::Lock { .. }));
    if takes_locks && !matches!(guest.lock_kind, LockKind::Ticket | LockKind::Tas) {
        return refuse(
            ".lock_kind",
            format!("real vCPUs run ticket and tas spinlocks only, not \"{}\"", lock_kind_name(guest.lock_kind)),
        );
    }
    for program in &guest.programs {
        check_program(program, guest.locks)
            .map_err(|(name, message)| BackendError::Unsupported { field: field(name), message })?;
    }
    Ok(())
}

/// The scenario's name of a lock kind (`vsched-workloads`' `lock_kind` parameter).
fn lock_kind_name(kind: LockKind) -> &'static str {
    match kind {
        LockKind::Ticket => "ticket",
        LockKind::Tas => "tas",
        LockKind::Mcs => "mcs",
        LockKind::PreemptableTicket => "preemptable-ticket",
        LockKind::Mutex => "mutex",
    }
}

/// One program: its instructions, locks within range, locks and loops well nested and not
/// too deep. Errors are (field suffix, message).
fn check_program(program: &[Instr], locks: u32) -> Result<(), (&'static str, String)> {
    let mut held = 0usize;
    // Locks held when each open loop began: a loop body must give back what it takes.
    let mut loops: Vec<usize> = Vec::new();
    let mut random = 0usize;
    for instr in program {
        if is_random(instr) {
            random += 1;
        }
        match instr {
            Instr::Compute(_) | Instr::Exit => {}
            // A kernel-mode lock runs in ring 3 too; it differs in raising pause-loop exits.
            Instr::Lock { choice, .. } => {
                let fits = match choice {
                    LockChoice::Fixed(l) => *l < locks,
                    LockChoice::Uniform => locks > 0,
                };
                if !fits {
                    return Err((".locks", format!("the program takes a lock the VM does not have ({locks} locks)")));
                }
                held += 1;
                if held > MAX_LOCK_DEPTH {
                    return Err(("", format!("real vCPUs hold at most {MAX_LOCK_DEPTH} locks at once")));
                }
            }
            Instr::Unlock => {
                held = held.checked_sub(1).ok_or(("", "the program releases a lock it does not hold".to_string()))?;
            }
            Instr::Barrier(BarrierWait::SpinIterationsThenBlock(_)) => {
                return Err((
                    ".wait",
                    "real vCPUs cannot count spin iterations (libgomp's GOMP_SPINCOUNT); use wait = \"spin\", \
                     \"block\" or \"spin-then-block\""
                        .into(),
                ));
            }
            // Blocking waits halt; the host wakes them (`guest_code::emit::blocking`).
            Instr::Barrier(_) | Instr::Io(_) => {}
            Instr::Recv { wait: BarrierWait::SpinIterationsThenBlock(_), .. } => {
                return Err((
                    ".wait",
                    "real vCPUs cannot count spin iterations; use wait = \"spin\" or \"block\"".into(),
                ));
            }
            // The host carries messages between VMs (`runner::messages`) and counts them in
            // 32 bits.
            Instr::Send { bytes, .. } if *bytes > u64::from(u32::MAX) => {
                return Err(("", format!("real vCPUs send messages of less than 4 GiB; this one has {bytes} bytes")));
            }
            Instr::Send { .. } | Instr::Recv { .. } => {}
            Instr::Repeat { .. } => {
                loops.push(held);
                if loops.len() > MAX_LOOP_DEPTH {
                    return Err(("", format!("real vCPUs nest loops {MAX_LOOP_DEPTH} deep at most")));
                }
            }
            Instr::EndRepeat => {
                let at_start = loops.pop().ok_or(("", "the program ends a loop it did not begin".to_string()))?;
                if at_start != held {
                    return Err(("", "a loop of the program does not release the locks it takes".into()));
                }
            }
            other => {
                return Err((
                    ".kind",
                    format!(
                        "real vCPUs run computes, spinlocks, barriers, sleeps and messages only; this workload \
                         uses {}",
                        instr_name(other)
                    ),
                ));
            }
        }
    }
    if !loops.is_empty() {
        return Err(("", "the program begins a loop it does not end".into()));
    }
    if random > MAX_RANDOM_INSTRS {
        return Err(("", format!("real vCPUs run at most {MAX_RANDOM_INSTRS} random instructions per program")));
    }
    Ok(())
}

/// The variant name of an instruction (`Send`, `IpiSync`), without its fields.
fn instr_name(instr: &Instr) -> String {
    let debug = format!("{instr:?}");
    debug.split(|c: char| !c.is_alphanumeric()).next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use vsched_model::{Dur, GuestSpec, ProgramBuilder};

    use super::*;

    fn vm(guest: &GuestSpec) -> VmSpec<'_> {
        VmSpec::alone("t", 1, guest, 0)
    }

    fn refusal(guest: &GuestSpec) -> (String, String) {
        match check_supported(&vm(guest)) {
            Err(BackendError::Unsupported { field, message }) => (field, message),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn one(instrs: &[Instr]) -> GuestSpec {
        let mut b = ProgramBuilder::new();
        for i in instrs {
            b.push(i.clone());
        }
        GuestSpec { locks: 2, ..GuestSpec::lockless(vec![b.build()], true) }
    }

    #[test]
    fn the_names_of_instructions_are_their_variants() {
        assert_eq!(instr_name(&Instr::Send { to: 1, bytes: 2 }), "Send");
        assert_eq!(instr_name(&Instr::IpiSync), "IpiSync");
        assert_eq!(instr_name(&Instr::Io(Dur::Fixed(1))), "Io");
    }

    #[test]
    fn locks_out_of_range_and_badly_nested_are_refused() {
        let lock = |l| Instr::Lock { choice: LockChoice::Fixed(l), kernel: false };
        assert_eq!(refusal(&one(&[lock(2), Instr::Unlock])).0, "vm[1].workload.locks");
        assert_eq!(refusal(&one(&[Instr::Unlock])).0, "vm[1].workload");
        let mut b = ProgramBuilder::new();
        b.repeat(Some(2)).push(lock(0)).end_repeat().push(Instr::Unlock);
        let guest = GuestSpec { locks: 1, ..GuestSpec::lockless(vec![b.build()], true) };
        assert!(refusal(&guest).1.contains("does not release"));
        assert!(check_supported(&vm(&one(&[lock(1), lock(0), Instr::Unlock, Instr::Unlock]))).is_ok());
    }
}
