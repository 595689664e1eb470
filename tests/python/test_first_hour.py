"""A researcher's first hour (issue 57) and policy misuse (issue 58 item 5): the host says which
hypervisor it runs, a lost vCPU or a crawling slice fails the run, the queue helpers, parameters
on `--policy` and `--set`, sweeps mixing policy-specific keys, and summaries of every metric."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import vsched
from vsched import FifoQueue, VtimeQueue

from helpers import TINY_SCENARIO, CliResult

Cli = Callable[..., CliResult]

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "scenarios/papers/seed004/lu-dual-con.toml"
EXAMPLES = ROOT / "examples/policies"


def short(path: Path, horizon_s: float = 0.3) -> str:
    """A scenario file's text with a short horizon."""
    return vsched.Scenario.from_file(path).with_overrides({"run.horizon_s": horizon_s}).to_toml()


def write_policy(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "mine.py"
    path.write_text(
        "import threading\nimport vsched\nfrom vsched import Decision, FifoQueue\n"
        "class Base(vsched.Policy):\n"
        "    def __init__(self):\n"
        "        self.queue = FifoQueue()\n"
        "    def vcpu_insert(self, cx, v):\n"
        "        self.queue.push(v)\n"
        "    def wake(self, cx, v):\n"
        "        self.queue.push(v)\n"
        "        cx.kick_idle_from(0)\n"
        "    def pick_next(self, cx, pcpu, prev):\n"
        "        if prev is not None and cx.is_runnable(prev):\n"
        "            self.queue.push(prev)\n"
        "        v = self.queue.pop()\n"
        "        return Decision.idle() if v is None else Decision.run(v, 1_000_000)\n" + body,
        encoding="utf-8",
    )
    return path


# ---------------------------------------------------------------------------------------------
# 57.1: the host's hypervisor


def test_a_xen_papers_host_boots_domain_0_under_a_python_policy_that_declares_no_hypervisor() -> None:
    report = vsched.run(short(PAPER), policy=f"{EXAMPLES / 'round_robin.py'}:RoundRobin")
    names = [vm["name"] for vm in report["runs"][0]["vms"]]
    assert names[0] == "dom0", names
    # The same under credit, whose hypervisor is Xen's: one host, whatever the policy.
    credit = vsched.run(short(PAPER), policy="credit")
    assert [vm["name"] for vm in credit["runs"][0]["vms"]] == names


def test_a_policy_of_the_other_hypervisor_is_refused_naming_the_key(cli: Cli) -> None:
    result = cli("run", PAPER, "--policy", "cfs")
    assert result.exit_code == 2
    assert len(result.stderr_lines) == 1
    line = result.stderr_lines[0]
    assert line.startswith(
        "error: host.hypervisor: the scenario's host runs xen, but policy cfs is a kvm scheduler"
    )
    assert "--set host.hypervisor=kvm" in line
    # As the message says: on a KVM host it runs, without a Domain-0.
    report = vsched.run(short(PAPER), policy="cfs", overrides={"host.hypervisor": "kvm"})
    assert "dom0" not in [vm["name"] for vm in report["runs"][0]["vms"]]


# ---------------------------------------------------------------------------------------------
# 57.2: the stall watchdog and the queues


def test_a_policy_that_drops_prev_fails_the_run_naming_the_vcpu_policy_and_time(
    cli: Cli, tmp_path: Path
) -> None:
    path = write_policy(
        tmp_path,
        "class Drops(Base):\n"
        "    def pick_next(self, cx, pcpu, prev):\n"
        "        v = self.queue.pop()\n"
        "        return Decision.idle() if v is None else Decision.run(v, 1_000_000)\n",
    )
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO.replace("horizon_s = 0.5", "horizon_s = 10"))
    result = cli("run", scenario, "--policy", f"{path}:Drops", "--set", "run.stall_timeout_s=2")
    assert result.exit_code == 1, result.stderr
    (line,) = result.stderr_lines
    assert f"policy {path}:Drops: stall: vCPU " in line
    # Every vCPU is dropped, so no event follows: the end of the run is where it is seen.
    assert 'vCPU 0 (VM "locker" vCPU 0) has been runnable without running for 9.98' in line
    assert "s at t = 10 s; the stall watchdog ends a run after 2 s" in line
    assert "run.stall_timeout_s" in line


def test_the_stall_bound_is_checked_and_0_turns_it_off(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    result = cli("run", scenario, "--set", "run.stall_timeout_s=-1")
    assert result.exit_code == 2
    assert result.stderr_lines == [
        "error: run.stall_timeout_s: expected 0 (off) or a number of seconds in [0.001, 1000000], got -1"
    ]
    assert cli("run", scenario, "--set", "run.stall_timeout_s=0").exit_code == 0


def test_queues_serve_in_order_and_hold_a_vcpu_once() -> None:
    fifo = FifoQueue()
    assert fifo.push(3) and fifo.push(1) and fifo.push_front(7) and not fifo.push(3)
    assert (fifo.to_list(), len(fifo), 3 in fifo, fifo.peek()) == ([7, 3, 1], 3, True, 7)
    assert fifo.remove(3) and not fifo.remove(3)
    assert [fifo.pop(), fifo.pop(), fifo.pop()] == [7, 1, None]
    by_vtime = VtimeQueue()
    assert by_vtime.push(4, 50) and by_vtime.push(2, 10) and by_vtime.push(9, 50) and not by_vtime.push(2, 0)
    assert (by_vtime.peek(), by_vtime.vtime(9), by_vtime.remove(9), by_vtime.vtime(9)) == (2, 50, 50, None)
    assert [by_vtime.pop(), by_vtime.pop(), by_vtime.pop()] == [2, 4, None]


WEIGHTED_HOGS = """\
[host]
pcpus = 2
[scheduler]
name = "rr"
[[vm]]
name = "light"
vcpus = 2
[vm.workload]
kind = "cpu_hog"
[[vm]]
name = "heavy"
vcpus = 2
weight = 512
[vm.workload]
kind = "cpu_hog"
[run]
horizon_s = 1
"""


def test_the_short_fair_share_example_shares_by_weight() -> None:
    report = vsched.run(WEIGHTED_HOGS, policy=f"{EXAMPLES / 'fair_share.py'}:FairShare")
    vms = {vm["name"]: vm for vm in report["runs"][0]["vms"]}
    assert vms["heavy"]["cpu_s"] / vms["light"]["cpu_s"] == pytest.approx(2.0, rel=0.05)


# ---------------------------------------------------------------------------------------------
# 58.5: policy misuse


def test_a_zero_slice_fails_the_run_instead_of_crawling(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path,
        "class Zero(Base):\n"
        "    def pick_next(self, cx, pcpu, prev):\n"
        "        d = Base.pick_next(self, cx, pcpu, prev)\n"
        "        return Decision.idle() if d.next is None else Decision.run(d.next, 0)\n",
    )
    with pytest.raises(vsched.PolicyError) as raised:
        vsched.run(TINY_SCENARIO.replace("horizon_s = 0.5", "horizon_s = 2"), policy=f"{path}:Zero")
    assert str(raised.value).startswith(
        f"policy {path}:Zero: unusable decision at t=0 ns: pCPU 0 was given a slice of 0 ns"
    )
    assert "expected at least 10000 ns" in str(raised.value)


def test_a_cx_used_from_another_thread_is_a_one_line_policy_error(cli: Cli, tmp_path: Path) -> None:
    path = write_policy(
        tmp_path,
        "class Threads(Base):\n"
        "    def init(self, cx):\n"
        "        seen = []\n"
        "        worker = threading.Thread(target=lambda: seen.append(self.try_now(cx)), name='helper')\n"
        "        worker.start()\n"
        "        worker.join()\n"
        "    def try_now(self, cx):\n"
        "        try:\n"
        "            return cx.now()\n"
        "        except RuntimeError as error:\n"
        "            return error\n",
    )
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    result = cli("run", scenario, "--policy", f"{path}:Threads")
    assert result.exit_code == 1, result.stderr
    assert "panic" not in result.stderr.lower()
    (line,) = result.stderr_lines
    assert line.startswith(
        f"error: policy failure (a bug in the policy, not in the scenario): policy {path}:Threads: "
        'init: cx was used from thread "helper", not the thread of the callback that received it at t=0 ns'
    ), line


# ---------------------------------------------------------------------------------------------
# 57.4: parameters


def test_run_set_and_policy_parameters_change_the_run_as_the_scenario_would(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    edited = tmp_path / "edited.toml"
    edited.write_text(
        TINY_SCENARIO.replace('name = "credit"', 'name = "credit"\ntslice_ms = 5').replace(
            "pcpus = 2", "pcpus = 3"
        )
    )

    def report(*args: object) -> dict[str, Any]:
        result = cli("run", *args, "--json")
        assert result.exit_code == 0, result.stderr
        doc: dict[str, Any] = json.loads(result.stdout)
        for run in doc["runs"]:
            run["wall_s"] = 0
        return doc

    expected = report(edited)
    assert report(scenario, "--set", "scheduler.tslice_ms=5", "--set", "host.pcpus=3") == expected
    assert report(scenario, "--policy", "credit(tslice_ms=5)", "--set", "host.pcpus=3") == expected
    assert (
        report(scenario, "--policy", "credit(tslice_ms=5)", "--set", "host.pcpus=3", "--jobs", "2")
        == expected
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--set", "scheduler.tslice_ms"),
            "error: --set: expected KEY=VALUE (e.g. scheduler.tslice_ms=10), got 'scheduler.tslice_ms'",
        ),
        (("--policy", "credit(tslice_ms=5"), "error: --policy: \"credit(tslice_ms=5\" does not end with ')'"),
        (("--policy", "credit(tslice_ms=0)"), "error: scheduler.tslice_ms: "),
    ],
)
def test_bad_parameters_are_one_line_naming_the_field(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    result = cli("run", scenario, *args)
    assert result.exit_code == 2
    assert len(result.stderr_lines) == 1 and result.stderr_lines[0].startswith(message), result.stderr


def test_a_sweep_applies_a_policy_specific_key_where_it_exists_and_says_so_once(
    cli: Cli, tmp_path: Path
) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    out = tmp_path / "out"
    result = cli(
        "sweep",
        scenario,
        "--policy",
        "credit,rr",
        "--set",
        "scheduler.tslice_ms=10,30",
        "--out",
        out,
        "--jobs",
        "1",
    )
    assert result.exit_code == 0, result.stderr
    notes = [line for line in result.stderr_lines if line.startswith("note:")]
    assert notes == [
        "note: policy rr has no parameter tslice_ms: it runs at its defaults, once for every value of "
        "scheduler.tslice_ms (its set.scheduler.tslice_ms is null)"
    ]
    rows = vsched.frames.read_sweep(out).runs()
    points = sorted((r["policy"], r["set.scheduler.tslice_ms"]) for r in rows.to_dict("records"))
    assert [(p, None if t != t else t) for p, t in points] == [("credit", 10), ("credit", 30), ("rr", None)]
    # A key no policy of the sweep takes is still a mistake.
    typo = cli("sweep", scenario, "--policy", "credit,rr", "--set", "scheduler.tslise_ms=10", "--out", out)
    assert typo.exit_code == 2


class Local(vsched.Policy):
    """A policy class defined at the top level of this file: a sweep's workers load it from here."""

    def __init__(self) -> None:
        self.queue = FifoQueue()

    def vcpu_insert(self, cx: vsched.Cx, v: int) -> None:
        self.queue.push(v)

    def wake(self, cx: vsched.Cx, v: int) -> None:
        self.queue.push(v)
        cx.kick_idle_from(0)

    def yield_(self, cx: vsched.Cx, v: int, why: vsched.YieldReason) -> None:
        if isinstance(why, vsched.YieldReason.PauseLoopExit):
            cx.resched_here()

    def pick_next(self, cx: vsched.Cx, pcpu: int, prev: int | None) -> vsched.Decision:
        if prev is not None and cx.is_runnable(prev):
            self.queue.push(prev)
        v = self.queue.pop()
        return vsched.Decision.idle() if v is None else vsched.Decision.run(v, 10_000_000)


def test_run_sweep_takes_policy_classes_or_says_why_not_in_one_line() -> None:
    results = vsched.run_sweep(TINY_SCENARIO, policies=[Local, "rr"], jobs=1)
    runs = results.runs()
    assert len(runs) == 2
    # Local is rr's algorithm with rr's slice: the same numbers.
    by_policy = {r["policy"]: r for r in runs.to_dict("records")}
    local = next(v for k, v in by_policy.items() if k.endswith(":Local"))
    assert local["vm.locker.cpu_s"] == by_policy["rr"]["vm.locker.cpu_s"]

    class Nested(Local):
        pass

    with pytest.raises(
        vsched.ScenarioError, match=r"^policies\[0\]: class .*Nested is defined in .*not at the top level"
    ):
        vsched.run_sweep(TINY_SCENARIO, policies=[Nested])
    with pytest.raises(
        vsched.ScenarioError,
        match=r"^policies\[1\]: expected a policy name or a vsched.Policy subclass, got 5$",
    ):
        vsched.run_sweep(TINY_SCENARIO, policies=["rr", 5])  # type: ignore[list-item]


# ---------------------------------------------------------------------------------------------
# 57.5: summaries of every metric


def test_a_summary_over_repetitions_keeps_every_metric(cli: Cli, tmp_path: Path) -> None:
    report = vsched.run(short(PAPER, 1.0), policy="cs", reps=2)
    host, one = report["summary"]["host"], report["runs"][0]["host"]
    for metric in ("migrations", "co_launches", "co_ipis", "sched_invocations"):
        assert f"{metric}_mean" in host and f"{metric}_std" in host, metric
    assert one["policy_counters"], "cs counts its co-scheduling"
    assert set(host["policy_counters"]) == {
        f"{k}_{s}" for k in one["policy_counters"] for s in ("mean", "std")
    }
    vm = report["summary"]["vms"][1]
    assert "co_launches_mean" in vm and "costart_skew_us_mean" in vm
    scenario = tmp_path / "lu.toml"
    scenario.write_text(short(PAPER, 1.0))
    table = cli("run", scenario, "--policy", "cs", "--reps", "2").stdout
    assert "co_launches" in table and "migrations" in table and "policy_counters." in table
