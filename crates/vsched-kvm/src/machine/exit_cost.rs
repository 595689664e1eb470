//! What one synthesized pause-loop exit costs on this machine, measured once per process.
//!
//! A 1-vCPU VM spins on a lock it holds itself with a window of one cycle, so that every
//! pass of its spin loop exits to its thread, which reports the exit and re-enters guest
//! code at once: exactly the path of a run's pause-loop exits (`vcpu_thread`), without the
//! scheduler's answer, which a run makes concurrently. The cost is the burst's wall time
//! over the exits the guest counted; the least of three bursts is kept, since the host's
//! other work only ever lengthens one.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use vsched_model::{GuestSpec, Instr, LockChoice, LockKind, ProgramBuilder, Time};

use super::kvm_backend::KvmBackend;
use crate::backend::{Backend, BackendError, MachineSettings, PleWindow, VmSpec};
use crate::ple_scaling::ExitCost;

const BURST: Duration = Duration::from_millis(15);
const BURSTS: usize = 3;

/// What one pause-loop exit costs a vCPU here (exit, report, re-entry), measured on
/// `host_cpu` the first time it is asked.
pub fn ple_exit_ns(host_cpu: usize) -> Result<ExitCost, BackendError> {
    static COST: OnceLock<Result<Time, BackendError>> = OnceLock::new();
    let exit_ns = COST.get_or_init(|| measure(host_cpu)).clone()?;
    Ok(ExitCost { exit_ns, tsc_hz: super::tsc::tsc_hz() })
}

fn measure(host_cpu: usize) -> Result<Time, BackendError> {
    let lock = || Instr::Lock { choice: LockChoice::Fixed(0), kernel: true };
    let mut program = ProgramBuilder::new();
    program.push(lock()).push(lock()).push(Instr::Unlock).push(Instr::Unlock).push(Instr::Exit);
    let guest = GuestSpec {
        programs: vec![program.build()],
        vcpus: 1,
        locks: 1,
        lock_kind: LockKind::Tas,
        finite: true,
        idle_vcpus: 0,
    };
    let settings = MachineSettings {
        memory_per_vm_bytes: 4 << 20,
        ple: Some(PleWindow { base_cycles: 1, grow: 1, max_cycles: 1, exit_gap_cycles: u64::MAX }),
    };
    let vms = [VmSpec::alone("exit-cost", 0, &guest, 0)];
    let mut backend = KvmBackend::new(&vms, &settings, 1)?;
    let mut best = f64::INFINITY;
    for _ in 0..BURSTS {
        let before = backend.counters(0).ple_exits;
        let began = Instant::now();
        backend.start(0, host_cpu)?;
        std::thread::sleep(BURST);
        backend.stop(0)?;
        let wall_ns = began.elapsed().as_nanos() as f64;
        let exits = backend.counters(0).ple_exits - before;
        if exits > 0 {
            best = best.min(wall_ns / exits as f64);
        }
    }
    if !best.is_finite() {
        return Err(BackendError::Failed("the pause-loop exit calibration saw no exit".into()));
    }
    Ok(best.round() as Time)
}
