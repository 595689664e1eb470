//! The shape of each event in the file, as `serde_json` writes it: fields in sorted key
//! order, as a `json!` object has them, so the file is canonical.

use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use vsched_model::{Span, Time};

use super::layout::Layout;

/// A metadata event (a name or a sort index); fields in key order, as `json!` writes them.
#[derive(Serialize)]
pub(super) struct Meta<A> {
    pub(super) args: A,
    pub(super) name: &'static str,
    pub(super) ph: &'static str,
    pub(super) pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tid: Option<usize>,
}

#[derive(Serialize)]
pub(super) struct NameArg<'a> {
    pub(super) name: &'a str,
}

#[derive(Serialize)]
pub(super) struct SortArg {
    pub(super) sort_index: usize,
}

/// A pCPU's run interval.
#[derive(Serialize)]
pub(super) struct Complete<'a> {
    pub(super) args: SpanArgs<'a>,
    pub(super) cat: &'static str,
    pub(super) dur: f64,
    pub(super) name: &'a str,
    pub(super) ph: &'static str,
    pub(super) pid: u32,
    pub(super) tid: usize,
    pub(super) ts: f64,
}

#[derive(Serialize)]
pub(super) struct SpanArgs<'a> {
    pub(super) vcpu: usize,
    pub(super) vm: &'a str,
}

/// A vCPU's activity interval.
#[derive(Serialize)]
pub(super) struct Activity {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) args: Option<PcpuArg>,
    pub(super) cat: &'static str,
    pub(super) dur: f64,
    pub(super) name: &'static str,
    pub(super) ph: &'static str,
    pub(super) pid: u32,
    pub(super) tid: usize,
    pub(super) ts: f64,
}

#[derive(Serialize)]
pub(super) struct PcpuArg {
    pub(super) pcpu: usize,
}

#[derive(Serialize)]
pub(super) struct Counter<'a> {
    pub(super) args: OneArg<'a>,
    pub(super) name: &'static str,
    pub(super) ph: &'static str,
    pub(super) pid: u32,
    pub(super) tid: usize,
    pub(super) ts: f64,
}

/// `{"<owner>": value}`: the series name Perfetto appends to the counter's.
pub(super) struct OneArg<'a>(pub(super) &'a str, pub(super) i64);

impl Serialize for OneArg<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.0, &self.1)?;
        map.end()
    }
}

#[derive(Serialize)]
pub(super) struct InstantJson {
    pub(super) args: InstantArgs,
    pub(super) name: &'static str,
    pub(super) ph: &'static str,
    pub(super) pid: u32,
    pub(super) s: &'static str,
    pub(super) tid: usize,
    pub(super) ts: f64,
}

#[derive(Serialize, Default)]
pub(super) struct InstantArgs {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) lock: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) locks_held: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) pcpu: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) waiter_running: Option<bool>,
}

/// One end of a flow: a zero-length slice bound to it.
#[derive(Serialize)]
pub(super) struct FlowEnd {
    pub(super) bind_id: u64,
    pub(super) cat: &'static str,
    pub(super) dur: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) flow_in: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) flow_out: Option<bool>,
    pub(super) name: &'static str,
    pub(super) ph: &'static str,
    pub(super) pid: u32,
    pub(super) tid: usize,
    pub(super) ts: f64,
}

#[derive(Serialize)]
pub(super) struct Checkpoint<'a> {
    pub(super) args: OpenSpans<'a>,
    pub(super) name: &'static str,
    pub(super) ph: &'static str,
    pub(super) pid: u32,
    pub(super) ts: f64,
}

#[derive(Serialize)]
pub(super) struct OpenSpans<'a> {
    /// By pCPU row (as a string key, in the order a sorted JSON object has them).
    pub(super) open: BTreeMap<String, Complete<'a>>,
}

/// `ns` in µs, as the double whose text every reader turns back into exactly `ns`.
///
/// The nearest double to `ns / 1000` is written as that decimal (`1234.567`), but times 1000
/// it can fall just short of `ns`: a reader that truncates (`(ts * 1000) as i64`, as Perfetto's
/// JSON importer did for durations until v51) then reads 1 ns less, and a slice ends 1 ns
/// after the next one starts. The next double up, `1234.5670000000002`, reads as `ns` by
/// truncation and by rounding alike.
pub(super) fn micros(ns: Time) -> f64 {
    let exact = ns as f64; // exact below 2^53 ns, 104 days
    let mut us = exact / 1e3;
    while us * 1e3 < exact {
        us = us.next_up();
    }
    us
}

/// Span `s` as a complete event, ending at `end`.
pub(super) fn complete<'a>(layout: &'a Layout, s: &Span, name: &'a str, end: Time) -> Complete<'a> {
    Complete {
        args: SpanArgs { vcpu: s.index, vm: &layout.vms[s.dom] },
        cat: if s.spinning { "spin" } else { "run" },
        dur: micros(end - s.start),
        name,
        ph: "X",
        pid: layout.host_of_pcpu(s.pcpu),
        tid: s.pcpu,
        ts: micros(s.start),
    }
}

#[cfg(test)]
mod tests {
    use super::micros;

    /// What a reader of the JSON text gets back: the double the text parses to, times 1000,
    /// truncated or rounded.
    fn read_back(ns: u64) -> (i64, i64) {
        let text = serde_json::to_string(&micros(ns)).unwrap();
        let us: f64 = text.parse().unwrap();
        ((us * 1e3) as i64, (us * 1e3).round() as i64)
    }

    #[test]
    fn every_reader_gets_the_nanoseconds_back() {
        // Small times, times around a few minutes of simulation and around a day.
        for start in [0, 266_997_361, 299_999_000_000, 86_400_000_000_000] {
            for ns in start..start + 20_000 {
                assert_eq!(read_back(ns), (ns as i64, ns as i64), "{ns} ns");
            }
        }
    }

    #[test]
    fn exact_decimals_stay_as_written() {
        assert_eq!(serde_json::to_string(&micros(1_234_500)).unwrap(), "1234.5");
        assert_eq!(serde_json::to_string(&micros(2_000)).unwrap(), "2.0");
    }
}
