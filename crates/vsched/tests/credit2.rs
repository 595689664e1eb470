//! Xen credit2 (issue 56), hand-checked on traces of a host without overheads
//! ([`free_host`]: no machine costs, clocks in lockstep, no timer slop), so every decision
//! lands on the instant the source says.
//!
//! Facts used (RELEASE-4.22.0 `xen/common/sched/credit2.c`): a vCPU starts with 10 ms of
//! credit (`CSCHED2_CREDIT_INIT`) and burns `max_weight / weight` ns of it per ns run; a slice
//! runs until its credit falls to the best waiter's, at least 500 µs (`CSCHED2_MIN_TIMER`) or
//! what is left of the 1 ms rate limit (a vCPU just switched in: the whole 1 ms), at most
//! 10 ms (`csched2_runtime`); a queued vCPU replaces the current one only with strictly more
//! credit (`runq_candidate`); a waker tickles a busy pCPU only if its vCPU has run more than
//! the rate limit less 50 µs (`is_preemptable`).

mod common;
use common::*;
use vsched_model::*;

const MS: Time = NS_PER_MS;
const US: Time = NS_PER_US;

/// Runs `doms` on `pcpus` free pCPUs under credit2 with `params` until `horizon`; returns the
/// metrics and every span `(vcpu, pcpu, start, end)`, in order of start.
fn runs(
    pcpus: usize,
    params: &[(&str, Value)],
    doms: Vec<DomainConfig>,
    horizon: Time,
) -> (RunMetrics, Vec<(VcpuId, PcpuId, Time, Time)>) {
    let mut sim = Simulation::new(free_host(pcpus), doms, policy("credit2", params), 1);
    sim.enable_trace(1_000_000);
    let m = sim.run(horizon, Until::Horizon, &mut |_| true).expect("run failed");
    let trace = sim.take_trace().unwrap();
    assert_eq!(trace.dropped(), 0);
    let mut spans: Vec<_> = trace.spans().iter().map(|s| (s.vcpu, s.pcpu, s.start, s.end)).collect();
    spans.sort_by_key(|s| (s.2, s.1));
    (m, spans)
}

fn version(v: &str) -> Vec<(&'static str, Value)> {
    vec![("xen_version", Value::Str(v.into()))]
}

#[test]
fn dump() {
    for v in ["4.12", "4.14", "4.21", "current"] {
        let (_, spans) = runs(1, &version(v), vec![domain("A", VmType::Hit, vec![hog()]), domain("B", VmType::Hit, vec![hog()])], 60 * MS);
        println!("{v}:");
        for s in spans.iter().take(40) {
            println!("  v{} p{} {:.3} {:.3} ({:.3})", s.0, s.1, s.2 as f64 / 1e6, s.3 as f64 / 1e6, (s.3 - s.2) as f64 / 1e6);
        }
    }
}
