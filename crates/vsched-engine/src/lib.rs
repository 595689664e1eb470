//! The discrete-event core of vsched. It knows nothing of hypervisors.
//!
//! Four verbs, as in SimPy's core: [`EventQueue::schedule`] an event, [`EventQueue::pop`] the
//! next one, [`EventQueue::cancel`] a pending one, and read [`EventQueue::now`].
//!
//! * Time is integer nanoseconds ([`Time`]) from the start of the run.
//! * Events are totally ordered by `(time, priority, sequence)`: at one instant the lower
//!   priority value goes first, and among equal priorities the event scheduled first goes
//!   first. Nothing depends on hash order or floating point, so a run is reproducible.
//! * Cancellation is O(1): [`EventQueue::cancel`] marks a ticket dead and [`EventQueue::pop`]
//!   skips it when it surfaces.
//! * An event re-armed far more often than it fires goes in a slot instead
//!   ([`EventQueue::schedule_in_slot`]): one pending event per slot, replaced where it sits,
//!   in the same order as the rest (`slots`).
//! * [`RngStreams`] gives each component its own seeded random stream, so adding draws in
//!   one component never shifts the numbers another one sees.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

pub mod bare_loop;
mod slots;

use slots::Slots;

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

/// Simulated time in nanoseconds.
pub type Time = u64;

pub const NS_PER_US: Time = 1_000;
pub const NS_PER_MS: Time = 1_000_000;
pub const NS_PER_S: Time = 1_000_000_000;

/// Seconds (user-facing) to nanoseconds, rounding to the nearest nanosecond.
pub fn secs_to_ns(s: f64) -> Time {
    (s * NS_PER_S as f64).round() as Time
}

/// `x.round() as Time` for every `x` (halves away from zero; negative and NaN give 0, and
/// beyond `u64::MAX` saturates), without the call to the software `round` that targets
/// lacking SSE4.1 make: guest durations are rounded at almost every event. Exact because
/// for `0 <= x < 2^52` both `x as u64 as f64` and `x - trunc(x)` are exact, and above
/// 2^52 every `f64` is an integer.
#[inline]
pub fn round_to_time(x: f64) -> Time {
    let whole = x as Time;
    let fraction = x - whole as f64;
    // Branch-free: which way a drawn duration rounds is a coin toss the predictor loses.
    whole.saturating_add(Time::from(fraction >= 0.5))
}

/// Nanoseconds to seconds (user-facing).
pub fn ns_to_secs(t: Time) -> f64 {
    t as f64 / NS_PER_S as f64
}

/// Identifies one scheduled event so it can be cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket(u64);

/// A queued event. The order `(time, priority, seq)` is packed into one integer so the heap
/// compares a single u128 (time in the high 64 bits, then priority, then a 56-bit sequence).
struct Entry<E> {
    key: u128,
    payload: E,
}

const SEQ_BITS: u32 = 56;

impl<E> Entry<E> {
    fn seq(&self) -> u64 {
        (self.key as u64) & ((1 << SEQ_BITS) - 1)
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // BinaryHeap is a max-heap: reverse so the smallest (time, priority, seq) pops first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// A priority queue of future events with a clock that advances as events are popped.
///
/// The earliest event may wait outside the heap, in `front`: an event scheduled before
/// everything queued (a reschedule at the current instant, the next step of the only busy
/// vCPU) is often the very next one popped, and then it never enters the heap. The order of
/// delivery is the heap's alone would give.
pub struct EventQueue<E> {
    /// If set, an entry that sorts before every entry of `heap`.
    front: Option<Entry<E>>,
    heap: BinaryHeap<Entry<E>>,
    /// Slotted events, at most one per slot, outside `heap` (see [`EventQueue::schedule_in_slot`]).
    slots: Slots<E>,
    now: Time,
    next_seq: u64,
    /// Sequence numbers of cancelled events still in the heap.
    cancelled: HashSet<u64>,
    popped: u64,
    /// The heap's length summed over pops, for [`EventQueue::mean_len`].
    len_sum: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            front: None,
            heap: BinaryHeap::new(),
            slots: Slots::new(),
            now: 0,
            next_seq: 0,
            cancelled: HashSet::new(),
            popped: 0,
            len_sum: 0,
        }
    }

    /// Current simulated time: the time of the last popped event.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Number of events popped (delivered) so far.
    pub fn delivered(&self) -> u64 {
        self.popped
    }

    /// The heap's mean length at a pop (cancelled events included), over the run so far: the
    /// size at which the bare loop (`bare_loop`) is measured.
    pub fn mean_len(&self) -> f64 {
        if self.popped == 0 {
            0.0
        } else {
            self.len_sum as f64 / self.popped as f64
        }
    }

    /// Number of events waiting, cancelled ones included.
    pub fn len(&self) -> usize {
        self.heap.len() + usize::from(self.front.is_some()) + self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.front.is_none() && self.heap.is_empty() && self.slots.len() == 0
    }

    /// Schedules `payload` at absolute time `at` (never before now) with a tie-break priority.
    pub fn schedule(&mut self, at: Time, priority: u8, payload: E) -> Ticket {
        let ticket = self.reserve();
        self.schedule_reserved(ticket, at, priority, payload);
        ticket
    }

    /// The packed order of an event at `at` (never before now) with `priority` and `ticket`.
    #[inline]
    fn key(&self, ticket: Ticket, at: Time, priority: u8) -> u128 {
        let time = at.max(self.now) as u128;
        (time << 64) | ((priority as u128) << SEQ_BITS) | ticket.0 as u128
    }

    /// The key of the earliest event outside the slots (cancelled ones included).
    #[inline]
    fn queued_key(&self) -> Option<u128> {
        self.front.as_ref().or_else(|| self.heap.peek()).map(|e| e.key)
    }

    /// Takes the next place in the insertion order without queueing anything yet: an event
    /// later given this ticket by [`EventQueue::schedule_reserved`] sorts exactly as if it
    /// had been scheduled when the ticket was taken. A caller that may learn, before the
    /// event is due, that it is no longer wanted reserves and decides later, instead of
    /// queueing an event that would only be skipped (`sim::interpret`'s guest events). A
    /// ticket never used leaves a gap in the sequence, which changes no order.
    pub fn reserve(&mut self) -> Ticket {
        let seq = self.next_seq;
        self.next_seq += 1;
        debug_assert!(seq < 1 << SEQ_BITS);
        Ticket(seq)
    }

    /// Queues `payload` at `at` (never before now) under a ticket from [`EventQueue::reserve`].
    // Inlined, the entry is built in place: passed by reference, its payload's narrow stores
    // were read back at once by wide loads that the store buffer cannot forward (a stall of
    // a dozen cycles on most guest events; docs/performance.md).
    #[inline]
    pub fn schedule_reserved(&mut self, ticket: Ticket, at: Time, priority: u8, payload: E) {
        debug_assert!(at >= self.now, "event scheduled in the past: {at} < {}", self.now);
        let key = self.key(ticket, at, priority);
        let entry = Entry { key, payload };
        match &self.front {
            Some(front) if key < front.key => {
                let displaced = self.front.replace(entry).expect("front is set");
                self.heap.push(displaced);
            }
            Some(_) => self.heap.push(entry),
            None if self.heap.peek().is_none_or(|top| key < top.key) => self.front = Some(entry),
            None => self.heap.push(entry),
        }
    }

    /// Makes `payload` at `at` the one pending event of `slot` (a small integer, such as a vCPU
    /// id), replacing the event the slot had. It takes its place in the insertion order now,
    /// as [`EventQueue::schedule`] would: only where it is kept differs. For an event that is
    /// re-armed or cancelled many times for each time it fires.
    #[inline]
    pub fn schedule_in_slot(&mut self, slot: usize, at: Time, priority: u8, payload: E) {
        debug_assert!(at >= self.now, "event scheduled in the past: {at} < {}", self.now);
        let ticket = self.reserve();
        let key = self.key(ticket, at, priority);
        self.slots.set(slot, key, payload);
    }

    /// Cancels a pending event. Do not cancel an event already delivered: its ticket would
    /// stay in the cancelled set for the rest of the run.
    pub fn cancel(&mut self, ticket: Ticket) {
        if ticket.0 < self.next_seq {
            self.cancelled.insert(ticket.0);
        }
    }

    /// Removes and returns the next live event, advancing the clock to its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        loop {
            let queued = self.queued_key();
            let (key, payload) = match (queued, self.slots.min_key()) {
                (None, None) => return None,
                (Some(q), Some(s)) if s < q => self.slots.pop()?,
                (None, Some(_)) => self.slots.pop()?,
                _ => {
                    let entry = self.front.take().or_else(|| self.heap.pop())?;
                    if !self.cancelled.is_empty() && self.cancelled.remove(&entry.seq()) {
                        continue;
                    }
                    (entry.key, entry.payload)
                }
            };
            self.now = (key >> 64) as Time;
            self.popped += 1;
            self.len_sum += (self.heap.len() + self.slots.len()) as u64 + 1;
            return Some((self.now, payload));
        }
    }

    /// Moves the clock forward to `t` without delivering anything (closing a run at its
    /// horizon). Events before `t` must have been popped already.
    pub fn advance_to(&mut self, t: Time) {
        debug_assert!(self.peek_time().is_none_or(|next| next >= t));
        self.now = self.now.max(t);
    }

    /// Time of the next event (cancelled ones included), without popping it.
    pub fn peek_time(&self) -> Option<Time> {
        let queued = self.queued_key();
        let key = match (queued, self.slots.min_key()) {
            (Some(q), Some(s)) => q.min(s),
            (q, s) => q.or(s)?,
        };
        Some((key >> 64) as Time)
    }
}

/// Independent, reproducible random streams: stream `k` of seed `s` is the same on every
/// machine and does not depend on how many numbers other streams drew.
pub struct RngStreams {
    seed: u64,
}

impl RngStreams {
    pub fn new(seed: u64) -> Self {
        RngStreams { seed }
    }

    /// The random stream for component `stream` (for example a VM index, or a policy).
    pub fn stream(&self, stream: u64) -> Pcg64Mcg {
        // Mix the two numbers with SplitMix64 so neighbouring seeds give unrelated streams.
        let mut z = self.seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Pcg64Mcg::seed_from_u64(z)
    }
}

pub use rand::Rng;
pub type StreamRng = Pcg64Mcg;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_priority_then_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(10, 1, "t10-p1-first");
        q.schedule(5, 9, "t5");
        q.schedule(10, 0, "t10-p0");
        q.schedule(10, 1, "t10-p1-second");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["t5", "t10-p0", "t10-p1-first", "t10-p1-second"]);
        assert_eq!(q.now(), 10);
        assert_eq!(q.delivered(), 4);
    }

    #[test]
    fn a_reserved_ticket_sorts_where_it_was_taken() {
        let mut q = EventQueue::new();
        let early = q.reserve();
        q.schedule(10, 1, "scheduled after the reservation");
        let _unused = q.reserve();
        q.schedule(10, 1, "scheduled last");
        q.schedule_reserved(early, 10, 1, "reserved first, queued last");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["reserved first, queued last", "scheduled after the reservation", "scheduled last"]);
    }

    #[test]
    fn cancelled_events_are_never_delivered() {
        let mut q = EventQueue::new();
        let a = q.schedule(1, 0, 'a');
        q.schedule(2, 0, 'b');
        let c = q.schedule(3, 0, 'c');
        q.cancel(a);
        q.cancel(c);
        assert_eq!(q.pop(), Some((2, 'b')));
        assert_eq!(q.pop(), None);
        assert_eq!(q.delivered(), 1);
    }

    /// Differential test: the heap against a sorted-vector reference on a pseudo-random mix.
    #[test]
    fn matches_a_sorted_reference() {
        let mut rng = RngStreams::new(7).stream(0);
        let mut q = EventQueue::new();
        let mut reference: Vec<(Time, u8, u64)> = Vec::new();
        let mut tickets = Vec::new();
        for seq in 0..2000u64 {
            let t = q.now() + rng.gen_range(0..50);
            let p = rng.gen_range(0..4u8);
            tickets.push((q.schedule(t, p, seq), (t, p, seq)));
            reference.push((t, p, seq));
            if rng.gen_bool(0.1) && !tickets.is_empty() {
                let (ticket, key) = tickets.swap_remove(rng.gen_range(0..tickets.len()));
                q.cancel(ticket);
                reference.retain(|k| *k != key);
            }
            if rng.gen_bool(0.3) && !reference.is_empty() {
                reference.sort();
                let expected = reference.remove(0);
                let (t, seq) = q.pop().unwrap();
                assert_eq!((t, seq), (expected.0, expected.2));
                tickets.retain(|(_, k)| k.2 != seq);
            }
        }
    }

    /// Slotted events interleave with queued ones exactly as one queue would order them: a
    /// reference keeps every pending event, a slot's newer event replacing its older one.
    #[test]
    fn slotted_events_come_out_in_the_order_of_one_queue() {
        let mut rng = RngStreams::new(11).stream(0);
        let mut q = EventQueue::new();
        // (time, priority, payload); a payload >= 1_000_000 is slot (payload - 1_000_000) / 10_000.
        let mut reference: Vec<(Time, u8, u64)> = Vec::new();
        let slot_of = |payload: u64| (payload >= 1_000_000).then(|| (payload - 1_000_000) / 10_000);
        for seq in 0..5000u64 {
            let t = q.now() + rng.gen_range(0..50);
            let p = rng.gen_range(0..4u8);
            if rng.gen_bool(0.5) {
                q.schedule(t, p, seq);
                reference.push((t, p, seq));
            } else {
                let slot = rng.gen_range(0..8u64);
                let payload = 1_000_000 + slot * 10_000 + seq % 10_000;
                q.schedule_in_slot(slot as usize, t, p, payload);
                reference.retain(|k| slot_of(k.2) != Some(slot));
                reference.push((t, p, payload));
            }
            assert_eq!(q.len(), reference.len());
            if rng.gen_bool(0.4) && !reference.is_empty() {
                // Stable sort: among equal (time, priority), the order of scheduling.
                reference.sort_by_key(|k| (k.0, k.1));
                let expected = reference.remove(0);
                assert_eq!(q.peek_time(), Some(expected.0));
                assert_eq!(q.pop(), Some((expected.0, expected.2)), "event {seq}");
            }
        }
        reference.sort_by_key(|k| (k.0, k.1));
        for expected in reference {
            assert_eq!(q.pop(), Some((expected.0, expected.2)));
        }
        assert!(q.is_empty() && q.pop().is_none());
    }

    #[test]
    fn round_to_time_is_round_then_cast() {
        let edges = [
            0.0,
            -0.0,
            0.49999999999999994,
            0.5,
            1.5,
            2.5,
            -0.5,
            -0.7,
            -3.0,
            4503599627370495.5,
            4503599627370496.0,
            9007199254740993.0,
            9.3e18,
            1.8446744073709552e19,
            2e19,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            1e-300,
        ];
        let mut rng = RngStreams::new(3).stream(0);
        // Uniform fractions, and values spread over the binades from 1 to 2^69 (past u64::MAX).
        let drawn = (0..20_000i32).map(|i| {
            let exponent = i % 70;
            rng.gen::<f64>() * 2f64.powi(exponent)
        });
        for x in edges.into_iter().chain(drawn) {
            assert_eq!(round_to_time(x), x.round() as Time, "x = {x:e}");
        }
    }

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<u64> = (0..4).map(|_| 0).scan(RngStreams::new(1).stream(3), |r, _| Some(r.gen())).collect();
        let b: Vec<u64> = (0..4).map(|_| 0).scan(RngStreams::new(1).stream(3), |r, _| Some(r.gen())).collect();
        let c: Vec<u64> = (0..4).map(|_| 0).scan(RngStreams::new(1).stream(4), |r, _| Some(r.gen())).collect();
        let d: Vec<u64> = (0..4).map(|_| 0).scan(RngStreams::new(2).stream(3), |r, _| Some(r.gen())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }
}
