//! The tables a 64-bit ring-3 guest needs in memory: identity-mapping page tables with the
//! user bit set, and a GDT whose descriptors match the segment state the host loads.
//!
//! The guest never boots: the host puts each vCPU straight into long mode at CPL 3 through
//! its segment registers (`machine::vm`), so nothing here is executed, only walked by the
//! MMU (page tables) or kept consistent for completeness (GDT, TSS). Ring 3 because under
//! `kvm_pvm` ring-0 guest code is emulated instruction by instruction while ring-3 code runs
//! natively (docs/real-vcpus.md).

use super::layout::{align_up, DONE_ADDR, GDT_ADDR, MAX_GUEST_MEMORY, PDPT_ADDR, PD_ADDR, PML4_ADDR, TSS_ADDR};

/// Page-table entry bits (Intel SDM vol. 3A, 4.5: present, writable, user, page size).
const PTE_PRESENT: u64 = 1 << 0;
const PTE_WRITABLE: u64 = 1 << 1;
const PTE_USER: u64 = 1 << 2;
const PTE_HUGE: u64 = 1 << 7;
const HUGE_PAGE: u64 = 2 << 20;

/// Selectors, Linux's order (`__USER_DS` before `__USER_CS`): user data and code at RPL 3.
pub const USER_DATA_SELECTOR: u16 = (3 << 3) | 3;
pub const USER_CODE_SELECTOR: u16 = (4 << 3) | 3;
pub const TSS_SELECTOR: u16 = 5 << 3;
/// GDT entries: null, kernel code and data (unused, kept for a conventional layout), user
/// data, user code, and the 16-byte TSS descriptor.
pub const GDT_ENTRIES: u64 = 7;
pub const TSS_LIMIT: u32 = 0x67;

/// Segment descriptor fields (SDM vol. 3A, 3.4.5) as `kvm_segment` wants them.
pub const CODE_TYPE: u8 = 0xb; // execute/read, accessed
pub const DATA_TYPE: u8 = 0x3; // read/write, accessed
pub const TSS_TYPE_BUSY: u8 = 0xb;

/// Writes the page tables mapping `[0, memory_size)` (rounded up to 2 MiB) to itself into
/// `image`, which holds guest memory from address 0, and the done page.
pub fn write_page_tables(image: &mut [u8], memory_size: u64) {
    assert!(memory_size <= MAX_GUEST_MEMORY, "layout keeps guest memory below the done page");
    let table_flags = PTE_PRESENT | PTE_WRITABLE | PTE_USER;
    put_u64(image, PML4_ADDR, PDPT_ADDR | table_flags);
    put_u64(image, PDPT_ADDR, PD_ADDR | table_flags);
    let pages = align_up(memory_size, HUGE_PAGE) / HUGE_PAGE;
    for page in (0..pages).chain([DONE_ADDR / HUGE_PAGE]) {
        put_u64(image, PD_ADDR + 8 * page, (page * HUGE_PAGE) | table_flags | PTE_HUGE);
    }
}

/// Writes the GDT and the TSS it describes into `image`.
pub fn write_gdt(image: &mut [u8]) {
    let entries: [u64; 5] = [
        0,
        descriptor(CODE_TYPE, 0, true),
        descriptor(DATA_TYPE, 0, false),
        descriptor(DATA_TYPE, 3, false),
        descriptor(CODE_TYPE, 3, true),
    ];
    for (i, e) in entries.iter().enumerate() {
        put_u64(image, GDT_ADDR + 8 * i as u64, *e);
    }
    // A 64-bit TSS descriptor takes two slots (SDM vol. 3A, 8.2.3).
    let base = TSS_ADDR;
    let low = u64::from(TSS_LIMIT)
        | ((base & 0xff_ffff) << 16)
        | (u64::from(TSS_TYPE_BUSY | 0x80) << 40)
        | ((base >> 24 & 0xff) << 56);
    put_u64(image, GDT_ADDR + 8 * 5, low);
    put_u64(image, GDT_ADDR + 8 * 6, base >> 32);
}

/// A flat code or data descriptor of privilege `dpl`; code is 64-bit (`L`), data 32-bit
/// default size (ignored in long mode).
fn descriptor(kind: u8, dpl: u8, code: bool) -> u64 {
    let access = 0x80 | (u64::from(dpl) << 5) | 0x10 | u64::from(kind);
    let flags: u64 = if code { 0xa } else { 0xc }; // G + L, or G + D/B
    0xffff | (access << 40) | (0xf << 48) | (flags << 52)
}

fn put_u64(image: &mut [u8], addr: u64, value: u64) {
    let at = addr as usize;
    image[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u64_at(image: &[u8], addr: u64) -> u64 {
        u64::from_le_bytes(image[addr as usize..addr as usize + 8].try_into().unwrap())
    }

    #[test]
    fn descriptors_match_the_usual_flat_segments() {
        // The values Linux's GDT holds (arch/x86/kernel/cpu/common.c, GDT_ENTRY_INIT).
        assert_eq!(descriptor(CODE_TYPE, 0, true), 0x00af_9b00_0000_ffff);
        assert_eq!(descriptor(DATA_TYPE, 0, false), 0x00cf_9300_0000_ffff);
        assert_eq!(descriptor(DATA_TYPE, 3, false), 0x00cf_f300_0000_ffff);
        assert_eq!(descriptor(CODE_TYPE, 3, true), 0x00af_fb00_0000_ffff);
    }

    #[test]
    fn page_tables_map_every_2_mib_of_memory_to_itself_for_user_code() {
        let mut image = vec![0u8; 0x5000];
        write_page_tables(&mut image, 5 << 20);
        assert_eq!(u64_at(&image, PML4_ADDR), PDPT_ADDR | 7);
        assert_eq!(u64_at(&image, PDPT_ADDR), PD_ADDR | 7);
        assert_eq!(u64_at(&image, PD_ADDR), 0x87);
        assert_eq!(u64_at(&image, PD_ADDR + 16), (4 << 20) | 0x87);
        assert_eq!(u64_at(&image, PD_ADDR + 24), 0, "5 MiB need three 2 MiB pages");
        assert_eq!(u64_at(&image, PD_ADDR + 8 * 511), DONE_ADDR | 0x87, "and the done page is mapped");
    }
}
