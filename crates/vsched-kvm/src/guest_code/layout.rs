//! Where everything sits in a VM's guest memory, and the offsets the host reads.
//!
//! Guest memory is identity-mapped (guest-virtual = guest-physical) and laid out as:
//!
//! ```text
//! 0x0000            unused
//! 0x1000 .. 0x4000  page tables (PML4, PDPT, PD of 2 MiB user pages)
//! 0x4000            GDT, then the TSS it describes
//! 0x5000            the VM's shared area: the barrier, then one cache line per lock
//! page-aligned      one private area (a page) per vCPU: counters, activity, its own state
//! page-aligned      one mailbox per vCPU, if the guest sends or receives messages
//! page-aligned      random tables, one per random instruction per vCPU
//! page-aligned      code, one block per vCPU
//! 1 GiB - 2 MiB     the done page: mapped, but not memory (`DONE_ADDR`)
//! ```
//!
//! Every counter the host reads, and the activity word, has a cache line of its own (and
//! each vCPU a page of its own), so the host's reads and the other vCPUs' writes never
//! share a line with a vCPU's hot loop.

/// A cache line: the unit of placement of anything written concurrently.
pub const LINE: u64 = 64;
pub const PAGE: u64 = 4096;

pub const PML4_ADDR: u64 = 0x1000;
pub const PDPT_ADDR: u64 = 0x2000;
pub const PD_ADDR: u64 = 0x3000;
pub const GDT_ADDR: u64 = 0x4000;
/// The 64-bit TSS, after the GDT in the same page (never used: no privilege change ever
/// happens, but a valid task register is part of a valid long-mode state).
pub const TSS_ADDR: u64 = GDT_ADDR + 0x100;
pub const SHARED_ADDR: u64 = 0x5000;

/// The page directory maps 2 MiB pages: one PD covers the first GiB, whose last 2 MiB are
/// the done page; the rest bounds a VM's memory.
pub const MAX_GUEST_MEMORY: u64 = (1 << 30) - (2 << 20);
/// The guest writes a byte here when its program ends: the only exit it makes. The page
/// tables map it but no memory slot backs it, so the write exits to the host as MMIO.
/// (Not an `out`: `kvm_pvm` drops IOPL 3 at the first exit, and ring 3 then faults.)
pub const DONE_ADDR: u64 = MAX_GUEST_MEMORY;
/// The guest writes here when its kernel-mode spinning reaches its pause-loop window: the
/// synthesized pause-loop exit (`emit`, `ple_check`). Same unbacked page, its own line.
pub const PLE_EXIT_ADDR: u64 = DONE_ADDR + LINE;
/// The guest writes here to halt (block) until the host wakes it: what it waits for is in
/// its `WAIT` line. Its thread leaves guest code and waits to be started again.
pub const HALT_ADDR: u64 = DONE_ADDR + 2 * LINE;
/// The guest writes here after releasing its VM's blocking barrier: the host wakes the
/// VM's vCPUs halted on it (the IPIs a guest kernel would send). Its thread goes on at once.
pub const WAKE_ADDR: u64 = DONE_ADDR + 3 * LINE;

/// The guest writes here to send a message to a rank of another VM: one 8-byte write, the
/// receiving rank in its low 32 bits and the message's bytes in its high 32. Its thread
/// reports it and goes on at once; the host delivers it (`MAILBOX`).
pub const SEND_ADDR: u64 = DONE_ADDR + 4 * LINE;

/// Shared area: the barrier's arrival count and its sense, each on its own line; the locks
/// follow, one line each.
pub const BARRIER_COUNT: u64 = 0;
pub const BARRIER_SENSE: u64 = LINE;
pub const LOCKS: u64 = 2 * LINE;
/// Within a lock's line: the ticket dispenser (ticket) or the flag (tas), a 32-bit word...
pub const LOCK_WORD: u64 = 0;
/// ...the ticket being served (ticket locks only), 32 bits...
pub const LOCK_SERVING: u64 = 4;
/// ...and the witness: a plain (non-atomic) count incremented inside every critical
/// section, so that a broken mutual exclusion loses increments and shows.
pub const LOCK_WITNESS: u64 = 8;

/// Private area of a vCPU, relative to its base. The `GuestCounters`, the activity word and
/// two diagnostics the host reads, one line each.
pub const ACQUISITIONS: u64 = 0;
pub const SPIN_CYCLES: u64 = LINE;
pub const HOLD_CYCLES: u64 = 2 * LINE;
pub const BARRIERS: u64 = 3 * LINE;
pub const COMPUTE_CYCLES: u64 = 4 * LINE;
pub const ACTIVITY: u64 = 5 * LINE;
/// The TSC at which the guest last noticed it had been descheduled (a gap), i.e. when it
/// resumed; 0 before any gap.
pub const RESUME_TSC: u64 = 6 * LINE;
/// How many such gaps the guest noticed.
pub const GAPS: u64 = 7 * LINE;
/// Pause-loop exits the guest made.
pub const PLE_EXITS: u64 = 8 * LINE;
/// What a halted vCPU waits for, written before each halt and read by the host while the
/// vCPU is out of guest code: the address of a 32-bit word and the value that ends the wait
/// (a blocking barrier's sense), or address 0 and a sleep of `WAIT_CYCLES` TSC cycles
/// (`u64::MAX`: for ever). A value with `WAIT_AT_LEAST` set ends the wait when the word
/// reaches its low 32 bits instead (a count of messages delivered, `MAILBOX`).
pub const WAIT: u64 = 9 * LINE;
pub const WAIT_ADDR: u64 = WAIT;
pub const WAIT_VALUE: u64 = WAIT + 8;
pub const WAIT_CYCLES: u64 = WAIT + 16;
pub const WAIT_AT_LEAST: u64 = 1 << 32;
/// The vCPU's own state, read by the host never: the TSC at its last check, its barrier
/// sense, the running cycles it has spun in kernel mode since its pause-loop window last
/// restarted, and that window (cycles; it grows at each exit where the hypervisor grows it).
pub const LAST_TSC: u64 = 10 * LINE;
pub const SENSE: u64 = LAST_TSC + 8;
pub const PLE_SPUN: u64 = LAST_TSC + 16;
pub const PLE_WINDOW: u64 = LAST_TSC + 24;
/// Addresses of the locks held, by nesting depth.
pub const HELD: u64 = 11 * LINE;
/// The TSC at which each held lock was acquired, by nesting depth.
pub const HOLD_START: u64 = HELD + 8 * MAX_LOCK_DEPTH as u64;
/// Iterations left of each open finite loop, by nesting depth.
pub const LOOPS: u64 = HOLD_START + 8 * MAX_LOCK_DEPTH as u64;
/// Next entry of each random table of the vCPU.
pub const TABLE_CURSORS: u64 = LOOPS + 8 * MAX_LOOP_DEPTH as u64;
pub const PRIVATE_SIZE: u64 = PAGE;

/// Locks one thread may hold at once.
pub const MAX_LOCK_DEPTH: usize = 16;
/// Loops nested in one another.
pub const MAX_LOOP_DEPTH: usize = 16;
/// Random instructions (a jittered compute, a lock chosen at random) in one program.
pub const MAX_RANDOM_INSTRS: usize = ((PRIVATE_SIZE - TABLE_CURSORS) / 8) as usize;
/// Draws kept per random instruction: a program that runs one more often cycles through
/// its table (4096 draws keep a jittered compute's mean within ~0.3 % of its mean at the
/// workloads' largest coefficient of variation of 0.2).
pub const MAX_TABLE_LEN: u64 = 4096;

/// The activity word's values (`backend::GuestActivity`).
pub const ACTIVITY_COMPUTE: u32 = 0;
pub const ACTIVITY_LOCK_WAIT: u32 = 1;
pub const ACTIVITY_LOCK_HELD: u32 = 2;
pub const ACTIVITY_BARRIER_WAIT: u32 = 3;
pub const ACTIVITY_DONE: u32 = 4;
pub const ACTIVITY_HALTED: u32 = 5;
pub const ACTIVITY_MESSAGE_WAIT: u32 = 6;
/// Added to the activity while the guest waits for or holds a kernel-mode lock: what a
/// hypervisor reads as "the vCPU is in guest kernel mode" (`Cx::guest_in_kernel`).
pub const ACTIVITY_IN_KERNEL: u32 = 0x10;

/// A vCPU's mailbox, by source rank of its job: first the messages delivered from each
/// (32-bit counts, raised by the senders of its own VM with a locked add, and by the host for
/// messages from other VMs), then the messages it has received from each (its own). Ranks
/// of one VM exchange messages through their memory, as MPI's shared-memory transport does;
/// a message from another VM goes through the host, as a network does.
pub const fn mailbox_delivered(from: u64) -> u64 {
    4 * from
}
pub const fn mailbox_received(world: u64, from: u64) -> u64 {
    4 * world + 4 * from
}
/// The bytes of one vCPU's mailbox in a job of `world` ranks.
pub const fn mailbox_size(world: u64) -> u64 {
    align_up(8 * world, PAGE)
}

/// Rounds `x` up to a multiple of `to` (a power of two).
pub const fn align_up(x: u64, to: u64) -> u64 {
    (x + to - 1) & !(to - 1)
}

/// Size of the shared area of a VM with `locks` locks.
pub fn shared_size(locks: u32) -> u64 {
    align_up(LOCKS + LINE * u64::from(locks), PAGE)
}

/// The guest address of the first private area, after the shared area.
pub fn first_private_addr(locks: u32) -> u64 {
    SHARED_ADDR + shared_size(locks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_state_fits_its_page_and_host_words_have_lines_of_their_own() {
        let host_words =
            [ACQUISITIONS, SPIN_CYCLES, HOLD_CYCLES, BARRIERS, COMPUTE_CYCLES, ACTIVITY, RESUME_TSC, GAPS, PLE_EXITS];
        for pair in host_words.windows(2) {
            assert!(pair[1] - pair[0] >= LINE);
        }
        const { assert!(WAIT >= PLE_EXITS + LINE && LAST_TSC >= WAIT + LINE) };
        const { assert!(PLE_WINDOW + 8 <= HELD) };
        const { assert!(MAX_RANDOM_INSTRS >= 64, "room for the cursors of 64 random instructions") };
        const { assert!(TABLE_CURSORS + 8 * MAX_RANDOM_INSTRS as u64 <= PRIVATE_SIZE) };
    }

    #[test]
    fn the_shared_area_grows_by_a_line_per_lock() {
        assert_eq!(shared_size(0), PAGE);
        assert_eq!(shared_size(62), PAGE);
        assert_eq!(shared_size(63), 2 * PAGE);
        assert_eq!(first_private_addr(1), SHARED_ADDR + PAGE);
    }
}
