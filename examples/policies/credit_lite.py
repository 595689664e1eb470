"""Credit in miniature: the example of docs/python-policies.md for a stateful policy (a
policy timer, ticks, per-VM state, counters, an invariant check).

- Each VM earns credit by weight: every 30 ms (a policy timer, as Credit's `csched_acct`),
  the host's 30 ms of CPU per pCPU is shared out among the online VMs in proportion to their
  weights, and each VM's share among its vCPUs. A vCPU's credit is capped at one period's
  worth, so an idle vCPU cannot hoard.
- Every 10 ms (the tick) the running vCPU pays 10 ms of credit.
- vCPUs with credit left (UNDER) run before those without (OVER), each class in FIFO order;
  a slice is `slice_ms` (30 ms, Credit's default).
- A pause-loop exit gives up the rest of the slice.

An approximation of Credit (crates/vsched-policies/src/credit.rs is the faithful one): one
global pair of queues rather than per-pCPU run queues, no BOOST priority, no caps.

    vsched run scenarios/lhp-demo.toml --policy examples/policies/credit_lite.py:CreditLite
"""

from __future__ import annotations

from collections import deque

import vsched
from vsched import Cx, Decision, YieldReason

NS_PER_MS = 1_000_000
ACCOUNTING_PERIOD_NS = 30 * NS_PER_MS
TICK_NS = 10 * NS_PER_MS
ACCOUNTING_TIMER = 0


class CreditLite(vsched.Policy):
    def __init__(self, slice_ms: int = 30) -> None:
        self.slice_ns = slice_ms * NS_PER_MS
        self.credit: list[int] = []  # per vCPU, in ns of CPU time
        self.under: deque[int] = deque()  # queued vCPUs with credit left
        self.over: deque[int] = deque()  # queued vCPUs without

    def tick_period_ns(self) -> int | None:
        return TICK_NS

    def init(self, cx: Cx) -> None:
        self.credit = [0] * cx.n_vcpus()
        self.account(cx)

    def account(self, cx: Cx) -> None:
        """Share out one period of the host's CPU by weight, and come back in one period."""
        online = [d for d in cx.domains() if d.online]
        total_weight = sum(d.weight for d in online)
        for d in online:
            share = ACCOUNTING_PERIOD_NS * cx.n_pcpus() * d.weight // total_weight // d.vcpus
            for v in range(d.first_vcpu, d.first_vcpu + d.vcpus):
                self.credit[v] = min(self.credit[v] + share, ACCOUNTING_PERIOD_NS)
        cx.count("credit_lite.accountings")
        cx.set_timer(cx.now() + ACCOUNTING_PERIOD_NS, ACCOUNTING_TIMER)

    def queue(self, v: int) -> None:
        (self.under if self.credit[v] > 0 else self.over).append(v)

    def vcpu_insert(self, cx: Cx, v: int) -> None:
        self.queue(v)

    def wake(self, cx: Cx, v: int) -> None:
        self.queue(v)
        cx.kick_idle_from(0)

    def yield_(self, cx: Cx, v: int, why: YieldReason) -> None:
        if isinstance(why, YieldReason.PauseLoopExit):
            cx.resched_here()

    def timer(self, cx: Cx, id: int) -> None:
        self.account(cx)

    def tick(self, cx: Cx, pcpu: int) -> None:
        v = cx.curr(pcpu)
        if v is not None:
            self.credit[v] -= TICK_NS

    def pick_next(self, cx: Cx, pcpu: int, prev: int | None) -> Decision:
        if prev is not None and cx.is_runnable(prev):
            self.queue(prev)
        for queue in (self.under, self.over):
            if queue:
                return Decision.run(queue.popleft(), self.slice_ns)
        return Decision.idle()

    def check(self, cx: Cx) -> str | None:
        queued = list(self.under) + list(self.over)
        if len(queued) != len(set(queued)):
            return f"a vCPU is queued twice: {sorted(queued)}"
        running = [v for v in queued if cx.running_on(v) is not None]
        return f"running vCPUs are queued: {running}" if running else None
