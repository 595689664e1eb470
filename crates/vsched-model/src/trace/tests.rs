use std::cell::RefCell;
use std::rc::Rc;

use super::*;

/// A checkpoint as the sink saw it: its time, the events before it, the open spans.
type Seen = (Time, usize, Vec<Option<Span>>);

/// A sink that shares what it receives with the test, and fails after `fail_after` events.
#[derive(Clone, Default)]
struct Shared {
    events: Rc<RefCell<Vec<TraceEvent>>>,
    checkpoints: Rc<RefCell<Vec<Seen>>>,
    totals: Rc<RefCell<Option<(u64, u64)>>>,
    fail_after: Option<usize>,
    checkpoint_every: Option<u64>,
}

impl Shared {
    fn spans(&self) -> Vec<Span> {
        self.events
            .borrow()
            .iter()
            .filter_map(|e| match e {
                TraceEvent::Span(s) => Some(*s),
                _ => None,
            })
            .collect()
    }
}

impl TraceSink for Shared {
    fn event(&mut self, event: &TraceEvent) -> io::Result<()> {
        if self.fail_after.is_some_and(|n| self.events.borrow().len() >= n) {
            return Err(io::Error::other("disk full"));
        }
        self.events.borrow_mut().push(*event);
        Ok(())
    }

    fn checkpoint_interval(&self) -> Option<u64> {
        self.checkpoint_every
    }

    fn checkpoint(&mut self, now: Time, open: &[Option<Span>]) -> io::Result<()> {
        let written = self.events.borrow().len();
        self.checkpoints.borrow_mut().push((now, written, open.to_vec()));
        Ok(())
    }

    fn finish(&mut self, events: u64, dropped: u64) -> io::Result<()> {
        *self.totals.borrow_mut() = Some((events, dropped));
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
    assert_eq!(sink.spans(), memory.spans());
    assert!(streamed.events().is_empty(), "a streaming trace keeps nothing");
    assert_eq!(memory.spans()[2], Span { pcpu: 0, vcpu: 2, dom: 1, index: 0, start: 10, end: 20, spinning: true });
    streamed.finish().unwrap();
    assert_eq!(*sink.totals.borrow(), Some((5, 0)));
}

#[test]
fn past_the_limit_events_are_counted_not_kept() {
    let sink = Shared::default();
    let mut t = Trace::streaming(3, Box::new(sink.clone()));
    drive(&mut t);
    assert_eq!((t.recorded(), t.dropped()), (3, 2));
    assert_eq!(sink.events.borrow().len(), 3);
    t.finish().unwrap();
    assert_eq!(*sink.totals.borrow(), Some((3, 2)));
}

#[test]
fn a_sink_error_is_kept_and_returned_by_finish() {
    let sink = Shared { fail_after: Some(2), ..Shared::default() };
    let mut t = Trace::streaming(100, Box::new(sink.clone()));
    drive(&mut t);
    assert!(t.failed());
    assert_eq!(sink.events.borrow().len(), 2, "nothing is written after the error");
    assert_eq!(t.finish().unwrap_err().to_string(), "disk full");
    assert_eq!(*sink.totals.borrow(), None, "a failed trace is not finished");
}

#[test]
fn vcpu_slices_change_with_the_activity_and_close_at_the_end() {
    let sink = Shared::default();
    let mut t = Trace::streaming(100, Box::new(sink.clone()));
    let running = Some(VcpuActivity::Running { pcpu: 1 });
    t.vcpu(4, Some(VcpuActivity::Runnable), 0);
    t.vcpu(4, Some(VcpuActivity::Runnable), 5); // no change
    t.vcpu(4, running, 10);
    t.vcpu(4, Some(VcpuActivity::Spinning { pcpu: 1 }), 10); // zero length: not recorded
    t.vcpu(4, Some(VcpuActivity::Blocked), 30);
    t.vcpu(4, None, 40); // offline: nothing open
    t.vcpu(2, running, 40);
    t.close_all(50);
    let slices: Vec<_> = sink
        .events
        .borrow()
        .iter()
        .map(|e| match e {
            TraceEvent::Vcpu(s) => (s.vcpu, s.activity, s.start, s.end),
            other => panic!("only vCPU slices here, got {other:?}"),
        })
        .collect();
    assert_eq!(
        slices,
        [
            (4, VcpuActivity::Runnable, 0, 10),
            (4, VcpuActivity::Spinning { pcpu: 1 }, 10, 30),
            (4, VcpuActivity::Blocked, 30, 40),
            (2, VcpuActivity::Running { pcpu: 1 }, 40, 50),
        ]
    );
}

#[test]
fn an_in_memory_trace_keeps_spans_only() {
    let mut t = Trace::new(100);
    assert!(!t.detailed());
    t.vcpu(0, Some(VcpuActivity::Runnable), 0);
    t.counter(CounterOf::Host(0), RUNNABLE_VCPUS, 3, 0);
    t.instant(Instant::PleExit { vcpu: 0 }, 1);
    t.flow_sent(FlowKind::Message, (0, 0), Track::Vcpu(0), 1);
    t.resched_ipi_sent(Track::Host(0), 1, 7, 1);
    drive(&mut t);
    t.close_all(60);
    assert_eq!(t.events().len(), 5);
    assert!(t.events().iter().all(|e| matches!(e, TraceEvent::Span(_))));
}

#[test]
fn flows_pair_their_two_ends_and_a_superseded_ipi_has_no_end() {
    let sink = Shared::default();
    let mut t = Trace::streaming(100, Box::new(sink.clone()));
    t.resched_ipi_sent(Track::Pcpu(0), 3, 1, 10);
    t.resched_ipi_sent(Track::Host(0), 3, 2, 11); // replaces request 1
    t.resched_handled(3, 1, 12); // stale: no end
    t.resched_handled(3, 2, 13);
    t.resched_handled(3, 2, 14); // already ended
    t.flow_sent(FlowKind::GuestIpi, (5, 6), Track::Vcpu(5), 20);
    t.flow_sent(FlowKind::Message, (5, 6), Track::Vcpu(5), 20); // same key, another kind
    t.flow_arrived(FlowKind::Message, (5, 6), Track::Vcpu(9), 25);
    t.flow_arrived(FlowKind::GuestIpi, (5, 6), Track::Vcpu(6), 30);
    t.flow_arrived(FlowKind::GuestIpi, (5, 6), Track::Vcpu(6), 31); // nothing in flight
    let points: Vec<_> = sink
        .events
        .borrow()
        .iter()
        .map(|e| match e {
            TraceEvent::Flow(f) => (f.kind, f.id, f.at, f.on, f.leaving),
            other => panic!("only flows here, got {other:?}"),
        })
        .collect();
    use FlowKind::*;
    assert_eq!(
        points,
        [
            (ReschedIpi, 1, 10, Track::Pcpu(0), true),
            (ReschedIpi, 2, 11, Track::Host(0), true),
            (ReschedIpi, 2, 13, Track::Pcpu(3), false),
            (GuestIpi, 3, 20, Track::Vcpu(5), true),
            (Message, 4, 20, Track::Vcpu(5), true),
            (Message, 4, 25, Track::Vcpu(9), false),
            (GuestIpi, 3, 30, Track::Vcpu(6), false),
        ]
    );
}

#[test]
fn checkpoints_come_every_n_events_with_the_open_spans() {
    let sink = Shared { checkpoint_every: Some(2), ..Shared::default() };
    let mut t = Trace::streaming(4, Box::new(sink.clone()));
    drive(&mut t);
    let checkpoints = sink.checkpoints.borrow();
    // After the 2nd event (p1's first span, closed at 15) and the 4th (p0's second, at 30);
    // none after the limit.
    let summary: Vec<_> =
        checkpoints.iter().map(|(now, written, open)| (*now, *written, open.iter().flatten().count())).collect();
    assert_eq!(summary, [(15, 2, 1), (30, 4, 1)]);
    let (_, _, open) = &checkpoints[0];
    assert_eq!(open[0].map(|s| (s.vcpu, s.start, s.spinning)), Some((2, 10, true)));
    assert_eq!(open[1], None, "p1 was idle at 15");
}
