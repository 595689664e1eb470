//! A VM's guest image: its whole guest memory as bytes, laid out as `layout` says.

use vsched_model::{GuestSpec, Instr};

use super::emit::{self, EmitContext, Mailboxes, TablePlace};
use super::layout::*;
use super::random_tables::{draw_tables, ns_to_cycles, vcpu_stream};
use super::{boot, DESCHEDULED_GAP_NS};
use crate::backend::MachineSettings;

/// Where a vCPU's code starts, where its private area (counters) is, and its mailbox if the
/// guest exchanges messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VcpuImage {
    pub entry: u64,
    pub private_base: u64,
    pub mailbox: Option<Mailbox>,
}

/// A vCPU's mailbox: its guest address, and the ranks of the job (`layout::mailbox_delivered`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mailbox {
    pub addr: u64,
    pub world: u64,
}

/// A VM's guest memory, ready to copy to address 0.
pub struct GuestImage {
    pub memory: Vec<u8>,
    pub vcpus: Vec<VcpuImage>,
}

/// Why an image cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageError {
    /// It would need `needed` bytes, more than `limit`.
    TooLarge { needed: u64, limit: u64 },
    /// A program the code generator cannot compile (`machine::check_supported` refuses it
    /// first, naming its field).
    Malformed(String),
}

/// A VM's place in its job: the rank of its first vCPU, and the job's ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobPlace {
    pub first_rank: usize,
    pub world: usize,
}

impl JobPlace {
    /// A VM that is its own job.
    pub fn alone(guest: &GuestSpec) -> JobPlace {
        JobPlace { first_rank: 0, world: guest.vcpus }
    }
}

/// Builds the guest memory of a VM whose first vCPU is global vCPU `first_vcpu`, refusing
/// one larger than `settings.memory_per_vm_bytes`.
pub fn build_image(
    guest: &GuestSpec,
    job: JobPlace,
    first_vcpu: usize,
    seed: u64,
    tsc_hz: u64,
    settings: &MachineSettings,
) -> Result<GuestImage, ImageError> {
    let programs = &guest.programs[..guest.vcpus.min(guest.programs.len())];
    let private_start = first_private_addr(guest.locks);
    let mut next = private_start + PRIVATE_SIZE * programs.len() as u64;
    let messages = programs.iter().flat_map(|p| p.iter()).any(|i| matches!(i, Instr::Send { .. } | Instr::Recv { .. }));
    let mailboxes = messages.then(|| Mailboxes {
        first_addr: next,
        first_private: private_start,
        first_rank: job.first_rank as u64,
        ranks: programs.len().saturating_sub(guest.idle_vcpus) as u64,
        world: job.world as u64,
    });
    if let Some(boxes) = mailboxes {
        next += mailbox_size(boxes.world) * programs.len() as u64;
    }

    let mut tables = Vec::with_capacity(programs.len());
    let mut places = Vec::with_capacity(programs.len());
    for (i, program) in programs.iter().enumerate() {
        let drawn = draw_tables(program, guest.locks, tsc_hz, &mut vcpu_stream(seed, first_vcpu + i));
        if drawn.len() > MAX_RANDOM_INSTRS {
            return Err(ImageError::Malformed(format!("more than {MAX_RANDOM_INSTRS} random instructions")));
        }
        next = align_up(next, PAGE);
        let mut placed = Vec::with_capacity(drawn.len());
        for table in &drawn {
            placed.push(TablePlace { instr: table.instr, addr: next, len: table.entries.len() as u64 });
            next += 8 * table.entries.len() as u64;
        }
        tables.push(drawn);
        places.push(placed);
    }

    let barrier_parties = guest.programs.len().saturating_sub(guest.idle_vcpus) as u32;
    let gap_cycles = ns_to_cycles(DESCHEDULED_GAP_NS, tsc_hz);
    let mut code = Vec::with_capacity(programs.len());
    let mut vcpus = Vec::with_capacity(programs.len());
    next = align_up(next, PAGE);
    for (i, program) in programs.iter().enumerate() {
        let private_base = private_start + PRIVATE_SIZE * i as u64;
        let cx = EmitContext {
            lock_kind: guest.lock_kind,
            barrier_parties,
            private_base,
            tables: &places[i],
            tsc_hz,
            gap_cycles,
            ple: settings.ple,
            mailboxes,
            own_index: i as u64,
        };
        let bytes = emit::assemble(program, &cx, next).map_err(ImageError::Malformed)?;
        let mailbox = mailboxes.map(|b| Mailbox { addr: b.of(i as u64), world: b.world });
        vcpus.push(VcpuImage { entry: next, private_base, mailbox });
        next = align_up(next + bytes.len() as u64, LINE);
        code.push(bytes);
    }

    let size = align_up(next, PAGE);
    let limit = settings.memory_per_vm_bytes.min(MAX_GUEST_MEMORY);
    if size > limit {
        return Err(ImageError::TooLarge { needed: size, limit });
    }
    let mut memory = vec![0u8; size as usize];
    boot::write_page_tables(&mut memory, size);
    boot::write_gdt(&mut memory);
    put(&mut memory, SHARED_ADDR + BARRIER_COUNT, &barrier_parties.to_le_bytes());
    for (drawn, placed) in tables.iter().zip(&places) {
        for (table, place) in drawn.iter().zip(placed) {
            let bytes: Vec<u8> = table.entries.iter().flat_map(|e| e.to_le_bytes()).collect();
            put(&mut memory, place.addr, &bytes);
        }
    }
    for (bytes, vcpu) in code.iter().zip(&vcpus) {
        put(&mut memory, vcpu.entry, bytes);
    }
    Ok(GuestImage { memory, vcpus })
}

fn put(memory: &mut [u8], addr: u64, bytes: &[u8]) {
    memory[addr as usize..addr as usize + bytes.len()].copy_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use vsched_model::{BarrierWait, Dur, Instr, LockChoice, LockKind, ProgramBuilder};

    use super::*;

    fn mem(memory_per_vm_bytes: u64) -> MachineSettings {
        MachineSettings { memory_per_vm_bytes, ple: None }
    }

    fn spinlock_guest(vcpus: usize, locks: u32, kind: LockKind) -> GuestSpec {
        let mut b = ProgramBuilder::new();
        let choice = if locks == 1 { LockChoice::Fixed(0) } else { LockChoice::Uniform };
        b.repeat(Some(1000))
            .push(Instr::Compute(Dur::Jitter { mean: 50_000, cv: 0.2 }))
            .push(Instr::Lock { choice, kernel: false })
            .push(Instr::Compute(Dur::Fixed(10_000)))
            .push(Instr::Unlock)
            .end_repeat();
        let program = b.build();
        GuestSpec { programs: vec![program; vcpus], vcpus, locks, lock_kind: kind, finite: true, idle_vcpus: 0 }
    }

    #[test]
    fn an_image_is_the_same_bytes_for_the_same_guest_and_seed() {
        let guest = spinlock_guest(2, 3, LockKind::Tas);
        let a = build_image(&guest, JobPlace::alone(&guest), 4, 11, 2_000_000_000, &mem(1 << 30)).unwrap();
        let b = build_image(&guest, JobPlace::alone(&guest), 4, 11, 2_000_000_000, &mem(1 << 30)).unwrap();
        assert!(a.memory == b.memory && a.vcpus == b.vcpus);
        let other_seed = build_image(&guest, JobPlace::alone(&guest), 4, 12, 2_000_000_000, &mem(1 << 30)).unwrap();
        assert!(a.memory != other_seed.memory, "the random tables follow the seed");
    }

    #[test]
    fn each_vcpu_has_its_own_page_and_code_after_its_data() {
        let guest = spinlock_guest(3, 1, LockKind::Ticket);
        let image = build_image(&guest, JobPlace::alone(&guest), 0, 1, 3_000_000_000, &mem(1 << 30)).unwrap();
        let bases: Vec<u64> = image.vcpus.iter().map(|v| v.private_base).collect();
        assert_eq!(bases, [SHARED_ADDR + PAGE, SHARED_ADDR + 2 * PAGE, SHARED_ADDR + 3 * PAGE]);
        for v in &image.vcpus {
            assert!(v.entry >= bases[2] + PAGE && v.entry < image.memory.len() as u64);
        }
        assert_eq!(image.memory.len() as u64 % PAGE, 0);
    }

    #[test]
    fn the_memory_cap_is_enforced_before_anything_is_allocated() {
        let guest = spinlock_guest(2, 1, LockKind::Ticket);
        let needed =
            build_image(&guest, JobPlace::alone(&guest), 0, 1, 3_000_000_000, &mem(1 << 30)).unwrap().memory.len()
                as u64;
        assert_eq!(
            build_image(&guest, JobPlace::alone(&guest), 0, 1, 3_000_000_000, &mem(needed - 1)).err(),
            Some(ImageError::TooLarge { needed, limit: needed - 1 })
        );
    }

    #[test]
    fn the_barrier_starts_with_every_party_to_come() {
        let mut b = ProgramBuilder::new();
        b.repeat(Some(3)).push(Instr::Compute(Dur::Fixed(1000))).push(Instr::Barrier(BarrierWait::Spin)).end_repeat();
        let guest = GuestSpec::lockless(vec![b.build(); 3], true).on_vcpus(5);
        let image = build_image(&guest, JobPlace::alone(&guest), 0, 1, 3_000_000_000, &mem(1 << 30)).unwrap();
        let at = (SHARED_ADDR + BARRIER_COUNT) as usize;
        assert_eq!(u32::from_le_bytes(image.memory[at..at + 4].try_into().unwrap()), 3, "idle vCPUs take no part");
        assert_eq!(image.vcpus.len(), 5);
    }

    #[test]
    fn programs_the_backend_cannot_run_are_refused_not_miscompiled() {
        let mut b = ProgramBuilder::new();
        b.push(Instr::Unlock);
        let guest = GuestSpec::lockless(vec![b.build()], true);
        assert!(matches!(
            build_image(&guest, JobPlace::alone(&guest), 0, 1, 3_000_000_000, &mem(1 << 30)),
            Err(ImageError::Malformed(_))
        ));
        let mut b = ProgramBuilder::new();
        b.push(Instr::IpiSync);
        let guest = GuestSpec::lockless(vec![b.build()], true);
        assert!(matches!(
            build_image(&guest, JobPlace::alone(&guest), 0, 1, 3_000_000_000, &mem(1 << 30)),
            Err(ImageError::Malformed(_))
        ));
    }
}
