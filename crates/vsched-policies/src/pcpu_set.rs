//! A set of a host's pCPUs as bits in 64-bit words: Xen's `cpumask_t`. Credit keeps its
//! idlers in one (`prv->idlers`) and `_csched_cpu_pick` works on a few, so that a pick on a
//! host of 512 pCPUs reads 8 words per mask instead of 512 flags.
//!
//! The groups Credit compares (a core, a socket) are runs of consecutive pCPUs (a core's
//! threads and a socket's cores are numbered next to each other, `Cx::core_threads`), so the
//! operations that concern a group take it as a range.

use std::ops::Range;

use vsched_model::PcpuId;

const BITS: usize = u64::BITS as usize;

#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub(crate) struct PcpuSet {
    words: Vec<u64>,
    len: usize,
}

/// The same bits over a host's vCPUs (`cosched`'s filler candidates, `cosched_fillers.rs`).
pub(crate) type VcpuSet = PcpuSet;

/// The bits of word `w` that lie in `range` (which must not be empty).
#[inline]
fn word_mask(w: usize, range: &Range<usize>) -> u64 {
    let (lo, hi) = (w * BITS, w * BITS + BITS);
    let from = range.start.max(lo) - lo;
    let to = range.end.min(hi) - lo; // > from for a word that overlaps `range`
    (u64::MAX >> (BITS - (to - from))) << from
}

/// The words that overlap a non-empty `range`.
#[inline]
fn words_of(range: &Range<usize>) -> std::ops::RangeInclusive<usize> {
    range.start / BITS..=(range.end - 1) / BITS
}

impl PcpuSet {
    /// The empty set of a host of `len` pCPUs.
    pub(crate) fn new(len: usize) -> PcpuSet {
        PcpuSet { words: vec![0; len.div_ceil(BITS)], len }
    }

    #[inline]
    pub(crate) fn contains(&self, q: PcpuId) -> bool {
        self.words[q / BITS] >> (q % BITS) & 1 == 1
    }

    #[inline]
    pub(crate) fn insert(&mut self, q: PcpuId) {
        self.words[q / BITS] |= 1 << (q % BITS);
    }

    #[inline]
    pub(crate) fn remove(&mut self, q: PcpuId) {
        self.words[q / BITS] &= !(1 << (q % BITS));
    }

    #[inline]
    pub(crate) fn set(&mut self, q: PcpuId, member: bool) {
        if member {
            self.insert(q);
        } else {
            self.remove(q);
        }
    }

    /// Removes every member.
    pub(crate) fn clear(&mut self) {
        self.words.fill(0);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Makes this set a copy of `other` (keeping its allocation).
    pub(crate) fn copy_from(&mut self, other: &PcpuSet) {
        self.words.clone_from(&other.words);
        self.len = other.len;
    }

    /// How many members lie in `range`.
    pub(crate) fn count_in(&self, range: Range<PcpuId>) -> usize {
        if range.is_empty() {
            return 0;
        }
        words_of(&range).map(|w| (self.words[w] & word_mask(w, &range)).count_ones() as usize).sum()
    }

    /// Removes every pCPU of `range`.
    pub(crate) fn remove_range(&mut self, range: Range<PcpuId>) {
        if range.is_empty() {
            return;
        }
        for w in words_of(&range) {
            self.words[w] &= !word_mask(w, &range);
        }
    }

    /// Removes the members of `other` that lie in `range`.
    pub(crate) fn remove_common_in(&mut self, other: &PcpuSet, range: Range<PcpuId>) {
        if range.is_empty() {
            return;
        }
        for w in words_of(&range) {
            self.words[w] &= !(other.words[w] & word_mask(w, &range));
        }
    }

    /// The first pCPU of `range` in this set and in `also` (when given).
    fn first_in(&self, also: Option<&PcpuSet>, range: Range<PcpuId>) -> Option<PcpuId> {
        if range.is_empty() {
            return None;
        }
        words_of(&range).find_map(|w| {
            let bits = self.words[w] & also.map_or(u64::MAX, |o| o.words[w]) & word_mask(w, &range);
            (bits != 0).then(|| w * BITS + bits.trailing_zeros() as usize)
        })
    }

    /// The first member of `range`.
    pub(crate) fn first_in_range(&self, range: Range<PcpuId>) -> Option<PcpuId> {
        self.first_in(None, range)
    }

    /// The members of `range`, in increasing order.
    pub(crate) fn iter_in(&self, range: Range<PcpuId>) -> impl Iterator<Item = PcpuId> + '_ {
        let mut rest = range;
        std::iter::from_fn(move || {
            let q = self.first_in(None, rest.clone())?;
            rest.start = q + 1;
            Some(q)
        })
    }

    /// `cpumask_cycle(n, self & also & range)`: the first member of `range` after `n`,
    /// wrapping round the host, `n` itself last.
    pub(crate) fn cycle_in(&self, n: PcpuId, also: Option<&PcpuSet>, range: Range<PcpuId>) -> Option<PcpuId> {
        let after = (n + 1).max(range.start)..range.end;
        let up_to_n = range.start..(n + 1).min(range.end);
        self.first_in(also, after).or_else(|| self.first_in(also, up_to_n))
    }

    /// `cpumask_cycle(n, self)` over the whole host.
    pub(crate) fn cycle(&self, n: PcpuId) -> Option<PcpuId> {
        self.cycle_in(n, None, 0..self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same questions asked of a `Vec<bool>`, the representation the set replaced.
    fn flags_cycle(flags: &[bool], n: usize, range: Range<usize>) -> Option<usize> {
        let len = flags.len();
        (1..=len).map(|k| (n + k) % len).find(|&q| flags[q] && range.contains(&q))
    }

    #[test]
    fn a_set_answers_as_flags_do_across_word_boundaries() {
        let len = 200;
        // A fixed pseudo-random pattern (an LCG), dense enough for every word to hold members.
        let mut state = 12345u64;
        let flags: Vec<bool> = (0..len)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                state >> 61 < 3
            })
            .collect();
        let mut set = PcpuSet::new(len);
        for (q, &f) in flags.iter().enumerate() {
            set.set(q, f);
        }
        for range in [0..len, 0..1, 63..65, 60..130, 128..200, 199..200, 5..5] {
            let expected = flags[range.clone()].iter().filter(|&&f| f).count();
            assert_eq!(set.count_in(range.clone()), expected, "{range:?}");
            let members: Vec<usize> = range.clone().filter(|&q| flags[q]).collect();
            assert_eq!(set.iter_in(range.clone()).collect::<Vec<_>>(), members, "{range:?}");
            assert_eq!(set.first_in_range(range.clone()), members.first().copied(), "{range:?}");
            for n in 0..len {
                assert_eq!(
                    set.cycle_in(n, None, range.clone()),
                    flags_cycle(&flags, n, range.clone()),
                    "{n} {range:?}"
                );
            }
        }
        for n in 0..len {
            assert_eq!(set.cycle(n), flags_cycle(&flags, n, 0..len), "{n}");
        }
        let mut cleared = set.clone();
        cleared.remove_range(60..130);
        assert_eq!(cleared.count_in(60..130), 0);
        assert_eq!(cleared.count_in(0..60) + cleared.count_in(130..len), set.count_in(0..60) + set.count_in(130..len));
        let mut all = PcpuSet::new(len);
        (0..len).for_each(|q| all.insert(q));
        all.remove_common_in(&set, 64..128);
        assert!((0..len).all(|q| all.contains(q) != (flags[q] && (64..128).contains(&q))));
        let mut both = PcpuSet::new(len);
        both.insert(70);
        both.insert(150);
        assert_eq!(set.cycle_in(100, Some(&both), 0..len), [150, 70].into_iter().find(|&q| flags[q]));
        assert!(PcpuSet::new(len).is_empty() && !set.is_empty());
        let mut emptied = set.clone();
        emptied.clear();
        assert!(emptied.is_empty() && emptied.iter_in(0..len).next().is_none());
    }
}
