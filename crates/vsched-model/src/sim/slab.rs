//! Records in flight (messages, disk requests), named by a `u32` slot that is reused once
//! the record is done, so memory stays bounded by the records in flight at once.

use std::ops::{Index, IndexMut};

pub(super) struct Slab<T> {
    items: Vec<T>,
    /// Slots whose record is done, reused last-freed first.
    free: Vec<u32>,
}

impl<T> Slab<T> {
    pub(super) fn new() -> Self {
        Slab { items: Vec::new(), free: Vec::new() }
    }

    /// Stores `item` in a free slot, or a new one; returns the slot.
    pub(super) fn insert(&mut self, item: T) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.items[slot as usize] = item;
                slot
            }
            None => {
                self.items.push(item);
                (self.items.len() - 1) as u32
            }
        }
    }

    /// Slot `slot`'s record is done: the slot may be reused (the record stays readable until
    /// it is).
    pub(super) fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }
}

impl<T> Index<u32> for Slab<T> {
    type Output = T;
    fn index(&self, slot: u32) -> &T {
        &self.items[slot as usize]
    }
}

impl<T> IndexMut<u32> for Slab<T> {
    fn index_mut(&mut self, slot: u32) -> &mut T {
        &mut self.items[slot as usize]
    }
}
