//! Slotted events: an indexed binary min-heap holding at most one pending event per slot,
//! which a newer one replaces where it sits.
//!
//! # Why
//! Some events are re-armed far more often than they fire. A vCPU's guest timer is armed at
//! every switch-in and cancelled at every switch-out; a spinner that takes a pause-loop exit
//! every few microseconds arms it hundreds of times per tick. Cancelled by a generation stamp
//! in the main heap, each of those would stay queued until its time came, then be popped
//! and skipped: in the standard benchmark since Xen 4.18's yield rules, 3 of every 10 pops.
//! Kept here, one per slot, a re-armed event replaces the old one where it sits, and a
//! cancelled one is skipped at most once per slot before the slot is armed again.
//!
//! # Why by hand
//! Slots are dense integers (vCPU ids), so the position of each slot's entry is an array
//! lookup; the general indexed priority queues on crates.io key their items by hash, which
//! costs more than the heap operations themselves at these sizes.
//!
//! Keys are the event queue's packed `(time, priority, sequence)`, unique per event, so the
//! order in which slotted and heap events come out is the one a single heap would give.

/// A slot with no pending event.
const EMPTY: u32 = u32::MAX;

pub(crate) struct Slots<E> {
    /// The pending entries, a binary min-heap by key: `(key, slot, payload)`.
    heap: Vec<(u128, u32, E)>,
    /// `position[slot]`: where the slot's entry is in `heap`, or `EMPTY`.
    position: Vec<u32>,
}

impl<E> Slots<E> {
    pub(crate) fn new() -> Self {
        Slots { heap: Vec::new(), position: Vec::new() }
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// The smallest key, if any entry is pending.
    pub(crate) fn min_key(&self) -> Option<u128> {
        self.heap.first().map(|e| e.0)
    }

    /// Sets `slot`'s pending event to `(key, payload)`, replacing the one it had.
    pub(crate) fn set(&mut self, slot: usize, key: u128, payload: E) {
        if slot >= self.position.len() {
            self.position.resize(slot + 1, EMPTY);
        }
        match self.position[slot] {
            EMPTY => {
                self.heap.push((key, slot as u32, payload));
                self.sift_up(self.heap.len() - 1);
            }
            at => {
                let at = at as usize;
                let old = self.heap[at].0;
                self.heap[at].0 = key;
                self.heap[at].2 = payload;
                if key < old {
                    self.sift_up(at);
                } else {
                    self.sift_down(at);
                }
            }
        }
    }

    /// Removes and returns the entry with the smallest key.
    pub(crate) fn pop(&mut self) -> Option<(u128, E)> {
        if self.heap.is_empty() {
            return None;
        }
        let removed = self.heap.swap_remove(0);
        self.position[removed.1 as usize] = EMPTY;
        if !self.heap.is_empty() {
            self.sift_down(0);
        }
        Some((removed.0, removed.2))
    }

    /// Moves the entry at `at` up to its place; each entry it passes moves down one level.
    fn sift_up(&mut self, mut at: usize) {
        let key = self.heap[at].0;
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.heap[parent].0 <= key {
                break;
            }
            self.heap.swap(at, parent);
            self.position[self.heap[at].1 as usize] = at as u32;
            at = parent;
        }
        self.position[self.heap[at].1 as usize] = at as u32;
    }

    /// Moves the entry at `at` down to its place; each entry it passes moves up one level.
    fn sift_down(&mut self, mut at: usize) {
        let key = self.heap[at].0;
        let n = self.heap.len();
        loop {
            let left = 2 * at + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && self.heap[right].0 < self.heap[left].0 { right } else { left };
            if key <= self.heap[child].0 {
                break;
            }
            self.heap.swap(at, child);
            self.position[self.heap[at].1 as usize] = at as u32;
            at = child;
        }
        self.position[self.heap[at].1 as usize] = at as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    /// Every entry is no smaller than its parent, and `position` points at each slot's entry.
    fn assert_consistent(slots: &Slots<u64>) {
        for (at, entry) in slots.heap.iter().enumerate() {
            if at > 0 {
                assert!(slots.heap[(at - 1) / 2].0 <= entry.0, "entry {at} is above its parent");
            }
            assert_eq!(slots.position[entry.1 as usize] as usize, at, "slot {} is not where it says", entry.1);
        }
        let pending = slots.position.iter().filter(|&&p| p != EMPTY).count();
        assert_eq!(pending, slots.heap.len());
    }

    /// Random sets (new slots and replacements, earlier or later) and pops over many slots keep
    /// the heap and its index consistent, and pops come out in key order of what is pending.
    #[test]
    fn sets_and_pops_keep_the_heap_and_its_index_in_order() {
        let mut rng = crate::RngStreams::new(5).stream(0);
        let mut slots: Slots<u64> = Slots::new();
        let mut pending: Vec<Option<u128>> = vec![None; 300];
        for step in 0..20_000u64 {
            let slot = rng.gen_range(0..300usize);
            if rng.gen_bool(0.7) {
                let key = (rng.gen_range(0..1_000u128) << 64) | step as u128;
                slots.set(slot, key, step);
                pending[slot] = Some(key);
            } else {
                let smallest = pending.iter().flatten().min().copied();
                assert_eq!(slots.pop().map(|(key, _)| key), smallest, "step {step}");
                if let Some(key) = smallest {
                    *pending.iter_mut().find(|k| **k == Some(key)).unwrap() = None;
                }
            }
            assert_consistent(&slots);
        }
    }
}
