//! An event as the queue stores it: one `u128`, so that the heap moves its entries (key and
//! event, 32 bytes) in two full-width copies.
//!
//! `std`'s `BinaryHeap::pop` writes the last entry into the root and reads it straight back;
//! with `Ev` itself as the payload, the write was a mix of narrow stores around its tag and
//! the read a wide load, which the store buffer cannot forward (a stall on every pop,
//! docs/performance.md). Packed, each half is stored and loaded at one width.
//!
//! Layout: the variant in the top 8 bits, a first field (an id, at most 56 bits) in the next
//! 56, a second (a generation, a timer id, a VM type) in the low 64.

use super::events::Ev;
use crate::domain::VmType;

#[derive(Debug, Clone, Copy)]
pub(super) struct PackedEv(u128);

const FIRST_BITS: u32 = 56;

fn pack(tag: u8, first: usize, second: u64) -> PackedEv {
    debug_assert!((first as u64) < 1 << FIRST_BITS, "an id of {first} does not fit a packed event");
    PackedEv((u128::from(tag) << 120) | (u128::from(first as u64) << 64) | u128::from(second))
}

impl From<Ev> for PackedEv {
    #[inline]
    fn from(ev: Ev) -> Self {
        match ev {
            Ev::Guest { v, gen } => pack(0, v, gen.into()),
            Ev::Wake { t } => pack(1, t, 0),
            Ev::Timer { host, id } => pack(2, host as usize, id),
            Ev::Tick { p } => pack(3, p, 0),
            Ev::SliceEnd { p } => pack(4, p, 0),
            Ev::Resched { p, gen } => pack(5, p, gen.into()),
            Ev::SetType { d, ty } => pack(6, d, u64::from(ty == VmType::Con)),
            Ev::Irq { v, gen } => pack(7, v, gen.into()),
            Ev::Create { d } => pack(8, d, 0),
            Ev::Destroy { d } => pack(9, d, 0),
            Ev::Net { m } => pack(10, 0, m.into()),
            Ev::Disk { r } => pack(11, 0, r.into()),
            Ev::Client { t } => pack(12, t, 0),
            Ev::GuestTimer { v, gen } => pack(13, v, gen.into()),
        }
    }
}

impl From<PackedEv> for Ev {
    #[inline]
    fn from(PackedEv(bits): PackedEv) -> Self {
        let first = ((bits >> 64) as u64 & ((1 << FIRST_BITS) - 1)) as usize;
        let second = bits as u64;
        // Every packed field came from a field of its type (`pack`), so these casts are exact.
        let gen = second as u32;
        match (bits >> 120) as u8 {
            0 => Ev::Guest { v: first, gen },
            1 => Ev::Wake { t: first },
            2 => Ev::Timer { host: first as u32, id: second },
            3 => Ev::Tick { p: first },
            4 => Ev::SliceEnd { p: first },
            5 => Ev::Resched { p: first, gen },
            6 => Ev::SetType { d: first, ty: if second == 1 { VmType::Con } else { VmType::Hit } },
            7 => Ev::Irq { v: first, gen },
            8 => Ev::Create { d: first },
            9 => Ev::Destroy { d: first },
            10 => Ev::Net { m: second as u32 },
            11 => Ev::Disk { r: second as u32 },
            12 => Ev::Client { t: first },
            13 => Ev::GuestTimer { v: first, gen },
            tag => unreachable!("no event is packed with tag {tag}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_comes_back_as_it_was_packed() {
        let id = (1usize << FIRST_BITS) - 1;
        let events = [
            Ev::Guest { v: id, gen: u32::MAX },
            Ev::Wake { t: 3 },
            Ev::Timer { host: u32::MAX, id: u64::MAX },
            Ev::Tick { p: 0 },
            Ev::SliceEnd { p: id },
            Ev::Resched { p: 7, gen: 1 },
            Ev::SetType { d: 2, ty: VmType::Con },
            Ev::SetType { d: 2, ty: VmType::Hit },
            Ev::Irq { v: 5, gen: 9 },
            Ev::Create { d: 1 },
            Ev::Destroy { d: id },
            Ev::Net { m: u32::MAX },
            Ev::Disk { r: 12 },
            Ev::Client { t: id },
            Ev::GuestTimer { v: 4, gen: u32::MAX - 1 },
        ];
        for ev in events {
            let back = Ev::from(PackedEv::from(ev));
            assert_eq!(format!("{back:?}"), format!("{ev:?}"));
        }
    }
}
