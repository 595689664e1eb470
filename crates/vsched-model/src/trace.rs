//! Per-pCPU run intervals, for Gantt charts and Perfetto.
//!
//! A [`Trace`] holds one open interval per pCPU; each interval, once closed, goes either to
//! a [`SpanSink`] (a file, written as the run goes: `vsched run --trace`) or, for tests and
//! small runs, into memory. Either way at most `limit` spans are kept and the rest counted,
//! and with a sink the trace's memory does not depend on the limit or on the run's length.
//! The simulator itself does no I/O: the sink does.

use std::io;

use vsched_engine::Time;

use crate::ids::{DomId, PcpuId, VcpuId};

/// The error a run ends with when its trace's sink fails ([`Trace::finish`] has the cause).
pub const SINK_FAILED: &str = "the trace could not be written";

/// One interval during which a pCPU ran one vCPU, either making progress or spinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub pcpu: PcpuId,
    pub vcpu: VcpuId,
    pub dom: DomId,
    /// The vCPU's index within its domain.
    pub index: usize,
    pub start: Time,
    pub end: Time,
    pub spinning: bool,
}

/// Where a streaming trace's spans go, in the order they close.
pub trait SpanSink {
    /// One closed span (never more than the trace's limit).
    fn span(&mut self, span: &Span) -> io::Result<()>;

    /// The end of the trace: `spans` were passed to [`SpanSink::span`], `dropped` more were
    /// left out by the limit. Called once, by [`Trace::finish`].
    fn finish(&mut self, spans: u64, dropped: u64) -> io::Result<()>;
}

enum Store {
    Memory(Vec<Span>),
    Sink(Box<dyn SpanSink>),
}

/// A bounded recorder of spans: past `limit` spans it counts what it drops.
pub struct Trace {
    limit: u64,
    recorded: u64,
    dropped: u64,
    open: Vec<Option<Span>>,
    store: Store,
    /// The sink's first error; nothing is written after it.
    error: Option<io::Error>,
}

impl Trace {
    /// A trace kept in memory (at most `limit` spans), read back with [`Trace::spans`].
    pub fn new(limit: usize) -> Self {
        Self::with_store(limit, Store::Memory(Vec::new()))
    }

    /// A trace that passes each span to `sink` as it closes, keeping none.
    pub fn streaming(limit: usize, sink: Box<dyn SpanSink>) -> Self {
        Self::with_store(limit, Store::Sink(sink))
    }

    fn with_store(limit: usize, store: Store) -> Self {
        Trace { limit: limit as u64, recorded: 0, dropped: 0, open: Vec::new(), store, error: None }
    }

    /// The spans of an in-memory trace (none for a streaming one: they went to its sink).
    pub fn spans(&self) -> &[Span] {
        match &self.store {
            Store::Memory(spans) => spans,
            Store::Sink(_) => &[],
        }
    }

    /// Spans recorded (kept in memory or passed to the sink).
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// Spans not recorded because the limit was reached.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The sink failed: the run should stop, and [`Trace::finish`] returns the error.
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    /// Ends a trace whose run has ended (the simulator closed its open spans): tells the sink
    /// the totals. Returns the sink's first error, from the run or from this call.
    pub fn finish(mut self) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match &mut self.store {
            Store::Memory(_) => Ok(()),
            Store::Sink(sink) => sink.finish(self.recorded, self.dropped),
        }
    }

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
                self.record(s);
            }
        }
    }

    fn record(&mut self, s: Span) {
        if self.recorded >= self.limit {
            self.dropped += 1;
            return;
        }
        self.recorded += 1;
        match &mut self.store {
            Store::Memory(spans) => spans.push(s),
            Store::Sink(sink) => {
                if self.error.is_none() {
                    if let Err(e) = sink.span(&s) {
                        self.error = Some(e);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    /// A sink that shares what it receives with the test, and fails after `fail_after` spans.
    #[derive(Clone, Default)]
    struct Shared {
        spans: Rc<RefCell<Vec<Span>>>,
        totals: Rc<RefCell<Option<(u64, u64)>>>,
        fail_after: Option<usize>,
    }

    impl SpanSink for Shared {
        fn span(&mut self, span: &Span) -> io::Result<()> {
            if self.fail_after.is_some_and(|n| self.spans.borrow().len() >= n) {
                return Err(io::Error::other("disk full"));
            }
            self.spans.borrow_mut().push(*span);
            Ok(())
        }

        fn finish(&mut self, spans: u64, dropped: u64) -> io::Result<()> {
            *self.totals.borrow_mut() = Some((spans, dropped));
            Ok(())
        }
    }

    /// Five spans on two pCPUs, closed in this order: (p0 v0), (p1 v1), (p0 v2 spinning),
    /// (p0 v2), (p1 v3).
    fn drive(t: &mut Trace) {
        t.open(0, 0, 0, 0, 0, false);
        t.open(1, 1, 0, 1, 0, false);
        t.open(0, 2, 1, 0, 10, true);
        t.close(1, 15);
        t.set_spinning(0, 20, false);
        t.open(1, 3, 1, 1, 20, false);
        t.open(1, 3, 1, 1, 25, false); // the same vCPU: nothing closes
        t.close(0, 30);
        t.close(1, 40);
        t.close(1, 50); // nothing open
    }

    #[test]
    fn a_sink_receives_what_memory_keeps_in_the_same_order() {
        let mut memory = Trace::new(100);
        drive(&mut memory);
        let sink = Shared::default();
        let mut streamed = Trace::streaming(100, Box::new(sink.clone()));
        drive(&mut streamed);
        assert_eq!(memory.spans().len(), 5);
        assert_eq!(*sink.spans.borrow(), memory.spans());
        assert!(streamed.spans().is_empty(), "a streaming trace keeps nothing");
        assert_eq!(memory.spans()[2], Span { pcpu: 0, vcpu: 2, dom: 1, index: 0, start: 10, end: 20, spinning: true });
        streamed.finish().unwrap();
        assert_eq!(*sink.totals.borrow(), Some((5, 0)));
    }

    #[test]
    fn past_the_limit_spans_are_counted_not_kept() {
        let sink = Shared::default();
        let mut t = Trace::streaming(3, Box::new(sink.clone()));
        drive(&mut t);
        assert_eq!((t.recorded(), t.dropped()), (3, 2));
        assert_eq!(sink.spans.borrow().len(), 3);
        t.finish().unwrap();
        assert_eq!(*sink.totals.borrow(), Some((3, 2)));
    }

    #[test]
    fn a_sink_error_is_kept_and_returned_by_finish() {
        let sink = Shared { fail_after: Some(2), ..Shared::default() };
        let mut t = Trace::streaming(100, Box::new(sink.clone()));
        drive(&mut t);
        assert!(t.failed());
        assert_eq!(sink.spans.borrow().len(), 2, "nothing is written after the error");
        assert_eq!(t.finish().unwrap_err().to_string(), "disk full");
        assert_eq!(*sink.totals.borrow(), None, "a failed trace is not finished");
    }
}
