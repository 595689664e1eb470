"""Policies written in Python (`vsched.Policy`, run through the PyO3 bridge): the same results
as the Rust policy they port, the same validation of decisions, the user's traceback when a
callback raises, and one-line errors for a policy that cannot be loaded."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import vsched
from vsched import Cx, Decision, YieldReason
from vsched.runs import apply_overrides

from helpers import TINY_SCENARIO, CliResult, without_wall_clock

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "policies"
ROUND_ROBIN = f"{EXAMPLES / 'round_robin.py'}:RoundRobin"
CREDIT_LITE = f"{EXAMPLES / 'credit_lite.py'}:CreditLite"
Cli = Callable[..., CliResult]

# Guests that yield: pause-loop exits of kernel spinlock waiters beside a hog on 2 pCPUs.
YIELDING_SCENARIO = """\
name = "yields"
[host]
pcpus = 2
[scheduler]
name = "rr"
slice_us = 2000
[[vm]]
name = "locks"
vcpus = 3
[vm.workload]
kind = "spinlock"
iterations = 2000
[[vm]]
name = "hog"
vcpus = 1
[vm.workload]
kind = "cpu_hog"
[run]
horizon_s = 1
"""


def comparable(report: dict[str, Any]) -> str:
    """The report as text without its wall-clock fields and the policy's name."""
    report = without_wall_clock(report)
    report.pop("policy")
    return json.dumps(report, sort_keys=True)


def short(scenario: str, horizon_s: float) -> str:
    return apply_overrides(
        vsched.read_scenario(ROOT / "scenarios" / scenario), [("run.horizon_s", horizon_s)]
    )


# ---------------------------------------------------------------------------------------------
# Same results as Rust


@pytest.mark.parametrize(
    ("text", "exercised"),
    [
        (short("lhp-demo.toml", 3.0), "lock_holder_preemptions"),
        (YIELDING_SCENARIO, "ple_exits"),
        (short("kvm/pv-tlb-flush-and-yield.toml", 1.0), "ple_exits"),
    ],
    ids=["lhp-demo", "yields", "kvm-tlb"],
)
def test_the_python_port_of_rr_reports_exactly_what_rr_reports(text: str, exercised: str) -> None:
    rust = vsched.run(text, policy="rr", seed=4, reps=2)
    python = vsched.run(text, policy=ROUND_ROBIN, seed=4, reps=2)
    assert python["policy"] == ROUND_ROBIN
    assert comparable(python) == comparable(rust)
    # The scenario reaches the callbacks it is here for (yield_ for the pause-loop exits).
    assert sum(vm[exercised] for run in rust["runs"] for vm in run["vms"]) > 0


def test_scheduler_keys_are_the_classes_keyword_arguments() -> None:
    rust = vsched.run(YIELDING_SCENARIO, seed=2)
    python_text = YIELDING_SCENARIO.replace('name = "rr"', f'name = "{ROUND_ROBIN}"')
    assert comparable(vsched.run(python_text, seed=2)) == comparable(rust)
    # The slice reached the class: at rr's default slice both differ from the 2 ms run.
    default = vsched.run(YIELDING_SCENARIO.replace("slice_us = 2000\n", ""), seed=2)
    assert comparable(default) != comparable(rust)


def test_a_class_passed_to_the_api_runs_as_its_file_does() -> None:
    from_file = vsched.run(YIELDING_SCENARIO, policy=ROUND_ROBIN, seed=2)
    round_robin = vsched.policy.load_class(ROUND_ROBIN, "/")
    from_class = vsched.run(YIELDING_SCENARIO, policy=round_robin, seed=2)
    assert from_class["policy"].endswith(":RoundRobin")
    assert comparable(from_class) == comparable(from_file)


def test_the_stateful_example_is_deterministic_and_its_timer_fires_on_time() -> None:
    text = TINY_SCENARIO.replace('name = "credit"', f'name = "{CREDIT_LITE}"')
    first = vsched.run(text, seed=3, reps=2, check=True)
    assert without_wall_clock(first) == without_wall_clock(vsched.run(text, seed=3, reps=2, check=True))
    assert comparable(first) != comparable(vsched.run(text, policy="rr", seed=3, reps=2))
    for run in first["runs"]:
        counters = run["host"]["policy_counters"]
        # The accounting timer re-arms itself every 30 ms from time 0, to the nanosecond.
        assert counters == {"credit_lite.accountings": int(run["sim_s"] * 1e9) // 30_000_000 + 1}


def test_the_stateful_example_shares_the_cpu_by_weight() -> None:
    text = """\
[host]
pcpus = 2
[scheduler]
name = "credit_lite.py:CreditLite"
[[vm]]
name = "heavy"
vcpus = 2
weight = 512
[vm.workload]
kind = "cpu_hog"
[[vm]]
name = "light"
vcpus = 2
weight = 256
[vm.workload]
kind = "cpu_hog"
[run]
horizon_s = 3
"""
    path = EXAMPLES / "weights.toml"
    try:
        # A relative path in a scenario file is relative to the file's directory.
        path.write_text(text, encoding="utf-8")
        vms = {vm["name"]: vm for vm in vsched.run(path)["runs"][0]["vms"]}
    finally:
        path.unlink()
    # 2:1 by weight; credit is granted per 30 ms period, so a period's rounding is the slack.
    assert vms["heavy"]["cpu_s"] / vms["light"]["cpu_s"] == pytest.approx(2.0, rel=0.05)


# ---------------------------------------------------------------------------------------------
# Failures of the policy: exit 1, with the user's traceback


def policy_file(tmp_path: Path, body: str) -> Path:
    """A policy module: round robin (class `Base`) and the test's classes in `body`."""
    path = tmp_path / "mine.py"
    path.write_text(
        "from collections import deque\n"
        "import vsched\n"
        "from vsched import Decision\n"
        "class Base(vsched.Policy):\n"
        "    def __init__(self):\n"
        "        self.queue = deque()\n"
        "    def vcpu_insert(self, cx, v):\n"
        "        self.queue.append(v)\n"
        "    def wake(self, cx, v):\n"
        "        self.queue.append(v)\n"
        "        cx.kick_idle_from(0)\n"
        "    def pick_next(self, cx, pcpu, prev):\n"
        "        if prev is not None and cx.is_runnable(prev):\n"
        "            self.queue.append(prev)\n"
        "        return Decision.run(self.queue.popleft(), 1_000_000) if self.queue else Decision.idle()\n"
        + body,
        encoding="utf-8",
    )
    return path


RAISES_LATER = """\
class RaisesLater(Base):
    def tick_period_ns(self):
        return 1_000_000
    def tick(self, cx, pcpu):
        if cx.now() >= 5_000_000:
            self.helper(cx)
    def helper(self, cx):
        return 1 // 0
"""


def test_an_exception_in_a_callback_is_a_policy_error_with_the_users_traceback(tmp_path: Path) -> None:
    path = policy_file(tmp_path, RAISES_LATER)
    with pytest.raises(vsched.PolicyError) as raised:
        vsched.run(TINY_SCENARIO, policy=f"{path}:RaisesLater")
    message = str(raised.value)
    assert message.startswith(f"policy {path}:RaisesLater: tick raised ZeroDivisionError: integer division")
    # Ticks drift apart (as Xen's do), so the first at or after 5 ms is not at 5 ms sharp.
    assert re.search(rf"\({re.escape(str(path))}, line 23\) at t=5\d{{6}} ns$", message), message
    assert isinstance(raised.value.__cause__, ZeroDivisionError)
    lines = raised.value.policy_traceback.splitlines()  # type: ignore[attr-defined]
    assert lines[0] == "Traceback (most recent call last):"
    assert f'File "{path}", line 21, in tick' in lines[1]
    assert f'File "{path}", line 23, in helper' in "\n".join(lines)
    assert lines[-1] == "ZeroDivisionError: integer division or modulo by zero"


def test_the_command_line_prints_the_traceback_then_one_error_line(cli: Cli, tmp_path: Path) -> None:
    path = policy_file(tmp_path, RAISES_LATER)
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    result = cli("run", scenario, "--policy", f"{path}:RaisesLater")
    assert result.exit_code == 1
    assert result.stderr_lines[0] == "Traceback (most recent call last):"
    assert result.stderr_lines[-2] == "ZeroDivisionError: integer division or modulo by zero"
    assert result.stderr_lines[-1].startswith(
        "error: policy failure (a bug in the policy, not in the scenario): "
        f"policy {path}:RaisesLater: tick raised ZeroDivisionError"
    )
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "class Five(Base):\n    def pick_next(self, cx, pcpu, prev):\n        return 5\n",
            "pick_next returned 5 at t=0 ns; expected a vsched.Decision "
            "(Decision.run(v, slice_ns) or Decision.idle())",
        ),
        # The simulator's own validation, with the message it gives a Rust policy (dispatch.rs).
        (
            "class Five(Base):\n    def pick_next(self, cx, pcpu, prev):\n"
            "        return Decision.run(99, 1_000_000)\n",
            "unusable decision: pCPU 0 was given vCPU 99, which does not exist",
        ),
        (
            "class Five(Base):\n    def pick_next(self, cx, pcpu, prev):\n"
            "        return Decision.run(0, 1_000_000)\n",
            "unusable decision at t=0 ns: pCPU 1 was given vCPU 0 in state Running(0)",
        ),
        (
            "class Five(Base):\n    def check(self, cx):\n        return 'the queue is upside down'\n",
            "policy invariant broken at t=0 ns on host 0: the queue is upside down",
        ),
        (
            "class Five(Base):\n    def check(self, cx):\n        cx.resched(0)\n",
            "policy invariant broken at t=0 ns on host 0: check raised RuntimeError: cx.resched: "
            "check(cx) may only read the world, not act on it",
        ),
    ],
    ids=["not-a-decision", "no-such-vcpu", "running-elsewhere", "check", "check-acts"],
)
def test_a_bad_decision_gets_the_message_a_rust_policy_gets(tmp_path: Path, body: str, message: str) -> None:
    path = policy_file(tmp_path, body)
    with pytest.raises(vsched.PolicyError) as raised:
        vsched.run(TINY_SCENARIO, policy=f"{path}:Five", check=True)
    assert str(raised.value).startswith(f"policy {path}:Five: {message}")


def test_a_cx_kept_past_its_callback_refuses_to_be_used(tmp_path: Path) -> None:
    body = (
        "class Keeps(Base):\n"
        "    def init(self, cx):\n"
        "        self.kept = cx\n"
        "    def wake(self, cx, v):\n"
        "        self.kept.now()\n"
    )
    path = policy_file(tmp_path, body)
    with pytest.raises(
        vsched.PolicyError, match="wake raised RuntimeError: cx is only valid during the callback"
    ):
        vsched.run(TINY_SCENARIO, policy=f"{path}:Keeps")


def test_cx_checks_ids_and_names_the_method(tmp_path: Path) -> None:
    body = "class Far(Base):\n    def init(self, cx):\n        cx.state(cx.n_vcpus())\n"
    path = policy_file(tmp_path, body)
    with pytest.raises(
        vsched.PolicyError, match=r"init raised IndexError: cx.state: vCPU 4 does not exist; expected"
    ):
        vsched.run(TINY_SCENARIO, policy=f"{path}:Far")


def test_ctrl_c_in_a_callback_interrupts_the_run() -> None:
    class Interrupted(vsched.Policy):
        def vcpu_insert(self, cx: Cx, v: int) -> None:
            raise KeyboardInterrupt

        def wake(self, cx: Cx, v: int) -> None:
            pass

        def pick_next(self, cx: Cx, pcpu: int, prev: int | None) -> Decision:
            return Decision.idle()

    with pytest.raises(KeyboardInterrupt):
        vsched.run(TINY_SCENARIO, policy=Interrupted)


# ---------------------------------------------------------------------------------------------
# What a policy sees


class Recorder(vsched.Policy):
    """Round robin that records what the bridge hands it."""

    seen: dict[str, Any] = {}

    def __init__(self) -> None:
        self.queue: list[int] = []

    def init(self, cx: Cx) -> None:
        domains = cx.domains()
        Recorder.seen.update(
            pcpus=cx.n_pcpus(),
            vcpus=cx.n_vcpus(),
            domains=[(d.name, d.vcpus, d.first_vcpu, d.weight, d.vm_type) for d in domains],
            vcpus_of=list(cx.vcpus_of(1)),
            here=cx.here(),
            state=cx.state(0),
            draws=[cx.rng().gen_range(0, 10) for _ in range(3)],
        )

    def vcpu_insert(self, cx: Cx, v: int) -> None:
        self.queue.append(v)

    def wake(self, cx: Cx, v: int) -> None:
        self.queue.append(v)
        cx.kick_idle_from(0)

    def yield_(self, cx: Cx, v: int, why: YieldReason) -> None:
        Recorder.seen["yield"] = (why, cx.here() is not None)
        cx.resched_here()

    def pick_next(self, cx: Cx, pcpu: int, prev: int | None) -> Decision:
        if prev is not None and cx.is_runnable(prev):
            self.queue.append(prev)
        if prev is not None:
            Recorder.seen.setdefault("prev_state", cx.state(prev))
        return Decision.run(self.queue.pop(0), 2_000_000) if self.queue else Decision.idle()


def test_the_policy_sees_the_rust_types_under_their_rust_names() -> None:
    Recorder.seen = {}
    vsched.run(YIELDING_SCENARIO, policy=Recorder, seed=1)
    seen = Recorder.seen
    assert seen["pcpus"] == 2 and seen["vcpus"] == 4
    assert seen["domains"] == [("locks", 3, 0, 256, vsched.VmType.Hit), ("hog", 1, 3, 256, vsched.VmType.Hit)]
    assert seen["vcpus_of"] == [3]
    assert seen["here"] is None
    assert seen["state"] == vsched.VcpuState.Runnable()
    assert all(0 <= d < 10 for d in seen["draws"])
    assert seen["yield"] == (YieldReason.PauseLoopExit(), True)
    assert isinstance(seen["prev_state"], (vsched.VcpuState.Running, vsched.VcpuState.Blocked))
    # Seeded: the same draws in another run of the same seed.
    draws = seen["draws"]
    vsched.run(YIELDING_SCENARIO, policy=Recorder, seed=1)
    assert Recorder.seen["draws"] == draws


# ---------------------------------------------------------------------------------------------
# Policies that cannot be loaded: exit 2, one line naming where the policy was given


@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        ("missing.py:X", None, "--policy: missing.py: no such file (looked in "),
        ("mine.py:Nope", "", "--policy: mine.py: no class 'Nope'; expected one of Base"),
        (
            "mine.py:Plain",
            "class Plain:\n    pass\n",
            "--policy: mine.py:Plain: expected a subclass of vsched.Policy, got class Plain",
        ),
        (
            "mine.py:Half",
            "class Half(vsched.Policy):\n    def wake(self, cx, v):\n        pass\n",
            "--policy: mine.py:Half: does not define vcpu_insert, pick_next, which every policy must",
        ),
        ("mine.py:Base", "def broken(:\n", "--policy: mine.py: SyntaxError: "),
        (
            "mine.py:Base",
            "raise RuntimeError('no')\n",
            "--policy: mine.py: loading it raised RuntimeError: no (mine.py, line 16)",
        ),
        (
            "mine.py:Base",
            "Base.hypervisor = 'hyper-v'\n",
            "--policy: mine.py:Base.hypervisor: expected one of generic, xen, kvm",
        ),
        (
            "mine.txt:Base",
            None,
            "--policy: 'mine.txt:Base': expected a Python policy as path/to/file.py:ClassName",
        ),
    ],
    ids=[
        "no-file",
        "no-class",
        "not-a-policy",
        "no-pick-next",
        "syntax",
        "raises-at-import",
        "hypervisor",
        "not-py",
    ],
)
def test_a_policy_that_cannot_be_loaded_is_bad_input(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str | None, expected: str
) -> None:
    if body is not None:
        policy_file(tmp_path, body)
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    monkeypatch.chdir(tmp_path)
    result = cli("run", scenario, "--policy", name)
    assert result.exit_code == 2
    assert len(result.stderr_lines) == 1, result.stderr
    assert result.stderr_lines[0].startswith(f"error: {expected}"), result.stderr


def test_a_scenario_naming_a_policy_names_its_scheduler_table(cli: Cli, tmp_path: Path) -> None:
    policy_file(tmp_path, "")
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO.replace('name = "credit"', 'name = "mine.py:Base"\nslice = 3'))
    result = cli("validate", scenario)
    assert result.exit_code == 2
    assert result.stderr_lines == [
        "error: scheduler: Base(slice=3) raised TypeError: Base.__init__() got an unexpected keyword "
        "argument 'slice'"
    ]
    scenario.write_text(TINY_SCENARIO.replace('name = "credit"', 'name = "mine.py:Other"'))
    assert cli("validate", scenario).stderr_lines == [
        "error: scheduler.name: mine.py: no class 'Other'; expected one of Base"
    ]
    scenario.write_text(TINY_SCENARIO.replace('name = "credit"', 'name = "mine.py:Base"'))
    assert cli("validate", scenario).exit_code == 0


def test_admit_refuses_a_scenario_with_the_policys_reason(cli: Cli, tmp_path: Path) -> None:
    body = (
        "class Narrow(Base):\n"
        "    def admit(self, pcpus, domains):\n"
        "        wide = [d.name for d in domains if d.vcpus > pcpus]\n"
        "        return f'VM {wide[0]} is wider than the host' if wide else None\n"
    )
    policy_file(tmp_path, body)
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO.replace('name = "credit"', 'name = "mine.py:Narrow"'))
    assert cli("validate", scenario).exit_code == 0
    scenario.write_text(
        TINY_SCENARIO.replace('name = "credit"', 'name = "mine.py:Narrow"').replace(
            "vcpus = 2", "vcpus = 3", 1
        )
    )
    assert cli("validate", scenario).stderr_lines == [
        "error: scheduler.name: policy mine.py:Narrow cannot run this scenario: "
        "VM locker is wider than the host"
    ]


PUBLISHES_QUEUE = """\
class PublishesQueue(Base):
    def pick_next(self, cx, pcpu, prev):
        decision = Base.pick_next(self, cx, pcpu, prev)
        assert cx.tracing()
        cx.trace_counter("queue", vsched.CounterOf.host(), len(self.queue))
        cx.trace_counter(
            "picked", vsched.CounterOf.pcpu(pcpu), -1 if decision.next is None else decision.next
        )
        return decision
"""


def test_a_python_policy_publishes_trace_counters_like_a_rust_one(tmp_path: Path) -> None:
    path = policy_file(tmp_path, PUBLISHES_QUEUE)
    trace = tmp_path / "trace.json"
    vsched.run(TINY_SCENARIO, policy=f"{path}:PublishesQueue", trace=trace)
    events = json.loads(trace.read_text())["traceEvents"]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert any(name.startswith("queue") for name in counters), counters
    assert any(name.startswith("picked") for name in counters), counters
    # Untraced, the same policy is told so (`tracing()` is False) and its counters go nowhere.
    with pytest.raises(vsched.PolicyError, match="AssertionError"):
        vsched.run(TINY_SCENARIO, policy=f"{path}:PublishesQueue")
