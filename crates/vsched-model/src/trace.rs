//! Per-pCPU run intervals, for Gantt charts and Perfetto.

use vsched_engine::Time;

use crate::ids::{DomId, PcpuId, VcpuId};

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

/// A bounded recorder of spans: past `limit` spans it counts what it drops.
pub struct Trace {
    limit: usize,
    spans: Vec<Span>,
    open: Vec<Option<Span>>,
    dropped: u64,
}

impl Trace {
    pub fn new(limit: usize) -> Self {
        Trace { limit, spans: Vec::new(), open: Vec::new(), dropped: 0 }
    }

    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// Spans not recorded because the limit was reached.
    pub fn dropped(&self) -> u64 {
        self.dropped
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
                if self.spans.len() < self.limit {
                    self.spans.push(s);
                } else {
                    self.dropped += 1;
                }
            }
        }
    }
}
