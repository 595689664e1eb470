//! One KVM VM: its guest memory (an anonymous mapping holding the image), and its vCPUs set
//! straight into 64-bit long mode at CPL 3, at their entry points.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use kvm_bindings::{kvm_dtable, kvm_regs, kvm_segment, kvm_userspace_memory_region, KVM_MAX_CPUID_ENTRIES};
use kvm_ioctls::{Kvm, VcpuFd, VmFd};

use crate::guest_code::boot::{
    CODE_TYPE, DATA_TYPE, GDT_ENTRIES, TSS_LIMIT, TSS_SELECTOR, TSS_TYPE_BUSY, USER_CODE_SELECTOR, USER_DATA_SELECTOR,
};
use crate::guest_code::layout::{GDT_ADDR, PML4_ADDR, TSS_ADDR};
use crate::guest_code::GuestImage;

/// Control registers of long mode with paging (SDM vol. 3A, 2.5 and 9.8.5): CR0.PE|MP|ET|NE|
/// WP|PG, CR4.PAE, EFER.LME|LMA. CR4.TSD stays clear so ring 3 may read the TSC.
const CR0_LONG_MODE: u64 = (1 << 0) | (1 << 1) | (1 << 4) | (1 << 5) | (1 << 16) | (1 << 31);
const CR4_PAE: u64 = 1 << 5;
const EFER_LME_LMA: u64 = (1 << 8) | (1 << 10);
/// RFLAGS: the always-one bit only; interrupts off (there is no interrupt controller). Not
/// IOPL 3: `kvm_pvm` loses it at the guest's first exit (measured: RFLAGS read back 0x3002,
/// then 0x10046 at an `out` that faulted), so the guest says it finished by MMIO instead.
const RFLAGS: u64 = 0x2;

/// Anonymous host memory backing a VM's guest memory from guest address 0.
pub struct GuestMemory {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this struct; concurrent access from vCPUs and
// the host goes through atomics (`read_u64`) or happens before any vCPU runs (`new`).
unsafe impl Send for GuestMemory {}
unsafe impl Sync for GuestMemory {}

impl GuestMemory {
    /// A mapping holding `image`.
    pub fn new(image: &[u8]) -> Result<GuestMemory, String> {
        // SAFETY: a fresh private anonymous mapping; checked for failure before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                image.len(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!(
                "cannot map {} bytes of guest memory: {}",
                image.len(),
                std::io::Error::last_os_error()
            ));
        }
        let ptr = ptr.cast::<u8>();
        // SAFETY: the mapping is `image.len()` bytes long and does not overlap `image`.
        unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), ptr, image.len()) };
        Ok(GuestMemory { ptr, len: image.len() })
    }

    /// The 64-bit word at guest address `addr`, as the guest last wrote it.
    pub fn read_u64(&self, addr: u64) -> u64 {
        assert!(addr.is_multiple_of(8) && addr as usize + 8 <= self.len, "guest address {addr:#x} out of the image");
        // SAFETY: in bounds and aligned (asserted); guest writes are single aligned stores,
        // so an atomic load sees whole values.
        unsafe { AtomicU64::from_ptr(self.ptr.add(addr as usize).cast::<u64>()).load(Ordering::Relaxed) }
    }

    /// The 32-bit word at guest address `addr`, as the guest last wrote it.
    pub fn read_u32(&self, addr: u64) -> u32 {
        assert!(addr.is_multiple_of(4) && addr as usize + 4 <= self.len, "guest address {addr:#x} out of the image");
        // SAFETY: as `read_u64`'s.
        unsafe { AtomicU32::from_ptr(self.ptr.add(addr as usize).cast::<u32>()).load(Ordering::Relaxed) }
    }

    /// Adds `n` to the 32-bit word at guest address `addr` atomically (a locked add, as the
    /// guest's own vCPUs add to it).
    pub fn add_u32(&self, addr: u64, n: u32) {
        assert!(addr.is_multiple_of(4) && addr as usize + 4 <= self.len, "guest address {addr:#x} out of the image");
        // SAFETY: as `read_u64`'s; the guest's writers of this word use locked adds too.
        unsafe { AtomicU32::from_ptr(self.ptr.add(addr as usize).cast::<u32>()).fetch_add(n, Ordering::SeqCst) };
    }

    /// Bytes of guest memory.
    pub fn len(&self) -> usize {
        self.len
    }

    fn region(&self) -> kvm_userspace_memory_region {
        kvm_userspace_memory_region {
            slot: 0,
            flags: 0,
            guest_phys_addr: 0,
            memory_size: self.len as u64,
            userspace_addr: self.ptr as u64,
        }
    }
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A VM and its memory. Fields drop in order: the VM's fd closes before its memory is
/// unmapped (its vCPUs are gone by then: `KvmBackend` joins their threads first).
pub struct Vm {
    _fd: VmFd,
    pub memory: GuestMemory,
}

/// Creates the VM of `image` and its vCPUs, ready to run.
pub fn create(kvm: &Kvm, image: &GuestImage) -> Result<(Vm, Vec<VcpuFd>), String> {
    let fd = kvm.create_vm().map_err(|e| format!("cannot create a VM: {e}"))?;
    let memory = GuestMemory::new(&image.memory)?;
    // SAFETY: the region is `memory`'s mapping, which outlives the VM (`Vm`'s field order).
    unsafe { fd.set_user_memory_region(memory.region()) }.map_err(|e| format!("cannot give the VM its memory: {e}"))?;
    let cpuid =
        kvm.get_supported_cpuid(KVM_MAX_CPUID_ENTRIES).map_err(|e| format!("cannot read the supported CPUID: {e}"))?;
    let mut vcpus = Vec::with_capacity(image.vcpus.len());
    for (i, v) in image.vcpus.iter().enumerate() {
        let vcpu = fd.create_vcpu(i as u64).map_err(|e| format!("cannot create vCPU {i}: {e}"))?;
        // KVM refuses EFER.LME unless the guest's CPUID has long mode.
        vcpu.set_cpuid2(&cpuid).map_err(|e| format!("cannot set vCPU {i}'s CPUID: {e}"))?;
        let mut sregs = vcpu.get_sregs().map_err(|e| format!("cannot read vCPU {i}'s registers: {e}"))?;
        let data = segment(USER_DATA_SELECTOR, DATA_TYPE, 3, false);
        sregs.cs = segment(USER_CODE_SELECTOR, CODE_TYPE, 3, true);
        (sregs.ds, sregs.es, sregs.fs, sregs.gs, sregs.ss) = (data, data, data, data, data);
        sregs.tr = kvm_segment {
            base: TSS_ADDR,
            limit: TSS_LIMIT,
            selector: TSS_SELECTOR,
            type_: TSS_TYPE_BUSY,
            present: 1,
            ..Default::default()
        };
        sregs.ldt = kvm_segment { type_: 2, present: 1, unusable: 1, ..Default::default() };
        sregs.gdt = kvm_dtable { base: GDT_ADDR, limit: (8 * GDT_ENTRIES - 1) as u16, ..Default::default() };
        sregs.idt = kvm_dtable::default();
        sregs.cr0 = CR0_LONG_MODE;
        sregs.cr3 = PML4_ADDR;
        sregs.cr4 = CR4_PAE;
        sregs.efer = EFER_LME_LMA;
        vcpu.set_sregs(&sregs).map_err(|e| format!("cannot put vCPU {i} in long mode: {e}"))?;
        let regs = kvm_regs { rip: v.entry, rflags: RFLAGS, ..Default::default() };
        vcpu.set_regs(&regs).map_err(|e| format!("cannot set vCPU {i}'s registers: {e}"))?;
        vcpus.push(vcpu);
    }
    Ok((Vm { _fd: fd, memory }, vcpus))
}

/// A flat segment at privilege `dpl` (base 0, 4 GiB limit, page granular), 64-bit code if
/// `code`.
fn segment(selector: u16, type_: u8, dpl: u8, code: bool) -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector,
        type_,
        present: 1,
        dpl,
        db: u8::from(!code),
        s: 1,
        l: u8::from(code),
        g: 1,
        ..Default::default()
    }
}
