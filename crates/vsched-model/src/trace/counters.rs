//! Counter series in a trace: one sample per change of value, not one per call. A policy may
//! publish every counter after every callback; what reaches the trace is the value each
//! counter settled on at each instant where it changed (several changes at one instant are
//! one sample, a change back to the value last written is none).

use std::collections::BTreeMap;

use vsched_engine::Time;

use super::event::{CounterOf, CounterSample};

#[derive(Default)]
struct Series {
    /// The value last recorded.
    written: Option<i64>,
    /// The value this counter holds at the latest instant it was sampled, not yet final:
    /// a later sample at the same instant replaces it.
    pending: Option<(Time, i64)>,
}

/// Every counter of a trace, by owner and name (ordered, so draining them is deterministic).
#[derive(Default)]
pub(super) struct Counters {
    series: BTreeMap<(CounterOf, &'static str), Series>,
}

impl Counters {
    /// Counter `name` of `of` holds `value` from `at` on (`at` never before its last sample).
    /// Returns the sample that this one makes final, if it is a change.
    pub(super) fn sample(&mut self, of: CounterOf, name: &'static str, at: Time, value: i64) -> Option<CounterSample> {
        let series = self.series.entry((of, name)).or_default();
        let mut settled = None;
        if let Some((t, v)) = series.pending {
            if t < at {
                series.pending = None;
                series.written = Some(v);
                settled = Some(CounterSample { of, name, at: t, value: v });
            }
        }
        series.pending = (series.written != Some(value)).then_some((at, value));
        settled
    }

    /// The samples still pending (the run ended), in counter order.
    pub(super) fn drain(&mut self) -> Vec<CounterSample> {
        let mut samples = Vec::new();
        for (&(of, name), series) in &mut self.series {
            if let Some((at, value)) = series.pending.take() {
                series.written = Some(value);
                samples.push(CounterSample { of, name, at, value });
            }
        }
        samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: &str = "queue";

    fn values(samples: &[CounterSample]) -> Vec<(Time, i64)> {
        samples.iter().map(|s| (s.at, s.value)).collect()
    }

    #[test]
    fn one_sample_per_instant_and_none_for_no_change() {
        let mut c = Counters::default();
        let of = CounterOf::Pcpu(1);
        let mut out = Vec::new();
        for (at, value) in [(0, 1), (0, 2), (5, 2), (7, 3), (7, 2), (9, 4), (9, 5)] {
            out.extend(c.sample(of, Q, at, value));
        }
        out.extend(c.drain());
        // 0 -> 2 (two calls at 0), nothing at 5 (same value), nothing at 7 (3 then back to 2),
        // 9 -> 5.
        assert_eq!(values(&out), [(0, 2), (9, 5)]);
        assert!(c.drain().is_empty(), "drained once");
    }

    #[test]
    fn counters_are_independent_and_drain_in_order() {
        let mut c = Counters::default();
        assert_eq!(c.sample(CounterOf::Vcpu(3), Q, 0, 1), None);
        assert_eq!(c.sample(CounterOf::Host(0), Q, 0, 7), None);
        assert_eq!(c.sample(CounterOf::Vcpu(3), "credit", 1, -20), None);
        let settled = c.sample(CounterOf::Vcpu(3), Q, 2, 0).expect("the value at 0 is final");
        assert_eq!((settled.of, settled.at, settled.value), (CounterOf::Vcpu(3), 0, 1));
        let rest: Vec<_> = c.drain().iter().map(|s| (s.of, s.name, s.value)).collect();
        assert_eq!(rest, [(CounterOf::Host(0), Q, 7), (CounterOf::Vcpu(3), "credit", -20), (CounterOf::Vcpu(3), Q, 0)]);
    }
}
