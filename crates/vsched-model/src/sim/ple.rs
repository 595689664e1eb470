//! Pause-loop exiting (PLE).
//!
//! Intel VT-x exits when a guest in kernel mode executes PAUSE in a loop longer than
//! `ple_window` cycles, PAUSEs closer than `ple_gap` cycles counting as one loop. A spinner
//! here pauses continuously, so the gap never splits a loop: continuous kernel-mode spinning
//! of `ple_window_cycles / cpu_ghz` ns raises an exit, which the policy sees as `yield_`; the
//! window restarts after each exit and each time the vCPU is scheduled in. Xen keeps the
//! window fixed; KVM grows it ×`ple_grow` at each exit (`grow_ple_window`, vmx.c) and resets
//! it when the vCPU is scheduled in (`vmx_sched_in` → `shrink_ple_window` with the default
//! `ple_window_shrink = 0`), which a growth over 1 turns on: `host.ple_grow`, else the
//! policy's hypervisor's (`Policy::ple_window_grow`: 2 for the KVM policies).
//!
//! Each exit costs the vCPU `vm_exit_ns + ple_handler_ns` without progress (the hypervisor
//! runs instead), and its window restarts when it is back in the guest. If the policy
//! deschedules it at once, the next vCPU's dispatch overheads stand for that cost.

use vsched_engine::Time;

use super::state::{Core, ThreadState};
use crate::ids::VcpuId;
use crate::policy::YieldReason;
use crate::trace::Instant;

impl Core {
    /// When `v`'s current kernel-mode spinning raises a pause-loop exit, if PLE applies.
    pub(super) fn ple_deadline(&self, v: VcpuId) -> Option<Time> {
        let vc = &self.vcpus[v];
        let kernel = matches!(
            self.threads[vc.curr].state,
            ThreadState::SpinLock { kernel: true, .. } | ThreadState::SpinIpi { .. }
        );
        (kernel && self.ple_window_ns.is_some()).then(|| vc.ple_from.max(vc.run_from) + vc.ple_window_ns)
    }

    /// A spinner's guest event: a pause-loop exit if the window is reached, then re-arm.
    pub(super) fn maybe_ple_exit(&mut self, v: VcpuId) {
        self.ple_exit_if_due(v);
        self.arm(v);
    }

    /// A pause-loop exit if `v`'s spinning has reached its window; the caller re-arms.
    pub(super) fn ple_exit_if_due(&mut self, v: VcpuId) {
        let now = self.now();
        if self.ple_deadline(v).is_some_and(|at| at <= now) {
            let max = self.ple_window_max_ns;
            let grow = self.ple_grow as Time;
            self.stall(v, self.host.vm_exit_ns + self.host.ple_handler_ns);
            let vc = &mut self.vcpus[v];
            vc.ple_exits += 1;
            vc.ple_from = now;
            if grow > 1 {
                vc.ple_window_ns = (vc.ple_window_ns * grow).min(max); // KVM: grow_ple_window
            }
            let h = self.vcpus[v].host;
            self.hosts[h].ple_exits += 1;
            self.trace_instant(Instant::PleExit { vcpu: v });
            self.to_yield.push_back((v, YieldReason::PauseLoopExit));
        }
    }
}
