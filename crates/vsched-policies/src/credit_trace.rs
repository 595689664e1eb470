//! What Credit (and every policy built on it) publishes to a traced run: each pCPU's
//! run-queue length (`runq`: vCPUs queued there, the running one not counted, as Xen's
//! `csched_pcpu.runq`) and each vCPU's credit (`credit`: its `csched_unit.credit`), as
//! counter tracks (`Cx::trace_counter`). Published after every callback that may change
//! them; only changes reach the trace, and nothing is computed when the run is not traced.

use vsched_model::{CounterOf, Cx};

/// The values last published, so that unchanged ones are not published again.
#[derive(Default)]
pub(crate) struct Published {
    /// Whether the run is traced (asked once, at `init`: tracing starts before the run).
    on: bool,
    runq: Vec<i64>,
    credit: Vec<i64>,
}

impl Published {
    /// The run starts on a host of `pcpus` pCPUs and `vcpus` vCPUs.
    pub(crate) fn start(&mut self, cx: &Cx, pcpus: usize, vcpus: usize) {
        self.on = cx.tracing();
        // Impossible values, so that the first publication sends everything.
        self.runq = vec![-1; if self.on { pcpus } else { 0 }];
        self.credit = vec![i64::MIN; if self.on { vcpus } else { 0 }];
    }

    /// Whether the run is traced (only then call [`Published::publish`]).
    #[inline]
    pub(crate) fn on(&self) -> bool {
        self.on
    }

    /// Publishes each counter whose value differs from the one last published.
    pub(crate) fn publish(&mut self, cx: &mut Cx, runq_len: impl Fn(usize) -> usize, credit_of: impl Fn(usize) -> i64) {
        for (p, last) in self.runq.iter_mut().enumerate() {
            let len = runq_len(p) as i64;
            if *last != len {
                *last = len;
                cx.trace_counter("runq", CounterOf::Pcpu(p), len);
            }
        }
        for (v, last) in self.credit.iter_mut().enumerate() {
            let credit = credit_of(v);
            if *last != credit {
                *last = credit;
                cx.trace_counter("credit", CounterOf::Vcpu(v), credit);
            }
        }
    }
}
