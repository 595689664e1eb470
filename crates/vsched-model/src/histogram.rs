//! A streaming distribution of non-negative integer samples (durations in ns): exact count,
//! sum, mean, minimum and maximum, and quantiles read from a log-bucketed histogram whose
//! memory depends on the range of the values, never on how many there are.
//!
//! The bucket layout is HdrHistogram's (G. Tene, <http://hdrhistogram.org>; "3 significant
//! digits" there is the same 1024 sub-buckets per power of two): every value below
//! [`EXACT_BELOW`] (2048) has a bucket of its own; above it, each power of two `[2^e, 2^(e+1))`
//! is cut into 1024 equal sub-buckets of width `2^(e-10)`.
//!
//! A quantile is nearest-rank, as on the sorted samples: the `ceil(q n)`-th smallest sample
//! (at least the first). The histogram finds the bucket holding that sample and reports the
//! bucket's midpoint `lower + width / 2`, clamped to the exact `[min, max]` of all samples;
//! the first and the last rank report the exact minimum and maximum. So a reported quantile
//! `r` and the true one `x` satisfy `|r - x| <= x / 2048` ([`RELATIVE_ERROR`], under
//! 0.05 %), and `r == x` whenever `x < 2048` (ns: below about 2 µs). Why 1024 sub-buckets:
//! half as many (0.1 %) would be the coarsest that meets the project's 0.1 % target; 1024
//! keeps a 2x margin and costs 8 KB per power of two actually visited (allocated in chunks
//! of 64 buckets as samples arrive), e.g. about 80 KB for latencies spread from 10 µs to
//! 10 ms, and nothing for a VM that records nothing.

/// Sub-buckets per power of two, as bits.
const SUB_BITS: u32 = 10;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this have a bucket each, so they are reported exactly.
pub const EXACT_BELOW: u64 = 2 * SUB;
/// The bound on a reported quantile's error relative to the true one: half a sub-bucket
/// over the smallest value of its power of two.
pub const RELATIVE_ERROR: f64 = 1.0 / (2 * SUB) as f64;
/// Buckets are allocated in chunks of this many, the first time a sample falls in one.
const CHUNK: usize = 64;

/// A distribution of samples; see the module notes for what its quantiles are.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    /// Counts per bucket, by chunk; `None` for chunks no sample fell into yet.
    chunks: Vec<Option<Box<[u64; CHUNK]>>>,
}

/// The bucket of value `v`.
fn bucket(v: u64) -> usize {
    if v < EXACT_BELOW {
        return v as usize;
    }
    let top = 63 - v.leading_zeros(); // v in [2^top, 2^(top+1)), top > SUB_BITS
    let shift = top - SUB_BITS; // the bucket's width is 2^shift
    let sub = (v >> shift) - SUB; // the SUB_BITS bits after the leading one
    (EXACT_BELOW + (shift as u64 - 1) * SUB + sub) as usize
}

/// The smallest value of bucket `b` and its width.
fn bounds(b: usize) -> (u64, u64) {
    let b = b as u64;
    if b < EXACT_BELOW {
        return (b, 1);
    }
    let shift = (b - EXACT_BELOW) / SUB + 1;
    let sub = (b - EXACT_BELOW) % SUB;
    ((SUB + sub) << shift, 1 << shift)
}

impl Histogram {
    /// An empty histogram; it allocates nothing until its first sample.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn record(&mut self, v: u64) {
        if self.count == 0 {
            (self.min, self.max) = (v, v);
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += 1;
        self.sum += v as u128;
        let b = bucket(v);
        let (c, i) = (b / CHUNK, b % CHUNK);
        if self.chunks.len() <= c {
            self.chunks.resize(c + 1, None);
        }
        self.chunks[c].get_or_insert_with(|| Box::new([0; CHUNK]))[i] += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The exact sum of the samples.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// The exact mean (None without samples).
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    pub fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min)
    }

    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    /// Bytes of bucket storage allocated (the chunk table and the chunks in use).
    pub fn heap_bytes(&self) -> usize {
        let table = self.chunks.capacity() * std::mem::size_of::<Option<Box<[u64; CHUNK]>>>();
        table + self.chunks.iter().flatten().count() * std::mem::size_of::<[u64; CHUNK]>()
    }

    /// The quantile `q` (in [0, 1]), nearest-rank, within [`RELATIVE_ERROR`] (module notes);
    /// None without samples.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        self.quantiles(&[q]).map(|v| v[0])
    }

    /// The quantiles `qs`, in their order, in one pass over the buckets.
    pub fn quantiles(&self, qs: &[f64]) -> Option<Vec<u64>> {
        if self.count == 0 {
            return None;
        }
        let n = self.count;
        // The same rank as nearest-rank on the sorted samples (`metrics::quantile`).
        let rank = |q: f64| ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut order: Vec<usize> = (0..qs.len()).collect();
        order.sort_by_key(|&i| rank(qs[i]));
        let mut out = vec![0; qs.len()];
        let mut next = order.iter().peekable();
        let mut seen = 0u64;
        'walk: for (c, chunk) in self.chunks.iter().enumerate() {
            let Some(chunk) = chunk else { continue };
            for (i, &k) in chunk.iter().enumerate() {
                if k == 0 {
                    continue;
                }
                seen += k;
                while let Some(&&j) = next.peek() {
                    let r = rank(qs[j]);
                    if r > seen {
                        break;
                    }
                    out[j] = if r == 1 {
                        self.min
                    } else if r == n {
                        self.max
                    } else {
                        let (lower, width) = bounds(c * CHUNK + i);
                        (lower + width / 2).clamp(self.min, self.max)
                    };
                    next.next();
                }
                if next.peek().is_none() {
                    break 'walk;
                }
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;
    use vsched_engine::RngStreams;

    /// The exact nearest-rank quantile of sorted samples: the reference.
    fn exact(sorted: &[u64], q: f64) -> u64 {
        let n = sorted.len();
        sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1]
    }

    fn levels() -> Vec<f64> {
        let mut qs: Vec<f64> = (0..=1000).map(|i| i as f64 / 1000.0).collect();
        qs.extend([0.0001, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0 / 3.0]);
        qs
    }

    /// Checks every level of `levels()` against the exact quantile of `xs`, within the bound,
    /// and exactly below `EXACT_BELOW`, at the minimum and at the maximum.
    fn check(xs: &[u64]) {
        let mut h = Histogram::new();
        for &x in xs {
            h.record(x);
        }
        let mut sorted = xs.to_vec();
        sorted.sort_unstable();
        let qs = levels();
        let got = h.quantiles(&qs).unwrap();
        for (k, (&q, &r)) in qs.iter().zip(&got).enumerate() {
            let x = exact(&sorted, q);
            let err = r.abs_diff(x) as f64;
            assert!(err <= x as f64 * RELATIVE_ERROR, "q {q}: got {r}, exact {x}");
            if x < EXACT_BELOW || q == 0.0 || q == 1.0 {
                assert_eq!(r, x, "q {q} must be exact");
            }
            if k % 50 == 0 {
                assert_eq!(h.quantile(q), Some(r), "one at a time or together");
            }
        }
        assert_eq!(h.count(), xs.len() as u64);
        assert_eq!(h.sum(), xs.iter().map(|&x| x as u128).sum::<u128>());
        assert_eq!((h.min(), h.max()), (sorted.first().copied(), sorted.last().copied()));
    }

    #[test]
    fn buckets_tile_the_integers_and_stay_within_half_a_percent_mille() {
        // Bucket bounds are contiguous, and a value lies in the bucket `bucket` gives it.
        let mut edge = 0u64;
        for b in 0..bucket(u64::MAX) {
            let (lower, width) = bounds(b);
            assert_eq!(lower, edge, "bucket {b}");
            assert_eq!(bucket(lower), b);
            assert_eq!(bucket(lower + width - 1), b);
            // Half the width over the smallest value: the relative error bound.
            assert!(lower == 0 || (width / 2) as f64 / lower as f64 <= RELATIVE_ERROR);
            edge = lower + width;
        }
        let (lower, width) = bounds(bucket(u64::MAX));
        assert_eq!(lower.checked_add(width - 1), Some(u64::MAX));
    }

    #[test]
    fn small_values_are_exact_like_the_sorted_list() {
        let xs: Vec<u64> = (1..=100).collect();
        let mut h = Histogram::new();
        xs.iter().for_each(|&x| h.record(x));
        assert_eq!(h.quantile(0.99), Some(99));
        assert_eq!(h.quantile(1.0), Some(100));
        assert_eq!(h.quantile(0.5), Some(50));
        assert_eq!(h.quantile(0.0), Some(1));
        assert_eq!(Histogram::new().quantile(0.5), None);
        assert_eq!(Histogram::new().mean(), None);
    }

    #[test]
    fn quantiles_of_random_data_are_within_the_bound() {
        let streams = RngStreams::new(42);
        for (k, n) in [1usize, 2, 3, 10, 101, 1_000, 100_000].into_iter().enumerate() {
            let mut rng = streams.stream(k as u64);
            // Log-uniform over 1 ns .. 2^40 ns: every bucket width at once.
            let wide: Vec<u64> = (0..n).map(|_| 2f64.powf(rng.gen::<f64>() * 40.0) as u64).collect();
            check(&wide);
            // Exponential around 2 ms, like request gaps and latencies.
            let exp: Vec<u64> = (0..n).map(|_| (-(1.0 - rng.gen::<f64>()).ln() * 2e6) as u64).collect();
            check(&exp);
            // Few distinct values, many ties, on both sides of EXACT_BELOW.
            let ties: Vec<u64> = (0..n).map(|_| [5, 2047, 2048, 2049, 30_000, 30_001][rng.gen_range(0..6)]).collect();
            check(&ties);
            // Values near the top of the range.
            let huge: Vec<u64> = (0..n).map(|_| u64::MAX - rng.gen_range(0..1u64 << 60)).collect();
            check(&huge);
        }
    }

    #[test]
    fn worst_case_values_sit_at_the_bound() {
        // A bucket's lowest value, reported as its midpoint: the largest relative error.
        let x = 1u64 << 20;
        let mut h = Histogram::new();
        for v in [0, x, x, u64::MAX] {
            h.record(v);
        }
        let r = h.quantile(0.5).unwrap();
        assert_eq!(r, x + (x >> 11));
        assert_eq!(r.abs_diff(x) as f64, x as f64 * RELATIVE_ERROR);
    }

    #[test]
    fn memory_depends_on_the_range_not_the_count() {
        let mut rng = RngStreams::new(7).stream(0);
        let mut h = Histogram::new();
        assert_eq!(h.heap_bytes(), 0);
        let mut sample = |h: &mut Histogram| h.record(rng.gen_range(10_000..10_000_000));
        for _ in 0..1_000_000 {
            sample(&mut h);
        }
        // Every chunk of the range is in use by now.
        let after_1m = h.heap_bytes();
        for _ in 0..1_000_000 {
            sample(&mut h);
        }
        assert_eq!(h.heap_bytes(), after_1m, "a million more samples in the same range");
        assert!(after_1m <= 11 * 8192 + 8 * 512, "{after_1m} bytes");
    }
}
