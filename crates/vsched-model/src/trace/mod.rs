//! Traces of a run, for Gantt charts and Perfetto.
//!
//! A [`Trace`] records [`TraceEvent`]s: what each pCPU ran ([`Span`]s, the host's view), what
//! each vCPU was doing ([`VcpuSlice`]s: running, spinning, runnable, blocked), counters
//! (the simulator's runnable vCPUs per host, and whatever a policy publishes through
//! `Cx::trace_counter`), instants (PLE exits, lock-holder preemptions, lock hand-offs,
//! co-scheduling launches) and flows (IPIs and messages, from sender to receiver).
//!
//! Intervals are recorded when they close and go either to a [`TraceSink`] (a file, written
//! as the run goes: `vsched run --trace`) or, for tests and small runs, into memory. Either
//! way at most `limit` events are kept and the rest counted, and with a sink the trace's
//! memory does not depend on the limit or on the run's length: it holds one open interval
//! per pCPU and per vCPU, one pending value per counter, and the flows in flight. The
//! simulator itself does no I/O: the sink does.
//!
//! An in-memory trace ([`Trace::new`]) records pCPU spans only, the schedule that tests
//! check; a streaming one ([`Trace::streaming`]) records everything.

mod counters;
mod event;

use std::collections::BTreeMap;
use std::io;

use vsched_engine::Time;

use crate::ids::{DomId, PcpuId, VcpuId};
use counters::Counters;
pub use event::{
    CounterOf, CounterSample, FlowKind, FlowPoint, Instant, Span, TraceEvent, Track, VcpuActivity, VcpuSlice,
    RUNNABLE_VCPUS,
};

/// The error a run ends with when its trace's sink fails ([`Trace::finish`] has the cause).
pub const SINK_FAILED: &str = "the trace could not be written";

/// Where a streaming trace's events go, in the order they are recorded.
pub trait TraceSink {
    /// One event (never more than the trace's limit).
    fn event(&mut self, event: &TraceEvent) -> io::Result<()>;

    /// How many events apart the sink wants [`TraceSink::checkpoint`]s; `None`: never. Asked
    /// once, when the trace is made.
    fn checkpoint_interval(&self) -> Option<u64> {
        None
    }

    /// At `now`, after an event, every [`TraceSink::checkpoint_interval`] events: the spans
    /// open on each pCPU (indexed by pCPU, `None` when idle; their `end` is not known yet).
    /// Everything recorded before this call closed at or before `now`, everything after at or
    /// after it, so a reader can find what a pCPU ran in a window without reading the rest
    /// (`vsched plot-trace`).
    fn checkpoint(&mut self, _now: Time, _open: &[Option<Span>]) -> io::Result<()> {
        Ok(())
    }

    /// The end of the trace: `events` were passed to [`TraceSink::event`], `dropped` more were
    /// left out by the limit. Called once, by [`Trace::finish`].
    fn finish(&mut self, events: u64, dropped: u64) -> io::Result<()>;
}

enum Store {
    Memory(Vec<TraceEvent>),
    Sink(Box<dyn TraceSink>),
}

/// A bounded recorder of trace events: past `limit` events it counts what it drops.
pub struct Trace {
    limit: u64,
    recorded: u64,
    dropped: u64,
    /// Records vCPU slices, counters, instants and flows, not only pCPU spans.
    detailed: bool,
    /// The span open on each pCPU.
    open: Vec<Option<Span>>,
    /// Each vCPU's current activity and since when.
    vcpus: Vec<Option<(VcpuActivity, Time)>>,
    counters: Counters,
    /// Each pCPU's reschedule IPI in flight: the request's generation and the flow's id.
    resched_flows: Vec<Option<(u32, u64)>>,
    /// Guest IPIs (by sender and target vCPU) and messages (by slot) in flight.
    flows: BTreeMap<(FlowKind, usize, usize), u64>,
    next_flow: u64,
    /// The sink wants a checkpoint every this many events (0: never).
    checkpoint_every: u64,
    store: Store,
    /// The sink's first error; nothing is written after it.
    error: Option<io::Error>,
}

impl Trace {
    /// A trace kept in memory (at most `limit` events), of pCPU spans only, read back with
    /// [`Trace::spans`].
    pub fn new(limit: usize) -> Self {
        Self::with_store(limit, Store::Memory(Vec::new()), false)
    }

    /// A trace of everything, passing each event to `sink` as it is recorded, keeping none.
    pub fn streaming(limit: usize, sink: Box<dyn TraceSink>) -> Self {
        Self::with_store(limit, Store::Sink(sink), true)
    }

    fn with_store(limit: usize, store: Store, detailed: bool) -> Self {
        let checkpoint_every = match &store {
            Store::Sink(sink) => sink.checkpoint_interval().unwrap_or(0),
            Store::Memory(_) => 0,
        };
        Trace {
            limit: limit as u64,
            recorded: 0,
            dropped: 0,
            detailed,
            open: Vec::new(),
            vcpus: Vec::new(),
            counters: Counters::default(),
            resched_flows: Vec::new(),
            flows: BTreeMap::new(),
            next_flow: 0,
            checkpoint_every,
            store,
            error: None,
        }
    }

    /// Whether this trace records more than pCPU spans (counters among them): a policy need
    /// not compute what would not be kept.
    pub fn detailed(&self) -> bool {
        self.detailed
    }

    /// The events of an in-memory trace (none for a streaming one: they went to its sink).
    pub fn events(&self) -> &[TraceEvent] {
        match &self.store {
            Store::Memory(events) => events,
            Store::Sink(_) => &[],
        }
    }

    /// The pCPU spans of an in-memory trace, in closing order.
    pub fn spans(&self) -> Vec<Span> {
        self.events()
            .iter()
            .filter_map(|e| match e {
                TraceEvent::Span(s) => Some(*s),
                _ => None,
            })
            .collect()
    }

    /// Events recorded (kept in memory or passed to the sink).
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// Events not recorded because the limit was reached.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The sink failed: the run should stop, and [`Trace::finish`] returns the error.
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    /// Ends a trace whose run has ended ([`Trace::close_all`] was called): tells the sink the
    /// totals. Returns the sink's first error, from the run or from this call.
    pub fn finish(mut self) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match &mut self.store {
            Store::Memory(_) => Ok(()),
            Store::Sink(sink) => sink.finish(self.recorded, self.dropped),
        }
    }

    // ---- pCPU spans ----

    /// `p` starts running `v` at `now` (a no-op if it already runs `v` in that state).
    pub fn open(&mut self, p: PcpuId, vcpu: VcpuId, dom: DomId, index: usize, now: Time, spinning: bool) {
        if self.open.len() <= p {
            self.open.resize(p + 1, None);
        }
        if let Some(s) = self.open[p] {
            if s.vcpu == vcpu {
                self.set_spinning(p, now, spinning);
                return;
            }
        }
        self.close(p, now);
        self.open[p] = Some(Span { pcpu: p, vcpu, dom, index, start: now, end: now, spinning });
    }

    /// The vCPU on `p` starts or stops spinning.
    pub fn set_spinning(&mut self, p: PcpuId, now: Time, spinning: bool) {
        let Some(Some(s)) = self.open.get(p).copied() else {
            return;
        };
        if s.spinning != spinning {
            self.close(p, now);
            self.open[p] = Some(Span { start: now, end: now, spinning, ..s });
        }
    }

    /// `p` stops running whatever it ran.
    pub fn close(&mut self, p: PcpuId, now: Time) {
        let Some(slot) = self.open.get_mut(p) else {
            return;
        };
        if let Some(mut s) = slot.take() {
            s.end = now;
            if s.end > s.start {
                self.record(TraceEvent::Span(s), now);
            }
        }
    }

    // ---- Everything else (detailed traces) ----

    /// vCPU `v` does `activity` from `now` on (`None`: offline). A no-op if it already does.
    pub fn vcpu(&mut self, v: VcpuId, activity: Option<VcpuActivity>, now: Time) {
        if !self.detailed {
            return;
        }
        if self.vcpus.len() <= v {
            self.vcpus.resize(v + 1, None);
        }
        let current = self.vcpus[v];
        if current.map(|(a, _)| a) == activity {
            return;
        }
        if let Some((a, start)) = current {
            if now > start {
                self.record(TraceEvent::Vcpu(VcpuSlice { vcpu: v, activity: a, start, end: now }), now);
            }
        }
        self.vcpus[v] = activity.map(|a| (a, now));
    }

    /// Counter `name` of `of` holds `value` from `now` on (recorded once it is final: see
    /// `counters`).
    pub fn counter(&mut self, of: CounterOf, name: &'static str, value: i64, now: Time) {
        if !self.detailed {
            return;
        }
        if let Some(sample) = self.counters.sample(of, name, now, value) {
            self.record(TraceEvent::Counter(sample), now);
        }
    }

    /// `what` happens at `now`.
    pub fn instant(&mut self, what: Instant, now: Time) {
        if self.detailed {
            self.record(TraceEvent::Instant { at: now, what }, now);
        }
    }

    /// A reschedule IPI leaves `from` at `now` for pCPU `to`, as request `gen` of `to`; it
    /// replaces any earlier one still in flight there, whose flow then has no end.
    pub fn resched_ipi_sent(&mut self, from: Track, to: PcpuId, gen: u32, now: Time) {
        if !self.detailed {
            return;
        }
        if self.resched_flows.len() <= to {
            self.resched_flows.resize(to + 1, None);
        }
        let id = self.flow_point(FlowKind::ReschedIpi, None, from, true, now);
        self.resched_flows[to] = Some((gen, id));
    }

    /// Request `gen` of pCPU `p` is handled at `now`: the end of its IPI's flow, if it came
    /// by IPI.
    pub fn resched_handled(&mut self, p: PcpuId, gen: u32, now: Time) {
        let Some(slot) = self.resched_flows.get_mut(p) else {
            return;
        };
        if let Some((g, id)) = *slot {
            if g == gen {
                *slot = None;
                self.flow_point(FlowKind::ReschedIpi, Some(id), Track::Pcpu(p), false, now);
            }
        }
    }

    /// A flow of `kind` identified by `key` (sender and target vCPUs of a guest IPI, a
    /// message's slot) leaves `from` at `now`.
    pub fn flow_sent(&mut self, kind: FlowKind, key: (usize, usize), from: Track, now: Time) {
        if self.detailed {
            let id = self.flow_point(kind, None, from, true, now);
            self.flows.insert((kind, key.0, key.1), id);
        }
    }

    /// The flow of `kind` identified by `key` arrives on `to` at `now` (nothing if it was not
    /// sent while tracing).
    pub fn flow_arrived(&mut self, kind: FlowKind, key: (usize, usize), to: Track, now: Time) {
        if let Some(id) = self.flows.remove(&(kind, key.0, key.1)) {
            self.flow_point(kind, Some(id), to, false, now);
        }
    }

    /// Records one end of a flow: a new one (`id` None) or the end of flow `id`. Returns its id.
    fn flow_point(&mut self, kind: FlowKind, id: Option<u64>, on: Track, leaving: bool, now: Time) -> u64 {
        let id = id.unwrap_or_else(|| {
            self.next_flow += 1;
            self.next_flow
        });
        self.record(TraceEvent::Flow(FlowPoint { kind, id, at: now, on, leaving }), now);
        id
    }

    /// The run ends at `now`: closes every open span and vCPU slice, and records the counters'
    /// pending values.
    pub fn close_all(&mut self, now: Time) {
        for p in 0..self.open.len() {
            self.close(p, now);
        }
        for v in 0..self.vcpus.len() {
            self.vcpu(v, None, now);
        }
        for sample in self.counters.drain() {
            self.record(TraceEvent::Counter(sample), now);
        }
    }

    fn record(&mut self, event: TraceEvent, now: Time) {
        if self.recorded >= self.limit {
            self.dropped += 1;
            return;
        }
        self.recorded += 1;
        match &mut self.store {
            Store::Memory(events) => events.push(event),
            Store::Sink(sink) => {
                if self.error.is_some() {
                    return;
                }
                let mut result = sink.event(&event);
                if result.is_ok() && self.checkpoint_every > 0 && self.recorded.is_multiple_of(self.checkpoint_every) {
                    result = sink.checkpoint(now, &self.open);
                }
                if let Err(e) = result {
                    self.error = Some(e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
