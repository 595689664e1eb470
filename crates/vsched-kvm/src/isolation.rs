//! Whether a real run had its host CPUs to itself: how much CPU time other processes took on
//! them while it ran.
//!
//! Real vCPUs share the machine with everything else on it, and a run that other work
//! disturbed says little about the policy (real/sim moved between 0.42 and 1.91 with the
//! load). Each run samples, before and after, the busy time of its host CPUs
//! (`/proc/stat`: every state but idle and iowait, in the kernel's clock ticks) and this
//! process's own CPU time (`getrusage`, every thread: the scheduler and the vCPU threads,
//! guest execution included); what the CPUs were busy with beyond this process is the
//! others'. Approximations: `/proc/stat` counts in ticks of 10 ms at `USER_HZ` = 100, so a
//! short run's figure is coarse; this process's CPU time on other CPUs (its Python thread,
//! say) is subtracted too, which can only hide others' time, never invent it.

use serde_json::{json, Value as Json};

/// Other processes' share of the run's host CPUs above which a run counts as disturbed.
/// **Our choice**: 5 %, a twentieth of one CPU per CPU, below which the run-to-run spread
/// of an idle host's runs (docs/real-vcpus.md) dominates.
pub const DISTURBED_SHARE: f64 = 0.05;

/// The counters a run reads before and after.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Busy time of the run's host CPUs, seconds (`None` where `/proc/stat` cannot be read).
    cpus_busy_s: Option<f64>,
    /// This process's CPU time, seconds.
    self_s: f64,
}

/// Samples the busy time of `cpus` and this process's CPU time.
pub fn sample(cpus: &[usize]) -> Sample {
    Sample { cpus_busy_s: cpus_busy_s(cpus), self_s: self_cpu_s() }
}

/// What other processes took of `n_cpus` CPUs between `before` and `after`, over `wall_s`
/// seconds, as the report's `isolation` entry: their CPU seconds, their share of the CPUs'
/// time, whether that share disturbed the run (null figures where `/proc/stat` could not be
/// read), and the share above which it would have.
pub fn report(before: Sample, after: Sample, n_cpus: usize, wall_s: f64) -> Json {
    let (Some(busy_before), Some(busy_after)) = (before.cpus_busy_s, after.cpus_busy_s) else {
        return json!({ "others_cpu_s": null, "others_share": null, "disturbed": null, "disturbed_above": DISTURBED_SHARE });
    };
    let others = ((busy_after - busy_before) - (after.self_s - before.self_s)).max(0.0);
    let share = others / (wall_s * n_cpus as f64).max(f64::MIN_POSITIVE);
    json!({
        "others_cpu_s": others,
        "others_share": share,
        "disturbed": share > DISTURBED_SHARE,
        "disturbed_above": DISTURBED_SHARE,
    })
}

fn cpus_busy_s(cpus: &[usize]) -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    // SAFETY: sysconf with a valid name has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks_per_s <= 0 {
        return None;
    }
    let mut busy_ticks = 0u64;
    for &cpu in cpus {
        let label = format!("cpu{cpu}");
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(label.as_str()))?;
        let fields: Vec<u64> = line.split_whitespace().skip(1).map(|f| f.parse().unwrap_or(0)).collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let total: u64 = fields.iter().take(8).sum();
        let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
        busy_ticks += total.saturating_sub(idle);
    }
    Some(busy_ticks as f64 / ticks_per_s as f64)
}

fn self_cpu_s() -> f64 {
    // SAFETY: `rusage` is plain data; getrusage writes it whole.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid `who` and a writable `rusage`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn others_are_the_cpus_busy_time_beyond_this_process() {
        let at = |busy, own| Sample { cpus_busy_s: Some(busy), self_s: own };
        // 2 CPUs for 1 s: busy 1.9 s, of which this process 1.7 s: others 0.2 s, 10 %.
        let r = report(at(10.0, 5.0), at(11.9, 6.7), 2, 1.0);
        assert!((r["others_cpu_s"].as_f64().unwrap() - 0.2).abs() < 1e-9);
        assert!((r["others_share"].as_f64().unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(r["disturbed"], json!(true));
        // This process busier than the CPUs' count (its time elsewhere, tick rounding): 0.
        let quiet = report(at(10.0, 5.0), at(11.0, 6.2), 2, 1.0);
        assert_eq!(quiet["others_cpu_s"], json!(0.0));
        assert_eq!(quiet["disturbed"], json!(false));
        let unknown = report(Sample { cpus_busy_s: None, self_s: 0.0 }, at(1.0, 1.0), 2, 1.0);
        assert_eq!(unknown["disturbed"], Json::Null);
    }

    #[test]
    fn a_sample_of_this_machine_reads_its_cpus() {
        let s = sample(&[0]);
        if std::path::Path::new("/proc/stat").exists() {
            assert!(s.cpus_busy_s.is_some_and(|b| b > 0.0));
        }
        assert!(s.self_s >= 0.0);
    }
}
