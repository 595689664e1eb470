//! A guest thread's MPI mailbox: how many messages from each source rank have arrived and not
//! yet been received.
//!
//! Only counts are kept: messages from one rank to another arrive in the order they were
//! sent, and `recv` names its source, so which message a `recv` takes is decided by the
//! counts alone.
//!
//! A counter per rank of the job in every receiving thread made a job of n ranks hold n²
//! counters, though a rank of most MPI programs hears from a few neighbours (a 2,048-rank
//! NPB-LU job held 16 MB of zeros). A mailbox holds only the ranks with messages waiting,
//! sorted by rank, until these would take more room than a counter per rank of the job (an
//! all-to-all whose messages all wait); then it holds a counter per rank, until it is empty
//! again. Its size is thus at most the smaller of the two: the room of the most sources that
//! waited at once in the sparse form (kept, so that a message and its receive do not
//! allocate and free), nothing once the dense form empties.

/// Bytes of one waiting source in the sparse form: `(rank, count)`.
const SPARSE_ENTRY_BYTES: usize = std::mem::size_of::<(u32, u32)>();
/// Bytes of one rank's counter in the dense form.
const DENSE_ENTRY_BYTES: usize = std::mem::size_of::<u32>();

#[derive(Debug)]
pub(super) enum Mailbox {
    /// `(source rank, messages waiting)` for each rank with messages waiting, by rank.
    Sparse(Vec<(u32, u32)>),
    /// Messages waiting per source rank, for every rank of the job, and their sum.
    Dense { counts: Vec<u32>, waiting: u64 },
}

impl Default for Mailbox {
    fn default() -> Self {
        Mailbox::Sparse(Vec::new())
    }
}

impl Mailbox {
    /// A message from rank `from` (of a job of `world` ranks) arrived.
    pub(super) fn put(&mut self, from: u32, world: usize) {
        match self {
            Mailbox::Sparse(waiting) => match waiting.binary_search_by_key(&from, |&(rank, _)| rank) {
                Ok(at) => waiting[at].1 += 1,
                Err(at) => {
                    if waiting.len() == waiting.capacity() {
                        let grown = (2 * waiting.capacity()).max(4);
                        if grown * SPARSE_ENTRY_BYTES > world * DENSE_ENTRY_BYTES {
                            self.make_dense(world);
                            return self.put(from, world);
                        }
                        waiting.reserve_exact(grown - waiting.len());
                    }
                    waiting.insert(at, (from, 1));
                }
            },
            Mailbox::Dense { counts, waiting } => {
                counts[from as usize] += 1;
                *waiting += 1;
            }
        }
    }

    /// Takes a message from rank `from` if one waits; false if none does.
    pub(super) fn take(&mut self, from: u32) -> bool {
        match self {
            Mailbox::Sparse(waiting) => match waiting.binary_search_by_key(&from, |&(rank, _)| rank) {
                Ok(at) if waiting[at].1 > 1 => {
                    waiting[at].1 -= 1;
                    true
                }
                Ok(at) => {
                    waiting.remove(at);
                    true
                }
                Err(_) => false,
            },
            Mailbox::Dense { counts, waiting } => match counts.get_mut(from as usize) {
                Some(n @ 1..) => {
                    *n -= 1;
                    *waiting -= 1;
                    if *waiting == 0 {
                        *self = Mailbox::default();
                    }
                    true
                }
                _ => false,
            },
        }
    }

    /// The sparse form's entries as a counter per rank of a job of `world` ranks.
    fn make_dense(&mut self, world: usize) {
        let Mailbox::Sparse(entries) = self else { return };
        let mut counts = vec![0; world];
        let mut waiting = 0;
        for &(rank, n) in entries.iter() {
            counts[rank as usize] = n;
            waiting += u64::from(n);
        }
        *self = Mailbox::Dense { counts, waiting };
    }

    /// Bytes it holds beside its own record.
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        match self {
            Mailbox::Sparse(waiting) => waiting.capacity() * SPARSE_ENTRY_BYTES,
            Mailbox::Dense { counts, .. } => counts.capacity() * DENSE_ENTRY_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsched_engine::{Rng, RngStreams};

    /// Random arrivals and receives, over jobs of a few to many ranks, take exactly what a
    /// counter per rank would, and the mailbox never holds more than such counters would.
    #[test]
    fn takes_what_a_counter_per_rank_would_and_holds_no_more() {
        let mut rng = RngStreams::new(3).stream(0);
        for world in [1usize, 2, 7, 16, 64, 300] {
            let mut mailbox = Mailbox::default();
            let mut reference = vec![0u32; world];
            let mut was_dense = false;
            for step in 0..20_000 {
                // Phases of arrivals then of receives, so that both forms are reached.
                let arriving = (step / 500) % 2 == 0;
                let from = rng.gen_range(0..world as u32);
                if arriving && rng.gen_bool(0.8) {
                    mailbox.put(from, world);
                    reference[from as usize] += 1;
                } else {
                    let expected = reference[from as usize] > 0;
                    assert_eq!(mailbox.take(from), expected, "world {world}, step {step}");
                    if expected {
                        reference[from as usize] -= 1;
                    }
                }
                was_dense |= matches!(mailbox, Mailbox::Dense { .. });
                let dense_bytes = world * DENSE_ENTRY_BYTES;
                assert!(mailbox.heap_bytes() <= dense_bytes, "world {world}, step {step}");
                if reference.iter().all(|&n| n == 0) {
                    assert!(matches!(mailbox, Mailbox::Sparse(_)), "an empty mailbox is sparse again");
                }
            }
            assert!(was_dense, "world {world}: the phases of arrivals fill the dense form");
        }
    }

    #[test]
    fn a_few_neighbours_of_a_large_job_take_a_few_entries() {
        let mut mailbox = Mailbox::default();
        for from in [5, 2047, 6, 5] {
            mailbox.put(from, 2048);
        }
        assert_eq!(mailbox.heap_bytes(), 4 * SPARSE_ENTRY_BYTES);
        assert!(mailbox.take(5) && mailbox.take(5) && !mailbox.take(5) && !mailbox.take(0));
    }
}
