"""Fair share by virtual time in a dozen lines, on `vsched.VtimeQueue` (sched_ext's vtime DSQ,
as scx_simple's weighted mode uses it): each vCPU's virtual time grows by the CPU time it
received over its VM's weight, and the pCPU that needs work runs the vCPU furthest behind.
A woken vCPU starts no further behind than the queue's front, so a long sleep earns no burst.

    vsched run scenarios/lhp-demo.toml --policy examples/policies/fair_share.py:FairShare
"""

from __future__ import annotations

import vsched
from vsched import Cx, Decision, VtimeQueue

SLICE_NS = 10_000_000  # 10 ms, rr's slice


class FairShare(vsched.Policy):
    def __init__(self) -> None:
        self.queue = VtimeQueue()
        self.vtime: dict[int, int] = {}  # each vCPU's virtual time, ns of CPU over weight
        self.started: dict[int, int] = {}  # when each running vCPU was last dispatched

    def vcpu_insert(self, cx: Cx, v: int) -> None:
        self.queue.push(v, self.vtime.setdefault(v, 0))

    def wake(self, cx: Cx, v: int) -> None:
        front = self.queue.peek()  # the vCPU furthest behind: no one wakes further behind it
        floor = (self.queue.vtime(front) or 0) if front is not None else 0
        self.queue.push(v, max(self.vtime.get(v, 0), floor))
        cx.kick_idle_from(0)

    def pick_next(self, cx: Cx, pcpu: int, prev: int | None) -> Decision:
        if prev is not None:
            ran = cx.now() - self.started.get(prev, cx.now())
            self.vtime[prev] = self.vtime.get(prev, 0) + ran * 256 // cx.domain(cx.dom_of(prev)).weight
            if cx.is_runnable(prev):
                self.queue.push(prev, self.vtime[prev])
        v = self.queue.pop()
        if v is None:
            return Decision.idle()
        self.started[v] = cx.now()
        return Decision.run(v, SLICE_NS)
