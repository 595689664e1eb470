//! Jittered durations (`Dur::Jitter`): a normal draw by Box-Muller, computed fast, with the
//! same result, to the nanosecond, as the exact formula through libm.
//!
//! The exact formula, which fixes every run's random sequence since the first release, is
//! `z = sqrt(-2 ln u1) · cos(2π u2)` with libm's pure-Rust `log` and `cos` (the same bits on
//! every platform), and the duration `round(mean · (1 + cv · z))`, at least 0. libm's `cos`
//! reduces its argument and branches on its quadrant, a coin toss for the branch predictor,
//! and its `log` and `cos` are a long chain of dependent operations: about 45 ns a draw in
//! a loop of draws (`vsched bench --draws`), at most guests' every event.
//!
//! Here `z` is computed by short polynomials of our own (Taylor series, evaluated by
//! Estrin's scheme, no branch on the quadrant) whose error against libm's `z` is bounded by
//! [`Z_ERROR_BOUND`]. The duration is then known to within a margin of the exact one, and
//! rounding to whole nanoseconds gives the exact result unless the margin straddles a half
//! nanosecond (or zero, or the range where every `f64` is whole): only then is the exact
//! formula computed instead, 419 times in 20 million draws at the SimPy peer's jitter
//! (50 µs, cv 0.2; the ignored test `twenty_million_draws` prints these figures). So the
//! result is the exact formula's by construction, not by luck; the tests check the bound
//! with a wide safety factor and compare both paths draw by draw.
//! A loop of draws runs about 30 % faster (`cargo bench -p vsched -- --draws N`), an event of
//! a user-mode spinlock run about 3 % (docs/performance.md). The fast path uses only IEEE-754
//! additions, multiplications, one division and one square root, each correctly rounded, and
//! Rust never fuses them, so it decides alike on every platform, as libm does.
//!
//! Why the bound holds (|z| ≤ 37.7, since u1 ≥ `f64::MIN_POSITIVE`):
//! - `cos(2πu)`: u is split exactly into a quarter turn q/4 and t ∈ [-1/8, 1/8] (u is a
//!   multiple of 2^-53, so `u - q/4` is exact), and cos or sin of 2πt is a Taylor series
//!   to degree 14 or 15: truncation below 1e-15, rounding a few 1e-16. libm's own result
//!   is within 1 ulp of the cosine of its rounded argument `2π·u`, itself within 1.6e-15
//!   of cos(2πu).
//! - `ln u1`: u1 = m · 2^e with m ∈ [√½, √2), ln m = 2 atanh(s), s = (m-1)/(m+1),
//!   |s| ≤ 0.172, a series to s^15: relative truncation below 1e-13 (m - 1 is exact and
//!   the division rounds once, so this holds for u1 next to 1 too); libm's `log` is
//!   within 1 ulp.
//! - so |z - z_libm| ≤ 37.7 · (1e-13 + 1e-14) + rounding, about 5e-12; the bound used is
//!   1e-9, and the tests find the largest difference over millions of draws and edge cases
//!   (1.4e-14 in 20 million) far below it.

use std::f64::consts::{LN_2, PI, SQRT_2};

use vsched_engine::{round_to_time, Time};

/// A bound on |z - z_libm|, the fast standard normal's distance from the exact one. The
/// analysis above gives about 5e-12; the tests require what they observe to be 100 times
/// below this.
pub const Z_ERROR_BOUND: f64 = 1e-9;

/// A bound on the relative rounding error of evaluating `mean · (1 + cv · z)` in `f64`,
/// three operations of 2^-53 each, with room to spare.
const EVAL_ERROR: f64 = 1e-14;

/// Below 2^52 an `f64` duration has a fraction; from there on every `f64` is whole, and
/// the fast and exact values could differ by a whole nanosecond.
const FRACTIONAL_BELOW: f64 = (1u64 << 52) as f64;

/// The duration of a draw with uniforms `u1` ∈ [`f64::MIN_POSITIVE`, 1) and `u2` ∈ [0, 1):
/// the exact formula's result, fast (see the module notes).
#[inline]
pub fn duration(mean: Time, cv: f64, u1: f64, u2: f64) -> Time {
    let z = sqrt_neg_2_ln(u1) * cos_2pi(u2);
    decided(mean, cv, z).unwrap_or_else(|| duration_exact(mean, cv, u1, u2))
}

/// The exact formula: Box-Muller through libm, rounded to whole nanoseconds, at least 0.
#[cold]
pub fn duration_exact(mean: Time, cv: f64, u1: f64, u2: f64) -> Time {
    let z = (-2.0 * libm::log(u1)).sqrt() * libm::cos(2.0 * PI * u2);
    round_to_time((mean as f64 * (1.0 + cv * z)).max(0.0))
}

/// The rounded duration for a standard normal `z` within [`Z_ERROR_BOUND`] of the exact
/// one, if every value in that reach rounds alike; None if it may not (a half nanosecond or
/// zero within the margin, a duration beyond 2^52 ns, or a margin that is not finite).
#[inline]
fn decided(mean: Time, cv: f64, z: f64) -> Option<Time> {
    let mean = mean as f64;
    let x = mean * (1.0 + cv * z);
    let margin = mean * (cv * Z_ERROR_BOUND + EVAL_ERROR * (1.0 + cv * z.abs()));
    // x > margin: the exact value is positive too (the `max(0.0)` does nothing); x below
    // 2^52: `x as i64` is exact and so is the fraction.
    let whole = x as i64;
    let fraction = x - whole as f64;
    let clear = x > margin && x < FRACTIONAL_BELOW && (fraction - 0.5).abs() > margin;
    // NaN compares false, so a NaN margin (or `cv`) takes the exact path. The rounding is
    // `round_to_time`'s, for x in (0, 2^52).
    clear.then(|| whole as Time + Time::from(fraction >= 0.5))
}

/// cos(2π u) for u ∈ [0, 1], without a branch on the quadrant.
#[inline]
fn cos_2pi(u: f64) -> f64 {
    // The nearest quarter turn q ∈ 0..=4, and what is left, t ∈ [-1/8, 1/8], exactly.
    // (`as i64`: the conversion to an unsigned integer takes several more instructions.)
    let q = (u * 4.0 + 0.5) as i64;
    let t = u - q as f64 * 0.25;
    // cos(2πt + qπ/2) is cos, -sin, -cos, sin, cos of 2πt for q = 0..4.
    let odd = (q & 1) as usize;
    let p = estrin(&QUARTER_SERIES[odd], t * t);
    // t for sin, 1 for cos, chosen by a mask: a branch would be mispredicted half the time.
    let mask = (q & 1).wrapping_neg() as u64;
    let factor = f64::from_bits((t.to_bits() & mask) | (1f64.to_bits() & !mask));
    QUARTER_SIGN[(q & 3) as usize] * factor * p
}

/// Terms of each series in `w = t²`.
const TERMS: usize = 8;

/// Taylor coefficients in `w = t²` of cos(2πt) (index 0) and of sin(2πt) / t (index 1):
/// (-1)^k (2π)^(2k) / (2k)! and (-1)^k (2π)^(2k+1) / (2k+1)!.
const QUARTER_SERIES: [[f64; TERMS]; 2] = taylor_series();

/// The sign of cos(2πu) in terms of cos or sin of 2πt, by quarter turn (q = 4 is q = 0).
const QUARTER_SIGN: [f64; 4] = [1.0, -1.0, -1.0, 1.0];

const fn taylor_series() -> [[f64; TERMS]; 2] {
    let two_pi = 2.0 * PI;
    let mut out = [[0.0; TERMS]; 2];
    // term n of the exponential series of 2πt: (2π)^n / n!, signs alternating by pairs.
    let mut term = 1.0;
    let mut n = 0;
    while n < 2 * TERMS {
        let sign = if (n / 2) % 2 == 0 { 1.0 } else { -1.0 };
        out[n % 2][n / 2] = sign * term;
        n += 1;
        term = term * two_pi / n as f64;
    }
    out
}

/// sqrt(-2 ln u) for u ∈ [`f64::MIN_POSITIVE`, 1).
#[inline]
fn sqrt_neg_2_ln(u: f64) -> f64 {
    (-2.0 * ln(u)).sqrt()
}

/// ln u for a normal positive `u`, to a relative error below 1e-13.
#[inline]
fn ln(u: f64) -> f64 {
    const MANTISSA: u64 = (1 << 52) - 1;
    const ONE_BITS: u64 = 1023 << 52;
    let bits = u.to_bits();
    let exponent = (bits >> 52) as i64 - 1023;
    let m = f64::from_bits((bits & MANTISSA) | ONE_BITS);
    // m ∈ [√½, √2), so that u near 1 keeps exponent 0 and its full relative precision.
    // Halved by one less in its exponent field, without a branch (taken 59 % of the time).
    let big = m >= SQRT_2;
    let m = f64::from_bits(m.to_bits() - (u64::from(big) << 52));
    let exponent = exponent + i64::from(big);
    // ln m = 2 atanh(s) = 2 (s + s³/3 + s⁵/5 + ...), s = (m - 1)/(m + 1).
    let s = (m - 1.0) / (m + 1.0);
    exponent as f64 * LN_2 + 2.0 * s * estrin(&ATANH_SERIES, s * s)
}

/// c[0] + c[1] w + ... + c[7] w^7 by Estrin's scheme: pairs first, then pairs of pairs, so
/// the chain of dependent operations is 3 multiply-adds long instead of Horner's 7 (a draw
/// is on the path from one guest event to the next).
#[inline(always)]
fn estrin(c: &[f64; 8], w: f64) -> f64 {
    let w2 = w * w;
    let w4 = w2 * w2;
    let low = (c[0] + c[1] * w) + w2 * (c[2] + c[3] * w);
    let high = (c[4] + c[5] * w) + w2 * (c[6] + c[7] * w);
    low + w4 * high
}

/// Terms of the atanh series in `w = s²`: 1/(2k+1) for k = 0..7, up to s^15.
const ATANH_TERMS: usize = 8;

const ATANH_SERIES: [f64; ATANH_TERMS] = {
    let mut out = [0.0; ATANH_TERMS];
    let mut k = 0;
    while k < ATANH_TERMS {
        out[k] = 1.0 / (2 * k + 1) as f64;
        k += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;
    use vsched_engine::RngStreams;

    fn z_exact(u1: f64, u2: f64) -> f64 {
        (-2.0 * libm::log(u1)).sqrt() * libm::cos(2.0 * PI * u2)
    }

    /// Uniforms as `Dur::sample` draws them, followed by edge cases: the smallest and
    /// largest u1, and u2 on and beside every eighth of a turn.
    fn uniforms(n: usize) -> Vec<(f64, f64)> {
        let mut rng = RngStreams::new(20).stream(0);
        let mut out: Vec<(f64, f64)> =
            (0..n).map(|_| (rng.gen_range(f64::MIN_POSITIVE..1.0), rng.gen::<f64>())).collect();
        let ulp = f64::EPSILON / 2.0;
        let u1s = [f64::MIN_POSITIVE, 1e-300, 1e-10, 0.5, SQRT_2 / 2.0, 0.75, 1.0 - 2.0 * ulp, 1.0 - ulp];
        for &u1 in &u1s {
            for eighth in 0..=8 {
                let at = eighth as f64 / 8.0;
                for u2 in [at - ulp, at, at + ulp] {
                    if (0.0..1.0).contains(&u2) {
                        out.push((u1, u2));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn the_fast_normal_is_well_inside_its_error_bound() {
        let mut worst: f64 = 0.0;
        for (u1, u2) in uniforms(2_000_000) {
            let fast = sqrt_neg_2_ln(u1) * cos_2pi(u2);
            worst = worst.max((fast - z_exact(u1, u2)).abs());
        }
        // What the tests observe must stay far below what `decided` assumes.
        assert!(worst < Z_ERROR_BOUND / 100.0, "largest |z - z_libm| = {worst:e}");
    }

    /// The figures the module notes quote, over 20 million draws of
    /// the peer's jitter (50 µs, cv 0.2): `cargo test --release -p vsched-model --lib
    /// jitter -- --ignored --nocapture`. Too slow for every run of the suite.
    #[test]
    #[ignore]
    fn twenty_million_draws() {
        let mut rng = RngStreams::new(7).stream(0);
        let (mut worst, mut exact_path) = (0.0f64, 0);
        for _ in 0..20_000_000 {
            let (u1, u2) = (rng.gen_range(f64::MIN_POSITIVE..1.0), rng.gen::<f64>());
            let fast = sqrt_neg_2_ln(u1) * cos_2pi(u2);
            worst = worst.max((fast - z_exact(u1, u2)).abs());
            exact_path += usize::from(decided(50_000, 0.2, fast).is_none());
        }
        eprintln!("largest |z - z_libm| {worst:e}; {exact_path} draws took the exact path");
        assert!(worst < Z_ERROR_BOUND / 100.0, "largest |z - z_libm| = {worst:e}");
    }

    #[test]
    fn each_part_is_close_to_libm() {
        for (u1, u2) in uniforms(200_000) {
            let c = cos_2pi(u2);
            assert!((c - libm::cos(2.0 * PI * u2)).abs() < 1e-14, "cos(2π·{u2}) = {c}");
            let l = ln(u1);
            let exact = libm::log(u1);
            assert!((l - exact).abs() <= 1e-13 * exact.abs().max(1e-300), "ln({u1}) = {l}, libm {exact}");
        }
    }

    #[test]
    fn durations_are_the_exact_formula_draw_by_draw() {
        let cases = [(50_000, 0.2), (5_000, 0.2), (1, 0.5), (3, 3.0), (1_000_000_000, 0.05), (1 << 50, 1.0)];
        let draws = uniforms(300_000);
        for (mean, cv) in cases {
            for &(u1, u2) in &draws {
                assert_eq!(duration(mean, cv, u1, u2), duration_exact(mean, cv, u1, u2), "mean {mean}, cv {cv}");
            }
        }
    }

    #[test]
    fn a_margin_over_a_half_nanosecond_or_zero_takes_the_exact_path() {
        // mean 4, cv 0.5: x = 4 (1 + z/2), so z = -0.75 gives x = 2.5, a half nanosecond.
        assert_eq!(decided(4, 0.5, -0.75), None);
        assert_eq!(decided(4, 0.5, -0.75 + 1e-12), None);
        // x = 2.8 and 2.4, well clear of it.
        assert_eq!(decided(4, 0.5, -0.6), Some(3));
        assert_eq!(decided(4, 0.5, -0.8), Some(2));
        // x at or below zero: the exact path clamps.
        assert_eq!(decided(4, 0.5, -2.0), None);
        assert_eq!(decided(4, 0.5, -3.0), None);
        // Beyond 2^52 ns every f64 is whole: too coarse to decide.
        assert_eq!(decided(1 << 53, 0.1, 0.3), None);
        // A margin that is not finite, or at least half a nanosecond.
        assert_eq!(decided(50_000, f64::NAN, 0.3), None);
        assert_eq!(decided(50_000, f64::INFINITY, 0.3), None);
        assert_eq!(decided(1 << 40, 1.0, 0.3), None);
    }
}
