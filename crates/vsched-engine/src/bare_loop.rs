//! The bare event loop vsched's speed is measured against (`vsched bench`, issue 20).
//!
//! A discrete-event simulator cannot handle events faster than its queue can pop and push
//! them. This loop does only that: a `std` binary heap of `u128` keys (time in the high 64
//! bits, a sequence number in the low ones, as `EventQueue` packs them) with a `u64`
//! payload, each iteration popping the earliest event and scheduling one new event a
//! pseudo-random delay later, so the heap keeps a constant size. The simulator's events per
//! CPU-second as a fraction of this loop's, on the same machine in the same session and with
//! the heap held at the simulator's mean queue length, is the figure that stays comparable
//! from machine to machine (docs/performance.md).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::Time;

/// The mean gap between the loop's scheduled events: 50 µs, the order of a guest event in the
/// standard benchmark. Any gap gives the same speed; it only spreads the keys.
const MEAN_DELAY_NS: Time = 50_000;

/// Iterations between two calls of `run_until`'s `keep_going` (tens of ms): a Ctrl-C stops a
/// long loop at once, and the calls, outside the timed stretches, cost the loop nothing.
const CHECK_EVERY: u64 = 1 << 20;

/// Runs `events` pop-and-push iterations over a heap of `queue_len` events (at least one) and
/// returns the wall-clock time they took.
pub fn run(events: u64, queue_len: usize) -> Duration {
    run_until(events, queue_len, &mut || true).expect("never stopped")
}

/// As [`run`], calling `keep_going` every million iterations or so; `None` if it returned
/// `false` (the loop stopped there).
pub fn run_until(events: u64, queue_len: usize, keep_going: &mut dyn FnMut() -> bool) -> Option<Duration> {
    let mut rng = SplitMix64(0x5eed);
    let mut next_delay = move || rng.next() % (2 * MEAN_DELAY_NS);
    let mut heap: BinaryHeap<Reverse<(u128, u64)>> = BinaryHeap::with_capacity(queue_len.max(1) + 1);
    let mut seq: u64 = 0;
    let key = |time: Time, seq: u64| (u128::from(time) << 64) | u128::from(seq);
    for _ in 0..queue_len.max(1) {
        heap.push(Reverse((key(next_delay(), seq), seq)));
        seq += 1;
    }
    let mut checksum: u64 = 0;
    let mut took = Duration::ZERO;
    let mut left = events;
    while left > 0 {
        let chunk = left.min(CHECK_EVERY);
        let started = Instant::now();
        for _ in 0..chunk {
            let Reverse((k, payload)) = heap.pop().expect("the heap never empties");
            checksum = checksum.wrapping_add(payload);
            let now = (k >> 64) as Time;
            heap.push(Reverse((key(now + next_delay(), seq), seq)));
            seq += 1;
        }
        took += started.elapsed();
        left -= chunk;
        if left > 0 && !keep_going() {
            return None;
        }
    }
    black_box(checksum);
    Some(took)
}

/// SplitMix64 (Steele, Lea and Flood, OOPSLA 2014): a few instructions per number, so the
/// loop's time is the heap's.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_the_requested_number_of_iterations_on_any_queue_length() {
        // Timing is not asserted (benchmarks only); the loop must terminate on edge sizes.
        for queue_len in [0, 1, 100] {
            let _ = run(1000, queue_len);
        }
    }

    #[test]
    fn stops_when_told_between_stretches() {
        let mut asked = 0;
        let stopped = run_until(10 * CHECK_EVERY, 10, &mut || {
            asked += 1;
            asked < 3
        });
        assert!(stopped.is_none());
        assert_eq!(asked, 3, "asked once per stretch until told to stop");
        assert!(run_until(CHECK_EVERY, 10, &mut || false).is_some(), "one stretch: never asked");
    }
}
