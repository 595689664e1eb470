//! Writes a run's trace as Chrome trace-event JSON (opens in <https://ui.perfetto.dev> and
//! chrome://tracing) while the run goes.
//!
//! # Layout
//! - A process per host (pid = host) holds one thread per pCPU (the host's view: one
//!   complete "X" event per run interval, category `run` or `spin`, named `<vm>.v<index>`),
//!   and a "hypervisor" thread for what happens outside any pCPU in the model (a wake-up's
//!   tickle, a policy timer): reschedule IPIs sent from there start on it.
//! - A process per VM (pid = hosts + VM index) holds one thread per vCPU whose slices are
//!   its activity: `running` and `spinning` (on a pCPU, `args.pcpu`), `runnable` (waiting
//!   for a pCPU: steal time) and `blocked` (halted); category `vcpu`.
//! - Counters ("C" events) belong to their owner's process and appear in Perfetto as tracks
//!   named "`counter` `owner`": `runnable vCPUs host` (the simulator's), and a policy's own
//!   (`Cx::trace_counter`, e.g. `runq pCPU 3`, `credit spin.v0`).
//! - Instants ("i" events): `PLE exit`, `lock-holder preemption` and `lock hand-off` on a
//!   vCPU's thread; `co-scheduling launch` on its VM's process.
//! - Flows: each end is a zero-length "X" event (category `ipi` or `message`) carrying a
//!   `bind_id` and `flow_out` (the sender) or `flow_in` (the receiver), the trace-event
//!   format's newer flow binding; Perfetto draws an arrow from one to the other. Binding
//!   flows to events of their own keeps them drawn wherever they land (an idle pCPU has no
//!   slice of its own to bind to).
//!
//! Thread ids are unique across processes (pCPU rows first, then vCPUs, then the
//! hypervisor threads), as Perfetto names threads by tid alone.
//!
//! The file is `{"displayTimeUnit": "ms", "traceEvents": [...], "otherData": {...}}`:
//! `otherData` holds the run's description, the event counts (known only at the end, so it
//! comes after the events; Perfetto reads it in either place) and an index for readers of
//! windows of the schedule (`vsched plot-trace`): every 16,384 events or more a
//! metadata event `vsched_checkpoint` (which Perfetto ignores) lists the spans open on
//! each pCPU, and the index gives each checkpoint's time and byte offset, so a reader of a
//! window reads only the bytes written while it was open. Each event is written as
//! `serde_json` writes a `json!` object (keys in sorted order), so the file is canonical.
//! No event holds an array: Perfetto's JSON tokenizer refuses arrays inside events. Times are
//! µs written so that they read back as whole nanoseconds however a reader converts them
//! (`records::micros`).

mod layout;
mod records;

use std::io::{self, Write};

use serde::Serialize;
use serde_json::{json, Value as Json};
use vsched_model::{
    CounterOf, FlowKind, FlowPoint, Instant, Span, Time, TraceEvent, TraceSink, Track, VcpuActivity, VcpuSlice,
};

use crate::scenario::Scenario;
use layout::Layout;
use records::{
    complete, micros, Activity, Checkpoint, Counter, FlowEnd, InstantArgs, InstantJson, Meta, NameArg, OneArg,
    OpenSpans, PcpuArg, SortArg,
};

/// Events between two checkpoints, at least; more on a host with many pCPUs, so that the
/// checkpoints (a span per pCPU each) stay a small part of the file.
const CHECKPOINT_EVENTS: u64 = 16_384;
/// Checkpoint events are at most about 1/this of all events (each lists every pCPU row).
const CHECKPOINT_EVENTS_PER_ROW: u64 = 16;
/// The name of the checkpoint metadata events.
const CHECKPOINT_NAME: &str = "vsched_checkpoint";

/// Events between checkpoints for a trace with `rows` pCPU rows.
fn checkpoint_interval(rows: usize) -> u64 {
    CHECKPOINT_EVENTS.max(CHECKPOINT_EVENTS_PER_ROW * rows as u64)
}

/// A byte-counting writer: offsets of checkpoints for the index.
struct Counted<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The trace file's writer: a [`TraceSink`] (see the module notes).
pub struct TraceJsonWriter<W: Write> {
    out: Counted<W>,
    layout: Layout,
    /// `otherData` without the counts and the index.
    other: serde_json::Map<String, Json>,
    /// Reused for each span's `<vm>.v<index>`.
    name: String,
    /// Each vCPU's and hypervisor's display name, for counters' series.
    vcpu_names: Vec<String>,
    host_names: Vec<String>,
    /// Where the events after the names start, in bytes.
    events_at: u64,
    /// Each checkpoint's time (µs) and the byte offset just after it.
    checkpoints: Vec<(f64, u64)>,
    /// The earliest start and latest end of the spans written.
    spans_extent: Option<(Time, Time)>,
}

impl<W: Write> TraceJsonWriter<W> {
    /// Writes the document's head and the names and sort order of every process and thread.
    pub fn new(out: W, scenario: &Scenario, seed: u64, limit: usize) -> io::Result<Self> {
        let layout = Layout::new(scenario);
        let mut out = Counted { inner: out, bytes: 0 };
        out.write_all(br#"{"displayTimeUnit":"ms","traceEvents":["#)?;
        let mut first = true;
        let mut meta = |out: &mut Counted<W>, event: &dyn MetaEvent| -> io::Result<()> {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            event.write_to(out)
        };
        // The pCPU rows come first, so that a trace's first event is pCPU 0's name.
        for p in 0..layout.pcpu_rows() {
            let (pid, tid) = (layout.host_of_pcpu(p), Some(p));
            meta(
                &mut out,
                &Meta { args: NameArg { name: &layout.pcpu_names[p] }, name: "thread_name", ph: "M", pid, tid },
            )?;
            let order = SortArg { sort_index: p % layout.pcpus_per_host };
            meta(&mut out, &Meta { args: order, name: "thread_sort_index", ph: "M", pid, tid })?;
        }
        for h in 0..layout.hosts {
            let (pid, tid) = (h as u32, Some(layout.hypervisor_tid(h)));
            meta(
                &mut out,
                &Meta { args: NameArg { name: &layout.host_name(h) }, name: "process_name", ph: "M", pid, tid: None },
            )?;
            meta(
                &mut out,
                &Meta { args: SortArg { sort_index: h }, name: "process_sort_index", ph: "M", pid, tid: None },
            )?;
            meta(&mut out, &Meta { args: NameArg { name: "hypervisor" }, name: "thread_name", ph: "M", pid, tid })?;
            let last = SortArg { sort_index: layout.pcpus_per_host };
            meta(&mut out, &Meta { args: last, name: "thread_sort_index", ph: "M", pid, tid })?;
        }
        for (d, (vm, &(host, vcpus))) in layout.vms.iter().zip(&layout.vm_places).enumerate() {
            let pid = layout.vm_pid(d);
            let name = if layout.hosts == 1 { vm.clone() } else { format!("{vm} (host {host})") };
            meta(&mut out, &Meta { args: NameArg { name: &name }, name: "process_name", ph: "M", pid, tid: None })?;
            let order = SortArg { sort_index: layout.hosts + d };
            meta(&mut out, &Meta { args: order, name: "process_sort_index", ph: "M", pid, tid: None })?;
            for i in 0..vcpus {
                let v = layout.first_vcpu[d] + i;
                let tid = Some(layout.vcpu_tid(v));
                let name = layout.vcpu_name(v);
                meta(&mut out, &Meta { args: NameArg { name: &name }, name: "thread_name", ph: "M", pid, tid })?;
                meta(
                    &mut out,
                    &Meta { args: SortArg { sort_index: i }, name: "thread_sort_index", ph: "M", pid, tid },
                )?;
            }
        }
        let events_at = out.bytes;
        let other = json!({
            "scenario": scenario.name,
            "policy": scenario.policy.name(),
            "seed": seed,
            "pcpus": scenario.host.pcpus,
            "hosts": scenario.hosts,
            "vms": layout.vms,
            "event_limit": limit,
        });
        let Json::Object(other) = other else { unreachable!("json! of an object") };
        let vcpu_names = (0..layout.vcpus.len()).map(|v| layout.vcpu_name(v)).collect();
        let host_names = (0..layout.hosts).map(|h| layout.host_name(h)).collect();
        Ok(TraceJsonWriter {
            out,
            layout,
            other,
            name: String::new(),
            vcpu_names,
            host_names,
            events_at,
            checkpoints: Vec::new(),
            spans_extent: None,
        })
    }

    fn span(&mut self, s: &Span) -> io::Result<()> {
        let (first, last) = self.spans_extent.unwrap_or((s.start, s.end));
        self.spans_extent = Some((first.min(s.start), last.max(s.end)));
        self.name.clear();
        let vm = &self.layout.vms[s.dom];
        std::fmt::Write::write_fmt(&mut self.name, format_args!("{vm}.v{}", s.index)).expect("writing to a String");
        serde_json::to_writer(&mut self.out, &complete(&self.layout, s, &self.name, s.end))?;
        Ok(())
    }

    fn vcpu_slice(&mut self, s: &VcpuSlice) -> io::Result<()> {
        let (pid, tid) = self.layout.place(Track::Vcpu(s.vcpu));
        // On a cluster, the pCPU as its host numbers it.
        let local = |p: usize| Some(PcpuArg { pcpu: p % self.layout.pcpus_per_host });
        let (name, args) = match s.activity {
            VcpuActivity::Running { pcpu } => ("running", local(pcpu)),
            VcpuActivity::Spinning { pcpu } => ("spinning", local(pcpu)),
            VcpuActivity::Runnable => ("runnable", None),
            VcpuActivity::Blocked => ("blocked", None),
        };
        let event =
            Activity { args, cat: "vcpu", dur: micros(s.end - s.start), name, ph: "X", pid, tid, ts: micros(s.start) };
        serde_json::to_writer(&mut self.out, &event)?;
        Ok(())
    }

    fn counter(&mut self, of: CounterOf, name: &'static str, at: Time, value: i64) -> io::Result<()> {
        let (track, owner) = match of {
            CounterOf::Host(h) => (Track::Host(h), &self.host_names[h]),
            CounterOf::Pcpu(p) => (Track::Pcpu(p), &self.layout.pcpu_names[p]),
            CounterOf::Vcpu(v) => (Track::Vcpu(v), &self.vcpu_names[v]),
        };
        let (pid, tid) = self.layout.place(track);
        let event = Counter { args: OneArg(owner, value), name, ph: "C", pid, tid, ts: micros(at) };
        serde_json::to_writer(&mut self.out, &event)?;
        Ok(())
    }

    fn instant(&mut self, at: Time, what: &Instant) -> io::Result<()> {
        let local = |p: usize| p % self.layout.pcpus_per_host;
        let (track, scope, name, args) = match *what {
            Instant::PleExit { vcpu } => (Track::Vcpu(vcpu), "t", "PLE exit", InstantArgs::default()),
            Instant::LockHolderPreempted { vcpu, locks_held } => (
                Track::Vcpu(vcpu),
                "t",
                "lock-holder preemption",
                InstantArgs { locks_held: Some(locks_held), ..InstantArgs::default() },
            ),
            Instant::LockHandoff { vcpu, lock, waiter_running } => (
                Track::Vcpu(vcpu),
                "t",
                "lock hand-off",
                InstantArgs { lock: Some(lock), waiter_running: Some(waiter_running), ..InstantArgs::default() },
            ),
            // On the VM's process; its tid (vCPU 0's) only keeps Perfetto from inventing a
            // thread whose id could be another row's.
            Instant::CoLaunch { dom, pcpu } => (
                Track::Vcpu(self.layout.first_vcpu[dom]),
                "p",
                "co-scheduling launch",
                InstantArgs { pcpu: pcpu.map(local), ..InstantArgs::default() },
            ),
        };
        let (pid, tid) = self.layout.place(track);
        let event = InstantJson { args, name, ph: "i", pid, s: scope, tid, ts: micros(at) };
        serde_json::to_writer(&mut self.out, &event)?;
        Ok(())
    }

    fn flow(&mut self, f: &FlowPoint) -> io::Result<()> {
        let (cat, name) = match f.kind {
            FlowKind::ReschedIpi => ("ipi", "reschedule IPI"),
            FlowKind::GuestIpi => ("ipi", "guest IPI"),
            FlowKind::Message => ("message", "message"),
        };
        let (pid, tid) = self.layout.place(f.on);
        let (flow_in, flow_out) = if f.leaving { (None, Some(true)) } else { (Some(true), None) };
        let event =
            FlowEnd { bind_id: f.id, cat, dur: 0.0, flow_in, flow_out, name, ph: "X", pid, tid, ts: micros(f.at) };
        serde_json::to_writer(&mut self.out, &event)?;
        Ok(())
    }
}

impl<W: Write> TraceSink for TraceJsonWriter<W> {
    fn event(&mut self, event: &TraceEvent) -> io::Result<()> {
        // Every trace has at least one metadata event before its events.
        self.out.write_all(b",")?;
        match event {
            TraceEvent::Span(s) => self.span(s),
            TraceEvent::Vcpu(s) => self.vcpu_slice(s),
            TraceEvent::Counter(c) => self.counter(c.of, c.name, c.at, c.value),
            TraceEvent::Instant { at, what } => self.instant(*at, what),
            TraceEvent::Flow(f) => self.flow(f),
        }
    }

    fn checkpoint_interval(&self) -> Option<u64> {
        Some(checkpoint_interval(self.layout.pcpu_rows()))
    }

    fn checkpoint(&mut self, now: Time, open: &[Option<Span>]) -> io::Result<()> {
        let layout = &self.layout;
        let names: Vec<String> = open.iter().flatten().map(|s| format!("{}.v{}", layout.vms[s.dom], s.index)).collect();
        let open = open
            .iter()
            .flatten()
            .zip(&names)
            .map(|(s, name)| (s.pcpu.to_string(), complete(layout, s, name, now)))
            .collect();
        let event = Checkpoint { args: OpenSpans { open }, name: CHECKPOINT_NAME, ph: "M", pid: 0, ts: micros(now) };
        self.out.write_all(b",")?;
        serde_json::to_writer(&mut self.out, &event)?;
        self.checkpoints.push((micros(now), self.out.bytes));
        Ok(())
    }

    fn finish(&mut self, events: u64, dropped: u64) -> io::Result<()> {
        let events_end = self.out.bytes;
        let mut other = std::mem::take(&mut self.other);
        other.insert("events".into(), json!(events));
        other.insert("dropped_events".into(), json!(dropped));
        let (times, ends): (Vec<f64>, Vec<u64>) = self.checkpoints.iter().copied().unzip();
        other.insert(
            "index".into(),
            json!({
                "format": 1,
                "events_at": self.events_at,
                "events_end": events_end,
                "checkpoint_ts": times,
                "checkpoint_end": ends,
                "pcpu_rows": self.layout.pcpu_names,
                "spans_start": self.spans_extent.map(|(first, _)| micros(first)),
                "spans_end": self.spans_extent.map(|(_, last)| micros(last)),
            }),
        );
        self.out.write_all(br#"],"otherData":"#)?;
        serde_json::to_writer(&mut self.out, &other)?;
        self.out.write_all(b"}")?;
        self.out.flush()
    }
}

/// Metadata events of different argument types, written by one closure.
trait MetaEvent {
    fn write_to(&self, out: &mut dyn Write) -> io::Result<()>;
}

impl<A: Serialize> MetaEvent for Meta<A> {
    fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        Ok(serde_json::to_writer(out, self)?)
    }
}
