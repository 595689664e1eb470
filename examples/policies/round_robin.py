"""Global round robin, the reference policy: a Python port of crates/vsched-policies/src/rr.rs,
callback for callback, which gives the same results as `rr` on the same scenario and seed
(tests/python/test_python_policies.py checks it).

One FIFO of runnable vCPUs shared by all pCPUs; a pCPU that needs work takes the head and runs
it for a fixed slice; a preempted or yielding vCPU goes to the tail; a waking vCPU goes to the
tail and kicks one idle pCPU.

    vsched run scenarios/lhp-demo.toml --policy examples/policies/round_robin.py:RoundRobin
"""

from __future__ import annotations

import vsched
from vsched import Cx, Decision, FifoQueue, YieldReason

NS_PER_US = 1_000


class RoundRobin(vsched.Policy):
    def __init__(self, slice_us: int = 10_000) -> None:
        # The default slice: 10 ms, as rr's.
        self.slice_ns = slice_us * NS_PER_US
        # Runnable vCPUs that are not running, oldest first (rr's queue, vsched_model::FifoQueue).
        self.queue = FifoQueue()

    def vcpu_insert(self, cx: Cx, v: int) -> None:
        self.queue.push(v)

    def wake(self, cx: Cx, v: int) -> None:
        # Kick the lowest-numbered idle pCPU not already kicked, so two wake-ups wake two.
        self.queue.push(v)
        cx.kick_idle_from(0)

    def yield_(self, cx: Cx, v: int, why: YieldReason) -> None:
        # A pause-loop exit gives up the rest of the slice; KVM's yield hypercalls change nothing.
        if isinstance(why, YieldReason.PauseLoopExit):
            cx.resched_here()

    def pick_next(self, cx: Cx, pcpu: int, prev: int | None) -> Decision:
        if prev is not None and cx.is_runnable(prev):
            self.queue.push(prev)
        v = self.queue.pop()
        return Decision.idle() if v is None else Decision.run(v, self.slice_ns)
