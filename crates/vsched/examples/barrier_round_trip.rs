//! The cost of one barrier among T threads, for docs/parallel.md: `std::sync::Barrier`
//! (a mutex and a condition variable: a waiting thread sleeps in the kernel) and a
//! sense-reversing barrier that spins on an atomic counter (the waiters stay on their cores).
//!
//! ```sh
//! cargo run --release -p vsched --example barrier_round_trip -- [--threads 2] [--rounds 100000]
//! ```
//!
//! Each thread passes the barrier `rounds` times with no work between: the wall time over
//! the rounds is one barrier's cost, from the last arrival to every thread leaving.
//! Five batches; the median and the spread are printed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// One thread's call to a barrier, with its local sense (unused by `std`'s).
type Wait = Arc<dyn Fn(&mut bool) + Send + Sync>;
/// A barrier's name and how to make one for n threads.
type Kind = (&'static str, fn(usize) -> Wait);

/// A centralized sense-reversing barrier (Mellor-Crummey and Scott, ACM TOCS 9(1), 1991, §3.1).
struct SpinBarrier {
    threads: usize,
    left: AtomicUsize,
    sense: AtomicBool,
}

impl SpinBarrier {
    fn wait(&self, local_sense: &mut bool) {
        *local_sense = !*local_sense;
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.left.store(self.threads, Ordering::Relaxed);
            self.sense.store(*local_sense, Ordering::Release);
        } else {
            while self.sense.load(Ordering::Acquire) != *local_sense {
                std::hint::spin_loop();
            }
        }
    }
}

fn option(args: &[String], name: &str, default: usize) -> usize {
    match args.iter().position(|a| a == name) {
        None => default,
        Some(i) => match args.get(i + 1).and_then(|v| v.parse::<usize>().ok()).filter(|&n| n > 0) {
            Some(n) => n,
            None => {
                eprintln!("error: {name}: expected a positive integer");
                std::process::exit(2);
            }
        },
    }
}

/// Nanoseconds per barrier over `rounds` rounds of `threads` threads calling `wait`.
fn time_rounds(threads: usize, rounds: usize, wait: Wait) -> f64 {
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let wait = Arc::clone(&wait);
            std::thread::spawn(move || {
                let mut sense = false;
                for _ in 0..rounds {
                    wait(&mut sense);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a barrier thread panicked");
    }
    started.elapsed().as_nanos() as f64 / rounds as f64
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads = option(&args, "--threads", 2);
    let rounds = option(&args, "--rounds", 100_000);
    let kinds: [Kind; 2] = [
        ("std::sync::Barrier", |n| {
            let b = Arc::new(Barrier::new(n));
            Arc::new(move |_: &mut bool| {
                b.wait();
            })
        }),
        ("spinning, sense-reversing", |n| {
            let b = Arc::new(SpinBarrier { threads: n, left: AtomicUsize::new(n), sense: AtomicBool::new(false) });
            Arc::new(move |sense: &mut bool| b.wait(sense))
        }),
    ];
    for (name, make) in kinds {
        let mut batches: Vec<f64> = (0..5).map(|_| time_rounds(threads, rounds, make(threads))).collect();
        batches.sort_by(f64::total_cmp);
        println!(
            "{name}: {threads} threads, {rounds} rounds: {:.0} ns per barrier (median of 5 batches; {:.0}-{:.0})",
            batches[2], batches[0], batches[4]
        );
    }
}
