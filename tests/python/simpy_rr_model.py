"""A SimPy 4 model of vsched's global round robin over CPU hogs and one user-mode ticket-spinlock
VM: a second implementation of vsched's rules, in Python on SimPy's event queue, for the
differential test (tests/python/test_simpy_differential.py), which checks that both count the same.

What it models, and the vsched source each rule mirrors:
- Time in integer nanoseconds; at one instant, events run guest progress first, then slice ends,
  then reschedule requests, each kind in the order it was armed (`sim/events.rs`: `Ev::priority`;
  vsched-engine's `(time, priority, sequence)` order). SimPy orders its heap by `(time, priority,
  creation)`, so each event is created with vsched's priority when vsched would arm it (`At`).
- `rr` (`crates/vsched-policies/src/rr.rs`): one FIFO shared by every pCPU; every vCPU joins its
  tail at the start, in VM order; a decision requeues a still-runnable previous vCPU at the tail
  and runs the head for a slice, or idles. At t = 0 each pCPU decides, in pCPU order
  (`sim/clocks.rs`: `start_clocks`, lockstep clocks, no timer slop).
- Dispatch (`sim/dispatch.rs`): every decision counts; a vCPU that replaces another (or an idle
  pCPU) counts a context switch, and a migration if it last ran on another pCPU; its guest code
  runs from `now + sched_cost + context_switch`. A vCPU kept for another slice pays `sched_cost`
  after whatever it still owed. On `hardware = "ideal"` a migration costs nothing more: the
  cache refill (`sim/cache.rs`) is free there. One slice-end timer per pCPU: a decision before
  the deadline moves the deadline, and the old timer re-arms itself for it when it fires.
- Guest progress is analytic (`sim/interpret.rs`): a compute of d started at s ends at s + d
  unless its vCPU is descheduled first, which keeps what is left; each running vCPU has at most
  one pending guest event, cancelled by a generation number (a cancelled event is not counted).
  A CPU hog computes for ever (`FOREVER`, no event after its first); a spinlock thread repeats
  compute, lock, critical section, unlock `iterations` times, then exits and its vCPU halts, its
  pCPU deciding again at once (`block`).
- Ticket lock in user mode (`sim/locks.rs`): a free lock with no one in line is taken at once;
  else the thread spins (spinning is a state: no event while it waits, and `sim/ple.rs`'s
  pause-loop exits do not apply in user mode); the unlock hands the lock to the next in line,
  running or not (a lock-waiter preemption if its vCPU is not running), which goes on through a
  guest event at the same instant, or when its vCPU next executes. Descheduling a running holder
  is a lock-holder preemption.
- Accounting (`sim/accounting.rs`, `sim/collect.rs`): a vCPU's CPU time runs from its dispatch
  (overheads included), spinning time only while it executes guest code; books close at the
  horizon, events at the horizon included.

What it leaves out, and the test's scenarios do without: random compute times (jitter 0:
vsched's draws cannot be reproduced here); what `scripts/peer_compare.py --like-peer` turns off
(machine costs but the two dispatch costs, guest ticks, timer slop, clocks out of step,
workload start spread); wake-ups, kernel-mode spinning and PLE, more than one lock, more than
one VM of spinlocks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import simpy

FOREVER = 2**64 // 4
"""vsched's `FOREVER` (`crates/vsched-model/src/guest.rs`): no event is armed at or past it."""

# Tie-breaks at one instant: `Ev::priority` in `sim/events.rs`.
GUEST_PRIORITY = simpy.events.EventPriority(0)
SLICE_END_PRIORITY = simpy.events.EventPriority(4)
RESCHED_PRIORITY = simpy.events.EventPriority(5)
# After everything at the horizon: vsched handles the events due at the horizon too.
END_PRIORITY = simpy.events.EventPriority(6)


class At(simpy.Event):
    """An event due at `at` ns, ordered at its instant by `priority`, then by creation: a
    `simpy.Timeout` with a chosen priority (initialized as `Timeout.__init__` does)."""

    def __init__(self, env: simpy.Environment, at: int, priority: simpy.events.EventPriority) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, priority, at - int(env.now))


class Step(Enum):
    """What a guest thread does next (its program counter)."""

    HOG = "compute for ever"
    COMPUTE = "compute"
    LOCK = "lock"
    CRITICAL_SECTION = "critical section"
    UNLOCK = "unlock"
    EXIT = "exit"


class Phase(Enum):
    """What a guest thread is doing: ready for its next step, computing, spinning or exited."""

    READY = "ready"
    COMPUTING = "computing"
    SPINNING = "spinning"
    EXITED = "exited"


class VcpuState(Enum):
    """A vCPU waits for a pCPU, runs on one, or has halted for good (its thread exited)."""

    RUNNABLE = "runnable"
    RUNNING = "running"
    BLOCKED = "blocked"


@dataclass(frozen=True)
class VmSpec:
    """A VM of the model: `vcpus` CPU hogs, or (`spinlock`) `vcpus` threads of the spinlock
    workload."""

    name: str
    vcpus: int
    spinlock: bool = False


@dataclass(frozen=True)
class ModelConfig:
    """The scenario, in the units of vsched's scenario file (µs, but the horizon), and the two
    dispatch costs (`host.sched_cost_us`, `host.context_switch_us`) in ns."""

    pcpus: int
    slice_us: int
    vms: tuple[VmSpec, ...]
    compute_us: int
    cs_us: int
    iterations: int
    horizon_s: float
    sched_cost_ns: int
    context_switch_ns: int


@dataclass
class VmResult:
    """One VM's books, in the units vsched counts in."""

    name: str
    cpu_ns: int = 0
    spin_ns: int = 0
    steal_ns: int = 0
    lock_holder_preemptions: int = 0
    lock_waiter_preemptions: int = 0
    alive: int = 0
    finished_at_ns: int | None = None


@dataclass
class Vcpu:
    vm: VmResult
    step: Step
    iterations_left: int
    state: VcpuState = VcpuState.RUNNABLE
    last_pcpu: int | None = None
    run_from: int = 0
    synced_to: int = 0
    gen: int = 0
    state_since: int = 0
    phase: Phase = Phase.READY
    left: int = 0
    holds_lock: bool = False


@dataclass
class Pcpu:
    curr: Vcpu | None = None
    since: int = 0
    busy_ns: int = 0
    slice_deadline: int | None = None
    slice_timer_at: int | None = None


@dataclass
class ModelResult:
    """What the model counts, under the names of vsched's report."""

    events: int = 0
    sched_invocations: int = 0
    context_switches: int = 0
    migrations: int = 0
    busy_ns: int = 0
    vms: list[VmResult] = field(default_factory=list)


class RoundRobinModel:
    """The model: `run()` simulates `config` and returns its counts."""

    def __init__(self, config: ModelConfig) -> None:
        assert sum(vm.spinlock for vm in config.vms) <= 1, "the model has one lock, for one VM"
        self.config = config
        self.env = simpy.Environment()
        self.horizon_ns = round(config.horizon_s * 1e9)
        self.slice_ns = config.slice_us * 1_000
        self.result = ModelResult(vms=[VmResult(vm.name) for vm in config.vms])
        self.vcpus: list[Vcpu] = []
        for spec, books in zip(config.vms, self.result.vms):
            books.alive = spec.vcpus
            step = Step.COMPUTE if spec.spinlock else Step.HOG
            self.vcpus += [Vcpu(books, step, config.iterations) for _ in range(spec.vcpus)]
        self.queue: deque[Vcpu] = deque(self.vcpus)  # rr's vcpu_insert: every vCPU joins the tail
        self.lock_holder: Vcpu | None = None
        self.lock_waiters: deque[Vcpu] = deque()
        self.pcpus = [Pcpu() for _ in range(config.pcpus)]
        for p in range(config.pcpus):
            self.env.process(self.pcpu(p))

    def now(self) -> int:
        return int(self.env.now)

    def run(self) -> ModelResult:
        self.env.run(until=At(self.env, self.horizon_ns, END_PRIORITY))
        self.close_books()
        return self.result

    # ---- host: the pCPUs, rr and the dispatcher ----------------------------------------------

    def pcpu(self, p: int) -> Generator[simpy.Event, Any, None]:
        """pCPU `p`: its decision at t = 0, then its slice-end timer (`Simulation::slice_end`)."""
        pcpu = self.pcpus[p]
        yield At(self.env, 0, RESCHED_PRIORITY)
        self.result.events += 1
        self.schedule(p)
        while pcpu.slice_timer_at is not None:
            yield At(self.env, pcpu.slice_timer_at, SLICE_END_PRIORITY)
            pcpu.slice_timer_at = None
            if pcpu.slice_deadline == self.now():
                self.result.events += 1
                self.schedule(p)
            elif pcpu.slice_deadline is not None and pcpu.slice_deadline > self.now():
                pcpu.slice_timer_at = pcpu.slice_deadline  # renewed meanwhile: not an event

    def schedule(self, p: int) -> None:
        """rr's `pick_next`, then the dispatch of its decision."""
        pcpu = self.pcpus[p]
        prev = pcpu.curr
        if prev is not None and prev.state is not VcpuState.BLOCKED:
            self.queue.append(prev)
        chosen = self.queue.popleft() if self.queue else None
        now = self.now()
        self.result.sched_invocations += 1
        if prev is not None and prev is not chosen:
            self.deschedule(prev)
        if (pcpu.curr is None) != (chosen is None):
            if pcpu.curr is not None:
                pcpu.busy_ns += now - pcpu.since
            pcpu.since = now
        pcpu.curr = chosen
        if chosen is None:
            pcpu.slice_deadline = None
            return
        overhead = self.config.sched_cost_ns
        if chosen is not prev:
            overhead += self.config.context_switch_ns
            self.result.context_switches += 1
            if chosen.last_pcpu is not None and chosen.last_pcpu != p:
                self.result.migrations += 1
            self.set_state(chosen, VcpuState.RUNNING)
            chosen.last_pcpu = p
            chosen.run_from = now + overhead
        else:
            self.sync(chosen)
            chosen.run_from = max(chosen.run_from, now) + overhead  # after what it still owed
        chosen.synced_to = now
        self.arm(chosen)
        pcpu.slice_deadline = now + max(self.slice_ns, 1)
        if pcpu.slice_timer_at is None or pcpu.slice_timer_at > pcpu.slice_deadline:
            # Only the pCPU's own process arms its timer: every other decision (a vCPU halting)
            # comes while a timer at or before the new deadline is pending.
            assert pcpu.slice_timer_at is None, "vsched would arm a second slice-end timer here"
            pcpu.slice_timer_at = pcpu.slice_deadline

    def deschedule(self, vcpu: Vcpu) -> None:
        self.sync(vcpu)
        vcpu.gen += 1
        if vcpu.state is VcpuState.RUNNING:
            if vcpu.holds_lock:
                vcpu.vm.lock_holder_preemptions += 1
            self.set_state(vcpu, VcpuState.RUNNABLE)

    def set_state(self, vcpu: Vcpu, state: VcpuState) -> None:
        spent = self.now() - vcpu.state_since
        if vcpu.state is VcpuState.RUNNING:
            vcpu.vm.cpu_ns += spent
        elif vcpu.state is VcpuState.RUNNABLE:
            vcpu.vm.steal_ns += spent
        vcpu.state = state
        vcpu.state_since = self.now()

    def close_books(self) -> None:
        for vcpu in self.vcpus:
            self.sync(vcpu)
            self.set_state(vcpu, vcpu.state)
        for pcpu in self.pcpus:
            if pcpu.curr is not None:
                pcpu.busy_ns += self.horizon_ns - pcpu.since
            self.result.busy_ns += pcpu.busy_ns

    # ---- guest: analytic progress, the interpreter and the ticket lock -----------------------

    def sync(self, vcpu: Vcpu) -> None:
        """Accounts a running vCPU's progress up to now (`Core::sync`)."""
        now = self.now()
        start = max(vcpu.synced_to, vcpu.run_from)
        vcpu.synced_to = now
        if vcpu.state is not VcpuState.RUNNING or now <= start:
            return
        elapsed = now - start
        if vcpu.phase is Phase.COMPUTING:
            vcpu.left -= min(elapsed, vcpu.left)
        elif vcpu.phase is Phase.SPINNING:
            vcpu.vm.spin_ns += elapsed

    def arm(self, vcpu: Vcpu) -> None:
        """(Re)arms the running vCPU's one guest event, cancelling the pending one (`Core::arm`)."""
        vcpu.gen += 1
        if vcpu.state is not VcpuState.RUNNING:
            return
        start = max(self.now(), vcpu.run_from)
        if vcpu.phase is Phase.READY:
            at = start
        elif vcpu.phase is Phase.COMPUTING:
            at = start + vcpu.left
        else:
            return  # a user-mode ticket waiter spins until the unlock hands it the lock
        if at < FOREVER:
            event = At(self.env, at, GUEST_PRIORITY)
            gen = vcpu.gen
            event.callbacks.append(lambda _: self.guest_event(vcpu, gen))

    def guest_event(self, vcpu: Vcpu, gen: int) -> None:
        if vcpu.gen != gen:
            return  # cancelled: not an event
        self.result.events += 1
        self.sync(vcpu)
        if vcpu.phase is Phase.COMPUTING and vcpu.left == 0:
            vcpu.phase = Phase.READY
        if vcpu.phase is not Phase.READY:
            self.arm(vcpu)
            return
        self.advance(vcpu)
        if vcpu.state is VcpuState.BLOCKED:  # it exited: its pCPU decides again now
            assert vcpu.last_pcpu is not None
            self.schedule(vcpu.last_pcpu)

    def advance(self, vcpu: Vcpu) -> None:
        """Runs the thread's steps until it computes, spins or exits (`Core::advance`)."""
        while True:
            step = vcpu.step
            if step is Step.HOG:
                vcpu.step = Step.EXIT
                self.compute(vcpu, FOREVER)
                return
            if step in (Step.COMPUTE, Step.CRITICAL_SECTION):
                vcpu.step = Step.LOCK if step is Step.COMPUTE else Step.UNLOCK
                duration = self.config.compute_us if step is Step.COMPUTE else self.config.cs_us
                if duration > 0:
                    self.compute(vcpu, duration * 1_000)
                    return
            elif step is Step.LOCK:
                vcpu.step = Step.CRITICAL_SECTION
                if self.lock_holder is None and not self.lock_waiters:
                    self.lock_holder, vcpu.holds_lock = vcpu, True
                else:
                    self.lock_waiters.append(vcpu)
                    vcpu.phase = Phase.SPINNING
                    self.arm(vcpu)
                    return
            elif step is Step.UNLOCK:
                self.unlock(vcpu)
                vcpu.iterations_left -= 1
                vcpu.step = Step.COMPUTE if vcpu.iterations_left > 0 else Step.EXIT
            else:
                vcpu.phase = Phase.EXITED
                vcpu.vm.alive -= 1
                if vcpu.vm.alive == 0:
                    vcpu.vm.finished_at_ns = self.now()
                self.sync(vcpu)
                vcpu.gen += 1
                self.set_state(vcpu, VcpuState.BLOCKED)
                return

    def compute(self, vcpu: Vcpu, duration_ns: int) -> None:
        vcpu.phase, vcpu.left = Phase.COMPUTING, duration_ns
        self.arm(vcpu)

    def unlock(self, vcpu: Vcpu) -> None:
        """Ticket unlock: the next in line owns the lock now, running or not."""
        vcpu.holds_lock = False
        self.lock_holder = self.lock_waiters.popleft() if self.lock_waiters else None
        waiter = self.lock_holder
        if waiter is None:
            return
        waiter.holds_lock = True
        if waiter.state is not VcpuState.RUNNING:
            waiter.vm.lock_waiter_preemptions += 1
        self.sync(waiter)
        waiter.phase = Phase.READY
        self.arm(waiter)


def simulate(config: ModelConfig) -> ModelResult:
    """Runs the model of `config` to its horizon."""
    return RoundRobinModel(config).run()
