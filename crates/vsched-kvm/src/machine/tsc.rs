//! The TSC rate, calibrated once per process against `CLOCK_MONOTONIC`.
//!
//! Why not CPUID: leaf 0x15 (TSC/crystal ratio) exists on Intel only and this host is an AMD
//! EPYC under `kvm_pvm`, where no CPUID leaf gives the rate. Why not `KVM_GET_TSC_KHZ`: it
//! is rounded to kHz and says what KVM believes, not what we measure. How: read the TSC
//! immediately before and after `clock_gettime`, keep the read with the narrowest bracket
//! of a few (a host interrupt between the two widens it), do it again 50 ms later, and
//! divide. Each end is known to within its bracket, well under 1 µs, so the rate is good to
//! ~20 ppm; the guest's RDTSC reads the same counter (docs/real-vcpus.md).

use std::sync::OnceLock;
use std::time::Duration;

/// How long the calibration measures: the error shrinks as 1 / this.
const CALIBRATION_SPAN: Duration = Duration::from_millis(50);
/// Reads per end, of which the narrowest bracket is kept.
const READS_PER_END: usize = 16;

/// TSC ticks per second of this host, calibrated the first time it is asked.
pub fn tsc_hz() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(calibrate)
}

/// The host's TSC.
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86-64 (user mode may execute it unless CR4.TSD,
    // which Linux leaves clear).
    unsafe { core::arch::x86_64::_rdtsc() }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One (TSC, monotonic ns) pair: the TSC is the midpoint of the narrowest bracket.
fn paired_read() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..READS_PER_END {
        let before = rdtsc();
        let ns = monotonic_ns();
        let after = rdtsc();
        let width = after.wrapping_sub(before);
        if width < best.0 {
            best = (width, before + width / 2, ns);
        }
    }
    (best.1, best.2)
}

fn calibrate() -> u64 {
    let (tsc0, ns0) = paired_read();
    std::thread::sleep(CALIBRATION_SPAN);
    let (tsc1, ns1) = paired_read();
    let hz = u128::from(tsc1 - tsc0) * 1_000_000_000 / u128::from((ns1 - ns0).max(1));
    hz as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_plausible_and_agrees_with_a_longer_measurement() {
        let hz = tsc_hz();
        assert!((500_000_000..10_000_000_000).contains(&hz), "a TSC of {hz} Hz");
        // 200 ms measured independently: within 0.5 % (a noisy shared host may delay either
        // end by a scheduling quantum; a wrong calibration is off by far more).
        let (t0, n0) = paired_read();
        std::thread::sleep(Duration::from_millis(200));
        let (t1, n1) = paired_read();
        let again = (t1 - t0) as f64 * 1e9 / (n1 - n0) as f64;
        assert!((again / hz as f64 - 1.0).abs() < 0.005, "{hz} Hz, then {again} Hz");
    }
}
